"""Where a command writes, checked before its first run: folders, CSV files, log names, labels.

Every output a command will write is checked before any work starts (:func:`output_problems`):
``--log-dir``, ``--out``, ``paper``'s ``--sweeps`` and ``--to`` must be folders this process can
write in (missing ones are made; writability is tested with a real temporary file, since
permission bits mean nothing to root), and ``--csv`` a file in such a folder. A run's log is named
``<name>-seed<seed>``, cut to fit a file system with a hash of the full name
(:func:`log_name`). ``compare`` labels each scenario by its name, or by its file when two share a
name, so that no two policies pool into one row or one log (:func:`compare_labels`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["compare_labels", "log_name", "output_problems"]

NOT_A_FOLDER = "is a file, not a folder"
CANNOT_WRITE = "cannot write there ({reason})"
CSV_FOLDER = "--csv {path}: its folder {folder} {problem}"
CSV_IS_A_FOLDER = "--csv {path}: is a folder; give a file name"
SAME_FILE_TWICE = "compare: {file} is given twice"
SAME_LABEL = "compare: {first} and {second} would share the label {label!r}; rename one scenario"


def _folder_problem(folder: str | Path) -> str | None:
    """None when ``folder`` is, or has now been made, a folder this process can write in;
    else what is wrong with it."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        return NOT_A_FOLDER
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):  # a real write: permissions, read-only mounts
            pass
    except OSError as err:
        return CANNOT_WRITE.format(reason=err.strerror or err)
    return None


def _csv_problem(file: str) -> str | None:
    """None when the CSV file ``file`` can be written (its folder is made if missing)."""
    path = Path(file)
    if path.is_dir():
        return CSV_IS_A_FOLDER.format(path=file)
    problem = _folder_problem(path.parent)
    if problem is not None:
        return CSV_FOLDER.format(path=file, folder=path.parent, problem=problem)
    if path.exists() and not os.access(path, os.W_OK):
        return f"--csv {file}: " + CANNOT_WRITE.format(reason="permission denied")
    return None


def output_problems(folders: dict[str, str | Path | None], *, csv: str | None = None) -> list[str]:
    """One line per output that cannot be written: ``folders`` maps an option (``--log-dir``)
    to its folder (None: not used), ``csv`` is a ``--csv`` file. Missing folders are made."""
    problems = [
        f"{option} {folder}: {problem}"
        for option, folder in folders.items()
        if folder is not None and (problem := _folder_problem(folder)) is not None
    ]
    if csv is not None and (problem := _csv_problem(csv)) is not None:
        problems.append(problem)
    return problems


def log_name(name: str, seed: int) -> str:
    """A run's log name, ``<name>-seed<seed>`` (cut to fit a file system, with a hash)."""
    from biasleak.sim.runlog import log_stem

    return log_stem(f"{name}-seed{seed}")


def compare_labels(files: list[str], names: list[str]) -> list[tuple[str, str]] | str:
    """Each compared scenario's row label and log-name stem, or the line that refuses them.

    A scenario is labelled by its name; scenarios that share a name are labelled by their
    file's stem instead (by the path as given when the stems match too), and their logs are
    named ``<name>-<stem>-seed<seed>`` (a hash of the path for a path label), so that no two
    policies pool into one row or one log.
    One file given twice is refused.
    """
    from biasleak.mechanisms.digests import text_digest

    seen: dict[Path, str] = {}
    for file in files:
        key = Path(file).resolve()
        if key in seen:
            return SAME_FILE_TWICE.format(file=file)
        seen[key] = file
    stems = [Path(f).stem for f in files]
    out = []
    for file, name, stem in zip(files, names, stems, strict=True):
        if names.count(name) == 1:
            out.append((name, name))
        elif sum(s == stem for s, n in zip(stems, names, strict=True) if n == name) == 1:
            out.append((stem, f"{name}-{stem}"))
        else:
            out.append((file, f"{name}-{text_digest(str(Path(file).resolve()))[:8]}"))
    labels = [label for label, _ in out]
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            first = files[labels.index(label)]
            return SAME_LABEL.format(first=first, second=files[i], label=label)
    return out
