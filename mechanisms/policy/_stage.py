"""The contract of a policy stage, and the query in flight that stages look at.

A stage is a frozen pydantic model: its fields are its configuration (the same model validates a
scenario file's ``policy:`` entry and builds the policy in Python), its class attributes say where
it runs in the pipeline (:attr:`StageConfig.ORDER`), which kinds of request it applies to
(:attr:`StageConfig.KINDS`: every kind unless it says otherwise), whether a policy may hold
several (:attr:`StageConfig.REPEATABLE`) and which refusal codes it can give
(:attr:`StageConfig.REFUSALS`). Its behaviour is two class methods over every stage of its kind
in the policy, so that kinds with several instances (rate limits, budgets) decide together:

- :meth:`StageConfig.check` looks at the :class:`Pending` query and returns a :class:`Refused` or
  ``None``; it must not change the policy state (a refused query leaves it unchanged);
- :meth:`StageConfig.commit` runs, in pipeline order, only once every stage has passed the query,
  and records what the answer spends (tokens, budget, cache entries, history).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from biasleak.mechanisms.policy._state import (
    REQUEST_KINDS,
    AuditSet,
    Decision,
    PolicyState,
    Request,
)

if TYPE_CHECKING:
    from biasleak.mechanisms.policy.decide import Policy

__all__ = ["Pending", "Refused", "StageConfig"]


class StageConfig(BaseModel):
    """Base of every configurable policy stage (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    ORDER: ClassVar[int]
    """Position in the pipeline; stages run in increasing order whatever order they are listed."""
    KINDS: ClassVar[tuple[str, ...]] = REQUEST_KINDS
    """The kinds of request (:data:`~biasleak.mechanisms.policy.REQUEST_KINDS`) this stage
    applies to: every kind by default, so that a new stage guards services as well as queries.
    A stage that applies to a kind but finds nothing to read in a request (no submitted model)
    says so with :meth:`Pending.cannot_read` rather than passing it in silence."""
    REPEATABLE: ClassVar[bool] = False
    """Whether a policy may hold several stages of this kind."""
    REFUSALS: ClassVar[dict[str, str]] = {}
    """Refusal codes this stage can give -> what they mean."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Fields by keyword, or positionally in declaration order (``kind`` excluded), as in
        ``Noise("laplace", 0.5)`` or ``RateLimit(100)``."""
        if args:
            names = [name for name in type(self).model_fields if name != "kind"]
            if len(args) > len(names):
                raise TypeError(
                    f"{type(self).__name__} takes at most {len(names)} positional arguments "
                    f"({', '.join(names)}); received {len(args)}"
                )
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{type(self).__name__} got {name!r} twice")
                kwargs[name] = value
        super().__init__(**kwargs)

    @classmethod
    def check(cls, stages: Sequence[Any], q: Pending) -> Refused | None:
        """Refuse the query or let it go on (state unchanged)."""
        return None

    @classmethod
    def commit(cls, stages: Sequence[Any], q: Pending) -> None:
        """Record what the answered query spends."""


@dataclass(frozen=True)
class Refused:
    """A stage's refusal: a reason code, a human-readable detail, and when to retry."""

    reason: str
    detail: str
    retry_after: float | None = None


@dataclass(eq=False)
class Pending:
    """One query on its way through the pipeline: what stages read and fill in."""

    policy: Policy
    request: Request
    audit: AuditSet
    state: PolicyState
    now: float
    rng: np.random.Generator
    models: int = 1
    """Number of models in the query (1 while it is unreadable)."""
    h: NDArray[np.float64] = field(default_factory=lambda: np.empty((0, 0)))
    """The validated models, shape (m, n)."""
    cached: list[bool] = field(default_factory=list)
    """Per model: served from the cache."""
    new_rows: list[int] = field(default_factory=list)
    """Indices of the models not served from the cache."""
    values: NDArray[np.float64] | None = None
    """The released values of every model (filled by the noise stage and the cache)."""
    mechanism: str = "exact"
    sampler: str = "exact"
    internal: dict[str, Any] = field(default_factory=dict)
    """Exact values, noise scale, sensitivity: for the compliance side's log only."""
    scratch: dict[str, Any] = field(default_factory=dict)
    """What a stage's check hands to its own commit (keyed by stage kind)."""
    result: Any = None
    """A service request's outcome (filled by its run, or by the cache)."""
    unchecked: list[str] = field(default_factory=list)
    """Stages that found nothing to read in this request (see :meth:`cannot_read`)."""

    @property
    def kind(self) -> str:
        """The request's kind (:data:`~biasleak.mechanisms.policy.REQUEST_KINDS`)."""
        return self.request.kind

    @property
    def h_new(self) -> NDArray[np.float64]:
        """The submitted models that need a release (not served from the cache); none for a
        service request that submits no model."""
        if self.h.shape[0] != len(self.cached):
            return self.h[:0]
        return self.h[self.new_rows]

    def cannot_read(self, stage: str) -> None:
        """Record that ``stage`` applies to this request but it carries nothing the stage
        reads (it passes, and the log says it went unchecked)."""
        if self.m_new and stage not in self.unchecked:
            self.unchecked.append(stage)

    @property
    def m_new(self) -> int:
        return len(self.new_rows)

    @property
    def cost(self) -> tuple[float, float]:
        """(epsilon, delta) the release of the new models costs: under the policy's noise for a
        query, the service's own cost for a service request (nothing when served from the
        cache)."""
        if self.m_new == 0:
            return 0.0, 0.0
        if self.request.run is not None:
            return self.request.run.cost
        noise = self.policy.noise
        if noise.exact:
            return math.inf, 0.0
        if noise.per == "model":
            return noise.epsilon * self.m_new, noise.delta * self.m_new
        return noise.epsilon, noise.delta

    def decision(self, refused: Refused | None = None) -> Decision:
        """The :class:`Decision` for this query (a refusal when ``refused`` is given)."""
        rq = self.request
        if refused is not None:
            return Decision(
                rq.query_id,
                False,
                reason=refused.reason,
                detail=refused.detail,
                models=self.models,
                retry_after=refused.retry_after,
            )
        eps, delta = self.cost
        return Decision(
            rq.query_id,
            True,
            values=self.values,
            mechanism=self.mechanism,
            epsilon_charged=eps,
            delta_charged=delta,
            cached=tuple(bool(c) for c in self.cached),
            sampler=self.sampler,
            models=self.models,
            internal=self.internal,
            result=self.result,
            unchecked=tuple(self.unchecked),
        )
