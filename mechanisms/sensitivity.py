r"""Sensitivities of fairness queries: how much one person's protected attribute can move an answer.

Neighbouring rule (used for every statement in this module): two audit sets
``S = (X, Y, A)`` and ``S' = (X, Y, A')`` are neighbours when ``A`` and ``A'`` differ in exactly
ONE person's protected attribute; X and Y are shared (Hamman, Chen and Dutta 2023, section 4).
The universe of data sets is every attribute vector in which both groups are non-empty (the
metrics are undefined otherwise), so a data set whose smaller group has one member has only the
neighbours obtained by moving someone from the larger group. We require ``n >= 3`` so that every
data set has a neighbour.

Sensitivities are worst cases over the m submitted models ``h_1, ..., h_m`` with values in [0, 1]
(hard decisions included), measured in the l1 norm over the m answers unless ``norm="l2"``. Since
the models can all be the worst one, the l1 sensitivity of m answers is ``m`` times that of one
answer and the l2 sensitivity is ``sqrt(m)`` times it.

Local sensitivity of one SP answer (Lemma 5 of the paper, re-derived here). Moving a person from
a group of size p >= 2 to a group of size q changes SP by at most ``1/(q + 1) + 1/p``; the bound is
attained by a model that accepts everyone except the moved person. With ``N0 <= N1``:

.. math:: LS_{SP}(S) = m\left(\frac{1}{N_1 + 1} + \frac{1}{N_0}\right)  \quad (N_0 \ge 2),

and ``LS = m(1/2 + 1/(n - 1))`` when ``N0 = 1`` (only the larger group can give someone away).
The global sensitivity (Theorem 3 of section 4.1) is the largest of these,
``Delta_SP = m/2 + m/(n - 1)``, reached at ``N0 in {1, 2}``.

Absolute SP: corrections to the paper. For ``|SP|`` the paper gives ``Delta_|SP| = m/2``
(Theorem 4) and a local sensitivity ``m/N0`` (appendix D.4). Both are too small. Moving a person
from a group of size p to a group of size q can change ``|SP|`` by ``(p + q)/(p (q + 1))``, which
is attained when the model makes SP exactly 0 before the move; example: n = 5, N0 = 2, a model that
accepts the three people of group 1 and 3/4 of one person of group 0 has SP = 0.625, and after
moving the other (rejected) person of group 0 to group 1, SP' = 0, so ``| |SP| - |SP'| | = 0.625``
> 1/N0 = 1/2. With ``p + q = n`` and the identity ``1/(p (q+1)) = (1/p + 1/(q+1)) / (n+1)``,

.. math:: LS_{|SP|}(S) = \frac{n}{n+1} LS_{SP}(S), \qquad
          \Delta_{|SP|} = \frac{m n}{2(n-1)} = \frac{m}{2} + \frac{m}{2(n-1)} .

So ``|SP|`` gets the SP bounds scaled by ``n/(n+1)``, not the paper's. Binary models reach it too
(n = 5, N0 = 2: accept one person of group 1 and the unmoved person of group 0 gives 7/12 > 1/2).
The paper's formulas stay available as :func:`paper_global_sensitivity` and
:func:`paper_smooth_sensitivity` for reproducing its tables; the mechanisms never use them.

Equal opportunity: EO is SP restricted to the people with ``y = 1``; people with ``y = 0`` cannot
move it. Every formula above applies with ``n`` replaced by the number of people with ``y = 1``
and ``(N1, N0)`` by ``(N11, N10)``, their group sizes.

Smooth sensitivity (Nissim, Raskhodnikova and Smith 2007; Definition 9 of the paper):

.. math:: S_\beta(S) = \max_{\bar S} LS(\bar S)\, e^{-\beta\, d(S, \bar S)} .

Local sensitivity depends only on the group sizes, and the nearest data set whose group 1 has size
g is ``|g - N1|`` moves away, so the exact value is ``max over g in [1, n-1] of
LS(g, n - g) exp(-beta |g - N1|)``: an O(n) vector computation (:func:`smooth_sensitivity_exact`).
For SP with ``N0 >= 2`` it equals the paper's Theorem 6 closed form
``max(m/(N1+1) + m/N0, e^{-(N0-2) beta} (m/(n-1) + m/2))``. At ``N0 = 1`` the closed form's first
term, ``m + m/n``, is about twice the true value and the bound stops being beta-smooth across the
N0 = 1 / N0 = 2 step (it needs ``e^beta >= ~2``); it is also not an upper bound of anything real,
because the only person of group 0 cannot be moved. :func:`smooth_sensitivity` therefore uses the
closed form with the first term capped at the global sensitivity (which makes it exactly the true
smooth sensitivity for every ``N0 >= 1``), and the ``|SP|`` version scaled by ``n/(n+1)``.
"""

