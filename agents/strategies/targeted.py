"""Targeted attacks: one person's attribute from one query, or from a realistic pair of models.

``single_query`` (Example 1 of the paper): a model that accepts only person j. Its statistical
parity gap is ``1/N1`` if j is advantaged and ``-1/N0`` otherwise: the sign reveals ``a_j`` and
the value a group size. One query per target.

``differencing`` (Example 2): a realistic base model h and a copy h' that differs only in person
j's output (``1 - h_j``; for ``h_j = 1/2``, where that would change nothing, 1 or 0). Then
``SP(h') - SP(h) = (h'_j - h_j) v_j`` with ``v_j = 1/N1`` or ``-1/N0``, so the sign of the
difference divided by ``h'_j - h_j`` reveals ``a_j``. The two models' accuracies differ by at most
``1/n`` (one person's prediction), which ``report`` states. The base model is asked once, then one
flipped copy per target (or everything in one batch with ``batch: true``).

Both guess the people they do not target to be in the larger group learned from the answers,
with zero confidence. Confidence of a targeted guess is its margin from zero in units of ``1/n``,
the smallest possible ``|v_j|``.
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
    Estimate,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
)

__all__ = ["Differencing", "DifferencingConfig", "SingleQuery", "SingleQueryConfig"]


class _TargetedConfig(StrategyConfig):
    targets: list[int] = Field(
        default_factory=lambda: [0],
        min_length=1,
        description="indices of the audit-set people to reveal",
    )
    prepare_hours: float = Field(0.5, ge=0.0, allow_inf_nan=False)


class SingleQueryConfig(_TargetedConfig):
    """Configuration of :class:`SingleQuery`."""

    kind: Literal["single_query"] = "single_query"


class DifferencingConfig(_TargetedConfig):
    """Configuration of :class:`Differencing`."""

    kind: Literal["differencing"] = "differencing"
    batch: bool = Field(False, strict=False, description="send the base and all copies at once")


class _Targeted(Strategy):
    def __init__(self, config: _TargetedConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        n = context.n
        bad = [t for t in config.targets if not 0 <= t < n]
        if bad:
            raise ValueError(f"targets must be audit-set indices in [0, {n - 1}]; received {bad}")
        self.targets = list(dict.fromkeys(config.targets))  # unique, in order
        self.values: dict[int, float] = {}
        """Target -> recovered v_j (1/N1 or -1/N0 when exact)."""

    ATTACKS: ClassVar[bool] = True

    def _publish(self) -> None:
        n = self.context.n
        v = np.array(list(self.values.values()))
        majority = 1
        if v.size:  # a positive v_j is 1/N1: N1 > n/2 when it is below 2/n
            pos, neg = v[v > 0], v[v < 0]
            n1 = 1.0 / float(np.median(pos)) if pos.size else None
            n0 = 1.0 / float(-np.median(neg)) if neg.size else None
            if n1 is not None:
                majority = 1 if n1 >= n / 2 else 0
            elif n0 is not None:
                majority = 0 if n0 > n / 2 else 1
        attribute = np.full(n, majority, dtype=np.int8)
        confidence = np.zeros(n)
        for j, value in self.values.items():
            attribute[j] = 1 if value > 0 else 0
            confidence[j] = abs(value) * n
        self._set_estimate(Estimate(attribute, confidence, len(self.values), self.kind))


class SingleQuery(_Targeted):
    """Example 1: a model accepting only the target."""

    kind = "single_query"

    def __init__(self, config: SingleQueryConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self._next = 0

    def next_action(self, now: float) -> Action:
        if self._next >= len(self.targets):
            return Stop("every target queried")
        model = np.zeros((1, self.context.n))
        model[0, self.targets[self._next]] = 1.0
        return Submit(
            model,
            "sp",
            self.config.prepare_hours,  # type: ignore[attr-defined]
            f"target {self.targets[self._next]}",
        )

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        self.values[self.targets[self._next]] = float(np.asarray(values).reshape(-1)[0])
        self._next += 1
        self._publish()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self._next += 1


def flipped(h0: NDArray[np.float64], j: int) -> tuple[NDArray[np.float64], float]:
    """A copy of h0 with person j's output changed, and the change ``h'_j - h_j`` (never 0)."""
    h = h0.copy()
    new = 1.0 - h0[j]
    if abs(new - h0[j]) < 1e-9:  # h0_j = 1/2: flipping changes nothing, move to an end
        new = 1.0
    h[j] = new
    return h, float(new - h0[j])


class Differencing(_Targeted):
    """Example 2: the base model and a copy differing in the target only."""

    kind = "differencing"

    def __init__(self, config: DifferencingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: DifferencingConfig = config
        h0 = context.base_predictions
        pairs = [flipped(h0, j) for j in self.targets]
        self.copies = np.stack([p[0] for p in pairs])
        self.changes = np.array([p[1] for p in pairs])
        self.base_answer: float | None = None
        self._next = -1  # -1: the base model, then the copies

    def next_action(self, now: float) -> Action:
        h0 = self.context.base_predictions
        cfg = self.config
        if self.config.batch and self._next == -1:
            return Submit(np.vstack([h0[None, :], self.copies]), "sp", cfg.prepare_hours, "pairs")
        if self._next == -1:
            return Submit(h0[None, :], "sp", cfg.prepare_hours, "base model")
        if self._next < len(self.targets):
            return Submit(
                self.copies[self._next : self._next + 1],
                "sp",
                cfg.prepare_hours,
                f"flip {self.targets[self._next]}",
            )
        return Stop("every target queried")

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if self.config.batch and self._next == -1:
            self.base_answer = float(vals[0])
            for k, j in enumerate(self.targets):
                self.values[j] = (float(vals[k + 1]) - self.base_answer) / self.changes[k]
            self._next = len(self.targets)
        elif self._next == -1:
            self.base_answer = float(vals[0])
            self._next = 0
        else:
            assert self.base_answer is not None
            k = self._next
            self.values[self.targets[k]] = (float(vals[0]) - self.base_answer) / self.changes[k]
            self._next += 1
        if self.values:
            self._publish()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if self._next == -1:
            self._next = len(self.targets)  # without the base answer no difference is possible
        else:
            self._next += 1

    def report(self) -> dict[str, Any]:
        labels = self.context.public.audit.labels == 1
        base_acc = float(np.mean((self.context.base_predictions >= 0.5) == labels))
        copy_acc = np.mean((self.copies >= 0.5) == labels[None, :], axis=1)
        return {
            "targets": self.targets,
            "base_accuracy": base_acc,
            "max_accuracy_difference": float(np.max(np.abs(copy_acc - base_acc))),
            "bound_1_over_n": 1.0 / self.context.n,
        }
