"""Reports: what a sweep measured, as markdown tables and (with the ``plots`` extra) figures.

``biasleak report OUT... [--paper NAME] [--to DIR]`` calls :func:`write_report`.

Without ``--paper`` the report is the compliance officer's view of any sweep: one row per grid
point and developer with leakage (mean and spread over seeds, and the proxy-only baseline beside
it) and utility (the compliance team's median |answered - exact|, honest developers' metric error
and agreement with the exact-answer choice, the refusal rate), the strongest attack per policy
with its proven ceiling, then figures: the leakage of the strongest attacker against utility per
grid point with the Pareto front marked, leakage over simulated time and against the number of
answered models per attack, and privacy budget spent over time.

With ``--paper`` (``table1`` ... ``table4``, ``figure2``, ``figure3``) the report puts biasleak's
numbers beside the published ones (Hamman, Chen and Dutta 2023), with the run counts, and says
where they agree and where they do not. The paper's "Avg. SP err" is not defined precisely; the
report computes, from each run's log, the error of the attacker's batch of m answers under every
reading we tested: the mean and the median of ``|released - exact|`` per answer, the mean after
clamping released values to [-1, 1], the absolute mean of the signed errors, and the mean
divided by m.

Every report ends with the commands that remake it, read from each sweep folder's ``sweep.json``.
Without matplotlib a report is still written, with a line saying which figures it skipped and the
extra that draws them.

The package also holds the terminal tables of ``biasleak run`` and ``biasleak compare``
(:func:`format_run`, :func:`compare_rows`, :func:`aggregate`, :func:`format_compare`).

Modules, one concept each:

- :mod:`~biasleak.sim.report.published`: the paper's numbers, titles and scenario files (data
  in ``published.json``);
- :mod:`~biasleak.sim.report.logs`: the rows of sweep folders and the runs' logs, each log read
  once per report;
- :mod:`~biasleak.sim.report.stats`: means, spreads and how numbers print; the readings of
  Avg. SP err;
- :mod:`~biasleak.sim.report.sweep`: the sweep report;
- :mod:`~biasleak.sim.report.paper` and :mod:`~biasleak.sim.report.verdict`: the paper reports
  and the paragraph on where we agree;
- :mod:`~biasleak.sim.report.figures`: the figures (matplotlib);
- :mod:`~biasleak.sim.report.document`: the report file and its "Reproduce" section;
- :mod:`~biasleak.sim.report.tables`: the terminal tables of runs and comparisons.
"""

from __future__ import annotations

from biasleak.sim.report.document import write_report
from biasleak.sim.report.logs import ATTACKER, batch_errors
from biasleak.sim.report.published import PAPER, PAPER_FILES, PAPER_SOURCE, PAPER_TITLES
from biasleak.sim.report.stats import READING_NAMES, READINGS
from biasleak.sim.report.sweep import verdict_lines
from biasleak.sim.report.tables import aggregate, compare_rows, format_compare, format_run

__all__ = [
    "ATTACKER",
    "PAPER",
    "PAPER_FILES",
    "PAPER_SOURCE",
    "PAPER_TITLES",
    "READINGS",
    "READING_NAMES",
    "aggregate",
    "batch_errors",
    "compare_rows",
    "format_compare",
    "format_run",
    "verdict_lines",
    "write_report",
]
