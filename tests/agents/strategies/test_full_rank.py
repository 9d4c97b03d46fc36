"""Remark 3 of the paper without a base query: n - 1 flipped models and ``sum(v) = 0``.

The answers are computed here with :mod:`biasleak.mechanisms.metrics` on a protected vector only
the test holds; the strategy must recover everyone from n - 1 models, through the O(n) solve and
through the generic least-squares solve, and the two must agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from biasleak.agents.public import PublicData, PublicView
from biasleak.agents.strategies import DeveloperContext, Stop, Submit, build_strategy
from biasleak.agents.strategies.full_rank import FullRank, FullRankConfig, solve_skip_last
from biasleak.mechanisms import metrics


def _context(n: int, seed: int) -> DeveloperContext:
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.5).astype(np.int8)
    view = PublicView(rng.standard_normal((n, 2)).astype(object), y, ("x0", "x1"), ())
    h0 = rng.uniform(0.05, 0.95, n)
    return DeveloperContext(PublicData("hand", "group", view, view), h0, rng)


def _protected(n: int, n0: int, seed: int) -> NDArray[np.int8]:
    a = np.ones(n, dtype=np.int8)
    a[np.random.default_rng(seed + 7).choice(n, n0, replace=False)] = 0
    return a


def _play(strategy: FullRank, a: NDArray[np.int8]) -> int:
    """Answer every query exactly; return the number of models sent."""
    sent = 0
    for _ in range(10_000):
        action = strategy.next_action(0.0)
        if isinstance(action, Stop):
            return sent
        assert isinstance(action, Submit)
        sent += action.predictions.shape[0]
        strategy.on_answer(metrics.statistical_parity(action.predictions, protected=a), 0.0)
    raise AssertionError("the strategy never stopped")


@pytest.mark.parametrize(
    ("decoder", "method"), [("auto", "sum_constraint"), ("generic", "generic")]
)
@pytest.mark.parametrize("last_group", [0, 1])
def test_skip_last_without_base_query_uses_n_minus_1_models(
    decoder: str, method: str, last_group: int
) -> None:
    n, n0 = 120, 17
    a = _protected(n, n0, seed=3)
    a[-1] = last_group  # the unqueried person is recovered from sum(v) = 0 in both groups
    strategy = build_strategy(
        FullRankConfig(skip_last=True, base_query=False, decoder=decoder, batch=50),
        _context(n, seed=3),
    )
    assert isinstance(strategy, FullRank)
    assert _play(strategy, a) == n - 1
    est = strategy.estimate
    assert est is not None and est.method == method
    assert np.array_equal(est.attribute, a)
    assert est.models_used == n - 1


def test_solve_skip_last_matches_the_paper_v() -> None:
    n, n0 = 50, 9
    a = _protected(n, n0, seed=5)
    rng = np.random.default_rng(5)
    h0 = rng.uniform(0.1, 0.9, n)
    d = 1.0 - 2.0 * h0[:-1]
    H = np.tile(h0, (n - 1, 1))
    H[np.arange(n - 1), np.arange(n - 1)] += d
    sp = metrics.statistical_parity(H, protected=a)
    v = solve_skip_last(h0, d, sp)
    assert v is not None
    expected = np.where(a == 1, 1.0 / (n - n0), -1.0 / n0)
    assert np.allclose(v, expected, atol=1e-10)


def test_solve_skip_last_reports_a_singular_system() -> None:
    # 1 + sum (h0_i - h0_n)/d_i = 0: one flipped person with h0_1 - h0_2 = -d_1
    h0 = np.array([0.2, 0.7])
    d = np.array([0.5])
    assert solve_skip_last(h0, d, np.array([0.1])) is None
