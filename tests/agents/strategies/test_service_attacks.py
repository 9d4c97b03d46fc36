"""Attacks on the private fair-learning services: the decoding math, the strategies in a world, and
the red team's use of them (``agents/strategies/service_attacks.py``, ``sim/redteam/plan.py``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from biasleak.agents.strategies import HONEST_KINDS, STRATEGIES, build_strategy
from biasleak.agents.strategies.service_attacks import (
    DecodeOracleConfig,
    ProbePostprocessingConfig,
    decode_oracle_measurements,
    oracle_noise_scales,
    probe_base,
    probe_statistics,
    recovered_cost_sums,
    replay_multipliers,
)
from biasleak.mechanisms.fair import dp_postprocess, run_oracle_learner
from biasleak.mechanisms.fair.oracle import lagrangian_costs
from biasleak.sim.redteam import plan_attacks
from biasleak.sim.scenario import ATTACK_KINDS, parse_scenario
from biasleak.sim.world import developer_context, run_scenario


def _people(m: int, seed: int, d: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels and attribute of a synthetic audit set (features shifted by group)."""
    rng = np.random.default_rng(seed)
    a = (rng.random(m) < 0.6).astype(np.int64)
    x = rng.normal(size=(m, d)) + 0.7 * a[:, None]
    y = (x[:, 0] + rng.normal(size=m) > 0.6).astype(np.int64)
    return x, y, a


def _balanced_accuracy(guess: np.ndarray, a: np.ndarray) -> float:
    return 0.5 * (np.mean(guess[a == 1] == 1) + np.mean(guess[a == 0] == 0))


# -- post-processing probe ---------------------------------------------------------------------


def test_without_noise_each_probe_reads_both_people_for_every_group_pair() -> None:
    _, y, a = _people(400, 0)
    rng = np.random.default_rng(1)
    zero, one = np.flatnonzero(y == 0), np.flatnonzero(y == 1)
    seen = set()
    for k in range(24):
        i, j = int(zero[k]), int(one[k])
        base = probe_base(y, false_positive=i, false_negative=j)
        assert np.count_nonzero(base != y) == 2
        mixing = dp_postprocess(base, protected=a, labels=y, epsilon=math.inf, rng=rng).mixing
        z_fp, z_tp = probe_statistics(mixing)
        assert (z_fp > 0) == (a[i] == 1) and z_fp != 0.0
        assert (z_tp > 0) == (a[j] == 1) and z_tp != 0.0
        seen.add((int(a[i]), int(a[j])))
    assert seen == {(0, 0), (0, 1), (1, 0), (1, 1)}  # the claim holds in every combination


def test_without_noise_the_probe_reveals_the_cell_size() -> None:
    _, y, a = _people(300, 2)
    i = int(np.flatnonzero((y == 0) & (a == 1))[0])
    base = probe_base(y, false_positive=i, false_negative=None)
    mix = dp_postprocess(
        base, protected=a, labels=y, epsilon=math.inf, rng=np.random.default_rng(0)
    )
    z_fp, z_tp = probe_statistics(mix.mixing)
    assert z_fp == pytest.approx(1.0 / np.count_nonzero((y == 0) & (a == 1)), rel=1e-6)
    assert z_tp == 0.0


def test_under_noise_the_probe_stays_below_the_ceiling_but_above_chance() -> None:
    # 300 single probes at eps = 1: one release each, so no test beats e/(1+e) = 73.1% in
    # expectation; the Laplace cells give about 62%. Bounds at about 3 standard errors (2.8%).
    _, y, a = _people(500, 3)
    rng = np.random.default_rng(4)
    zero = np.flatnonzero(y == 0)
    guess, truth = [], []
    for i in zero[:300]:
        base = probe_base(y, false_positive=int(i), false_negative=None)
        mix = dp_postprocess(base, protected=a, labels=y, epsilon=1.0, rng=rng).mixing
        z_fp, _ = probe_statistics(mix)
        guess.append(1 if z_fp > 0 else 0 if z_fp < 0 else int(rng.integers(2)))
        truth.append(int(a[i]))
    ba = _balanced_accuracy(np.array(guess), np.array(truth))
    ceiling = math.e / (1.0 + math.e)
    assert 0.53 < ba < ceiling + 0.085


def test_probe_inputs_are_checked() -> None:
    y = np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match="false_positive must have label 0"):
        probe_base(y, false_positive=1, false_negative=None)
    with pytest.raises(ValueError, match="false_negative must have label 1"):
        probe_base(y, false_positive=None, false_negative=0)
    with pytest.raises(ValueError, match="mixing must have shape"):
        probe_statistics(np.zeros((2, 3)))


# -- oracle decoder ------------------------------------------------------------------------------


