"""The sweep report: the compliance officer's view of any sweep, leakage beside utility.

One row per grid point and developer: leakage (mean ± sd over seeds) with its three proven
ceilings (policy, audit set, answers: :mod:`biasleak.mechanisms.ceiling`) and the proxy-only
baseline beside it, and utility: the developer's refusal rate, the compliance team's median
``|answered - exact|``, and honest developers' agreement with the model that exact answers would
have chosen and their metric error. A second table names, per grid point (a policy), the
strongest attack against it, the red team's when the runs have one, else the strongest of the
scenario's own attackers (developers whose strategy is an attack), with the ceilings of its
answers; the verdict per policy follows (:func:`biasleak.sim.safety.safety`): at a risk target,
whether the policy is proven safe by its guarantee, for its audit set or with its answers, unsafe,
or not proven.

The figures follow (:mod:`biasleak.sim.report.figures`), or one line saying they were skipped
when matplotlib is not installed, and the resolved scenario of the first run closes the report.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from biasleak.agents.strategies import HONEST_KINDS
from biasleak.sim._optional import MissingExtra, skipped
from biasleak.sim.redteam import strongest_over_runs
from biasleak.sim.report import figures
from biasleak.sim.report.logs import RunLogs, load_rows
from biasleak.sim.report.stats import fmt, num, stat
from biasleak.sim.safety import CEILING_KEYS, safety
from biasleak.sim.sweep import RED_TEAM_PREFIX

__all__ = ["SUMMARY_KEYS", "Verdict", "sweep_report", "verdict_lines"]

SUMMARY_KEYS: Final = frozenset(
    {
        "run_id",
        "seed",
        "status",
        "error",
        "log",
        "wall_seconds",
        "proxy_baseline_leakage",
        "compliance.epsilon_spent",
        "compliance.answered",
        "compliance.refused",
        "compliance.mean_abs_error",
        "compliance.median_abs_error",
        "auditor.alerts",
    }
)
"""Row keys that are summary figures of the run, not grid values."""


Verdict = tuple[list[Any], int, dict[str, Any]]
"""One grid point's strongest attack: the grid values, the number of runs, and
:func:`~biasleak.sim.redteam.strongest_over_runs`'s answer."""


def developers(rows: list[dict[str, Any]]) -> list[str]:
    """The developers with a leakage figure in the rows, in order of appearance."""
    devs: list[str] = []
    for row in rows:
        for key in row:
            if (
                key.endswith(".leakage")
                and not key.startswith("compliance.")
                and not key.startswith(RED_TEAM_PREFIX)
            ):
                ident = key[: -len(".leakage")]
                if ident not in devs:
                    devs.append(ident)
    return devs


def grid_keys(rows: list[dict[str, Any]]) -> list[str]:
    """The grid's dotted keys: every row key that is not a summary figure."""
    devs = tuple(f"{d}." for d in developers(rows))
    keys: list[str] = []
    for row in rows:
        for key in row:
            if key in SUMMARY_KEYS or key in keys or (devs and key.startswith(devs)):
                continue
            if key.startswith(RED_TEAM_PREFIX):
                continue
            keys.append(key)
    return keys


def _order(item: tuple[tuple[str, ...], Any]) -> list[tuple[float, str]]:
    """Grid points in numeric order of their values (non-numbers first, then by their text)."""
    return [
        (num(json.loads(c)) if num(json.loads(c)) is not None else -math.inf, c) for c in item[0]
    ]


