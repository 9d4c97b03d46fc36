"""The simulation: developer processes against a real compliance agent, the attacks end to end,
the external auditor, run logs (format, privacy, determinism, replay), isolation of the protected
attribute, and the ``biasleak run`` command."""

from __future__ import annotations

import ast
import dataclasses
import datetime
import hashlib
import json
import re
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import simpy

import biasleak.agents
from biasleak.agents.auditor import (
    DetectorSettings,
    detect_low_support,
    detect_near_duplicate,
    detect_noise_family,
    detect_volume,
)
from biasleak.agents.compliance import Compliance, QueryRecord
from biasleak.agents.developer import Developer, model_digest
from biasleak.agents.messages import Refusal
from biasleak.agents.models import train_base_model
from biasleak.agents.strategies import (
    DeveloperContext,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
    build_strategy,
)
from biasleak.agents.strategies.compressed_sensing import CompressedSensingConfig
from biasleak.agents.strategies.decoders import decode_statistical_parity
from biasleak.agents.strategies.honest import HonestSelectionConfig, choose_deployment
from biasleak.agents.strategies.sparse_recovery import basis_pursuit
from biasleak.mechanisms.policy import AuditSet, Budget, Noise, Policy, RateLimit
from biasleak.sim import datasets
from biasleak.sim.cli import main
from biasleak.sim.datasets import AuditData
from biasleak.sim.evaluation import Evaluator
from biasleak.sim.scenario import parse_scenario
from biasleak.sim.world import RunResult, rng_for, run_scenario

# -- helpers: a recording logger and a scripted strategy -----------------------------------------


class Recorder:
    """Collects every event agents log, stamped with the simulated time."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.events: list[dict[str, Any]] = []

    def logger(self, agent: str) -> _Bound:
        return _Bound(self, agent)

    def of(self, agent: str, event: str | None = None) -> list[dict[str, Any]]:
        return [
            e for e in self.events if e["agent"] == agent and (event is None or e["event"] == event)
        ]


class _Bound:
    def __init__(self, recorder: Recorder, agent: str) -> None:
        self._recorder = recorder
        self._agent = agent

    def _log(self, level: str, event: str, **kw: Any) -> None:
        self._recorder.events.append(
            {
                "agent": self._agent,
                "event": event,
                "level": level,
                "t": self._recorder.env.now,
                **kw,
            }
        )

    def info(self, event: str, **kw: Any) -> None:
        self._log("info", event, **kw)

    def error(self, event: str, **kw: Any) -> None:
        self._log("error", event, **kw)


class Scripted(Strategy):
    """Submits predetermined actions and records everything it is told."""

    kind = "scripted"

    def __init__(self, actions: list[Any], *, fail_in: str | None = None) -> None:
        super().__init__(StrategyConfig(), None)  # type: ignore[arg-type]
        self.actions = list(actions)
        self.fail_in = fail_in
        self.calls: list[float] = []
        self.answers: list[tuple[np.ndarray, float]] = []
        self.refusals: list[tuple[str, str, float]] = []

    def next_action(self, now: float) -> Any:
        self.calls.append(now)
        if self.fail_in == "next_action" and len(self.calls) == 2:
            raise RuntimeError("scripted failure in next_action")
        return self.actions.pop(0) if self.actions else Stop("script done")

    def on_answer(self, values: np.ndarray, now: float) -> None:
        self.answers.append((np.array(values, dtype=np.float64), now))
        if self.fail_in == "on_answer":
            raise ValueError("scripted failure in on_answer")

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self.refusals.append((refusal.reason, refusal.detail, now))


PROTECTED = np.array([1, 1, 0, 1, 0, 1, 1, 1, 0, 1], dtype=np.int8)
LABELS = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1], dtype=np.int8)
N = PROTECTED.size


def _world(
    policy: Policy, *, answer_hours: float = 0.1, seed: int = 0
) -> tuple[simpy.Environment, Compliance, Recorder]:
    env = simpy.Environment()
    rec = Recorder(env)
    compliance = Compliance(
        env,
        policy=policy,
        audit=AuditSet.from_arrays(PROTECTED, LABELS),
        rng=np.random.default_rng(seed),
        log=rec.logger("compliance"),
        answer_hours=answer_hours,
    )
    return env, compliance, rec


def _developer(
    env: simpy.Environment,
    compliance: Compliance,
    rec: Recorder,
    identity: str,
    strategy: Strategy,
    **kw: Any,
) -> Developer:
    dev = Developer(
        env,
        identity=identity,
        organization=kw.pop("organization", "acme"),
        strategy=strategy,
        compliance=compliance.mailbox,
        log=rec.logger(identity),
        **kw,
    )
    compliance.register(identity, dev.organization, dev.inbox)
    return dev


def _sp(h: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Statistical parity, written out: mean over a = 1 minus mean over a = 0."""
    h = np.atleast_2d(h)
    return h[:, a == 1].mean(axis=1) - h[:, a == 0].mean(axis=1)


def _models(seed: int, m: int, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.0, 1.0, (m, n))


# -- 1. the developer process against a real compliance agent -----------------------------------


