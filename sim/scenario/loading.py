"""Reading YAML text with the scenario rules: YAML 1.2 scalars, unique keys, line numbers.

Scenario files are YAML, read with ``ruamel.yaml`` under the YAML 1.2 core schema rather than the
YAML 1.1 rules many readers still apply. The difference matters for numbers and flags:

=============  ==========================  ===========================
written        YAML 1.1 (e.g. PyYAML)      here (YAML 1.2 core schema)
=============  ==========================  ===========================
``1e3``        the text "1e3"              the float 1000.0
``no``, ``on`` false, true                 the text "no", "on"
``017``        15 (octal)                  17
``0o17``       the text "0o17"             15
``.inf``       infinity                    infinity
``1_000``      1000                        the text "1_000"
=============  ==========================  ===========================

Only ``true``/``false`` (also ``True``, ``TRUE``...) are booleans, integers are decimal, ``0o``
octal or ``0x`` hexadecimal, and floats are decimal with an optional exponent, or ``.inf``,
``-.inf``, ``.nan``. Dates (``2024-01-01``) stay dates, so that a name written as a date is
reported as "not a text" rather than quietly accepted. A ``%YAML 1.1`` directive does not switch
these rules back.

Three more rules protect the user:

- a key written twice in one mapping is an error naming the key and both lines (most readers keep
  the last value silently);
- a tag the scenario rules do not know (``!foo``, ``!!python/object``, ``!!binary``, ``!!set``) is
  an error; ``!!str``, ``!!int``, ``!!float``, ``!!bool`` and ``!!null`` work as usual;
- the result is plain Python data (dict, list, str, int, float, bool, None, dates), never the
  reader's own round-trip types, so that what pydantic validates, what ``--set`` edits and what
  :func:`~biasleak.sim.scenario.models.scenario_hash` hashes does not depend on how the file
  spelled a value. An alias (``*name``) becomes its own copy of the anchored value.

:func:`read_document` also returns the line of every key and list item, by key path, so that an
error in the validated data can point at the line the user wrote.
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedKeyMap, CommentedKeySeq, TaggedScalar
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, ReusedAnchorWarning, YAMLError
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarbool import ScalarBoolean

from biasleak.sim.scenario.errors import NOT_YAML, ScenarioError

__all__ = ["Document", "KeyPath", "read_document", "read_yaml"]

KeyPath = tuple[Any, ...]
"""Keys and list indices from the top of a document down to one node."""

_CORE = "tag:yaml.org,2002:"
_CORE_SCHEMA: tuple[tuple[str, str, str], ...] = (
    # (tag, pattern of the whole plain scalar, characters it may start with)
    ("null", r"~|null|Null|NULL|", "~nN"),
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    (
        "float",
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+.0123456789",
    ),
    (
        "timestamp",
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
        r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}"
        r"(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?",
        "0123456789",
    ),
    ("merge", r"<<", "<"),
)
"""The YAML 1.2 core schema for plain scalars, plus timestamps and ``<<`` merge keys."""


def _resolver_table() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    table: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for tag, pattern, first in _CORE_SCHEMA:
        regexp = re.compile(rf"^(?:{pattern})$")
        for char in [*first, ""] if tag == "null" else first:  # "" is the empty scalar
            table.setdefault(char, []).append((_CORE + tag, regexp))
    return table


_RESOLVERS = _resolver_table()


class _CoreSchemaResolver(VersionedResolver):
    """Resolves plain scalars with :data:`_CORE_SCHEMA`, whatever ``%YAML`` directive is given."""

    @property
    def processing_version(self) -> tuple[int, int]:
        return (1, 2)  # also tells the constructor that 017 is decimal

    @property
    def versioned_resolver(self) -> dict[str, list[tuple[str, re.Pattern[str]]]]:
        return _RESOLVERS


class _DuplicateKey(MarkedYAMLError):
    """A key written twice in one mapping."""


class _Constructor(RoundTripConstructor):
    """The round-trip constructor, with a duplicate key an error that names both lines."""

    def check_mapping_key(
        self, node: Any, key_node: Any, mapping: Any, key: Any, value: Any
    ) -> bool:
        if key in mapping:
            first = mapping.lc.data[key][0] + 1
            raise _DuplicateKey(
                problem=f"duplicate key {_scalar(key)!r} (first on line {first})",
                problem_mark=key_node.start_mark,
            )
        return True


class _Unsupported(Exception):
    """A value the scenario rules do not accept, at a line of the document (if known)."""

    def __init__(self, problem: str, line: int | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


@dataclass(frozen=True)
class Document:
    """A YAML document read with the scenario rules: its plain data and where each part was."""

    data: Any
    """The document as plain Python data."""
    lines: Mapping[KeyPath, int]
    """The line (from 1) of every mapping key and list item, by key path; ``()`` is the top."""

    def line_of(self, path: Sequence[Any]) -> int | None:
        """The line of ``path``, or of its deepest part the document has (a missing key: its
        mapping's line); None where the document has no lines (the top is a single value)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


def _scalar(value: Any) -> Any:
    """A scalar as the plain Python value it stands for (no round-trip subclass)."""
    if value is None:
        return None
    if isinstance(value, bool | ScalarBoolean):  # before int: ScalarBoolean is an int
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dt.datetime):  # before date: a datetime is a date
        fields = (value.hour, value.minute, value.second, value.microsecond)
        return dt.datetime(value.year, value.month, value.day, *fields, tzinfo=value.tzinfo)
    if isinstance(value, dt.date):
        return dt.date(value.year, value.month, value.day)
    if isinstance(value, TaggedScalar):
        if value.tag.value == _CORE + "str":
            return str(value.value)
        raise _Unsupported(f"unknown tag {value.tag.value!r}", None)
    if isinstance(value, bytes):
        raise _Unsupported("!!binary values are not supported", None)
    if isinstance(value, Set):
        raise _Unsupported("!!set values are not supported; write a list", None)
    raise _Unsupported(f"values of type {type(value).__name__} are not supported", None)


