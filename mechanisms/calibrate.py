"""Calibration: how each release mechanism turns a checked job into noisy values.

:func:`~biasleak.mechanisms.release.release` checks its arguments once and packs them into a
:class:`Job`; the mechanism's entry in :data:`~biasleak.mechanisms.release.MECHANISM_INFO` then
calibrates it. A calibration decides which sensitivity the noise must cover (the global l1 or l2
sensitivity, or the smooth sensitivity at the mechanism's beta), the noise scale that follows
from it and epsilon (and delta), and draws the noise through the chosen sampler:

- ``safe``: the grid releases of :mod:`~biasleak.mechanisms.samplers` (discrete Laplace or
  Gaussian for the data-independent scales, exactly rounded continuous noise for the
  smooth-sensitivity ones, whose sensitivity then carries a small float-error margin);
- ``naive``: float noise added to the exact value (:mod:`~biasleak.mechanisms.naive_noise`).

Every calibration returns :data:`Calibrated`: the noisy values, the scale actually used, the
sensitivity it was calibrated to and the grid step (0 for the naive path). Adding a mechanism
means writing one such function and registering it in ``MECHANISM_INFO``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms.gaussian_sigma import analytic_gaussian_sigma
from biasleak.mechanisms.naive_noise import add_noise
from biasleak.mechanisms.rounded_noise import safe_smooth_sensitivity
from biasleak.mechanisms.samplers import safe_continuous, safe_gaussian, safe_laplace
from biasleak.mechanisms.sensitivity import (
    attribute_conceal_beta,
    global_sensitivity,
    smooth_laplace_beta,
    smooth_sensitivity,
)

__all__ = [
    "Calibrated",
    "Job",
    "calibrate_attribute_conceal",
    "calibrate_gaussian",
    "calibrate_laplace",
    "calibrate_smooth",
    "calibrate_smooth_laplace",
]


@dataclass(frozen=True)
class Job:
    """Everything one calibration needs, checked by :func:`~biasleak.mechanisms.release.release`."""

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


def calibrate_laplace(job: Job) -> Calibrated:
    sens = global_sensitivity(job.metric, n=job.n, m=job.m)
    if not job.safe:
        scale = sens / job.epsilon
        out = add_noise(job.values, scale, "laplace", job.rng, job.bounding, job.low, job.high)
        return out, scale, sens, 0.0
    out, scale, grid = safe_laplace(
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


def calibrate_gaussian(job: Job) -> Calibrated:
    sens = global_sensitivity(job.metric, n=job.n, m=job.m, norm="l2")
    if not job.safe:
        scale = analytic_gaussian_sigma(l2_sensitivity=sens, epsilon=job.epsilon, delta=job.delta)
        out = add_noise(job.values, scale, "normal", job.rng, job.bounding, job.low, job.high)
        return out, scale, sens, 0.0
    out, scale, grid = safe_gaussian(
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


def calibrate_smooth(job: Job, *, beta: float, factor: float, family: str) -> Calibrated:
    """Smooth sensitivity at ``beta`` times ``factor`` / eps, noise of ``family``."""

    def smooth_at(b: float) -> float:
        return smooth_sensitivity(job.metric, n1=job.n1, n0=job.n0, m=job.m, beta=b)

    if not job.safe:
        sens = smooth_at(beta)
        scale = factor * sens / job.epsilon
        out = add_noise(
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
    out, grid = safe_continuous(
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


def calibrate_attribute_conceal(job: Job) -> Calibrated:
    beta = attribute_conceal_beta(job.epsilon, job.m)
    return calibrate_smooth(job, beta=beta, factor=6.0, family="cauchy")


def calibrate_smooth_laplace(job: Job) -> Calibrated:
    beta = smooth_laplace_beta(job.epsilon, job.delta, job.m)
    return calibrate_smooth(job, beta=beta, factor=2.0, family="laplace")
