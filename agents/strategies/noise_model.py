"""The noise model: what a decoder knows of the noise on each answer it decodes.

A compliance server may add noise to every statistical parity value it releases. What the
attacker knows of that noise is its law and, for some mechanisms, its scale: the Laplace and
Gaussian mechanisms are calibrated to a public sensitivity and the epsilon charged, so their scale
follows from the public facts of the answer; the data-dependent mechanisms (Attribute-Conceal's
Cauchy noise, smooth-sensitivity Laplace) scale with the group sizes, which the attacker does not
know, so their scale is left unknown and the decoders estimate it from the answers.

:class:`NoiseModel` holds exactly that: a ``kind`` (``none`` for exact answers, ``laplace``,
``cauchy``, ``gaussian`` or ``unknown``) and a per-answer ``scale`` (one number for every answer,
one per answer, or None). :data:`EXACT` is the model of exact answers, the default everywhere.
Decoders only read it: the exact-answer programs ignore it, the ``amp`` decoder
(:mod:`~biasleak.agents.strategies.message_passing`) turns it into its output channel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BAD_NOISE_KIND",
    "BAD_NOISE_SCALE",
    "EXACT",
    "NOISE_KINDS",
    "NoiseKind",
    "NoiseModel",
]

NoiseKind = Literal["none", "laplace", "cauchy", "gaussian", "unknown"]
NOISE_KINDS: Final[tuple[str, ...]] = ("none", "laplace", "cauchy", "gaussian", "unknown")
BAD_NOISE_KIND: Final = "noise kind must be one of {allowed}; received {kind!r}"
BAD_NOISE_SCALE: Final = (
    "noise scale must be None or positive and finite (one number, or one per answer) for kind "
    "{kind!r}; received {scale!r}"
)


@dataclass(frozen=True, eq=False)
class NoiseModel:
    """The noise a decoder faces on each answer, as far as the attacker knows it.

    ``kind`` is the noise law (``none`` for exact answers); ``scale`` its per-answer scale (the
    Laplace or Cauchy scale b, the Gaussian standard deviation), one number for every answer or
    an array of one per answer, or None when it is not public (the data-dependent mechanisms,
    whose scale depends on the group sizes): decoders then estimate it from the answers.
    """

    kind: NoiseKind = "none"
    """The noise law: ``none``, ``laplace``, ``cauchy``, ``gaussian`` or ``unknown``."""
    scale: float | NDArray[np.float64] | None = None
    """Per-answer scale, or None when it must be estimated."""

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise ValueError(BAD_NOISE_KIND.format(allowed=list(NOISE_KINDS), kind=self.kind))
        if self.scale is not None:
            values = np.asarray(self.scale, dtype=np.float64)
            if values.ndim > 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
                raise ValueError(BAD_NOISE_SCALE.format(kind=self.kind, scale=self.scale))

    @property
    def noisy(self) -> bool:
        """Whether the answers carry noise at all."""
        return self.kind != "none"

    def scales(self, m: int) -> NDArray[np.float64] | None:
        """The scale of each of ``m`` answers, or None when unknown."""
        if self.scale is None:
            return None
        values = np.broadcast_to(np.asarray(self.scale, dtype=np.float64), (m,))
        return np.array(values)


EXACT: Final = NoiseModel("none")