_PLAIN_COLLECTION_TAGS = {None, _CORE + "map", _CORE + "omap", _CORE + "seq"}


MAX_DEPTH: Final = 64
"""Deepest nesting of mappings and lists a scenario file may have (real ones nest about 5)."""
MAX_NODES: Final = 1_000_000
"""Most values a file may expand to once its aliases are copied (a billion-laughs file would
expand to 10^8 and more)."""
TOO_DEEP: Final = "nested more than {most} levels deep"
TOO_MANY: Final = "expands to more than {most:,} values (aliases copied)"


def _too_deep(text: str) -> tuple[int, str | None] | None:
    """(line, top-level key) where the text nests deeper than :data:`MAX_DEPTH`, or None.

    A scan of brackets and indentation before the YAML reader runs: the reader recurses once
    per level, so a file nested thousands deep would exhaust the stack before any check of ours.
    Quoted text and comments are skipped; block nesting counts two spaces per level.
    """
    depth, key = 0, None
    for number, line in enumerate(text.splitlines(), start=1):
        if line[:1] not in ("", " ", "\t", "#", "-") and ":" in line and depth == 0:
            key = line.split(":", 1)[0].strip().strip("'\"")
        indent = (len(line) - len(line.lstrip(" "))) // 2
        quote = None
        for char in line:
            if quote is not None:
                quote = None if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                depth += 1
                if depth + indent > MAX_DEPTH:
                    return number, key
            elif char in "]}":
                depth = max(depth - 1, 0)
        if indent > MAX_DEPTH:
            return number, key
    return None


def _expanded_size(value: Any, memo: dict[int, int], depth: int = 0) -> int:
    """How many values ``value`` becomes once its aliases are copied, without copying them.

    An alias is the same object as its anchor, so sizes are remembered by identity and a file
    of k distinct collections is counted in O(k) steps however far it expands. Counting stops
    past :data:`MAX_DEPTH` (the conversion refuses such a file on its own) and once the total
    passes :data:`MAX_NODES` (the file is refused either way).
    """
    if not isinstance(value, Mapping | list) or depth > MAX_DEPTH:
        return 1
    known = memo.get(id(value))
    if known is not None:
        return known
    items = value.values() if isinstance(value, Mapping) else value  # keys are single values
    total = 1
    for item in items:
        total += _expanded_size(item, memo, depth + 1)
        if total > MAX_NODES:
            break
    memo[id(value)] = total
    return total


def _first_line_over(loaded: Any, top: int | None) -> int | None:
    """The line of the top-level entry at which the expanded size passes :data:`MAX_NODES`."""
    if not isinstance(loaded, Mapping):
        return top
    memo: dict[int, int] = {}
    total = 1
    for key, item in loaded.items():
        total += _expanded_size(item, memo, 1)
        if total > MAX_NODES:
            return _line(loaded, key, top)
    return top


