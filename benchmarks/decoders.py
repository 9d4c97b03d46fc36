"""Compressed-sensing decoders side by side: time, peak memory and recovery, in one run.

    python benchmarks/decoders.py [--json] [--quick]

For (n = 1,000, m = 300) and (n = 10,000, m = 1,000), with N0 = n/100 people in the smaller group
(synthetic data, exact answers, the paper's perturbed models: base model plus Uniform(-0.1, 0.1),
clipped), each decoder of ``biasleak.agents.strategies.decoders`` recovers the attribute from the
same answers:

- ``cvxpy``: basis pursuit in cvxpy with CLARABEL, the paper's approach - the BASELINE;
- ``basis_pursuit`` and ``box``: the same program (and its box-constrained form) as a HiGHS LP;
- ``omp``: orthogonal matching pursuit on the centred system (the default decoder).

Each decoder runs in a fresh child process, so its peak memory (``ru_maxrss`` high-water mark
minus the process's size just before decoding) is its own. ``--quick`` skips the cvxpy baseline
at the large size; the speed-up there is then estimated from the small size's cvxpy time scaled by
the ratio of the two sizes' HiGHS basis-pursuit times, and marked ``estimated``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

SIZES = ((1000, 300), (10_000, 1000))
METHODS = ("cvxpy", "basis_pursuit", "box", "omp")


def _instance(n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from biasleak.agents.models import train_base_model
    from biasleak.mechanisms.metrics import statistical_parity
    from biasleak.sim.datasets import make_synthetic

    data = make_synthetic(n=n, n0=max(n // 100, 1), seed=0)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    rng = np.random.default_rng(1)
    H = np.clip(h0[None, :] + rng.uniform(-0.1, 0.1, size=(m, n)), 0.0, 1.0)
    return H, np.asarray(statistical_parity(H, protected=data.protected)), data.protected


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(method: str, n: int, m: int) -> dict:
    from biasleak.agents.strategies.decoders import decode_statistical_parity
    from biasleak.sim.evaluation import leakage

    H, sp, a = _instance(n, m)
    n1 = int(a.sum())
    before = _rss_mib()
    start = time.perf_counter()
    result = decode_statistical_parity(H, sp, n1=n1, n0=n - n1, method=method)
    seconds = time.perf_counter() - start
    value, _ = leakage(result.attribute, a)
    return {
        "n": n,
        "m": m,
        "method": method,
        "used": result.method,
        "seconds": seconds,
        "peak_mib": max(_rss_mib() - before, 0.0),
        "leakage": value,
    }


def run(method: str, n: int, m: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", method, str(n), str(m)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument("--quick", action="store_true", help="skip cvxpy at the large size")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, n, m = args.child
        print(json.dumps(child(method, int(n), int(m))))
        return
    rows = []
    for n, m in SIZES:
        for method in METHODS:
            if method == "cvxpy" and args.quick and n > SIZES[0][0]:
                continue
            rows.append(run(method, n, m))
    base = {(r["n"], r["m"]): r["seconds"] for r in rows if r["method"] == "cvxpy"}
    bp = {(r["n"], r["m"]): r["seconds"] for r in rows if r["method"] == "basis_pursuit"}
    small = SIZES[0]
    for r in rows:
        key = (r["n"], r["m"])
        if key in base:
            r["speedup_vs_cvxpy"], r["speedup_estimated"] = base[key] / r["seconds"], False
        else:  # scale the small cvxpy time by how HiGHS basis pursuit scaled
            estimate = base[small] * bp[key] / bp[small]
            r["speedup_vs_cvxpy"], r["speedup_estimated"] = estimate / r["seconds"], True
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(
        f"{'n':>6} {'m':>5} {'method':<14} {'used':<14} {'seconds':>9} {'peak MiB':>9} "
        f"{'leakage %':>9} {'vs cvxpy':>10}"
    )
    for r in rows:
        mark = " (est.)" if r["speedup_estimated"] else ""
        print(
            f"{r['n']:>6} {r['m']:>5} {r['method']:<14} {r['used']:<14} {r['seconds']:>9.2f} "
            f"{r['peak_mib']:>9.1f} {r['leakage']:>9.1f} {r['speedup_vs_cvxpy']:>9.1f}x{mark}"
        )


if __name__ == "__main__":
    main()