def _game(m: int, d: int, epsilon: float, seed: int = 0):  # type: ignore[no-untyped-def]
    x, y, a = _people(m, seed, d)
    result = run_oracle_learner(
        x,
        y,
        protected=a,
        epsilon=epsilon,
        delta=1e-6,
        gamma=0.02,
        bound=10.0,
        rounds=6,
        rng=np.random.default_rng(seed + 1),
        accountant="pld",
        min_cell_size=3,
    )
    design = np.hstack([x, np.ones((m, 1))])
    return x, y, a, design, result


def test_the_measurement_equations_reproduce_the_service_exactly_without_noise() -> None:
    _, y, a, design, result = _game(120, 4, math.inf)
    mu = replay_multipliers(result.noisy_violations, bound=10.0, gamma=0.02)
    np.testing.assert_allclose(mu, result.lambda_plus - result.lambda_minus, rtol=0, atol=1e-12)
    assert np.abs(mu[1:]).max() > 0.1  # the game moved: later rounds measure A
    sums = recovered_cost_sums(design, result.coefficients, result.intercepts)
    counts = np.zeros((2, 2), dtype=np.int64)
    np.add.at(counts, (a, y), 1)
    for t in range(result.rounds):
        costs = lagrangian_costs(y, codes=a, counts=counts, mu=mu[t])
        np.testing.assert_allclose(sums[t], design.T @ costs, rtol=1e-7, atol=1e-9)
        # and forwards: the service's classifier from the hypothesised costs
        gram = design.T @ design
        gram += 1e-10 * (np.trace(gram) / design.shape[1]) * np.eye(design.shape[1])
        w = -np.linalg.solve(gram, design.T @ costs)
        np.testing.assert_allclose(w[:-1], result.coefficients[t], rtol=1e-9, atol=1e-12)


def test_without_noise_a_small_audit_set_is_identified_completely() -> None:
    # 40 people, 24 features: each label has fewer people than independent measurements, and
    # the game moves both labels' multipliers (rank 2; a game that never leaves mu = 0 in a
    # label measures nothing there).
    _, y, a, design, result = _game(40, 24, math.inf, seed=2)
    assert max(np.count_nonzero(y == 0), np.count_nonzero(y == 1)) <= 25
    mu = replay_multipliers(result.noisy_violations, bound=10.0, gamma=0.02)[:, 0, :]
    assert np.linalg.matrix_rank(mu) == 2
    sums = recovered_cost_sums(design, result.coefficients, result.intercepts)
    score = decode_oracle_measurements(design, y, cost_sums=sums, multipliers=mu)
    assert np.array_equal((score > 0).astype(np.int64), a)


def test_the_noise_scales_are_the_services_own() -> None:
    _, _, _, design, result = _game(120, 4, 5.0)
    learner, auditor = oracle_noise_scales(
        design,
        epsilon=5.0,
        delta=1e-6,
        rounds=result.rounds,
        bound=10.0,
        min_cell_size=3,
        accountant="pld",
    )
    assert learner == result.learner_scale and auditor == result.auditor_scale
    assert oracle_noise_scales(
        design,
        epsilon=math.inf,
        delta=0.0,
        rounds=3,
        bound=10.0,
        min_cell_size=3,
        accountant="pld",
    ) == (0.0, 0.0)


def test_decoder_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="must agree"):
        decode_oracle_measurements(
            np.ones((5, 3)), np.zeros(5), cost_sums=np.ones((2, 4)), multipliers=np.ones((2, 2))
        )
    with pytest.raises(ValueError, match=r"shape \(T, G - 1, 2\)"):
        replay_multipliers(np.zeros((3, 2)), bound=1.0, gamma=0.0)


# -- strategies, world and red team ------------------------------------------------------------

WORLD = """
name: service_attacks_test
seed: 5
horizon_days: 5
data: {dataset: synthetic, n: 240, minority: 96, features: 3, group_shift: 1.0}
developers:
  - {id: pat, organization: o1, strategy: {kind: request_postprocessing}}
  - {id: mallory, organization: o2, strategy: {kind: probe_postprocessing}}
  - {id: oscar, organization: o3, strategy: {kind: decode_oracle, bound: 10.0, min_cell_size: 5}}
compliance:
  policy: []
  services:
    - {kind: dp_postprocessing, epsilon: .inf}
    - {kind: dp_oracle_learner, epsilon: .inf, rounds: 5, bound: 10.0, min_cell_size: 5}
"""


