"""Privacy ledger: exact basic composition, DRV and KOV bounds, refusals and bad input.

Reference values are computed here independently of :mod:`biasleak.mechanisms.accounting`:
basic composition with ``Fraction(str(x))`` arithmetic, the DRV and KOV closed forms written out
with :mod:`math`, and the optimal homogeneous composition of KOV Theorem 3.3 by scanning every
``i`` with :func:`math.comb` and floats.
"""

from __future__ import annotations

import doctest
import io
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biasleak.mechanisms import accounting
from biasleak.mechanisms.accounting import (
    COMPOSITIONS,
    BudgetExceeded,
    Charge,
    Ledger,
    LedgerBook,
    basic_composition,
    drv_composition,
    kov_composition,
    kov_optimal_homogeneous,
)

REL = 1e-9  # tolerance for bounds computed with transcendental functions


# -- independent references ------------------------------------------------------------------


def dec(x: float) -> Fraction:
    """The decimal a float was written as (0.1 -> 1/10)."""
    return Fraction(str(x))


def round_up(x: Fraction) -> float:
    """The smallest float whose decimal reading (its repr) is >= x: the ledger's rounding."""
    f = float(x)
    return math.nextafter(f, math.inf) if dec(f) < x else f


def ref_drv(eps: list[float], deltas: list[float], slack: float) -> tuple[float, float]:
    """DRV 2010: sqrt(2 ln(1/slack) sum eps^2) + sum eps (e^eps - 1), delta = sum + slack."""
    sq = sum(e * e for e in eps)
    val = math.sqrt(2.0 * math.log(1.0 / slack) * sq) + sum(e * (math.exp(e) - 1.0) for e in eps)
    return val, sum(deltas) + slack


def ref_kov35(eps: list[float], deltas: list[float], slack: float) -> tuple[float, float]:
    """KOV 2015 Theorem 3.5 (heterogeneous closed form)."""
    sq = sum(e * e for e in eps)
    f = sum(e * (math.exp(e) - 1.0) / (math.exp(e) + 1.0) for e in eps)
    val = min(
        sum(eps),
        f + math.sqrt(2.0 * sq * math.log(math.e + math.sqrt(sq) / slack)),
        f + math.sqrt(2.0 * sq * math.log(1.0 / slack)),
    )
    keep = 1.0 - slack
    for d in deltas:
        keep *= 1.0 - d
    return val, 1.0 - keep


