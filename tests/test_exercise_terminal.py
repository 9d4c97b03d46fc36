"""Terminal mode of ``biasleak exercise``, driven by keys under a pseudo-terminal (pexpect)."""

from __future__ import annotations

import io
import signal
import sys
from pathlib import Path

import pytest

from biasleak.sim.runlog import read_log

pexpect = pytest.importorskip("pexpect")

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


def _spawn(tmp_path: Path) -> tuple[object, Path]:
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


def test_a_full_play_through_by_keys(tmp_path: Path) -> None:
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


def test_ctrl_c_leaves_a_valid_log_and_a_partial_report(tmp_path: Path) -> None:
    from biasleak.sim.cli import main

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