from __future__ import annotations

import math
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from biasleak.mechanisms.metrics import NOISY_METRICS

__all__ = [
    "SENSITIVITY_METRICS",
    "attribute_conceal_beta",
    "global_sensitivity",
    "local_sensitivity",
    "local_sensitivity_at_distance",
    "paper_global_sensitivity",
    "paper_smooth_sensitivity",
    "smooth_laplace_beta",
    "smooth_sensitivity",
    "smooth_sensitivity_exact",
]

SensitivityMetric = Literal["sp", "abs_sp", "eo", "abs_eo"]
Norm = Literal["l1", "l2"]

SENSITIVITY_METRICS: Final[tuple[str, ...]] = NOISY_METRICS
"""Metrics whose sensitivities this module knows (the metric registry's ``noisy`` ones:
:data:`~biasleak.mechanisms.metrics.METRIC_INFO`). EO variants use the counts among y = 1."""

SMALL_DATASET: Final = (
    "{name} must be at least 3 (the number of people whose attribute the metric depends on; for "
    "eo/abs_eo, people with y = 1) so that every data set has a neighbour; received {value}"
)
GROUP_SIZES: Final = (
    "n1 and n0 must both be >= 1 (each group non-empty) with n1 + n0 >= 3; received n1={n1}, "
    "n0={n0}"
)


def _is_abs(metric: str) -> bool:
    return metric.startswith("abs_")


def _scale(m: int, norm: str) -> float:
    return float(m) if norm == "l1" else math.sqrt(m)


def _check_sizes(n1: object, n0: object) -> tuple[int, int]:
    a = check_int(n1, name="n1", minimum=1)
    b = check_int(n0, name="n0", minimum=1)
    if a + b < 3:
        raise ValueError(GROUP_SIZES.format(n1=n1, n0=n0))
    return a, b


def _ls_one(n1: NDArray | int, n0: NDArray | int, n: int, absolute: bool) -> NDArray[np.float64]:
    """Per-model local sensitivity at group sizes (n1, n0), vectorised over arrays of sizes."""
    small = np.minimum(n1, n0).astype(np.float64)
    large = np.maximum(n1, n0).astype(np.float64)
    # Moving someone out of the smaller group needs it to keep a member (small >= 2); otherwise
    # the worst move is out of the larger group, which equals the small = 2 case.
    ls = np.where(small >= 2, 1.0 / (large + 1.0) + 1.0 / small, 0.5 + 1.0 / (n - 1.0))
    return ls * (n / (n + 1.0)) if absolute else ls


