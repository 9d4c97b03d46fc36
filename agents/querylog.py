"""The query log: what the compliance team received, as the external auditor may read it.

The compliance agent appends one :class:`QueryRecord` per request, metric query or service
request (sender, organisation, time, metric or service, the submitted models and the outcome;
never the protected attribute). The auditor is
handed a :class:`QueryLogReader`, a read-only view of the same log, together with the compliance
mailbox for its alerts; it never holds the compliance agent (whose audit set sits one attribute
away). The reader offers the records as immutable tuples, so an auditor cannot rewrite history.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

__all__ = ["QueryLog", "QueryLogReader", "QueryRecord"]


@dataclass(frozen=True, eq=False)
class QueryRecord:
    """One line of the compliance agent's query log, as the external auditor reads it."""

    query_id: str
    sender: str
    organization: str
    time: float
    metric: str
    predictions: NDArray[np.float64] | None = field(repr=False)
    """Submitted models as a read-only (m, n) array (None when unreadable or not kept)."""
    answered: bool
    reason: str | None
    kind: str = "query"
    """The request's kind: ``query``, or ``service`` (``metric`` is then the service's name and
    ``predictions`` the base model it submitted, None when it submits none)."""


class QueryLog:
    """The compliance agent's append-only log of queries."""

    def __init__(self) -> None:
        self._records: list[QueryRecord] = []

    def append(self, record: QueryRecord) -> None:
        """Add a record (its predictions are made read-only)."""
        if record.predictions is not None:
            record.predictions.flags.writeable = False
        self._records.append(record)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[QueryRecord]:
        return iter(self._records)

    def __getitem__(self, index: int) -> QueryRecord:
        return self._records[index]

    def reader(self) -> QueryLogReader:
        """A read-only view for the external auditor."""
        return QueryLogReader(self)


class QueryLogReader:
    """Read-only access to a :class:`QueryLog`: its length and slices of records as tuples."""

    __slots__ = ("_log",)

    def __init__(self, log: QueryLog) -> None:
        self._log = log

    def __len__(self) -> int:
        return len(self._log)

    def since(self, start: int) -> tuple[tuple[QueryRecord, ...], tuple[QueryRecord, ...]]:
        """(records from ``start`` on, records before ``start``)."""
        records = tuple(self._log)
        return records[start:], records[:start]
