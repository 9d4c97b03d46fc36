"""The leakage ceilings: pair profiles against direct integration, the dominations they rely on,
the composition against independent references, and the three levels on known cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import integrate, stats

from biasleak.mechanisms.ceiling import (
    AuditSizes,
    Pair,
    ReleaseSpec,
    balanced_accuracy_bound,
    balanced_accuracy_from_tv,
    ceilings,
    compose,
    compose_people,
    connect_the_dots,
    discrete_laplace_shift,
    laplace_units,
    privacy_loss,
    proxy_prior_ceiling,
    release_pairs,
)
from biasleak.mechanisms.ceiling._pairs import Discretized


def hockey_by_integration(pdf_p, pdf_q, gamma: float, lo: float, hi: float, points) -> float:
    """H_gamma(P || Q) = int (p - gamma q)_+ by quadrature, with the kinks as break points."""
    value, _ = integrate.quad(
        lambda y: max(0.0, pdf_p(y) - gamma * pdf_q(y)),
        lo,
        hi,
        points=points,
        limit=400,
        epsabs=1e-12,
    )
    return value


@pytest.mark.parametrize("s", [0.05, 0.7, 2.5])
@pytest.mark.parametrize("eps", [-1.0, -0.2, 0.0, 0.3, 1.0])
def test_laplace_profile_against_integration(s: float, eps: float) -> None:
    p = stats.laplace(0.0, 1.0).pdf
    q = stats.laplace(s, 1.0).pdf
    # the mass outside [-60, 60] is below e^-59: negligible
    truth = hockey_by_integration(p, q, math.exp(eps), -60.0, 60.0, [0.0, s])
    assert float(Pair("laplace", s).profile([eps])[0]) == pytest.approx(truth, abs=1e-9)


@pytest.mark.parametrize("s", [0.01, 0.4, 3.0])
@pytest.mark.parametrize("eps", [-0.5, -0.01, 0.0, 0.005, 0.2, 1.0])
def test_cauchy_profile_against_integration(s: float, eps: float) -> None:
    # in u = arctan(y): dP = du/pi on (-pi/2, pi/2), and dQ/dP = (1 + y^2)/(1 + (y - s)^2)
    def integrand(u: float) -> float:
        y = math.tan(u)
        ratio = (1.0 + y * y) / (1.0 + (y - s) ** 2)
        return max(0.0, 1.0 - math.exp(eps) * ratio) / math.pi

    # the integrand has kinks where the ratio crosses e^-eps: many break points keep quad exact
    breaks = np.linspace(-math.pi / 2, math.pi / 2, 402)[1:-1]
    truth, _ = integrate.quad(
        integrand, -math.pi / 2, math.pi / 2, points=breaks, limit=2000, epsabs=1e-13
    )
    assert float(Pair("cauchy", s).profile([eps])[0]) == pytest.approx(truth, abs=1e-8)


def test_closed_form_total_variations() -> None:
    assert Pair("laplace", 0.8).total_variation() == pytest.approx(-math.expm1(-0.4))
    assert Pair("cauchy", 0.8).total_variation() == pytest.approx(2 * math.atan(0.4) / math.pi)
    assert Pair("pure", 1.3).total_variation() == pytest.approx(math.tanh(0.65))
    assert Pair("approx", 1.3, 0.01).total_variation() == pytest.approx(
        0.01 + 0.99 * math.tanh(0.65)
    )
    assert Pair("exact").total_variation() == 1.0
    assert Pair("laplace", 0.0).trivial and Pair("laplace", 0.0).total_variation() == 0.0
    with pytest.raises(ValueError, match="pair family"):
        Pair("gauss", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="laplace pair needs"):
        Pair("laplace", -1.0)


def test_shift_families_are_monotone() -> None:
    """A larger shift dominates a smaller one (why shifts may be rounded up)."""
    eps = np.linspace(-4.0, 4.0, 801)
    for family in ("laplace", "cauchy"):
        previous = Pair(family, 0.001).profile(eps)  # type: ignore[arg-type]
        for s in np.geomspace(0.002, 8.0, 40):
            now = Pair(family, float(s)).profile(eps)  # type: ignore[arg-type]
            assert np.all(now >= previous - 1e-12)
            previous = now


def discrete_laplace_profile(k: int, t: float, eps: np.ndarray) -> np.ndarray:
    """H_{e^eps} of discrete Laplace P(z) ∝ e^{-|z|/t} against its shift by k, summed directly."""
    z = np.arange(-int(60 * t) - k, int(60 * t) + k + 1)
    r = math.exp(-1.0 / t)
    p = (1 - r) / (1 + r) * np.exp(-np.abs(z) / t)
    q = (1 - r) / (1 + r) * np.exp(-np.abs(z - k) / t)
    return np.array([np.maximum(0.0, p - math.exp(e) * q).sum() for e in eps])


@pytest.mark.parametrize(("k", "t"), [(1, 2.0), (3, 2.5), (5, 7.0), (8, 4.0), (13, 40.0)])
def test_discrete_laplace_is_dominated_by_the_corrected_shift(k: int, t: float) -> None:
    eps = np.linspace(-1.2 * k / t, 1.2 * k / t, 241)
    discrete = discrete_laplace_profile(k, t, eps)
    bound = Pair("laplace", discrete_laplace_shift(k, t)).profile(eps)
    assert np.all(discrete <= bound + 1e-12)
    if k % 2 == 1:  # without the correction the continuous pair does not dominate (odd k)
        plain = Pair("laplace", k / t).profile(eps)
        assert np.any(discrete > plain + 1e-9)


@pytest.mark.parametrize(
    "pair",
    [Pair("laplace", 0.3), Pair("cauchy", 0.5), Pair("pure", 0.7), Pair("approx", 0.4, 0.02)],
)
@pytest.mark.parametrize("step", [0.01, 0.07, 0.5])
def test_connect_the_dots_dominates_and_touches(pair: Pair, step: float) -> None:
    law = connect_the_dots(pair, step)
    assert law.masses.min() >= 0.0
    assert law.masses.sum() + law.infinite == pytest.approx(1.0, abs=1e-12)
    loss = (law.offset + np.arange(law.masses.size)) * step
    # a valid pair: E_P[e^-L] over the finite part is Q's mass there, at most 1
    assert (law.masses * np.exp(-loss)).sum() <= 1.0 + 1e-12
    eps = np.linspace(-pair.max_loss - 0.3, pair.max_loss + 0.3, 997)
    discretised = _profile(law, step, eps)
    assert np.all(discretised >= pair.profile(eps) - 1e-12)
    # equal at the grid points
    assert _profile(law, step, loss) == pytest.approx(pair.profile(loss), abs=1e-9)


def _profile(law: Discretized, step: float, eps: np.ndarray) -> np.ndarray:
    loss = (law.offset + np.arange(law.masses.size)) * step
    weight = np.maximum(0.0, -np.expm1(eps[:, None] - loss[None, :]))
    return law.infinite + weight @ law.masses


def laplace_tv_two(s: float) -> float:
    """TV of two-fold products Lap(0)^2 vs Lap(s)^2, conditioning on the first coordinate."""
    one = Pair("laplace", s)

    def h(e: float) -> float:
        return float(one.profile([e])[0])

    left = 0.5 * h(-s)
    right = 0.5 * math.exp(-s) * h(s)
    middle, _ = integrate.quad(lambda y: 0.5 * math.exp(-y) * h(2 * y - s), 0.0, s, epsabs=1e-13)
    return left + right + middle


@pytest.mark.parametrize("s", [0.05, 0.6])
def test_composition_is_an_upper_bound_and_tight(s: float) -> None:
    one, two = -math.expm1(-s / 2), laplace_tv_two(s)
    assert compose([(Pair("laplace", s), 1)]).total_variation == pytest.approx(one, abs=1e-7)
    tv2 = compose([(Pair("laplace", s), 2)]).total_variation
    assert two - 1e-12 <= tv2 <= two + 1e-6


@pytest.mark.parametrize(("s", "k"), [(0.01, 400), (0.1, 100), (0.002, 5000), (1.0, 10)])
def test_laplace_composition_matches_the_reference_accountant(s: float, k: int) -> None:
    law = compose([(Pair("laplace", s), k)])
    ref = pld_lib.from_laplace_mechanism(
        1.0, sensitivity=s, value_discretization_interval=min(1e-4, s / 20)
    ).self_compose(k)
    for eps in (0.0, 0.5, 1.0):
        mine = float(law.hockey_stick([eps])[0])
        theirs = float(ref.get_delta_for_epsilon(eps))  # a pessimistic bound too
        assert mine == pytest.approx(theirs, rel=1e-3, abs=1e-7)


def test_generic_pure_composition_matches_the_reference_accountant() -> None:
    law = compose([(Pair("pure", 0.05), 151)])
    ref = pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(0.05, 0.0)
    ).self_compose(151)
    assert law.total_variation == pytest.approx(ref.get_delta_for_epsilon(0.0), abs=1e-6)
    assert law.epsilon_for_delta(1e-6) == pytest.approx(ref.get_epsilon_for_delta(1e-6), rel=1e-3)


def test_people_are_composed_like_one_person_each() -> None:
    pairs = [Pair("laplace", 0.01), Pair("laplace", 0.03), Pair("cauchy", 0.05), Pair("pure", 0.02)]
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 60, size=(40, 4))
    counts[5] = 0  # nobody released anything about person 5
    together = compose_people(pairs, counts).total_variation
    assert together[5] == 0.0
    for i in (0, 7, 21, 39):
        alone = compose(list(zip(pairs, counts[i].tolist(), strict=True))).total_variation
        # many people share coarser grids: looser by at most ~1% of the advantage, never wrong
        assert alone <= together[i] <= alone * 1.01 + 1e-9
    exact = compose_people([Pair("exact"), *pairs], np.c_[np.eye(40, 1, dtype=int), counts])
    assert exact.total_variation[0] == 1.0 and exact.total_variation[1] < 1.0


def test_balanced_accuracy_formulas() -> None:
    assert balanced_accuracy_bound(math.log(3.0)) == pytest.approx(0.75)
    assert balanced_accuracy_bound(math.log(3.0), 0.2) == pytest.approx(3.2 / 4.0)
    assert balanced_accuracy_bound(math.inf) == 1.0
    assert balanced_accuracy_bound(800.0) == pytest.approx(1.0)
    assert balanced_accuracy_from_tv(0.3) == pytest.approx(0.65)
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        balanced_accuracy_bound(-1.0)
    with pytest.raises(ValueError, match="total variation"):
        balanced_accuracy_from_tv(1.5)


def test_a_batch_is_composed_model_by_model() -> None:
    """m models at eps/m each with independent noise are m pairs, not one generic eps release."""
    batch = ReleaseSpec("laplace", 5.0, models=50, population=1000)
    singles = [ReleaseSpec("laplace", 0.1, models=1, population=1000)] * 50
    sizes = AuditSizes(885, 115)
    a, b = ceilings([batch], sizes), ceilings(singles, sizes)
    assert a.policy.person == pytest.approx(b.policy.person, abs=1e-6)
    assert a.audit_set.balanced_accuracy == pytest.approx(b.audit_set.balanced_accuracy, abs=1e-6)
    # far below what the batch as one pure 5-DP release would allow
    assert a.policy.person < balanced_accuracy_bound(5.0) - 0.3
    flip, swap = release_pairs(batch, "policy")
    assert flip == [(flip[0][0], 50)] and flip[0][0].family == "laplace"
    assert flip[0][0].parameter == pytest.approx(0.1, rel=1e-6)
    assert swap[0][0].parameter == pytest.approx(0.1 * (1 + 1 / 999) / (0.5 + 1 / 999), rel=1e-5)


def test_the_issues_figures() -> None:
    """Quickstart mallory (Attribute-Conceal 0.05 per model: a probe and three batches of 50)
    and the policy grid's Laplace 0.1 per model over 400 models, as composed model by model."""
    mallory = [ReleaseSpec("attribute_conceal", 0.05, population=1000)] + [
        ReleaseSpec("attribute_conceal", 2.5, models=50, population=1000)
    ] * 3
    assert privacy_loss(mallory)["epsilon"] == pytest.approx(2.80, abs=0.01)
    assert 100 * ceilings(mallory).policy.person == pytest.approx(62.1, abs=0.1)
    grid = [ReleaseSpec("laplace", 5.0, models=50, population=1000)] * 8
    assert privacy_loss(grid)["epsilon"] == pytest.approx(10.7, abs=0.05)
    c = ceilings(grid, AuditSizes(885, 115))
    assert 100 * c.policy.person == pytest.approx(83.7, abs=0.2)
    assert 100 * c.audit_set.balanced_accuracy < 51.0  # safe for this audit set


