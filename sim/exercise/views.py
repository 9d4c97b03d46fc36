"""What each role may see: status, evidence and timeline, filtered by role.

The rule, tested: no view for a role other than the facilitator contains the protected
attribute, the evaluator's leakage, or anything computed from the ground truth (which developer
is an attacker, how many people an estimate has right, how far a published audit is from the
exact value). Everything else a role sees is what that role would know in the world: the
compliance lead sees the answers, refusals, budgets and alerts; the auditor its alerts and the
query counts; every role the messages addressed to it, the decisions and the policy in force.

Views are plain dicts and lists of JSON values (numbers rounded for people), ready for a page or
an API. Evidence comes as tables (``{"kind", "title", "columns", "rows"}``) of the kinds a
decision point grants each role (:data:`~biasleak.sim.exercise.models.EVIDENCE_KINDS`); the
facilitator sees every table granted to anyone, plus the ground truth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from biasleak.sim.exercise.actions import describe_policy
from biasleak.sim.exercise.models import GROUND_TRUTH_EVIDENCE
from biasleak.sim.exercise.record import clock, deployment_text
from biasleak.sim.runlog import jsonable

if TYPE_CHECKING:
    from biasleak.sim.exercise.record import Record
    from biasleak.sim.exercise.session import ExerciseSession

__all__ = [
    "ALERT_ROLES",
    "TimelineEntry",
    "evidence",
    "record_timeline",
    "status",
    "timeline",
    "timeline_entries",
]

ALERT_ROLES: Final = frozenset({"facilitator", "compliance_lead", "auditor"})
"""Roles that see the auditor's alerts as they come."""
QUERY_ROLES: Final = frozenset({"facilitator", "compliance_lead", "auditor"})
"""Roles that see who asked what and what was refused."""
DEPLOY_ROLES: Final = frozenset({"facilitator", "compliance_lead", "model_owner"})
"""Roles that hear when an honest developer deploys."""
MILESTONES: Final = (60.0, 75.0, 90.0)
"""Leakage levels the facilitator's timeline marks (ground truth)."""


