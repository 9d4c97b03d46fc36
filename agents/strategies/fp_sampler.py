r"""The attacker's model of the noise sampler, rebuilt bit for bit in IEEE doubles.

A differentially private release adds noise X to an exact value v and publishes the double
``fl(v + X)``. On paper two exact values give overlapping output densities; in floating point
they need not. numpy draws Laplace noise as ``scale * log(2U)`` from a uniform U with 53 random
bits, so X takes only 2^53 values, unevenly spread, and the sum is rounded once more (Mironov,
"On significance of the least significant bits for differential privacy", CCS 2012). Whether a
published double can come from a given exact value at all is a question about those 2^53 draws,
and this module answers it exactly:

- :func:`laplace_noise_from_index` repeats numpy's Laplace draw for the k-th uniform,
  operation by operation, so its result is bit for bit numpy's;
- :func:`noise_interval` finds every noise double x with ``fl(v + x)`` equal to the published
  value (an interval, since rounding is monotone), by bisection over the ordered doubles;
- :func:`laplace_reachable` searches the 2^53 draws for one inside that interval;
- :func:`sp_candidates` computes the two exact values a one-person model can have, with the
  compliance side's own arithmetic, so the doubles compared are the same.

Where the draws cannot be inverted (Cauchy and Gaussian noise, or an unknown sampler), the
attacker falls back on the noise density: :func:`noise_law` gives each answer's noise family
and scale from its public facts (and a group-size hypothesis, for the data-dependent
mechanisms), :func:`log_density` its log density. The strategy that uses all this is
:mod:`~biasleak.agents.strategies.fp_probe`.
"""

from __future__ import annotations

import math
import struct

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms import metrics
from biasleak.mechanisms.release import analytic_gaussian_sigma
from biasleak.mechanisms.sensitivity import (
    attribute_conceal_beta,
    global_sensitivity,
    smooth_laplace_beta,
    smooth_sensitivity,
)

__all__ = [
    "INVERTIBLE_MECHANISMS",
    "laplace_noise_from_index",
    "laplace_reachable",
    "log_density",
    "noise_interval",
    "noise_law",
    "sp_candidates",
]

_TWO_53: int = 1 << 53
_INV_TWO_53: float = 1.0 / 9007199254740992.0
"""numpy's ``next_double``: ``(next_uint64 >> 11) * 2^-53``."""
_MAX_KEY: int = 0x7FEF_FFFF_FFFF_FFFF
"""Order key of the largest finite double."""

INVERTIBLE_MECHANISMS = frozenset({"laplace", "smooth_laplace"})
"""Mechanisms whose naive-sampler outputs the attack can test bit for bit."""


def laplace_noise_from_index(k: int, scale: float) -> float:
    r"""The noise numpy's ``Generator.laplace(0.0, scale)`` returns for the uniform ``k 2^-53``.

    numpy (``random_laplace`` in ``distributions.c``) draws ``U = next_double()``, rejects
    ``U = 0``, and returns

    .. math:: X = \begin{cases} 0 - s \log(2 - U - U) & U \ge 1/2 \\
                                0 + s \log(U + U) & 0 < U < 1/2 \end{cases}

    evaluated left to right in doubles. ``math.log`` calls the same C library ``log``, so the
    result is bit for bit numpy's. X is non-decreasing in k.

    Parameters
    ----------
    k : int in [1, 2^53)
        The 53-bit integer behind U (``next_uint64 >> 11``).
    scale : float
        The Laplace scale ``s``.
    """
    u = k * _INV_TWO_53
    if u >= 0.5:
        return 0.0 - scale * math.log(2.0 - u - u)
    return 0.0 + scale * math.log(u + u)


def _key(x: float) -> int:
    """An integer that orders doubles like their values (both zeros map to 0)."""
    bits: int = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def _from_key(key: int) -> float:
    bits = key if key >= 0 else (-key) | (1 << 63)
    value: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value


def noise_interval(value: float, released: float) -> tuple[float, float] | None:
    """The doubles x with ``fl(value + x) == released``: an interval ``(low, high)``, or None.

    Rounding is monotone, so ``x -> fl(value + x)`` is non-decreasing and the solutions are
    contiguous; two bisections over the order keys of the finite doubles find the ends.
    """
    if not (math.isfinite(value) and math.isfinite(released)):
        return None
    lo, hi = -_MAX_KEY, _MAX_KEY + 1  # smallest key with value + x >= released
    while lo < hi:
        mid = (lo + hi) // 2
        if value + _from_key(mid) >= released:
            hi = mid
        else:
            lo = mid + 1
    first = lo
    lo, hi = -_MAX_KEY - 1, _MAX_KEY  # largest key with value + x <= released
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if value + _from_key(mid) <= released:
            lo = mid
        else:
            hi = mid - 1
    last = lo
    if first > last or first > _MAX_KEY or last < -_MAX_KEY:
        return None
    return _from_key(first), _from_key(last)


