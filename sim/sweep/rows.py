"""Sweep rows: one flat row per run, and the rows a sweep folder holds.

A sweep (:mod:`biasleak.sim.sweep`) records each finished run as one row: a flat mapping of
column names to values, so that runs of a whole grid fit one table. :func:`flatten` turns a run
summary into such a row: the proxy-only baseline, every developer's figures under
``<id>.<figure>`` (refusals summed, and per reason under ``<id>.refused.<reason>``), the
compliance team's figures under ``compliance.*`` and the auditor's alert count.
:func:`flatten_red_team` adds a red team's verdict under ``redteam.*``
(:data:`RED_TEAM_PREFIX`). The sweep adds the run's id, seed, grid values, status and log.

The rows are appended to ``results.jsonl`` as runs finish; :func:`read_rows` reads them back
(every row, in file order, skipping a line cut by an interruption) and :func:`iter_rows` gives
the latest row of every run id, which is what a report or a resumed sweep wants.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "RED_TEAM_FIGURES",
    "RED_TEAM_PREFIX",
    "flatten",
    "flatten_red_team",
    "iter_rows",
    "read_rows",
]


def flatten(summary: dict[str, Any]) -> dict[str, Any]:
    """A run summary as one flat row (developer figures under ``<id>.<figure>``)."""
    row: dict[str, Any] = {"proxy_baseline_leakage": summary.get("proxy_baseline_leakage")}
    for ident, d in summary["developers"].items():
        for key, value in d.items():
            if key in ("organization", "strategy", "stopped"):
                continue
            if key == "refused":
                row[f"{ident}.refused"] = sum(value.values())
                for reason, count in value.items():
                    row[f"{ident}.refused.{reason}"] = count
            elif key == "person_ceiling" and isinstance(value, dict):
                for level, bound in value.items():
                    row[f"{ident}.person_ceiling.{level}"] = bound
            elif key == "exposure" and isinstance(value, dict):
                row[f"{ident}.exposure.person_mean"] = value.get("person_mean")
                for level, people in (value.get("exposed") or {}).items():
                    row[f"{ident}.exposure.exposed.{level}"] = people
            elif key != "exposure":
                row[f"{ident}.{key}"] = value
    for key, value in summary["compliance"].items():
        if key == "refused":
            row["compliance.refused"] = sum(value.values())
        elif key != "by_metric":
            row[f"compliance.{key}"] = value
    row["auditor.alerts"] = summary["auditor"]["alerts"]
    return row


RED_TEAM_PREFIX = "redteam."
"""Sweep columns of a scenario's red team start with this."""

RED_TEAM_FIGURES = (
    "leakage",
    "revealed",
    "leakage_ceiling",
    "audit_set_ceiling",
    "answers_ceiling",
    "person_ceiling",
    "ceiling_kind",
)
"""What a sweep row keeps of the strongest attack and of each attack of a red team."""


def flatten_red_team(result: dict[str, Any]) -> dict[str, Any]:
    """A red team's result (:meth:`~biasleak.sim.redteam.RedTeamResult.to_json`) as columns:
    ``redteam.strongest`` (its kind), ``redteam.strongest.<figure>`` and, per applicable attack,
    ``redteam.<kind>.<figure>`` for every figure of :data:`RED_TEAM_FIGURES` (leakage, people
    revealed, the three ceilings and the most exposed person's)."""
    best = result.get("strongest") or {}
    row: dict[str, Any] = {f"{RED_TEAM_PREFIX}strongest": best.get("kind")}
    for key in RED_TEAM_FIGURES:
        row[f"{RED_TEAM_PREFIX}strongest.{key}"] = best.get(key)
    for record in result.get("attacks", []):
        if record.get("applicable"):
            for key in RED_TEAM_FIGURES:
                row[f"{RED_TEAM_PREFIX}{record['kind']}.{key}"] = record.get(key)
    return row


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of a ``results.jsonl`` file, in file order (none when there is no file).

    A line cut by an interruption is skipped; the run it belonged to runs again on resume.
    """
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by an interruption
    return rows


def iter_rows(out: str | Path) -> Iterator[dict[str, Any]]:
    """The latest row of every run id in a sweep's ``results.jsonl``."""
    latest: dict[str, dict[str, Any]] = {}
    for row in read_rows(Path(out) / "results.jsonl"):
        latest[row["run_id"]] = row
    yield from latest.values()