def ref_kov_deltas(eps: float, delta: float, k: int) -> list[float]:
    """Total delta of KOV Theorem 3.3 for i = 0..floor(k/2), straight from the formula."""
    norm = (1.0 + math.exp(eps)) ** k
    out = []
    for i in range(k // 2 + 1):
        s = sum(
            math.comb(k, l_) * (math.exp((k - l_) * eps) - math.exp((k - 2 * i + l_) * eps))
            for l_ in range(i)
        )
        out.append(1.0 - (1.0 - delta) ** k * (1.0 - s / norm))
    return out


def ref_kov_optimal(eps: float, delta: float, k: int, budget: float) -> tuple[float, float]:
    """Smallest (k - 2i) eps over all i whose total delta fits, else (k eps, delta_0)."""
    totals = ref_kov_deltas(eps, delta, k)
    fitting = [((k - 2 * i) * eps, t) for i, t in enumerate(totals) if t <= budget]
    return min(fitting) if fitting else (k * eps, totals[0])


def snapshot(ledger: Ledger) -> tuple[object, ...]:
    return (
        ledger.spent,
        ledger.remaining,
        ledger.spent_delta,
        ledger.remaining_delta,
        ledger.charges,
    )


# -- exact basic composition -----------------------------------------------------------------


def test_hundred_charges_of_a_tenth_spend_exactly_ten() -> None:
    naive = 0.0
    for _ in range(100):
        naive += 0.1
    assert naive < 10.0  # what float addition would report
    ledger = Ledger(10.0)
    for k in range(1, 101):
        ledger.charge(0.1)
        assert dec(ledger.spent) >= Fraction(k, 10)
        assert ledger.spent == round_up(Fraction(k, 10))
        assert dec(ledger.remaining) <= 10 - Fraction(k, 10)
    assert ledger.spent == 10.0
    assert ledger.remaining == 0.0
    assert len(ledger.charges) == 100
    assert not ledger.can_afford(0.1)
    before = snapshot(ledger)
    with pytest.raises(BudgetExceeded, match="Nothing was charged"):
        ledger.charge(0.1)
    assert snapshot(ledger) == before


def test_three_tenths_fit_a_budget_of_three_tenths_exactly() -> None:
    ledger = Ledger(0.3)
    for _ in range(3):
        ledger.charge(0.1)
    assert len(ledger.charges) == 3
    assert dec(ledger.spent) >= Fraction(3, 10)
    assert ledger.spent == round_up(Fraction(3, 10))
    assert ledger.remaining == 0.0
    with pytest.raises(BudgetExceeded):
        ledger.charge(1e-12)
    # 0.1 + 0.2 > 0.3 in floats, but the decimals sum to exactly 3/10
    other = Ledger(0.3)
    other.charge(0.1)
    other.charge(0.2)
    assert other.remaining == 0.0
    assert not other.can_afford(1e-15)


def test_ten_charges_of_seven_tenths_fit_a_budget_of_seven() -> None:
    naive = 0.0
    for _ in range(10):
        naive += 0.7
    assert naive != 7.0
    ledger = Ledger(7)
    for _ in range(10):
        ledger.charge(0.7)
    assert ledger.spent == 7.0
    assert ledger.remaining == 0.0
    with pytest.raises(BudgetExceeded):
        ledger.charge(0.7)
    assert ledger.spent == 7.0 and len(ledger.charges) == 10


def test_charges_are_recorded_in_order() -> None:
    ledger = Ledger(1.0, delta=1e-3)
    c1 = ledger.charge(0.25, 1e-4)
    c2 = ledger.charge(0.5)
    assert (c1, c2) == (Charge(0.25, 1e-4), Charge(0.5, 0.0))
    assert ledger.charges == (c1, c2)
    assert ledger.spent == 0.75
    assert ledger.remaining == 0.25
    assert ledger.spent_delta == pytest.approx(1e-4)
    assert ledger.remaining_delta == pytest.approx(9e-4)
    with pytest.raises(BudgetExceeded):
        ledger.charge(0.1, 1e-3)  # eps fits, delta does not
    assert ledger.charges == (c1, c2)


def test_basic_composition_function_is_exact_and_rounds_up() -> None:
    assert basic_composition([0.1] * 100) == (10.0, 0.0)
    eps, dlt = basic_composition([0.1, 0.2], [1e-6, 2e-6])
    assert dec(eps) >= Fraction(3, 10) and eps == round_up(Fraction(3, 10))
    assert dec(dlt) >= Fraction(3, 1_000_000)
    assert basic_composition([]) == (0.0, 0.0)


# -- property tests against a Fraction(str(x)) reference --------------------------------------

budgets = st.floats(0.05, 20.0) | st.integers(1, 2000).map(lambda n: n / 100)
eps_values = st.floats(1e-3, 25.0) | st.sampled_from([0.1, 0.2, 0.3, 0.7, 1.0, 2.5])


@settings(max_examples=120, deadline=None)
@given(
    budget=budgets,
    delta_budget=st.sampled_from([0.0, 1e-6, 1e-3]),
    charges=st.lists(st.tuples(eps_values, st.sampled_from([0.0, 0.0, 1e-7, 4e-4])), max_size=40),
)
def test_basic_ledger_matches_exact_reference(
    budget: float, delta_budget: float, charges: list[tuple[float, float]]
) -> None:
    ledger = Ledger(budget, delta_budget)
    ref_eps, ref_delta = Fraction(0), Fraction(0)
    accepted: list[Charge] = []
    last_spent = 0.0
    for eps, dlt in charges:
        fits = ref_eps + dec(eps) <= dec(budget) and ref_delta + dec(dlt) <= dec(delta_budget)
        assert ledger.can_afford(eps, dlt) == fits
        before = snapshot(ledger)
        try:
            ledger.charge(eps, dlt)
        except BudgetExceeded:
            assert not fits
            assert snapshot(ledger) == before
        else:
            assert fits
            ref_eps += dec(eps)
            ref_delta += dec(dlt)
            accepted.append(Charge(eps, dlt))
        assert ledger.charges == tuple(accepted)
        assert ledger.spent >= last_spent
        last_spent = ledger.spent
        # never below the exact sum, never above the budget (read as its decimal, rounded up)
        assert dec(ledger.spent) >= ref_eps
        assert ledger.spent == round_up(ref_eps)
        assert ledger.spent <= round_up(dec(budget))
        assert dec(ledger.spent_delta) >= ref_delta
        assert ledger.spent_delta <= round_up(dec(delta_budget))
        assert 0.0 <= ledger.remaining and dec(ledger.remaining) <= dec(budget) - ref_eps
        assert math.isclose(ledger.spent + ledger.remaining, budget, rel_tol=1e-12)


# -- the fast path of basic composition against exact planning on every query ---------------


def exact_only(ledger: Ledger) -> Ledger:
    """The same ledger with its float fast path switched off: every check is exact planning."""
    ledger._fast = False
    return ledger


units = st.sampled_from([0.1, 0.2, 0.3, 0.7, 0.01, 0.05, 1.0, 2.5, 1 / 3, 0.1 + 0.2])
fast_budgets = budgets | st.tuples(units, st.integers(1, 60)).map(lambda t: t[0] * t[1])
fast_budgets |= st.tuples(units, st.integers(1, 60)).map(lambda t: float(dec(t[0]) * t[1]))
# a charge: a fixed size, or "what is left" (lands exactly on the limit when representable), or
# one unit of the last place above or below what is left
step = st.tuples(st.just("size"), eps_values | units | st.floats(1e-9, 1e-3)) | st.tuples(
    st.sampled_from(["left", "left-up", "left-down"]), st.just(0.0)
)


@settings(max_examples=300, deadline=None)
@given(
    budget=fast_budgets,
    delta_budget=st.sampled_from([0.0, 1e-6, 1e-3, 0.3]),
    steps=st.lists(
        st.tuples(step, st.sampled_from([0.0, 0.0, 1e-7, 4e-4, 0.1]), st.booleans()),
        max_size=60,
    ),
)
def test_fast_path_decides_exactly_like_exact_planning(
    budget: float, delta_budget: float, steps: list[tuple[tuple[str, float], float, bool]]
) -> None:
    fast = Ledger(budget, delta_budget)
    exact = exact_only(Ledger(budget, delta_budget))
    ref = Fraction(0)
    ref_delta = Fraction(0)
    for (kind, size), dlt, look in steps:
        left = exact.remaining
        eps = {
            "size": size,
            "left": left,
            "left-up": math.nextafter(left, math.inf),
            "left-down": math.nextafter(left, 0.0),
        }[kind]
        if eps <= 0.0:  # the budget is used up exactly: try the smallest charge there is
            eps = math.ulp(0.0)
        fits = ref + dec(eps) <= dec(budget) and ref_delta + dec(dlt) <= dec(delta_budget)
        assert fast.can_afford(eps, dlt) == exact.can_afford(eps, dlt) == fits
        outcomes = []
        for ledger in (fast, exact):
            try:
                outcomes.append(ledger.charge(eps, dlt))
            except BudgetExceeded as err:
                outcomes.append(str(err))
        assert outcomes[0] == outcomes[1]
        assert isinstance(outcomes[0], Charge) == fits
        if fits:
            ref += dec(eps)
            ref_delta += dec(dlt)
        if look:  # read the state only now and then, so fast-path charges pile up unsettled
            assert snapshot(fast) == snapshot(exact)
            assert repr(fast) == repr(exact)
    assert snapshot(fast) == snapshot(exact)
    assert fast.spent == round_up(ref)


def test_fast_path_skips_exact_planning_far_from_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    plans: list[float] = []
    plan = Ledger._plan

    def counted(self: Ledger, epsilon: float, delta: float) -> tuple[Charge, dict[str, object]]:
        plans.append(epsilon)
        return plan(self, epsilon, delta)

    monkeypatch.setattr(Ledger, "_plan", counted)
    ledger = Ledger(10.0)
    for _ in range(90):  # far from the limit: no exact planning
        assert ledger.can_afford(0.1)
        ledger.charge(0.1)
    assert plans == []
    assert ledger.spent == 9.0  # the fast-path charges are summed exactly
    for _ in range(10):  # at the edge the rounding margin is gone: exact planning decides
        ledger.charge(0.1)
    assert plans and ledger.spent == 10.0 and ledger.remaining == 0.0
    assert not ledger.can_afford(0.1)
    for composition in ("advanced", "kov"):  # only basic composition has the fast path
        plans.clear()
        Ledger(10.0, 1e-6, composition).charge(0.1)
        assert plans == [0.1]


def _ref_decision(
    composition: str,
    charges: list[tuple[float, float]],
    budget: float,
    delta_budget: float,
    slack: float,
) -> str:
    """'accept', 'refuse' or 'unclear' (within rounding of a boundary) for this charge list."""
    eps = [e for e, _ in charges]
    dls = [d for _, d in charges]
    if sum(map(dec, eps)) <= dec(budget) and sum(map(dec, dls)) <= dec(delta_budget):
        return "accept"
    bounds = [ref_drv(eps, dls, slack)]
    if composition == "kov":
        bounds.append(ref_kov35(eps, dls, slack))
        if all(c == charges[0] for c in charges):
            e0, d0 = charges[0]
            bounds.append(ref_kov_optimal(e0, d0, len(charges), delta_budget))
    lo, hi = 1.0 - REL, 1.0 + REL
    if any(e <= budget * lo and d <= delta_budget * lo for e, d in bounds):
        return "accept"
    if all(e > budget * hi or d > delta_budget * hi for e, d in bounds):
        return "refuse"
    return "unclear"


@settings(max_examples=60, deadline=None)
@given(
    composition=st.sampled_from(["advanced", "kov"]),
    budget=st.floats(0.5, 20.0),
    delta_budget=st.sampled_from([1e-6, 1e-5, 1e-3]),
    charges=st.lists(
        st.tuples(
            st.floats(0.01, 3.0) | st.sampled_from([0.1, 0.25]),
            st.sampled_from([0.0, 0.0, 1e-8]),
        ),
        max_size=30,
    )
    | st.tuples(st.sampled_from([0.05, 0.1, 0.3]), st.integers(1, 30)).map(
        lambda t: [(t[0], 0.0)] * t[1]
    ),
)
def test_advanced_and_kov_ledgers_never_overspend(
    composition: str, budget: float, delta_budget: float, charges: list[tuple[float, float]]
) -> None:
    ledger = Ledger(budget, delta_budget, composition)
    assert ledger.slack == delta_budget / 2
    accepted: list[tuple[float, float]] = []
    last_spent = 0.0
    for eps, dlt in charges:
        decision = _ref_decision(
            composition, [*accepted, (eps, dlt)], budget, delta_budget, 0.5 * delta_budget
        )
        before = snapshot(ledger)
        try:
            ledger.charge(eps, dlt)
        except BudgetExceeded:
            assert decision != "accept"
            assert snapshot(ledger) == before
        else:
            assert decision != "refuse"
            accepted.append((eps, dlt))
        assert ledger.charges == tuple(Charge(e, d) for e, d in accepted)
        if composition == "advanced":  # min of two bounds that both grow with every charge
            assert ledger.spent >= last_spent
        last_spent = ledger.spent
        assert ledger.spent <= round_up(dec(budget))
        assert ledger.spent_delta <= round_up(dec(delta_budget))
        basic_sum = sum((dec(e) for e, _ in accepted), Fraction(0))
        assert ledger.spent <= round_up(basic_sum)
        if accepted:
            drv_eps, _ = ref_drv([e for e, _ in accepted], [d for _, d in accepted], ledger.slack)
            assert ledger.spent <= max(drv_eps * (1 + REL), budget)
        assert ledger.remaining == max(budget - ledger.spent, 0.0)


# -- DRV and KOV bounds ----------------------------------------------------------------------


def test_drv_hundred_charges_hand_computed() -> None:
    expected = math.sqrt(2 * 100 * math.log(1e5)) * 0.1 + 100 * 0.1 * (math.exp(0.1) - 1)
    assert expected == pytest.approx(5.8503, abs=1e-4)
    eps, dlt = drv_composition([0.1] * 100, [1e-7] * 100, slack=1e-5)
    assert eps == pytest.approx(expected, rel=REL)
    assert eps >= expected * (1 - 1e-15)  # rounded up, not down
    assert dlt == pytest.approx(100 * 1e-7 + 1e-5, rel=REL)
    eps0, dlt0 = drv_composition([0.1] * 100, slack=1e-5)
    assert eps0 == pytest.approx(expected, rel=REL)
    assert dlt0 == pytest.approx(1e-5, rel=REL)


def test_drv_heterogeneous_hand_computed() -> None:
    # sqrt(2 ln(1e6) (0.25 + 1)) + 0.5 (e^0.5 - 1) + 1 (e - 1)
    expected = math.sqrt(2 * math.log(1e6) * 1.25) + 0.5 * (math.exp(0.5) - 1) + (math.e - 1)
    eps, dlt = drv_composition([0.5, 1.0], [1e-7, 0.0], slack=1e-6)
    assert eps == pytest.approx(expected, rel=REL)
    assert dlt == pytest.approx(1.1e-6, rel=REL)


KOV_CASES = [
    ([0.1] * 100, [], 1e-5),
    ([0.5, 1.0, 0.2], [1e-6, 0.0, 1e-7], 1e-6),
    ([2.0, 3.0], [], 1e-3),
    ([0.01] * 1000, [1e-9] * 1000, 1e-6),
    ([0.05, 0.3, 0.3, 0.9, 0.02], [0.0] * 5, 0.01),
]


@pytest.mark.parametrize(("eps", "deltas", "slack"), KOV_CASES)
def test_kov_composition_matches_theorem_3_5(
    eps: list[float], deltas: list[float], slack: float
) -> None:
    got_eps, got_delta = kov_composition(eps, deltas, slack=slack)
    want_eps, want_delta = ref_kov35(eps, deltas, slack)
    assert got_eps == pytest.approx(want_eps, rel=REL)
    assert got_delta == pytest.approx(want_delta, rel=1e-7)
    drv_eps, _ = drv_composition(eps, deltas, slack=slack)
    assert got_eps <= drv_eps
    assert got_eps <= sum(eps) * (1 + REL)


def test_kov_sum_is_the_minimum_for_large_charges() -> None:
    eps, _ = kov_composition([2.0, 3.0], slack=1e-3)
    assert eps == pytest.approx(5.0, rel=REL)


@settings(max_examples=80, deadline=None)
@given(
    eps=st.lists(st.floats(1e-3, 5.0), min_size=1, max_size=60),
    slack=st.floats(1e-9, 0.1),
)
def test_kov_is_never_worse_than_drv_or_basic(eps: list[float], slack: float) -> None:
    kov, _ = kov_composition(eps, slack=slack)
    drv, _ = drv_composition(eps, slack=slack)
    basic, _ = basic_composition(eps)
    assert kov <= drv * (1 + REL)
    assert kov <= basic * (1 + REL)
    assert kov == pytest.approx(ref_kov35(eps, [], slack)[0], rel=REL)


@pytest.mark.parametrize("eps", [0.05, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 10, 20, 30])
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_kov_optimal_homogeneous_matches_scan_over_i(eps: float, k: int, delta: float) -> None:
    last = math.inf
    for budget in [0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.5]:
        got_eps, got_delta = kov_optimal_homogeneous(eps, delta, k, delta_budget=budget)
        want_eps, want_delta = ref_kov_optimal(eps, delta, k, budget)
        assert got_eps == pytest.approx(want_eps, rel=REL)
        assert got_delta == pytest.approx(want_delta, rel=1e-6, abs=1e-15)
        assert got_eps <= k * eps * (1 + REL)
        assert got_eps <= last  # a larger delta budget never costs more epsilon
        last = got_eps
        if want_delta <= budget:
            assert got_delta <= budget * (1 + REL) + 1e-300  # 0 is padded to 5e-324


def test_kov_optimal_single_mechanism_is_itself() -> None:
    for eps, delta in [(0.3, 0.0), (1.0, 1e-6), (2.5, 0.01)]:
        got = kov_optimal_homogeneous(eps, delta, 1, delta_budget=0.05)
        assert got == pytest.approx((eps, delta), rel=REL, abs=1e-300)


def test_kov_optimal_hand_computed_k2() -> None:
    # k = 2, i = 1: delta_1 = (e^{2 eps} - 1) / (1 + e^eps)^2, eps' = 0
    eps = 0.5
    d1 = (math.exp(2 * eps) - 1) / (1 + math.exp(eps)) ** 2
    assert kov_optimal_homogeneous(eps, 0.0, 2, delta_budget=d1 * 1.01) == pytest.approx(
        (0.0, d1), rel=1e-9, abs=1e-12
    )
    assert kov_optimal_homogeneous(eps, 0.0, 2, delta_budget=d1 * 0.99) == pytest.approx(
        (1.0, 0.0), rel=1e-9, abs=1e-300
    )


def _charge_until_refused(ledger: Ledger, eps: float, limit: int = 2000) -> int:
    for n in range(limit):
        try:
            ledger.charge(eps)
        except BudgetExceeded:
            return n
    raise AssertionError(f"{limit} charges were admitted")


def test_advanced_and_kov_admit_more_charges_than_basic() -> None:
    budget, delta, slack = 10.0, 1e-5, 5e-6
    n_basic = _charge_until_refused(Ledger(budget, delta), 0.1)
    n_adv = _charge_until_refused(Ledger(budget, delta, "advanced"), 0.1)
    n_kov = _charge_until_refused(Ledger(budget, delta, "kov"), 0.1)
    assert n_basic == 100

    def drv_fits(k: int) -> bool:
        e, d = ref_drv([0.1] * k, [], slack)
        return d <= delta and e <= budget

    def adv_fits(k: int) -> bool:
        return k * Fraction(1, 10) <= budget or drv_fits(k)

    expected_adv = max(k for k in range(1, 1000) if adv_fits(k))
    assert n_adv == expected_adv
    assert n_adv > n_basic

    def kov_fits(k: int, margin: float) -> bool:
        e35, d35 = ref_kov35([0.1] * k, [], slack)
        e33, d33 = ref_kov_optimal(0.1, 0.0, k, delta)
        lim, dlim = budget * (1 - margin), delta * (1 - margin)
        return adv_fits(k) or (e35 <= lim and d35 <= dlim) or (e33 <= lim and d33 <= dlim)

    assert kov_fits(n_kov, margin=REL)
    # the next charge is at best exactly on the budget: 100 * 0.1 (i = 197 of k = 394)
    assert not kov_fits(n_kov + 1, margin=REL) and kov_fits(n_kov + 1, margin=-REL)
    assert ref_kov_optimal(0.1, 0.0, n_kov + 1, delta) == pytest.approx(
        (budget, 6.8015e-6), rel=1e-4
    )
    assert (n_basic, n_adv, n_kov) == (100, 233, 393)
    assert n_kov >= n_adv


def test_kov_ledger_spends_no_more_than_advanced_on_the_same_charges() -> None:
    adv = Ledger(100.0, 1e-5, "advanced")
    kov = Ledger(100.0, 1e-5, "kov")
    for _ in range(150):
        adv.charge(0.1)
        kov.charge(0.1)
        assert kov.spent <= adv.spent
    assert adv.spent < 15.0  # DRV already beats basic composition here


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0, 0.0, -1.0, math.nan, -math.inf, "1", None, True])
def test_budget_epsilon_must_be_positive_number(epsilon: object) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        Ledger(epsilon)  # type: ignore[arg-type]


