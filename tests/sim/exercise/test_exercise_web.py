"""The exercise console (biasleak.sim.exercise.web), tested as its users meet it.

Most tests drive the Starlette application with its ``TestClient`` against a small scripted
session that follows the engine's contract (``FakeSession`` below): the routes, the forms and
their error messages, and above all the visibility rule (no player page or JSON shows what only
the facilitator may see). One test plays a whole exercise in a real browser (Debian's chromium
driven by Playwright) against a served console, and keeps screenshots of it.
"""

from __future__ import annotations

import html
import math
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from biasleak.sim.exercise import web
from biasleak.sim.exercise.session import advance_problem, decision_problem

ROLES = ("facilitator", "compliance_lead", "model_owner", "auditor", "regulator")
PLAYERS = tuple(r for r in ROLES if r != "facilitator")

LEAK_VALUE = 0.873125
"""The scripted developer's true leakage: a value only the facilitator's pages may show."""
SECRET_STRINGS = ("true_leakage", "True leakage", "0.8731", "protected_attribute", "race")
"""What the facilitator's view shows of the ground truth (field names and values), which no
player's page or JSON may contain."""


class FakeError(ValueError):
    """Stands in for the engine's ExerciseError (a ValueError, as the contract says)."""


class _Point:
    def __init__(self, ident: str, title: str, at: float, options: list[tuple[str, str, str]]):
        self.id, self.title, self.at, self.options = ident, title, at, options
        self.prompt = f"{title}: what does the compliance team do?"


class _Exercise:
    name = "fake_exercise"
    title = "Fake tabletop: a developer asks too much"
    roles = ROLES
    objectives = ({"id": "O1", "text": "Notice the attack before half the attribute leaks"},)
    msel = ()
    decision_points = (
        _Point(
            "D1",
            "Suspicious queries",
            12.0,
            [
                ("ignore", "Ignore", "keep answering"),
                ("suspend", "Suspend", "stop answering mallory"),
            ],
        ),
        _Point("D2", "Budget top-up", 30.0, [("deny", "Deny", ""), ("grant", "Grant", "more eps")]),
    )


class FakeSession:
    """A scripted session with the engine's interface: two decision points, then the horizon."""

    horizon = 48.0

    def __init__(self, out: Path, *, fail_on_advance: bool = False) -> None:
        self.exercise = _Exercise()
        self.now = 0.0
        self.finished = False
        self.pending: _Point | None = None
        self.out = out
        self.fail_on_advance = fail_on_advance
        self.decided: list[tuple[str, str, str, str]] = []
        self.events: list[dict[str, Any]] = [{"t": 0.0, "kind": "inject", "text": "Kick-off"}]
        self.interrupted = False

    def advance(self) -> None:
        if self.fail_on_advance:
            raise RuntimeError("engine exploded")
        problem = advance_problem(finished=self.finished, pending=self.pending, now=self.now)
        if problem is not None:  # the engine's own check, as every session makes it
            raise FakeError(problem)
        later = [p for p in self.exercise.decision_points if p.at > self.now]
        if later:
            self.now, self.pending = later[0].at, later[0]
            self.events.append({"t": self.now, "kind": "alert", "text": "auditor: near-duplicates"})
        else:
            self.now, self.finished = self.horizon, True

    def decide(self, option: str, *, by: str, rationale: str = "") -> None:
        problem = decision_problem(
            finished=self.finished,
            pending=self.pending,
            now=self.now,
            option=option,
            by=by,
            roles=self.exercise.roles,
        )
        if problem is not None:
            raise FakeError(problem)
        self.decided.append((self.pending.id, option, by, rationale))
        self.events.append({"t": self.now, "kind": "decision", "text": f"{option} by {by}"})
        self.pending = None

    def status(self, role: str) -> dict[str, Any]:
        status: dict[str, Any] = {
            "clock_hours": self.now,
            "eps_spent": {"acme": 1.5 * len(self.decided), "globex": float("nan")},
            "alerts": len([e for e in self.events if e["kind"] == "alert"]),
        }
        if role == "facilitator":
            status["protected_attribute"] = "race"
            status["true_leakage"] = {"mallory": {"balanced_accuracy": LEAK_VALUE, "revealed": 3}}
        return status

    def evidence(self, role: str) -> dict[str, Any]:
        rows = [{"developer": "mallory", "queries": 14, "near_duplicates": 6}]
        if role == "facilitator":
            rows[0]["true_leakage"] = LEAK_VALUE
        return {"queries": rows}

    def timeline(self, role: str) -> list[dict[str, Any]]:
        events = list(self.events)
        if role == "facilitator":
            events.append({"t": self.now, "kind": "truth", "text": f"true_leakage {LEAK_VALUE}"})
        return events

    def _write(self, marker: str) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "report.md").write_text(f"# After-action report {marker}\n")
        path = self.out / "report.html"
        decided = "".join(f"<li>{d}</li>" for d in self.decided)
        path.write_text(
            f"<!doctype html><title>AAR</title><h1>After-action report {marker}</h1>"
            f"<ul>{decided}</ul>"
        )
        return path

    def finish(self) -> Path:
        return self._write("final")

    def interrupt(self) -> Path:
        self.interrupted = True
        return self._write("interrupted")


