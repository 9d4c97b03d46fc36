"""The budget-aware attack: plan the queries from a known per-model epsilon and budget.

A compliance team with a cumulative privacy budget answers a fixed number of models before it
refuses everything (``budget_exhausted``). When the per-model epsilon and the budget are public -
as they often are, since a developer must be told what its queries cost - the adversary knows
that number, ``affordable = floor(budget / epsilon_per_model)``, before it asks anything, and can
choose how to spend it:

``spread``
    One compressed-sensing run over the whole budget: the probe and ``affordable - 1`` perturbed
    models. Everyone is guessed, each from noisy answers.
``targeted``
    Everything on one person, ``target``: ``affordable // 2`` differencing pairs (the base model,
    and the base model with the target's output flipped; Example 2 of the paper), each pair
    nudged by a fresh jitter (:mod:`._jitter`) so that no cache replays it. The difference of a
    pair, divided by the flip's size, is ``1/N1`` or ``-1/N0`` plus noise; the median of the
    differences gives the target's group, with a confidence in standard errors.
``auto``
    Spread when the budget buys at least ``4 k ln(n/k)`` perturbed models, the number compressed
    sensing needs to recover a k-sparse vector (k: the minority size assumed from
    ``prior_minority``); target otherwise. A budget that cannot reveal everyone is better spent
    revealing one person for sure.

The report gives the plan (``affordable_models``, ``needed_for_recovery``, ``mode``) and how many
pairs were answered, with the inner compressed-sensing report in ``spread`` mode.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.agents.messages import Refusal
from biasleak.agents.strategies.adaptive._jitter import JITTER
from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Estimate,
    Stop,
    Strategy,
    Submit,
    forward_answer,
)
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
    SensingConfig,
)
from biasleak.agents.strategies.targeted import flipped

__all__ = ["BudgetAware", "BudgetAwareConfig"]


class BudgetAwareConfig(SensingConfig):
    """Configuration of :class:`BudgetAware`."""

    kind: Literal["budget_aware"] = "budget_aware"
    epsilon_per_model: float = Field(
        gt=0.0, allow_inf_nan=False, description="the epsilon each answered model costs"
    )
    budget: float = Field(gt=0.0, allow_inf_nan=False, description="the total epsilon allowed")
    mode: Literal["auto", "spread", "targeted"] = "auto"
    target: int = Field(0, ge=0, description="who the targeted mode reveals")


class BudgetAware(Strategy):
    """Plans its queries from a known per-model epsilon and budget."""

    ATTACKS: ClassVar[bool] = True

    kind = "budget_aware"

    def __init__(self, config: BudgetAwareConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: BudgetAwareConfig = config
        n = context.n
        if config.target >= n:
            raise ValueError(f"target must be an audit-set index below {n}; got {config.target}")
        affordable = math.floor(config.budget / config.epsilon_per_model + 1e-9)
        k = max(round(config.prior_minority * n), 1)
        needed = math.ceil(4 * k * math.log(n / k))
        mode = config.mode
        if mode == "auto":
            mode = "spread" if affordable - 1 >= needed else "targeted"
        self.mode = mode
        """The plan chosen: ``spread`` or ``targeted``."""
        self.plan = {"affordable_models": affordable, "needed_for_recovery": needed, "mode": mode}
        """The numbers the plan was made from (for the report)."""
        self.inner: CompressedSensing | None = None
        """The compressed-sensing run of the ``spread`` mode (None in ``targeted`` mode)."""
        if mode == "spread":
            shared = config.model_dump(
                exclude={"kind", "epsilon_per_model", "budget", "mode", "target", "queries"}
            )
            self.inner = CompressedSensing(
                CompressedSensingConfig(queries=max(affordable - 1, 1), **shared), context
            )
        h0 = context.base_predictions
        self.copy, self.change = flipped(h0, config.target)
        self.pairs = max(affordable // 2, 0)
        """How many differencing pairs the budget buys."""
        self.differences: list[float] = []
        """Each answered pair's difference, divided by the flip's size."""
        self._asked = 0
        self._infos_seen = 0
        self._jitter = np.random.default_rng(context.rng.integers(2**63))

    def _sync_inner(self) -> None:
        """Publish the inner run's estimate when it has a new one."""
        inner = self.inner
        if inner is not None and inner.estimate is not None and inner.estimate is not self.estimate:
            self._set_estimate(inner.estimate)

    def next_action(self, now: float) -> Action:
        if self.inner is not None:
            action = self.inner.next_action(now)
            self._sync_inner()
            return action
        if self._asked >= self.pairs:
            return Stop(f"budget spent on person {self.config.target}")
        h0 = self.context.base_predictions
        nudge = self._jitter.uniform(-JITTER, JITTER, h0.size)  # a new pair each time
        pair = np.clip(np.stack([h0 + nudge, self.copy + nudge]), 0.0, 1.0)
        self._asked += 1
        return Submit(pair, "sp", self.config.prepare_hours, f"pair {self._asked}/{self.pairs}")

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self.inner is not None:
            self._infos_seen = forward_answer(self, self.inner, values, now, self._infos_seen)
            self._sync_inner()
            return
        base, copy = np.asarray(values, dtype=np.float64).reshape(-1)
        self.differences.append((copy - base) / self.change)
        n = self.context.n
        v = float(np.median(self.differences))
        attribute = np.ones(n, dtype=np.int8)
        confidence = np.zeros(n)
        attribute[self.config.target] = 1 if v > 0 else 0
        # confidence: |median| against its spread, in standard errors
        spread = float(np.std(self.differences)) / math.sqrt(len(self.differences))
        confidence[self.config.target] = abs(v) / spread if spread > 0 else abs(v) * n
        self._set_estimate(Estimate(attribute, confidence, 2 * len(self.differences), "median"))

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if self.inner is not None:
            self.inner.on_refusal(refusal, now)
        elif refusal.reason == "budget_exhausted":
            self._asked = self.pairs

    def report(self) -> dict[str, Any]:
        inner = self.inner.report() if self.inner is not None else {}
        return {"plan": self.plan, "pairs_answered": len(self.differences), **inner}
