"""The paper reports: biasleak's numbers beside the published ones, table by table.

Each of the paper's tables and figures (Hamman, Chen and Dutta 2023) has a report body here. The
runs of the sweep folders are grouped into the paper's cells by their grid values, or, where a
value is not a grid column, by the run's header (the audit set's n and N0, the noise stage's
mechanism and epsilon, the attacker's number of models m). Each cell prints the number of runs,
our Avg. SP err (mean and median ``|released - exact|`` of the attacker's batch, units of 1e-3,
mean ± sd over runs) and leakage (mean ± sd, %) beside the published values
(:mod:`biasleak.sim.report.published`); cells the runs do not cover are left out. The tables end
with every reading of Avg. SP err and the paragraph on where we agree and where we do not
(:mod:`biasleak.sim.report.verdict`); the figures draw their curves when matplotlib is installed
and say they skipped them when it is not.

Every log is read once: its header and the attacker's batch together (:class:`RunLogs`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from biasleak.sim._optional import MissingExtra, skipped
from biasleak.sim.report import figures
from biasleak.sim.report.logs import ATTACKER, RunLogs
from biasleak.sim.report.published import PAPER
from biasleak.sim.report.stats import READINGS, eps_label, fmt, num, stat
from biasleak.sim.report.verdict import Leak, reading_table, verdict

__all__ = ["PAPER_BODIES", "paper_body"]

Rows = list[dict[str, Any]]


class _Cells:
    """What the paper's cells need from a run: its grid values, else its log's header."""

    def __init__(self, logs: RunLogs) -> None:
        self.logs = logs

    def resolved(self, row: dict[str, Any]) -> dict[str, Any]:
        return self.logs.header(row["log"]).get("resolved_scenario") or {}

    def eps(self, row: dict[str, Any]) -> float:
        """The noise stage's epsilon of a run (inf without noise): grid column or run header."""
        if "compliance.policy.0.epsilon" in row:
            value = num(row["compliance.policy.0.epsilon"])
            return math.inf if value is None else value
        for stage in self.resolved(row).get("compliance", {}).get("policy", []):
            if stage.get("kind") == "noise":
                if stage.get("mechanism") == "exact":
                    return math.inf
                value = num(stage.get("epsilon"))
                return math.inf if value is None else value
        return math.inf

    def m(self, row: dict[str, Any]) -> int:
        """The attacker's number of models: grid column or run header."""
        value = row.get("developers.0.strategy.queries")
        if value is None:
            developers = self.resolved(row).get("developers", [])
            value = developers[0].get("strategy", {}).get("queries") if developers else None
        return int(value) if value is not None else 0

    def n(self, row: dict[str, Any]) -> int:
        return int(self.logs.header(row["log"])["audit"]["n"])

    def n0(self, row: dict[str, Any]) -> int:
        return int(row.get("data.minority") or self.logs.header(row["log"])["audit"]["n0"])

    def mechanism(self, row: dict[str, Any]) -> Any:
        return row.get("compliance.policy.0.mechanism") or next(
            (
                s.get("mechanism")
                for s in self.resolved(row).get("compliance", {}).get("policy", [])
                if s.get("kind") == "noise"
            ),
            None,
        )

    def cell(self, rows: Rows) -> dict[str, Any]:
        """Our numbers for one cell: runs, every error reading (1e-3), leakage, revealed."""
        errs = [self.logs.batch_errors(r["log"]) for r in rows]
        found = [e for e in errs if e is not None]
        out: dict[str, Any] = {"runs": len(rows)}
        for key in READINGS:
            out[key] = stat(1e3 * e[key] for e in found)
        out["leakage"] = stat(num(r.get(f"{ATTACKER}.leakage")) for r in rows)
        out["revealed"] = stat(num(r.get(f"{ATTACKER}.revealed")) for r in rows)
        return out