@pytest.fixture
def made(tmp_path: Path) -> list[FakeSession]:
    return []


@pytest.fixture
def branch_calls() -> list[tuple[dict[str, str], dict[str, dict[str, str]], Path]]:
    return []


@pytest.fixture
def client(tmp_path, made, branch_calls):
    def factory() -> FakeSession:
        made.append(FakeSession(tmp_path / f"run{len(made)}"))
        return made[-1]

    def branches(branch, decisions, out: Path) -> Path:
        branch_calls.append((branch, decisions, out))
        path = out / "report.html"
        path.write_text(f"<h1>Branch {branch}</h1>")
        return path

    app = web.create_app(factory, branches=branches, out=tmp_path / "console")
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=True) as c:
        yield c


def _text(html: str) -> str:
    """Visible text of a page, whitespace collapsed (good enough for these pages)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _assert_no_secrets(payload: str, where: str) -> None:
    for secret in SECRET_STRINGS:
        assert secret not in payload, f"{where} shows facilitator-only {secret!r}"


# --- routes ---------------------------------------------------------------------------------


def test_start_page_links_every_role(client):
    page = client.get("/")
    assert page.status_code == 200
    for role in PLAYERS:
        assert f'href="/play/{role}"' in page.text
    assert 'href="/facilitator"' in page.text
    assert "<h1>Fake tabletop: a developer asks too much</h1>" in page.text


def test_facilitator_sees_the_ground_truth(client):
    page = client.get("/facilitator")
    assert page.status_code == 200
    assert "True leakage" in page.text and "0.8731" in page.text
    assert "Race" in page.text or "race" in page.text
    # a non-finite number is shown as missing, not as "nan"
    assert "nan" not in _text(page.text).lower().split()


def test_advance_pauses_at_the_decision_with_its_evidence_table(client, made):
    page = client.post("/facilitator/advance")
    assert page.status_code == 200 and page.url.path == "/facilitator"
    assert made[0].now == 12.0
    assert "Suspicious queries" in page.text
    assert "<caption>Evidence for this decision: Queries</caption>" in page.text
    assert 'name="option" id="option-2" value="suspend"' in page.text
    assert "The world ran to 12 h (day 1, 12:00)" in page.text


def test_decide_records_option_role_and_rationale(client, made):
    client.post("/facilitator/advance")
    why = "Six near-duplicate models in a day; <script> is text here"
    page = client.post(
        "/facilitator/decide", data={"option": "suspend", "by": "compliance_lead", "rationale": why}
    )
    assert page.status_code == 200
    assert made[0].decided == [("D1", "suspend", "compliance_lead", why)]
    assert "Six near-duplicate models in a day; &lt;script&gt; is text here" in page.text
    assert "<script> is text" not in page.text


@pytest.mark.parametrize(
    ("form", "message"),
    [
        (
            {"option": "maybe", "by": "compliance_lead"},
            "Option 'maybe' is not an option of decision 'D1'. Options: ignore, suspend",
        ),
        ({"by": "compliance_lead"}, "The form did not say which option was chosen"),
        ({"option": "suspend", "by": "janitor"}, "Role 'janitor' is not in this exercise"),
    ],
)
def test_a_wrong_decision_form_gets_a_message_on_the_page(client, made, form, message):
    client.post("/facilitator/advance")
    form = {**form, "rationale": "kept after the error"}
    page = client.post("/facilitator/decide", data=form)
    assert page.status_code == 400
    assert message in html.unescape(page.text)
    assert 'role="alert"' in page.text and "Traceback" not in page.text
    assert "kept after the error</textarea>" in page.text  # the typed rationale is not lost
    assert made[0].decided == []


def test_the_clock_waits_for_a_pending_decision_and_stops_at_the_end(client, made):
    client.post("/facilitator/advance")
    page = client.post("/facilitator/advance")
    assert page.status_code == 400
    assert "The world is paused at decision 'D1' (Suspicious queries)" in html.unescape(page.text)
    assert client.post("/facilitator/decide", data={"option": "x", "by": "regulator"}).status_code
    page = client.post("/facilitator/decide", data={"option": "suspend", "by": "regulator"})
    assert page.status_code == 200
    nothing = client.post("/facilitator/decide", data={"option": "deny", "by": "regulator"})
    assert nothing.status_code == 400 and "No decision is waiting" in nothing.text
    client.post("/facilitator/advance")
    client.post("/facilitator/decide", data={"option": "deny", "by": "regulator"})
    client.post("/facilitator/advance")
    assert made[0].finished
    page = client.post("/facilitator/advance")
    assert page.status_code == 400 and "The exercise has finished at 48" in page.text


def test_the_report_opens_only_when_finished_and_is_served(client, made):
    early = client.post("/facilitator/finish")
    assert early.status_code == 400 and "Advance to the end first" in early.text
    assert client.get("/facilitator/report/report.html").status_code == 404
    _play_to_the_end(client)
    report = client.post("/facilitator/finish")
    assert report.status_code == 200 and report.url.path == "/facilitator/report/report.html"
    assert "After-action report final" in report.text
    assert "# After-action report" in client.get("/facilitator/report/report.md").text
    outside = client.get("/facilitator/report/..%2F..%2Fetc%2Fpasswd")
    assert outside.status_code == 404


def _play_to_the_end(client):
    client.post("/facilitator/advance")
    client.post("/facilitator/decide", data={"option": "suspend", "by": "compliance_lead"})
    client.post("/facilitator/advance")
    client.post("/facilitator/decide", data={"option": "grant", "by": "regulator"})
    client.post("/facilitator/advance")


def test_branch_reruns_with_the_recorded_decisions_and_shows_the_comparison(client, branch_calls):
    client.post("/facilitator/advance")
    client.post(
        "/facilitator/decide", data={"option": "suspend", "by": "compliance_lead", "rationale": "r"}
    )
    page = client.post("/facilitator/branch", data={"branch": " D1=ignore , D2=grant "})
    assert page.status_code == 200 and page.url.path == "/facilitator/branches/1/report.html"
    branch, decisions, out = branch_calls[0]
    assert branch == {"D1": "ignore", "D2": "grant"}
    assert decisions == {"D1": {"option": "suspend", "by": "compliance_lead", "rationale": "r"}}
    assert out.name == "01"
    assert 'href="/facilitator/branches/1/report.html"' in client.get("/facilitator").text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("D1", "'D1' is not a branch. Write DECISION=OPTION"),
        ("D9=ignore", "There is no decision 'D9' in this exercise. Decisions: D1, D2."),
        ("D1=maybe", "Decision 'D1' has no option 'maybe'. Its options: ignore, suspend."),
        ("D1=ignore,D1=suspend", "Decision 'D1' appears twice"),
        ("", "The form did not say which branch to run"),
    ],
)
def test_a_wrong_branch_gets_a_message_naming_what_is_allowed(client, branch_calls, text, message):
    page = client.post("/facilitator/branch", data={"branch": text})
    assert page.status_code == 400
    assert message in html.unescape(page.text)
    assert branch_calls == []


def test_restart_builds_a_fresh_session(client, made):
    client.post("/facilitator/advance")
    client.post("/facilitator/decide", data={"option": "suspend", "by": "auditor"})
    page = client.post("/facilitator/restart")
    assert len(made) == 2 and made[1].now == 0.0
    assert "Restarted from the beginning" in page.text
    assert "None yet" in page.text  # the console's record of decisions is cleared too


def test_unknown_role_and_page_get_a_readable_404(client):
    page = client.get("/play/janitor")
    assert page.status_code == 404
    assert "Role 'janitor' is not in this exercise. Roles: facilitator," in html.unescape(page.text)
    api = client.get("/api/janitor")
    assert api.status_code == 404
    assert "Role 'janitor' is not in this exercise" in api.json()["error"]
    assert client.get("/nowhere").status_code == 404
    assert client.get("/play/facilitator").url.path == "/facilitator"


def test_an_engine_failure_is_a_page_not_a_stack_trace(tmp_path):
    app = web.create_app(lambda: FakeSession(tmp_path, fail_on_advance=True))
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        page = c.post("/facilitator/advance")
    assert page.status_code == 500
    assert "RuntimeError: engine exploded" in page.text
    assert "Traceback" not in page.text and 'File "' not in page.text


def test_forms_from_other_sites_and_foreign_host_names_are_refused(client, made):
    page = client.post("/facilitator/advance", headers={"Origin": "http://evil.example"})
    assert page.status_code == 403 and "another site (http://evil.example)" in page.text
    assert made[0].now == 0.0
    ok = client.post("/facilitator/advance", headers={"Origin": "http://127.0.0.1"})
    assert ok.status_code == 200 and made[0].now == 12.0
    rebound = client.get("/api/facilitator", headers={"Host": "attacker.example"})
    assert rebound.status_code == 400


def test_serve_refuses_to_listen_beyond_this_computer():
    with pytest.raises(ValueError, match=r"binds to this computer only.*'0\.0\.0\.0'"):
        web.serve(lambda: None, "0.0.0.0")
    with pytest.raises(ValueError, match="port must be between 0 and 65535"):
        web.serve(lambda: None, port=70000)


def test_shutdown_interrupts_an_unfinished_exercise(tmp_path):
    made: list[FakeSession] = []
    app = web.create_app(lambda: made.append(FakeSession(tmp_path)) or made[-1])
    with TestClient(app, base_url="http://127.0.0.1") as c:
        c.post("/facilitator/advance")
    assert made[0].interrupted
    assert "interrupted" in (tmp_path / "report.html").read_text()


# --- visibility: what a player sees ---------------------------------------------------------


def test_player_pages_and_json_never_show_the_ground_truth(client):
    facilitator = client.get("/facilitator").text + client.get("/api/facilitator").text
    for secret in SECRET_STRINGS:  # the check below would be empty if the facilitator lacked them
        assert secret in facilitator or secret.lower() in facilitator.lower()
    stages = [
        lambda: None,
        lambda: client.post("/facilitator/advance"),  # paused with evidence on the table
        lambda: client.post("/facilitator/decide", data={"option": "suspend", "by": "auditor"}),
        lambda: _play_to_the_end(client),
    ]
    for step in stages:
        step()
        for role in PLAYERS:
            for url in (f"/play/{role}", f"/play/{role}/live", f"/api/{role}"):
                answer = client.get(url)
                assert answer.status_code == 200, url
                _assert_no_secrets(answer.text, url)


def test_player_json_is_the_role_view_with_missing_numbers_as_null(client):
    client.post("/facilitator/advance")
    data = client.get("/api/model_owner").json()
    assert data["role"] == "model_owner" and data["now"] == 12.0
    assert data["pending"]["options"][1] == {
        "id": "suspend",
        "label": "Suspend",
        "description": "stop answering mallory",
    }
    assert data["status"]["eps_spent"]["globex"] is None
    assert math.isclose(data["status"]["eps_spent"]["acme"], 0.0)
    assert data["evidence"] == {
        "queries": [{"developer": "mallory", "queries": 14, "near_duplicates": 6}]
    }


def test_player_page_refreshes_from_its_own_role_fragment(client):
    page = client.get("/play/auditor")
    assert 'data-src="/play/auditor/live"' in page.text
    assert '<script src="/static/console.js" defer></script>' in page.text
    assert "fetch(live.dataset.src" in client.get("/static/console.js").text
    assert client.get("/play/facilitator/live").status_code == 404


def test_a_refresh_while_the_world_runs_answers_busy_at_once(client):
    console = client.app.state.console
    held, release = threading.Event(), threading.Event()

    def advance_slowly() -> None:
        with console.lock:
            held.set()
            release.wait(10)

    worker = threading.Thread(target=advance_slowly)
    worker.start()
    try:
        assert held.wait(10)
        busy = client.get("/play/auditor/live")
        assert busy.status_code == 503 and "The world is running" in busy.text
    finally:
        release.set()
        worker.join()
    assert client.get("/play/auditor/live").status_code == 200


def test_render_value_lays_out_records_as_tables():
    html = str(web.render_value({"acme": {"eps": 1.25, "alerts": 2}, "globex": {"eps": 0.5}}))
    assert '<th scope="col">Eps</th><th scope="col">Alerts</th>' in html
    assert '<th scope="row">acme</th><td class="num">1.25</td><td class="num">2</td>' in html
    assert "<td>–</td>" in html  # globex has no alerts
    assert str(web.render_value([1, 2.5, None])) == "1, 2.5, –"
    assert "&lt;b&gt;" in str(web.render_value({"note": "<b>"}))


def test_parse_branch_reads_several_decisions():
    points = _Exercise.decision_points
    assert web.parse_branch("D1=ignore\nD2=deny", points) == {"D1": "ignore", "D2": "deny"}
    with pytest.raises(ValueError, match="for example D1=ignore"):
        web.parse_branch("D1:ignore", points)


# --- the real engine ------------------------------------------------------------------------

EXERCISE = """\
name: console_tiny
title: A developer asks too much
scenario:
  name: console_tiny_world
  seed: 7
  horizon_days: 3
  data: {dataset: synthetic, n: 400, minority: 60}
  developers:
    - {id: mallory, organization: acme,
       strategy: {kind: compressed_sensing, queries: 160, perturbation: 0.1, batch: 40}}
    - {id: alice, organization: acme,
       strategy: {kind: honest_selection, candidates: 3, train_subsample: 300}}
  compliance:
    metrics: [sp]
    policy:
      - {kind: rate_limit, per_day: 100, scope: organization}
      - {kind: min_support, k: 5}
  auditor: {enabled: true, every_hours: 6, detectors: [low_support, noise_family]}
