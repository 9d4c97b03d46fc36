"""Developer strategies: honest model selection and the Attribute-Reveal attacks.

The paper's attacks (section 3): ``single_query`` and ``differencing`` (Examples 1 and 2, targeted),
``full_rank`` (Theorem 3, Algorithm 1), ``compressed_sensing`` (Theorem 5, Algorithm 2),
``abs_sp_partition`` (Theorem 7), ``eo_reveal`` and ``equalized_odds_reveal`` (Remark 5).
The floating-point attack ``fp_probe`` (:mod:`~biasleak.agents.strategies.fp_probe`) reads
one-person answers bit for bit against a naive noise sampler. Adaptive adversaries:
``noise_probe``, ``averaging``, ``evasive``, ``sequential_cs``, ``metric_switching``, ``sybil``,
``budget_aware`` and ``proxy_prior``
(:mod:`~biasleak.agents.strategies.adaptive`, :mod:`~biasleak.agents.strategies.sybil`).
``plugin`` (:mod:`~biasleak.agents.strategies.plugin`) is a strategy written outside the package,
named by file and class or by an installed entry point, which runs in a sandboxed process of its
own (:data:`ISOLATED_KINDS`); the library's own strategies run in the simulation's process.
``request_postprocessing`` and ``request_fair_training``
(:mod:`~biasleak.agents.strategies.fair_services`) are honest: they ask the compliance team for a
private fair-learning service instead of fairness numbers; ``probe_postprocessing`` and
``decode_oracle`` (:mod:`~biasleak.agents.strategies.service_attacks`) attack those services.

Each strategy kind has a configuration model (a pydantic model tagged by ``kind``) and a class;
:data:`STRATEGIES` maps kind names to both, and scenario files build their discriminated union
from it. The class carries the strategy's traits (whether it attacks, needs a proxy, runs
isolated, uses a service: :data:`TRAITS`); :func:`kinds_where` and the views below
(:data:`HONEST_KINDS`, :data:`PROXY_KINDS`, :data:`ISOLATED_KINDS`) are read from them.
Strategies are pure (no SimPy); see :mod:`biasleak.agents.strategies.base`.
"""

from __future__ import annotations

from typing import Final

from biasleak.agents.strategies.adaptive import (
    Averaging,
    AveragingConfig,
    BudgetAware,
    BudgetAwareConfig,
    Evasive,
    EvasiveConfig,
    MetricSwitching,
    MetricSwitchingConfig,
    NoiseProbe,
    NoiseProbeConfig,
    ProxyPrior,
    ProxyPriorConfig,
    SequentialCS,
    SequentialCSConfig,
)
from biasleak.agents.strategies.base import (
    Action,
    AnswerInfo,
    DeveloperContext,
    Estimate,
    RequestService,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
    Wait,
)
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
    EoRevealConfig,
    EqualizedOddsRevealConfig,
)
from biasleak.agents.strategies.fair_services import (
    RequestFairTraining,
    RequestFairTrainingConfig,
    RequestPostprocessing,
    RequestPostprocessingConfig,
)
from biasleak.agents.strategies.fp_probe import FpProbe, FpProbeConfig
from biasleak.agents.strategies.full_rank import FullRank, FullRankConfig
from biasleak.agents.strategies.honest import HonestSelection, HonestSelectionConfig
from biasleak.agents.strategies.partition import AbsSpPartition, AbsSpPartitionConfig
from biasleak.agents.strategies.plugin import PluginConfig, PluginStrategy
from biasleak.agents.strategies.service_attacks import (
    DecodeOracle,
    DecodeOracleConfig,
    ProbePostprocessing,
    ProbePostprocessingConfig,
)
from biasleak.agents.strategies.sybil import SybilConfig, SybilShard, sybil_shards
from biasleak.agents.strategies.targeted import (
    Differencing,
    DifferencingConfig,
    SingleQuery,
    SingleQueryConfig,
)
from biasleak.mechanisms._validation import did_you_mean

__all__ = [
    "HONEST_KINDS",
    "ISOLATED_KINDS",
    "PROXY_KINDS",
    "SERVICE_USER_KINDS",
    "STRATEGIES",
    "TRAITS",
    "Action",
    "AnswerInfo",
    "DeveloperContext",
    "Estimate",
    "FpProbe",
    "FpProbeConfig",
    "PluginConfig",
    "PluginStrategy",
    "RequestService",
    "Stop",
    "Strategy",
    "StrategyConfig",
    "Submit",
    "Wait",
    "build_strategies",
    "build_strategy",
    "kinds_where",
]

