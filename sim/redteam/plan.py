"""Red-team planning: which attacks apply to a policy, and how each one is configured.

The red team (:mod:`biasleak.sim.redteam`) judges a policy by every attack the library knows.
Before anything runs, this module turns each attack kind of the strategy registry
(:data:`~biasleak.sim.scenario.ATTACK_KINDS`) into a plan: the developer the attack becomes, or
the reason it cannot apply to this scenario. A plan only reads the scenario and the public data;
running the planned attacks is the red team's job.

Configuration of each attack
    When the scenario itself lists an attacker of that kind, the red team uses its configuration
    (the scenario's author tuned it); otherwise the kind's defaults, with what the policy tells:
    ``budget_aware`` plans with the noise stage's per-model epsilon and the smallest finite
    budget, ``metric_switching`` tries only the metrics the policy answers, ``decode_oracle``
    takes the public parameters of the oracle learner the compliance team offers and asks for as
    many games as the smallest finite budget affords (at most :data:`MAX_GAMES`).

Applicability
    An attack is not applicable, with the reason, when its configuration cannot be built, when it
    cannot start on the data (e.g. a label class too small for equal opportunity, no external
    sample for ``proxy_prior``), or when the first metric it asks for is one the policy does not
    answer. The first metric is found by building the attack on the public data and asking it for
    its first query, so no table of kinds needs updating when attacks are added. An attack whose
    first request is a fair-learning service (``probe_postprocessing``, ``decode_oracle``)
    applies exactly when the compliance team offers that service.

One world per attack
    Each applicable attack becomes a developer of its own organisation (so no organisation budget
    is shared), and :func:`world_of` gives the world it runs in: the scenario's honest developers
    and that one attacker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from biasleak.agents.services import SERVICE_KINDS
from biasleak.agents.strategies import (
    HONEST_KINDS,
    ISOLATED_KINDS,
    PROXY_KINDS,
    STRATEGIES,
    RequestService,
    Stop,
    StrategyConfig,
    Submit,
    Wait,
    build_strategies,
)
from biasleak.mechanisms.policy import Budget, Noise
from biasleak.sim.scenario import ATTACK_KINDS, DeveloperConfig, Scenario

__all__ = ["ORGANIZATION", "PROBE_STEPS", "AttackPlan", "plan_attacks", "world_of"]

ORGANIZATION = "redteam-{kind}"
"""Each attacker's organisation: its own, so no organisation budget is shared."""
PROBE_STEPS = 8
"""How many actions an attack may take (waits) before its first query when probing its metric."""
MAX_GAMES = 10
"""Most oracle-learner games ``decode_oracle`` asks for when a finite budget sets the count."""


@dataclass(frozen=True)
class AttackPlan:
    """One attack of the red team: the developer it becomes, or why it does not apply."""

    kind: str
    developer: DeveloperConfig | None
    """The attacker (None when not applicable)."""
    reason: str | None = None
    """Why the attack does not apply (None when it does)."""
    metric: str | None = None
    """The first metric it asks for, or the service for a service attack (None when not
    applicable)."""

    @property
    def applicable(self) -> bool:
        return self.developer is not None


