"""The private fair-learning services as protocols: compliance desk, developer strategies, world.

The mathematics is tested in ``test_fair_postprocessing.py`` and ``test_fair_oracle.py``; here
the services run through the policy state (suspensions, budget ledgers), the messages and the
simulated world, and their outcome is scored in the summary.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from biasleak.agents.messages import REFUSAL_REASONS, Refusal, ServiceRequest, ServiceResult
from biasleak.agents.services import OracleLearnerService, PostProcessingService, ServiceDesk
from biasleak.mechanisms.fair import derived_probabilities, score
from biasleak.mechanisms.policy import Budget, Policy, PolicyState
from biasleak.sim.cli import main
from biasleak.sim.runlog import read_log
from biasleak.sim.scenario import parse_scenario
from biasleak.sim.summary import RunSummary, summarize
from biasleak.sim.world import run_scenario

M = 600


def _audit(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels, attribute and a group-unfair base model's 0/1 predictions."""
    rng = np.random.default_rng(seed)
    a = (rng.random(M) < 0.6).astype(np.int64)
    x = rng.normal(size=(M, 3)) + 0.8 * a[:, None]
    y = (x[:, 0] + rng.normal(size=M) > 0.5).astype(np.int64)
    base = (x[:, 0] + 0.5 * x[:, 1] > 0.6).astype(np.int8)
    return x, y, a, base


def _desk(*services: PostProcessingService | OracleLearnerService) -> ServiceDesk:
    x, y, a, _ = _audit()
    return ServiceDesk(services, protected=a.astype(bool), labels=y.astype(bool), features=x)


def _request(service: str = "dp_postprocessing", n: int = 1, **kw: object) -> ServiceRequest:
    _, _, _, base = _audit()
    extra = {"base_predictions": base} if service == "dp_postprocessing" else {}
    extra.update(kw)  # type: ignore[arg-type]
    return ServiceRequest(f"pat-{n}", "pat", "o1", 0.0, service, **extra)  # type: ignore[arg-type]


def _serve(desk: ServiceDesk, request: ServiceRequest, policy: Policy, state: PolicyState):  # type: ignore[no-untyped-def]
    return desk.serve(request, policy=policy, state=state, rng=np.random.default_rng(1), now=0.0)


def test_exact_postprocessing_equalizes_odds_on_the_audit_set() -> None:
    _, y, a, base = _audit()
    desk = _desk(PostProcessingService(math.inf))
    outcome = _serve(desk, _request(), Policy(), PolicyState())
    result = outcome.reply
    assert isinstance(result, ServiceResult) and result.mixing is not None
    assert result.disparate_treatment and result.epsilon_charged == math.inf
    derived = derived_probabilities(result.mixing, base, protected=a)
    before, after = score(y, base, protected=a), score(y, derived, protected=a)
    assert before.eo_violation > 0.05  # the base model is unfair: the test can fail
    assert after.eo_violation < 1e-6
    assert "counts" in outcome.internal and "counts" not in outcome.public


def test_a_service_not_offered_is_refused_and_charges_nothing() -> None:
    desk = _desk(PostProcessingService(1.0))
    policy = Policy(stages=(Budget(epsilon=5.0),))
    state = PolicyState()
    reply = _serve(desk, _request("dp_oracle_learner", learner="least_squares"), policy, state)
    assert isinstance(reply.reply, Refusal) and reply.reply.reason == "service_unavailable"
    assert "service_unavailable" in REFUSAL_REASONS
    assert not state.ledgers or all(
        ledger.spent == 0 for book in state.ledgers.values() for _, ledger in book.items()
    )
    off_menu = _desk(OracleLearnerService(1.0, 1e-6, 0.02, 5.0, 2, min_cell_size=10))
    reply = _serve(off_menu, _request("dp_oracle_learner", learner="boosting"), policy, state)
    assert isinstance(reply.reply, Refusal) and reply.reply.reason == "service_unavailable"


def test_an_unreadable_submission_or_a_suspended_sender_is_refused() -> None:
    desk = _desk(PostProcessingService(1.0))
    bad = _request(base_predictions=np.full(M, 0.3))
    assert _serve(desk, bad, Policy(), PolicyState()).reply.reason == "invalid"  # type: ignore[union-attr]
    state = PolicyState()
    state.suspended_organizations.add("o1")
    assert _serve(desk, _request(), Policy(), state).reply.reason == "suspended"  # type: ignore[union-attr]


