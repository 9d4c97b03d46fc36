"""Models a developer trains without the protected attribute.

A scikit-learn pipeline: one-hot encoding for categorical columns, standardisation for numeric
ones, logistic regression. It is trained on the public training split only (the protected column
is never among the features), and its predicted probabilities on the audit set are the ``h_0(X)``
that honest developers submit and that attacks perturb (Algorithms 1 and 2 of the paper).

Fitting dominates a world's cost, and the worlds of a red team, the points of a sweep and the
candidates of a policy search fit the same models on the same data again and again, so fits are
kept once per process (:func:`cached_fit`), keyed by the data objects and everything else that
determines them; a cached fit is bit for bit the fresh one (:func:`fresh_fits` turns it off).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.public import PublicView

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

T = TypeVar("T")


def build_pipeline(view: PublicView, *, C: float = 1.0) -> Pipeline:
    """An untrained pipeline for the columns of ``view`` (regularisation strength ``1/C``)."""
    # scikit-learn loads when a model is first built, not when a scenario is read
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    cat = [i for i, c in enumerate(view.columns) if c in view.categorical]
    num = [i for i, c in enumerate(view.columns) if c not in view.categorical]
    steps = []
    if cat:
        steps.append(("categorical", OneHotEncoder(handle_unknown="ignore"), cat))
    if num:
        steps.append(("numeric", StandardScaler(), num))
    return Pipeline(
        [
            ("encode", ColumnTransformer(steps)),
            ("classify", LogisticRegression(C=C, max_iter=5000)),
        ]
    )


@dataclass(frozen=True)
class BaseModel:
    """A trained model that maps public features to acceptance probabilities."""

    pipeline: Pipeline
    """The fitted scikit-learn pipeline."""
    C: float
    """Inverse regularisation strength it was trained with."""

    def predict_proba(self, view: PublicView) -> NDArray[np.float64]:
        """Probability of the favourable outcome for each person, shape (n,), in [0, 1]."""
        proba = self.pipeline.predict_proba(view.features)[:, 1]
        return np.clip(np.asarray(proba, dtype=np.float64), 0.0, 1.0)

    def accuracy(self, view: PublicView, *, threshold: float = 0.5) -> float:
        """Accuracy of the thresholded predictions against the view's labels."""
        return float(np.mean((self.predict_proba(view) >= threshold) == (view.labels == 1)))


def train_base_model(train: PublicView, *, C: float = 1.0) -> BaseModel:
    """Fit the base model on a training split (features and labels only)."""
    if len(np.unique(train.labels)) < 2:
        raise ValueError("the training split must contain both label values to fit a model")
    pipeline = build_pipeline(train, C=C)
    pipeline.fit(train.features, train.labels)
    return BaseModel(pipeline, C)


_FIT_CACHE_SIZE: Final = 32
"""Fitted results kept per process (a red team's worlds, a sweep's points, one design search)."""

_FITTED: OrderedDict[tuple[Any, ...], tuple[tuple[object, ...], Any]] = OrderedDict()
"""key -> (the anchor objects, the result), oldest first."""

_fit_cache_on = True

_COUNTS = {"hits": 0, "fits": 0}
"""How often a cached fit was reused and how often one was computed (see fit_cache_counts)."""


def frozen(array: NDArray[Any]) -> NDArray[Any]:
    """A copy of a numeric ``array`` over an immutable ``bytes`` buffer: no one can make it
    writeable, so a cached result shared by many worlds cannot be changed by one of them."""
    out = np.frombuffer(np.ascontiguousarray(array).tobytes(), dtype=array.dtype)
    return out.reshape(array.shape)


def cached_fit(anchors: tuple[object, ...], key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, once per process for the same anchors and key.

    ``anchors`` are the objects the result was fitted on (a public view, an audit set), matched
    by identity: the entry holds them, so their identities cannot be reused by other objects
    while it lives, and a view that is equal but not the same object is fitted afresh. ``key``
    is everything else that determines the result (configuration, random state). Fitting is
    deterministic (scikit-learn's solvers without random state), so a cached result is the
    result a fresh fit would give, bit for bit; results must be treated as read-only.
    """
    if not _fit_cache_on:
        _COUNTS["fits"] += 1
        return compute()
    full = (tuple(id(a) for a in anchors), key)
    entry = _FITTED.get(full)
    if entry is not None and all(x is y for x, y in zip(entry[0], anchors, strict=True)):
        _FITTED.move_to_end(full)
        _COUNTS["hits"] += 1
        return cast(T, entry[1])
    _COUNTS["fits"] += 1
    result = compute()
    _FITTED[full] = (anchors, result)
    while len(_FITTED) > _FIT_CACHE_SIZE:
        _FITTED.popitem(last=False)
    return result


@contextmanager
def fresh_fits() -> Iterator[None]:
    """Within the block, every fit is computed afresh and nothing is cached (for tests and
    benchmarks that compare against the uncached path)."""
    global _fit_cache_on
    previous, _fit_cache_on = _fit_cache_on, False
    try:
        yield
    finally:
        _fit_cache_on = previous


def clear_fit_cache() -> None:
    """Forget every cached fit."""
    _FITTED.clear()


def fit_cache_counts() -> dict[str, int]:
    """How many cached fits were reused (``hits``) and computed (``fits``) in this process."""
    return dict(_COUNTS)
