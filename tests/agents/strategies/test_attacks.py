"""The Attribute-Reveal attacks of the paper's section 3, driven by a scripted compliance team.

Each strategy is played against a loop in this file that answers its queries with the exact
metric (from :mod:`biasleak.mechanisms.metrics`) on a protected vector and labels only the test
holds, or refuses them. Expected values come from the paper's formulas: ``SP = H v`` with
``v_j = 1/N1`` (a = 1) or ``-1/N0`` (a = 0), leakage ``50 (N_A/N1 + N_B/N0)``. Then the
scenario-level checks: bad strategy parameters are scenario errors, and every attack end to end.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from biasleak.agents.messages import Refusal
from biasleak.agents.models import train_base_model
from biasleak.agents.public import PublicData, PublicView
from biasleak.agents.strategies import (
    DeveloperContext,
    Stop,
    Strategy,
    Submit,
    build_strategy,
)
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
    EoRevealConfig,
    EqualizedOddsRevealConfig,
)
from biasleak.agents.strategies.decoders import decode_statistical_parity
from biasleak.agents.strategies.full_rank import FullRank, FullRankConfig, solve_structured
from biasleak.agents.strategies.partition import AbsSpPartition, AbsSpPartitionConfig
from biasleak.agents.strategies.targeted import (
    Differencing,
    DifferencingConfig,
    SingleQuery,
    SingleQueryConfig,
)
from biasleak.mechanisms import metrics
from biasleak.sim import datasets
from biasleak.sim.datasets import AuditData
from biasleak.sim.runlog import read_log
from biasleak.sim.scenario import ScenarioError, parse_scenario
from biasleak.sim.world import run_scenario

# -- helpers: data, contexts and the scripted compliance team ------------------------------------


@lru_cache(maxsize=4)
def _synthetic(n: int, n0: int, seed: int) -> tuple[AuditData, NDArray[np.float64]]:
    """A synthetic data set and its base model's predictions on the audit set."""
    data = datasets.make_synthetic(n=n, n0=n0, seed=seed)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    return data, h0


def _synthetic_context(n: int, n0: int, seed: int = 0) -> tuple[DeveloperContext, AuditData]:
    data, h0 = _synthetic(n, n0, seed)
    return DeveloperContext(data.public, h0.copy(), np.random.default_rng(seed + 100)), data


def _hand_context(
    n: int,
    *,
    labels: NDArray[np.integer] | None = None,
    base: NDArray[np.float64] | None = None,
    seed: int = 0,
) -> DeveloperContext:
    """A hand-made public data set of n people (two numeric features, given or random labels)."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.5) if labels is None else np.asarray(labels)
    view = PublicView(
        rng.standard_normal((n, 2)).astype(object), y.astype(np.int8), ("x0", "x1"), ()
    )
    public = PublicData("hand", "group", view, view)
    h0 = rng.uniform(0.05, 0.95, n) if base is None else np.asarray(base, dtype=np.float64)
    return DeveloperContext(public, h0, np.random.default_rng(seed + 1))


def _protected(n: int, zeros: list[int] | NDArray[np.integer]) -> NDArray[np.int8]:
    a = np.ones(n, dtype=np.int8)
    a[np.asarray(zeros, dtype=int)] = 0
    return a


def _v(a: NDArray[np.integer]) -> NDArray[np.float64]:
    """The paper's v: 1/N1 for a = 1, -1/N0 for a = 0 (computed here, not by the library)."""
    a = np.asarray(a)
    n1, n0 = int(np.sum(a == 1)), int(np.sum(a == 0))
    return np.where(a == 1, 1.0 / n1, -1.0 / n0)


def _leakage(guess: NDArray[np.integer], truth: NDArray[np.integer]) -> float:
    """Definition 1: 50 (N_A/N1 + N_B/N0), in percent."""
    guess, truth = np.asarray(guess), np.asarray(truth)
    n1, n0 = int(np.sum(truth == 1)), int(np.sum(truth == 0))
    n_a = int(np.sum((guess == 1) & (truth == 1)))
    n_b = int(np.sum((guess == 0) & (truth == 0)))
    return 50.0 * (n_a / n1 + n_b / n0)


