"""The release: the exact metric of the new models, then noise and output bounding.

A policy has at most one noise stage; without one, answers are exact. The stage names a
mechanism of the release registry (:data:`biasleak.mechanisms.release.MECHANISM_INFO`), its
epsilon (and delta for the (eps, delta) mechanisms) per model answered or per query, the output
bounding and the sampler. ``epsilon = inf`` (or ``mechanism: exact``) answers exactly. The exact
values, noise scale and sensitivity go to the decision's ``internal`` part only: the scale of a
data-dependent mechanism depends on the group sizes and must never reach a developer.

The privacy parameters are bounded to what the mechanisms can release. A finite epsilon is at
least :data:`MIN_EPSILON` (1e-6): below it the noise is over a million times the sensitivity, no
answer carries information, and the samplers break down well before the floats do (the safe
discrete Laplace refuses scales past ~1e20 grid units, reached near epsilon 1e-18; the Cauchy and
smooth-Laplace noise overflow to inf/NaN near 1e-307). The (eps, delta) mechanisms need a delta
of at least :data:`MIN_DELTA` (1e-30; a smaller failure probability is zero for any data set:
choose a pure mechanism instead). ``mechanism: exact`` with a finite epsilon is an error naming
both keys, not an epsilon silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from biasleak.mechanisms import metrics
from biasleak.mechanisms._validation import check_choice
from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig
from biasleak.mechanisms.release import (
    BOUNDINGS,
    MECHANISM_INFO,
    MECHANISMS,
    SAMPLERS,
    release,
)

__all__ = ["MIN_DELTA", "MIN_EPSILON", "Noise"]

MIN_EPSILON: Final = 1e-6
"""The smallest finite epsilon a noise stage (and a budget) accepts."""
MIN_DELTA: Final = 1e-30
"""The smallest delta an (eps, delta) mechanism accepts."""

NEEDS_DELTA: Final = "mechanism {mechanism!r} needs 0 < delta < 1"
TRUNCATE_SAFE: Final = (
    "bounding 'truncate' of {mechanism} exists only with sampler 'naive' (no exact sampler of the "
    "truncated Cauchy on the grid); use bounding 'clamp' (free post-processing) or 'raw'"
)
TRUNCATE_PURE: Final = (
    "bounding 'truncate' needs a pure eps-DP mechanism; {mechanism!r} has delta > 0 (use 'clamp')"
)
UNDEFINED: Final = "metric {metric!r} is undefined on this audit set"
SMALL_EPSILON: Final = (
    "epsilon must be at least {least:g} (or .inf for exact answers); received {epsilon!r}: "
    "smaller values give noise a million times the answer's range, and the samplers overflow"
)
EXACT_EPSILON: Final = (
    "mechanism 'exact' answers without noise and takes no epsilon (received epsilon = "
    "{epsilon!r}); remove 'epsilon', or choose a noisy 'mechanism' from {noisy}"
)
SMALL_DELTA: Final = (
    "mechanism {mechanism!r} needs delta >= {least:g} (received delta = {delta!r}); a smaller "
    "failure probability is zero for any data set: choose a pure mechanism instead"
)


class Noise(StageConfig):
    """How answers are released: a mechanism from :mod:`biasleak.mechanisms.release`."""

    ORDER: ClassVar[int] = 80
    KINDS: ClassVar[tuple[str, ...]] = ("query",)
    """A service request is released by its own run (its own noise), not by this stage."""

    kind: Literal["noise"] = "noise"
    mechanism: Literal[MECHANISMS]  # type: ignore[valid-type]
    """One of :data:`biasleak.mechanisms.release.MECHANISMS`."""
    epsilon: float = Field(math.inf, gt=0.0, description="per model (per: model) or per query")
    """Privacy loss per model answered (``per="model"``) or per query (``per="batch"``)."""
    delta: float = Field(0.0, ge=0.0, lt=1.0)
    """Failure probability per model or per query (for the (eps, delta) mechanisms)."""
    per: Literal["model", "batch"] = "model"
    """Whether epsilon is per model (a batch of m costs m x epsilon) or per query."""
    bounding: Literal[BOUNDINGS] = "raw"  # type: ignore[valid-type]
    """Output bounding (one of :data:`biasleak.mechanisms.release.BOUNDINGS`)."""
    sampler: Literal[SAMPLERS] = Field(  # type: ignore[valid-type]
        "safe",
        description="safe: grid release with exactly sampled noise; naive: floating-point noise "
        "(broken by the fp_probe attack; for demonstrations only)",
    )
    """``safe`` releases on a power-of-two grid with exactly sampled noise; ``naive`` adds
    floating-point noise (for demonstrating the floating-point attack only)."""

    @field_validator("mechanism", "bounding", "sampler", mode="before")
    @classmethod
    def _known(cls, value: Any, info: ValidationInfo) -> Any:
        """Unknown names get the allowed list and a "did you mean" suggestion."""
        allowed = {"mechanism": MECHANISMS, "bounding": BOUNDINGS, "sampler": SAMPLERS}
        if isinstance(value, str):
            check_choice(value, allowed[str(info.field_name)], name=str(info.field_name))
        return value

    @field_validator("epsilon")
    @classmethod
    def _epsilon(cls, epsilon: float, info: ValidationInfo) -> float:
        """Finite epsilons are at least :data:`MIN_EPSILON`; ``exact`` takes none."""
        mechanism = info.data.get("mechanism")
        if mechanism in MECHANISM_INFO and not MECHANISM_INFO[mechanism].noisy:
            if not math.isinf(epsilon):
                noisy = [k for k, v in MECHANISM_INFO.items() if v.noisy]
                raise ValueError(EXACT_EPSILON.format(epsilon=epsilon, noisy=noisy))
        elif math.isfinite(epsilon) and epsilon < MIN_EPSILON:
            raise ValueError(SMALL_EPSILON.format(least=MIN_EPSILON, epsilon=epsilon))
        return epsilon

    @field_validator("delta")
    @classmethod
    def _delta(cls, delta: float, info: ValidationInfo) -> float:
        """An (eps, delta) mechanism needs delta >= :data:`MIN_DELTA` (a pure mechanism ignores
        delta, so that a grid over mechanisms may share one)."""
        mechanism = info.data.get("mechanism")
        if mechanism not in MECHANISM_INFO or not MECHANISM_INFO[mechanism].needs_delta:
            return delta
        if 0.0 < delta < MIN_DELTA:
            raise ValueError(SMALL_DELTA.format(mechanism=mechanism, least=MIN_DELTA, delta=delta))
        return delta

    @model_validator(mode="after")
    def _consistent(self) -> Noise:
        info = MECHANISM_INFO[self.mechanism]
        if info.needs_delta and math.isfinite(self.epsilon) and not 0.0 < self.delta < 1.0:
            raise ValueError(NEEDS_DELTA.format(mechanism=self.mechanism))
        if self.bounding == "truncate":
            if info.truncate == "naive" and self.sampler == "safe":
                raise ValueError(TRUNCATE_SAFE.format(mechanism=self.mechanism))
            if info.truncate == "never":
                raise ValueError(TRUNCATE_PURE.format(mechanism=self.mechanism))
        return self

    @property
    def exact(self) -> bool:
        """Whether answers are released exactly (no mechanism, or epsilon = inf)."""
        return not MECHANISM_INFO[self.mechanism].noisy or math.isinf(self.epsilon)

    @classmethod
    def check(cls, stages: Sequence[Noise], q: Pending) -> Refused | None:
        noise = stages[0]
        q.mechanism = "exact" if noise.exact else noise.mechanism
        q.sampler = "exact" if noise.exact else noise.sampler
        q.internal["models_new"] = q.m_new
        m = q.h.shape[0]
        if not q.m_new:  # every model is served from the cache
            return None
        request, audit = q.request, q.audit
        try:
            exact = np.asarray(
                metrics.evaluate(
                    request.metric, q.h_new, protected=audit.protected, labels=audit.labels
                ),
                dtype=np.float64,
            )
        except ValueError:  # e.g. EO on an audit set where one group has nobody with y = 1
            return Refused("invalid", UNDEFINED.format(metric=request.metric))
        scale = sensitivity = 0.0
        if noise.exact:
            released = exact.copy()
        else:
            n1, n0 = audit.group_sizes(request.metric)
            eps, delta = q.cost
            rel = release(
                noise.mechanism,
                exact,
                metric=request.metric,
                n1=n1,
                n0=n0,
                m=q.m_new,
                epsilon=eps,
                delta=delta,
                rng=q.rng,
                bounding=noise.bounding,
                sampler=noise.sampler,
            )
            released, scale, sensitivity = rel.values, rel.noise_scale, rel.sensitivity
        q.internal.update(exact=exact, noise_scale=scale, sensitivity=sensitivity)
        q.values = np.empty((m, *released.shape[1:]), dtype=np.float64)
        q.values[q.new_rows] = released
        return None
