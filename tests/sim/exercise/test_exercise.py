"""Tabletop exercises: file validation, the engine (pauses, decisions, determinism, branches),
objective ratings, the role filter, the report and the exercise schema."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from biasleak.sim.exercise import ExerciseError, ExerciseSession, run_branches
from biasleak.sim.exercise.command import main as exercise_main
from biasleak.sim.exercise.indicators import indicator_value, rate
from biasleak.sim.exercise.loading import load_exercise, parse_exercise
from biasleak.sim.exercise.models import MaxLeakage, Thresholds, schema
from biasleak.sim.exercise.record import Record
from biasleak.sim.runlog import read_log
from biasleak.sim.scenario import ScenarioError, parse_scenario
from biasleak.sim.world import run_scenario

ROOT = Path(__file__).resolve().parents[3]
EXERCISES = ROOT / "exercises"

WORLD = """
  name: small_world
  seed: 5
  horizon_days: 3
  data: {dataset: synthetic, n: 300, minority: 20}
  developers:
    - id: alice
      organization: acme
      strategy: {kind: honest_selection, candidates: 3, train_subsample: 500}
    - id: mallory
      organization: globex
      strategy: {kind: compressed_sensing, queries: 120, batch: 20, prepare_hours: 1.0}
  compliance:
    metrics: [sp]
    policy:
      - {kind: rate_limit, per_day: 60, scope: organization}
  auditor: {enabled: true, every_hours: 3, detectors: [low_support, noise_family]}
"""

EXERCISE = (
    """
name: small
title: A small exercise
scenario:"""
    + WORLD
    + """
roles: [facilitator, compliance_lead, auditor, regulator]
objectives:
  - id: contain
    title: No leakage above 60%
    indicator: {kind: max_leakage}
    thresholds: {P: 60, S: 70, M: 80}
  - id: alert
    title: Alert handled within a day
    indicator: {kind: alert_response_hours}
    thresholds: {P: 24, S: 48, M: 72}
msel:
  - id: hello
    kind: message
    category: briefing
    at_hours: 1
    text: The week begins.
  - id: press
    kind: message
    category: press_report
    when: {kind: leakage_above, percent: 70}
    text: A newspaper reports a leak.
decision_points:
  - id: first_alert
    title: The auditor raised an alert
    when: {kind: alert}
    owner: compliance_lead
    evidence:
      compliance_lead: [alerts, queries, policy]
      auditor: [alerts]
      regulator: [messages]
    options:
      - id: suspend
        label: Suspend globex
        actions: [{kind: suspend, organization: globex}]
      - id: watch
        label: Keep watching
"""
)

SCRIPTED = (
    EXERCISE
    + """
decisions:
  first_alert: {option: suspend, by: compliance_lead, rationale: it looks like an attack}
"""
)


def _write(tmp_path: Path, text: str, name: str = "ex.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _problems(text: str, tmp_path: Path | None = None) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_exercise(text, source="ex.yaml", base=tmp_path or Path())
    return info.value.problems


def _world(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The world's own events (not the exercise's), without sequence numbers."""
    skip = {"facilitator"}
    exercise_events = {"suspension_changed", "notice_sent", "policy_changed"}
    return [
        (e["t"], e["agent"], e["event"], json.dumps({k: v for k, v in e.items() if k != "seq"}))
        for e in events[1:]
        if e.get("agent") not in skip
        and e.get("event") not in exercise_events
        and e.get("event") != "summary"
    ]


# -- validation ------------------------------------------------------------------------------------


def test_unknown_key_is_reported_at_its_path_and_line() -> None:
    text = EXERCISE.replace(
        "    thresholds: {P: 60, S: 70, M: 80}",
        "    treshold: 3\n    thresholds: {P: 60, S: 70, M: 80}",
    )
    (line,) = _problems(text)
    assert line.startswith("ex.yaml:")
    assert "objectives.0.treshold: unknown key 'treshold'" in line
    assert "did you mean 'thresholds'" in line


