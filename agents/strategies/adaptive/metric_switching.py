"""The metric-switching attack: when one metric is refused, ask through another.

A compliance team may answer only some fairness metrics - for instance refuse statistical parity
because it is known to leak. Every metric that is linear in the predictions leaks the same way
(Remark 5 of the paper), and an adversary can switch. This strategy runs one attack per metric, in
the order ``metrics`` gives (by default ``sp``, ``eo``, ``eodds``, ``abs_sp``):

* ``sp``: compressed sensing through statistical parity (reaches everyone);
* ``eo``: compressed sensing through the equal-opportunity gap (reaches the people with y = 1);
* ``eodds``: compressed sensing through both equalized-odds gaps (reaches everyone);
* ``abs_sp``: the partition attack through the absolute statistical parity (Theorem 7).

It moves on to the next metric whenever the current one is refused with ``metric_not_allowed``
before any of its queries was answered: a metric that was answered once is not abandoned, and
its later refusals go to the attack that asked. The attacks are built fresh for each metric with
the shared compressed-sensing settings (the partition attack takes only ``batch`` and
``prepare_hours``), each drawing its models from the developer's stream when it starts.

The estimate is whatever the current attack last published. The report names the metrics tried,
the one used, and the inner attack's own report.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.agents.messages import Refusal
from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Stop,
    Strategy,
    StrategyConfig,
    forward_answer,
)
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
    EoRevealConfig,
    EqualizedOddsRevealConfig,
    SensingConfig,
)
from biasleak.agents.strategies.partition import AbsSpPartition, AbsSpPartitionConfig

__all__ = ["MetricSwitching", "MetricSwitchingConfig"]


class MetricSwitchingConfig(SensingConfig):
    """Configuration of :class:`MetricSwitching`."""

    kind: Literal["metric_switching"] = "metric_switching"
    metrics: list[Literal["sp", "eo", "eodds", "abs_sp"]] = Field(
        default_factory=lambda: ["sp", "eo", "eodds", "abs_sp"], min_length=1
    )


class MetricSwitching(Strategy):
    """Runs the attack through one metric after another until one is answered."""

    ATTACKS: ClassVar[bool] = True

    kind = "metric_switching"

    def __init__(self, config: MetricSwitchingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: MetricSwitchingConfig = config
        self.tried: list[str] = []
        """The metrics started so far, in order; the last one is the current one."""
        self._index = -1
        self._answered_any = False
        """Whether the current metric has had any query answered."""
        self.current: Strategy | None = None
        """The attack through the current metric (None once every metric was refused)."""
        self._infos_seen = 0
        self._advance()

    def _advance(self) -> bool:
        """Start the attack through the next metric; False when there is none left."""
        self._index += 1
        if self._index >= len(self.config.metrics):
            self.current = None
            return False
        metric = self.config.metrics[self._index]
        self.tried.append(metric)
        shared = self.config.model_dump(exclude={"kind", "metrics"})
        config: StrategyConfig
        if metric == "sp":
            config = CompressedSensingConfig(**shared)
            self.current = CompressedSensing(config, self.context)
        elif metric == "eo":
            config = EoRevealConfig(**shared)
            self.current = CompressedSensing(config, self.context)
        elif metric == "eodds":
            config = EqualizedOddsRevealConfig(**shared)
            self.current = CompressedSensing(config, self.context)
        else:
            config = AbsSpPartitionConfig(
                batch=shared["batch"], prepare_hours=shared["prepare_hours"]
            )
            self.current = AbsSpPartition(config, self.context)
        self._answered_any = False
        return True

    def _sync(self) -> None:
        """Publish the current attack's estimate when it has a new one."""
        if (
            self.current is not None
            and self.current.estimate is not None
            and (self.current.estimate is not self.estimate)
        ):
            self._set_estimate(self.current.estimate)

    def next_action(self, now: float) -> Action:
        if self.current is None:
            return Stop(f"no metric answered (tried {self.tried})")
        action = self.current.next_action(now)
        self._sync()
        if isinstance(action, Stop):
            return Stop(f"{action.reason} (metric {self.tried[-1]})")
        return action

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        assert self.current is not None
        self._answered_any = True
        self._infos_seen = forward_answer(self, self.current, values, now, self._infos_seen)
        self._sync()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        assert self.current is not None
        if refusal.reason == "metric_not_allowed" and not self._answered_any:
            self._advance()
            return
        self.current.on_refusal(refusal, now)

    def report(self) -> dict[str, Any]:
        inner = self.current.report() if self.current is not None else {}
        return {"tried": self.tried, "used": self.tried[-1] if self.current else None, **inner}
