"""The user guide (docs/, built with MkDocs) and README stay true to the code.

- the generated reference pages are current (``docs/gen_reference.py --check``);
- every relative link in README.md and in the guide's pages points to a file that exists;
- every ``console`` code block of the guide runs: each ``$ biasleak ...`` line is a command (only
  the quick ones are allowed there: ``validate``, ``schema``, ``--version``), the lines after it
  are its output, and a last line ``...`` means the output only starts with the lines above
  (``bash`` blocks are shown, never run);
- files the guide quotes whole are quoted as they are;
- ``mkdocs build --strict`` succeeds (warnings are errors) when MkDocs is installed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S
)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
ALLOWED = (("validate",), ("schema",), ("--version",))
"""The commands a console block may run: fast, and writing nothing."""
QUOTED = {"docs/how-to/write-a-scenario.md": ["scenarios/quickstart.yaml"]}
"""Pages that quote a repository file whole, in a code block."""


def _nav_pages(nav: object) -> list[str]:
    """Every page named in mkdocs.yml's nav (nested sections included)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


CONFIG_DATA = YAML(typ="safe").load(CONFIG.read_text(encoding="utf-8"))
PAGES = [DOCS / page for page in _nav_pages(CONFIG_DATA["nav"])]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _without_code(text: str) -> str:
    """The text with fenced blocks and inline code spans removed (links there are not links)."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def test_the_generated_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(DOCS / "gen_reference.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_config_names_the_four_sections_and_existing_pages() -> None:
    assert CONFIG_DATA["docs_dir"] == "docs"
    assert CONFIG_DATA["strict"] is True
    sections = [next(iter(item)) for item in CONFIG_DATA["nav"] if isinstance(item, dict)]
    for section in ("Tutorials", "How-to guides", "Reference", "Explanation"):
        assert section in sections, f"mkdocs.yml's nav lacks the {section} section"
    missing = [_rel(p) for p in PAGES if not p.is_file()]
    assert not missing, f"nav pages that do not exist: {missing}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=_rel)
def test_every_relative_link_points_to_an_existing_file(page: Path) -> None:
    broken = []
    for target in LINK.findall(_without_code(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # an address (https:, mailto:) or an anchor on the same page
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            broken.append(target)
    assert not broken, f"{_rel(page)} links to missing files: {broken}"


def test_the_link_check_finds_links_and_skips_code() -> None:
    text = "see [a](x.md#top), ![b](img/c.png) and [c](https://e.org) but `[d](no.md)`\n"
    assert LINK.findall(_without_code(text)) == ["x.md#top", "img/c.png", "https://e.org"]
    assert LINK.findall(_without_code("```\n[e](no.md)\n```\n")) == []


def _console_examples() -> list[tuple[str, str, list[str]]]:
    """(page, command line, expected output lines) for every ``$`` line of a console block."""
    examples = []
    for page in PAGES:
        for block in FENCE.finditer(page.read_text(encoding="utf-8")):
            if block.group("info").strip() != "console":
                continue
            lines = [
                line[len(block.group("indent")) :] for line in block.group("body").splitlines()
            ]
            assert lines and lines[0].startswith("$ "), (
                f"{_rel(page)}: a console block opens with $"
            )
            for line in lines:
                if line.startswith("$ "):
                    examples.append((_rel(page), line[2:].strip(), []))
                else:
                    examples[-1][2].append(line)
    return examples


EXAMPLES = _console_examples()


def _biasleak() -> list[str]:
    script = Path(sys.executable).with_name("biasleak")
    if script.is_file():
        return [str(script)]
    found = shutil.which("biasleak")
    return [found] if found else [sys.executable, "-m", "biasleak.sim.cli"]


def test_the_guide_has_console_examples_of_each_allowed_command() -> None:
    commands = {tuple(shlex.split(cmd)[1:2]) for _, cmd, _ in EXAMPLES}
    assert commands == set(ALLOWED), commands


@pytest.mark.parametrize(
    ("page", "command", "expected"),
    [pytest.param(*example, id=f"{example[0]}: {example[1]}") for example in EXAMPLES],
)
def test_console_examples_run_and_print_what_the_page_shows(
    page: str, command: str, expected: list[str]
) -> None:
    argv = shlex.split(command)
    assert argv[0] == "biasleak" and tuple(argv[1:2]) in ALLOWED, (
        f"{page}: console blocks may only run {ALLOWED} (use a bash block to show others): "
        f"{command!r}"
    )
    for arg in argv[2:]:
        assert not Path(arg).is_absolute() and ".." not in Path(arg).parts, (page, arg)
    result = subprocess.run(
        _biasleak() + argv[1:],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    got = [line.rstrip() for line in result.stdout.splitlines()]
    want = [line.rstrip() for line in expected]
    prefix = bool(want) and want[-1] == "..."
    if prefix:
        want = want[:-1]
        got = got[: len(want)]
    bad_file = argv[1] == "validate" and any(not line.endswith(": ok") for line in want)
    assert result.returncode == (2 if bad_file else 0), result.stdout[-2000:]
    if want or not prefix:
        assert got == want, f"{page}: {command!r} printed\n" + "\n".join(got)


@pytest.mark.parametrize("page", sorted(QUOTED), ids=str)
def test_quoted_files_are_quoted_as_they_are(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = [m.group("body").strip("\n") for m in FENCE.finditer(text)]
    for name in QUOTED[page]:
        quoted = (ROOT / name).read_text(encoding="utf-8").strip("\n")
        assert quoted in blocks, f"{page} no longer quotes {name} as it is"


def test_the_guide_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (the docs or test extra)")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(CONFIG),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
