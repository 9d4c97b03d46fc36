"""Human-readable tables for run summaries and comparisons (leakage beside utility, always).

``compare_rows`` flattens several runs into tidy rows (one per run and developer, plus the
compliance agent's utility), ``aggregate`` averages them over seeds, and the ``format_*``
functions lay them out as fixed-width text.

Beside each leakage stand its ceilings (``biasleak.mechanisms.ceiling``): the expected balanced
accuracy no attacker that knows the group sizes can exceed, proved at three levels, the policy's
guarantee (any audit set), this audit set (any models) and these answers, and the per-person
bound of the most exposed person against an attacker who knows everyone else. A ceiling is marked
``*`` when it is the ``proxy_prior`` one (an attacker with side information) rather than the
``no_side_information`` one. A run table opens with the verdict those numbers support
(:func:`~biasleak.sim.safety.safety`). Leakage is never blank: a developer without an
estimate is scored at its prior guess (50%, or its proxy's) and its leakage is marked ``°``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from biasleak.sim.safety import CEILING_KEYS, person_bound, safety, worst_ceilings

__all__ = ["aggregate", "compare_rows", "format_compare", "format_routes", "format_run"]


def _f(value: Any, spec: str = ".1f", none: str = "-") -> str:
    if value is None:
        return none
    if isinstance(value, str):
        return value
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return format(value, spec)


def _ceiling(value: Any, kind: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}%" + ("*" if kind == "proxy_prior" else "")


def _refused(refused: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in refused.items()) if refused else "-"


def _person(d: dict[str, Any]) -> str:
    """The most exposed person's ceiling: at the answers level when known."""
    value = person_bound(d)
    return "-" if value is None else f"{value:.1f}%"


def _strongest_leakage(summary: dict[str, Any]) -> float | None:
    """The highest leakage of a run's attackers (developers that are not honest)."""
    from biasleak.agents.strategies import HONEST_KINDS

    values = [
        d["leakage"]
        for d in summary["developers"].values()
        if d.get("strategy") not in HONEST_KINDS and d.get("leakage") is not None
    ]
    return max(values) if values else None


