"""The red team: a policy judged by the strongest attack the library knows.

A scenario lists the attackers its author thought of; a compliance officer needs the verdict
against every attack. The red team takes every attack kind of the strategy registry
(:data:`~biasleak.sim.scenario.ATTACK_KINDS`: the registry without the honest strategies, so a new
attack joins the red team by being registered), decides which of them can apply to the scenario's
policy and data, and runs each applicable one against the scenario's policy.

One world per attack
    Each attack runs in its own world: the scenario with its honest developers (so utility is
    still measured) and that one attacker, a developer of its own organisation. No budget, rate
    limit or cache is shared between attacks, the auditor (when enabled) sees each attacker as
    it would in a normal run, and the worlds are independent runs that an executor (a process
    pool, or Dask) can run in parallel; the results do not depend on how they were run. Every
    world uses the scenario's seed, and every role has its own random stream
    (:func:`~biasleak.sim.world.rng_for`), so the honest developers draw the same candidates in
    every world.

Configuration of each attack
    When the scenario itself lists an attacker of that kind, the red team uses its configuration
    (the scenario's author tuned it); otherwise the kind's defaults, with what the policy tells:
    ``budget_aware`` plans with the noise stage's per-model epsilon and the smallest finite
    budget, ``metric_switching`` tries only the metrics the policy answers.

Applicability
    An attack is not applicable, with the reason, when its configuration cannot be built, when it
    cannot start on the data (e.g. a label class too small for equal opportunity, no external
    sample for ``proxy_prior``), or when the first metric it asks for is one the policy does not
    answer. The first metric is found by building the attack on the public data and asking it for
    its first query, so no table of kinds needs updating when attacks are added.

The verdict
    The strongest attack is the one with the highest leakage (balanced accuracy of its estimate,
    ties broken by the people it has right); beside each attack's leakage the result shows its
    ``leakage_ceiling`` when the run summary carries one: the bound on any attacker's balanced
    accuracy that the privacy loss of its answers proves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from biasleak.agents.strategies import (
    ISOLATED_KINDS,
    PROXY_KINDS,
    STRATEGIES,
    Stop,
    StrategyConfig,
    Submit,
    Wait,
    build_strategies,
)
from biasleak.mechanisms.policy import Budget, Noise
from biasleak.sim.scenario import ATTACK_KINDS, NOT_ATTACKS, DeveloperConfig, Scenario

__all__ = [
    "AttackPlan",
    "RedTeamResult",
    "format_red_team",
    "format_strongest",
    "plan_attacks",
    "run_red_team",
    "scenario_attacks",
    "strongest",
    "strongest_over_runs",
    "world_of",
]

ORGANIZATION = "redteam-{kind}"
"""Each attacker's organisation: its own, so no organisation budget is shared."""
PROBE_STEPS = 8
"""How many actions an attack may take (waits) before its first query when probing its metric."""


@dataclass(frozen=True)
class AttackPlan:
    """One attack of the red team: the developer it becomes, or why it does not apply."""

    kind: str
    developer: DeveloperConfig | None
    """The attacker (None when not applicable)."""
    reason: str | None = None
    """Why the attack does not apply (None when it does)."""
    metric: str | None = None
    """The first metric it asks for (None when not applicable)."""

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
        elif metric not in answered:
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
    honest = [d for d in scenario.developers if d.strategy.kind in NOT_ATTACKS]
    return scenario.model_copy(
        update={
            "name": f"{scenario.name}.redteam.{plan.kind}",
            "developers": [*honest, plan.developer],
            "red_team": None,
            "grid": None,
        }
    )


def _run_world(world: dict[str, Any], seed: int, log_dir: str) -> dict[str, Any]:
    """Run one red-team world (in a worker process); return its summary."""
    from biasleak.sim.world import run_scenario

    return run_scenario(Scenario.model_validate(world), seed=seed, log_dir=log_dir).summary


