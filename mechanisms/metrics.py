"""Group fairness metrics: the queries a model developer sends to the compliance team.

A developer submits the outputs of a model on the audit set, ``h(X)`` (a vector of n numbers in
[0, 1]: hard 0/1 decisions or acceptance probabilities), or a batch of m such vectors as an (m, n)
matrix, and asks for a group fairness metric that needs the protected attribute ``a`` (1 for the
advantaged group, 0 for the disadvantaged one), which only the compliance team holds.

Every metric here is a *linear* function of the predictions once ``a`` (and the labels) are fixed:
it is ``H @ w`` for a weight vector ``w`` that depends only on ``a`` and ``y``. That is what makes
them fast (one matrix-vector product for a whole batch) and also what makes them leak: ``w``
encodes every person's attribute, and a developer who chooses ``H`` well can solve for it (Hamman,
Chen and Dutta, FAccT 2023, Theorem 3).

Metrics (Hamman et al., section 2.1 and Remark 5):

- statistical parity gap, eq. (1): ``SP = mean(h | a=1) - mean(h | a=0)``;
- equal opportunity gap, eq. (2): ``EO = mean(h | y=1, a=1) - mean(h | y=1, a=0)``;
- their absolute values ``|SP|`` and ``|EO|``;
- equalized odds: the true-positive-rate gap (= EO) and the false-positive-rate gap
  ``mean(h | y=0, a=1) - mean(h | y=0, a=0)``;
- predictive parity gap: ``P(y=1 | h, a=1) - P(y=1 | h, a=0)``, the difference in positive
  predictive value, with probabilistic predictions read as acceptance weights. It is NaN for a
  model that accepts nobody (zero total weight) in a group, where it is undefined.

All functions take the sensitive inputs as keyword-only arguments and return a float for a single
model (shape (n,)) or an array of shape (m,) for a batch (shape (m, n)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms._validation import (
    EMPTY_GROUP,
    as_binary,
    as_predictions,
    check_choice,
)

__all__ = [
    "METRICS",
    "METRIC_INFO",
    "METRIC_RANGES",
    "NOISY_METRICS",
    "ON_POSITIVES",
    "EqualizedOdds",
    "MetricInfo",
    "absolute_equal_opportunity",
    "absolute_statistical_parity",
    "equal_opportunity",
    "equalized_odds",
    "evaluate",
    "false_positive_rate_gap",
    "group_sizes",
    "predictive_parity",
    "statistical_parity",
    "statistical_parity_weights",
]

Values = float | NDArray[np.float64]


def group_sizes(protected: ArrayLike) -> tuple[int, int]:
    """Return ``(N1, N0)``: the sizes of the advantaged (a = 1) and disadvantaged (a = 0) groups."""
    a = as_binary(protected, name="protected", require_both=False)
    n1 = int(np.count_nonzero(a))
    return n1, int(a.shape[0]) - n1


def _prepare(
    predictions: ArrayLike, protected: ArrayLike, labels: ArrayLike | None = None
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_] | None]:
    h = as_predictions(predictions)
    n = h.shape[-1]
    a = as_binary(protected, n=n, name="protected", require_both=labels is None)
    y = None if labels is None else as_binary(labels, n=n, name="labels", require_both=False)
    return h, a, y


def _group_weights(a: NDArray[np.bool_], mask: NDArray[np.bool_] | None, where: str) -> NDArray:
    """Weights w with ``h @ w = mean(h | a=1, mask) - mean(h | a=0, mask)``."""
    in1 = a if mask is None else a & mask
    in0 = ~a if mask is None else ~a & mask
    n1, n0 = int(np.count_nonzero(in1)), int(np.count_nonzero(in0))
    for size, group in ((n1, 1), (n0, 0)):
        if size == 0:
            raise ValueError(EMPTY_GROUP.format(name=f"protected{where}", group=group))
    w = np.zeros(a.shape[0], dtype=np.float64)
    w[in1] = 1.0 / n1
    w[in0] = -1.0 / n0
    return w


def _apply(h: NDArray[np.float64], w: NDArray[np.float64]) -> Values:
    out = h @ w
    return float(out) if h.ndim == 1 else np.asarray(out, dtype=np.float64)


def statistical_parity_weights(protected: ArrayLike) -> NDArray[np.float64]:
    """The vector ``v`` with ``SP = H v``: ``1/N1`` where a = 1, ``-1/N0`` where a = 0.

    This is the unknown of the paper's linear system (eq. 4); an attacker who recovers it knows
    every person's attribute.
    """
    a = as_binary(protected, name="protected")
    return _group_weights(a, None, "")


def statistical_parity(predictions: ArrayLike, *, protected: ArrayLike) -> Values:
    r"""Statistical parity gap (Hamman et al., eq. 1).

    .. math:: SP_i = \frac{1}{N_1}\sum_{j: a_j = 1} h_i(x_j)
                   - \frac{1}{N_0}\sum_{j: a_j = 0} h_i(x_j)

    Parameters
    ----------
    predictions : array of shape (n,) or (m, n), values in [0, 1]
        One model's outputs on the n people of the audit set, or m models' outputs.
    protected : array of shape (n,), values in {0, 1}
        The protected attribute (1 = advantaged group). Both groups must be non-empty.

    Returns
    -------
    float for a single model, ndarray of shape (m,) for a batch. Positive values favour the
    advantaged group.
    """
    h, a, _ = _prepare(predictions, protected)
    return _apply(h, _group_weights(a, None, ""))


def absolute_statistical_parity(predictions: ArrayLike, *, protected: ArrayLike) -> Values:
    """Absolute statistical parity gap ``|SP|`` (Hamman et al., section 3.3)."""
    return np.abs(statistical_parity(predictions, protected=protected))


def equal_opportunity(predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike) -> Values:
    r"""Equal opportunity gap (Hamman et al., eq. 2): the true-positive-rate gap.

    .. math:: EO_i = \frac{1}{N_{11}}\sum_{j: y_j=1, a_j=1} h_i(x_j)
                   - \frac{1}{N_{10}}\sum_{j: y_j=1, a_j=0} h_i(x_j)

    Only people with ``labels == 1`` enter it, so it reveals nothing about the others (Remark 5).
    Both groups must be non-empty among people with y = 1.
    """
    h, a, y = _prepare(predictions, protected, labels)
    assert y is not None
    return _apply(h, _group_weights(a, y, " (among labels == 1)"))


def absolute_equal_opportunity(
    predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike
) -> Values:
    """Absolute equal opportunity gap ``|EO|``."""
    return np.abs(equal_opportunity(predictions, protected=protected, labels=labels))


def false_positive_rate_gap(
    predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike
) -> Values:
    """False-positive-rate gap ``mean(h | y=0, a=1) - mean(h | y=0, a=0)``."""
    h, a, y = _prepare(predictions, protected, labels)
    assert y is not None
    return _apply(h, _group_weights(a, ~y, " (among labels == 0)"))


class EqualizedOdds(NamedTuple):
    """The two gaps whose joint vanishing is equalized odds (Hardt et al. 2016)."""

    tpr_gap: Values
    """True-positive-rate gap, identical to the equal opportunity gap."""
    fpr_gap: Values
    """False-positive-rate gap."""


def equalized_odds(
    predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike
) -> EqualizedOdds:
    """Equalized odds as its two gaps (TPR gap, FPR gap); both label classes need both groups."""
    h, a, y = _prepare(predictions, protected, labels)
    assert y is not None
    w = np.stack(
        [
            _group_weights(a, y, " (among labels == 1)"),
            _group_weights(a, ~y, " (among labels == 0)"),
        ],
        axis=1,
    )
    out = h @ w
    if h.ndim == 1:
        return EqualizedOdds(float(out[0]), float(out[1]))
    return EqualizedOdds(np.ascontiguousarray(out[:, 0]), np.ascontiguousarray(out[:, 1]))


def predictive_parity(predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike) -> Values:
    r"""Predictive parity gap: the difference in positive predictive value between groups.

    .. math:: PP_i = \frac{\sum_{a_j=1} h_i(x_j) y_j}{\sum_{a_j=1} h_i(x_j)}
                   - \frac{\sum_{a_j=0} h_i(x_j) y_j}{\sum_{a_j=0} h_i(x_j)}

    For hard decisions this is ``P(y=1 | h=1, a=1) - P(y=1 | h=1, a=0)``. It is undefined (NaN)
    for a model that gives zero total weight to one group.
    """
    h, a, y = _prepare(predictions, protected, labels)
    assert y is not None
    af = a.astype(np.float64)
    yf = y.astype(np.float64)
    w = np.stack([af * yf, af, (1.0 - af) * yf, 1.0 - af], axis=1)
    s = h @ w  # (..., 4): accepted positives and accepted mass, per group
    with np.errstate(invalid="ignore", divide="ignore"):
        ppv1 = np.where(s[..., 1] > 0, s[..., 0] / np.where(s[..., 1] > 0, s[..., 1], 1), np.nan)
        ppv0 = np.where(s[..., 3] > 0, s[..., 2] / np.where(s[..., 3] > 0, s[..., 3], 1), np.nan)
    out = ppv1 - ppv0
    return float(out) if h.ndim == 1 else np.asarray(out, dtype=np.float64)


def _eodds_stacked(predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike) -> Values:
    """Equalized odds: the true-positive-rate gap and the false-positive-rate gap between the
    groups, as the last axis (shape (2,) per model)."""
    tpr, fpr = equalized_odds(predictions, protected=protected, labels=labels)
    return np.stack([np.asarray(tpr), np.asarray(fpr)], axis=-1)


@dataclass(frozen=True)
class MetricInfo:
    """What biasleak knows about one metric: how to evaluate it and where its values lie."""

    function: Callable[..., Values]
    """Evaluates a model or a batch (keyword-only ``protected``, and ``labels`` if needed)."""
    needs_labels: bool
    """Whether the metric needs the true outcomes y."""
    value_range: tuple[float, float]
    """The range every value lies in (used to bound noisy answers, Remark 6)."""
    on_positives: bool = False
    """Whether the metric is computed among the people with y = 1 only (its group sizes are
    N11 and N10; the people with y = 0 do not move it)."""
    noisy: bool = False
    """Whether biasleak knows its sensitivities, so that a policy may answer it with noise
    (:mod:`biasleak.mechanisms.sensitivity`)."""


METRIC_INFO: Final[dict[str, MetricInfo]] = {
    "sp": MetricInfo(statistical_parity, False, (-1.0, 1.0), noisy=True),
    "abs_sp": MetricInfo(absolute_statistical_parity, False, (0.0, 1.0), noisy=True),
    "eo": MetricInfo(equal_opportunity, True, (-1.0, 1.0), on_positives=True, noisy=True),
    "abs_eo": MetricInfo(
        absolute_equal_opportunity, True, (0.0, 1.0), on_positives=True, noisy=True
    ),
    "eodds": MetricInfo(_eodds_stacked, True, (-1.0, 1.0)),
    "pp": MetricInfo(predictive_parity, True, (-1.0, 1.0)),
}
"""The metric registry: name -> function, label need and range. Every list of metrics in biasleak
(scenario schema, policies, sensitivities' checks) derives from it."""

METRICS: Final[tuple[str, ...]] = tuple(METRIC_INFO)
"""Metric names understood by :func:`evaluate` (and by scenario files)."""

NOISY_METRICS: Final[tuple[str, ...]] = tuple(k for k, v in METRIC_INFO.items() if v.noisy)
"""Metrics a policy may answer with noise (those with sensitivities); what a compliance team
answers unless its scenario says otherwise."""

ON_POSITIVES: Final = frozenset(k for k, v in METRIC_INFO.items() if v.on_positives)
"""Metrics computed among the people with y = 1 (group sizes N11, N10)."""

METRIC_RANGES: Final[dict[str, tuple[float, float]]] = {
    name: info.value_range for name, info in METRIC_INFO.items()
}
"""The range every value of each metric lies in (used to bound noisy answers, Remark 6)."""

LABELS_REQUIRED: Final = "metric {metric!r} needs labels (the true outcomes y in {{0, 1}})"


def evaluate(
    metric: str,
    predictions: ArrayLike,
    *,
    protected: ArrayLike,
    labels: ArrayLike | None = None,
) -> Values:
    """Evaluate a metric by name (one of :data:`METRICS`).

    Returns what the named function returns, except ``"eodds"``, which stacks the TPR and FPR
    gaps on a trailing axis: shape (2,) for one model, (m, 2) for a batch.
    """
    name = check_choice(metric, METRICS, name="metric")
    info = METRIC_INFO[name]
    func = info.function
    if info.needs_labels:
        if labels is None:
            raise ValueError(LABELS_REQUIRED.format(metric=name))
        return func(predictions, protected=protected, labels=labels)
    return func(predictions, protected=protected)
