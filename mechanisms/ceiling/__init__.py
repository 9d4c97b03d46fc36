r"""Leakage ceilings: what no attacker can exceed, proved from the privacy loss of the answers.

Leakage is the balanced accuracy of an attacker's guess of the protected attribute,
``BA = (N_A/N1 + N_B/N0)/2`` (Hamman et al., Definition 1; 1/2 is a coin flip). A ceiling is an
upper bound on it that holds for every attacker: every decoder, adaptive queries included. This
module proves three kinds of statement and computes each at three levels.

What is bounded
---------------

Let ``M(a)`` be the law of everything the attacker saw (its transcript) when the attribute
vector is ``a``; X and Y are fixed and known to the attacker.

**Person** (the attacker differential privacy is about). Fix a person i and everyone else's
attribute; let ``a_i`` be 1 or 0 with probability 1/2. Any guess of ``a_i`` from the transcript
is right with probability at most ``(1 + TV)/2``, TV the total variation between the transcript
laws of the two audit sets that differ in ``a_i`` only (a *flip*). This is the accuracy of the
best test (Le Cam), and it is exact: some test reaches it.

**Balanced accuracy, known group sizes** (the attacker of the leakage figure: a one-person probe
tells every attacker the sizes). Let ``a`` be uniform among the attribute vectors with the audit
set's group sizes (within each label stratum when an equal-opportunity metric was answered, so
the sizes among y = 1 are known too). Then for every attacker

.. math:: \mathbb{E}[BA] = \frac1n \sum_i BA_i \le \frac{1 + TV_{swap}}{2},

where ``BA_i`` is the balanced accuracy of the attacker's guess of person i between the transcript
laws given ``a_i = 1`` and given ``a_i = 0``, and ``TV_swap`` is the largest total variation
between the transcripts of two audit sets that differ by a *swap* (persons i and j of opposite
groups exchange attributes; the sizes stay).

Proof. (i) Under the prior ``P(a_i = 1) = N1/n``, so
``E[BA] = (1/2) sum_i [P(a_i=1) P(g_i=1 | a_i=1)/N1 + P(a_i=0) P(g_i=0 | a_i=0)/N0]
= (1/n) sum_i BA_i``. (ii) ``BA_i <= (1 + TV(P_i1, P_i0))/2`` (Le Cam). (iii) Pair each vector with
``a_i = 0`` with the vectors obtained by swapping i with a uniformly chosen member j of group 1
(of i's label stratum): every vector with ``a_i = 1`` is reached by the same number of pairs, so
this coupling has uniform marginals, and by the joint convexity of total variation
``TV(P_i1, P_i0) <= E_pairs TV(M(a), M(a^{ij})) <= TV_swap``.

The bound with a flip in place of the swap is *not* a theorem when the sizes are known: a linear
program over every eps-DP mechanism beats ``e^eps/(1 + e^eps)`` at every n tried (81.6% against
73.1% at n = 3, N0 = 1, eps = 1, by about 0.2/n at larger n;
:mod:`~biasleak.mechanisms.ceiling.lp`), because two audit sets with the same sizes are a swap
apart, two flips. The swap bound holds at every n >= 3 (the project's smallest audit set: at
n = 2 the two audit sets with both groups non-empty have no neighbour at all): with only a flip
guarantee it is the group-privacy bound (two flips), which the linear program never beats; for
the noise mechanisms it is their own swap pair, which is often far smaller than a flip's
(Attribute-Conceal's noise scale depends on the sizes only, so under a swap it is a plain Cauchy
shift). An attacker that does not know the sizes is one of the attackers bounded; a prior that
draws the sizes too is a mixture over sizes, bounded by the largest bound over the sizes it can
draw (the policy level).

**Proxy prior** (an attacker with side information). When each attribute is drawn independently
with the attacker's calibrated probability ``p_i`` of being advantaged, and balanced accuracy is
read with the expected group sizes as denominators, person i in group 1 weighs
``w_1i = p_i / sum_j p_j`` and in group 0 ``w_0i = (1 - p_i)/sum_j (1 - p_j)``; the best test of
person i earns ``w_0i + w_1i H_{w_0i/w_1i}(P_i || Q_i)`` (the weighted Neyman-Pearson bound, with
``H_gamma`` the hockey-stick divergence of i's flip), so

.. math:: \text{ceiling} = 50 \sum_i \big(w_{0i} + w_{1i} H_{w_{0i}/w_{1i}}\big)\ \%.

**Side information: what the answers add.** The known-sizes ceiling takes the public data (X, Y)
to say nothing about A beyond the sizes (a uniform arrangement). On real data they say more
(Adult's features guess race at about 65% through a proxy model), and an attacker can exceed that
ceiling by what they reveal, even without meaning to (a decoder whose guesses follow the base
model's scores). What the answers add is bounded for any side information: in the
proxy-prior setting with ANY prior, person i's best test gains at most ``min(w_0i, w_1i) TV_i``
over guessing from the prior alone (because ``H_gamma <= (1 - gamma) + gamma TV`` for
``gamma <= 1``), and since ``sum_i (w_0i + w_1i) = 2`` the balanced accuracy gains at most

.. math:: 50 \max_i TV_i = \text{person ceiling} - 50 \ \text{points},

whatever the attacker knew. The verdicts state it beside the levels.

Every ceiling bounds an expectation over the mechanism's noise (and the prior): one run's
measured leakage scatters around its expectation, by a few points at a thousand people.

Three levels
------------

``policy``
    What the answering policy guarantees on any audit set of this size: each release's
    dominating pairs from its mechanism's guarantee (flips) and its largest swap shift over every
    group split (:mod:`~biasleak.mechanisms.ceiling._releases`).
``audit_set``
    What any attacker could learn from this many answers on THIS audit set: the same releases
    with the shifts one flip or swap can cause at the actual group sizes (local sensitivities),
    for the worst models an attacker could send. A fact about the data for the evaluator, never
    released to developers (the group sizes it uses are private).
``answers``
    What any attacker could learn from exactly these answers: each person's own shift in each
    answer, computed from the models that were answered (individual privacy accounting, Feldman
    and Zrnic 2021), composed per person (:func:`person_bounds`). The models are taken as the
    queries they were, fixed in advance; an attacker that chose them from earlier answers could
    have sent others on other noise draws, which the audit-set level covers. Its balanced
    accuracy goes through a fictitious reference world R that moves each answer by
    ``c (h_i - rho)`` (rho a reference prediction per model): a swap's shift
    ``c (h_i - h_j)`` is the sum of i's move to R and j's move back, so
    ``TV_ij <= F_i + F_j`` with ``F_i`` the total variation of i's move, and
    ``E[BA] <= 1/2 + (1/2n) sum_i (F_i + mean_{j != i} F_j)``; it is reported as the smaller of
    that and the audit-set bound. Also a fact for the evaluator only.

Each level is at least as tight as the one above: the shifts only shrink.

Composition and accounting
--------------------------

Every release becomes dominating pairs, one per model where the models carry independent noise
(a batch of m Laplace answers at eps/m each is m Laplace pairs, not one generic (eps)-DP release),
and the pairs of all of a developer's (or organisation's) releases compose: their
connect-the-dots laws are convolved on a grid, with every rounding on the side of the bound
(:mod:`~biasleak.mechanisms.ceiling._engine`). The reported privacy loss is the composed flip
law's epsilon at delta 1e-6 (the ``person`` guarantee).

Every bound assumes the release realises the mechanism's ideal law (or a post-processing of it):
the ``safe`` samplers do (:mod:`~biasleak.mechanisms.samplers`); a floating-point (``naive``)
sampler does not, and its answers are counted as exact.

Refusals. A refusal because of the rate limit, the budget, a suspension or a refuse rule depends
on the queries and on public state only, never on the attribute: it adds nothing. Two refusals
do depend on the attribute: an equal-opportunity metric that is undefined because one group has
nobody with y = 1, and a fair-learning service whose audit set has a (group, label) cell below
its bound. Each is a release of one exact bit; a developer that received one gets exact
(100%) ceilings. When no such refusal happens the bit is still released (by its absence); under
the known-sizes prior it is known already (the sizes per label fix it), and for the person
ceilings it is constant across a flip unless the audit set sits at the edge (a group with at most
one person with y = 1, or a cell within one person of the bound): the summary counts those audit
sets' person ceilings as exact. The policy level covers the audit sets away from that edge.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms.ceiling._engine import (
    NOTHING,
    Law,
    PeopleLoss,
    compose_law,
    compose_people,
)
from biasleak.mechanisms.ceiling._individual import PersonLedger, flip_shifts, reference_shifts
from biasleak.mechanisms.ceiling._pairs import (
    FAMILIES,
    SATURATION,
    Pair,
    connect_the_dots,
    discrete_laplace_shift,
)
from biasleak.mechanisms.ceiling._releases import (
    EO_FAMILY,
    AuditSizes,
    ReleaseSpec,
    float_error,
    laplace_units,
    release_pairs,
    smooth_scales,
    swap_shift,
)

__all__ = [
    "DEFAULT_DELTA",
    "EO_FAMILY",
    "FAMILIES",
    "SATURATION",
    "AuditSizes",
    "Ceilings",
    "Law",
    "LevelCeiling",
    "Pair",
    "PeopleLoss",
    "PersonLedger",
    "ReleaseSpec",
    "balanced_accuracy_bound",
    "balanced_accuracy_from_tv",
    "ceilings",
    "compose",
    "compose_people",
    "connect_the_dots",
    "discrete_laplace_shift",
    "flip_shifts",
    "float_error",
    "laplace_units",
    "level_pairs",
    "person_bounds",
    "privacy_loss",
    "proxy_prior_ceiling",
    "reference_shifts",
    "release_pairs",
    "smooth_scales",
    "swap_shift",
]

DEFAULT_DELTA: Final = 1e-6
"""The delta at which a composition's epsilon is reported."""

