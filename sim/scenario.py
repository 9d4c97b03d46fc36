"""Scenario files: one YAML file per scenario, validated before anything runs.

A scenario names the data, the developers and their strategies, the compliance team's metrics and
policy stages, the optional external auditor, the horizon and the seed. Every mapping forbids
unknown keys, and strategies, policy stages and data sources are discriminated unions (on
``kind``, ``kind`` and ``dataset``), built from the registries in :mod:`biasleak.agents` and
here.

Reading YAML: files are read with YAML 1.2 rules for scalars, not PyYAML's YAML 1.1 defaults, so
``1e3`` is the number 1000 (not the string "1e3"), ``no``/``yes``/``on``/``off`` are strings (only
``true``/``false`` are booleans), and ``017`` is 17 (not octal 15); ``.inf`` is infinity.

A bad file gets one readable line per problem, naming the file and line, the key path (as the
user wrote it, without the tags pydantic inserts for unions), the value, what is allowed, and "did
you mean" for near-miss names. :func:`apply_overrides` implements ``--set key.path=value``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from biasleak.agents.auditor import DETECTORS, DetectorSettings
from biasleak.agents.compliance import ALERT_REACTIONS
from biasleak.agents.strategies import STRATEGIES
from biasleak.mechanisms import policy as pol
from biasleak.mechanisms.metrics import METRICS
from biasleak.mechanisms.release import BOUNDINGS, MECHANISMS, SAMPLERS
from biasleak.mechanisms.sensitivity import SENSITIVITY_METRICS
from biasleak.sim.runlog import jsonable

__all__ = [
    "ATTACK_KINDS",
    "RedTeamConfig",
    "Scenario",
    "ScenarioError",
    "apply_overrides",
    "load_scenario",
    "parse_scenario",
    "scenario_hash",
    "schema",
]

ADULT_SIZES = {  # (protected, split, drop_missing) -> eligible people
    ("race", "test", False): 15507,
    ("race", "test", True): 14381,
    ("race", "all", False): 46447,
    ("race", "all", True): 43131,
    ("sex", "test", False): 16281,
    ("sex", "test", True): 15060,
    ("sex", "all", False): 48842,
    ("sex", "all", True): 45222,
}
GERMAN_SIZE = 1000


class Strict(BaseModel):
    """Unknown keys are errors; numbers must be numbers (no true -> 1.0, no "30" -> 30)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# -- data ----------------------------------------------------------------------------------------


class AdultData(Strict):
    """UCI Adult; the audit set is drawn from the test split."""

    dataset: Literal["adult"]
    protected: Literal["race", "sex"] = "race"
    n: int | None = Field(None, ge=3, description="audit set size (default: every eligible person)")
    seed: int | None = Field(None, ge=0, description="audit draw seed (default: the run seed)")
    split: Literal["test", "all"] = Field(
        "test", description="draw the audit set from the test split, or from the whole population"
    )
    drop_missing: bool = Field(False, strict=False, description="drop rows with missing values")

    @model_validator(mode="after")
    def _size(self) -> AdultData:
        available = ADULT_SIZES[(self.protected, self.split, self.drop_missing)]
        if self.n is not None and self.n > available:
            where = "test split" if self.split == "test" else "data set"
            raise ValueError(
                f"n = {self.n} is larger than the data set: the Adult {where} has {available} "
                f"people for protected={self.protected!r}"
                + (" without missing values" if self.drop_missing else "")
            )
        return self


class GermanData(Strict):
    """UCI Statlog German Credit; sex as the protected attribute."""

    dataset: Literal["german"]
    n: int | None = Field(None, ge=3, le=GERMAN_SIZE, description="audit set size (max 1000)")
    seed: int | None = Field(None, ge=0)


class SyntheticData(Strict):
    """Synthetic data (generative model documented in biasleak.sim.datasets)."""

    dataset: Literal["synthetic"]
    n: int = Field(ge=3)
    minority: int = Field(ge=1, description="N0, the size of the group with a = 0")
    features: int = Field(5, ge=1)
    score: Literal["normal", "uniform"] = "normal"
    group_shift: float = Field(0.0, allow_inf_nan=False)
    train_size: int | None = Field(None, ge=10)
    seed: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _minority(self) -> SyntheticData:
        if not self.minority < self.n:
            raise ValueError(f"minority = {self.minority} must be smaller than n = {self.n}")
        return self


class CsvData(Strict):
    """A user's CSV file."""

    dataset: Literal["csv"]
    path: str
    label: str
    protected: str
    advantaged: str
    positive: str | None = None
    n: int | None = Field(None, ge=3)
    audit_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    seed: int | None = Field(None, ge=0)


