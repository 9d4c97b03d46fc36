"""Limits, numeric bounds and the full pre-run check of a scenario (its grid and its data).

Every finding below once passed ``biasleak validate`` and then hung, crashed or released
nonsense. Each must now end in exit code 2 with one line ``FILE:LINE: key.path: message`` and
no traceback, from ``validate`` and from ``run``; and every shipped scenario must still pass.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from biasleak.mechanisms.policy import Noise
from biasleak.mechanisms.policy.noise import MIN_DELTA, MIN_EPSILON
from biasleak.sim.cli import main
from biasleak.sim.datasets import load_csv
from biasleak.sim.datasets._csv import CsvError
from biasleak.sim.scenario import (
    Limits,
    ScenarioError,
    apply_overrides,
    check_scenario,
    load_scenario,
    parse_scenario,
    read_yaml,
    scenario_hash,
)

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
SHIPPED = sorted(
    path
    for pattern in (
        "scenarios/*.yaml",
        "scenarios/paper/*.yaml",
        "scenarios/sweeps/*.yaml",
        "benchmarks/*.yaml",
    )
    for path in ROOT.glob(pattern)
)
PROBLEM = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<path>[^:]+): (?P<message>.+)$")

TINY = """\
name: tiny
seed: 3
data: {dataset: synthetic, n: 80, minority: 20}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 20, batch: 10}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 3}
compliance:
  metrics: [sp]
  policy:
    - {kind: budget, epsilon: 100.0}
    - {kind: noise, mechanism: laplace, epsilon: 1.0}
auditor: {enabled: true, every_hours: 12}
"""


def _problems(err: str, source: str) -> list[re.Match[str]]:
    """The problem lines of ``source`` on stderr, each with its line and key path."""
    found = [PROBLEM.match(line) for line in err.splitlines() if line.startswith(source)]
    return [m for m in found if m is not None]


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], source: str, path: str) -> str:
    """Run the command line; it must exit 2 with a problem at ``path``, without a traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    hits = [m for m in _problems(err, source) if m["path"] == path]
    assert hits, f"no problem at {path}:\n{err}"
    return hits[0]["message"]


# -- the findings, from validate and from run ----------------------------------------------------

FINDINGS = [
    # (override, key path of the problem, a fragment of the message)
    ("horizon_days=1e308", "horizon_days", "limits.max_horizon_days"),
    ("auditor.every_hours=1e-9", "auditor.every_hours", "limits.max_audits"),
    ("developers.1.strategy.candidates=1000000", "developers.1.strategy.candidates", "1000000"),
    ("developers.0.strategy.queries=1000000000", "developers.0.strategy.queries", "max_queries"),
    (
        "developers.0.strategy={kind: sybil, queries: 20, batch: 10, identities: 100000}",
        "developers.0.strategy.identities",
        "limits.max_identities",
    ),
    ("compliance.max_models=1000000000000", "compliance.max_models", "limits.max_models"),
    ("compliance.policy.1.epsilon=1e-320", "compliance.policy.1.epsilon", "at least 1e-06"),
    ("compliance.policy.0.epsilon=5e-324", "compliance.policy.0.epsilon", "at least 1e-06"),
    (
        "compliance.policy.1={kind: noise, mechanism: exact, epsilon: 1.0}",
        "compliance.policy.1.epsilon",
        "mechanism 'exact'",
    ),
    ("data.minority=1", "data", "at least 2"),
    ("data.minority=79", "data", "at least 2"),
]


