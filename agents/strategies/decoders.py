r"""Decoders: recover the protected attribute from answered statistical parity queries.

With H the (m, n) matrix of submitted models and SP their answers, ``SP = H v`` where
``v_j = 1/N1`` for a = 1 and ``-1/N0`` for a = 0 (Hamman et al., eq. 4). Let g be the smaller
group. Writing ``v = r + sign * s`` with ``r_j`` the value of the larger group for everyone, ``s``
is zero outside group g and ``c = 1/N1 + 1/N0`` inside it - sparse when g is small. For g = 0
(the usual case, ``r_j = 1/N1``):

.. math:: \eta = H r - SP = H s .

The paper writes ``eta = SP - H r``, which flips the sign of s and breaks its threshold rule; the
derivation above is the consistent one (for g = 1 the roles swap: ``eta = SP - H r`` with
``r_j = -1/N0``). The guess puts person j in group g when ``s_j > c/2``; its confidence is
``|s_j - c/2| / (c/2)``.

Methods (:data:`METHODS`):

``omp``
    Orthogonal matching pursuit (scikit-learn) on the centred system: every row of H shares the
    base model's scores, so both sides are multiplied by the centring projector ``I - 11^T/m``
    (subtract the mean model and the mean measurement), columns are normalised, and atoms are
    added - first ``ceil(k/4)`` per pass with a least-squares refit (stagewise OMP), then, if
    that fails, one at a time - until the residual vanishes (at most ``1.5 k + 10`` atoms for a
    support of size k, and fewer than m/2, the limit of identifiability; larger supports skip
    OMP). The result is accepted only if it solves the original system to within ``1e-9``
    relative; otherwise the decoder falls back to basis pursuit. Fast: n = 10,000, m = 1,000 in
    a twentieth of a second, about 25 times one product ``H^T x`` all told.
``basis_pursuit``
    The paper's program, ``min ||s||_1 s.t. H s = eta``, as a linear program (scipy HiGHS).
``box``
    The same with ``0 <= s <= c`` (A is binary): needs fewer queries than basis pursuit.
``cvxpy``
    Basis pursuit written in cvxpy with an explicit solver (CLARABEL): the paper's approach, kept
    as the baseline for benchmarks.
``lp_decoding``
    For noisy answers: ``min ||H s - eta||_1`` with ``0 <= s <= c`` (Dwork, McSherry and Talwar
    2007; Cohen and Nissim's "LP reconstruction in practice"), robust to a fraction of gross errors.
``lasso``
    For noisy answers with a known noise level sigma (e.g. from repeated queries): basis pursuit
    denoising as a non-negative LASSO on the centred, column-normalised system with
    ``alpha = min(sigma sqrt(2 ln n) / m, alpha_max / 10)`` (``alpha_max``: the smallest penalty
    that zeroes every coefficient), then rounding - A is binary and the small group's size k is
    known, so the k largest entries of s form the guess (shrinkage makes a fixed threshold
    useless).
``amp``
    For noisy answers: a Bayesian decoder. Each person is in the small group with a prior
    probability (size k, tilted by the base model's scores through the one equation that
    centring drops, :func:`tilted_prior`); generalised approximate message passing (GAMP) with
    the exact output channel of the noise (:class:`NoiseModel`: Laplace, Gaussian; a Laplace
    channel with a learned scale for Cauchy or unknown noise) returns every person's posterior
    probability. The guess is "small group" when that probability exceeds k/n - the Bayes rule
    for balanced accuracy, which weighs each group's errors by 1/N_g - and the posterior gives
    ``confidence`` and the probability that each guess is right. Tens of milliseconds at
    n = 1,000.
``omp_only``
    OMP without the fallback: an exact fit is reported as ``omp``, anything else as
    ``omp_unverified`` (cheap intermediate estimates for sequential attacks).
``auto``
    Chooses by the answers. Exact answers (``noise`` of kind ``none``, the default): ``omp``,
    which falls back to ``basis_pursuit`` (``box`` with ``box=True``), which falls back to
    ``lp_decoding`` when the equalities are infeasible. Noisy answers: ``amp``, the strongest
    decoder measured on noisy answers (``benchmarks/decoders.py``); never an equality-constrained
    program, which would interpolate the noise.

Noise (:class:`NoiseModel`): the strategies build it from the public facts of each answer - the
mechanism and the epsilon charged give the Laplace and Gaussian scales; the data-dependent
mechanisms' scales (Attribute-Conceal's Cauchy noise, smooth-sensitivity Laplace) depend on the
group sizes and are estimated from the answers instead.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse, special

__all__ = [
    "EXACT",
    "METHODS",
    "NOISE_KINDS",
    "DecodeResult",
    "NoiseModel",
    "amp",
    "basis_pursuit",
    "decode_statistical_parity",
    "lasso",
    "least_squares_group_size",
    "lp_decoding",
    "omp",
    "tilted_prior",
]

METHODS: Final[tuple[str, ...]] = (
    "auto",
    "omp",
    "omp_only",
    "basis_pursuit",
    "box",
    "cvxpy",
    "lp_decoding",
    "lasso",
    "amp",
)
# -- noise models ---------------------------------------------------------------------------------

NoiseKind = Literal["none", "laplace", "cauchy", "gaussian", "unknown"]
NOISE_KINDS: Final[tuple[str, ...]] = ("none", "laplace", "cauchy", "gaussian", "unknown")
BAD_NOISE_KIND: Final = "noise kind must be one of {allowed}; received {kind!r}"
BAD_NOISE_SCALE: Final = (
    "noise scale must be None or positive and finite (one number, or one per answer) for kind "
    "{kind!r}; received {scale!r}"
)


@dataclass(frozen=True, eq=False)
class NoiseModel:
    """The noise a decoder faces on each answer, as far as the attacker knows it.

    ``kind`` is the noise law (``none`` for exact answers); ``scale`` its per-answer scale (the
    Laplace or Cauchy scale b, the Gaussian standard deviation), one number for every answer or
    an array of one per answer, or None when it is not public (the data-dependent mechanisms,
    whose scale depends on the group sizes): decoders then estimate it from the answers.
    """

    kind: NoiseKind = "none"
    """The noise law: ``none``, ``laplace``, ``cauchy``, ``gaussian`` or ``unknown``."""
    scale: float | NDArray[np.float64] | None = None
    """Per-answer scale, or None when it must be estimated."""

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise ValueError(BAD_NOISE_KIND.format(allowed=list(NOISE_KINDS), kind=self.kind))
        if self.scale is not None:
            values = np.asarray(self.scale, dtype=np.float64)
            if values.ndim > 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
                raise ValueError(BAD_NOISE_SCALE.format(kind=self.kind, scale=self.scale))

    @property
    def noisy(self) -> bool:
        """Whether the answers carry noise at all."""
        return self.kind != "none"

    def scales(self, m: int) -> NDArray[np.float64] | None:
        """The scale of each of ``m`` answers, or None when unknown."""
        if self.scale is None:
            return None
        values = np.broadcast_to(np.asarray(self.scale, dtype=np.float64), (m,))
        return np.array(values)


EXACT: Final = NoiseModel("none")


@dataclass(frozen=True, eq=False)
class DecodeResult:
    """A decoded attribute vector."""

    attribute: NDArray[np.int8] = field(repr=False)
    """(n,) guess, 1 = advantaged."""
    confidence: NDArray[np.float64] = field(repr=False)
    """(n,) |s_j - threshold| / threshold."""
    s: NDArray[np.float64] = field(repr=False)
    """The recovered sparse vector."""
    method: str
    """Which program produced it."""
    probability: NDArray[np.float64] | None = field(default=None, repr=False)
    """(n,) posterior probability that each guess is right (``amp`` only), else None."""


def lp_decoding(
    H: NDArray[np.float64], eta: NDArray[np.float64], *, upper: float | None
) -> NDArray[np.float64]:
    """``argmin ||H s - eta||_1`` over ``0 <= s <= upper`` (or free s when upper is None)."""
    m, n = H.shape
    eye = sparse.identity(m, format="csr")
    A = sparse.vstack([sparse.hstack([H, -eye]), sparse.hstack([-H, -eye])], format="csr")
    b = np.concatenate([eta, -eta])
    c = np.concatenate([np.zeros(n), np.ones(m)])
    box = (0.0, upper) if upper is not None else (None, None)
    res = optimize.linprog(c, A_ub=A, b_ub=b, bounds=[box] * n + [(0.0, None)] * m, method="highs")
    if res.status != 0:
        raise RuntimeError(f"LP decoding failed: {res.message}")
    return np.asarray(res.x[:n])


def basis_pursuit(
    H: NDArray[np.float64], eta: NDArray[np.float64], *, upper: float | None = None
) -> tuple[NDArray[np.float64], str]:
    """Solve ``min ||s||_1 s.t. H s = eta`` (with ``0 <= s <= upper`` when given) with HiGHS.

    Returns (s, method); when the equalities cannot be met (noisy answers), returns the
    :func:`lp_decoding` solution instead.
    """
    n = H.shape[1]
    if upper is None:
        res = optimize.linprog(
            np.ones(2 * n), A_eq=np.hstack([H, -H]), b_eq=eta, bounds=(0, None), method="highs"
        )
        if res.status == 0:
            return res.x[:n] - res.x[n:], "basis_pursuit"
    else:
        res = optimize.linprog(np.ones(n), A_eq=H, b_eq=eta, bounds=(0, upper), method="highs")
        if res.status == 0:
            return res.x, "box"
    return lp_decoding(H, eta, upper=upper), "lp_decoding"


def basis_pursuit_cvxpy(H: NDArray[np.float64], eta: NDArray[np.float64]) -> NDArray[np.float64]:
    """Basis pursuit in cvxpy with the CLARABEL solver (the paper's approach; slow)."""
    import cvxpy as cp

    s = cp.Variable(H.shape[1])
    problem = cp.Problem(cp.Minimize(cp.norm1(s)), [H @ s == eta])
    with warnings.catch_warnings():
        # CLARABEL often reports "optimal_inaccurate" at ~1e-7 relative accuracy; the status is
        # checked below instead of letting cvxpy's warning escape
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        problem.solve(solver=cp.CLARABEL)
    if s.value is None or problem.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"cvxpy basis pursuit failed: {problem.status}")
    return np.asarray(s.value)