STRATEGIES: dict[str, tuple[type[StrategyConfig], type[Strategy]]] = {
    "honest_selection": (HonestSelectionConfig, HonestSelection),
    "single_query": (SingleQueryConfig, SingleQuery),
    "differencing": (DifferencingConfig, Differencing),
    "full_rank": (FullRankConfig, FullRank),
    "compressed_sensing": (CompressedSensingConfig, CompressedSensing),
    "abs_sp_partition": (AbsSpPartitionConfig, AbsSpPartition),
    "eo_reveal": (EoRevealConfig, CompressedSensing),
    "equalized_odds_reveal": (EqualizedOddsRevealConfig, CompressedSensing),
    "noise_probe": (NoiseProbeConfig, NoiseProbe),
    "averaging": (AveragingConfig, Averaging),
    "evasive": (EvasiveConfig, Evasive),
    "sequential_cs": (SequentialCSConfig, SequentialCS),
    "metric_switching": (MetricSwitchingConfig, MetricSwitching),
    "sybil": (SybilConfig, SybilShard),
    "budget_aware": (BudgetAwareConfig, BudgetAware),
    "proxy_prior": (ProxyPriorConfig, ProxyPrior),
    "fp_probe": (FpProbeConfig, FpProbe),
    "plugin": (PluginConfig, PluginStrategy),
    "request_postprocessing": (RequestPostprocessingConfig, RequestPostprocessing),
    "request_fair_training": (RequestFairTrainingConfig, RequestFairTraining),
    "probe_postprocessing": (ProbePostprocessingConfig, ProbePostprocessing),
    "decode_oracle": (DecodeOracleConfig, DecodeOracle),
}
"""Strategy kind -> (configuration model, strategy class)."""


MISSING_TRAIT: Final = (
    "strategy {kind!r} ({cls}) must say whether it attacks: set ATTACKS = True or False on the "
    "class (see Strategy's traits)"
)


def _checked(registry: dict[str, tuple[type[StrategyConfig], type[Strategy]]]) -> None:
    for kind, (_, cls) in registry.items():
        if not isinstance(getattr(cls, "ATTACKS", None), bool):
            raise TypeError(MISSING_TRAIT.format(kind=kind, cls=cls.__name__))


_checked(STRATEGIES)


def kinds_where(trait: str, value: bool = True) -> frozenset[str]:
    """The registered strategy kinds whose class has ``trait`` (``ATTACKS``, ``NEEDS_PROXY``,
    ``ISOLATED``, ``USES_SERVICE``) equal to ``value``."""
    if trait not in TRAITS:
        raise ValueError(f"a strategy trait is one of {list(TRAITS)}; got {trait!r}")
    return frozenset(k for k, (_, cls) in STRATEGIES.items() if getattr(cls, trait) is value)


TRAITS: Final = ("ATTACKS", "NEEDS_PROXY", "ISOLATED", "USES_SERVICE")
"""The traits every registered strategy class carries (:class:`Strategy`)."""

PROXY_KINDS: Final = kinds_where("NEEDS_PROXY")
"""Strategy kinds that need an external labelled sample in their context (``proxy``)."""

ISOLATED_KINDS: Final = kinds_where("ISOLATED")
"""Strategy kinds whose code comes from outside the package and runs in a sandboxed process.
The red team leaves them out of ``attacks: all`` (it runs one only when a scenario lists it)."""

HONEST_KINDS: Final = kinds_where("ATTACKS", False)
"""Strategy kinds that do not try to reveal the protected attribute (honest developers)."""

SERVICE_USER_KINDS: Final = kinds_where("USES_SERVICE")
"""Strategy kinds that ask the compliance team for a fair-learning service."""


def build_strategy(config: StrategyConfig, context: DeveloperContext) -> Strategy:
    """Instantiate the strategy a configuration describes (one identity)."""
    kind = getattr(config, "kind", None)
    if kind not in STRATEGIES:
        hint = did_you_mean(str(kind), list(STRATEGIES))
        raise ValueError(f"strategy kind must be one of {list(STRATEGIES)}; got {kind!r}{hint}")
    if kind == "sybil":
        raise ValueError("a sybil strategy drives several identities: use build_strategies")
    return STRATEGIES[kind][1](config, context)


def build_strategies(
    config: StrategyConfig, context: DeveloperContext, identity: str
) -> list[tuple[str, Strategy]]:
    """The (identity, strategy) pairs one scenario developer becomes: one, or k for a Sybil."""
    if isinstance(config, SybilConfig):
        return sybil_shards(config, context, identity)
    return [(identity, build_strategy(config, context))]
