"""Issue #36: a user's file, end to end — neighbouring files give neighbouring training sets.

* the split of ``load_csv`` reads the row count and a public seed only (one coin per row
  position): a changed record (label included) changes that record and nothing else,
  under replace-one and under add/remove at the end of the file;
* the task, the label set and the label names come from the caller's options, never
  from the labels; a file that leaves them open is refused naming the options;
* no row is dropped: missing cells are imputed by a public rule and counted, a missing
  label is refused; so n depends on the file's length only;
* the fit checks are as strict as predict's: a category outside its public list, a
  category list on a numeric column, a string for a list; clipped labels are counted.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dperm.datasets import load_csv, load_svmlight
from dperm.datasets._prepare import _split_indices, file_split, label_rule
from dperm.exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    UnknownNameError,
)
from dperm.schema import CategoricalColumn, NumericColumn, SchemaEncoder


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    colour = rng.choice(["red", "blue"], n)
    y = np.where(x + 2 * (colour == "red") + rng.normal(0, 1, n) > 6, "yes", "no")
    return pd.DataFrame({"x": x, "colour": colour, "y": y})


_KW = dict(bounds={"x": (0, 10)}, categories={"colour": ["red", "blue"]}, classes=["no", "yes"])


def _rows(ds) -> np.ndarray:
    """The training rows with their labels, one per line (features then the label)."""
    return np.column_stack([ds.X_train, ds.y_train])


# ------------------------------------------------------------------------- the split
def test_file_split_reads_the_row_count_and_the_seed_only():
    tr, te = file_split(1000, 0.25, 3)
    assert np.array_equal(np.sort(np.concatenate([tr, te])), np.arange(1000))
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(te) > 0)  # file order kept
    # one Bernoulli(test_size) coin per position: the test count is Binomial(n, t)
    k = te.size
    assert stats.binomtest(k, 1000, 0.25).pvalue > 1e-4
    # prefix-stable: a row appended at the end changes no other row's side
    tr2, te2 = file_split(1001, 0.25, 3)
    assert np.array_equal(te2[te2 < 1000], te) and np.array_equal(tr2[tr2 < 1000], tr)
    # the same seed, the same split; another seed, another one; no test part at 0
    assert np.array_equal(file_split(1000, 0.25, 3)[1], te)
    assert not np.array_equal(file_split(1000, 0.25, 4)[1], te)
    assert file_split(50, 0.0, 0)[1].size == 0


def test_secret_coins_keep_each_record_independently():
    # random_state=None: fresh coins; each position is a test row with probability t,
    # independently (the add/remove argument of file_split's docstring)
    sides = np.array([np.isin(np.arange(8), file_split(8, 0.3, None)[1]) for _ in range(4000)])
    np.testing.assert_allclose(sides.mean(axis=0), 0.3, atol=4 * math.sqrt(0.21 / 4000))
    c = np.corrcoef(sides.T)[np.triu_indices(8, 1)]
    assert np.abs(c).max() < 4 / math.sqrt(4000)


def test_one_changed_label_changes_one_training_row(tmp_path):
    """The issue's attack: with the stratified split, flipping one label moved about 28 %
    of the rows between train and test; now the training sets differ in that record."""
    frame = _frame()
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    frame.to_csv(a, index=False)
    i = int(file_split(len(frame), 0.2, 0)[0][7])  # a training row
    changed = frame.copy()
    changed.loc[i, "y"] = "yes" if frame.loc[i, "y"] == "no" else "no"
    changed.to_csv(b, index=False)
    da, db = load_csv(a, "y", **_KW), load_csv(b, "y", **_KW)
    assert (da.n_train, da.n_test, da.task, da.classes) == (
        db.n_train,
        db.n_test,
        db.task,
        db.classes,
    )
    assert da.label_names == db.label_names == ("no", "yes")
    diff = np.flatnonzero(np.any(_rows(da) != _rows(db), axis=1))
    assert diff.size == 1
    np.testing.assert_array_equal(da.X_test, db.X_test)
    # the split of dperm before issue #36 (stratified on the labels) moved many rows
    old = [
        set(_split_indices(len(frame), 0.2, np.random.default_rng(0), stratify=f["y"])[0])
        for f in (frame, changed)
    ]
    assert len(old[0] ^ old[1]) > 40


def test_a_record_removed_at_the_end_leaves_every_other_row_in_place(tmp_path):
    frame = _frame(300)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    frame.to_csv(a, index=False)
    frame.iloc[:-1].to_csv(b, index=False)
    da, db = load_csv(a, "y", **_KW), load_csv(b, "y", **_KW)
    last_in_train = (len(frame) - 1) in set(file_split(len(frame), 0.2, 0)[0])
    assert da.n_train == db.n_train + int(last_in_train)
    np.testing.assert_array_equal(_rows(da)[: db.n_train], _rows(db))


# ------------------------------------------------------------------------- task and labels
def test_a_file_that_leaves_the_task_open_is_refused(tmp_path):
    p = tmp_path / "t.csv"
    _frame().to_csv(p, index=False)
    with pytest.raises(InvalidPrivacyParameter, match="not read off the data") as e:
        load_csv(p, "y", bounds={"x": (0, 10)}, categories={"colour": ["red", "blue"]})
    assert all(
        opt in str(e.value) for opt in ("task=", "label_bound=", "classes=", "positive_label=")
    )
    for kw, match in (
        ({"task": "binary"}, "classes=.negative, positive. or positive_label"),
        ({"task": "multiclass"}, "public label list classes="),
        ({"classes": ["no", "yes"], "task": "multiclass"}, "three or more"),
        ({"classes": ["a", "b", "c"], "task": "binary"}, "two classes"),
        ({"classes": "no,yes"}, "must be a list"),
        ({"classes": ["no", "no"]}, "distinct"),
        ({"label_bound": 5.0, "task": "binary"}, "regression"),
        ({"label_bound": 5.0, "classes": ["no", "yes"]}, "classification task"),
        ({"positive_label": "yes", "classes": ["a", "b"]}, "one of them the positive"),
    ):
        with pytest.raises(InvalidPrivacyParameter, match=match):
            label_rule(**kw)


def test_integer_targets_with_a_label_bound_are_a_regression(tmp_path):
    """Issue #36: integer targets 0–25 fitted a 26-class model; one target 3.5 switched
    the file to regression.  Now --label-bound (label_bound=) decides, for both files."""
    rng = np.random.default_rng(2)
    n = 500
    x = rng.uniform(0, 1, n)
    y = np.clip(np.round(25 * x + rng.normal(0, 1, n)), 0, 25).astype(int)
    a, b = tmp_path / "int.csv", tmp_path / "frac.csv"
    pd.DataFrame({"x": x, "y": y}).to_csv(a, index=False)
    frac = y.astype(float)
    frac[0] = 3.5
    pd.DataFrame({"x": x, "y": frac}).to_csv(b, index=False)
    da = load_csv(a, "y", bounds={"x": (0, 1)}, label_bound=30)
    db = load_csv(b, "y", bounds={"x": (0, 1)}, label_bound=30)
    assert da.task == db.task == "regression" and da.classes is None
    assert da.y_train.dtype == np.float64 and da.n_train == db.n_train


def test_labels_outside_the_public_list_are_refused_and_names_stay_public(tmp_path):
    """Issue #36: "no" → "maybe" (the only "no") saved classes_ ['maybe', 'yes']: a
    perfect distinguisher.  Now the names are the list, and "maybe" is refused."""
    frame = _frame(50)
    frame.loc[:, "y"] = "yes"
    frame.loc[3, "y"] = "no"
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    frame.to_csv(a, index=False)
    frame.loc[3, "y"] = "maybe"
    frame.to_csv(b, index=False)
    assert load_csv(a, "y", **_KW).label_names == ("no", "yes")
    with pytest.raises(LabelError, match=r"1 row\(s\) of the target column 'y'") as e:
        load_csv(b, "y", **_KW)
    assert "maybe" not in str(e.value)  # a private record's value is never echoed
    # a public list with an absent class is fine: the names do not depend on the data
    frame.loc[3, "y"] = "yes"
    frame.to_csv(b, index=False)
    ds = load_csv(b, "y", **_KW)
    assert ds.label_names == ("no", "yes") and (ds.y_train == 1).all()


def test_numeric_labels_match_numerically_and_multiclass_uses_list_order(tmp_path):
    p = tmp_path / "m.csv"
    rng = np.random.default_rng(4)
    pd.DataFrame({"x": rng.uniform(size=90), "y": np.arange(90) % 3}).to_csv(p, index=False)
    ds = load_csv(p, "y", bounds={"x": (0, 1)}, classes=["2", "0", "1"], test_size=0)
    assert ds.task == "multiclass" and ds.classes == (0, 1, 2)
    np.testing.assert_array_equal(ds.y_train, np.array([1, 2, 0])[np.arange(90) % 3])
    binary = load_csv(p, "y", bounds={"x": (0, 1)}, positive_label=2, test_size=0)
    np.testing.assert_array_equal(binary.y_train, np.where(np.arange(90) % 3 == 2, 1.0, -1.0))
    assert binary.label_names == ("not 2", 2)


def test_one_text_label_does_not_change_how_the_others_match(tmp_path):
    """Labels match per record: a file of targets 0.0/1.0 and its neighbour with one text
    label (one-vs-rest: that record is −1) encode every other label the same (a column of
    text compared "1.0" with "1" and turned every +1 into −1)."""
    frame = _frame(200)
    frame["y"] = (frame["x"] > 5).astype(float)  # written as 0.0 / 1.0
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    frame.to_csv(a, index=False)
    i = int(file_split(len(frame), 0.2, 0)[0][3])  # a training row
    frame["y"] = frame["y"].astype(object)
    frame.loc[i, "y"] = "unknown"
    frame.to_csv(b, index=False)
    kw = dict(bounds={"x": (0, 10)}, categories={"colour": ["red", "blue"]})
    for labels in ({"positive_label": 1}, {"positive_label": "1"}, {"classes": [0, 1, "unknown"]}):
        da, db = load_csv(a, "y", **kw, **labels), load_csv(b, "y", **kw, **labels)
        assert np.flatnonzero(np.any(_rows(da) != _rows(db), axis=1)).size == 1, labels
        assert np.count_nonzero(da.y_train == da.y_train.max()) > 50


def test_svmlight_takes_the_public_labels(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    p = tmp_path / "a.svm"
    X = np.eye(6)
    dump_svmlight_file(X, np.array([1, 2, 1, 2, 1, 2]), str(p))
    ds = load_svmlight(p, n_features=6, classes=[2, 1])
    np.testing.assert_array_equal(ds.y_train, [1, -1, 1, -1, 1, -1])
    assert ds.label_names == (2, 1) and ds.classes == (-1.0, 1.0)


# ------------------------------------------------------------------------- n and missing cells
def test_missing_cells_are_imputed_by_the_public_rule_and_counted(tmp_path):
    frame = _frame(200)
    frame["z"] = np.linspace(1.0, 100.0, 200)
    frame.loc[[5, 9], "x"] = np.nan
    frame.loc[11, "colour"] = np.nan
    frame.loc[13, "z"] = np.nan
    p = tmp_path / "nan.csv"
    frame.to_csv(p, index=False)
    kw = dict(_KW, bounds={"x": (0, 10), "z": (0, 1000)}, log_columns=["z"], test_size=0)
    ds = load_csv(p, "y", normalize_rows=False, **kw)
    assert ds.n_train == 200 and ds.n_imputed == 4  # no row dropped
    j = ds.feature_names.index
    assert ds.X_train[5, j("x")] == pytest.approx(0.5)  # the midpoint of [0, 10]
    assert ds.X_train[13, j("z")] == pytest.approx(0.5)  # of the log scale
    assert ds.X_train[11, j("colour=red")] == ds.X_train[11, j("colour=blue")] == 0.0
    declared = load_csv(p, "y", normalize_rows=False, impute={"x": 2.0, "colour": "blue"}, **kw)
    assert declared.X_train[9, j("x")] == pytest.approx(0.2)
    assert declared.X_train[11, j("colour=blue")] == 1.0
    # the saved encoder imputes new rows the same way (predict)
    enc = SchemaEncoder(declared.encoder.columns, normalize_rows=False).fit(frame)
    np.testing.assert_allclose(enc.transform(frame), declared.X_train)
    with pytest.raises(InvalidPrivacyParameter, match="not in its category list"):
        load_csv(p, "y", impute={"colour": "green"}, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="must be a number"):
        load_csv(p, "y", impute={"x": "a lot"}, **kw)
    frame.loc[17, "y"] = np.nan
    frame.to_csv(p, index=False)
    with pytest.raises(LabelError, match="1 missing value"):
        load_csv(p, "y", **kw)


# ------------------------------------------------------------------------- fit checks
def test_fit_checks_are_as_strict_as_predict(tmp_path):
    frame = _frame(100)
    frame.loc[4, "colour"] = "RED"
    p = tmp_path / "c.csv"
    frame.to_csv(p, index=False)
    with pytest.raises(InvalidDataError, match=r"column 'colour': 1 row\(s\) hold a value") as e:
        load_csv(p, "y", **_KW)
    assert "RED" not in str(e.value)
    frame.loc[4, "colour"] = "red"
    frame["k"] = np.arange(100) % 3
    frame.to_csv(p, index=False)
    cats = {"colour": ["red", "blue"], "k": ["0", "1", "2"]}
    with pytest.raises(InvalidPrivacyParameter, match=r"numeric column\(s\) \['k'\]"):
        load_csv(
            p, "y", bounds={"x": (0, 10)}, categories=cats, categorical=["colour"],
            classes=["no", "yes"],
        )  # fmt: skip
    ds = load_csv(
        p, "y", bounds={"x": (0, 10)}, categories=cats, categorical=["colour", "k"],
        classes=["no", "yes"],
    )  # fmt: skip
    assert "k=2" in ds.feature_names
    with pytest.raises(InvalidPrivacyParameter, match="must be a list of values"):
        load_csv(p, "y", bounds={"x": (0, 10), "k": (0, 2)}, categories={"colour": "red"},
                 classes=["no", "yes"])  # fmt: skip
    with pytest.raises(InvalidPrivacyParameter, match="must be a list of values"):
        CategoricalColumn("colour", "red")
    with pytest.raises(InvalidPrivacyParameter, match="must be finite"):
        NumericColumn("x", 0, 1, impute=math.inf)


def test_a_category_list_makes_a_column_categorical_whatever_its_values(tmp_path):
    """One record must not switch a column's kind: with the public list ["0", "1", "x"],
    a file whose column holds codes only (read as numbers by default) and its neighbour
    with one "x" (read as text) both load, with the same features, and their training
    rows differ in that record only."""
    frame = _frame(100)
    frame["k"] = [str(v) for v in np.arange(100) % 2]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    frame.to_csv(a, index=False)
    i = int(file_split(len(frame), 0.2, 0)[0][3])  # a training row
    frame.loc[i, "k"] = "x"
    frame.to_csv(b, index=False)
    kw = dict(_KW, categories={"colour": ["red", "blue"], "k": ["0", "1", "x"]})
    da, db = load_csv(a, "y", **kw), load_csv(b, "y", **kw)
    assert da.feature_names == db.feature_names and "k=x" in da.feature_names
    assert np.flatnonzero(np.any(_rows(da) != _rows(db), axis=1)).size == 1


def test_a_number_column_with_a_text_record_is_refused_saying_so(tmp_path):
    """A record that is not a number in a bounded column: the error says so (it said
    "bounds given for non-numeric column(s)", as if the bound were the mistake) and never
    echoes the value."""
    frame = _frame(50)
    frame["x"] = frame["x"].astype(object)
    frame.loc[7, "x"] = "4,5"
    p = tmp_path / "t.csv"
    frame.to_csv(p, index=False)
    with pytest.raises(UnknownNameError, match=r"\['x'\], but these hold a value that is not"):
        load_csv(p, "y", **_KW)
    with pytest.raises(UnknownNameError) as e:
        load_csv(p, "y", **_KW)
    assert "4,5" not in str(e.value)


def test_clipped_labels_are_counted_and_mostly_clipped_is_refused(tmp_path):
    rng = np.random.default_rng(5)
    y = rng.normal(0, 10, 300)
    p = tmp_path / "r.csv"
    pd.DataFrame({"x": rng.uniform(size=300), "y": y}).to_csv(p, index=False)
    ds = load_csv(p, "y", bounds={"x": (0, 1)}, label_bound=20)
    assert ds.n_clipped_labels == int(np.sum(np.abs(y) > 20))
    with pytest.raises(InvalidDataError, match=r"above label_bound=1\b.*most of them"):
        load_csv(p, "y", bounds={"x": (0, 1)}, label_bound=1)


# ------------------------------------------------------------------------- the Dask reader
def test_dask_reader_imputes_and_takes_the_public_labels(tmp_path):
    pytest.importorskip("dask.dataframe")
    from dperm.datasets import read_dask

    frame = _frame(120)
    frame.loc[3, "x"] = np.nan
    frame.loc[6, "colour"] = np.nan
    (tmp_path / "d").mkdir()
    frame.iloc[:60].to_csv(tmp_path / "d" / "a.csv", index=False)
    frame.iloc[60:].to_csv(tmp_path / "d" / "b.csv", index=False)
    ds = read_dask(tmp_path / "d", "y", **_KW)
    assert ds.X_train.shape[0] == 120 and ds.label_names == ("no", "yes")
    ref = load_csv(tmp_path / "d" / "a.csv", "y", test_size=0, normalize_rows=True, **_KW)
    np.testing.assert_allclose(ds.X_train.compute()[:60], ref.X_train)
    np.testing.assert_array_equal(ds.y_train.compute()[:60], ref.y_train)
    frame.loc[70, "colour"] = "green"
    frame.iloc[60:].to_csv(tmp_path / "d" / "b.csv", index=False)
    with pytest.raises(InvalidDataError, match="outside its public category list"):
        read_dask(tmp_path / "d", "y", **_KW).X_train.compute()
    with pytest.raises(InvalidPrivacyParameter, match="not read off the data"):
        read_dask(tmp_path / "d", "y", bounds=_KW["bounds"], categories=_KW["categories"])


# ------------------------------------------------------------------------- the default δ
def test_the_default_delta_is_never_above_1e5():
    from dperm.accounting.active import default_delta

    for n in (2, 3, 10, 316, 317, 1000, 10**6):
        assert default_delta(n) == min(1.0 / n**2, 1e-5) <= 1e-5
    with pytest.raises(InvalidPrivacyParameter, match="pass delta explicitly"):
        default_delta(1)


def test_a_tiny_fit_states_its_default_delta():
    """Issue #36: the API on 3 rows gave δ = 0.11, a 2-row CSV saved "δ = 0.25"."""
    from dperm.algorithms import objective_perturbation
    from dperm.estimators import DPLogisticRegression
    from dperm.losses import Logistic

    X = np.array([[0.1, 0.2], [-0.3, 0.1], [0.2, -0.4]])
    y = np.array([1.0, -1.0, 1.0])
    est = DPLogisticRegression(classes=[-1, 1], random_state=0).fit(X, y)
    assert est.delta_ == 1e-5
    statement = est.privacy_statement()
    assert "δ is the default min(1/n², 10⁻⁵) for n training rows" in statement
    given = DPLogisticRegression(classes=[-1, 1], delta=1e-6, random_state=0).fit(X, y)
    assert "is the default" not in given.privacy_statement()
    res = objective_perturbation.fit(
        Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=0.1, delta=None
    )
    assert res.event.delta == 1e-5 and res.diagnostics["delta_default"]
