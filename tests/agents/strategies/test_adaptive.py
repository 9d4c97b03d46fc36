"""Adaptive adversaries against a scripted compliance team: each adaptation, triggered by its reply.

Every strategy of :mod:`biasleak.agents.strategies.adaptive` and :mod:`~.sybil` is played against a
loop in this file that stands in for the compliance team. It computes the exact metric (from
:mod:`biasleak.mechanisms.metrics`) on a protected vector and labels that only the test holds,
and then replies as each test scripts it: the exact values, values with fresh Laplace noise,
cached values, or a refusal with a chosen reason, detail and ``retry_after``. Each test checks that
the reply that should trigger an adaptation triggers it - and that the others do not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
import pytest
from numpy.typing import NDArray

from biasleak.agents.models import train_base_model
from biasleak.agents.public import PublicData, PublicView
from biasleak.agents.strategies import (
    DeveloperContext,
    Stop,
    Strategy,
    Submit,
    Wait,
    build_strategies,
    build_strategy,
)
from biasleak.agents.strategies.adaptive import (
    JITTER,
    NOISE_CHECKS,
    Averaging,
    AveragingConfig,
    BudgetAware,
    BudgetAwareConfig,
    Evasive,
    EvasiveConfig,
    MetricSwitching,
    MetricSwitchingConfig,
    NoiseProbe,
    NoiseProbeConfig,
    ProxyPrior,
    ProxyPriorConfig,
    SequentialCS,
    SequentialCSConfig,
)
from biasleak.agents.strategies.decoders import decode_statistical_parity
from biasleak.agents.strategies.noise_model import NoiseModel
from biasleak.agents.strategies.sybil import SybilConfig, SybilShard, sybil_shards
from biasleak.mechanisms import metrics
from biasleak.sim import datasets
from biasleak.sim.datasets import AuditData

# -- helpers: data, contexts and the scripted compliance team ------------------------------------

N, N0 = 200, 10
"""The small synthetic instance most tests use: 200 people, 10 of them disadvantaged."""


@lru_cache(maxsize=8)
def _synthetic(
    n: int, n0: int, seed: int, shift: float = 0.0
) -> tuple[AuditData, NDArray[np.float64]]:
    """A synthetic data set and its base model's predictions on the audit set."""
    data = datasets.make_synthetic(n=n, n0=n0, seed=seed, group_shift=shift)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    return data, h0


def _context(
    n: int = N, n0: int = N0, seed: int = 0, *, shift: float = 0.0, proxy: PublicView | None = None
) -> tuple[DeveloperContext, AuditData]:
    data, h0 = _synthetic(n, n0, seed, shift)
    rng = np.random.default_rng(seed + 100)
    return DeveloperContext(data.public, h0.copy(), rng, proxy), data


def _hand_context(n: int, base: NDArray[np.float64], seed: int = 0) -> DeveloperContext:
    """A hand-made public data set of n people (two numeric features) with base predictions."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.5).astype(np.int8)
    view = PublicView(rng.standard_normal((n, 2)).astype(object), y, ("x0", "x1"), ())
    public = PublicData("hand", "group", view, view)
    return DeveloperContext(public, np.asarray(base, dtype=np.float64), rng)


def _leakage(guess: NDArray[np.integer], truth: NDArray[np.integer]) -> float:
    """Definition 1: 50 (N_A/N1 + N_B/N0), in percent (computed here, not by the library)."""
    guess, truth = np.asarray(guess), np.asarray(truth)
    n1, n0 = int(np.sum(truth == 1)), int(np.sum(truth == 0))
    n_a = int(np.sum((guess == 1) & (truth == 1)))
    n_b = int(np.sum((guess == 0) & (truth == 0)))
    return 50.0 * (n_a / n1 + n_b / n0)


@dataclass(frozen=True)
class Refusal:
    """A scripted refusal: what the developer process hands to ``on_refusal``."""

    reason: str
    detail: str = "scripted refusal"
    retry_after: float | None = None


Reply = NDArray[np.float64] | Refusal
Script = Callable[[int, Submit, NDArray[np.float64]], Reply]
"""(index of the query, the query, its exact values) -> the compliance team's reply."""


def _exact(i: int, query: Submit, values: NDArray[np.float64]) -> Reply:
    return values


def _laplace(scale: float, seed: int) -> Script:
    """Fresh Laplace noise of scale ``scale`` on every answered value."""
    rng = np.random.default_rng(seed)

    def reply(i: int, query: Submit, values: NDArray[np.float64]) -> Reply:
        return values + rng.laplace(0.0, scale, values.shape)

    return reply


def _cached_laplace(scale: float, seed: int) -> Script:
    """Laplace noise, but a model asked before gets its earlier answer again (a cache)."""
    rng = np.random.default_rng(seed)
    cache: dict[tuple[str, bytes], NDArray[np.float64]] = {}

    def reply(i: int, query: Submit, values: NDArray[np.float64]) -> Reply:
        out = []
        for row, value in zip(query.predictions, values, strict=True):
            key = (query.metric, np.ascontiguousarray(row).tobytes())
            if key not in cache:
                cache[key] = value + rng.laplace(0.0, scale, np.shape(value))
            out.append(cache[key])
        return np.asarray(out, dtype=np.float64)

    return reply


def _refusing(refuse: Callable[[int, Submit], Refusal | None], then: Script = _exact) -> Script:
    """Refuse the queries ``refuse`` picks (with its refusal); reply to the others with ``then``."""

    def reply(i: int, query: Submit, values: NDArray[np.float64]) -> Reply:
        refusal = refuse(i, query)
        return refusal if refusal is not None else then(i, query, values)

    return reply


@dataclass
class Transcript:
    """What happened between the strategy and the scripted compliance team."""

    sent: list[Submit] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    """When each reply was handed to the strategy."""
    waits: list[Wait] = field(default_factory=list)
    stop: Stop | None = None

    def answered(self, label: str) -> tuple[list[Submit], list[NDArray[np.float64]]]:
        """The answered queries whose label starts with ``label``, and their answers."""
        pairs = [
            (q, r)
            for q, r in zip(self.sent, self.replies, strict=True)
            if q.label.startswith(label) and not isinstance(r, Refusal)
        ]
        return [q for q, _ in pairs], [np.asarray(r) for _, r in pairs]


