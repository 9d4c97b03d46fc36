"""Assembling and running one simulated world from a scenario.

The rooms: the data every run of a process shares (:mod:`.data`), the scoring of the honest
routes' models after the horizon (:mod:`.scoring`), the run log's listener for exercises
(:mod:`.tap`); this module assembles the agents and runs them.

:func:`run_scenario` loads the data, trains the base model on the public training split, builds the
compliance agent (holding the protected attribute), one developer process per scenario entry
(each with a strategy that sees only the public data and the base model's predictions), the
optional auditor and the evaluator, runs the SimPy environment until the horizon, and writes the
run log, whose last line is the summary.

Private fair-learning services (:mod:`biasleak.agents.services`): the compliance agent gets the
audit set's features in the numeric encoding of :func:`biasleak.agents.models.build_pipeline`
fitted on the training split (which a developer can rebuild, so both sides agree on what a linear
classifier's coefficients mean). After the horizon, the evaluator scores the model each service
user ended with, and its base model, on the training split (people outside the audit set) and
logs one ``service_evaluation`` event per such developer.

Isolation: the library's own strategies run in this process, for speed; a plugin (a strategy from
outside the package, :mod:`biasleak.agents.strategies.plugin`) runs in a sandboxed process of its
own, which the run stops when it ends. The data shared by the runs of one process are immutable
arrays, so no strategy can change what the next run reads.

Randomness: one :class:`numpy.random.SeedSequence` per run, and one child stream per role keyed by
a stable hash of its name (``"developer:mallory"``, ``"compliance"``), so adding an agent never
changes another agent's draws, and the same scenario with the same seed writes a byte-identical
log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import simpy
from numpy.typing import NDArray

from biasleak.agents.auditor import Auditor
from biasleak.agents.compliance import Compliance
from biasleak.agents.developer import Developer
from biasleak.agents.strategies import (
    PROXY_KINDS,
    DeveloperContext,
    build_strategies,
)
from biasleak.mechanisms.digests import stable_int
from biasleak.mechanisms.policy import AuditSet
from biasleak.sim.evaluation import Evaluator
from biasleak.sim.exposure import Exposure
from biasleak.sim.runlog import RunLog, jsonable, read_log
from biasleak.sim.scenario import Scenario, scenario_hash
from biasleak.sim.summary import summarize
from biasleak.sim.world.data import draw_key, encoded, prepared
from biasleak.sim.world.scoring import evaluate_services, uses_services
from biasleak.sim.world.tap import Tapped

__all__ = ["Agents", "RunResult", "World", "developer_context", "rng_for", "run_scenario"]

HOURS_PER_DAY = 24.0
VERSIONED = ("biasleak", "numpy", "scipy", "scikit-learn", "simpy", "pydantic", "structlog")


def _stable_hash(role: str) -> int:
    return stable_int(role)


def rng_for(seed: int, role: str) -> np.random.Generator:
    """The random stream of one role in a run (independent of every other role's)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_stable_hash(role),)))


def _versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


@dataclass(frozen=True)
class RunResult:
    """What a run produced."""

    summary: dict[str, Any]
    """The run's summary: the log's last line plus ``log``, the log file's path."""
    log_path: Path
    """The JSON-lines log."""


def developer_context(
    scenario: Scenario, identity: str, kind: str, *, seed: int | None = None
) -> DeveloperContext:
    """The context a developer ``identity`` with a strategy of ``kind`` starts with in a run.

    The same public data, base predictions, random stream and (for proxy kinds) external sample
    that :func:`run_scenario` hands it; nothing in it holds the audit set's attribute.
    """
    run_seed = scenario.seed if seed is None else int(seed)
    data, h0, _, proxy, _, _ = prepared(*draw_key(scenario, run_seed))
    return DeveloperContext(
        data.public,
        h0,
        rng_for(run_seed, f"developer:{identity}"),
        proxy=proxy if kind in PROXY_KINDS else None,
    )


_SHARED_FITS = ("honest_selection",)
"""Strategy kinds whose fits every world of a red team makes alike (see :func:`warm_fits`)."""


def warm_fits(scenario: Scenario) -> None:
    """Make here the fits that every world of ``scenario`` makes alike: the data, the base
    model and the proxy (:func:`~biasleak.sim.world.data.prepared`) and the honest
    developers' candidates (kept per process by :func:`biasleak.agents.models.cached_fit`).
    Worker processes forked afterwards start with them instead of each fitting them again;
    nothing else changes."""
    data, h0, _, proxy, _, _ = prepared(*draw_key(scenario, scenario.seed))
    honest = [d for d in scenario.developers if d.strategy.kind in _SHARED_FITS]
    if honest:
        _build_developers(scenario.model_copy(update={"developers": honest}), data, h0, proxy)


def _build_developers(
    resolved: Scenario, data: Any, h0: NDArray[np.float64], proxy: Any
) -> list[tuple[Any, str, Any]]:
    """(spec, identity, strategy or the setup error) for every developer identity."""
    built: list[tuple[Any, str, Any]] = []
    for spec in resolved.developers:
        context = DeveloperContext(
            data.public,
            h0,
            rng_for(resolved.seed, f"developer:{spec.id}"),
            proxy=proxy if spec.strategy.kind in PROXY_KINDS else None,
        )
        try:
            for identity, strategy in build_strategies(spec.strategy, context, spec.id):
                built.append((spec, identity, strategy))
        except Exception as err:  # a strategy that cannot start is an event, not a crash
            built.append((spec, spec.id, f"{type(err).__name__}: {err}"))
    return built


def _close(built: list[tuple[Any, str, Any]]) -> None:
    """Release what strategies hold outside the run (a plugin's sandboxed process)."""
    for _, _, strategy in built:
        if not isinstance(strategy, str):  # a strategy that could not start is its error text
            strategy.close()


def _strata(protected: NDArray[np.integer], labels: NDArray[np.integer]) -> dict[str, int]:
    """The group sizes within each label stratum (for the ceilings; evaluator's facts)."""
    a = np.asarray(protected).astype(bool)
    y = np.asarray(labels).astype(bool)
    return {
        "n11": int(np.count_nonzero(a & y)),
        "n10": int(np.count_nonzero(~a & y)),
        "n01": int(np.count_nonzero(a & ~y)),
        "n00": int(np.count_nonzero(~a & ~y)),
    }


def _header(
    resolved: Scenario,
    data: Any,
    built: list[tuple[Any, str, Any]],
    base_accuracy: float,
    proxy_baseline: float | None,
    proxy_p: NDArray[np.float64] | None,
) -> dict[str, Any]:
    """The log's header: everything needed to rebuild the run's summary."""
    header = {
        "scenario": resolved.name,
        "scenario_hash": scenario_hash(resolved),
        "seed": resolved.seed,
        "versions": _versions(),
        "resolved_scenario": resolved.model_dump(mode="json"),
        "horizon_hours": resolved.horizon_days * HOURS_PER_DAY,
        "audit": {
            "n": data.n,
            "n1": data.n1,
            "n0": data.n0,
            **_strata(data.protected, data.public.audit.labels),
            "description": data.public.description,
        },
        "base_model_accuracy": base_accuracy,
        "proxy_baseline_leakage": proxy_baseline,
        "developers": [
            {"id": identity, "organization": spec.organization, "strategy": spec.strategy.kind}
            for spec, identity, _ in built
        ],
        "auditor_enabled": resolved.auditor.enabled,
    }
    if proxy_p is not None and any(s.strategy.kind in PROXY_KINDS for s in resolved.developers):
        # the evaluator's proxy-prior ceiling needs the prior an attacker starts from
        header["proxy_probabilities"] = [float(x) for x in proxy_p]
    return header


@dataclass
class Agents:
    """The agents of a running world: what an exercise looks at and changes while it is paused
    (:mod:`biasleak.sim.exercise`)."""

    compliance: Compliance
    """The compliance agent (its policy, state and mailbox)."""
    evaluator: Evaluator
    """The evaluator, which scores every estimate against the ground truth."""
    developers: dict[str, Developer]
    """Developer identity -> its process, for the identities started so far."""
    auditor: Auditor | None
    """The external auditor, when one runs."""
    exposure: Exposure | None = None
    """The per-person accounting of every release (the answers-level ceilings)."""


def _start_developer(
    env: simpy.Environment,
    resolved: Scenario,
    built: tuple[Any, str, Any],
    agents: Agents,
    runlog: Any,
) -> None:
    """Start one developer identity (or log why its strategy could not start)."""
    spec, identity, strategy = built
    log = runlog.logger(identity)
    if isinstance(strategy, str):
        log.error("strategy_error", during="setup", error=strategy)
        return
    developer = Developer(
        env,
        identity=identity,
        organization=spec.organization,
        strategy=strategy,
        compliance=agents.compliance.mailbox,
        log=log,
        on_estimate=agents.evaluator,
        timeout_hours=spec.timeout_hours,
        retry_rate_limited=spec.retry_rate_limited,
        latency=resolved.compliance.latency_hours,
    )
    agents.compliance.register(identity, spec.organization, developer.inbox)
    agents.developers[identity] = developer


def _start_auditor(
    env: simpy.Environment, config: Any, compliance: Compliance, log: Any
) -> Auditor:
    """Start the external auditor ``config`` describes, reading ``compliance``'s query log."""
    return Auditor(
        env,
        query_log=compliance.query_log.reader(),
        compliance=compliance.mailbox,
        detectors=config.detectors,
        settings=config.settings(),
        every_hours=config.every_hours,
        recommended_action=config.on_alert,
        log=log,
    )


def _assemble(
    env: simpy.Environment,
    resolved: Scenario,
    data: Any,
    built: list[tuple[Any, str, Any]],
    runlog: Any,
    encoded: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int8]] | None = None,
    deferred: frozenset[str] = frozenset(),
) -> Agents:
    """Start the compliance agent, the developers and the auditor in ``env``.

    ``runlog`` is the :class:`RunLog` (or anything with its ``logger`` and ``add_array``);
    developers whose scenario id is in ``deferred`` are built but not started (an exercise
    starts them later, when they join).
    """
    compliance = Compliance(
        env,
        policy=resolved.compliance.build_policy(),
        audit=AuditSet.from_arrays(data.protected, data.public.audit.labels),
        rng=rng_for(resolved.seed, "compliance"),
        log=runlog.logger("compliance"),
        answer_hours=resolved.compliance.answer_hours,
        latency=resolved.compliance.latency_hours,
        on_alert=resolved.auditor.on_alert,
        keep_predictions=resolved.auditor.enabled,
        services=resolved.compliance.build_services(),
        features=None if encoded is None else encoded[0],
    )
    evaluator = Evaluator(data.protected, runlog.logger("evaluator"), keep=runlog.add_array)
    exposure = Exposure(
        data.protected, data.public.audit.labels, runlog.logger("evaluator"), keep=runlog.add_array
    )
    compliance.on_release = exposure
    compliance.on_service = exposure.add_service
    compliance.on_publication = exposure.add_publication
    agents = Agents(compliance, evaluator, {}, None, exposure)
    for item in built:
        if item[0].id not in deferred:
            _start_developer(env, resolved, item, agents, runlog)
    if resolved.auditor.enabled:
        agents.auditor = _start_auditor(env, resolved.auditor, compliance, runlog.logger("auditor"))
    return agents


