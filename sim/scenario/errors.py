"""Readable errors for scenario files: one line per problem, in the user's words.

pydantic reports a problem at a location inside the validated data, in its own vocabulary: a
location such as ``("developers", 0, "strategy", "compressed_sensing", "queries")`` holds the tag
pydantic inserted for the discriminated union (``compressed_sensing``), and the message may talk
about "union tags" or "literal errors". A user wrote a file, so each problem becomes one line::

    FILE:LINE: developers.0.strategy.queries: input should be a valid integer (received 'many')

with the line of the key (or list item) in the file, the key path as the user wrote it (the union
tags dropped), the value found there, what is allowed, and "did you mean" for a near-miss name
(:func:`biasleak.mechanisms._validation.did_you_mean`). For an unknown key the allowed keys are
those of the model that validates that very mapping (the keys of *this* strategy, not of all of
them), found by walking the user's data through the models' annotations.

:class:`ScenarioError` carries these lines; the command line prints them and exits with code 2.
The message texts that start a line are named constants here, so that callers and tests share them.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from biasleak.agents.strategies import STRATEGIES
from biasleak.mechanisms._validation import did_you_mean
from biasleak.sim.scenario.models import Scenario
from biasleak.sim.scenario.policy import SERVICES, STAGES

__all__ = [
    "CANNOT_READ",
    "NOT_A_MAPPING",
    "NOT_YAML",
    "ScenarioError",
    "describe",
    "explain",
    "problem_line",
]

NOT_YAML = "not valid YAML"
"""Starts the problem of a text that is not YAML (or uses YAML the scenario rules forbid)."""
NOT_A_MAPPING = "a scenario file must be a mapping of keys to values"
"""The problem of a file whose top level is a list, a single value, or empty."""
CANNOT_READ = "cannot read the file ({reason})"
"""The problem of a path that cannot be read (missing, a folder, no permission)."""


class ScenarioError(ValueError):
    """A scenario file is invalid; ``problems`` holds one readable line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
        """One line per problem, ``FILE[:LINE]: [key.path: ]message``."""


_TAGS = (
    set(STRATEGIES)
    | set(STAGES)
    | set(SERVICES)
    | {"adult", "german", "synthetic", "csv", "function-after"}
)
"""Location parts that pydantic inserts (union tags, validator wrappers), not the user's keys."""


def _user_path(data: Any, loc: tuple[Any, ...]) -> tuple[list[str | int], Any, bool]:
    """Map a pydantic error location onto the user's keys (dropping union tags).

    Returns the path, the value found there, and whether the whole location was found.
    """
    path: list[str | int] = []
    cur = data
    found = True
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            path.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            path.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and isinstance(part, str) and part in _TAGS:
            continue  # a tag pydantic inserted for a discriminated union
        else:
            path.append(part)
            found = False
            cur = None
    return path, cur, found


def _unwrap(annotation: Any) -> list[Any]:
    """The model classes an annotation may hold (through Optional, list, Annotated, Union)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list):
        return [m for arg in typing.get_args(annotation) for m in _unwrap(arg)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _model_at(data: Any, path: list[str | int]) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at ``path`` of the user's data."""
    model: type[BaseModel] | None = Scenario
    cur = data
    for key in path:
        if isinstance(key, int):
            cur = cur[key] if isinstance(cur, list) and key < len(cur) else None
            continue
        if model is None or key not in model.model_fields:
            return None
        candidates = _unwrap(model.model_fields[key].annotation)
        cur = cur.get(key) if isinstance(cur, dict) else None
        model = pick_model(candidates, cur)
    return model


def pick_model(candidates: list[type[BaseModel]], value: Any) -> type[BaseModel] | None:
    """The candidate model whose tag (``kind`` or ``dataset``) the value names."""
    if len(candidates) == 1:
        return candidates[0]
    item = value[0] if isinstance(value, list) and value else value
    if isinstance(item, dict):
        for model in candidates:
            for tag in ("kind", "dataset"):
                field = model.model_fields.get(tag)
                if field is not None and item.get(tag) in typing.get_args(field.annotation):
                    return model
    return None


def _describe(err: ErrorDetails, data: Any) -> tuple[list[str | int], str]:
    """The user's key path of one pydantic error, and its message in the user's words."""
    path, value, _ = _user_path(data, tuple(err["loc"]))
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = _model_at(data, path[:-1])
        allowed = sorted(parent.model_fields) if parent is not None else []
        key = path[-1]
        return path, f"unknown key {key!r}; allowed keys: {allowed}{did_you_mean(key, allowed)}"
    if kind == "union_tag_invalid":
        allowed = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",")]
        tag = ctx.get("tag")
        discriminator = str(ctx.get("discriminator", "kind")).strip("'")
        return [*path, discriminator], (
            f"unknown {discriminator} {tag!r}; allowed: {allowed}{did_you_mean(tag, allowed)}"
        )
    if kind == "union_tag_not_found":
        discriminator = str(ctx.get("discriminator", "kind")).strip("'")
        return path, f"missing key {discriminator!r}, which says what this entry is"
    if kind == "missing":
        return path[:-1], f"missing required key {path[-1]!r}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = did_you_mean(value, allowed)
        return path, f"value {value!r} is not allowed; allowed: {allowed}{hint}"
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    shown = "" if isinstance(value, dict | list) or value is None else f" (received {value!r})"
    quoted = (f"received {value!r}", f"received epsilon = {value!r}", f" is {value!r}, over")
    if shown and any(q in message for q in quoted):  # the message already quotes the value
        shown = ""
    if kind == "string_type" and value is not None and not isinstance(value, dict | list):
        shown += "; quote it if you meant the text"
    if kind == "int_type" and isinstance(value, float) and value.is_integer():
        # 1e3 and 1000.0 are floats in YAML 1.2; an integer key wants the digits only
        shown += f"; write the integer without a decimal point or exponent: {int(value)}"
    return path, message[0].lower() + message[1:] + shown


def describe(err: ValidationError, data: Any) -> list[tuple[list[str | int], str]]:
    """Each problem of a failed validation as (the user's key path, the message)."""
    return [_describe(e, data) for e in err.errors()]


def problem_line(
    source: str,
    path: Sequence[str | int],
    message: str,
    line_of: Callable[[Sequence[str | int]], int | None],
) -> str:
    """One ``FILE:LINE: key.path: message`` line (``FILE: ...`` where no line is known)."""
    line = line_of(path)
    where = source if line is None else f"{source}:{line}"
    dotted = ".".join(str(p) for p in path) or "(top level)"
    return f"{where}: {dotted}: {message}"


def explain(
    err: ValidationError,
    data: Any,
    *,
    source: str,
    line_of: Callable[[Sequence[str | int]], int | None],
) -> list[str]:
    """One ``FILE:LINE: key.path: message`` line per problem of a failed validation.

    ``data`` is what was validated (the file's data with any overrides applied); ``line_of``
    gives the line of a key path in the file, or of the deepest part of it the file has.
    """
    return [problem_line(source, path, message, line_of) for path, message in describe(err, data)]