def test_both_attacks_run_in_a_world_and_are_scored_as_leakage(tmp_path: Path) -> None:
    run = run_scenario(parse_scenario(WORLD), log_dir=tmp_path)
    devs = run.summary["developers"]
    mallory, oscar = devs["mallory"], devs["oscar"]
    assert mallory["error"] is None and oscar["error"] is None
    assert mallory["estimated"] and mallory["leakage"] == 100.0  # exact service: all read
    assert mallory["stopped"] == "every probe sent"
    # The oracle reveals the in-sample regression of A on three features: well above chance.
    assert oscar["estimated"] and oscar["leakage"] > 60.0
    assert devs["pat"]["estimated"] is False  # the honest developer is no attack
    assert {"probe_postprocessing", "decode_oracle"} <= set(ATTACK_KINDS)
    assert not {"probe_postprocessing", "decode_oracle"} & HONEST_KINDS


def test_a_spent_budget_stops_the_probe(tmp_path: Path) -> None:
    text = WORLD.replace(
        "policy: []", "policy: [{kind: budget, epsilon: 3.0, scope: organization}]"
    )
    text = text.replace(
        "epsilon: .inf}\n    - {kind: dp_oracle", "epsilon: 1.0}\n    - {kind: dp_oracle"
    )
    run = run_scenario(parse_scenario(text), log_dir=tmp_path)
    mallory = run.summary["developers"]["mallory"]
    assert mallory["stopped"] == "service refused: budget_exhausted"
    assert mallory["refused"] == {"budget_exhausted": 1}
    assert mallory["epsilon_spent"] == 3.0


def test_the_red_team_adds_each_attack_only_where_its_service_is_offered() -> None:
    kinds = ["probe_postprocessing", "decode_oracle"]
    scenario = parse_scenario(WORLD.replace("bound: 10.0, min_cell_size: 5}\n", "bound: 7.0}\n"))
    plans = {p.kind: p for p in plan_attacks(scenario, kinds)}
    assert plans["probe_postprocessing"].applicable
    assert plans["probe_postprocessing"].metric == "dp_postprocessing"
    assert plans["decode_oracle"].metric == "dp_oracle_learner"
    # the scenario lists oscar with its own configuration: the red team uses it
    oscar = plans["decode_oracle"].developer
    assert oscar is not None and oscar.strategy.bound == 10.0  # type: ignore[attr-defined]
    no_oscar = WORLD.replace(
        "  - {id: oscar, organization: o3, strategy: {kind: decode_oracle, bound: 10.0, "
        "min_cell_size: 5}}\n",
        "",
    ).replace("bound: 10.0, min_cell_size: 5}\n", "bound: 7.0, min_cell_size: 4}\n")
    plans = {p.kind: p for p in plan_attacks(parse_scenario(no_oscar), kinds)}
    config = plans["decode_oracle"].developer.strategy  # type: ignore[union-attr]
    assert (config.bound, config.min_cell_size) == (7.0, 4)  # the offered service's parameters
    assert config.requests == 1
    budgeted = no_oscar.replace(
        "policy: []", "policy: [{kind: budget, epsilon: 25.0, delta: 1.0e-5}]"
    ).replace("epsilon: .inf, rounds: 5", "epsilon: 10.0, rounds: 5")
    plans = {p.kind: p for p in plan_attacks(parse_scenario(budgeted), ["decode_oracle"])}
    assert plans["decode_oracle"].developer.strategy.requests == 2  # type: ignore[union-attr]
    only_pp = no_oscar.replace(
        "    - {kind: dp_oracle_learner, epsilon: .inf, rounds: 5, bound: 7.0, min_cell_size: 4}\n",
        "",
    )
    plans = {p.kind: p for p in plan_attacks(parse_scenario(only_pp), kinds)}
    assert plans["probe_postprocessing"].applicable
    assert not plans["decode_oracle"].applicable
    assert "dp_oracle_learner" in (plans["decode_oracle"].reason or "")
    metrics_only = only_pp.replace(
        "  services:\n    - {kind: dp_postprocessing, epsilon: .inf}\n", ""
    ).replace("policy: []", "policy: []\n  metrics: [sp]")
    plans = {p.kind: p for p in plan_attacks(parse_scenario(metrics_only), kinds)}
    assert not plans["probe_postprocessing"].applicable
    assert "dp_postprocessing" in (plans["probe_postprocessing"].reason or "")


def test_probe_configuration_and_targets() -> None:
    scenario = parse_scenario(WORLD)
    context = developer_context(scenario, "mallory", "probe_postprocessing")
    config = ProbePostprocessingConfig(targets=10, repeats=2)
    strategy = build_strategy(config, context)
    schedule = strategy.schedule  # type: ignore[attr-defined]
    people = {p for pair in schedule for p in pair if p is not None}
    assert len(people) == 10 and len(schedule) % 2 == 0
    assert schedule[: len(schedule) // 2] == schedule[len(schedule) // 2 :]  # breadth first
    with pytest.raises(ValueError, match="targets must be 'all' or in"):
        build_strategy(ProbePostprocessingConfig(targets=10_000), context)
    assert STRATEGIES["decode_oracle"][0] is DecodeOracleConfig
