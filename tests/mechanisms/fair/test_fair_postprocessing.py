"""DP post-processing for equalized odds: the table, its noise, the LP, the derived classifier.

References used here, never numbers printed by the library: brute-force counts and sensitivities
on small data sets, the KKT conditions of the simplex projection, fairlearn's
``ThresholdOptimizer(constraints="equalized_odds")`` on the same 0/1 base predictions (an
independent implementation of Hardt et al.'s post-processing), fairlearn's
``equalized_odds_difference``, and the Laplace law's mean and mean absolute deviation. The DP
check draws many releases on two audit sets that differ in one person's attribute.
"""

from __future__ import annotations

import importlib
import itertools
import math
from dataclasses import fields

import numpy as np
import pytest
from numpy.typing import NDArray

from biasleak.mechanisms import fair
from biasleak.mechanisms.fair import _groups
from biasleak.mechanisms.fair import postprocessing as pp

INF = math.inf

# --------------------------------------------------------------------------------------------
# Data


def synthetic(seed: int, n: int = 3000, n0: int = 900) -> dict[str, NDArray]:
    """Audit set and disjoint held-out people with a 0/1 base model that favours group 1."""
    from biasleak.sim.datasets import make_synthetic

    d = make_synthetic(n=n, n0=n0, group_shift=1.0, seed=seed, train_size=20_000)
    x = np.asarray(d.public.audit.features, dtype=np.float64)
    xt = np.asarray(d.public.train.features, dtype=np.float64)
    return {
        "yhat": (x.sum(axis=1) > 0.3).astype(np.int64),
        "y": d.public.audit.labels.astype(np.int64),
        "a": d.protected.astype(np.int64),
        "yhat_t": (xt.sum(axis=1) > 0.3).astype(np.int64),
        "y_t": d.public.train.labels.astype(np.int64),
        "a_t": d.train_protected.astype(np.int64),
    }


def brute_counts(yhat, a, y, g: int = 2) -> NDArray[np.int64]:
    c = np.zeros((2, g, 2), dtype=np.int64)
    for i in range(len(yhat)):
        c[yhat[i], a[i], y[i]] += 1
    return c


# --------------------------------------------------------------------------------------------
# 1. The table and its sensitivity


def test_count_table_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    for g in (2, 3):
        yhat, a, y = rng.integers(0, 2, 200), rng.integers(0, g, 200), rng.integers(0, 2, 200)
        got = fair.count_table(yhat, protected=a, labels=y, n_groups=g)
        np.testing.assert_array_equal(got, brute_counts(yhat, a, y, g))


def test_one_attribute_change_moves_the_table_by_two_over_m() -> None:
    rng = np.random.default_rng(1)
    m = 30
    yhat, a, y = rng.integers(0, 2, m), rng.integers(0, 2, m), rng.integers(0, 2, m)
    base = fair.count_table(yhat, protected=a, labels=y)
    for i in range(m):  # every neighbour: person i's attribute flipped, X and Y shared
        a2 = a.copy()
        a2[i] = 1 - a2[i]
        other = fair.count_table(yhat, protected=a2, labels=y)
        assert np.abs(base - other).sum() == pp.COUNT_SENSITIVITY
    assert pp.table_noise_scale(m, 0.5) == pytest.approx(2.0 / (m * 0.5))
    assert pp.table_noise_scale(m, INF) == 0.0


# --------------------------------------------------------------------------------------------
# 2. The noise: centred, of scale 2/(m eps), floating-point safe


def noise_draws(counts: NDArray[np.int64], eps: float, k: int, seed: int) -> NDArray:
    rng = np.random.default_rng(seed)
    return np.array([fair.release_table(counts, epsilon=eps, rng=rng) for _ in range(k)])


def centred_and_scaled(noise: NDArray, scale: float, z: float = 5.0) -> tuple[bool, bool]:
    """(mean of every cell within z standard errors of 0, mean |noise| within z se of scale).

    Laplace(0, b): sd sqrt(2) b, E|Z| = b, sd of |Z| = b.
    """
    k = noise.shape[0]
    centred = bool(np.all(np.abs(noise.mean(axis=0)) <= z * math.sqrt(2.0) * scale / math.sqrt(k)))
    mad = float(np.mean(np.abs(noise)))
    scaled = abs(mad - scale) <= z * scale / math.sqrt(noise.size)
    return centred, scaled


