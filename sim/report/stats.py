"""Numbers in reports: loose values read as floats, mean and spread over runs, and how they print.

A sweep row holds what a run summary wrote, so a figure may be missing, ``None``, an empty string
or ``"inf"``; :func:`num` reads any of them as a float or ``None``. A report cell summarises a grid
point over its seeds with :func:`stat` (mean, sample standard deviation, count of finite values)
and prints it with :func:`fmt` as ``mean ± sd``.

The paper's "Avg. SP err" is not defined precisely, so the reports compute, from the attacker's
batch of m answers (its largest answered query), every reading we tested: the mean and the
median of ``|released - exact|`` per answer, the mean after clamping released values to [-1, 1],
the absolute mean of the signed errors, and the mean divided by m. :func:`errors_of` computes
them from one release; :data:`READINGS` names them in the order the reports print them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "READINGS",
    "READING_NAMES",
    "Stat",
    "eps_label",
    "errors_of",
    "fmt",
    "num",
    "stat",
]

Stat = tuple[float | None, float | None, int]
"""Mean, standard deviation (0 for one value) and count of the finite values; ``None, None, 0``
when there are none."""

READING_NAMES: Final[dict[str, str]] = {
    "mean": "mean",
    "median": "median",
    "mean_clamped": "clamped",
    "abs_mean_signed": "|mean signed|",
    "mean_over_m": "mean / m",
}
"""Every reading of Avg. SP err (a key of :func:`errors_of`) and its short name."""

READINGS: Final[tuple[str, ...]] = tuple(READING_NAMES)
"""The readings of Avg. SP err, in the order the reports print them."""


def num(value: Any) -> float | None:
    """A summary figure as a float, or ``None`` when it is missing or not a number."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def stat(values: Iterable[float | None]) -> Stat:
    """Mean, sample standard deviation and count of the finite values among ``values``."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None, None, 0
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0), len(vals)


def fmt(mean: float | None, sd: float | None, digits: int = 1) -> str:
    """``mean ± sd`` with ``digits`` decimals, or ``-`` without a mean."""
    if mean is None:
        return "-"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def eps_label(value: float) -> str:
    """An epsilon as the reports print it: ``inf`` for exact answers, else the shortest form."""
    return "inf" if math.isinf(value) else f"{value:g}"


def errors_of(release: dict[str, Any]) -> dict[str, float] | None:
    """Every reading of Avg. SP err for one release of m answers.

    Parameters
    ----------
    release
        A ``release_internal`` log event: ``exact`` holds the exact metric of each of the m
        models, ``released`` what the compliance team answered (``None`` where it withheld one).

    Returns
    -------
    dict or None
        With :math:`d_i = |r_i - x_i|` over the k answered models (released :math:`r_i`, exact
        :math:`x_i`): ``mean`` :math:`\\frac{1}{k}\\sum_i d_i`, ``median`` of the :math:`d_i`,
        ``mean_clamped`` the mean of :math:`|\\min(\\max(r_i, -1), 1) - x_i|`,
        ``abs_mean_signed`` :math:`|\\frac{1}{k}\\sum_i (r_i - x_i)|`, ``mean_over_m`` the mean
        divided by k, and ``m`` = k. ``None`` when no model was answered.
    """
    exact = [float(x) for x in release["exact"]]
    released = [num(x) for x in release["released"]]
    pairs = [(r, x) for r, x in zip(released, exact, strict=True) if r is not None]
    if not pairs:
        return None
    diffs = [abs(r - x) for r, x in pairs]
    clamped = [abs(min(max(r, -1.0), 1.0) - x) for r, x in pairs]
    m = len(pairs)
    return {
        "mean": statistics.fmean(diffs),
        "median": statistics.median(diffs),
        "mean_clamped": statistics.fmean(clamped),
        "abs_mean_signed": abs(statistics.fmean(r - x for r, x in pairs)),
        "mean_over_m": statistics.fmean(diffs) / m,
        "m": float(m),
    }
