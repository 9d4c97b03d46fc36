"""Governance tabletop exercises: a scenario that pauses for people, and its after-action report.

A tabletop exercise is a facilitated discussion in which a compliance team, a model owner, an
auditor and a regulator walk through a scenario as it unfolds (HSEEP / CISA practice). biasleak
simulates the consequences: the scenario's world runs, injects arrive at set times or on
conditions (a new identity joins, the auditor alerts, a budget request, a regulator's inquiry, a
press report), and at each decision point the world pauses while the room decides; the decision
changes the running policy or agents, and the world goes on. At the end the after-action report
rates each objective P/S/M/U from the run and proposes an improvement plan.

An exercise file (``exercises/*.yaml``, :mod:`.models`, :mod:`.loading`) names the scenario, the
roles, the objectives, the master scenario events list and the decision points, and may script
the decisions. :class:`ExerciseSession` (:mod:`.session`) plays it: ``advance()`` runs the world
to the next decision without a scripted answer, ``decide()`` records one, ``status()``,
``evidence()`` and ``timeline()`` show each role what it may see (:mod:`.views`: only the
facilitator sees the ground truth), ``finish()`` writes the report (:mod:`.report`) and
``interrupt()`` a partial one. :func:`run_branches` reruns with a decision changed and compares.
The command line is ``biasleak exercise`` (:mod:`.command`, with the terminal mode of
:mod:`.terminal`); the browser console is :mod:`.web`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biasleak.sim.exercise.loading import LoadedExercise, load_decisions, load_exercise
    from biasleak.sim.exercise.models import Exercise, schema
    from biasleak.sim.exercise.session import (
        ExerciseError,
        ExerciseSession,
        Pending,
        run_branches,
    )

__all__ = [
    "Exercise",
    "ExerciseError",
    "ExerciseSession",
    "LoadedExercise",
    "Pending",
    "load_decisions",
    "load_exercise",
    "run_branches",
    "schema",
]

_HOME = {
    "LoadedExercise": "loading",
    "load_decisions": "loading",
    "load_exercise": "loading",
    "Exercise": "models",
    "schema": "models",
    "ExerciseError": "session",
    "ExerciseSession": "session",
    "Pending": "session",
    "run_branches": "session",
}
"""Where each export lives: imported on first use, so that ``biasleak --version`` and the
command line's parser do not load the simulator (PEP 562)."""


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
