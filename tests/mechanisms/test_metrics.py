"""Fairness metrics against hand calculations, their properties, and bad input."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biasleak.mechanisms import metrics
from biasleak.mechanisms._validation import (
    EMPTY_GROUP,
    LENGTH_MISMATCH,
    NOT_BINARY,
    PREDICTIONS_NDIM,
    PREDICTIONS_NOT_FINITE,
    PREDICTIONS_RANGE,
)

A = np.array([1, 1, 1, 0, 0])
Y = np.array([1, 0, 1, 1, 0])


def test_sp_hand_calculation() -> None:
    h = np.array([1.0, 0.5, 0.0, 0.25, 1.0])
    # mean over a=1: 1.5/3 = 0.5; over a=0: 1.25/2 = 0.625
    assert metrics.statistical_parity(h, protected=A) == pytest.approx(0.5 - 0.625)
    assert metrics.absolute_statistical_parity(h, protected=A) == pytest.approx(0.125)


def test_eo_uses_only_positive_labels() -> None:
    h = np.array([1.0, 0.5, 0.0, 0.25, 1.0])
    # y=1 people: 0 (a=1, h=1), 2 (a=1, h=0), 3 (a=0, h=0.25)
    assert metrics.equal_opportunity(h, protected=A, labels=Y) == pytest.approx(0.5 - 0.25)
    h2 = h.copy()
    h2[[1, 4]] = [0.0, 0.0]  # people with y = 0 do not move EO
    assert metrics.equal_opportunity(h2, protected=A, labels=Y) == pytest.approx(0.25)
    assert metrics.absolute_equal_opportunity(1 - h, protected=A, labels=Y) == pytest.approx(0.25)


def test_equalized_odds_and_fpr() -> None:
    h = np.array([1.0, 0.5, 0.0, 0.25, 1.0])
    eo = metrics.equalized_odds(h, protected=A, labels=Y)
    assert eo.tpr_gap == pytest.approx(0.25)
    # y=0 people: 1 (a=1, h=0.5), 4 (a=0, h=1.0)
    assert eo.fpr_gap == pytest.approx(-0.5)
    assert metrics.false_positive_rate_gap(h, protected=A, labels=Y) == pytest.approx(-0.5)
    stacked = metrics.evaluate("eodds", np.stack([h, h]), protected=A, labels=Y)
    assert stacked.shape == (2, 2)
    np.testing.assert_allclose(stacked[1], [0.25, -0.5])


def test_predictive_parity() -> None:
    h = np.array([1, 1, 0, 1, 1], dtype=float)
    # group 1 accepted: people 0 (y=1), 1 (y=0) -> PPV 0.5; group 0 accepted: 3 (y=1), 4 (y=0)
    assert metrics.predictive_parity(h, protected=A, labels=Y) == pytest.approx(0.0)
    h2 = np.array([1, 0, 0, 0, 0], dtype=float)  # group 0 accepts nobody: undefined
    assert math.isnan(metrics.predictive_parity(h2, protected=A, labels=Y))


def test_batch_matches_rows() -> None:
    rng = np.random.default_rng(1)
    h = rng.uniform(size=(7, 5))
    batch = metrics.statistical_parity(h, protected=A)
    assert batch.shape == (7,)
    for i in range(7):
        assert batch[i] == pytest.approx(metrics.statistical_parity(h[i], protected=A))


def test_binary_models_accepted() -> None:
    h = np.array([True, False, False, False, False])
    assert metrics.statistical_parity(h, protected=A) == pytest.approx(1 / 3)
    assert metrics.statistical_parity(h.astype(int), protected=A) == pytest.approx(1 / 3)


@settings(max_examples=60, deadline=None)
@given(
    n1=st.integers(1, 30),
    n0=st.integers(1, 30),
    j=st.integers(0, 59),
    seed=st.integers(0, 2**32 - 1),
)
def test_single_person_model_reveals_attribute(n1: int, n0: int, j: int, seed: int) -> None:
    """Example 1 of the paper: a model accepting only person j answers 1/N1 or -1/N0."""
    rng = np.random.default_rng(seed)
    a = rng.permutation(np.array([1] * n1 + [0] * n0))
    j = j % (n1 + n0)
    h = np.zeros(n1 + n0)
    h[j] = 1.0
    expected = 1 / n1 if a[j] == 1 else -1 / n0
    assert metrics.statistical_parity(h, protected=a) == pytest.approx(expected, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), m=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_metrics_invariant_to_permuting_people(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = np.zeros(n, dtype=int)
    a[rng.choice(n, size=rng.integers(1, n), replace=False)] = 1
    y = rng.integers(0, 2, size=n)
    y[np.flatnonzero(a)[0]] = 1
    y[np.flatnonzero(a == 0)[0]] = 1
    h = rng.uniform(size=(m, n))
    perm = rng.permutation(n)
    for name in ("sp", "abs_sp", "eo", "abs_eo"):
        before = metrics.evaluate(name, h, protected=a, labels=y)
        after = metrics.evaluate(name, h[:, perm], protected=a[perm], labels=y[perm])
        np.testing.assert_allclose(before, after, rtol=1e-10, atol=1e-14)


def _msg(template: str) -> str:
    """The fixed words before the first placeholder of an error template."""
    return re.escape(template.split("{")[1].split("}")[1].split("{")[0].strip())


@pytest.mark.parametrize(
    ("predictions", "protected", "template"),
    [
        (np.array([0.1, np.nan, 0.2, 0.3, 0.4]), A, PREDICTIONS_NOT_FINITE),
        (np.array([0.1, np.inf, 0.2, 0.3, 0.4]), A, PREDICTIONS_NOT_FINITE),
        (np.array([0.1, 1.5, 0.2, 0.3, 0.4]), A, PREDICTIONS_RANGE),
        (np.array([-0.1, 0.5, 0.2, 0.3, 0.4]), A, PREDICTIONS_RANGE),
        (np.zeros((2, 2, 5)), A, PREDICTIONS_NDIM),
        (np.zeros(0), np.zeros(0), PREDICTIONS_NDIM),
        (np.zeros(4), A, LENGTH_MISMATCH),
        (np.zeros(5), np.array([1, 2, 0, 0, 1]), NOT_BINARY),
        (np.zeros(5), np.ones(5), EMPTY_GROUP),
        (np.zeros(5), np.zeros(5), EMPTY_GROUP),
    ],
)
def test_bad_input_is_refused_with_a_reason(predictions, protected, template) -> None:
    with pytest.raises(ValueError, match=_msg(template)):
        metrics.statistical_parity(predictions, protected=protected)


def test_error_messages_name_argument_and_value() -> None:
    with pytest.raises(ValueError, match=r"predictions must lie in \[0, 1\].*1\.5.*index 1"):
        metrics.statistical_parity(np.array([0.1, 1.5, 0.2, 0.3, 0.4]), protected=A)
    with pytest.raises(ValueError, match=r"protected must contain only 0 and 1.*\[2\]"):
        metrics.statistical_parity(np.zeros(5), protected=np.array([1, 2, 0, 0, 1]))
    with pytest.raises(ValueError, match=r"labels must have one entry per person, n = 5"):
        metrics.equal_opportunity(np.zeros(5), protected=A, labels=np.ones(3))
    with pytest.raises(ValueError, match=r"among labels == 1\) must contain both groups"):
        metrics.equal_opportunity(np.zeros(5), protected=A, labels=np.array([1, 1, 1, 0, 0]))
    with pytest.raises(ValueError, match=r"metric must be one of .* \(did you mean 'abs_sp'\?\)"):
        metrics.evaluate("abs_spp", np.zeros(5), protected=A)
    with pytest.raises(ValueError, match="needs labels"):
        metrics.evaluate("eo", np.zeros(5), protected=A)


def test_group_sizes() -> None:
    assert metrics.group_sizes(A) == (3, 2)
