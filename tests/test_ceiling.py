"""The leakage ceiling against closed forms and a direct computation of composed Laplace."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

from biasleak.mechanisms.ceiling import (
    Composition,
    ReleaseSpec,
    balanced_accuracy_bound,
    balanced_accuracy_from_tv,
    compose,
    proxy_prior_ceiling,
    release_pld,
)
from biasleak.mechanisms.release import analytic_gaussian_sigma

GRID = 1e-4  # the PLD's discretisation: pessimistic rounding moves it up by at most ~k * GRID


def laplace_hockey_stick(t: float, eps: float) -> float:
    r"""H_{e^t}(Lap(0, 1) || Lap(eps, 1)) in closed form.

    The log-likelihood ratio is eps for y <= 0, -eps for y >= eps and eps - 2y between, so the
    set where it exceeds t in [-eps, eps] is y < c = (eps - t)/2 and
    H = P(Y < c) - e^t Q(Y < c) = 1 - e^{-c}/2 - e^t e^{c - eps}/2 = 1 - e^{(t - eps)/2}.
    """
    if t >= eps:
        return 0.0
    if t <= -eps:
        return -math.expm1(t)
    return -math.expm1((t - eps) / 2.0)


def laplace_tv_two(eps: float) -> float:
    """Total variation between two-fold products Lap(0)^2 and Lap(eps)^2, by direct integration.

    Condition on the first coordinate: the second contributes H_{e^{-l(y1)}} of one Laplace, with
    l(y) = |y - eps| - |y| the first coordinate's privacy loss.
    """
    left = 0.5 * laplace_hockey_stick(-eps, eps)  # y1 <= 0: l = eps, mass 1/2
    right = 0.5 * math.exp(-eps) * laplace_hockey_stick(eps, eps)  # y1 >= eps: l = -eps
    middle, _ = integrate.quad(
        lambda y: 0.5 * math.exp(-y) * laplace_hockey_stick(2.0 * y - eps, eps),
        0.0,
        eps,
        epsabs=1e-13,
    )
    return left + right + middle


def test_balanced_accuracy_bound_closed_forms() -> None:
    assert balanced_accuracy_bound(0.0) == pytest.approx(0.5)
    assert balanced_accuracy_bound(math.log(3.0)) == pytest.approx(0.75)  # e^eps = 3: 3/4
    assert balanced_accuracy_bound(math.log(3.0), 0.2) == pytest.approx(3.2 / 4.0)
    assert balanced_accuracy_bound(0.0, 1.0) == 1.0
    assert balanced_accuracy_bound(math.inf) == 1.0
    assert balanced_accuracy_bound(800.0) == pytest.approx(1.0)  # no overflow
    # the (eps, delta) corner: TPR - FPR <= (e^eps - 1 + 2 delta) / (e^eps + 1)
    eps, delta = 1.3, 0.01
    gap = (math.exp(eps) - 1 + 2 * delta) / (math.exp(eps) + 1)
    assert balanced_accuracy_bound(eps, delta) == pytest.approx((1 + gap) / 2)
    assert balanced_accuracy_from_tv(0.0) == 0.5
    assert balanced_accuracy_from_tv(1.0) == 1.0
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        balanced_accuracy_bound(-1.0)
    with pytest.raises(ValueError, match="total variation"):
        balanced_accuracy_from_tv(1.5)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_tv_bound_matches_formula_at_pure_dp(eps: float) -> None:
    # The generic eps-DP PLD has TV = tanh(eps/2), so (1 + TV)/2 = e^eps / (1 + e^eps).
    c = compose([ReleaseSpec("attribute_conceal", eps)])
    assert c.total_variation == pytest.approx(math.tanh(eps / 2.0), abs=1e-9)
    assert balanced_accuracy_from_tv(c.total_variation) == pytest.approx(
        balanced_accuracy_bound(eps), abs=1e-9
    )
    assert c.balanced_accuracy() == pytest.approx(math.exp(eps) / (1 + math.exp(eps)), abs=1e-9)
    loss = c.privacy_loss()
    assert loss["delta"] == 1e-6 and loss["pure_epsilon"] == eps
    assert eps - 1e-4 <= loss["epsilon"] <= eps  # (eps, 0) holds, so (eps, 1e-6) does too


@pytest.mark.parametrize("eps", [0.2, 1.0])
def test_one_laplace_release_against_closed_form(eps: float) -> None:
    c = compose([ReleaseSpec("laplace", eps)])
    truth = -math.expm1(-eps / 2.0)  # TV of a Laplace shift of eps scales
    assert truth - 1e-12 <= c.total_variation <= truth + 2 * GRID
    # tighter than the generic pure-DP law (tanh(eps/2))
    assert c.balanced_accuracy() < balanced_accuracy_bound(eps)


@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_composed_laplace_between_truth_and_basic_composition(eps: float) -> None:
    truth_one = -math.expm1(-eps / 2.0)
    truth_two = laplace_tv_two(eps)
    assert truth_two > truth_one  # a second answer helps
    for k, truth in ((1, truth_one), (2, truth_two)):
        tv = compose([ReleaseSpec("laplace", eps)] * k).total_variation
        assert truth - 1e-9 <= tv <= truth + 4 * k * GRID
        assert tv < math.tanh(k * eps / 2.0)  # basic composition's TV bound
    for k in (5, 20, 100):
        c = compose([ReleaseSpec("laplace", eps)] * k)
        assert c.balanced_accuracy() < balanced_accuracy_bound(k * eps)
        assert c.epsilon_for_delta(1e-6) < k * eps


def test_gaussian_release_against_closed_form() -> None:
    eps, delta = 1.0, 1e-5
    ratio = analytic_gaussian_sigma(l2_sensitivity=1.0, epsilon=eps, delta=delta)
    c = compose([ReleaseSpec("gaussian", eps, delta, models=7)])
    truth = 2.0 * special.ndtr(1.0 / (2.0 * ratio)) - 1.0  # TV of N(0, s) vs N(1, s)
    assert truth - 1e-12 <= c.total_variation <= truth + 2 * GRID
    assert c.balanced_accuracy() < balanced_accuracy_bound(eps, delta)
    # the (eps, delta) it was calibrated to holds for the PLD too
    assert c.epsilon_for_delta(delta) <= eps + 1e-3


def test_exact_nothing_and_grouping() -> None:
    nothing = compose([])
    assert nothing.balanced_accuracy() == 0.5
    assert nothing.privacy_loss() == {"epsilon": 0.0, "delta": 0.0, "pure_epsilon": 0.0}
    exact = compose([ReleaseSpec("laplace", 0.1), ReleaseSpec("exact", math.inf)])
    assert exact.exact and exact.balanced_accuracy() == 1.0
    assert exact.privacy_loss()["epsilon"] == "inf"
    assert release_pld(ReleaseSpec("laplace", math.inf)) is None
    # order does not matter, and identical requests come from the cache
    a = compose([ReleaseSpec("laplace", 0.1), ReleaseSpec("smooth_laplace", 0.5, 1e-7)] * 3)
    b = compose([ReleaseSpec("smooth_laplace", 0.5, 1e-7), ReleaseSpec("laplace", 0.1)] * 3)
    assert a is b
    assert a.basic_epsilon == pytest.approx(1.8) and a.basic_delta == pytest.approx(3e-7)
    assert not a.pure and a.privacy_loss()["pure_epsilon"] is None
    # a batch of Laplace models, or truncation, falls back on the generic pure-DP law
    batch = compose([ReleaseSpec("laplace", 1.0, models=5)])
    assert batch.total_variation == pytest.approx(math.tanh(0.5), abs=1e-9)
    truncated = compose([ReleaseSpec("laplace", 1.0, bounding="truncate")])
    assert truncated.total_variation == pytest.approx(math.tanh(0.5), abs=1e-9)
    with pytest.raises(ValueError, match="a release needs a mechanism"):
        release_pld(ReleaseSpec("laplace", -1.0))


def test_proxy_prior_ceiling() -> None:
    c = compose([ReleaseSpec("laplace", 0.5)] * 4)
    flat = np.full(40, 0.5)
    assert proxy_prior_ceiling(c, flat) == pytest.approx(100 * c.balanced_accuracy(), abs=1e-9)
    # without answers: what the prior alone gives, 50 sum_i max(w0_i, w1_i)
    p = np.array([0.9, 0.8, 0.2, 0.1, 0.5, 0.0])
    w1, w0 = p / p.sum(), (1 - p) / (1 - p).sum()
    alone = 50.0 * np.maximum(w0, w1).sum()
    assert proxy_prior_ceiling(compose([]), p) == pytest.approx(alone)
    # answers can only add, more answers add more, and exact answers give everything away
    weak = proxy_prior_ceiling(compose([ReleaseSpec("laplace", 0.2)]), p)
    strong = proxy_prior_ceiling(c, p)
    assert alone <= weak < strong < 100.0
    assert proxy_prior_ceiling(compose([ReleaseSpec("exact", math.inf)]), p) == 100.0
    assert proxy_prior_ceiling(c, np.ones(3)) == 100.0  # a prior sure of everyone
    with pytest.raises(ValueError, match="prior probabilities"):
        proxy_prior_ceiling(c, np.array([0.5, 1.5]))


def test_composition_is_a_plain_record() -> None:
    c = Composition(0, False, 0.0, 0.0, None)
    assert c.hockey_stick(np.array([-1.0, 0.0, 1.0])) == pytest.approx(
        [1 - math.exp(-1.0), 0.0, 0.0]
    )


def test_a_composition_past_the_total_saturation_is_reported_by_basic_composition() -> None:
    """Past TOTAL_SATURATION the PLD is not built (it would take hundreds of MiB); the ceiling is
    100% either way, and the reported epsilon is the exact pure-DP sum."""
    from biasleak.mechanisms.ceiling import TOTAL_SATURATION

    spec = ReleaseSpec("laplace", 10.0, 0.0, 1, "raw")
    below = int(TOTAL_SATURATION // 10) - 1
    under = compose([spec] * below)
    assert not under.exact and under.pld is not None
    assert under.privacy_loss()["epsilon"] < 10.0 * below  # the PLD is tighter than the sum
    over = compose([spec] * (below + 3))
    assert over.exact and over.pld is None
    assert over.privacy_loss()["epsilon"] == 10.0 * (below + 3)
    assert over.balanced_accuracy() == 1.0
