r"""Individual privacy accounting: each person's own shift in each answer, composed per person.

For the answers-level ceilings (see :mod:`biasleak.mechanisms.ceiling`) the evaluator knows the
models that were answered and the audit set, so it can compute how much each answer would have
moved had one person's attribute been different (:func:`flip_shifts`), and how much it moves
when that person's predictions are replaced by a reference prediction (:func:`reference_shifts`:
the two halves of a swap, whose partner is of the same label). Each shift, measured against the
release's noise scale, is a dominating pair of its family. The shifts are rounded UP to a
geometric grid of levels (valid: larger shifts give dominating pairs, see
:mod:`~biasleak.mechanisms.ceiling._pairs`) and counted per person and level, so that the
composition is one matrix of counts (see :mod:`~biasleak.mechanisms.ceiling._engine`). Pairs that
do not depend on the person (a mechanism whose guarantee is all that is used) are counted for
everyone at once.

Shifts of one answer (m models ``h``, attribute ``a``, sizes N1, N0; for EO and ``|EO|`` the
same among the people with y = 1, and 0 for the others):

- person i of group 1 moving to group 0 (needs N1 >= 2):
  ``SP' = (S1 - h_i)/(N1 - 1) - (S0 + h_i)/(N0 + 1)``;
- person i of group 0 moving to group 1 (needs N0 >= 2):
  ``SP' = (S1 + h_i)/(N1 + 1) - (S0 - h_i)/(N0 - 1)``;

with ``S_g`` the group's sum of predictions; the shift is ``|SP' - SP|`` (for ``|SP|``,
``||SP'| - |SP||``). The reference shift is ``(1/N1 + 1/N0) |h_i - rho|`` with rho the median
prediction of the model within the person's label stratum (any rho is valid; the median keeps
the shifts small; in a stratum of more than 4,096 people, the median of 4,096 of them evenly
spread over its rows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms.ceiling._pairs import SATURATION, Pair
from biasleak.mechanisms.ceiling._releases import EO_FAMILY

__all__ = [
    "LEVEL_RATIO",
    "LEVEL_SMALLEST",
    "PersonLedger",
    "flip_shifts",
    "level_value",
    "reference_shifts",
    "shift_levels",
]

LEVEL_RATIO: Final = 1.02
"""Ratio between consecutive shift levels: a shift is rounded up by at most 2%."""

LEVEL_SMALLEST: Final = 1e-9
"""The smallest level; smaller (non-zero) shifts are rounded up to it."""

_LOG_RATIO: Final = math.log(LEVEL_RATIO)
_TOP_LEVEL: Final = math.ceil(math.log(SATURATION / LEVEL_SMALLEST) / _LOG_RATIO) + 1
"""The largest level, past SATURATION: larger shifts are counted there (an exact release)."""
_MEDIAN_SAMPLE: Final = 4096
"""The reference rho of a larger stratum is the median of this many of its people, evenly spread
over its rows (any rho is valid; this keeps the shifts near the smallest at a fraction of the
cost)."""
_COUNT_PEOPLE: Final = 512
"""People whose (level, person) counts one bincount makes at once (a table that fits a cache)."""
_LEVEL_VALUES: Final = LEVEL_SMALLEST * LEVEL_RATIO ** np.arange(_TOP_LEVEL + 1, dtype=np.float64)
"""The shift of each level (``level_value``'s parameter), looked up instead of recomputed."""


def level_value(family: str, level: int) -> Pair:
    """The pair of ``family`` at shift level ``level`` (``LEVEL_SMALLEST * LEVEL_RATIO**level``)."""
    return Pair(family, LEVEL_SMALLEST * LEVEL_RATIO**level)  # type: ignore[arg-type]


def shift_levels(shifts: NDArray[np.float64]) -> NDArray[np.int64]:
    """Level index of each shift, rounded up; -1 for a zero shift (or NaN).

    The level is the smallest whose value (``LEVEL_SMALLEST * LEVEL_RATIO**level``) is at least
    the shift, or the top level: the logarithm estimates it, and a comparison with the level's
    value steps it up where a rounding of the logarithm fell short.
    """
    positive = shifts > 0  # False for NaN too
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log(shifts)  # -inf or NaN where not positive: cleared below
    x -= math.log(LEVEL_SMALLEST)
    x /= _LOG_RATIO
    np.ceil(x, out=x)
    np.clip(x, 0.0, _TOP_LEVEL, out=x)  # below the smallest level: the smallest
    x[~positive] = 0.0
    lv = x.astype(np.int64)
    # np.take: a gather many times faster than fancy indexing
    lv += np.take(_LEVEL_VALUES, lv) < shifts
    np.minimum(lv, _TOP_LEVEL, out=lv)
    lv[~positive] = -1
    return lv


def _groups(
    h: NDArray[np.float64], a: NDArray[np.bool_], inside: NDArray[np.bool_]
) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int]:
    one, zero = inside & a, inside & ~a
    # the group sums as products with 0/1 vectors (no copy of the selected columns)
    s1, s0 = h @ one.astype(np.float64), h @ zero.astype(np.float64)
    return s1, s0, int(np.count_nonzero(one)), int(np.count_nonzero(zero))


