"""Sequential compressed sensing: decode as the answers come in, and stop when it is enough.

The plain compressed-sensing attack (:mod:`biasleak.agents.strategies.compressed_sensing`)
commits to ``queries`` models up front and decodes once, after the last batch. How many models
it really needs depends on what it does not know yet: the size k of the smaller group (about
``k log(n/k)`` measurements suffice for exact recovery) and the noise. Asking for more than
needed costs privacy budget, rate-limit slots and the attention of an auditor.

The sequential variant draws the same models, but decodes after every answered batch and stops
as soon as one of two things holds:

* the estimate is **exact**: every label class was decoded by OMP, which succeeds only when the
  answers are fitted exactly by a sparse solution - on exact answers that solution is the truth
  with overwhelming probability, and more models cannot change it;
* the estimate is **stable**: it has not changed for ``patience`` decodes in a row, so further
  batches are unlikely to move it either (the usual stopping rule of sequential designs when no
  certificate of exactness is available, as under noise).

By default it decodes with ``omp_only``, which is cheap enough to run after every batch and has
no fallback: a failed OMP fit simply counts as a changing estimate. With another decoder the
exactness test never fires and only the stability rule stops the attack early.

The strategy spends only the queries it needs; the report shows how many models were answered
and why it stopped.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from biasleak.agents.strategies.base import DeveloperContext
from biasleak.agents.strategies.compressed_sensing import CompressedSensing, SensingConfig
from biasleak.agents.strategies.decoders import METHODS

__all__ = ["SequentialCS", "SequentialCSConfig"]


class SequentialCSConfig(SensingConfig):
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
        self.config: SequentialCSConfig = config
        self.decode_every = 1
        self._unchanged = 0
        """How many decodes in a row left the estimate as it was."""
        self._previous: NDArray[np.int8] | None = None
        """The attribute guessed by the previous decode."""

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
        patience = self.config.patience
        if self._unchanged >= patience:
            self.stop_reason = f"the estimate did not change for {patience} decodes"
