"""From a scenario file to a validated :class:`~biasleak.sim.scenario.models.Scenario`.

Loading a scenario takes four steps, each of which can stop with a readable
:class:`~biasleak.sim.scenario.errors.ScenarioError` (and nothing runs):

1. read the file (a missing file or a folder is one line: "cannot read the file");
2. read its YAML with the scenario rules (:mod:`.loading`): YAML 1.2 scalars, unique keys, the
   line of every key; the top level must be a mapping;
3. apply the ``--set`` overrides (:mod:`.overrides`) to a copy of the data;
4. validate with the pydantic models (:mod:`.models`), limits included (:mod:`.limits`), and
   turn every problem pydantic finds into one line with the file, the line, the key path and a
   message in the user's words (:mod:`.errors`);
5. validate every point of the ``grid`` as a scenario of its own (:mod:`.grid`), so that a sweep
   never meets an invalid combination after it started.

An override that creates a key the file does not have is reported at the line of the deepest part
of its path that the file has. What these steps cannot see, the data itself (a CSV file's cells,
the group sizes of a drawn audit set), :func:`~biasleak.sim.scenario.prepare.check_scenario`
checks by loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from biasleak.sim.scenario.errors import CANNOT_READ, NOT_A_MAPPING, ScenarioError, explain
from biasleak.sim.scenario.grid import GridPoint, grid_points
from biasleak.sim.scenario.loading import Document, read_document
from biasleak.sim.scenario.models import Scenario
from biasleak.sim.scenario.overrides import apply_overrides

__all__ = ["Parsed", "load_scenario", "parse_scenario", "read_scenario"]


@dataclass(frozen=True)
class Parsed:
    """A validated scenario with what it was read from."""

    scenario: Scenario
    """The scenario."""
    source: str
    """What error lines call the text (the file's path)."""
    document: Document
    """The YAML document, for the line of a key path."""
    data: dict[str, Any]
    """The document's data with the overrides applied (what was validated)."""
    points: list[GridPoint]
    """Every point of the grid, validated (empty without a grid)."""


def _parse(text: str, *, source: str, overrides: list[str] | None) -> Parsed:
    document = read_document(text, source=source)
    data = document.data
    if not isinstance(data, dict):
        raise ScenarioError([f"{source}: {NOT_A_MAPPING}"])
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        problems = explain(err, data, source=source, line_of=document.line_of)
        raise ScenarioError(problems) from None
    points = grid_points(data, scenario, source=source, line_of=document.line_of)
    return Parsed(scenario, source, document, data, points)


def parse_scenario(
    text: str, *, source: str = "<scenario>", overrides: list[str] | None = None
) -> Scenario:
    """Parse and validate scenario YAML text (every grid point too); raise
    :class:`ScenarioError` on any problem.

    ``source`` names the text in error lines (the file's path when it came from a file).
    """
    return _parse(text, source=source, overrides=overrides).scenario


def read_scenario(path: str | Path, *, overrides: list[str] | None = None) -> Parsed:
    """Read and validate a scenario file, keeping its document and grid points."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError([f"{p}: {CANNOT_READ.format(reason=err.strerror)}"]) from None
    except UnicodeDecodeError as err:
        reason = f"not UTF-8 text: {err.reason} at byte {err.start}"
        raise ScenarioError([f"{p}: {CANNOT_READ.format(reason=reason)}"]) from None
    return _parse(text, source=str(p), overrides=overrides)


def load_scenario(path: str | Path, *, overrides: list[str] | None = None) -> Scenario:
    """Read and validate a scenario file (every grid point too)."""
    return read_scenario(path, overrides=overrides).scenario
