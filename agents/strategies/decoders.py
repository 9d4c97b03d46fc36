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

Where each part lives: the programs for exact answers (``omp``, ``basis_pursuit``, ``box``,
``cvxpy``, ``lp_decoding``, ``lasso``) in :mod:`~biasleak.agents.strategies.sparse_recovery`;
``amp`` with its channels and prior in :mod:`~biasleak.agents.strategies.message_passing`;
:class:`NoiseModel` in :mod:`~biasleak.agents.strategies.noise_model`; the group-size estimate
from many answers in :mod:`~biasleak.agents.strategies.group_sizes`. This module sets up the
system (the sign-corrected eta above), chooses the method and turns s or the posterior into a
guess (:func:`decode_statistical_parity`); each name is imported from the module that
defines it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.strategies.message_passing import (
    amp,
)
from biasleak.agents.strategies.noise_model import (
    EXACT,
    NoiseModel,
)
from biasleak.agents.strategies.sparse_recovery import (
    basis_pursuit,
    basis_pursuit_cvxpy,
    lasso,
    lp_decoding,
    omp,
)

__all__ = [
    "METHODS",
    "DecodeResult",
    "decode_statistical_parity",
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
