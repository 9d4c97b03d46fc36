"""Floating-point-safe samplers: exact laws, grid outputs, under-noising, porosity, OpenDP.

Statistical tests use fixed seeds and state their false-alarm rate (the probability that a
correct sampler fails the check at a random seed); with the fixed seed the outcome is
deterministic. The OpenDP cross-check cannot be seeded, so its threshold is 1e-6.
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from biasleak.mechanisms import (
    discrete_noise,
    gaussian_sigma,
    grid,
    metrics,
    release,
    rounded_noise,
    sensitivity,
)

# --------------------------------------------------------------------------------------------
# shared test functions


def chi_square_pvalue(draws: NDArray[np.int64], pmf, half: int) -> float:
    """Goodness of fit on the bins -half..half with both tails pooled."""
    k = np.arange(-half, half + 1)
    expected_p = pmf(k)
    tail_p = (1.0 - float(np.sum(expected_p))) / 2.0
    counts = np.array(
        [np.sum(draws < -half)] + [np.sum(draws == j) for j in k] + [np.sum(draws > half)]
    )
    probs = np.concatenate([[tail_p], expected_p, [tail_p]])
    keep = probs * draws.size >= 5  # pool only bins with enough expected counts
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * draws.size
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def exact_pair(n1: int, n0: int) -> tuple[float, float]:
    """SP on S (sizes n1, n0) and on S' (the last person of group 0 moved to group 1)."""
    a = np.array([1] * n1 + [0] * n0)
    a2 = a.copy()
    a2[-1] = 1
    h = np.ones(n1 + n0)
    h[-1] = 0.0
    return (
        float(metrics.statistical_parity(h, protected=a)),
        float(metrics.statistical_parity(h, protected=a2)),
    )


# --------------------------------------------------------------------------------------------
# 1. Exact discrete laws (false alarm 1e-4 per chi-square test at a random seed)


@pytest.mark.parametrize(("t", "s"), [(1, 1), (3, 2), (10, 1), (7, 3)])
def test_discrete_laplace_matches_its_pmf(t: int, s: int) -> None:
    draws = discrete_noise.discrete_laplace(t, s, 100_000, np.random.default_rng(t * 10 + s))
    assert draws.dtype == np.int64
    scale = t / s
    p = chi_square_pvalue(draws, lambda k: discrete_noise.discrete_laplace_pmf(k, scale), 12 * t)
    assert p > 1e-4
    # power: the pmf of a scale 20 % smaller is rejected
    wrong = chi_square_pvalue(
        draws, lambda k: discrete_noise.discrete_laplace_pmf(k, 0.8 * scale), 12 * t
    )
    assert wrong < 1e-10


@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(9, 4), Fraction(25)])
def test_discrete_gaussian_matches_its_pmf(sigma2: Fraction) -> None:
    draws = discrete_noise.discrete_gaussian(sigma2, 60_000, np.random.default_rng(int(sigma2 * 4)))
    half = math.ceil(8 * math.sqrt(sigma2))
    p = chi_square_pvalue(
        draws, lambda k: discrete_noise.discrete_gaussian_pmf(k, float(sigma2)), half
    )
    assert p > 1e-4
    wrong = chi_square_pvalue(
        draws, lambda k: discrete_noise.discrete_gaussian_pmf(k, 0.7 * float(sigma2)), half
    )
    assert wrong < 1e-10


@pytest.mark.parametrize(
    ("num", "den"),
    [(1, 2), (5, 2), (0, 3), (7, 7), (5 * 2**70, 2**71), (3 * 10**30, 10**30 + 1)],
)
def test_bernoulli_exp_has_the_exact_mean(num: int, den: int) -> None:
    # int64 and exact big-integer paths; binomial test, false alarm 1e-4
    n = 100_000
    big = num >= 2**62 or den >= 2**62
    arr_n = np.full(n, num, dtype=object if big else np.int64)
    arr_d = np.full(n, den, dtype=object if big else np.int64)
    hits = int(np.sum(discrete_noise.bernoulli_exp(arr_n, arr_d, np.random.default_rng(num % 97))))
    p = math.exp(-num / den)
    if p == 1.0:
        assert hits == n
    else:
        assert stats.binomtest(hits, n, p).pvalue > 1e-4


