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
   ``alert_raised`` events count its alerts. The fair-learning services' events
   (``service_received``, ``service_answered``, ``service_refused``, ...) add their charges and
   releases, and the evaluator's ``service_evaluation`` events the scores of the models they
   delivered.
2. The ceilings: the releases a developer (or all the identities of an organisation together)
   received are composed into one privacy-loss distribution, which proves how much leakage no
   attacker can exceed (see :mod:`biasleak.mechanisms.ceiling`).
3. The assembly: honest developers get the outcome of their model choice, developers without an
   estimate are scored at their prior guess, and the parts are put together in a fixed order.

In this dict numbers are Python numbers, infinite ones included; the log line spells non-finite
numbers as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (see :mod:`biasleak.sim.runlog`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NotRequired, cast

import numpy as np
from numpy.typing import NDArray
from pydantic import ConfigDict, with_config

# pydantic accepts only typing_extensions' TypedDict before Python 3.12 (the tests validate)
from typing_extensions import TypedDict

from biasleak.sim.summary.tally import (
    HANDLERS,
    METRIC_ROUTE,
    Tally,
    ceilings,
    compliance_totals,
    score_prior_guesses,
)

__all__ = [
    "AuditorSummary",
    "ComplianceSummary",
    "DeveloperSummary",
    "MetricErrors",
    "OrganizationSummary",
    "PrivacyLoss",
    "RouteSummary",
    "RunSummary",
    "ServiceSummary",
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
class ServiceSummary(TypedDict):
    """The model a fair-learning service delivered, scored on people outside the audit set."""

    service: str
    """``dp_postprocessing``, ``dp_oracle_learner``, or ``metric_queries`` for an honest developer
    that chose among candidates by noisy metric answers (scored the same way, in runs that offer
    services)."""
    error: float
    """Expected error of the model the developer ends with."""
    eo_violation: float
    """Its equalized-odds violation: max of the FPR and TPR gaps (expected rates)."""
    base_error: float
    """Error of the developer's base model (thresholded at 0.5) on the same people."""
    base_eo_violation: float
    """Equalized-odds violation of the base model."""
    disparate_treatment: bool
    """Whether the deployed model needs the attribute at decision time."""


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
    """The policy ceiling, in percent: what the policy's guarantee proves no attacker that
    knows the group sizes can exceed in expected balanced accuracy, on any audit set of this
    size (see :mod:`biasleak.mechanisms.ceiling`). Each ``query_answered`` event is one release
    (one pair per model for independent per-model noise), accounted with the mechanism, epsilon,
    delta and fresh-model count it logged and the run's bounding and sampler from the header (a
    ``naive`` floating-point sampler proves nothing: it is counted as exact); cached answers
    count for a reader once (a value first released to another identity counts for this one
    too). The ceiling bounds the expected leakage; a single run scatters around its
    expectation. Null for a ``proxy_prior`` ceiling without the proxy's probabilities."""
    audit_set_ceiling: float | None
    """The audit-set ceiling (%): the same releases with the shifts one change can cause at
    this audit set's group sizes, for the worst models; a fact about the data for the
    evaluator, never released. Null for logs without the group sizes."""
    answers_ceiling: float | None
    """The answers ceiling (%): what any attacker could learn from exactly these answers
    (each person's own shift in each answered model, the models taken as fixed queries); at
    most the audit-set ceiling. Evaluator-only, like the audit-set ceiling; null without the
    evaluator's ``exposure`` event."""
    person_ceiling: dict[str, float | None] | None
    """``policy``, ``audit_set``, ``answers``: the bound (%) on one person's accuracy against
    the attacker that knows everyone else's attribute, the most exposed person's at the answers
    level."""
    exposure: dict[str, Any] | None
    """Who is exposed at the answers level: ``people``, ``person_mean`` (%), ``exposed``
    (people whose per-person ceiling reaches 60, 75 and 90%), ``most_exposed`` (``[row in the
    audit set, ceiling %]``, at most 10). Evaluator-only."""
    ceiling_kind: Literal["no_side_information", "proxy_prior"]
    """``proxy_prior`` for attackers that start from a proxy model: their ceilings need the
    proxy's probabilities, from ``summarize``'s ``prior`` argument or the header's
    ``proxy_probabilities``. ``no_side_information`` for everyone else."""
    privacy_loss: PrivacyLoss
    """The privacy loss of the answers it received, composed (the per-person guarantee)."""
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
    service: NotRequired[ServiceSummary]
    """Developers that received a fair-learning service only: its model, scored on people
    outside the audit set (the training split), beside its base model."""


@with_config(_STRICT)
class RouteSummary(TypedDict):
    """One route to a fair model (metric queries, or a service): what it gave and what it leaked.

    The honest side is the developers whose deployed model was scored (``service`` in their
    summary); the attack side every other developer that took the route. With several honest
    developers on one route their scores are averaged; the attack side is the strongest one.
    """

    route: str
    """``metric_queries``, ``dp_postprocessing`` or ``dp_oracle_learner``."""
    deployed_by: list[str]
    """Honest developers whose model came through this route."""
    error: float | None
    """Mean error of their models on people outside the audit set (None: nobody deployed)."""
    eo_violation: float | None
    """Mean equalized-odds violation of their models."""
    epsilon_spent: float | None
    """Largest epsilon one of them was charged."""
    disparate_treatment: bool | None
    """Whether a model of this route needs the attribute at decision time."""
    attacker: str | None
    """The developer with the highest leakage among those that attacked through this route."""
    leakage: float | None
    """Its leakage (balanced accuracy, %)."""
    leakage_ceiling: float | None
    """The ceiling its privacy loss proves (%)."""
    ceiling_kind: str | None
    """Which ceiling: ``no_side_information`` or ``proxy_prior``."""


ROUTE_ORDER = (METRIC_ROUTE, "dp_postprocessing", "dp_oracle_learner")
"""The order of the routes table: the metric-query route first, then the services."""


def routes(tally: Tally) -> list[RouteSummary]:
    """The routes table of a run whose developers used a fair-learning service."""
    taken = sorted(
        {r for used in tally.routes.values() for r in used},
        key=lambda r: (ROUTE_ORDER.index(r) if r in ROUTE_ORDER else len(ROUTE_ORDER), r),
    )
    rows: list[RouteSummary] = []
    for route in taken:
        users = [i for i, used in tally.routes.items() if route in used]
        honest = [
            i for i in users if (tally.developers[i].get("service") or {}).get("service") == route
        ]
        attackers = [i for i in users if "service" not in tally.developers[i]]
        scores = [tally.developers[i]["service"] for i in honest]

        def mean(key: str, scores: list[Any] = scores) -> float | None:
            return float(np.mean([s[key] for s in scores])) if scores else None

        spent = [float(tally.developers[i]["epsilon_spent"]) for i in honest]
        leaks = [i for i in attackers if tally.developers[i].get("leakage") is not None]
        top = max(leaks, key=lambda i: tally.developers[i]["leakage"], default=None)
        d = tally.developers[top] if top is not None else {}
        rows.append(
            {
                "route": route,
                "deployed_by": honest,
                "error": mean("error"),
                "eo_violation": mean("eo_violation"),
                "epsilon_spent": max(spent) if spent else None,
                "disparate_treatment": any(s["disparate_treatment"] for s in scores)
                if scores
                else None,
                "attacker": top,
                "leakage": d.get("leakage"),
                "leakage_ceiling": d.get("leakage_ceiling"),
                "ceiling_kind": d.get("ceiling_kind"),
            }
        )
    return rows


@with_config(_STRICT)
class OrganizationSummary(TypedDict):
    """All the answers an organisation's identities received, taken together."""

    developers: list[str]
    """Its developers (identities), in header order."""
    privacy_loss: PrivacyLoss
    """The privacy loss of all their answers, composed."""
    leakage_ceiling: float | None
    """The policy ceiling of all their answers together, in percent (as a developer's)."""
    audit_set_ceiling: float | None
    """The audit-set ceiling of all their answers (evaluator-only)."""
    answers_ceiling: float | None
    """The answers ceiling of all their answers (evaluator-only)."""
    person_ceiling: dict[str, float | None] | None
    """The per-person bounds at each level (%)."""
    exposure: dict[str, Any] | None
    """Who is exposed at the answers level (as a developer's ``exposure``)."""
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
    routes: NotRequired[list[RouteSummary]]
    """Runs in which a developer asked for a fair-learning service only: the routes to a fair
    model side by side (:class:`RouteSummary`)."""


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
    tally = Tally(header)
    for event in events[1:]:  # 1. the tally
        handler = HANDLERS.get(event.get("event"))
        if handler is not None:
            handler(tally, event)
    for ident, d in tally.developers.items():
        if d["strategy"] == "honest_selection":
            d.update(tally.honest_outcome(ident))
    compliance = compliance_totals(tally)
    for d in tally.developers.values():
        d["refused"] = dict(sorted(d["refused"].items()))
    if prior is None and header.get("proxy_probabilities") is not None:
        prior = np.asarray(header["proxy_probabilities"], dtype=np.float64)
    organizations = ceilings(tally, prior)  # 2. the ceilings
    score_prior_guesses(tally.developers, header.get("proxy_baseline_leakage"))
    summary: RunSummary = {  # 3. the assembly
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
    if tally.services_seen:
        summary["routes"] = routes(tally)
    return summary
