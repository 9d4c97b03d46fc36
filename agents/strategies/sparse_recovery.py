r"""Sparse recovery: the programs that find a sparse s with ``H s = eta`` (or close to it).

The decoders of :mod:`~biasleak.agents.strategies.decoders` reduce the attack to one system: the
answered models H (m rows, one column per person) times an unknown vector s give the
measurements eta, and s is zero except on the smaller group, where it equals
``c = 1/N1 + 1/N0``. With fewer answers than people the system has many solutions, but the
sparse one is found by the classic programs of compressed sensing, collected here:

- :func:`basis_pursuit`, ``min ||s||_1`` subject to ``H s = eta`` as a linear program (HiGHS),
  or its box-constrained form with ``0 <= s <= c``; :func:`basis_pursuit_cvxpy` writes the same
  program in cvxpy (the paper's approach, kept as a baseline);
- :func:`lp_decoding`, ``min ||H s - eta||_1`` over the box, for answers with a fraction of
  gross errors (Dwork, McSherry and Talwar 2007);
- :func:`omp`, orthogonal matching pursuit on the centred system, first stagewise
  (:func:`stagewise`, several atoms per pass) and then one atom at a time, accepted only when it
  fits the answers exactly;
- :func:`lasso`, basis pursuit denoising for answers with Gaussian noise of a known level.

All are deterministic functions of (H, eta); the choice between them, the thresholding of s into
a guess, and the Bayesian decoder for noisy answers live elsewhere
(:func:`~biasleak.agents.strategies.decoders.decode_statistical_parity`,
:mod:`~biasleak.agents.strategies.message_passing`).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse

__all__ = [
    "basis_pursuit",
    "basis_pursuit_cvxpy",
    "lasso",
    "lp_decoding",
    "omp",
    "stagewise",
]


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


def stagewise(
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

    First stagewise (:func:`stagewise`, ``ceil(k/4)`` atoms per pass), then, when that does not
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
    support, coef = stagewise(H, y, atoms=atoms, step=max(math.ceil(k / 4), 1))
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
