"""The experiments of "Differentially Private Fair Learning" (Jagielski et al. 2019), run here.

The compliance team can offer two private fair-learning services (:mod:`biasleak.mechanisms.fair`):
DP post-processing of a developer's base model (the seed's section 3) and the DP oracle learner
(section 4). Both promise an equalized-odds classifier that is differentially private in the
protected attribute A, and both pay for the privacy in accuracy and fairness. The paper measures
that price as Pareto frontiers of held-out error against realised equalized-odds violation, one
frontier per privacy level, on Communities and Crime. That data set is not bundled with biasleak,
so the experiments here run on the two that are: UCI Adult (protected attribute sex) and German
credit (sex, from its personal-status attribute).

Three experiments, each a list of plain rows (dicts) that :mod:`biasleak.sim.report.fair` turns
into a report:

``fair-postprocessing``
    For every fairness slack gamma and privacy level eps: a logistic regression trained without A
    on a training split gives 0/1 base predictions; the DP post-processing service releases the
    audit split's (prediction, group, label) table with Laplace noise of scale ``2/(m eps)`` and
    solves Hardt et al.'s linear program; the derived classifier is scored on held-out people.
``fair-inprocessing``
    The DP oracle learner over a gamma grid with ``B = 1/gamma``, on the audit split and on the
    audit split upsampled ten times (every row repeated). Repeating rows keeps the empirical
    distribution, so the non-private game is the same, while every (group, label) cell grows
    tenfold and with it the public cell-size bound the noise is calibrated to: the same eps buys
    ten times less noise. This is the seed's point about data set size.
``fair-convergence``
    Each service at one gamma as eps grows along a log grid up to ``inf``, beside fairlearn's
    non-private references on the same splits: ``ThresholdOptimizer`` for post-processing (given
    the same 0/1 base predictions, and given the base model's scores) and
    ``ExponentiatedGradient(LogisticRegression, EqualizedOdds)`` for in-processing. fairlearn is
    the optional extra ``fair``; without it the references are skipped and the report says so.

Every score is the expected error and violation of the randomized classifier on held-out people
(:func:`biasleak.mechanisms.fair.score` on probabilities), so the classifiers' own coin flips do
not add noise to the comparison. The violation is ``max(FPR gap, TPR gap)``.

Randomness: one root seed; each seed's data split and each run's noise come from their own
:class:`numpy.random.SeedSequence` child, keyed by a stable name (``split:adult``, the service,
gamma, eps, the upsampling factor), so adding a grid point changes no other run's draws, and the
rows do not depend on the number of workers.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.models import build_pipeline, train_base_model
from biasleak.agents.public import PublicView
from biasleak.mechanisms.digests import stable_int
from biasleak.mechanisms.fair import (
    derived_probabilities,
    dp_postprocess,
    run_oracle_learner,
    score,
)
from biasleak.sim.datasets import load_adult, load_german
from biasleak.sim.executors import pool, run_each
from biasleak.sim.paper_items import FAIR_EXPERIMENTS

__all__ = [
    "DATASETS",
    "FAIR_MISSING",
    "FairlearnMissing",
    "Job",
    "Outcome",
    "Prepared",
    "Settings",
    "fairlearn_available",
    "jobs_for",
    "min_cell_size",
    "prepare",
    "run_experiment",
    "run_job",
    "select",
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


# -------------------------------------------------------------------------------------------
# Settings
# -------------------------------------------------------------------------------------------


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


# -------------------------------------------------------------------------------------------
# Data: splits, encoded features, base model
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Part:
    """One split of people: encoded features, labels, groups, base model's outputs."""

    x: NDArray[np.float64] = field(repr=False)
    """(n, d) features as the base model's pipeline encodes them (one-hot, standardised)."""
    y: NDArray[np.int64] = field(repr=False)
    """(n,) labels."""
    a: NDArray[np.int64] = field(repr=False)
    """(n,) protected attribute (1 = advantaged)."""
    base: NDArray[np.int64] = field(repr=False)
    """(n,) the base model's 0/1 decisions (threshold 0.5)."""
    base_score: NDArray[np.float64] = field(repr=False)
    """(n,) the base model's probability of the favourable label."""

    @property
    def n(self) -> int:
        """Number of people."""
        return int(self.y.size)


