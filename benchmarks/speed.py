"""Fast enough to search policies: the red team, workers, start-up and each layer's share.

    python benchmarks/speed.py [--section redteam|workers|startup|layers|all] [--json]

Every figure is a ratio against a BASELINE measured in the same run, each case in a fresh child
process (so no case inherits another's caches):

``redteam``
    ``biasleak redteam`` on the budgeted Laplace red team (``scenarios/redteam_laplace.yaml``,
    Adult, a budget of 150 per identity, 14 applicable attacks) at its own n = 300 and at
    n = 1,000, one worker. BASELINE: the same red team with every fit made afresh
    (``biasleak.agents.models.fresh_fits``: the path before fits were kept per process). The
    two results must be identical (checked). Target: at most 0.4x.
``workers``
    The same red team (n = 1,000) and a 16-run sweep with two workers, in a process pool and
    in a local Dask cluster. BASELINE: one worker, in process. Target: at least 1.6x faster
    with two workers on two cores (the machine must have two free cores for it to mean
    anything).
``startup``
    ``biasleak --version``, ``biasleak --help`` and ``biasleak validate`` of the quickstart.
    BASELINE: a bare interpreter (``python -c pass``). Medians of 5.
``layers``
    A cProfile of the red team at n = 1,000 with one worker: each layer's share of the time
    (model fitting, strategies and decoders, mechanisms, ceilings, the simulator, logging,
    imports). Decoders and the simulator must stay under their shares before this change
    (decoders under 1%, SimPy and agents 0.4%, logging 0.6% of the red team).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RED_TEAM = ROOT / "scenarios" / "redteam_laplace.yaml"
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"

TARGET_RED_TEAM = 0.4
TARGET_WORKERS = 1.6

SWEEP = """\
name: speed_sweep
seed: 0
horizon_days: 5
data: {dataset: adult, protected: race, n: 1000}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 200, perturbation: 0.1, batch: 50}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 10}
compliance:
  metrics: [sp]
  policy:
    - {kind: budget, epsilon: 100.0, scope: organization}
    - {kind: noise, mechanism: laplace, epsilon: 1.0}
grid:
  compliance.policy.1.epsilon: [0.1, 1.0, 10.0, 100.0]
  seeds: 4
