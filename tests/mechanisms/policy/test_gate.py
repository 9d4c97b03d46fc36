"""One gate for every release: metric queries, service requests and publications pass the same
policy pipeline (publications: tests/agents/test_publications.py).

Every registered stage is run against every request kind; the stages that say they apply to a
kind must act on it (refuse what they refuse for a query, charge what they charge), the noise
stage alone leaves services to their own run, and a stage written by the recipe (a subclass that
declares nothing about kinds) guards services as well as queries, through the compliance agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import pytest
import simpy

from biasleak.agents.auditor import Auditor, DetectorSettings
from biasleak.agents.compliance import Compliance
from biasleak.agents.messages import Envelope, Query, Refusal, ServiceRequest, ServiceResult
from biasleak.agents.services import OracleLearnerService, PostProcessingService, ServiceDesk
from biasleak.mechanisms.policy import (
    PUBLISHER,
    REQUEST_KINDS,
    STAGES,
    AuditSet,
    Budget,
    Cache,
    MinSupport,
    NearDuplicate,
    Noise,
    Pending,
    Policy,
    PolicyState,
    RateLimit,
    Refused,
    Request,
    StageConfig,
    decide,
)
from biasleak.mechanisms.policy.decide import OwnRelease

N = 400


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.random(N) < 0.5
    x = rng.normal(size=(N, 3)) + 0.8 * a[:, None]
    y = x[:, 0] + rng.normal(size=N) > 0.3
    base = (x[:, 0] + 0.5 * x[:, 1] > 0.4).astype(np.int8)
    return x, y, a, base


POSTPROCESSING = PostProcessingService(1.0)
ORACLE = OracleLearnerService(2.0, 1e-6, 0.05, 5.0, 2, min_cell_size=10)


def _desk() -> ServiceDesk:
    x, y, a, _ = _data()
    return ServiceDesk((POSTPROCESSING, ORACLE), protected=a, labels=y, features=x)


def _service(k: int, *, who: str = "pat", base: np.ndarray | None = None) -> ServiceRequest:
    if base is None:
        base = _data()[3]
    return ServiceRequest(f"{who}-{k}", who, "o1", 0.0, "dp_postprocessing", base_predictions=base)


def _oracle(k: int, who: str = "pat") -> ServiceRequest:
    return ServiceRequest(
        f"{who}-{k}", who, "o1", 0.0, "dp_oracle_learner", learner="least_squares"
    )


def _serve(desk: ServiceDesk, request: ServiceRequest, policy: Policy, state: PolicyState) -> Any:
    return desk.serve(request, policy=policy, state=state, rng=np.random.default_rng(3), now=0.0)


def _spent(state: PolicyState) -> float:
    return sum(ledger.spent for book in state.ledgers.values() for _, ledger in book.items())


# One restrictive instance per registered stage: a new stage must be added here, with what it
# does to a second service request (None: the stage refuses nothing there).
SAMPLES: dict[str, tuple[StageConfig, str | None]] = {
    "rate_limit": (RateLimit(per_day=1), "rate_limited"),
    "cache": (Cache(), None),
    "min_support": (MinSupport(k=5), None),
    "near_duplicate": (NearDuplicate(threshold=3.0), "near_duplicate"),
    "budget": (Budget(epsilon=1.5), "budget_exhausted"),
    "noise": (Noise("laplace", 0.5), None),
}


def test_every_registered_stage_has_a_sample_here() -> None:
    assert set(SAMPLES) == set(STAGES)
    for kind, (stage, _) in SAMPLES.items():
        assert isinstance(stage, STAGES[kind])


@pytest.mark.parametrize("stage_kind", list(STAGES))
@pytest.mark.parametrize("request_kind", REQUEST_KINDS)
def test_every_stage_runs_for_every_kind_it_declares(stage_kind: str, request_kind: str) -> None:
    stage, _ = SAMPLES[stage_kind]
    policy = Policy(stages=(stage,))
    kinds_in_pipeline = {kind for kind, _ in policy.pipelines[request_kind]}
    assert (stage_kind in kinds_in_pipeline) == (request_kind in type(stage).KINDS)
    # every request kind ends in exactly one release
    releases = [k for k in kinds_in_pipeline if k in ("noise", "own_release")]
    assert releases == (["noise"] if request_kind == "query" else ["own_release"])


# The stages that say they do not apply to some kind, and to which: every other stage applies
# to every kind (a new exception must be argued here).
EXCEPTIONS: dict[str, tuple[str, ...]] = {
    "noise": ("query",),  # services and publications are released by their own run
    "rate_limit": ("query", "service"),  # meters what developers ask for; nobody asks for a
    # publication
}


def test_only_the_stages_that_say_so_leave_a_kind_out() -> None:
    for kind, stage in STAGES.items():
        assert stage.KINDS == EXCEPTIONS.get(kind, REQUEST_KINDS), kind


@pytest.mark.parametrize("stage_kind", list(STAGES))
def test_each_stage_acts_on_a_second_service_request(stage_kind: str) -> None:
    """The same request twice (the base model once more, shifted by one person for the
    near-duplicate rule) under a policy of that one stage."""
    stage, expected = SAMPLES[stage_kind]
    desk, state = _desk(), PolicyState()
    policy = Policy(stages=(stage,))
    first = _serve(desk, _service(1), policy, state)
    assert isinstance(first.reply, ServiceResult)
    base = _data()[3].copy()
    if stage_kind == "near_duplicate":
        base[0] = 1 - base[0]
    second = _serve(desk, _service(2, base=base), policy, state)
    if expected is None:
        assert isinstance(second.reply, ServiceResult)
    else:
        assert isinstance(second.reply, Refusal) and second.reply.reason == expected
    if stage_kind == "rate_limit":
        assert second.reply.retry_after == pytest.approx(24.0)
    if stage_kind == "cache":  # the same request again: the same result, free, not re-run
        assert second.decision.cached == (True,)
        assert np.array_equal(second.reply.mixing, first.reply.mixing)
        assert second.reply.query_id == "pat-2"
    if stage_kind == "budget":
        assert _spent(state) == pytest.approx(1.0)  # the refused request is charged nothing
        assert "one dp_postprocessing run" in second.reply.detail


# What each stage does to a second publication (the same audit of a model one person away, for
# the near-duplicate rule; the same audit again for the cache): None, it is published.
ON_PUBLICATION: dict[str, str | None] = {
    "rate_limit": None,  # does not apply
    "cache": None,
    "min_support": None,
    "near_duplicate": "near_duplicate",
    "budget": "budget_exhausted",  # 0.5 add/remove is 1.0 a reader; twice is over 1.5
    "noise": None,  # does not apply
}


@pytest.mark.parametrize("stage_kind", list(STAGES))
def test_each_stage_acts_on_a_second_publication(stage_kind: str) -> None:
    from biasleak.agents.publications import AuditPublication

    assert set(ON_PUBLICATION) == set(STAGES)
    _, y, a, base = _data()
    audit, state = AuditSet.from_arrays(a, y), PolicyState()
    policy = Policy(stages=(SAMPLES[stage_kind][0],))

    def publish(k: int, model: np.ndarray) -> Any:
        run = AuditPublication(0.5, model, np.random.default_rng(k))
        request = Request(
            f"p-{k}",
            PUBLISHER,
            PUBLISHER,
            run.kind,
            None,
            (run.digest,),
            kind="publication",
            run=run,
        )
        return decide(policy, request, audit, state, now=0.0, rng=np.random.default_rng(0))

    first = publish(1, base.astype(np.float64))
    assert first.answered
    second_model = base.astype(np.float64)
    if stage_kind == "near_duplicate":
        second_model[0] = 1.0 - second_model[0]
    second = publish(2, second_model)
    expected = ON_PUBLICATION[stage_kind]
    assert second.answered == (expected is None)
    if expected is not None:
        assert second.reason == expected
    if stage_kind == "cache":  # the same audit again: the earlier figures
        assert second.cached == (True,) and second.result is first.result


def test_min_support_reads_the_base_model_of_a_service_request() -> None:
    desk, state = _desk(), PolicyState()
    policy = Policy(stages=(MinSupport(k=5), Budget(epsilon=10.0)))
    lone = np.zeros(N, dtype=np.int8)
    lone[7] = 1  # a base model that singles one person out
    outcome = _serve(desk, _service(1, base=lone), policy, state)
    assert isinstance(outcome.reply, Refusal) and outcome.reply.reason == "low_support"
    assert _spent(state) == 0.0


def test_a_request_with_no_model_goes_unchecked_by_the_refuse_rules_and_says_so() -> None:
    desk, state = _desk(), PolicyState()
    policy = Policy(stages=(MinSupport(k=5), NearDuplicate(threshold=2.0)))
    outcome = _serve(desk, _oracle(1), policy, state)
    assert isinstance(outcome.reply, ServiceResult)
    assert outcome.decision.unchecked == ("min_support", "near_duplicate")
    with_model = _serve(desk, _service(2), policy, state)
    assert with_model.decision.unchecked == ()


def test_the_shared_audit_fixture_is_what_the_gate_decides_on(small_audit: AuditSet) -> None:
    policy = Policy(metrics=("sp",), stages=(MinSupport(k=5),))
    lone = np.zeros(small_audit.n)
    lone[0] = 1.0
    q = Request("q-1", "pat", "o1", "sp", lone)
    refused = decide(policy, q, small_audit, PolicyState(), now=0.0, rng=np.random.default_rng(0))
    assert not refused.answered and refused.reason == "low_support"


def test_the_models_of_queries_and_services_share_one_history() -> None:
    """A base model sent for post-processing after the same model was asked as a query is a
    near-duplicate: one organisation's history holds both kinds."""
    _, y, a, base = _data()
    desk, state = _desk(), PolicyState()
    policy = Policy(metrics=("sp",), stages=(NearDuplicate(threshold=2.0),))
    query = Request("pat-0", "pat", "o1", "sp", base.astype(np.float64))
    audit = AuditSet.from_arrays(a, y)
    assert decide(policy, query, audit, state, now=0.0, rng=np.random.default_rng(0)).answered
    outcome = _serve(desk, _service(1), policy, state)
    assert isinstance(outcome.reply, Refusal) and outcome.reply.reason == "near_duplicate"