@dataclass(frozen=True, eq=False)
class Prepared:
    """One seed's data: the audit split (the compliance team's S) and held-out people."""

    dataset: str
    """Key of :data:`DATASETS`."""
    seed: int
    """The seed index it was drawn for."""
    audit: Part
    """Where the services learn (post-processing's table, the oracle learner's game)."""
    held_out: Part
    """Where every classifier is scored (disjoint from the audit split and the training split)."""
    train_size: int
    """People the base model was trained on."""
    cell_share: float
    """Smallest (group, label) share in the training split: the public estimate the oracle
    learner's cell-size bound comes from (the training split is other people)."""


def _rng(settings: Settings, *keys: object) -> np.random.Generator:
    """A generator for one purpose, keyed by stable names: independent of every other one."""
    key = tuple(stable_int(str(k)) for k in keys)
    return np.random.default_rng(np.random.SeedSequence(settings.root_seed, spawn_key=key))


def _view(view: PublicView, idx: NDArray[np.int64]) -> PublicView:
    return PublicView(view.features[idx], view.labels[idx], view.columns, view.categorical)


def _dense(matrix: Any) -> NDArray[np.float64]:
    dense = matrix.toarray() if hasattr(matrix, "toarray") else matrix
    return np.asarray(dense, dtype=np.float64)


def _part(view: PublicView, a: NDArray[Any], encoder: Any, model: Any) -> Part:
    score_ = model.predict_proba(view)
    return Part(
        x=_dense(encoder.transform(view.features)),
        y=view.labels.astype(np.int64),
        a=np.asarray(a, dtype=np.int64),
        base=(score_ >= 0.5).astype(np.int64),
        base_score=score_,
    )


def _smallest_share(y: NDArray[Any], a: NDArray[Any]) -> float:
    cells = np.bincount(
        2 * np.asarray(a, dtype=np.int64) + np.asarray(y, dtype=np.int64), minlength=4
    )
    return float(cells.min() / cells.sum())


@lru_cache(maxsize=2)
def _adult() -> tuple[Any, Any, Any, float]:
    """Adult once per process: the data, the encoder and base model fitted on the training split
    (the same for every seed), and the training split's smallest cell share."""
    data = load_adult(protected="sex")
    train = data.public.train
    encoder = build_pipeline(train).named_steps["encode"].fit(train.features)
    model = train_base_model(train)
    return data, encoder, model, _smallest_share(train.labels, data.train_protected)


@lru_cache(maxsize=1)
def _german() -> Any:
    return load_german()


@lru_cache(maxsize=8)
def prepare(dataset: str, seed: int, settings: Settings) -> Prepared:
    """Seed ``seed``'s splits of ``dataset``, encoded, with the base model's decisions.

    Adult: the base model and the encoder are fitted on the training split (32,561 people); the
    audit split is ``adult_audit`` people drawn from the test split, the rest of the test split
    is held out. German credit (1,000 people, no test split): a random split into training,
    audit and held-out people of the sizes in ``german_split``; the base model and the encoder
    are fitted on the training part.
    """
    rng = _rng(settings, f"split:{dataset}", seed)
    if dataset == "adult":
        data, encoder, model, share = _adult()
        pool_view, pool_a = data.public.audit, data.protected
        order = rng.permutation(len(pool_view))
        audit_idx, held_idx = (
            np.sort(order[: settings.adult_audit]),
            np.sort(order[settings.adult_audit :]),
        )
        train_size = len(data.public.train)
    elif dataset == "german":
        data = _german()
        pool_view, pool_a = data.public.audit, data.protected
        n_train, n_audit, n_held = settings.german_split
        order = rng.permutation(len(pool_view))
        train_idx = np.sort(order[:n_train])
        audit_idx = np.sort(order[n_train : n_train + n_audit])
        held_idx = np.sort(order[n_train + n_audit : n_train + n_audit + n_held])
        train = _view(pool_view, train_idx)
        encoder = build_pipeline(train).named_steps["encode"].fit(train.features)
        model = train_base_model(train)
        share = _smallest_share(train.labels, pool_a[train_idx])
        train_size = n_train
    else:
        raise ValueError(UNKNOWN_DATASET.format(allowed=list(DATASETS), name=dataset))
    return Prepared(
        dataset=dataset,
        seed=seed,
        audit=_part(_view(pool_view, audit_idx), pool_a[audit_idx], encoder, model),
        held_out=_part(_view(pool_view, held_idx), pool_a[held_idx], encoder, model),
        train_size=train_size,
        cell_share=share,
    )


