"""Every registry entry is complete: in the scenario schema, in the generated reference, and
exercised by a test.

biasleak keeps each list in one registry (strategies, policy stages, release mechanisms, metrics,
refusal codes, auditor detectors). A new entry is one module plus its test; these checks fail when
the entry lacks its schema, its row in the guide's generated reference
(``docs/reference/registries.md``, rewritten by ``python docs/gen_reference.py``), or any test that
names it, and when the reference page is stale.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from biasleak.agents.auditor import DETECTORS
from biasleak.agents.messages import REFUSAL_REASONS
from biasleak.agents.strategies import STRATEGIES
from biasleak.mechanisms.metrics import METRICS
from biasleak.mechanisms.policy import STAGES, Policy, StageConfig
from biasleak.mechanisms.release import MECHANISM_INFO, MECHANISMS
from biasleak.sim.scenario import schema

ROOT = Path(__file__).parent.parent
REFERENCE_PAGE = ROOT / "docs" / "reference" / "registries.md"
REFERENCE = REFERENCE_PAGE.read_text(encoding="utf-8")
SCHEMA = json.dumps(schema())
TESTS = "\n".join(
    p.read_text(encoding="utf-8")
    for p in sorted((ROOT / "tests").rglob("test_*.py"))
    if p.name != "test_registry.py"
)
SCENARIOS = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "scenarios").rglob("*.yaml"))


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def _named_in_tests(name: str) -> bool:
    return f'"{name}"' in TESTS or f"'{name}'" in TESTS or f"kind: {name}" in SCENARIOS


@pytest.mark.parametrize("kind", list(STRATEGIES))
def test_every_strategy_has_schema_reference_row_and_test(kind: str) -> None:
    assert f'"const": "{kind}"' in SCHEMA, f"strategy {kind!r} is missing from the schema"
    rows = [r for r in _table_rows(REFERENCE) if f"`{kind}`" in r.split("|")[1]]
    assert rows, f"strategy {kind!r} has no row in the reference's strategy table"
    assert _named_in_tests(kind), f"no test or scenario names strategy {kind!r}"


@pytest.mark.parametrize("kind", list(STAGES))
def test_every_policy_stage_has_schema_reference_entry_and_test(kind: str) -> None:
    stage = STAGES[kind]
    assert issubclass(stage, StageConfig)
    assert stage.model_fields["kind"].default == kind, "registry key and stage kind differ"
    assert f'"const": "{kind}"' in SCHEMA, f"stage {kind!r} is missing from the schema"
    assert f"`{kind}" in REFERENCE, f"the reference does not name stage {kind!r}"
    assert _named_in_tests(kind), f"no test or scenario names stage {kind!r}"
    assert (stage.__doc__ or "").strip(), f"stage {kind!r} has no docstring"


def test_stage_orders_are_distinct_and_every_stage_builds_a_policy() -> None:
    orders = [stage.ORDER for stage in STAGES.values()]
    assert len(set(orders)) == len(orders), "two stages share a pipeline position"
    examples = {
        "rate_limit": {"per_day": 10},
        "budget": {"epsilon": 1.0},
        "noise": {"mechanism": "laplace", "epsilon": 0.5},
        "min_support": {"k": 2},
        "near_duplicate": {"threshold": 1.0},
        "cache": {},
    }
    assert set(examples) == set(STAGES), "add an example configuration for the new stage here"
    policy = Policy(stages=tuple(STAGES[k](**v) for k, v in examples.items()))
    assert [k for k, _ in policy.pipeline] == sorted(STAGES, key=lambda k: STAGES[k].ORDER)


@pytest.mark.parametrize("code", list(REFUSAL_REASONS))
def test_every_refusal_code_is_documented_and_tested(code: str) -> None:
    assert f"`{code}`" in REFERENCE, f"the reference does not list refusal code {code!r}"
    assert _named_in_tests(code), f"no test names refusal code {code!r}"


def test_every_stage_refusal_code_reaches_the_message_registry() -> None:
    codes = {c for stage in STAGES.values() for c in stage.REFUSALS}
    assert codes <= set(REFUSAL_REASONS)


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_every_mechanism_is_in_schema_reference_and_tests(name: str) -> None:
    assert f'"{name}"' in SCHEMA, f"mechanism {name!r} is missing from the schema"
    assert f"`{name}`" in REFERENCE, f"the reference does not name {name!r}"
    assert _named_in_tests(name), f"no test names mechanism {name!r}"
    info = MECHANISM_INFO[name]
    assert info.noisy == (info.calibrate is not None)
    assert not (info.pure and info.needs_delta)


@pytest.mark.parametrize("metric", list(METRICS))
def test_every_metric_is_in_schema_reference_and_tests(metric: str) -> None:
    assert f'"{metric}"' in SCHEMA
    assert f"`{metric}`" in REFERENCE, f"the reference does not list metric {metric!r}"
    assert _named_in_tests(metric)


@pytest.mark.parametrize("detector", list(DETECTORS))
def test_every_detector_is_in_schema_reference_and_tests(detector: str) -> None:
    assert f'"{detector}"' in SCHEMA
    assert f"`{detector}`" in REFERENCE, f"the reference does not list detector {detector!r}"
    assert _named_in_tests(detector) or f"detect_{detector}(" in TESTS


def test_the_completeness_checks_can_fail() -> None:
    """A made-up kind is caught by each check (so the checks above are not vacuous)."""
    ghost = "ghost_stage_kind"
    assert f'"const": "{ghost}"' not in SCHEMA
    assert not re.search(rf"`{ghost}", REFERENCE)
    assert not _named_in_tests(ghost)


def test_every_strategy_says_what_it_is_and_the_views_are_read_from_it() -> None:
    from biasleak.agents.strategies import (
        HONEST_KINDS,
        ISOLATED_KINDS,
        PROXY_KINDS,
        STRATEGIES,
        TRAITS,
        kinds_where,
    )
    from biasleak.sim.scenario import ATTACK_KINDS

    for kind, (_, cls) in STRATEGIES.items():
        for trait in TRAITS:
            assert isinstance(getattr(cls, trait), bool), (kind, trait)
    assert HONEST_KINDS == {k for k, (_, c) in STRATEGIES.items() if not c.ATTACKS}
    assert PROXY_KINDS == kinds_where("NEEDS_PROXY") == {"proxy_prior"}
    assert ISOLATED_KINDS == {"plugin"}
    assert set(ATTACK_KINDS) == set(STRATEGIES) - HONEST_KINDS - ISOLATED_KINDS
    assert {"request_postprocessing", "request_fair_training"} <= kinds_where("USES_SERVICE")
    with pytest.raises(ValueError, match="a strategy trait is one of"):
        kinds_where("HONEST")


def test_a_registered_strategy_that_does_not_say_whether_it_attacks_is_refused() -> None:
    from biasleak.agents.strategies import STRATEGIES, Strategy, _checked

    class Undeclared(Strategy):
        kind = "undeclared"

        def next_action(self, now: float):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def on_answer(self, values, now):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    config = STRATEGIES["honest_selection"][0]
    with pytest.raises(TypeError, match="must say whether it attacks"):
        _checked({"undeclared": (config, Undeclared)})