def test_noise_is_centred_with_scale_two_over_m_eps() -> None:
    rng = np.random.default_rng(2)
    m, eps, k = 500, 1.0, 2000
    counts = fair.count_table(
        rng.integers(0, 2, m), protected=rng.integers(0, 2, m), labels=rng.integers(0, 2, m)
    )
    exact = counts / m
    noise = noise_draws(counts, eps, k, seed=3) - exact
    scale = 2.0 / (m * eps)
    assert centred_and_scaled(noise, scale) == (True, True)
    # The check can fail: the authors' public code passed the scale as numpy's MEAN (loc)
    # argument, and a per-cell sensitivity of 1/m halves the scale.
    loc_bug = np.random.default_rng(4).laplace(scale, 1.0 / m, size=noise.shape)
    assert not centred_and_scaled(loc_bug, scale)[0]
    half = np.random.default_rng(5).laplace(0.0, scale / 2, size=noise.shape)
    assert centred_and_scaled(half, scale) == (True, False)


def test_release_is_on_a_power_of_two_grid_and_exact_at_infinity() -> None:
    counts = np.array([[[5, 7], [1, 0]], [[3, 9], [2, 4]]])
    m = int(counts.sum())
    noisy = fair.release_table(counts, epsilon=0.7, rng=np.random.default_rng(6)) * m
    # every released count is an integer multiple of a power-of-two grid step (here <= 2^-20
    # of the scale, so far above 2^-40); continuous noise in doubles would not be
    scaled = noisy * 2.0**40
    np.testing.assert_array_equal(scaled, np.round(scaled))
    assert not np.array_equal(noisy, counts)
    naive = counts + np.random.default_rng(6).laplace(0.0, 2 / 0.7, counts.shape)
    assert not np.array_equal(naive * 2.0**40, np.round(naive * 2.0**40))
    exact = fair.release_table(counts, epsilon=INF, rng=np.random.default_rng(6))
    np.testing.assert_array_equal(exact, counts / m)


def test_release_is_reproducible_by_seed() -> None:
    counts = np.array([[[5, 7], [1, 0]], [[3, 9], [2, 4]]])
    one = fair.release_table(counts, epsilon=1.0, rng=np.random.default_rng(7))
    two = fair.release_table(counts, epsilon=1.0, rng=np.random.default_rng(7))
    other = fair.release_table(counts, epsilon=1.0, rng=np.random.default_rng(8))
    np.testing.assert_array_equal(one, two)
    assert not np.array_equal(one, other)


# --------------------------------------------------------------------------------------------
# 3. Statistical DP check on neighbouring audit sets
#
# Output sets T: intervals (t_i, t_j] between points of a fixed grid extended by -inf and +inf,
# of the statistic D = m (Q[src] - Q[dst]) where src and dst are the two cells the flipped person
# moves between (D is a function of the output, so {D in T} is an output event; it carries the
# whole privacy loss, e^eps at the sharpest), and of the single cell Q[src]. We require in both
# directions P_hat[M(S) in T] - e^eps P_hat[M(S') in T] <= Z se with Z = 6 standard errors
# (add-one smoothing as in test_release.py); each set has a one-sided normal tail near 1e-9, so
# over the ~2,500 correlated sets the false-alarm probability is below 1e-5 (and the seeds are
# fixed). An under-noised twin (per-cell sensitivity 1/m, scale 1/(m eps)) must exceed Z.

Z = 6.0


def worst_excess(x: NDArray, y: NDArray, eps: float, grid: NDArray) -> float:
    edges = np.concatenate([[-np.inf], np.sort(grid), [np.inf]])
    i, j = np.triu_indices(edges.size, k=1)
    fx = np.searchsorted(np.sort(x), edges, side="right") / x.size
    fy = np.searchsorted(np.sort(y), edges, side="right") / y.size
    px, py = fx[j] - fx[i], fy[j] - fy[i]
    worst = -np.inf
    for p, q, n_p, n_q in ((px, py, x.size, y.size), (py, px, y.size, x.size)):
        pt, qt = (p * n_p + 1) / (n_p + 2), (q * n_q + 1) / (n_q + 2)
        se = np.sqrt(pt * (1 - pt) / n_p + math.exp(2 * eps) * qt * (1 - qt) / n_q)
        worst = max(worst, float(np.max((p - math.exp(eps) * q) / se)))
    return worst