@pytest.mark.parametrize("delta", [-1e-9, 1.0, 1.5, math.nan, "0.1"])
def test_budget_delta_must_lie_in_unit_interval(delta: object) -> None:
    with pytest.raises(ValueError, match="delta"):
        Ledger(1.0, delta)  # type: ignore[arg-type]


def test_unknown_composition_suggests_a_near_miss() -> None:
    with pytest.raises(ValueError, match="did you mean 'advanced'"):
        Ledger(1.0, 1e-5, "advance")
    with pytest.raises(ValueError, match="did you mean 'advanced'"):
        Ledger(1.0, 1e-5, "advanced ")
    with pytest.raises(ValueError, match="composition") as info:
        Ledger(1.0, 1e-5, "renyi")
    assert "did you mean" not in str(info.value)
    assert COMPOSITIONS == ("basic", "advanced", "kov")


@pytest.mark.parametrize("composition", ["advanced", "kov"])
def test_advanced_compositions_need_a_delta_budget(composition: str) -> None:
    with pytest.raises(ValueError, match="slack") as info:
        Ledger(1.0, 0.0, composition)
    assert "delta" in str(info.value)


@pytest.mark.parametrize("slack", [0.0, -1e-6, 2e-5, math.nan])
def test_slack_must_lie_in_zero_to_delta(slack: float) -> None:
    with pytest.raises(ValueError, match="slack"):
        Ledger(1.0, 1e-5, "advanced", slack=slack)


