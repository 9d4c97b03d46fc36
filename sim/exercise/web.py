"""The exercise console: a tabletop exercise played in a browser.

``biasleak exercise FILE --serve [--port P]`` starts a small web application on this computer
(127.0.0.1 only) around one :class:`~biasleak.sim.exercise.session.ExerciseSession`. The people in
the room open it in their browsers:

- the **facilitator** (``/facilitator``) runs the exercise: advances the simulated clock to the
  next decision point, records each decision (the option, which role took it and why), asks for a
  branch (``DECISION=OPTION``: the same world from the same seed with that decision changed, shown
  side by side with what was decided) and opens the after-action report. Only this page shows the
  evaluator's ground truth: which developer is an attacker and how much of the protected
  attribute each has really learnt;
- every other role (``/play/compliance_lead``, ``/play/model_owner``, ...) gets a read-only page
  with what that role would see in the world: the clock, the injects and alerts it received, the
  evidence for the decision on the table. The page refreshes itself every few seconds, so players
  follow the facilitator without touching anything.

The console holds no filtering rule of its own: each page shows exactly what the session returns
for that page's role (:meth:`ExerciseSession.status`, :meth:`~ExerciseSession.evidence`,
:meth:`~ExerciseSession.timeline`), and nothing the facilitator sees is reachable from a player's
page. Because the facilitator's page shows the ground truth and has no login, the server
binds to the loopback interface only, answers only requests addressed to it by a loopback name
(a web page elsewhere cannot reach it through DNS rebinding) and refuses forms posted from other
sites.

A branch reruns the file the session plays (``session.loaded.source``) through
:func:`~biasleak.sim.exercise.session.run_branches`, with the decisions scripted for the session
updated by those recorded in the console, so it needs every decision taken (or scripted); a
caller may pass its own runner instead.

The pages are server-rendered HTML (Jinja2 templates in ``templates/``; values laid out as tables
by :mod:`._html`) with one small plain script (``static/console.js``) for the players' refresh;
there is no front-end build. The application is Starlette, served by uvicorn; they, Jinja2 and
httpx2 (for Starlette's test client) come with the ``web`` extra.

:func:`create_app` builds the application (the tests drive it with Starlette's ``TestClient``);
:func:`serve` runs it until Ctrl-C, after which an unfinished exercise is interrupted so its log
stays valid and its partial report is written.
"""

from __future__ import annotations

import ipaddress
import logging
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

MISSING_WEB: Final = (
    "the exercise console needs the optional extra 'web': pip install 'biasleak[web]' "
    "(module {module!r} is not installed)"
)

try:
    import anyio
    import jinja2
    import uvicorn
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.templating import Jinja2Templates

    from biasleak.sim.exercise import _html
    from biasleak.sim.exercise._html import render_value
    from biasleak.sim.exercise.session import UNKNOWN_ROLE, branch_problem
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(MISSING_WEB.format(module=(err.name or "starlette").split(".")[0])) from err

__all__ = [
    "FACILITATOR",
    "LOOPBACK_NAMES",
    "POLL_SECONDS",
    "BranchRunner",
    "SessionFactory",
    "create_app",
    "parse_branch",
    "render_value",
    "serve",
]

SessionFactory = Callable[[], Any]
"""Zero-argument callable returning a fresh ``ExerciseSession`` (the console calls it again to
restart)."""

BranchRunner = Callable[[dict[str, str], dict[str, dict[str, str]], Path], Path]
"""``runner(branch, decisions, out) -> report.html``: rerun the exercise from its seed with the
decisions recorded so far (``{decision_id: {"option", "by", "rationale"}}``) and the branch's
changes (``{decision_id: option}``), writing the side-by-side report under ``out``. By default
the console builds it from the engine's ``run_branches`` and the session's file."""

FACILITATOR: Final = "facilitator"
"""The one role that sees the ground truth, advances the clock and records decisions."""

