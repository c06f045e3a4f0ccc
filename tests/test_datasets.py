"""Tests of dperm.datasets: shapes, labels, public-schema scaling, errors.

Real-data tests use the ``shared_data`` fixture (skipped when ../shared/data is
absent).  Expensive loads are cached per (path, options) so the file stays fast.
"""

from __future__ import annotations

import functools
import gzip
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from dperm import datasets as D
from dperm._validation import row_norms
from dperm.datasets.synthetic import _synthetic_second_moment
from dperm.exceptions import (
    DataFileNotFoundError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
)

TOL = 1e-12


def _check_bounded(ds: D.Dataset) -> None:
    for X in (ds.X_train, ds.X_test):
        if X is None:
            continue
        assert row_norms(X).max() <= ds.row_norm_bound * (1 + 1e-12)
        data = X.data if sp.issparse(X) else X
        assert np.all(np.isfinite(data))


def _check_unit_features(ds: D.Dataset) -> None:
    """Loaded with normalize_rows=False: every feature in [0, 1]."""
    for X in (ds.X_train, ds.X_test):
        if X is not None:
            assert X.min() >= 0.0 and X.max() <= 1.0


def _onehot_groups_ok(ds: D.Dataset, schema: D.Schema) -> None:
    """Each one-hot group of each row holds at most one 1 (after undoing the row scaling)."""
    scale = schema.worst_case_norm / ds.row_norm_bound
    j = 0
    for c in schema.columns:
        if isinstance(c, D.NumericColumn):
            j += 1
            continue
        block = np.round(ds.X_train[:, j : j + len(c.categories)] * scale, 12)
        assert set(np.unique(block)) <= {0.0, 1.0}
        assert block.sum(axis=1).max() <= 1.0
        j += len(c.categories)


@functools.lru_cache(maxsize=4)
def _cached(name: str, home: str, normalize_rows: bool = True) -> D.Dataset:
    return D.load(name, home, normalize_rows=normalize_rows)


# ---------------------------------------------------------------------------
# registry, names, errors
# ---------------------------------------------------------------------------


def test_available_and_default():
    names = D.available_datasets()
    assert D.DEFAULT_DATASET == "breast-cancer"
    assert set(names) >= {  # other modules may register more (e.g. "group-sparse")
        "breast-cancer",
        "adult",
        "kddcup99",
        "mnist",
        "synthetic-l",
        "synthetic-h",
        "california-housing",
        "casp",
    }
    assert len(names) == len(set(names))


def test_unknown_name_lists_available():
    with pytest.raises(UnknownNameError) as e:
        D.load("no-such-data")
    msg = str(e.value)
    assert "no-such-data" in msg
    for n in D.available_datasets():
        assert n in msg
    with pytest.raises(UnknownNameError):
        D.load(3)


def test_unknown_option_is_rejected():
    with pytest.raises(UnknownNameError, match="n_samples"):
        D.load("breast-cancer", n_samples=10)


def test_missing_file_names_expected_path(tmp_path):
    with pytest.raises(DataFileNotFoundError) as e:
        D.load("adult", tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "adult" / "adult.data.gz") in msg
    assert "--data-home" in msg
    for name, rel in (
        ("kddcup99", "kddcup99/kddcup.data_10_percent.gz"),
        ("mnist", "mnist/train-images-idx3-ubyte.gz"),
        ("casp", "casp/CASP.csv.gz"),
        ("california-housing", "california_housing/cal_housing.data.gz"),
    ):
        with pytest.raises(DataFileNotFoundError, match=str(tmp_path / rel)):
            D.load(name, tmp_path)
    # a data_home that is not a folder
    with pytest.raises(DataFileNotFoundError, match="not a directory"):
        D.load("adult", tmp_path / "nope")


def test_data_home_resolution(tmp_path, monkeypatch):
    # env var pointing to an empty folder: the error names the file in that folder
    monkeypatch.setenv("DPERM_DATA_HOME", str(tmp_path))
    with pytest.raises(DataFileNotFoundError, match=str(tmp_path / "casp")):
        D.load("casp")
    # no env var and no ../shared/data next to the working directory
    monkeypatch.delenv("DPERM_DATA_HOME")
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    with pytest.raises(DataFileNotFoundError, match="DPERM_DATA_HOME"):
        D.load("casp")
    # built-in datasets need no data folder
    assert D.load("breast-cancer").n_train > 0