def _drive(
    strategy: Strategy,
    protected: NDArray[np.integer],
    labels: NDArray[np.integer] | None = None,
    script: Script = _exact,
    *,
    after_answer: Callable[[Strategy], None] | None = None,
    limit: int = 5_000,
) -> Transcript:
    """Play the compliance team until the strategy stops; a Wait moves the clock to its time."""
    log = Transcript()
    now = 0.0
    for _ in range(limit):
        action = strategy.next_action(now)
        if isinstance(action, Stop):
            log.stop = action
            return log
        if isinstance(action, Wait):
            assert action.until > now, action
            log.waits.append(action)
            now = action.until
            continue
        assert isinstance(action, Submit), action
        # keep what was sent: a strategy may later change the arrays its Submit points into
        action = replace(action, predictions=np.array(action.predictions, dtype=np.float64))
        log.sent.append(action)
        now += action.prepare_hours + 0.1
        exact = metrics.evaluate(
            action.metric, action.predictions, protected=protected, labels=labels
        )
        reply = script(len(log.sent) - 1, action, np.asarray(exact, dtype=np.float64))
        log.replies.append(reply)
        log.times.append(now)
        if isinstance(reply, Refusal):
            strategy.on_refusal(reply, now)  # type: ignore[arg-type]  # same fields
        else:
            strategy.on_answer(np.asarray(reply, dtype=np.float64), now)
            if after_answer is not None:
                after_answer(strategy)
    raise AssertionError(f"the strategy did not stop within {limit} actions")


def _is_probe(query: Submit) -> bool:
    return query.label == "probe"


# -- 1. noise probe --------------------------------------------------------------------------------


def _reason(reason: str | None) -> Refusal | None:
    return Refusal(reason) if reason is not None else None


def test_noise_probe_calls_identical_answers_repeatable() -> None:
    context = _hand_context(50, np.linspace(0.05, 0.95, 50))
    a = np.ones(50, dtype=np.int8)
    a[[3, 7, 20]] = 0
    strategy = build_strategy(NoiseProbeConfig(repeats=4), context)
    assert isinstance(strategy, NoiseProbe)
    log = _drive(strategy, a)
    assert len(log.sent) == 4
    for query in log.sent:  # the same model every time: the base model
        assert query.metric == "sp"
        assert np.array_equal(query.predictions, context.base_predictions[None, :])
    report = strategy.report()
    assert report["verdict"] == "repeatable"
    assert log.stop is not None and log.stop.reason == "repeatable"
    assert len(set(report["answers"])) == 1
    assert report["scale_estimate"] == 0.0
    assert report["refused"] == []


def test_noise_probe_sees_fresh_noise_and_estimates_its_scale() -> None:
    scale = 0.02
    context = _hand_context(50, np.linspace(0.05, 0.95, 50))
    a = np.ones(50, dtype=np.int8)
    a[[3, 7, 20]] = 0
    strategy = NoiseProbe(NoiseProbeConfig(repeats=400), context)
    log = _drive(strategy, a, script=_laplace(scale, seed=1))
    report = strategy.report()
    assert report["verdict"] == "fresh_noise"
    assert log.stop is not None and log.stop.reason == "fresh_noise"
    assert len(report["answers"]) == 400
    # for Laplace noise of scale b the mean absolute deviation from the median is b
    assert report["scale_estimate"] == pytest.approx(scale, rel=0.15)


def test_noise_probe_records_refusals() -> None:
    context = _hand_context(50, np.linspace(0.05, 0.95, 50))
    a = np.ones(50, dtype=np.int8)
    a[[3, 7]] = 0
    strategy = NoiseProbe(NoiseProbeConfig(repeats=3), context)
    reasons = {0: "rate_limited", 2: "budget_exhausted"}
    log = _drive(strategy, a, script=_refusing(lambda i, _q: _reason(reasons.get(i))))
    assert len(log.sent) == 3  # refusals count towards the repeats
    report = strategy.report()
    assert report["refused"] == ["rate_limited", "budget_exhausted"]
    assert len(report["answers"]) == 1
    assert report["verdict"] == "undetermined"  # one answer tells nothing
    assert log.stop is not None and log.stop.reason == "undetermined"


# -- 2. averaging ----------------------------------------------------------------------------------


def _check_queries(log: Transcript) -> list[Submit]:
    return [q for q in log.sent if q.label == "cache check"]


@pytest.mark.parametrize("how", ["cache", "refused"])
def test_averaging_nudges_every_repeat_when_the_check_is_repeatable(how: str) -> None:
    context, data = _context()
    strategy = build_strategy(AveragingConfig(queries=20, repeats=5, batch=40), context)
    assert isinstance(strategy, Averaging)
    if how == "cache":  # equal answers to the two checks: a cache (or exact answers)
        script = _cached_laplace(0.01, seed=2)
    else:  # a refused check: assume the worst and nudge
        script = _refusing(
            lambda _i, q: Refusal("near_duplicate") if q.label == "cache check" else None
        )
    log = _drive(strategy, data.protected, script=script)
    checks = _check_queries(log)
    assert len(checks) == (2 if how == "cache" else 1)
    labels = [q.label for q in log.sent]
    assert labels[: 1 + len(checks)] == ["probe"] + ["cache check"] * len(checks)  # checks first
    if how == "cache":
        assert np.array_equal(log.replies[1], log.replies[2])
    for query in checks:
        assert np.array_equal(query.predictions, strategy.models[:1])
    assert strategy.jitter is True and strategy.report()["jitter"] is True
    batches, _ = log.answered("batch")
    assert len(batches) == len(strategy.batches) == 3
    for i, query in enumerate(batches):
        start, stop = strategy.batches[i]
        rows, bases = query.predictions, strategy.models[strategy.send[start:stop]]
        assert rows.shape == bases.shape
        assert np.abs(rows - bases).max() <= JITTER + 1e-12
        assert not np.any(np.all(rows == bases, axis=1))  # no row is its base model
        assert np.unique(rows, axis=0).shape[0] == rows.shape[0]  # the repeats are new models
    assert strategy.send.tolist() == np.repeat(np.arange(20), 5).tolist()