objectives:
  - {id: O1, title: Keep the leak small, indicator: {kind: max_leakage},
     thresholds: {P: 60, S: 70, M: 85}}
msel:
  - {id: I1, kind: message, at_hours: 1, category: briefing,
     text: Acme asks for fairness metrics of many models today.}
decision_points:
  - id: D1
    at_hours: 12
    title: Suspicious queries
    prompt: Acme sent many near-identical models. What does the compliance team do?
    evidence:
      compliance_lead: [queries, refusals, alerts]
      model_owner: [messages]
      auditor: [alerts]
    options:
      - {id: ignore, label: Keep answering, description: change nothing}
      - {id: suspend, label: Suspend acme, description: refuse every query of the organisation,
         actions: [{kind: suspend, organization: acme}]}
  - id: D2
    at_hours: 40
    title: Rate limit
    prompt: Acme asks for a higher rate limit.
    owner: regulator
    evidence: {compliance_lead: [refusals]}
    options:
      - {id: keep, label: Keep 100 a day}
      - {id: raise, label: Raise to 400 a day, actions: [{kind: set_rate_limit, per_day: 400}]}
"""
"""A small exercise (400 synthetic people, three simulated days, exact answers) with two
decision points, for the tests against the real engine: ignoring the first lets mallory's leakage
pass 90% before the second."""


def _real_factory(tmp_path: Path):
    from biasleak.sim.exercise.session import ExerciseSession

    path = tmp_path / "console_tiny.yaml"
    path.write_text(EXERCISE)
    return lambda: ExerciseSession.from_file(path, out=tmp_path / "out")


def _real_secrets(facilitator: dict[str, Any]) -> set[str]:
    """What the facilitator's JSON shows of the ground truth, as a page or JSON would print it:
    its field names, the developers' strategies (who is an attacker) and leakage values."""
    secrets = {"ground_truth", "Ground truth", "max_leakage", "Max leakage", "leakage %"}
    for developer in facilitator["status"]["ground_truth"]["developers"].values():
        secrets.add(developer["strategy"])
        for key in ("leakage", "max_leakage"):
            if developer[key] != 50.0:  # a coin flip's 50 is no secret (and is everywhere)
                secrets |= {web._html.scalar(developer[key]), repr(developer[key])}
    return secrets


