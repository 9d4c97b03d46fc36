r"""Approximate message passing: the Bayesian decoder for noisy answers.

On noisy answers the exact-fit programs of :mod:`~biasleak.agents.strategies.sparse_recovery`
interpolate the noise. This decoder instead asks, for every person, how probable it is that they
are in the small group given all the answers. It treats the unknown ``s_j`` as a two-valued
variable (0, or ``c = 1/N1 + 1/N0`` for a small-group member) with a prior probability, and the
answers as the centred, column-normalised system ``y = X x + w`` with noise w of a known law
(:class:`~biasleak.agents.strategies.noise_model.NoiseModel`). Generalised approximate message
passing (GAMP, Rangan 2011) alternates two cheap steps until the estimates settle: an output
step that passes each answer's prediction through the noise channel (:func:`laplace_channel`,
:func:`gaussian_channel`), and an input step that combines the resulting evidence on each person
with the prior. The result is a posterior probability per person (:func:`amp`).

The prior is not flat. The small group's size k is known, and centring the system drops one
equation - the answers' mean, which says how much base-model score the small group holds in
total (:func:`row_mean_total`, shrunk towards no information when the noise could have produced
it). :func:`tilted_prior` is the maximum-entropy prior that matches both. The blockwise decoder
(:mod:`~biasleak.agents.strategies.blockwise`) runs the same iterations over models it redraws
block by block, and shares these pieces.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import special

from biasleak.agents.strategies.noise_model import NoiseModel

__all__ = [
    "AMP_DAMPING",
    "AMP_ITERATIONS",
    "AMP_TOLERANCE",
    "MILLS_RANGE",
    "TILT_SIGNIFICANCE",
    "amp",
    "gaussian_channel",
    "laplace_channel",
    "row_mean_total",
    "starting_scales",
    "tilted_prior",
]

AMP_ITERATIONS: Final = 100
AMP_DAMPING: Final = 0.5
AMP_TOLERANCE: Final = 1e-7


MILLS_RANGE: Final = 1e6
"""Largest standardised cut the Laplace channel evaluates (a point mass beyond it)."""


def laplace_channel(
    y: NDArray[np.float64],
    p: NDArray[np.float64],
    tau_p: NDArray[np.float64],
    b: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    r"""Posterior mean and variance of z under ``exp(-|y - z| / b) N(z; p, tau_p)``, and E|y - z|.

    With ``u = y - z``, ``mu = y - p`` and ``sigma^2 = tau_p``, the posterior of u is a mixture of
    two truncated normals: ``N(mu - sigma^2/b, sigma^2)`` on u > 0 with weight
    ``exp(-mu/b) Phi((mu - sigma^2/b)/sigma)`` and ``N(mu + sigma^2/b, sigma^2)`` on u < 0 with
    weight ``exp(mu/b) Phi(-(mu + sigma^2/b)/sigma)``.
    """
    sigma = np.sqrt(tau_p)
    mu = y - p
    m_pos = mu - tau_p / b
    m_neg = mu + tau_p / b
    # standardised distance of the cut (at 0) below the mean; beyond |a| = 1e6 the truncated
    # normal is a point mass either way, and a^2 must stay far from overflow
    a_pos = np.clip(m_pos / sigma, -MILLS_RANGE, MILLS_RANGE)
    a_neg = np.clip(-m_neg / sigma, -MILLS_RANGE, MILLS_RANGE)
    log_w_pos = -mu / b + special.log_ndtr(a_pos)
    log_w_neg = mu / b + special.log_ndtr(a_neg)
    top = np.maximum(log_w_pos, log_w_neg)
    w_pos = np.exp(log_w_pos - top)
    w_neg = np.exp(log_w_neg - top)
    total = w_pos + w_neg
    w_pos, w_neg = w_pos / total, w_neg / total
    # inverse Mills ratios phi(a) / Phi(a), computed in logs to survive far tails
    mills_pos = np.exp(-0.5 * a_pos**2 - 0.5 * np.log(2 * np.pi) - special.log_ndtr(a_pos))
    mills_neg = np.exp(-0.5 * a_neg**2 - 0.5 * np.log(2 * np.pi) - special.log_ndtr(a_neg))
    mean_pos = m_pos + sigma * mills_pos
    mean_neg = m_neg - sigma * mills_neg
    var_pos = tau_p * np.maximum(1.0 - mills_pos * (mills_pos + a_pos), 1e-12)
    var_neg = tau_p * np.maximum(1.0 - mills_neg * (mills_neg + a_neg), 1e-12)
    mean_u = w_pos * mean_pos + w_neg * mean_neg
    second = w_pos * (var_pos + mean_pos**2) + w_neg * (var_neg + mean_neg**2)
    var_u = np.maximum(second - mean_u**2, 1e-12 * tau_p)
    abs_u = w_pos * mean_pos - w_neg * mean_neg
    return y - mean_u, np.minimum(var_u, tau_p), abs_u


def gaussian_channel(
    y: NDArray[np.float64],
    p: NDArray[np.float64],
    tau_p: NDArray[np.float64],
    var: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Posterior mean and variance of z under ``N(y; z, var) N(z; p, tau_p)``, and E(y - z)^2."""
    z = (p * var + y * tau_p) / (var + tau_p)
    tau_z = tau_p * var / (var + tau_p)
    return z, tau_z, (y - z) ** 2 + tau_z


