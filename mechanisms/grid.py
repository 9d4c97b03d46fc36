"""The release grid: where the safe sampler's outputs may lie.

A floating-point release is porous when the doubles it can return depend on the data set (see
:mod:`~biasleak.mechanisms.samplers`). The safe sampler closes the holes by releasing only
integer multiples of one grid step ``gamma``, a power of two: every such value is an exactly
representable double, and the set of possible outputs is the same whatever the data.

The step must not itself leak anything, so it is chosen from PUBLIC quantities only (n, m,
epsilon, delta, the metric; never the group sizes N0 and N1, on which the smooth-sensitivity
scales depend). :func:`choose_grid` takes the largest power of two not above ``2^-20`` times a
public lower bound of the noise scale (and, for the global-sensitivity mechanisms, of the
per-answer sensitivity). A rounding error of at most ``gamma/2 <= 2^-21`` of the noise scale
leaves utility unchanged in practice.

Two roundings onto the grid are used. :func:`on_grid` returns the nearest grid point as a double
(exact: division and multiplication by a power of two are exact away from under/overflow).
:func:`grid_ints` returns the grid index ``round(v / gamma)`` as an integer, the starting point of
the discrete samplers; it refuses values so large against the step that the index would no longer
be exact in a double.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "GRID_BITS",
    "GRID_SCALE_INVALID",
    "GRID_TOO_FINE",
    "choose_grid",
    "grid_ints",
    "on_grid",
]

GRID_BITS: Final = 20
"""The grid step is at most ``2^-GRID_BITS`` times the public lower bound of the noise scale."""

GRID_SCALE_INVALID: Final = (
    "the public noise-scale lower bound must be positive and finite; received {value!r}"
)
GRID_TOO_FINE: Final = (
    "the exact values are too large for the release grid ({gamma!r}): |value / grid| must stay "
    "below 2^52; received values up to {largest!r}"
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


def grid_ints(v: NDArray[np.float64], gamma: float) -> NDArray[np.int64]:
    """The grid indices ``round(v / gamma)`` as integers (refused beyond ``2^52``)."""
    k = np.round(v / gamma)
    largest = float(np.max(np.abs(k))) if k.size else 0.0
    if largest >= 2.0**52:
        raise ValueError(GRID_TOO_FINE.format(gamma=gamma, largest=float(np.max(np.abs(v)))))
    return k.astype(np.int64)
