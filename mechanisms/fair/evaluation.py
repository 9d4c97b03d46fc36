r"""Scoring a fair classifier on held-out people: error and equalized-odds violation.

A fair-learning service is judged on people outside the audit set it learned from: how often the
classifier it delivers is wrong, and how far its error rates differ between groups. Equalized
odds (Hardt et al. 2016) asks for equal false-positive rates (among people with y = 0) and equal
true-positive rates (among people with y = 1); the violation is the larger of the two gaps,

.. math:: \Delta_{EO} = \max\Big(\max_{a,a'} |\mathrm{FPR}_a - \mathrm{FPR}_{a'}|,\
    \max_{a,a'} |\mathrm{TPR}_a - \mathrm{TPR}_{a'}|\Big),

the quantity Jagielski et al. (2019) plot as "realised violation". Predictions may be 0/1
decisions (one draw of a randomized classifier) or probabilities ``P[Y' = 1]``; with
probabilities every rate below is the EXPECTED rate of the randomized classifier, which removes
the classifier's own coin flips from comparisons between methods.

These functions hold the ground truth (labels and groups of held-out people), so they belong to
the evaluator, never to a developer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms._validation import as_predictions, check_int
from biasleak.mechanisms.fair._groups import as_groups, as_labels

__all__ = [
    "EMPTY_CELL",
    "FairnessScore",
    "equalized_odds_violation",
    "error_rate",
    "group_rates",
    "score",
]

EMPTY_CELL: Final = (
    "group {group} has no held-out people with label {label}, so its {rate} is undefined"
)


@dataclass(frozen=True)
class FairnessScore:
    """Error and equalized-odds gaps of one classifier on held-out people."""

    error: float
    """Fraction of wrong decisions (expected fraction for probabilities)."""
    fpr_gap: float
    """Largest difference of false-positive rates between two groups."""
    tpr_gap: float
    """Largest difference of true-positive rates between two groups."""

    @property
    def eo_violation(self) -> float:
        """The equalized-odds violation, ``max(fpr_gap, tpr_gap)``."""
        return max(self.fpr_gap, self.tpr_gap)


def _inputs(
    labels: ArrayLike, predictions: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    y = as_labels(labels, name="labels")
    h = as_predictions(predictions)
    if h.ndim != 1 or h.shape[0] != y.size:
        raise ValueError(
            f"predictions must be a vector with one entry per person (n = {y.size}); received "
            f"shape {h.shape}"
        )
    return y, h


def error_rate(labels: ArrayLike, predictions: ArrayLike) -> float:
    """Mean of ``|y - h|``: the error of 0/1 decisions, or the expected error of probabilities."""
    y, h = _inputs(labels, predictions)
    return float(np.mean(np.abs(y - h)))


def group_rates(
    labels: ArrayLike, predictions: ArrayLike, *, protected: ArrayLike, n_groups: int = 2
) -> NDArray[np.float64]:
    """``r[y, a]``: mean prediction among people of group a with label y, shape (2, G).

    Row 0 holds the false-positive rates, row 1 the true-positive rates. Raises when a
    (group, label) cell has nobody in it.
    """
    y, h = _inputs(labels, predictions)
    g = check_int(n_groups, name="n_groups", minimum=2)
    a = as_groups(protected, n=y.size, n_groups=g)
    cell = y * g + a
    total = np.bincount(cell, weights=h, minlength=2 * g).reshape(2, g)
    count = np.bincount(cell, minlength=2 * g).reshape(2, g)
    if np.any(count == 0):
        label, group = (int(i[0]) for i in np.nonzero(count == 0))
        rate = "true-positive rate" if label == 1 else "false-positive rate"
        raise ValueError(EMPTY_CELL.format(group=group, label=label, rate=rate))
    return total / count


def score(
    labels: ArrayLike, predictions: ArrayLike, *, protected: ArrayLike, n_groups: int = 2
) -> FairnessScore:
    """Error and equalized-odds gaps of ``predictions`` (see the module docstring)."""
    r = group_rates(labels, predictions, protected=protected, n_groups=n_groups)
    gaps = r.max(axis=1) - r.min(axis=1)
    return FairnessScore(
        error=error_rate(labels, predictions), fpr_gap=float(gaps[0]), tpr_gap=float(gaps[1])
    )


def equalized_odds_violation(
    labels: ArrayLike, predictions: ArrayLike, *, protected: ArrayLike, n_groups: int = 2
) -> float:
    """``max(FPR gap, TPR gap)`` of ``predictions`` across groups."""
    return score(labels, predictions, protected=protected, n_groups=n_groups).eo_violation
