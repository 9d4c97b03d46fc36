"""Speed of the vectorised fairness metrics against a per-model loop, measured in one run.

    python benchmarks/metrics_speed.py [--m 1000] [--n 50000] [--repeats 5] [--json]

Baseline ("per-model loop"): for each of the m models, the two group means with boolean masks,
the way one would write it without thinking about batches. Candidate: one call of
``biasleak.mechanisms.metrics.statistical_parity`` on the (m, n) matrix, which validates the input
and computes ``H @ w`` (one matrix-vector product). Reports the median wall time of each over the
repeats and the speed-up ratio; checks that both give the same answers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from biasleak.mechanisms.metrics import statistical_parity


def per_model_loop(h: np.ndarray, a: np.ndarray) -> np.ndarray:
    ones, zeros = a == 1, a == 0
    return np.array([row[ones].mean() - row[zeros].mean() for row in h])


def timed(func, *args, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = func(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1000)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    h = rng.uniform(size=(args.m, args.n))
    a = (rng.uniform(size=args.n) < 0.9).astype(np.int8)
    base_s, base = timed(per_model_loop, h, a, repeats=args.repeats)
    fast_s, fast = timed(lambda: statistical_parity(h, protected=a), repeats=args.repeats)
    assert np.allclose(base, fast, atol=1e-12), "the two implementations disagree"
    row = {
        "m": args.m,
        "n": args.n,
        "baseline": "per-model loop",
        "baseline_seconds": base_s,
        "statistical_parity_seconds": fast_s,
        "speedup": base_s / fast_s,
    }
    if args.json:
        print(json.dumps(row))
    else:
        print(
            f"statistical parity, m = {args.m} models x n = {args.n} people "
            f"(median of {args.repeats})"
        )
        print(f"  baseline, per-model loop:        {base_s * 1e3:9.1f} ms")
        print(f"  biasleak statistical_parity:     {fast_s * 1e3:9.1f} ms")
        print(f"  speed-up vs baseline:            {base_s / fast_s:9.1f}x")


if __name__ == "__main__":
    main()