POLL_SECONDS: Final = 3
"""How often a player's page asks for a fresh view."""

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "::1", "[::1]")
"""Host names the console answers to (the ``Host`` header), and may bind to."""

log = logging.getLogger(__name__)

NOT_LOOPBACK: Final = (
    "the exercise console binds to this computer only (its facilitator page shows the ground "
    "truth and has no login); got host {host!r}, allowed: 127.0.0.1, ::1 or localhost"
)
NOT_FINISHED: Final = (
    "The after-action report is written when the exercise has finished (now {now} simulated "
    "hours). Advance to the end first."
)
MISSING_FIELD: Final = "The form did not say {field}: {hint}"
BAD_BRANCH: Final = (
    "{item!r} is not a branch. Write DECISION=OPTION (several separated by commas), for example "
    "{example}."
)
REPEATED_DECISION: Final = "Decision {id!r} appears twice in the branch; give it once."
NO_BRANCH_RUNNER: Final = (
    "Branches are not available here: the session does not say which file it plays, and no "
    "branch runner was given."
)
CROSS_SITE: Final = "Refused a form sent from another site ({origin}); use the console's own page."
BUSY: Final = "The world is running; this view follows when it pauses."
NO_SUCH_FILE: Final = "There is no file {name!r} here."

_TEMPLATES = Path(__file__).with_name("templates")
_STATIC = Path(__file__).with_name("static")


# --- branches ---------------------------------------------------------------------------------


def parse_branch(text: str, decision_points: Iterable[Any]) -> dict[str, str]:
    """``"D1=refuse, D2=noise"`` -> ``{"D1": "refuse", "D2": "noise"}``, checked against the
    exercise's decision points (by the session's own check); a bad item raises
    :class:`ValueError` saying what is allowed."""
    points = {str(p.id): [_html.option(o).id for o in p.options] for p in decision_points}
    example = ", ".join(f"{d}={opts[0]}" for d, opts in list(points.items())[:1] if opts) or "D1=A"
    branch: dict[str, str] = {}
    items = [i.strip() for i in text.replace("\n", ",").split(",") if i.strip()]
    if not items:
        raise ValueError(
            MISSING_FIELD.format(
                field="which branch to run", hint=BAD_BRANCH.format(item=text, example=example)
            )
        )
    for item in items:
        ident, sep, option = (s.strip() for s in item.partition("="))
        if not sep or not ident or not option:
            raise ValueError(BAD_BRANCH.format(item=item, example=example))
        problem = branch_problem(points, ident, option)
        if problem is not None:
            raise ValueError(problem)
        if ident in branch:
            raise ValueError(REPEATED_DECISION.format(id=ident))
        branch[ident] = option
    return branch


def _engine_runner(console: _Console) -> BranchRunner | None:
    """Branches through the engine's ``run_branches`` when the session says which file it
    plays (``session.loaded.source``): the decisions scripted for it (the file's and a decisions
    file's) updated by those recorded in the console, then the branch's changes."""
    source = getattr(getattr(console.session, "loaded", None), "source", None)
    if source is None:
        return None
    from biasleak.sim.exercise.session import run_branches

    def runner(branch: dict[str, str], decisions: dict[str, dict[str, str]], out: Path) -> Path:
        scripted = _html.plain(getattr(console.session, "scripted", {}))
        return run_branches(source, decisions={**scripted, **decisions}, branch=branch, out=out)

    return runner


@dataclass
class _BranchRun:
    number: int
    branch: dict[str, str]
    report: Path


# --- the console: one session and what the facilitator did with it ---------------------------


