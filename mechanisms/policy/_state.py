"""What a policy decides about, remembers and returns: the audit set, one request, the state
kept between requests, and the decision.

The :class:`AuditSet` is the compliance side's private data (the protected attribute and the
labels). A :class:`Request` is one query as the policy sees it. :class:`PolicyState` holds
everything a policy remembers between queries (rate-limit buckets, ledgers, cache, recent models,
suspensions); the compliance agent owns it and :func:`~biasleak.mechanisms.policy.decide` updates
it only for answered queries. A :class:`Decision` is the outcome; its ``internal`` part (exact
values, noise scale) must never reach a developer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms._validation import as_binary
from biasleak.mechanisms.accounting import LedgerBook
from biasleak.mechanisms.metrics import ON_POSITIVES

if TYPE_CHECKING:
    from biasleak.mechanisms.policy._stage import Pending, Refused
    from biasleak.mechanisms.policy.budget import Budget

__all__ = [
    "PUBLISHER",
    "REQUEST_KINDS",
    "AuditSet",
    "CacheOrigin",
    "Decision",
    "ModelHistory",
    "PolicyState",
    "ReleaseFacts",
    "Request",
]

REQUEST_KINDS: Final[tuple[str, ...]] = ("query", "service", "publication")
"""What a release can be asked for: ``query`` (fairness metrics of submitted models),
``service`` (a private fair-learning service run on the audit set) or ``publication`` (figures
the compliance team publishes, e.g. an audit for a regulator: they reach every reader). Every
request, whatever its kind, passes the same pipeline; a stage says which kinds it applies to
(:attr:`~biasleak.mechanisms.policy.StageConfig.KINDS`)."""

PUBLISHER: Final = "(compliance team)"
"""The identity and organisation of a ``publication`` request: no developer can bear it (a
developer's id is letters, digits, ``_``, ``.`` and ``-``), so no developer's suspension, rate
limit or history applies to it."""


@dataclass(frozen=True, eq=False)
class AuditSet:
    """The compliance side's private data: protected attribute and labels of the audit set."""

    protected: NDArray[np.bool_]
    labels: NDArray[np.bool_]

    @classmethod
    def from_arrays(cls, protected: ArrayLike, labels: ArrayLike) -> AuditSet:
        a = as_binary(protected, name="protected")
        y = as_binary(labels, n=a.shape[0], name="labels", require_both=False)
        return cls(a, y)

    @property
    def n(self) -> int:
        return int(self.protected.shape[0])

    @cached_property
    def _sizes(self) -> dict[bool, tuple[int, int]]:
        out = {}
        for among_positives in (False, True):
            a = self.protected[self.labels] if among_positives else self.protected
            n1 = int(np.count_nonzero(a))
            out[among_positives] = (n1, int(a.shape[0]) - n1)
        return out

    def group_sizes(self, metric: str) -> tuple[int, int]:
        """(N1, N0), or (N11, N10) among y = 1 for the EO metrics (computed once per set)."""
        return self._sizes[metric in ON_POSITIVES]


class ReleaseRun(Protocol):
    """What ends the pipeline of a request that is released by its own run (a ``service``
    request, a ``publication``) in place of the noise stage.

    The compliance side builds one per request (it holds the attribute; the policy does not know
    what a service or a publication computes). :meth:`admit` reads the submission (the
    always-on validation of such a request), :meth:`run` releases it once every stage has passed
    it; both return a refusal or ``None``, and neither may touch the policy state.
    """

    @property
    def cost(self) -> tuple[float, float]:
        """(epsilon, delta) one run costs."""
        ...

    def admit(self, q: Pending) -> Refused | None:
        """Read the submission: set ``q.h`` to the models it carries, shape (k, n), k = 0 or 1
        (the oracle learner's request carries none; a publication carries the model it
        publishes figures of); refuse a request that cannot be served."""
        ...

    def run(self, q: Pending) -> Refused | None:
        """Run the service (or compute the publication); put what its readers receive (and what
        to log) in ``q.result``."""
        ...


@dataclass(frozen=True, eq=False)
class Request:
    """One request as the policy sees it: a metric query, a service request or a publication."""

    query_id: str
    identity: str
    organization: str
    metric: str
    """The metric asked for; for a service request, the service's name; for a publication,
    what it publishes."""
    predictions: Any
    """As sent: validated by :func:`~biasleak.mechanisms.policy.decide` (the service's own
    submission for a service request)."""
    digests: tuple[bytes, ...] | None = None
    """Per-model digests (:func:`~biasleak.mechanisms.policy.model_digest` of each float64 row)
    when the caller already has them; the cache computes them otherwise."""
    kind: str = "query"
    """One of :data:`REQUEST_KINDS`."""
    run: ReleaseRun | None = None
    """For a ``service`` request or a ``publication``: what releases it (the end of its
    pipeline)."""


class ModelHistory:
    """The last ``window`` answered models of one organisation, in a ring buffer (float32)."""

    def __init__(self, window: int, n: int) -> None:
        self._buffer = np.empty((window, n), dtype=np.float32)
        self._size = 0
        self._next = 0

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[NDArray[np.float32]]:
        start = self._next - self._size
        for k in range(self._size):
            yield self._buffer[(start + k) % self._buffer.shape[0]]

    def rows(self) -> NDArray[np.float32]:
        """The stored models (in buffer order; order does not matter for a distance check)."""
        return self._buffer[: self._size]

    def add(self, rows: NDArray[np.float64]) -> None:
        window = self._buffer.shape[0]
        for row in rows[-window:]:
            self._buffer[self._next] = row
            self._next = (self._next + 1) % window
            self._size = min(self._size + 1, window)


@dataclass(frozen=True)
class ReleaseFacts:
    """How some models were released: what the ceilings of a reader need to know of it."""

    mechanism: str
    epsilon: float
    """Epsilon of the models together (per model for a cache entry's origin)."""
    delta: float
    bounding: str
    sampler: str
    noise_scale: float
    """Noise scale of one answer (INTERNAL for the smooth-sensitivity mechanisms)."""

    def times(self, k: int) -> ReleaseFacts:
        """The facts of ``k`` models released alike (epsilon and delta add up)."""
        return replace(self, epsilon=self.epsilon * k, delta=self.delta * k)


@dataclass(frozen=True)
class CacheOrigin:
    """The first release of a cached value: to whom, and its privacy facts per model.

    A cached answer to another identity is that identity's release reaching a new reader: the
    ceilings of the reader count it (it is free for the budget, not for the reader's knowledge).
    """

    identity: str
    organization: str
    facts: ReleaseFacts
    """The release of this one model's share (epsilon and delta per model)."""


@dataclass
class PolicyState:
    """Everything a policy remembers between queries (owned by the compliance agent)."""

    tokens: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Rate-limit buckets: key -> (tokens, time of last refill)."""
    ledgers: dict[int, LedgerBook] = field(default_factory=dict)
    """One ledger book per budget stage (by position among the budget stages)."""
    cache: dict[tuple[str, bytes], Any] = field(default_factory=dict)
    """(metric, model digest) -> released value (for a service: (service, request digest) ->
    its result)."""
    cache_origin: dict[tuple[str, bytes], CacheOrigin] = field(default_factory=dict)
    """(metric, model digest) -> who the value was first released to, and how."""
    history: dict[str, ModelHistory] = field(default_factory=dict)
    """Organisation -> its recently answered models (for near-duplicate checks)."""
    suspended_identities: set[str] = field(default_factory=set)
    suspended_organizations: set[str] = field(default_factory=set)

    def ledger_book(self, index: int, budget: Budget) -> LedgerBook:
        """The ledger book of the ``index``-th budget stage (created on first use)."""
        if index not in self.ledgers:
            self.ledgers[index] = LedgerBook(
                budget.epsilon, budget.delta, budget.composition, scope=budget.scope
            )
        return self.ledgers[index]


@dataclass(frozen=True, eq=False)
class Decision:
    """The outcome for one query. ``internal`` must never reach a developer."""

    query_id: str
    answered: bool
    values: NDArray[np.float64] | None = None
    """Released values (shape (m,), or (m, 2) for eodds) when answered."""
    mechanism: str = "exact"
    epsilon_charged: float = 0.0
    delta_charged: float = 0.0
    cached: tuple[bool, ...] = ()
    sampler: str = "safe"
    """How the noise was drawn (public, like the mechanism)."""
    reason: str | None = None
    """Refusal reason code when refused (a key of
    :data:`~biasleak.mechanisms.policy.REFUSAL_REASONS`)."""
    detail: str = ""
    retry_after: float | None = None
    models: int = 0
    """Number of models in the query (1 for an unreadable one, and for a service request)."""
    internal: dict[str, Any] = field(default_factory=dict)
    """Exact values, noise scale, sensitivity: compliance-side log only."""
    result: Any = None
    """For an answered service request: what its run produced (the service desk's outcome)."""
    unchecked: tuple[str, ...] = ()
    """Stages that apply to the request's kind but found nothing to read in it (the refuse
    rules on a service request that submits no model): said in the log, never silent."""
