"""The floating-point attack ``fp_probe``: numpy's Laplace draw rebuilt bit for bit, the
reachability test, decisions against the naive and the safe sampler, and a run end to end.

Statistical checks use fixed seeds. Where a share is compared with a threshold, the threshold
sits at least 8 binomial standard deviations from the value the sampler's porosity gives
(about 0.8 of one-person answers decided with certainty), so a fresh seed would cross it with
probability below 1e-12.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from biasleak.agents.public import PublicData, PublicView
from biasleak.agents.strategies import (
    STRATEGIES,
    AnswerInfo,
    DeveloperContext,
    FpProbe,
    FpProbeConfig,
    Stop,
    Submit,
)
from biasleak.agents.strategies.fp_probe import (
    laplace_noise_from_index,
    laplace_reachable,
    noise_interval,
    sp_candidates,
)
from biasleak.mechanisms.metrics import statistical_parity
from biasleak.mechanisms.release import release
from biasleak.mechanisms.sensitivity import global_sensitivity
from biasleak.sim.scenario import load_scenario, parse_scenario
from biasleak.sim.world import run_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def _context(n: int, seed: int = 0) -> DeveloperContext:
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.5).astype(np.int8)
    view = PublicView(rng.standard_normal((n, 2)).astype(object), y, ("x0", "x1"), ())
    public = PublicData("hand", "group", view, view)
    return DeveloperContext(public, rng.uniform(0.05, 0.95, n), np.random.default_rng(seed + 1))


def _protected(n: int, n0: int, seed: int) -> np.ndarray:
    a = np.ones(n, dtype=np.int8)
    a[np.random.default_rng(seed).choice(n, size=n0, replace=False)] = 0
    return a


def _drive(
    strategy: FpProbe,
    protected: np.ndarray,
    *,
    mechanism: str = "laplace",
    sampler: str = "naive",
    epsilon: float = 1.0,
    delta: float = 0.0,
    bounding: str = "raw",
    seed: int = 0,
) -> None:
    """Answer every query of the strategy the way the compliance side does (epsilon per model)."""
    rng = np.random.default_rng(seed)
    n1, n0 = int(protected.sum()), int((protected == 0).sum())
    while True:
        action = strategy.next_action(0.0)
        if isinstance(action, Stop):
            return
        assert isinstance(action, Submit)
        m = action.predictions.shape[0]
        exact = np.asarray(statistical_parity(action.predictions, protected=protected))
        rel = release(
            mechanism,
            exact,
            metric="sp",
            n1=n1,
            n0=n0,
            m=m,
            epsilon=epsilon * m,
            delta=delta * m,
            rng=rng,
            sampler=sampler,
            bounding=bounding,
        )
        info = AnswerInfo(mechanism, epsilon * m, delta * m, sampler, (False,) * m)
        strategy.receive_answer(rel.values, info, 0.0)


# -- the reconstruction of numpy's sampler -------------------------------------------------------


@pytest.mark.parametrize("bitgen", [np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64])
@pytest.mark.parametrize("scale", [0.5020080321285141, 1.0, 3.7e-3])
def test_reconstruction_matches_numpy_bit_for_bit(bitgen: type, scale: float) -> None:
    rng = np.random.Generator(bitgen(11))
    twin = np.random.Generator(bitgen())
    twin.bit_generator.state = rng.bit_generator.state
    draws = rng.laplace(0.0, scale, size=20_000).tolist()
    raw = twin.bit_generator.random_raw(20_000).tolist()  # one 64-bit word per draw
    ks = [r >> 11 for r in raw]
    assert all(k > 0 for k in ks)  # k = 0 is rejected by numpy and has probability 2^-53
    rebuilt = [laplace_noise_from_index(k, scale) for k in ks]
    assert rebuilt == draws


def test_noise_is_monotone_in_the_uniform_integer() -> None:
    scale = 0.75
    assert laplace_noise_from_index(1 << 52, scale) == 0.0  # U = 1/2
    assert laplace_noise_from_index(1, scale) == pytest.approx(scale * math.log(2.0**-52))
    ks = sorted(np.random.default_rng(3).integers(1, 1 << 53, size=5000).tolist())
    xs = [laplace_noise_from_index(k, scale) for k in ks]
    assert all(a <= b for a, b in itertools.pairwise(xs))


def test_noise_interval_is_exactly_the_set_of_solutions() -> None:
    rng = np.random.default_rng(5)
    for _ in range(300):
        v = float(rng.choice([1.0 / 380, -1.0 / 20, 0.25, 1e-9]))
        y = float(v + rng.laplace(0.0, 0.5))
        interval = noise_interval(v, y)
        assert interval is not None
        low, high = interval
        assert v + low == y and v + high == y
        assert v + math.nextafter(low, -math.inf) != y
        assert v + math.nextafter(high, math.inf) != y
    # Sums with 1.0 and a noise near -1 are multiples of 2^-53: the smallest subnormal is never one.
    assert noise_interval(1.0, 5e-324) is None


def test_candidates_are_the_compliance_doubles() -> None:
    n, n0 = 301, 37
    a = _protected(n, n0, seed=2)
    model = np.zeros((3, n))
    j1, j0 = int(np.flatnonzero(a == 1)[4]), int(np.flatnonzero(a == 0)[2])
    model[0, j1], model[1, j0], model[2, j1] = 1.0, 1.0, 1.0
    exact = np.asarray(statistical_parity(model, protected=a))
    v1, v0 = sp_candidates(n, n0)
    assert (exact[0], exact[1]) == (v1, v0)
    with pytest.raises(ValueError, match=r"n0 must be a group size in \[1, 300\]"):
        sp_candidates(n, 301)


# -- decisions on direct calls ------------------------------------------------------------------


def test_naive_laplace_outputs_are_mostly_decided_and_always_right() -> None:
    n, n0 = 400, 60
    v1, v0 = sp_candidates(n, n0)
    rng = np.random.default_rng(21)
    scale = global_sensitivity("sp", n=n, m=1) / 1.0
    certain = 0
    trials = 400
    for i in range(trials):
        advantaged = i % 2 == 0
        v = v1 if advantaged else v0
        y = float(
            release("laplace", [v], n1=n - n0, n0=n0, epsilon=1.0, rng=rng, sampler="naive").values[
                0
            ]
        )
        r1, r0 = laplace_reachable(v1, y, scale), laplace_reachable(v0, y, scale)
        assert r1 if advantaged else r0  # the truth is always reachable
        if r1 != r0:
            certain += 1
            assert r1 == advantaged
    assert certain / trials > 0.6


def test_strategy_against_naive_sampler_infers_n0_and_never_errs() -> None:
    n, n0 = 300, 45
    a = _protected(n, n0, seed=8)
    strategy = FpProbe(FpProbeConfig(batch=60), _context(n))
    _drive(strategy, a)
    report = strategy.report()
    assert report["n0_hypotheses_left"] == 1
    assert report["n0_estimate"] == n0
    assert report["unexplained_answers"] == 0
    est = strategy.estimate
    assert est is not None and est.probability is not None
    sure = est.probability == 1.0
    assert int(sure.sum()) == report["revealed_with_certainty"]
    assert sure.mean() > 0.6
    assert np.array_equal(est.attribute[sure], a[sure])
    assert np.all(est.confidence[sure] == 1.0)
    assert np.all(est.probability[~sure] < 1.0)


def test_strategy_against_naive_smooth_laplace() -> None:
    n, n0 = 250, 30
    a = _protected(n, n0, seed=9)
    strategy = FpProbe(FpProbeConfig(batch=50), _context(n))
    _drive(strategy, a, mechanism="smooth_laplace", delta=1e-6)
    report = strategy.report()
    assert report["n0_estimate"] == n0 and report["n0_hypotheses_left"] == 1
    est = strategy.estimate
    assert est is not None and est.probability is not None
    sure = est.probability == 1.0
    assert sure.mean() > 0.5
    assert np.array_equal(est.attribute[sure], a[sure])


def test_safe_sampler_leaves_no_certain_decision() -> None:
    n, n0 = 300, 45
    a = _protected(n, n0, seed=8)
    strategy = FpProbe(FpProbeConfig(batch=60), _context(n))
    _drive(strategy, a, sampler="safe")
    report = strategy.report()
    assert report["revealed_with_certainty"] == 0
    assert report["n0_hypotheses_left"] == n - 1  # nothing is pruned: every value fits both
    est = strategy.estimate
    assert est is not None and est.probability is not None
    assert np.all(est.probability < 1.0)
    assert np.all(est.confidence < 0.5)


def test_a_wrong_sampler_model_withdraws_every_certain_claim() -> None:
    # Truncated releases come from an inverse CDF, not from the plain sampler: answers that no
    # hypothesis explains show the model is wrong, and the strategy then claims nothing.
    n, n0 = 300, 45
    a = _protected(n, n0, seed=8)
    strategy = FpProbe(FpProbeConfig(batch=60), _context(n))
    _drive(strategy, a, bounding="truncate")
    report = strategy.report()
    assert report["unexplained_answers"] > 0
    assert report["revealed_with_certainty"] == 0


def test_clamped_naive_releases_are_still_decided_right() -> None:
    n, n0 = 300, 45
    a = _protected(n, n0, seed=8)
    strategy = FpProbe(FpProbeConfig(batch=60), _context(n))
    _drive(strategy, a, bounding="clamp", seed=2)
    est = strategy.estimate
    assert est is not None and est.probability is not None
    sure = est.probability == 1.0
    assert strategy.report()["n0_estimate"] == n0
    assert sure.mean() > 0.5
    assert np.array_equal(est.attribute[sure], a[sure])


@pytest.mark.parametrize("mechanism", ["attribute_conceal", "gaussian"])
def test_non_invertible_noise_falls_back_to_the_likelihood(mechanism: str) -> None:
    n, n0 = 200, 40
    a = _protected(n, n0, seed=4)
    strategy = FpProbe(FpProbeConfig(batch=50), _context(n))
    delta = 1e-6 if mechanism == "gaussian" else 0.0
    _drive(strategy, a, mechanism=mechanism, sampler="naive", delta=delta)
    assert strategy.report()["revealed_with_certainty"] == 0
    est = strategy.estimate
    assert est is not None and est.probability is not None
    assert np.all((est.probability >= 0.5) & (est.probability < 1.0))


def test_exact_answers_are_decided_for_everyone() -> None:
    n, n0 = 120, 17
    a = _protected(n, n0, seed=1)
    strategy = FpProbe(FpProbeConfig(targets=[3, 5, 8, 13, 21], batch=2), _context(n))
    while not isinstance(action := strategy.next_action(0.0), Stop):
        exact = np.asarray(statistical_parity(action.predictions, protected=a))
        m = exact.size
        strategy.receive_answer(exact, AnswerInfo("exact", math.inf, 0.0, "exact", (False,) * m), 0)
    est = strategy.estimate
    assert est is not None and est.probability is not None
    targets = [3, 5, 8, 13, 21]
    assert np.all(est.probability[targets] == 1.0)
    assert np.array_equal(est.attribute[targets], a[targets])
    others = np.setdiff1d(np.arange(n), targets)
    assert np.all(est.confidence[others] == 0.0)  # non-targets: the prior guess


# -- configuration ------------------------------------------------------------------------------


def test_registered_with_a_strict_config() -> None:
    config_type, strategy_type = STRATEGIES["fp_probe"]
    assert (config_type, strategy_type) == (FpProbeConfig, FpProbe)
    with pytest.raises(ValidationError):
        FpProbeConfig.model_validate({"kind": "fp_probe", "batch_size": 5})
    ctx = _context(50)
    assert FpProbe(FpProbeConfig(targets=7), ctx).targets == sorted(
        FpProbe(FpProbeConfig(targets=7), _context(50)).targets
    )
    assert len(FpProbe(FpProbeConfig(targets=7), ctx).targets) == 7
    with pytest.raises(ValueError, match="targets must be 'all', a count in"):
        FpProbe(FpProbeConfig(targets=[0, 50]), ctx)
    with pytest.raises(ValueError, match="targets must be 'all', a count in"):
        FpProbe(FpProbeConfig(targets=0), ctx)


@pytest.mark.parametrize("name", ["fp_probe_naive.yaml", "fp_probe.yaml"])
def test_scenario_files_validate(name: str) -> None:
    scenario = load_scenario(SCENARIOS / name)
    strategy = scenario.developers[0].strategy
    assert strategy.kind == "fp_probe" and strategy.targets == "all"


# -- end to end ---------------------------------------------------------------------------------

E2E_YAML = """
name: fp_small
seed: 4
horizon_days: 3
data: {dataset: synthetic, n: 200, minority: 30}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: fp_probe, targets: all, batch: 50}
compliance:
  metrics: [sp]
  policy:
    - {kind: noise, mechanism: laplace, epsilon: 1.0, sampler: SAMPLER}
"""


def _report(path: Path) -> dict[str, Any]:
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("event") == "developer_stopped" and event.get("agent") == "mallory":
            return dict(event["report"])
    raise AssertionError("mallory never stopped")


def test_end_to_end_naive_sampler(tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(E2E_YAML.replace("SAMPLER", "naive")), log_dir=tmp_path)
    mallory = result.summary["developers"]["mallory"]
    report = _report(result.log_path)
    assert mallory["answered"] == 200
    assert mallory["confident_wrong"] == 0
    assert report["n0_estimate"] == 30 and report["n0_hypotheses_left"] == 1
    assert report["revealed_with_certainty"] > 120
    assert mallory["leakage"] > 75.0


def test_end_to_end_safe_sampler(tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(E2E_YAML.replace("SAMPLER", "safe")), log_dir=tmp_path)
    mallory = result.summary["developers"]["mallory"]
    assert mallory["answered"] == 200
    assert _report(result.log_path)["revealed_with_certainty"] == 0
    assert mallory["confident_right"] + mallory["confident_wrong"] == 0