def sweep_report(outs: list[str | Path], to: Path, *, risk_target: float | None = None) -> str:
    """The markdown of the sweep report of the folders ``outs``; figures are written to ``to``."""
    rows = load_rows(outs)
    keys = grid_keys(rows)
    devs = developers(rows)
    logs = RunLogs()
    plt: ModuleType | None = None
    missing: MissingExtra | None = None
    try:
        plt = figures.pyplot()
    except MissingExtra as err:
        missing = err
    else:  # the figures' runs are read in full once, their headers with them
        logs.need_events(row["log"] for row in figures.figure_rows(rows, keys).values())
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(json.dumps(row.get(k)) for k in keys)].append(row)
    header = logs.header(rows[0]["log"])
    lines = [f"# Sweep report: {header.get('scenario')}", ""]
    lines.append(f"{len(rows)} finished runs from {', '.join(str(o) for o in outs)}.")
    lines += ["", "## Leakage and utility", ""]
    ceilings = any(r.get(f"{d}.leakage_ceiling") is not None for r in rows for d in devs)
    cols = [
        *keys,
        "developer",
        "runs",
        "leakage %",
        *(["policy %", "audit set %", "answers %"] if ceilings else []),
        "proxy-only %",
        "refused %",
        "median \\|err\\|",
        "honest agree",
        "honest \\|err\\|",
    ]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    points: list[figures.Point] = []
    ceiling_points: list[tuple[float, dict[str, float | None]]] = []
    verdicts: list[Verdict] = []
    for combo, rs in sorted(groups.items(), key=_order):
        values = [json.loads(c) for c in combo]
        err = stat(num(r.get("compliance.median_abs_error")) for r in rs)
        worst: tuple[float, float] | None = None  # (leakage, error) of the strongest attacker
        for dev in devs:
            lines.append(_row(values, dev, rs, err, ceilings))
            leak = stat(num(r.get(f"{dev}.leakage")) for r in rs)
            if leak[0] is not None and err[0] is not None:
                worst = max(worst or (leak[0], err[0]), (leak[0], err[0]))
        verdict = _strongest(rs, devs, logs)
        public = stat(num(r.get("proxy_baseline_leakage")) for r in rs)
        verdict["proxy_baseline_leakage"] = public[0]
        verdicts.append((values, len(rs), verdict))
        red_leak = verdict["leakage"] if verdict["source"] == "red team" else None
        if red_leak is not None and err[0] is not None:
            worst = max(worst or (red_leak, err[0]), (red_leak, err[0]))
        if worst is not None:  # a policy is as leaky as the strongest attack against it
            points.append((worst[1], worst[0], json.dumps(values)))
            ceiling_points.append((worst[1], {k: verdict.get(k) for k in CEILING_KEYS}))
    lines += _strongest_table(keys, verdicts, risk_target)
    if missing is not None:
        lines += ["", skipped(missing)]
    elif plt is not None:
        names = figures.sweep_figures(
            plt,
            rows=rows,
            keys=keys,
            developers=devs,
            points=points,
            ceilings=ceiling_points,
            logs=logs,
            to=to,
        )
        lines += ["", "## Figures", ""]
        lines += [f"![{name}]({name})" for name in names if name.endswith(".png")]
    lines += [
        "",
        "## Scenario",
        "",
        "```json",
        json.dumps(header.get("resolved_scenario"), indent=2, sort_keys=True),
        "```",
    ]
    return "\n".join(lines) + "\n"


def _row(
    values: list[Any],
    dev: str,
    rs: list[dict[str, Any]],
    err: tuple[float | None, float | None, int],
    ceilings: bool,
) -> str:
    """One line of the leakage-and-utility table: a developer at one grid point."""
    leak = stat(num(r.get(f"{dev}.leakage")) for r in rs)
    proxy = stat(num(r.get("proxy_baseline_leakage")) for r in rs)
    refused = stat(
        100.0 * (num(r.get(f"{dev}.refused")) or 0.0) / max(num(r.get(f"{dev}.sent")) or 1.0, 1.0)
        for r in rs
    )
    agree = [a for a in (r.get(f"{dev}.deployed_agrees") for r in rs) if a is not None]
    honest_err = stat(num(r.get(f"{dev}.metric_error")) for r in rs)
    bounds = [stat(num(r.get(f"{dev}.{key}")) for r in rs) for key in CEILING_KEYS]
    return (
        "| " + " | ".join(str(v) for v in values) + f" | {dev} | {len(rs)} | "
        f"{fmt(leak[0], leak[1])} | "
        + ("".join(f"{fmt(b[0], b[1])} | " for b in bounds) if ceilings else "")
        + f"{fmt(proxy[0], proxy[1])} | "
        f"{fmt(refused[0], refused[1])} | {fmt(err[0], err[1], 4)} | "
        + (f"{100 * sum(bool(a) for a in agree) / len(agree):.0f}%" if agree else "-")
        + f" | {fmt(honest_err[0], honest_err[1], 4)} |"
    )