DataConfig = Annotated[
    AdultData | GermanData | SyntheticData | CsvData, Field(discriminator="dataset")
]


class ModelConfig(Strict):
    """The base model developers train (scikit-learn logistic regression)."""

    kind: Literal["logistic_regression"] = "logistic_regression"
    C: float = Field(1.0, gt=0.0, allow_inf_nan=False, description="inverse regularisation")


# -- developers ----------------------------------------------------------------------------------

StrategyConfig = Annotated[
    typing.Union[tuple(cfg for cfg, _ in STRATEGIES.values())],  # type: ignore[valid-type]  # noqa: UP007
    Field(discriminator="kind"),
]


class DeveloperConfig(Strict):
    """One developer identity and its strategy."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="unique identity")
    organization: str = Field(min_length=1)
    strategy: StrategyConfig
    timeout_hours: float = Field(
        72.0, gt=0.0, allow_inf_nan=False, description="wait for a reply at most this long"
    )
    retry_rate_limited: bool = Field(True, strict=False)


# -- compliance policy ---------------------------------------------------------------------------


class RateLimitStage(Strict):
    kind: Literal["rate_limit"]
    per_day: int = Field(ge=1, description="models per simulated day")
    scope: Literal["identity", "organization"] = "identity"


class BudgetStage(Strict):
    kind: Literal["budget"]
    epsilon: float = Field(gt=0.0, description="total epsilon (.inf: track without limit)")
    delta: float = Field(0.0, ge=0.0, lt=1.0)
    scope: Literal["identity", "organization"] = "identity"
    composition: Literal["basic", "advanced", "kov"] = "basic"

    @model_validator(mode="after")
    def _slack(self) -> BudgetStage:
        if self.composition != "basic" and self.delta == 0.0:
            raise ValueError(
                f"composition {self.composition!r} needs delta > 0 for its slack; use 'basic' "
                "for a pure epsilon budget"
            )
        return self


class NoiseStage(Strict):
    kind: Literal["noise"]
    mechanism: Literal[MECHANISMS]  # type: ignore[valid-type]
    epsilon: float = Field(math.inf, gt=0.0, description="per model (per: model) or per query")
    delta: float = Field(0.0, ge=0.0, lt=1.0)
    per: Literal["model", "batch"] = "model"
    bounding: Literal[BOUNDINGS] = "raw"  # type: ignore[valid-type]
    sampler: Literal[SAMPLERS] = Field(  # type: ignore[valid-type]
        "safe",
        description="safe: grid release with exactly sampled noise; naive: floating-point noise "
        "(broken by the fp_probe attack; for demonstrations only)",
    )

    @model_validator(mode="after")
    def _delta(self) -> NoiseStage:
        if self.mechanism in ("smooth_laplace", "gaussian") and math.isfinite(self.epsilon):
            if not 0.0 < self.delta < 1.0:
                raise ValueError(f"mechanism {self.mechanism!r} needs 0 < delta < 1")
        if (
            self.bounding == "truncate"
            and self.mechanism == "attribute_conceal"
            and self.sampler == "safe"
        ):
            raise ValueError(
                "bounding 'truncate' of attribute_conceal exists only with sampler 'naive' (no "
                "exact sampler of the truncated Cauchy on the grid); use bounding 'clamp' (free "
                "post-processing) or 'raw'"
            )
        if self.bounding == "truncate" and self.mechanism in ("smooth_laplace", "gaussian"):
            raise ValueError(
                f"bounding 'truncate' needs a pure eps-DP mechanism; {self.mechanism!r} has "
                "delta > 0 (use 'clamp')"
            )
        return self


class MinSupportStage(Strict):
    kind: Literal["min_support"]
    k: int = Field(ge=1, description="refuse models accepting or rejecting fewer than k people")


class NearDuplicateStage(Strict):
    kind: Literal["near_duplicate"]
    threshold: float = Field(
        gt=0.0, description="L1 distance in people (0/1 models: people whose decision differs)"
    )
    window: int = Field(1000, ge=1)


class CacheStage(Strict):
    kind: Literal["cache"]


STAGES = {
    "rate_limit": RateLimitStage,
    "budget": BudgetStage,
    "noise": NoiseStage,
    "min_support": MinSupportStage,
    "near_duplicate": NearDuplicateStage,
    "cache": CacheStage,
}
Stage = Annotated[
    RateLimitStage | BudgetStage | NoiseStage | MinSupportStage | NearDuplicateStage | CacheStage,
    Field(discriminator="kind"),
]


class ComplianceConfig(Strict):
    """The compliance team: metrics it answers and its policy stages."""

    metrics: list[Literal[METRICS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["sp", "abs_sp", "eo", "abs_eo"], min_length=1
    )
    policy: list[Stage] = Field(default_factory=list)
    answer_hours: float = Field(0.1, ge=0.0, allow_inf_nan=False)
    latency_hours: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    max_models: int = Field(10_000, ge=1)

    @model_validator(mode="after")
    def _stages(self) -> ComplianceConfig:
        for kind in ("noise", "cache", "min_support", "near_duplicate"):
            count = sum(1 for s in self.policy if s.kind == kind)
            if count > 1:
                raise ValueError(f"policy may hold at most one {kind!r} stage; found {count}")
        noise = next((s for s in self.policy if isinstance(s, NoiseStage)), None)
        if noise is not None and noise.mechanism != "exact" and math.isfinite(noise.epsilon):
            bad = [m for m in self.metrics if m not in SENSITIVITY_METRICS]
            if bad:
                raise ValueError(
                    f"metrics {bad} cannot be answered with noise (no sensitivity in biasleak); "
                    f"with a noise stage allowed metrics are {list(SENSITIVITY_METRICS)}"
                )
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError(f"metrics lists a metric twice: {self.metrics}")
        return self

    def build_policy(self) -> pol.Policy:
        """The :class:`~biasleak.mechanisms.policy.Policy` these stages describe."""
        noise = pol.Noise("exact")
        rate, budgets = [], []
        min_support = near = None
        cache = False
        for s in self.policy:
            if isinstance(s, RateLimitStage):
                rate.append(pol.RateLimit(s.per_day, s.scope))
            elif isinstance(s, BudgetStage):
                budgets.append(pol.Budget(s.epsilon, s.delta, s.scope, s.composition))
            elif isinstance(s, NoiseStage):
                noise = pol.Noise(s.mechanism, s.epsilon, s.delta, s.per, s.bounding, s.sampler)
            elif isinstance(s, MinSupportStage):
                min_support = pol.MinSupport(s.k)
            elif isinstance(s, NearDuplicateStage):
                near = pol.NearDuplicate(s.threshold, s.window)
            else:
                cache = True
        return pol.Policy(
            tuple(self.metrics),
            tuple(rate),
            min_support,
            near,
            tuple(budgets),
            noise,
            cache,
            self.max_models,
        )


class AuditorConfig(Strict):
    """The optional external auditor."""

    enabled: bool = Field(False, strict=False)
    every_hours: float = Field(24.0, gt=0.0, allow_inf_nan=False)
    detectors: list[Literal[tuple(DETECTORS)]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(DETECTORS)
    )
    on_alert: Literal[ALERT_REACTIONS] = "log_only"  # type: ignore[valid-type]
    near_duplicate_threshold: float = Field(1.5, gt=0.0, allow_inf_nan=False)
    near_duplicate_min_count: int = Field(1, ge=1)
    low_support_k: int = Field(5, ge=1)
    volume_max_models: int = Field(500, ge=1)
    noise_family_threshold: float = Field(0.15, gt=0.0, allow_inf_nan=False)
    noise_family_min_models: int = Field(20, ge=1)

    def settings(self) -> DetectorSettings:
        return DetectorSettings(
            self.near_duplicate_threshold,
            self.near_duplicate_min_count,
            self.low_support_k,
            self.volume_max_models,
            self.noise_family_threshold,
            self.noise_family_min_models,
        )


# -- red team ------------------------------------------------------------------------------------

NOT_ATTACKS = frozenset({"honest_selection"})
"""Strategy kinds that do not try to reveal the protected attribute."""
ATTACK_KINDS: tuple[str, ...] = tuple(k for k in STRATEGIES if k not in NOT_ATTACKS)
"""Every attack the library knows: the strategy registry without the honest strategies."""


class RedTeamConfig(Strict):
    """The red team: every attack of the library, each as its own developer against the policy.

    ``attacks: all`` (the default) takes every kind of :data:`ATTACK_KINDS`; a list names some.
    """

    attacks: Literal["all"] | list[Literal[ATTACK_KINDS]] = Field(  # type: ignore[valid-type]
        "all", description="'all', or a list of attack kinds (strategy kinds but honest ones)"
    )

    @field_validator("attacks", mode="before")
    @classmethod
    def _kinds(cls, value: Any) -> Any:
        allowed = list(ATTACK_KINDS)
        if isinstance(value, str):
            if value != "all":
                raise ValueError(
                    "attacks must be 'all' or a list of attack kinds"
                    + _hint(value, ["all", *allowed])
                )
            return value
        if not isinstance(value, list) or not value:
            raise ValueError(
                f"attacks must be 'all' or a non-empty list of attack kinds from {allowed}; "
                f"received {value!r}"
            )
        problems = []
        for item in value:
            if item not in allowed:
                why = "honest, not an attack" if item in NOT_ATTACKS else "unknown attack kind"
                problems.append(f"{why} {item!r}{_hint(item, allowed)}")
        if problems:
            raise ValueError("; ".join(problems) + f"; allowed attack kinds: {allowed}")
        repeated = sorted({k for k in value if value.count(k) > 1})
        if repeated:
            raise ValueError(f"attacks lists a kind twice: {repeated}")
        return value

    def kinds(self) -> list[str]:
        """The attack kinds to run, in registry order for ``all``."""
        return list(ATTACK_KINDS) if self.attacks == "all" else list(self.attacks)


class Scenario(Strict):
    """A whole scenario file."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="used in log file names")
    description: str = ""
    seed: int = Field(0, ge=0)
    horizon_days: float = Field(30.0, gt=0.0, allow_inf_nan=False)
    data: DataConfig
    model: ModelConfig = Field(default_factory=ModelConfig)
    developers: list[DeveloperConfig] = Field(min_length=1)
    compliance: ComplianceConfig = Field(default_factory=ComplianceConfig)
    auditor: AuditorConfig = Field(default_factory=AuditorConfig)
    red_team: RedTeamConfig | None = Field(
        None,
        description="run every applicable attack of the library against the policy (biasleak "
        "redteam; biasleak run prints its table too)",
    )
    grid: dict[str, list[Any] | int] | None = Field(
        None,
        description="variations for biasleak sweep: dotted key paths to lists of values, and "
        "'seeds' (runs per combination); biasleak run ignores it",
    )

    @field_validator("developers")
    @classmethod
    def _unique_ids(cls, developers: list[DeveloperConfig]) -> list[DeveloperConfig]:
        ids = [d.id for d in developers]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"developer ids must be unique; repeated: {dup}")
        return developers


