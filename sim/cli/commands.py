"""What each ``biasleak`` subcommand does once its options are parsed.

One function per subcommand, ``cmd_<name>(args) -> exit code``; :mod:`biasleak.sim.cli` builds
the parser and dispatches to them. Every command turns bad input (a scenario file, an override, a
count below 1) into readable lines on stderr and exit code 2, never a traceback.

Commands that hand runs to a pool of workers (``run`` and ``redteam`` with ``--workers``,
``sweep``, ``paper``) open it with :func:`biasleak.sim.executors.pool`, so that Ctrl-C or SIGTERM
stops the workers with the command. A command stopped that way ends with one line on stderr and
exit code 130 (:func:`stopped`): ``sweep`` and ``paper`` say where the finished runs are and
that the same command resumes; ``compare`` writes its ``--csv`` for the runs that finished. A run
cut short leaves its log without a summary line, which ``replay`` reports as truncated (exit 1).

Every output a command will write is checked before its first run
(:func:`biasleak.sim.outputs.output_problems`): a problem there is one line and exit code 2,
before any work is lost.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from biasleak.sim.executors import Terminated, pool
from biasleak.sim.outputs import compare_labels, log_name, output_problems
from biasleak.sim.paper_items import FAIR_EXPERIMENTS

__all__ = [
    "EXIT_STOPPED",
    "cmd_audit",
    "cmd_compare",
    "cmd_paper",
    "cmd_redteam",
    "cmd_replay",
    "cmd_report",
    "cmd_run",
    "cmd_schema",
    "cmd_sweep",
    "cmd_validate",
    "stopped",
]

EXIT_STOPPED = 130
"""Exit code of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)."""

RUN_CUT_SHORT = "a run that was under way left its log without a summary line"
REPLAY_TRUNCATED = (
    "{log}: truncated: the run did not finish (no summary line); rebuilt from {events} events"
)


def _fail(problems: list[str]) -> int:
    for line in problems:
        print(line, file=sys.stderr)
    return 2


def stopped(command: str, err: KeyboardInterrupt, detail: str = RUN_CUT_SHORT) -> int:
    """One line on stderr for a command stopped by Ctrl-C (or SIGTERM); the exit code."""
    how = "terminated (SIGTERM)" if isinstance(err, Terminated) else "interrupted"
    print(f"biasleak {command}: {how}; {detail}", file=sys.stderr)
    return EXIT_STOPPED


def _same_command(args: argparse.Namespace) -> str:
    """The command line that was run (``main`` keeps its arguments in ``args.argv``)."""
    return shlex.join(["biasleak", *getattr(args, "argv", [args.command])])


def cmd_run(args: argparse.Namespace) -> int:
    """``biasleak run``."""
    from biasleak.sim.report import format_run
    from biasleak.sim.runlog import dumps
    from biasleak.sim.scenario import ScenarioError, check_scenario
    from biasleak.sim.world import run_scenario

    if args.seed is not None and args.seed < 0:
        return _fail([f"--seed must be >= 0; received {args.seed}"])
    try:
        scenario = check_scenario(args.file, overrides=args.overrides, seed=args.seed)
        problems = output_problems({"--log-dir": args.log_dir})
        if problems:
            return _fail(problems)
        seed = scenario.seed if args.seed is None else args.seed
        result = run_scenario(
            scenario, seed=seed, log_dir=args.log_dir, log_name=log_name(scenario.name, seed)
        )
    except ScenarioError as err:
        return _fail(err.problems)
    except (OSError, ValueError) as err:  # data that cannot be loaded as configured
        return _fail([f"{args.file}: {err}"])
    red = None
    if scenario.red_team is not None:
        from biasleak.sim.redteam import format_red_team, run_red_team

        if args.workers < 1:
            return _fail([f"--workers must be >= 1; received {args.workers}"])
        with pool("process", workers=args.workers) as executor:
            red = run_red_team(scenario, seed=args.seed, log_dir=args.log_dir, executor=executor)
    target = getattr(args, "target", None)
    try:
        audit = _privacy_audit(scenario, args, red)
    except (OSError, ValueError) as err:
        return _fail([f"{args.file}: {err}"])
    headline = None if audit is None else audit.headline()
    if args.json:
        shown = result.summary if red is None else {**result.summary, "red_team": red.to_json()}
        if audit is not None:
            shown = {**shown, "privacy_audit": audit.to_json()}
        print(dumps(with_verdict(shown, target, audit=headline)))
    else:
        print(format_run(result.summary, target=target, audit=headline))
        if red is not None:
            print()
            print(format_red_team(red, target=target, audit=headline))
    return 1 if audit is not None and audit.defects else 0


def _privacy_audit(scenario: Any, args: argparse.Namespace, red: Any = None) -> Any:
    """The privacy audit beside a run's verdict (``--audit``, or the scenario's
    ``privacy_audit`` block), with the block's trials and canaries; None when neither asks.

    With a red team's result ``red``, its strongest attacker's first query is audited too,
    beside the scenario's own attackers' (the attacker as it ran in its world: same identity,
    same seed, same first query)."""
    block = getattr(scenario, "privacy_audit", None)
    if not getattr(args, "audit", False) and block is None:
        return None
    from biasleak.sim.privacy_audit import DEFAULT_CANARIES, DEFAULT_TRIALS, audit_scenario

    strongest = None if red is None or red.strongest is None else red.strongest.get("kind")
    if strongest is not None:
        from biasleak.sim.redteam import plan_attacks

        seed = scenario.seed if args.seed is None else int(args.seed)
        plans = plan_attacks(scenario.model_copy(update={"seed": seed}), [strongest])
        taken = {d.id for d in scenario.developers}
        extra = [p.developer for p in plans if p.developer is not None]
        extra = [d for d in extra if d.id not in taken]
        if extra:
            scenario = scenario.model_copy(update={"developers": [*scenario.developers, *extra]})
    return audit_scenario(
        scenario,
        trials=block.trials if block is not None else DEFAULT_TRIALS,
        canaries=block.canaries if block is not None else DEFAULT_CANARIES,
        seed=args.seed,
    )


def with_verdict(
    summary: dict[str, Any], target: float | None, *, audit: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A summary for ``--json`` with ``verdict`` (target, ceilings, sentence) when a target is
    given: the worst of each ceiling over the run's parties and the strongest attack's leakage
    (the red team's when there is one), and the privacy audit's headline when one ran."""
    if target is None:
        return summary
    from biasleak.sim.report.tables import _strongest_leakage
    from biasleak.sim.safety import safety, worst_ceilings

    bounds = worst_ceilings(summary)
    leakage = _strongest_leakage(summary)
    red = (summary.get("red_team") or {}).get("strongest") or {}
    if red.get("leakage") is not None:
        leakage = max(leakage or 0.0, float(red["leakage"]))
    return {
        **summary,
        "verdict": {
            "target": target,
            "strongest_leakage": leakage,
            **bounds,
            "proxy_baseline_leakage": summary.get("proxy_baseline_leakage"),
            "privacy_audit": audit,
            "text": safety(
                leakage,
                bounds,
                target,
                public=summary.get("proxy_baseline_leakage"),
                audit=audit,
            ),
        },
    }


