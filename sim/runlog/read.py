"""Reading run logs: the events of a run log file, one dict per line, checked.

A run log (:mod:`biasleak.sim.runlog` writes it) is a JSON-lines file: a header line, one line
per event and, when the run finished, a summary line. :func:`read_log` yields one dict per line
and stops at a truncated last line, which is what a run cut short (a crash, Ctrl-C) leaves while
its file is still being written; a line that is not JSON, or JSON but not an object, raises
:class:`LogFormatError` naming the line number in the file, so a damaged or foreign file is
reported, not half-read.

A log this process is still writing may have lines waiting in memory (the writer writes them in
batches). The writer registers its open file in :data:`OPEN_LOGS`, and :func:`read_log` writes
out the waiting lines first, so a reader in the same process sees every event logged so far.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

__all__ = ["OPEN_LOGS", "LiveLog", "LogFormatError", "read_log"]


class LiveLog(Protocol):
    """A log file being written by this process, as a reader sees it."""

    path: Path
    """The file being written (the name the run got)."""

    def flush(self) -> None:
        """Write out the lines waiting in memory."""


OPEN_LOGS: weakref.WeakValueDictionary[str, LiveLog] = weakref.WeakValueDictionary()
"""Logs being written by this process, by resolved path (the path asked for, too, when the run
got another name): :func:`read_log` writes out their waiting lines and reads the file being
written."""


class LogFormatError(ValueError):
    """A line of a run log that is not a JSON object; ``line`` is its number in the file."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        """The line's number in the file, from 1."""


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def read_log(path: str | Path) -> Iterator[dict[str, Any]]:
    """Parse a log file line by line (stops at a truncated last line).

    A log this process is still writing is read up to its last event: the lines waiting in
    memory are written out first. Raises :class:`LogFormatError` at a line that is not a JSON
    object.
    """
    live = OPEN_LOGS.get(str(Path(path).resolve()))
    if live is not None:
        live.flush()
        path = live.path
    with Path(path).open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                return
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise LogFormatError(
                    number, f"not UTF-8 text (byte {err.start + 1} of the line)"
                ) from None
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise LogFormatError(
                    number, f"not valid JSON: {err.msg} (column {err.colno})"
                ) from None
            if not isinstance(record, dict):
                raise LogFormatError(number, f"not a JSON object but {_kind(record)}")
            yield record