Refuse = Callable[[int, Submit], bool]


def _drive(
    strategy: Strategy,
    protected: NDArray[np.integer],
    labels: NDArray[np.integer] | None = None,
    *,
    refuse: Refuse | None = None,
    after_answer: Callable[[Strategy], None] | None = None,
    limit: int = 10_000,
) -> list[Submit]:
    """Play the compliance team: answer every query exactly, or refuse those ``refuse`` picks.

    Returns the queries the strategy submitted, in order (refused ones included).
    """
    sent: list[Submit] = []
    now = 0.0
    for _ in range(limit):
        action = strategy.next_action(now)
        if isinstance(action, Stop):
            return sent
        assert isinstance(action, Submit), action
        sent.append(action)
        now += action.prepare_hours + 0.1
        if refuse is not None and refuse(len(sent) - 1, action):
            strategy.on_refusal(Refusal("q", "low_support", "scripted refusal"), now)
            continue
        values = metrics.evaluate(
            action.metric, action.predictions, protected=protected, labels=labels
        )
        strategy.on_answer(np.asarray(values, dtype=np.float64), now)
        if after_answer is not None:
            after_answer(strategy)
    raise AssertionError(f"the strategy did not stop within {limit} actions")


# -- 1. single query (Example 1) -----------------------------------------------------------------


@pytest.mark.parametrize("zeros", [[2, 5, 11, 17], list(range(4, 30))], ids=["n1_big", "n0_big"])
def test_single_query_reveals_each_target_and_guesses_the_majority(zeros: list[int]) -> None:
    n = 40
    a = _protected(n, zeros)
    n1, n0 = int(a.sum()), n - int(a.sum())
    targets = [0, 2, 5, 20, 39]
    context = _hand_context(n)
    strategy = build_strategy(SingleQueryConfig(targets=targets), context)
    assert isinstance(strategy, SingleQuery)
    sent = _drive(strategy, a)
    assert len(sent) == len(targets)
    for query, j in zip(sent, targets, strict=True):
        assert query.metric == "sp"
        assert query.predictions.shape == (1, n)
        assert np.flatnonzero(query.predictions[0]).tolist() == [j]
        expected = 1.0 / n1 if a[j] == 1 else -1.0 / n0
        assert strategy.values[j] == pytest.approx(expected, rel=1e-12)
    est = strategy.estimate
    assert est is not None
    assert est.models_used == len(targets)
    assert np.array_equal(est.attribute[targets], a[targets])
    assert np.all(est.confidence[targets] >= 1.0)
    expected_conf = np.where(a[targets] == 1, n / n1, n / n0)
    assert np.allclose(est.confidence[targets], expected_conf)
    others = np.setdiff1d(np.arange(n), targets)
    majority = 1 if n1 >= n0 else 0
    assert np.all(est.attribute[others] == majority)
    assert np.all(est.confidence[others] == 0.0)


def test_single_query_skips_a_refused_target() -> None:
    n = 30
    a = _protected(n, [1, 3, 4, 9])
    targets = [1, 3, 7, 8]
    strategy = build_strategy(SingleQueryConfig(targets=targets), _hand_context(n))
    sent = _drive(strategy, a, refuse=lambda i, _q: i == 1)  # target 3 refused
    assert [int(np.flatnonzero(q.predictions[0])[0]) for q in sent] == targets
    assert sorted(strategy.values) == [1, 7, 8]
    est = strategy.estimate
    assert est is not None
    assert est.models_used == 3
    assert np.array_equal(est.attribute[[1, 7, 8]], a[[1, 7, 8]])
    assert est.attribute[3] == 1 and est.confidence[3] == 0.0  # the majority guess, no confidence


# -- 2. differencing (Example 2) -----------------------------------------------------------------


