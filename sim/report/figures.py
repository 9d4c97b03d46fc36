"""The reports' figures, drawn with matplotlib (the optional ``plots`` extra).

A sweep report draws four figures: the leakage of the strongest attacker against the compliance
team's error, one point per grid point with the Pareto front (lower error and lower leakage) and
the proven leakage ceilings marked; leakage over simulated time and against the number of answered
models, one step curve per developer for the first run (lowest seed) of up to 12 grid points; and
the privacy budget charged over time for the same runs. The paper reports draw Figure 2 (leakage
against m, the paper's points as crosses) and Figure 3 (error against leakage over epsilon).

Every figure is written as PNG and SVG; the SVG carries no date and fixed element ids, so the same
runs give byte-identical files. matplotlib is imported through
:func:`biasleak.sim._optional.require`: :func:`pyplot` raises
:class:`~biasleak.sim._optional.MissingExtra` without it, and the reports catch it and say in the
markdown what they skipped.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from biasleak.sim._optional import require
from biasleak.sim.report.logs import RunLogs
from biasleak.sim.report.stats import eps_label, num
from biasleak.sim.safety import LEVEL_NAMES

__all__ = [
    "FIGURE_RUNS",
    "Point",
    "figure_rows",
    "paper_figure2",
    "paper_figure3",
    "pareto",
    "pyplot",
    "save",
    "scatter_points",
    "sweep_figures",
]

Point = tuple[float, float, str]
"""A grid point in the leakage-utility figure: ``(error, leakage, json of the grid values)``."""

FIGURE_RUNS: Final = 12
"""At most this many grid points get a curve in the time-series figures."""


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the file-only Agg backend; raises ``MissingExtra`` without it."""
    require("matplotlib").use("Agg")
    return require("matplotlib.pyplot")


def save(fig: Any, to: Path, name: str) -> list[str]:
    """Write ``fig`` as ``name.png`` and ``name.svg`` in ``to``; return the file names."""
    matplotlib = require("matplotlib")
    paths = []
    # no date and fixed element ids in the SVG: the same runs give the same files
    with matplotlib.rc_context({"svg.hashsalt": "biasleak"}):
        for ext in ("png", "svg"):
            path = to / f"{name}.{ext}"
            metadata = None if ext == "png" else {"Date": None}
            fig.savefig(path, dpi=120, bbox_inches="tight", metadata=metadata)
            paths.append(path.name)
    return paths


def figure_rows(rows: list[dict[str, Any]], keys: list[str]) -> dict[str, dict[str, Any]]:
    """The runs drawn in the time-series figures: per grid point (its label) the lowest seed's,
    for the first :data:`FIGURE_RUNS` grid points."""
    first_by_combo: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["seed"]):
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={row.get(k)}" for k in keys) or "scenario"
        first_by_combo.setdefault(label, row)
    return dict(list(first_by_combo.items())[:FIGURE_RUNS])


