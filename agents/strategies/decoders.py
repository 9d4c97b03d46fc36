r"""Decoders: recover the protected attribute from answered statistical parity queries.

With H the (m, n) matrix of submitted models and SP their answers, ``SP = H v`` where
``v_j = 1/N1`` for a = 1 and ``-1/N0`` for a = 0 (Hamman et al., eq. 4). Writing
``v = r - s`` with ``r_j = 1/N1`` for everyone, ``s`` is zero for a = 1 and ``1/N1 + 1/N0`` for
a = 0: sparse when the disadvantaged group is small. Then

.. math:: \eta = H r - SP = H s .

The paper writes ``eta = SP - H r``, which flips the sign of s and breaks its threshold rule; the
derivation above is the consistent one. Basis pursuit (Theorem 5, Algorithm 2) solves
``min ||s||_1 subject to H s = eta``; since A is binary we also offer the box-constrained program
``0 <= s_j <= 1/N1 + 1/N0``. Both are linear programs, solved with scipy's HiGHS. When noisy
answers make the box-constrained equalities infeasible, we fall back to LP decoding: minimise
``||H s - eta||_1`` within the box (Dwork, McSherry and Talwar 2007).

The attribute guess thresholds s at half of ``1/N1 + 1/N0``; the confidence of each guess is its
distance from the threshold in units of the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse

__all__ = ["DecodeResult", "basis_pursuit", "decode_statistical_parity"]


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
    """Which program produced it (``basis_pursuit``, ``box``, ``lp_decoding``)."""


def basis_pursuit(
    H: NDArray[np.float64], eta: NDArray[np.float64], *, upper: float | None = None
) -> tuple[NDArray[np.float64], str]:
    """Solve ``min ||s||_1 s.t. H s = eta`` (with ``0 <= s <= upper`` when given).

    Returns (s, method). With a box that the equalities cannot meet (noisy answers), returns the
    LP-decoding solution ``argmin ||H s - eta||_1`` over the box instead.
    """
    m, n = H.shape
    if upper is None:
        res = optimize.linprog(
            np.ones(2 * n), A_eq=np.hstack([H, -H]), b_eq=eta, bounds=(0, None), method="highs"
        )
        if res.status == 0:
            return res.x[:n] - res.x[n:], "basis_pursuit"
        box: tuple[float | None, float | None] = (None, None)
    else:
        res = optimize.linprog(np.ones(n), A_eq=H, b_eq=eta, bounds=(0, upper), method="highs")
        if res.status == 0:
            return res.x, "box"
        box = (0.0, upper)
    # LP decoding: variables (s, t), minimise sum t with -t <= H s - eta <= t, 0 <= s <= upper.
    eye = sparse.identity(m, format="csr")
    A = sparse.vstack([sparse.hstack([H, -eye]), sparse.hstack([-H, -eye])], format="csr")
    b = np.concatenate([eta, -eta])
    c = np.concatenate([np.zeros(n), np.ones(m)])
    bounds = [box] * n + [(0.0, None)] * m
    res = optimize.linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"LP decoding failed: {res.message}")
    return res.x[:n], "lp_decoding"


def decode_statistical_parity(
    H: NDArray[np.float64],
    sp: NDArray[np.float64],
    *,
    n1: int,
    n0: int,
    box: bool = False,
) -> DecodeResult:
    """Recover the attribute from SP answers of the models in H (Algorithm 2, sign corrected)."""
    H = np.asarray(H, dtype=np.float64)
    sp = np.asarray(sp, dtype=np.float64)
    if H.ndim != 2 or sp.shape != (H.shape[0],):
        raise ValueError(f"H must be (m, n) and sp (m,); received {H.shape} and {sp.shape}")
    c = 1.0 / n1 + 1.0 / n0
    eta = H.sum(axis=1) / n1 - sp  # H r - SP
    s, method = basis_pursuit(H, eta, upper=c if box else None)
    threshold = c / 2.0
    attribute = np.where(s > threshold, 0, 1).astype(np.int8)
    confidence = np.abs(s - threshold) / threshold
    return DecodeResult(attribute, confidence, s, method)
