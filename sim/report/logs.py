"""What a report reads from sweep folders: the finished runs' rows and, once each, their logs.

A sweep folder holds ``results.jsonl`` (one row per run: the grid values and the run's summary
figures) and the runs' logs, kept relative to the folder so that it can move. :func:`load_rows`
reads the rows of the finished runs of one or more folders and makes each row's ``log`` a path
that opens from here.

Reports need three things from a log: its header (the first event: the resolved scenario, the
audit set's sizes, the developers and their strategies), the attacker's batch of answers (the
largest ``release_internal`` event of a developer, for the errors of the paper's "Avg. SP err")
and time series for the figures (``evaluation`` events per developer, the epsilon charged by
``query_answered`` events). Logs can be large, so a report reads each one at most once:
:class:`RunLogs` keeps, per path, a :class:`RunLog` digest of what was read. A report says up
front which logs it needs in full (:meth:`RunLogs.need_events`); the others are read up to their
header only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, Final, Literal

from biasleak.sim.report.stats import errors_of, num
from biasleak.sim.runlog import read_log
from biasleak.sim.sweep import iter_rows

__all__ = ["ATTACKER", "RunLog", "RunLogs", "batch_errors", "digest", "load_rows"]

ATTACKER: Final = "mallory"
"""The developer whose batch and leakage the paper's tables compare."""

RESULTS_FILE: Final = "results.jsonl"
"""The rows of a sweep folder."""

EMPTY_LOG: Final = "{path} is an empty log: the run wrote no header"
"""The error for a report that needs the header of a log without events."""

Series = Literal["leakage_time", "leakage_models", "budget"]
"""A figure's time series: a developer's leakage over simulated hours or over the models
answered, or the epsilon charged over simulated hours (all developers)."""


def load_rows(outs: list[str | Path]) -> list[dict[str, Any]]:
    """The rows of the finished runs of the sweep folders ``outs``, with paths to their logs."""
    rows = []
    for out in outs:
        path = Path(out)
        if not (path / RESULTS_FILE).exists():
            raise ValueError(f"{path} is not a sweep folder (no {RESULTS_FILE})")
        for row in iter_rows(path):
            if row.get("status") != "ok":
                continue
            if row.get("log") and not Path(row["log"]).is_absolute():
                row["log"] = str(path / row["log"])  # logs are kept relative to the sweep
            rows.append(row)
    if not rows:
        raise ValueError("no finished runs in " + ", ".join(str(o) for o in outs))
    return rows


@dataclass
class RunLog:
    """What reports use of one run's log."""

    header: dict[str, Any]
    """The log's first event (empty for an empty log)."""
    complete: bool = False
    """Whether the whole log was read (else only its header, and the fields below are empty)."""
    releases: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    """Per developer, its largest ``release_internal`` event (the first of the largest)."""
    evaluations: dict[str | None, list[dict[str, Any]]] = field(default_factory=dict)
    """Per developer, its ``evaluation`` events in log order."""
    budget: list[tuple[float, float]] = field(default_factory=list)
    """``(sim time, epsilon charged so far)`` at each answer that charged a finite epsilon."""


def digest(events: Iterable[dict[str, Any]], *, complete: bool = True) -> RunLog:
    """Read a log's events into a :class:`RunLog`: its header only, or everything a report uses."""
    stream: Iterator[dict[str, Any]] = iter(events)
    header = next(stream, None)
    run = RunLog(header=header or {}, complete=complete)
    if header is None or not complete:
        return run
    total = 0.0
    for event in chain((header,), stream):  # the header is an event like the others
        kind = event.get("event")
        if kind == "release_internal":
            sender = event.get("sender")
            best = run.releases.get(sender)
            if best is None or len(event["exact"]) > len(best["exact"]):
                run.releases[sender] = event
        elif kind == "evaluation":
            run.evaluations.setdefault(event.get("developer"), []).append(event)
        elif kind == "query_answered":
            value = num(event.get("epsilon_charged"))
            if value is not None and math.isfinite(value):
                total += value
                run.budget.append((event["t"], total))
    return run


def _read(path: str | Path, *, complete: bool) -> RunLog:
    """Open the log once and digest it; a header-only read closes the file straight away."""
    events = read_log(path)
    try:
        return digest(events, complete=complete)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


class RunLogs:
    """The logs of one report, each read at most once and kept as a :class:`RunLog` digest."""

    def __init__(self, *, complete: bool = False) -> None:
        self._complete = complete
        self._needed: set[str] = set()
        self._runs: dict[str, RunLog] = {}
        self._errors: dict[tuple[str, str], dict[str, float] | None] = {}

    def need_events(self, paths: Iterable[str | Path]) -> None:
        """Say that the events of these logs (not only their headers) will be asked for."""
        self._needed.update(str(p) for p in paths)

    def run(self, path: str | Path) -> RunLog:
        """The digest of the log at ``path``, read on first use (in full where needed)."""
        key = str(path)
        known = self._runs.get(key)
        wanted = self._complete or key in self._needed
        if known is None or (wanted and not known.complete):
            known = _read(key, complete=wanted)
            self._runs[key] = known
        return known

    def header(self, path: str | Path) -> dict[str, Any]:
        """The log's first event."""
        header = self.run(path).header
        if not header:
            raise ValueError(EMPTY_LOG.format(path=path))
        return header

    def batch_errors(self, path: str | Path, developer: str = ATTACKER) -> dict[str, float] | None:
        """:func:`batch_errors` of the log at ``path``, computed once."""
        key = (str(path), developer)
        if key not in self._errors:
            self._needed.add(key[0])
            best = self.run(path).releases.get(developer)
            self._errors[key] = None if best is None else errors_of(best)
        return self._errors[key]

    def series(
        self, path: str | Path, kind: Series, developer: str | None = None
    ) -> list[tuple[float, float]]:
        """A figure's time series from the log at ``path`` (see :data:`Series`)."""
        self._needed.add(str(path))
        run = self.run(path)
        if kind == "budget":
            return list(run.budget)
        events = run.evaluations.get(developer, [])
        x = "t" if kind == "leakage_time" else "models_used"
        return [(e[x], e["leakage"]) for e in events]


def batch_errors(log: str | Path, developer: str = ATTACKER) -> dict[str, float] | None:
    """Every reading of Avg. SP err (:func:`~biasleak.sim.report.stats.errors_of`) for a
    developer's largest answered query in one log: the attacker's batch of m models."""
    best = _read(log, complete=True).releases.get(developer)
    return None if best is None else errors_of(best)