def test_a_budget_too_small_refuses_and_charges_nothing() -> None:
    desk = _desk(PostProcessingService(2.0))
    policy = Policy(stages=(Budget(epsilon=5.0), Budget(epsilon=1.0, scope="organization")))
    state = PolicyState()
    reply = _serve(desk, _request(), policy, state).reply
    assert isinstance(reply, Refusal) and reply.reason == "budget_exhausted"
    spent = [ledger.spent for book in state.ledgers.values() for _, ledger in book.items()]
    assert spent and all(s == 0 for s in spent)


def test_charges_add_up_in_every_ledger() -> None:
    desk = _desk(
        PostProcessingService(1.0),
        OracleLearnerService(2.0, 1e-6, 0.02, 5.0, 3, min_cell_size=10),
    )
    policy = Policy(stages=(Budget(epsilon=10.0, delta=1e-5, scope="organization"),))
    state = PolicyState()
    for n in (1, 2):
        assert isinstance(_serve(desk, _request(n=n), policy, state).reply, ServiceResult)
    oracle = _serve(desk, _request("dp_oracle_learner", 3, learner="least_squares"), policy, state)
    result = oracle.reply
    assert isinstance(result, ServiceResult) and result.coefficients is not None
    assert result.coefficients.shape == (3, 3) and not result.disparate_treatment
    ((_, ledger),) = state.ledgers[0].items()
    assert ledger.spent == pytest.approx(4.0)
    assert ledger.remaining_delta == pytest.approx(1e-5 - 1e-6)


WORLD = """
name: services_test
seed: 3
horizon_days: 5
data: {dataset: synthetic, n: 600, minority: 240, features: 3, group_shift: 1.0}
developers:
  - {id: pat, organization: o1, strategy: {kind: request_postprocessing}}
  - {id: ian, organization: o2, strategy: {kind: request_fair_training}}
  - {id: bob, organization: o3, strategy: {kind: request_fair_training}}
compliance:
  policy:
    - {kind: budget, epsilon: 15.0, delta: 1.0e-5, scope: organization}
    - {kind: noise, mechanism: laplace, epsilon: 0.5}
  services:
    - {kind: dp_postprocessing, epsilon: 1.0}
    - {kind: dp_oracle_learner, epsilon: 10.0, rounds: 5, bound: 10.0}
"""


def test_the_world_runs_both_services_and_scores_them(tmp_path: Path) -> None:
    run = run_scenario(parse_scenario(WORLD), log_dir=tmp_path)
    devs = run.summary["developers"]
    pat, ian = devs["pat"]["service"], devs["ian"]["service"]
    assert pat["service"] == "dp_postprocessing" and pat["disparate_treatment"] is True
    assert ian["service"] == "dp_oracle_learner" and ian["disparate_treatment"] is False
    for s in (pat, ian):
        for key in ("error", "eo_violation", "base_error", "base_eo_violation"):
            assert 0.0 <= s[key] <= 1.0
        assert s["base_error"] < 0.5  # the base model learned something
    assert devs["pat"]["epsilon_spent"] == 1.0 and devs["ian"]["epsilon_spent"] == 10.0
    assert run.summary["compliance"]["epsilon_spent"] == pytest.approx(21.0)
    assert devs["pat"]["leakage_ceiling"] > 50.0  # the service's release counts
    events = [e["event"] for e in read_log(run.log_path)]
    assert events.count("service_answered") == 3 and events.count("service_internal") == 3
    assert events.count("service_evaluation") == 3
    assert main(["replay", str(run.log_path)]) == 0
    typed = TypeAdapter(RunSummary)
    summary = summarize(read_log(run.log_path))
    typed.validate_python(summary, strict=True)
    summary["developers"]["pat"]["service"]["surprise"] = 1  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ValidationError):
        typed.validate_python(summary, strict=True)


def test_the_non_private_service_beats_the_base_model_on_held_out_people(tmp_path: Path) -> None:
    text = (
        WORLD.replace("epsilon: 15.0, delta: 1.0e-5", "epsilon: .inf")
        .replace("dp_postprocessing, epsilon: 1.0", "dp_postprocessing, epsilon: .inf")
        .replace("dp_oracle_learner, epsilon: 10.0", "dp_oracle_learner, epsilon: .inf")
    )
    run = run_scenario(parse_scenario(text), log_dir=tmp_path)
    pat = run.summary["developers"]["pat"]
    assert float(pat["epsilon_spent"]) == math.inf
    service = pat["service"]
    assert service["base_eo_violation"] > 0.1  # group_shift makes the base model unfair
    assert service["eo_violation"] < 0.5 * service["base_eo_violation"]