def laplace_reachable(value: float, released: float, scale: float) -> bool:
    """Whether ``fl(value + X) == released`` for some draw X of numpy's Laplace(0, scale).

    Finds the noise interval (:func:`noise_interval`), then the smallest k in ``[1, 2^53)`` whose
    draw (:func:`laplace_noise_from_index`) is at least its lower end, and tests that draw and
    its neighbours exactly against the upper end.
    """
    if not (math.isfinite(scale) and scale > 0.0):
        raise ValueError(f"scale must be a finite positive Laplace scale; received {scale!r}")
    interval = noise_interval(value, released)
    if interval is None:
        return False
    low, high = interval
    lo, hi = 1, _TWO_53  # hi = 2^53: "no draw is large enough"
    while lo < hi:
        mid = (lo + hi) // 2
        if laplace_noise_from_index(mid, scale) >= low:
            hi = mid
        else:
            lo = mid + 1
    # A few neighbours as well, in case the C library's log is not monotone at the last bit.
    for k in range(max(lo - 2, 1), min(lo + 3, _TWO_53)):
        if low <= laplace_noise_from_index(k, scale) <= high:
            return True
    return False


def sp_candidates(n: int, n0: int) -> tuple[float, float]:
    """The exact SP of a model accepting only one person, if advantaged and if disadvantaged.

    Computed with :func:`biasleak.mechanisms.metrics.statistical_parity` on a batch holding the
    one-person model and a hypothetical attribute vector with ``n - n0`` advantaged people, the
    way the compliance side computes it, so the doubles are the same: ``(1/N1, -1/N0)``.
    """
    if not 1 <= n0 <= n - 1:
        raise ValueError(f"n0 must be a group size in [1, {n - 1}]; received {n0}")
    protected = np.ones(n, dtype=np.int8)
    protected[n - n0 :] = 0
    models = np.zeros((2, n))
    models[0, 0] = 1.0  # person 0 is advantaged in this vector
    models[1, n - 1] = 1.0  # person n - 1 is not
    sp = np.asarray(metrics.statistical_parity(models, protected=protected), dtype=np.float64)
    return float(sp[0]), float(sp[1])


def noise_law(
    mechanism: str, *, n: int, n0: int, models: int, epsilon: float, delta: float
) -> tuple[str, float]:
    """(family, scale) of an answer's noise under hypothesis N0, as release() computes it.

    ``models`` is the number of models released fresh in the same answer (the noise is
    calibrated to them). The family is ``exact``, ``laplace``, ``cauchy``, ``normal`` or
    ``unknown`` (an unknown mechanism, or no positive epsilon); only the data-dependent
    mechanisms' scales depend on ``n0``.
    """
    m, eps = models, epsilon
    if mechanism == "exact" or math.isinf(eps):
        out = ("exact", 0.0)
    elif eps <= 0.0:
        out = ("unknown", 0.0)
    elif mechanism == "laplace":
        out = ("laplace", global_sensitivity("sp", n=n, m=m) / eps)
    elif mechanism == "smooth_laplace":
        beta = smooth_laplace_beta(eps, delta, m)
        sens = smooth_sensitivity("sp", n1=n - n0, n0=n0, m=m, beta=beta)
        out = ("laplace", 2.0 * sens / eps)
    elif mechanism == "attribute_conceal":
        beta = attribute_conceal_beta(eps, m)
        sens = smooth_sensitivity("sp", n1=n - n0, n0=n0, m=m, beta=beta)
        out = ("cauchy", 6.0 * sens / eps)
    elif mechanism == "gaussian":
        l2 = global_sensitivity("sp", n=n, m=m, norm="l2")
        out = (
            "normal",
            analytic_gaussian_sigma(l2_sensitivity=l2, epsilon=eps, delta=delta),
        )
    else:
        out = ("unknown", 0.0)
    return out


def log_density(
    family: str, released: NDArray[np.float64], values: NDArray, scale: NDArray | float
) -> NDArray[np.float64]:
    """Log density of ``released`` given exact ``values`` (broadcast) under the noise family."""
    d = np.asarray(released - values, dtype=np.float64)
    s = np.broadcast_to(np.asarray(scale, dtype=np.float64), d.shape)
    if family == "laplace":
        out = -np.log(2.0 * s) - np.abs(d) / s
    elif family == "cauchy":
        out = -np.log(np.pi * s) - np.log1p((d / s) ** 2)
    elif family == "normal":
        out = -0.5 * (d / s) ** 2 - np.log(s) - 0.5 * np.log(2.0 * np.pi)
    else:  # exact answers or an unknown mechanism: the density says nothing
        return np.zeros(d.shape)
    return np.asarray(np.where(s > 0.0, out, 0.0), dtype=np.float64)
