r"""The leakage ceiling: what differential privacy proves no attacker can exceed.

Leakage is measured as the balanced accuracy of an attacker's guess of the protected attribute
(50% is a coin flip). Differential privacy bounds it from above, whatever the attacker does. Fix
one person i and the two neighbouring audit sets that differ only in i's attribute (the project's
neighbouring relation). Every answer the compliance team released is a randomised function of
the audit set, so the transcript T of all answers an attacker saw has one law P in the world
where ``a_i = 1`` and another law Q where ``a_i = 0``. Whatever rule turns T into a guess of
``a_i`` is a test between P and Q, and no test does better than the two laws allow:

* with a privacy-loss distribution (PLD) of the whole transcript, the hockey-stick divergence
  :math:`H_\gamma(P \| Q) = \sup_S P(S) - \gamma Q(S)` at :math:`\gamma = 1` is the total
  variation distance TV, and a test's true-positive rate minus its false-positive rate is at most
  TV, so its balanced accuracy is at most :math:`(1 + \mathrm{TV}) / 2`;
* with only an :math:`(\varepsilon, \delta)` pair, a test with
  :math:`\mathrm{TPR} \le e^\varepsilon \mathrm{FPR} + \delta` and
  :math:`1 - \mathrm{FPR} \le e^\varepsilon (1 - \mathrm{TPR}) + \delta` has
  :math:`\mathrm{TPR} - \mathrm{FPR} \le (e^\varepsilon - 1 + 2\delta) / (e^\varepsilon + 1)`,
  so balanced accuracy :math:`\le (e^\varepsilon + \delta) / (1 + e^\varepsilon)`
  (Kairouz, Oh and Viswanath 2015; for pure DP, :math:`\delta = 0`, the two bounds coincide).

That is the ``no_side_information`` ceiling: it bounds the attacker's success averaged over the
two worlds of each person, so it holds in expectation over the mechanism's noise; one run's
measured leakage scatters around its expectation (one noisy answer moves many guesses at once).

With side information the level is not bounded, only the change: an attacker whose calibrated
prior gives person i probability :math:`p_i` of being advantaged can be right about as often as
the prior allows before any answer. The ``proxy_prior`` ceiling (:func:`proxy_prior_ceiling`)
bounds the expected balanced accuracy when the attributes are drawn from those priors: person i
in group 1 weighs :math:`w_{1i} = p_i / \sum_j p_j`, in group 0
:math:`w_{0i} = (1 - p_i) / \sum_j (1 - p_j)`, and the best test earns
:math:`w_{0i} + w_{1i} H_{w_{0i}/w_{1i}}(P \| Q)`, so

.. math:: \text{ceiling} = 50 \sum_i \left(w_{0i} + w_{1i} H_{w_{0i}/w_{1i}}\right).

With :math:`p_i = 1/2` for everyone it is :math:`50 (1 + \mathrm{TV})`, the first ceiling; with
no answers (:math:`H_\gamma = (1 - \gamma)_+`) it is :math:`50 \sum_i \max(w_{0i}, w_{1i})`, what
the prior alone gives.

Accounting. Each answered query is one release; the releases compose, and Google's
``dp_accounting`` composes their PLDs tightly (pessimistic discretisation: its numbers are upper
bounds). Per release (:func:`release_pld`):

``laplace``
    One fresh model: the Laplace PLD with sensitivity/scale ratio ``epsilon`` (the noise scale is
    the global sensitivity over epsilon, and a smaller shift only lowers the divergence; clamping
    is post-processing). Several fresh models at once, or ``truncate`` bounding: the generic pure
    eps-DP PLD. The vector case could be tighter (a shift spread over coordinates is believed to
    be no worse than one along a single axis), but that is not proved here, so it is not used.
``attribute_conceal``
    Pure eps-DP with Cauchy noise and data-dependent scale; no tighter law known: generic PLD.
``smooth_laplace``
    Generic (eps, delta) PLD.
``gaussian``
    The Gaussian PLD with ``sigma / Delta_2 = analytic_gaussian_sigma(1, eps, delta)``: the noise
    scale is proportional to the public l2 sensitivity, and Gaussian noise is rotation invariant,
    so one person's change of at most ``Delta_2`` in l2 norm is a one-dimensional shift.
``exact``
    No guarantee: the ceiling is 100%.

Every bound assumes the release realises the mechanism's ideal distribution (or a post-processing
of it). A floating-point (``naive``) sampler does not, and its answers are counted as exact.
The ceiling reported is the smaller of the PLD bound and the basic-composition bound
:math:`(e^{\sum\varepsilon} + \sum\delta) / (1 + e^{\sum\varepsilon})`; both are valid.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Final

import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms.release import NOISY, PURE, analytic_gaussian_sigma

__all__ = [
    "DEFAULT_DELTA",
    "Composition",
    "ReleaseSpec",
    "balanced_accuracy_bound",
    "balanced_accuracy_from_tv",
    "compose",
    "proxy_prior_ceiling",
    "release_pld",
]

DEFAULT_DELTA: Final = 1e-6
"""The delta at which a composition's epsilon is reported."""

