"""The averaging attack: ask every model several times and decode the medians.

Differential privacy adds fresh noise to every answer. If the compliance team charges nothing
cumulative - a fixed epsilon per query, no budget that runs out - an adversary can simply ask
again: the noise of repeated answers to one model averages away, and the per-query noise alone
does not stop reconstruction. This module is that adversary, built on compressed sensing
(:mod:`biasleak.agents.strategies.compressed_sensing`):

1. **Probe**, asked ``repeats`` times in one query. Its median, with the spread of the repeats,
   is read like the plain attack's probe: trusted only when the spread makes its sign and size
   unambiguous; otherwise the group sizes start from the prior and are refitted from all the
   answers once there are more models than people.
2. **Cache check** (``jitter: auto``): one model is asked twice. Equal answers reveal a cache
   (or exact answers), and then every repeat is nudged by ``Uniform(-1e-3, 1e-3)`` per person
   (:mod:`._jitter`) so that it is a new model and draws new noise; a refused check is read the
   same way. ``jitter: always`` and ``never`` skip the check.
3. **Sense**: ``queries`` perturbed models, each sent ``repeats`` times, ``batch`` rows per
   message.
4. **Decode** the median of every model's answers. The median is robust even to Cauchy noise,
   which has no mean; the medians still carry noise, close to Gaussian with the standard
   deviation :func:`median_spread` estimates from the repeats, and ``decoder: auto`` decodes
   them with ``amp`` on that Gaussian channel (OMP when the repeats agree exactly).

The report adds the number of repeats and whether the repeats were jittered.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.agents.messages import Refusal
from biasleak.agents.strategies.adaptive._jitter import JITTER
from biasleak.agents.strategies.adaptive.noise_probe import noise_verdict
from biasleak.agents.strategies.base import Action, DeveloperContext, Submit
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    Pending,
    SensingConfig,
)
from biasleak.agents.strategies.noise_model import EXACT, NoiseModel

__all__ = ["Averaging", "AveragingConfig", "median_spread"]


class AveragingConfig(SensingConfig):
    """Configuration of :class:`Averaging`."""

    kind: Literal["averaging"] = "averaging"
    queries: int = Field(300, ge=1, description="distinct perturbed models")
    repeats: int = Field(10, ge=1, description="times each model is asked")
    batch: int = Field(500, ge=1, description="rows per query message")
    jitter: Literal["auto", "always", "never"] = "auto"
    decoder: Literal["auto", "amp", "lasso", "basis_pursuit", "box", "lp_decoding"] = Field(
        "auto", description="decoder of the medians (auto: amp when they are noisy, else OMP)"
    )


def median_spread(values: NDArray[np.float64], groups: NDArray[np.intp]) -> float:
    r"""Standard deviation of the median of one group's repeated answers, from all groups.

    For Laplace noise of scale b, the mean absolute deviation from the median estimates b (its
    maximum-likelihood estimate), and the median of r answers has standard deviation about
    ``b / sqrt(r)`` (its density at the median is ``1/(2b)``; Laplace 1774). Heavier-tailed
    noise is estimated no worse: the median and the mean absolute deviation from it exist for
    every law with a density at its centre. Returns 0 for repeatable answers.
    """
    total, count, repeats = 0.0, 0, []
    for k in np.unique(groups):
        chunk = values[groups == k]
        total += float(np.abs(chunk - np.median(chunk)).sum())
        count += chunk.size
        repeats.append(chunk.size)
    if count == 0:
        return 0.0
    r = float(np.median(repeats))
    # the deviations from a sample median are smaller than from the centre by a factor (r-1)/r
    b = total / count * (r / max(r - 1.0, 1.0))
    return b / math.sqrt(r)


class Averaging(CompressedSensing):
    """Compressed sensing with repeated queries combined by their median.

    The medians are decoded with the noise they still carry: Gaussian of the standard deviation
    :func:`median_spread` estimates from the repeats (the median of r Laplace or Cauchy answers
    is close to normal), by ``amp`` under ``decoder: auto``. The repeated probe's median is
    trusted only when that spread makes it unambiguous; otherwise the group sizes start from the
    prior and are refitted from the medians (:func:`.decoders.least_squares_group_size`).
    """

    kind = "averaging"

    def __init__(self, config: AveragingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: AveragingConfig = config
        send = np.repeat(np.arange(config.queries), config.repeats)
        self.send = send
        """Model index of every row to send, in order."""
        self.batches = [
            (s, min(s + config.batch, send.size)) for s in range(0, send.size, config.batch)
        ]
        self.jitter = {"always": True, "never": False}.get(config.jitter)
        """Whether repeats are nudged into new models (None: not decided yet, under ``auto``)."""
        self._check: list[float] = []
        """Answers to the cache check (the same model, asked twice)."""
        self._jitter_rng = np.random.default_rng(context.rng.integers(2**63))

    def next_action(self, now: float) -> Action:
        if self.group_sizes is None and not self.config.probe:
            self._assume_sizes()
        if self.group_sizes is None:  # the probe, asked `repeats` times in one query
            n = self.context.n
            probe = np.zeros((self.config.repeats, n))
            probe[:, [int(c[0]) for c in self.classes]] = 1.0
            self.expect_probe()
            return Submit(probe, self.metric, self.config.prepare_hours, "probe")
        if self.jitter is None and self.awaiting is None:
            self._expect(Pending.CHECK)
            return Submit(
                self.models[:1].copy(), self.metric, self.config.prepare_hours, "cache check"
            )
        return super().next_action(now)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self.awaiting is Pending.PROBE:  # the median of the repeated probe, with its spread
            info = self._take_info()
            vals = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
            groups = np.zeros(vals.shape[0], dtype=np.intp)
            noises = []
            for col in range(vals.shape[1]):
                spread = median_spread(vals[:, col], groups) if vals.shape[0] > 1 else 0.0
                if spread > 0:
                    noises.append(NoiseModel("gaussian", spread))
                else:  # one answer, or one value repeated (a cache): judge it as one answer
                    noises.append(self._class_noise(info, col))
            self._learn_sizes(np.median(vals, axis=0), noises)
            self._settle()
            return
        if self.awaiting is Pending.CHECK:
            self._take_info()
            self._check.append(float(np.asarray(values).reshape(-1)[0]))
            self._settle()
            if len(self._check) == 2:
                self.jitter = noise_verdict(self._check)[0] == "repeatable"
            return
        super().on_answer(values, now)

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if self.awaiting is Pending.CHECK:
            self._settle()
            self.jitter = True
            return
        super().on_refusal(refusal, now)

    def _batch_models(self, i: int) -> NDArray[np.float64]:
        start, stop = self.batches[i]
        rows = self.models[self.send[start:stop]]
        if self.jitter:
            rows = np.clip(rows + self._jitter_rng.uniform(-JITTER, JITTER, rows.shape), 0.0, 1.0)
        return rows

    def _measurements(self) -> tuple[NDArray[np.intp], NDArray[np.float64], float | None]:
        done = sorted(self.answers)
        rows = np.concatenate([self.send[slice(*self.batches[i])] for i in done])
        values = np.concatenate([self.answers[i] for i in done])
        models = np.unique(rows)
        medians = np.stack([np.median(values[rows == k], axis=0) for k in models])
        sigma = median_spread(values[:, 0], rows)
        return models, medians, sigma

    def _measured_noise(self, col: int, done: list[int], sigma: float | None) -> NoiseModel:
        if col == 0 or sigma is None:
            return super()._measured_noise(col, done, sigma)
        index = np.concatenate([self.send[slice(*self.batches[i])] for i in done])
        values = np.concatenate([self.answers[i] for i in done])
        spread = median_spread(values[:, col], index)
        return NoiseModel("gaussian", spread) if spread > 0 else EXACT

    def report(self) -> dict[str, Any]:
        out = super().report()
        out.update(repeats=self.config.repeats, jitter=self.jitter)
        return out