def test_data_home_from_env(shared_data, monkeypatch):
    monkeypatch.setenv("DPERM_DATA_HOME", str(shared_data))
    ds = D.load("california-housing")
    assert ds.X_train.shape == (16512, 8)


def test_data_home_relative_to_cwd(shared_data, monkeypatch, tmp_path):
    monkeypatch.delenv("DPERM_DATA_HOME", raising=False)
    (tmp_path / "shared").symlink_to(shared_data.parent)
    work = tmp_path / "proj"
    work.mkdir()
    monkeypatch.chdir(work)
    ds = D.load("casp")
    assert ds.task == "regression"


# ---------------------------------------------------------------------------
# breast cancer (built in)
# ---------------------------------------------------------------------------


def test_breast_cancer_default():
    ds = D.load()
    assert ds.name == "breast-cancer"
    assert ds.task == "binary"
    assert ds.classes == (-1.0, 1.0)  # the public label set the CLI and bench pass
    # 427 non-test rows, of which a stratified public_fraction = 0.1 of all rows (57)
    # only sets the log1p ranges and is never fitted on
    assert ds.X_train.shape == (370, 30) and ds.X_test.shape == (142, 30)
    assert ds.n_features == 30 and len(ds.feature_names) == 30
    assert ds.X_train.dtype == np.float64 and ds.y_train.dtype == np.float64
    assert set(np.unique(ds.y_train)) == {-1.0, 1.0}
    # malignant (212 of 569 rows) is the positive class
    assert (ds.y_train == 1).sum() + (ds.y_test == 1).sum() < 212
    # stratified: both parts have ≈ 212/569 positives
    assert abs((ds.y_test == 1).mean() - 212 / 569) < 0.01
    assert ds.row_norm_bound == 1.0 and ds.label_bound is None
    _check_bounded(ds)
    assert "malignant → +1" in ds.description
    assert "X_train" not in repr(ds)  # arrays are kept out of the repr


def test_breast_cancer_unnormalized_features_closed_form():
    from sklearn.datasets import load_breast_cancer

    ds = D.load("breast_cancer", normalize_rows=False, test_size=0.0, public_fraction=0.0)
    assert ds.X_test is None and ds.y_test is None
    assert ds.row_norm_bound == pytest.approx(math.sqrt(30))
    _check_unit_features(ds)
    _check_bounded(ds)
    # compare, as multisets of rows, with the closed form log1p(x)/(1 + log1p(x)),
    # computed here independently of the loader
    raw = load_breast_cancer()
    L = np.log1p(raw.data)
    expect = L / (1.0 + L)
    key = np.lexsort(expect.T[::-1])
    got_key = np.lexsort(ds.X_train.T[::-1])
    np.testing.assert_allclose(ds.X_train[got_key], expect[key], rtol=0, atol=TOL)


def test_breast_cancer_bounds_come_from_public_rows_only():
    """The default log1p ranges are the min/max of a public part of the rows that is
    disjoint from the training and test rows: changing a training row changes no
    other row's features (the map is fixed before the private rows are touched)."""
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer()
    ds = D.load("breast-cancer", normalize_rows=False)
    full = D.load("breast-cancer", normalize_rows=False, test_size=0.0, public_fraction=0.0)
    assert ds.n_train + ds.X_test.shape[0] + 57 == raw.data.shape[0]
    assert full.n_train == raw.data.shape[0]
    # the features are (log1p(x) − log1p(lo)) / (log1p(hi) − log1p(lo)) with (lo, hi)
    # the extremes of the public rows; so the public rows' own features span [0, 1]
    # per column while train/test rows are clipped into it
    assert ds.X_train.min() >= 0.0 and ds.X_train.max() <= 1.0
    assert "public_fraction=0.1" in ds.description
    with pytest.raises(InvalidPrivacyParameter, match="public_fraction"):
        D.load("breast-cancer", public_fraction=0.9)


def test_breast_cancer_split_reproducible():
    a, b = D.load(random_state=0), D.load(random_state=0)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    c = D.load(random_state=1)
    assert not np.array_equal(a.X_train, c.X_train)
    with pytest.raises(InvalidPrivacyParameter, match="test_size"):
        D.load(test_size=1.0)