def test_explicit_slack_is_used() -> None:
    ledger = Ledger(100.0, 1e-5, "advanced", slack=8e-6)
    assert ledger.slack == 8e-6
    for _ in range(200):
        ledger.charge(0.1)
    want, _ = ref_drv([0.1] * 200, [], 8e-6)
    assert ledger.spent == pytest.approx(want, rel=REL)
    assert ledger.spent_delta == pytest.approx(8e-6, rel=REL)


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [
        (0.0, 0.0),
        (-0.1, 0.0),
        (math.nan, 0.0),
        ("0.1", 0.0),
        (0.1, -1e-6),
        (0.1, 1.0),
        (0.1, math.nan),
    ],
)
def test_invalid_charge_is_a_value_error_not_budget_exceeded(
    epsilon: object, delta: object
) -> None:
    ledger = Ledger(1.0, 0.5)
    ledger.charge(0.2, 0.1)
    before = snapshot(ledger)
    with pytest.raises(ValueError) as info:
        ledger.charge(epsilon, delta)  # type: ignore[arg-type]
    assert not isinstance(info.value, BudgetExceeded)
    assert snapshot(ledger) == before


def test_budget_exceeded_is_a_value_error() -> None:
    assert issubclass(BudgetExceeded, ValueError)


def test_exact_answer_cannot_be_charged_to_a_finite_budget() -> None:
    ledger = Ledger(1e6)
    ledger.charge(1.0)
    before = snapshot(ledger)
    assert not ledger.can_afford(math.inf)
    with pytest.raises(BudgetExceeded, match="exact answer"):
        ledger.charge(math.inf)
    assert snapshot(ledger) == before


