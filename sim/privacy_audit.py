"""``biasleak audit``: check a scenario's privacy claims from below, on its own audit set.

The leakage ceilings are proofs: for each release, the ceiling module
(:mod:`biasleak.mechanisms.ceiling`) names a *dominating pair*, the two laws one release can have
for one person on two neighbouring audit sets, and everything else follows from it. This module
puts those pairs to an experiment (:mod:`biasleak.mechanisms.privacy_audit` explains the
statistics). For the scenario's noise stage (mechanism, per-model epsilon, delta, bounding and
sampler) and on the scenario's own audit set (the data a run would load, with its protected
attribute and labels), it audits:

(a) **the flip with the worst query**: among one-person probes, "everyone except one person" and
    the base model, the model and person whose flip moves the exact answer the most; the release
    of that one model is drawn ``trials`` times on the audit set and on its neighbour, and the
    lower bounds are compared with the release's flip pair;
(b) **the swap with the worst query**, likewise (two people of opposite groups exchange their
    attributes; the group sizes stay), against the swap pair;
(c) **the attackers' first queries**: every attacking developer's strategy is built as a run
    builds it, its first query is taken, and the flip and the swap of the model of that batch
    that one person can move the most are audited, each as one answer of the release of the
    whole batch (its per-answer law, against that release's pairs);
(d) **one run with canaries** (Steinke, Nasr and Jagielski 2023), in two designs:

    - *flip canaries*: m people of the audit set get a fair coin for an attribute; one batch of
      m one-person probes, one per canary, is released once. Flipping one canary's coin moves
      its own probe, and through the group sizes every other probe too (``1/N1`` becomes
      ``1/(N1 + 1)``), and it changes the noise scale of the smooth-sensitivity mechanisms. The
      per-canary claim is therefore the composition of ALL m answers' flip pairs at the
      audit-set level (:func:`~biasleak.mechanisms.ceiling.release_pairs` of the batch), at the
      worst group sizes the coins can produce: ``sum of max_loss`` over the batch. It is a true
      guarantee for the whole run, and a loose one (it charges every probe the worst shift);
    - *swap canaries*: m pairs of people (one of each group) whose attributes a fair coin
      exchanges. The group sizes are the same for every coin outcome, so a coin moves its own
      probe only (by ``1/N1 + 1/N0``), the other probes and the noise scale not at all: the
      per-canary claim is ONE model's swap pair (the batch's swap pair when the mechanism's
      pair is for the whole batch).

    The one-run bound is implemented for pure claims (delta = 0); an (eps, delta) claim is
    refused with a message (``smooth_laplace`` flips, ``gaussian``).

What is compared. The claim is ALWAYS what the ceiling module says for that release at the
audit-set level (``release_pairs(spec, "audit_set", sizes)``, the pairs the audit-set ceilings of
a run compose): its epsilon at its own delta and its total variation. The policy's claimed
per-model epsilon is reported beside. Every lower bound holds at ``1 - (1 - confidence) / K``
for the K bounds of the report (Bonferroni), so all of them hold together with probability at
least ``confidence`` (95% by default); each is a one-sided Clopper-Pearson statement.

Special cases. A policy with exact answers has nothing to audit (the report says so). The
``naive`` sampler is audited like the others, against the textbook mechanism's pairs, and the
report says that the ceilings count its floating-point answers as exact (a threshold test cannot
see the holes in its output set that the ``fp_probe`` attack uses). Refusals, budgets and rate
limits are not applied: the audit asks what each release would reveal if it were answered.
``scale_factor`` audits an under-noised twin (:class:`~biasleak.mechanisms.privacy_audit.Twin`)
instead of the real release, to see the audit catch a broken mechanism.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms import metrics
from biasleak.mechanisms.ceiling import AuditSizes, Pair, ReleaseSpec, release_pairs, swap_shift
from biasleak.mechanisms.privacy_audit import (
    ONE_RUN_NEEDS_PURE,
    CanaryResult,
    Neighbour,
    SampleAudit,
    Twin,
    audit_samples,
    canary_audit,
    composed_pure_epsilon,
    log_likelihood_ratio,
    worst_flip,
    worst_swap,
)
from biasleak.mechanisms.sensitivity import SENSITIVITY_METRICS, local_sensitivity
from biasleak.sim.runlog import jsonable
from biasleak.sim.scenario import Scenario

__all__ = [
    "CONFIDENCE",
    "DEFAULT_CANARIES",
    "DEFAULT_TRIALS",
    "MAX_TRIALS",
    "AuditReport",
    "CanaryRow",
    "PairRow",
    "audit_scenario",
    "format_audit",
]

DEFAULT_TRIALS: Final = 100_000
"""Releases per world for each audited pair (half choose the test, half measure it)."""
DEFAULT_CANARIES: Final = 100
"""Canaries (people, or pairs of people) of each one-run audit, when the audit set has them."""
MAX_TRIALS: Final = 10_000_000
"""The most releases per world (the scenario block's cap too): 2 x 80 MB of draws per pair."""
CONFIDENCE: Final = 0.95
"""Probability with which every lower bound of a report holds at once."""
FIRST_QUERY_STEPS: Final = 20
"""How many ``Wait`` actions a strategy may return before its first query is given up on."""

EXACT_ANSWERS: Final = (
    "the policy answers exactly (no noise stage, mechanism 'exact' or epsilon = inf): there is "
    "no privacy claim to audit, and the ceilings are 100%"
)
NAIVE_NOTE: Final = (
    "sampler 'naive': audited against the textbook mechanism's pairs, but the ceilings count "
    "its floating-point answers as exact (TV 1, no claim a lower bound could exceed); threshold "
    "and interval tests cannot see the holes in its output set that the fp_probe attack uses"
)
NOT_RUN: Final = "{who}: not audited ({why})"
BAD_TRIALS: Final = (
    "trials must be an integer >= 4 (2 draws per half and world); received {value!r}"
)
BAD_CANARIES: Final = "canaries must be an integer >= 1; received {value!r}"
BAD_CONFIDENCE: Final = "confidence must be in (0, 1); received {value!r}"
NO_METRIC: Final = (
    "none of the policy's metrics {metrics} has a sensitivity (needed for noise): nothing to audit"
)


@dataclass(frozen=True)
class PairRow:
    """One audited pair: a query, its two neighbouring worlds, the claim and the lower bounds."""

    label: str
    """Which audit: ``flip, worst query``, ``mallory: swap``, ..."""
    neighbour: str
    """``flip`` or ``swap``."""
    query: str
    """The model released and the people moved, in words."""
    metric: str
    shift: float
    """``|exact answer on the neighbour - exact answer on the audit set|``."""
    largest_shift: float
    """The largest shift one flip (swap) can cause on this audit set, for comparison."""
    models: int
    """Models in the audited release (the audited answer is one of them)."""
    release_epsilon: float
    """Epsilon charged for that release (per model times models, or per query)."""
    release_delta: float
    audit: SampleAudit


@dataclass(frozen=True)
class CanaryRow:
    """One one-run canary audit."""

    label: str
    design: str
    """``flip`` (people with coin attributes) or ``swap`` (pairs exchanged by a coin)."""
    canaries: int
    claimed_epsilon: float
    """The per-canary pure epsilon of the whole run (module docstring)."""
    claim: str
    """How the claim was derived."""
    result: CanaryResult | None
    """None when the audit could not run (``note`` says why)."""
    note: str = ""


@dataclass(frozen=True)
class AuditReport:
    """What ``biasleak audit`` found for one scenario."""

    scenario: str
    seed: int
    mechanism: str
    epsilon: float
    """The noise stage's epsilon (per model or per query, see ``per``)."""
    delta: float
    per: str
    bounding: str
    sampler: str
    metric: str
    """The metric of the worst-query and canary audits."""
    sizes: dict[str, int]
    """n, N1, N0 and, among people with y = 1, N11 and N10."""
    scale_factor: float
    trials: int
    confidence: float
    pairs: tuple[PairRow, ...] = ()
    canaries: tuple[CanaryRow, ...] = ()
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def bounds(self) -> int:
        """K: the lower bounds compared with claims (two per pair, one per canary audit run)."""
        return 2 * len(self.pairs) + sum(1 for c in self.canaries if c.result is not None)

    @property
    def per_bound_confidence(self) -> float:
        """The confidence of each bound: ``1 - (1 - confidence) / K``."""
        return 1.0 - (1.0 - self.confidence) / max(self.bounds, 1)

    @property
    def defects(self) -> list[str]:
        """One line per lower bound above its claim."""
        out = []
        for row in self.pairs:
            a = row.audit
            if "epsilon" in a.exceeded:
                out.append(
                    f"{row.label}: epsilon >= {a.epsilon.value:.4g} exceeds the claimed "
                    f"{a.claimed_epsilon:.4g} ({_pair_text(a.claim)})"
                )
            if "tv" in a.exceeded:
                out.append(
                    f"{row.label}: TV >= {a.tv.value:.4g} exceeds the claimed "
                    f"{a.claimed_tv:.4g} ({_pair_text(a.claim)})"
                )
        for c in self.canaries:
            if c.result is not None and c.result.epsilon > c.claimed_epsilon:
                out.append(
                    f"{c.label}: epsilon >= {c.result.epsilon:.4g} exceeds the claimed "
                    f"{c.claimed_epsilon:.4g} per canary"
                )
        return out

    @property
    def verdict(self) -> str:
        """``no claim exceeded``, ``nothing to audit`` or ``DEFECT: ...``."""
        if not self.pairs and not any(c.result is not None for c in self.canaries):
            return "nothing to audit"
        defects = self.defects
        if defects:
            return f"DEFECT: {len(defects)} lower bound(s) above the ceiling's claims"
        return "no claim exceeded"

    def headline(self) -> dict[str, Any]:
        """What a verdict quotes: the audit's verdict, how many bounds at what confidence, and the
        lower bound closest to its claim (the largest ratio of bound to claim; the first audited
        epsilon when every bound is 0)."""
        rows: list[tuple[str, float, float]] = [
            (r.label, r.audit.epsilon.value, r.audit.claimed_epsilon) for r in self.pairs
        ]
        rows += [
            (c.label, c.result.epsilon, c.claimed_epsilon)
            for c in self.canaries
            if c.result is not None
        ]

        def closeness(row: tuple[str, float, float]) -> float:
            _, lower, claim = row
            if lower <= 0.0:
                return 0.0
            return math.inf if claim <= 0.0 else lower / claim

        closest = max(rows, key=closeness) if rows else None
        return {
            "verdict": self.verdict,
            "defects": len(self.defects),
            "bounds": self.bounds,
            "confidence": self.confidence,
            "closest": None
            if closest is None
            else {"label": closest[0], "epsilon_lower": closest[1], "claimed_epsilon": closest[2]},
        }

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values (infinite numbers as the string ``"inf"``)."""
        return jsonable(
            {
                "scenario": self.scenario,
                "seed": self.seed,
                "verdict": self.verdict,
                "defects": self.defects,
                "release": {
                    "mechanism": self.mechanism,
                    "epsilon": self.epsilon,
                    "delta": self.delta,
                    "per": self.per,
                    "bounding": self.bounding,
                    "sampler": self.sampler,
                },
                "metric": self.metric,
                "sizes": self.sizes,
                "scale_factor": self.scale_factor,
                "trials": self.trials,
                "confidence": self.confidence,
                "bounds": self.bounds,
                "per_bound_confidence": self.per_bound_confidence,
                "pairs": [_pair_json(r) for r in self.pairs],
                "canaries": [_canary_json(c) for c in self.canaries],
                "notes": list(self.notes),
                "seconds": round(self.seconds, 3),
            }
        )


def _pair_text(pair: Pair) -> str:
    if pair.family == "exact":
        return "exact"
    if pair.family == "approx":
        return f"approx({pair.parameter:.4g}, {pair.delta:.3g})"
    return f"{pair.family}({pair.parameter:.4g})"


def _bound_json(bound: Any) -> dict[str, Any]:
    return {
        "value": bound.value,
        "confidence": bound.confidence,
        "test": bound.test.describe(),
        "hits": list(bound.hits),
        "draws": list(bound.draws),
    }


def _pair_json(row: PairRow) -> dict[str, Any]:
    a = row.audit
    return {
        "label": row.label,
        "neighbour": row.neighbour,
        "query": row.query,
        "metric": row.metric,
        "shift": row.shift,
        "largest_shift": row.largest_shift,
        "models": row.models,
        "release_epsilon": row.release_epsilon,
        "release_delta": row.release_delta,
        "claim": {
            "pair": _pair_text(a.claim),
            "epsilon": a.claimed_epsilon,
            "delta": a.claimed_delta,
            "tv": a.claimed_tv,
        },
        "epsilon_lower_bound": _bound_json(a.epsilon),
        "tv_lower_bound": _bound_json(a.tv),
        "draws_per_world": a.draws[0],
        "exceeded": list(a.exceeded),
    }


def _canary_json(c: CanaryRow) -> dict[str, Any]:
    r = c.result
    return {
        "label": c.label,
        "design": c.design,
        "canaries": c.canaries,
        "claimed_epsilon": c.claimed_epsilon,
        "claim": c.claim,
        "guesses": None if r is None else r.guesses,
        "correct": None if r is None else r.correct,
        "epsilon_lower_bound": None if r is None else r.epsilon,
        "confidence": None if r is None else r.confidence,
        "tried": [] if r is None else [list(t) for t in r.tried],
        "note": c.note,
    }


# -- the audit ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    """Everything the audits share: the release, the audit set and the claims' inputs."""

    noise: Any
    metric: str
    protected: NDArray[np.bool_]
    labels: NDArray[np.bool_]
    scale_factor: float
    rng: np.random.Generator = field(repr=False)

    def population(self, metric: str) -> NDArray[np.bool_]:
        """Whose attribute the metric depends on: everyone, or the people with y = 1 for EO."""
        if metric in metrics.ON_POSITIVES:
            return self.labels.copy()
        return np.ones(self.protected.shape[0], dtype=np.bool_)

    def metric_sizes(self, metric: str, protected: NDArray[np.bool_]) -> tuple[int, int]:
        pop = self.population(metric)
        n1 = int(np.count_nonzero(protected & pop))
        return n1, int(np.count_nonzero(pop)) - n1

    def audit_sizes(self, protected: NDArray[np.bool_]) -> AuditSizes:
        n1 = int(np.count_nonzero(protected))
        n11 = int(np.count_nonzero(protected & self.labels))
        return AuditSizes(
            n1,
            protected.shape[0] - n1,
            n11,
            int(np.count_nonzero(self.labels)) - n11,
        )

    def charge(self, models: int) -> tuple[float, float]:
        """(epsilon, delta) of a release of ``models`` models under the noise stage."""
        if self.noise.per == "model":
            return self.noise.epsilon * models, self.noise.delta * models
        return self.noise.epsilon, self.noise.delta

    def twin(self, metric: str, models: int) -> Twin:
        eps, delta = self.charge(models)
        return Twin(
            self.noise.mechanism,
            eps,
            delta,
            models,
            metric,
            self.noise.bounding,
            self.noise.sampler,
            self.scale_factor,
        )

    def pairs(
        self, metric: str, models: int, sizes: AuditSizes
    ) -> tuple[list[tuple[Pair, int]], list[tuple[Pair, int]]]:
        """The release's (flip, swap) pairs at the audit-set level (ceiling module)."""
        eps, delta = self.charge(models)
        population = int(np.count_nonzero(self.population(metric)))
        spec = ReleaseSpec(
            self.noise.mechanism, eps, delta, models, self.noise.bounding, metric, population
        )
        return release_pairs(spec, "audit_set", sizes)


def _audit_neighbour(
    setting: _Setting,
    label: str,
    query: str,
    metric: str,
    models: int,
    neighbour: Neighbour,
    trials: int,
    alpha: float,
) -> PairRow:
    """Draw the audited answer ``trials`` times in both worlds and compare with the claim."""
    a, b = setting.protected, neighbour.protected
    twin = setting.twin(metric, models)
    flips, swaps = setting.pairs(metric, models, setting.audit_sizes(a))
    claim = (flips if neighbour.kind == "flip" else swaps)[0][0]
    n1, n0 = setting.metric_sizes(metric, a)
    m1, m0 = setting.metric_sizes(metric, b)
    x_p = twin.draw(np.full(trials, neighbour.before), n1=n1, n0=n0, rng=setting.rng)
    x_q = twin.draw(np.full(trials, neighbour.after), n1=m1, n0=m0, rng=setting.rng)
    audit = audit_samples(x_p, x_q, claim=claim, alpha=alpha)
    if neighbour.kind == "flip":
        largest = local_sensitivity(metric, n1=n1, n0=n0)
    else:
        largest = swap_shift(n1, n0)
    eps, delta = setting.charge(models)
    return PairRow(
        label, neighbour.kind, query, metric, neighbour.shift, largest, models, eps, delta, audit
    )


def _moved(neighbour: Neighbour, protected: NDArray[np.bool_]) -> str:
    if neighbour.kind == "flip":
        (p,) = neighbour.persons
        g = int(protected[p])
        return f"flip person {p} (group {g} -> {1 - g})"
    i, j = neighbour.persons
    return f"swap persons {i} (group 1) and {j} (group 0)"


def _candidates(
    setting: _Setting, h0: NDArray[np.float64]
) -> tuple[NDArray[np.float64], list[str]]:
    """The worst-query candidates: one-person probes and their complements for one person of
    each group of the metric's population, and the base model."""
    pop = setting.population(setting.metric)
    a = setting.protected
    rows, names = [], []
    for group in (0, 1):
        members = np.flatnonzero(pop & (a == bool(group)))
        if members.size == 0:
            continue
        p = int(members[0])
        probe = np.zeros(a.shape[0])
        probe[p] = 1.0
        rows += [probe, 1.0 - probe]
        names += [
            f"one-person probe of person {p} (group {group})",
            f"everyone except person {p} (group {group})",
        ]
    rows.append(np.asarray(h0, dtype=np.float64))
    names.append("the base model")
    return np.vstack(rows), names


def _first_query(strategy: Any) -> tuple[Any, str]:
    """The strategy's first :class:`Submit`, or (None, why not)."""
    from biasleak.agents.strategies import Submit, Wait

    now = 0.0
    for _ in range(FIRST_QUERY_STEPS):
        action = strategy.next_action(now)
        if isinstance(action, Submit):
            return action, ""
        if isinstance(action, Wait):
            now = max(now, float(action.until))
            continue
        return None, f"its first action is {type(action).__name__}, not a query"
    return None, f"no query within its first {FIRST_QUERY_STEPS} actions"


def _developer_jobs(
    resolved: Scenario, setting: _Setting, allowed: tuple[str, ...], notes: list[str]
) -> list[tuple[str, str, str, int, Neighbour]]:
    """(label, query, metric, models, neighbour) for the flip and swap of every attacker."""
    from biasleak.agents.strategies import HONEST_KINDS, ISOLATED_KINDS, build_strategies
    from biasleak.sim.world import developer_context

    jobs = []
    for spec in resolved.developers:
        kind = spec.strategy.kind
        if kind in HONEST_KINDS:
            continue
        who = f"{spec.id} ({kind})"
        if kind in ISOLATED_KINDS:
            notes.append(NOT_RUN.format(who=who, why="a plugin runs only in its sandbox"))
            continue
        try:
            context = developer_context(resolved, spec.id, kind)
            identity, strategy = build_strategies(spec.strategy, context, spec.id)[0]
            submit, why = _first_query(strategy)
        except Exception as err:  # a strategy that cannot start is a note, not a crash
            notes.append(NOT_RUN.format(who=who, why=f"{type(err).__name__}: {err}"))
            continue
        if submit is None:
            notes.append(NOT_RUN.format(who=who, why=why))
            continue
        metric = submit.metric
        if metric not in allowed:
            why = f"its first query asks for {metric!r}; the policy answers {list(allowed)}"
            notes.append(NOT_RUN.format(who=who, why=why))
            continue
        h = np.atleast_2d(np.asarray(submit.predictions, dtype=np.float64))
        what = f"{identity}'s first query" + (f" ({submit.label})" if submit.label else "")
        for search in (worst_flip, worst_swap):
            try:
                nb = search(metric, h, protected=setting.protected, labels=setting.labels)
            except ValueError as err:
                notes.append(NOT_RUN.format(who=f"{who}, {search.__name__}", why=str(err)))
                continue
            query = f"{what}: model {nb.model + 1} of {h.shape[0]}; {_moved(nb, setting.protected)}"
            jobs.append((f"{identity}: {nb.kind}", query, metric, h.shape[0], nb))
    return jobs


def _flip_canaries(
    setting: _Setting, m: int
) -> tuple[CanaryRow | None, Callable[[float], CanaryRow] | None]:
    """The flip-canary one-run audit: (a row that cannot run, or a function of alpha)."""
    metric, a = setting.metric, setting.protected
    pop = setting.population(metric)
    label = "one run, flip canaries"
    if not (np.any(pop & a) and np.any(pop & ~a)):
        return CanaryRow(label, "flip", 0, math.inf, "", None, "a group is empty"), None
    keep = [int(np.flatnonzero(pop & (a == g))[0]) for g in (True, False)]
    pool = np.setdiff1d(np.flatnonzero(pop), keep)
    m = min(m, pool.size)
    if m < 1:
        return CanaryRow(label, "flip", 0, math.inf, "", None, "no person can be a canary"), None
    rng = setting.rng
    canaries = np.sort(rng.choice(pool, size=m, replace=False))
    rest = np.ones(a.shape[0], dtype=np.bool_)
    rest[canaries] = False
    rest1 = int(np.count_nonzero(a & pop & rest))
    rest0 = int(np.count_nonzero(~a & pop & rest))
    # the claim: every answer's flip pair, composed, at the worst sizes the coins can produce
    claim = 0.0
    for k in range(m + 1):
        sizes = _sizes_for(setting, metric, rest1 + k, rest0 + m - k)
        flips, _ = setting.pairs(metric, m, sizes)
        claim = max(claim, composed_pure_epsilon(flips))
    how = (
        f"the {m} answers' flip pairs at the audit-set level, composed (sum of max_loss), at the "
        "worst group sizes the coins can produce"
    )
    if math.isinf(claim):
        delta = setting.charge(m)[1]
        note = ONE_RUN_NEEDS_PURE.format(delta=delta)
        return CanaryRow(label, "flip", m, claim, how, None, note), None

    def run(alpha: float) -> CanaryRow:
        coins = rng.integers(0, 2, size=m).astype(np.bool_)
        b = a.copy()
        b[canaries] = coins
        probes = np.zeros((m, a.shape[0]))
        probes[np.arange(m), canaries] = 1.0
        n1 = rest1 + int(coins.sum())
        scores = _released_scores(setting, probes, b, n1, pop.sum() - n1, rest1 + m / 2.0)
        return CanaryRow(label, "flip", m, claim, how, canary_audit(scores, coins, alpha=alpha))

    return None, run


def _swap_canaries(
    setting: _Setting, m: int
) -> tuple[CanaryRow | None, Callable[[float], CanaryRow] | None]:
    """The swap-canary one-run audit (pairs exchanged by a coin; the sizes never change)."""
    metric, a = setting.metric, setting.protected
    pop = setting.population(metric)
    label = "one run, swap canaries"
    ones, zeros = np.flatnonzero(a & pop), np.flatnonzero(~a & pop)
    m = min(m, ones.size, zeros.size)
    if m < 1:
        return CanaryRow(label, "swap", 0, math.inf, "", None, "no pair can be a canary"), None
    rng = setting.rng
    u = rng.choice(ones, size=m, replace=False)
    v = rng.choice(zeros, size=m, replace=False)
    n1, n0 = setting.metric_sizes(metric, a)
    _, swaps = setting.pairs(metric, m, setting.audit_sizes(a))
    per_model = len(swaps) == 1 and swaps[0][1] == m
    claim = composed_pure_epsilon([(swaps[0][0], 1)] if per_model else swaps)
    how = (
        "one model's swap pair at the audit-set level (a coin moves its own probe only)"
        if per_model
        else "the batch's swap pair at the audit-set level"
    )
    if math.isinf(claim):
        note = ONE_RUN_NEEDS_PURE.format(delta=swaps[0][0].delta)
        return CanaryRow(label, "swap", m, claim, how, None, note), None

    def run(alpha: float) -> CanaryRow:
        coins = rng.integers(0, 2, size=m).astype(np.bool_)
        b = a.copy()
        b[u], b[v] = coins, ~coins
        probes = np.zeros((m, a.shape[0]))
        probes[np.arange(m), u] = 1.0
        scores = _released_scores(setting, probes, b, n1, n0, float(n1))
        return CanaryRow(label, "swap", m, claim, how, canary_audit(scores, coins, alpha=alpha))

    return None, run


def _sizes_for(setting: _Setting, metric: str, n1: int, n0: int) -> AuditSizes:
    """Audit-set sizes whose ``metric`` sizes are (n1, n0) (the other ones are not read)."""
    if metric in metrics.ON_POSITIVES:
        return AuditSizes(n1, n0, n1, n0)
    return AuditSizes(n1, n0)


def _released_scores(
    setting: _Setting,
    probes: NDArray[np.float64],
    protected: NDArray[np.bool_],
    n1: int,
    n0: int,
    expected_n1: float,
) -> NDArray[np.float64]:
    """Release the probes once (one batch) and score each: the log-likelihood ratio of its two
    possible exact answers at the expected group sizes (the auditor does not see the coins)."""
    metric = setting.metric
    m = probes.shape[0]
    exact = np.atleast_1d(
        metrics.evaluate(metric, probes, protected=protected, labels=setting.labels)
    )
    twin = setting.twin(metric, m)
    released = twin.draw(exact, n1=n1, n0=n0, rng=setting.rng)
    total = n1 + n0
    e1 = min(max(round(expected_n1), 1), total - 1)
    one = 1.0 / e1
    zero = (1.0 if metric.startswith("abs_") else -1.0) / (total - e1)
    scale = twin.scale(n1=e1, n0=total - e1)
    return log_likelihood_ratio(released, one, zero, family=twin.family, scale=scale)


def _audit_metric(metrics_allowed: tuple[str, ...]) -> str | None:
    usable = [m for m in metrics_allowed if m in SENSITIVITY_METRICS]
    if not usable:
        return None
    return "sp" if "sp" in usable else usable[0]


def audit_scenario(
    scenario: Scenario,
    *,
    trials: int = DEFAULT_TRIALS,
    seed: int | None = None,
    scale_factor: float = 1.0,
    canaries: int = DEFAULT_CANARIES,
    confidence: float = CONFIDENCE,
) -> AuditReport:
    """Audit the scenario's noise stage on its own audit set (module docstring).

    Parameters
    ----------
    scenario : a validated scenario
    trials : int
        Releases per world for each audited pair (half choose the test, half measure it).
    seed : int, optional
        The run's seed (default: the scenario's): it draws the audit set, as in a run, and seeds
        the audit's own random stream (role ``privacy_audit``).
    scale_factor : float
        Multiply the noise scale (1: the real release; below 1: an under-noised twin).
    canaries : int
        Canaries of each one-run audit (fewer when the audit set has fewer).
    confidence : float
        Probability with which all the report's lower bounds hold at once (Bonferroni).
    """
    from biasleak.sim.world import rng_for
    from biasleak.sim.world.data import draw_key, prepared

    started = time.perf_counter()
    if isinstance(trials, bool) or not isinstance(trials, int) or not 4 <= trials <= MAX_TRIALS:
        raise ValueError(BAD_TRIALS.format(most=MAX_TRIALS, value=trials))
    if isinstance(canaries, bool) or not isinstance(canaries, int) or canaries < 1:
        raise ValueError(BAD_CANARIES.format(value=canaries))
    if not 0.0 < confidence < 1.0:
        raise ValueError(BAD_CONFIDENCE.format(value=confidence))
    run_seed = scenario.seed if seed is None else int(seed)
    resolved = scenario.model_copy(update={"seed": run_seed})
    policy = resolved.compliance.build_policy()
    noise = policy.noise
    shared = prepared(*draw_key(resolved, run_seed))
    data, h0 = shared[0], shared[1]
    protected = np.asarray(data.protected, dtype=np.bool_)
    labels = np.asarray(data.public.audit.labels, dtype=np.bool_)
    n11 = int(np.count_nonzero(protected & labels))
    sizes = {
        "n": int(protected.shape[0]),
        "n1": int(np.count_nonzero(protected)),
        "n0": int(np.count_nonzero(~protected)),
        "n11": n11,
        "n10": int(np.count_nonzero(labels)) - n11,
    }
    metric = _audit_metric(tuple(policy.metrics))
    report = AuditReport(
        resolved.name,
        run_seed,
        "exact" if noise.exact else noise.mechanism,
        noise.epsilon,
        noise.delta,
        noise.per,
        noise.bounding,
        noise.sampler,
        metric or "-",
        sizes,
        float(scale_factor),
        trials,
        confidence,
    )
    notes: list[str] = []
    if noise.exact:
        return _finish(report, (), (), [EXACT_ANSWERS], started)
    if metric is None:
        return _finish(report, (), (), [NO_METRIC.format(metrics=list(policy.metrics))], started)
    if noise.sampler == "naive":
        notes.append(NAIVE_NOTE)
    setting = _Setting(
        noise, metric, protected, labels, float(scale_factor), rng_for(run_seed, "privacy_audit")
    )
    Twin(  # a bad scale factor or an unreleasable setting fails here, before any work
        noise.mechanism,
        *setting.charge(1),
        1,
        metric,
        noise.bounding,
        noise.sampler,
        float(scale_factor),
    )
    # plan every audit first: the Bonferroni level needs their number
    batch, names = _candidates(setting, h0)
    jobs: list[tuple[str, str, str, int, Neighbour]] = []
    for search, label in ((worst_flip, "flip, worst query"), (worst_swap, "swap, worst query")):
        nb = search(metric, batch, protected=protected, labels=labels)
        jobs.append((label, f"{names[nb.model]}; {_moved(nb, protected)}", metric, 1, nb))
    allowed = tuple(m for m in policy.metrics if m in SENSITIVITY_METRICS)
    jobs += _developer_jobs(resolved, setting, allowed, notes)
    plans: list[CanaryRow | Callable[[float], CanaryRow]] = []
    for plan in (_flip_canaries, _swap_canaries):
        fixed, runner = plan(setting, canaries)
        plans.append(fixed if fixed is not None else runner)  # type: ignore[arg-type]
    k = 2 * len(jobs) + sum(1 for p in plans if not isinstance(p, CanaryRow))
    alpha = (1.0 - confidence) / k
    rows = tuple(
        _audit_neighbour(setting, label, query, m_, models, nb, trials, alpha)
        for label, query, m_, models, nb in jobs
    )
    canary_rows = [p if isinstance(p, CanaryRow) else p(alpha) for p in plans]
    return _finish(report, rows, tuple(canary_rows), notes, started)


def _finish(
    report: AuditReport,
    pairs: tuple[PairRow, ...],
    canaries: tuple[CanaryRow, ...],
    notes: list[str],
    started: float,
) -> AuditReport:
    from dataclasses import replace

    return replace(
        report,
        pairs=pairs,
        canaries=canaries,
        notes=tuple(notes),
        seconds=time.perf_counter() - started,
    )


# -- the table for people -------------------------------------------------------------------------


def _num(x: float) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.4g}"


