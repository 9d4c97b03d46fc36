"""The compressed-sensing attack: Algorithm 2 of the paper, with the group-size probe of Remark 4.

1. **Probe** (Remark 4): one query of a model that accepts only person 0. Its SP is ``1/N1`` if
   that person is advantaged and ``-1/N0`` otherwise, which gives both group sizes. If the probe
   is refused (e.g. by a minimum-support rule), the strategy assumes a disadvantaged share of
   ``prior_minority`` instead.
2. **Sense**: ``queries`` models ``h_i = clip(h_0 + U(-b, b), 0, 1)`` around the base model,
   sent in batches of ``batch`` models; each model stays close to h_0, so its accuracy is close
   to the base model's (the paper saw 86.23% mean, std 0.26 on Adult for b = 0.1).
3. **Decode** with basis pursuit (:mod:`biasleak.agents.strategies.decoders`) after every
   ``decode_every`` answered batches (0: only once all batches are resolved), thresholding at
   half of ``1/N1 + 1/N0``.

Refused batches are dropped. The strategy stops after its last batch is resolved.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Estimate,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
)
from biasleak.agents.strategies.decoders import decode_statistical_parity

__all__ = ["CompressedSensing", "CompressedSensingConfig"]


class CompressedSensingConfig(StrategyConfig):
    """Configuration of :class:`CompressedSensing`."""

    kind: Literal["compressed_sensing"] = "compressed_sensing"
    queries: int = Field(400, ge=1, description="number of perturbed models m")
    perturbation: float = Field(0.1, gt=0.0, le=1.0, description="noise half-width b")
    batch: int = Field(50, ge=1, description="models per query message")
    box: bool = Field(
        False, strict=False, description="add the box constraint 0 <= s <= 1/N1 + 1/N0"
    )
    probe: bool = Field(True, strict=False, description="learn N1, N0 from a one-person query")
    prior_minority: float = Field(
        0.1, gt=0.0, lt=1.0, description="share of a = 0 assumed when the probe fails"
    )
    decode_every: int = Field(
        0, ge=0, description="decode after every k answered batches (0: once, at the end)"
    )
    prepare_hours: float = Field(
        0.5, ge=0.0, allow_inf_nan=False, description="time to build one batch"
    )


class CompressedSensing(Strategy):
    """Attribute-Reveal by compressed sensing (Theorem 5, Algorithm 2, Remark 4)."""

    kind = "compressed_sensing"

    def __init__(self, config: CompressedSensingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: CompressedSensingConfig = config
        n = context.n
        h0 = context.base_predictions
        noise = context.rng.uniform(-config.perturbation, config.perturbation, (config.queries, n))
        self.models: NDArray[np.float64] = np.clip(h0[None, :] + noise, 0.0, 1.0)
        """All m perturbed models, drawn up front from the developer's stream."""
        self.batches = [
            (start, min(start + config.batch, config.queries))
            for start in range(0, config.queries, config.batch)
        ]
        self.answers: dict[int, NDArray[np.float64]] = {}
        """Batch index -> answered SP values."""
        self.group_sizes: tuple[int, int] | None = None
        """(N1, N0) as learned by the probe, or assumed."""
        self.group_sizes_source = ""
        self._next = 0
        self._pending: str | None = None
        self._answered_batches = 0

    # -- actions ------------------------------------------------------------------------------

    def next_action(self, now: float) -> Action:
        n = self.context.n
        if self.group_sizes is None:
            if self.config.probe:
                probe = np.zeros((1, n))
                probe[0, 0] = 1.0
                self._pending = "probe"
                return Submit(probe, "sp", self.config.prepare_hours, "probe")
            self._assume_sizes()
        if self._next < len(self.batches):
            start, stop = self.batches[self._next]
            self._pending = f"batch {self._next}"
            return Submit(
                self.models[start:stop],
                "sp",
                self.config.prepare_hours,
                f"batch {self._next + 1}/{len(self.batches)}",
            )
        if self.config.decode_every == 0 and self._answered_batches and self.estimate is None:
            self._decode()
        return Stop("all batches resolved")

    def _assume_sizes(self) -> None:
        n = self.context.n
        n0 = min(max(round(self.config.prior_minority * n), 1), n - 1)
        self.group_sizes = (n - n0, n0)
        self.group_sizes_source = "prior"

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self._pending == "probe":
            self._learn_sizes(float(values[0]))
        else:
            self.answers[self._next] = np.asarray(values, dtype=np.float64)
            self._next += 1
            self._answered_batches += 1
            every = self.config.decode_every
            if every and self._answered_batches % every == 0:
                self._decode()
        self._pending = None

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        if self._pending == "probe":
            self._assume_sizes()
        else:
            self._next += 1
        self._pending = None

    def _learn_sizes(self, value: float) -> None:
        n = self.context.n
        if not np.isfinite(value) or value == 0.0:
            self._assume_sizes()
            return
        size = min(max(round(1.0 / abs(value)), 1), n - 1)
        self.group_sizes = (size, n - size) if value > 0 else (n - size, size)
        self.group_sizes_source = "probe"

    # -- decoding -----------------------------------------------------------------------------

    def _decode(self) -> None:
        assert self.group_sizes is not None
        rows = [np.arange(*self.batches[i]) for i in sorted(self.answers)]
        if not rows:
            return
        index = np.concatenate(rows)
        sp = np.concatenate([self.answers[i] for i in sorted(self.answers)])
        n1, n0 = self.group_sizes
        result = decode_statistical_parity(
            self.models[index], sp, n1=n1, n0=n0, box=self.config.box
        )
        self._set_estimate(
            Estimate(result.attribute, result.confidence, int(index.size), result.method)
        )

    def report(self) -> dict[str, Any]:
        h0 = self.context.base_predictions
        labels = self.context.public.audit.labels
        acc = ((self.models >= 0.5) == (labels[None, :] == 1)).mean(axis=1)
        return {
            "group_sizes": list(self.group_sizes) if self.group_sizes else None,
            "group_sizes_source": self.group_sizes_source,
            "models_answered": int(sum(v.size for v in self.answers.values())),
            "base_accuracy": float(((h0 >= 0.5) == (labels == 1)).mean()),
            "model_accuracy_mean": float(acc.mean()),
            "model_accuracy_std": float(acc.std()),
        }
