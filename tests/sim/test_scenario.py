"""Scenario files: the shipped files, YAML 1.2 scalars, readable errors, overrides, schema, CLI.

Nothing here runs a simulation: every test parses or validates scenario text only.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import math
import re
from pathlib import Path

import pytest

from biasleak.agents.strategies import STRATEGIES
from biasleak.agents.strategies.compressed_sensing import CompressedSensingConfig
from biasleak.agents.strategies.honest import HonestSelectionConfig
from biasleak.mechanisms import policy as pol
from biasleak.sim.cli import main
from biasleak.sim.scenario import (
    STAGES,
    AdultData,
    Scenario,
    ScenarioError,
    apply_overrides,
    load_scenario,
    parse_scenario,
    read_document,
    read_yaml,
    scenario_hash,
    schema,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
QUICKSTART = SCENARIOS / "quickstart.yaml"

UNION_TAGS = (
    set(STRATEGIES)
    | set(STAGES)
    | {"adult", "german", "synthetic", "csv", "function-after", "function-before"}
)

MINIMAL = """\
name: quickstart
seed: 42
horizon_days: 30
data: {dataset: adult, protected: race, n: 1000}
model: {kind: logistic_regression}
developers:
  - id: mallory
    organization: acme
    strategy: {kind: compressed_sensing, queries: 400, perturbation: 0.1, batch: 50}
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 10}
compliance:
  metrics: [sp, abs_sp, eo, abs_eo]
  policy:
    - {kind: rate_limit, per_day: 100, scope: organization}
    - {kind: budget, epsilon: 10.0, scope: organization, composition: basic}
    - {kind: noise, mechanism: attribute_conceal, epsilon: 0.05}
auditor:
  enabled: true
  every_hours: 24
  detectors: [near_duplicate, low_support]
  on_alert: suspend_identity
"""

# A valid scenario that the error tests break one line at a time.
GOOD = """\
name: errors
seed: 1
horizon_days: 10
data: {dataset: adult, protected: race, n: 1000}
developers:
  - id: mallory
    organization: acme
    strategy:
      kind: compressed_sensing
      queries: 400
      box: false
  - id: alice
    organization: acme
    strategy: {kind: honest_selection, candidates: 10}
compliance:
  metrics: [sp]
  policy:
    - {kind: rate_limit, per_day: 100, scope: organization}
    - {kind: budget, epsilon: 10.0, scope: organization}
    - {kind: noise, mechanism: attribute_conceal, epsilon: 0.05}
auditor:
  enabled: true
  detectors: [near_duplicate, low_support]
