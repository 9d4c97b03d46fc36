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

A service request passes the same gate as a metric query
(:func:`~biasleak.mechanisms.policy.decide`, with request kind ``service``): validation (a
service the team does not offer, or a learner off its menu, gets ``service_unavailable``; a
submission it cannot read ``invalid``), suspensions, rate limits (a request is one model), the
cache (the same request again gets the earlier result, free), the refuse rules (they read the
base model sent for post-processing; the oracle learner's request carries no model, and its
decision says the rules went unchecked), every budget stage's ledger, and then, in place of the
noise stage, the service's own run; nothing is charged unless the service ran. The oracle
learner's noise is calibrated to a public lower bound on every (group, label) cell
(``min_cell_size``); an audit set whose smallest cell is below it is refused with
``service_unavailable`` (that one bit depends on A, and the detail says so), and so is a
configuration the mechanism cannot run (an epsilon too large for the release grid), with the
mechanism's own message. The compliance agent logs the request in the query log the external
auditor reads, like a query.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.messages import Refusal, ServiceRequest, ServiceResult
from biasleak.mechanisms.fair import count_table, dp_postprocess, run_oracle_learner
from biasleak.mechanisms.fair.oracle import CellTooSmall
from biasleak.mechanisms.policy import (
    AuditSet,
    Decision,
    Pending,
    Policy,
    PolicyState,
    Refused,
    Request,
    decide,
)

__all__ = [
    "LEARNERS",
    "SERVICE_KINDS",
    "OracleLearnerService",
    "PostProcessingService",
    "ServiceDesk",
    "ServiceOutcome",
    "ServiceSpec",
    "submitted_array",
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
CANNOT_RUN: Final = "{service} cannot run with this configuration: {error}"


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
    decision: Decision | None = None
    """The gate's decision (cache hits, stages that went unchecked, the cached result's
    origin); None only for an outcome not yet through the gate."""


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
        self._audit = AuditSet(np.asarray(protected, dtype=bool), np.asarray(labels, dtype=bool))
        self._a = self._audit.protected.astype(np.int64)
        self._y = self._audit.labels.astype(np.int64)
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
        """Pass one request through the policy's gate, which runs the service last."""
        run = _Run(self, request, rng, now)
        gated = Request(
            request.query_id,
            request.sender,
            request.organization,
            request.service,
            request.base_predictions,
            kind="service",
            run=run,
        )
        decision = decide(policy, gated, self._audit, state, now=now, rng=rng)
        if not decision.answered:
            refusal = Refusal(
                request.query_id,
                decision.reason or "invalid",
                decision.detail,
                decision.retry_after,
                now,
            )
            return ServiceOutcome(refusal, decision=decision)
        outcome: ServiceOutcome = decision.result
        if decision.cached and decision.cached[0]:  # an earlier run's result, sent again
            reply = replace(outcome.reply, query_id=request.query_id, answered_at=now)
            outcome = replace(outcome, reply=reply)
        return replace(outcome, decision=decision)

    def check(self, request: ServiceRequest) -> tuple[str, str] | None:
        """(reason, detail) of a refusal of what the request submits, or None when the desk can
        serve it (the always-on validation of a service request)."""
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
        arr = submitted_array(request.base_predictions)
        if (
            arr is None
            or arr.shape != self._a.shape
            or arr.dtype.kind not in "biuf"
            or not np.all((arr == 0) | (arr == 1))
        ):
            received = (
                "nothing or values that do not form an array"
                if arr is None
                else f"shape {arr.shape}, dtype {arr.dtype}"
            )
            return "invalid", BAD_BASE.format(n=self._a.size, received=received)
        return None

    def run(
        self, request: ServiceRequest, rng: np.random.Generator, now: float
    ) -> ServiceOutcome | Refused:
        """Run an admitted request's service (a refusal when the audit set or the
        configuration keeps it from running)."""
        spec = self.services[request.service]
        try:
            if isinstance(spec, PostProcessingService):
                return self._postprocess(request, spec, rng, now)
            return self._oracle(request, spec, rng, now)
        except CellTooSmall:  # the audit set breaks the public cell bound
            detail = TOO_SMALL.format(bound=getattr(spec, "min_cell_size", None))
            return Refused("service_unavailable", detail)
        except ValueError as err:  # e.g. an epsilon too large for the release grid
            return Refused("service_unavailable", CANNOT_RUN.format(service=spec.kind, error=err))

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


def submitted_array(values: Any) -> NDArray[Any] | None:
    """``values`` as an array, or None when there are none or they cannot be read as one
    (ragged lists, objects whose conversion fails)."""
    if values is None:
        return None
    try:
        return np.asarray(values)
    except Exception:  # a submission is the sender's: whatever it is, it is refused, not a crash
        return None


@dataclass(eq=False)
class _Run:
    """One service request as the gate's release sees it (a
    :class:`~biasleak.mechanisms.policy.ReleaseRun`): its cost, its admission, its run."""

    desk: ServiceDesk
    request: ServiceRequest
    rng: np.random.Generator
    now: float

    @property
    def cost(self) -> tuple[float, float]:
        spec = self.desk.services.get(self.request.service)
        return spec.cost if spec is not None else (0.0, 0.0)

    def admit(self, q: Pending) -> Refused | None:
        refused = self.desk.check(self.request)
        if refused is not None:
            return Refused(*refused)
        base = self.request.base_predictions
        if base is not None and self.request.service == PostProcessingService.kind:
            q.h = np.asarray(base, dtype=np.float64).reshape(1, -1)
        return None

    def run(self, q: Pending) -> Refused | None:
        outcome = self.desk.run(self.request, self.rng, self.now)
        if isinstance(outcome, Refused):
            return outcome
        q.result = outcome
        return None
