"""Outputs: checked before any run, logs under unique names, compare labels, replay of bad logs.

Every check goes through ``biasleak.sim.cli.main`` as a user would; the two concurrent writers of
one log name are two real ``biasleak run`` processes. Scenarios are tiny (a run takes a fraction
of a second).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from worlds import tiny_world

from biasleak.sim import executors
from biasleak.sim.cli import main
from biasleak.sim.runlog import LOG_NAME_BYTES

SLOWER = """\
name: twice
seed: 1
horizon_days: 400
data: {dataset: synthetic, n: 400, minority: 40}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 100, batch: 1, prepare_hours: 0.1}
compliance:
  metrics: [sp]
  answer_hours: 0.01
  policy:
    - {kind: noise, mechanism: laplace, epsilon: 10.0, per: batch}
"""
"""One model per query: a run long enough (a second or two) for two writers to overlap."""


def _scenario(
    folder: Path,
    stem: str = "tiny",
    *,
    name: str = "tiny",
    mechanism: str = "attribute_conceal",
    epsilon: float = 10.0,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.yaml"
    path.write_text(
        tiny_world(name, mechanism=mechanism, epsilon=epsilon, grid="  seeds: 2\n"),
        encoding="utf-8",
    )
    return path


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.strip()]


def _files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*")) if folder.exists() else []


# --- output folders checked before any run ------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "redteam", "compare"])
def test_log_dir_on_a_file_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    scenario = _scenario(tmp_path)
    blocker = tmp_path / "logs.txt"
    blocker.write_text("not a folder", encoding="utf-8")
    assert main([command, str(scenario), "--log-dir", str(blocker)]) == 2
    assert _err_lines(capsys) == [f"--log-dir {blocker}: is a file, not a folder"]
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_log_dir_below_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _scenario(tmp_path)
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert main(["run", str(scenario), "--log-dir", str(tmp_path / "file" / "logs")]) == 2
    (line,) = _err_lines(capsys)
    assert line.startswith(f"--log-dir {tmp_path / 'file' / 'logs'}: cannot write there (")


def test_an_unwritable_log_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = _scenario(tmp_path)
    logs = tmp_path / "logs"

    def refuse(*_args: Any, **_kwargs: Any) -> Any:  # what a read-only folder answers
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    assert main(["run", str(scenario), "--log-dir", str(logs)]) == 2
    assert _err_lines(capsys) == [f"--log-dir {logs}: cannot write there (Permission denied)"]
    assert not list(logs.iterdir())


def test_sweep_out_on_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = _scenario(tmp_path)
    out = tmp_path / "out"
    out.write_text("", encoding="utf-8")
    assert main(["sweep", str(scenario), "--out", str(out)]) == 2
    assert _err_lines(capsys) == [f"--out {out}: is a file, not a folder"]


def test_paper_folders_are_checked_before_the_sweeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = tmp_path / "paper"
    _scenario(scenarios, "table1_n100")
    _scenario(scenarios, "table1_n1000")
    (tmp_path / "to").write_text("", encoding="utf-8")
    args = ["paper", "table1", "--scenarios", str(scenarios), "--sweeps", str(tmp_path / "sw")]
    assert main([*args, "--to", str(tmp_path / "to")]) == 2
    assert _err_lines(capsys) == [f"--to {tmp_path / 'to'}: is a file, not a folder"]
    assert not list((tmp_path / "sw").iterdir())  # no sweep ran


def test_csv_into_a_missing_folder_is_made_and_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _scenario(tmp_path)
    rows = tmp_path / "new" / "deeper" / "rows.csv"
    assert main(["compare", str(scenario), "--csv", str(rows), "--log-dir", str(tmp_path)]) == 0
    assert rows.read_text(encoding="utf-8").startswith("scenario,seed,developer")
    assert f"rows: {rows}" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["folder", "below_a_file"])
def test_a_csv_that_cannot_be_written_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    scenario = _scenario(tmp_path)
    logs = tmp_path / "logs"
    if where == "folder":
        target = tmp_path / "a_folder"
        target.mkdir()
        expected = f"--csv {target}: is a folder; give a file name"
    else:
        (tmp_path / "file").write_text("", encoding="utf-8")
        target = tmp_path / "file" / "rows.csv"
        expected = f"--csv {target}: its folder {tmp_path / 'file'} is a file, not a folder"
    assert main(["compare", str(scenario), "--csv", str(target), "--log-dir", str(logs)]) == 2
    assert _err_lines(capsys) == [expected]
    assert not list(logs.glob("*.jsonl"))  # refused before the first run


# --- long names -----------------------------------------------------------------------------


def test_a_300_character_name_gets_a_log_that_fits_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "n" * 300
    scenario = _scenario(tmp_path, name=name)
    logs = tmp_path / "logs"
    assert main(["run", str(scenario), "--log-dir", str(logs), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    log = Path(summary["log"])
    assert log.is_file() and log.parent == logs
    assert len(log.stem.encode()) == LOG_NAME_BYTES and log.stem.startswith("n" * 100)
    assert log.with_suffix(".npz").is_file()
    assert main(["replay", str(log)]) == 0
    capsys.readouterr()
    # a name that differs only past the cut gets its own log
    other = _scenario(tmp_path, "other", name="n" * 299 + "m")
    assert main(["run", str(other), "--log-dir", str(logs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["log"] != str(log)
    assert len(list(logs.glob("*.jsonl"))) == 2


def test_a_sweep_of_a_300_character_name_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scenario = _scenario(tmp_path, name="s" * 300)
    assert main(["sweep", str(scenario)]) == 0
    (out,) = (tmp_path / "sweeps").iterdir()  # the default folder is named after the scenario
    assert len(out.name.encode()) == LOG_NAME_BYTES
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row in rows:
        assert (out / row["log"]).is_file()
    assert "Traceback" not in capsys.readouterr().err


# --- Dask -----------------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["127.0.0.1:1", "no-port-here"])
def test_an_unreachable_dask_address_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    address: str,
) -> None:
    importlib.import_module("distributed")  # in the test extra
    monkeypatch.setattr(executors, "DASK_CONNECT_SECONDS", 1.0)
    scenario = _scenario(tmp_path)
    out = tmp_path / "out"
    args = ["sweep", str(scenario), "--out", str(out), "--executor", "dask", "--address", address]
    assert main(args) == 2
    lines = [ln for ln in _err_lines(capsys) if "cannot reach" in ln]
    assert len(lines) == 1
    assert lines[0].startswith(f"{scenario}: cannot reach the Dask scheduler at {address!r}: ")
    assert not (out / "results.jsonl").exists()


def test_an_address_without_dask_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _scenario(tmp_path)
    assert main(["sweep", str(scenario), "--address", "127.0.0.1:1"]) == 2
    assert _err_lines(capsys) == ["--address needs --executor dask; received --executor process"]


# --- compare: one row per policy ------------------------------------------------------------


def test_compare_labels_scenarios_that_share_a_name_by_file_stem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    strict = _scenario(tmp_path, "strict", mechanism="laplace", epsilon=0.01)
    loose = _scenario(tmp_path, "loose", mechanism="laplace", epsilon=1000.0)
    logs = tmp_path / "logs"
    assert main(["compare", str(strict), str(loose), "--log-dir", str(logs), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["scenario"] for r in result["aggregate"]] == ["strict", "loose"]
    assert [r["runs"] for r in result["aggregate"]] == [1, 1]
    assert [s["scenario"] for s in result["strongest"]] == ["strict", "loose"]
    leak = {r["scenario"]: r["leakage"] for r in result["aggregate"]}
    assert leak["strict"] < leak["loose"]  # two policies, not one pooled row
    logs_written = sorted(p.name for p in logs.glob("*.jsonl"))
    assert logs_written == ["tiny-loose-seed3.jsonl", "tiny-strict-seed3.jsonl"]


def test_compare_labels_by_path_when_the_stems_match_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _scenario(tmp_path / "a", "policy")
    second = _scenario(tmp_path / "b", "policy", mechanism="laplace")
    args = ["compare", str(first), str(second), "--log-dir", str(tmp_path / "logs"), "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["scenario"] for r in result["aggregate"]] == [str(first), str(second)]
    assert len(list((tmp_path / "logs").glob("*.jsonl"))) == 2


def test_compare_refuses_one_file_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _scenario(tmp_path)
    logs = tmp_path / "logs"
    assert main(["compare", str(scenario), str(scenario), "--log-dir", str(logs)]) == 2
    assert _err_lines(capsys) == [f"compare: {scenario} is given twice"]
    assert not logs.exists()


# --- replay of malformed logs ---------------------------------------------------------------


@pytest.fixture
def finished_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["run", str(_scenario(tmp_path)), "--log-dir", str(tmp_path / "logs")]) == 0
    capsys.readouterr()
    return tmp_path / "logs" / "tiny-seed3.jsonl"


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("[1, 2, 3]", "not a JSON object but an array"),
        ('"text"', "not a JSON object but a string"),
        ("17", "not a JSON object but a number"),
        ('{"event": "query_sent", oops}', "not valid JSON: Expecting property name"),
        ("", "not valid JSON: Expecting value (column 1)"),
    ],
)
def test_replay_names_the_file_line_of_a_bad_line(
    finished_log: Path, capsys: pytest.CaptureFixture[str], bad: str, problem: str
) -> None:
    lines = finished_log.read_text(encoding="utf-8").splitlines(keepends=True)
    at = 5  # a line in the middle: its number in the file, from 1
    broken = finished_log.with_name("broken.jsonl")
    broken.write_text("".join([*lines[: at - 1], bad + "\n", *lines[at - 1 :]]), encoding="utf-8")
    assert main(["replay", str(broken)]) == 2
    (line,) = _err_lines(capsys)
    assert line.startswith(f"{broken}: line {at}: {problem}")


def test_replay_of_an_object_of_the_wrong_shape_is_one_line(
    finished_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = finished_log.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"event":"query_answered"' in line)
    answered = json.loads(lines[at])
    answered["epsilon_charged"] = [1, 2]  # a list where a number belongs
    lines[at] = json.dumps(answered) + "\n"
    broken = finished_log.with_name("shape.jsonl")
    broken.write_text("".join(lines), encoding="utf-8")
    assert main(["replay", str(broken)]) == 2
    (line,) = _err_lines(capsys)
    assert line.startswith(f"{broken}: not a biasleak run log (")


def test_replay_of_a_truncated_log_still_says_truncated(
    finished_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = finished_log.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = finished_log.with_name("cut.jsonl")
    cut.write_text("".join(lines[:6]) + lines[6][:10], encoding="utf-8")
    assert main(["replay", str(cut)]) == 1
    assert "truncated" in capsys.readouterr().err


# --- two writers of one log name ------------------------------------------------------------


@pytest.mark.slow
def test_two_runs_of_one_scenario_and_seed_into_one_folder_both_keep_whole_logs(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "twice.yaml"
    scenario.write_text(SLOWER, encoding="utf-8")
    command = [sys.executable, "-m", "biasleak.sim", "run", str(scenario), "--log-dir", "logs"]
    procs = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    logs = sorted((tmp_path / "logs").glob("*.jsonl"), key=lambda p: len(p.name))
    # overlapping runs write twice-seed1.jsonl and twice-seed1-run2.jsonl; runs that happened
    # not to overlap wrote one after the other under the same name
    assert [p.name for p in logs] in (
        ["twice-seed1.jsonl"],
        ["twice-seed1.jsonl", "twice-seed1-run2.jsonl"],
    )
    bodies = []
    for log in logs:
        assert main(["replay", str(log)]) == 0
        lines = log.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        assert header["arrays"] == log.with_suffix(".npz").name
        assert log.with_suffix(".npz").is_file()
        bodies.append(lines[1:])
    assert all(body == bodies[0] for body in bodies)  # same scenario and seed: same events
    assert not list((tmp_path / "logs").glob("*.part"))
