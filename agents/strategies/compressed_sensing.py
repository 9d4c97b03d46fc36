"""The compressed-sensing attack: Algorithm 2 of the paper, with the group-size probe of Remark 4.

1. **Probe** (Remark 4): one query of a model that accepts only person 0. Its SP is ``1/N1`` if
   that person is advantaged and ``-1/N0`` otherwise, which gives both group sizes. If the probe
   is refused (e.g. by a minimum-support rule), the strategy assumes a disadvantaged share of
   ``prior_minority`` instead.
2. **Sense**: ``queries`` models ``h_i = clip(h_0 + U(-b, b), 0, 1)`` around the base model,
   sent in batches of ``batch`` models; each model stays close to h_0, so its accuracy is close
   to the base model's (the paper saw 86.23% mean, std 0.26 on Adult for b = 0.1).
3. **Decode** (:mod:`biasleak.agents.strategies.decoders`; by default OMP, falling back to the
   paper's basis pursuit, or its box-constrained form with ``box: true``) after every
   ``decode_every`` answered batches (0: only once all batches are resolved), thresholding at
   half of ``1/N1 + 1/N0``.

The same attack works through the other metrics of Remark 5. ``eo_reveal`` asks for the equal
opportunity gap, which depends only on the people with y = 1: it decodes their attribute (with
their group sizes N11, N10) and can say nothing about the others, whom it guesses to be in the
advantaged group with zero confidence. ``equalized_odds_reveal`` asks for both gaps of equalized
odds: the TPR gap for the people with y = 1 and the FPR gap for those with y = 0, each decoded
separately, so it reaches everyone. Its probe accepts one person of each label class. The
developer knows the labels (they are public), so it knows whom its queries can reach; ``report``
says how many.

Under noise the attack uses what it knows of it. Every answer comes with its public facts
(:class:`~biasleak.agents.strategies.base.AnswerInfo`: mechanism, epsilon charged, models served
from the cache), from which :func:`~biasleak.agents.strategies.answer_noise.noise_of_answer`
builds the decoder's :class:`~biasleak.agents.strategies.decoders.NoiseModel` - the Laplace and
Gaussian scales are public, the data-dependent ones are estimated from the answers - and
``decoder: auto`` then decodes with ``amp``. The probe is read under the same noise: an answer
whose sign or size the noise could have produced by chance is not trusted (the prior's sizes,
refitted from all answers once there are more models than people), so a misread probe never
swaps the groups.

Refused batches are dropped. The strategy stops after its last batch is resolved.

With ``regenerate: true`` (``compressed_sensing`` only, for populations whose models do not fit
in memory) the strategy keeps no models, only their seeds (:mod:`.regenerated`). The default
path draws all models up front. The configurations live in :mod:`.sensing_config`, the
group-size logic in :mod:`.group_sizes`.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.messages import Refusal
from biasleak.agents.strategies.answer_noise import combine_noise, noise_of_answer
from biasleak.agents.strategies.base import (
    Action,
    AnswerInfo,
    DeveloperContext,
    Estimate,
    Stop,
    Strategy,
    Submit,
)
from biasleak.agents.strategies.decoders import decode_statistical_parity
from biasleak.agents.strategies.group_sizes import (
    PROBE_FALSE_SIGN,
    PROBE_SIZE_ERROR,
    assumed_sizes,
    probe_readable,
    probe_too_noisy,
    refitted_sizes,
    sizes_from_probe,
)
from biasleak.agents.strategies.model_source import PerturbedModels
from biasleak.agents.strategies.noise_model import EXACT, NoiseModel
from biasleak.agents.strategies.regenerated import (
    model_accuracy,
    regenerated_accuracy,
    regenerated_estimate,
)
from biasleak.agents.strategies.sensing_config import (
    REGENERATE_DECODER,
    CompressedSensingConfig,
    EoRevealConfig,
    EqualizedOddsRevealConfig,
    SensingConfig,
)

__all__ = [
    "PROBE_FALSE_SIGN",
    "PROBE_SIZE_ERROR",
    "REGENERATE_DECODER",
    "CompressedSensing",
    "CompressedSensingConfig",
    "EoRevealConfig",
    "EqualizedOddsRevealConfig",
    "Pending",
    "SensingConfig",
]


class Pending(enum.Enum):
    """What the reply to a compressed-sensing strategy's outstanding query is for.

    A strategy has at most one query outstanding; it records what that query was before
    returning it (:attr:`CompressedSensing.awaiting`), so that the answer or refusal handed back
    next is read the right way. The base attack sends only probes and batches; the adaptive
    variants (:mod:`biasleak.agents.strategies.adaptive`) add checks and trackers.
    """

    PROBE = "probe"
    """The group-size probe, or a value read like one (a tracker's combination)."""
    BATCH = "batch"
    """A batch of perturbed models (its index: :attr:`CompressedSensing.awaiting_batch`)."""
    CHECK = "check"
    """A model re-asked to learn about the noise or a cache, not a measurement to decode."""
    TRACKER = "tracker"
    """The four large-support models of a tracker, sent in place of a refused probe."""


METRIC_OF_KIND = {"compressed_sensing": "sp", "eo_reveal": "eo", "equalized_odds_reveal": "eodds"}


class CompressedSensing(Strategy):
    """Attribute-Reveal by compressed sensing (Theorem 5, Algorithm 2, Remarks 4 and 5)."""

    ATTACKS: ClassVar[bool] = True

    kind = "compressed_sensing"

    def __init__(self, config: SensingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: SensingConfig = config
        n = context.n
        self.metric = METRIC_OF_KIND.get(config.kind, "sp")  # type: ignore[attr-defined]
        labels = context.public.audit.labels == 1
        if self.metric == "sp":
            self.classes = [np.arange(n)]
        elif self.metric == "eo":
            self.classes = [np.flatnonzero(labels)]
        else:
            self.classes = [np.flatnonzero(labels), np.flatnonzero(~labels)]
        """Who each answer column depends on (its 'class')."""
        if any(c.size < 2 for c in self.classes):
            raise ValueError("every label class this metric needs must hold at least 2 people")
        h0 = context.base_predictions
        self.source: PerturbedModels | None = None
        """With ``regenerate``: the models, redrawn batch by batch from their seed (else None)."""
        self._accuracy: dict[int, NDArray[np.float64]] = {}
        """With ``regenerate``: batch index -> each sent model's accuracy, measured when built."""
        if getattr(config, "regenerate", False):
            if self.metric != "sp":
                raise ValueError("regenerate is for statistical parity answers only")
            self.source = PerturbedModels.from_rng(
                context.rng,
                h0,
                perturbation=config.perturbation,
                count=config.queries,
                batch=config.batch,
            )
            self.batches = list(self.source.batches)
        else:
            noise = context.rng.uniform(
                -config.perturbation, config.perturbation, (config.queries, n)
            )
            self.models: NDArray[np.float64] = np.clip(h0[None, :] + noise, 0.0, 1.0)
            """All m perturbed models, drawn up front from the developer's stream."""
            self.batches = [
                (start, min(start + config.batch, config.queries))
                for start in range(0, config.queries, config.batch)
            ]
        self.answers: dict[int, NDArray[np.float64]] = {}
        """Batch index -> answered values, shape (models, classes)."""
        self.group_sizes: list[tuple[int, int]] | None = None
        """Per class (N1, N0), as learned by the probe, or assumed."""
        self.group_sizes_source = ""
        self.stop_reason: str | None = None
        """Set by subclasses that decide to stop early."""
        self.decode_every = config.decode_every
        """Decode after every k answered batches (0: once, at the end)."""
        self.batch_infos: dict[int, AnswerInfo | None] = {}
        """Batch index -> the public facts of its answer (None when not given)."""
        self.sizes_uncertain = False
        """The probe was too noisy to trust: the sizes are re-estimated at every decode."""
        self.awaiting: Pending | None = None
        """What the outstanding query is for (None: no query is outstanding)."""
        self.awaiting_batch: int | None = None
        """The batch index of the outstanding query when it is a batch, else None."""
        self._next = 0
        self._answered_batches = 0
        self._infos_seen = 0

    # -- actions ------------------------------------------------------------------------------

    def next_action(self, now: float) -> Action:
        n = self.context.n
        if self.group_sizes is None:
            if self.config.probe:
                probe = np.zeros((1, n))
                probe[0, [int(c[0]) for c in self.classes]] = 1.0
                self.expect_probe()
                return Submit(probe, self.metric, self.config.prepare_hours, "probe")
            self._assume_sizes()
        if self.stop_reason is None and self._next < len(self.batches):
            self._expect(Pending.BATCH, self._next)
            return Submit(
                self._batch_models(self._next),
                self.metric,
                self.config.prepare_hours,
                f"batch {self._next + 1}/{len(self.batches)}",
            )
        answered = sum(v.shape[0] for v in self.answers.values())
        if answered and (self.estimate is None or self.estimate.models_used < answered):
            self._decode()  # a final decode over every answer
        return Stop(self.stop_reason or "all batches resolved")

    def expect_probe(self) -> None:
        """The next reply handed in answers the group-size probe.

        For whoever sends the probe on this strategy's behalf (a Sybil coordinator, whose
        identities send the strategy's queries) before it hands the reply to :meth:`on_answer`
        or :meth:`on_refusal`.
        """
        self._expect(Pending.PROBE)

    def _expect(self, pending: Pending, batch: int | None = None) -> None:
        """Record what the query about to be returned is for (``batch``: its batch index)."""
        self.awaiting = pending
        self.awaiting_batch = batch if pending is Pending.BATCH else None

    def _settle(self) -> None:
        """The outstanding query's reply has been handled: nothing is awaited any more."""
        self.awaiting = None
        self.awaiting_batch = None

    # -- hooks for the adaptive variants ----------------------------------------------------------

    def _batch_models(self, i: int) -> NDArray[np.float64]:
        """The models of batch i."""
        if self.source is not None:  # drawn afresh: the strategy keeps nothing once it is sent
            models = self.source.models(i)
            self._accuracy[i] = model_accuracy(models, self.context.public.audit.labels)
            return models
        start, stop = self.batches[i]
        return self.models[start:stop].copy()  # a Submit must not change if models are redrawn

    def _measurements(self) -> tuple[NDArray[np.intp], NDArray[np.float64], float | None]:
        """Rows of ``self.models`` answered so far, their answers and the noise level (or None)."""
        done = sorted(self.answers)
        index = np.concatenate([np.arange(*self.batches[i]) for i in done])
        return index, np.concatenate([self.answers[i] for i in done]), None

    def _after_decode(self, methods: list[str]) -> None:
        """Called after every decode with the decoders used (one per label class)."""

    def _assume_sizes(self) -> None:
        """Group sizes from ``prior_minority`` (:func:`.group_sizes.assumed_sizes`)."""
        self.group_sizes = assumed_sizes(self.classes, self.config.prior_minority)
        self.group_sizes_source = "prior"

    def _take_info(self) -> AnswerInfo | None:
        """The facts of the answer being handled, if the developer process passed them."""
        if len(self.answer_infos) > self._infos_seen:
            self._infos_seen = len(self.answer_infos)
            return self.answer_infos[-1]
        return None

    def _class_noise(self, info: AnswerInfo | None, col: int) -> NoiseModel:
        metric = "eo" if self.metric in ("eo", "eodds") else "sp"
        if self.metric == "eodds":
            metric = "eodds"  # two gaps per model: no public per-value sensitivity here
        return noise_of_answer(info, metric=metric, n=int(self.classes[col].size))

    def _noise(self, col: int, done: list[int]) -> NoiseModel:
        """The noise on the stacked answers of batches ``done`` for label class ``col``."""
        models = [self._class_noise(self.batch_infos.get(i), col) for i in done]
        counts = [self.answers[i].shape[0] for i in done]
        return combine_noise(models, counts)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        vals = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        info = self._take_info()
        if self.awaiting is Pending.PROBE:
            self._learn_sizes(
                vals[0], [self._class_noise(info, col) for col in range(len(self.classes))]
            )
        else:
            self.batch_infos[self._next] = info
            self.answers[self._next] = vals
            self._next += 1
            self._answered_batches += 1
            every = self.decode_every
            if every and self._answered_batches % every == 0:
                self._decode()
        self._settle()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if self.awaiting is Pending.PROBE:
            self._assume_sizes()
        else:
            self._next += 1
        self._settle()

    def _learn_sizes(
        self, values: NDArray[np.float64], noises: list[NoiseModel] | None = None
    ) -> None:
        """Group sizes from the probe's answer, unless the noise makes it untrustworthy.

        An unreadable answer (not one finite, non-zero value per class) gives the prior's sizes.
        A value the noise could have produced by chance (:func:`.group_sizes.probe_too_noisy`)
        makes the sizes uncertain: they start from the prior and, once there are more answered
        models than people, are re-estimated at every decode from all answers
        (:meth:`_refresh_sizes`; which group is the small one comes from ``prior_minority``),
        so a misread probe never swaps the groups silently.
        """
        if not probe_readable(values, len(self.classes)):
            self._assume_sizes()
            return
        if probe_too_noisy(values, noises or []):
            self._assume_sizes()
            self.sizes_uncertain = True
            self.group_sizes_source = "prior (probe too noisy)"
            return
        self.group_sizes = sizes_from_probe(self.classes, values)
        self.group_sizes_source = "probe"

    def _refresh_sizes(self, index: NDArray[np.intp], answers: NDArray[np.float64]) -> None:
        """Re-estimate uncertain group sizes (:func:`.group_sizes.refitted_sizes`).

        Only once there are more answered models than people. Not with ``regenerate``: the fit
        needs the whole matrix, and that path is for m < n.
        """
        if not self.sizes_uncertain or self.group_sizes is None or self.source is not None:
            return
        sizes, refitted = refitted_sizes(
            self.models,
            index,
            answers,
            self.classes,
            self.group_sizes,
            prior_minority=self.config.prior_minority,
        )
        if refitted:
            self.group_sizes_source = "least-squares fit (probe too noisy)"
        self.group_sizes = sizes

    # -- decoding -----------------------------------------------------------------------------

    def _decode(self) -> None:
        assert self.group_sizes is not None
        if not self.answers:
            return
        if self.source is not None:
            self._decode_regenerated()
            return
        index, answers, sigma = self._measurements()
        self._refresh_sizes(index, answers)
        n = self.context.n
        attribute = np.ones(n, dtype=np.int8)  # unreachable people: the advantaged guess
        confidence = np.zeros(n)
        probability = np.full(n, 0.5)
        has_probability = True
        methods = []
        done = sorted(self.answers)
        for col, (cls, (n1, n0)) in enumerate(zip(self.classes, self.group_sizes, strict=True)):
            noise = self._measured_noise(col, done, sigma)
            result = decode_statistical_parity(
                self.models[np.ix_(index, cls)],
                answers[:, col],
                n1=n1,
                n0=n0,
                method=self.config.decoder,
                box=self.config.box,
                sigma=sigma,
                noise=noise,
            )
            attribute[cls] = result.attribute
            confidence[cls] = result.confidence
            if result.probability is None:
                has_probability = False
            else:
                probability[cls] = result.probability
            methods.append(result.method)
        self._set_estimate(
            Estimate(
                attribute,
                confidence,
                int(index.size),
                "+".join(sorted(set(methods))),
                probability if has_probability else None,
            )
        )
        self._after_decode(methods)

    def _decode_regenerated(self) -> None:
        """Decode by blockwise AMP over the regenerated models (:mod:`.blockwise`)."""
        assert self.source is not None and self.group_sizes is not None
        done = sorted(self.answers)
        n1, n0 = self.group_sizes[0]
        estimate = regenerated_estimate(
            self.source, self.answers, n1=n1, n0=n0, noise=self._measured_noise(0, done, None)
        )
        self._set_estimate(estimate)
        self._after_decode([estimate.method])

    def _measured_noise(self, col: int, done: list[int], sigma: float | None) -> NoiseModel:
        """The noise model handed to the decoder (subclasses that combine answers override)."""
        if sigma is not None:
            return NoiseModel("gaussian", sigma) if sigma > 0 else EXACT
        return self._noise(col, done)

    def report(self) -> dict[str, Any]:
        h0 = self.context.base_predictions
        labels = self.context.public.audit.labels
        if self.source is None:
            acc = model_accuracy(self.models, labels)
        else:  # the batches never built are drawn once more, one at a time
            acc = regenerated_accuracy(
                self.source, self._accuracy, labels, batches=len(self.batches)
            )
        return {
            "metric": self.metric,
            "reachable": int(sum(c.size for c in self.classes)),
            "group_sizes": [list(g) for g in self.group_sizes] if self.group_sizes else None,
            "group_sizes_source": self.group_sizes_source,
            "models_answered": int(sum(v.shape[0] for v in self.answers.values())),
            "base_accuracy": float(((h0 >= 0.5) == (labels == 1)).mean()),
            "model_accuracy_mean": float(acc.mean()),
            "model_accuracy_std": float(acc.std()),
        }
