"""From an exercise file to a validated exercise and the world it runs.

Loading follows the scenario files' rules and reuses their machinery (:mod:`biasleak.sim.scenario`):
the YAML is read with YAML 1.2 rules and unique keys, the models forbid unknown keys, and every
problem becomes one line ``FILE:LINE: key.path: message`` raised as a
:class:`~biasleak.sim.scenario.ScenarioError` (the command line prints the lines and exits with
code 2). On top of what a single mapping can check, the exercise as a whole must hang together:

- the scenario (a file relative to the exercise file, or inline) is a valid scenario; a problem
  inline is reported at ``scenario.<key path>`` of the exercise file, a problem in a scenario
  file at that file's own line;
- ids are unique across the MSEL and the decision points; ``after`` and ``decided`` conditions
  name items, decisions and options that exist;
- roles named anywhere (evidence, audiences, owners, scripted decisions) are seated; evidence
  computed from the ground truth (``leakage``) is shown to the facilitator only;
- joining developers do not clash with the scenario's, and the scenario with them stays within
  its limits;
- every action names organisations and identities of the world, ``services_only`` needs a
  scenario that offers services, and a ``refusals_above`` condition names a refusal code the
  compliance team sends;
- every option's (and policy inject's) policy change applies to some policy the exercise can
  be in when it happens: the scenario's, or one that other options and policy injects lead to
  (so a mechanism the policy's metrics cannot use is a problem at the option, not a crash in
  the middle of an exercise, while scaling a budget that an earlier decision may add is
  fine). A change that the decisions actually taken leave impossible is refused when it
  happens, with a logged reason (:mod:`.actions`);
- timed items lie before the horizon; scripted decisions name decision points, options and roles.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from biasleak.agents.messages import REFUSAL_REASONS
from biasleak.mechanisms._validation import did_you_mean
from biasleak.sim.exercise.actions import (
    POLICY_ACTIONS,
    PolicyChangeError,
    changed_compliance,
    services_only,
)
from biasleak.sim.exercise.models import (
    ACTIONS,
    CONDITIONS,
    GROUND_TRUTH_EVIDENCE,
    INDICATORS,
    INJECTS,
    DecisionsFile,
    Exercise,
    ScriptedDecision,
)
from biasleak.sim.scenario import (
    CANNOT_READ,
    NOT_A_MAPPING,
    Document,
    Scenario,
    ScenarioError,
    read_document,
    read_scenario,
)
from biasleak.sim.scenario.errors import _describe, pick_model, problem_line

__all__ = ["LoadedExercise", "load_decisions", "load_exercise", "parse_exercise"]

HOURS_PER_DAY = 24.0
COMPLIANCE_REFUSALS: Final[tuple[str, ...]] = tuple(r for r in REFUSAL_REASONS if r != "timeout")
"""Refusal codes a ``refusals_above`` condition may name: the ones the compliance team sends
(``timeout`` is what a developer records when no reply came; the team never refuses with it)."""
POLICY_STATES_EXPLORED: Final = 256
"""At most this many policies are explored as the ones an exercise can be in (see
:meth:`_Checks._reachable`); beyond, a policy action is checked against those found."""
_OWN_TAGS = set(ACTIONS) | set(CONDITIONS) | set(INDICATORS) | set(INJECTS)
"""Union tags pydantic inserts into error locations for the exercise's own unions."""


@dataclass(frozen=True)
class LoadedExercise:
    """A validated exercise with the world it runs."""

    exercise: Exercise
    """The exercise file's model."""
    scenario: Scenario
    """The scenario the world is built from: the exercise's scenario with the developers that
    join during the exercise appended (they start when their inject fires)."""
    joining: frozenset[str]
    """Developer ids that join during the exercise."""
    source: str
    """The exercise file's path (as error lines name it)."""

    @property
    def horizon_hours(self) -> float:
        return self.scenario.horizon_days * HOURS_PER_DAY


# -- pydantic problems in the user's words -------------------------------------------------------


