"""Compressed-sensing decoders side by side: time, peak memory and recovery, in one run.

    python benchmarks/decoders.py [--json] [--quick] [--section exact|noisy|all]

Exact answers
-------------

For (n = 1,000, m = 300) and (n = 10,000, m = 1,000), with N0 = n/100 people in the smaller group
(synthetic data, exact answers, the paper's perturbed models: base model plus Uniform(-0.1, 0.1),
clipped), each decoder of ``biasleak.agents.strategies.decoders`` recovers the attribute from the
same answers:

- ``cvxpy``: basis pursuit in cvxpy with CLARABEL, the paper's approach - the BASELINE;
- ``basis_pursuit`` and ``box``: the same program (and its box-constrained form) as a HiGHS LP;
- ``omp``: orthogonal matching pursuit on the centred system (the default decoder).

The last column is the decoder's time over that of one product ``H^T x`` (one pass over H),
the unit of a first-order decoder's cost. Each decoder runs in a fresh child process, so its peak
memory (``ru_maxrss`` high-water mark
minus the process's size just before decoding) is its own. ``--quick`` skips the cvxpy baseline
at the large size; the speed-up there is then estimated from the small size's cvxpy time scaled by
the ratio of the two sizes' HiGHS basis-pursuit times, and marked ``estimated``; it also runs
only OMP at the large size (basis pursuit there takes minutes).

Noisy answers
-------------
UCI Adult (the bundled copy; race; an audit set of n = 1,000 drawn with seed 0), the same
perturbed models, m in {400, 1,000} models, each answer with Laplace noise of scale
``global_sensitivity("sp", n, 1) / eps`` = (1/2 + 1/(n-1)) / eps for a per-model eps in
{1000, 300, 100, 30, 10}; 5 draws (models and noise), every decoder on the same draws, mean
leakage (balanced accuracy, %) and mean seconds per decode; the strongest decoder per row is
marked. Decoders: ``auto`` (given the noise: ``amp``), ``amp``, ``lasso`` (sigma = sqrt(2) b),
``lp_decoding``, ``exact_auto`` (the default before noise models: OMP falling back to basis
pursuit, i.e. the decoder told nothing of the noise) and ``prior`` (the tilted prior from the
base model's scores alone, what the attacker knows before any perturbed answer). Skipped, and
said so in the output: ``box`` and ``basis_pursuit`` (on noisy answers ``box`` falls back to
``lp_decoding``, and basis pursuit is ``exact_auto``'s fallback), ``cvxpy`` (tens of seconds),
and ``exact_auto`` at m = n = 1,000 (the equality-constrained program interpolates the noise and
takes 40-50 s). ``--quick``: m = 400, eps in {1000, 100, 10}, one draw, no ``exact_auto``.
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
NOISY_M = (400, 1000)
NOISY_EPS = (1000.0, 300.0, 100.0, 30.0, 10.0)
NOISY_DRAWS = 5
NOISY_DECODERS = ("auto", "amp", "lasso", "lp_decoding", "exact_auto", "prior")
TODAY = ("lasso", "lp_decoding", "exact_auto")
"""The decoders that existed before noise models (what ``auto`` must match or beat)."""


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
    probe = np.random.default_rng(2).standard_normal(m)
    passes = []
    for _ in range(5):  # one pass over H: the unit of a decoder's cost
        begin = time.perf_counter()
        H.T @ probe
        passes.append(time.perf_counter() - begin)
    return {
        "passes_equivalent": seconds / float(np.median(passes)),
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


def _adult() -> tuple[np.ndarray, np.ndarray]:
    from biasleak.agents.models import train_base_model
    from biasleak.sim.datasets import load_adult

    data = load_adult(protected="race", n=1000, seed=0)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    return np.asarray(h0), np.asarray(data.protected)


def noisy(quick: bool) -> tuple[list[dict], list[str]]:
    """The noisy section: one row per (m, eps, decoder), and what was skipped."""
    from biasleak.agents.strategies.decoders import decode_statistical_parity
    from biasleak.agents.strategies.message_passing import tilted_prior
    from biasleak.agents.strategies.noise_model import NoiseModel
    from biasleak.mechanisms.metrics import statistical_parity
    from biasleak.mechanisms.sensitivity import global_sensitivity
    from biasleak.sim.evaluation import leakage

    h0, a = _adult()
    n = a.size
    n1, n0 = int(a.sum()), int(n - a.sum())
    sizes = (400,) if quick else NOISY_M
    epsilons = (1000.0, 100.0, 10.0) if quick else NOISY_EPS
    draws = 1 if quick else NOISY_DRAWS
    skipped = [
        "box, basis_pursuit: on noisy answers box falls back to lp_decoding, and basis pursuit"
        " is exact_auto's fallback",
        "cvxpy: tens of seconds per decode",
    ]
    if quick:
        skipped.append("exact_auto (--quick): basis pursuit takes about 6 s per decode")
    else:
        skipped.append("exact_auto at m = n = 1,000: interpolates the noise, 40-50 s per decode")
    rows = []
    for m in sizes:
        for eps in epsilons:
            scale = global_sensitivity("sp", n=n, m=1) / eps
            results: dict[str, list[tuple[float, float]]] = {}
            for draw in range(draws):
                rng = np.random.default_rng([draw, m, int(eps)])
                H = np.clip(h0[None, :] + rng.uniform(-0.1, 0.1, size=(m, n)), 0.0, 1.0)
                sp = np.asarray(statistical_parity(H, protected=a)) + rng.laplace(0, scale, m)
                for name in NOISY_DECODERS:
                    if name == "exact_auto" and (quick or m >= n):
                        continue
                    start = time.perf_counter()
                    if name == "prior":
                        c = 1.0 / n1 + 1.0 / n0
                        eta = H.sum(axis=1) / n1 - sp
                        p = tilted_prior(H.mean(axis=0), k=n0, total=float(eta.mean()) / c)
                        guess = (p <= n0 / n).astype(np.int8)
                    else:
                        noise = None if name == "exact_auto" else NoiseModel("laplace", scale)
                        method = "auto" if name == "exact_auto" else name
                        guess = decode_statistical_parity(
                            H, sp, n1=n1, n0=n0, method=method, noise=noise
                        ).attribute
                    seconds = time.perf_counter() - start
                    results.setdefault(name, []).append((leakage(guess, a)[0], seconds))
            best = max(results, key=lambda k: np.mean([v for v, _ in results[k]]))
            for name, values in results.items():
                leak = [v for v, _ in values]
                rows.append(
                    {
                        "section": "noisy",
                        "m": m,
                        "eps_per_model": eps,
                        "decoder": name,
                        "draws": len(values),
                        "leakage": float(np.mean(leak)),
                        "leakage_std": float(np.std(leak)),
                        "seconds": float(np.mean([t for _, t in values])),
                        "best": name == best,
                    }
                )
    return rows, skipped


def print_noisy(rows: list[dict], skipped: list[str]) -> None:
    print(
        f"\nNoisy answers (Adult, n = 1,000, Laplace per answer; mean over draws)\n"
        f"{'m':>5} {'eps':>6} {'decoder':<12} {'draws':>5} {'leakage %':>9} {'+-':>5} "
        f"{'seconds':>8}"
    )
    for r in rows:
        mark = "  <- strongest" if r["best"] else ""
        print(
            f"{r['m']:>5} {r['eps_per_model']:>6g} {r['decoder']:<12} {r['draws']:>5} "
            f"{r['leakage']:>9.1f} {r['leakage_std']:>5.1f} {r['seconds']:>8.3f}{mark}"
        )
    for m, eps in sorted({(r["m"], r["eps_per_model"]) for r in rows}, key=lambda x: (x[0], -x[1])):
        here = {
            r["decoder"]: r["leakage"] for r in rows if (r["m"], r["eps_per_model"]) == (m, eps)
        }
        today = max(here[k] for k in TODAY if k in here)
        print(
            f"m = {m}, eps = {eps:g}: auto {here['auto']:.1f} vs best of today's {today:.1f}"
            f" (margin {here['auto'] - today:+.1f}), vs prior {here['auto'] - here['prior']:+.1f}"
        )
    for line in skipped:
        print(f"skipped: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument("--quick", action="store_true", help="skip cvxpy at the large size")
    parser.add_argument(
        "--section", choices=("exact", "noisy", "all"), default="all", help="which tables"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, n, m = args.child
        print(json.dumps(child(method, int(n), int(m))))
        return
    if args.section in ("exact", "all"):
        exact(args.quick, args.json)
    if args.section in ("noisy", "all"):
        rows, skipped = noisy(args.quick)
        if args.json:
            for r in rows:
                print(json.dumps(r))
            print(json.dumps({"section": "noisy", "skipped": skipped}))
        else:
            print_noisy(rows, skipped)


def exact(quick: bool, as_json: bool) -> None:
    """The exact-answers section (see the module docstring)."""
    rows = []
    for n, m in SIZES:
        for method in METHODS:
            if quick and n > SIZES[0][0] and method != "omp":
                continue
            rows.append(run(method, n, m))
    base = {(r["n"], r["m"]): r["seconds"] for r in rows if r["method"] == "cvxpy"}
    bp = {(r["n"], r["m"]): r["seconds"] for r in rows if r["method"] == "basis_pursuit"}
    small = SIZES[0]
    for r in rows:
        key = (r["n"], r["m"])
        if key in base:
            r["speedup_vs_cvxpy"], r["speedup_estimated"] = base[key] / r["seconds"], False
        elif key in bp:  # scale the small cvxpy time by how HiGHS basis pursuit scaled
            estimate = base[small] * bp[key] / bp[small]
            r["speedup_vs_cvxpy"], r["speedup_estimated"] = estimate / r["seconds"], True
        else:
            r["speedup_vs_cvxpy"], r["speedup_estimated"] = None, False
    if as_json:
        for r in rows:
            print(json.dumps(r))
        return
    print(
        f"{'n':>6} {'m':>5} {'method':<14} {'used':<14} {'seconds':>9} {'peak MiB':>9} "
        f"{'leakage %':>9} {'vs cvxpy':>10} {'time / H^T x':>13}"
    )
    for r in rows:
        mark = " (est.)" if r["speedup_estimated"] else ""
        speed = "-" if r["speedup_vs_cvxpy"] is None else f"{r['speedup_vs_cvxpy']:.1f}x"
        print(
            f"{r['n']:>6} {r['m']:>5} {r['method']:<14} {r['used']:<14} {r['seconds']:>9.2f} "
            f"{r['peak_mib']:>9.1f} {r['leakage']:>9.1f} {speed:>10}"
            f" {r['passes_equivalent']:>13.0f}{mark}"
        )


if __name__ == "__main__":
    main()