def test_levels_shrink_from_policy_to_audit_set() -> None:
    sizes = AuditSizes(885, 115, 200, 40)
    for mech in ("laplace", "attribute_conceal"):
        for metric, pop in (("sp", 1000), ("abs_sp", 1000), ("eo", 240), ("abs_eo", 240)):
            specs = [ReleaseSpec(mech, 1.0, models=4, metric=metric, population=pop)] * 3
            c = ceilings(specs, sizes)
            assert c.audit_set.balanced_accuracy <= c.policy.balanced_accuracy
            assert c.audit_set.person <= c.policy.person
            assert 0.5 <= c.audit_set.balanced_accuracy <= 1.0


def test_attribute_conceal_swaps_keep_the_scale() -> None:
    """A swap keeps the sizes, hence Attribute-Conceal's scale: a plain Cauchy shift, while the
    flip is the eps-DP guarantee (the scale moves with the sizes)."""
    spec = ReleaseSpec("attribute_conceal", 1.0, population=10)
    flip, swap = release_pairs(spec, "audit_set", AuditSizes(8, 2))
    assert flip[0][0] == Pair("pure", 1.0)
    assert swap[0][0].family == "cauchy"
    # shift (1/8 + 1/2) against the scale 6 S_beta / eps at N0 = 2, n = 10
    assert swap[0][0].parameter == pytest.approx((1 / 8 + 1 / 2) / (6 * (0.5 + 1 / 9)), rel=1e-6)


