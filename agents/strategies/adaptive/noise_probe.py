"""The noise probe: ask the same model several times and compare the answers.

The simplest question an adversary can put to a compliance team is whether its answers are
exact. The noise probe sends the developer's base model ``repeats`` times, unchanged, for its
statistical parity, and reads the answers:

* all equal: the answers are **repeatable** - either exact, or noisy but served from a cache
  that replays the first answer (the probe cannot tell these two apart, and does not need to:
  in both cases asking again buys nothing);
* different: each answer carries **fresh noise**, and their spread estimates its scale. For
  Laplace noise of scale b the mean absolute deviation from the median is about b, which is the
  ``scale_estimate`` the report gives.

Refused repeats are counted, not retried: a refusal is also an answer about the policy (the
reasons are in the report). The verdict stays ``undetermined`` until two answers have come back.

:func:`noise_verdict` is shared with the averaging attack, which uses the same test on two copies
of one model to decide whether it must jitter its repeats (``jitter: auto``).
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
    Submit,
)

__all__ = ["NoiseProbe", "NoiseProbeConfig", "noise_verdict"]


class NoiseProbeConfig(StrategyConfig):
    """Configuration of :class:`NoiseProbe`."""

    kind: Literal["noise_probe"] = "noise_probe"
    repeats: int = Field(3, ge=2, description="how many times the same model is asked")
    prepare_hours: float = Field(0.1, ge=0.0, allow_inf_nan=False)


def noise_verdict(answers: list[float]) -> tuple[str, float]:
    """("fresh_noise" or "repeatable", spread) for repeated answers to one model.

    Parameters
    ----------
    answers
        The values returned for one and the same model, in any order.

    Returns
    -------
    tuple of (str, float)
        ``"fresh_noise"`` when the answers differ at all, ``"repeatable"`` when they are all
        equal (or there are none), and their spread ``max - min``.
    """
    values = np.asarray(answers, dtype=np.float64)
    spread = float(np.max(values) - np.min(values)) if values.size else 0.0
    return ("fresh_noise" if spread > 0.0 else "repeatable"), spread


class NoiseProbe(Strategy):
    """Re-asks the base model to tell fresh noise from caching or exact answers."""

    ATTACKS: ClassVar[bool] = True

    kind = "noise_probe"

    def __init__(self, config: NoiseProbeConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: NoiseProbeConfig = config
        self.answers: list[float] = []
        """The statistical parity returned for each answered repeat, in order."""
        self.refused: list[str] = []
        """The reason code of each refused repeat, in order."""

    def next_action(self, now: float) -> Action:
        if len(self.answers) + len(self.refused) >= self.config.repeats:
            return Stop(self.verdict)
        h0 = self.context.base_predictions
        return Submit(h0[None, :], "sp", self.config.prepare_hours, "same model again")

    @property
    def verdict(self) -> str:
        """``fresh_noise``, ``repeatable``, or ``undetermined`` before two answers."""
        if len(self.answers) < 2:
            return "undetermined"
        return noise_verdict(self.answers)[0]

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        self.answers.append(float(np.asarray(values).reshape(-1)[0]))

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self.refused.append(refusal.reason)

    def report(self) -> dict[str, Any]:
        values = np.asarray(self.answers)
        # For Laplace noise of scale b the mean absolute deviation from the median is about b.
        scale = float(np.mean(np.abs(values - np.median(values)))) if values.size > 1 else None
        return {
            "verdict": self.verdict,
            "answers": self.answers,
            "refused": self.refused,
            "scale_estimate": scale,
        }