TILT_SIGNIFICANCE: Final = 3.0
"""How many standard deviations of its noise the answers' centre must move before it tilts the
prior (see :func:`row_mean_total`)."""


def tilted_prior(h_mean: NDArray[np.float64], *, k: int, total: float) -> NDArray[np.float64]:
    r"""Prior probabilities of membership in the small group, given its size and one moment.

    Every answer shares the base model, and centring the system drops the one equation the mean
    model gives: ``mean(eta) = c sum_{j in g} hbar_j`` (noise averaged over m answers). Among all
    independent priors with ``sum_j pi_j = k`` and ``sum_j pi_j hbar_j = total``, the one of
    maximum entropy is ``pi_j = sigmoid(alpha + lambda hbar_j)``; (alpha, lambda) minimise the
    convex dual ``sum_j log(1 + e^{alpha + lambda hbar_j}) - alpha k - lambda total`` (Newton).
    ``total`` is clamped inside what k people can reach.
    """
    n = h_mean.size
    rho = k / n
    ordered = np.sort(h_mean)
    low, high = float(ordered[:k].sum()), float(ordered[-k:].sum())
    spread = high - low
    if spread <= 0:
        return np.full(n, rho)
    target = float(np.clip(total, low + 0.02 * spread, high - 0.02 * spread))
    centre = float(h_mean.mean())
    x = h_mean - centre  # centred for conditioning; lambda is unchanged
    t = target - centre * k
    theta = np.array([math.log(rho / (1 - rho)), 0.0])
    features = np.stack([np.ones(n), x])
    goal = np.array([float(k), t])

    def dual(th: NDArray[np.float64]) -> float:
        return float(np.logaddexp(0.0, th @ features).sum() - th @ goal)

    for _ in range(100):
        pi = special.expit(theta @ features)
        grad = features @ pi - goal
        if float(np.abs(grad).max()) < 1e-9 * k:
            break
        weight = pi * (1 - pi)
        hess = (features * weight) @ features.T + 1e-12 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        size, now = 1.0, dual(theta)
        while dual(theta - size * step) > now and size > 1e-8:
            size /= 2
        theta = theta - size * step
    return np.asarray(special.expit(theta @ features))


def row_mean_total(
    H: NDArray[np.float64],
    eta: NDArray[np.float64],
    *,
    c: float,
    k: int,
    noise: NoiseModel,
) -> float:
    r"""The small group's total base score read from the answers' centre, shrunk by its noise.

    ``mean_i eta_i = c sum_{j in g} hbar_j + mean_i w_i``: its mean is the estimate under noise
    with a variance (standard deviation ``sqrt(mean Var(w) / m)``); under Cauchy or unknown
    noise the mean has no such spread, so the median is used, with the standard deviation of a
    median of normal values, ``1.2533 * 1.4826 MAD / sqrt(m)`` (an upper bound: the MAD also
    holds the signal). The estimate T is shrunk towards what an untilted prior gives,
    ``T_0 = k mean(hbar)``, by ``R^2 / (R^2 + sd^2)`` with ``R`` a quarter of the range that k
    people can reach: a centre drowned in noise must not tilt the prior.
    """
    m = eta.size
    h_mean = H.mean(axis=0)
    scales = noise.scales(m)
    if noise.kind in ("cauchy", "unknown") or (noise.noisy and scales is None):
        centre = float(np.median(eta))
        mad = float(np.median(np.abs(eta - centre)))
        sd = 1.2533 * 1.4826 * mad / math.sqrt(m)
    else:
        centre = float(eta.mean())
        if scales is None:
            sd = 0.0
        else:
            factor = 2.0 if noise.kind == "laplace" else 1.0
            sd = math.sqrt(float(np.mean(factor * scales**2)) / m)
    ordered = np.sort(h_mean)
    reach = float(ordered[-k:].sum() - ordered[:k].sum()) / 4.0
    flat = k * float(h_mean.mean())
    sd_total = sd / c
    if abs(centre / c - flat) < TILT_SIGNIFICANCE * sd_total:
        # The decision rule (posterior > k/n) turns even a negligible tilt into a full ranking
        # of everyone by their base score, so a tilt that the noise could have produced would
        # decide the whole estimate by a coin flip: below significance, no tilt.
        return flat
    weight = reach**2 / (reach**2 + sd_total**2) if reach > 0 else 0.0
    return flat + weight * (centre / c - flat)


