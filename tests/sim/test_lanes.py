"""Lanes: worker processes with a queue each, so that the jobs of a group (the sweep points of
one data draw) run where the group's other jobs ran, and share that process's caches."""

from __future__ import annotations

import os
import time

import pytest

from biasleak.sim.executors import Lanes, pool, run_each


def _where(tag: str, seconds: float = 0.0) -> tuple[str, int]:
    time.sleep(seconds)
    return tag, os.getpid()


def _run(groups: list[str], seconds: list[float]) -> list[tuple[str, int]]:
    done: list[tuple[str, int]] = []
    with pool("process", workers=2) as executor:
        assert isinstance(executor, Lanes)
        jobs = [(f"{g}{k}", s) for k, (g, s) in enumerate(zip(groups, seconds, strict=True))]
        run_each(executor, _where, jobs, keep=done.append, groups=groups)
    return done


def test_the_jobs_of_a_group_run_in_one_process_when_groups_are_balanced() -> None:
    groups = ["a", "b", "a", "b", "a", "b", "a", "b"]
    done = _run(groups, [0.05] * 8)
    assert sorted(tag for tag, _ in done) == sorted(f"{g}{k}" for k, g in enumerate(groups))
    by_group: dict[str, set[int]] = {}
    for tag, pid in done:
        by_group.setdefault(tag[0], set()).add(pid)
    assert all(len(pids) == 1 for pids in by_group.values())
    assert by_group["a"] != by_group["b"]  # the two groups ran side by side


def test_a_lane_shares_the_last_group_rather_than_wait() -> None:
    """One group of six: both processes work on it (nobody waits while jobs are left)."""
    done = _run(["a"] * 6, [0.2] * 6)
    assert len({pid for _, pid in done}) == 2
    assert len(done) == 6


def test_every_job_runs_once_with_groups_of_every_size() -> None:
    groups = ["a"] * 5 + ["b"] + ["c"] * 3 + ["d"] * 2
    done = _run(groups, [0.01] * len(groups))
    assert sorted(tag for tag, _ in done) == sorted(f"{g}{k}" for k, g in enumerate(groups))


def test_groups_must_name_one_group_per_job() -> None:
    with pool("process", workers=2) as executor, pytest.raises(ValueError, match="one group"):
        run_each(executor, _where, [("x",), ("y",)], keep=lambda _: None, groups=["a"])


def test_a_plain_submit_goes_to_the_least_loaded_lane() -> None:
    with pool("process", workers=2) as executor:
        assert isinstance(executor, Lanes)
        slow = executor.submit(_where, "slow", 0.5)
        quick = executor.submit(_where, "quick")
        assert quick.result()[1] != slow.result()[1]  # not queued behind the slow job