def _table1(rows: Rows, c: _Cells, to: Path) -> list[str]:
    cells: dict[tuple[Any, ...], Rows] = defaultdict(list)
    for r in rows:
        cells[(c.n(r), c.m(r), c.eps(r), c.mechanism(r))].append(r)
    lines = [
        "Avg. SP err in units of 1e-3 (mean ± sd over runs of the mean |released - exact| of the "
        "attacker's m answers; the median is beside it), leakage in % (mean ± sd).",
        "",
        "| n | m | eps | runs | AC err mean | AC err median | paper AC | Lap err mean | "
        "Lap err median | paper Lap | AC leakage | paper | Lap leakage | paper |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    leakage: list[Leak] = []
    for (n, m, eps), paper in PAPER["table1"].items():
        ac = c.cell(cells.get((n, m, eps, "attribute_conceal"), []))
        lap = c.cell(cells.get((n, m, eps, "laplace"), []))
        if not ac["runs"] and not lap["runs"]:
            continue
        for ours, theirs, name in ((ac, paper[2], "AC"), (lap, paper[3], "Laplace")):
            if ours["leakage"][0] is not None:
                label = f"n = {n}, m = {m}, eps = {eps_label(eps)}, {name}"
                leakage.append((label, *ours["leakage"][:2], theirs))
        lines.append(
            f"| {n} | {m} | {eps_label(eps)} | {ac['runs']}+{lap['runs']} | "
            f"{fmt(*ac['mean'][:2], 2)} | {fmt(*ac['median'][:2], 2)} | {paper[0]} | "
            f"{fmt(*lap['mean'][:2], 2)} | {fmt(*lap['median'][:2], 2)} | {paper[1]} | "
            f"{fmt(*ac['leakage'][:2])} | {paper[2]} | {fmt(*lap['leakage'][:2])} | "
            f"{paper[3]} |"
        )
    readings = []
    for (n, m, eps), paper in PAPER["table1"].items():
        if math.isinf(eps):
            continue
        for mechanism, published in (("attribute_conceal", paper[0]), ("laplace", paper[1])):
            group = cells.get((n, m, eps, mechanism), [])
            if group:
                readings.append((f"{n} | {m} | {eps_label(eps)} | {mechanism}", group, published))
    lines += ["", *reading_table("n | m | eps | mechanism", readings, c.logs, leakage)]
    return lines


def _table2_3(rows: Rows, c: _Cells, which: str) -> list[str]:
    cells: dict[tuple[Any, ...], Rows] = defaultdict(list)
    third = "m" if which == "table2" else "eps"
    for r in rows:
        key3 = c.m(r) if which == "table2" else c.eps(r)
        cells[(c.n(r), c.n0(r), key3)].append(r)
    lines = [
        "Avg. SP err in units of 1e-3 (mean and median |released - exact| of the attacker's m "
        "answers, mean ± sd over runs), leakage in %.",
        "",
        f"| n | N0 | {third} | runs | err mean | err median | paper err | leakage | paper |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    leakage: list[Leak] = []
    for key, (perr, pleak) in PAPER[which].items():
        ours = c.cell(cells.get(key, []))
        if not ours["runs"]:
            continue
        third_value = eps_label(key[2]) if which == "table3" else key[2]
        leakage.append(
            (f"n = {key[0]}, N0 = {key[1]}, {third} = {third_value}", *ours["leakage"][:2], pleak)
        )
        lines.append(
            f"| {key[0]} | {key[1]} | {third_value} | "
            f"{ours['runs']} | {fmt(*ours['mean'][:2], 2)} | {fmt(*ours['median'][:2], 2)} | "
            f"{perr} | {fmt(*ours['leakage'][:2])} | {pleak} |"
        )
    lines.append("")
    readings = [
        (f"{k[0]} | {k[1]} | {eps_label(k[2]) if which == 'table3' else k[2]}", cells[k], v[0])
        for k, v in PAPER[which].items()
        if cells.get(k)
    ]
    lines += reading_table(f"n | N0 | {third}", readings, c.logs, leakage)
    return lines


def _table4(rows: Rows, c: _Cells, to: Path) -> list[str]:
    cells: dict[tuple[Any, ...], Rows] = defaultdict(list)
    for r in rows:
        cells[(c.m(r), c.eps(r))].append(r)
    lines = [
        "German credit (n = 1000, N1 = 690, N0 = 310). Avg. SP err in units of 1e-3; "
        "recovered = people whose attribute the final estimate has right (N_A + N_B).",
        "",
        "| m | eps | runs | err mean | err median | paper err | recovered | paper | leakage % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, (perr, prec) in PAPER["table4"].items():
        ours = c.cell(cells.get(key, []))
        if not ours["runs"]:
            continue
        lines.append(
            f"| {key[0]} | {eps_label(key[1])} | {ours['runs']} | {fmt(*ours['mean'][:2], 2)} | "
            f"{fmt(*ours['median'][:2], 2)} | {perr} | {fmt(*ours['revealed'][:2])} | {prec} | "
            f"{fmt(*ours['leakage'][:2])} |"
        )
    lines += [
        "",
        "A constant guess of 'male' for everyone already recovers 690 people; the "
        "paper's counts (492 to 657) are below that, so the number recovered says little "
        "without the balanced leakage beside it.",
        "",
    ]
    readings = [
        (f"{k[0]} | {eps_label(k[1])}", cells[k], v[0])
        for k, v in PAPER["table4"].items()
        if cells.get(k)
    ]
    lines += reading_table("m | eps", readings, c.logs)
    return lines


def _figure2(rows: Rows, c: _Cells, to: Path) -> list[str]:
    by_n: dict[int, dict[int, Rows]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_n[c.n(r)][c.m(r)].append(r)
    lines = ["| n | m | runs | leakage % | paper |", "|---|---|---|---|---|"]
    leakage: list[Leak] = []
    curves: dict[int, list[tuple[int, float | None, float | None]]] = {}
    for n in sorted(by_n):
        curves[n] = []
        for m in sorted(by_n[n]):
            leak = stat(num(r.get(f"{ATTACKER}.leakage")) for r in by_n[n][m])
            curves[n].append((m, leak[0], leak[1]))
            paper = PAPER["figure2"].get((n, m), "")
            lines.append(f"| {n} | {m} | {leak[2]} | {fmt(leak[0], leak[1])} | {paper} |")
            if paper != "":
                leakage.append((f"n = {n}, m = {m}", leak[0], leak[1], float(paper)))
    paragraph = verdict([], leakage)
    if paragraph:
        lines += ["", *paragraph]
    try:
        plt = figures.pyplot()
    except MissingExtra as err:
        return [*lines, "", skipped(err)]
    names = figures.paper_figure2(plt, curves, PAPER["figure2"], to)
    return [*lines, "", f"![figure 2]({names[0]})"]


def _figure3(rows: Rows, c: _Cells, to: Path) -> list[str]:
    by_n: dict[int, dict[float, Rows]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_n[c.n(r)][c.eps(r)].append(r)
    lines = [
        "| n | eps | runs | err mean (1e-3) | err median (1e-3) | leakage % |",
        "|---|---|---|---|---|---|",
    ]
    curves: dict[int, list[tuple[float | None, float | None, float]]] = {}
    for n in sorted(by_n):
        curve = []
        for eps in sorted(by_n[n]):
            ours = c.cell(by_n[n][eps])
            lines.append(
                f"| {n} | {eps_label(eps)} | {ours['runs']} | {fmt(*ours['mean'][:2], 2)} | "
                f"{fmt(*ours['median'][:2], 2)} | {fmt(*ours['leakage'][:2])} |"
            )
            curve.append((ours["median"][0], ours["leakage"][0], eps))
        curves[n] = curve
    try:
        plt = figures.pyplot()
    except MissingExtra as err:
        return [*lines, "", skipped(err)]
    names = figures.paper_figure3(plt, curves, to)
    return [*lines, "", f"![figure 3]({names[0]})"]


PAPER_BODIES: dict[str, Callable[[Rows, _Cells, Path], list[str]]] = {
    "table1": _table1,
    "table2": lambda rows, c, to: _table2_3(rows, c, "table2"),
    "table3": lambda rows, c, to: _table2_3(rows, c, "table3"),
    "table4": _table4,
    "figure2": _figure2,
    "figure3": _figure3,
}
"""The body of each paper report, by item name."""


def paper_body(paper: str, rows: Rows, to: Path) -> list[str]:
    """The lines of the report on ``paper`` (an item of :data:`PAPER_BODIES`) for these runs;
    figures are written to ``to``."""
    # every table but Figure 2 reads each run's batch of answers: read those logs in full once
    logs = RunLogs(complete=paper != "figure2")
    return PAPER_BODIES[paper](rows, _Cells(logs), to)
