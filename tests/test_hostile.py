"""Hostile input: scenario files, ``--set`` overrides, CSV files, query payloads and run logs.

Every case ends in one of three ways, and nothing else:

- a clear error: exit code 2 from :func:`biasleak.sim.cli.main`, a message that names the file
  (for a scenario file also the line and the key path, for a CSV file the row and the column),
  and no traceback;
- a refusal: a :class:`~biasleak.mechanisms.policy.Decision` with ``answered=False`` and a reason
  code from :data:`~biasleak.mechanisms.policy.REFUSAL_REASONS`;
- a correct run: exit code 0 (and, for ``run``, a log that ``replay`` rebuilds exactly).

The cases are hand-written lists (the exact findings of the hostile review, one parametrized case
each) and hypothesis properties that break a small valid scenario, its overrides, a CSV file, a
query or a run log in generated ways. Cases per family (hand-written + generated examples):

=====================  ============  =========
family                  hand-written  generated
=====================  ============  =========
scenario files                    47         70
``--set`` overrides               33         45
CSV files                         25         30
query payloads                   235        140
run logs (``replay``)             22         60
=====================  ============  =========

The query payloads are 45 payloads, each against 5 policies, and 10 metric names.

Every case is bounded in time: the command runs in this process under an interval timer
(:data:`CASE_SECONDS`) whose signal ends it as a hang, the data are small (a synthetic audit set
of 60 people with 6 in the minority), horizons are a day, and the generated properties skip
hypothesis's shrinking (a hang would be retried many times). The examples are derandomized, so
that the suite takes the same inputs and the same time on every run.

The command runs in this process with warnings shown as the command line shows them (on stderr),
not turned into errors: what is checked is what a user of the command would see. A correct run
emits no numeric warning (overflow, invalid value, division by zero): those mean that it computed
with infinities or NaN.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import io
import json
import math
import re
import signal
import tempfile
import traceback
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from biasleak.agents.strategies import STRATEGIES
from biasleak.mechanisms.metrics import METRICS
from biasleak.mechanisms.policy import (
    REFUSAL_REASONS,
    AuditSet,
    Budget,
    Cache,
    Decision,
    MinSupport,
    NearDuplicate,
    Noise,
    Policy,
    PolicyState,
    RateLimit,
    Request,
    decide,
)
from biasleak.mechanisms.release import MECHANISMS
from biasleak.sim.cli import main

CASE_SECONDS = 120.0
"""A bound only a hang reaches: the small runs here take well under a second, and how fast bad
input is refused is no test's business (timings belong in ``benchmarks/``; a loaded machine
must not fail a case that is merely slow)."""

PROPERTY = settings(
    deadline=None,
    database=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Generated cases: reproducible inputs, no shrinking (a hang would be retried many times)."""

# ================================================================================================
# Running a command, bounded in time


class CaseTimeout(BaseException):
    """Raised by the interval timer in a case that ran longer than :data:`CASE_SECONDS`."""


@dataclass
class Outcome:
    """What one command did: its exit code, its output, and how it ended."""

    argv: list[str]
    code: int | None = None
    out: str = ""
    err: str = ""
    crash: str | None = None
    """The traceback of an exception that escaped ``main``."""
    hung: bool = False
    warnings: list[str] = field(default_factory=list)
    """Warnings the command emitted (category, message, where)."""

    def describe(self) -> str:
        how = "hung" if self.hung else f"exit {self.code}"
        text = f"biasleak {' '.join(self.argv)[:400]}: {how}\nstderr: {self.err[-1500:]}"
        if self.crash:
            text += f"\nescaped main:\n{self.crash[-2500:]}"
        return text


@contextlib.contextmanager
def time_limit(seconds: float = CASE_SECONDS) -> Iterator[None]:
    """Raise :class:`CaseTimeout` inside the block once ``seconds`` have passed."""

    def expire(_signum: int, _frame: Any) -> None:
        raise CaseTimeout(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def cli(*argv: str, seconds: float = CASE_SECONDS) -> Outcome:
    """Run ``biasleak ARGV`` in this process, bounded in time, capturing what it prints."""
    outcome = Outcome(list(argv))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with time_limit(seconds):
                    outcome.code = main(list(argv))
            except SystemExit as exc:  # argparse's own errors
                outcome.code = exc.code if isinstance(exc.code, int) else 2
            except CaseTimeout:
                outcome.hung = True
            except KeyboardInterrupt:  # the person running the tests pressed Ctrl-C
                raise
            except BaseException:
                outcome.crash = traceback.format_exc()
    for w in caught:  # shown on stderr, as the command line shows them
        err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
        outcome.warnings.append(f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})")
    outcome.out, outcome.err = out.getvalue(), err.getvalue()
    return outcome


def assert_no_traceback(outcome: Outcome) -> None:
    assert not outcome.hung, "hang:\n" + outcome.describe()
    assert outcome.crash is None, "traceback:\n" + outcome.describe()
    assert "Traceback" not in outcome.err, "traceback on stderr:\n" + outcome.describe()


def problem_lines(outcome: Outcome, source: str) -> list[str]:
    """The stderr lines that start with ``source`` (the file the problem is in)."""
    return [line for line in outcome.err.split("\n") if line.startswith(source)]


KeyPath = tuple[str | int, ...]
PROBLEM = re.compile(r"^(?P<file>.*?):(?P<line>\d+): (?P<path>[^:]*?): ")


def parse_path(dotted: str) -> KeyPath:
    if dotted == "(top level)":
        return ()
    return tuple(int(p) if p.isdigit() else p for p in dotted.split("."))


def related(a: KeyPath, b: KeyPath) -> bool:
    """Whether one key path lies on the other's way (a prefix of it, or equal)."""
    k = min(len(a), len(b))
    return [str(x) for x in a[:k]] == [str(x) for x in b[:k]]


def assert_scenario_error(
    outcome: Outcome,
    source: str,
    *,
    touched: Sequence[KeyPath] | None = None,
    lines: dict[KeyPath, int] | None = None,
    keyed: bool = True,
) -> None:
    """Exit 2, no traceback, and a problem ``SOURCE:LINE: key.path: message``.

    ``touched``: the key paths the case changed; one problem must name a path on the way to one
    of them. ``lines``: the line of every key path of the file, to check the line a problem
    names. ``keyed=False``: a problem of the text itself (not YAML), ``SOURCE[:LINE]: ...``.
    """
    assert_no_traceback(outcome)
    assert outcome.code == 2, "expected exit 2:\n" + outcome.describe()
    mine = problem_lines(outcome, source)
    assert mine, f"no problem names the file {source}:\n" + outcome.describe()
    if not keyed:
        return
    parsed = [(m, line) for line in mine if (m := PROBLEM.match(line))]
    assert parsed, "no problem names a line and a key path:\n" + outcome.describe()
    if touched is not None:
        # a changed discriminator (kind, dataset) makes its siblings wrong: the mapping is touched
        touched = [t[:-1] if t and t[-1] in ("kind", "dataset") else t for t in touched]
        near = [
            (m, line)
            for m, line in parsed
            if any(related(parse_path(m["path"]), t) for t in touched)
        ]
        assert near, f"no problem names a key on the way to {touched}:\n" + outcome.describe()
        parsed = near
    if lines is not None:
        for m, line in parsed:
            expected = line_in(lines, parse_path(m["path"]))
            if expected is not None:
                assert int(m["line"]) == expected, f"wrong line in {line!r} (key on {expected})"


