"""Partition by absolute statistical parity: Theorem 7 of the paper (section 3.3).

With |SP| answers the sign is gone, but the groups can still be told apart. A first query of a
model accepting only person 0 gives ``|SP| = 1/N_alpha``, the size of person 0's group alpha.

Case 1, ``N_alpha != N_beta``: a model accepting only person j gives ``1/N_alpha`` if j is in
alpha and ``1/N_beta`` otherwise (the answer nearer to the two values decides).

Case 2, ``N_alpha = N_beta = n/2``: single-person answers are all ``2/n``; a model accepting
persons 0 and j gives ``2/N_alpha`` when j is in alpha and ``1/N_alpha - 1/N_beta = 0`` otherwise.

That partitions everyone with at most n queries. Which part is the advantaged group is not
revealed; with ``smaller_is_disadvantaged: true`` (the default) the strategy labels the smaller
part a = 0 - often true, as the paper notes. In case 2, or with ``smaller_is_disadvantaged:
false``, it labels person 0's part a = 1 (a coin it cannot do better than). The
evaluation also reports leakage up to relabelling, ``max(L, 100 - L)``, which measures the
partition itself.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

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

__all__ = ["AbsSpPartition", "AbsSpPartitionConfig"]


class AbsSpPartitionConfig(StrategyConfig):
    """Configuration of :class:`AbsSpPartition`."""

    kind: Literal["abs_sp_partition"] = "abs_sp_partition"
    batch: int = Field(100, ge=1, description="models per query message after the first")
    smaller_is_disadvantaged: bool = Field(True, strict=False)
    prepare_hours: float = Field(0.5, ge=0.0, allow_inf_nan=False)


class AbsSpPartition(Strategy):
    """Theorem 7: partition everyone from |SP| answers."""

    ATTACKS: ClassVar[bool] = True

    kind = "abs_sp_partition"

    def __init__(self, config: AbsSpPartitionConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: AbsSpPartitionConfig = config
        self.n_alpha: int | None = None
        self.equal = False
        """Case 2 (the two groups have the same size)."""
        self.same = np.full(context.n, np.nan)
        """1 where person j is in person 0's group, 0 where not, NaN while unknown."""
        self.margin = np.zeros(context.n)
        self._next = 1
        self._pending: tuple[int, int] | None = None
        self._stopped = False

    def next_action(self, now: float) -> Action:
        n = self.context.n
        cfg = self.config
        if self._stopped:
            return Stop("the first query was refused")
        if self.n_alpha is None:
            model = np.zeros((1, n))
            model[0, 0] = 1.0
            self._pending = (0, 0)
            return Submit(model, "abs_sp", cfg.prepare_hours, "person 0")
        if self._next >= n:
            return Stop("everyone partitioned")
        start, stop = self._next, min(self._next + cfg.batch, n)
        models = np.zeros((stop - start, n))
        models[np.arange(stop - start), np.arange(start, stop)] = 1.0
        if self.equal:
            models[:, 0] = 1.0
        self._pending = (start, stop)
        return Submit(models, "abs_sp", cfg.prepare_hours, f"people {start}-{stop - 1}")

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        n = self.context.n
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        assert self._pending is not None
        start, stop = self._pending
        if stop == 0:  # the first query
            value = abs(float(vals[0]))
            self.n_alpha = min(max(round(1.0 / value), 1), n - 1) if value > 0 else n // 2
            self.equal = 2 * self.n_alpha == n
            self.same[0] = 1.0
            self.margin[0] = 1.0
        else:
            a = float(self.n_alpha)  # type: ignore[arg-type]
            b = float(n - self.n_alpha)  # type: ignore[operator]
            if self.equal:  # 2/N_alpha if same group, 0 otherwise
                same, other = 2.0 / a, 0.0
            else:
                same, other = 1.0 / a, 1.0 / b
            half = abs(same - other) / 2.0
            self.same[start:stop] = (np.abs(vals - same) < np.abs(vals - other)).astype(float)
            self.margin[start:stop] = np.abs(np.abs(vals - other) - np.abs(vals - same)) / (
                2.0 * half
            )
            self._next = stop
        self._pending = None
        self._publish()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        assert self._pending is not None
        if self._pending[1] == 0:
            self._stopped = True
        else:
            self._next = self._pending[1]
        self._pending = None

    def _publish(self) -> None:
        n = self.context.n
        known = np.isfinite(self.same)
        in_alpha = known & (self.same == 1.0)
        alpha_size = int(np.count_nonzero(in_alpha)) if known.all() else self.n_alpha
        assert alpha_size is not None
        if self.equal or not self.config.smaller_is_disadvantaged:
            alpha_label = 1
        else:
            alpha_label = 1 if alpha_size >= n - alpha_size else 0
        attribute = np.where(in_alpha, alpha_label, 1 - alpha_label).astype(np.int8)
        attribute[~known] = 1
        confidence = np.where(known, self.margin, 0.0)
        self._set_estimate(Estimate(attribute, confidence, int(known.sum()), "partition"))

    def report(self) -> dict[str, Any]:
        return {
            "case": 2 if self.equal else 1,
            "n_alpha": self.n_alpha,
            "partitioned": int(np.count_nonzero(np.isfinite(self.same))),
        }