# -- YAML 1.2 scalars ----------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema booleans, integers and floats."""


_Loader.yaml_implicit_resolvers = {
    key: [
        (tag, rx)
        for tag, rx in resolvers
        if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    ]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)  # "017" is 17


def _construct_float(loader: _Loader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    if text.endswith(".inf"):
        return -math.inf if text.startswith("-") else math.inf
    if text == ".nan":
        return math.nan
    return float(text)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {seen[key]})",
                key_node.start_mark,
            )
        seen[key] = line
    return loader.construct_mapping(node)


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def read_yaml(text: str) -> Any:
    """Parse YAML text with the scenario rules."""
    return yaml.load(text, Loader=_Loader)


# -- errors --------------------------------------------------------------------------------------


class ScenarioError(ValueError):
    """A scenario file is invalid; ``problems`` holds one readable line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _node_at(node: yaml.Node | None, path: list[str | int]) -> yaml.Node | None:
    """The YAML node that names ``path``: the key of a mapping entry, or a list item; the
    deepest one on the way for a missing key."""
    marker = node
    for key in path:
        child = None
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value == key), None)
            if pair is not None:
                marker, child = pair
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            child = node.value[key] if key < len(node.value) else None
            marker = child if child is not None else marker
        if child is None:
            return marker
        node = child
    return marker


def _user_path(data: Any, loc: tuple[Any, ...]) -> tuple[list[str | int], Any, bool]:
    """Map a pydantic error location onto the user's keys (dropping union tags).

    Returns the path, the value found there, and whether the whole location was found.
    """
    path: list[str | int] = []
    cur = data
    found = True
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            path.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            path.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and isinstance(part, str) and part in _TAGS:
            continue  # a tag pydantic inserted for a discriminated union
        else:
            path.append(part)
            found = False
            cur = None
    return path, cur, found


_TAGS = set(STRATEGIES) | set(STAGES) | {"adult", "german", "synthetic", "csv", "function-after"}


def _unwrap(annotation: Any) -> list[Any]:
    """The model classes an annotation may hold (through Optional, list, Annotated, Union)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list):
        return [m for arg in typing.get_args(annotation) for m in _unwrap(arg)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _model_at(data: Any, path: list[str | int]) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at ``path`` of the user's data."""
    model: type[BaseModel] | None = Scenario
    cur = data
    for key in path:
        if isinstance(key, int):
            cur = cur[key] if isinstance(cur, list) and key < len(cur) else None
            continue
        if model is None or key not in model.model_fields:
            return None
        candidates = _unwrap(model.model_fields[key].annotation)
        cur = cur.get(key) if isinstance(cur, dict) else None
        model = _pick(candidates, cur)
    return model


def _pick(candidates: list[type[BaseModel]], value: Any) -> type[BaseModel] | None:
    if len(candidates) == 1:
        return candidates[0]
    item = value[0] if isinstance(value, list) and value else value
    if isinstance(item, dict):
        for model in candidates:
            for tag in ("kind", "dataset"):
                field = model.model_fields.get(tag)
                if field is not None and item.get(tag) in typing.get_args(field.annotation):
                    return model
    return None


def _hint(value: Any, allowed: list[str]) -> str:
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, allowed, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(err: dict[str, Any], data: Any) -> tuple[list[str | int], str]:
    path, value, _ = _user_path(data, tuple(err["loc"]))
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = _model_at(data, path[:-1])
        allowed = sorted(parent.model_fields) if parent is not None else []
        key = path[-1]
        return path, (f"unknown key {key!r}; allowed keys: {allowed}{_hint(key, allowed)}")
    if kind == "union_tag_invalid":
        allowed = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",")]
        tag = ctx.get("tag")
        discriminator = str(ctx.get("discriminator", "kind")).strip("'")
        return [*path, discriminator], (
            f"unknown {discriminator} {tag!r}; allowed: {allowed}{_hint(tag, allowed)}"
        )
    if kind == "union_tag_not_found":
        discriminator = str(ctx.get("discriminator", "kind")).strip("'")
        return path, f"missing key {discriminator!r}, which says what this entry is"
    if kind == "missing":
        return path[:-1], f"missing required key {path[-1]!r}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return path, (f"value {value!r} is not allowed; allowed: {allowed}{_hint(value, allowed)}")
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    shown = "" if isinstance(value, dict | list) or value is None else f" (received {value!r})"
    if kind == "string_type" and value is not None and not isinstance(value, dict | list):
        shown += "; quote it if you meant the text"
    return path, message[0].lower() + message[1:] + shown


