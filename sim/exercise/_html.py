"""Readable HTML for the exercise console: any JSON-able value laid out as tables.

The engine decides what each role's status and evidence hold (plain dicts and lists, tables as
``{"title", "columns", "rows"}``); this module only lays them out for a person, escaping every
value: records become table rows, field names become headings (``epsilon_spent`` -> ``Epsilon
spent``), non-finite numbers a dash. It also turns the engine's objects (decision points, their
options, pydantic models, numpy scalars) into the plain data the pages and the JSON share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from markupsafe import Markup, escape

__all__ = ["decision", "hours", "label", "option", "plain", "render_value", "scalar", "shown"]


# --- turning the session's objects into plain data -------------------------------------------


@dataclass(frozen=True)
class _Option:
    id: str
    label: str
    description: str


def option(raw: Any) -> _Option:
    """An option given as ``(id, label, description)`` or as an object with those attributes."""
    if isinstance(raw, list | tuple):
        parts = [*map(str, raw), "", ""]
        return _Option(parts[0], parts[1] or parts[0], parts[2])
    ident = str(getattr(raw, "id", raw))
    return _Option(
        ident, str(getattr(raw, "label", "") or ident), str(getattr(raw, "description", "") or "")
    )


def decision(point: Any) -> dict[str, Any]:
    """A decision point (pending or declared) as plain data."""
    return {
        "id": str(point.id),
        "title": str(getattr(point, "title", "") or point.id),
        "prompt": str(getattr(point, "prompt", "") or ""),
        "owner": str(getattr(point, "owner", "") or ""),
        "options": [option(o).__dict__ for o in getattr(point, "options", ())],
    }


def plain(value: Any) -> Any:
    """JSON-able data from what the session returns (pydantic models, tuples, numpy scalars);
    non-finite floats become ``None`` because JSON has no NaN."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


# --- rendering any JSON-able value as readable HTML -------------------------------------------


LABELS: Final = {"t": "Hours"}
"""Field names whose plain reading is not enough."""


