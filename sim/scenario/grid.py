"""Grid points: every combination of a scenario's ``grid:`` checked as a scenario of its own.

A scenario file's ``grid`` lists variations for ``biasleak sweep``::

    grid:
      data.n: [100, 1000]
      compliance.policy.0.epsilon: [5, 10, 100, .inf]
      seeds: 10

Each key except ``seeds`` is a dotted key path into the scenario (as for ``--set``) with a
non-empty list of values; ``seeds`` is the number of runs per combination. A grid point is the
scenario with one value of every key put in place. A grid is only valid when every one of its
points is a valid scenario, so loading a scenario checks them all (:func:`grid_points`), before
any run of any command starts.

A problem of a grid point is reported where the user can mend it. When it lies at or under a key
the grid sets (``grid: {data.n: [60, -5]}`` makes ``data.n`` invalid), or at a mapping above one
(``data.n: 20`` is smaller than ``data.minority``), it names the grid entry and the value::

    FILE:LINE: grid.data.n: value -5 (item 1) gives data.n: input should be ...

with the line of that value in the file. Any other problem of a point names the file's own key
and line, and the grid values that led to it. The number of runs the grid describes (the product
of its value counts, times ``seeds``) is capped by ``limits.max_grid_runs`` (:mod:`.limits`).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from biasleak.sim.scenario.errors import ScenarioError, describe, problem_line
from biasleak.sim.scenario.models import Scenario
from biasleak.sim.scenario.overrides import set_path

__all__ = ["GRID_SEEDS", "MAX_SHOWN", "GridPoint", "grid_points"]

GRID_SEEDS: Final = "seeds"
"""The grid key that holds the number of seeds per combination."""
MAX_SHOWN: Final = 20
"""Problems of grid points shown at most; the rest are counted."""

LineOf = Callable[[Sequence[Any]], int | None]


@dataclass(frozen=True)
class GridPoint:
    """One combination of grid values, validated."""

    values: dict[str, Any]
    """The grid value of each key, by dotted key path."""
    scenario: Scenario
    """The scenario of this point (without a grid)."""
    seeds: int
    """Runs of this point: seeds ``scenario.seed`` up to ``scenario.seed + seeds - 1``."""


def _structure(grid: dict[str, Any]) -> tuple[dict[str, list[Any]], int, list[tuple[Any, str]]]:
    """The grid's value lists, its seed count, and the problems of its shape."""
    problems: list[tuple[Any, str]] = []
    seeds = grid.get(GRID_SEEDS, 1)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        problems.append(
            (("grid", GRID_SEEDS), f"must be an integer >= 1 (runs per combination); got {seeds!r}")
        )
        seeds = 1
    spec: dict[str, list[Any]] = {}
    for key, values in grid.items():
        if key == GRID_SEEDS:
            continue
        if not [p for p in key.split(".") if p]:
            problems.append((("grid", key), "a grid key must be a dotted key path such as data.n"))
        elif not isinstance(values, list) or not values:
            problems.append(
                (("grid", key), f"must be a non-empty list of values to try; got {values!r}")
            )
        else:
            spec[key] = values
    return spec, seeds, problems


def _related(path: Sequence[Any], key: str) -> bool:
    """Whether a problem at ``path`` lies at or under the grid key, or at a mapping above it."""
    parts = [p for p in key.split(".") if p]
    shown = [str(p) for p in path]
    n = min(len(parts), len(shown))
    return bool(shown) and shown[:n] == parts[:n]


def _value_text(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return repr(value)


def grid_points(
    data: dict[str, Any], base: Scenario, *, source: str, line_of: LineOf
) -> list[GridPoint]:
    """Every point of the grid of ``data`` (the file's data, overrides applied), validated.

    ``base`` is ``data`` validated (its limits cap the grid); returns no points when there is
    no grid. Raises :class:`~biasleak.sim.scenario.errors.ScenarioError` with one line per
    problem, in the file's terms.
    """
    grid = data.get("grid")
    if not grid:
        return []
    spec, seeds, shape = _structure(grid)
    problems = [problem_line(source, path, message, line_of) for path, message in shape]
    runs = math.prod(len(v) for v in spec.values()) * seeds
    if runs > base.limits.max_grid_runs:
        problems.append(
            problem_line(
                source,
                ("grid",),
                f"the grid describes {runs} runs (combinations x seeds), over the limit of "
                f"{base.limits.max_grid_runs}; raise limits.max_grid_runs if you mean it",
                line_of,
            )
        )
    if problems:
        raise ScenarioError(problems)
    plain = {k: v for k, v in data.items() if k != "grid"}
    keys = list(spec)
    points: list[GridPoint] = []
    found: dict[str, None] = {}  # problem lines, in order, once each
    for combo in itertools.product(*(list(enumerate(spec[k])) for k in keys)):
        variant = copy.deepcopy(plain)
        values = {k: v for k, (_, v) in zip(keys, combo, strict=True)}
        broken = False
        for key, (_, value) in zip(keys, combo, strict=True):
            problem = set_path(variant, [p for p in key.split(".") if p], copy.deepcopy(value))
            if problem is not None:
                found[problem_line(source, ("grid", key), problem, line_of)] = None
                broken = True
        if broken:
            continue
        try:
            scenario = Scenario.model_validate(variant)
        except ValidationError as err:
            for path, message in describe(err, variant):
                found[_point_problem(source, path, message, keys, combo, line_of)] = None
            continue
        points.append(GridPoint(values, scenario, seeds))
    if found:
        shown = list(found)
        if len(shown) > MAX_SHOWN:
            more = len(shown) - MAX_SHOWN
            shown = [*shown[:MAX_SHOWN], f"{source}: grid: ... and {more} more problems"]
        raise ScenarioError(shown)
    return points


def _point_problem(
    source: str,
    path: Sequence[Any],
    message: str,
    keys: list[str],
    combo: tuple[tuple[int, Any], ...],
    line_of: LineOf,
) -> str:
    """One problem of a grid point, at the grid entry it comes from (or the file's key)."""
    dotted = ".".join(str(p) for p in path) or "(top level)"
    for key, (index, value) in zip(keys, combo, strict=True):
        if _related(path, key):
            line = line_of(("grid", key, index))
            where = source if line is None else f"{source}:{line}"
            shown = f"value {_value_text(value)} (item {index})"
            return f"{where}: grid.{key}: {shown} gives {dotted}: {message}"
    values = ", ".join(f"{k}={_value_text(v)}" for k, (_, v) in zip(keys, combo, strict=True))
    return problem_line(source, path, f"{message} (at the grid point {values})", line_of)
