"""The checks every policy runs first, whatever its stages: a readable request, then suspensions.

**validate**: for a query, the metric is one the policy answers; predictions are numbers in
[0, 1], finite, of shape (n,) or (m, n) with n the audit-set size; at most ``max_models`` models.
A query the policy cannot read is refused with ``invalid`` (or ``metric_not_allowed`` for a
well-formed query of a metric the policy does not answer, so that a strategy can switch metric
without parsing prose). A service request or a publication is one release; its own run reads
its submission (:meth:`~biasleak.mechanisms.policy.ReleaseRun.admit`: ``invalid`` for one it
cannot read, ``service_unavailable`` for a service not offered). **suspended?**: identities and
organisations suspended after an auditor's alert are refused with ``suspended``, whatever they
ask for.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from biasleak.mechanisms._validation import as_predictions
from biasleak.mechanisms.policy._stage import Pending, Refused
from biasleak.mechanisms.policy._state import REQUEST_KINDS

__all__ = ["REFUSALS", "suspension", "validate"]

REFUSALS: Final[dict[str, str]] = {
    "invalid": "the query cannot be read, or its metric is undefined on the audit set",
    "metric_not_allowed": "the policy does not answer this metric",
    "suspended": "the identity or its organisation is suspended",
    "service_unavailable": "the compliance team does not offer the requested fair-learning "
    "service (or not with that learner)",
}
"""Refusal codes of the always-on checks."""

RAGGED: Final = (
    "predictions must be an array of shape (n,) or (m, n); received rows of different lengths "
    "or values that are not numbers"
)
NOT_ANSWERED: Final = "metric {metric!r} is not answered; allowed: {allowed}"
WRONG_N: Final = (
    "predictions must have one value per audit-set person, n = {n}; received {received}"
)
TOO_MANY: Final = "a query may hold at most {most} models; received {m}"
UNKNOWN_KIND: Final = "a request is one of {kinds}; received kind {kind!r}"
NO_RUN: Final = "a {kind} request must come with the run that releases it"


def validate(q: Pending) -> Refused | None:
    """Read the predictions into ``q.h`` (shape (m, n)) or refuse the request."""
    request, policy = q.request, q.policy
    if request.kind != "query":
        return _admit_own_run(q)
    try:
        raw = np.asarray(request.predictions)
    except Exception:  # ragged nested lists, or an object whose conversion fails in any way
        return Refused("invalid", RAGGED)
    q.models = int(raw.shape[0]) if raw.ndim == 2 else 1
    if not isinstance(request.metric, str) or request.metric not in policy.metrics:
        detail = NOT_ANSWERED.format(metric=request.metric, allowed=list(policy.metrics))
        return Refused("metric_not_allowed", detail)
    try:
        h = as_predictions(raw)
    except ValueError as err:
        return Refused("invalid", str(err))
    if h.ndim == 1:
        h = h[None, :]
    if h.shape[1] != q.audit.n:
        return Refused("invalid", WRONG_N.format(n=q.audit.n, received=h.shape[1]))
    m = h.shape[0]
    if m > policy.max_models:
        return Refused("invalid", TOO_MANY.format(most=policy.max_models, m=m))
    q.h = h
    q.cached = [False] * m
    q.new_rows = list(range(m))
    return None


def _admit_own_run(q: Pending) -> Refused | None:
    """A service request or a publication is one release: its own run reads the submission."""
    request = q.request
    if request.kind not in REQUEST_KINDS:
        return Refused("invalid", UNKNOWN_KIND.format(kinds=list(REQUEST_KINDS), kind=request.kind))
    if request.run is None:
        return Refused("invalid", NO_RUN.format(kind=request.kind))
    q.models = 1
    q.h = np.zeros((0, q.audit.n))
    refused = request.run.admit(q)
    if refused is not None:
        return refused
    q.cached = [False]
    q.new_rows = [0]
    return None


def suspension(q: Pending) -> Refused | None:
    """Refuse queries of suspended identities and organisations."""
    request, state = q.request, q.state
    if request.identity in state.suspended_identities:
        return Refused("suspended", f"identity {request.identity!r} is suspended")
    if request.organization in state.suspended_organizations:
        return Refused("suspended", f"organisation {request.organization!r} is suspended")
    return None
