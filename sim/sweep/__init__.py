"""Sweeps: many independent runs of one scenario over a grid of variations and seeds.

A scenario file may declare a grid, and ``biasleak sweep`` may add or override one::

    grid:
      data.n: [100, 1000]
      compliance.policy.0.epsilon: [5, 10, 100, .inf]
      seeds: 10

Every key except ``seeds`` is a dotted path into the scenario (as for ``--set``), with the values
to try; the sweep runs every combination, each with ``seeds`` seeds (the scenario's seed, then the
next ones). Each run has a stable id, the first 16 hex digits of the SHA-256 of its resolved
scenario and seed, so a sweep interrupted midway resumes by skipping the ids it has finished.

Runs are independent and go through a :class:`concurrent.futures.Executor`: a local process pool
by default, or Dask distributed (``Client.get_executor()``, optional extra ``biasleak[dask]``) for
a cluster. Results go to ``OUT/``:

- ``results.jsonl``: one line per finished run, appended as runs finish (the record a resumed
  sweep reads);
- ``results.csv`` (and ``results.parquet`` when pyarrow is installed): one tidy row per run
  (:mod:`biasleak.sim.sweep.rows` makes the rows and reads them back) with
  ``run_id``, ``seed``, ``status``, ``error``, every grid key under its dotted path, the proxy-only
  baseline, and for each developer ``<id>.leakage``, ``<id>.answered``, ``<id>.epsilon_spent``,
  ... and the compliance team's ``compliance.*`` figures; for a scenario with a ``red_team``,
  the red team's strongest attack and each attack's leakage under ``redteam.*`` (the red team
  runs inside the sweep's task, its worlds' logs in ``logs/redteam/<run_id>/``);
- ``logs/``: every run's log, ``<name>-<run id>.jsonl`` (a name too long for the file system is
  cut and ends in a hash, :func:`biasleak.sim.runlog.log_stem`);
- ``sweep.json``: the scenario file, seed count and ``--set`` overrides the sweep was run with
  (reports print the command that remakes the folder from it).

A run that raises is recorded with ``status: failed`` and its error; the sweep goes on. Without
pyarrow the sweep says that it skipped ``results.parquet`` (:attr:`SweepResult.notes`).

Ctrl-C (or SIGTERM, from the command line) stops a sweep at once: runs not yet started are
cancelled, a pool the sweep made itself is stopped with its workers (one passed in is stopped by
whoever made it, with :func:`biasleak.sim.executors.pool`), the rows of every finished run are
already in ``results.jsonl``, ``results.csv`` is written for them, and the interrupt goes on to
the caller. Running the same sweep again runs only the rest.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from biasleak.mechanisms.digests import text_digest
from biasleak.sim._optional import MissingExtra, require, skipped
from biasleak.sim.executors import close_executor, make_executor, pool, run_each, shielded
from biasleak.sim.runlog import jsonable, log_stem
from biasleak.sim.scenario import (
    Scenario,
    ScenarioError,
    apply_overrides,
    read_yaml,
    scenario_hash,
)
from biasleak.sim.sweep.rows import (
    RED_TEAM_PREFIX,
    flatten,
    flatten_red_team,
    iter_rows,
    read_rows,
)

__all__ = [
    "GRID_SEEDS",
    "RED_TEAM_PREFIX",
    "SweepResult",
    "Task",
    "close_executor",  # with make_executor, from biasleak.sim.executors (they lived here first)
    "expand",
    "flatten",  # with flatten_red_team and iter_rows, from biasleak.sim.sweep.rows
    "flatten_red_team",
    "iter_rows",
    "make_executor",
    "run_sweep",
]

GRID_SEEDS = "seeds"


@dataclass(frozen=True)
class Task:
    """One run of a sweep."""

    run_id: str
    seed: int
    grid: dict[str, Any]
    """The grid values of this run, by dotted path."""
    scenario: dict[str, Any]
    """The resolved scenario (JSON-ready), without its grid."""


def _format_value(value: Any) -> str:
    """A grid value as override text (YAML: JSON, with .inf / -.inf / .nan for floats)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return json.dumps(value)