def test_unlimited_ledger_tracks_without_refusing() -> None:
    ledger = Ledger(math.inf)
    for _ in range(1000):
        ledger.charge(5.0)
    assert ledger.spent == 5000.0
    assert ledger.remaining == math.inf
    assert ledger.can_afford(1e300)
    ledger.charge(0.1)
    assert dec(ledger.spent) >= Fraction(50001, 10)
    ledger.charge(math.inf)
    assert ledger.spent == math.inf
    assert len(ledger.charges) == 1002
    ledger.charge(1.0)
    assert ledger.spent == math.inf


# -- ledger books ----------------------------------------------------------------------------


def test_organisation_scope_shares_one_budget() -> None:
    book = LedgerBook(1.0, scope="organization")
    book.charge(identity="alice", organization="acme", epsilon=1.0)
    assert book.key(identity="bob", organization="acme") == "acme"
    assert book.ledger(identity="bob", organization="acme") is book.ledger(
        identity="alice", organization="acme"
    )
    with pytest.raises(BudgetExceeded):
        book.charge(identity="bob", organization="acme", epsilon=0.1)
    book.charge(identity="carol", organization="initech", epsilon=1.0)  # another organisation
    keys = [k for k, _ in book.items()]
    assert keys == ["acme", "initech"]
    assert [len(ledger.charges) for _, ledger in book.items()] == [1, 1]


