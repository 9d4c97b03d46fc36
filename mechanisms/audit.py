r"""Private audit releases: group counts, rates and their difference, as audit reports state them.

This module follows the tutorial "Differential Privacy for Fairness Audits". Unlike the rest of
:mod:`biasleak.mechanisms`, its releases use the **add/remove-one-record** neighbouring rule: two
data sets are neighbours when one has one more person's record than the other. Under that rule a
vector of group counts (each person counted in at most one cell, by one) has L1 sensitivity 1, and
the Laplace mechanism with scale ``b = Delta_1 / eps`` is eps-DP.

What an audit needs, in order:

1. an :class:`AuditPlan` that states the protected unit, the neighbouring rule, the query, its
   sensitivity, the budget and whether group denominators are public;
2. a private release of the counts (:func:`release_counts`), either as one vector release (the
   whole budget, scale ``1/eps`` for every cell) or as separate releases under basic composition
   (:func:`separate_release_scales`);
3. rates and their difference computed from the released counts and public denominators
   (:func:`rates`, :func:`rate_difference`): post-processing, no further budget. With private
   denominators (:func:`release_counts_and_totals`) the totals are released too, and a person
   moves both their group's total and possibly its count, so the L1 sensitivity of that vector is 2;
4. the spread of the privacy noise in the difference, ``Var = 2 b^2 (1/n_A^2 + 1/n_B^2)``
   (:func:`rate_difference_noise_variance`), and single-noise tail thresholds
   ``P(|Z| > t) = e^{-t/b}``, ``t = b ln(1/p)`` (:func:`laplace_tail_threshold`). The difference
   of two Laplace variables is not Laplace, so the tail threshold describes one noise term, not
   the difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms._validation import (
    check_choice,
    check_epsilon,
    check_positive,
)
from biasleak.mechanisms.accounting import basic_composition

__all__ = [
    "NEIGHBOURING_RULES",
    "AuditPlan",
    "CountRelease",
    "laplace_scale",
    "laplace_tail_probability",
    "laplace_tail_threshold",
    "rate_difference",
    "rate_difference_noise_sd",
    "rate_difference_noise_variance",
    "rates",
    "release_counts",
    "release_counts_and_totals",
    "separate_release_scales",
]

NeighbouringRule = Literal["add_remove", "change_protected_attribute", "replace_one"]
NEIGHBOURING_RULES: Final[tuple[str, ...]] = (
    "add_remove",
    "change_protected_attribute",
    "replace_one",
)
"""Neighbouring rules an audit plan may state."""

COUNTS_INVALID: Final = "{name} must be finite numbers >= 0 (counts of people); received {values!r}"
DENOMINATORS_INVALID: Final = (
    "denominators must be public group sizes > 0, one per count; received {values!r} for "
    "{k} count(s)"
)


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Laplace scale ``b = Delta_1 / eps`` (in the units of the query)."""
    return check_positive(sensitivity, name="sensitivity") / check_epsilon(epsilon, allow_inf=False)


def laplace_tail_probability(scale: float, t: float) -> float:
    """``P(|Z| > t) = exp(-t / b)`` for one ``Z ~ Laplace(0, b)``."""
    b = check_positive(scale, name="scale")
    return math.exp(-check_positive(t, name="t", allow_zero=True) / b)


def laplace_tail_threshold(scale: float, p: float) -> float:
    """The ``t`` with ``P(|Z| > t) = p`` for one Laplace noise term: ``t = b ln(1/p)``."""
    b = check_positive(scale, name="scale")
    if isinstance(p, bool) or not (isinstance(p, int | float | np.floating) and 0.0 < p < 1.0):
        raise ValueError(f"p must lie in (0, 1); received {p!r}")
    return b * math.log(1.0 / p)


def rate_difference_noise_variance(scale: float, n_a: float, n_b: float) -> float:
    r"""Variance of the privacy noise in ``Z_A/n_A - Z_B/n_B`` with public denominators.

    .. math:: \operatorname{Var} = 2 b^2 \left(\frac{1}{n_A^2} + \frac{1}{n_B^2}\right)

    Privacy noise only: it says nothing about sampling uncertainty.
    """
    b = check_positive(scale, name="scale")
    na = check_positive(n_a, name="n_a")
    nb = check_positive(n_b, name="n_b")
    return 2.0 * b * b * (1.0 / (na * na) + 1.0 / (nb * nb))


def rate_difference_noise_sd(scale: float, n_a: float, n_b: float) -> float:
    """Standard deviation of the privacy noise in a rate difference (square root of the above)."""
    return math.sqrt(rate_difference_noise_variance(scale, n_a, n_b))


def _counts(values: ArrayLike, name: str) -> NDArray[np.float64]:
    try:
        arr = np.array(values, dtype=np.float64, ndmin=1)
    except (TypeError, ValueError):
        raise ValueError(COUNTS_INVALID.format(name=name, values=values)) from None
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(COUNTS_INVALID.format(name=name, values=values))
    return arr


def rates(counts: ArrayLike, denominators: ArrayLike) -> NDArray[np.float64]:
    """Group rates ``count / n`` from (released) counts and public group sizes.

    ``counts`` may be noisy (fractional, even negative); denominators must be > 0.
    """
    c = np.array(counts, dtype=np.float64, ndmin=1)
    if not np.all(np.isfinite(c)):
        raise ValueError(
            f"counts must be finite (released counts may be negative or fractional); received "
            f"{counts!r}"
        )
    d = np.array(denominators, dtype=np.float64, ndmin=1)
    if d.shape != c.shape or not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise ValueError(DENOMINATORS_INVALID.format(values=denominators, k=c.size))
    return c / d


