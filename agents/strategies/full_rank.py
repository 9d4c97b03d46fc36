r"""Full-rank reconstruction: Theorem 3, Algorithm 1 and Remark 3 of the paper.

Model i is the base model h_0 with person i's output changed (``1 - h0_i``; for ``h0_i = 1/2``,
where that would change nothing, 1 instead), so the n models form

.. math:: H = \mathbf{1} h_0^\top + \operatorname{diag}(d), \qquad d_i = h_i(x_i) - h_0(x_i) \ne 0,

and ``SP = H v`` with ``v_j = 1/N1`` (a = 1) or ``-1/N0`` (a = 0). Decoders (``decoder``):

``structured``
    With one extra query of h_0 itself (``base_query: true``, the default), ``SP_i - SP_0 =
    d_i v_i``: every person's ``v_i`` in O(1) from its own answer, so the estimate grows with
    every answered batch. Without it, Sherman-Morrison gives
    ``v = D^{-1} SP - D^{-1} 1 (h0^T D^{-1} SP) / (1 + h0^T D^{-1} 1)`` in O(n) once all n
    answers are in, without forming H.
``generic``
    Solve ``H v = SP`` (forming H, O(n^3)) over every answered row, the base query's included:
    the paper's Algorithm 1 as written.
``auto``
    ``structured`` when it applies, else ``generic``.

Remark 3: with ``skip_last: true`` the last person is not queried, and the identity
``sum_j v_j = N1/N1 - N0/N0 = 0`` stands in for their equation. With the base query it gives the
last ``v`` directly. Without it (n - 1 models in all), write ``c = h_0^T v``: every answered
``SP_i = c + d_i v_i``, so ``v_i = (SP_i - c)/d_i`` for ``i < n``, ``v_n = -sum_{i<n} v_i``, and
substituting into ``c = sum_j h0_j v_j`` gives

.. math:: c = \frac{\sum_{i<n} (h0_i - h0_n) SP_i / d_i}{1 + \sum_{i<n} (h0_i - h0_n) / d_i},

O(n) once all n - 1 answers are in (``generic`` solves the n - 1 rows with ``1^T v = 0``
appended). The guess is ``a_j = 1`` when
``v_j > 0``; its confidence is ``|v_j|`` in units of ``1/n``.
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

__all__ = ["FullRank", "FullRankConfig", "solve_structured"]


class FullRankConfig(StrategyConfig):
    """Configuration of :class:`FullRank`."""

    kind: Literal["full_rank"] = "full_rank"
    base_query: bool = Field(True, strict=False, description="also ask for h_0 itself")
    skip_last: bool = Field(False, strict=False, description="Remark 3: n - 1 flipped models")
    decoder: Literal["auto", "structured", "generic"] = "auto"
    batch: int = Field(100, ge=1, description="models per query message")
    prepare_hours: float = Field(0.5, ge=0.0, allow_inf_nan=False)


def solve_skip_last(
    h0: NDArray[np.float64], d: NDArray[np.float64], sp: NDArray[np.float64]
) -> NDArray[np.float64] | None:
    """Remark 3 without a base query: solve the n - 1 flipped rows with ``sum(v) = 0``, O(n).

    ``d`` and ``sp`` hold the n - 1 queried people; ``h0`` all n. None if singular.
    """
    w = h0[:-1] - h0[-1]
    denom = 1.0 + float(w @ (1.0 / d))
    if abs(denom) < 1e-12:
        return None
    c = float(w @ (sp / d)) / denom
    head = (sp - c) / d
    return np.concatenate([head, [-float(head.sum())]])


def solve_structured(
    h0: NDArray[np.float64], d: NDArray[np.float64], sp: NDArray[np.float64]
) -> NDArray[np.float64] | None:
    """Solve ``(1 h0^T + diag(d)) v = sp`` by Sherman-Morrison in O(n); None if singular."""
    inv = sp / d
    ones = 1.0 / d
    denom = 1.0 + float(h0 @ ones)
    if abs(denom) < 1e-12:
        return None
    return inv - ones * float(h0 @ inv) / denom


class FullRank(Strategy):
    """Attribute-Reveal from n flipped models (Algorithm 1)."""

    ATTACKS: ClassVar[bool] = True

    kind = "full_rank"

    def __init__(self, config: FullRankConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: FullRankConfig = config
        h0 = context.base_predictions
        n = context.n
        people = n - 1 if config.skip_last else n
        new = 1.0 - h0[:people]
        new[np.abs(new - h0[:people]) < 1e-9] = 1.0  # h0_j = 1/2: move to an end instead
        self.d = new - h0[:people]
        """The change d_j of person j's output in the j-th flipped model (never 0)."""
        self.offset = 1 if config.base_query else 0
        rows = people + self.offset
        self.answers = np.full(rows, np.nan)
        self.batches = [(s, min(s + config.batch, rows)) for s in range(0, rows, config.batch)]
        self._next = 0
        self.method = ""

    def rows(self, start: int, stop: int) -> NDArray[np.float64]:
        """Models ``start`` to ``stop`` (row 0 is h0 with the base query), built on demand: n
        models of n people would not fit in memory for the whole Adult population."""
        h0 = self.context.base_predictions
        out = np.tile(h0, (stop - start, 1))
        for r, row in enumerate(range(start, stop)):
            j = row - self.offset
            if j >= 0:
                out[r, j] += self.d[j]
        return out

    def next_action(self, now: float) -> Action:
        if self._next < len(self.batches):
            start, stop = self.batches[self._next]
            return Submit(
                self.rows(start, stop),
                "sp",
                self.config.prepare_hours,
                f"batch {self._next + 1}/{len(self.batches)}",
            )
        return Stop("all batches resolved")

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        start, stop = self.batches[self._next]
        self.answers[start:stop] = np.asarray(values, dtype=np.float64).reshape(-1)
        self._next += 1
        self._decode()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self._next += 1

    def _decode(self) -> None:
        n = self.context.n
        h0 = self.context.base_predictions
        flips = self.answers[self.offset :]
        v = np.full(n, np.nan)
        decoder = self.config.decoder
        base = self.answers[0] if self.config.base_query else np.nan
        if decoder in ("auto", "structured") and np.isfinite(base):
            known = np.isfinite(flips)
            v[: flips.size][known] = (flips[known] - base) / self.d[known]
            if self.config.skip_last and known.all():
                v[n - 1] = -np.nansum(v[: n - 1])
            self.method = "structured"
        elif np.count_nonzero(np.isfinite(self.answers)) + self.config.skip_last >= n:
            solved = None
            if decoder in ("auto", "structured") and flips.size == n:
                solved = solve_structured(h0, self.d, flips)
                self.method = "sherman_morrison"
            elif decoder in ("auto", "structured") and self.config.skip_last:
                solved = solve_skip_last(h0, self.d, flips)
                self.method = "sum_constraint"
            if solved is None:  # the paper's way: solve the (answered rows of the) system
                answered = np.flatnonzero(np.isfinite(self.answers))
                H = self.rows(0, self.answers.size)[answered]
                rhs = self.answers[answered]
                if self.config.skip_last:  # Remark 3: sum(v) = 0 stands in for the last row
                    H = np.vstack([H, np.ones(n)])
                    rhs = np.concatenate([rhs, [0.0]])
                solved = np.linalg.lstsq(H, rhs, rcond=None)[0]
                self.method = "generic"
            v = solved
        else:
            return  # not enough answers yet for this decoder
        known = np.isfinite(v)
        attribute = np.ones(n, dtype=np.int8)
        attribute[known] = (v[known] > 0).astype(np.int8)
        confidence = np.zeros(n)
        confidence[known] = np.abs(v[known]) * n
        answered = int(np.count_nonzero(np.isfinite(self.answers)))
        self._set_estimate(Estimate(attribute, confidence, answered, self.method))

    def report(self) -> dict[str, Any]:
        return {
            "decoder": self.method,
            "models": int(self.answers.size),
            "answered": int(np.count_nonzero(np.isfinite(self.answers))),
        }