LOG_RATIO_STEP: Final = 0.05
"""Grid on which :func:`proxy_prior_ceiling` rounds the log prior ratios (downwards)."""

BAD_PRIOR = "prior probabilities must be a non-empty 1-d array in [0, 1]; received {detail}"


def balanced_accuracy_bound(epsilon: float, delta: float = 0.0) -> float:
    r"""Largest accuracy of a test between two (eps, delta)-indistinguishable laws, a fraction.

    .. math:: \frac{e^\varepsilon + \delta}{1 + e^\varepsilon}

    (Kairouz, Oh and Viswanath 2015, the corner of the (eps, delta) test region): the person
    ceiling of one (eps, delta)-DP release. For balanced accuracy with known group sizes use
    ``2 eps`` (a swap is two flips). 1 for ``epsilon = inf``, capped at 1.
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
def _compose_cached(groups: tuple[tuple[Pair, int], ...]) -> Law:
    if not groups:
        return NOTHING
    return compose_law([p for p, _ in groups], [k for _, k in groups])


def compose(pairs: Iterable[tuple[Pair, int]]) -> Law:
    """The composed law of ``(pair, count)`` releases (identical pairs grouped; cached)."""
    counts: Counter[Pair] = Counter()
    for pair, k in pairs:
        if k > 0 and not pair.trivial:
            counts[pair] += int(k)
    return _compose_cached(tuple(sorted(counts.items())))


def level_pairs(
    releases: Iterable[ReleaseSpec], level: str, sizes: AuditSizes | None = None
) -> tuple[list[tuple[Pair, int]], list[tuple[Pair, int]]]:
    """All the flip pairs and all the swap pairs of some releases at ``level``."""
    flips: list[tuple[Pair, int]] = []
    swaps: list[tuple[Pair, int]] = []
    for spec, count in Counter(releases).items():
        flip, swap = release_pairs(spec, level, sizes)  # type: ignore[arg-type]
        flips.extend((p, k * count) for p, k in flip)
        swaps.extend((p, k * count) for p, k in swap)
    return flips, swaps


@dataclass(frozen=True)
class LevelCeiling:
    """The two ceilings of one level, as fractions."""

    balanced_accuracy: float
    """Bound on the expected balanced accuracy of an attacker that knows the group sizes."""
    person: float
    """Bound on one person's accuracy against the attacker that knows everyone else."""
    flips: Law
    """The composed flip law (for the proxy-prior ceiling and the privacy loss)."""


