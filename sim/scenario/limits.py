"""Limits: the size of the world a scenario may ask for, checked before anything runs.

Every number in a scenario file is checked on its own (a count is at least 1, a time is
positive), but some combinations describe a world no machine can simulate: an auditor that
wakes every nanosecond, a horizon of 1e308 days with the auditor on, a million candidate models,
a hundred thousand Sybil identities. Such a file used to pass validation and then hang or write
hundreds of megabytes of log. The optional ``limits:`` mapping of a scenario file caps them::

    limits:
      max_events: 2000000     # log events per run (enforced while the run goes)
      max_log_mb: 1024        # size of one run's log, in MiB (enforced while the run goes)
      max_horizon_days: 36500 # horizon_days, about a century
      max_audits: 100000      # auditor visits: horizon_days * 24 / every_hours, auditor on
      max_models: 100000      # compliance.max_models, models one query may hold
      max_queries: 100000     # models one strategy plans: queries (times repeats)
      max_identities: 1000    # developer identities in all (a Sybil counts its identities)
      max_candidates: 100     # candidate models of an honest developer (each one is trained)
      max_grid_runs: 100000   # grid combinations times seeds

The defaults (:class:`Limits`) accept every shipped scenario with room to spare; a user who
really wants a bigger world raises the one cap that stops it, in the file, where the choice is
visible. A scenario over a cap is an error that names the key that is too large, the cap, and
the ``limits`` key that raises it. The run-time caps (``max_events``, ``max_log_mb``) are read
by the simulator from ``scenario.limits``.

Limits do not change what a run does, only whether it may start (or go on), so a scenario that
keeps every default leaves ``limits`` out of its resolved form: its hash, its run ids and its
logs are those it had before limits existed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from pydantic import Field

from biasleak.sim.scenario.base import Strict

if TYPE_CHECKING:
    from biasleak.sim.scenario.models import Scenario

__all__ = ["OVER_LIMIT", "LimitProblem", "Limits", "limit_problems"]

HOURS_PER_DAY: Final = 24.0

OVER_LIMIT: Final = "{what} is {value}, over the limit of {cap}; {hint}"
"""A scenario over one of its caps; ``hint`` says which ``limits`` key raises it."""

LimitProblem = tuple[tuple[str | int, ...], str, Any]
"""One problem: the key path it belongs to, its message, and the value found there."""


class Limits(Strict):
    """Caps on the size of a run; every one has a default and may be raised in the file."""

    max_events: int = Field(2_000_000, ge=1, description="log events per run")
    """At most this many log events per run; a run that reaches it stops with an error."""
    max_log_mb: float = Field(
        1024.0, gt=0.0, allow_inf_nan=False, description="size of one run's log, in MiB"
    )
    """At most this many MiB (2**20 bytes) of log per run; a run that reaches it stops."""
    max_horizon_days: float = Field(
        36_500.0, gt=0.0, allow_inf_nan=False, description="largest horizon_days (a century)"
    )
    """The largest ``horizon_days``."""
    max_audits: int = Field(
        100_000, ge=1, description="auditor visits per run: horizon_days * 24 / every_hours"
    )
    """The most auditor visits per run, ``horizon_days * 24 / every_hours``, when it is on."""
    max_models: int = Field(100_000, ge=1, description="largest compliance.max_models")
    """The largest ``compliance.max_models`` (models one query may hold)."""
    max_queries: int = Field(
        100_000, ge=1, description="models one strategy plans to ask about: queries x repeats"
    )
    """The most models one strategy plans to ask about: its ``queries`` (times ``repeats``)."""
    max_identities: int = Field(
        1_000, ge=1, description="developer identities in all (a Sybil counts its identities)"
    )
    """The most developer identities of a run: one per developer, ``identities`` per Sybil."""
    max_candidates: int = Field(100, ge=1, description="candidates of an honest developer")
    """The most candidate models an honest developer trains (``candidates``)."""
    max_grid_runs: int = Field(100_000, ge=1, description="grid combinations x seeds")
    """The most runs a grid describes: the product of its value counts times its ``seeds``."""

    @property
    def max_log_bytes(self) -> int:
        """``max_log_mb`` in bytes."""
        return int(self.max_log_mb * 2**20)


def _number(value: float) -> str:
    """A count as digits, anything else in the shortest float form (1e+308, 7.2e+11)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _over(what: str, value: float, cap: float, key: str) -> str:
    hint = f"raise limits.{key} if you mean it"
    return OVER_LIMIT.format(what=what, value=_number(value), cap=_number(cap), hint=hint)


def _strategy_problems(scenario: Scenario, limits: Limits) -> list[LimitProblem]:
    problems: list[LimitProblem] = []
    identities = 0
    for i, developer in enumerate(scenario.developers):
        strategy = developer.strategy
        where: tuple[str | int, ...] = ("developers", i, "strategy")
        count = getattr(strategy, "identities", 1)
        identities += count if isinstance(count, int) else 1
        candidates = getattr(strategy, "candidates", None)
        if isinstance(candidates, int) and candidates > limits.max_candidates:
            message = _over("candidates", candidates, limits.max_candidates, "max_candidates")
            problems.append(((*where, "candidates"), message, candidates))
        queries = getattr(strategy, "queries", None)
        repeats = getattr(strategy, "repeats", 1)
        if isinstance(queries, int) and isinstance(repeats, int):
            planned = queries * repeats
            if planned > limits.max_queries:
                what = "queries" if repeats == 1 else f"queries x repeats ({queries} x {repeats})"
                message = _over(what, planned, limits.max_queries, "max_queries")
                problems.append(((*where, "queries"), message, queries))
        count = getattr(strategy, "identities", None)
        if isinstance(count, int) and count > limits.max_identities:
            message = _over("identities", count, limits.max_identities, "max_identities")
            problems.append(((*where, "identities"), message, count))
    if identities > limits.max_identities and not any(p[0][-1] == "identities" for p in problems):
        what = "the number of developer identities (Sybil identities included)"
        message = _over(what, identities, limits.max_identities, "max_identities")
        problems.append((("developers",), message, None))
    return problems


def limit_problems(scenario: Scenario) -> list[LimitProblem]:
    """Every cap of ``scenario.limits`` that the scenario exceeds (empty when none)."""
    limits = scenario.limits
    problems: list[LimitProblem] = []
    if scenario.horizon_days > limits.max_horizon_days:
        message = _over(
            "horizon_days", scenario.horizon_days, limits.max_horizon_days, "max_horizon_days"
        )
        problems.append((("horizon_days",), message, scenario.horizon_days))
    auditor = scenario.auditor
    if auditor.enabled:
        audits = scenario.horizon_days * HOURS_PER_DAY / auditor.every_hours
        if not math.isfinite(audits) or audits > limits.max_audits:
            what = (
                f"the number of auditor visits, horizon_days * 24 / every_hours = "
                f"{scenario.horizon_days:g} * 24 / {auditor.every_hours:g},"
            )
            message = _over(what, audits, limits.max_audits, "max_audits")
            problems.append((("auditor", "every_hours"), message, auditor.every_hours))
    if scenario.compliance.max_models > limits.max_models:
        value = scenario.compliance.max_models
        message = _over("compliance.max_models", value, limits.max_models, "max_models")
        problems.append((("compliance", "max_models"), message, value))
    problems.extend(_strategy_problems(scenario, limits))
    return problems