def expand(
    raw: dict[str, Any], *, seeds: int | None = None, grid: dict[str, Any] | None = None
) -> list[Task]:
    """The tasks of a sweep: every grid combination times every seed.

    ``raw`` is the scenario file's data; ``grid`` (if given) replaces the file's grid; ``seeds``
    (if given) replaces the grid's seed count.
    """
    data = dict(raw)
    file_grid = data.pop("grid", None) or {}
    given = grid if grid is not None else file_grid
    if not isinstance(given, dict):
        raise ScenarioError([f"grid must be a mapping of key paths to lists; got {given!r}"])
    spec = dict(given)
    count = spec.pop(GRID_SEEDS, 1) if seeds is None else seeds
    spec.pop(GRID_SEEDS, None)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ScenarioError([f"grid.seeds must be an integer >= 1; got {count!r}"])
    problems = []
    for key, values in spec.items():
        if not isinstance(values, list) or not values:
            problems.append(f"grid.{key}: must be a non-empty list of values; got {values!r}")
    if problems:
        raise ScenarioError(problems)
    keys = list(spec)
    tasks: list[Task] = []
    seen: set[str] = set()
    for combo in itertools.product(*(spec[k] for k in keys)):
        overrides = [f"{k}={_format_value(v)}" for k, v in zip(keys, combo, strict=True)]
        variant = apply_overrides(data, overrides) if overrides else data
        try:
            scenario = Scenario.model_validate(variant)
        except Exception as err:  # point at the grid values that made the scenario invalid
            raise ScenarioError(
                [
                    f"grid values {dict(zip(keys, combo, strict=True))} give an invalid scenario: "
                    f"{err}"
                ]
            ) from None
        for k in range(count):
            seed = scenario.seed + k
            resolved = scenario.model_copy(update={"seed": seed})
            digest = text_digest(f"{scenario_hash(resolved)}:{seed}")
            if digest[:16] in seen:  # a value listed twice: the same run
                continue
            seen.add(digest[:16])
            tasks.append(
                Task(
                    digest[:16],
                    seed,
                    dict(zip(keys, combo, strict=True)),
                    resolved.model_dump(mode="json"),
                )
            )
    return tasks


def task_draw(task: Task) -> tuple[str, int, float]:
    """The data draw a task's run makes (:func:`~biasleak.sim.world.data.draw_key`): the runs
    of one draw go to the same worker when they can, and share its data and fits there."""
    from biasleak.sim.world.data import draw_key

    return draw_key(Scenario.model_validate(task.scenario), task.seed)


