r"""DP post-processing for equalized odds (Jagielski et al. 2019, section 3; Hardt et al. 2016).

A developer has a base classifier trained without the protected attribute A and wants a classifier
with equal true- and false-positive rates across groups (equalized odds). Hardt, Price and Srebro
(2016) showed that the most accurate such classifier *derived* from the base prediction
``Yhat`` and the attribute is found by a small linear program: choose, for every base prediction
``yhat`` and group ``a``, the probability ``p[yhat, a] = P[Y' = 1 | Yhat = yhat, A = a]`` of
answering 1. The program only needs the group-conditional table of (base prediction, group,
label) on the audit set. Jagielski et al. make the whole procedure differentially private in A
by adding Laplace noise to that table and solving the same program on the noisy table; the
mixing probabilities are then post-processing of an eps-DP release and are eps-DP themselves.

The table and its sensitivity
-----------------------------
For an audit set of m people with base predictions ``yhat_i`` in {0, 1}, groups ``a_i`` in
{0, ..., G-1} and labels ``y_i`` in {0, 1}, the normalised table is

.. math:: Q[\hat y, a, y] = \#\{i : \hat y_i = \hat y,\ a_i = a,\ y_i = y\} / m .

Neighbouring audit sets differ in ONE person's protected attribute; features and labels are
shared, and so are the base predictions (the developer computed them from the features alone
and submits them as a fixed vector). Changing ``a_i`` from a to a' moves person i from cell
``(yhat_i, a, y_i)`` to ``(yhat_i, a', y_i)``: two cells change by ``1/m`` each, so the l1
sensitivity of Q is ``2/m`` and Laplace noise of scale ``2/(m eps)`` on every cell makes the table
eps-DP (Dwork and Roth 2014, Theorem 3.6). This is the seed's calibration: its accuracy proof
(Theorem 3.1) bounds the l-infinity error of the noisy table by ``ln(4|A|/beta) 2/(m eps)``.
The audit set's size m is public in biasleak, so the scale is data-independent.

Floating-point safety. The noise is drawn by :func:`biasleak.mechanisms.release.laplace` with
``sampler="safe"`` on the integer COUNTS (l1 sensitivity exactly 2 in count units): counts are
exact doubles, so that function's precondition (exact values, a sensitivity that covers their
float error) holds with no slack; it rounds them to a power-of-two grid and adds exactly sampled
discrete Laplace noise of scale at least ``2/eps`` counts (at most a relative ``1e-5`` more, for
the grid). The released counts are divided by m afterwards: post-processing. The general
:func:`~biasleak.mechanisms.release.release` does not fit, because its sensitivities are those of
the fairness metrics; the named ``laplace`` takes any l1 sensitivity. ``epsilon = inf`` adds no
noise (the non-private service of Hardt et al.).

From the noisy table to valid probabilities
-------------------------------------------
Noisy cells can be negative and need not sum to one. The table is replaced by its Euclidean
projection onto the probability simplex (:func:`project_to_simplex`; Held, Wolfe and Crowder
1974, Duchi et al. 2008): one common shift is subtracted from every cell and the result clipped at
zero, so the differences between cells (the information) are kept and only cells within noise of
zero are zeroed. Clip-and-renormalise instead divides every cell by the noisy total, which pulls
all cells by a factor set by the noise in the empty ones. Either is post-processing, so the
guarantee is unchanged. When a (group, label) pair has no mass after projection its
conditional rates are undefined; they are then taken as 1/2 (the base prediction treated as a coin
flip there), a rule that looks at the public noisy table only, never at the exact counts.

The linear program
------------------
With ``q[y, a] = P[Yhat = 1 | Y = y, A = a]`` from the (projected) table,

.. math::
    \mathrm{TPR}_a(p) &= (1 - q[1, a])\, p[0, a] + q[1, a]\, p[1, a], \\
    \mathrm{FPR}_a(p) &= (1 - q[0, a])\, p[0, a] + q[0, a]\, p[1, a], \\
    \mathrm{err}(p) &= \sum_{\hat y, a} Q[\hat y, a, 0]\, p[\hat y, a]
                      + Q[\hat y, a, 1]\, (1 - p[\hat y, a]),

and the program (the seed's LP (5)/(6), Hardt et al. section 4) is

.. math:: \min_{p \in [0, 1]^{2 \times G}} \mathrm{err}(p) \quad \text{s.t.} \quad
    |\mathrm{TPR}_a - \mathrm{TPR}_0| \le \gamma,\ |\mathrm{FPR}_a - \mathrm{FPR}_0| \le \gamma,
    \ a = 1, \dots, G - 1,

with group 0 as the anchor (the seed's section 2; for two groups it is the usual pairwise
constraint). ``gamma = 0`` is exact equalized odds. The program is always feasible (answering
the same constant in every cell gives equal rates), and it is solved with scipy's HiGHS.

Disparate treatment. The derived classifier reads the attribute at decision time
(:func:`derived_probabilities`, :func:`derived_predictions`): it can only be deployed where A is
available and its use is lawful, which is the seed's central caveat. :class:`PostProcessing`
flags it.

References
----------
- M. Hardt, E. Price, N. Srebro. Equality of opportunity in supervised learning. NeurIPS 2016.
- M. Jagielski, M. Kearns, J. Mao, A. Oprea, A. Roth, S. Sharifi-Malvajerdi, J. Ullman.
  Differentially private fair learning. ICML 2019.
- J. Duchi, S. Shalev-Shwartz, Y. Singer, T. Chandra. Efficient projections onto the l1-ball for
  learning in high dimensions. ICML 2008.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from biasleak.mechanisms import release
from biasleak.mechanisms._validation import check_epsilon, check_int, check_positive
from biasleak.mechanisms.fair._groups import as_groups, as_labels

__all__ = [
    "COUNT_SENSITIVITY",
    "PostProcessing",
    "conditional_rates",
    "count_table",
    "derived_predictions",
    "derived_probabilities",
    "dp_postprocess",
    "project_to_simplex",
    "release_table",
    "solve_equalized_odds",
    "table_noise_scale",
]

COUNT_SENSITIVITY: Final = 2.0
"""l1 sensitivity of the count table when one person's attribute changes (two cells move by 1)."""

