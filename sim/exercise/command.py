"""The ``biasleak exercise`` subcommand.

``biasleak exercise FILE [--decisions FILE] [--branch DECISION=OPTION ...] [--out DIR]
[--serve [--port P]]`` and ``biasleak exercise --schema``:

- with every decision point scripted (the file's ``decisions:``, ``--decisions``), the exercise
  runs without a person and writes ``OUT/report.html``, ``OUT/report.md``, the run's log and
  ``OUT/decisions.yaml`` (the same inputs give byte-identical files);
- otherwise the terminal prompts the facilitator at each unscripted decision point
  (:mod:`.terminal`); Ctrl-C leaves a closed log and a partial report, exit code 130;
- ``--branch`` reruns from the same seed with the named decisions changed and writes the
  side-by-side report to ``OUT/report.html`` (the two runs in ``OUT/base`` and ``OUT/branch``);
  after a terminal play, the branch reruns the decisions just taken;
- ``--live`` leaves the file's own scripted ``decisions:`` out, so the room decides every point
  (a ``--decisions`` file still applies); shipped exercises script every decision, for CI;
- ``--serve`` opens the browser console (:mod:`biasleak.sim.exercise.web`, imported only then);
  it implies ``--live``;
- ``--schema`` prints the JSON Schema of exercise files (``exercises/schema.json``).

A bad exercise or decisions file, a bad ``--branch`` or an output that cannot be written is one
line per problem on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "cmd_exercise"]

NO_CONSOLE = "biasleak exercise --serve: the browser console is not available ({error})"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``exercise`` to the ``biasleak`` subcommands; return its parser."""
    parser = subparsers.add_parser(
        "exercise",
        help="run a governance tabletop exercise (decision points, injects, after-action report)",
        description=(
            "Run a tabletop exercise: the scenario's world pauses at decision points; scripted "
            "decisions apply themselves, the others are asked at the terminal (or in the "
            "browser with --serve). Writes the after-action report to OUT/report.html."
        ),
    )
    parser.add_argument("file", nargs="?", default=None, help="exercise YAML file")
    parser.add_argument(
        "--decisions", default=None, metavar="FILE", help="scripted decisions (YAML)"
    )
    parser.add_argument(
        "--branch",
        action="append",
        default=[],
        metavar="DECISION=OPTION",
        help="rerun from the same seed with this decision changed and compare (repeatable)",
    )
    parser.add_argument(
        "--out", default=None, help="output folder (default: logs/exercises/<name>)"
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="ignore the file's scripted decisions: the room decides every decision point",
    )
    parser.add_argument(
        "--serve", action="store_true", help="open the browser console (implies --live)"
    )
    parser.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000)")
    parser.add_argument(
        "--schema", action="store_true", help="print the JSON Schema of exercise files"
    )
    return parser


def _fail(problems: list[str]) -> int:
    for line in problems:
        print(line, file=sys.stderr)
    return 2


def _branches(items: list[str]) -> dict[str, str] | list[str]:
    out: dict[str, str] = {}
    problems = []
    for item in items:
        decision, sep, option = item.partition("=")
        if not sep or not decision.strip() or not option.strip():
            problems.append(f"--branch must be DECISION=OPTION; received {item!r}")
        elif decision.strip() in out:
            problems.append(f"--branch names decision {decision.strip()!r} twice")
        else:
            out[decision.strip()] = option.strip()
    return problems or out


def cmd_exercise(args: argparse.Namespace) -> int:
    """``biasleak exercise``: the exit code (0 done, 2 bad input, 130 interrupted)."""
    from biasleak.sim.exercise.loading import load_exercise
    from biasleak.sim.exercise.models import schema
    from biasleak.sim.exercise.session import (
        DEFAULT_OUT,
        ExerciseError,
        ExerciseSession,
        run_branches,
        scripted_decisions,
    )
    from biasleak.sim.outputs import output_problems
    from biasleak.sim.scenario import ScenarioError

    if args.schema:
        print(json.dumps(schema(), indent=2, sort_keys=True, allow_nan=False))
        return 0
    if args.file is None:
        return _fail(["biasleak exercise: give an exercise FILE (or --schema)"])
    branch = _branches(args.branch)
    if isinstance(branch, list):
        return _fail(branch)
    if not 0 < args.port < 65536:
        return _fail([f"--port must be between 1 and 65535; received {args.port}"])
    try:
        loaded = load_exercise(args.file)
        live = bool(args.live or args.serve)
        scripted = scripted_decisions(
            loaded.exercise, decisions_file=args.decisions, branch=branch or None, live=live
        )
    except ScenarioError as err:
        return _fail(err.problems)
    except ExerciseError as err:
        return _fail(str(err).splitlines())
    out = Path(args.out or f"{DEFAULT_OUT}/{loaded.exercise.name}")
    problems = output_problems({"--out": str(out)})
    if problems:
        return _fail(problems)

    def session_factory() -> ExerciseSession:
        base = scripted_decisions(loaded.exercise, decisions_file=args.decisions, live=live)
        return ExerciseSession(loaded, scripted=base, out=out)

    if args.serve:
        try:
            from biasleak.sim.exercise.web import serve
        except ImportError as err:
            return _fail([NO_CONSOLE.format(error=err)])
        serve(session_factory, "127.0.0.1", args.port)
        return 0
    every = all(p.id in scripted for p in loaded.exercise.decision_points)
    try:
        if branch and every:
            path = run_branches(args.file, decisions_file=args.decisions, branch=branch, out=out)
            print(f"branch report: {path}")
            print(f"runs: {out / 'base'} and {out / 'branch'}")
            return 0
        session = ExerciseSession(
            loaded,
            scripted=scripted_decisions(loaded.exercise, decisions_file=args.decisions, live=live),
            out=out,
        )
        if all(p.id in session.scripted for p in loaded.exercise.decision_points):
            try:
                path, status = session.finish(), "finished"
            except KeyboardInterrupt:
                path, status = session.interrupt(), "interrupted"
        else:
            from biasleak.sim.exercise.terminal import play

            try:
                status, path = play(session, out=sys.stdout)
            except BaseException:
                session.abort()
                raise
        _print_outputs(session, path)
        if status == "interrupted":
            return 130
        if branch:  # a live play, then its branch: rerun the decisions just taken
            taken: dict[str, Any] = json.loads((out / "decisions.yaml").read_text("utf-8"))
            path = run_branches(
                args.file,
                decisions=taken["decisions"],
                branch=branch,
                out=out / "branches",
            )
            print(f"branch report: {path}")
    except ExerciseError as err:
        return _fail(str(err).splitlines())
    except KeyboardInterrupt:
        print("biasleak exercise: interrupted", file=sys.stderr)
        return 130
    return 0


def _print_outputs(session: Any, path: Path) -> None:
    print(f"report: {path}")
    print(f"log: {session.log_path}")
    print(f"decisions: {session.out / 'decisions.yaml'}")


def main(argv: list[str] | None = None) -> int:
    """``python -m biasleak.sim.exercise.command ...``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="biasleak")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["exercise", *(sys.argv[1:] if argv is None else argv)])
    return cmd_exercise(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