def test_answers_carry_the_exact_statistical_parity() -> None:
    env, compliance, rec = _world(Policy(metrics=("sp",)))
    one, three = _models(1, 1), _models(2, 3)
    strategy = Scripted([Submit(one, "sp", 1.0, "one"), Submit(three, "sp", 0.5, "three")])
    _developer(env, compliance, rec, "dev", strategy)
    env.run(until=100)
    assert len(strategy.answers) == 2
    (v1, t1), (v3, t3) = strategy.answers
    np.testing.assert_allclose(v1, _sp(one, PROTECTED), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(v3, _sp(three, PROTECTED), rtol=1e-12, atol=1e-15)
    assert v1.shape == (1,) and v3.shape == (3,)
    assert t1 == pytest.approx(1.0 + 0.1)  # preparation, then the compliance agent's work
    assert t3 == pytest.approx(1.1 + 0.5 + 0.1)
    received = rec.of("dev", "answer_received")
    assert [e["models"] for e in received] == [1, 3]
    np.testing.assert_allclose(received[1]["values"], _sp(three, PROTECTED), rtol=1e-12)
    internal = rec.of("compliance", "release_internal")
    assert [e["internal"] for e in internal] == [True, True]
    np.testing.assert_allclose(internal[1]["exact"], _sp(three, PROTECTED), rtol=1e-12)
    assert strategy.refusals == []
    assert rec.of("dev", "developer_stopped")[0]["reason"] == "script done"


def test_invalid_queries_are_refused_logged_and_not_charged() -> None:
    # One epsilon in the budget: had an invalid query been charged, the valid one could not be
    # answered; the second valid query shows the budget really is spent by one answer.
    policy = Policy(metrics=("sp",), stages=(Budget(1.0), Noise("laplace", 1.0)))
    env, compliance, rec = _world(policy)
    nan_model = _models(3, 1)
    nan_model[0, 4] = np.nan
    short = _models(4, 1, N - 1)
    good = _models(5, 1)
    strategy = Scripted(
        [Submit(nan_model), Submit(short), Submit(good), Submit(_models(6, 1)), Submit(good)]
    )
    dev = _developer(env, compliance, rec, "dev", strategy)
    env.run(until=100)
    reasons = [r for r, _, _ in strategy.refusals]
    assert reasons == ["invalid", "invalid", "budget_exhausted", "budget_exhausted"]
    assert len(strategy.answers) == 1
    refused = rec.of("compliance", "query_refused")
    assert [e["reason"] for e in refused[:2]] == ["invalid", "invalid"]
    assert [e["query_id"] for e in refused[:2]] == ["dev-1", "dev-2"]
    assert str(N) in refused[1]["detail"]  # names the audit-set size it expected
    answered = rec.of("compliance", "query_answered")
    assert [e["query_id"] for e in answered] == ["dev-3"]
    assert answered[0]["epsilon_charged"] == pytest.approx(1.0)
    assert [e["reason"] for e in rec.of("dev", "refusal_received")][:2] == ["invalid", "invalid"]
    assert [r.answered for r in compliance.query_log] == [False, False, True, False, False]
    assert not dev.process.is_alive  # the run went on to the end of the script
    assert rec.of("dev", "developer_stopped")[0]["reason"] == "script done"


def _rate_limited_run(retry: bool) -> tuple[Scripted, Recorder]:
    env, compliance, rec = _world(Policy(metrics=("sp",), stages=(RateLimit(2),)))
    strategy = Scripted([Submit(_models(7, 2)), Submit(_models(8, 1))])
    _developer(env, compliance, rec, "dev", strategy, retry_rate_limited=retry)
    env.run(until=100)
    return strategy, rec


def test_rate_limited_query_is_resent_at_retry_after() -> None:
    strategy, rec = _rate_limited_run(True)
    # The two-model query empties the bucket at t = 0.1; it refills 2 models per 24 hours, so
    # one model fits again 12 hours later.
    retry_at = 0.1 + 12.0
    refusal = rec.of("dev", "refusal_received")
    assert [e["reason"] for e in refusal] == ["rate_limited"]
    assert refusal[0]["retry_after"] == pytest.approx(retry_at)
    sent = rec.of("dev", "query_sent")
    assert [e["models"] for e in sent] == [2, 1, 1]
    assert sent[2]["t"] == pytest.approx(retry_at)
    assert sent[2]["digest"] == sent[1]["digest"]  # the same model, sent again
    assert sent[2]["query_id"] != sent[1]["query_id"]
    assert strategy.refusals == []
    assert len(strategy.answers) == 2
    assert strategy.answers[1][1] == pytest.approx(retry_at + 0.1)
    np.testing.assert_allclose(strategy.answers[1][0], _sp(_models(8, 1), PROTECTED), rtol=1e-12)


def test_rate_limited_query_goes_to_the_strategy_without_retry() -> None:
    strategy, rec = _rate_limited_run(False)
    assert [(r, t) for r, _, t in strategy.refusals] == [("rate_limited", pytest.approx(0.2))]
    assert len(strategy.answers) == 1
    assert len(rec.of("dev", "query_sent")) == 2
    assert rec.of("dev", "developer_stopped")[0]["t"] == pytest.approx(0.2)


def test_unanswered_query_times_out() -> None:
    env, compliance, rec = _world(Policy(metrics=("sp",)), answer_hours=10.0)
    strategy = Scripted([Submit(_models(9, 2))])
    _developer(env, compliance, rec, "dev", strategy, timeout_hours=5.0)
    env.run(until=100)
    timeouts = rec.of("dev", "query_timeout")
    assert len(timeouts) == 1
    assert timeouts[0]["t"] == pytest.approx(5.0)
    assert timeouts[0]["waited_hours"] == pytest.approx(5.0)
    assert timeouts[0]["models"] == 2
    assert [(r, t) for r, _, t in strategy.refusals] == [("timeout", pytest.approx(5.0))]
    assert strategy.answers == []
    assert rec.of("dev", "answer_received") == []
    assert rec.of("dev", "developer_stopped")[0]["t"] == pytest.approx(5.0)


def test_strategy_error_stops_only_that_developer() -> None:
    env, compliance, rec = _world(Policy(metrics=("sp",)))
    good = Scripted([Submit(_models(k, 1), prepare_hours=1.0) for k in range(10, 13)])
    bad_next = Scripted([Submit(_models(20, 1)), Submit(_models(21, 1))], fail_in="next_action")
    bad_answer = Scripted([Submit(_models(22, 1)), Submit(_models(23, 1))], fail_in="on_answer")
    devs = {
        "good": _developer(env, compliance, rec, "good", good),
        "bad_next": _developer(env, compliance, rec, "bad_next", bad_next),
        "bad_answer": _developer(env, compliance, rec, "bad_answer", bad_answer),
    }
    env.run(until=100)
    for ident, during in (("bad_next", "next_action"), ("bad_answer", "on_answer")):
        errors = rec.of(ident, "strategy_error")
        assert len(errors) == 1, ident
        assert errors[0]["during"] == during
        assert errors[0]["level"] == "error"
        assert "scripted failure" in errors[0]["error"]
        assert len(rec.of(ident, "query_sent")) == 1  # nothing sent after the error
        assert rec.of(ident, "developer_stopped") == []
        assert not devs[ident].process.is_alive
    assert len(bad_next.calls) == 2 and len(bad_answer.calls) == 1
    assert len(good.answers) == 3
    assert rec.of("good", "strategy_error") == []
    assert rec.of("good", "developer_stopped")[0]["reason"] == "script done"


# -- shared scenario runs -----------------------------------------------------------------------

CS_YAML = """
name: cs_small
seed: 3
horizon_days: 5
data: {dataset: synthetic, n: 300, minority: 20}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 120, batch: 40}
compliance:
  metrics: [sp]
"""

MIXED_YAML = """
name: mixed
seed: 5
horizon_days: 5
data: {dataset: synthetic, n: 300, minority: 20}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 120, batch: 40}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 3, train_subsample: 500}
compliance:
  metrics: [sp]
"""

NOISY_YAML = """
name: noisy
seed: 11
horizon_days: 3
data: {dataset: synthetic, n: 300, minority: 20}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 120, batch: 40}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 3, train_subsample: 500}
  - id: bob
    organization: other
    strategy: {kind: honest_selection, candidates: 3, train_subsample: 500, batch: true}
compliance:
  metrics: [sp]
  policy:
    - {kind: rate_limit, per_day: 60, scope: organization}
    - {kind: budget, epsilon: 1000.0}
    - {kind: noise, mechanism: laplace, epsilon: 1.0}
auditor: {enabled: true, every_hours: 6, on_alert: log_only}
"""

AUDITED_YAML = """
name: audited
seed: 3
horizon_days: 2
data: {dataset: synthetic, n: 300, minority: 20}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 120, batch: 40}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 3, train_subsample: 500}
  - id: bob
    organization: other
    strategy: {kind: honest_selection, candidates: 3, train_subsample: 500}
compliance:
  metrics: [sp]
auditor: {enabled: true, every_hours: 1.0, on_alert: REACTION}
"""


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return run_scenario(parse_scenario(MIXED_YAML), log_dir=tmp_path_factory.mktemp("mixed"))


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return run_scenario(parse_scenario(NOISY_YAML), log_dir=tmp_path_factory.mktemp("noisy"))


@pytest.fixture(scope="module")
def audited_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for reaction in ("log_only", "suspend_identity", "suspend_organization"):
        scenario = parse_scenario(AUDITED_YAML.replace("REACTION", reaction))
        result = run_scenario(scenario, log_dir=tmp_path_factory.mktemp(reaction))
        out[reaction] = _events(result.log_path)
    return out


# -- 2. compressed sensing ----------------------------------------------------------------------


@pytest.mark.parametrize("box", [False, True])
def test_compressed_sensing_reveals_everyone(box: bool, tmp_path: Path) -> None:
    text = CS_YAML.replace("batch: 40", f"batch: 40, box: {str(box).lower()}")
    scenario = parse_scenario(text)
    assert scenario.developers[0].strategy.box is box
    result = run_scenario(scenario, log_dir=tmp_path)
    mallory = result.summary["developers"]["mallory"]
    assert mallory["leakage"] == 100.0
    assert mallory["revealed"] == 300
    assert mallory["answered"] == 121  # the probe and 120 perturbed models
    assert mallory["refused"] == {}
    assert mallory["queries_to_100"] == 121
    events = _events(result.log_path)
    report = next(e for e in events if e.get("event") == "developer_stopped")["report"]
    assert report["group_sizes"] == [[280, 20]]  # one (N1, N0) per label class; SP has one
    assert report["group_sizes_source"] == "probe"


def _random_instance(
    seed: int, n: int, n0: int
) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    a = np.ones(n, dtype=np.int8)
    a[rng.choice(n, size=n0, replace=False)] = 0
    h0 = rng.uniform(0.0, 1.0, n)
    return a, h0, rng


def _perturbed(h0: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    return np.clip(h0[None, :] + rng.uniform(-0.1, 0.1, (m, h0.size)), 0.0, 1.0)


@pytest.mark.parametrize(
    ("m", "box", "method", "used"),
    [
        (300, True, "basis_pursuit", "box"),
        (400, False, "basis_pursuit", "basis_pursuit"),
        (300, False, "auto", "omp"),
    ],
)
def test_decoder_recovers_the_attribute_from_exact_answers(
    m: int, box: bool, method: str, used: str
) -> None:
    n, n0 = 1000, 50
    a, h0, rng = _random_instance(7, n, n0)
    H = _perturbed(h0, m, rng)
    sp = _sp(H, a)
    result = decode_statistical_parity(H, sp, n1=n - n0, n0=n0, box=box, method=method)
    assert result.method == used
    np.testing.assert_array_equal(result.attribute, a)
    c = 1 / (n - n0) + 1 / n0
    np.testing.assert_allclose(result.s, np.where(a == 0, c, 0.0), atol=1e-6 * c)
    np.testing.assert_allclose(result.confidence, 1.0, atol=1e-5)


def test_decoder_sign_convention() -> None:
    n, n0, m = 300, 20, 200
    n1 = n - n0
    a, h0, rng = _random_instance(8, n, n0)
    H = _perturbed(h0, m, rng)
    sp = _sp(H, a)
    c = 1 / n1 + 1 / n0
    r = np.full(n, 1 / n1)
    # eta = H r - SP = H s with s = c on the disadvantaged group: the threshold rule works.
    s, _ = basis_pursuit(H, H @ r - sp)
    np.testing.assert_array_equal(np.where(s > c / 2, 0, 1), a)
    np.testing.assert_array_equal(decode_statistical_parity(H, sp, n1=n1, n0=n0).attribute, a)
    # The paper's eta = SP - H r recovers -s: nobody crosses the threshold, so every person is
    # called advantaged and the guess is a coin flip in balanced accuracy.
    s_paper, _ = basis_pursuit(H, sp - H @ r)
    np.testing.assert_allclose(s_paper, -np.where(a == 0, c, 0.0), atol=1e-6 * c)
    guess = np.where(s_paper > c / 2, 0, 1)
    assert np.all(guess == 1)
    assert np.count_nonzero(guess != a) == n0


# -- 3. honest selection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accuracies", "answers", "tolerance", "expected"),
    [
        # best answered accuracy 0.85; 0.845 is within 0.01 and fairer; 0.70 is fairest but bad
        ([0.80, 0.85, 0.845, 0.70], [0.01, 0.20, -0.05, 0.0], 0.01, 2),
        # the unanswered 0.90 does not set the bar: candidates 1 and 2 are within 0.02 of 0.80
        ([0.90, 0.80, 0.79], [None, 0.30, -0.10], 0.02, 2),
        # ties in |answer| go to the lower index
        ([0.80, 0.80, 0.80], [0.10, -0.10, 0.10], 0.0, 0),
        ([0.70, 0.80, 0.80], [0.0, -0.10, 0.10], 0.05, 1),
        # tolerance 0: only the most accurate answered candidates
        ([0.80, 0.81, 0.79], [0.0, 0.30, 0.0], 0.0, 1),
        # NaN counts as unanswered
        ([0.80, 0.80], [float("nan"), 0.30], 0.01, 1),
        ([0.80, 0.80], [None, None], 0.01, None),
    ],
)
def test_choose_deployment(
    accuracies: list[float], answers: list[float | None], tolerance: float, expected: int | None
) -> None:
    assert choose_deployment(accuracies, answers, tolerance) == expected


def test_honest_developer_with_exact_answers_agrees(mixed_run: RunResult) -> None:
    alice = mixed_run.summary["developers"]["alice"]
    assert alice["strategy"] == "honest_selection"
    assert alice["deployed_agrees"] is True
    assert alice["metric_error"] == 0.0
    assert alice["sent"] == alice["answered"] == 3
    events = _events(mixed_run.log_path)
    answers = [
        e["values"][0]
        for e in events
        if e.get("event") == "answer_received" and e.get("agent") == "alice"
    ]
    report = next(
        e["report"]
        for e in events
        if e.get("event") == "developer_stopped" and e.get("agent") == "alice"
    )
    assert report["answers"] == answers
    best = max(report["accuracies"])
    good = [i for i, acc in enumerate(report["accuracies"]) if acc >= best - 0.01]
    assert alice["deployed"] == min(good, key=lambda i: (abs(answers[i]), i))


# -- 4. the external auditor --------------------------------------------------------------------

_S = DetectorSettings()


def _record(
    qid: str, models: Any, *, sender: str = "eve", org: str = "acme", answered: bool = True
) -> QueryRecord:
    h = np.atleast_2d(np.asarray(models, dtype=np.float64))
    return QueryRecord(qid, sender, org, 0.0, "sp", h, answered, None if answered else "x")


def test_near_duplicate_detector() -> None:
    base = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1], dtype=np.float64)
    flipped = base.copy()
    flipped[3] = 0.0  # L1 distance 1
    two_off = flipped.copy()
    two_off[0] = 0.0  # L1 distance 2 from base
    found = detect_near_duplicate([_record("q2", flipped)], [_record("q1", base)], _S)
    assert [(who, org) for who, org, _ in found] == [("eve", "acme")]
    assert "q2" in found[0][2]
    assert detect_near_duplicate([_record("q2", two_off)], [_record("q1", base)], _S) == []
    refused = [_record("q1", base, answered=False)]
    assert detect_near_duplicate([_record("q2", flipped)], refused, _S) == []
    other_org = [_record("q1", base, sender="zed", org="other")]
    assert detect_near_duplicate([_record("q2", flipped)], other_org, _S) == []
    # another identity of the same organisation does count; so does an earlier answered model
    # read in the same visit
    same_org = [_record("q1", base, sender="zed")]
    assert [f[0] for f in detect_near_duplicate([_record("q2", flipped)], same_org, _S)] == ["eve"]
    both_new = [_record("q1", base, sender="zed"), _record("q2", flipped)]
    assert [f[0] for f in detect_near_duplicate(both_new, [], _S)] == ["eve"]


