"""The ``biasleak`` command line.

Subcommands:

``run FILE [--seed N] [--set key.path=value ...] [--json] [--log-dir DIR] [--workers W]``
``[--target PCT] [--audit]``
    Run one scenario; print its summary as a table (or JSON) and the log's path (and the red
    team's table, or ``red_team`` in the JSON, when the scenario has a ``red_team``). The table
    opens with the verdict: the strongest attack and the three ceilings (policy, audit set,
    answers), and with ``--target`` which of them proves the policy safe at that leakage (the
    JSON then has ``verdict``). ``redteam``, ``compare``, ``replay`` and ``report`` take
    ``--target`` too. ``--audit`` (or a ``privacy_audit`` block in the scenario) also runs the
    privacy audit from below (as ``audit`` does) and quotes it in the verdict; run and redteam
    then exit 1 when a lower bound exceeds a claim.
``redteam FILE [--seed N] [--set key.path=value ...] [--json] [--workers W] [--log-dir DIR]``
``[--target PCT] [--audit]``
    Run every applicable attack of the library against the scenario's policy, each in its own
    world, and name the strongest (see :mod:`biasleak.sim.redteam`). ``run`` of a scenario with a
    ``red_team`` prints the red team's table too.
``compare FILE... [--seeds K] [--csv PATH] [--json]``
    Run several scenarios (K seeds each) and print leakage and utility side by side, then per
    policy the strongest attack (the red team's when the scenario has one, else among its own
    attackers). Rows are labelled by scenario name; scenarios that share a name are labelled by
    their file's stem (by the path when the stems match too); one file given twice is an error.
``replay LOG [--json]``
    Rebuild a run's summary from its log file alone and check it against the stored one (exit 1
    when it differs, or when the log is truncated: the run did not finish).
``sweep FILE [--seeds K] [--workers W] [--executor process|dask --address HOST:PORT] [--out DIR]``
    Run a scenario over its grid of variations and seeds (resumable; results.csv in DIR).
``report DIR... [--paper table1|...|figure3] [--to DIR]``
    A markdown report (and plots, with the ``plots`` extra) of a sweep.
``paper NAME [--scenarios DIR] [--sweeps DIR] [--to DIR] [--seeds K] [--workers W]``
    One of the paper's tables or figures end to end: the sweeps of its scenario files (resumable)
    and its report (default ``docs/paper/NAME``).
``paper fair-postprocessing|fair-inprocessing|fair-convergence [--to DIR] [--seeds K] ...``
    The private fair-learning experiments of Jagielski et al. 2019 on Adult and German credit
    (:mod:`biasleak.sim.fair`) and their report (default ``docs/paper/NAME``);
    also ``--workers W``, and ``--quick``, which shrinks the grid to a smoke test.
``audit FILE [--trials N] [--seed N] [--set key.path=value ...] [--canaries M]``
``[--scale-factor F] [--json]``
    Check the ceilings' privacy claims from below (:mod:`biasleak.sim.privacy_audit`): run the
    scenario's release many times on its audit set and on neighbouring ones, with the worst
    queries found and the attackers' first queries, plus two one-run canary audits; print the
    verdict first, then each pair's claimed epsilon and TV beside the empirical lower bounds.
    Exit code 1 when a lower bound exceeds a claim (a defect), 0 otherwise. ``--trials`` and
    ``--canaries`` default to the scenario's ``privacy_audit`` block, else 100,000 and 100;
    ``--scale-factor`` below 1 audits an under-noised twin, to see the audit catch it.
``validate FILE...``
    Check scenario files; one line per problem, exit code 2 when any is bad.
``schema``
    Print the JSON Schema of scenario files.
``demo``
    Exact and private answers for the base model on a bundled data set, no simulation.
``exercise FILE [--decisions FILE] [--branch DECISION=OPTION ...] [--out DIR] [--live]``
``[--serve [--port P]]``
    A governance tabletop exercise on a scenario (:mod:`biasleak.sim.exercise`): the world
    pauses at decision points, scripted decisions apply themselves and the others are asked at
    the terminal or in the browser console; writes the after-action report ``OUT/report.html``.

Bad input (a scenario file, an override, a missing file) gets readable messages on stderr and
exit code 2, never a traceback. So does an output that cannot be written (``--log-dir`` or
``--out`` on a file or in a read-only place, ``--csv`` naming a folder; missing folders are made),
found before the first run, and a Dask ``--address`` that cannot be reached. Ctrl-C or SIGTERM
stops a command with one line on stderr and exit code 130; a stopped ``sweep`` resumes with the
same command.

The options several commands share (``--seed`` and ``--set``, ``--json``, ``--workers`` with
``--executor`` and ``--address``, ``--log-dir``, ``--out``) are defined once, as parent parsers
that each subcommand composes. What a command does lives in :mod:`biasleak.sim.cli.commands` (and
:mod:`biasleak.sim.demo`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import metadata

from biasleak.sim.cli import commands
from biasleak.sim.executors import terminate_as_interrupt
from biasleak.sim.exercise import command as exercise
from biasleak.sim.paper_items import FAIR_EXPERIMENTS, PAPER_ITEMS

PLANNED: tuple[str, ...] = ()


def _epsilons(text: str) -> list[float]:
    """``--epsilons`` of the demo (its module, with NumPy, loads only when the demo runs)."""
    from biasleak.sim.demo import epsilons

    return epsilons(text)


def _version() -> str:
    try:
        return metadata.version("biasleak")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "unknown"


def _parent() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(add_help=False)


def _scenario_options(set_help: str, *, seed: bool = False) -> argparse.ArgumentParser:
    """``--seed N`` (if ``seed``) and the repeatable ``--set KEY.PATH=VALUE``."""
    parent = _parent()
    if seed:
        parent.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parent.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help=set_help,
    )
    return parent


def _seeds_option(help_text: str, *, default: int | None) -> argparse.ArgumentParser:
    """``--seeds K``: seeds per scenario or grid point."""
    parent = _parent()
    parent.add_argument("--seeds", type=int, default=default, help=help_text)
    return parent


def _json_option(help_text: str) -> argparse.ArgumentParser:
    parent = _parent()
    parent.add_argument("--json", action="store_true", help=help_text)
    return parent


def target_percent(text: str) -> float:
    """A ``--target`` value: a leakage in percent, strictly between 50 and 100 (a coin flip is
    50%; no ceiling is below it)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--target must be a leakage in percent (e.g. 60); received {text!r}"
        ) from None
    if not 50.0 < value <= 100.0:
        raise argparse.ArgumentTypeError(
            f"--target must be above 50 (a coin flip) and at most 100; received {text!r}"
        )
    return value