@pytest.mark.slow
def test_table_release_is_eps_dp_on_neighbours() -> None:
    rng = np.random.default_rng(9)
    m, eps, n = 40, 1.0, 10_000
    yhat, y, a = rng.integers(0, 2, m), rng.integers(0, 2, m), rng.integers(0, 2, m)
    a2 = a.copy()
    a2[0] = 1 - a2[0]
    c, c2 = (fair.count_table(yhat, protected=p, labels=y) for p in (a, a2))
    src, dst = (yhat[0], a[0], y[0]), (yhat[0], a2[0], y[0])
    assert c[src] - c2[src] == 1 and c2[dst] - c[dst] == 1

    def stats(tables: NDArray) -> tuple[NDArray, NDArray]:
        q = tables * m
        return q[:, src[0], src[1], src[2]] - q[:, dst[0], dst[1], dst[2]], q[:, *src]

    x_diff, x_src = stats(noise_draws(c, eps, n, seed=10))
    y_diff, y_src = stats(noise_draws(c2, eps, n, seed=11))
    diff_grid = np.linspace(-12.0, 12.0, 49) + (c[src] - c[dst])
    src_grid = np.linspace(-8.0, 8.0, 33) + c[src]
    assert worst_excess(x_diff, y_diff, eps, diff_grid) <= Z
    assert worst_excess(x_src, y_src, eps, src_grid) <= Z
    # sharp: the difference statistic reaches a ratio near e^eps in its tails
    t = diff_grid[diff_grid > c[src] - c[dst] + 1]
    tail_x = np.mean(x_diff[:, None] > t, axis=0)
    tail_y = np.mean(y_diff[:, None] > t, axis=0)
    keep = tail_y * n >= 500
    assert np.max(tail_x[keep] / tail_y[keep]) > math.exp(0.8 * eps)
    # under-noised twin: scale 1/(m eps), as if one person changed one cell only
    twin = np.random.default_rng(12)
    bad_x = stats((c + twin.laplace(0.0, 1.0 / eps, (n, *c.shape))) / m)[0]
    bad_y = stats((c2 + twin.laplace(0.0, 1.0 / eps, (n, *c.shape))) / m)[0]
    assert worst_excess(bad_x, bad_y, eps, diff_grid) > Z


# --------------------------------------------------------------------------------------------
# 4. Projection and the LP


@pytest.mark.parametrize("seed", range(5))
def test_projection_meets_the_kkt_conditions(seed: int) -> None:
    t = np.random.default_rng(seed).normal(0.1, 0.2, size=(2, 2, 2))
    r = fair.project_to_simplex(t)
    assert r.shape == t.shape and np.all(r >= 0) and r.sum() == pytest.approx(1.0)
    # argmin ||r - t||^2 on the simplex  <=>  t - r = theta where r > 0, t - theta <= 0 where r = 0
    theta = np.mean((t - r)[r > 0])
    np.testing.assert_allclose((t - r)[r > 0], theta, atol=1e-12)
    assert np.all(t[r == 0] <= theta + 1e-12)


def test_projection_keeps_a_valid_table() -> None:
    t = np.array([[[0.1, 0.2], [0.05, 0.15]], [[0.2, 0.1], [0.0, 0.2]]])
    np.testing.assert_allclose(fair.project_to_simplex(t), t, atol=1e-15)


def audit_probabilities(res: fair.PostProcessing, d: dict[str, NDArray]) -> NDArray:
    return fair.derived_probabilities(res.mixing, d["yhat"], protected=d["a"])


