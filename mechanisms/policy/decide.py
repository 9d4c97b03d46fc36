"""A policy and its decision for one request: a short loop over the stages of the registry.

Every release passes this one gate: a metric query, a service request (a private fair-learning
service run on the audit set) or a publication (figures the compliance team publishes, which
reach every reader). Whatever order a scenario lists the stages in, they
run in the order a careful compliance team would apply them (each stage's
:attr:`~biasleak.mechanisms.policy.StageConfig.ORDER`): the always-on checks (validate,
suspended?), then rate limits, the cache lookup, the refuse rules, the budget check and the
release, which is the noise stage for a query and the request's own run for a service request
or a publication.
A stage applies to the kinds it declares (:attr:`~biasleak.mechanisms.policy.StageConfig.KINDS`,
every kind by default). Nothing is charged for a request that is then refused and nothing is
released before it is checked. Once every stage has passed the request, each records what the
answer spends (tokens, budget, cache entries, history), again in pipeline order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from itertools import groupby
from typing import Any, ClassVar, Final, Literal

import numpy as np

from biasleak.mechanisms import metrics
from biasleak.mechanisms._validation import check_choice, check_int
from biasleak.mechanisms.policy import checks
from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig
from biasleak.mechanisms.policy._state import (
    REQUEST_KINDS,
    AuditSet,
    Decision,
    PolicyState,
    Request,
)
from biasleak.mechanisms.policy.noise import Noise
from biasleak.mechanisms.sensitivity import SENSITIVITY_METRICS

__all__ = ["OwnRelease", "Policy", "decide"]


class OwnRelease(StageConfig):
    """The release of a service request or a publication: its own run (in place of the noise
    stage).

    Not configurable (every policy has it, as every policy has a release for queries): a
    request served from the cache does not run again.
    """

    ORDER: ClassVar[int] = Noise.ORDER
    KINDS: ClassVar[tuple[str, ...]] = ("service", "publication")

    kind: Literal["own_release"] = "own_release"

    @classmethod
    def check(cls, stages: Any, q: Pending) -> Refused | None:
        run = q.request.run
        if not q.m_new or run is None:  # served from the cache (or refused by validate)
            return None
        return run.run(q)


EXACT: Final = Noise(mechanism="exact")
"""The release of a policy without a noise stage."""
OWN_RELEASE: Final = OwnRelease()
"""The release of every service request and publication."""
REPEATED: Final = "policy may hold at most one {kind!r} stage; found {count}"
NO_SENSITIVITY: Final = (
    "metrics {bad} cannot be answered with noise (no sensitivity in biasleak); with a noise "
    "stage allowed metrics are {allowed}"
)


@dataclass(frozen=True)
class Policy:
    """A compliance policy: the metrics it answers, its stages and the largest batch."""

    metrics: tuple[str, ...] = metrics.NOISY_METRICS
    """Metrics developers may ask for."""
    stages: tuple[StageConfig, ...] = ()
    """Configured stages, in any order (they run in pipeline order)."""
    max_models: int = 10_000
    """Largest batch accepted in one query."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", tuple(self.metrics))
        object.__setattr__(self, "stages", tuple(self.stages))
        for name in self.metrics:
            check_choice(name, metrics.METRICS, name="metrics")
        check_int(self.max_models, name="max_models", minimum=1)
        for stage in self.stages:
            if not isinstance(stage, StageConfig):
                raise ValueError(
                    f"a policy stage must be a stage model (e.g. Budget(epsilon=1.0)); "
                    f"received {type(stage).__name__}"
                )
        for kind, group in self._groups(self.stages):
            if not type(group[0]).REPEATABLE and len(group) > 1:
                raise ValueError(REPEATED.format(kind=kind, count=len(group)))
        if not self.noise.exact:
            bad = [m for m in self.metrics if m not in SENSITIVITY_METRICS]
            if bad:
                raise ValueError(NO_SENSITIVITY.format(bad=bad, allowed=list(SENSITIVITY_METRICS)))

    @staticmethod
    def _groups(stages: tuple[StageConfig, ...]) -> Iterator[tuple[str, list[Any]]]:
        """Stages grouped by kind, in pipeline order (listing order within a kind)."""
        ordered = sorted(stages, key=lambda s: type(s).ORDER)
        for kind, group in groupby(ordered, key=lambda s: s.kind):  # type: ignore[attr-defined]
            yield kind, list(group)

    @cached_property
    def pipelines(self) -> dict[str, list[tuple[str, list[Any]]]]:
        """Request kind -> (stage kind, stages of that kind) in the order they run for it: the
        stages that apply to it, always ending with a release (the noise stage, or exact
        answers, for queries; their own run for services and publications)."""
        releases = {
            "query": () if self.has("noise") else (EXACT,),
            "service": (OWN_RELEASE,),
            "publication": (OWN_RELEASE,),
        }
        out = {}
        for request_kind in REQUEST_KINDS:
            every = (*self.stages, *releases[request_kind])
            applying = tuple(s for s in every if request_kind in type(s).KINDS)
            out[request_kind] = list(self._groups(applying))
        return out

    @property
    def pipeline(self) -> list[tuple[str, list[Any]]]:
        """The pipeline of a metric query (see :attr:`pipelines`)."""
        return self.pipelines["query"]

    def has(self, kind: str) -> bool:
        """Whether the policy holds a stage of ``kind``."""
        return any(s.kind == kind for s in self.stages)  # type: ignore[attr-defined]

    def of_kind(self, kind: str) -> list[Any]:
        """The policy's stages of ``kind``, in listing order."""
        return [s for s in self.stages if s.kind == kind]  # type: ignore[attr-defined]

    @property
    def noise(self) -> Noise:
        """The release: the noise stage, or exact answers without one."""
        found = self.of_kind("noise")
        return found[0] if found else EXACT


def decide(
    policy: Policy,
    request: Request,
    audit: AuditSet,
    state: PolicyState,
    *,
    now: float,
    rng: np.random.Generator,
) -> Decision:
    """Decide one request: answer it (and update ``state``) or refuse it (state unchanged).

    Runs the always-on checks (:mod:`~biasleak.mechanisms.policy.checks`), then the ``check``
    of every stage that applies to the request's kind, in pipeline order; the first refusal ends
    the request. When all pass, every such stage's ``commit`` records what the answer spends.
    Randomness is drawn only by the release, from ``rng``; time comes in as ``now`` (simulated
    hours).
    """
    q = Pending(policy, request, audit, state, now, rng)
    refused = checks.validate(q) or checks.suspension(q)
    if refused is not None:
        return q.decision(refused)
    pipeline = policy.pipelines[request.kind]
    for _, stages in pipeline:
        refused = type(stages[0]).check(stages, q)
        if refused is not None:
            return q.decision(refused)
    for _, stages in pipeline:
        type(stages[0]).commit(stages, q)
    return q.decision()
