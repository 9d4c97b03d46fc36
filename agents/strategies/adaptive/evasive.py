"""The evasive attack: compressed sensing that routes around refusals and rate limits.

A compliance team can refuse queries that look like an attack, and limit how many it answers per
day. The rules are public (a developer learns them from the refusal codes), and an adversary can
shape its queries to pass them. The evasive attack runs compressed sensing
(:mod:`biasleak.agents.strategies.compressed_sensing`) and changes course on three refusals:

**A refused probe** (``low_support`` or ``near_duplicate``): the one-person probe is the most
suspicious query there is. It is replaced by a *tracker* (Denning, Denning and Schwartz 1979,
"The tracker: a threat to statistical database security"): four large-support models built from
the thresholded base model A,

* ``B`` = A with a random set R and person 0 flipped,
* ``C`` = A with R and a disjoint random set S flipped,
* ``D`` = A with S flipped,

so that, SP being linear in the predictions, ``SP(B) - SP(C) + SP(D) - SP(A) = d_0 v_0``, where
``d_0 = 1 - 2 A_0`` is the flip of person 0 and ``v_0`` is the one-person probe's answer
(``1/N1`` or ``-1/N0``). Every two of the four models differ in at least ``|R|`` people, so
neither a support rule nor a near-duplicate rule sees one person singled out. The combination is
read exactly as a probe. A refused tracker leaves the prior's group sizes.

**A batch refused as near-duplicate**: the perturbed models are too close to the base model (or
to each other). The perturbation is doubled, up to ``max_perturbation``, the unsent models are
redrawn around the base model, and the same batch is sent again.

**A rate-limited batch**: the attack waits until the refusal's ``retry_after`` (or a simulated
day when none is given) and sends the same batch again.

Any other refusal is handled as in the plain attack (the batch is dropped). Every change of
course is recorded in ``adaptations`` and reported with the final perturbation.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.agents.messages import Refusal
from biasleak.agents.strategies.base import Action, DeveloperContext, Submit, Wait
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    Pending,
    SensingConfig,
)

__all__ = ["Evasive", "EvasiveConfig"]


class EvasiveConfig(SensingConfig):
    """Configuration of :class:`Evasive`."""

    kind: Literal["evasive"] = "evasive"
    tracker_size: int = Field(10, ge=2, description="|R| = |S| of the tracker probe")
    max_perturbation: float = Field(0.5, gt=0.0, le=1.0)


class Evasive(CompressedSensing):
    """Compressed sensing that routes around refusal rules and rate limits."""

    kind = "evasive"

    def __init__(self, config: EvasiveConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: EvasiveConfig = config
        self.adaptations: list[str] = []
        """What it changed, and why (for the report)."""
        self.tracker: NDArray[np.float64] | None = None
        """The four tracker models A, B, C, D (None until a probe is refused)."""
        self.tracker_d0 = 0.0
        """How person 0's output changes between A and B: ``1 - 2 A_0``."""
        self.perturbation = config.perturbation
        """The current half-width b of the perturbation (doubled on near-duplicate refusals)."""
        self._wait_until: float | None = None
        """When a rate-limited batch may be sent again (None: no wait)."""

    def next_action(self, now: float) -> Action:
        if self._wait_until is not None and now < self._wait_until:
            return Wait(self._wait_until)
        self._wait_until = None
        if self.tracker is not None and self.group_sizes is None:
            self._expect(Pending.TRACKER)
            return Submit(self.tracker, "sp", self.config.prepare_hours, "tracker probe")
        return super().next_action(now)

    def _build_tracker(self) -> None:
        n = self.context.n
        k = min(self.config.tracker_size, (n - 1) // 2)
        base = (self.context.base_predictions >= 0.5).astype(np.float64)
        others = self.context.rng.permutation(np.arange(1, n))
        r, s = others[:k], others[k : 2 * k]

        def flip(idx: NDArray[np.intp]) -> NDArray[np.float64]:
            h = base.copy()
            h[idx] = 1.0 - h[idx]
            return h

        self.tracker = np.stack(
            [base, flip(np.append(r, 0)), flip(np.concatenate([r, s])), flip(s)]
        )
        self.tracker_d0 = 1.0 - 2.0 * base[0]

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self.awaiting is Pending.TRACKER:
            a, b, c, d = np.asarray(values, dtype=np.float64).reshape(-1)
            v0 = (b - c + d - a) / self.tracker_d0
            self.expect_probe()  # learn the sizes as from a one-person probe
            super().on_answer(np.array([v0]), now)
            return
        super().on_answer(values, now)

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if self.awaiting is Pending.PROBE and refusal.reason in ("low_support", "near_duplicate"):
            self.adaptations.append(f"probe refused ({refusal.reason}): using a tracker instead")
            self._build_tracker()
            self._settle()
            return
        if self.awaiting is Pending.TRACKER:
            self.adaptations.append(f"tracker refused ({refusal.reason}): assuming the group sizes")
            self._settle()
            self._assume_sizes()
            return
        if self.awaiting is Pending.BATCH:
            if (
                refusal.reason == "near_duplicate"
                and self.perturbation < self.config.max_perturbation
            ):
                self.perturbation = min(2 * self.perturbation, self.config.max_perturbation)
                self._redraw()
                self.adaptations.append(
                    f"batch refused as near-duplicate: perturbation raised to {self.perturbation:g}"
                )
                self._settle()
                return  # the same batch index is sent again, redrawn
            if refusal.reason == "rate_limited":
                self._wait_until = (
                    refusal.retry_after if refusal.retry_after is not None else now + 24.0
                )
                self.adaptations.append(f"rate limited: waiting until t = {self._wait_until:g}")
                self._settle()
                return
        super().on_refusal(refusal, now)

    def _redraw(self) -> None:
        """Redraw every model not yet answered around the base model, at the new perturbation."""
        start = self.batches[self._next][0]
        h0 = self.context.base_predictions
        rest = self.models.shape[0] - start
        noise = self.context.rng.uniform(-self.perturbation, self.perturbation, (rest, h0.size))
        self.models[start:] = np.clip(h0[None, :] + noise, 0.0, 1.0)

    def report(self) -> dict[str, Any]:
        out = super().report()
        out.update(adaptations=self.adaptations, perturbation=self.perturbation)
        return out
