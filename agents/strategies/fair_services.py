"""Honest developers that ask for a fair model instead of fairness numbers.

Under any meaningful privacy budget, noisy metric answers cannot tell candidate models apart
(:mod:`~biasleak.agents.strategies.honest`). These two strategies take the other route: they ask
the compliance team for one of its private fair-learning services
(:mod:`biasleak.agents.services`) and keep the model it delivers.

- ``request_postprocessing`` thresholds its base model's scores on the audit set at 0.5 and
  submits the 0/1 predictions for DP post-processing. It keeps the mixing probabilities
  ``P[Y' = 1 | Yhat, A]``; the derived classifier reads the attribute, so the compliance team
  deploys it as a scoring service (disparate treatment).
- ``request_fair_training`` asks for the DP oracle learner with a learner from the menu and keeps
  the mixture of A-blind linear classifiers (over the training split's feature encoding).

Both send one request and stop. Whatever they end with goes into :meth:`report`, from which the
simulation's evaluator scores the model on people outside the audit set.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from biasleak.agents.messages import Refusal, ServiceResult
from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    RequestService,
    Stop,
    Strategy,
    StrategyConfig,
)

__all__ = [
    "RequestFairTraining",
    "RequestFairTrainingConfig",
    "RequestPostprocessing",
    "RequestPostprocessingConfig",
]


class RequestPostprocessingConfig(StrategyConfig):
    """Configuration of :class:`RequestPostprocessing`."""

    kind: Literal["request_postprocessing"] = "request_postprocessing"
    prepare_hours: float = Field(
        1.0, ge=0.0, allow_inf_nan=False, description="time to score the audit set"
    )


class RequestFairTrainingConfig(StrategyConfig):
    """Configuration of :class:`RequestFairTraining`."""

    kind: Literal["request_fair_training"] = "request_fair_training"
    learner: Literal["least_squares"] = "least_squares"
    prepare_hours: float = Field(0.0, ge=0.0, allow_inf_nan=False)


class _ServiceStrategy(Strategy):
    """One request, then stop with whatever came back."""

    ATTACKS: ClassVar[bool] = False
    USES_SERVICE: ClassVar[bool] = True

    def __init__(self, config: StrategyConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.result: ServiceResult | None = None
        """The service's result, once received."""
        self.refusal: str | None = None
        """The refusal reason, if the request was refused."""
        self._sent = False

    def _request(self) -> RequestService:
        raise NotImplementedError

    def next_action(self, now: float) -> Action:
        if not self._sent:
            self._sent = True
            return self._request()
        if self.result is not None:
            return Stop("model received")
        return Stop(f"service refused: {self.refusal}")

    def on_answer(self, values: Any, now: float) -> None:  # never sends a metric query
        return None

    def on_service_result(self, result: ServiceResult, now: float) -> None:
        self.result = result

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self.refusal = refusal.reason

    def _common(self) -> dict[str, Any]:
        r = self.result
        if r is None:
            return {"service": None, "refused": self.refusal}
        return {
            "service": r.service,
            "epsilon": r.epsilon_charged,
            "delta": r.delta_charged,
            "disparate_treatment": r.disparate_treatment,
        }


class RequestPostprocessing(_ServiceStrategy):
    """Submit the thresholded base model for DP post-processing; keep the mixing probabilities."""

    kind = "request_postprocessing"

    def __init__(self, config: RequestPostprocessingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: RequestPostprocessingConfig = config
        self.base = (np.asarray(context.base_predictions) >= 0.5).astype(np.int8)
        """The base model's 0/1 decisions on the audit set (developer-side threshold)."""

    def _request(self) -> RequestService:
        return RequestService(
            "dp_postprocessing", self.base, prepare_hours=self.config.prepare_hours
        )

    def report(self) -> dict[str, Any]:
        out = self._common()
        if self.result is not None and self.result.mixing is not None:
            out["mixing"] = self.result.mixing.tolist()
        return out


class RequestFairTraining(_ServiceStrategy):
    """Ask for the DP oracle learner; keep the mixture of A-blind linear classifiers."""

    kind = "request_fair_training"

    def __init__(self, config: RequestFairTrainingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: RequestFairTrainingConfig = config

    def _request(self) -> RequestService:
        return RequestService(
            "dp_oracle_learner",
            learner=self.config.learner,
            prepare_hours=self.config.prepare_hours,
        )

    def report(self) -> dict[str, Any]:
        out = self._common()
        r = self.result
        if r is not None and r.coefficients is not None and r.intercepts is not None:
            out["coefficients"] = r.coefficients.tolist()
            out["intercepts"] = r.intercepts.tolist()
            if r.weights is not None:
                out["weights"] = r.weights.tolist()
        return out
