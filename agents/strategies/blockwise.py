r"""Approximate message passing over models regenerated block by block, in float32.

The AMP decoder of :mod:`~biasleak.agents.strategies.decoders` (:func:`~.decoders.amp`) holds
the whole (m, n) matrix of answered models, a centred and column-normalised copy and that
copy's square: at the scale of a population (n = 43,131 people, m = 20,000 models, about the
``2 N0 ln(n / N0)`` answers compressed sensing needs for N0 = 4,228) that is 19 GiB in
float64. Yet each AMP iteration only touches the matrix through four products - ``X x`` and
``X^2 tau_x`` for the output side, ``X^T s`` and ``(X^2)^T tau_s`` for the input side - and
the output side's update is row by row: the residual of model i needs only row i. So one
iteration is one pass over the rows, in blocks: draw the block again from its seed
(:class:`~biasleak.agents.strategies.model_source.PerturbedModels`), compute its rows' ``p``,
pass them through the noise channel, and add the block's share of ``X^T s`` and
``(X^2)^T tau_s`` before the next block is drawn. Memory is two blocks of float32
(:data:`CHUNK_ROWS` rows of n) per thread and a few vectors of length n or m; time is
dominated by drawing the uniforms again, a few nanoseconds per entry per iteration. Threads
share a pass by taking whole groups of batches (:data:`GROUPS` of them, added in a fixed
order), so the result is the same on any number of cores.

Everything else is :func:`~.decoders.amp`'s: the same prior (:func:`~.decoders.tilted_prior`
with the dropped row-mean equation), the same output channels (Gaussian, Laplace, a Laplace
channel with a learned scale for Cauchy and unknown noise), damping and iteration limit, and
the same decision (small group when the posterior exceeds k/n). A pre-pass over the blocks gives
the column means and norms (the centring and normalisation) and the row sums (the measurements
``eta``). The products run in float32 on columns centred by their float32 mean (no
cancellation against the mean of the uniforms), with float64 accumulators and float64 AMP
state; the stopping tolerance is :data:`BLOCKWISE_TOLERANCE`, above float32's rounding.
On the same answers the posterior equals :func:`~.decoders.amp`'s to float32 precision (a test
checks it on a small instance).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Final, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from threadpoolctl import threadpool_limits

from biasleak.agents.strategies.decoders import DecodeResult
from biasleak.agents.strategies.message_passing import (
    AMP_DAMPING,
    AMP_ITERATIONS,
    gaussian_channel,
    laplace_channel,
    row_mean_total,
    starting_scales,
    tilted_prior,
)
from biasleak.agents.strategies.model_source import PerturbedModels
from biasleak.agents.strategies.noise_model import EXACT, NoiseModel

__all__ = [
    "BLOCKWISE_TOLERANCE",
    "CHUNK_ROWS",
    "AmpRun",
    "blockwise_amp",
    "decode_blockwise",
]

CHUNK_ROWS: Final = 32
"""Rows drawn and processed at a time: small enough that a block and its square stay in cache."""
BLOCKWISE_TOLERANCE: Final = 1e-5
"""Stop when no entry of x moves by more than this share of the largest level in an iteration
(float32 products: :data:`~.decoders.AMP_TOLERANCE` would sit below their rounding)."""
TINY: Final = 1e-30
"""Entries below this share of the largest are zero in the float32 products (no subnormals)."""
GROUPS: Final = 8
"""The answered batches are cut into this many groups, summed in order (see :class:`_Sweep`)."""
NO_ANSWERS: Final = "no answered batch to decode"
BAD_ANSWER: Final = "batch {batch} has {rows} models but {values} answers"
BAD_SIZE: Final = "the small group's size must be in [1, n - 1] = [1, {top}]; got {k}"


_R = TypeVar("_R")


@dataclass(frozen=True, eq=False)
class AmpRun:
    """What one blockwise AMP run produced."""

    posterior: NDArray[np.float64]
    """(n,) posterior probability that each person is in the small group."""
    iterations: int
    """AMP iterations run (each one pass over the answered models)."""
    converged: bool
    """Whether the stopping rule was met before :data:`~.decoders.AMP_ITERATIONS`."""


def _answers(
    source: PerturbedModels, answers: Mapping[int, ArrayLike]
) -> tuple[list[int], NDArray[np.float64]]:
    """The answered batch indices in order and their answers stacked, checked against sizes."""
    order = sorted(int(i) for i in answers)
    if not order:
        raise ValueError(NO_ANSWERS)
    stacked = []
    for i in order:
        values = np.asarray(answers[i], dtype=np.float64).reshape(-1)
        if values.size != source.rows(i):
            raise ValueError(BAD_ANSWER.format(batch=i, rows=source.rows(i), values=values.size))
        stacked.append(values)
    return order, np.concatenate(stacked)


def _float32(values: NDArray[np.float64]) -> tuple[NDArray[np.float32], float]:
    """``values`` as float32 in units of their largest magnitude, with that unit.

    Scaling keeps the entries far from float32's range limits, and entries below :data:`TINY`
    of the largest become zero: subnormal floats would slow the products tenfold.
    """
    unit = float(np.abs(values).max()) if values.size else 0.0
    if not unit > 0.0:
        return np.zeros(values.shape, np.float32), 1.0
    scaled = values / unit
    scaled[np.abs(scaled) < TINY] = 0.0
    return scaled.astype(np.float32), unit


class _Sweep:
    """Passes over the answered batches' working rows, in fixed groups of whole batches.

    The batches are cut into at most :data:`GROUPS` contiguous groups; each group is one task
    (a batch's rows come from one stream, so a task cannot start inside a batch) with its own
    float32 buffers and float64 accumulators, and the groups' results are added in group order.
    The result therefore does not depend on how many threads run the tasks.
    """

    def __init__(
        self, source: PerturbedModels, order: list[int], chunk: int, workers: int | None
    ) -> None:
        self.source = source
        self.chunk = chunk
        self.groups = [[int(i) for i in g] for g in np.array_split(order, min(GROUPS, len(order)))]
        self.first_row: dict[int, int] = {}
        """Batch index -> its first row in the stacked answers."""
        row = 0
        for i in order:
            self.first_row[i] = row
            row += source.rows(i)
        self.m = row
        """Answered models."""
        self.rows = min(chunk, max(source.rows(i) for i in order))
        available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        self.workers = max(1, min(workers or available, len(self.groups)))
        self._local = threading.local()

    def buffers(self) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """This thread's two float32 buffers of ``rows`` x n (a block and its square)."""
        if getattr(self._local, "w", None) is None:
            self._local.w = np.empty((self.rows, self.source.n), np.float32)
            self._local.sq = np.empty_like(self._local.w)
        return self._local.w, self._local.sq

    def chunks(self, group: list[int]) -> Iterator[tuple[slice, NDArray[np.float32]]]:
        """(rows of the stacked answers, working rows) for every chunk of a group's batches."""
        w_buf, _ = self.buffers()
        for i in group:
            first = self.first_row[i]
            for start, w in self.source.working_chunks(i, self.chunk, w_buf):
                yield slice(first + start, first + start + w.shape[0]), w

    def run(self, task: Callable[[list[int]], _R]) -> list[_R]:
        """``task`` on every group, on up to ``workers`` threads; results in group order."""
        if self.workers == 1:
            return [task(g) for g in self.groups]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(task, self.groups))


