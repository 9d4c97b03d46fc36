"""A whole scenario: the pydantic models of a scenario file, its hash and its JSON Schema.

A scenario file names, from top to bottom:

- ``name``, ``description``, ``seed`` and ``horizon_days``: the run's identity, the seed of every
  random stream, and how long the simulated world runs;
- ``data`` (:mod:`.data`) and ``model``: the audit data and the base model developers train;
- ``developers``: identities, their organisations and their strategies. A strategy is a
  discriminated union on ``kind`` built from the registry
  :data:`biasleak.agents.strategies.STRATEGIES`, so a new strategy there is a new ``kind`` here
  without touching this module;
- ``compliance`` (:mod:`.policy`): the metrics the compliance team answers and its policy stages;
- ``auditor``: the optional external auditor, its detectors and what an alert does;
- ``red_team``: judge the policy by every attack of the library (:data:`ATTACK_KINDS`);
- ``privacy_audit``: the defaults of ``biasleak audit`` (:class:`PrivacyAuditConfig`), which checks
  the ceilings' privacy claims from below; other commands ignore it;
- ``grid``: variations for ``biasleak sweep``;
- ``limits`` (:mod:`.limits`): caps on the size of the world (events, log size, auditor visits,
  identities, candidates...), with defaults that every shipped scenario keeps.

Once every mapping is valid on its own, the scenario is checked against its limits; a scenario
over a cap gets one problem at the key that is too large (``auditor.every_hours``,
``developers.0.strategy.identities``), naming the ``limits`` key that would raise it.

Two things are computed from a validated scenario. :func:`scenario_hash` is the SHA-256 of the
resolved scenario (every default filled in) as canonical JSON: the same scenario written in another
key order, style or with explicit defaults has the same hash, and any changed value changes it.
:func:`schema` is the JSON Schema of scenario files that ``biasleak schema`` prints and that is
committed as ``scenarios/schema.json``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from biasleak.agents.auditor import DETECTORS, DetectorSettings
from biasleak.agents.compliance import ALERT_REACTIONS
from biasleak.agents.strategies import HONEST_KINDS, ISOLATED_KINDS, STRATEGIES
from biasleak.mechanisms._tagged import tagged_union
from biasleak.mechanisms._validation import did_you_mean
from biasleak.mechanisms.digests import text_digest
from biasleak.sim.runlog import jsonable
from biasleak.sim.scenario.base import Strict
from biasleak.sim.scenario.data import DataConfig
from biasleak.sim.scenario.limits import Limits, limit_problems
from biasleak.sim.scenario.policy import ComplianceConfig

__all__ = [
    "ATTACK_KINDS",
    "AuditorConfig",
    "DeveloperConfig",
    "ModelConfig",
    "PrivacyAuditConfig",
    "RedTeamConfig",
    "Scenario",
    "StrategyConfig",
    "scenario_hash",
    "schema",
]


class ModelConfig(Strict):
    """The base model developers train (scikit-learn logistic regression)."""

    kind: Literal["logistic_regression"] = "logistic_regression"
    C: float = Field(1.0, gt=0.0, allow_inf_nan=False, description="inverse regularisation")


# -- developers ----------------------------------------------------------------------------------

StrategyConfig = tagged_union(cfg for cfg, _ in STRATEGIES.values())


class DeveloperConfig(Strict):
    """One developer identity and its strategy."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="unique identity")
    organization: str = Field(min_length=1)
    strategy: StrategyConfig
    timeout_hours: float = Field(
        72.0, gt=0.0, allow_inf_nan=False, description="wait for a reply at most this long"
    )
    retry_rate_limited: bool = Field(True, strict=False)


class AuditorConfig(Strict):
    """The optional external auditor."""

    enabled: bool = Field(False, strict=False)
    every_hours: float = Field(24.0, gt=0.0, allow_inf_nan=False)
    detectors: list[Literal[tuple(DETECTORS)]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(DETECTORS)
    )
    on_alert: Literal[ALERT_REACTIONS] = "log_only"  # type: ignore[valid-type]
    near_duplicate_threshold: float = Field(1.5, gt=0.0, allow_inf_nan=False)
    near_duplicate_min_count: int = Field(1, ge=1)
    low_support_k: int = Field(5, ge=1)
    volume_max_models: int = Field(500, ge=1)
    noise_family_threshold: float = Field(0.15, gt=0.0, allow_inf_nan=False)
    noise_family_min_models: int = Field(20, ge=1)

    def settings(self) -> DetectorSettings:
        return DetectorSettings(
            self.near_duplicate_threshold,
            self.near_duplicate_min_count,
            self.low_support_k,
            self.volume_max_models,
            self.noise_family_threshold,
            self.noise_family_min_models,
        )


# -- red team ------------------------------------------------------------------------------------

ATTACK_KINDS: tuple[str, ...] = tuple(
    k for k in STRATEGIES if k not in HONEST_KINDS and k not in ISOLATED_KINDS
)
"""Every attack the library knows: the strategy registry without the honest strategies."""
LISTED_ONLY: tuple[str, ...] = tuple(k for k in STRATEGIES if k in ISOLATED_KINDS)
"""Attacks a red team runs only when its list names them (plugins: code from outside biasleak)."""


