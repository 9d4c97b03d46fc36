"""Run logs: line rendering, batched writing, and whole lines on disk whatever happens to a run.

The reference rendering is written out here with :func:`json.dumps` on the plain-JSON form of a
record; the files on disk are read back byte for byte, also after a process dies midway.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biasleak.sim import runlog
from biasleak.sim.runlog import FLUSH_EVERY_CHARS, FLUSH_EVERY_EVENTS, RunLog, dumps, read_log


def reference_line(record: dict[str, Any]) -> str:
    """One line as a newcomer would write it: plain JSON, sorted keys, no spaces."""
    return json.dumps(
        runlog.jsonable(record), sort_keys=True, separators=(",", ":"), allow_nan=False
    )


def disk_lines(path: Path) -> list[str]:
    """The file's lines, checking that every one of them is complete and valid JSON."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(os.linesep.encode())
    lines = data.decode("utf-8").split(os.linesep)[:-1] if data else []
    for line in lines:
        json.loads(line)
    return lines


def open_log(path: Path, clock: list[float] | None = None) -> RunLog:
    now = clock if clock is not None else [0.0]
    return RunLog(path, header={"scenario": "test", "seed": 1}, clock=lambda: now[0])


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.floats(width=32).map(np.float32)
    | st.integers(-1000, 1000).map(np.int64)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5) | st.integers(0, 9), inner, max_size=4)
        | st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4).map(np.array)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(record=st.dictionaries(st.text(max_size=6), values, max_size=6))
def test_lines_render_as_plain_json_with_sorted_keys(record: dict[str, Any]) -> None:
    assert dumps(record) == reference_line(record)


def test_events_carry_sequence_time_level_and_agent(tmp_path: Path) -> None:
    clock = [0.0]
    log = open_log(tmp_path / "run.jsonl", clock)
    dev = log.logger("dev")
    dev.info("query_sent", query_id="dev-1", values=np.array([0.5, math.inf]))
    clock[0] = 2.5
    dev.error("strategy_error", during="setup")
    log.close({"answered": 0})
    lines = disk_lines(tmp_path / "run.jsonl")
    assert lines[1] == reference_line(
        {
            "agent": "dev",
            "event": "query_sent",
            "level": "info",
            "query_id": "dev-1",
            "seq": 1,
            "t": 0.0,
            "values": [0.5, "inf"],
        }
    )
    assert json.loads(lines[2]) == {
        "agent": "dev",
        "during": "setup",
        "event": "strategy_error",
        "level": "error",
        "seq": 2,
        "t": 2.5,
    }
    assert json.loads(lines[3]) == {"event": "summary", "seq": 3, "summary": {"answered": 0}}
    assert [e["seq"] for e in read_log(tmp_path / "run.jsonl")] == [0, 1, 2, 3]


def test_lines_are_written_in_batches_of_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = open_log(path)
    assert len(disk_lines(path)) == 1  # the header is there at once
    dev = log.logger("dev")
    for i in range(FLUSH_EVERY_EVENTS - 1):
        dev.info("tick", i=i)
    assert len(disk_lines(path)) == 1  # still waiting in memory
    dev.info("tick", i=-1)  # a full batch
    assert len(disk_lines(path)) == 1 + FLUSH_EVERY_EVENTS
    for i in range(3 * FLUSH_EVERY_EVENTS + 5):
        dev.info("tick", i=i)
        assert (len(disk_lines(path)) - 1) % FLUSH_EVERY_EVENTS == 0
    assert len(disk_lines(path)) == 1 + 4 * FLUSH_EVERY_EVENTS
    log.close({})
    assert len(disk_lines(path)) == 1 + 4 * FLUSH_EVERY_EVENTS + 5 + 1