# ---------------------------------------------------------------------------
# synthetic
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, n_train, n_test, d", [("synthetic-l", 8000, 2000, 40), ("synthetic-h", 1600, 400, 2000)]
)
def test_synthetic_shapes(name, n_train, n_test, d):
    ds = D.load(name, random_state=3)
    assert ds.X_train.shape == (n_train, d) and ds.X_test.shape == (n_test, d)
    assert set(np.unique(ds.y_train)) == {-1.0, 1.0}
    assert ds.row_norm_bound == 1.0
    _check_bounded(ds)
    again = D.load(name, random_state=3)
    np.testing.assert_array_equal(ds.X_test, again.X_test)
    raw = D.load(name, random_state=3, normalize_rows=False)
    assert raw.row_norm_bound == math.inf


def test_synthetic_public_constant_matches_generator():
    """The analytic E‖x‖² behind the public scale agrees with simulation."""
    from sklearn.datasets import make_classification

    m2 = _synthetic_second_moment(40, 30, 2, 2.0)
    assert m2 == pytest.approx(30 * (10 + 4) * (1 + 2 / 3) + 8)
    sims = [
        (make_classification(2000, 40, n_informative=30, class_sep=2.0, random_state=s)[0] ** 2)
        .sum(axis=1)
        .mean()
        for s in range(20)
    ]
    # across generator draws the mean is within a few percent of the formula
    assert np.mean(sims) == pytest.approx(m2, rel=0.08)


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------


def _write_csv(path: Path, n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "income": rng.exponential(50_000, n).round(2),
            "city": rng.choice(["paris", "oslo", "rome"], n),
            "label": rng.choice(["yes", "no"], n),
        }
    )
    frame.to_csv(path, index=False)
    return frame


BOUNDS = {"age": (18, 100), "income": (0, 1e6)}
CATS = {"city": ["paris", "oslo", "rome", "lima"]}
LABELS = ["no", "yes"]


def test_csv_requires_bounds(tmp_path):
    p = tmp_path / "d.csv"
    _write_csv(p)
    with pytest.raises(InvalidPrivacyParameter) as e:
        D.load_csv(p, "label", categories=CATS, bounds={"age": (18, 100)}, classes=LABELS)
    assert "income" in str(e.value) and "allow_data_bounds" in str(e.value)


def test_csv_public_schema(tmp_path):
    p = tmp_path / "d.csv"
    frame = _write_csv(p)
    ds = D.load_csv(
        p,
        "label",
        bounds=BOUNDS,
        categories=CATS,
        log_columns=["income"],
        positive_label="yes",
        test_size=0.0,
        normalize_rows=False,
    )
    assert ds.task == "binary" and ds.X_test is None
    assert ds.feature_names == [
        "age",
        "income",
        "city=paris",
        "city=oslo",
        "city=rome",
        "city=lima",
    ]
    assert ds.row_norm_bound == pytest.approx(math.sqrt(3))
    assert ds.n_unknown_categories == 0
    _check_unit_features(ds)
    # all rows in the training set (test_size=0), in a random order: compare as multisets
    expect = np.column_stack(
        [
            (frame["age"] - 18) / 82,
            np.log1p(frame["income"]) / math.log1p(1e6),
            (frame["city"].to_numpy()[:, None] == np.array(CATS["city"])).astype(float),
        ]
    )
    y_expect = np.where(frame["label"] == "yes", 1.0, -1.0)
    order_e = np.lexsort(np.column_stack([expect, y_expect]).T[::-1])
    order_g = np.lexsort(np.column_stack([ds.X_train, ds.y_train]).T[::-1])
    np.testing.assert_allclose(ds.X_train[order_g], expect[order_e], atol=TOL)
    np.testing.assert_array_equal(ds.y_train[order_g], y_expect[order_e])
    # the normalised version has ‖x‖ ≤ 1
    _check_bounded(D.load_csv(p, "label", bounds=BOUNDS, categories=CATS, classes=LABELS))