@pytest.mark.parametrize("batch", [False, True])
def test_differencing_recovers_targets_within_one_person_of_accuracy(batch: bool) -> None:
    context, data = _synthetic_context(200, 20, seed=1)
    a = data.protected
    n = context.n
    minority = np.flatnonzero(a == 0)[:3].tolist()
    targets = [0, 1, 2, *minority, n - 1]
    strategy = build_strategy(DifferencingConfig(targets=targets, batch=batch), context)
    assert isinstance(strategy, Differencing)
    sent = _drive(strategy, a)
    h0 = context.base_predictions
    if batch:
        assert len(sent) == 1
        models = sent[0].predictions
        assert models.shape == (1 + len(targets), n)
        assert np.array_equal(models[0], h0)
        copies = models[1:]
    else:
        assert len(sent) == 1 + len(targets)
        assert np.array_equal(sent[0].predictions, h0[None, :])
        copies = np.vstack([q.predictions for q in sent[1:]])
    for row, j in zip(copies, targets, strict=True):
        differs = np.flatnonzero(row != h0)
        assert differs.tolist() == [j]
        assert row[j] == pytest.approx(1.0 - h0[j])
    v = _v(a)
    for j in targets:
        assert strategy.values[j] == pytest.approx(v[j], rel=1e-9)
    est = strategy.estimate
    assert est is not None
    assert np.array_equal(est.attribute[targets], a[targets])
    assert np.all(est.confidence[targets] >= 1.0)
    report = strategy.report()
    assert report["bound_1_over_n"] == pytest.approx(1.0 / n)
    assert report["max_accuracy_difference"] <= report["bound_1_over_n"] + 1e-12
    # each copy flips exactly one decision (no h0_j is exactly 1/2 here), so the bound is met
    assert report["max_accuracy_difference"] == pytest.approx(1.0 / n)
    labels = data.public.audit.labels == 1
    assert report["base_accuracy"] == pytest.approx(float(np.mean((h0 >= 0.5) == labels)))


def test_differencing_moves_a_half_prediction_to_one() -> None:
    n = 20
    base = np.linspace(0.1, 0.9, n)
    base[4] = 0.5
    base[9] = 0.5
    a = _protected(n, [4, 6])
    strategy = build_strategy(DifferencingConfig(targets=[4, 9]), _hand_context(n, base=base))
    sent = _drive(strategy, a)
    assert sent[1].predictions[0, 4] == 1.0
    assert sent[2].predictions[0, 9] == 1.0
    assert np.array_equal(strategy.changes, [0.5, 0.5])
    est = strategy.estimate
    assert est is not None
    assert est.attribute[4] == 0 and est.attribute[9] == 1
    assert strategy.values[4] == pytest.approx(-1.0 / 2)
    assert strategy.values[9] == pytest.approx(1.0 / (n - 2))


def test_differencing_stops_without_estimate_when_the_base_query_is_refused() -> None:
    n = 20
    a = _protected(n, [0, 1])
    strategy = build_strategy(DifferencingConfig(targets=[0, 5, 7]), _hand_context(n))
    sent = _drive(strategy, a, refuse=lambda i, _q: i == 0)
    assert len(sent) == 1
    assert isinstance(strategy.next_action(10.0), Stop)
    assert strategy.estimate is None
    assert strategy.values == {}


# -- 3. full rank (Theorem 3, Algorithm 1, Remark 3) ---------------------------------------------


@pytest.fixture(scope="module")
def full_rank_runs() -> dict[str, Any]:
    context, data = _synthetic_context(300, 30, seed=2)
    variants = {
        "structured": FullRankConfig(),
        "sherman_morrison": FullRankConfig(base_query=False),
        "generic": FullRankConfig(decoder="generic"),
        "skip_last": FullRankConfig(skip_last=True),
    }
    out: dict[str, Any] = {"context": context, "a": data.protected}
    for name, cfg in variants.items():
        strategy = build_strategy(cfg, context)
        assert isinstance(strategy, FullRank)
        out[name] = (strategy, _drive(strategy, data.protected))
    return out


@pytest.mark.parametrize(
    ("variant", "method", "models"),
    [
        ("structured", "structured", 301),
        ("sherman_morrison", "sherman_morrison", 300),
        ("generic", "generic", 301),
        ("skip_last", "structured", 300),
    ],
)
def test_full_rank_recovers_everyone(
    full_rank_runs: dict[str, Any], variant: str, method: str, models: int
) -> None:
    a = full_rank_runs["a"]
    n = a.size
    strategy, sent = full_rank_runs[variant]
    assert sum(q.predictions.shape[0] for q in sent) == models
    est = strategy.estimate
    assert est is not None
    assert est.method == method
    assert est.models_used == models
    assert np.array_equal(est.attribute, a)
    assert _leakage(est.attribute, a) == 100.0
    n1, n0 = int(a.sum()), n - int(a.sum())
    expected_conf = np.where(a == 1, n / n1, n / n0)
    assert np.allclose(est.confidence, expected_conf, rtol=1e-6)
    report = strategy.report()
    assert (report["decoder"], report["models"], report["answered"]) == (method, models, models)