def test_low_support_detector() -> None:
    single = np.zeros(10)
    single[6] = 1.0
    balanced = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0], dtype=np.float64)
    found = detect_low_support([_record("q1", np.stack([single, balanced]))], [], _S)
    assert found == [("eve", "acme", "1 model(s) accept or reject fewer than 5 people")]
    assert detect_low_support([_record("q1", balanced)], [], _S) == []
    rejects_one = 1.0 - single
    assert [f[0] for f in detect_low_support([_record("q1", rejects_one)], [], _S)] == ["eve"]


def test_volume_detector() -> None:
    s = DetectorSettings(volume_max_models=3)
    rows = _models(30, 4)
    over = [_record("q1", rows[:2]), _record("q2", rows[2:], sender="zed")]
    found = detect_volume(over, [], s)
    assert [(who, org) for who, org, _ in found] == [("zed", "acme")]
    assert "4 models" in found[0][2]
    assert detect_volume([_record("q1", rows[:3])], [], s) == []
    split = [_record("q1", rows[:2]), _record("q2", rows[2:], sender="zed", org="other")]
    assert detect_volume(split, [], s) == []


def test_noise_family_detector() -> None:
    rng = np.random.default_rng(31)
    h0 = rng.uniform(0.0, 1.0, 50)
    family = np.clip(h0 + rng.uniform(-0.1, 0.1, (20, 50)), 0.0, 1.0)
    found = detect_noise_family([_record("q1", family[:12]), _record("q2", family[12:])], [], _S)
    assert [(who, org) for who, org, _ in found] == [("eve", "acme")]
    assert "20 of 20" in found[0][2]
    assert detect_noise_family([_record("q1", family[:19])], [], _S) == []
    unrelated = rng.uniform(0.0, 1.0, (20, 50))
    assert detect_noise_family([_record("q1", unrelated)], [], _S) == []
    # per identity: two identities with 10 models each are not a family
    split = [_record("q1", family[:10]), _record("q2", family[10:], sender="zed")]
    assert detect_noise_family(split, [], _S) == []


