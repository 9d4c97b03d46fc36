"""The red team: which attacks apply, one world per attack, and the strongest one named."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from biasleak.sim.redteam import (
    format_red_team,
    plan_attacks,
    run_red_team,
    strongest,
    strongest_over_runs,
    world_of,
)
from biasleak.sim.scenario import ATTACK_KINDS, parse_scenario

# Exact answers on 60 synthetic people (10 in the small group): the full-rank attack recovers
# everyone (Hamman et al., Theorem 3), a single targeted query reveals one person only.
TINY = """\
name: rt_tiny
seed: 5
horizon_days: 10
data: {dataset: synthetic, n: 60, minority: 10}
developers:
  - {id: alice, organization: shop, strategy: {kind: honest_selection, candidates: 3}}
  - {id: mallory, organization: acme, strategy: {kind: single_query, targets: [3]}}
compliance:
  metrics: [sp, abs_sp]
  policy:
    - {kind: rate_limit, per_day: 10000}
red_team:
  attacks: [single_query, full_rank, abs_sp_partition, eo_reveal, budget_aware]
"""

NOISY = """\
name: rt_noisy
data: {dataset: synthetic, n: 60, minority: 10}
developers:
  - {id: alice, organization: shop, strategy: {kind: honest_selection, candidates: 3}}
compliance:
  metrics: [sp, eo]
  policy:
    - {kind: budget, epsilon: 300.0}
    - {kind: budget, epsilon: 90.0, scope: organization}
    - {kind: noise, mechanism: laplace, epsilon: 2.0}
