"""What a developer strategy is: pure logic that proposes queries and learns from the replies.

A strategy never touches SimPy. The developer process (:mod:`biasleak.agents.developer`) asks it
for its next :data:`Action` - submit models (:class:`Submit`), ask for a private fair-learning
service (:class:`RequestService`), wait until a simulated time (:class:`Wait`) or stop
(:class:`Stop`) - sends what it proposes, and hands every reply back through
:meth:`Strategy.on_answer`, :meth:`Strategy.on_service_result` or :meth:`Strategy.on_refusal`.
An attacking strategy keeps its current guess of everyone's protected attribute in
:attr:`Strategy.estimate` (with a confidence per person), which the simulation scores against
the truth that the strategy never sees.

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

from biasleak.agents.messages import Refusal, ServiceResult
from biasleak.agents.public import PublicData, PublicView

__all__ = [
    "Action",
    "DeveloperContext",
    "Estimate",
    "RequestService",
    "Stop",
    "Strategy",
    "StrategyConfig",
    "Submit",
    "Wait",
    "forward_answer",
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


@dataclass(frozen=True, eq=False)
class RequestService:
    """Ask the compliance team for a fair-learning service (:mod:`biasleak.agents.services`)."""

    service: str
    """``dp_postprocessing`` or ``dp_oracle_learner``."""
    base_predictions: NDArray[np.int8] | None = field(default=None, repr=False)
    """Post-processing: the base model's 0/1 predictions on the audit set."""
    learner: str | None = None
    """Oracle learner: the learner chosen from the service's menu."""
    prepare_hours: float = 0.0
    """Time spent preparing the submission."""


@dataclass(frozen=True)
class Wait:
    """Do nothing until simulated time ``until``."""

    until: float


@dataclass(frozen=True)
class Stop:
    """The strategy is done."""

    reason: str


Action = Submit | RequestService | Wait | Stop


@dataclass(frozen=True)
class AnswerInfo:
    """The public facts of one answer besides its values: what a developer may know of the noise.

    The mechanism, the privacy parameters charged and the sampler are public policy; the noise
    scale of a data-dependent mechanism is not (it depends on the group sizes).
    """

    mechanism: str
    """Release mechanism (``exact`` for exact answers)."""
    epsilon_charged: float
    """Epsilon charged for the whole answer (``inf`` for exact, 0 when fully cached)."""
    delta_charged: float = 0.0
    """Delta charged for the whole answer."""
    sampler: str = "safe"
    """How the noise was drawn (``safe``, ``naive``, or ``exact``)."""
    cached: tuple[bool, ...] = ()
    """Per model, whether its value came from the cache (charged nothing, drawn earlier)."""

    @property
    def new_models(self) -> int:
        """Models released fresh in this answer (the noise was calibrated to this many)."""
        return sum(1 for c in self.cached if not c)


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
    probability: NDArray[np.float64] | None = field(default=None, repr=False)
    """(n,) the attacker's own probability that its guess for each person is right (a posterior,
    from decoders that model the noise), or None when the method gives none. Evaluations report
    its calibration: of the people given >= 0.9, the share guessed right."""


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
    """A developer's plan. Subclasses set :attr:`kind` and their traits, and implement
    :meth:`next_action`.

    The traits are what the rest of biasleak reads to know what a strategy is (the red team,
    the scenario models, the world and the reports read them from the registry,
    :data:`~biasleak.agents.strategies.STRATEGIES`, never from lists of their own):
    :attr:`ATTACKS` must be said by every registered strategy (or a base it extends); the others
    default to what most strategies are.
    """

    kind: ClassVar[str] = ""
    ATTACKS: ClassVar[bool]
    """Whether the strategy tries to learn the protected attribute: the red team runs it, the
    leakage tables list it. False for an honest developer (its utility is scored instead)."""
    NEEDS_PROXY: ClassVar[bool] = False
    """Whether it needs an external labelled sample in its context (``proxy``)."""
    ISOLATED: ClassVar[bool] = False
    """Whether its code comes from outside biasleak and runs in a sandboxed process (the red team
    runs it only when a scenario lists it)."""
    USES_SERVICE: ClassVar[bool] = False
    """Whether it asks the compliance team for a fair-learning service."""

    def __init__(self, config: StrategyConfig, context: DeveloperContext) -> None:
        self.config = config
        """The validated configuration."""
        self.context = context
        """Public data, base predictions and random stream."""
        self.estimate: Estimate | None = None
        """Current guess of the protected attribute (attacks only)."""
        self.estimate_version = 0
        """Incremented at every new estimate, so the process knows when to report it."""
        self.answer_infos: list[AnswerInfo] = []
        """Public facts of every answer received, in order (see :meth:`receive_answer`)."""

    @abstractmethod
    def next_action(self, now: float) -> Action:
        """What to do next, at simulated time ``now``."""

    @abstractmethod
    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        """The last submitted query was answered with ``values`` (one per model)."""

    def receive_answer(self, values: NDArray[np.float64], info: AnswerInfo, now: float) -> None:
        """Entry point of the developer process: record ``info``, then call :meth:`on_answer`.

        Strategies that model the noise read ``self.answer_infos[-1]`` inside ``on_answer``.
        """
        self.answer_infos.append(info)
        self.on_answer(values, now)

    def on_refusal(self, refusal: Refusal, now: float) -> None:  # noqa: B027
        """The last submitted query was refused (default: accept it and move on).

        Match on ``refusal.reason`` (a code of
        :data:`~biasleak.agents.messages.REFUSAL_REASONS`), never on the human-readable
        ``refusal.detail``; ``refusal.retry_after`` says when a rate-limited query may succeed.
        """

    def on_service_result(self, result: ServiceResult, now: float) -> None:  # noqa: B027
        """The last :class:`RequestService` was served (default: ignore it). Refusals of a
        service request arrive through :meth:`on_refusal`."""

    def deployed_decisions(self, view: Any) -> NDArray[np.int8] | None:
        """The 0/1 decisions of the model an honest developer deploys, on ``view`` (a public
        view), or None (attacks, and a developer that has not chosen yet)."""
        return None

    def close(self) -> None:  # noqa: B027
        """Release what the strategy holds outside the run (default: nothing)."""

    def report(self) -> dict[str, Any]:
        """JSON-safe facts for the developer's final log event."""
        return {}

    def _set_estimate(self, estimate: Estimate) -> None:
        self.estimate = estimate
        self.estimate_version += 1


def forward_answer(
    outer: Strategy, inner: Strategy, values: NDArray[np.float64], now: float, seen: int
) -> int:
    """Hand an answer that ``outer`` received on to the ``inner`` strategy it wraps.

    When the developer process gave ``outer`` the answer's facts (a new entry in
    ``outer.answer_infos`` since ``seen`` of them), the inner strategy receives them too, through
    :meth:`~biasleak.agents.strategies.base.Strategy.receive_answer`; otherwise (a caller that
    hands bare values) it gets the values alone. Returns the new ``seen``.
    """
    if len(outer.answer_infos) > seen:
        inner.receive_answer(values, outer.answer_infos[-1], now)
        return len(outer.answer_infos)
    inner.on_answer(values, now)
    return seen
