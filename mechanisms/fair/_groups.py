"""Input checks for the fair-learning services: 0/1 vectors and group indices.

The services take base predictions, labels and groups as plain vectors. A float 0.7 where a 0/1
base prediction belongs, or a group index outside 0..G-1, would silently fall into the wrong
cell of a table; these checks refuse them with a message naming the argument.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms._validation import LENGTH_MISMATCH, VECTOR_NDIM

__all__ = ["GROUPS_INVALID", "NOT_ZERO_ONE", "as_groups", "as_labels"]

NOT_ZERO_ONE: Final = "{name} must contain only 0 and 1; received other values, e.g. {examples}"
GROUPS_INVALID: Final = (
    "protected must hold group indices 0..{top} (n_groups = {n_groups}); received other values, "
    "e.g. {examples}"
)


def _vector(values: ArrayLike, name: str, n: int | None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] < 1:
        raise ValueError(VECTOR_NDIM.format(name=name, shape=arr.shape))
    if n is not None and arr.shape[0] != n:
        raise ValueError(LENGTH_MISMATCH.format(name=name, n=n, length=arr.shape[0]))
    return arr


def _whole(arr: np.ndarray, low: int, high: int) -> tuple[NDArray[np.int64], np.ndarray]:
    """The array as int64 and a mask of entries that are not integers in [low, high]."""
    if arr.dtype == np.bool_:
        return arr.astype(np.int64), np.zeros(arr.shape, dtype=bool)
    if arr.dtype.kind not in "fiu":
        return np.zeros(arr.shape, dtype=np.int64), np.ones(arr.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        bad = ~((arr >= low) & (arr <= high) & (np.floor(arr) == arr))
    out = np.where(bad, 0, arr).astype(np.int64)
    return out, bad


def _examples(arr: np.ndarray, bad: np.ndarray) -> list[object]:
    return [v.item() if hasattr(v, "item") else v for v in arr[bad][:3]]


def as_labels(values: ArrayLike, *, name: str, n: int | None = None) -> NDArray[np.int64]:
    """A 1-D vector of 0/1 values (bool, int or float) as int64."""
    arr = _vector(values, name, n)
    out, bad = _whole(arr, 0, 1)
    if bad.any():
        raise ValueError(NOT_ZERO_ONE.format(name=name, examples=_examples(arr, bad)))
    return out


def as_groups(values: ArrayLike, *, n: int | None = None, n_groups: int) -> NDArray[np.int64]:
    """A 1-D vector of group indices in 0..n_groups-1 as int64 (groups may be empty)."""
    arr = _vector(values, "protected", n)
    out, bad = _whole(arr, 0, n_groups - 1)
    if bad.any():
        raise ValueError(
            GROUPS_INVALID.format(top=n_groups - 1, n_groups=n_groups, examples=_examples(arr, bad))
        )
    return out
