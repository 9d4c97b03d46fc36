"""The stage registry: every configurable policy stage, and every refusal code, in one place.

:data:`STAGES` maps a stage kind (the ``kind:`` of a scenario file's ``policy:`` entry) to its
model. It is gathered from the modules of this package: every public module's
:class:`~biasleak.mechanisms.policy.StageConfig` subclasses are registered, in pipeline order, so
that a new stage is one module (and its test); the scenario schema's union of stages, the
refusal codes and the generated reference are built from here. :data:`REFUSAL_REASONS` gathers
the refusal codes of the always-on checks and of every stage; strategies match on these codes,
never on the human-readable detail.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Final

from biasleak.mechanisms._tagged import tagged_union
from biasleak.mechanisms.policy import checks
from biasleak.mechanisms.policy._stage import StageConfig

__all__ = ["REFUSAL_REASONS", "STAGES", "Stage"]

NOT_STAGE_MODULES: Final = frozenset({"checks", "decide", "registry"})
"""Modules of the package that hold the pipeline itself, not configurable stages."""
DUPLICATE: Final = "two policy stages share kind {kind!r}: {first} and {second}"


def _discover() -> dict[str, type[StageConfig]]:
    """Every configurable stage of the package's public modules, by kind, in pipeline order."""
    found: dict[str, type[StageConfig]] = {}
    package = importlib.import_module("biasleak.mechanisms.policy")
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in NOT_STAGE_MODULES:
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, StageConfig)
                and value.__module__ == module.__name__
                and "kind" in value.model_fields
            ):
                kind = value.model_fields["kind"].default
                if kind in found and found[kind] is not value:
                    raise TypeError(DUPLICATE.format(kind=kind, first=found[kind], second=value))
                found[kind] = value
    return dict(sorted(found.items(), key=lambda item: (item[1].ORDER, item[0])))


STAGES: Final[dict[str, type[StageConfig]]] = _discover()
"""Stage kind -> its model (configuration, pipeline position, request kinds, refusal codes,
behaviour), in pipeline order."""

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