@dataclass
class _Console:
    """The live session and the console's own record around it. Every use of the session holds
    ``lock``: the engine is not thread-safe and Starlette runs the work in worker threads."""

    factory: SessionFactory
    runner: BranchRunner | None
    out: Path | None
    """Where branches are written (default: ``console/`` in the session's own ``out``)."""
    session: Any = None
    decisions: dict[str, dict[str, str]] = field(default_factory=dict)
    """Decisions recorded in this console, in the engine's ``decisions=`` format (for branches)."""
    report: Path | None = None
    branches: list[_BranchRun] = field(default_factory=list)
    notice: str = ""
    """One line for the facilitator's next page (what the last action did)."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    branch_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.session = self.factory()
        if self.runner is None:
            self.runner = _engine_runner(self)
        if self.out is None:
            own = getattr(self.session, "out", None)
            self.out = (
                Path(own) / "console"
                if own is not None
                else Path(tempfile.mkdtemp(prefix="biasleak-console-"))
            )

    # views ------------------------------------------------------------------------------------
    def roles(self) -> list[str]:
        roles = [str(r) for r in self.session.exercise.roles]
        return roles if FACILITATOR in roles else [FACILITATOR, *roles]

    def check_role(self, role: str) -> None:
        if role not in self.roles():
            detail = UNKNOWN_ROLE.format(role=role, roles=", ".join(self.roles()))
            raise HTTPException(404, detail)

    def view(self, role: str, *, wait: bool = True) -> dict[str, Any]:
        """Everything one role's page shows, read from the session under the lock. With
        ``wait=False`` (a player's refresh) a busy world answers 503 at once instead of queueing
        a worker thread per poll behind a long advance."""
        if not self.lock.acquire(timeout=-1 if wait else 0.2):
            raise HTTPException(503, BUSY)
        try:
            return self._view(role)
        finally:
            self.lock.release()

    def _view(self, role: str) -> dict[str, Any]:
        with self.lock:
            self.check_role(role)
            s = self.session
            pending = _html.decision(s.pending) if s.pending is not None else None
            status = _html.plain(s.status(role))
            return {
                "role": role,
                "title": str(getattr(s.exercise, "title", "") or s.exercise.name),
                "name": str(s.exercise.name),
                "now": _html.plain(s.now),
                "finished": bool(s.finished),
                "pending": pending,
                "status": status,
                "shown": _html.shown(status),
                "evidence": _html.plain(s.evidence(role)) if pending else None,
                "timeline": _html.plain(s.timeline(role)),
            }

    def facilitator_view(self) -> dict[str, Any]:
        with self.lock:
            view = self.view(FACILITATOR)
            exercise = self.session.exercise
            view.update(
                roles=self.roles(),
                objectives=_html.plain(getattr(exercise, "objectives", ())),
                decision_points=[_html.decision(p) for p in exercise.decision_points],
                decisions=dict(self.decisions),
                report=self.report,
                branches=list(self.branches),
                branch_available=self.runner is not None,
                notice=self.notice,
            )
            self.notice = ""
            return view

    # actions ----------------------------------------------------------------------------------
    def advance(self) -> None:
        """Run the world on (the session says, in its own words, why it cannot)."""
        with self.lock:
            s = self.session
            s.advance()
            where = (
                "the end of the exercise"
                if s.finished
                else f"decision “{_html.decision(s.pending)['title']}”"
                if s.pending is not None
                else "a pause"
            )
            self.notice = f"The world ran to {_html.hours(_html.plain(s.now))}: {where}."

    def decide(self, form: Mapping[str, str]) -> None:
        """Record the form's decision; the session checks it (the form only needs its fields)."""
        with self.lock:
            s = self.session
            option, by = form.get("option", ""), form.get("by", "")
            if s.pending is not None and not option:
                allowed = [o["id"] for o in _html.decision(s.pending)["options"]]
                hint = f"choose one of {', '.join(allowed)}."
                raise ValueError(MISSING_FIELD.format(field="which option was chosen", hint=hint))
            point = _html.decision(s.pending) if s.pending is not None else None
            rationale = form.get("rationale", "").strip()
            s.decide(option, by=by, rationale=rationale)
            assert point is not None  # the session refuses a decision when none is waiting
            self.decisions[point["id"]] = {"option": option, "by": by, "rationale": rationale}
            self.notice = f"Recorded: {point['title']} → {option} (by {by})."

    def finish(self) -> Path:
        with self.lock:
            if self.report is None:
                if not self.session.finished:
                    now = _html.scalar(_html.plain(self.session.now))
                    raise ValueError(NOT_FINISHED.format(now=now))
                self.report = Path(self.session.finish())
            return self.report

    def restart(self) -> None:
        with self.lock:
            old = self.session
            self.session = self.factory()
            if not old.finished and hasattr(old, "abort"):  # its log stays, without a summary
                old.abort()
            self.decisions, self.report = {}, None
            self.notice = "Restarted from the beginning (same file, same seed)."

    def branch(self, text: str) -> _BranchRun:
        if self.runner is None:
            raise ValueError(NO_BRANCH_RUNNER)
        with self.lock:
            branch = parse_branch(text, getattr(self.session.exercise, "decision_points", ()))
            decisions = {k: dict(v) for k, v in self.decisions.items()}
        with self.branch_lock:  # one rerun at a time; the live session stays usable meanwhile
            number = len(self.branches) + 1
            assert self.out is not None
            out = self.out / "branches" / f"{number:02d}"
            out.mkdir(parents=True, exist_ok=True)
            run = _BranchRun(number, branch, Path(self.runner(branch, decisions, out)))
            self.branches.append(run)
        return run

    def close(self) -> None:
        """On shutdown: an unfinished exercise is interrupted (valid log, partial report)."""
        with self.lock:
            if self.session is not None and not self.session.finished and self.report is None:
                self.report = Path(self.session.interrupt())


# --- the web application ----------------------------------------------------------------------


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def _form(request: Request) -> dict[str, str]:
    """The posted form (URL-encoded; the console's forms carry no files), one value per field."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _same_site(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, CROSS_SITE.format(origin=origin))


def _inside(folder: Path, name: str) -> Path:
    """``folder / name`` if it is a file inside ``folder`` (no ``..`` escapes), else 404."""
    base = folder.resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base) or not path.is_file():
        raise HTTPException(404, NO_SUCH_FILE.format(name=name))
    return path


def create_app(
    session_factory: SessionFactory,
    *,
    branches: BranchRunner | None = None,
    out: str | Path | None = None,
    poll_seconds: float = POLL_SECONDS,
) -> Starlette:
    """The console's Starlette application around ``session_factory()``'s session.

    Parameters
    ----------
    session_factory
        Zero-argument callable returning a fresh ``ExerciseSession``; called once now and again
        on each restart.
    branches
        Reruns a branch and writes its side-by-side report (see :data:`BranchRunner`); by
        default the engine's ``run_branches`` on the session's file. Without either, the
        facilitator page says branches are not available.
    out
        Folder for the branches' reports (default: ``console/`` in the session's ``out``, else a
        new temporary folder). The session writes its own report and log where its ``out``
        says.
    poll_seconds
        How often a player's page asks for a fresh view.
    """
    console = _Console(session_factory, branches, Path(out) if out is not None else None)
    templates = Jinja2Templates(
        env=jinja2.Environment(
            loader=jinja2.FileSystemLoader(_TEMPLATES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
    )
    templates.env.filters["render"] = render_value
    templates.env.filters["hours"] = _html.hours
    templates.env.filters["label"] = _html.label
    templates.env.filters["scalar"] = _html.scalar

    def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        context = {"poll_seconds": f"{poll_seconds:g}", **context}
        return templates.TemplateResponse(request, name, context, status_code=status)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    async def index(request: Request) -> Response:
        view = await run(console.view, FACILITATOR)
        return page(request, "index.html", {"view": view, "roles": console.roles()})

    async def facilitator(request: Request) -> Response:
        return page(request, "facilitator.html", {"view": await run(console.facilitator_view)})

    async def action(request: Request) -> Response:
        """POST /facilitator/{action}: do it, then show the page again (or the error on it)."""
        _same_site(request)
        name = request.path_params["action"]
        form = await _form(request)
        try:
            if name == "advance":
                await run(console.advance)
            elif name == "decide":
                await run(console.decide, form)
            elif name == "restart":
                await run(console.restart)
            elif name == "finish":
                await run(console.finish)
                return RedirectResponse("/facilitator/report/report.html", status_code=303)
            elif name == "branch":
                done = await run(console.branch, form.get("branch", ""))
                target = f"/facilitator/branches/{done.number}/{done.report.name}"
                return RedirectResponse(target, status_code=303)
            else:
                raise HTTPException(404, f"There is no action {name!r}.")
        except ValueError as err:  # ExerciseError is a ValueError: a person's mistake, not a bug
            view = await run(console.facilitator_view)
            context = {"view": view, "error": str(err), "form": form, "action": name}
            return page(request, "facilitator.html", context, status=400)
        return RedirectResponse("/facilitator", status_code=303)

    async def report_file(request: Request) -> Response:
        if console.report is None:
            raise HTTPException(404, NOT_FINISHED.format(now=_html.scalar(console.session.now)))
        return FileResponse(_inside(console.report.parent, request.path_params["name"]))

    async def branch_file(request: Request) -> Response:
        number = request.path_params["number"]
        runs = [b for b in console.branches if b.number == number]
        if not runs:
            raise HTTPException(404, f"There is no branch number {number}.")
        return FileResponse(_inside(runs[0].report.parent, request.path_params["name"]))

    async def player(request: Request) -> Response:
        role = request.path_params["role"]
        if role == FACILITATOR:
            return RedirectResponse("/facilitator", status_code=303)
        return page(request, "player.html", {"view": await run(console.view, role)})

    async def player_live(request: Request) -> Response:
        role = request.path_params["role"]
        if role == FACILITATOR:
            raise HTTPException(404, "The facilitator's page does not refresh itself.")
        view = await run(lambda: console.view(role, wait=False))
        return page(request, "_player_live.html", {"view": view})

    async def api(request: Request) -> Response:
        view = await run(console.view, request.path_params["role"])
        return JSONResponse(view, headers={"Cache-Control": "no-store"})

    async def error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            status, message = exc.status_code, str(exc.detail)
        else:
            log.exception("exercise console: unexpected error", exc_info=exc)
            status = 500
            message = "Something went wrong inside the simulator; the details are in the terminal."
            if request.url.path.startswith("/facilitator"):
                message = f"Something went wrong inside the simulator: {type(exc).__name__}: {exc}"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return page(request, "error.html", {"status": status, "message": message}, status)

    @asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        await run(console.close)

    routes = [
        Route("/", index),
        Route("/facilitator", facilitator),
        Route("/facilitator/report/{name:path}", report_file),
        Route("/facilitator/branches/{number:int}/{name:path}", branch_file),
        Route("/facilitator/{action}", action, methods=["POST"]),
        Route("/play/{role}", player),
        Route("/play/{role}/live", player_live),
        Route("/api/{role}", api),
        Mount("/static", StaticFiles(directory=_STATIC), name="static"),
    ]
    hosts = ["127.0.0.1", "localhost", "[::1]", "::1"]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
        exception_handlers={HTTPException: error, Exception: error},
        lifespan=lifespan,
    )
    app.state.console = console
    return app


def serve(
    session_factory: SessionFactory,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    branches: BranchRunner | None = None,
    out: str | Path | None = None,
) -> None:
    """Run the console at ``http://host:port/`` until Ctrl-C (see :func:`create_app`).

    Only loopback hosts are allowed: the facilitator's page shows the protected attribute and the
    console has no login, so it must not be reachable from the network.
    """
    if not _loopback(host):
        raise ValueError(NOT_LOOPBACK.format(host=host))
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port must be between 0 and 65535, got {port}")

    app = create_app(session_factory, branches=branches, out=out)
    shown = f"[{host}]" if ":" in host else host
    print(f"exercise console: http://{shown}:{port}/facilitator (Ctrl-C stops it)", flush=True)
    uvicorn.run(app, host=host, port=int(port), log_level="warning")
