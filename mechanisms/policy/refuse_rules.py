"""Refuse rules: models that single people out, or barely differ from earlier ones.

``min_support`` refuses a model that accepts (h >= 0.5) fewer than k people or rejects fewer than
k, which stops the single-person queries of the paper's Example 1. ``near_duplicate`` refuses a
model whose L1 distance ``sum_j |h_j - h'_j|`` (for 0/1 models, the number of people on whom they
disagree) to one of the organisation's recently answered models, or to another model of the same
batch, is below a threshold: the differencing pair of Example 2 is at distance 1 (a flipped
decision) or ``|1 - 2 h_j|`` (a flipped probability). Both look only at the models not served
from the cache. They read a service request's submitted model (the base model sent for
post-processing) like a query's, and the models of both kinds share the organisation's history;
a service request that submits no model (the oracle learner's) passes them unread, and the
decision says so (:attr:`~biasleak.mechanisms.policy.Decision.unchecked`). A publication's model
(the one it publishes figures of) is read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig
from biasleak.mechanisms.policy._state import ModelHistory

__all__ = ["MinSupport", "NearDuplicate"]


class MinSupport(StageConfig):
    """Refuse models that accept (h >= 0.5) fewer than ``k`` people or reject fewer than ``k``."""

    ORDER: ClassVar[int] = 50
    REFUSALS: ClassVar[dict[str, str]] = {
        "low_support": "a model accepts or rejects fewer than k people"
    }

    kind: Literal["min_support"] = "min_support"
    k: int = Field(ge=1, description="refuse models accepting or rejecting fewer than k people")

    @classmethod
    def check(cls, stages: Sequence[MinSupport], q: Pending) -> Refused | None:
        h = q.h_new
        if not h.shape[0]:
            q.cannot_read("min_support")
            return None
        problem = _support(h, stages[0].k)
        return Refused("low_support", problem) if problem else None


def _support(h: NDArray[np.float64], k: int) -> str | None:
    """What is wrong with the first model that accepts or rejects fewer than ``k`` people."""
    accepted = np.count_nonzero(h >= 0.5, axis=1)
    n = h.shape[1]
    for i, acc in enumerate(accepted):
        if acc < k:
            return f"model {i} accepts {int(acc)} people (h >= 0.5); at least {k} required"
        if n - acc < k:
            return f"model {i} rejects {int(n - acc)} people (h < 0.5); at least {k} required"
    return None


class NearDuplicate(StageConfig):
    """Refuse models within L1 distance ``threshold`` (in people) of an earlier one."""

    ORDER: ClassVar[int] = 60
    REFUSALS: ClassVar[dict[str, str]] = {
        "near_duplicate": "a model is too close to an earlier one of the organisation"
    }

    kind: Literal["near_duplicate"] = "near_duplicate"
    threshold: float = Field(
        gt=0.0,
        allow_inf_nan=False,
        description="L1 distance in people (0/1 models: people whose decision differs)",
    )
    """L1 distance below which two models are near-duplicates (0/1 models: people differing)."""
    window: int = Field(1000, ge=1)
    """How many of the organisation's most recent answered models to compare with."""

    @classmethod
    def check(cls, stages: Sequence[NearDuplicate], q: Pending) -> Refused | None:
        h = q.h_new
        if not h.shape[0]:
            q.cannot_read("near_duplicate")
            return None
        problem = _closest(h, q.state.history.get(q.request.organization), stages[0].threshold)
        return Refused("near_duplicate", problem) if problem else None

    @classmethod
    def commit(cls, stages: Sequence[NearDuplicate], q: Pending) -> None:
        if not q.h_new.shape[0]:
            return
        org = q.request.organization
        if org not in q.state.history:
            q.state.history[org] = ModelHistory(stages[0].window, q.h.shape[1])
        q.state.history[org].add(q.h_new)


def _closest(h: NDArray[np.float64], history: ModelHistory | None, threshold: float) -> str | None:
    """The first model of ``h`` within L1 ``threshold`` of an earlier one, described, or None.

    Earlier means a model of the organisation's history or one before it in the same query.
    Two models' L1 distance is at least the difference of their sums (the triangle
    inequality), so each model is compared only with the earlier ones whose sum is that close
    (with a margin for float32 rounding): a query of 10,000 distinct models costs
    milliseconds, not the 10^8 comparisons of every pair, and the answer is the same.
    """
    n = h.shape[1]
    h32 = h.astype(np.float32)
    past = history.rows() if history is not None else np.empty((0, n), np.float32)
    every = np.concatenate([past, h32])  # model i of the query is row past + i; earlier rows above
    sums = every.sum(axis=1, dtype=np.float64)
    order = np.argsort(sums, kind="stable")
    sorted_sums = sums[order]
    reach = threshold + 1e-5 * max(n, 1)  # float32 distances of n terms err far less than this
    for i in range(h32.shape[0]):
        row = past.shape[0] + i
        lo = np.searchsorted(sorted_sums, sums[row] - reach, side="left")
        hi = np.searchsorted(sorted_sums, sums[row] + reach, side="right")
        near = order[lo:hi]
        near = np.sort(near[near < row])  # earlier rows only, in their own order (ties: first)
        if near.size == 0:
            continue
        dist = np.abs(every[near] - h32[i]).sum(axis=1)
        k = int(np.argmin(dist))
        if dist[k] < threshold:
            j = int(near[k])
            what = (
                "an earlier model of the organisation"
                if j < past.shape[0]
                else (f"model {j - past.shape[0]} of the same query")
            )
            return (
                f"model {i} is at L1 distance {float(dist[k]):.3g} from {what}; models closer "
                f"than {threshold:g} (in people) are refused"
            )
    return None
