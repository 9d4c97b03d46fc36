"""How much of a simulation's wall time is the numeric work, and how much is the simulator.

    python benchmarks/sim_overhead.py [--queries 2000] [--n 10000] [--window 100] [--json]

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
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from biasleak.agents import developer as developer_module
from biasleak.agents.compliance import Compliance
from biasleak.agents.developer import Developer
from biasleak.agents.models import train_base_model
from biasleak.agents.strategies import DeveloperContext, Stop, Strategy, StrategyConfig, Submit
from biasleak.mechanisms import policy as pol
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
    return pol.Policy(
        metrics=("sp",),
        rate_limits=(pol.RateLimit(100_000, "identity"),),
        min_support=pol.MinSupport(5),
        near_duplicate=pol.NearDuplicate(1.5, window) if window else None,
        budgets=(pol.Budget(1e6, scope="organization"),),
        noise=pol.Noise("laplace", 0.01),
        cache=True,
    )


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
        h = pol.as_predictions(h)
        if args.window:
            pol._near_duplicate_problem(h, history, rule)
        pol._support_problem(h, 5)
        exact = np.asarray(pol.metrics.evaluate("sp", h, protected=a, labels=y))
        pol.release("laplace", exact, metric="sp", n1=n1, n0=n0, m=1, epsilon=0.01, rng=noise_rng)
        history.add(h)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = make_synthetic(n=args.n, n0=args.n // 10, seed=0)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    baseline = numeric_only(data, h0, args)
    pol.as_predictions = timed("validate", pol.as_predictions)  # type: ignore[assignment]
    pol._near_duplicate_problem = timed("near-duplicate distances", pol._near_duplicate_problem)
    pol._support_problem = timed("support counts", pol._support_problem)
    pol.metrics.evaluate = timed("exact metric", pol.metrics.evaluate)  # type: ignore[method-assign]
    pol.release = timed("noise", pol.release)  # type: ignore[assignment]
    digests = "SHA-256 digests (developer log, compliance cache)"
    pol._digest = timed(digests, pol._digest, PARTS)
    developer_module.model_digest = timed(digests, developer_module.model_digest, PARTS)
    with tempfile.TemporaryDirectory() as tmp:
        sim = simulate(data, h0, args, Path(tmp))
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


if __name__ == "__main__":
    main()