def run_task(task: Task, log_dir: str) -> dict[str, Any]:
    """Run one task (in a worker); never raises: a failure becomes a row with its error."""
    from biasleak.sim.world import run_scenario

    row: dict[str, Any] = {"run_id": task.run_id, "seed": task.seed, **task.grid}
    start = time.perf_counter()
    try:
        scenario = Scenario.model_validate(task.scenario)
        result = run_scenario(
            scenario,
            seed=task.seed,
            log_dir=Path(log_dir),
            log_name=log_stem(f"{scenario.name}-{task.run_id}"),  # cut to fit a file system
        )
        row.update(status="ok", error="", log=str(result.log_path), **flatten(result.summary))
        if scenario.red_team is not None:
            from biasleak.sim.redteam import run_red_team

            red = run_red_team(
                scenario,
                seed=task.seed,
                # one folder per run: red-team worlds of different grid points share a seed
                log_dir=Path(log_dir) / "redteam" / task.run_id,
            )
            row.update(flatten_red_team(red.to_json()))
    except Exception as err:  # recorded, and the sweep goes on
        row.update(status="failed", error=f"{type(err).__name__}: {err}")
    row["wall_seconds"] = time.perf_counter() - start
    return jsonable(row)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did."""

    out: Path
    total: int
    skipped: int
    ok: int
    failed: int
    rows: list[dict[str, Any]]
    """Every row of ``results.jsonl`` (earlier runs included)."""
    notes: tuple[str, ...] = ()
    """What the sweep skipped, one line each (Parquet without pyarrow)."""


def write_tables(out: Path, rows: list[dict[str, Any]]) -> tuple[list[Path], str | None]:
    """results.csv (and results.parquet with pyarrow) from the rows, latest row per run id.

    Returns the files written and, when pyarrow is missing, the line that says Parquet was
    skipped (else None).
    """
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        latest[row["run_id"]] = row
    ordered = sorted(latest.values(), key=lambda r: (str(r.get("status")) != "ok", r["run_id"]))
    columns: list[str] = []
    for row in ordered:
        for key in row:
            if key not in columns:
                columns.append(key)
    paths = [out / "results.csv"]
    with paths[0].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(ordered)
    try:
        pa = require("pyarrow")
        pq = require("pyarrow.parquet")
    except MissingExtra as err:
        return paths, skipped(err)
    table = pa.Table.from_pylist(
        [{c: (None if r.get(c) is None else str(r.get(c))) for c in columns} for r in ordered]
    )
    pq.write_table(table, out / "results.parquet")
    paths.append(out / "results.parquet")
    return paths, None


class Progress:
    """Runs done, running and failed: one line redrawn on a terminal, else a line per 10%."""

    def __init__(self, total: int, stream: TextIO | None) -> None:
        self.total, self.stream = total, stream
        self.done = self.failed = 0
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._shown = -1

    def show(self, running: int) -> None:
        if self.stream is None:
            return
        bar = "#" * int(30 * self.done / max(self.total, 1))
        text = f"[{bar:<30}] {self.done}/{self.total} done, {running} running, {self.failed} failed"
        if self._tty:
            self.stream.write("\r" + text)
        else:
            step = 10 * self.done // max(self.total, 1)
            if step == self._shown:
                return
            self._shown = step
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self._tty:
            self.stream.write("\n")
            self.stream.flush()


SWEEP_FILE = "sweep.json"


def run_sweep(
    path: str | Path,
    *,
    out: str | Path,
    seeds: int | None = None,
    overrides: list[str] | None = None,
    executor: Executor | None = None,
    workers: int = 1,
    progress: TextIO | Literal["stderr"] | None = "stderr",
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Run (or resume) the sweep a scenario file describes.

    ``progress`` is where the progress line goes (``"stderr"``: the current ``sys.stderr``;
    None: nowhere). ``on_row`` is called with every finished row.
    """
    text = Path(path).read_text(encoding="utf-8")
    raw = read_yaml(text)
    if not isinstance(raw, dict):
        raise ScenarioError([f"{path}: a scenario file must be a mapping of keys to values"])
    if overrides:
        raw = apply_overrides(raw, overrides)
    Scenario.model_validate(raw)  # the base scenario must be valid (errors name the keys)
    tasks = expand(raw, seeds=seeds)
    out_dir = Path(out)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    record = out_dir / "results.jsonl"
    # how this folder was made, so that a report can print the command that remakes it
    (out_dir / SWEEP_FILE).write_text(
        json.dumps(
            {
                "scenario_file": Path(path).as_posix(),
                "seeds": seeds,
                "overrides": list(overrides or []),
                "runs": len(tasks),
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    earlier = read_rows(record)
    finished = {r["run_id"] for r in earlier if r.get("status") == "ok"}
    todo = [t for t in tasks if t.run_id not in finished]
    stream = sys.stderr if progress == "stderr" else progress
    # nothing to run (a finished sweep resumed): no progress line
    progress_line = Progress(len(todo), stream if todo else None)  # type: ignore[arg-type]
    new_rows: list[dict[str, Any]] = []
    if record.exists() and record.stat().st_size:
        with record.open("rb") as check:  # a line cut by an interruption: end it first
            check.seek(-1, 2)
            cut = check.read(1) != b"\n"
        if cut:
            with record.open("a", encoding="utf-8") as fix:
                fix.write("\n")
    pooled = executor is not None or workers > 1
    groups = [task_draw(task) for task in todo] if pooled else []
    if pooled:  # the workers fork at their first job: they inherit the simulator's imports
        import biasleak.sim.world  # noqa: F401
    stopped: KeyboardInterrupt | None = None
    with record.open("a", encoding="utf-8") as fh:

        def keep(row: dict[str, Any]) -> None:
            log = row.get("log")
            if log:  # relative to the sweep folder, so the folder can move
                row["log"] = os.path.relpath(log, out_dir)
            fh.write(json.dumps(row, sort_keys=True) + "\n")
            fh.flush()
            new_rows.append(row)
            progress_line.done += 1
            progress_line.failed += row.get("status") != "ok"
            if on_row is not None:
                on_row(row)
            if pooled:  # the runs still under way
                progress_line.show(min(len(todo) - progress_line.done, workers))

        log_dir = str(out_dir / "logs")
        # a pool made here is stopped at once on Ctrl-C; a given executor is its owner's to stop
        runner = nullcontext(executor) if executor is not None else pool("process", workers=workers)
        try:
            with runner as running:
                if running is None:
                    for task in todo:
                        progress_line.show(1)
                        keep(run_task(task, log_dir))
                    progress_line.show(0)
                else:
                    run_each(
                        running,
                        run_task,
                        [(task, log_dir) for task in todo],
                        keep=keep,
                        started=lambda n: progress_line.show(min(n, workers)),
                        groups=groups,
                    )
        except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: keep what finished, then stop
            stopped = err
    progress_line.close()
    if stopped is not None:
        with shielded():
            write_tables(out_dir, read_rows(record))
        raise stopped
    rows = earlier + new_rows
    _, note = write_tables(out_dir, rows)
    ok = sum(1 for r in new_rows if r.get("status") == "ok")
    return SweepResult(
        out_dir,
        len(tasks),
        len(tasks) - len(todo),
        ok,
        len(new_rows) - ok,
        rows,
        () if note is None else (note,),
    )
