"""Scoring functions of the evaluator against hand calculations."""

from __future__ import annotations

import numpy as np
import pytest

from biasleak.agents.strategies import Estimate
from biasleak.sim.evaluation import leakage, tpr_at_fpr

TRUTH = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 1])


def test_leakage_is_balanced_accuracy() -> None:
    # right: both of group 0 and 6 of the 8 of group 1 -> 50 (2/2 + 6/8) = 87.5
    guess = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    assert leakage(guess, TRUTH) == (pytest.approx(87.5), 8)
    assert leakage(np.ones(10), TRUTH)[0] == pytest.approx(50.0)  # a constant guess
    assert leakage(1 - TRUTH, TRUTH)[0] == pytest.approx(0.0)


def test_tpr_at_low_fpr() -> None:
    perfect = Estimate(TRUTH.astype(np.int8), np.ones(10))
    assert tpr_at_fpr(perfect, TRUTH) == 1.0
    assert tpr_at_fpr(Estimate(np.ones(10, np.int8), np.zeros(10)), TRUTH) == 0.0
    # person 0 (a = 0) most confidently accused, then person 2 (a = 1): with no false positive
    # allowed (1% of 8 people), only person 0 is accused -> TPR 1/2
    guess = np.array([0, 1, 0, 1, 1, 1, 1, 1, 1, 1], np.int8)
    confidence = np.array([2.0, 0.1, 1, 1, 1, 1, 1, 1, 1, 1])
    assert tpr_at_fpr(Estimate(guess, confidence), TRUTH) == 0.5
    # allowing one false positive in 8 (12.5%): persons 0, 2 (the false one) and then person 1
    # (guessed 1 with the least confidence, score -0.1) are accused -> both of group 0 found
    assert tpr_at_fpr(Estimate(guess, confidence), TRUTH, fpr=0.125) == 1.0
    # ties are accused together: equal confidence for a true and a false accusation
    tied = Estimate(np.array([0, 1, 0, 1, 1, 1, 1, 1, 1, 1], np.int8), np.ones(10))
    assert tpr_at_fpr(tied, TRUTH) == 0.0
    assert tpr_at_fpr(tied, TRUTH, fpr=0.125) == 0.5