def test_truncated_discrete_laplace_matches_the_conditioned_pmf() -> None:
    rng = np.random.default_rng(5)
    # wide range against the scale (Laplace proposal) and narrow (uniform proposal)
    for low, high, centre, t in ((-20, 20, 5, 3), (-3, 3, 2, 40), (0, 10, -7, 4)):
        draws = discrete_noise.truncated_discrete_laplace(
            np.full(40_000, centre), low, high, t, 1, rng
        )
        assert draws.min() >= low and draws.max() <= high
        support = np.arange(low, high + 1)
        weights = np.exp(-np.abs(support - np.clip(centre, low, high)) / t)
        probs = weights / weights.sum()
        counts = np.array([np.sum(draws == j) for j in support])
        assert stats.chisquare(counts, probs * draws.size).pvalue > 1e-4


def test_safe_smooth_sensitivity_is_beta_smooth_and_an_upper_bound() -> None:
    n, m, beta = 40, 3, 0.05
    values = []
    for g in range(1, n):

        def at(b: float, g: int = g) -> float:
            return sensitivity.smooth_sensitivity("sp", n1=g, n0=n - g, m=m, beta=b)

        safe = rounded_noise.safe_smooth_sensitivity(at, beta=beta, n=n, m=m)
        assert safe >= at(beta) * (1 + 1e-9)
        values.append(safe)
    v = np.array(values)
    assert np.all(v[1:] / v[:-1] <= math.exp(beta)) and np.all(v[:-1] / v[1:] <= math.exp(beta))


def test_discrete_gaussian_sigma_meets_the_exact_privacy_profile() -> None:
    # one integer query of sensitivity 3: the hockey-stick divergence of N_Z(0, s^2) and
    # N_Z(3, s^2), summed exactly over the integers, must not exceed delta
    k, eps, delta = 3.0, 1.0, 1e-5
    sigma = gaussian_sigma.discrete_gaussian_sigma(k, eps, delta)
    z = np.arange(-int(60 * sigma), int(60 * sigma) + 1)
    p = discrete_noise.discrete_gaussian_pmf(z, sigma**2)
    q = discrete_noise.discrete_gaussian_pmf(z - 3, sigma**2)
    assert float(np.sum(np.maximum(p - math.exp(eps) * q, 0.0))) <= delta
    # and is not absurdly loose: the analytic continuous sigma is within 25 %
    analytic = release.analytic_gaussian_sigma(l2_sensitivity=k, epsilon=eps, delta=delta)
    assert analytic <= sigma <= 1.25 * analytic


# --------------------------------------------------------------------------------------------
# 2. Grid outputs, seeds


CASES = [
    ("laplace", {}),
    ("attribute_conceal", {}),
    ("smooth_laplace", {"delta": 1e-4}),
    ("gaussian", {"delta": 1e-4}),
]


@pytest.mark.parametrize(("mech", "extra"), CASES)
@pytest.mark.parametrize("bounding", ["raw", "clamp"])
def test_safe_outputs_lie_on_the_public_grid_and_follow_the_seed(
    mech: str, extra: dict, bounding: str
) -> None:
    values = np.linspace(-0.9, 0.9, 50)
    kw = {"n1": 30, "n0": 20, "epsilon": 0.7, "bounding": bounding, **extra}
    rel = release.release(mech, values, rng=np.random.default_rng(3), **kw)
    assert rel.sampler == "safe" and rel.grid > 0
    assert math.frexp(rel.grid)[0] == 0.5  # a power of two
    k = rel.values / rel.grid
    np.testing.assert_array_equal(k, np.round(k))
    again = release.release(mech, values, rng=np.random.default_rng(3), **kw)
    np.testing.assert_array_equal(rel.values, again.values)
    other = release.release(mech, values, rng=np.random.default_rng(4), **kw)
    assert not np.array_equal(rel.values, other.values)
    # the grid is public: it does not depend on the split of n into N1 and N0
    moved = release.release(mech, values, rng=np.random.default_rng(3), **{**kw, "n1": 49, "n0": 1})
    assert moved.grid == rel.grid