def test_full_rank_variants_agree(full_rank_runs: dict[str, Any]) -> None:
    names = ["structured", "sherman_morrison", "generic", "skip_last"]
    estimates = [full_rank_runs[k][0].estimate for k in names]
    for est in estimates[1:]:
        assert np.array_equal(est.attribute, estimates[0].attribute)
        assert np.allclose(est.confidence, estimates[0].confidence, rtol=1e-6)


def test_full_rank_models_are_flips_of_the_base(full_rank_runs: dict[str, Any]) -> None:
    h0 = full_rank_runs["context"].base_predictions
    _, sent = full_rank_runs["skip_last"]
    models = np.vstack([q.predictions for q in sent])
    assert np.array_equal(models[0], h0)  # the base query first
    flips = models[1:]
    n = h0.size
    assert flips.shape == (n - 1, n)  # Remark 3: the last person is never queried
    diff = flips - h0[None, :]
    off_diagonal = diff.copy()
    off_diagonal[np.arange(n - 1), np.arange(n - 1)] = 0.0
    assert np.all(off_diagonal == 0.0)
    assert np.allclose(np.diag(diff[:, : n - 1]), 1.0 - 2.0 * h0[: n - 1])


def test_structured_solve_matches_the_formed_matrix() -> None:
    rng = np.random.default_rng(7)
    for n in (5, 40, 200):
        h0 = rng.uniform(0.0, 1.0, n)
        d = rng.choice([-1.0, 1.0], n) * rng.uniform(0.1, 1.0, n)
        sp = rng.standard_normal(n)
        H = np.ones((n, 1)) @ h0[None, :] + np.diag(d)
        solved = solve_structured(h0, d, sp)
        assert solved is not None
        assert np.allclose(solved, np.linalg.solve(H, sp), rtol=1e-8, atol=1e-10)
        assert np.allclose(H @ solved, sp)


def test_full_rank_estimate_grows_batch_by_batch() -> None:
    context, data = _synthetic_context(300, 30, seed=2)
    a = data.protected
    strategy = build_strategy(FullRankConfig(batch=100), context)
    seen: list[tuple[int, int]] = []

    def check(s: Strategy) -> None:
        est = s.estimate
        assert est is not None
        decoded = est.models_used - 1  # the base model is the first answer
        seen.append((est.models_used, s.estimate_version))
        assert np.array_equal(est.attribute[:decoded], a[:decoded])
        assert np.all(est.confidence[:decoded] >= 1.0)
        assert np.all(est.attribute[decoded:] == 1)
        assert np.all(est.confidence[decoded:] == 0.0)

    sent = _drive(strategy, a, after_answer=check)
    assert [q.predictions.shape[0] for q in sent] == [100, 100, 100, 1]
    assert seen == [(100, 1), (200, 2), (300, 3), (301, 4)]
    assert strategy.estimate is not None and np.array_equal(strategy.estimate.attribute, a)


# -- 4. compressed sensing (Theorem 5, Algorithm 2, Remark 4) ------------------------------------

CS_N, CS_N0, CS_M = 1000, 50, 300


