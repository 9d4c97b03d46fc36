"""What running a strategy in its sandbox costs: the same run in process and as a plugin.

    python benchmarks/isolation.py [--n 1000] [--batch 10] [--repeat 3] [--json]

One attacker runs the full-rank attack (one model per person, ``--batch`` models per query, the
structured decoder: almost no numeric work per answer, so the cost of each round trip shows)
against a synthetic audit set of ``--n`` people whose answers are exact. Two runs of the same
scenario and seed:

- baseline ("in process"): the library's ``full_rank`` strategy, called directly by the
  developer process, as every library strategy is;
- ``plugin``: the same class, loaded from a file as a plugin
  (``{kind: plugin, path: ..., class: ...}``), which runs in a sandboxed process of its own; every
  ``next_action`` and answer crosses a pipe, and the child is a fresh interpreter.

Both runs make the same queries and reach the same leakage (checked here). Printed: the best of
``--repeat`` wall times of each, their ratio, and the plugin's cost split into the sandbox's
start (a fresh interpreter importing numpy and biasleak, measured alone) and the rest per call.
The data set is loaded and the base model trained once, before any timing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from biasleak.agents.strategies import build_strategy
from biasleak.sim.scenario import parse_scenario
from biasleak.sim.world import developer_context, run_scenario

SCENARIO = """
name: isolation-benchmark
seed: 7
horizon_days: 365
data: {{dataset: synthetic, n: {n}, minority: {minority}}}
developers:
  - id: mallory
    organization: acme
    strategy: {strategy}
compliance:
  metrics: [sp]
"""

PLUGIN = """
from biasleak.agents.strategies.full_rank import FullRank, FullRankConfig


class PluginFullRank(FullRank):
    config_model = FullRankConfig
"""


def _scenario(n: int, strategy: str) -> Any:
    return parse_scenario(SCENARIO.format(n=n, minority=max(n // 10, 2), strategy=strategy))


def _timed(scenario: Any, log_dir: Path, name: str) -> tuple[float, dict[str, Any]]:
    """Wall time of one run, and the attacker's summary with ``queries`` (messages sent) added."""
    start = time.perf_counter()
    result = run_scenario(scenario, log_dir=log_dir, log_name=name)
    elapsed = time.perf_counter() - start
    text = result.log_path.read_text(encoding="utf-8")
    queries = text.count('"event":"query_sent"')
    return elapsed, {**result.summary["developers"]["mallory"], "queries": queries}


def _startup(scenario: Any) -> float:
    """Seconds to start a plugin's sandbox and build the strategy there, alone."""
    config = scenario.developers[0].strategy
    context = developer_context(scenario, "mallory", "plugin")
    start = time.perf_counter()
    strategy = build_strategy(config, context)
    elapsed = time.perf_counter() - start
    strategy.close()  # type: ignore[attr-defined]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="audit set size")
    parser.add_argument("--batch", type=int, default=10, help="models per query")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best is kept")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plugin_file = folder / "plugin_full_rank.py"
        plugin_file.write_text(PLUGIN, encoding="utf-8")
        options = f"batch: {args.batch}"
        library = _scenario(args.n, f"{{kind: full_rank, {options}}}")
        plugin = _scenario(
            args.n,
            f"{{kind: plugin, path: '{plugin_file}', class: PluginFullRank, {options}}}",
        )
        _timed(library, folder, "warmup")  # load the data and train the base model once
        times: dict[str, list[float]] = {"in_process": [], "plugin": []}
        results: dict[str, dict[str, Any]] = {}
        for i in range(args.repeat):
            for label, scenario in (("in_process", library), ("plugin", plugin)):
                elapsed, result = _timed(scenario, folder, f"{label}-{i}")
                times[label].append(elapsed)
                results[label] = result
        startup = min(_startup(plugin) for _ in range(args.repeat))

    same = all(
        results["plugin"][k] == results["in_process"][k] for k in ("queries", "sent", "leakage")
    )
    base, isolated = min(times["in_process"]), min(times["plugin"])
    calls = (
        2 * int(results["plugin"]["queries"]) + 2
    )  # next_action and answer per query; start, end
    report = {
        "n": args.n,
        "batch": args.batch,
        "queries": results["plugin"]["queries"],
        "in_process_seconds": base,
        "plugin_seconds": isolated,
        "ratio": isolated / base,
        "sandbox_start_seconds": startup,
        "per_call_ms": max(isolated - base - startup, 0.0) / calls * 1e3,
        "same_queries_and_leakage": same,
    }
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return
    print(f"full-rank attack, n = {args.n}, {report['queries']} queries of {args.batch} models")
    print(f"  in process (baseline)  {base:8.3f} s")
    print(f"  plugin (sandboxed)     {isolated:8.3f} s   ratio {report['ratio']:.2f}x")
    print(f"    of which the sandbox's start  {startup:8.3f} s")
    print(f"    and per call                  {report['per_call_ms']:8.3f} ms")
    print(f"  same queries and leakage: {same}")


if __name__ == "__main__":
    main()
