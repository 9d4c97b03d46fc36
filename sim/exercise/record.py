"""What an exercise has seen so far: its log events, digested into the facts views and reports read.

A :class:`Record` takes the run's log events one at a time, in order, as dicts with ``agent``,
``event``, ``t`` (simulated hours) and the event's fields. During an exercise the world's loggers
hand each event over as it is logged (:class:`biasleak.sim.world.World`'s listener); for the
after-action report the same record is rebuilt from the log file alone, so what the room saw and
what the report says come from one source, the log.

It keeps: the developers (from the header and the joiners), every leakage score over time (the
evaluator's ground truth, which only the facilitator's views and the report read), the epsilon
charged per organisation over time, answered and refused models, the auditor's alerts, the
honest developers' deployments (a candidate picked from metric answers, or the model a
fair-learning service delivered), published audits, and the exercise's own events (injects,
decision points reached, decisions, messages, policy changes and refused ones, suspensions).

Every fact keeps the ``seq`` of the event it came from (the log's sequence number; during an
exercise the record counts the events it is handed, which are the log's events in the log's
order), so that facts of the same simulated moment can be put back in the order they happened.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

__all__ = ["HONEST_STRATEGIES", "Record", "clock", "deployment_text"]

HONEST_STRATEGIES: Final = frozenset(
    {"honest_selection", "request_postprocessing", "request_fair_training"}
)
"""Strategies of honest developers: pick the fairest candidate from metric answers, or ask a
fair-learning service for a fair model."""


def clock(t: float) -> str:
    """Simulated hours as people read them: ``day 2, 06:00`` (day 1 starts at hour 0)."""
    day, rest = divmod(t, 24.0)
    minutes = round(rest * 60.0)
    if minutes == 1440:  # 23:59.99 rounds up to the next day
        day, minutes = day + 1, 0
    return f"day {int(day) + 1}, {minutes // 60:02d}:{minutes % 60:02d}"


def deployment_text(deployment: dict[str, Any]) -> str | None:
    """What a deployment put in service, in words (None: no model was deployed)."""
    if deployment.get("service") is not None:
        return f"the {deployment['service']} model"
    if deployment.get("deployed") is not None:
        return f"candidate {deployment['deployed']}"
    return None


def _num(value: Any) -> float:
    """A logged number as a float (non-finite numbers are logged as strings)."""
    return float(value)


class Record:
    """The digest of an exercise run's log events (see the module docstring)."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.developers: dict[str, dict[str, Any]] = {
            d["id"]: {"organization": d.get("organization"), "strategy": d.get("strategy")}
            for d in header.get("developers", [])
        }
        """Identity -> organisation and strategy kind (ground truth: the strategy)."""
        self.leakage: dict[str, list[tuple[float, float]]] = defaultdict(list)
        """Identity -> (hours, leakage %) of every scored estimate. Ground truth."""
        self.leakage_seq: dict[str, list[int]] = defaultdict(list)
        """Identity -> the ``seq`` of each of its scores (parallel to :attr:`leakage`)."""
        self.revealed: dict[str, int] = {}
        """Identity -> people its latest estimate has right. Ground truth."""
        self.epsilon: dict[str, list[tuple[float, float]]] = defaultdict(list)
        """Organisation -> (hours, cumulative epsilon charged) after every charge."""
        self.epsilon_total: dict[str, float] = defaultdict(float)
        self.published_epsilon = 0.0
        """What the publications charged every reader (under the attribute-change rule)."""
        self.answered: dict[str, int] = defaultdict(int)
        """Identity -> models answered."""
        self.refused: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        """Identity -> refusal reason -> models refused."""
        self.organization_of: dict[str, str] = {
            i: d["organization"] for i, d in self.developers.items()
        }
        self.alerts: list[dict[str, Any]] = []
        """The auditor's alerts: hours, developer, organization, detector, evidence."""
        self.deployments: dict[str, dict[str, Any]] = {}
        """Honest identity -> hours, deployed candidate (or None), the service whose model it
        deployed (or None) and why it stopped, when it stopped."""
        self.audits: list[dict[str, Any]] = []
        """Published audits (public figures)."""
        self.audit_errors: list[float] = []
        """|published - exact| of each audit's rate difference. Ground truth."""
        self.injects: list[dict[str, Any]] = []
        """Injects that fired: hours, id, kind, category, text, to."""
        self.joined: list[dict[str, Any]] = []
        """Developers that joined: hours, identities, organization, strategy (facilitator)."""
        self.reached: list[dict[str, Any]] = []
        """Decision points reached: hours, id, title."""
        self.decisions: list[dict[str, Any]] = []
        """Decisions taken: hours, decision, option, label, by, rationale."""
        self.messages: list[dict[str, Any]] = []
        """Messages sent by decisions: hours, cause, text, to."""
        self.policy: list[dict[str, Any]] = []
        """Policy changes: hours, cause, action, policy (lines)."""
        self.policy_refused: list[dict[str, Any]] = []
        """Policy actions that could not apply: hours, cause, action, reason."""
        self.suspensions: list[dict[str, Any]] = []
        """Suspensions and reinstatements: hours, cause, change, organization, identity."""
        self.auditor_started: list[dict[str, Any]] = []
        self.interrupted: float | None = None
        """Hours when the exercise was interrupted, if it was."""
        self.last_t = 0.0
        self.seq = 0
        """The sequence number of the last event digested."""

    @classmethod
    def from_events(cls, events: list[dict[str, Any]]) -> Record:
        """The record of a whole log (header first; the summary line is skipped)."""
        record = cls(events[0])
        for event in events[1:]:
            if event.get("event") != "summary":
                record.add(event)
        return record

    def add(self, e: dict[str, Any]) -> None:
        """Digest one event (``agent``, ``event``, ``t`` and its fields)."""
        kind = e.get("event")
        t = float(e.get("t", 0.0))
        self.last_t = max(self.last_t, t)
        self.seq = int(e["seq"]) if "seq" in e else self.seq + 1
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(e, t)

    # -- the world's events ----------------------------------------------------------------------

    def _on_evaluation(self, e: dict[str, Any], t: float) -> None:
        self.leakage[e["developer"]].append((t, _num(e["leakage"])))
        self.leakage_seq[e["developer"]].append(self.seq)
        self.revealed[e["developer"]] = int(e["revealed"])

    def _charge(self, e: dict[str, Any], t: float) -> None:
        org = e.get("organization") or self.organization_of.get(e.get("sender", ""), "?")
        if org not in self.epsilon_total:  # a reader seen after a publication starts with it
            self.epsilon_total[org] = self.published_epsilon
        self.epsilon_total[org] += _num(e["epsilon_charged"])
        self.epsilon[org].append((t, self.epsilon_total[org]))

    def _on_query_answered(self, e: dict[str, Any], t: float) -> None:
        self._charge(e, t)
        self.answered[e["sender"]] += int(e["models"])

    def _on_service_answered(self, e: dict[str, Any], t: float) -> None:
        self._charge(e, t)

    def _on_query_refused(self, e: dict[str, Any], t: float) -> None:
        self.refused[e["sender"]][e["reason"]] += int(e["models"])

    def _on_alert_raised(self, e: dict[str, Any], t: float) -> None:
        self.alerts.append(
            {
                "t": t,
                "seq": self.seq,
                "developer": e["developer"],
                "organization": e["organization"],
                "detector": e["detector"],
                "evidence": e["evidence"],
            }
        )

    def _on_developer_stopped(self, e: dict[str, Any], t: float) -> None:
        # An honest selection reports the candidate it deployed (``deployed``); a developer that
        # asked a fair-learning service reports the service that delivered its model
        # (``service``, None when the request was refused).
        report = e.get("report") or {}
        if isinstance(report, dict) and ("deployed" in report or "service" in report):
            self.deployments[e["agent"]] = {
                "t": t,
                "seq": self.seq,
                "deployed": report.get("deployed"),
                "service": report.get("service"),
                "reason": e.get("reason"),
            }

    def _on_audit_published(self, e: dict[str, Any], t: float) -> None:
        attribute_change = e.get("epsilon_attribute_change")
        if attribute_change is not None and not e.get("cached"):
            # a publication reaches every reader: it is charged to every organisation
            charge = _num(attribute_change)
            self.published_epsilon += charge
            known = {d["organization"] for d in self.developers.values() if d["organization"]}
            for org in sorted(known | set(self.organization_of.values()) | set(self.epsilon_total)):
                self.epsilon_total[org] += charge
                self.epsilon[org].append((t, self.epsilon_total[org]))
        self.audits.append(
            {
                "t": t,
                "seq": self.seq,
                "epsilon": _num(e["epsilon"]),
                "epsilon_attribute_change": None
                if attribute_change is None
                else _num(attribute_change),
                "rate_difference": _num(e["rate_difference"]),
                "selection_rates": [_num(v) for v in e["selection_rates"]],
                "noise_scale": _num(e["noise_scale"]),
            }
        )

    def _on_audit_internal(self, e: dict[str, Any], t: float) -> None:
        self.audit_errors.append(_num(e["error"]))

    # -- the exercise's own events ----------------------------------------------------------------

    def _on_inject_fired(self, e: dict[str, Any], t: float) -> None:
        self.injects.append(
            {k: e.get(k) for k in ("id", "kind", "category", "text", "to")}
            | {"t": t, "seq": self.seq}
        )

    def _on_developer_joined(self, e: dict[str, Any], t: float) -> None:
        for identity in e["identities"]:
            self.developers.setdefault(
                identity, {"organization": e["organization"], "strategy": e["strategy"]}
            )
            self.organization_of[identity] = e["organization"]
        self.joined.append(
            {
                "t": t,
                "seq": self.seq,
                **{k: e.get(k) for k in ("inject", "identities", "organization", "strategy")},
            }
        )

    def _on_decision_point_reached(self, e: dict[str, Any], t: float) -> None:
        self.reached.append({"t": t, "seq": self.seq, "id": e["decision"], "title": e["title"]})

    def _on_decision_recorded(self, e: dict[str, Any], t: float) -> None:
        keys = ("decision", "title", "option", "label", "by", "rationale")
        self.decisions.append({"t": t, "seq": self.seq, **{k: e.get(k) for k in keys}})

    def _on_message_sent(self, e: dict[str, Any], t: float) -> None:
        self.messages.append(
            {"t": t, "seq": self.seq, "cause": e["cause"], "text": e["text"], "to": e["to"]}
        )

    def _on_policy_changed(self, e: dict[str, Any], t: float) -> None:
        self.policy.append(
            {
                "t": t,
                "seq": self.seq,
                "cause": e["cause"],
                "action": e["action"],
                "policy": e["policy"],
            }
        )

    def _on_policy_change_refused(self, e: dict[str, Any], t: float) -> None:
        self.policy_refused.append(
            {
                "t": t,
                "seq": self.seq,
                "cause": e["cause"],
                "action": e["action"],
                "reason": e["reason"],
            }
        )

    def _on_suspension_changed(self, e: dict[str, Any], t: float) -> None:
        keys = ("cause", "change", "organization", "identity")
        self.suspensions.append({"t": t, "seq": self.seq, **{k: e.get(k) for k in keys}})

    def _on_auditor_started(self, e: dict[str, Any], t: float) -> None:
        if not e.get("already_running"):
            self.auditor_started.append({"t": t, "seq": self.seq, "cause": e["cause"]})

    def _on_exercise_interrupted(self, e: dict[str, Any], t: float) -> None:
        self.interrupted = t

    # -- derived facts ----------------------------------------------------------------------------

    def honest(self) -> list[str]:
        """Honest developers (those that pick among candidates or ask a fair-learning service
        for a model), in header order."""
        return [i for i, d in self.developers.items() if d["strategy"] in HONEST_STRATEGIES]

    def latest_leakage(self) -> dict[str, float]:
        """Identity -> its latest leakage (50: no estimate yet). Ground truth."""
        return {
            i: (self.leakage[i][-1][1] if self.leakage.get(i) else 50.0) for i in self.developers
        }

    def max_leakage(self) -> dict[str, float]:
        """Identity -> the highest leakage it reached (50: no estimate). Ground truth."""
        return {
            i: max((v for _, v in self.leakage.get(i, [])), default=50.0) for i in self.developers
        }

    def refused_total(self) -> dict[str, int]:
        """Refusal reason -> models refused, over everyone."""
        out: dict[str, int] = defaultdict(int)
        for reasons in self.refused.values():
            for reason, count in reasons.items():
                out[reason] += count
        return dict(sorted(out.items()))
