"""The after-action report (HSEEP): what happened, how each objective was met, what to improve.

Written twice from one document, as ``report.html`` (self-contained: the figures are inline SVG,
no external asset) and ``report.md`` (the figures as SVG data URIs). Everything comes from the run
logs, rebuilt into :class:`~biasleak.sim.exercise.record.Record` objects; nothing carries a date,
a machine path or an id that changes between runs, so the same exercise and decisions give a
byte-identical report.

Sections: the exercise at a glance; objectives with their rating (P/S/M/U) and the evidence that
produced it; strengths (objectives performed without challenges) and areas for improvement
(observation, analysis, recommendation); the timeline (injects, messages, alerts, decisions,
policy changes, and the facilitator's ground truth); leakage and budget curves with the decisions
marked; the decision log with rationales; the branch comparison; and the improvement plan
(corrective action, capability, owner role, due), pre-filled from the policy changes a branch
showed would have helped, and otherwise from the objectives' recommendations.
"""

from __future__ import annotations

import base64
import math
from html import escape
from pathlib import Path
from typing import Any, Final

from biasleak.sim.exercise.indicators import Rating, rate_objective
from biasleak.sim.exercise.models import RATING_NAMES, RATINGS, Exercise
from biasleak.sim.exercise.record import Record, clock, deployment_text
from biasleak.sim.exercise.svg import step_chart
from biasleak.sim.exercise.views import record_timeline
from biasleak.sim.safety import CEILING_KEYS, person_bound

__all__ = ["build_document", "write_comparison", "write_report"]

Block = tuple[Any, ...]
DUE: Final = "before the next exercise"

_RECOMMEND: Final[dict[str, str]] = {
    "max_leakage": "Tighten the answering policy before an attack can compound: an "
    "organisation-wide privacy budget, noise calibrated to it, and the auditor's detectors on.",
    "final_leakage": "Stop the attacker's answers earlier (suspension or a lower budget) so "
    "that its estimate cannot keep improving.",
    "deploy_hours": "Keep a route for honest developers that the defence does not block: a "
    "separate budget, or the fair-learning services.",
    "alert_response_hours": "Agree in advance who decides on an auditor alert and within how "
    "many hours; rehearse the suspension procedure.",
    "epsilon_spent": "Set budgets per organisation (not per identity) and review requests to "
    "raise them against what was already spent.",
    "audit_published_hours": "Prepare the private audit release (plan, epsilon, denominators) "
    "before the regulator asks.",
    "audit_error": "Spend enough epsilon on the published audit for its figures to be useful, "
    "or publish rates over larger groups.",
    "honest_refused": "Make refusal rules and rate limits spare honest developers: per-identity "
    "allowances, or answers through the fair-learning services.",
}


def _hours(t: float) -> str:
    return f"{t:.1f} h ({clock(t)})"


def _value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


# -- figures -------------------------------------------------------------------------------------


def _markers(record: Record) -> list[tuple[float, str]]:
    return [(d["t"], d["decision"]) for d in record.decisions]


def leakage_figure(records: dict[str, Record], horizon: float) -> str:
    """Leakage over time, per developer (and per run when comparing)."""
    series = {}
    for run, record in records.items():
        for identity, points in record.leakage.items():
            name = identity if len(records) == 1 else f"{identity} ({run})"
            series[name] = points
    first = next(iter(records.values()))
    return step_chart(
        "Leakage over time (ground truth)",
        series,
        x_max=horizon,
        x_label="simulated hours",
        y_label="leakage %",
        y_start=50.0,
        y_min=40.0,
        y_max=100.0,
        markers=_markers(first) if len(records) == 1 else None,
    )


UNBOUNDED: Final = (
    "No budget curve for {orgs}: {verb} answered exactly (epsilon = infinity), so the privacy "
    "loss is unbounded; the leakage figure shows what was lost."
)


def budget_blocks(records: dict[str, Record], horizon: float, caption: str) -> list[Block]:
    """Epsilon charged over time per organisation (and per run when comparing), as blocks.

    An organisation that received an exact answer has an infinite charge: it gets a sentence,
    not a curve (a curve would have no scale).
    """
    series, unbounded = {}, set()
    for run, record in records.items():
        for org, points in sorted(record.epsilon.items()):
            if not math.isfinite(record.epsilon_total[org]):
                unbounded.add(org)
                continue
            name = org if len(records) == 1 else f"{org} ({run})"
            series[name] = points
    blocks: list[Block] = []
    if series:
        first = next(iter(records.values()))
        chart = step_chart(
            "Privacy budget charged over time",
            series,
            x_max=horizon,
            x_label="simulated hours",
            y_label="epsilon charged",
            markers=_markers(first) if len(records) == 1 else None,
        )
        blocks.append(("svg", chart, caption))
    if unbounded:
        names = sorted(unbounded)
        verb = "it was" if len(names) == 1 else "they were"
        blocks.append(("p", UNBOUNDED.format(orgs=", ".join(names), verb=verb)))
    return blocks