@pytest.mark.parametrize(
    ("decoder", "box", "method"),
    [("auto", False, "omp"), ("basis_pursuit", True, "box")],
)
def test_compressed_sensing_recovers_everyone(decoder: str, box: bool, method: str) -> None:
    context, data = _synthetic_context(CS_N, CS_N0, seed=3)
    a = data.protected
    cfg = CompressedSensingConfig(queries=CS_M, batch=100, decoder=decoder, box=box)
    strategy = build_strategy(cfg, context)
    assert isinstance(strategy, CompressedSensing)
    sent = _drive(strategy, a)
    probe = sent[0]
    assert probe.label == "probe"
    assert np.flatnonzero(probe.predictions[0]).tolist() == [0]
    assert strategy.group_sizes == [(CS_N - CS_N0, CS_N0)]
    assert strategy.group_sizes_source == "probe"
    models = np.vstack([q.predictions for q in sent[1:]])
    assert models.shape == (CS_M, CS_N)
    assert np.all(np.abs(models - context.base_predictions[None, :]) <= 0.1 + 1e-12)
    est = strategy.estimate
    assert est is not None
    assert est.method == method
    assert est.models_used == CS_M
    assert np.array_equal(est.attribute, a)
    assert _leakage(est.attribute, a) == 100.0
    assert np.all(est.confidence > 0.5)
    report = strategy.report()
    assert report["reachable"] == CS_N
    assert report["models_answered"] == CS_M


def test_compressed_sensing_falls_back_to_the_prior_when_the_probe_is_refused() -> None:
    context, data = _synthetic_context(CS_N, CS_N0, seed=3)
    a = data.protected
    default = build_strategy(CompressedSensingConfig(queries=10, batch=10), context)
    _drive(default, a, refuse=lambda i, _q: i == 0)
    assert default.group_sizes == [(CS_N - 100, 100)]  # prior_minority 0.1 of 1000
    assert default.group_sizes_source == "prior"
    # with the right prior the attack needs no probe answer at all
    cfg = CompressedSensingConfig(queries=CS_M, batch=150, prior_minority=CS_N0 / CS_N)
    strategy = build_strategy(cfg, context)
    sent = _drive(strategy, a, refuse=lambda i, _q: i == 0)
    assert sent[0].label == "probe" and len(sent) == 3
    assert strategy.group_sizes == [(CS_N - CS_N0, CS_N0)]
    assert strategy.group_sizes_source == "prior"
    assert strategy.estimate is not None
    assert np.array_equal(strategy.estimate.attribute, a)


def test_compressed_sensing_decode_every_batch_publishes_estimates() -> None:
    context, data = _synthetic_context(CS_N, CS_N0, seed=3)
    a = data.protected
    cfg = CompressedSensingConfig(queries=CS_M, batch=100, decode_every=1)
    strategy = build_strategy(cfg, context)
    seen: list[tuple[int, int]] = []

    def record(s: Strategy) -> None:
        if s.estimate is not None:
            seen.append((s.estimate.models_used, s.estimate_version))

    sent = _drive(strategy, a, after_answer=record)
    assert len(sent) == 1 + CS_M // 100
    # the probe answer publishes nothing; each batch publishes one more estimate
    assert seen == [(100, 1), (200, 2), (300, 3)]
    assert strategy.estimate is not None
    assert np.array_equal(strategy.estimate.attribute, a)


# -- 5. absolute statistical parity partition (Theorem 7) ----------------------------------------


def test_abs_sp_partition_case_1_unequal_groups() -> None:
    n = 50
    for zeros in ([0, 3, 8, 21, 40], [3, 8, 21, 40, 44, 49]):  # person 0 in either group
        a = _protected(n, zeros)
        strategy = build_strategy(AbsSpPartitionConfig(batch=20), _hand_context(n))
        assert isinstance(strategy, AbsSpPartition)
        sent = _drive(strategy, a)
        assert all(q.metric == "abs_sp" for q in sent)
        assert sum(q.predictions.shape[0] for q in sent) == n  # at most n models
        assert np.flatnonzero(sent[0].predictions[0]).tolist() == [0]
        for q in sent[1:]:
            assert np.all(q.predictions.sum(axis=1) == 1.0)  # single-person models
            assert np.all(q.predictions[:, 0] == 0.0)
        n_alpha = int(np.sum(a == a[0]))
        assert strategy.n_alpha == n_alpha
        report = strategy.report()
        assert (report["case"], report["n_alpha"], report["partitioned"]) == (1, n_alpha, n)
        est = strategy.estimate
        assert est is not None
        assert np.array_equal(est.attribute, a)  # the smaller part is the disadvantaged one
        assert _leakage(est.attribute, a) == 100.0
        assert np.allclose(est.confidence, 1.0)


