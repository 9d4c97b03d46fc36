r"""Empirical privacy audits: lower bounds on a release's privacy loss, measured from its outputs.

The ceilings of :mod:`biasleak.mechanisms.ceiling` are *upper* bounds: proofs that one release
leaks at most so much about one person. A proof can be wrong, and so can the code that is meant
to implement the proved mechanism (a noise scale computed too small, a sampler that is not the
law the proof talks about). An empirical audit checks the claim *from below*: it runs the real
release many times on two neighbouring audit sets and measures how well a statistical test can
tell the two apart. Whatever the test, its error rates bound the privacy loss from below, with
a stated confidence; a lower bound above what the ceiling claims is a defect.

Two worlds, one test (Jagielski, Ullman and Oprea 2020)
-------------------------------------------------------
Let P be the law of the released value on an audit set S and Q its law on a neighbour S' (one
person's attribute flipped, or two people's exchanged). A test is a set T of outputs: it says
"S" when the output lands in T. Its false-positive rate is ``FPR = Q(T)`` and its false-negative
rate ``FNR = 1 - P(T)``. If the release is (eps, delta)-differentially private for this pair,

.. math:: P(T) \le e^\varepsilon Q(T) + \delta \quad\text{and}\quad
          Q(T^c) \le e^\varepsilon P(T^c) + \delta ,

so every test gives

.. math:: \varepsilon \;\ge\; \log\frac{1 - \delta - \mathrm{FNR}}{\mathrm{FPR}}
          \quad\text{or, read the other way,}\quad
          \varepsilon \;\ge\; \log\frac{1 - \delta - \mathrm{FPR}}{\mathrm{FNR}},

and its total variation ``TV(P, Q) = sup_T P(T) - Q(T) >= TPR - FPR``. The rates are unknown;
their estimates from N draws of each world are replaced by one-sided Clopper-Pearson bounds
(exact binomial intervals: :func:`cp_lower`, :func:`cp_upper`), the true-positive rate by its
lower bound and the false-positive rate by its upper bound, each failing with probability at
most ``alpha / 2``. So :func:`epsilon_lower_bound` and :func:`tv_lower_bound` hold together with
probability at least ``1 - alpha`` (a union bound; the two sample sets need not be independent
of each other, only each i.i.d.).

Choosing the test on the same draws that measure it would make the bound optimistic, so the
draws of each world are split in halves (:func:`audit_samples`): on the *selection* half, every
threshold test ``{x >= c}``, ``{x < c}`` and interval test ``{c_i <= x < c_j}`` over a grid of
cut points (quantiles of the pooled selection draws, refined in both tails) is scored by the
bound it would give there, in both directions (the set names world S, or it names world S');
the best one is then counted once on the *held-out* half, which it has never seen. Thresholds
are the most powerful tests for shift families with a monotone likelihood ratio (Laplace,
Gaussian); intervals catch the Cauchy, whose likelihood ratio peaks near the centre.

What the bounds are compared with. A claim is one dominating pair of the ceiling module (its
:class:`~biasleak.mechanisms.ceiling.Pair`): its epsilon at its own delta (:func:`claimed_epsilon`:
the largest privacy loss ``max_loss`` for a pure pair, ``eps`` for an ``approx`` pair at its
``delta``) and its total variation (``Pair.total_variation()``). An epsilon lower bound computed
with the claim's delta that exceeds the claim's epsilon, or a total-variation lower bound that
exceeds the claim's total variation, means the claim is false, unless the bound itself failed,
which happens with probability at most alpha. A lower bound below the claim proves nothing: the
test may be weak, or the claim loose (Attribute-Conceal's flip claim is its eps-DP guarantee,
whose true worst-case loss is far lower).

One run, many canaries (Steinke, Nasr and Jagielski 2023)
---------------------------------------------------------
Two-world audits need many runs. The one-run audit needs one: m *canaries* whose bits
``S_1, ..., S_m`` are independent fair coins, one run of the release on the audit set they
define, and an auditor who guesses r of the bits (the ones it is most confident about) and
abstains on the rest. If the whole run is eps-DP with respect to each canary's bit (whatever the
other bits are), the number W of correct guesses is stochastically dominated by
``Binomial(r, p)`` with ``p = e^eps / (1 + e^eps)`` (the pure-DP case of their main theorem).
The largest eps whose binomial tail ``P[Binomial(r, p) >= W]`` is at most alpha is then a lower
bound at confidence ``1 - alpha`` (:func:`one_run_epsilon_lower_bound`); it is the logit of the
Clopper-Pearson lower bound of a success probability, exactly. The number of guesses must be
fixed before looking at the run: :func:`canary_audit` tries a few and pays for them with a
Bonferroni correction. Their theorem for (eps, delta) is not implemented here: a claim with
delta > 0 is refused (:data:`ONE_RUN_NEEDS_PURE`).

Twins: mechanisms that are wrong on purpose
-------------------------------------------
An audit is only as good as its power, so the suite runs it on *under-noised twins*
(:class:`Twin`): the real release, through the real safe samplers, with its noise scale
multiplied by a factor below one (the sensitivity of the global-sensitivity mechanisms, the
factor 6 of Attribute-Conceal or 2 of smooth sensitivity with Laplace noise). A twin whose
privacy loss exceeds the real mechanism's claims should be flagged; the real one (factor 1)
should not. :meth:`Twin.draw` also turns one release into many draws at once: it releases an
array of exact values with, for each, exactly the law one answer has in a release of ``models``
models (noise independent per value; the per-answer scale of that release), so 10^5 to 10^6
draws cost one vectorised call.

Worst queries. :func:`worst_flip` and :func:`worst_swap` search a batch of models for the model
and the person (or two people) whose flip (swap) moves the exact answer the most, from closed
forms over every person (flips) or the extreme pairs (swaps), and return the two exact answers
computed by :func:`biasleak.mechanisms.metrics.evaluate` on both audit sets.

References
----------
- M. Jagielski, J. Ullman, A. Oprea. Auditing differentially private machine learning: how
  private is private SGD? NeurIPS 2020.
- T. Steinke, M. Nasr, M. Jagielski. Privacy auditing with one (1) training run. NeurIPS 2023.
- C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in the case
  of the binomial. Biometrika 26 (1934).
- P. Kairouz, S. Oh, P. Viswanath. The composition theorem for differential privacy. ICML 2015
  (the hypothesis-testing reading of (eps, delta)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from biasleak.mechanisms import metrics
from biasleak.mechanisms._validation import (
    as_binary,
    as_predictions,
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from biasleak.mechanisms.calibrate import Job, calibrate_smooth
from biasleak.mechanisms.ceiling import Pair
from biasleak.mechanisms.discrete_noise import (
    discrete_gaussian,
    discrete_laplace,
    truncated_discrete_laplace,
)
from biasleak.mechanisms.gaussian_sigma import analytic_gaussian_sigma, discrete_gaussian_sigma
from biasleak.mechanisms.grid import choose_grid, grid_ints
from biasleak.mechanisms.metrics import METRIC_RANGES
from biasleak.mechanisms.naive_noise import add_noise
from biasleak.mechanisms.release import BOUNDINGS, MECHANISM_INFO, NOISY, SAMPLERS
from biasleak.mechanisms.samplers import SIGMA2_DENOMINATOR, safe_gaussian, safe_laplace
from biasleak.mechanisms.sensitivity import (
    SENSITIVITY_METRICS,
    attribute_conceal_beta,
    global_sensitivity,
    smooth_laplace_beta,
)

__all__ = [
    "CUT_LEVELS",
    "ONE_RUN_NEEDS_PURE",
    "Bound",
    "CanaryResult",
    "Neighbour",
    "SampleAudit",
    "Test",
    "Twin",
    "audit_samples",
    "canary_audit",
    "claimed_epsilon",
    "clopper_pearson",
    "composed_pure_epsilon",
    "cp_lower",
    "cp_upper",
    "epsilon_lower_bound",
    "evaluate_test",
    "flip_values",
    "log_likelihood_ratio",
    "one_run_epsilon_lower_bound",
    "select_test",
    "tv_lower_bound",
    "worst_flip",
    "worst_swap",
]

Objective = Literal["epsilon", "tv"]
NoiseFamily = Literal["laplace", "cauchy", "normal"]

CUT_LEVELS: Final = 192
"""Evenly spaced quantile levels of the pooled selection draws used as cut points (the tails get
another 2 x 32 log-spaced levels)."""

CHUNK_CELLS: Final = 1 << 22
"""Models x people held at once by the worst-query search."""

BAD_ALPHA: Final = "alpha must be in (0, 1); received {alpha!r}"
BAD_COUNTS: Final = (
    "counts must satisfy 0 <= successes <= trials with trials >= 1; received successes="
    "{successes!r}, trials={trials!r}"
)
BAD_SAMPLES: Final = (
    "each world needs at least 2 finite draws (one for choosing the test, one for measuring it); "
    "received {p} and {q}"
)
BAD_FACTOR: Final = "scale_factor must be a finite number > 0; received {factor!r}"
TWIN_EXACT: Final = (
    "a twin needs a noisy mechanism from {noisy} with a finite epsilon; received mechanism="
    "{mechanism!r}, epsilon={epsilon!r}"
)
TWIN_TRUNCATE: Final = (
    "bounding 'truncate' is possible only for {allowed} with sampler {sampler!r}; received "
    "mechanism={mechanism!r}"
)
ONE_RUN_NEEDS_PURE: Final = (
    "the one-run canary bound is implemented for pure eps-DP claims only (delta = 0: the "
    "binomial domination of Steinke, Nasr and Jagielski 2023); this claim has delta = {delta:.3g}, "
    "for which their (eps, delta) theorem would be needed and is not implemented"
)
NO_NEIGHBOUR: Final = (
    "no {kind} of this audit set moves metric {metric!r} of these models: every group of the "
    "metric's population must keep a member (and a swap needs one person of each group)"
)
BAD_GUESSES: Final = "guess counts must be integers in [1, {m}]; received {counts!r}"


# -- binomial confidence bounds --------------------------------------------------------------------


def _alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(BAD_ALPHA.format(alpha=alpha))
    return a


def _counts(successes: ArrayLike, trials: ArrayLike) -> tuple[NDArray[np.float64], ...]:
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k != np.floor(k)):
        raise ValueError(BAD_COUNTS.format(successes=successes, trials=trials))
    return np.broadcast_arrays(k, n)  # type: ignore[return-value]


def cp_lower(successes: ArrayLike, trials: ArrayLike, alpha: float) -> NDArray[np.float64]:
    r"""One-sided Clopper-Pearson lower bound of a binomial success probability.

    The smallest p whose upper tail reaches alpha,

    .. math:: \underline p = \mathrm{Beta}^{-1}(\alpha;\ k,\ n - k + 1), \qquad
              \underline p = 0 \text{ for } k = 0,

    so that ``P[p < lower bound] <= alpha`` whatever p is (Clopper and Pearson 1934).
    Vectorised over arrays of counts.
    """
    a = _alpha(alpha)
    k, n = _counts(successes, trials)
    with np.errstate(invalid="ignore"):
        out = stats.beta.ppf(a, np.maximum(k, 1.0), n - k + 1.0)
    return np.where(k == 0, 0.0, out)


def cp_upper(successes: ArrayLike, trials: ArrayLike, alpha: float) -> NDArray[np.float64]:
    r"""One-sided Clopper-Pearson upper bound: ``Beta^{-1}(1 - alpha; k + 1, n - k)``, 1 at
    ``k = n``; ``P[p > upper bound] <= alpha`` whatever p is."""
    a = _alpha(alpha)
    k, n = _counts(successes, trials)
    with np.errstate(invalid="ignore"):
        out = stats.beta.isf(a, k + 1.0, np.maximum(n - k, 1.0))
    return np.where(k == n, 1.0, out)


def clopper_pearson(
    successes: ArrayLike, trials: ArrayLike, confidence: float = 0.95
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Two-sided Clopper-Pearson interval at ``confidence``: each end fails with probability at
    most ``(1 - confidence) / 2`` (the exact, conservative binomial interval)."""
    alpha = _alpha(1.0 - float(confidence))
    return cp_lower(successes, trials, alpha / 2.0), cp_upper(successes, trials, alpha / 2.0)