def _strip_own_tags(data: Any, loc: Sequence[Any]) -> tuple[Any, ...]:
    """``loc`` without the tags of the exercise's unions (the scenario's are left to
    :func:`biasleak.sim.scenario.errors.describe`'s own walk)."""
    out: list[Any] = []
    cur = data
    for part in loc:
        if isinstance(cur, dict) and part not in cur and part in _OWN_TAGS:
            continue
        out.append(part)
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            cur = cur[part]
        else:
            cur = None
    return tuple(out)


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_of(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        args = typing.get_args(annotation)
        if origin is dict:
            args = args[1:]
        return [m for arg in args for m in _models_of(arg)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _model_at(root: type[BaseModel], data: Any, path: Sequence[Any]) -> type[BaseModel] | None:
    """The model that validates the mapping at ``path`` (for an unknown key's allowed keys)."""
    model: type[BaseModel] | None = root
    cur = data
    via_dict = False
    for key in path:
        if isinstance(key, int) or via_dict:
            cur = cur[key] if isinstance(cur, list | dict) and _has(cur, key) else None
            via_dict = False
            continue
        if model is None or key not in model.model_fields:
            return None
        annotation = model.model_fields[key].annotation
        via_dict = typing_is_dict(annotation)
        candidates = _models_of(annotation)
        cur = cur.get(key) if isinstance(cur, dict) else None
        model = pick_model(candidates, cur)
    return model


def typing_is_dict(annotation: Any) -> bool:
    """Whether an annotation is a ``dict[...]`` (its keys are the user's, not fields)."""
    return typing.get_origin(annotation) is dict


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, list):
        return isinstance(key, int) and key < len(container)
    return key in container


def _explain(
    err: ValidationError,
    data: Any,
    *,
    root: type[BaseModel],
    source: str,
    line_of: Callable[[Sequence[Any]], int | None],
    prefix: Sequence[Any] = (),
) -> list[str]:
    """One ``FILE:LINE: key.path: message`` line per problem pydantic found."""
    lines = []
    for raw in err.errors():
        error = dict(raw)
        error["loc"] = _strip_own_tags(data, raw["loc"])
        if error["type"] == "extra_forbidden":
            path = list(error["loc"])
            parent = _model_at(root, data, path[:-1])
            allowed = sorted(parent.model_fields) if parent is not None else []
            key = path[-1]
            message = f"unknown key {key!r}; allowed keys: {allowed}{did_you_mean(key, allowed)}"
        else:
            path, message = _describe(error, data)  # type: ignore[arg-type]
        lines.append(problem_line(source, [*prefix, *path], message, line_of))
    return lines


# -- reading ---------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError([f"{path}: {CANNOT_READ.format(reason=err.strerror)}"]) from None
    except UnicodeDecodeError as err:
        reason = f"not UTF-8 text: {err.reason} at byte {err.start}"
        raise ScenarioError([f"{path}: {CANNOT_READ.format(reason=reason)}"]) from None


def load_exercise(path: str | Path) -> LoadedExercise:
    """Read and validate an exercise file; raise :class:`ScenarioError` on any problem."""
    p = Path(path)
    return parse_exercise(_read_text(p), source=str(p), base=p.parent)


def parse_exercise(text: str, *, source: str = "<exercise>", base: Path = Path()) -> LoadedExercise:
    """Parse and validate exercise YAML text; a scenario path is read relative to ``base``."""
    document = read_document(text, source=source)
    data = document.data
    if not isinstance(data, dict):
        raise ScenarioError([f"{source}: {NOT_A_MAPPING.replace('scenario', 'an exercise')}"])
    try:
        exercise = Exercise.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(
            _explain(err, data, root=Exercise, source=source, line_of=document.line_of)
        ) from None
    scenario = _scenario(exercise, data, document, source=source, base=base)
    problems = _Checks(exercise, scenario, source, document).run()
    if problems:
        raise ScenarioError(problems)
    joining = [i for i in exercise.msel if i.kind == "developer_joins"]
    world = scenario
    if joining:
        dumped = scenario.model_dump(mode="json")
        dumped["developers"] += [i.developer.model_dump(mode="json") for i in joining]
        try:
            world = Scenario.model_validate(dumped)
        except ValidationError as err:
            index = {len(scenario.developers) + k: k for k in range(len(joining))}
            lines = []
            for path, message in _paths(err, dumped):
                if path[:1] == ["developers"] and len(path) > 1 and path[1] in index:
                    where = ["msel", exercise.msel.index(joining[index[path[1]]]), "developer"]
                    lines.append(
                        problem_line(source, [*where, *path[2:]], message, document.line_of)
                    )
                else:
                    lines.append(
                        problem_line(
                            source,
                            ["msel"],
                            f"with the joining developers, {'.'.join(map(str, path))}: {message}",
                            document.line_of,
                        )
                    )
            raise ScenarioError(lines) from None
    return LoadedExercise(exercise, world, frozenset(i.developer.id for i in joining), source)


def _paths(err: ValidationError, data: Any) -> Iterator[tuple[list[Any], str]]:
    for raw in err.errors():
        yield _describe(raw, data)


def _scenario(
    exercise: Exercise, data: dict[str, Any], document: Document, *, source: str, base: Path
) -> Scenario:
    """The exercise's scenario, from its file or inline."""
    if isinstance(exercise.scenario, str):
        path = base / exercise.scenario
        if not path.is_file():
            line = problem_line(
                source,
                ["scenario"],
                f"no scenario file {str(path)!r} (the path is relative to the exercise file)",
                document.line_of,
            )
            raise ScenarioError([line])
        return read_scenario(path).scenario
    inline = data["scenario"]
    try:
        return Scenario.model_validate(inline)
    except ValidationError as err:
        lines = [
            problem_line(source, ["scenario", *path], message, document.line_of)
            for path, message in _paths(err, inline)
        ]
        raise ScenarioError(lines) from None


# -- checks across the file ----------------------------------------------------------------------


class _Checks:
    """What no single mapping can check: references between parts of the exercise."""

    def __init__(self, exercise: Exercise, scenario: Scenario, source: str, document: Document):
        self.exercise = exercise
        self.scenario = scenario
        self.source = source
        self.document = document
        self.problems: list[str] = []
        joining = [i.developer for i in exercise.msel if i.kind == "developer_joins"]
        self.developers = [d.id for d in scenario.developers] + [d.id for d in joining]
        self.organizations = sorted(
            {d.organization for d in scenario.developers} | {d.organization for d in joining}
        )
        self.identities = self._identities(scenario, joining)
        self.items = [i.id for i in exercise.msel] + [p.id for p in exercise.decision_points]
        self._reached_configs: dict[str, list[Any]] = {}

    @staticmethod
    def _identities(scenario: Scenario, joining: list[Any]) -> list[str]:
        """Every identity a developer entry may use (a Sybil's ``<id>-<k>`` included)."""
        out = []
        for d in [*scenario.developers, *joining]:
            out.append(d.id)
            count = getattr(d.strategy, "identities", None)
            if isinstance(count, int):
                out.extend(f"{d.id}-{k}" for k in range(count + 1))
        return out

    def problem(self, path: Sequence[Any], message: str) -> None:
        self.problems.append(problem_line(self.source, path, message, self.document.line_of))

    def _known(self, path: Sequence[Any], value: Any, allowed: Sequence[str], what: str) -> None:
        if value is not None and value not in allowed:
            self.problem(
                path,
                f"unknown {what} {value!r}; allowed: {list(allowed)}{did_you_mean(value, allowed)}",
            )

    def run(self) -> list[str]:
        ex = self.exercise
        horizon = self.scenario.horizon_days * HOURS_PER_DAY
        seen: dict[str, str] = {}
        for section, items in (("msel", ex.msel), ("decision_points", ex.decision_points)):
            for k, item in enumerate(items):
                if item.id in seen:
                    self.problem([section, k, "id"], f"id {item.id!r} is used twice")
                seen[item.id] = section
                if item.at_hours is not None and item.at_hours >= horizon:
                    self.problem(
                        [section, k, "at_hours"],
                        f"at_hours {item.at_hours:g} is not before the horizon ({horizon:g} "
                        "hours); it would never happen",
                    )
                if item.when is not None:
                    self._condition([section, k, "when"], item.when)
                for key in ("to",):
                    for j, role in enumerate(getattr(item, key, None) or []):
                        self._role([section, k, key, j], role, allow_all=True)
                for j, action in enumerate(getattr(item, "actions", None) or []):
                    self._action([section, k, "actions", j], action)
        existing = {d.id for d in self.scenario.developers}
        for k, item in enumerate(ex.msel):
            if item.kind == "developer_joins" and item.developer.id in existing:
                self.problem(
                    ["msel", k, "developer", "id"],
                    f"developer {item.developer.id!r} is already in the scenario",
                )
        for k, point in enumerate(ex.decision_points):
            self._role(["decision_points", k, "owner"], point.owner)
            ids = [o.id for o in point.options]
            for j, option in enumerate(point.options):
                if ids.count(option.id) > 1 and ids.index(option.id) != j:
                    self.problem(["decision_points", k, "options", j, "id"], "option id used twice")
                for a, action in enumerate(option.actions):
                    self._action(["decision_points", k, "options", j, "actions", a], action)
                self._applies(
                    ["decision_points", k, "options", j, "actions"], option.actions, owner=point.id
                )
            for role, kinds in point.evidence.items():
                self._role(["decision_points", k, "evidence", role], role)
                truth = sorted(set(kinds) & GROUND_TRUTH_EVIDENCE)
                if truth and role != "facilitator":
                    self.problem(
                        ["decision_points", k, "evidence", role],
                        f"evidence {truth} is computed from the protected attribute (the "
                        "ground truth): only the facilitator may see it",
                    )
        for k, item in enumerate(ex.msel):
            if item.kind == "policy":
                self._applies(["msel", k, "actions"], item.actions, owner=item.id)
        for k, objective in enumerate(ex.objectives):
            self._role(["objectives", k, "owner"], objective.owner)
            ind = objective.indicator
            for j, dev in enumerate(getattr(ind, "developers", None) or []):
                self._known(
                    ["objectives", k, "indicator", "developers", j],
                    dev,
                    self.identities,
                    "developer",
                )
            if ind.kind == "deploy_hours":
                self._known(
                    ["objectives", k, "indicator", "developer"],
                    ind.developer,
                    self.identities,
                    "developer",
                )
            if ind.kind == "epsilon_spent":
                self._known(
                    ["objectives", k, "indicator", "organization"],
                    ind.organization,
                    self.organizations,
                    "organization",
                )
        ids = [o.id for o in ex.objectives]
        for k, objective in enumerate(ex.objectives):
            if ids.count(objective.id) > 1 and ids.index(objective.id) != k:
                self.problem(["objectives", k, "id"], f"id {objective.id!r} is used twice")
        self.problems.extend(
            decision_problems(
                ex,
                ex.decisions,
                source=self.source,
                line_of=self.document.line_of,
                prefix=["decisions"],
            )
        )
        return self.problems

    def _role(self, path: Sequence[Any], role: str, *, allow_all: bool = False) -> None:
        allowed = [*self.exercise.roles, *(["all"] if allow_all else [])]
        if role not in allowed:
            self.problem(path, f"role {role!r} is not seated in this exercise; roles: {allowed}")

    def _condition(self, path: list[Any], cond: Any) -> None:
        if cond.kind == "after":
            self._known([*path, "item"], cond.item, self.items, "inject or decision point")
        elif cond.kind == "decided":
            points = [p.id for p in self.exercise.decision_points]
            self._known([*path, "decision"], cond.decision, points, "decision point")
            point = self.exercise.point(cond.decision)
            if point is not None and cond.option is not None:
                self._known([*path, "option"], cond.option, [o.id for o in point.options], "option")
        elif cond.kind in ("alert", "epsilon_above"):
            self._known(
                [*path, "organization"], cond.organization, self.organizations, "organization"
            )
        elif cond.kind == "leakage_above":
            self._known([*path, "developer"], cond.developer, self.identities, "developer")
        elif cond.kind == "refusals_above":
            self._known([*path, "reason"], cond.reason, COMPLIANCE_REFUSALS, "refusal reason")

    def _action(self, path: list[Any], action: Any) -> None:
        if action.kind in ("suspend", "reinstate"):
            self._known(
                [*path, "organization"], action.organization, self.organizations, "organization"
            )
            self._known([*path, "identity"], action.identity, self.identities, "identity")
        elif action.kind == "services_only" and not self.scenario.compliance.services:
            self.problem(
                path,
                "services_only needs a scenario whose compliance team offers "
                "fair-learning services (compliance.services is empty)",
            )
        elif action.kind == "message":
            for j, role in enumerate(action.to):
                self._role([*path, "to", j], role, allow_all=True)

    def _policy_changes(self) -> list[tuple[str, list[Any]]]:
        """(owner, policy actions) of every option and policy inject that changes the policy:
        the owner is the decision point or inject (a decision point takes one option)."""
        out = []
        for point in self.exercise.decision_points:
            for option in point.options:
                actions = [a for a in option.actions if a.kind in POLICY_ACTIONS]
                if actions:
                    out.append((point.id, actions))
        for item in self.exercise.msel:
            if item.kind == "policy":
                actions = [a for a in item.actions if a.kind in POLICY_ACTIONS]
                if actions:
                    out.append((item.id, actions))
        return out

    def _reachable(self, owner: str) -> list[Any]:
        """The compliance configurations the exercise can be in before ``owner``'s actions.

        The scenario's, and those that the other decision points' options and the policy
        injects lead to, applied in any order, each decision point or inject at most once on a
        path (what earlier decisions and injects could have changed). Timing is not considered
        (an option that can only come later still counts): this admits more than can happen,
        never less, within :data:`POLICY_STATES_EXPLORED` paths.
        """
        if owner in self._reached_configs:
            return self._reached_configs[owner]
        start = self.scenario.compliance
        changes = [(o, acts) for o, acts in self._policy_changes() if o != owner]
        found: dict[str, Any] = {_state_key(start): start}
        seen: set[tuple[str, frozenset[str]]] = {(_state_key(start), frozenset())}
        frontier: list[tuple[Any, frozenset[str]]] = [(start, frozenset())]
        while frontier and len(seen) < POLICY_STATES_EXPLORED:
            config, used = frontier.pop(0)
            for other, actions in changes:
                after = None if other in used else _applied(config, actions)
                if after is None or isinstance(after, str):
                    continue
                key, path = _state_key(after), used | {other}
                if (key, path) not in seen and len(seen) < POLICY_STATES_EXPLORED:
                    seen.add((key, path))
                    found.setdefault(key, after)
                    frontier.append((after, path))
        self._reached_configs[owner] = list(found.values())
        return self._reached_configs[owner]

    def _applies(self, path: list[Any], actions: Sequence[Any], *, owner: str) -> None:
        """The policy actions, applied in order, give a valid policy from at least one policy
        the exercise can be in when they happen; otherwise the problem they meet on the
        scenario's own policy is reported at the action."""
        if not any(a.kind in POLICY_ACTIONS for a in actions):
            return
        problem = _applied(self.scenario.compliance, actions, where=True)
        if not isinstance(problem, tuple):
            return  # the common case: it applies to the scenario's policy
        for config in self._reachable(owner)[1:]:
            if not isinstance(_applied(config, actions, where=True), tuple):
                return
        index, message = problem
        self.problem([*path, index], message)


def _state_key(config: Any) -> str:
    """A configuration's identity (services-only or not, and its fields)."""
    return f"{services_only(config)}:{config.model_dump_json()}"


def _applied(config: Any, actions: Sequence[Any], *, where: bool = False) -> Any:
    """The configuration after ``actions``, or the problem: its message (with ``where``,
    ``(index of the action, message)``)."""
    for j, action in enumerate(actions):
        try:
            config = changed_compliance(config, action)
        except PolicyChangeError as err:
            return (j, str(err)) if where else str(err)
    return config


def decision_problems(
    exercise: Exercise,
    decisions: dict[str, ScriptedDecision],
    *,
    source: str,
    line_of: Callable[[Sequence[Any]], int | None],
    prefix: Sequence[Any] = (),
) -> list[str]:
    """Problems of scripted decisions: unknown decision points, options or roles."""
    problems = []
    points = [p.id for p in exercise.decision_points]
    for decision_id, scripted in decisions.items():
        point = exercise.point(decision_id)
        if point is None:
            problems.append(
                problem_line(
                    source,
                    [*prefix, decision_id],
                    f"unknown decision point {decision_id!r}; allowed: {points}"
                    + did_you_mean(decision_id, points),
                    line_of,
                )
            )
            continue
        options = [o.id for o in point.options]
        if scripted.option not in options:
            problems.append(
                problem_line(
                    source,
                    [*prefix, decision_id, "option"],
                    f"unknown option {scripted.option!r}; allowed: {options}"
                    + did_you_mean(scripted.option, options),
                    line_of,
                )
            )
        if scripted.by not in exercise.roles:
            problems.append(
                problem_line(
                    source,
                    [*prefix, decision_id, "by"],
                    f"role {scripted.by!r} is not seated in this exercise; roles: "
                    f"{list(exercise.roles)}",
                    line_of,
                )
            )
    return problems


def load_decisions(path: str | Path, exercise: Exercise) -> dict[str, ScriptedDecision]:
    """Read a ``--decisions`` file (``decisions: {id: {option, by, rationale}}``) and check it
    against ``exercise``."""
    p = Path(path)
    source = str(p)
    document = read_document(_read_text(p), source=source)
    data = document.data
    if not isinstance(data, dict):
        raise ScenarioError([f"{source}: a decisions file must be a mapping with 'decisions:'"])
    try:
        parsed = DecisionsFile.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(
            _explain(err, data, root=DecisionsFile, source=source, line_of=document.line_of)
        ) from None
    problems = decision_problems(
        exercise, parsed.decisions, source=source, line_of=document.line_of, prefix=["decisions"]
    )
    if problems:
        raise ScenarioError(problems)
    return dict(parsed.decisions)
