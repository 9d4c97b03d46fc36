"""The composition engine runs its matrix products on one BLAS thread (the same bits on any
machine), on every call, with the thread pools looked up once."""

from __future__ import annotations

import threadpoolctl

from biasleak.mechanisms.ceiling import _engine


def test_every_call_runs_on_one_blas_thread() -> None:
    seen: list[list[int]] = []

    def threads() -> None:
        info = threadpoolctl.threadpool_info()
        seen.append([pool["num_threads"] for pool in info if pool["user_api"] == "blas"])

    limited = _engine._one_blas_thread(threads)
    limited()
    limited()
    assert len(seen) == 2 and seen[0] and all(t == [1] * len(t) for t in seen)
    assert len(_engine._CONTROLLERS) == 1
