"""The shapes data takes in biasleak: what developers see, and what only the compliance side holds.

A loaded data set is split in two on purpose. :class:`PublicData` carries features and labels of
the training split and of the audit set - everything a model developer may hold - and nothing
about the protected attribute except its name. :class:`AuditData` adds the protected attribute of
the audit set (and of the training split, for evaluation baselines only); it belongs to the
compliance side and the evaluator. Handing ``data.public`` to a developer can therefore never leak
the attribute through an attribute lookup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True, eq=False)
class AuditData:
    """A loaded data set: the public part and, separately, the protected attribute."""

    public: PublicData
    """What developers may see."""
    protected: NDArray[np.int8] = field(repr=False)
    """The audit set's protected attribute A (1 = advantaged). Compliance side only."""
    train_protected: NDArray[np.int8] = field(repr=False)
    """The training split's protected attribute, for evaluation baselines only."""
    advantaged: str = "1"
    """What a = 1 stands for, e.g. ``"White"``."""
    disadvantaged: str = "0"
    """What a = 0 stands for, e.g. ``"Black"``."""

    def __post_init__(self) -> None:
        if self.protected.shape != (len(self.public.audit),):
            raise ValueError("protected must have one entry per audit-set person")
        if self.train_protected.shape != (len(self.public.train),):
            raise ValueError("train_protected must have one entry per training-split person")

    @property
    def n(self) -> int:
        """Audit set size."""
        return int(self.protected.shape[0])

    @property
    def n1(self) -> int:
        """Size of the advantaged group in the audit set."""
        return int(np.count_nonzero(self.protected))

    @property
    def n0(self) -> int:
        """Size of the disadvantaged group in the audit set."""
        return self.n - self.n1
