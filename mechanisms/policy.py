"""Answering policies: the compliance team's decision for one query, as a pure function.

A policy is a set of stages. Whatever order a scenario lists them in, they run in the order a
careful compliance team would apply them, so that nothing is charged for a query that is then
refused and nothing is answered before it is checked:

1. **validate** (always): the metric is allowed; predictions are numbers in [0, 1], finite, of
   shape (n,) or (m, n) with n the audit set size; at most ``max_models`` models.
2. **suspended?** (always): identities and organisations suspended after an alert are refused.
3. **rate_limit**: a token bucket per identity or organisation holding ``per_day`` models, refilled
   continuously over a simulated day; a query needs one token per model.
4. **cache lookup** (with a ``cache`` stage): a model asked before (same metric, identical
   predictions) gets the same released value again, free: re-sending it is post-processing of an
   earlier release. Only the remaining models go on.
5. **refuse rules**: ``min_support`` refuses models that accept fewer than k people, or reject
   fewer than k (a model "accepts" person j when h_j >= 0.5), which stops the single-person
   queries of Example 1; ``near_duplicate`` refuses models whose L1 distance
   ``sum_j |h_j - h'_j|`` (for 0/1 models, the number of people they disagree on) to an earlier
   answered model of the same organisation, or to another model of the same batch, is below a
   threshold - the differencing pair of Example 2 is at distance 1 (a flipped decision) or
   ``|1 - 2 h_j|`` (a flipped probability).
6. **budget check**: every ``budget`` stage's ledger must afford the release.
7. **exact metric**, 8. **noise** (one ``noise`` stage; none means exact answers),
   9. **output bounding** (part of the noise stage), 10. **charge**, 11. **cache store**.

A refused query is charged nothing and leaves the cache and budgets unchanged (a rate-limit token
is spent only by answered models). Time comes in as ``now`` (simulated hours) and randomness as a
:class:`numpy.random.Generator`; all mutable state lives in a :class:`PolicyState` the caller
owns. The protected attribute and labels come in as an :class:`AuditSet` held by the compliance
side only.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms import metrics
from biasleak.mechanisms._validation import (
    as_binary,
    as_predictions,
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from biasleak.mechanisms.accounting import LedgerBook
from biasleak.mechanisms.release import BOUNDINGS, MECHANISMS, SAMPLERS, release
from biasleak.mechanisms.sensitivity import SENSITIVITY_METRICS

__all__ = [
    "AuditSet",
    "Budget",
    "Cache",
    "Decision",
    "MinSupport",
    "ModelHistory",
    "NearDuplicate",
    "Noise",
    "Policy",
    "PolicyState",
    "RateLimit",
    "Request",
    "decide",
]

HOURS_PER_DAY: Final = 24.0


@dataclass(frozen=True)
class RateLimit:
    """At most ``per_day`` models per simulated day per identity or organisation."""

    per_day: int
    """Bucket capacity and refill per day, in models."""
    scope: Literal["identity", "organization"] = "identity"
    """Who shares a bucket."""


@dataclass(frozen=True)
class MinSupport:
    """Refuse models that accept (h >= 0.5) fewer than ``k`` people or reject fewer than ``k``."""

    k: int


@dataclass(frozen=True)
class NearDuplicate:
    """Refuse models within L1 distance ``threshold`` (in people) of an earlier one."""

    threshold: float
    """L1 distance below which two models are near-duplicates (0/1 models: people differing)."""
    window: int = 1000
    """How many of the organisation's most recent answered models to compare with."""

    def __post_init__(self) -> None:
        check_positive(self.threshold, name="threshold")
        check_int(self.window, name="window", minimum=1)


@dataclass(frozen=True)
class Budget:
    """A privacy budget per identity or organisation."""

    epsilon: float
    delta: float = 0.0
    scope: Literal["identity", "organization"] = "identity"
    composition: Literal["basic", "advanced", "kov"] = "basic"


