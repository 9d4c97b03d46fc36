r"""From a release to its dominating pairs, at the policy's level and at the audit set's.

A release is what one answer (or one service run) made public: m fresh models through a noise
mechanism at an epsilon (and delta). For the ceilings it becomes dominating pairs (see
:mod:`~biasleak.mechanisms.ceiling._pairs`), one per model where the models' noises are
independent, for two kinds of neighbouring audit sets:

*flip*: one person's attribute changed (the project's neighbouring relation; the group sizes
move by one). The per-person (``person``) ceilings use it.

*swap*: the attributes of two people of opposite groups exchanged (the sizes stay; within one
label stratum for the equal-opportunity metrics, so that the sizes among y = 1 stay too). The
balanced-accuracy ceilings use it, because an attacker who knows the group sizes can tell a flip
apart by the sizes alone (see :mod:`biasleak.mechanisms.ceiling`).

and at two levels:

``policy``
    What the mechanism guarantees on any audit set of this size: the flip pairs are the
    guarantee itself; the swap pairs use the largest swap shift over every group split.
``audit_set``
    What it allows on this audit set, whatever models are sent: the shifts are the largest that
    one flip or swap can cause at the actual group sizes (local, not global, sensitivities),
    measured against the noise scale actually used.

Per mechanism (``d`` is a shift of one answer, ``b`` the noise scale of one answer):

``laplace`` (``safe`` sampler: integer grid units with discrete Laplace noise of scale t)
    One answer moved by d moves its grid integer by at most ``d/gamma + 1`` units (rounding), so
    each model is a discrete Laplace pair, dominated by the ``laplace`` pair at
    ``s = (d/gamma + 1)/t + 2 log cosh(1/(2t))``
    (:func:`~biasleak.mechanisms.ceiling._pairs.discrete_laplace_shift`); gamma and t are
    recomputed from public facts exactly as the sampler computes them. The l1 calibration over m
    models gives every model the same per-model scale, so a batch is m independent pairs. At the
    policy level the flip shift is the global sensitivity of one answer, which makes s the
    per-model epsilon (up to ``1e-12``).
``laplace`` with ``truncate``
    Conditioning on the range multiplies the density by a factor that itself moves by up to
    ``e^s``: each model is pure ``2 s``-DP (the generic ``pure`` pair); the noise was calibrated
    to half the epsilon, so at the policy level the flip pair is ``pure`` at the per-model epsilon.
``attribute_conceal``
    Cauchy noise of scale ``6 S_beta / eps`` per model (Algorithm 3; a batch has independent noise
    per model and each model alone is the one-model release at the per-model epsilon, so it is m
    eps/m-DP releases). Flip: the scale changes with the group sizes, and the eps-DP proof mixes
    sliding and dilation; the pair is the guarantee, ``pure`` at the per-model epsilon, at every
    level. Swap: the scale is the same in both audit sets, so the pair is a ``cauchy`` shift by
    ``d/b``; at the policy level, the largest ``(1/N1 + 1/N0)/b(N0, N1)`` over every split.
``smooth_laplace``
    Laplace noise of scale ``2 S_beta / eps`` per model. Flip: the (eps, delta) guarantee of the
    whole batch (``approx``). Swap: a ``laplace`` shift by ``d/b`` per model.
``gaussian``
    Flip: the (eps, delta) guarantee of the batch (the discrete Gaussian's calibration proves that
    point; its full privacy curve is not used). Swap: two flips, ``(2 eps, (1 + e^eps) delta)``.
``service``
    A fair-learning service's release, pure (or (eps, delta)) for the whole release, with
    sensitivities of its own: the guarantee for flips, group privacy (two flips) for swaps.
``exact`` (or ``epsilon = inf``, or the ``naive`` sampler, whose floating-point noise has no
    proof)
    The ``exact`` pair: no guarantee.

Shifts. SP moves by at most ``1/(q + 1) + 1/p`` when someone leaves a group of size p >= 2 for one
of size q (:mod:`~biasleak.mechanisms.sensitivity`), the largest over both directions being the
local sensitivity; a swap of persons i and j moves it by ``(1/N1 + 1/N0) |h_i - h_j| <= 1/N1 +
1/N0``. ``|SP|`` moves by at most what SP moves by. EO and ``|EO|`` use the sizes among y = 1. The
float error of the computed metric (``4 n 2^-53`` per answer) is added to every shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms.ceiling._pairs import Pair, discrete_laplace_shift
from biasleak.mechanisms.grid import choose_grid
from biasleak.mechanisms.metrics import ON_POSITIVES
from biasleak.mechanisms.release import NOISY, PURE
from biasleak.mechanisms.sensitivity import (
    attribute_conceal_beta,
    global_sensitivity,
    local_sensitivity,
    smooth_laplace_beta,
)

__all__ = [
    "EO_FAMILY",
    "AuditSizes",
    "ReleaseSpec",
    "float_error",
    "laplace_units",
    "release_pairs",
    "smooth_scales",
    "swap_shift",
]

Level = Literal["policy", "audit_set"]

EO_FAMILY: Final = ON_POSITIVES
"""Metrics computed among the people with y = 1 (the metric registry's ``on_positives``)."""

BAD_RELEASE = (
    "a release needs a mechanism in {allowed}, epsilon > 0, 0 <= delta < 1 and models >= 1; "
    "received mechanism={mechanism!r}, epsilon={epsilon!r}, delta={delta!r}, models={models!r}"
)
NEEDS_POPULATION = (
    "a {mechanism} release of {metric!r} needs the number of people the metric is computed on "
    "(population >= 3); received {population!r}"
)


@dataclass(frozen=True, order=True)
class ReleaseSpec:
    """The facts of one release that fix its privacy loss (public except ``scale``)."""

    mechanism: str
    """Release mechanism (``exact`` for no noise, ``service`` for a fair-learning service)."""
    epsilon: float
    """Epsilon charged for the whole release (``inf`` for exact)."""
    delta: float = 0.0
    """Delta charged for the whole release."""
    models: int = 1
    """Fresh models released together (cached ones add nothing and are not counted)."""
    bounding: str = "raw"
    """Output bounding (``raw``, ``clamp`` or ``truncate``)."""
    metric: str = "sp"
    """The metric answered."""
    population: int = 0
    """The number of people the metric is computed on: n, or those with y = 1 for EO (public)."""
    scale: float = 0.0
    """The noise scale of one answer actually used, when known (INTERNAL for the
    smooth-sensitivity mechanisms: it depends on the group sizes); 0 when not known."""

    @property
    def exact(self) -> bool:
        """Whether the release has no guarantee at all."""
        if self.mechanism == "service":
            return math.isinf(self.epsilon)
        return self.mechanism not in NOISY or math.isinf(self.epsilon)

    def check(self) -> None:
        """Raise a clear error when the release cannot be accounted."""
        allowed = sorted({*NOISY, "exact", "service"})
        ok = (
            self.mechanism in allowed
            and self.epsilon > 0
            and 0 <= self.delta < 1
            and self.models >= 1
        )
        if not ok:
            raise ValueError(
                BAD_RELEASE.format(
                    allowed=allowed,
                    mechanism=self.mechanism,
                    epsilon=self.epsilon,
                    delta=self.delta,
                    models=self.models,
                )
            )


@dataclass(frozen=True)
class AuditSizes:
    """The group sizes of one audit set: overall, and among the people with y = 1."""

    n1: int
    """Size of the advantaged group."""
    n0: int
    """Size of the disadvantaged group."""
    n11: int = 0
    """Advantaged people with y = 1 (0 when not known)."""
    n10: int = 0
    """Disadvantaged people with y = 1 (0 when not known)."""

    def for_metric(self, metric: str) -> tuple[int, int]:
        """(N1, N0) of the people the metric is computed on."""
        return (self.n11, self.n10) if metric in EO_FAMILY else (self.n1, self.n0)


def float_error(population: int) -> float:
    """The largest change float error can add to one computed answer (``4 n 2^-53``)."""
    return 4.0 * population * 2.0**-53


def swap_shift(n1: int, n0: int) -> float:
    """Largest move of one SP-family answer under a swap at sizes (n1, n0): ``1/n1 + 1/n0``."""
    return 1.0 / n1 + 1.0 / n0


def laplace_units(metric: str, population: int, epsilon: float) -> tuple[float, float]:
    """(gamma, t): the safe Laplace sampler's grid step, and a lower bound on its integer scale,
    for models released at ``epsilon`` each (the calibration epsilon: half for ``truncate``).

    :func:`biasleak.mechanisms.samplers.safe_laplace` calibrates a batch of m models to its l1
    sensitivity ``m Delta_1`` at ``m epsilon``, so its grid step
    ``choose_grid(Delta_1/eps, max(Delta_1, 2^-30 Delta_1/eps))`` does not depend on m, and its
    scale ``t = ceil(K / (m eps))`` with ``K >= m (Delta_1/gamma + 1)`` is at least
    ``(Delta_1/gamma + 1)/eps`` whatever m is; a lower bound on t only raises the shifts ``k/t``,
    so the pairs hold for a model of any batch (a cached value's first release included).
    """
    sens = global_sensitivity(metric, n=population, m=1)
    gamma = choose_grid(sens / epsilon, max(sens, sens / epsilon * 2**-30))
    return gamma, (sens / gamma + 1.0) / epsilon


def smooth_scales(
    metric: str, population: int, models: int, epsilon: float, delta: float, mechanism: str
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """(N1 for every split, the per-model noise scale at that split) of a smooth mechanism.

    The textbook scale (``6 S_beta / eps`` or ``2 S_beta / eps`` of the batch, per model); the
    safe sampler's is a hair larger, so shifts measured against this one are upper bounds.
    """
    n = population
    if mechanism == "attribute_conceal":
        beta, factor = attribute_conceal_beta(epsilon, models), 6.0
    else:
        beta, factor = smooth_laplace_beta(epsilon, delta, models), 2.0
    g = np.arange(1, n, dtype=np.int64)  # N1 of every split
    small = np.minimum(g, n - g).astype(np.float64)
    large = np.maximum(g, n - g).astype(np.float64)
    gs = 0.5 + 1.0 / (n - 1)  # one model
    first = np.minimum(1.0 / (large + 1.0) + 1.0 / small, gs)
    value = np.maximum(first, np.exp(-np.maximum(small - 2.0, 0.0) * beta) * gs)
    if metric.startswith("abs_"):
        value = value * (n / (n + 1.0))
    # the batch's smooth sensitivity is m times one model's, and the noise is per model
    return g, factor * models * value / epsilon


def release_pairs(
    spec: ReleaseSpec, level: Level, sizes: AuditSizes | None = None
) -> tuple[list[tuple[Pair, int]], list[tuple[Pair, int]]]:
    """(flip pairs, swap pairs) of one release, each as (pair, how many), at ``level``.

    ``sizes`` (the audit set's group sizes) is required at the ``audit_set`` level.
    """
    spec.check()
    if spec.exact:
        return [(Pair("exact"), 1)], [(Pair("exact"), 1)]
    m, eps, dlt = spec.models, spec.epsilon, spec.delta
    if spec.mechanism == "service":
        if dlt > 0:
            group = (Pair("approx", 2 * eps, min((1 + math.exp(eps)) * dlt, 0.999999)), 1)
            return [(Pair("approx", eps, dlt), 1)], [group]
        return [(Pair("pure", eps), 1)], [(Pair("pure", 2 * eps), 1)]
    if spec.mechanism == "gaussian":
        group_delta = min((1 + math.exp(min(eps, 700.0))) * dlt, 0.999999)
        return [(Pair("approx", eps, dlt), 1)], [(Pair("approx", 2 * eps, group_delta), 1)]
    n = spec.population
    per_eps = eps / m
    if n < 3 and level == "policy":
        return _unknown_population(spec)
    if n < 3:
        raise ValueError(
            NEEDS_POPULATION.format(mechanism=spec.mechanism, metric=spec.metric, population=n)
        )
    if level == "audit_set" and sizes is None:
        raise ValueError("the audit-set level needs the audit set's group sizes")
    fe = float_error(n)
    if level == "audit_set":
        assert sizes is not None
        a, b = sizes.for_metric(spec.metric)
        if min(a, b) < 1 or a + b != n:
            raise ValueError(
                f"the {spec.metric!r} group sizes of the audit set must be >= 1 and add up to "
                f"the population {n}; received ({a}, {b})"
            )
        flip_d = local_sensitivity(spec.metric, n1=a, n0=b)
        swap_d = swap_shift(a, b)
    else:
        a = b = 0
        flip_d = global_sensitivity(spec.metric, n=n)
        swap_d = 1.0 + 1.0 / (n - 1)  # a swap at N0 = 1
    if spec.mechanism == "laplace":
        truncate = spec.bounding == "truncate"
        gamma, t = laplace_units(spec.metric, n, per_eps / 2.0 if truncate else per_eps)
        flip_s = discrete_laplace_shift((flip_d + fe) / gamma + 1.0, t)
        swap_s = discrete_laplace_shift((swap_d + fe) / gamma + 1.0, t)
        if truncate:
            return [(Pair("pure", 2 * flip_s), m)], [(Pair("pure", 2 * swap_s), m)]
        return [(Pair("laplace", flip_s), m)], [(Pair("laplace", swap_s), m)]
    # the smooth-sensitivity mechanisms
    family = "cauchy" if spec.mechanism == "attribute_conceal" else "laplace"
    if level == "audit_set":
        if spec.scale > 0:
            scale = spec.scale
        else:
            g, scales = smooth_scales(spec.metric, n, m, eps, dlt, spec.mechanism)
            scale = float(scales[g == a][0])
        swap_s = (swap_d + fe) / scale
    else:
        g, scales = smooth_scales(spec.metric, n, m, eps, dlt, spec.mechanism)
        swap_s = float(np.max((1.0 / g + 1.0 / (n - g) + fe) / scales))
    swap = [(Pair(family, swap_s), m)]  # type: ignore[arg-type]
    if spec.mechanism in PURE:
        return [(Pair("pure", per_eps), m)], swap
    return [(Pair("approx", eps, dlt), 1)], swap


def _unknown_population(spec: ReleaseSpec) -> tuple[list[tuple[Pair, int]], list[tuple[Pair, int]]]:
    """Policy-level pairs when the number of people is not known (a log without it).

    Laplace: the flip pair's shift is at most the per-model epsilon (the grid's extra unit is
    inside the calibration) and a swap's at most ``2n/(n + 1) < 2`` times it. The smooth
    mechanisms: their guarantee, and two flips for a swap.
    """
    m, per_eps = spec.models, spec.epsilon / spec.models
    s = per_eps * (1.0 + 1e-9) + 1e-12
    if spec.mechanism == "laplace" and spec.bounding != "truncate":
        return [(Pair("laplace", s), m)], [(Pair("laplace", 2.0 * s), m)]
    if spec.mechanism in PURE:
        return [(Pair("pure", s), m)], [(Pair("pure", 2.0 * s), m)]
    group_delta = min((1 + math.exp(min(spec.epsilon, 700.0))) * spec.delta, 0.999999)
    return [(Pair("approx", spec.epsilon, spec.delta), 1)], [
        (Pair("approx", 2.0 * spec.epsilon, group_delta), 1)
    ]