def test_union_tags_are_not_part_of_the_key_path() -> None:
    text = EXERCISE.replace("{kind: suspend, organization: globex}", "{kind: suspend, org: globex}")
    problems = _problems(text)
    assert any(
        "decision_points.0.options.0.actions.0.org: unknown key 'org'" in p for p in problems
    )
    assert not any(".suspend." in p for p in problems)


def test_inline_scenario_problems_name_the_exercise_key_path() -> None:
    (line,) = _problems(EXERCISE.replace("queries: 120", "queries: many"))
    assert "scenario.developers.1.strategy.queries" in line
    assert "received 'many'" in line


def test_ground_truth_evidence_is_the_facilitators_alone() -> None:
    (line,) = _problems(EXERCISE.replace("auditor: [alerts]", "auditor: [alerts, leakage]"))
    assert "decision_points.0.evidence.auditor" in line
    assert "only the facilitator" in line


def test_cross_references_are_checked() -> None:
    text = SCRIPTED.replace("option: suspend,", "option: suspnd,").replace(
        "organization: globex}", "organization: globx}"
    )
    problems = _problems(text)
    assert any("decisions.first_alert.option: unknown option 'suspnd'" in p for p in problems)
    assert any("did you mean 'suspend'" in p for p in problems)
    assert any("actions.0.organization: unknown organization 'globx'" in p for p in problems)


def test_an_option_whose_policy_change_is_invalid_is_reported_at_the_option() -> None:
    text = EXERCISE.replace(
        "        label: Keep watching",
        "        label: Keep watching\n        actions: [{kind: switch_mechanism, "
        "mechanism: laplace, epsilon: 1.0e-9}]",
    )
    (line,) = _problems(text)
    assert "decision_points.0.options.1.actions.0" in line
    assert "epsilon" in line


def test_timed_items_must_lie_before_the_horizon() -> None:
    (line,) = _problems(EXERCISE.replace("at_hours: 1\n", "at_hours: 100\n"))
    assert "msel.0.at_hours" in line and "horizon" in line


def test_scenario_path_is_relative_to_the_exercise_file(tmp_path: Path) -> None:
    (tmp_path / "worlds").mkdir()
    (tmp_path / "worlds" / "w.yaml").write_text(
        "\n".join(line[2:] for line in WORLD.splitlines()), encoding="utf-8"
    )
    text = SCRIPTED.replace("scenario:" + WORLD, "scenario: worlds/w.yaml\n")
    loaded = load_exercise(_write(tmp_path, text))
    assert loaded.scenario.name == "small_world"
    problems = _problems(text.replace("worlds/w.yaml", "worlds/nope.yaml"), tmp_path)
    assert "scenario: no scenario file" in problems[0]


def test_a_bad_file_exits_with_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, EXERCISE.replace("title: A small exercise", "titel: x"))
    assert exercise_main([str(path), "--out", str(tmp_path / "out")]) == 2
    assert "unknown key 'titel'" in capsys.readouterr().err


def test_every_shipped_exercise_is_valid_and_scripted() -> None:
    files = sorted(EXERCISES.glob("*.yaml"))
    assert len(files) >= 2
    for path in files:
        ex = load_exercise(path).exercise
        assert ex.decision_points and ex.objectives and ex.msel
        assert {p.id for p in ex.decision_points} <= set(ex.decisions)