# -- lower bounds from counts --------------------------------------------------------------------


def _eps_from_rates(
    tpr_lo: NDArray[np.float64], fpr_hi: NDArray[np.float64], delta: float
) -> NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log((tpr_lo - delta) / fpr_hi)
    return np.where(tpr_lo > delta, np.nan_to_num(value, nan=-np.inf), -np.inf)


def epsilon_lower_bound(
    hits: int,
    positives: int,
    false_hits: int,
    negatives: int,
    *,
    delta: float = 0.0,
    alpha: float = 0.05,
) -> float:
    r"""A lower bound on epsilon from one test's counts, holding with probability ``1 - alpha``.

    Parameters
    ----------
    hits : int
        Draws of the world the test names (P) that fell in the test's set T.
    positives : int
        Draws of P.
    false_hits : int
        Draws of the other world (Q) that fell in T.
    negatives : int
        Draws of Q.
    delta : float
        The delta of the claim the bound is compared with.
    alpha : float
        Failure probability of the bound (``alpha / 2`` for each Clopper-Pearson bound).

    Returns
    -------
    float
        :math:`\max\big(0, \log\frac{\underline{TPR} - \delta}{\overline{FPR}}\big)` with
        ``TPR = P(T)`` bounded below and ``FPR = Q(T)`` above (Jagielski et al. 2020): every
        (eps, delta)-DP release has ``P(T) <= e^eps Q(T) + delta``, so with probability at least
        ``1 - alpha`` the release is not (eps', delta)-DP for any ``eps'`` below the result.
        0 when the test shows nothing.
    """
    d = check_delta(delta, allow_zero=True)
    a = _alpha(alpha)
    tpr = cp_lower(hits, positives, a / 2.0)
    fpr = cp_upper(false_hits, negatives, a / 2.0)
    return max(0.0, float(_eps_from_rates(tpr, fpr, d)))


