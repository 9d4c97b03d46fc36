r"""Perturbed models that are regenerated from a seed instead of being stored.

The compressed-sensing attack sends m models ``h_i = clip(h_0 + U(-b, b), 0, 1)`` around its base
model h_0 and decodes the protected attribute from their answers. Stored, the (m, n) matrix of
those models is the attack's whole memory: at the scale of a population (n = 43,131 people and
m = 20,000 models) it is about 7 GB in float64. But the models are pseudo-random numbers: whoever
knows the seed can draw them again, batch by batch, whenever they are needed, and hold only one
batch at a time.

:class:`PerturbedModels` does that. Batch i (rows ``start:stop``) is drawn from its own child
stream ``SeedSequence(entropy, spawn_key=(i,))``, where ``entropy`` is taken once from the
developer's own random stream, so any batch can be regenerated on its own and always comes out
the same. Each batch is drawn as float32 uniforms r in [0, 1), and the model is

.. math:: h_{ij} = \mathrm{clip}(h_{0j} + b (2 r_{ij} - 1), 0, 1)
                 = (h_{0j} - b) + 2b\, \mathrm{clip}(r_{ij}, \ell_j, u_j),

with ``l_j = (b - h_0j) / (2b)`` and ``u_j = (1 + b - h_0j) / (2b)``: the clip moves onto the
uniforms. The developer submits the float64 models (:meth:`PerturbedModels.models`); a decoder
reads the float32 working rows ``w_i = clip(r_i, l, u)`` (:meth:`PerturbedModels.working`),
from which ``h_i = offset + scale * w_i`` with ``offset = h_0 - b`` and ``scale = 2b``. A
decoder that centres the columns of the system (as every decoder of
:mod:`~biasleak.agents.strategies.decoders` does) never sees the offset.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = ["PerturbedModels"]

ENTROPY_WORDS: Final = 4
"""32-bit words of entropy taken from the developer's stream for the whole family of models."""
DRAW_ROWS: Final = 32
"""Rows drawn at a time when a batch is built in float64."""