def line_in(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of ``path`` or of its deepest part in ``lines`` (a printed ``0`` may be the
    index 0 or the key "0"); None when a part cannot be told apart."""
    found: KeyPath = ()
    for part in path:
        options = [(*found, part), (*found, str(part))]
        known = [o for o in dict.fromkeys(options) if o in lines]
        if len(known) != 1:
            break
        found = known[0]
    return lines.get(found)


def assert_correct_run(outcome: Outcome) -> None:
    """Exit 0, a JSON summary on stdout, and a log that replays to the same summary."""
    assert_no_traceback(outcome)
    assert outcome.code == 0, "expected a correct run:\n" + outcome.describe()
    numeric = [w for w in outcome.warnings if w.startswith("RuntimeWarning")]
    assert not numeric, "the run computed with inf or NaN:\n" + "\n".join(numeric)
    summary = json.loads(outcome.out)
    replayed = cli("replay", summary["log"], "--json")
    assert_no_traceback(replayed)
    assert replayed.code == 0, "the run's own log does not replay:\n" + replayed.describe()


# ================================================================================================
# Writing scenario files: YAML from plain data, with the line of every key


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _quoted(str(value))


def _quoted(text: str) -> str:
    """A double-quoted YAML scalar; characters YAML may not hold raw are escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif unicodedata.category(ch)[0] in "CZ" and ch != " ":
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def to_yaml(data: Any) -> tuple[str, dict[KeyPath, int]]:
    """Block-style YAML for ``data``, and the line (from 1) of every key and list item."""
    lines: list[str] = []
    where: dict[KeyPath, int] = {(): 1}

    def block(value: Any, indent: int, path: KeyPath) -> None:
        pad = " " * indent
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            here = (*path, key)
            start = len(lines)
            where[here] = start + 1
            nested = isinstance(item, dict | list) and len(item) > 0
            if isinstance(value, dict):
                head = f"{pad}{_scalar(key)}:"
                if nested:
                    lines.append(head)
                    block(item, indent + 2, here)
                else:
                    lines.append(f"{head} {_scalar(item)}")
            elif nested:  # compact form: the item's first line shares the dash
                block(item, indent + 2, here)
                lines[start] = f"{pad}- " + lines[start][indent + 2 :]
            else:
                lines.append(f"{pad}- {_scalar(item)}")

    if isinstance(data, dict | list) and data:
        block(data, 0, ())
    else:
        lines.append(_scalar(data))
    return "\n".join(lines) + "\n", where


BASE: dict[str, Any] = {
    "name": "hostile",
    "seed": 3,
    "horizon_days": 1,
    "data": {"dataset": "synthetic", "n": 60, "minority": 6},
    "developers": [
        {
            "id": "mallory",
            "organization": "acme",
            "strategy": {
                "kind": "compressed_sensing",
                "queries": 20,
                "perturbation": 0.1,
                "batch": 10,
            },
        },
        {
            "id": "alice",
            "organization": "acme",
            "strategy": {"kind": "honest_selection", "candidates": 3},
        },
    ],
    "compliance": {
        "metrics": ["sp", "abs_sp"],
        "policy": [
            {"kind": "rate_limit", "per_day": 50, "scope": "organization"},
            {"kind": "budget", "epsilon": 10.0, "scope": "organization"},
            {"kind": "noise", "mechanism": "laplace", "epsilon": 0.5},
        ],
    },
    "auditor": {"enabled": True, "every_hours": 12},
}
"""A small valid scenario (one attacker, one honest developer, the auditor): about 0.3 s a run."""


def leaf_paths(data: Any, path: KeyPath = ()) -> list[KeyPath]:
    """Every key path of ``data``, containers included (the top excluded)."""
    out: list[KeyPath] = []
    items = data.items() if isinstance(data, dict) else enumerate(data)
    for key, item in items:
        out.append((*path, key))
        if isinstance(item, dict | list):
            out.extend(leaf_paths(item, (*path, key)))
    return out


BASE_PATHS = leaf_paths(BASE)


def _mappings(data: Any, path: KeyPath = ()) -> list[KeyPath]:
    out = [path] if isinstance(data, dict) else []
    items = data.items() if isinstance(data, dict) else enumerate(data)
    for key, item in items:
        if isinstance(item, dict | list):
            out.extend(_mappings(item, (*path, key)))
    return out


MAPPING_PATHS = _mappings(BASE)


def get_at(data: Any, path: KeyPath) -> Any:
    for key in path:
        data = data[key]
    return data


def write(folder: Path, name: str, text: str | bytes) -> Path:
    p = folder / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8", newline="")
    return p


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="hostile-") as name:
        yield Path(name)


def run_file(folder: Path, scenario: Path, *extra: str) -> Outcome:
    return cli("run", str(scenario), "--json", "--log-dir", str(folder / "logs"), *extra)


# ================================================================================================
# Scenario files, hand-written


BASE_TEXT, BASE_LINES = to_yaml(BASE)


def _with(**changes: Any) -> str:
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        path = parse_path(dotted.replace("__", "."))
        parent = get_at(data, path[:-1])
        if value is _DELETE:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    return to_yaml(data)[0]


_DELETE = object()


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _laughs(levels: int, width: int) -> str:
    rows = ["a0: &a0 [lol]"]
    for k in range(1, levels):
        rows.append(f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * width)}]")
    return BASE_TEXT + "\n".join(rows) + "\n"


TABBED = BASE_TEXT.replace('\n    "organization"', '\n\t"organization"')
ALIASED = BASE_TEXT.replace(
    '"strategy":\n      "kind": "compressed_sensing"',
    '"strategy": &cs\n      "kind": "compressed_sensing"',
).replace(
    '"compliance":',
    "  - {id: eve, organization: other, strategy: *cs}\n"
    '  - {id: bob, organization: other, strategy: {<<: *cs, queries: 10}}\n"compliance":',
)

