"""The compliance team's answering policy: the ``compliance:`` mapping of a scenario file.

The policy is a list of stages, each told apart by its ``kind`` (a discriminated union built
from the stage registry :data:`biasleak.mechanisms.policy.STAGES`: ``rate_limit``, ``budget``,
``noise``, ``min_support``, ``near_duplicate``, ``cache``). The stage models themselves live in
:mod:`biasleak.mechanisms.policy`; the same model validates a file's entry and runs in the
policy, so a new stage needs no change here. Whatever the order in the file, the stages run in
the pipeline order of :class:`biasleak.mechanisms.policy.Policy`; :meth:`ComplianceConfig.
build_policy` builds that policy, and validation builds it once too, so every rule of the policy
(one noise stage at most, metrics with a sensitivity under noise) is checked when the file is
loaded.

Every ``epsilon`` of a stage (a noise stage's, a budget's total) that is finite is at least
:data:`~biasleak.mechanisms.policy.noise.MIN_EPSILON`: a subnormal budget or noise level is a
typo, never a policy. How many models one query may hold (``max_models``) is capped by the
scenario's ``limits.max_models`` (:mod:`.limits`).

``services`` lists the private fair-learning services the team offers
(:mod:`biasleak.agents.services`), each told apart by its ``kind``: ``dp_postprocessing``
(``epsilon``, ``gamma``) and ``dp_oracle_learner`` (``epsilon``, ``delta``, ``gamma``, ``bound``,
``rounds``, ``learner``, ``accountant``, ``min_cell_size``), at most one of each.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from biasleak.agents.services import (
    LEARNERS,
    OracleLearnerService,
    PostProcessingService,
    ServiceSpec,
)
from biasleak.mechanisms import policy as pol
from biasleak.mechanisms._tagged import tagged_union
from biasleak.mechanisms.fair import MIXTURES
from biasleak.mechanisms.fair.budget import ACCOUNTANTS
from biasleak.mechanisms.metrics import METRICS, NOISY_METRICS
from biasleak.mechanisms.policy import STAGES, Stage
from biasleak.mechanisms.policy.noise import MIN_EPSILON
from biasleak.sim.scenario.base import Strict

__all__ = [
    "SERVICES",
    "SMALL_STAGE_EPSILON",
    "STAGES",
    "ComplianceConfig",
    "OracleLearnerConfig",
    "PostProcessingConfig",
    "ServiceConfig",
    "Stage",
]

SMALL_STAGE_EPSILON = "epsilon must be at least {least:g} (or .inf); received {epsilon!r}"
"""The problem of a stage whose finite epsilon is below the floor."""


class PostProcessingConfig(Strict):
    """DP post-processing (Jagielski et al. 2019, section 3): mixing probabilities for a base
    model, eps-DP in the attribute; the derived classifier reads the attribute."""

    kind: Literal["dp_postprocessing"]
    epsilon: float = Field(gt=0.0, description="privacy loss per run (.inf: non-private)")
    gamma: float = Field(0.0, ge=0.0, le=1.0, allow_inf_nan=False)

    def build(self) -> ServiceSpec:
        return PostProcessingService(self.epsilon, self.gamma)


class OracleLearnerConfig(Strict):
    """The DP oracle learner (Jagielski et al. 2019, section 4): a mixture of A-blind classifiers
    from a private Learner-Auditor game run on the compliance side."""

    kind: Literal["dp_oracle_learner"]
    epsilon: float = Field(gt=0.0, description="total privacy loss (.inf: no noise)")
    delta: float = Field(1e-6, gt=0.0, lt=1.0)
    gamma: float = Field(0.02, ge=0.0, le=1.0, allow_inf_nan=False)
    bound: float = Field(50.0, gt=0.0, allow_inf_nan=False, description="B, l1 bound of lambda")
    rounds: int = Field(20, ge=1, le=1000, description="T; the game composes 2T mechanisms")
    learner: Literal[LEARNERS] = "least_squares"  # type: ignore[valid-type]
    accountant: Literal[ACCOUNTANTS] = "pld"  # type: ignore[valid-type]
    min_cell_size: int = Field(
        10, ge=2, description="public lower bound on every (group, label) cell of the audit set"
    )
    mixture: Literal[MIXTURES] = Field(  # type: ignore[valid-type]
        "saddle",
        description="how the rounds' classifiers are weighed: the game's LP on the released "
        "violations (saddle) or the seed's uniform average",
    )

    def build(self) -> ServiceSpec:
        return OracleLearnerService(
            self.epsilon,
            self.delta,
            self.gamma,
            self.bound,
            self.rounds,
            self.learner,
            self.accountant,
            self.min_cell_size,
            self.mixture,
        )


SERVICES: dict[str, type[Strict]] = {
    "dp_postprocessing": PostProcessingConfig,
    "dp_oracle_learner": OracleLearnerConfig,
}
"""Service kind -> its configuration (the registry the scenario union is built from)."""
ServiceConfig = tagged_union(SERVICES.values())
"""A fair-learning service of the ``services:`` list, discriminated on ``kind``."""


class ComplianceConfig(Strict):
    """The compliance team: metrics it answers and its policy stages."""

    metrics: list[Literal[METRICS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(NOISY_METRICS), min_length=1
    )
    policy: list[Stage] = Field(default_factory=list)
    answer_hours: float = Field(0.1, ge=0.0, allow_inf_nan=False)
    latency_hours: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    max_models: int = Field(10_000, ge=1)
    services: list[ServiceConfig] = Field(
        default_factory=list,
        exclude_if=lambda services: not services,
        description="private fair-learning services offered (at most one of each kind)",
    )

    @field_validator("policy")
    @classmethod
    def _epsilons(cls, policy: list[Stage]) -> list[Stage]:
        """No stage has a finite epsilon below the floor (a budget of 5e-324 is a typo)."""
        errors = []
        for i, stage in enumerate(policy):
            epsilon = getattr(stage, "epsilon", None)
            if isinstance(epsilon, float) and math.isfinite(epsilon) and epsilon < MIN_EPSILON:
                message = SMALL_STAGE_EPSILON.format(least=MIN_EPSILON, epsilon=epsilon)
                errors.append(
                    InitErrorDetails(
                        type=PydanticCustomError(
                            "small_epsilon", "{message}", {"message": message}
                        ),
                        loc=(i, "epsilon"),
                        input=epsilon,
                    )
                )
        if errors:
            raise ValidationError.from_exception_data("ComplianceConfig", errors)
        return policy

    @model_validator(mode="after")
    def _stages(self) -> ComplianceConfig:
        self.build_policy()  # the policy's own rules, at load time
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError(f"metrics lists a metric twice: {self.metrics}")
        kinds = [s.kind for s in self.services]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"services lists a kind twice: {kinds}")
        return self

    def build_services(self) -> tuple[ServiceSpec, ...]:
        """The services to hand the compliance agent."""
        return tuple(s.build() for s in self.services)

    def build_policy(self) -> pol.Policy:
        """The :class:`~biasleak.mechanisms.policy.Policy` these stages describe."""
        return pol.Policy(tuple(self.metrics), tuple(self.policy), self.max_models)
