"""Sweeps and their reports: grid expansion, run ids, executors, result files, resume, the CLI.

Every sweep here is tiny (synthetic data of 60-80 people, or 100 Adult people, and one
compressed-sensing attacker with a few dozen models), so a run takes a fraction of a second. The
paper's own scenario files are only validated and expanded, never run.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import re
import shlex
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from worlds import TINY

from biasleak.sim._optional import MissingExtra, skipped
from biasleak.sim.cli import main
from biasleak.sim.executors import Lanes
from biasleak.sim.report import PAPER, batch_errors, write_report
from biasleak.sim.runlog import jsonable
from biasleak.sim.scenario import Scenario, ScenarioError, load_scenario, read_yaml
from biasleak.sim.sweep import SweepResult, Task, expand, make_executor, run_sweep
from biasleak.sim.world import run_scenario

REPO = Path(__file__).resolve().parents[2]
PAPER_DIR = REPO / "scenarios" / "paper"


GRID = """\
grid:
  data.n: [60, 80]
  compliance.policy.0.epsilon: [10.0, .inf]
  seeds: 2
"""
"""The default grid: 2 x 2 points, 2 seeds each (8 runs)."""

GRID_KEYS = ("data.n", "compliance.policy.0.epsilon")

TABLE1 = """\
name: tiny_table1
seed: 0
horizon_days: 5
data: {dataset: adult, protected: race, n: 100}
developers:
  - {id: mallory, organization: acme, strategy: {kind: compressed_sensing, queries: 25, batch: 100000, decoder: basis_pursuit, prepare_hours: 0.1}}
compliance:
  metrics: [sp]
  answer_hours: 0.01
  policy:
    - {kind: noise, mechanism: attribute_conceal, epsilon: 5.0, per: batch}
grid:
  developers.0.strategy.queries: [25, 40]
  compliance.policy.0.mechanism: [attribute_conceal, laplace]
  compliance.policy.0.epsilon: [.inf, 100.0]
  seeds: 1
