"""The pydantic models of an exercise file (``exercises/*.yaml``) and their JSON Schema.

A tabletop exercise (HSEEP practice) walks a room of people through a scenario as it unfolds. Its
file names, from top to bottom:

- ``name``, ``title``, ``description``: the exercise's identity (``name`` names its log);
- ``scenario``: the world to simulate, a path to a scenario file (relative to the exercise file)
  or the scenario written inline, validated like any scenario file;
- ``roles``: who is in the room (``facilitator`` is always there, and only the facilitator sees
  the ground truth: the evaluator's leakage);
- ``objectives``: what the exercise tests, each with an indicator computed from the run and the
  thresholds of the four HSEEP ratings: P (performed without challenges), S (performed with some
  challenges), M (performed with major challenges), U (unable to be performed);
- ``msel``: the master scenario events list, timed injects (``at_hours``) or injects on a
  condition (``when``). Some only carry a message to roles; others change the world: a developer
  joins, the policy changes;
- ``decision_points``: where the world pauses for a person (a time or a condition), what evidence
  each role sees there, and the options, each a list of actions on the running world (raise or
  cut a budget, switch mechanism, suspend an organisation, turn the auditor on, answer only
  through the fair-learning services, publish a private audit);
- ``decisions``: scripted answers (option, who decided, rationale), so that an exercise can run
  without a person and be replayed exactly.

Actions, conditions, indicators and injects are discriminated unions on ``kind``; every mapping
forbids unknown keys and every number must be a number (:class:`~biasleak.sim.scenario.Strict`).
What a single mapping cannot check (ids that refer to each other, roles that exist, options that
apply to the scenario's policy) is checked by :mod:`.loading`, each problem at its key path.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, model_validator

from biasleak.agents.auditor import DETECTORS
from biasleak.agents.compliance import ALERT_REACTIONS
from biasleak.mechanisms._tagged import tagged_union
from biasleak.mechanisms.release import MECHANISMS
from biasleak.sim.runlog import jsonable
from biasleak.sim.scenario import DeveloperConfig, Strict

__all__ = [
    "ACTIONS",
    "CONDITIONS",
    "EVIDENCE_KINDS",
    "GROUND_TRUTH_EVIDENCE",
    "INDICATORS",
    "INJECTS",
    "RATINGS",
    "ROLES",
    "Action",
    "Condition",
    "DecisionPoint",
    "Exercise",
    "Indicator",
    "Inject",
    "Objective",
    "Option",
    "ScriptedDecision",
    "Thresholds",
    "schema",
]

ROLES: Final[tuple[str, ...]] = (
    "facilitator",
    "compliance_lead",
    "model_owner",
    "auditor",
    "regulator",
)
"""The roles an exercise may seat; the facilitator is always there."""
RATINGS: Final[tuple[str, ...]] = ("P", "S", "M", "U")
"""HSEEP ratings, best first: performed without challenges, with some challenges, with major
challenges, unable to be performed."""
RATING_NAMES: Final[dict[str, str]] = {
    "P": "performed without challenges",
    "S": "performed with some challenges",
    "M": "performed with major challenges",
    "U": "unable to be performed",
}
EVIDENCE_KINDS: Final[tuple[str, ...]] = (
    "alerts",
    "epsilon",
    "queries",
    "refusals",
    "policy",
    "messages",
    "deployments",
    "audit",
    "leakage",
)
"""Evidence tables a decision point can show (see :mod:`.views`)."""
GROUND_TRUTH_EVIDENCE: Final[frozenset[str]] = frozenset({"leakage"})
"""Evidence computed from the protected attribute: the facilitator's alone."""
MESSAGE_CATEGORIES = Literal[
    "budget_request",
    "regulator_inquiry",
    "data_refresh",
    "press_report",
    "auditor_note",
    "briefing",
    "other",
]

Role = Literal[ROLES]  # type: ignore[valid-type]
Audience = list[Literal[(*ROLES, "all")]]  # type: ignore[misc]

# -- conditions ----------------------------------------------------------------------------------


class AlertCondition(Strict):
    """The auditor has raised ``count`` alerts (against ``organization``, when given)."""

    kind: Literal["alert"]
    count: int = Field(1, ge=1)
    organization: str | None = None


