"""Developer strategies: honest model selection and the Attribute-Reveal attacks.

Each strategy kind has a configuration model (a pydantic model tagged by ``kind``) and a class;
:data:`STRATEGIES` maps kind names to both, and scenario files build their discriminated union
from it. Strategies are pure (no SimPy); see :mod:`biasleak.agents.strategies.base`.
"""

from __future__ import annotations

import difflib

from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Estimate,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
    Wait,
)
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
)
from biasleak.agents.strategies.honest import HonestSelection, HonestSelectionConfig

__all__ = [
    "STRATEGIES",
    "Action",
    "DeveloperContext",
    "Estimate",
    "Stop",
    "Strategy",
    "StrategyConfig",
    "Submit",
    "Wait",
    "build_strategy",
]

STRATEGIES: dict[str, tuple[type[StrategyConfig], type[Strategy]]] = {
    "honest_selection": (HonestSelectionConfig, HonestSelection),
    "compressed_sensing": (CompressedSensingConfig, CompressedSensing),
}
"""Strategy kind -> (configuration model, strategy class)."""


def build_strategy(config: StrategyConfig, context: DeveloperContext) -> Strategy:
    """Instantiate the strategy a configuration describes."""
    kind = getattr(config, "kind", None)
    if kind not in STRATEGIES:
        close = difflib.get_close_matches(str(kind), list(STRATEGIES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"strategy kind must be one of {list(STRATEGIES)}; got {kind!r}{hint}")
    return STRATEGIES[kind][1](config, context)
