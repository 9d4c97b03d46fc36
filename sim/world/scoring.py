"""The honest routes' deployed models, scored on people outside the audit set.

After the horizon, the evaluator scores the model each service user ended with (a fair-learning
service's model, or the model an honest developer chose on noisy metric answers), and the base
model, on the training split, and logs one ``service_evaluation`` event per such developer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.strategies import SERVICE_USER_KINDS
from biasleak.mechanisms.fair import derived_probabilities, score
from biasleak.sim.scenario import Scenario

__all__ = ["evaluate_services", "uses_services"]


def uses_services(resolved: Scenario) -> bool:
    return bool(resolved.compliance.services) or any(
        d.strategy.kind in SERVICE_USER_KINDS for d in resolved.developers
    )


def evaluate_services(
    built: list[tuple[Any, str, Any]],
    data: Any,
    encoded: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int8]],
    log: Any,
) -> None:
    """Score every honest route's deployed model and the base model on the training split.

    The routes: a fair-learning service's model (post-processing's derived classifier, the
    oracle learner's mixture) and, in the same terms, the model an honest developer deployed by
    choosing among candidates on noisy metric answers (``service`` ``metric_queries``). Runs
    without services are not scored this way (their logs stay as they were).
    """
    _, x_train, base = encoded
    train = data.public.train
    labels, protected = train.labels, data.train_protected
    try:
        reference = score(labels, base.astype(np.float64), protected=protected)
    except ValueError as err:  # a (group, label) cell of the training split is empty
        log.warning("service_evaluation_skipped", reason=f"on the training split: {err}")
        return
    for _, identity, strategy in built:
        if isinstance(strategy, str) or strategy.ATTACKS:
            continue
        if not strategy.USES_SERVICE:
            decisions = strategy.deployed_decisions(train)
            if decisions is None:
                continue
            service, final, treatment = "metric_queries", decisions.astype(np.float64), False
        elif getattr(strategy, "result", None) is not None:
            result = strategy.result  # type: ignore[attr-defined]
            service, treatment = result.service, result.disparate_treatment
            if result.mixing is not None:
                final = derived_probabilities(result.mixing, base, protected=protected)
            else:
                assert result.coefficients is not None and result.intercepts is not None
                scores = x_train @ result.coefficients.T + result.intercepts[None, :]
                rounds = scores.shape[1]
                weights = (
                    np.full(rounds, 1.0 / rounds) if result.weights is None else result.weights
                )
                final = (scores > 0.0).astype(np.float64) @ weights
        else:
            continue
        fair = score(labels, final, protected=protected)
        log.info(
            "service_evaluation",
            developer=identity,
            service=service,
            people=int(labels.shape[0]),
            error=fair.error,
            eo_violation=fair.eo_violation,
            fpr_gap=fair.fpr_gap,
            tpr_gap=fair.tpr_gap,
            base_error=reference.error,
            base_eo_violation=reference.eo_violation,
            disparate_treatment=treatment,
        )