@pytest.mark.slow
def test_with_the_real_engine_players_never_see_the_ground_truth(tmp_path):
    app = web.create_app(_real_factory(tmp_path))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=True) as client:
        steps = [
            ("start", lambda: None),
            ("D1 pending", lambda: client.post("/facilitator/advance")),
            (
                "D1 decided",
                lambda: client.post(
                    "/facilitator/decide", data={"option": "ignore", "by": "compliance_lead"}
                ),
            ),
            ("D2 pending", lambda: client.post("/facilitator/advance")),
        ]
        seen: set[str] = set()
        for stage, step in steps:
            step()
            facilitator = client.get("/api/facilitator").json()
            secrets = _real_secrets(facilitator)
            seen |= secrets
            page = client.get("/facilitator").text
            assert "Ground truth" in page and "compressed_sensing" in page, stage
            for role in PLAYERS:
                for url in (f"/play/{role}", f"/play/{role}/live", f"/api/{role}"):
                    answer = client.get(url)
                    assert answer.status_code == 200, (stage, url)
                    for secret in secrets:
                        assert secret not in answer.text, f"{stage}: {url} shows {secret!r}"
        # the leakage grew past a coin flip, so the values above were really checked, and the
        # facilitator is shown every one of them
        assert any(re.fullmatch(r"[0-9.]+", s) for s in seen), seen
        shown = page + client.get("/api/facilitator").text
        assert [s for s in secrets if s not in shown] == []
        owner = client.get("/api/model_owner").json()
        assert owner["pending"]["id"] == "D2" and owner["pending"]["owner"] == "regulator"
        assert [
            t["kind"] for t in client.get("/api/compliance_lead").json()["evidence"]["tables"]
        ] == ["refusals"]
        # a branch needs every decision taken: the engine's refusal is a message on the page
        refused = client.post("/facilitator/branch", data={"branch": "D1=suspend"})
        assert refused.status_code == 400
        assert "decision point 'D2' has no scripted decision" in html.unescape(refused.text)


