"""User CSV files as audit data: a label column, a protected column, and features.

Any file with a header row works. The label column gives y (0/1, or ``positive`` names the
favourable value); rows whose protected column equals ``advantaged`` get a = 1 and every other
value a = 0; every other column is a feature, numeric when all its values parse as numbers and
categorical otherwise. A seeded split holds out ``audit_fraction`` of the rows for the audit set
(optionally drawing ``n`` of them) and trains on the rest. Problems name the file, the line or
column, and what is allowed.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms._validation import did_you_mean
from biasleak.sim.datasets._types import AuditData, PublicData, PublicView

__all__ = ["load_csv"]

Rows = list[dict[str, str]]


def _read(p: Path) -> tuple[list[str], Rows]:
    """The header and the rows of a CSV file (every row with as many fields as the header)."""
    if not p.is_file():
        raise ValueError(f"csv path {str(p)!r} does not exist or is not a file")
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        rows = [r for r in reader]
    if not header or not rows:
        raise ValueError(f"csv file {str(p)!r} has no header row or no data rows")
    for line, r in enumerate(rows, start=2):
        if None in r or any(v is None for v in r.values()):
            raise ValueError(
                f"csv file {str(p)!r}, line {line}: expected {len(header)} fields "
                f"({', '.join(header)}); the row has a different number"
            )
    return header, rows


def _labels(rows: Rows, label: str, positive: str | None) -> NDArray[np.int8]:
    """y in {0, 1}: the column's 0/1 values, or 1 where it equals ``positive``."""
    raw_y = [r[label].strip() for r in rows]
    if positive is None:
        bad = sorted({v for v in raw_y if v not in ("0", "1")})
        if bad:
            raise ValueError(
                f"label column {label!r} must hold 0/1 unless positive= names its favourable "
                f"value; found {bad[:5]}"
            )
        return np.array([v == "1" for v in raw_y], dtype=np.int8)
    y = np.array([v == positive.strip() for v in raw_y], dtype=np.int8)
    if not y.any():
        raise ValueError(
            f"positive={positive!r} matches no value of label column {label!r}; values "
            f"are {sorted(set(raw_y))[:5]}"
        )
    return y


def _groups(rows: Rows, protected: str, advantaged: str) -> NDArray[np.int8]:
    """a = 1 where the protected column equals ``advantaged``; both groups must be present."""
    a = np.array([r[protected].strip() == advantaged for r in rows], dtype=np.int8)
    if a.all() or not a.any():
        values = sorted({r[protected].strip() for r in rows})[:5]
        raise ValueError(
            f"protected column {protected!r} must hold both groups: {advantaged!r} (a = 1) and "
            f"other values (a = 0); found only {values}"
        )
    return a


def _features(rows: Rows, cols: list[str]) -> tuple[NDArray[np.object_], tuple[str, ...]]:
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
        feats[:, k] = [float(r[c]) if c in numeric else r[c].strip() for r in rows]
    return feats, tuple(c for c in cols if c not in numeric)


def _split(
    p: Path, count: int, audit_fraction: float, n: int | None, seed: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(audit rows, training rows): a seeded hold-out, and n of the held-out rows if given."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(count)
    held = max(3, round(audit_fraction * count))
    if held >= count:
        raise ValueError(f"csv file {str(p)!r} has too few rows ({count}) to split")
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
    positive: str | None = None,
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
    protected : name of the protected column; rows equal to ``advantaged`` get a = 1, every other
        value a = 0.
    n : audit set size, drawn from the ``audit_fraction`` of rows held out from training
        (default: all held-out rows).
    """
    p = Path(path)
    header, rows = _read(p)
    for key, col in (("label", label), ("protected", protected)):
        if col not in header:
            raise ValueError(
                f"{key} column {col!r} is not in {str(p)!r}; columns are {header}"
                f"{did_you_mean(col, header)}"
            )
    if label == protected:
        raise ValueError("label and protected must be different columns")
    y = _labels(rows, label, positive)
    a = _groups(rows, protected, advantaged)
    if not 0.0 < audit_fraction < 1.0:
        raise ValueError(f"audit_fraction must lie in (0, 1); received {audit_fraction!r}")
    cols = [c for c in header if c not in (label, protected)]
    feats, categorical = _features(rows, cols)
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
    return AuditData(public, a[audit_idx], a[train_idx], advantaged, "other")