"""  # noqa: E501
"""scenarios/paper/table1_n100.yaml with one seed and only epsilon inf and 100 (8 runs)."""

SUMMARY_FIGURES = ("leakage", "answered", "epsilon_spent", "revealed", "sent")
COMPLIANCE_FIGURES = (
    "compliance.epsilon_spent",
    "compliance.answered",
    "compliance.refused",
    "compliance.mean_abs_error",
    "compliance.median_abs_error",
)


class Interrupted(Exception):
    """Raised from an on_row callback to cut a sweep short."""


def _write(folder: Path, text: str, name: str = "tiny.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _csv(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _jsonl(out: Path) -> list[dict[str, Any]]:
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text(encoding="utf-8").splitlines()


def _shown(value: Any) -> str:
    """How a summary value is written in results.csv."""
    value = jsonable(value)
    return "" if value is None else str(value)


def _without_paths(row: dict[str, Any]) -> dict[str, Any]:
    """A result row without what depends on the output folder or the clock."""
    return {k: v for k, v in row.items() if k not in ("log", "wall_seconds")}


def _cells(line: str) -> list[str]:
    """The cells of a markdown table line (escaped pipes stay inside their cell)."""
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [p.strip() for p in parts[1:-1]]


def _table(text: str, first: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the markdown table whose first column is ``first``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if _cells(line)[:1] == [first])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return _cells(lines[start]), rows


def _fmt(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.1f} ± {sd:.1f}"


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SweepResult]:
    """The tiny 8-run sweep, run once without an executor; tests must not change it."""
    root = tmp_path_factory.mktemp("serial")
    path = _write(root, TINY + GRID)
    return path, run_sweep(path, out=root / "out", progress=None)


@pytest.fixture(scope="module")
def table1(tmp_path_factory: pytest.TempPathFactory) -> SweepResult:
    """The tiny Table 1 sweep on Adult (8 runs)."""
    root = tmp_path_factory.mktemp("table1")
    return run_sweep(_write(root, TABLE1, "table1.yaml"), out=root / "out", progress=None)


# -- 1. expanding a grid -------------------------------------------------------------------------


def test_expand_counts_ids_seeds_and_grid_values(tmp_path: Path) -> None:
    grid = GRID.replace(
        "  seeds: 2\n", "  developers.0.strategy.queries: [8, 12, 16]\n  seeds: 2\n"
    )
    path = _write(tmp_path, TINY + grid)
    tasks = expand(read_yaml(path.read_text(encoding="utf-8")))
    assert len(tasks) == 2 * 2 * 3 * 2
    ids = [t.run_id for t in tasks]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
    # the same file gives the same ids
    assert [t.run_id for t in expand(read_yaml(path.read_text(encoding="utf-8")))] == ids
    combos: dict[tuple[Any, ...], list[Task]] = {}
    for task in tasks:
        assert isinstance(task, Task)
        assert set(task.grid) == {*GRID_KEYS, "developers.0.strategy.queries"}
        combos.setdefault(tuple(task.grid.values()), []).append(task)
        resolved = task.scenario
        assert resolved["seed"] == task.seed
        assert resolved["grid"] is None
        assert resolved["data"]["n"] == task.grid["data.n"]
        assert resolved["compliance"]["policy"][0]["epsilon"] == task.grid[GRID_KEYS[1]]
        strategy = resolved["developers"][0]["strategy"]
        assert strategy["queries"] == task.grid["developers.0.strategy.queries"]
        Scenario.model_validate(resolved)  # a task's scenario is a valid scenario
    assert len(combos) == 12
    for runs in combos.values():
        assert [t.seed for t in runs] == [3, 4]  # the scenario's seed, then the next
    assert {t.grid["data.n"] for t in tasks} == {60, 80}
    assert {t.grid[GRID_KEYS[1]] for t in tasks} == {10.0, math.inf}  # .inf read as infinity
    assert any(math.isinf(t.scenario["compliance"]["policy"][0]["epsilon"]) for t in tasks)

    # a different value anywhere in the scenario gives different ids
    changed = read_yaml(
        path.read_text(encoding="utf-8").replace("horizon_days: 2", "horizon_days: 3")
    )
    assert not set(ids) & {t.run_id for t in expand(changed)}
    # the id is the resolved scenario's, not the grid's: a smaller grid keeps its runs' ids
    raw = read_yaml(path.read_text(encoding="utf-8"))
    same = expand(raw, grid={"data.n": [60], GRID_KEYS[1]: [10.0], "seeds": 2})
    assert [t.grid for t in same] == [{"data.n": 60, GRID_KEYS[1]: 10.0}] * 2
    by_id = {t.run_id: t for t in tasks}
    for task in same:
        assert task.run_id in by_id
        assert by_id[task.run_id].scenario == task.scenario  # queries 12: the file's value


def test_expand_seeds_argument_overrides_the_grid(tmp_path: Path) -> None:
    raw = read_yaml(_write(tmp_path, TINY + GRID).read_text(encoding="utf-8"))
    two = expand(raw)
    three = expand(raw, seeds=3)
    assert len(two) == 8 and len(three) == 12
    by_point: dict[tuple[Any, ...], list[int]] = {}
    for task in three:
        by_point.setdefault(tuple(task.grid.values()), []).append(task.seed)
    assert list(by_point.values()) == [[3, 4, 5]] * 4
    assert {t.run_id for t in two} < {t.run_id for t in three}  # seeds 3 and 4 keep their ids
    one = expand(raw, seeds=1)
    assert [t.seed for t in one] == [3] * 4
    # a grid given as an argument replaces the file's; without seeds it runs one seed
    only = expand(raw, grid={"data.n": [70]})
    assert len(only) == 1
    assert only[0].grid == {"data.n": 70} and only[0].seed == 3
    assert only[0].scenario["data"]["n"] == 70
    assert only[0].scenario["compliance"]["policy"][0]["epsilon"] == 10.0
    # no grid at all: one run of the scenario as written
    plain = expand(read_yaml(TINY))
    assert len(plain) == 1 and plain[0].grid == {} and plain[0].seed == 3


def test_expand_rejects_bad_grids(tmp_path: Path) -> None:
    raw = read_yaml(_write(tmp_path, TINY + GRID).read_text(encoding="utf-8"))
    with pytest.raises(ScenarioError) as info:
        expand(raw, grid={"data.minority": [8, 80]})  # minority must be below n = 80
    assert len(info.value.problems) == 1
    problem = info.value.problems[0]
    assert "grid values {'data.minority': 80}" in problem
    assert "invalid scenario" in problem and "smaller than n" in problem
    with pytest.raises(ScenarioError, match=r"grid values .*'data\.n': 60.*epsilon.*-1\.0"):
        expand(raw, grid={"data.n": [60], GRID_KEYS[1]: [5.0, -1.0]})
    with pytest.raises(ScenarioError) as info:
        expand(raw, grid={"data.n": 60, "data.minority": [], "seeds": 1})
    assert len(info.value.problems) == 2
    assert info.value.problems[0].startswith("grid.data.n: must be a non-empty list")
    assert info.value.problems[1].startswith("grid.data.minority: must be a non-empty list")
    # the file's grid is checked the same way (a bare number passes the scenario's own schema)
    scalar = read_yaml(TINY + "grid:\n  data.n: 60\n")
    Scenario.model_validate(scalar)
    with pytest.raises(ScenarioError, match=r"grid\.data\.n: must be a non-empty list"):
        expand(scalar)
    for bad in ({"seeds": 0}, {"data.n": [60], "seeds": -2}, {"seeds": True}):
        with pytest.raises(ScenarioError, match=r"grid\.seeds must be an integer >= 1"):
            expand(raw, grid=bad)
    with pytest.raises(ScenarioError, match=r"grid\.seeds must be an integer >= 1; got 0"):
        expand(raw, seeds=0)
    with pytest.raises(ScenarioError, match=r"grid\.seeds"):
        expand(read_yaml(TINY + "grid:\n  data.n: [60]\n  seeds: 0\n"))


# -- 2. a sweep without an executor --------------------------------------------------------------


def test_serial_sweep_writes_results_logs_and_tables(
    serial: tuple[Path, SweepResult], tmp_path: Path
) -> None:
    path, result = serial
    out = result.out
    tasks = expand(read_yaml(path.read_text(encoding="utf-8")))
    ids = {t.run_id for t in tasks}
    assert (result.total, result.skipped, result.ok, result.failed) == (8, 0, 8, 0)
    record = _jsonl(out)
    assert len(record) == 8
    assert record == result.rows
    assert {r["run_id"] for r in record} == ids
    assert all(r["status"] == "ok" and r["error"] == "" for r in record)

    rows = _csv(out)
    assert len(rows) == 8
    assert {r["run_id"] for r in rows} == ids
    columns = list(rows[0])
    assert columns[0] == "run_id"
    required = {
        "run_id",
        "seed",
        "status",
        "error",
        *GRID_KEYS,
        "proxy_baseline_leakage",
        "mallory.leakage",
        "mallory.answered",
        "mallory.epsilon_spent",
        *COMPLIANCE_FIGURES,
    }
    assert required <= set(columns), required - set(columns)
    parquet = out / "results.parquet"
    has_pyarrow = importlib.util.find_spec("pyarrow") is not None
    assert parquet.exists() == has_pyarrow
    if has_pyarrow:
        import pyarrow.parquet as pq

        table = pq.read_table(parquet).to_pylist()
        assert [r["run_id"] for r in table] == [r["run_id"] for r in rows]
        assert [r["mallory.leakage"] for r in table] == [r["mallory.leakage"] for r in rows]

    logs = sorted(p.name for p in (out / "logs").glob("*.jsonl"))
    assert logs == sorted(f"tiny-{i}.jsonl" for i in ids)
    for row in record:
        assert Path(row["log"]).name == f"tiny-{row['run_id']}.jsonl"

    # the same resolved scenario and seed, run directly, gives the same figures and log
    by_id = {r["run_id"]: r for r in rows}
    for task in tasks:
        row = by_id[task.run_id]
        assert row["seed"] == str(task.seed)
        for key, value in task.grid.items():
            assert row[key] == _shown(value)
        direct = run_scenario(
            Scenario.model_validate(task.scenario),
            seed=task.seed,
            log_dir=tmp_path,
            log_name=f"tiny-{task.run_id}",
        )
        mallory = direct.summary["developers"]["mallory"]
        for figure in SUMMARY_FIGURES:
            assert row[f"mallory.{figure}"] == _shown(mallory[figure]), figure
        for figure in COMPLIANCE_FIGURES:
            value = direct.summary["compliance"][figure.split(".")[1]]
            if figure == "compliance.refused":
                value = sum(value.values())
            assert row[figure] == _shown(value), figure
        assert row["proxy_baseline_leakage"] == _shown(direct.summary["proxy_baseline_leakage"])
        sweep_log = out / "logs" / f"tiny-{task.run_id}.jsonl"
        assert direct.log_path.read_bytes() == sweep_log.read_bytes()
    eps = {r[GRID_KEYS[1]] for r in rows}
    assert eps == {"10.0", "inf"}
    assert {r["compliance.epsilon_spent"] for r in rows if r[GRID_KEYS[1]] == "inf"} == {"inf"}


# -- 3. resuming ---------------------------------------------------------------------------------


def test_resume_runs_only_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, TINY + GRID)
    out = tmp_path / "out"
    ids = [t.run_id for t in expand(read_yaml(path.read_text(encoding="utf-8")))]
    seen: list[str] = []

    def stop_after_three(row: dict[str, Any]) -> None:
        seen.append(row["run_id"])
        if len(seen) == 3:
            raise Interrupted

    with pytest.raises(Interrupted):
        run_sweep(path, out=out, progress=None, on_row=stop_after_three)
    assert [r["run_id"] for r in _jsonl(out)] == seen == ids[:3]

    resumed = run_sweep(path, out=out, progress=None)
    assert (resumed.total, resumed.skipped, resumed.ok, resumed.failed) == (8, 3, 5, 0)
    record = _jsonl(out)
    assert [r["run_id"] for r in record] == ids  # the first three, then the five others
    assert sorted(r["run_id"] for r in _csv(out)) == sorted(ids)

    # lose two lines of the record: exactly those two runs are run again
    lost = {record[1]["run_id"], record[6]["run_id"]}
    kept = [line for i, line in enumerate(_lines(out)) if i not in (1, 6)]
    (out / "results.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    again = run_sweep(path, out=out, progress=None)
    assert (again.skipped, again.ok, again.failed) == (6, 2, 0)
    assert {r["run_id"] for r in _jsonl(out)[6:]} == lost
    final = _csv(out)
    assert len(final) == 8
    assert sorted(r["run_id"] for r in final) == sorted(ids)
    assert all(r["status"] == "ok" for r in final)

    # a finished sweep runs nothing; more seeds run only the new seeds
    done = run_sweep(path, out=out, progress=None)
    assert (done.total, done.skipped, done.ok, done.failed) == (8, 8, 0, 0)
    assert len(_jsonl(out)) == 8
    more = run_sweep(path, out=out, seeds=3, progress=None)
    assert (more.total, more.skipped, more.ok, more.failed) == (12, 8, 4, 0)
    assert {r["seed"] for r in _jsonl(out)[8:]} == {5}
    assert len(_csv(out)) == 12

    # without pyarrow the tables are still written, without the parquet file
    (out / "results.csv").unlink()
    parquet = out / "results.parquet"
    parquet.unlink(missing_ok=True)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    run_sweep(path, out=out, seeds=3, progress=None)
    assert len(_csv(out)) == 12
    assert not parquet.exists()


def test_resume_ignores_a_line_cut_by_an_interruption(tmp_path: Path) -> None:
    path = _write(tmp_path, TINY + GRID.replace("seeds: 2", "seeds: 1"))
    out = tmp_path / "out"
    run_sweep(path, out=out, progress=None)
    lines = _lines(out)
    cut = json.loads(lines[-1])["run_id"]
    # the last line is cut in the middle (and still ends with a newline)
    (out / "results.jsonl").write_text(
        "\n".join([*lines[:-1], lines[-1][: len(lines[-1]) // 2]]) + "\n", encoding="utf-8"
    )
    again = run_sweep(path, out=out, progress=None)
    assert (again.total, again.skipped, again.ok) == (4, 3, 1)
    assert again.rows[-1]["run_id"] == cut
    assert sorted(r["run_id"] for r in _csv(out)) == sorted(json.loads(x)["run_id"] for x in lines)


# -- 4. a run that fails -------------------------------------------------------------------------


def test_a_failing_run_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "people.csv"
    synthetic = {"dataset": "synthetic", "n": 60, "minority": 8}
    broken = {
        "dataset": "csv",
        "path": str(missing),
        "label": "y",
        "protected": "race",
        "advantaged": "white",
    }
    grid = f"grid:\n  data: [{json.dumps(synthetic)}, {json.dumps(broken)}]\n  seeds: 2\n"
    path = _write(tmp_path, TINY + grid)
    out = tmp_path / "out"
    result = run_sweep(path, out=out, progress=None)  # the csv file is only opened at run time
    assert (result.total, result.skipped, result.ok, result.failed) == (4, 0, 2, 2)
    record = _jsonl(out)
    assert len(record) == 4
    failed = [r for r in record if r["status"] == "failed"]
    ok = [r for r in record if r["status"] == "ok"]
    assert [r["data"] for r in failed] == [broken, broken]
    assert [r["data"] for r in ok] == [synthetic, synthetic]
    assert sorted(r["seed"] for r in failed) == sorted(r["seed"] for r in ok) == [3, 4]
    for row in failed:
        assert row["error"].startswith("ValueError: csv path ")
        assert str(missing) in row["error"] and "does not exist" in row["error"]
        assert "mallory.leakage" not in row and "log" not in row
    for row in ok:
        assert row["error"] == ""
        assert isinstance(row["mallory.leakage"], float)
        assert row["log"] == f"logs/{Path(row['log']).name}"  # kept relative to the sweep
        assert (out / row["log"]).exists()
    rows = _csv(out)
    assert [r["status"] for r in rows] == ["ok", "ok", "failed", "failed"]
    assert all(r["error"].startswith("ValueError: csv path") for r in rows[2:])
    assert all(r["mallory.leakage"] == "" for r in rows[2:])
    assert len(list((out / "logs").glob("*.jsonl"))) == 2
    # a resumed sweep tries the failed runs again, and each run stays one row of the table
    again = run_sweep(path, out=out, progress=None)
    assert (again.total, again.skipped, again.ok, again.failed) == (4, 2, 0, 2)
    assert len(_jsonl(out)) == 6
    assert len(_csv(out)) == 4


# -- 5. a process pool ---------------------------------------------------------------------------


def test_process_pool_gives_the_serial_results(
    serial: tuple[Path, SweepResult], tmp_path: Path
) -> None:
    path, reference = serial
    expected = {r["run_id"]: _without_paths(r) for r in reference.rows}
    progress = io.StringIO()
    with ProcessPoolExecutor(max_workers=2) as pool:
        result = run_sweep(path, out=tmp_path / "pool", executor=pool, workers=2, progress=progress)
    assert (result.total, result.ok, result.failed) == (8, 8, 0)
    got = {r["run_id"]: _without_paths(r) for r in result.rows}
    assert got == expected  # same ids, same leakage and every other figure
    # a line per 10% on a stream that is not a terminal: with 8 runs, every run crosses a step
    lines = progress.getvalue().splitlines()
    assert lines == [
        f"[{'#' * (30 * done // 8):<30}] {done}/8 done, {min(8 - done, 2)} running, 0 failed"
        for done in range(9)
    ]
    assert lines[-1] == "[" + "#" * 30 + "] 8/8 done, 0 running, 0 failed"
    # workers > 1 without an executor: the sweep makes (and shuts down) its own pool
    own = run_sweep(path, out=tmp_path / "own", workers=2, progress=None)
    assert {r["run_id"]: _without_paths(r) for r in own.rows} == expected
    assert [r["run_id"] for r in _csv(tmp_path / "own")] == [
        r["run_id"] for r in _csv(reference.out)
    ]


def test_make_executor_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    pool, closer = make_executor("process", workers=2)
    try:
        assert isinstance(pool, Lanes) and len(pool.lanes) == 2
        assert closer is None
    finally:
        pool.shutdown()
    with pytest.raises(ValueError, match="executor must be 'process' or 'dask'; received 'ray'"):
        make_executor("ray", workers=2)
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were missing
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # even if imported before
    with pytest.raises(ValueError, match=re.escape("biasleak[dask]")):
        make_executor("dask", workers=2)


# -- 6. Dask -------------------------------------------------------------------------------------


@pytest.mark.filterwarnings(
    # the nanny warns (in this process) when making its scratch folder takes over a second,
    # which a loaded machine may reach; it says nothing about the results
    "ignore:Creating scratch directories is taking a surprisingly long time:UserWarning"
)
@pytest.mark.slow
def test_dask_local_cluster_gives_the_serial_results(
    serial: tuple[Path, SweepResult], tmp_path: Path
) -> None:
    import dask
    from distributed import Client, LocalCluster, Nanny

    path, reference = serial
    with dask.config.set({"temporary-directory": str(tmp_path / "scratch")}):
        executor, client = make_executor("dask", workers=2)
    cluster = client.cluster
    try:
        assert isinstance(client, Client)
        assert isinstance(cluster, LocalCluster)
        assert len(cluster.workers) == 2
        assert all(isinstance(w, Nanny) for w in cluster.workers.values())  # worker processes
        result = run_sweep(path, out=tmp_path / "dask", executor=executor, workers=2, progress=None)
    finally:
        executor.shutdown()
        client.close()
        cluster.close()  # closing the client leaves the cluster it was given running
    assert (result.total, result.ok, result.failed) == (8, 8, 0)
    expected = {r["run_id"]: _without_paths(r) for r in reference.rows}
    assert {r["run_id"]: _without_paths(r) for r in result.rows} == expected
    assert len(list((tmp_path / "dask" / "logs").glob("*.jsonl"))) == 8
    assert (tmp_path / "scratch" / "dask-scratch-space").is_dir()


# -- 7. the command line -------------------------------------------------------------------------


def test_cli_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may land in the repository
    path = _write(tmp_path, TINY + GRID.replace("seeds: 2", "seeds: 1"))
    out = tmp_path / "cli"
    assert main(["sweep", str(path), "--seeds", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"8 runs: 0 already done, 8 ok, 0 failed; results in {out / 'results.csv'}" in printed
    assert len(_csv(out)) == 8
    assert {r["seed"] for r in _csv(out)} == {"3", "4"}
    assert main(["sweep", str(path), "--seeds", "2", "--out", str(out)]) == 0
    assert "8 runs: 8 already done, 0 ok, 0 failed" in capsys.readouterr().out
    # --set changes the scenario (new ids: new runs)
    assert main(["sweep", str(path), "--set", "horizon_days=3", "--out", str(out)]) == 0
    assert "4 runs: 0 already done, 4 ok, 0 failed" in capsys.readouterr().out
    assert len(_csv(out)) == 12

    bad = _write(tmp_path, TINY.replace("horizon_days: 2", "horizon_dayz: 2") + GRID, "bad.yaml")
    assert main(["sweep", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{bad}:3: horizon_dayz: unknown key 'horizon_dayz'" in captured.err
    assert "did you mean 'horizon_days'" in captured.err
    invalid = _write(tmp_path, TINY + "grid:\n  data.minority: [8, 90]\n", "invalid.yaml")
    assert main(["sweep", str(invalid), "--out", str(tmp_path / "invalid")]) == 2
    err = capsys.readouterr().err
    assert "grid.data.minority: value 90 (item 1) gives data: minority = 90 must be smaller " in err
    assert main(["sweep", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the file" in capsys.readouterr().err
    assert main(["sweep", str(path), "--workers", "0", "--out", str(tmp_path / "w0")]) == 2
    assert "--workers must be >= 1; received 0" in capsys.readouterr().err
    assert main(["sweep", str(path), "--seeds", "0", "--out", str(tmp_path / "s0")]) == 2
    assert "--seeds must be >= 1; received 0" in capsys.readouterr().err
    assert not (tmp_path / "w0").exists() and not (tmp_path / "s0").exists()
    assert not (tmp_path / "sweeps").exists()


def test_cli_report(
    serial: tuple[Path, SweepResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, result = serial
    to = tmp_path / "rep"
    assert main(["report", str(result.out), "--to", str(to), "--paper", "table3"]) == 0
    assert capsys.readouterr().out == f"report: {to / 'report.md'}\n"
    assert (to / "report.md").read_text(encoding="utf-8").startswith("# Table 3: ")
    assert main(["report", str(result.out), "--paper", "table9", "--to", str(to)]) == 2
    assert "table9" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "is not a sweep folder (no results.jsonl)" in capsys.readouterr().err


# -- 8. reports ----------------------------------------------------------------------------------


def test_sweep_report_table_and_figures(serial: tuple[Path, SweepResult]) -> None:
    _, result = serial
    path = write_report(result.out)
    assert path == result.out / "report" / "report.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Sweep report: tiny\n")
    assert "8 finished runs" in text
    header, table = _table(text, GRID_KEYS[1])
    assert header[:4] == [GRID_KEYS[1], "data.n", "developer", "runs"]
    # the three ceilings the privacy loss proves sit beside the measured leakage
    assert header[4:9] == ["leakage %", "policy %", "audit set %", "answers %", "proxy-only %"]
    assert len(table) == 4  # one per grid point and developer
    rows = _csv(result.out)
    for cells in table:
        line = dict(zip(header, cells, strict=True))
        point = [r for r in rows if (r[GRID_KEYS[1]], r["data.n"]) == tuple(cells[:2])]
        assert len(point) == 2
        assert line["developer"] == "mallory"
        assert line["runs"] == "2"
        assert line["leakage %"] == _fmt([float(r["mallory.leakage"]) for r in point])
        for column, key in (
            ("policy %", "leakage_ceiling"),
            ("audit set %", "audit_set_ceiling"),
            ("answers %", "answers_ceiling"),
        ):
            assert line[column] == _fmt([float(r[f"mallory.{key}"]) for r in point])
        assert line["proxy-only %"] == _fmt([float(r["proxy_baseline_leakage"]) for r in point])
    assert [c[:2] for c in table] == [["10.0", "60"], ["10.0", "80"], ["inf", "60"], ["inf", "80"]]
    for name in ("leakage_vs_utility", "leakage_over_time", "recovery_vs_queries"):
        assert f"![{name}.png]({name}.png)" in text
    folder = path.parent
    for name in (
        "leakage_vs_utility.png",
        "leakage_vs_utility.svg",
        "leakage_over_time.png",
        "recovery_vs_queries.png",
        "budget_over_time.png",
    ):
        data = (folder / name).read_bytes()
        assert data.startswith(b"\x89PNG" if name.endswith(".png") else b"<?xml"), name
    assert "biasleak[plots]" not in text


def test_sweep_report_without_matplotlib(
    serial: tuple[Path, SweepResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, result = serial
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = write_report(result.out, to=tmp_path / "plain")
    text = path.read_text(encoding="utf-8")
    assert "## Leakage and utility" in text
    assert skipped(MissingExtra("matplotlib")) in text.splitlines()
    assert "## Figures" not in text
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.md"]


def test_paper_table1_report(table1: SweepResult) -> None:
    assert (table1.total, table1.ok) == (8, 8)
    text = write_report(table1.out, paper="table1").read_text(encoding="utf-8")
    assert text.startswith("# Table 1: Adult, Attribute-Conceal against Laplace\n")
    assert "8 finished runs." in text
    header, table = _table(text, "n")
    assert header[:4] == ["n", "m", "eps", "runs"]
    assert [c[:4] for c in table] == [
        ["100", "25", "100", "1+1"],
        ["100", "25", "inf", "1+1"],
        ["100", "40", "100", "1+1"],
        ["100", "40", "inf", "1+1"],
    ]
    ours = {
        (
            r["developers.0.strategy.queries"],
            r["compliance.policy.0.mechanism"],
            r["compliance.policy.0.epsilon"],
        ): r["mallory.leakage"]
        for r in table1.rows
    }
    agree, off = 0, []
    for cells in table:
        m, eps = int(cells[1]), math.inf if cells[2] == "inf" else float(cells[2])
        paper = PAPER["table1"][(100, m, eps)]
        assert cells[6] == str(paper[0]) and cells[9] == str(paper[1])  # paper's errors
        assert cells[11] == str(paper[2]) and cells[13] == str(paper[3])  # paper's leakage
        for column, mechanism in ((10, "attribute_conceal"), (12, "laplace")):
            leak = ours[(m, mechanism, "inf" if math.isinf(eps) else eps)]
            assert cells[column] == f"{leak:.1f} ± 0.0"
            published = paper[2 if mechanism == "attribute_conceal" else 3]
            agree += abs(leak - published) <= 10
            if abs(leak - published) > 10:
                name = "AC" if mechanism == "attribute_conceal" else "Laplace"
                off.append(
                    f"n = 100, m = {m}, eps = {cells[2]}, {name} (ours {leak:.1f} ± 0.0, "
                    f"paper {published:g})"
                )
        if math.isinf(eps):
            assert cells[4] == cells[7] == "0.00 ± 0.00"  # exact answers have no error
    inf25, inf40 = table[1], table[3]
    assert (inf25[11], inf25[13]) == ("63", "63")
    assert (inf40[11], inf40[13]) == ("100", "100")
    # the plain paragraph: which cells agree, which do not, and how the errors compare
    (verdict,) = [line for line in text.splitlines() if line.startswith("**Where we agree")]
    assert f"deviations) in {agree} of 8 cells" in verdict
    assert ("; it does not in " + "; ".join(off) + ".") in verdict if off else "cells." in verdict
    # the interpretation table: every reading of Avg. SP err per noisy cell, beside the paper's
    assert "Every reading of Avg. SP err we tested" in text
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Every reading"))
    readings = {}
    for line in lines[first + 4 :]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        readings[tuple(cells[:4])] = cells[4:]
    noisy = [r for r in table1.rows if r["compliance.policy.0.epsilon"] != "inf"]
    assert len(noisy) == 4 and len(readings) == 4
    keys = ("mean", "median", "mean_clamped", "abs_mean_signed", "mean_over_m")
    for r in noisy:
        m, mechanism = r["developers.0.strategy.queries"], r["compliance.policy.0.mechanism"]
        errors = batch_errors(table1.out / r["log"])
        assert errors is not None
        row = readings[("100", str(m), "100", mechanism)]
        assert row[:5] == [f"{1e3 * errors[k]:.4g}" for k in keys]
        paper = PAPER["table1"][(100, m, 100.0)]
        assert row[5] == str(paper[0] if mechanism == "attribute_conceal" else paper[1])
        # the readings are consistent with each other
        assert errors["mean_over_m"] == pytest.approx(errors["mean"] / m)
        assert errors["abs_mean_signed"] <= errors["mean"] + 1e-12
    ratios = []
    for row in readings.values():
        ratios.append(float(row[1]) / float(row[5]))  # median over the paper's value
    ratios.sort()
    above = sum(r >= 1.0 for r in ratios)
    assert f"at or above the paper's value in {above} of 4 noisy cells" in verdict
    # the table rounds to 4 significant digits, the paragraph to 3: compare at 2
    low, high = re.search(r"from (\S+) to (\S+) times it", verdict).groups()
    assert float(low) == pytest.approx(ratios[0], rel=1e-2)
    assert float(high) == pytest.approx(ratios[-1], rel=1e-2)
    assert re.search(
        r"per reading: mean \d, median \d, clamped \d, \|mean signed\| \d, "
        r"mean / m \d \(of 4\)\.",
        verdict,
    )


def test_batch_errors_use_the_largest_query(table1: SweepResult) -> None:
    row = next(
        r
        for r in table1.rows
        if r["developers.0.strategy.queries"] == 40
        and r["compliance.policy.0.mechanism"] == "laplace"
        and r["compliance.policy.0.epsilon"] == 100.0
    )
    events = [
        json.loads(line)
        for line in (table1.out / row["log"]).read_text(encoding="utf-8").splitlines()
    ]
    releases = [
        e for e in events if e.get("event") == "release_internal" and e.get("sender") == "mallory"
    ]
    assert len(releases) >= 2  # the probe for the group sizes, then the batch
    batch = max(releases, key=lambda e: len(e["exact"]))
    assert len(batch["exact"]) == 40
    pairs = list(zip(batch["released"], batch["exact"], strict=True))
    diffs = [abs(r - x) for r, x in pairs]
    expected = {
        "mean": statistics.fmean(diffs),
        "median": statistics.median(diffs),
        "mean_clamped": statistics.fmean(abs(min(max(r, -1.0), 1.0) - x) for r, x in pairs),
        "abs_mean_signed": abs(statistics.fmean(r - x for r, x in pairs)),
        "mean_over_m": statistics.fmean(diffs) / 40,
        "m": 40.0,
    }
    errors = batch_errors(table1.out / row["log"])
    assert errors is not None
    assert set(errors) == set(expected)
    for key, value in expected.items():
        assert errors[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert errors["mean"] > 0  # Laplace noise at epsilon 100 moves the answers
    assert errors["mean_clamped"] <= errors["mean"]
    assert batch_errors(table1.out / row["log"], developer="nobody") is None
    exact_row = next(
        r
        for r in table1.rows
        if r["developers.0.strategy.queries"] == 40 and r["compliance.policy.0.epsilon"] == "inf"
    )
    exact = batch_errors(table1.out / exact_row["log"])
    assert exact is not None and exact["m"] == 40.0
    assert exact["mean"] == exact["median"] == exact["abs_mean_signed"] == 0.0


def test_report_rejects_unknown_papers_and_empty_folders(
    table1: SweepResult, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"--paper must be one of .*'table5'"):
        write_report(table1.out, paper="table5", to=tmp_path / "r")
    with pytest.raises(ValueError, match="is not a sweep folder"):
        write_report(tmp_path / "nothing", to=tmp_path / "r")
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "results.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="no finished runs"):
        write_report(tmp_path / "blank", to=tmp_path / "r")


# -- 9. the paper's scenario files ---------------------------------------------------------------

PAPER_RUNS = {
    "figure2_n100.yaml": 10 * 10,
    "figure2_n1000.yaml": 10 * 10,
    "figure3_n100.yaml": 10 * 10,
    "figure3_n1000.yaml": 10 * 10,
    "figure3_n10000.yaml": 10 * 10,
    "table1_n100.yaml": 2 * 2 * 4 * 10,
    "table1_n1000.yaml": 2 * 2 * 4 * 10,
    "table2_n1000.yaml": 6 * 2 * 10,
    "table2_n10000.yaml": 6 * 10,
    "table3_n1000.yaml": 2 * 4 * 10,
    "table3_n10000.yaml": 2 * 4 * 10,
    "table4.yaml": 2 * 3 * 10,
}


def test_every_paper_file_is_listed() -> None:
    assert sorted(p.name for p in PAPER_DIR.glob("*.yaml")) == sorted(PAPER_RUNS)


@pytest.mark.parametrize("name", sorted(PAPER_RUNS))
def test_paper_scenarios_validate_and_expand(name: str) -> None:
    path = PAPER_DIR / name
    scenario = load_scenario(path)
    assert scenario.grid is not None
    tasks = expand(read_yaml(path.read_text(encoding="utf-8")))
    assert len(tasks) == PAPER_RUNS[name]
    assert len({t.run_id for t in tasks}) == len(tasks)
    seeds = scenario.grid.get("seeds", 1)
    assert {t.seed for t in tasks} == set(range(scenario.seed, scenario.seed + seeds))
    for key, values in scenario.grid.items():
        if key != "seeds":
            assert {json.dumps(t.grid[key]) for t in tasks} == {json.dumps(v) for v in values}


# -- regressions found while reviewing the sweep -------------------------------------------------


def test_grid_edge_cases() -> None:
    from biasleak.sim.scenario import ScenarioError, read_yaml

    raw = read_yaml(TINY)
    with pytest.raises(ScenarioError, match="grid must be a mapping"):
        expand(raw, grid=["data.n"])  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match="grid must be a mapping"):
        expand({**raw, "grid": [1, 2]})
    twice = expand(raw, grid={"data.n": [60, 60]})
    assert len(twice) == 1  # a value listed twice is one run


def test_progress_reaches_the_end_and_follows_redirected_stderr(tmp_path: Path) -> None:
    import contextlib
    import io

    path = _write(tmp_path, TINY + "grid:\n  data.n: [60]\n  seeds: 2\n")
    buffer = io.StringIO()
    with contextlib.redirect_stderr(buffer):
        run_sweep(path, out=tmp_path / "out")
    assert "2/2 done, 0 running" in buffer.getvalue()


def test_a_cut_last_line_does_not_swallow_the_next_row(tmp_path: Path) -> None:
    path = _write(tmp_path, TINY + "grid:\n  data.n: [60, 80]\n  seeds: 1\n")
    out = tmp_path / "out"
    run_sweep(path, out=out, progress=None)
    record = out / "results.jsonl"
    lines = record.read_text(encoding="utf-8").splitlines()
    record.write_text(lines[0] + "\n" + lines[1][:40], encoding="utf-8")  # cut, no newline
    first = run_sweep(path, out=out, progress=None)
    assert (first.skipped, first.ok) == (1, 1)
    second = run_sweep(path, out=out, progress=None)
    assert (second.skipped, second.ok) == (2, 0)


def test_a_moved_sweep_folder_still_reports(tmp_path: Path) -> None:
    from biasleak.sim.report import write_report

    path = _write(tmp_path, TINY + "grid:\n  data.n: [60]\n  seeds: 1\n")
    run_sweep(path, out=tmp_path / "first", progress=None)
    moved = tmp_path / "moved"
    (tmp_path / "first").rename(moved)
    report = write_report(moved)
    assert report.exists() and "| 60 | mallory | 1 |" in report.read_text(encoding="utf-8")


def test_shipped_sweep_files_validate_and_expand() -> None:
    from biasleak.sim.scenario import load_scenario, read_yaml

    files = sorted((REPO / "scenarios" / "sweeps").glob("*.yaml"))
    assert files
    for path in files:
        load_scenario(path)
        raw = read_yaml(path.read_text(encoding="utf-8"))
        grid = raw["grid"]
        expected = grid.get("seeds", 1)
        for key, values in grid.items():
            if key != "seeds":
                expected *= len(values)
        assert len(expand(raw)) == expected


def test_report_prints_the_commands_that_remake_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths, as a user types them
    _write(tmp_path, TINY + "grid:\n  data.n: [60]\n  seeds: 1\n", "my sweep.yaml")
    args = ["sweep", "my sweep.yaml", "--seeds", "2", "--set", "horizon_days=3", "--out", "out/a"]
    assert main(args) == 0
    made = json.loads((tmp_path / "out" / "a" / "sweep.json").read_text(encoding="utf-8"))
    assert made == {
        "overrides": ["horizon_days=3"],
        "runs": 2,
        "scenario_file": "my sweep.yaml",
        "seeds": 2,
    }
    assert main(["report", "out/a", "--paper", "table3", "--to", "docs/t3"]) == 0
    text = (tmp_path / "docs" / "t3" / "report.md").read_text(encoding="utf-8")
    block = text[text.index("## Reproduce") :]
    commands = block.split("```bash\n")[1].split("```")[0].splitlines()
    assert commands == [
        "biasleak sweep 'my sweep.yaml' --seeds 2 --set horizon_days=3 --workers 2 --out out/a",
        "biasleak report out/a --paper table3 --to docs/t3",
    ]
    assert str(tmp_path) not in text  # nothing of the machine the report was made on
    # the printed sweep command remakes the same runs: everything is already done
    capsys.readouterr()
    assert main(shlex.split(commands[0])[1:]) == 0
    assert "2 runs: 2 already done, 0 ok, 0 failed" in capsys.readouterr().out
    # a folder without sweep.json (made before it existed) is named, not guessed at
    (tmp_path / "out" / "a" / "sweep.json").unlink()
    text = write_report(Path("out/a")).read_text(encoding="utf-8")
    assert "# out/a: made without a record of its command" in text
    assert "biasleak report out/a\n" in text


def test_leakage_utility_points_are_coloured_by_one_key_and_labelled_by_the_others() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from biasleak.sim.report.figures import scatter_points

    keys = ["compliance.policy.0.mechanism", "compliance.policy.0.epsilon"]
    points = [
        (0.1, 51.0, json.dumps([mech, eps]))
        for mech in ("laplace", "attribute_conceal")
        for eps in (1.0, 10.0, 100.0)
    ]
    fig, ax = plt.subplots()
    scatter_points(ax, points, keys)
    labels = sorted(c.get_label() for c in ax.collections)
    assert labels == ["mechanism=attribute_conceal", "mechanism=laplace"]
    notes = sorted(t.get_text() for t in ax.texts)
    assert notes == sorted(f"epsilon={e}" for e in (1.0, 10.0, 100.0) for _ in range(2))
    # one key: one colour, the key's value as the label
    ax.clear()
    scatter_points(ax, [(0.1, 50.0, json.dumps([e])) for e in (1.0, 2.0)], keys[1:])
    assert [c.get_label() for c in ax.collections] == ["grid point"]
    assert [t.get_text() for t in ax.texts] == ["epsilon=1.0", "epsilon=2.0"]
    plt.close(fig)


def test_leakage_utility_point_is_the_strongest_attacker(tmp_path: Path) -> None:
    """Two attackers per grid point: the figure's point is the leakier one, per policy."""
    import matplotlib

    matplotlib.use("Agg")
    from biasleak.sim.report import figures

    two = TINY.replace(
        "compliance:",
        "  - id: eve\n    organization: other\n    strategy: {kind: full_rank}\ncompliance:",
    )
    path = _write(tmp_path, two + "grid:\n  compliance.policy.0.epsilon: [10.0, .inf]\n")
    result = run_sweep(path, out=tmp_path / "out", progress=None)
    seen: list[list[tuple[float, float, str]]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(figures, "scatter_points", lambda ax, points, keys: seen.append(points))
        write_report(result.out)
    (points,) = seen
    by_eps = {json.loads(tag)[0]: (x, y) for x, y, tag in points}
    assert set(by_eps) == {10.0, "inf"}
    for eps, (x, y) in by_eps.items():
        row = next(r for r in result.rows if r["compliance.policy.0.epsilon"] == eps)
        assert y == max(row["mallory.leakage"], row["eve.leakage"])
        assert x == row["compliance.median_abs_error"]
    assert by_eps["inf"][1] == 100.0  # exact answers: full rank recovers everyone


def test_cli_paper_runs_the_sweeps_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "scenarios" / "paper"
    folder.mkdir(parents=True)
    for stem, n0 in (("table3_n1000", 8), ("table3_n10000", 10)):
        text = TINY.replace("minority: 8", f"minority: {n0}") + "grid:\n  seeds: 2\n"
        (folder / f"{stem}.yaml").write_text(text, encoding="utf-8")
    assert main(["paper", "table3"]) == 0
    out = capsys.readouterr().out
    assert "scenarios/paper/table3_n1000.yaml: 2 runs: 0 already done, 2 ok, 0 failed" in out
    assert "scenarios/paper/table3_n10000.yaml: 2 runs: 0 already done, 2 ok, 0 failed" in out
    assert out.endswith("report: docs/paper/table3/report.md\n")
    assert len(_csv(tmp_path / "sweeps" / "paper" / "table3_n10000")) == 2
    text = (tmp_path / "docs" / "paper" / "table3" / "report.md").read_text(encoding="utf-8")
    assert text.startswith("# Table 3: ") and "4 finished runs." in text
    assert (
        "biasleak paper table3 --sweeps sweeps/paper --to docs/paper/table3 --workers 2\n" in text
    )
    # again: nothing to run; --seeds adds runs and the one-command line says so
    assert main(["paper", "table3", "--to", "out/t3"]) == 0
    assert "2 runs: 2 already done, 0 ok, 0 failed" in capsys.readouterr().out
    assert main(["paper", "table3", "--seeds", "3", "--workers", "2", "--to", "out/t3"]) == 0
    assert "3 runs: 2 already done, 1 ok, 0 failed" in capsys.readouterr().out
    text = (tmp_path / "out" / "t3" / "report.md").read_text(encoding="utf-8")
    assert "6 finished runs." in text
    assert "biasleak paper table3 --sweeps sweeps/paper --seeds 3 --to out/t3 --workers 2" in text
    # bad input
    assert main(["paper", "table9"]) == 2
    assert "NAME must be one of ['table1', 'table2'" in capsys.readouterr().err
    assert main(["paper", "table4"]) == 2
    assert "no scenario file scenarios/paper/table4.yaml" in capsys.readouterr().err
    assert main(["paper", "table3", "--workers", "0"]) == 2
    assert "--workers must be >= 1; received 0" in capsys.readouterr().err


def test_verdict_paragraph_counts_agreement_and_error_ratios() -> None:
    from biasleak.sim.report.verdict import verdict

    leakage = [
        ("cell a", 50.0, 2.0, 55.0),  # within 10 points
        ("cell b", 50.0, 8.0, 65.0),  # 15 points off, but within two sd (16)
        ("cell c", 50.0, 1.0, 75.0),  # off
        ("cell d", None, None, 60.0),  # no runs: not rated
    ]
    # readings: mean, median, clamped, |mean signed|, mean / m; then the paper's value
    errors = [
        ([100.0, 10.0, 5.0, 1.0, 1.2], 1.0),  # median 10x the paper; mean / m within 30%
        ([50.0, 2.0, 1.1, 0.5, 0.1], 4.0),  # median half the paper; nothing within 30%
        ([1.0, 1.0, 1.0, 1.0, 1.0], 0.0),  # the paper gives 0: no ratio
    ]
    (text,) = verdict(errors, leakage)
    assert text == (
        "**Where we agree and where we do not.** Leakage agrees with the paper (within 10 points "
        "or two standard deviations) in 2 of 3 cells; it does not in cell c (ours 50.0 ± 1.0, "
        "paper 75). Avg. SP err: our median |released - exact| per answer is at or above the "
        "paper's value in 1 of 2 noisy cells, from 0.5 to 10 times it (median 5.25 times). Cells "
        "within 30% of the paper's value, per reading: mean 0, median 0, clamped 0, "
        "|mean signed| 1, mean / m 1 (of 2)."
    )
    assert verdict([], None) == []


FIGURE2 = (
    TABLE1.replace("tiny_table1", "tiny_figure2")
    .replace(
        "  policy:\n    - {kind: noise, mechanism: attribute_conceal, epsilon: 5.0, per: batch}",
        "  policy: []",
    )
    .split("  compliance.policy.0.mechanism")[0]
)
"""Exact answers, m in {25, 40}: two of the paper's Figure 2 points (2 runs)."""


def test_paper_figure_reports(tmp_path: Path) -> None:
    fig2 = run_sweep(_write(tmp_path, FIGURE2, "f2.yaml"), out=tmp_path / "f2", progress=None)
    text = write_report(fig2.out, paper="figure2", to=tmp_path / "r2").read_text(encoding="utf-8")
    _, table = _table(text, "n")
    leak = {r["developers.0.strategy.queries"]: r["mallory.leakage"] for r in fig2.rows}
    assert [c[:4] for c in table] == [
        ["100", str(m), "1", f"{leak[m]:.1f} ± 0.0"] for m in (25, 40)
    ]
    assert [c[4] for c in table] == ["63", "100"]  # the paper's points
    agree = sum(abs(leak[m] - p) <= 10 for m, p in ((25, 63), (40, 100)))
    assert f"deviations) in {agree} of 2 cells" in text
    assert "![figure 2](figure2.png)" in text and (tmp_path / "r2" / "figure2.svg").exists()

    grid = "grid:\n  compliance.policy.0.epsilon: [10.0, 1000.0]\n"
    fig3 = run_sweep(_write(tmp_path, TINY + grid, "f3.yaml"), out=tmp_path / "f3", progress=None)
    text = write_report(fig3.out, paper="figure3", to=tmp_path / "r3").read_text(encoding="utf-8")
    _, table = _table(text, "n")
    assert [c[:3] for c in table] == [["80", "10", "1"], ["80", "1000", "1"]]
    medians = [float(c[4].split(" ± ")[0]) for c in table]
    assert medians[0] > medians[1] > 0  # more epsilon, less noise
    assert (tmp_path / "r3" / "figure3.png").exists()
    # the same runs give byte-identical figures (no date, fixed SVG element ids)
    write_report(fig3.out, paper="figure3", to=tmp_path / "again")
    for name in ("figure3.png", "figure3.svg"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "r3" / name).read_bytes()
    # a table whose cells the runs do not cover: headers only, no paragraph
    text = write_report(fig3.out, paper="table4", to=tmp_path / "r4").read_text(encoding="utf-8")
    assert text.startswith("# Table 4: German credit\n") and "Where we agree" not in text


RED_SWEEP = """\
name: red_sweep
seed: 4
horizon_days: 5
data: {dataset: synthetic, n: 60, minority: 10}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: single_query}
compliance:
  metrics: [sp]
  policy:
    - {kind: rate_limit, per_day: 10000}
red_team: {attacks: [single_query, full_rank]}
grid:
  compliance.policy.0.per_day: [5000, 10000]
"""


@pytest.mark.slow
def test_sweep_of_a_red_team_scenario_reports_the_strongest_attack(tmp_path: Path) -> None:
    path = _write(tmp_path, RED_SWEEP)
    result = run_sweep(path, out=tmp_path / "out", progress=None)
    assert result.ok == 2
    for row in result.rows:
        # exact answers: full rank reveals all 60 people, one targeted query does not
        assert row["redteam.strongest"] == "full_rank"
        assert row["redteam.strongest.leakage"] == row["redteam.full_rank.leakage"] == 100.0
        assert row["redteam.single_query.leakage"] < 100.0
        assert row["redteam.full_rank.revealed"] == 60
    # each run's red-team worlds log into their own folder: two grid points share the seed, and
    # one file name for both would let their worlds overwrite each other's logs
    folders = sorted((tmp_path / "out" / "logs" / "redteam").iterdir())
    assert [f.name for f in folders] == sorted(row["run_id"] for row in result.rows)
    for folder in folders:
        assert len(list(folder.glob("*.jsonl"))) == 2  # single_query and full_rank
    text = write_report(result.out).read_text(encoding="utf-8")
    header, table = _table(text, "compliance.policy.0.per_day")
    assert "redteam.strongest" not in header  # red-team columns are not grid keys
    assert [c[1] for c in table] == ["mallory", "mallory"]  # nor developers
    assert "## Strongest attack per policy" in text
    strongest = text.split("## Strongest attack per policy", 1)[1]
    head, rows = _table(strongest, "compliance.policy.0.per_day")
    assert head[1:5] == ["runs", "attacks of", "strongest attack", "leakage %"]
    assert [r[:5] for r in rows] == [
        ["5000", "1", "red team", "full_rank", "100.0 ± 0.0"],
        ["10000", "1", "red team", "full_rank", "100.0 ± 0.0"],
    ]
    # exact answers: every ceiling is 100%, and each policy's verdict names the ceilings
    assert [r[5:8] for r in rows] == [["100.0", "100.0", "100.0"]] * 2
    assert "**Verdict per policy** (no target given" in text
    assert "- per_day=5000: strongest attack 100.0%; ceilings: policy 100.0%" in text
    targeted = write_report(result.out, risk_target=60).read_text(encoding="utf-8")
    assert "- per_day=5000: unsafe at target 60%: the strongest attack reached 100.0%" in targeted


def test_verdict_per_policy_names_the_strongest_statement_that_holds() -> None:
    from biasleak.sim.report import verdict_lines

    def verdict(leak: float | None, *bounds: float | None) -> dict[str, Any]:
        keys = ("leakage_ceiling", "audit_set_ceiling", "answers_ceiling")
        return {"leakage": leak, **dict(zip(keys, bounds, strict=True))}

    keys = ["compliance.policy.0.epsilon"]
    verdicts = [
        ([0.1], 5, verdict(51.0, 55.0, 52.0, 51.5)),  # the guarantee itself meets 60%
        ([1.0], 5, verdict(55.0, 97.0, 58.0, 56.0)),  # this audit set meets it
        ([3.0], 5, verdict(56.0, 99.0, 70.0, 59.0)),  # only these answers
        ([10.0], 5, verdict(75.0, 100.0, 99.0, 90.0)),  # an attack passed it
        ([30.0], 5, verdict(57.0, 100.0, 99.0, 90.0)),  # nothing proved either way
        ([99.0], 5, verdict(57.0, None, None, None)),  # no ceilings known
    ]
    lines = verdict_lines(keys, verdicts, 60.0)
    assert lines[0] == "**Verdict per policy** (target 60%):"
    assert lines[2].startswith("- epsilon=0.1: safe by the policy's guarantee at target 60%")
    assert "exceed 55.0% on any audit set" in lines[2]
    assert lines[3].startswith("- epsilon=1.0: safe for this audit set at target 60%")
    assert "guarantee allows 97.0%" in lines[3]
    assert lines[4].startswith("- epsilon=3.0: safe with these answers at target 60%")
    assert "up to 70.0% on this audit set" in lines[4]
    assert lines[5].startswith("- epsilon=10.0: unsafe at target 60%")
    assert lines[6].startswith("- epsilon=30.0: not proven at target 60%")
    assert lines[7].startswith("- epsilon=99.0: not proven") and "policy -" in lines[7]


def test_report_names_the_strongest_of_the_scenarios_own_attackers(tmp_path: Path) -> None:
    two = TINY.replace(
        "compliance:",
        "  - id: eve\n    organization: other\n    strategy: {kind: full_rank}\ncompliance:",
    )
    path = _write(tmp_path, two + "grid:\n  compliance.policy.0.epsilon: [.inf]\n")
    result = run_sweep(path, out=tmp_path / "out", progress=None)
    text = write_report(result.out).read_text(encoding="utf-8")
    strongest = text.split("## Strongest attack per policy", 1)[1]
    _, rows = _table(strongest, "compliance.policy.0.epsilon")
    (row,) = rows
    leak = {d: result.rows[0][f"{d}.leakage"] for d in ("mallory", "eve")}
    best = max(leak, key=lambda d: leak[d])
    kind = {"mallory": "compressed_sensing", "eve": "full_rank"}[best]
    assert row[1:4] == ["1", "scenario", f"{best} ({kind})"]
    assert row[4] == f"{leak[best]:.1f} ± 0.0"
