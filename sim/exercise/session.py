"""The exercise engine: a SimPy world that pauses for people, and their decisions logged.

An :class:`ExerciseSession` builds the scenario's world (:class:`biasleak.sim.world.World`) and
runs it in steps. :meth:`~ExerciseSession.advance` runs the world until the next decision point
that has no scripted decision, or to the horizon. On the way, whatever falls due happens, in the
exercise file's order (injects before decision points at the same moment):

- a timed item (``at_hours``) falls due when the clock reaches it: the world stops at that time,
  before any other event of that time, as ``env.run(until=...)`` stops;
- an item on a condition falls due when the condition first holds. The world's loggers tell the
  session about every event as it is logged (the world's listener); when a condition holds, the
  session succeeds a SimPy event the run is waiting on, and the world stops right there;
- an inject logs ``inject_fired`` and does what it says (a developer joins, a scripted policy
  change, a message to roles);
- a decision point logs ``decision_point_reached``. With a scripted decision the session applies
  it at once; otherwise the world stays paused (:attr:`~ExerciseSession.pending`) until
  :meth:`~ExerciseSession.decide` records a person's choice.

Every decision is one ``decision_recorded`` event of the ``facilitator`` agent, with the option,
who took it and the stated rationale, followed by the events of its actions
(:mod:`.actions`). Pausing and resuming draw no random number and change no order of events, and
each agent draws from its own stream (:func:`biasleak.sim.world.rng_for`), so the same file and
the same decisions give a byte-identical log and report, whether the decisions were typed or
scripted; and a different decision changes nothing that happened before it, nor any developer's
own draws.

The session's views (:meth:`~ExerciseSession.status`, :meth:`~ExerciseSession.evidence`,
:meth:`~ExerciseSession.timeline`) are filtered by role (:mod:`.views`): only the facilitator
sees the ground truth. :meth:`~ExerciseSession.finish` writes the after-action report
(:mod:`.report`), :meth:`~ExerciseSession.interrupt` a partial one, and :func:`run_branches`
reruns the exercise with some decisions changed and compares the two.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import simpy
from simpy.core import StopSimulation
from simpy.events import URGENT

from biasleak.mechanisms.digests import text_digest
from biasleak.sim.exercise import views
from biasleak.sim.exercise.actions import ActionContext, apply_action
from biasleak.sim.exercise.loading import (
    LoadedExercise,
    decision_problems,
    load_decisions,
    load_exercise,
)
from biasleak.sim.exercise.models import DecisionPoint, Exercise, ScriptedDecision
from biasleak.sim.exercise.record import Record, clock
from biasleak.sim.runlog import read_log
from biasleak.sim.world import World, rng_for

__all__ = [
    "DEFAULT_OUT",
    "ExerciseError",
    "ExerciseSession",
    "Pending",
    "advance_problem",
    "branch_problem",
    "decision_problem",
    "run_branches",
]

DEFAULT_OUT: Final = "logs/exercises"
"""Where an exercise writes its log and report without ``out`` (``<DEFAULT_OUT>/<name>``)."""
# What a person reads when a step cannot be taken: the same words in the terminal, the browser
# console and a Python session (the console shows them as they are).
NOTHING_PENDING: Final = (
    "No decision is waiting. Advance the clock to run the world to the next decision point."
)
DECIDE_FIRST: Final = (
    "The world is paused at decision {id!r} ({title}). Record a decision before advancing."
)
FINISHED: Final = (
    "The exercise has finished at {now} simulated hours. Open the after-action report or restart."
)
UNKNOWN_OPTION: Final = "Option {option!r} is not an option of decision {id!r}. Options: {allowed}."
UNKNOWN_ROLE: Final = "Role {role!r} is not in this exercise. Roles: {roles}."
UNKNOWN_DECISION: Final = "There is no decision {id!r} in this exercise. Decisions: {ids}."
UNKNOWN_BRANCH_OPTION: Final = "Decision {id!r} has no option {option!r}. Its options: {allowed}."
NEEDS_A_PERSON: Final = (
    "decision point {id!r} has no scripted decision: decide it in the terminal or the browser, "
    "or script it (decisions: in the file, or --decisions FILE)"
)


class ExerciseError(ValueError):
    """A request the exercise cannot take: a bad option or role, nothing pending, finished."""


@dataclass(frozen=True)
class Pending:
    """A decision point where the world is paused, waiting for a person."""

    id: str
    title: str
    prompt: str
    owner: str
    """The role expected to decide."""
    options: list[tuple[str, str, str]]
    """(id, label, description) of each option, in the file's order."""