class LeakageCondition(Strict):
    """A developer's leakage (the evaluator's ground truth) reached ``percent``: the world
    notices a leak (a press report). Only the inject's own text reaches the roles."""

    kind: Literal["leakage_above"]
    percent: float = Field(gt=50.0, le=100.0, allow_inf_nan=False)
    developer: str | None = None


class EpsilonCondition(Strict):
    """An organisation (any, or ``organization``) was charged at least ``epsilon``."""

    kind: Literal["epsilon_above"]
    epsilon: float = Field(gt=0.0, allow_inf_nan=False)
    organization: str | None = None


class RefusalCondition(Strict):
    """The compliance team refused ``count`` models (for ``reason``, when given: one of the
    refusal codes of :data:`biasleak.agents.messages.REFUSAL_REASONS` the compliance team
    sends)."""

    kind: Literal["refusals_above"]
    count: int = Field(ge=1)
    reason: str | None = None


class AfterCondition(Strict):
    """Another inject or decision point of this exercise happened (``hours`` later)."""

    kind: Literal["after"]
    item: str
    hours: float = Field(0.0, ge=0.0, allow_inf_nan=False)


class DecidedCondition(Strict):
    """A decision was taken (with ``option``, when given)."""

    kind: Literal["decided"]
    decision: str
    option: str | None = None


CONDITIONS: Final[dict[str, type[Strict]]] = {
    "alert": AlertCondition,
    "leakage_above": LeakageCondition,
    "epsilon_above": EpsilonCondition,
    "refusals_above": RefusalCondition,
    "after": AfterCondition,
    "decided": DecidedCondition,
}
"""Condition kind -> model."""
Condition = tagged_union(CONDITIONS.values())


# -- actions on the running world ----------------------------------------------------------------


class SetBudget(Strict):
    """Set the epsilon of every budget stage (add an organisation budget when there is none).
    What was spent stays spent: a budget cut below it refuses every further release."""

    kind: Literal["set_budget"]
    epsilon: float = Field(gt=0.0, description="the new total (.inf: track without limit)")


class ScaleBudget(Strict):
    """Multiply the epsilon of every budget stage by ``factor`` (2: double, 0.5: halve)."""

    kind: Literal["scale_budget"]
    factor: float = Field(gt=0.0, allow_inf_nan=False)


class SwitchMechanism(Strict):
    """Answer with another noise mechanism from now on (``exact``: no noise)."""

    kind: Literal["switch_mechanism"]
    mechanism: Literal[tuple(MECHANISMS)]  # type: ignore[valid-type]
    epsilon: float = Field(gt=0.0, description="per model (.inf for exact)")
    delta: float | None = Field(None, gt=0.0, lt=1.0)


class SetRateLimit(Strict):
    """Allow ``per_day`` models per organisation and day (replaces any rate limit)."""

    kind: Literal["set_rate_limit"]
    per_day: int = Field(ge=1)


class _Targeted(Strict):
    """An action on one organisation or one identity (exactly one of the two)."""

    organization: str | None = None
    identity: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> _Targeted:
        if (self.organization is None) == (self.identity is None):
            raise ValueError("name exactly one of organization or identity")
        return self


class Suspend(_Targeted):
    """Refuse every query of an organisation or of one identity from now on."""

    kind: Literal["suspend"]


class Reinstate(_Targeted):
    """Lift a suspension."""

    kind: Literal["reinstate"]


class AuditorOn(Strict):
    """Start the external auditor now (it reads the whole query log at its first visit)."""

    kind: Literal["auditor_on"]
    every_hours: float = Field(24.0, gt=0.0, allow_inf_nan=False)
    detectors: list[Literal[tuple(DETECTORS)]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(DETECTORS)
    )
    on_alert: Literal[ALERT_REACTIONS] = "log_only"  # type: ignore[valid-type]


class OnAlert(Strict):
    """Change what the compliance team does with the auditor's alerts from now on."""

    kind: Literal["on_alert"]
    reaction: Literal[ALERT_REACTIONS]  # type: ignore[valid-type]


class ServicesOnly(Strict):
    """Answer only through the private fair-learning services: every metric query is refused
    (``metric_not_allowed``). Needs a scenario that offers services."""

    kind: Literal["services_only"]


