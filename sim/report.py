"""Reports: what a sweep measured, as markdown tables and (with the ``plots`` extra) figures.

``biasleak report OUT... [--paper NAME] [--to DIR]``

Without ``--paper`` the report is the compliance officer's view of any sweep: one row per grid
point and developer with leakage (mean and spread over seeds, and the proxy-only baseline beside
it) and utility (the compliance team's median |answered - exact|, honest developers' metric error
and agreement with the exact-answer choice, the refusal rate), then figures: the leakage of the
strongest attacker against utility per grid point with the Pareto front marked, leakage over
simulated time and against the number of answered models per attack, and privacy budget spent
over time.

With ``--paper`` (``table1`` ... ``table4``, ``figure2``, ``figure3``) the report puts biasleak's
numbers beside the published ones (Hamman, Chen and Dutta 2023), with the run counts, and says
where they agree and where they do not. The paper's "Avg. SP err" is not defined precisely; the
report computes, from each run's log, the error of the attacker's batch of m answers under every
reading we tested: the mean and the median of ``|released - exact|`` per answer, the mean after
clamping released values to [-1, 1], the absolute mean of the signed errors, and the mean
divided by m.

Every report ends with the commands that remake it, read from each sweep folder's ``sweep.json``.
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from biasleak.sim.redteam import strongest_over_runs
from biasleak.sim.runlog import read_log
from biasleak.sim.scenario import NOT_ATTACKS
from biasleak.sim.sweep import RED_TEAM_PREFIX, SWEEP_FILE, iter_rows

__all__ = ["PAPER", "PAPER_FILES", "batch_errors", "write_report"]

PLOTS_MISSING = "figures need the optional extra: pip install 'biasleak[plots]' (matplotlib)"

# The paper's published numbers. Avg. SP err is in units of 1e-3, leakage in percent.
PAPER: dict[str, Any] = {
    "table1": {  # (n, m, eps) -> (err AC, err Lap, leak AC, leak Lap)
        (100, 25, 5.0): (10.9, 200.9, 50, 54),
        (100, 25, 10.0): (5.1, 112.6, 48, 49),
        (100, 25, 100.0): (0.05, 12.1, 58, 44),
        (100, 25, math.inf): (0, 0, 63, 63),
        (100, 40, 5.0): (77.9, 660.2, 55, 57),
        (100, 40, 10.0): (12.3, 236.8, 49, 43),
        (100, 40, 100.0): (0.7, 27.6, 67, 47),
        (100, 40, math.inf): (0, 0, 100, 100),
        (1000, 300, 5.0): (122.2, 874.5, 52, 49),
        (1000, 300, 10.0): (35.7, 160.8, 50, 51),
        (1000, 300, 100.0): (2.0, 11.5, 53, 51),
        (1000, 300, math.inf): (0, 0, 79, 79),
        (1000, 400, 5.0): (140.0, 893.4, 52, 49),
        (1000, 400, 10.0): (42.2, 216.3, 52, 52),
        (1000, 400, 100.0): (0.2, 54.4, 55, 49),
        (1000, 400, math.inf): (0, 0, 100, 100),
    },
    "table2": {  # (n, N0, m) -> (err, leak), Attribute-Conceal at eps = 100
        (1000, 10, 500): (128.8, 65),
        (1000, 10, 900): (191.4, 64),
        (1000, 50, 500): (90.8, 67),
        (1000, 50, 900): (156.3, 61),
        (1000, 100, 500): (87.4, 62),
        (1000, 100, 900): (102.9, 55),
        (1000, 200, 500): (51.9, 62),
        (1000, 200, 900): (96.7, 47),
        (1000, 300, 500): (38.9, 48),
        (1000, 300, 900): (59.9, 47),
        (1000, 400, 500): (41.6, 47),
        (1000, 400, 900): (54.5, 45),
        (10000, 50, 1000): (96.9, 64),
        (10000, 100, 1000): (76.9, 61),
        (10000, 500, 1000): (38.3, 59),
        (10000, 1000, 1000): (26.9, 59),
        (10000, 3000, 1000): (12.8, 55),
        (10000, 5000, 1000): (9.9, 48),
    },
    "table3": {  # (n, N0, eps) -> (err, leak), Attribute-Conceal
        (1000, 10, 10.0): (929, 49),
        (1000, 100, 10.0): (838, 51),
        (1000, 10, 50.0): (149.3, 65),
        (1000, 100, 50.0): (44.8, 55),
        (1000, 10, 100.0): (83, 71),
        (1000, 100, 100.0): (30.5, 56),
        (1000, 10, 500.0): (26.6, 75),
        (1000, 100, 500.0): (9.7, 53),
        (10000, 100, 10.0): (832.3, 51),
        (10000, 1000, 10.0): (678.4, 50),
        (10000, 100, 50.0): (46.5, 55),
        (10000, 1000, 50.0): (85.3, 52),
        (10000, 100, 100.0): (33.1, 55),
        (10000, 1000, 100.0): (47.4, 53),
        (10000, 100, 500.0): (31, 57),
        (10000, 1000, 500.0): (13.6, 56),
    },
    "table4": {  # (m, eps) -> (err, recovered people), German credit, Attribute-Conceal
        (800, 10.0): (133.7, 558),
        (1000, 10.0): (112.9, 492),
        (800, 100.0): (6.1, 557),
        (1000, 100.0): (6.3, 500),
        (800, 1000.0): (0.5, 657),
        (1000, 1000.0): (0.7, 516),
    },
    "figure2": {  # the recovery points the text and Table 1 give for exact answers
        (100, 25): 63,
        (100, 40): 100,
        (1000, 300): 79,
        (1000, 400): 100,
    },
}

ATTACKER = "mallory"


def _num(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def batch_errors(log: str | Path, developer: str = ATTACKER) -> dict[str, float] | None:
    """Errors of a developer's largest answered query (the attacker's batch of m models)."""
    best: dict[str, Any] | None = None
    for event in read_log(log):
        if event.get("event") == "release_internal" and event.get("sender") == developer:
            if best is None or len(event["exact"]) > len(best["exact"]):
                best = event
    if best is None:
        return None
    exact = [float(x) for x in best["exact"]]
    released = [_num(x) for x in best["released"]]
    pairs = [(r, x) for r, x in zip(released, exact, strict=True) if r is not None]
    if not pairs:
        return None
    diffs = [abs(r - x) for r, x in pairs]
    clamped = [abs(min(max(r, -1.0), 1.0) - x) for r, x in pairs]
    m = len(pairs)
    return {
        "mean": statistics.fmean(diffs),
        "median": statistics.median(diffs),
        "mean_clamped": statistics.fmean(clamped),
        "abs_mean_signed": abs(statistics.fmean(r - x for r, x in pairs)),
        "mean_over_m": statistics.fmean(diffs) / m,
        "m": float(m),
    }


def _stat(values: Iterable[float | None]) -> tuple[float | None, float | None, int]:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None, None, 0
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0), len(vals)


def _fmt(mean: float | None, sd: float | None, digits: int = 1) -> str:
    if mean is None:
        return "-"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


SUMMARY_KEYS = frozenset(
    {
        "run_id",
        "seed",
        "status",
        "error",
        "log",
        "wall_seconds",
        "proxy_baseline_leakage",
        "compliance.epsilon_spent",
        "compliance.answered",
        "compliance.refused",
        "compliance.mean_abs_error",
        "compliance.median_abs_error",
        "auditor.alerts",
    }
)


def _grid_keys(rows: list[dict[str, Any]]) -> list[str]:
    """The grid's dotted keys: every row key that is not a summary figure."""
    devs = tuple(f"{d}." for d in _developers(rows))
    keys: list[str] = []
    for row in rows:
        for key in row:
            if key in SUMMARY_KEYS or key in keys or (devs and key.startswith(devs)):
                continue
            if key.startswith(RED_TEAM_PREFIX):
                continue
            keys.append(key)
    return keys