class _Alarm(simpy.Event):
    """An event at ``delay`` hours from now, processed before every other event of that time
    (what ``env.run(until=t)`` schedules), so that a timed pause happens at the same point of
    the event order as the end of a run."""

    def __init__(self, env: simpy.Environment, delay: float) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, URGENT, delay)


class ExerciseSession:
    """One play of an exercise: the world, the clock, what is pending, what was decided."""

    def __init__(
        self,
        loaded: LoadedExercise,
        *,
        scripted: Mapping[str, ScriptedDecision] | None = None,
        out: str | Path | None = None,
    ) -> None:
        self.loaded = loaded
        self.exercise: Exercise = loaded.exercise
        """The validated exercise file."""
        self.out = Path(out) if out is not None else Path(DEFAULT_OUT) / self.exercise.name
        """Where the log, the report and the decisions taken are written."""
        self.out.mkdir(parents=True, exist_ok=True)
        self.scripted: dict[str, ScriptedDecision] = dict(scripted or {})
        """Decision id -> the scripted decision applied when the point is reached."""
        self.pending: Pending | None = None
        """Where the world is paused waiting for a person (None: not paused for a decision)."""
        self.finished = False
        """Whether the world reached its horizon (or was interrupted) and the log is closed."""
        self.interrupted = False
        self.decided: dict[str, str] = {}
        """Decision id -> the option taken."""
        self._fired: dict[str, float] = {}
        self._due: list[tuple[str, str]] = []  # (item id, why), in the order they fell due
        self._stop: simpy.Event | None = None
        self._ready = False
        self._order = {
            item.id: k
            for k, item in enumerate([*self.exercise.msel, *self.exercise.decision_points])
        }
        self.report_path: Path | None = None
        scenario = loaded.scenario
        self.seed = scenario.seed
        """The run's seed."""
        header_extra = {
            "exercise": self.exercise.model_dump(mode="json"),
            "exercise_hash": text_digest(
                json.dumps(self.exercise.model_dump(mode="json"), sort_keys=True)
            ),
        }
        self._early: list[dict[str, Any]] = []  # events logged while the world is being built
        self.world = World(
            scenario,
            log_dir=self.out,
            log_name=f"{self.exercise.name}-seed{self.seed}",
            header_extra=header_extra,
            deferred=loaded.joining,
            on_event=self._heard,
        )
        """The running world."""
        header = {
            "developers": [
                {"id": i, "organization": s.organization, "strategy": s.strategy.kind}
                for s, i, _ in self.world.built
            ]
        }
        self.record = Record(header)
        """What has happened so far (the report rebuilds it from the log)."""
        for event in self._early:
            self.record.add(event)
        self._facilitator = self.world.logger("facilitator")
        self._ctx = ActionContext(
            self.world,
            scenario.compliance,
            rng_for(self.seed, "compliance:audit_release"),
            self._facilitator,
        )
        if self._can_start_auditor():  # a later auditor must see the models sent before it
            self.world.agents.compliance.keep_predictions = True
        self._ready = True
        self._check_conditions()

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        decisions: Mapping[str, Mapping[str, Any]] | None = None,
        decisions_file: str | Path | None = None,
        branch: Mapping[str, str] | None = None,
        out: str | Path | None = None,
    ) -> ExerciseSession:
        """A session of the exercise file ``path``.

        The scripted decisions are the file's ``decisions:``, updated by ``decisions_file``,
        then by ``decisions`` (``{id: {"option", "by", "rationale"}}``); ``branch``
        (``{id: option}``) changes the option of some (keeping who decided, and saying in the
        rationale that it is a branch). Raises :class:`~biasleak.sim.scenario.ScenarioError`
        for a bad file and :class:`ExerciseError` for bad decisions.
        """
        loaded = load_exercise(path)
        scripted = scripted_decisions(
            loaded.exercise, decisions=decisions, decisions_file=decisions_file, branch=branch
        )
        return cls(loaded, scripted=scripted, out=out)

    def _can_start_auditor(self) -> bool:
        options = [a for p in self.exercise.decision_points for o in p.options for a in o.actions]
        injected = [a for i in self.exercise.msel for a in getattr(i, "actions", [])]
        return any(a.kind == "auditor_on" for a in [*options, *injected])

    # -- the world's events --------------------------------------------------------------------

    def _heard(self, agent: str, event: str, fields: dict[str, Any]) -> None:
        """The world's listener: digest the event, then see whether something fell due."""
        entry = {**fields, "agent": agent, "event": event}
        if not self._ready:
            entry["t"] = 0.0
            self._early.append(entry)
            return
        entry["t"] = self.world.env.now
        self.record.add(entry)
        self._check_conditions()

    def _holds(self, item: Any) -> str | None:
        """Why ``item``'s condition holds now, or None."""
        cond, r = item.when, self.record
        if cond is None:
            return None
        if cond.kind == "alert":
            alerts = [a for a in r.alerts if cond.organization in (None, a["organization"])]
            if len(alerts) >= cond.count:
                return f"alert {cond.count} raised ({alerts[cond.count - 1]['detector']})"
        elif cond.kind == "leakage_above":
            for identity, series in sorted(r.leakage.items()):
                if cond.developer in (None, identity) and any(v >= cond.percent for _, v in series):
                    return f"leakage of {identity} reached {cond.percent:g}%"
        elif cond.kind == "epsilon_above":
            for org, total in sorted(r.epsilon_total.items()):
                if cond.organization in (None, org) and total >= cond.epsilon:
                    return f"{org} was charged epsilon {total:g}"
        elif cond.kind == "refusals_above":
            total = sum(
                n for reason, n in r.refused_total().items() if cond.reason in (None, reason)
            )
            if total >= cond.count:
                return f"{total} models refused"
        elif cond.kind == "after":
            fired = self._fired.get(cond.item)
            if fired is not None and self.now >= fired + cond.hours - 1e-12:
                return f"{cond.hours:g} h after {cond.item}"
        elif cond.kind == "decided":
            taken = self.decided.get(cond.decision)
            if taken is not None and cond.option in (None, taken):
                return f"decision {cond.decision} taken ({taken})"
        return None

    def _items(self) -> list[Any]:
        return [*self.exercise.msel, *self.exercise.decision_points]

    def _waiting(self, item_id: str) -> bool:
        return item_id not in self._fired and all(d != item_id for d, _ in self._due)

    def _check_conditions(self) -> None:
        fell = False
        for item in self._items():
            if item.when is None or not self._waiting(item.id):
                continue
            why = self._holds(item)
            if why is not None:
                self._due.append((item.id, why))
                fell = True
        if fell and self._stop is not None and not self._stop.triggered:
            self._stop.succeed()

    def _timed_due(self) -> None:
        for item in self._items():
            at = self._at(item)
            if at is not None and at <= self.now + 1e-12 and self._waiting(item.id):
                self._due.append((item.id, f"at {at:g} h"))

    def _at(self, item: Any) -> float | None:
        """When a timed item (or one ``hours`` after another) falls due; None otherwise."""
        if item.at_hours is not None:
            return float(item.at_hours)
        cond = item.when
        if cond is not None and cond.kind == "after" and cond.item in self._fired:
            return self._fired[cond.item] + cond.hours
        return None

    # -- running -------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """Simulated hours."""
        return float(self.world.env.now)

    @property
    def clock(self) -> str:
        """The simulated clock as people read it (``day 2, 06:00``)."""
        return clock(self.now)

    def advance(self) -> None:
        """Run the world to the next decision point without a scripted decision, or to the
        horizon (then :attr:`finished`); scripted decisions on the way are applied and logged."""
        pending = self.exercise.point(self.pending.id) if self.pending is not None else None
        problem = advance_problem(finished=self.finished, pending=pending, now=self.now)
        if problem is not None:
            raise ExerciseError(problem)
        horizon = self.loaded.horizon_hours
        while True:
            self._timed_due()
            self._process_due()
            if self.pending is not None:
                return
            if self.now >= horizon:
                self._close(horizon=True)
                return
            times = [self._at(i) for i in self._items() if self._waiting(i.id)]
            wake = min([t for t in times if t is not None and t > self.now] + [horizon])
            self._run_until(wake)

    def _run_until(self, wake: float) -> None:
        env = self.world.env
        alarm = _Alarm(env, wake - env.now)
        alarm.callbacks.append(StopSimulation.callback)
        self._stop = env.event()
        self._stop.callbacks.append(StopSimulation.callback)
        try:
            env.run()
        finally:
            self._stop = None
            # Stopped by a condition first, the alarm must not stop a later run. (SimPy puts an
            # event whose callback stopped the run back on the queue with the callbacks left,
            # so the stop event and the alarm are processed again, doing nothing.)
            if alarm.callbacks and StopSimulation.callback in alarm.callbacks:
                alarm.callbacks.remove(StopSimulation.callback)

    def _process_due(self) -> None:
        while self._due and self.pending is None:
            self._due.sort(key=lambda d: (self._is_point(d[0]), self._order[d[0]]))
            item_id, why = self._due.pop(0)
            self._fired[item_id] = self.now
            point = self.exercise.point(item_id)
            if point is None:
                self._inject(item_id, why)
            else:
                self._reach(point, why)
            self._check_conditions()
            self._timed_due()

    def _is_point(self, item_id: str) -> bool:
        return self.exercise.point(item_id) is not None

    def _inject(self, item_id: str, why: str) -> None:
        item = next(i for i in self.exercise.msel if i.id == item_id)
        self._facilitator.info(
            "inject_fired",
            id=item.id,
            kind=item.kind,
            category=getattr(item, "category", item.kind),
            text=item.text,
            to=list(item.to),
            reason=why,
        )
        if item.kind == "developer_joins":
            identities = self.world.start_developer(item.developer.id)
            self._facilitator.info(
                "developer_joined",
                inject=item.id,
                identities=identities,
                organization=item.developer.organization,
                strategy=item.developer.strategy.kind,
            )
        elif item.kind == "policy":
            for action in item.actions:
                apply_action(self._ctx, action, cause=item.id)

    def _reach(self, point: DecisionPoint, why: str) -> None:
        self._facilitator.info(
            "decision_point_reached", decision=point.id, title=point.title, reason=why
        )
        scripted = self.scripted.get(point.id)
        if scripted is not None:
            self._record(point, scripted.option, scripted.by, scripted.rationale)
            return
        self.pending = Pending(
            point.id,
            point.title,
            point.prompt,
            point.owner,
            [(o.id, o.label, o.description) for o in point.options],
        )

    def _record(self, point: DecisionPoint, option_id: str, by: str, rationale: str) -> None:
        option = point.option(option_id)
        assert option is not None
        self._facilitator.info(
            "decision_recorded",
            decision=point.id,
            title=point.title,
            option=option.id,
            label=option.label,
            by=by,
            rationale=rationale,
        )
        self.decided[point.id] = option.id
        for action in option.actions:
            apply_action(self._ctx, action, cause=point.id)

    def decide(self, option: str, *, by: str, rationale: str = "") -> None:
        """Record the pending decision: ``option`` (its id), taken by the role ``by``, and why.

        The world stays paused; :meth:`advance` runs it on.
        """
        point = self.exercise.point(self.pending.id) if self.pending is not None else None
        problem = decision_problem(
            finished=self.finished,
            pending=point,
            now=self.now,
            option=option,
            by=by,
            roles=self.exercise.roles,
        )
        if problem is not None:
            raise ExerciseError(problem)
        assert point is not None
        if not isinstance(rationale, str):
            raise ExerciseError(f"rationale must be text; received {type(rationale).__name__}")
        self.pending = None
        self._record(point, option, by, rationale.strip())
        self._check_conditions()

    def _role(self, role: str) -> None:
        if role not in self.exercise.roles:
            roles = ", ".join(self.exercise.roles)
            raise ExerciseError(UNKNOWN_ROLE.format(role=role, roles=roles))

    def run_to_end(self) -> None:
        """Advance to the horizon; every decision on the way must be scripted."""
        while not self.finished:
            self.advance()
            if self.pending is not None:
                raise ExerciseError(NEEDS_A_PERSON.format(id=self.pending.id))

    def _close(self, *, horizon: bool) -> None:
        self.world.finish(horizon=horizon)
        self.finished = True
        self.pending = None

    # -- views ---------------------------------------------------------------------------------

    def status(self, role: str) -> dict[str, Any]:
        """What ``role`` may see now (JSON-able); only the facilitator gets the ground truth."""
        self._role(role)
        return views.status(self, role)

    def evidence(self, role: str) -> dict[str, Any]:
        """The evidence ``role`` sees for the pending decision (JSON-able)."""
        self._role(role)
        return views.evidence(self, role)

    def timeline(self, role: str) -> list[dict[str, Any]]:
        """``[{"t", "clock", "kind", "text"}]``: what happened so far, as ``role`` may see it."""
        self._role(role)
        return views.timeline(self, role)

    # -- the end -------------------------------------------------------------------------------

    def finish(self) -> Path:
        """Run to the horizon (every decision left must be scripted) and write the after-action
        report: ``OUT/report.html``, ``OUT/report.md`` and ``OUT/decisions.yaml`` (the decisions
        taken, which replay the exercise exactly with ``--decisions``). Returns report.html."""
        if not self.finished:
            if self.pending is not None:
                raise ExerciseError(NEEDS_A_PERSON.format(id=self.pending.id))
            self.run_to_end()
        return self._write()

    def interrupt(self) -> Path:
        """Stop now (Ctrl-C): log ``exercise_interrupted``, close the log with the summary of
        what happened so far (``biasleak replay`` rebuilds it), and write a partial report marked
        interrupted. Returns report.html."""
        if not self.finished:
            self._facilitator.info(
                "exercise_interrupted",
                pending=None if self.pending is None else self.pending.id,
            )
            self.interrupted = True
            self._close(horizon=False)
        return self._write()

    def abort(self) -> None:
        """Drop the session without a report (the log keeps its events, without a summary)."""
        if not self.finished:
            self.world.abort()
            self.finished = True

    @property
    def log_path(self) -> Path:
        """The run's log file."""
        return self.world.log_path

    def events(self) -> list[dict[str, Any]]:
        """The closed log's events (header first)."""
        return list(read_log(self.log_path))

    def _write(self) -> Path:
        from biasleak.sim.exercise.report import write_report

        write_decisions(self.out / "decisions.yaml", self.events())
        self.report_path = write_report(self.out, self.exercise, self.events())
        return self.report_path


