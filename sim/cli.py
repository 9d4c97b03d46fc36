"""The ``biasleak`` command line.

Subcommands:

``run FILE [--seed N] [--set key.path=value ...] [--json] [--log-dir DIR] [--workers W]``
    Run one scenario; print its summary as a table (or JSON) and the log's path (and the red
    team's table, or ``red_team`` in the JSON, when the scenario has a ``red_team``).
``redteam FILE [--seed N] [--set key.path=value ...] [--json] [--workers W] [--log-dir DIR]``
    Run every applicable attack of the library against the scenario's policy, each in its own
    world, and name the strongest (see :mod:`biasleak.sim.redteam`). ``run`` of a scenario with a
    ``red_team`` prints the red team's table too.
``compare FILE... [--seeds K] [--csv PATH] [--json]``
    Run several scenarios (K seeds each) and print leakage and utility side by side, then per
    policy the strongest attack (the red team's when the scenario has one, else among its own
    attackers).
``replay LOG [--json]``
    Rebuild a run's summary from its log file alone and check it against the stored one.
``sweep FILE [--seeds K] [--workers W] [--executor process|dask --address HOST:PORT] [--out DIR]``
    Run a scenario over its grid of variations and seeds (resumable; results.csv in DIR).
``report DIR... [--paper table1|...|figure3] [--to DIR]``
    A markdown report (and plots, with the ``plots`` extra) of a sweep.
``paper NAME [--scenarios DIR] [--sweeps DIR] [--to DIR] [--seeds K] [--workers W]``
    One of the paper's tables or figures end to end: the sweeps of its scenario files (resumable)
    and its report (default ``docs/paper/NAME``).
``validate FILE...``
    Check scenario files; one line per problem, exit code 2 when any is bad.
``schema``
    Print the JSON Schema of scenario files.
``demo``
    Exact and private answers for the base model on a bundled data set, no simulation.

Bad input (a scenario file, an override, a missing file) gets readable messages on stderr and
exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

PLANNED: tuple[str, ...] = ()


def _version() -> str:
    try:
        return metadata.version("biasleak")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "unknown"


def _epsilons(text: str) -> list[float]:
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            eps = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"epsilons must be comma-separated numbers > 0 (or inf); received {part!r}"
            ) from None
        if not eps > 0:
            raise argparse.ArgumentTypeError(f"every epsilon must be > 0; received {part!r}")
        out.append(eps)
    return out


def _add_overrides(parser: argparse.ArgumentParser, help_text: str) -> None:
    """The repeatable ``--set KEY.PATH=VALUE`` option of the commands that read scenarios."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help=help_text,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="biasleak",
        description=(
            "Simulate how fairness-metric queries leak protected attributes, and which answering "
            "policy stops it."
        ),
    )
    parser.add_argument("--version", action="version", version=f"biasleak {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run one scenario file")
    run.add_argument("file", help="scenario YAML file")
    run.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    _add_overrides(run, "override any key (repeatable)")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    run.add_argument("--log-dir", default="logs", help="where run logs go (default: logs)")
    run.add_argument(
        "--workers",
        type=int,
        default=1,
        help="parallel red-team worlds, for a scenario with red_team (default 1)",
    )
    redteam = sub.add_parser(
        "redteam", help="run every applicable attack against a scenario's policy"
    )
    redteam.add_argument("file", help="scenario YAML file")
    redteam.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    _add_overrides(redteam, "override any key (repeatable)")
    redteam.add_argument("--json", action="store_true", help="print the result as JSON")
    redteam.add_argument("--workers", type=int, default=1, help="parallel worlds (default 1)")
    redteam.add_argument("--log-dir", default="logs", help="where run logs go (default: logs)")
    compare = sub.add_parser("compare", help="run scenarios side by side")
    compare.add_argument("files", nargs="+", help="scenario YAML files")
    compare.add_argument("--seeds", type=int, default=1, help="seeds per scenario (default 1)")
    _add_overrides(compare, "override a key in every scenario")
    compare.add_argument("--csv", default=None, help="also write one row per run to this CSV")
    compare.add_argument("--json", action="store_true", help="print the rows as JSON")
    compare.add_argument("--log-dir", default="logs", help="where run logs go (default: logs)")
    replay = sub.add_parser("replay", help="rebuild a run's summary from its log")
    replay.add_argument("log", help="a run's .jsonl log file")
    replay.add_argument("--json", action="store_true", help="print the summary as JSON")
    sweep = sub.add_parser("sweep", help="run a scenario over a grid of variations and seeds")
    sweep.add_argument("file", help="scenario YAML file (its grid: is used)")
    sweep.add_argument("--seeds", type=int, default=None, help="seeds per grid point")
    _add_overrides(sweep, "override a key (repeatable)")
    sweep.add_argument("--workers", type=int, default=1, help="parallel runs (default 1)")
    sweep.add_argument("--executor", choices=("process", "dask"), default="process")
    sweep.add_argument(
        "--address", default=None, help="Dask scheduler HOST:PORT (default: a local cluster)"
    )
    sweep.add_argument("--out", default=None, help="output folder (default: sweeps/<name>)")
    report = sub.add_parser("report", help="write a report of a sweep")
    report.add_argument("out", nargs="+", help="sweep output folders (one report over all)")
    report.add_argument(
        "--paper",
        default=None,
        help="compare with a paper table: table1, table2, table3, table4, figure2 or figure3",
    )
    report.add_argument("--to", default=None, help="report folder (default: OUT/report)")
    paper = sub.add_parser(
        "paper", help="reproduce one of the paper's tables or figures: sweeps, then the report"
    )
    paper.add_argument("name", help="table1, table2, table3, table4, figure2 or figure3")
    paper.add_argument(
        "--scenarios",
        default="scenarios/paper",
        help="folder of the paper's scenario files (default: scenarios/paper)",
    )
    paper.add_argument(
        "--sweeps", default="sweeps/paper", help="where the sweeps go (default: sweeps/paper)"
    )
    paper.add_argument("--to", default=None, help="report folder (default: docs/paper/NAME)")
    paper.add_argument("--seeds", type=int, default=None, help="seeds per grid point")
    paper.add_argument("--workers", type=int, default=1, help="parallel runs (default 1)")
    validate = sub.add_parser("validate", help="check scenario files")
    validate.add_argument("files", nargs="+", help="scenario YAML files")
    sub.add_parser("schema", help="print the JSON Schema of scenario files")
    demo = sub.add_parser(
        "demo",
        help="exact and private SP answers for the base model on a bundled data set",
        description=(
            "Train the base model on a bundled data set without the protected attribute and "
            "print its exact statistical parity gap beside Laplace and Attribute-Conceal answers."
        ),
    )
    demo.add_argument("--dataset", choices=("adult", "german", "synthetic"), default="adult")
    demo.add_argument("--n", type=int, default=1000, help="audit set size (default 1000)")
    demo.add_argument("--seed", type=int, default=0, help="seed for the audit draw and the noise")
    demo.add_argument(
        "--epsilons",
        type=_epsilons,
        default=[0.1, 1.0, 10.0, 100.0],
        help="comma-separated epsilons (default 0.1,1,10,100)",
    )
    demo.add_argument(
        "--draws",
        type=int,
        default=2001,
        help="noise draws per row for the median error (default 2001)",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def demo(args: argparse.Namespace) -> int:
    """Run the embedded default job and print its results."""
    from biasleak.agents.models import train_base_model
    from biasleak.mechanisms import metrics, release
    from biasleak.sim.datasets import load_adult, load_german, make_synthetic

    if args.draws < 1:
        print("biasleak demo: --draws must be >= 1", file=sys.stderr)
        return 2
    try:
        if args.dataset == "adult":
            data = load_adult(protected="race", n=args.n, seed=args.seed)
        elif args.dataset == "german":
            data = load_german(n=args.n, seed=args.seed)
        else:
            data = make_synthetic(n=args.n, n0=max(1, args.n // 10), seed=args.seed)
    except ValueError as err:
        print(f"biasleak demo: {err}", file=sys.stderr)
        return 2
    model = train_base_model(data.public.train)
    h0 = model.predict_proba(data.public.audit)
    sp = float(metrics.statistical_parity(h0, protected=data.protected))
    rng = np.random.default_rng(args.seed)
    rows = []
    for eps in args.epsilons:
        for mech in ("laplace", "attribute_conceal"):
            draws = [
                release.release(
                    mech, [sp], metric="sp", n1=data.n1, n0=data.n0, epsilon=eps, rng=rng
                )
                for _ in range(args.draws)
            ]
            answers = np.array([d.values[0] for d in draws])
            rows.append(
                {
                    "epsilon": eps,
                    "mechanism": mech,
                    "answer": float(answers[0]),
                    "median_abs_error": float(np.median(np.abs(answers - sp))),
                    "noise_scale": draws[0].noise_scale,
                }
            )
    summary = {
        "dataset": data.public.description,
        "protected": data.public.protected_name,
        "n": data.n,
        "n1": data.n1,
        "n0": data.n0,
        "advantaged": data.advantaged,
        "disadvantaged": data.disadvantaged,
        "base_model_accuracy": model.accuracy(data.public.audit),
        "exact_sp": sp,
        "draws": args.draws,
        "answers": rows,
    }
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return 0
    print(f"biasleak {_version()} demo")
    print(f"data:       {summary['dataset']}")
    print(f"groups:     N1 = {data.n1} ({data.advantaged}), N0 = {data.n0} ({data.disadvantaged})")
    print(
        "base model: logistic regression trained without the protected attribute; "
        f"audit accuracy {100 * summary['base_model_accuracy']:.2f}%"
    )
    print(f"exact SP of the base model: {sp:+.5f}")
    print()
    print(
        "One SP query answered privately (m = 1). 'answer' is one draw; 'median |error|' is over "
        f"{args.draws} draws.\n'noise scale' is internal to the compliance team: for "
        "Attribute-Conceal it depends on N0 and N1."
    )
    header = f"{'epsilon':>8}  {'mechanism':<18} {'answer':>10} {'median |error|':>15} "
    header += f"{'noise scale':>12}"
    print(header)
    print("-" * len(header))
    for r in rows:
        eps = "inf" if math.isinf(r["epsilon"]) else f"{r['epsilon']:g}"
        print(
            f"{eps:>8}  {r['mechanism']:<18} {r['answer']:>+10.4f} "
            f"{r['median_abs_error']:>15.4f} {r['noise_scale']:>12.4f}"
        )
    return 0


def _fail(problems: list[str]) -> int:
    for line in problems:
        print(line, file=sys.stderr)
    return 2


def cmd_run(args: argparse.Namespace) -> int:
    """``biasleak run``."""
    from biasleak.sim.runlog import dumps
    from biasleak.sim.scenario import ScenarioError, load_scenario
    from biasleak.sim.tables import format_run
    from biasleak.sim.world import run_scenario

    try:
        scenario = load_scenario(args.file, overrides=args.overrides)
        if args.seed is not None and args.seed < 0:
            return _fail([f"--seed must be >= 0; received {args.seed}"])
        result = run_scenario(scenario, seed=args.seed, log_dir=args.log_dir)
    except ScenarioError as err:
        return _fail(err.problems)
    except ValueError as err:  # data that cannot be loaded as configured
        return _fail([f"{args.file}: {err}"])
    red = None
    if scenario.red_team is not None:
        from biasleak.sim.redteam import format_red_team, run_red_team
        from biasleak.sim.sweep import close_executor, make_executor

        if args.workers < 1:
            return _fail([f"--workers must be >= 1; received {args.workers}"])
        executor = make_executor("process", workers=args.workers)[0] if args.workers > 1 else None
        try:
            red = run_red_team(scenario, seed=args.seed, log_dir=args.log_dir, executor=executor)
        finally:
            close_executor(executor)
    if args.json:
        shown = result.summary if red is None else {**result.summary, "red_team": red.to_json()}
        print(dumps(shown))
    else:
        print(format_run(result.summary))
        if red is not None:
            print()
            print(format_red_team(red))
    return 0


def cmd_redteam(args: argparse.Namespace) -> int:
    """``biasleak redteam``."""
    from biasleak.sim.redteam import format_red_team, run_red_team
    from biasleak.sim.runlog import dumps
    from biasleak.sim.scenario import ScenarioError, load_scenario
    from biasleak.sim.sweep import close_executor, make_executor

    problems = []
    if args.workers < 1:
        problems.append(f"--workers must be >= 1; received {args.workers}")
    if args.seed is not None and args.seed < 0:
        problems.append(f"--seed must be >= 0; received {args.seed}")
    if problems:
        return _fail(problems)
    try:
        scenario = load_scenario(args.file, overrides=args.overrides)
        executor = None
        if args.workers > 1:
            executor, _ = make_executor("process", workers=args.workers)
        try:
            result = run_red_team(scenario, seed=args.seed, log_dir=args.log_dir, executor=executor)
        finally:
            close_executor(executor)
    except ScenarioError as err:
        return _fail(err.problems)
    except ValueError as err:
        return _fail([f"{args.file}: {err}"])
    print(dumps(result.to_json()) if args.json else format_red_team(result))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """``biasleak compare``."""
    import csv

    from biasleak.sim.redteam import (
        format_strongest,
        run_red_team,
        scenario_attacks,
        strongest_over_runs,
    )
    from biasleak.sim.runlog import dumps
    from biasleak.sim.scenario import ScenarioError, load_scenario
    from biasleak.sim.tables import aggregate, compare_rows, format_compare
    from biasleak.sim.world import run_scenario

    if args.seeds < 1:
        return _fail([f"--seeds must be >= 1; received {args.seeds}"])
    try:
        scenarios = [load_scenario(f, overrides=args.overrides) for f in args.files]
    except ScenarioError as err:
        return _fail(err.problems)
    results = []
    strongest = []
    for scenario in scenarios:
        attacks = []  # per seed, the attack records the verdict rests on
        for k in range(args.seeds):
            try:
                result = run_scenario(scenario, seed=scenario.seed + k, log_dir=args.log_dir)
                if scenario.red_team is not None:
                    red = run_red_team(scenario, seed=scenario.seed + k, log_dir=args.log_dir)
                    attacks.append(red.attacks)
                else:
                    attacks.append(scenario_attacks(result.summary))
            except ValueError as err:
                return _fail([f"{scenario.name}: {err}"])
            results.append((scenario.name, result.summary))
        source = "red team" if scenario.red_team is not None else "scenario"
        strongest.append(strongest_over_runs(scenario.name, attacks, source=source))
    rows = compare_rows(results)
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if args.json:
        print(dumps({"runs": rows, "aggregate": aggregate(rows), "strongest": strongest}))
    else:
        print(format_compare(aggregate(rows)))
        print()
        print(format_strongest(strongest))
        if args.csv:
            print(f"rows: {args.csv}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """``biasleak replay``."""
    from biasleak.sim.evaluation import summarize
    from biasleak.sim.runlog import dumps, jsonable, read_log
    from biasleak.sim.tables import format_run

    try:
        events = list(read_log(args.log))
    except (OSError, ValueError) as err:
        return _fail([f"{args.log}: cannot read the run log ({err})"])
    stored = next((e["summary"] for e in events if e.get("event") == "summary"), None)
    try:
        rebuilt = jsonable(summarize(events))
    except (KeyError, ValueError) as err:
        return _fail([f"{args.log}: not a biasleak run log ({err})"])
    shown = {"log": args.log, **rebuilt}
    print(dumps(shown) if args.json else format_run(shown))
    if stored is None:
        print(
            f"{args.log}: the run did not finish (no summary line); rebuilt from "
            f"{len(events) - 1} events",
            file=sys.stderr,
        )
        return 0
    if stored != rebuilt:
        print(f"{args.log}: the rebuilt summary differs from the stored one", file=sys.stderr)
        return 1
    if not args.json:
        print("the rebuilt summary equals the one the run stored")
    return 0


def _count_problems(args: argparse.Namespace) -> list[str]:
    """``--workers`` and ``--seeds`` of ``sweep`` and ``paper``: both must be at least 1."""
    problems = []
    if args.workers < 1:
        problems.append(f"--workers must be >= 1; received {args.workers}")
    if args.seeds is not None and args.seeds < 1:
        problems.append(f"--seeds must be >= 1; received {args.seeds}")
    return problems


def cmd_sweep(args: argparse.Namespace) -> int:
    """``biasleak sweep``."""
    from biasleak.sim.scenario import ScenarioError, load_scenario
    from biasleak.sim.sweep import close_executor, make_executor, run_sweep

    problems = _count_problems(args)
    if problems:
        return _fail(problems)
    try:
        scenario = load_scenario(args.file, overrides=args.overrides)
        out = args.out or f"sweeps/{scenario.name}"
        executor, client = (None, None)
        if args.executor == "dask" or args.workers > 1:
            executor, client = make_executor(
                args.executor, workers=args.workers, address=args.address
            )
        try:
            result = run_sweep(
                args.file,
                out=out,
                seeds=args.seeds,
                overrides=args.overrides,
                executor=executor,
                workers=args.workers,
            )
        finally:
            close_executor(executor, client)
    except ScenarioError as err:
        return _fail(err.problems)
    except ValueError as err:
        return _fail([f"{args.file}: {err}"])
    print(
        f"{result.total} runs: {result.skipped} already done, {result.ok} ok, "
        f"{result.failed} failed; results in {result.out / 'results.csv'}"
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``biasleak report``."""
    from biasleak.sim.report import write_report

    try:
        path = write_report(args.out, paper=args.paper, to=args.to)
    except (OSError, ValueError) as err:
        return _fail([f"biasleak report: {err}"])
    print(f"report: {path}")
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    """``biasleak paper``."""
    from biasleak.sim.report import PAPER_FILES, write_report
    from biasleak.sim.scenario import ScenarioError
    from biasleak.sim.sweep import close_executor, make_executor, run_sweep

    if args.name not in PAPER_FILES:
        return _fail(
            [f"biasleak paper: NAME must be one of {list(PAPER_FILES)}; got {args.name!r}"]
        )
    problems = _count_problems(args)
    if problems:
        return _fail(problems)
    files = [f"{args.scenarios.rstrip('/')}/{stem}.yaml" for stem in PAPER_FILES[args.name]]
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        return _fail(
            [
                f"biasleak paper: no scenario file {f} (run from the repository root, or pass "
                "--scenarios DIR)"
                for f in missing
            ]
        )
    folders = [f"{args.sweeps.rstrip('/')}/{stem}" for stem in PAPER_FILES[args.name]]
    to = args.to or f"docs/paper/{args.name}"
    executor, client = (None, None)
    try:
        if args.workers > 1:
            executor, client = make_executor("process", workers=args.workers)
        for file, folder in zip(files, folders, strict=True):
            result = run_sweep(
                file, out=folder, seeds=args.seeds, executor=executor, workers=args.workers
            )
            print(
                f"{file}: {result.total} runs: {result.skipped} already done, {result.ok} ok, "
                f"{result.failed} failed"
            )
        path = write_report(folders, paper=args.name, to=to)
    except ScenarioError as err:
        return _fail(err.problems)
    except (OSError, ValueError) as err:
        return _fail([f"biasleak paper: {err}"])
    finally:
        close_executor(executor, client)
    print(f"report: {path}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """``biasleak validate``."""
    from biasleak.sim.scenario import ScenarioError, load_scenario

    problems = []
    for f in args.files:
        try:
            load_scenario(f)
            print(f"{f}: ok")
        except ScenarioError as err:
            problems.extend(err.problems)
    return _fail(problems) if problems else 0


def cmd_schema(_args: argparse.Namespace) -> int:
    """``biasleak schema``."""
    from biasleak.sim.scenario import schema

    print(json.dumps(schema(), indent=2, sort_keys=True, allow_nan=False))
    return 0


COMMANDS = {
    "run": cmd_run,
    "redteam": cmd_redteam,
    "sweep": cmd_sweep,
    "report": cmd_report,
    "paper": cmd_paper,
    "compare": cmd_compare,
    "replay": cmd_replay,
    "validate": cmd_validate,
    "schema": cmd_schema,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``biasleak`` console script and ``python -m biasleak.sim``."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(args)
    if args.command in COMMANDS:
        try:
            return COMMANDS[args.command](args)
        except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback
            print(
                f"biasleak {args.command}: interrupted; a run that was under way left its log "
                "without a summary line",
                file=sys.stderr,
            )
            return 130
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