def test_suspension_refuses_service_requests_too() -> None:
    desk, state = _desk(), PolicyState()
    state.suspended_organizations.add("o1")
    outcome = _serve(desk, _oracle(1), Policy(), state)
    assert isinstance(outcome.reply, Refusal) and outcome.reply.reason == "suspended"


class Closed(StageConfig):
    """A stage written by the recipe, declaring nothing about request kinds: refuse everything."""

    ORDER: ClassVar[int] = 35
    REFUSALS: ClassVar[dict[str, str]] = {"closed": "the desk is closed"}

    kind: Literal["closed"] = "closed"

    @classmethod
    def check(cls, stages: Sequence[Closed], q: Pending) -> Refused | None:
        return Refused("closed", f"closed to {q.kind} requests")


def test_a_new_stage_by_the_recipe_guards_queries_and_services_through_the_agent(
    event_log: Any,
) -> None:
    x, y, a, base = _data()
    env = simpy.Environment()
    log = event_log
    compliance = Compliance(
        env,
        policy=Policy(metrics=("sp",), stages=(Closed(),)),
        audit=AuditSet.from_arrays(a, y),
        rng=np.random.default_rng(0),
        log=log,
        services=(POSTPROCESSING, ORACLE),
        features=x,
    )
    compliance.mailbox.send(Envelope(Query("q-1", "pat", "o1", 0.0, "sp", base.astype(float))))
    compliance.mailbox.send(Envelope(_service(2)))
    compliance.mailbox.send(Envelope(_oracle(3)))
    env.run(until=5)
    assert [f["reason"] for f in log.of("query_refused")] == ["closed"]
    assert [f["reason"] for f in log.of("service_refused")] == ["closed", "closed"]
    assert "closed to service requests" in log.of("service_refused")[0]["detail"]
    # every request reached the one query log the auditor reads, with its kind
    assert [r.kind for r in compliance.query_log] == ["query", "service", "service"]
    assert [r.reason for r in compliance.query_log] == ["closed"] * 3


