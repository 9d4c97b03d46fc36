"""The compliance agent: a thin SimPy shell around a policy (:mod:`biasleak.mechanisms.policy`).

It holds the audit set's protected attribute and labels (and is the only agent that does). It
takes one envelope at a time from its mailbox. For a query it spends ``answer_hours`` computing,
asks the pure policy for a decision, logs the public outcome and, marked ``internal``, the exact
values and the noise scale (which must never reach a developer), records the query in the log the
external auditor may read (submitted models and outcome, never the attribute), and replies with an
:class:`~biasleak.agents.messages.Answer` or a :class:`~biasleak.agents.messages.Refusal`.

For an :class:`~biasleak.agents.messages.Alert` from the auditor it applies the scenario's
reaction: ``log_only``, ``warn`` (a notice to the developer), ``suspend_identity`` or
``suspend_organization`` (later requests are refused with reason ``suspended``). What changes
while the world runs changes through the agent's own methods (:meth:`Compliance.set_policy`,
:meth:`Compliance.suspend`, :meth:`Compliance.reinstate`, :meth:`Compliance.set_reaction`),
whether an alert or an exercise's decision asks for it, with the same log events.

For a :class:`~biasleak.agents.messages.ServiceRequest` (a private fair-learning service) it
spends ``answer_hours`` too, lets its :class:`~biasleak.agents.services.ServiceDesk` check, run and
charge the service against the same policy state, logs ``service_answered`` (public facts) and
``service_internal`` (marked ``internal``) or ``service_refused``, and replies with a
:class:`~biasleak.agents.messages.ServiceResult` or a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np
import simpy
from numpy.typing import NDArray

from biasleak.agents.messages import (
    Alert,
    Answer,
    Envelope,
    Mailbox,
    Notice,
    Query,
    Refusal,
    ServiceRequest,
    ServiceResult,
)
from biasleak.agents.publications import AuditPublication
from biasleak.agents.querylog import QueryLog, QueryRecord
from biasleak.agents.services import ServiceDesk, ServiceSpec, submitted_array
from biasleak.mechanisms.policy import (
    PUBLISHER,
    AuditSet,
    CacheOrigin,
    Policy,
    PolicyState,
    ReleaseFacts,
    Request,
    carry_ledgers,
    decide,
)

__all__ = ["ALERT_REACTIONS", "Compliance", "QueryRecord", "ReleaseRecord"]

ALERT_REACTIONS: Final[tuple[str, ...]] = (
    "log_only",
    "warn",
    "suspend_identity",
    "suspend_organization",
)


@dataclass(frozen=True)
class ReleaseRecord:
    """One release of answered models, for the evaluator's individual privacy accounting.

    Handed to ``on_release`` (a callback the simulator sets; nothing in agents imports it). It
    holds the submitted models, which only the compliance side and the evaluator see together
    with the attribute. ``origin`` is None for a fresh release; for answers served from the cache
    that were first released to another identity, it is that first release (to whom; the facts
    are then the first release's, for the k models together).
    """

    sender: str
    organization: str
    metric: str
    models: NDArray[np.float64]
    """(k, n) the models released (fresh, or served from another identity's release)."""
    facts: ReleaseFacts
    """How the k models were released (epsilon and delta of the k together)."""
    origin: CacheOrigin | None = None
    """The first release, for cached answers of another identity; None when fresh."""


class Compliance:
    """The compliance team as a SimPy process."""

    def __init__(
        self,
        env: simpy.Environment,
        *,
        policy: Policy,
        audit: AuditSet,
        rng: np.random.Generator,
        log: Any,
        answer_hours: float = 0.1,
        latency: float = 0.0,
        on_alert: str = "log_only",
        keep_predictions: bool = True,
        services: tuple[ServiceSpec, ...] = (),
        features: np.ndarray | None = None,
        on_release: Callable[[ReleaseRecord], None] | None = None,
        on_service: Callable[[str, str, dict[str, Any]], None] | None = None,
    ) -> None:
        if on_alert not in ALERT_REACTIONS:
            raise ValueError(f"on_alert must be one of {list(ALERT_REACTIONS)}; got {on_alert!r}")
        self.env = env
        self.policy = policy
        """The answering policy."""
        self._audit = audit
        self._rng = rng
        self.log = log
        self.answer_hours = float(answer_hours)
        """Simulated hours spent answering one query."""
        self.on_alert = on_alert
        """Reaction to auditor alerts."""
        self.keep_predictions = keep_predictions
        """Whether the query log keeps the submitted models (the auditor needs them; without an
        auditor a large run need not hold every model in memory)."""
        self.state = PolicyState()
        """Budgets, rate-limit buckets, cache, history, suspensions."""
        self.mailbox = Mailbox(env, "compliance", latency=latency)
        """Where queries and alerts arrive."""
        self.query_log = QueryLog()
        """Every query received, in order (the external auditor gets a read-only view)."""
        self.inboxes: dict[str, Mailbox] = {}
        """Developer identity -> mailbox for notices."""
        self.organizations: dict[str, str] = {}
        """Developer identity -> organisation, for organisation-wide notices."""
        self.on_release = on_release
        """Told about every release of answered models (the evaluator's accounting), or None."""
        self.on_service = on_service
        """Told ``(sender, organization, public facts)`` of every service run, or None."""
        self.on_publication: Callable[[dict[str, Any]], None] | None = None
        """Told the public facts of every fresh publication (it reaches every reader), or
        None."""
        self._publications = 0
        self.services = ServiceDesk(
            tuple(services), protected=audit.protected, labels=audit.labels, features=features
        )
        """The fair-learning services offered (``features``: the audit set's encoded features,
        which the oracle learner runs on)."""
        self.process = env.process(self.run())

    def register(self, identity: str, organization: str, inbox: Mailbox) -> None:
        """Make a developer reachable for notices (warnings, suspensions)."""
        self.inboxes[identity] = inbox
        self.organizations[identity] = organization

    def run(self) -> Generator[simpy.Event, Any, None]:
        """The process body."""
        while True:
            envelope: Envelope = yield self.mailbox.store.get()
            message = envelope.message
            if isinstance(message, Query):
                yield self.env.timeout(self.answer_hours)
                reply = self._answer(message)
                if envelope.reply is not None:
                    self.mailbox.reply(envelope.reply, reply)
            elif isinstance(message, ServiceRequest):
                yield self.env.timeout(self.answer_hours)
                served = self._serve(message)
                if envelope.reply is not None:
                    self.mailbox.reply(envelope.reply, served)
            elif isinstance(message, Alert):
                self._react(message)
            del envelope, message  # a large batch must not live until the next one arrives

    def _answer(self, query: Query) -> Answer | Refusal:
        now = self.env.now
        request = Request(
            query.query_id,
            query.sender,
            query.organization,
            query.metric,
            query.predictions,
            query.digests,
        )
        decision = decide(self.policy, request, self._audit, self.state, now=now, rng=self._rng)
        arr = np.asarray(query.predictions)
        readable = arr.dtype.kind in "fiub" and arr.ndim in (1, 2)
        self.query_log.append(
            QueryRecord(
                query.query_id,
                query.sender,
                query.organization,
                now,
                query.metric,
                np.atleast_2d(arr).astype(np.float64)
                if readable and self.keep_predictions
                else None,
                decision.answered,
                decision.reason,
            )
        )
        if not decision.answered:
            self.log.info(
                "query_refused",
                query_id=query.query_id,
                sender=query.sender,
                organization=query.organization,
                models=decision.models,
                reason=decision.reason,
                detail=decision.detail,
                retry_after=decision.retry_after,
            )
            return Refusal(
                query.query_id,
                decision.reason or "invalid",
                decision.detail,
                decision.retry_after,
                now,
            )
        assert decision.values is not None
        internal = decision.internal
        foreign = _foreign(internal.get("cache_origins", ()), query.sender, query.organization)
        self.log.info(
            "query_answered",
            query_id=query.query_id,
            sender=query.sender,
            organization=query.organization,
            metric=query.metric,
            models=decision.models,
            mechanism=decision.mechanism,
            epsilon_charged=decision.epsilon_charged,
            delta_charged=decision.delta_charged,
            cached=int(sum(decision.cached)),
            **foreign,
        )
        if self.on_release is not None and readable:
            self._tell_releases(query, decision, arr)
        if internal.get("models_new"):
            new = [i for i, c in enumerate(decision.cached) if not c] or list(
                range(decision.models)
            )
            self.log.info(
                "release_internal",
                internal=True,
                query_id=query.query_id,
                sender=query.sender,
                metric=query.metric,
                exact=internal["exact"],
                released=decision.values[new],
                noise_scale=internal["noise_scale"],
                sensitivity=internal["sensitivity"],
            )
        return Answer(
            query.query_id,
            decision.values,
            decision.mechanism,
            decision.epsilon_charged,
            decision.cached,
            now,
            decision.delta_charged,
            decision.sampler,
        )

    def _tell_releases(self, query: Query, decision: Any, arr: NDArray[np.float64]) -> None:
        """Hand the fresh models, and the cached ones first released to others, to on_release."""
        assert self.on_release is not None
        h = np.atleast_2d(arr).astype(np.float64)
        internal = decision.internal
        new = [i for i, c in enumerate(decision.cached) if not c]
        if internal.get("models_new") and new:
            facts = ReleaseFacts(
                decision.mechanism,
                decision.epsilon_charged,
                decision.delta_charged,
                self.policy.noise.bounding,
                decision.sampler,
                float(internal.get("noise_scale", 0.0)),
            )
            self.on_release(
                ReleaseRecord(query.sender, query.organization, query.metric, h[new], facts)
            )
        groups: dict[Any, list[int]] = {}
        for i, origin in internal.get("cache_origins", ()):
            if origin.identity != query.sender:
                groups.setdefault(origin, []).append(i)
        for origin, rows in groups.items():
            self.on_release(
                ReleaseRecord(
                    query.sender,
                    query.organization,
                    query.metric,
                    h[rows],
                    origin.facts.times(len(rows)),
                    origin,
                )
            )

    def _serve(self, request: ServiceRequest) -> ServiceResult | Refusal:
        now = self.env.now
        outcome = self.services.serve(
            request, policy=self.policy, state=self.state, rng=self._rng, now=now
        )
        reply = outcome.reply
        decision = outcome.decision
        arr = submitted_array(request.base_predictions)
        readable = arr is not None and arr.dtype.kind in "fiub" and arr.ndim == 1
        self.query_log.append(
            QueryRecord(
                request.query_id,
                request.sender,
                request.organization,
                now,
                request.service,
                np.atleast_2d(arr).astype(np.float64)
                if readable and self.keep_predictions
                else None,
                not isinstance(reply, Refusal),
                reply.reason if isinstance(reply, Refusal) else None,
                kind="service",
            )
        )
        unchecked = (
            {"unchecked": list(decision.unchecked)} if decision and decision.unchecked else {}
        )
        if isinstance(reply, Refusal):
            self.log.info(
                "service_refused",
                query_id=request.query_id,
                sender=request.sender,
                organization=request.organization,
                service=request.service,
                reason=reply.reason,
                detail=reply.detail,
                **({"retry_after": reply.retry_after} if reply.retry_after is not None else {}),
            )
            return reply
        cached: dict[str, Any] = {}
        first = reply
        if decision is not None and decision.cached and decision.cached[0]:
            # an earlier run's result sent again: free, and not run again; when that run was
            # another identity's, it reaches a new reader, whose ceilings count it
            origins = decision.internal.get("cache_origins", ())
            foreign = any(o.identity != request.sender for _, o in origins)
            cached = {"cached": 1, "foreign": foreign}
            cached |= {
                "first_epsilon_charged": first.epsilon_charged,
                "first_delta_charged": first.delta_charged,
            }
            reply = replace(reply, epsilon_charged=0.0, delta_charged=0.0)
        self.log.info(
            "service_answered",
            query_id=request.query_id,
            sender=request.sender,
            organization=request.organization,
            service=request.service,
            epsilon_charged=reply.epsilon_charged,
            delta_charged=reply.delta_charged,
            disparate_treatment=reply.disparate_treatment,
            **cached,
            **unchecked,
            **outcome.public,
        )
        if cached:
            if cached["foreign"] and self.on_service is not None:
                self.on_service(
                    request.sender,
                    request.organization,
                    {
                        "service": request.service,
                        "epsilon_charged": first.epsilon_charged,
                        "delta_charged": first.delta_charged,
                        **outcome.public,
                    },
                )
            return reply
        if self.on_service is not None:
            self.on_service(
                request.sender,
                request.organization,
                {
                    "service": request.service,
                    "epsilon_charged": reply.epsilon_charged,
                    "delta_charged": reply.delta_charged,
                    **outcome.public,
                },
            )
        self.log.info(
            "service_internal",
            internal=True,
            query_id=request.query_id,
            sender=request.sender,
            service=request.service,
            **outcome.internal,
        )
        return reply

    # what a compliance team (or an exercise's decision) changes while the world runs ----------
    def set_policy(self, new: Policy, *, cause: str, **facts: Any) -> None:
        """Put the policy ``new`` in force from now on; the privacy ledgers carry over (what was
        spent stays spent, against the new totals:
        :func:`~biasleak.mechanisms.policy.carry_ledgers`). Logs ``policy_changed`` with
        ``cause`` and ``facts``."""
        old, self.policy = self.policy, new
        carry_ledgers(old, new, self.state)
        self.log.info("policy_changed", cause=cause, **facts)

    def suspend(
        self,
        *,
        identity: str | None = None,
        organization: str | None = None,
        detail: str,
        cause: str | None = None,
    ) -> None:
        """Refuse every later request of ``identity`` or of ``organization`` (give one), and
        tell the developers concerned (``detail``). With a ``cause`` (an exercise's decision),
        ``suspension_changed`` records it first; an auditor's alert is its own record."""
        self._suspension("suspend", identity, organization, detail, cause)

    def reinstate(
        self,
        *,
        identity: str | None = None,
        organization: str | None = None,
        detail: str,
        cause: str | None = None,
    ) -> None:
        """Lift a suspension (see :meth:`suspend`)."""
        self._suspension("reinstate", identity, organization, detail, cause)

    def set_reaction(self, reaction: str, *, cause: str | None = None) -> None:
        """React to later alerts with ``reaction`` (one of :data:`ALERT_REACTIONS`)."""
        if reaction not in ALERT_REACTIONS:
            raise ValueError(f"on_alert must be one of {list(ALERT_REACTIONS)}; got {reaction!r}")
        self.on_alert = reaction
        if cause is not None:
            self.log.info("reaction_changed", cause=cause, reaction=reaction)

    def publish(self, publication: AuditPublication, *, cause: str) -> bool:
        """Publish figures (an exercise's decision, a regulator's request) through the policy
        gate: the budgets charge them to every reader, the refuse rules read the model they are
        about, the same figures published again are the earlier numbers (free). Logs
        ``audit_published`` (what every reader sees) with ``audit_internal`` (the exact figures,
        marked ``internal``), or ``publication_refused``; returns whether it was published."""
        self._publications += 1
        request = Request(
            f"publication-{self._publications}",
            PUBLISHER,
            PUBLISHER,
            publication.kind,
            None,
            (publication.digest,),
            kind="publication",
            run=publication,
        )
        now = self.env.now
        decision = decide(self.policy, request, self._audit, self.state, now=now, rng=self._rng)
        if not decision.answered:
            self.log.info(
                "publication_refused",
                cause=cause,
                publication=publication.kind,
                epsilon=float(publication.epsilon),
                reason=decision.reason,
                detail=decision.detail,
            )
            return False
        outcome = decision.result
        cached = bool(decision.cached and decision.cached[0])
        again = {"cached": 1} if cached else {}
        self.log.info("audit_published", cause=cause, **outcome.public, **again)
        self.log.info("audit_internal", internal=True, cause=cause, **outcome.internal)
        if self.on_publication is not None and not cached:
            self.on_publication(
                {
                    "publication": publication.kind,
                    "epsilon_charged": decision.epsilon_charged,
                    "delta_charged": decision.delta_charged,
                }
            )
        return True

    def _suspension(
        self,
        change: str,
        identity: str | None,
        organization: str | None,
        detail: str,
        cause: str | None,
    ) -> None:
        if (identity is None) == (organization is None):
            raise ValueError("name either an identity or an organisation to suspend or reinstate")
        state = self.state
        pool = state.suspended_identities if identity else state.suspended_organizations
        target = identity or organization
        if change == "suspend":
            pool.add(target)  # type: ignore[arg-type]
        else:
            pool.discard(target)  # type: ignore[arg-type]
        if cause is not None:
            self.log.info(
                "suspension_changed",
                cause=cause,
                change=change,
                organization=organization,
                identity=identity,
            )
        recipients = (
            [identity]
            if identity is not None
            else [i for i in sorted(self.inboxes) if self.organizations.get(i) == organization]
        )
        kind = "suspended" if change == "suspend" else "reinstated"
        for recipient in recipients:
            self._notify(recipient, kind, detail)

    def _react(self, alert: Alert) -> None:
        self.log.info(
            "alert_received",
            developer=alert.developer,
            organization=alert.organization,
            detector=alert.detector,
            evidence=alert.evidence,
            reaction=self.on_alert,
        )
        if self.on_alert == "suspend_identity":
            self.suspend(identity=alert.developer, detail=f"identity suspended: {alert.evidence}")
        elif self.on_alert == "suspend_organization":
            self.suspend(
                organization=alert.organization,
                detail=f"organisation suspended: {alert.evidence}",
            )
        elif self.on_alert == "warn":
            self._notify(alert.developer, "warning", alert.evidence)

    def _notify(self, identity: str, kind: str, detail: str) -> None:
        inbox = self.inboxes.get(identity)
        self.log.info("notice_sent", recipient=identity, kind=kind)
        if inbox is not None:
            inbox.send(Envelope(Notice(identity, kind, detail, self.env.now)))


def _foreign(origins: Any, sender: str, organization: str) -> dict[str, Any]:
    """Cached answers first released to another identity (``foreign``) or organisation
    (``foreign_organization``), as ``[mechanism, epsilon per model, delta per model, bounding,
    sampler, models]`` groups: the ceilings count them for the reader. Empty when none."""
    out: dict[str, Any] = {}
    for key, other in (
        ("foreign", lambda o: o.identity != sender),
        ("foreign_organization", lambda o: o.organization != organization),
    ):
        counts: dict[tuple[Any, ...], int] = {}
        for _, origin in origins:
            if other(origin):
                f = origin.facts
                facts = (f.mechanism, f.epsilon, f.delta, f.bounding, f.sampler)
                counts[facts] = counts.get(facts, 0) + 1
        if counts:
            out[key] = [[*facts, k] for facts, k in sorted(counts.items())]
    return out