def format_audit(report: AuditReport) -> str:
    """The report as a table for people, leading with the verdict."""
    lines = [f"privacy audit of scenario {report.scenario} (seed {report.seed})"]
    verdict = report.verdict
    if report.bounds:
        verdict += (
            f" ({report.bounds} lower bounds, jointly at {report.confidence:.0%} confidence: "
            f"each one-sided Clopper-Pearson at {report.per_bound_confidence:.4%})"
        )
    lines.append(f"verdict: {verdict}")
    for line in report.defects:
        lines.append(f"  {line}")
    s = report.sizes
    per = "per model" if report.per == "model" else "per query"
    release = f"release: {report.mechanism}"
    if report.mechanism != "exact":
        release += f", epsilon {_num(report.epsilon)} {per}"
        if report.delta:
            release += f", delta {report.delta:.3g}"
        release += f", sampler {report.sampler}, bounding {report.bounding}"
        if report.scale_factor != 1.0:
            release += f"; AN UNDER-NOISED TWIN: noise scale x {report.scale_factor:g}"
    lines.append(release)
    lines.append(
        f"audit set: n = {s['n']} (N1 = {s['n1']}, N0 = {s['n0']}; y = 1: N11 = {s['n11']}, "
        f"N10 = {s['n10']}); metric {report.metric}"
    )
    if report.pairs:
        lines.append(
            "claims: the ceiling module's dominating pairs at the audit-set level; "
            f"draws: {report.trials} per world per pair (half choose the test, half measure it)"
        )
        lines.append("")
        header = (
            f"{'audited':<24} {'models':>6} {'shift':>8} {'claim':<22} {'claimed eps':>11} "
            f"{'eps >=':>8} {'claimed TV':>10} {'TV >=':>8}  exceeded"
        )
        lines += [header, "-" * len(header)]
        for row in report.pairs:
            a = row.audit
            lines.append(
                f"{row.label[:24]:<24} {row.models:>6} {row.shift:>8.4g} "
                f"{_pair_text(a.claim)[:22]:<22} {_num(a.claimed_epsilon):>11} "
                f"{a.epsilon.value:>8.4g} {_num(a.claimed_tv):>10} {a.tv.value:>8.4g}  "
                f"{', '.join(a.exceeded) or '-'}"
            )
        lines.append("")
        lines.append("queries and tests:")
        for row in report.pairs:
            a = row.audit
            lines.append(
                f"  {row.label}: {row.query} (shift {row.shift:.4g} of at most "
                f"{row.largest_shift:.4g}; release of {row.models} model(s) at epsilon "
                f"{_num(row.release_epsilon)}); eps test {a.epsilon.test.describe()} "
                f"(hits {a.epsilon.hits[0]}/{a.epsilon.draws[0]} vs {a.epsilon.hits[1]}/"
                f"{a.epsilon.draws[1]}), TV test {a.tv.test.describe()} (hits {a.tv.hits[0]}/"
                f"{a.tv.draws[0]} vs {a.tv.hits[1]}/{a.tv.draws[1]})"
            )
    if report.canaries:
        lines.append("")
        lines.append("one-run canary audits (Steinke, Nasr and Jagielski 2023):")
        for c in report.canaries:
            if c.result is None:
                lines.append(f"  {c.label}: {c.canaries} canaries, not run: {c.note}")
                continue
            r = c.result
            lines.append(
                f"  {c.label}: {c.canaries} canaries, {r.correct} of {r.guesses} guesses right; "
                f"epsilon >= {r.epsilon:.4g} against the claimed {_num(c.claimed_epsilon)} per "
                f"canary ({c.claim})"
            )
    if report.notes:
        lines.append("")
        lines.append("notes:")
        lines += [f"  {note}" for note in report.notes]
    lines.append(f"({report.seconds:.1f} s)")
    return "\n".join(lines)
