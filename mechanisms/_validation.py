"""Input checks shared by every public function in :mod:`biasleak.mechanisms`.

A mechanism that silently accepts a NaN prediction or a non-binary protected attribute returns a
number that looks fine and means nothing. Every public function therefore validates its inputs
here and raises a :class:`ValueError` whose message names the argument, what was received and what
is allowed. The messages are module-level constants so that tests (and callers that want to map
errors to refusal codes) can match them without copying strings.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

PREDICTIONS_NDIM: Final = (
    "{name} must have shape (n,) or (m, n) with n >= 1 people; received an array of shape {shape}"
)
PREDICTIONS_DTYPE: Final = "{name} must be numeric (float, int or bool); received dtype {dtype}"
PREDICTIONS_NOT_FINITE: Final = (
    "{name} must be finite; received {count} NaN or infinite value(s), the first at index {index}"
)
PREDICTIONS_RANGE: Final = (
    "{name} must lie in [0, 1]; received values from {low!r} to {high!r} "
    "(first out-of-range value at index {index})"
)
LENGTH_MISMATCH: Final = (
    "{name} must have one entry per person, n = {n} (the last axis of predictions); "
    "received length {length}"
)
VECTOR_NDIM: Final = "{name} must be a 1-D vector of length n; received an array of shape {shape}"
NOT_BINARY: Final = "{name} must contain only 0 and 1; received other values, e.g. {examples}"
EMPTY_GROUP: Final = (
    "{name} must contain both groups; group {group} is empty (N{group} = 0), so the metric is "
    "undefined"
)
EPSILON_INVALID: Final = (
    "{name} must be a number > 0 (math.inf means exact answers, no privacy); received {value!r}"
)
DELTA_INVALID: Final = "{name} must lie in the open interval (0, 1); received {value!r}"
DELTA_RANGE: Final = "{name} must lie in [0, 1); received {value!r}"
POSITIVE_INT: Final = "{name} must be an integer >= {minimum}; received {value!r}"
POSITIVE_REAL: Final = "{name} must be a finite number > 0; received {value!r}"
NONNEGATIVE_REAL: Final = "{name} must be a finite number >= 0; received {value!r}"
UNKNOWN_CHOICE: Final = "{name} must be one of {allowed}; received {value!r}{hint}"


def did_you_mean(value: object, allowed: tuple[str, ...] | list[str]) -> str:
    """Return a ``" (did you mean 'x'?)"`` hint for a near-miss name, or ``""``."""
    import difflib

    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(value: object, allowed: tuple[str, ...], *, name: str) -> str:
    """Check that ``value`` is one of ``allowed`` and return it."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(
            UNKNOWN_CHOICE.format(
                name=name, allowed=list(allowed), value=value, hint=did_you_mean(value, allowed)
            )
        )
    return value


def as_predictions(predictions: ArrayLike, *, name: str = "predictions") -> NDArray[np.float64]:
    """Return ``predictions`` as a float64 array of shape (n,) or (m, n) with values in [0, 1].

    The range check uses the array's min and max (two passes, no temporary array), which also
    catches NaN because every comparison with NaN is false.
    """
    arr = np.asarray(predictions)
    if arr.dtype.kind not in "fiub":
        raise ValueError(PREDICTIONS_DTYPE.format(name=name, dtype=arr.dtype))
    if arr.ndim not in (1, 2) or arr.shape[-1] < 1 or (arr.ndim == 2 and arr.shape[0] < 1):
        raise ValueError(PREDICTIONS_NDIM.format(name=name, shape=arr.shape))
    arr = np.asarray(arr, dtype=np.float64)
    low, high = arr.min(), arr.max()
    if not (low >= 0.0 and high <= 1.0):
        bad = ~np.isfinite(arr)
        if bad.any():
            index = np.unravel_index(int(np.argmax(bad)), arr.shape)
            raise ValueError(
                PREDICTIONS_NOT_FINITE.format(name=name, count=int(bad.sum()), index=_idx(index))
            )
        out = (arr < 0.0) | (arr > 1.0)
        index = np.unravel_index(int(np.argmax(out)), arr.shape)
        raise ValueError(
            PREDICTIONS_RANGE.format(name=name, low=float(low), high=float(high), index=_idx(index))
        )
    return arr


