r"""The leakage ceilings against brute-force computations of the TRUE optimum on small cases.

Every number the ceilings are compared with is computed here, from the definitions, without the
code under test: the attribute vectors are enumerated, the answers recomputed from the models, and
the best attacker's accuracy integrated over the noise.

The noise law. The ceilings are proved for the ``safe`` samplers. Laplace's releases discrete
Laplace noise on a grid, whose pair is dominated by the continuous ``laplace`` pair at the shift
``(d/gamma + 1)/t + 2 log cosh(1/(2t))``; that shift is the continuous one, ``d / b`` with
``b = Delta / eps`` (the scale of :func:`~biasleak.mechanisms.sensitivity.global_sensitivity`),
up to a relative ``~1e-6`` (the grid step gamma is ``~5e-7`` of an answer). Attribute-Conceal's
rounds the continuous Cauchy answer of scale ``6 S_beta / eps`` (or a hair more) to the grid:
post-processing of the continuous law. Hence every attacker of the continuous law at these
scales is an attacker of (a law dominated by) what the ceilings bound, and its optimum must stay
below the ceilings up to ``~1e-6``: that is the tolerance used.

How the optimum is integrated. The best attacker's accuracy is ``(1 + TV)/2`` (Le Cam). Here TV
is computed for the observation *quantised* to cells: ``TV_q = (1/2) sum_cells |P(cell) -
Q(cell)|``, with every cell probability exact (closed-form distribution functions, two infinite
tail cells). A quantised observation is a post-processing of the real one, so ``TV_q <= TV``: it
is the accuracy of a real attacker (who reads the answer to a grid), never more than the optimum,
and any excess over a ceiling is a bug, not integration error. It converges to TV quickly:

* Laplace: beyond every atom (the values the noiseless answers can take) each component density
  is ``e^{-|y - v|/b}`` with the same sign of ``y - v``, so the likelihood ratio is constant
  there and the two tail cells lose nothing; only the span of the atoms is gridded (in each
  coordinate for several answers);
* Cauchy: the grid is uniform in ``u = arctan((y - c)/scale)`` on ``(-pi/2, pi/2)``, which puts
  cells over the whole line at the density's resolution.

The loss of quantising is second order in the cell width (a cell straddling a zero of ``p - q``);
at the widths used it is below ``1e-7`` in one dimension (checked in
:func:`test_quantisation_converges`) and ``~1e-5`` in three.

Known group sizes (the balanced-accuracy ceiling). With ``a`` uniform over the ``C(n, N0)``
vectors of the given sizes and the models known, ``E[BA] = (1/n) sum_i BA_i`` and the best guess
of person i is the best test between the mixtures ``P_i1`` (the answers' law given ``a_i = 1``:
the average over the vectors with ``a_i = 1``, each with the scale of the fixed sizes) and
``P_i0``; each person's guess is a separate function of the answers, so the optimum is
``(1/n) sum_i (1 + TV(P_i1, P_i0))/2`` exactly. The prior is exchangeable, so a permutation of
the people in every model leaves the optimum unchanged (checked): the models are taken up to a
permutation (all 0/1 vectors up to permutation are among the ``{0, 1/2, 1}`` vectors used).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import integrate, stats

from biasleak.mechanisms.ceiling import (
    AuditSizes,
    Pair,
    PersonLedger,
    ReleaseSpec,
    ceilings,
    compose,
    flip_shifts,
    person_bounds,
)
from biasleak.mechanisms.sensitivity import global_sensitivity, smooth_sensitivity

TOLERANCE = 1e-6
"""Continuous law against the safe sampler's ceiling (module docstring)."""

Array = NDArray[np.float64]


# ----------------------------------------------------------------------------------------------
# brute force


def arrangements(n: int, n0: int) -> NDArray[np.bool_]:
    """(C(n, n0), n): every attribute vector with n0 people in group 0 (True is group 1)."""
    rows = []
    for zeros in itertools.combinations(range(n), n0):
        a = np.ones(n, dtype=bool)
        a[list(zeros)] = False
        rows.append(a)
    return np.array(rows)


