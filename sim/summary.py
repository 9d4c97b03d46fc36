"""A run's summary: what one run came to, rebuilt from its log alone.

Every run ends with a summary line in its log, and :func:`summarize` is what writes it: the run
calls it on its own log file just before closing it, and ``biasleak replay`` calls it on a log
file alone, so the two agree by construction. Nothing but the log goes in (the header first, then
the events in the order they happened; a summary line already there is ignored), and the result
is a plain dict ready for JSON, whose shape the types below spell out: :class:`RunSummary` at
the top, with one :class:`DeveloperSummary` per developer, one :class:`OrganizationSummary` per
organisation, a :class:`ComplianceSummary` and an :class:`AuditorSummary`. The types are only
types: a summary is never built as an object, so reports, sweeps and the replay check read the
same dict as ever.

A summary is built in three steps:

1. A tally walks the events once. Each kind of event it cares about has one small method: the
   developers' own events (``query_sent``, ``answer_received``, ``refusal_received``,
   ``query_timeout``, ``developer_stopped``, ``strategy_error``) count what each developer sent,
   got answered and got refused; the evaluator's ``evaluation`` events carry the latest scores
   of each estimate; the compliance side's ``query_answered``, ``query_refused`` and
   ``release_internal`` events count its answers, collect each fresh release for the privacy
   accounting and the error of every released value against the exact one; the auditor's
   ``alert_raised`` events count its alerts.
2. The ceilings: the releases a developer (or all the identities of an organisation together)
   received are composed into one privacy-loss distribution, which proves how much leakage no
   attacker can exceed (see :mod:`biasleak.mechanisms.ceiling`).
3. The assembly: honest developers get the outcome of their model choice, developers without an
   estimate are scored at their prior guess, and the parts are put together in a fixed order.

In this dict numbers are Python numbers, infinite ones included; the log line spells non-finite
numbers as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (see :mod:`biasleak.sim.runlog`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, Literal, NotRequired, cast

import numpy as np
from numpy.typing import NDArray
from pydantic import ConfigDict, with_config

# pydantic accepts only typing_extensions' TypedDict before Python 3.12 (the tests validate)
from typing_extensions import TypedDict

from biasleak.agents.strategies import PROXY_KINDS
from biasleak.agents.strategies.honest import choose_deployment
from biasleak.mechanisms.ceiling import DEFAULT_DELTA, ReleaseSpec, compose, proxy_prior_ceiling

__all__ = [
    "AuditorSummary",
    "ComplianceSummary",
    "DeveloperSummary",
    "MetricErrors",
    "OrganizationSummary",
    "PrivacyLoss",
    "RunSummary",
    "summarize",
]

_STRICT = ConfigDict(extra="forbid")
"""A key the types do not name is an error when a summary is validated against them."""


@with_config(_STRICT)
class PrivacyLoss(TypedDict):
    """The composed privacy loss of some answers (from the privacy-loss distribution)."""

    epsilon: float | Literal["inf"]
    """Epsilon at ``delta``: ``"inf"`` once an exact answer was given, 0 without any answer."""
    delta: float
    """1e-6 (0 without any answer, or when only basic composition is reported)."""
    pure_epsilon: float | Literal["inf"] | None
    """The sum of the epsilons when every answer was pure eps-DP, else null."""


@with_config(_STRICT)
class DeveloperSummary(TypedDict):
    """What one developer sent, was told and came to know."""

    organization: str | None
    """The organisation the developer belongs to."""
    strategy: str | None
    """Its strategy kind (``honest_selection`` for an honest developer)."""
    leakage: float
    """Leakage of the latest estimate: ``50 (N_A/N1 + N_B/N0)`` in percent. Without any estimate
    (``estimated: false``) the leakage of the prior guess: 50% or, for an attacker starting from
    a proxy model, the proxy baseline."""
    leakage_relabelled: float
    """``max(L, 100 - L)``: how well it partitions, whichever part it calls advantaged."""
    revealed: int | None
    """People whose attribute the latest estimate has right; null without an estimate."""
    confident_right: int | None
    """People guessed right with a margin of at least half the decision threshold."""
    confident_wrong: int | None
    """People guessed wrong with a margin of at least half the decision threshold."""
    tpr_at_1pct_fpr: float | None
    """The share of the disadvantaged group the estimate exposes when it may wrongly accuse at
    most 1% of the others."""
    estimated: bool
    """Whether the developer ever had an estimate."""
    calibration_090: float | None
    """Of the people the attacker itself gave probability >= 0.9 (``Estimate.probability``), the
    share guessed right (null when the decoder gives no probability, or nobody reaches 0.9)."""
    calibration_090_people: int | None
    """How many people the attacker gave probability >= 0.9 (null without probabilities)."""
    leakage_ceiling: float | None
    """What the privacy loss of its answers proves no attacker can exceed, in percent (see
    :mod:`biasleak.mechanisms.ceiling`). Each ``query_answered`` event is one release,
    accounted with the mechanism, epsilon, delta and fresh-model count it logged and the run's
    bounding and sampler from the header (a ``naive`` floating-point sampler proves nothing: it
    is counted as exact); cached answers add nothing. The ceiling bounds the expected leakage;
    a single run scatters around its expectation. Null for a ``proxy_prior`` ceiling without
    the proxy's probabilities."""
    ceiling_kind: Literal["no_side_information", "proxy_prior"]
    """``proxy_prior`` for attackers that start from a proxy model: their ceiling needs the
    proxy's probabilities, from ``summarize``'s ``prior`` argument or the header's
    ``proxy_probabilities``. ``no_side_information`` for everyone else."""
    privacy_loss: PrivacyLoss
    """The privacy loss of the answers it received, composed."""
    sent: int
    """Models sent (a batch of m models counts m, not one message)."""
    answered: int
    """Models answered."""
    refused: dict[str, int]
    """Models refused, by reason (``timeout`` for queries that got no reply in time)."""
    epsilon_spent: float
    """Sum of the epsilons charged for its answers (infinite once an exact answer was given)."""
    queries_to_90: int | None
    """Models answered when an estimate first reached 90% leakage (null if never)."""
    queries_to_100: int | None
    """Models answered when an estimate first reached 100% leakage (null if never)."""
    hours_to_90: float | None
    """Simulated hours when an estimate first reached 90% leakage (null if never)."""
    hours_to_100: float | None
    """Simulated hours when an estimate first reached 100% leakage (null if never)."""
    stopped: str | None
    """Why the developer stopped (null if it ran to the horizon)."""
    error: str | None
    """The error its strategy raised, if any."""
    deployed: NotRequired[int | None]
    """Honest developers only: the candidate it deployed (null if none)."""
    deployed_agrees: NotRequired[bool | None]
    """Honest developers only: would it have deployed the same candidate had every answered
    candidate been answered exactly (null when some answer came from the cache)."""
    metric_error: NotRequired[float | None]
    """Honest developers only: mean |answered - exact| over its answered candidates."""