# (id, text, how it must end: "ok", "keyed" (line and key path) or "text" (not YAML), the key
# paths a keyed error must lie on the way to)
SCENARIO_CASES: list[tuple[str, str | bytes, str, list[KeyPath]]] = [
    ("valid", BASE_TEXT, "ok", []),
    ("crlf-line-ends", BASE_TEXT.replace("\n", "\r\n"), "ok", []),
    ("utf8-bom", "\ufeff" + BASE_TEXT, "ok", []),
    ("empty-file", "", "text", []),
    ("only-comments", "# nothing here\n", "text", []),
    ("document-marker-only", "---\n", "text", []),
    ("top-level-list", "- name: x\n- seed: 1\n", "text", []),
    ("top-level-number", "42\n", "text", []),
    ("top-level-null", "~\n", "text", []),
    ("two-documents", BASE_TEXT + "---\nname: second\n", "text", []),
    ("tab-indentation", TABBED, "text", []),
    ("invalid-utf8", BASE_TEXT.encode() + b"description: \xff\xfe\n", "text", []),
    ("nul-byte", BASE_TEXT + "description: a\x00b\n", "text", []),
    ("duplicate-top-key", BASE_TEXT + '"seed": 4\n', "text", []),
    ("duplicate-nested-key", BASE_TEXT.replace('"n": 60', '"n": 60, "n": 61'), "text", []),
    ("unclosed-flow", BASE_TEXT + "description: [unclosed\n", "text", []),
    ("python-object-tag", BASE_TEXT + "description: !!python/object:os.system ls\n", "text", []),
    ("binary-tag", BASE_TEXT + "description: !!binary aGVsbG8=\n", "text", []),
    ("set-tag", BASE_TEXT + "description: !!set {a, b}\n", "text", []),
    ("unknown-local-tag", BASE_TEXT + "description: !secret x\n", "text", []),
    ("mapping-as-key", BASE_TEXT + "? [a, b]\n: 1\n", "text", []),
    ("undefined-alias", BASE_TEXT + "description: *nowhere\n", "text", []),
    (
        "deep-nesting-1000",
        BASE_TEXT + f"description: {_nested(1000)}\n",
        "keyed",
        [("description",)],
    ),
    ("deep-nesting-100000", BASE_TEXT + f"description: {_nested(100000)}\n", "any", []),
    ("billion-laughs", _laughs(8, 10), "any", []),
    ("alias-reuse-is-fine", ALIASED, "ok", []),
    ("integer-key", BASE_TEXT + "1: one\n", "keyed", [(1,)]),
    ("null-key", BASE_TEXT + "null: x\n", "keyed", [("None",), ("null",)]),
    ("name-300-chars", _with(name="n" * 300), "any", []),
    ("name-unicode", _with(name="名前"), "keyed", [("name",)]),
    ("name-is-date", _with(name=dt.date(2024, 1, 1)), "keyed", [("name",)]),
    ("lone-surrogate-escape", BASE_TEXT + 'description: "\\ud800"\n', "any", []),
    ("horizon-1e308-with-auditor", _with(horizon_days=1e308), "keyed", [("horizon_days",)]),
    ("every-hours-1e-9", _with(auditor__every_hours=1e-9), "keyed", [("auditor",)]),
    (
        "candidates-1e6",
        _with(developers__1__strategy__candidates=1_000_000),
        "keyed",
        [("developers", 1)],
    ),
    (
        "sybil-identities-1e5",
        _with(
            developers__0__strategy={
                "kind": "sybil",
                "queries": 20,
                "batch": 10,
                "identities": 100_000,
            }
        ),
        "keyed",
        [("developers", 0)],
    ),
    ("queries-1e9", _with(developers__0__strategy__queries=10**9), "keyed", [("developers", 0)]),
    (
        "noise-epsilon-subnormal",
        _with(compliance__policy__2__epsilon=1e-320),
        "keyed",
        [("compliance",)],
    ),
    (
        "budget-epsilon-subnormal",
        _with(compliance__policy__1__epsilon=5e-324),
        "keyed",
        [("compliance",)],
    ),
    (
        "exact-with-epsilon",
        _with(compliance__policy__2={"kind": "noise", "mechanism": "exact", "epsilon": 1.0}),
        "keyed",
        [("compliance",)],
    ),
    ("seed-2**200", _with(seed=2**200), "any", []),
    ("max-models-1e12", _with(compliance__max_models=10**12), "any", []),
    ("answer-hours-1e308", _with(compliance__answer_hours=1e308), "any", []),
    ("grid-unknown-key", _with(grid={"data.nn": [60, 80]}), "keyed", [("grid",)]),
    ("grid-bad-value", _with(grid={"data.n": [60, -5]}), "keyed", [("grid",)]),
    ("grid-integer-as-1e3", _with(grid={"data.n": [1e3]}), "keyed", [("grid",)]),
]


@pytest.mark.parametrize(
    ("text", "ending", "touched"),
    [pytest.param(t, e, k, id=i) for i, t, e, k in SCENARIO_CASES],
)
def test_scenario_file_hand_written(
    text: str | bytes, ending: str, touched: list[KeyPath], tmp_path: Path
) -> None:
    scenario = write(tmp_path, "case.yaml", text)
    source = str(scenario)
    checked = cli("validate", source)
    assert_no_traceback(checked)
    outcome = run_file(tmp_path, scenario)
    if ending == "ok":
        assert checked.code == 0, checked.describe()
        assert_correct_run(outcome)
    elif ending == "text":
        assert_scenario_error(checked, source, keyed=False)
        assert_scenario_error(outcome, source, keyed=False)
    elif ending == "keyed":
        assert_scenario_error(checked, source, touched=touched)
        assert_scenario_error(outcome, source, touched=touched)
    else:  # either a correct run or a clear error, agreed on by validate and run
        if outcome.code == 0:
            assert checked.code == 0, checked.describe()
            assert_correct_run(outcome)
        else:
            assert_scenario_error(checked, source, keyed=False)
            assert_scenario_error(outcome, source, keyed=False)


def test_audit_draw_with_an_empty_group_is_refused_at_load(tmp_path: Path) -> None:
    """The finding: Adult with n = 20 and seed 0 draws no minority member; a crash at run time."""
    text = _with(data={"dataset": "adult", "protected": "race", "n": 20}, seed=0)
    scenario = write(tmp_path, "case.yaml", text)
    outcome = run_file(tmp_path, scenario)
    if outcome.code == 0:  # redrawn: then it must be a correct run
        assert_correct_run(outcome)
    else:
        assert_scenario_error(outcome, str(scenario), touched=[("data",), ("seed",)])


# ================================================================================================
# Scenario files, generated: a valid file broken in one to three places

_REAL_NUMBERS = st.sampled_from(
    [0, -1, -0.0, 0.5, 1e-320, 5e-324, 1e-9, 1e9, 1e308, -1e308, 2**63, -(2**63), 10**30, 1e3]
)
_TEXTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12
) | st.sampled_from(["no", "yes", "on", "off", "1e3", ".inf", "~", "", " ", "x" * 5000])


