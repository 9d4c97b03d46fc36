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

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import optimize

__all__ = [
    "GRID_BITS",
    "bernoulli_exp",
    "choose_grid",
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_sigma",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "on_grid",
    "rounded_continuous",
    "safe_smooth_sensitivity",
    "truncated_discrete_laplace",
    "zcdp_delta",
]

GRID_BITS: Final = 20
"""The grid step is at most ``2^-GRID_BITS`` times the public lower bound of the noise scale."""

SIGMA2_DENOMINATOR: Final = 1024
"""Denominator of the rational that ``sigma^2`` (in grid units) is rounded up to."""

RELATIVE_SLACK: Final = 1e-12
"""Relative widening of float quantile evaluations (their true error is a few ulps)."""

SMOOTH_RELATIVE_SLACK: Final = 1e-9
"""Relative inflation of a computed smooth sensitivity (covers its own rounding)."""

_INT64_SAFE: Final = 2**62
_MAX_REFINE: Final = 64

SCALE_NOT_POSITIVE: Final = "{name} must be a positive integer; received {value!r}"
GRID_SCALE_INVALID: Final = (
    "the public noise-scale lower bound must be positive and finite; received {value!r}"
)


def choose_grid(*public_bounds: float, bits: int = GRID_BITS) -> float:
    """The grid step: the largest power of two not above ``2^-bits`` times the smallest bound.

    Parameters
    ----------
    public_bounds : float
        Positive lower bounds computed from public quantities only (noise scale, per-answer
        sensitivity); never pass anything that depends on the group sizes.
    bits : int
        How many binary digits finer than the smallest bound the grid is.

    Returns
    -------
    float
        ``2^e`` with ``2^e <= 2^-bits min(public_bounds) < 2^(e+1)``.
    """
    low = min(public_bounds)
    if not (math.isfinite(low) and low > 0.0):
        raise ValueError(GRID_SCALE_INVALID.format(value=low))
    _, exponent = math.frexp(low)  # low = f 2^exponent with f in [0.5, 1)
    return math.ldexp(1.0, exponent - 1 - bits)


def on_grid(values: NDArray[np.float64], gamma: float) -> NDArray[np.float64]:
    """Round doubles to the nearest multiple of the power of two ``gamma`` (ties to even).

    Division and multiplication by a power of two are exact (away from under/overflow) and
    ``np.round`` of a double is exact, so the result is the exact nearest grid point.
    """
    return np.round(values / gamma) * gamma


# --------------------------------------------------------------------------------------------
# Exact Bernoulli and discrete samplers (CKS Algorithms 1-3), vectorised with masks.
# --------------------------------------------------------------------------------------------


def _as_int_array(x: object) -> NDArray:
    arr = np.asarray(x)
    if arr.dtype == object:
        return arr
    return arr.astype(np.int64)


def _fits_int64(*arrays: NDArray) -> bool:
    return all(
        a.dtype != object and (a.size == 0 or int(np.max(np.abs(a))) < _INT64_SAFE) for a in arrays
    )


def _bernoulli_ratio(num: NDArray, den: NDArray, rng: np.random.Generator) -> NDArray[np.bool_]:
    """Exact Bernoulli(num / den) per element, for integers ``0 <= num <= den``, ``den >= 1``.

    With int64 inputs below 2^62 it is ``integers(0, den) < num``. Otherwise (exact Python
    integers in object arrays) a 62-bit uniform word ``w`` is compared with
    ``floor(2^62 num / den)``: ``w`` below it means success, above means failure, and only
    equality (probability 2^-62) needs further words, compared the same way against the next
    digits.
    """
    if num.size == 0:
        return np.zeros(num.shape, dtype=bool)
    if _fits_int64(num, den):
        return rng.integers(0, den.astype(np.int64)) < num.astype(np.int64)
    out = np.zeros(num.shape, dtype=bool)
    rem = np.array([int(x) for x in num.ravel()], dtype=object).reshape(num.shape)
    den_o = np.array([int(x) for x in den.ravel()], dtype=object).reshape(num.shape)
    open_ = np.ones(num.shape, dtype=bool)
    while np.any(open_):
        idx = np.flatnonzero(open_)
        scaled = rem.ravel()[idx] * (1 << 62)
        digit = scaled // den_o.ravel()[idx]
        word = rng.integers(0, 1 << 62, size=idx.size)
        digit_i = np.array([int(d) for d in digit], dtype=np.int64)
        less, more = word < digit_i, word > digit_i
        out.ravel()[idx[less]] = True
        open_.ravel()[idx[less | more]] = False
        tie = ~(less | more)
        rem.ravel()[idx[tie]] = (scaled - digit * den_o.ravel()[idx])[tie]
    return out


