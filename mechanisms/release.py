r"""Releases: turn exact fairness answers into differentially private ones.

Every release takes the exact values (one per model answered together), what its calibration
needs, the privacy parameters and a seeded :class:`numpy.random.Generator`, and returns the noisy
values. Neighbouring data sets differ in ONE person's protected attribute (see
:mod:`biasleak.mechanisms.sensitivity`).

Mechanisms (:data:`MECHANISMS`):

``exact``
    No noise (``epsilon = inf`` means this for every mechanism). No privacy.
``laplace``
    Laplace noise of scale ``Delta / eps`` with the global l1 sensitivity of the m answers
    (Hamman et al., Theorems 3-4; Dwork and Roth 2014). eps-DP. Data-independent scale.
``attribute_conceal``
    The paper's Algorithm 3: ``answer + 6 S_beta / eps * Z`` with Z standard Cauchy per answer and
    ``S_beta`` the beta-smooth sensitivity at ``beta = eps/(6 m)`` (Theorem 6). eps-DP.
``smooth_laplace``
    Smooth sensitivity with Laplace noise of scale ``2 S_beta / eps`` (Theorem 7), with beta from
    :func:`~biasleak.mechanisms.sensitivity.smooth_laplace_beta`. (eps, delta)-DP.
``gaussian``
    The analytic Gaussian mechanism (Balle and Wang 2018) with the global l2 sensitivity:
    the smallest sigma whose privacy profile meets (eps, delta) exactly, valid for every eps > 0.

The noise scale of a data-dependent mechanism (the smooth-sensitivity ones) depends on the group
sizes N0 and N1, so publishing it would leak them and void the guarantee. The named functions
(:func:`laplace`, :func:`attribute_conceal`, ...) therefore return only the noisy values;
:func:`release` returns a :class:`Release` whose ``noise_scale`` is for the compliance side's
internal log and must never reach a developer.

Output bounding (Remark 6), chosen with ``bounding=``:

``raw``
    Release as drawn (may fall outside the metric's range).
``clamp``
    Map values outside the range to its nearest end. Post-processing: no extra privacy cost.
``truncate``
    Draw from the noise distribution conditioned on the answer landing in the range (the same
    distribution as re-drawing until it does, sampled exactly by inverting the CDF). Conditioning
    divides the density by ``P[answer in range]``, which itself varies by up to ``e^eps`` between
    neighbours, so the guarantee would be 2 eps; the noise is therefore calibrated to ``eps/2``,
    which keeps the release eps-DP. Only for the pure eps-DP mechanisms (laplace,
    attribute_conceal): with delta > 0 the probability of the range has no such bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special, stats

from biasleak.mechanisms._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from biasleak.mechanisms.metrics import METRIC_RANGES
from biasleak.mechanisms.sensitivity import (
    SENSITIVITY_METRICS,
    attribute_conceal_beta,
    global_sensitivity,
    smooth_laplace_beta,
    smooth_sensitivity,
)

__all__ = [
    "BOUNDINGS",
    "MECHANISMS",
    "Release",
    "analytic_gaussian_sigma",
    "attribute_conceal",
    "gaussian",
    "laplace",
    "release",
    "smooth_laplace",
]

Mechanism = Literal["exact", "laplace", "attribute_conceal", "smooth_laplace", "gaussian"]
Bounding = Literal["raw", "clamp", "truncate"]

MECHANISMS: Final[tuple[str, ...]] = (
    "exact",
    "laplace",
    "attribute_conceal",
    "smooth_laplace",
    "gaussian",
)
"""Names of the release mechanisms, as used by :func:`release` and scenario files."""

BOUNDINGS: Final[tuple[str, ...]] = ("raw", "clamp", "truncate")
"""Output bounding modes (Remark 6)."""

DATA_DEPENDENT: Final = frozenset({"attribute_conceal", "smooth_laplace"})
"""Mechanisms whose noise scale depends on the protected attribute (never publish it)."""

NEEDS_DELTA: Final = frozenset({"smooth_laplace", "gaussian"})

VALUES_SIZE: Final = (
    "values must hold one exact answer per model, m = {m}; received {size} value(s) "
    "of shape {shape}"
)
VALUES_NOT_FINITE: Final = "values must be finite exact answers; received {values}"
TRUNCATE_NEEDS_PURE: Final = (
    "bounding='truncate' needs a pure eps-DP mechanism ('laplace' or 'attribute_conceal'); "
    "{mechanism!r} has delta > 0, for which conditioning on the range has no privacy bound. "
    "Use bounding='clamp' (free post-processing) or 'raw'"
)
BOUNDS_INVALID: Final = (
    "bounds must be (low, high) with low < high, both finite; received {value!r}"
)


@dataclass(frozen=True)
class Release:
    """The outcome of one release, for the compliance side.

    Only ``values`` (and the public parameters ``mechanism``, ``epsilon``, ``delta``) may be sent
    to a developer; ``noise_scale`` and ``sensitivity`` are internal for data-dependent mechanisms.
    """

    values: NDArray[np.float64]
    """The released answers, same shape as the exact values (0-d for a scalar)."""
    mechanism: str
    """Name of the mechanism (one of :data:`MECHANISMS`)."""
    epsilon: float
    """Privacy loss of this release (``inf`` for exact answers)."""
    delta: float
    """Failure probability of this release (0 for pure eps-DP)."""
    noise_scale: float
    """Scale of the noise actually added (Laplace b, Cauchy scale or Gaussian sigma). INTERNAL."""
    sensitivity: float
    """The (global or smooth) sensitivity the scale was calibrated to. INTERNAL."""
    data_dependent: bool
    """True when ``noise_scale`` depends on the protected attribute."""
    bounding: str
    """How out-of-range outputs were handled (one of :data:`BOUNDINGS`)."""


def _values(values: ArrayLike, m: int | None) -> NDArray[np.float64]:
    try:
        v = np.array(values, dtype=np.float64, ndmin=1)
    except (TypeError, ValueError):
        raise ValueError(VALUES_NOT_FINITE.format(values=values)) from None
    if v.size == 0:
        raise ValueError("values must hold at least one exact answer; received none")
    if m is not None and v.size != m:
        raise ValueError(VALUES_SIZE.format(m=m, size=v.size, shape=np.shape(values)))
    if not np.all(np.isfinite(v)):
        raise ValueError(VALUES_NOT_FINITE.format(values=v[~np.isfinite(v)][:3].tolist()))
    return v


def _bounds(bounds: tuple[float, float] | None, metric: str) -> tuple[float, float]:
    if bounds is None:
        return METRIC_RANGES[metric]
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(BOUNDS_INVALID.format(value=bounds)) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(BOUNDS_INVALID.format(value=bounds))
    return low, high


def _add_noise(
    v: NDArray[np.float64],
    scale: float,
    family: Literal["laplace", "cauchy", "normal"],
    rng: np.random.Generator,
    bounding: str,
    low: float,
    high: float,
) -> NDArray[np.float64]:
    if scale == 0.0:
        out = v.copy()
    elif bounding == "truncate":
        dist = {"laplace": stats.laplace, "cauchy": stats.cauchy}[family]
        u = rng.uniform(size=v.shape)
        # Inverse-CDF sampling of the law conditioned on [low, high]. Work in the tail the range
        # lies in, so that tiny probabilities keep their digits: the survival function when the
        # value is below the range, the CDF otherwise.
        below = v < low
        lo_p = np.where(below, dist.sf(high, loc=v, scale=scale), dist.cdf(low, loc=v, scale=scale))
        hi_p = np.where(below, dist.sf(low, loc=v, scale=scale), dist.cdf(high, loc=v, scale=scale))
        q = lo_p + u * (hi_p - lo_p)
        out = np.where(below, dist.isf(q, loc=v, scale=scale), dist.ppf(q, loc=v, scale=scale))
        # A value inside the range whose noise is so wide that the range holds under ~1e-9 of
        # the mass: the conditioned law is uniform on the range to machine precision, and the
        # inverse CDF has no digits left. Draw it directly.
        flat = ((hi_p - lo_p) < 1e-9) & (v >= low) & (v <= high)
        out = np.where(flat, low + u * (high - low), out)
        out = np.clip(out, low, high)  # guard against round-off just past an end
    else:
        if family == "laplace":
            noise = rng.laplace(0.0, scale, size=v.shape)
        elif family == "cauchy":
            noise = scale * rng.standard_cauchy(size=v.shape)
        else:
            noise = rng.normal(0.0, scale, size=v.shape)
        out = v + noise
        if bounding == "clamp":
            out = np.clip(out, low, high)
    return np.asarray(out, dtype=np.float64)


def analytic_gaussian_sigma(*, l2_sensitivity: float, epsilon: float, delta: float) -> float:
    r"""Smallest sigma for which Gaussian noise is (eps, delta)-DP (Balle and Wang 2018, Thm 8).

    Solves :math:`\Phi(\Delta/(2\sigma) - \varepsilon\sigma/\Delta)
    - e^\varepsilon \Phi(-\Delta/(2\sigma) - \varepsilon\sigma/\Delta) = \delta` for sigma; the
    left side decreases in sigma. Unlike the classical ``sqrt(2 ln(1.25/delta)) Delta / eps``
    it is valid for every eps > 0 and never larger.
    """
    sens = check_positive(l2_sensitivity, name="l2_sensitivity")
    eps = check_epsilon(epsilon, allow_inf=False)
    d = check_delta(delta)

    def excess(log_sigma: float) -> float:
        s = math.exp(log_sigma)
        a, b = sens / (2.0 * s), eps * s / sens
        return float(special.ndtr(a - b) - math.exp(eps + special.log_ndtr(-a - b))) - d

    lo, hi = math.log(sens) - 10.0, math.log(sens) + 10.0
    while excess(lo) < 0.0:
        lo -= 10.0
    while excess(hi) > 0.0:
        hi += 10.0
    root = optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14)
    # brentq brackets the root; step to the side that satisfies the inequality.
    sigma = math.exp(root)
    while excess(math.log(sigma)) > 0.0:
        sigma = math.nextafter(sigma, math.inf) * (1.0 + 1e-12)
    return sigma


def release(
    mechanism: Mechanism | str,
    values: ArrayLike,
    *,
    metric: str = "sp",
    n1: int | None = None,
    n0: int | None = None,
    m: int | None = None,
    epsilon: float,
    delta: float = 0.0,
    rng: np.random.Generator,
    bounding: Bounding | str = "raw",
    bounds: tuple[float, float] | None = None,
) -> Release:
    """Release m exact fairness answers through a named mechanism.

    Parameters
    ----------
    mechanism : one of :data:`MECHANISMS`
    values : array of m exact answers (one per model)
    metric : {"sp", "abs_sp", "eo", "abs_eo"}
        Which query was answered (sets the sensitivity and the output range).
    n1, n0 : int
        Group sizes in the audit set (for EO, among people with y = 1). The global-sensitivity
        mechanisms use only their sum n; the smooth ones use both.
    m : int, optional
        Number of models answered together (defaults to the number of values).
    epsilon : float
        Privacy loss of the whole release (``math.inf`` for exact answers).
    delta : float
        Failure probability, required in (0, 1) by ``smooth_laplace`` and ``gaussian``.
    rng : numpy.random.Generator
        Source of all randomness.
    bounding : {"raw", "clamp", "truncate"}
    bounds : (low, high), optional
        Output range; defaults to the metric's range.
    """
    mech = check_choice(mechanism, MECHANISMS, name="mechanism")
    metric_ = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    bound_mode = check_choice(bounding, BOUNDINGS, name="bounding")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (seeded); received {type(rng).__name__}"
        )
    v = _values(values, m)
    m_ = v.size if m is None else check_int(m, name="m", minimum=1)
    eps = check_epsilon(epsilon)
    low, high = _bounds(bounds, metric_)
    if mech in NEEDS_DELTA and not math.isinf(eps):
        dlt = check_delta(delta)
    else:
        dlt = check_delta(delta, allow_zero=True)
        if mech in ("laplace", "attribute_conceal", "exact"):
            dlt = 0.0
    if mech in NEEDS_DELTA and bound_mode == "truncate":
        raise ValueError(TRUNCATE_NEEDS_PURE.format(mechanism=mech))
    if n1 is None or n0 is None:
        if mech != "exact":
            raise ValueError(f"mechanism {mech!r} needs the group sizes n1 and n0")
        n1_, n0_ = 0, 0
    else:
        n1_ = check_int(n1, name="n1", minimum=1)
        n0_ = check_int(n0, name="n0", minimum=1)

    data_dependent = mech in DATA_DEPENDENT
    shape = np.shape(values)
    if mech == "exact" or math.isinf(eps):
        out = np.clip(v, low, high) if bound_mode != "raw" else v.copy()
        return Release(
            out.reshape(shape), mech, math.inf, 0.0, 0.0, 0.0, data_dependent, bound_mode
        )

    # Truncation spends the budget twice (see the module docstring): calibrate to eps / 2.
    eps_cal = eps / 2.0 if bound_mode == "truncate" else eps
    n = n1_ + n0_
    if mech == "laplace":
        sens = global_sensitivity(metric_, n=n, m=m_)
        scale, family = sens / eps_cal, "laplace"
    elif mech == "attribute_conceal":
        beta = attribute_conceal_beta(eps_cal, m_)
        sens = smooth_sensitivity(metric_, n1=n1_, n0=n0_, m=m_, beta=beta)
        scale, family = 6.0 * sens / eps_cal, "cauchy"
    elif mech == "smooth_laplace":
        beta = smooth_laplace_beta(eps_cal, dlt, m_)
        sens = smooth_sensitivity(metric_, n1=n1_, n0=n0_, m=m_, beta=beta)
        scale, family = 2.0 * sens / eps_cal, "laplace"
    else:  # gaussian
        sens = global_sensitivity(metric_, n=n, m=m_, norm="l2")
        scale = analytic_gaussian_sigma(l2_sensitivity=sens, epsilon=eps_cal, delta=dlt)
        family = "normal"
    out = _add_noise(v, scale, family, rng, bound_mode, low, high)  # type: ignore[arg-type]
    return Release(out.reshape(shape), mech, eps, dlt, scale, sens, data_dependent, bound_mode)


def laplace(
    values: ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    bounding: Bounding | str = "raw",
    bounds: tuple[float, float] = (-1.0, 1.0),
) -> NDArray[np.float64]:
    """Laplace mechanism: ``values + Lap(sensitivity / epsilon)`` per value (eps-DP).

    ``sensitivity`` is the l1 sensitivity of the whole vector of values, e.g.
    ``global_sensitivity("sp", n=n, m=len(values))``. Returns an array of the shape of
    ``values``. ``epsilon = inf`` returns the values unchanged.
    """
    sens = check_positive(sensitivity, name="sensitivity")
    eps = check_epsilon(epsilon)
    bound_mode = check_choice(bounding, BOUNDINGS, name="bounding")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (seeded); received {type(rng).__name__}"
        )
    v = _values(values, None)
    low, high = _bounds(bounds, "sp")
    if math.isinf(eps):
        out = np.clip(v, low, high) if bound_mode != "raw" else v.copy()
    else:
        eps_cal = eps / 2.0 if bound_mode == "truncate" else eps
        out = _add_noise(v, sens / eps_cal, "laplace", rng, bound_mode, low, high)
    return out.reshape(np.shape(values))


def attribute_conceal(
    values: ArrayLike,
    *,
    n1: int,
    n0: int,
    m: int,
    epsilon: float,
    rng: np.random.Generator,
    metric: str = "sp",
    bounding: Bounding | str = "raw",
) -> NDArray[np.float64]:
    """Attribute-Conceal (Algorithm 3): smooth sensitivity with Cauchy noise, eps-DP.

    Adds ``6 S_beta / eps * Z`` to each of the m values, Z standard Cauchy, ``beta = eps/(6m)``.
    The scale depends on n1 and n0 and is not returned; use :func:`release` for it.
    """
    rel = release(
        "attribute_conceal",
        values,
        metric=metric,
        n1=n1,
        n0=n0,
        m=m,
        epsilon=epsilon,
        rng=rng,
        bounding=bounding,
    )
    return rel.values


def smooth_laplace(
    values: ArrayLike,
    *,
    n1: int,
    n0: int,
    m: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    metric: str = "sp",
    bounding: Bounding | str = "raw",
) -> NDArray[np.float64]:
    """Smooth sensitivity with Laplace noise of scale ``2 S_beta / eps`` ((eps, delta)-DP)."""
    rel = release(
        "smooth_laplace",
        values,
        metric=metric,
        n1=n1,
        n0=n0,
        m=m,
        epsilon=epsilon,
        delta=delta,
        rng=rng,
        bounding=bounding,
    )
    return rel.values


def gaussian(
    values: ArrayLike,
    *,
    l2_sensitivity: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    bounding: Literal["raw", "clamp"] | str = "raw",
    bounds: tuple[float, float] = (-1.0, 1.0),
) -> NDArray[np.float64]:
    """Analytic Gaussian mechanism with the given l2 sensitivity ((eps, delta)-DP)."""
    eps = check_epsilon(epsilon)
    bound_mode = check_choice(bounding, BOUNDINGS, name="bounding")
    if bound_mode == "truncate":
        raise ValueError(TRUNCATE_NEEDS_PURE.format(mechanism="gaussian"))
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (seeded); received {type(rng).__name__}"
        )
    v = _values(values, None)
    low, high = _bounds(bounds, "sp")
    check_positive(l2_sensitivity, name="l2_sensitivity")
    check_delta(delta)
    if math.isinf(eps):
        out = np.clip(v, low, high) if bound_mode != "raw" else v.copy()
    else:
        sigma = analytic_gaussian_sigma(l2_sensitivity=l2_sensitivity, epsilon=eps, delta=delta)
        out = _add_noise(v, sigma, "normal", rng, bound_mode, low, high)
    return out.reshape(np.shape(values))
