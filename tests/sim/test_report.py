"""The report package: the published numbers as data, and each log read once per report."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from biasleak.sim._optional import MissingExtra, skipped
from biasleak.sim.report import PAPER, PAPER_FILES, PAPER_TITLES, batch_errors, write_report
from biasleak.sim.report import logs as report_logs
from biasleak.sim.report.logs import RunLogs
from biasleak.sim.report.published import load_published
from biasleak.sim.sweep import SweepResult, iter_rows, run_sweep

REPO = Path(__file__).resolve().parents[2]
PAPER_DIR = REPO / "scenarios" / "paper"

GRID = "  compliance.policy.0.epsilon: [10.0, 1000.0]\n  seeds: 2\n"
"""Two noisy grid points, two seeds each (4 runs), over the suite's tiny world."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, tiny_world) -> SweepResult:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("report")
    path = root / "tiny.yaml"
    path.write_text(tiny_world("tiny_report", seed=5, grid=GRID), encoding="utf-8")
    return run_sweep(path, out=root / "out", progress=None)


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the report package opens each log (by resolved path)."""
    counts: Counter[str] = Counter()
    original = report_logs.read_log

    def counting(path: str | Path) -> Iterator[dict[str, Any]]:
        counts[str(Path(path).resolve())] += 1
        return original(path)

    monkeypatch.setattr(report_logs, "read_log", counting)
    return counts


def _logs(result: SweepResult) -> set[str]:
    return {str((result.out / row["log"]).resolve()) for row in iter_rows(result.out)}


# -- the published numbers -----------------------------------------------------------------------


def test_every_paper_item_has_a_title_and_its_scenario_files() -> None:
    assert list(PAPER_TITLES) == list(PAPER_FILES)
    listed = [stem for stems in PAPER_FILES.values() for stem in stems]
    assert len(listed) == len(set(listed))  # each scenario file belongs to one item
    assert sorted(f"{stem}.yaml" for stem in listed) == sorted(
        p.name for p in PAPER_DIR.glob("*.yaml")
    )
    assert set(PAPER) <= set(PAPER_FILES)
    for name, title in PAPER_TITLES.items():  # "table1" is titled "Table 1: ..."
        assert title.startswith(f"{name.rstrip('0123456789').capitalize()} {name[-1]}: ")


def test_published_cells_have_the_shape_the_reports_read() -> None:
    widths = {"table1": (3, 4), "table2": (3, 2), "table3": (3, 2), "table4": (2, 2)}
    for name, (width, count) in widths.items():
        assert PAPER[name], name
        for key, values in PAPER[name].items():
            assert len(key) == width and len(values) == count, (name, key)
            assert all(isinstance(x, int | float) for x in (*key, *values))
    assert all(len(key) == 2 and isinstance(v, int) for key, v in PAPER["figure2"].items())


def test_figure2_points_are_table1s_exact_answers() -> None:
    """The paper's Figure 2 points are the leakage Table 1 gives at epsilon = inf."""
    exact = {(n, m): v for (n, m, eps), v in PAPER["table1"].items() if math.isinf(eps)}
    assert set(exact) == set(PAPER["figure2"])
    for key, (err_ac, err_lap, leak_ac, leak_lap) in exact.items():
        assert (err_ac, err_lap) == (0, 0)
        assert leak_ac == leak_lap == PAPER["figure2"][key]


def _data(rows: list[list[Any]], key: list[str], values: list[str]) -> str:
    item = {"title": "Table 9", "scenario_files": ["t9"], "key": key, "values": values}
    return json.dumps({"source": "s", "items": {"table9": {**item, "rows": rows}}})


def test_load_published_reads_infinity_and_keeps_numbers_as_written() -> None:
    text = _data([[100, "inf", 0, 12.50], [100, 5.0, 7, 3]], ["n", "eps"], ["err", "leak"])
    published = load_published(text)
    assert published["titles"] == {"table9": "Table 9"}
    assert published["files"] == {"table9": ("t9",)}
    cells = published["numbers"]["table9"]
    assert list(cells) == [(100, math.inf), (100, 5.0)]
    assert [f"{v[0]} {v[1]}" for v in cells.values()] == ["0 12.5", "7 3"]
    one = load_published(_data([[1, 2, 63]], ["n", "m"], ["leak"]))["numbers"]["table9"]
    assert one == {(1, 2): 63}  # a single value is a number, not a tuple


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[100, 5.0, 1]], "has 3 numbers; expected 2 key numbers"),
        ([[100, 5.0, 1, 2], [100, 5.0, 3, 4]], "lists the cell (100, 5.0) twice"),
        ([[100, "five", 1, 2]], "expected a number or 'inf'; received 'five'"),
    ],
)
def test_load_published_rejects_malformed_rows(rows: list[list[Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_published(_data(rows, ["n", "eps"], ["err", "leak"]))


# -- each log read once --------------------------------------------------------------------------


def test_the_sweep_report_opens_each_log_once(tiny: SweepResult, opened: Counter[str]) -> None:
    write_report(tiny.out)
    assert set(opened) == _logs(tiny)
    assert set(opened.values()) == {1}


@pytest.mark.parametrize("paper", ["figure3", "table3", "figure2"])
def test_a_paper_report_opens_each_log_once(
    tiny: SweepResult, opened: Counter[str], tmp_path: Path, paper: str
) -> None:
    write_report(tiny.out, paper=paper, to=tmp_path)
    assert set(opened) == _logs(tiny)
    assert set(opened.values()) == {1}


def test_cached_batch_errors_are_the_logs_own(tiny: SweepResult) -> None:
    logs = RunLogs()
    for row in iter_rows(tiny.out):
        path = tiny.out / row["log"]
        header = logs.header(path)  # a header first, then the batch: the log is read again
        assert header == logs.run(path).header
        errors = logs.batch_errors(path)
        assert errors is not None and errors == batch_errors(path)
        assert errors["m"] == 12.0
        assert logs.run(path).complete
        assert logs.batch_errors(path, developer="nobody") is None


def test_a_paper_figure_without_matplotlib_says_what_it_skipped(
    tiny: SweepResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    text = write_report(tiny.out, paper="figure3", to=tmp_path).read_text(encoding="utf-8")
    assert skipped(MissingExtra("matplotlib")) in text.splitlines()
    assert "![figure 3]" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_an_empty_log_has_no_batch_and_no_header(tmp_path: Path) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_text("", encoding="utf-8")
    assert batch_errors(log) is None
    with pytest.raises(ValueError, match="empty log"):
        RunLogs().header(log)
