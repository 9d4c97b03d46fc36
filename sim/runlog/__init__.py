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

One writer per file. The log is written in place, under its final name, so that it can be
followed while the run goes on and a run cut short leaves its events there (``replay`` calls such
a log truncated). While a run writes its log it holds an exclusive lock on the file
(``flock``); a second run that asks for the same name at the same time (two ``biasleak run`` of
one scenario and seed into one folder) does not share the file but writes ``<name>-run2.jsonl``
(then ``-run3``, ...), named in its summary. A finished run releases the lock, so running the
same scenario again replaces its log, as before. The side file is written under a temporary name
and renamed into place, before the summary line: a reader who sees the summary finds the whole
side file. A name too long for the file system (most allow 255 bytes) is cut to
:data:`LOG_NAME_BYTES` and ends in a hash of the whole name (:func:`log_stem`), so distinct names
stay distinct.

Limits. ``RunLog(..., max_events=N, max_bytes=B)`` refuses to log the event that would pass
either: the logger call raises :class:`LogLimitExceeded`, which names the scenario key that sets
the limit, and the file keeps only whole lines (the refused event is not written). The byte limit
counts the header and the events; the summary line comes on top.

Reading a log back (:func:`read_log`, :class:`LogFormatError`) is the concern of
:mod:`biasleak.sim.runlog.read`; this module keeps those names importable too.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import weakref
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Final

import numpy as np
import structlog

from biasleak.sim.runlog.read import OPEN_LOGS, LogFormatError, read_log

try:
    import fcntl
except ImportError:  # pragma: no cover - not a POSIX system: no locks, one writer by convention
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "FLUSH_EVERY_CHARS",
    "FLUSH_EVERY_EVENTS",
    "LOG_NAME_BYTES",
    "LogFormatError",
    "LogLimitExceeded",
    "RunLog",
    "jsonable",
    "log_stem",
    "read_log",
]

FLUSH_EVERY_EVENTS: Final = 256
"""Lines waiting in memory before they are written out."""
FLUSH_EVERY_CHARS: Final = 64 * 1024
"""Characters waiting in memory before they are written out."""
LOG_NAME_BYTES: Final = 200
"""The longest file-name stem of a log, in bytes: with ``-runN``, ``.jsonl`` or ``.npz.part``
added it stays under the 255 bytes most file systems allow."""
MAX_WRITERS: Final = 100
"""Names tried (``<name>``, ``<name>-run2``, ...) before giving up on a free one."""

LOG_LIMIT_EVENTS: Final = (
    "the run log reached {limit} events, its limit (limits.max_events = {limit}); "
    "event {reached} was not logged"
)
LOG_LIMIT_BYTES: Final = (
    "the run log would grow to {reached} bytes, over its limit of {limit} bytes "
    "(limits.max_log_mb = {mb:g})"
)
NO_FREE_NAME: Final = "{count} runs are writing logs named {name} at once; no free name is left"


SIDE_FILE_LEVEL = 1
"""Deflate level of the side file: level 1 writes a run's arrays several times faster than
NumPy's default (6) for files a few percent larger."""


def write_arrays(fh: Any, arrays: dict[str, Any]) -> None:
    """Write ``arrays`` as an ``.npz`` archive that ``numpy.load`` reads (one ``NAME.npy`` per
    array, deflated at :data:`SIDE_FILE_LEVEL`), with a fixed timestamp on every member so that
    the same run writes the same bytes."""
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, value in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info._compresslevel = SIDE_FILE_LEVEL  # a member's own level (3.13: compress_level)
            with z.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


class LogLimitExceeded(ValueError):
    """A run tried to log more than its scenario allows (events or bytes)."""

    def __init__(self, message: str, *, key: str = "", limit: int = 0, reached: int = 0) -> None:
        # SimPy re-raises a process's exception as type(err)(*err.args): only the message is
        # positional, the details default.
        super().__init__(message)
        self.key = key
        """The scenario key that sets the limit (``limits.max_events``, ``limits.max_log_mb``)."""
        self.limit = limit
        """The limit, in events or bytes."""
        self.reached = reached
        """The count the refused event would have reached."""


def log_stem(stem: str) -> str:
    """``stem`` if a log named after it fits the file system, else its first bytes and a hash.

    >>> log_stem("quickstart-seed0")
    'quickstart-seed0'
    >>> len(log_stem("x" * 300).encode())
    200
    """
    encoded = stem.encode("utf-8")
    if len(encoded) <= LOG_NAME_BYTES:
        return stem
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    head = encoded[: LOG_NAME_BYTES - len(digest) - 1].decode("utf-8", errors="ignore")
    return f"{head}-{digest}"


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

    def __init__(self, file: BinaryIO, path: Path) -> None:
        self._file = file
        self.path = path
        """The file being written."""
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


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _open_exclusive(path: Path) -> BinaryIO | None:
    """Open ``path`` emptied for writing, holding an exclusive lock; None when another writer
    holds it. The file is opened without truncating and emptied only once the lock is ours."""
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return None
                if not _same_file(fd, path):  # replaced or removed between open and lock
                    os.close(fd)
                    continue
            os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        return os.fdopen(fd, "wb", buffering=0)