def _population(metric: str, n: int, labels: NDArray[np.bool_] | None) -> NDArray[np.bool_]:
    if metric in EO_FAMILY:
        if labels is None:
            raise ValueError(f"metric {metric!r} needs the labels to compute shifts")
        return labels.copy()
    return np.ones(n, dtype=bool)


def _inputs(
    metric: str, predictions: ArrayLike, protected: ArrayLike, labels: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_] | None, NDArray[np.bool_]]:
    """(models as (m, n), attribute, labels, the people the metric counts)."""
    h = np.atleast_2d(np.asarray(predictions, dtype=np.float64))
    a = np.asarray(protected).astype(bool)
    y = None if labels is None else np.asarray(labels).astype(bool)
    return h, a, y, _population(metric, a.size, y)


def flip_shifts(
    metric: str, predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike | None = None
) -> NDArray[np.float64]:
    """(m, n) shift of each answer when each person's attribute is flipped (module docstring).

    -1 (no pair at all) where the flip leaves the universe (it would empty a group) or the person
    does not count for the metric (y = 0 for EO): nothing moves there, not even by float error.
    """
    h, a, _, inside = _inputs(metric, predictions, protected, labels)
    s1, s0, n1, n0 = _groups(h, a, inside)
    if min(n1, n0) < 1:
        return np.full_like(h, -1.0)
    mean1, mean0 = s1 / n1, s0 / n0
    # SP' - SP, exactly rearranged: (mean1 - h)/(N1 - 1) + (mean0 - h)/(N0 + 1) for a person of
    # group 1, (h - mean1)/(N1 + 1) + (h - mean0)/(N0 - 1) for one of group 0: a constant per
    # model and group plus a slope per group times h (one pass over the models)
    one = inside & a if n1 >= 2 else np.zeros_like(a)
    zero = inside & ~a if n0 >= 2 else np.zeros_like(a)
    slope = np.zeros(a.size)
    const = np.zeros((h.shape[0], 2))
    if n1 >= 2:
        slope[one] = -(1.0 / (n1 - 1) + 1.0 / (n0 + 1))
        const[:, 1] = mean1 / (n1 - 1) + mean0 / (n0 + 1)
    if n0 >= 2:
        slope[zero] = 1.0 / (n1 + 1) + 1.0 / (n0 - 1)
        const[:, 0] = -(mean1 / (n1 + 1) + mean0 / (n0 - 1))
    out = h * slope
    out += np.take(const, a.astype(np.intp), axis=1)
    if metric.startswith("abs_"):  # ||SP + move| - |SP||
        sp = (mean1 - mean0)[:, None]
        out += sp
        np.abs(out, out=out)
        out -= np.abs(sp)
    np.abs(out, out=out)
    out[:, ~(one | zero)] = -1.0
    return out


