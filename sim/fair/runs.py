"""One run of each private fair-learning service, and fairlearn's non-private references, scored
on held-out people (the expected error and violation of the randomized classifier)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numpy.typing import NDArray

from biasleak.mechanisms.fair import (
    derived_probabilities,
    dp_postprocess,
    run_oracle_learner,
    score,
)
from biasleak.sim.fair.data import Prepared, rng_for
from biasleak.sim.fair.settings import CELL_MARGIN, INF, FairlearnMissing, Settings

__all__ = [
    "base_row",
    "exponentiated_gradient",
    "min_cell_size",
    "oracle",
    "postprocessing",
    "threshold_optimizer",
]


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


def postprocessing(prep: Prepared, settings: Settings, gamma: float, eps: float) -> dict[str, Any]:
    rng = rng_for(
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


def oracle(
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
    rng = rng_for(
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


def base_row(prep: Prepared) -> dict[str, Any]:
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


def threshold_optimizer(prep: Prepared, *, scores: bool) -> dict[str, Any]:
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


def exponentiated_gradient(prep: Prepared, gamma: float) -> dict[str, Any]:
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