# -------------------------------------------------------------------------------------------
# One run of each service, scored on held-out people
# -------------------------------------------------------------------------------------------


def _row(prep: Prepared, method: str, **values: Any) -> dict[str, Any]:
    return {"dataset": prep.dataset, "seed": prep.seed, "method": method, **values}


def _scored(prep: Prepared, probabilities: NDArray[np.float64]) -> dict[str, Any]:
    h = prep.held_out
    s = score(h.y, probabilities, protected=h.a)
    return {
        "error": s.error,
        "violation": s.eo_violation,
        "fpr_gap": s.fpr_gap,
        "tpr_gap": s.tpr_gap,
        "status": "ok",
    }


def _postprocessing(prep: Prepared, settings: Settings, gamma: float, eps: float) -> dict[str, Any]:
    rng = _rng(
        settings, "dp_postprocessing", prep.dataset, prep.seed, f"gamma={gamma}", f"eps={eps}"
    )
    au = prep.audit
    result = dp_postprocess(au.base, protected=au.a, labels=au.y, epsilon=eps, rng=rng, gamma=gamma)
    probs = derived_probabilities(result.mixing, prep.held_out.base, protected=prep.held_out.a)
    return _row(
        prep,
        "dp_postprocessing",
        gamma=gamma,
        epsilon=eps,
        upsample=1,
        m=result.m,
        noise_scale=result.noise_scale,
        **_scored(prep, probs),
    )


def min_cell_size(prep: Prepared, upsample: int) -> int:
    """The oracle learner's public lower bound on every (group, label) cell of the (upsampled)
    audit split: :data:`CELL_MARGIN` times the training split's smallest share times m.

    The share comes from other people than the audit split's, so the bound, and with it the
    noise scale, does not depend on the audit split's attributes.
    """
    return max(2, math.floor(CELL_MARGIN * prep.cell_share * prep.audit.n * upsample))


def _oracle(
    prep: Prepared, settings: Settings, gamma: float, eps: float, upsample: int
) -> dict[str, Any]:
    au = prep.audit
    bound = min_cell_size(prep, upsample)
    values: dict[str, Any] = {
        "gamma": gamma,
        "epsilon": eps,
        "upsample": upsample,
        "m": au.n * upsample,
        "bound": 1.0 / gamma,
        "rounds": settings.rounds,
        "min_cell_size": bound,
    }
    cells = np.bincount(2 * au.a + au.y, minlength=4) * upsample
    if cells.min() < bound:  # the service refuses (one bit that depends on A)
        return _row(prep, "dp_oracle_learner", **values, status="refused")
    rng = _rng(
        settings,
        "dp_oracle_learner",
        prep.dataset,
        prep.seed,
        f"gamma={gamma}",
        f"eps={eps}",
        f"upsample={upsample}",
    )
    x = np.repeat(au.x, upsample, axis=0) if upsample > 1 else au.x
    y = np.repeat(au.y, upsample) if upsample > 1 else au.y
    a = np.repeat(au.a, upsample) if upsample > 1 else au.a
    result = run_oracle_learner(
        x,
        y,
        protected=a,
        epsilon=eps,
        delta=settings.delta,
        gamma=gamma,
        bound=1.0 / gamma,
        rounds=settings.rounds,
        rng=rng,
        accountant=settings.accountant,
        min_cell_size=bound,
    )
    return _row(
        prep,
        "dp_oracle_learner",
        **values,
        per_mechanism_epsilon=result.budget.per_mechanism,
        learner_scale=result.learner_scale,
        auditor_scale=result.auditor_scale,
        **_scored(prep, result.predict_proba(prep.held_out.x)),
    )