def test_abs_sp_partition_case_1_inverted_when_the_advantaged_group_is_smaller() -> None:
    n = 50
    a = np.zeros(n, dtype=np.int8)
    a[[1, 5, 9, 30, 31, 47]] = 1  # the advantaged group is the small one
    strategy = build_strategy(AbsSpPartitionConfig(), _hand_context(n))
    _drive(strategy, a)
    est = strategy.estimate
    assert est is not None
    assert np.array_equal(est.attribute, 1 - a)
    leak = _leakage(est.attribute, a)
    assert leak == 0.0
    assert max(leak, 100.0 - leak) == 100.0


def test_abs_sp_partition_without_smaller_is_disadvantaged_labels_person_0_advantaged() -> None:
    n = 50
    a = np.zeros(n, dtype=np.int8)
    a[[1, 5, 9, 30, 31, 47]] = 1  # advantaged group smaller; person 0 disadvantaged
    cfg = AbsSpPartitionConfig(smaller_is_disadvantaged=False)
    strategy = build_strategy(cfg, _hand_context(n))
    _drive(strategy, a)
    est = strategy.estimate
    assert est is not None
    assert np.array_equal(est.attribute, 1 - a)
    leak = _leakage(est.attribute, a)
    assert (leak, max(leak, 100.0 - leak)) == (0.0, 100.0)
    a[0] = 1  # now person 0's (smaller) part really is advantaged
    strategy = build_strategy(cfg, _hand_context(n))
    _drive(strategy, a)
    assert strategy.estimate is not None
    assert _leakage(strategy.estimate.attribute, a) == 100.0


@pytest.mark.parametrize("a0", [1, 0])
def test_abs_sp_partition_case_2_equal_groups(a0: int) -> None:
    n = 40
    rng = np.random.default_rng(5)
    a = np.zeros(n, dtype=np.int8)
    a[rng.permutation(n)[:20]] = 1
    if a[0] != a0:
        a = 1 - a
    assert int(a.sum()) == 20
    strategy = build_strategy(AbsSpPartitionConfig(batch=15), _hand_context(n))
    sent = _drive(strategy, a)
    assert strategy.equal
    assert strategy.report()["case"] == 2
    assert sum(q.predictions.shape[0] for q in sent) == n
    for q in sent[1:]:
        assert np.all(q.predictions[:, 0] == 1.0)  # person 0 ...
        assert np.all(q.predictions.sum(axis=1) == 2.0)  # ... and exactly one other person
    est = strategy.estimate
    assert est is not None
    same = est.attribute == est.attribute[0]
    assert np.array_equal(same, a == a[0])
    leak = _leakage(est.attribute, a)
    assert max(leak, 100.0 - leak) == 100.0
    assert leak == (100.0 if a0 == 1 else 0.0)  # person 0's part is labelled advantaged


# -- 6. equal opportunity and equalized odds (Remark 5) ------------------------------------------


def test_eo_reveal_reaches_exactly_the_positive_labels() -> None:
    context, data = _synthetic_context(CS_N, CS_N0, seed=3)
    a, y = data.protected, data.public.audit.labels
    positive = y == 1
    strategy = build_strategy(EoRevealConfig(queries=CS_M, batch=150), context)
    sent = _drive(strategy, a, y)
    assert all(q.metric == "eo" for q in sent)
    assert np.flatnonzero(sent[0].predictions[0]).tolist() == [int(np.flatnonzero(positive)[0])]
    n11, n10 = int(np.sum(positive & (a == 1))), int(np.sum(positive & (a == 0)))
    assert strategy.group_sizes == [(n11, n10)]
    report = strategy.report()
    assert report["reachable"] == int(positive.sum())
    est = strategy.estimate
    assert est is not None
    assert np.array_equal(est.attribute[positive], a[positive])
    assert np.all(est.confidence[positive] > 0.5)
    assert np.all(est.attribute[~positive] == 1)
    assert np.all(est.confidence[~positive] == 0.0)


