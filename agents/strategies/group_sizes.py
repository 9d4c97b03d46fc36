r"""Group sizes: how a compressed-sensing attacker learns N1 and N0 before it can decode.

Every decoder needs the two group sizes: they fix the two values that the unknown vector takes
(``1/N1`` and ``-1/N0``) and which group is the small, sparse one. The attacker does not know the
protected attribute, so it learns them in one of three ways:

- **a probe** (Remark 4 of the paper): a model that accepts one person only has the statistical
  parity gap ``1/N1`` if that person is advantaged and ``-1/N0`` otherwise, so one answer gives
  both sizes (:func:`sizes_from_probe`). Under noise the answer is trusted only when the noise
  could hardly have flipped its sign or moved its size much (:func:`probe_too_noisy`);
- **a prior**: when the probe is refused or not trusted, an assumed share of the disadvantaged
  group (:func:`assumed_sizes`);
- **a least-squares fit**: once there are more answered models than people, the answers
  themselves pin the sizes down (:func:`least_squares_group_size`), pooling the evidence of every
  answer instead of one (:func:`refitted_sizes` applies it per label class).

Sizes are kept per label class: for equal opportunity or equalized odds each class of people an
answer depends on has its own pair (N1, N0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import special

from biasleak.agents.strategies.noise_model import NoiseModel

__all__ = [
    "PROBE_FALSE_SIGN",
    "PROBE_SIZE_ERROR",
    "assumed_sizes",
    "least_squares_group_size",
    "probe_readable",
    "probe_too_noisy",
    "refitted_sizes",
    "sizes_from_probe",
]

PROBE_FALSE_SIGN: Final = 1e-3
"""Largest chance, under the noise, that a trusted probe answer has the wrong sign."""
PROBE_SIZE_ERROR: Final = 0.25
"""Largest relative error of a trusted probe's group size (at that same chance)."""


def assumed_sizes(
    classes: Sequence[NDArray[np.intp]], prior_minority: float
) -> list[tuple[int, int]]:
    """Per label class, (N1, N0) with a share ``prior_minority`` of disadvantaged people.

    Each group holds at least one person of the class.
    """
    sizes = []
    for c in classes:
        n0 = min(max(round(prior_minority * c.size), 1), c.size - 1)
        sizes.append((int(c.size) - n0, n0))
    return sizes


def probe_readable(values: NDArray[np.float64], classes: int) -> bool:
    """Whether a probe answer holds one finite, non-zero value per label class."""
    return bool(
        values.size == classes and np.all(np.isfinite(values)) and not np.any(values == 0.0)
    )


def probe_too_noisy(values: NDArray[np.float64], noises: Sequence[NoiseModel]) -> bool:
    """Whether the noise could have produced a probe value's sign or size by chance.

    A probe value v is ``1/N1`` or ``-1/N0`` plus noise. Under noise of known scale it is
    trusted only when the noise exceeds ``t`` with chance at most :data:`PROBE_FALSE_SIGN`
    (``t = b ln(1 / (2 p))`` for Laplace, ``sigma Phi^{-1}(1 - p)`` for Gaussian) and
    ``t / |v| <= PROBE_SIZE_ERROR``; under noise of unknown scale (the data-dependent
    mechanisms) it is never trusted. Exact values are always trusted; values without a noise
    model (``noises`` shorter than ``values``) too.
    """
    for value, noise in zip(values, noises, strict=False):
        if not noise.noisy:
            continue
        scales = noise.scales(1)
        if scales is None:  # a data-dependent scale: nothing to judge the probe by
            tail = math.inf
        elif noise.kind == "gaussian":
            tail = float(scales[0]) * float(special.ndtri(1.0 - PROBE_FALSE_SIGN))
        else:
            tail = float(scales[0]) * math.log(1.0 / (2.0 * PROBE_FALSE_SIGN))
        if abs(float(value)) <= tail or tail / abs(float(value)) > PROBE_SIZE_ERROR:
            return True
    return False


def sizes_from_probe(
    classes: Sequence[NDArray[np.intp]], values: NDArray[np.float64]
) -> list[tuple[int, int]]:
    """Per label class, (N1, N0) read from the probe's value ``1/N1`` or ``-1/N0``.

    The value's size gives the size of the probed person's group (at least one person, and at
    least one left for the other group); its sign says which group that is.
    """
    sizes = []
    for c, value in zip(classes, values, strict=True):
        size = min(max(round(1.0 / abs(float(value))), 1), int(c.size) - 1)
        sizes.append((size, int(c.size) - size) if value > 0 else (int(c.size) - size, size))
    return sizes


def least_squares_group_size(
    H: NDArray[np.float64], sp: NDArray[np.float64], *, smaller: Literal[0, 1] = 0
) -> int | None:
    r"""The smaller group's size read from a least-squares fit of v, or None when m <= n.

    With more answered models than people, ``v_hat = argmin ||H v - SP||_2`` is v plus noise,
    and v takes two values, ``1/N1`` and ``-1/N0``. For each k in [1, n/2] the k smallest
    entries of ``v_hat`` (largest when ``smaller`` = 1, the advantaged group) are given the small
    group's value and the rest the other's; the k with the least squared misfit wins. Unlike a
    one-person probe, this pools the evidence of every answer.
    """
    m, n = H.shape
    if m <= n:
        return None
    v = np.linalg.lstsq(H, sp, rcond=None)[0]
    ordered = np.sort(v if smaller == 0 else -v)  # the small group's values come first
    ks = np.arange(1, n // 2 + 1)
    head = np.cumsum(ordered)[ks - 1]
    head_sq = np.cumsum(ordered**2)[ks - 1]
    total, total_sq = float(ordered.sum()), float((ordered**2).sum())
    low, high = -1.0 / ks, 1.0 / (n - ks)  # small group's level, the other's (sign-folded)
    misfit = (
        head_sq
        - 2 * low * head
        + ks * low**2
        + (total_sq - head_sq)
        - 2 * high * (total - head)
        + (n - ks) * high**2
    )
    return int(ks[int(np.argmin(misfit))])


def refitted_sizes(
    models: NDArray[np.float64],
    index: NDArray[np.intp],
    answers: NDArray[np.float64],
    classes: Sequence[NDArray[np.intp]],
    sizes: Sequence[tuple[int, int]],
    *,
    prior_minority: float,
) -> tuple[list[tuple[int, int]], bool]:
    """Per label class, (N1, N0) re-estimated by :func:`least_squares_group_size`.

    ``models`` are all the attacker's models, ``index`` the rows answered, ``answers`` their
    values (one column per label class) and ``sizes`` the current estimate. Which group is the
    small one is not identifiable from the fit, so ``prior_minority`` decides it. A class with
    no more answered models than people keeps its sizes. Returns the sizes and whether any class
    was refitted.
    """
    out = list(sizes)
    refitted = False
    for col, cls in enumerate(classes):
        # which group is small is not identifiable from the fit: the prior decides
        smaller = 0 if prior_minority <= 0.5 else 1
        small = least_squares_group_size(
            models[np.ix_(index, cls)], answers[:, col], smaller=smaller
        )
        if small is None:
            continue  # fewer models than people: keep the prior's sizes
        size = int(cls.size)
        out[col] = (size - small, small) if smaller == 0 else (small, size - small)
        refitted = True
    return out, refitted
