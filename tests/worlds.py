"""Worlds the tests share: the tiny scenario most run-level tests start from (imported by the
tests that need its text at module level, and by ``conftest.py``'s fixtures)."""

from __future__ import annotations

from collections.abc import Callable

TINY_WORLD = """\
name: {name}
seed: {seed}
horizon_days: 2
data: {{dataset: synthetic, n: 80, minority: 8}}
developers:
  - id: mallory
    organization: acme
    strategy: {{kind: compressed_sensing, queries: 12, batch: 100000, prepare_hours: 0.1}}
compliance:
  metrics: [sp]
  answer_hours: 0.01
  policy:
    - {{kind: noise, mechanism: {mechanism}, epsilon: {epsilon}, per: batch}}
"""
"""An 80-person synthetic audit set and one compressed-sensing attacker: a run takes well under a
second."""

TinyWorld = Callable[..., str]


def tiny_world(
    name: str = "tiny",
    *,
    seed: int = 3,
    mechanism: str = "attribute_conceal",
    epsilon: float = 10.0,
    grid: str = "",
) -> str:
    text = TINY_WORLD.format(name=name, seed=seed, mechanism=mechanism, epsilon=epsilon)
    return text + (f"grid:\n{grid}" if grid else "")


TINY = tiny_world()
"""The tiny scenario with its defaults (``tiny``, seed 3, Attribute-Conceal at epsilon 10)."""