def _of(events: list[dict[str, Any]], event: str, agent: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in events if e.get("event") == event and (agent is None or e.get("agent") == agent)
    ]


def _outcomes(events: list[dict[str, Any]], agent: str) -> list[tuple[float, str]]:
    """(time sent, 'answered' or the refusal reason) for each query of one developer."""
    sent = {e["query_id"]: e["t"] for e in _of(events, "query_sent", agent)}
    out = {e["query_id"]: "answered" for e in _of(events, "answer_received", agent)}
    out |= {e["query_id"]: e["reason"] for e in _of(events, "refusal_received", agent)}
    assert set(out) == set(sent)
    return sorted((sent[q], out[q]) for q in sent)


def _first_alert(events: list[dict[str, Any]]) -> float:
    alerts = _of(events, "alert_received", "compliance")
    assert alerts and {e["developer"] for e in alerts} == {"mallory"}
    return min(e["t"] for e in alerts)


def test_auditor_suspends_the_flagged_identity(audited_runs: dict[str, Any]) -> None:
    events = audited_runs["suspend_identity"]
    t_alert = _first_alert(events)
    assert t_alert == pytest.approx(1.0)  # the first visit, one hour in
    mallory = _outcomes(events, "mallory")
    assert [o for t, o in mallory if t < t_alert] == ["answered"]  # the probe
    after = [o for t, o in mallory if t > t_alert]
    assert after and set(after) == {"suspended"}
    refused = _of(events, "query_refused", "compliance")
    assert refused and {(e["sender"], e["reason"]) for e in refused} == {("mallory", "suspended")}
    notices = _of(events, "notice_received", "mallory")
    assert notices and notices[0]["kind"] == "suspended"
    assert notices[0]["t"] == pytest.approx(t_alert)
    for other in ("alice", "bob"):
        outcomes = _outcomes(events, other)
        assert len(outcomes) == 3 and {o for _, o in outcomes} == {"answered"}
        assert _of(events, "notice_received", other) == []