def test_naive_sampler_is_the_historical_float_draw() -> None:
    v = np.array([0.1, -0.2, 0.3])
    rel = release.release(
        "laplace", v, n1=30, n0=20, epsilon=0.7, rng=np.random.default_rng(8), sampler="naive"
    )
    expected = v + np.random.default_rng(8).laplace(0.0, rel.noise_scale, size=3)
    np.testing.assert_array_equal(rel.values, expected)
    assert rel.sampler == "naive" and rel.grid == 0.0


def test_safe_truncate_refused_for_cauchy_and_exact_for_laplace() -> None:
    rng = np.random.default_rng(9)
    with pytest.raises(ValueError, match="sampler='safe' is exact only for 'laplace'"):
        release.release(
            "attribute_conceal", [0.1], n1=7, n0=3, epsilon=1.0, rng=rng, bounding="truncate"
        )
    out = release.release(
        "laplace", np.full(200, 0.95), n1=7, n0=3, epsilon=0.2, rng=rng, bounding="truncate"
    )
    assert np.all((out.values >= -1) & (out.values <= 1))
    np.testing.assert_array_equal(out.values / out.grid, np.round(out.values / out.grid))


def test_unknown_sampler_is_named() -> None:
    with pytest.raises(ValueError, match="sampler"):
        release.release(
            "laplace",
            [0.1],
            n1=7,
            n0=3,
            epsilon=1.0,
            rng=np.random.default_rng(0),
            sampler="exactish",
        )


# --------------------------------------------------------------------------------------------
# 3. Under-noising detection (mutation-checked)
#
# The median and the 0.9 quantile of |noise| over N = 4000 independent answers are compared
# with those of the calibrated law. Their sampling errors are below 5 % of the value
# (sqrt(p (1 - p) / N) / density), so a tolerance of 20 % is more than four standard errors:
# false alarm below 1e-4 per check. Noise of half the scale moves both by 50 % and fails.

N_DRAWS = 4000
QUANTILE_FACTORS = {  # (median, 0.9 quantile) of |Z| for the standard law
    "laplace": (math.log(2.0), math.log(10.0)),
    "cauchy": (1.0, math.tan(0.45 * math.pi)),
    "normal": (stats.norm.ppf(0.75), stats.norm.ppf(0.95)),
}


def noise_matches(noise: NDArray[np.float64], scale: float, family: str) -> bool:
    med, upper = QUANTILE_FACTORS[family]
    got_med = float(np.median(np.abs(noise)))
    got_up = float(np.quantile(np.abs(noise), 0.9))
    return abs(got_med / (med * scale) - 1) < 0.2 and abs(got_up / (upper * scale) - 1) < 0.2


def textbook_scale(mech: str, n1: int, n0: int, m: int, eps: float, delta: float) -> float:
    """The calibrated scale recomputed from the sensitivity formulas (not from the release)."""
    n = n1 + n0
    if mech == "laplace":
        return sensitivity.global_sensitivity("sp", n=n, m=m) / eps
    if mech == "gaussian":
        l2 = sensitivity.global_sensitivity("sp", n=n, m=m, norm="l2")
        return release.analytic_gaussian_sigma(l2_sensitivity=l2, epsilon=eps, delta=delta)
    if mech == "attribute_conceal":
        beta = eps / (6 * m)
        return 6 * sensitivity.smooth_sensitivity_exact("sp", n1=n1, n0=n0, m=m, beta=beta) / eps
    beta = sensitivity.smooth_laplace_beta(eps, delta, m)
    return 2 * sensitivity.smooth_sensitivity_exact("sp", n1=n1, n0=n0, m=m, beta=beta) / eps


