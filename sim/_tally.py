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
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.strategies import PROXY_KINDS
from biasleak.agents.strategies.honest import choose_deployment
from biasleak.mechanisms.ceiling import DEFAULT_DELTA, ReleaseSpec, compose, proxy_prior_ceiling

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

_TABLE_CELLS = 8
"""Cells of the post-processing table (prediction x group x label), released together."""


class Tally:
    """What the events add up to, read once in log order: one method per kind of event."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.developers = {d["id"]: _developer_record(d) for d in header.get("developers", [])}
        """Each developer's summary being filled, in header order."""
        self.bounding, self.sampler = _noise_settings(header)
        """How the run's noise stage bounds the predictions and samples its noise."""
        self.releases: dict[str, list[ReleaseSpec]] = defaultdict(list)
        """The fresh releases each developer received."""
        self.org_releases: dict[str, list[ReleaseSpec]] = defaultdict(list)
        """The fresh releases each organisation's identities received."""
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

    def query_answered(self, e: dict[str, Any]) -> None:
        self.answered += e["models"]
        self.epsilon_spent += _number(e["epsilon_charged"])
        spec = _release(e, self.bounding, self.sampler)
        if spec is not None:
            self.releases[e["sender"]].append(spec)
            if e.get("organization") is not None:
                self.org_releases[e["organization"]].append(spec)

    def query_refused(self, e: dict[str, Any]) -> None:
        self.refused[e["reason"]] += e["models"]

    def release_internal(self, e: dict[str, Any]) -> None:
        """The compliance side's own record of a fresh release: exact and released values."""
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
        """A service ran: its charge, and its releases for the ceilings."""
        self.epsilon_spent += _number(e["epsilon_charged"])
        for spec in _service_releases(e):
            self.releases[e["sender"]].append(spec)
            if e.get("organization") is not None:
                self.org_releases[e["organization"]].append(spec)

    def service_refused(self, e: dict[str, Any]) -> None:
        self.refused[e["reason"]] += 1

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
    "service_evaluation": Tally.service_evaluation,
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
    """Each developer's ceiling (written into its summary), and each organisation's."""
    members: dict[str, list[str]] = defaultdict(list)
    for ident, d in tally.developers.items():
        d.update(_ceiling(tally.releases[ident], d["strategy"] in PROXY_KINDS, prior))
        if d["organization"] is not None:
            members[d["organization"]].append(ident)
    return {
        org: {
            "developers": idents,
            **_ceiling(
                tally.org_releases[org],
                any(tally.developers[i]["strategy"] in PROXY_KINDS for i in idents),
                prior,
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


def _ceiling(
    releases: list[ReleaseSpec], proxy: bool, prior: NDArray[np.float64] | None
) -> dict[str, Any]:
    """``privacy_loss``, ``leakage_ceiling`` (percent) and ``ceiling_kind`` of some releases."""
    composition = compose(releases)
    if not proxy:
        ceiling: float | None = 100.0 * composition.balanced_accuracy()
    elif prior is not None:
        ceiling = proxy_prior_ceiling(composition, prior)
    else:  # the priors were not logged: no ceiling can be proved
        ceiling = None
    return {
        "privacy_loss": composition.privacy_loss(DEFAULT_DELTA),
        "leakage_ceiling": ceiling,
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


def _release(event: dict[str, Any], bounding: str, sampler: str) -> ReleaseSpec | None:
    """The privacy-relevant facts of one ``query_answered`` event (None: nothing fresh)."""
    fresh = int(event["models"]) - int(event.get("cached", 0) or 0)
    epsilon = _number(event["epsilon_charged"])
    if fresh <= 0 or epsilon == 0.0:  # served from the cache: released earlier, adds nothing
        return None
    mechanism = str(event["mechanism"])
    if sampler == "naive":  # floating-point noise: no proven guarantee, counted as exact
        mechanism = "exact"
    delta = _number(event.get("delta_charged", 0.0) or 0.0)
    return ReleaseSpec(mechanism, epsilon, delta, fresh, bounding)


def _service_releases(event: dict[str, Any]) -> list[ReleaseSpec]:
    """The releases of one ``service_answered`` event, for the ceilings.

    Post-processing releases the table's cells together at ``epsilon`` (pure; several values at
    once: the generic pure PLD); the oracle learner composes 2T vector Laplace mechanisms at the
    per-mechanism epsilon it logged. A non-private service (``epsilon = inf``) is exact.
    """
    epsilon = _number(event["epsilon_charged"])
    if math.isinf(epsilon):
        return [ReleaseSpec("exact", math.inf)]
    if event["service"] == "dp_postprocessing":
        return [ReleaseSpec("laplace", epsilon, 0.0, _TABLE_CELLS)]
    per = _number(event["per_mechanism_epsilon"])
    return [ReleaseSpec("laplace", per, 0.0, 2)] * (2 * int(event["rounds"]))


def _number(value: Any) -> float:
    """A logged number as a float (``"inf"``, ``"-inf"`` and ``"nan"`` are logged as strings)."""
    return float(value)


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, list) else [v])
    return out
