"""Answering policies: the compliance team's decision for one request, as a pure function.

Every release passes this one gate: a metric query, a service request (a private fair-learning
service, which the compliance side's service desk runs in place of the noise stage) or a
publication (figures the compliance team publishes, which reach every reader). A policy is the
set of metrics it answers and a set of stages; each stage applies to every kind of request
unless it says otherwise (the noise stage answers queries only; rate limits meter what
developers ask for, not publications). Whatever order a
scenario lists them in, they run in the order a careful compliance team would apply them, so
that nothing is charged for a request that is then refused and nothing is answered before it is
checked:

1. **validate** (always): the metric is allowed; predictions are numbers in [0, 1], finite, of
   shape (n,) or (m, n) with n the audit set size; at most ``max_models`` models.
2. **suspended?** (always): identities and organisations suspended after an alert are refused.
3. **rate_limit** (:mod:`.rate_limit`): a token bucket per identity or organisation holding
   ``per_day`` models, refilled continuously over a simulated day; one token per model (one per
   service request).
4. **cache** (:mod:`.cache`): a model asked before (same metric, identical predictions) gets the
   same released value again, free. Only the remaining models go on.
5. **refuse rules** (:mod:`.refuse_rules`): ``min_support`` and ``near_duplicate``.
6. **budget** (:mod:`.budget`): every budget stage's ledger must afford the release (for a
   publication, every reader's ledger).
7. **noise** (:mod:`.noise`): the exact metric, noise and output bounding (exact answers without
   a noise stage); for a service request or a publication, its own run instead.
8. then every stage records what the answer spends: charge, tokens, cache store, history.

A refused query is charged nothing and leaves the cache and budgets unchanged (a rate-limit
token is spent only by answered models). Time comes in as ``now`` (simulated hours) and
randomness as a :class:`numpy.random.Generator`; all mutable state lives in a
:class:`PolicyState` the caller owns. The protected attribute and labels come in as an
:class:`AuditSet` held by the compliance side only.

Stages are frozen pydantic models, gathered into :data:`STAGES` (:mod:`.registry`) from the
package's modules; the same models validate scenario files. Building a policy in Python::

    from biasleak.mechanisms.policy import Budget, Noise, Policy, RateLimit
    policy = Policy(stages=(RateLimit(per_day=100), Budget(epsilon=10.0),
                            Noise(mechanism="laplace", epsilon=0.5)))
"""

from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig
from biasleak.mechanisms.policy._state import (
    PUBLISHER,
    REQUEST_KINDS,
    AuditSet,
    CacheOrigin,
    Decision,
    ModelHistory,
    PolicyState,
    ReleaseFacts,
    ReleaseRun,
    Request,
)
from biasleak.mechanisms.policy.budget import Budget, carry_ledgers
from biasleak.mechanisms.policy.cache import Cache, model_digest
from biasleak.mechanisms.policy.decide import Policy, decide
from biasleak.mechanisms.policy.noise import Noise
from biasleak.mechanisms.policy.rate_limit import HOURS_PER_DAY, RateLimit
from biasleak.mechanisms.policy.refuse_rules import MinSupport, NearDuplicate
from biasleak.mechanisms.policy.registry import REFUSAL_REASONS, STAGES, Stage

__all__ = [
    "HOURS_PER_DAY",
    "PUBLISHER",
    "REFUSAL_REASONS",
    "REQUEST_KINDS",
    "STAGES",
    "AuditSet",
    "Budget",
    "Cache",
    "CacheOrigin",
    "Decision",
    "MinSupport",
    "ModelHistory",
    "NearDuplicate",
    "Noise",
    "Pending",
    "Policy",
    "PolicyState",
    "RateLimit",
    "Refused",
    "ReleaseFacts",
    "ReleaseRun",
    "Request",
    "Stage",
    "StageConfig",
    "carry_ledgers",
    "decide",
    "model_digest",
]
