"""The DP oracle learner: its game, its sensitivities, its noise and its privacy split.

References are computed independently of :mod:`biasleak.mechanisms.fair.oracle`: fairlearn's
``ExponentiatedGradient`` for the non-private game, brute force over every neighbouring data set
for the sensitivities, :mod:`biasleak.mechanisms.accounting` (the DRV formula and the exact
the exact composition of randomised response) for the privacy split.
"""

from __future__ import annotations

import importlib
import math
import re
import warnings

import numpy as np
import pytest

from biasleak.mechanisms.accounting import drv_composition
from biasleak.mechanisms.fair import oracle, run_oracle_learner, score
from biasleak.mechanisms.fair.oracle import (
    CELL_TOO_SMALL,
    auditor_sensitivity,
    lagrangian_costs,
    laplace_vector,
    learner_sensitivity,
    per_round_epsilon,
)

GAMMA = 0.02
DELTA = 1e-6


def shifted_data(m: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features shifted by group, labels from a logistic model of the features."""
    rng = np.random.default_rng(seed)
    a = (rng.random(m) < 0.6).astype(np.int64)
    x = rng.normal(size=(m, 4))
    x[:, 0] += 1.0 * a
    x[:, 1] += 0.5 * a
    logit = 1.5 * x[:, 0] + x[:, 1] - 0.5 * x[:, 2] - 0.5
    y = (rng.random(m) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return x, y, a


@pytest.fixture(scope="module")
def train() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return shifted_data(4000, 0)


@pytest.fixture(scope="module")
def held_out() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return shifted_data(20000, 1)


def play(train, epsilon: float, seed: int = 0, **kwargs) -> oracle.OracleResult:
    x, y, a = train
    params = {"gamma": GAMMA, "bound": 1.0 / GAMMA, "rounds": 20, **kwargs}
    return run_oracle_learner(
        x, y, protected=a, epsilon=epsilon, delta=DELTA, rng=np.random.default_rng(seed), **params
    )


# --------------------------------------------------------------------------------------------
# Utility at epsilon = inf against fairlearn
# --------------------------------------------------------------------------------------------

ERROR_TOLERANCE = 0.03
"""Held-out error within 3 points of fairlearn's (a least-squares oracle against a logistic one,
a uniform mixture against fairlearn's best iterate)."""
VIOLATION_TOLERANCE = 0.02
"""Held-out violation at most 2 points above max(fairlearn's, gamma)."""


def test_non_private_game_matches_fairlearn(train, held_out) -> None:
    reductions = importlib.import_module("fairlearn.reductions")  # the test extra has it
    from sklearn.linear_model import LogisticRegression

    x, y, a = train
    xt, yt, at = held_out
    reference = reductions.ExponentiatedGradient(
        LogisticRegression(), constraints=reductions.EqualizedOdds(difference_bound=GAMMA)
    )
    with warnings.catch_warnings():
        # fairlearn 0.15 under pandas 3 uses indexing patterns pandas deprecates (Pandas4Warning)
        warnings.simplefilter("ignore", DeprecationWarning)
        reference.fit(x, y, sensitive_features=a)
    ref = score(yt, reference._pmf_predict(xt)[:, 1], protected=at)
    plain = score(yt, LogisticRegression().fit(x, y).predict(xt), protected=at)
    for rounds in (20, 50):
        ours = score(yt, play(train, math.inf, rounds=rounds).predict_proba(xt), protected=at)
        assert abs(ours.error - ref.error) <= ERROR_TOLERANCE
        assert ours.eo_violation <= max(ref.eo_violation, GAMMA) + VIOLATION_TOLERANCE
        # the constraint did something: far fairer than the unconstrained model
        assert ours.eo_violation < plain.eo_violation / 4


def test_diagnostics_at_infinity_are_the_exact_violations(train) -> None:
    x, y, a = train
    result = play(train, math.inf, rounds=10)
    assert result.learner_scale == result.auditor_scale == 0.0
    decisions = result.scores(x) > 0.0
    for t in range(result.rounds):
        rates = [[decisions[t][(a == g) & (y == label)].mean() for label in (0, 1)] for g in (0, 1)]
        np.testing.assert_allclose(
            result.noisy_violations[t, 0], np.subtract(rates[1], rates[0]), atol=1e-12
        )
    lam = np.concatenate([result.lambda_plus, result.lambda_minus], axis=1)
    assert np.all(lam >= 0.0)
    assert np.all(lam.reshape(result.rounds, -1).sum(axis=1) <= 1.0 / GAMMA * (1 + 1e-12))
    # first round: no multiplier pressure (lambda+ = lambda-), the unconstrained learner
    np.testing.assert_allclose(result.lambda_plus[0], result.lambda_minus[0])
    assert np.array_equal(
        result.predict_proba(x), play(train, math.inf, rounds=10).predict_proba(x)
    )


def test_mixture_is_uniform_over_rounds(train, held_out) -> None:
    xt = held_out[0][:500]
    result = play(train, math.inf, rounds=7, mixture="uniform")
    assert result.mixture == "uniform"
    p = result.predict_proba(xt)
    assert np.all(np.isin(np.round(p * 7), np.arange(8)))
    draws = np.mean([result.predict(xt, rng=np.random.default_rng(s)) for s in range(400)], axis=0)
    assert np.max(np.abs(draws - p)) < 0.12


def test_saddle_mixture_uses_only_the_releases_and_beats_the_uniform_one(train) -> None:
    x, y, _ = train
    for epsilon in (math.inf, 1e4):
        result = play(train, epsilon, rounds=12, accountant="pld")
        errors = result.training_errors
        # its inputs are public: errors recomputed from X, Y and the classifiers, and the
        # released violations
        decisions = result.scores(x) > 0.0
        np.testing.assert_allclose(result.training_errors, np.mean(decisions != y, axis=1))
        released = result.noisy_violations.reshape(result.rounds, -1)
        again = oracle.saddle_weights(
            result.training_errors, released, gamma=GAMMA, bound=1.0 / GAMMA
        )
        np.testing.assert_array_equal(result.weights, again)
        assert np.all(result.weights >= 0.0) and math.isclose(result.weights.sum(), 1.0)

        def value(q: np.ndarray, v: np.ndarray = released, e: np.ndarray = errors) -> float:
            """max over ||lambda||_1 <= B of the released game at mixture q."""
            return float(q @ e + max(np.max(np.abs(q @ v)) - GAMMA, 0.0) / GAMMA)

        uniform = np.full(result.rounds, 1.0 / result.rounds)
        assert value(result.weights) <= value(uniform) + 1e-9
        # no single round and no random mixture does better either
        rng = np.random.default_rng(0)
        others = [*np.eye(result.rounds), *rng.dirichlet(np.ones(result.rounds), size=200)]
        assert value(result.weights) <= min(value(q) for q in others) + 1e-9


def test_saddle_weights_solve_a_small_game_by_hand() -> None:
    # a fair but inaccurate round and an accurate but unfair one; gamma = 0.1, B = 10:
    # mixing q of the unfair one has violation 0.4 q, so q = 1/4 meets gamma exactly and the
    # penalty B (0.4 q - 0.1) outweighs the error it saves (0.2 q) beyond that
    q = oracle.saddle_weights([0.3, 0.1], [[0.0, 0.0], [0.4, -0.2]], gamma=0.1, bound=10.0)
    np.testing.assert_allclose(q, [0.75, 0.25], atol=1e-9)
    # with B = 0.1 the penalty is cheaper than the error: all weight on the accurate round
    q = oracle.saddle_weights([0.3, 0.1], [[0.0, 0.0], [0.4, -0.2]], gamma=0.1, bound=0.1)
    np.testing.assert_allclose(q, [0.0, 1.0], atol=1e-9)
    with pytest.raises(ValueError, match=re.escape("errors must have shape (T,)")):
        oracle.saddle_weights([0.3], [[0.0, 0.0], [0.4, -0.2]], gamma=0.1, bound=1.0)


def test_unknown_mixture_is_refused_with_what_is_allowed(train) -> None:
    with pytest.raises(ValueError, match=r"mixture.*'saddle'.*did you mean 'saddle'"):
        play(train, math.inf, rounds=2, mixture="sadle")


# --------------------------------------------------------------------------------------------
# Utility on Adult against fairlearn
# --------------------------------------------------------------------------------------------

ADULT_AUDIT = 2000
"""People in the game, drawn from Adult's test split as in ``biasleak paper fair-*``."""
ADULT_ERROR_TOLERANCE = 0.03
"""Held-out error within 3 points of fairlearn's: a least-squares learner costs about one point
on these splits (module docstring of the oracle); the uniform mixture was 11 points off."""
ADULT_VIOLATION_TOLERANCE = 0.02
"""Held-out violation at most 2 points above max(fairlearn's, gamma)."""


@pytest.fixture(scope="module")
def adult_split() -> tuple[np.ndarray, ...]:
    """Adult (sex): encoded features of 2,000 audit people and the rest of the test split."""
    from biasleak.agents.models import build_pipeline
    from biasleak.sim.datasets import load_adult

    data = load_adult(protected="sex")
    train = data.public.train
    encoder = build_pipeline(train).named_steps["encode"].fit(train.features)
    encoded = encoder.transform(data.public.audit.features)
    x = np.asarray(encoded.toarray() if hasattr(encoded, "toarray") else encoded, dtype=float)
    y = data.public.audit.labels.astype(np.int64)
    a = np.asarray(data.protected, dtype=np.int64)
    order = np.random.default_rng(0).permutation(y.size)
    audit, held = order[:ADULT_AUDIT], order[ADULT_AUDIT:]
    return x[audit], y[audit], a[audit], x[held], y[held], a[held]


@pytest.mark.slow
@pytest.mark.parametrize("gamma", [0.02, 0.05])
def test_adult_game_is_close_to_fairlearn(adult_split, gamma: float) -> None:
    reductions = importlib.import_module("fairlearn.reductions")
    from sklearn.linear_model import LogisticRegression

    x, y, a, xt, yt, at = adult_split
    reference = reductions.ExponentiatedGradient(
        LogisticRegression(max_iter=5000),
        constraints=reductions.EqualizedOdds(difference_bound=gamma),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        reference.fit(x, y, sensitive_features=a)
    ref = score(yt, np.clip(reference._pmf_predict(xt)[:, 1], 0.0, 1.0), protected=at)
    result = run_oracle_learner(
        x,
        y,
        protected=a,
        epsilon=math.inf,
        delta=DELTA,
        gamma=gamma,
        bound=1.0 / gamma,
        rounds=20,
        rng=np.random.default_rng(0),
    )
    ours = score(yt, result.predict_proba(xt), protected=at)
    assert abs(ours.error - ref.error) <= ADULT_ERROR_TOLERANCE
    assert ours.eo_violation <= max(ref.eo_violation, gamma) + ADULT_VIOLATION_TOLERANCE


# --------------------------------------------------------------------------------------------
# Convergence as epsilon grows
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_noisy_game_approaches_the_non_private_one(train, held_out) -> None:
    xt, yt, at = held_out
    exact = score(yt, play(train, math.inf).predict_proba(xt), protected=at)

    def distance(epsilon: float) -> float:
        gaps = []
        for seed in range(3):
            s = score(
                yt, play(train, epsilon, seed, accountant="pld").predict_proba(xt), protected=at
            )
            gaps.append(abs(s.error - exact.error) + abs(s.eo_violation - exact.eo_violation))
        return float(np.mean(gaps))

    far, middle, near = distance(1e2), distance(1e4), distance(1e6)
    assert near < middle < far
    assert near < 0.01
    # the advanced split saturates (eps' grows like log eps) but is no worse at larger eps
    assert play(train, 1e6).learner_scale < play(train, 1e2).learner_scale


# --------------------------------------------------------------------------------------------
# Privacy split
# --------------------------------------------------------------------------------------------

TOTALS = (0.1, 1.0, 3.0, 10.0, 100.0, 1000.0)


def exact_delta(eps_prime: float, k: int, epsilon: float) -> float:
    """Exact delta at ``epsilon`` of k pure eps'-DP mechanisms composed, in the worst case.

    The worst pure eps'-DP pair is randomised response (Kairouz, Oh and Viswanath 2015): with
    ``i`` of the k outcomes flipped the privacy loss is ``(k - 2i) eps'``, with probability
    ``C(k, i) p^(k-i) (1-p)^i``, ``p = e^eps' / (1 + e^eps')``; the hockey-stick divergence is
    ``sum_i P(i) max(0, 1 - e^(epsilon - loss_i))``.
    """
    log_p = -math.log1p(math.exp(-eps_prime))
    log_q = -math.log1p(math.exp(eps_prime))
    total = 0.0
    for i in range(k + 1):
        loss = (k - 2 * i) * eps_prime
        if loss <= epsilon:
            break
        log_mass = math.log(math.comb(k, i)) + (k - i) * log_p + i * log_q
        total += math.exp(log_mass) * -math.expm1(epsilon - loss)
    return total


@pytest.mark.parametrize("rounds", [1, 5, 20])
def test_per_round_epsilon_composes_back(rounds: int) -> None:
    k = 2 * rounds
    previous = None
    for eps in TOTALS:
        budget = per_round_epsilon(eps, DELTA, mechanisms=k)
        composed, delta = drv_composition([budget.advanced] * k, slack=DELTA)
        assert composed == pytest.approx(eps, rel=1e-9)
        assert composed <= eps * (1 + 1e-11)  # drv_composition pads by 1e-12
        assert delta == DELTA
        assert budget.basic * k == pytest.approx(eps, rel=1e-15)
        # the PLD split meets the total under the exact composition of the worst pure law
        assert exact_delta(budget.pld, k, eps) <= DELTA * (1 + 1e-9)
        assert budget.pld >= budget.basic
        if previous is not None:
            assert budget.advanced > previous.advanced
            assert budget.pld >= previous.pld
            assert budget.basic > previous.basic
        previous = budget


def test_pld_split_is_tight_and_beats_advanced() -> None:
    from dp_accounting.pld import common, privacy_loss_distribution

    budget = per_round_epsilon(10.0, DELTA, mechanisms=40, accountant="pld")
    assert budget.per_mechanism == budget.pld
    assert budget.pld > budget.advanced
    assert budget.pld > budget.basic

    def composed(e: float) -> float:
        law = privacy_loss_distribution.from_privacy_parameters(
            common.DifferentialPrivacyParameters(e, 0.0)
        ).self_compose(40)
        return float(law.get_epsilon_for_delta(DELTA))

    assert composed(budget.pld) <= 10.0 + 1e-6
    assert composed(budget.pld * 1.02) > 10.0


def test_infinite_epsilon_is_the_non_private_game() -> None:
    budget = per_round_epsilon(math.inf, DELTA, mechanisms=10)
    assert budget.per_mechanism == math.inf
    noisy = laplace_vector([0.25, -1.0], l1_sensitivity=1.0, epsilon=math.inf, rng=None)  # type: ignore[arg-type]
    assert noisy.values.tolist() == [0.25, -1.0] and noisy.scale == 0.0


# --------------------------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------------------------


def test_laplace_noise_is_centred_with_the_stated_scale() -> None:
    exact = np.array([0.3, -1.7, 2.5, 0.0])
    sens, eps, draws = 0.5, 0.7, 5000
    noisy = laplace_vector(
        np.tile(exact, draws), l1_sensitivity=sens, epsilon=eps, rng=np.random.default_rng(3)
    )
    assert sens / eps <= noisy.scale <= sens / eps * (1 + 1e-4)
    values = noisy.values.reshape(draws, exact.size)
    sd = math.sqrt(2.0) * noisy.scale
    z = (values.mean(axis=0) - exact) / (sd / math.sqrt(draws))
    assert np.all(np.abs(z) < 4.0)  # centred: a numpy-style "mean = scale" bug gives z ~ 50
    pooled = (values - exact).ravel()
    assert np.var(pooled) == pytest.approx(2.0 * noisy.scale**2, rel=0.05)
    assert np.mean(np.abs(pooled)) == pytest.approx(noisy.scale, rel=0.05)


def test_result_reports_the_calibrated_scales(train) -> None:
    x = train[0]
    result = play(train, 10.0, accountant="basic", min_cell_size=300)
    assert result.calibration_public
    eps_prime = 10.0 / 40
    row = 1.0 + np.max(np.sum(np.abs(x), axis=1))
    expected_learner = row * (2 * 2 * (1 / GAMMA) + 1) / (300 - 1) / eps_prime
    assert expected_learner <= result.learner_scale <= expected_learner * (1 + 1e-4)
    expected_auditor = 2 / (300 - 1) / eps_prime
    assert expected_auditor <= result.auditor_scale <= expected_auditor * (1 + 1e-4)
    assert not play(train, 10.0).calibration_public
    assert (result.epsilon, result.delta) == (10.0, DELTA)


def test_seeded_runs_repeat_and_differ(train) -> None:
    first, again, other = play(train, 50.0, 1), play(train, 50.0, 1), play(train, 50.0, 2)
    assert np.array_equal(first.coefficients, again.coefficients)
    assert np.array_equal(first.noisy_violations, again.noisy_violations)
    assert not np.array_equal(first.coefficients, other.coefficients)


# --------------------------------------------------------------------------------------------
# Sensitivities against brute force over every neighbour
# --------------------------------------------------------------------------------------------


def _neighbours(a: np.ndarray, groups: int):
    for j in range(a.size):
        for g in range(groups):
            if g != a[j]:
                b = a.copy()
                b[j] = g
                yield b


def _counts(y: np.ndarray, a: np.ndarray, groups: int) -> np.ndarray:
    return np.array([[np.sum((a == g) & (y == label)) for label in (0, 1)] for g in range(groups)])


@pytest.mark.parametrize("groups", [2, 3])
def test_sensitivities_bound_every_neighbour(groups: int) -> None:
    rng = np.random.default_rng(groups)
    m, bound = 60, 7.0
    y = rng.integers(0, 2, size=m)
    a = rng.integers(0, groups, size=m)
    worst_cost = worst_violation = 0.0
    lambdas = [rng.dirichlet(np.ones(4 * (groups - 1))) * bound for _ in range(20)]
    lambdas += [bound * np.eye(4 * (groups - 1))[i] for i in range(4 * (groups - 1))]
    for b in _neighbours(a, groups):
        before, after = _counts(y, a, groups), _counts(y, b, groups)
        n_min = int(min(before.min(), after.min()))
        if n_min < 2:
            continue
        for lam in lambdas:
            half = lam.size // 2
            mu = (lam[:half] - lam[half:]).reshape(groups - 1, 2)
            c = lagrangian_costs(y, codes=a, counts=before, mu=mu)
            c2 = lagrangian_costs(y, codes=b, counts=after, mu=mu)
            change = float(np.sum(np.abs(c - c2)))
            assert change <= 4 * bound / n_min * (1 + 1e-12)  # the derivation's bound
            assert change <= learner_sensitivity(groups=groups, bound=bound, min_cell_size=n_min)
            worst_cost = max(worst_cost, change * n_min / bound)
        for _ in range(10):
            h = rng.integers(0, 2, size=m).astype(float)
            rates = [
                np.array(
                    [[h[(z == g) & (y == label)].mean() for label in (0, 1)] for g in range(groups)]
                )
                for z in (a, b)
            ]
            v = [r[1:] - r[0] for r in rates]
            change = float(np.sum(np.abs(v[0] - v[1])))
            assert change <= auditor_sensitivity(groups=groups, min_cell_size=n_min)
            worst_violation = max(worst_violation, change * (n_min - 1))
    # the bounds are not vacuous: some neighbour comes within a factor of a few
    assert worst_cost > 0.5
    assert worst_violation > 0.5


def test_costs_are_the_lagrangian() -> None:
    """Sum of h_i c_i equals err(h) + sum mu Delta(h) minus the all-zero classifier's error."""
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, size=200)
    a = rng.integers(0, 2, size=200)
    counts = _counts(y, a, 2)
    mu = np.array([[1.5, -0.7]])
    c = lagrangian_costs(y, codes=a, counts=counts, mu=mu)
    h = rng.integers(0, 2, size=200).astype(float)
    err = np.mean(h != y) - np.mean(y != 0)
    rates = np.array([[h[(a == g) & (y == label)].mean() for label in (0, 1)] for g in (0, 1)])
    lagrangian = err + float(np.sum(mu[0] * (rates[1] - rates[0])))
    assert float(h @ c) == pytest.approx(lagrangian, abs=1e-12)


def test_cells_below_the_public_bound_are_refused(train) -> None:
    with pytest.raises(ValueError, match=re.escape(CELL_TOO_SMALL.split("{")[0])):
        play(train, 10.0, min_cell_size=len(train[1]))
    with pytest.raises(ValueError, match="accountant"):
        play(train, 10.0, accountant="renyi")
