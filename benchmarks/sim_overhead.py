"""How much of a simulation's wall time is the numeric work, and how much is the simulator.

    python benchmarks/sim_overhead.py [--queries 2000] [--n 10000] [--window 100] [--top 6]
                                      [--no-profile] [--json]

``--window 0`` drops the near-duplicate stage (its distances dominate the numeric work).

One developer sends ``--queries`` single-model statistical parity queries (the base model plus
Uniform(-0.1, 0.1) noise, clipped) against an audit set of ``--n`` synthetic people, through the
full policy pipeline - validation, rate limit, cache, minimum support, near-duplicate check
against the last ``--window`` models, budget, exact metric, Laplace noise, charge - with every
event logged to a JSON-lines file.

Numeric work is timed inside the run by wrapping the functions that do it: drawing the models,
validating them, counting their support, the near-duplicate distances, the exact metric and the
noise. Everything else -
SimPy scheduling, messages, policy bookkeeping (buckets, ledgers, cache digests) and logging - is
the overhead this benchmark is about. Target: overhead below 25% of the run. The SHA-256 digests
of the prediction vectors (the developer's log entry and the compliance cache key) are timed
too and printed as the part of the overhead they are.

Baseline ("numeric only"), measured in the same run: the same numeric calls in a plain loop, with
no simulator, no policy state and no logging. The ratio simulated / numeric-only is printed too.

Where the time goes: a second simulated run, after the timed one and without its timers, under
:mod:`cProfile`. Each function is put in a group by the layer its code lives in - simulator
(SimPy, the developer and compliance processes, messages, logging), policy (``mechanisms/``:
the pipeline, the ledger, the numeric work) or strategy (what the developer decides to send) -
and a library or built-in function (numpy, hashing, JSON) in the group of the caller that spends
most time in it. Printed per group: its own time (share of the profiled run) and its top
functions by cumulative time spent in that group (what they call in other groups left out, so
``simulate`` does not top every list; their whole cumulative time beside it), then its top
functions by own time. Profiling slows Python code far more than numpy code, so the profile says
where the time goes; the timed run says how much.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import simpy

from biasleak.agents import developer as developer_module
from biasleak.agents.compliance import Compliance
from biasleak.agents.developer import Developer
from biasleak.agents.models import train_base_model
from biasleak.agents.strategies import DeveloperContext, Stop, Strategy, StrategyConfig, Submit
from biasleak.mechanisms import metrics
from biasleak.mechanisms import policy as pol
from biasleak.mechanisms.policy import cache as policy_cache
from biasleak.mechanisms.policy import checks as policy_checks
from biasleak.mechanisms.policy import noise as policy_noise
from biasleak.mechanisms.policy import refuse_rules
from biasleak.sim.datasets import make_synthetic
from biasleak.sim.runlog import RunLog

TIMERS: dict[str, float] = defaultdict(float)
# parts of the overhead, timed to show where it goes (they stay counted as overhead)
PARTS: dict[str, float] = defaultdict(float)


def timed(
    name: str, func: Callable[..., Any], into: dict[str, float] = TIMERS
) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            into[name] += time.perf_counter() - start

    return wrapper


DIGESTS = "SHA-256 digests (developer log, compliance cache)"
# (module, attribute, label, where the time counts): the functions the timed run wraps
HOOKS: list[tuple[ModuleType, str, str, dict[str, float]]] = [
    (policy_checks, "as_predictions", "validate", TIMERS),
    (refuse_rules, "_closest", "near-duplicate distances", TIMERS),
    (refuse_rules, "_support", "support counts", TIMERS),
    (metrics, "evaluate", "exact metric", TIMERS),
    (policy_noise, "release", "noise", TIMERS),
    (policy_cache, "model_digest", DIGESTS, PARTS),
    (developer_module, "_digests", DIGESTS, PARTS),
]


def install_timers() -> Callable[[], None]:
    """Wrap every hooked function in a timer; returns what puts the originals back."""
    originals = []
    for module, attribute, label, into in HOOKS:
        if not hasattr(module, attribute):
            raise SystemExit(
                f"{module.__name__}.{attribute} is gone: update HOOKS in {Path(__file__).name}"
            )
        original = getattr(module, attribute)
        originals.append((module, attribute, original))
        setattr(module, attribute, timed(label, original, into))

    def restore() -> None:
        for module, attribute, original in originals:
            setattr(module, attribute, original)

    return restore


class SingleModelQueries(Strategy):
    """Sends ``count`` perturbed copies of the base model, one per query."""

    kind = "benchmark"

    def __init__(self, context: DeveloperContext, count: int) -> None:
        super().__init__(StrategyConfig(), context)
        self.left = count

    def _draw(self) -> np.ndarray:
        h0 = self.context.base_predictions
        noise = self.context.rng.uniform(-0.1, 0.1, size=(1, h0.size))
        return np.clip(h0[None, :] + noise, 0.0, 1.0)

    def next_action(self, now: float) -> Submit | Stop:
        if self.left == 0:
            return Stop("done")
        self.left -= 1
        return Submit(timed("draw models", self._draw)(), "sp", 0.0, "")

    def on_answer(self, values: np.ndarray, now: float) -> None:
        pass


def policy(window: int) -> pol.Policy:
    stages: list[pol.StageConfig] = [
        pol.RateLimit(100_000, "identity"),
        pol.MinSupport(5),
        pol.Budget(1e6, scope="organization"),
        pol.Noise("laplace", 0.01),
        pol.Cache(),
    ]
    if window:
        stages.append(pol.NearDuplicate(1.5, window))
    return pol.Policy(metrics=("sp",), stages=tuple(stages))


def simulate(data: Any, h0: np.ndarray, args: argparse.Namespace, log_dir: Path) -> dict:
    env = simpy.Environment()
    runlog = RunLog(log_dir / "bench.jsonl", header={"benchmark": True}, clock=lambda: env.now)
    audit = pol.AuditSet.from_arrays(data.protected, data.public.audit.labels)
    compliance = Compliance(
        env,
        policy=policy(args.window),
        audit=audit,
        rng=np.random.default_rng(1),
        log=runlog.logger("compliance"),
        answer_hours=0.01,
    )
    context = DeveloperContext(data.public, h0, np.random.default_rng(2))
    Developer(
        env,
        identity="dev",
        organization="org",
        strategy=SingleModelQueries(context, args.queries),
        compliance=compliance.mailbox,
        log=runlog.logger("dev"),
    )
    start = time.perf_counter()
    env.run()
    runlog.close({})
    total = time.perf_counter() - start
    events = sum(1 for _ in (log_dir / "bench.jsonl").open()) - 2
    return {"seconds": total, "events": events}


def numeric_only(data: Any, h0: np.ndarray, args: argparse.Namespace) -> float:
    """The same numeric calls without the simulator."""
    rng = np.random.default_rng(2)
    noise_rng = np.random.default_rng(1)
    a, y = data.protected, data.public.audit.labels
    rule = pol.NearDuplicate(1.5, max(args.window, 1))
    history = pol.ModelHistory(max(args.window, 1), h0.size)
    n1, n0 = data.n1, data.n0
    start = time.perf_counter()
    for _ in range(args.queries):
        h = np.clip(h0[None, :] + rng.uniform(-0.1, 0.1, size=(1, h0.size)), 0.0, 1.0)
        h = policy_checks.as_predictions(h)
        if args.window:
            refuse_rules._closest(h, history, rule.threshold)
        refuse_rules._support(h, 5)
        exact = np.asarray(metrics.evaluate("sp", h, protected=a, labels=y))
        policy_noise.release(
            "laplace", exact, metric="sp", n1=n1, n0=n0, m=1, epsilon=0.01, rng=noise_rng
        )
        history.add(h)
    return time.perf_counter() - start


# -- the profile ------------------------------------------------------------------------------

GROUPS = ("simulator", "policy", "strategy")
Func = tuple[str, int, str]  # pstats' key: file, first line, function name
STRATEGY_CODE = {
    (f.__code__.co_filename, f.__code__.co_firstlineno, f.__code__.co_name)
    for f in vars(SingleModelQueries).values()
    if callable(f) and hasattr(f, "__code__")
}


@functools.cache
def _layer(filename: str) -> str | None:
    """The group of code in this file by where it lives, or None for libraries and built-ins."""
    path = os.path.abspath(filename).replace(os.sep, "/")
    if "/agents/strategies/" in path:
        return "strategy"
    if "/mechanisms/" in path:
        return "policy"
    if any(part in path for part in ("/simpy/", "/structlog/", "/sim/", "/agents/")):
        return "simulator"
    if path == os.path.abspath(__file__).replace(os.sep, "/"):
        return "simulator"  # simulate(), the clock; the strategy's methods are caught before
    return None


def _short(func: Func) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    path = filename.replace(os.sep, "/")
    if "/site-packages/" in path:
        path = path.split("/site-packages/", 1)[1]
    elif re.search(r"/lib/python[0-9.]+/", path):
        path = re.split(r"/lib/python[0-9.]+/", path, maxsplit=1)[1]
    else:
        path = "/".join(path.split("/")[-2:])
    return f"{path}:{line}({name})"


def profile_groups(stats: pstats.Stats, top: int) -> dict[str, Any]:
    """Own time and top cumulative functions per group (see the module docstring)."""
    entries: dict[Func, Any] = stats.stats  # type: ignore[attr-defined]
    owners: dict[Func, str] = {}

    def owner(func: Func, seen: frozenset[Func] = frozenset()) -> str:
        if func in owners:
            return owners[func]
        group = "strategy" if func in STRATEGY_CODE else _layer(func[0])
        if group is None:
            callers = entries[func][4]
            heaviest = [c for c, _ in sorted(callers.items(), key=lambda kv: -kv[1][3])]
            heaviest = [c for c in heaviest if c in entries and c not in seen]
            group = owner(heaviest[0], seen | {func}) if heaviest else "other"
        owners[func] = group
        return group

    callees: dict[Func, list[tuple[Func, float]]] = defaultdict(list)
    for func, entry in entries.items():
        for caller, edge in entry[4].items():
            callees[caller].append((func, edge[3]))
    inside: dict[Func, float] = {}

    def within(func: Func, seen: frozenset[Func] = frozenset()) -> float:
        """Cumulative time minus what went to other groups (a callee's share of its time in
        the group is taken as the same for every caller, as gprof does)."""
        if func not in inside:
            total = entries[func][2]
            for callee, seconds in callees[func]:
                if callee in seen or callee == func or owner(callee) != owner(func):
                    continue
                share = within(callee, seen | {func}) / max(entries[callee][3], 1e-12)
                total += seconds * min(share, 1.0)
            inside[func] = min(total, entries[func][3])
        return inside[func]

    total = sum(entry[2] for entry in entries.values())
    out: dict[str, Any] = {"profiled_seconds": total}
    for group in (*GROUPS, "other"):
        mine = [f for f in entries if owner(f) == group]
        own = sum(entries[f][2] for f in mine)
        if group == "other" and own < 0.005 * total:
            continue
        ranked = sorted(mine, key=lambda f: -within(f))[:top]
        out[group] = {
            "own_seconds": own,
            "own_share": own / total if total else 0.0,
            "top_cumulative_in_group": [[_short(f), within(f), entries[f][3]] for f in ranked],
            "top_own": [
                [_short(f), entries[f][2]] for f in sorted(mine, key=lambda f: -entries[f][2])[:top]
            ],
        }
    return out


def profiled_run(data: Any, h0: np.ndarray, args: argparse.Namespace, top: int) -> dict[str, Any]:
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        profiler.runcall(simulate, data, h0, args, Path(tmp))
    return profile_groups(pstats.Stats(profiler), top)


def print_profile(profile: dict[str, Any]) -> None:
    print(
        f"  profile (a second run under cProfile, {profile['profiled_seconds']:.2f} s): own time "
        "per group; top functions by cumulative time spent in the group (all of it)"
    )
    for group in (*GROUPS, "other"):
        if group not in profile:
            continue
        part = profile[group]
        print(f"    {group:<10} own {part['own_seconds']:6.2f} s = {100 * part['own_share']:4.1f}%")
        for name, seconds, cumulative in part["top_cumulative_in_group"]:
            print(f"      {seconds:6.2f} s ({cumulative:6.2f} s)  {name}")
        print("      own time:")
        for name, seconds in part["top_own"]:
            print(f"      {seconds:6.2f} s            {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--top", type=int, default=6, help="functions shown per profile group")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = make_synthetic(n=args.n, n0=args.n // 10, seed=0)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    baseline = numeric_only(data, h0, args)
    restore = install_timers()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sim = simulate(data, h0, args, Path(tmp))
    finally:
        restore()
    profile = None if args.no_profile else profiled_run(data, h0, args, args.top)
    numeric = sum(TIMERS.values())
    overhead = sim["seconds"] - numeric
    row = {
        "queries": args.queries,
        "n": args.n,
        "window": args.window,
        "seconds": sim["seconds"],
        "events": sim["events"],
        "events_per_second": sim["events"] / sim["seconds"],
        "numeric_seconds": numeric,
        "numeric_breakdown": dict(TIMERS),
        "overhead_seconds": overhead,
        "overhead_share": overhead / sim["seconds"],
        "overhead_parts": dict(PARTS),
        "baseline": "numeric only",
        "baseline_seconds": baseline,
        "ratio_vs_baseline": sim["seconds"] / baseline,
    }
    if profile is not None:
        row["profile"] = profile
    if args.json:
        print(json.dumps(row))
        return
    print(
        f"{args.queries} single-model queries, n = {args.n}, near-duplicate window "
        f"{args.window}, full policy pipeline and logging"
    )
    print(
        f"  simulated run:            {sim['seconds']:8.2f} s, {sim['events']} events "
        f"({row['events_per_second']:.0f} events/s)"
    )
    for name, seconds in sorted(TIMERS.items()):
        print(f"    numeric: {name:<26} {seconds:8.2f} s")
    print(
        f"  overhead (simulator):     {overhead:8.2f} s = {100 * row['overhead_share']:.1f}% "
        "of the run (target < 25%)"
    )
    for name, seconds in sorted(PARTS.items()):
        print(f"    of which, {name}: {seconds:.2f} s")
    print(
        f"  baseline, numeric only:   {baseline:8.2f} s; simulated / baseline = "
        f"{row['ratio_vs_baseline']:.2f}x"
    )
    if profile is not None:
        print_profile(profile)


if __name__ == "__main__":
    main()
