r"""Dominating pairs: the two laws of one release for one person, and their privacy profiles.

Fix one person and two audit sets that differ only in that person's protected attribute (a
*flip*) or only in the attributes of that person and one other of the opposite group (a *swap*,
which keeps the group sizes). One release then has a law P on the first audit set and Q on the
second. Everything an attacker can learn from the release about which audit set is the true one
is in the pair (P, Q), and a pair (P', Q') *dominates* it when every test between P and Q can be
matched by a test between P' and Q' with no larger errors. The privacy profile

.. math:: \delta(\varepsilon) = H_{e^\varepsilon}(P \| Q) = \sup_S P(S) - e^\varepsilon Q(S)
          = \mathbb{E}_P\big[(1 - e^{\varepsilon - L})_+\big], \quad L = \log\frac{dP}{dQ},

for every real epsilon, determines the trade-off between the two errors; a pair dominates another
exactly when its profile is pointwise at least as large (Dong, Roth and Su 2022, Proposition 2.12
with Blackwell's theorem). The families here are the dominating pairs the ceilings use:

``laplace`` (parameter s)
    A unit-scale Laplace law against the same law shifted by s. Laplace noise of scale b on an
    answer that one change moves by at most d gives ``s = d / b``. The profile is
    ``1 - e^{(eps - s)/2}`` for ``|eps| < s``, ``1 - e^eps`` below and 0 above.
``cauchy`` (parameter s)
    A standard Cauchy law against the same law shifted by s: the noise of Attribute-Conceal when
    the noise scale is the same in both audit sets (a swap keeps the group sizes, on which the
    scale depends). The privacy loss is bounded by ``log((2 + s^2 + s sqrt(s^2 + 4)) / 2)``.
``pure`` (parameter eps)
    Randomized response at epsilon: two outcomes with probabilities ``e^eps/(1 + e^eps)`` and
    ``1/(1 + e^eps)``. It dominates every pure eps-DP pair (Kairouz, Oh and Viswanath 2015).
``approx`` (parameters eps, delta)
    Randomized response at eps, plus probability delta of an outcome that only P can produce. It
    dominates every (eps, delta)-DP pair.
``exact``
    No noise: the two laws are disjoint (total variation 1).

Monotonicity (why a shift may be rounded up). For ``laplace`` and ``cauchy`` a larger shift gives
a pair that dominates the smaller one, so a shift known only up to an upper bound may be replaced
by that bound. Laplace: its density is log-concave, so the likelihood ratio of a shift is monotone
and the most powerful tests are thresholds; a threshold test's type-II error at a fixed type-I
error decreases with the shift. Cauchy: the shift s against scale 1 is the shift 1 against scale
1/s, and a Cauchy law of scale c' > c is the law of scale c plus independent Cauchy noise of scale
c' - c (stability), so the pair at the smaller shift is post-processing of the pair at the larger.

Discrete Laplace. The ``safe`` sampler releases integers (grid units) with discrete Laplace noise
``P(z) ∝ e^{-|z|/t}`` on answers moved by at most k units. Its profile for ``|eps| < k/t`` is
``1 - e^{-(k/t - eps)/2} g`` with ``g = (e^{-th u} + e^{(th - 1) u}) / (1 + e^{-u})``, ``u = 1/t``
and th in [0, 1) the rounding of the cut point, so ``g >= 1/cosh(u/2)``; outside that range it
equals the continuous profile at ``s = k/t``. Hence the discrete pair is dominated by the
``laplace`` pair at ``s = k/t + 2 log cosh(1/(2t))`` (at most ``k/t + 1/(4 t^2)``), which
:func:`discrete_laplace_shift` returns; with ``t >= 2^20`` the correction is below ``1e-12``.

Connect the dots (Doroshenko, Ghazi, Kamath, Kumar and Manurangsi, PETS 2022). To compose pairs
numerically, each profile is replaced by a pair whose privacy loss takes values on a grid ``j D``
(D the grid step): the probability at each grid point is chosen so that the new profile equals the
true one at every grid point and is linear in ``e^eps`` in between. A profile is convex in
``e^eps``, so the chords lie above it: the new pair dominates the old one, with an error of second
order in D, which does not add up over thousands of compositions the way rounding every loss up
to the grid does (a first-order error, ``D`` per release).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "FAMILIES",
    "SATURATION",
    "Pair",
    "connect_the_dots",
    "discrete_laplace_shift",
]

Family = Literal["laplace", "cauchy", "pure", "approx", "exact"]

FAMILIES: Final[tuple[str, ...]] = ("laplace", "cauchy", "pure", "approx", "exact")
"""The dominating-pair families (module docstring)."""

SATURATION: Final = 30.0
"""A pair whose privacy loss can exceed this is counted as exact: its total variation is within
``e^-15`` of 1 for one release, and the composition grids could not hold it."""

CAUCHY_SMALL: Final = 1e-4
"""Below this shift the Cauchy pair is replaced by the pure pair at its largest loss (which
dominates it): the profile's closed form cancels catastrophically there, and such releases carry
almost nothing."""

BAD_PAIR = "a {family} pair needs {need}; received parameter={parameter!r}, delta={delta!r}"


def discrete_laplace_shift(k: float, t: float) -> float:
    r"""The ``laplace`` shift that dominates discrete Laplace of scale ``t`` moved by ``k`` units.

    ``k/t + 2 log cosh(1/(2t))`` (module docstring); ``k`` may be any real upper bound on the
    integer shift.
    """
    if not (t > 0 and k >= 0):
        raise ValueError(f"discrete Laplace needs t > 0 and k >= 0; received t={t!r}, k={k!r}")
    u = 0.5 / t
    # log cosh(u) = u + log1p(e^{-2u}) - log 2, exact for small u through the series
    correction = u * u - u**4 / 3.0 if u < 1e-3 else math.log(math.cosh(u))
    return k / t + 2.0 * correction


def _cauchy_max_loss(s: float) -> float:
    """Largest privacy loss of the Cauchy pair at shift s: log of the largest density ratio."""
    return math.log1p((s * s + s * math.sqrt(s * s + 4.0)) / 2.0)


@dataclass(frozen=True, order=True)
class Pair:
    """One dominating pair: a family and its parameter (see the module docstring)."""

    family: Family
    """One of :data:`FAMILIES`."""
    parameter: float = 0.0
    """The shift (``laplace``, ``cauchy``) or epsilon (``pure``, ``approx``)."""
    delta: float = 0.0
    """The probability of an outcome only P produces (``approx`` only)."""

    def __post_init__(self) -> None:
        p, d = self.parameter, self.delta
        if self.family not in FAMILIES:
            raise ValueError(f"unknown pair family {self.family!r}; allowed: {list(FAMILIES)}")
        ok = math.isfinite(p) and p >= 0 and 0.0 <= d < 1.0
        if self.family == "exact":
            ok = True
        elif self.family != "approx" and d != 0.0:
            ok = False
        if not ok:
            need = "a finite parameter >= 0" + (" and 0 <= delta < 1" if d else "")
            raise ValueError(BAD_PAIR.format(family=self.family, need=need, parameter=p, delta=d))

    @property
    def max_loss(self) -> float:
        """The largest finite privacy loss (``inf`` for ``exact``)."""
        if self.family == "exact":
            return math.inf
        if self.family == "cauchy":
            return _cauchy_max_loss(self.parameter)
        return self.parameter

    @property
    def infinite_mass(self) -> float:
        """The probability (under P) of an outcome Q cannot produce."""
        if self.family == "exact":
            return 1.0
        return self.delta if self.family == "approx" else 0.0

    @property
    def saturated(self) -> bool:
        """Whether the pair gives no useful guarantee (exact, or a loss past SATURATION)."""
        return self.family == "exact" or self.max_loss > SATURATION

    @property
    def trivial(self) -> bool:
        """Whether P = Q (nothing is released about the person)."""
        return self.family != "exact" and self.parameter == 0.0 and self.delta == 0.0

    def profile(self, epsilons: ArrayLike) -> NDArray[np.float64]:
        r"""The privacy profile :math:`H_{e^\varepsilon}(P \| Q)` at each epsilon."""
        eps = np.asarray(epsilons, dtype=np.float64)
        below = -np.expm1(np.minimum(eps, 0.0))  # 1 - e^eps for eps <= 0: the profile of P = Q
        if self.family == "exact":
            return np.ones_like(eps)
        if self.trivial:
            return np.where(eps < 0, below, 0.0)
        if self.family == "laplace":
            s = self.parameter
            inside = -np.expm1((np.clip(eps, -s, s) - s) / 2.0)
            return np.where(eps <= -s, below, np.where(eps >= s, 0.0, inside))
        if self.family == "cauchy":
            if self.parameter < CAUCHY_SMALL:
                return Pair("pure", self.max_loss).profile(eps)
            return _cauchy_profile(self.parameter, eps)
        # randomized response at eps0, and its approx version
        e0 = self.parameter
        high = 1.0 / (1.0 + math.exp(-e0))  # e^e0 / (1 + e^e0)
        rr = high * np.maximum(0.0, -np.expm1(eps - e0)) + (1.0 - high) * np.maximum(
            0.0, -np.expm1(eps + e0)
        )
        if self.family == "approx":
            return self.delta + (1.0 - self.delta) * rr
        return rr

    def total_variation(self) -> float:
        """Total variation between P and Q (the profile at 0)."""
        return float(self.profile(np.array([0.0]))[0])


def _cauchy_profile(s: float, eps: NDArray[np.float64]) -> NDArray[np.float64]:
    """Profile of C(0, 1) against C(s, 1), from the set where the likelihood ratio passes e^eps.

    ``{L > eps}`` solves ``(1 - e^eps) x^2 - 2 s x + (1 + s^2 - e^eps) > 0``: an interval between
    the roots for eps > 0, the outside of one for eps < 0, a half-line ``x < s/2`` at eps = 0;
    P and Q of it follow from the Cauchy distribution function ``1/2 + arctan(x)/pi``.
    """
    top = _cauchy_max_loss(s)
    out = np.empty_like(eps)
    below = eps <= -top
    above = eps >= top
    out[below] = -np.expm1(eps[below])
    out[above] = 0.0
    mid = ~(below | above)
    e = eps[mid]
    a = -np.expm1(e)  # 1 - e^eps
    c = s * s + a  # 1 + s^2 - e^eps
    disc = np.maximum(s * s - a * c, 0.0)  # (b^2 - 4ac) / 4 with b = -2s
    q = s + np.sqrt(disc)  # > 0: the stable root pair is q/a and c/q
    zero = np.abs(a) < 1e-300
    with np.errstate(divide="ignore", invalid="ignore"):
        r_far = np.where(zero, np.inf, q / np.where(zero, 1.0, a))
    r_near = c / q
    lo = np.minimum(r_far, r_near)
    hi = np.maximum(r_far, r_near)
    atan = np.arctan
    p_in = (atan(hi) - atan(lo)) / math.pi
    q_in = (atan(hi - s) - atan(lo - s)) / math.pi
    # eps > 0: {L > eps} is (lo, hi); eps < 0: its complement; eps = 0: x < s/2 (hi = s/2 and
    # lo = -inf through r_far).
    pos = e > 0
    ee = np.exp(e)
    value = np.where(pos, p_in - ee * q_in, (1.0 - p_in) - ee * (1.0 - q_in))
    at_zero = e == 0
    value = np.where(at_zero, 2.0 * np.arctan(s / 2.0) / math.pi, value)
    out[mid] = np.maximum(value, 0.0)
    return out


@dataclass(frozen=True, eq=False)
class Discretized:
    """A pair's connect-the-dots law on the loss grid ``j * step``: what composition works on."""

    offset: int
    """The grid index of ``masses[0]``."""
    masses: NDArray[np.float64]
    """Probability (under P) of each grid loss from ``offset`` on; sums to ``1 - infinite``."""
    infinite: float
    """Probability of an outcome only P produces."""

    @cached_property
    def mean(self) -> float:
        """Mean grid index of the finite part, per unit of finite mass."""
        total = float(self.masses.sum())
        if total == 0.0:
            return 0.0
        j = np.arange(self.offset, self.offset + self.masses.size)
        return float((self.masses * j).sum() / total)

    @cached_property
    def variance(self) -> float:
        """Variance of the grid index of the finite part (per unit of finite mass)."""
        total = float(self.masses.sum())
        if total == 0.0:
            return 0.0
        j = np.arange(self.offset, self.offset + self.masses.size) - self.mean
        return float((self.masses * j * j).sum() / total)


