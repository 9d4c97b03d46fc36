"""Publications pass the one gate: charged to every reader's ledger, refused when one of them
cannot afford them, cached, read by the refuse rules, not rate-limited, and counted in every
reader's ceilings."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import simpy

from biasleak.agents.compliance import Compliance
from biasleak.agents.publications import AuditPublication
from biasleak.mechanisms.policy import (
    PUBLISHER,
    AuditSet,
    Budget,
    Cache,
    MinSupport,
    Noise,
    Policy,
    PolicyState,
    RateLimit,
    Request,
    carry_ledgers,
    decide,
)
from biasleak.sim.exposure import Exposure


def _compliance(audit: AuditSet, log: Any, *stages: Any) -> tuple[Compliance, Any]:
    compliance = Compliance(
        simpy.Environment(),
        policy=Policy(metrics=("sp",), stages=stages),
        audit=audit,
        rng=np.random.default_rng(0),
        log=log,
    )
    return compliance, log


def _model(audit: AuditSet, seed: int = 1) -> np.ndarray:
    return (np.random.default_rng(seed).random(audit.n) < 0.5).astype(np.float64)


def _query(audit: AuditSet, who: str, state: PolicyState, policy: Policy, k: int = 0) -> bool:
    request = Request(f"{who}-{k}", who, who, "sp", _model(audit, 100 + k))
    rng = np.random.default_rng(k)
    return decide(policy, request, audit, state, now=0.0, rng=rng).answered


def _spent(compliance: Compliance) -> dict[str, float]:
    (book,) = compliance.state.ledgers.values()
    return {key: ledger.spent for key, ledger in book.items()}


def test_a_publication_is_charged_to_every_ledger_open_and_opened_later(
    small_audit: AuditSet, event_log: Any
) -> None:
    compliance, log = _compliance(
        small_audit, event_log, Budget(epsilon=10.0), Noise("laplace", 1.0)
    )
    assert _query(small_audit, "pat", compliance.state, compliance.policy)
    assert _query(small_audit, "sam", compliance.state, compliance.policy)
    rng = np.random.default_rng(5)
    assert compliance.publish(AuditPublication(0.5, _model(small_audit), rng), cause="inquiry")
    # 0.5 under add/remove is 1.0 when one person's attribute changes: the ledgers' rule
    assert _spent(compliance) == {"pat": pytest.approx(2.0), "sam": pytest.approx(2.0)}
    assert _query(small_audit, "zoe", compliance.state, compliance.policy)  # a later reader
    assert _spent(compliance)["zoe"] == pytest.approx(2.0)
    (published,) = log.of("audit_published")
    assert published["cause"] == "inquiry" and published["epsilon_attribute_change"] == 1.0
    (internal,) = log.of("audit_internal")
    assert internal["internal"] is True and "exact_group_sizes" in internal


def test_a_publication_one_reader_cannot_afford_is_refused_and_charges_nobody(
    small_audit: AuditSet, event_log: Any
) -> None:
    compliance, log = _compliance(
        small_audit, event_log, Budget(epsilon=3.0), Noise("laplace", 1.0)
    )
    for k in range(3):  # pat spends the whole budget
        assert _query(small_audit, "pat", compliance.state, compliance.policy, k)
    assert _query(small_audit, "sam", compliance.state, compliance.policy)
    rng = np.random.default_rng(5)
    assert not compliance.publish(AuditPublication(0.5, _model(small_audit), rng), cause="x")
    (refused,) = log.of("publication_refused")
    assert refused["reason"] == "budget_exhausted"
    assert "identity 'pat'" in refused["detail"] and "every reader" in refused["detail"]
    assert _spent(compliance) == {"pat": pytest.approx(3.0), "sam": pytest.approx(1.0)}
    assert not log.of("audit_published")


def test_a_publication_no_new_reader_could_afford_is_refused(
    small_audit: AuditSet, event_log: Any
) -> None:
    compliance, log = _compliance(small_audit, event_log, Budget(epsilon=1.5))
    rng = np.random.default_rng(5)
    assert not compliance.publish(AuditPublication(1.0, _model(small_audit), rng), cause="x")
    assert "a new identity" in log.of("publication_refused")[0]["detail"]


def test_the_same_publication_again_is_the_same_numbers_free(
    small_audit: AuditSet, event_log: Any
) -> None:
    compliance, log = _compliance(small_audit, event_log, Cache(), Budget(epsilon=10.0))
    told: list[dict[str, Any]] = []
    compliance.on_publication = told.append
    model = _model(small_audit)
    for seed in (5, 6):
        publication = AuditPublication(0.5, model, np.random.default_rng(seed))
        assert compliance.publish(publication, cause="x")
    first, second = log.of("audit_published")
    assert second["released_counts"] == first["released_counts"] and second["cached"] == 1
    assert "cached" not in first
    assert len(told) == 1 and told[0]["epsilon_charged"] == 1.0
    # another epsilon is another release
    assert compliance.publish(AuditPublication(1.0, model, np.random.default_rng(7)), cause="x")
    assert "cached" not in log.of("audit_published")[2] and len(told) == 2


def test_the_refuse_rules_read_the_published_model_and_rate_limits_do_not_apply(
    small_audit: AuditSet, event_log: Any
) -> None:
    compliance, log = _compliance(small_audit, event_log, MinSupport(k=5), RateLimit(per_day=1))
    lone = np.zeros(small_audit.n)
    lone[3] = 1.0
    rng = np.random.default_rng(5)
    assert not compliance.publish(AuditPublication(0.5, lone, rng), cause="x")
    assert log.of("publication_refused")[0]["reason"] == "low_support"
    for seed in (1, 2, 3):  # a limit of one request per day meters developers, not publications
        assert compliance.publish(AuditPublication(0.5, _model(small_audit, seed), rng), cause="x")


@pytest.mark.parametrize("bad", [np.zeros(7), np.full(400, 2.0), "not a model"])
def test_a_publication_of_something_that_is_not_a_model_is_refused_as_invalid(
    small_audit: AuditSet, bad: Any, event_log: Any
) -> None:
    compliance, log = _compliance(small_audit, event_log, Budget(epsilon=10.0))
    assert not compliance.publish(AuditPublication(0.5, bad, np.random.default_rng(0)), cause="x")
    (refused,) = log.of("publication_refused")
    assert refused["reason"] == "invalid" and "n = 400" in refused["detail"]
    assert compliance.state.ledgers == {} or _spent(compliance) == {}


def test_publications_carry_over_a_policy_change_for_later_readers(small_audit: AuditSet) -> None:
    old = Policy(metrics=("sp",), stages=(Budget(epsilon=10.0), Noise("laplace", 1.0)))
    state = PolicyState()
    assert _query(small_audit, "pat", state, old)
    publication = AuditPublication(0.5, _model(small_audit), np.random.default_rng(0))
    request = Request("p-1", PUBLISHER, PUBLISHER, publication.kind, None, (publication.digest,))
    request = Request(**{**request.__dict__, "kind": "publication", "run": publication})
    rng = np.random.default_rng(1)
    assert decide(old, request, small_audit, state, now=0.0, rng=rng).answered
    new = Policy(metrics=("sp",), stages=(Budget(epsilon=20.0), Noise("laplace", 1.0)))
    carry_ledgers(old, new, state)
    assert _query(small_audit, "sam", state, new)
    (book,) = state.ledgers.values()
    spent = {key: ledger.spent for key, ledger in book.items()}
    assert spent == {"pat": pytest.approx(2.0), "sam": pytest.approx(2.0)}
    assert book.public == ((1.0, 0.0),)


def test_a_publication_enters_every_readers_ceiling(small_audit: AuditSet, event_log: Any) -> None:
    """Alone, a 2 epsilon-DP release bounds every person's posterior by
    e^(2 eps) / (1 + e^(2 eps)) (uniform prior): the exposure of a developer who asked nothing,
    and of its organisation, is exactly that."""
    log = event_log
    exposure = Exposure(small_audit.protected, small_audit.labels, log)
    exposure.add_publication({"epsilon_charged": 1.0, "delta_charged": 0.0})
    exposure.finish([{"id": "pat", "organization": "o1"}, {"id": "sam", "organization": "o2"}])
    bound = 100.0 * math.exp(1.0) / (1.0 + math.exp(1.0))
    events = log.of("exposure")
    assert len(events) == 4
    for event in events:
        assert event["person"] == pytest.approx(bound, abs=1e-6)
    without = Exposure(small_audit.protected, small_audit.labels, log)
    without.finish([{"id": "pat", "organization": "o1"}])
    assert log.of("exposure")[-1]["person"] == 50.0


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.inf, math.nan, "1"])
def test_a_publication_needs_a_finite_positive_epsilon(epsilon: Any, small_audit: AuditSet) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        AuditPublication(epsilon, _model(small_audit), np.random.default_rng(0))
