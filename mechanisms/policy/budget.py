"""Privacy budgets: a ledger per identity or organisation that every release is charged to.

A budget stage holds a total (epsilon, delta) and a composition rule (basic: sums; advanced and
KOV: the tighter bounds of :mod:`biasleak.mechanisms.accounting`). Before anything is released,
every budget stage's ledger must afford the release's cost (``epsilon`` per model or per query,
from the noise stage; exact answers cost ``epsilon = inf``); the charge is made only after the
release succeeded, so a refused query is charged nothing. Models served from the cache cost
nothing. Identities of one organisation share an ``organization`` budget, which is what stops
Sybil identities from multiplying their budget. A service request is charged the service's own
cost to the same ledgers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from pydantic import Field, model_validator

from biasleak.mechanisms.accounting import BudgetExceeded, LedgerBook
from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig
from biasleak.mechanisms.policy._state import PolicyState

if TYPE_CHECKING:
    from biasleak.mechanisms.policy.decide import Policy

__all__ = ["Budget", "carry_ledgers"]

NEEDS_SLACK: Final = (
    "composition {composition!r} needs delta > 0 for its slack; use 'basic' for a pure epsilon "
    "budget"
)


class Budget(StageConfig):
    """A privacy budget per identity or organisation."""

    ORDER: ClassVar[int] = 70
    REPEATABLE: ClassVar[bool] = True
    REFUSALS: ClassVar[dict[str, str]] = {
        "budget_exhausted": "a privacy budget cannot afford the release"
    }

    kind: Literal["budget"] = "budget"
    epsilon: float = Field(gt=0.0, description="total epsilon (.inf: track without limit)")
    delta: float = Field(0.0, ge=0.0, lt=1.0)
    scope: Literal["identity", "organization"] = "identity"
    composition: Literal["basic", "advanced", "kov"] = "basic"

    @model_validator(mode="after")
    def _slack(self) -> Budget:
        if self.composition != "basic" and self.delta == 0.0:
            raise ValueError(NEEDS_SLACK.format(composition=self.composition))
        return self

    @classmethod
    def check(cls, stages: Sequence[Budget], q: Pending) -> Refused | None:
        eps, delta = q.cost
        ledgers = []
        for index, budget in enumerate(stages):
            book = q.state.ledger_book(index, budget)
            ledger = book.ledger(identity=q.request.identity, organization=q.request.organization)
            if q.m_new and not ledger.can_afford(eps, delta):
                if math.isinf(eps):
                    what = "exact answers (epsilon = inf)"
                else:
                    what = f"epsilon {eps:g}" + (f", delta {delta:g}" if delta else "")
                asked = (
                    f"{q.m_new} model(s)" if q.kind == "query" else f"one {q.request.metric} run"
                )
                return Refused(
                    "budget_exhausted",
                    f"{what} for {asked} exceeds the {budget.scope} budget: spent "
                    f"{ledger.spent:g} of {budget.epsilon:g}",
                )
            ledgers.append(ledger)
        q.scratch["budget"] = ledgers
        return None

    @classmethod
    def commit(cls, stages: Sequence[Budget], q: Pending) -> None:
        if not q.m_new:
            return
        eps, delta = q.cost
        for ledger in q.scratch["budget"]:
            ledger.charge(eps, delta)


def carry_ledgers(old: Policy, new: Policy, state: PolicyState) -> None:
    """Move what every ledger spent under the old budgets onto the new budgets.

    The ledgers are kept per budget stage, by position. A stage with the same scope, delta
    and composition keeps its charges (replayed in order onto a ledger of the new total); a
    charge that no longer fits fills the ledger, so that nothing more is released. A new stage
    starts empty.
    """
    old_budgets: list[Budget] = old.of_kind("budget")
    carried = {}
    for index, budget in enumerate(new.of_kind("budget")):
        book = LedgerBook(budget.epsilon, budget.delta, budget.composition, scope=budget.scope)
        previous = state.ledgers.get(index)
        same = index < len(old_budgets) and (
            (old_budgets[index].scope, old_budgets[index].delta, old_budgets[index].composition)
            == (budget.scope, budget.delta, budget.composition)
        )
        if previous is not None and same:
            for key, ledger in previous.items():
                target = book.ledger(identity=key, organization=key)
                for charge in ledger.charges:
                    if target.can_afford(charge.epsilon, charge.delta):
                        target.charge(charge.epsilon, charge.delta)
                    else:
                        _fill(target)
                        break
        carried[index] = book
    state.ledgers.clear()
    state.ledgers.update(carried)


def _fill(ledger: Any) -> None:
    """Spend what a ledger has left, so that it refuses every further release."""
    remaining = ledger.remaining
    if remaining > 0 and math.isfinite(remaining):
        try:
            ledger.charge(remaining, 0.0)
        except BudgetExceeded:  # rounding at the very edge: already as full as it gets
            pass