def _claim(path: Path) -> tuple[Path, BinaryIO]:
    """The first free name of ``path``, ``-run2``, ``-run3``, ... and its open, locked file."""
    for k in range(1, MAX_WRITERS + 1):
        candidate = path if k == 1 else path.with_name(f"{path.stem}-run{k}{path.suffix}")
        file = _open_exclusive(candidate)
        if file is not None:
            return candidate, file
    raise OSError(NO_FREE_NAME.format(count=MAX_WRITERS, name=path.name))


class RunLog:
    """Writes one run's log file; hands each agent a bound logger.

    ``max_events`` and ``max_bytes`` (None: no limit) bound the events logged and the bytes of
    the header and the events; the logger call that would pass either raises
    :class:`LogLimitExceeded` and logs nothing.
    """

    def __init__(
        self,
        path: Path,
        *,
        header: dict[str, Any],
        clock: Callable[[], float],
        max_events: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        asked = Path(path)
        asked = asked.with_name(log_stem(asked.stem) + asked.suffix)
        asked.parent.mkdir(parents=True, exist_ok=True)
        self.path, file = _claim(asked)
        """The JSON-lines file: the path asked for, cut when too long, or, when another run is
        writing that one, ``<name>-run2.jsonl`` (``-run3``, ...)."""
        self.arrays_path = self.path.with_suffix(".npz")
        """The side file for large arrays."""
        self._clock = clock
        self._seq = 0
        self._arrays: dict[str, np.ndarray] = {}
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._writer = _LineBuffer(file, self.path)
        # also on an interpreter exit that skipped abort() and close(): no waiting line is lost
        self._finish = weakref.finalize(self, _finish, self._writer, os.getpid())
        self._keys = [str(self.path.resolve())]
        OPEN_LOGS[self._keys[0]] = self._writer
        requested = str(Path(path).resolve())
        if requested not in OPEN_LOGS:  # a reader that asks for the name this run wanted
            OPEN_LOGS[requested] = self._writer
            self._keys.append(requested)
        line = dumps({"event": "header", "seq": 0, "arrays": self.arrays_path.name, **header})
        self._bytes = len(line) + len(os.linesep)
        """Bytes of the lines logged so far (JSON lines are ASCII: one byte a character)."""
        self._writer.msg(line)
        self._writer.flush()  # a reader finds the header at once

    def _stamp_and_render(self, _logger: Any, method: str, event_dict: dict[str, Any]) -> str:
        """The whole processor chain in one step: sequence number, sim time, level, the line.

        Raises :class:`LogLimitExceeded` (and logs nothing) when the line would pass a limit.
        """
        if self._max_events is not None and self._seq >= self._max_events:
            raise LogLimitExceeded(
                LOG_LIMIT_EVENTS.format(limit=self._max_events, reached=self._seq + 1),
                key="limits.max_events",
                limit=self._max_events,
                reached=self._seq + 1,
            )
        event_dict["seq"] = self._seq + 1
        event_dict["t"] = float(self._clock())
        event_dict["level"] = method
        line = dumps(event_dict)
        size = self._bytes + len(line) + len(os.linesep)
        if self._max_bytes is not None and size > self._max_bytes:
            raise LogLimitExceeded(
                LOG_LIMIT_BYTES.format(
                    limit=self._max_bytes, reached=size, mb=self._max_bytes / 2**20
                ),
                key="limits.max_log_mb",
                limit=self._max_bytes,
                reached=size,
            )
        self._seq += 1
        self._bytes = size
        return line

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
        for key in self._keys:
            if OPEN_LOGS.get(key) is self._writer:
                del OPEN_LOGS[key]
        self._finish()  # flushes and closes (which releases the lock), once

    def abort(self) -> None:
        """Close the file without a summary line (the run raised or was interrupted): every
        event logged so far is written, no file handle is left open, and the log ends at its
        last whole event."""
        self._release()

    def close(self, summary: dict[str, Any]) -> None:
        """Write the side file (under a temporary name, then renamed into place), the summary
        line, and close."""
        partial = self.arrays_path.with_name(self.arrays_path.name + ".part")
        try:
            with partial.open("wb") as fh:
                write_arrays(fh, self._arrays)
            os.replace(partial, self.arrays_path)
        except BaseException:
            partial.unlink(missing_ok=True)
            self._release()
            raise
        self._seq += 1
        self._writer.msg(dumps({"event": "summary", "seq": self._seq, "summary": summary}))
        self._release()