def _strongest(rs: list[dict[str, Any]], devs: list[str], logs: RunLogs) -> dict[str, Any]:
    """The strongest attack of one grid point over its runs: the red team's when the runs have
    one, else among the scenario's attackers (developers that are not honest)."""
    red = [r for r in rs if r.get(f"{RED_TEAM_PREFIX}strongest") is not None]
    runs: list[list[dict[str, Any]]] = []
    if red:
        for r in red:
            kinds = {
                key[len(RED_TEAM_PREFIX) : -len(".leakage")]
                for key in r
                if key.startswith(RED_TEAM_PREFIX)
                and key.endswith(".leakage")
                and not key.startswith(f"{RED_TEAM_PREFIX}strongest")
            }
            runs.append(
                [
                    {
                        "kind": kind,
                        "ceiling_kind": r.get(f"{RED_TEAM_PREFIX}{kind}.ceiling_kind"),
                        "leakage": num(r.get(f"{RED_TEAM_PREFIX}{kind}.leakage")),
                        "revealed": num(r.get(f"{RED_TEAM_PREFIX}{kind}.revealed")),
                        **{
                            key: num(r.get(f"{RED_TEAM_PREFIX}{kind}.{key}"))
                            for key in (*CEILING_KEYS, "person_ceiling")
                        },
                    }
                    for kind in sorted(kinds)
                ]
            )
        return strongest_over_runs("", runs, source="red team")
    for r in rs:
        header = logs.header(r["log"])
        strategies = {d.get("id"): d.get("strategy") for d in header.get("developers", [])}
        runs.append(
            [
                {
                    "kind": strategies.get(dev),
                    "name": f"{dev} ({strategies.get(dev)})",
                    "ceiling_kind": r.get(f"{dev}.ceiling_kind"),
                    "leakage": num(r.get(f"{dev}.leakage")),
                    "revealed": num(r.get(f"{dev}.revealed")),
                    **{key: num(r.get(f"{dev}.{key}")) for key in CEILING_KEYS},
                    "person_ceiling": _person(r, dev),
                }
                for dev in devs
                if strategies.get(dev) is not None and strategies.get(dev) not in HONEST_KINDS
            ]
        )
    return strongest_over_runs("", runs, source="scenario")


def _person(row: dict[str, Any], dev: str) -> float | None:
    """A developer's most exposed person's ceiling in a sweep row, at the tightest level."""
    for level in ("answers", "audit_set", "policy"):
        value = num(row.get(f"{dev}.person_ceiling.{level}"))
        if value is not None:
            return value
    return None


def _strongest_table(
    keys: list[str], verdicts: list[Verdict], target: float | None = None
) -> list[str]:
    """Per grid point (policy), the strongest attack's name and leakage, the three ceilings of
    its answers beside, then the verdict per policy at ``target``."""
    cols = [
        *keys,
        "runs",
        "attacks of",
        "strongest attack",
        "leakage %",
        "policy %",
        "audit set %",
        "answers %",
    ]
    lines = ["", "## Strongest attack per policy", ""]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for values, runs, v in verdicts:
        bounds = " | ".join("-" if v.get(k) is None else f"{v[k]:.1f}" for k in CEILING_KEYS)
        lines.append(
            "| "
            + " | ".join(str(x) for x in values)
            + (" | " if values else "")
            + f"{runs} | {v['source']} | {v['attack'] or '-'} | "
            f"{fmt(v['leakage'], v['leakage_sd'])} | {bounds} |"
        )
    lines += ["", *verdict_lines(keys, verdicts, target)]
    return lines


def _short_names(keys: list[str]) -> list[str]:
    """Each grid key's last part, or its last three where two keys share their last part
    (``policy.0.epsilon`` and ``policy.1.epsilon``: a budget's and a noise stage's)."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return [
        ".".join(k.split(".")[-3:]) if last.count(name) > 1 else name
        for k, name in zip(keys, last, strict=True)
    ]


def verdict_lines(
    keys: list[str], verdicts: list[Verdict], target: float | None = None
) -> list[str]:
    """The verdict per policy: the strongest attack, the three ceilings of its answers (means
    over the runs) and what they prove at ``target`` (:func:`biasleak.sim.safety.safety`)."""
    names = _short_names(keys)
    head = (
        f"**Verdict per policy** (target {target:g}%)"
        if target is not None
        else ("**Verdict per policy** (no target given: `--target` names one)")
    )
    lines = [head + ":", ""]
    for values, _, v in verdicts:
        where = ", ".join(f"{n}={x}" for n, x in zip(names, values, strict=True))
        public = v.get("proxy_baseline_leakage")
        lines.append(
            f"- {where or 'the scenario'}: {safety(v['leakage'], v, target, public=public)}"
        )
    return lines
