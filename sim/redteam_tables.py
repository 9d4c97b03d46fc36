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
