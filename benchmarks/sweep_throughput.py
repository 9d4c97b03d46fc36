"""Sweep throughput with 1 and 2 worker processes, and memory per worker, in one run.

    python benchmarks/sweep_throughput.py [--runs 16] [--json] [--table1]

A small sweep (synthetic data, n = 300, one compressed-sensing attacker with 150 models, exact
answers and Attribute-Conceal at four epsilons) runs once with a single worker (the BASELINE) and
once with two worker processes; the script prints runs per minute for each, the speed-up ratio
and the peak memory of a worker process (the high-water mark of the pool's children). With
``--table1`` it also times the full reproduction of the paper's Table 1 (both halves, 10 seeds,
2 workers: ``scenarios/paper/table1_n100.yaml`` and ``table1_n1000.yaml``).
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from biasleak.sim.executors import pool
from biasleak.sim.sweep import run_sweep

SCENARIO = """\
name: throughput
seed: 0
horizon_days: 5
data: {{dataset: synthetic, n: 300, minority: 20}}
developers:
  - {{id: mallory, organization: acme, strategy: {{kind: compressed_sensing, queries: 150,
      batch: 150, decoder: basis_pursuit}}}}
compliance:
  metrics: [sp]
  answer_hours: 0.01
  policy:
    - {{kind: noise, mechanism: attribute_conceal, epsilon: 10.0, per: batch}}
grid:
  compliance.policy.0.epsilon: [10.0, 100.0, 1000.0, .inf]
  seeds: {seeds}
"""


def timed_sweep(path: Path, out: Path, workers: int) -> tuple[float, int]:
    start = time.perf_counter()
    if workers == 1:
        result = run_sweep(path, out=out, progress=None)
    else:
        with pool("process", workers=workers) as executor:  # one native thread per worker
            result = run_sweep(path, out=out, executor=executor, workers=workers, progress=None)
    return time.perf_counter() - start, result.ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16, help="runs per sweep (multiple of 4)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--table1", action="store_true", help="also time Table 1 (minutes)")
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "throughput.yaml"
        scenario.write_text(SCENARIO.format(seeds=max(args.runs // 4, 1)), encoding="utf-8")
        for workers in (1, 2):
            seconds, ok = timed_sweep(scenario, Path(tmp) / f"w{workers}", workers)
            rows[workers] = {
                "workers": workers,
                "runs": ok,
                "seconds": seconds,
                "runs_per_minute": 60.0 * ok / seconds,
            }
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
        table1 = None
        if args.table1:
            root = Path(__file__).resolve().parent.parent / "scenarios" / "paper"
            start = time.perf_counter()
            with pool("process", workers=2) as executor:
                for name in ("table1_n100", "table1_n1000"):
                    run_sweep(
                        root / f"{name}.yaml",
                        out=Path(tmp) / name,
                        executor=executor,
                        workers=2,
                        progress=None,
                    )
            table1 = time.perf_counter() - start
    result = {
        "baseline": "1 worker",
        "one_worker_runs_per_minute": rows[1]["runs_per_minute"],
        "two_workers_runs_per_minute": rows[2]["runs_per_minute"],
        "scaling": rows[2]["runs_per_minute"] / rows[1]["runs_per_minute"],
        "worker_peak_mib": peak,
        "table1_seconds": table1,
    }
    if args.json:
        print(json.dumps(result))
        return
    for w in (1, 2):
        r = rows[w]
        print(
            f"{w} worker(s): {r['runs']} runs in {r['seconds']:.1f} s = "
            f"{r['runs_per_minute']:.1f} runs/minute"
        )
    print(f"scaling, 2 workers vs the 1-worker baseline: {result['scaling']:.2f}x")
    print(f"peak memory of a worker process: {peak:.0f} MiB")
    if table1 is not None:
        print(f"Table 1 reproduction (320 runs, 2 workers): {table1 / 60:.1f} minutes")


if __name__ == "__main__":
    main()