def cmd_redteam(args: argparse.Namespace) -> int:
    """``biasleak redteam``."""
    from biasleak.sim.redteam import format_red_team, run_red_team
    from biasleak.sim.runlog import dumps
    from biasleak.sim.scenario import ScenarioError, check_scenario

    problems = []
    if args.workers < 1:
        problems.append(f"--workers must be >= 1; received {args.workers}")
    if args.seed is not None and args.seed < 0:
        problems.append(f"--seed must be >= 0; received {args.seed}")
    if problems:
        return _fail(problems)
    try:
        scenario = check_scenario(args.file, overrides=args.overrides, seed=args.seed)
        problems = output_problems({"--log-dir": args.log_dir})
        if problems:
            return _fail(problems)
        with pool("process", workers=args.workers) as executor:
            result = run_red_team(scenario, seed=args.seed, log_dir=args.log_dir, executor=executor)
        audit = _privacy_audit(scenario, args, result)
    except ScenarioError as err:
        return _fail(err.problems)
    except (OSError, ValueError) as err:
        return _fail([f"{args.file}: {err}"])
    headline = None if audit is None else audit.headline()
    if args.json:
        shown = result.to_json()
        if audit is not None:
            shown["privacy_audit"] = audit.to_json()
        print(dumps(shown))
    else:
        print(format_red_team(result, target=args.target, audit=headline))
    return 1 if audit is not None and audit.defects else 0


