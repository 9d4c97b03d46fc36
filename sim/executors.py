"""Executors: where a command's independent runs go, and how they stop when asked to.

A sweep's runs, a red team's worlds and a ``run`` with ``--workers`` are independent jobs handed
to a :class:`concurrent.futures.Executor`: a local process pool, or Dask distributed
(``Client.get_executor()``, optional extra ``biasleak[dask]``) for a cluster. :func:`pool` is the
one place that opens such an executor and closes it again::

    with pool("process", workers=4) as executor:  # None when one worker: run here
        result = run_sweep(path, out=out, executor=executor, workers=4)

Leaving the block normally waits for the executor's work, as ``with ProcessPoolExecutor()`` does.
Leaving it by an exception, Ctrl-C above all, stops everything at once: pending jobs are
cancelled, the pool is shut down without waiting for queued jobs, and workers that are still in
the middle of a run are killed. A run cut short that way leaves its log without a summary line,
which ``biasleak replay`` reports as truncated; nothing else is lost, because every finished
run's record was written when it finished.

A terminal's Ctrl-C sends SIGINT to the whole process group, workers included. Workers of
:func:`make_executor`'s process pool ignore SIGINT, so the stopping is left to the main process
(otherwise each worker would turn the interrupt into a failed job and go on with the next one).
SIGTERM, which ``kill`` and service managers send, stops a command the same way as Ctrl-C while
:func:`terminate_as_interrupt` is active: it raises :class:`Terminated`, a
:class:`KeyboardInterrupt`, in the main process.

Native thread pools. NumPy's BLAS and OpenMP start one thread per core by default; W workers
on C cores with C threads each fight over the cores (model fits ran ten times slower, and two
workers were slower than one). Every worker of :func:`make_executor` (the process pool and a
local Dask cluster) limits its native pools to its share of the cores, ``max(1, C // W)``
(:func:`native_threads`): through the environment, before a library loads, and through
threadpoolctl for the ones already loaded.
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    as_completed,
    wait,
)
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from biasleak.sim._optional import MissingExtra, require

__all__ = [
    "Dispatch",
    "ExecutorKind",
    "Lanes",
    "Terminated",
    "close_executor",
    "make_executor",
    "native_threads",
    "pool",
    "run_each",
    "shielded",
    "stop_executor",
    "terminate_as_interrupt",
]

ExecutorKind = Literal["process", "dask"]

T = TypeVar("T")

UNKNOWN_EXECUTOR = "executor must be 'process' or 'dask'; received {kind!r}"

JOIN_SECONDS = 10.0
"""How long stopping waits for a killed worker to be reaped."""

DASK_CONNECT_SECONDS = 10.0
"""How long connecting to a Dask scheduler (``--address``) may take before it is given up."""
DASK_UNREACHABLE = "cannot reach the Dask scheduler at {address!r}: {reason}"


class Terminated(KeyboardInterrupt):
    """SIGTERM in the main process, raised where Ctrl-C would raise :class:`KeyboardInterrupt`."""


def _worker_signals() -> None:
    """Initializer of pool workers: the main process decides when they stop.

    SIGINT is ignored (a terminal sends it to every process of the group); SIGTERM gets its
    default action back, in case the worker inherited the main process's handler by forking.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