# -- sections ------------------------------------------------------------------------------------


def _overview(exercise: Exercise, header: dict[str, Any], record: Record) -> list[Block]:
    status = (
        f"interrupted at {_hours(record.interrupted)}: a partial report"
        if record.interrupted is not None
        else "complete: the world ran to its horizon"
    )
    audit = header.get("audit", {})
    rows = [
        ["exercise", exercise.name],
        ["status", status],
        ["scenario", f"{header.get('scenario')} (seed {header.get('seed')})"],
        ["horizon", _hours(float(header.get("horizon_hours", 0.0)))],
        ["audit set", f"n = {audit.get('n')} ({audit.get('description', '')})"],
        ["roles", ", ".join(exercise.roles)],
        ["exercise hash", str(header.get("exercise_hash", ""))[:16]],
    ]
    blocks: list[Block] = [("h1", f"After-action report: {exercise.title}")]
    if exercise.description:
        blocks.append(("p", exercise.description.strip()))
    blocks.append(("table", ["item", "value"], rows))
    return blocks


def _objectives(exercise: Exercise, ratings: list[Rating]) -> list[Block]:
    if not exercise.objectives:
        return [("h2", "Objectives"), ("p", "The exercise states no objectives.")]
    rows = []
    for objective, r in zip(exercise.objectives, ratings, strict=True):
        th = objective.thresholds
        rows.append(
            [
                objective.title,
                objective.capability,
                _value(r.value),
                f"P <= {th.P:g}, S <= {th.S:g}, M <= {th.M:g}",
                f"{r.rating} ({r.meaning})",
                r.evidence,
            ]
        )
    columns = ["objective", "capability", "value", "thresholds", "rating", "evidence"]
    return [
        ("h2", "Objectives and ratings"),
        (
            "p",
            "Ratings (HSEEP): "
            + "; ".join(f"{k} = {RATING_NAMES[k]}" for k in RATINGS)
            + ". Each value is computed from the run's log.",
        ),
        ("table", columns, rows),
    ]


def _analysis(objective: Any, rating: Rating, record: Record) -> str:
    th = objective.thresholds
    if rating.value is None:
        core = "The indicator could not be measured in this run."
    else:
        core = f"The value {rating.value:.4g} is above the threshold for P ({th.P:g})."
    context = []
    if record.alerts:
        context.append(f"the auditor raised {len(record.alerts)} alert(s)")
    if record.decisions:
        taken = ", ".join(f"{d['decision']}: {d['option']}" for d in record.decisions)
        context.append(f"decisions taken: {taken}")
    if record.policy:
        context.append(f"{len(record.policy)} policy change(s)")
    return core + (" In this run " + "; ".join(context) + "." if context else "")


def _strengths(exercise: Exercise, ratings: list[Rating], record: Record) -> list[Block]:
    pairs = list(zip(exercise.objectives, ratings, strict=True))
    strengths = [f"{o.title}: {r.evidence}." for o, r in pairs if r.rating == "P"]
    blocks: list[Block] = [("h2", "Strengths")]
    blocks.append(("ul", strengths) if strengths else ("p", "No objective was fully performed."))
    blocks.append(("h2", "Areas for improvement"))
    areas = [(o, r) for o, r in pairs if r.rating != "P"]
    if not areas:
        blocks.append(("p", "None: every objective was performed without challenges."))
    for objective, r in areas:
        recommendation = objective.recommendation or _RECOMMEND[objective.indicator.kind]
        blocks.append(("h3", f"{objective.title} (rated {r.rating})"))
        blocks.append(
            (
                "ul",
                [
                    f"Observation: {r.evidence}.",
                    f"Analysis: {_analysis(objective, r, record)}",
                    f"Recommendation: {recommendation}",
                ],
            )
        )
    return blocks


def _timeline(record: Record) -> list[Block]:
    rows = [[e["clock"], e["kind"], e["text"]] for e in record_timeline(record, "facilitator")]
    return [("h2", "Timeline"), ("table", ["when", "what", "detail"], rows)]


def _decisions(record: Record) -> list[Block]:
    if not record.decisions:
        return [("h2", "Decision log"), ("p", "No decision was taken.")]
    rows = [
        [
            _hours(d["t"]),
            d["title"],
            f"{d['label']} ({d['option']})",
            d["by"],
            d["rationale"] or "-",
        ]
        for d in record.decisions
    ]
    return [
        ("h2", "Decision log"),
        ("table", ["when", "decision point", "option", "decided by", "rationale"], rows),
    ]