"""


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _line_of(text: str, needle: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(lines) == 1, needle
    return lines[0]


def _write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path, overrides: list[str] | None = None) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, overrides=overrides)
    problems = info.value.problems
    assert problems
    assert str(info.value) == "\n".join(problems)
    return problems


def _split(problem: str, path: Path) -> tuple[int, str, str]:
    """(line, dotted key path, message) of a ``FILE:LINE: key.path: message`` problem."""
    assert "\n" not in problem, problem
    assert "Traceback" not in problem
    prefix = f"{path}:"
    assert problem.startswith(prefix), problem
    line, key_path, message = problem[len(prefix) :].split(": ", 2)
    assert line.isdigit(), problem
    return int(line), key_path, message


def test_every_shipped_scenario_validates() -> None:
    files = sorted(SCENARIOS.glob("*.yaml"))
    assert QUICKSTART in files
    assert len(files) >= 2
    failures = {}
    for path in files:
        try:
            scenario = load_scenario(path)
        except ScenarioError as err:
            failures[path.name] = err.problems
            continue
        assert isinstance(scenario, Scenario)
        scenario.compliance.build_policy()  # the stages make a valid Policy
    assert failures == {}


def test_quickstart_builds_rate_limit_budget_and_attribute_conceal() -> None:
    scenario = load_scenario(QUICKSTART)
    policy = scenario.compliance.build_policy()
    assert isinstance(policy, pol.Policy)
    assert policy.metrics == ("sp", "abs_sp", "eo", "abs_eo")
    assert policy.of_kind("rate_limit") == [pol.RateLimit(100, "organization")]
    assert policy.of_kind("budget") == [pol.Budget(10.0, 0.0, "organization", "basic")]
    assert policy.noise.mechanism == "attribute_conceal"
    assert policy.noise.epsilon == pytest.approx(0.05)
    assert policy.noise.per == "model"
    assert not policy.has("min_support") and not policy.has("near_duplicate")
    assert not policy.has("cache")
    assert [kind for kind, _ in policy.pipeline] == ["rate_limit", "budget", "noise"]
    assert scenario.auditor.enabled is True
    assert scenario.auditor.on_alert == "suspend_identity"


def test_issue_minimal_example_lands_where_expected() -> None:
    scenario = parse_scenario(MINIMAL)
    assert scenario.name == "quickstart"
    assert scenario.seed == 42
    assert scenario.horizon_days == 30.0
    assert isinstance(scenario.data, AdultData)
    assert (scenario.data.protected, scenario.data.n, scenario.data.seed) == ("race", 1000, None)
    assert scenario.model.kind == "logistic_regression"
    assert scenario.model.C == 1.0

    mallory, alice = scenario.developers
    assert (mallory.id, mallory.organization) == ("mallory", "acme")
    assert isinstance(mallory.strategy, CompressedSensingConfig)
    assert mallory.strategy.queries == 400
    assert mallory.strategy.perturbation == pytest.approx(0.1)
    assert mallory.strategy.batch == 50
    assert (alice.id, alice.organization) == ("alice", "acme")
    assert isinstance(alice.strategy, HonestSelectionConfig)
    assert alice.strategy.candidates == 10

    assert scenario.compliance.metrics == ["sp", "abs_sp", "eo", "abs_eo"]
    rate, budget, noise = scenario.compliance.policy
    assert isinstance(rate, pol.RateLimit)
    assert (rate.per_day, rate.scope) == (100, "organization")
    assert isinstance(budget, pol.Budget)
    assert (budget.epsilon, budget.scope, budget.composition) == (10.0, "organization", "basic")
    assert budget.delta == 0.0
    assert isinstance(noise, pol.Noise)
    assert (noise.mechanism, noise.epsilon) == ("attribute_conceal", pytest.approx(0.05))

    assert scenario.auditor.enabled is True
    assert scenario.auditor.every_hours == 24.0
    assert scenario.auditor.detectors == ["near_duplicate", "low_support"]
    assert scenario.auditor.on_alert == "suspend_identity"


def _yaml_1_1_trap_text() -> str:
    text = MINIMAL
    text = _edit(text, "horizon_days: 30", "horizon_days: 1e3")
    text = _edit(text, "seed: 42", "seed: 017")
    text = _edit(
        text,
        "    organization: acme\n    strategy: {kind: compressed",
        "    organization: no\n    strategy: {kind: compressed",
    )
    text = _edit(text, "batch: 50}", "batch: 50, box: no, probe: no}")
    text = _edit(text, "epsilon: 10.0, scope", "epsilon: .inf, scope")
    text = _edit(text, "  enabled: true", "  enabled: yes")
    return _edit(text, "epsilon: 0.05}", "epsilon: 0.05, delta: 1e-6}")


def test_yaml_1_1_reader_falls_into_the_traps() -> None:
    # what PyYAML's default (YAML 1.1) loader makes of the scalars of the next test
    yaml = importlib.import_module("yaml")  # PyYAML is in the test extra
    raw = yaml.safe_load(_yaml_1_1_trap_text())
    assert raw["horizon_days"] == "1e3"
    assert raw["seed"] == 15
    assert raw["developers"][0]["organization"] is False
    assert raw["auditor"]["enabled"] is True
    assert raw["compliance"]["policy"][2]["delta"] == "1e-6"


def test_yaml_1_2_scalars_where_pyyaml_uses_yaml_1_1() -> None:
    text = _yaml_1_1_trap_text()
    scenario = parse_scenario(text)
    assert scenario.horizon_days == 1000.0
    assert scenario.seed == 17
    assert scenario.developers[0].organization == "no"
    strategy = scenario.developers[0].strategy
    assert isinstance(strategy, CompressedSensingConfig)
    assert strategy.box is False
    assert strategy.probe is False  # default True: "no" really was read as false
    budget = scenario.compliance.policy[1]
    assert isinstance(budget, pol.Budget)
    assert budget.epsilon == math.inf
    noise = scenario.compliance.policy[2]
    assert isinstance(noise, pol.Noise)
    assert noise.delta == pytest.approx(1e-6)
    assert scenario.auditor.enabled is True


# (case id, old text, new text, dotted key path, lines the problem may point at, fragments)
ERROR_CASES = [
    (
        "unknown top-level key",
        "auditor:\n",
        "modle: {kind: logistic_regression}\nauditor:\n",
        "modle",
        ("modle:",),
        ["unknown key 'modle'", "did you mean 'model'", "'developers'", "'compliance'"],
    ),
    (
        "unknown strategy key",
        "      box: false\n",
        "      box: false\n      decodr: lp\n",
        "developers.0.strategy.decodr",
        ("decodr: lp",),
        ["unknown key 'decodr'", "'queries'", "'perturbation'", "'batch'", "'box'"],
    ),
    (
        "unknown strategy kind",
        "kind: compressed_sensing",
        "kind: compresed_sensing",
        "developers.0.strategy.kind",
        ("compresed_sensing",),
        [
            "'compresed_sensing'",
            "did you mean 'compressed_sensing'",
            "'honest_selection'",
        ],
    ),
    (
        "unknown policy stage kind",
        "kind: rate_limit,",
        "kind: ratelimit,",
        "compliance.policy.0.kind",
        ("ratelimit",),
        ["'ratelimit'", "did you mean 'rate_limit'", "'min_support'", "'near_duplicate'"],
    ),
    (
        "wrong type",
        "queries: 400",
        "queries: many",
        "developers.0.strategy.queries",
        ("queries: many",),
        ["'many'", "integer"],
    ),
    (
        "noise epsilon zero",
        "epsilon: 0.05}",
        "epsilon: 0}",
        "compliance.policy.2.epsilon",
        ("epsilon: 0}",),
        ["greater than 0", "received 0"],
    ),
    (
        "budget epsilon negative",
        "epsilon: 10.0,",
        "epsilon: -1.5,",
        "compliance.policy.1.epsilon",
        ("epsilon: -1.5",),
        ["greater than 0", "-1.5"],
    ),
    (
        "developer without a strategy",
        "    strategy: {kind: honest_selection, candidates: 10}\n",
        "",
        "developers.1",
        ("- id: alice",),
        ["strategy", "missing"],
    ),
    (
        "adult n too large",
        "data: {dataset: adult, protected: race, n: 1000}",
        "data: {dataset: adult, protected: race, n: 20000}",
        "data",
        ("n: 20000",),
        ["20000", "15507", "race"],
    ),
    (
        "german n too large",
        "data: {dataset: adult, protected: race, n: 1000}",
        "data: {dataset: german, n: 1001}",
        "data.n",
        ("n: 1001",),
        ["1001", "1000"],
    ),
    (
        "synthetic minority not below n",
        "data: {dataset: adult, protected: race, n: 1000}",
        "data: {dataset: synthetic, n: 100, minority: 100}",
        "data",
        ("minority: 100",),
        ["minority = 100", "n = 100"],
    ),
    (
        "two noise stages",
        "    - {kind: noise, mechanism: attribute_conceal, epsilon: 0.05}\n",
        "    - {kind: noise, mechanism: attribute_conceal, epsilon: 0.05}\n"
        "    - {kind: noise, mechanism: laplace, epsilon: 1.0}\n",
        "compliance",
        ("compliance:", "metrics: [sp]"),
        ["at most one 'noise' stage", "found 2"],
    ),
    (
        "noise stage with eodds",
        "metrics: [sp]",
        "metrics: [sp, eodds]",
        "compliance",
        ("compliance:", "metrics: [sp, eodds]"),
        ["'eodds'", "noise", "'sp'", "'abs_eo'"],
    ),
    (
        "smooth_laplace without delta",
        "mechanism: attribute_conceal, epsilon: 0.05",
        "mechanism: smooth_laplace, epsilon: 0.5",
        "compliance.policy.2",
        ("smooth_laplace",),
        ["'smooth_laplace'", "delta"],
    ),
    (
        "truncate with gaussian",
        "mechanism: attribute_conceal, epsilon: 0.05",
        "mechanism: gaussian, epsilon: 0.5, delta: 1e-6, bounding: truncate",
        "compliance.policy.2",
        ("bounding: truncate",),
        ["'truncate'", "'gaussian'", "'clamp'"],
    ),
    (
        "truncate of attribute_conceal with the safe sampler",
        "mechanism: attribute_conceal, epsilon: 0.05",
        "mechanism: attribute_conceal, epsilon: 0.05, bounding: truncate",
        "compliance.policy.2",
        ("bounding: truncate",),
        ["'truncate'", "attribute_conceal", "'naive'", "'clamp'"],
    ),
    (
        "unknown sampler",
        "mechanism: attribute_conceal, epsilon: 0.05",
        "mechanism: attribute_conceal, epsilon: 0.05, sampler: float",
        "compliance.policy.2.sampler",
        ("sampler: float",),
        ["'float'", "'safe'", "'naive'"],
    ),
    (
        "advanced composition with delta 0",
        "epsilon: 10.0, scope: organization}",
        "epsilon: 10.0, scope: organization, composition: advanced}",
        "compliance.policy.1",
        ("composition: advanced",),
        ["'advanced'", "delta > 0", "'basic'"],
    ),
    (
        "literal value typo",
        "per_day: 100, scope: organization}",
        "per_day: 100, scope: organisation}",
        "compliance.policy.0.scope",
        ("organisation",),
        ["'organisation'", "did you mean 'organization'", "'identity'"],
    ),
    (
        "strategy model validator",
        "candidates: 10}",
        "candidates: 10, c_min: 5, c_max: 1}",
        "developers.1.strategy",
        ("c_min: 5",),
        ["c_min", "c_max"],
    ),
]


def test_good_error_template_is_valid() -> None:
    parse_scenario(GOOD)


@pytest.mark.parametrize(
    ("old", "new", "key_path", "needles", "fragments"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_one_readable_line_per_problem(
    tmp_path: Path,
    old: str,
    new: str,
    key_path: str,
    needles: tuple[str, ...],
    fragments: list[str],
) -> None:
    text = _edit(GOOD, old, new)
    path = _write(tmp_path, text, "broken.yaml")
    problems = _problems(path)
    assert len(problems) == 1, problems
    line, got_path, message = _split(problems[0], path)
    assert got_path == key_path, problems[0]
    assert not set(got_path.split(".")) & UNION_TAGS, problems[0]
    assert line in {_line_of(text, needle) for needle in needles}, problems[0]
    for fragment in fragments:
        assert fragment in message, (fragment, problems[0])


def test_unknown_strategy_key_lists_that_strategys_keys(tmp_path: Path) -> None:
    text = _edit(GOOD, "candidates: 10}", "candidates: 10, queries: 5}")
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    line, key_path, message = _split(problem, path)
    assert key_path == "developers.1.strategy.queries"
    assert line == _line_of(text, "queries: 5")
    allowed = sorted(HonestSelectionConfig.model_fields)
    assert f"allowed keys: {allowed}" in message
    assert "'perturbation'" not in message


def test_developer_without_strategy_mentions_strategy(tmp_path: Path) -> None:
    text = _edit(GOOD, "    strategy: {kind: honest_selection, candidates: 10}\n", "")
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    line, key_path, message = _split(problem, path)
    assert key_path == "developers.1"
    assert line == _line_of(text, "- id: alice")
    assert "'strategy'" in message


def test_duplicate_developer_ids(tmp_path: Path) -> None:
    text = _edit(GOOD, "- id: alice", "- id: mallory")
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    line, key_path, message = _split(problem, path)
    assert "unique" in message
    assert "'mallory'" in message
    assert key_path == "developers"
    assert line == _line_of(text, "developers:")


def test_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    text = _edit(GOOD, "seed: 1\n", "seed: 1\nseed: 43\n")
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    assert f"{path}:{_line_of(text, 'seed: 43')}: " in problem
    assert "duplicate key 'seed'" in problem


def test_duplicate_key_names_the_key_and_both_lines(tmp_path: Path) -> None:
    text = _edit(GOOD, "      box: false\n", "      box: false\n      queries: 5\n")
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    first = _line_of(text, "queries: 400")
    second = _line_of(text, "queries: 5")
    assert problem == (
        f"{path}:{second}: not valid YAML: duplicate key 'queries' (first on line {first})"
    )


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("a: {b: 1, c: 2, b: 3}\n", 1, "'b'"),
        ("a:\n  - x: 1\n    y: 2\n    x: 3\n", 4, "'x'"),
        ("1: a\n01: b\n", 2, "1"),  # the same integer, written twice
    ],
    ids=["flow mapping", "list item", "integer key"],
)
def test_duplicate_keys_anywhere(text: str, line: int, key: str) -> None:
    with pytest.raises(ScenarioError) as info:
        read_yaml(text, source="f.yaml")
    (problem,) = info.value.problems
    assert problem.startswith(f"f.yaml:{line}: not valid YAML: duplicate key {key} (first on line ")


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ("1e3", 1000.0),
        ("-1E-3", -0.001),
        (".5e3", 500.0),
        ("1.", 1.0),
        ("017", 17),
        ("-017", -17),
        ("0o17", 15),
        ("0x1F", 31),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ("true", True),
        ("FALSE", False),
        ("no", "no"),
        ("yes", "yes"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("1_000", "1_000"),
        ("0b101", "0b101"),
        ("-0o17", "-0o17"),
        ("0X1F", "0X1F"),
        ("1:30", "1:30"),
        ("~", None),
        ("null", None),
        ("", None),
        ("!!str 12", "12"),
        ("!!float 1", 1.0),
        ("'1e3'", "1e3"),
    ],
)
def test_yaml_1_2_core_schema_scalars(scalar: str, expected: object) -> None:
    value = read_yaml(f"k: {scalar}\n")["k"]
    assert type(value) is type(expected)
    assert value == expected


def test_yaml_version_directive_does_not_bring_back_yaml_1_1() -> None:
    data = read_yaml("%YAML 1.1\n---\nseed: 017\nflag: no\nn: 1e3\n")
    assert data == {"seed": 17, "flag": "no", "n": 1000.0}


def test_read_yaml_gives_plain_python_data() -> None:
    text = """\