def _developers(rows: list[dict[str, Any]]) -> list[str]:
    devs: list[str] = []
    for row in rows:
        for key in row:
            if (
                key.endswith(".leakage")
                and not key.startswith("compliance.")
                and not key.startswith(RED_TEAM_PREFIX)
            ):
                ident = key[: -len(".leakage")]
                if ident not in devs:
                    devs.append(ident)
    return devs


def _load(outs: list[str | Path]) -> list[dict[str, Any]]:
    rows = []
    for out in outs:
        path = Path(out)
        if not (path / "results.jsonl").exists():
            raise ValueError(f"{path} is not a sweep folder (no results.jsonl)")
        for row in iter_rows(path):
            if row.get("status") != "ok":
                continue
            if row.get("log") and not Path(row["log"]).is_absolute():
                row["log"] = str(path / row["log"])  # logs are kept relative to the sweep
            rows.append(row)
    if not rows:
        raise ValueError("no finished runs in " + ", ".join(str(o) for o in outs))
    return rows


def _header(rows: list[dict[str, Any]]) -> dict[str, Any]:
    first = next(iter(read_log(rows[0]["log"])))
    return first


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(fig: Any, to: Path, name: str) -> list[str]:
    import matplotlib

    paths = []
    # no date and fixed element ids in the SVG: the same runs give the same files
    with matplotlib.rc_context({"svg.hashsalt": "biasleak"}):
        for ext in ("png", "svg"):
            path = to / f"{name}.{ext}"
            metadata = None if ext == "png" else {"Date": None}
            fig.savefig(path, dpi=120, bbox_inches="tight", metadata=metadata)
            paths.append(path.name)
    return paths


# -- the generic sweep report ---------------------------------------------------------------------


