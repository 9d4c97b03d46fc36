"""Models a developer trains without the protected attribute.

A scikit-learn pipeline: one-hot encoding for categorical columns, standardisation for numeric
ones, logistic regression. It is trained on the public training split only (the protected column
is never among the features), and its predicted probabilities on the audit set are the ``h_0(X)``
that honest developers submit and that attacks perturb (Algorithms 1 and 2 of the paper).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from biasleak.agents.public import PublicView


def build_pipeline(view: PublicView, *, C: float = 1.0) -> Pipeline:
    """An untrained pipeline for the columns of ``view`` (regularisation strength ``1/C``)."""
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
