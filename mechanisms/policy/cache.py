"""The answer cache: a model asked before gets its earlier released value again, free.

Two models are the same when their predictions are bit-for-bit equal (compared by a 128-bit
digest) and they were asked for the same metric. Re-sending a model is post-processing of an
earlier release, so it costs no privacy budget and adds no fresh noise (fresh noise would let an
attacker average it away). Only the models not in the cache go on to the refuse rules, the
budget and the release; the cache is filled after the release, with each value's origin (who it
was first released to, and how: :class:`~biasleak.mechanisms.policy.CacheOrigin`), so that the
ceilings of an identity served another's cached value count that release for it too.

A service request is cached the same way, by the digest of everything it submits (service,
learner, base model): sent again, it gets the earlier run's result, free, rather than a fresh
run whose noise could be averaged away. So is a publication (by the digest its request carries:
the model and the epsilon): the same figures published again are the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np

from biasleak.mechanisms.digests import model_digest
from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig
from biasleak.mechanisms.policy._state import CacheOrigin, ReleaseFacts

__all__ = ["Cache", "model_digest"]


class Cache(StageConfig):
    """Answer a model asked before with its earlier released value, at no charge."""

    ORDER: ClassVar[int] = 40

    kind: Literal["cache"] = "cache"

    @classmethod
    def check(cls, stages: Sequence[Cache], q: Pending) -> Refused | None:
        metric = q.request.metric
        given = q.request.digests
        if given is not None and len(given) == len(q.cached):
            digests = list(given)
        elif q.kind != "query":  # one release: everything it submits
            digests = [model_digest(q.h.ravel())]
        else:
            digests = [model_digest(row) for row in q.h]
        q.cached = [(metric, d) in q.state.cache for d in digests]
        q.new_rows = [i for i, hit in enumerate(q.cached) if not hit]
        q.scratch["cache"] = digests
        origins = q.state.cache_origin
        q.internal["cache_origins"] = [
            (i, origins[(metric, d)])
            for i, (hit, d) in enumerate(zip(q.cached, digests, strict=True))
            if hit and (metric, d) in origins
        ]
        return None

    @classmethod
    def commit(cls, stages: Sequence[Cache], q: Pending) -> None:
        metric, cache, digests = q.request.metric, q.state.cache, q.scratch["cache"]
        if q.kind != "query":
            key = (metric, digests[0])
            if q.cached[0]:
                q.result = cache[key]
                return
            eps, delta = q.cost
            cache[key] = q.result
            facts = ReleaseFacts(metric, eps, delta, "raw", q.kind, 0.0)
            q.state.cache_origin[key] = CacheOrigin(
                q.request.identity, q.request.organization, facts
            )
            return
        if q.values is None:  # every model was served from the cache
            q.values = np.stack([cache[(metric, d)] for d in digests]).astype(np.float64)
            return
        m_new = max(len(q.new_rows), 1)
        eps, delta = q.cost
        facts = ReleaseFacts(
            q.mechanism,
            eps / m_new,
            delta / m_new,
            q.policy.noise.bounding,
            q.sampler,
            float(q.internal.get("noise_scale", 0.0)),
        )
        origin = CacheOrigin(q.request.identity, q.request.organization, facts)
        for i in q.new_rows:
            cache[(metric, digests[i])] = q.values[i].copy()
            q.state.cache_origin[(metric, digests[i])] = origin
        for i, hit in enumerate(q.cached):
            if hit:
                q.values[i] = cache[(metric, digests[i])]
