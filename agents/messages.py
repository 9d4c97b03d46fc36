"""The messages agents exchange, and the mailboxes that carry them with a delay.

Agents never call each other: a developer puts a :class:`Query` in the compliance agent's
mailbox together with a reply event, and waits on that event (or a timeout). The compliance agent
answers by triggering the reply event with an :class:`Answer` or a :class:`Refusal`; a refusal is
a message, not an exception across processes. The external auditor sends :class:`Alert`
messages to the compliance agent, which may answer a developer's next query with a ``suspended``
refusal, and may send a developer a :class:`Notice` (a warning).

Besides metric queries, a developer may ask for a private fair-learning service
(:mod:`biasleak.agents.services`) with a :class:`ServiceRequest`; the compliance agent replies with
a :class:`ServiceResult` (the public outcome of the service) or a :class:`Refusal`.

Time is simulated hours (floats). A :class:`Mailbox` is a :class:`simpy.Store` with a delivery
latency: :meth:`Mailbox.send` starts a tiny process that waits the latency and then puts the
message, so the sender is never blocked.

Nothing here carries the protected attribute, and an :class:`Answer` never carries the noise
scale of a data-dependent mechanism (it depends on the group sizes; publishing it would break the
privacy guarantee). The compliance side logs it in its own internal event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
import simpy
from numpy.typing import NDArray

from biasleak.mechanisms.policy import REFUSAL_REASONS as POLICY_REFUSALS

__all__ = [
    "REFUSAL_REASONS",
    "Alert",
    "Answer",
    "Envelope",
    "Mailbox",
    "Notice",
    "Query",
    "Refusal",
    "ServiceRequest",
    "ServiceResult",
]

REFUSAL_REASONS: Final[dict[str, str]] = {
    **POLICY_REFUSALS,
    "timeout": "no reply came in time (recorded by the developer, not sent by compliance)",
}
"""Reason codes a refusal can carry -> what they mean: the policy's codes
(:data:`biasleak.mechanisms.policy.REFUSAL_REASONS`) and ``timeout``, which a developer records
when its query got no reply in time. Strategies match on these codes, never on the detail."""


@dataclass(frozen=True, eq=False)
class Query:
    """A developer's request for a fairness metric of one model or a batch of m models."""

    query_id: str
    """Unique id, ``"<sender>-<number>"``."""
    sender: str
    """Developer identity."""
    organization: str
    """The developer's organisation (budgets and rate limits may be shared across it)."""
    sent_at: float
    """Simulated time (hours) the query was sent."""
    metric: str
    """Metric name (``sp``, ``abs_sp``, ``eo``, ...)."""
    predictions: NDArray[np.float64] = field(repr=False)
    """Model outputs on the audit set, shape (n,) or (m, n); validated by the compliance side."""
    epsilon: float | None = None
    """Optional per-model epsilon the developer asks for (the policy may ignore it)."""
    digests: tuple[bytes, ...] | None = field(default=None, repr=False)
    """Per-model content digests (:func:`biasleak.mechanisms.policy.model_digest`), computed once
    by the sending process so the compliance cache need not hash the models again; a compliance
    side that does not run its senders' code recomputes them."""

    @property
    def models(self) -> int:
        """Number of models in the query (m), or 1 for malformed input that is not 2-D."""
        arr = np.asarray(self.predictions)
        return int(arr.shape[0]) if arr.ndim == 2 else 1


@dataclass(frozen=True, eq=False)
class Answer:
    """The compliance agent's answer: one value per model (a row of two for ``eodds``)."""

    query_id: str
    """The query answered."""
    values: NDArray[np.float64] = field(repr=False)
    """Released values, shape (m,) (or (m, 2) for equalized odds)."""
    mechanism: str
    """Name of the release mechanism (public)."""
    epsilon_charged: float
    """Epsilon charged for this answer (0 when served from the cache)."""
    cached: tuple[bool, ...] = ()
    """For each model, whether its value came from the cache (free)."""
    answered_at: float = 0.0
    """Simulated time the answer was sent."""
    delta_charged: float = 0.0
    """Delta charged for this answer (0 for pure eps-DP mechanisms and cached values)."""
    sampler: str = "safe"
    """How the noise was drawn (public policy): ``safe`` (grid release) or ``naive`` (floats)."""


@dataclass(frozen=True)
class Refusal:
    """A refused query: nothing was charged."""

    query_id: str
    """The query refused."""
    reason: str
    """One of :data:`REFUSAL_REASONS`."""
    detail: str
    """Human-readable explanation naming what was wrong and what is allowed."""
    retry_after: float | None = None
    """Simulated time from which the same query could succeed (rate limits), else None."""
    answered_at: float = 0.0
    """Simulated time the refusal was sent."""