def test_auditor_suspends_the_whole_organisation(audited_runs: dict[str, Any]) -> None:
    events = audited_runs["suspend_organization"]
    t_alert = _first_alert(events)
    for ident in ("mallory", "alice"):  # both of acme
        after = [o for t, o in _outcomes(events, ident) if t > t_alert]
        assert after and set(after) == {"suspended"}, ident
    assert len([1 for t, _ in _outcomes(events, "alice") if t > t_alert]) == 3
    assert _of(events, "notice_received", "mallory")
    bob = _outcomes(events, "bob")
    assert len(bob) == 3 and {o for _, o in bob} == {"answered"}


def test_auditor_log_only_refuses_nothing(audited_runs: dict[str, Any]) -> None:
    events = audited_runs["log_only"]
    _first_alert(events)
    assert len(_of(events, "alert_raised", "auditor")) >= 1
    assert _of(events, "query_refused") == []
    assert _of(events, "notice_sent") == []
    assert _of(events, "notice_received") == []
    summary = events[-1]["summary"]
    assert summary["developers"]["mallory"]["leakage"] == 100.0
    assert summary["auditor"]["alerts"] == len(_of(events, "alert_raised"))


# -- 5. run logs --------------------------------------------------------------------------------

_DATE = re.compile(r"(19|20)\d\d-[01]\d-[0-3]\d|\d\d:\d\d:\d\d")
_TIME_KEY = re.compile(r"time|stamp|wall|date|clock", re.IGNORECASE)


