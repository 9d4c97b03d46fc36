r"""The floating-point attack: read a person's attribute from the bits of one noisy answer.

A one-person model (it accepts only person j) has the statistical parity gap ``1/N1`` if j is
advantaged and ``-1/N0`` otherwise (Hamman et al. 2023, Example 1). Differential privacy hides
which of the two it is by adding noise: ``y = v + X`` with X Laplace. On paper the two output
densities differ by at most a factor ``e^eps``. In IEEE doubles they need not overlap at all
(Mironov, "On significance of the least significant bits for differential privacy", CCS 2012):
numpy draws X as ``scale * log(2U)`` from a 53-bit uniform U, so X takes only 2^53 values,
unevenly spread, and ``fl(v + X)`` rounds again. Many released doubles can be produced from one
true value but from no draw at all around the other one. Seeing such a double reveals the person
with certainty, whatever epsilon is.

How the attack proceeds:

1. **Query**: one-person models for each target, ``batch`` models per query.
2. **Reachability**: for a candidate exact value v and a released double y, the noise doubles x
   with ``fl(v + x) == y`` form an interval (rounding is monotone), found by bisection over the
   ordered doubles (:func:`noise_interval`). numpy's Laplace draw is a non-decreasing function of
   the integer k behind U = k 2^-53 (:func:`laplace_noise_from_index`), so a second bisection
   over k finds whether any of the 2^53 draws lands in the interval
   (:func:`laplace_reachable`).
3. **Group sizes**: the candidates depend on the unknown N0. Every hypothesis N0 in
   ``1..n-1`` is kept while every answer is reachable from one of its two candidates
   (computed with :mod:`biasleak.mechanisms.metrics` on a hypothetical attribute vector, so the
   doubles equal the compliance side's bit for bit). The true N0 always survives; with a few
   dozen answers the others die out.
4. **Decision**: a person whose answer is reachable from exactly one candidate (under every
   surviving hypothesis) is revealed with probability 1. Otherwise the guess is the candidate
   under which y is likelier: the probability is ``p1 / (p1 + p0)`` from the noise density,
   averaged over the surviving N0 weighted by their likelihood. People not targeted get the
   prior guess (the larger group) with the prior share as probability.

Noise scales are public formulas: ``global_sensitivity(sp, n, m) / eps`` for ``laplace`` (the
same float operations as :func:`biasleak.mechanisms.release.release`), and, per N0 hypothesis,
``2 S_beta / eps`` for ``smooth_laplace``. Not invertible this way, and so left to the
likelihood: the Cauchy noise of ``attribute_conceal`` (a ratio of two ziggurat normals) and
numpy's Gaussian (ziggurat sampling: its output is not a monotone function of one uniform
integer), and any answer from the ``safe`` sampler, whose outputs lie on a power-of-two grid with
noise drawn exactly in grid units, so every grid value is reachable from both candidates.

Output bounding is not part of the public answer facts. Clamped releases work (a value at an end
of the range is treated as evidence for neither candidate); truncated ones are drawn by an
inverse CDF, not by the plain sampler. A correct sampler model explains every answer under the
true N0, so an answer that no surviving hypothesis explains proves the model wrong: it is
counted in ``unexplained_answers`` and from then on no decision is claimed certain.

What the attacker uses is public: the mechanism, the epsilon and delta charged, the sampler, the
audit-set size and the published formulas. Never the protected attribute, and never the noise
scale of a data-dependent mechanism (it enumerates it over hypotheses instead).

The model of the sampler - numpy's draws rebuilt bit for bit, the reachability test, the
candidate values, each answer's noise law and density - lives in
:mod:`~biasleak.agents.strategies.fp_sampler`; this module holds the strategy that queries,
prunes the group-size hypotheses and decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from scipy import special

from biasleak.agents.messages import Refusal
from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Estimate,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
)
from biasleak.agents.strategies.fp_sampler import (
    INVERTIBLE_MECHANISMS,
    laplace_noise_from_index,
    laplace_reachable,
    log_density,
    noise_interval,
    noise_law,
    sp_candidates,
)
from biasleak.mechanisms.metrics import METRIC_RANGES
from biasleak.mechanisms.release import DATA_DEPENDENT

__all__ = [
    "INVERTIBLE_MECHANISMS",
    "FpProbe",
    "FpProbeConfig",
    "laplace_noise_from_index",
    "laplace_reachable",
    "log_density",
    "noise_interval",
    "noise_law",
    "sp_candidates",
]

TARGETS_INVALID = "targets must be 'all', a count in [1, {n}] or audit-set indices in [0, {last}]"


# -- the strategy ---------------------------------------------------------------------------------


class FpProbeConfig(StrategyConfig):
    """Configuration of :class:`FpProbe`."""

    kind: Literal["fp_probe"] = "fp_probe"
    targets: Literal["all"] | int | list[int] = Field(
        "all",
        description="'all', a number of people drawn at random, or a list of audit-set indices",
    )
    batch: int = Field(50, ge=1, description="one-person models per query")
    prepare_hours: float = Field(
        0.5, ge=0.0, allow_inf_nan=False, description="time to build one batch"
    )
    certainty_hypotheses: int = Field(
        64,
        ge=1,
        description="claim certainty only once at most this many group-size hypotheses remain",
    )


@dataclass(frozen=True)
class _Record:
    """One answered one-person model and the public facts of its answer."""

    target: int
    released: float
    mechanism: str
    sampler: str
    epsilon: float
    delta: float
    models: int
    """Models released fresh in the same answer (the noise was calibrated to them)."""


class FpProbe(Strategy):
    """One-person queries decoded bit for bit against the floating-point noise sampler."""

    ATTACKS: ClassVar[bool] = True

    kind = "fp_probe"

    def __init__(self, config: FpProbeConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: FpProbeConfig = config
        n = context.n
        if n < 3:
            raise ValueError(f"the audit set must hold at least 3 people; it holds {n}")
        self.targets: list[int] = self._choose_targets(config.targets, context)
        """Audit-set indices probed, in order."""
        self.batches = [
            self.targets[i : i + config.batch] for i in range(0, len(self.targets), config.batch)
        ]
        self.records: list[_Record] = []
        """Every answered one-person model."""
        self.alive: list[int] = list(range(1, n))
        """Group sizes N0 still consistent with every answer."""
        self.unexplained = 0
        """Answers no surviving hypothesis could produce (the sampler model is wrong)."""
        self._candidates: dict[int, tuple[float, float]] = {}
        self._scales: dict[tuple[str, int, float, float, int], tuple[str, float]] = {}
        self._reach: dict[tuple[float, float, float], bool] = {}
        self._next = 0
        self._certain = 0
        self._n0_best: int | None = None
        """Posterior mode of N0 at the latest estimate."""

    @staticmethod
    def _choose_targets(spec: str | int | list[int], context: DeveloperContext) -> list[int]:
        n = context.n
        error = TARGETS_INVALID.format(n=n, last=n - 1)
        if spec == "all":
            return list(range(n))
        if isinstance(spec, int):
            if not 1 <= spec <= n:
                raise ValueError(f"{error}; received {spec}")
            return sorted(int(i) for i in context.rng.choice(n, size=spec, replace=False))
        if isinstance(spec, list):
            bad = [t for t in spec if not 0 <= t < n]
            if bad or not spec:
                raise ValueError(f"{error}; received {bad or spec}")
            return list(dict.fromkeys(spec))
        raise ValueError(f"{error}; received {spec!r}")

    # -- actions ------------------------------------------------------------------------------

    def next_action(self, now: float) -> Action:
        if self._next >= len(self.batches):
            return Stop("every target queried")
        people = self.batches[self._next]
        models = np.zeros((len(people), self.context.n))
        models[np.arange(len(people)), people] = 1.0
        return Submit(
            models,
            "sp",
            self.config.prepare_hours,
            f"one-person batch {self._next + 1}/{len(self.batches)}",
        )

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self._next += 1

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        people = self.batches[self._next]
        self._next += 1
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        info = self.answer_infos[-1] if self.answer_infos else None
        cached = info.cached if info is not None else ()
        if len(cached) != len(people):
            cached = (False,) * len(people)
        fresh = sum(1 for c in cached if not c)
        for person, value, was_cached in zip(people, vals.tolist(), cached, strict=True):
            if was_cached:  # drawn in an earlier answer with other parameters: skip it
                continue
            self.records.append(
                _Record(
                    person,
                    float(value),
                    info.mechanism if info is not None else "unknown",
                    info.sampler if info is not None else "unknown",
                    float(info.epsilon_charged) if info is not None else math.nan,
                    float(info.delta_charged) if info is not None else 0.0,
                    max(fresh, 1),
                )
            )
            self._prune(self.records[-1])
        self._publish()

    # -- noise model ----------------------------------------------------------------------------

    def _candidate(self, n0: int) -> tuple[float, float]:
        if n0 not in self._candidates:
            self._candidates[n0] = sp_candidates(self.context.n, n0)
        return self._candidates[n0]

    def _noise(self, rec: _Record, n0: int) -> tuple[str, float]:
        """(family, scale) of the record's noise under hypothesis N0 (:func:`.noise_law`)."""
        data_dependent = rec.mechanism in DATA_DEPENDENT
        key = (rec.mechanism, rec.models, rec.epsilon, rec.delta, n0 if data_dependent else 0)
        if key in self._scales:
            return self._scales[key]
        out = noise_law(
            rec.mechanism,
            n=self.context.n,
            n0=n0,
            models=rec.models,
            epsilon=rec.epsilon,
            delta=rec.delta,
        )
        self._scales[key] = out
        return out

    def _testable(self, rec: _Record) -> bool:
        """Whether the record's output can be tested bit for bit."""
        if rec.released in METRIC_RANGES["sp"]:  # possibly clamped to a range end: no evidence
            return False
        if rec.mechanism == "exact" or math.isinf(rec.epsilon):
            return True
        return rec.mechanism in INVERTIBLE_MECHANISMS and rec.sampler == "naive"

    def _reachable(self, rec: _Record, n0: int) -> tuple[bool, bool]:
        """Whether (advantaged, disadvantaged) candidates can produce the record's output."""
        if not self._testable(rec):
            return True, True
        family, scale = self._noise(rec, n0)
        out = []
        for v in self._candidate(n0):
            key = (rec.released, v, scale)
            if key not in self._reach:
                if family == "exact":
                    self._reach[key] = rec.released == v
                elif family == "laplace" and scale > 0.0:
                    self._reach[key] = laplace_reachable(v, rec.released, scale)
                else:
                    self._reach[key] = True
            out.append(self._reach[key])
        return out[0], out[1]

    def _prune(self, rec: _Record) -> None:
        if not self._testable(rec):
            return
        survivors = [n0 for n0 in self.alive if any(self._reachable(rec, n0))]
        if survivors:
            self.alive = survivors
        else:
            self.unexplained += 1

    def _hypotheses(self) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        r"""The surviving N0, their posterior weights, and each answer's log-likelihood ratio.

        The posterior is a uniform prior over the survivors times the likelihood of every answer
        as a mixture over the person's two candidates with the hypothesis's shares,
        :math:`\prod_i \big(\tfrac{N_1}{n} p(y_i \mid 1/N_1) + \tfrac{N_0}{n}
        p(y_i \mid -1/N_0)\big)`. The ratio matrix (hypotheses x answers, in record order) holds
        :math:`\log p(y_i \mid 1/N_1) - \log p(y_i \mid -1/N_0)`.
        """
        n = self.context.n
        h = np.asarray(self.alive, dtype=np.int64)
        ratio = np.zeros((h.size, len(self.records)))
        if not self.records:
            return h, np.full(h.size, 1.0 / h.size), ratio
        v1 = (1.0 / (n - h))[:, None]
        v0 = (-1.0 / h)[:, None]
        total = np.zeros(h.size)
        groups: dict[tuple[str, str, float, float, int], list[int]] = {}
        for i, rec in enumerate(self.records):
            key = (rec.mechanism, rec.sampler, rec.epsilon, rec.delta, rec.models)
            groups.setdefault(key, []).append(i)
        for (mechanism, sampler, eps, delta, m), rows in groups.items():
            probe = _Record(0, 0.0, mechanism, sampler, eps, delta, m)
            pairs = [self._noise(probe, int(n0)) for n0 in h]
            family = pairs[0][0]
            scale = np.array([p[1] for p in pairs])[:, None]
            y = np.array([self.records[i].released for i in rows])[None, :]
            l1 = log_density(family, y, v1, scale)
            l0 = log_density(family, y, v0, scale)
            ratio[:, rows] = l1 - l0
            mix = np.logaddexp(l1 + np.log((n - h) / n)[:, None], l0 + np.log(h / n)[:, None])
            total += mix.sum(axis=1)
        weights = np.exp(total - total.max())
        return h, weights / weights.sum(), ratio

    # -- estimate -----------------------------------------------------------------------------

    def _publish(self) -> None:
        n = self.context.n
        h, weights, ratio = self._hypotheses()
        self._n0_best = int(h[int(np.argmax(weights))])
        n0_mean = float(weights @ h)
        majority = 1 if n - n0_mean >= n0_mean else 0
        attribute = np.full(n, majority, dtype=np.int8)
        probability = np.full(n, max(n - n0_mean, n0_mean) / n)
        confidence = np.zeros(n)
        certain = 0
        # A correct model of the sampler explains every answer; once one is unexplained (e.g. a
        # truncated release, which is not the plain sampler), no bit-level claim is trusted.
        check_all = self.unexplained == 0 and len(self.alive) <= self.config.certainty_hypotheses
        # P(advantaged) from the likelihood ratio, averaged over the group-size posterior.
        p_adv = weights @ special.expit(ratio) if self.records else np.zeros(0)
        for i, rec in enumerate(self.records):
            j = rec.target
            if check_all and self._testable(rec):
                union = [False, False]
                for n0 in self.alive:
                    r1, r0 = self._reachable(rec, n0)
                    union[0] |= r1
                    union[1] |= r0
                if union[0] != union[1]:
                    attribute[j] = 1 if union[0] else 0
                    probability[j] = 1.0
                    confidence[j] = 1.0
                    certain += 1
                    continue
            p = float(p_adv[i])
            if p == 0.5:
                attribute[j], p = majority, 0.5
            else:
                attribute[j] = 1 if p > 0.5 else 0
                p = max(p, 1.0 - p)
            probability[j] = p
            confidence[j] = 2.0 * p - 1.0
        self._certain = certain
        self._set_estimate(
            Estimate(attribute, confidence, len(self.records), self.kind, probability=probability)
        )

    def report(self) -> dict[str, Any]:
        alive = self.alive
        return {
            "targets": len(self.targets),
            "answered": len(self.records),
            "revealed_with_certainty": self._certain,
            "n0_hypotheses_left": len(alive),
            "n0_estimate": (
                self._n0_best if len(alive) <= self.config.certainty_hypotheses else None
            ),
            "n0_range": [alive[0], alive[-1]] if alive else None,
            "unexplained_answers": self.unexplained,
            "audit_set_size": self.context.n,
        }
