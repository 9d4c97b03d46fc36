"""Scoring functions of the evaluator against hand calculations, and the leakage ceiling."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from biasleak.agents.strategies import Estimate
from biasleak.mechanisms.ceiling import (
    ReleaseSpec,
    balanced_accuracy_bound,
    ceilings,
    proxy_prior_ceiling,
)
from biasleak.sim.evaluation import calibration, leakage, tpr_at_fpr
from biasleak.sim.report import aggregate, compare_rows, format_compare, format_run
from biasleak.sim.runlog import read_log
from biasleak.sim.scenario import parse_scenario
from biasleak.sim.summary import DeveloperSummary, RunSummary, summarize
from biasleak.sim.world import run_scenario

TRUTH = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 1])


def test_leakage_is_balanced_accuracy() -> None:
    # right: both of group 0 and 6 of the 8 of group 1 -> 50 (2/2 + 6/8) = 87.5
    guess = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    assert leakage(guess, TRUTH) == (pytest.approx(87.5), 8)
    assert leakage(np.ones(10), TRUTH)[0] == pytest.approx(50.0)  # a constant guess
    assert leakage(1 - TRUTH, TRUTH)[0] == pytest.approx(0.0)


def test_tpr_at_low_fpr() -> None:
    perfect = Estimate(TRUTH.astype(np.int8), np.ones(10))
    assert tpr_at_fpr(perfect, TRUTH) == 1.0
    assert tpr_at_fpr(Estimate(np.ones(10, np.int8), np.zeros(10)), TRUTH) == 0.0
    # person 0 (a = 0) most confidently accused, then person 2 (a = 1): with no false positive
    # allowed (1% of 8 people), only person 0 is accused -> TPR 1/2
    guess = np.array([0, 1, 0, 1, 1, 1, 1, 1, 1, 1], np.int8)
    confidence = np.array([2.0, 0.1, 1, 1, 1, 1, 1, 1, 1, 1])
    assert tpr_at_fpr(Estimate(guess, confidence), TRUTH) == 0.5
    # allowing one false positive in 8 (12.5%): persons 0, 2 (the false one) and then person 1
    # (guessed 1 with the least confidence, score -0.1) are accused -> both of group 0 found
    assert tpr_at_fpr(Estimate(guess, confidence), TRUTH, fpr=0.125) == 1.0
    # ties are accused together: equal confidence for a true and a false accusation
    tied = Estimate(np.array([0, 1, 0, 1, 1, 1, 1, 1, 1, 1], np.int8), np.ones(10))
    assert tpr_at_fpr(tied, TRUTH) == 0.0
    assert tpr_at_fpr(tied, TRUTH, fpr=0.125) == 0.5


def test_calibration_among_confident_people() -> None:
    guess = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 0], np.int8)  # person 9 is wrong
    probability = np.array([0.95, 0.5, 0.9, 0.99, 0.2, 0.2, 0.2, 0.2, 0.2, 0.97])
    # people given >= 0.9: 0, 2, 3 (right) and 9 (wrong) -> 3 of 4
    assert calibration(Estimate(guess, np.ones(10), probability=probability), TRUTH) == (0.75, 4)
    assert calibration(Estimate(guess, np.ones(10)), TRUTH) == (None, None)
    low = Estimate(guess, np.ones(10), probability=np.full(10, 0.6))
    assert calibration(low, TRUTH) == (None, 0)


def _header(sampler: str = "safe", **extra: Any) -> dict[str, Any]:
    return {
        "event": "header",
        "scenario": "ceiling",
        "seed": 0,
        "proxy_baseline_leakage": 61.0,
        "developers": [
            {"id": "mallory", "organization": "acme", "strategy": "compressed_sensing"},
            {"id": "quinn", "organization": "acme", "strategy": "proxy_prior"},
            {"id": "idle", "organization": "other", "strategy": "single_query"},
        ],
        "resolved_scenario": {
            "compliance": {"policy": [{"kind": "noise", "bounding": "raw", "sampler": sampler}]}
        },
        **extra,
    }


def _answered(sender: str, epsilon: float, *, models: int = 1, cached: int = 0) -> dict[str, Any]:
    return {
        "event": "query_answered",
        "agent": "compliance",
        "t": 1.0,
        "query_id": f"{sender}-{epsilon}",
        "sender": sender,
        "organization": "acme",
        "metric": "sp",
        "models": models,
        "mechanism": "laplace",
        "epsilon_charged": epsilon,
        "delta_charged": 0.0,
        "cached": cached,
    }


EVALUATION = {
    "event": "evaluation",
    "agent": "evaluator",
    "t": 2.0,
    "developer": "mallory",
    "version": 1,
    "leakage": 70.0,
    "leakage_relabelled": 70.0,
    "revealed": 7,
    "confident_right": 3,
    "confident_wrong": 1,
    "tpr_at_1pct_fpr": 0.1,
    "models_used": 3,
    "calibration_090": 0.8,
    "calibration_090_people": 5,
}
EVENTS = [
    *[_answered("mallory", 0.5) for _ in range(3)],
    _answered("mallory", 0.0, cached=1),  # served from the cache: adds nothing
    _answered("quinn", 0.5),
    EVALUATION,
]


def test_summary_ceilings_from_events() -> None:
    s = summarize([_header(), *EVENTS])
    m, q, idle = (s["developers"][k] for k in ("mallory", "quinn", "idle"))
    three = ceilings([ReleaseSpec("laplace", 0.5)] * 3).policy  # n unknown: n-free pairs
    assert m["leakage_ceiling"] == pytest.approx(100 * three.balanced_accuracy)
    assert m["person_ceiling"]["policy"] == pytest.approx(100 * three.person)
    assert m["audit_set_ceiling"] is None  # the header has no group sizes
    assert m["ceiling_kind"] == "no_side_information"
    assert m["privacy_loss"]["pure_epsilon"] == pytest.approx(1.5)
    assert m["estimated"] is True and m["leakage"] == 70.0
    assert (m["calibration_090"], m["calibration_090_people"]) == (0.8, 5)
    assert 50.0 < m["leakage_ceiling"] < 100 * balanced_accuracy_bound(1.5)
    # no estimate: scored at the prior guess, a coin flip or the proxy's guess
    assert (idle["leakage"], idle["estimated"], idle["leakage_ceiling"]) == (50.0, False, 50.0)
    assert idle["privacy_loss"] == {"epsilon": 0.0, "delta": 0.0, "pure_epsilon": 0.0}
    assert (q["leakage"], q["estimated"], q["ceiling_kind"]) == (61.0, False, "proxy_prior")
    assert q["leakage_ceiling"] is None  # the proxy's probabilities were not logged
    acme = s["organizations"]["acme"]
    assert acme["developers"] == ["mallory", "quinn"]
    assert acme["privacy_loss"]["pure_epsilon"] == pytest.approx(2.0)
    assert s["organizations"]["other"]["leakage_ceiling"] == 50.0
    # with the proxy's probabilities (argument or header) the proxy_prior ceiling is computed
    prior = np.array([0.9, 0.2, 0.6, 0.7, 0.5])
    expected = proxy_prior_ceiling(ceilings([ReleaseSpec("laplace", 0.5)]).policy.flips, prior)
    for summary in (
        summarize([_header(), *EVENTS], prior=prior),
        summarize([_header(proxy_probabilities=prior.tolist()), *EVENTS]),
    ):
        assert summary["developers"]["quinn"]["leakage_ceiling"] == pytest.approx(expected)
        assert summary["developers"]["mallory"]["leakage_ceiling"] == m["leakage_ceiling"]
    # a floating-point sampler proves nothing
    naive = summarize([_header("naive"), *EVENTS])
    assert naive["developers"]["mallory"]["leakage_ceiling"] == 100.0
    assert naive["developers"]["mallory"]["privacy_loss"]["epsilon"] == "inf"


def test_tables_show_the_ceiling_and_never_a_blank_leakage() -> None:
    s = summarize([_header(), *EVENTS])
    text = format_run(s)
    assert "ceiling" in text and f"{s['developers']['mallory']['leakage_ceiling']:.1f}%" in text
    assert "50.0%°" in text
    rows = compare_rows([("ceiling", s)])
    assert all(r["leakage"] is not None for r in rows)
    old = {**s, "developers": {k: {**d, "leakage": None} for k, d in s["developers"].items()}}
    assert [r["leakage"] for r in compare_rows([("old", old)])] == [50.0, 61.0, 50.0]
    table = aggregate(rows)
    assert {r["developer"]: r["leakage_ceiling"] for r in table}["idle"] == 50.0
    assert "policy %" in format_compare(table) and "answers %" in format_compare(table)


# The grid: every policy, every attack of paper_attacks.yaml (bar equalized odds, which no noise
# stage answers) on a 300-person synthetic audit set with 100 disadvantaged people.
GRID_POLICIES = {
    "exact": "[]",
    "laplace_budget_1": "[{kind: budget, epsilon: 1.0, scope: organization}, "
    "{kind: noise, mechanism: laplace, epsilon: 0.05}]",
    "laplace_budget_4": "[{kind: budget, epsilon: 4.0, scope: organization}, "
    "{kind: noise, mechanism: laplace, epsilon: 0.05}]",
    "laplace_batch_1": "[{kind: noise, mechanism: laplace, epsilon: 1.0, per: batch}]",
    "conceal_budget_4": "[{kind: budget, epsilon: 4.0, scope: organization}, "
    "{kind: noise, mechanism: attribute_conceal, epsilon: 0.05}]",
}
N1, N0 = 200, 100
CEILINGS = ("answers_ceiling", "audit_set_ceiling", "leakage_ceiling")
MARGIN = 3.5 * 50.0 * math.sqrt(1 / (4 * N1) + 1 / (4 * N0))
"""The ceiling bounds the expected leakage; one run scatters around it. For guesses that are
independent coin flips at the ceiling the balanced accuracy has standard deviation
50 sqrt(1/(4 N1) + 1/(4 N0)) = 3.1 points, and 3.5 of them (10.7 points) are exceeded with
probability 2.3e-4 per developer (normal approximation): with 40 developer-runs, a false alarm
about once in a hundred runs of this test, for a fixed seed never. Guesses that move together
scatter more; the check still catches any release that leaks far beyond what it is charged."""


@pytest.mark.slow
def test_measured_leakage_never_exceeds_the_ceiling(tmp_path: Path) -> None:
    text = (
        Path(__file__).resolve().parents[2].joinpath("scenarios", "paper_attacks.yaml").read_text()
    )
    text = "\n".join(line for line in text.splitlines() if "id: eodds" not in line)
    text = text.replace("minority: 30", f"minority: {N0}")
    text = text.replace("metrics: [sp, abs_sp, eo, eodds]", "metrics: [sp, abs_sp, eo]")
    assert f"minority: {N0}" in text and "eodds" not in text
    informative = 0
    for name, policy in GRID_POLICIES.items():
        scenario = parse_scenario(text.replace("policy: []", f"policy: {policy}"))
        summary = run_scenario(scenario, seed=1, log_dir=tmp_path, log_name=name).summary
        for ident, d in summary["developers"].items():
            assert d["ceiling_kind"] == "no_side_information"
            # the synthetic features say nothing about the attribute (group_shift 0): the
            # no-side-information ceilings apply; each level is at most the one above it
            answers, audit, policy = (d[k] for k in CEILINGS)
            assert d["leakage"] <= answers + MARGIN, (name, ident, d)
            assert answers <= audit + 1e-9 and audit <= policy + 1e-9, (name, ident, d)
            person = d["person_ceiling"]
            assert person["answers"] <= person["audit_set"] <= person["policy"] + 1e-9
            informative += answers < 90.0 and d["answered"] > 0
        if name == "exact":  # exact answers: the attacks succeed and nothing is proved
            assert summary["developers"]["full"]["leakage"] == 100.0
            for key in CEILINGS:
                assert {d[key] for d in summary["developers"].values()} == {100.0}
    assert informative >= 10  # the check is not vacuous: many ceilings are far below 100%


# A short run with every part a summary can have: an honest developer (its deployment keys), a
# proxy-prior attacker (its ceiling kind), refusals, noisy releases and an auditor.
MIXED = """
name: mixed
seed: 3
horizon_days: 5
data: {dataset: adult, protected: race, n: 300}
developers:
  - {id: proxy, organization: one, strategy: {kind: proxy_prior, queries: 40}}
  - {id: alice, organization: one, strategy: {kind: honest_selection, candidates: 5}}
  - {id: mallory, organization: two, strategy: {kind: compressed_sensing, queries: 120, batch: 20}}