def _base(prep: Prepared) -> dict[str, Any]:
    """The base model itself, and the error of answering the held-out majority label to all."""
    share = float(np.mean(prep.held_out.y))
    return _row(
        prep,
        "base_model",
        gamma=None,
        epsilon=INF,
        upsample=1,
        m=prep.audit.n,
        constant_error=min(share, 1.0 - share),
        **_scored(prep, prep.held_out.base.astype(np.float64)),
    )


# -------------------------------------------------------------------------------------------
# fairlearn's non-private references
# -------------------------------------------------------------------------------------------


@contextmanager
def _quiet() -> Iterator[None]:
    """fairlearn under recent pandas warns about indexing patterns pandas deprecates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _threshold_optimizer(prep: Prepared, *, scores: bool) -> dict[str, Any]:
    """fairlearn's ThresholdOptimizer(equalized_odds) fitted on the audit split, given either
    the same 0/1 base predictions the service sees or the base model's scores."""
    try:
        from fairlearn.postprocessing import ThresholdOptimizer
    except ImportError as err:
        raise FairlearnMissing() from err
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Passthrough(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
        """A prefit 'model' whose prediction is its only feature."""

        def fit(self, x: Any, y: Any) -> Passthrough:
            return self

        def predict(self, x: Any) -> Any:
            return np.asarray(x)[:, 0]

        def __sklearn_is_fitted__(self) -> bool:
            return True

    au, ho = prep.audit, prep.held_out
    column = "base_score" if scores else "base"
    opt = ThresholdOptimizer(
        estimator=Passthrough(), constraints="equalized_odds", prefit=True, predict_method="predict"
    )
    with _quiet():
        opt.fit(getattr(au, column)[:, None].astype(float), au.y, sensitive_features=au.a)
        held = getattr(ho, column)[:, None].astype(float)
        probs = np.asarray(opt._pmf_predict(held, sensitive_features=ho.a)[:, 1])
    method = "threshold_optimizer_scores" if scores else "threshold_optimizer"
    return _row(prep, method, gamma=0.0, epsilon=INF, upsample=1, m=au.n, **_scored(prep, probs))


def _exponentiated_gradient(prep: Prepared, gamma: float) -> dict[str, Any]:
    """fairlearn's ExponentiatedGradient(LogisticRegression, EqualizedOdds(gamma)) on the audit
    split (upsampling repeats rows, which leaves this non-private reference unchanged)."""
    try:
        from fairlearn.reductions import EqualizedOdds, ExponentiatedGradient
    except ImportError as err:
        raise FairlearnMissing() from err
    from sklearn.linear_model import LogisticRegression

    au = prep.audit
    eg = ExponentiatedGradient(
        LogisticRegression(max_iter=5000), constraints=EqualizedOdds(difference_bound=gamma)
    )
    with _quiet():
        eg.fit(au.x, au.y, sensitive_features=au.a)
        probs = np.asarray(eg._pmf_predict(prep.held_out.x)[:, 1])
    return _row(
        prep,
        "exponentiated_gradient",
        gamma=gamma,
        epsilon=INF,
        upsample=1,
        m=au.n,
        **_scored(prep, probs),
    )


# -------------------------------------------------------------------------------------------
# Jobs
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One worker's share: one (data set, seed) and, for the oracle learner, one upsampling."""

    settings: Settings
    dataset: str
    seed: int
    part: str
    """``postprocessing``, ``oracle`` or ``references``."""
    upsample: int = 1


def run_job(job: Job) -> list[dict[str, Any]]:
    """The rows of one job (module docstring); runs in a worker process."""
    s = job.settings
    prep = prepare(job.dataset, job.seed, s)
    rows: list[dict[str, Any]] = []
    if job.part == "postprocessing":
        gammas = (0.0,) if s.name == "fair-convergence" else s.gammas
        rows.append(_base(prep))
        for gamma in gammas:
            for eps in s.epsilons:
                rows.append(_postprocessing(prep, s, gamma, eps))
    elif job.part == "oracle":
        if s.name == "fair-inprocessing" and job.upsample == min(s.upsample):
            rows.append(_base(prep))
        gammas = (s.convergence_gamma,) if s.name == "fair-convergence" else s.gammas
        for gamma in gammas:
            for eps in s.epsilons:
                rows.append(_oracle(prep, s, gamma, eps, job.upsample))
    elif job.part == "references":
        rows.append(_threshold_optimizer(prep, scores=False))
        rows.append(_threshold_optimizer(prep, scores=True))
        rows.append(_exponentiated_gradient(prep, s.convergence_gamma))
    else:
        raise ValueError(
            f"job part must be postprocessing, oracle or references; received {job.part!r}"
        )
    return rows


def jobs_for(settings: Settings, *, references: bool = True) -> list[Job]:
    """Every job of an experiment, largest first (so a pool finishes together)."""
    for d in settings.datasets:
        if d not in DATASETS:
            raise ValueError(UNKNOWN_DATASET.format(allowed=list(DATASETS), name=d))
    out: list[Job] = []
    for d in settings.datasets:
        for k in range(settings.seeds):
            if settings.name in ("fair-inprocessing", "fair-convergence"):
                out += [
                    Job(settings, d, k, "oracle", u)
                    for u in sorted(settings.upsample, reverse=True)
                ]
            if settings.name in ("fair-postprocessing", "fair-convergence"):
                out.append(Job(settings, d, k, "postprocessing"))
            if settings.name == "fair-convergence" and references:
                out.append(Job(settings, d, k, "references"))
    order = {"oracle": 0, "references": 1, "postprocessing": 2}
    return sorted(out, key=lambda j: (order[j.part], -j.upsample))


@dataclass(frozen=True)
class Outcome:
    """An experiment's rows and what the report needs to say about how they were made."""

    settings: Settings
    rows: list[dict[str, Any]]
    """One dict per run (and per reference), sorted by data set, method, gamma, eps, seed."""
    seconds: float
    """Wall time of the runs."""
    workers: int
    """Parallel workers used."""
    skipped: list[str]
    """Lines on what was left out (the fairlearn references without the ``fair`` extra)."""


def _sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    g = row.get("gamma")
    return (
        row["dataset"],
        row["method"],
        row.get("upsample", 1),
        -1.0 if g is None else g,
        row.get("epsilon", INF),
        row["seed"],
    )


def run_experiment(
    settings: Settings,
    *,
    workers: int = 1,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Outcome:
    """Run every job of ``settings`` (in a process pool when ``workers > 1``) and return the
    rows. The rows do not depend on ``workers``."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1; received {workers!r}")
    skipped: list[str] = []
    references = True
    if settings.name == "fair-convergence" and not fairlearn_available():
        references = False
        skipped.append(f"skipped the fairlearn references: {FAIR_MISSING}")
    jobs = jobs_for(settings, references=references)
    rows: list[dict[str, Any]] = []

    def keep(found: list[dict[str, Any]]) -> None:
        rows.extend(found)
        if on_rows is not None:
            on_rows(found)

    start = time.perf_counter()
    with pool("process", workers=workers) as executor:
        if executor is None:
            for job in jobs:
                keep(run_job(job))
        else:
            run_each(executor, run_job, [(j,) for j in jobs], keep=keep)
    seconds = time.perf_counter() - start
    return Outcome(settings, sorted(rows, key=_sort_key), seconds, workers, skipped)


def select(rows: Iterable[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    """The rows whose keys equal every given value (``status`` ``ok`` only)."""
    return [
        r for r in rows if r.get("status") == "ok" and all(r.get(k) == v for k, v in match.items())
    ]