def test_identity_scope_keeps_budgets_independent() -> None:
    book = LedgerBook(1.0, scope="identity")
    book.charge(identity="alice", organization="acme", epsilon=1.0)
    book.charge(identity="bob", organization="acme", epsilon=1.0)
    with pytest.raises(BudgetExceeded):
        book.charge(identity="alice", organization="acme", epsilon=0.5)
    assert book.key(identity="bob", organization="acme") == "bob"


def test_ledger_book_items_are_sorted_and_ledgers_use_the_book_parameters() -> None:
    book = LedgerBook(10.0, 1e-5, "advanced", slack=1e-6)
    for name in ["zeta", "alpha", "mid"]:
        book.charge(identity=name, organization="org", epsilon=0.1)
    items = book.items()
    assert [k for k, _ in items] == ["alpha", "mid", "zeta"]
    for _, ledger in items:
        assert (ledger.epsilon, ledger.delta, ledger.composition) == (10.0, 1e-5, "advanced")
        assert ledger.slack == 1e-6


def test_ledger_book_validates_its_parameters() -> None:
    with pytest.raises(ValueError, match="did you mean 'organization'"):
        LedgerBook(1.0, scope="organisation")
    with pytest.raises(ValueError, match="epsilon"):
        LedgerBook(0.0)
    with pytest.raises(ValueError, match="slack"):
        LedgerBook(1.0, 0.0, "kov")