def _target_option() -> argparse.ArgumentParser:
    """``--target PCT``: the risk target the verdict is stated at."""
    parent = _parent()
    parent.add_argument(
        "--target",
        type=target_percent,
        default=None,
        metavar="PCT",
        help="the leakage (balanced accuracy, %%) a policy must be proven not to exceed: the "
        "verdict says which ceiling meets it",
    )
    return parent


def _audit_flag(parser: argparse.ArgumentParser) -> None:
    """``--audit``: run the privacy audit from below and quote it in the verdict."""
    parser.add_argument(
        "--audit",
        action="store_true",
        help="also run the privacy audit from below (as biasleak audit; on by default when the "
        "scenario has a privacy_audit block) and quote it in the verdict; exit 1 when a lower "
        "bound exceeds a claim",
    )


def _pool_options(help_text: str, *, executors: bool = False) -> argparse.ArgumentParser:
    """``--workers W`` (and, with ``executors``, ``--executor`` and ``--address``)."""
    parent = _parent()
    parent.add_argument("--workers", type=int, default=1, help=help_text)
    if executors:
        parent.add_argument("--executor", choices=("process", "dask"), default="process")
        parent.add_argument(
            "--address", default=None, help="Dask scheduler HOST:PORT (default: a local cluster)"
        )
    return parent


def _output_options(*, log_dir: bool = False, out: bool = False) -> argparse.ArgumentParser:
    """``--log-dir DIR`` (run logs) and ``--out DIR`` (a sweep's folder)."""
    parent = _parent()
    if log_dir:
        parent.add_argument("--log-dir", default="logs", help="where run logs go (default: logs)")
    if out:
        parent.add_argument("--out", default=None, help="output folder (default: sweeps/<name>)")
    return parent


def _paper_names() -> str:
    """The paper items ``report --paper`` and ``paper`` know, in words."""
    *first, last = PAPER_ITEMS
    return f"{', '.join(first)} or {last}"