def tv_lower_bound(
    hits: int, positives: int, false_hits: int, negatives: int, *, alpha: float = 0.05
) -> float:
    r"""A lower bound on the total variation ``TV(P, Q)``, holding with probability ``1 - alpha``:
    :math:`\max(0, \underline{TPR} - \overline{FPR})` (``TV >= P(T) - Q(T)`` for every set T);
    arguments as in :func:`epsilon_lower_bound`."""
    a = _alpha(alpha)
    tpr = float(cp_lower(hits, positives, a / 2.0))
    fpr = float(cp_upper(false_hits, negatives, a / 2.0))
    return max(0.0, tpr - fpr)


# -- tests chosen on one half, measured on the other -----------------------------------------------


@dataclass(frozen=True)
class Test:
    """A test: the set ``{low <= x < high}`` of released values, taken as evidence for ``names``."""

    low: float
    """Left end (``-inf`` for a threshold ``x < high``)."""
    high: float
    """Right end, excluded (``inf`` for a threshold ``x >= low``)."""
    names: Literal["P", "Q"]
    """Which world a value in the set is taken for: P (the audit set) or Q (its neighbour)."""

    def contains(self, x: ArrayLike) -> NDArray[np.bool_]:
        """Whether each value lies in the test's set."""
        v = np.asarray(x, dtype=np.float64)
        return (v >= self.low) & (v < self.high)

    def describe(self) -> str:
        """The test in words, e.g. ``x >= 0.0125 -> P``."""
        if math.isinf(self.low) and math.isinf(self.high):
            body = "any x"
        elif math.isinf(self.low):
            body = f"x < {self.high:.6g}"
        elif math.isinf(self.high):
            body = f"x >= {self.low:.6g}"
        else:
            body = f"{self.low:.6g} <= x < {self.high:.6g}"
        return f"{body} -> {self.names}"