def _deep(depth: int) -> Any:
    value: Any = []
    for k in range(depth):
        value = [value] if k % 2 else {"k": value}
    return value


HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    _REAL_NUMBERS,
    _TEXTS,
    st.dates(),
    st.lists(st.integers(-3, 3) | _TEXTS, max_size=4),
    st.dictionaries(_TEXTS, st.integers(-3, 3), max_size=3),
    st.integers(5, 40).map(_deep),
)
"""Wrong types, out-of-range, huge and tiny numbers, unicode, dates, containers, deep nesting."""

_WORDS = sorted(
    {*STRATEGIES, *MECHANISMS, *METRICS, "identity", "organization", "adult", "german", "csv"}
)


def near_values(original: Any) -> st.SearchStrategy[Any]:
    """Values of the original's own type, from the extremes of its range: valid-looking numbers
    that stress the run (huge counts, subnormal or huge rates) and other known words."""
    if isinstance(original, bool):
        return st.booleans()
    if isinstance(original, int):
        return st.integers(-2, 10**7) | st.sampled_from([0, 1, 2, 3, 10**9, 2**31])
    if isinstance(original, float):
        return st.floats(0.0, 1e308) | st.sampled_from([5e-324, 1e-320, 1e-9, 1e9, 1e308])
    if isinstance(original, str):
        return st.sampled_from(_WORDS)
    return HOSTILE_VALUES


_KEYS = _TEXTS.filter(lambda k: k != "") | st.sampled_from(
    ["horizon_day", "seeds", "Name", "dataset ", "kind", "epsilon", "__class__", "0"]
)


@st.composite
def broken_scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], list[KeyPath]]:
    data = copy.deepcopy(BASE)
    touched: list[KeyPath] = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["replace", "replace", "add", "delete"]))
        if op == "replace":
            path = draw(st.sampled_from(leaf_paths(data)))
            parent = get_at(data, path[:-1])
            near = near_values(parent[path[-1]])
            parent[path[-1]] = draw(st.one_of(near, near, HOSTILE_VALUES))
        elif op == "add":
            maps = [p for p in _mappings(data) if isinstance(get_at(data, p), dict)]
            parent = draw(st.sampled_from(maps))
            key = draw(_KEYS)
            get_at(data, parent)[key] = draw(HOSTILE_VALUES)
            path = (*parent, key)
        else:
            keys = [p for p in leaf_paths(data) if isinstance(get_at(data, p[:-1]), dict)]
            path = draw(st.sampled_from(keys))
            del get_at(data, path[:-1])[path[-1]]
        touched.append(path)
    return data, touched


@settings(PROPERTY, max_examples=70)
@given(case=broken_scenarios())
def test_scenario_file_generated(case: tuple[dict[str, Any], list[KeyPath]]) -> None:
    data, touched = case
    text, lines = to_yaml(data)
    with workdir() as folder:
        scenario = write(folder, "case.yaml", text)
        outcome = run_file(folder, scenario)
        source = str(scenario)
        if outcome.code == 0:
            assert_correct_run(outcome)
        elif re.search(rf"^{re.escape(source)}:\d+: not valid YAML: ", outcome.err, re.M):
            assert_scenario_error(outcome, source, keyed=False)  # e.g. a key over 1024 characters
        else:
            assert_scenario_error(outcome, source, touched=touched, lines=lines)


# ================================================================================================
# --set overrides

OVERRIDE_CASES: list[tuple[str, str, str]] = [
    # (id, override, how it must end: "ok", "keyed" (file, line, key) or "set" (names --set))
    ("n-1e3", "data.n=1e3", "either"),
    ("n-float", "data.n=60.0", "either"),
    ("n-inf", "data.n=.inf", "keyed"),
    ("n-nan", "data.n=.nan", "keyed"),
    ("n-no", "data.n=no", "keyed"),
    ("n-empty", "data.n=", "keyed"),
    ("n-negative", "data.n=-60", "keyed"),
    ("n-octal-like", "data.n=060", "ok"),
    ("n-hex", "data.n=0x3c", "ok"),
    ("n-underscore", "data.n=6_0", "keyed"),
    ("n-huge", "data.n=" + "9" * 400, "keyed"),
    ("n-list", "data.n=[60]", "keyed"),
    ("n-mapping", "data.n={a: 1}", "keyed"),
    ("n-python-tag", "data.n=!!python/object:os.system ls", "either"),
    ("n-alias", "data.n=*a", "keyed"),
    ("n-unclosed", "data.n={unclosed", "keyed"),
    ("n-two-lines", "data.n=60\n61", "keyed"),
    ("name-no", "name=no", "ok"),
    ("name-date", "name=2024-01-01", "keyed"),
    ("name-null", "name=~", "keyed"),
    ("horizon-inf", "horizon_days=.inf", "keyed"),
    ("horizon-1e308", "horizon_days=1e308", "keyed"),
    ("epsilon-subnormal", "compliance.policy.2.epsilon=1e-320", "keyed"),
    ("epsilon-negative-inf", "compliance.policy.2.epsilon=-.inf", "keyed"),
    ("enabled-yes", "auditor.enabled=yes", "either"),
    ("unknown-key", "data.nn=60", "keyed"),
    ("index-out-of-range", "developers.5.id=x", "set"),
    ("negative-index", "developers.-1.id=x", "set"),
    ("word-index", "developers.first.id=x", "set"),
    ("through-a-value", "name.first=x", "set"),
    ("no-equals", "data.n", "set"),
    ("empty-path", "=3", "set"),
    ("only-dots", "...=3", "set"),
]


@pytest.mark.parametrize(
    ("override", "ending"), [pytest.param(o, e, id=i) for i, o, e in OVERRIDE_CASES]
)
def test_override_hand_written(override: str, ending: str, tmp_path: Path) -> None:
    scenario = write(tmp_path, "case.yaml", BASE_TEXT)
    outcome = run_file(tmp_path, scenario, "--set", override)
    check_override(outcome, str(scenario), override, ending)


def check_override(outcome: Outcome, source: str, override: str, ending: str) -> None:
    parts = [p for p in override.partition("=")[0].strip().split(".") if p]
    touched = [parse_path(".".join(parts))] if parts else [()]
    if ending == "ok" or (ending == "either" and outcome.code == 0):
        assert_correct_run(outcome)
        return
    assert_no_traceback(outcome)
    assert outcome.code == 2, "expected exit 2:\n" + outcome.describe()
    if ending == "set" or (ending == "either" and "--set" in outcome.err):
        assert any(line.startswith("--set") for line in outcome.err.split("\n")), (
            "no problem names the override:\n" + outcome.describe()
        )
        return
    assert_scenario_error(outcome, source, touched=touched, lines=BASE_LINES)