def _sweep_report(outs: list[str | Path], to: Path) -> str:
    rows = _load(outs)
    keys = _grid_keys(rows)
    devs = _developers(rows)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(json.dumps(row.get(k)) for k in keys)].append(row)
    header = _header(rows)
    lines = [f"# Sweep report: {header.get('scenario')}", ""]
    lines.append(f"{len(rows)} finished runs from {', '.join(str(o) for o in outs)}.")
    lines += ["", "## Leakage and utility", ""]
    ceilings = any(r.get(f"{d}.leakage_ceiling") is not None for r in rows for d in devs)
    cols = [
        *keys,
        "developer",
        "runs",
        "leakage %",
        *(["ceiling %"] if ceilings else []),
        "proxy-only %",
        "refused %",
        "median \\|err\\|",
        "honest agree",
        "honest \\|err\\|",
    ]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    points = []
    ceiling_points: list[tuple[float, float | None]] = []
    verdicts: list[tuple[list[Any], int, dict[str, Any]]] = []

    def order(item: tuple[tuple[Any, ...], Any]) -> list[tuple[float, str]]:
        return [
            (_num(json.loads(c)) if _num(json.loads(c)) is not None else -math.inf, c)
            for c in item[0]
        ]

    for combo, rs in sorted(groups.items(), key=order):
        values = [json.loads(c) for c in combo]
        worst: tuple[float, float] | None = None  # (leakage, error) of the strongest attacker
        for dev in devs:
            leak = _stat(_num(r.get(f"{dev}.leakage")) for r in rs)
            proxy = _stat(_num(r.get("proxy_baseline_leakage")) for r in rs)
            refused = _stat(
                100.0
                * (_num(r.get(f"{dev}.refused")) or 0.0)
                / max(_num(r.get(f"{dev}.sent")) or 1.0, 1.0)
                for r in rs
            )
            err = _stat(_num(r.get("compliance.median_abs_error")) for r in rs)
            agree = [
                r.get(f"{dev}.deployed_agrees")
                for r in rs
                if r.get(f"{dev}.deployed_agrees") is not None
            ]
            honest_err = _stat(_num(r.get(f"{dev}.metric_error")) for r in rs)
            ceiling = _stat(_num(r.get(f"{dev}.leakage_ceiling")) for r in rs)
            lines.append(
                "| " + " | ".join(str(v) for v in values) + f" | {dev} | {len(rs)} | "
                f"{_fmt(leak[0], leak[1])} | "
                + (f"{_fmt(ceiling[0], ceiling[1])} | " if ceilings else "")
                + f"{_fmt(proxy[0], proxy[1])} | "
                f"{_fmt(refused[0], refused[1])} | {_fmt(err[0], err[1], 4)} | "
                + (f"{100 * sum(bool(a) for a in agree) / len(agree):.0f}%" if agree else "-")
                + f" | {_fmt(honest_err[0], honest_err[1], 4)} |"
            )
            if leak[0] is not None and err[0] is not None:
                worst = max(worst or (leak[0], err[0]), (leak[0], err[0]))
        verdict = _strongest(rs, devs)
        verdicts.append((values, len(rs), verdict))
        red_leak = verdict["leakage"] if verdict["source"] == "red team" else None
        err = _stat(_num(r.get("compliance.median_abs_error")) for r in rs)
        if red_leak is not None and err[0] is not None:
            worst = max(worst or (red_leak, err[0]), (red_leak, err[0]))
        if worst is not None:  # a policy is as leaky as the strongest attack against it
            points.append((worst[1], worst[0], json.dumps(values)))
            ceiling_points.append((worst[1], verdict["leakage_ceiling"]))
    lines += _strongest_table(keys, verdicts)
    figures = _sweep_figures(rows, keys, points, to, ceiling_points)
    if figures:
        lines += ["", "## Figures", ""]
        lines += [f"![{name}]({name})" for name in figures if name.endswith(".png")]
    elif _plt() is None:
        lines += ["", f"(No figures: {PLOTS_MISSING}.)"]
    lines += [
        "",
        "## Scenario",
        "",
        "```json",
        json.dumps(header.get("resolved_scenario"), indent=2, sort_keys=True),
        "```",
    ]
    return "\n".join(lines) + "\n"


def _strongest(rs: list[dict[str, Any]], devs: list[str]) -> dict[str, Any]:
    """The strongest attack of one grid point over its runs: the red team's when the runs have
    one, else among the scenario's attackers (developers that are not honest)."""
    red = [r for r in rs if r.get(f"{RED_TEAM_PREFIX}strongest") is not None]
    runs: list[list[dict[str, Any]]] = []
    if red:
        for r in red:
            kinds = {
                key[len(RED_TEAM_PREFIX) : -len(".leakage")]
                for key in r
                if key.startswith(RED_TEAM_PREFIX)
                and key.endswith(".leakage")
                and not key.startswith(f"{RED_TEAM_PREFIX}strongest")
            }
            runs.append(
                [
                    {
                        "kind": kind,
                        "leakage": _num(r.get(f"{RED_TEAM_PREFIX}{kind}.leakage")),
                        "revealed": _num(r.get(f"{RED_TEAM_PREFIX}{kind}.revealed")),
                        "leakage_ceiling": _num(r.get(f"{RED_TEAM_PREFIX}{kind}.leakage_ceiling")),
                    }
                    for kind in sorted(kinds)
                ]
            )
        return strongest_over_runs("", runs, source="red team")
    for r in rs:
        strategies = {d.get("id"): d.get("strategy") for d in _header([r]).get("developers", [])}
        runs.append(
            [
                {
                    "kind": strategies.get(dev),
                    "name": f"{dev} ({strategies.get(dev)})",
                    "leakage": _num(r.get(f"{dev}.leakage")),
                    "revealed": _num(r.get(f"{dev}.revealed")),
                    "leakage_ceiling": _num(r.get(f"{dev}.leakage_ceiling")),
                }
                for dev in devs
                if strategies.get(dev) is not None and strategies.get(dev) not in NOT_ATTACKS
            ]
        )
    return strongest_over_runs("", runs, source="scenario")