def test_lp_equalizes_odds_on_the_audit_set_at_infinite_epsilon() -> None:
    d = synthetic(0)
    base = fair.score(d["y"], d["yhat"], protected=d["a"])
    res = fair.dp_postprocess(
        d["yhat"], protected=d["a"], labels=d["y"], epsilon=INF, rng=np.random.default_rng(0)
    )
    got = fair.score(d["y"], audit_probabilities(res, d), protected=d["a"])
    assert base.eo_violation > 0.1
    assert got.eo_violation < 1e-9
    assert got.error == pytest.approx(res.estimated_error, abs=1e-12)
    assert res.disparate_treatment
    np.testing.assert_allclose(
        res.derived_rates, np.repeat(res.derived_rates[:, :1], 2, axis=1), atol=1e-9
    )


def test_gamma_relaxes_the_constraint_and_never_costs_accuracy() -> None:
    d = synthetic(1)
    errors = []
    for gamma in (0.0, 0.02, 0.05, 0.1, 1.0):
        res = fair.dp_postprocess(
            d["yhat"],
            protected=d["a"],
            labels=d["y"],
            epsilon=INF,
            rng=np.random.default_rng(0),
            gamma=gamma,
        )
        got = fair.score(d["y"], audit_probabilities(res, d), protected=d["a"])
        assert got.eo_violation <= gamma + 1e-9
        errors.append(got.error)
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(errors))
    # gamma = 1 leaves the rates free: each (yhat, a) cell answers its majority label
    q = brute_counts(d["yhat"], d["a"], d["y"]) / len(d["y"])
    assert errors[-1] == pytest.approx(np.minimum(q[..., 0], q[..., 1]).sum(), abs=1e-12)


def test_an_already_fair_base_needs_no_attribute() -> None:
    yhat = np.array([1, 1, 0, 0, 1, 0, 1, 0] * 10)
    y = np.array([1, 1, 1, 0, 0, 0, 1, 0] * 10)
    a = np.repeat([0, 1], 40)  # both groups see the same (yhat, y) pattern
    res = fair.dp_postprocess(
        yhat, protected=a, labels=y, epsilon=INF, rng=np.random.default_rng(0)
    )
    np.testing.assert_allclose(res.mixing, [[0.0, 0.0], [1.0, 1.0]], atol=1e-9)
    assert not res.disparate_treatment


def test_empty_group_gets_coin_flip_rates_and_is_not_refused() -> None:
    yhat, y = np.array([0, 1, 1, 0, 1]), np.array([0, 1, 0, 0, 1])
    counts = fair.count_table(yhat, protected=np.zeros(5, dtype=int), labels=y)
    q = fair.conditional_rates(counts / 5)
    np.testing.assert_array_equal(q[:, 1], [0.5, 0.5])
    assert q[0, 0] == pytest.approx(1 / 3) and q[1, 0] == pytest.approx(1.0)
    p, _ = fair.solve_equalized_odds(counts / 5)
    assert p.shape == (2, 2)


def test_result_holds_public_facts_only() -> None:
    d = synthetic(2)
    res = fair.dp_postprocess(
        d["yhat"], protected=d["a"], labels=d["y"], epsilon=1.0, rng=np.random.default_rng(1)
    )
    names = {f.name for f in fields(res)}
    assert names == {
        "mixing",
        "noisy_table",
        "table",
        "epsilon",
        "gamma",
        "m",
        "noise_scale",
        "estimated_error",
    }
    exact = brute_counts(d["yhat"], d["a"], d["y"]) / len(d["y"])
    assert not np.array_equal(res.noisy_table, exact)
    np.testing.assert_allclose(res.noisy_table, exact, atol=20 * res.noise_scale)
    assert res.m == 3000 and res.noise_scale == pytest.approx(2.0 / 3000)
    assert res.epsilon == 1.0
    np.testing.assert_allclose(res.table, fair.project_to_simplex(res.noisy_table))


# --------------------------------------------------------------------------------------------
# 5. Against fairlearn's ThresholdOptimizer, at eps = inf, on held-out people
#
# fairlearn intersects the groups' ROC hulls on a grid of 1,000 false-positive rates, the LP
# solves exactly, so their mixing probabilities agree to about 1e-3 and the held-out error and
# violation (expected, from the probabilities) to well within TOLERANCE.

TOLERANCE = 5e-3


