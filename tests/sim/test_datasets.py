"""Data loaders: bundled UCI data, synthetic data, CSV files, isolation, integrity, base model."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from biasleak.agents.models import BaseModel, train_base_model
from biasleak.mechanisms.metrics import statistical_parity
from biasleak.sim.datasets import (
    DATASETS,
    AuditData,
    DataIntegrityError,
    PublicData,
    PublicView,
    _uci,
    load,
    load_adult,
    load_csv,
    load_german,
    make_synthetic,
    read_bundled,
)
from biasleak.sim.datasets._uci import _adult_rows, _german_rows


@pytest.fixture(scope="module")
def adult() -> AuditData:
    """UCI Adult with race protected and the whole filtered test split as the audit set."""
    return load_adult(protected="race", n=None)


@pytest.fixture(scope="module")
def adult_model(adult: AuditData) -> BaseModel:
    return train_base_model(adult.public.train)


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    """Empty the row caches before and after a test that changes how files are read."""
    _adult_rows.cache_clear()
    _german_rows.cache_clear()
    yield
    _adult_rows.cache_clear()
    _german_rows.cache_clear()


# --- bundled files -------------------------------------------------------------------------


def test_bundled_files_match_their_recorded_sha256() -> None:
    for name, expected in _uci.SHA256.items():
        text = read_bundled(name)
        assert hashlib.sha256(text.encode("ascii")).hexdigest() == expected


def test_adult_raw_rows_match_the_uci_release() -> None:
    assert read_bundled("adult.test.gz").splitlines()[0].startswith("|1x3 Cross validator")
    train, test = _adult_rows(False), _adult_rows(True)
    assert (len(train), len(test)) == (32_561, 16_281)
    for rows in (train, test):
        assert {r[8] for r in rows} == {
            "White",
            "Black",
            "Asian-Pac-Islander",
            "Amer-Indian-Eskimo",
            "Other",
        }
        assert {r[14] for r in rows} == {"<=50K", ">50K"}  # the test split's period is stripped
    assert sum(r[8] == "White" for r in train) == 27_816
    assert sum(r[8] == "Black" for r in train) == 3_124
    assert sum(r[8] == "White" for r in test) == 13_946
    assert sum(r[8] == "Black" for r in test) == 1_561


# --- Adult ---------------------------------------------------------------------------------


def test_adult_race_sizes_and_columns(adult: AuditData) -> None:
    assert adult.n == len(adult.public.audit) == 15_507
    assert (adult.n1, adult.n0) == (13_946, 1_561)
    assert len(adult.public.train) == 30_940 == 27_816 + 3_124
    assert adult.train_protected.sum() == 27_816
    assert (adult.advantaged, adult.disadvantaged) == ("White", "Black")
    assert adult.public.name == "adult"
    assert adult.public.protected_name == "race"
    for view in (adult.public.train, adult.public.audit):
        assert "race" not in view.columns
        assert "sex" in view.columns
        assert len(view.columns) == 13
        assert view.features.shape == (len(view), 13)


def test_adult_labels_are_income_over_50k(adult: AuditData) -> None:
    for view in (adult.public.train, adult.public.audit):
        assert view.labels.dtype == np.int8
        assert set(np.unique(view.labels).tolist()) == {0, 1}
        assert 0.15 < view.labels.mean() < 0.35
    kept = [r for r in _adult_rows(True) if r[8] in ("White", "Black")]
    assert adult.public.audit.labels.sum() == sum(r[14] == ">50K" for r in kept)
    # the whole test split, in file order: labels and attribute line up with the raw rows
    np.testing.assert_array_equal(adult.public.audit.labels, [r[14] == ">50K" for r in kept])
    np.testing.assert_array_equal(adult.protected, [r[8] == "White" for r in kept])


def test_adult_numeric_and_categorical_columns(adult: AuditData) -> None:
    view = adult.public.audit
    numeric = {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
    assert set(view.columns) - set(view.categorical) == numeric
    for k, name in enumerate(view.columns):
        kind = float if name in numeric else str
        assert all(type(v) is kind for v in view.features[:100, k])


def test_adult_sex_drops_sex_and_keeps_race() -> None:
    data = load_adult(protected="sex", n=500, seed=1)
    assert data.public.protected_name == "sex"
    assert (data.advantaged, data.disadvantaged) == ("Male", "Female")
    for view in (data.public.train, data.public.audit):
        assert "sex" not in view.columns
        assert "race" in view.columns
    assert len(data.public.train) == 32_561  # every training row is Male or Female
    assert data.n == 500
    assert 0 < data.n0 < data.n1


def test_adult_audit_draw_depends_only_on_the_seed() -> None:
    first = load_adult(n=1000, seed=3)
    again = load_adult(n=1000, seed=3)
    other = load_adult(n=1000, seed=4)
    assert first.n == again.n == other.n == 1000
    fnlwgt = first.public.audit.columns.index("fnlwgt")
    np.testing.assert_array_equal(first.public.audit.features, again.public.audit.features)
    np.testing.assert_array_equal(first.protected, again.protected)
    assert not np.array_equal(
        first.public.audit.features[:, fnlwgt], other.public.audit.features[:, fnlwgt]
    )
    assert first.n1 + first.n0 == 1000
    assert 0 < first.n0 < first.n1


# --- German credit -------------------------------------------------------------------------


def test_german_sizes_columns_and_labels() -> None:
    data = load_german()
    assert data.n == len(data.public.audit) == len(data.public.train) == 1000
    assert (data.n1, data.n0) == (690, 310)
    assert (data.advantaged, data.disadvantaged) == ("male", "female")
    assert data.public.protected_name == "sex"
    for view in (data.public.train, data.public.audit):
        assert "personal-status-sex" not in view.columns
        assert len(view.columns) == 19
    assert data.public.audit.labels.sum() == sum(r[20] == "1" for r in _german_rows())
    np.testing.assert_array_equal(
        data.protected, [r[8] in ("A91", "A93", "A94") for r in _german_rows()]
    )


def test_german_subset_is_drawn_from_the_data() -> None:
    data = load_german(n=200, seed=5)
    assert data.n == 200
    assert data.n1 + data.n0 == 200
    assert len(data.public.train) == 1000
    train_rows = {tuple(row): i for i, row in enumerate(data.public.train.features.tolist())}
    assert len(train_rows) == 1000  # every person is distinguishable
    for row, a in zip(data.public.audit.features.tolist(), data.protected, strict=True):
        assert data.train_protected[train_rows[tuple(row)]] == a
    other = load_german(n=200, seed=6)
    assert not np.array_equal(data.public.audit.features, other.public.audit.features)


# --- synthetic -----------------------------------------------------------------------------


def test_synthetic_group_sizes_and_features() -> None:
    data = make_synthetic(n=1000, n0=50)
    assert data.n == 1000
    assert (data.n1, data.n0) == (950, 50)
    assert len(data.public.train) == 2000
    assert int((data.train_protected == 0).sum()) == 100  # same proportion as the audit set
    assert len(make_synthetic(n=100, n0=10).public.train) == 1000
    view = data.public.audit
    assert view.categorical == ()
    assert view.columns == ("x0", "x1", "x2", "x3", "x4")
    values = view.features.astype(np.float64)
    assert np.all(np.isfinite(values))
    assert set(np.unique(view.labels).tolist()) == {0, 1}


def test_synthetic_same_seed_same_data() -> None:
    a = make_synthetic(n=300, n0=30, group_shift=0.5, seed=11)
    b = make_synthetic(n=300, n0=30, group_shift=0.5, seed=11)
    c = make_synthetic(n=300, n0=30, group_shift=0.5, seed=12)
    np.testing.assert_array_equal(a.public.audit.features, b.public.audit.features)
    np.testing.assert_array_equal(a.public.train.labels, b.public.train.labels)
    np.testing.assert_array_equal(a.protected, b.protected)
    assert not np.array_equal(a.public.audit.features, c.public.audit.features)


def test_synthetic_group_shift_sets_the_base_model_gap() -> None:
    shifted = make_synthetic(n=1000, n0=50, group_shift=1.0, seed=0)
    model = train_base_model(shifted.public.train)
    sp = statistical_parity(model.predict_proba(shifted.public.audit), protected=shifted.protected)
    assert sp > 0.1
    fair = make_synthetic(n=1000, n0=500, group_shift=0.0, seed=0)
    model = train_base_model(fair.public.train)
    sp = statistical_parity(model.predict_proba(fair.public.audit), protected=fair.protected)
    assert abs(sp) < 0.05


def test_synthetic_rejects_bad_group_sizes() -> None:
    for n0 in (0, 10, True):
        with pytest.raises(ValueError, match="n0 must be an integer"):
            make_synthetic(n=10, n0=n0)
    with pytest.raises(ValueError, match="n must be an integer >= 3"):
        make_synthetic(n=2, n0=1)


# --- CSV -----------------------------------------------------------------------------------


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _people(count: int = 40) -> list[list[object]]:
    """Rows of id, age, job, sex, income; the id identifies each person."""
    jobs = ("clerk", "nurse", "smith")
    return [
        [i, 20 + (i * 7) % 40, jobs[i % 3], "M" if i % 4 else "F", "high" if i % 5 < 2 else "low"]
        for i in range(count)
    ]


def test_csv_columns_labels_and_groups(tmp_path: Path) -> None:
    rows = _people()
    path = _write_csv(tmp_path / "people.csv", ["id", "age", "job", "sex", "income"], rows)
    data = load_csv(path, label="income", protected="sex", advantaged="M", positive="high")
    assert data.public.name == "people"
    assert data.public.protected_name == "sex"
    assert (data.advantaged, data.disadvantaged) == ("M", "other")
    by_id = {r[0]: r for r in rows}
    for view, a in ((data.public.audit, data.protected), (data.public.train, data.train_protected)):
        assert view.columns == ("id", "age", "job")
        assert view.categorical == ("job",)
        for feats, y, a_i in zip(view.features, view.labels, a, strict=True):
            assert type(feats[0]) is float and type(feats[1]) is float and type(feats[2]) is str
            person = by_id[int(feats[0])]
            assert feats[1] == person[1] and feats[2] == person[2]
            assert y == (person[4] == "high")
            assert a_i == (person[3] == "M")
    ids = [int(v) for v in data.public.audit.features[:, 0]]
    ids += [int(v) for v in data.public.train.features[:, 0]]
    assert sorted(ids) == list(range(40))
    assert data.n == 12  # default audit_fraction 0.3 of 40 rows


def test_csv_zero_one_labels_without_positive(tmp_path: Path) -> None:
    rows = [[i, int(i % 3 == 1), "A" if i % 2 else "B"] for i in range(20)]
    path = _write_csv(tmp_path / "binary.csv", ["x", "y", "grp"], rows)
    data = load_csv(path, label="y", protected="grp", advantaged="A")
    for view in (data.public.audit, data.public.train):
        assert view.columns == ("x",)
        assert view.categorical == ()
        for x, y in zip(view.features[:, 0], view.labels, strict=True):
            assert y == (int(x) % 3 == 1)
    for x, a in zip(data.public.audit.features[:, 0], data.protected, strict=True):
        assert a == (int(x) % 2 == 1)


def test_csv_audit_fraction_and_n(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "people.csv", ["id", "age", "job", "sex", "income"], _people())
    options = {"label": "income", "protected": "sex", "advantaged": "M", "positive": "high"}
    quarter = load_csv(path, audit_fraction=0.25, **options)
    assert (quarter.n, len(quarter.public.train)) == (10, 30)
    small = load_csv(path, audit_fraction=0.25, n=5, **options)
    assert (small.n, len(small.public.train)) == (5, 30)
    held = {int(v) for v in quarter.public.audit.features[:, 0]}
    assert {int(v) for v in small.public.audit.features[:, 0]} <= held
    again = load_csv(path, audit_fraction=0.25, n=5, **options)
    np.testing.assert_array_equal(small.public.audit.features, again.public.audit.features)


def test_csv_missing_label_column_suggests_a_name(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "people.csv", ["id", "age", "job", "sex", "income"], _people())
    with pytest.raises(ValueError, match="did you mean 'income'") as info:
        load_csv(path, label="incme", protected="sex", advantaged="M", positive="high")
    assert "['id', 'age', 'job', 'sex', 'income']" in str(info.value)
    assert "label column 'incme'" in str(info.value)
    with pytest.raises(ValueError, match="protected column 'gender'"):
        load_csv(path, label="income", protected="gender", advantaged="M", positive="high")


def test_csv_rejects_bad_labels_groups_sizes_and_paths(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "people.csv", ["id", "age", "job", "sex", "income"], _people())
    with pytest.raises(ValueError, match="must hold 0/1 unless positive="):
        load_csv(path, label="income", protected="sex", advantaged="M")
    with pytest.raises(ValueError, match="protected value 'M' is a third value besides 'X'"):
        load_csv(path, label="income", protected="sex", advantaged="X", positive="high")
    with pytest.raises(ValueError, match="must hold both groups"):
        load_csv(
            path,
            label="income",
            protected="sex",
            advantaged="X",
            disadvantaged=["F", "M"],
            positive="high",
        )
    one_group = [[*row[:3], "M", row[4]] for row in _people()]
    single = _write_csv(tmp_path / "men.csv", ["id", "age", "job", "sex", "income"], one_group)
    with pytest.raises(ValueError, match="must hold both groups"):
        load_csv(single, label="income", protected="sex", advantaged="M", positive="high")
    with pytest.raises(ValueError, match="n must be at most 12"):
        load_csv(path, label="income", protected="sex", advantaged="M", positive="high", n=13)
    with pytest.raises(ValueError, match="does not exist"):
        load_csv(
            tmp_path / "absent.csv", label="income", protected="sex", advantaged="M", positive="1"
        )
    with pytest.raises(ValueError, match="audit_fraction"):
        load_csv(
            path,
            label="income",
            protected="sex",
            advantaged="M",
            positive="high",
            audit_fraction=1.0,
        )


# --- dispatch ------------------------------------------------------------------------------


def test_load_dispatches_by_name() -> None:
    assert set(DATASETS) == {"adult", "german", "synthetic", "csv"}
    data = load("adult", protected="sex", n=50, seed=2)
    assert data.public.name == "adult"
    assert data.public.protected_name == "sex"
    assert data.n == 50
    np.testing.assert_array_equal(
        data.protected, load_adult(protected="sex", n=50, seed=2).protected
    )
    assert load("german", n=30).n == 30
    assert load("synthetic", n=20, n0=4).n0 == 4


def test_load_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(ValueError, match="did you mean 'adult'"):
        load("adlt")
    with pytest.raises(ValueError, match="dataset must be one of"):
        load("mnist")


# --- isolation -----------------------------------------------------------------------------


def _reachable(obj: object) -> Iterator[object]:
    """Every object reachable from ``obj`` through attributes, tuples, lists and array columns."""
    stack, seen = [obj], set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
            stack.extend(vars(item).values())
        elif isinstance(item, tuple | list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, np.ndarray) and item.ndim == 2:
            stack.extend(item[:, k] for k in range(item.shape[1]))


def _assert_isolated(data: AuditData) -> None:
    secret = data.protected
    found = list(_reachable(data.public))
    assert any(isinstance(x, PublicView) for x in found)
    for item in found:
        assert item is not secret and item is not data.train_protected
        if not isinstance(item, np.ndarray):
            continue
        assert not np.shares_memory(item, secret)
        assert not np.shares_memory(item, data.train_protected)
        if item.ndim != 1 or item.shape[0] not in (len(secret), len(data.train_protected)):
            continue
        target = secret if item.shape[0] == len(secret) else data.train_protected
        try:
            values = item.astype(np.float64)
        except (TypeError, ValueError):
            values = (item == data.advantaged).astype(np.float64)
        assert not np.array_equal(values, target)
        assert not np.array_equal(values, 1 - target)


def _assert_no_categorical_column_determines_a(data: AuditData) -> None:
    view = data.public.audit
    for k, name in enumerate(view.columns):
        if name not in view.categorical:
            continue
        groups: dict[object, set[int]] = {}
        for value, a in zip(view.features[:, k], data.protected, strict=True):
            groups.setdefault(value, set()).add(int(a))
        assert any(len(g) == 2 for g in groups.values()), name


def test_public_data_holds_no_protected_attribute(adult: AuditData, tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "people.csv", ["id", "age", "job", "sex", "income"], _people())
    datasets = [
        adult,
        load_adult(protected="sex", n=2000, seed=0),
        load_german(),
        load_german(n=100, seed=1),
        make_synthetic(n=500, n0=60, group_shift=1.0),
        load_csv(path, label="income", protected="sex", advantaged="M", positive="high"),
    ]
    for data in datasets:
        _assert_isolated(data)
        _assert_no_categorical_column_determines_a(data)


def test_public_types_have_no_field_for_attribute_values() -> None:
    public_fields = {f.name for f in dataclasses.fields(PublicData)}
    assert public_fields == {"name", "protected_name", "train", "audit", "description"}
    view_fields = {f.name for f in dataclasses.fields(PublicView)}
    assert view_fields == {"features", "labels", "columns", "categorical"}
    for name in public_fields | view_fields:
        assert name == "protected_name" or "protected" not in name
        assert name not in {"a", "attribute", "group", "groups", "sensitive", "race", "sex"}
    audit_fields = {f.name for f in dataclasses.fields(AuditData)}
    assert {"protected", "train_protected"} <= audit_fields
    assert "public" in audit_fields
    # the protected vectors are left out of repr, which could otherwise end up in logs
    assert "protected=" not in repr(make_synthetic(n=10, n0=3)).replace("protected_name", "")


# --- integrity -----------------------------------------------------------------------------


def test_wrong_recorded_hash_is_detected(
    monkeypatch: pytest.MonkeyPatch, fresh_caches: None
) -> None:
    assert issubclass(DataIntegrityError, ValueError)
    monkeypatch.setattr(_uci, "SHA256", {**_uci.SHA256, "german.data.gz": "0" * 64})
    with pytest.raises(DataIntegrityError) as info:
        load_german()
    message = str(info.value)
    assert "german.data.gz" in message
    assert "0" * 64 in message
    assert "Reinstall biasleak" in message


def test_altered_file_bytes_are_detected(
    monkeypatch: pytest.MonkeyPatch, fresh_caches: None
) -> None:
    real_files = _uci.resources.files

    class _Tampered:
        def __init__(self, parts: tuple[str, ...]) -> None:
            self.parts = parts

        def read_bytes(self) -> bytes:
            real = real_files("biasleak.sim.datasets").joinpath(*self.parts)
            raw = gzip.decompress(real.read_bytes())
            if self.parts[-1] == "adult.test.gz":
                raw = raw.replace(b">50K.", b"<=50K.", 1)  # one label flipped
            return gzip.compress(raw)

    class _Root:
        def joinpath(self, *parts: str) -> _Tampered:
            return _Tampered(parts)

    class _Resources:
        @staticmethod
        def files(package: str) -> _Root:
            return _Root()

    monkeypatch.setattr(_uci, "resources", _Resources)
    assert read_bundled("german.data.gz")  # untouched files still load
    with pytest.raises(DataIntegrityError, match=r"adult\.test\.gz .*Reinstall biasleak"):
        load_adult(n=100)


# --- bad input -----------------------------------------------------------------------------


def test_bad_audit_sizes_are_rejected() -> None:
    for n in (0, 2, True, "100"):
        with pytest.raises(ValueError, match="n must be an integer between 3 and 15507"):
            load_adult(n=n)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="between 3 and 15507") as info:
        load_adult(n=15_508)
    assert "15508" in str(info.value)
    with pytest.raises(ValueError, match="between 3 and 1000"):
        load_german(n=1001)
    with pytest.raises(ValueError, match="between 3 and 1000"):
        load_german(n=False)  # type: ignore[arg-type]
    assert load_german(n=np.int64(12)).n == 12  # a numpy integer is an integer


def test_adult_rejects_an_unknown_protected_attribute() -> None:
    with pytest.raises(ValueError, match=r"protected must be one of \['race', 'sex'\]") as info:
        load_adult(protected="age")  # type: ignore[arg-type]
    assert "'age'" in str(info.value)


def test_public_view_checks_shapes() -> None:
    feats = np.zeros((3, 2), dtype=object)
    with pytest.raises(ValueError, match="features must have shape"):
        PublicView(feats, np.zeros(3, dtype=np.int8), ("x",), ())
    with pytest.raises(ValueError, match="labels must have shape"):
        PublicView(feats, np.zeros(4, dtype=np.int8), ("x", "y"), ())
    with pytest.raises(ValueError, match="unknown columns"):
        PublicView(feats, np.zeros(3, dtype=np.int8), ("x", "y"), ("z",))


# --- base model ----------------------------------------------------------------------------


def test_base_model_accuracy_on_adult(adult: AuditData, adult_model: BaseModel) -> None:
    accuracy = adult_model.accuracy(adult.public.audit)
    assert 0.83 < accuracy < 0.87
    proba = adult_model.predict_proba(adult.public.audit)
    assert accuracy == pytest.approx(np.mean((proba >= 0.5) == (adult.public.audit.labels == 1)))


def test_base_model_probabilities(adult: AuditData, adult_model: BaseModel) -> None:
    proba = adult_model.predict_proba(adult.public.audit)
    assert proba.shape == (adult.n,)
    assert proba.dtype == np.float64
    assert np.all((proba >= 0.0) & (proba <= 1.0))
    assert 0.1 < proba.mean() < 0.4
    small = load_adult(n=20, seed=9)
    assert adult_model.predict_proba(small.public.audit).shape == (20,)


def test_base_model_refuses_a_single_label() -> None:
    view = make_synthetic(n=20, n0=5).public.train
    ones = PublicView(view.features, np.ones(len(view), dtype=np.int8), view.columns, ())
    with pytest.raises(ValueError, match="both label values"):
        train_base_model(ones)
