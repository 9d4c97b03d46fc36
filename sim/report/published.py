"""The paper's published numbers, kept as data beside the code that compares with them.

Hamman, Chen and Dutta (FAccT 2023) report their experiments in four tables and two figures.
``published.json`` (shipped with the package) holds, for each of them, its title, the scenario
files in ``scenarios/paper/`` that reproduce it, and, where the paper prints numbers, one row per
cell: the cell's key (for example ``n, m, eps``) followed by the published values. Avg. SP err is
in units of 1e-3 and leakage in percent, as in the paper; epsilon = infinity (exact answers) is
written ``"inf"`` because JSON has no infinity.

This module turns the file into the lookups the reports use: :data:`PAPER` maps an item to
``{key tuple: values}`` (a tuple of values, or one number where the item has a single value),
:data:`PAPER_FILES` to its scenario file stems and :data:`PAPER_TITLES` to its title. Integers stay
integers and decimals stay as written, so the reports print the published numbers exactly.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any, Final

__all__ = ["PAPER", "PAPER_FILES", "PAPER_SOURCE", "PAPER_TITLES", "load_published"]

DATA_FILE: Final = "published.json"
"""The data file, next to this module in the package."""

INFINITY: Final = "inf"
"""How the data file writes epsilon = infinity."""


def _number(value: Any) -> Any:
    """A key or value of the data file as a Python number (``"inf"`` is infinity)."""
    if value == INFINITY:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{DATA_FILE}: expected a number or {INFINITY!r}; received {value!r}")
    return value


def _cells(name: str, item: dict[str, Any]) -> dict[tuple[Any, ...], Any]:
    """One item's rows as ``{key: values}``, in the file's order."""
    width = len(item["key"])
    count = len(item["values"])
    cells: dict[tuple[Any, ...], Any] = {}
    for row in item["rows"]:
        if len(row) != width + count:
            raise ValueError(
                f"{DATA_FILE}: a row of {name} has {len(row)} numbers; expected {width} key "
                f"numbers ({', '.join(item['key'])}) and {count} values"
            )
        numbers = [_number(x) for x in row]
        key = tuple(numbers[:width])
        if key in cells:
            raise ValueError(f"{DATA_FILE}: {name} lists the cell {key} twice")
        values = tuple(numbers[width:])
        cells[key] = values[0] if count == 1 else values
    return cells


def load_published(text: str | None = None) -> dict[str, Any]:
    """Read the published numbers (the package's data file, or ``text`` in its format).

    Returns a dict with ``source`` (the paper), ``titles``, ``files`` and ``numbers``, each keyed
    by item name (``table1`` ... ``figure3``) in the file's order.
    """
    if text is None:
        text = resources.files(__package__).joinpath(DATA_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    items: dict[str, dict[str, Any]] = data["items"]
    return {
        "source": data["source"],
        "titles": {name: item["title"] for name, item in items.items()},
        "files": {name: tuple(item["scenario_files"]) for name, item in items.items()},
        "numbers": {name: _cells(name, item) for name, item in items.items() if "rows" in item},
    }


_PUBLISHED: Final = load_published()

PAPER_SOURCE: Final[str] = _PUBLISHED["source"]
"""The paper whose numbers these are."""

PAPER: Final[dict[str, dict[tuple[Any, ...], Any]]] = _PUBLISHED["numbers"]
"""Published numbers per item: ``{(n, m, eps): (err AC, err Lap, leak AC, leak Lap)}`` for
``table1``, ``{(n, N0, m): (err, leak)}`` for ``table2``, ``{(n, N0, eps): (err, leak)}`` for
``table3``, ``{(m, eps): (err, recovered people)}`` for ``table4`` and ``{(n, m): leak}`` for
``figure2``. Avg. SP err is in units of 1e-3, leakage in percent."""

PAPER_FILES: Final[dict[str, tuple[str, ...]]] = _PUBLISHED["files"]
"""The scenario files (stems in ``scenarios/paper/``) behind each table and figure."""

PAPER_TITLES: Final[dict[str, str]] = _PUBLISHED["titles"]
"""Each table's and figure's title, as a report's heading."""