class PublishAudit(Strict):
    """Publish the base model's selection rates per group and their difference (statistical
    parity). The accepted counts and the group sizes (secret, like every function of the
    protected attribute) are released together with Laplace noise, ``epsilon``-DP under the
    add/remove-one-record rule (:mod:`biasleak.mechanisms.audit`); when one person's attribute
    changes, the same release is ``2 epsilon``-DP. The rates divide the released counts by the
    released sizes."""

    kind: Literal["publish_audit"]
    epsilon: float = Field(gt=0.0, allow_inf_nan=False)


class SendMessage(Strict):
    """A message to roles (an answer to the regulator, a notice to the model owner)."""

    kind: Literal["message"]
    text: str = Field(min_length=1)
    to: Audience = Field(default_factory=lambda: ["all"])


ACTIONS: Final[dict[str, type[Strict]]] = {
    "set_budget": SetBudget,
    "scale_budget": ScaleBudget,
    "switch_mechanism": SwitchMechanism,
    "set_rate_limit": SetRateLimit,
    "suspend": Suspend,
    "reinstate": Reinstate,
    "auditor_on": AuditorOn,
    "on_alert": OnAlert,
    "services_only": ServicesOnly,
    "publish_audit": PublishAudit,
    "message": SendMessage,
}
"""Action kind -> model (what :mod:`.actions` knows how to apply)."""
Action = tagged_union(ACTIONS.values())


# -- indicators and objectives -------------------------------------------------------------------


class MaxLeakage(Strict):
    """The highest leakage any developer (or one of ``developers``) reached at any time, in
    percent (50: a coin flip). Lower is better. Ground truth."""

    kind: Literal["max_leakage"]
    developers: list[str] | None = None


class FinalLeakage(Strict):
    """The highest leakage at the end of the run, in percent. Lower is better. Ground truth."""

    kind: Literal["final_leakage"]
    developers: list[str] | None = None


class DeployHours(Strict):
    """Hours until the honest ``developer`` deployed a model: the candidate it picked from
    metric answers, or the model a fair-learning service delivered (never: unable). Lower is
    better."""

    kind: Literal["deploy_hours"]
    developer: str


class AlertResponseHours(Strict):
    """Hours from the auditor's first alert to the first decision taken at or after it (no
    alert, or no decision after it: unable). Lower is better."""

    kind: Literal["alert_response_hours"]


class EpsilonSpent(Strict):
    """The largest epsilon charged to one organisation (or to ``organization``). Lower is
    better."""

    kind: Literal["epsilon_spent"]
    organization: str | None = None


class AuditHours(Strict):
    """Hours until a private audit was published (never: unable). Lower is better."""

    kind: Literal["audit_published_hours"]


class AuditError(Strict):
    """|published - exact| of the first published audit's rate difference. Lower is better.
    Ground truth (the exact value is the compliance side's)."""

    kind: Literal["audit_error"]


class HonestRefused(Strict):
    """Models of honest developers (or of ``developers``) that were refused. Lower is better."""

    kind: Literal["honest_refused"]
    developers: list[str] | None = None


INDICATORS: Final[dict[str, type[Strict]]] = {
    "max_leakage": MaxLeakage,
    "final_leakage": FinalLeakage,
    "deploy_hours": DeployHours,
    "alert_response_hours": AlertResponseHours,
    "epsilon_spent": EpsilonSpent,
    "audit_published_hours": AuditHours,
    "audit_error": AuditError,
    "honest_refused": HonestRefused,
}
"""Indicator kind -> model (computed by :mod:`.indicators`; every one is lower-is-better)."""
Indicator = tagged_union(INDICATORS.values())


class Thresholds(Strict):
    """The largest indicator value that still earns each rating (lower is better):
    value <= P: P; <= S: S; <= M: M; above M (or no value): U."""

    P: float = Field(allow_inf_nan=False)
    S: float = Field(allow_inf_nan=False)
    M: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if not self.P <= self.S <= self.M:
            raise ValueError(
                f"thresholds must grow from P to S to M (lower is better); received "
                f"P={self.P:g}, S={self.S:g}, M={self.M:g}"
            )
        return self