base: &b {n: 1e3, name: &t text, on: &f true, k: &i 5}
folded: >
  two
  lines
quoted: "x"
list: &l [1, 2.5]
copy: *b
again: *l
when: 2024-01-01
"""
    data = read_yaml(text)

    def check(value: object) -> None:
        assert type(value) in (dict, list, str, int, float, bool, type(None), dt.date), value
        if isinstance(value, dict):
            for key, item in value.items():
                check(key)
                check(item)
        elif isinstance(value, list):
            for item in value:
                check(item)

    check(data)
    assert data["base"] == {"n": 1000.0, "name": "text", "on": True, "k": 5}
    assert data["folded"] == "two lines\n"
    assert data["copy"] == data["base"]
    assert data["copy"] is not data["base"]  # an alias is a copy: an override changes one place
    assert data["again"] == [1, 2.5]
    assert json.dumps(data["base"], sort_keys=True) == (
        '{"k": 5, "n": 1000.0, "name": "text", "on": true}'
    )
    out = apply_overrides(data, ["base.n=7"])
    assert (out["base"]["n"], out["copy"]["n"]) == (7, 1000.0)


def test_read_document_knows_the_line_of_every_key_and_item() -> None:
    text = """\
# a comment first
name: x
data: {dataset: adult, n: 5}
developers:
  - id: a
    strategy:
      kind: k
  -
    id: b
