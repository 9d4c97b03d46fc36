"""Every shipped scenario runs, and its summary matches the checked one in tests/golden/.

Golden files are regression checks (like SimPy's documentation examples diffed against their
output): counts, epsilons and reasons must match exactly, errors to 1e-6 relative, and the
decoder-dependent numbers (leakage, people revealed) within a small tolerance, because a linear
solver of another version may land on another optimum of a degenerate program. Beside them, the
tests check what the scenarios are meant to show, from first principles. To refresh the golden
files after an intended change:
``BIASLEAK_UPDATE_GOLDEN=1 python -m pytest tests/sim/test_scenarios.py``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from biasleak.sim.redteam import run_red_team
from biasleak.sim.scenario import load_scenario
from biasleak.sim.world import run_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
RED_TEAMS = [p for p in SCENARIOS if load_scenario(p).red_team is not None]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TOLERANT = {  # percentage points; people (1% of n = 1000)
    "leakage": 1.0,
    "leakage_relabelled": 1.0,
    "revealed": 10,
    "confident_right": 10,
    "confident_wrong": 10,
    "tpr_at_1pct_fpr": 0.02,
}


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    log_dir = tmp_path_factory.mktemp("logs")
    for path in SCENARIOS:
        result = run_scenario(load_scenario(path), log_dir=log_dir)
        out[path.stem] = json.loads(json.dumps(result.summary))
    return out


def _compare(actual: Any, expected: Any, where: str) -> list[str]:
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            return [
                f"{where}: keys {sorted(actual) if isinstance(actual, dict) else actual} "
                f"!= {sorted(expected)}"
            ]
        out = []
        for key in expected:
            if key == "log":
                continue
            tolerant = key in TOLERANT and isinstance(expected[key], int | float)
            if tolerant and actual[key] is not None:
                if abs(actual[key] - expected[key]) > TOLERANT[key]:
                    out.append(f"{where}.{key}: {actual[key]} vs {expected[key]}")
                continue
            out.extend(_compare(actual[key], expected[key], f"{where}.{key}"))
        return out
    if isinstance(expected, list):  # element by element, floats to the same tolerance
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: {actual!r} vs {expected!r}"]
        problems = [
            _compare(a, e, f"{where}[{i}]")
            for i, (a, e) in enumerate(zip(actual, expected, strict=True))
        ]
        return [f"{where}: {actual!r} vs {expected!r}"] if any(problems) else []
    if isinstance(expected, float) and isinstance(actual, int | float):
        ok = math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9)
        return [] if ok else [f"{where}: {actual} vs {expected}"]
    return [] if actual == expected else [f"{where}: {actual!r} vs {expected!r}"]


def test_every_scenario_has_a_golden_summary() -> None:
    assert SCENARIOS, "no scenario files found"
    if os.environ.get("BIASLEAK_UPDATE_GOLDEN"):
        return
    missing = [p.stem for p in SCENARIOS if not (GOLDEN / f"{p.stem}.json").exists()]
    assert not missing, f"scenarios without a golden summary: {missing}"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_summary_matches_golden(path: Path, summaries: dict[str, dict[str, Any]]) -> None:
    summary = summaries[path.stem]
    golden = GOLDEN / f"{path.stem}.json"
    if os.environ.get("BIASLEAK_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        stored = {k: v for k, v in summary.items() if k != "log"}
        golden.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(golden.read_text(encoding="utf-8"))
    problems = _compare(summary, {**expected, "log": None}, path.stem)
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def red_teams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    log_dir = tmp_path_factory.mktemp("redteam")
    for path in RED_TEAMS:
        result = run_red_team(load_scenario(path), log_dir=log_dir)
        out[path.stem] = json.loads(json.dumps(result.to_json()))
    return out


def _red_team_digest(result: dict[str, Any]) -> dict[str, Any]:
    """What a red team's golden file checks: the verdict and every attack's leakage."""
    return {
        "strongest": result["strongest"]["kind"] if result["strongest"] else None,
        "attacks": {
            r["kind"]: {"applicable": r["applicable"], "leakage": r.get("leakage")}
            for r in result["attacks"]
        },
    }


@pytest.mark.parametrize("path", RED_TEAMS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_red_team_matches_golden(path: Path, red_teams: dict[str, dict[str, Any]]) -> None:
    digest = _red_team_digest(red_teams[path.stem])
    golden = GOLDEN / f"{path.stem}.redteam.json"
    if os.environ.get("BIASLEAK_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(digest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(golden.read_text(encoding="utf-8"))
    problems = _compare(digest, expected, f"{path.stem}.redteam")
    assert not problems, "\n".join(problems)
    # the verdict is the maximum over the applicable attacks
    leaks = [a["leakage"] for a in digest["attacks"].values() if a["applicable"]]
    assert digest["attacks"][digest["strongest"]]["leakage"] == max(leaks)


def _dev(summaries: dict[str, dict[str, Any]], scenario: str, who: str) -> dict[str, Any]:
    return summaries[scenario]["developers"][who]


def test_exact_answers_leak_and_rate_limits_only_delay(summaries: dict[str, Any]) -> None:
    open_ = _dev(summaries, "cs_no_defense", "mallory")
    limited = _dev(summaries, "cs_rate_limit", "mallory")
    assert open_["answered"] == 401 and open_["refused"] == {}
    assert open_["leakage"] > 75.0
    # Same models, same exact answers: the rate limit changes when, not what, the attacker learns.
    assert limited["answered"] == open_["answered"]
    assert limited["leakage"] == open_["leakage"]
    assert limited["refused"].get("rate_limited", 0) > 0


def test_noise_at_eps_02_per_model_is_proven_safe_for_the_audit_set_only(
    summaries: dict[str, Any],
) -> None:
    for name in ("cs_laplace", "cs_attribute_conceal"):
        mallory = _dev(summaries, name, "mallory")
        assert mallory["answered"] == 401
        assert mallory["epsilon_spent"] == pytest.approx(0.2 * 401)
        # eps 80 per person in all: the policy's guarantee (any audit set of 1,000 people, a
        # group of one included) says almost nothing; on this audit set, with its 115 people of
        # group 0, the same answers move by 1/N1 + 1/N0 at most, against noise calibrated to the
        # worst audit set (Laplace) or to this one's smooth sensitivity (Attribute-Conceal)
        assert mallory["audit_set_ceiling"] < 62.0
        assert mallory["answers_ceiling"] <= mallory["audit_set_ceiling"]
        assert mallory["audit_set_ceiling"] <= mallory["leakage_ceiling"]
        assert mallory["person_ceiling"]["answers"] <= mallory["person_ceiling"]["audit_set"]
        assert mallory["leakage"] < _dev(summaries, "cs_no_defense", "mallory")["leakage"] - 25.0
        # Adult's features guess race (the proxy baseline): what an attacker measures beyond the
        # no-side-information ceilings comes from there, and the answers add at most what the
        # per-person ceiling allows (biasleak.mechanisms.ceiling, side information)
        public = summaries[name]["proxy_baseline_leakage"]
        gain = mallory["person_ceiling"]["answers"] - 50.0
        assert mallory["leakage"] <= max(public, 50.0) + gain + 3.0
    lap = _dev(summaries, "cs_laplace", "mallory")
    # Laplace's noise, calibrated to a group of one, is far above what this audit set needs: the
    # guarantee proves nothing, this audit set's sizes nearly everything
    assert lap["leakage_ceiling"] > 95.0 and lap["audit_set_ceiling"] < 52.0
    # Attribute-Conceal's scale depends on the sizes only: a swap keeps it, so even the policy's
    # own ceiling is informative for an attacker that knows the sizes
    ac = _dev(summaries, "cs_attribute_conceal", "mallory")
    assert ac["leakage_ceiling"] < 75.0 < ac["person_ceiling"]["policy"]
    lap = summaries["cs_laplace"]["compliance"]["median_abs_error"]
    ac = summaries["cs_attribute_conceal"]["compliance"]["median_abs_error"]
    assert 0 < ac < lap


def test_budget_caps_what_the_organisation_gets_answered(summaries: dict[str, Any]) -> None:
    s = summaries["cs_budget"]
    assert s["compliance"]["epsilon_spent"] <= 100.0
    mallory = _dev(summaries, "cs_budget", "mallory")
    alice = _dev(summaries, "cs_budget", "alice")
    assert mallory["answered"] + alice["answered"] <= 100
    assert mallory["refused"].get("budget_exhausted", 0) > 0


def test_refuse_rules_and_auditor(summaries: dict[str, Any]) -> None:
    s = summaries["cs_refuse_rules_auditor"]
    mallory = s["developers"]["mallory"]
    assert mallory["refused"].get("low_support") == 1  # the one-person probe
    assert mallory["refused"].get("suspended", 0) > 0
    assert s["auditor"]["alerts"] >= 1
    assert mallory["answered"] < 401


def test_quickstart_policy(summaries: dict[str, Any]) -> None:
    s = summaries["quickstart"]
    assert s["compliance"]["epsilon_spent"] <= 10.0
    assert s["developers"]["mallory"]["refused"].get("suspended", 0) > 0
    assert s["developers"]["alice"]["answered"] == 10


def test_paper_attacks_against_exact_answers(summaries: dict[str, Any]) -> None:
    devs = summaries["paper_attacks"]["developers"]
    for who in ("full", "full_sm", "cs", "cs_box", "eodds"):
        assert devs[who]["leakage"] == 100.0, who
    assert devs["partition"]["leakage_relabelled"] == 100.0
    assert devs["single"]["confident_right"] == 5 and devs["single"]["confident_wrong"] == 0
    assert devs["pair"]["confident_right"] == 3 and devs["pair"]["confident_wrong"] == 0
    assert devs["cs_box"]["answered"] < devs["cs"]["answered"]


def test_averaging_beats_per_query_noise(summaries: dict[str, Any]) -> None:
    devs = summaries["adaptive_averaging"]["developers"]
    assert devs["averager"]["leakage"] > devs["oneshot"]["leakage"] + 10.0
    # the cache answered the probe's repeats: one charge, three answers
    assert devs["probe"]["answered"] == 3 and devs["probe"]["epsilon_spent"] == 20.0


def test_evasion_routes_around_refusals(summaries: dict[str, Any]) -> None:
    devs = summaries["adaptive_evasive"]["developers"]
    assert devs["plain"]["answered"] == 0
    assert devs["evader"]["leakage"] > 90.0
    assert set(devs["evader"]["refused"]) >= {"low_support", "near_duplicate"}


def test_sequential_stops_early(summaries: dict[str, Any]) -> None:
    devs = summaries["adaptive_sequential"]["developers"]
    assert devs["sequential"]["leakage"] == devs["fixed"]["leakage"] == 100.0
    assert devs["sequential"]["answered"] < devs["fixed"]["answered"]


def test_metric_switching_falls_back_to_eo(summaries: dict[str, Any]) -> None:
    dev = summaries["adaptive_metric_switching"]["developers"]["switcher"]
    assert dev["refused"] == {"metric_not_allowed": 1}
    assert dev["leakage"] > 75.0


def test_sybils_beat_identity_budgets_not_organisation_budgets(summaries: dict[str, Any]) -> None:
    per_identity = summaries["adaptive_sybil_identity"]["developers"]
    per_org = summaries["adaptive_sybil_organization"]["developers"]
    answered_identity = sum(per_identity[f"sybil.{k}"]["answered"] for k in range(1, 5))
    answered_org = sum(per_org[f"sybil.{k}"]["answered"] for k in range(1, 5))
    assert answered_identity > 3 * answered_org
    assert answered_org == per_org["single"]["answered"]
    assert per_identity["sybil.1"]["leakage"] > per_org["sybil.1"]["leakage"] + 10.0


def test_budget_aware_targets_reveal_their_person(summaries: dict[str, Any]) -> None:
    devs = summaries["adaptive_budget_aware"]["developers"]
    for who in ("target20", "target1"):
        assert devs[who]["confident_right"] == 1 and devs[who]["confident_wrong"] == 0
        assert devs[who]["epsilon_spent"] <= 2000.0


def test_proxy_prior_is_not_worse_than_the_proxy_baseline(summaries: dict[str, Any]) -> None:
    s = summaries["adaptive_proxy_prior"]
    assert s["proxy_baseline_leakage"] > 55.0
    assert s["developers"]["proxy"]["leakage"] >= s["proxy_baseline_leakage"] - 2.0
    # Attribute-Conceal at eps 1 per model over 200 models is eps 200 per person: the noise-aware
    # decoder gets well past a coin flip even without the proxy
    assert s["developers"]["plain"]["leakage"] > 55.0


def test_fp_probe_breaks_the_naive_sampler_only(summaries: dict[str, Any]) -> None:
    naive = _dev(summaries, "fp_probe_naive", "mallory")
    safe = _dev(summaries, "fp_probe", "mallory")
    assert naive["epsilon_spent"] == safe["epsilon_spent"]  # same policy but for the sampler
    n = summaries["fp_probe_naive"]["developers"]["mallory"]["answered"]
    # the float sampler: most people revealed with certainty, and never a wrong certainty
    assert naive["confident_wrong"] == 0 and naive["confident_right"] > 0.6 * n
    assert naive["leakage"] > 85.0
    # the grid sampler: nothing certain, leakage at chance
    assert safe["confident_right"] + safe["confident_wrong"] == 0
    assert safe["leakage"] < 60.0
