"""Jitter: the tiny nudge that makes a repeated model a new one.

A compliance team that caches its answers replies to a model it has seen before with the answer
it gave then: the noise is not drawn again, and asking twice teaches nothing new. Several adaptive
adversaries therefore nudge each copy of a model by an independent ``Uniform(-JITTER, JITTER)``
per person before sending it (clipped to [0, 1]). A nudge of 1e-3 changes a statistical-parity
answer by at most 1e-3 - far below any useful noise level - but makes every copy a distinct
vector, so a cache keyed by the model's outputs misses and the mechanism draws fresh noise.

The nudges come from a generator of the strategy's own, seeded once from the developer's stream,
so that they never shift the draws the rest of the attack makes.
"""

from __future__ import annotations

from typing import Final

__all__ = ["JITTER"]

JITTER: Final = 1e-3
"""Half-width of the uniform nudge added to each person's output of a repeated model."""
