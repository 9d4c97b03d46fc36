"""Actions on a running world: what a decision's option (or a policy inject) changes.

Policy actions (``set_budget``, ``scale_budget``, ``switch_mechanism``, ``set_rate_limit``,
``services_only``) change the compliance team's configuration: :func:`changed_compliance` edits a
copy of the scenario's ``compliance`` mapping and validates it with the scenario models, so a
change the policy's own rules forbid is caught when the exercise file is loaded. Answering only
through the services is a state of the configuration, not a one-off edit: a later budget, rate
or mechanism change keeps metric queries closed. Applied to a running world
(:class:`ActionContext`), the new policy is put in force through the compliance agent's own
:meth:`~biasleak.agents.compliance.Compliance.set_policy`, and the privacy ledgers carry over:
what was spent stays spent, against the new totals. A budget cut below what an organisation
already spent leaves its ledger full: every further release is refused. A policy action that
cannot apply to the policy in force (scaling a budget the policy does not have) is refused:
``policy_change_refused`` records it with the reason, and the world goes on.

The other actions act on the agents through their own methods: ``suspend`` and ``reinstate``
(the compliance agent's, which send the developers the notices an alert's suspension sends),
``auditor_on`` (the auditor starts and reads the whole query log at its first visit),
``on_alert`` (the reaction to later alerts), ``publish_audit`` (a private audit release of the
base model's selection rates, :meth:`~biasleak.agents.compliance.Compliance.publish`: through the
policy gate, charged to every reader's budget, on its own random stream so that publishing
changes no other draw) and ``message``.

Every action is one log event of the agent that carries it out (``policy_changed`` or
``policy_change_refused``, ``suspension_changed``, ``auditor_started``, ``reaction_changed``,
``audit_published`` with its internal twin ``audit_internal``, or ``publication_refused``,
``message_sent``), stamped with
the decision or inject that caused it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from pydantic import ValidationError

from biasleak.agents.publications import AuditPublication
from biasleak.mechanisms.policy import STAGES, Policy
from biasleak.sim.scenario import AuditorConfig, ComplianceConfig

__all__ = [
    "POLICY_ACTIONS",
    "ActionContext",
    "PolicyChangeError",
    "apply_action",
    "changed_compliance",
    "describe_policy",
    "services_only",
]

POLICY_ACTIONS: Final = frozenset(
    {"set_budget", "scale_budget", "switch_mechanism", "set_rate_limit", "services_only"}
)
"""Actions that change the compliance team's configuration."""


class PolicyChangeError(ValueError):
    """A policy action cannot apply to the policy (the message says why)."""


def _first_problem(err: ValidationError) -> str:
    """The first problem of an invalid policy, at its key path (the stage tags dropped)."""
    first = err.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    tags = {*STAGES, "function-after"}
    where = ".".join(str(p) for p in first["loc"] if p not in tags)
    return f"the policy would be invalid: {where}: {message}" if where else message


def changed_compliance(config: ComplianceConfig, action: Any) -> ComplianceConfig:
    """The compliance configuration after ``action`` (unchanged for non-policy actions).

    Raises :class:`PolicyChangeError` when the action cannot apply to ``config`` (no budget
    stage to scale, no service to answer through, a policy its own rules forbid). A
    configuration that answers only through the services stays so: the result of any later
    policy action on it answers no metric query either.
    """
    if action.kind not in POLICY_ACTIONS:
        return config
    model = _ServicesOnly if services_only(config) else ComplianceConfig
    data = config.model_dump(mode="python")
    stages: list[dict[str, Any]] = [dict(s) for s in data["policy"]]
    if action.kind in ("set_budget", "scale_budget"):
        budgets = [s for s in stages if s["kind"] == "budget"]
        if not budgets:
            if action.kind == "scale_budget":
                raise PolicyChangeError("the policy has no budget stage to scale")
            stages.append({"kind": "budget", "epsilon": action.epsilon, "scope": "organization"})
        for stage in budgets:
            new = (
                action.epsilon if action.kind == "set_budget" else stage["epsilon"] * action.factor
            )
            stage["epsilon"] = float(new)
    elif action.kind == "switch_mechanism":
        old = next((s for s in stages if s["kind"] == "noise"), None)
        stages = [s for s in stages if s["kind"] != "noise"]
        noise: dict[str, Any] = {"kind": "noise", "mechanism": action.mechanism}
        if action.mechanism != "exact":
            noise["epsilon"] = action.epsilon
        if action.delta is not None:
            noise["delta"] = action.delta
        if old is not None and "per" in old:
            noise["per"] = old["per"]
        stages.append(noise)
    elif action.kind == "set_rate_limit":
        stages = [s for s in stages if s["kind"] != "rate_limit"]
        stages.append({"kind": "rate_limit", "per_day": action.per_day, "scope": "organization"})
    elif action.kind == "services_only":
        if not data.get("services"):
            raise PolicyChangeError("services_only needs fair-learning services to answer through")
        # Metric queries refused with metric_not_allowed; the ComplianceConfig model wants a
        # metric, so the services-only configuration keeps the metrics and builds its policy
        # without them.
        model = _ServicesOnly
    data["policy"] = stages
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise PolicyChangeError(_first_problem(err)) from None