def write_decisions(path: Path, events: list[dict[str, Any]]) -> None:
    """The decisions a log recorded, as a ``--decisions`` file (JSON, which is YAML)."""
    taken = {
        e["decision"]: {"option": e["option"], "by": e["by"], "rationale": e["rationale"]}
        for e in events
        if e.get("event") == "decision_recorded"
    }
    path.write_text(json.dumps({"decisions": taken}, indent=2, sort_keys=True) + "\n", "utf-8")


def scripted_decisions(
    exercise: Exercise,
    *,
    decisions: Mapping[str, Mapping[str, Any]] | None = None,
    decisions_file: str | Path | None = None,
    branch: Mapping[str, str] | None = None,
    live: bool = False,
) -> dict[str, ScriptedDecision]:
    """The file's decisions, updated by a decisions file, a dict and a branch (in that order).

    ``live`` leaves the file's own ``decisions:`` out: the room decides those points itself.
    """
    scripted = {} if live else dict(exercise.decisions)
    if decisions_file is not None:
        scripted.update(load_decisions(decisions_file, exercise))
    if decisions:
        given: dict[str, ScriptedDecision] = {}
        problems = []
        for decision_id, value in decisions.items():
            try:
                given[decision_id] = ScriptedDecision.model_validate(dict(value))
            except (TypeError, ValueError) as err:
                problems.append(f"decisions.{decision_id}: {err}")
        problems += decision_problems(exercise, given, source="decisions", line_of=lambda _p: None)
        if problems:
            raise ExerciseError("\n".join(problems))
        scripted.update(given)
    points = {p.id: [o.id for o in p.options] for p in exercise.decision_points}
    for decision_id, option in (branch or {}).items():
        problem = branch_problem(points, decision_id, option)
        if problem is not None:
            raise ExerciseError(f"--branch: {problem}")
        point = exercise.point(decision_id)
        assert point is not None
        before = scripted.get(decision_id)
        by = before.by if before is not None else point.owner
        was = f" instead of {before.option!r}" if before is not None else ""
        scripted[decision_id] = ScriptedDecision(
            option=option, by=by, rationale=f"branch: {option!r}{was}"
        )
    return scripted