def test_averaging_sends_exact_repeats_when_the_check_sees_fresh_noise() -> None:
    context, data = _context()
    strategy = Averaging(AveragingConfig(queries=20, repeats=5, batch=40), context)
    log = _drive(strategy, data.protected, script=_laplace(0.01, seed=3))
    assert [q.label for q in log.sent[:3]] == ["probe", "cache check", "cache check"]
    assert not np.array_equal(log.replies[1], log.replies[2])
    assert strategy.jitter is False and strategy.report()["jitter"] is False
    batches, _ = log.answered("batch")
    assert len(batches) == 3
    for i, query in enumerate(batches):
        start, stop = strategy.batches[i]
        assert np.array_equal(query.predictions, strategy.models[strategy.send[start:stop]])


def _without_probe(script: Script) -> Script:
    """Refuse the one-person probe (as a minimum-support rule would) and reply to the rest."""

    def reply(i: int, query: Submit, values: NDArray[np.float64]) -> Reply:
        return Refusal("low_support") if _is_probe(query) else script(i, query, values)

    return reply


def _averaging_run(repeats: int, script: Script, jitter: str = "auto") -> tuple[float, Averaging]:
    context, data = _context(seed=1)
    # the probe is refused, so the group sizes come from the prior (exactly N0/N here): a probe
    # asked once under this noise would be dominated by it
    config = AveragingConfig(
        queries=150,
        repeats=repeats,
        batch=1000,
        jitter=jitter,  # type: ignore[arg-type]
        prior_minority=N0 / N,
    )
    strategy = Averaging(config, context)
    _drive(strategy, data.protected, script=_without_probe(script))
    assert strategy.estimate is not None
    assert strategy.group_sizes == [(N - N0, N0)]
    return _leakage(strategy.estimate.attribute, data.protected), strategy


def test_averaging_decodes_the_median_of_the_repeats() -> None:
    context, data = _context(seed=1)
    config = AveragingConfig(queries=60, repeats=7, batch=100, prior_minority=0.05)
    strategy = Averaging(config, context)
    log = _drive(strategy, data.protected, script=_without_probe(_laplace(0.01, seed=4)))
    assert strategy.jitter is False
    batches, answers = log.answered("batch")
    assert len(batches) == len(strategy.batches)
    given = np.concatenate(answers).reshape(-1)
    index, medians, sigma = strategy._measurements()
    assert index.tolist() == list(range(60))
    expected = [np.median(given[strategy.send == k]) for k in range(60)]
    assert np.allclose(medians[:, 0], expected, rtol=0.0, atol=1e-15)
    assert sigma is not None and sigma > 0.0
    # the medians still carry noise of the estimated spread: auto decodes them with amp
    again = decode_statistical_parity(
        strategy.models[index],
        medians[:, 0],
        n1=N - N0,
        n0=N0,
        noise=NoiseModel("gaussian", sigma),
    )
    assert again.method == "amp"
    assert strategy.estimate is not None and strategy.estimate.method == "amp"
    assert strategy.estimate.probability is not None
    assert strategy.estimate.models_used == 60
    assert np.array_equal(strategy.estimate.attribute, again.attribute)


def test_averaging_many_repeats_beat_one_shot_decoding_under_noise() -> None:
    scale = 0.02  # one answer's noise is about the size of a model's signal
    one_shot, _ = _averaging_run(1, _laplace(scale, seed=8))
    averaged, strategy = _averaging_run(25, _laplace(scale, seed=8))
    assert strategy.report()["models_answered"] == 150 * 25
    assert one_shot < 80.0
    assert averaged >= 95.0
    assert averaged >= one_shot + 20.0


def test_averaging_jitter_defeats_a_cache() -> None:
    scale = 0.02
    nudged, strategy = _averaging_run(25, _cached_laplace(scale, seed=9))
    assert strategy.jitter is True  # the cache answered both checks alike
    cached, plain = _averaging_run(25, _cached_laplace(scale, seed=9), jitter="never")
    assert plain.jitter is False
    one_shot, _ = _averaging_run(1, _cached_laplace(scale, seed=9))
    assert nudged >= 95.0
    assert cached < 80.0  # without the nudge the cache returns one noisy value 25 times
    assert nudged >= cached + 20.0 and nudged >= one_shot + 20.0


# -- 3. evasive ------------------------------------------------------------------------------------


def _low_support(k: int) -> Callable[[int, Submit], Refusal | None]:
    """A minimum-support rule: refuse a query with a model accepting or rejecting < k people."""

    def refuse(_i: int, query: Submit) -> Refusal | None:
        accepted = np.count_nonzero(query.predictions >= 0.5, axis=1)
        n = query.predictions.shape[1]
        if np.any(accepted < k) or np.any(n - accepted < k):
            return Refusal("low_support", f"at least {k} required")
        return None

    return refuse


def test_evasive_replaces_a_low_support_probe_by_a_tracker() -> None:
    size = 10
    context, data = _context(seed=2)
    a = data.protected
    strategy = build_strategy(EvasiveConfig(queries=150, tracker_size=size), context)
    assert isinstance(strategy, Evasive)
    tracker_answers: list[NDArray[np.float64]] = []

    def script(i: int, query: Submit, values: NDArray[np.float64]) -> Reply:
        refusal = _low_support(size)(i, query)
        if refusal is None and query.label == "tracker probe":
            tracker_answers.append(values)
        return refusal if refusal is not None else values

    log = _drive(strategy, a, script=script)
    assert log.sent[0].label == "probe" and isinstance(log.replies[0], Refusal)
    tracker = log.sent[1]
    assert tracker.label == "tracker probe" and tracker.metric == "sp"
    h = tracker.predictions
    assert h.shape == (4, N)
    assert np.all(np.isin(h, [0.0, 1.0]))
    for i in range(4):
        for j in range(i + 1, 4):
            assert np.abs(h[i] - h[j]).sum() >= size
    accepted = np.count_nonzero(h >= 0.5, axis=1)
    assert np.all(accepted >= size) and np.all(N - accepted >= size)
    assert np.array_equal(h[0], (context.base_predictions >= 0.5).astype(float))
    # SP(B) - SP(C) + SP(D) - SP(A) = d_0 v_0
    (sp_a, sp_b, sp_c, sp_d), d0 = tracker_answers[0], 1.0 - 2.0 * h[0, 0]
    n1, n0 = data.n1, data.n0
    v0 = 1.0 / n1 if a[0] == 1 else -1.0 / n0
    assert sp_b - sp_c + sp_d - sp_a == pytest.approx(d0 * v0, rel=1e-9)
    assert strategy.group_sizes == [(n1, n0)] and strategy.group_sizes_source == "probe"
    report = strategy.report()
    assert report["adaptations"] == ["probe refused (low_support): using a tracker instead"]
    # every later query passes the rule, and the attack recovers everyone
    assert not any(isinstance(r, Refusal) for r in log.replies[1:])
    assert strategy.estimate is not None
    assert np.array_equal(strategy.estimate.attribute, a)