DISCRETIZATION: Final = 1e-4
"""Privacy-loss grid of the PLDs (``dp_accounting``'s default; rounding is pessimistic)."""

LOG_RATIO_STEP: Final = 0.05
"""Grid on which :func:`proxy_prior_ceiling` rounds the log prior ratios (downwards)."""

SATURATION: Final = 30.0
"""Per-release epsilon above which the ceiling is 100% to within 1e-13 (``1/(1 + e^-30)``):
such releases are counted as giving no guarantee, with their epsilon still summed for reports
(the privacy-loss library overflows on ``e^epsilon`` far below the epsilons users try)."""

TOTAL_SATURATION: Final = 200.0
"""Summed epsilon above which a composition is reported by basic composition alone: its ceiling
is 100% to within 1e-87 whatever the accountant, and the composed privacy-loss distribution of
such a total grows to hundreds of MiB (600 Laplace releases at epsilon 10: 0.6 GiB)."""

BAD_RELEASE = (
    "a release needs a mechanism in {allowed}, epsilon > 0, 0 <= delta < 1 and models >= 1; "
    "received mechanism={mechanism!r}, epsilon={epsilon!r}, delta={delta!r}, models={models!r}"
)
BAD_PRIOR = "prior probabilities must be a non-empty 1-d array in [0, 1]; received {detail}"


@dataclass(frozen=True, order=True)
class ReleaseSpec:
    """The public facts of one release that fix its privacy loss."""

    mechanism: str
    """Release mechanism (``exact`` for no noise)."""
    epsilon: float
    """Epsilon charged for the whole release (``inf`` for exact)."""
    delta: float = 0.0
    """Delta charged for the whole release."""
    models: int = 1
    """Fresh models released together (cached ones add nothing and are not counted)."""
    bounding: str = "raw"
    """Output bounding (``raw``, ``clamp`` or ``truncate``)."""

    @property
    def exact(self) -> bool:
        """Whether the release has no guarantee at all."""
        return self.mechanism not in NOISY or math.isinf(self.epsilon)


def balanced_accuracy_bound(epsilon: float, delta: float = 0.0) -> float:
    r"""Largest balanced accuracy of any test against an (eps, delta)-DP release, as a fraction.

    .. math:: \frac{e^\varepsilon + \delta}{1 + e^\varepsilon}

    (Kairouz, Oh and Viswanath 2015, the corner of the (eps, delta) test region); 1 for
    ``epsilon = inf``, capped at 1.
    """
    if epsilon < 0 or not 0 <= delta <= 1:
        raise ValueError(f"epsilon must be >= 0 and delta in [0, 1]; received {epsilon}, {delta}")
    if math.isinf(epsilon):
        return 1.0
    # (e^eps + delta) / (1 + e^eps) written with e^-eps so that large eps does not overflow
    return min(1.0, (1.0 + delta * math.exp(-epsilon)) / (1.0 + math.exp(-epsilon)))


def balanced_accuracy_from_tv(tv: float) -> float:
    """Largest balanced accuracy of a test between two laws at total variation ``tv``: (1+tv)/2."""
    if not 0.0 <= tv <= 1.0 + 1e-12:
        raise ValueError(f"total variation must be in [0, 1]; received {tv}")
    return min(1.0, (1.0 + tv) / 2.0)