# -- documentation ---------------------------------------------------------------------------


def test_ledger_docstring_example_runs() -> None:
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out = io.StringIO()
    tests = doctest.DocTestFinder().find(accounting.Ledger, "Ledger", globs=vars(accounting).copy())
    for test in tests:
        runner.run(test, out=out.write)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 4
    assert result.failed == 0, out.getvalue()


# -- regressions found while reviewing the ledger ------------------------------------------------


def test_kov_spent_never_decreases() -> None:
    """The exact KOV bound can be tighter for k + 1 charges than for k; spent stays monotone."""
    ledger = Ledger(1.0, 1e-6, "kov")
    last = 0.0
    while ledger.can_afford(0.05):
        ledger.charge(0.05)
        assert ledger.spent >= last
        last = ledger.spent
    assert ledger.spent <= 1.0


def test_slack_equal_to_delta_budget_is_usable() -> None:
    ledger = Ledger(10.0, 1e-5, "advanced", slack=1e-5)
    admitted = _charge_until_refused(ledger, 0.1)
    assert admitted > 100  # advanced composition, not basic
    assert ledger.spent_delta <= 1e-5
    assert kov_optimal_homogeneous(0.3, 0.0, 1, delta_budget=0.0)[1] == 0.0


def test_huge_charges_are_refused_not_overflowing() -> None:
    ledger = Ledger(1e308)
    ledger.charge(1e308)
    with pytest.raises(BudgetExceeded):
        ledger.charge(1e308)
    unlimited = Ledger(math.inf)
    unlimited.charge(1.5e308)
    unlimited.charge(1.5e308)
    assert unlimited.spent == math.inf
    assert Ledger(1e300, 1e-6, "advanced").can_afford(1e299)


