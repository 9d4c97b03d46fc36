"""The compressed-sensing attack without a stored model matrix, at small sizes.

Regenerated models (:mod:`biasleak.agents.strategies.model_source`) must come out the same
every time they are drawn; the blockwise AMP decoder (:mod:`biasleak.agents.strategies.blockwise`)
must agree with the stored-matrix decoders on the same answers; and a strategy with
``regenerate: true`` must run end to end in a simulated world without holding its models.
The whole-population run is ``benchmarks/scale.py``.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import simpy
from numpy.typing import NDArray
from pydantic import ValidationError

from biasleak.agents.compliance import Compliance
from biasleak.agents.developer import Developer
from biasleak.agents.models import train_base_model
from biasleak.agents.strategies import DeveloperContext, build_strategy
from biasleak.agents.strategies.blockwise import BAD_ANSWER, decode_blockwise
from biasleak.agents.strategies.compressed_sensing import (
    REGENERATE_DECODER,
    CompressedSensing,
    CompressedSensingConfig,
    EoRevealConfig,
)
from biasleak.agents.strategies.decoders import decode_statistical_parity
from biasleak.agents.strategies.model_source import PerturbedModels
from biasleak.agents.strategies.noise_model import NoiseModel
from biasleak.mechanisms.metrics import statistical_parity_weights
from biasleak.mechanisms.policy import AuditSet, Policy
from biasleak.sim import datasets
from biasleak.sim.scenario import ScenarioError, parse_scenario
from biasleak.sim.world import run_scenario


def _instance(
    n: int, n0: int, m: int, batch: int, seed: int = 0
) -> tuple[PerturbedModels, NDArray[np.float64], NDArray[np.int8]]:
    """Regenerated models around a skewed base model, the stored matrix, a hidden attribute."""
    rng = np.random.default_rng(seed)
    base = rng.beta(0.7, 2.0, n)  # many outputs near 0: the clip matters
    protected = np.ones(n, np.int8)
    protected[rng.choice(n, n0, replace=False)] = 0
    source = PerturbedModels.from_rng(rng, base, perturbation=0.1, count=m, batch=batch)
    H = np.concatenate([source.models(i) for i in range(len(source.batches))])
    return source, H, protected


def _answers(source: PerturbedModels, sp: NDArray[np.float64]) -> dict[int, Any]:
    return {i: sp[start:stop] for i, (start, stop) in enumerate(source.batches)}


def _leakage(guess: NDArray[np.int8], truth: NDArray[np.int8]) -> float:
    return 50.0 * (float(np.mean(guess[truth == 1] == 1)) + float(np.mean(guess[truth == 0] == 0)))


# -- 1. regenerated models ------------------------------------------------------------------------


def test_a_batch_regenerates_to_the_same_rows() -> None:
    base = np.random.default_rng(1).random(300)
    a = PerturbedModels(base, perturbation=0.1, count=130, batch=50, entropy=(7, 8, 9, 10))
    first = [a.models(i) for i in range(3)]
    assert [f.shape for f in first] == [(50, 300), (50, 300), (30, 300)]
    again = PerturbedModels(base, perturbation=0.1, count=130, batch=50, entropy=(7, 8, 9, 10))
    for i in (2, 0, 1):  # any order: each batch has its own stream
        assert np.array_equal(a.models(i), first[i])
        assert np.array_equal(again.models(i), first[i])
    other = PerturbedModels(base, perturbation=0.1, count=130, batch=50, entropy=(7, 8, 9, 11))
    assert not np.array_equal(other.models(0), first[0])
    assert not np.array_equal(a.models(1), first[0])  # batches differ from one another
    # the models are the paper's: clip(h0 + U(-b, b), 0, 1), and stay within b of h0
    r = a.uniforms(0).astype(np.float64)
    assert np.allclose(first[0], np.clip(base + 0.1 * (2.0 * r - 1.0), 0.0, 1.0), atol=1e-15)
    assert np.all(np.abs(first[0] - np.clip(base, 0, 1)) <= 0.1 + 1e-12)
    assert np.all((first[0] >= 0.0) & (first[0] <= 1.0))


def test_working_rows_are_the_models_in_float32_and_chunks_equal_the_batch() -> None:
    base = np.random.default_rng(2).beta(0.5, 0.5, 400)  # mass near 0 and 1: both clips
    src = PerturbedModels(base, perturbation=0.2, count=70, batch=70, entropy=(1,))
    w = src.working(0)
    assert w.dtype == np.float32
    assert np.allclose(src.offset + src.scale * w.astype(np.float64), src.models(0), atol=1e-7)
    chunks = [c.copy() for _, c in src.working_chunks(0, 16)]
    assert [c.shape[0] for c in chunks] == [16, 16, 16, 16, 6]
    assert np.array_equal(np.concatenate(chunks), w)


def test_the_family_seed_comes_from_the_developer_stream() -> None:
    base = np.full(50, 0.5)
    one = PerturbedModels.from_rng(
        np.random.default_rng(5), base, perturbation=0.1, count=10, batch=5
    )
    two = PerturbedModels.from_rng(
        np.random.default_rng(5), base, perturbation=0.1, count=10, batch=5
    )
    three = PerturbedModels.from_rng(
        np.random.default_rng(6), base, perturbation=0.1, count=10, batch=5
    )
    assert np.array_equal(one.models(1), two.models(1))
    assert not np.array_equal(one.models(1), three.models(1))


# -- 2. the blockwise decoder against the stored-matrix decoders ---------------------------------


def test_blockwise_equals_stored_amp_and_beats_omp_on_exact_answers() -> None:
    source, H, protected = _instance(n=1000, n0=80, m=360, batch=64)
    sp = H @ statistical_parity_weights(protected)
    n1, n0 = int(np.sum(protected == 1)), int(np.sum(protected == 0))
    blockwise = decode_blockwise(source, _answers(source, sp), n1=n1, n0=n0)
    stored = decode_statistical_parity(H, sp, n1=n1, n0=n0, method="amp")
    auto = decode_statistical_parity(H, sp, n1=n1, n0=n0)  # OMP, then basis pursuit
    assert blockwise.method == "amp_blockwise"
    assert np.array_equal(blockwise.attribute, stored.attribute)
    assert blockwise.probability is not None and stored.probability is not None
    assert np.allclose(blockwise.probability, stored.probability, atol=1e-4)
    assert _leakage(blockwise.attribute, protected) == 100.0
    assert _leakage(blockwise.attribute, protected) >= _leakage(auto.attribute, protected)


def test_blockwise_equals_stored_amp_under_laplace_noise() -> None:
    source, H, protected = _instance(n=800, n0=80, m=320, batch=50, seed=3)
    scale = 0.002
    sp = H @ statistical_parity_weights(protected)
    sp = sp + np.random.default_rng(4).laplace(0.0, scale, sp.size)
    n1, n0 = int(np.sum(protected == 1)), int(np.sum(protected == 0))
    noise = NoiseModel("laplace", scale)
    blockwise = decode_blockwise(source, _answers(source, sp), n1=n1, n0=n0, noise=noise)
    stored = decode_statistical_parity(H, sp, n1=n1, n0=n0, method="amp", noise=noise)
    assert blockwise.probability is not None and stored.probability is not None
    assert np.allclose(blockwise.probability, stored.probability, atol=1e-3)
    assert _leakage(blockwise.attribute, protected) >= _leakage(stored.attribute, protected) - 0.5
    assert 50.0 < _leakage(blockwise.attribute, protected) < 100.0  # a noisy, informative case


def test_blockwise_result_does_not_depend_on_threads_and_skips_refused_batches() -> None:
    source, H, protected = _instance(n=600, n0=60, m=300, batch=30, seed=5)
    sp = H @ statistical_parity_weights(protected)
    answers = _answers(source, sp)
    del answers[4]  # a refused batch
    n1, n0 = int(np.sum(protected == 1)), int(np.sum(protected == 0))
    one = decode_blockwise(source, answers, n1=n1, n0=n0, workers=1)
    two = decode_blockwise(source, answers, n1=n1, n0=n0, workers=2)
    assert np.array_equal(one.s, two.s)
    keep = np.concatenate([np.arange(*source.batches[i]) for i in sorted(answers)])
    stored = decode_statistical_parity(H[keep], sp[keep], n1=n1, n0=n0, method="amp")
    assert np.array_equal(one.attribute, stored.attribute)
    with pytest.raises(ValueError, match=BAD_ANSWER.split("{")[0]):
        decode_blockwise(source, {0: sp[:3]}, n1=n1, n0=n0)


# -- 3. the strategy ------------------------------------------------------------------------------

WORLD = """
name: regenerated
seed: 7
horizon_days: 5
data: {dataset: synthetic, n: 1500, minority: 90}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 500, batch: 100, regenerate: true, EXTRA}
compliance:
  metrics: [sp]