def format_run(
    summary: dict[str, Any],
    *,
    target: float | None = None,
    audit: dict[str, Any] | None = None,
) -> str:
    """The summary of one run as a table, opening with its verdict (at ``target``, percent; with
    the privacy audit's headline when one ran)."""
    lines = [f"scenario {summary['scenario']} (seed {summary['seed']})"]
    lines.append(
        "verdict: "
        + safety(
            _strongest_leakage(summary),
            worst_ceilings(summary),
            target,
            public=summary.get("proxy_baseline_leakage"),
            audit=audit,
        )
    )
    devs = summary["developers"]
    who = max([12, *(len(i) for i in devs)])
    kind = max([20, *(len(d["strategy"] or "-") for d in devs.values())])
    header = (
        f"{'developer':<{who}} {'strategy':<{kind}} {'leakage':>8} {'policy':>8} "
        f"{'audit set':>9} {'answers':>8} {'person':>7} {'revealed':>8} {'sent':>6} "
        f"{'answered':>8} {'eps spent':>10} {'to 90%':>7}  notes"
    )
    lines += [header, "-" * len(header)]
    for ident, d in summary["developers"].items():
        notes = [f"refused {_refused(d['refused'])}"] if d["refused"] else []
        if d["strategy"] == "honest_selection":
            agree = {True: "agrees with exact", False: "differs from exact", None: "-"}[
                d.get("deployed_agrees")
            ]
            notes.append(
                f"deployed {_f(d.get('deployed'), 'd')} ({agree}), metric error "
                + _f(d.get("metric_error"), ".4f")
            )
        service = d.get("service")
        if service:
            treatment = ", needs the attribute" if service.get("disparate_treatment") else ""
            notes.append(
                f"{service.get('service')}: error {_f(service.get('error'), '.3f')}, EO "
                f"violation {_f(service.get('eo_violation'), '.3f')} (base "
                f"{_f(service.get('base_error'), '.3f')} / "
                f"{_f(service.get('base_eo_violation'), '.3f')}){treatment}"
            )
        if d.get("error"):
            notes.append(f"error: {d['error']}")
        tail = "; ".join(notes) or "-"
        leak = _f(d["leakage"], ".1f") + ("%" if d["leakage"] is not None else "")
        if d.get("estimated") is False:
            leak += "°"
        policy, audit, answers = (_ceiling(d.get(k), d.get("ceiling_kind")) for k in CEILING_KEYS)
        lines.append(
            f"{ident:<{who}} {d['strategy'] or '-':<{kind}} {leak:>8} {policy:>8} {audit:>9} "
            f"{answers:>8} {_person(d):>7} {_f(d['revealed'], 'd'):>8} {d['sent']:>6} "
            f"{d['answered']:>8} {_f(d['epsilon_spent'], '.3g'):>10} "
            f"{_f(d['queries_to_90'], 'd'):>7}  {tail}"
        )
    for org, o in (summary.get("organizations") or {}).items():
        loss = o.get("privacy_loss") or {}
        policy, audit, answers = (_ceiling(o.get(k), o.get("ceiling_kind")) for k in CEILING_KEYS)
        lines.append(
            f"organisation {org}: ceilings policy {policy}, audit set {audit}, answers "
            f"{answers}, person {_person(o)}; privacy loss epsilon "
            f"{_f(loss.get('epsilon'), '.3g')} at delta {_f(loss.get('delta'), '.0e')}"
        )
    lines.append(
        "ceilings: expected balanced accuracy no attacker that knows the group sizes can exceed "
        "(policy: any audit set; audit set: any models on this one; answers: these answers); "
        "person: the most exposed person against an attacker who knows everyone else. The "
        "audit-set and answers figures are the evaluator's: never shown to developers"
    )
    if any(d.get("ceiling_kind") == "proxy_prior" for d in summary["developers"].values()):
        lines.append("* proxy_prior ceiling (side information); others: no_side_information")
    if any(d.get("estimated") is False for d in summary["developers"].values()):
        lines.append("° no estimate: scored at the prior guess")
    c = summary["compliance"]
    lines.append(
        f"compliance: answered {c['answered']} models, refused {_refused(c['refused'])}; "
        f"epsilon charged {_f(c['epsilon_spent'], '.4g')}; |answer - exact| mean "
        f"{_f(c['mean_abs_error'], '.4g')}, median {_f(c['median_abs_error'], '.4g')}"
    )
    if summary.get("routes"):
        lines += ["", *format_routes(summary["routes"]), ""]
    a = summary["auditor"]
    if a["enabled"]:
        detail = ", ".join(f"{k} {v}" for k, v in a["alerts_by_detector"].items())
        lines.append(f"auditor: {a['alerts']} alert(s)" + (f" ({detail})" if detail else ""))
    if "log" in summary:
        lines.append(f"log: {summary['log']}")
    return "\n".join(lines)


def format_routes(rows: list[dict[str, Any]]) -> list[str]:
    """The routes to a fair model side by side: what the honest side got, what the attack side
    leaked, and the ceiling its privacy loss proves (a run's ``routes``)."""
    header = (
        f"{'route':<18} {'deployed by':<12} {'error':>6} {'EO viol.':>8} {'eps':>6} "
        f"{'needs A':>7}  {'attacker':<10} {'leakage':>8} {'ceiling':>8}"
    )
    lines = ["routes to a fair model (error and EO violation on people outside the audit set)"]
    lines += [header, "-" * len(header)]
    for r in rows:
        treatment = {True: "yes", False: "no", None: "-"}[r.get("disparate_treatment")]
        leak = _f(r.get("leakage"), ".1f") + ("%" if r.get("leakage") is not None else "")
        lines.append(
            f"{r['route']:<18} {', '.join(r['deployed_by']) or '-':<12} "
            f"{_f(r.get('error'), '.3f'):>6} {_f(r.get('eo_violation'), '.3f'):>8} "
            f"{_f(r.get('epsilon_spent'), '.3g'):>6} {treatment:>7}  "
            f"{r.get('attacker') or '-':<10} "
            f"{leak:>8} {_ceiling(r.get('leakage_ceiling'), r.get('ceiling_kind')):>8}"
        )
    return lines