def _policy_defaults(scenario: Scenario, kind: str) -> tuple[dict[str, Any], str | None]:
    """Configuration the policy implies for ``kind``, or the reason none can be given."""
    stages = scenario.compliance.policy
    if kind == "budget_aware":
        noise = next((s for s in stages if isinstance(s, Noise)), None)
        if noise is None or noise.mechanism == "exact" or math.isinf(noise.epsilon):
            return {}, "answers are exact: there is no per-model epsilon to plan a budget with"
        if noise.per != "model":
            return {}, "it plans per-model epsilons; the noise stage charges per batch"
        budgets = [s.epsilon for s in stages if isinstance(s, Budget)]
        finite = [b for b in budgets if math.isfinite(b)]
        if not finite:
            return {}, "the policy has no finite privacy budget to plan with"
        return {"epsilon_per_model": noise.epsilon, "budget": min(finite)}, None
    if kind == "metric_switching":
        config_cls = STRATEGIES[kind][0]
        tried = list(config_cls.model_fields["metrics"].get_default(call_default_factory=True))
        answered = [m for m in tried if m in scenario.compliance.metrics]
        if not answered:
            return {}, (
                f"it attacks through {tried}; the policy answers only "
                f"{list(scenario.compliance.metrics)}"
            )
        return {"metrics": answered}, None
    if kind == "decode_oracle":
        oracle = next(
            (s for s in scenario.compliance.services if s.kind == "dp_oracle_learner"), None
        )
        if oracle is None:
            return {}, "the compliance team offers no dp_oracle_learner service"
        public = ("learner", "bound", "gamma", "accountant", "min_cell_size")
        extra: dict[str, Any] = {k: getattr(oracle, k) for k in public}
        budgets = [s.epsilon for s in stages if isinstance(s, Budget) and math.isfinite(s.epsilon)]
        if budgets and math.isfinite(oracle.epsilon):  # as many games as the budget affords
            extra["requests"] = max(1, min(MAX_GAMES, int(min(budgets) // oracle.epsilon)))
        return extra, None
    return {}, None


def _config(scenario: Scenario, kind: str) -> tuple[StrategyConfig | None, str | None]:
    """The scenario's own configuration of ``kind``, or the defaults the policy implies."""
    own = next((d.strategy for d in scenario.developers if d.strategy.kind == kind), None)
    if own is not None:
        return own, None
    extra, reason = _policy_defaults(scenario, kind)
    if reason is not None:
        return None, reason
    config_cls = STRATEGIES[kind][0]
    try:
        return config_cls(kind=kind, **extra), None
    except ValidationError as err:
        needed = sorted({str(e["loc"][0]) for e in err.errors() if e["loc"]})
        return None, (
            f"it needs configuration ({', '.join(needed)}); list an attacker of kind {kind!r} "
            "in the scenario's developers to give it one"
        )


def _first_metric(
    scenario: Scenario, identity: str, config: StrategyConfig
) -> tuple[str | None, str]:
    """Build the attack on the public data and ask for its first query: (metric, or None and
    why it cannot start)."""
    from biasleak.sim.world import developer_context

    context = developer_context(scenario, identity, config.kind)  # type: ignore[attr-defined]
    if config.kind in PROXY_KINDS and context.proxy is None:  # type: ignore[attr-defined]
        return None, (
            "it needs an external labelled sample, and this data set has none (its training "
            "split holds the audit people)"
        )
    try:
        strategy = build_strategies(config, context, identity)[0][1]
        now = 0.0
        for _ in range(PROBE_STEPS):
            action = strategy.next_action(now)
            if isinstance(action, Submit):
                return action.metric, ""
            if isinstance(action, RequestService):
                return action.service, ""
            if isinstance(action, Stop):
                return None, f"it stops before asking anything ({action.reason})"
            if isinstance(action, Wait):
                now = max(now, action.until)
    except Exception as err:  # an attack that cannot start on this data
        return None, f"it cannot start on this data ({type(err).__name__}: {err})"
    return None, f"it asks nothing in its first {PROBE_STEPS} actions"


def _identity(scenario: Scenario, kind: str) -> str:
    taken = {d.id for d in scenario.developers}
    identity = kind
    while identity in taken or any(t.startswith(f"{identity}.") for t in taken):
        identity = f"redteam-{identity}"
    return identity


def plan_attacks(scenario: Scenario, kinds: list[str] | None = None) -> list[AttackPlan]:
    """Which attacks apply to the scenario, each as the developer it becomes, or why not.

    ``kinds`` defaults to the scenario's ``red_team.attacks`` (every attack kind without one).
    """
    if kinds is None:
        kinds = scenario.red_team.kinds() if scenario.red_team is not None else list(ATTACK_KINDS)
    unknown = [k for k in kinds if k not in ATTACK_KINDS and k not in ISOLATED_KINDS]
    if unknown:
        raise ValueError(f"unknown attack kinds {unknown}; allowed: {list(ATTACK_KINDS)}")
    answered = list(scenario.compliance.metrics)
    offered = [s.kind for s in scenario.compliance.services]
    plans = []
    for kind in kinds:
        config, reason = _config(scenario, kind)
        if config is None:
            plans.append(AttackPlan(kind, None, reason))
            continue
        identity = _identity(scenario, kind)
        metric, why = _first_metric(scenario, identity, config)
        if metric is None:
            plans.append(AttackPlan(kind, None, why))
        elif metric in SERVICE_KINDS and metric not in offered:
            plans.append(
                AttackPlan(
                    kind, None, f"it asks for the service {metric!r}; the policy offers {offered}"
                )
            )
        elif metric not in answered and metric not in SERVICE_KINDS:
            plans.append(
                AttackPlan(
                    kind, None, f"it asks for metric {metric!r}; the policy answers {answered}"
                )
            )
        else:
            developer = DeveloperConfig(
                id=identity, organization=ORGANIZATION.format(kind=kind), strategy=config
            )
            plans.append(AttackPlan(kind, developer, None, metric))
    return plans


def world_of(scenario: Scenario, plan: AttackPlan) -> Scenario:
    """The world one attack runs in: the scenario's honest developers and that attacker."""
    if plan.developer is None:
        raise ValueError(f"attack {plan.kind!r} does not apply: {plan.reason}")
    honest = [d for d in scenario.developers if d.strategy.kind in HONEST_KINDS]
    return scenario.model_copy(
        update={
            "name": f"{scenario.name}.redteam.{plan.kind}",
            "developers": [*honest, plan.developer],
            "red_team": None,
            "grid": None,
        }
    )
