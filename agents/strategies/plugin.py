"""Plugins: developer strategies brought from outside the package, run in a sandbox.

A researcher with a new attack need not edit biasleak. They write a subclass of
:class:`~biasleak.agents.strategies.base.Strategy` in a file of their own and name it in a
scenario::

    strategy: {kind: plugin, path: my_attack.py, class: MyAttack, queries: 50}

or install it in a distribution that declares an entry point in the ``biasleak.strategies``
group (``my_attack = "my_package.attacks:MyAttack"``) and write
``{kind: plugin, entry_point: my_attack, ...}``. Every other key is the plugin's own
configuration: when the class has a ``config_model`` attribute (a pydantic model, for instance a
:class:`~biasleak.agents.strategies.base.StrategyConfig` subclass whose fields have defaults), the
keys are validated by it and the strategy receives the validated model; otherwise it receives
this :class:`PluginConfig`, whose extra keys read as attributes (``self.config.queries``).

Validation reads the file without running it: the file must exist and define (or import) the
named class at its top level; an entry point must be installed. The code itself runs only in the
sandbox (:mod:`biasleak.agents.sandbox`): a process of its own that holds the public view, the
base model's predictions and the developer's random stream, never the protected attribute.
:class:`PluginStrategy` is what the developer process sees in the simulation: a strategy that
forwards each call (``next_action``, ``receive_answer``, ``on_refusal``, ``report``) to that
process and reads back the action and the current estimate, checking both before anyone uses
them. Given the same seed, a plugin makes the same queries as the same code would in process.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from biasleak.agents.messages import Refusal
from biasleak.agents.sandbox import STARTUP_SECONDS, PluginError, Sandbox
from biasleak.agents.strategies.base import (
    Action,
    AnswerInfo,
    DeveloperContext,
    Estimate,
    Stop,
    Strategy,
    StrategyConfig,
    Submit,
    Wait,
)
from biasleak.mechanisms._validation import did_you_mean

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginConfig",
    "PluginStrategy",
    "plugin_entry_points",
    "start_plugin",
]

ENTRY_POINT_GROUP: Final = "biasleak.strategies"
"""The entry-point group in which installed distributions declare strategies."""
BIT_GENERATORS: Final = frozenset({"PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937"})
"""NumPy bit generators a sandbox can rebuild a developer's random stream with."""
ONE_SOURCE: Final = "a plugin names either 'path' and 'class', or 'entry_point'"
NO_FILE: Final = "plugin file {path!r} does not exist"
NOT_PYTHON: Final = "plugin file {path!r} is not valid Python: {error}"
NO_CLASS: Final = "plugin file {path!r} defines no top-level class {name!r}{hint}"
NO_ENTRY_POINT: Final = "no installed entry point {name!r} in group {group!r}{hint}"
NOT_A_STRATEGY: Final = "plugin {name!r} is not a Strategy subclass"
BAD_REPLY: Final = "the plugin's {what} is malformed: {why}"


def plugin_entry_points() -> dict[str, str]:
    """Installed strategies: entry-point name -> ``module:attribute`` (nothing is imported)."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _top_level_names(tree: ast.Module) -> list[str]:
    """Names a module binds at its top level: classes, imports and plain assignments."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.extend(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


