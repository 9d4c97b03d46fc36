"""The report file: its body, the commands that remake it, and where it is written.

:func:`write_report` writes ``report.md`` (and its figures) for one or more sweep folders: the
sweep report (:mod:`biasleak.sim.report.sweep`) or, with ``paper=``, the comparison with one of
the paper's tables or figures (:mod:`biasleak.sim.report.paper`). Every report ends with a
"Reproduce" section: the ``biasleak sweep`` command that made each folder, read from the folder's
``sweep.json`` (a folder without one says so rather than guess), and the ``biasleak report``
command of the report itself. When the folders are exactly what ``biasleak paper NAME`` makes (the
item's scenario files, one source folder, one seed count, no overrides) the section adds that
one command as well. Paths are written as given, so a report names no machine.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from biasleak.sim.report.logs import load_rows
from biasleak.sim.report.paper import paper_body
from biasleak.sim.report.published import PAPER_FILES, PAPER_TITLES
from biasleak.sim.report.sweep import sweep_report
from biasleak.sim.sweep import SWEEP_FILE

__all__ = ["REPORT_FILE", "reproduce", "write_report"]

REPORT_FILE = "report.md"
"""The report's file name in its folder."""

PAPER_SCENARIOS = "scenarios/paper"
"""Where ``biasleak paper`` finds the scenario files unless told otherwise."""


def write_report(
    outs: str | Path | list[str | Path],
    *,
    paper: str | None = None,
    to: str | Path | None = None,
    risk_target: float | None = None,
) -> Path:
    """Write ``report.md`` (and figures) for one or more sweep folders; return its path.

    Parameters
    ----------
    outs
        The sweep folders (each with its ``results.jsonl``).
    paper
        One of the paper's items (``table1`` ... ``table4``, ``figure2``, ``figure3``) to compare
        with, or ``None`` for the sweep report.
    to
        The folder to write into; by default ``report/`` in the first sweep folder.
    risk_target
        The leakage (%) a policy must be proven not to exceed to be called safe in the sweep
        report's verdict per policy.
    """
    folders = [outs] if isinstance(outs, str | Path) else list(outs)
    target = Path(to) if to is not None else Path(folders[0]) / "report"
    target.mkdir(parents=True, exist_ok=True)
    if paper is None:
        text = sweep_report(folders, target, risk_target=risk_target)
    else:
        if paper not in PAPER_TITLES:
            raise ValueError(f"--paper must be one of {list(PAPER_TITLES)}; received {paper!r}")
        rows = load_rows(folders)
        body = paper_body(paper, rows, target)
        text = (
            "\n".join([f"# {PAPER_TITLES[paper]}", "", f"{len(rows)} finished runs.", "", *body])
            + "\n"
        )
    text += "\n".join(["", *reproduce(folders, paper, to, risk_target)]) + "\n"
    path = target / REPORT_FILE
    path.write_text(text, encoding="utf-8")
    return path


def _made_with(folder: str | Path) -> tuple[str, Any, list[str]] | None:
    """The scenario file, seed count and overrides a sweep folder was made with, if recorded."""
    made = Path(folder) / SWEEP_FILE
    if not made.exists():
        return None
    how = json.loads(made.read_text(encoding="utf-8"))
    return how["scenario_file"], how.get("seeds"), how.get("overrides") or []


def reproduce(
    folders: list[str | Path],
    paper: str | None,
    to: str | Path | None,
    risk_target: float | None = None,
) -> list[str]:
    """The commands that remake the sweep folders (from their ``sweep.json``) and this report."""
    commands = []
    made_with = []  # (scenario file, seeds, overrides) of each folder, where recorded
    for folder in folders:
        made = _made_with(folder)
        if made is None:  # a folder from before sweep.json: say so rather than guess
            commands.append(f"# {Path(folder).as_posix()}: made without a record of its command")
            continue
        made_with.append(made)
        file, count, overrides = made
        words = ["biasleak", "sweep", file]
        if count is not None:
            words += ["--seeds", str(count)]
        for override in overrides:
            words += ["--set", override]
        words += ["--workers", "2", "--out", Path(folder).as_posix()]
        commands.append(" ".join(shlex.quote(w) for w in words))
    words = ["biasleak", "report", *(Path(f).as_posix() for f in folders)]
    if paper is not None:
        words += ["--paper", paper]
    if to is not None:
        words += ["--to", Path(to).as_posix()]
    if risk_target is not None:
        words += ["--target", f"{risk_target:g}"]
    commands.append(" ".join(shlex.quote(w) for w in words))
    stems = tuple(Path(f).name for f in folders)
    parents = {Path(f).parent.as_posix() for f in folders}
    sources = {Path(m[0]).parent.as_posix() for m in made_with}
    seeds = {m[1] for m in made_with}
    if (
        paper is not None
        and stems == PAPER_FILES.get(paper)
        and len(made_with) == len(folders)
        and len(parents) == len(sources) == len(seeds) == 1
        and all(Path(m[0]).stem == stem for m, stem in zip(made_with, stems, strict=True))
        and not any(m[2] for m in made_with)
    ):  # the folders are what `biasleak paper` makes: say so in one command
        words = ["biasleak", "paper", paper]
        source = sources.pop()
        if source != PAPER_SCENARIOS:
            words += ["--scenarios", source]
        words += ["--sweeps", parents.pop()]
        count = seeds.pop()
        if count is not None:
            words += ["--seeds", str(count)]
        if to is not None:
            words += ["--to", Path(to).as_posix()]
        commands += [
            "# or the same in one command:",
            " ".join(shlex.quote(w) for w in [*words, "--workers", "2"]),
        ]
    return [
        "## Reproduce",
        "",
        "From the repository root (`--workers` only sets how many runs go at once; the results "
        "do not depend on it):",
        "",
        "```bash",
        *commands,
        "```",
    ]