def test_the_auditor_reads_service_requests_and_counts_those_it_cannot(event_log: Any) -> None:
    x, y, a, _ = _data()
    env = simpy.Environment()
    log = event_log
    compliance = Compliance(
        env,
        policy=Policy(metrics=("sp",)),
        audit=AuditSet.from_arrays(a, y),
        rng=np.random.default_rng(0),
        log=log,
        services=(POSTPROCESSING, ORACLE),
        features=x,
    )
    Auditor(
        env,
        query_log=compliance.query_log.reader(),
        compliance=compliance.mailbox,
        detectors=("low_support",),
        settings=DetectorSettings(low_support_k=5),
        every_hours=2.0,
        recommended_action="warn",
        log=log,
    )
    lone = np.zeros(N, dtype=np.int8)
    lone[3] = 1
    compliance.mailbox.send(Envelope(_service(1, who="peg", base=lone)))
    compliance.mailbox.send(Envelope(_oracle(2, who="oscar")))
    env.run(until=3)
    alerts = log.of("alert_raised")
    assert [(f["developer"], f["detector"]) for f in alerts] == [("peg", "low_support")]
    assert log.of("audit_run")[0]["unread"] == 1


def test_a_cached_service_result_is_logged_free_and_counted_for_a_new_reader(
    event_log: Any,
) -> None:
    x, y, a, _ = _data()
    env = simpy.Environment()
    log = event_log
    told: list[tuple[str, dict[str, Any]]] = []
    compliance = Compliance(
        env,
        policy=Policy(stages=(Cache(), Budget(epsilon=10.0))),
        audit=AuditSet.from_arrays(a, y),
        rng=np.random.default_rng(0),
        log=log,
        services=(POSTPROCESSING,),
        features=x,
        on_service=lambda sender, org, facts: told.append((sender, facts)),
    )
    compliance.mailbox.send(Envelope(_service(1)))
    compliance.mailbox.send(Envelope(_service(2)))  # the same identity: nothing new
    compliance.mailbox.send(Envelope(_service(3, who="sam")))  # another reader
    env.run(until=5)
    answered = log.of("service_answered")
    assert [f["epsilon_charged"] for f in answered] == [1.0, 0.0, 0.0]
    assert [f.get("cached") for f in answered] == [None, 1, 1]
    assert [f.get("foreign") for f in answered] == [None, False, True]
    assert [who for who, _ in told] == ["pat", "sam"]
    assert told[1][1]["epsilon_charged"] == 1.0  # the first run's guarantee, for the reader
    assert len(log.of("service_internal")) == 1  # the service ran once


