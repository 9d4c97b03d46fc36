r"""The DP oracle learner: a private Learner-Auditor game for equalized odds.

Jagielski et al. (ICML 2019, section 4) make the reductions approach of Agarwal et al. (ICML 2018)
differentially private with respect to the protected attribute. Fair learning is a zero-sum game
over the Lagrangian

.. math:: L(h, \lambda) = \mathrm{err}(h) + \sum_{a \ne 0,\, y}
    \lambda^+_{a,y} (\Delta_{a,y}(h) - \gamma) + \lambda^-_{a,y} (-\Delta_{a,y}(h) - \gamma),
    \qquad \Delta_{a,y}(h) = R_{a,y}(h) - R_{0,y}(h),

where :math:`R_{a,y}(h)` is the rate of predicting 1 among the people of group ``a`` with label
``y`` (group 0 is the anchor, so ``2 (|A| - 1)`` differences stand for every pairwise one), and
the multipliers satisfy :math:`\lambda \ge 0`, :math:`\|\lambda\|_1 \le B`. For T rounds:

1. **Learner.** Given :math:`\lambda_t` it best-responds with an A-blind classifier: minimising
   :math:`L(h, \lambda_t)` over ``h`` is cost-sensitive classification with per-person cost
   difference (cost of predicting 1 minus cost of predicting 0)
   :math:`c_i = \big((1 - 2 y_i) + m\, w_i\big) / m`, where :math:`\mu = \lambda^+ - \lambda^-`,
   :math:`w_i = \mu_{a_i,y_i} / n_{a_i,y_i}` for ``a_i != 0`` and
   :math:`w_i = -\sum_{a \ne 0} \mu_{a,y_i} / n_{0,y_i}` for ``a_i = 0``. The seed's learner is
   least squares: regress ``c`` on ``X`` (with an intercept), :math:`\theta = (X^\top X)^{-1}
   (X^\top c + Z)`, and predict 1 where :math:`x^\top \theta < 0`. Only :math:`X^\top c` involves
   the attribute; ``Z`` is Laplace noise. The classifier needs ``x`` only.
2. **Auditor.** It releases the violations :math:`\Delta_{a,y}(h_t)` with Laplace noise and takes
   an exponentiated-gradient step: :math:`\theta \mathrel{+}= \eta\, (\pm\tilde\Delta - \gamma)`,
   :math:`\lambda = B\, e^{\theta} / (1 + \sum e^{\theta})` (the extra 1 lets
   :math:`\|\lambda\|_1` stay below ``B``).

The output is the uniform mixture of the T classifiers (predict with a uniformly chosen round's
model), plus the public diagnostics: each round's noisy violations and multipliers.

Sensitivities. Neighbours differ in ONE person's protected attribute (X and Y shared): person
``j`` with label ``y`` moves from group ``a`` to ``a'``. Every data set considered has at least
``n_min = m p_min`` people in each (group, label) cell (a PUBLIC lower bound; the empirical one
would make the noise scale a function of A). The classifiers :math:`h_t` and multipliers
:math:`\lambda_t` are earlier outputs, fixed when a round is analysed (adaptive composition).

- *Auditor.* Removing ``j`` from a cell of size ``n`` moves its rate by
  :math:`|R - h_j| / (n - 1) \le 1 / (n_{\min} - 1)`; adding moves the other by at most
  :math:`1 / (n + 1)`. If neither group is 0, two differences move; if one is group 0, the
  anchor rate moves all ``|A| - 1`` differences with label ``y`` and the other group's rate one
  more. The l1 sensitivity of the violation vector is :math:`|A| / (n_{\min} - 1)`.
- *Learner.* With :math:`\lambda` fixed, only costs of people in the two cells change (their
  sizes change) plus ``j``'s own. Summing: the cell ``j`` leaves changes by
  :math:`|\mu_{a,y}| / n_{a,y}`, the cell it joins by :math:`|\mu_{a',y}| / (n_{a',y} + 1)`, and
  ``j``'s own cost by at most their sum; with group 0 involved :math:`\mu_{a,y}` is replaced by
  :math:`\sum_{b \ne 0} \mu_{b,y}`. As :math:`\sum |\mu| \le \|\lambda\|_1 \le B`, the l1 change
  of ``c`` is at most :math:`4 B / n_{\min}`. The noise is calibrated to the seed's larger
  bound :math:`(2|A|B + 1) / (m p_{\min} - 1)` (its ``+ 1`` covers the error term, which does not
  change under this neighbouring rule), at least :math:`4B / n_{\min}` for every ``|A| >= 2``.
  For :math:`X^\top c` the l1 sensitivity is at most :math:`\max_i \|x_i\|_1` times that of
  ``c`` (``x_i`` with its intercept 1); X is shared by neighbours, so this factor is public.

Privacy. Each round runs two pure eps'-DP Laplace mechanisms; the game is their adaptive
composition over 2T mechanisms. :func:`per_round_epsilon` finds eps' for a total (eps, delta):
``advanced`` solves :math:`\varepsilon = \sqrt{2k \ln(1/\delta)}\,\varepsilon' + k \varepsilon'
(e^{\varepsilon'} - 1)`, ``k = 2T`` (Dwork, Rothblum and Vadhan 2010) with ``brentq``, as the
seed's code does; ``pld`` takes the largest eps' whose composition in ``dp_accounting``'s privacy
loss distribution (the generic pure eps'-DP law, which bounds every pure mechanism) meets (eps,
delta), never below ``basic``, which is ``eps / (2T)``. The advanced bound's linear term
:math:`k \varepsilon'(e^{\varepsilon'} - 1)` makes its eps' grow only like ``log eps``: once
``eps / (2T)`` exceeds ``ln 2`` (sooner, through the square-root term) it is below basic's, so
for large budgets ``pld`` (or ``basic``) is what lets the game approach the non-private one.
``epsilon = inf`` plays without noise.

Noise. :func:`laplace_vector` releases a vector on a power-of-two grid with exactly sampled
discrete Laplace noise (:mod:`~biasleak.mechanisms.samplers` explains why; the pieces are
:func:`~biasleak.mechanisms.grid.choose_grid` and
:func:`~biasleak.mechanisms.discrete_noise.discrete_laplace`), the way ``release`` does for a
metric: round to the grid, add noise whose scale covers the l1 sensitivity plus one grid unit
per coordinate (rounding) and a float-error slack. ``release`` itself is not used: its
sensitivities are those of the fairness metrics, not of an arbitrary statistic.

References: M. Jagielski et al., Differentially private fair learning, ICML 2019; A. Agarwal et
al., A reductions approach to fair classification, ICML 2018; C. Dwork, G. Rothblum and S.
Vadhan, Boosting and differential privacy, FOCS 2010.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from biasleak.mechanisms._validation import (
    check_int,
    check_positive,
)
from biasleak.mechanisms.fair.budget import (
    ACCOUNTANTS,
    Accountant,
    NoisyVector,
    RoundBudget,
    laplace_vector,
    per_round_epsilon,
)

__all__ = [
    "ACCOUNTANTS",
    "NoisyVector",
    "OracleResult",
    "RoundBudget",
    "auditor_sensitivity",
    "lagrangian_costs",
    "laplace_vector",
    "learner_sensitivity",
    "per_round_epsilon",
    "run_oracle_learner",
]

SHAPES: Final = (
    "features must be (m, d) and labels, protected of length m; received shapes {shapes}"
)
NOT_FINITE: Final = "features must be finite"
LABELS: Final = "labels must contain only 0 and 1"
CELL_TOO_SMALL: Final = (
    "every (group, label) cell needs at least min_cell_size = {bound} people (the public bound "
    "the noise is calibrated to); the smallest has {size}"
)
GROUPS: Final = "protected must hold at least two groups; received {groups}"


def auditor_sensitivity(*, groups: int, min_cell_size: int) -> float:
    """l1 sensitivity of the violation vector: ``|A| / (n_min - 1)`` (module docstring)."""
    return check_int(groups, name="groups", minimum=2) / (
        check_int(min_cell_size, name="min_cell_size", minimum=2) - 1
    )


def learner_sensitivity(*, groups: int, bound: float, min_cell_size: int) -> float:
    """l1 sensitivity of the cost vector ``c``: ``(2|A|B + 1) / (n_min - 1)`` (the seed's)."""
    g = check_int(groups, name="groups", minimum=2)
    b = check_positive(bound, name="bound")
    return (2.0 * g * b + 1.0) / (check_int(min_cell_size, name="min_cell_size", minimum=2) - 1)


# -------------------------------------------------------------------------------------------
# The game
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OracleResult:
    """The mixture the game returns, its public diagnostics and its privacy cost.

    Round ``t``'s classifier predicts 1 where ``features @ coefficients[t] + intercepts[t] > 0``;
    the mixture predicts with a uniformly chosen round's classifier.
    """

    coefficients: NDArray[np.float64]
    """(T, d) weights of each round's A-blind linear classifier."""
    intercepts: NDArray[np.float64]
    """(T,) intercepts."""
    noisy_violations: NDArray[np.float64]
    """(T, |A| - 1, 2): released ``Delta_{a,y}(h_t)`` for a = 1.., y = 0 (FPR), 1 (TPR)."""
    lambda_plus: NDArray[np.float64]
    """(T, |A| - 1, 2): multipliers of ``Delta - gamma <= 0`` the Learner responded to."""
    lambda_minus: NDArray[np.float64]
    """(T, |A| - 1, 2): multipliers of ``-Delta - gamma <= 0``."""
    budget: RoundBudget
    """eps' per mechanism under each accountant and which one calibrated the noise."""
    learner_scale: float
    """Laplace scale on ``X^T c`` (0 without noise); public when ``min_cell_size`` was given."""
    auditor_scale: float
    """Laplace scale on the violations (0 without noise)."""
    calibration_public: bool
    """False when the cell-size bound came from the data (then the scales depend on A)."""

    @property
    def rounds(self) -> int:
        """T."""
        return int(self.intercepts.shape[0])

    @property
    def epsilon(self) -> float:
        """Total epsilon charged."""
        return self.budget.epsilon

    @property
    def delta(self) -> float:
        """Total delta charged."""
        return self.budget.delta

    def scores(self, features: ArrayLike) -> NDArray[np.float64]:
        """(T, n) linear scores of each round's classifier."""
        x = np.asarray(features, dtype=np.float64)
        return self.coefficients @ x.T + self.intercepts[:, None]

    def predict_proba(self, features: ArrayLike) -> NDArray[np.float64]:
        """(n,) probability that the uniform mixture predicts 1."""
        return np.mean(self.scores(features) > 0.0, axis=0)

    def predict(self, features: ArrayLike, *, rng: np.random.Generator) -> NDArray[np.int64]:
        """(n,) one draw of the randomised mixture: a uniformly chosen round per person."""
        s = self.scores(features)
        pick = rng.integers(0, s.shape[0], size=s.shape[1])
        return (s[pick, np.arange(s.shape[1])] > 0.0).astype(np.int64)


def _cells(labels: NDArray[np.int64], codes: NDArray[np.int64], groups: int) -> NDArray[np.int64]:
    counts = np.zeros((groups, 2), dtype=np.int64)
    np.add.at(counts, (codes, labels), 1)
    return counts


def lagrangian_costs(
    labels: NDArray[np.int64],
    *,
    codes: NDArray[np.int64],
    counts: NDArray[np.int64],
    mu: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Per-person cost of predicting 1 minus that of predicting 0 (module docstring).

    ``mu`` has shape (|A| - 1, 2): ``lambda_plus - lambda_minus`` per (group a >= 1, label y).
    """
    m = labels.size
    weight = np.zeros((counts.shape[0], 2), dtype=np.float64)
    weight[1:] = mu / counts[1:]
    weight[0] = -mu.sum(axis=0) / counts[0]
    return ((1.0 - 2.0 * labels) + m * weight[codes, labels]) / m


def _violations(
    h: NDArray[np.float64],
    labels: NDArray[np.int64],
    codes: NDArray[np.int64],
    counts: NDArray[np.int64],
) -> NDArray[np.float64]:
    sums = np.zeros_like(counts, dtype=np.float64)
    np.add.at(sums, (codes, labels), h)
    rates = sums / counts
    return rates[1:] - rates[0]


def run_oracle_learner(
    features: ArrayLike,
    labels: ArrayLike,
    *,
    protected: ArrayLike,
    epsilon: float,
    delta: float,
    gamma: float,
    bound: float,
    rounds: int,
    rng: np.random.Generator,
    learning_rate: float | None = None,
    accountant: Accountant | str = "advanced",
    min_cell_size: int | None = None,
) -> OracleResult:
    """Play the private Learner-Auditor game for equalized odds (Jagielski et al., Alg. 2).

    Parameters
    ----------
    features : (m, d) array
        Unprotected attributes X (shared by neighbouring data sets).
    labels : (m,) array in {0, 1}
    protected : (m,) array of integer group codes
        The smallest code is the anchor group 0. Every (group, label) cell must be non-empty.
    epsilon, delta : float
        Total privacy loss of the whole game; ``epsilon = inf`` plays it without noise.
    gamma : float
        Allowed equalized-odds slack of each constraint.
    bound : float
        B, the l1 bound on the multipliers.
    rounds : int
        T; the game runs 2T mechanisms.
    rng : numpy.random.Generator
    learning_rate : float, optional
        Exponentiated-gradient step; defaults to ``2 / B`` (fairlearn's ``eta0 / B``).
    accountant : {"advanced", "pld", "basic"}
        Which per-mechanism eps' calibrates the noise (:func:`per_round_epsilon`).
    min_cell_size : int, optional
        Public lower bound ``m p_min`` on every (group, label) cell. Without it the data's own
        minimum is used, which makes the noise scales depend on A (flagged in the result).
    """
    x = np.asarray(features, dtype=np.float64)
    y_raw, a_raw = np.asarray(labels), np.asarray(protected)
    if x.ndim != 2 or y_raw.shape != (x.shape[0],) or a_raw.shape != (x.shape[0],):
        raise ValueError(SHAPES.format(shapes=[x.shape, y_raw.shape, a_raw.shape]))
    if not np.all(np.isfinite(x)):
        raise ValueError(NOT_FINITE)
    if not np.all((y_raw == 0) | (y_raw == 1)):
        raise ValueError(LABELS)
    y = y_raw.astype(np.int64)
    group_codes, codes = np.unique(a_raw, return_inverse=True)
    n_groups = group_codes.size
    if n_groups < 2:
        raise ValueError(GROUPS.format(groups=group_codes.tolist()))
    g = check_positive(gamma, name="gamma", allow_zero=True)
    b = check_positive(bound, name="bound")
    t_rounds = check_int(rounds, name="rounds")
    eta = 2.0 / b if learning_rate is None else check_positive(learning_rate, name="learning_rate")
    budget = per_round_epsilon(epsilon, delta, mechanisms=2 * t_rounds, accountant=accountant)
    eps_prime = budget.per_mechanism

    counts = _cells(y, codes, n_groups)
    smallest = int(counts.min())
    public = min_cell_size is not None
    n_min = check_int(min_cell_size, name="min_cell_size", minimum=2) if public else smallest
    if smallest < max(n_min, 2):
        raise ValueError(CELL_TOO_SMALL.format(bound=max(n_min, 2), size=smallest))

    m, d = x.shape
    design = np.hstack([x, np.ones((m, 1))])
    gram = design.T @ design
    gram += 1e-10 * (np.trace(gram) / (d + 1)) * np.eye(d + 1)  # public: X only
    row_norm = float(np.max(np.sum(np.abs(design), axis=1)))
    sens_c = learner_sensitivity(groups=n_groups, bound=b, min_cell_size=n_min)
    sens_learner = row_norm * sens_c
    sens_auditor = auditor_sensitivity(groups=n_groups, min_cell_size=n_min)
    cost_max = (1.0 + b * m / n_min) / m  # public bound on |c_i|
    # Summation error of X^T c: at most m u sum_i |x_i| |c_i| <= m^2 u row_norm cost_max, for
    # S and S' both, with room for the rounding of the costs themselves.
    float_learner = 4.0 * m * m * row_norm * cost_max * 2.0**-53

    shape = (n_groups - 1, 2)
    theta = np.zeros(2 * (n_groups - 1) * 2)
    weights = np.empty((t_rounds, d + 1))
    released = np.empty((t_rounds, *shape))
    lam_plus = np.empty((t_rounds, *shape))
    lam_minus = np.empty((t_rounds, *shape))
    learner_scale = auditor_scale = 0.0
    for t in range(t_rounds):
        lam = b * np.exp(theta - np.logaddexp(0.0, special.logsumexp(theta)))
        lp, lm = lam[: lam.size // 2].reshape(shape), lam[lam.size // 2 :].reshape(shape)
        lam_plus[t], lam_minus[t] = lp, lm
        costs = lagrangian_costs(y, codes=codes, counts=counts, mu=lp - lm)
        noisy_xc = laplace_vector(
            design.T @ costs,
            l1_sensitivity=sens_learner,
            epsilon=eps_prime,
            rng=rng,
            float_error=float_learner,
        )
        learner_scale = noisy_xc.scale
        w = np.linalg.solve(gram, noisy_xc.values)
        weights[t] = -w  # predict 1 where the regressed cost difference is negative
        h = (design @ weights[t] > 0.0).astype(np.float64)
        noisy_v = laplace_vector(
            _violations(h, y, codes, counts).ravel(),
            l1_sensitivity=sens_auditor,
            epsilon=eps_prime,
            rng=rng,
            float_error=8.0 * n_groups * m * 2.0**-53,
        )
        auditor_scale = noisy_v.scale
        released[t] = noisy_v.values.reshape(shape)
        flat = noisy_v.values
        theta += eta * (np.concatenate([flat, -flat]) - g)
    return OracleResult(
        coefficients=weights[:, :d].copy(),
        intercepts=weights[:, d].copy(),
        noisy_violations=released,
        lambda_plus=lam_plus,
        lambda_minus=lam_minus,
        budget=budget,
        learner_scale=learner_scale,
        auditor_scale=auditor_scale,
        calibration_public=public,
    )