def compare_rows(results: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One tidy row per (run, developer) with the run's compliance utility beside it."""
    rows = []
    for label, s in results:
        c = s["compliance"]
        for ident, d in s["developers"].items():
            rows.append(
                {
                    "scenario": label,
                    "seed": s["seed"],
                    "developer": ident,
                    "strategy": d["strategy"],
                    "leakage": _leakage(d, s),
                    "estimated": d.get("estimated", d["leakage"] is not None),
                    **{key: d.get(key) for key in CEILING_KEYS},
                    "ceiling_kind": d.get("ceiling_kind"),
                    "revealed": d["revealed"],
                    "sent": d["sent"],
                    "answered": d["answered"],
                    "refused": sum(d["refused"].values()),
                    "epsilon_spent": d["epsilon_spent"],
                    "queries_to_90": d["queries_to_90"],
                    "deployed_agrees": d.get("deployed_agrees"),
                    "metric_error": d.get("metric_error"),
                    "compliance_mean_abs_error": c["mean_abs_error"],
                    "compliance_median_abs_error": c["median_abs_error"],
                    "alerts": s["auditor"]["alerts"],
                    "log": s.get("log"),
                }
            )
    return rows


def _leakage(d: dict[str, Any], summary: dict[str, Any]) -> float:
    """A developer's leakage, never blank: a summary without an estimate scores the prior guess."""
    if d["leakage"] is not None:
        return float(d["leakage"])
    baseline = summary.get("proxy_baseline_leakage")
    if d.get("ceiling_kind") == "proxy_prior" and baseline is not None:
        return float(baseline)
    return 50.0


def _mean_sd(values: list[Any]) -> tuple[float | None, float | None]:
    nums = [float(v) for v in values if v is not None and not isinstance(v, str)]
    if not nums:
        return None, None
    return statistics.fmean(nums), (statistics.stdev(nums) if len(nums) > 1 else 0.0)


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Average the tidy rows over seeds, per (scenario, developer)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["scenario"], r["developer"])].append(r)
    out = []
    for (scenario, developer), rs in groups.items():
        leak, leak_sd = _mean_sd([r["leakage"] for r in rs])
        agrees = [r["deployed_agrees"] for r in rs if r["deployed_agrees"] is not None]
        eps = [r["epsilon_spent"] for r in rs]
        out.append(
            {
                "scenario": scenario,
                "developer": developer,
                "strategy": rs[0]["strategy"],
                "runs": len(rs),
                "leakage": leak,
                "leakage_sd": leak_sd,
                **{key: _mean_sd([r.get(key) for r in rs])[0] for key in CEILING_KEYS},
                "ceiling_kind": rs[0].get("ceiling_kind"),
                "answered": _mean_sd([r["answered"] for r in rs])[0],
                "refused": _mean_sd([r["refused"] for r in rs])[0],
                "epsilon_spent": "inf" if "inf" in eps else _mean_sd(eps)[0],
                "agreement": (sum(agrees) / len(agrees)) if agrees else None,
                "metric_error": _mean_sd([r["metric_error"] for r in rs])[0],
                "median_abs_error": _mean_sd([r["compliance_median_abs_error"] for r in rs])[0],
                "alerts": _mean_sd([r["alerts"] for r in rs])[0],
            }
        )
    return out


def format_compare(rows: list[dict[str, Any]]) -> str:
    """Aggregated comparison rows as a table: leakage and utility side by side."""
    header = (
        f"{'scenario':<24} {'developer':<10} {'runs':>4} {'leakage %':>13} {'policy %':>8} "
        f"{'audit set %':>11} {'answers %':>9} {'answered':>8} "
        f"{'refused':>7} {'eps spent':>9} {'honest agree':>12} {'median |err|':>12} {'alerts':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        leak = "-" if r["leakage"] is None else f"{r['leakage']:.1f} ± {r['leakage_sd']:.1f}"
        agree = "-" if r["agreement"] is None else f"{100 * r['agreement']:.0f}%"
        err = _f(r["median_abs_error"], ".4g")
        policy, audit, answers = (
            _ceiling(r.get(k), r.get("ceiling_kind")).rstrip("%") for k in CEILING_KEYS
        )
        lines.append(
            f"{r['scenario']:<24} {r['developer']:<10} {r['runs']:>4} {leak:>13} {policy:>8} "
            f"{audit:>11} {answers:>9} {_f(r['answered'], '.0f'):>8} {_f(r['refused'], '.0f'):>7} "
            f"{_f(r['epsilon_spent'], '.3g'):>9} {agree:>12} {err:>12} "
            f"{_f(r['alerts'], '.1f'):>6}"
        )
    return "\n".join(lines)
