"""Run logs: one JSON-lines file per run, the single source of truth about what happened.

Line 1 is a header (scenario name and hash, seed, package versions, the resolved scenario, the
audit set's size and group sizes, the name of the side file for large arrays). Then one line per
event, in the order events happened, each with ``seq`` (a sequence number), ``t`` (simulated
hours), ``agent`` and ``event``; events the compliance side must keep to itself (exact values,
noise scales) carry ``"internal": true``. The last line is the run's summary.

Each line is rendered by structlog (one logger per run, built with :func:`structlog.wrap_logger`,
never the global configuration) as JSON with sorted keys. A run logs thousands of events, so
lines are not written one by one: they wait in memory and go to the file in batches, every
:data:`FLUSH_EVERY_EVENTS` events or :data:`FLUSH_EVERY_CHARS` characters, and when the run
ends, is aborted (an error, Ctrl-C) or the interpreter exits. A batch is one write of whole
lines to an unbuffered file, so whenever a reader looks, and after a crash, the file holds only
complete lines; :func:`read_log` in the same process first writes out the lines still waiting.
There is no wall-clock time anywhere, so the same scenario and seed give a byte-identical file.
Non-finite numbers are written as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (JSON has no
literal for them). Large arrays (the attackers' estimates) go to one ``.npz`` side file written
at the end and named in the header.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

import numpy as np
import structlog

__all__ = ["FLUSH_EVERY_CHARS", "FLUSH_EVERY_EVENTS", "RunLog", "jsonable", "read_log"]

FLUSH_EVERY_EVENTS: Final = 256
"""Lines waiting in memory before they are written out."""
FLUSH_EVERY_CHARS: Final = 64 * 1024
"""Characters waiting in memory before they are written out."""


def jsonable(obj: Any) -> Any:
    """Convert numpy values, tuples and non-finite floats into plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        f = float(obj)
        if math.isfinite(f):
            return f
        return "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")
    if obj is None or isinstance(obj, str):
        return obj
    raise TypeError(f"cannot log a value of type {type(obj).__name__}")


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot log a value of type {type(obj).__name__}")


# Built once: json.dumps with these options would build a new encoder for every line.
_ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), allow_nan=False, default=_default
)
_PLAIN_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)


def dumps(record: dict[str, Any]) -> str:
    """One log line (without the newline).

    The fast path lets :mod:`json` walk the record (numpy values through ``default``); a record
    holding a non-finite number or a non-string key takes the slow path through :func:`jsonable`.
    """
    try:
        return _ENCODER.encode(record)
    except (ValueError, TypeError):
        return _PLAIN_ENCODER.encode(jsonable(record))


class _LineBuffer:
    """The structlog 'logger' at the end of the chain: keeps lines and writes them in batches.

    Lines end as text files end on this platform (what a file opened in text mode would write).
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._lines: list[str] = []
        self._chars = 0

    def msg(self, line: str) -> None:
        self._lines.append(line)
        self._chars += len(line)
        if len(self._lines) >= FLUSH_EVERY_EVENTS or self._chars >= FLUSH_EVERY_CHARS:
            self.flush()

    info = warning = error = debug = critical = msg

    def flush(self) -> None:
        """Write the waiting lines, whole, in one write to the unbuffered file."""
        if not self._lines:
            return
        data = (os.linesep.join(self._lines) + os.linesep).encode("utf-8")
        self._lines.clear()
        self._chars = 0
        view = memoryview(data)
        while view:  # a raw write may take fewer bytes than offered
            written = self._file.write(view)
            view = view[written or 0 :]

    def close(self) -> None:
        """Write what is waiting and close the file (a second call does nothing)."""
        if self._file.closed:
            return
        try:
            self.flush()
        finally:
            self._file.close()


def _finish(writer: _LineBuffer, pid: int) -> None:
    """Close a log, but only in the process that opened it: a forked child that exits normally
    must not write its copy of the parent's waiting lines a second time."""
    if os.getpid() == pid:
        writer.close()


# Logs being written by this process, by resolved path: read_log writes out their waiting lines.
_OPEN: weakref.WeakValueDictionary[str, _LineBuffer] = weakref.WeakValueDictionary()


class RunLog:
    """Writes one run's log file; hands each agent a bound logger."""

    def __init__(self, path: Path, *, header: dict[str, Any], clock: Callable[[], float]) -> None:
        self.path = Path(path)
        """Where the JSON-lines file goes."""
        self.arrays_path = self.path.with_suffix(".npz")
        """The side file for large arrays."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._seq = 0
        self._arrays: dict[str, np.ndarray] = {}
        self._writer = _LineBuffer(self.path.open("wb", buffering=0))
        # also on an interpreter exit that skipped abort() and close(): no waiting line is lost
        self._finish = weakref.finalize(self, _finish, self._writer, os.getpid())
        self._key = str(self.path.resolve())
        _OPEN[self._key] = self._writer
        self._writer.msg(
            dumps({"event": "header", "seq": 0, "arrays": self.arrays_path.name, **header})
        )
        self._writer.flush()  # a reader finds the header at once

    def _stamp_and_render(self, _logger: Any, method: str, event_dict: dict[str, Any]) -> str:
        """The whole processor chain in one step: sequence number, sim time, level, the line."""
        self._seq += 1
        event_dict["seq"] = self._seq
        event_dict["t"] = float(self._clock())
        event_dict["level"] = method
        return dumps(event_dict)

    def logger(self, agent: str) -> Any:
        """A structlog logger bound to ``agent``; ``log.info("event_name", key=value)``."""
        return structlog.wrap_logger(
            self._writer,
            processors=[self._stamp_and_render],
            wrapper_class=structlog.BoundLogger,
            context_class=dict,
            cache_logger_on_first_use=False,
        ).bind(agent=agent)

    def add_array(self, key: str, array: np.ndarray) -> None:
        """Keep an array for the side file."""
        self._arrays[key] = np.asarray(array)

    def flush(self) -> None:
        """Write out every line logged so far."""
        self._writer.flush()

    def _release(self) -> None:
        if _OPEN.get(self._key) is self._writer:
            del _OPEN[self._key]
        self._finish()  # flushes and closes, once

    def abort(self) -> None:
        """Close the file without a summary line (the run raised or was interrupted): every
        event logged so far is written, no file handle is left open, and the log ends at its
        last whole event."""
        self._release()

    def close(self, summary: dict[str, Any]) -> None:
        """Write the summary line, the side file, and close."""
        self._seq += 1
        self._writer.msg(dumps({"event": "summary", "seq": self._seq, "summary": summary}))
        self._release()
        with self.arrays_path.open("wb") as fh:
            np.savez_compressed(fh, **self._arrays)


def read_log(path: str | Path) -> Iterator[dict[str, Any]]:
    """Parse a log file line by line (stops at a truncated last line).

    A log this process is still writing is read up to its last event: the lines waiting in
    memory are written out first.
    """
    live = _OPEN.get(str(Path(path).resolve()))
    if live is not None:
        live.flush()
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return
            yield json.loads(line)
