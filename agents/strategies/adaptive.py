"""Adaptive adversaries: attacks that change course according to what the compliance agent does.

``noise_probe``
    Re-asks the same model. Equal answers mean exact answers or a cache; different answers mean
    fresh noise, whose spread estimates its scale.
``averaging``
    Compressed sensing where every model (the group-size probe included) is asked ``repeats``
    times and the answers are combined by their median (robust even to Cauchy noise, which has no
    mean), decoded with the noise the medians still carry (``amp`` with a Gaussian channel of the
    spread the repeats show); a repeated probe too noisy to trust gives way to group sizes fitted
    from all answers. Against fresh noise without a cumulative budget,
    per-query noise alone does not stop reconstruction. With ``jitter: auto`` it first re-asks
    one model: when the answers are equal (a cache), every repeat is nudged by
    ``Uniform(-1e-3, 1e-3)`` so that it is a new model.
``evasive``
    Compressed sensing that routes around refusals: a probe refused for low support (or as a
    near-duplicate) is replaced by a tracker (Denning et al. 1979): four large-support models
    A, B = A with R and person 0 flipped, C = A with R and S flipped, D = A with S flipped, for
    disjoint random sets R and S, so that ``SP(B) - SP(C) + SP(D) - SP(A) = d_0 v_0`` while every
    two of them differ in at least ``|R|`` people; a batch refused as near-duplicate is redrawn
    with twice the perturbation; a rate-limited batch waits for ``retry_after`` (or a day).
``sequential_cs``
    Compressed sensing that decodes after every batch and stops as soon as the estimate is exact
    (OMP fitted the answers exactly) or has not changed for ``patience`` decodes: it spends only
    the queries it needs.
``metric_switching``
    Tries compressed sensing through SP, then EO, equalized odds and finally the |SP| partition,
    moving on whenever the current metric is refused as not answered.
``budget_aware``
    Knows the per-model epsilon and the budget, and plans: ``spread`` spends the whole budget on
    one compressed-sensing run; ``targeted`` spends it all on one person with repeated differencing
    pairs and takes the median; ``auto`` spreads when the budget buys at least
    ``4 k ln(n/k)`` models for the assumed minority size k, and targets otherwise.
``proxy_prior``
    Starts from a proxy estimate of A - a model trained on an external labelled sample, never on
    the audit set's attribute - and uses it as a prior: basis pursuit weighted by the proxy's
    probabilities. It measures the noise with 16 jittered copies of one model and keeps the
    proxy estimate when the answers' variance is not above twice the noise's.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from scipy import optimize

from biasleak.agents.models import build_pipeline
from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Estimate,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
    Wait,
)
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
    EoRevealConfig,
    EqualizedOddsRevealConfig,
    _SensingConfig,
    forward_answer,
)
from biasleak.agents.strategies.decoders import EXACT, METHODS, NoiseModel, amp, lp_decoding
from biasleak.agents.strategies.partition import AbsSpPartition, AbsSpPartitionConfig
from biasleak.agents.strategies.targeted import flipped

__all__ = [
    "Averaging",
    "AveragingConfig",
    "BudgetAware",
    "BudgetAwareConfig",
    "Evasive",
    "EvasiveConfig",
    "MetricSwitching",
    "MetricSwitchingConfig",
    "NoiseProbe",
    "NoiseProbeConfig",
    "ProxyPrior",
    "ProxyPriorConfig",
    "SequentialCS",
    "SequentialCSConfig",
]


# -- noise probe -----------------------------------------------------------------------------------


class NoiseProbeConfig(StrategyConfig):
    """Configuration of :class:`NoiseProbe`."""

    kind: Literal["noise_probe"] = "noise_probe"
    repeats: int = Field(3, ge=2, description="how many times the same model is asked")
    prepare_hours: float = Field(0.1, ge=0.0, allow_inf_nan=False)


def noise_verdict(answers: list[float]) -> tuple[str, float]:
    """("fresh_noise" or "repeatable", spread) for repeated answers to one model."""
    values = np.asarray(answers, dtype=np.float64)
    spread = float(np.max(values) - np.min(values)) if values.size else 0.0
    return ("fresh_noise" if spread > 0.0 else "repeatable"), spread


class NoiseProbe(Strategy):
    """Re-asks the base model to tell fresh noise from caching or exact answers."""

    kind = "noise_probe"

    def __init__(self, config: NoiseProbeConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: NoiseProbeConfig = config
        self.answers: list[float] = []
        self.refused: list[str] = []

    def next_action(self, now: float) -> Action:
        if len(self.answers) + len(self.refused) >= self.config.repeats:
            return Stop(self.verdict)
        h0 = self.context.base_predictions
        return Submit(h0[None, :], "sp", self.config.prepare_hours, "same model again")

    @property
    def verdict(self) -> str:
        if len(self.answers) < 2:
            return "undetermined"
        return noise_verdict(self.answers)[0]

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        self.answers.append(float(np.asarray(values).reshape(-1)[0]))

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        self.refused.append(reason)

    def report(self) -> dict[str, Any]:
        values = np.asarray(self.answers)
        # For Laplace noise of scale b the mean absolute deviation from the median is about b.
        scale = float(np.mean(np.abs(values - np.median(values)))) if values.size > 1 else None
        return {
            "verdict": self.verdict,
            "answers": self.answers,
            "refused": self.refused,
            "scale_estimate": scale,
        }


# -- sequential compressed sensing -----------------------------------------------------------------


class SequentialCSConfig(_SensingConfig):
    """Configuration of :class:`SequentialCS`."""

    kind: Literal["sequential_cs"] = "sequential_cs"
    batch: int = Field(25, ge=1, description="models per query message")
    decoder: Literal[METHODS] = Field(  # type: ignore[valid-type]
        "omp_only", description="decoder after each batch (omp_only: cheap, no fallback)"
    )
    patience: int = Field(2, ge=1, description="stop after this many unchanged decodes")


class SequentialCS(CompressedSensing):
    """Decode after every batch; stop when exact or stable."""

    kind = "sequential_cs"

    def __init__(self, config: SequentialCSConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.decode_every = 1
        self._unchanged = 0
        self._previous: NDArray[np.int8] | None = None

    def _after_decode(self, methods: list[str]) -> None:
        assert self.estimate is not None
        if all(m == "omp" for m in methods):
            self.stop_reason = "the answers are fitted exactly: the estimate is final"
            return
        current = self.estimate.attribute
        if self._previous is not None and np.array_equal(current, self._previous):
            self._unchanged += 1
        else:
            self._unchanged = 0
        self._previous = current.copy()
        patience = self.config.patience  # type: ignore[attr-defined]
        if self._unchanged >= patience:
            self.stop_reason = f"the estimate did not change for {patience} decodes"


# -- averaging -------------------------------------------------------------------------------------


class AveragingConfig(_SensingConfig):
    """Configuration of :class:`Averaging`."""

    kind: Literal["averaging"] = "averaging"
    queries: int = Field(300, ge=1, description="distinct perturbed models")
    repeats: int = Field(10, ge=1, description="times each model is asked")
    batch: int = Field(500, ge=1, description="rows per query message")
    jitter: Literal["auto", "always", "never"] = "auto"
    decoder: Literal["auto", "amp", "lasso", "basis_pursuit", "box", "lp_decoding"] = Field(
        "auto", description="decoder of the medians (auto: amp when they are noisy, else OMP)"
    )


JITTER = 1e-3
NOISE_CHECKS = 16


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
    trusted only when that spread makes it unambiguous; otherwise the group sizes come from the
    spread of the medians (:func:`.compressed_sensing.moment_group_size`).
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
        self._check: list[float] = []
        self._jitter_rng = np.random.default_rng(context.rng.integers(2**63))

    def next_action(self, now: float) -> Action:
        if self.group_sizes is None and not self.config.probe:
            self._assume_sizes()
        if self.group_sizes is None:  # the probe, asked `repeats` times in one query
            n = self.context.n
            probe = np.zeros((self.config.repeats, n))
            probe[:, [int(c[0]) for c in self.classes]] = 1.0
            self._pending = "probe"
            return Submit(probe, self.metric, self.config.prepare_hours, "probe")
        if self.jitter is None and self._pending is None:
            self._pending = "check"
            return Submit(
                self.models[:1].copy(), self.metric, self.config.prepare_hours, "cache check"
            )
        return super().next_action(now)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self._pending == "probe":  # the median of the repeated probe, with its spread
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
            self._pending = None
            return
        if self._pending == "check":
            self._take_info()
            self._check.append(float(np.asarray(values).reshape(-1)[0]))
            self._pending = None
            if len(self._check) == 2:
                self.jitter = noise_verdict(self._check)[0] == "repeatable"
            return
        super().on_answer(values, now)

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        if self._pending == "check":
            self._pending = None
            self.jitter = True
            return
        super().on_refusal(reason, detail, now)

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


# -- evasive ---------------------------------------------------------------------------------------


class EvasiveConfig(_SensingConfig):
    """Configuration of :class:`Evasive`."""

    kind: Literal["evasive"] = "evasive"
    tracker_size: int = Field(10, ge=2, description="|R| = |S| of the tracker probe")
    max_perturbation: float = Field(0.5, gt=0.0, le=1.0)


class Evasive(CompressedSensing):
    """Compressed sensing that routes around refusal rules and rate limits."""

    kind = "evasive"

    def __init__(self, config: EvasiveConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: EvasiveConfig = config
        self.adaptations: list[str] = []
        """What it changed, and why (for the report)."""
        self.tracker: NDArray[np.float64] | None = None
        self.tracker_d0 = 0.0
        self.perturbation = config.perturbation
        self._wait_until: float | None = None

    def next_action(self, now: float) -> Action:
        if self._wait_until is not None and now < self._wait_until:
            return Wait(self._wait_until)
        self._wait_until = None
        if self.tracker is not None and self.group_sizes is None:
            self._pending = "tracker"
            return Submit(self.tracker, "sp", self.config.prepare_hours, "tracker probe")
        return super().next_action(now)

    def _build_tracker(self) -> None:
        n = self.context.n
        k = min(self.config.tracker_size, (n - 1) // 2)
        base = (self.context.base_predictions >= 0.5).astype(np.float64)
        others = self.context.rng.permutation(np.arange(1, n))
        r, s = others[:k], others[k : 2 * k]

        def flip(idx: NDArray[np.intp]) -> NDArray[np.float64]:
            h = base.copy()
            h[idx] = 1.0 - h[idx]
            return h

        self.tracker = np.stack(
            [base, flip(np.append(r, 0)), flip(np.concatenate([r, s])), flip(s)]
        )
        self.tracker_d0 = 1.0 - 2.0 * base[0]

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self._pending == "tracker":
            a, b, c, d = np.asarray(values, dtype=np.float64).reshape(-1)
            v0 = (b - c + d - a) / self.tracker_d0
            self._pending = "probe"  # learn the sizes as from a one-person probe
            super().on_answer(np.array([v0]), now)
            return
        super().on_answer(values, now)

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        if self._pending == "probe" and reason in ("low_support", "near_duplicate"):
            self.adaptations.append(f"probe refused ({reason}): using a tracker instead")
            self._build_tracker()
            self._pending = None
            return
        if self._pending == "tracker":
            self.adaptations.append(f"tracker refused ({reason}): assuming the group sizes")
            self._pending = None
            self._assume_sizes()
            return
        if self._pending is not None and self._pending.startswith("batch"):
            if reason == "near_duplicate" and self.perturbation < self.config.max_perturbation:
                self.perturbation = min(2 * self.perturbation, self.config.max_perturbation)
                self._redraw()
                self.adaptations.append(
                    f"batch refused as near-duplicate: perturbation raised to {self.perturbation:g}"
                )
                self._pending = None
                return  # the same batch index is sent again, redrawn
            if reason == "rate_limited":
                self._wait_until = (
                    self.last_retry_after if self.last_retry_after is not None else now + 24.0
                )
                self.adaptations.append(f"rate limited: waiting until t = {self._wait_until:g}")
                self._pending = None
                return
        super().on_refusal(reason, detail, now)

    def _redraw(self) -> None:
        start = self.batches[self._next][0]
        h0 = self.context.base_predictions
        rest = self.models.shape[0] - start
        noise = self.context.rng.uniform(-self.perturbation, self.perturbation, (rest, h0.size))
        self.models[start:] = np.clip(h0[None, :] + noise, 0.0, 1.0)

    def report(self) -> dict[str, Any]:
        out = super().report()
        out.update(adaptations=self.adaptations, perturbation=self.perturbation)
        return out


# -- metric switching ------------------------------------------------------------------------------


class MetricSwitchingConfig(_SensingConfig):
    """Configuration of :class:`MetricSwitching`."""

    kind: Literal["metric_switching"] = "metric_switching"
    metrics: list[Literal["sp", "eo", "eodds", "abs_sp"]] = Field(
        default_factory=lambda: ["sp", "eo", "eodds", "abs_sp"], min_length=1
    )


class MetricSwitching(Strategy):
    """Runs the attack through one metric after another until one is answered."""

    kind = "metric_switching"

    def __init__(self, config: MetricSwitchingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: MetricSwitchingConfig = config
        self.tried: list[str] = []
        self._index = -1
        self._answered_any = False
        self.current: Strategy | None = None
        self._infos_seen = 0
        self._advance()

    def _advance(self) -> bool:
        self._index += 1
        if self._index >= len(self.config.metrics):
            self.current = None
            return False
        metric = self.config.metrics[self._index]
        self.tried.append(metric)
        shared = self.config.model_dump(exclude={"kind", "metrics"})
        config: StrategyConfig
        if metric == "sp":
            config = CompressedSensingConfig(**shared)
            self.current = CompressedSensing(config, self.context)
        elif metric == "eo":
            config = EoRevealConfig(**shared)
            self.current = CompressedSensing(config, self.context)
        elif metric == "eodds":
            config = EqualizedOddsRevealConfig(**shared)
            self.current = CompressedSensing(config, self.context)
        else:
            config = AbsSpPartitionConfig(
                batch=shared["batch"], prepare_hours=shared["prepare_hours"]
            )
            self.current = AbsSpPartition(config, self.context)
        self._answered_any = False
        return True

    def _sync(self) -> None:
        if (
            self.current is not None
            and self.current.estimate is not None
            and (self.current.estimate is not self.estimate)
        ):
            self._set_estimate(self.current.estimate)

    def next_action(self, now: float) -> Action:
        if self.current is None:
            return Stop(f"no metric answered (tried {self.tried})")
        action = self.current.next_action(now)
        self._sync()
        if isinstance(action, Stop):
            return Stop(f"{action.reason} (metric {self.tried[-1]})")
        return action

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        assert self.current is not None
        self._answered_any = True
        self._infos_seen = forward_answer(self, self.current, values, now, self._infos_seen)
        self._sync()

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        assert self.current is not None
        if reason == "invalid" and "is not answered" in detail and not self._answered_any:
            self._advance()
            return
        self.current.last_retry_after = self.last_retry_after
        self.current.on_refusal(reason, detail, now)

    def report(self) -> dict[str, Any]:
        inner = self.current.report() if self.current is not None else {}
        return {"tried": self.tried, "used": self.tried[-1] if self.current else None, **inner}


# -- budget aware ----------------------------------------------------------------------------------


class BudgetAwareConfig(_SensingConfig):
    """Configuration of :class:`BudgetAware`."""

    kind: Literal["budget_aware"] = "budget_aware"
    epsilon_per_model: float = Field(
        gt=0.0, allow_inf_nan=False, description="the epsilon each answered model costs"
    )
    budget: float = Field(gt=0.0, allow_inf_nan=False, description="the total epsilon allowed")
    mode: Literal["auto", "spread", "targeted"] = "auto"
    target: int = Field(0, ge=0, description="who the targeted mode reveals")


class BudgetAware(Strategy):
    """Plans its queries from a known per-model epsilon and budget."""

    kind = "budget_aware"

    def __init__(self, config: BudgetAwareConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: BudgetAwareConfig = config
        n = context.n
        if config.target >= n:
            raise ValueError(f"target must be an audit-set index below {n}; got {config.target}")
        affordable = math.floor(config.budget / config.epsilon_per_model + 1e-9)
        k = max(round(config.prior_minority * n), 1)
        needed = math.ceil(4 * k * math.log(n / k))
        mode = config.mode
        if mode == "auto":
            mode = "spread" if affordable - 1 >= needed else "targeted"
        self.mode = mode
        self.plan = {"affordable_models": affordable, "needed_for_recovery": needed, "mode": mode}
        self.inner: CompressedSensing | None = None
        if mode == "spread":
            shared = config.model_dump(
                exclude={"kind", "epsilon_per_model", "budget", "mode", "target", "queries"}
            )
            self.inner = CompressedSensing(
                CompressedSensingConfig(queries=max(affordable - 1, 1), **shared), context
            )
        h0 = context.base_predictions
        self.copy, self.change = flipped(h0, config.target)
        self.pairs = max(affordable // 2, 0)
        self.differences: list[float] = []
        self._asked = 0
        self._infos_seen = 0
        self._jitter = np.random.default_rng(context.rng.integers(2**63))

    def next_action(self, now: float) -> Action:
        if self.inner is not None:
            action = self.inner.next_action(now)
            if self.inner.estimate is not None and self.inner.estimate is not self.estimate:
                self._set_estimate(self.inner.estimate)
            return action
        if self._asked >= self.pairs:
            return Stop(f"budget spent on person {self.config.target}")
        h0 = self.context.base_predictions
        nudge = self._jitter.uniform(-JITTER, JITTER, h0.size)  # a new pair each time
        pair = np.clip(np.stack([h0 + nudge, self.copy + nudge]), 0.0, 1.0)
        self._asked += 1
        return Submit(pair, "sp", self.config.prepare_hours, f"pair {self._asked}/{self.pairs}")

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self.inner is not None:
            self._infos_seen = forward_answer(self, self.inner, values, now, self._infos_seen)
            if self.inner.estimate is not None and self.inner.estimate is not self.estimate:
                self._set_estimate(self.inner.estimate)
            return
        base, copy = np.asarray(values, dtype=np.float64).reshape(-1)
        self.differences.append((copy - base) / self.change)
        n = self.context.n
        v = float(np.median(self.differences))
        attribute = np.ones(n, dtype=np.int8)
        confidence = np.zeros(n)
        attribute[self.config.target] = 1 if v > 0 else 0
        # confidence: |median| against its spread, in standard errors
        spread = float(np.std(self.differences)) / math.sqrt(len(self.differences))
        confidence[self.config.target] = abs(v) / spread if spread > 0 else abs(v) * n
        self._set_estimate(Estimate(attribute, confidence, 2 * len(self.differences), "median"))

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        if self.inner is not None:
            self.inner.last_retry_after = self.last_retry_after
            self.inner.on_refusal(reason, detail, now)
        elif reason == "budget_exhausted":
            self._asked = self.pairs

    def report(self) -> dict[str, Any]:
        inner = self.inner.report() if self.inner is not None else {}
        return {"plan": self.plan, "pairs_answered": len(self.differences), **inner}


# -- proxy prior -----------------------------------------------------------------------------------


class ProxyPriorConfig(_SensingConfig):
    """Configuration of :class:`ProxyPrior`."""

    kind: Literal["proxy_prior"] = "proxy_prior"
    proxy_weight: float = Field(
        0.5,
        ge=0.0,
        le=0.99,
        allow_inf_nan=False,
        description="how much the proxy moves the L1 costs",
    )


def proxy_probabilities(context: DeveloperContext) -> NDArray[np.float64]:
    """P(a = 1 | x) for the audit set, from a model trained on the external labelled sample."""
    if context.proxy is None:
        raise ValueError("proxy_prior needs an external labelled sample (context.proxy)")
    model = build_pipeline(context.proxy)
    model.fit(context.proxy.features, context.proxy.labels)
    return np.asarray(model.predict_proba(context.public.audit.features)[:, 1])


def proxy_estimate(p: NDArray[np.float64], n0: int) -> NDArray[np.int8]:
    """The n0 people least likely to be advantaged are guessed a = 0."""
    attribute = np.ones(p.size, dtype=np.int8)
    attribute[np.argsort(p, kind="stable")[:n0]] = 0
    return attribute


class ProxyPrior(CompressedSensing):
    """Compressed sensing weighted by a proxy model's beliefs."""

    kind = "proxy_prior"

    def __init__(self, config: ProxyPriorConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: ProxyPriorConfig = config
        self.p = proxy_probabilities(context)
        self.proxy_n0 = max(round(config.prior_minority * context.n), 1)
        """How many people the proxy-only estimate puts in group 0 (from the prior)."""
        self._publish_proxy(self.proxy_n0, 0, "proxy")
        self.checks: list[float] = []
        """Answers to jittered copies of one model: their spread is the noise level."""
        self._check_refused = False
        self._jitter = np.random.default_rng(context.rng.integers(2**63))

    def _publish_proxy(self, n0: int, models: int, method: str) -> None:
        margin = np.abs(self.p - 0.5) * 2.0
        self._set_estimate(Estimate(proxy_estimate(self.p, n0), margin, models, method))

    def next_action(self, now: float) -> Action:
        if self.group_sizes is None and not self.config.probe:
            self._assume_sizes()
        checking = len(self.checks) < NOISE_CHECKS and not self._check_refused
        if self.group_sizes is not None and checking and self._pending is None:
            self._pending = "check"
            nudge = self._jitter.uniform(-JITTER, JITTER, self.context.n)
            model = np.clip(self.models[0] + nudge, 0.0, 1.0)[None, :]
            return Submit(model, "sp", self.config.prepare_hours, "noise check")
        return super().next_action(now)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self._pending == "check":
            self.checks.append(float(np.asarray(values).reshape(-1)[0]))
            self._pending = None
            return
        super().on_answer(values, now)

    def on_refusal(self, reason: str, detail: str, now: float) -> None:
        if self._pending == "check":
            self._check_refused = True
            self._pending = None
            return
        super().on_refusal(reason, detail, now)

    def _decode(self) -> None:
        assert self.group_sizes is not None
        if not self.answers:
            return
        ((n1, n0),) = self.group_sizes
        index, answers, _ = self._measurements()
        H = self.models[index]
        sp = answers[:, 0]
        if len(self.checks) >= 2:
            # The answers vary with the models (signal) and with the noise. When their spread is
            # not clearly above the noise's, they carry next to nothing: keep the proxy.
            sigma = float(np.std(self.checks, ddof=1))
            if float(np.var(sp)) <= 2.0 * sigma**2:
                # the probe's sizes are as noisy as the rest: keep the prior's
                self._publish_proxy(self.proxy_n0, int(index.size), "proxy (answers too noisy)")
                self._after_decode(["proxy"])
                return
        small = 0 if n0 <= n1 else 1
        c = 1.0 / n1 + 1.0 / n0
        eta = H.sum(axis=1) / n1 - sp if small == 0 else sp + H.sum(axis=1) / n0
        # the likelier someone is in the small group, the cheaper it is to switch them on
        belief = self.p if small == 0 else 1.0 - self.p
        noise = self._measured_noise(0, sorted(self.answers), None)
        if noise.noisy:
            # Noisy answers: the posterior of the noise-aware decoder with the proxy as each
            # person's prior; with answers that say nothing it stays the proxy's own belief.
            k = n0 if small == 0 else n1
            prior = np.clip(1.0 - belief, 1e-6, 1 - 1e-6)  # P(small group) from the proxy
            post = amp(H, eta, k=k, c=c, noise=noise, prior=prior)
            in_small = post > k / self.context.n  # the Bayes rule for balanced accuracy
            attribute = (in_small if small == 1 else ~in_small).astype(np.int8)
            right = np.where(in_small, post, 1.0 - post)
            confidence = np.abs(post - k / self.context.n) / max(k / self.context.n, 1e-12)
            self._set_estimate(
                Estimate(attribute, confidence, int(index.size), "amp_proxy_prior", right)
            )
            self._after_decode(["amp"])
            return
        w = 1.0 + self.config.proxy_weight * (2.0 * belief - 1.0)
        res = optimize.linprog(w, A_eq=H, b_eq=eta, bounds=(0, c), method="highs")
        if res.status == 0:
            s, method = res.x, "weighted_box"
        else:
            s, method = lp_decoding(H, eta, upper=c), "lp_decoding"
        in_small = s > c / 2.0
        attribute = (in_small if small == 1 else ~in_small).astype(np.int8)
        confidence = np.abs(s - c / 2.0) / (c / 2.0)
        self._set_estimate(Estimate(attribute, confidence, int(index.size), method))
        self._after_decode([method])

    def report(self) -> dict[str, Any]:
        out = super().report()
        out["proxy_mean_probability"] = float(self.p.mean())
        return out
