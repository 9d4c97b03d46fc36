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

The output is a mixture of the T classifiers (predict with a round's model drawn by the
mixture's weights), plus the public diagnostics: each round's noisy violations, multipliers and
training error.

Which mixture. The guarantees of Agarwal et al. and of Jagielski et al. are about the
uniform average, and ``mixture="uniform"`` returns it. It needs many rounds with a small step to
be good: with fairlearn's step ``eta = 2 / B`` and T = 20 the multipliers overshoot (from
:math:`\lambda = B/(K + 1)` per coordinate, with two groups one step moves :math:`\mu` by
about :math:`0.8\,\tilde\Delta`, while with small (group, label) cells a :math:`|\mu|` of 0.3
already weighs every person of one cell above the error term: on Adult's women with label 1,
:math:`m\,|\mu| / n = 2000 \cdot 0.3 / 82 \approx 7` times), so
the best responses swing between two unfair extremes and the uniform average mixes them. On
Adult (sex; 2,000-person audit split, T = 20, ``B = 1/gamma``) the rounds alternate between about
21% and 31% held-out error and the average has 26.3% at gamma = 0.05, where fairlearn's
``ExponentiatedGradient`` has 15.1% (means of five splits); on the first split the
unconstrained least-squares learner alone (round 0, :math:`\mu = 0`) already meets gamma = 0.05
on the audit split, and fairlearn returns its own unconstrained model there. fairlearn avoids
the swing not with a smaller step (its ``eta0 / B`` is this default) but by solving, after
every round, the game restricted to the classifiers found so far (its ``run_linprog_step``) and
returning the best one.

``mixture="saddle"`` (the default) does the same once, at the end: it weighs the T played
classifiers by the linear program

.. math:: \min_{q \in \Delta_T,\, s \ge 0} \; \sum_t q_t\, \mathrm{err}(h_t) + B s
    \quad \text{s.t.} \quad \pm \sum_t q_t \tilde\Delta_{a,y}(h_t) - \gamma \le s,

which is :math:`\min_q \max_{\lambda \ge 0, \|\lambda\|_1 \le B} L(q, \lambda)` with the released
violations in place of the true ones. Its inputs are public: the released (noisy) violations, and
each round's training error, a function of X, Y and the released classifier, which neighbours
share. So it is post-processing and costs no privacy. The uniform average is one feasible
``q``, so the saddle mixture's value in the released game is never worse; at finite epsilon it
may lean on rounds whose noise understated their violation (by at most the largest noise draw),
where the uniform average lets the noise average out. Measured with ``biasleak paper``'s splits
(``sim/fair/data.prepare``, seeds 0-4, T = 20, ``B = 1/gamma``, ``eta = 2/B``) at
epsilon = inf, held-out error / equalized-odds violation, mean of five seeds:

=========  ======================  ======================  ==================
Adult      uniform                 saddle                  fairlearn EG
=========  ======================  ======================  ==================
gamma .01  26.5% / 2.1%            19.2% / 4.1%            16.1% / 7.6%
gamma .05  26.3% / 2.1%            16.6% / 4.7%            15.1% / 6.9%
gamma .20  23.1% / 3.2%            16.0% / 9.4%            15.0% / 7.3%
=========  ======================  ======================  ==================

The rest of the gap is the learner. Least squares on the cost (the seed's oracle; the only
learner whose use of A is the one released sum :math:`X^\top c`) is a weaker classifier than
fairlearn's logistic regression: with :math:`\lambda = 0` it has 15.8-16.1% held-out error on
those five Adult splits where logistic regression fitted to the same 2,000 people has
14.8-15.2%, and a public ridge (up to 0.1 of the mean diagonal) moves it by at most 0.3 points.
A smaller step is no substitute: ``eta = 0.5 / B`` brings the uniform mixture to 16.6% at
gamma = 0.05, but only because its multipliers barely move in 20 rounds (violation 6.6%, that
of the unconstrained learner), so the step keeps fairlearn's default (and the replay of the
multipliers from public data stays as it was). On German credit (400-person audit split) both
mixtures stay within 0.7 points of fairlearn's error at every gamma (saddle 25.7-26.2%, uniform
26.2-26.4%, fairlearn 25.6-26.0%). With noise (gamma = 0.05, ``pld``, rows repeated tenfold) the
saddle mixture has lower error and a larger violation: Adult at epsilon = 1e5, 18.2% / 4.4%
against the uniform 27.2% / 1.9%; German at epsilon = 1e4, 32.8% / 14.1% against 35.1% / 5.3%,
where the uniform mixture's small violation is that of a classifier close to a coin flip.

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
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from biasleak.mechanisms._validation import (
    check_choice,
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
    "MIXTURES",
    "CellTooSmall",
    "Mixture",
    "NoisyVector",
    "OracleResult",
    "RoundBudget",
    "auditor_sensitivity",
    "lagrangian_costs",
    "laplace_vector",
    "learner_sensitivity",
    "per_round_epsilon",
    "run_oracle_learner",
    "saddle_weights",
]

Mixture = Literal["saddle", "uniform"]
MIXTURES: Final[tuple[str, ...]] = ("saddle", "uniform")
"""How the rounds' classifiers are weighed (module docstring, "Which mixture")."""