NATIVE_THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
"""Environment variables that native libraries read for their thread counts when they load."""


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def native_threads(workers: int) -> int:
    """Native threads for each of ``workers`` processes sharing this machine's cores."""
    return max(1, cores() // max(1, workers))


def limit_native_threads(threads: int) -> None:
    """Limit this process's native thread pools (BLAS, OpenMP) to ``threads``: the environment
    for libraries loaded later, threadpoolctl for those already loaded."""
    for name in NATIVE_THREAD_VARIABLES:
        os.environ[name] = str(threads)
    import numpy  # noqa: F401  (loads the BLAS, so that the limit reaches it)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)


def _worker_init(threads: int) -> None:
    """Initializer of pool workers: signals (:func:`_worker_signals`) and native threads."""
    _worker_signals()
    limit_native_threads(threads)


class Lanes(Executor):
    """Worker processes with a queue each, so that related jobs run in the same process.

    A job of a group (e.g. the sweep points of one data draw) goes, when it can, to the process
    that ran the group's other jobs, and finds there what they left in the per-process caches
    (the data, the base model, the fitted candidates); :func:`run_each` hands out the jobs one
    per lane at a time and a lane with nothing left of its group takes a group nobody works on,
    or shares the largest one rather than wait. A plain :meth:`submit` goes to the lane with the
    fewest jobs.
    """

    def __init__(self, workers: int, threads: int) -> None:
        self.lanes = [
            ProcessPoolExecutor(max_workers=1, initializer=_worker_init, initargs=(threads,))
            for _ in range(workers)
        ]
        self._given: list[list[Future[Any]]] = [[] for _ in range(workers)]

    def _load(self, lane: int) -> int:
        """Jobs of ``lane`` not finished yet (the finished ones are forgotten)."""
        self._given[lane] = [f for f in self._given[lane] if not f.done()]
        return len(self._given[lane])

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        lane = min(range(len(self.lanes)), key=self._load)
        return self.submit_to(lane, fn, *args, **kwargs)

    def submit_to(self, lane: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` in lane ``lane``'s process."""
        future = self.lanes[lane].submit(fn, *args, **kwargs)
        self._given[lane].append(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for lane in self.lanes:
            lane.shutdown(wait=wait, cancel_futures=cancel_futures)


def make_executor(
    kind: ExecutorKind | str, *, workers: int, address: str | None = None
) -> tuple[Executor, Any]:
    """An executor and the Dask client behind it (or None).

    Release both with :func:`close_executor` (wait for the work) or :func:`stop_executor` (drop
    it); a local Dask cluster is closed with its client. Raises :class:`ValueError` for an
    unknown kind, when the Dask extra is missing (the message names the extra), or when the
    scheduler at ``address`` cannot be reached within :data:`DASK_CONNECT_SECONDS` (or the
    address cannot be one).
    """
    threads = native_threads(workers)
    if kind == "process":
        return Lanes(workers, threads), None
    if kind == "dask":
        try:
            distributed = require("distributed")
        except MissingExtra as err:
            raise ValueError(str(err)) from None
        if address:
            try:
                client = distributed.Client(address, timeout=DASK_CONNECT_SECONDS)
            except Exception as err:  # whatever stops the connection: one line
                reason = str(err) or type(err).__name__
                raise ValueError(DASK_UNREACHABLE.format(address=address, reason=reason)) from None
        else:
            client = distributed.Client(
                distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    env={name: str(threads) for name in NATIVE_THREAD_VARIABLES},
                )
            )
            client.run(limit_native_threads, threads)
        return client.get_executor(), client
    raise ValueError(UNKNOWN_EXECUTOR.format(kind=kind))


def _close_client(client: Any) -> None:
    if client is not None:
        cluster = getattr(client, "cluster", None)
        client.close()
        if cluster is not None:
            cluster.close()


def close_executor(executor: Executor | None, client: Any = None) -> None:
    """Shut an executor down after its work, and close a Dask client and its local cluster."""
    if executor is not None:
        executor.shutdown()
    _close_client(client)


def stop_executor(executor: Executor | None, client: Any = None) -> None:
    """Drop an executor's work now: cancel what has not started, kill workers that are mid-run.

    A process pool's workers are killed (SIGKILL: a run cut short keeps the whole lines its log
    has); a Dask executor's futures are cancelled and its client and local cluster closed.
    """
    if executor is None:
        _close_client(client)
        return
    if isinstance(executor, Lanes):
        for lane in executor.lanes:
            stop_executor(lane)
        _close_client(client)
        return
    with shielded():
        # the pool forgets its processes on shutdown: take them first
        processes = list((getattr(executor, "_processes", None) or {}).values())
        manager = getattr(executor, "_executor_manager_thread", None)
        try:
            executor.shutdown(wait=False, cancel_futures=True)
        except TypeError:  # Dask's executor: shutting down without waiting cancels
            executor.shutdown(wait=False)
        for process in processes:
            if process.is_alive():
                process.kill()
        for process in processes:
            process.join(JOIN_SECONDS)
        if manager is not None:  # it notices the dead workers and fails their futures
            manager.join(JOIN_SECONDS)
        _close_client(client)


@contextmanager
def pool(
    kind: ExecutorKind | str, *, workers: int, address: str | None = None
) -> Iterator[Executor | None]:
    """An executor for the block (None for one local worker: the caller runs jobs itself).

    The block ending normally closes the executor after its work (:func:`close_executor`); an
    exception, :class:`KeyboardInterrupt` included, stops it at once (:func:`stop_executor`)
    and goes on.
    """
    if kind == "process" and workers <= 1:
        yield None
        return
    executor, client = make_executor(kind, workers=workers, address=address)
    try:
        yield executor
    except BaseException:
        stop_executor(executor, client)
        raise
    close_executor(executor, client)


def run_each(
    executor: Executor,
    fn: Callable[..., T],
    jobs: Sequence[tuple[Any, ...]],
    *,
    keep: Callable[[T], None],
    started: Callable[[int], None] | None = None,
    groups: Sequence[Hashable] | None = None,
) -> None:
    """Run ``fn(*job)`` for every job through the executor and ``keep`` each result as its job
    finishes (in the order they finish); ``started`` is told how many jobs were submitted.

    On :class:`Lanes`, jobs are handed out one per lane at a time, a job going where the other
    jobs of its group (``groups``, one key per job; each job its own group without it) ran; on
    any other executor every job is submitted at once.

    When anything stops the loop (Ctrl-C above all), the jobs not yet started are cancelled and
    the results of jobs that finished meanwhile are kept before the exception goes on; stopping
    the workers that are mid-run is the executor's owner's part (:func:`pool`).
    """
    futures: list[Future[T]] = []
    kept: set[Future[T]] = set()
    try:
        if isinstance(executor, Lanes):
            _run_lanes(executor, fn, jobs, groups, keep, started, futures, kept)
            return
        for job in jobs:
            futures.append(executor.submit(fn, *job))
        if started is not None:
            started(len(futures))
        for future in as_completed(futures):
            # marked first: a stop that lands while keep() runs (after it wrote the result)
            # must not make the handler below keep the same result again
            kept.add(future)
            keep(future.result())
    except BaseException:
        with shielded():
            for future in futures:
                future.cancel()
            for future in futures:  # finished before the stop, not yet kept
                if future in kept or not future.done() or future.cancelled():
                    continue
                if future.exception() is None:
                    keep(future.result())
        raise


class Dispatch:
    """Which job a free lane runs next: one of its group's, else the first group nobody works
    on, else one of the largest group's (shared rather than wait); ``None`` when none is left."""

    def __init__(self, keys: Sequence[Hashable], lanes: int) -> None:
        self.waiting: dict[Hashable, deque[int]] = {}
        for index, key in enumerate(keys):
            self.waiting.setdefault(key, deque()).append(index)
        self.working: list[Hashable | None] = [None] * lanes
        """The group each lane works on."""

    def next_job(self, lane: int) -> int | None:
        own = self.working[lane]
        if own is None or not self.waiting.get(own):
            busy = {g for k, g in enumerate(self.working) if k != lane}
            left = [g for g, q in self.waiting.items() if q]
            if not left:
                return None
            free = [g for g in left if g not in busy]
            own = free[0] if free else max(left, key=lambda g: len(self.waiting[g]))
            self.working[lane] = own
        return self.waiting[own].popleft()


def _run_lanes(
    lanes: Lanes,
    fn: Callable[..., T],
    jobs: Sequence[tuple[Any, ...]],
    groups: Sequence[Hashable] | None,
    keep: Callable[[T], None],
    started: Callable[[int], None] | None,
    futures: list[Future[T]],
    kept: set[Future[T]],
) -> None:
    """:func:`run_each` on lanes: one job in flight per lane, chosen by group."""
    keys = list(groups) if groups is not None else list(range(len(jobs)))
    if len(keys) != len(jobs):
        raise ValueError(f"groups must name one group per job ({len(jobs)}); got {len(keys)}")
    dispatch = Dispatch(keys, len(lanes.lanes))
    lane_of: dict[Future[T], int] = {}

    def hand_out(lane: int) -> None:
        index = dispatch.next_job(lane)
        if index is not None:
            future = lanes.submit_to(lane, fn, *jobs[index])
            futures.append(future)
            lane_of[future] = lane

    for lane in range(len(lanes.lanes)):
        hand_out(lane)
    if started is not None:
        started(len(lane_of))
    while lane_of:
        done, _ = wait(list(lane_of), return_when=FIRST_COMPLETED)
        for future in done:
            lane = lane_of.pop(future)
            kept.add(future)  # marked first, as in run_each
            keep(future.result())
            hand_out(lane)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


@contextmanager
def shielded() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM for the block (in the main thread), so that a second Ctrl-C
    cannot cut short the stopping and the writing of what finished. Handlers come back after."""
    if not _in_main_thread():
        yield
        return
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _raise_terminated(signum: int, _frame: Any) -> None:
    raise Terminated(f"signal {signal.Signals(signum).name}")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """For the block, SIGTERM raises :class:`Terminated` in the main process, as Ctrl-C raises
    :class:`KeyboardInterrupt`; the previous handler comes back after. Outside the main thread
    (where Python cannot set handlers) it does nothing."""
    if not _in_main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
