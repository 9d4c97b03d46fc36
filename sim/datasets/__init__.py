"""Bundled and user data sets, loaded so that developers never receive the protected attribute.

Every loader returns an :class:`AuditData`: ``data.public`` (features and labels of the training
split and of the audit set, the only part a developer may hold) and, separately,
``data.protected`` (the audit set's attribute, 1 = advantaged), which belongs to the compliance
side and the evaluator.

- :func:`load_adult`: UCI Adult, race (White vs Black) or sex; audit set from the test split.
- :func:`load_german`: UCI Statlog German Credit, sex from attribute 9.
- :func:`make_synthetic`: a chosen group split and score model (documented in full).
- :func:`load_csv`: a user's CSV file.
- :func:`load`: any of them by name, as scenario files do.

Adult and German Credit are distributed under CC BY 4.0 (UCI Machine Learning Repository; see
``data/LICENSE.md``) and verified by SHA-256 on every load.
"""

from __future__ import annotations

from typing import Any

from biasleak.agents.sandbox import is_sandboxed
from biasleak.sim.datasets._csv import load_csv
from biasleak.sim.datasets._synthetic import make_synthetic
from biasleak.sim.datasets._types import AuditData, PublicData, PublicView
from biasleak.sim.datasets._uci import DataIntegrityError, load_adult, load_german, read_bundled

__all__ = [
    "DATASETS",
    "AuditData",
    "DataIntegrityError",
    "PublicData",
    "PublicView",
    "load",
    "load_adult",
    "load_csv",
    "load_german",
    "make_synthetic",
    "read_bundled",
]

DATASETS = {
    "adult": load_adult,
    "german": load_german,
    "synthetic": make_synthetic,
    "csv": load_csv,
}
"""Loaders by name."""


def load(name: str, /, **options: Any) -> AuditData:
    """Load a data set by name (one of :data:`DATASETS`) with the loader's keyword options."""
    if is_sandboxed():  # a plugin strategy's process never loads data (it holds the attribute)
        raise PermissionError(
            f"data set {name!r} cannot be loaded in a sandboxed strategy process: strategies get "
            "the public view from the developer process, never the data files"
        )
    if name not in DATASETS:
        from biasleak.mechanisms._validation import did_you_mean

        hint = did_you_mean(str(name), list(DATASETS))
        raise ValueError(f"dataset must be one of {list(DATASETS)}; received {name!r}{hint}")
    return DATASETS[name](**options)
