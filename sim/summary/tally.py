"""Counting a run's log events into the pieces of its summary (see :mod:`biasleak.sim.summary`).

A :class:`Tally` walks the events once, one small handler per event kind (:data:`HANDLERS`);
the helpers after it turn the tallies into the compliance totals, the privacy losses and leakage
ceilings per developer and organisation, and the prior guesses of developers that never formed an
estimate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.services import TOO_SMALL
from biasleak.agents.strategies import PROXY_KINDS
from biasleak.agents.strategies.honest import choose_deployment
from biasleak.mechanisms.ceiling import (
    DEFAULT_DELTA,
    EO_FAMILY,
    AuditSizes,
    ReleaseSpec,
    privacy_loss,
    proxy_prior_ceiling,
)
from biasleak.mechanisms.ceiling import (
    ceilings as level_ceilings,
)
from biasleak.mechanisms.policy.noise import UNDEFINED
from biasleak.sim.exposure import service_specs

if TYPE_CHECKING:
    from biasleak.sim.summary import ComplianceSummary, OrganizationSummary


_SCORES = (
    "leakage",
    "leakage_relabelled",
    "revealed",
    "confident_right",
    "confident_wrong",
    "tpr_at_1pct_fpr",
)
"""The scores of an ``evaluation`` event a developer's summary keeps from its latest one."""

METRIC_ROUTE = "metric_queries"
"""The route of fairness-metric queries (the other routes are the services' kinds)."""

_SERVICE_SCORES = (
    "service",
    "error",
    "eo_violation",
    "base_error",
    "base_eo_violation",
    "disparate_treatment",
)
"""What a developer's summary keeps of its ``service_evaluation`` event."""


