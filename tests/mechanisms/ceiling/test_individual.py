"""Individual privacy accounting: each person's shifts against recomputed metrics, the level grid
that rounds them up, and the per-person ledger."""

from __future__ import annotations

import numpy as np
import pytest

from biasleak.mechanisms import metrics
from biasleak.mechanisms.ceiling import (
    EO_FAMILY,
    SATURATION,
    Pair,
    PersonLedger,
    flip_shifts,
    person_bounds,
    reference_shifts,
)
from biasleak.mechanisms.ceiling._individual import LEVEL_RATIO, level_value, shift_levels


def audit(n: int, n0: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = np.ones(n, dtype=np.int8)
    a[rng.choice(n, n0, replace=False)] = 0
    y = rng.integers(0, 2, n).astype(np.int8)
    h = rng.uniform(size=(4, n))
    h[0] = rng.integers(0, 2, n)  # a hard-decision model too
    return a, y, h


@pytest.mark.parametrize("metric", ["sp", "abs_sp", "eo", "abs_eo"])
@pytest.mark.parametrize(("n", "n0"), [(12, 1), (12, 2), (40, 9)])
def test_flip_shifts_against_recomputed_metrics(metric: str, n: int, n0: int) -> None:
    a, y, h = audit(n, n0, seed=n + n0)
    shifts = flip_shifts(metric, h, protected=a, labels=y)
    try:
        before = metrics.evaluate(metric, h, protected=a, labels=y)
    except ValueError:  # undefined here (a group with nobody of y = 1): no shift at all
        assert np.all(shifts == -1.0)
        return
    for i in range(n):
        b = a.copy()
        b[i] = 1 - b[i]
        pop = y.astype(bool) if metric in EO_FAMILY else np.ones(n, bool)
        left = b[pop]
        if not pop[i] or left.min() == left.max():  # not in the metric, or a group emptied
            assert np.all(shifts[:, i] == -1.0)
            continue
        after = metrics.evaluate(metric, h, protected=b, labels=y)
        assert shifts[:, i] == pytest.approx(np.abs(after - before), abs=1e-12)


@pytest.mark.parametrize("metric", ["sp", "abs_sp", "eo"])
def test_reference_shifts_bound_every_swap(metric: str) -> None:
    """Swapping i and j of opposite groups and one label stratum moves an answer by at most the
    sum of their moves to the reference (the triangle the answers ceiling uses)."""
    n, n0 = 30, 7
    a, y, h = audit(n, n0, seed=5)
    ref = reference_shifts(metric, h, protected=a, labels=y)
    before = metrics.evaluate(metric, h, protected=a, labels=y)
    checked = 0
    for i in range(n):
        for j in range(n):
            if a[i] == a[j] or y[i] != y[j] or (metric in EO_FAMILY and y[i] == 0):
                continue
            b = a.copy()
            b[i], b[j] = a[j], a[i]
            after = metrics.evaluate(metric, h, protected=b, labels=y)
            assert np.all(np.abs(after - before) <= ref[:, i] + ref[:, j] + 1e-12)
            checked += 1
    assert checked > 50
    if metric in EO_FAMILY:  # people with y = 0 cannot move an EO answer
        assert np.all(ref[:, y == 0] == -1.0)


def test_levels_round_up_within_two_percent() -> None:
    shifts = np.concatenate([np.geomspace(1e-12, 40.0, 5000), [0.0, -1.0]])
    lv = shift_levels(shifts[None, :])[0]
    assert np.all(lv[-2:] == -1)
    values = np.array([level_value("laplace", int(k)).parameter for k in lv[:-2]])
    positive = shifts[:-2]
    # rounded up, or past the saturation (every such pair counts as exact)
    assert np.all((values >= positive) | (values > SATURATION))
    ok = positive >= 1e-9
    assert np.all(values[ok] <= positive[ok] * LEVEL_RATIO * (1 + 1e-12))


def test_ledger_counts_and_merges() -> None:
    ledger = PersonLedger(3)
    ledger.add_shifts("laplace", np.array([[0.01, 0.0, 0.02], [0.01, 0.01, -1.0]]))
    ledger.add_common(Pair("pure", 0.1), 2)
    _, counts = ledger.matrix()
    assert counts.sum(axis=0).tolist()[-1] == 6  # the shared pair: twice for each of three
    per_person = counts[:, :-1].sum(axis=1)
    assert per_person.tolist() == [2, 1, 1]
    both = ledger.merge(ledger)
    assert both.matrix()[1].sum() == 2 * counts.sum()
    arrays = ledger.arrays("x")
    assert arrays["x/counts"].shape == (3, len(ledger.counts))
    assert arrays["x/common"].tolist() == [[2.0, 0.1, 0.0, 2.0]]
    with pytest.raises(ValueError, match="columns"):
        ledger.add_shifts("laplace", np.zeros((1, 4)))


def test_ledger_counts_every_level_of_every_person_once() -> None:
    rng = np.random.default_rng(5)
    shifts = np.exp(rng.uniform(-8.0, 0.0, size=(40, 30)))
    shifts[rng.random(shifts.shape) < 0.2] = 0.0  # no shift: nothing counted
    shifts[rng.random(shifts.shape) < 0.1] = -1.0  # no pair
    ledger = PersonLedger(30)
    ledger.add_shifts("cauchy", shifts[:25])
    ledger.add_shifts("cauchy", shifts[25:])
    lv = shift_levels(shifts)
    expected = {
        int(level): np.count_nonzero(lv == level, axis=0) for level in np.unique(lv[lv >= 0])
    }
    assert sorted(ledger.counts) == [("cauchy", level) for level in sorted(expected)]
    for level, per_person in expected.items():
        assert ledger.counts[("cauchy", level)].tolist() == per_person.tolist()


def test_person_bounds_per_person_and_with_a_prior() -> None:
    ledger = PersonLedger(4)
    ledger.add_shifts("laplace", np.array([[0.5, 0.05, 0.0, 0.2]]))
    pairs, counts = ledger.matrix()
    tv, none = person_bounds(pairs, counts)
    assert none is None
    exact = [-np.expm1(-s / 2) for s in (0.5, 0.05, 0.0, 0.2)]
    for got, truth in zip(tv, exact, strict=True):
        assert truth - 1e-12 <= got <= truth * LEVEL_RATIO + 1e-9
    flat_tv, flat = person_bounds(pairs, counts, prior=np.full(4, 0.5))
    assert flat == pytest.approx(50.0 * (1.0 + flat_tv.mean()), abs=1e-6)
