"""The ``biasleak`` command line: version, the demo job, its errors and its entry points, the
red team, compare, Ctrl-C and SIGTERM, and what a sweep says it skipped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from importlib import metadata
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from biasleak.agents.models import train_base_model
from biasleak.mechanisms.metrics import statistical_parity
from biasleak.sim.cli import main
from biasleak.sim.datasets import load_adult

VERSION = metadata.version("biasleak")
EPSILONS = [0.1, 1.0, 10.0, 100.0]
MECHANISMS = ("laplace", "attribute_conceal")


def _demo_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["demo", "--json", "--draws", "51", *args]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out)  # exactly one JSON document, nothing else on stdout
    assert isinstance(summary, dict)
    return summary


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"biasleak {VERSION}\n"


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: biasleak" in out
    assert "demo" in out


def test_demo_json_summary_matches_the_base_model(capsys: pytest.CaptureFixture[str]) -> None:
    summary = _demo_json(capsys)
    assert {"exact_sp", "n1", "n0", "base_model_accuracy", "answers"} <= set(summary)
    assert summary["n"] == summary["n1"] + summary["n0"] == 1000
    assert summary["protected"] == "race"
    assert (summary["advantaged"], summary["disadvantaged"]) == ("White", "Black")
    assert summary["draws"] == 51
    rows = summary["answers"]
    assert len(rows) == 8
    assert [(r["epsilon"], r["mechanism"]) for r in rows] == [
        (eps, mech) for eps in EPSILONS for mech in MECHANISMS
    ]
    for row in rows:
        assert set(row) == {"epsilon", "mechanism", "answer", "median_abs_error", "noise_scale"}
        assert np.isfinite(row["answer"])
        assert row["noise_scale"] > 0
    # recompute what the demo reports: same audit draw, same base model
    data = load_adult(protected="race", n=1000, seed=0)
    model = train_base_model(data.public.train)
    sp = statistical_parity(model.predict_proba(data.public.audit), protected=data.protected)
    assert summary["exact_sp"] == pytest.approx(sp, abs=1e-12)
    assert (summary["n1"], summary["n0"]) == (data.n1, data.n0)
    assert summary["base_model_accuracy"] == pytest.approx(model.accuracy(data.public.audit))
    assert 0.8 < summary["base_model_accuracy"] < 0.9


def test_demo_error_shrinks_as_epsilon_grows(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _demo_json(capsys, "--dataset", "german")["answers"]
    for mech in MECHANISMS:
        mine = [r for r in rows if r["mechanism"] == mech]
        assert [r["epsilon"] for r in mine] == EPSILONS
        errors = [r["median_abs_error"] for r in mine]
        scales = [r["noise_scale"] for r in mine]
        assert all(a > b for a, b in pairwise(errors)), (mech, errors)
        assert all(a > b for a, b in pairwise(scales)), (mech, scales)


def test_demo_is_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["demo", "--json", "--draws", "51", "--seed", "3", "--epsilons", "0.5,5"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    second = capsys.readouterr().out
    assert first == second
    assert json.loads(first)["dataset"].endswith("seed 3")
    assert [r["epsilon"] for r in json.loads(first)["answers"]] == [0.5, 0.5, 5.0, 5.0]


def test_demo_human_readable_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--draws", "51"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"biasleak {VERSION} demo\n")
    assert "exact SP of the base model:" in out
    assert "N1 = " in out and "(White)" in out and "(Black)" in out
    header = next(line for line in out.splitlines() if "mechanism" in line)
    for column in ("epsilon", "mechanism", "answer", "median |error|", "noise scale"):
        assert column in header
    lines = out.splitlines()
    table = lines[lines.index(header) + 2 :]
    assert len(table) == 8
    assert sum("attribute_conceal" in line for line in table) == 4
    assert "{" not in out


def test_demo_bad_epsilons_exit_with_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("1,abc", "0,1", "-1"):
        with pytest.raises(SystemExit) as info:
            main(["demo", "--epsilons", value])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "--epsilons" in err
        assert "epsilon" in err.split("--epsilons", 1)[1]
    assert "'abc'" not in err  # the last message is about "-1"


def test_demo_unknown_dataset_exits_with_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--dataset", "mnist"])
    assert info.value.code == 2
    assert "--dataset" in capsys.readouterr().err


def test_demo_german_and_synthetic(capsys: pytest.CaptureFixture[str]) -> None:
    german = _demo_json(capsys, "--dataset", "german")
    assert (german["n1"], german["n0"]) == (690, 310)
    assert german["protected"] == "sex"
    assert len(german["answers"]) == 8
    synthetic = _demo_json(capsys, "--dataset", "synthetic", "--n", "200")
    assert (synthetic["n1"], synthetic["n0"]) == (180, 20)
    assert synthetic["protected"] == "group"
    assert -1.0 <= synthetic["exact_sp"] <= 1.0


def test_demo_bad_sizes_return_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--n", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("biasleak demo: n must be an integer between 3 and")
    assert main(["demo", "--dataset", "german", "--n", "1001"]) == 2
    assert "between 3 and 1000" in capsys.readouterr().err
    assert main(["demo", "--draws", "0"]) == 2
    assert "--draws must be >= 1" in capsys.readouterr().err


def test_module_entry_point_prints_version(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "biasleak.sim", "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"biasleak {VERSION}\n"


def test_console_script_prints_version(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "biasleak"
    assert script.is_file()
    result = subprocess.run(
        [str(script), "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"biasleak {VERSION}\n"


# -- red team --------------------------------------------------------------------------------------

RED_TEAM = """\
name: cli_red
seed: 2
horizon_days: 10
data: {dataset: synthetic, n: 50, minority: 8}
developers:
  - {id: alice, organization: shop, strategy: {kind: honest_selection, candidates: 3}}
  - {id: mallory, organization: acme, strategy: {kind: single_query}}