def test_csv_regression_centers_numeric_columns_at_public_midpoints(tmp_path):
    """A regression CSV maps numeric columns to [−1, 1] (public midpoint ↦ 0) by default;
    one-hot columns stay 0/1; classification keeps [0, 1]; center= overrides both."""
    p = tmp_path / "r.csv"
    frame = _write_csv(p)
    frame["y"] = np.linspace(-2.0, 3.0, len(frame)) + 0.25
    frame.drop(columns="label").to_csv(p, index=False)
    kw = dict(bounds=BOUNDS, categories=CATS, test_size=0.0, normalize_rows=False)
    reg = D.load_csv(p, "y", task="regression", label_bound=5.0, **kw)
    plain = D.load_csv(p, "y", task="regression", label_bound=5.0, center=False, **kw)
    np.testing.assert_allclose(reg.X_train[:, :2], 2 * plain.X_train[:, :2] - 1, atol=TOL)
    np.testing.assert_array_equal(reg.X_train[:, 2:], plain.X_train[:, 2:])
    assert reg.X_train[:, :2].min() < 0 and reg.row_norm_bound == plain.row_norm_bound
    assert "[−1, 1]" in reg.description
    _check_bounded(
        D.load_csv(p, "y", task="regression", label_bound=5.0, bounds=BOUNDS, categories=CATS)
    )
    _write_csv(tmp_path / "c.csv")
    _check_unit_features(D.load_csv(tmp_path / "c.csv", "label", positive_label="yes", **kw))
    assert (
        D.load_csv(
            tmp_path / "c.csv", "label", positive_label="yes", center=True, **kw
        ).X_train.min()
        < 0
    )