_OVERRIDE_VALUES = st.sampled_from(
    [
        "1e3",
        ".inf",
        "-.inf",
        ".nan",
        "no",
        "yes",
        "~",
        "",
        "[",
        "{x",
        "[1, 2]",
        "{a: 1}",
        "017",
        "0o17",
        "0x1F",
        "1_000",
        "2024-01-01",
        "1e400",
        "-0",
        "'q'",
        '"q"',
        "a: b",
        "- 1",
        "true",
        "!!str 5",
        "!!int x",
        "&a 5",
        "*a",
        "%YAML 1.1",
        "名前",
        "x" * 3000,
        "1e-320",
        "-1",
        "0",
    ]
) | HOSTILE_VALUES.map(lambda v: to_yaml(v)[0].strip() if not isinstance(v, dict | list) else "[]")


@st.composite
def overrides(draw: st.DrawFn) -> str:
    if draw(st.booleans()):  # a key of the file, set to a value of its own type
        known = draw(st.sampled_from(BASE_PATHS))
        value = draw(near_values(get_at(BASE, known)))
        text = to_yaml(value)[0].strip() if not isinstance(value, dict | list) else "[]"
        return f"{'.'.join(map(str, known))}={text}"
    path = draw(
        st.sampled_from([".".join(map(str, p)) for p in BASE_PATHS])
        | st.builds(
            lambda p, k: f"{'.'.join(map(str, p))}.{k}" if p else k,
            st.sampled_from(MAPPING_PATHS),
            _KEYS,
        )
    )
    return f"{path}={draw(_OVERRIDE_VALUES)}"


@settings(PROPERTY, max_examples=45)
@given(override=overrides())
def test_override_generated(override: str) -> None:
    with workdir() as folder:
        scenario = write(folder, "case.yaml", BASE_TEXT)
        outcome = run_file(folder, scenario, "--set", override)
        check_override(outcome, str(scenario), override, "either")


# ================================================================================================
# CSV files

CSV_HEADER = ["label", "group", "age", "job"]


def csv_rows(count: int, minority: int, seed: int) -> list[list[str]]:
    """A clean table: 0/1 labels, groups A (advantaged) and B, a numeric and a text feature."""
    rng = np.random.default_rng(seed)
    groups = ["B"] * minority + ["A"] * (count - minority)
    rng.shuffle(groups)
    rows = []
    for g in groups:
        age = int(rng.integers(18, 80))
        label = int(rng.random() < (0.6 if g == "A" else 0.4))
        rows.append([str(label), g, str(age), str(rng.choice(["clerk", "nurse", "smith"]))])
    return rows


def csv_text(header: list[str], rows: list[list[str]], end: str = "\n") -> str:
    def field_(value: str) -> str:
        return f'"{value}"' if any(c in value for c in ',"\n') else value

    return "".join(",".join(field_(v) for v in row) + end for row in [header, *rows])


CSV_DEFECTS = {
    # defect -> how a case must end: "ok", "either" (ok or an error naming the CSV file), "file"
    # (an error naming the CSV file), "cell" (an error naming the CSV file, the row, the column)
    "none": "ok",
    "crlf": "ok",
    "bom": "either",
    "padded": "either",
    "quoted-newline": "either",
    "duplicate-header": "either",
    "huge-field": "either",
    "missing-label-column": "file",
    "missing-protected-column": "file",
    "one-group": "file",
    "labels-yes-no": "file",
    "header-only": "file",
    "empty-file": "file",
    "few-rows": "file",
    "latin1-bytes": "file",
    "nan-feature": "file",
    "nul-byte": "either",
    "third-protected-value": "cell",
    "empty-feature": "cell",
    "empty-label": "cell",
    "empty-protected": "cell",
    "nan-label": "cell",
    "ragged-long": "cell",
    "ragged-short": "cell",
    "tiny-minority": "either",
}
"""Every defect a generated or hand-written CSV case can have."""

COLUMN_OF = {
    "third-protected-value": "group",
    "empty-feature": "age",
    "empty-label": "label",
    "empty-protected": "group",
    "nan-label": "label",
}


@dataclass
class CsvCase:
    defect: str
    body: bytes
    row: int | None = None
    """The file line (header = 1) of the defect, for cell defects."""
    column: str | None = None


def make_csv(defect: str, count: int, minority: int, seed: int, at: int) -> CsvCase:
    """A CSV file of ``count`` rows with one ``defect`` at data row ``at`` (0-based)."""
    header = list(CSV_HEADER)
    rows = csv_rows(count, minority if defect != "tiny-minority" else 2, seed)
    at = at % count
    end = "\n"
    column = COLUMN_OF.get(defect)
    if column is not None:
        value = {"third-protected-value": "C", "nan-label": "NaN"}.get(defect, "")
        rows[at][header.index(column)] = value
    elif defect == "crlf":
        end = "\r\n"
    elif defect == "padded":
        rows = [[f" {v} " for v in r] for r in rows]
    elif defect == "quoted-newline":
        rows[at][3] = "night\nshift"
    elif defect == "duplicate-header":
        header[3] = "age"
    elif defect == "huge-field":
        rows[at][3] = "x" * 200_000
    elif defect == "missing-label-column":
        header[0] = "labels"
    elif defect == "missing-protected-column":
        header[1] = "grp"
    elif defect == "one-group":
        rows = [[r[0], "A", r[2], r[3]] for r in rows]
    elif defect == "labels-yes-no":
        rows = [["yes" if r[0] == "1" else "no", *r[1:]] for r in rows]
    elif defect == "header-only":
        rows = []
    elif defect == "few-rows":
        rows = rows[:2] + [r for r in rows if r[1] == "B"][:2]
    elif defect == "nan-feature":
        rows[at][2] = "nan"
    elif defect == "ragged-long":
        rows[at] = [*rows[at], "extra"]
        column = "job"
    elif defect == "ragged-short":
        rows[at] = rows[at][:3]
        column = "job"
    text = "" if defect == "empty-file" else csv_text(header, rows, end)
    body = text.encode()
    if defect == "bom":
        body = b"\xef\xbb\xbf" + body
    elif defect == "latin1-bytes":
        body = body.replace(b"nurse", b"nurs\xe9", 1) if b"nurse" in body else body + b"\xe9\n"
    elif defect == "nul-byte":
        body = body.replace(b"clerk", b"cl\x00rk", 1) if b"clerk" in body else body + b"\x00\n"
    row = at + 2 if COLUMN_OF.get(defect) or defect.startswith("ragged") else None
    return CsvCase(defect, body, row, column)


def csv_scenario(csv_path: Path) -> str:
    data = copy.deepcopy(BASE)
    data["data"] = {
        "dataset": "csv",
        "path": str(csv_path),
        "label": "label",
        "protected": "group",
        "advantaged": "A",
    }
    data["developers"] = data["developers"][:1]
    data["auditor"] = {"enabled": False}
    return to_yaml(data)[0]


