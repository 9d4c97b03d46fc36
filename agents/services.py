"""Private fair-learning services: what the compliance team runs when a developer asks for a model.

Answering fairness metrics one query at a time serves an honest developer badly: under a
meaningful privacy budget the noisy answers cannot tell candidate models apart. Jagielski et al.
("Differentially Private Fair Learning", ICML 2019) give two services that deliver an
equalized-odds model instead, differentially private in the protected attribute A. The
mathematics lives in :mod:`biasleak.mechanisms.fair`; this module is the compliance side's desk
that takes a :class:`~biasleak.agents.messages.ServiceRequest`, checks it against the same policy
state as metric queries (suspensions and every budget stage's ledger), runs the service and
charges its privacy cost.

- ``dp_postprocessing`` (:class:`PostProcessingService`): the developer submits its base model's
  0/1 predictions on the audit set; the desk releases the (prediction, group, label) table with
  Laplace noise and returns the mixing probabilities ``P[Y' = 1 | Yhat, A]`` of the derived
  classifier. That classifier reads A at decision time, so the compliance team applies it as a
  scoring service, and the result is flagged as disparate treatment.
- ``dp_oracle_learner`` (:class:`OracleLearnerService`): the private Learner-Auditor game runs
  here, on the audit set's encoded features, with a learner the developer picks from a fixed menu
  (:data:`LEARNERS`: least squares, the seed's learner). The learner cannot run on the developer's
  side: its per-person costs (or sample weights) depend on each person's attribute, so handing
  them over would reveal the group of every person, which is also why an off-the-shelf
  reductions learner cannot be split across the two parties. The developer receives the mixture
  of A-blind linear classifiers and each round's noisy diagnostics.

Checks run in a fixed order, and nothing is charged unless the service ran: a suspended
identity or organisation gets ``suspended``; a service the team does not offer (or a learner off
its menu) ``service_unavailable``; a submission it cannot read ``invalid``; a request that a
rate-limit stage has no token for ``rate_limited`` with its ``retry_after`` (a request is one
model); a cost that some budget stage's ledger cannot afford ``budget_exhausted``. The oracle
learner's noise is calibrated to a public lower bound on every (group, label) cell
(``min_cell_size``); an audit set whose smallest cell is below it is refused with
``service_unavailable`` (that one bit depends on A, and the detail says so), and so is a
configuration the mechanism cannot run (an epsilon too large for the release grid), with the
mechanism's own message. Refuse rules, which read a query's models, and the external auditor,
which reads the query log, do not see service requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.messages import Refusal, ServiceRequest, ServiceResult
from biasleak.mechanisms.fair import dp_postprocess, run_oracle_learner
from biasleak.mechanisms.fair.oracle import CellTooSmall
from biasleak.mechanisms.fair.postprocessing import count_table
from biasleak.mechanisms.policy import Policy, PolicyState

__all__ = [
    "LEARNERS",
    "SERVICE_KINDS",
    "OracleLearnerService",
    "PostProcessingService",
    "ServiceDesk",
    "ServiceOutcome",
    "ServiceSpec",
]

SERVICE_KINDS: Final[tuple[str, ...]] = ("dp_postprocessing", "dp_oracle_learner")
"""The services a compliance team may offer."""

LEARNERS: Final[tuple[str, ...]] = ("least_squares",)
"""The oracle learner's menu: least squares with Laplace noise on ``X^T c`` (the seed's)."""

NOT_OFFERED: Final = "service {service!r} is not offered; offered: {offered}"
NOT_ON_MENU: Final = "learner {learner!r} is not on the menu of {service}; menu: {menu}"
NO_FEATURES: Final = "the compliance team holds no encoded features for the oracle learner"
BAD_BASE: Final = (
    "base_predictions must be n = {n} values in {{0, 1}} (threshold the scores first); received "
    "{received}"
)
TOO_SMALL: Final = (
    "the audit set has a (group, label) cell smaller than the service's public bound "
    "min_cell_size = {bound} (this refusal depends on the attribute)"
)
OVER_BUDGET: Final = "{what} exceeds the {scope} budget: spent {spent:g} of {total:g}"
CANNOT_RUN: Final = "{service} cannot run with this configuration: {error}"


@dataclass(frozen=True)
class _Sender:
    """Who sent a request, as a rate-limit stage reads it."""

    identity: str
    organization: str | None


@dataclass
class _Ticket:
    """A service request as the rate-limit stage sees a query: one model, its sender, the time."""

    request: _Sender
    state: PolicyState
    now: float
    h: NDArray[np.float64] = field(default_factory=lambda: np.zeros((1, 0)))
    scratch: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PostProcessingService:
    """DP post-processing (Jagielski et al. section 3; Hardt, Price and Srebro 2016)."""

    kind: ClassVar[str] = "dp_postprocessing"
    epsilon: float
    """Privacy loss of one run (``inf``: the non-private service)."""
    gamma: float = 0.0
    """Allowed equalized-odds gap in the linear program."""

    @property
    def cost(self) -> tuple[float, float]:
        """(epsilon, delta) charged per run."""
        return float(self.epsilon), 0.0


@dataclass(frozen=True)
class OracleLearnerService:
    """The DP oracle learner (Jagielski et al. section 4; Agarwal et al. 2018)."""

    kind: ClassVar[str] = "dp_oracle_learner"
    epsilon: float
    """Total privacy loss of the game (``inf``: no noise)."""
    delta: float
    """Total delta of the game."""
    gamma: float
    """Allowed equalized-odds slack of each constraint."""
    bound: float
    """B, the l1 bound on the multipliers."""
    rounds: int
    """T: the game composes 2T Laplace mechanisms."""
    learner: str = "least_squares"
    """The learner on the menu (:data:`LEARNERS`)."""
    accountant: str = "pld"
    """How (eps, delta) is split into per-mechanism eps' (``pld``, ``advanced`` or ``basic``)."""
    min_cell_size: int = 10
    """Public lower bound on every (group, label) cell of the audit set."""
    mixture: str = "saddle"
    """How the rounds' classifiers are weighed (``saddle`` or ``uniform``; see
    :data:`~biasleak.mechanisms.fair.oracle.MIXTURES`)."""

    @property
    def cost(self) -> tuple[float, float]:
        """(epsilon, delta) charged per run (no delta for the non-private game)."""
        eps = float(self.epsilon)
        return eps, 0.0 if math.isinf(eps) else float(self.delta)


