"""The data every run of a process shares: loaded, the base model trained, the proxy measured.

:func:`prepared` loads a scenario's data, trains the base model on the public training split and
measures the proxy-only baseline once per (data config, seed, C) in a process; :func:`encoded`
encodes the features for the fair-learning services. Everything they return is shared by every
run in the process, so its numeric arrays are immutable (:func:`immutable`): no run can alter
another's data.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.models import build_pipeline, train_base_model
from biasleak.agents.public import PublicView
from biasleak.agents.strategies.adaptive import proxy_estimate, proxy_scores
from biasleak.sim import datasets
from biasleak.sim.evaluation import leakage

__all__ = ["dense", "draw_key", "encoded", "frozen_view", "immutable", "prepared"]


def immutable(array: np.ndarray) -> np.ndarray:
    """The same values and dtype, backed by an immutable ``bytes`` buffer.

    Setting ``flags.writeable = False`` on an array that owns its memory is a request: anyone
    may set it back to True. An array over a ``bytes`` object cannot be made writeable at all,
    so no run can change the data another run in the same process will read. Arrays of Python
    objects (the features, whose categorical columns hold strings) cannot live in a byte buffer;
    they are frozen by the flag, which the library's own strategies respect, while strategies
    from outside the package only ever see their own copy, in their own process
    (:mod:`biasleak.agents.sandbox`).
    """
    if array.dtype.hasobject:
        array.flags.writeable = False
        return array
    return np.frombuffer(array.tobytes(), dtype=array.dtype).reshape(array.shape)


def frozen_view(view: PublicView) -> PublicView:
    view.features.flags.writeable = False  # object array: see _immutable
    return replace(view, labels=immutable(view.labels))


def draw_key(scenario: Any, run_seed: int) -> tuple[str, int, float]:
    """What a run's data draw depends on: ``(data config as JSON, data seed, C)``, the
    arguments of :func:`prepared` and :func:`encoded`. Runs with the same key share the data,
    the base model and the proxy (and the fits made on them) in one process."""
    data_cfg = scenario.data.model_dump(mode="json", exclude_none=True)
    data_seed = scenario.data.seed if scenario.data.seed is not None else int(run_seed)
    return json.dumps(data_cfg, sort_keys=True), data_seed, scenario.model.C


@lru_cache(maxsize=8)
def prepared(
    data_json: str, data_seed: int, C: float
) -> tuple[Any, np.ndarray, float, PublicView | None, float | None, np.ndarray | None]:
    """Load the data, train the base model and measure the proxy-only baseline, once per
    (data config, seed, C) in a process. The last item is the proxy model's probability that each
    audit-set person is advantaged (for the evaluator's proxy-prior ceiling), or None.

    Everything returned is shared by every run in this process, so its numeric arrays are
    immutable (:func:`immutable`): no run can alter another's data."""
    options = json.loads(data_json)
    name = options.pop("dataset")
    options.pop("seed", None)
    if name == "synthetic":
        options["n0"] = options.pop("minority")
    loaded = datasets.load(name, seed=data_seed, **options)
    public = loaded.public
    data = replace(
        loaded,
        public=replace(public, train=frozen_view(public.train), audit=frozen_view(public.audit)),
        protected=immutable(loaded.protected),
        train_protected=immutable(loaded.train_protected),
    )
    model = train_base_model(data.public.train, C=C)
    h0 = immutable(model.predict_proba(data.public.audit))
    train = data.public.train
    if not data.train_disjoint:  # the training split holds the audit people: no proxy sample
        return data, h0, model.accuracy(data.public.audit), None, None, None
    # An external labelled sample for proxy models: the training split's features with its
    # attribute, standing for a public survey. Never the audit set's attribute.
    proxy = PublicView(train.features, data.train_protected, train.columns, train.categorical)
    p = proxy_scores(proxy, data.public.audit)  # the same fit a proxy attacker makes
    baseline, _ = leakage(proxy_estimate(p, data.n0), data.protected)
    return data, h0, model.accuracy(data.public.audit), proxy, baseline, immutable(p)


def dense(matrix: Any) -> NDArray[np.float64]:
    dense = matrix.toarray() if hasattr(matrix, "toarray") else matrix
    return np.asarray(dense, dtype=np.float64)


@lru_cache(maxsize=8)
def encoded(
    data_json: str, data_seed: int, C: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int8]]:
    """(audit features, training features, the base model's 0/1 decisions on the training split).

    The features are encoded the way the base model's pipeline encodes them (one-hot categorical
    columns, standardised numeric ones), fitted on the training split. Computed only for runs
    with fair-learning services, so other runs do not pay for it.
    """
    data, *_ = prepared(data_json, data_seed, C)
    train = data.public.train
    encoder = build_pipeline(train, C=C).named_steps["encode"]
    encoder.fit(train.features)
    x_audit = dense(encoder.transform(data.public.audit.features))
    x_train = dense(encoder.transform(train.features))
    base = (train_base_model(train, C=C).predict_proba(train) >= 0.5).astype(np.int8)
    return immutable(x_audit), immutable(x_train), immutable(base)