class _ServicesOnly(ComplianceConfig):
    """A compliance configuration that answers no metric query, only the services."""

    def build_policy(self) -> Policy:
        return Policy((), tuple(self.policy), self.max_models)


def services_only(config: ComplianceConfig) -> bool:
    """Whether ``config`` answers only through the fair-learning services (no metric query)."""
    return isinstance(config, _ServicesOnly)


def describe_policy(config: ComplianceConfig) -> list[str]:
    """The policy in words, one line per stage (what every role may read)."""
    metrics = (
        "none (fair-learning services only)"
        if services_only(config)
        else (", ".join(config.metrics))
    )
    lines = [f"metrics answered: {metrics}"]
    for stage in config.policy:
        fields = stage.model_dump(mode="json", exclude={"kind"})
        shown = ", ".join(f"{k}={v}" for k, v in sorted(fields.items()))
        lines.append(f"{stage.kind}: {shown}")
    for service in config.services:
        lines.append(f"service {service.kind}: epsilon={service.epsilon:g}")
    if len(lines) == 1:
        lines.append("no stages: exact answers without limits")
    return lines


@dataclass
class ActionContext:
    """What applying an action needs: the world, the current configuration, the loggers."""

    world: Any
    """The running :class:`biasleak.sim.world.World`."""
    config: ComplianceConfig
    """The compliance configuration in force (replaced by policy actions)."""
    audit_rng: np.random.Generator
    """The audit releases' own random stream."""
    facilitator_log: Any
    """The exercise's logger (messages)."""


def apply_action(ctx: ActionContext, action: Any, *, cause: str) -> None:
    """Apply ``action`` to the running world; ``cause`` is the decision or inject id logged."""
    compliance = ctx.world.agents.compliance
    log = compliance.log
    if action.kind in POLICY_ACTIONS:
        try:
            new_config = changed_compliance(ctx.config, action)
        except PolicyChangeError as err:
            # The file check lets through what an earlier decision could make possible; when
            # the decisions taken did not, the action is refused and the world goes on.
            log.info(
                "policy_change_refused",
                cause=cause,
                action=action.model_dump(mode="json"),
                reason=str(err),
            )
            return
        ctx.config = new_config
        compliance.set_policy(
            new_config.build_policy(),
            cause=cause,
            action=action.model_dump(mode="json"),
            policy=describe_policy(new_config),
        )
    elif action.kind in ("suspend", "reinstate"):
        kind = "suspended" if action.kind == "suspend" else "reinstated"
        change = compliance.suspend if action.kind == "suspend" else compliance.reinstate
        change(
            identity=None if action.organization else action.identity,
            organization=action.organization,
            detail=f"{kind} by the compliance team ({cause})",
            cause=cause,
        )
    elif action.kind == "auditor_on":
        if ctx.world.agents.auditor is not None:
            log.info("auditor_started", cause=cause, already_running=True)
            return
        config = AuditorConfig(
            enabled=True,
            every_hours=action.every_hours,
            detectors=list(action.detectors),
            on_alert=action.on_alert,
        )
        compliance.set_reaction(action.on_alert)
        ctx.world.start_auditor(config)
        log.info(
            "auditor_started",
            cause=cause,
            already_running=False,
            every_hours=action.every_hours,
            detectors=list(action.detectors),
            on_alert=action.on_alert,
        )
    elif action.kind == "on_alert":
        compliance.set_reaction(action.reaction, cause=cause)
    elif action.kind == "publish_audit":
        _publish_audit(ctx, action.epsilon, cause=cause)
    elif action.kind == "message":
        ctx.facilitator_log.info("message_sent", cause=cause, text=action.text, to=list(action.to))
    else:  # pragma: no cover - the models admit no other kind
        raise ValueError(f"unknown action kind {action.kind!r}")


def _publish_audit(ctx: ActionContext, epsilon: float, *, cause: str) -> None:
    """Publish the base model's selection rates per group, privately, through the compliance
    agent's gate (:class:`~biasleak.agents.publications.AuditPublication`, on the audit
    releases' own random stream)."""
    world = ctx.world
    publication = AuditPublication(epsilon, world.h0, ctx.audit_rng)
    world.agents.compliance.publish(publication, cause=cause)