ServiceSpec = PostProcessingService | OracleLearnerService


@dataclass(frozen=True, eq=False)
class ServiceOutcome:
    """The reply to send and what to log: public facts, and the compliance side's own."""

    reply: ServiceResult | Refusal
    """What the developer receives."""
    public: dict[str, Any] = field(default_factory=dict)
    """Facts for the ``service_answered`` event (public)."""
    internal: dict[str, Any] = field(default_factory=dict)
    """Facts for the ``service_internal`` event (depend on A: never sent to a developer)."""


class ServiceDesk:
    """The compliance side's fair-learning services over one audit set. PRIVATE: holds A."""

    def __init__(
        self,
        services: tuple[ServiceSpec, ...],
        *,
        protected: NDArray[np.bool_],
        labels: NDArray[np.bool_],
        features: NDArray[np.float64] | None = None,
    ) -> None:
        kinds = [s.kind for s in services]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"each service may be offered once; received {kinds}")
        self.services: dict[str, ServiceSpec] = {s.kind: s for s in services}
        """Offered services by kind."""
        self._a = np.asarray(protected).astype(np.int64)
        self._y = np.asarray(labels).astype(np.int64)
        self._x = None if features is None else np.asarray(features, dtype=np.float64)

    def serve(
        self,
        request: ServiceRequest,
        *,
        policy: Policy,
        state: PolicyState,
        rng: np.random.Generator,
        now: float,
    ) -> ServiceOutcome:
        """Check, run and charge one request (module docstring for the order of the checks)."""
        refused = self._check(request, state)
        if refused is not None:
            return ServiceOutcome(Refusal(request.query_id, *refused, None, now))
        spec = self.services[request.service]
        ticket = _Ticket(_Sender(request.sender, request.organization), state, now)
        limits = policy.of_kind("rate_limit")
        if limits:
            limited = type(limits[0]).check(limits, ticket)
            if limited is not None:
                return ServiceOutcome(
                    Refusal(
                        request.query_id, limited.reason, limited.detail, limited.retry_after, now
                    )
                )
        eps, delta = spec.cost
        ledgers = []
        for index, budget in enumerate(policy.of_kind("budget")):
            book = state.ledger_book(index, budget)
            ledger = book.ledger(identity=request.sender, organization=request.organization)
            if not ledger.can_afford(eps, delta):
                what = f"epsilon {eps:g}" + (f", delta {delta:g}" if delta else "")
                detail = OVER_BUDGET.format(
                    what=what, scope=budget.scope, spent=ledger.spent, total=budget.epsilon
                )
                return ServiceOutcome(
                    Refusal(request.query_id, "budget_exhausted", detail, None, now)
                )
            ledgers.append(ledger)
        try:
            if isinstance(spec, PostProcessingService):
                outcome = self._postprocess(request, spec, rng, now)
            else:
                outcome = self._oracle(request, spec, rng, now)
        except CellTooSmall:  # the audit set breaks the public cell bound
            detail = TOO_SMALL.format(bound=getattr(spec, "min_cell_size", None))
            return ServiceOutcome(
                Refusal(request.query_id, "service_unavailable", detail, None, now)
            )
        except ValueError as err:  # e.g. an epsilon too large for the release grid
            detail = CANNOT_RUN.format(service=spec.kind, error=err)
            return ServiceOutcome(
                Refusal(request.query_id, "service_unavailable", detail, None, now)
            )
        if limits:
            type(limits[0]).commit(limits, ticket)
        for ledger in ledgers:
            ledger.charge(eps, delta)
        return outcome

    def _check(self, request: ServiceRequest, state: PolicyState) -> tuple[str, str] | None:
        """(reason, detail) of a refusal, or None when the request may be served."""
        if request.sender in state.suspended_identities:
            return "suspended", f"identity {request.sender!r} is suspended"
        if request.organization in state.suspended_organizations:
            return "suspended", f"organisation {request.organization!r} is suspended"
        spec = self.services.get(request.service)
        if spec is None:
            detail = NOT_OFFERED.format(service=request.service, offered=list(self.services))
            return "service_unavailable", detail
        if isinstance(spec, OracleLearnerService):
            if request.learner != spec.learner:
                menu = [spec.learner]
                detail = NOT_ON_MENU.format(learner=request.learner, service=spec.kind, menu=menu)
                return "service_unavailable", detail
            if self._x is None:
                return "service_unavailable", NO_FEATURES
            return None
        base = request.base_predictions
        arr = None if base is None else np.asarray(base)
        if (
            arr is None
            or arr.shape != self._a.shape
            or arr.dtype.kind not in "biuf"
            or not np.all((arr == 0) | (arr == 1))
        ):
            received = "nothing" if arr is None else f"shape {arr.shape}, dtype {arr.dtype}"
            return "invalid", BAD_BASE.format(n=self._a.size, received=received)
        return None

    def _postprocess(
        self,
        request: ServiceRequest,
        spec: PostProcessingService,
        rng: np.random.Generator,
        now: float,
    ) -> ServiceOutcome:
        base = np.asarray(request.base_predictions).astype(np.int64)
        result = dp_postprocess(
            base, protected=self._a, labels=self._y, epsilon=spec.epsilon, rng=rng, gamma=spec.gamma
        )
        eps, delta = spec.cost
        reply = ServiceResult(
            request.query_id,
            spec.kind,
            eps,
            delta,
            result.disparate_treatment,
            mixing=result.mixing,
            answered_at=now,
        )
        public = {"mixing": result.mixing, "gamma": spec.gamma, "noise_scale": result.noise_scale}
        internal = {
            "counts": count_table(base, protected=self._a, labels=self._y),
            "noisy_table": result.noisy_table,
            "estimated_error": result.estimated_error,
        }
        return ServiceOutcome(reply, public, internal)

    def _oracle(
        self,
        request: ServiceRequest,
        spec: OracleLearnerService,
        rng: np.random.Generator,
        now: float,
    ) -> ServiceOutcome:
        assert self._x is not None
        result = run_oracle_learner(
            self._x,
            self._y,
            protected=self._a,
            epsilon=spec.epsilon,
            delta=spec.delta,
            gamma=spec.gamma,
            bound=spec.bound,
            rounds=spec.rounds,
            rng=rng,
            accountant=spec.accountant,
            min_cell_size=spec.min_cell_size,
            mixture=spec.mixture,
        )
        eps, delta = spec.cost
        reply = ServiceResult(
            request.query_id,
            spec.kind,
            eps,
            delta,
            False,
            coefficients=result.coefficients,
            intercepts=result.intercepts,
            noisy_violations=result.noisy_violations,
            weights=result.weights,
            answered_at=now,
        )
        public = {
            "learner": spec.learner,
            "rounds": result.rounds,
            "accountant": result.budget.accountant,
            "per_mechanism_epsilon": result.budget.per_mechanism,
            "learner_scale": result.learner_scale,
            "auditor_scale": result.auditor_scale,
            "noisy_violations": result.noisy_violations,
            "mixture": result.mixture,
            "weights": result.weights,
        }
        counts = np.zeros((2, 2), dtype=np.int64)
        np.add.at(counts, (self._a, self._y), 1)
        internal = {"cell_counts": counts}
        return ServiceOutcome(reply, public, internal)