def _walk(value: Any, key: str = "") -> Any:
    """Yield (key, value) for every value nested in a parsed JSON line."""
    yield key, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)


def _keys_sorted(value: Any) -> bool:
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(_keys_sorted(v) for v in value.values())
    if isinstance(value, list):
        return all(_keys_sorted(v) for v in value)
    return True


def _check_log(result: RunResult, developers: set[str]) -> None:
    lines = result.log_path.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    for line, event in zip(lines, events, strict=True):
        assert isinstance(event, dict)
        assert _keys_sorted(event), line[:120]
    header, summary, body = events[0], events[-1], events[1:-1]
    assert header["event"] == "header"
    for key in ("scenario", "scenario_hash", "seed", "versions", "resolved_scenario", "audit"):
        assert key in header, key
    canonical = json.dumps(header["resolved_scenario"], sort_keys=True, separators=(",", ":"))
    assert header["scenario_hash"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert header["resolved_scenario"]["seed"] == header["seed"]
    assert header["audit"]["n"] == 300 and header["audit"]["n0"] == 20
    assert summary["event"] == "summary"
    assert {"log": str(result.log_path), **summary["summary"]} == result.summary
    assert "log" not in summary["summary"]  # the file names no path, so it is location-free
    assert [e["seq"] for e in events] == list(range(len(events)))
    times = [e["t"] for e in body]
    assert all(isinstance(t, float) for t in times)
    assert times == sorted(times) and times[-1] <= header["horizon_hours"]
    for e in body:
        assert isinstance(e["agent"], str) and isinstance(e["event"], str)
    # no wall-clock time anywhere
    today = datetime.date.today()
    stamps = {today.isoformat(), today.strftime("%Y%m%d"), today.strftime("%d/%m/%Y")}
    now = time.time()
    for event in events:
        for key, value in _walk(event):
            if isinstance(value, str):
                assert not _DATE.search(value), (key, value)
                assert not any(s in value for s in stamps), (key, value)
                assert not _TIME_KEY.search(key), (key, value)
            elif isinstance(value, int | float) and not isinstance(value, bool):
                for scale in (1.0, 1e3, 1e6, 1e9):  # epoch seconds, ms, us, ns
                    assert abs(value - now * scale) > 2 * 86400 * scale, (key, value)
    # internal values stay internal
    internal = [e for e in body if e["event"] == "release_internal"]
    assert internal, "the run released nothing"
    assert all(e.get("internal") is True and e["agent"] == "compliance" for e in internal)
    dev_events = [e for e in body if e["agent"] in developers]
    assert {e["agent"] for e in dev_events} == developers
    for e in body:
        keys = {k for k, _ in _walk(e)}
        if "noise_scale" in keys:
            assert e.get("internal") is True and e["agent"] == "compliance", e["event"]
        if e["agent"] in developers:
            assert not keys & {"exact", "noise_scale", "sensitivity"}, e["event"]
    assert not any("noise_scale" in {k for k, _ in _walk(e)} for e in dev_events)


def test_log_of_an_exact_run(mixed_run: RunResult) -> None:
    _check_log(mixed_run, {"mallory", "alice"})


def test_log_of_a_noisy_audited_run(noisy_run: RunResult) -> None:
    _check_log(noisy_run, {"mallory", "alice", "bob"})
    events = _events(noisy_run.log_path)
    scales = [e["noise_scale"] for e in events if e.get("event") == "release_internal"]
    assert scales and all(s > 0 for s in scales)  # there was something to keep internal
    kinds = {e.get("event") for e in events}
    assert {"refusal_received", "audit_run", "alert_raised", "evaluation"} <= kinds


# -- 6. determinism -----------------------------------------------------------------------------


def test_same_seed_gives_a_byte_identical_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = parse_scenario(NOISY_YAML)
    results = []
    for name in ("a", "b"):
        where = tmp_path / name
        where.mkdir()
        monkeypatch.chdir(where)
        results.append(run_scenario(scenario, log_dir="logs"))
    first, second = (tmp_path / n / r.log_path for n, r in zip("ab", results, strict=True))
    assert first.read_bytes() == second.read_bytes()
    assert results[0].summary == results[1].summary


def test_same_seed_in_other_directories_gives_the_same_log(tmp_path: Path) -> None:
    scenario = parse_scenario(NOISY_YAML)
    one = run_scenario(scenario, log_dir=tmp_path / "one")
    two = run_scenario(scenario, log_dir=tmp_path / "two")
    assert one.log_path.read_bytes() == two.log_path.read_bytes()
    assert {**one.summary, "log": None} == {**two.summary, "log": None}


def test_other_seed_gives_another_log(tmp_path: Path) -> None:
    scenario = parse_scenario(CS_YAML)
    one = run_scenario(scenario, log_dir=tmp_path)
    two = run_scenario(scenario, seed=4, log_dir=tmp_path)
    assert one.log_path != two.log_path
    assert one.log_path.read_bytes() != two.log_path.read_bytes()
    assert (one.summary["seed"], two.summary["seed"]) == (3, 4)


def test_another_developer_does_not_change_the_first_ones_models(tmp_path: Path) -> None:
    alone = run_scenario(parse_scenario(CS_YAML), log_dir=tmp_path / "alone")
    text = CS_YAML.replace(
        "compliance:",
        "  - id: eve\n    organization: acme\n"
        "    strategy: {kind: compressed_sensing, queries: 80, batch: 20}\ncompliance:",
    )
    crowded = run_scenario(parse_scenario(text), log_dir=tmp_path / "crowded")
    digests = {}
    for label, result in (("alone", alone), ("crowded", crowded)):
        events = _events(result.log_path)
        digests[label] = [e["digest"] for e in _of(events, "query_sent", "mallory")]
        if label == "crowded":
            eve = [e["digest"] for e in _of(events, "query_sent", "eve")]
            assert len(eve) == 5 and not set(eve[1:]) & set(digests[label])
    assert len(digests["alone"]) == 4
    assert digests["alone"] == digests["crowded"]
    first, again = (r.summary["developers"]["mallory"] for r in (alone, crowded))
    for key in ("leakage", "revealed", "sent", "answered", "refused", "queries_to_100"):
        assert first[key] == again[key], key


# -- 7. replay ----------------------------------------------------------------------------------


def test_replay_rebuilds_the_summary(
    mixed_run: RunResult, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(mixed_run.log_path), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == mixed_run.summary
    assert out.err == ""


def test_replay_of_a_truncated_log(
    mixed_run: RunResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = mixed_run.log_path.read_bytes()
    starts = [0, *(i + 1 for i, b in enumerate(data[:-1]) if b == ord("\n"))]
    cut_line = len(starts) // 2
    cut = data[: starts[cut_line] + 20]  # in the middle of a line
    assert not cut.endswith(b"\n")
    path = tmp_path / "cut.jsonl"
    path.write_bytes(cut)
    assert main(["replay", str(path), "--json"]) == 1  # the run did not finish
    out = capsys.readouterr()
    rebuilt = json.loads(out.out)
    assert "no summary" in out.err and "truncated" in out.err
    complete = [json.loads(line) for line in cut.decode().splitlines()[:-1]]
    assert len(complete) == cut_line
    for ident in ("mallory", "alice"):
        sent = sum(e["models"] for e in _of(complete, "query_sent", ident))
        answered = sum(e["models"] for e in _of(complete, "answer_received", ident))
        assert rebuilt["developers"][ident]["sent"] == sent
        assert rebuilt["developers"][ident]["answered"] == answered
    assert rebuilt["log"] == str(path)


def test_replay_detects_a_tampered_log(
    mixed_run: RunResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = mixed_run.log_path.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    last["summary"]["developers"]["mallory"]["leakage"] = 62.5
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([*lines[:-1], json.dumps(last, sort_keys=True)]) + "\n")
    assert main(["replay", str(tampered), "--json"]) == 1
    assert "differs" in capsys.readouterr().err
    # an edited event under an untouched summary is caught too
    i = next(k for k, line in enumerate(lines) if '"event":"query_sent"' in line)
    event = json.loads(lines[i])
    event["models"] += 1
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([*lines[:i], json.dumps(event), *lines[i + 1 :]]) + "\n")
    assert main(["replay", str(edited), "--json"]) == 1
    assert "differs" in capsys.readouterr().err


# -- 8. isolation of the protected attribute ----------------------------------------------------

_NOT_FOLLOWED = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.GeneratorType,
    types.FrameType,
    types.CodeType,
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    type(None),
)


def _reachable(root: Any) -> dict[int, Any]:
    """Every object reachable from ``root`` through attributes, fields and containers."""
    seen: dict[int, Any] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen[id(obj)] = obj
        if isinstance(obj, _NOT_FOLLOWED):
            continue
        if isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
            continue
        if isinstance(obj, np.ndarray):
            if obj.dtype == object:
                stack.extend(obj.ravel().tolist())
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
            continue
        if isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
            continue
        if dataclasses.is_dataclass(obj):
            stack.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
        if hasattr(obj, "__dict__"):
            stack.extend(vars(obj).values())
        for cls in type(obj).__mro__:
            slots = cls.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if hasattr(obj, name):
                    stack.append(getattr(obj, name))
    return seen


def _rows_of_length(array: np.ndarray, n: int) -> list[np.ndarray]:
    """Every 1-D slice of ``array`` along an axis of length n, as floats where possible."""
    out = []
    for axis, size in enumerate(array.shape):
        if size != n:
            continue
        rows = np.moveaxis(array, axis, -1).reshape(-1, n)
        for row in rows:
            try:
                out.append(row.astype(np.float64))
            except (TypeError, ValueError):
                continue
    return out


def _assert_isolated(strategy: Strategy, protected: np.ndarray) -> None:
    context = strategy.context
    seen = _reachable(strategy)
    assert id(context) in seen
    assert id(context.public) in seen
    assert id(context.public.audit.labels) in seen
    assert id(context.base_predictions) in seen
    forbidden = (AuditSet, Compliance, Evaluator, AuditData)
    assert not [type(o).__name__ for o in seen.values() if isinstance(o, forbidden)]
    n = protected.size
    truth = protected.astype(np.float64)
    arrays = [o for o in seen.values() if isinstance(o, np.ndarray)]
    checked = 0
    for array in arrays:
        for row in _rows_of_length(array, n):
            checked += 1
            assert not np.array_equal(row, truth)
            assert not np.array_equal(row, 1.0 - truth)
    assert checked >= 2 + len(context.public.audit.columns)


@pytest.fixture(scope="module")
def public_world() -> tuple[AuditData, np.ndarray]:
    data = datasets.load("synthetic", n=300, n0=20, seed=3)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    return data, h0


@pytest.mark.parametrize(
    "config",
    [
        CompressedSensingConfig(queries=40, batch=20),
        HonestSelectionConfig(candidates=3, train_subsample=500, train_hours=0.0),
    ],
    ids=["compressed_sensing", "honest_selection"],
)
def test_strategies_cannot_reach_the_protected_attribute(
    config: Any, public_world: tuple[AuditData, np.ndarray]
) -> None:
    data, h0 = public_world
    context = DeveloperContext(data.public, h0, rng_for(3, "developer:x"))
    strategy = build_strategy(config, context)
    _assert_isolated(strategy, data.protected)


def test_isolation_check_can_fail(public_world: tuple[AuditData, np.ndarray]) -> None:
    data, h0 = public_world
    context = DeveloperContext(data.public, h0, rng_for(3, "developer:x"))
    strategy = build_strategy(CompressedSensingConfig(queries=4, batch=2), context)
    strategy.leak = {"hidden": [data.protected.astype(bool)]}  # type: ignore[attr-defined]
    with pytest.raises(AssertionError):
        _assert_isolated(strategy, data.protected)
    strategy.leak = (AuditSet.from_arrays(data.protected, data.public.audit.labels),)  # type: ignore[attr-defined]
    with pytest.raises(AssertionError):
        _assert_isolated(strategy, data.protected)


def _sim_imports(source: str, module: str) -> list[str]:
    """Imports in ``source`` (the module ``module``) that reach biasleak.sim."""
    bad = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            targets = [name] + [f"{name}.{alias.name}" for alias in node.names]
        bad += [
            t
            for t in targets
            if t in ("biasleak.sim", "sim") or t.startswith(("biasleak.sim.", "sim."))
        ]
    return bad


def test_agents_never_import_the_simulation() -> None:
    root = Path(biasleak.agents.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) >= 10
    for path in files:
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join(["biasleak.agents", *parts])
        if parts[-1] == "__init__":
            module = ".".join(["biasleak.agents", *parts[:-1], "__init__"])
        assert _sim_imports(path.read_text(encoding="utf-8"), module) == [], path.name
    # the check itself sees every spelling
    agent = "biasleak.agents.developer"
    assert _sim_imports("import biasleak.sim.world as w", agent)
    assert _sim_imports("from biasleak.sim import evaluation", agent)
    assert _sim_imports("from biasleak import sim", agent)
    assert _sim_imports("from .. import sim", agent)
    assert _sim_imports("from ..sim.runlog import jsonable", agent)
    assert _sim_imports("import sim.world", agent)
    assert not _sim_imports("from biasleak.mechanisms import policy\nimport simpy", agent)


# -- 9. biasleak run ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenario") / "mixed.yaml"
    path.write_text(MIXED_YAML, encoding="utf-8")
    return path


def _run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["run", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    summary = json.loads(out)
    assert isinstance(summary, dict)
    return summary


def test_cli_run_prints_the_summary_as_json(
    scenario_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = _run_json(capsys, str(scenario_file), "--log-dir", str(tmp_path))
    log = Path(summary["log"])
    assert log.parent == tmp_path and log.is_file()
    assert {"log": str(log), **_events(log)[-1]["summary"]} == summary
    assert set(summary["developers"]) == {"mallory", "alice"}
    for ident, d in summary["developers"].items():
        for key in (
            "leakage",
            "revealed",
            "sent",
            "answered",
            "refused",
            "epsilon_spent",
            "queries_to_90",
        ):
            assert key in d, (ident, key)
    assert summary["developers"]["alice"]["deployed_agrees"] is True
    assert "deployed_agrees" not in summary["developers"]["mallory"]
    assert summary["developers"]["mallory"]["revealed"] == 300
    assert summary["developers"]["mallory"]["epsilon_spent"] == "inf"
    for key in ("epsilon_spent", "mean_abs_error", "median_abs_error"):
        assert key in summary["compliance"]
    assert summary["compliance"]["mean_abs_error"] == 0.0
    assert summary["auditor"]["alerts"] == 0


def test_cli_run_seed_and_set_change_the_run(
    scenario_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run_json(capsys, str(scenario_file), "--log-dir", str(tmp_path))
    seeded = _run_json(capsys, str(scenario_file), "--log-dir", str(tmp_path), "--seed", "7")
    assert (base["seed"], seeded["seed"]) == (5, 7)
    assert seeded["log"].endswith("mixed-seed7.jsonl") and seeded["log"] != base["log"]
    assert Path(seeded["log"]).read_bytes() != Path(base["log"]).read_bytes()
    smaller = _run_json(
        capsys, str(scenario_file), "--log-dir", str(tmp_path / "n200"), "--set", "data.n=200"
    )
    header = _events(Path(smaller["log"]))[0]
    assert header["audit"]["n"] == 200
    assert header["resolved_scenario"]["data"]["n"] == 200
    assert smaller["developers"]["mallory"]["revealed"] <= 200


def test_cli_run_table_names_the_log(
    scenario_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(scenario_file), "--log-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    log = tmp_path / "mixed-seed5.jsonl"
    assert log.is_file()
    assert str(log) in out
    assert "mallory" in out and "alice" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_model_digest_is_a_content_hash() -> None:
    h = _models(40, 2)
    assert model_digest(h) == model_digest(h.copy())
    assert model_digest(h) != model_digest(h[::-1])
    assert re.fullmatch(r"[0-9a-f]{16}", model_digest(h))


def test_the_shared_world_fixture_runs_to_its_horizon_and_logs_a_summary(world) -> None:  # type: ignore[no-untyped-def]
    assert world.horizon == pytest.approx(48.0) and world.env.now == 0.0
    world.env.run(until=world.horizon)
    result = world.finish()
    assert result.summary["developers"]["mallory"]["strategy"] == "compressed_sensing"
    assert result.log_path.is_file()