@pytest.mark.parametrize(("override", "path", "fragment"), FINDINGS)
def test_each_finding_is_a_keyed_error_from_validate_and_run(
    override: str, path: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_scenario(TINY).name == "tiny"  # the file itself is valid
    file = tmp_path / "tiny.yaml"
    file.write_text(TINY, encoding="utf-8")
    argv = ["run", str(file), "--set", override, "--log-dir", str(tmp_path)]
    assert fragment in _refused(capsys, argv, str(file), path)
    assert not list(tmp_path.glob("*.jsonl")), "a refused scenario must not start a run"
    # the same change written into a file: validate refuses it at the same key
    edited = tmp_path / "edited.yaml"
    with edited.open("w", encoding="utf-8") as fh:
        YAML(typ="safe").dump(apply_overrides(read_yaml(TINY), [override]), fh)
    assert fragment in _refused(capsys, ["validate", str(edited)], str(edited), path)


def test_validate_reports_the_line_of_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = TINY.replace("every_hours: 12", "every_hours: 1.0e-9")
    file = tmp_path / "fast_auditor.yaml"
    file.write_text(text, encoding="utf-8")
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    (hit,) = [m for m in _problems(err, str(file)) if m["path"] == "auditor.every_hours"]
    assert (
        int(hit["line"])
        == text.splitlines().index("auditor: {enabled: true, every_hours: 1.0e-9}") + 1
    )
    assert "7.2e+11" in hit["message"]  # 30 days * 24 / 1e-9


def test_a_limit_can_be_raised_in_the_file(tmp_path: Path) -> None:
    raised = TINY + "limits: {max_candidates: 500}\n"
    text = raised.replace("candidates: 3", "candidates: 400")
    scenario = parse_scenario(text)
    assert scenario.limits.max_candidates == 500
    with pytest.raises(ScenarioError, match="max_candidates"):
        parse_scenario(text.replace("max_candidates: 500", "max_candidates: 399"))


def test_run_time_limits_are_exposed_and_default_limits_leave_the_hash_alone() -> None:
    scenario = parse_scenario(TINY)
    assert scenario.limits == Limits()
    assert scenario.limits.max_events >= 1 and scenario.limits.max_log_mb > 0
    assert "limits" not in scenario.model_dump(mode="json")
    same = parse_scenario(TINY + "limits: {max_events: 2000000}\n")  # the default, written out
    assert scenario_hash(same) == scenario_hash(scenario)
    other = parse_scenario(TINY + "limits: {max_events: 5000}\n")
    assert other.limits.max_events == 5000
    assert other.model_dump(mode="json")["limits"]["max_events"] == 5000
    assert scenario_hash(other) != scenario_hash(scenario)


# -- numeric bounds of the release -----------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [1e-320, 5e-324, 1e-7, MIN_EPSILON / 2])
def test_noise_epsilon_below_the_floor_is_refused(epsilon: float) -> None:
    with pytest.raises(ValueError, match="at least 1e-06"):
        Noise("attribute_conceal", epsilon)
    assert Noise("attribute_conceal", MIN_EPSILON).epsilon == MIN_EPSILON


def test_exact_with_an_epsilon_names_both_keys() -> None:
    with pytest.raises(ValueError, match=r"mechanism 'exact'.*epsilon"):
        Noise("exact", 0.5)
    assert Noise("exact").exact and Noise("exact", float("inf")).exact


def test_delta_of_an_eps_delta_mechanism_has_a_floor() -> None:
    with pytest.raises(ValueError, match="needs delta >= 1e-30"):
        Noise("smooth_laplace", 1.0, delta=1e-40)
    assert Noise("smooth_laplace", 1.0, delta=MIN_DELTA).delta == MIN_DELTA
    with pytest.raises(ValueError, match="needs 0 < delta < 1"):
        Noise("gaussian", 1.0)


# -- the audit draw ------------------------------------------------------------------------------


def test_an_empty_group_in_the_draw_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ScenarioError) as info:
        check_scenario(QUICKSTART, overrides=["data.n=20"], seed=0)
    (line,) = info.value.problems
    match = PROBLEM.match(line)
    assert match is not None and match["path"] == "data.n"
    assert int(match["line"]) == 12 and "0 disadvantaged" in match["message"]
    # the run itself refuses it too (exit 2, no ZeroDivisionError)
    argv = ["run", str(QUICKSTART), "--set", "data.n=20", "--seed", "0"]
    assert main([*argv, "--log-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "ZeroDivisionError" not in err
    assert "0 disadvantaged" in err


def test_a_draw_of_a_grid_point_is_checked_with_its_seeds(tmp_path: Path) -> None:
    text = QUICKSTART.read_text(encoding="utf-8") + "grid:\n  data.n: [1000, 20]\n  seeds: 3\n"
    file = tmp_path / "grid.yaml"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        check_scenario(file)
    assert all("grid point data.n=20" in p for p in info.value.problems), info.value.problems
    assert check_scenario(QUICKSTART).name == "quickstart"


# -- grids -----------------------------------------------------------------------------------------


def _grid_file(tmp_path: Path, grid: str) -> Path:
    file = tmp_path / "grid.yaml"
    file.write_text(TINY + "grid:\n" + grid, encoding="utf-8")
    return file


@pytest.mark.parametrize(
    ("grid", "path", "fragment"),
    [
        ("  data.n: [60, -5]\n", "grid.data.n", "value -5 (item 1) gives data.n"),
        ("  data.nn: [60]\n", "grid.data.nn", "unknown key 'nn'"),
        ("  data.n: [1e3]\n", "grid.data.n", "write the integer"),
        ("  data.minority: [10, 90]\n", "grid.data.minority", "value 90 (item 1) gives data"),
        (
            "  compliance.policy.1.epsilon: [1.0, 1e-320]\n",
            "grid.compliance.policy.1.epsilon",
            "1e-06",
        ),
        (
            "  compliance.policy.5.epsilon: [1.0]\n",
            "grid.compliance.policy.5.epsilon",
            "index below 2",
        ),
        ("  data.n: []\n", "grid.data.n", "non-empty list"),
        ("  seeds: 0\n", "grid.seeds", "integer >= 1"),
        ("  data.n: [60, 70]\n  seeds: 60000\n", "grid", "limits.max_grid_runs"),
    ],
)
def test_grid_problems_name_the_grid_entry(
    grid: str, path: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _grid_file(tmp_path, grid)
    for argv in (["validate", str(file)], ["sweep", str(file), "--out", str(tmp_path / "out")]):
        message = _refused(capsys, argv, str(file), path)
        assert fragment in message, message
        assert "--set" not in message and "validation error" not in message
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_grid_problem_points_at_the_line_of_the_value(tmp_path: Path) -> None:
    file = _grid_file(tmp_path, "  data.n:\n    - 60\n    - -5\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(file)
    (line,) = info.value.problems
    match = PROBLEM.match(line)
    assert match is not None
    assert int(match["line"]) == len(TINY.splitlines()) + 4  # the line of "- -5"


# -- CSV data --------------------------------------------------------------------------------------

HEADER = "label,group,age,job\n"


def _csv_rows(count: int = 40) -> list[str]:
    return [
        f"{i % 2},{'A' if i % 3 else 'B'},{20 + i},{'clerk' if i % 4 else 'nurse'}"
        for i in range(count)
    ]


def _csv(tmp_path: Path, rows: list[str], extra: str = "") -> Path:
    table = tmp_path / "table.csv"
    table.write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    file = tmp_path / "csv.yaml"
    data = (
        f"data: {{dataset: csv, path: {table}, label: label, protected: group, advantaged: A"
        f"{extra}}}\n"
    )
    file.write_text(TINY.replace("data: {dataset: synthetic, n: 80, minority: 20}\n", data))
    return file


@pytest.mark.parametrize(
    ("row", "column", "extra", "fragment"),
    [
        ("1,,30,clerk", "group", "", "empty cell"),
        ("1,C,30,clerk", "group", ", disadvantaged: [B]", "neither advantaged"),
        ("1,A,,clerk", "age", "", "empty cell"),
        (",A,30,clerk", "label", "", "empty cell"),
        ("NaN,A,30,clerk", "label", "", "no value ('NaN')"),
        ("1,A,inf,clerk", "age", "", "not a finite number"),
        ("1,A,30", "job", "", "expected 4 fields"),
    ],
)
def test_csv_problems_name_file_line_and_column(
    row: str, column: str, extra: str, fragment: str, tmp_path: Path
) -> None:
    rows = _csv_rows()
    rows[7] = row
    file = _csv(tmp_path, rows, extra)
    with pytest.raises(ScenarioError) as info:
        check_scenario(file)
    (line,) = info.value.problems
    match = PROBLEM.match(line)
    assert match is not None and match["path"] == "data.path", line
    assert "table.csv" in line and "line 9" in line and f"column {column!r}" in line, line
    assert fragment in line, line


def test_csv_missing_drop_and_disadvantaged_list(tmp_path: Path) -> None:
    rows = _csv_rows()
    rows[7] = "1,A,,clerk"
    file = _csv(tmp_path, rows, ", missing: drop, disadvantaged: [B]")
    scenario = check_scenario(file)
    assert scenario.data.missing == "drop"
    data = load_csv(
        tmp_path / "table.csv",
        label="label",
        protected="group",
        advantaged="A",
        disadvantaged=["B"],
        missing="drop",
    )
    assert data.n + len(data.public.train) == len(rows) - 1
    assert data.disadvantaged == "B"
    assert "age" not in data.public.audit.categorical  # the empty cell did not make it text


def test_csv_third_protected_value_needs_a_disadvantaged_list(tmp_path: Path) -> None:
    rows = _csv_rows()
    rows[7] = "1,C,30,clerk"
    table = tmp_path / "t.csv"
    table.write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(CsvError, match=r"line 9, column 'group'.*third value"):
        load_csv(table, label="label", protected="group", advantaged="A", audit_fraction=0.5)
    with pytest.raises(CsvError, match=r"line 9, column 'group'"):
        load_csv(table, label="label", protected="group", advantaged="A", disadvantaged=["B"])
    data = load_csv(
        table,
        label="label",
        protected="group",
        advantaged="A",
        disadvantaged=["B", "C"],
        audit_fraction=0.5,
    )
    assert data.n0 + data.n1 == data.n


def test_csv_data_config_rejects_contradictions() -> None:
    base = "data: {dataset: csv, path: t.csv, label: label, protected: group, advantaged: A"
    for extra, fragment in [
        (", disadvantaged: [A]}", "advantaged value"),
        (", disadvantaged: [B, B]}", "twice"),
        (", disadvantaged: []}", "at least 1"),
        (", missing: keep}", "allowed"),
    ]:
        text = TINY.replace("data: {dataset: synthetic, n: 80, minority: 20}", base + extra)
        with pytest.raises(ScenarioError, match=fragment):
            parse_scenario(text)


# -- the shipped scenarios -------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_scenarios_pass_every_check_unchanged(path: Path) -> None:
    scenario = check_scenario(path)
    assert scenario.limits == Limits()
    assert "limits" not in scenario.model_dump(mode="json")


CAPPED = """\
name: capped
seed: 1
horizon_days: 2
data: {dataset: synthetic, n: 80, minority: 8}
limits: {max_events: 20}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 100, batch: 5, prepare_hours: 0.1}
compliance:
  metrics: [sp]
"""


def test_a_run_stops_at_its_event_limit_with_one_line_and_a_whole_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "capped.yaml"
    file.write_text(CAPPED, encoding="utf-8")
    logs = tmp_path / "logs"
    assert main(["run", str(file), "--log-dir", str(logs)]) == 2
    err = capsys.readouterr().err
    assert "limits.max_events = 20" in err and "Traceback" not in err
    (log,) = logs.glob("*.jsonl")
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 21 and all(line.startswith("{") for line in lines)  # header + 20
    assert main(["replay", str(log)]) == 1  # no summary: the run did not finish
    assert "truncated" in capsys.readouterr().err
    raised = file.with_name("raised.yaml")
    raised.write_text(CAPPED.replace("max_events: 20", "max_events: 100000"), encoding="utf-8")
    assert main(["run", str(raised), "--log-dir", str(logs)]) == 0
