"""Privacy budgets: a ledger per identity or organisation that every release is charged to.

A budget stage holds a total (epsilon, delta) and a composition rule (basic: sums; advanced and
KOV: the tighter bounds of :mod:`biasleak.mechanisms.accounting`). Before anything is released,
every budget stage's ledger must afford the release's cost (``epsilon`` per model or per query,
from the noise stage; exact answers cost ``epsilon = inf``); the charge is made only after the
release succeeded, so a refused query is charged nothing. Models served from the cache cost
nothing. Identities of one organisation share an ``organization`` budget, which is what stops
Sybil identities from multiplying their budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Final, Literal

from pydantic import Field, model_validator

from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig

__all__ = ["Budget"]

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
                return Refused(
                    "budget_exhausted",
                    f"{what} for {q.m_new} model(s) exceeds the {budget.scope} budget: spent "
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