def test_evasive_assumes_the_group_sizes_when_the_tracker_is_refused() -> None:
    context, data = _context(seed=2)
    strategy = Evasive(EvasiveConfig(queries=50, prior_minority=0.05), context)
    refuse = {0: Refusal("near_duplicate"), 1: Refusal("low_support")}
    log = _drive(strategy, data.protected, script=_refusing(lambda i, _q: refuse.get(i)))
    assert [q.label for q in log.sent[:3]] == ["probe", "tracker probe", "batch 1/1"]
    assert strategy.group_sizes == [(190, 10)] and strategy.group_sizes_source == "prior"
    assert strategy.report()["adaptations"] == [
        "probe refused (near_duplicate): using a tracker instead",
        "tracker refused (low_support): assuming the group sizes",
    ]


def test_evasive_redraws_a_near_duplicate_batch_with_twice_the_perturbation() -> None:
    b = 0.1
    context, data = _context(seed=2)
    h0 = context.base_predictions
    strategy = Evasive(EvasiveConfig(queries=150, perturbation=b), context)
    first = {1: Refusal("near_duplicate", "model 0 is at L1 distance 3")}
    log = _drive(strategy, data.protected, script=_refusing(lambda i, _q: first.get(i)))
    labels = [q.label for q in log.sent]
    assert labels == ["probe", "batch 1/3", "batch 1/3", "batch 2/3", "batch 3/3"]
    refused, resent = log.sent[1].predictions, log.sent[2].predictions
    assert np.abs(refused - h0).max() <= b + 1e-12
    deviation = np.abs(resent - h0).max(axis=1)
    assert np.all(deviation <= 2 * b + 1e-12)
    assert np.all(deviation > b)  # every redrawn model uses the wider range
    for query in log.sent[3:]:  # so do the later batches
        assert b < np.abs(query.predictions - h0).max() <= 2 * b + 1e-12
    report = strategy.report()
    assert report["perturbation"] == pytest.approx(2 * b)
    assert report["adaptations"] == ["batch refused as near-duplicate: perturbation raised to 0.2"]
    assert report["models_answered"] == 150
    assert strategy.estimate is not None
    assert np.array_equal(strategy.estimate.attribute, data.protected)


def test_evasive_drops_a_near_duplicate_batch_once_the_perturbation_is_at_its_cap() -> None:
    context, data = _context(seed=2)
    strategy = Evasive(EvasiveConfig(queries=100, perturbation=0.3), context)
    refuse = {1: Refusal("near_duplicate"), 2: Refusal("near_duplicate")}
    log = _drive(strategy, data.protected, script=_refusing(lambda i, _q: refuse.get(i)))
    # 0.3 -> 0.5 (the cap), then the same batch is refused again and dropped
    assert [q.label for q in log.sent] == ["probe", "batch 1/2", "batch 1/2", "batch 2/2"]
    report = strategy.report()
    assert report["perturbation"] == 0.5
    assert len(report["adaptations"]) == 1
    assert report["models_answered"] == 50


@pytest.mark.parametrize("retry_after", [50.0, None])
def test_evasive_waits_out_a_rate_limit(retry_after: float | None) -> None:
    context, data = _context(seed=2)
    strategy = Evasive(EvasiveConfig(queries=100), context)
    limited = {1: Refusal("rate_limited", "0 of 50 tokens left", retry_after)}
    log = _drive(strategy, data.protected, script=_refusing(lambda i, _q: limited.get(i)))
    refused_at = log.times[1]
    until = retry_after if retry_after is not None else refused_at + 24.0
    assert log.waits == [Wait(until)]
    assert [q.label for q in log.sent] == ["probe", "batch 1/2", "batch 1/2", "batch 2/2"]
    assert np.array_equal(log.sent[1].predictions, log.sent[2].predictions)  # the same batch
    assert strategy.report()["adaptations"] == [f"rate limited: waiting until t = {until:g}"]
    assert strategy.report()["models_answered"] == 100


def test_evasive_rate_limit_wait_step_by_step() -> None:
    context, data = _context(seed=2)
    strategy = Evasive(EvasiveConfig(queries=100), context)
    probe = strategy.next_action(0.0)
    assert isinstance(probe, Submit)
    strategy.on_answer(
        np.asarray(metrics.evaluate("sp", probe.predictions, protected=data.protected)), 1.0
    )
    batch = strategy.next_action(1.0)
    assert isinstance(batch, Submit) and batch.label == "batch 1/2"
    strategy.on_refusal(Refusal("rate_limited", "", 30.0), 2.0)  # type: ignore[arg-type]
    assert strategy.next_action(2.0) == Wait(30.0)
    assert strategy.next_action(29.9) == Wait(30.0)
    again = strategy.next_action(30.0)
    assert isinstance(again, Submit) and again.label == "batch 1/2"
    strategy.on_refusal(Refusal("rate_limited", ""), 31.0)  # type: ignore[arg-type]
    assert strategy.next_action(31.0) == Wait(55.0)
    # another reason on a batch is not a rate limit: the batch is dropped, no wait
    third = strategy.next_action(55.0)
    assert isinstance(third, Submit) and third.label == "batch 1/2"
    strategy.on_refusal(Refusal("budget_exhausted", ""), 56.0)  # type: ignore[arg-type]
    fourth = strategy.next_action(56.0)
    assert isinstance(fourth, Submit) and fourth.label == "batch 2/2"


