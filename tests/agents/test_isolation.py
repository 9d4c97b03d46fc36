"""Isolation of the protected attribute from strategies written outside the package.

Four hostile plugins, one per route by which in-process code reached the attribute (the caller's
frames, the compliance mailbox through SimPy's generators, the garbage collector, the bundled
data file), each run twice: in the simulation's process (a control that shows the route works
there, so the test can fail) and as a plugin in its sandbox, where it must find nothing. A benign
plugin reaches the same queries and leakage as the library strategy it copies. The data shared
by the runs of a process are immutable, and a plugin's mistakes and hangs end as events.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from biasleak.agents.sandbox import PluginError, read_reply, write_reply
from biasleak.agents.strategies import STRATEGIES, DeveloperContext, PluginConfig, Strategy
from biasleak.sim.datasets._uci import SANDBOXED
from biasleak.sim.scenario import ScenarioError, parse_scenario
from biasleak.sim.world import developer_context, run_scenario
from biasleak.sim.world.data import prepared

SYNTHETIC = "{dataset: synthetic, n: 73, minority: 11}"
ADULT = "{dataset: adult, protected: race, n: 150}"

SCENARIO = """
name: isolation
seed: 5
horizon_days: 2
data: DATA
developers:
  - id: mallory
    organization: acme
    strategy: STRATEGY
compliance:
  metrics: [sp]
  policy:
    - {kind: noise, mechanism: laplace, epsilon: 2.0}
"""

# The hostile plugins share a hunt: breadth-first through attributes, mappings and sequences,
# for a binary array of the audit set's length held under a telling name.
HUNT = """
import gc
import sys

import numpy as np

from biasleak.agents.strategies import Estimate, Stop, Strategy

NAMES = ("protected", "_truth")


def binary(value, n):
    return (
        isinstance(value, np.ndarray)
        and value.shape == (n,)
        and value.dtype.kind in "biu"
        and set(np.unique(value).tolist()) <= {0, 1}
    )


def attributes(obj):
    try:
        return dict(vars(obj))
    except Exception:
        return {}


def hunt(roots, n, depth=3):
    seen = set()
    layer = list(roots)
    for _ in range(depth + 1):
        following = []
        for obj in layer:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            for name, value in attributes(obj).items():
                if name in NAMES and binary(value, n):
                    return value
                following.append(value)
            if isinstance(obj, dict):
                following.extend(list(obj.values())[:1000])
            elif isinstance(obj, (list, tuple)):
                following.extend(obj[:1000])
        layer = following
    return None


def caller_frames():
    frame = sys._getframe(2)
    while frame is not None:
        yield frame
        frame = frame.f_back


class Hostile(Strategy):
    route = ""

    def steal(self):
        raise NotImplementedError

    def next_action(self, now):
        found = self.steal()
        n = self.context.n
        guess = np.ones(n, dtype=np.int8) if found is None else np.asarray(found).astype(np.int8)
        self.found = found is not None
        self._set_estimate(Estimate(guess, np.ones(n), 0, self.route))
        return Stop(self.route)

    def on_answer(self, values, now):
        pass

    def report(self):
        return {"found": self.found}
"""

ROUTES = {
    "frames": """
class Thief(Hostile):
    route = "frames"

    def steal(self):
        roots = [v for f in caller_frames() for v in f.f_locals.values()]
        return hunt(roots, self.context.n)
""",
    "mailbox": """
class Thief(Hostile):
    route = "mailbox"

    def steal(self):
        for frame in caller_frames():
            for value in list(frame.f_locals.values()):
                store = getattr(getattr(value, "compliance", None), "store", None)
                for event in list(getattr(store, "get_queue", [])):
                    for callback in event.callbacks or []:
                        generator = getattr(getattr(callback, "__self__", None), "_generator", None)
                        if generator is None or generator.gi_frame is None:
                            continue
                        owner = generator.gi_frame.f_locals.get("self")
                        audit = getattr(owner, "_audit", None)
                        if audit is not None:
                            return audit.protected
        return None