def test_equalized_odds_reveal_recovers_both_label_classes() -> None:
    context, data = _synthetic_context(CS_N, CS_N0, seed=3)
    a, y = data.protected, data.public.audit.labels
    strategy = build_strategy(EqualizedOddsRevealConfig(queries=CS_M, batch=150), context)
    sent = _drive(strategy, a, y)
    assert all(q.metric == "eodds" for q in sent)
    probe = np.flatnonzero(sent[0].predictions[0])
    assert probe.size == 2
    assert sorted(y[probe].tolist()) == [0, 1]
    assert probe.tolist() == sorted([int(np.argmax(y == 1)), int(np.argmax(y == 0))])
    sizes = [(int(np.sum((y == c) & (a == 1))), int(np.sum((y == c) & (a == 0)))) for c in (1, 0)]
    assert strategy.group_sizes == sizes
    assert strategy.report()["reachable"] == CS_N
    est = strategy.estimate
    assert est is not None
    assert np.array_equal(est.attribute, a)
    assert _leakage(est.attribute, a) == 100.0


# -- 7. decoders agree on exact answers ----------------------------------------------------------


def _decoder_instance(n1: int, n0: int, m: int, seed: int) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(seed)
    n = n1 + n0
    a = np.ones(n, dtype=np.int8)
    a[rng.permutation(n)[:n0]] = 0
    h0 = rng.uniform(0.0, 1.0, n)
    H = np.clip(h0[None, :] + rng.uniform(-0.1, 0.1, (m, n)), 0.0, 1.0)
    sp = metrics.statistical_parity(H, protected=a)
    return a, H, sp


@pytest.mark.parametrize(
    ("method", "box", "used"),
    [
        ("auto", False, "omp"),
        ("omp", False, "omp"),
        ("basis_pursuit", False, "basis_pursuit"),
        ("basis_pursuit", True, "box"),
        ("box", False, "box"),
        ("lp_decoding", False, "lp_decoding"),
        ("cvxpy", False, "cvxpy"),
    ],
)
def test_decoders_recover_the_truth(method: str, box: bool, used: str) -> None:
    a, H, sp = _decoder_instance(380, 20, 200, seed=11)
    with warnings.catch_warnings():
        # CLARABEL reports "optimal_inaccurate" on these (degenerate) programs although the
        # solution is right to ~1e-7 relative; cvxpy turns that into a UserWarning
        warnings.filterwarnings("ignore", "Solution may be inaccurate", UserWarning)
        result = decode_statistical_parity(H, sp, n1=380, n0=20, method=method, box=box)
    assert result.method == used
    assert np.array_equal(result.attribute, a)
    c = 1.0 / 380 + 1.0 / 20
    expected_s = np.where(a == 0, c, 0.0)  # the sparse vector: c on the small group
    assert np.allclose(result.s, expected_s, atol=1e-4 * c)


@pytest.mark.parametrize("method", ["auto", "basis_pursuit"])
def test_decoder_uses_the_smaller_group_when_the_advantaged_group_is_small(method: str) -> None:
    a, H, sp = _decoder_instance(20, 380, 200, seed=12)
    assert int(a.sum()) == 20
    result = decode_statistical_parity(H, sp, n1=20, n0=380, method=method)
    assert np.array_equal(result.attribute, a)
    assert np.count_nonzero(result.s > (1.0 / 20 + 1.0 / 380) / 2) == 20


# -- 8. bad strategy parameters are scenario errors ----------------------------------------------

SCENARIO = """
name: attack-errors
seed: 1
horizon_days: 1
data: {dataset: synthetic, n: 50, minority: 8}
developers:
  - id: mallory
    organization: acme
    strategy: STRATEGY
compliance:
  metrics: [sp]
"""


def _scenario_text(strategy: str) -> str:
    return SCENARIO.replace("STRATEGY", strategy)


@pytest.mark.parametrize(
    ("strategy", "key", "words"),
    [
        ("{kind: compressed_sensing, queries: 0}", "queries", "greater than or equal to 1"),
        ("{kind: compressed_sensing, perturbation: 0}", "perturbation", "greater than 0"),
        ("{kind: full_rank, batch: 0}", "batch", "greater than or equal to 1"),
        ("{kind: compressed_sensing, batch: 0}", "batch", "greater than or equal to 1"),
        ("{kind: compressed_sensing, decoder: lp}", "decoder", "'lp' is not allowed"),
        ("{kind: single_query, target: [3]}", "target", "did you mean 'targets'"),
        ("{kind: differencing, target: [3]}", "target", "did you mean 'targets'"),
    ],
)
def test_bad_strategy_parameters_are_scenario_errors(strategy: str, key: str, words: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_scenario_text(strategy), source="s.yaml")
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"s.yaml:9: developers.0.strategy.{key}: "), problems
    assert words in problems[0]


