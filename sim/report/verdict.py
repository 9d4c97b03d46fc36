"""Where biasleak agrees with the paper and where it does not, in a table and a paragraph.

Two kinds of comparison close each paper report. Leakage is compared cell by cell: ours (mean and
standard deviation over runs) agrees with the published value when they are within 10 points or
two standard deviations. Avg. SP err is compared under every reading we tested
(:data:`~biasleak.sim.report.stats.READINGS`), because the paper does not define it precisely:
:func:`reading_table` prints, per cell, the median over runs of each reading beside the published
value, and :func:`verdict` says in how many noisy cells our median ``|released - exact|`` is at
or above the paper's, the range of the ratios, and how many cells each reading brings within 30%
of the published value.
"""

from __future__ import annotations

import statistics
from typing import Any, Final

from biasleak.sim.report.logs import RunLogs
from biasleak.sim.report.stats import READING_NAMES, READINGS, fmt

__all__ = ["AGREE_POINTS", "CLOSE_RATIO", "Leak", "leak_agrees", "reading_table", "verdict"]

Leak = tuple[str, float | None, float | None, float]
"""A leakage comparison: cell label, our mean and sd over runs, the paper's value."""

AGREE_POINTS: Final = 10.0
"""Leakage within this many points of the paper's (or two sds, if wider) agrees with it."""

CLOSE_RATIO: Final = 0.3
"""An error reading within this fraction of the paper's value counts as close to it."""


def leak_agrees(mean: float, sd: float | None, paper: float) -> bool:
    """Whether our leakage (mean, sd over runs) agrees with the paper's value."""
    return abs(mean - paper) <= max(AGREE_POINTS, 2 * (sd or 0.0))


def verdict(errors: list[tuple[list[float], float]], leakage: list[Leak] | None) -> list[str]:
    """A plain paragraph: where our numbers agree with the paper's and where they do not.

    ``errors`` holds, per cell, our value of each reading (in :data:`READINGS` order) and the
    published Avg. SP err; cells the paper gives as 0 (exact answers) are left out.
    """
    parts = []
    if leakage:
        rated = [c for c in leakage if c[1] is not None]
        off = [c for c in rated if not leak_agrees(c[1], c[2], c[3])]  # type: ignore[arg-type]
        text = (
            f"Leakage agrees with the paper (within {AGREE_POINTS:g} points or two standard "
            f"deviations) in {len(rated) - len(off)} of {len(rated)} cells"
        )
        if off:
            text += "; it does not in " + "; ".join(
                f"{label} (ours {fmt(mean, sd)}, paper {paper:g})" for label, mean, sd, paper in off
            )
        parts.append(text + ".")
    usable = [(values, published) for values, published in errors if published > 0]
    if usable:
        ratios = sorted(values[1] / published for values, published in usable)
        above = sum(r >= 1.0 for r in ratios)
        close = {
            key: sum(
                abs(values[i] / published - 1.0) <= CLOSE_RATIO for values, published in usable
            )
            for i, key in enumerate(READINGS)
        }
        parts.append(
            f"Avg. SP err: our median |released - exact| per answer is at or above the paper's "
            f"value in {above} of {len(usable)} noisy cells, from {ratios[0]:.3g} to "
            f"{ratios[-1]:.3g} times it (median {statistics.median(ratios):.3g} times). Cells "
            f"within {100 * CLOSE_RATIO:.0f}% of the paper's value, per reading: "
            + ", ".join(f"{READING_NAMES[k]} {close[k]}" for k in READINGS)
            + f" (of {len(usable)})."
        )
    return ["**Where we agree and where we do not.** " + " ".join(parts)] if parts else []


def reading_table(
    head: str,
    cells: list[tuple[str, list[dict[str, Any]], float]],
    logs: RunLogs,
    leakage: list[Leak] | None = None,
) -> list[str]:
    """Every reading of Avg. SP err per cell (median over runs, 1e-3) beside the paper's, then
    the paragraph on where we agree and where we do not.

    ``head`` is the cells' key columns (``"n | m | eps"``); each cell is its label in those
    columns, its runs' rows and the published value.
    """
    lines = [
        "Every reading of Avg. SP err we tested, per cell (units of 1e-3, median over runs): "
        "mean and median |released - exact| per answer, the mean after clamping released values "
        "to [-1, 1], |mean of the signed errors| over the batch, and the mean divided by m.",
        "",
        f"| {head} | mean | median | clamped | \\|mean signed\\| | mean / m | paper |",
        "|" + "---|" * (len(head.split("|")) + 6),
    ]
    stats: list[tuple[list[float], float]] = []
    for label, group, published in cells:
        errs = [e for e in (logs.batch_errors(r["log"]) for r in group) if e is not None]
        if not errs:
            continue
        values = [statistics.median(1e3 * e[k] for e in errs) for k in READINGS]
        stats.append((values, published))
        lines.append(f"| {label} | " + " | ".join(f"{v:.4g}" for v in values) + f" | {published} |")
    paragraph = verdict(stats, leakage)
    return [*lines, "", *paragraph] if paragraph else lines
