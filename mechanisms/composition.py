r"""Composition theorems: how the privacy losses of several releases add up.

A data set answered k times by mechanisms that are (eps_i, delta_i)-DP is, as a whole,
(eps, delta)-DP for several valid pairs; each theorem below gives one, and a ledger
(:mod:`~biasleak.mechanisms.accounting`) may use whichever is smallest.

:func:`basic_composition`
    ``(sum eps_i, sum delta_i)``. Exact: each eps is read as the shortest decimal that round-trips
    the float (``0.1`` is 1/10, :func:`exact_decimal`) and summed in rational arithmetic, so 100
    charges of 0.1 are exactly 10 - never below, and a budget of 10 holds exactly 100 of them.
:func:`drv_composition`
    Dwork, Rothblum and Vadhan (2010), for heterogeneous charges:
    ``eps = sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^{eps_i} - 1)`` with
    ``delta = sum delta_i + delta'``.
:func:`kov_composition`
    Kairouz, Oh and Viswanath (2015, KOV), the closed-form heterogeneous bound of their
    Theorem 3.5.
:func:`kov_optimal_homogeneous`
    KOV Theorem 3.3: the exact optimal composition of k copies of one (eps, delta) mechanism.

``delta'`` (``slack``) is the part of the delta budget the advanced theorems may spend on
themselves.

Rounding always errs on the safe side. Exact sums are turned into floats with
:func:`round_up` (never below the exact value; :func:`round_down` for what remains), and bounds
computed with transcendental functions are raised by a few units in the last place
(:func:`pad_up`). :func:`float_above` gives a float strictly above the decimal a float stands
for, which the ledger's fast path uses to keep running upper bounds.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Final

import numpy as np
from scipy import special

from biasleak.mechanisms._validation import check_delta, check_epsilon, check_int

__all__ = [
    "basic_composition",
    "drv_composition",
    "exact_decimal",
    "float_above",
    "kov_composition",
    "kov_optimal_homogeneous",
    "pad_up",
    "round_down",
    "round_up",
]


@functools.lru_cache(maxsize=4096)
def _exact_cached(x: float) -> Fraction:
    return Fraction(repr(x))


def exact_decimal(x: float) -> Fraction:
    """The shortest decimal that round-trips ``x``, as an exact fraction (0.1 -> 1/10)."""
    return _exact_cached(float(x))


_FLOAT_MAX: Final = Fraction(sys.float_info.max)


def round_up(x: Fraction) -> float:
    """The float that stands for ``x`` (its repr is read back as a decimal), never below it.

    ``3/10`` becomes ``0.3``, whose repr is the decimal 0.3; a sum with no short decimal form is
    rounded up to the next float. Sums beyond the float range become ``inf``.
    """
    if x > _FLOAT_MAX:
        return math.inf
    f = float(x)
    if exact_decimal(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def round_down(x: Fraction) -> float:
    """Like :func:`round_up`, never above ``x``."""
    if x > _FLOAT_MAX:
        return math.inf
    f = float(x)
    if exact_decimal(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def float_above(x: float) -> float:
    """A float strictly above the decimal that ``x`` stands for (``x`` finite and >= 0).

    The shortest round-tripping decimal of a float lies within half a unit in the last place of
    it, so the next float up is above it.
    """
    return math.nextafter(x, math.inf)


def pad_up(x: float) -> float:
    """Round a float computed with transcendental functions up by a few units in the last place."""
    if x == 0.0 or not math.isfinite(x):
        return x
    return x + abs(x) * 1e-12


def basic_composition(
    epsilons: Sequence[float], deltas: Sequence[float] = ()
) -> tuple[float, float]:
    """Basic composition: ``(sum eps_i, sum delta_i)``, summed exactly and rounded up."""
    eps = sum((exact_decimal(e) for e in epsilons), Fraction(0))
    dlt = sum((exact_decimal(d) for d in deltas), Fraction(0))
    return round_up(eps), round_up(dlt)


def drv_composition(
    epsilons: Sequence[float], deltas: Sequence[float] = (), *, slack: float
) -> tuple[float, float]:
    r"""Advanced composition (Dwork, Rothblum and Vadhan 2010; Dwork and Roth, Thm 3.20).

    For adaptive composition of (eps_i, delta_i)-DP mechanisms and any ``delta' > 0``:

    .. math:: \varepsilon = \sqrt{2 \ln(1/\delta') \textstyle\sum_i \varepsilon_i^2}
              + \textstyle\sum_i \varepsilon_i (e^{\varepsilon_i} - 1),
              \qquad \delta = \textstyle\sum_i \delta_i + \delta' .
    """
    s = check_delta(slack, name="slack")
    e = np.asarray(epsilons, dtype=np.float64)
    sq = math.fsum((e * e).tolist())
    with np.errstate(over="ignore"):
        lin = math.fsum((e * np.expm1(e)).tolist())
    eps = math.sqrt(2.0 * math.log(1.0 / s) * sq) + lin
    return pad_up(eps), round_up(sum((exact_decimal(d) for d in deltas), exact_decimal(s)))


def kov_composition(
    epsilons: Sequence[float], deltas: Sequence[float] = (), *, slack: float
) -> tuple[float, float]:
    r"""Kairouz, Oh and Viswanath (2015), Theorem 3.5 (heterogeneous, closed form).

    .. math:: \varepsilon = \min\Big\{\sum \varepsilon_i,\;
        F + \sqrt{2 \sum\varepsilon_i^2 \ln\big(e + \sqrt{\sum\varepsilon_i^2}/\tilde\delta\big)},\;
        F + \sqrt{2 \sum\varepsilon_i^2 \ln(1/\tilde\delta)}\Big\}, \quad
        F = \sum \frac{(e^{\varepsilon_i} - 1)\varepsilon_i}{e^{\varepsilon_i} + 1}

    with ``delta = 1 - (1 - delta~) prod (1 - delta_i)``.
    """
    s = check_delta(slack, name="slack")
    e = np.asarray(epsilons, dtype=np.float64)
    sq = math.fsum((e * e).tolist())
    first = math.fsum((e * np.tanh(e / 2.0)).tolist())  # (e^x - 1)/(e^x + 1) = tanh(x/2)
    bounds = [
        math.fsum(e.tolist()),
        first + math.sqrt(2.0 * sq * math.log(math.e + math.sqrt(sq) / s)),
        first + math.sqrt(2.0 * sq * math.log(1.0 / s)),
    ]
    d = np.asarray(deltas, dtype=np.float64)
    if not np.any(d):
        return pad_up(min(bounds)), s  # 1 - (1 - s) * 1 is s exactly
    total_delta = -math.expm1(math.log1p(-s) + float(np.sum(np.log1p(-d))))
    return pad_up(min(bounds)), pad_up(total_delta)


def kov_optimal_homogeneous(
    epsilon: float, delta: float, k: int, *, delta_budget: float
) -> tuple[float, float]:
    r"""Exact optimal k-fold composition of one (eps, delta) mechanism (KOV 2015, Theorem 3.3).

    For ``i = 0, ..., floor(k/2)`` the composition is
    ``((k - 2i) eps, 1 - (1 - delta)^k (1 - delta_i))``-DP with

    .. math:: \delta_i = \frac{\sum_{l=0}^{i-1} \binom{k}{l}
              \big(e^{(k-l)\varepsilon} - e^{(k-2i+l)\varepsilon}\big)}{(1 + e^\varepsilon)^k}.

    Returns the smallest such eps whose total delta is at most ``delta_budget`` (computed in log
    space), or ``(k eps, 1 - (1 - delta)^k)`` (i = 0) when no other i fits.
    """
    eps = check_epsilon(epsilon, allow_inf=False)
    d = check_delta(delta, allow_zero=True)
    k_ = check_int(k, name="k", minimum=1)
    budget = check_delta(delta_budget, name="delta_budget", allow_zero=True)
    log_norm = k_ * float(np.logaddexp(0.0, eps))
    log_keep = k_ * math.log1p(-d)

    def total_delta(i: int) -> float:
        if i == 0:
            return -math.expm1(log_keep)
        l_ = np.arange(i, dtype=np.float64)
        log_binom = special.gammaln(k_ + 1) - special.gammaln(l_ + 1) - special.gammaln(k_ - l_ + 1)
        # e^{(k-l)eps} - e^{(k-2i+l)eps} = e^{(k-l)eps} (1 - e^{-2(i-l)eps})
        log_terms = log_binom + (k_ - l_) * eps + np.log(-np.expm1(-2.0 * (i - l_) * eps))
        delta_i = math.exp(float(special.logsumexp(log_terms)) - log_norm)
        if delta_i >= 1.0:  # rounding at a huge eps: nothing is bounded at this i
            return 1.0
        return -math.expm1(log_keep + math.log1p(-delta_i))

    lo, hi = 0, k_ // 2  # total_delta increases with i: find the largest i within budget
    if total_delta(0) > budget:
        return pad_up(k_ * eps), pad_up(total_delta(0))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if total_delta(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return pad_up((k_ - 2 * lo) * eps), pad_up(total_delta(lo))