def _moments(
    sweep: _Sweep,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """One pass: the working rows' column means, centred column norms and row sums."""
    n = sweep.source.n
    row_sums = np.zeros(sweep.m)

    def task(group: list[int]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        total, squares = np.zeros(n), np.zeros(n)
        for at, w in sweep.chunks(group):
            total += w.sum(axis=0, dtype=np.float64)
            squares += np.einsum("ij,ij->j", w, w, dtype=np.float64)
            row_sums[at] = w.sum(axis=1, dtype=np.float64)
        return total, squares

    parts = sweep.run(task)
    total = np.sum([t for t, _ in parts], axis=0)
    squares = np.sum([q for _, q in parts], axis=0)
    mean = total / sweep.m
    norms = np.sqrt(np.maximum(squares - sweep.m * mean**2, 0.0))
    norms[norms == 0] = 1.0
    return mean, norms, row_sums


def blockwise_amp(
    source: PerturbedModels,
    eta: NDArray[np.float64],
    order: list[int],
    *,
    k: int,
    c: float,
    noise: NoiseModel = EXACT,
    prior: NDArray[np.float64] | None = None,
    chunk: int = CHUNK_ROWS,
    workers: int | None = None,
    tolerance: float = BLOCKWISE_TOLERANCE,
) -> AmpRun:
    r"""Posterior probability that each person is in the small group, by blockwise GAMP.

    The system of :func:`~.decoders.amp`, ``eta = H s`` with H the models of batches ``order``
    (stacked in that order), solved with one pass over regenerated blocks per iteration after a
    pre-pass for the column means and norms. ``prior`` as for :func:`~.decoders.amp`.
    ``workers`` threads share the passes (default: the cores this process may use); the result
    does not depend on it.
    """
    n = source.n
    if k < 1 or k >= n:
        raise ValueError(BAD_SIZE.format(top=n - 1, k=k))
    sweep = _Sweep(source, order, chunk, workers)
    if eta.shape != (sweep.m,):
        raise ValueError(f"eta must hold one value per answered model, ({sweep.m},)")
    with threadpool_limits(limits=1, user_api="blas"):  # the threads are the parallelism
        mean, norms, _ = _moments(sweep)
        return _iterate(
            sweep, eta, (mean, norms), k=k, c=c, noise=noise, prior=prior, tolerance=tolerance
        )


@dataclass(frozen=True, eq=False)
class _Step:
    """What the rows' side of one iteration reads (``s_hat``: each group writes its rows)."""

    u32: NDArray[np.float32]
    u_unit: float
    v32: NDArray[np.float32]
    v_unit: float
    shift: float
    mean32: NDArray[np.float32]
    y: NDArray[np.float64]
    scales: NDArray[np.float64]
    gaussian: bool
    s_hat: NDArray[np.float64]


def _rows_side(
    sweep: _Sweep, step: _Step, group: list[int]
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """One iteration over a group's rows: ``p``, the channel, ``s``; their share of ``X^T s``.

    Returns the group's shares of ``(W - mean)^T s_hat`` and ``((W - mean)^2)^T tau_s`` (in
    the working rows' units) and its sum of the channel's moments.
    """
    n = sweep.source.n
    back, back_sq, moment_sum = np.zeros(n), np.zeros(n), 0.0
    _, sq_buf = sweep.buffers()
    y, scales, s_hat = step.y, step.scales, step.s_hat
    for at, w in sweep.chunks(group):
        np.subtract(w, step.mean32, out=w)
        sq = np.multiply(w, w, out=sq_buf[: w.shape[0]])
        tau_p = np.maximum(step.v_unit * (sq @ step.v32), 1e-300)
        p = step.u_unit * (w @ step.u32) - step.shift - tau_p * s_hat[at]
        if step.gaussian:
            z, tau_z, moment = gaussian_channel(y[at], p, tau_p, scales[at] ** 2)
        else:
            z, tau_z, moment = laplace_channel(y[at], p, tau_p, scales[at])
        tau_s = np.maximum((1 - tau_z / tau_p) / tau_p, 1e-300)
        s_hat[at] = AMP_DAMPING * (z - p) / tau_p + (1 - AMP_DAMPING) * s_hat[at]
        s32, s_unit = _float32(s_hat[at])
        t32, t_unit = _float32(tau_s)
        back += s_unit * (s32 @ w)
        back_sq += t_unit * (t32 @ sq)
        moment_sum += float(moment.sum())
    return back, back_sq, moment_sum


def _iterate(
    sweep: _Sweep,
    eta: NDArray[np.float64],
    moments: tuple[NDArray[np.float64], NDArray[np.float64]],
    *,
    k: int,
    c: float,
    noise: NoiseModel,
    prior: NDArray[np.float64] | None,
    tolerance: float,
) -> AmpRun:
    """The GAMP iterations of :func:`~.decoders.amp`, each one sweep over the working rows."""
    source, m, n = sweep.source, sweep.m, sweep.source.n
    mean, norms = moments
    # h = offset + scale * w: the offset drops out of the centred system, the scale rescales x
    h_mean = source.offset + source.scale * mean
    if prior is None:
        total = row_mean_total(h_mean[None, :], eta, c=c, k=k, noise=noise)
        prior = tilted_prior(h_mean, k=k, total=total)
    elif prior.shape != (n,) or not np.all((prior >= 0) & (prior <= 1)):
        raise ValueError(f"prior must hold one probability in [0, 1] per person, shape ({n},)")
    mean32 = mean.astype(np.float32)
    drift = mean - mean32.astype(np.float64)  # (W - mean32) x = (W - mean) x + drift . x
    y = eta - eta.mean()
    level = c * source.scale * norms  # the value x_j takes for a small-group member
    logit_prior = special.logit(np.clip(prior, 1e-12, 1 - 1e-12))

    scales, learn, gaussian = starting_scales(noise, y)

    x_hat = prior * level
    tau_x = prior * (1 - prior) * level**2
    s_hat = np.zeros(m)
    post = prior
    top = max(float(level.max()), 1e-300)
    iteration, converged = 0, False
    while iteration < AMP_ITERATIONS and not converged:
        iteration += 1
        u = x_hat / norms
        u32, u_unit = _float32(u)
        v32, v_unit = _float32(tau_x / norms**2)
        shift = float(drift @ u)

        step = _Step(u32, u_unit, v32, v_unit, shift, mean32, y, scales, gaussian, s_hat)
        parts = sweep.run(partial(_rows_side, sweep, step))
        back = np.sum([b for b, _, _ in parts], axis=0)
        back_sq = np.sum([q for _, q, _ in parts], axis=0)
        tau_r = 1.0 / np.maximum(back_sq / norms**2, 1e-300)
        r = x_hat + tau_r * (back - drift * float(s_hat.sum())) / norms
        log_odds = logit_prior + (level * r - 0.5 * level**2) / tau_r
        post = special.expit(log_odds)
        x_new = post * level
        tau_new = post * (1 - post) * level**2
        change = float(np.abs(x_new - x_hat).max()) / top
        x_hat = AMP_DAMPING * x_new + (1 - AMP_DAMPING) * x_hat
        tau_x = AMP_DAMPING * tau_new + (1 - AMP_DAMPING) * tau_x
        if learn and noise.kind != "none":
            spread = max(sum(s for _, _, s in parts) / m, 1e-300)
            scales = np.full(m, np.sqrt(spread) if gaussian else spread)
        converged = change < tolerance
    return AmpRun(np.asarray(post), iteration, converged)


def decode_blockwise(
    source: PerturbedModels,
    answers: Mapping[int, ArrayLike],
    *,
    n1: int,
    n0: int,
    noise: NoiseModel | None = None,
    prior: NDArray[np.float64] | None = None,
    chunk: int = CHUNK_ROWS,
    workers: int | None = None,
) -> DecodeResult:
    """Recover the attribute from SP answers of regenerated models (Algorithm 2 with AMP).

    ``answers`` maps a batch index of ``source`` to its answers (one per model); batches left
    out (refused) are skipped. The group sizes, the noise and the decision are those of
    :func:`~.decoders.decode_statistical_parity` with ``method="amp"``; the method is reported
    as ``amp_blockwise``. Memory: two float32 blocks of ``chunk`` rows per thread and O(n + m)
    vectors; ``workers`` as for :func:`blockwise_amp`.
    """
    noise = EXACT if noise is None else noise
    order, sp = _answers(source, answers)
    small = 0 if n0 <= n1 else 1
    c = 1.0 / n1 + 1.0 / n0
    k = n0 if small == 0 else n1
    if k < 1 or k >= source.n:
        raise ValueError(BAD_SIZE.format(top=source.n - 1, k=k))
    sweep = _Sweep(source, order, chunk, workers)
    with threadpool_limits(limits=1, user_api="blas"):  # the threads are the parallelism
        mean, norms, row_sums = _moments(sweep)
        # row sums of the models h = offset + scale * w, for eta = H r - SP (Algorithm 2)
        h_sums = float(source.offset.sum()) + source.scale * row_sums
        eta = h_sums / n1 - sp if small == 0 else sp + h_sums / n0
        run = _iterate(
            sweep,
            eta,
            (mean, norms),
            k=k,
            c=c,
            noise=noise,
            prior=prior,
            tolerance=BLOCKWISE_TOLERANCE,
        )
    post = run.posterior
    rate = k / source.n  # Bayes rule for balanced accuracy: small group when P > N_g / n
    in_small = post > rate
    attribute = (in_small if small == 1 else ~in_small).astype(np.int8)
    confidence = np.abs(post - rate) / np.where(in_small, 1.0 - rate, rate)
    right = np.where(in_small, post, 1.0 - post)
    return DecodeResult(attribute, confidence, post * c, "amp_blockwise", right)
