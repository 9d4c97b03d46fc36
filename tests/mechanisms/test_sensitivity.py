"""Sensitivities of fairness queries: exhaustive brute force, hand calculations and bad input.

The reference values come from a brute force written here, independent of the library: for tiny
audit sets it enumerates every attribute vector ``a`` (both groups non-empty), every neighbour
``a'`` (one attribute flipped) and takes the worst case over model outputs ``h`` in [0, 1]^n:

- SP is linear in h, ``SP = h . w(a)``, so ``sup_h |h . (w(a) - w(a'))|`` is the larger of the sums
  of the positive and of the negative parts of ``w(a) - w(a')``;
- ``| |h . w| - |h . w'| |`` is piecewise linear, so its supremum is found exactly by linear
  programs, one per sign region of ``(h . w, h . w')`` and direction;
- smooth sensitivity is maximised over every attribute vector ``b`` at its Hamming distance.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import stats
from scipy.optimize import linprog

from biasleak.mechanisms import metrics
from biasleak.mechanisms.sensitivity import (
    attribute_conceal_beta,
    global_sensitivity,
    local_sensitivity,
    local_sensitivity_at_distance,
    paper_global_sensitivity,
    paper_smooth_sensitivity,
    smooth_laplace_beta,
    smooth_sensitivity,
    smooth_sensitivity_exact,
)

SMALL_N = tuple(range(3, 8))
BETAS = (0.0, 0.05, 0.3, 1.0, 3.0)
REL = 1e-12
LP_REL = 1e-9  # linear programs are solved in floating point by HiGHS

Vector = tuple[int, ...]


# --------------------------------------------------------------------------------------------
# Brute-force reference (used only by these tests)
# --------------------------------------------------------------------------------------------


def weights(a: Vector, y: Vector | None = None) -> NDArray[np.float64]:
    """``w`` with ``gap = h . w``: 1/N1 on group 1, -1/N0 on group 0 (among y = 1 if y given)."""
    av = np.asarray(a)
    counted = np.ones(av.size, dtype=bool) if y is None else np.asarray(y) == 1
    in1 = counted & (av == 1)
    in0 = counted & (av == 0)
    w = np.zeros(av.size)
    w[in1] = 1.0 / in1.sum()
    w[in0] = -1.0 / in0.sum()
    return w


def in_universe(a: Vector, y: Vector | None = None) -> bool:
    """Both groups non-empty (among the people with y = 1 when y is given)."""
    counted = [ai for ai, yi in zip(a, y or (1,) * len(a), strict=True) if yi == 1]
    return 0 < sum(counted) < len(counted)


def universe(n: int, y: Vector | None = None) -> list[Vector]:
    return [v for v in itertools.product((0, 1), repeat=n) if in_universe(v, y)]


def neighbours(a: Vector, y: Vector | None = None) -> list[Vector]:
    """Every vector of the universe that differs from ``a`` in exactly one entry."""
    out = []
    for j in range(len(a)):
        b = list(a)
        b[j] = 1 - b[j]
        if in_universe(tuple(b), y):
            out.append(tuple(b))
    return out


def sup_linear(d: NDArray[np.float64]) -> float:
    """``sup over h in [0, 1]^n of |h . d|``."""
    return float(max(d[d > 0].sum(), -d[d < 0].sum()))


def _lp_max(c: NDArray[np.float64], a_ub: NDArray[np.float64]) -> float:
    """``max c . h`` subject to ``a_ub h <= 0`` and ``0 <= h <= 1``."""
    res = linprog(-c, A_ub=a_ub, b_ub=np.zeros(a_ub.shape[0]), bounds=(0.0, 1.0), method="highs")
    assert res.status == 0, res.message
    return float(-res.fun)


def sup_abs_change_lp(w: NDArray[np.float64], w2: NDArray[np.float64]) -> float:
    """``sup over h in [0, 1]^n of | |h . w| - |h . w2| |``, exactly, by linear programs.

    In the region ``s1 h.w >= 0, s2 h.w2 >= 0`` the objective is ``|s1 h.w - s2 h.w2|``; maximise
    both signs of it in all four regions (each contains h = 0, so none is empty).
    """
    best = 0.0
    for s1, s2 in itertools.product((1.0, -1.0), repeat=2):
        a_ub = np.stack([-s1 * w, -s2 * w2])
        diff = s1 * w - s2 * w2
        for sign in (1.0, -1.0):
            best = max(best, _lp_max(sign * diff, a_ub))
    return best


@functools.cache
def _sup_abs_change_canonical(pairs: tuple[tuple[float, float], ...]) -> float:
    w, w2 = (np.array(col) for col in zip(*pairs, strict=True))
    return sup_abs_change_lp(w, w2)


def sup_abs_change(w: NDArray[np.float64], w2: NDArray[np.float64]) -> float:
    """Cached :func:`sup_abs_change_lp`: the supremum over the box does not change when the
    coordinates of h (hence the pairs ``(w_j, w2_j)``) are permuted together."""
    return _sup_abs_change_canonical(tuple(sorted(zip(w.tolist(), w2.tolist(), strict=True))))


@functools.cache
def brute_ls(metric: str, a: Vector, y: Vector | None = None) -> float:
    """Local sensitivity of one answer at ``a``: worst neighbour, worst model."""
    w = weights(a, y)
    values = []
    for b in neighbours(a, y):
        w2 = weights(b, y)
        if metric in ("sp", "eo"):
            values.append(sup_linear(w - w2))
        else:
            values.append(sup_abs_change(w, w2) if np.any(w != w2) else 0.0)
    return max(values)


@functools.cache
def universe_arrays(n: int) -> tuple[list[Vector], NDArray[np.int64]]:
    """The universe of size-n attribute vectors and their pairwise Hamming distances."""
    vectors = universe(n)
    arr = np.array(vectors)
    hamming = (arr[:, None, :] != arr[None, :, :]).sum(axis=2)
    return vectors, hamming


@functools.cache
def universe_ls(metric: str, n: int) -> NDArray[np.float64]:
    """Brute-force local sensitivity of every vector of the universe, in its order."""
    return np.array([brute_ls(metric, b) for b in universe_arrays(n)[0]])


def brute_smooth(metric: str, n: int, beta: float) -> dict[Vector, float]:
    """``S(a) = max over b of LS(b) exp(-beta d(a, b))`` for every a of the universe."""
    vectors, hamming = universe_arrays(n)
    ls = universe_ls(metric, n)
    smooth = (ls[None, :] * np.exp(-beta * hamming)).max(axis=1)
    return dict(zip(vectors, smooth.tolist(), strict=True))


def brute_global(metric: str, n: int) -> float:
    return max(brute_ls(metric, a) for a in universe(n))


def brute_ls_at_distance(metric: str, a: Vector, k: int) -> float:
    vectors, hamming = universe_arrays(len(a))
    found = universe_ls(metric, len(a))[hamming[vectors.index(a)] == k]
    return float(found.max()) if found.size else 0.0


def sizes(a: Vector) -> dict[str, int]:
    return {"n1": sum(a), "n0": len(a) - sum(a)}


# --------------------------------------------------------------------------------------------
# The brute force itself
# --------------------------------------------------------------------------------------------


def test_brute_force_lp_bounds_sampled_models_and_reaches_hand_value() -> None:
    a, moved = (1, 1, 1, 0, 0), (1, 1, 1, 1, 0)
    w, w2 = weights(a), weights(moved)
    value = sup_abs_change_lp(w, w2)
    rng = np.random.default_rng(0)
    h = np.concatenate([rng.random((2000, 5)), np.array(list(itertools.product((0, 1), repeat=5)))])
    sampled = np.abs(np.abs(h @ w) - np.abs(h @ w2))
    assert sampled.max() <= value + 1e-12
    # the model h = (1, 1, 1, 0, 0.75) of the hand example moves |SP| by 5/8
    assert value >= 0.625 - 1e-12
    # and the SP reference: accept everyone but the moved person: 1/4 + 1/2
    assert sup_linear(w - w2) == pytest.approx(0.25 + 0.5, rel=REL)


@pytest.mark.parametrize("a", [(0, 1, 0, 1, 1), (1, 0, 0, 1, 0, 1), (0, 0, 1, 0, 0, 0, 1)])
def test_local_sensitivity_is_permutation_invariant(a: Vector) -> None:
    sorted_a = tuple(sorted(a, reverse=True))
    for metric in ("sp", "abs_sp"):
        assert brute_ls(metric, a) == pytest.approx(brute_ls(metric, sorted_a), rel=REL)
    # and without the cache: the raw LPs on the unsorted weights give the same answer
    raw = max(sup_abs_change_lp(weights(a), weights(b)) for b in neighbours(a))
    assert raw == pytest.approx(brute_ls("abs_sp", sorted_a), rel=LP_REL)
    assert local_sensitivity("abs_sp", **sizes(a)) == pytest.approx(raw, rel=LP_REL)


# --------------------------------------------------------------------------------------------
# Library against the brute force
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["sp", "abs_sp"])
@pytest.mark.parametrize("n", SMALL_N)
def test_local_sensitivity_matches_brute_force(metric: str, n: int) -> None:
    for a in universe(n):
        expected = brute_ls(metric, a)
        assert local_sensitivity(metric, **sizes(a)) == pytest.approx(expected, rel=LP_REL)
        assert local_sensitivity(metric, **sizes(a), m=3) == pytest.approx(3 * expected, rel=LP_REL)
        l2 = local_sensitivity(metric, **sizes(a), m=3, norm="l2")
        assert l2 == pytest.approx(math.sqrt(3) * expected, rel=LP_REL)


@pytest.mark.parametrize("metric", ["sp", "abs_sp"])
@pytest.mark.parametrize("beta", BETAS)
def test_smooth_sensitivity_matches_brute_force(metric: str, beta: float) -> None:
    for n in SMALL_N:
        tol = REL if metric == "sp" else LP_REL
        for a, expected in brute_smooth(metric, n, beta).items():
            for func in (smooth_sensitivity, smooth_sensitivity_exact):
                got = func(metric, **sizes(a), beta=beta)
                assert got >= expected * (1 - tol), (func.__name__, a, beta)
                assert got == pytest.approx(expected, rel=tol), (func.__name__, a, beta)
                assert func(metric, **sizes(a), m=4, beta=beta) == pytest.approx(4 * got, rel=REL)


@pytest.mark.parametrize("metric", ["sp", "abs_sp", "eo", "abs_eo"])
@pytest.mark.parametrize("beta", (0.0, 0.01, *BETAS[1:]))
@pytest.mark.parametrize("func", [smooth_sensitivity, smooth_sensitivity_exact])
def test_smooth_bounds_are_beta_smooth(metric: str, beta: float, func: object) -> None:
    assert callable(func)
    bound = math.exp(beta) * (1 + REL)
    for n in SMALL_N:
        for a in universe(n):
            s_a = func(metric, **sizes(a), m=2, beta=beta)
            for b in neighbours(a):
                assert s_a <= bound * func(metric, **sizes(b), m=2, beta=beta), (a, b)
    # larger data sets: neighbours change a group size by one
    for n in (10, 41, 200):
        values = [func(metric, n1=g, n0=n - g, m=2, beta=beta) for g in range(1, n)]
        for left, right in itertools.pairwise(values):
            assert left <= bound * right
            assert right <= bound * left


@pytest.mark.parametrize("metric", ["sp", "abs_sp"])
@pytest.mark.parametrize("n", SMALL_N)
def test_global_sensitivity_matches_brute_force(metric: str, n: int) -> None:
    expected = brute_global(metric, n)
    assert global_sensitivity(metric, n=n) == pytest.approx(expected, rel=LP_REL)
    assert global_sensitivity(metric, n=n, m=7) == pytest.approx(7 * expected, rel=LP_REL)
    l2 = global_sensitivity(metric, n=n, m=7, norm="l2")
    assert l2 == pytest.approx(math.sqrt(7) * expected, rel=LP_REL)


@pytest.mark.parametrize("y", [(1, 0, 1, 0, 1), (1, 1, 0, 1, 1, 0)])
def test_eo_sensitivities_match_brute_force_over_positives(y: Vector) -> None:
    n_pos = sum(y)
    everyone = universe(len(y), y)
    for metric in ("eo", "abs_eo"):
        per_vector = {a: brute_ls(metric, a, y) for a in everyone}
        assert global_sensitivity(metric, n=n_pos) == pytest.approx(
            max(per_vector.values()), rel=LP_REL
        )
        for a, expected in per_vector.items():
            n11 = sum(ai for ai, yi in zip(a, y, strict=True) if yi == 1)
            got = local_sensitivity(metric, n1=n11, n0=n_pos - n11)
            assert got == pytest.approx(expected, rel=LP_REL), a
    # counting everyone instead of the positives would give a different (wrong) number
    assert global_sensitivity("eo", n=len(y)) != pytest.approx(global_sensitivity("eo", n=n_pos))


@pytest.mark.parametrize("metric", ["sp", "abs_sp"])
@pytest.mark.parametrize("n", SMALL_N)
def test_local_sensitivity_at_distance_matches_brute_force(metric: str, n: int) -> None:
    for a in universe(n):
        at_distance = []
        for k in range(n + 2):
            expected = brute_ls_at_distance(metric, a, k)
            got = local_sensitivity_at_distance(metric, **sizes(a), k=k)
            assert got == pytest.approx(expected, rel=LP_REL, abs=0.0), (a, k)
            at_distance.append(got)
            assert local_sensitivity_at_distance(metric, **sizes(a), m=5, k=k) == pytest.approx(
                5 * got, rel=REL
            )
        assert at_distance[0] == pytest.approx(local_sensitivity(metric, **sizes(a)), rel=REL)
        for beta in BETAS:
            expected = max(math.exp(-k * beta) * v for k, v in enumerate(at_distance))
            got = smooth_sensitivity_exact(metric, **sizes(a), beta=beta)
            assert got == pytest.approx(expected, rel=REL)


# --------------------------------------------------------------------------------------------
# The paper's formulas have real flaws
# --------------------------------------------------------------------------------------------


def test_paper_abs_sp_global_sensitivity_is_too_small() -> None:
    # n = 5: true value 5 / (2 * 4) = 0.625 by hand, paper m/2 = 0.5
    assert brute_global("abs_sp", 5) == pytest.approx(0.625, rel=LP_REL)
    assert paper_global_sensitivity("abs_sp", n=5) == 0.5
    for n in SMALL_N:
        assert paper_global_sensitivity("abs_sp", n=n) < brute_global("abs_sp", n) * (1 - 1e-6)
        assert paper_global_sensitivity("abs_sp", n=n, m=3) == 1.5
    # the SP form of the paper is right
    for n in SMALL_N:
        assert paper_global_sensitivity("sp", n=n) == pytest.approx(brute_global("sp", n), rel=REL)


@pytest.mark.parametrize("beta", BETAS)
def test_paper_abs_sp_smooth_sensitivity_is_too_small(beta: float) -> None:
    a = (1, 1, 1, 0, 0)
    true_smooth = brute_smooth("abs_sp", 5, beta)[a]
    assert paper_smooth_sensitivity("abs_sp", **sizes(a), beta=beta) < true_smooth * (1 - 1e-6)
    for n in (4, 6, 7):
        truth = brute_smooth("abs_sp", n, beta)
        assert any(
            paper_smooth_sensitivity("abs_sp", **sizes(b), beta=beta) < s * (1 - 1e-6)
            for b, s in truth.items()
        )


@pytest.mark.parametrize("n", [4, 5, 6, 7, 50])
def test_paper_sp_closed_form_is_not_smooth_at_single_member_group(n: int) -> None:
    beta = 0.1
    one = (1,) * (n - 1) + (0,)
    two = (1,) * (n - 2) + (0, 0)
    assert two in neighbours(one)
    s_one = paper_smooth_sensitivity("sp", **sizes(one), beta=beta)
    s_two = paper_smooth_sensitivity("sp", **sizes(two), beta=beta)
    assert s_one > math.exp(beta) * s_two
    # by hand: the first term at N0 = 1 is 1/n + 1, above the true global sensitivity
    assert s_one == pytest.approx(1.0 / n + 1.0, rel=REL)
    assert s_one > global_sensitivity("sp", n=n)
    if n <= 7:
        assert s_one > brute_global("sp", n)
        # the library's bound at the same data set is the true smooth sensitivity
        expected = brute_smooth("sp", n, beta)[one]
        assert smooth_sensitivity("sp", **sizes(one), beta=beta) == pytest.approx(expected, rel=REL)


def test_hand_example_abs_sp_moves_by_more_than_one_over_n0() -> None:
    a = np.array([1, 1, 1, 0, 0])
    moved = np.array([1, 1, 1, 1, 0])  # the person with h = 0 joins group 1
    h = np.array([1.0, 1.0, 1.0, 0.0, 0.75])
    # by hand: 3/3 - 0.75/2 = 0.625, then 3/4 - 0.75/1 = 0
    assert metrics.statistical_parity(h, protected=a) == pytest.approx(0.625, rel=REL)
    assert metrics.statistical_parity(h, protected=moved) == pytest.approx(0.0, abs=1e-15)
    change = abs(
        metrics.absolute_statistical_parity(h, protected=a)
        - metrics.absolute_statistical_parity(h, protected=moved)
    )
    assert change == pytest.approx(0.625, rel=REL)
    assert change > 1.0 / 2  # the paper's m/N0
    assert paper_smooth_sensitivity("abs_sp", n1=3, n0=2, beta=0.0) == 0.5
    assert local_sensitivity("abs_sp", n1=3, n0=2) >= change * (1 - REL)
    # binary models reach past 1/2 too: accept one person of group 1 and the unmoved one of group 0
    hb = np.array([1.0, 0.0, 0.0, 0.0, 1.0])
    # by hand: 1/3 - 1/2 = -1/6, then 1/4 - 1 = -3/4: |SP| moves by 7/12
    binary_change = abs(
        metrics.absolute_statistical_parity(hb, protected=a)
        - metrics.absolute_statistical_parity(hb, protected=moved)
    )
    assert binary_change == pytest.approx(7.0 / 12.0, rel=REL)
    assert local_sensitivity("abs_sp", n1=3, n0=2) >= binary_change


# --------------------------------------------------------------------------------------------
# Closed forms against hand calculations
# --------------------------------------------------------------------------------------------


def test_global_sensitivity_closed_forms() -> None:
    assert global_sensitivity("sp", n=100, m=25) == pytest.approx(12.5 + 25 / 99, rel=REL)
    assert global_sensitivity("eo", n=100, m=25) == pytest.approx(12.5 + 25 / 99, rel=REL)
    assert global_sensitivity("abs_sp", n=100, m=25) == pytest.approx(25 * 100 / 198, rel=REL)
    assert global_sensitivity("abs_eo", n=100, m=25) == pytest.approx(12.5 + 12.5 / 99, rel=REL)
    l2 = global_sensitivity("sp", n=100, m=25, norm="l2")
    assert l2 == pytest.approx(5 * (0.5 + 1 / 99), rel=REL)
    assert global_sensitivity("sp", n=3) == pytest.approx(1.0, rel=REL)
    assert global_sensitivity("abs_sp", n=3) == pytest.approx(0.75, rel=REL)
    assert paper_global_sensitivity("sp", n=100, m=25) == pytest.approx(12.5 + 25 / 99, rel=REL)


@pytest.mark.parametrize(
    ("n1", "n0", "m", "expected"),
    [
        (900, 100, 300, 300 / 901 + 300 / 100),
        (3, 2, 1, 1 / 4 + 1 / 2),
        (2, 3, 1, 1 / 4 + 1 / 2),  # N0 is the smaller group, whichever label it has
        (10, 10, 2, 2 / 11 + 2 / 10),
        (9, 1, 1, 1 / 2 + 1 / 9),  # smaller group of one: only the larger one can give someone
        (1, 9, 4, 4 * (1 / 2 + 1 / 9)),
    ],
)
def test_lemma5_local_sensitivity(n1: int, n0: int, m: int, expected: float) -> None:
    n = n1 + n0
    assert local_sensitivity("sp", n1=n1, n0=n0, m=m) == pytest.approx(expected, rel=REL)
    assert local_sensitivity("eo", n1=n1, n0=n0, m=m) == pytest.approx(expected, rel=REL)
    absolute = local_sensitivity("abs_sp", n1=n1, n0=n0, m=m)
    assert absolute == pytest.approx(n / (n + 1) * expected, rel=REL)


@pytest.mark.parametrize(
    ("n1", "n0", "m", "beta"),
    [
        (900, 100, 300, 5 / (6 * 300)),
        (50, 3, 1, 2.0),
        (20, 20, 5, 0.1),
        (4, 2, 1, 0.7),
        (7, 30, 2, 0.01),
    ],
)
def test_theorem6_closed_form(n1: int, n0: int, m: int, beta: float) -> None:
    n = n1 + n0
    small, large = min(n1, n0), max(n1, n0)
    theorem6 = max(
        m / (large + 1) + m / small, math.exp(-(small - 2) * beta) * (m / (n - 1) + m / 2)
    )
    assert smooth_sensitivity("sp", n1=n1, n0=n0, m=m, beta=beta) == pytest.approx(
        theorem6, rel=REL
    )
    assert paper_smooth_sensitivity("sp", n1=n1, n0=n0, m=m, beta=beta) == pytest.approx(
        theorem6, rel=REL
    )
    assert smooth_sensitivity_exact("sp", n1=n1, n0=n0, m=m, beta=beta) == pytest.approx(
        theorem6, rel=REL
    )
    assert smooth_sensitivity("abs_sp", n1=n1, n0=n0, m=m, beta=beta) == pytest.approx(
        n / (n + 1) * theorem6, rel=REL
    )


def test_theorem6_worked_example_by_hand() -> None:
    # N1 = 900, N0 = 100, m = 300, beta = 1/360: second term 150.3003... * e^{-98/360}
    beta = 5 / (6 * 300)
    second = (300 / 999 + 150) * math.exp(-98 / 360)
    assert second > 300 / 901 + 3
    assert smooth_sensitivity("sp", n1=900, n0=100, m=300, beta=beta) == pytest.approx(
        second, rel=REL
    )


def test_eo_uses_the_count_of_positive_labels() -> None:
    labels = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0])
    n_pos = int(labels.sum())  # 6
    assert n_pos == 6
    assert global_sensitivity("eo", n=n_pos, m=2) == pytest.approx(2 * (0.5 + 1 / 5), rel=REL)
    assert global_sensitivity("abs_eo", n=n_pos, m=2) == pytest.approx(2 * 6 / 10, rel=REL)
    # N11 = 4, N10 = 2 among positives
    assert local_sensitivity("eo", n1=4, n0=2) == pytest.approx(1 / 5 + 1 / 2, rel=REL)


# --------------------------------------------------------------------------------------------
# Smoothing parameters
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("m", [1, 2, 25, 300])
def test_attribute_conceal_beta(eps: float, m: int) -> None:
    assert attribute_conceal_beta(eps, m) == pytest.approx(eps / (6 * m), rel=REL)


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 0.99, 1.0, 2.0, 10.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-2, 0.5])
@pytest.mark.parametrize("m", [1, 2, 10, 100, 1000])
def test_smooth_laplace_beta_is_admissible(eps: float, delta: float, m: int) -> None:
    beta = smooth_laplace_beta(eps, delta, m)
    rho = float(stats.gamma.isf(delta / 2, m))
    first = m * beta
    second = math.expm1(beta) * rho
    assert beta > 0
    assert first <= eps / 2 * (1 + REL)
    assert second <= eps / 2 * (1 + REL)
    assert math.isclose(first, eps / 2, rel_tol=1e-9) or math.isclose(second, eps / 2, rel_tol=1e-9)
    if eps < 1:
        assert beta >= eps / (4 * (m + math.log(2 / delta)))


def test_smooth_laplace_beta_by_hand_for_one_model() -> None:
    # ||Z||_1 ~ Exp(1) for m = 1, whose 1 - delta/2 quantile is ln(2/delta)
    eps, delta = 1.0, 1e-6
    rho = math.log(2 / delta)
    expected = min(math.log1p(eps / (2 * rho)), eps / 2)
    assert smooth_laplace_beta(eps, delta, 1) == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(math.log1p(1 / (2 * 14.508657738524219)), rel=1e-12)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------

DEFAULTS: dict[object, dict[str, object]] = {
    global_sensitivity: {"metric": "sp", "n": 10, "m": 2, "norm": "l1"},
    paper_global_sensitivity: {"metric": "sp", "n": 10, "m": 2},
    local_sensitivity: {"metric": "sp", "n1": 6, "n0": 4, "m": 2, "norm": "l1"},
    local_sensitivity_at_distance: {"metric": "sp", "n1": 6, "n0": 4, "m": 2, "k": 1},
    smooth_sensitivity: {"metric": "sp", "n1": 6, "n0": 4, "m": 2, "beta": 0.1},
    smooth_sensitivity_exact: {"metric": "sp", "n1": 6, "n0": 4, "m": 2, "beta": 0.1},
    paper_smooth_sensitivity: {"metric": "sp", "n1": 6, "n0": 4, "m": 2, "beta": 0.1},
    attribute_conceal_beta: {"epsilon": 1.0, "m": 2},
    smooth_laplace_beta: {"epsilon": 1.0, "delta": 1e-6, "m": 2},
}

BAD_INPUTS: list[tuple[dict[str, object], str]] = [
    ({"metric": "abs-sp"}, r"metric must be one of .*did you mean 'abs_sp'"),
    ({"metric": "abs_SP"}, r"metric must be one of .*did you mean 'abs_sp'"),
    ({"metric": "demographic"}, r"metric must be one of"),
    ({"metric": 3}, r"metric must be one of"),
    ({"n": 2}, r"\bn must be"),
    ({"n": 0}, r"\bn must be"),
    ({"n": 4.5}, r"\bn must be"),
    ({"n1": 0}, r"\bn1 must be"),
    ({"n0": 0}, r"\bn0 must be"),
    ({"n1": 1, "n0": 1}, r"n1 and n0 must"),
    ({"n1": 2.5}, r"\bn1 must be"),
    ({"m": 0}, r"\bm must be an integer"),
    ({"m": 2.5}, r"\bm must be an integer"),
    ({"m": True}, r"\bm must be an integer"),
    ({"m": "2"}, r"\bm must be an integer"),
    ({"beta": -0.1}, r"beta must be a finite number >= 0"),
    ({"beta": math.nan}, r"beta must be a finite number >= 0"),
    ({"beta": math.inf}, r"beta must be a finite number >= 0"),
    ({"epsilon": 0.0}, r"epsilon must be a number > 0"),
    ({"epsilon": -1.0}, r"epsilon must be a number > 0"),
    ({"epsilon": math.nan}, r"epsilon must be a number > 0"),
    ({"epsilon": math.inf}, r"epsilon must be a number > 0"),
    ({"delta": 0.0}, r"delta must lie in the open interval"),
    ({"delta": 1.0}, r"delta must lie in the open interval"),
    ({"delta": -0.1}, r"delta must lie in the open interval"),
    ({"delta": math.nan}, r"delta must lie in the open interval"),
    ({"norm": "l3"}, r"norm must be one of"),
    ({"norm": "linf"}, r"norm must be one of"),
    ({"k": -1}, r"\bk must be an integer"),
]

BAD_CASES = [
    pytest.param(
        func, override, match, id=f"{func.__name__}-{'-'.join(map(str, override.items()))}"
    )
    for func, defaults in DEFAULTS.items()
    for override, match in BAD_INPUTS
    if set(override) <= set(defaults) and callable(func)
]


@pytest.mark.parametrize(("func", "override", "match"), BAD_CASES)
def test_bad_input_is_refused_naming_the_argument(
    func: object, override: dict[str, object], match: str
) -> None:
    assert callable(func)
    kwargs = {**DEFAULTS[func], **override}
    func(**DEFAULTS[func])  # the defaults themselves are fine
    with pytest.raises(ValueError, match=match):
        func(**kwargs)


def test_every_public_function_has_bad_input_cases() -> None:
    from biasleak.mechanisms import sensitivity

    public = {name for name in sensitivity.__all__ if callable(getattr(sensitivity, name))}
    assert public == {getattr(f, "__name__", "") for f in DEFAULTS}
    covered = {case.values[0] for case in BAD_CASES}
    assert covered == set(DEFAULTS)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@st.composite
def group_sizes(draw: st.DrawFn, max_size: int = 3000) -> tuple[int, int]:
    n1 = draw(st.integers(1, max_size))
    n0 = draw(st.integers(2 if n1 == 1 else 1, max_size))
    return n1, n0


BETA = st.floats(0.0, 20.0, allow_nan=False, allow_infinity=False)
METRIC = st.sampled_from(["sp", "abs_sp", "eo", "abs_eo"])
PROPERTY = settings(max_examples=100, deadline=None)


@PROPERTY
@given(group_sizes(), st.integers(1, 1000), BETA, METRIC)
def test_local_le_smooth_le_global(size: tuple[int, int], m: int, beta: float, metric: str) -> None:
    n1, n0 = size
    local = local_sensitivity(metric, n1=n1, n0=n0, m=m)
    smooth = smooth_sensitivity(metric, n1=n1, n0=n0, m=m, beta=beta)
    glob = global_sensitivity(metric, n=n1 + n0, m=m)
    assert local <= smooth * (1 + REL)
    assert smooth <= glob * (1 + REL)


@PROPERTY
@given(group_sizes(), st.integers(1, 1000), BETA, BETA, METRIC)
def test_smooth_is_non_increasing_in_beta(
    size: tuple[int, int], m: int, b1: float, b2: float, metric: str
) -> None:
    lo, hi = sorted((b1, b2))
    n1, n0 = size
    assert smooth_sensitivity(metric, n1=n1, n0=n0, m=m, beta=hi) <= smooth_sensitivity(
        metric, n1=n1, n0=n0, m=m, beta=lo
    ) * (1 + REL)


@PROPERTY
@given(group_sizes(), st.integers(1, 1000), BETA)
def test_abs_smooth_is_scaled_sp_smooth(size: tuple[int, int], m: int, beta: float) -> None:
    n1, n0 = size
    n = n1 + n0
    for signed, absolute in (("sp", "abs_sp"), ("eo", "abs_eo")):
        s = smooth_sensitivity(signed, n1=n1, n0=n0, m=m, beta=beta)
        s_abs = smooth_sensitivity(absolute, n1=n1, n0=n0, m=m, beta=beta)
        assert s_abs == pytest.approx(n / (n + 1) * s, rel=REL)


@PROPERTY
@given(group_sizes(), st.integers(1, 1000), st.one_of(BETA, st.floats(0.0, 0.01)), METRIC)
def test_smooth_equals_exact(size: tuple[int, int], m: int, beta: float, metric: str) -> None:
    n1, n0 = size
    closed = smooth_sensitivity(metric, n1=n1, n0=n0, m=m, beta=beta)
    exact = smooth_sensitivity_exact(metric, n1=n1, n0=n0, m=m, beta=beta)
    assert closed == pytest.approx(exact, rel=REL)