def test_exact_releases_and_services() -> None:
    assert ceilings([ReleaseSpec("exact", math.inf)]).policy.balanced_accuracy == 1.0
    naive = ceilings([ReleaseSpec("laplace", math.inf, population=100)])
    assert naive.policy.person == 1.0
    service = ceilings([ReleaseSpec("service", 1.0)])
    assert service.policy.person == pytest.approx(balanced_accuracy_bound(1.0), abs=1e-6)
    # a swap is two flips for a release known only to be eps-DP: group privacy
    assert service.policy.balanced_accuracy == pytest.approx(balanced_accuracy_bound(2.0), abs=1e-6)
    assert privacy_loss([]) == {"epsilon": 0.0, "delta": 0.0, "pure_epsilon": 0.0}
    with pytest.raises(ValueError, match="a release needs a mechanism"):
        release_pairs(ReleaseSpec("laplace", -1.0, population=10), "policy")
    with pytest.raises(ValueError, match="number of people"):
        release_pairs(ReleaseSpec("laplace", 1.0), "audit_set", AuditSizes(5, 5))
    with pytest.raises(ValueError, match="add up to the population"):
        release_pairs(ReleaseSpec("laplace", 1.0, population=12), "audit_set", AuditSizes(5, 5))
    # without the number of people the policy level still holds: n-free pairs (a swap < 2 flips)
    unknown = release_pairs(ReleaseSpec("laplace", 1.0, models=2), "policy")
    assert unknown == (
        [(Pair("laplace", 0.5 * (1 + 1e-9) + 1e-12), 2)],
        [(Pair("laplace", 2 * (0.5 * (1 + 1e-9) + 1e-12)), 2)],
    )
    known = release_pairs(ReleaseSpec("laplace", 1.0, models=2, population=3), "policy")
    assert known[1][0][0].parameter <= unknown[1][0][0].parameter  # 2n/(n + 1) < 2


