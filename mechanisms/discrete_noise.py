r"""Exact discrete noise: Bernoulli, discrete Laplace and discrete Gaussian samplers.

The safe sampler (:mod:`~biasleak.mechanisms.samplers`) releases the data-independent mechanisms
(``laplace``, ``gaussian``) as an integer grid index plus INTEGER noise. This module draws that
noise exactly, with the algorithms of Canonne, Kamath and Steinke ("The Discrete Gaussian for
Differential Privacy", NeurIPS 2020; CKS below): nothing but integer arithmetic and
``Generator.integers``, so the law of every draw is exactly the one the privacy proof assumes and
no floating-point rounding can open holes in it.

- :func:`bernoulli_exp` (CKS Algorithm 1): a coin that comes up heads with probability
  ``exp(-num/den)``, by the alternating-series loop for ``x <= 1`` and repeated ``exp(-1)`` trials
  for the integer part of larger ``x``. Rationals of any size are handled exactly (Python
  integers in object arrays) and the loops are vectorised over the answers with masks.
- :func:`discrete_laplace` (CKS Algorithm 2): ``P(y) ∝ exp(-|y| s/t)`` for a rational scale
  ``t/s``, from a uniform integer, a geometric count and a fair sign.
- :func:`discrete_gaussian` (CKS Algorithm 3): ``P(y) ∝ exp(-y^2 / (2 sigma^2))`` for a rational
  ``sigma^2``, by rejection from the discrete Laplace, the acceptance exponent computed on exact
  Python integers so nothing can overflow.
- :func:`truncated_discrete_laplace`: the discrete Laplace conditioned on a range of grid points,
  by exact rejection (the ``truncate`` output bounding).

The probability mass functions :func:`discrete_laplace_pmf` and :func:`discrete_gaussian_pmf` are
float references for tests. How much noise is enough (the calibration through zCDP) lives in
:mod:`~biasleak.mechanisms.gaussian_sigma`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SCALE_NOT_POSITIVE",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "truncated_discrete_laplace",
]

_INT64_SAFE: Final = 2**62

SCALE_NOT_POSITIVE: Final = "{name} must be a positive integer; received {value!r}"


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