def fairlearn_probabilities(d: dict[str, NDArray]) -> NDArray[np.float64]:
    postprocessing = importlib.import_module("fairlearn.postprocessing")  # in the test extra
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Passthrough(ClassifierMixin, BaseEstimator):
        """A prefit 'model' whose prediction is its only feature: the 0/1 base prediction."""

        def fit(self, x: NDArray, y: NDArray) -> Passthrough:
            return self

        def predict(self, x: NDArray) -> NDArray:
            return np.asarray(x)[:, 0]

        def __sklearn_is_fitted__(self) -> bool:
            return True

    opt = postprocessing.ThresholdOptimizer(
        estimator=Passthrough(),
        constraints="equalized_odds",
        prefit=True,
        predict_method="predict",
    )
    opt.fit(d["yhat"][:, None].astype(float), d["y"], sensitive_features=d["a"])
    held = d["yhat_t"][:, None].astype(float)
    return np.asarray(opt._pmf_predict(held, sensitive_features=d["a_t"])[:, 1])


def assert_matches_fairlearn(d: dict[str, NDArray]) -> None:
    res = fair.dp_postprocess(
        d["yhat"], protected=d["a"], labels=d["y"], epsilon=INF, rng=np.random.default_rng(0)
    )
    ours = fair.derived_probabilities(res.mixing, d["yhat_t"], protected=d["a_t"])
    theirs = fairlearn_probabilities(d)
    s_ours = fair.score(d["y_t"], ours, protected=d["a_t"])
    s_theirs = fair.score(d["y_t"], theirs, protected=d["a_t"])
    assert s_ours.error == pytest.approx(s_theirs.error, abs=TOLERANCE)
    assert s_ours.eo_violation == pytest.approx(s_theirs.eo_violation, abs=TOLERANCE)
    # the same mixing probabilities, read off fairlearn's per-cell predictions
    for yh in (0, 1):
        for g in (0, 1):
            cell = (d["yhat_t"] == yh) & (d["a_t"] == g)
            assert np.mean(theirs[cell]) == pytest.approx(res.mixing[yh, g], abs=TOLERANCE)
    base = fair.score(d["y_t"], d["yhat_t"], protected=d["a_t"])
    assert s_ours.eo_violation < base.eo_violation  # the comparison is not vacuous


@pytest.mark.parametrize("seed", range(3))
def test_matches_fairlearn_threshold_optimizer_on_synthetic_data(seed: int) -> None:
    assert_matches_fairlearn(synthetic(seed))


def test_matches_fairlearn_threshold_optimizer_on_adult() -> None:
    from biasleak.agents.models import train_base_model
    from biasleak.agents.public import PublicView
    from biasleak.sim.datasets import load_adult

    data = load_adult(protected="sex", n=4000, seed=0)
    train = data.public.train
    pick = np.random.default_rng(0).choice(len(train), 6000, replace=False)
    fit, held = pick[:3000], pick[3000:]  # the base model's people, the held-out people

    def view(rows: NDArray) -> PublicView:
        return PublicView(
            train.features[rows], train.labels[rows], train.columns, train.categorical
        )

    model = train_base_model(view(fit))
    d = {
        "yhat": (model.predict_proba(data.public.audit) >= 0.5).astype(np.int64),
        "y": data.public.audit.labels.astype(np.int64),
        "a": data.protected.astype(np.int64),
        "yhat_t": (model.predict_proba(view(held)) >= 0.5).astype(np.int64),
        "y_t": train.labels[held].astype(np.int64),
        "a_t": data.train_protected[held].astype(np.int64),
    }
    assert_matches_fairlearn(d)


def test_score_matches_fairlearn_equalized_odds_difference() -> None:
    metrics = importlib.import_module("fairlearn.metrics")  # in the test extra
    rng = np.random.default_rng(13)
    y, a, h = rng.integers(0, 2, 500), rng.integers(0, 2, 500), rng.integers(0, 2, 500)
    got = fair.equalized_odds_violation(y, h, protected=a)
    want = metrics.equalized_odds_difference(y, h, sensitive_features=a)
    assert got == pytest.approx(want, abs=1e-12)
    assert fair.error_rate(y, h) == pytest.approx(np.mean(y != h))


