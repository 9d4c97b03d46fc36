"""Terminal mode of ``biasleak exercise``: what it prints as the world runs, and a play driven by
keys under a pseudo-terminal (pexpect)."""

from __future__ import annotations

import io
import signal
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from biasleak.sim.exercise.record import Record
from biasleak.sim.exercise.terminal import _room_timeline, print_new
from biasleak.sim.runlog import read_log

EXERCISE = """
name: keys
title: Played by keys
scenario:
  name: keys_world
  seed: 5
  horizon_days: 2
  data: {dataset: synthetic, n: 300, minority: 20}
  developers:
    - id: alice
      organization: acme
      strategy: {kind: honest_selection, candidates: 3, train_subsample: 500}
    - id: mallory
      organization: globex
      strategy: {kind: compressed_sensing, queries: 80, batch: 20, prepare_hours: 1.0}
  compliance:
    metrics: [sp]
  auditor: {enabled: true, every_hours: 3, detectors: [low_support, noise_family]}
roles: [facilitator, compliance_lead, auditor]
objectives:
  - id: contain
    title: No leakage above 60%
    indicator: {kind: max_leakage}
    thresholds: {P: 60, S: 70, M: 80}
msel:
  - {id: hello, kind: message, at_hours: 1, text: The week begins.}
decision_points:
  - id: first_alert
    title: The auditor raised an alert
    when: {kind: alert}
    prompt: Suspend globex?
    evidence:
      compliance_lead: [alerts, queries]
    options:
      - id: suspend
        label: Suspend globex
        actions: [{kind: suspend, organization: globex}]
      - id: watch
        label: Keep watching
"""


def _spawn(tmp_path: Path) -> tuple[Any, Path]:
    pexpect = pytest.importorskip("pexpect")
    path = tmp_path / "keys.yaml"
    path.write_text(EXERCISE, encoding="utf-8")
    out = tmp_path / "out"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "biasleak.sim.exercise.command", str(path), "--out", str(out)],
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
    )
    child.logfile_read = io.StringIO()  # the whole screen, for checks after the play
    return child, out


@pytest.mark.slow
def test_a_full_play_through_by_keys(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    child, out = _spawn(tmp_path)
    child.expect("Played by keys")
    child.expect(r"\[day 1, 01:00\] \[other\] The week begins\.")
    child.expect("=== Decision point: The auditor raised an alert")
    child.expect("Evidence for compliance_lead:")
    child.expect(r"1\) Suspend globex")
    child.expect(r"Option \[1-2\]: ")
    child.sendline("x")
    child.expect("'x' is not an option: type a number from 1 to 2")
    child.expect(r"Option \[1-2\]: ")
    child.sendline("3")
    child.expect("'3' is not an option")
    child.sendline("1")
    child.expect(r"Decided by \[Enter: compliance_lead\]: ")
    child.sendline("auditor-in-chief")
    child.expect("is not a role")
    child.sendline("")
    child.expect(r"Rationale \(one line, Enter for none\): ")
    child.sendline("near duplicates")
    child.expect("Recorded: suspend by compliance_lead.")
    child.expect("report: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    events = list(read_log(out / "keys-seed5.jsonl"))
    (decision,) = [e for e in events if e["event"] == "decision_recorded"]
    assert (decision["option"], decision["by"], decision["rationale"]) == (
        "suspend",
        "compliance_lead",
        "near duplicates",
    )
    assert (out / "report.html").is_file()
    screen = child.logfile_read.getvalue()
    assert "Suspend globex?" in screen
    assert "leakage" not in screen  # the shared screen never shows the ground truth
    assert "compressed_sensing" not in screen


@pytest.mark.slow
def test_ctrl_c_leaves_a_valid_log_and_a_partial_report(tmp_path: Path) -> None:
    from biasleak.sim.cli import main

    pexpect = pytest.importorskip("pexpect")
    child, out = _spawn(tmp_path)
    child.expect(r"Option \[1-2\]: ")
    child.kill(signal.SIGINT)
    child.expect("interrupted: writing the partial report")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    log = out / "keys-seed5.jsonl"
    events = list(read_log(log))
    assert events[-1]["event"] == "summary"
    assert any(e["event"] == "exercise_interrupted" for e in events)
    assert main(["replay", str(log)]) == 0
    assert "interrupted at" in (out / "report.html").read_text(encoding="utf-8")


def _decision(decision: str, title: str) -> dict[str, Any]:
    return {
        "event": "decision_recorded",
        "decision": decision,
        "title": title,
        "option": "defer",
        "label": "Ask for more time",
        "by": "compliance_lead",
        "rationale": "",
    }


def test_lines_that_arrive_later_at_a_printed_moment_are_printed_once() -> None:
    """The world pauses at 24 h after the inquiry and the decision point; the decision, its
    message and an alert of the same moment come after the pause. Each line is printed once,
    none is lost, and a moment's lines come in the log's order."""
    record = Record({"developers": [{"id": "eve", "organization": "umbra", "strategy": "x"}]})
    session = SimpleNamespace(
        exercise=SimpleNamespace(roles=["facilitator", "compliance_lead", "regulator"]),
        record=record,
    )
    alert = {
        "event": "alert_raised",
        "developer": "eve",
        "organization": "umbra",
        "detector": "noise_family",
        "evidence": "120 of 120 models",
    }
    before = [
        (
            24.0,
            {
                "event": "inject_fired",
                "id": "inquiry",
                "kind": "message",
                "text": "Inquiry",
                "category": "regulator_inquiry",
                "to": ["all"],
            },
        ),
        (24.0, {"event": "decision_point_reached", "decision": "publish", "title": "Answer"}),
    ]
    after = [
        (24.0, _decision("publish", "Answer")),
        (24.0, {"event": "message_sent", "cause": "publish", "text": "More time", "to": ["all"]}),
        (24.0, alert),
        (36.0, alert),
    ]
    seq = 0
    out = io.StringIO()
    printed: set[tuple[int, str, str]] = set()
    for batch in (before, after):
        for t, event in batch:
            seq += 1
            record.add({**event, "t": t, "seq": seq, "agent": "x"})
        print_new(_room_timeline(session), printed, out)
    lines = out.getvalue().splitlines()
    alert_line = "auditor alert (noise_family) on eve of umbra: 120 of 120 models"
    assert lines == [
        "[day 2, 00:00] [regulator_inquiry] Inquiry",
        "[day 2, 00:00] decision point: Answer",
        "[day 2, 00:00] Answer: Ask for more time (decided by compliance_lead)",
        "[day 2, 00:00] More time",
        f"[day 2, 00:00] {alert_line}",
        f"[day 2, 12:00] {alert_line}",
    ]
    print_new(_room_timeline(session), printed, out)  # nothing new: nothing printed
    assert out.getvalue().splitlines() == lines
