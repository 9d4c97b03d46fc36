"""A run log whose loggers also tell a listener about every event (a tabletop exercise's ear)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from biasleak.sim.runlog import RunLog

__all__ = ["TapLogger", "Tapped"]


class TapLogger:
    """A bound logger that also tells a listener about each event it logged."""

    def __init__(
        self, inner: Any, agent: str, listener: Callable[[str, str, dict[str, Any]], None]
    ):
        self._inner = inner
        self._agent = agent
        self._listener = listener

    def info(self, event: str, **fields: Any) -> None:
        self._inner.info(event, **fields)
        self._listener(self._agent, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._inner.error(event, **fields)
        self._listener(self._agent, event, fields)


class Tapped:
    """A run log whose loggers also tell a listener about each event (after logging it)."""

    def __init__(self, runlog: RunLog, listener: Callable[[str, str, dict[str, Any]], None]):
        self._runlog = runlog
        self._listener = listener

    def logger(self, agent: str) -> Any:
        return TapLogger(self._runlog.logger(agent), agent, self._listener)

    def add_array(self, key: str, array: np.ndarray) -> None:
        self._runlog.add_array(key, array)
