"""The paper items biasleak reproduces, in one table that the command line, the experiment
runners and the reports read.

:data:`PAPER_ITEMS` are the Attribute-Reveal paper's tables and figures (their published numbers,
scenario files and titles live in ``report/published.json``, read here without importing the
report package, so that building the command line stays quick); :data:`FAIR_EXPERIMENTS` are the
fair-learning experiments of seed 002, each with its report title.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

__all__ = ["FAIR_EXPERIMENTS", "PAPER_ITEMS"]

PAPER_ITEMS: Final[tuple[str, ...]] = tuple(
    json.loads((Path(__file__).parent / "report" / "published.json").read_text("utf-8"))["items"]
)
"""The paper's tables and figures, as ``biasleak paper NAME`` and ``report --paper`` take them."""

FAIR_EXPERIMENTS: Final[dict[str, str]] = {
    "fair-postprocessing": "DP post-processing: Pareto frontiers of error and violation",
    "fair-inprocessing": "The DP oracle learner: Pareto frontiers, original and upsampled x10",
    "fair-convergence": "Both services as epsilon grows, beside fairlearn's references",
}
"""The fair-learning experiments (``biasleak paper NAME``) -> their report title."""
