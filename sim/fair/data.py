"""The fair-learning experiments' data: each seed's splits of a data set, encoded, with the base
model's decisions (Adult's base model is fitted once per process, on its training split)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.models import build_pipeline, train_base_model
from biasleak.agents.public import PublicView
from biasleak.mechanisms.digests import stable_int
from biasleak.sim.datasets import load_adult, load_german
from biasleak.sim.fair.settings import DATASETS, UNKNOWN_DATASET, Settings

__all__ = ["Part", "Prepared", "prepare", "rng_for"]


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


def rng_for(settings: Settings, *keys: object) -> np.random.Generator:
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
    rng = rng_for(settings, f"split:{dataset}", seed)
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
