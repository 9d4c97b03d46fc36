"""The three ceilings end to end: a run's summary, its side file, cached answers, refusals."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from biasleak.mechanisms.ceiling import PersonLedger, person_bounds
from biasleak.mechanisms.policy.noise import UNDEFINED
from biasleak.sim.runlog import read_log
from biasleak.sim.scenario import parse_scenario
from biasleak.sim.summary import summarize
from biasleak.sim.world import run_scenario

SMALL = """
name: exposure
seed: 3
horizon_days: 5
data: {dataset: synthetic, n: 200, minority: 30}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 60, batch: 20}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 4}
compliance:
  metrics: [sp, eo]
  policy:
    - {kind: noise, mechanism: MECHANISM, epsilon: 0.5}
"""

CEILINGS = ("answers_ceiling", "audit_set_ceiling", "leakage_ceiling")


@pytest.mark.parametrize("mechanism", ["laplace", "attribute_conceal"])
def test_a_run_reports_three_ceilings_that_a_researcher_can_recompute(
    tmp_path: Path, mechanism: str
) -> None:
    scenario = parse_scenario(SMALL.replace("MECHANISM", mechanism))
    result = run_scenario(scenario, log_dir=tmp_path)
    summary = result.summary
    events = list(read_log(result.log_path))
    exposure = {
        e.get("developer") or e.get("organization"): e for e in events if e["event"] == "exposure"
    }
    assert set(exposure) == {"mallory", "alice", "acme"}
    arrays = np.load(result.log_path.with_suffix(".npz"))
    for who, record in [*summary["developers"].items(), *summary["organizations"].items()]:
        answers, audit, policy = (record[k] for k in CEILINGS)
        assert 50.0 <= answers <= audit <= policy <= 100.0, (who, record)
        person = record["person_ceiling"]
        assert 50.0 <= person["answers"] <= person["audit_set"] <= person["policy"] <= 100.0
        # the side file holds each ledger: the answers level recomposes from it alone
        flips = PersonLedger.from_arrays(arrays, f"exposure/{who}/flip")
        tv, _ = person_bounds(*flips.matrix())
        assert 50.0 * (1.0 + tv.max()) == pytest.approx(exposure[who]["person"], abs=1e-9)
        refs = PersonLedger.from_arrays(arrays, f"exposure/{who}/reference")
        f, _ = person_bounds(*refs.matrix())
        assert 50.0 * (1.0 + min(1.0, 2.0 * f.mean())) == pytest.approx(
            exposure[who]["balanced_accuracy"], abs=1e-9
        )
        assert record["exposure"]["people"] == 200
        most = record["exposure"]["most_exposed"]
        assert most[0][1] == pytest.approx(exposure[who]["person"])
        assert [p for _, p in most] == sorted((p for _, p in most), reverse=True)
    # the summary is rebuilt from the log alone
    rebuilt = summarize(events[:-1])
    assert rebuilt["developers"]["mallory"]["answers_ceiling"] == pytest.approx(
        summary["developers"]["mallory"]["answers_ceiling"]
    )
    mallory = summary["developers"]["mallory"]
    # the measured leakage stays under the answers ceiling (synthetic features say nothing of
    # the attribute) within a run's scatter: 3.5 standard deviations of independent guesses
    assert mallory["leakage"] <= mallory["answers_ceiling"] + 3.5 * 50 * math.sqrt(
        1 / (4 * 170) + 1 / (4 * 30)
    )


CACHED = """
name: cached
seed: 1
horizon_days: 2
data: {dataset: synthetic, n: 100, minority: 20}
developers:
  - id: first
    organization: one
    strategy: {kind: single_query, targets: [0, 1, 2, 3]}
  - id: second
    organization: two
    strategy: {kind: single_query, targets: [0, 1, 2, 3]}
compliance:
  metrics: [sp]
  policy:
    - {kind: cache}
    - {kind: noise, mechanism: laplace, epsilon: 1.0}
"""


def test_a_value_cached_for_another_identity_counts_for_its_new_reader(tmp_path: Path) -> None:
    """Both identities send the same one-person probes; whoever comes second is served the first
    one's released values, free for the budget but not for what it learns."""
    result = run_scenario(parse_scenario(CACHED), log_dir=tmp_path)
    events = list(read_log(result.log_path))
    answered = [e for e in events if e["event"] == "query_answered"]
    served = [e for e in answered if e.get("foreign")]
    assert served and all(e["epsilon_charged"] == 0.0 for e in served)
    reader = served[0]["sender"]
    other = "first" if reader == "second" else "second"
    s = result.summary["developers"]
    assert s[reader]["epsilon_spent"] < s[other]["epsilon_spent"]
    for key in CEILINGS:  # both saw the same four answers
        assert s[reader][key] == pytest.approx(s[other][key], abs=1e-6)
    assert s[reader]["person_ceiling"] == pytest.approx(s[other]["person_ceiling"], abs=1e-6)
    assert s[reader]["leakage_ceiling"] > 55.0


def _header() -> dict[str, Any]:
    return {
        "event": "header",
        "scenario": "refusal",
        "seed": 0,
        "audit": {"n": 10, "n1": 8, "n0": 2, "n11": 3, "n10": 0, "n01": 5, "n00": 2},
        "developers": [{"id": "eve", "organization": "x", "strategy": "eo_reveal"}],
        "resolved_scenario": {"compliance": {"policy": []}},
    }


def test_a_refusal_that_depends_on_the_attribute_is_an_exact_release() -> None:
    refused = {
        "event": "query_refused",
        "agent": "compliance",
        "t": 1.0,
        "query_id": "q1",
        "sender": "eve",
        "organization": "x",
        "models": 1,
        "reason": "invalid",
        "detail": UNDEFINED.format(metric="eo"),
        "retry_after": None,
    }
    other = {**refused, "query_id": "q2", "detail": "predictions must hold 10 values"}
    plain = summarize([_header(), other])["developers"]["eve"]
    assert plain["leakage_ceiling"] == 50.0  # a validation refusal releases nothing
    eve = summarize([_header(), other, refused])["developers"]["eve"]
    for key in CEILINGS:
        assert eve[key] == 100.0
    assert eve["privacy_loss"]["epsilon"] == "inf"