@with_config(_STRICT)
class OrganizationSummary(TypedDict):
    """All the answers an organisation's identities received, taken together."""

    developers: list[str]
    """Its developers (identities), in header order."""
    privacy_loss: PrivacyLoss
    """The privacy loss of all their answers, composed."""
    leakage_ceiling: float | None
    """The leakage no attacker holding all their answers can exceed, in percent."""
    ceiling_kind: Literal["no_side_information", "proxy_prior"]
    """``proxy_prior`` when any of its developers starts from a proxy model."""


@with_config(_STRICT)
class MetricErrors(TypedDict):
    """The error of the released values of one fairness metric."""

    models: int
    """Freshly released models."""
    mean_abs_error: float
    """Mean |released - exact| (Cauchy noise has no mean: read the median)."""
    median_abs_error: float
    """Median |released - exact|."""


@with_config(_STRICT)
class ComplianceSummary(TypedDict):
    """What the compliance team answered, refused and spent."""

    epsilon_spent: float
    """Sum of the epsilons charged over all answers."""
    answered: int
    """Models answered."""
    refused: dict[str, int]
    """Models refused, by reason."""
    mean_abs_error: float | None
    """Mean |released - exact| over every freshly released model (null if none)."""
    median_abs_error: float | None
    """Median |released - exact| over every freshly released model (null if none)."""
    by_metric: dict[str, MetricErrors]
    """The same errors per metric."""


@with_config(_STRICT)
class AuditorSummary(TypedDict):
    """What the external auditor raised."""

    enabled: bool
    """Whether the run had an auditor."""
    alerts: int
    """Alerts raised."""
    alerts_by_detector: dict[str, int]
    """Alerts raised, by detector."""