def bernoulli_exp(num: object, den: object, rng: np.random.Generator) -> NDArray[np.bool_]:
    r"""Exact Bernoulli with success probability ``exp(-num/den)``, per element (CKS Alg. 1).

    For ``x = num/den in [0, 1]``: draw ``A_k ~ Bernoulli(x/k)`` for ``k = 1, 2, ...`` until the
    first failure; the number of successes before it is odd with probability
    ``1 - exp(-x)``, so the answer is "K even". For ``x > 1``: ``floor(x)`` independent
    ``Bernoulli(exp(-1))`` trials must all succeed, then one ``Bernoulli(exp(-(x - floor x)))``.

    Parameters
    ----------
    num, den : int or array of int
        ``num >= 0``, ``den >= 1``; int64 arrays or object arrays of Python integers (any size).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of bool, the broadcast shape of ``num`` and ``den``.
    """
    num_a, den_a = np.broadcast_arrays(_as_int_array(num), _as_int_array(den))
    num_a, den_a = num_a.copy(), den_a.copy()
    if num_a.dtype == object or den_a.dtype == object:
        num_a, den_a = num_a.astype(object), den_a.astype(object)
    whole = num_a // den_a
    frac = num_a - whole * den_a
    alive = np.ones(num_a.shape, dtype=bool)
    # Integer part: floor(x) independent exp(-1) trials must all pass; they are drawn in rows of
    # _ROW so that one alternating loop serves many trials.
    left = whole.copy()
    todo = alive & (left > 0).astype(bool)
    while np.any(todo):
        idx = np.flatnonzero(todo)
        rows = _exp1_rows(idx.size, rng)
        need = np.array([min(int(x), _ROW) for x in left.ravel()[idx]], dtype=np.int64)
        passed = np.cumprod(rows, axis=1)[np.arange(idx.size), need - 1].astype(bool)
        alive.ravel()[idx[~passed]] = False
        left.ravel()[idx] = left.ravel()[idx] - need
        todo = alive & (left > 0).astype(bool)
    idx = np.flatnonzero(alive)
    if idx.size:
        ok = _alternating(frac.ravel()[idx], den_a.ravel()[idx], rng)
        alive.ravel()[idx[~ok]] = False
    return alive


_ROW: Final = 8