def test_the_own_release_runs_last_and_is_not_configurable() -> None:
    assert "own_release" not in STAGES
    policy = Policy(stages=(Budget(epsilon=1.0), RateLimit(per_day=3)))
    kinds = [k for k, _ in policy.pipelines["service"]]
    assert kinds == ["rate_limit", "budget", "own_release"]
    assert OwnRelease.ORDER == Noise.ORDER
    queries = [k for k, _ in Policy(stages=(Noise("laplace", 1.0),)).pipelines["query"]]
    assert queries == ["noise"]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("bogus", "a request is one of"),
        ("service", "must come with the run"),
        ("publication", "must come with the run"),
    ],
)
def test_a_request_of_an_unknown_kind_or_without_its_run_is_refused_as_invalid(
    small_audit: AuditSet, kind: str, expected: str
) -> None:
    state = PolicyState()
    q = Request("q-1", "pat", "o1", "sp", None, kind=kind)
    decision = decide(Policy(), q, small_audit, state, now=0.0, rng=np.random.default_rng(0))
    assert not decision.answered and decision.reason == "invalid"
    assert expected in decision.detail
    assert state == PolicyState()  # nothing charged, nothing remembered


def test_a_ragged_base_model_is_refused_as_invalid_and_logged_without_models(
    event_log: Any,
) -> None:
    x, y, a, _ = _data()
    env = simpy.Environment()
    log = event_log
    compliance = Compliance(
        env,
        policy=Policy(),
        audit=AuditSet.from_arrays(a, y),
        rng=np.random.default_rng(0),
        log=log,
        services=(POSTPROCESSING,),
        features=x,
    )
    ragged = ServiceRequest(
        "pat-1", "pat", "o1", 0.0, "dp_postprocessing", base_predictions=[[0, 1], [1]]
    )
    compliance.mailbox.send(Envelope(ragged))
    env.run(until=2)
    refused = log.of("service_refused")
    assert [f["reason"] for f in refused] == ["invalid"]
    assert "do not form an array" in refused[0]["detail"]
    assert compliance.query_log[0].predictions is None and not compliance.query_log[0].answered
