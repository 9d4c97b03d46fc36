"""Synthetic audit data with a chosen group split.

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
"""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
from scipy import special

from biasleak.sim.datasets._types import AuditData, PublicData, PublicView

__all__ = ["make_synthetic"]

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