def test_laplace_units_follow_the_sampler() -> None:
    """The grid step is the sampler's for any batch at one per-model epsilon, and the scale is a
    lower bound on the sampler's (so the shifts measured against it are upper bounds)."""
    from biasleak.mechanisms.samplers import safe_laplace

    gamma, t = laplace_units("sp", 1000, 0.05)
    for m in (1, 3, 50):
        _, scale, grid = safe_laplace(
            np.zeros(m),
            sensitivity=m * (0.5 + 1 / 999),
            float_error=4 * m * 1000 * 2.0**-53,
            epsilon=0.05 * m,
            rng=np.random.default_rng(0),
            bounding="raw",
            low=-1.0,
            high=1.0,
        )
        assert grid == gamma
        assert t * gamma <= scale <= t * gamma * (1 + 1e-6)  # the rounding of K and t only


def test_proxy_prior_ceiling() -> None:
    law = compose([(Pair("laplace", 0.5), 4)])
    flat = np.full(40, 0.5)
    assert proxy_prior_ceiling(law, flat) == pytest.approx(
        100 * balanced_accuracy_from_tv(law.total_variation), abs=1e-9
    )
    sure = np.array([0.99, 0.98, 0.01, 0.02])
    nothing = compose([])
    prior_alone = 50 * np.maximum(sure / sure.sum(), (1 - sure) / (1 - sure).sum()).sum()
    assert proxy_prior_ceiling(nothing, sure) == pytest.approx(prior_alone)
    assert proxy_prior_ceiling(law, sure) >= prior_alone
    with pytest.raises(ValueError, match="prior probabilities"):
        proxy_prior_ceiling(law, np.array([1.5]))


