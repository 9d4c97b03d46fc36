"""Scoring a run: leakage against the ground truth, and the summary rebuilt from the log.

The :class:`Evaluator` is the only object outside the compliance agent that holds the protected
attribute. Whenever a developer's strategy has a new estimate, the developer process hands it
over (through a callback: nothing in :mod:`biasleak.agents` imports this module) and the evaluator
logs an ``evaluation`` event with the leakage - the balanced accuracy of the estimate,
``50 (N_A/N1 + N_B/N0)`` in percent (Hamman et al., Definition 1; 50% is a coin flip) - and the
number of people whose attribute the estimate has right. The estimate itself goes to the run's
side file.

:func:`summarize` turns a run's events into its summary. The run calls it on its own log file
(just before writing the summary line), and ``biasleak replay`` calls it on a log file alone, so
the two agree by construction; what a summary holds:

per developer
    ``leakage`` and ``revealed`` of the latest estimate; without any estimate (``estimated:
    false``) the leakage is that of the prior guess, 50% or, for an attacker starting from a proxy
    model, the proxy baseline, and ``revealed`` is null; ``leakage_relabelled``
    (``max(L, 100 - L)``: how well it partitions, whichever part it calls advantaged), and
    ``confident_right`` / ``confident_wrong``: people guessed with a margin of at least half the
    decision threshold, right and wrong; ``tpr_at_1pct_fpr``: the share of the disadvantaged
    group the estimate exposes when it may wrongly accuse at most 1% of the others; ``sent``,
    ``answered`` and ``refused`` (reason -> count) counted in models, not messages;
    ``epsilon_spent`` (sum of the epsilons charged for its answers; ``"inf"`` once an exact
    answer was given); ``queries_to_90`` / ``queries_to_100`` and ``hours_to_90`` /
    ``hours_to_100``: models answered and simulated hours when an estimate first reached 90% or
    100% leakage (null if never); for honest developers ``deployed``, ``deployed_agrees`` (would
    it have deployed the same candidate had every answered candidate been answered exactly) and
    ``metric_error`` (mean |answered - exact| over its answered candidates);
    ``calibration_090`` / ``calibration_090_people``: of the people the attacker itself gave
    probability >= 0.9 (``Estimate.probability``), the share guessed right, and how many they
    are (null when the decoder gives no probability);
    ``leakage_ceiling``: what the privacy loss of its answers proves no attacker can exceed
    (percent, see :mod:`biasleak.mechanisms.ceiling`), ``ceiling_kind`` (``no_side_information``,
    or ``proxy_prior`` for attackers that start from a proxy model: then it needs the proxy's
    probabilities, from the ``prior`` argument or the header's ``proxy_probabilities``, and is
    null without them) and ``privacy_loss`` (``epsilon`` at ``delta`` = 1e-6 from the composed
    privacy-loss distribution, and ``pure_epsilon`` when every answer was pure eps-DP). Each
    ``query_answered`` event is one release, accounted with the mechanism, epsilon, delta and
    fresh-model count it logged and the run's bounding and sampler from the header (a ``naive``
    floating-point sampler proves nothing: counted as exact); cached answers add nothing. The
    ceiling bounds the expected leakage; a single run scatters around its expectation;
``organizations``
    per organisation, its ``developers`` and the same ``privacy_loss``, ``leakage_ceiling`` and
    ``ceiling_kind`` for all the answers its identities received together;
compliance
    ``epsilon_spent`` (sum over answers), ``answered`` and ``refused`` by reason, and
    ``mean_abs_error`` / ``median_abs_error`` of |released - exact| over every freshly released
    model (Cauchy noise has no mean: read the median), also per metric;
auditor
    ``alerts`` and ``alerts_by_detector``;
``proxy_baseline_leakage``
    what features alone give away: the leakage of a proxy model trained on the training split's
    attribute (standing for a public survey), guessing a = 0 for the N0 audit-set people it finds
    least likely to be advantaged. Attacks are worth what they add to it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.strategies import PROXY_KINDS, Estimate
from biasleak.agents.strategies.honest import choose_deployment
from biasleak.mechanisms.ceiling import DEFAULT_DELTA, ReleaseSpec, compose, proxy_prior_ceiling

__all__ = ["Evaluator", "calibration", "leakage", "summarize"]


CONFIDENT = 0.5
"""A guess counts as confident when its margin is at least half the decision threshold."""


def tpr_at_fpr(estimate: Estimate, truth: NDArray[np.integer], *, fpr: float = 0.01) -> float:
    """Share of the disadvantaged group found when at most ``fpr`` of the others are accused.

    People are ranked by how confidently the estimate puts them in group 0 (``+confidence`` for a
    guess of 0, ``-confidence`` for a guess of 1); the top of the ranking is accused, down to the
    largest cut whose false-positive rate stays at or below ``fpr``. Ties are accused together.
    """
    a0 = np.asarray(truth) == 0
    score = np.where(np.asarray(estimate.attribute) == 0, 1.0, -1.0) * np.asarray(
        estimate.confidence, dtype=np.float64
    )
    order = np.argsort(-score, kind="stable")
    sorted_scores = score[order]
    tp = np.cumsum(a0[order])
    fp = np.cumsum(~a0[order])
    last_of_tie = np.append(sorted_scores[1:] != sorted_scores[:-1], True)
    ok = last_of_tie & (fp <= fpr * max(int((~a0).sum()), 1))
    if not ok.any():
        return 0.0
    return float(tp[ok].max() / max(int(a0.sum()), 1))


def leakage(estimate: NDArray[np.integer], truth: NDArray[np.integer]) -> tuple[float, int]:
    """Balanced accuracy of ``estimate`` in percent (Definition 1) and the number right."""
    est = np.asarray(estimate) == 1
    a = np.asarray(truth) == 1
    right = est == a
    n1, n0 = int(a.sum()), int((~a).sum())
    n_a = int(np.count_nonzero(right & a))
    n_b = int(np.count_nonzero(right & ~a))
    return 50.0 * (n_a / n1 + n_b / n0), n_a + n_b


CALIBRATION_LEVEL = 0.9
"""Calibration is read among the people an attacker gives at least this probability."""


def calibration(
    estimate: Estimate, truth: NDArray[np.integer], *, level: float = CALIBRATION_LEVEL
) -> tuple[float | None, int | None]:
    """Share guessed right among the people the attacker gives probability >= ``level``.

    Returns ``(share, people)``: ``(None, None)`` when the estimate carries no probability, and
    ``(None, 0)`` when nobody reaches ``level``. A calibrated attacker's share is at least
    ``level``; a smaller share means it trusts its guesses more than they deserve.
    """
    probability = getattr(estimate, "probability", None)
    if probability is None:
        return None, None
    sure = np.asarray(probability, dtype=np.float64) >= level
    people = int(np.count_nonzero(sure))
    if people == 0:
        return None, 0
    right = np.asarray(estimate.attribute)[sure] == np.asarray(truth)[sure]
    return float(np.count_nonzero(right) / people), people


class Evaluator:
    """Scores developers' estimates against the protected attribute."""

    def __init__(self, protected: NDArray[np.integer], log: Any, keep: Any = None) -> None:
        self._truth = np.asarray(protected, dtype=np.int8)
        self.log = log
        self._keep = keep  # callable(key, array) that stores arrays in the side file
        self._versions: dict[str, int] = defaultdict(int)

    def __call__(self, developer: str, estimate: Estimate) -> None:
        """Score one estimate and log it (the developers' ``on_estimate`` callback)."""
        self._versions[developer] += 1
        version = self._versions[developer]
        value, right = leakage(estimate.attribute, self._truth)
        confident = np.asarray(estimate.confidence) >= CONFIDENT
        correct = np.asarray(estimate.attribute) == self._truth
        calibrated, calibrated_people = calibration(estimate, self._truth)
        self.log.info(
            "evaluation",
            developer=developer,
            version=version,
            leakage=value,
            leakage_relabelled=max(value, 100.0 - value),
            revealed=right,
            confident_right=int(np.count_nonzero(confident & correct)),
            confident_wrong=int(np.count_nonzero(confident & ~correct)),
            tpr_at_1pct_fpr=tpr_at_fpr(estimate, self._truth),
            models_used=estimate.models_used,
            calibration_090=calibrated,
            calibration_090_people=calibrated_people,
        )
        if self._keep is not None:  # the side file keeps each developer's latest estimate
            self._keep(f"estimate/{developer}", estimate.attribute.astype(np.int8))
            self._keep(f"confidence/{developer}", estimate.confidence)
            probability = getattr(estimate, "probability", None)
            if probability is not None:
                self._keep(f"probability/{developer}", np.asarray(probability, np.float64))