def connect_the_dots(pair: Pair, step: float) -> Discretized:
    """The dominating connect-the-dots law of ``pair`` on the loss grid ``j * step``.

    Cached (the same levels recur in every ledger of a run and of its red team); the returned
    masses are read-only.
    """
    if not step > 0:
        raise ValueError(f"the loss grid step must be > 0; received {step!r}")
    return _connect_the_dots(pair, float(step))


@lru_cache(maxsize=8192)
def _connect_the_dots(pair: Pair, step: float) -> Discretized:
    """:func:`connect_the_dots`, computed.

    The masses follow from the profile's slopes in ``u = e^eps``: between grid points the new
    profile is the chord, so its slope on ``[u_j, u_{j+1}]`` is the chord's, and the mass at
    ``u_j`` is ``u_j`` times the jump of the slope there (the slope is ``-(1 - delta)`` below the
    smallest loss and 0 above the largest).
    """
    if not step > 0:
        raise ValueError(f"the loss grid step must be > 0; received {step!r}")
    if pair.saturated:
        raise ValueError(f"a saturated pair ({pair}) has no discretisation: count it as exact")
    if pair.trivial:
        return Discretized(0, np.ones(1), 0.0)
    top = pair.max_loss
    lo = math.floor(-top / step)
    hi = math.ceil(top / step)
    if hi == lo:
        hi = lo + 1
    j = np.arange(lo, hi + 1)
    eps = j * step
    delta = pair.profile(eps)
    finite = 1.0 - pair.infinite_mass
    # chord slopes between consecutive grid points, in u = e^eps: (d_{j+1} - d_j) / (u_{j+1} - u_j)
    du = np.exp(eps[:-1]) * math.expm1(step)
    slopes = np.diff(delta) / du
    left = np.concatenate([[-finite], slopes])  # slope just left of each grid point
    right = np.concatenate([slopes, [0.0]])  # slope just right of it
    masses = np.exp(eps) * (right - left)
    masses = np.maximum(masses, 0.0)  # convexity makes them >= 0; this clears float dust
    # Float dust can leave the total a little below its exact value: the missing mass goes to the
    # largest loss, which can only raise every hockey-stick divergence (an excess stays: it too
    # only raises them).
    missing = finite - float(masses.sum())
    if missing > 0:
        masses[-1] += missing
    masses.setflags(write=False)
    return Discretized(int(lo), masses, pair.infinite_mass)