TABLE_SHAPE: Final = "{name} must have shape (2, G, 2) with G >= 2 groups; received {shape}"
MIXING_SHAPE: Final = (
    "mixing must have shape (2, G) with values in [0, 1] (p[yhat, a]); received {shape}"
)
LP_FAILED: Final = "the equalized-odds linear program failed: {message}"


@dataclass(frozen=True)
class PostProcessing:
    """What the DP post-processing service computes: public facts only, never the exact table.

    Everything here is a function of the noisy table (eps-DP in A) and of public quantities
    (m, epsilon, gamma), so all of it may be sent to the developer.
    """

    mixing: NDArray[np.float64]
    """``p[yhat, a] = P[Y' = 1 | Yhat = yhat, A = a]``, shape (2, G): the derived classifier."""
    noisy_table: NDArray[np.float64]
    """The released table ``Q[yhat, a, y]`` (shape (2, G, 2)), normalised by m, as drawn: cells
    may be negative. With ``epsilon = inf`` (no privacy) it is the exact table."""
    table: NDArray[np.float64]
    """The projection of ``noisy_table`` onto the probability simplex, which the LP used."""
    epsilon: float
    """Privacy loss charged for the release (``inf``: no noise, no privacy)."""
    gamma: float
    """Allowed equalized-odds gap in the LP (0: exact equalized odds on the estimated table)."""
    m: int
    """Audit set size (public)."""
    noise_scale: float
    """Laplace scale per cell of the normalised table, ``2/(m eps)`` (0 for ``epsilon = inf``).
    Data-independent, so public."""
    estimated_error: float
    """The LP's objective: the derived classifier's error as the estimated table predicts it."""

    @property
    def base_rates(self) -> NDArray[np.float64]:
        """``q[y, a] = P[Yhat = 1 | Y = y, A = a]`` on the estimated table: row 0 FPRs, row 1
        TPRs of the base classifier."""
        return conditional_rates(self.table)

    @property
    def derived_rates(self) -> NDArray[np.float64]:
        """FPR (row 0) and TPR (row 1) per group of the derived classifier, on the estimated
        table (equal across groups up to gamma)."""
        q = self.base_rates
        return (1.0 - q) * self.mixing[0][None, :] + q * self.mixing[1][None, :]

    @property
    def disparate_treatment(self) -> bool:
        """Whether the derived classifier needs the attribute at decision time: true unless the
        mixing probabilities are the same for every group."""
        return bool(np.any(self.mixing != self.mixing[:, :1]))


