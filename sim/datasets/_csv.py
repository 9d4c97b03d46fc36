"""User CSV files as audit data: a label column, a protected column, and features.

Any UTF-8 file with a header row works (a byte-order mark is allowed). The label column gives y
(0/1, or ``positive`` names the favourable value); rows whose protected column equals
``advantaged`` get a = 1; every other column is a feature, numeric when all its values parse as
numbers and categorical otherwise. A seeded split holds out ``audit_fraction`` of the rows for
the audit set (optionally drawing ``n`` of them) and trains on the rest.

Parsing is strict, because a silently coerced cell changes what is measured:

- the header names every column once, and every row has as many fields as the header;
- a protected cell is never empty; with ``disadvantaged`` (a list of values) every protected
  value is ``advantaged`` or one of those, so a typo or a third group is an error instead of
  joining group 0; without it every value other than ``advantaged`` is group 0;
- a label cell is never empty or NaN;
- a feature cell that is empty (or NaN) is an error, unless ``missing="drop"`` drops the rows
  that have one; an infinite number is always an error.

Each problem is one :class:`CsvError` naming the file, the file line of the row (the header is
line 1) and the column.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms._validation import did_you_mean
from biasleak.sim.datasets._types import AuditData, PublicData, PublicView

__all__ = ["MISSING_RULES", "CsvError", "load_csv"]

MISSING_RULES: Final = ("error", "drop")
"""What to do with an empty feature cell: report it, or drop its row."""
NAN_TEXTS: Final = frozenset({"nan", "na", "n/a", "null", "none"})
"""Cell texts (case-insensitive) that mean "no value", like an empty cell."""
EMPTY_CELL: Final = "{what}{why}"
UNKNOWN_GROUP: Final = (
    "protected value {value!r} is neither advantaged ({advantaged!r}) nor one of "
    "disadvantaged {disadvantaged}"
)
THIRD_GROUP: Final = (
    "protected value {value!r} is a third value besides {advantaged!r} (advantaged) and {other!r}; "
    "list the values of the disadvantaged group in the data's disadvantaged key"
)

Rows = list[dict[str, str]]


class CsvError(ValueError):
    """A problem of a CSV file, at a row and column when it has one."""

    def __init__(
        self, path: Path, problem: str, *, line: int | None = None, column: str | None = None
    ) -> None:
        where = f"csv file {str(path)!r}"
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column!r}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        """The CSV file."""
        self.line = line
        """The file line of the row (the header is line 1), if the problem has a row."""
        self.column = column
        """The column, if the problem has one."""


def _missing(text: str) -> bool:
    return not text or text.lower() in NAN_TEXTS


def _empty(text: str, why: str) -> str:
    """The problem of a cell without a value."""
    what = "empty cell" if not text else f"no value ({text!r})"
    return EMPTY_CELL.format(what=what, why=why)


def _read(p: Path) -> tuple[list[str], Rows, list[int]]:
    """The header, the rows (each with as many fields as the header) and each row's file line."""
    if not p.is_file():
        raise ValueError(f"csv path {str(p)!r} does not exist or is not a file")
    rows: Rows = []
    lines: list[int] = []
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = [h.strip() for h in next(reader, [])]
            if not header:
                raise CsvError(p, "no header row")
            for fields in reader:
                start = reader.line_num - sum(f.count("\n") for f in fields)
                if not fields:
                    continue  # a blank line
                if len(fields) != len(header):
                    short = len(fields) < len(header)
                    raise CsvError(
                        p,
                        f"expected {len(header)} fields ({', '.join(header)}); the row has "
                        f"{len(fields)}"
                        + (" (missing from here on)" if short else " (extra after it)"),
                        line=start,
                        column=header[len(fields)] if short else header[-1],
                    )
                rows.append(dict(zip(header, fields, strict=True)))
                lines.append(start)
    except UnicodeDecodeError as err:
        raise CsvError(p, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    except csv.Error as err:
        raise CsvError(p, f"not a readable CSV file ({err})") from None
    if not header or not rows:
        raise CsvError(p, "no header row or no data rows")
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise CsvError(p, f"the header names a column twice: {repeated}", line=1)
    return header, rows, lines


def _labels(
    p: Path, rows: Rows, lines: list[int], label: str, positive: str | None
) -> NDArray[np.int8]:
    """y in {0, 1}: the column's 0/1 values, or 1 where it equals ``positive``."""
    raw_y = [r[label].strip() for r in rows]
    for value, line in zip(raw_y, lines, strict=True):
        if _missing(value):
            raise CsvError(p, _empty(value, " in the label column"), line=line, column=label)
    if positive is None:
        bad = sorted({v for v in raw_y if v not in ("0", "1")})
        if bad:
            raise CsvError(
                p,
                f"label column {label!r} must hold 0/1 unless positive= names its favourable "
                f"value; found {bad[:5]}",
            )
        return np.array([v == "1" for v in raw_y], dtype=np.int8)
    y = np.array([v == positive.strip() for v in raw_y], dtype=np.int8)
    if not y.any():
        raise CsvError(
            p,
            f"positive={positive!r} matches no value of label column {label!r}; values "
            f"are {sorted(set(raw_y))[:5]}",
        )
    return y


def _groups(
    p: Path,
    rows: Rows,
    lines: list[int],
    protected: str,
    advantaged: str,
    disadvantaged: list[str] | None,
) -> NDArray[np.int8]:
    """a = 1 where the protected column equals ``advantaged``; both groups must be present."""
    values = [r[protected].strip() for r in rows]
    known = None if disadvantaged is None else {d.strip() for d in disadvantaged}
    other: str | None = None  # without a disadvantaged list: the one value besides advantaged
    for value, line in zip(values, lines, strict=True):
        if not value:
            problem = _empty(value, " in the protected column")
            raise CsvError(p, problem, line=line, column=protected)
        if known is None and value != advantaged:
            if other is None:
                other = value
            elif value != other:
                problem = THIRD_GROUP.format(value=value, advantaged=advantaged, other=other)
                raise CsvError(p, problem, line=line, column=protected)
        if known is not None and value != advantaged and value not in known:
            problem = UNKNOWN_GROUP.format(
                value=value, advantaged=advantaged, disadvantaged=sorted(known)
            )
            raise CsvError(p, problem, line=line, column=protected)
    a = np.array([v == advantaged for v in values], dtype=np.int8)
    if a.all() or not a.any():
        found = sorted(set(values))[:5]
        raise CsvError(
            p,
            f"protected column {protected!r} must hold both groups: {advantaged!r} (a = 1) and "
            f"other values (a = 0); found only {found}",
        )
    return a


def _keep(
    p: Path, rows: Rows, lines: list[int], cols: list[str], missing: str
) -> NDArray[np.bool_]:
    """Which rows to keep: all of them, unless ``missing="drop"`` drops those with an empty
    feature cell (an empty cell is an error otherwise)."""
    keep = np.ones(len(rows), dtype=bool)
    for i, (r, line) in enumerate(zip(rows, lines, strict=True)):
        for c in cols:
            text = r[c].strip()
            if _missing(text):
                if missing != "drop":
                    why = " (write a value, or set missing: drop to drop such rows)"
                    raise CsvError(p, _empty(text, why), line=line, column=c)
                keep[i] = False
                break
    return keep


def _features(
    p: Path, rows: Rows, lines: list[int], cols: list[str]
) -> tuple[NDArray[np.object_], tuple[str, ...]]:
    """The feature matrix (numbers as floats, other values as stripped strings) and the names
    of the categorical columns."""
    numeric = set()
    for c in cols:
        try:
            [float(r[c]) for r in rows]
        except (TypeError, ValueError):
            continue
        numeric.add(c)
    feats = np.empty((len(rows), len(cols)), dtype=object)
    for k, c in enumerate(cols):
        if c in numeric:
            values = [float(r[c]) for r in rows]
            for value, line in zip(values, lines, strict=True):
                if not math.isfinite(value):
                    raise CsvError(p, f"{value} is not a finite number", line=line, column=c)
            feats[:, k] = values
        else:
            feats[:, k] = [r[c].strip() for r in rows]
    return feats, tuple(c for c in cols if c not in numeric)


def _split(
    p: Path, count: int, audit_fraction: float, n: int | None, seed: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(audit rows, training rows): a seeded hold-out, and n of the held-out rows if given."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(count)
    held = max(3, round(audit_fraction * count))
    if held >= count:
        raise CsvError(p, f"too few rows ({count}) to split into an audit set and training")
    audit_idx, train_idx = np.sort(order[:held]), np.sort(order[held:])
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 3:
            raise ValueError(f"n must be an integer >= 3; received {n!r}")
        if n > held:
            raise ValueError(
                f"n must be at most {held} (the held-out rows of {str(p)!r}); received {n!r}"
            )
        audit_idx = np.sort(rng.choice(audit_idx, size=int(n), replace=False))
    return audit_idx, train_idx


def load_csv(
    path: str | Path,
    *,
    label: str,
    protected: str,
    advantaged: str,
    disadvantaged: list[str] | None = None,
    positive: str | None = None,
    missing: Literal["error", "drop"] = "error",
    n: int | None = None,
    audit_fraction: float = 0.3,
    seed: int = 0,
) -> AuditData:
    """Load a user CSV file.

    Parameters
    ----------
    path : CSV file with a header row.
    label : name of the label column; ``positive`` is its favourable value (default: the column
        must hold 0/1 and 1 is favourable).
    protected : name of the protected column; rows equal to ``advantaged`` get a = 1; the others
        a = 0, and with ``disadvantaged`` they must be one of its values.
    missing : ``"error"`` (an empty feature cell is an error) or ``"drop"`` (drop its row).
    n : audit set size, drawn from the ``audit_fraction`` of rows held out from training
        (default: all held-out rows).

    Raises :class:`CsvError` (a ``ValueError``) naming the file, the line and the column.
    """
    p = Path(path)
    if missing not in MISSING_RULES:
        raise ValueError(f"missing must be one of {list(MISSING_RULES)}; received {missing!r}")
    header, rows, lines = _read(p)
    for key, col in (("label", label), ("protected", protected)):
        if col not in header:
            raise CsvError(
                p,
                f"{key} column {col!r} is not in the file; columns are {header}"
                f"{did_you_mean(col, header)}",
            )
    if label == protected:
        raise ValueError("label and protected must be different columns")
    if not 0.0 < audit_fraction < 1.0:
        raise ValueError(f"audit_fraction must lie in (0, 1); received {audit_fraction!r}")
    cols = [c for c in header if c not in (label, protected)]
    keep = _keep(p, rows, lines, cols, missing)
    if not keep.all():
        rows = [r for r, k in zip(rows, keep, strict=True) if k]
        lines = [line for line, k in zip(lines, keep, strict=True) if k]
        if not rows:
            raise CsvError(p, "every row has an empty feature cell (missing: drop)")
    y = _labels(p, rows, lines, label, positive)
    a = _groups(p, rows, lines, protected, advantaged, disadvantaged)
    feats, categorical = _features(p, rows, lines, cols)
    audit_idx, train_idx = _split(p, len(rows), audit_fraction, n, seed)

    def view(idx: NDArray[np.intp]) -> PublicView:
        return PublicView(feats[idx], y[idx], tuple(cols), categorical)

    public = PublicData(
        p.stem,
        protected,
        view(train_idx),
        view(audit_idx),
        f"CSV {p.name}: audit set {len(audit_idx)} rows, training {len(train_idx)} rows, "
        f"seed {seed}",
    )
    other = "other" if disadvantaged is None else ", ".join(disadvantaged)
    return AuditData(public, a[audit_idx], a[train_idx], advantaged, other)