class World:
    """One scenario's world, built and ready to run.

    :func:`run_scenario` runs it to the horizon in one go. A tabletop exercise
    (:mod:`biasleak.sim.exercise`) runs :attr:`env` in steps, changes the agents while it is
    paused, starts ``deferred`` developers when they join, and listens to every logged event
    (``on_event(agent, event, fields)``, called after the event is logged) to pause the world
    on a condition. Building, pausing and resuming draw no random number, so a world run in
    steps logs the same events as one run in one go.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int | None = None,
        log_dir: str | Path = "logs",
        log_name: str | None = None,
        header_extra: dict[str, Any] | None = None,
        deferred: frozenset[str] = frozenset(),
        on_event: Callable[[str, str, dict[str, Any]], None] | None = None,
    ) -> None:
        run_seed = scenario.seed if seed is None else int(seed)
        resolved = scenario.model_copy(update={"seed": run_seed})
        self.resolved = resolved
        """The scenario with the run's seed."""
        draw = draw_key(resolved, run_seed)
        data, h0, base_accuracy, proxy, proxy_baseline, proxy_p = prepared(*draw)
        self.data = data
        """The loaded data (the audit set's attribute included: sim-side only)."""
        self.h0 = h0
        """The base model's predictions on the audit set."""
        self.built = _build_developers(resolved, data, h0, proxy)
        """(spec, identity, strategy or its setup error) of every developer identity."""
        header = _header(resolved, data, self.built, base_accuracy, proxy_baseline, proxy_p)
        header.update(header_extra or {})
        self._header_developers: list[dict[str, Any]] = header["developers"]
        self._proxy_p = proxy_p
        log_path = Path(log_dir) / f"{log_name or f'{resolved.name}-seed{run_seed}'}.jsonl"
        self.env = simpy.Environment()
        """The SimPy environment (simulated hours)."""
        env = self.env
        self.runlog = RunLog(
            log_path,
            header=header,
            clock=lambda: env.now,
            max_events=resolved.limits.max_events,
            max_bytes=resolved.limits.max_log_bytes,
        )
        self.log_path = self.runlog.path
        """This run's own log file (another writer may hold the name asked for)."""
        self._loggers: Any = self.runlog if on_event is None else Tapped(self.runlog, on_event)
        self.deferred = set(deferred)
        """Scenario developer ids built but not started yet."""
        try:
            self.encoded = None
            if uses_services(resolved):
                self.encoded = encoded(*draw)
            self.agents = _assemble(
                env, resolved, data, self.built, self._loggers, self.encoded, frozenset(deferred)
            )
            """The running agents."""
        except BaseException:
            self.abort()
            raise

    @property
    def horizon(self) -> float:
        """The horizon in simulated hours."""
        return self.resolved.horizon_days * HOURS_PER_DAY

    def logger(self, agent: str) -> Any:
        """A bound logger of this run (heard by the listener, when there is one)."""
        return self._loggers.logger(agent)

    def start_developer(self, spec_id: str) -> list[str]:
        """Start the deferred developer ``spec_id`` now; return the identities started."""
        if spec_id not in self.deferred:
            raise ValueError(f"developer {spec_id!r} is not waiting to join")
        self.deferred.discard(spec_id)
        started = []
        for item in self.built:
            if item[0].id == spec_id:
                _start_developer(self.env, self.resolved, item, self.agents, self._loggers)
                started.append(item[1])
        return started

    def start_auditor(self, config: Any) -> Auditor:
        """Start an external auditor described by ``config`` (an ``AuditorConfig``) now."""
        self.agents.compliance.keep_predictions = True
        auditor = _start_auditor(self.env, config, self.agents.compliance, self.logger("auditor"))
        self.agents.auditor = auditor
        return auditor

    def finish(self, *, horizon: bool = True) -> RunResult:
        """Close the run: ``horizon_reached`` (when ``horizon``), the services' scores, the
        summary rebuilt from the log, the side file. An interrupted exercise closes with
        ``horizon=False``: its log gets a summary of what happened up to the stop."""
        try:
            if horizon:
                self.logger("sim").info("horizon_reached")
                if self.encoded is not None:
                    evaluate_services(self.built, self.data, self.encoded, self.logger("evaluator"))
            if self.agents.exposure is not None:
                self.agents.exposure.finish(
                    self._header_developers,
                    prior=self._proxy_p,
                    proxy=frozenset(
                        identity
                        for spec, identity, _ in self.built
                        if spec.strategy.kind in PROXY_KINDS
                    ),
                )
            self.runlog.flush()  # the summary is rebuilt from the file, as replay does
            summary = jsonable(summarize(read_log(self.log_path)))
        except BaseException:
            self.runlog.abort()
            raise
        finally:
            _close(self.built)
        self.runlog.close(summary)  # the stored summary has no path in it: location-free
        return RunResult({"log": str(self.log_path), **summary}, self.log_path)

    def abort(self) -> None:
        """Close the log without a summary and release what strategies hold."""
        try:
            self.runlog.abort()
        finally:
            _close(self.built)


def run_scenario(
    scenario: Scenario,
    *,
    seed: int | None = None,
    log_dir: str | Path = "logs",
    log_name: str | None = None,
) -> RunResult:
    """Run one scenario; return its summary and the path of its log.

    The log is ``log_dir/<log_name>.jsonl``, by default ``<scenario name>-seed<seed>``.
    """
    world = World(scenario, seed=seed, log_dir=log_dir, log_name=log_name)
    try:
        world.env.run(until=world.horizon)
    except BaseException:
        world.abort()
        raise
    return world.finish()