def global_sensitivity(
    metric: SensitivityMetric | str, *, n: int, m: int = 1, norm: Norm = "l1"
) -> float:
    r"""Global sensitivity of m fairness answers (Hamman et al., section 4.1, corrected for |SP|).

    .. math:: \Delta_{SP} = \Delta_{EO} = \frac{m}{2} + \frac{m}{n-1}, \qquad
              \Delta_{|SP|} = \Delta_{|EO|} = \frac{m n}{2 (n-1)}

    Parameters
    ----------
    metric : {"sp", "abs_sp", "eo", "abs_eo"}
    n : int
        Number of people the metric depends on: the audit set size for SP, the number of people
        with y = 1 for EO. At least 3.
    m : int
        Number of models answered together.
    norm : {"l1", "l2"}
        l1 (Laplace mechanism) or l2 (Gaussian mechanism): ``m`` resp. ``sqrt(m)`` times the
        sensitivity of one answer.

    Notes
    -----
    Neighbours differ in one person's protected attribute. The paper's ``m/2`` for ``|SP|`` is
    too small (see the module docstring); :func:`paper_global_sensitivity` keeps it.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    n_ = check_int(n, name="n", minimum=1)
    if n_ < 3:
        raise ValueError(SMALL_DATASET.format(name="n", value=n))
    m_ = check_int(m, name="m", minimum=1)
    check_choice(norm, ("l1", "l2"), name="norm")
    one = 0.5 + 1.0 / (n_ - 1)
    if _is_abs(name):
        one *= n_ / (n_ + 1.0)
    return _scale(m_, norm) * one


def paper_global_sensitivity(metric: SensitivityMetric | str, *, n: int, m: int = 1) -> float:
    """The paper's global sensitivities as printed (Theorems 3 and 4): m/2 + m/(n-1), or m/2.

    For reproducing the paper only: ``m/2`` for ``|SP|`` is below the true global sensitivity
    ``m n / (2(n - 1))``, so a Laplace mechanism calibrated to it is not quite eps-DP.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    n_ = check_int(n, name="n", minimum=3)
    m_ = check_int(m, name="m", minimum=1)
    return m_ / 2.0 if _is_abs(name) else m_ / 2.0 + m_ / (n_ - 1.0)


def local_sensitivity(
    metric: SensitivityMetric | str, *, n1: int, n0: int, m: int = 1, norm: Norm = "l1"
) -> float:
    """Local sensitivity at a data set with group sizes (n1, n0) (Lemma 5, corrected for |SP|).

    ``m (1/(N1 + 1) + 1/N0)`` for SP with ``N0 <= N1`` and ``N0 >= 2``; ``m (1/2 + 1/(n-1))`` when
    the smaller group has a single member; ``n/(n+1)`` times that for ``|SP|``. For EO pass the
    group sizes among people with y = 1. Not differentially private to release as a noise scale.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    a, b = _check_sizes(n1, n0)
    m_ = check_int(m, name="m", minimum=1)
    check_choice(norm, ("l1", "l2"), name="norm")
    return _scale(m_, norm) * float(_ls_one(np.int64(a), np.int64(b), a + b, _is_abs(name)))


def local_sensitivity_at_distance(
    metric: SensitivityMetric | str, *, n1: int, n0: int, m: int = 1, k: int
) -> float:
    """The largest local sensitivity over data sets exactly ``k`` moves away (Lemma 5, part 2).

    Data sets k moves away have group-1 sizes ``n1 - k, n1 - k + 2, ..., n1 + k`` (within
    [1, n-1]); the result is the largest local sensitivity among them, or 0.0 when no data set of
    the universe is exactly k moves away.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    a, b = _check_sizes(n1, n0)
    m_ = check_int(m, name="m", minimum=1)
    k_ = check_int(k, name="k", minimum=0)
    n = a + b
    g = np.arange(a - k_, a + k_ + 1, 2)
    # Moving j people out of group 1 and k - j into it needs j <= n1 and k - j <= n0.
    moved_out = (a - g + k_) // 2
    ok = (g >= 1) & (g <= n - 1) & (moved_out <= a) & (k_ - moved_out <= b)
    if not ok.any():
        return 0.0
    return m_ * float(_ls_one(g[ok], n - g[ok], n, _is_abs(name)).max())