def _num(value: Any) -> float:
    if isinstance(value, str):
        return float(value)  # "inf", "-inf", "nan"
    return float(value)


def _developer_record(spec: dict[str, Any]) -> dict[str, Any]:
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
    epsilon = _num(event["epsilon_charged"])
    if fresh <= 0 or epsilon == 0.0:  # served from the cache: released earlier, adds nothing
        return None
    mechanism = str(event["mechanism"])
    if sampler == "naive":  # floating-point noise: no proven guarantee, counted as exact
        mechanism = "exact"
    delta = _num(event.get("delta_charged", 0.0) or 0.0)
    return ReleaseSpec(mechanism, epsilon, delta, fresh, bounding)


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


def summarize(
    events: Iterable[dict[str, Any]], *, prior: NDArray[np.float64] | None = None
) -> dict[str, Any]:
    """Build a run's summary from its log events (header first; a summary line is ignored).

    ``prior`` is the proxy model's probability that each audit-set person is advantaged, for the
    ``proxy_prior`` ceiling of attackers that start from it; without it the header's
    ``proxy_probabilities`` is used when present, and otherwise their ceiling is null.
    """
    events = list(events)
    if not events or events[0].get("event") != "header":
        raise ValueError("a run log must start with its header line")
    header = events[0]
    devs = {d["id"]: _developer_record(d) for d in header.get("developers", [])}
    bounding, sampler = _noise_settings(header)
    releases: dict[str, list[ReleaseSpec]] = defaultdict(list)
    org_releases: dict[str, list[ReleaseSpec]] = defaultdict(list)
    queries: dict[str, list[tuple[str, int]]] = defaultdict(list)
    exact: dict[str, list[float]] = {}
    reports: dict[str, dict[str, Any]] = {}
    answered_ids: set[str] = set()
    errors: dict[str, list[float]] = defaultdict(list)
    comp = {"epsilon_spent": 0.0, "answered": 0, "refused": defaultdict(int)}
    alerts: dict[str, int] = defaultdict(int)
    for e in events[1:]:
        kind, agent = e.get("event"), e.get("agent")
        if kind == "summary":
            continue
        d = devs.get(agent) if agent is not None else None
        if kind == "query_sent" and d is not None:
            d["sent"] += e["models"]
            queries[agent].append((e["query_id"], e["models"]))
        elif kind == "answer_received" and d is not None:
            d["answered"] += e["models"]
            d["epsilon_spent"] += _num(e["epsilon_charged"])
            answered_ids.add(e["query_id"])
        elif kind == "refusal_received" and d is not None:
            d["refused"][e["reason"]] = d["refused"].get(e["reason"], 0) + e["models"]
        elif kind == "query_timeout" and d is not None:
            d["refused"]["timeout"] = d["refused"].get("timeout", 0) + e["models"]
        elif kind == "developer_stopped" and d is not None:
            d["stopped"] = e["reason"]
            reports[agent] = e.get("report") or {}
        elif kind == "strategy_error" and d is not None:
            d["error"] = e["error"]
        elif kind == "evaluation" and e.get("developer") in devs:
            d = devs[e["developer"]]
            for key in (
                "leakage",
                "leakage_relabelled",
                "revealed",
                "confident_right",
                "confident_wrong",
                "tpr_at_1pct_fpr",
            ):
                d[key] = e[key]
            d["estimated"] = True
            d["calibration_090"] = e.get("calibration_090")
            d["calibration_090_people"] = e.get("calibration_090_people")
            for level in (90, 100):
                if d[f"queries_to_{level}"] is None and e["leakage"] >= level - 1e-9:
                    d[f"queries_to_{level}"] = d["answered"]
                    d[f"hours_to_{level}"] = e["t"]
        elif kind == "query_answered":
            comp["answered"] += e["models"]
            comp["epsilon_spent"] += _num(e["epsilon_charged"])
            spec = _release(e, bounding, sampler)
            if spec is not None:
                releases[e["sender"]].append(spec)
                if e.get("organization") is not None:
                    org_releases[e["organization"]].append(spec)
        elif kind == "query_refused":
            comp["refused"][e["reason"]] += e["models"]
        elif kind == "release_internal":
            exact[e["query_id"]] = [_num(v) for v in _flat(e["exact"])]
            released = [_num(v) for v in _flat(e["released"])]
            diffs = [abs(r - x) for r, x in zip(released, exact[e["query_id"]], strict=True)]
            errors[e["metric"]].extend(diffs)
        elif kind == "alert_raised":
            alerts[e["detector"]] += 1
    for ident, d in devs.items():
        if d["strategy"] == "honest_selection":
            d.update(_honest(reports.get(ident, {}), queries[ident], exact, answered_ids))
    all_errors = [x for values in errors.values() for x in values]
    compliance = {
        "epsilon_spent": comp["epsilon_spent"],
        "answered": comp["answered"],
        "refused": dict(sorted(comp["refused"].items())),
        "mean_abs_error": float(np.mean(all_errors)) if all_errors else None,
        "median_abs_error": float(np.median(all_errors)) if all_errors else None,
        "by_metric": {
            metric: {
                "models": len(values),
                "mean_abs_error": float(np.mean(values)),
                "median_abs_error": float(np.median(values)),
            }
            for metric, values in sorted(errors.items())
        },
    }
    for d in devs.values():
        d["refused"] = dict(sorted(d["refused"].items()))
    if prior is None and header.get("proxy_probabilities") is not None:
        prior = np.asarray(header["proxy_probabilities"], dtype=np.float64)
    baseline = header.get("proxy_baseline_leakage")
    members: dict[str, list[str]] = defaultdict(list)
    for ident, d in devs.items():
        proxy = d["strategy"] in PROXY_KINDS
        d.update(_ceiling(releases[ident], proxy, prior))
        if not d["estimated"]:  # scored at its prior guess: a coin flip, or the proxy's guess
            d["leakage"] = float(baseline) if proxy and baseline is not None else 50.0
            d["leakage_relabelled"] = max(d["leakage"], 100.0 - d["leakage"])
        if d["organization"] is not None:
            members[d["organization"]].append(ident)
    organizations = {
        org: {
            "developers": idents,
            **_ceiling(
                org_releases[org],
                any(devs[i]["strategy"] in PROXY_KINDS for i in idents),
                prior,
            ),
        }
        for org, idents in sorted(members.items())
    }
    return {
        "scenario": header.get("scenario"),
        "seed": header.get("seed"),
        "proxy_baseline_leakage": header.get("proxy_baseline_leakage"),
        "developers": devs,
        "organizations": organizations,
        "compliance": compliance,
        "auditor": {
            "enabled": bool(header.get("auditor_enabled", False)),
            "alerts": int(sum(alerts.values())),
            "alerts_by_detector": dict(sorted(alerts.items())),
        },
    }


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, list) else [v])
    return out