FAMILY = {
    "laplace": "laplace",
    "gaussian": "normal",
    "attribute_conceal": "cauchy",
    "smooth_laplace": "laplace",
}


@pytest.mark.parametrize("sampler", ["safe", "naive"])
@pytest.mark.parametrize("mech", ["laplace", "attribute_conceal", "smooth_laplace", "gaussian"])
@pytest.mark.parametrize(("n1", "n0"), [(3, 2), (4, 1)])  # both sides of the N0 = 1 / 2 step
def test_noise_is_not_smaller_than_calibrated(mech: str, sampler: str, n1: int, n0: int) -> None:
    eps, delta = 2.0, 1e-4
    sp, sp2 = exact_pair(3, 2)
    value = sp if (n1, n0) == (3, 2) else sp2
    values = np.full(N_DRAWS, value)
    rel = release.release(
        mech,
        values,
        n1=n1,
        n0=n0,
        epsilon=eps,
        delta=delta if mech in ("smooth_laplace", "gaussian") else 0.0,
        rng=np.random.default_rng(zlib.crc32(f"{mech}:{sampler}:{n0}".encode())),
        sampler=sampler,
    )
    book = textbook_scale(mech, n1, n0, N_DRAWS, eps, delta)
    # the reported scale is never below the textbook one (the safe Gaussian pays its zCDP
    # calibration: up to 25 % more)
    assert book <= rel.noise_scale <= book * (1.25 if mech == "gaussian" else 1 + 1e-5)
    noise = rel.values - values
    assert noise_matches(noise, rel.noise_scale, FAMILY[mech])
    # mutation check: a twin that adds half the noise must be caught
    twin = values + noise / 2
    assert not noise_matches(twin - values, rel.noise_scale, FAMILY[mech])


# --------------------------------------------------------------------------------------------
# 4. Porosity (Mironov 2012)


def numpy_laplace_noise(k: NDArray[np.int64], scale: float) -> list[float]:
    """The double numpy's Laplace sampler returns for the 53-bit uniform k 2^-53 (loc = 0).

    numpy's C code: ``U >= 0.5: -scale * log(2 - U - U)``, else ``scale * log(U + U)``, with the
    C library log, which ``math.log`` also calls.
    """
    out = []
    for kk in k:
        u = float(kk) * 2.0**-53
        if u >= 0.5:
            out.append(-scale * math.log(2.0 - u - u))
        elif u > 0.0:
            out.append(scale * math.log(u + u))
        else:
            out.append(math.nan)
    return out


def reachable(x: float, centre: float, scale: float) -> bool:
    """Can the naive release ``centre + numpy.laplace(0, scale)`` return the double x?

    The noise is increasing in the uniform's index k, so the indices whose noise makes
    ``fl(centre + noise) == x`` are consecutive and lie next to the inverse of ``x - centre``;
    a window of +-64 indices around it is searched (far wider than the float error of the
    inverse).
    """
    d = x - centre
    u = math.exp(d / scale) / 2.0 if d < 0 else 1.0 - math.exp(-d / scale) / 2.0
    k0 = round(u * 2.0**53)
    ks = np.arange(max(k0 - 64, 1), min(k0 + 65, 2**53))
    return any(centre + z == x for z in numpy_laplace_noise(ks, scale))


def test_naive_laplace_is_porous_for_a_one_person_probe() -> None:
    n1, n0, eps = 6, 4, 1.0
    sp, sp2 = exact_pair(n1, n0)  # true SP 1/N1-like on S, the moved person's world on S'
    rel = release.release(
        "laplace",
        np.full(300, sp),
        n1=n1,
        n0=n0,
        m=300,
        epsilon=eps * 300,  # one-answer scale, 300 independent answers
        rng=np.random.default_rng(11),
        sampler="naive",
    )
    scale = rel.noise_scale
    outs = rel.values
    # control: the checker finds every output reachable from its true value
    assert all(reachable(float(x), sp, scale) for x in outs)
    impossible = sum(not reachable(float(x), sp2, scale) for x in outs)
    # most outputs could not have come from the neighbour: one answer reveals the group
    assert impossible > 0.5 * outs.size