def _plan_from_areas(exercise: Exercise, ratings: list[Rating]) -> list[list[str]]:
    rows = []
    for objective, r in zip(exercise.objectives, ratings, strict=True):
        if r.rating != "P":
            action = objective.recommendation or _RECOMMEND[objective.indicator.kind]
            rows.append([action, objective.capability, objective.owner, DUE])
    return rows


def _plan(rows: list[list[str]], note: str) -> list[Block]:
    blocks: list[Block] = [("h2", "Improvement plan"), ("p", note)]
    if rows:
        blocks.append(("table", ["corrective action", "capability", "owner role", "due"], rows))
    else:
        blocks.append(("p", "No corrective action: every objective was performed."))
    return blocks


def _ceilings(events: list[dict[str, Any]]) -> list[Block]:
    """The proven ceilings of every organisation and developer (from the log's summary line):
    the three levels and the most exposed person's bound, beside the measured leakage."""
    summary = next(
        (e.get("summary") for e in reversed(events) if e.get("event") == "summary"), None
    )
    if not summary:
        return []
    rows = []
    parties = [(f"organisation {k}", v) for k, v in (summary.get("organizations") or {}).items()]
    parties += [(k, v) for k, v in (summary.get("developers") or {}).items()]
    for name, record in parties:
        leak = record.get("leakage")
        rows.append(
            [
                name,
                "-" if leak is None else f"{leak:.1f}%",
                *(_percent(record.get(k)) for k in CEILING_KEYS),
                _percent(person_bound(record)),
            ]
        )
    return [
        ("h2", "Proven ceilings"),
        (
            "p",
            "What no attacker that knows the group sizes can exceed in expected balanced "
            "accuracy, proved from the privacy loss of the answers: by the policy's guarantee on "
            "any audit set, on this audit set whatever models are sent, and with exactly these "
            "answers; and the most exposed person's bound against an attacker who knows "
            "everyone else's attribute (whatever an attacker knows besides, the answers add at "
            "most that bound minus 50 points). The audit-set and answers columns are facts about "
            "the audit set for the facilitator, never for players.",
        ),
        (
            "table",
            ["who", "leakage", "policy", "audit set", "answers", "most exposed person"],
            rows,
        ),
    ]


def _percent(value: Any) -> str:
    return "-" if value is None or isinstance(value, str) else f"{float(value):.1f}%"


def build_document(exercise: Exercise, events: list[dict[str, Any]]) -> list[Block]:
    """The report of one run, as blocks (headings, paragraphs, tables, figures)."""
    header = events[0]
    record = Record.from_events(events)
    ratings = [rate_objective(o, record) for o in exercise.objectives]
    horizon = float(header.get("horizon_hours", record.last_t))
    blocks = _overview(exercise, header, record)
    blocks += _objectives(exercise, ratings)
    blocks += _strengths(exercise, ratings, record)
    blocks += _timeline(record)
    blocks += [
        ("h2", "Figures"),
        ("svg", leakage_figure({"run": record}, horizon), "leakage over time"),
        *budget_blocks({"run": record}, horizon, "epsilon charged over time"),
    ]
    blocks += _ceilings(events)
    blocks += _decisions(record)
    blocks += [
        ("h2", "Branch comparison"),
        (
            "p",
            "No branch was run. `biasleak exercise FILE --branch DECISION=OPTION` reruns the "
            "exercise from the same seed with a decision changed and compares the outcomes.",
        ),
    ]
    blocks += _plan(
        _plan_from_areas(exercise, ratings),
        "Pre-filled from the areas for improvement; owners and dates are for the room to confirm.",
    )
    return blocks


# -- comparison ------------------------------------------------------------------------------------


def _utility(record: Record) -> str:
    parts = []
    for identity in record.honest():
        d = record.deployments.get(identity)
        what = None if d is None else deployment_text(d)
        if d is None or what is None:
            parts.append(f"{identity}: no model")
        else:
            parts.append(f"{identity}: {what} at {d['t']:.1f} h")
    return "; ".join(parts) or "no honest developer"