@dataclass(frozen=True)
class RedTeamResult:
    """What the red team found."""

    scenario: str
    seed: int
    attacks: list[dict[str, Any]]
    """One record per attack, in the order run: ``kind``, ``applicable``, and either ``reason``
    or the attack's figures (``leakage``, ``revealed``, ``leakage_ceiling``, ``answered``, ...)
    with the utility measured in its world."""
    strongest: dict[str, Any] | None = field(default=None)
    """The record of the strongest applicable attack (None when no attack has an estimate)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "strongest": None
            if self.strongest is None
            else {
                k: self.strongest.get(k) for k in ("kind", "leakage", "revealed", "leakage_ceiling")
            },
            "attacks": self.attacks,
        }


def _record(plan: AttackPlan, summary: dict[str, Any]) -> dict[str, Any]:
    """An attack's figures from its world's summary (its best identity for several)."""
    assert plan.developer is not None
    me = plan.developer.id
    mine = {
        ident: d
        for ident, d in summary["developers"].items()
        if ident == me or ident.startswith(f"{me}.")
    }
    ranked = sorted(
        mine.items(),
        key=lambda item: (
            -(item[1].get("leakage") if item[1].get("leakage") is not None else -1.0),
            -(item[1].get("revealed") or 0),
            item[0],
        ),
    )
    best = ranked[0][1] if ranked else {}
    honest = {
        ident: {
            "deployed_agrees": d.get("deployed_agrees"),
            "metric_error": d.get("metric_error"),
        }
        for ident, d in summary["developers"].items()
        if d.get("strategy") in NOT_ATTACKS
    }
    compliance = summary.get("compliance", {})
    return {
        "kind": plan.kind,
        "applicable": True,
        "metric": plan.metric,
        "developers": sorted(mine),
        "leakage": best.get("leakage"),
        "revealed": best.get("revealed"),
        "leakage_ceiling": best.get("leakage_ceiling"),
        "sent": sum(d.get("sent", 0) for d in mine.values()),
        "answered": sum(d.get("answered", 0) for d in mine.values()),
        "refused": sum(sum((d.get("refused") or {}).values()) for d in mine.values()),
        "epsilon_spent": _total([d.get("epsilon_spent") for d in mine.values()]),
        "stopped": best.get("stopped"),
        "error": best.get("error"),
        "median_abs_error": compliance.get("median_abs_error"),
        "honest": honest,
        "alerts": summary.get("auditor", {}).get("alerts"),
        "log": summary.get("log"),
    }


def _total(values: list[Any]) -> float | str | None:
    """Sum of epsilons spent by an attack's identities ("inf" once any was answered exactly)."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    if any(isinstance(v, str) or math.isinf(v) for v in known):
        return "inf"
    return float(sum(known))


