"""A Sybil adversary: one attack spread over several developer identities of one organisation.

The scenario names one developer with ``strategy: {kind: sybil, identities: k, ...}``; the
simulation creates k identities ``<id>.1`` ... ``<id>.k`` in that developer's organisation, each
driven by a :class:`SybilShard` of one shared :class:`SybilCoordinator`. The coordinator runs a
single compressed-sensing attack: the first shard sends the group-size probe, then every shard
takes the next unsent batch, and all answers are pooled into one estimate, which every identity
reports. Budgets and rate limits kept per identity give the adversary k times as many answers;
kept per organisation, they hold.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.agents.messages import Refusal
from biasleak.agents.strategies.base import (
    Action,
    AnswerInfo,
    DeveloperContext,
    Stop,
    Strategy,
    Submit,
    Wait,
)
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
    SensingConfig,
)

__all__ = ["SybilConfig", "SybilCoordinator", "SybilShard", "sybil_shards"]


class SybilConfig(SensingConfig):
    """Configuration of the Sybil adversary."""

    kind: Literal["sybil"] = "sybil"
    identities: int = Field(4, ge=2, description="how many identities the adversary uses")


class SybilCoordinator:
    """The adversary behind the identities: one compressed-sensing attack, many senders."""

    def __init__(self, config: SybilConfig, context: DeveloperContext) -> None:
        shared = config.model_dump(exclude={"kind", "identities"})
        self.core = CompressedSensing(CompressedSensingConfig(**shared), context)
        self.core.decode_every = 0
        self.assigned: dict[int, int] = {}
        """Batch index -> shard that sent it."""
        self.resolved: set[int] = set()
        self.probe_owner: int | None = None

    def next_for(self, shard: int, now: float) -> tuple[Action, int | None]:
        """The next action of a shard, and the batch it sends (None for the probe)."""
        core = self.core
        if core.group_sizes is None:
            if self.probe_owner is None:
                self.probe_owner = shard
                return core.next_action(now), None  # the probe
            return Wait(now + 1.0), None  # let the probe come back first
        for i in range(len(core.batches)):
            if i not in self.assigned:
                self.assigned[i] = shard
                start, stop = core.batches[i]
                label = f"batch {i + 1}/{len(core.batches)}"
                return Submit(
                    core.models[start:stop], core.metric, core.config.prepare_hours, label
                ), i
        if len(self.resolved) < len(core.batches):
            return Wait(now + 1.0), None  # other identities are still waiting for answers
        if core.estimate is None and core.answers:
            core._decode()
        return Stop("all batches resolved"), None

    def answered(
        self,
        batch: int | None,
        values: NDArray[np.float64],
        now: float,
        info: AnswerInfo | None = None,
    ) -> None:
        """A shard's query was answered (``info``: the answer's public facts, when given)."""
        core = self.core
        if batch is None:  # the probe
            core.expect_probe()
            if info is not None:
                core.receive_answer(values, info, now)
            else:
                core.on_answer(values, now)
            return
        core.answers[batch] = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        core.batch_infos[batch] = info
        self.resolved.add(batch)

    def refused(self, batch: int | None, refusal: Refusal, now: float) -> None:
        """A shard's query was refused."""
        if batch is None:
            self.core.expect_probe()
            self.core.on_refusal(refusal, now)
        else:
            self.resolved.add(batch)


class SybilShard(Strategy):
    """One identity of a Sybil adversary."""

    ATTACKS: ClassVar[bool] = True

    kind = "sybil"

    def __init__(
        self, coordinator: SybilCoordinator, shard: int, context: DeveloperContext
    ) -> None:
        super().__init__(coordinator.core.config, context)
        self.coordinator = coordinator
        self.shard = shard
        self._batch: int | None = None
        self._probe = False
        self._infos_seen = 0

    def next_action(self, now: float) -> Action:
        action, batch = self.coordinator.next_for(self.shard, now)
        if isinstance(action, Submit):
            self._probe = batch is None
            self._batch = batch
        self._sync()
        return action

    def _sync(self) -> None:
        estimate = self.coordinator.core.estimate
        if estimate is not None and estimate is not self.estimate:
            self._set_estimate(estimate)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        info = None
        if len(self.answer_infos) > self._infos_seen:  # facts from the developer process
            self._infos_seen = len(self.answer_infos)
            info = self.answer_infos[-1]
        self.coordinator.answered(None if self._probe else self._batch, values, now, info)
        self._sync()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self.coordinator.refused(None if self._probe else self._batch, refusal, now)

    def report(self) -> dict[str, Any]:
        sent = sorted(i for i, s in self.coordinator.assigned.items() if s == self.shard)
        return {"shard": self.shard, "batches_sent": len(sent), **self.coordinator.core.report()}


def sybil_shards(
    config: SybilConfig, context: DeveloperContext, identity: str
) -> list[tuple[str, Strategy]]:
    """The identities and strategies of one Sybil adversary (all sharing ``context``)."""
    coordinator = SybilCoordinator(config, context)
    return [
        (f"{identity}.{k + 1}", SybilShard(coordinator, k, context))
        for k in range(config.identities)
    ]