class PluginConfig(StrategyConfig):
    """Configuration of a plugin strategy; keys besides these are the plugin's own."""

    model_config = ConfigDict(
        extra="allow",
        frozen=True,
        strict=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    kind: Literal["plugin"] = "plugin"
    path: str | None = Field(None, description="Python file that defines the strategy class")
    class_name: str | None = Field(
        None, alias="class", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="class in 'path'"
    )
    entry_point: str | None = Field(
        None, min_length=1, description=f"installed entry point in group {ENTRY_POINT_GROUP!r}"
    )
    call_timeout_seconds: float = Field(
        300.0,
        gt=0.0,
        allow_inf_nan=False,
        description="wall-clock seconds one call to the plugin may take before it is stopped",
    )

    @model_validator(mode="after")
    def _source(self) -> PluginConfig:
        if self.entry_point is not None:
            if self.path is not None or self.class_name is not None:
                raise ValueError(ONE_SOURCE)
            installed = plugin_entry_points()
            if self.entry_point not in installed:
                hint = did_you_mean(self.entry_point, list(installed))
                raise ValueError(
                    NO_ENTRY_POINT.format(name=self.entry_point, group=ENTRY_POINT_GROUP, hint=hint)
                )
            return self
        if self.path is None or self.class_name is None:
            raise ValueError(ONE_SOURCE)
        file = Path(self.path)
        if not file.is_file():
            raise ValueError(NO_FILE.format(path=self.path))
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        except (SyntaxError, UnicodeDecodeError, ValueError) as err:
            raise ValueError(NOT_PYTHON.format(path=self.path, error=err)) from None
        names = _top_level_names(tree)
        if self.class_name not in names:
            hint = did_you_mean(self.class_name, names)
            raise ValueError(NO_CLASS.format(path=self.path, name=self.class_name, hint=hint))
        return self

    @property
    def options(self) -> dict[str, Any]:
        """The plugin's own configuration: every key besides the reserved ones."""
        return dict(self.model_extra or {})

    @property
    def source(self) -> str:
        """What the plugin is, for messages: ``file.py:Class`` or the entry point's name."""
        return self.entry_point or f"{self.path}:{self.class_name}"


# -- the child side: building the plugin in its sandbox ------------------------------------------


def _load_class(config: PluginConfig) -> type[Strategy]:
    """Import the plugin's class (in the sandbox: this runs the plugin's module)."""
    if config.entry_point is not None:
        found = entry_points(group=ENTRY_POINT_GROUP, name=config.entry_point)
        if not found:
            raise LookupError(
                NO_ENTRY_POINT.format(name=config.entry_point, group=ENTRY_POINT_GROUP, hint="")
            )
        cls = next(iter(found)).load()
    else:
        assert config.path is not None and config.class_name is not None
        file = Path(config.path).resolve()
        name = "biasleak_plugin_" + re.sub(r"\W", "_", file.stem)
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import plugin file {config.path!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(file.parent))  # the plugin may import its neighbours
        spec.loader.exec_module(module)
        cls = getattr(module, config.class_name)
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise TypeError(NOT_A_STRATEGY.format(name=config.source))
    return cls


def _generator(state: dict[str, Any]) -> np.random.Generator:
    """A generator continuing exactly where the one with this bit-generator ``state`` stands."""
    name = state.get("bit_generator")
    if name not in BIT_GENERATORS:
        raise ValueError(f"unsupported bit generator {name!r}")
    bit_generator = getattr(np.random, name)()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def start_plugin(spec: dict[str, Any]) -> Strategy:
    """Build the plugin a sandbox runs, from what :class:`PluginStrategy` sends it."""
    config: PluginConfig = spec["config"]
    cls = _load_class(config)
    model = getattr(cls, "config_model", None)
    own: Any = config
    if isinstance(model, type) and issubclass(model, BaseModel):
        own = model.model_validate(config.options)
    context = DeveloperContext(spec["public"], spec["base_predictions"], _generator(spec["rng"]))
    return cls(own, context)


# -- the parent side: the developer's view of a plugin -------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _array(value: Any, n: int, kinds: str, what: str) -> NDArray[Any]:
    if not isinstance(value, np.ndarray) or value.shape != (n,) or value.dtype.kind not in kinds:
        shape = getattr(value, "shape", type(value).__name__)
        raise PluginError(BAD_REPLY.format(what="estimate", why=f"{what} of shape {shape}"))
    return value


class PluginStrategy(Strategy):
    """A plugin as the developer process sees it: every call goes to its sandbox and back."""

    ATTACKS: ClassVar[bool] = True
    ISOLATED: ClassVar[bool] = True

    kind = "plugin"

    def __init__(self, config: PluginConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self._sandbox = Sandbox(timeout=config.call_timeout_seconds)
        spec = {
            "config": config,
            "public": context.public,
            "base_predictions": np.asarray(context.base_predictions),
            "rng": context.rng.bit_generator.state,
        }
        # a fresh interpreter imports numpy, biasleak and the plugin before it can answer
        self._call("start", spec, timeout=max(config.call_timeout_seconds, STARTUP_SECONDS))

    def close(self) -> None:
        """Stop the sandbox (idempotent; the simulation calls it when the run ends)."""
        self._sandbox.close()

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """Forward one call; a failure there stops the sandbox and raises here."""
        try:
            reply = self._sandbox.call(method, *args, timeout=timeout)
            if reply.get("estimate") is not None:
                self._take_estimate(reply["estimate"])
        except BaseException:
            self.close()
            raise
        return reply.get("result")

    def _take_estimate(self, raw: Any) -> None:
        n = self.context.n
        if not isinstance(raw, dict) or not isinstance(raw.get("version"), int):
            raise PluginError(BAD_REPLY.format(what="estimate", why="no version"))
        if not isinstance(raw.get("models_used"), int) or not isinstance(raw.get("method"), str):
            raise PluginError(BAD_REPLY.format(what="estimate", why="models_used or method"))
        probability = raw.get("probability")
        estimate = Estimate(
            _array(raw.get("attribute"), n, "biu", "attribute"),
            _array(raw.get("confidence"), n, "biuf", "confidence"),
            raw["models_used"],
            raw["method"],
            None if probability is None else _array(probability, n, "f", "probability"),
        )
        self._set_estimate(estimate)
        self.estimate_version = raw["version"]

    def next_action(self, now: float) -> Action:
        raw = self._call("next_action", now)
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind == "submit":
            predictions = raw.get("predictions")
            fields_ok = (
                isinstance(predictions, np.ndarray)
                and isinstance(raw.get("metric"), str)
                and _number(raw.get("prepare_hours"))
                and isinstance(raw.get("label"), str)
            )
            if fields_ok:
                return Submit(predictions, raw["metric"], raw["prepare_hours"], raw["label"])
        elif kind == "wait" and _number(raw.get("until")):
            return Wait(raw["until"])
        elif kind == "stop" and isinstance(raw.get("reason"), str):
            return Stop(raw["reason"])
        self.close()
        raise PluginError(BAD_REPLY.format(what="action", why=f"{str(raw)[:80]}"))

    def receive_answer(self, values: NDArray[np.float64], info: AnswerInfo, now: float) -> None:
        self.answer_infos.append(info)
        self._call("receive_answer", np.asarray(values), info, now)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:
        self._call("on_answer", np.asarray(values), now)

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        self._call("on_refusal", refusal, now)

    def report(self) -> dict[str, Any]:
        report = self._call("report")
        self.close()  # the developer asks for the report when the strategy has stopped
        if not isinstance(report, dict):
            raise PluginError(BAD_REPLY.format(what="report", why="not a mapping"))
        return report
