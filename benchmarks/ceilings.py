"""The cost of the ceilings beside the run they judge: the answers level must not double a run.

    python benchmarks/ceilings.py [--section small|large|all] [--json]

Each case runs one scenario through the simulator in a fresh child process and times, inside the
same run, the three parts of the ceilings' work: the evaluator's per-person accounting of every
release as it happens (``Exposure.__call__``: each person's shift in each answered model), the
per-person composition when the run ends (``Exposure.finish``: the answers ceiling and who is
exposed), and the policy and audit-set ceilings of the summary (``ceilings`` in the tally). The
BASELINE is the rest of the same run (data, base model, the attack, the answers, the log): the
printed ratio is ceiling seconds / baseline seconds, and the target is at most 1.0 (the answers
ceiling may not more than double a run).

``small``
    The policy grid's cell: Adult, n = 1,000, the compressed-sensing attacker with 400 models in
    batches of 50 and the honest developer with 10 candidates, Laplace (then Attribute-Conceal)
    at epsilon 1 per model.
``large``
    The whole Adult White/Black population, n = 43,131, 20,000 models regenerated from the
    attacker's seed in batches of 200 (``benchmarks/scale_adult.yaml``), answered with Laplace at
    epsilon 1 per model instead of exactly.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET_RATIO = 1.0

SMALL = """
name: ceiling_cost
seed: 42
horizon_days: 30
data: {dataset: adult, protected: race, n: 1000}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 400, perturbation: 0.1, batch: 50}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 10}
compliance:
  metrics: [sp]
  policy:
    - {kind: noise, mechanism: MECHANISM, epsilon: 1.0}
"""


def child(case: str) -> dict[str, Any]:
    """One run with its ceiling work timed (in its own process)."""
    from biasleak.sim import exposure
    from biasleak.sim.scenario import load_scenario, parse_scenario
    from biasleak.sim.summary import tally as _tally
    from biasleak.sim.world import run_scenario

    spent = {"accounting": 0.0, "answers": 0.0, "levels": 0.0}

    def timed(part: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - start

        return wrapper

    exposure.Exposure.__call__ = timed("accounting", exposure.Exposure.__call__)  # type: ignore
    exposure.Exposure.finish = timed("answers", exposure.Exposure.finish)  # type: ignore
    _tally.ceilings = timed("levels", _tally.ceilings)
    import biasleak.sim.summary as summary_module

    summary_module.ceilings = _tally.ceilings  # summarize calls it through its own import
    if case.startswith("small"):
        mechanism = case.split(":", 1)[1]
        scenario = parse_scenario(SMALL.replace("MECHANISM", mechanism))
    else:
        scenario = load_scenario(
            HERE / "scale_adult.yaml",
            overrides=["compliance.policy=[{kind: noise, mechanism: laplace, epsilon: 1.0}]"],
        )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as logs:
        summary = run_scenario(scenario, log_dir=logs).summary
    seconds = time.perf_counter() - start
    mallory = summary["developers"]["mallory"]
    ceiling = sum(spent.values())
    return {
        "case": case,
        "seconds": seconds,
        "baseline_seconds": seconds - ceiling,
        **{f"{k}_seconds": v for k, v in spent.items()},
        "ratio": ceiling / max(seconds - ceiling, 1e-9),
        "leakage": mallory["leakage"],
        "ceilings": [
            mallory.get(k) for k in ("leakage_ceiling", "audit_set_ceiling", "answers_ceiling")
        ],
        "person": (mallory.get("person_ceiling") or {}).get("answers"),
        "answered": mallory["answered"],
    }


def _spawn(case: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", case], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child {case} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", choices=("small", "large", "all"), default="all")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    cases = []
    if args.section in ("small", "all"):
        cases += ["small:laplace", "small:attribute_conceal"]
    if args.section in ("large", "all"):
        cases += ["large"]
    results = [_spawn(c) for c in cases]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{'case':<26} {'run s':>7} {'baseline s':>10} {'accounting':>10} {'answers':>8} "
        f"{'levels':>7} {'ceilings/baseline':>17}  ceilings (policy, audit set, answers; person)"
    )
    for r in results:
        bounds = ", ".join("-" if c is None else f"{c:.1f}" for c in r["ceilings"])
        person = "-" if r["person"] is None else f"{r['person']:.1f}"
        verdict = "ok" if r["ratio"] <= TARGET_RATIO else "ABOVE TARGET"
        print(
            f"{r['case']:<26} {r['seconds']:>7.1f} {r['baseline_seconds']:>10.1f} "
            f"{r['accounting_seconds']:>10.2f} {r['answers_seconds']:>8.2f} "
            f"{r['levels_seconds']:>7.2f} {r['ratio']:>12.2f}x {verdict:<4} {bounds}; {person}"
        )
    print(f"target: ceilings at most {TARGET_RATIO:g}x the rest of the run (baseline)")


if __name__ == "__main__":
    main()