@dataclass(frozen=True)
class Ceilings:
    """The policy-level and audit-set-level ceilings of some releases."""

    policy: LevelCeiling
    audit_set: LevelCeiling | None
    """None when the audit set's sizes were not given."""


def _level(releases: Sequence[ReleaseSpec], level: str, sizes: AuditSizes | None) -> LevelCeiling:
    flips, swaps = level_pairs(releases, level, sizes)
    flip_law, swap_law = compose(flips), compose(swaps)
    return LevelCeiling(
        balanced_accuracy_from_tv(swap_law.total_variation),
        balanced_accuracy_from_tv(flip_law.total_variation),
        flip_law,
    )


def ceilings(releases: Iterable[ReleaseSpec], sizes: AuditSizes | None = None) -> Ceilings:
    """The policy ceilings of some releases, and the audit-set ceilings when ``sizes`` is given.

    The audit-set level is never looser than the policy level (its shifts are never larger); the
    minimum is taken so that discretisation cannot make it so.
    """
    specs = list(releases)
    policy = _level(specs, "policy", None)
    if sizes is None:
        return Ceilings(policy, None)
    audit = _level(specs, "audit_set", sizes)
    audit = LevelCeiling(
        min(audit.balanced_accuracy, policy.balanced_accuracy),
        min(audit.person, policy.person),
        audit.flips,
    )
    return Ceilings(policy, audit)