compliance:
  metrics: [sp]
  policy:
    - {kind: rate_limit, per_day: 40, scope: organization}
    - {kind: budget, epsilon: 3.0, scope: organization}
    - {kind: noise, mechanism: laplace, epsilon: 0.05}
auditor: {enabled: true, every_hours: 24, detectors: [near_duplicate, low_support]}
"""


def test_a_real_summary_has_exactly_the_typed_keys(tmp_path: Path) -> None:
    run = run_scenario(parse_scenario(MIXED), log_dir=tmp_path)
    summary: Any = summarize(read_log(run.log_path))
    adapter = TypeAdapter(RunSummary)
    adapter.validate_python(summary, strict=True)
    for synthetic in (summarize([_header(), *EVENTS]), summarize([_header("naive"), *EVENTS])):
        adapter.validate_python(synthetic, strict=True)
    devs = summary["developers"]
    # the run reaches the parts of the types that are there only sometimes
    assert "deployed" in devs["alice"] and "deployed" not in devs["mallory"]
    assert devs["proxy"]["ceiling_kind"] == "proxy_prior"
    assert summary["compliance"]["refused"] and summary["compliance"]["by_metric"]
    # the types list the keys in the summary's order
    # (``routes`` only in runs with fair-learning services, which this one has not)
    assert list(summary) == list(RunSummary.__annotations__)[: len(summary)]
    assert "routes" not in summary and list(RunSummary.__annotations__)[-1] == "routes"
    for d in devs.values():
        assert list(d) == list(DeveloperSummary.__annotations__)[: len(d)]
    # a key the types do not name is caught, at every level of the summary
    nested = (
        summary,
        devs["mallory"],
        devs["mallory"]["privacy_loss"],
        summary["organizations"]["one"],
        summary["compliance"],
        summary["compliance"]["by_metric"]["sp"],
        summary["auditor"],
    )
    for part in nested:
        part["surprise"] = 1
        with pytest.raises(ValidationError) as caught:
            adapter.validate_python(summary, strict=True)
        assert [e["type"] for e in caught.value.errors()] == ["extra_forbidden"]
        del part["surprise"]
    # and so is a key gone missing, or a value of another type
    for key, broken in (("sent", None), ("estimated", 1), ("refused", {"budget_exhausted": 1.5})):
        saved = devs["mallory"].pop(key)
        if broken is not None:
            devs["mallory"][key] = broken
        with pytest.raises(ValidationError):
            adapter.validate_python(summary, strict=True)
        devs["mallory"][key] = saved
    adapter.validate_python(summary, strict=True)  # restored: valid again
