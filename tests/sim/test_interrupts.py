"""Ctrl-C and SIGTERM: commands stop at once, keep what finished, and leave no worker behind.

Each test starts a real ``python -m biasleak.sim`` command in its own session (its own process
group, as a terminal's foreground job is), waits until it has done some work, then sends the
signal to the whole group, as a terminal's Ctrl-C does. Scenarios are tiny (a run takes a fraction
of a second), and every wait is bounded.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from worlds import tiny_world

from biasleak.sim.cli import main
from biasleak.sim.executors import pool

TINY = tiny_world(grid="  seeds: 12\n")
"""A sweep of 12 runs of a fraction of a second each."""

LONG = """\
name: {name}
seed: 1
horizon_days: 400
data: {{dataset: synthetic, n: 400, minority: 40}}
developers:
  - id: mallory
    organization: acme
    strategy: {{kind: compressed_sensing, queries: {queries}, batch: 1, prepare_hours: 0.1}}
compliance:
  metrics: [sp]
  answer_hours: 0.01
  policy:
    - {{kind: noise, mechanism: laplace, epsilon: 10.0, per: batch}}
"""
"""One attacker sending one model per query: a log that grows for a long time (many queries)."""

WAIT_SECONDS = 60.0
"""The longest any step waits (starting Python and the first run on a loaded machine)."""


def _start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "biasleak.sim", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, with the workers it starts
    )


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not ready():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the command ended (rc {proc.returncode}) before the signal:\n{err}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail("the command did not get under way in time")
        time.sleep(0.02)


def _lines(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("\n") if path.exists() else 0


def _stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[str, str]:
    """Send ``sig`` to the command's process group; its output once it has ended."""
    os.killpg(proc.pid, sig)
    try:
        return proc.communicate(timeout=WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the command did not stop after {sig.name}")


def _group_is_gone(pgid: int) -> bool:
    """No process of the group is left (workers included), after a short grace period."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


SIGNALS = [signal.SIGINT, signal.SIGTERM]
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)"}


@pytest.mark.parametrize(
    ("sig", "workers"),
    [(signal.SIGINT, 2), (signal.SIGTERM, 2), (signal.SIGINT, 1)],
    ids=["sigint-pool", "sigterm-pool", "sigint-serial"],
)
@pytest.mark.slow
def test_a_stopped_sweep_keeps_what_finished_and_resumes_the_rest(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sig: signal.Signals,
    workers: int,
) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY, encoding="utf-8")
    args = ["sweep", "tiny.yaml", "--out", "out", "--workers", str(workers)]
    record = tmp_path / "out" / "results.jsonl"
    proc = _start(*args, cwd=tmp_path)
    _wait_until(lambda: _lines(record) >= 1, proc)
    out, err = _stop(proc, sig)

    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert _group_is_gone(proc.pid), "a worker of the stopped sweep is still running"
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"biasleak sweep: {WORDS[sig]}; "), err
    assert last.endswith(f"resume with the same command: biasleak {' '.join(args)}")
    rows = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    finished = {r["run_id"] for r in rows}
    assert finished, "no run finished before the stop"
    assert len(finished) != 12, "the sweep ran to its end: the signal stopped nothing"
    assert len(rows) == len(finished)  # each finished run recorded once
    assert all(r["status"] == "ok" for r in rows)
    assert f"{len(finished)} run" in last
    table = _csv_rows(tmp_path / "out" / "results.csv")
    assert {r["run_id"] for r in table} == finished  # written for what finished

    # the same command again runs only the rest
    monkeypatch.chdir(tmp_path)
    assert main(args) == 0
    printed = capsys.readouterr().out
    rest = 12 - len(finished)
    assert f"12 runs: {len(finished)} already done, {rest} ok, 0 failed" in printed
    again = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert len(again) == 12 and len({r["run_id"] for r in again}) == 12  # each run once
    assert len(_csv_rows(tmp_path / "out" / "results.csv")) == 12


@pytest.mark.parametrize("sig", SIGNALS, ids=["sigint", "sigterm"])
@pytest.mark.slow
def test_a_stopped_run_leaves_a_log_that_replay_calls_truncated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sig: signal.Signals
) -> None:
    (tmp_path / "long.yaml").write_text(LONG.format(name="long", queries=100000), encoding="utf-8")
    log = tmp_path / "logs" / "long-seed1.jsonl"
    proc = _start("run", "long.yaml", "--log-dir", "logs", cwd=tmp_path)
    _wait_until(lambda: _lines(log) >= 20, proc)
    out, err = _stop(proc, sig)

    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert err.strip() == (
        f"biasleak run: {WORDS[sig]}; a run that was under way left its log without a summary line"
    )
    assert _group_is_gone(proc.pid)
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()[:-1]]
    assert events[0]["event"] == "header" and events[-1]["event"] != "summary"

    assert main(["replay", str(log)]) == 1
    replayed = capsys.readouterr()
    assert "truncated" in replayed.err and "no summary line" in replayed.err
    assert "scenario long (seed 1)" in replayed.out  # the summary rebuilt from what is there


@pytest.mark.parametrize("sig", SIGNALS, ids=["sigint", "sigterm"])
@pytest.mark.slow
def test_a_stopped_compare_writes_the_rows_that_finished(
    tmp_path: Path, sig: signal.Signals
) -> None:
    (tmp_path / "short.yaml").write_text(LONG.format(name="short", queries=5), encoding="utf-8")
    (tmp_path / "long.yaml").write_text(LONG.format(name="long", queries=100000), encoding="utf-8")
    log = tmp_path / "logs" / "long-seed1.jsonl"
    args = ["compare", "short.yaml", "long.yaml", "--csv", "rows.csv", "--log-dir", "logs"]
    proc = _start(*args, cwd=tmp_path)
    _wait_until(lambda: _lines(log) >= 20, proc)
    out, err = _stop(proc, sig)

    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert err.strip() == (
        f"biasleak compare: {WORDS[sig]}; 1 of 2 runs finished (rows: rows.csv); "
        "a run that was under way left its log without a summary line"
    )
    assert _group_is_gone(proc.pid)
    rows = _csv_rows(tmp_path / "rows.csv")
    assert [r["scenario"] for r in rows] == ["short"]
    assert _lines(tmp_path / "logs" / "short-seed1.jsonl") > 0


def test_pool_kills_its_workers_when_the_block_is_interrupted() -> None:
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt), pool("process", workers=2) as executor:
        assert executor is not None
        worker = executor.submit(os.getpid).result(timeout=WAIT_SECONDS)
        busy = [executor.submit(time.sleep, 120.0) for _ in range(4)]
        time.sleep(0.2)  # let the workers take the long jobs
        raise KeyboardInterrupt
    assert time.monotonic() - start < WAIT_SECONDS  # it did not wait for the long jobs
    assert all(f.cancelled() or f.done() for f in busy)
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)  # killed and reaped


def test_one_local_worker_needs_no_pool() -> None:
    with pool("process", workers=1) as executor:
        assert executor is None


def test_a_stop_during_keep_does_not_keep_the_same_result_twice() -> None:
    """A signal that lands inside ``keep`` (after it recorded the result) ends the loop; the
    handler keeps the other finished results, never that one again."""
    from concurrent.futures import ThreadPoolExecutor

    from biasleak.sim.executors import run_each

    kept: list[int] = []

    def keep(value: int) -> None:
        kept.append(value)
        if len(kept) == 1:
            raise KeyboardInterrupt  # as a Ctrl-C right after the row was written

    with ThreadPoolExecutor(max_workers=2) as executor, pytest.raises(KeyboardInterrupt):
        run_each(executor, lambda k: k, [(k,) for k in range(4)], keep=keep)
    assert len(kept) == len(set(kept))
    assert kept[0] in range(4)
