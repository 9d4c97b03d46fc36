"""What a developer strategy is: pure logic that proposes queries and learns from the replies.

A strategy never touches SimPy. The developer process (:mod:`biasleak.agents.developer`) asks it
for its next :data:`Action` - submit models (:class:`Submit`), wait until a simulated time
(:class:`Wait`) or stop (:class:`Stop`) - sends what it proposes, and hands every reply back
through :meth:`Strategy.on_answer` or :meth:`Strategy.on_refusal`. An attacking strategy keeps
its current guess of everyone's protected attribute in :attr:`Strategy.estimate` (with a
confidence per person), which the simulation scores against the truth that the strategy never
sees.

A strategy is built from its configuration (a pydantic model with a ``kind`` tag, so scenario
files can name it) and a :class:`DeveloperContext`: the public data, the base model's predictions
on the audit set, and a seeded random generator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from biasleak.agents.public import PublicData, PublicView

__all__ = [
    "Action",
    "DeveloperContext",
    "Estimate",
    "Stop",
    "Strategy",
    "StrategyConfig",
    "Submit",
    "Wait",
]


class StrategyConfig(BaseModel):
    """Base of every strategy's configuration: unknown keys are errors, numbers must be numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


@dataclass(frozen=True, eq=False)
class Submit:
    """Send these models for this metric, after ``prepare_hours`` of preparation (training)."""

    predictions: NDArray[np.float64] = field(repr=False)
    """Shape (m, n): m models' outputs on the audit set."""
    metric: str = "sp"
    prepare_hours: float = 0.0
    label: str = ""
    """What the query is for, for the log (e.g. ``"probe"``, ``"batch 3/8"``)."""


@dataclass(frozen=True)
class Wait:
    """Do nothing until simulated time ``until``."""

    until: float


@dataclass(frozen=True)
class Stop:
    """The strategy is done."""

    reason: str


Action = Submit | Wait | Stop


@dataclass(frozen=True, eq=False)
class Estimate:
    """A strategy's current guess of every audit-set person's protected attribute."""

    attribute: NDArray[np.int8] = field(repr=False)
    """(n,) guessed attribute, 1 = advantaged."""
    confidence: NDArray[np.float64] = field(repr=False)
    """(n,) margin from the decision threshold, in units of the threshold (0 = a coin flip)."""
    models_used: int = 0
    """How many answered models the guess rests on."""
    method: str = ""
    """Decoder that produced it."""


@dataclass(frozen=True, eq=False)
class DeveloperContext:
    """What a developer starts with. Nothing here holds the protected attribute."""

    public: PublicData
    """Features and labels of the training split and the audit set."""
    base_predictions: NDArray[np.float64] = field(repr=False)
    """The base model h_0's outputs on the audit set, shape (n,)."""
    rng: np.random.Generator = field(repr=False)
    """This developer's own random stream."""
    proxy: PublicView | None = field(default=None, repr=False)
    """An external labelled sample for proxy models: features with the protected attribute as
    ``labels`` (e.g. a public survey). Never the audit set. Given only to strategies that ask."""

    @property
    def n(self) -> int:
        return len(self.public.audit)


class Strategy(ABC):
    """A developer's plan. Subclasses set :attr:`kind` and implement :meth:`next_action`."""

    kind: ClassVar[str] = ""

    def __init__(self, config: StrategyConfig, context: DeveloperContext) -> None:
        self.config = config
        """The validated configuration."""
        self.context = context
        """Public data, base predictions and random stream."""
        self.estimate: Estimate | None = None
        """Current guess of the protected attribute (attacks only)."""
        self.estimate_version = 0
        """Incremented at every new estimate, so the process knows when to report it."""
        self.last_retry_after: float | None = None
        """The ``retry_after`` of the latest refusal (set by the developer process)."""

    @abstractmethod
    def next_action(self, now: float) -> Action:
        """What to do next, at simulated time ``now``."""

    @abstractmethod
    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        """The last submitted query was answered with ``values`` (one per model)."""

    def on_refusal(self, reason: str, detail: str, now: float) -> None:  # noqa: B027
        """The last submitted query was refused (default: accept it and move on)."""

    def report(self) -> dict[str, Any]:
        """JSON-safe facts for the developer's final log event."""
        return {}

    def _set_estimate(self, estimate: Estimate) -> None:
        self.estimate = estimate
        self.estimate_version += 1