def smooth_sensitivity_exact(
    metric: SensitivityMetric | str, *, n1: int, n0: int, m: int = 1, beta: float
) -> float:
    r"""Exact beta-smooth sensitivity (Nissim et al. 2007, Definition 3.1):

    .. math:: S_\beta = \max_{g=1}^{n-1} LS(g, n - g)\, e^{-\beta |g - N_1|}

    which equals the maximum over distances k of ``exp(-k beta)`` times
    :func:`local_sensitivity_at_distance`. O(n) time.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    a, b = _check_sizes(n1, n0)
    m_ = check_int(m, name="m", minimum=1)
    beta_ = check_positive(beta, name="beta", allow_zero=True)
    n = a + b
    g = np.arange(1, n, dtype=np.int64)
    ls = _ls_one(g, n - g, n, _is_abs(name))
    return m_ * float(np.max(ls * np.exp(-beta_ * np.abs(g - a))))


def smooth_sensitivity(
    metric: SensitivityMetric | str, *, n1: int, n0: int, m: int = 1, beta: float
) -> float:
    r"""The beta-smooth sensitivity bound the mechanisms use (closed form, valid for N0 >= 1).

    With ``N0 = min(n1, n0)``, ``N1 = max(n1, n0)`` and ``Delta`` the global sensitivity:

    .. math:: S_\beta(SP) = \max\Big(\min\big(\tfrac{m}{N_1+1} + \tfrac{m}{N_0}, \Delta_{SP}\big),
              \; e^{-\max(N_0 - 2, 0)\beta}\, \Delta_{SP}\Big)

    which is the paper's Theorem 6 form with the first term capped at the global sensitivity so
    that a smaller group of one member is handled (see the module docstring), and
    ``S_beta(|SP|) = n/(n+1) S_beta(SP)``. Both equal :func:`smooth_sensitivity_exact`, which the
    tests check on every group split of small data sets, and a brute force over attribute vectors
    confirms they bound the true local sensitivity and are beta-smooth.

    Use ``beta = eps / (6 m)`` for Attribute-Conceal (Theorem 6) and :func:`smooth_laplace_beta`
    for the (eps, delta) Laplace variant (Theorem 7). For EO pass ``n1=N11, n0=N10``.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    a, b = _check_sizes(n1, n0)
    m_ = check_int(m, name="m", minimum=1)
    beta_ = check_positive(beta, name="beta", allow_zero=True)
    n = a + b
    small, large = min(a, b), max(a, b)
    gs = m_ * (0.5 + 1.0 / (n - 1))
    first = min(m_ / (large + 1.0) + m_ / small, gs)
    value = max(first, math.exp(-max(small - 2, 0) * beta_) * gs)
    return value * (n / (n + 1.0)) if _is_abs(name) else value