def advance_problem(*, finished: bool, pending: Any, now: float) -> str | None:
    """Why the clock cannot advance now (``pending``: the decision point waiting, with its
    ``id`` and ``title``), or None: the one check of every session and console."""
    if finished:
        return FINISHED.format(now=f"{now:g}")
    if pending is not None:
        return DECIDE_FIRST.format(id=pending.id, title=pending.title)
    return None


def decision_problem(
    *, finished: bool, pending: Any, now: float, option: str, by: str, roles: Sequence[str]
) -> str | None:
    """Why ``option`` taken by ``by`` cannot be recorded now, or None (``pending``: the
    decision point waiting, whose ``options`` have an ``id`` or are ``(id, ...)`` tuples)."""
    if finished:
        return FINISHED.format(now=f"{now:g}")
    if pending is None:
        return NOTHING_PENDING
    options = [o[0] if isinstance(o, tuple) else o.id for o in pending.options]
    if option not in options:
        return UNKNOWN_OPTION.format(option=option, id=pending.id, allowed=", ".join(options))
    if by not in roles:
        return UNKNOWN_ROLE.format(role=by, roles=", ".join(roles))
    return None


def branch_problem(
    points: Mapping[str, Sequence[str]], decision_id: str, option: str
) -> str | None:
    """What is wrong with changing ``decision_id`` to ``option`` in a branch (``points``: each
    decision point's option ids), or None: the one check of the command line and the console."""
    if decision_id not in points:
        return UNKNOWN_DECISION.format(id=decision_id, ids=", ".join(points) or "none")
    if option not in points[decision_id]:
        allowed = ", ".join(points[decision_id])
        return UNKNOWN_BRANCH_OPTION.format(id=decision_id, option=option, allowed=allowed)
    return None


def run_branches(
    path: str | Path,
    *,
    decisions: Mapping[str, Mapping[str, Any]] | None = None,
    decisions_file: str | Path | None = None,
    branch: dict[str, str],
    out: str | Path,
) -> Path:
    """Run the exercise as scripted (``OUT/base``) and again from the same seed with the
    ``branch`` decisions changed (``OUT/branch``); write ``OUT/report.html`` (and .md) with both
    outcomes side by side. Every decision must be scripted. Returns the comparison's path."""
    from biasleak.sim.exercise.report import write_comparison

    if not branch:
        raise ExerciseError("--branch: name at least one DECISION=OPTION to change")
    out = Path(out)
    base = ExerciseSession.from_file(
        path, decisions=decisions, decisions_file=decisions_file, out=out / "base"
    )
    base.finish()
    variant = ExerciseSession.from_file(
        path, decisions=decisions, decisions_file=decisions_file, branch=branch, out=out / "branch"
    )
    variant.finish()
    return write_comparison(out, base.exercise, base.events(), variant.events(), branch)