def reference_shifts(
    metric: str, predictions: ArrayLike, *, protected: ArrayLike, labels: ArrayLike | None = None
) -> NDArray[np.float64]:
    """(m, n) move of each answer to the reference world of each person (module docstring).

    -1 (no pair) for the people the metric does not count (y = 0 for EO).
    """
    h, a, y, inside = _inputs(metric, predictions, protected, labels)
    _, _, n1, n0 = _groups(h, a, inside)
    out = np.full_like(h, -1.0)
    if min(n1, n0) < 1:
        return out
    c = 1.0 / n1 + 1.0 / n0
    # a swap keeps the group sizes within each label stratum: the partner is of the same label
    strata = [inside] if y is None or metric in EO_FAMILY else [y, ~y]
    which = np.full(a.size, len(strata), dtype=np.intp)  # the stratum of each person (or none)
    rho = np.zeros((h.shape[0], len(strata) + 1))
    for j, stratum in enumerate(strata):
        if stratum.any():
            which[stratum] = j
            members = np.flatnonzero(stratum)
            if members.size > _MEDIAN_SAMPLE:  # any rho is valid: a spread sample's median
                members = members[np.linspace(0, members.size - 1, _MEDIAN_SAMPLE).astype(int)]
            rho[:, j] = np.median(h[:, members], axis=1)
    out = h - np.take(rho, which, axis=1)
    np.abs(out, out=out)
    out *= c
    out[:, which == len(strata)] = -1.0
    return out


