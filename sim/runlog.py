"""Run logs: one JSON-lines file per run, the single source of truth about what happened.

Line 1 is a header (scenario name and hash, seed, package versions, the resolved scenario, the
audit set's size and group sizes, the name of the side file for large arrays). Then one line per
event, in the order events happened, each with ``seq`` (a sequence number), ``t`` (simulated
hours), ``agent`` and ``event``; events the compliance side must keep to itself (exact values,
noise scales) carry ``"internal": true``. The last line is the run's summary.

Each line is rendered by structlog (one logger per run, built with :func:`structlog.wrap_logger`,
never the global configuration) as JSON with sorted keys, written whole and flushed, so a run
killed midway leaves valid lines. There is no wall-clock time anywhere, so the same scenario and
seed give a byte-identical file. Non-finite numbers are written as the strings ``"inf"``,
``"-inf"`` and ``"nan"`` (JSON has no literal for them). Large arrays (the attackers' estimates)
go to one ``.npz`` side file written at the end and named in the header.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import structlog

__all__ = ["RunLog", "jsonable", "read_log"]


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


def dumps(record: dict[str, Any]) -> str:
    """One log line (without the newline).

    The fast path lets :mod:`json` walk the record (numpy values through ``default``); a record
    holding a non-finite number or a non-string key takes the slow path through :func:`jsonable`.
    """
    try:
        return json.dumps(
            record, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_default
        )
    except (ValueError, TypeError):
        return json.dumps(jsonable(record), sort_keys=True, separators=(",", ":"), allow_nan=False)


class _LineWriter:
    """The structlog 'logger' at the end of the chain: writes whole lines and flushes."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def msg(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()

    info = warning = error = debug = critical = msg


class RunLog:
    """Writes one run's log file; hands each agent a bound logger."""

    def __init__(self, path: Path, *, header: dict[str, Any], clock: Callable[[], float]) -> None:
        self.path = Path(path)
        """Where the JSON-lines file goes."""
        self.arrays_path = self.path.with_suffix(".npz")
        """The side file for large arrays."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stream = self.path.open("w", encoding="utf-8")
        self._clock = clock
        self._seq = 0
        self._arrays: dict[str, np.ndarray] = {}
        self._writer = _LineWriter(self._stream)
        self._writer.msg(
            dumps({"event": "header", "seq": 0, "arrays": self.arrays_path.name, **header})
        )

    def _stamp(self, _logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        self._seq += 1
        event_dict["seq"] = self._seq
        event_dict["t"] = float(self._clock())
        event_dict["level"] = method
        return event_dict

    @staticmethod
    def _render(_logger: Any, _method: str, event_dict: dict[str, Any]) -> str:
        return dumps(event_dict)

    def logger(self, agent: str) -> Any:
        """A structlog logger bound to ``agent``; ``log.info("event_name", key=value)``."""
        return structlog.wrap_logger(
            self._writer,
            processors=[self._stamp, self._render],
            wrapper_class=structlog.BoundLogger,
            context_class=dict,
            cache_logger_on_first_use=False,
        ).bind(agent=agent)

    def add_array(self, key: str, array: np.ndarray) -> None:
        """Keep an array for the side file."""
        self._arrays[key] = np.asarray(array)

    def abort(self) -> None:
        """Close the file without a summary line (the run raised or was interrupted), so no
        file handle is left open and the log ends at its last whole event."""
        if not self._stream.closed:
            self._stream.close()

    def close(self, summary: dict[str, Any]) -> None:
        """Write the summary line, the side file, and close."""
        self._seq += 1
        self._writer.msg(dumps({"event": "summary", "seq": self._seq, "summary": summary}))
        self._stream.close()
        with self.arrays_path.open("wb") as fh:
            np.savez_compressed(fh, **self._arrays)


def read_log(path: str | Path) -> Iterator[dict[str, Any]]:
    """Parse a log file line by line (stops at a truncated last line)."""
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return
            yield json.loads(line)
