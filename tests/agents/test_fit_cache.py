"""Fits kept per process change nothing: every shipped scenario that fits models gives the same
log, byte for byte, with fits made afresh, with the cache cold and with it warm."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from biasleak.agents.models import (
    cached_fit,
    clear_fit_cache,
    fit_cache_counts,
    fresh_fits,
)
from biasleak.sim.scenario import load_scenario
from biasleak.sim.world import run_scenario

ROOT = Path(__file__).resolve().parents[2]
FITTING = ("honest_selection", "proxy_prior")
SCENARIOS = sorted(
    p
    for p in (ROOT / "scenarios").glob("*.yaml")
    if any(kind in p.read_text(encoding="utf-8") for kind in FITTING)
)


def _log(path: Path, out: Path, overrides: list[str] | None = None) -> bytes:
    result = run_scenario(load_scenario(path, overrides=overrides), log_dir=out)
    return Path(result.summary["log"]).read_bytes()


def test_some_shipped_scenarios_fit_models() -> None:
    assert len(SCENARIOS) >= 5, SCENARIOS


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_cached_fits_give_the_same_log(path: Path, tmp_path: Path) -> None:
    with fresh_fits():
        fresh = _log(path, tmp_path / "fresh")
    clear_fit_cache()
    before = fit_cache_counts()
    cold = _log(path, tmp_path / "cold")
    warm = _log(path, tmp_path / "warm")
    after = fit_cache_counts()
    assert after["hits"] > before["hits"], "the second run reused no fit"
    assert cold == fresh
    assert warm == fresh


def test_a_cached_subsample_leaves_the_random_stream_where_a_fresh_fit_leaves_it() -> None:
    # a subsample smaller than the training split draws from the developer's stream
    from biasleak.agents.strategies import DeveloperContext
    from biasleak.agents.strategies.honest import HonestSelection, HonestSelectionConfig
    from biasleak.sim import datasets

    data = datasets.make_synthetic(n=300, n0=20, seed=4)
    config = HonestSelectionConfig(candidates=3, train_subsample=60)
    h0 = np.full(len(data.public.audit), 0.5)

    def build() -> tuple[HonestSelection, np.random.Generator]:
        rng = np.random.default_rng(7)
        return HonestSelection(config, DeveloperContext(data.public, h0, rng)), rng

    with fresh_fits():
        fresh, fresh_rng = build()
    clear_fit_cache()
    _cold, cold_rng = build()
    before = fit_cache_counts()["hits"]
    warm, warm_rng = build()
    assert fit_cache_counts()["hits"] == before + 1
    expected = fresh_rng.random(5)
    np.testing.assert_array_equal(cold_rng.random(5), expected)
    np.testing.assert_array_equal(warm_rng.random(5), expected)
    np.testing.assert_array_equal(warm.candidates, fresh.candidates)
    assert warm.accuracies == fresh.accuracies
    with pytest.raises(ValueError):  # shared by every world: nobody may write to it
        warm.candidates[0, 0] = 1.0


def test_a_cached_fit_is_matched_by_identity_not_equality() -> None:
    clear_fit_cache()
    a, b = np.zeros(3), np.zeros(3)
    calls = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert cached_fit((a,), "k", compute) == 1
    assert cached_fit((a,), "k", compute) == 1  # the same object: reused
    assert cached_fit((b,), "k", compute) == 2  # equal, not the same: fitted afresh
    assert cached_fit((a,), "other", compute) == 3  # another key
    with fresh_fits():
        assert cached_fit((a,), "k", compute) == 4
    clear_fit_cache()
    assert cached_fit((a,), "k", compute) == 5


def test_warm_fits_makes_the_fits_a_forked_world_would_make(tmp_path: Path) -> None:
    from biasleak.sim.world import warm_fits

    scenario = load_scenario(ROOT / "scenarios" / "redteam_laplace.yaml")
    clear_fit_cache()
    warm_fits(scenario)
    fitted = fit_cache_counts()
    run_scenario(scenario, log_dir=tmp_path)  # the run itself fits nothing new
    after = fit_cache_counts()
    assert after["fits"] == fitted["fits"]
    assert after["hits"] > fitted["hits"]