class Tally:
    """What the events add up to, read once in log order: one method per kind of event."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.developers = {d["id"]: _developer_record(d) for d in header.get("developers", [])}
        """Each developer's summary being filled, in header order."""
        self.bounding, self.sampler = _noise_settings(header)
        """How the run's noise stage bounds the predictions and samples its noise."""
        self.audit: dict[str, Any] = header.get("audit") or {}
        """The audit set's size and group sizes (the evaluator's facts)."""
        self.min_cell = _min_cell_bound(header)
        """The largest public cell bound of the run's services (0 without one)."""
        self.releases: dict[str, list[ReleaseSpec]] = defaultdict(list)
        """The releases each developer received: its own, and cached ones first released to
        other identities."""
        self.org_releases: dict[str, list[ReleaseSpec]] = defaultdict(list)
        """The releases each organisation's identities received (each once)."""
        self._pending: dict[str, tuple[str, str | None, int, int]] = {}
        """Query id -> (sender, organisation, index in each list) of its fresh release, until the
        compliance side's internal record gives its noise scale."""
        self.asked_eo: set[str] = set()
        """Developers that asked an equal-opportunity metric (answered or refused)."""
        self.exposure: dict[tuple[str, str], dict[str, Any]] = {}
        """(``developer`` or ``organization``, id) -> its ``exposure`` event."""
        self.queries: dict[str, list[tuple[str, int]]] = defaultdict(list)
        """Each developer's ``(query id, models)``, in the order sent."""
        self.answered_ids: set[str] = set()
        """The queries the developers got answers to."""
        self.reports: dict[str, dict[str, Any]] = {}
        """The report each developer gave when it stopped (an honest one's candidates)."""
        self.exact: dict[str, list[float]] = {}
        """The exact values of each freshly released query."""
        self.errors: dict[str, list[float]] = defaultdict(list)
        """|released - exact| of every freshly released model, per metric."""
        self.epsilon_spent = 0.0
        """The epsilon the compliance side charged, over all answers."""
        self.answered = 0
        """Models the compliance side answered."""
        self.refused: dict[str, int] = defaultdict(int)
        """Models the compliance side refused, by reason."""
        self.alerts: dict[str, int] = defaultdict(int)
        """The auditor's alerts, per detector."""
        self.routes: dict[str, set[str]] = defaultdict(set)
        """The routes each developer took: ``metric_queries`` or a service's kind."""
        self.public: list[ReleaseSpec] = []
        """The publications' releases (every developer and organisation reads them)."""
        self.services_seen = False
        """Whether any developer asked for a fair-learning service (the run has routes)."""

    def _sender(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The summary of the developer whose own event this is (None: not a developer's)."""
        agent = event.get("agent")
        return self.developers.get(agent) if agent is not None else None

    def query_sent(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["sent"] += e["models"]
            self.queries[e["agent"]].append((e["query_id"], e["models"]))
            self.routes[e["agent"]].add(METRIC_ROUTE)
            if e.get("metric") in EO_FAMILY:
                self.asked_eo.add(e["agent"])

    def answer_received(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["answered"] += e["models"]
            d["epsilon_spent"] += _number(e["epsilon_charged"])
            self.answered_ids.add(e["query_id"])

    def refusal_received(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["refused"][e["reason"]] = d["refused"].get(e["reason"], 0) + e["models"]

    def query_timeout(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["refused"]["timeout"] = d["refused"].get("timeout", 0) + e["models"]

    def developer_stopped(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["stopped"] = e["reason"]
            self.reports[e["agent"]] = e.get("report") or {}

    def strategy_error(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["error"] = e["error"]

    def evaluation(self, e: dict[str, Any]) -> None:
        """The evaluator scored a developer's new estimate: its scores replace the last ones."""
        if e.get("developer") not in self.developers:
            return
        d = self.developers[e["developer"]]
        for key in _SCORES:
            d[key] = e[key]
        d["estimated"] = True
        d["calibration_090"] = e.get("calibration_090")
        d["calibration_090_people"] = e.get("calibration_090_people")
        for level in (90, 100):
            if d[f"queries_to_{level}"] is None and e["leakage"] >= level - 1e-9:
                d[f"queries_to_{level}"] = d["answered"]
                d[f"hours_to_{level}"] = e["t"]

    def population(self, metric: str) -> int:
        """The number of people ``metric`` is computed on (those with y = 1 for EO)."""
        if metric in EO_FAMILY:
            return int(self.audit.get("n11", 0)) + int(self.audit.get("n10", 0))
        return int(self.audit.get("n", 0))

    def _add(self, sender: str, organization: str | None, spec: ReleaseSpec) -> None:
        self.releases[sender].append(spec)
        if organization is not None:
            self.org_releases[organization].append(spec)

    def query_answered(self, e: dict[str, Any]) -> None:
        self.answered += e["models"]
        self.epsilon_spent += _number(e["epsilon_charged"])
        sender, org = e["sender"], e.get("organization")
        metric = str(e.get("metric", "sp"))
        spec = _release(e, self.bounding, self.sampler, self.population(metric))
        if spec is not None:
            self._add(sender, org, spec)
            self._pending[e["query_id"]] = (
                sender,
                org,
                len(self.releases[sender]) - 1,
                len(self.org_releases[org]) - 1 if org is not None else -1,
            )
        # cached answers first released to another identity (organisation) reach a new reader
        for key, target in (("foreign", self.releases[sender]), ("foreign_organization", None)):
            for group in e.get(key) or []:
                foreign = _foreign_release(group, metric, self.population(metric))
                if target is not None:
                    target.append(foreign)
                elif org is not None:
                    self.org_releases[org].append(foreign)

    def query_refused(self, e: dict[str, Any]) -> None:
        self.refused[e["reason"]] += e["models"]
        if attribute_dependent(e.get("reason"), e.get("detail")):
            self._add(e["sender"], e.get("organization"), ReleaseSpec("exact", math.inf))

    def release_internal(self, e: dict[str, Any]) -> None:
        """The compliance side's own record of a fresh release: exact and released values."""
        pending = self._pending.pop(e["query_id"], None)
        if pending is not None:  # the release's noise scale, for the audit-set ceiling
            sender, org, i, j = pending
            scale = _number(e.get("noise_scale", 0.0) or 0.0)
            self.releases[sender][i] = replace(self.releases[sender][i], scale=scale)
            if org is not None and j >= 0:
                self.org_releases[org][j] = replace(self.org_releases[org][j], scale=scale)
        self.exact[e["query_id"]] = [_number(v) for v in _flat(e["exact"])]
        released = [_number(v) for v in _flat(e["released"])]
        diffs = [abs(r - x) for r, x in zip(released, self.exact[e["query_id"]], strict=True)]
        self.errors[e["metric"]].extend(diffs)

    def alert_raised(self, e: dict[str, Any]) -> None:
        self.alerts[e["detector"]] += 1

    # -- private fair-learning services (biasleak.agents.services) ---------------------------

    def service_requested(self, e: dict[str, Any]) -> None:
        if self._sender(e) is not None:
            self.routes[e["agent"]].add(e["service"])
            self.services_seen = True

    def service_received(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["epsilon_spent"] += _number(e["epsilon_charged"])

    def service_refusal_received(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["refused"][e["reason"]] = d["refused"].get(e["reason"], 0) + 1

    def service_timeout(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["refused"]["timeout"] = d["refused"].get("timeout", 0) + 1

    def service_answered(self, e: dict[str, Any]) -> None:
        """A service ran: its charge, and its releases for the ceilings (a result served from
        the cache counts only when it was first released to another identity)."""
        self.epsilon_spent += _number(e["epsilon_charged"])
        if e.get("cached"):
            if not e.get("foreign"):
                return
            e = {
                **e,
                "epsilon_charged": e["first_epsilon_charged"],
                "delta_charged": e["first_delta_charged"],
            }
        for spec in service_specs(e):
            self._add(e["sender"], e.get("organization"), spec)

    def audit_published(self, e: dict[str, Any]) -> None:
        """A publication reaches every reader: its guarantee (under the rule that one person's
        attribute changes) enters every developer's and organisation's ceilings; the same
        figures published again (cached) add nothing."""
        if not e.get("cached"):
            self.public.append(ReleaseSpec("service", _number(e["epsilon_attribute_change"])))

    def service_refused(self, e: dict[str, Any]) -> None:
        self.refused[e["reason"]] += 1
        if attribute_dependent(e.get("reason"), e.get("detail")):
            self._add(e["sender"], e.get("organization"), ReleaseSpec("exact", math.inf))

    def exposure_event(self, e: dict[str, Any]) -> None:
        """The evaluator's answers-level accounting of one developer or organisation."""
        for kind in ("developer", "organization"):
            if e.get(kind) is not None:
                self.exposure[(kind, e[kind])] = e

    def service_evaluation(self, e: dict[str, Any]) -> None:
        """The evaluator scored a service user's final model on people outside the audit set."""
        if e.get("developer") in self.developers:
            self.developers[e["developer"]]["service"] = {k: e[k] for k in _SERVICE_SCORES}

    def honest_outcome(self, ident: str) -> dict[str, Any]:
        """``deployed``, ``deployed_agrees`` and ``metric_error`` of an honest developer.

        Its answered queries, in the order sent, answer its answered candidates in candidate
        order (one query per candidate, or one batch), so the exact values the compliance side
        logged line up with them.
        """
        report = self.reports.get(ident, {})
        answers = report.get("answers") or []
        deployed = report.get("deployed")
        answered = [i for i, v in enumerate(answers) if v is not None]
        exact_values = [
            v
            for q, _ in self.queries[ident]
            if q in self.answered_ids
            for v in self.exact.get(q, [])
        ]
        if deployed is None or not answered or len(exact_values) != len(answered):
            # nothing deployed, or some values came from the cache (no fresh exact value logged)
            return {"deployed": deployed, "deployed_agrees": None, "metric_error": None}
        aligned = dict(zip(answered, exact_values, strict=True))
        exact_choice = choose_deployment(
            report.get("accuracies") or [],
            [aligned.get(i) for i in range(len(answers))],
            float(report.get("accuracy_tolerance", 0.0)),
        )
        diffs = [abs(_number(answers[i]) - aligned[i]) for i in answered]
        return {
            "deployed": deployed,
            "deployed_agrees": exact_choice == deployed,
            "metric_error": float(np.mean(diffs)),
        }


HANDLERS: dict[str, Callable[[Tally, dict[str, Any]], None]] = {
    "query_sent": Tally.query_sent,
    "answer_received": Tally.answer_received,
    "refusal_received": Tally.refusal_received,
    "query_timeout": Tally.query_timeout,
    "developer_stopped": Tally.developer_stopped,
    "strategy_error": Tally.strategy_error,
    "evaluation": Tally.evaluation,
    "query_answered": Tally.query_answered,
    "query_refused": Tally.query_refused,
    "release_internal": Tally.release_internal,
    "alert_raised": Tally.alert_raised,
    "service_requested": Tally.service_requested,
    "service_received": Tally.service_received,
    "service_refusal_received": Tally.service_refusal_received,
    "service_timeout": Tally.service_timeout,
    "service_answered": Tally.service_answered,
    "service_refused": Tally.service_refused,
    "audit_published": Tally.audit_published,
    "service_evaluation": Tally.service_evaluation,
    "exposure": Tally.exposure_event,
}
"""The events a summary counts, by kind; every other kind (a summary line too) is skipped."""


def compliance_totals(tally: Tally) -> ComplianceSummary:
    """The compliance side's totals and the errors of its fresh releases."""
    every = [x for values in tally.errors.values() for x in values]
    return {
        "epsilon_spent": tally.epsilon_spent,
        "answered": tally.answered,
        "refused": dict(sorted(tally.refused.items())),
        "mean_abs_error": float(np.mean(every)) if every else None,
        "median_abs_error": float(np.median(every)) if every else None,
        "by_metric": {
            metric: {
                "models": len(values),
                "mean_abs_error": float(np.mean(values)),
                "median_abs_error": float(np.median(values)),
            }
            for metric, values in sorted(tally.errors.items())
        },
    }


def ceilings(tally: Tally, prior: NDArray[np.float64] | None) -> dict[str, OrganizationSummary]:
    """Each developer's ceilings (written into its summary), and each organisation's."""
    members: dict[str, list[str]] = defaultdict(list)
    for ident, d in tally.developers.items():
        proxy = d["strategy"] in PROXY_KINDS
        d.update(
            _ceiling(
                tally,
                [*tally.releases[ident], *tally.public],
                [ident],
                proxy,
                prior,
                ("developer", ident),
            )
        )
        if d["organization"] is not None:
            members[d["organization"]].append(ident)
    return {
        org: {
            "developers": idents,
            **_ceiling(
                tally,
                [*tally.org_releases[org], *tally.public],
                idents,
                any(tally.developers[i]["strategy"] in PROXY_KINDS for i in idents),
                prior,
                ("organization", org),
            ),
        }
        for org, idents in sorted(members.items())
    }


def score_prior_guesses(developers: dict[str, dict[str, Any]], baseline: Any) -> None:
    """Developers without an estimate are scored at their prior guess: a coin flip, or the
    proxy's guess for attackers that start from the proxy model."""
    for d in developers.values():
        if not d["estimated"]:
            proxy = d["strategy"] in PROXY_KINDS
            d["leakage"] = float(baseline) if proxy and baseline is not None else 50.0
            d["leakage_relabelled"] = max(d["leakage"], 100.0 - d["leakage"])


def attribute_dependent(reason: Any, detail: Any) -> bool:
    """Whether a refusal depends on the protected attribute (then it is an exact release): an
    undefined metric (a group with nobody of y = 1), or a service's cell below its bound."""
    text = str(detail or "")
    undefined = UNDEFINED.split("{metric!r}")[-1]
    small = TOO_SMALL.split("{bound}")[0]
    return (reason == "invalid" and text.endswith(undefined)) or (
        reason == "service_unavailable" and text.startswith(small)
    )


def _sizes(audit: dict[str, Any]) -> AuditSizes | None:
    """The audit set's group sizes from the header (None when a log predates them)."""
    try:
        return AuditSizes(int(audit["n1"]), int(audit["n0"]), int(audit["n11"]), int(audit["n10"]))
    except (KeyError, TypeError, ValueError):
        return None


def _at_edge(tally: Tally, idents: list[str]) -> bool:
    """Whether a flip could change an attribute-dependent refusal for these developers: an
    equal-opportunity metric on an audit set with a group of at most one person with y = 1, or
    a service with a cell bound on an audit set with a cell at most that bound."""
    audit = tally.audit
    strata = [int(audit.get(k, 0)) for k in ("n11", "n10", "n01", "n00")]
    if any(i in tally.asked_eo for i in idents) and min(strata[:2]) <= 1:
        return True
    services = any(set(tally.routes.get(i, ())) - {METRIC_ROUTE} for i in idents)
    return services and tally.min_cell > 0 and min(strata) <= tally.min_cell


def _ceiling(
    tally: Tally,
    releases: list[ReleaseSpec],
    idents: list[str],
    proxy: bool,
    prior: NDArray[np.float64] | None,
    who: tuple[str, str],
) -> dict[str, Any]:
    """The three ceilings (percent) of some releases, their kind and the privacy loss.

    ``leakage_ceiling`` is the policy level, ``audit_set_ceiling`` and ``answers_ceiling`` the
    tighter levels (see :mod:`biasleak.mechanisms.ceiling`); ``person_ceiling`` the per-person
    bounds at each level; ``exposure`` who is exposed at the answers level.
    """
    sizes = _sizes(tally.audit)
    levels = level_ceilings(releases, sizes)
    exposure = tally.exposure.get(who)
    if any(spec.exact for spec in releases):  # an exact release: every level is 100%
        base = exposure or {"people": None, "person_mean": 100.0, "exposed": {}, "most_exposed": []}
        exposure = {**base, "person": 100.0, "balanced_accuracy": 100.0, "proxy_prior": 100.0}
    edge = _at_edge(tally, idents)
    policy, audit = levels.policy, levels.audit_set

    def pct(x: float) -> float:
        return 100.0 * x

    person: dict[str, float | None] = {
        "policy": pct(policy.person),
        "audit_set": None if audit is None else (100.0 if edge else pct(audit.person)),
        "answers": None,
    }
    if exposure is not None and audit is not None:
        person["answers"] = 100.0 if edge else min(exposure["person"], pct(audit.person))
    if not proxy:
        top = pct(policy.balanced_accuracy)
        middle = None if audit is None else pct(audit.balanced_accuracy)
        bottom = None
        if exposure is not None and middle is not None:
            bottom = min(exposure["balanced_accuracy"], middle)
    elif prior is not None:
        top = proxy_prior_ceiling(policy.flips, prior)
        middle = (
            None if audit is None else (100.0 if edge else proxy_prior_ceiling(audit.flips, prior))
        )
        bottom = None
        if exposure is not None and middle is not None and exposure.get("proxy_prior") is not None:
            bottom = 100.0 if edge else min(exposure["proxy_prior"], middle)
    else:  # the priors were not logged: no ceiling can be proved
        top = middle = bottom = None
    exposed = None
    if exposure is not None:
        exposed = {
            "people": exposure["people"],
            "person_mean": exposure["person_mean"],
            "exposed": exposure["exposed"],
            "most_exposed": exposure["most_exposed"],
        }
    return {
        "privacy_loss": privacy_loss(releases, DEFAULT_DELTA),
        "leakage_ceiling": top,
        "audit_set_ceiling": middle,
        "answers_ceiling": bottom,
        "person_ceiling": person,
        "exposure": exposed,
        "ceiling_kind": "proxy_prior" if proxy else "no_side_information",
    }


def _developer_record(spec: dict[str, Any]) -> dict[str, Any]:
    """A developer's summary before any event: every key in place, in the summary's order."""
    return {
        "organization": spec.get("organization"),
        "strategy": spec.get("strategy"),
        "leakage": None,
        "leakage_relabelled": None,
        "revealed": None,
        "confident_right": None,
        "confident_wrong": None,
        "tpr_at_1pct_fpr": None,
        "estimated": False,
        "calibration_090": None,
        "calibration_090_people": None,
        "leakage_ceiling": None,
        "audit_set_ceiling": None,
        "answers_ceiling": None,
        "person_ceiling": None,
        "exposure": None,
        "ceiling_kind": None,
        "privacy_loss": None,
        "sent": 0,
        "answered": 0,
        "refused": {},
        "epsilon_spent": 0.0,
        "queries_to_90": None,
        "queries_to_100": None,
        "hours_to_90": None,
        "hours_to_100": None,
        "stopped": None,
        "error": None,
    }


def _noise_settings(header: dict[str, Any]) -> tuple[str, str]:
    """``(bounding, sampler)`` of the run's noise stage, from the resolved scenario."""
    compliance = (header.get("resolved_scenario") or {}).get("compliance") or {}
    for stage in compliance.get("policy") or []:
        if isinstance(stage, dict) and stage.get("kind") == "noise":
            return str(stage.get("bounding", "raw")), str(stage.get("sampler", "safe"))
    return "raw", "safe"


def _min_cell_bound(header: dict[str, Any]) -> int:
    """The largest ``min_cell_size`` of the run's services (0 when none has one)."""
    compliance = (header.get("resolved_scenario") or {}).get("compliance") or {}
    bounds = [
        int(s.get("min_cell_size") or 0)
        for s in compliance.get("services") or []
        if isinstance(s, dict)
    ]
    return max(bounds, default=0)


def _release(
    event: dict[str, Any], bounding: str, sampler: str, population: int
) -> ReleaseSpec | None:
    """The privacy-relevant facts of one ``query_answered`` event (None: nothing fresh)."""
    fresh = int(event["models"]) - int(event.get("cached", 0) or 0)
    epsilon = _number(event["epsilon_charged"])
    if fresh <= 0 or epsilon == 0.0:  # served from the cache: released earlier
        return None
    mechanism = str(event["mechanism"])
    if sampler == "naive":  # floating-point noise: no proven guarantee, counted as exact
        mechanism = "exact"
    delta = _number(event.get("delta_charged", 0.0) or 0.0)
    metric = str(event.get("metric", "sp"))
    return ReleaseSpec(mechanism, epsilon, delta, fresh, bounding, metric, population)


def _foreign_release(group: list[Any], metric: str, population: int) -> ReleaseSpec:
    """A group of cached answers first released to someone else, as one release."""
    mechanism, per_epsilon, per_delta, bounding, sampler, models = group
    if sampler == "naive":
        mechanism = "exact"
    k = int(models)
    return ReleaseSpec(
        str(mechanism),
        _number(per_epsilon) * k,
        _number(per_delta) * k,
        k,
        str(bounding),
        metric,
        population,
    )


def _number(value: Any) -> float:
    """A logged number as a float (``"inf"``, ``"-inf"`` and ``"nan"`` are logged as strings)."""
    return float(value)


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, list) else [v])
    return out