def scatter_points(ax: Any, points: list[Point], keys: list[str]) -> None:
    """One colour per value of the grid key with the fewest values; the other keys as labels."""
    decoded = [(x, y, json.loads(tag)) for x, y, tag in points]
    short = [k.rsplit(".", 1)[-1] for k in keys]
    by = None
    if len(keys) > 1:
        counts = [len({json.dumps(d[2][i]) for d in decoded}) for i in range(len(keys))]
        by = min(range(len(keys)), key=lambda i: (counts[i], i))
    groups: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for x, y, values in decoded:
        colour = f"{short[by]}={values[by]}" if by is not None else "grid point"
        note = ", ".join(
            f"{name}={value}"
            for i, (name, value) in enumerate(zip(short, values, strict=True))
            if i != by
        )
        groups[colour].append((x, y, note))
    for colour, marks in sorted(groups.items()):
        ax.scatter([m[0] for m in marks], [m[1] for m in marks], label=colour)
        for x, y, note in marks:
            ax.annotate(note, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")


def pareto(points: list[Point]) -> list[Point]:
    """Points not dominated in (lower error, lower leakage)."""
    front = []
    for p in points:
        if not any(q[0] <= p[0] and q[1] <= p[1] and (q[0], q[1]) != (p[0], p[1]) for q in points):
            front.append(p)
    return sorted(front)


CEILING_MARKS = (
    ("leakage_ceiling", "_", "policy ceiling"),
    ("audit_set_ceiling", "x", "audit-set ceiling"),
    ("answers_ceiling", "+", "answers ceiling"),
)
"""How the leakage-against-utility figure marks each proven ceiling of the strongest attack."""


def sweep_figures(
    plt: ModuleType,
    *,
    rows: list[dict[str, Any]],
    keys: list[str],
    developers: list[str],
    points: list[Point],
    ceilings: list[tuple[float, dict[str, float | None]]],
    logs: RunLogs,
    to: Path,
) -> list[str]:
    """Draw the sweep report's four figures into ``to``; return the file names."""
    names: list[str] = []
    fig, ax = plt.subplots(figsize=(6, 4.5))
    if points:
        scatter_points(ax, points, keys)
        front = pareto(points)
        ax.plot([p[0] for p in front], [p[1] for p in front], color="tab:red", label="Pareto front")
        for key, marker, label in CEILING_MARKS:  # the proven bounds beside the leakage
            shown = [(x, c[key]) for x, c in ceilings if c.get(key) is not None]
            if shown:
                ax.scatter(
                    [x for x, _ in shown],
                    [c for _, c in shown],
                    marker=marker,
                    s=120,
                    color="black",
                    label=label,
                )
        ax.set_xscale("symlog", linthresh=1e-3)
        ax.legend()
    ax.set_xlabel("median |answered - exact| (compliance)")
    ax.set_ylabel("leakage of the strongest attacker (%)")
    ax.set_title("Leakage against utility, per grid point")
    names += save(fig, to, "leakage_vs_utility")
    plt.close(fig)
    drawn_runs = figure_rows(rows, keys)
    for kind, xlabel, name in (
        ("leakage_time", "simulated hours", "leakage_over_time"),
        ("leakage_models", "models answered", "recovery_vs_queries"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for label, row in drawn_runs.items():
            for dev in developers:
                series = logs.series(row["log"], kind, dev)  # type: ignore[arg-type]
                if series:
                    (line,) = ax.step(  # markers: a run that decodes once has a single point
                        [s[0] for s in series],
                        [s[1] for s in series],
                        where="post",
                        marker="o",
                        markersize=3,
                        label=f"{dev}: {label}",
                    )
                    for key, style in (("leakage_ceiling", ":"), ("answers_ceiling", "--")):
                        ceiling = num(row.get(f"{dev}.{key}"))
                        if ceiling is not None:  # the proven bounds beside the measured leakage
                            ax.axhline(
                                ceiling,
                                linestyle=style,
                                linewidth=0.8,
                                color=line.get_color(),
                                label=f"{dev}: {label} {LEVEL_NAMES[key]} ceiling",
                            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("leakage (%)")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=6)
        names += save(fig, to, name)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    drawn = False
    for label, row in drawn_runs.items():
        series = logs.series(row["log"], "budget")
        if series:
            drawn = True
            ax.step(
                [s[0] for s in series],
                [s[1] for s in series],
                where="post",
                marker="o",
                markersize=3,
                label=label,
            )
    ax.set_xlabel("simulated hours")
    ax.set_ylabel("epsilon charged (all developers)")
    if drawn:  # exact answers charge no finite epsilon: nothing to label
        ax.legend(fontsize=6)
    names += save(fig, to, "budget_over_time")
    plt.close(fig)
    return names


def paper_figure2(
    plt: ModuleType,
    curves: dict[int, list[tuple[int, float | None, float | None]]],
    published: dict[tuple[Any, ...], Any],
    to: Path,
) -> list[str]:
    """Figure 2: leakage (mean ± sd over runs) against m per n, the paper's points as crosses.

    ``curves`` maps n to ``(m, mean, sd)`` in increasing m; ``published`` maps ``(n, m)`` to the
    paper's leakage.
    """
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for n, curve in curves.items():
        ax.errorbar(
            [c[0] for c in curve],
            [c[1] for c in curve],
            yerr=[c[2] for c in curve],
            marker="o",
            capsize=3,
            label=f"n = {n}",
        )
    for (_n, m), value in published.items():
        ax.scatter([m], [value], marker="x", color="black", zorder=5)
    ax.set_xscale("log")
    ax.set_xlabel("models m")
    ax.set_ylabel("leakage (%)")
    ax.set_title("Noiseless recovery on Adult (x: the paper's points)")
    ax.legend()
    names = save(fig, to, "figure2")
    plt.close(fig)
    return names


def paper_figure3(
    plt: ModuleType,
    curves: dict[int, list[tuple[float | None, float | None, float]]],
    to: Path,
) -> list[str]:
    """Figure 3: median error against leakage per n, each point labelled with its epsilon.

    ``curves`` maps n to ``(median error in 1e-3, leakage, epsilon)`` in increasing epsilon.
    """
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for n, curve in curves.items():
        pts = [p for p in curve if p[0] is not None and p[1] is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"n = {n}")
        for p in pts:
            ax.annotate(eps_label(p[2]), (p[0], p[1]), fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("median |released - exact| (1e-3)")
    ax.set_ylabel("leakage (%)")
    ax.set_title("Attribute-Conceal: error against leakage (labels: epsilon)")
    ax.legend()
    names = save(fig, to, "figure3")
    plt.close(fig)
    return names
