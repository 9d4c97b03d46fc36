"""Optional extras: one place that imports them and one message when they are missing.

biasleak's core needs only its declared dependencies. Figures (matplotlib), Parquet files
(pyarrow) and the distributed executor (dask) come with extras. Every use goes through
:func:`require`, which returns the module or raises :class:`MissingExtra` naming the extra to
install; a caller that can go on without it (a report without figures, a sweep without Parquet)
catches :class:`MissingExtra` and says what it skipped with :func:`skipped`, so nothing degrades
silently.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

__all__ = ["EXTRAS", "MissingExtra", "available", "require", "skipped"]

EXTRAS: Final[dict[str, tuple[str, str]]] = {
    "matplotlib": ("plots", "figures"),
    "pyarrow": ("parquet", "Parquet files"),
    "dask": ("dask", "the Dask executor"),
    "distributed": ("dask", "the Dask executor"),
}
"""Top-level module -> (extra that installs it, what it is for)."""

MISSING: Final = (
    "{purpose} need{s} the optional extra '{extra}': pip install 'biasleak[{extra}]' "
    "(module {module!r} is not installed)"
)


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str) -> None:
        top = module.split(".")[0]
        extra, purpose = EXTRAS[top]
        s = "" if purpose.endswith("s") and not purpose.startswith("the ") else "s"
        super().__init__(MISSING.format(purpose=purpose, s=s, extra=extra, module=top))
        self.extra = extra
        """The extra that installs the module."""
        self.purpose = purpose
        """What biasleak uses the module for."""


def require(module: str) -> ModuleType:
    """Import ``module`` (a key of :data:`EXTRAS`, or a submodule of one) or raise
    :class:`MissingExtra`."""
    top = module.split(".")[0]
    if top not in EXTRAS:
        raise ValueError(f"{top!r} is not an optional extra of biasleak; known: {list(EXTRAS)}")
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtra(module) from err


def available(module: str) -> bool:
    """Whether ``module`` can be imported (without raising)."""
    try:
        require(module)
    except MissingExtra:
        return False
    return True


def skipped(err: MissingExtra) -> str:
    """One line for a caller that goes on without the extra."""
    return f"skipped {err.purpose}: {err}"
