"""A loaded data set: the public part developers may hold, and the protected attribute apart.

:class:`AuditData` pairs the :class:`~biasleak.agents.public.PublicData` (features and labels of
both splits) with the protected attribute of the audit set (and of the training split, for
evaluation baselines only). The attribute belongs to the compliance side and the evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.public import PublicData, PublicView

__all__ = ["AuditData", "PublicData", "PublicView"]


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
    train_disjoint: bool = True
    """Whether the training split and the audit set are different people (then the training
    split's attribute may stand for an external sample without revealing the audit set's)."""

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