def test_csv_one_record_changes_one_row(tmp_path):
    """End to end: two files differing in one record give features differing in one row
    (the split is the same: it reads the row count only)."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    frame = _write_csv(a)
    frame.loc[17, ["age", "income"]] = [150, 1e12]  # an outlier (clipped to the bounds)
    frame.loc[17, "city"] = "lima"  # a category no other record holds
    frame.loc[17, "label"] = "yes" if frame.loc[17, "label"] == "no" else "no"  # its label
    frame.to_csv(b, index=False)
    kw = dict(bounds=BOUNDS, categories=CATS, test_size=0.25, random_state=5, classes=LABELS)
    da, db = D.load_csv(a, "label", **kw), D.load_csv(b, "label", **kw)
    assert (da.n_train, da.n_test) == (db.n_train, db.n_test)
    diff_tr = np.flatnonzero(np.any(da.X_train != db.X_train, axis=1) | (da.y_train != db.y_train))
    diff_te = np.flatnonzero(np.any(da.X_test != db.X_test, axis=1) | (da.y_test != db.y_test))
    assert len(diff_tr) + len(diff_te) == 1
    assert da.row_norm_bound == db.row_norm_bound == 1.0
    assert da.task == db.task and da.classes == db.classes and da.label_names == db.label_names


def test_csv_data_bounds_warn(tmp_path):
    p = tmp_path / "d.csv"
    frame = _write_csv(p)
    with pytest.warns(PrivacyLeakWarning, match="income"):
        ds = D.load_csv(
            p,
            "label",
            categories=CATS,
            bounds={"age": (18, 100)},
            allow_data_bounds=True,
            normalize_rows=False,
            classes=LABELS,
        )
    assert "privacy leak" in ds.description
    j = ds.feature_names.index("income")
    X = np.vstack([ds.X_train, ds.X_test])
    # min-max of the data: the extremes land exactly on 0 and 1
    assert X[:, j].min() == 0.0 and X[:, j].max() == 1.0
    assert frame["income"].max() > 0
    # a category list is a bound: refused without the opt-in, like a numeric bound
    with pytest.raises(InvalidPrivacyParameter, match=r"categorical column\(s\) \['city'\]"):
        D.load_csv(p, "label", bounds=BOUNDS, classes=LABELS)
    with pytest.warns(PrivacyLeakWarning, match="city"):
        ds = D.load_csv(p, "label", bounds=BOUNDS, allow_data_bounds=True, classes=LABELS)
    assert ds.encoder.dp_event_.to_dict()["kind"] == "NonPrivate"
    assert [f for f in ds.feature_names if f.startswith("city=")] == [
        "city=oslo",
        "city=paris",
        "city=rome",
    ]


def test_csv_no_warning_with_public_schema(tmp_path):
    p = tmp_path / "d.csv"
    _write_csv(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        D.load_csv(p, "label", bounds=BOUNDS, categories=CATS, classes=LABELS)


def test_csv_labels_and_tasks(tmp_path):
    p = tmp_path / "r.csv"
    rng = np.random.default_rng(1)
    n = 300
    pd.DataFrame(
        {
            "x": rng.uniform(0, 1, n),
            "k": rng.integers(0, 3, n),
            "y": rng.normal(0, 3, n),
            "c": rng.choice(["a", "b", "c"], n),
        }
    ).to_csv(p, index=False)
    # label_bound implies regression
    reg = D.load_csv(
        p, "y", bounds={"x": (0, 1), "k": (0, 2)}, categories={"c": list("abc")}, label_bound=9.0
    )
    assert reg.task == "regression" and reg.label_bound == 9.0 and reg.classes is None
    assert np.abs(np.concatenate([reg.y_train, reg.y_test])).max() <= 9.0
    assert reg.n_clipped_labels == int(np.sum(np.abs(pd.read_csv(p)["y"]) > 9.0))
    # the public label list decides the task and the encoding (0..k−1 in list order)
    num = {"x": (0, 1), "k": (0, 2), "y": (-10, 10)}
    multi = D.load_csv(p, "c", bounds=num, classes=["c", "b", "a"])
    assert multi.task == "multiclass" and multi.y_train.dtype == np.int64
    assert multi.classes == (0, 1, 2) and multi.label_names == ("c", "b", "a")
    raw = pd.read_csv(p)["c"].to_numpy()
    enc = np.concatenate([multi.y_train, multi.y_test])
    order = np.concatenate(D._prepare.file_split(n, 0.2, 0))
    np.testing.assert_array_equal(
        enc, np.array([2, 1, 0])[np.searchsorted(["a", "b", "c"], raw)][order]
    )
    # integer-valued categorical column read as text: categories given as ints match
    cat_k = D.load_csv(
        p,
        "c",
        categorical=["k"],
        categories={"k": [0, 1, 2]},
        bounds={"x": (0, 1), "y": (-10, 10)},
        classes=list("abc"),
    )
    assert cat_k.n_unknown_categories == 0
    assert "k=0" in cat_k.feature_names
    with pytest.raises(UnknownNameError, match="task"):
        D.load_csv(p, "c", bounds=num, task="ranking")
    # positive_label: one-vs-rest (a public rule), names ("not zebra", "zebra")
    ovr = D.load_csv(p, "c", bounds=num, positive_label="zebra")
    assert ovr.task == "binary" and ovr.label_names == ("not zebra", "zebra")
    assert (ovr.y_train == -1).all()


def test_csv_bad_inputs(tmp_path):
    p = tmp_path / "d.csv"
    _write_csv(p)
    with pytest.raises(DataFileNotFoundError, match=r"missing\.csv"):
        D.load_csv(tmp_path / "missing.csv", "label")
    kw = dict(categories=CATS, classes=LABELS)
    with pytest.raises(UnknownNameError, match="target"):
        D.load_csv(p, "nope", bounds=BOUNDS, **kw)
    with pytest.raises(UnknownNameError, match="weight"):
        D.load_csv(p, "label", bounds={**BOUNDS, "weight": (0, 1)}, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="age"):
        D.load_csv(p, "label", bounds={**BOUNDS, "age": (5, 5)}, **kw)


# ---------------------------------------------------------------------------
# svmlight
# ---------------------------------------------------------------------------


def _write_svmlight(path: Path, n=50, d=30, seed=0, labels=(0, 1)):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="lil", random_state=seed) * 10
    X[3, :] = 0  # an all-zero row
    X = sp.csr_matrix(X)
    y = rng.choice(labels, n)
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return sp.csr_matrix(X), y


def test_svmlight_sparse_unit_rows(tmp_path):
    p, q = tmp_path / "train.svm", tmp_path / "test.svm"
    X, y = _write_svmlight(p, labels=(1, 2))
    _write_svmlight(q, n=20, seed=1, labels=(1, 2))
    ds = D.load_svmlight(p, n_features=30, test_path=q, classes=[1, 2])
    assert sp.isspmatrix_csr(ds.X_train) and sp.isspmatrix_csr(ds.X_test)
    assert ds.X_train.dtype == np.float64
    assert ds.X_train.shape == (50, 30) and ds.X_test.shape == (20, 30)
    assert ds.task == "binary" and ds.row_norm_bound == 1.0
    np.testing.assert_array_equal(ds.y_train, np.where(y == 2, 1.0, -1.0))
    norms = row_norms(ds.X_train)
    assert norms[3] == 0.0
    nz = norms > 0
    np.testing.assert_allclose(norms[nz], 1.0, rtol=1e-12)
    assert norms.max() <= 1.0
    # each row is its own raw row over its own norm (a per-record map)
    Xd = X.toarray()
    raw_norms = np.linalg.norm(Xd, axis=1)
    np.testing.assert_allclose(
        ds.X_train.toarray()[nz], Xd[nz] / raw_norms[nz, None], rtol=1e-12, atol=TOL
    )


def test_svmlight_raw_and_errors(tmp_path):
    p = tmp_path / "a.svm"
    X, _ = _write_svmlight(p)
    ds = D.load_svmlight(p, normalize_rows=False, n_features=30, classes=[0, 1])
    assert ds.row_norm_bound == math.inf and ds.X_test is None
    np.testing.assert_allclose(ds.X_train.toarray(), X.toarray(), rtol=1e-6)
    with pytest.raises(DataFileNotFoundError, match=r"b\.svm"):
        D.load_svmlight(tmp_path / "b.svm")
    with pytest.raises(DataFileNotFoundError, match=r"t\.svm"):
        D.load_svmlight(p, test_path=tmp_path / "t.svm")
    with pytest.raises(InvalidPrivacyParameter, match="not read off the data"):
        D.load_svmlight(p, n_features=30)  # the task is never read off the labels
    with pytest.raises(LabelError, match=r"outside the public label list \[0, 2\]"):
        D.load_svmlight(p, n_features=30, classes=[0, 2])


# ---------------------------------------------------------------------------
# real data (skipped when ../shared/data is absent)
# ---------------------------------------------------------------------------


def test_adult_counts(shared_data):
    ds = _cached("adult", str(shared_data))
    assert ds.classes == (-1.0, 1.0)
    assert ds.X_train.shape == (30162, 104) and ds.X_test.shape == (15060, 104)
    assert set(np.unique(ds.y_test)) == {-1.0, 1.0}
    assert (ds.y_train == 1).sum() == 7508 and (ds.y_test == 1).sum() == 3700
    assert (ds.y_train == 1).mean() == pytest.approx(0.249, abs=0.001)
    assert ds.n_unknown_categories == 0
    assert ds.row_norm_bound == 1.0
    _check_bounded(ds)
    raw = _cached("adult", str(shared_data), False)
    assert raw.row_norm_bound == pytest.approx(math.sqrt(13))
    _check_unit_features(raw)
    _onehot_groups_ok(raw, D.public_schema("adult"))
    # every one-hot group has exactly one 1 (no missing, no unknown)
    groups = [c for c in D.public_schema("adult").columns if isinstance(c, D.CategoricalColumn)]
    names = np.array(raw.feature_names)
    for g in groups:
        cols = np.flatnonzero(np.char.startswith(names, g.name + "="))
        assert np.all(raw.X_train[:, cols].sum(axis=1) == 1.0)


def test_adult_plain_flat_files(shared_data, tmp_path):
    for f in ("adult.data", "adult.test"):
        with gzip.open(shared_data / "adult" / f"{f}.gz") as src, open(tmp_path / f, "wb") as dst:
            shutil.copyfileobj(src, dst)
    ds = D.load("adult", tmp_path)
    ref = _cached("adult", str(shared_data))
    np.testing.assert_array_equal(ds.X_train, ref.X_train)
    np.testing.assert_array_equal(ds.y_test, ref.y_test)


def test_adult_nonprivate_accuracy(shared_data):
    """Validates the encoding: plain logistic regression reaches the usual ≈ 84–85 %."""
    ds = _cached("adult", str(shared_data))
    acc = LogisticRegression(max_iter=2000).fit(ds.X_train, ds.y_train).score(ds.X_test, ds.y_test)
    assert 0.835 <= acc <= 0.86


def test_kddcup99(shared_data):
    ds = _cached("kddcup99", str(shared_data))
    assert ds.X_train.shape == (56000, 118) and ds.X_test.shape == (14000, 118)
    assert ds.n_unknown_categories == 0
    _check_bounded(ds)
    # attacks are 396,743 of 494,021 rows; a uniform sample of 70,000 has a
    # fraction within 5 standard errors (≈ 0.0075) of it
    y = np.concatenate([ds.y_train, ds.y_test])
    p = 396_743 / 494_021
    assert abs((y == 1).mean() - p) < 5 * math.sqrt(p * (1 - p) / y.size)
    schema = D.public_schema("kddcup99")
    assert [len(c.categories) for c in schema.columns if isinstance(c, D.CategoricalColumn)] == [
        3,
        66,
        11,
    ]
    _onehot_groups_ok(ds, schema)
    assert ds.row_norm_bound == 1.0
    assert schema.worst_case_norm == pytest.approx(math.sqrt(41))


def test_kddcup99_nonprivate_accuracy(shared_data):
    ds = _cached("kddcup99", str(shared_data))
    clf = LogisticRegression(C=100.0, max_iter=2000).fit(ds.X_train, ds.y_train)
    assert clf.score(ds.X_test, ds.y_test) >= 0.985


def test_kddcup99_options(shared_data):
    small = D.load("kddcup99", shared_data, n_samples=1000, test_size=0.1, random_state=4)
    assert small.X_train.shape == (900, 118) and small.X_test.shape == (100, 118)
    from dperm.exceptions import InvalidDataError

    with pytest.raises(InvalidDataError, match="n_samples"):
        D.load("kddcup99", shared_data, n_samples=10**6)


def test_mnist(shared_data):
    ds = D.load("mnist", shared_data)
    assert ds.X_train.shape == (60000, 784) and ds.X_test.shape == (10000, 784)
    assert ds.task == "multiclass" and ds.y_train.dtype == np.int64
    assert ds.classes == tuple(range(10))  # the ten digits: public, never read off y
    np.testing.assert_array_equal(
        np.bincount(ds.y_train), [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    )
    np.testing.assert_array_equal(
        np.bincount(ds.y_test), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    )
    assert ds.row_norm_bound == 1.0
    assert ds.X_train.min() == 0.0 and ds.X_train.max() == pytest.approx(1 / 28)
    _check_bounded(ds)


@pytest.mark.parametrize(
    "name, n_train, n_test, d, label_bound",
    [("california-housing", 16512, 4128, 8, 5.00001), ("casp", 36584, 9146, 9, 21.0)],
)
def test_regression_sets(shared_data, name, n_train, n_test, d, label_bound):
    ds = D.load(name, shared_data, normalize_rows=False)
    assert ds.task == "regression"
    assert ds.X_train.shape == (n_train, d) and ds.X_test.shape == (n_test, d)
    assert ds.label_bound == label_bound
    assert np.abs(ds.y_train).max() <= label_bound and np.abs(ds.y_test).max() <= label_bound
    assert ds.row_norm_bound == pytest.approx(math.sqrt(d))
    # every column is centered at the midpoint of its public range: features in [−1, 1]
    assert D.public_schema(name).n_centered == d
    assert ds.X_train.min() >= -1.0 and ds.X_train.max() <= 1.0
    assert ds.X_train.min() < 0.0 < ds.X_train.max()
    _check_bounded(ds)
    _check_bounded(D.load(name, shared_data))


def test_breast_cancer_default_is_a_per_record_map_to_the_unit_sphere():
    """Default preprocessing: schema scaling to [0, 1], centering at the public
    midpoint ½, each row scaled by its own norm — no row depends on another."""
    ds = D.load("breast-cancer")
    raw = D.load("breast-cancer", normalize_rows=False)
    Z = raw.X_train - 0.5
    np.testing.assert_allclose(ds.X_train, Z / np.linalg.norm(Z, axis=1, keepdims=True))
    np.testing.assert_allclose(row_norms(ds.X_train), 1.0)
    assert row_norms(ds.X_train).max() <= 1.0
    assert "per-record map" in ds.description
