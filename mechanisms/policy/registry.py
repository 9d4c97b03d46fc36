"""The stage registry: every configurable policy stage, and every refusal code, in one place.

:data:`STAGES` maps a stage kind (the ``kind:`` of a scenario file's ``policy:`` entry) to its
model; the scenario schema's union of stages is built from it, so a new stage is one module with
its :class:`~biasleak.mechanisms.policy.StageConfig` subclass plus one line here (and its test).
:data:`REFUSAL_REASONS` gathers the refusal codes of the always-on checks and of every stage;
strategies match on these codes, never on the human-readable detail.
"""

from __future__ import annotations

from typing import Final

from biasleak.mechanisms._tagged import tagged_union
from biasleak.mechanisms.policy import checks
from biasleak.mechanisms.policy._stage import StageConfig
from biasleak.mechanisms.policy.budget import Budget
from biasleak.mechanisms.policy.cache import Cache
from biasleak.mechanisms.policy.noise import Noise
from biasleak.mechanisms.policy.rate_limit import RateLimit
from biasleak.mechanisms.policy.refuse_rules import MinSupport, NearDuplicate

__all__ = ["REFUSAL_REASONS", "STAGES", "Stage"]

STAGES: Final[dict[str, type[StageConfig]]] = {
    "rate_limit": RateLimit,
    "budget": Budget,
    "noise": Noise,
    "min_support": MinSupport,
    "near_duplicate": NearDuplicate,
    "cache": Cache,
}
"""Stage kind -> its model (configuration, pipeline position, refusal codes, behaviour)."""

Stage = tagged_union(STAGES.values())
"""Any configurable stage, discriminated on ``kind`` (the scenario files' ``policy:`` items)."""


def _refusal_reasons() -> dict[str, str]:
    reasons = dict(checks.REFUSALS)
    for stage in STAGES.values():
        for code, meaning in stage.REFUSALS.items():
            reasons.setdefault(code, meaning)
    return reasons


REFUSAL_REASONS: Final[dict[str, str]] = _refusal_reasons()
"""Every refusal code a policy can give -> what it means."""