@with_config(_STRICT)
class RunSummary(TypedDict):
    """The summary of one run: the last line of its log."""

    scenario: str | None
    """The scenario's name."""
    seed: int | None
    """The run's seed."""
    proxy_baseline_leakage: float | None
    """What features alone give away: the leakage of a proxy model trained on the training
    split's attribute (standing for a public survey), guessing a = 0 for the N0 audit-set people
    it finds least likely to be advantaged. Attacks are worth what they add to it."""
    developers: dict[str, DeveloperSummary]
    """Per developer id, in header order."""
    organizations: dict[str, OrganizationSummary]
    """Per organisation, in name order."""
    compliance: ComplianceSummary
    """The compliance team's side."""
    auditor: AuditorSummary
    """The auditor's side."""


def summarize(
    events: Iterable[dict[str, Any]], *, prior: NDArray[np.float64] | None = None
) -> RunSummary:
    """Build a run's summary from its log events (header first; a summary line is ignored).

    ``prior`` is the proxy model's probability that each audit-set person is advantaged, for the
    ``proxy_prior`` ceiling of attackers that start from it; without it the header's
    ``proxy_probabilities`` is used when present, and otherwise their ceiling is null.
    """
    events = list(events)
    if not events or events[0].get("event") != "header":
        raise ValueError("a run log must start with its header line")
    header = events[0]
    tally = _Tally(header)
    for event in events[1:]:  # 1. the tally
        handler = _HANDLERS.get(event.get("event"))
        if handler is not None:
            handler(tally, event)
    for ident, d in tally.developers.items():
        if d["strategy"] == "honest_selection":
            d.update(tally.honest_outcome(ident))
    compliance = _compliance(tally)
    for d in tally.developers.values():
        d["refused"] = dict(sorted(d["refused"].items()))
    if prior is None and header.get("proxy_probabilities") is not None:
        prior = np.asarray(header["proxy_probabilities"], dtype=np.float64)
    organizations = _ceilings(tally, prior)  # 2. the ceilings
    _score_prior_guesses(tally.developers, header.get("proxy_baseline_leakage"))
    return {  # 3. the assembly
        "scenario": header.get("scenario"),
        "seed": header.get("seed"),
        "proxy_baseline_leakage": header.get("proxy_baseline_leakage"),
        "developers": cast(dict[str, DeveloperSummary], tally.developers),
        "organizations": organizations,
        "compliance": compliance,
        "auditor": {
            "enabled": bool(header.get("auditor_enabled", False)),
            "alerts": int(sum(tally.alerts.values())),
            "alerts_by_detector": dict(sorted(tally.alerts.items())),
        },
    }


_SCORES = (
    "leakage",
    "leakage_relabelled",
    "revealed",
    "confident_right",
    "confident_wrong",
    "tpr_at_1pct_fpr",
)
"""The scores of an ``evaluation`` event a developer's summary keeps from its latest one."""


class _Tally:
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

    def _sender(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The summary of the developer whose own event this is (None: not a developer's)."""
        agent = event.get("agent")
        return self.developers.get(agent) if agent is not None else None

    def query_sent(self, e: dict[str, Any]) -> None:
        if (d := self._sender(e)) is not None:
            d["sent"] += e["models"]
            self.queries[e["agent"]].append((e["query_id"], e["models"]))

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


_HANDLERS: dict[str, Callable[[_Tally, dict[str, Any]], None]] = {
    "query_sent": _Tally.query_sent,
    "answer_received": _Tally.answer_received,
    "refusal_received": _Tally.refusal_received,
    "query_timeout": _Tally.query_timeout,
    "developer_stopped": _Tally.developer_stopped,
    "strategy_error": _Tally.strategy_error,
    "evaluation": _Tally.evaluation,
    "query_answered": _Tally.query_answered,
    "query_refused": _Tally.query_refused,
    "release_internal": _Tally.release_internal,
    "alert_raised": _Tally.alert_raised,
}
"""The events a summary counts, by kind; every other kind (a summary line too) is skipped."""


def _compliance(tally: _Tally) -> ComplianceSummary:
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


def _ceilings(tally: _Tally, prior: NDArray[np.float64] | None) -> dict[str, OrganizationSummary]:
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


def _score_prior_guesses(developers: dict[str, dict[str, Any]], baseline: Any) -> None:
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


def _number(value: Any) -> float:
    """A logged number as a float (``"inf"``, ``"-inf"`` and ``"nan"`` are logged as strings)."""
    return float(value)


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, list) else [v])
    return out
