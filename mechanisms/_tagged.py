"""Discriminated unions built from registries (one place for the pydantic idiom).

Every list a scenario or exercise file accepts (policy stages, strategies, services, exercise
actions, conditions, indicators, injects) is a registry ``{kind: model}``; the file's type is the
union of the registry's models, told apart by their ``kind`` field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Union

from pydantic import Field

__all__ = ["tagged_union"]


def tagged_union(models: Iterable[type], *, tag: str = "kind") -> Any:
    """``Annotated[Union[models...], Field(discriminator=tag)]``, for use as a field's type."""
    members = tuple(models)
    if not members:
        raise ValueError("a tagged union needs at least one model")
    return Annotated[Union[members], Field(discriminator=tag)]  # noqa: UP007