def _exp1_rows(count: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    """A (count, 8) array of independent Bernoulli(exp(-1)) draws."""
    ones = np.ones(count * _ROW, dtype=np.int64)
    return _alternating(ones, ones, rng).reshape(count, _ROW)


def _geometric_exp1(count: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Number of Bernoulli(exp(-1)) successes before the first failure, per sample."""
    v = np.zeros(count, dtype=np.int64)
    idx = np.arange(count)
    while idx.size:
        rows = _exp1_rows(idx.size, rng)
        first_fail = np.argmin(rows, axis=1)  # index of the first False (0 if none)
        all_pass = rows.all(axis=1)
        v[idx] += np.where(all_pass, _ROW, first_fail)
        idx = idx[all_pass]
    return v


def _alternating(num: NDArray, den: NDArray, rng: np.random.Generator) -> NDArray[np.bool_]:
    """Bernoulli(exp(-num/den)) for ``0 <= num/den <= 1`` by the alternating-series loop."""
    k = np.ones(num.shape, dtype=np.int64)
    running = np.ones(num.shape, dtype=bool)
    while np.any(running):
        idx = np.flatnonzero(running)
        k_idx = k[idx] if den.dtype != object else k[idx].astype(object)
        a = _bernoulli_ratio(num[idx], den[idx] * k_idx, rng)
        k[idx[a]] += 1
        running[idx[~a]] = False
    return (k % 2) == 1  # K = k - 1 successes; exp(-x) = P[K even] = P[k odd]


def discrete_laplace(
    t: int, s: int, size: int | tuple[int, ...], rng: np.random.Generator
) -> NDArray[np.int64]:
    r"""Exact discrete Laplace samples of scale ``t/s`` (CKS Algorithm 2).

    .. math:: P[Y = y] = \frac{e^{s/t} - 1}{e^{s/t} + 1}\, e^{-|y| s / t}, \quad y \in \mathbb{Z}.

    Draw ``U`` uniform on ``{0, ..., t-1}`` and keep it with probability ``exp(-U/t)``; draw
    ``V`` geometric (count of successes of ``Bernoulli(exp(-1))`` before a failure); then
    ``X = U + t V`` has ``P[X = x] ∝ exp(-x/t)``, ``Y = floor(X / s)`` has
    ``P[Y = y] ∝ exp(-y s/t)``, and a fair sign (rejecting "minus zero") makes it two-sided.

    Parameters
    ----------
    t, s : int
        Positive integers; the scale is ``t/s``.
    size : int or tuple
    rng : numpy.random.Generator
    """
    for name, value in (("t", t), ("s", s)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(SCALE_NOT_POSITIVE.format(name=name, value=value))
    t, s = int(t), int(s)
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    total = int(np.prod(shape))
    if t >= _INT64_SAFE:
        raise ValueError(f"discrete Laplace scale numerator t = {t} exceeds 2^62")
    out = np.zeros(total, dtype=np.int64)
    filled = 0
    while filled < total:
        # Candidates are independent, and the first accepted ones (in candidate order, which
        # does not depend on their values) are independent draws of the target law. About 60 %
        # are accepted, so drawing ~1.8 times the shortfall finishes in one or two rounds.
        count = int(1.8 * (total - filled)) + 8
        u = rng.integers(0, t, size=count)
        keep = bernoulli_exp(u, np.full(count, t, dtype=np.int64), rng)
        v = _geometric_exp1(count, rng)
        x = u + t * v
        y = x // s
        neg = rng.integers(0, 2, size=count).astype(bool)
        good = keep & ~(neg & (y == 0))
        accepted = np.where(neg[good], -y[good], y[good])[: total - filled]
        out[filled : filled + accepted.size] = accepted
        filled += accepted.size
    return out.reshape(shape)


def discrete_laplace_pmf(k: NDArray | int, scale: float) -> NDArray[np.float64]:
    """``P[Y = k]`` of the discrete Laplace with ``P ∝ exp(-|k| / scale)`` (for tests)."""
    r = math.exp(-1.0 / scale)
    return (1.0 - r) / (1.0 + r) * np.exp(-np.abs(np.asarray(k, dtype=np.float64)) / scale)


def discrete_gaussian_pmf(k: NDArray | int, sigma2: float) -> NDArray[np.float64]:
    """``P[Y = k]`` of the discrete Gaussian ``N_Z(0, sigma2)`` (normaliser summed; for tests)."""
    half = math.ceil(40.0 * math.sqrt(sigma2)) + 10
    support = np.arange(-half, half + 1, dtype=np.float64)
    norm = float(np.sum(np.exp(-(support**2) / (2.0 * sigma2))))
    return np.exp(-(np.asarray(k, dtype=np.float64) ** 2) / (2.0 * sigma2)) / norm


def discrete_gaussian(
    sigma2: Fraction, size: int | tuple[int, ...], rng: np.random.Generator
) -> NDArray[np.int64]:
    r"""Exact discrete Gaussian samples ``N_Z(0, sigma2)`` (CKS Algorithm 3).

    .. math:: P[Y = y] \propto e^{-y^2 / (2 \sigma^2)}, \quad y \in \mathbb{Z}.

    With ``t = floor(sigma) + 1``: propose ``Y`` from the discrete Laplace of scale t and accept
    with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``. With ``sigma^2 = a/b`` the
    exponent is the exact rational ``(|Y| b t - a)^2 / (2 a b t^2)``, computed on Python integers.

    Parameters
    ----------
    sigma2 : fractions.Fraction
        The variance parameter, positive.
    size : int or tuple
    rng : numpy.random.Generator
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"sigma2 must be a positive rational; received {sigma2!r}")
    a, b = sigma2.numerator, sigma2.denominator
    t = math.isqrt(a // b) + 1  # floor(sigma) + 1 >= sigma
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    total = int(np.prod(shape))
    out = np.zeros(total, dtype=np.int64)
    filled = 0
    while filled < total:
        # As in discrete_laplace: oversample, keep the first accepted candidates in order.
        count = int(1.6 * (total - filled)) + 8
        y = discrete_laplace(t, 1, count, rng)
        w = np.abs(y).astype(object) * (b * t) - a
        num = w * w
        den = np.full(count, 2 * a * b * t * t, dtype=object)
        ok = bernoulli_exp(num, den, rng)
        accepted = y[ok][: total - filled]
        out[filled : filled + accepted.size] = accepted
        filled += accepted.size
    return out.reshape(shape)


def truncated_discrete_laplace(
    center: NDArray[np.int64],
    low: int,
    high: int,
    t: int,
    s: int,
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    r"""Exact draws of ``center + Y`` conditioned on ``low <= center + Y <= high``.

    Y is the discrete Laplace of scale ``t/s``; the result has
    ``P[j] ∝ exp(-|j - c| s/t)`` on ``{low, ..., high}``. For ``c`` outside the range every ``|j -
    c|`` is ``|j - end| + const``, so ``c`` is first moved to the nearest end (same law).

    Two exact rejection samplers, chosen from public quantities (the range width ``L = high - low``
    and the scale ``b = t/s``):

    - ``L <= b``: propose j uniform on the range points, accept with ``exp(-|j - c|/b)``, which
      is at least ``exp(-L/b) >= e^{-1}``.
    - ``L > b``: propose ``c + Y`` and accept when in range. The side of the range towards the
      farther end from ``c`` holds at least ``L/2`` points, so the acceptance is at least
      ``P[0 <= Y <= L/2] >= (1 - e^{-L/(2b)}) / 2 ... >= (1 - e^{-1/2}) / 2 > 0.19``.

    So each try succeeds with probability above 0.19 and the expected number of tries is below
    5.3 (the loop is exact, not capped).
    """
    if not low <= high:
        raise ValueError(f"truncation range must have low <= high; received ({low}, {high})")
    c = np.clip(np.asarray(center, dtype=np.int64), low, high)
    width = high - low
    out = np.zeros(c.shape, dtype=np.int64)
    need = np.arange(c.size)
    flat_c = c.ravel()
    flat_out = out.ravel()
    while need.size:
        cc = flat_c[need]
        if Fraction(width) <= Fraction(t, s):
            j = rng.integers(low, high + 1, size=need.size)
            dist = np.abs(j - cc)
            ok = bernoulli_exp(dist * s, np.full(need.size, t, dtype=np.int64), rng)
        else:
            j = cc + discrete_laplace(t, s, need.size, rng)
            ok = (j >= low) & (j <= high)
        flat_out[need[ok]] = j[ok]
        need = need[~ok]
    return flat_out.reshape(c.shape)


# --------------------------------------------------------------------------------------------
# Calibration of the discrete Gaussian (zCDP, CKS Theorem 14 and Corollary 13).
# --------------------------------------------------------------------------------------------


def zcdp_delta(rho: float, epsilon: float) -> float:
    r"""An upper bound on delta for rho-zCDP at epsilon (CKS Corollary 13).

    .. math:: \delta = \inf_{\alpha > 1} \frac{e^{(\alpha - 1)(\alpha\rho - \varepsilon)}}
              {\alpha - 1}\left(1 - \frac{1}{\alpha}\right)^{\alpha}.

    The infimum is approached by a bounded scalar search over ``log(alpha - 1)``; every alpha
    gives a valid bound, so the returned value is an upper bound whatever the search finds.
    """

    def log_delta(log_am1: float) -> float:
        am1 = math.exp(log_am1)
        alpha = am1 + 1.0
        return am1 * (alpha * rho - epsilon) - math.log(am1) + alpha * math.log1p(-1.0 / alpha)

    # alpha near the optimum (eps + rho) / (2 rho) lies well inside this bracket.
    res = optimize.minimize_scalar(log_delta, bounds=(-30.0, 30.0), method="bounded")
    best = min(float(res.fun), log_delta(math.log(max((epsilon - rho) / (2 * rho), 1e-12))))
    return math.exp(min(best, 0.0))


@functools.lru_cache(maxsize=256)
def discrete_gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    r"""Smallest sigma (to ~1e-10 relative) making the discrete Gaussian (eps, delta)-DP.

    Uses ``rho = Delta_2^2 / (2 sigma^2)`` (CKS Theorem 14, integer queries of l2 sensitivity
    ``Delta_2``) and :func:`zcdp_delta`; bisects on ``log sigma`` for
    ``zcdp_delta(rho, eps) <= delta (1 - 1e-9)`` and returns the upper end. Cached.
    """
    target = delta * (1.0 - 1e-9)

    def ok(log_sigma: float) -> bool:
        rho = l2_sensitivity**2 / (2.0 * math.exp(2.0 * log_sigma))
        return zcdp_delta(rho, epsilon) <= target

    lo = hi = math.log(l2_sensitivity / epsilon)
    while ok(lo):
        lo -= 2.0
    while not ok(hi):
        hi += 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return math.exp(hi)


# --------------------------------------------------------------------------------------------
# Continuous noise, exactly rounded to the grid.
# --------------------------------------------------------------------------------------------

Family = Literal["laplace", "cauchy"]


def _quantile_float(u: NDArray[np.float64], family: Family) -> NDArray[np.float64]:
    """Standard quantile function at doubles u in (0, 1), in well-conditioned forms."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if family == "laplace":
            lower = np.log(2.0 * np.minimum(u, 0.5))
            upper = -np.log(2.0 * (1.0 - np.maximum(u, 0.5)))
            return np.where(u < 0.5, lower, upper)
        # Cauchy: Q(u) = tan(pi (u - 1/2)); q(w) is Q on (0, 1/2], mirrored through 1 - u.
        w = np.where(u <= 0.5, u, 1.0 - u)
        small = -1.0 / np.tan(np.pi * np.minimum(w, 0.25))
        mid = -np.tan(np.pi * (0.5 - np.maximum(w, 0.25)))
        q = np.where(w <= 0.25, small, mid)
        return np.where(u <= 0.5, q, -q)


def _quantile_iv(u: object, family: Family) -> object:
    """Interval enclosure of the standard quantile at an mpmath interval ``u``."""
    from mpmath import iv

    if family == "laplace":
        if u.b <= 0.5:  # type: ignore[attr-defined]
            return iv.log(2 * u)
        if u.a >= 0.5:  # type: ignore[attr-defined]
            return -iv.log(2 * (1 - u))
        return iv.mpf([-math.inf, math.inf])
    return -iv.cot(iv.pi * u)


def _import_mpmath() -> None:
    try:
        import mpmath  # noqa: F401
    except ImportError as exc:  # pragma: no cover - mpmath is a dependency
        raise ImportError(
            "the safe sampler's rare slow path needs mpmath; install it with `pip install mpmath`"
        ) from exc


def _refine(
    value: float, scale: float, k: int, family: Family, gamma: float, rng: np.random.Generator
) -> float:
    """Certify ``round_gamma(value + scale Q(U))`` by drawing more bits of U (slow path)."""
    _import_mpmath()
    from mpmath import iv, mpf

    bits = 53
    num = k
    saved = iv.prec
    try:
        for _ in range(_MAX_REFINE):
            num = (num << 32) | int(rng.integers(0, 1 << 32))
            bits += 32
            iv.prec = bits + 64
            width = mpf(2) ** (-bits)
            lo_u = iv.mpf(num) * width
            hi_u = iv.mpf(num + 1) * width
            if lo_u.a <= 0 or hi_u.b >= 1:
                continue
            q_lo = _quantile_iv(lo_u, family)
            q_hi = _quantile_iv(hi_u, family)
            x_lo = iv.mpf(value) + iv.mpf(scale) * q_lo
            x_hi = iv.mpf(value) + iv.mpf(scale) * q_hi
            g = iv.mpf(gamma)
            a = _exact((x_lo / g)._mpi_[0])  # lower end of the lower interval, as raw mpf
            b = _exact((x_hi / g)._mpi_[1])  # upper end of the upper interval
            if a is None or b is None:
                continue
            # Rounding to the nearest integer is monotone, so the whole interval [a, b] rounds
            # to one integer exactly when no half-integer lies in it (ends included).
            ra, rb = math.floor(a + Fraction(1, 2)), math.floor(b + Fraction(1, 2))
            if ra == rb and not _is_half(a) and not _is_half(b):
                return float(ra) * gamma
    finally:
        iv.prec = saved
    raise RuntimeError(
        "could not certify a rounded noisy value after 2048 extra random bits; this has "
        "probability below 2^-1000 unless the value lies exactly halfway between grid points"
    )


def _exact(raw: tuple[int, int, int, int]) -> Fraction | None:
    """The exact rational value of an interval end (mpmath's raw ``(sign, man, exp, bc)``
    tuple), or None when it is not finite.

    Converting an end through ``mpf`` at the default 53-bit precision would round it, and could
    both certify a wrong grid point and never certify a value near a half-integer.
    """
    from mpmath import libmp

    if raw in (libmp.finf, libmp.fninf, libmp.fnan):
        return None
    num, den = libmp.to_rational(raw)
    return Fraction(num, den)


def _is_half(x: Fraction) -> bool:
    return x - math.floor(x) == Fraction(1, 2)


def rounded_continuous(
    values: NDArray[np.float64],
    scale: float,
    family: Family,
    gamma: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    r"""Exactly ``round_gamma(v + scale * Z)`` per value, Z standard Laplace or Cauchy.

    Parameters
    ----------
    values : array of float
        The exact values ``v`` (taken as exact reals).
    scale : float
        Noise scale (taken as an exact real).
    family : {"laplace", "cauchy"}
    gamma : float
        Grid step, a power of two.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of float
        Grid values; each is the grid point nearest to the real number ``v + scale Q(U)`` for a
        uniform U whose first 53 bits come from one ``rng.integers`` call per value and whose
        further bits are drawn only when needed (see the module docstring).
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    k = rng.integers(0, 1 << 53, size=v.size)
    u_lo = k.astype(np.float64) * 2.0**-53
    u_hi = (k + 1).astype(np.float64) * 2.0**-53
    q_lo = _quantile_float(u_lo, family)
    q_hi = _quantile_float(u_hi, family)
    with np.errstate(invalid="ignore", over="ignore"):
        q_lo = q_lo - RELATIVE_SLACK * np.abs(q_lo)
        q_hi = q_hi + RELATIVE_SLACK * np.abs(q_hi)
        x_lo = v + scale * q_lo
        x_hi = v + scale * q_hi
        slack_lo = 2.0**-50 * (np.abs(v) + np.abs(scale * q_lo)) + 5e-324
        slack_hi = 2.0**-50 * (np.abs(v) + np.abs(scale * q_hi)) + 5e-324
        r_lo = on_grid(x_lo - slack_lo, gamma)
        r_hi = on_grid(x_hi + slack_hi, gamma)
    done = np.isfinite(r_lo) & np.isfinite(r_hi) & (r_lo == r_hi) & (k > 0)
    out = np.where(done, r_lo, 0.0)
    for i in np.flatnonzero(~done):
        out[i] = _refine(float(v[i]), scale, int(k[i]), family, gamma, rng)
    return out.reshape(np.shape(values))


def safe_smooth_sensitivity(
    compute: Callable[[float], float], *, beta: float, n: int, m: int
) -> float:
    """A smooth sensitivity whose computed values are beta-smooth and cover float error.

    ``compute(beta)`` returns the float smooth sensitivity at a smoothing parameter. The result is
    ``compute(beta') (1 + 1e-9) + 4 m n 2^-53`` with ``beta' = max(beta - 1e-12 (1 + n beta), 0)``
    (see the module docstring for why each term is there).
    """
    beta_used = max(beta - 1e-12 * (1.0 + n * beta), 0.0)
    base = float(compute(beta_used))
    return base * (1.0 + SMOOTH_RELATIVE_SLACK) + 4.0 * m * n * 2.0**-53
