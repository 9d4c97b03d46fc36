"""The privacy budget of the DP oracle learner: splitting (eps, delta) over its 2T mechanisms, and
the Laplace noise each one adds.

The game of :mod:`biasleak.mechanisms.fair.oracle` releases two things per round (the Auditor's
noisy violations and the Learner's noisy ``X^T c``), so a run is the adaptive composition of 2T
Laplace mechanisms. :func:`per_round_epsilon` finds the per-mechanism eps' three ways: advanced
composition (Dwork, Rothblum and Vadhan 2010) solved numerically as the seed's code does, the
tight privacy-loss-distribution accountant of ``dp_accounting`` for 2T pure eps'-DP mechanisms,
and basic composition (eps / 2T); the service uses the one it is told to and records all three.
:func:`laplace_vector` adds the noise the way every release of biasleak does (a power-of-two grid
and exactly sampled discrete Laplace noise), so the floating-point guarantee holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from biasleak.mechanisms._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from biasleak.mechanisms.discrete_noise import discrete_laplace
from biasleak.mechanisms.grid import choose_grid, grid_ints

__all__ = ["ACCOUNTANTS", "NoisyVector", "RoundBudget", "laplace_vector", "per_round_epsilon"]

Accountant = Literal["advanced", "pld", "basic"]
ACCOUNTANTS: Final[tuple[str, ...]] = ("advanced", "pld", "basic")
"""How the total (eps, delta) is split into the 2T per-mechanism eps'."""

PLD_DISCRETIZATION: Final = 1e-3
"""Privacy-loss grid for the PLD accountant (pessimistic rounding: coarser is still valid)."""
PLD_MAX_EPSILON: Final = 25.0
"""Largest per-mechanism eps' the PLD search tries (the library overflows on e^eps' beyond)."""


# -------------------------------------------------------------------------------------------
# Privacy budget
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundBudget:
    """Per-mechanism epsilon for 2T pure eps'-DP mechanisms composing to (eps, delta)."""

    epsilon: float
    """Total epsilon (``inf``: no noise)."""
    delta: float
    """Total delta."""
    mechanisms: int
    """Number of composed mechanisms (2T)."""
    advanced: float
    """eps' from advanced composition (the seed's rule)."""
    pld: float
    """eps' from the tight PLD accountant."""
    basic: float
    """eps' from basic composition, ``eps / (2T)``."""
    accountant: str
    """Which of the three :attr:`per_mechanism` is."""

    @property
    def per_mechanism(self) -> float:
        """The eps' each Laplace mechanism is calibrated to."""
        return float(getattr(self, self.accountant))


def _drv(eps_prime: float, k: int, delta: float) -> float:
    return math.sqrt(2.0 * k * math.log(1.0 / delta)) * eps_prime + k * eps_prime * math.expm1(
        eps_prime
    )


def _pld_epsilon(eps_prime: float, k: int, delta: float) -> float:
    from dp_accounting.pld import common as pld_common  # loads when first needed
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    pld = pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(eps_prime, 0.0),
        value_discretization_interval=PLD_DISCRETIZATION,
    ).self_compose(k)
    return float(pld.get_epsilon_for_delta(delta))


def per_round_epsilon(
    epsilon: float, delta: float, *, mechanisms: int, accountant: Accountant | str = "advanced"
) -> RoundBudget:
    """Split a total (eps, delta) over ``mechanisms`` pure eps'-DP mechanisms, three ways.

    ``advanced`` is the root of the Dwork-Rothblum-Vadhan bound (``brentq``); ``pld`` the largest
    eps' (to a relative 1e-9, found by bisection on the monotone composed epsilon) whose PLD
    composition has epsilon at most ``eps`` at ``delta``; ``basic`` is ``eps / mechanisms``.
    With ``epsilon = inf`` all three are ``inf``.
    """
    eps = check_epsilon(epsilon)
    k = check_int(mechanisms, name="mechanisms")
    acc = check_choice(accountant, ACCOUNTANTS, name="accountant")
    if math.isinf(eps):
        return RoundBudget(eps, 0.0, k, math.inf, math.inf, math.inf, acc)
    dlt = check_delta(delta)
    # At e' = max(1, ln(1 + eps/k)) the linear term alone is at least eps, so the root is below.
    hi = min(eps, max(1.0, math.log1p(eps / k)))
    while _drv(hi, k, dlt) <= eps:  # only when 2k ln(1/delta) < 1: widen the bracket
        hi *= 2.0
    advanced = float(optimize.brentq(lambda e: _drv(e, k, dlt) - eps, 0.0, hi, xtol=1e-14))
    # The root may sit an ulp above the exact one; step down until the bound holds.
    while _drv(advanced, k, dlt) > eps:
        advanced = math.nextafter(advanced, 0.0)
    basic = float(Fraction(eps) / k)
    # Pure mechanisms compose to at most k eps' at any delta, so basic's eps' always qualifies.
    lo, up = basic, max(basic, min(eps, PLD_MAX_EPSILON))
    if up > lo and _pld_epsilon(up, k, dlt) <= eps:
        lo = up
    while up - lo > 1e-9 * up and lo < up:
        mid = 0.5 * (lo + up)
        if _pld_epsilon(mid, k, dlt) <= eps:
            lo = mid
        else:
            up = mid
    return RoundBudget(eps, dlt, k, advanced, lo, basic, acc)


# -------------------------------------------------------------------------------------------
# Noise
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoisyVector:
    """A vector released with (discrete) Laplace noise on a grid."""

    values: NDArray[np.float64]
    """The noisy values (multiples of :attr:`grid`)."""
    scale: float
    """Laplace scale actually used (``>= l1_sensitivity / epsilon``; 0 without noise)."""
    grid: float
    """Grid step of the release (0 without noise)."""


def laplace_vector(
    values: ArrayLike,
    *,
    l1_sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    float_error: float = 0.0,
) -> NoisyVector:
    """Release ``values`` with eps-DP Laplace noise for a statistic of l1 sensitivity ``Delta``.

    The values are rounded to a power-of-two grid ``g`` chosen from public quantities (the scale
    ``Delta/eps`` and ``Delta/d``), and independent discrete Laplace noise of scale ``t`` grid
    units is added to each coordinate, ``t >= K / eps`` with ``K = (Delta + float_error)/g + d``:
    the rounded statistic moves by at most ``K`` grid units in l1 between neighbours. The noise
    is centred and symmetric; its standard deviation is about ``sqrt(2) * scale``.
    ``float_error`` is a public bound on how much float rounding can add to the change.
    """
    v = np.asarray(values, dtype=np.float64)
    eps = check_epsilon(epsilon)
    sens = check_positive(l1_sensitivity, name="l1_sensitivity")
    if math.isinf(eps):
        return NoisyVector(v.copy(), 0.0, 0.0)
    d = max(v.size, 1)
    gamma = choose_grid(sens / eps, max(sens / d, sens / eps * 2.0**-30))
    units = math.ceil(((sens + float_error) / gamma + d) * (1.0 + 1e-12))
    t = math.ceil(Fraction(units) / Fraction(eps))
    noisy = (grid_ints(v, gamma) + discrete_laplace(t, 1, v.shape, rng)).astype(np.float64)
    return NoisyVector(noisy * gamma, t * gamma, gamma)
