"""Synthetic audit data with a chosen group split, and user CSV files.

Synthetic data (the paper's Tables 2-3 and Figure 3 use synthetic data without saying how it was
generated, so here is exactly how ours is). For each person:

1. the protected attribute: exactly ``n0`` people of the audit set have a = 0 (placed at random),
   and the training split has the same proportion;
2. a latent score ``z`` with unit variance: standard normal (``score="normal"``) or uniform on
   [-sqrt(3), sqrt(3)] (``score="uniform"``), shifted by ``+group_shift/2`` for a = 1 and
   ``-group_shift/2`` for a = 0 (``group_shift = 0``: score and group independent);
3. ``features`` numeric features ``x_k = loading_k * z + e_k`` with loadings drawn from
   U(0.5, 1.5) and standard normal noise ``e_k``; the attribute itself is never a feature;
4. the label ``y ~ Bernoulli(sigmoid(1.5 z))``.

A base model trained on (x, y) then outputs probabilities close to ``sigmoid(1.5 z)``, so its
predictions differ between groups exactly as much as ``group_shift`` says.

CSV: any file with a header row, a label column and a protected column; every other column is a
feature, numeric if all its values parse as numbers, categorical otherwise.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Final, Literal

import numpy as np
from scipy import special

from biasleak.mechanisms._validation import did_you_mean
from biasleak.sim.datasets._types import AuditData, PublicData, PublicView

SYNTHETIC_N0: Final = (
    "n0 must be an integer with 1 <= n0 <= n - 1 (both groups non-empty); received n0={n0!r} "
    "for n={n!r}"
)


def _int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; received {value!r}")
    return int(value)


def make_synthetic(
    *,
    n: int,
    n0: int,
    features: int = 5,
    score: Literal["normal", "uniform"] = "normal",
    group_shift: float = 0.0,
    train_size: int | None = None,
    seed: int = 0,
) -> AuditData:
    """Generate a synthetic data set with an audit set of ``n`` people, ``n0`` of them a = 0.

    ``train_size`` defaults to ``max(2n, 1000)``. See the module docstring for the model.
    """
    n_ = _int(n, "n", 3)
    if isinstance(n0, bool) or not isinstance(n0, int | np.integer) or not 1 <= n0 <= n_ - 1:
        raise ValueError(SYNTHETIC_N0.format(n0=n0, n=n))
    d = _int(features, "features", 1)
    if score not in ("normal", "uniform"):
        raise ValueError(f"score must be one of ['normal', 'uniform']; received {score!r}")
    shift = float(group_shift)
    if not np.isfinite(shift):
        raise ValueError(f"group_shift must be a finite number; received {group_shift!r}")
    m_train = max(2 * n_, 1000) if train_size is None else _int(train_size, "train_size", 10)
    rng = np.random.default_rng(seed)
    loadings = rng.uniform(0.5, 1.5, size=d)

    def draw(size: int, zeros: int) -> tuple[PublicView, np.ndarray]:
        a = np.ones(size, dtype=np.int8)
        a[rng.choice(size, size=zeros, replace=False)] = 0
        if score == "normal":
            z = rng.standard_normal(size)
        else:
            z = rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), size=size)
        z = z + shift * (a - 0.5)
        x = z[:, None] * loadings[None, :] + rng.standard_normal((size, d))
        y = (rng.uniform(size=size) < special.expit(1.5 * z)).astype(np.int8)
        cols = tuple(f"x{k}" for k in range(d))
        return PublicView(x.astype(object), y, cols, ()), a

    zeros_train = round(m_train * n0 / n_)
    zeros_train = min(max(zeros_train, 1), m_train - 1)
    train, a_train = draw(m_train, zeros_train)
    audit, a_audit = draw(n_, int(n0))
    public = PublicData(
        "synthetic",
        "group",
        train,
        audit,
        # The group split and the shift stay out of the public description: N0 is private.
        f"synthetic: n={n_}, {d} features, {score} scores, seed {seed}",
    )
    return AuditData(public, a_audit, a_train, "1", "0")


def _closest(name: str, options: list[str]) -> str:
    return did_you_mean(name, options)


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
    for key, col in (("label", label), ("protected", protected)):
        if col not in header:
            raise ValueError(
                f"{key} column {col!r} is not in {str(p)!r}; columns are {header}"
                f"{_closest(col, header)}"
            )
    if label == protected:
        raise ValueError("label and protected must be different columns")
    raw_y = [r[label].strip() for r in rows]
    if positive is None:
        bad = sorted({v for v in raw_y if v not in ("0", "1")})
        if bad:
            raise ValueError(
                f"label column {label!r} must hold 0/1 unless positive= names its favourable "
                f"value; found {bad[:5]}"
            )
        y = np.array([v == "1" for v in raw_y], dtype=np.int8)
    else:
        y = np.array([v == positive.strip() for v in raw_y], dtype=np.int8)
        if not y.any():
            raise ValueError(
                f"positive={positive!r} matches no value of label column {label!r}; values "
                f"are {sorted(set(raw_y))[:5]}"
            )
    a = np.array([r[protected].strip() == advantaged for r in rows], dtype=np.int8)
    if a.all() or not a.any():
        values = sorted({r[protected].strip() for r in rows})[:5]
        raise ValueError(
            f"protected column {protected!r} must hold both groups: {advantaged!r} (a = 1) and "
            f"other values (a = 0); found only {values}"
        )
    if not 0.0 < audit_fraction < 1.0:
        raise ValueError(f"audit_fraction must lie in (0, 1); received {audit_fraction!r}")
    cols = [c for c in header if c not in (label, protected)]
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
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(rows))
    held = max(3, round(audit_fraction * len(rows)))
    if held >= len(rows):
        raise ValueError(f"csv file {str(p)!r} has too few rows ({len(rows)}) to split")
    audit_idx, train_idx = np.sort(order[:held]), np.sort(order[held:])
    if n is not None:
        size = _int(n, "n", 3)
        if size > held:
            raise ValueError(
                f"n must be at most {held} (the held-out rows of {str(p)!r}); received {n!r}"
            )
        audit_idx = np.sort(rng.choice(audit_idx, size=size, replace=False))
    categorical = tuple(c for c in cols if c not in numeric)

    def view(idx: np.ndarray) -> PublicView:
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