compliance:
  metrics: [sp]
  policy:
    - {kind: rate_limit, per_day: 10000}
red_team: {attacks: [single_query, full_rank, eo_reveal]}
"""


def _red_file(tmp_path: Path, text: str = RED_TEAM) -> Path:
    path = tmp_path / "red.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_redteam_json_names_the_strongest_attack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _red_file(tmp_path)
    args = ["redteam", str(path), "--json", "--log-dir", str(tmp_path / "logs")]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["scenario"] == "cli_red" and result["seed"] == 2
    records = {r["kind"]: r for r in result["attacks"]}
    assert list(records) == ["single_query", "full_rank", "eo_reveal"]
    assert records["eo_reveal"]["applicable"] is False
    assert "'eo'" in records["eo_reveal"]["reason"]
    top = max(r["leakage"] for r in records.values() if r["applicable"])
    assert result["strongest"]["leakage"] == top == 100.0  # exact answers: full rank
    assert result["strongest"]["kind"] == "full_rank"
    assert set(result["strongest"]) == {
        "kind",
        "leakage",
        "revealed",
        "leakage_ceiling",
        "audit_set_ceiling",
        "answers_ceiling",
        "person_ceiling",
    }
    # exact answers: every ceiling is 100%
    assert result["strongest"]["audit_set_ceiling"] == result["strongest"]["answers_ceiling"] == 100
    for kind in ("single_query", "full_rank"):
        assert Path(records[kind]["log"]).is_file()
    # --seed and --workers give the same verdict
    args += ["--seed", "2", "--workers", "2"]
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["strongest"] == result["strongest"]


def test_redteam_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _red_file(tmp_path)
    assert main(["redteam", str(path), "--workers", "0"]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err
    assert main(["redteam", str(path), "--set", "red_team.attacks=[ful_rank]"]) == 2
    err = capsys.readouterr().err
    assert "unknown attack kind 'ful_rank'" in err and "did you mean 'full_rank'?" in err


def test_run_of_a_red_team_scenario_prints_the_red_team(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _red_file(tmp_path)
    assert main(["run", str(path), "--log-dir", str(tmp_path / "logs")]) == 0
    out = capsys.readouterr().out
    assert "scenario cli_red (seed 2)" in out
    assert "red team of scenario cli_red (seed 2)" in out
    assert "strongest attack: full_rank, leakage 100.0%" in out
    assert main(["run", str(path), "--json", "--log-dir", str(tmp_path / "logs")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["red_team"]["strongest"]["kind"] == "full_rank"
    assert set(shown["developers"]) == {"alice", "mallory"}


def test_compare_shows_the_strongest_attack_per_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    red = _red_file(tmp_path)
    own = tmp_path / "own.yaml"
    own.write_text(
        RED_TEAM.replace("name: cli_red", "name: cli_own")
        .replace("red_team: {attacks: [single_query, full_rank, eo_reveal]}\n", "")
        .replace(
            "  - {id: mallory, organization: acme, strategy: {kind: single_query}}\n",
            "  - {id: mallory, organization: acme, strategy: {kind: single_query}}\n"
            "  - {id: eve, organization: other, strategy: {kind: full_rank}}\n",
        ),
        encoding="utf-8",
    )
    logs = str(tmp_path / "logs")
    assert main(["compare", str(red), str(own), "--log-dir", logs]) == 0
    out = capsys.readouterr().out
    assert "strongest attack per policy" in out
    lines = out.splitlines()
    red_line = next(line for line in lines if line.startswith("cli_red ") and "red team" in line)
    own_line = next(line for line in lines if line.startswith("cli_own ") and "scenario" in line)
    assert "full_rank" in red_line and "100.0 ± 0.0" in red_line
    assert "eve (full_rank)" in own_line and "100.0 ± 0.0" in own_line
    assert main(["compare", str(red), str(own), "--json", "--log-dir", logs]) == 0
    rows = {r["scenario"]: r for r in json.loads(capsys.readouterr().out)["strongest"]}
    assert rows["cli_red"]["attack"] == "full_rank" and rows["cli_red"]["source"] == "red team"
    assert rows["cli_own"]["attack"] == "eve (full_rank)"
    assert rows["cli_own"]["source"] == "scenario" and rows["cli_own"]["leakage"] == 100.0


def test_ctrl_c_ends_a_command_with_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from biasleak.sim import cli

    def interrupted(_args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "redteam", interrupted)
    assert cli.main(["redteam", "scenarios/redteam_laplace.yaml"]) == 130
    err = capsys.readouterr().err
    assert err.startswith("biasleak redteam: interrupted") and "Traceback" not in err


def test_sigterm_stops_a_command_like_ctrl_c_and_the_handler_comes_back(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from biasleak.sim import cli

    before = signal.getsignal(signal.SIGTERM)

    def terminated(_args: object) -> int:
        signal.raise_signal(signal.SIGTERM)  # as `kill PID` would
        return 0

    monkeypatch.setitem(cli.COMMANDS, "redteam", terminated)
    assert cli.main(["redteam", "scenarios/redteam_laplace.yaml"]) == 130
    err = capsys.readouterr().err
    assert err.startswith("biasleak redteam: terminated (SIGTERM)") and "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) == before


def test_sweep_says_when_it_skips_parquet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from biasleak.sim import sweep
    from biasleak.sim._optional import MissingExtra

    def without_pyarrow(module: str) -> Any:  # as if the extra were not installed
        raise MissingExtra(module)

    monkeypatch.setattr(sweep, "require", without_pyarrow)
    path = tmp_path / "own.yaml"
    path.write_text(
        RED_TEAM.replace("red_team: {attacks: [single_query, full_rank, eo_reveal]}\n", ""),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 runs: 0 already done, 1 ok, 0 failed" in captured.out
    assert "skipped Parquet files" in captured.err and "biasleak[parquet]" in captured.err
    assert (out / "results.csv").is_file() and not (out / "results.parquet").exists()