# -- 4. sequential compressed sensing --------------------------------------------------------------


def test_sequential_cs_stops_once_omp_fits_exactly() -> None:
    context, data = _context(seed=0)
    strategy = build_strategy(SequentialCSConfig(queries=400, batch=25), context)
    assert isinstance(strategy, SequentialCS)
    methods: list[str] = []
    log = _drive(
        strategy,
        data.protected,
        after_answer=lambda s: methods.append(s.estimate.method if s.estimate else ""),
    )
    batches = [q for q in log.sent if q.label.startswith("batch")]
    assert len(strategy.batches) == 16
    assert len(batches) == 2  # 50 models fit exactly, long before the 16 batches planned
    assert log.stop is not None
    assert log.stop.reason == "the answers are fitted exactly: the estimate is final"
    assert methods[-1] == "omp"  # the last decode fitted exactly, none before it did
    assert "omp" not in methods[:-1]
    assert strategy.estimate is not None
    assert strategy.estimate.models_used == 25 * len(batches)
    assert np.array_equal(strategy.estimate.attribute, data.protected)


def _first_stable(attributes: list[NDArray[np.int8]], patience: int) -> int | None:
    """1-based index of the decode after which ``patience`` decodes in a row changed nothing."""
    unchanged = 0
    for t in range(1, len(attributes)):
        unchanged = unchanged + 1 if np.array_equal(attributes[t], attributes[t - 1]) else 0
        if unchanged >= patience:
            return t + 1
    return None


@pytest.mark.parametrize("patience", [1, 2, 3])
def test_sequential_cs_stops_after_patience_unchanged_noisy_decodes(patience: int) -> None:
    context, data = _context(seed=1)
    strategy = SequentialCS(SequentialCSConfig(queries=400, batch=25, patience=patience), context)
    attributes: list[NDArray[np.int8]] = []
    methods: list[str] = []

    def record(s: Strategy) -> None:
        if s.estimate is None:  # the probe's answer: no decode yet
            return
        attributes.append(s.estimate.attribute.copy())
        methods.append(s.estimate.method)

    # the probe is answered exactly; tiny noise on every batch keeps OMP from an exact fit
    noisy = _laplace(1e-6, seed=5)
    script: Script = lambda i, q, v: v if _is_probe(q) else noisy(i, q, v)  # noqa: E731
    log = _drive(strategy, data.protected, script=script, after_answer=record)
    batches = [q for q in log.sent if q.label.startswith("batch")]
    assert set(methods) == {"omp_unverified"}  # never an exact fit
    assert log.stop is not None
    assert log.stop.reason == f"the estimate did not change for {patience} decodes"
    assert len(attributes) == len(batches)  # one decode per batch
    assert len(batches) == _first_stable(attributes, patience)
    assert len(batches) < len(strategy.batches)
    assert np.array_equal(attributes[-1], data.protected)


def test_sequential_cs_sends_every_batch_when_the_estimate_never_settles() -> None:
    context, data = _context(seed=1)
    strategy = SequentialCS(SequentialCSConfig(queries=150, batch=25, patience=10), context)
    log = _drive(strategy, data.protected, script=_laplace(0.01, seed=6))
    batches = [q for q in log.sent if q.label.startswith("batch")]
    assert len(batches) == len(strategy.batches) == 6  # fewer decodes than the patience
    assert log.stop is not None and log.stop.reason == "all batches resolved"
    assert strategy.estimate is not None
    assert strategy.estimate.method == "omp_unverified"
    assert strategy.estimate.models_used == 150


# -- 5. metric switching ---------------------------------------------------------------------------


def _only_metrics(allowed: list[str]) -> Callable[[int, Submit], Refusal | None]:
    """Refuse every query for a metric outside ``allowed`` as the policy's validation does."""

    def refuse(_i: int, query: Submit) -> Refusal | None:
        if query.metric in allowed:
            return None
        detail = f"metric {query.metric!r} is not answered; allowed: {allowed}"
        return Refusal("metric_not_allowed", detail)

    return refuse


def test_metric_switching_moves_to_eo_when_sp_is_not_answered() -> None:
    context, data = _context(seed=3)
    a, y = data.protected, data.public.audit.labels
    strategy = build_strategy(MetricSwitchingConfig(queries=150, batch=50), context)
    assert isinstance(strategy, MetricSwitching)
    log = _drive(strategy, a, y, script=_refusing(_only_metrics(["eo"])))
    assert log.sent[0].metric == "sp" and isinstance(log.replies[0], Refusal)
    assert [q.metric for q in log.sent[1:]] == ["eo"] * 4  # its probe and 3 batches
    assert log.sent[1].label == "probe"
    assert log.stop is not None and log.stop.reason == "all batches resolved (metric eo)"
    report = strategy.report()
    assert report["tried"] == ["sp", "eo"] and report["used"] == "eo"
    assert report["metric"] == "eo"
    positive = y == 1
    assert report["reachable"] == int(positive.sum())
    est = strategy.estimate
    assert est is not None
    assert est is strategy.current.estimate  # type: ignore[union-attr]
    assert np.array_equal(est.attribute[positive], a[positive])


@pytest.mark.parametrize(
    ("reason", "detail"),
    [
        ("budget_exhausted", "epsilon 10 of 10 spent"),
        ("low_support", "model 0 accepts 1 people (h >= 0.5); at least 5 required"),
        ("rate_limited", "metric 'sp' is not answered until tomorrow"),
    ],
    ids=["budget_exhausted", "low_support", "rate_limited"],
)
def test_metric_switching_keeps_its_metric_for_other_refusals(reason: str, detail: str) -> None:
    context, data = _context(seed=3)
    strategy = MetricSwitching(MetricSwitchingConfig(queries=100, batch=50), context)
    log = _drive(strategy, data.protected, script=lambda _i, _q, _v: Refusal(reason, detail))
    assert [q.metric for q in log.sent] == ["sp"] * 3  # the probe and both batches
    assert strategy.tried == ["sp"]
    assert strategy.report()["used"] == "sp"
    assert log.stop is not None and log.stop.reason == "all batches resolved (metric sp)"