def _location(source: str, node: yaml.Node | None) -> str:
    if node is None:
        return source
    return f"{source}:{node.start_mark.line + 1}"


def parse_scenario(
    text: str, *, source: str = "<scenario>", overrides: list[str] | None = None
) -> Scenario:
    """Parse and validate scenario YAML text; raise :class:`ScenarioError` on any problem."""
    try:
        data = read_yaml(text)
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ScenarioError([f"{where}: not valid YAML: {problem}"]) from None
    if not isinstance(data, dict):
        raise ScenarioError([f"{source}: a scenario file must be a mapping of keys to values"])
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        problems = []
        for e in err.errors():
            path, message = _describe(e, data)
            where = _location(source, _node_at(root, path))
            dotted = ".".join(str(p) for p in path) or "(top level)"
            problems.append(f"{where}: {dotted}: {message}")
        raise ScenarioError(problems) from None


def load_scenario(path: str | Path, *, overrides: list[str] | None = None) -> Scenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError([f"{p}: cannot read the file ({err.strerror})"]) from None
    return parse_scenario(text, source=str(p), overrides=overrides)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides (values read as YAML) to a copy of the raw data."""
    out = _deep_copy(data)
    problems = []
    for item in overrides:
        if "=" not in item:
            problems.append(f"--set {item!r}: expected key.path=value")
            continue
        key, _, raw = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            problems.append(f"--set {item!r}: empty key path")
            continue
        try:
            value = read_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        cur: Any = out
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            where = ".".join(parts[: i + 1])
            if isinstance(cur, list):
                if not part.isdigit() or int(part) >= len(cur):
                    problems.append(
                        f"--set {key}: {where!r} must be an index below {len(cur)} of the list"
                    )
                    break
                if last:
                    cur[int(part)] = value
                else:
                    cur = cur[int(part)]
            elif isinstance(cur, dict):
                if last:
                    cur[part] = value
                else:
                    cur = cur.setdefault(part, {})
            else:
                problems.append(f"--set {key}: {where!r} is inside a value that is not a mapping")
                break
    if problems:
        raise ScenarioError(problems)
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def scenario_hash(scenario: Scenario) -> str:
    """SHA-256 of the resolved scenario (every default filled in), as canonical JSON."""
    text = json.dumps(scenario.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def schema() -> dict[str, Any]:
    """JSON Schema of scenario files (an infinite default is written as the string "inf")."""
    return jsonable(Scenario.model_json_schema())
