"""Scoring a run's estimates against the ground truth.

The :class:`Evaluator` is the only object outside the compliance agent that holds the protected
attribute. Whenever a developer's strategy has a new estimate, the developer process hands it
over (through a callback: nothing in :mod:`biasleak.agents` imports this module) and the evaluator
logs an ``evaluation`` event with the leakage - the balanced accuracy of the estimate,
``50 (N_A/N1 + N_B/N0)`` in percent (Hamman et al., Definition 1; 50% is a coin flip) - and the
number of people whose attribute the estimate has right, how many it guesses confidently right
and wrong, how much of the disadvantaged group it exposes at a 1% false-positive rate
(:func:`tpr_at_fpr`) and how well the attacker's own probabilities are calibrated
(:func:`calibration`). The estimate itself goes to the run's side file.

The run's summary, rebuilt from these events and the rest of the log, is
:func:`biasleak.sim.summary.summarize`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.strategies import Estimate

__all__ = ["Evaluator", "calibration", "leakage", "tpr_at_fpr"]


CONFIDENT = 0.5
"""A guess counts as confident when its margin is at least half the decision threshold."""


def tpr_at_fpr(estimate: Estimate, truth: NDArray[np.integer], *, fpr: float = 0.01) -> float:
    """Share of the disadvantaged group found when at most ``fpr`` of the others are accused.

    People are ranked by how confidently the estimate puts them in group 0 (``+confidence`` for a
    guess of 0, ``-confidence`` for a guess of 1); the top of the ranking is accused, down to the
    largest cut whose false-positive rate stays at or below ``fpr``. Ties are accused together.
    """
    a0 = np.asarray(truth) == 0
    score = np.where(np.asarray(estimate.attribute) == 0, 1.0, -1.0) * np.asarray(
        estimate.confidence, dtype=np.float64
    )
    order = np.argsort(-score, kind="stable")
    sorted_scores = score[order]
    tp = np.cumsum(a0[order])
    fp = np.cumsum(~a0[order])
    last_of_tie = np.append(sorted_scores[1:] != sorted_scores[:-1], True)
    ok = last_of_tie & (fp <= fpr * max(int((~a0).sum()), 1))
    if not ok.any():
        return 0.0
    return float(tp[ok].max() / max(int(a0.sum()), 1))


def leakage(estimate: NDArray[np.integer], truth: NDArray[np.integer]) -> tuple[float, int]:
    """Balanced accuracy of ``estimate`` in percent (Definition 1) and the number right."""
    est = np.asarray(estimate) == 1
    a = np.asarray(truth) == 1
    right = est == a
    n1, n0 = int(a.sum()), int((~a).sum())
    n_a = int(np.count_nonzero(right & a))
    n_b = int(np.count_nonzero(right & ~a))
    return 50.0 * (n_a / n1 + n_b / n0), n_a + n_b


CALIBRATION_LEVEL = 0.9
"""Calibration is read among the people an attacker gives at least this probability."""


def calibration(
    estimate: Estimate, truth: NDArray[np.integer], *, level: float = CALIBRATION_LEVEL
) -> tuple[float | None, int | None]:
    """Share guessed right among the people the attacker gives probability >= ``level``.

    Returns ``(share, people)``: ``(None, None)`` when the estimate carries no probability, and
    ``(None, 0)`` when nobody reaches ``level``. A calibrated attacker's share is at least
    ``level``; a smaller share means it trusts its guesses more than they deserve.
    """
    probability = getattr(estimate, "probability", None)
    if probability is None:
        return None, None
    sure = np.asarray(probability, dtype=np.float64) >= level
    people = int(np.count_nonzero(sure))
    if people == 0:
        return None, 0
    right = np.asarray(estimate.attribute)[sure] == np.asarray(truth)[sure]
    return float(np.count_nonzero(right) / people), people


class Evaluator:
    """Scores developers' estimates against the protected attribute."""

    def __init__(self, protected: NDArray[np.integer], log: Any, keep: Any = None) -> None:
        self._truth = np.asarray(protected, dtype=np.int8)
        self.log = log
        self._keep = keep  # callable(key, array) that stores arrays in the side file
        self._versions: dict[str, int] = defaultdict(int)

    def __call__(self, developer: str, estimate: Estimate) -> None:
        """Score one estimate and log it (the developers' ``on_estimate`` callback)."""
        self._versions[developer] += 1
        version = self._versions[developer]
        value, right = leakage(estimate.attribute, self._truth)
        confident = np.asarray(estimate.confidence) >= CONFIDENT
        correct = np.asarray(estimate.attribute) == self._truth
        calibrated, calibrated_people = calibration(estimate, self._truth)
        self.log.info(
            "evaluation",
            developer=developer,
            version=version,
            leakage=value,
            leakage_relabelled=max(value, 100.0 - value),
            revealed=right,
            confident_right=int(np.count_nonzero(confident & correct)),
            confident_wrong=int(np.count_nonzero(confident & ~correct)),
            tpr_at_1pct_fpr=tpr_at_fpr(estimate, self._truth),
            models_used=estimate.models_used,
            calibration_090=calibrated,
            calibration_090_people=calibrated_people,
        )
        if self._keep is not None:  # the side file keeps each developer's latest estimate
            self._keep(f"estimate/{developer}", estimate.attribute.astype(np.int8))
            self._keep(f"confidence/{developer}", estimate.confidence)
            probability = getattr(estimate, "probability", None)
            if probability is not None:
                self._keep(f"probability/{developer}", np.asarray(probability, np.float64))