class _Plain:
    """Turns what the round-trip reader made into plain data, noting the line of every part."""

    def __init__(self) -> None:
        self.lines: dict[KeyPath, int] = {}
        self.nodes = 0

    def convert(self, value: Any, path: KeyPath, line: int | None) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Unsupported(TOO_MANY.format(most=MAX_NODES), line)
        if len(path) > MAX_DEPTH:
            raise _Unsupported(TOO_DEEP.format(most=MAX_DEPTH), line)
        if not isinstance(value, Mapping | list):
            try:
                return _scalar(value)
            except _Unsupported as err:
                raise _Unsupported(err.problem, line) from None
        tag = getattr(getattr(value, "tag", None), "value", None)
        if tag not in _PLAIN_COLLECTION_TAGS:
            raise _Unsupported(f"unknown tag {tag!r}", line)
        if isinstance(value, Mapping):
            return self._mapping(value, path, line)
        return self._sequence(value, path, line)

    def _mapping(self, value: Mapping[Any, Any], path: KeyPath, line: int | None) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for raw_key, item in value.items():
            where = _line(value, raw_key, line)
            if isinstance(raw_key, CommentedKeySeq | CommentedKeyMap):
                raise _Unsupported("a mapping key must be a single value", where)
            try:
                key = _scalar(raw_key)
            except _Unsupported as err:
                raise _Unsupported(err.problem, where) from None
            if where is not None:
                self.lines[(*path, key)] = where
            out[key] = self.convert(item, (*path, key), where)
        return out

    def _sequence(self, value: list[Any], path: KeyPath, line: int | None) -> list[Any]:
        out = []
        for index, item in enumerate(value):
            where = _line(value, index, line)
            if where is not None:
                self.lines[(*path, index)] = where
            out.append(self.convert(item, (*path, index), where))
        return out


def _line(collection: Any, key: Any, default: int | None) -> int | None:
    """The line (from 1) of a key or item of a round-trip collection, else ``default``."""
    lc = getattr(collection, "lc", None)
    position = lc.data.get(key) if lc is not None else None
    return position[0] + 1 if position else default


def _reader() -> YAML:
    """A fresh reader (a ``YAML`` object keeps state between documents; one per text)."""
    yaml = YAML(typ="rt")
    yaml.Resolver = _CoreSchemaResolver
    yaml.Constructor = _Constructor
    return yaml


def read_document(text: str, *, source: str = "<yaml>") -> Document:
    """Read one YAML document with the scenario rules.

    Raises :class:`~biasleak.sim.scenario.errors.ScenarioError` with one line,
    ``SOURCE[:LINE]: not valid YAML: ...``, for text that is not YAML or breaks the rules.
    """
    deep = _too_deep(text)
    if deep is not None:
        line, key = deep
        at = f"{key}: " if key else ""
        raise ScenarioError([f"{source}:{line}: {at}{NOT_YAML}: {TOO_DEEP.format(most=MAX_DEPTH)}"])
    try:
        with warnings.catch_warnings():
            # an anchor defined twice is allowed (the later one wins), as YAML says
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            loaded = _reader().load(text)
    except YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ScenarioError([f"{where}: {NOT_YAML}: {problem}"]) from None
    except ValueError as err:  # a scalar that is not what its explicit tag says: !!int abc
        raise ScenarioError([f"{source}: {NOT_YAML}: {err}"]) from None
    except RecursionError:  # the reader recurses once per level of nesting
        raise ScenarioError([f"{source}: {NOT_YAML}: {TOO_DEEP.format(most=MAX_DEPTH)}"]) from None
    lc = getattr(loaded, "lc", None)
    top = lc.line + 1 if lc is not None and lc.line is not None else None
    if _expanded_size(loaded, {}) > MAX_NODES:  # before a billion-laughs file is copied out
        where = _first_line_over(loaded, top)
        at = source if where is None else f"{source}:{where}"
        raise ScenarioError([f"{at}: {NOT_YAML}: {TOO_MANY.format(most=MAX_NODES)}"])
    plain = _Plain()
    try:
        data = plain.convert(loaded, (), top)
    except _Unsupported as err:
        where = source if err.line is None else f"{source}:{err.line}"
        raise ScenarioError([f"{where}: {NOT_YAML}: {err.problem}"]) from None
    if top is not None:
        plain.lines[()] = top
    return Document(data, plain.lines)


def read_yaml(text: str, *, source: str = "<yaml>") -> Any:
    """Parse YAML text with the scenario rules into plain data (see :func:`read_document`)."""
    return read_document(text, source=source).data
