"""The compressed-sensing attack: Algorithm 2 of the paper, with the group-size probe of Remark 4.

1. **Probe** (Remark 4): one query of a model that accepts only person 0. Its SP is ``1/N1`` if
   that person is advantaged and ``-1/N0`` otherwise, which gives both group sizes. If the probe
   is refused (e.g. by a minimum-support rule), the strategy assumes a disadvantaged share of
   ``prior_minority`` instead.
2. **Sense**: ``queries`` models ``h_i = clip(h_0 + U(-b, b), 0, 1)`` around the base model,
   sent in batches of ``batch`` models; each model stays close to h_0, so its accuracy is close
   to the base model's (the paper saw 86.23% mean, std 0.26 on Adult for b = 0.1).
3. **Decode** (:mod:`biasleak.agents.strategies.decoders`; by default OMP, falling back to the
   paper's basis pursuit, or its box-constrained form with ``box: true``) after every
   ``decode_every`` answered batches (0: only once all batches are resolved), thresholding at
   half of ``1/N1 + 1/N0``.

The same attack works through the other metrics of Remark 5. ``eo_reveal`` asks for the equal
opportunity gap, which depends only on the people with y = 1: it decodes their attribute (with
their group sizes N11, N10) and can say nothing about the others, whom it guesses to be in the
advantaged group with zero confidence. ``equalized_odds_reveal`` asks for both gaps of equalized
odds: the TPR gap for the people with y = 1 and the FPR gap for those with y = 0, each decoded
separately, so it reaches everyone. Its probe accepts one person of each label class. The
developer knows the labels (they are public), so it knows whom its queries can reach; ``report``
says how many.

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
from biasleak.agents.strategies.decoders import METHODS, decode_statistical_parity

__all__ = [
    "CompressedSensing",
    "CompressedSensingConfig",
    "EoRevealConfig",
    "EqualizedOddsRevealConfig",
]


class _SensingConfig(StrategyConfig):
    """Fields shared by the compressed-sensing strategies."""

    queries: int = Field(400, ge=1, description="number of perturbed models m")
    perturbation: float = Field(0.1, gt=0.0, le=1.0, description="noise half-width b")
    batch: int = Field(50, ge=1, description="models per query message")
    box: bool = Field(
        False, strict=False, description="add the box constraint 0 <= s <= 1/N1 + 1/N0"
    )
    decoder: Literal[METHODS] = Field(  # type: ignore[valid-type]
        "auto", description="decoder (auto: OMP, falling back to basis pursuit)"
    )
    probe: bool = Field(True, strict=False, description="learn the group sizes from a probe")
    prior_minority: float = Field(
        0.1, gt=0.0, lt=1.0, description="share of a = 0 assumed when the probe fails"
    )
    decode_every: int = Field(
        0, ge=0, description="decode after every k answered batches (0: once, at the end)"
    )
    prepare_hours: float = Field(
        0.5, ge=0.0, allow_inf_nan=False, description="time to build one batch"
    )


class CompressedSensingConfig(_SensingConfig):
    """Compressed sensing through statistical parity answers (Algorithm 2)."""

    kind: Literal["compressed_sensing"] = "compressed_sensing"


class EoRevealConfig(_SensingConfig):
    """Compressed sensing through equal opportunity answers (reaches people with y = 1)."""

    kind: Literal["eo_reveal"] = "eo_reveal"


class EqualizedOddsRevealConfig(_SensingConfig):
    """Compressed sensing through equalized-odds answers (TPR and FPR gaps; reaches everyone)."""

    kind: Literal["equalized_odds_reveal"] = "equalized_odds_reveal"


METRIC_OF_KIND = {"compressed_sensing": "sp", "eo_reveal": "eo", "equalized_odds_reveal": "eodds"}


class CompressedSensing(Strategy):
    """Attribute-Reveal by compressed sensing (Theorem 5, Algorithm 2, Remarks 4 and 5)."""

    kind = "compressed_sensing"

    def __init__(self, config: _SensingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: _SensingConfig = config
        n = context.n
        self.metric = METRIC_OF_KIND.get(config.kind, "sp")  # type: ignore[attr-defined]
        labels = context.public.audit.labels == 1
        if self.metric == "sp":
            self.classes = [np.arange(n)]
        elif self.metric == "eo":
            self.classes = [np.flatnonzero(labels)]
        else:
            self.classes = [np.flatnonzero(labels), np.flatnonzero(~labels)]
        """Who each answer column depends on (its 'class')."""
        if any(c.size < 2 for c in self.classes):
            raise ValueError("every label class this metric needs must hold at least 2 people")
        h0 = context.base_predictions
        noise = context.rng.uniform(-config.perturbation, config.perturbation, (config.queries, n))
        self.models: NDArray[np.float64] = np.clip(h0[None, :] + noise, 0.0, 1.0)
        """All m perturbed models, drawn up front from the developer's stream."""
        self.batches = [
            (start, min(start + config.batch, config.queries))
            for start in range(0, config.queries, config.batch)
        ]
        self.answers: dict[int, NDArray[np.float64]] = {}
        """Batch index -> answered values, shape (models, classes)."""
        self.group_sizes: list[tuple[int, int]] | None = None
        """Per class (N1, N0), as learned by the probe, or assumed."""
        self.group_sizes_source = ""
        self.stop_reason: str | None = None
        """Set by subclasses that decide to stop early."""
        self.decode_every = config.decode_every
        """Decode after every k answered batches (0: once, at the end)."""
        self._next = 0
        self._pending: str | None = None
        self._answered_batches = 0

    # -- actions ------------------------------------------------------------------------------

    def next_action(self, now: float) -> Action:
        n = self.context.n
        if self.group_sizes is None:
            if self.config.probe:
                probe = np.zeros((1, n))
                probe[0, [int(c[0]) for c in self.classes]] = 1.0
                self._pending = "probe"
                return Submit(probe, self.metric, self.config.prepare_hours, "probe")
            self._assume_sizes()
        if self.stop_reason is None and self._next < len(self.batches):
            self._pending = f"batch {self._next}"
            return Submit(
                self._batch_models(self._next),
                self.metric,
                self.config.prepare_hours,
                f"batch {self._next + 1}/{len(self.batches)}",
            )
        answered = sum(v.shape[0] for v in self.answers.values())
        if answered and (self.estimate is None or self.estimate.models_used < answered):
            self._decode()  # a final decode over every answer
        return Stop(self.stop_reason or "all batches resolved")

    # -- hooks for the adaptive variants ----------------------------------------------------------

    def _batch_models(self, i: int) -> NDArray[np.float64]:
        """The models of batch i."""
        start, stop = self.batches[i]
        return self.models[start:stop].copy()  # a Submit must not change if models are redrawn

    def _measurements(self) -> tuple[NDArray[np.intp], NDArray[np.float64], float | None]:
        """Rows of ``self.models`` answered so far, their answers and the noise level (or None)."""
        done = sorted(self.answers)
        index = np.concatenate([np.arange(*self.batches[i]) for i in done])
        return index, np.concatenate([self.answers[i] for i in done]), None

    def _after_decode(self, methods: list[str]) -> None:
        """Called after every decode with the decoders used (one per label class)."""

    def _assume_sizes(self) -> None:
        sizes = []
        for c in self.classes:
            n0 = min(max(round(self.config.prior_minority * c.size), 1), c.size - 1)
            sizes.append((int(c.size) - n0, n0))
        self.group_sizes = sizes
        self.group_sizes_source = "prior"

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        vals = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        if self._pending == "probe":
            self._learn_sizes(vals[0])
        else:
            self.answers[self._next] = vals
            self._next += 1
            self._answered_batches += 1
            every = self.decode_every
            if every and self._answered_batches % every == 0:
                self._decode()
        self._pending = None

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        if self._pending == "probe":
            self._assume_sizes()
        else:
            self._next += 1
        self._pending = None

    def _learn_sizes(self, values: NDArray[np.float64]) -> None:
        if (
            values.size != len(self.classes)
            or not np.all(np.isfinite(values))
            or np.any(values == 0.0)
        ):
            self._assume_sizes()
            return
        sizes = []
        for c, value in zip(self.classes, values, strict=True):
            size = min(max(round(1.0 / abs(float(value))), 1), int(c.size) - 1)
            sizes.append((size, int(c.size) - size) if value > 0 else (int(c.size) - size, size))
        self.group_sizes = sizes
        self.group_sizes_source = "probe"

    # -- decoding -----------------------------------------------------------------------------

    def _decode(self) -> None:
        assert self.group_sizes is not None
        if not self.answers:
            return
        index, answers, sigma = self._measurements()
        n = self.context.n
        attribute = np.ones(n, dtype=np.int8)  # unreachable people: the advantaged guess
        confidence = np.zeros(n)
        methods = []
        for col, (cls, (n1, n0)) in enumerate(zip(self.classes, self.group_sizes, strict=True)):
            result = decode_statistical_parity(
                self.models[np.ix_(index, cls)],
                answers[:, col],
                n1=n1,
                n0=n0,
                method=self.config.decoder,
                box=self.config.box,
                sigma=sigma,
            )
            attribute[cls] = result.attribute
            confidence[cls] = result.confidence
            methods.append(result.method)
        self._set_estimate(
            Estimate(attribute, confidence, int(index.size), "+".join(sorted(set(methods))))
        )
        self._after_decode(methods)

    def report(self) -> dict[str, Any]:
        h0 = self.context.base_predictions
        labels = self.context.public.audit.labels
        acc = ((self.models >= 0.5) == (labels[None, :] == 1)).mean(axis=1)
        return {
            "metric": self.metric,
            "reachable": int(sum(c.size for c in self.classes)),
            "group_sizes": [list(g) for g in self.group_sizes] if self.group_sizes else None,
            "group_sizes_source": self.group_sizes_source,
            "models_answered": int(sum(v.shape[0] for v in self.answers.values())),
            "base_accuracy": float(((h0 >= 0.5) == (labels == 1)).mean()),
            "model_accuracy_mean": float(acc.mean()),
            "model_accuracy_std": float(acc.std()),
        }