def starting_scales(
    noise: NoiseModel, y: NDArray[np.float64]
) -> tuple[NDArray[np.float64], bool, bool]:
    """(per-answer noise scales to start from, whether to learn them, whether the channel is
    Gaussian) for the centred answers ``y``.

    Exact answers get a tiny Gaussian channel; a noise model without a public scale starts from
    the robust spread of the answers (signal plus noise: an upper bound) and is learned.
    """
    m = y.shape[0]
    scales = noise.scales(m)
    learn = scales is None
    if noise.kind == "none":
        scales = np.full(m, 1e-6 * max(float(np.abs(y).max()), 1e-300))
    elif scales is None:
        mad = float(np.median(np.abs(y - np.median(y))))
        scales = np.full(m, max(mad, 1e-12 * max(float(np.abs(y).max()), 1e-300)))
    return scales, learn, noise.kind in ("gaussian", "none")


def amp(
    H: NDArray[np.float64],
    eta: NDArray[np.float64],
    *,
    k: int,
    c: float,
    noise: NoiseModel,
    prior: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    r"""Posterior probability that each person is in the small group, by GAMP.

    ``prior`` replaces the default prior with the attacker's own per-person probability of being
    in the small group (side information such as a proxy model's, calibrated on an external
    sample); the posterior then combines it with what the answers say.

    Generalised approximate message passing (Rangan 2011) with sum-product updates, on the
    centred, column-normalised system ``y = X x + w`` (``X = (I - 11^T/m) H D^{-1}``, D the
    column norms, ``x_j = D_j s_j`` in ``{0, D_j c}``). The prior of ``s_j = c`` is
    :func:`tilted_prior` (size k and the dropped row-mean equation); the output channel is the
    noise law: Laplace (exact, closed form), Gaussian, or - for Cauchy and unknown noise - a
    Laplace channel whose scale is learned by expectation-maximisation (heavier tails than a
    Gaussian, so a few wild answers do not dominate). Updates are damped (factor
    :data:`AMP_DAMPING`) for stability with non-i.i.d. matrices; deterministic.

    Returns
    -------
    (n,) posterior probabilities ``P(s_j = c | answers)``.
    """
    m, n = H.shape
    if k < 1 or k >= n:
        raise ValueError(f"the small group's size must be in [1, n - 1] = [1, {n - 1}]; got {k}")
    h_mean = H.mean(axis=0)
    if prior is None:
        prior = tilted_prior(h_mean, k=k, total=row_mean_total(H, eta, c=c, k=k, noise=noise))
    else:
        prior = np.asarray(prior, dtype=np.float64)
        if prior.shape != (n,) or not np.all((prior >= 0) & (prior <= 1)):
            raise ValueError(
                f"prior must hold one probability in [0, 1] per person, shape ({n},); received "
                f"shape {prior.shape}"
            )
    X = H - h_mean
    y = eta - eta.mean()
    norms = np.linalg.norm(X, axis=0)
    norms[norms == 0] = 1.0
    X /= norms
    X2 = X**2
    level = c * norms  # the value x_j takes for a small-group member
    logit_prior = special.logit(np.clip(prior, 1e-12, 1 - 1e-12))

    scales, learn, gaussian = starting_scales(noise, y)

    x_hat = prior * level
    tau_x = prior * (1 - prior) * level**2
    s_hat = np.zeros(m)
    post = prior
    for _ in range(AMP_ITERATIONS):
        tau_p = np.maximum(X2 @ tau_x, 1e-300)
        p = X @ x_hat - tau_p * s_hat
        if gaussian:
            z, tau_z, moment = gaussian_channel(y, p, tau_p, scales**2)
        else:
            z, tau_z, moment = laplace_channel(y, p, tau_p, scales)
        s_new = (z - p) / tau_p
        tau_s = np.maximum((1 - tau_z / tau_p) / tau_p, 1e-300)
        s_hat = AMP_DAMPING * s_new + (1 - AMP_DAMPING) * s_hat
        tau_r = 1.0 / np.maximum(X2.T @ tau_s, 1e-300)
        r = x_hat + tau_r * (X.T @ s_hat)
        log_odds = logit_prior + (level * r - 0.5 * level**2) / tau_r
        post = special.expit(log_odds)
        x_new = post * level
        tau_new = post * (1 - post) * level**2
        change = float(np.abs(x_new - x_hat).max()) / max(float(level.max()), 1e-300)
        x_hat = AMP_DAMPING * x_new + (1 - AMP_DAMPING) * x_hat
        tau_x = AMP_DAMPING * tau_new + (1 - AMP_DAMPING) * tau_x
        if learn and noise.kind != "none":
            if gaussian:
                scales = np.full(m, math.sqrt(max(float(moment.mean()), 1e-300)))
            else:
                scales = np.full(m, max(float(moment.mean()), 1e-300))
        if change < AMP_TOLERANCE:
            break
    return np.asarray(post)
