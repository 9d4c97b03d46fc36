"""What an answer's public facts say about the noise on its values.

Every answer a developer receives comes with its public facts
(:class:`~biasleak.agents.strategies.base.AnswerInfo`: the mechanism, the epsilon and delta
charged, the sampler, which models were served from the cache). A noise-aware decoder turns them
into a :class:`~biasleak.agents.strategies.decoders.NoiseModel`: exact answers carry none; the
Laplace and Gaussian mechanisms are calibrated to the global sensitivity of the models released
fresh, so their scale is public; the data-dependent mechanisms (Attribute-Conceal's Cauchy noise,
smooth-sensitivity Laplace) scale with the group sizes, which the attacker does not know, so their
scale is left for the decoder to estimate. :func:`combine_noise` stacks the noise of answers from
several messages.
"""

from __future__ import annotations

import math

import numpy as np

from biasleak.agents.strategies.base import AnswerInfo
from biasleak.agents.strategies.noise_model import EXACT, NoiseModel
from biasleak.mechanisms.release import analytic_gaussian_sigma
from biasleak.mechanisms.sensitivity import global_sensitivity

__all__ = ["combine_noise", "noise_of_answer"]


def noise_of_answer(info: AnswerInfo | None, *, metric: str, n: int) -> NoiseModel:
    """The noise on each value of one answer, from its public facts.

    Exact answers carry none. The Laplace and Gaussian mechanisms are calibrated to the global
    sensitivity of the ``m_new`` models released fresh (cached ones were charged nothing), so
    their per-value scale is public: ``global_sensitivity(metric, n, m_new) / eps`` (l1), and
    the analytic Gaussian sigma for the l2 sensitivity. The data-dependent mechanisms
    (Attribute-Conceal's Cauchy noise, smooth-sensitivity Laplace) scale with the group sizes,
    which the attacker does not know: their scale is left for the decoder to estimate. ``n`` is
    the number of people the metric depends on (everyone for SP, those with y = 1 for EO).
    """
    if info is None or info.mechanism == "exact" or math.isinf(info.epsilon_charged):
        return EXACT
    fresh = info.new_models
    metric_ = metric if metric in ("sp", "eo") else None
    if info.mechanism == "attribute_conceal":
        return NoiseModel("cauchy")
    if info.mechanism == "smooth_laplace" or metric_ is None:
        return NoiseModel("laplace" if info.mechanism != "gaussian" else "gaussian")
    if fresh == 0 or info.epsilon_charged <= 0 or n < 3:
        return NoiseModel("laplace" if info.mechanism == "laplace" else "unknown")
    if info.mechanism == "laplace":
        sens = global_sensitivity(metric_, n=n, m=fresh)
        return NoiseModel("laplace", sens / info.epsilon_charged)
    if info.mechanism == "gaussian" and info.delta_charged > 0:
        sens = global_sensitivity(metric_, n=n, m=fresh, norm="l2")
        sigma = analytic_gaussian_sigma(
            l2_sensitivity=sens, epsilon=info.epsilon_charged, delta=info.delta_charged
        )
        return NoiseModel("gaussian", sigma)
    return NoiseModel("unknown")


def combine_noise(models: list[NoiseModel], counts: list[int]) -> NoiseModel:
    """One noise model for answers stacked from several messages (``counts`` values each)."""
    if not models or all(not nm.noisy for nm in models):
        return EXACT
    kinds = {nm.kind for nm in models if nm.noisy}
    kind = kinds.pop() if len(kinds) == 1 else "unknown"
    if any(nm.noisy and nm.scale is None for nm in models) or kind == "unknown":
        return NoiseModel(kind)  # type: ignore[arg-type]
    floor = min(float(np.min(nm.scales(1))) for nm in models if nm.noisy)  # type: ignore[arg-type]
    scales = np.concatenate(
        [
            nm.scales(count) if nm.noisy else np.full(count, 1e-6 * floor)  # type: ignore[arg-type]
            for nm, count in zip(models, counts, strict=True)
        ]
    )
    return NoiseModel(kind, scales)  # type: ignore[arg-type]