def test_exact_answers_on_an_unlimited_ledger_keep_delta_accounting() -> None:
    ledger = Ledger(math.inf, 0.5)
    ledger.charge(1.0, 0.1)
    ledger.charge(math.inf, 0.2)
    assert ledger.spent == math.inf
    assert ledger.spent_delta == pytest.approx(0.3)
    capped = Ledger(math.inf, 0.3)
    capped.charge(math.inf, 0.25)
    with pytest.raises(BudgetExceeded):
        capped.charge(1.0, 0.25)


def test_spent_reads_as_the_decimal_budget_when_filled_exactly() -> None:
    ledger = Ledger(0.3)
    for _ in range(3):
        ledger.charge(0.1)
    assert ledger.spent == ledger.epsilon == 0.3
    assert ledger.remaining == 0.0


def test_basic_ledger_takes_no_slack() -> None:
    with pytest.raises(ValueError, match="slack"):
        Ledger(1.0, slack=5.0)


@pytest.mark.parametrize(
    ("eps", "k", "budget"), [(0.1, 50, 1e-5), (0.5, 20, 1e-6), (1.0, 10, 1e-3), (0.05, 400, 1e-6)]
)
def test_kov_optimal_agrees_with_the_privacy_loss_distribution_library(
    eps: float, k: int, budget: float
) -> None:
    """dp-accounting's PLD of the worst-case pair for eps-DP, composed k times, is the exact
    privacy curve (up to its pessimistic discretisation): KOV's pair must lie on or above it, and
    KOV's epsilon must be the smallest of its grid (k - 2i) eps that the curve allows."""
    from dp_accounting.pld import common, privacy_loss_distribution

    params = common.DifferentialPrivacyParameters(eps, 0.0)
    pld = privacy_loss_distribution.from_privacy_parameters(
        params, value_discretization_interval=1e-5
    ).self_compose(k)
    kov_eps, kov_delta = kov_optimal_homogeneous(eps, 0.0, k, delta_budget=budget)
    assert kov_delta <= budget
    # the library's delta at KOV's epsilon is KOV's delta (the theorem is exact)
    assert pld.get_delta_for_epsilon(kov_eps) == pytest.approx(kov_delta, rel=1e-3, abs=1e-12)
    # one grid step lower would need more delta than the budget allows
    if kov_eps - 2 * eps > 0:
        assert pld.get_delta_for_epsilon(kov_eps - 2 * eps) > budget
    # the continuous optimum is at most KOV's grid point
    assert pld.get_epsilon_for_delta(budget) <= kov_eps + 1e-6


def test_kov_optimal_survives_a_huge_epsilon() -> None:
    """At eps = 500 the i = 1 delta rounds to 1 in floating point: that i simply does not fit."""
    eps, dlt = kov_optimal_homogeneous(500.0, 0.0, 2, delta_budget=1e-6)
    assert (eps, dlt) == pytest.approx((1000.0, 0.0))
