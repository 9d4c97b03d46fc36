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


def _module_name(path: Path) -> str:
    """The dotted name of an installed module of biasleak."""
    for package in (biasleak.mechanisms, biasleak.agents, biasleak.sim):
        root = Path(package.__file__).parent  # type: ignore[arg-type]
        if path.is_relative_to(root):
            parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
            return ".".join([package.__name__, *parts])
    raise AssertionError(f"{path} is not a module of biasleak")


def _exported() -> dict[tuple[str, str], str]:
    """(defining module, name) -> the package whose ``__init__`` exports it (in ``__all__``)."""
    out = {}
    for package in (biasleak.mechanisms, biasleak.agents, biasleak.sim):
        for path in _modules(package):
            if path.name != "__init__.py":
                continue
            mod = _module_name(path)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            exported: set[str] = set()
            for node in tree.body:
                target = node.targets[0] if isinstance(node, ast.Assign) else None
                if isinstance(target, ast.Name) and target.id == "__all__":
                    exported = {e.value for e in node.value.elts}  # type: ignore[attr-defined]
            for node in tree.body:
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(mod + "."):
                    for alias in node.names:
                        if alias.name in exported and alias.asname is None:
                            out[(node.module, alias.name)] = mod  # type: ignore[index]
    return out


EXPORTED = _exported()


@pytest.mark.parametrize(
    "path",
    [*_modules(biasleak.mechanisms), *_modules(biasleak.agents), *_modules(biasleak.sim)],
    ids=lambda p: p.name,
)
def test_one_import_path_per_name(path: Path) -> None:
    """A name a package exports is imported from the package everywhere outside it (its own
    modules import each other, which keeps the package free of cycles)."""
    me = _module_name(path)
    wrong = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                package = EXPORTED.get((node.module, alias.name))
                if package and me != package and not me.startswith(package + "."):
                    wrong.append(f"{alias.name} from {node.module} (import it from {package})")
    assert not wrong, f"{me}: {wrong}"


def test_the_import_path_check_sees_the_packages_exports() -> None:
    assert EXPORTED[("biasleak.mechanisms.policy.budget", "Budget")] == "biasleak.mechanisms.policy"
    assert ("biasleak.mechanisms.policy._state", "ModelHistory") in EXPORTED