def _strongest_table(
    keys: list[str], verdicts: list[tuple[list[Any], int, dict[str, Any]]]
) -> list[str]:
    """Per grid point (policy), the strongest attack's name and leakage, the ceiling beside."""
    cols = [*keys, "runs", "attacks of", "strongest attack", "leakage %", "ceiling %"]
    lines = ["", "## Strongest attack per policy", ""]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for values, runs, v in verdicts:
        lines.append(
            "| "
            + " | ".join(str(x) for x in values)
            + (" | " if values else "")
            + f"{runs} | {v['source']} | {v['attack'] or '-'} | "
            f"{_fmt(v['leakage'], v['leakage_sd'])} | "
            + ("-" if v["leakage_ceiling"] is None else f"{v['leakage_ceiling']:.1f}")
            + " |"
        )
    lines.extend(["", gap_sentence(keys, verdicts)])
    return lines


WIDE_GAP: float = 20.0
"""Points between the proven ceiling and the strongest attack's leakage that a report calls wide."""


def gap_sentence(keys: list[str], verdicts: list[tuple[list[Any], int, dict[str, Any]]]) -> str:
    """Where the ceiling is far above the strongest attack: either the attacks could be stronger
    or the accounting looser than needed, and the policy's protection there is not proven."""
    wide = [
        (values, v)
        for values, _, v in verdicts
        if v["leakage_ceiling"] is not None
        and v["leakage"] is not None
        and v["leakage_ceiling"] - v["leakage"] > WIDE_GAP
    ]
    if not wide:
        return (
            f"**Ceiling and leakage.** At every policy the strongest attack is within {WIDE_GAP:g} "
            "points of the proven ceiling."
        )
    names = [k.rsplit(".", 1)[-1] for k in keys]
    where = "; ".join(
        (", ".join(f"{n}={x}" for n, x in zip(names, values, strict=True)) or "the scenario")
        + f" ({v['leakage']:.1f}% under a ceiling of {v['leakage_ceiling']:.1f}%)"
        for values, v in wide
    )
    return (
        f"**Ceiling and leakage.** The proven ceiling is more than {WIDE_GAP:g} points above the "
        f"strongest attack at {len(wide)} of {len(verdicts)} policies: {where}. There the low "
        "leakage is the attacks' limit, not a guarantee: a stronger attack may exist, or the "
        "accounting is looser than needed."
    )