def _honest(
    report: dict[str, Any],
    sent: list[tuple[str, int]],
    exact: dict[str, list[float]],
    answered_ids: set[str],
) -> dict[str, Any]:
    """deployed / deployed_agrees / metric_error of an honest developer.

    Its answered queries, in the order sent, answer its answered candidates in candidate order
    (one query per candidate, or one batch), so the exact values the compliance side logged line
    up with them.
    """
    answers = report.get("answers") or []
    accuracies = report.get("accuracies") or []
    deployed = report.get("deployed")
    answered = [i for i, v in enumerate(answers) if v is not None]
    exact_values = [v for q, _ in sent if q in answered_ids for v in exact.get(q, [])]
    if deployed is None or not answered or len(exact_values) != len(answered):
        # nothing deployed, or some values came from the cache (no fresh exact value logged)
        return {"deployed": deployed, "deployed_agrees": None, "metric_error": None}
    aligned = dict(zip(answered, exact_values, strict=True))
    exact_choice = choose_deployment(
        accuracies,
        [aligned.get(i) for i in range(len(answers))],
        float(report.get("accuracy_tolerance", 0.0)),
    )
    diffs = [abs(_num(answers[i]) - aligned[i]) for i in answered]
    return {
        "deployed": deployed,
        "deployed_agrees": exact_choice == deployed,
        "metric_error": float(np.mean(diffs)),
    }