red_team: {attacks: all}
"""


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory: pytest.TempPathFactory) -> Any:
    scenario = parse_scenario(TINY)
    return run_red_team(scenario, log_dir=tmp_path_factory.mktemp("logs"))


def test_every_requested_attack_is_listed_once_in_order(tiny_result: Any) -> None:
    kinds = [r["kind"] for r in tiny_result.attacks]
    assert kinds == ["single_query", "full_rank", "abs_sp_partition", "eo_reveal", "budget_aware"]
    by_kind = {r["kind"]: r for r in tiny_result.attacks}
    assert not by_kind["eo_reveal"]["applicable"]
    assert "'eo'" in by_kind["eo_reveal"]["reason"]
    assert "['sp', 'abs_sp']" in by_kind["eo_reveal"]["reason"]
    assert not by_kind["budget_aware"]["applicable"]
    assert "exact" in by_kind["budget_aware"]["reason"]
    for kind in ("single_query", "full_rank", "abs_sp_partition"):
        assert by_kind[kind]["applicable"]
        assert by_kind[kind]["developers"] == [kind]
        assert by_kind[kind]["answered"] >= 1


def test_the_strongest_attack_has_the_highest_leakage(tiny_result: Any) -> None:
    scored = [r for r in tiny_result.attacks if r["applicable"] and r["leakage"] is not None]
    top = max(r["leakage"] for r in scored)
    best = tiny_result.strongest
    assert best is not None and best["leakage"] == top
    # ties go to more people revealed, then to the earlier attack
    tied = [r for r in scored if r["leakage"] == top]
    most = max(r["revealed"] for r in tied)
    assert best["kind"] == next(r["kind"] for r in tied if r["revealed"] == most)
    by_kind = {r["kind"]: r for r in tiny_result.attacks}
    # exact answers: full rank recovers all 60 people, one targeted query does not
    assert by_kind["full_rank"]["leakage"] == 100.0 and by_kind["full_rank"]["revealed"] == 60
    assert by_kind["single_query"]["leakage"] < 100.0
    assert best["leakage"] == 100.0
    assert tiny_result.to_json()["strongest"]["kind"] == best["kind"]


def test_honest_developers_keep_reporting_utility(tiny_result: Any) -> None:
    for record in tiny_result.attacks:
        if record["applicable"]:
            # exact answers: the honest choice is the exact-answer choice, with no error
            assert record["honest"] == {"alice": {"deployed_agrees": True, "metric_error": 0.0}}
            assert record["median_abs_error"] == 0.0


def test_table_marks_the_strongest_and_lists_the_rest(tiny_result: Any) -> None:
    text = format_red_team(tiny_result)
    best = tiny_result.strongest["kind"]
    assert f"strongest attack: {best}, leakage 100.0%" in text
    assert any(line.startswith(f"*{best} ") for line in text.splitlines())
    assert sum(line.startswith("*") for line in text.splitlines()) == 2  # the row and the key
    for kind in ("eo_reveal", "budget_aware"):
        line = next(line for line in text.splitlines() if line.startswith(f" {kind} "))
        assert "not applicable" in line


def test_the_scenarios_own_configuration_is_used_and_each_world_is_alone() -> None:
    scenario = parse_scenario(TINY)
    plans = {p.kind: p for p in plan_attacks(scenario)}
    single = plans["single_query"].developer
    assert single is not None and single.strategy.targets == [3]  # type: ignore[union-attr]
    world = world_of(scenario, plans["full_rank"])
    assert [d.id for d in world.developers] == ["alice", "full_rank"]
    assert world.developers[1].organization == "redteam-full_rank"
    assert world.red_team is None and world.grid is None
    assert world.compliance == scenario.compliance and world.auditor == scenario.auditor
    with pytest.raises(ValueError, match="does not apply"):
        world_of(scenario, plans["eo_reveal"])


def test_policy_tunes_budget_aware_and_metric_switching() -> None:
    plans = {p.kind: p for p in plan_attacks(parse_scenario(NOISY))}
    assert [p for p in plans] == list(ATTACK_KINDS)
    budget = plans["budget_aware"].developer
    assert budget is not None
    assert budget.strategy.epsilon_per_model == 2.0  # type: ignore[union-attr]
    assert budget.strategy.budget == 90.0  # type: ignore[union-attr]  # the smallest budget
    switching = plans["metric_switching"].developer
    assert switching is not None and switching.strategy.metrics == ["sp", "eo"]  # type: ignore[union-attr]
    assert plans["eo_reveal"].applicable and plans["eo_reveal"].metric == "eo"
    assert not plans["equalized_odds_reveal"].applicable
    assert not plans["abs_sp_partition"].applicable
    per_batch = parse_scenario(NOISY.replace("epsilon: 2.0}", "epsilon: 2.0, per: batch}"))
    batch_plan = {p.kind: p for p in plan_attacks(per_batch)}["budget_aware"]
    assert not batch_plan.applicable and "per batch" in str(batch_plan.reason)
    unbudgeted = parse_scenario(
        NOISY.replace("    - {kind: budget, epsilon: 300.0}\n", "").replace(
            "    - {kind: budget, epsilon: 90.0, scope: organization}\n", ""
        )
    )
    plan = {p.kind: p for p in plan_attacks(unbudgeted)}["budget_aware"]
    assert not plan.applicable and "budget" in str(plan.reason)


def test_proxy_attacks_need_an_external_sample() -> None:
    german = parse_scenario(
        TINY.replace("{dataset: synthetic, n: 60, minority: 10}", "{dataset: german, n: 100}")
    )
    (plan,) = plan_attacks(german, ["proxy_prior"])
    assert not plan.applicable and "external labelled sample" in str(plan.reason)


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown attack kinds"):
        plan_attacks(parse_scenario(TINY), ["honest_selection"])


def test_an_executor_gives_the_serial_result(tiny_result: Any, tmp_path: Path) -> None:
    scenario = parse_scenario(TINY)
    with ThreadPoolExecutor(max_workers=2) as pool:
        pooled = run_red_team(scenario, log_dir=tmp_path, executor=pool)

    def strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k != "log"} for r in records]

    assert strip(pooled.attacks) == strip(tiny_result.attacks)
    assert pooled.strongest["kind"] == tiny_result.strongest["kind"]


def test_strongest_breaks_ties_by_people_revealed() -> None:
    records = [
        {"kind": "a", "applicable": True, "leakage": 70.0, "revealed": 40},
        {"kind": "b", "applicable": True, "leakage": 80.0, "revealed": 30},
        {"kind": "c", "applicable": True, "leakage": 80.0, "revealed": 35},
        {"kind": "d", "applicable": True, "leakage": 80.0, "revealed": 35},
        {"kind": "e", "applicable": False, "reason": "no"},
        {"kind": "f", "applicable": True, "leakage": None, "revealed": None},
    ]
    assert strongest(records)["kind"] == "c"  # type: ignore[index]
    assert strongest(records[4:]) is None


def test_strongest_over_runs_averages_each_attack_over_seeds() -> None:
    runs = [
        [{"kind": "a", "leakage": 90.0, "revealed": 50}, {"kind": "b", "leakage": 70.0}],
        [{"kind": "a", "leakage": 50.0, "revealed": 30}, {"kind": "b", "leakage": 80.0}],
    ]
    row = strongest_over_runs("p", runs, source="red team")
    # a: mean 70, b: mean 75 -> b, though a won the first seed
    assert row["attack"] == "b" and row["leakage"] == pytest.approx(75.0)
    assert row["leakage_sd"] == pytest.approx(7.0710678, rel=1e-6)
    assert row["runs"] == 2 and row["source"] == "red team" and row["leakage_ceiling"] is None