@dataclass(frozen=True, eq=False)
class ServiceRequest:
    """A developer's request for a private fair-learning service (:mod:`~biasleak.agents.services`).

    For ``dp_postprocessing`` the submission is the base model's 0/1 predictions on the audit set;
    for ``dp_oracle_learner`` it is only the learner chosen from the service's menu (the learner
    runs on the compliance side, because its per-person costs depend on the attribute).
    """

    query_id: str
    """Unique id, ``"<sender>-<number>"`` (shared with the sender's queries)."""
    sender: str
    """Developer identity."""
    organization: str
    """The developer's organisation (budgets may be shared across it)."""
    sent_at: float
    """Simulated time (hours) the request was sent."""
    service: str
    """``dp_postprocessing`` or ``dp_oracle_learner``."""
    base_predictions: NDArray[np.int8] | None = field(default=None, repr=False)
    """Post-processing: the base model's 0/1 predictions on the audit set, shape (n,)."""
    learner: str | None = None
    """Oracle learner: the learner the developer picks from the menu (``least_squares``)."""


@dataclass(frozen=True, eq=False)
class ServiceResult:
    """The public outcome of a fair-learning service: a function of noisy statistics only."""

    query_id: str
    """The request answered."""
    service: str
    """Which service ran."""
    epsilon_charged: float
    """Epsilon charged (``inf`` for the non-private service)."""
    delta_charged: float
    """Delta charged."""
    disparate_treatment: bool
    """Whether the delivered model needs the attribute at decision time (then the compliance
    team applies it as a scoring service)."""
    mixing: NDArray[np.float64] | None = field(default=None, repr=False)
    """Post-processing: ``P[Y' = 1 | Yhat = yhat, A = a]``, shape (2, 2)."""
    coefficients: NDArray[np.float64] | None = field(default=None, repr=False)
    """Oracle learner: (T, d) weights of the mixture's A-blind linear classifiers, over the
    encoded features (the training split's encoding, which both sides can rebuild)."""
    intercepts: NDArray[np.float64] | None = field(default=None, repr=False)
    """Oracle learner: (T,) intercepts."""
    noisy_violations: NDArray[np.float64] | None = field(default=None, repr=False)
    """Oracle learner: (T, 1, 2) per-round released violations (FPR gap, TPR gap)."""
    weights: NDArray[np.float64] | None = field(default=None, repr=False)
    """Oracle learner: (T,) probability of each round's classifier in the mixture (computed
    from the released violations and public data only: post-processing)."""
    answered_at: float = 0.0
    """Simulated time the result was sent."""


@dataclass(frozen=True)
class Alert:
    """An external auditor's finding about a developer or organisation."""

    developer: str
    """Developer identity the evidence points to."""
    organization: str
    """Its organisation."""
    detector: str
    """Which detector fired."""
    evidence: str
    """A short summary of the evidence (counts, distances, query ids)."""
    recommended_action: str
    """What the auditor recommends (``log_only``, ``warn``, ``suspend_identity``,
    ``suspend_organization``)."""
    raised_at: float = 0.0
    """Simulated time the alert was raised."""


@dataclass(frozen=True)
class Notice:
    """A message from the compliance agent to a developer outside a reply (e.g. a warning)."""

    recipient: str
    """Developer identity."""
    kind: str
    """``warning`` or ``suspended``."""
    detail: str
    """What happened."""
    sent_at: float = 0.0
    """Simulated time."""


@dataclass(frozen=True, eq=False)
class Envelope:
    """A message in a mailbox, with the event to trigger with the reply (if one is expected)."""

    message: Query | ServiceRequest | Alert | Notice
    """The message."""
    reply: simpy.Event | None = None
    """Triggered by the receiver with an Answer or a Refusal."""


class Mailbox:
    """A :class:`simpy.Store` of envelopes that delivers each one after a latency."""

    def __init__(self, env: simpy.Environment, owner: str, *, latency: float = 0.0) -> None:
        if latency < 0:
            raise ValueError(f"latency must be >= 0 hours; received {latency!r}")
        self.env = env
        """The simulation environment."""
        self.owner = owner
        """Who reads this mailbox."""
        self.latency = float(latency)
        """Delivery delay in simulated hours."""
        self.store: simpy.Store = simpy.Store(env)
        """The underlying store of delivered envelopes."""

    def send(self, envelope: Envelope) -> None:
        """Deliver ``envelope`` after the latency, without blocking the sender."""
        if self.latency == 0.0:
            self.store.put(envelope)
        else:
            self.env.process(self._deliver(envelope))

    def _deliver(self, envelope: Envelope):  # type: ignore[no-untyped-def]
        yield self.env.timeout(self.latency)
        yield self.store.put(envelope)

    def reply(self, event: simpy.Event, message: Answer | ServiceResult | Refusal) -> None:
        """Trigger a reply event after the latency (replies travel as slowly as requests)."""
        if self.latency == 0.0:
            event.succeed(message)
        else:
            self.env.process(self._reply(event, message))

    def _reply(self, event: simpy.Event, message: Answer | ServiceResult | Refusal):  # type: ignore[no-untyped-def]
        yield self.env.timeout(self.latency)
        if not event.triggered:
            event.succeed(message)
