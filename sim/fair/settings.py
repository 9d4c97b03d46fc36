"""The fair-learning experiments' settings: the data sets, an experiment's grid, the full and
the quick grids, and whether fairlearn (the non-private references) is installed."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

from biasleak.sim.paper_items import FAIR_EXPERIMENTS

__all__ = [
    "CELL_MARGIN",
    "DATASETS",
    "FAIR_MISSING",
    "FULL",
    "INF",
    "QUICK",
    "UNKNOWN_DATASET",
    "FairlearnMissing",
    "Settings",
    "fairlearn_available",
    "settings_for",
]


DATASETS: Final[dict[str, str]] = {
    "adult": "UCI Adult, protected attribute sex (Male = 1, Female = 0)",
    "german": "UCI German credit, protected attribute sex from personal status (male = 1)",
}
"""The data sets the experiments run on, and what A is in each."""

FAIR_MISSING: Final = (
    "the fairlearn references need the optional extra 'fair': pip install 'biasleak[fair]' "
    "(module 'fairlearn' is not installed)"
)
UNKNOWN_EXPERIMENT: Final = "experiment must be one of {allowed}; received {name!r}"
UNKNOWN_DATASET: Final = "datasets must be among {allowed}; received {name!r}"
CELL_MARGIN: Final = 0.75
"""The oracle learner's public cell-size bound is this share of the expected smallest cell."""


class FairlearnMissing(ImportError):
    """fairlearn is not installed; the message names the extra that installs it."""

    def __init__(self) -> None:
        super().__init__(FAIR_MISSING)
        self.extra = "fair"
        """The extra that installs fairlearn."""
        self.purpose = "the fairlearn references"
        """What the experiments use fairlearn for."""


def fairlearn_available() -> bool:
    """Whether fairlearn can be imported."""
    try:
        import fairlearn  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Settings:
    """Everything that decides an experiment's rows (the report prints all of it)."""

    name: str
    """One of :data:`~biasleak.sim.paper_items.FAIR_EXPERIMENTS`."""
    seeds: int
    """Seeds per grid point; each seed draws its own splits and noise."""
    gammas: tuple[float, ...]
    """Fairness slack of the equalized-odds constraints (the grid of the frontiers)."""
    epsilons: tuple[float, ...]
    """Privacy levels (``inf``: the non-private service)."""
    datasets: tuple[str, ...] = ("adult", "german")
    """Keys of :data:`DATASETS`."""
    upsample: tuple[int, ...] = (1,)
    """Row-repetition factors of the oracle learner's audit split."""
    rounds: int = 20
    """T of the oracle learner (2T Laplace mechanisms)."""
    delta: float = 1e-6
    """Total delta of the oracle learner."""
    accountant: str = "pld"
    """How the oracle learner splits (eps, delta) over its 2T mechanisms."""
    convergence_gamma: float = 0.05
    """The oracle learner's gamma in ``fair-convergence`` (post-processing uses 0 there, exact
    equalized odds as fairlearn's ThresholdOptimizer)."""
    adult_audit: int = 2000
    """Adult: audit split size, drawn from the test split; the rest of it is held out."""
    german_split: tuple[int, int, int] = (300, 400, 300)
    """German credit: (training, audit, held-out) sizes of each seed's random split."""
    root_seed: int = 0
    """The seed every split and noise stream derives from."""

    def to_json(self) -> dict[str, Any]:
        """The settings as plain values (``inf`` as the string ``"inf"``)."""
        out = asdict(self)
        out["epsilons"] = ["inf" if math.isinf(e) else e for e in self.epsilons]
        return out


INF = math.inf

FULL: Final[dict[str, Settings]] = {
    "fair-postprocessing": Settings(
        "fair-postprocessing",
        seeds=20,
        gammas=(0.0, 0.01, 0.02, 0.05, 0.1, 0.2),
        epsilons=(0.1, 0.3, 1.0, 2.0, 3.0, 5.0, INF),
    ),
    "fair-inprocessing": Settings(
        "fair-inprocessing",
        seeds=5,
        gammas=(0.01, 0.02, 0.05, 0.1, 0.2),
        epsilons=(1.0, 10.0, 100.0, 1e3, 1e4, 1e5, INF),
        upsample=(1, 10),
    ),
    "fair-convergence": Settings(
        "fair-convergence",
        seeds=5,
        gammas=(0.05,),
        epsilons=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1e3, 1e4, 1e5, 1e6, INF),
        upsample=(1, 10),
    ),
}
"""The grids the committed reports were made with."""

QUICK: Final[dict[str, dict[str, Any]]] = {
    "fair-postprocessing": {"seeds": 2, "gammas": (0.0, 0.1), "epsilons": (1.0, INF)},
    "fair-inprocessing": {
        "seeds": 2,
        "gammas": (0.05, 0.2),
        "epsilons": (10.0, INF),
        "rounds": 5,
    },
    "fair-convergence": {"seeds": 1, "epsilons": (1.0, 1e4, INF), "rounds": 5},
}
"""``--quick``: a grid small enough for a smoke test (a few seconds per experiment)."""


def settings_for(name: str, *, seeds: int | None = None, quick: bool = False) -> Settings:
    """The settings of experiment ``name``: the full grid, or the ``quick`` one; ``seeds``
    overrides the number of seeds."""
    if name not in FULL:
        raise ValueError(UNKNOWN_EXPERIMENT.format(allowed=list(FAIR_EXPERIMENTS), name=name))
    chosen = replace(FULL[name], **QUICK[name]) if quick else FULL[name]
    if quick:
        chosen = replace(chosen, adult_audit=1000)
    if seeds is not None:
        if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
            raise ValueError(f"seeds must be an integer >= 1; received {seeds!r}")
        chosen = replace(chosen, seeds=seeds)
    return chosen