# --------------------------------------------------------------------------------------------
# 6. Convergence: as eps grows, error and violation approach those at eps = inf


def test_error_and_violation_converge_to_the_non_private_ones() -> None:
    d = synthetic(3, n=1000, n0=300)

    def held_out(eps: float, seed: int) -> tuple[float, float]:
        res = fair.dp_postprocess(
            d["yhat"], protected=d["a"], labels=d["y"], epsilon=eps, rng=np.random.default_rng(seed)
        )
        prob = fair.derived_probabilities(res.mixing, d["yhat_t"], protected=d["a_t"])
        s = fair.score(d["y_t"], prob, protected=d["a_t"])
        return s.error, s.eo_violation

    ref = np.array(held_out(INF, 0))
    gaps = []
    for eps in (0.1, 1.0, 10.0, 100.0):
        runs = np.array([held_out(eps, seed) for seed in range(20)])
        gaps.append(np.mean(np.abs(runs - ref), axis=0))  # (error gap, violation gap)
    gaps_ = np.array(gaps)
    assert np.all(np.diff(gaps_, axis=0) < 0), gaps_
    assert np.all(gaps_[-1] < 1e-3) and np.all(gaps_[0] > 5e-3), gaps_


# --------------------------------------------------------------------------------------------
# 7. The derived classifier and bad input


def test_derived_predictions_follow_the_probabilities() -> None:
    mixing = np.array([[0.1, 0.3], [0.8, 1.0]])
    yhat = np.tile([0, 0, 1, 1], 20_000)
    a = np.tile([0, 1, 0, 1], 20_000)
    draw = fair.derived_predictions(mixing, yhat, protected=a, rng=np.random.default_rng(14))
    for yh in (0, 1):
        for g in (0, 1):
            cell = draw[(yhat == yh) & (a == g)]
            p = mixing[yh, g]
            assert abs(cell.mean() - p) <= 5 * math.sqrt(p * (1 - p) / cell.size) + 1e-12
    again = fair.derived_predictions(mixing, yhat, protected=a, rng=np.random.default_rng(14))
    np.testing.assert_array_equal(draw, again)
    np.testing.assert_array_equal(
        fair.derived_probabilities(mixing, [0, 1, 1], protected=[1, 0, 1]), [0.3, 0.8, 1.0]
    )


def test_bad_input_is_refused_with_named_messages() -> None:
    y, a = np.array([0, 1, 1, 0]), np.array([0, 1, 0, 1])
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="base_predictions must contain only 0 and 1"):
        fair.dp_postprocess([0.2, 1, 0, 1], protected=a, labels=y, epsilon=1.0, rng=rng)
    with pytest.raises(ValueError, match=r"group indices 0\.\.1"):
        fair.count_table([0, 1, 0, 1], protected=[0, 2, 0, 1], labels=y)
    with pytest.raises(ValueError, match="one entry per person"):
        fair.count_table([0, 1, 0], protected=a, labels=y)
    for eps in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="epsilon must be a number > 0"):
            fair.dp_postprocess([0, 1, 0, 1], protected=a, labels=y, epsilon=eps, rng=rng)
    with pytest.raises(ValueError, match="gamma"):
        fair.solve_equalized_odds(np.full((2, 2, 2), 0.125), gamma=-0.1)
    with pytest.raises(ValueError, match="shape"):
        fair.solve_equalized_odds(np.full((2, 2), 0.25))
    with pytest.raises(ValueError, match="project a noisy table first"):
        fair.conditional_rates(np.full((2, 2, 2), 0.125) - 0.2)
    with pytest.raises(ValueError, match="mixing must have shape"):
        fair.derived_probabilities([[0.5, 1.5], [0, 1]], [0, 1], protected=[0, 1])
    with pytest.raises(ValueError, match="Generator"):
        fair.derived_predictions([[0, 0], [1, 1]], [0, 1], protected=[0, 1], rng=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="label 1"):
        fair.score([0, 0, 1, 1], [0, 1, 0, 1], protected=[0, 1, 0, 0])
    assert _groups.NOT_ZERO_ONE.startswith("{name} must contain only 0 and 1")