def privacy_loss(
    releases: Iterable[ReleaseSpec], delta: float = DEFAULT_DELTA
) -> dict[str, float | str | None]:
    """``{epsilon, delta, pure_epsilon}`` of some releases, for reports (the flip guarantee).

    ``epsilon`` is the composed flip law's epsilon at ``delta`` (``inf`` with an exact release,
    0 without releases, and then ``delta`` is 0); ``pure_epsilon`` is the sum of the epsilons
    when every release is pure eps-DP (basic composition, exact for pure releases), else None.
    """
    specs = list(releases)
    if not specs:
        return {"epsilon": 0.0, "delta": 0.0, "pure_epsilon": 0.0}
    if any(s.exact for s in specs):
        return {"epsilon": "inf", "delta": 0.0, "pure_epsilon": "inf"}
    pure = all(s.delta == 0.0 or s.mechanism in ("laplace", "attribute_conceal") for s in specs)
    total = sum(s.epsilon for s in specs)
    law = _level(specs, "policy", None).flips
    eps = law.epsilon_for_delta(delta)
    if pure:
        eps = min(eps, total)
    return {"epsilon": eps, "delta": delta, "pure_epsilon": total if pure else None}


def proxy_prior_ceiling(law: Law, prior: ArrayLike) -> float:
    r"""The ``proxy_prior`` ceiling in percent, all people sharing one flip law (module docstring).

    Parameters
    ----------
    law : the composed flip law of the attacker's answers
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
    weights = _prior_weights(p)
    if weights is None:  # the prior is certain of one group: it is all there is to know
        return 100.0
    w1, w0, both = weights
    terms = np.maximum(w0, w1)  # persons the prior is sure about
    # H decreases in epsilon, so rounding log(w0/w1) down onto a grid keeps an upper bound and
    # bounds the number of distinct divergences to compute.
    log_ratio = np.log(w0[both]) - np.log(w1[both])
    if law is not NOTHING:  # without any release H is (1 - gamma)_+: no rounding needed
        log_ratio = np.floor(log_ratio / LOG_RATIO_STEP) * LOG_RATIO_STEP
    unique, inverse = np.unique(log_ratio, return_inverse=True)
    h = law.hockey_stick(unique)[inverse]
    terms[both] = w0[both] + w1[both] * h
    return float(min(100.0, 50.0 * terms.sum()))


def _prior_weights(
    p: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]] | None:
    s1, s0 = float(p.sum()), float((1.0 - p).sum())
    if s1 == 0.0 or s0 == 0.0:
        return None
    w1, w0 = p / s1, (1.0 - p) / s0
    return w1, w0, (w1 > 0) & (w0 > 0)


def person_bounds(
    pairs: Sequence[Pair],
    counts: ArrayLike,
    *,
    prior: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], float | None]:
    """Per-person total variation bounds, and the proxy-prior ceiling (%) when ``prior`` is given.

    ``counts[i, k]`` releases of ``pairs[k]`` reached person i (the answers level). The
    proxy-prior ceiling uses each person's own law: ``H_{w_0i/w_1i}`` of person i.
    """
    if prior is None:
        return compose_people(pairs, counts).total_variation, None
    p = np.asarray(prior, dtype=np.float64)
    c = np.asarray(counts)
    if p.ndim != 1 or p.size != c.shape[0] or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(BAD_PRIOR.format(detail=f"shape {p.shape} for {c.shape[0]} people"))
    weights = _prior_weights(p)
    if weights is None:
        return compose_people(pairs, c).total_variation, 100.0
    w1, w0, both = weights
    ratio = np.zeros(p.size)
    ratio[both] = np.floor((np.log(w0[both]) - np.log(w1[both])) / LOG_RATIO_STEP) * LOG_RATIO_STEP
    loss = compose_people(pairs, c, epsilons=ratio[:, None])
    assert loss.hockey is not None
    terms = np.maximum(w0, w1)
    terms[both] = w0[both] + w1[both] * loss.hockey[both, 0]
    return loss.total_variation, float(min(100.0, 50.0 * terms.sum()))