def _write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def cmd_compare(args: argparse.Namespace) -> int:
    """``biasleak compare``."""
    from biasleak.sim.redteam import (
        format_strongest,
        run_red_team,
        scenario_attacks,
        strongest_over_runs,
    )
    from biasleak.sim.report import aggregate, compare_rows, format_compare
    from biasleak.sim.runlog import dumps
    from biasleak.sim.scenario import ScenarioError, check_scenario
    from biasleak.sim.world import run_scenario

    if args.seeds < 1:
        return _fail([f"--seeds must be >= 1; received {args.seeds}"])
    try:
        scenarios = [check_scenario(f, overrides=args.overrides) for f in args.files]
    except ScenarioError as err:
        return _fail(err.problems)
    labelled = compare_labels(args.files, [s.name for s in scenarios])
    if isinstance(labelled, str):
        return _fail([labelled])
    problems = output_problems({"--log-dir": args.log_dir}, csv=args.csv)
    if problems:
        return _fail(problems)
    results = []
    strongest = []
    try:
        for scenario, (label, stem) in zip(scenarios, labelled, strict=True):
            attacks = []  # per seed, the attack records the verdict rests on
            for k in range(args.seeds):
                seed = scenario.seed + k
                try:
                    result = run_scenario(
                        scenario, seed=seed, log_dir=args.log_dir, log_name=log_name(stem, seed)
                    )
                    if scenario.red_team is not None:
                        red = run_red_team(scenario, seed=seed, log_dir=args.log_dir)
                        attacks.append(red.attacks)
                    else:
                        attacks.append(scenario_attacks(result.summary))
                except (OSError, ValueError) as err:
                    return _fail([f"{label}: {err}"])
                results.append((label, result.summary))
            source = "red team" if scenario.red_team is not None else "scenario"
            public = [s.get("proxy_baseline_leakage") for lab, s in results if lab == label]
            strongest.append(strongest_over_runs(label, attacks, source=source, public=public))
    except KeyboardInterrupt as err:
        total = len(scenarios) * args.seeds
        detail = f"{len(results)} of {total} runs finished"
        if args.csv and results:
            _write_csv(args.csv, compare_rows(results))
            detail += f" (rows: {args.csv})"
        return stopped("compare", err, f"{detail}; {RUN_CUT_SHORT}")
    rows = compare_rows(results)
    if args.csv:
        _write_csv(args.csv, rows)
    if args.json:
        print(dumps({"runs": rows, "aggregate": aggregate(rows), "strongest": strongest}))
    else:
        print(format_compare(aggregate(rows)))
        print()
        print(format_strongest(strongest, target=args.target))
        if args.csv:
            print(f"rows: {args.csv}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """``biasleak replay``: 0 when the rebuilt summary equals the stored one, 1 when it differs
    or the log is truncated (no summary line: the run did not finish)."""
    from biasleak.sim.report import format_run
    from biasleak.sim.runlog import LogFormatError, dumps, jsonable, read_log
    from biasleak.sim.summary import summarize

    try:
        events = list(read_log(args.log))
    except LogFormatError as err:  # names the line of the file
        return _fail([f"{args.log}: {err}"])
    except (OSError, ValueError) as err:
        return _fail([f"{args.log}: cannot read the run log ({err})"])
    stored = next((e.get("summary") for e in events if e.get("event") == "summary"), None)
    try:
        rebuilt = jsonable(summarize(events))
        shown = {"log": args.log, **rebuilt}
        text = (
            dumps(with_verdict(shown, args.target))
            if args.json
            else format_run(shown, target=args.target)
        )
    # events of the wrong shape (a list where a number belongs): a message, not a traceback
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as err:
        return _fail([f"{args.log}: not a biasleak run log ({type(err).__name__}: {err})"])
    print(text)
    if stored is None:
        print(REPLAY_TRUNCATED.format(log=args.log, events=len(events) - 1), file=sys.stderr)
        return 1
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


def _resume_line(args: argparse.Namespace, finished: int, where: str) -> str:
    runs = "run" if finished == 1 else "runs"
    return (
        f"{finished} {runs} finished before the stop (results in {where}); "
        f"resume with the same command: {_same_command(args)}"
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    """``biasleak sweep``."""
    from biasleak.sim.runlog import log_stem
    from biasleak.sim.scenario import ScenarioError, check_scenario
    from biasleak.sim.sweep import run_sweep

    problems = _count_problems(args)
    if args.address is not None and args.executor != "dask":
        problems.append(f"--address needs --executor dask; received --executor {args.executor}")
    if problems:
        return _fail(problems)
    finished: list[dict[str, Any]] = []
    out = args.out
    try:
        scenario = check_scenario(args.file, overrides=args.overrides, seeds=args.seeds)
        out = args.out or f"sweeps/{log_stem(scenario.name)}"
        problems = output_problems({"--out": out})
        if problems:
            return _fail(problems)
        with pool(args.executor, workers=args.workers, address=args.address) as executor:
            result = run_sweep(
                args.file,
                out=out,
                seeds=args.seeds,
                overrides=args.overrides,
                executor=executor,
                workers=args.workers,
                on_row=finished.append,
            )
    except ScenarioError as err:
        return _fail(err.problems)
    except (OSError, ValueError) as err:
        return _fail([f"{args.file}: {err}"])
    except KeyboardInterrupt as err:
        where = Path(out) / "results.csv" if out else "results.csv"
        return stopped("sweep", err, _resume_line(args, len(finished), str(where)))
    for note in result.notes:
        print(note, file=sys.stderr)
    print(
        f"{result.total} runs: {result.skipped} already done, {result.ok} ok, "
        f"{result.failed} failed; results in {result.out / 'results.csv'}"
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``biasleak report``."""
    from biasleak.sim.report import write_report

    try:
        path = write_report(args.out, paper=args.paper, to=args.to, risk_target=args.target)
    except (OSError, ValueError) as err:
        return _fail([f"biasleak report: {err}"])
    print(f"report: {path}")
    return 0


def _cmd_fair_paper(args: argparse.Namespace) -> int:
    """``biasleak paper fair-*``: run the experiment, then write its report."""
    from biasleak.sim.fair.experiment import run_experiment
    from biasleak.sim.fair.settings import settings_for
    from biasleak.sim.report.fair import write_fair_report

    problems = _count_problems(args)
    if problems:
        return _fail(problems)
    to = args.to or f"docs/paper/{args.name}"
    problems = output_problems({"--to": to})
    if problems:
        return _fail(problems)
    settings = settings_for(args.name, seeds=args.seeds, quick=getattr(args, "quick", False))
    try:
        outcome = run_experiment(settings, workers=args.workers)
        for line in outcome.skipped:
            print(line, file=sys.stderr)
        path = write_fair_report(outcome, to=to, command=_same_command(args))
    except (OSError, ValueError) as err:
        return _fail([f"biasleak paper: {err}"])
    except KeyboardInterrupt as err:
        return stopped("paper", err, "nothing was written (the experiment runs again in full)")
    print(f"{len(outcome.rows)} rows in {outcome.seconds:.0f} s; report: {path}")
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    """``biasleak paper``."""
    if args.name in FAIR_EXPERIMENTS:
        return _cmd_fair_paper(args)
    if getattr(args, "quick", False):
        return _fail([f"biasleak paper: --quick is for {', '.join(FAIR_EXPERIMENTS)} only"])
    from biasleak.sim.report import PAPER_FILES, write_report
    from biasleak.sim.scenario import ScenarioError
    from biasleak.sim.sweep import run_sweep

    if args.name not in PAPER_FILES:
        allowed = list(PAPER_FILES) + list(FAIR_EXPERIMENTS)
        return _fail([f"biasleak paper: NAME must be one of {allowed}; got {args.name!r}"])
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
    problems = output_problems({"--sweeps": args.sweeps, "--to": to})
    if problems:
        return _fail(problems)
    finished: list[dict[str, Any]] = []
    try:
        with pool("process", workers=args.workers) as executor:
            for file, folder in zip(files, folders, strict=True):
                result = run_sweep(
                    file,
                    out=folder,
                    seeds=args.seeds,
                    executor=executor,
                    workers=args.workers,
                    on_row=finished.append,
                )
                for note in result.notes:
                    print(note, file=sys.stderr)
                print(
                    f"{file}: {result.total} runs: {result.skipped} already done, "
                    f"{result.ok} ok, {result.failed} failed"
                )
        path = write_report(folders, paper=args.name, to=to)
    except ScenarioError as err:
        return _fail(err.problems)
    except (OSError, ValueError) as err:
        return _fail([f"biasleak paper: {err}"])
    except KeyboardInterrupt as err:
        where = f"{args.sweeps.rstrip('/')}/*/results.csv"
        return stopped("paper", err, _resume_line(args, len(finished), where))
    print(f"report: {path}")
    return 0


AUDIT_STOPPED = "nothing was written (the audit runs again in full)"


def _audit_problems(args: argparse.Namespace) -> list[str]:
    """``--seed``, ``--trials``, ``--canaries`` and ``--scale-factor`` of ``audit``."""
    import math

    problems = []
    if args.seed is not None and args.seed < 0:
        problems.append(f"--seed must be >= 0; received {args.seed}")
    if args.trials is not None and not 4 <= args.trials <= 10_000_000:
        problems.append(
            "--trials must be between 4 (two draws per half and world) and 10000000; received "
            f"{args.trials}"
        )
    if args.canaries is not None and args.canaries < 1:
        problems.append(f"--canaries must be >= 1; received {args.canaries}")
    if not (math.isfinite(args.scale_factor) and args.scale_factor > 0):
        problems.append(f"--scale-factor must be a finite number > 0; received {args.scale_factor}")
    return problems


def cmd_audit(args: argparse.Namespace) -> int:
    """``biasleak audit``: 0 when no lower bound exceeds a claim, 1 when one does (a defect)."""
    from biasleak.sim.privacy_audit import (
        DEFAULT_CANARIES,
        DEFAULT_TRIALS,
        audit_scenario,
        format_audit,
    )
    from biasleak.sim.runlog import dumps
    from biasleak.sim.scenario import ScenarioError, check_scenario

    problems = _audit_problems(args)
    if problems:
        return _fail(problems)
    try:
        scenario = check_scenario(args.file, overrides=args.overrides, seed=args.seed)
        block = getattr(scenario, "privacy_audit", None)
        trials = args.trials or (block.trials if block is not None else DEFAULT_TRIALS)
        canaries = args.canaries or (block.canaries if block is not None else DEFAULT_CANARIES)
        report = audit_scenario(
            scenario,
            trials=trials,
            seed=args.seed,
            scale_factor=args.scale_factor,
            canaries=canaries,
        )
    except ScenarioError as err:
        return _fail(err.problems)
    except (OSError, ValueError) as err:
        return _fail([f"{args.file}: {err}"])
    except KeyboardInterrupt as err:
        return stopped("audit", err, AUDIT_STOPPED)
    print(dumps(report.to_json()) if args.json else format_audit(report))
    return 1 if report.defects else 0


def cmd_validate(args: argparse.Namespace) -> int:
    """``biasleak validate``."""
    from biasleak.sim.scenario import ScenarioError, check_scenario

    problems = []
    for f in args.files:
        try:
            check_scenario(f)
            print(f"{f}: ok")
        except ScenarioError as err:
            problems.extend(err.problems)
    return _fail(problems) if problems else 0


def cmd_schema(_args: argparse.Namespace) -> int:
    """``biasleak schema``."""
    from biasleak.sim.scenario import schema

    print(json.dumps(schema(), indent=2, sort_keys=True, allow_nan=False))
    return 0