""",
    "gc": """
class Thief(Hostile):
    route = "gc"

    def steal(self):
        n = self.context.n
        for obj in gc.get_objects():
            mapping = attributes(obj)
            for name in NAMES:
                if binary(mapping.get(name), n):
                    return mapping[name]
        return None
""",
    "bundled_file": """
from biasleak.sim.datasets import read_bundled
from biasleak.sim.datasets._uci import ADULT_COLUMNS, ADULT_NUMERIC


class Thief(Hostile):
    route = "bundled_file"

    def steal(self):
        race = ADULT_COLUMNS.index("race")
        table = {}
        for name in ("adult.data.gz", "adult.test.gz"):
            for line in read_bundled(name).splitlines():
                fields = [f.strip() for f in line.split(",")]
                if len(fields) != 15:
                    continue
                key = tuple(
                    float(v) if ADULT_COLUMNS[i] in ADULT_NUMERIC else v
                    for i, v in enumerate(fields[:14])
                    if i != race
                )
                table[key] = fields[race] == "White"
        rows = self.context.public.audit.features.tolist()
        return np.array([1 if table.get(tuple(r)) else 0 for r in rows], dtype=np.int8)
""",
}

BENIGN = """
from biasleak.agents.strategies.compressed_sensing import (
    CompressedSensing,
    CompressedSensingConfig,
)


class CopiedSensing(CompressedSensing):
    config_model = CompressedSensingConfig
"""


def _plugin(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def _run(tmp_path: Path, strategy: str, data: str = SYNTHETIC, name: str = "run") -> list[dict]:
    """Run the scenario with this strategy; return the log's events."""
    text = SCENARIO.replace("DATA", data).replace("STRATEGY", strategy)
    result = run_scenario(parse_scenario(text), log_dir=tmp_path / "logs", log_name=name)
    lines = result.log_path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e.get("event") == kind]


def _in_process(config: PluginConfig, context: DeveloperContext) -> Strategy:
    """The control: the plugin's class built in this process, as a library strategy is."""
    assert config.path is not None and config.class_name is not None
    spec = importlib.util.spec_from_file_location(f"control_{Path(config.path).stem}", config.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, config.class_name)(config, context)


# -- the four routes -----------------------------------------------------------------------------


