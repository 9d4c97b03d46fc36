"""The compressed-sensing attack on the whole Adult population: time, peak memory and leakage.

    python benchmarks/scale.py [--section decode|run|all] [--subset 2000] [--models 20000]
                               [--workers K] [--json]

The audit set is every White and Black person of UCI Adult without missing values (n = 43,131,
N0 = 4,228 Black), the data of ``benchmarks/scale_adult.yaml``. Compressed sensing needs about
``2 N0 ln(n / N0)`` = 19,640 answered models there; stored in float64 they are 7 GB, and the
stored-matrix AMP decoder would hold three copies. The regenerated path keeps none: the attacker
redraws each batch from its seed when it sends it and at every pass of the blockwise AMP decoder
(``regenerate: true``).

Sections, each in a fresh child process so that its peak memory (``ru_maxrss``) is its own:

``decode`` (a subset: the stored path does not fit at full size)
    ``--subset`` models of the regenerated family around the scenario's base model, answered
    exactly. BASELINE: the stored path of today, the models held as one float64 matrix and
    decoded by ``decode_statistical_parity(method="amp")``. Against it, on the same models and
    answers: ``decode_blockwise``. Printed: seconds per decode (for the stored path, with
    stacking the matrix), peak memory of the process (``ru_maxrss``), the decode's own peak
    (``tracemalloc``, which counts numpy's buffers), leakage (balanced accuracy, %), and the
    ratios stored / blockwise. ``auto`` (OMP, falling back to basis pursuit) is not run: with
    ``N0 >= m/2`` OMP does not apply, and basis pursuit on a 2,000 x 43,131 system takes far
    longer than either AMP.
``run`` (the whole attack, end to end)
    ``benchmarks/scale_adult.yaml`` through the simulator (``run_scenario``: data, base model,
    the probe, ``--models`` models in batches of 200 sent to the compliance agent and answered,
    the final decode, the log and its summary). Printed: wall time, the decode's share of it,
    peak memory of the process, leakage, people revealed and models answered.

``--workers`` sets the decoder's threads (default: the cores this process may use); the
result does not depend on it. Targets (the refactoring issue): the whole run under 5 minutes and
1 GB on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scale_adult.yaml"
TARGET_SECONDS = 300.0
TARGET_MIB = 1024.0


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _balanced_accuracy(guess: np.ndarray, truth: np.ndarray) -> float:
    return 50.0 * (float(np.mean(guess[truth == 1] == 1)) + float(np.mean(guess[truth == 0] == 0)))


def _population() -> tuple[Any, np.ndarray]:
    """The scenario's audit set and its base model's outputs, prepared as the run prepares them."""
    from biasleak.agents.models import train_base_model
    from biasleak.sim import datasets
    from biasleak.sim.scenario import load_scenario

    scenario = load_scenario(SCENARIO)
    options = scenario.data.model_dump(mode="json", exclude_none=True)
    name = options.pop("dataset")
    data = datasets.load(name, seed=scenario.seed, **options)
    model = train_base_model(data.public.train, C=scenario.model.C)
    return data, np.asarray(model.predict_proba(data.public.audit))


def child_decode(method: str, subset: int, workers: int | None) -> dict[str, Any]:
    """One decoder on ``subset`` regenerated models of the population (run in its own process)."""
    from biasleak.agents.strategies.blockwise import decode_blockwise
    from biasleak.agents.strategies.decoders import decode_statistical_parity
    from biasleak.agents.strategies.model_source import PerturbedModels
    from biasleak.mechanisms.metrics import statistical_parity_weights

    data, h0 = _population()
    truth = data.protected
    v = statistical_parity_weights(truth)
    source = PerturbedModels.from_rng(
        np.random.default_rng(0), h0, perturbation=0.1, count=subset, batch=200
    )
    answers = {i: source.models(i) @ v for i in range(len(source.batches))}
    n1, n0 = int(np.sum(truth == 1)), int(np.sum(truth == 0))
    tracemalloc.start()  # numpy reports its buffers: the decode's own peak, whatever came before
    start = time.perf_counter()
    if method == "stored_amp":
        H = np.concatenate([source.models(i) for i in range(len(source.batches))])
        sp = np.concatenate([answers[i] for i in range(len(source.batches))])
        result = decode_statistical_parity(H, sp, n1=n1, n0=n0, method="amp")
        del H
    else:
        result = decode_blockwise(source, answers, n1=n1, n0=n0, workers=workers)
    seconds = time.perf_counter() - start
    decode_mib = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {
        "method": method,
        "n": int(truth.size),
        "m": subset,
        "seconds": seconds,
        "peak_mib": _rss_mib(),
        "decode_mib": decode_mib,
        "leakage": _balanced_accuracy(result.attribute, truth),
    }


def child_run(models: int, workers: int | None) -> dict[str, Any]:
    """The whole scenario through the simulator (run in its own process)."""
    from biasleak.agents.strategies import regenerated as cs  # where the decode is called
    from biasleak.sim.scenario import load_scenario
    from biasleak.sim.world import run_scenario

    decode_seconds = 0.0
    original = cs.decode_blockwise

    def timed(*args: Any, **kwargs: Any) -> Any:
        nonlocal decode_seconds
        start = time.perf_counter()
        try:
            return original(*args, **kwargs, workers=workers)
        finally:
            decode_seconds += time.perf_counter() - start

    cs.decode_blockwise = timed  # type: ignore[assignment]
    start = time.perf_counter()
    scenario = load_scenario(SCENARIO, overrides=[f"developers.0.strategy.queries={models}"])
    with tempfile.TemporaryDirectory() as logs:
        summary = run_scenario(scenario, log_dir=logs).summary
    seconds = time.perf_counter() - start
    mallory = summary["developers"]["mallory"]
    return {
        "method": "run",
        "m": models,
        "seconds": seconds,
        "decode_seconds": decode_seconds,
        "peak_mib": _rss_mib(),
        "leakage": mallory["leakage"],
        "revealed": mallory["revealed"],
        "answered": mallory["answered"],
        "error": mallory["error"],
    }


def _spawn(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 and math.isfinite(a / b) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=["decode", "run", "all"], default="all")
    parser.add_argument("--subset", type=int, default=2000, help="models in the decode section")
    parser.add_argument("--models", type=int, default=20_000, help="models in the run section")
    parser.add_argument("--workers", type=int, default=None, help="decoder threads")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    workers = [] if args.workers is None else ["--workers", str(args.workers)]
    if args.child:
        kind, size = args.child[0], int(args.child[1])
        result = child_run(size, args.workers) if kind == "run" else None
        if result is None:
            result = child_decode(kind, size, args.workers)
        print(json.dumps(result))
        return
    rows: list[dict[str, Any]] = []
    if args.section in ("decode", "all"):
        stored = _spawn(["stored_amp", str(args.subset)])
        blockwise = _spawn(["blockwise_amp", str(args.subset), *workers])
        rows += [stored, blockwise]
        if not args.json:
            print(f"Decode, n = {stored['n']:,}, m = {args.subset:,} models, exact answers")
            print(
                f"{'decoder':28} {'seconds':>8} {'peak MiB':>9} {'decode MiB':>11} {'leakage':>8}"
            )
            for name, row in (("stored amp (BASELINE)", stored), ("blockwise amp", blockwise)):
                print(
                    f"{name:28} {row['seconds']:8.1f} {row['peak_mib']:9.0f} "
                    f"{row['decode_mib']:11.0f} {row['leakage']:7.2f}%"
                )
            print(
                f"baseline / blockwise: time {_ratio(stored['seconds'], blockwise['seconds'])}, "
                f"decode memory {_ratio(stored['decode_mib'], blockwise['decode_mib'])}"
            )
            full = 3 * args.models * stored["n"] * 8 / 2**30
            print(
                f"(the stored path at m = {args.models:,} would hold the matrix, its centred copy "
                f"and its square: {full:.1f} GiB; not run)"
            )
    if args.section in ("run", "all"):
        run = _spawn(["run", str(args.models), *workers])
        rows.append(run)
        if not args.json:
            print(f"\nWhole run: {SCENARIO.name}, m = {args.models:,} models")
            print(
                f"wall {run['seconds']:.1f} s (decode {run['decode_seconds']:.1f} s), peak "
                f"{run['peak_mib']:.0f} MiB, leakage {run['leakage']:.2f}%, revealed "
                f"{run['revealed']}, answered {run['answered']}, error {run['error']}"
            )
            print(
                f"targets: under {TARGET_SECONDS:.0f} s "
                f"({'met' if run['seconds'] < TARGET_SECONDS else 'MISSED'}), under "
                f"{TARGET_MIB:.0f} MiB ({'met' if run['peak_mib'] < TARGET_MIB else 'MISSED'})"
            )
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