def _stagewise(
    H: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    atoms: int,
    step: int,
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    r"""Orthogonal matching pursuit taking ``step`` atoms per pass (stagewise OMP).

    Works on the centred system ``X = H - 1 hbar^T`` without forming it: ``X^T r = H^T r -
    hbar (1^T r)`` and ``||X_j||^2 = ||H_j||^2 - m hbar_j^2``. Each pass computes every column's
    normalised correlation with the residual (one pass over H), adds the ``step`` strongest new
    columns to the support, refits all support coefficients by least squares and stops at an
    exact fit or ``atoms`` columns. When the support holds the true one and fewer than m/2
    columns, the least-squares refit is the exact solution (extra columns get zero), so taking
    many atoms at once costs nothing in recovery and saves passes: about ``k / step + 2`` passes
    against OMP's one per atom (Donoho, Tsaig, Drori and Starck 2012). Returns the support and
    its coefficients in the unscaled variables s.
    """
    m = H.shape[0]
    h_mean = H.mean(axis=0)
    norms = np.sqrt(np.maximum(np.einsum("ij,ij->j", H, H) - m * h_mean**2, 0.0))
    norms[norms <= 1e-12 * max(float(norms.max()), 1e-300)] = np.inf  # constant columns
    support = np.zeros(0, dtype=np.intp)
    coef = np.zeros(0)
    columns = np.zeros((m, 0))
    residual = y.copy()
    scale = max(float(np.linalg.norm(y)), 1e-300)
    while support.size < atoms:
        corr = np.abs(H.T @ residual - h_mean * residual.sum()) / norms
        corr[support] = -1.0
        take = min(step, atoms - support.size)
        new = np.argpartition(-corr, take - 1)[:take]
        new = new[corr[new] > 1e-12 * scale]
        if new.size == 0:
            break
        support = np.concatenate([support, new])
        columns = np.hstack([columns, H[:, new] - h_mean[new]])  # gather only the new ones
        coef = np.linalg.lstsq(columns, y, rcond=None)[0]
        residual = y - columns @ coef
        if float(np.linalg.norm(residual)) <= 1e-12 * scale:
            break
    return support, coef


def omp(
    H: NDArray[np.float64], eta: NDArray[np.float64], *, k: int, verify: bool = True
) -> NDArray[np.float64] | None:
    """Orthogonal matching pursuit on the centred, column-normalised system.

    First stagewise (:func:`_stagewise`, ``ceil(k/4)`` atoms per pass), then, when that does not
    fit exactly, classic OMP (scikit-learn, one atom per step). Returns s if it solves
    ``H s = eta`` to within 1e-9 (relative), else None (or, with ``verify=False``, the
    unverified s of classic OMP).
    """
    from sklearn.linear_model import orthogonal_mp

    m, n = H.shape
    # A support of size >= m/2 is not identifiable from m equations, and with that many atoms
    # OMP would fit noise exactly: stay in the sparse regime, where an exact fit means recovery.
    atoms = int(min(1.5 * k + 10, (m - 1) // 2, n))
    if atoms < 1 or (k >= m / 2 and verify):
        return None
    y = eta - eta.mean()
    scale = max(float(np.abs(eta).max()), 1e-300)
    support, coef = _stagewise(H, y, atoms=atoms, step=max(math.ceil(k / 4), 1))
    s = np.zeros(n)
    s[support] = coef
    if float(np.abs(H @ s - eta).max()) <= 1e-9 * scale:
        return s
    X = H - H.mean(axis=0)
    norms = np.sqrt(np.einsum("ij,ij->j", X, X))
    norms[norms == 0] = 1.0
    X /= norms
    with warnings.catch_warnings():
        # "ended prematurely due to linear dependence" is how OMP reports an exact fit
        warnings.simplefilter("ignore", RuntimeWarning)
        coef = orthogonal_mp(X, y, n_nonzero_coefs=atoms)
    s = np.asarray(coef, dtype=np.float64) / norms
    if float(np.abs(H @ s - eta).max()) <= 1e-9 * scale or not verify:
        return s
    return None


def lasso(H: NDArray[np.float64], eta: NDArray[np.float64], *, sigma: float) -> NDArray[np.float64]:
    r"""Non-negative LASSO on the centred, column-normalised system (basis pursuit denoising).

    scikit-learn minimises ``||y - X w||^2 / (2m) + alpha ||w||_1``. With unit columns, the noise
    in ``X_j^T y`` has standard deviation sigma, so the universal threshold (Donoho and Johnstone
    1994) is ``alpha_u = sigma sqrt(2 ln n) / m``. Above ``alpha_max = max_j X_j^T y / m`` every
    coefficient is zero, and with few answers per column the true columns' correlations are not
    far above the noise's: the penalty is ``min(alpha_u, alpha_max / 10)``, so a correct noise
    level never shrinks the estimate to zero (the guess is rounded to the k largest entries,
    which needs their order, not their size).
    """
    from sklearn.linear_model import Lasso

    m, n = H.shape
    X = H - H.mean(axis=0)
    y = eta - eta.mean()
    norms = np.linalg.norm(X, axis=0)
    norms[norms == 0] = 1.0
    X /= norms
    alpha_max = float((X.T @ y).max()) / m
    alpha = max(float(sigma), 1e-12) * np.sqrt(2.0 * np.log(n)) / m
    if alpha_max > 0:
        alpha = min(alpha, alpha_max / 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings on hopeless (very noisy) data
        model = Lasso(alpha=alpha, positive=True, fit_intercept=False, max_iter=20_000)
        coef = model.fit(X, y).coef_
    return np.asarray(coef, dtype=np.float64) / norms


# -- approximate message passing ------------------------------------------------------------------

AMP_ITERATIONS: Final = 100
AMP_DAMPING: Final = 0.5
AMP_TOLERANCE: Final = 1e-7


MILLS_RANGE: Final = 1e6
"""Largest standardised cut the Laplace channel evaluates (a point mass beyond it)."""


def _laplace_channel(
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


def _gaussian_channel(
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
prior (see :func:`_row_mean_total`)."""


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


def _row_mean_total(
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
        prior = tilted_prior(h_mean, k=k, total=_row_mean_total(H, eta, c=c, k=k, noise=noise))
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

    kind = noise.kind
    scales = noise.scales(m)
    learn = scales is None
    if kind == "none":
        scales = np.full(m, 1e-6 * max(float(np.abs(y).max()), 1e-300))
    elif scales is None:
        # robust spread of the centred answers: signal plus noise, an upper bound to start from
        mad = float(np.median(np.abs(y - np.median(y))))
        scales = np.full(m, max(mad, 1e-12 * max(float(np.abs(y).max()), 1e-300)))
    gaussian = kind in ("gaussian", "none")

    x_hat = prior * level
    tau_x = prior * (1 - prior) * level**2
    s_hat = np.zeros(m)
    post = prior
    for _ in range(AMP_ITERATIONS):
        tau_p = np.maximum(X2 @ tau_x, 1e-300)
        p = X @ x_hat - tau_p * s_hat
        if gaussian:
            z, tau_z, moment = _gaussian_channel(y, p, tau_p, scales**2)
        else:
            z, tau_z, moment = _laplace_channel(y, p, tau_p, scales)
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
        if learn and kind != "none":
            if gaussian:
                scales = np.full(m, math.sqrt(max(float(moment.mean()), 1e-300)))
            else:
                scales = np.full(m, max(float(moment.mean()), 1e-300))
        if change < AMP_TOLERANCE:
            break
    return np.asarray(post)


def least_squares_group_size(
    H: NDArray[np.float64], sp: NDArray[np.float64], *, smaller: Literal[0, 1] = 0
) -> int | None:
    r"""The smaller group's size read from a least-squares fit of v, or None when m <= n.

    With more answered models than people, ``v_hat = argmin ||H v - SP||_2`` is v plus noise,
    and v takes two values, ``1/N1`` and ``-1/N0``. For each k in [1, n/2] the k smallest
    entries of ``v_hat`` (largest when ``smaller`` = 1, the advantaged group) are given the small
    group's value and the rest the other's; the k with the least squared misfit wins. Unlike a
    one-person probe, this pools the evidence of every answer.
    """
    m, n = H.shape
    if m <= n:
        return None
    v = np.linalg.lstsq(H, sp, rcond=None)[0]
    ordered = np.sort(v if smaller == 0 else -v)  # the small group's values come first
    ks = np.arange(1, n // 2 + 1)
    head = np.cumsum(ordered)[ks - 1]
    head_sq = np.cumsum(ordered**2)[ks - 1]
    total, total_sq = float(ordered.sum()), float((ordered**2).sum())
    low, high = -1.0 / ks, 1.0 / (n - ks)  # small group's level, the other's (sign-folded)
    misfit = (
        head_sq
        - 2 * low * head
        + ks * low**2
        + (total_sq - head_sq)
        - 2 * high * (total - head)
        + (n - ks) * high**2
    )
    return int(ks[int(np.argmin(misfit))])


def decode_statistical_parity(
    H: NDArray[np.float64],
    sp: NDArray[np.float64],
    *,
    n1: int,
    n0: int,
    method: str = "auto",
    box: bool = False,
    sigma: float | None = None,
    noise: NoiseModel | None = None,
) -> DecodeResult:
    """Recover the attribute from SP answers of the models in H (Algorithm 2, sign corrected).

    ``box`` adds ``0 <= s <= c`` to basis pursuit (also when ``auto``/``omp`` fall back to it).
    ``noise`` is the noise the answers carry (default: exact, or Gaussian of standard deviation
    ``sigma`` when only that is given). ``auto`` sends noisy answers to ``amp`` and exact ones
    to OMP with its exact-fit check and fallback.
    """
    if method not in METHODS:
        raise ValueError(f"decoder must be one of {list(METHODS)}; received {method!r}")
    H = np.asarray(H, dtype=np.float64)
    sp = np.asarray(sp, dtype=np.float64)
    if H.ndim != 2 or sp.shape != (H.shape[0],):
        raise ValueError(f"H must be (m, n) and sp (m,); received {H.shape} and {sp.shape}")
    if noise is None:
        noise = NoiseModel("gaussian", sigma) if sigma is not None and sigma > 0 else EXACT
    small = 0 if n0 <= n1 else 1
    c = 1.0 / n1 + 1.0 / n0
    if small == 0:
        eta = H.sum(axis=1) / n1 - sp  # H r - SP with r = 1/N1
    else:
        eta = sp + H.sum(axis=1) / n0  # SP - H r with r = -1/N0
    k = n0 if small == 0 else n1
    n = H.shape[1]
    if method == "amp" or (method == "auto" and noise.noisy):
        post = amp(H, eta, k=k, c=c, noise=noise)
        rate = k / n  # Bayes rule for balanced accuracy: small group when P > N_g / n
        in_small = post > rate
        attribute = (in_small if small == 1 else ~in_small).astype(np.int8)
        confidence = np.abs(post - rate) / np.where(in_small, 1.0 - rate, rate)
        right = np.where(in_small, post, 1.0 - post)
        return DecodeResult(attribute, confidence, post * c, "amp", right)
    if sigma is None and noise.kind == "gaussian" and noise.scale is not None:
        sigma = float(np.median(noise.scales(H.shape[0])))  # type: ignore[arg-type]
    upper = c if box or method == "box" else None
    s: NDArray[np.float64] | None = None
    used = method
    if method in ("auto", "omp"):
        s, used = omp(H, eta, k=k), "omp"
    elif method == "omp_only":
        s, used = omp(H, eta, k=k), "omp"
        if s is None:
            s = omp(H, eta, k=k, verify=False)
            used = "omp_unverified"
            if s is None:  # too few answers for any atom yet
                s = np.zeros(H.shape[1])
    if s is None and method in ("auto", "omp", "basis_pursuit", "box"):
        s, used = basis_pursuit(H, eta, upper=upper)
    elif s is None and method == "cvxpy":
        s, used = basis_pursuit_cvxpy(H, eta), "cvxpy"
    elif s is None and method == "lp_decoding":
        s, used = lp_decoding(H, eta, upper=c), "lp_decoding"
    elif s is None and method == "lasso":
        s, used = lasso(H, eta, sigma=sigma if sigma is not None else 0.0), "lasso"
    assert s is not None
    if used == "lasso":  # round: the k largest entries are the small group
        order = np.argsort(-s, kind="stable")
        in_small = np.zeros(s.size, dtype=bool)
        in_small[order[:k]] = True
        cut = 0.5 * (s[order[k - 1]] + s[order[k]]) if 0 < k < s.size else c / 2.0
        scale = max(abs(cut), 1e-300)
        attribute = (in_small if small == 1 else ~in_small).astype(np.int8)
        return DecodeResult(attribute, np.abs(s - cut) / scale, s, used)
    threshold = c / 2.0
    in_small = s > threshold
    attribute = (in_small if small == 1 else ~in_small).astype(np.int8)
    confidence = np.abs(s - threshold) / threshold
    return DecodeResult(attribute, confidence, s, used)