def rate_difference(counts: ArrayLike, denominators: ArrayLike) -> float:
    """Group A's rate minus group B's rate, from two counts and two public denominators."""
    r = rates(counts, denominators)
    if r.size != 2:
        raise ValueError(f"rate_difference needs exactly two groups; received {r.size}")
    return float(r[0] - r[1])


@dataclass(frozen=True)
class CountRelease:
    """A private release of group counts (add/remove-one-record adjacency)."""

    counts: NDArray[np.float64]
    """The released (noisy) counts."""
    scale: float
    """The Laplace scale b used in every cell (public: it depends only on eps and Delta_1)."""
    epsilon: float
    """Privacy loss of the release."""
    sensitivity: float
    """L1 sensitivity of the released vector."""


def release_counts(
    counts: ArrayLike,
    *,
    epsilon: float,
    rng: np.random.Generator,
    sensitivity: float = 1.0,
) -> CountRelease:
    """Release a vector of counts with Laplace noise ``b = sensitivity / eps`` in each cell.

    One vector release spends ``epsilon`` once: under add/remove adjacency one person changes one
    cell by one, so a histogram of group counts has L1 sensitivity 1 however many cells it has.
    """
    c = _counts(counts, "counts")
    b = laplace_scale(sensitivity, epsilon)
    noisy = c + rng.laplace(0.0, b, size=c.shape)
    return CountRelease(noisy, b, float(epsilon), float(sensitivity))


def release_counts_and_totals(
    counts: ArrayLike,
    totals: ArrayLike,
    *,
    epsilon: float,
    rng: np.random.Generator,
) -> tuple[CountRelease, NDArray[np.float64]]:
    """Release counts AND private group sizes in one vector; return it and the implied rates.

    Adding or removing one person changes their group's total by one and possibly their group's
    count by one, so the vector (counts, totals) has L1 sensitivity 2: scale ``2 / eps``. The
    rates divide two noisy numbers and are unstable for small groups (a noisy total near zero);
    report them with that caveat.
    """
    c = _counts(counts, "counts")
    t = _counts(totals, "totals")
    if c.shape != t.shape:
        raise ValueError(f"totals must have one entry per count ({c.size}); received {t.size}")
    rel = release_counts(np.concatenate([c, t]), epsilon=epsilon, rng=rng, sensitivity=2.0)
    k = c.size
    with np.errstate(divide="ignore", invalid="ignore"):
        implied = rel.counts[:k] / rel.counts[k:]
    return rel, implied


def separate_release_scales(
    epsilons: Sequence[float], *, sensitivity: float = 1.0
) -> tuple[float, list[float]]:
    """Separate releases under basic composition: ``(total eps, [scale of each release])``.

    Compare with one vector release at the total eps, whose scale is ``sensitivity / total``
    in every cell (:func:`laplace_scale`).
    """
    eps = [check_epsilon(e, allow_inf=False) for e in epsilons]
    total, _ = basic_composition(eps)
    return total, [laplace_scale(sensitivity, e) for e in eps]


@dataclass(frozen=True)
class AuditPlan:
    """What an audit report must state before any private release (tutorial, last section)."""

    protected_unit: str
    """Whose privacy is protected, e.g. "one applicant's record"."""
    neighbouring_rule: str
    """One of :data:`NEIGHBOURING_RULES`."""
    query: str
    """The statistic released, e.g. "false-negative counts by group"."""
    sensitivity: float
    """L1 sensitivity of the query under the neighbouring rule."""
    epsilon: float
    """Privacy budget of the release."""
    denominators_public: bool
    """Whether group sizes are public (else they must be privatised too)."""
    delta: float = 0.0
    """Failure probability (0 for pure eps-DP)."""

    def __post_init__(self) -> None:
        check_choice(self.neighbouring_rule, NEIGHBOURING_RULES, name="neighbouring_rule")
        check_positive(self.sensitivity, name="sensitivity")
        check_epsilon(self.epsilon, allow_inf=False)
        for name in ("protected_unit", "query"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"{name} must be a non-empty description")

    @property
    def scale(self) -> float:
        """The Laplace scale ``b = Delta_1 / eps`` the plan implies."""
        return laplace_scale(self.sensitivity, self.epsilon)

    def describe(self) -> str:
        """The plan as the paragraph an audit report should carry."""
        rule = self.neighbouring_rule.replace(
            "_", "/" if self.neighbouring_rule == "add_remove" else " "
        )
        denominators = (
            "Group sizes are public and are not privatised."
            if self.denominators_public
            else "Group sizes are confidential and are released privately as well."
        )
        guarantee = (
            f"{self.epsilon:g}-differential privacy"
            if self.delta == 0
            else f"({self.epsilon:g}, {self.delta:g})-differential privacy"
        )
        return (
            f"Protected unit: {self.protected_unit}. Neighbouring rule: {rule}. "
            f"Query: {self.query}, L1 sensitivity {self.sensitivity:g}. "
            f"Budget: {guarantee}, Laplace scale b = {self.scale:g}. {denominators} "
            "Differential privacy bounds the influence of one record under this rule; it does not "
            "show that the model is fair."
        )