def test_a_budget_too_small_in_the_world(tmp_path: Path) -> None:
    text = WORLD.replace("epsilon: 15.0, delta: 1.0e-5", "epsilon: 0.5, delta: 1.0e-5")
    run = run_scenario(parse_scenario(text), log_dir=tmp_path)
    devs = run.summary["developers"]
    assert devs["pat"]["refused"] == {"budget_exhausted": 1}
    assert devs["pat"]["epsilon_spent"] == 0.0 and "service" not in devs["pat"]
    assert run.summary["compliance"]["refused"] == {"budget_exhausted": 3}
    assert run.summary["compliance"]["epsilon_spent"] == 0.0


def test_the_run_table_shows_each_service_outcome() -> None:
    """A compliance officer reads the deployed model's error and violation in the table."""
    import json
    from pathlib import Path

    from biasleak.sim.report import format_run

    golden = Path(__file__).resolve().parents[1] / "golden" / "fair_services.json"
    summary = json.loads(golden.read_text(encoding="utf-8"))
    table = format_run(summary)
    post = summary["developers"]["pat"]["service"]
    line = next(row for row in table.splitlines() if row.startswith("pat "))
    assert f"dp_postprocessing: error {post['error']:.3f}" in line
    assert f"EO violation {post['eo_violation']:.3f}" in line and "needs the attribute" in line
    oracle = next(row for row in table.splitlines() if row.startswith("ian "))
    assert "dp_oracle_learner" in oracle and "needs the attribute" not in oracle


def test_a_bad_service_key_is_reported_at_its_path_with_its_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from biasleak.sim.cli import main

    shipped = Path(__file__).resolve().parents[2] / "scenarios" / "fair_services.yaml"
    text = shipped.read_text(encoding="utf-8").replace(
        "rounds: 20, learner: least_squares", "rounds: 20, learner: logistic_regression"
    )
    assert "logistic_regression" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "compliance.services.1.learner: value 'logistic_regression' is not allowed" in err


ROUTES = WORLD.replace(
    "  - {id: bob, organization: o3, strategy: {kind: request_fair_training}}\n",
    "  - {id: alice, organization: o3, strategy: {kind: honest_selection, candidates: 4, "
    "metric: eo}}\n"
    "  - {id: eve, organization: o4, strategy: {kind: single_query, targets: [0, 1, 2]}}\n"
    "  - {id: mal, organization: o5, strategy: {kind: differencing, targets: [3, 4]}}\n",
)


def test_the_routes_table_puts_the_three_routes_side_by_side(tmp_path: Path) -> None:
    """Honest developers' models on each route, scored alike; the attack side is the strongest."""
    run = run_scenario(parse_scenario(ROUTES), log_dir=tmp_path)
    devs, routes = run.summary["developers"], run.summary["routes"]
    order = ["metric_queries", "dp_postprocessing", "dp_oracle_learner"]
    assert [r["route"] for r in routes] == order
    by_route = {r["route"]: r for r in routes}
    metric = by_route["metric_queries"]
    assert metric["deployed_by"] == ["alice"] and metric["disparate_treatment"] is False
    alice = devs["alice"]["service"]
    assert alice["service"] == "metric_queries"
    assert metric["error"] == alice["error"] and metric["eo_violation"] == alice["eo_violation"]
    assert metric["epsilon_spent"] == devs["alice"]["epsilon_spent"] == pytest.approx(2.0)
    strongest = max(("eve", "mal"), key=lambda i: devs[i]["leakage"])
    assert metric["attacker"] == strongest
    assert metric["leakage"] == devs[strongest]["leakage"]
    assert metric["leakage_ceiling"] == devs[strongest]["leakage_ceiling"]
    post = by_route["dp_postprocessing"]
    assert post["deployed_by"] == ["pat"] and post["disparate_treatment"] is True
    assert post["attacker"] is None and post["leakage"] is None  # nobody attacked this route
    # the same base model stands beside every route
    assert len({devs[i]["service"]["base_error"] for i in ("alice", "pat", "ian")}) == 1
    TypeAdapter(RunSummary).validate_python(summarize(read_log(run.log_path)), strict=True)
    from biasleak.sim.report import format_run

    table = format_run(run.summary)
    row = next(line for line in table.splitlines() if line.startswith("dp_postprocessing "))
    assert f"{post['error']:.3f}" in row and " yes " in row


