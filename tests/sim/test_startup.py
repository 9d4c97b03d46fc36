"""The command line starts at once: what ``--version``, ``--help`` and ``validate`` import.

Counted in a fresh interpreter (the test process has everything loaded already). Heavy
libraries load when a command needs them: scikit-learn when a model is first fitted, SciPy's
statistics and dp-accounting when a mechanism first needs them, the exercise package when an
exercise runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sklearn", "pandas", "dp_accounting", "matplotlib", "distributed", "dask")

PROBE = """
import json, sys
from biasleak.sim.cli import main
try:
    code = main(ARGS)
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def modules_after(*argv: str) -> tuple[int, list[str]]:
    script = PROBE.replace("ARGS", repr(list(argv)))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return int(result["code"] or 0), list(result["modules"])


def bare_interpreter() -> int:
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print(len(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


@pytest.mark.parametrize("argv", [("--version",), ("--help",), ("run", "--help")])
def test_version_and_help_import_almost_nothing(argv: tuple[str, ...]) -> None:
    code, modules = modules_after(*argv)
    assert code == 0
    tops = {m.split(".")[0] for m in modules}
    assert not tops & {"numpy", "scipy", "simpy", "pydantic", *HEAVY}, sorted(tops)
    assert len(modules) < bare_interpreter() + 150, len(modules)  # 1,881 before


def test_validate_does_not_load_the_heavy_libraries() -> None:
    code, modules = modules_after("validate", str(ROOT / "scenarios" / "quickstart.yaml"))
    assert code == 0
    tops = {m.split(".")[0] for m in modules}
    assert not tops & set(HEAVY), sorted(tops & set(HEAVY))
    assert "biasleak.sim.exercise.loading" not in modules
