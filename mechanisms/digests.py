"""Content digests: the one place biasleak hashes things, always with SHA-256.

Several parts of biasleak need a name for some content that does not depend on the process or
the platform: the compliance cache names a model by its predictions, a developer's log names what
it submitted, each agent's random stream is keyed by a stable hash of its role, a scenario by the
hash of its resolved form, a sweep run by the scenario and seed, and a bundled data file is checked
against its published checksum. Python's ``hash`` changes between processes, so all of these use
SHA-256 through the helpers here.
"""

from __future__ import annotations

import hashlib

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["array_digest", "model_digest", "stable_int", "text_digest"]


def array_digest(values: ArrayLike) -> bytes:
    """The full SHA-256 of an array's float64 values in C order (32 bytes)."""
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    return hashlib.sha256(arr.data).digest()


def model_digest(row: ArrayLike) -> bytes:
    """A 128-bit digest of one model's float64 predictions (the compliance cache's key)."""
    return array_digest(row)[:16]


def stable_int(text: str) -> int:
    """A 64-bit integer from ``text`` that is the same in every process (random-stream keys)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def text_digest(data: str | bytes) -> str:
    """The hex SHA-256 of a text (UTF-8) or of raw bytes."""
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()