@dataclass
class PersonLedger:
    """Counts of each person's pairs per family and level, and of the pairs everyone shares.

    Organisations add their identities' ledgers (:meth:`merge`). Everything here is a fact about
    the audit set for the evaluator.
    """

    n: int
    """People of the audit set."""
    counts: dict[tuple[str, int], NDArray[np.int64]] = field(default_factory=dict)
    """(family, level) -> (n,) how many releases of that pair reached each person."""
    common: dict[Pair, int] = field(default_factory=dict)
    """Pairs every person got, with how many."""

    def add_shifts(self, family: str, shifts: ArrayLike) -> None:
        """Count one pair of ``family`` per (model, person) at each normalised shift (a shift
        <= 0 counts nothing)."""
        s = np.atleast_2d(np.asarray(shifts, dtype=np.float64))
        if s.shape[1] != self.n:
            raise ValueError(f"shifts must have {self.n} columns; received shape {s.shape}")
        self.add_levels(family, shift_levels(s))

    def add_levels(self, family: str, levels: ArrayLike) -> None:
        """Count one pair of ``family`` per (model, person) at each level of :func:`shift_levels`
        (a level of -1 counts nothing)."""
        lv = np.atleast_2d(np.asarray(levels))
        if lv.shape[1] != self.n:
            raise ValueError(f"levels must have {self.n} columns; received shape {lv.shape}")
        if not lv.size or int(lv.max()) < 0:
            return
        shifted = lv.astype(np.int64) + 1  # "no pair" (-1) is 0 here
        present = np.flatnonzero(np.bincount(shifted.ravel())[1:])  # the levels that occur
        low, span = int(present[0]), int(present[-1] - present[0]) + 1
        shifted -= low + 1
        shifted[shifted < 0] = span  # "no pair": one more row, dropped
        # one bincount per block of people, whose (level, person) table stays in the cache
        table = np.empty((span, self.n), dtype=np.int32)
        keys = np.empty((lv.shape[0], min(_COUNT_PEOPLE, self.n)), dtype=np.int64)
        for start in range(0, self.n, _COUNT_PEOPLE):
            stop = min(start + _COUNT_PEOPLE, self.n)
            width = stop - start
            block = keys[:, :width] if width < keys.shape[1] else keys
            np.multiply(shifted[:, start:stop], width, out=block)
            block += np.arange(width)
            counted = np.bincount(block.ravel(), minlength=(span + 1) * width)
            table[:, start:stop] = counted[: span * width].reshape(span, width)
        for j in present - low:
            self._column(family, low + int(j))[:] += table[j]

    def _column(self, family: str, level: int) -> NDArray[np.int64]:
        """The counts of one (family, level), created as zeros when new."""
        key = (family, level)
        if key not in self.counts:
            self.counts[key] = np.zeros(self.n, dtype=np.int64)
        return self.counts[key]

    def add_common(self, pair: Pair, count: int = 1) -> None:
        """Count ``count`` releases of ``pair`` for everyone."""
        if count > 0 and not pair.trivial:
            self.common[pair] = self.common.get(pair, 0) + int(count)

    def merge(self, other: PersonLedger) -> PersonLedger:
        """The ledger of both sets of releases (a new object)."""
        if other.n != self.n:
            raise ValueError("ledgers of different audit sets cannot be merged")
        out = PersonLedger(self.n, {k: v.copy() for k, v in self.counts.items()}, dict(self.common))
        for key, v in other.counts.items():
            out.counts[key] = out.counts[key] + v if key in out.counts else v.copy()
        for pair, k in other.common.items():
            out.add_common(pair, k)
        return out

    @property
    def empty(self) -> bool:
        """Whether no release reached anyone."""
        return not self.counts and not self.common

    def matrix(self) -> tuple[list[Pair], NDArray[np.int64]]:
        """The pairs and the (n, K) count matrix for the composition (shared pairs included)."""
        merged = self.counts
        keys = sorted(merged)
        pairs = [level_value(f, lv) for f, lv in keys]
        cols = [merged[k] for k in keys]
        for pair, k in sorted(self.common.items()):
            pairs.append(pair)
            cols.append(np.full(self.n, k, dtype=np.int64))
        if not cols:
            return [], np.zeros((self.n, 0), dtype=np.int64)
        return pairs, np.stack(cols, axis=1)

    def arrays(self, prefix: str) -> dict[str, NDArray]:
        """The ledger as named arrays for a run's side file (recomputable from them)."""
        keys = sorted(self.counts)
        out: dict[str, NDArray] = {
            f"{prefix}/levels": np.array([lv for _, lv in keys], dtype=np.int64),
            f"{prefix}/families": np.array([f for f, _ in keys], dtype="U8"),
            f"{prefix}/counts": (
                np.stack([self.counts[k] for k in keys], axis=1).astype(np.int32)
                if keys
                else np.zeros((self.n, 0), dtype=np.int32)
            ),
        }
        common = sorted(self.common.items())
        out[f"{prefix}/common"] = np.array(
            [[_FAMILY_CODE[p.family], p.parameter, p.delta, k] for p, k in common],
            dtype=np.float64,
        ).reshape(-1, 4)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, NDArray], prefix: str) -> PersonLedger:
        """The ledger :meth:`arrays` wrote under ``prefix`` (e.g. a run's side file, opened with
        ``numpy.load``): what a researcher recomposes the answers ceiling from."""
        counts = np.asarray(arrays[f"{prefix}/counts"])
        levels = np.asarray(arrays[f"{prefix}/levels"])
        families = np.asarray(arrays[f"{prefix}/families"])
        ledger = cls(int(counts.shape[0]))
        for k, (family, level) in enumerate(zip(families, levels, strict=True)):
            ledger.counts[(str(family), int(level))] = counts[:, k].astype(np.int64)
        names = {code: name for name, code in _FAMILY_CODE.items()}
        for code, parameter, delta, k in np.asarray(arrays[f"{prefix}/common"]).reshape(-1, 4):
            ledger.add_common(Pair(names[int(code)], float(parameter), float(delta)), int(k))
        return ledger


_FAMILY_CODE: Final = {"laplace": 0, "cauchy": 1, "pure": 2, "approx": 3, "exact": 4}
"""How a shared pair's family is written in the side file."""
