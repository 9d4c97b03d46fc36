"""Fixtures shared by the suite: the tiny world most run-level tests start from, a small audit set,
a world built from the tiny scenario, and a log that records what an agent logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import worlds
from worlds import TinyWorld

from biasleak.mechanisms.policy import AuditSet


@pytest.fixture(scope="session")
def tiny_world() -> TinyWorld:
    """``tiny_world(name, seed=, mechanism=, epsilon=, grid=)`` -> the tiny scenario's text
    (``grid``: the body of a ``grid:`` mapping, indented, for a sweep)."""
    return worlds.tiny_world


@pytest.fixture
def tiny_scenario(tmp_path: Path) -> Path:
    """The tiny scenario, written to a file."""
    path = tmp_path / "tiny.yaml"
    path.write_text(worlds.tiny_world(), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def small_audit() -> AuditSet:
    """A 400-person audit set, about half in each group, labels correlated with the group."""
    rng = np.random.default_rng(0)
    protected = rng.random(400) < 0.5
    labels = rng.random(400) < np.where(protected, 0.6, 0.4)
    return AuditSet.from_arrays(protected, labels)


@pytest.fixture
def world(tiny_scenario: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A world built from the tiny scenario (its log under ``tmp_path``), not yet run."""
    from biasleak.sim.scenario import load_scenario
    from biasleak.sim.world import World

    return World(load_scenario(tiny_scenario), log_dir=tmp_path / "logs")


class RecordingLog:
    """A structlog stand-in that keeps every ``(event, fields)`` it is given."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    def of(self, event: str) -> list[dict[str, Any]]:
        """The fields of every ``event``, in order."""
        return [f for e, f in self.events if e == event]


@pytest.fixture
def event_log() -> RecordingLog:
    """A fresh :class:`RecordingLog` (an agent's ``log``)."""
    return RecordingLog()
