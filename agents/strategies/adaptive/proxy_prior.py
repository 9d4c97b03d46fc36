"""The proxy-prior attack: start from a guess of A made elsewhere, and let the answers refine it.

An adversary rarely starts from nothing. Features such as postcode, name or purchase history
predict a protected attribute, and public samples labelled with it exist (surveys, census
extracts). This strategy trains a *proxy* model on such an external labelled sample - never on the
audit set's attribute, which the developer does not hold - and reads its probability ``p_i`` that
each audit-set person is advantaged:

1. **Proxy estimate**, published before any query: the ``prior_minority * n`` people least likely
   to be advantaged are guessed disadvantaged (:func:`proxy_estimate`), with the proxy's margin
   ``|2 p_i - 1|`` as confidence. The simulation reports its leakage as the baseline any attack
   must beat.
2. **Noise check**: after the probe, :data:`NOISE_CHECKS` jittered copies of one perturbed model
   (:mod:`._jitter`) are asked; the spread of their answers is the noise level sigma. A refused
   check ends the checking.
3. **Sense** as compressed sensing does (:mod:`biasleak.agents.strategies.compressed_sensing`).
4. **Decode with the proxy as prior**. When the answers' variance is not above ``2 sigma^2``
   they say next to nothing beyond the noise, and the proxy estimate is kept. Otherwise, on
   noisy answers, ``amp`` runs with each person's prior probability of being in the small group
   taken from the proxy, and the guess is the Bayes rule for balanced accuracy; on exact answers,
   basis pursuit with weighted L1 costs ``1 + w (2 b_i - 1)`` (``w``: ``proxy_weight``; ``b_i``:
   the proxy's probability that person i is in the larger group), which makes the people the
   proxy already places in the small group cheaper to switch on, falling back to LP decoding
   when the weighted program is infeasible.

The report adds the proxy's mean probability.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from scipy import optimize

from biasleak.agents.messages import Refusal
from biasleak.agents.models import build_pipeline, cached_fit, frozen
from biasleak.agents.public import PublicView
from biasleak.agents.strategies.adaptive._jitter import JITTER
from biasleak.agents.strategies.base import Action, DeveloperContext, Estimate, Submit
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    Pending,
    SensingConfig,
)
from biasleak.agents.strategies.message_passing import amp
from biasleak.agents.strategies.sparse_recovery import lp_decoding

__all__ = [
    "NOISE_CHECKS",
    "ProxyPrior",
    "ProxyPriorConfig",
    "proxy_estimate",
    "proxy_probabilities",
    "proxy_scores",
]

NOISE_CHECKS: Final = 16
"""How many jittered copies of one model the proxy-prior attack asks to measure the noise."""


class ProxyPriorConfig(SensingConfig):
    """Configuration of :class:`ProxyPrior`."""

    kind: Literal["proxy_prior"] = "proxy_prior"
    proxy_weight: float = Field(
        0.5,
        ge=0.0,
        le=0.99,
        allow_inf_nan=False,
        description="how much the proxy moves the L1 costs",
    )


def proxy_scores(proxy: PublicView, audit: PublicView) -> NDArray[np.float64]:
    """P(a = 1 | x) for each person of ``audit``, from a model trained on the labelled sample
    ``proxy`` (its labels are the attribute); fitted once per process (read-only)."""

    def fit() -> NDArray[np.float64]:
        model = build_pipeline(proxy)
        model.fit(proxy.features, proxy.labels)
        return frozen(np.asarray(model.predict_proba(audit.features)[:, 1], dtype=np.float64))

    return cached_fit((proxy, audit), ("proxy_scores",), fit)


def proxy_probabilities(context: DeveloperContext) -> NDArray[np.float64]:
    """P(a = 1 | x) for the audit set, from a model trained on the external labelled sample."""
    if context.proxy is None:
        raise ValueError("proxy_prior needs an external labelled sample (context.proxy)")
    return proxy_scores(context.proxy, context.public.audit)


def proxy_estimate(p: NDArray[np.float64], n0: int) -> NDArray[np.int8]:
    """The n0 people least likely to be advantaged are guessed a = 0."""
    attribute = np.ones(p.size, dtype=np.int8)
    attribute[np.argsort(p, kind="stable")[:n0]] = 0
    return attribute


class ProxyPrior(CompressedSensing):
    """Compressed sensing weighted by a proxy model's beliefs."""

    NEEDS_PROXY: ClassVar[bool] = True

    kind = "proxy_prior"

    def __init__(self, config: ProxyPriorConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: ProxyPriorConfig = config
        self.p = proxy_probabilities(context)
        """The proxy's probability that each audit-set person is advantaged."""
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
        if self.group_sizes is not None and checking and self.awaiting is None:
            self._expect(Pending.CHECK)
            nudge = self._jitter.uniform(-JITTER, JITTER, self.context.n)
            model = np.clip(self.models[0] + nudge, 0.0, 1.0)[None, :]
            return Submit(model, "sp", self.config.prepare_hours, "noise check")
        return super().next_action(now)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        if self.awaiting is Pending.CHECK:
            self.checks.append(float(np.asarray(values).reshape(-1)[0]))
            self._settle()
            return
        super().on_answer(values, now)

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if self.awaiting is Pending.CHECK:
            self._check_refused = True
            self._settle()
            return
        super().on_refusal(refusal, now)

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