PAPER_NAMES = _paper_names()
SEEDS_PER_POINT = "seeds per grid point"
PARALLEL_RUNS = "parallel runs (default 1)"


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
    logs = _output_options(log_dir=True)
    one_scenario = _scenario_options("override any key (repeatable)", seed=True)
    target = _target_option()

    run = sub.add_parser(
        "run",
        help="run one scenario file",
        parents=[
            one_scenario,
            _json_option("print the summary as one JSON object"),
            logs,
            _pool_options("parallel red-team worlds, for a scenario with red_team (default 1)"),
            target,
        ],
    )
    run.add_argument("file", help="scenario YAML file")
    _audit_flag(run)
    redteam = sub.add_parser(
        "redteam",
        help="run every applicable attack against a scenario's policy",
        parents=[
            one_scenario,
            _json_option("print the result as JSON"),
            _pool_options("parallel worlds (default 1)"),
            logs,
            target,
        ],
    )
    redteam.add_argument("file", help="scenario YAML file")
    _audit_flag(redteam)
    compare = sub.add_parser(
        "compare",
        help="run scenarios side by side",
        description=(
            "Run scenarios side by side. Rows are labelled by scenario name; scenarios that "
            "share a name are labelled by their file's stem (by the path when the stems match "
            "too), and their logs named <name>-<stem>-seed<seed>; one file given twice is an "
            "error."
        ),
        parents=[
            _seeds_option("seeds per scenario (default 1)", default=1),
            _scenario_options("override a key in every scenario"),
            _json_option("print the rows as JSON"),
            logs,
            target,
        ],
    )
    compare.add_argument("files", nargs="+", help="scenario YAML files")
    compare.add_argument(
        "--csv",
        default=None,
        help="also write one row per run to this CSV (missing folders are made)",
    )
    replay = sub.add_parser(
        "replay",
        help="rebuild a run's summary from its log",
        parents=[_json_option("print the summary as JSON"), target],
    )
    replay.add_argument("log", help="a run's .jsonl log file")
    sweep = sub.add_parser(
        "sweep",
        help="run a scenario over a grid of variations and seeds",
        parents=[
            _seeds_option(SEEDS_PER_POINT, default=None),
            _scenario_options("override a key (repeatable)"),
            _pool_options(PARALLEL_RUNS, executors=True),
            _output_options(out=True),
        ],
    )
    sweep.add_argument("file", help="scenario YAML file (its grid: is used)")
    report = sub.add_parser("report", help="write a report of a sweep", parents=[target])
    report.add_argument("out", nargs="+", help="sweep output folders (one report over all)")
    report.add_argument("--paper", default=None, help=f"compare with a paper table: {PAPER_NAMES}")
    report.add_argument("--to", default=None, help="report folder (default: OUT/report)")
    paper = sub.add_parser(
        "paper",
        help="reproduce one of the paper's tables or figures: sweeps, then the report",
        parents=[_seeds_option(SEEDS_PER_POINT, default=None), _pool_options(PARALLEL_RUNS)],
    )
    paper.add_argument(
        "name", help=f"{PAPER_NAMES}; or a fair-learning experiment: {', '.join(FAIR_EXPERIMENTS)}"
    )
    paper.add_argument(
        "--scenarios",
        default="scenarios/paper",
        help="folder of the paper's scenario files (default: scenarios/paper)",
    )
    paper.add_argument(
        "--sweeps", default="sweeps/paper", help="where the sweeps go (default: sweeps/paper)"
    )
    paper.add_argument("--to", default=None, help="report folder (default: docs/paper/NAME)")
    paper.add_argument(
        "--quick",
        action="store_true",
        help="fair-* only: a small grid (few seeds, gammas and epsilons) for a smoke test",
    )
    _audit_parser(sub, one_scenario)
    validate = sub.add_parser("validate", help="check scenario files")
    validate.add_argument("files", nargs="+", help="scenario YAML files")
    sub.add_parser("schema", help="print the JSON Schema of scenario files")
    _demo_parser(sub)
    exercise.add_parser(sub)
    return parser


def _audit_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], one_scenario: argparse.ArgumentParser
) -> None:
    audit = sub.add_parser(
        "audit",
        help="check the ceilings' privacy claims from below (an empirical privacy audit)",
        description=(
            "Run the scenario's release many times on its audit set and on neighbouring ones "
            "(a flip of one person's attribute, a swap of two people's), with the worst queries "
            "found and the attackers' first queries, and bound its privacy loss from below "
            "(Clopper-Pearson, all bounds jointly at 95%%); compare with the ceiling module's "
            "claims at the audit-set level. Exit code 1 when a lower bound exceeds a claim."
        ),
        parents=[one_scenario, _json_option("print the report as one JSON object")],
    )
    audit.add_argument("file", help="scenario YAML file")
    audit.add_argument(
        "--trials",
        type=int,
        default=None,
        help="releases per world for each audited pair (default: the scenario's "
        "privacy_audit.trials, else 100000)",
    )
    audit.add_argument(
        "--canaries",
        type=int,
        default=None,
        help="canaries of each one-run audit (default: privacy_audit.canaries, else 100)",
    )
    audit.add_argument(
        "--scale-factor",
        type=float,
        default=1.0,
        help="multiply the noise scale: below 1 audits an under-noised twin (default 1)",
    )


def _demo_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="exact and private SP answers for the base model on a bundled data set",
        description=(
            "Train the base model on a bundled data set without the protected attribute and "
            "print its exact statistical parity gap beside Laplace and Attribute-Conceal answers."
        ),
        parents=[_json_option("print one JSON object")],
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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": commands.cmd_run,
    "redteam": commands.cmd_redteam,
    "sweep": commands.cmd_sweep,
    "report": commands.cmd_report,
    "paper": commands.cmd_paper,
    "compare": commands.cmd_compare,
    "replay": commands.cmd_replay,
    "audit": commands.cmd_audit,
    "validate": commands.cmd_validate,
    "schema": commands.cmd_schema,
    "exercise": exercise.cmd_exercise,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``biasleak`` console script and ``python -m biasleak.sim``."""
    parser = _parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(arguments)
    args.argv = arguments  # the command line as given, for "resume with the same command"
    if args.command == "demo":
        from biasleak.sim.demo import run_demo

        return run_demo(args, version=_version())
    if args.command in COMMANDS:
        try:
            with terminate_as_interrupt():  # SIGTERM stops a command as Ctrl-C does
                return COMMANDS[args.command](args)
        except KeyboardInterrupt as err:  # one line, not a traceback
            return commands.stopped(args.command, err)
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