def strongest(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The record with the highest leakage, ties broken by the people revealed, then by the
    order given; records without a leakage are never the strongest."""
    scored = [r for r in records if r.get("applicable", True) and r.get("leakage") is not None]
    if not scored:
        return None
    return max(scored, key=lambda r: (float(r["leakage"]), float(r.get("revealed") or 0)))


def run_red_team(
    scenario: Scenario,
    *,
    seed: int | None = None,
    log_dir: str | Path = "logs",
    executor: Executor | None = None,
    kinds: list[str] | None = None,
    on_attack: Callable[[dict[str, Any]], None] | None = None,
) -> RedTeamResult:
    """Run every applicable attack against the scenario's policy, each in its own world.

    ``executor`` runs the worlds in parallel (any :class:`concurrent.futures.Executor`); without
    one they run here, one after another. The result is the same either way.
    """
    run_seed = scenario.seed if seed is None else int(seed)
    resolved = scenario.model_copy(update={"seed": run_seed})
    plans = plan_attacks(resolved, kinds)
    worlds = {p.kind: world_of(resolved, p).model_dump(mode="json") for p in plans if p.applicable}
    summaries: dict[str, dict[str, Any]] = {}
    if executor is None:
        for kind, world in worlds.items():
            summaries[kind] = _run_world(world, run_seed, str(log_dir))
    else:
        futures = {
            kind: executor.submit(_run_world, world, run_seed, str(log_dir))
            for kind, world in worlds.items()
        }
        summaries = {kind: future.result() for kind, future in futures.items()}
    records = []
    for plan in plans:
        if plan.applicable:
            record = _record(plan, summaries[plan.kind])
        else:
            record = {"kind": plan.kind, "applicable": False, "reason": plan.reason}
        records.append(record)
        if on_attack is not None:
            on_attack(record)
    return RedTeamResult(scenario.name, run_seed, records, strongest(records))


def _f(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return format(value, spec)


def format_red_team(result: RedTeamResult) -> str:
    """The red team's findings as a table: the strongest attack first, then every attack."""
    best = result.strongest
    lines = [f"red team of scenario {result.scenario} (seed {result.seed})"]
    if best is None:
        lines.append("strongest attack: none (no applicable attack made an estimate)")
    else:
        ceiling = best.get("leakage_ceiling")
        lines.append(
            f"strongest attack: {best['kind']}, leakage {best['leakage']:.1f}%, revealed "
            f"{_f(best.get('revealed'), 'd')}"
            + (f" (ceiling {_f(ceiling, '.1f')}%)" if ceiling is not None else "")
        )
    header = (
        f"{'attack':<22} {'leakage':>8} {'ceiling':>8} {'revealed':>8} {'answered':>8} "
        f"{'refused':>7} {'eps spent':>9} {'median |err|':>12} {'honest agree':>12}  notes"
    )
    lines += [header, "-" * len(header)]
    for r in result.attacks:
        mark = "*" if best is not None and r["kind"] == best["kind"] else " "
        name = f"{mark}{r['kind']}"
        if not r["applicable"]:
            lines.append(f"{name:<22} {'not applicable':>17}  {r['reason']}")
            continue
        agrees = [h["deployed_agrees"] for h in r["honest"].values()]
        known = [a for a in agrees if a is not None]
        agree = f"{100 * sum(known) / len(known):.0f}%" if known else "-"
        notes = [f"metric {r['metric']}"]
        if r.get("stopped"):
            notes.append(f"stopped: {r['stopped']}")
        if r.get("error"):
            notes.append(f"error: {r['error']}")
        leak = "-" if r["leakage"] is None else f"{r['leakage']:.1f}%"
        ceiling = "-" if r.get("leakage_ceiling") is None else f"{r['leakage_ceiling']:.1f}%"
        lines.append(
            f"{name:<22} {leak:>8} {ceiling:>8} {_f(r['revealed'], 'd'):>8} "
            f"{r['answered']:>8} {r['refused']:>7} {_f(r['epsilon_spent'], '.3g'):>9} "
            f"{_f(r['median_abs_error'], '.4g'):>12} {agree:>12}  {'; '.join(notes)}"
        )
    lines.append("* strongest attack (highest leakage; ties by people revealed)")
    return "\n".join(lines)


# -- the strongest attack per policy, over seeds (compare and report) ------------------------------


def scenario_attacks(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The attack records of a normal run: one per developer that is not honest."""
    return [
        {
            "kind": d.get("strategy"),
            "name": f"{ident} ({d.get('strategy')})",
            "applicable": True,
            "leakage": d.get("leakage"),
            "revealed": d.get("revealed"),
            "leakage_ceiling": d.get("leakage_ceiling"),
        }
        for ident, d in summary.get("developers", {}).items()
        if d.get("strategy") not in NOT_ATTACKS
    ]


def _mean(values: list[Any]) -> float | None:
    nums = [float(v) for v in values if v is not None and not isinstance(v, str)]
    return sum(nums) / len(nums) if nums else None


def strongest_over_runs(
    label: str, runs: list[list[dict[str, Any]]], *, source: str
) -> dict[str, Any]:
    """The strongest attack of a policy over several runs (seeds).

    Each run is a list of attack records; an attack's leakage is its mean over the runs, and
    the strongest is the attack with the highest mean (ties: more people revealed on average).
    ``source`` says whose attacks they are (``"red team"`` or ``"scenario"``).
    """
    by_name: dict[str, list[dict[str, Any]]] = {}
    for records in runs:
        for r in records:
            if r.get("applicable", True):
                by_name.setdefault(str(r.get("name") or r["kind"]), []).append(r)
    pooled = [
        {
            "name": name,
            "leakage": _mean([r.get("leakage") for r in rs]),
            "revealed": _mean([r.get("revealed") for r in rs]),
            "leakage_ceiling": _mean([r.get("leakage_ceiling") for r in rs]),
            "leakage_values": [r.get("leakage") for r in rs],
        }
        for name, rs in by_name.items()
    ]
    best = strongest(pooled)
    values = [] if best is None else [v for v in best["leakage_values"] if v is not None]
    sd = None
    if len(values) > 1:
        m = sum(values) / len(values)
        sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))
    return {
        "scenario": label,
        "source": source,
        "runs": len(runs),
        "attack": None if best is None else best["name"],
        "leakage": None if best is None else best["leakage"],
        "leakage_sd": sd if sd is not None else (0.0 if values else None),
        "revealed": None if best is None else best["revealed"],
        "leakage_ceiling": None if best is None else best["leakage_ceiling"],
    }


def format_strongest(rows: list[dict[str, Any]]) -> str:
    """Per policy, the strongest attack and its leakage (the ceiling beside it when known)."""
    header = (
        f"{'scenario':<24} {'attacks of':<10} {'runs':>4} {'strongest attack':<32} "
        f"{'leakage %':>13} {'ceiling %':>9}"
    )
    lines = ["strongest attack per policy", header, "-" * len(header)]
    for r in rows:
        leak = "-" if r["leakage"] is None else f"{r['leakage']:.1f} ± {r['leakage_sd'] or 0.0:.1f}"
        ceiling = "-" if r["leakage_ceiling"] is None else f"{r['leakage_ceiling']:.1f}"
        lines.append(
            f"{r['scenario']:<24} {r['source']:<10} {r['runs']:>4} {r['attack'] or '-':<32} "
            f"{leak:>13} {ceiling:>9}"
        )
    return "\n".join(lines)
