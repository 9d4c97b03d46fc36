"""The layer rules of the house: mechanisms/ is pure, agents/ never imports sim/.

These read the installed modules' source (not a checkout path) so they hold for any install.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import biasleak.agents
import biasleak.mechanisms
import biasleak.sim


def _modules(package: object) -> list[Path]:
    root = Path(package.__file__).parent  # type: ignore[attr-defined]
    return sorted(root.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


FORBIDDEN_IN_MECHANISMS = ("simpy", "structlog", "biasleak.sim", "biasleak.agents", "logging")
BARE = ("agents", "sim", "mechanisms")


@pytest.mark.parametrize("path", _modules(biasleak.mechanisms), ids=lambda p: p.name)
def test_mechanisms_is_pure(path: Path) -> None:
    for name in _imports(path):
        assert not name.startswith(FORBIDDEN_IN_MECHANISMS), f"{path.name} imports {name}"
    source = path.read_text(encoding="utf-8")
    assert "open(" not in source, f"{path.name} does I/O"
    assert "np.random.seed" not in source and "default_rng()" not in source


@pytest.mark.parametrize("path", _modules(biasleak.agents), ids=lambda p: p.name)
def test_agents_do_not_import_sim(path: Path) -> None:
    for name in _imports(path):
        assert not name.startswith("biasleak.sim"), f"{path.name} imports {name}"


@pytest.mark.parametrize(
    "path",
    _modules(biasleak.mechanisms) + _modules(biasleak.agents) + _modules(biasleak.sim),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_no_bare_layer_imports(path: Path) -> None:
    for name in _imports(path):
        assert name.split(".")[0] not in BARE, f"{path.name} imports bare {name!r}"


def test_every_module_imports() -> None:
    for package in (biasleak.mechanisms, biasleak.agents, biasleak.sim):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)
