"""Reports of the private fair-learning experiments (Jagielski et al. 2019): Adult, German credit.

:func:`write_fair_report` turns an experiment's rows (:mod:`biasleak.sim.fair`) into
a folder: ``report.md`` with the command that made it, the data and every setting, tables of
held-out error and equalized-odds violation (mean ± sd over seeds, in percent), figures as PNG
and SVG (with the ``plots`` extra; without it the report says what it skipped) and ``rows.csv``
with every run. The report ends with a reading of the numbers, computed from them: how far each
private service is from its non-private self at each eps, from which eps on it stays close, and,
for the convergence experiment, how close it comes to fairlearn's non-private references.

The figures are the seed's: Pareto frontiers of error against violation with one curve per eps
(the points of a curve are the gamma grid), and convergence curves of error and violation
against eps with the references as horizontal lines.

Modules: :mod:`~biasleak.sim.report.fair.common` (grouping, means, distances),
:mod:`~biasleak.sim.report.fair.tables` (settings and tables),
:mod:`~biasleak.sim.report.fair.figures` and :mod:`~biasleak.sim.report.fair.reading` (the
closing reading); this module writes the folder.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from biasleak.sim.fair.experiment import Outcome
from biasleak.sim.paper_items import FAIR_EXPERIMENTS
from biasleak.sim.report.fair.common import Rows
from biasleak.sim.report.fair.figures import figure_lines
from biasleak.sim.report.fair.reading import reading_conv, reading_in, reading_post
from biasleak.sim.report.fair.tables import settings_lines, tables

__all__ = ["write_fair_report"]


def _write_rows(rows: Rows, path: Path) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for r in rows:
            writer.writerow(
                {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()}
            )


def write_fair_report(outcome: Outcome, *, to: str | Path, command: str) -> Path:
    """Write ``report.md``, ``rows.csv`` and the figures of ``outcome`` into ``to``; return the
    report's path. ``command`` is the command line that made the rows, printed at the top."""
    folder = Path(to)
    folder.mkdir(parents=True, exist_ok=True)
    s = outcome.settings
    _write_rows(outcome.rows, folder / "rows.csv")
    lines = [
        f"# {FAIR_EXPERIMENTS[s.name]}",
        "",
        'Jagielski, Kearns, Mao, Oprea, Roth, Sharifi-Malvajerdi and Ullman, "Differentially '
        "Private Fair Learning\" (ICML 2019), reproduced with biasleak's compliance services "
        "(`biasleak.mechanisms.fair`).",
        "",
        "Made with:",
        "",
        "```bash",
        command,
        "```",
        "",
        f"{len(outcome.rows)} rows in {outcome.seconds:.0f} s with {outcome.workers} "
        f"worker{'s' if outcome.workers != 1 else ''}; every run is in `rows.csv`.",
        "",
        *(f"Note: {line}" for line in outcome.skipped),
        *([""] if outcome.skipped else []),
        *settings_lines(outcome),
        *tables(outcome),
        *figure_lines(outcome, folder),
    ]
    reading = {
        "fair-postprocessing": reading_post,
        "fair-inprocessing": reading_in,
        "fair-convergence": reading_conv,
    }[s.name]
    lines += reading(outcome)
    path = folder / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path
