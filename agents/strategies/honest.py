"""An honest developer: train candidate models, ask their fairness, deploy the fairest good one.

The developer trains ``candidates`` logistic regressions on (a subsample of) the public training
split, with inverse regularisation C spread evenly on a log scale over ``[c_min, c_max]``; odd
candidates output hard 0/1 decisions at threshold 0.5, even ones probabilities. It measures each
candidate's accuracy on the audit set (developers hold its features and labels), asks the
compliance team for the chosen metric of each candidate (one query per candidate, or one batch),
and deploys, among the answered candidates whose accuracy is within ``accuracy_tolerance`` of the
best answered one, the one with the smallest absolute answered metric.

Whether noise changed its choice is scored by the simulation: it recomputes the choice from the
exact values, which the compliance side logs internally.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, model_validator

from biasleak.agents.messages import Refusal
from biasleak.agents.models import BaseModel, cached_fit, frozen, train_base_model
from biasleak.agents.public import PublicView
from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
)
from biasleak.mechanisms.metrics import NOISY_METRICS

__all__ = ["HonestSelection", "HonestSelectionConfig", "choose_deployment"]


class HonestSelectionConfig(StrategyConfig):
    """Configuration of :class:`HonestSelection`."""

    kind: Literal["honest_selection"] = "honest_selection"
    candidates: int = Field(10, ge=2, description="number of candidate models K")
    metric: Literal[NOISY_METRICS] = "sp"  # type: ignore[valid-type]
    accuracy_tolerance: float = Field(0.01, ge=0.0, le=1.0)
    batch: bool = Field(False, strict=False, description="ask for all candidates in one query")
    c_min: float = Field(1e-3, gt=0.0, allow_inf_nan=False)
    c_max: float = Field(10.0, gt=0.0, allow_inf_nan=False)
    train_subsample: int = Field(5000, ge=50, description="training rows used per candidate")
    train_hours: float = Field(
        2.0, ge=0.0, allow_inf_nan=False, description="time to train one candidate"
    )

    @model_validator(mode="after")
    def _range(self) -> HonestSelectionConfig:
        if self.c_min > self.c_max:
            raise ValueError(f"c_min ({self.c_min}) must be <= c_max ({self.c_max})")
        return self


def choose_deployment(
    accuracies: list[float], answers: list[float | None], tolerance: float
) -> int | None:
    """Index of the candidate to deploy: smallest |answer| among the answered candidates within
    ``tolerance`` of the best answered accuracy (ties: the lower index). None if none answered."""
    answered = [i for i, v in enumerate(answers) if v is not None and np.isfinite(v)]
    if not answered:
        return None
    best = max(accuracies[i] for i in answered)
    good = [i for i in answered if accuracies[i] >= best - tolerance]
    return min(good, key=lambda i: (abs(float(answers[i])), i))  # type: ignore[arg-type]


def _subsample(view: PublicView, size: int, rng: np.random.Generator) -> PublicView:
    if len(view) <= size:
        return view
    idx = np.sort(rng.choice(len(view), size=size, replace=False))
    return PublicView(view.features[idx], view.labels[idx], view.columns, view.categorical)


class HonestSelection(Strategy):
    """Honest model selection by fairness queries."""

    ATTACKS: ClassVar[bool] = False

    kind = "honest_selection"

    def __init__(self, config: HonestSelectionConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: HonestSelectionConfig = config
        audit = context.public.audit
        grid = np.geomspace(config.c_min, config.c_max, config.candidates)
        rng = context.rng

        def fit() -> tuple[list[BaseModel], NDArray[np.float64], list[float], dict[str, Any]]:
            train = _subsample(context.public.train, config.train_subsample, rng)
            models, outputs, accuracies = [], [], []
            for k, c in enumerate(grid):
                model = train_base_model(train, C=float(c))
                models.append(model)
                proba = model.predict_proba(audit)
                out = proba if k % 2 == 0 else (proba >= 0.5).astype(np.float64)
                outputs.append(out)
                accuracies.append(float(np.mean((out >= 0.5) == (audit.labels == 1))))
            # shared by every world of the process: frozen
            return models, frozen(np.stack(outputs)), accuracies, rng.bit_generator.state

        # the same developer in every world of a red team (or sweep point) fits the same
        # candidates from the same random state: once per process, the random stream left
        # exactly where a fresh fit leaves it
        key = (
            "honest_selection",
            config.train_subsample,
            config.c_min,
            config.c_max,
            config.candidates,
            repr(rng.bit_generator.state),
        )
        models, candidates, accuracies, after = cached_fit((context.public.train, audit), key, fit)
        rng.bit_generator.state = after
        self._models = list(models)
        self.c_values = [float(c) for c in grid]
        self.candidates: NDArray[np.float64] = candidates
        """(K, n) candidate outputs on the audit set (read-only)."""
        self.accuracies = list(accuracies)
        self.answers: list[float | None] = [None] * config.candidates
        """Answered metric per candidate (None while unknown or refused)."""
        self._next = 0
        self.deployed: int | None = None

    def next_action(self, now: float) -> Action:
        cfg = self.config
        if self.config.batch and self._next == 0:
            return Submit(
                self.candidates,
                cfg.metric,
                cfg.train_hours * cfg.candidates,
                f"candidates 1-{cfg.candidates}",
            )
        if self._next < cfg.candidates:
            k = self._next
            return Submit(
                self.candidates[k : k + 1],
                cfg.metric,
                cfg.train_hours,
                f"candidate {k + 1}/{cfg.candidates}",
            )
        self.deployed = choose_deployment(self.accuracies, self.answers, cfg.accuracy_tolerance)
        return Stop("deployed" if self.deployed is not None else "no candidate answered")

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if self.config.batch:
            self.answers = [float(v) for v in vals]
            self._next = self.config.candidates
        else:
            self.answers[self._next] = float(vals[0])
            self._next += 1

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self._next = self.config.candidates if self.config.batch else self._next + 1

    def deployed_decisions(self, view: PublicView) -> NDArray[np.int8] | None:
        """The deployed candidate's 0/1 decisions (threshold 0.5) on ``view``; None if none.

        A deployed model decides, whether its queried output was a probability or a decision:
        this is what scores it beside the fair-learning services' models.
        """
        if self.deployed is None:
            return None
        return (self._models[self.deployed].predict_proba(view) >= 0.5).astype(np.int8)

    def report(self) -> dict[str, Any]:
        return {
            "deployed": self.deployed,
            "accuracies": self.accuracies,
            "answers": self.answers,
            "accuracy_tolerance": self.config.accuracy_tolerance,
            "c_values": self.c_values,
        }
