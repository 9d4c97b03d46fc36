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
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from biasleak.mechanisms.calibrate import (
    Calibrated,
    Job,
    calibrate_attribute_conceal,
    calibrate_gaussian,
    calibrate_laplace,
    calibrate_smooth_laplace,
)
from biasleak.mechanisms.gaussian_sigma import analytic_gaussian_sigma
from biasleak.mechanisms.grid import GRID_TOO_FINE
from biasleak.mechanisms.metrics import METRIC_RANGES
from biasleak.mechanisms.naive_noise import add_noise
from biasleak.mechanisms.samplers import safe_gaussian, safe_laplace
from biasleak.mechanisms.sensitivity import SENSITIVITY_METRICS

__all__ = [
    "BOUNDINGS",
    "DATA_DEPENDENT",
    "GRID_TOO_FINE",
    "MECHANISMS",
    "MECHANISM_INFO",
    "NEEDS_DELTA",
    "NOISY",
    "PURE",
    "SAMPLERS",
    "Calibrated",
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
class MechanismInfo:
    """What the rest of biasleak needs to know about one release mechanism."""

    needs_delta: bool
    """Whether a finite-epsilon release needs 0 < delta < 1 ((eps, delta)-DP)."""
    data_dependent: bool
    """Whether the noise scale depends on the protected attribute (never publish it)."""
    truncate: Literal["both", "naive", "never"]
    """Which samplers can release with ``bounding='truncate'``."""
    calibrate: Callable[[Job], Calibrated] | None
    """Draws the noisy values; ``None`` for ``exact``."""

    @property
    def noisy(self) -> bool:
        """Whether the mechanism adds noise (has a privacy guarantee)."""
        return self.calibrate is not None

    @property
    def pure(self) -> bool:
        """Whether the mechanism is pure eps-DP (delta 0)."""
        return self.noisy and not self.needs_delta


MECHANISM_INFO: Final[dict[str, MechanismInfo]] = {
    "exact": MechanismInfo(False, False, "both", None),
    "laplace": MechanismInfo(False, False, "both", calibrate_laplace),
    "attribute_conceal": MechanismInfo(False, True, "naive", calibrate_attribute_conceal),
    "smooth_laplace": MechanismInfo(True, True, "never", calibrate_smooth_laplace),
    "gaussian": MechanismInfo(True, False, "never", calibrate_gaussian),
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
    job = Job(
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
            out, _, _ = safe_laplace(
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
            out = add_noise(v, sens / eps_cal, "laplace", rng, bound_mode, low, high)
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
            out, _, _ = safe_gaussian(
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
            out = add_noise(v, sigma, "normal", rng, bound_mode, low, high)
    return out.reshape(np.shape(values))
