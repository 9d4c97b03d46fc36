"""Lanes: worker processes with a queue each, so that the jobs of a group (the sweep points of
one data draw) run where the group's other jobs ran, and share that process's caches."""

from __future__ import annotations

import os
import time

import pytest

from biasleak.sim.executors import Dispatch, Lanes, pool, run_each


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


def test_a_free_lane_keeps_to_its_group_then_takes_a_free_one_then_shares() -> None:
    """Which job each lane gets, whatever the timing: its own group's while any is left, then
    the first group nobody works on, then the largest group (shared rather than wait)."""
    keys = ["a", "b", "a", "b", "a", "c", "c", "c", "c"]
    d = Dispatch(keys, 2)
    assert (d.next_job(0), d.next_job(1)) == (0, 1)  # lane 0 takes a, lane 1 takes b
    assert d.next_job(0) == 2 and d.next_job(0) == 4  # a's jobs stay on lane 0
    assert d.next_job(0) == 5  # a is done: c, which nobody works on
    assert d.next_job(1) == 3  # b's last job stays on lane 1
    assert d.next_job(1) == 6  # b is done and c is lane 0's: lane 1 shares c
    assert [d.next_job(0), d.next_job(1), d.next_job(0)] == [7, 8, None]
    assert d.next_job(1) is None


def test_the_jobs_of_two_groups_all_run_and_in_both_processes() -> None:
    groups = ["a", "b", "a", "b", "a", "b", "a", "b"]
    done = _run(groups, [0.05] * 8)
    assert sorted(tag for tag, _ in done) == sorted(f"{g}{k}" for k, g in enumerate(groups))
    assert len({pid for _, pid in done}) == 2


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
