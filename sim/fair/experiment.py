"""A fair-learning experiment: its jobs (one per data set, seed and part), run in a process pool
on the executors the sweeps use, and its rows."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from biasleak.sim.executors import pool, run_each
from biasleak.sim.fair import settings as fair_settings
from biasleak.sim.fair.data import prepare
from biasleak.sim.fair.runs import (
    base_row,
    exponentiated_gradient,
    oracle,
    postprocessing,
    threshold_optimizer,
)
from biasleak.sim.fair.settings import DATASETS, FAIR_MISSING, INF, UNKNOWN_DATASET, Settings

__all__ = ["Job", "Outcome", "jobs_for", "run_experiment", "run_job", "select"]


@dataclass(frozen=True)
class Job:
    """One worker's share: one (data set, seed) and, for the oracle learner, one upsampling."""

    settings: Settings
    dataset: str
    seed: int
    part: str
    """``postprocessing``, ``oracle`` or ``references``."""
    upsample: int = 1


def run_job(job: Job) -> list[dict[str, Any]]:
    """The rows of one job (module docstring); runs in a worker process."""
    s = job.settings
    prep = prepare(job.dataset, job.seed, s)
    rows: list[dict[str, Any]] = []
    if job.part == "postprocessing":
        gammas = (0.0,) if s.name == "fair-convergence" else s.gammas
        rows.append(base_row(prep))
        for gamma in gammas:
            for eps in s.epsilons:
                rows.append(postprocessing(prep, s, gamma, eps))
    elif job.part == "oracle":
        if s.name == "fair-inprocessing" and job.upsample == min(s.upsample):
            rows.append(base_row(prep))
        gammas = (s.convergence_gamma,) if s.name == "fair-convergence" else s.gammas
        for gamma in gammas:
            for eps in s.epsilons:
                rows.append(oracle(prep, s, gamma, eps, job.upsample))
    elif job.part == "references":
        rows.append(threshold_optimizer(prep, scores=False))
        rows.append(threshold_optimizer(prep, scores=True))
        rows.append(exponentiated_gradient(prep, s.convergence_gamma))
    else:
        raise ValueError(
            f"job part must be postprocessing, oracle or references; received {job.part!r}"
        )
    return rows


def jobs_for(settings: Settings, *, references: bool = True) -> list[Job]:
    """Every job of an experiment, largest first (so a pool finishes together)."""
    for d in settings.datasets:
        if d not in DATASETS:
            raise ValueError(UNKNOWN_DATASET.format(allowed=list(DATASETS), name=d))
    out: list[Job] = []
    for d in settings.datasets:
        for k in range(settings.seeds):
            if settings.name in ("fair-inprocessing", "fair-convergence"):
                out += [
                    Job(settings, d, k, "oracle", u)
                    for u in sorted(settings.upsample, reverse=True)
                ]
            if settings.name in ("fair-postprocessing", "fair-convergence"):
                out.append(Job(settings, d, k, "postprocessing"))
            if settings.name == "fair-convergence" and references:
                out.append(Job(settings, d, k, "references"))
    order = {"oracle": 0, "references": 1, "postprocessing": 2}
    return sorted(out, key=lambda j: (order[j.part], -j.upsample))


@dataclass(frozen=True)
class Outcome:
    """An experiment's rows and what the report needs to say about how they were made."""

    settings: Settings
    rows: list[dict[str, Any]]
    """One dict per run (and per reference), sorted by data set, method, gamma, eps, seed."""
    seconds: float
    """Wall time of the runs."""
    workers: int
    """Parallel workers used."""
    skipped: list[str]
    """Lines on what was left out (the fairlearn references without the ``fair`` extra)."""


def _sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    g = row.get("gamma")
    return (
        row["dataset"],
        row["method"],
        row.get("upsample", 1),
        -1.0 if g is None else g,
        row.get("epsilon", INF),
        row["seed"],
    )


def run_experiment(
    settings: Settings,
    *,
    workers: int = 1,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Outcome:
    """Run every job of ``settings`` (in a process pool when ``workers > 1``) and return the
    rows. The rows do not depend on ``workers``."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1; received {workers!r}")
    skipped: list[str] = []
    references = True
    if settings.name == "fair-convergence" and not fair_settings.fairlearn_available():
        references = False
        skipped.append(f"skipped the fairlearn references: {FAIR_MISSING}")
    jobs = jobs_for(settings, references=references)
    rows: list[dict[str, Any]] = []

    def keep(found: list[dict[str, Any]]) -> None:
        rows.extend(found)
        if on_rows is not None:
            on_rows(found)

    start = time.perf_counter()
    with pool("process", workers=workers) as executor:
        if executor is None:
            for job in jobs:
                keep(run_job(job))
        else:
            run_each(executor, run_job, [(j,) for j in jobs], keep=keep)
    seconds = time.perf_counter() - start
    return Outcome(settings, sorted(rows, key=_sort_key), seconds, workers, skipped)


def select(rows: Iterable[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    """The rows whose keys equal every given value (``status`` ``ok`` only)."""
    return [
        r for r in rows if r.get("status") == "ok" and all(r.get(k) == v for k, v in match.items())
    ]