def paper_smooth_sensitivity(
    metric: SensitivityMetric | str, *, n1: int, n0: int, m: int = 1, beta: float
) -> float:
    """The paper's closed forms as printed: Theorem 6/7 for SP, appendix D.4 for |SP|.

    For reproducing the paper only. The SP form is wrong at N0 = 1 (too large and not
    beta-smooth); the |SP| form, ``max(m/N0, m e^{-(N0-2) beta}/2)``, is below the true smooth
    sensitivity, so noise calibrated to it is not enough for eps-DP.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    a, b = _check_sizes(n1, n0)
    m_ = check_int(m, name="m", minimum=1)
    beta_ = check_positive(beta, name="beta", allow_zero=True)
    n = a + b
    small, large = min(a, b), max(a, b)
    decay = math.exp(-(small - 2) * beta_)
    if _is_abs(name):
        return max(m_ / small, m_ * decay / 2.0)
    return max(m_ / (large + 1.0) + m_ / small, decay * (m_ / (n - 1.0) + m_ / 2.0))


def attribute_conceal_beta(epsilon: float, m: int) -> float:
    """Smoothing parameter of Attribute-Conceal (Theorem 6): ``beta = eps / (6 m)``.

    From Nissim et al. (2007), Lemma 2.7 with gamma = 2: the m-dimensional standard Cauchy
    product is (eps/6, eps/(6 m))-admissible, so noise ``6 S_beta / eps * Z`` gives eps-DP.
    """
    eps = check_epsilon(epsilon, allow_inf=False)
    return eps / (6.0 * check_int(m, name="m", minimum=1))


def smooth_laplace_beta(epsilon: float, delta: float, m: int) -> float:
    r"""Smoothing parameter for smooth sensitivity with Laplace noise of scale ``2 S / eps``.

    The m-dimensional Laplace density is (alpha, beta)-admissible with ``alpha = eps/2`` when
    (i) ``m beta <= eps/2`` and (ii) ``(e^beta - 1) rho <= eps/2``, where ``rho`` is the
    ``1 - delta/2`` quantile of ``||Z||_1 ~ Gamma(m, 1)``. We return the largest beta meeting
    both:

    .. math:: \beta = \min\big(\ln(1 + \varepsilon / (2\rho)),\ \varepsilon / (2m)\big).

    The complete argument. The release is ``M(S) = f(S) + (S_beta(S) / alpha) Z`` with Z of
    density ``p(z) ∝ exp(-||z||_1)``. Let S, S' be neighbours, ``d = f(S') - f(S)`` and
    ``S_beta(S') = e^lambda S_beta(S)``; then ``||d||_1 <= LS(S') <= S_beta(S')`` and
    ``|lambda| <= beta`` (beta-smoothness).

    1. Dilation (delta/2). Write ``e^lambda Z`` for the dilated noise. Its density at z is
       ``e^{-m lambda} p(e^{-lambda} z)``, so the log ratio ``ln p(z) - ln(density of e^lambda Z
       at z) = m lambda + (e^{-lambda} - 1)||z||_1``. For ``lambda >= 0`` it is at most
       ``m beta <= eps/2`` by (i); for ``lambda < 0`` it is at most ``(e^beta - 1)||z||_1``,
       which is ``<= eps/2`` by (ii) on ``G = {||z||_1 <= rho}``, and ``P[Z not in G] = delta/2``.
       Hence for every set A: ``P[Z in A] <= e^{eps/2} P[e^lambda Z in A] + delta/2``.
    2. Sliding (pure). For ``||d'||_1 <= alpha`` the Laplace density ratio
       ``p(z) / p(z - d') <= e^{||d'||_1} <= e^{eps/2}``, so
       ``P[Z in A] <= e^{eps/2} P[Z + d' in A]`` with no delta.

    Chaining, for an output set U, apply dilation FIRST with ``A = alpha (U - f(S)) / S_beta(S)``:
    ``P[M(S) in U] <= e^{eps/2} P[f(S) + (S_beta(S') / alpha) Z in U] + delta/2``; then slide by
    ``d`` measured in units of the new scale (``||d||_1 alpha / S_beta(S') <= alpha``):
    ``P[f(S) + (S_beta(S')/alpha) Z in U] <= e^{eps/2} P[M(S') in U]``. Together
    ``P[M(S) in U] <= e^{eps} P[M(S') in U] + delta/2``: (eps, delta)-DP with delta/2 to spare.
    The order matters: sliding first and dilating second gives
    ``e^{eps/2} (e^{eps/2} P[M(S') in U] + delta/2)``, whose additive term ``e^{eps/2} delta/2``
    exceeds delta once ``eps > 2 ln 2``; the dilation-first chain above has no such condition,
    so the calibration holds for every eps > 0 (Nissim, Raskhodnikova and Smith 2007, Lemma 2.5,
    where the delta of dilation enters once and unscaled).

    The paper's Theorem 7 (after Nissim et al., Lemma 2.9) uses the simpler
    ``beta = eps / (4 (m + ln(2/delta)))``, stated for eps < 1; ours is valid for every eps > 0
    and, for eps < 1, is at least as large (less noise) because ``rho < 2 (m + ln(2/delta))``.
    """
    eps = check_epsilon(epsilon, allow_inf=False)
    d = check_delta(delta)
    m_ = check_int(m, name="m", minimum=1)
    from scipy import stats  # scipy.stats loads when first needed

    rho = float(stats.gamma.isf(d / 2.0, m_))
    return min(math.log1p(eps / (2.0 * rho)), eps / (2.0 * m_))
