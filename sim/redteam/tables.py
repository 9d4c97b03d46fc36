"""Red-team tables: the red team's findings and the strongest attack per policy, as text.

:func:`format_red_team` prints one red team's result
(:class:`~biasleak.sim.redteam.RedTeamResult`): the strongest attack first, then one line per
attack with its leakage, the ceiling its answers prove, what it was answered and refused, the
privacy loss it spent, the error of the answers and how often the honest developers still
deployed the fairest model; an attack that does not apply shows the reason.
:func:`format_strongest` prints, per policy, the strongest attack over several seeds (the rows
:func:`~biasleak.sim.redteam.strongest_over_runs` makes). Missing figures show as ``-`` and
infinite ones as ``inf``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from biasleak.sim.safety import CEILING_KEYS, policy_ceilings, safety

if TYPE_CHECKING:
    from biasleak.sim.redteam import RedTeamResult

__all__ = ["format_red_team", "format_strongest"]


def _f(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return format(value, spec)


def format_red_team(
    result: RedTeamResult,
    *,
    target: float | None = None,
    audit: dict[str, Any] | None = None,
) -> str:
    """The red team's findings as a table: the verdict (with the privacy audit's headline when
    one ran), the strongest attack, every attack."""
    best = result.strongest
    lines = [f"red team of scenario {result.scenario} (seed {result.seed})"]
    worst = policy_ceilings(result.attacks)
    leakage = None if best is None else best["leakage"]
    lines.append("verdict: " + safety(leakage, worst, target, public=result.public, audit=audit))
    if best is None:
        lines.append("strongest attack: none (no applicable attack made an estimate)")
    else:
        lines.append(
            f"strongest attack: {best['kind']}, leakage {best['leakage']:.1f}%, revealed "
            f"{_f(best.get('revealed'), 'd')} (ceilings: policy "
            f"{_pct(best.get('leakage_ceiling'))}, audit set {_pct(best.get('audit_set_ceiling'))}"
            f", answers {_pct(best.get('answers_ceiling'))})"
        )
    header = (
        f"{'attack':<22} {'leakage':>8} {'policy':>7} {'audit set':>9} {'answers':>7} "
        f"{'person':>7} {'revealed':>8} {'answered':>8} {'refused':>7} {'eps spent':>9} "
        f"{'median |err|':>12} {'honest agree':>12}  notes"
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
        policy, audit, answers = (_pct(r.get(k)) for k in CEILING_KEYS)
        lines.append(
            f"{name:<22} {leak:>8} {policy:>7} {audit:>9} {answers:>7} "
            f"{_pct(r.get('person_ceiling')):>7} {_f(r['revealed'], 'd'):>8} "
            f"{r['answered']:>8} {r['refused']:>7} {_f(r['epsilon_spent'], '.3g'):>9} "
            f"{_f(r['median_abs_error'], '.4g'):>12} {agree:>12}  {'; '.join(notes)}"
        )
    lines.append("* strongest attack (highest leakage; ties by people revealed)")
    lines.append(
        "ceilings: expected balanced accuracy no attacker that knows the group sizes can exceed "
        "with that attack's answers (policy: any audit set; audit set: any models on this one; "
        "answers: these answers); person: the most exposed person against an attacker who knows "
        "everyone else"
    )
    return "\n".join(lines)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}%"


def format_strongest(rows: list[dict[str, Any]], *, target: float | None = None) -> str:
    """Per policy, the strongest attack and its leakage, the three ceilings of its answers, and
    the verdict at ``target`` (when given)."""
    header = (
        f"{'scenario':<24} {'attacks of':<10} {'runs':>4} {'strongest attack':<32} "
        f"{'leakage %':>13} {'policy %':>8} {'audit set %':>11} {'answers %':>9}"
    )
    lines = ["strongest attack per policy", header, "-" * len(header)]
    for r in rows:
        leak = "-" if r["leakage"] is None else f"{r['leakage']:.1f} ± {r['leakage_sd'] or 0.0:.1f}"
        policy, audit, answers = ("-" if r.get(k) is None else f"{r[k]:.1f}" for k in CEILING_KEYS)
        lines.append(
            f"{r['scenario']:<24} {r['source']:<10} {r['runs']:>4} {r['attack'] or '-':<32} "
            f"{leak:>13} {policy:>8} {audit:>11} {answers:>9}"
        )
    if target is not None:
        lines.append("")
        lines += [
            f"{r['scenario']}: "
            + safety(r["leakage"], r, target, public=r.get("proxy_baseline_leakage"))
            for r in rows
        ]
    return "\n".join(lines)