def _scatter_points(ax: Any, points: list[tuple[float, float, str]], keys: list[str]) -> None:
    """One colour per value of the grid key with the fewest values; the other keys as labels.

    Each point is a grid point: ``(error, leakage, json of the grid values)``.
    """
    decoded = [(x, y, json.loads(tag)) for x, y, tag in points]
    short = [k.rsplit(".", 1)[-1] for k in keys]
    by = None
    if len(keys) > 1:
        counts = [len({json.dumps(d[2][i]) for d in decoded}) for i in range(len(keys))]
        by = min(range(len(keys)), key=lambda i: (counts[i], i))
    groups: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for x, y, values in decoded:
        colour = f"{short[by]}={values[by]}" if by is not None else "grid point"
        note = ", ".join(
            f"{name}={value}"
            for i, (name, value) in enumerate(zip(short, values, strict=True))
            if i != by
        )
        groups[colour].append((x, y, note))
    for colour, marks in sorted(groups.items()):
        ax.scatter([m[0] for m in marks], [m[1] for m in marks], label=colour)
        for x, y, note in marks:
            ax.annotate(note, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")


def _pareto(points: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Points not dominated in (lower error, lower leakage)."""
    front = []
    for p in points:
        if not any(q[0] <= p[0] and q[1] <= p[1] and (q[0], q[1]) != (p[0], p[1]) for q in points):
            front.append(p)
    return sorted(front)


def _series(log: str, kind: str, developer: str | None = None) -> list[tuple[float, float]]:
    out = []
    total = 0.0
    for e in read_log(log):
        if (
            kind == "leakage_time"
            and e.get("event") == "evaluation"
            and e.get("developer") == developer
        ):
            out.append((e["t"], e["leakage"]))
        elif (
            kind == "leakage_models"
            and e.get("event") == "evaluation"
            and e.get("developer") == developer
        ):
            out.append((e["models_used"], e["leakage"]))
        elif kind == "budget" and e.get("event") == "query_answered":
            value = _num(e.get("epsilon_charged"))
            if value is not None and math.isfinite(value):
                total += value
                out.append((e["t"], total))
    return out


def _sweep_figures(
    rows: list[dict[str, Any]],
    keys: list[str],
    points: list[tuple[float, float, str]],
    to: Path,
    ceilings: list[tuple[float, float | None]] | None = None,
) -> list[str]:
    plt = _plt()
    if plt is None:
        return []
    names: list[str] = []
    fig, ax = plt.subplots(figsize=(6, 4.5))
    if points:
        _scatter_points(ax, points, keys)
        front = _pareto(points)
        ax.plot([p[0] for p in front], [p[1] for p in front], color="tab:red", label="Pareto front")
        shown = [(x, c) for x, c in ceilings or [] if c is not None]
        if shown:  # the bound the privacy loss proves, beside the measured leakage
            ax.scatter(
                [x for x, _ in shown],
                [c for _, c in shown],
                marker="_",
                s=200,
                color="black",
                label="leakage ceiling",
            )
        ax.set_xscale("symlog", linthresh=1e-3)
        ax.legend()
    ax.set_xlabel("median |answered - exact| (compliance)")
    ax.set_ylabel("leakage of the strongest attacker (%)")
    ax.set_title("Leakage against utility, per grid point")
    names += _save(fig, to, "leakage_vs_utility")
    plt.close(fig)
    first_by_combo: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["seed"]):
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={row.get(k)}" for k in keys) or "scenario"
        first_by_combo.setdefault(label, row)
    devs = _developers(rows)
    for kind, xlabel, name in (
        ("leakage_time", "simulated hours", "leakage_over_time"),
        ("leakage_models", "models answered", "recovery_vs_queries"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for label, row in list(first_by_combo.items())[:12]:
            for dev in devs:
                series = _series(row["log"], kind, dev)
                if series:
                    (line,) = ax.step(  # markers: a run that decodes once has a single point
                        [s[0] for s in series],
                        [s[1] for s in series],
                        where="post",
                        marker="o",
                        markersize=3,
                        label=f"{dev}: {label}",
                    )
                    ceiling = _num(row.get(f"{dev}.leakage_ceiling"))
                    if ceiling is not None:  # the proven bound beside the measured leakage
                        ax.axhline(
                            ceiling,
                            linestyle="--",
                            linewidth=0.8,
                            color=line.get_color(),
                            label=f"{dev}: {label} ceiling",
                        )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("leakage (%)")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=6)
        names += _save(fig, to, name)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    drawn = False
    for label, row in list(first_by_combo.items())[:12]:
        series = _series(row["log"], "budget")
        if series:
            drawn = True
            ax.step(
                [s[0] for s in series],
                [s[1] for s in series],
                where="post",
                marker="o",
                markersize=3,
                label=label,
            )
    ax.set_xlabel("simulated hours")
    ax.set_ylabel("epsilon charged (all developers)")
    if drawn:  # exact answers charge no finite epsilon: nothing to label
        ax.legend(fontsize=6)
    names += _save(fig, to, "budget_over_time")
    plt.close(fig)
    return names


# -- paper tables ---------------------------------------------------------------------------------


def _resolved(row: dict[str, Any]) -> dict[str, Any]:
    return _header([row]).get("resolved_scenario") or {}


def _eps(row: dict[str, Any]) -> float:
    """The noise stage's epsilon of a run (inf without noise): grid column or run header."""
    if "compliance.policy.0.epsilon" in row:
        value = _num(row["compliance.policy.0.epsilon"])
        return math.inf if value is None else value
    for stage in _resolved(row).get("compliance", {}).get("policy", []):
        if stage.get("kind") == "noise":
            if stage.get("mechanism") == "exact":
                return math.inf
            value = _num(stage.get("epsilon"))
            return math.inf if value is None else value
    return math.inf


def _m(row: dict[str, Any]) -> int:
    """The attacker's number of models: grid column or run header."""
    value = row.get("developers.0.strategy.queries")
    if value is None:
        developers = _resolved(row).get("developers", [])
        value = developers[0].get("strategy", {}).get("queries") if developers else None
    return int(value) if value is not None else 0


def _n(row: dict[str, Any]) -> int:
    return int(_header([row])["audit"]["n"])


def _cell(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errs = [batch_errors(r["log"]) for r in rows]
    errs = [e for e in errs if e is not None]
    out: dict[str, Any] = {"runs": len(rows)}
    for key in READINGS:
        out[key] = _stat(1e3 * e[key] for e in errs)
    out["leakage"] = _stat(_num(r.get(f"{ATTACKER}.leakage")) for r in rows)
    out["revealed"] = _stat(_num(r.get(f"{ATTACKER}.revealed")) for r in rows)
    return out


def _e(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:g}"


def _paper_table1(rows: list[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        mechanism = r.get("compliance.policy.0.mechanism") or next(
            (
                s.get("mechanism")
                for s in _resolved(r).get("compliance", {}).get("policy", [])
                if s.get("kind") == "noise"
            ),
            None,
        )
        cells[(_n(r), _m(r), _eps(r), mechanism)].append(r)
    lines = [
        "Avg. SP err in units of 1e-3 (mean ± sd over runs of the mean |released - exact| of the "
        "attacker's m answers; the median is beside it), leakage in % (mean ± sd).",
        "",
        "| n | m | eps | runs | AC err mean | AC err median | paper AC | Lap err mean | "
        "Lap err median | paper Lap | AC leakage | paper | Lap leakage | paper |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    leakage: list[Leak] = []
    for (n, m, eps), paper in PAPER["table1"].items():
        ac = _cell(cells.get((n, m, eps, "attribute_conceal"), []))
        lap = _cell(cells.get((n, m, eps, "laplace"), []))
        if not ac["runs"] and not lap["runs"]:
            continue
        for ours, theirs, name in ((ac, paper[2], "AC"), (lap, paper[3], "Laplace")):
            if ours["leakage"][0] is not None:
                leakage.append(
                    (f"n = {n}, m = {m}, eps = {_e(eps)}, {name}", *ours["leakage"][:2], theirs)
                )
        lines.append(
            f"| {n} | {m} | {_e(eps)} | {ac['runs']}+{lap['runs']} | "
            f"{_fmt(*ac['mean'][:2], 2)} | {_fmt(*ac['median'][:2], 2)} | {paper[0]} | "
            f"{_fmt(*lap['mean'][:2], 2)} | {_fmt(*lap['median'][:2], 2)} | {paper[1]} | "
            f"{_fmt(*ac['leakage'][:2])} | {paper[2]} | {_fmt(*lap['leakage'][:2])} | "
            f"{paper[3]} |"
        )
    readings = []
    for (n, m, eps), paper in PAPER["table1"].items():
        if math.isinf(eps):
            continue
        for mechanism, published in (("attribute_conceal", paper[0]), ("laplace", paper[1])):
            group = cells.get((n, m, eps, mechanism), [])
            if group:
                readings.append((f"{n} | {m} | {_e(eps)} | {mechanism}", group, published))
    lines += ["", *_reading_table("n | m | eps | mechanism", readings, leakage)]
    return lines


Leak = tuple[str, float | None, float | None, float]
"""A leakage comparison: cell label, our mean and sd over runs, the paper's value."""

READING_NAMES = {
    "mean": "mean",
    "median": "median",
    "mean_clamped": "clamped",
    "abs_mean_signed": "|mean signed|",
    "mean_over_m": "mean / m",
}
"""Every reading of Avg. SP err (a key of :func:`batch_errors`) and its short name."""
READINGS = tuple(READING_NAMES)


def _leak_agrees(mean: float, sd: float | None, paper: float) -> bool:
    return abs(mean - paper) <= max(10.0, 2 * (sd or 0.0))


def _verdict(errors: list[tuple[list[float], float]], leakage: list[Leak] | None) -> list[str]:
    """A plain paragraph: where our numbers agree with the paper's and where they do not."""
    parts = []
    if leakage:
        rated = [c for c in leakage if c[1] is not None]
        off = [c for c in rated if not _leak_agrees(c[1], c[2], c[3])]  # type: ignore[arg-type]
        text = (
            f"Leakage agrees with the paper (within 10 points or two standard deviations) in "
            f"{len(rated) - len(off)} of {len(rated)} cells"
        )
        if off:
            text += "; it does not in " + "; ".join(
                f"{label} (ours {_fmt(mean, sd)}, paper {paper:g})"
                for label, mean, sd, paper in off
            )
        parts.append(text + ".")
    usable = [(values, published) for values, published in errors if published > 0]
    if usable:
        ratios = sorted(values[1] / published for values, published in usable)
        above = sum(r >= 1.0 for r in ratios)
        close = {
            key: sum(abs(values[i] / published - 1.0) <= 0.3 for values, published in usable)
            for i, key in enumerate(READINGS)
        }
        parts.append(
            f"Avg. SP err: our median |released - exact| per answer is at or above the paper's "
            f"value in {above} of {len(usable)} noisy cells, from {ratios[0]:.3g} to "
            f"{ratios[-1]:.3g} times it (median {statistics.median(ratios):.3g} times). Cells "
            f"within 30% of the paper's value, per reading: "
            + ", ".join(f"{READING_NAMES[k]} {close[k]}" for k in READINGS)
            + f" (of {len(usable)})."
        )
    return ["**Where we agree and where we do not.** " + " ".join(parts)] if parts else []


def _reading_table(
    head: str,
    cells: list[tuple[str, list[dict[str, Any]], float]],
    leakage: list[Leak] | None = None,
) -> list[str]:
    """Every reading of Avg. SP err per cell (median over runs, 1e-3) beside the paper's, then
    the paragraph on where we agree and where we do not."""
    lines = [
        "Every reading of Avg. SP err we tested, per cell (units of 1e-3, median over runs): "
        "mean and median |released - exact| per answer, the mean after clamping released values "
        "to [-1, 1], |mean of the signed errors| over the batch, and the mean divided by m.",
        "",
        f"| {head} | mean | median | clamped | \\|mean signed\\| | mean / m | paper |",
        "|" + "---|" * (len(head.split("|")) + 6),
    ]
    stats: list[tuple[list[float], float]] = []
    for label, group, published in cells:
        errs = [e for e in (batch_errors(r["log"]) for r in group) if e is not None]
        if not errs:
            continue
        values = [statistics.median(1e3 * e[k] for e in errs) for k in READINGS]
        stats.append((values, published))
        lines.append(f"| {label} | " + " | ".join(f"{v:.4g}" for v in values) + f" | {published} |")
    verdict = _verdict(stats, leakage)
    return [*lines, "", *verdict] if verdict else lines


def _paper_table2_3(rows: list[dict[str, Any]], which: str) -> list[str]:
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    third = "m" if which == "table2" else "eps"
    for r in rows:
        n0 = int(r.get("data.minority") or _header([r])["audit"]["n0"])
        key3 = _m(r) if which == "table2" else _eps(r)
        cells[(_n(r), n0, key3)].append(r)
    lines = [
        "Avg. SP err in units of 1e-3 (mean and median |released - exact| of the attacker's m "
        "answers, mean ± sd over runs), leakage in %.",
        "",
        f"| n | N0 | {third} | runs | err mean | err median | paper err | leakage | paper |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    leakage: list[Leak] = []
    for key, (perr, pleak) in PAPER[which].items():
        c = _cell(cells.get(key, []))
        if not c["runs"]:
            continue
        third_value = _e(key[2]) if which == "table3" else key[2]
        leakage.append(
            (f"n = {key[0]}, N0 = {key[1]}, {third} = {third_value}", *c["leakage"][:2], pleak)
        )
        lines.append(
            f"| {key[0]} | {key[1]} | {third_value} | "
            f"{c['runs']} | {_fmt(*c['mean'][:2], 2)} | {_fmt(*c['median'][:2], 2)} | {perr} | "
            f"{_fmt(*c['leakage'][:2])} | {pleak} |"
        )
    lines.append("")
    readings = [
        (f"{k[0]} | {k[1]} | {_e(k[2]) if which == 'table3' else k[2]}", cells[k], v[0])
        for k, v in PAPER[which].items()
        if cells.get(k)
    ]
    lines += _reading_table(f"n | N0 | {third}", readings, leakage)
    return lines


def _paper_table4(rows: list[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        cells[(_m(r), _eps(r))].append(r)
    lines = [
        "German credit (n = 1000, N1 = 690, N0 = 310). Avg. SP err in units of 1e-3; "
        "recovered = people whose attribute the final estimate has right (N_A + N_B).",
        "",
        "| m | eps | runs | err mean | err median | paper err | recovered | paper | leakage % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, (perr, prec) in PAPER["table4"].items():
        c = _cell(cells.get(key, []))
        if not c["runs"]:
            continue
        lines.append(
            f"| {key[0]} | {_e(key[1])} | {c['runs']} | {_fmt(*c['mean'][:2], 2)} | "
            f"{_fmt(*c['median'][:2], 2)} | {perr} | {_fmt(*c['revealed'][:2])} | {prec} | "
            f"{_fmt(*c['leakage'][:2])} |"
        )
    lines += [
        "",
        "A constant guess of 'male' for everyone already recovers 690 people; the "
        "paper's counts (492 to 657) are below that, so the number recovered says little "
        "without the balanced leakage beside it.",
        "",
    ]
    readings = [
        (f"{k[0]} | {_e(k[1])}", cells[k], v[0]) for k, v in PAPER["table4"].items() if cells.get(k)
    ]
    lines += _reading_table("m | eps", readings)
    return lines


def _paper_figure2(rows: list[dict[str, Any]], to: Path) -> list[str]:
    by_n: dict[int, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_n[_n(r)][_m(r)].append(r)
    lines = ["| n | m | runs | leakage % | paper |", "|---|---|---|---|---|"]
    leakage: list[Leak] = []
    for n in sorted(by_n):
        for m in sorted(by_n[n]):
            leak = _stat(_num(r.get(f"{ATTACKER}.leakage")) for r in by_n[n][m])
            paper = PAPER["figure2"].get((n, m), "")
            lines.append(f"| {n} | {m} | {leak[2]} | {_fmt(leak[0], leak[1])} | {paper} |")
            if paper != "":
                leakage.append((f"n = {n}, m = {m}", leak[0], leak[1], float(paper)))
    verdict = _verdict([], leakage)
    if verdict:
        lines += ["", *verdict]
    plt = _plt()
    if plt is None:
        return [*lines, "", f"(No figure: {PLOTS_MISSING}.)"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for n in sorted(by_n):
        ms = sorted(by_n[n])
        stats = [_stat(_num(r.get(f"{ATTACKER}.leakage")) for r in by_n[n][m]) for m in ms]
        ax.errorbar(
            ms,
            [s[0] for s in stats],
            yerr=[s[1] for s in stats],
            marker="o",
            capsize=3,
            label=f"n = {n}",
        )
    for (_n_paper, m), value in PAPER["figure2"].items():
        ax.scatter([m], [value], marker="x", color="black", zorder=5)
    ax.set_xscale("log")
    ax.set_xlabel("models m")
    ax.set_ylabel("leakage (%)")
    ax.set_title("Noiseless recovery on Adult (x: the paper's points)")
    ax.legend()
    names = _save(fig, to, "figure2")
    plt.close(fig)
    return [*lines, "", f"![figure 2]({names[0]})"]


def _paper_figure3(rows: list[dict[str, Any]], to: Path) -> list[str]:
    by_n: dict[int, dict[float, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_n[_n(r)][_eps(r)].append(r)
    lines = [
        "| n | eps | runs | err mean (1e-3) | err median (1e-3) | leakage % |",
        "|---|---|---|---|---|---|",
    ]
    curves = {}
    for n in sorted(by_n):
        curve = []
        for eps in sorted(by_n[n]):
            c = _cell(by_n[n][eps])
            lines.append(
                f"| {n} | {_e(eps)} | {c['runs']} | {_fmt(*c['mean'][:2], 2)} | "
                f"{_fmt(*c['median'][:2], 2)} | {_fmt(*c['leakage'][:2])} |"
            )
            curve.append((c["median"][0], c["leakage"][0], eps))
        curves[n] = curve
    plt = _plt()
    if plt is None:
        return [*lines, "", f"(No figure: {PLOTS_MISSING}.)"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for n, curve in curves.items():
        pts = [p for p in curve if p[0] is not None and p[1] is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"n = {n}")
        for p in pts:
            ax.annotate(_e(p[2]), (p[0], p[1]), fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("median |released - exact| (1e-3)")
    ax.set_ylabel("leakage (%)")
    ax.set_title("Attribute-Conceal: error against leakage (labels: epsilon)")
    ax.legend()
    names = _save(fig, to, "figure3")
    plt.close(fig)
    return [*lines, "", f"![figure 3]({names[0]})"]


# The scenario files (stems in scenarios/paper/) behind each table and figure.
PAPER_FILES: dict[str, tuple[str, ...]] = {
    "table1": ("table1_n100", "table1_n1000"),
    "table2": ("table2_n1000", "table2_n10000"),
    "table3": ("table3_n1000", "table3_n10000"),
    "table4": ("table4",),
    "figure2": ("figure2_n100", "figure2_n1000"),
    "figure3": ("figure3_n100", "figure3_n1000", "figure3_n10000"),
}

PAPER_TITLES = {
    "table1": "Table 1: Adult, Attribute-Conceal against Laplace",
    "table2": "Table 2: synthetic data, Attribute-Conceal at epsilon 100",
    "table3": "Table 3: synthetic data, Attribute-Conceal over epsilon",
    "table4": "Table 4: German credit",
    "figure2": "Figure 2: noiseless recovery against the number of models",
    "figure3": "Figure 3: error against leakage over epsilon",
}


def write_report(
    outs: str | Path | list[str | Path], *, paper: str | None = None, to: str | Path | None = None
) -> Path:
    """Write ``report.md`` (and figures) for one or more sweep folders; return its path."""
    folders = [outs] if isinstance(outs, str | Path) else list(outs)
    target = Path(to) if to is not None else Path(folders[0]) / "report"
    target.mkdir(parents=True, exist_ok=True)
    if paper is None:
        text = _sweep_report(folders, target)
    else:
        if paper not in PAPER_TITLES:
            raise ValueError(f"--paper must be one of {list(PAPER_TITLES)}; received {paper!r}")
        rows = _load(folders)
        if paper == "table1":
            body = _paper_table1(rows)
        elif paper in ("table2", "table3"):
            body = _paper_table2_3(rows, paper)
        elif paper == "table4":
            body = _paper_table4(rows)
        elif paper == "figure2":
            body = _paper_figure2(rows, target)
        else:
            body = _paper_figure3(rows, target)
        text = (
            "\n".join([f"# {PAPER_TITLES[paper]}", "", f"{len(rows)} finished runs.", "", *body])
            + "\n"
        )
    text += "\n".join(["", *_reproduce(folders, paper, to)]) + "\n"
    path = target / "report.md"
    path.write_text(text, encoding="utf-8")
    return path


def _reproduce(folders: list[str | Path], paper: str | None, to: str | Path | None) -> list[str]:
    """The commands that remake the sweep folders (from their ``sweep.json``) and this report."""
    commands = []
    made_with = []  # (scenario file, seeds, overrides) of each folder, where recorded
    for folder in folders:
        made = Path(folder) / SWEEP_FILE
        if not made.exists():  # a folder from before sweep.json: say so rather than guess
            commands.append(f"# {Path(folder).as_posix()}: made without a record of its command")
            continue
        how = json.loads(made.read_text(encoding="utf-8"))
        file, count, overrides = how["scenario_file"], how.get("seeds"), how.get("overrides") or []
        made_with.append((file, count, overrides))
        words = ["biasleak", "sweep", file]
        if count is not None:
            words += ["--seeds", str(count)]
        for override in overrides:
            words += ["--set", override]
        words += ["--workers", "2", "--out", Path(folder).as_posix()]
        commands.append(" ".join(shlex.quote(w) for w in words))
    words = ["biasleak", "report", *(Path(f).as_posix() for f in folders)]
    if paper is not None:
        words += ["--paper", paper]
    if to is not None:
        words += ["--to", Path(to).as_posix()]
    commands.append(" ".join(shlex.quote(w) for w in words))
    stems = tuple(Path(f).name for f in folders)
    parents = {Path(f).parent.as_posix() for f in folders}
    sources = {Path(m[0]).parent.as_posix() for m in made_with}
    seeds = {m[1] for m in made_with}
    if (
        paper is not None
        and stems == PAPER_FILES.get(paper)
        and len(made_with) == len(folders)
        and len(parents) == len(sources) == len(seeds) == 1
        and all(Path(m[0]).stem == stem for m, stem in zip(made_with, stems, strict=True))
        and not any(m[2] for m in made_with)
    ):  # the folders are what `biasleak paper` makes: say so in one command
        words = ["biasleak", "paper", paper]
        source = sources.pop()
        if source != "scenarios/paper":
            words += ["--scenarios", source]
        words += ["--sweeps", parents.pop()]
        count = seeds.pop()
        if count is not None:
            words += ["--seeds", str(count)]
        if to is not None:
            words += ["--to", Path(to).as_posix()]
        commands += [
            "# or the same in one command:",
            " ".join(shlex.quote(w) for w in [*words, "--workers", "2"]),
        ]
    return [
        "## Reproduce",
        "",
        "From the repository root (`--workers` only sets how many runs go at once; the results "
        "do not depend on it):",
        "",
        "```bash",
        *commands,
        "```",
    ]