@dataclass(frozen=True)
class Noise:
    """How answers are released: a mechanism from :mod:`biasleak.mechanisms.release`."""

    mechanism: str
    """One of :data:`biasleak.mechanisms.release.MECHANISMS`."""
    epsilon: float = math.inf
    """Privacy loss per model answered (``per="model"``) or per query (``per="batch"``)."""
    delta: float = 0.0
    """Failure probability per model or per query (for smooth_laplace and gaussian)."""
    per: Literal["model", "batch"] = "model"
    """Whether epsilon is per model (a batch of m costs m x epsilon) or per query."""
    bounding: str = "raw"
    """Output bounding (one of :data:`biasleak.mechanisms.release.BOUNDINGS`)."""
    sampler: str = "safe"
    """How noise is drawn (one of :data:`biasleak.mechanisms.release.SAMPLERS`): ``safe`` releases
    on a power-of-two grid with exactly sampled noise; ``naive`` adds floating-point noise (for
    demonstrating the floating-point attack only)."""

    def __post_init__(self) -> None:
        check_choice(self.mechanism, MECHANISMS, name="mechanism")
        check_choice(self.bounding, BOUNDINGS, name="bounding")
        check_choice(self.sampler, SAMPLERS, name="sampler")
        check_choice(self.per, ("model", "batch"), name="per")
        eps = check_epsilon(self.epsilon)
        if self.mechanism in ("smooth_laplace", "gaussian") and not math.isinf(eps):
            check_delta(self.delta)
        else:
            check_delta(self.delta, allow_zero=True)


@dataclass(frozen=True)
class Cache:
    """Answer a model asked before with its earlier released value, at no charge."""


@dataclass(frozen=True)
class Policy:
    """A compliance policy: allowed metrics and its stages."""

    metrics: tuple[str, ...] = ("sp", "abs_sp", "eo", "abs_eo")
    """Metrics developers may ask for."""
    rate_limits: tuple[RateLimit, ...] = ()
    min_support: MinSupport | None = None
    near_duplicate: NearDuplicate | None = None
    budgets: tuple[Budget, ...] = ()
    noise: Noise = Noise("exact")
    cache: bool = False
    max_models: int = 10_000
    """Largest batch accepted in one query."""

    def __post_init__(self) -> None:
        for name in self.metrics:
            check_choice(name, metrics.METRICS, name="metrics")
        noisy = self.noise.mechanism != "exact" and not math.isinf(self.noise.epsilon)
        if noisy:
            bad = [m for m in self.metrics if m not in SENSITIVITY_METRICS]
            if bad:
                raise ValueError(
                    f"metrics {bad} have no sensitivity in biasleak, so a policy with noise "
                    f"mechanism {self.noise.mechanism!r} cannot answer them; allowed with noise: "
                    f"{list(SENSITIVITY_METRICS)}"
                )


@dataclass(frozen=True)
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

    def group_sizes(self, metric: str) -> tuple[int, int]:
        """(N1, N0), or (N11, N10) among y = 1 for the EO metrics."""
        if metric in ("eo", "abs_eo"):
            a = self.protected[self.labels]
        else:
            a = self.protected
        n1 = int(np.count_nonzero(a))
        return n1, int(a.shape[0]) - n1


@dataclass(frozen=True, eq=False)
class Request:
    """One query as the policy sees it."""

    query_id: str
    identity: str
    organization: str
    metric: str
    predictions: Any
    """As sent: validated by :func:`decide`."""


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