def _idx(index: tuple[np.intp, ...]) -> int | tuple[int, ...]:
    flat = tuple(int(i) for i in index)
    return flat[0] if len(flat) == 1 else flat


def as_binary(
    values: ArrayLike, *, n: int | None = None, name: str, require_both: bool = True
) -> NDArray[np.bool_]:
    """Return a 0/1 vector as a boolean array, checking its shape, length and values."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(VECTOR_NDIM.format(name=name, shape=arr.shape))
    if n is not None and arr.shape[0] != n:
        raise ValueError(LENGTH_MISMATCH.format(name=name, n=n, length=arr.shape[0]))
    if arr.dtype == np.bool_:
        out = arr
    else:
        if arr.dtype.kind not in "fiu":
            raise ValueError(NOT_BINARY.format(name=name, examples=_examples(arr)))
        out = arr == 1
        if not np.all(out | (arr == 0)):
            raise ValueError(NOT_BINARY.format(name=name, examples=_examples(arr)))
    if require_both:
        ones = int(np.count_nonzero(out))
        if ones == 0:
            raise ValueError(EMPTY_GROUP.format(name=name, group=1))
        if ones == out.shape[0]:
            raise ValueError(EMPTY_GROUP.format(name=name, group=0))
    return out


def _examples(arr: np.ndarray) -> list[object]:
    if arr.dtype.kind in "fiu":
        bad = arr[(arr != 0) & (arr != 1)]
        return [v.item() for v in np.unique(bad)[:3]]
    return [v.item() if hasattr(v, "item") else v for v in arr[:3]]


def check_epsilon(epsilon: float, *, name: str = "epsilon", allow_inf: bool = True) -> float:
    """Check a privacy parameter: a real number > 0, or ``math.inf`` when ``allow_inf``."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float | np.integer | np.floating):
        raise ValueError(EPSILON_INVALID.format(name=name, value=epsilon))
    eps = float(epsilon)
    if math.isnan(eps) or eps <= 0.0 or (math.isinf(eps) and not allow_inf):
        raise ValueError(EPSILON_INVALID.format(name=name, value=epsilon))
    return eps


def check_delta(delta: float, *, name: str = "delta", allow_zero: bool = False) -> float:
    """Check a failure probability: in (0, 1), or in [0, 1) when ``allow_zero``."""
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.integer | np.floating):
        raise ValueError(DELTA_INVALID.format(name=name, value=delta))
    d = float(delta)
    ok = (0.0 <= d < 1.0) if allow_zero else (0.0 < d < 1.0)
    if not ok:
        template = DELTA_RANGE if allow_zero else DELTA_INVALID
        raise ValueError(template.format(name=name, value=delta))
    return d


def check_int(value: object, *, name: str, minimum: int = 1) -> int:
    """Check an integer count (bools and floats with a fraction are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float) and value.is_integer() and value >= minimum:
            return int(value)
        raise ValueError(POSITIVE_INT.format(name=name, minimum=minimum, value=value))
    if int(value) < minimum:
        raise ValueError(POSITIVE_INT.format(name=name, minimum=minimum, value=value))
    return int(value)


def check_positive(value: object, *, name: str, allow_zero: bool = False) -> float:
    """Check a finite real number > 0 (or >= 0 when ``allow_zero``)."""
    template = NONNEGATIVE_REAL if allow_zero else POSITIVE_REAL
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(template.format(name=name, value=value))
    v = float(value)
    if not math.isfinite(v) or v < 0.0 or (v == 0.0 and not allow_zero):
        raise ValueError(template.format(name=name, value=value))
    return v