def test_metric_switching_keeps_a_metric_that_was_answered_once() -> None:
    context, data = _context(seed=3)
    strategy = MetricSwitching(MetricSwitchingConfig(queries=100, batch=50), context)
    refuse = {1: Refusal("metric_not_allowed", "metric 'sp' is not answered; allowed: ['eo']")}
    log = _drive(strategy, data.protected, script=_refusing(lambda i, _q: refuse.get(i)))
    assert [q.metric for q in log.sent] == ["sp"] * 3
    assert strategy.tried == ["sp"]


def test_metric_switching_stops_when_every_metric_is_refused() -> None:
    context, data = _context(seed=3)
    a, y = data.protected, data.public.audit.labels
    strategy = MetricSwitching(MetricSwitchingConfig(queries=50, batch=50), context)
    log = _drive(strategy, a, y, script=_refusing(_only_metrics([])))
    assert [q.metric for q in log.sent] == ["sp", "eo", "eodds", "abs_sp"]
    assert all(isinstance(r, Refusal) for r in log.replies)
    assert log.stop is not None
    assert log.stop.reason == "no metric answered (tried ['sp', 'eo', 'eodds', 'abs_sp'])"
    for metric in ("sp", "eo", "eodds", "abs_sp"):
        assert metric in log.stop.reason
    assert strategy.report() == {"tried": ["sp", "eo", "eodds", "abs_sp"], "used": None}
    assert strategy.estimate is None


def test_metric_switching_follows_its_configured_order() -> None:
    context, data = _context(seed=3)
    a, y = data.protected, data.public.audit.labels
    config = MetricSwitchingConfig(queries=100, batch=50, metrics=["eo", "eodds"])
    strategy = MetricSwitching(config, context)
    log = _drive(strategy, a, y, script=_refusing(_only_metrics(["eodds"])))
    assert [q.metric for q in log.sent] == ["eo", "eodds", "eodds", "eodds"]
    assert strategy.tried == ["eo", "eodds"]
    assert strategy.estimate is not None
    assert np.array_equal(strategy.estimate.attribute, a)


# -- 6. sybil ------------------------------------------------------------------------------------


def _sybil(k: int = 3, **kw: object) -> tuple[list[tuple[str, SybilShard]], AuditData]:
    context, data = _context(seed=0)
    pairs = sybil_shards(SybilConfig(identities=k, **kw), context, "s")  # type: ignore[arg-type]
    shards = [(name, s) for name, s in pairs if isinstance(s, SybilShard)]
    assert len(shards) == len(pairs)
    return shards, data


def test_sybil_shards_share_one_coordinator() -> None:
    shards, _ = _sybil(4, queries=100)
    assert [name for name, _ in shards] == ["s.1", "s.2", "s.3", "s.4"]
    coordinator = shards[0][1].coordinator
    assert all(s.coordinator is coordinator for _, s in shards)
    assert [s.shard for _, s in shards] == [0, 1, 2, 3]
    context, _ = _context(seed=0)
    built = build_strategies(SybilConfig(identities=2, queries=100), context, "dev")
    assert [name for name, _ in built] == ["dev.1", "dev.2"]
    with pytest.raises(ValueError, match="build_strategies"):
        build_strategy(SybilConfig(identities=2, queries=100), context)


def test_sybil_only_one_shard_sends_the_probe() -> None:
    shards, data = _sybil(3, queries=150, batch=25)
    (_, first), (_, second), (_, third) = shards
    probe = first.next_action(0.0)
    assert isinstance(probe, Submit) and probe.label == "probe"
    assert second.next_action(0.5) == Wait(1.5)  # the probe is not back yet
    assert third.next_action(0.5) == Wait(1.5)
    assert second.next_action(1.5) == Wait(2.5)
    first.on_answer(
        np.asarray(metrics.evaluate("sp", probe.predictions, protected=data.protected)), 2.0
    )
    assert first.coordinator.core.group_sizes == [(data.n1, data.n0)]
    batch = second.next_action(2.5)
    assert isinstance(batch, Submit) and batch.label == "batch 1/6"


def _play_sybil(
    shards: list[tuple[str, SybilShard]],
    protected: NDArray[np.int8],
    refuse: Callable[[Submit], Refusal | None] = lambda _q: None,
) -> list[tuple[int, Submit]]:
    """Rounds: every identity that has not stopped acts, then their queries are answered."""
    sent: list[tuple[int, Submit]] = []
    active = {s.shard: s for _, s in shards}
    now = 0.0
    for _ in range(100):
        if not active:
            return sent
        queued: list[tuple[SybilShard, Submit]] = []
        for k in sorted(active):
            action = active[k].next_action(now)
            if isinstance(action, Stop):
                del active[k]
            elif isinstance(action, Submit):
                sent.append((k, action))
                queued.append((active[k], action))
        now += 1.0
        for shard, query in queued:  # answered after everyone had their turn
            refusal = refuse(query)
            if refusal is not None:
                shard.on_refusal(refusal, now)  # type: ignore[arg-type]
            else:
                values = metrics.evaluate("sp", query.predictions, protected=protected)
                shard.on_answer(np.asarray(values, dtype=np.float64), now)
    raise AssertionError("the identities did not stop")


def test_sybil_spreads_the_batches_and_pools_the_answers() -> None:
    shards, data = _sybil(3, queries=150, batch=25)
    sent = _play_sybil(shards, data.protected)
    coordinator = shards[0][1].coordinator
    core = coordinator.core
    assert [(k, q.label) for k, q in sent if q.label == "probe"] == [(0, "probe")]
    batches = [(k, q) for k, q in sent if q.label != "probe"]
    labels = [q.label for _, q in batches]
    assert sorted(labels) == sorted(f"batch {i + 1}/6" for i in range(6))  # each batch once
    assert {k for k, _ in batches} == {0, 1, 2}  # every identity sent some
    for k, query in batches:
        i = int(query.label.split()[1].split("/")[0]) - 1
        assert coordinator.assigned[i] == k
        start, stop = core.batches[i]
        assert np.array_equal(query.predictions, core.models[start:stop])
    assert coordinator.resolved == set(range(6))
    reports = [s.report() for _, s in shards]
    assert sum(r["batches_sent"] for r in reports) == 6
    assert [r["shard"] for r in reports] == [0, 1, 2]
    assert all(r["models_answered"] == 150 for r in reports)
    estimate = core.estimate
    assert estimate is not None and estimate.models_used == 150
    assert all(s.estimate is estimate for _, s in shards)  # one pooled estimate for all
    assert all(s.estimate_version >= 1 for _, s in shards)
    assert np.array_equal(estimate.attribute, data.protected)