def test_safe_laplace_outputs_have_positive_probability_under_both_neighbours() -> None:
    n1, n0, eps = 6, 4, 1.0
    sp, sp2 = exact_pair(n1, n0)
    kw = {"n1": n1, "n0": n0, "epsilon": eps}
    rel = release.release("laplace", [sp], rng=np.random.default_rng(12), **kw)
    rel2 = release.release("laplace", [sp2], rng=np.random.default_rng(12), n1=7, n0=3, epsilon=eps)
    assert rel.grid == rel2.grid  # public grid: same support for both
    gamma, t = rel.grid, round(rel.noise_scale / rel.grid)
    many = release.release(
        "laplace",
        np.full(300, sp),
        m=300,
        **{**kw, "epsilon": 300 * eps},
        rng=np.random.default_rng(13),
    )
    k, k2 = round(sp / gamma), round(sp2 / gamma)
    y = np.round(many.values / many.grid).astype(np.int64)
    t_many = round(many.noise_scale / many.grid)
    # the discrete Laplace has full support on the integers: every output has positive
    # probability from either centre, and the likelihood ratio is within e^eps
    p = discrete_noise.discrete_laplace_pmf(y - k, t_many)
    p2 = discrete_noise.discrete_laplace_pmf(y - k2, t_many)
    assert np.all(p > 0) and np.all(p2 > 0)
    assert np.all(np.abs(np.log(p) - np.log(p2)) <= eps + 1e-9)
    assert t >= 1


def test_safe_cauchy_outputs_have_positive_probability_under_both_neighbours() -> None:
    n1, n0, eps = 6, 4, 1.0
    sp, sp2 = exact_pair(n1, n0)
    one = release.release(
        "attribute_conceal", [sp], n1=n1, n0=n0, epsilon=eps, rng=np.random.default_rng(14)
    )
    two = release.release(
        "attribute_conceal", [sp2], n1=n1 + 1, n0=n0 - 1, epsilon=eps, rng=np.random.default_rng(14)
    )
    assert one.grid == two.grid
    gamma = one.grid
    outs = np.array(
        [
            release.release(
                "attribute_conceal",
                [sp],
                n1=n1,
                n0=n0,
                epsilon=eps,
                rng=np.random.default_rng(100 + i),
            ).values[0]
            for i in range(200)
        ]
    )
    # each output is a grid cell [y - gamma/2, y + gamma/2) of a Cauchy law: positive mass
    # under both neighbours (the Cauchy density is positive everywhere)
    for centre, s in ((sp, one.noise_scale), (sp2, two.noise_scale)):
        law = stats.cauchy(loc=centre, scale=s)
        mass = law.cdf(outs + gamma / 2) - law.cdf(outs - gamma / 2)
        assert np.all(mass > 0)


# --------------------------------------------------------------------------------------------
# 5. Exactly rounded continuous noise


@pytest.mark.parametrize("family", ["laplace", "cauchy"])
def test_rounded_continuous_is_the_rounding_of_the_53_bit_draw(family: str) -> None:
    # a coarse grid (fast path) and a grid far below the doubles' resolution near 0.3 (every
    # value goes through the interval-arithmetic slow path): both must agree with the interval
    # the first 53 bits pin down
    v = np.full(300, 0.3)
    for gamma in (2.0**-20, 2.0**-70):
        out = rounded_noise.rounded_continuous(v, 0.5, family, gamma, np.random.default_rng(21))
        np.testing.assert_array_equal(out / gamma, np.round(out / gamma))
        k = np.random.default_rng(21).integers(0, 1 << 53, size=v.size)
        law = stats.laplace if family == "laplace" else stats.cauchy
        lo = 0.3 + 0.5 * law.ppf(k * 2.0**-53)
        hi = 0.3 + 0.5 * law.ppf((k + 1) * 2.0**-53)
        slack = gamma + 1e-9 * np.abs(hi)
        assert np.all(out >= lo - slack) and np.all(out <= hi + slack)