class Objective(Strict):
    """One exercise objective: an indicator computed from the run, rated P/S/M/U."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    title: str = Field(min_length=1)
    capability: str = Field("Privacy protection", min_length=1)
    owner: Role = Field("compliance_lead", description="who owns corrective actions")
    indicator: Indicator
    thresholds: Thresholds
    recommendation: str = Field(
        "", description="what to do when the objective is not fully met (the report's default)"
    )


# -- the MSEL and decision points ----------------------------------------------------------------


class _Timed(Strict):
    """An item that happens at ``at_hours`` or when a condition first holds (one of the two)."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    at_hours: float | None = Field(
        None, ge=0.0, allow_inf_nan=False, description="simulated hours from the start"
    )
    when: Condition | None = None

    @model_validator(mode="after")
    def _one_time(self) -> _Timed:
        if (self.at_hours is None) == (self.when is None):
            raise ValueError("give exactly one of at_hours or when")
        return self


class MessageInject(_Timed):
    """A message shown to roles (a budget request, a regulator's inquiry, a press report...)."""

    kind: Literal["message"]
    category: MESSAGE_CATEGORIES = "other"  # type: ignore[valid-type]
    text: str = Field(min_length=1)
    to: Audience = Field(default_factory=lambda: ["all"])


class DeveloperJoins(_Timed):
    """A new developer identity starts querying (its strategy is the facilitator's secret)."""

    kind: Literal["developer_joins"]
    developer: DeveloperConfig
    text: str = ""
    to: Audience = Field(default_factory=lambda: ["all"])


class PolicyInject(_Timed):
    """A scripted change of the world (the same actions as a decision's options)."""

    kind: Literal["policy"]
    actions: list[Action] = Field(min_length=1)
    text: str = ""
    to: Audience = Field(default_factory=lambda: ["all"])


INJECTS: Final[dict[str, type[Strict]]] = {
    "message": MessageInject,
    "developer_joins": DeveloperJoins,
    "policy": PolicyInject,
}
"""Inject kind -> model."""
Inject = tagged_union(INJECTS.values())


class Option(Strict):
    """One answer at a decision point: a label, what it means, and what it does."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    label: str = Field(min_length=1)
    description: str = ""
    actions: list[Action] = Field(default_factory=list)


class DecisionPoint(_Timed):
    """Where the world pauses and a person (or the script) decides."""

    title: str = Field(min_length=1)
    prompt: str = ""
    owner: Role = Field("compliance_lead", description="the role expected to decide")
    evidence: dict[Role, list[Literal[EVIDENCE_KINDS]]] = Field(  # type: ignore[valid-type]
        default_factory=dict, description="role -> evidence tables it sees at this point"
    )
    options: list[Option] = Field(min_length=2)

    def option(self, option_id: str) -> Option | None:
        """The option called ``option_id``, or None."""
        return next((o for o in self.options if o.id == option_id), None)


class ScriptedDecision(Strict):
    """A decision taken in advance: which option, who took it, and why."""

    option: str = Field(min_length=1)
    by: Role = "facilitator"
    rationale: str = ""


class Exercise(Strict):
    """A whole exercise file."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="used in log file names")
    title: str = Field(min_length=1)
    description: str = ""
    scenario: str | dict[str, Any] = Field(
        description="a scenario file (relative to this file) or the scenario inline"
    )
    roles: list[Role] = Field(default_factory=lambda: list(ROLES))
    objectives: list[Objective] = Field(default_factory=list)
    msel: list[Inject] = Field(default_factory=list)
    decision_points: list[DecisionPoint] = Field(default_factory=list)
    decisions: dict[str, ScriptedDecision] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _facilitator(self) -> Exercise:
        if len(set(self.roles)) != len(self.roles):
            raise ValueError(f"roles lists a role twice: {self.roles}")
        if "facilitator" not in self.roles:
            self.roles = ["facilitator", *self.roles]
        return self

    def point(self, decision_id: str) -> DecisionPoint | None:
        """The decision point called ``decision_id``, or None."""
        return next((p for p in self.decision_points if p.id == decision_id), None)


class DecisionsFile(Strict):
    """A ``--decisions`` file: scripted decisions by decision point id."""

    decisions: dict[str, ScriptedDecision]


def schema() -> dict[str, Any]:
    """JSON Schema of exercise files (``biasleak exercise --schema``, ``exercises/schema.json``)."""
    return jsonable(Exercise.model_json_schema())