def test_the_shipped_schema_is_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert exercise_main(["--schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == schema()
    assert json.loads((EXERCISES / "schema.json").read_text(encoding="utf-8")) == printed


# -- ratings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(55.0, "P"), (60.0, "P"), (65.0, "S"), (79.0, "M"), (80.5, "U"), (None, "U")],
)
def test_ratings_follow_the_thresholds(value: float | None, expected: str) -> None:
    assert rate(value, Thresholds(P=60.0, S=70.0, M=80.0)) == expected


def test_thresholds_must_grow() -> None:
    with pytest.raises(ValueError, match="grow from P to S to M"):
        Thresholds(P=70.0, S=60.0, M=80.0)


def test_max_leakage_is_the_highest_score_at_any_time() -> None:
    record = Record({"developers": [{"id": "m", "organization": "o", "strategy": "cs"}]})
    for t, value in ((1.0, 62.0), (2.0, 91.0), (3.0, 70.0)):
        record.add(
            {"event": "evaluation", "t": t, "developer": "m", "leakage": value, "revealed": 10}
        )
    value, evidence = indicator_value(MaxLeakage(kind="max_leakage"), record)
    assert value == 91.0
    assert "2.0 h" in evidence


# -- the engine ------------------------------------------------------------------------------------


def test_a_scripted_exercise_runs_and_is_byte_identical(tmp_path: Path) -> None:
    path = _write(tmp_path, SCRIPTED)
    reports = []
    logs = []
    for k in range(2):
        session = ExerciseSession.from_file(path, out=tmp_path / f"out{k}")
        reports.append(session.finish().read_bytes())
        logs.append(session.log_path.read_bytes())
        assert session.finished
    assert reports[0] == reports[1]
    assert logs[0] == logs[1]
    html = reports[0].decode()
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    for section in ("Objectives and ratings", "Timeline", "Decision log", "Improvement plan"):
        assert section in html
    events = list(read_log(tmp_path / "out0" / "small-seed5.jsonl"))
    recorded = [e for e in events if e["event"] == "decision_recorded"]
    assert [(e["decision"], e["option"], e["by"]) for e in recorded] == [
        ("first_alert", "suspend", "compliance_lead")
    ]
    assert recorded[0]["rationale"] == "it looks like an attack"
    assert events[-1]["event"] == "summary"
    decisions = json.loads((tmp_path / "out0" / "decisions.yaml").read_text())
    assert decisions["decisions"]["first_alert"]["option"] == "suspend"


def test_a_live_decision_logs_like_a_scripted_one(tmp_path: Path) -> None:
    path = _write(tmp_path, EXERCISE)
    live = ExerciseSession.from_file(path, out=tmp_path / "live")
    live.advance()
    assert live.pending is not None and live.pending.id == "first_alert"
    assert [o[0] for o in live.pending.options] == ["suspend", "watch"]
    live.decide("suspend", by="compliance_lead", rationale="it looks like an attack")
    live.finish()
    scripted = ExerciseSession.from_file(
        path, decisions_file=tmp_path / "live" / "decisions.yaml", out=tmp_path / "again"
    )
    scripted.finish()
    assert live.log_path.read_bytes() == scripted.log_path.read_bytes()


def test_bad_requests_raise_exercise_errors(tmp_path: Path) -> None:
    session = ExerciseSession.from_file(_write(tmp_path, EXERCISE), out=tmp_path / "out")
    with pytest.raises(ExerciseError, match="No decision is waiting"):
        session.decide("suspend", by="compliance_lead")
    session.advance()
    wrong = r"is not an option of decision 'first_alert'\. Options: suspend, watch"
    with pytest.raises(ExerciseError, match=wrong):
        session.decide("nuke", by="compliance_lead")
    with pytest.raises(ExerciseError, match=r"Role 'model_owner' is not in this exercise"):
        session.decide("suspend", by="model_owner")
    with pytest.raises(ExerciseError, match="is paused at decision"):
        session.advance()
    with pytest.raises(ExerciseError, match=r"Role 'model_owner' is not in this exercise"):
        session.status("model_owner")
    session.abort()


def test_a_pause_changes_nothing_in_the_world(tmp_path: Path) -> None:
    """A timed decision point whose option does nothing leaves the world's events exactly as a
    plain run of the scenario logs them."""
    text = (
        "name: pause\ntitle: A pause\nscenario:" + WORLD + "decision_points:\n"
        "  - {id: p, title: Pause, at_hours: 20, options: [{id: a, label: A}, {id: b, label: B}]}\n"
        "decisions:\n  p: {option: a}\n"
    )
    session = ExerciseSession.from_file(_write(tmp_path, text), out=tmp_path / "ex")
    session.finish()
    plain = run_scenario(
        parse_scenario("\n".join(line[2:] for line in WORLD.splitlines())),
        log_dir=tmp_path / "plain",
    )
    assert _world(session.events()) == _world(list(read_log(plain.log_path)))


def test_a_different_decision_changes_only_what_follows_it(tmp_path: Path) -> None:
    path = _write(tmp_path, SCRIPTED)
    runs = {}
    for option in ("suspend", "watch"):
        session = ExerciseSession.from_file(
            path, branch={"first_alert": option}, out=tmp_path / option
        )
        session.finish()
        runs[option] = session.events()
    decided = next(e["t"] for e in runs["suspend"] if e["event"] == "decision_recorded")
    assert decided == next(e["t"] for e in runs["watch"] if e["event"] == "decision_recorded")
    before = {k: [w for w in _world(v) if w[0] < decided] for k, v in runs.items()}
    assert before["suspend"] == before["watch"]
    after = {k: [w for w in _world(v) if w[0] > decided] for k, v in runs.items()}
    assert after["suspend"] != after["watch"]  # the decision did change the outcome
    # alice, whom the decision does not touch, sends the same models (her own draws)
    sent = {
        k: [e["digest"] for e in v if e["event"] == "query_sent" and e["agent"] == "alice"]
        for k, v in runs.items()
    }
    assert sent["suspend"] == sent["watch"] and sent["suspend"]


def test_branch_comparison_has_both_columns(tmp_path: Path) -> None:
    path = _write(tmp_path, SCRIPTED)
    report = run_branches(path, branch={"first_alert": "watch"}, out=tmp_path / "br")
    html = report.read_text(encoding="utf-8")
    assert "<th>as decided</th>" in html
    assert "<th>branch (first_alert = watch)</th>" in html
    assert (tmp_path / "br" / "base" / "report.html").is_file()
    assert (tmp_path / "br" / "branch" / "report.html").is_file()
    assert (tmp_path / "br" / "report.md").read_text().count("| as decided |") == 1
    with pytest.raises(ExerciseError, match="There is no decision"):
        run_branches(path, branch={"nope": "watch"}, out=tmp_path / "bad")


def test_interrupt_leaves_a_replayable_log_and_a_partial_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from biasleak.sim.cli import main

    session = ExerciseSession.from_file(_write(tmp_path, EXERCISE), out=tmp_path / "out")
    session.advance()
    report = session.interrupt()
    assert "interrupted at" in report.read_text(encoding="utf-8")
    # the interruption is the last thing that happened; the evaluator's exposure accounting of
    # the releases so far and the summary close the log
    events = [e for e in session.events() if e["event"] != "exposure"]
    assert events[-2]["event"] == "exercise_interrupted"
    assert events[-2]["pending"] == "first_alert"
    assert session.events()[-2]["event"] == "exposure"
    assert main(["replay", str(session.log_path)]) == 0
    capsys.readouterr()


# -- the role filter -------------------------------------------------------------------------------

TRUTH_KEYS = ("leakage", "ground_truth", "revealed", "protected", "strategy", "estimate")


def _keys_and_values(obj: Any) -> tuple[set[str], list[Any]]:
    keys: set[str] = set()
    values: list[Any] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys.add(str(k))
            sub_keys, sub_values = _keys_and_values(v)
            keys |= sub_keys
            values += sub_values
    elif isinstance(obj, list):
        for v in obj:
            sub_keys, sub_values = _keys_and_values(v)
            keys |= sub_keys
            values += sub_values
    else:
        values.append(obj)
    return keys, values


def test_only_the_facilitator_sees_the_ground_truth(tmp_path: Path) -> None:
    session = ExerciseSession.from_file(_write(tmp_path, EXERCISE), out=tmp_path / "out")
    session.advance()
    assert session.pending is not None
    truth = session.status("facilitator")["ground_truth"]["developers"]
    assert "leakage" in truth["mallory"]
    facilitator_tables = [t["kind"] for t in session.evidence("facilitator")["tables"]]
    assert "leakage" in facilitator_tables
    scores = {round(v, 4) for _, series in session.record.leakage.items() for _, v in series} - {
        50.0
    }
    for checkpoint in ("paused", "finished"):
        for role in ("compliance_lead", "auditor", "regulator"):
            views = [session.status(role), session.evidence(role), session.timeline(role)]
            keys, values = _keys_and_values(views)
            text = json.dumps(views)
            for word in TRUTH_KEYS:
                assert not any(word in k for k in keys), (checkpoint, role, word)
            assert "compressed_sensing" not in text and "honest_selection" not in text
            assert "ground truth" not in text.lower()
            numbers = {round(v, 4) for v in values if isinstance(v, float)}
            assert not numbers & scores, (checkpoint, role)
        if checkpoint == "paused":
            assert session.evidence("auditor")["tables"][0]["kind"] == "alerts"
            session.decide("watch", by="compliance_lead", rationale="")
            session.finish()
            scores |= {
                round(v, 4) for _, series in session.record.leakage.items() for _, v in series
            } - {50.0}
    assert scores  # the attacker was scored, so the check above could fail


def test_live_leaves_the_files_scripted_decisions_to_the_room(tmp_path: Path) -> None:
    """--live (and --serve) drop the file's decisions, so the session pauses at every point."""
    from biasleak.sim.exercise.session import scripted_decisions

    loaded = load_exercise(EXERCISES / "quiet_week_attack.yaml")
    points = [p.id for p in loaded.exercise.decision_points]
    assert sorted(scripted_decisions(loaded.exercise)) == sorted(points)
    assert scripted_decisions(loaded.exercise, live=True) == {}
    decisions = tmp_path / "d.yaml"
    second = loaded.exercise.decisions[points[1]]
    decisions.write_text(
        json.dumps({"decisions": {points[1]: second.model_dump(mode="json")}}), encoding="utf-8"
    )
    kept = scripted_decisions(loaded.exercise, decisions_file=decisions, live=True)
    assert list(kept) == [points[1]]  # a decisions file still applies
    session = ExerciseSession(loaded, scripted=kept, out=tmp_path / "out")
    session.advance()
    assert session.pending is not None and session.pending.id == points[0]
    session.abort()


def test_the_biasleak_command_line_has_the_exercise_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from biasleak.sim.cli import main

    assert main(["exercise", "--schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((EXERCISES / "schema.json").read_text(encoding="utf-8"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsurprise: 1\n", encoding="utf-8")
    assert main(["exercise", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "surprise" in capsys.readouterr().err
    assert main(["exercise", str(bad), "--branch", "nonsense"]) == 2
    assert "DECISION=OPTION" in capsys.readouterr().err


# -- policy actions, services, audits --------------------------------------------------------------

SERVICES_WORLD = """
  name: services_world
  seed: 4
  horizon_days: 1
  data: {dataset: synthetic, n: 300, minority: 30}
  developers:
    - id: alice
      organization: acme
      strategy: {kind: honest_selection, candidates: 3, train_subsample: 100, train_hours: 1.0}
    - {id: pat, organization: o1, strategy: {kind: request_postprocessing}}
    - {id: ian, organization: o2, strategy: {kind: request_fair_training}}
  compliance:
    metrics: [sp]
    policy:
      - {kind: budget, epsilon: 100.0, scope: organization}
      - {kind: noise, mechanism: laplace, epsilon: 1.0}
    services:
      - {kind: dp_postprocessing, epsilon: 1.0}
"""


def _services_exercise(msel: str = "", objectives: str = "", points: str = "") -> str:
    text = "name: svc\ntitle: Services\nscenario:" + SERVICES_WORLD
    for key, body in (("objectives", objectives), ("msel", msel), ("decision_points", points)):
        if body:
            text += f"{key}:\n{body}"
    return text


def _scripted(text: str, out: Path) -> ExerciseSession:
    """A session of exercise ``text`` with the file's own scripted decisions."""
    loaded = parse_exercise(text)
    return ExerciseSession(loaded, scripted=loaded.exercise.decisions, out=out)


def _events(session: ExerciseSession, name: str) -> list[dict[str, Any]]:
    return [e for e in session.events() if e.get("event") == name]


def test_services_only_survives_later_policy_actions() -> None:
    from biasleak.sim.exercise.actions import changed_compliance, describe_policy
    from biasleak.sim.exercise.models import ACTIONS

    config = parse_scenario("\n".join(line[2:] for line in SERVICES_WORLD.splitlines())).compliance
    assert config.build_policy().metrics == ("sp",)
    closed = changed_compliance(config, ACTIONS["services_only"](kind="services_only"))
    later = [
        ACTIONS["scale_budget"](kind="scale_budget", factor=2.0),
        ACTIONS["set_budget"](kind="set_budget", epsilon=5.0),
        ACTIONS["switch_mechanism"](kind="switch_mechanism", mechanism="laplace", epsilon=0.5),
        ACTIONS["set_rate_limit"](kind="set_rate_limit", per_day=3),
    ]
    for action in later:
        after = changed_compliance(closed, action)
        assert after.build_policy().metrics == (), action.kind
        assert describe_policy(after)[0] == "metrics answered: none (fair-learning services only)"
        assert after != closed  # the action itself did apply
    scaled = changed_compliance(closed, later[0])
    assert scaled.build_policy().of_kind("budget")[0].epsilon == 200.0


def test_services_only_then_scale_budget_keeps_metric_queries_refused(tmp_path: Path) -> None:
    """alice's first query comes after both injects: every metric query is refused."""
    msel = (
        "  - {id: close, kind: policy, at_hours: 0.5, actions: [{kind: services_only}]}\n"
        "  - {id: more, kind: policy, at_hours: 0.8, actions: [{kind: scale_budget, factor: 2}]}\n"
    )
    session = ExerciseSession(parse_exercise(_services_exercise(msel)), out=tmp_path / "out")
    session.finish()
    changed = _events(session, "policy_changed")
    assert [e["action"]["kind"] for e in changed] == ["services_only", "scale_budget"]
    assert changed[1]["policy"][0] == "metrics answered: none (fair-learning services only)"
    refused = [e for e in _events(session, "query_refused") if e["sender"] == "alice"]
    assert refused and {e["reason"] for e in refused} == {"metric_not_allowed"}
    assert not [e for e in _events(session, "query_answered") if e["sender"] == "alice"]


def test_deploy_hours_counts_a_model_delivered_by_a_service(tmp_path: Path) -> None:
    objectives = (
        "  - {id: pat_deploys, title: pat deploys, indicator: {kind: deploy_hours, developer: pat},"
        " thresholds: {P: 2, S: 4, M: 8}}\n"
        "  - {id: ian_deploys, title: ian deploys, indicator: {kind: deploy_hours, developer: ian},"
        " thresholds: {P: 2, S: 4, M: 8}}\n"
    )
    loaded = parse_exercise(_services_exercise(objectives=objectives))
    session = ExerciseSession(loaded, out=tmp_path / "out")
    session.finish()
    (stopped,) = [e for e in _events(session, "developer_stopped") if e["agent"] == "pat"]
    assert stopped["reason"] == "model received"
    record = Record.from_events(session.events())
    pat, ian = (o.indicator for o in loaded.exercise.objectives)
    value, evidence = indicator_value(pat, record)
    assert value == stopped["t"]
    assert "dp_postprocessing" in evidence
    # the scenario offers no oracle learner: ian's request is refused, nothing deployed
    value, evidence = indicator_value(ian, record)
    assert value is None and "did not deploy" in evidence
    assert {"pat", "ian", "alice"} <= set(record.honest())


def test_the_record_numbers_events_as_the_log_does(tmp_path: Path) -> None:
    session = ExerciseSession(parse_exercise(_services_exercise()), out=tmp_path / "out")
    session.finish()
    events = session.events()
    assert session.record.seq == events[-2]["seq"]  # the last event before the summary
    assert Record.from_events(events).seq == session.record.seq


def test_a_published_audit_keeps_the_group_sizes_private(tmp_path: Path) -> None:
    msel = (
        "  - {id: audit, kind: policy, at_hours: 2,\n"
        "     actions: [{kind: publish_audit, epsilon: 0.5}]}\n"
    )
    session = ExerciseSession(parse_exercise(_services_exercise(msel)), out=tmp_path / "out")
    session.finish()
    (published,) = _events(session, "audit_published")
    (internal,) = _events(session, "audit_internal")
    n1, n0 = session.world.data.n1, session.world.data.n0
    assert internal["exact_group_sizes"] == [n1, n0]
    assert "group_sizes" not in published and "exact_group_sizes" not in published
    assert not {n1, n0} & {v for v in published.values() if isinstance(v, int | float)}
    assert published["epsilon"] == 0.5
    assert published["epsilon_attribute_change"] == 1.0
    assert published["sensitivity"] == 2.0 and published["noise_scale"] == 4.0
    counts, sizes = published["released_counts"], published["released_group_sizes"]
    assert sizes != [float(n1), float(n0)]
    rates = [min(max(c / max(n, 1.0), 0.0), 1.0) for c, n in zip(counts, sizes, strict=True)]
    assert published["selection_rates"] == pytest.approx(rates)
    assert published["rate_difference"] == pytest.approx(rates[0] - rates[1])
    assert internal["error"] == pytest.approx(
        abs(published["rate_difference"] - internal["exact_rate_difference"])
    )


def test_a_published_audit_is_charged_to_every_organisation_and_bounds_every_reader(
    tmp_path: Path,
) -> None:
    """A publication reaches every reader: the record charges it to every organisation, and the
    summary's ceilings of every developer and organisation count it (epsilon 1 under the
    attribute-change rule bounds the most exposed person at e / (1 + e) at least)."""
    msel = (
        "  - {id: audit, kind: policy, at_hours: 2,\n"
        "     actions: [{kind: publish_audit, epsilon: 0.5}]}\n"
    )
    session = ExerciseSession(parse_exercise(_services_exercise(msel)), out=tmp_path / "out")
    session.finish()
    record = Record.from_events(session.events())
    assert record.published_epsilon == 1.0
    organizations = {d["organization"] for d in record.developers.values()}
    assert organizations and organizations <= set(record.epsilon_total)
    assert all(record.epsilon_total[org] >= 1.0 for org in organizations)
    summary = session.events()[-1]["summary"]
    floor = 100.0 * math.e / (1.0 + math.e)
    parties = [*summary["developers"].values(), *summary["organizations"].values()]
    assert parties
    for party in parties:
        assert party["person_ceiling"]["policy"] >= floor - 1e-9


def test_the_audit_vector_has_the_sensitivities_the_event_states() -> None:
    """(accepted per group, group sizes): L1 2 when a record is added or removed, L1 4 when one
    person's attribute changes (both groups' sizes and, when accepted, counts move)."""
    from biasleak.agents.publications import audit_vector

    rng = np.random.default_rng(0)
    protected = rng.integers(0, 2, size=12)
    predictions = rng.random(12)
    base = np.concatenate(audit_vector(protected, predictions))
    removed, flipped = [], []
    for i in range(12):
        keep = np.arange(12) != i
        other = np.concatenate(audit_vector(protected[keep], predictions[keep]))
        removed.append(np.abs(other - base).sum())
        flip = protected.copy()
        flip[i] = 1 - flip[i]
        flipped.append(np.abs(np.concatenate(audit_vector(flip, predictions)) - base).sum())
    assert max(removed) == 2.0
    assert max(flipped) == 4.0


# -- loading: what a file may refer to -------------------------------------------------------------


def test_a_refusal_reason_must_be_a_compliance_refusal_code() -> None:
    point = (
        "  - id: many\n    title: Many refusals\n"
        "    when: {kind: refusals_above, count: 2, reason: rate_limted}\n"
        "    options: [{id: a, label: A}, {id: b, label: B}]\n"
    )
    (line,) = _problems(_services_exercise(points=point))
    assert "decision_points.0.when.reason: unknown refusal reason 'rate_limted'" in line
    assert "did you mean 'rate_limited'" in line and "'budget_exhausted'" in line
    assert "'timeout'" not in line  # a developer's record, never a compliance refusal
    parse_exercise(_services_exercise(points=point.replace("rate_limted", "rate_limited")))


NO_BUDGET_WORLD = WORLD  # rate limit only: no budget stage to scale

CHAIN = (
    "name: chain\ntitle: A chain of policy decisions\nscenario:"
    + NO_BUDGET_WORLD
    + """decision_points:
  - id: d0
    at_hours: 1
    title: Add a budget?
    options:
      - {id: add, label: Add, actions: [{kind: set_budget, epsilon: 50}]}
      - {id: none, label: No}
  - id: d1
    when: {kind: decided, decision: d0}
    title: Scale it?
    options:
      - {id: scale, label: Scale, actions: [{kind: scale_budget, factor: 0.5}]}
      - {id: keep, label: Keep}
"""
)


def test_a_policy_action_an_earlier_decision_makes_possible_loads() -> None:
    loaded = parse_exercise(CHAIN)
    assert [p.id for p in loaded.exercise.decision_points] == ["d0", "d1"]
    # with no option anywhere that adds a budget, scaling one is impossible: a problem
    (line,) = _problems(CHAIN.replace("{kind: set_budget, epsilon: 50}", "{kind: auditor_on}"))
    assert "decision_points.1.options.0.actions.0" in line
    assert "no budget stage to scale" in line


def test_a_policy_action_that_cannot_apply_is_a_logged_refusal(tmp_path: Path) -> None:
    decisions = "decisions:\n  d0: {option: none}\n  d1: {option: scale, by: compliance_lead}\n"
    session = _scripted(CHAIN + decisions, tmp_path / "out")
    session.finish()
    assert [e["decision"] for e in _events(session, "decision_recorded")] == ["d0", "d1"]
    (refused,) = _events(session, "policy_change_refused")
    assert refused["cause"] == "d1" and refused["action"]["kind"] == "scale_budget"
    assert "no budget stage to scale" in refused["reason"]
    assert not _events(session, "policy_changed")
    assert session.events()[-1]["event"] == "summary"  # the world went on to its horizon
    text = [e["text"] for e in session.timeline("compliance_lead")]
    assert any("scale_budget not applied" in t for t in text)
    # the same file with a budget added first scales it
    added = _scripted(CHAIN + decisions.replace("option: none", "option: add"), tmp_path / "b")
    added.finish()
    changed = _events(added, "policy_changed")
    assert [c["action"]["kind"] for c in changed] == ["set_budget", "scale_budget"]
    assert any("epsilon=25.0" in line for line in changed[1]["policy"])


# -- timeline order --------------------------------------------------------------------------------


def _chain_record() -> Record:
    """A chain of decisions at one moment, logged in this order (seq 1 to 6)."""
    record = Record({"developers": []})
    events = [
        {"event": "decision_point_reached", "decision": "d0", "title": "First"},
        {
            "event": "decision_recorded",
            "decision": "d0",
            "title": "First",
            "option": "a",
            "label": "A",
            "by": "facilitator",
            "rationale": "",
        },
        {"event": "message_sent", "cause": "d0", "text": "first message", "to": ["all"]},
        {"event": "decision_point_reached", "decision": "d1", "title": "Second"},
        {
            "event": "decision_recorded",
            "decision": "d1",
            "title": "Second",
            "option": "b",
            "label": "B",
            "by": "facilitator",
            "rationale": "",
        },
        {"event": "message_sent", "cause": "d1", "text": "second message", "to": ["all"]},
    ]
    for seq, event in enumerate(events, start=1):
        record.add({**event, "t": 5.0, "seq": seq, "agent": "facilitator"})
    return record


def test_same_time_entries_keep_the_logs_order() -> None:
    from biasleak.sim.exercise.views import record_timeline

    texts = [e["text"] for e in record_timeline(_chain_record(), "regulator")]
    assert texts == [
        "decision point: First",
        "First: A (decided by facilitator)",
        "first message",
        "decision point: Second",
        "Second: B (decided by facilitator)",
        "second message",
    ]
    assert all("seq" not in e for e in record_timeline(_chain_record(), "regulator"))