def _r(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def _sees(role: str, audience: list[str]) -> bool:
    return role == "facilitator" or "all" in audience or role in audience


def _budget(session: ExerciseSession) -> str:
    budgets = [s for s in session._ctx.config.policy if s.kind == "budget"]
    if not budgets:
        return "none"
    return "; ".join(f"{b.epsilon:g} per {b.scope}" for b in budgets)


# -- evidence tables -------------------------------------------------------------------------------


def _alerts(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    rows = [
        [_r(a["t"], 2), a["developer"], a["organization"], a["detector"], a["evidence"]]
        for a in session.record.alerts
    ]
    return ["hours", "identity", "organisation", "detector", "evidence"], rows


def _epsilon(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    budget = _budget(session)
    rows = [[org, _r(total), budget] for org, total in sorted(session.record.epsilon_total.items())]
    return ["organisation", "epsilon charged", "budget"], rows


def _queries(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    r = session.record
    active = sorted(set(r.answered) | set(r.refused))
    rows = [
        [i, r.organization_of.get(i, "?"), r.answered.get(i, 0), sum(r.refused[i].values())]
        for i in active
    ]
    return ["identity", "organisation", "models answered", "models refused"], rows


def _refusals(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    return ["reason", "models"], [[k, v] for k, v in session.record.refused_total().items()]


def _policy(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    return ["policy in force"], [[line] for line in describe_policy(session._ctx.config)]


def _messages(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    rows = [[_r(m["t"], 2), m["category"], m["text"]] for m in _visible_messages(session, role)]
    return ["hours", "category", "text"], rows


def _visible_messages(session: ExerciseSession, role: str) -> list[dict[str, Any]]:
    r = session.record
    out = [
        {"t": i["t"], "category": i["category"], "text": i["text"]}
        for i in r.injects
        if i["text"] and _sees(role, i["to"])
    ]
    out += [
        {"t": m["t"], "category": f"from decision {m['cause']}", "text": m["text"]}
        for m in r.messages
        if _sees(role, m["to"])
    ]
    return sorted(out, key=lambda m: m["t"])


def _deployments(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    rows = [
        [i, _r(d["t"], 2), deployment_text(d) or "none", d["reason"]]
        for i, d in sorted(session.record.deployments.items())
    ]
    return ["developer", "hours", "model deployed", "outcome"], rows


def _audit(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    rows = [
        [
            _r(a["t"], 2),
            a["epsilon"],
            a["epsilon_attribute_change"],
            _r(a["selection_rates"][0]),
            _r(a["selection_rates"][1]),
            _r(a["rate_difference"]),
        ]
        for a in session.record.audits
    ]
    columns = [
        "hours",
        "epsilon (add/remove one record)",
        "epsilon (one person's attribute changes)",
        "rate (advantaged)",
        "rate (disadvantaged)",
        "difference",
    ]
    return columns, rows


def _leakage(session: ExerciseSession, role: str) -> tuple[list[str], list[list[Any]]]:
    r = session.record
    latest, highest = r.latest_leakage(), r.max_leakage()
    rows = [
        [
            i,
            d["organization"],
            d["strategy"],
            _r(latest[i], 2),
            _r(highest[i], 2),
            r.revealed.get(i),
        ]
        for i, d in r.developers.items()
        if r.leakage.get(i) or i in r.answered
    ]
    columns = ["developer", "organisation", "strategy", "leakage %", "highest %", "people right"]
    return columns, rows


TABLES: Final[dict[str, tuple[str, Callable[..., tuple[list[str], list[list[Any]]]]]]] = {
    "alerts": ("Alerts from the auditor", _alerts),
    "epsilon": ("Privacy budget charged per organisation", _epsilon),
    "queries": ("Queries per identity", _queries),
    "refusals": ("Refusals by reason", _refusals),
    "policy": ("The answering policy in force", _policy),
    "messages": ("Messages received", _messages),
    "deployments": ("Models deployed", _deployments),
    "audit": ("Published audit figures", _audit),
    "leakage": ("Ground truth: leakage per developer (facilitator only)", _leakage),
}
"""Evidence kind -> (title, table builder)."""


def _table(session: ExerciseSession, kind: str, role: str) -> dict[str, Any]:
    if kind in GROUND_TRUTH_EVIDENCE and role != "facilitator":  # the file check's twin
        raise ValueError(f"evidence {kind!r} is the facilitator's alone")
    title, build = TABLES[kind]
    columns, rows = build(session, role)
    return jsonable({"kind": kind, "title": title, "columns": columns, "rows": rows})


def evidence(session: ExerciseSession, role: str) -> dict[str, Any]:
    """The evidence tables ``role`` sees for the pending decision."""
    pending = session.pending
    if pending is None:
        return {"decision": None, "role": role, "tables": []}
    point = session.exercise.point(pending.id)
    assert point is not None
    if role == "facilitator":
        kinds = [k for ks in point.evidence.values() for k in ks] + ["leakage"]
    else:
        kinds = list(point.evidence.get(role, []))
    ordered = [k for k in TABLES if k in kinds]
    return {
        "decision": pending.id,
        "title": pending.title,
        "prompt": pending.prompt,
        "role": role,
        "tables": [_table(session, k, role) for k in ordered],
    }


# -- timeline and status -------------------------------------------------------------------------


class TimelineEntry(NamedTuple):
    """One line of a timeline, with the ``seq`` of the log event it comes from."""

    t: float
    """Simulated hours."""
    seq: int
    """The log event's sequence number: the order of entries of the same moment."""
    kind: str
    text: str


def timeline(session: ExerciseSession, role: str) -> list[dict[str, Any]]:
    """What happened so far as ``role`` may see it, in time order."""
    return record_timeline(session.record, role)


def record_timeline(r: Record, role: str) -> list[dict[str, Any]]:
    """The timeline of a record as ``role`` may see it (the report's is the facilitator's).

    The entries carry no sequence number: it counts every log event, the facilitator's ground
    truth included, so a gap would tell a role that something it does not see happened.
    """
    return [
        {"t": round(e.t, 4), "clock": clock(e.t), "kind": e.kind, "text": e.text}
        for e in timeline_entries(r, role)
    ]


def timeline_entries(r: Record, role: str) -> list[TimelineEntry]:
    """The timeline of a record as ``role`` may see it, ordered by time, then by the log's
    order of events (a chain of decisions at one moment reads as it happened)."""
    entries: list[TimelineEntry] = []

    def add(item: dict[str, Any], kind: str, text: str) -> None:
        entries.append(TimelineEntry(item["t"], item["seq"], kind, text))

    for i in r.injects:
        if i["text"] and _sees(role, i["to"]):
            add(i, "inject", f"[{i['category']}] {i['text']}")
    if role in ALERT_ROLES:
        for a in r.alerts:
            add(
                a,
                "alert",
                f"auditor alert ({a['detector']}) on {a['developer']} of {a['organization']}: "
                f"{a['evidence']}",
            )
    for p in r.reached:
        add(p, "decision_point", f"decision point: {p['title']}")
    for d in r.decisions:
        why = f" - {d['rationale']}" if d["rationale"] else ""
        add(d, "decision", f"{d['title']}: {d['label']} (decided by {d['by']}){why}")
    for m in r.messages:
        if _sees(role, m["to"]):
            add(m, "message", m["text"])
    for c in r.policy:
        add(c, "policy", "policy changed: " + "; ".join(c["policy"][1:] or c["policy"]))
    for c in r.policy_refused:
        add(c, "policy", f"policy change {c['action']['kind']} not applied: {c['reason']}")
    for s in r.suspensions:
        who = s["organization"] or s["identity"]
        add(s, "suspension", f"{s['change']}: {who}")
    for a in r.auditor_started:
        add(a, "auditor", "the external auditor starts reading the query log")
    for a in r.audits:
        privacy = f"epsilon {a['epsilon']:g}, add/remove one record"
        if a["epsilon_attribute_change"] is not None:
            privacy += f"; {a['epsilon_attribute_change']:g} if one person's attribute changes"
        add(
            a,
            "audit",
            f"audit published: selection-rate difference {a['rate_difference']:+.4f} ({privacy})",
        )
    if role in DEPLOY_ROLES:
        for i, d in sorted(r.deployments.items()):
            add(d, "deployment", f"{i} deployed {deployment_text(d) or 'no model'}")
    if role == "facilitator":
        for j in r.joined:
            add(
                j,
                "joined",
                f"{', '.join(j['identities'])} ({j['strategy']}) joined {j['organization']}",
            )
        for identity, series in r.leakage.items():
            seqs = r.leakage_seq.get(identity, [])
            for level in MILESTONES:
                hit = next((k for k, (_, v) in enumerate(series) if v >= level), None)
                if hit is not None:
                    item = {"t": series[hit][0], "seq": seqs[hit] if hit < len(seqs) else 0}
                    add(item, "ground_truth", f"{identity}'s leakage reached {level:g}%")
    entries.sort(key=lambda e: (e.t, e.seq))
    return entries


def status(session: ExerciseSession, role: str) -> dict[str, Any]:
    """The state of the exercise as ``role`` may see it."""
    r = session.record
    ex = session.exercise
    pending = session.pending
    out: dict[str, Any] = {
        "exercise": ex.name,
        "title": ex.title,
        "role": role,
        "roles": list(ex.roles),
        "clock_hours": round(session.now, 4),
        "clock": clock(session.now),
        "horizon_hours": session.loaded.horizon_hours,
        "finished": session.finished,
        "interrupted": session.interrupted,
        "pending": None
        if pending is None
        else {
            "id": pending.id,
            "title": pending.title,
            "prompt": pending.prompt,
            "owner": pending.owner,
            "options": [
                {"id": i, "label": label, "description": d} for i, label, d in pending.options
            ],
        },
        "messages": [
            {"t": round(m["t"], 4), "category": m["category"], "text": m["text"]}
            for m in _visible_messages(session, role)
        ],
        "decisions": [
            {k: d[k] for k in ("decision", "title", "option", "label", "by", "rationale")}
            | {"t": round(d["t"], 4)}
            for d in r.decisions
        ],
        "policy": describe_policy(session._ctx.config),
        "epsilon_spent": {org: round(v, 6) for org, v in sorted(r.epsilon_total.items())},
        "alerts": len(r.alerts),
    }
    if role in QUERY_ROLES:
        out["models_answered"] = dict(sorted(r.answered.items()))
        out["models_refused"] = r.refused_total()
    if role == "facilitator":
        latest, highest = r.latest_leakage(), r.max_leakage()
        out["ground_truth"] = {
            "developers": {
                i: {
                    "organization": d["organization"],
                    "strategy": d["strategy"],
                    "leakage": round(latest[i], 4),
                    "max_leakage": round(highest[i], 4),
                    "revealed": r.revealed.get(i),
                }
                for i, d in r.developers.items()
            },
            "audit_errors": [round(e, 6) for e in r.audit_errors],
        }
    return jsonable(out)