@pytest.mark.parametrize("family", ["laplace", "cauchy"])
def test_rounded_continuous_follows_the_continuous_law(family: str) -> None:
    out = rounded_noise.rounded_continuous(
        np.full(50_000, -0.25), 0.1, family, 2.0**-24, np.random.default_rng(22)
    )
    law = (stats.laplace if family == "laplace" else stats.cauchy)(loc=-0.25, scale=0.1)
    assert stats.kstest(out, law.cdf).pvalue > 1e-4  # false alarm 1e-4; grid 2^-24 is invisible
    wrong = (stats.laplace if family == "laplace" else stats.cauchy)(loc=-0.25, scale=0.05)
    assert stats.kstest(out, wrong.cdf).pvalue < 1e-10


def test_grid_is_a_power_of_two_below_the_public_bound() -> None:
    g = grid.choose_grid(0.3, 1.7)
    assert g == 2.0**-22  # 0.3 * 2^-20 lies in [2^-22, 2^-21)
    with pytest.raises(ValueError, match="positive and finite"):
        grid.choose_grid(0.0)


# --------------------------------------------------------------------------------------------
# 6. Cross-check against OpenDP's samplers (two-sample chi-square, threshold 1e-6: OpenDP has
# no user seed, so this test is not deterministic; 1e-6 is its false-alarm rate per law)


def _opendp():
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover - opendp is in the test extra
        pytest.fail("the OpenDP cross-check needs opendp: pip install -e '.[test]' or '.[opendp]'")
    dp.enable_features("contrib")
    return dp


def two_sample_pvalue(a: NDArray[np.int64], b: NDArray[np.int64]) -> float:
    edges = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0, 1, 41)))
    edges = np.concatenate([[-np.inf], edges[1:-1] + 0.5, [np.inf]])
    ca, _ = np.histogram(a, edges)
    cb, _ = np.histogram(b, edges)
    keep = (ca + cb) > 0
    return float(stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1])


@pytest.mark.parametrize(("t", "s"), [(3, 2), (4, 1), (25, 1)])
def test_discrete_laplace_agrees_with_opendp(t: int, s: int) -> None:
    dp = _opendp()
    n = 100_000
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=t / s
    )
    theirs = np.asarray(meas([0] * n), dtype=np.int64)
    ours = discrete_noise.discrete_laplace(t, s, n, np.random.default_rng(t + s))
    assert two_sample_pvalue(ours, theirs) > 1e-6


@pytest.mark.parametrize("sigma", [1.5, 3.0, 10.0])
def test_discrete_gaussian_agrees_with_opendp(sigma: float) -> None:
    dp = _opendp()
    n = 100_000
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=sigma
    )
    theirs = np.asarray(meas([0] * n), dtype=np.int64)
    ours = discrete_noise.discrete_gaussian(
        Fraction(sigma) ** 2, n, np.random.default_rng(int(sigma))
    )
    assert two_sample_pvalue(ours, theirs) > 1e-6


@pytest.mark.parametrize(("k", "expected"), [(2**52, 8), (2**52 - 1, 7)])
def test_slow_path_decides_values_within_rounding_of_a_half_grid_point(
    k: int, expected: int
) -> None:
    """The exact value sits on a half grid point and the noise is a hair either side of zero
    (u just above or just below 1/2): read at 53 bits, every refinement's ends would be exactly
    7.5 and nothing would ever be certified. The ends must be compared exactly."""
    gamma = 2.0**-20
    rng = np.random.default_rng(3)
    got = rounded_noise._refine(7.5 * gamma, 1e-6 * gamma, k, "cauchy", gamma, rng)
    assert got == expected * gamma
