r"""Continuous noise, exactly rounded to the release grid.

The smooth-sensitivity mechanisms (``attribute_conceal``: Cauchy noise of scale
``6 S_beta / eps``; ``smooth_laplace``: Laplace noise of scale ``2 S_beta / eps``) cannot use
integer noise: their proofs (Nissim, Raskhodnikova and Smith, STOC 2007) need a noise law that
can be dilated by any factor, which a lattice cannot. The safe sampler therefore releases
``round_gamma(v + scale * Z)`` with Z drawn from the CONTINUOUS law and the rounding to the grid
computed EXACTLY. The output is a deterministic function (post-processing) of the textbook
mechanism and keeps its guarantee at no extra cost.

:func:`rounded_continuous` draws a 53-bit uniform ``u = k 2^-53``, which stands for a true uniform
in ``[u, u + 2^-53)``. The quantile function is increasing, so ``Q(U)`` lies between the
quantiles at the two ends; both are evaluated in floats in well-conditioned forms and widened by a
margin far above their float error. When both ends round to the same grid point, that point is
certified to be ``round_gamma`` of the true real number. Otherwise (rare: under 1 % of draws,
mostly in the far Cauchy tails) more random bits are appended to ``u`` and the interval is
recomputed with arbitrary-precision interval arithmetic (``mpmath.iv``) until it is certified.

The proofs are about the doubles actually used, so the computed smooth sensitivity must itself be
beta-smooth and cover the float error of the metric: :func:`safe_smooth_sensitivity` adds those
margins. :mod:`~biasleak.mechanisms.samplers` gives the full argument for both.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms.grid import on_grid

__all__ = [
    "RELATIVE_SLACK",
    "SMOOTH_RELATIVE_SLACK",
    "Family",
    "rounded_continuous",
    "safe_smooth_sensitivity",
]

RELATIVE_SLACK: Final = 1e-12
"""Relative widening of float quantile evaluations (their true error is a few ulps)."""

SMOOTH_RELATIVE_SLACK: Final = 1e-9
"""Relative inflation of a computed smooth sensitivity (covers its own rounding)."""

_MAX_REFINE: Final = 64

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
        further bits are drawn only when needed (see :mod:`~biasleak.mechanisms.samplers`).
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
    (see :mod:`~biasleak.mechanisms.samplers` for why each term is there).
    """
    beta_used = max(beta - 1e-12 * (1.0 + n * beta), 0.0)
    base = float(compute(beta_used))
    return base * (1.0 + SMOOTH_RELATIVE_SLACK) + 4.0 * m * n * 2.0**-53
