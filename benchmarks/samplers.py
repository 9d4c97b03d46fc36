"""Cost of the floating-point-safe samplers against the naive float draws, measured in one run.

    python benchmarks/samplers.py [--m 1000] [--n 1000] [--repeats 7] [--json]

For each mechanism, one release of m answers (one per model) through
``biasleak.mechanisms.release.release`` with ``sampler="naive"`` (the baseline: float noise added
to the exact values) and with ``sampler="safe"`` (grid release with exactly sampled noise). Reports
the median wall time per released value of each over the repeats and the ratio safe / naive.
Beside it, the median time of one exact statistical-parity evaluation of m models on n people
(``biasleak.mechanisms.metrics.statistical_parity``), and of the whole policy decision for one
query of the m models with the naive sampler (``biasleak.mechanisms.policy.decide``: validation,
cache digests, the metric, the release and the charge), so the reader can see how the sampler's
cost compares with what the policy spends anyway.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

from biasleak.mechanisms import policy as pol
from biasleak.mechanisms.metrics import statistical_parity
from biasleak.mechanisms.release import release

MECHANISMS = {
    "laplace": {},
    "attribute_conceal": {},
    "smooth_laplace": {"delta": 1e-6},
    "gaussian": {"delta": 1e-6},
}


def timed(func: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1000, help="models answered together")
    parser.add_argument("--n", type=int, default=1000, help="people in the audit set")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    a = (rng.random(args.n) < 0.4).astype(np.int64)
    a[:2] = (0, 1)  # both groups present
    n1, n0 = int(a.sum()), int(args.n - a.sum())
    h = rng.random((args.m, args.n))
    values = np.asarray(statistical_parity(h, protected=a))
    metric_s = timed(lambda: statistical_parity(h, protected=a), args.repeats)
    audit = pol.AuditSet.from_arrays(a, (rng.random(args.n) < 0.5).astype(np.int64))
    naive_policy = pol.Policy(
        metrics=("sp",), stages=(pol.Cache(), pol.Noise("laplace", 1.0, sampler="naive"))
    )

    def decide_once() -> object:
        request = pol.Request("q", "dev", "org", "sp", h)
        return pol.decide(
            naive_policy, request, audit, pol.PolicyState(), now=0.0, rng=np.random.default_rng(2)
        )

    decide_once()
    decide_s = timed(decide_once, args.repeats)

    rows = []
    for mech, extra in MECHANISMS.items():
        per = {}
        for sampler in ("naive", "safe"):
            call = functools.partial(
                release,
                mech,
                values,
                n1=n1,
                n0=n0,
                epsilon=1.0,
                rng=np.random.default_rng(1),
                sampler=sampler,
                **extra,
            )
            one: Callable[[], object] = call
            one()  # warm caches (the discrete Gaussian's sigma is cached per parameters)
            per[sampler] = timed(one, args.repeats)
        rows.append(
            {
                "mechanism": mech,
                "naive_us_per_value": 1e6 * per["naive"] / args.m,
                "safe_us_per_value": 1e6 * per["safe"] / args.m,
                "ratio_safe_over_naive": per["safe"] / per["naive"],
                "safe_ms_per_answer": 1e3 * per["safe"],
            }
        )
    result = {
        "m": args.m,
        "n": args.n,
        "repeats": args.repeats,
        "exact_sp_ms": 1e3 * metric_s,
        "policy_decide_ms": 1e3 * decide_s,
        "releases": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return
    print(
        f"one exact SP evaluation, {args.m} models x {args.n} people: "
        f"{result['exact_sp_ms']:.2f} ms (median of {args.repeats})"
    )
    print(
        f"one policy decision (naive Laplace, with cache), same query: "
        f"{result['policy_decide_ms']:.2f} ms (median of {args.repeats})"
    )
    print(
        f"{'mechanism':<18} {'naive us/value':>15} {'safe us/value':>14} {'safe/naive':>11} "
        f"{'safe ms/answer':>15} {'vs exact SP':>12} {'vs decision':>12}"
    )
    for row in rows:
        print(
            f"{row['mechanism']:<18} {row['naive_us_per_value']:>15.3f} "
            f"{row['safe_us_per_value']:>14.3f} {row['ratio_safe_over_naive']:>11.1f} "
            f"{row['safe_ms_per_answer']:>15.2f} "
            f"{row['safe_ms_per_answer'] / result['exact_sp_ms']:>11.2f}x "
            f"{row['safe_ms_per_answer'] / result['policy_decide_ms']:>11.2f}x"
        )


if __name__ == "__main__":
    main()