@pytest.mark.parametrize("route", list(ROUTES))
def test_hostile_route_works_in_process(
    route: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: each route does reach the attribute when the code shares the process."""
    path = _plugin(tmp_path, f"thief_{route}", HUNT + ROUTES[route])
    monkeypatch.setitem(STRATEGIES, "plugin", (PluginConfig, _in_process))
    data = ADULT if route == "bundled_file" else SYNTHETIC
    events = _run(tmp_path, f"{{kind: plugin, path: '{path}', class: Thief}}", data)
    assert not _of(events, "strategy_error")
    (stopped,) = _of(events, "developer_stopped")
    assert stopped["report"] == {"found": True}
    assert _of(events, "evaluation")[-1]["leakage"] >= 95.0


@pytest.mark.parametrize("route", ["frames", "mailbox", "gc"])
def test_hostile_route_finds_nothing_in_the_sandbox(route: str, tmp_path: Path) -> None:
    path = _plugin(tmp_path, f"thief_{route}", HUNT + ROUTES[route])
    events = _run(tmp_path, f"{{kind: plugin, path: '{path}', class: Thief}}")
    assert not _of(events, "strategy_error")
    (stopped,) = _of(events, "developer_stopped")
    assert stopped["report"] == {"found": False}
    (evaluation,) = _of(events, "evaluation")
    assert evaluation["leakage"] == 50.0  # the all-advantaged guess: a coin flip


def test_bundled_file_is_refused_in_the_sandbox(tmp_path: Path) -> None:
    path = _plugin(tmp_path, "thief_bundled_file", HUNT + ROUTES["bundled_file"])
    events = _run(tmp_path, f"{{kind: plugin, path: '{path}', class: Thief}}", ADULT)
    (error,) = _of(events, "strategy_error")
    assert error["during"] == "next_action"
    assert "PermissionError" in error["error"]
    assert SANDBOXED.format(name="adult.data.gz") in error["error"]
    assert not _of(events, "evaluation")
    assert _of(events, "horizon_reached"), "the run goes on to its horizon"


# -- a benign plugin behaves as the library strategy it copies -----------------------------------


def test_benign_plugin_matches_the_library_strategy(tmp_path: Path) -> None:
    path = _plugin(tmp_path, "benign", BENIGN)
    options = "queries: 40, batch: 20, perturbation: 0.1"
    library = _run(tmp_path, f"{{kind: compressed_sensing, {options}}}", name="library")
    plugin = _run(
        tmp_path, f"{{kind: plugin, path: '{path}', class: CopiedSensing, {options}}}", name="p"
    )
    assert not _of(plugin, "strategy_error")

    def queries(events: list[dict]) -> list[tuple[Any, ...]]:
        return [(e["metric"], e["models"], e["digest"]) for e in _of(events, "query_sent")]

    def answers(events: list[dict]) -> list[Any]:
        return [e["values"] for e in _of(events, "answer_received")]

    assert queries(plugin) == queries(library) and len(queries(library)) == 3  # h0 and 2 batches
    assert answers(plugin) == answers(library)
    scores = [(e["leakage"], e["revealed"]) for e in _of(library, "evaluation")]
    assert [(e["leakage"], e["revealed"]) for e in _of(plugin, "evaluation")] == scores
    assert scores and scores[-1][0] > 50.0
    unknown = _run(
        tmp_path,
        f"{{kind: plugin, path: '{path}', class: CopiedSensing, {options}, querys: 1}}",
        name="unknown",
    )
    (error,) = _of(unknown, "strategy_error")  # the plugin's own config model validates its keys
    assert error["during"] == "setup" and "querys" in error["error"]


# -- shared arrays are immutable -----------------------------------------------------------------


def test_shared_arrays_cannot_be_made_writeable() -> None:
    scenario = parse_scenario(
        SCENARIO.replace("DATA", ADULT).replace("STRATEGY", "{kind: full_rank}")
    )
    options = scenario.data.model_dump(mode="json", exclude_none=True)
    data, h0, _, proxy, _, p = prepared(json.dumps(options, sort_keys=True), 5, 1.0)
    assert proxy is not None and p is not None
    numeric = {
        "h0": h0,
        "protected": data.protected,
        "train_protected": data.train_protected,
        "train labels": data.public.train.labels,
        "audit labels": data.public.audit.labels,
        "proxy probabilities": p,
    }
    for name, array in numeric.items():
        with pytest.raises(ValueError, match="WRITEABLE"):
            array.flags.writeable = True
        assert not array.flags.writeable, name
    assert data.protected.dtype == np.int8 and h0.dtype == np.float64
    assert not data.public.audit.features.flags.writeable


def test_a_plugin_changing_its_data_does_not_change_the_next_run(tmp_path: Path) -> None:
    path = _plugin(
        tmp_path,
        "vandal",
        """
        from biasleak.agents.strategies import Stop, Strategy


        class Vandal(Strategy):
            def next_action(self, now):
                # its own copies: numeric arrays arrive immutable, the features do not
                changed = []
                for array in (self.context.base_predictions, self.context.public.audit.features):
                    try:
                        array.flags.writeable = True
                        array[...] = 0
                        changed.append(array.dtype.kind)
                    except ValueError:
                        pass
                return Stop("changed " + "".join(changed))

            def on_answer(self, values, now):
                pass
        """,
    )
    before = _run(tmp_path, "{kind: full_rank, batch: 73}", name="before")
    vandal = _run(tmp_path, f"{{kind: plugin, path: '{path}', class: Vandal}}", name="vandal")
    assert [e["reason"] for e in _of(vandal, "developer_stopped")] == ["changed O"]
    after = _run(tmp_path, "{kind: full_rank, batch: 73}", name="after")

    def body(events: list[dict]) -> list[dict]:
        return [e for e in events if e["event"] not in ("header", "summary")]

    assert body(after) == body(before)


# -- what a plugin may and may not do ------------------------------------------------------------


def test_plugin_options_reach_the_plugin_and_prints_do_not_break_the_protocol(
    tmp_path: Path,
) -> None:
    path = _plugin(
        tmp_path,
        "chatty",
        """
        from biasleak.agents.strategies import Stop, Strategy


        class Chatty(Strategy):
            def next_action(self, now):
                print("hello from the plugin")
                return Stop(f"{self.config.greeting} x{self.config.times}")

            def on_answer(self, values, now):
                pass

            def report(self):
                return {"options": self.config.options}
        """,
    )
    events = _run(
        tmp_path, f"{{kind: plugin, path: '{path}', class: Chatty, greeting: hi, times: 3}}"
    )
    (stopped,) = _of(events, "developer_stopped")
    assert stopped["reason"] == "hi x3"
    assert stopped["report"] == {"options": {"greeting": "hi", "times": 3}}
    header = events[0]
    strategy = header["resolved_scenario"]["developers"][0]["strategy"]
    assert strategy["class"] == "Chatty" and strategy["greeting"] == "hi"
    assert header["developers"][0]["strategy"] == "plugin"


BROKEN = {
    "raises": ("def next_action(self, now):\n    raise KeyError('boom')", "KeyError: 'boom'"),
    "bad_estimate": (
        "def next_action(self, now):\n"
        "    self._set_estimate(Estimate(np.ones(3, dtype=np.int8), np.ones(3)))\n"
        "    return Stop('x')",
        "estimate is malformed",
    ),
    "bad_action": ("def next_action(self, now):\n    return 'submit'", "unknown action str"),
    "unsendable": (
        "def next_action(self, now):\n    return Submit(np.array([object()] * 73))",
        "cannot send an array of dtype object",
    ),
    "exits": ("def next_action(self, now):\n    import os\n    os._exit(3)", "exit code 3"),
    "hangs": (
        "def next_action(self, now):\n    import time\n    time.sleep(60)",
        "no reply within 1 seconds",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.slow
def test_a_broken_plugin_is_a_strategy_error(case: str, tmp_path: Path) -> None:
    body, words = BROKEN[case]
    source = (
        "import numpy as np\n"
        "from biasleak.agents.strategies import Estimate, Stop, Strategy, Submit\n\n\n"
        "class Broken(Strategy):\n"
        + textwrap.indent(body, "    ")
        + "\n\n    def on_answer(self, values, now):\n        pass\n"
    )
    path = _plugin(tmp_path, f"broken_{case}", source)
    strategy = f"{{kind: plugin, path: '{path}', class: Broken, call_timeout_seconds: 1}}"
    events = _run(tmp_path, strategy)
    (error,) = _of(events, "strategy_error")
    assert error["during"] == "next_action"
    assert words in error["error"]
    assert _of(events, "horizon_reached")


def test_a_plugin_that_cannot_start_is_a_setup_error(tmp_path: Path) -> None:
    path = _plugin(tmp_path, "notastrategy", "class Thing:\n    pass\n")
    events = _run(tmp_path, f"{{kind: plugin, path: '{path}', class: Thing}}")
    (error,) = _of(events, "strategy_error")
    assert error["during"] == "setup"
    assert "is not a Strategy subclass" in error["error"]


# -- validation ----------------------------------------------------------------------------------


def _problems(strategy: str) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(SCENARIO.replace("DATA", SYNTHETIC).replace("STRATEGY", strategy))
    return "\n".join(info.value.problems)


def test_plugin_validation_names_the_problem(tmp_path: Path) -> None:
    path = _plugin(tmp_path, "attack", "class MyAttack:\n    pass\n")
    missing = tmp_path / "nowhere.py"
    assert "does not exist" in _problems(f"{{kind: plugin, path: '{missing}', class: A}}")
    problems = _problems(f"{{kind: plugin, path: '{path}', class: MyAtack}}")
    assert "defines no top-level class 'MyAtack'" in problems and "MyAttack" in problems
    assert "either 'path' and 'class'" in _problems(f"{{kind: plugin, path: '{path}'}}")
    assert "either 'path' and 'class'" in _problems(
        f"{{kind: plugin, path: '{path}', class: MyAttack, entry_point: x}}"
    )
    assert "no installed entry point 'nothing_here'" in _problems(
        "{kind: plugin, entry_point: nothing_here}"
    )
    broken = _plugin(tmp_path, "broken", "class (:\n")
    assert "is not valid Python" in _problems(f"{{kind: plugin, path: '{broken}', class: A}}")
    assert "greater than 0" in _problems(
        f"{{kind: plugin, path: '{path}', class: MyAttack, call_timeout_seconds: 0}}"
    )


def test_validation_does_not_run_the_plugin(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = _plugin(
        tmp_path, "loud", f"open({str(marker)!r}, 'w').close()\n\n\nclass Loud:\n    pass\n"
    )
    parse_scenario(
        SCENARIO.replace("DATA", SYNTHETIC).replace(
            "STRATEGY", f"{{kind: plugin, path: '{path}', class: Loud}}"
        )
    )
    assert not marker.exists()


def test_entry_point_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A strategy installed by another distribution, named by its entry point."""
    (tmp_path / "outside_attack.py").write_text(
        "from biasleak.agents.strategies import Stop, Strategy\n\n\n"
        "class Outside(Strategy):\n"
        "    def next_action(self, now):\n"
        "        return Stop('from an entry point')\n\n"
        "    def on_answer(self, values, now):\n"
        "        pass\n",
        encoding="utf-8",
    )
    info = tmp_path / "outside_attack-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: outside-attack\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[biasleak.strategies]\noutside = outside_attack:Outside\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    paths = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    importlib.invalidate_caches()
    events = _run(tmp_path, "{kind: plugin, entry_point: outside}")
    assert [e["reason"] for e in _of(events, "developer_stopped")] == ["from an entry point"]
    assert "outside_attack" not in sys.modules, "the parent never imports the plugin"


# -- the wire ------------------------------------------------------------------------------------


def test_replies_carry_numbers_only_and_reject_forgeries() -> None:
    value = {"a": np.arange(6, dtype=np.int8).reshape(2, 3), "b": [1.5, None, "x"]}
    back = read_reply(write_reply(value))
    assert np.array_equal(back["a"], value["a"]) and back["a"].dtype == np.int8
    assert back["b"] == [1.5, None, "x"]
    with pytest.raises(TypeError, match="numbers only"):
        write_reply({"a": np.array(["text"], dtype=object)})
    forged = write_reply({"a": np.zeros(2)})
    header = json.dumps({"a": {"__array__": 0, "dtype": "|O", "shape": [2]}}).encode()
    with pytest.raises(PluginError, match="malformed"):
        read_reply(len(header).to_bytes(8, "big") + header + forged[-16:])
    with pytest.raises(PluginError, match="longer than the reply"):
        huge = json.dumps({"a": {"__array__": 0, "dtype": "<f8", "shape": [2**40, 2**40]}})
        read_reply(len(huge).to_bytes(8, "big") + huge.encode())


def test_developer_context_is_the_plugins_starting_point() -> None:
    """What a plugin's sandbox receives is what the in-process path hands a strategy."""
    scenario = parse_scenario(
        SCENARIO.replace("DATA", SYNTHETIC).replace("STRATEGY", "{kind: full_rank}")
    )
    context = developer_context(scenario, "mallory", "full_rank")
    assert context.proxy is None
    assert not hasattr(context.public, "protected")
