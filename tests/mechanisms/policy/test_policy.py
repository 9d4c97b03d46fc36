"""Answering policies: validation, suspension, rate limits, cache, refuse rules, budgets, noise.

Every expected value is computed here, independently of :mod:`biasleak.mechanisms.policy`: fairness
gaps as differences of group means written with numpy, token-bucket levels and ``retry_after``
times by hand, global sensitivities as ``m/2 + m/(n-1)``, smooth sensitivities by a brute force
over every group split (Lemma 5 re-derived), and budget totals with :class:`fractions.Fraction`.
The audit set has n = 20 people, hand-counted: N1 = 8, N0 = 12; 11 people with y = 1, of whom
N11 = 4 and N10 = 7.

State snapshots ignore ledgers that hold no charge: :class:`PolicyState` creates a ledger lazily
the first time a budget stage looks at a developer, and a fresh ledger is the same as none.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from biasleak.mechanisms import metrics
from biasleak.mechanisms import policy as pol
from biasleak.mechanisms.policy import (
    AuditSet,
    Budget,
    Cache,
    Decision,
    MinSupport,
    NearDuplicate,
    Noise,
    Policy,
    PolicyState,
    RateLimit,
    Request,
    decide,
)

# --------------------------------------------------------------------------------------------
# The audit set and hand-written references

PROTECTED = np.array([1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0])
LABELS = np.array([1, 1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0])
N = 20
N1, N0 = 8, 12  # counted by hand: a = 1 at people 0, 3, 5, 6, 10, 12, 15, 17
N11, N10 = 4, 7  # y = 1 and a = 1: 0, 5, 10, 17; y = 1 and a = 0: 1, 4, 7, 9, 13, 14, 18
AUDIT = AuditSet.from_arrays(PROTECTED, LABELS)


def assert_calibrated(got: float, textbook: float) -> None:
    """The default (safe) sampler rounds the noise scale UP to its grid, by at most 1e-5.

    It adds at most m grid units of sensitivity (grid <= 2^-20 of the per-answer sensitivity)
    and a relative 1e-9 of float slack to smooth sensitivities (biasleak.mechanisms.samplers).
    """
    assert textbook <= got <= textbook * (1.0 + 1e-5), (got, textbook)


def gap(h: NDArray[np.float64], a: NDArray[Any], mask: NDArray[Any] | None = None) -> NDArray:
    """mean(h | a = 1, mask) - mean(h | a = 0, mask) per model, by plain numpy means."""
    h = np.atleast_2d(np.asarray(h, dtype=np.float64))
    keep = np.ones(a.shape[0], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    one = keep & (a == 1)
    zero = keep & (a == 0)
    return h[:, one].mean(axis=1) - h[:, zero].mean(axis=1)


def sp_gs(n: int, m: int) -> float:
    """Global l1 sensitivity of m SP (or EO, with n = people with y = 1) answers."""
    return m / 2.0 + m / (n - 1.0)


def local_sp(g1: int, g0: int, n: int) -> float:
    """Local sensitivity of one SP answer at group sizes (g1, g0) (Lemma 5, re-derived)."""
    small, large = min(g1, g0), max(g1, g0)
    return 1.0 / (large + 1.0) + 1.0 / small if small >= 2 else 0.5 + 1.0 / (n - 1.0)


def brute_smooth(n1: int, n0: int, m: int, beta: float) -> float:
    """beta-smooth sensitivity of m SP answers: max over every group-1 size g."""
    n = n1 + n0
    return m * max(local_sp(g, n - g, n) * math.exp(-beta * abs(g - n1)) for g in range(1, n))


def accept(*people: int, n: int = N) -> NDArray[np.float64]:
    """A 0/1 model accepting exactly ``people``."""
    h = np.zeros(n)
    h[list(people)] = 1.0
    return h


def flip(h: NDArray[np.float64], *people: int) -> NDArray[np.float64]:
    out = np.array(h, dtype=np.float64)
    out[list(people)] = 1.0 - out[list(people)]
    return out


def distinct_models(m: int, seed: int = 0) -> NDArray[np.float64]:
    """m probability models, pairwise far apart."""
    return np.random.default_rng(seed).uniform(0.05, 0.95, size=(m, N))


def ask(
    policy: Policy,
    state: PolicyState,
    predictions: Any,
    *,
    identity: str = "ann",
    organization: str = "acme",
    metric: str = "sp",
    now: float = 0.0,
    seed: int = 0,
    audit: AuditSet = AUDIT,
) -> Decision:
    request = Request("q", identity, organization, metric, predictions)
    return decide(policy, request, audit, state, now=now, rng=np.random.default_rng(seed))


def snapshot(state: PolicyState) -> dict[str, Any]:
    """Everything a refusal must leave alone, as plain comparable values."""
    spent = {}
    for index, book in state.ledgers.items():
        for key, ledger in book.items():
            if ledger.charges:
                spent[(index, key)] = (ledger.spent, ledger.spent_delta, len(ledger.charges))
    return {
        "tokens": dict(state.tokens),
        "spent": spent,
        "cache": {k: v.tobytes() for k, v in state.cache.items()},
        "history": {
            org: [r.tobytes() for r in rows] for org, rows in state.history.items() if rows
        },
        "suspended": (set(state.suspended_identities), set(state.suspended_organizations)),
    }


def spent(state: PolicyState, index: int, key: str) -> float:
    return dict(state.ledgers[index].items())[key].spent


def tokens_left(state: PolicyState) -> list[float]:
    return sorted(t for t, _ in state.tokens.values())


# --------------------------------------------------------------------------------------------
# 1. Validation


def test_metric_not_allowed_has_its_own_code_and_lists_the_allowed_metrics() -> None:
    policy = Policy(metrics=("sp", "eo"))
    d = ask(policy, PolicyState(), distinct_models(3), metric="abs_sp")
    assert not d.answered
    assert d.reason == "metric_not_allowed"
    assert "abs_sp" in d.detail and "'sp'" in d.detail and "'eo'" in d.detail
    assert d.models == 3
    assert d.values is None


@pytest.mark.parametrize(
    ("predictions", "models", "words"),
    [
        (np.where(np.arange(N) == 3, np.nan, 0.5), 1, "finite"),
        (np.where(np.arange(N) == 3, np.inf, 0.5), 1, "finite"),
        (np.vstack([np.full(N, 0.5), np.where(np.arange(N) == 7, -np.inf, 0.5)]), 2, "finite"),
        (np.where(np.arange(N) == 0, -0.1, 0.5), 1, "[0, 1]"),
        (np.vstack([np.full(N, 0.5)] * 2 + [np.where(np.arange(N) == 5, 1.5, 0.5)]), 3, "[0, 1]"),
        (np.full(N - 1, 0.5), 1, "n = 20"),
        (np.full((4, N + 1), 0.5), 4, "n = 20"),
        (np.full((2, 3, N), 0.5), 1, "shape"),
        ("0.5", 1, "numeric"),
        (["yes"] * N, 1, "numeric"),
    ],
)
def test_bad_predictions_are_refused_as_invalid(predictions: Any, models: int, words: str) -> None:
    policy = Policy(
        stages=(RateLimit(5), Budget(1.0), Noise("laplace", 0.5), Cache(), NearDuplicate(1.0))
    )
    state = PolicyState()
    assert ask(policy, state, accept(0, 1, 2)).answered
    before = snapshot(state)
    d = ask(policy, state, predictions, now=1.0)
    assert not d.answered
    assert d.reason == "invalid"
    assert words in d.detail
    assert d.models == models
    assert d.values is None and d.epsilon_charged == 0.0 and d.retry_after is None
    assert snapshot(state) == before


def test_wrong_length_detail_names_what_was_received() -> None:
    d = ask(Policy(), PolicyState(), np.full(N + 3, 0.5))
    assert d.reason == "invalid"
    assert "23" in d.detail


def test_batch_larger_than_max_models_is_invalid() -> None:
    policy = Policy(max_models=3)
    d = ask(policy, PolicyState(), distinct_models(4))
    assert (d.answered, d.reason, d.models) == (False, "invalid", 4)
    assert "at most 3" in d.detail and "4" in d.detail
    d = ask(policy, PolicyState(), distinct_models(3))
    assert d.answered and d.models == 3 and d.values is not None and d.values.shape == (3,)


def test_a_one_dimensional_vector_is_one_model() -> None:
    h = accept(0, 1, 2, 3)
    for predictions in (h, h.tolist(), h.astype(int).tolist(), h.astype(bool)):
        d = ask(Policy(), PolicyState(), predictions)
        assert d.answered and d.models == 1
        assert d.values is not None and d.values.shape == (1,)
        # people 0 and 3 are in group 1 (2 of 8), people 1 and 2 in group 0 (2 of 12)
        assert d.values[0] == pytest.approx(2 / 8 - 2 / 12, abs=1e-12)


# --------------------------------------------------------------------------------------------
# 2. Exact answers


@pytest.mark.parametrize("metric", ["sp", "abs_sp", "eo", "abs_eo"])
def test_exact_answers_equal_the_metric(metric: str) -> None:
    h = distinct_models(5, seed=3)
    d = ask(Policy(), PolicyState(), h, metric=metric)
    if metric.endswith("sp"):
        expected = gap(h, PROTECTED)
        library = metrics.statistical_parity(h, protected=PROTECTED)
    else:
        expected = gap(h, PROTECTED, LABELS == 1)
        library = metrics.equal_opportunity(h, protected=PROTECTED, labels=LABELS)
    if metric.startswith("abs_"):
        expected, library = np.abs(expected), np.abs(library)
    assert d.answered and d.reason is None
    assert d.values is not None and d.values.shape == (5,)
    np.testing.assert_allclose(d.values, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.values, library, rtol=0, atol=1e-12)
    assert d.mechanism == "exact"
    assert d.epsilon_charged == math.inf
    assert d.cached == (False,) * 5
    np.testing.assert_array_equal(d.internal["exact"], d.values)


def test_infinite_epsilon_is_an_exact_answer() -> None:
    h = distinct_models(2, seed=4)
    d = ask(Policy(stages=(Noise("laplace", math.inf),)), PolicyState(), h)
    assert d.answered and d.mechanism == "exact" and d.epsilon_charged == math.inf
    np.testing.assert_allclose(d.values, gap(h, PROTECTED), rtol=0, atol=1e-12)


def test_eodds_answered_exactly_has_two_columns() -> None:
    h = distinct_models(3, seed=5)
    d = ask(Policy(metrics=("eodds",)), PolicyState(), h, metric="eodds")
    assert d.answered and d.values is not None and d.values.shape == (3, 2)
    np.testing.assert_allclose(d.values[:, 0], gap(h, PROTECTED, LABELS == 1), atol=1e-12)
    np.testing.assert_allclose(d.values[:, 1], gap(h, PROTECTED, LABELS == 0), atol=1e-12)
    one = ask(Policy(metrics=("eodds",)), PolicyState(), h[1], metric="eodds")
    assert one.values is not None and one.values.shape == (1, 2)
    np.testing.assert_allclose(one.values[0], d.values[1], atol=1e-12)


# --------------------------------------------------------------------------------------------
# 3. Suspension


def test_suspended_identities_and_organisations_are_refused() -> None:
    policy = Policy(stages=(RateLimit(10),))
    state = PolicyState(suspended_identities={"mallory"}, suspended_organizations={"evilcorp"})
    before = snapshot(state)
    d = ask(policy, state, distinct_models(2), identity="mallory", organization="acme")
    assert (d.answered, d.reason, d.models) == (False, "suspended", 2)
    assert "mallory" in d.detail
    d = ask(policy, state, accept(1, 2), identity="ann", organization="evilcorp")
    assert (d.answered, d.reason, d.models) == (False, "suspended", 1)
    assert "evilcorp" in d.detail
    assert snapshot(state) == before  # no token spent
    assert ask(policy, state, accept(1, 2), identity="ann", organization="acme").answered


# --------------------------------------------------------------------------------------------
# 4. Rate limits


def test_rate_limit_retry_after_is_hand_computed_and_works() -> None:
    policy = Policy(stages=(RateLimit(per_day=10),))  # refills 10/24 per hour
    state = PolicyState()
    assert ask(policy, state, distinct_models(7), now=0.0).answered  # 3 tokens left
    assert tokens_left(state) == [pytest.approx(3.0)]
    before = snapshot(state)
    # at t = 2: 3 + 2 * 10/24 tokens; 6 needed; (6 - 3 - 20/24) / (10/24) = 5.2 hours more
    d = ask(policy, state, distinct_models(6, seed=1), now=2.0)
    assert (d.answered, d.reason, d.models) == (False, "rate_limited", 6)
    assert d.retry_after == pytest.approx(7.2, abs=1e-9)
    assert snapshot(state) == before  # refused: no token spent, refill time unchanged
    d = ask(policy, state, distinct_models(6, seed=1), now=7.1)
    assert d.reason == "rate_limited" and d.retry_after == pytest.approx(7.2, abs=1e-9)
    assert d.retry_after is not None
    assert ask(policy, state, distinct_models(6, seed=1), now=d.retry_after).answered
    assert tokens_left(state) == [pytest.approx(0.0, abs=1e-9)]
    d = ask(policy, state, accept(3), now=7.2)
    assert d.reason == "rate_limited" and d.retry_after == pytest.approx(7.2 + 2.4, abs=1e-9)


def test_rate_limit_refill_is_capped_at_one_day() -> None:
    policy = Policy(stages=(RateLimit(per_day=10),))
    state = PolicyState()
    assert ask(policy, state, distinct_models(10), now=0.0).answered
    assert ask(policy, state, distinct_models(10, seed=1), now=100.0).answered  # full again
    d = ask(policy, state, accept(1), now=100.0)  # not 10 + 100 * 10/24 - 10 left
    assert d.reason == "rate_limited"
    assert d.retry_after == pytest.approx(100.0 + 2.4, abs=1e-9)


@pytest.mark.parametrize("used", [0, 7])
def test_a_query_larger_than_the_daily_limit_never_fits(used: int) -> None:
    policy = Policy(stages=(RateLimit(per_day=10),))
    state = PolicyState()
    if used:
        assert ask(policy, state, distinct_models(used), now=0.0).answered
    before = snapshot(state)
    d = ask(policy, state, distinct_models(11, seed=2), now=1.0)
    assert (d.answered, d.reason, d.models) == (False, "rate_limited", 11)
    assert d.retry_after is None
    assert snapshot(state) == before


@pytest.mark.parametrize("scope", ["identity", "organization"])
def test_rate_limit_scope(scope: str) -> None:
    policy = Policy(stages=(RateLimit(per_day=5, scope=scope),))  # type: ignore[arg-type]
    state = PolicyState()
    assert ask(policy, state, distinct_models(4), identity="ann", organization="acme").answered
    d = ask(policy, state, distinct_models(3, seed=1), identity="bob", organization="acme")
    if scope == "organization":
        # one token left in acme's bucket; 2 more at 5/24 per hour
        assert d.reason == "rate_limited"
        assert d.retry_after == pytest.approx(2 / (5 / 24), abs=1e-9)
    else:
        assert d.answered
    # another organisation has its own bucket either way
    assert ask(
        policy, state, distinct_models(5, seed=2), identity="cat", organization="zeta"
    ).answered


def test_rate_limit_tokens_are_spent_by_answered_models_only() -> None:
    policy = Policy(stages=(RateLimit(per_day=6), MinSupport(2)))
    state = PolicyState()
    assert ask(policy, state, distinct_models(2), now=0.0).answered
    assert tokens_left(state) == [pytest.approx(4.0)]
    before = snapshot(state)
    assert ask(policy, state, np.vstack([accept(1, 2), accept(1)]), now=0.0).reason == (
        "low_support"
    )
    assert ask(policy, state, np.full(N, np.nan), now=0.0).reason == "invalid"
    assert snapshot(state) == before
    assert ask(policy, state, distinct_models(4, seed=1), now=0.0).answered


# --------------------------------------------------------------------------------------------
# 5. Cache

CACHED_POLICY = Policy(stages=(Noise("laplace", 0.5), Budget(100.0), Cache()))


def test_cache_repeats_are_free_and_identical() -> None:
    state = PolicyState()
    x = distinct_models(1, seed=7)[0]
    first = ask(CACHED_POLICY, state, x, seed=1)
    assert first.answered and first.epsilon_charged == 0.5 and first.cached == (False,)
    assert spent(state, 0, "ann") == 0.5
    for predictions, seed in ((x, 2), (x[None, :], 3), (x.tolist(), 4)):
        again = ask(CACHED_POLICY, state, predictions, seed=seed)
        assert again.answered
        assert again.values is not None and first.values is not None
        np.testing.assert_array_equal(again.values, first.values)
        assert again.epsilon_charged == 0.0
        assert again.cached == (True,)
        assert again.internal["models_new"] == 0
        assert spent(state, 0, "ann") == 0.5
        assert len(dict(state.ledgers[0].items())["ann"].charges) == 1


def test_cache_serves_an_integer_list_like_the_same_floats() -> None:
    state = PolicyState()
    h = accept(0, 1, 2, 5, 9)
    first = ask(CACHED_POLICY, state, h, seed=1)
    again = ask(CACHED_POLICY, state, h.astype(int).tolist(), seed=2)
    assert again.cached == (True,)
    np.testing.assert_array_equal(again.values, first.values)


def test_cache_mixed_batch_charges_only_the_new_models() -> None:
    state = PolicyState()
    x, y, z = distinct_models(3, seed=8)
    first = ask(CACHED_POLICY, state, x, seed=1)
    assert first.values is not None
    d = ask(CACHED_POLICY, state, np.vstack([y, x, z]), seed=2)
    assert d.answered and d.values is not None
    assert d.cached == (False, True, False)
    assert d.values[1] == first.values[0]
    assert d.epsilon_charged == pytest.approx(2 * 0.5)
    assert d.internal["models_new"] == 2
    # calibrated to the 2 new models: Delta(n, 2) / (2 x 0.5)
    assert_calibrated(d.internal["noise_scale"], sp_gs(N, 2) / (2 * 0.5))
    np.testing.assert_allclose(d.internal["exact"], gap(np.vstack([y, z]), PROTECTED), atol=1e-12)
    assert spent(state, 0, "ann") == 1.5
    again = ask(CACHED_POLICY, state, np.vstack([z, y]), seed=3)
    assert again.cached == (True, True) and again.epsilon_charged == 0.0
    np.testing.assert_array_equal(again.values, d.values[[2, 0]])
    assert spent(state, 0, "ann") == 1.5


def test_cache_different_metric_is_not_a_hit() -> None:
    state = PolicyState()
    x = distinct_models(1, seed=9)[0]
    ask(CACHED_POLICY, state, x, seed=1)
    d = ask(CACHED_POLICY, state, x, metric="abs_sp", seed=2)
    assert d.cached == (False,) and d.epsilon_charged == 0.5
    assert spent(state, 0, "ann") == 1.0


def test_without_cache_a_repeat_is_charged_again() -> None:
    policy = Policy(stages=tuple(s for s in CACHED_POLICY.stages if s.kind != "cache"))
    state = PolicyState()
    x = distinct_models(1, seed=10)[0]
    first = ask(policy, state, x, seed=1)
    again = ask(policy, state, x, seed=2)
    assert again.cached == (False,) and again.epsilon_charged == 0.5
    assert spent(state, 0, "ann") == 1.0
    assert first.values is not None and again.values is not None
    assert again.values[0] != first.values[0]


# --------------------------------------------------------------------------------------------
# 6. Refuse rules


@pytest.mark.parametrize(
    ("model", "ok", "words"),
    [
        (accept(4, 9), False, "accepts 2"),
        (accept(4, 9, 11), True, ""),
        (flip(accept(4, 9), *range(N)), False, "rejects 2"),
        (flip(accept(4, 9, 11), *range(N)), True, ""),
        (np.where(np.isin(np.arange(N), [2, 3, 4]), 0.5, 0.0), True, ""),
        (np.where(np.isin(np.arange(N), [2, 3, 4]), 0.4999, 0.0), False, "accepts 0"),
    ],
)
def test_min_support(model: NDArray[np.float64], ok: bool, words: str) -> None:
    policy = Policy(stages=(MinSupport(3),))
    d = ask(policy, PolicyState(), model)
    assert d.answered is ok
    if not ok:
        assert d.reason == "low_support" and words in d.detail and d.models == 1


def test_min_support_one_bad_model_refuses_the_batch() -> None:
    policy = Policy(stages=(MinSupport(3), Budget(10.0), Noise("laplace", 1)))
    state = PolicyState()
    d = ask(policy, state, np.vstack([accept(1, 2, 3, 4), accept(7)]))
    assert (d.answered, d.reason, d.models) == (False, "low_support", 2)
    assert "model 1" in d.detail
    assert snapshot(state) == snapshot(PolicyState())


def test_near_duplicate_differencing_pairs() -> None:
    policy = Policy(stages=(NearDuplicate(threshold=2.0),))
    state = PolicyState()
    base = accept(*range(10))
    assert ask(policy, state, base).answered
    d = ask(policy, state, flip(base, 0))  # one flipped decision: L1 distance 1
    assert (d.answered, d.reason) == (False, "near_duplicate")
    assert "earlier model" in d.detail
    assert ask(policy, state, flip(base, 0, 19)).answered  # distance 2 is not below 2
    soft = np.full(N, 0.25)
    assert ask(policy, state, soft).answered
    bumped = soft.copy()
    bumped[4] = 0.75  # a flipped probability: |1 - 2 x 0.25| = 0.5
    assert ask(policy, state, bumped).reason == "near_duplicate"


def test_near_duplicate_history_is_per_organisation() -> None:
    policy = Policy(stages=(NearDuplicate(threshold=2.0),))
    state = PolicyState()
    base = accept(*range(10))
    assert ask(policy, state, base, organization="acme").answered
    assert ask(policy, state, flip(base, 3), identity="bob", organization="acme").reason == (
        "near_duplicate"
    )
    assert ask(policy, state, flip(base, 3), identity="cat", organization="zeta").answered


def test_near_duplicate_within_one_batch() -> None:
    policy = Policy(stages=(NearDuplicate(threshold=2.0),))
    state = PolicyState()
    base = accept(*range(10))
    d = ask(policy, state, np.vstack([base, accept(10, 11), flip(base, 5)]))
    assert (d.answered, d.reason, d.models) == (False, "near_duplicate", 3)
    assert "same query" in d.detail
    assert not state.history.get("acme")
    assert ask(policy, state, np.vstack([base, flip(base, 5, 6)])).answered
    assert len(state.history["acme"]) == 2


def test_near_duplicate_refused_models_are_not_remembered() -> None:
    policy = Policy(stages=(NearDuplicate(threshold=2.0),))
    state = PolicyState()
    base = accept(*range(10))
    assert ask(policy, state, base).answered
    assert ask(policy, state, flip(base, 0)).reason == "near_duplicate"
    # distance 2 from base (answered) but 1 from the refused copy
    assert ask(policy, state, flip(base, 0, 1)).answered
    assert len(state.history["acme"]) == 2


@pytest.mark.parametrize(("window", "ok"), [(2, True), (3, False)])
def test_near_duplicate_window_keeps_the_most_recent_models(window: int, ok: bool) -> None:
    policy = Policy(stages=(NearDuplicate(threshold=2.0, window=window),))
    state = PolicyState()
    first, second, third = accept(*range(10)), accept(*range(10, 20)), accept(*range(0, 20, 2))
    for h in (first, second, third):  # pairwise at distance 10 or more
        assert ask(policy, state, h).answered
    assert len(state.history["acme"]) == min(window, 3)
    d = ask(policy, state, flip(first, 0))  # far from second and third (19 and 11)
    assert d.answered is ok
    if not ok:
        assert d.reason == "near_duplicate"
    assert len(state.history["acme"]) == min(window, 3)


# --------------------------------------------------------------------------------------------
# 7. Budgets


def test_budget_per_model_and_exhaustion_changes_nothing() -> None:
    policy = Policy(
        stages=(
            RateLimit(per_day=50),
            NearDuplicate(threshold=1.0),
            Budget(2.0),
            Noise("laplace", 0.5),
            Cache(),
        )
    )
    state = PolicyState()
    models = distinct_models(7, seed=11)
    d = ask(policy, state, models[:3], now=0.0)
    assert d.answered and d.epsilon_charged == pytest.approx(1.5)
    assert spent(state, 0, "ann") == 1.5
    before = snapshot(state)
    # one cached row and two new ones: 2 x 0.5 = 1.0 > 0.5 left
    d = ask(policy, state, models[[0, 3, 4]], now=1.0)
    assert (d.answered, d.reason, d.models) == (False, "budget_exhausted", 3)
    assert d.epsilon_charged == 0.0 and d.values is None
    assert "2 model" in d.detail
    assert snapshot(state) == before
    # one cached row and one new one: 0.5 fits exactly
    d = ask(policy, state, models[[0, 3]], now=1.0)
    assert d.answered and d.epsilon_charged == pytest.approx(0.5) and d.cached == (True, False)
    assert Fraction(str(spent(state, 0, "ann"))) == Fraction(2)
    assert ask(policy, state, models[5], now=2.0).reason == "budget_exhausted"
    assert ask(policy, state, models[1], now=2.0).answered  # cached: still free
    assert ask(policy, state, models[5], identity="bob", now=2.0).answered  # identity scope


def test_budget_per_batch() -> None:
    policy = Policy(stages=(Budget(1.0), Noise("laplace", 0.5, per="batch")))
    state = PolicyState()
    d = ask(policy, state, distinct_models(4, seed=12))
    assert d.answered and d.epsilon_charged == 0.5
    assert_calibrated(d.internal["noise_scale"], sp_gs(N, 4) / 0.5)
    assert ask(policy, state, distinct_models(3, seed=13)).epsilon_charged == 0.5
    assert spent(state, 0, "ann") == 1.0
    assert ask(policy, state, distinct_models(1, seed=14)).reason == "budget_exhausted"


@pytest.mark.parametrize("noise", [Noise("exact"), Noise("laplace", math.inf)])
def test_exact_answers_are_refused_under_a_finite_budget(noise: Noise) -> None:
    state = PolicyState()
    d = ask(Policy(stages=(Budget(100.0), noise)), state, accept(1, 2))
    assert (d.answered, d.reason) == (False, "budget_exhausted")
    assert "exact" in d.detail
    assert snapshot(state) == snapshot(PolicyState())


def test_two_budget_stages_must_both_afford_and_are_both_charged() -> None:
    policy = Policy(
        stages=(
            Budget(1.0, scope="identity"),
            Budget(1.5, scope="organization"),
            Noise("laplace", 0.25),
        )
    )
    state = PolicyState()
    models = distinct_models(9, seed=15)
    assert ask(policy, state, models[:4], identity="ann").epsilon_charged == 1.0
    assert (spent(state, 0, "ann"), spent(state, 1, "acme")) == (1.0, 1.0)
    before = snapshot(state)
    d = ask(policy, state, models[4], identity="ann")  # identity 1.25 > 1, organisation fits
    assert d.reason == "budget_exhausted" and "identity" in d.detail
    assert snapshot(state) == before
    assert ask(policy, state, models[4:6], identity="bob").epsilon_charged == 0.5
    assert (spent(state, 0, "bob"), spent(state, 1, "acme")) == (0.5, 1.5)
    before = snapshot(state)
    d = ask(policy, state, models[6], identity="cat")  # identity fits, organisation 1.75 > 1.5
    assert d.reason == "budget_exhausted" and "organization" in d.detail
    assert snapshot(state) == before
    assert ask(policy, state, models[6], identity="cat", organization="zeta").answered
    assert (spent(state, 0, "cat"), spent(state, 1, "zeta")) == (0.25, 0.25)


# --------------------------------------------------------------------------------------------
# The order of the stages


def test_stages_run_in_the_documented_order() -> None:
    policy = Policy(
        stages=(
            RateLimit(per_day=3),
            MinSupport(2),
            NearDuplicate(2.0),
            Budget(0.75),
            Noise("laplace", 0.5),
        )
    )
    state = PolicyState(suspended_identities={"ann"})
    bad = np.vstack([accept(0), accept(0, 1), accept(0, 1, 2), accept(9)])  # 4 low-support rows
    assert ask(policy, state, np.where(bad == 1, np.nan, bad)).reason == "invalid"
    assert ask(policy, state, bad).reason == "suspended"
    state.suspended_identities.clear()
    assert ask(policy, state, bad).reason == "rate_limited"
    assert ask(policy, state, bad[:3]).reason == "low_support"
    base = accept(*range(10))
    pair = np.vstack([base, flip(base, 0), accept(*range(10, 20))])
    assert ask(policy, state, pair).reason == "near_duplicate"
    assert ask(policy, state, pair[[0, 2]]).reason == "budget_exhausted"  # 1.0 > 0.75
    assert ask(policy, state, pair[0]).answered


# --------------------------------------------------------------------------------------------
# 9. Noise


def test_laplace_noise_scale_per_model() -> None:
    m = 3
    d = ask(Policy(stages=(Noise("laplace", 0.5),)), PolicyState(), distinct_models(m, seed=16))
    by_hand = (m / 2 + m / (N - 1)) / (0.5 * m)
    assert_calibrated(d.internal["noise_scale"], by_hand)
    assert d.internal["sensitivity"] == pytest.approx(m / 2 + m / (N - 1), rel=1e-12)
    assert d.mechanism == "laplace" and d.epsilon_charged == pytest.approx(1.5)


def test_laplace_noise_has_the_stated_scale() -> None:
    m = 2000
    h = np.random.default_rng(17).uniform(size=(m, N))
    d = ask(Policy(stages=(Noise("laplace", 0.5),)), PolicyState(), h, seed=18)
    assert d.values is not None
    noise = d.values - gap(h, PROTECTED)
    b = (0.5 + 1 / (N - 1)) / 0.5  # per-answer Laplace scale, E|noise| = b
    assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.1)
    assert abs(np.median(noise)) < 0.15 * b


def test_attribute_conceal_scale_depends_on_n0_and_stays_internal() -> None:
    m, eps = 2, 0.5
    policy = Policy(stages=(Noise("attribute_conceal", eps),))
    h = distinct_models(m, seed=19)
    beta = (eps * m) / (6 * m)
    outcomes = {}
    for n0 in (2, 10):
        audit = AuditSet.from_arrays(np.arange(N) >= n0, LABELS)
        d = ask(policy, PolicyState(), h, audit=audit, seed=20)
        expected = 6 * brute_smooth(N - n0, n0, m, beta) / (eps * m)
        assert_calibrated(d.internal["noise_scale"], expected)
        outcomes[n0] = d
    scales = {n0: d.internal["noise_scale"] for n0, d in outcomes.items()}
    assert scales[2] > 1.5 * scales[10]
    public = ("mechanism", "epsilon_charged", "delta_charged", "cached", "reason", "detail")
    for name in public:
        assert getattr(outcomes[2], name) == getattr(outcomes[10], name)
    for d in outcomes.values():
        assert d.values is not None
        assert not set(d.values.tolist()) & set(scales.values())
        for name in (*public, "retry_after", "models"):
            value = getattr(d, name)
            assert value not in scales.values()
            for scale in scales.values():
                assert repr(scale) not in repr(value) and f"{scale:.3g}" not in repr(value)


def test_eo_noise_uses_the_group_sizes_among_positives() -> None:
    assert AUDIT.group_sizes("eo") == (N11, N10)
    assert AUDIT.group_sizes("sp") == (N1, N0)
    h = distinct_models(2, seed=21)
    d = ask(Policy(stages=(Noise("laplace", 0.5),)), PolicyState(), h, metric="eo")
    n_pos = N11 + N10
    assert_calibrated(d.internal["noise_scale"], sp_gs(n_pos, 2) / 1.0)
    np.testing.assert_allclose(d.internal["exact"], gap(h, PROTECTED, LABELS == 1), atol=1e-12)
    d = ask(Policy(stages=(Noise("attribute_conceal", 0.5),)), PolicyState(), h, metric="eo")
    beta = 1.0 / (6 * 2)
    expected = 6 * brute_smooth(N11, N10, 2, beta) / 1.0
    assert_calibrated(d.internal["noise_scale"], expected)
    assert d.internal["noise_scale"] != pytest.approx(6 * brute_smooth(N1, N0, 2, beta))


@pytest.mark.parametrize(("metric", "low"), [("sp", -1.0), ("abs_sp", 0.0)])
def test_clamp_bounding_keeps_values_in_range(metric: str, low: float) -> None:
    h = distinct_models(40, seed=22)
    clamp = Policy(stages=(Noise("laplace", 0.05, bounding="clamp"),))
    clamped = ask(clamp, PolicyState(), h, metric=metric, seed=23)
    raw = ask(Policy(stages=(Noise("laplace", 0.05),)), PolicyState(), h, metric=metric, seed=23)
    assert clamped.values is not None and raw.values is not None
    assert np.all((clamped.values >= low) & (clamped.values <= 1.0))
    assert np.any((raw.values < low) | (raw.values > 1.0))
    np.testing.assert_array_equal(clamped.values, np.clip(raw.values, low, 1.0))


# --------------------------------------------------------------------------------------------
# 10. Construction errors


def test_noisy_policy_refuses_metrics_without_sensitivity() -> None:
    with pytest.raises(ValueError, match="eodds"):
        Policy(metrics=("eodds",), stages=(Noise("laplace", 1.0),))
    with pytest.raises(ValueError, match="pp"):
        Policy(metrics=("sp", "pp"), stages=(Noise("attribute_conceal", 1.0),))
    Policy(metrics=("eodds", "pp"))  # exact answers need no sensitivity


@pytest.mark.parametrize(
    ("build", "hint"),
    [
        (lambda: Policy(metrics=("abs_spp",)), "did you mean 'abs_sp'"),
        (lambda: Policy(metrics=("sp", "abs_eoo")), "did you mean 'abs_eo'"),
        (lambda: Noise("laplase", 1.0), "did you mean 'laplace'"),
        (lambda: Noise("atribute_conceal", 1.0), "did you mean 'attribute_conceal'"),
        (lambda: Noise("laplace", 1.0, bounding="clmp"), "did you mean 'clamp'"),
        (lambda: Policy(metrics=("zzzzzz",)), None),
        (lambda: Noise("qwerty"), None),
    ],
)
def test_unknown_names_are_rejected(build: Any, hint: str | None) -> None:
    with pytest.raises(ValueError) as info:
        build()
    if hint is None:
        assert "did you mean" not in str(info.value)
    else:
        assert hint in str(info.value)


# --------------------------------------------------------------------------------------------
# 8. Properties over random query sequences

POOL = np.random.default_rng(99).uniform(size=(8, N))
TEAM = (("ann", "acme"), ("bob", "acme"), ("cat", "zeta"), ("dan", "omni"))
PER_DAY = 4
EPS = 0.25
BUDGET = 1.0
PROPERTY_POLICY = Policy(
    metrics=("sp", "abs_sp"),
    max_models=3,
    stages=(
        RateLimit(per_day=PER_DAY),
        Budget(BUDGET, scope="organization"),
        Noise("laplace", EPS),
        Cache(),
    ),
)

steps = st.lists(
    st.fixed_dictionaries(
        {
            "who": st.integers(0, len(TEAM) - 1),
            "metric": st.sampled_from(["sp", "sp", "abs_sp"]),
            "rows": st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=3, unique=True),
            "kind": st.sampled_from(["ok"] * 6 + ["nan", "short", "metric", "big"]),
            "dt": st.sampled_from([0.0, 0.0, 0.5, 2.0, 6.0, 30.0]),
        }
    ),
    min_size=6,
    max_size=30,
)


def build_request(k: int, step: dict[str, Any]) -> Request:
    identity, org = TEAM[step["who"]]
    h = POOL[step["rows"]].copy()
    metric = step["metric"]
    if step["kind"] == "nan":
        h[0, k % N] = np.nan
    elif step["kind"] == "short":
        h = h[:, :-1]
    elif step["kind"] == "metric":
        metric = "pp"
    elif step["kind"] == "big":  # more than max_models
        h = np.vstack([h, POOL[: 4 - h.shape[0]]])
    return Request(f"q{k}", identity, org, metric, h)


def run_sequence(sequence: list[dict[str, Any]], seed: int) -> tuple[list[Decision], PolicyState]:
    state = PolicyState()
    rng = np.random.default_rng(seed)
    now = 0.0
    out = []
    for k, step in enumerate(sequence):
        now += step["dt"]
        out.append(decide(PROPERTY_POLICY, build_request(k, step), AUDIT, state, now=now, rng=rng))
    return out, state


@settings(max_examples=60, deadline=None, database=None)
@given(sequence=steps)
def test_property_refusals_are_free_and_accounting_adds_up(sequence: list[dict[str, Any]]) -> None:
    state = PolicyState()
    rng = np.random.default_rng(5)
    now = 0.0
    bucket: dict[str, tuple[float, float]] = {}  # identity -> (tokens, last), kept by hand
    charged: dict[str, Fraction] = {}  # organisation -> sum of epsilon_charged
    released: dict[tuple[str, int], float] = {}  # (metric, pool row) -> first released value
    for k, step in enumerate(sequence):
        now += step["dt"]
        request = build_request(k, step)
        m = np.shape(request.predictions)[0]
        tokens, last = bucket.get(request.identity, (float(PER_DAY), now))
        tokens = min(float(PER_DAY), tokens + PER_DAY / 24 * (now - last))
        hits = [(request.metric, row) in released for row in step["rows"]]
        new = hits.count(False)
        cost = new * Fraction(str(EPS))
        spent_before = charged.get(request.organization, Fraction(0))
        before = snapshot(state)
        d = decide(PROPERTY_POLICY, request, AUDIT, state, now=now, rng=rng)
        # the expected outcome, by hand
        if step["kind"] != "ok":
            assert d.reason == ("metric_not_allowed" if step["kind"] == "metric" else "invalid")
        elif abs(tokens - m) < 1e-6:
            pass  # on the edge of the bucket: either outcome is fine
        elif tokens < m:
            assert d.reason == "rate_limited"
            assert d.retry_after == pytest.approx(now + (m - tokens) / (PER_DAY / 24))
        elif new and spent_before + cost > Fraction(str(BUDGET)):
            assert d.reason == "budget_exhausted"
        else:
            assert d.answered
        if not d.answered:
            assert snapshot(state) == before  # no token, no charge, no cache entry
            assert d.epsilon_charged == 0.0 and d.values is None
            continue
        bucket[request.identity] = (tokens - m, now)
        changed = [key for key in state.tokens if before["tokens"].get(key) != state.tokens[key]]
        assert len(changed) == 1
        assert state.tokens[changed[0]][0] == pytest.approx(tokens - m, abs=1e-9)
        assert d.cached == tuple(hits)
        assert d.internal["models_new"] == new
        assert Fraction(str(d.epsilon_charged)) == cost
        charged[request.organization] = spent_before + cost
        assert d.values is not None
        for i, row in enumerate(step["rows"]):
            if hits[i]:
                assert d.values[i] == released[(request.metric, row)]
            else:
                released[(request.metric, row)] = float(d.values[i])
    books = dict(state.ledgers[0].items()) if 0 in state.ledgers else {}
    for ledger in books.values():
        assert ledger.spent <= BUDGET
    for org in {org for _, org in TEAM}:
        spent_here = books[org].spent if org in books else 0.0
        assert Fraction(str(spent_here)) == charged.get(org, Fraction(0))


@settings(max_examples=25, deadline=None, database=None)
@given(sequence=steps)
def test_property_same_seed_same_decisions(sequence: list[dict[str, Any]]) -> None:
    first, state_a = run_sequence(sequence, seed=11)
    second, state_b = run_sequence(sequence, seed=11)
    for a, b in zip(first, second, strict=True):
        assert (a.answered, a.reason, a.detail, a.retry_after, a.cached) == (
            b.answered,
            b.reason,
            b.detail,
            b.retry_after,
            b.cached,
        )
        assert a.epsilon_charged == b.epsilon_charged
        if a.values is None:
            assert b.values is None
        else:
            np.testing.assert_array_equal(a.values, b.values)
    assert snapshot(state_a) == snapshot(state_b)


# -- regressions found while reviewing the pipeline ----------------------------------------------


def _small() -> tuple[pol.AuditSet, np.random.Generator]:
    return pol.AuditSet.from_arrays([1, 0] * 5, [1] * 10), np.random.default_rng(0)


def test_ragged_predictions_are_refused_not_raised() -> None:
    audit, rng = _small()
    request = pol.Request("q", "i", "o", "sp", [[0.1] * 10, [0.2] * 9])
    decision = pol.decide(pol.Policy(), request, audit, pol.PolicyState(), now=0.0, rng=rng)
    assert not decision.answered and decision.reason == "invalid"


def test_retry_after_waits_for_every_rate_limit() -> None:
    audit, rng = _small()
    policy = pol.Policy(stages=(pol.RateLimit(24, "identity"), pol.RateLimit(24, "organization")))
    state = pol.PolicyState()

    def send(who: str, m: int, now: float) -> pol.Decision:
        request = pol.Request(f"{who}-{now}", who, "acme", "sp", np.full((m, 10), 0.5))
        return pol.decide(policy, request, audit, state, now=now, rng=rng)

    assert send("ann", 14, 0.0).answered
    assert send("bob", 10, 0.0).answered
    refused = send("ann", 12, 0.0)
    # identity bucket: 10 left, needs 2 more -> 2 h; organisation bucket: 0 left -> 12 h
    assert refused.retry_after == pytest.approx(12.0)
    assert send("ann", 12, refused.retry_after).answered


def test_a_query_that_can_never_fit_gets_no_retry_after() -> None:
    audit, rng = _small()
    policy = pol.Policy(stages=(pol.RateLimit(24, "identity"), pol.RateLimit(10, "organization")))
    request = pol.Request("q", "ann", "acme", "sp", np.full((20, 10), 0.5))
    decision = pol.decide(policy, request, audit, pol.PolicyState(), now=0.0, rng=rng)
    assert decision.reason == "rate_limited" and decision.retry_after is None


@pytest.mark.parametrize(
    "build",
    [
        lambda: pol.Noise("laplace", 0.5, per="models"),
        lambda: pol.Noise("laplace", epsilon=-1.0),
        lambda: pol.Noise("gaussian", 1.0),
        lambda: pol.NearDuplicate(1.5, window=0),
        lambda: pol.NearDuplicate(0.0),
    ],
)
def test_policy_parts_validate_their_parameters(build) -> None:
    with pytest.raises(ValueError):
        build()


def test_metric_undefined_on_the_audit_set_is_refused() -> None:
    audit = pol.AuditSet.from_arrays([1, 0] * 5, [1, 0] * 5)  # a = 0 people all have y = 0
    decision = pol.decide(
        pol.Policy(),
        pol.Request("q", "i", "o", "eo", np.full((1, 10), 0.5)),
        audit,
        pol.PolicyState(),
        now=0.0,
        rng=np.random.default_rng(0),
    )
    assert decision.reason == "invalid" and "undefined" in decision.detail


def _closest_every_pair(h: NDArray[np.float64], past: NDArray[np.float32], threshold: float):
    """Reference: compare each model of the query with every earlier row, in float32."""
    every = np.concatenate([past, h.astype(np.float32)])
    for i in range(h.shape[0]):
        row = past.shape[0] + i
        if row == 0:
            continue
        dist = np.abs(every[:row] - every[row]).sum(axis=1)
        j = int(np.argmin(dist))
        if dist[j] < threshold:
            return i, j, float(dist[j])
    return None


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    models=st.integers(1, 12),
    stored=st.integers(0, 6),
    threshold=st.sampled_from([0.5, 1.0, 2.0, 3.5]),
    soft=st.booleans(),
)
def test_near_duplicate_pruning_finds_what_every_pair_finds(
    seed: int, models: int, stored: int, threshold: float, soft: bool
) -> None:
    from biasleak.mechanisms.policy import ModelHistory
    from biasleak.mechanisms.policy.refuse_rules import _closest

    rng = np.random.default_rng(seed)
    n = 8
    base = rng.integers(0, 2, size=(3, n)).astype(np.float64)
    if soft:
        base = rng.uniform(size=(3, n))
    # rows near each other on purpose: copies of three bases with a few cells changed
    rows = base[rng.integers(0, 3, size=stored + models)].copy()
    cells = rng.random(rows.shape) < 0.15
    rows[cells] = rng.uniform(size=int(cells.sum())) if soft else 1.0 - rows[cells]
    history = None
    if stored:
        history = ModelHistory(10, n)
        history.add(rows[:stored])
    past = history.rows() if history is not None else np.empty((0, n), np.float32)
    h = rows[stored:]
    expected = _closest_every_pair(h, past, threshold)
    found = _closest(h, history, threshold)
    if expected is None:
        assert found is None
    else:
        i, j, dist = expected
        what = "an earlier model" if j < stored else f"model {j - stored} of the same query"
        assert found is not None and found.startswith(f"model {i} is at L1 distance {dist:.3g}")
        assert what in found