def label(key: Any) -> str:
    """A field name as a heading: ``epsilon_spent`` -> ``Epsilon spent``."""
    if key in LABELS:
        return LABELS[key]
    text = str(key).replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def scalar(value: Any) -> str:
    """One value as a table cell shows it: a dash for missing, whole numbers without a point,
    others to four significant digits."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"
    return str(value)


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, Mapping | list | tuple)


def _is_flat(value: Any) -> bool:
    """A scalar or a list of scalars: fits in one table cell."""
    return _is_scalar(value) or (isinstance(value, list) and all(map(_is_scalar, value)))


def _columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    return columns


def _table(
    head: list[str], rows: list[list[Any]], caption: str | None, *, row_headers: bool
) -> str:
    parts = ["<table>"]
    if caption:
        parts.append(f"<caption>{escape(caption)}</caption>")
    parts.append("<thead><tr>")
    parts.extend(f'<th scope="col">{escape(h)}</th>' for h in head)
    parts.append("</tr></thead><tbody>")
    for row in rows:
        parts.append("<tr>")
        for i, cell in enumerate(row):
            inner = cell if isinstance(cell, Markup) else escape(scalar(cell))
            numeric = isinstance(cell, int | float) and not isinstance(cell, bool)
            attr = ' class="num"' if numeric else ""
            if i == 0 and row_headers:
                parts.append(f'<th scope="row"{attr}>{inner}</th>')
            else:
                parts.append(f"<td{attr}>{inner}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _flatten(record: Mapping[str, Any]) -> dict[str, Any]:
    """One level of nesting folded into the keys (``{"thresholds": {"P": 60}}`` ->
    ``{"thresholds P": 60}``), so that a list of such records still fits one table."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            out.update({f"{key} {k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _is_record(value: Any) -> bool:
    return isinstance(value, Mapping) and all(map(_is_flat, value.values()))


def _cell(value: Any) -> Any:
    return value if _is_scalar(value) else render_value(value)


def _record_table(
    records: list[dict[str, Any]], keys: list[Any] | None, caption: str | None
) -> str:
    """One row per record (headed by its key, when given); columns empty in every row are left
    out."""
    cols = [c for c in _columns(records) if any(r.get(c) not in (None, "") for r in records)]
    rows = [[_cell(r.get(c)) for c in cols] for r in records]
    if keys is None:
        return _table(list(map(label, cols)), rows, caption, row_headers=False)
    rows = [[k, *row] for k, row in zip(keys, rows, strict=True)]
    return _table(["", *map(label, cols)], rows, caption, row_headers=True)


def render_value(value: Any, caption: str | None = None, *, nested: bool = False) -> Markup:
    """Readable HTML for any JSON-able value.

    A table given as ``{"title", "columns", "rows"}`` (the engine's evidence) is drawn as it is;
    a mapping of records becomes a table with one row per key; a list of records a table with one
    row per record; other mappings a two-column table, with each nested value in its own
    captioned table after it (flatter than tables inside cells); lists of scalars one line, or a
    bulleted list when they are sentences. The session decides what each role's status and
    evidence hold; this only lays it out, escaping every value.
    """
    value = plain(value)
    if isinstance(value, Mapping):
        if not value:
            return Markup(
                f"<p>{escape(caption)}: nothing yet.</p>" if caption else "<p>Nothing.</p>"
            )
        if isinstance(value.get("columns"), list) and isinstance(value.get("rows"), list):
            title = str(value.get("title") or caption or "")
            if not value["rows"]:
                return Markup(f"<p>{escape(title)}: nothing yet.</p>")
            rows = [[_cell(c) for c in row] for row in value["rows"]]
            head = list(map(label, value["columns"]))
            return Markup(_table(head, rows, title, row_headers=False))
        if isinstance(value.get("tables"), list):
            return Markup("".join(str(render_value(t)) for t in value["tables"]))
        if all(map(_is_record, value.values())):
            records = [_flatten(r) for r in value.values()]
            return Markup(_record_table(records, list(value), caption))
        if nested and all(map(_is_scalar, value.values())):  # {organisation: epsilon}: data keys
            rows = [[k, v] for k, v in value.items()]
            return Markup(_table(["", "Value"], rows, caption, row_headers=True))
        flat = {k: v for k, v in value.items() if _is_flat(v)}
        parts = []
        if flat:
            rows = [[label(k), _cell(v)] for k, v in flat.items()]
            parts.append(_table(["Item", "Value"], rows, caption, row_headers=True))
        for k, v in value.items():
            if k not in flat:
                inner = f"{caption}: {label(k)}" if caption and not flat else label(k)
                parts.append(str(render_value(v, inner, nested=True)))
        return Markup("".join(parts))
    if isinstance(value, list):
        if not value:
            return Markup(f"<p>{escape(caption)}: none.</p>" if caption else "none")
        if all(isinstance(r, Mapping) for r in value) and all(
            _is_record(_flatten(r)) for r in value
        ):
            return Markup(_record_table([_flatten(r) for r in value], None, caption))
        if all(map(_is_scalar, value)) and max(len(scalar(v)) for v in value) <= 40:
            return escape(", ".join(map(scalar, value)))
        head = f"<p>{escape(caption)}</p>" if caption else ""
        items = "".join(f"<li>{render_value(v)}</li>" for v in value)
        return Markup(f"{head}<ul>{items}</ul>")
    return escape(scalar(value))


SHOWN_ELSEWHERE: Final = frozenset(
    {"exercise", "title", "role", "roles", "clock", "clock_hours", "finished", "pending"}
)
"""Status fields every page already shows in its header or decision section; the JSON keeps
them."""
GROUND_TRUTH_KEY: Final = "ground_truth"
"""The facilitator's status field with the evaluator's numbers, shown in its own panel."""


def shown(status: Any) -> dict[str, Any]:
    """The status fields a page lays out, the ground truth apart: ``{"status", "truth"}``."""
    if not isinstance(status, Mapping):
        return {"status": status, "truth": None}
    rest = {
        k: v
        for k, v in status.items()
        if k not in SHOWN_ELSEWHERE and k != GROUND_TRUTH_KEY and (k != "interrupted" or v)
    }
    return {"status": rest, "truth": status.get(GROUND_TRUTH_KEY)}


def hours(value: Any) -> str:
    """Simulated hours as people read them: ``40 h (day 2, 16:00)``."""
    try:
        t = float(value)
    except (TypeError, ValueError):
        return str(value)
    day, rest = divmod(t, 24.0)
    minutes = round(rest * 60.0)
    return f"{t:g} h (day {int(day) + 1}, {minutes // 60:02d}:{minutes % 60:02d})"