def sp_values(h: Array, a: NDArray[np.bool_]) -> Array:
    """SP of model ``h`` (n,) on each attribute vector of ``a`` (r, n), from the definition."""
    a = np.atleast_2d(a)
    return (a @ h) / a.sum(axis=1) - ((~a) @ h) / (~a).sum(axis=1)


def laplace_cdf(x: Array) -> Array:
    """Distribution function of the unit Laplace law."""
    return np.where(
        x < 0, 0.5 * np.exp(np.minimum(x, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(x, 0.0))
    )


def cauchy_cdf(x: Array) -> Array:
    """Distribution function of the standard Cauchy law."""
    return 0.5 + np.arctan(x) / math.pi


def cell_masses(values: Array, scale: float, law: str, cells: int) -> Array:
    """(r, cells + 2): the probability of each cell of the answer when the noiseless answer is
    ``values[r]`` (exact, from the distribution function; module docstring for the grids)."""
    lo, hi = float(values.min()), float(values.max())
    if law == "laplace":
        if hi - lo < 1e-14:  # one atom: nothing to learn, one cell holds it all
            return np.ones((values.size, 1))
        inner = np.linspace(lo, hi, cells + 1)
        cdf = laplace_cdf
    else:
        u = np.linspace(-math.pi / 2, math.pi / 2, cells + 1)[1:-1]
        inner = 0.5 * (lo + hi) + scale * np.tan(u)
        cdf = cauchy_cdf
    edges = np.concatenate([[-np.inf], inner, [np.inf]])
    return np.diff(cdf((edges[None, :] - values[:, None]) / scale), axis=1)


def joint_difference(weights: Array, masses: Sequence[Array]) -> Array:
    """``sum_r weights[r] prod_d masses[d][r, cell_d]`` over the product grid (1 to 3 answers)."""
    if len(masses) == 1:
        return weights @ masses[0]
    if len(masses) == 2:
        return (weights[:, None] * masses[0]).T @ masses[1]
    if len(masses) == 3:
        r = weights.size
        first = (masses[0][:, :, None] * masses[1][:, None, :]).reshape(r, -1)
        return (weights[:, None] * first).T @ masses[2]
    raise ValueError("one to three answers")


def known_sizes_optimum(
    models: Sequence[Array], scales: Sequence[float], law: str, n: int, n0: int, cells: int
) -> float:
    """The best expected balanced accuracy with known sizes (module docstring), from a grid
    (a lower bound on the exact optimum, within the quantisation loss)."""
    a = arrangements(n, n0)
    masses = [
        cell_masses(sp_values(h, a), s, law, cells) for h, s in zip(models, scales, strict=True)
    ]
    # P_i1 - P_i0 as weights on the arrangements: uniform over those with a_i = 1, minus those
    # with a_i = 0
    weights = a.T / a.sum(axis=0)[:, None] - (~a).T / (~a).sum(axis=0)[:, None]  # (n, r)
    columns = np.stack(models, axis=1)  # people with equal predictions everywhere are alike
    _, first, inverse = np.unique(columns, axis=0, return_index=True, return_inverse=True)
    tv = np.array([0.5 * np.abs(joint_difference(weights[i], masses)).sum() for i in first])
    return float(np.mean((1.0 + tv[inverse.reshape(-1)]) / 2.0))


def laplace_scale(n: int, eps: float) -> float:
    """The continuous Laplace scale of one model: global sensitivity over the epsilon."""
    return global_sensitivity("sp", n=n, m=1) / eps


def conceal_scale(n1: int, n0: int, eps: float) -> float:
    """Attribute-Conceal's scale of one model at these sizes: ``6 S_beta / eps``, beta = eps/6."""
    return 6.0 * smooth_sensitivity("sp", n1=n1, n0=n0, m=1, beta=eps / 6.0) / eps


def scale_of(mechanism: str, n: int, n0: int, eps: float) -> float:
    if mechanism == "laplace":
        return laplace_scale(n, eps)
    return conceal_scale(n - n0, n0, eps)


def law_of(mechanism: str) -> str:
    return "laplace" if mechanism == "laplace" else "cauchy"


def candidate_models(n: int, seed: int) -> list[Array]:
    """Every model in ``{0, 1/2, 1}^n`` up to a permutation (all 0/1 ones among them), a ramp, a
    geometric one and a few random fractional ones (seeded)."""
    out = [
        np.array(c, dtype=np.float64)
        for c in itertools.combinations_with_replacement((0.0, 0.5, 1.0), n)
    ]
    out = [h for h in out if np.ptp(h) > 0]  # a constant model answers a constant
    rng = np.random.default_rng(seed)
    out += [np.linspace(0.0, 1.0, n), 2.0 ** -np.arange(n, dtype=np.float64)]
    out += [np.sort(rng.random(n)) for _ in range(4)]
    return out


def half_split_optimum(n: int, tv_of_shift: float) -> float:
    """Closed form of the optimum at N0 = 1, n even, model ``(0,...,0,1,...,1)`` (half each).

    The group-0 member j answers ``v0 = (n/2)/(n-1)`` if ``h_j = 0`` and ``v1 = v0 - n/(n-1)``
    otherwise. For person i with ``h_i = 0``: ``P_i0`` is the law at ``v0``; ``P_i1`` puts weight
    ``(n/2)/(n-1)`` on ``v1`` (j uniform among the others), so ``TV_i`` is that weight times the
    TV of a shift by ``n/(n-1)``, and likewise for ``h_i = 1``.
    """
    return 0.5 + 0.5 * (n / (2.0 * (n - 1))) * tv_of_shift


def person_tv(before: Array, after: Array, scales: Array, cells: int) -> float:
    """TV between the product laws of independent Laplace answers at ``before`` and ``after``
    (one per release), from the quantised grid of each coordinate (a lower bound)."""
    masses = []
    for u, v, b in zip(before, after, scales, strict=True):
        masses.append(cell_masses(np.array([u, v]), float(b), "laplace", cells))
    return 0.5 * float(np.abs(joint_difference(np.array([1.0, -1.0]), masses)).sum())


def flipped(a: NDArray[np.bool_], i: int) -> NDArray[np.bool_]:
    out = a.copy()
    out[i] = ~out[i]
    return out


def person_ledger_bound(models: Array, a: NDArray[np.bool_], scales: Array) -> Array:
    """The answers-level per-person TV bounds, built as :mod:`biasleak.sim.exposure` builds them
    (one ``laplace`` pair per model and person at the flip shift over the scale)."""
    ledger = PersonLedger(a.size)
    shifts = flip_shifts("sp", models, protected=a)
    ledger.add_shifts("laplace", shifts / scales[:, None])
    pairs, counts = ledger.matrix()
    tv, _ = person_bounds(pairs, counts)
    return tv


# ----------------------------------------------------------------------------------------------
# the brute force itself, against closed forms


@pytest.mark.parametrize("n", [4, 6])
@pytest.mark.parametrize("eps", [0.25, 1.0, 3.0])
def test_brute_force_matches_closed_forms(n: int, eps: float) -> None:
    """The grid optimum of the half-split model at N0 = 1 equals its closed form."""
    h = np.repeat([0.0, 1.0], n // 2)
    shift = n / (n - 1.0)
    b = laplace_scale(n, eps)
    lap = known_sizes_optimum([h], [b], "laplace", n, 1, 2000)
    assert lap == pytest.approx(half_split_optimum(n, -math.expm1(-shift / (2 * b))), abs=1e-9)
    c = conceal_scale(n - 1, 1, eps)
    cau = known_sizes_optimum([h], [c], "cauchy", n, 1, 4000)
    truth = half_split_optimum(n, 2.0 / math.pi * math.atan(shift / (2.0 * c)))
    assert truth - 1e-7 <= cau <= truth + 1e-12  # the quantised TV is a lower bound


def test_quantisation_converges() -> None:
    """The grids used are fine enough: a 50 times finer grid moves the optimum by < 1e-7."""
    rng = np.random.default_rng(11)
    for mech, n, n0, eps in (("laplace", 6, 2, 3.0), ("attribute_conceal", 5, 1, 3.0)):
        h = rng.random(n)
        s = scale_of(mech, n, n0, eps)
        coarse = known_sizes_optimum([h], [s], law_of(mech), n, n0, 2000)
        fine = known_sizes_optimum([h], [s], law_of(mech), n, n0, 100_000)
        assert coarse - 1e-12 <= fine <= coarse + 1e-7


def test_optimum_is_permutation_invariant() -> None:
    """The uniform prior is exchangeable: permuting the people of a model changes nothing (the
    reason the models are taken up to a permutation); every 0/1 model at n = 4 agrees with its
    sorted representative."""
    n, n0, b = 4, 1, laplace_scale(4, 1.0)
    for bits in itertools.product((0.0, 1.0), repeat=n):
        h = np.array(bits)
        if np.ptp(h) == 0:
            continue
        one = known_sizes_optimum([h], [b], "laplace", n, n0, 2000)
        assert one == pytest.approx(known_sizes_optimum([np.sort(h)], [b], "laplace", n, n0, 2000))
    rng = np.random.default_rng(2)
    h1, h2 = rng.random(5), rng.random(5)
    perm = rng.permutation(5)
    scales = [laplace_scale(5, 1.0)] * 2
    one = known_sizes_optimum([h1, h2], scales, "laplace", 5, 2, 300)
    two = known_sizes_optimum([h1[perm], h2[perm]], scales, "laplace", 5, 2, 300)
    assert one == pytest.approx(two, abs=1e-12)


# ----------------------------------------------------------------------------------------------
# 1. known sizes, one release of one model


@pytest.mark.parametrize("mechanism", ["laplace", "attribute_conceal"])
@pytest.mark.parametrize("n", [4, 5, 6])
def test_one_answer_optimum_is_below_the_balanced_accuracy_ceiling(mechanism: str, n: int) -> None:
    models = candidate_models(n, seed=n)
    for n0 in range(1, n):
        for eps in (0.5, 1.0, 3.0):
            s = scale_of(mechanism, n, n0, eps)
            best = max(
                known_sizes_optimum([h], [s], law_of(mechanism), n, n0, 2000) for h in models
            )
            c = ceilings([ReleaseSpec(mechanism, eps, population=n)], AuditSizes(n - n0, n0))
            assert c.audit_set is not None
            where = f"{mechanism} n={n} N0={n0} eps={eps}: optimum {best:.7f}"
            assert best <= c.audit_set.balanced_accuracy + TOLERANCE, where
            assert best <= c.policy.balanced_accuracy + TOLERANCE, where
            assert best > 0.5  # the brute force is not vacuous


@pytest.mark.parametrize(("n", "eps"), [(4, 0.1), (4, 0.25), (4, 0.4), (6, 0.05)])
def test_known_sizes_beat_the_flip_value(n: int, eps: float) -> None:
    """Laplace at N0 = 1: the known-sizes optimum exceeds ``(1 + TV_flip)/2`` at the policy
    level (``policy.person``), which is why the balanced-accuracy ceiling uses the swap.

    The half-split model gets ``1/2 + n/(4(n-1)) (1 - e^{-n eps/(n+1)})`` (closed form above),
    against ``1/2 + (1 - e^{-eps/2})/2``: more for small eps (the slopes are ``n^2/(4(n^2-1))``
    and ``1/4``), e.g. up to eps ~ 0.45 at n = 4; not at eps = 0.5, 1 or 3.
    """
    h = np.repeat([0.0, 1.0], n // 2)
    best = known_sizes_optimum([h], [laplace_scale(n, eps)], "laplace", n, 1, 2000)
    c = ceilings([ReleaseSpec("laplace", eps, population=n)], AuditSizes(n - 1, 1))
    assert best > c.policy.person + 1e-4
    assert best <= c.audit_set.balanced_accuracy + TOLERANCE


# ----------------------------------------------------------------------------------------------
# 2. known sizes, several answers


SEVERAL = [
    (5, 1, (1.0, 1.0)),
    (5, 2, (0.5, 3.0)),
    (6, 1, (3.0, 3.0)),
    (6, 3, (1.0, 1.0)),
    (5, 1, (1.0, 1.0, 1.0)),
    (6, 2, (0.5, 1.0, 3.0)),
]


@pytest.mark.parametrize(("n", "n0", "epsilons"), SEVERAL)
def test_several_answers_optimum_is_below_the_balanced_accuracy_ceiling(
    n: int, n0: int, epsilons: tuple[float, ...]
) -> None:
    k = len(epsilons)
    cells = 400 if k == 2 else 60
    rng = np.random.default_rng(100 * n + n0)
    base = [np.array(c, dtype=np.float64) for c in itertools.product((0.0, 0.5, 1.0), repeat=n)]
    base = [h for h in base if np.ptp(h) > 0]
    trials = [[base[j] for j in rng.choice(len(base), k, replace=False)] for _ in range(12)]
    # and models that split the people in different ways (the strongest in a search)
    trials.append([np.roll(np.repeat([0.0, 1.0], [n - n // 2, n // 2]), j) for j in range(k)])
    scales = [laplace_scale(n, e) for e in epsilons]
    best = max(known_sizes_optimum(hs, scales, "laplace", n, n0, cells) for hs in trials)
    specs = [ReleaseSpec("laplace", e, population=n) for e in epsilons]
    c = ceilings(specs, AuditSizes(n - n0, n0))
    assert c.audit_set is not None
    assert 0.5 < best <= c.audit_set.balanced_accuracy + TOLERANCE
    assert best <= c.policy.balanced_accuracy + TOLERANCE


# ----------------------------------------------------------------------------------------------
# 3. the person (flip) ceiling, exact per person


@pytest.mark.parametrize("k", [2, 3])
def test_person_bounds_against_the_exact_flip_total_variation(k: int) -> None:
    rng = np.random.default_rng(7 + k)
    n, n0 = 10, 4
    a = np.ones(n, dtype=bool)
    a[rng.choice(n, n0, replace=False)] = False
    models = rng.random((k, n))
    models[0] = rng.integers(0, 2, n)  # one hard-decision model
    epsilons = np.array([0.5, 1.0, 2.0][:k])
    scales = np.array([laplace_scale(n, e) for e in epsilons])
    bound = person_ledger_bound(models, a, scales)
    cells = 1000 if k == 2 else 120
    for i in range(n):
        before = np.array([sp_values(h, a)[0] for h in models])
        after = np.array([sp_values(h, flipped(a, i))[0] for h in models])
        # the shifts the ledger used are the ones recomputed here
        shifts = flip_shifts("sp", models, protected=a)[:, i]
        np.testing.assert_allclose(shifts, np.abs(after - before), rtol=0, atol=1e-12)
        tv = person_tv(before, after, scales, cells)
        assert tv <= bound[i] + TOLERANCE, (i, tv, bound[i])
        assert bound[i] <= tv * 1.05 + 1e-4, (i, tv, bound[i])


# ----------------------------------------------------------------------------------------------
# 4. the per-person likelihood-ratio test, Monte Carlo


def test_likelihood_ratio_attack_stays_below_the_person_bounds() -> None:
    """n = 200, N0 = 20, 30 single-model Laplace releases at eps 0.5 of random models: the
    attacker that knows everyone but person i runs the likelihood-ratio test between the two
    neighbouring audit sets; its empirical accuracy (20,000 noise draws per world) stays within
    4 standard errors of the person bound (and, the test being optimal, close to it). The same
    draws under the first world also estimate ``TV = E[(1 - e^{-L})_+]`` (L the log-likelihood
    ratio) with a standard error four times smaller: within 4 of them below the bound too."""
    rng = np.random.default_rng(2024)
    n, n0, k, eps, draws = 200, 20, 30, 0.5, 20_000
    a = np.ones(n, dtype=bool)
    a[rng.choice(n, n0, replace=False)] = False
    models = rng.integers(0, 2, size=(k, n)).astype(np.float64)
    b = laplace_scale(n, eps)
    bound = person_ledger_bound(models, a, np.full(k, b))
    for i in np.argsort(-bound, kind="stable")[:5]:
        mu = np.array([sp_values(h, a)[0] for h in models])
        nu = np.array([sp_values(h, flipped(a, i))[0] for h in models])

        def says_first(y: Array, mu: Array = mu, nu: Array = nu) -> NDArray[np.bool_]:
            log_ratio = (np.abs(y - nu) - np.abs(y - mu)).sum(axis=1) / b
            return log_ratio > 0

        first = mu + rng.laplace(0.0, b, size=(draws, k))
        right_first = says_first(first).mean()
        right_second = 1.0 - says_first(nu + rng.laplace(0.0, b, size=(draws, k))).mean()
        accuracy = 0.5 * (right_first + right_second)
        se = 0.5 * math.sqrt(
            (right_first * (1 - right_first) + right_second * (1 - right_second)) / draws
        )
        ceiling = 0.5 * (1.0 + bound[i])
        assert accuracy <= ceiling + 4 * se, (int(i), accuracy, ceiling, se)
        assert accuracy >= 0.5 * (1.0 + (bound[i] - 1e-4) / 1.05) - 4 * se, (int(i), accuracy)
        loss = (np.abs(first - nu) - np.abs(first - mu)).sum(axis=1) / b
        sample = np.maximum(0.0, -np.expm1(-loss))
        tv, tv_se = float(sample.mean()), float(sample.std() / math.sqrt(draws))
        assert tv <= bound[i] + 4 * tv_se, (int(i), tv, bound[i], tv_se)


# ----------------------------------------------------------------------------------------------
# 5. Laplace composition


def laplace_profile(s: float, eps: float) -> float:
    """``H_{e^eps}`` of the unit Laplace law against its shift by s (written out here)."""
    if eps <= -s:
        return -math.expm1(eps)
    if eps >= s:
        return 0.0
    return -math.expm1((eps - s) / 2.0)


def two_fold_by_integration(s: float) -> float:
    """TV of the 2-fold products, ``E_P[(1 - e^{-L1 - L2})_+]``, integrating over the first
    answer y (under P, unit Laplace) the second release's profile at ``-L1(y)``: L1 is s for
    y < 0 (mass 1/2), -s for y > s (mass e^-s / 2) and s - 2y in between."""
    middle, _ = integrate.quad(
        lambda y: 0.5 * math.exp(-y) * laplace_profile(s, 2.0 * y - s), 0.0, s, epsabs=1e-14
    )
    return 0.5 * laplace_profile(s, -s) + 0.5 * math.exp(-s) * laplace_profile(s, s) + middle


@pytest.mark.parametrize("s", [0.01, 0.3, 1.0, 2.5])
def test_laplace_composition_against_exact_products(s: float) -> None:
    one = -math.expm1(-s / 2.0)
    two = -math.expm1(-s) - 0.5 * s * math.exp(-s)  # the integral above in closed form
    assert two_fold_by_integration(s) == pytest.approx(two, abs=1e-12)
    grid = person_tv(np.zeros(2), np.full(2, s), np.ones(2), 2000)  # a lower bound
    assert two - 1e-6 <= grid <= two + 1e-12
    for k, exact in ((1, one), (2, two)):
        bound = compose([(Pair("laplace", s), k)]).total_variation
        assert exact - 1e-12 <= bound <= exact + 1e-5, (k, bound, exact)


@pytest.mark.parametrize(("s", "k"), [(0.05, 400), (0.01, 10_000)])
def test_laplace_composition_against_the_central_limit(s: float, k: int) -> None:
    """Loose two-sided sanity check (not a bound): the k-fold log-likelihood ratio is close to
    N(mu^2/2, mu^2) with ``mu^2 = 2 k KL``, ``KL = s - 1 + e^-s``, whose TV is
    ``2 Phi(mu/2) - 1``."""
    mu = math.sqrt(2.0 * k * (s + math.expm1(-s)))
    clt = 2.0 * stats.norm.cdf(mu / 2.0) - 1.0
    bound = compose([(Pair("laplace", s), k)]).total_variation
    assert bound == pytest.approx(clt, abs=0.02)


def test_laplace_composition_against_monte_carlo() -> None:
    """k = 50 at s = 0.2: ``TV = E_P[(1 - e^{-L})_+]`` estimated from 200,000 draws of the
    summed loss; the bound is within 5 standard errors above the estimate and not far above it."""
    rng = np.random.default_rng(5)
    s, k, draws = 0.2, 50, 200_000
    total = np.zeros(draws)
    for _ in range(k):
        y = rng.laplace(0.0, 1.0, size=draws)
        total += np.abs(y - s) - np.abs(y)
    sample = np.maximum(0.0, -np.expm1(-total))
    estimate, se = float(sample.mean()), float(sample.std() / math.sqrt(draws))
    bound = compose([(Pair("laplace", s), k)]).total_variation
    assert estimate - 5 * se <= bound <= estimate + 5 * se + 1e-5
