"""What a model developer may see: features and labels, never the protected attribute.

:class:`PublicData` carries the features and labels of the training split and of the audit set -
everything a developer holds in the paper's setting - and nothing about the protected attribute
except its name. The data loaders in :mod:`biasleak.sim.datasets` return it inside an
``AuditData`` that keeps the attribute separately, on the compliance side; handing
``data.public`` to a developer can therefore never leak the attribute through an attribute lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, eq=False)
class PublicView:
    """Features and labels of one split: what a model developer sees."""

    features: NDArray[np.object_]
    """(n, d) array; numeric columns hold floats, categorical columns hold strings."""
    labels: NDArray[np.int8]
    """(n,) true outcomes, 1 = favourable (e.g. income > 50K, good credit)."""
    columns: tuple[str, ...]
    """Names of the d feature columns."""
    categorical: tuple[str, ...]
    """Which columns are categorical (one-hot encoded by the base model)."""

    def __post_init__(self) -> None:
        if self.features.ndim != 2 or self.features.shape[1] != len(self.columns):
            raise ValueError(
                f"features must have shape (n, {len(self.columns)}); got {self.features.shape}"
            )
        if self.labels.shape != (self.features.shape[0],):
            raise ValueError(
                f"labels must have shape ({self.features.shape[0]},); got {self.labels.shape}"
            )
        unknown = set(self.categorical) - set(self.columns)
        if unknown:
            raise ValueError(f"categorical names unknown columns: {sorted(unknown)}")

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True, eq=False)
class PublicData:
    """Everything a model developer may hold: both splits' features and labels, no attribute."""

    name: str
    """Data set name, e.g. ``"adult"``."""
    protected_name: str
    """Name of the protected attribute (public knowledge; its values are not)."""
    train: PublicView
    """Training split."""
    audit: PublicView
    """The audit set S = (X, Y) on which fairness queries are answered."""
    description: str = ""
    """One line on where the data come from and how the audit set was drawn."""