"""


# --- children: one case each, in a fresh interpreter ---------------------------------------


def _red_team(overrides: list[str], workers: int, executor: str, fresh: bool) -> dict[str, Any]:
    from biasleak.agents.models import fresh_fits
    from biasleak.sim.executors import pool
    from biasleak.sim.redteam import run_red_team
    from biasleak.sim.scenario import load_scenario

    scenario = load_scenario(RED_TEAM, overrides=overrides)
    with tempfile.TemporaryDirectory() as logs:
        start = time.perf_counter()
        with pool(executor, workers=workers) as ex:
            if fresh:
                with fresh_fits():
                    result = run_red_team(scenario, log_dir=logs, executor=ex)
            else:
                result = run_red_team(scenario, log_dir=logs, executor=ex)
        seconds = time.perf_counter() - start
        text = json.dumps(result.to_json(), sort_keys=True).replace(logs, "LOGS")
    return {"seconds": seconds, "result": text}


def _sweep(workers: int, executor: str) -> dict[str, Any]:
    from biasleak.sim.executors import pool
    from biasleak.sim.sweep import run_sweep

    with tempfile.TemporaryDirectory() as out:
        path = Path(out) / "speed_sweep.yaml"
        path.write_text(SWEEP, encoding="utf-8")
        start = time.perf_counter()
        with pool(executor, workers=workers) as ex:
            result = run_sweep(
                path, out=Path(out) / "sweep", executor=ex, workers=workers, progress=None
            )
        return {"seconds": time.perf_counter() - start, "ok": result.ok}


LAYERS = (
    ("model fitting", ("sklearn/",)),
    ("decoders", ("agents/strategies/decoders", "cvxpy/", "/scs", "/ecos", "/osqp", "/clarabel")),
    ("strategies", ("agents/strategies/",)),
    ("ceilings", ("mechanisms/ceiling/", "sim/exposure.py")),
    ("mechanisms", ("mechanisms/",)),
    ("logging", ("structlog/", "sim/runlog.py", "json/")),
    ("SimPy and agents", ("simpy/", "agents/")),
    ("scenario", ("pydantic", "sim/scenario/", "ruamel/")),
    ("data", ("sim/datasets/",)),
    ("simulator", ("sim/",)),
    ("imports", ("<frozen importlib", "importlib/")),
    ("numpy and scipy", ("numpy/", "scipy/")),
)


def _layer(filename: str) -> str:
    for name, marks in LAYERS:
        if any(mark in filename for mark in marks):
            return name
    return "other"


def _layers() -> dict[str, Any]:
    profile = cProfile.Profile()
    profile.enable()
    _red_team(["data.n=1000"], 1, "process", fresh=False)
    profile.disable()
    stats = pstats.Stats(profile, stream=io.StringIO())
    shares: dict[str, float] = {}
    total = 0.0
    table = stats.stats  # type: ignore[attr-defined]
    for (filename, _, _), (_, _, tottime, _, callers) in table.items():
        total += tottime
        if filename != "~":
            shares[_layer(filename)] = shares.get(_layer(filename), 0.0) + tottime
            continue
        # a built-in (a NumPy kernel, a C method): its time goes to the layers that called it
        for (caller_file, _, _), (_, _, caller_tt, _) in callers.items():
            layer = _layer(caller_file) if caller_file != "~" else "other"
            shares[layer] = shares.get(layer, 0.0) + caller_tt
    return {"total": total, "shares": {k: v / total for k, v in sorted(shares.items())}}


def child(case: str) -> dict[str, Any]:
    kind, _, rest = case.partition(":")
    if kind == "redteam":
        n, workers, executor, fresh = rest.split(",")
        overrides = [] if n == "own" else [f"data.n={n}"]
        return _red_team(overrides, int(workers), executor, fresh == "fresh")
    if kind == "sweep":
        workers, executor = rest.split(",")
        return _sweep(int(workers), executor)
    if kind == "layers":
        return _layers()
    raise SystemExit(f"unknown case {case!r}")


def _spawn(case: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", case], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median_seconds(argv: list[str], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- sections -------------------------------------------------------------------------------


def section_redteam() -> list[dict[str, Any]]:
    rows = []
    for n in ("own", "1000"):
        fresh = _spawn(f"redteam:{n},1,process,fresh")
        cached = _spawn(f"redteam:{n},1,process,cached")
        ratio = cached["seconds"] / fresh["seconds"]
        rows.append(
            {
                "case": f"red team, n = {'300' if n == 'own' else n}",
                "baseline_s": fresh["seconds"],
                "seconds": cached["seconds"],
                "ratio": ratio,
                "identical": fresh["result"] == cached["result"],
                "ok": ratio <= TARGET_RED_TEAM and fresh["result"] == cached["result"],
            }
        )
    return rows


def _speedup_row(case: str, one: dict[str, Any], two: dict[str, Any], key: str) -> dict[str, Any]:
    """A workers row: two workers against one, with the results compared on ``key``."""
    speedup = one["seconds"] / two["seconds"]
    same = one[key] == two[key]
    return {
        "case": case,
        "baseline_s": one["seconds"],
        "seconds": two["seconds"],
        "ratio": speedup,
        "identical": same,
        "ok": speedup >= TARGET_WORKERS and same,
    }


def section_workers() -> list[dict[str, Any]]:
    one = _spawn("redteam:1000,1,process,cached")
    sweep_one = _spawn("sweep:1,process")
    executors = ("process", "dask")
    return [
        _speedup_row(
            f"red team n = 1,000, 2 workers ({ex})",
            one,
            _spawn(f"redteam:1000,2,{ex},cached"),
            "result",
        )
        for ex in executors
    ] + [
        _speedup_row(f"16-run sweep, 2 workers ({ex})", sweep_one, _spawn(f"sweep:2,{ex}"), "ok")
        for ex in executors
    ]


def section_startup() -> list[dict[str, Any]]:
    bare = _median_seconds([sys.executable, "-c", "pass"])
    cli = [sys.executable, "-m", "biasleak.sim"]
    rows = []
    for label, argv in (
        ("biasleak --version", [*cli, "--version"]),
        ("biasleak --help", [*cli, "--help"]),
        ("biasleak validate quickstart", [*cli, "validate", str(QUICKSTART)]),
    ):
        seconds = _median_seconds(argv)
        rows.append(
            {
                "case": label,
                "baseline_s": bare,
                "seconds": seconds,
                "ratio": seconds / bare,
                "identical": True,
                "ok": seconds - bare <= (0.3 if "validate" not in label else 2.0),
            }
        )
    return rows


def section_layers() -> dict[str, Any]:
    return _spawn("layers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--section",
        choices=("redteam", "workers", "startup", "layers", "all"),
        default="all",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    sections = (
        ("redteam", "workers", "startup", "layers") if args.section == "all" else (args.section,)
    )
    report: dict[str, Any] = {}
    for name in sections:
        report[name] = globals()[f"section_{name}"]()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name in sections:
        if name == "layers":
            layers = report["layers"]
            print(f"\nshare per layer (red team n = 1,000, {layers['total']:.1f} s profiled)")
            for layer, share in sorted(layers["shares"].items(), key=lambda kv: -kv[1]):
                print(f"  {layer:20s} {100 * share:5.1f}%")
            continue
        print(f"\n{name}: case, baseline s, s, ratio (target), same result")
        for r in report[name]:
            target = {
                "redteam": f"<= {TARGET_RED_TEAM}x",
                "workers": f">= {TARGET_WORKERS}x faster",
                "startup": "x a bare interpreter",
            }[name]
            verdict = "ok" if r["ok"] else "MISSED"
            print(
                f"  {r['case']:44s} {r['baseline_s']:7.2f} {r['seconds']:7.2f} "
                f"{r['ratio']:6.2f}x ({target}) {'same' if r['identical'] else 'DIFFERENT'} "
                f"{verdict}"
            )


if __name__ == "__main__":
    main()
