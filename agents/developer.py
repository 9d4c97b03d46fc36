"""The developer process: a thin SimPy shell around a strategy.

Each step it asks the strategy for an action. For :class:`~biasleak.agents.strategies.Submit` it
spends the preparation time (training), sends a :class:`~biasleak.agents.messages.Query` to the
compliance agent's mailbox and waits for the reply or a timeout; a rate-limit refusal with a
``retry_after`` is honoured by waiting and re-sending the same models (when ``retry_rate_limited``);
every other reply goes back to the strategy. For
:class:`~biasleak.agents.strategies.base.RequestService` it sends a
:class:`~biasleak.agents.messages.ServiceRequest`, waits, and hands the
:class:`~biasleak.agents.messages.ServiceResult` to the strategy (a refusal, as for queries,
through ``on_refusal``). It stops when the strategy says so, when the strategy
raises (logged as an error event; the other agents go on), or when the simulation's horizon ends.

Whenever the strategy has a new estimate of the protected attribute the process hands it to the
``on_estimate`` callback: the simulation's evaluator scores it against the truth, which this layer
never sees. Every message and decision is one event on the bound logger the process is given.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from biasleak.agents.messages import (
    Answer,
    Envelope,
    Mailbox,
    Notice,
    Query,
    Refusal,
    ServiceRequest,
    ServiceResult,
)
from biasleak.agents.strategies import (
    AnswerInfo,
    Estimate,
    RequestService,
    Stop,
    Strategy,
    Submit,
    Wait,
)
from biasleak.mechanisms.digests import array_digest
from biasleak.mechanisms.digests import model_digest as policy_digest

__all__ = ["Developer", "model_digest"]


def model_digest(predictions: np.ndarray) -> str:
    """Short content hash of submitted models, for logs (the models themselves stay out)."""
    return _digests(predictions)[0]


def _digests(predictions: np.ndarray) -> tuple[str, tuple[bytes, ...] | None]:
    """(log digest of the whole submission, the policy's per-model cache digests or None).

    One SHA-256 pass serves both for a single model: its bytes are the whole submission's.
    """
    arr = np.asarray(predictions, dtype=np.float64)
    whole = array_digest(arr)
    if arr.ndim == 1 or (arr.ndim == 2 and arr.shape[0] == 1):
        return whole[:8].hex(), (whole[:16],)
    rows = tuple(policy_digest(row) for row in arr) if arr.ndim == 2 else None
    return whole[:8].hex(), rows


class Developer:
    """A model developer (honest or adversarial) as a SimPy process."""

    def __init__(
        self,
        env: simpy.Environment,
        *,
        identity: str,
        organization: str,
        strategy: Strategy,
        compliance: Mailbox,
        log: Any,
        on_estimate: Callable[[str, Estimate], None] | None = None,
        timeout_hours: float = 72.0,
        retry_rate_limited: bool = True,
        latency: float = 0.0,
    ) -> None:
        self.env = env
        self.identity = identity
        """Developer identity (unique)."""
        self.organization = organization
        """Organisation the developer belongs to."""
        self.strategy = strategy
        """The pure logic this process runs."""
        self.compliance = compliance
        """The compliance agent's mailbox."""
        self.log = log
        """Bound structured logger (provided by the simulation)."""
        self.on_estimate = on_estimate
        self.timeout_hours = float(timeout_hours)
        """How long to wait for a reply before giving up on a query."""
        self.retry_rate_limited = retry_rate_limited
        self.inbox = Mailbox(env, identity, latency=latency)
        """Where notices from the compliance agent arrive."""
        self._count = 0
        self._seen_estimate = 0
        self.process = env.process(self.run())
        env.process(self._read_notices())

    def _read_notices(self) -> Generator[simpy.Event, Any, None]:
        while True:
            envelope = yield self.inbox.store.get()
            message = envelope.message
            if isinstance(message, Notice):
                self.log.info("notice_received", kind=message.kind, detail=message.detail)

    def _call(self, what: str, func: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        """Run strategy code; on an exception log it and report failure (the process stops)."""
        try:
            return True, func(*args)
        except Exception as err:  # a broken strategy must not take the simulation down
            self.log.error("strategy_error", during=what, error=f"{type(err).__name__}: {err}")
            return False, None

    def _report_estimate(self) -> None:
        estimate = self.strategy.estimate
        if estimate is None or self.strategy.estimate_version == self._seen_estimate:
            return
        self._seen_estimate = self.strategy.estimate_version
        self.log.info(
            "estimate_updated",
            version=self._seen_estimate,
            models_used=estimate.models_used,
            method=estimate.method,
            predicted_disadvantaged=int(np.count_nonzero(estimate.attribute == 0)),
        )
        if self.on_estimate is not None:
            self.on_estimate(self.identity, estimate)

    def run(self) -> Generator[simpy.Event, Any, None]:
        """The process body."""
        env = self.env
        while True:
            ok, action = self._call("next_action", self.strategy.next_action, env.now)
            if not ok:
                return
            self._report_estimate()  # a strategy may decode when it decides to stop
            if isinstance(action, Stop):
                ok, report = self._call("report", self.strategy.report)
                self.log.info(
                    "developer_stopped", reason=action.reason, report=report if ok else None
                )
                return
            if isinstance(action, Wait):
                yield env.timeout(max(action.until - env.now, 0.0))
                continue
            if isinstance(action, RequestService):
                if action.prepare_hours > 0:
                    yield env.timeout(action.prepare_hours)
                served = yield from self._request_service(action)
                del action
                if isinstance(served, ServiceResult):
                    ok, _ = self._call(
                        "on_service_result", self.strategy.on_service_result, served, env.now
                    )
                else:
                    ok, _ = self._call("on_refusal", self.strategy.on_refusal, served, env.now)
                if not ok:
                    return
                continue
            if not isinstance(action, Submit):
                self.log.error(
                    "strategy_error",
                    during="next_action",
                    error=f"unknown action {type(action).__name__}",
                )
                return
            if action.prepare_hours > 0:
                yield env.timeout(action.prepare_hours)
            reply = yield from self._exchange(action)
            del action  # the sent models: a large batch must not live until the next one
            if isinstance(reply, Answer):
                info = AnswerInfo(
                    reply.mechanism,
                    reply.epsilon_charged,
                    reply.delta_charged,
                    reply.sampler,
                    tuple(reply.cached),
                )
                ok, _ = self._call(
                    "on_answer", self.strategy.receive_answer, reply.values, info, env.now
                )
                if not ok:
                    return
                self._report_estimate()
            else:
                ok, _ = self._call("on_refusal", self.strategy.on_refusal, reply, env.now)
                if not ok:
                    return

    def _send(
        self, message: Query | ServiceRequest, timeout_event: str, **timeout_fields: Any
    ) -> Generator[simpy.Event, Any, tuple[Any, bool]]:
        """Send ``message`` to compliance and wait for the reply or the timeout.

        Returns ``(reply, False)``, or ``(a timeout Refusal, True)`` after logging
        ``timeout_event`` with ``timeout_fields``.
        """
        env = self.env
        reply_event = env.event()
        self.compliance.send(Envelope(message, reply_event))
        outcome = yield reply_event | env.timeout(self.timeout_hours)
        if reply_event in outcome:
            return outcome[reply_event], False
        self.log.info(
            timeout_event,
            query_id=message.query_id,
            **timeout_fields,
            waited_hours=self.timeout_hours,
        )
        detail = f"no reply within {self.timeout_hours:g} hours"
        return Refusal(message.query_id, "timeout", detail, None, env.now), True

    def _request_service(
        self, action: RequestService
    ) -> Generator[simpy.Event, Any, ServiceResult | Refusal]:
        """Send a service request and return the result or the refusal."""
        env = self.env
        self._count += 1
        request = ServiceRequest(
            f"{self.identity}-{self._count}",
            self.identity,
            self.organization,
            env.now,
            action.service,
            action.base_predictions,
            action.learner,
        )
        self.log.info(
            "service_requested",
            query_id=request.query_id,
            service=request.service,
            learner=request.learner,
        )
        reply, timed_out = yield from self._send(request, "service_timeout")
        if timed_out:
            return reply
        if isinstance(reply, ServiceResult):
            self.log.info(
                "service_received",
                query_id=request.query_id,
                service=reply.service,
                epsilon_charged=reply.epsilon_charged,
                delta_charged=reply.delta_charged,
                disparate_treatment=reply.disparate_treatment,
            )
        else:
            self.log.info(
                "service_refusal_received",
                query_id=request.query_id,
                service=request.service,
                reason=reply.reason,
                detail=reply.detail,
            )
        return reply

    def _exchange(self, action: Submit) -> Generator[simpy.Event, Any, Answer | Refusal]:
        """Send the query (again after each rate-limit wait) and return the final reply."""
        env = self.env
        predictions = np.asarray(action.predictions)
        digest, row_digests = _digests(predictions)
        while True:
            self._count += 1
            query = Query(
                f"{self.identity}-{self._count}",
                self.identity,
                self.organization,
                env.now,
                action.metric,
                predictions,
                digests=row_digests,
            )
            self.log.info(
                "query_sent",
                query_id=query.query_id,
                metric=action.metric,
                models=query.models,
                label=action.label,
                digest=digest,
            )
            reply, timed_out = yield from self._send(query, "query_timeout", models=query.models)
            if timed_out:
                return reply
            if isinstance(reply, Answer):
                self.log.info(
                    "answer_received",
                    query_id=query.query_id,
                    models=query.models,
                    values=reply.values,
                    mechanism=reply.mechanism,
                    epsilon_charged=reply.epsilon_charged,
                    cached=int(sum(reply.cached)),
                )
                return reply
            self.log.info(
                "refusal_received",
                query_id=query.query_id,
                models=query.models,
                reason=reply.reason,
                detail=reply.detail,
                retry_after=reply.retry_after,
            )
            if (
                reply.reason == "rate_limited"
                and self.retry_rate_limited
                and reply.retry_after is not None
            ):
                yield env.timeout(max(reply.retry_after - env.now, 0.0))
                continue
            return reply
