"""The naive sampler: floating-point noise added to the exact value.

``sampler="naive"`` releases ``v + noise`` in IEEE doubles, bit-for-bit the historical draws
(Laplace is exactly ``v + rng.laplace(0.0, scale, size=v.shape)``, Cauchy
``v + scale * rng.standard_cauchy(...)``, Gaussian ``v + rng.normal(0.0, scale, ...)``). It is
the textbook mechanism written the obvious way, and it is porous in Mironov's sense (CCS 2012):
the doubles it can return depend on the data set, so one answer can reveal a person's group
whatever epsilon is (:mod:`~biasleak.mechanisms.samplers` explains why and how the default
``safe`` sampler avoids it). It is kept only to study that attack.

Output bounding follows the release's ``bounding``: ``clamp`` clips to the range, and
``truncate`` samples the noise law conditioned on the range by inverting its CDF, working in the
tail the range lies in so that tiny probabilities keep their digits.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["add_noise"]


def add_noise(
    v: NDArray[np.float64],
    scale: float,
    family: Literal["laplace", "cauchy", "normal"],
    rng: np.random.Generator,
    bounding: str,
    low: float,
    high: float,
) -> NDArray[np.float64]:
    """``v`` plus float noise of ``family`` and ``scale``, bounded to ``[low, high]`` as asked.

    ``bounding`` is ``"raw"``, ``"clamp"`` or ``"truncate"`` (the noise law conditioned on the
    range; Laplace and Cauchy only). A zero scale returns a copy of ``v``.
    """
    if scale == 0.0:
        out = v.copy()
    elif bounding == "truncate":
        from scipy import stats  # loaded when the naive sampler first draws

        dist = {"laplace": stats.laplace, "cauchy": stats.cauchy}[family]
        u = rng.uniform(size=v.shape)
        # Inverse-CDF sampling of the law conditioned on [low, high]. Work in the tail the range
        # lies in, so that tiny probabilities keep their digits: the survival function when the
        # value is below the range, the CDF otherwise.
        below = v < low
        lo_p = np.where(below, dist.sf(high, loc=v, scale=scale), dist.cdf(low, loc=v, scale=scale))
        hi_p = np.where(below, dist.sf(low, loc=v, scale=scale), dist.cdf(high, loc=v, scale=scale))
        q = lo_p + u * (hi_p - lo_p)
        out = np.where(below, dist.isf(q, loc=v, scale=scale), dist.ppf(q, loc=v, scale=scale))
        # A value inside the range whose noise is so wide that the range holds under ~1e-9 of
        # the mass: the conditioned law is uniform on the range to machine precision, and the
        # inverse CDF has no digits left. Draw it directly.
        flat = ((hi_p - lo_p) < 1e-9) & (v >= low) & (v <= high)
        out = np.where(flat, low + u * (high - low), out)
        out = np.clip(out, low, high)  # guard against round-off just past an end
    else:
        if family == "laplace":
            noise = rng.laplace(0.0, scale, size=v.shape)
        elif family == "cauchy":
            noise = scale * rng.standard_cauchy(size=v.shape)
        else:
            noise = rng.normal(0.0, scale, size=v.shape)
        out = v + noise
        if bounding == "clamp":
            out = np.clip(out, low, high)
    return np.asarray(out, dtype=np.float64)
