"""Everything a run will use, checked before the first run starts: the file and its data.

:func:`~biasleak.sim.scenario.parsing.load_scenario` checks what the file says: every key, every
number, the limits, every grid point. Some problems only show in the data the file points at:

- a CSV file (``dataset: csv``) with a missing column, an empty or NaN cell, a protected value
  outside the groups the file names, a ragged row (:mod:`biasleak.sim.datasets`, which parses
  strictly and names the CSV file, line and column);
- an audit set whose draw leaves a group empty or with one person, so that the fairness metrics
  (and the leakage score, a division by the group size) are undefined. For synthetic data the
  file fixes the group sizes and validation already refused them; for Adult, German Credit and
  CSV data the sizes depend on the draw, that is on ``data.seed`` or else on the run's seed.

:func:`check_scenario` loads the data of every draw a command will make (the scenario's seed, or
the one given, and for the grid every point's data with each of its seeds; each distinct draw
once) and turns any problem into a line with the scenario file, the line and the key
(``data.n`` for a group too small, ``data.path`` for a CSV problem), like every other problem of
a scenario file. ``biasleak validate`` and every command that runs a scenario call it first, so
that nothing is found wrong halfway through a sweep.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from biasleak.sim import datasets
from biasleak.sim.datasets._csv import CsvError
from biasleak.sim.datasets._types import MIN_GROUP, SmallGroupError
from biasleak.sim.scenario.errors import ScenarioError, problem_line
from biasleak.sim.scenario.models import Scenario
from biasleak.sim.scenario.parsing import Parsed, read_scenario

__all__ = ["SMALL_DRAW", "check_data", "check_scenario", "draws"]

SMALL_DRAW: Final = (
    "the audit set of {n} people drawn{source} with seed {seed}{point} has {n0} disadvantaged "
    "({disadvantaged}) and {n1} advantaged ({advantaged}) people; each group needs at least "
    "{least}: make data.n larger, or set data.seed to a draw with both groups"
)
"""The problem of an audit-set draw whose group is empty or has one person."""


def _data_options(scenario: Scenario) -> tuple[str, dict[str, Any]]:
    """The loader's name and keyword options for the scenario's data, as the world loads it."""
    options = scenario.data.model_dump(mode="json", exclude_none=True)
    name = options.pop("dataset")
    options.pop("seed", None)
    if name == "synthetic":
        options["n0"] = options.pop("minority")
    return name, options


def draws(
    parsed: Parsed, *, seed: int | None = None, seeds: int | None = None
) -> Iterator[tuple[Scenario, int, dict[str, Any]]]:
    """Every (scenario, data seed, grid values) a command will draw an audit set for.

    With ``seed`` (``biasleak run --seed``) only the scenario itself with that run seed; else
    the scenario's seed and, for a grid, every point with each of its seeds (``seeds``, as
    ``biasleak sweep --seeds`` gives, replaces the grid's count).
    """
    base = parsed.scenario
    if seed is not None:
        yield base, base.data.seed if base.data.seed is not None else seed, {}
        return
    yield base, base.data.seed if base.data.seed is not None else base.seed, {}
    for point in parsed.points:
        count = point.seeds if seeds is None else seeds
        s = point.scenario
        for k in range(count):
            yield s, s.data.seed if s.data.seed is not None else s.seed + k, point.values


def check_data(parsed: Parsed, *, seed: int | None = None, seeds: int | None = None) -> None:
    """Load the data of every draw a command will make; raise
    :class:`~biasleak.sim.scenario.errors.ScenarioError` with one line per problem.

    Synthetic data is not drawn: its group sizes are fixed by the file and already checked.
    """
    line_of = parsed.document.line_of
    seen: set[str] = set()
    problems: dict[str, None] = {}
    for scenario, data_seed, values in draws(parsed, seed=seed, seeds=seeds):
        if scenario.data.dataset == "synthetic":
            continue
        name, options = _data_options(scenario)
        key = json.dumps([name, options, data_seed], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        point = ""
        if values:
            point = " (grid point " + ", ".join(f"{k}={v!r}" for k, v in values.items()) + ")"
        try:
            datasets.load(name, seed=data_seed, **options)
        except SmallGroupError as err:
            advantaged, disadvantaged = err.groups
            path = options.get("path")
            message = SMALL_DRAW.format(
                n=err.n,
                source=f" from {path}" if path else "",
                seed=data_seed,
                point=point,
                n0=err.n0,
                disadvantaged=disadvantaged,
                n1=err.n1,
                advantaged=advantaged,
                least=MIN_GROUP,
            )
            problems[problem_line(parsed.source, ("data", "n"), message, line_of)] = None
        except CsvError as err:
            problems[problem_line(parsed.source, ("data", "path"), str(err), line_of)] = None
        except (OSError, ValueError) as err:  # e.g. n larger than the held-out CSV rows
            message = f"{err}{point}"
            problems[problem_line(parsed.source, ("data",), message, line_of)] = None
    if problems:
        raise ScenarioError(list(problems))


def check_scenario(
    path: str | Path,
    *,
    overrides: list[str] | None = None,
    seed: int | None = None,
    seeds: int | None = None,
) -> Scenario:
    """Read and validate a scenario file, every grid point, and the data of every draw.

    ``seed`` is the run seed of ``biasleak run --seed`` (then only that draw is checked);
    ``seeds`` the seed count of ``biasleak sweep --seeds``. Raises
    :class:`~biasleak.sim.scenario.errors.ScenarioError` with one line per problem.
    """
    parsed = read_scenario(path, overrides=overrides)
    check_data(parsed, seed=seed, seeds=seeds)
    return parsed.scenario