def count_table(
    base_predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike, n_groups: int = 2
) -> NDArray[np.int64]:
    """Counts ``C[yhat, a, y]`` of the audit set, shape (2, G, 2). PRIVATE: it holds A.

    Parameters
    ----------
    base_predictions : array of n values in {0, 1}
        The base classifier's predictions (computed without A).
    protected : array of n group indices in {0, ..., n_groups - 1}
    labels : array of n values in {0, 1}
    n_groups : int
        Number of groups G (public). Empty groups are allowed: refusing them would reveal that
        a group is empty.
    """
    g = check_int(n_groups, name="n_groups", minimum=2)
    yhat = as_labels(base_predictions, name="base_predictions")
    a = as_groups(protected, n=yhat.size, n_groups=g)
    y = as_labels(labels, name="labels", n=yhat.size)
    flat = np.bincount((yhat * g + a) * 2 + y, minlength=4 * g)
    return flat.reshape(2, g, 2).astype(np.int64)


def table_noise_scale(m: int, epsilon: float) -> float:
    """Laplace scale per cell of the normalised table: ``2 / (m eps)`` (0 for ``eps = inf``)."""
    m_ = check_int(m, name="m", minimum=1)
    eps = check_epsilon(epsilon)
    return 0.0 if math.isinf(eps) else COUNT_SENSITIVITY / (m_ * eps)


def release_table(
    counts: ArrayLike, *, epsilon: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """eps-DP release of the normalised table ``C / m`` (module docstring: sensitivity 2/m).

    ``m`` is the sum of the counts. Noise is the safe discrete Laplace of scale ``2/eps`` counts
    (``2/(m eps)`` after normalising); ``epsilon = inf`` returns the exact table. The grid step
    is about ``2^-20`` of the scale, so the counts must stay below ``2^52`` grid steps: a finite
    ``m * eps`` beyond about ``8e9`` is refused by the sampler (use ``inf``).
    """
    c = np.asarray(counts)
    if c.ndim != 3 or c.shape[0] != 2 or c.shape[2] != 2 or c.shape[1] < 2:
        raise ValueError(TABLE_SHAPE.format(name="counts", shape=c.shape))
    if c.dtype.kind not in "iu" or np.any(c < 0):
        raise ValueError(f"counts must be integers >= 0; received dtype {c.dtype}")
    m = int(c.sum())
    check_int(m, name="m (the number of people counted)", minimum=1)
    noisy = release.laplace(
        c.astype(np.float64),
        sensitivity=COUNT_SENSITIVITY,
        epsilon=check_epsilon(epsilon),
        rng=rng,
        sampler="safe",
    )
    return np.asarray(noisy, dtype=np.float64).reshape(c.shape) / m


def project_to_simplex(table: ArrayLike) -> NDArray[np.float64]:
    """Euclidean projection onto ``{t >= 0, sum t = 1}``, same shape (Duchi et al. 2008, Fig. 1).

    The result is ``max(t - theta, 0)`` with the one ``theta`` that makes it sum to one.
    """
    t = np.asarray(table, dtype=np.float64)
    if t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError(f"table must be a non-empty array of finite numbers; received {t!r}")
    v = t.ravel()
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    k = np.arange(1, v.size + 1)
    rho = int(np.nonzero(u - cumulative / k > 0)[0][-1])
    theta = cumulative[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0).reshape(t.shape)


def _check_table(table: ArrayLike, name: str) -> NDArray[np.float64]:
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 3 or t.shape[0] != 2 or t.shape[2] != 2 or t.shape[1] < 2:
        raise ValueError(TABLE_SHAPE.format(name=name, shape=t.shape))
    if not np.all(np.isfinite(t)) or np.any(t < 0.0):
        raise ValueError(f"{name} must hold probabilities >= 0 (project a noisy table first)")
    return t


def conditional_rates(table: ArrayLike) -> NDArray[np.float64]:
    """``q[y, a] = P[Yhat = 1 | Y = y, A = a]`` from a valid table, shape (2, G).

    Row 0 holds the base classifier's false-positive rates, row 1 its true-positive rates. A
    (label, group) pair with no mass gets 1/2 (module docstring).
    """
    t = _check_table(table, "table")
    mass = t[0] + t[1]  # (G, 2): P[A = a, Y = y]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(mass > 0.0, t[1] / np.where(mass > 0.0, mass, 1.0), 0.5)
    return np.ascontiguousarray(q.T)


def solve_equalized_odds(table: ArrayLike, *, gamma: float = 0.0) -> tuple[NDArray, float]:
    """Hardt et al.'s LP on a valid table: the mixing probabilities and the estimated error.

    Returns ``(p, err)`` with ``p[yhat, a]`` of shape (2, G) and ``err`` the objective value
    (module docstring for the program). Solved with ``scipy.optimize.linprog(method="highs")``.
    """
    t = _check_table(table, "table")
    gam = check_positive(gamma, name="gamma", allow_zero=True)
    g = t.shape[1]
    q = conditional_rates(t)
    # Variables x = p.ravel(): index yhat * G + a. err = sum(Q[.,.,1]) + c . x
    cost = (t[:, :, 0] - t[:, :, 1]).ravel()
    rows: list[NDArray[np.float64]] = []
    for y in (0, 1):  # FPR (y = 0) and TPR (y = 1) of each group, as rows over x
        rate = np.zeros((g, 2 * g))
        rate[np.arange(g), np.arange(g)] = 1.0 - q[y]
        rate[np.arange(g), g + np.arange(g)] = q[y]
        rows.extend(rate[a] - rate[0] for a in range(1, g))
    diff = np.array(rows)
    a_ub = np.vstack([diff, -diff])
    b_ub = np.full(a_ub.shape[0], gam)
    res = optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=(0.0, 1.0), method="highs")
    if res.status != 0:
        raise RuntimeError(LP_FAILED.format(message=res.message))
    p = np.clip(np.asarray(res.x, dtype=np.float64), 0.0, 1.0).reshape(2, g)
    err = float(t[:, :, 1].sum() + cost @ p.ravel())
    return p, err