@lru_cache(maxsize=256)
def release_pld(spec: ReleaseSpec) -> pld_lib.PrivacyLossDistribution | None:
    """The PLD of one release (``None`` when it has no guarantee); see the module docstring."""
    if spec.exact:
        return None
    if not (spec.epsilon > 0 and 0 <= spec.delta < 1 and spec.models >= 1):
        raise ValueError(
            BAD_RELEASE.format(
                allowed=sorted(NOISY),
                mechanism=spec.mechanism,
                epsilon=spec.epsilon,
                delta=spec.delta,
                models=spec.models,
            )
        )
    if spec.mechanism == "laplace" and spec.models == 1 and spec.bounding != "truncate":
        return pld_lib.from_laplace_mechanism(
            1.0, sensitivity=spec.epsilon, value_discretization_interval=DISCRETIZATION
        )
    if spec.mechanism == "gaussian" and spec.delta > 0:
        sigma = analytic_gaussian_sigma(l2_sensitivity=1.0, epsilon=spec.epsilon, delta=spec.delta)
        return pld_lib.from_gaussian_mechanism(
            sigma, sensitivity=1.0, value_discretization_interval=DISCRETIZATION
        )
    delta = 0.0 if spec.mechanism in PURE else spec.delta
    return pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(spec.epsilon, delta),
        value_discretization_interval=DISCRETIZATION,
    )


@dataclass(frozen=True)
class Composition:
    """The privacy loss that a set of releases composes to, for one person's attribute."""

    releases: int
    """Number of releases composed (exact ones included)."""
    exact: bool
    """Whether any release had no guarantee, or one so weak (epsilon above
    :data:`SATURATION`), or all together so much (above :data:`TOTAL_SATURATION`), that every
    bound is 100% (then every bound is trivial)."""
    basic_epsilon: float
    """Sum of the epsilons (basic composition; ``inf`` with an exact release)."""
    basic_delta: float
    """Sum of the deltas."""
    pld: pld_lib.PrivacyLossDistribution | None
    """The composed PLD (``None`` without releases or with an exact one)."""
    pure: bool = True
    """Whether every release was pure eps-DP (then basic composition's epsilon is exact)."""

    def hockey_stick(self, epsilons: ArrayLike) -> NDArray[np.float64]:
        r"""Upper bounds on :math:`H_{e^\varepsilon}` in both directions, for each epsilon.

        One scalar query per distinct epsilon (``dp_accounting``'s scalar path is vectorised
        over the PLD's support, its many-epsilon path is a Python loop over it).
        """
        eps = np.asarray(epsilons, dtype=np.float64)
        if self.exact:
            return np.ones_like(eps)
        if self.pld is None:  # nothing released: P = Q
            return np.maximum(0.0, -np.expm1(eps))
        unique, inverse = np.unique(eps, return_inverse=True)
        values = np.array([float(self.pld.get_delta_for_epsilon(float(e))) for e in unique])
        return np.clip(values[inverse], 0.0, 1.0).reshape(eps.shape)

    @cached_property
    def total_variation(self) -> float:
        """Total variation bound between the two worlds (hockey stick at epsilon 0)."""
        return float(self.hockey_stick(np.array([0.0]))[0])

    def balanced_accuracy(self) -> float:
        """The no-side-information ceiling as a fraction: the smaller valid bound."""
        if self.exact:
            return 1.0
        basic = balanced_accuracy_bound(self.basic_epsilon, min(self.basic_delta, 1.0))
        return min(basic, balanced_accuracy_from_tv(self.total_variation))

    def epsilon_for_delta(self, delta: float = DEFAULT_DELTA) -> float:
        """Smallest epsilon with an (epsilon, delta) guarantee for the composition."""
        if self.exact:
            return math.inf
        if self.pld is None:
            return 0.0
        # the library divides by a tail mass that can be ~1e-320 for a composition of large
        # epsilons: the quotient overflows to inf, which it reads correctly as "eps >= loss"
        with np.errstate(over="ignore", divide="ignore"):
            eps = float(self.pld.get_epsilon_for_delta(delta))
        return min(eps, self.basic_epsilon) if self.basic_delta <= delta else eps

    def privacy_loss(self, delta: float = DEFAULT_DELTA) -> dict[str, float | str]:
        """``{epsilon, delta}`` for reports, plus ``pure_epsilon`` when every release is pure.

        ``epsilon`` is the PLD's epsilon at ``delta`` (``inf`` with an exact release, 0 without
        releases, and then ``delta`` is 0); ``pure_epsilon`` is the sum of the epsilons, the
        exact pure-DP loss of pure releases (``None`` when some release has delta > 0).
        """
        if self.exact and math.isinf(self.basic_epsilon):
            return {"epsilon": "inf", "delta": 0.0, "pure_epsilon": "inf"}
        if self.exact:  # saturated: only basic composition is reported
            eps = self.basic_epsilon
            return {
                "epsilon": eps,
                "delta": min(self.basic_delta, 1.0),
                "pure_epsilon": eps if self.pure else None,  # type: ignore[dict-item]
            }
        if self.pld is None:
            return {"epsilon": 0.0, "delta": 0.0, "pure_epsilon": 0.0}
        out: dict[str, float | str] = {"epsilon": self.epsilon_for_delta(delta), "delta": delta}
        out["pure_epsilon"] = self.basic_epsilon if self.pure else None  # type: ignore[assignment]
        return out


