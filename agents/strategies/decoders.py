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
    added until the residual vanishes (at most ``1.5 k + 10`` for a support of size k, and fewer
    than m/2, the limit of identifiability; larger supports skip OMP). The result
    is accepted only if it solves the original system to within ``1e-9`` relative; otherwise the
    decoder falls back to basis pursuit. Fast: n = 10,000, m = 1,000 in under a second.
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
    ``alpha = sigma sqrt(2 ln n) / m``, then rounding - A is binary and the small group's size k is
    known, so the k largest entries of s form the guess (shrinkage makes a fixed threshold
    useless).
``omp_only``
    OMP without the fallback: an exact fit is reported as ``omp``, anything else as
    ``omp_unverified`` (cheap intermediate estimates for sequential attacks).
``auto``
    ``omp``, which falls back to ``basis_pursuit`` (``box`` with ``box=True``), which falls back
    to ``lp_decoding`` when the equalities are infeasible.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse

__all__ = [
    "METHODS",
    "DecodeResult",
    "basis_pursuit",
    "decode_statistical_parity",
    "lp_decoding",
    "omp",
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


def omp(
    H: NDArray[np.float64], eta: NDArray[np.float64], *, k: int, verify: bool = True
) -> NDArray[np.float64] | None:
    """Orthogonal matching pursuit on the centred, column-normalised system.

    Returns s if it solves ``H s = eta`` to within 1e-9 (relative), else None (or, with
    ``verify=False``, the unverified s).
    """
    from sklearn.linear_model import orthogonal_mp

    m, n = H.shape
    X = H - H.mean(axis=0)
    y = eta - eta.mean()
    norms = np.linalg.norm(X, axis=0)
    norms[norms == 0] = 1.0
    X /= norms
    # A support of size >= m/2 is not identifiable from m equations, and with that many atoms
    # OMP would fit noise exactly: stay in the sparse regime, where an exact fit means recovery.
    atoms = int(min(1.5 * k + 10, (m - 1) // 2, n))
    if atoms < 1 or (k >= m / 2 and verify):
        return None
    with warnings.catch_warnings():
        # "ended prematurely due to linear dependence" is how OMP reports an exact fit
        warnings.simplefilter("ignore", RuntimeWarning)
        coef = orthogonal_mp(X, y, n_nonzero_coefs=atoms)
    s = np.asarray(coef, dtype=np.float64) / norms
    scale = max(float(np.abs(eta).max()), 1e-300)
    if float(np.abs(H @ s - eta).max()) <= 1e-9 * scale or not verify:
        return s
    return None


def lasso(H: NDArray[np.float64], eta: NDArray[np.float64], *, sigma: float) -> NDArray[np.float64]:
    """Non-negative LASSO on the centred, column-normalised system (basis pursuit denoising)."""
    from sklearn.linear_model import Lasso

    m, n = H.shape
    X = H - H.mean(axis=0)
    y = eta - eta.mean()
    norms = np.linalg.norm(X, axis=0)
    norms[norms == 0] = 1.0
    X /= norms
    alpha = max(float(sigma), 1e-12) * np.sqrt(2.0 * np.log(n)) / m
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings on hopeless (very noisy) data
        model = Lasso(alpha=alpha, positive=True, fit_intercept=False, max_iter=20_000)
        coef = model.fit(X, y).coef_
    return np.asarray(coef, dtype=np.float64) / norms


def decode_statistical_parity(
    H: NDArray[np.float64],
    sp: NDArray[np.float64],
    *,
    n1: int,
    n0: int,
    method: str = "auto",
    box: bool = False,
    sigma: float | None = None,
) -> DecodeResult:
    """Recover the attribute from SP answers of the models in H (Algorithm 2, sign corrected).

    ``box`` adds ``0 <= s <= c`` to basis pursuit (also when ``auto``/``omp`` fall back to it).
    """
    if method not in METHODS:
        raise ValueError(f"decoder must be one of {list(METHODS)}; received {method!r}")
    H = np.asarray(H, dtype=np.float64)
    sp = np.asarray(sp, dtype=np.float64)
    if H.ndim != 2 or sp.shape != (H.shape[0],):
        raise ValueError(f"H must be (m, n) and sp (m,); received {H.shape} and {sp.shape}")
    small = 0 if n0 <= n1 else 1
    c = 1.0 / n1 + 1.0 / n0
    if small == 0:
        eta = H.sum(axis=1) / n1 - sp  # H r - SP with r = 1/N1
    else:
        eta = sp + H.sum(axis=1) / n0  # SP - H r with r = -1/N0
    k = n0 if small == 0 else n1
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