def test_large_events_are_written_before_the_batch_is_full(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = open_log(path)
    dev = log.logger("dev")
    big = "x" * (FLUSH_EVERY_CHARS // 3)
    for _ in range(2):
        dev.info("big", payload=big)
    assert len(disk_lines(path)) == 1  # two thirds of the size limit: still waiting
    dev.info("big", payload=big)  # the third passes the size limit: the batch is written
    assert len(disk_lines(path)) == 4  # the header and three events, far below the count
    dev.info("big", payload=big)
    assert len(disk_lines(path)) == 4  # the fourth starts a new batch
    log.abort()
    assert len(disk_lines(path)) == 5


def test_a_reader_in_the_process_sees_every_event_so_far(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = open_log(path)
    dev = log.logger("dev")
    for i in range(10):
        dev.info("tick", i=i)
    assert [e.get("i") for e in read_log(path)][1:] == list(range(10))
    dev.info("tick", i=10)
    log.close({})
    events = list(read_log(path))
    assert [e.get("i") for e in events[1:-1]] == list(range(11))
    assert events[-1]["event"] == "summary"


def test_abort_writes_every_event_and_closes(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = open_log(path)
    dev = log.logger("dev")
    for i in range(FLUSH_EVERY_EVENTS + 7):
        dev.info("tick", i=i)
    log.abort()
    log.abort()  # a second abort does nothing
    lines = disk_lines(path)
    assert len(lines) == FLUSH_EVERY_EVENTS + 8
    assert json.loads(lines[-1])["i"] == FLUSH_EVERY_EVENTS + 6
    assert not (tmp_path / "run.npz").exists()  # no summary, no side file
    with pytest.raises(ValueError):  # the file is closed: logging more cannot pass unnoticed
        for i in range(FLUSH_EVERY_EVENTS):
            dev.info("late", i=i)


def test_close_writes_the_summary_and_the_side_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = open_log(path)
    log.logger("evaluator").info("estimate", accuracy=0.5)
    log.add_array("estimate", np.arange(4))
    log.close({"answered": 1})
    events = list(read_log(path))
    assert [e["event"] for e in events] == ["header", "estimate", "summary"]
    assert events[0]["arrays"] == "run.npz"
    with np.load(tmp_path / "run.npz") as arrays:
        np.testing.assert_array_equal(arrays["estimate"], np.arange(4))


CHILD = """
import os, signal, sys
from pathlib import Path
from biasleak.sim.runlog import RunLog
log = RunLog(Path(sys.argv[1]), header={{}}, clock=lambda: 0.0)
dev = log.logger("dev")
for i in range({events}):
    dev.info("tick", i=i, payload="y" * (i % 500))
{ending}
"""


@pytest.mark.parametrize(
    ("ending", "all_lines"),
    [
        ("raise RuntimeError('the run crashed')", True),  # no abort(): written at exit
        ("os.kill(os.getpid(), signal.SIGKILL)", False),  # nothing runs: the last batch is lost
    ],
)
def test_a_dying_process_leaves_only_whole_lines(
    tmp_path: Path, ending: str, all_lines: bool
) -> None:
    path = tmp_path / "run.jsonl"
    events = 3 * FLUSH_EVERY_EVENTS + 17
    code = textwrap.dedent(CHILD.format(events=events, ending=ending))
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, check=False)
    assert done.returncode != 0
    lines = disk_lines(path)
    if all_lines:
        assert len(lines) == events + 1
    else:
        assert FLUSH_EVERY_EVENTS <= len(lines) <= events
    assert [json.loads(line).get("i") for line in lines[1:]] == list(range(len(lines) - 1))


FORKING = """
import os, sys
from pathlib import Path
from biasleak.sim.runlog import RunLog
log = RunLog(Path(sys.argv[1]), header={}, clock=lambda: 0.0)
dev = log.logger("dev")
for i in range(5):
    dev.info("tick", i=i)
if os.fork() == 0:
    sys.exit(0)  # a child exiting normally runs the exit hooks with a copy of the waiting lines
os.wait()
dev.info("tick", i=5)
log.close({})
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_write_the_parents_lines_again(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    subprocess.run([sys.executable, "-c", FORKING, str(path)], check=True)
    events = [json.loads(line) for line in disk_lines(path)]
    assert [e["seq"] for e in events] == list(range(8))


# --- one writer per file ----------------------------------------------------------------------


def test_a_second_writer_of_one_name_gets_its_own_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    first = open_log(path)
    second = open_log(path)  # the first still holds the file
    assert first.path == path
    assert second.path == tmp_path / "run-run2.jsonl"
    assert second.arrays_path == tmp_path / "run-run2.npz"
    first.logger("dev").info("tick", i=1)
    second.logger("dev").info("tick", i=2)
    assert [e.get("i") for e in read_log(path)] == [None, 1]  # the name asked for: its own run
    first.close({"n": 1})
    second.close({"n": 2})
    for log, i in ((path, 1), (second.path, 2)):
        events = list(read_log(log))
        assert [e["event"] for e in events] == ["header", "tick", "summary"]
        assert events[0]["arrays"] == log.with_suffix(".npz").name
        assert events[1]["i"] == i and events[2]["summary"] == {"n": i}
        assert log.with_suffix(".npz").is_file()
    again = open_log(path)  # both finished: the name is free, and a new run replaces the log
    assert again.path == path
    again.close({})
    assert [e["event"] for e in read_log(path)] == ["header", "summary"]
    assert not list(tmp_path.glob("*.part"))


HOLDER = """
import sys
from pathlib import Path
from biasleak.sim.runlog import RunLog
log = RunLog(Path(sys.argv[1]), header={"who": "child"}, clock=lambda: 0.0)
log.logger("dev").info("tick", who="child")
print(log.path, flush=True)
sys.stdin.readline()  # hold the file until the parent says
log.close({"who": "child"})
"""


def test_a_writer_in_another_process_is_not_shared(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline().strip() == str(path)
            mine = RunLog(path, header={"who": "parent"}, clock=lambda: 0.0)
            assert mine.path == tmp_path / "run-run2.jsonl"
            mine.logger("dev").info("tick", who="parent")
            mine.close({"who": "parent"})
            child.stdin.write("done\n")
            child.stdin.flush()
            assert child.wait(timeout=60) == 0
        finally:
            child.kill()
    for log, who in ((path, "child"), (tmp_path / "run-run2.jsonl", "parent")):
        events = [json.loads(line) for line in disk_lines(log)]
        assert [e.get("who") for e in events[:2]] == [who, who]
        assert events[-1]["summary"] == {"who": who}


def test_a_name_too_long_is_cut_with_a_hash(tmp_path: Path) -> None:
    long_a, long_b = "a" * 299 + "x", "a" * 299 + "y"
    assert runlog.log_stem("short-seed0") == "short-seed0"
    first = open_log(tmp_path / f"{long_a}.jsonl")
    second = open_log(tmp_path / f"{long_b}.jsonl")
    assert first.path != second.path  # distinct names stay distinct
    for log in (first, second):
        assert len(log.path.stem.encode()) == runlog.LOG_NAME_BYTES
        assert log.path.stem.startswith("a" * 100)
        log.close({})
    assert next(read_log(first.path))["arrays"] == first.arrays_path.name
    cut = runlog.log_stem("é" * 150)  # 300 bytes: cut between characters, never inside one
    assert len(cut.encode("utf-8")) <= runlog.LOG_NAME_BYTES and cut.startswith("é" * 50)


# --- limits -----------------------------------------------------------------------------------


def test_max_events_refuses_the_event_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = RunLog(path, header={}, clock=lambda: 0.0, max_events=FLUSH_EVERY_EVENTS + 3)
    dev = log.logger("dev")
    for i in range(FLUSH_EVERY_EVENTS + 3):
        dev.info("tick", i=i)
    with pytest.raises(runlog.LogLimitExceeded) as caught:
        dev.info("tick", i=-1)
    err = caught.value
    assert isinstance(err, ValueError)
    assert (err.key, err.limit, err.reached) == (
        "limits.max_events",
        FLUSH_EVERY_EVENTS + 3,
        FLUSH_EVERY_EVENTS + 4,
    )
    assert "limits.max_events" in str(err) and str(FLUSH_EVERY_EVENTS + 3) in str(err)
    log.abort()
    lines = disk_lines(path)  # whole lines, the refused event not among them
    assert len(lines) == 1 + FLUSH_EVERY_EVENTS + 3
    assert [json.loads(line)["seq"] for line in lines] == list(range(len(lines)))


def test_max_bytes_refuses_the_event_that_would_pass_it(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    limit = 3 * FLUSH_EVERY_CHARS
    log = RunLog(path, header={}, clock=lambda: 0.0, max_bytes=limit)
    dev = log.logger("dev")
    with pytest.raises(runlog.LogLimitExceeded) as caught:
        for i in range(10_000):
            dev.info("big", i=i, payload="z" * 1000)
    err = caught.value
    assert err.key == "limits.max_log_mb" and err.limit == limit and err.reached > limit
    assert "limits.max_log_mb" in str(err) and str(err.reached) in str(err)
    log.abort()
    size = path.stat().st_size
    assert limit - 1100 < size <= limit  # the last event that fitted is there, no more
    events = [json.loads(line) for line in disk_lines(path)]
    assert [e.get("i") for e in events[1:]] == list(range(len(events) - 1))


def test_no_limit_by_default(tmp_path: Path) -> None:
    log = open_log(tmp_path / "run.jsonl")
    dev = log.logger("dev")
    for i in range(3 * FLUSH_EVERY_EVENTS):
        dev.info("tick", i=i)
    log.close({})
    assert len(disk_lines(tmp_path / "run.jsonl")) == 3 * FLUSH_EVERY_EVENTS + 2


# --- malformed logs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("[1]", "not a JSON object but an array"),
        ("null", "not a JSON object but null"),
        ("true", "not a JSON object but a boolean"),
        ("{oops", "not valid JSON: Expecting property name enclosed in double quotes (column 2)"),
    ],
)
def test_read_log_names_the_file_line_of_a_bad_line(tmp_path: Path, bad: str, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"event": "header"}\n{"event": "a"}\n' + bad + "\n{}\n", encoding="utf-8")
    with pytest.raises(runlog.LogFormatError) as caught:
        list(read_log(path))
    assert caught.value.line == 3
    assert str(caught.value) == f"line 3: {problem}"


def test_side_file_is_an_npz_with_the_same_bytes_whatever_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io
    import time as time_module

    from biasleak.sim.runlog import write_arrays

    arrays = {
        "estimate/mallory": np.array([1, 0, 1], dtype=np.int8),
        "exposure/acme/flip/counts": np.arange(12, dtype=np.int32).reshape(3, 4),
    }
    first = io.BytesIO()
    write_arrays(first, arrays)
    monkeypatch.setattr(time_module, "time", lambda: 2_000_000_000.0)  # another day
    second = io.BytesIO()
    write_arrays(second, arrays)
    assert first.getvalue() == second.getvalue()
    first.seek(0)
    with np.load(first) as loaded:
        assert sorted(loaded.files) == sorted(arrays)
        for name, value in arrays.items():
            np.testing.assert_array_equal(loaded[name], value)
            assert loaded[name].dtype == value.dtype
