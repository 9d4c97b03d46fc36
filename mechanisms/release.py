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

Samplers, chosen with ``sampler=`` (:data:`SAMPLERS`):

``safe`` (the default)
    Floating-point-safe noise (:mod:`~biasleak.mechanisms.samplers`). Every output is an integer
    times a power-of-two grid step chosen from public quantities only (n, m, epsilon, delta, the
    metric), recorded in :attr:`Release.grid`. ``laplace`` rounds the exact values to the grid and
    adds exactly sampled discrete Laplace noise whose scale covers the rounding (at most m extra
    grid units of l1 sensitivity) and the float error of the metric; ``gaussian`` does the same
    with the discrete Gaussian, calibrated through zCDP (Canonne, Kamath and Steinke 2020), a few
    percent more noise than the analytic Gaussian. The smooth-sensitivity mechanisms add the
    continuous Cauchy or Laplace noise and round the real result to the grid EXACTLY (interval
    arithmetic when floats cannot decide), so the output is post-processing of the textbook
    mechanism; their smooth sensitivity gets a tiny documented slack for float error. The
    reported ``noise_scale`` is then the scale actually used (never below the textbook one, at
    most ~1e-5 above it for the Laplace/Cauchy mechanisms).
``naive``
    ``value + noise`` in IEEE doubles, bit-for-bit the historical draws (e.g. Laplace is exactly
    ``v + rng.laplace(0.0, scale, size=v.shape)``). Porous in Mironov's sense (CCS 2012): one
    answer can be impossible under the neighbouring data set and so reveal a person's group,
    whatever epsilon is. Kept only to study that attack.

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
    attribute_conceal): with delta > 0 the probability of the range has no such bound. With the
    safe sampler only ``laplace`` truncates (exact rejection sampling of the discrete Laplace
    conditioned on the range's grid points); ``attribute_conceal`` with ``truncate`` is refused
    there (no exact conditioned Cauchy sampler) and exists only on the naive path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
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
from biasleak.mechanisms.samplers import (
    SIGMA2_DENOMINATOR,
    choose_grid,
    discrete_gaussian,
    discrete_gaussian_sigma,
    discrete_laplace,
    rounded_continuous,
    safe_smooth_sensitivity,
    truncated_discrete_laplace,
)
from biasleak.mechanisms.sensitivity import (
    SENSITIVITY_METRICS,
    attribute_conceal_beta,
    global_sensitivity,
    smooth_laplace_beta,
    smooth_sensitivity,
)

__all__ = [
    "BOUNDINGS",
    "DATA_DEPENDENT",
    "MECHANISMS",
    "MECHANISM_INFO",
    "NEEDS_DELTA",
    "NOISY",
    "PURE",
    "SAMPLERS",
    "MechanismInfo",
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
Sampler = Literal["safe", "naive"]

BOUNDINGS: Final[tuple[str, ...]] = ("raw", "clamp", "truncate")
"""Output bounding modes (Remark 6)."""

SAMPLERS: Final[tuple[str, ...]] = ("safe", "naive")
"""How noise is drawn: ``safe`` (grid release, exact samplers; the default) or ``naive``
(floating-point draws added to the exact value; porous, kept to demonstrate the attack)."""


@dataclass(frozen=True)
class _Job:
    """Everything one calibration needs, checked by :func:`release`."""

    values: NDArray[np.float64]
    metric: str
    n1: int
    n0: int
    m: int
    epsilon: float
    """The epsilon the noise is calibrated to (half the release's for ``truncate``)."""
    delta: float
    rng: np.random.Generator
    bounding: str
    low: float
    high: float
    safe: bool

    @property
    def n(self) -> int:
        return self.n1 + self.n0

    @property
    def float_error(self) -> float:
        """Largest change the float error of the computed metric can add between neighbours
        (l1, over the m answers)."""
        return 4.0 * self.m * self.n * 2.0**-53


Calibrated = tuple[NDArray[np.float64], float, float, float]
"""(noisy values, noise scale, sensitivity, grid step) of one calibration."""


@dataclass(frozen=True)
class MechanismInfo:
    """What the rest of biasleak needs to know about one release mechanism."""

    needs_delta: bool
    """Whether a finite-epsilon release needs 0 < delta < 1 ((eps, delta)-DP)."""
    data_dependent: bool
    """Whether the noise scale depends on the protected attribute (never publish it)."""
    truncate: Literal["both", "naive", "never"]
    """Which samplers can release with ``bounding='truncate'``."""
    calibrate: Callable[[_Job], Calibrated] | None
    """Draws the noisy values; ``None`` for ``exact``."""

    @property
    def noisy(self) -> bool:
        """Whether the mechanism adds noise (has a privacy guarantee)."""
        return self.calibrate is not None

    @property
    def pure(self) -> bool:
        """Whether the mechanism is pure eps-DP (delta 0)."""
        return self.noisy and not self.needs_delta


def _calibrate_laplace(job: _Job) -> Calibrated:
    sens = global_sensitivity(job.metric, n=job.n, m=job.m)
    if not job.safe:
        scale = sens / job.epsilon
        out = _add_noise(job.values, scale, "laplace", job.rng, job.bounding, job.low, job.high)
        return out, scale, sens, 0.0
    out, scale, grid = _safe_laplace(
        job.values,
        sensitivity=sens,
        float_error=job.float_error,
        epsilon=job.epsilon,
        rng=job.rng,
        bounding=job.bounding,
        low=job.low,
        high=job.high,
    )
    return out, scale, sens, grid


def _calibrate_gaussian(job: _Job) -> Calibrated:
    sens = global_sensitivity(job.metric, n=job.n, m=job.m, norm="l2")
    if not job.safe:
        scale = analytic_gaussian_sigma(l2_sensitivity=sens, epsilon=job.epsilon, delta=job.delta)
        out = _add_noise(job.values, scale, "normal", job.rng, job.bounding, job.low, job.high)
        return out, scale, sens, 0.0
    out, scale, grid = _safe_gaussian(
        job.values,
        l2_sensitivity=sens,
        float_error=job.float_error / math.sqrt(job.m),
        epsilon=job.epsilon,
        delta=job.delta,
        rng=job.rng,
        bounding=job.bounding,
        low=job.low,
        high=job.high,
    )
    return out, scale, sens, grid


def _calibrate_smooth(job: _Job, *, beta: float, factor: float, family: str) -> Calibrated:
    """Smooth sensitivity at ``beta`` times ``factor`` / eps, noise of ``family``."""

    def smooth_at(b: float) -> float:
        return smooth_sensitivity(job.metric, n1=job.n1, n0=job.n0, m=job.m, beta=b)

    if not job.safe:
        sens = smooth_at(beta)
        scale = factor * sens / job.epsilon
        out = _add_noise(
            job.values,
            scale,
            family,  # type: ignore[arg-type]
            job.rng,
            job.bounding,
            job.low,
            job.high,
        )
        return out, scale, sens, 0.0
    sens = safe_smooth_sensitivity(smooth_at, beta=beta, n=job.n, m=job.m)
    scale = factor * sens / job.epsilon
    # S_beta >= LS >= m / (n + 1) for every metric and group split: a public bound.
    public_scale = factor * (job.m / (job.n + 1.0)) / job.epsilon
    out, grid = _safe_continuous(
        job.values,
        scale=scale,
        public_scale=public_scale,
        family=family,  # type: ignore[arg-type]
        rng=job.rng,
        bounding=job.bounding,
        low=job.low,
        high=job.high,
    )
    return out, scale, sens, grid


def _calibrate_attribute_conceal(job: _Job) -> Calibrated:
    beta = attribute_conceal_beta(job.epsilon, job.m)
    return _calibrate_smooth(job, beta=beta, factor=6.0, family="cauchy")


def _calibrate_smooth_laplace(job: _Job) -> Calibrated:
    beta = smooth_laplace_beta(job.epsilon, job.delta, job.m)
    return _calibrate_smooth(job, beta=beta, factor=2.0, family="laplace")


MECHANISM_INFO: Final[dict[str, MechanismInfo]] = {
    "exact": MechanismInfo(False, False, "both", None),
    "laplace": MechanismInfo(False, False, "both", _calibrate_laplace),
    "attribute_conceal": MechanismInfo(False, True, "naive", _calibrate_attribute_conceal),
    "smooth_laplace": MechanismInfo(True, True, "never", _calibrate_smooth_laplace),
    "gaussian": MechanismInfo(True, False, "never", _calibrate_gaussian),
}
"""The release registry: mechanism name -> its facts and calibration. Every list of mechanisms
in biasleak (scenario schema, policies, the ceiling) is derived from it."""

MECHANISMS: Final[tuple[str, ...]] = tuple(MECHANISM_INFO)
"""Names of the release mechanisms, as used by :func:`release` and scenario files."""

DATA_DEPENDENT: Final = frozenset(k for k, v in MECHANISM_INFO.items() if v.data_dependent)
"""Mechanisms whose noise scale depends on the protected attribute (never publish it)."""

NEEDS_DELTA: Final = frozenset(k for k, v in MECHANISM_INFO.items() if v.needs_delta)
"""Mechanisms that need 0 < delta < 1 for a finite epsilon."""

PURE: Final = frozenset(k for k, v in MECHANISM_INFO.items() if v.pure)
"""Mechanisms that are pure eps-DP (delta 0)."""

NOISY: Final = frozenset(k for k, v in MECHANISM_INFO.items() if v.noisy)
"""Mechanisms with a privacy guarantee."""

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
TRUNCATE_SAFE_CAUCHY: Final = (
    "bounding='truncate' with sampler='safe' is exact only for 'laplace' (discrete Laplace "
    "conditioned on the range); for {mechanism!r} no exact conditioned sampler is implemented. "
    "Use bounding='clamp' (free post-processing), or sampler='naive' to study the float path"
)
GRID_TOO_FINE: Final = (
    "the exact values are too large for the release grid ({gamma!r}): |value / grid| must stay "
    "below 2^52; received values up to {largest!r}"
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
    sampler: str = "safe"
    """How the noise was drawn (one of :data:`SAMPLERS`). Public."""
    grid: float = 0.0
    """Grid step of the safe sampler (a power of two; 0 for naive or exact releases). Public:
    it is chosen from n, m, epsilon, delta and the metric only."""


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


def _grid_ints(v: NDArray[np.float64], gamma: float) -> NDArray[np.int64]:
    k = np.round(v / gamma)
    largest = float(np.max(np.abs(k))) if k.size else 0.0
    if largest >= 2.0**52:
        raise ValueError(GRID_TOO_FINE.format(gamma=gamma, largest=float(np.max(np.abs(v)))))
    return k.astype(np.int64)


def _safe_laplace(
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
    # l1 sensitivity of the rounded answers in grid units (see samplers): Delta/gamma + m, plus
    # the float error of the exact values; the relative 1e-12 covers the float evaluation.
    k_float = ((sensitivity + float_error) / gamma + m) * (1.0 + 1e-12)
    k_units = math.ceil(k_float)
    t = math.ceil(Fraction(k_units) / Fraction(epsilon))  # scale t/1 >= K/eps, rounded up
    if t >= 2**62:
        raise ValueError(
            f"discrete Laplace scale {t} grid units is beyond 2^62; epsilon = {epsilon!r} is too "
            "small for an exact release"
        )
    k = _grid_ints(v, gamma)
    if bounding == "truncate":
        lo_k, hi_k = math.ceil(low / gamma), math.floor(high / gamma)
        out_k = truncated_discrete_laplace(k, lo_k, hi_k, t, 1, rng)
    else:
        out_k = k + discrete_laplace(t, 1, k.shape, rng)
    out = out_k.astype(np.float64) * gamma
    if bounding == "clamp":
        out = np.clip(out, low, high)
    return out, t * gamma, gamma


def _safe_gaussian(
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
    k = _grid_ints(v, gamma)
    out = (k + discrete_gaussian(sigma2, k.shape, rng)).astype(np.float64) * gamma
    if bounding == "clamp":
        out = np.clip(out, low, high)
    return out, math.sqrt(sigma2) * gamma, gamma


def _safe_continuous(
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
    sampler: Sampler | str = "safe",
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
    sampler : {"safe", "naive"}
        ``safe`` (default): grid release with exactly sampled noise (module docstring and
        :mod:`~biasleak.mechanisms.samplers`). ``naive``: floating-point noise added to the exact
        value, bit-for-bit the historical draws; porous, for studying the attack only.
    """
    mech = check_choice(mechanism, MECHANISMS, name="mechanism")
    sampler_ = check_choice(sampler, SAMPLERS, name="sampler")
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
        if not MECHANISM_INFO[mech].needs_delta:
            dlt = 0.0
    if MECHANISM_INFO[mech].truncate == "never" and bound_mode == "truncate":
        raise ValueError(TRUNCATE_NEEDS_PURE.format(mechanism=mech))
    if n1 is None or n0 is None:
        if mech != "exact":
            raise ValueError(f"mechanism {mech!r} needs the group sizes n1 and n0")
        n1_, n0_ = 0, 0
    else:
        n1_ = check_int(n1, name="n1", minimum=1)
        n0_ = check_int(n0, name="n0", minimum=1)

    info = MECHANISM_INFO[mech]
    shape = np.shape(values)
    if info.calibrate is None or math.isinf(eps):
        out = np.clip(v, low, high) if bound_mode != "raw" else v.copy()
        return Release(
            out.reshape(shape),
            mech,
            math.inf,
            0.0,
            0.0,
            0.0,
            info.data_dependent,
            bound_mode,
            sampler_,
            0.0,
        )
    safe = sampler_ == "safe"
    if safe and bound_mode == "truncate" and info.truncate == "naive":
        raise ValueError(TRUNCATE_SAFE_CAUCHY.format(mechanism=mech))
    # Truncation spends the budget twice (see the module docstring): calibrate to eps / 2.
    job = _Job(
        v,
        metric_,
        n1_,
        n0_,
        m_,
        eps / 2.0 if bound_mode == "truncate" else eps,
        dlt,
        rng,
        bound_mode,
        low,
        high,
        safe,
    )
    out, scale, sens, grid = info.calibrate(job)
    return Release(
        out.reshape(shape),
        mech,
        eps,
        dlt,
        scale,
        sens,
        info.data_dependent,
        bound_mode,
        sampler_,
        grid,
    )


def laplace(
    values: ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    bounding: Bounding | str = "raw",
    bounds: tuple[float, float] = (-1.0, 1.0),
    sampler: Sampler | str = "safe",
) -> NDArray[np.float64]:
    """Laplace mechanism: ``values + Lap(sensitivity / epsilon)`` per value (eps-DP).

    ``sensitivity`` is the l1 sensitivity of the whole vector of values, e.g.
    ``global_sensitivity("sp", n=n, m=len(values))``. Returns an array of the shape of
    ``values``. ``epsilon = inf`` returns the values unchanged. With ``sampler="safe"`` the
    values are rounded to a grid and discrete Laplace noise is added (see
    :mod:`~biasleak.mechanisms.samplers`); the values are taken as exact, so ``sensitivity`` must
    cover any float error they carry (:func:`release` adds that slack itself).
    """
    sens = check_positive(sensitivity, name="sensitivity")
    eps = check_epsilon(epsilon)
    bound_mode = check_choice(bounding, BOUNDINGS, name="bounding")
    sampler_ = check_choice(sampler, SAMPLERS, name="sampler")
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
        if sampler_ == "safe":
            out, _, _ = _safe_laplace(
                v,
                sensitivity=sens,
                float_error=0.0,
                epsilon=eps_cal,
                rng=rng,
                bounding=bound_mode,
                low=low,
                high=high,
            )
        else:
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
    sampler: Sampler | str = "safe",
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
        sampler=sampler,
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
    sampler: Sampler | str = "safe",
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
        sampler=sampler,
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
    sampler: Sampler | str = "safe",
) -> NDArray[np.float64]:
    """Gaussian mechanism with the given l2 sensitivity ((eps, delta)-DP).

    ``sampler="naive"``: the analytic Gaussian (Balle and Wang 2018) in floats. ``"safe"``: grid
    release with discrete Gaussian noise calibrated through zCDP (CKS 2020, Theorem 14 and
    Corollary 13); the values are taken as exact.
    """
    eps = check_epsilon(epsilon)
    bound_mode = check_choice(bounding, BOUNDINGS, name="bounding")
    sampler_ = check_choice(sampler, SAMPLERS, name="sampler")
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
        if sampler_ == "safe":
            out, _, _ = _safe_gaussian(
                v,
                l2_sensitivity=float(l2_sensitivity),
                float_error=0.0,
                epsilon=eps,
                delta=float(delta),
                rng=rng,
                bounding=bound_mode,
                low=low,
                high=high,
            )
        else:
            sigma = analytic_gaussian_sigma(l2_sensitivity=l2_sensitivity, epsilon=eps, delta=delta)
            out = _add_noise(v, sigma, "normal", rng, bound_mode, low, high)
    return out.reshape(np.shape(values))