"""
    document = read_document(text)
    assert document.line_of([]) == 2
    assert document.line_of(["name"]) == 2
    assert document.line_of(["data", "n"]) == 3
    assert document.line_of(["developers"]) == 4
    assert document.line_of(["developers", 0]) == 5
    assert document.line_of(["developers", 0, "strategy", "kind"]) == 7
    assert document.line_of(["developers", 1]) == 9
    assert document.line_of(["developers", 1, "id"]) == 9
    # a key the file does not have: the deepest part of the path it has
    assert document.line_of(["developers", 0, "strategy", "queries"]) == 6
    assert document.line_of(["developers", 5, "id"]) == 4
    assert document.line_of(["nope"]) == 2


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("name: x\nk: !foo 1\n", 2, "unknown tag '!foo'"),
        ("name: x\nk: !!python/object:os.system x\n", 2, "python/object"),
        ("name: x\nk:\n  - !foo {a: 1}\n", 3, "unknown tag '!foo'"),
        ("name: x\nk: !!set {a, b}\n", 2, "!!set"),
        ("name: x\nk: !!binary aGVsbG8=\n", 2, "!!binary"),
        ("name: x\nk: !!int abc\n", None, "abc"),
    ],
    ids=["unknown tag", "python tag", "tagged mapping", "set", "binary", "not what its tag says"],
)
def test_yaml_the_rules_do_not_allow_is_one_line(
    text: str, line: int | None, fragment: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        read_yaml(text, source="f.yaml")
    (problem,) = info.value.problems
    where = "f.yaml" if line is None else f"f.yaml:{line}"
    assert problem.startswith(f"{where}: not valid YAML: "), problem
    assert fragment in problem


def test_integer_written_as_float_is_refused_in_the_file_and_by_set(tmp_path: Path) -> None:
    # YAML 1.2 reads 1e3 as the float 1000.0; integer keys are strict, in the file and in --set
    text = _edit(GOOD, "n: 1000}", "n: 1e3}")
    path = _write(tmp_path, text)
    (in_file,) = _problems(path)
    line, key_path, message = _split(in_file, path)
    assert (line, key_path) == (_line_of(text, "n: 1e3"), "data.n")
    assert "valid integer (received 1000.0)" in message
    assert "1000" in message.split("received 1000.0")[1]  # says how to write it

    (by_set,) = _problems(_write(tmp_path, GOOD, "good.yaml"), overrides=["data.n=1e3"])
    assert by_set.split(": ", 1)[1] == in_file.split(": ", 1)[1]  # the same line and message
    scenario = load_scenario(_write(tmp_path, GOOD, "good.yaml"), overrides=["data.n=1000"])
    assert isinstance(scenario.data, AdultData)
    assert scenario.data.n == 1000


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("epsilon: 0.05", "epsilon: true", "valid number"),
        ("horizon_days: 10", "horizon_days: .inf", "finite"),
        ("horizon_days: 10", "horizon_days: '10'", "valid number"),
        ("queries: 400", "queries: 400.5", "valid integer"),
        ("name: errors", "name: 2024-01-01", "quote it"),
    ],
)
def test_numbers_must_be_numbers(tmp_path: Path, old: str, new: str, words: str) -> None:
    path = _write(tmp_path, _edit(GOOD, old, new))
    (problem,) = _problems(path)
    assert words in problem


def test_several_problems_give_several_lines(tmp_path: Path) -> None:
    text = _edit(GOOD, "queries: 400", "queries: many")
    text = _edit(
        text,
        "scope: organization}\n    - {kind: budget",
        "scope: organisation}\n    - {kind: budget",
    )
    text = _edit(text, "auditor:\n", "modle: {}\nauditor:\n")
    path = _write(tmp_path, text)
    problems = _problems(path)
    assert len(problems) == 3, problems
    found = {}
    for problem in problems:
        line, key_path, message = _split(problem, path)
        found[key_path] = (line, message)
    assert found.keys() == {"developers.0.strategy.queries", "compliance.policy.0.scope", "modle"}
    assert found["developers.0.strategy.queries"][0] == _line_of(text, "queries: many")
    assert found["compliance.policy.0.scope"][0] == _line_of(text, "organisation")
    assert found["modle"][0] == _line_of(text, "modle:")
    assert "did you mean 'model'" in found["modle"][1]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- just\n- a list\n", "must be a mapping"),
        ("42\n", "must be a mapping"),
        ("", "must be a mapping"),
        ("name: [unclosed\n", "not valid YAML"),
        ("name: x\n\tseed: 1\n", "not valid YAML"),
    ],
    ids=["list", "scalar", "empty", "unclosed", "tab"],
)
def test_unusable_file_gives_one_problem(tmp_path: Path, text: str, fragment: str) -> None:
    path = _write(tmp_path, text)
    problems = _problems(path)
    assert len(problems) == 1, problems
    assert re.match(rf"{re.escape(str(path))}(:\d+)?: ", problems[0]), problems[0]
    assert "\n" not in problems[0]
    assert fragment in problems[0]
    assert "Traceback" not in problems[0]


def test_unreadable_path_gives_one_line(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.yaml", tmp_path):
        problems = _problems(path)
        assert len(problems) == 1, problems
        assert "\n" not in problems[0]
        assert problems[0].startswith(f"{path}: ")
        assert "cannot read" in problems[0]


def test_overrides_change_values() -> None:
    scenario = load_scenario(
        QUICKSTART,
        overrides=[
            "data.n=200",
            "compliance.policy.2.epsilon=1.0",
            "developers.0.strategy.queries=100",
            "seed=7",
        ],
    )
    assert isinstance(scenario.data, AdultData)
    assert scenario.data.n == 200
    noise = scenario.compliance.policy[2]
    assert isinstance(noise, pol.Noise)
    assert noise.epsilon == 1.0
    strategy = scenario.developers[0].strategy
    assert isinstance(strategy, CompressedSensingConfig)
    assert strategy.queries == 100
    assert strategy.batch == 50  # siblings untouched
    assert scenario.seed == 7
    assert scenario.horizon_days == 30.0


def test_override_values_are_read_as_yaml() -> None:
    scenario = load_scenario(
        SCENARIOS / "cs_laplace.yaml",
        overrides=[
            "compliance.policy.0.epsilon=.inf",
            "auditor.enabled=true",
            "compliance.metrics=[sp, eo]",
            "horizon_days=1e3",
            "developers.1.organization=no",
        ],
    )
    noise = scenario.compliance.policy[0]
    assert isinstance(noise, pol.Noise)
    assert noise.epsilon == math.inf
    assert scenario.auditor.enabled is True
    assert scenario.compliance.metrics == ["sp", "eo"]
    assert scenario.horizon_days == 1000.0
    assert scenario.developers[1].organization == "no"


def test_apply_overrides_copies_and_parses() -> None:
    data = {"seed": 1, "developers": [{"id": "a", "strategy": {"queries": 5}}]}
    out = apply_overrides(
        data,
        [
            "seed=017",
            "developers.0.strategy.queries=100",
            "compliance.metrics=[sp, eo]",
            "auditor.enabled=true",
            "budget=.inf",
        ],
    )
    assert data == {"seed": 1, "developers": [{"id": "a", "strategy": {"queries": 5}}]}
    assert out["seed"] == 17
    assert out["developers"][0]["strategy"]["queries"] == 100
    assert out["compliance"] == {"metrics": ["sp", "eo"]}
    assert out["auditor"] == {"enabled": True}
    assert out["budget"] == math.inf


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("developers.5.strategy.queries=1", "developers.5"),
        ("seed.x=1", "seed.x"),
        ("seed", "seed"),
    ],
    ids=["index out of range", "through a scalar", "no equals sign"],
)
def test_bad_override_is_a_scenario_error(override: str, names: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(QUICKSTART, overrides=[override])
    (problem,) = info.value.problems
    assert names in problem
    assert "\n" not in problem


def test_override_creating_unknown_key_is_reported_as_unknown_key() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(QUICKSTART, overrides=["developers.0.strategy.querys=100"])
    (problem,) = info.value.problems
    assert problem.startswith(f"{QUICKSTART}:")
    assert "developers.0.strategy.querys: unknown key 'querys'" in problem
    assert "did you mean 'queries'" in problem


def test_committed_schema_matches_biasleak_schema() -> None:
    expected = json.dumps(schema(), indent=2, sort_keys=True) + "\n"
    committed = (SCENARIOS / "schema.json").read_text(encoding="utf-8")
    assert committed == expected


def test_schema_has_discriminated_unions() -> None:
    s = schema()
    assert s["additionalProperties"] is False
    assert {"name", "data", "developers"} <= set(s["required"])
    defs = s["$defs"]
    strategy = defs["DeveloperConfig"]["properties"]["strategy"]
    assert strategy["discriminator"]["propertyName"] == "kind"
    assert {"compressed_sensing", "honest_selection", "full_rank"} <= set(
        strategy["discriminator"]["mapping"]
    )
    assert set(strategy["discriminator"]["mapping"]) == set(STRATEGIES)
    stages = defs["ComplianceConfig"]["properties"]["policy"]["items"]
    assert stages["discriminator"]["propertyName"] == "kind"
    assert set(stages["discriminator"]["mapping"]) == set(STAGES)
    data = s["properties"]["data"]
    assert data["discriminator"]["propertyName"] == "dataset"
    assert set(data["discriminator"]["mapping"]) == {"adult", "german", "synthetic", "csv"}
    assert defs["CompressedSensingConfig"]["additionalProperties"] is False


@pytest.mark.slow
def test_cli_validate_good_files(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in SCENARIOS.glob("*.yaml"))
    assert main(["validate", *files]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{f}: ok" for f in files]
    assert captured.err == ""


def test_cli_validate_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _edit(GOOD, "queries: 400", "queries: many")
    text = _edit(text, "auditor:\n", "modle: {}\nauditor:\n")
    bad = _write(tmp_path, text, "bad.yaml")
    expected = _problems(bad)
    assert main(["validate", str(QUICKSTART), str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{QUICKSTART}: ok"]
    assert captured.err.splitlines() == expected
    assert "Traceback" not in captured.err


def test_cli_validate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["validate", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{missing}: cannot read")
    assert "Traceback" not in captured.err


def test_cli_schema_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == schema()
    assert out == json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def test_cli_run_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path, _edit(GOOD, "kind: compressed_sensing", "kind: compresed_sensing"))
    assert main(["run", str(bad), "--log-dir", str(tmp_path / "logs")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "did you mean 'compressed_sensing'" in captured.err
    assert captured.err.startswith(f"{bad}:")
    assert "Traceback" not in captured.err
    assert not (tmp_path / "logs").exists()


def test_cli_run_bad_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            str(QUICKSTART),
            "--set",
            "developers.0.strategy.queries=abc",
            "--log-dir",
            str(tmp_path / "logs"),
        ]
    )
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "developers.0.strategy.queries" in captured.err
    assert "'abc'" in captured.err
    assert "Traceback" not in captured.err
    assert not (tmp_path / "logs").exists()


def test_scenario_hash_ignores_layout_and_tracks_values() -> None:
    reordered = """\
