"""The ``biasleak`` command line: version, the demo job, its errors and its entry points."""

from __future__ import annotations

import json
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
