"""Objectives rated from the run: each indicator's value, the evidence behind it, its rating.

An objective's indicator is computed from the run's :class:`~biasleak.sim.exercise.record.Record`
(rebuilt from the log), never from anything a person typed. Every indicator is lower-is-better,
and the objective's thresholds give the largest value that still earns each HSEEP rating::

    value <= P  -> P  performed without challenges
    value <= S  -> S  performed with some challenges
    value <= M  -> M  performed with major challenges
    otherwise   -> U  unable to be performed (also when there is no value: never deployed,
                      no audit published, an alert nobody answered)

:func:`rate_objective` returns a :class:`Rating` with the value, the rating and one sentence of
evidence that says where the value came from, which the after-action report prints beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from biasleak.sim.exercise.models import RATING_NAMES, Objective, Thresholds
from biasleak.sim.exercise.record import Record, clock, deployment_text

__all__ = ["Rating", "indicator_value", "rate", "rate_objective"]


@dataclass(frozen=True)
class Rating:
    """One objective's outcome."""

    objective: str
    """The objective's id."""
    value: float | None
    """The indicator's value (None: it could not be measured: the rating is U)."""
    rating: str
    """P, S, M or U."""
    evidence: str
    """Where the value came from, in one sentence."""

    @property
    def meaning(self) -> str:
        return RATING_NAMES[self.rating]


def rate(value: float | None, thresholds: Thresholds) -> str:
    """The rating a value earns (lower is better; no value or NaN: U)."""
    if value is None or math.isnan(value):
        return "U"
    for name in ("P", "S", "M"):
        if value <= getattr(thresholds, name):
            return name
    return "U"


def _hours(t: float) -> str:
    return f"{t:.1f} h ({clock(t)})"


def indicator_value(indicator: Any, record: Record) -> tuple[float | None, str]:
    """(value, evidence sentence) of one indicator over the run's record."""
    kind = indicator.kind
    if kind in ("max_leakage", "final_leakage"):
        pool = indicator.developers or list(record.developers)
        values = record.max_leakage() if kind == "max_leakage" else record.latest_leakage()
        if not pool:
            return None, "no developer to score"
        worst = max(pool, key=lambda i: (values.get(i, 50.0), i))
        value = values.get(worst, 50.0)
        when = ""
        if kind == "max_leakage" and record.leakage.get(worst):
            t = next(t for t, v in record.leakage[worst] if v == value)
            when = f", reached at {_hours(t)}"
        what = "highest leakage at any time" if kind == "max_leakage" else "leakage at the end"
        return value, f"{what}: {worst} at {value:.1f}%{when} (50% is a coin flip)"
    if kind == "deploy_hours":
        deployed = record.deployments.get(indicator.developer)
        what = None if deployed is None else deployment_text(deployed)
        if deployed is None or what is None:
            why = "never stopped" if deployed is None else deployed["reason"]
            return None, f"{indicator.developer} did not deploy a model ({why})"
        return deployed["t"], f"{indicator.developer} deployed {what} at {_hours(deployed['t'])}"
    if kind == "alert_response_hours":
        if not record.alerts:
            return None, "the auditor raised no alert"
        first = record.alerts[0]["t"]
        after = [d for d in record.decisions if d["t"] >= first]
        if not after:
            return None, f"first alert at {_hours(first)}; no decision was taken after it"
        decision = after[0]
        return decision["t"] - first, (
            f"first alert at {_hours(first)} ({record.alerts[0]['detector']} on "
            f"{record.alerts[0]['developer']}); decision {decision['decision']!r} "
            f"({decision['option']}) at {_hours(decision['t'])}"
        )
    if kind == "epsilon_spent":
        totals = dict(record.epsilon_total)
        if indicator.organization is not None:
            value = totals.get(indicator.organization, 0.0)
            return value, f"{indicator.organization} was charged epsilon {value:g}"
        if not totals:
            return 0.0, "no answer was charged"
        org = max(sorted(totals), key=lambda o: totals[o])
        return totals[org], f"largest charge: {org}, epsilon {totals[org]:g}"
    if kind == "audit_published_hours":
        if not record.audits:
            return None, "no audit was published"
        first = record.audits[0]
        return first["t"], (
            f"audit published at {_hours(first['t'])} (epsilon {first['epsilon']:g}, rate "
            f"difference {first['rate_difference']:+.4f})"
        )
    if kind == "audit_error":
        if not record.audit_errors:
            return None, "no audit was published"
        return record.audit_errors[0], (
            f"the first published rate difference is off the exact one by "
            f"{record.audit_errors[0]:.4f}"
        )
    if kind == "honest_refused":
        pool = indicator.developers or record.honest()
        refused = {i: sum(record.refused.get(i, {}).values()) for i in pool}
        total = sum(refused.values())
        detail = ", ".join(f"{i}: {n}" for i, n in refused.items() if n) or "none"
        return float(total), f"models of honest developers refused: {total} ({detail})"
    raise ValueError(f"unknown indicator kind {kind!r}")  # pragma: no cover


def rate_objective(objective: Objective, record: Record) -> Rating:
    """The objective's indicator value, rating and evidence."""
    value, evidence = indicator_value(objective.indicator, record)
    return Rating(objective.id, value, rate(value, objective.thresholds), evidence)