def test_sybil_marks_a_refused_batch_resolved() -> None:
    shards, data = _sybil(3, queries=150, batch=25)

    def refuse(query: Submit) -> Refusal | None:
        return Refusal("budget_exhausted") if query.label == "batch 5/6" else None

    _play_sybil(shards, data.protected, refuse)
    coordinator = shards[0][1].coordinator
    assert coordinator.resolved == set(range(6))
    assert sorted(coordinator.core.answers) == [0, 1, 2, 3, 5]
    estimate = coordinator.core.estimate
    assert estimate is not None and estimate.models_used == 125
    assert all(s.estimate is estimate for _, s in shards)


def test_sybil_falls_back_to_the_prior_when_the_probe_is_refused() -> None:
    shards, data = _sybil(2, queries=100, batch=50, prior_minority=0.05)

    def refuse(query: Submit) -> Refusal | None:
        return Refusal("low_support") if query.label == "probe" else None

    sent = _play_sybil(shards, data.protected, refuse)
    assert [q.label for _, q in sent].count("probe") == 1
    core = shards[0][1].coordinator.core
    assert core.group_sizes == [(190, 10)] and core.group_sizes_source == "prior"
    assert sorted(core.answers) == [0, 1]


# -- 7. budget aware -------------------------------------------------------------------------------


def _budget_plan(epsilon: float, budget: float, prior: float, mode: str = "auto") -> BudgetAware:
    context = _hand_context(N, np.linspace(0.02, 0.98, N))
    config = BudgetAwareConfig(
        epsilon_per_model=epsilon,
        budget=budget,
        prior_minority=prior,
        mode=mode,  # type: ignore[arg-type]
    )
    return BudgetAware(config, context)


@pytest.mark.parametrize(
    ("epsilon", "budget", "prior", "mode"),
    [
        (0.5, 60.0, 0.05, "targeted"),  # 120 affordable, 119 sensing models < 120 needed
        (0.5, 60.5, 0.05, "spread"),  # 121 affordable: exactly enough
        (0.5, 60.9, 0.05, "spread"),  # the floor: still 121
        (0.1, 12.0, 0.05, "targeted"),  # 12.0 / 0.1 is 119.99999999999999 in floating point
        (1.0, 1000.0, 0.2, "spread"),  # k = 40: 4 * 40 ln 5 = 257.5 -> 258 needed
        (1.0, 258.0, 0.2, "targeted"),
        (2.0, 3.0, 0.001, "targeted"),  # k = round(0.2) = 0 -> at least 1
    ],
)
def test_budget_aware_plan(epsilon: float, budget: float, prior: float, mode: str) -> None:
    strategy = _budget_plan(epsilon, budget, prior)
    plan = strategy.report()["plan"]
    affordable = math.floor(round(budget / epsilon, 9))
    k = max(round(prior * N), 1)
    needed = math.ceil(4 * k * math.log(N / k))
    assert plan == {"affordable_models": affordable, "needed_for_recovery": needed, "mode": mode}
    assert plan["mode"] == ("targeted" if affordable - 1 < needed else "spread")
    assert strategy.mode == mode
    assert (strategy.inner is not None) == (mode == "spread")
    # an explicit mode overrides the plan's choice
    other = "spread" if mode == "targeted" else "targeted"
    assert _budget_plan(epsilon, budget, prior, other).report()["plan"]["mode"] == other


def test_budget_aware_plan_numbers() -> None:
    plan = _budget_plan(0.5, 60.0, 0.05).plan
    assert plan["affordable_models"] == 120
    assert plan["needed_for_recovery"] == 120  # ceil(40 ln 20) = ceil(119.83)


def _target_context(target: int, value: float) -> DeveloperContext:
    base = np.random.default_rng(11).uniform(0.05, 0.95, N)
    base[target] = value
    return _hand_context(N, base, seed=11)


@pytest.mark.parametrize("group", [0, 1])
def test_budget_aware_targets_one_person_with_median_differencing(group: int) -> None:
    target, affordable = 17, 201
    context = _target_context(target, 0.1)
    h0 = context.base_predictions
    a = np.ones(N, dtype=np.int8)
    a[[3, 17, 40, 41, 90, 100, 120, 150, 160, 199]] = 0
    a[target] = group
    config = BudgetAwareConfig(
        epsilon_per_model=1.0, budget=float(affordable), prior_minority=0.5, target=target
    )
    strategy = build_strategy(config, context)
    assert isinstance(strategy, BudgetAware) and strategy.mode == "targeted"
    assert strategy.pairs == affordable // 2 == 100
    v = 1.0 / int(a.sum()) if group == 1 else -1.0 / int(N - a.sum())
    # noise on each answer of 3/4 of the target's signal |v_j|: one pair is unreliable
    log = _drive(strategy, a, script=_laplace(0.75 * abs(v), seed=12 + group))
    assert len(log.sent) == 100
    assert log.stop is not None and log.stop.reason == f"budget spent on person {target}"
    previous: NDArray[np.float64] | None = None
    for query in log.sent:
        pair = query.predictions
        assert query.metric == "sp" and pair.shape == (2, N)
        assert np.abs(pair[0] - h0).max() <= JITTER + 1e-12  # the base model, nudged
        differ = np.flatnonzero(pair[0] != pair[1])
        assert differ.tolist() == [target]  # the same nudge on both rows
        assert pair[1, target] - pair[0, target] == pytest.approx(0.8)  # 0.9 - 0.1
        assert previous is None or not np.array_equal(pair, previous)  # a new pair each time
        previous = pair
    answers = np.asarray(log.replies).reshape(100, 2)
    differences = (answers[:, 1] - answers[:, 0]) / 0.8
    assert np.allclose(strategy.differences, differences, rtol=1e-9, atol=1e-15)
    # single pairs are unreliable under this noise, their median is not
    assert np.mean(np.sign(differences) != np.sign(v)) > 0.1
    assert np.sign(np.median(differences)) == np.sign(v)
    est = strategy.estimate
    assert est is not None
    assert est.attribute[target] == group
    assert est.method == "median" and est.models_used == 200
    others = np.arange(N) != target
    assert np.all(est.attribute[others] == 1) and np.all(est.confidence[others] == 0.0)
    assert est.confidence[target] > 1.0
    report = strategy.report()
    assert report["pairs_answered"] == 100 and report["plan"]["mode"] == "targeted"