# --- a person in a real browser -------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NO_BROWSER = (
    "the browser test needs Debian's chromium at /usr/bin/chromium and the playwright package: "
    "apt-get install -y chromium && pip install playwright (do not run 'playwright install')"
)


class _Server:
    """The console served by uvicorn in a thread on a free loopback port."""

    def __init__(self, app) -> None:
        import uvicorn

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the console did not start within 20 s")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def _launch(pw, profile: str):
    return pw.chromium.launch_persistent_context(
        profile,
        executable_path=CHROMIUM,
        args=CHROMIUM_ARGS,
        headless=True,
        viewport={"width": 1100, "height": 900},
    )


@pytest.mark.slow
def test_a_facilitator_plays_the_exercise_in_a_browser(tmp_path):
    """Advance, decide with a rationale, follow as a player, branch, open the report."""
    if not Path(CHROMIUM).exists():
        pytest.fail(NO_BROWSER)
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        pytest.fail(NO_BROWSER)
    shots = tmp_path / "shots"
    shots.mkdir()
    app = web.create_app(_real_factory(tmp_path), poll_seconds=0.5)
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path)
    with _Server(app) as server, sync_playwright() as pw:
        browser = _launch(pw, profile)
        try:
            page = browser.new_page()
            page.goto(server.url + "/")
            page.get_by_role("link", name="Facilitator").click()
            expect(page.get_by_role("heading", level=1)).to_contain_text("facilitator")

            # a player opens their page and follows along without touching anything
            player = browser.new_page()
            player.goto(server.url + "/play/model_owner")
            expect(player.get_by_text("Waiting for the facilitator to advance")).to_be_visible()

            page.get_by_role("button", name="Advance the clock").click()
            expect(page.get_by_role("heading", name="Suspicious queries")).to_be_visible()
            page.get_by_label("Keep answering").check()
            expect(page.get_by_label("Decided by (role)")).to_have_value("compliance_lead")
            page.get_by_label("Rationale").fill("No alert yet; suspending would stop alice too.")
            page.screenshot(path=shots / "first_decision.png", full_page=True)
            page.get_by_role("button", name="Record decision and continue").click()
            expect(page.get_by_role("status")).to_contain_text("Suspicious queries → ignore")

            # the player's page refreshed by itself and shows the decision, not the truth
            expect(player.get_by_text("Keep answering (decided by compliance_lead)")).to_be_visible(
                timeout=10_000
            )
            page.get_by_role("button", name="Advance the clock").click()
            expect(player.get_by_role("heading", name="Rate limit")).to_be_visible(timeout=10_000)
            player.screenshot(path=shots / "player.png", full_page=True)
            truth = page.get_by_role("region", name="Ground truth (facilitator only)")
            expect(truth).to_contain_text("compressed_sensing")
            for secret in ("Ground truth", "compressed_sensing", "Max leakage"):
                assert secret not in player.content(), secret

            page.get_by_label("Keep 100 a day").check()
            page.get_by_label("Decided by (role)").select_option("regulator")
            page.get_by_label("Rationale").fill(
                "Four alerts on acme; no higher limit until explained."
            )
            page.get_by_label("Rationale").blur()  # no focus ring in the pictures
            page.screenshot(path=shots / "console_full.png", full_page=True)
            top = {"x": 0, "y": 0, "width": 1100, "height": 1900}
            page.screenshot(path=shots / "console.png", full_page=True, clip=top)
            page.get_by_role("button", name="Record decision and continue").click()
            page.get_by_role("button", name="Advance the clock").click()
            expect(page.get_by_text("Finished", exact=True)).to_be_visible()

            # a typo in the branch gets a message on the page; a correct one opens the comparison
            branch = page.get_by_label("Branch (DECISION=OPTION")
            branch.fill("D1=sometimes")
            page.get_by_role("button", name="Run the branch").click()
            expect(page.get_by_role("alert")).to_contain_text("Decision 'D1' has no option")
            expect(branch).to_have_value("D1=sometimes")  # kept for correcting
            branch.fill("D1=suspend")
            page.get_by_role("button", name="Run the branch").click()
            expect(page.get_by_role("heading", level=1)).to_contain_text(
                "After-action report with branch", timeout=60_000
            )

            page.goto(server.url + "/facilitator")
            expect(page.get_by_role("link", name="Branch 1: D1=suspend")).to_be_visible()
            page.get_by_role("button", name="Open the after-action report").click()
            expect(page.get_by_role("heading", level=1)).to_contain_text("After-action report")
            page.screenshot(path=shots / "report.png", full_page=True)
        finally:
            browser.close()
    log = (tmp_path / "out" / "decisions.yaml").read_text()
    assert "No alert yet; suspending would stop alice too." in log
    for name in ("first_decision.png", "console.png", "player.png", "report.png"):
        assert (shots / name).stat().st_size > 5_000
    keep = os.environ.get("BIASLEAK_CONSOLE_SHOTS")
    if keep:  # the README's screenshots: BIASLEAK_CONSOLE_SHOTS=docs/exercise
        for name in ("console.png", "report.png"):
            shutil.copy(shots / name, Path(keep) / name)