@pytest.mark.parametrize(
    ("strategy", "words"),
    [
        ("{kind: single_query, targets: [-1]}", "targets must be audit-set indices"),
        ("{kind: differencing, targets: [3, 50]}", "targets must be audit-set indices"),
    ],
)
def test_bad_strategy_construction_is_a_setup_error(
    strategy: str, words: str, tmp_path: Path
) -> None:
    scenario = parse_scenario(_scenario_text(strategy))  # fine at parse time
    data, h0 = _synthetic(50, 8, 0)
    context = DeveloperContext(data.public, h0, np.random.default_rng(0))
    with pytest.raises(ValueError, match=words):
        build_strategy(scenario.developers[0].strategy, context)
    result = run_scenario(scenario, log_dir=tmp_path)
    errors = [e for e in read_log(result.log_path) if e.get("event") == "strategy_error"]
    assert len(errors) == 1
    assert errors[0]["agent"] == "mallory"
    assert errors[0]["during"] == "setup"
    assert errors[0]["error"].startswith("ValueError: ")
    assert words in errors[0]["error"]
    mallory = result.summary["developers"]["mallory"]
    assert words in mallory["error"]
    # an attacker that never formed an estimate is scored at its prior guess, a coin flip
    assert mallory["sent"] == 0 and mallory["estimated"] is False
    assert mallory["leakage"] == 50.0


# -- 9. every attack end to end ------------------------------------------------------------------

E2E = """
name: all-attacks
seed: 4
horizon_days: 5
data: {dataset: synthetic, n: 300, minority: 30}
developers:
  - {id: sq, organization: o1, strategy: {kind: single_query, targets: TARGETS}}
  - {id: diff, organization: o2, strategy: {kind: differencing, targets: TARGETS}}
  - {id: fr, organization: o3, strategy: {kind: full_rank}}
  - id: cs
    organization: o4
    strategy: {kind: compressed_sensing, queries: 200, batch: 100}
  - {id: part, organization: o5, strategy: {kind: abs_sp_partition}}
  - id: eodds
    organization: o6
    strategy: {kind: equalized_odds_reveal, queries: 200, batch: 100}
  - id: eo
    organization: o7
    strategy: {kind: eo_reveal, queries: 200, batch: 100}
compliance:
  metrics: [sp, abs_sp, eo, eodds]
"""


def test_every_attack_end_to_end(tmp_path: Path) -> None:
    data = datasets.make_synthetic(n=300, n0=30, seed=4)  # the scenario's data (seed = run seed)
    minority = np.flatnonzero(data.protected == 0)[:3].tolist()
    targets = [0, 1, 2, *minority, 299]
    scenario = parse_scenario(E2E.replace("TARGETS", str(targets)))
    result = run_scenario(scenario, log_dir=tmp_path)
    devs = result.summary["developers"]
    assert all(d["error"] is None for d in devs.values()), devs
    for ident in ("fr", "cs", "eodds"):
        assert devs[ident]["leakage"] == 100.0, ident
        assert devs[ident]["revealed"] == 300, ident
    assert devs["part"]["leakage_relabelled"] == 100.0
    assert devs["part"]["answered"] == 300
    assert devs["fr"]["answered"] == 301
    assert devs["cs"]["answered"] == 201
    for ident in ("sq", "diff"):
        assert devs[ident]["confident_right"] == len(targets), ident
        assert devs[ident]["confident_wrong"] == 0, ident
    assert devs["sq"]["answered"] == len(targets)
    assert devs["diff"]["answered"] == len(targets) + 1
    positive = int(np.sum(data.public.audit.labels == 1))
    assert devs["eo"]["confident_right"] == positive
    assert devs["eo"]["confident_wrong"] == 0
    assert all(d["refused"] == {} for d in devs.values())
