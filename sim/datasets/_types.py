"""A loaded data set: the public part developers may hold, and the protected attribute apart.

:class:`AuditData` pairs the :class:`~biasleak.agents.public.PublicData` (features and labels of
both splits) with the protected attribute of the audit set (and of the training split, for
evaluation baselines only). The attribute belongs to the compliance side and the evaluator.

An audit set must hold at least :data:`MIN_GROUP` people of each group: with an empty group the
fairness metrics and the leakage score are undefined (a division by N0 = 0), and with one person
in a group every answer is about that person. A draw that gives a smaller group is refused with
:data:`SMALL_GROUP` (a ``ValueError``), before any run starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.public import PublicData, PublicView

__all__ = ["MIN_GROUP", "SMALL_GROUP", "AuditData", "PublicData", "PublicView", "SmallGroupError"]

MIN_GROUP = 2
"""The fewest people of each group an audit set may hold."""
SMALL_GROUP = (
    "the audit set of {n} people has {n1} advantaged ({advantaged}) and {n0} disadvantaged "
    "({disadvantaged}) people; each group needs at least {least}: draw a larger audit set (n) "
    "or another seed"
)
"""The problem of an audit set with an empty or one-person group."""


class SmallGroupError(ValueError):
    """An audit set with fewer than :data:`MIN_GROUP` people in a group."""

    def __init__(self, data: AuditData) -> None:
        super().__init__(
            SMALL_GROUP.format(
                n=data.n,
                n1=data.n1,
                n0=data.n0,
                advantaged=data.advantaged,
                disadvantaged=data.disadvantaged,
                least=MIN_GROUP,
            )
        )
        self.n, self.n1, self.n0 = data.n, data.n1, data.n0
        """The audit set's size and group sizes."""
        self.groups = (data.advantaged, data.disadvantaged)
        """What a = 1 and a = 0 stand for."""


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
        if min(self.n1, self.n0) < MIN_GROUP:
            raise SmallGroupError(self)

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