def build_comparison(
    exercise: Exercise,
    base_events: list[dict[str, Any]],
    branch_events: list[dict[str, Any]],
    branch: dict[str, str],
) -> list[Block]:
    """The side-by-side report of a run and its branch."""
    header = base_events[0]
    base, other = Record.from_events(base_events), Record.from_events(branch_events)
    horizon = float(header.get("horizon_hours", max(base.last_t, other.last_t)))
    base_r = [rate_objective(o, base) for o in exercise.objectives]
    other_r = [rate_objective(o, other) for o in exercise.objectives]
    changed = ", ".join(f"{k} = {v}" for k, v in sorted(branch.items()))
    blocks = _overview(exercise, header, base)
    blocks[0] = ("h1", f"After-action report with branch: {exercise.title}")
    blocks.append(
        ("p", f"Branch: the same seed and decisions, except {changed}. Both runs side by side.")
    )
    rows = []
    ml_a, ml_b = base.max_leakage(), other.max_leakage()
    for identity in sorted(set(ml_a) | set(ml_b)):
        rows.append(
            [
                f"highest leakage of {identity} (%)",
                _value(ml_a.get(identity)),
                _value(ml_b.get(identity)),
            ]
        )
    for org in sorted(set(base.epsilon_total) | set(other.epsilon_total)):
        rows.append(
            [
                f"epsilon charged to {org}",
                _value(base.epsilon_total.get(org, 0.0)),
                _value(other.epsilon_total.get(org, 0.0)),
            ]
        )
    rows.append(["alerts", str(len(base.alerts)), str(len(other.alerts))])
    rows.append(["honest developers (utility)", _utility(base), _utility(other)])
    rows.append(
        [
            "models refused",
            str(sum(base.refused_total().values())),
            str(sum(other.refused_total().values())),
        ]
    )
    for objective, a, b in zip(exercise.objectives, base_r, other_r, strict=True):
        rows.append(
            [
                f"objective: {objective.title}",
                f"{a.rating} ({_value(a.value)})",
                f"{b.rating} ({_value(b.value)})",
            ]
        )
    blocks += [
        ("h2", "Branch comparison"),
        ("table", ["measure", "as decided", f"branch ({changed})"], rows),
        ("svg", leakage_figure({"as decided": base, "branch": other}, horizon), "leakage"),
        *budget_blocks({"as decided": base, "branch": other}, horizon, "epsilon"),
    ]
    blocks += _objectives(exercise, base_r)
    blocks += _strengths(exercise, base_r, base)
    blocks += _decisions(base)
    plan = []
    for objective, a, b in zip(exercise.objectives, base_r, other_r, strict=True):
        if RATINGS.index(b.rating) < RATINGS.index(a.rating):
            for decision_id, option_id in sorted(branch.items()):
                point = exercise.point(decision_id)
                assert point is not None
                option = point.option(option_id)
                assert option is not None
                plan.append(
                    [
                        f"At '{point.title}', choose '{option.label}' ({option_id}): in the "
                        f"branch '{objective.title}' was rated {b.rating} instead of {a.rating}.",
                        objective.capability,
                        point.owner,
                        DUE,
                    ]
                )
    note = "Pre-filled from the branch: the policy changes it showed would have helped."
    if not plan:
        plan = _plan_from_areas(exercise, base_r)
        note = (
            "The branch improved no objective's rating; pre-filled from the areas for "
            "improvement instead."
        )
    blocks += _plan(plan, note)
    return blocks


# -- rendering ------------------------------------------------------------------------------------

_CSS: Final = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    "vertical-align:top;text-align:left}th{background:#f3f3f3}figure{margin:1em 0}"
)


def to_html(blocks: list[Block]) -> str:
    """The blocks as one self-contained HTML page."""
    title = next((b[1] for b in blocks if b[0] == "h1"), "After-action report")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
    ]
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3", "p"):
            out.append(f"<{kind}>{escape(block[1])}</{kind}>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{escape(c)}</th>" for c in block[1])
            body = "".join(
                "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                for row in block[2]
            )
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "svg":
            out.append(f"<figure>{block[1]}<figcaption>{escape(block[2])}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    """The blocks as markdown (figures as SVG data URIs)."""
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "h1":
            out.append(f"# {block[1]}")
        elif kind == "h2":
            out.append(f"## {block[1]}")
        elif kind == "h3":
            out.append(f"### {block[1]}")
        elif kind == "p":
            out.append(block[1])
        elif kind == "ul":
            out.append("\n".join(f"- {i}" for i in block[1]))
        elif kind == "table":
            columns = [_md_cell(c) or " " for c in block[1]]
            lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block[2]]
            out.append("\n".join(lines))
        elif kind == "svg":
            data = base64.b64encode(block[1].encode("utf-8")).decode("ascii")
            out.append(f"![{block[2]}](data:image/svg+xml;base64,{data})")
    return "\n\n".join(out) + "\n"


def _write(out: Path, blocks: list[Block]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(to_markdown(blocks), encoding="utf-8")
    html = out / "report.html"
    html.write_text(to_html(blocks), encoding="utf-8")
    return html


def write_report(out: Path, exercise: Exercise, events: list[dict[str, Any]]) -> Path:
    """Write ``out/report.html`` and ``out/report.md`` for one run; return the HTML's path."""
    return _write(Path(out), build_document(exercise, events))


def write_comparison(
    out: Path,
    exercise: Exercise,
    base_events: list[dict[str, Any]],
    branch_events: list[dict[str, Any]],
    branch: dict[str, str],
) -> Path:
    """Write the side-by-side report of a run and its branch; return the HTML's path."""
    return _write(Path(out), build_comparison(exercise, base_events, branch_events, branch))