def check_csv(case: CsvCase) -> None:
    ending = CSV_DEFECTS[case.defect]
    with workdir() as folder:
        table = write(folder, f"table-{case.defect}.csv", case.body)
        scenario = write(folder, "case.yaml", csv_scenario(table))
        outcome = run_file(folder, scenario)
        checked = cli("validate", str(scenario))
        if ending == "ok" or (ending == "either" and outcome.code == 0):
            assert_correct_run(outcome)
            assert_no_traceback(checked)
            assert checked.code == 0, checked.describe()
            return
        for result in (outcome, checked):  # validate reads the CSV file as a run would
            assert_scenario_error(result, str(scenario), touched=[("data",)])
            about = [line for line in result.err.split("\n") if table.name in line]
            assert about, f"no problem names the CSV file {table.name}:\n" + result.describe()
            if ending == "cell":
                where = re.compile(rf"\b(?:line|row)\s*{case.row}\b|\brow\s*{case.row - 1}\b")
                assert any(where.search(line) and case.column in line for line in about), (
                    f"no problem names row {case.row} and column {case.column!r}:\n"
                    + result.describe()
                )


@pytest.mark.parametrize("defect", list(CSV_DEFECTS))
def test_csv_hand_written(defect: str) -> None:
    check_csv(make_csv(defect, count=60, minority=20, seed=1, at=7))


@settings(PROPERTY, max_examples=30)
@given(
    defect=st.sampled_from(list(CSV_DEFECTS)),
    count=st.integers(30, 90),
    share=st.floats(0.3, 0.5),
    seed=st.integers(0, 2**16),
    at=st.integers(0, 10**6),
)
def test_csv_generated(defect: str, count: int, share: float, seed: int, at: int) -> None:
    check_csv(make_csv(defect, count, int(count * share), seed, at))


# ================================================================================================
# Query payloads handed to the policy

N = 60
_RNG = np.random.default_rng(2024)
A = np.zeros(N, dtype=np.int8)
A[_RNG.choice(N, size=20, replace=False)] = 1
Y = (_RNG.random(N) < 0.5).astype(np.int8)
Y[:2] = (0, 1)
AUDIT = AuditSet.from_arrays(A, Y)
SENSITIVE = ("sp", "abs_sp", "eo", "abs_eo")

POLICIES: dict[str, Policy] = {
    "exact": Policy(metrics=("sp", "abs_sp", "eo", "abs_eo", "eodds", "pp")),
    "laplace": Policy(SENSITIVE, (Noise(mechanism="laplace", epsilon=1.0),)),
    "conceal-budget": Policy(
        SENSITIVE,
        (Budget(epsilon=1e6), Noise(mechanism="attribute_conceal", epsilon=0.5)),
    ),
    "guarded": Policy(
        SENSITIVE,
        (RateLimit(per_day=10**6), MinSupport(k=1), NearDuplicate(threshold=0.01), Cache()),
    ),
    "cap-3": Policy(SENSITIVE, max_models=3),
}


@dataclass
class Payload:
    value: Any
    readable: bool
    """Whether the payload is a well-formed query of m models (numbers in [0, 1], n columns)."""
    models: int = 1
    rows: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)


def ask(policy: Policy, payload: Any, metric: str = "sp") -> Decision:
    request = Request("q1", "mallory", "acme", metric, payload)
    with time_limit():
        return decide(policy, request, AUDIT, PolicyState(), now=1.0, rng=np.random.default_rng(0))


def check_query(policy_name: str, payload: Payload, metric: str = "sp") -> None:
    policy = POLICIES[policy_name]
    try:
        d = ask(policy, payload.value, metric)
    except CaseTimeout:
        pytest.fail(f"decide hung on {payload.notes}")
    except Exception:  # the whole point: nothing may escape
        pytest.fail(f"decide raised on {payload.notes}: {traceback.format_exc()[-2000:]}")
    assert isinstance(d, Decision)
    if not d.answered:
        assert d.reason in REFUSAL_REASONS, (d.reason, payload.notes)
        assert d.values is None and d.epsilon_charged == 0.0
    allowed = isinstance(metric, str) and metric in policy.metrics
    too_many = payload.models > policy.max_models
    if not payload.readable or too_many:
        assert not d.answered, f"answered an unreadable query {payload.notes}"
        assert d.reason in ("invalid", "metric_not_allowed"), (d.reason, payload.notes)
        return
    if not allowed:
        assert (d.answered, d.reason) == (False, "metric_not_allowed"), payload.notes
        return
    if d.reason == "invalid":  # only a metric undefined for these predictions (pp on all zeros)
        assert "undefined" in d.detail, f"refused a readable query: {d.detail} {payload.notes}"
        return
    if policy_name in ("exact", "laplace"):
        assert d.answered, (d.reason, d.detail, payload.notes)
    if d.answered:
        values = np.asarray(d.values)
        assert values.shape[0] == payload.models and np.all(np.isfinite(values)), payload.notes
        if policy_name == "exact" and metric == "sp" and payload.rows is not None:
            h = np.atleast_2d(payload.rows.astype(np.float64))
            gap = h[:, A == 1].mean(axis=1) - h[:, A == 0].mean(axis=1)
            np.testing.assert_allclose(values, gap, rtol=0, atol=1e-12)


def _grid(m: int) -> np.ndarray:
    return np.random.default_rng(m).random((m, N))