@lru_cache(maxsize=32)  # a developer's and its organisation's releases are often the same
def _compose_groups(groups: tuple[tuple[ReleaseSpec, int], ...]) -> Composition:
    releases = sum(count for _, count in groups)
    if any(spec.exact for spec, _ in groups):
        return Composition(releases, True, math.inf, 0.0, None)
    basic_eps = sum(spec.epsilon * count for spec, count in groups)
    basic_delta = sum(
        (0.0 if spec.mechanism in PURE else spec.delta) * count for spec, count in groups
    )
    pure = all(spec.mechanism in PURE for spec, _ in groups)
    if basic_eps > TOTAL_SATURATION or any(spec.epsilon > SATURATION for spec, _ in groups):
        return Composition(releases, True, basic_eps, basic_delta, None, pure)
    total: pld_lib.PrivacyLossDistribution | None = None
    for spec, count in groups:
        base = release_pld(spec)
        assert base is not None
        part = base.self_compose(count) if count > 1 else base
        total = part if total is None else total.compose(part)
    return Composition(releases, False, basic_eps, basic_delta, total, pure)


def compose(releases: Iterable[ReleaseSpec]) -> Composition:
    """Compose releases; identical releases are grouped and self-composed, results are cached."""
    counts = Counter(releases)
    return _compose_groups(tuple(sorted(counts.items())))


def proxy_prior_ceiling(composition: Composition, prior: ArrayLike) -> float:
    r"""The ``proxy_prior`` ceiling in percent (see the module docstring).

    Parameters
    ----------
    composition : the privacy loss of the attacker's answers
    prior : (n,) the attacker's calibrated probability that each person is advantaged (a = 1)

    Returns
    -------
    float
        :math:`50 \sum_i (w_{0i} + w_{1i} H_{w_{0i}/w_{1i}})`, an upper bound on the expected
        balanced accuracy when the attributes are drawn from ``prior``.
    """
    p = np.asarray(prior, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(BAD_PRIOR.format(detail=f"shape {p.shape}"))
    s1, s0 = float(p.sum()), float((1.0 - p).sum())
    if s1 == 0.0 or s0 == 0.0:  # the prior is certain of one group: it is all there is to know
        return 100.0
    w1, w0 = p / s1, (1.0 - p) / s0
    both = (w1 > 0) & (w0 > 0)
    terms = np.maximum(w0, w1)  # persons the prior is sure about
    # H decreases in epsilon, so rounding log(w0/w1) down onto a grid keeps an upper bound and
    # bounds the number of distinct divergences to compute.
    log_ratio = np.log(w0[both]) - np.log(w1[both])
    if composition.pld is not None and not composition.exact:
        log_ratio = np.floor(log_ratio / LOG_RATIO_STEP) * LOG_RATIO_STEP
    h = composition.hockey_stick(log_ratio)
    terms[both] = w0[both] + w1[both] * h
    return float(min(100.0, 50.0 * terms.sum()))
