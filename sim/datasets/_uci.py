"""The two bundled UCI data sets: Adult (Census Income) and Statlog German Credit.

Both ship inside the package as gzip files (CC BY 4.0; see ``data/LICENSE.md``) and are checked
against their SHA-256 on every load, so a corrupted or altered copy is an error, not a silently
different experiment.

Adult: the training split (``adult.data``, 32,561 rows) trains the base model; the audit set is
drawn from the test split (``adult.test``, 16,281 rows). With ``protected="race"`` only White
(a = 1) and Black (a = 0) people are kept, as in the paper (Black is about 10% of them); with
``protected="sex"``, Male is a = 1 and Female a = 0. The protected column is removed from the
features. Label: income > 50K.

German credit: 1,000 people; sex derived from attribute 9 (A91, A93, A94 male = 1; A92, A95
female = 0): 690 male, 310 female. Label: good credit (code 1). The data set has no test split;
as in the paper's appendix E the whole set is the training data, and the audit set is drawn from
it (by default all 1,000 people), so the base model's accuracy on it is in-sample. Attribute 9 is
removed from the features.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from importlib import resources
from typing import Final, Literal

import numpy as np

from biasleak.agents.sandbox import is_sandboxed
from biasleak.mechanisms.digests import text_digest
from biasleak.sim.datasets._types import AuditData, PublicData, PublicView

SHA256: Final[dict[str, str]] = {
    "adult.data.gz": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
    "adult.test.gz": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
    "german.data.gz": "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
}
"""SHA-256 of each bundled file's uncompressed content (from the data set's provenance record)."""

ADULT_COLUMNS: Final = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)
ADULT_NUMERIC: Final = frozenset(
    {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
)
ADULT_PROTECTED: Final[dict[str, tuple[str, str]]] = {
    "race": ("White", "Black"),
    "sex": ("Male", "Female"),
}

GERMAN_COLUMNS: Final = (
    "checking-status",
    "duration-months",
    "credit-history",
    "purpose",
    "credit-amount",
    "savings",
    "employment-since",
    "installment-rate",
    "personal-status-sex",
    "other-debtors",
    "residence-since",
    "property",
    "age",
    "other-installment-plans",
    "housing",
    "existing-credits",
    "job",
    "people-liable",
    "telephone",
    "foreign-worker",
)
GERMAN_NUMERIC: Final = frozenset(
    {
        "duration-months",
        "credit-amount",
        "installment-rate",
        "residence-since",
        "age",
        "existing-credits",
        "people-liable",
    }
)
GERMAN_MALE: Final = frozenset({"A91", "A93", "A94"})
GERMAN_FEMALE: Final = frozenset({"A92", "A95"})

INTEGRITY: Final = (
    "bundled data file {name} is corrupted or altered: its SHA-256 is {actual}, expected "
    "{expected}. Reinstall biasleak"
)
SANDBOXED: Final = (
    "bundled data file {name} is not readable from a sandboxed plugin process: it holds the "
    "protected attribute"
)
AUDIT_SIZE: Final = "n must be an integer between 3 and {available} (the {what}); received {n!r}"


class DataIntegrityError(ValueError):
    """A bundled data file does not match its recorded SHA-256."""


def read_bundled(name: str) -> str:
    """Return a bundled file's text after checking its SHA-256.

    Refused in a sandboxed plugin process (:func:`biasleak.agents.sandbox.is_sandboxed`): the
    files hold the protected attribute that a plugin must not see.
    """
    if is_sandboxed():
        raise PermissionError(SANDBOXED.format(name=name))
    raw = gzip.decompress(
        resources.files("biasleak.sim.datasets").joinpath("data", name).read_bytes()
    )
    actual = text_digest(raw)
    if actual != SHA256[name]:
        raise DataIntegrityError(INTEGRITY.format(name=name, actual=actual, expected=SHA256[name]))
    return raw.decode("ascii")


def _parse_adult(text: str, *, test: bool) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("|"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 15:
            raise ValueError(f"malformed Adult row with {len(fields)} fields: {line[:60]!r}")
        if test:
            fields[14] = fields[14].rstrip(".")
        rows.append(fields)
    return rows


@lru_cache(maxsize=2)
def _adult_rows(test: bool) -> tuple[tuple[str, ...], ...]:
    text = read_bundled("adult.test.gz" if test else "adult.data.gz")
    return tuple(tuple(r) for r in _parse_adult(text, test=test))


def _view(
    rows: list[tuple[str, ...]] | tuple[tuple[str, ...], ...],
    columns: tuple[str, ...],
    numeric: frozenset[str],
    keep: list[int],
    labels: np.ndarray,
) -> PublicView:
    names = tuple(columns[i] for i in keep)
    feats = np.empty((len(rows), len(keep)), dtype=object)
    for k, i in enumerate(keep):
        col = [r[i] for r in rows]
        feats[:, k] = [float(v) for v in col] if columns[i] in numeric else col
    categorical = tuple(c for c in names if c not in numeric)
    return PublicView(feats, labels.astype(np.int8), names, categorical)


def _check_n(n: int | None, available: int, what: str) -> int:
    if n is None:
        return available
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 3 <= n <= available:
        raise ValueError(AUDIT_SIZE.format(available=available, what=what, n=n))
    return int(n)


def load_adult(
    *,
    protected: Literal["race", "sex"] = "race",
    n: int | None = None,
    seed: int = 0,
    split: Literal["test", "all"] = "test",
    drop_missing: bool = False,
) -> AuditData:
    """Load UCI Adult with an audit set of ``n`` people drawn (without replacement, by ``seed``)
    from the test split, or from both splits with ``split="all"`` (the whole population; the
    base model then trains on people of the audit set, which developers hold anyway);
    ``n=None`` uses every eligible person. ``drop_missing`` drops rows with a missing value
    (``?``): race, all splits, no missing values gives 43,131 people, 4,228 of them Black."""
    if protected not in ADULT_PROTECTED:
        raise ValueError(
            f"protected must be one of {sorted(ADULT_PROTECTED)} for the adult data set; "
            f"received {protected!r}"
        )
    adv, dis = ADULT_PROTECTED[protected]
    col = ADULT_COLUMNS.index(protected)
    keep = [i for i in range(len(ADULT_COLUMNS)) if i != col]
    if split not in ("test", "all"):
        raise ValueError(f"split must be 'test' or 'all'; received {split!r}")
    splits = []
    for test in (False, True):
        rows = [r for r in _adult_rows(test) if r[col] in (adv, dis)]
        if drop_missing:
            rows = [r for r in rows if "?" not in r]
        splits.append(rows)
    train_rows, test_rows = splits
    if split == "all":
        test_rows = train_rows + test_rows
    where = "test split" if split == "test" else "data set"
    missing = " and no missing value" if drop_missing else ""
    size = _check_n(
        n,
        len(test_rows),
        f"people in the Adult {where} with {protected} in {{{adv}, {dis}}}" + missing,
    )
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(test_rows), size=size, replace=False))
    audit_rows = [test_rows[i] for i in pick]

    def parts(rows: list[tuple[str, ...]]) -> tuple[PublicView, np.ndarray]:
        y = np.array([r[14] == ">50K" for r in rows], dtype=np.int8)
        a = np.array([r[col] == adv for r in rows], dtype=np.int8)
        return _view(rows, ADULT_COLUMNS, ADULT_NUMERIC, keep, y), a

    train, a_train = parts(train_rows)
    audit, a_audit = parts(audit_rows)
    public = PublicData(
        "adult",
        protected,
        train,
        audit,
        f"UCI Adult; audit set: {size} of {len(test_rows)} "
        f"{'test-split people' if split == 'test' else 'people of both splits'} "
        f"({adv} vs {dis}{', no missing values' if drop_missing else ''}), seed {seed}",
    )
    return AuditData(public, a_audit, a_train, adv, dis, train_disjoint=split == "test")


@lru_cache(maxsize=1)
def _german_rows() -> tuple[tuple[str, ...], ...]:
    rows = []
    for line in read_bundled("german.data.gz").splitlines():
        if line.strip():
            fields = line.split()
            if len(fields) != 21:
                raise ValueError(f"malformed German credit row: {line[:60]!r}")
            rows.append(tuple(fields))
    return tuple(rows)


def load_german(*, n: int | None = None, seed: int = 0) -> AuditData:
    """Load Statlog German Credit with sex as the protected attribute (male = 1).

    The audit set is ``n`` people drawn by ``seed`` (all 1,000 when ``n`` is None, as in the
    paper); the training split is the whole data set.
    """
    rows = _german_rows()
    size = _check_n(n, len(rows), "people in the German credit data")
    col = GERMAN_COLUMNS.index("personal-status-sex")
    keep = [i for i in range(len(GERMAN_COLUMNS)) if i != col]
    if size == len(rows):
        audit_rows = list(rows)
    else:
        rng = np.random.default_rng(seed)
        audit_rows = [rows[i] for i in np.sort(rng.choice(len(rows), size=size, replace=False))]

    def parts(
        rs: list[tuple[str, ...]] | tuple[tuple[str, ...], ...],
    ) -> tuple[PublicView, np.ndarray]:
        codes = {r[col] for r in rs} - GERMAN_MALE - GERMAN_FEMALE
        if codes:
            raise ValueError(f"unknown personal-status-sex codes in German credit: {codes}")
        y = np.array([r[20] == "1" for r in rs], dtype=np.int8)
        a = np.array([r[col] in GERMAN_MALE for r in rs], dtype=np.int8)
        return _view(rs, GERMAN_COLUMNS, GERMAN_NUMERIC, keep, y), a

    train, a_train = parts(rows)
    audit, a_audit = parts(audit_rows)
    public = PublicData(
        "german",
        "sex",
        train,
        audit,
        f"UCI Statlog German Credit; audit set: {size} of {len(rows)} people, seed {seed}; "
        "the training split is the whole data set",
    )
    return AuditData(public, a_audit, a_train, "male", "female", train_disjoint=False)