def _cuts(pooled: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cut points: sample quantiles of the pooled draws, evenly spaced and log-spaced in both
    tails (down to about 5 draws beyond the cut), with -inf and +inf at the ends."""
    n = pooled.size
    tail = np.geomspace(min(0.02, 5.0 / n), 0.02, 32) if n >= 250 else np.empty(0)
    levels = np.unique(np.concatenate([np.linspace(0.0, 1.0, CUT_LEVELS + 2), tail, 1.0 - tail]))
    values = np.quantile(pooled, levels, method="inverted_cdf")
    return np.unique(np.concatenate([[-np.inf], values, [np.inf]]))


@lru_cache(maxsize=16)
def _cp_table(trials: int, alpha: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(lower, upper) one-sided Clopper-Pearson bounds for every count 0..trials (cached: the
    selection step looks up thousands of candidate sets against the same sample size)."""
    k = np.arange(trials + 1)
    return cp_lower(k, trials, alpha), cp_upper(k, trials, alpha)


def _scores(
    inside_p: NDArray[np.int64],
    inside_q: NDArray[np.int64],
    n_p: int,
    n_q: int,
    objective: Objective,
    delta: float,
    alpha: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The bound every candidate set gives read as evidence for P, and as evidence for Q."""
    low_p, high_p = _cp_table(n_p, alpha / 2.0)
    low_q, high_q = _cp_table(n_q, alpha / 2.0)
    tpr_p, fpr_p = low_p[inside_p], high_q[inside_q]  # the set names P
    tpr_q, fpr_q = low_q[inside_q], high_p[inside_p]  # the set names Q
    if objective == "epsilon":
        # for P: P(T) <= e^eps Q(T) + delta; for Q: Q(T) <= e^eps P(T) + delta (DP holds both
        # ways between neighbours); the same formula with the roles exchanged.
        return _eps_from_rates(tpr_p, fpr_p, delta), _eps_from_rates(tpr_q, fpr_q, delta)
    return tpr_p - fpr_p, tpr_q - fpr_q


def select_test(
    x_p: ArrayLike,
    x_q: ArrayLike,
    *,
    objective: Objective,
    delta: float = 0.0,
    alpha: float = 0.05,
) -> Test:
    """The threshold or interval test with the best bound on these (selection) draws.

    Every set ``{c_i <= x < c_j}`` over the cut points of :func:`_cuts` (thresholds included, as
    intervals with an infinite end) is scored in both directions by the bound it gives on these
    draws (``objective`` ``"epsilon"``: :func:`epsilon_lower_bound` at ``delta``; ``"tv"``:
    :func:`tv_lower_bound`), and the best is returned. The score on the selection draws is
    optimistic; only a count on fresh draws (:func:`evaluate_test`) is a bound.
    """
    p = np.sort(np.asarray(x_p, dtype=np.float64))
    q = np.sort(np.asarray(x_q, dtype=np.float64))
    cuts = _cuts(np.concatenate([p, q]))
    below_p = np.searchsorted(p, cuts, side="left")  # #{x < c}
    below_q = np.searchsorted(q, cuts, side="left")
    i, j = np.triu_indices(cuts.size, k=1)
    inside_p = below_p[j] - below_p[i]
    inside_q = below_q[j] - below_q[i]
    for_p, for_q = _scores(inside_p, inside_q, p.size, q.size, objective, delta, alpha)
    best_p, best_q = int(np.argmax(for_p)), int(np.argmax(for_q))
    if for_p[best_p] >= for_q[best_q]:
        return Test(float(cuts[i[best_p]]), float(cuts[j[best_p]]), "P")
    return Test(float(cuts[i[best_q]]), float(cuts[j[best_q]]), "Q")


@dataclass(frozen=True)
class Bound:
    """A lower bound measured by one test on held-out draws."""

    value: float
    """The lower bound (epsilon, or total variation); 0 when the test shows nothing."""
    confidence: float
    """Probability with which it holds (``1 - alpha``)."""
    test: Test
    """The test, chosen on the selection draws."""
    hits: tuple[int, int]
    """Held-out draws of (the world the test names, the other world) inside the test's set."""
    draws: tuple[int, int]
    """Held-out draws of (the world the test names, the other world)."""


def evaluate_test(
    test: Test,
    x_p: ArrayLike,
    x_q: ArrayLike,
    *,
    objective: Objective,
    delta: float = 0.0,
    alpha: float = 0.05,
) -> Bound:
    """Count ``test`` on fresh draws of both worlds and return its bound (``1 - alpha``)."""
    p = np.asarray(x_p, dtype=np.float64)
    q = np.asarray(x_q, dtype=np.float64)
    named, other = (p, q) if test.names == "P" else (q, p)
    k_named, k_other = int(test.contains(named).sum()), int(test.contains(other).sum())
    if objective == "epsilon":
        value = epsilon_lower_bound(
            k_named, named.size, k_other, other.size, delta=delta, alpha=alpha
        )
    else:
        value = tv_lower_bound(k_named, named.size, k_other, other.size, alpha=alpha)
    return Bound(value, 1.0 - alpha, test, (k_named, k_other), (named.size, other.size))


def claimed_epsilon(pair: Pair, delta: float | None = None) -> float:
    """The epsilon a dominating pair claims at ``delta`` (its own delta by default).

    The smallest eps with ``H_{e^eps}(P || Q) <= delta``: ``max_loss`` for a pure pair at delta
    0, ``eps`` for an ``approx`` pair at its own delta, ``inf`` for ``exact`` (or when delta is
    below the pair's probability of an outcome only P produces).
    """
    d = pair.delta if delta is None else check_delta(delta, allow_zero=True)
    if pair.family == "exact" or d < pair.infinite_mass:
        return math.inf
    top = pair.max_loss
    if pair.family == "approx" and d == pair.delta:
        return float(pair.parameter)
    if d == 0.0:
        return float(top)
    lo, hi = 0.0, float(top)
    if float(pair.profile(np.array([lo]))[0]) <= d:
        return 0.0
    for _ in range(100):  # bisection: the profile decreases in eps
        mid = 0.5 * (lo + hi)
        if float(pair.profile(np.array([mid]))[0]) <= d:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class SampleAudit:
    """Lower bounds from the draws of two worlds, beside one claimed pair."""

    claim: Pair
    """The dominating pair the release is claimed to meet."""
    claimed_epsilon: float
    """The pair's epsilon at ``claimed_delta`` (:func:`claimed_epsilon`)."""
    claimed_delta: float
    """The delta at which epsilon is claimed and bounded (the pair's own)."""
    claimed_tv: float
    """The pair's total variation."""
    epsilon: Bound
    """Lower bound on epsilon at ``claimed_delta``."""
    tv: Bound
    """Lower bound on the total variation."""
    draws: tuple[int, int]
    """Draws of (P, Q) in all (selection and held-out)."""

    @property
    def exceeded(self) -> tuple[str, ...]:
        """The claims a lower bound exceeds: ``"epsilon"``, ``"tv"``, both or none."""
        out = []
        if self.epsilon.value > self.claimed_epsilon:
            out.append("epsilon")
        if self.tv.value > self.claimed_tv:
            out.append("tv")
        return tuple(out)


def audit_samples(
    x_p: ArrayLike, x_q: ArrayLike, *, claim: Pair, alpha: float = 0.05
) -> SampleAudit:
    r"""Audit draws of two neighbouring worlds against one claimed dominating pair.

    The draws of each world are split in halves (they are i.i.d., so the first half is as good
    as a random one): on the first, :func:`select_test` picks the epsilon test (at the claim's
    delta) and the total-variation test; on the second, :func:`evaluate_test` measures each.
    Each of the two bounds holds with probability at least ``1 - alpha``; a caller comparing K
    bounds with claims passes ``alpha / K`` for a family-wise level (Bonferroni).
    """
    p = np.asarray(x_p, dtype=np.float64).ravel()
    q = np.asarray(x_q, dtype=np.float64).ravel()
    if p.size < 2 or q.size < 2 or not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
        raise ValueError(BAD_SAMPLES.format(p=p.size, q=q.size))
    a = _alpha(alpha)
    d = claim.delta
    hp, hq = p.size // 2, q.size // 2
    sel_p, out_p, sel_q, out_q = p[:hp], p[hp:], q[:hq], q[hq:]
    eps_test = select_test(sel_p, sel_q, objective="epsilon", delta=d, alpha=a)
    tv_test = select_test(sel_p, sel_q, objective="tv", alpha=a)
    return SampleAudit(
        claim,
        claimed_epsilon(claim),
        d,
        claim.total_variation(),
        evaluate_test(eps_test, out_p, out_q, objective="epsilon", delta=d, alpha=a),
        evaluate_test(tv_test, out_p, out_q, objective="tv", alpha=a),
        (p.size, q.size),
    )


# -- the one-run canary audit --------------------------------------------------------------------


def one_run_epsilon_lower_bound(correct: int, guesses: int, *, alpha: float = 0.05) -> float:
    r"""Lower bound on a pure epsilon from ``correct`` right guesses among ``guesses`` canaries.

    For an eps-DP run (with respect to each canary's fair coin), the number of correct guesses
    among r is stochastically dominated by ``Binomial(r, p_eps)``, ``p_eps = e^eps/(1 + e^eps)``
    (Steinke, Nasr and Jagielski 2023). The tail ``P[Binomial(r, p) >= W]`` increases in p, so
    the claims rejected at level alpha are exactly those with ``p_eps <= p*``,
    ``p* = Beta^{-1}(alpha; W, r - W + 1)`` (the Clopper-Pearson lower bound), and

    .. math:: \varepsilon \ge \log\frac{p^*}{1 - p^*}

    with probability at least ``1 - alpha``; 0 when ``p* <= 1/2``.
    """
    r = check_int(guesses, name="guesses", minimum=1)
    w = check_int(correct, name="correct", minimum=0)
    if w > r:
        raise ValueError(BAD_COUNTS.format(successes=correct, trials=guesses))
    p = float(cp_lower(w, r, _alpha(alpha)))
    return 0.0 if p <= 0.5 else math.log(p / (1.0 - p))


def composed_pure_epsilon(pairs: Sequence[tuple[Pair, int]]) -> float:
    """Pure epsilon of releases with independent noise: ``sum count * max_loss``.

    Exact for pure pairs (the largest privacy losses add up under composition); ``inf`` when a
    pair has an outcome only one world produces (``approx`` with delta > 0, or ``exact``).
    """
    total = 0.0
    for pair, count in pairs:
        if pair.infinite_mass > 0.0:
            return math.inf
        total += int(count) * pair.max_loss
    return total


@dataclass(frozen=True)
class CanaryResult:
    """The outcome of a one-run canary audit."""

    canaries: int
    """Canaries in the run (m)."""
    guesses: int
    """Canaries guessed (r, the most confident), for the best of the guess counts tried."""
    correct: int
    """Right guesses among them."""
    epsilon: float
    """Lower bound on the per-canary epsilon (the best over the guess counts tried)."""
    confidence: float
    """Probability with which it holds (Bonferroni over the guess counts included)."""
    tried: tuple[tuple[int, int, float], ...] = field(default=())
    """(guesses, correct, bound) for every guess count tried."""


def canary_audit(
    scores: ArrayLike,
    truth: ArrayLike,
    *,
    alpha: float = 0.05,
    guess_counts: Sequence[int] | None = None,
) -> CanaryResult:
    """Guess the canaries' bits from their scores and bound epsilon from the right guesses.

    ``scores[j] > 0`` guesses bit 1 for canary j, ``< 0`` bit 0; ``|scores[j]|`` is the
    confidence. For each r in ``guess_counts`` (default: m, m/2, m/4, ... down to 1) the r most
    confident canaries are guessed; each r's bound (:func:`one_run_epsilon_lower_bound`) is
    computed at ``alpha / len(guess_counts)``, so the best of them still holds with probability
    ``1 - alpha``.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    t = as_binary(truth, n=s.size, name="truth", require_both=False)
    m = s.size
    if m < 1:
        raise ValueError("a canary audit needs at least one canary")
    counts = sorted({max(1, m >> k) for k in range(max(1, m.bit_length()))})
    if guess_counts is not None:
        counts = sorted({int(c) for c in guess_counts})
        if not counts or counts[0] < 1 or counts[-1] > m:
            raise ValueError(BAD_GUESSES.format(m=m, counts=list(guess_counts)))
    a = _alpha(alpha) / len(counts)
    order = np.argsort(-np.abs(s), kind="stable")
    right = ((s[order] > 0) == t[order]) & (s[order] != 0)
    cumulative = np.cumsum(right)
    tried = tuple(
        (r, int(cumulative[r - 1]), one_run_epsilon_lower_bound(int(cumulative[r - 1]), r, alpha=a))
        for r in counts
    )
    best = max(tried, key=lambda row: (row[2], row[0]))
    return CanaryResult(m, best[0], best[1], best[2], 1.0 - _alpha(alpha), tried)


def log_likelihood_ratio(
    values: ArrayLike, one: float, zero: float, *, family: NoiseFamily, scale: float
) -> NDArray[np.float64]:
    """``log p(v | one) - log p(v | zero)`` for noise of ``family`` and ``scale``: the canary
    score of the Bayes-optimal guess between two exact answers (positive: ``one``)."""
    v = np.asarray(values, dtype=np.float64)
    b = check_positive(scale, name="scale")
    if family == "laplace":
        return (np.abs(v - zero) - np.abs(v - one)) / b
    if family == "normal":
        return ((v - zero) ** 2 - (v - one) ** 2) / (2.0 * b * b)
    return np.log((b * b + (v - zero) ** 2) / (b * b + (v - one) ** 2))


# -- twins: the real release with a scaled noise -------------------------------------------------

_BASE_FACTOR: Final = {"attribute_conceal": 6.0, "smooth_laplace": 2.0}
_FAMILY: Final[dict[str, NoiseFamily]] = {
    "laplace": "laplace",
    "gaussian": "normal",
    "attribute_conceal": "cauchy",
    "smooth_laplace": "laplace",
}


@dataclass(frozen=True)
class _Calibration:
    """What one twin draws with: the grid and integer scale (safe data-independent paths), or
    the continuous scale (smooth and naive paths)."""

    scale: float
    gamma: float = 0.0
    t: int = 0
    sigma2: Fraction | None = None


@dataclass(frozen=True)
class Twin:
    r"""A release mechanism whose noise scale is multiplied by ``factor`` (1: the real one).

    ``draw(values, n1=, n0=, rng=)`` gives each exact value independent noise with exactly the
    law one answer has in a release of ``models`` models at ``epsilon`` (and ``delta``) for the
    whole release, through the same calibration and samplers as
    :func:`biasleak.mechanisms.release.release`, the scale multiplied by ``factor``:

    - ``laplace``, safe: :func:`~biasleak.mechanisms.samplers.safe_laplace` with the global l1
      sensitivity of the m answers times ``factor``, which multiplies the discrete Laplace scale
      by ``factor`` (up to the integer rounding of the scale in grid units, below 1e-5). The
      grid step and integer scale of that release are read from one call of ``safe_laplace`` on
      ``models`` values; the draws are the same exact discrete Laplace (or truncated discrete
      Laplace) added to the rounded values.
    - ``gaussian``, safe: the discrete Gaussian of :func:`~biasleak.mechanisms.samplers.
      safe_gaussian` with the l2 sensitivity times ``factor``; its grid and ``sigma^2`` are
      recomputed as that function computes them and checked against one call of it.
    - ``attribute_conceal`` and ``smooth_laplace``: :func:`~biasleak.mechanisms.calibrate.
      calibrate_smooth` itself, with ``factor`` times 6 (resp. 2), on a job of ``models``
      models whose values are the given array (the calibration reads the batch size from the
      job, never from the number of values).
    - ``naive``: the float noise of :func:`~biasleak.mechanisms.naive_noise.add_noise` at
      ``factor`` times the calibrated scale.

    Per-answer independence is what makes this a faithful many-draw release: every mechanism
    here draws each answer's noise independently, with one scale for the batch.
    """

    mechanism: str
    epsilon: float
    """Epsilon of the whole release (half of it calibrates ``truncate``, as in ``release``)."""
    delta: float = 0.0
    models: int = 1
    """Models released together (the per-answer law depends on it)."""
    metric: str = "sp"
    bounding: str = "raw"
    sampler: str = "safe"
    factor: float = 1.0

    def __post_init__(self) -> None:
        mech = check_choice(self.mechanism, tuple(sorted(NOISY)), name="mechanism")
        eps = check_epsilon(self.epsilon)
        if math.isinf(eps):
            raise ValueError(
                TWIN_EXACT.format(noisy=sorted(NOISY), mechanism=mech, epsilon=self.epsilon)
            )
        info = MECHANISM_INFO[mech]
        if info.needs_delta:
            check_delta(self.delta)
        else:
            object.__setattr__(self, "delta", 0.0)
        check_int(self.models, name="models", minimum=1)
        check_choice(self.metric, SENSITIVITY_METRICS, name="metric")
        check_choice(self.bounding, BOUNDINGS, name="bounding")
        check_choice(self.sampler, SAMPLERS, name="sampler")
        f = self.factor
        if isinstance(f, bool) or not isinstance(f, int | float) or not (0 < f < math.inf):
            raise ValueError(BAD_FACTOR.format(factor=f))
        if self.bounding == "truncate":
            allowed = "both" if self.sampler == "safe" else ("both", "naive")
            if info.truncate not in allowed:
                ok = [k for k, v in MECHANISM_INFO.items() if v.noisy and v.truncate in allowed]
                raise ValueError(
                    TWIN_TRUNCATE.format(allowed=ok, sampler=self.sampler, mechanism=mech)
                )

    @property
    def family(self) -> NoiseFamily:
        """The noise law: ``laplace`` (discrete on the safe path), ``cauchy`` or ``normal``."""
        return _FAMILY[self.mechanism]

    @property
    def _calibration_epsilon(self) -> float:
        return self.epsilon / 2.0 if self.bounding == "truncate" else self.epsilon

    def _job(self, values: NDArray[np.float64], n1: int, n0: int, rng: np.random.Generator) -> Job:
        low, high = METRIC_RANGES[self.metric]
        return Job(
            values,
            self.metric,
            n1,
            n0,
            self.models,
            self._calibration_epsilon,
            self.delta,
            rng,
            self.bounding,
            low,
            high,
            self.sampler == "safe",
        )

    def scale(self, *, n1: int, n0: int) -> float:
        """The per-answer noise scale (Laplace b, Cauchy scale or sigma) at group sizes (n1, n0)
        of the metric's population."""
        return _calibrate(self, check_int(n1, name="n1"), check_int(n0, name="n0")).scale

    def draw(
        self, values: ArrayLike, *, n1: int, n0: int, rng: np.random.Generator
    ) -> NDArray[np.float64]:
        """Release every value of ``values`` (any shape) with independent noise of this twin."""
        if not isinstance(rng, np.random.Generator):
            raise ValueError(
                f"rng must be a numpy.random.Generator (seeded); received {type(rng).__name__}"
            )
        v = np.array(values, dtype=np.float64, ndmin=1)
        shape = np.shape(values)
        cal = _calibrate(self, check_int(n1, name="n1"), check_int(n0, name="n0"))
        low, high = METRIC_RANGES[self.metric]
        if self.sampler == "naive":
            out = add_noise(v, cal.scale, self.family, rng, self.bounding, low, high)
        elif self.mechanism in _BASE_FACTOR:
            job = self._job(v, n1, n0, rng)
            out = _smooth(self, job)[0]
        elif self.mechanism == "laplace":
            k = grid_ints(v, cal.gamma)
            if self.bounding == "truncate":
                lo_k, hi_k = math.ceil(low / cal.gamma), math.floor(high / cal.gamma)
                out_k = truncated_discrete_laplace(k, lo_k, hi_k, cal.t, 1, rng)
            else:
                out_k = k + discrete_laplace(cal.t, 1, k.shape, rng)
            out = out_k.astype(np.float64) * cal.gamma
        else:
            assert cal.sigma2 is not None
            k = grid_ints(v, cal.gamma)
            out = (k + discrete_gaussian(cal.sigma2, k.shape, rng)).astype(np.float64) * cal.gamma
        if self.bounding == "clamp":
            out = np.clip(out, low, high)
        return out.reshape(shape)


def _smooth(twin: Twin, job: Job) -> tuple[NDArray[np.float64], float, float, float]:
    factor = _BASE_FACTOR[twin.mechanism] * twin.factor
    if twin.mechanism == "attribute_conceal":
        beta = attribute_conceal_beta(job.epsilon, job.m)
        return calibrate_smooth(job, beta=beta, factor=factor, family="cauchy")
    beta = smooth_laplace_beta(job.epsilon, job.delta, job.m)
    return calibrate_smooth(job, beta=beta, factor=factor, family="laplace")


@lru_cache(maxsize=512)
def _calibrate(twin: Twin, n1: int, n0: int) -> _Calibration:
    """The twin's per-answer calibration at group sizes (n1, n0) (cached: it is deterministic).

    The calls below draw noise that is thrown away (the samplers calibrate and draw in one
    call), from a generator of their own so that the caller's stream is untouched.
    """
    scratch = np.random.Generator(np.random.PCG64(0))
    n, m = n1 + n0, twin.models
    eps = twin._calibration_epsilon
    low, high = METRIC_RANGES[twin.metric]
    float_error = 4.0 * m * n * 2.0**-53  # Job.float_error
    if twin.mechanism in _BASE_FACTOR or twin.sampler == "naive":
        job = twin._job(np.zeros(1), n1, n0, scratch)
        if twin.mechanism in _BASE_FACTOR:
            return _Calibration(_smooth(twin, job)[1])
        scale = MECHANISM_INFO[twin.mechanism].calibrate(job)[1]  # type: ignore[misc]
        return _Calibration(scale * twin.factor)
    if twin.mechanism == "laplace":
        sens = global_sensitivity(twin.metric, n=n, m=m) * twin.factor
        _, scale, gamma = safe_laplace(
            np.zeros(m),
            sensitivity=sens,
            float_error=float_error,
            epsilon=eps,
            rng=scratch,
            bounding="raw",
            low=low,
            high=high,
        )
        t = round(scale / gamma)
        if t * gamma != scale:  # pragma: no cover - the sampler's scale is t grid steps
            raise AssertionError(f"safe Laplace scale {scale!r} is not a multiple of {gamma!r}")
        return _Calibration(scale, gamma, int(t))
    # gaussian, safe: as safe_gaussian computes it, checked against one call of it
    l2 = global_sensitivity(twin.metric, n=n, m=m, norm="l2") * twin.factor
    fe = float_error / math.sqrt(m)
    public_sigma = analytic_gaussian_sigma(l2_sensitivity=l2, epsilon=eps, delta=twin.delta)
    gamma = choose_grid(public_sigma, max(l2 / math.sqrt(m), public_sigma * 2**-30))
    k2 = ((l2 + fe) / gamma + math.sqrt(m)) * (1.0 + 1e-12)
    units = discrete_gaussian_sigma(k2, eps, twin.delta)
    sigma2 = Fraction(math.ceil(Fraction(units) ** 2 * SIGMA2_DENOMINATOR), SIGMA2_DENOMINATOR)
    _, sigma, grid = safe_gaussian(
        np.zeros(m),
        l2_sensitivity=l2,
        float_error=fe,
        epsilon=eps,
        delta=twin.delta,
        rng=scratch,
        bounding="raw",
        low=low,
        high=high,
    )
    if grid != gamma or sigma != math.sqrt(sigma2) * gamma:
        raise AssertionError(  # pragma: no cover - safe_gaussian changed its calibration
            "the twin's discrete Gaussian calibration differs from safe_gaussian's; update "
            "biasleak.mechanisms.privacy_audit._calibrate"
        )
    return _Calibration(sigma, gamma, 0, sigma2)


# -- the worst neighbours of a batch of models -----------------------------------------------------


def _population(
    metric: str, protected: NDArray[np.bool_], labels: ArrayLike | None, n: int
) -> NDArray[np.bool_]:
    if metric in metrics.ON_POSITIVES:
        if labels is None:
            raise ValueError(metrics.LABELS_REQUIRED.format(metric=metric))
        return as_binary(labels, n=n, name="labels", require_both=False)
    return np.ones(n, dtype=np.bool_)


def flip_values(
    metric: str, models: ArrayLike, *, protected: ArrayLike, labels: ArrayLike | None = None
) -> NDArray[np.float64]:
    r"""Every model's metric after flipping each person, as an (m, n) array (closed form).

    With ``S1, S0`` the sums of a model's predictions over the two groups of the metric's
    population (everyone for SP, the people with y = 1 for EO) and ``N1, N0`` their sizes,
    moving person i out of group 1 gives ``(S1 - h_i)/(N1 - 1) - (S0 + h_i)/(N0 + 1)`` and out of
    group 0 ``(S1 + h_i)/(N1 + 1) - (S0 - h_i)/(N0 - 1)``; the absolute metrics take ``|.|``.
    People outside the population leave the metric unchanged. NaN where the flip would empty a
    group (no such neighbour exists).
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    h = np.atleast_2d(as_predictions(models))
    n = h.shape[1]
    a = as_binary(protected, n=n, name="protected")
    pop = _population(name, a, labels, n)
    one, zero = a & pop, ~a & pop
    n1, n0 = int(one.sum()), int(zero.sum())
    s1, s0 = h[:, one].sum(axis=1)[:, None], h[:, zero].sum(axis=1)[:, None]
    before = s1 / max(n1, 1) - s0 / max(n0, 1)
    after = np.repeat(before, n, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if n1 >= 2:
            after[:, one] = (s1 - h[:, one]) / (n1 - 1) - (s0 + h[:, one]) / (n0 + 1)
        else:
            after[:, one] = np.nan
        if n0 >= 2:
            after[:, zero] = (s1 + h[:, zero]) / (n1 + 1) - (s0 - h[:, zero]) / (n0 - 1)
        else:
            after[:, zero] = np.nan
    if n1 == 0 or n0 == 0:
        after[:] = np.nan
    return np.abs(after) if name.startswith("abs_") else after


@dataclass(frozen=True)
class Neighbour:
    """A neighbouring audit set that moves one model's answer, with both exact answers."""

    kind: Literal["flip", "swap"]
    model: int
    """Index of the model in the batch searched."""
    persons: tuple[int, ...]
    """The person flipped, or the two people (group 1, group 0) swapped."""
    protected: NDArray[np.bool_] = field(repr=False)
    """The neighbour's protected attribute."""
    before: float
    """The model's exact answer on the audit set (``metrics.evaluate``)."""
    after: float
    """Its exact answer on the neighbour."""

    @property
    def shift(self) -> float:
        """``|after - before|``."""
        return abs(self.after - self.before)


def _exact(
    metric: str, model: NDArray[np.float64], protected: NDArray[np.bool_], labels: ArrayLike | None
) -> float:
    return float(metrics.evaluate(metric, model, protected=protected, labels=labels))


def worst_flip(
    metric: str, models: ArrayLike, *, protected: ArrayLike, labels: ArrayLike | None = None
) -> Neighbour:
    """The (model, person) whose flip moves the answer the most, over every model and person.

    The search uses :func:`flip_values` in chunks of :data:`CHUNK_CELLS`; the two exact answers
    returned are computed by :func:`biasleak.mechanisms.metrics.evaluate` on both audit sets.
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    h = np.atleast_2d(as_predictions(models))
    a = as_binary(protected, n=h.shape[1], name="protected")
    rows = max(1, CHUNK_CELLS // h.shape[1])
    best, where = -1.0, (0, 0)
    for start in range(0, h.shape[0], rows):
        chunk = h[start : start + rows]
        after = flip_values(name, chunk, protected=a, labels=labels)
        before = np.atleast_1d(metrics.evaluate(name, chunk, protected=a, labels=labels))
        moved = np.nan_to_num(np.abs(after - np.asarray(before)[:, None]), nan=-1.0)
        k = int(np.argmax(moved))
        if moved.flat[k] > best:
            best, where = float(moved.flat[k]), (start + k // h.shape[1], k % h.shape[1])
    if best <= 0.0:
        raise ValueError(NO_NEIGHBOUR.format(kind="flip", metric=name))
    model, person = where
    flipped = a.copy()
    flipped[person] = ~flipped[person]
    return Neighbour(
        "flip",
        model,
        (person,),
        flipped,
        _exact(name, h[model], a, labels),
        _exact(name, h[model], flipped, labels),
    )


def worst_swap(
    metric: str, models: ArrayLike, *, protected: ArrayLike, labels: ArrayLike | None = None
) -> Neighbour:
    r"""The (model, pair) whose swap moves the answer the most, among each model's extreme pairs.

    Exchanging the attributes of i (group 1) and j (group 0) of the metric's population moves SP
    by ``-(1/N1 + 1/N0)(h_i - h_j)``, so for SP and EO the largest move is at the pair of the
    largest ``|h_i - h_j|``: (the highest of group 1, the lowest of group 0) or the reverse; both
    are tried for every model. For ``|SP|`` and ``|EO|`` the same pairs are tried (a pair that
    brings the metric exactly to 0 can move it more and is not searched).
    """
    name = check_choice(metric, SENSITIVITY_METRICS, name="metric")
    h = np.atleast_2d(as_predictions(models))
    n = h.shape[1]
    a = as_binary(protected, n=n, name="protected")
    pop = _population(name, a, labels, n)
    one, zero = np.flatnonzero(a & pop), np.flatnonzero(~a & pop)
    if one.size == 0 or zero.size == 0:
        raise ValueError(NO_NEIGHBOUR.format(kind="swap", metric=name))
    c = 1.0 / one.size + 1.0 / zero.size
    rows = max(1, CHUNK_CELLS // n)
    best, where = -1.0, (0, 0, 0)
    for start in range(0, h.shape[0], rows):
        chunk = h[start : start + rows]
        before = np.atleast_1d(
            np.asarray(metrics.evaluate(name, chunk, protected=a, labels=labels))
        )
        h1, h0 = chunk[:, one], chunk[:, zero]
        pairs = (
            (one[h1.argmax(axis=1)], zero[h0.argmin(axis=1)]),
            (one[h1.argmin(axis=1)], zero[h0.argmax(axis=1)]),
        )
        index = np.arange(chunk.shape[0])
        signed = before if not name.startswith("abs_") else None
        for i, j in pairs:
            d = chunk[index, i] - chunk[index, j]
            if signed is not None:
                moved = np.abs(c * d)
            else:
                sp = metrics.evaluate(name.removeprefix("abs_"), chunk, protected=a, labels=labels)
                moved = np.abs(np.abs(np.atleast_1d(sp) - c * d) - before)
            k = int(np.argmax(moved))
            if moved[k] > best:
                best, where = float(moved[k]), (start + k, int(i[k]), int(j[k]))
    if best <= 0.0:
        raise ValueError(NO_NEIGHBOUR.format(kind="swap", metric=name))
    model, i, j = where
    swapped = a.copy()
    swapped[i], swapped[j] = False, True
    return Neighbour(
        "swap",
        model,
        (i, j),
        swapped,
        _exact(name, h[model], a, labels),
        _exact(name, h[model], swapped, labels),
    )
