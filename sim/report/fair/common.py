"""What the fair-learning reports share: the rows' grouping, means and spreads, and the distances
between a private curve and its non-private self."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Final

from biasleak.sim.fair.experiment import select
from biasleak.sim.report.stats import eps_label, fmt, stat

__all__ = [
    "CLOSE",
    "REFERENCES",
    "Cell",
    "Rows",
    "close_from",
    "distance",
    "from_text",
    "gamma_label",
    "gap_by_eps",
    "group",
    "mean_of",
    "pct",
    "reference_lines",
    "runs_note",
    "wide",
]


CLOSE: Final = 1.0
"""Points (percent) within which a private curve counts as close to a non-private one."""

REFERENCES: Final[dict[str, str]] = {
    "threshold_optimizer": "ThresholdOptimizer, 0/1 base predictions",
    "threshold_optimizer_scores": "ThresholdOptimizer, base model scores",
    "exponentiated_gradient": "ExponentiatedGradient(LogisticRegression)",
    "base_model": "base model (no fairness constraint)",
}
"""Labels of the non-private rows."""

Rows = list[dict[str, Any]]
Cell = tuple[float | None, float | None, int]


def pct(rows: Rows, key: str) -> Cell:
    return stat(100.0 * r[key] for r in rows if r.get(key) is not None)


def group(rows: Iterable[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], Rows]:
    out: dict[tuple[Any, ...], Rows] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok":
            out[tuple(r.get(k) for k in keys)].append(r)
    return out


def gamma_label(g: float | None) -> str:
    return "-" if g is None else f"{g:g}"


def wide(
    title: str, rows: Rows, gammas: Iterable[float], epsilons: Iterable[float], key: str
) -> list[str]:
    """A table with one row per gamma and one column per eps: ``key`` in percent."""
    eps = list(epsilons)
    cells = group(rows, "gamma", "epsilon")
    lines = [
        f"{title}",
        "",
        "| gamma | " + " | ".join(f"eps {eps_label(e)}" for e in eps) + " |",
        "|---|" + "---|" * len(eps),
    ]
    for g in gammas:
        lines.append(
            f"| {gamma_label(g)} | "
            + " | ".join(fmt(*pct(cells.get((g, e), []), key)[:2]) for e in eps)
            + " |"
        )
    return [*lines, ""]


def runs_note(rows: Rows) -> str:
    ok = sum(r.get("status") == "ok" for r in rows)
    refused = sum(r.get("status") == "refused" for r in rows)
    extra = f"; {refused} refused (audit cell below the public bound)" if refused else ""
    return f"{ok} runs{extra}."


def reference_lines(rows: Rows, dataset: str) -> list[str]:
    lines = ["| non-private | gamma | runs | error % | violation % |", "|---|---|---|---|---|"]
    for method, label in REFERENCES.items():
        found = select(rows, dataset=dataset, method=method)
        if found:
            e, v = pct(found, "error"), pct(found, "violation")
            lines.append(
                f"| {label} | {gamma_label(found[0].get('gamma'))} | {e[2]} | {fmt(*e[:2])} | "
                f"{fmt(*v[:2])} |"
            )
    return [*lines, ""]


def mean_of(rows: Rows, key: str) -> float | None:
    return pct(rows, key)[0]


# -------------------------------------------------------------------------------------------
# Readings computed from the numbers
# -------------------------------------------------------------------------------------------


def distance(here: Rows, exact: Rows, tol: float) -> tuple[float, float]:
    """(largest distance in points of the mean error or violation of ``here`` from ``exact``'s,
    that distance over what counts as close).

    Rows of the same seed share their splits, so the distance is the mean of the per-seed
    differences, and close means within ``tol`` points or two standard errors of that mean,
    whichever is larger: a curve is not called far from its limit for the seeds' spread alone.
    """
    mine = {r["seed"]: r for r in here}
    theirs = {r["seed"]: r for r in exact}
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return math.inf, math.inf
    worst, ratio = 0.0, 0.0
    for key in ("error", "violation"):
        diffs = [100.0 * (mine[k][key] - theirs[k][key]) for k in seeds]
        mean, sd, n = stat(diffs)
        se = (sd or 0.0) / math.sqrt(n)
        gap = abs(mean or 0.0)
        worst = max(worst, gap)
        ratio = max(ratio, gap / max(tol, 2.0 * se))
    return worst, ratio


def gap_by_eps(
    rows: Rows, gammas: Iterable[float], epsilons: Iterable[float], tol: float = CLOSE
) -> dict[float, tuple[float, float]]:
    """Per finite eps: :func:`distance` from the same gamma's eps = inf rows, the largest over
    gamma."""
    cells = group(rows, "gamma", "epsilon")
    gaps: dict[float, tuple[float, float]] = {}
    for e in epsilons:
        if math.isinf(e):
            continue
        found = [distance(cells.get((g, e), []), cells.get((g, math.inf), []), tol) for g in gammas]
        gaps[e] = (max(f[0] for f in found), max(f[1] for f in found))
    return gaps


def close_from(gaps: dict[float, tuple[float, float]]) -> float | None:
    """The smallest eps of the grid from which on every larger eps is close (ratio <= 1)."""
    found = None
    for e in sorted(gaps, reverse=True):
        if gaps[e][1] <= 1.0:
            found = e
        else:
            break
    return found


def from_text(e: float | None, grid: list[float]) -> str:
    finite = [x for x in grid if not math.isinf(x)]
    if e is None:
        return f"at no eps of the grid (the largest is {eps_label(max(finite))})"
    if e == min(finite):
        return f"already at the smallest eps of the grid, {eps_label(e)}"
    return f"from eps = {eps_label(e)} on"