class _Lying:
    """An array-like whose conversion raises (a hostile object, not a container)."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("no")


class _Longest(list):  # type: ignore[type-arg]
    """A list that claims a length it does not have."""

    def __len__(self) -> int:
        return N


_big_endian = _grid(2).astype(">f8")
_read_only = _grid(2)
_read_only.flags.writeable = False

QUERY_CASES: list[tuple[str, Any, bool, int]] = [
    # (id, payload, readable, models)
    ("one-model-list", _grid(1)[0].tolist(), True, 1),
    ("matrix-list", _grid(3).tolist(), True, 3),
    ("tuple-of-tuples", tuple(map(tuple, _grid(2))), True, 2),
    ("bool-array", _grid(2) > 0.5, True, 2),
    ("int8-zeros-ones", (_grid(2) > 0.5).astype(np.int8), True, 2),
    ("uint64", (_grid(2) > 0.5).astype(np.uint64), True, 2),
    ("float16", _grid(2).astype(np.float16), True, 2),
    ("float32", _grid(2).astype(np.float32), True, 2),
    ("longdouble", _grid(2).astype(np.longdouble), True, 2),
    ("big-endian", _big_endian, True, 2),
    ("fortran-order", np.asfortranarray(_grid(3)), True, 3),
    ("strided-view", np.random.default_rng(1).random((2, 2 * N))[:, ::2], True, 2),
    ("read-only", _read_only, True, 2),
    ("negative-zero", np.full(N, -0.0), True, 1),
    ("subnormal", np.full(N, 5e-324), True, 1),
    ("all-ones", np.ones((2, N)), True, 2),
    ("cap-exactly", _grid(10_000), True, 10_000),
    ("cap-plus-one", _grid(10_001), False, 10_001),
    ("ragged", [[0.5] * N, [0.5] * (N - 1)], False, 2),
    ("ragged-deep", [[0.5] * N, [[0.5]] * N], False, 2),
    ("nan", np.where(np.arange(N) == 5, np.nan, 0.5), False, 1),
    ("inf", np.where(np.arange(N) == 5, np.inf, 0.5), False, 1),
    ("minus-inf", np.where(np.arange(N) == 5, -np.inf, 0.5), False, 1),
    ("negative", np.where(np.arange(N) == 5, -1e-12, 0.5), False, 1),
    ("above-one", np.where(np.arange(N) == 5, 1 + 1e-12, 0.5), False, 1),
    ("huge", np.full(N, 1e308), False, 1),
    ("wrong-n-short", np.full(N - 1, 0.5), False, 1),
    ("wrong-n-long", np.full((2, N + 1), 0.5), False, 2),
    ("empty", [], False, 1),
    ("empty-rows", np.empty((0, N)), False, 0),
    ("no-columns", np.empty((2, 0)), False, 2),
    ("three-d", np.full((2, 3, N), 0.5), False, 2),
    ("scalar", 0.5, False, 1),
    ("string", "0.5," * N, False, 1),
    ("strings", ["0.5"] * N, False, 1),
    ("bytes", b"\x00" * N, False, 1),
    ("none", None, False, 1),
    ("dict", {"h": [0.5] * N}, False, 1),
    ("object-array", np.array([0.5] * N, dtype=object), False, 1),
    ("fractions", [Fraction(1, 2)] * N, False, 1),
    ("complex", np.full(N, 0.5 + 0j), False, 1),
    ("huge-ints", [10**30] * N, False, 1),
    ("datetime", np.array(["2024-01-01"] * N, dtype="datetime64[D]"), False, 1),
    ("conversion-raises", _Lying(), False, 1),
    ("lying-length", _Longest([0.5]), False, 1),
]


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize(
    ("payload", "readable", "models"),
    [pytest.param(p, r, m, id=i) for i, p, r, m in QUERY_CASES],
)
def test_query_hand_written(policy: str, payload: Any, readable: bool, models: int) -> None:
    rows = None
    if readable:
        rows = np.asarray(payload, dtype=np.float64)
    check_query(policy, Payload(payload, readable, models, rows, [f"{type(payload).__name__}"]))


@pytest.mark.parametrize(
    "metric", [None, 7, "", "SP", "sp ", "sp\x00", ["sp"], ("sp",), "eodds", np.array(["sp", "eo"])]
)
def test_query_hostile_metric(metric: Any) -> None:
    check_query("laplace", Payload(_grid(1), True, 1, _grid(1), [repr(metric)]), metric)


_CORRUPTIONS = [
    "none",
    "nan",
    "inf",
    "-inf",
    "negative",
    "above",
    "wrong-n",
    "ragged",
    "string",
    "none-cell",
    "object",
    "three-d",
    "complex",
    "as-list",
]


@st.composite
def payloads(draw: st.DrawFn) -> Payload:
    m = draw(st.integers(1, 6))
    flat = draw(st.booleans()) and m == 1
    values = np.array(
        draw(st.lists(st.floats(0.0, 1.0), min_size=m * N, max_size=m * N)), dtype=np.float64
    ).reshape(m, N)
    dtype = draw(st.sampled_from(["float64", "float32", "float16", "bool", "int8"]))
    if dtype == "bool":
        values = values > 0.5
    elif dtype == "int8":
        values = (values > 0.5).astype(np.int8)
    else:
        values = values.astype(dtype)
    rows = values.astype(np.float64)
    corruption = draw(st.sampled_from(_CORRUPTIONS))
    i, j = draw(st.integers(0, m - 1)), draw(st.integers(0, N - 1))
    out: Any = values.astype(np.float64) if corruption != "none" else values
    readable = corruption in ("none", "as-list")
    bad = {
        "nan": math.nan,
        "inf": math.inf,
        "-inf": -math.inf,
        "negative": -draw(st.floats(5e-324, 1e308)),
        "above": 1.0 + draw(st.floats(1e-15, 1e308)),
    }
    if corruption in bad:
        out[i, j] = bad[corruption]
    elif corruption == "wrong-n":
        width = draw(st.integers(0, 2 * N).filter(lambda w: w != N))
        out = np.resize(out, (m, width))
    elif corruption == "ragged":
        out = out.tolist()
        out[i] = out[i][: draw(st.integers(0, N - 1))]
        if m == 1:
            out.append([0.5] * N)
    elif corruption in ("string", "none-cell"):
        out = out.tolist()
        out[i][j] = "0.5" if corruption == "string" else None
    elif corruption == "object":
        out = out.astype(object)
    elif corruption == "three-d":
        out = out[None, :, :] if draw(st.booleans()) else np.stack([out, out], axis=-1)
    elif corruption == "complex":
        out = out.astype(np.complex128)
    elif corruption == "as-list":
        out = values.tolist()
    if flat and corruption not in ("ragged", "three-d"):
        out = out[0]  # a single model as a vector of shape (n,)
    models = len(out) if isinstance(out, list) and out and isinstance(out[0], list) else m
    return Payload(out, readable, models, rows if readable else None, [corruption, dtype, m])


@settings(PROPERTY, max_examples=140)
@given(
    policy=st.sampled_from(list(POLICIES)),
    payload=payloads(),
    metric=st.sampled_from(["sp", "abs_sp", "eo", "abs_eo", "eodds", "pp", "xx"]),
)
def test_query_generated(policy: str, payload: Payload, metric: str) -> None:
    check_query(policy, payload, metric)


# ================================================================================================
# Run logs handed to replay


@pytest.fixture(scope="module")
def source_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """The log of one small run (its lines, newline included) and the folder it lies in."""
    folder = tmp_path_factory.mktemp("source-log")
    scenario = write(folder, "source.yaml", BASE_TEXT)
    outcome = run_file(folder, scenario)
    assert_correct_run(outcome)
    log = Path(json.loads(outcome.out)["log"])
    return log, log.read_bytes().splitlines(keepends=True)


def replay(folder: Path, body: bytes, source: Path, name: str = "run.jsonl") -> tuple[str, Outcome]:
    for side in source.parent.glob(source.stem + ".*"):  # the arrays beside the log
        if side.suffix != ".jsonl":
            (folder / (Path(name).stem + side.suffix)).write_bytes(side.read_bytes())
    path = write(folder, name, body)
    return str(path), cli("replay", str(path))


def check_replay(path: str, outcome: Outcome, ending: str, line: int | None = None) -> None:
    """``ok``: exit 0. ``truncated``: non-zero, says "truncated". ``line``: exit 2 naming the
    line. ``error``: exit 1 or 2. ``any``: any of these. Non-zero always names the file."""
    assert_no_traceback(outcome)
    assert outcome.code in (0, 1, 2), outcome.describe()
    if ending == "ok":
        assert outcome.code == 0, outcome.describe()
    if outcome.code == 0:
        assert ending in ("ok", "any"), "exit 0 on a broken log:\n" + outcome.describe()
        return
    assert path in outcome.err, "the problem does not name the log file:\n" + outcome.describe()
    if ending == "truncated":
        assert "truncated" in outcome.err, outcome.describe()
    if ending == "line":
        assert outcome.code == 2, outcome.describe()
        where = re.compile(rf"\bline {line}\b|{re.escape(path)}:{line}\b")
        assert where.search(outcome.err), f"line {line} not named:\n" + outcome.describe()


def _replay_cases() -> list[tuple[str, Callable[[list[bytes]], bytes], str, int | None]]:
    def edit_json(index: int, change: Callable[[dict[str, Any]], Any]) -> Callable[..., bytes]:
        def apply(lines: list[bytes]) -> bytes:
            lines = list(lines)
            record = json.loads(lines[index])
            lines[index] = json.dumps(change(record)).encode() + b"\n"
            return b"".join(lines)

        return apply

    def keep(lines: list[bytes]) -> bytes:
        return b"".join(lines)

    def rebuild(parts: Callable[[list[bytes]], list[bytes]]) -> Callable[..., bytes]:
        return lambda lines: b"".join(parts(list(lines)))

    return [
        ("unchanged", keep, "ok", None),
        ("empty-file", lambda lines: b"", "error", None),
        ("blank-line-file", lambda lines: b"\n", "line", 1),
        ("header-only", rebuild(lambda ls: ls[:1]), "truncated", None),
        ("header-and-summary", rebuild(lambda ls: [ls[0], ls[-1]]), "error", None),
        ("no-header", rebuild(lambda ls: ls[1:]), "error", None),
        ("no-summary", rebuild(lambda ls: ls[:-1]), "truncated", None),
        ("no-final-newline", lambda ls: b"".join(ls)[:-1], "truncated", None),
        ("cut-mid-line-3", rebuild(lambda ls: [*ls[:2], ls[2][:10]]), "truncated", None),
        ("json-array-line-2", rebuild(lambda ls: [ls[0], b"[1, 2]\n", *ls[2:]]), "line", 2),
        ("json-number-line-2", rebuild(lambda ls: [ls[0], b"5\n", *ls[2:]]), "line", 2),
        ("json-null-line-3", rebuild(lambda ls: [*ls[:2], b"null\n", *ls[3:]]), "line", 3),
        ("corrupt-line-4", rebuild(lambda ls: [*ls[:3], ls[3][:-5] + b"\n", *ls[4:]]), "line", 4),
        ("not-utf8-line-2", rebuild(lambda ls: [ls[0], b"\xff\xfe\n", *ls[2:]]), "line", 2),
        (
            "whole-log-as-array",
            lambda ls: b"[" + b",".join(x.strip() for x in ls) + b"]\n",
            "error",
            None,
        ),
        ("header-event-number", edit_json(0, lambda r: {**r, "event": 5}), "error", None),
        ("header-developers-text", edit_json(0, lambda r: {**r, "developers": "x"}), "error", None),
        ("summary-is-list", edit_json(-1, lambda r: {**r, "summary": [1]}), "error", None),
        ("line-2-sent-is-text", edit_json(1, lambda r: {**r, "models": "many"}), "any", None),
        ("binary-garbage", lambda ls: bytes(range(256)) * 4, "error", None),
    ]


REPLAY_CASES = _replay_cases()


@pytest.mark.parametrize(
    ("make", "ending", "line"), [pytest.param(m, e, k, id=i) for i, m, e, k in REPLAY_CASES]
)
def test_replay_hand_written(
    make: Callable[[list[bytes]], bytes],
    ending: str,
    line: int | None,
    source_log: tuple[Path, list[bytes]],
    tmp_path: Path,
) -> None:
    source, lines = source_log
    path, outcome = replay(tmp_path, make(lines), source)
    check_replay(path, outcome, ending, line)


def test_replay_of_a_folder_and_of_a_missing_file(tmp_path: Path) -> None:
    for path in (str(tmp_path), str(tmp_path / "missing.jsonl")):
        check_replay(path, cli("replay", path), "error")


_JSON_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def broken_logs(draw: st.DrawFn, lines: list[bytes]) -> tuple[bytes, str, int | None]:
    kind = draw(st.sampled_from(["truncate", "corrupt", "non-object", "retype", "drop", "dup"]))
    body = b"".join(lines)
    k = draw(st.integers(1, len(lines) - 1))  # 0-based index of a line after the header
    if kind == "truncate":
        cut = draw(st.integers(len(lines[0]), len(body) - 1))
        return body[:cut], "truncated", None
    if kind == "corrupt":
        cut = draw(st.integers(1, len(lines[k]) - 2))
        broken = [*lines[:k], lines[k][:cut] + b"\n", *lines[k + 1 :]]
        return b"".join(broken), "line", k + 1
    if kind == "non-object":
        value = draw(_JSON_JUNK.filter(lambda v: not isinstance(v, dict)))
        broken = [*lines[:k], json.dumps(value).encode() + b"\n", *lines[k + 1 :]]
        return b"".join(broken), "line", k + 1
    if kind == "retype":
        index = draw(st.integers(0, len(lines) - 1))
        record = json.loads(lines[index])
        key = draw(st.sampled_from(sorted(record)))
        record[key] = draw(_JSON_JUNK)
        broken = [*lines[:index], json.dumps(record).encode() + b"\n", *lines[index + 1 :]]
        return b"".join(broken), "any", None
    if kind == "drop":
        return b"".join([*lines[:k], *lines[k + 1 :]]), "any", None
    return b"".join([*lines[: k + 1], lines[k], *lines[k + 1 :]]), "any", None


@settings(PROPERTY, max_examples=60)
@given(data=st.data())
def test_replay_generated(data: st.DataObject, source_log: tuple[Path, list[bytes]]) -> None:
    source, lines = source_log
    body, ending, line = data.draw(broken_logs(lines))
    with workdir() as folder:
        path, outcome = replay(folder, body, source)
        check_replay(path, outcome, ending, line)