def test_runs_without_services_have_no_routes(tmp_path: Path) -> None:
    text = (
        ROUTES.split("compliance:")[0]
        .replace("  - {id: pat, organization: o1, strategy: {kind: request_postprocessing}}\n", "")
        .replace("  - {id: ian, organization: o2, strategy: {kind: request_fair_training}}\n", "")
    )
    text += "compliance:\n  policy:\n    - {kind: noise, mechanism: laplace, epsilon: 0.5}\n"
    run = run_scenario(parse_scenario(text), log_dir=tmp_path)
    assert "routes" not in run.summary
    assert "service" not in run.summary["developers"]["alice"]
    assert "service_evaluation" not in {e["event"] for e in read_log(run.log_path)}


def test_the_oracle_service_sends_the_mixture_weights_it_was_configured_for() -> None:
    """The developer receives each round's weight; the evaluator scores that mixture."""
    from biasleak.mechanisms.fair import run_oracle_learner

    x, y, a, _ = _audit()
    replies = {}
    for mixture in ("saddle", "uniform"):
        spec = OracleLearnerService(math.inf, 1e-6, 0.02, 10.0, 6, mixture=mixture)
        outcome = _serve(
            _desk(spec),
            _request("dp_oracle_learner", learner="least_squares"),
            Policy(),
            PolicyState(),
        )
        reply = outcome.reply
        assert isinstance(reply, ServiceResult) and reply.weights is not None
        assert reply.weights.shape == (6,) and math.isclose(float(reply.weights.sum()), 1.0)
        assert outcome.public["mixture"] == mixture
        replies[mixture] = reply.weights
        direct = run_oracle_learner(
            x, y, protected=a, epsilon=math.inf, delta=1e-6, gamma=0.02, bound=10.0, rounds=6,
            rng=np.random.default_rng(1), mixture=mixture,
        )  # fmt: skip
        np.testing.assert_allclose(reply.weights, direct.weights)
    np.testing.assert_allclose(replies["uniform"], np.full(6, 1 / 6))
    from biasleak.sim.scenario import ScenarioError

    with pytest.raises(ScenarioError, match=r"services\.1\.mixture: value 'best'.*'saddle'"):
        parse_scenario(WORLD.replace("rounds: 5,", "rounds: 5, mixture: best,"))


def test_rate_limits_apply_to_service_requests() -> None:
    """One request is one model: a bucket of 2 per day answers two, then says when to retry."""
    from biasleak.mechanisms.policy import RateLimit

    desk = _desk(PostProcessingService(math.inf))
    policy, state = Policy(stages=(RateLimit(per_day=2, scope="organization"),)), PolicyState()
    replies = [
        desk.serve(_request(n=k), policy=policy, state=state, rng=np.random.default_rng(k), now=0.0)
        for k in range(3)
    ]
    assert [type(r.reply).__name__ for r in replies] == ["ServiceResult"] * 2 + ["Refusal"]
    refusal = replies[2].reply
    assert isinstance(refusal, Refusal) and refusal.reason == "rate_limited"
    assert refusal.retry_after == pytest.approx(12.0)  # one token refills in 24 / 2 hours
    later = desk.serve(
        _request(n=4), policy=policy, state=state, rng=np.random.default_rng(4), now=12.0
    )
    assert isinstance(later.reply, ServiceResult)


def test_a_configuration_the_mechanism_cannot_run_is_refused_with_its_own_message() -> None:
    """Too large an epsilon for the release grid: refused (nothing charged), not a crash, and
    not mistaken for the attribute-dependent cell-size refusal."""
    for spec, request in (
        (PostProcessingService(1e12), _request()),
        (
            OracleLearnerService(1e12, 1e-6, 0.02, 10.0, 3),
            _request("dp_oracle_learner", learner="least_squares"),
        ),
    ):
        state = PolicyState()
        reply = _serve(_desk(spec), request, Policy(), state).reply
        assert isinstance(reply, Refusal) and reply.reason == "service_unavailable"
        assert "cannot run" in reply.detail and "grid" in reply.detail
        assert "min_cell_size" not in reply.detail


def test_an_empty_cell_in_the_training_split_skips_the_scores_not_the_run(tmp_path: Path) -> None:
    text = WORLD.replace(
        "data: {dataset: synthetic, n: 600, minority: 240, features: 3, group_shift: 1.0}",
        "data: {dataset: synthetic, n: 200, minority: 20, train_size: 10}",
    )
    run = run_scenario(parse_scenario(text), log_dir=tmp_path, seed=1)
    events = read_log(run.log_path)
    skipped = [e for e in events if e["event"] == "service_evaluation_skipped"]
    assert skipped and "training split" in skipped[0]["reason"]
    assert all("service" not in d for d in run.summary["developers"].values())
    assert main(["replay", str(run.log_path)]) == 0
