r"""Floating-point-safe noise: grid releases and exactly sampled noise.

Why the obvious code is not private
-----------------------------------
The textbook Laplace mechanism returns ``v + Lap(b)``. Written as ``v + rng.laplace(0, b)`` in IEEE
doubles it is not the textbook mechanism: the noise is a double produced by a formula from a
53-bit uniform, so it takes only some values, and the sum ``v + noise`` is rounded again. Mironov
("On significance of the least significant bits for differential privacy", CCS 2012) showed that
the sets of doubles reachable from two neighbouring true values differ: many outputs can come from
``v`` but not from ``v'``. Such a mechanism is "porous"; a single answer that lands in such a hole
reveals which data set it came from, whatever epsilon is. For a fairness query the two candidates
of a one-person probe are ``SP = 1/N1`` and ``SP = -1/N0``, so one answer can reveal one person's
group.

The cure used here (``sampler="safe"``) has two parts.

1. **Grid release.** Every output is an integer times a grid step ``gamma``, a power of two, so
   every output is an exactly representable double and the set of possible outputs is the same for
   every data set. The step is chosen from PUBLIC quantities only (n, m, epsilon, delta, the metric;
   never the group sizes N0 and N1, on which the smooth-sensitivity scales depend): it is the
   largest power of two not above ``2^-20`` times a public lower bound of the noise scale (and, for
   the global-sensitivity mechanisms, of the per-answer sensitivity), see :func:`choose_grid`. A
   rounding error of at most ``gamma/2 <= 2^-21`` of the noise scale leaves utility unchanged in
   practice.

2. **Exact noise.** Noise is drawn so that the distribution of the released grid value is exactly
   the one the privacy proof talks about, by one of two routes.

   *Discrete noise for data-independent scales* (``laplace``, ``gaussian``). The exact value is
   rounded to the grid, ``k = round(v / gamma)``, and integer noise is added. Rounding is
   deterministic, so the relevant sensitivity is that of ``k``: for one coordinate
   ``|round(a) - round(b)|`` is an integer below ``|a - b| + 1``, so ``|k_i - k'_i| <=
   ceil(|v_i - v'_i| / gamma)``. Summed over the m answers, the l1 sensitivity in grid units is at
   most ``Delta / gamma + m`` and the l2 sensitivity at most ``Delta_2 / gamma + sqrt(m)``
   (Minkowski). The small float error of the computed metric (at most ``2 n 2^-53`` per answer for
   a weighted sum of n terms with weights summing to 2 in absolute value) is added to both.

   - Discrete Laplace with ``P(z) ∝ exp(-eps |z| / K)`` is eps-DP for integer queries of l1
     sensitivity K, exactly (the ratio of probabilities of any output under shifts by at most K is
     at most ``e^eps``). The scale ``K / eps`` is represented as a rational ``t/s`` that is rounded
     UP (never down), and the sample is drawn with Canonne, Kamath and Steinke ("The Discrete
     Gaussian for Differential Privacy", NeurIPS 2020; CKS below), Algorithm 1 (Bernoulli with
     probability ``exp(-x)`` by the alternating-series loop) and Algorithm 2 (discrete Laplace from
     a uniform integer and a geometric count), using only integer arithmetic and
     ``Generator.integers``. The loops are vectorised over the m answers with masks.
   - The discrete Gaussian ``N_Z(0, sigma^2)`` (CKS Algorithm 3) is drawn with ``sigma^2`` rounded
     UP to a rational with denominator 1024; the acceptance test is a Bernoulli of
     ``exp(-(|y| - sigma^2/t)^2 / (2 sigma^2))`` evaluated on exact Python integers, so nothing can
     overflow (large exponents are split into their integer part, handled by repeated
     ``exp(-1)`` trials, and a fraction below one). Calibration: CKS Theorem 14 shows that the
     m-dimensional discrete Gaussian with independent coordinates is ``rho``-zCDP with
     ``rho = K_2^2 / (2 sigma^2)`` for integer queries of l2 sensitivity ``K_2``; CKS Corollary 13
     (from Asoodeh et al. 2020) converts rho-zCDP to (eps, delta)-DP with ``delta =
     inf_{alpha > 1} exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) (1 - 1/alpha)^alpha``.
     :func:`discrete_gaussian_sigma` finds the smallest sigma meeting the target delta (with a
     relative margin of ``1e-9``) by bisection and caches it; the bound is evaluated at a
     numerically optimised ``alpha``, and any ``alpha`` gives a valid upper bound, so a suboptimal
     ``alpha`` costs utility, never privacy. The price against the continuous analytic Gaussian is a
     sigma a few percent to about 20 % larger.

   *Continuous noise, exactly rounded, for data-dependent scales* (``attribute_conceal``: Cauchy of
   scale ``6 S_beta / eps``; ``smooth_laplace``: Laplace of scale ``2 S_beta / eps``). The
   smooth-sensitivity proofs (Nissim, Raskhodnikova and Smith, STOC 2007) need the noise law to be
   "admissible" under both sliding and dilation; a lattice-valued noise cannot be dilated by a
   non-integer factor, so the discrete trick does not apply. Instead the release is
   ``round_gamma(v + scale * Z)`` with Z drawn from the CONTINUOUS law and the rounding computed
   EXACTLY. The output is then a deterministic function (post-processing) of the continuous
   mechanism and keeps its eps-DP at no extra cost. Implementation (:func:`rounded_continuous`):
   a 53-bit uniform ``u = k 2^-53`` stands for a true uniform in ``[u, u + 2^-53)``; the quantile
   function Q is increasing, so ``Q(U)`` lies between ``Q(u)`` and ``Q(u + 2^-53)``. Both ends are
   evaluated in floats in well-conditioned forms (Cauchy: ``-1/tan(pi u)`` for ``u <= 1/4``,
   ``-tan(pi (1/2 - u))`` on ``[1/4, 1/2]``, mirrored above 1/2 through ``1 - u``; Laplace:
   ``log(2u)`` below 1/2 and ``-log(2 (1 - u))`` above, where ``2u`` and ``1 - u`` are exact),
   widened by a relative ``1e-12`` (the true float error is a few ulps, ``~1e-15``) and, after
   ``v + scale * Q``, by an absolute ``2^-50 (|v| + |scale Q|)`` plus the smallest subnormal. If
   both ends round to the same grid point, that point is certified to be ``round_gamma`` of the true
   real number. Otherwise (rare: under 1 % of draws, mostly in the far Cauchy tails, where the
   relative widening is wider than a grid step) more random bits are appended to u and the
   interval is recomputed with arbitrary-precision interval arithmetic (``mpmath.iv``) until it
   is certified. Ties (a true value exactly halfway between grid points)
   have probability zero.

   The proofs are about the doubles actually used: the released value is
   ``round_gamma(v_hat + s_hat Z)`` where ``v_hat`` is the computed metric and ``s_hat`` the
   computed scale, both deterministic functions of the data set, and Z is the exact continuous
   draw. Sliding needs ``s_hat`` to cover the change of ``v_hat`` between neighbours, and dilation
   needs ``s_hat(S) <= e^beta s_hat(S')``. :func:`safe_smooth_sensitivity` therefore
   (i) evaluates the smooth sensitivity at ``beta' = beta - 1e-12 (1 + n beta)``, which absorbs the
   relative float error of its closed form (at most ``(20 + 2 n beta) 2^-53`` in logarithm), so the
   computed values are beta-smooth; (ii) inflates it by a relative ``1e-9`` to cover its own
   rounding; and (iii) adds the data-independent ``4 m n 2^-53``, the largest change the float
   error of the metric can add. Multiplying by a constant and adding a constant both keep
   beta-smoothness.

Output bounding with the safe samplers. ``clamp`` clamps the grid value; the range ends are grid
points (powers of two times integers), so this is post-processing. ``truncate`` (conditioning on
the range, calibrated to eps/2 by :mod:`~biasleak.mechanisms.release`) is exact for the discrete
Laplace: :func:`truncated_discrete_laplace` draws from the discrete Laplace conditioned on the
range by rejection, from the discrete Laplace itself when the range is wide against the scale and
from a uniform on the range points otherwise, so every try succeeds with probability at least
``(1 - e^{-1/2}) / 2 > 0.19`` (proof in its docstring); a value outside the range is moved to the
nearest end first, which leaves the conditioned law unchanged. It is refused for the
Cauchy (``attribute_conceal``) safe path: there the range can hold arbitrarily little of the
continuous mass and an exact conditioned sampler through certified inverse CDFs is not implemented.

Where the parts live. This module holds the three safe release paths that put the parts together
(:func:`safe_laplace`, :func:`safe_gaussian`, :func:`safe_continuous`, called by
:mod:`~biasleak.mechanisms.calibrate` and the named mechanisms of
:mod:`~biasleak.mechanisms.release`); the parts live in their own modules, and are imported from
there: the grid step and rounding (:mod:`~biasleak.mechanisms.grid`), the exact discrete
samplers (:mod:`~biasleak.mechanisms.discrete_noise`), the exactly rounded continuous noise
(:mod:`~biasleak.mechanisms.rounded_noise`) and the discrete Gaussian's calibration
(:mod:`~biasleak.mechanisms.gaussian_sigma`).

References
----------
- I. Mironov. On significance of the least significant bits for differential privacy. CCS 2012.
- C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential privacy. NeurIPS 2020.
- K. Nissim, S. Raskhodnikova, A. Smith. Smooth sensitivity and sampling in private data
  analysis. STOC 2007.
- S. Asoodeh, J. Liao, F. Calmon, O. Kosut, L. Sankar. A better bound gives a hundred rounds.
  2020 (the zCDP-to-approximate-DP conversion used by CKS Corollary 13).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms.discrete_noise import (
    discrete_gaussian,
    discrete_laplace,
    truncated_discrete_laplace,
)
from biasleak.mechanisms.gaussian_sigma import (
    analytic_gaussian_sigma,
    discrete_gaussian_sigma,
)
from biasleak.mechanisms.grid import (
    choose_grid,
    grid_ints,
)
from biasleak.mechanisms.rounded_noise import (
    rounded_continuous,
)

__all__ = [
    "SIGMA2_DENOMINATOR",
    "safe_continuous",
    "safe_gaussian",
    "safe_laplace",
]

SIGMA2_DENOMINATOR: Final = 1024
"""Denominator of the rational that ``sigma^2`` (in grid units) is rounded up to."""


def safe_laplace(
    v: NDArray[np.float64],
    *,
    sensitivity: float,
    float_error: float,
    epsilon: float,
    rng: np.random.Generator,
    bounding: str,
    low: float,
    high: float,
) -> tuple[NDArray[np.float64], float, float]:
    """Grid release with discrete Laplace noise; returns (values, scale, grid)."""
    m = v.size
    # Fine against the per-answer sensitivity (rounding adds m grid units of sensitivity), but
    # never finer than 2^-30 of the scale, so the scale in grid units stays far below 2^62 even
    # for absurdly small epsilon (where the extra units are irrelevant next to the noise).
    gamma = choose_grid(sensitivity / epsilon, max(sensitivity / m, sensitivity / epsilon * 2**-30))
    # l1 sensitivity of the rounded answers in grid units (module docstring): Delta/gamma + m,
    # plus the float error of the exact values; the relative 1e-12 covers the float evaluation.
    k_float = ((sensitivity + float_error) / gamma + m) * (1.0 + 1e-12)
    k_units = math.ceil(k_float)
    t = math.ceil(Fraction(k_units) / Fraction(epsilon))  # scale t/1 >= K/eps, rounded up
    if t >= 2**62:
        raise ValueError(
            f"discrete Laplace scale {t} grid units is beyond 2^62; epsilon = {epsilon!r} is too "
            "small for an exact release"
        )
    k = grid_ints(v, gamma)
    if bounding == "truncate":
        lo_k, hi_k = math.ceil(low / gamma), math.floor(high / gamma)
        out_k = truncated_discrete_laplace(k, lo_k, hi_k, t, 1, rng)
    else:
        out_k = k + discrete_laplace(t, 1, k.shape, rng)
    out = out_k.astype(np.float64) * gamma
    if bounding == "clamp":
        out = np.clip(out, low, high)
    return out, t * gamma, gamma


def safe_gaussian(
    v: NDArray[np.float64],
    *,
    l2_sensitivity: float,
    float_error: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    bounding: str,
    low: float,
    high: float,
) -> tuple[NDArray[np.float64], float, float]:
    """Grid release with discrete Gaussian noise; returns (values, sigma, grid)."""
    m = v.size
    root_m = math.sqrt(m)
    public_sigma = analytic_gaussian_sigma(
        l2_sensitivity=l2_sensitivity, epsilon=epsilon, delta=delta
    )
    gamma = choose_grid(public_sigma, max(l2_sensitivity / root_m, public_sigma * 2**-30))
    # l2 sensitivity of the rounded answers in grid units: Delta_2/gamma + sqrt(m) (Minkowski).
    k2 = ((l2_sensitivity + float_error) / gamma + root_m) * (1.0 + 1e-12)
    sigma_units = discrete_gaussian_sigma(k2, epsilon, delta)
    sigma2 = Fraction(
        math.ceil(Fraction(sigma_units) ** 2 * SIGMA2_DENOMINATOR), SIGMA2_DENOMINATOR
    )
    k = grid_ints(v, gamma)
    out = (k + discrete_gaussian(sigma2, k.shape, rng)).astype(np.float64) * gamma
    if bounding == "clamp":
        out = np.clip(out, low, high)
    return out, math.sqrt(sigma2) * gamma, gamma


def safe_continuous(
    v: NDArray[np.float64],
    *,
    scale: float,
    public_scale: float,
    family: Literal["laplace", "cauchy"],
    rng: np.random.Generator,
    bounding: str,
    low: float,
    high: float,
) -> tuple[NDArray[np.float64], float]:
    """Exactly rounded continuous noise; ``public_scale`` <= scale sets the grid."""
    gamma = choose_grid(public_scale)
    out = rounded_continuous(v, scale, family, gamma, rng)
    if bounding == "clamp":
        out = np.clip(out, low, high)
    return out, gamma