def test_budget_aware_targeted_stops_when_the_budget_is_exhausted() -> None:
    target = 5
    context = _target_context(target, 0.2)
    a = np.ones(N, dtype=np.int8)
    a[[5, 9, 33]] = 0
    config = BudgetAwareConfig(
        epsilon_per_model=1.0, budget=40.0, prior_minority=0.5, target=target, mode="targeted"
    )
    strategy = BudgetAware(config, context)
    exhausted = {3: Refusal("budget_exhausted", "epsilon 6 of 6 spent")}
    log = _drive(strategy, a, script=_refusing(lambda i, _q: exhausted.get(i)))
    assert len(log.sent) == 4  # of 20 planned pairs
    assert log.stop is not None and log.stop.reason == f"budget spent on person {target}"
    assert strategy.report()["pairs_answered"] == 3
    assert strategy.estimate is not None and strategy.estimate.attribute[target] == 0
    assert strategy.estimate.models_used == 6


def test_budget_aware_rejects_a_target_outside_the_audit_set() -> None:
    context = _hand_context(N, np.full(N, 0.3))
    config = BudgetAwareConfig(epsilon_per_model=1.0, budget=10.0, target=N)
    with pytest.raises(ValueError, match="target"):
        BudgetAware(config, context)


def test_budget_aware_spread_runs_compressed_sensing_on_the_rest_of_the_budget() -> None:
    context, data = _context(seed=0)
    config = BudgetAwareConfig(epsilon_per_model=0.5, budget=65.0, prior_minority=0.05)
    strategy = BudgetAware(config, context)
    plan = strategy.report()["plan"]
    assert plan["mode"] == "spread" and plan["affordable_models"] == 130
    assert strategy.inner is not None and strategy.inner.models.shape == (129, N)
    log = _drive(strategy, data.protected)
    assert log.sent[0].label == "probe"
    sensing = [q for q in log.sent if q.label.startswith("batch")]
    assert sum(q.predictions.shape[0] for q in sensing) == 129  # with the probe: 130 models
    assert sum(q.predictions.shape[0] for q in log.sent) == plan["affordable_models"]
    for query in sensing:
        assert np.abs(query.predictions - context.base_predictions).max() <= 0.1 + 1e-12
    report = strategy.report()
    assert report["models_answered"] == 129
    assert strategy.estimate is not None and strategy.estimate is strategy.inner.estimate
    assert np.array_equal(strategy.estimate.attribute, data.protected)


# -- 8. proxy prior --------------------------------------------------------------------------------


def _proxy_setup(seed: int = 0) -> tuple[DeveloperContext, AuditData]:
    """An external sample - the training split, other people than the audit set - labelled with
    its attribute, which the features carry through the score shift."""
    data, _ = _synthetic(N, 20, seed, 2.0)
    train = data.public.train
    proxy = PublicView(train.features, data.train_protected.copy(), train.columns, ())
    assert len(proxy) != len(data.public.audit) and data.train_disjoint
    return _context(N, 20, seed, shift=2.0, proxy=proxy)


def test_proxy_prior_needs_an_external_sample() -> None:
    context, _ = _context(N, 20, 0, shift=2.0)
    assert context.proxy is None
    with pytest.raises(ValueError, match="proxy"):
        ProxyPrior(ProxyPriorConfig(queries=50), context)


def test_proxy_prior_starts_from_the_proxy_and_recovers_everyone_from_exact_answers() -> None:
    context, data = _proxy_setup()
    strategy = build_strategy(ProxyPriorConfig(queries=150, prior_minority=0.1), context)
    assert isinstance(strategy, ProxyPrior)
    first = strategy.estimate
    assert first is not None and strategy.estimate_version == 1  # before any query
    assert first.method == "proxy" and first.models_used == 0
    assert int(np.sum(first.attribute == 0)) == 20
    assert _leakage(first.attribute, data.protected) > 60.0  # better than chance (50)
    log = _drive(strategy, data.protected)
    checks, values = log.answered("noise check")
    assert len(checks) == NOISE_CHECKS == len(strategy.checks)
    rows = np.vstack([q.predictions for q in checks])
    assert np.abs(rows - strategy.models[0]).max() <= JITTER + 1e-12
    assert np.unique(rows, axis=0).shape[0] == NOISE_CHECKS  # jittered copies, not repeats
    assert strategy.checks == [float(v[0]) for v in values]
    est = strategy.estimate
    assert est is not None and est is not first
    assert est.method == "weighted_box" and est.models_used == 150
    assert np.array_equal(est.attribute, data.protected)
    assert strategy.report()["proxy_mean_probability"] == pytest.approx(float(strategy.p.mean()))


def test_proxy_prior_keeps_the_proxy_when_the_answers_are_mostly_noise() -> None:
    context, data = _proxy_setup()
    # probe: false - the group sizes come from the prior (exact here), not from a noisy probe
    config = ProxyPriorConfig(queries=150, prior_minority=0.1, probe=False)
    strategy = ProxyPrior(config, context)
    first = strategy.estimate
    assert first is not None
    log = _drive(strategy, data.protected, script=_laplace(0.5, seed=13))
    _, batch_answers = log.answered("batch")
    sp = np.concatenate(batch_answers).reshape(-1)
    assert sp.size == 150
    assert np.var(sp) <= 2.0 * np.var(strategy.checks, ddof=1)  # the rule's trigger
    est = strategy.estimate
    assert est is not None and est is not first
    assert est.method.startswith("proxy") and est.method == "proxy (answers too noisy)"
    assert est.models_used == 150
    assert np.array_equal(est.attribute, first.attribute)
    assert np.array_equal(est.confidence, first.confidence)