# same scenario: other key order, block style, explicit defaults, other whitespace
auditor:
    on_alert:   suspend_identity
    detectors:  [ near_duplicate , low_support ]
    every_hours: 24.0
    enabled: true
compliance:
    policy:
      - {scope: organization, per_day: 100, kind: rate_limit}
      - {composition: basic, scope: organization, epsilon: 10, kind: budget}
      - kind: noise
        epsilon: 0.05
        mechanism: attribute_conceal
    metrics: [sp, abs_sp, eo, abs_eo]
developers:
  - strategy: {batch: 50, perturbation: 0.1, queries: 400, kind: compressed_sensing}
    organization: acme
    id: mallory
    timeout_hours: 72
  - {organization: acme, id: alice, strategy: {candidates: 10, kind: honest_selection}}
model: {}
data:
  n: 1000
  protected: race
  dataset: adult
horizon_days: 30.0
seed: 42
name: quickstart
"""
    digest = scenario_hash(parse_scenario(MINIMAL))
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert scenario_hash(parse_scenario(reordered)) == digest
    assert scenario_hash(parse_scenario(MINIMAL)) == digest

    for old, new in [
        ("seed: 42", "seed: 43"),
        ("queries: 400", "queries: 401"),
        ("epsilon: 0.05", "epsilon: 0.06"),
        ("id: alice", "id: alicia"),
        ("  enabled: true", "  enabled: false"),
        ("metrics: [sp, abs_sp, eo, abs_eo]", "metrics: [abs_sp, sp, eo, abs_eo]"),
    ]:
        assert scenario_hash(parse_scenario(_edit(MINIMAL, old, new))) != digest, old


# -- red team ------------------------------------------------------------------------------------


def test_attack_kinds_are_the_registry_without_honest_strategies() -> None:
    from biasleak.agents.strategies import HONEST_KINDS
    from biasleak.sim.scenario import ATTACK_KINDS

    assert set(ATTACK_KINDS) == set(STRATEGIES) - HONEST_KINDS - {"plugin"}
    assert list(ATTACK_KINDS) == [k for k in STRATEGIES if k not in HONEST_KINDS | {"plugin"}]
    assert {"honest_selection", "request_postprocessing", "request_fair_training"} <= HONEST_KINDS


@pytest.mark.parametrize(
    ("red_team", "kinds"),
    [
        ("red_team: {attacks: all}", "all"),
        ("red_team: {}", "all"),
        ("red_team: {attacks: [full_rank, sybil]}", ["full_rank", "sybil"]),
    ],
)
def test_red_team_accepts_all_or_a_list_of_attack_kinds(
    red_team: str, kinds: str | list[str]
) -> None:
    from biasleak.sim.scenario import ATTACK_KINDS

    scenario = parse_scenario(GOOD + red_team + "\n")
    assert scenario.red_team is not None
    assert scenario.red_team.attacks == kinds
    expected = list(ATTACK_KINDS) if kinds == "all" else kinds
    assert scenario.red_team.kinds() == expected
    assert parse_scenario(GOOD).red_team is None


@pytest.mark.parametrize(
    ("red_team", "words"),
    [
        ("red_team: {attacks: [ful_rank]}", ["unknown attack kind 'ful_rank'", "'full_rank'?"]),
        ("red_team: {attacks: al}", ["'all' or a list of attack kinds", "did you mean 'all'?"]),
        ("red_team: {attacks: [honest_selection]}", ["honest, not an attack"]),
        ("red_team: {attacks: []}", ["non-empty list"]),
        ("red_team: {attacks: [sybil, sybil]}", ["lists a kind twice: ['sybil']"]),
        ("red_team: {attacks: 3}", ["'all' or a non-empty list"]),
        ("red_team: {atacks: all}", ["unknown key 'atacks'", "did you mean 'attacks'?"]),
    ],
)
def test_red_team_errors_name_the_allowed_kinds(
    tmp_path: Path, red_team: str, words: list[str]
) -> None:
    text = GOOD + red_team + "\n"
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    line, key_path, message = _split(problem, path)
    assert line == text.splitlines().index(red_team) + 1
    assert key_path.startswith("red_team.")
    for word in words:
        assert word in message, message
    if "unknown attack kind" in message or "honest" in message:
        assert "allowed attack kinds: ['single_query'" in message


@pytest.mark.parametrize("levels", [3, 5, 6])
def test_expanded_size_counts_aliases_as_the_copies_they_become(levels: int) -> None:
    from biasleak.sim.scenario import loading

    rows = ["a0: &a0 [lol, {k: v}]"] + [
        f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 4)}]" for k in range(1, levels)
    ]
    loaded = loading._reader().load("\n".join(rows) + "\n")
    plain = loading._Plain()
    plain.convert(loaded, (), 1)
    assert loading._expanded_size(loaded, {}) == plain.nodes  # the same count, never copied
    assert plain.nodes > 4 ** (levels - 1)


def test_a_file_that_expands_past_the_limit_is_refused_at_the_entry_that_passes_it() -> None:
    rows = ["a0: &a0 [lol]"] + [
        f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]" for k in range(1, 12)
    ]
    with pytest.raises(ScenarioError) as err:
        read_document("\n".join(rows) + "\n", source="laughs.yaml")
    # a0..a5 expand to 111,111 values together; a6 alone to 1,111,111
    expected = "laughs.yaml:7: not valid YAML: expands to more than 1,000,000 values"
    assert str(err.value).startswith(expected)