def _tail_counts(pairs: list[Pair], row: np.ndarray, family: str) -> np.ndarray:
    """Releases of ``family`` at each of its parameters or more (largest parameter first)."""
    cols = sorted(
        (k for k, p in enumerate(pairs) if p.family == family), key=lambda k: -pairs[k].parameter
    )
    return np.cumsum(row[cols])


def test_envelopes_dominate_every_member_and_keep_alike_people_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from biasleak.mechanisms.ceiling import _engine

    pairs = [
        Pair("laplace", 0.002),
        Pair("laplace", 0.004),
        Pair("laplace", 0.03),
        Pair("cauchy", 0.01),
        Pair("cauchy", 0.05),
        Pair("pure", 0.02),
        Pair("approx", 0.1, 1e-6),
        Pair("approx", 0.2, 1e-7),
    ]
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 40, size=(300, len(pairs)))
    monkeypatch.setattr(_engine, "MAX_DISTINCT", 16)
    group, envelope, eps_env = _engine._envelopes(pairs, counts, None)
    assert eps_env is None and envelope.shape == (16, len(pairs)) and group.max() == 15
    for i in range(counts.shape[0]):
        env = envelope[group[i]]
        for family in ("laplace", "cauchy", "pure"):  # Hall's condition, largest parameter down
            assert np.all(
                _tail_counts(pairs, env, family) >= _tail_counts(pairs, counts[i], family)
            )
        assert np.all(env[6:] >= counts[i, 6:])  # approx pairs are not ordered: counted as they are
    # the composed envelope bounds each member's own composition
    loss = _engine.compose_people(pairs, counts)
    for i in (0, 17, 150, 299):
        alone = compose(list(zip(pairs, counts[i].tolist(), strict=True))).total_variation
        assert loss.total_variation[i] >= alone - 1e-9
    # a group holds people of alike spread: the envelope is close to its members
    monkeypatch.setattr(_engine, "MAX_DISTINCT", 100)
    alike = _engine.compose_people(pairs, counts).total_variation
    monkeypatch.setattr(_engine, "MAX_DISTINCT", 10**6)
    each = _engine.compose_people(pairs, counts).total_variation
    assert np.all(alike >= each - 1e-9)
    assert alike.mean() <= each.mean() * 1.25


def test_envelopes_bound_hockey_sticks_at_each_members_epsilon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from biasleak.mechanisms.ceiling import _engine

    pairs = [Pair("laplace", 0.01), Pair("laplace", 0.05), Pair("pure", 0.03)]
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 30, size=(200, 3))
    eps = rng.choice([0.0, 0.1, 0.4], size=(200, 1))
    monkeypatch.setattr(_engine, "MAX_DISTINCT", 12)
    grouped = _engine.compose_people(pairs, counts, epsilons=eps)
    monkeypatch.setattr(_engine, "MAX_DISTINCT", 10**6)
    each = _engine.compose_people(pairs, counts, epsilons=eps)
    assert grouped.hockey is not None and each.hockey is not None
    assert np.all(grouped.hockey >= each.hockey - 1e-9)
    assert np.all(grouped.total_variation >= each.total_variation - 1e-9)
    assert grouped.hockey.mean() < 1.5 * each.hockey.mean() + 1e-3
