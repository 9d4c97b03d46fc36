"""``--set key.path=value``: change a scenario without copying its file.

Every command that reads a scenario takes overrides such as ``--set data.n=200`` or
``--set compliance.policy.2.epsilon=1.0``. An override names a key path, dotted from the top of
the file (list items by their index, from 0), and a value. The value is read with the same
YAML 1.2 rules as the file (:mod:`.loading`), so ``--set`` and the file always agree on what a text
means: ``1.0`` is a float, ``no`` is the text "no", ``017`` is 17, ``.inf`` is infinity,
``[sp, eo]`` is a list. A value that is not YAML at all (``{unclosed``) is taken as the text as
written, and an empty value is the empty text.

The numbers follow the file in validation too: an integer key such as ``data.n`` rejects ``1e3``
(a float in YAML 1.2) from ``--set`` exactly as it does in the file, where the error says to write
``1000``.

Overrides change a copy of the file's data, before validation: a key that does not exist is
created (and then reported by validation as an unknown key, with "did you mean"), so an override
is checked exactly as if the user had edited the file. A path through a list needs an index below
the list's length, and a path cannot continue through a single value; both are errors that name
the override.
"""

from __future__ import annotations

import copy
from typing import Any

from biasleak.sim.scenario.errors import ScenarioError
from biasleak.sim.scenario.loading import read_yaml

__all__ = ["apply_overrides", "parse_value", "set_path"]


def parse_value(raw: str) -> Any:
    """The value of an override, read as YAML (the text itself where it is not YAML)."""
    if not raw.strip():
        return ""
    try:
        return read_yaml(raw)
    except ScenarioError:
        return raw


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides (values read as YAML) to a copy of the raw data.

    Raises :class:`~biasleak.sim.scenario.errors.ScenarioError` with one line per override that
    cannot be applied; ``data`` itself is never changed.
    """
    out = copy.deepcopy(data)
    problems = []
    for item in overrides:
        if "=" not in item:
            problems.append(f"--set {item!r}: expected key.path=value")
            continue
        key, _, raw = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            problems.append(f"--set {item!r}: empty key path")
            continue
        problem = set_path(out, parts, parse_value(raw))
        if problem is not None:
            problems.append(f"--set {key}: {problem}")
    if problems:
        raise ScenarioError(problems)
    return out


def set_path(data: dict[str, Any], parts: list[str], value: Any) -> str | None:
    """Set ``value`` at the key path ``parts`` inside ``data`` (creating missing mappings);
    the problem, if it cannot be done."""
    cur: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                return f"{where!r} must be an index below {len(cur)} of the list"
            if last:
                cur[int(part)] = value
            else:
                cur = cur[int(part)]
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
            else:
                cur = cur.setdefault(part, {})
        else:
            return f"{where!r} is inside a value that is not a mapping"
    return None
