"""Privacy budgets: a ledger per identity or organisation that every release is charged to.

A budget stage holds a total (epsilon, delta) and a composition rule (basic: sums; advanced and
KOV: the tighter bounds of :mod:`biasleak.mechanisms.accounting`). Before anything is released,
every budget stage's ledger must afford the release's cost (``epsilon`` per model or per query,
from the noise stage; exact answers cost ``epsilon = inf``); the charge is made only after the
release succeeded, so a refused query is charged nothing. Models served from the cache cost
nothing. Identities of one organisation share an ``organization`` budget, which is what stops
Sybil identities from multiplying their budget. A service request is charged the service's own
cost to the same ledgers. A publication reaches every reader: it is charged to every ledger,
those open and those opened later (:meth:`~biasleak.mechanisms.accounting.LedgerBook.publish`),
and refused when any of them cannot afford it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from pydantic import Field, model_validator

from biasleak.mechanisms.accounting import LedgerBook, replay
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
        charged = []
        for index, budget in enumerate(stages):
            book = q.state.ledger_book(index, budget)
            if q.kind == "publication":
                readers = book.readers()
            else:
                who = {"identity": q.request.identity, "organization": q.request.organization}
                readers = [(book.key(**who), book.ledger(**who))]
            for key, ledger in readers:
                if q.m_new and not ledger.can_afford(eps, delta):
                    return Refused("budget_exhausted", _exceeds(budget, q, key, ledger))
            charged.append((book, readers[0][1]))
        q.scratch["budget"] = charged
        return None

    @classmethod
    def commit(cls, stages: Sequence[Budget], q: Pending) -> None:
        if not q.m_new:
            return
        eps, delta = q.cost
        for book, ledger in q.scratch["budget"]:
            if q.kind == "publication":
                book.publish(eps, delta)
            else:
                ledger.charge(eps, delta)


def _exceeds(budget: Budget, q: Pending, key: str | None, ledger: Any) -> str:
    """What a refusal for an unaffordable release says."""
    eps, delta = q.cost
    if math.isinf(eps):
        what = "exact answers (epsilon = inf)"
    else:
        what = f"epsilon {eps:g}" + (f", delta {delta:g}" if delta else "")
    spent = f"spent {ledger.spent:g} of {budget.epsilon:g}"
    if q.kind == "query":
        return f"{what} for {q.m_new} model(s) exceeds the {budget.scope} budget: {spent}"
    if q.kind == "service":
        return f"{what} for one {q.request.metric} run exceeds the {budget.scope} budget: {spent}"
    reader = f"{budget.scope} {key!r}" if key is not None else f"a new {budget.scope}"
    return (
        f"{what} for one publication ({q.request.metric}) exceeds the budget of {reader}, "
        f"which it reaches like every reader: {spent}"
    )


def carry_ledgers(old: Policy, new: Policy, state: PolicyState) -> None:
    """Move what every ledger spent under the old budgets onto the new budgets.

    The ledgers are kept per budget stage, by position. A stage with the same scope, delta
    and composition keeps its charges (replayed in order onto a ledger of the new total,
    :func:`~biasleak.mechanisms.accounting.replay`: a charge that no longer fits fills the
    ledger, so that nothing more is released) and its publications (every ledger opened later
    starts with them). A new stage starts empty.
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
                replay(book.ledger(identity=key, organization=key), ledger.charges)
            book.carry_public(previous.public)
        carried[index] = book
    state.ledgers.clear()
    state.ledgers.update(carried)