def dp_postprocess(
    base_predictions: ArrayLike,
    *,
    protected: ArrayLike,
    labels: ArrayLike,
    epsilon: float,
    rng: np.random.Generator,
    gamma: float = 0.0,
    n_groups: int = 2,
) -> PostProcessing:
    """The DP post-processing service (Jagielski et al. 2019, Algorithm 1), eps-DP in A.

    Counts the table, releases it with Laplace noise of scale ``2/(m eps)`` per cell, projects it
    onto the simplex and solves the equalized-odds LP. Only public facts are returned.

    Parameters
    ----------
    base_predictions : array of m values in {0, 1}
        The base classifier on the audit set (computed from the features only).
    protected, labels : arrays of m values
        The audit set's groups (0..G-1) and labels (0/1). Compliance side only.
    epsilon : float
        Privacy loss of the service (``math.inf``: no noise, Hardt et al.'s non-private LP).
    rng : numpy.random.Generator
        Source of the noise.
    gamma : float
        Allowed gap of the TPRs and of the FPRs from group 0's in the LP.
    n_groups : int
        Number of groups G (public).
    """
    eps = check_epsilon(epsilon)
    gam = check_positive(gamma, name="gamma", allow_zero=True)
    counts = count_table(base_predictions, protected=protected, labels=labels, n_groups=n_groups)
    m = int(counts.sum())
    noisy = release_table(counts, epsilon=eps, rng=rng)
    table = project_to_simplex(noisy)
    mixing, err = solve_equalized_odds(table, gamma=gam)
    return PostProcessing(
        mixing=mixing,
        noisy_table=noisy,
        table=table,
        epsilon=eps,
        gamma=gam,
        m=m,
        noise_scale=table_noise_scale(m, eps),
        estimated_error=err,
    )


def _mixing(mixing: ArrayLike) -> NDArray[np.float64]:
    p = np.asarray(mixing, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != 2 or p.shape[1] < 2 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(MIXING_SHAPE.format(shape=p.shape))
    return p


def derived_probabilities(
    mixing: ArrayLike, base_predictions: ArrayLike, *, protected: ArrayLike
) -> NDArray[np.float64]:
    """``P[Y' = 1]`` for each person: ``p[yhat_i, a_i]``. Reads the attribute (disparate
    treatment)."""
    p = _mixing(mixing)
    yhat = as_labels(base_predictions, name="base_predictions")
    a = as_groups(protected, n=yhat.size, n_groups=p.shape[1])
    return p[yhat, a]


def derived_predictions(
    mixing: ArrayLike,
    base_predictions: ArrayLike,
    *,
    protected: ArrayLike,
    rng: np.random.Generator,
) -> NDArray[np.int8]:
    """One draw of the randomized derived classifier: 1 with probability ``p[yhat_i, a_i]``."""
    prob = derived_probabilities(mixing, base_predictions, protected=protected)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (seeded); received {type(rng).__name__}"
        )
    return (rng.random(prob.size) < prob).astype(np.int8)
