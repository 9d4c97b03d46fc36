"""Terminal mode: the facilitator plays an exercise at a prompt, on a screen the room can share.

As the world runs, the terminal prints each line of the room's timeline once, in time order
and, within one moment, in the order the log recorded it (a line that arrives after a pause at a
moment already printed is printed then, and nothing is repeated). At each decision point without
a scripted decision it prints the evidence each seated role sees (never the ground truth: the
screen is shared; the facilitator reads it in the after-action report), and the numbered
options. The facilitator types the option's number, then who decided (a number, Enter for the
decision point's owner) and the stated rationale (one line, Enter for none). A key that is not
an option gets a message naming what to type, and the same prompt again.

Ctrl-C at any moment stops the exercise: the log is closed with the summary of what happened so
far (``biasleak replay`` rebuilds it) and a partial report marked interrupted is written; the
command exits with code 130. The end of input (a closed terminal) is treated the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TextIO

from biasleak.sim.exercise.record import clock
from biasleak.sim.exercise.session import ExerciseSession
from biasleak.sim.exercise.views import TimelineEntry, timeline_entries

__all__ = ["NOT_AN_OPTION", "play", "print_new"]

NOT_AN_OPTION: Final = "{key!r} is not an option: type a number from 1 to {count}"
NOT_A_ROLE: Final = "{key!r} is not a role: type a number from 1 to {count}, or Enter for {owner}"


class EndOfInput(Exception):
    """The terminal's input ended while a decision was waiting."""


def _table(table: dict[str, Any], out: TextIO) -> None:
    columns = table["columns"]
    rows = [[str(c) for c in row] for row in table["rows"]]
    print(f"  {table['title']}", file=out)
    if not rows:
        print("    (nothing yet)", file=out)
        return
    widths = [min(max(len(str(c)), *(len(r[i]) for r in rows)), 60) for i, c in enumerate(columns)]
    print(
        "    " + "  ".join(str(c).ljust(w) for c, w in zip(columns, widths, strict=True)), file=out
    )
    for row in rows:
        cells = [c if len(c) <= w else c[: w - 3] + "..." for c, w in zip(row, widths, strict=True)]
        print("    " + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)), file=out)


def _room_timeline(session: ExerciseSession) -> list[TimelineEntry]:
    """What happened, as the seated roles other than the facilitator together may see it, in
    time order and, within one moment, in the log's order."""
    seen: dict[tuple[int, str, str], TimelineEntry] = {}
    for role in session.exercise.roles:
        if role == "facilitator":
            continue
        for entry in timeline_entries(session.record, role):
            seen.setdefault(_key(entry), entry)
    return sorted(seen.values(), key=lambda e: (e.t, e.seq))


def _key(entry: TimelineEntry) -> tuple[int, str, str]:
    """What makes an entry itself: the event it comes from and what it says."""
    return (entry.seq, entry.kind, entry.text)


def print_new(
    entries: list[TimelineEntry], printed: set[tuple[int, str, str]], out: TextIO
) -> None:
    """Print the entries not printed yet (by identity: an entry that arrives later at a moment
    already printed is printed once, and nothing printed before is repeated)."""
    for entry in entries:
        key = _key(entry)
        if key not in printed:
            printed.add(key)
            print(f"[{clock(entry.t)}] {entry.text}", file=out)


def _ask(prompt: str, read: Callable[[str], str], out: TextIO, check: Callable[[str], Any]) -> Any:
    """Ask until ``check`` accepts the answer (it raises ValueError with the message)."""
    while True:
        try:
            answer = read(prompt)
        except EOFError:
            raise EndOfInput from None
        try:
            return check(answer.strip())
        except ValueError as err:
            print(f"  {err}", file=out, flush=True)


def _decide(session: ExerciseSession, read: Callable[[str], str], out: TextIO) -> None:
    pending = session.pending
    assert pending is not None
    print(f"\n=== Decision point: {pending.title} ({session.clock}) ===", file=out)
    if pending.prompt:
        print(pending.prompt.strip(), file=out)
    for role in session.exercise.roles:
        if role == "facilitator":
            continue
        tables = session.evidence(role)["tables"]
        if tables:
            print(f"\nEvidence for {role}:", file=out)
            for table in tables:
                _table(table, out)
    print("\nOptions:", file=out)
    for k, (_, label, description) in enumerate(pending.options, start=1):
        print(f"  {k}) {label}" + (f" - {description}" if description else ""), file=out)
    count = len(pending.options)

    def option(key: str) -> str:
        if key.isdigit() and 1 <= int(key) <= count:
            return pending.options[int(key) - 1][0]
        raise ValueError(NOT_AN_OPTION.format(key=key, count=count))

    chosen = _ask(f"Option [1-{count}]: ", read, out, option)
    roles = list(session.exercise.roles)
    print("Who decides? " + "  ".join(f"{k}) {r}" for k, r in enumerate(roles, 1)), file=out)

    def role(key: str) -> str:
        if key == "":
            return pending.owner
        if key.isdigit() and 1 <= int(key) <= len(roles):
            return roles[int(key) - 1]
        if key in roles:
            return key
        raise ValueError(NOT_A_ROLE.format(key=key, count=len(roles), owner=pending.owner))

    by = _ask(f"Decided by [Enter: {pending.owner}]: ", read, out, role)
    rationale = _ask("Rationale (one line, Enter for none): ", read, out, lambda s: s)
    session.decide(chosen, by=by, rationale=rationale)
    print(f"Recorded: {chosen} by {by}.", file=out, flush=True)


def play(
    session: ExerciseSession,
    *,
    read: Callable[[str], str] = input,
    out: TextIO,
) -> tuple[str, Any]:
    """Play ``session`` to its end at the terminal.

    Returns ``("finished", report path)``, or ``("interrupted", report path)`` after Ctrl-C or
    the end of input (the partial report and a closed, replayable log are written first).
    """
    ex = session.exercise
    print(f"=== {ex.title} ({ex.name}) ===", file=out)
    if ex.description:
        print(ex.description.strip(), file=out)
    print(f"Roles: {', '.join(ex.roles)}. Ctrl-C stops and writes a partial report.", file=out)
    printed: set[tuple[int, str, str]] = set()
    try:
        while not session.finished:
            session.advance()
            print_new(_room_timeline(session), printed, out)
            out.flush()
            if session.pending is not None:
                _decide(session, read, out)
        path = session.finish()
        return "finished", path
    except (KeyboardInterrupt, EndOfInput) as err:
        why = "input ended" if isinstance(err, EndOfInput) else "interrupted"
        print(f"\n{why}: writing the partial report...", file=out, flush=True)
        return "interrupted", session.interrupt()