"""


@pytest.mark.parametrize("extra", ["decode_every: 0", "decode_every: 2"])
def test_a_regenerating_attack_reveals_everyone_end_to_end(extra: str, tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(WORLD.replace("EXTRA", extra)), log_dir=tmp_path)
    mallory = result.summary["developers"]["mallory"]
    assert mallory["error"] is None
    assert mallory["answered"] == 501  # the probe and 500 models
    assert mallory["leakage"] == 100.0
    assert mallory["revealed"] == 1500


def test_regenerate_is_opt_in_and_leaves_default_dumps_unchanged() -> None:
    default = CompressedSensingConfig()
    assert "regenerate" not in default.model_dump(mode="json")  # scenario hashes unchanged
    on = CompressedSensingConfig(regenerate=True)
    assert on.model_dump(mode="json")["regenerate"] is True
    assert CompressedSensingConfig.model_validate(on.model_dump(mode="json")) == on
    with pytest.raises(ValidationError, match=REGENERATE_DECODER.split(":")[0]):
        CompressedSensingConfig(regenerate=True, decoder="omp")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        EoRevealConfig(regenerate=True)  # type: ignore[call-arg]
    bad = WORLD.replace("EXTRA", "decoder: box")
    with pytest.raises(ScenarioError, match="decoder must be 'auto' or 'amp'"):
        parse_scenario(bad)


class _Quiet:
    """A logger that drops every event (the test measures memory, not logs)."""

    def info(self, event: str, **kw: Any) -> None:
        del event, kw

    def error(self, event: str, **kw: Any) -> None:
        raise AssertionError(f"{event}: {kw}")


@pytest.mark.slow
def test_no_agent_keeps_the_models_of_a_regenerating_attack() -> None:
    n, batch, queries = 2000, 50, 1000
    data = datasets.make_synthetic(n=n, n0=100, seed=1)
    h0 = train_base_model(data.public.train).predict_proba(data.public.audit)
    config = CompressedSensingConfig(queries=queries, batch=batch, regenerate=True)
    tracemalloc.start()  # from before the strategy exists: what it holds is counted
    strategy = build_strategy(config, DeveloperContext(data.public, h0, np.random.default_rng(1)))
    assert isinstance(strategy, CompressedSensing) and not hasattr(strategy, "models")
    env = simpy.Environment()
    compliance = Compliance(
        env,
        policy=Policy(metrics=("sp",)),
        audit=AuditSet.from_arrays(data.protected, data.public.audit.labels),
        rng=np.random.default_rng(2),
        log=_Quiet(),
        keep_predictions=False,  # no auditor
    )
    developer = Developer(
        env,
        identity="mallory",
        organization="acme",
        strategy=strategy,
        compliance=compliance.mailbox,
        log=_Quiet(),
    )
    compliance.register("mallory", "acme", developer.inbox)
    held: list[int] = []
    answer = strategy.on_answer

    def measured(values: NDArray[np.float64], now: float) -> None:
        answer(values, now)
        gc.collect()
        held.append(tracemalloc.get_traced_memory()[0])

    strategy.on_answer = measured  # type: ignore[method-assign]
    try:
        env.run(until=1000.0)
    finally:
        tracemalloc.stop()
    assert strategy.estimate is not None
    assert _leakage(strategy.estimate.attribute, data.protected) == 100.0
    batch_bytes = batch * n * 8
    assert len(held) == queries // batch + 1  # the probe and every batch
    # between answers at most the batch just answered is alive (all models: 20 batches), and
    # nothing grows with the answered models: not the strategy, not the developer process, not
    # the compliance agent
    assert max(held) < 2 * batch_bytes, [h // 1024 for h in held]
    assert max(held[2:]) - held[2] < batch_bytes / 4, [h // 1024 for h in held]
    assert all(record.predictions is None for record in compliance.query_log)