class PerturbedModels:
    """m perturbed models around a base model, regenerated batch by batch from a seed.

    Parameters
    ----------
    base : array of shape (n,)
        The base model's outputs h_0 on the audit set, in [0, 1].
    perturbation : float
        The half-width b of the uniform perturbation, in (0, 1].
    count : int
        The number of models m.
    batch : int
        Models per batch (the unit of regeneration).
    entropy : sequence of int
        The family's seed; :meth:`from_rng` takes it from a random stream.
    """

    def __init__(
        self,
        base: NDArray[np.float64],
        *,
        perturbation: float,
        count: int,
        batch: int,
        entropy: Sequence[int],
    ) -> None:
        base = np.asarray(base, dtype=np.float64)
        if base.ndim != 1 or not np.all((base >= 0.0) & (base <= 1.0)):
            raise ValueError("base must be one output in [0, 1] per person, shape (n,)")
        if not 0.0 < perturbation <= 1.0 or count < 1 or batch < 1:
            raise ValueError(
                f"need 0 < perturbation <= 1, count >= 1 and batch >= 1; received "
                f"{perturbation}, {count}, {batch}"
            )
        self.base = base.copy()
        """The base model h_0, shape (n,) (a private copy)."""
        self.base.flags.writeable = False
        self.perturbation = float(perturbation)
        """The half-width b of the perturbation."""
        self.batches: list[tuple[int, int]] = [
            (start, min(start + batch, count)) for start in range(0, count, batch)
        ]
        """Batch i holds the models ``start:stop``."""
        self.entropy = tuple(int(e) for e in entropy)
        """The seed of the whole family (with the batch index, the seed of each batch)."""
        b = self.perturbation
        self.offset: NDArray[np.float64] = self.base - b
        """Per person, the offset of ``h = offset + scale * w``."""
        self.scale = 2.0 * b
        """The scale of ``h = offset + scale * w``."""
        self._low = ((b - self.base) / (2.0 * b)).astype(np.float32)
        self._high = ((1.0 + b - self.base) / (2.0 * b)).astype(np.float32)

    @classmethod
    def from_rng(
        cls,
        rng: np.random.Generator,
        base: NDArray[np.float64],
        *,
        perturbation: float,
        count: int,
        batch: int,
    ) -> PerturbedModels:
        """A family seeded by :data:`ENTROPY_WORDS` words drawn from ``rng`` (one draw)."""
        entropy = rng.integers(0, 2**32, size=ENTROPY_WORDS, dtype=np.uint64)
        return cls(base, perturbation=perturbation, count=count, batch=batch, entropy=entropy)

    @property
    def n(self) -> int:
        """People in the audit set (the length of every model)."""
        return int(self.base.size)

    @property
    def count(self) -> int:
        """The number of models m."""
        return self.batches[-1][1]

    def rows(self, i: int) -> int:
        """The number of models in batch i."""
        start, stop = self.batches[i]
        return stop - start

    def _stream(self, i: int) -> np.random.Generator:
        """Batch i's own random stream, ``SeedSequence(entropy, spawn_key=(i,))``."""
        return np.random.default_rng(np.random.SeedSequence(self.entropy, spawn_key=(i,)))

    def uniforms(self, i: int, out: NDArray[np.float32] | None = None) -> NDArray[np.float32]:
        """The float32 uniforms r of batch i, shape (rows, n), drawn from the batch's own stream.

        ``out`` (C-contiguous float32, at least ``rows`` rows of n) is filled instead of a new
        array; the returned array is its first ``rows`` rows.
        """
        shape = (self.rows(i), self.n)
        stream = self._stream(i)
        if out is None:
            return stream.random(shape, dtype=np.float32)
        target = out[: shape[0]]
        stream.random(dtype=np.float32, out=target)
        return target

    def models(self, i: int) -> NDArray[np.float64]:
        """The float64 models of batch i, ``clip(h_0 + b (2r - 1), 0, 1)``, shape (rows, n).

        Drawn :data:`DRAW_ROWS` rows at a time straight into the result, which is the only
        batch-sized array it allocates.
        """
        rows, n = self.rows(i), self.n
        out = np.empty((rows, n))
        buffer = np.empty((min(DRAW_ROWS, rows), n), np.float32)
        stream = self._stream(i)
        for start in range(0, rows, DRAW_ROWS):
            r = buffer[: min(DRAW_ROWS, rows - start)]
            stream.random(dtype=np.float32, out=r)
            block = out[start : start + r.shape[0]]
            block[...] = r  # exact: every float32 is a float64
            block *= 2.0 * self.perturbation
            block -= self.perturbation
            block += self.base
            np.clip(block, 0.0, 1.0, out=block)
        return out

    def working(self, i: int, out: NDArray[np.float32] | None = None) -> NDArray[np.float32]:
        """The float32 working rows ``w = clip(r, l, u)`` of batch i (``h = offset + scale w``).

        ``out`` as for :meth:`uniforms`. Memory: one batch, in float32.
        """
        w = self.uniforms(i, out)
        np.maximum(w, self._low, out=w)
        np.minimum(w, self._high, out=w)
        return w

    def working_chunks(
        self, i: int, chunk: int, out: NDArray[np.float32] | None = None
    ) -> Iterator[tuple[int, NDArray[np.float32]]]:
        """The working rows of batch i, ``chunk`` rows at a time: (first row in the batch, rows).

        The chunks are consecutive draws of the batch's one stream, so together they equal
        :meth:`working` (a test checks it). ``out`` (float32, at least ``chunk`` rows of n) is
        reused for every chunk: a chunk is valid until the next one is drawn.
        """
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1; received {chunk}")
        rows, n = self.rows(i), self.n
        buffer = np.empty((min(chunk, rows), n), np.float32) if out is None else out
        stream = self._stream(i)
        for start in range(0, rows, chunk):
            w = buffer[: min(chunk, rows - start)]
            stream.random(dtype=np.float32, out=w)
            np.maximum(w, self._low, out=w)
            np.minimum(w, self._high, out=w)
            yield start, w