@dataclass
class PolicyState:
    """Everything a policy remembers between queries (owned by the compliance agent)."""

    tokens: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Rate-limit buckets: key -> (tokens, time of last refill)."""
    ledgers: dict[int, LedgerBook] = field(default_factory=dict)
    """One ledger book per budget stage (by position)."""
    cache: dict[tuple[str, bytes], NDArray[np.float64]] = field(default_factory=dict)
    """(metric, model digest) -> released value."""
    history: dict[str, ModelHistory] = field(default_factory=dict)
    """Organisation -> its recently answered models (for near-duplicate checks)."""
    suspended_identities: set[str] = field(default_factory=set)
    suspended_organizations: set[str] = field(default_factory=set)

    def ledger_book(self, index: int, budget: Budget) -> LedgerBook:
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
    """Refusal reason code when refused."""
    detail: str = ""
    retry_after: float | None = None
    models: int = 0
    """Number of models in the query (1 for an unreadable one)."""
    internal: dict[str, Any] = field(default_factory=dict)
    """Exact values, noise scale, sensitivity: compliance-side log only."""


def _refuse(
    request: Request, reason: str, detail: str, models: int, retry_after: float | None = None
) -> Decision:
    return Decision(
        request.query_id,
        False,
        reason=reason,
        detail=detail,
        models=models,
        retry_after=retry_after,
    )


def _digest(row: NDArray[np.float64]) -> bytes:
    return hashlib.sha256(np.ascontiguousarray(row).data).digest()[:16]


def _bucket_key(limit: RateLimit, request: Request) -> str:
    owner = request.identity if limit.scope == "identity" else request.organization
    return f"{limit.scope}:{owner}:{limit.per_day}"


def _tokens_now(state: PolicyState, key: str, limit: RateLimit, now: float) -> float:
    tokens, last = state.tokens.get(key, (float(limit.per_day), now))
    rate = limit.per_day / HOURS_PER_DAY
    return min(float(limit.per_day), tokens + rate * max(now - last, 0.0))


def _support_problem(h: NDArray[np.float64], k: int) -> str | None:
    accepted = np.count_nonzero(h >= 0.5, axis=1)
    n = h.shape[1]
    for i, acc in enumerate(accepted):
        if acc < k:
            return f"model {i} accepts {int(acc)} people (h >= 0.5); at least {k} required"
        if n - acc < k:
            return f"model {i} rejects {int(n - acc)} people (h < 0.5); at least {k} required"
    return None


def _near_duplicate_problem(
    h: NDArray[np.float64], history: ModelHistory | None, rule: NearDuplicate
) -> str | None:
    n = h.shape[1]
    h32 = h.astype(np.float32)
    past = history.rows() if history is not None else np.empty((0, n), np.float32)
    scratch = np.empty((past.shape[0] + h32.shape[0], n), dtype=np.float32)
    for i in range(h32.shape[0]):
        others = np.concatenate([past, h32[:i]]) if i else past
        if others.shape[0] == 0:
            continue
        diff = scratch[: others.shape[0]]
        np.subtract(others, h32[i], out=diff)
        dist = np.abs(diff, out=diff).sum(axis=1)
        j = int(np.argmin(dist))
        if dist[j] < rule.threshold:
            what = (
                "an earlier model of the organisation"
                if j < past.shape[0]
                else (f"model {j - past.shape[0]} of the same query")
            )
            return (
                f"model {i} is at L1 distance {float(dist[j]):.3g} from {what}; models closer "
                f"than {rule.threshold:g} (in people) are refused"
            )
    return None


def decide(
    policy: Policy,
    request: Request,
    audit: AuditSet,
    state: PolicyState,
    *,
    now: float,
    rng: np.random.Generator,
) -> Decision:
    """Decide one query: answer it (and update ``state``) or refuse it (state unchanged)."""
    # 1. validate
    try:
        raw = np.asarray(request.predictions)
    except (TypeError, ValueError):  # e.g. ragged nested lists
        return _refuse(
            request,
            "invalid",
            "predictions must be an array of shape (n,) or (m, n); received rows of "
            "different lengths or values that are not numbers",
            1,
        )
    models = int(raw.shape[0]) if raw.ndim == 2 else 1
    if request.metric not in policy.metrics:
        return _refuse(
            request,
            "invalid",
            f"metric {request.metric!r} is not answered; allowed: {list(policy.metrics)}",
            models,
        )
    try:
        h = as_predictions(raw)
    except ValueError as err:
        return _refuse(request, "invalid", str(err), models)
    if h.ndim == 1:
        h = h[None, :]
    if h.shape[1] != audit.n:
        return _refuse(
            request,
            "invalid",
            f"predictions must have one value per audit-set person, n = {audit.n}; received "
            f"{h.shape[1]}",
            models,
        )
    m = h.shape[0]
    if m > policy.max_models:
        return _refuse(
            request,
            "invalid",
            f"a query may hold at most {policy.max_models} models; received {m}",
            m,
        )
    # 2. suspended?
    if request.identity in state.suspended_identities:
        return _refuse(request, "suspended", f"identity {request.identity!r} is suspended", m)
    if request.organization in state.suspended_organizations:
        return _refuse(
            request, "suspended", f"organisation {request.organization!r} is suspended", m
        )
    # 3. rate limits (checked now, tokens spent only when answered)
    buckets, short = [], []
    for limit in policy.rate_limits:
        if m > limit.per_day:
            return _refuse(
                request,
                "rate_limited",
                f"a query of {m} models can never fit a limit of {limit.per_day} models per day "
                f"per {limit.scope}; split it",
                m,
            )
    for limit in policy.rate_limits:
        key = _bucket_key(limit, request)
        tokens = _tokens_now(state, key, limit, now)
        if tokens + 1e-9 < m:
            wait = (m - tokens) / (limit.per_day / HOURS_PER_DAY)
            short.append(
                (
                    now + wait,
                    f"{limit.per_day} models per day per {limit.scope}; {tokens:.2f} left now",
                )
            )
        buckets.append((key, tokens))
    if short:  # retry when every limit has refilled enough
        retry, _ = max(short)
        return _refuse(
            request, "rate_limited", "; ".join(d for _, d in short), m, retry_after=retry
        )
    # 4. cache lookup
    digests = [_digest(row) for row in h] if policy.cache else []
    cached = [policy.cache and (request.metric, d) in state.cache for d in digests] or [False] * m
    new_rows = [i for i in range(m) if not cached[i]]
    h_new = h[new_rows]
    # 5. refuse rules on the models not served from the cache
    if policy.min_support is not None and h_new.shape[0]:
        problem = _support_problem(h_new, policy.min_support.k)
        if problem:
            return _refuse(request, "low_support", problem, m)
    if policy.near_duplicate is not None and h_new.shape[0]:
        problem = _near_duplicate_problem(
            h_new, state.history.get(request.organization), policy.near_duplicate
        )
        if problem:
            return _refuse(request, "near_duplicate", problem, m)
    # 6. budget check
    noise = policy.noise
    m_new = h_new.shape[0]
    exact_release = noise.mechanism == "exact" or math.isinf(noise.epsilon)
    if m_new == 0:
        eps_total, delta_total = 0.0, 0.0
    elif exact_release:
        eps_total, delta_total = math.inf, 0.0
    elif noise.per == "model":
        eps_total, delta_total = noise.epsilon * m_new, noise.delta * m_new
    else:
        eps_total, delta_total = noise.epsilon, noise.delta
    ledgers = []
    for index, budget in enumerate(policy.budgets):
        book = state.ledger_book(index, budget)
        ledger = book.ledger(identity=request.identity, organization=request.organization)
        if m_new and not ledger.can_afford(eps_total, delta_total):
            what = (
                "exact answers (epsilon = inf)"
                if math.isinf(eps_total)
                else (
                    f"epsilon {eps_total:g}" + (f", delta {delta_total:g}" if delta_total else "")
                )
            )
            return _refuse(
                request,
                "budget_exhausted",
                f"{what} for {m_new} model(s) exceeds the {budget.scope} budget: spent "
                f"{ledger.spent:g} of {budget.epsilon:g}",
                m,
            )
        ledgers.append(ledger)
    # 7-9. exact metric, noise, bounding
    internal: dict[str, Any] = {"models_new": m_new}
    values_new = np.empty((0,), dtype=np.float64)
    scale = 0.0
    sensitivity = 0.0
    if m_new:
        try:
            exact = np.asarray(
                metrics.evaluate(
                    request.metric, h_new, protected=audit.protected, labels=audit.labels
                ),
                dtype=np.float64,
            )
        except ValueError:  # e.g. EO on an audit set where one group has nobody with y = 1
            return _refuse(
                request, "invalid", f"metric {request.metric!r} is undefined on this audit set", m
            )
        if exact_release:
            values_new = exact.copy()
        else:
            n1, n0 = audit.group_sizes(request.metric)
            rel = release(
                noise.mechanism,
                exact,
                metric=request.metric,
                n1=n1,
                n0=n0,
                m=m_new,
                epsilon=eps_total,
                delta=delta_total,
                rng=rng,
                bounding=noise.bounding,
                sampler=noise.sampler,
            )
            values_new, scale, sensitivity = rel.values, rel.noise_scale, rel.sensitivity
        internal.update(exact=exact, noise_scale=scale, sensitivity=sensitivity)
    # 10. charge (after a successful release)
    for ledger in ledgers:
        if m_new:
            ledger.charge(eps_total, delta_total)
    for key, tokens in buckets:
        state.tokens[key] = (tokens - m, now)
    # 11. cache store, history
    out_shape = (m, *values_new.shape[1:])
    values = np.empty(out_shape, dtype=np.float64)
    for k, i in enumerate(new_rows):
        values[i] = values_new[k]
        if policy.cache:
            state.cache[(request.metric, digests[i])] = values_new[k].copy()
    for i in range(m):
        if cached[i]:
            values[i] = state.cache[(request.metric, digests[i])]
    if policy.near_duplicate is not None and m_new:
        if request.organization not in state.history:
            state.history[request.organization] = ModelHistory(
                policy.near_duplicate.window, h.shape[1]
            )
        state.history[request.organization].add(h_new)
    return Decision(
        request.query_id,
        True,
        values=values,
        mechanism="exact" if exact_release else noise.mechanism,
        epsilon_charged=0.0 if m_new == 0 else eps_total,
        delta_charged=delta_total,
        cached=tuple(bool(c) for c in cached),
        sampler="exact" if exact_release else noise.sampler,
        models=m,
        internal=internal,
    )