class CellTooSmall(ValueError):
    """The audit set has a (group, label) cell below the public bound the noise assumes.

    Whether this is raised depends on the attribute (one bit about the data): a service refuses
    the request and says so.
    """


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
SADDLE_SHAPES: Final = (
    "errors must have shape (T,) and violations (T, K) with the same T >= 1; received shapes "
    "{shapes}"
)
SADDLE_NOT_FINITE: Final = "errors and violations must be finite"
SADDLE_FAILED: Final = "the saddle-point linear program failed: {message}"


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
    the mixture predicts with round ``t``'s classifier with probability ``weights[t]``.
    """

    coefficients: NDArray[np.float64]
    """(T, d) weights of each round's A-blind linear classifier."""
    intercepts: NDArray[np.float64]
    """(T,) intercepts."""
    weights: NDArray[np.float64]
    """(T,) mixture weights (non-negative, summing to 1): the saddle-point or uniform mixture."""
    training_errors: NDArray[np.float64]
    """(T,) each round's error on the audit data (public: a function of X, Y and the model)."""
    mixture: str
    """Which mixture ``weights`` is, one of :data:`MIXTURES`."""
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
        """(n,) probability that the mixture predicts 1."""
        p = self.weights @ (self.scores(features) > 0.0)
        return np.clip(p, 0.0, 1.0)  # the weights' sum may round to 1 + ulp

    def predict(self, features: ArrayLike, *, rng: np.random.Generator) -> NDArray[np.int64]:
        """(n,) one draw of the randomised mixture: a round drawn by ``weights`` per person."""
        s = self.scores(features)
        pick = rng.choice(s.shape[0], size=s.shape[1], p=self.weights)
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


def saddle_weights(
    errors: ArrayLike,
    violations: ArrayLike,
    *,
    gamma: float,
    bound: float,
) -> NDArray[np.float64]:
    r"""Weights of the best mixture of played classifiers in the game with bound ``B``.

    Solves :math:`\min_{q \in \Delta_T, s \ge 0} \sum_t q_t e_t + B s` subject to
    :math:`\pm \sum_t q_t v_{t,k} - \gamma \le s` for every constraint ``k``: the Lagrangian
    game of the module docstring restricted to the T classifiers, its inner maximum over
    :math:`\|\lambda\|_1 \le B` written as ``B`` times the largest excess violation (the
    linear-programming step of fairlearn's ``ExponentiatedGradient``), solved by HiGHS.

    Parameters
    ----------
    errors : (T,) array
        Each classifier's error on the data the game was played on.
    violations : (T, K) array
        Each classifier's (released) signed violations :math:`\Delta_{a,y}`.
    gamma, bound : float
        The game's slack and multiplier bound ``B``.

    Returns
    -------
    (T,) array
        Non-negative weights summing to 1; weights below 1e-9 (solver tolerance) are dropped.
    """
    e = np.asarray(errors, dtype=np.float64)
    v = np.asarray(violations, dtype=np.float64)
    if e.ndim != 1 or v.ndim != 2 or v.shape[0] != e.size or e.size < 1:
        raise ValueError(SADDLE_SHAPES.format(shapes=[e.shape, v.shape]))
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(v))):
        raise ValueError(SADDLE_NOT_FINITE)
    g = check_positive(gamma, name="gamma", allow_zero=True)
    b = check_positive(bound, name="bound")
    t, k = v.shape
    slack = -np.ones((k, 1))
    res = optimize.linprog(
        np.r_[e, b],
        A_ub=np.vstack([np.hstack([v.T, slack]), np.hstack([-v.T, slack])]),
        b_ub=np.full(2 * k, g),
        A_eq=np.r_[np.ones(t), 0.0][None, :],
        b_eq=[1.0],
        bounds=[(0.0, None)] * (t + 1),
        method="highs",
    )
    if res.status != 0:  # pragma: no cover - the program is always feasible and bounded
        raise RuntimeError(SADDLE_FAILED.format(message=res.message))
    q = np.where(res.x[:t] > 1e-9, res.x[:t], 0.0)
    return q / q.sum()


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
    mixture: Mixture | str = "saddle",
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
    mixture : {"saddle", "uniform"}
        How the rounds are weighed: the saddle point of the game restricted to them, computed
        from the released violations (:func:`saddle_weights`), or the theory's uniform average
        (module docstring, "Which mixture"). Either is post-processing of the releases.
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
    how = check_choice(mixture, MIXTURES, name="mixture")
    budget = per_round_epsilon(epsilon, delta, mechanisms=2 * t_rounds, accountant=accountant)
    eps_prime = budget.per_mechanism

    counts = _cells(y, codes, n_groups)
    smallest = int(counts.min())
    public = min_cell_size is not None
    n_min = check_int(min_cell_size, name="min_cell_size", minimum=2) if public else smallest
    if smallest < max(n_min, 2):
        raise CellTooSmall(CELL_TOO_SMALL.format(bound=max(n_min, 2), size=smallest))

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
    errors = np.empty(t_rounds)
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
        errors[t] = np.mean(h != y)  # X, Y and the released classifier: public
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
    if how == "saddle":
        mix = saddle_weights(errors, released.reshape(t_rounds, -1), gamma=g, bound=b)
    else:
        mix = np.full(t_rounds, 1.0 / t_rounds)
    return OracleResult(
        coefficients=weights[:, :d].copy(),
        intercepts=weights[:, d].copy(),
        weights=mix,
        training_errors=errors,
        mixture=how,
        noisy_violations=released,
        lambda_plus=lam_plus,
        lambda_minus=lam_minus,
        budget=budget,
        learner_scale=learner_scale,
        auditor_scale=auditor_scale,
        calibration_public=public,
    )
