"""From a scenario file to a validated :class:`~biasleak.sim.scenario.models.Scenario`.

Loading a scenario takes four steps, each of which can stop with a readable
:class:`~biasleak.sim.scenario.errors.ScenarioError` (and nothing runs):

1. read the file (a missing file or a folder is one line: "cannot read the file");
2. read its YAML with the scenario rules (:mod:`.loading`): YAML 1.2 scalars, unique keys, the
   line of every key; the top level must be a mapping;
3. apply the ``--set`` overrides (:mod:`.overrides`) to a copy of the data;
4. validate with the pydantic models (:mod:`.models`), and turn every problem pydantic finds into
   one line with the file, the line, the key path and a message in the user's words
   (:mod:`.errors`).

An override that creates a key the file does not have is reported at the line of the deepest part
of its path that the file has.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from biasleak.sim.scenario.errors import CANNOT_READ, NOT_A_MAPPING, ScenarioError, explain
from biasleak.sim.scenario.loading import read_document
from biasleak.sim.scenario.models import Scenario
from biasleak.sim.scenario.overrides import apply_overrides

__all__ = ["load_scenario", "parse_scenario"]


def parse_scenario(
    text: str, *, source: str = "<scenario>", overrides: list[str] | None = None
) -> Scenario:
    """Parse and validate scenario YAML text; raise :class:`ScenarioError` on any problem.

    ``source`` names the text in error lines (the file's path when it came from a file).
    """
    document = read_document(text, source=source)
    data = document.data
    if not isinstance(data, dict):
        raise ScenarioError([f"{source}: {NOT_A_MAPPING}"])
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        problems = explain(err, data, source=source, line_of=document.line_of)
        raise ScenarioError(problems) from None


def load_scenario(path: str | Path, *, overrides: list[str] | None = None) -> Scenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError([f"{p}: {CANNOT_READ.format(reason=err.strerror)}"]) from None
    return parse_scenario(text, source=str(p), overrides=overrides)