class RedTeamConfig(Strict):
    """The red team: every attack of the library, each as its own developer against the policy.

    ``attacks: all`` (the default) takes every kind of :data:`ATTACK_KINDS`; a list names some.
    """

    attacks: Literal["all"] | list[Literal[ATTACK_KINDS + LISTED_ONLY]] = Field(  # type: ignore[valid-type]
        "all", description="'all', or a list of attack kinds (strategy kinds but honest ones)"
    )

    @field_validator("attacks", mode="before")
    @classmethod
    def _kinds(cls, value: Any) -> Any:
        allowed = [*ATTACK_KINDS, *LISTED_ONLY]
        if isinstance(value, str):
            if value != "all":
                raise ValueError(
                    "attacks must be 'all' or a list of attack kinds"
                    + did_you_mean(value, ["all", *allowed])
                )
            return value
        if not isinstance(value, list) or not value:
            raise ValueError(
                f"attacks must be 'all' or a non-empty list of attack kinds from {allowed}; "
                f"received {value!r}"
            )
        problems = []
        for item in value:
            if item not in allowed:
                why = "honest, not an attack" if item in HONEST_KINDS else "unknown attack kind"
                problems.append(f"{why} {item!r}{did_you_mean(item, allowed)}")
        if problems:
            raise ValueError("; ".join(problems) + f"; allowed attack kinds: {allowed}")
        repeated = sorted({k for k in value if value.count(k) > 1})
        if repeated:
            raise ValueError(f"attacks lists a kind twice: {repeated}")
        return value

    def kinds(self) -> list[str]:
        """The attack kinds to run, in registry order for ``all``."""
        return list(ATTACK_KINDS) if self.attacks == "all" else list(self.attacks)


class PrivacyAuditConfig(Strict):
    """Defaults of ``biasleak audit FILE`` (:mod:`biasleak.sim.privacy_audit`), which runs the
    scenario's release many times on its audit set and on neighbouring ones and bounds its
    privacy loss from below; its ``--trials`` and ``--canaries`` override these. With the block,
    ``biasleak run`` and ``biasleak redteam`` run the audit too and quote it in the verdict (as
    ``--audit`` does); sweeps and compare ignore it."""

    trials: int = Field(
        100_000,
        ge=4,
        le=10_000_000,
        description="releases per world for each audited pair (half choose the test, half "
        "measure it)",
    )
    canaries: int = Field(
        100,
        ge=1,
        le=100_000,
        description="canaries of each one-run audit (people with a coin attribute, or pairs a "
        "coin swaps), fewer when the audit set has fewer",
    )


class Scenario(Strict):
    """A whole scenario file."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="used in log file names")
    description: str = ""
    seed: int = Field(0, ge=0)
    horizon_days: float = Field(30.0, gt=0.0, allow_inf_nan=False)
    data: DataConfig
    model: ModelConfig = Field(default_factory=ModelConfig)
    developers: list[DeveloperConfig] = Field(min_length=1)
    compliance: ComplianceConfig = Field(default_factory=ComplianceConfig)
    auditor: AuditorConfig = Field(default_factory=AuditorConfig)
    red_team: RedTeamConfig | None = Field(
        None,
        description="run every applicable attack of the library against the policy (biasleak "
        "redteam; biasleak run prints its table too)",
    )
    privacy_audit: PrivacyAuditConfig | None = Field(
        None,
        exclude_if=lambda block: block is None,
        description="defaults of biasleak audit (trials, canaries); with it, biasleak run and "
        "redteam also run the audit and quote it in the verdict",
    )
    grid: dict[str, list[Any] | int] | None = Field(
        None,
        description="variations for biasleak sweep: dotted key paths to lists of values, and "
        "'seeds' (runs per combination); biasleak run ignores it",
    )
    limits: Limits = Field(
        default_factory=Limits,
        exclude_if=lambda limits: limits == Limits(),
        description="caps on the size of a run (events, log size, auditor visits, identities, "
        "candidates, ...); the defaults accept every shipped scenario",
    )

    @field_validator("developers")
    @classmethod
    def _unique_ids(cls, developers: list[DeveloperConfig]) -> list[DeveloperConfig]:
        ids = [d.id for d in developers]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"developer ids must be unique; repeated: {dup}")
        return developers

    @model_validator(mode="after")
    def _within_limits(self) -> Scenario:
        """Every cap of :attr:`limits`, each problem at the key that is too large."""
        problems = limit_problems(self)
        if problems:
            raise ValidationError.from_exception_data(
                "Scenario",
                [
                    InitErrorDetails(
                        type=PydanticCustomError("over_limit", "{message}", {"message": message}),
                        loc=loc,
                        input=value,
                    )
                    for loc, message, value in problems
                ],
            )
        return self


# -- hash and schema -----------------------------------------------------------------------------


def scenario_hash(scenario: Scenario) -> str:
    """SHA-256 of the resolved scenario (every default filled in), as canonical JSON."""
    text = json.dumps(scenario.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return text_digest(text)


def schema() -> dict[str, Any]:
    """JSON Schema of scenario files (an infinite default is written as the string "inf")."""
    return jsonable(Scenario.model_json_schema())
