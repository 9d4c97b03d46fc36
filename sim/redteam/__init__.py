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

Planning
    Which attacks apply, how each is configured and the world each runs in are decided first,
    from the scenario and the public data alone (:mod:`biasleak.sim.redteam.plan`); the tables
    that print the findings are in :mod:`biasleak.sim.redteam.tables`.

The verdict
    The strongest attack is the one with the highest leakage (balanced accuracy of its estimate,
    ties broken by the people it has right); beside each attack's leakage the result shows the
    three ceilings of its answers (``leakage_ceiling``: the policy's guarantee;
    ``audit_set_ceiling``: this audit set, any models; ``answers_ceiling``: exactly these
    answers; an attack of several identities is judged by its organisation's) and the most
    exposed person's bound, and :func:`~biasleak.sim.safety.safety` turns them into a
    verdict at a target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasleak.agents.strategies import HONEST_KINDS
from biasleak.sim.executors import run_each
from biasleak.sim.redteam.plan import AttackPlan, plan_attacks, world_of
from biasleak.sim.redteam.tables import format_red_team, format_strongest
from biasleak.sim.safety import CEILING_KEYS, person_bound, policy_ceilings
from biasleak.sim.scenario import Scenario

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


def _run_named(
    kind: str, world: dict[str, Any], seed: int, log_dir: str
) -> tuple[str, dict[str, Any]]:
    """``(kind, summary)`` of one attack's world (a job of :func:`run_red_team`)."""
    return kind, _run_world(world, seed, log_dir)


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
    public: float | None = None
    """What the public data alone reveal (the worlds' proxy baseline), when known."""

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "strongest": None
            if self.strongest is None
            else {
                k: self.strongest.get(k)
                for k in ("kind", "leakage", "revealed", *CEILING_KEYS, "person_ceiling")
            },
            "attacks": self.attacks,
            "proxy_baseline_leakage": self.public,
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
    # an attack with several identities is judged by its organisation's ceilings (all its
    # answers together); a single identity's are its own
    org_name = best.get("organization")
    org = (summary.get("organizations") or {}).get(org_name) if len(mine) > 1 else None
    org = org or best
    honest = {
        ident: {
            "deployed_agrees": d.get("deployed_agrees"),
            "metric_error": d.get("metric_error"),
        }
        for ident, d in summary["developers"].items()
        if d.get("strategy") in HONEST_KINDS
    }
    compliance = summary.get("compliance", {})
    return {
        "kind": plan.kind,
        "applicable": True,
        "metric": plan.metric,
        "developers": sorted(mine),
        "leakage": best.get("leakage"),
        "revealed": best.get("revealed"),
        **{key: org.get(key) for key in CEILING_KEYS},
        "person_ceiling": person_bound(org),
        "ceiling_kind": org.get("ceiling_kind"),
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
        from biasleak.sim.world import warm_fits

        warm_fits(resolved)  # before the first submit forks the workers: they inherit them
        jobs = [(kind, world, run_seed, str(log_dir)) for kind, world in worlds.items()]
        run_each(executor, _run_named, jobs, keep=lambda done: summaries.update([done]))
        summaries = {kind: summaries[kind] for kind in worlds}  # in plan order
    records = []
    for plan in plans:
        if plan.applicable:
            record = _record(plan, summaries[plan.kind])
        else:
            record = {"kind": plan.kind, "applicable": False, "reason": plan.reason}
        records.append(record)
        if on_attack is not None:
            on_attack(record)
    baselines = [s.get("proxy_baseline_leakage") for s in summaries.values()]
    public = next((b for b in baselines if b is not None), None)
    return RedTeamResult(scenario.name, run_seed, records, strongest(records), public)


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
            **{key: d.get(key) for key in CEILING_KEYS},
            "person_ceiling": person_bound(d),
            "ceiling_kind": d.get("ceiling_kind"),
        }
        for ident, d in summary.get("developers", {}).items()
        if d.get("strategy") not in HONEST_KINDS
    ]


def _mean(values: list[Any]) -> float | None:
    nums = [float(v) for v in values if v is not None and not isinstance(v, str)]
    return sum(nums) / len(nums) if nums else None


def strongest_over_runs(
    label: str,
    runs: list[list[dict[str, Any]]],
    *,
    source: str,
    public: list[Any] | None = None,
) -> dict[str, Any]:
    """The strongest attack of a policy over several runs (seeds), and the policy's ceilings.

    Each run is a list of attack records; an attack's leakage is its mean over the runs, and
    the strongest is the attack with the highest mean (ties: more people revealed on average).
    The ceilings are the policy's, not that attack's: each level is the largest over the attacks
    without side information (each bounds only attackers with its own answers), and the attacks
    that start from a proxy model give ``proxy_ceiling``, their tightest level (the bound for an
    attacker with that side information). ``source`` says whose attacks they are (``"red
    team"`` or ``"scenario"``); ``public`` the runs' proxy baselines (what the public data alone
    reveal), averaged into ``proxy_baseline_leakage``.
    """
    by_name: dict[str, list[dict[str, Any]]] = {}
    for records in runs:
        for r in records:
            if r.get("applicable", True):
                by_name.setdefault(str(r.get("name") or r["kind"]), []).append(r)
    pooled = [
        {
            "name": name,
            "kind": rs[0].get("kind"),
            "ceiling_kind": rs[0].get("ceiling_kind"),
            "leakage": _mean([r.get("leakage") for r in rs]),
            "revealed": _mean([r.get("revealed") for r in rs]),
            **{key: _mean([r.get(key) for r in rs]) for key in (*CEILING_KEYS, "person_ceiling")},
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
        **policy_ceilings(pooled),
        "proxy_baseline_leakage": _mean(list(public or [])),
    }
