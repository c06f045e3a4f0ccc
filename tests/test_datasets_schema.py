"""Tests of the public schemas of dperm.datasets: the per-record column maps
(numeric, squashed, one-hot, centered), their closed forms, and that no constant
is read off the data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dperm import datasets as D
from dperm._validation import row_norms
from dperm.datasets.adult import _read_adult
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError

# ---------------------------------------------------------------------------
# schema building blocks
# ---------------------------------------------------------------------------


@given(
    lo=st.floats(-1e6, 1e6),
    width=st.floats(1e-3, 1e6),
    x=st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=20),
    log=st.booleans(),
)
def test_numeric_column_maps_into_unit_interval(lo, width, x, log):
    if log:
        lo = abs(lo)
    col = D.NumericColumn("c", lo, lo + width, log=log)
    x = np.array(x)
    z = col.transform(x)
    assert np.all((z >= 0) & (z <= 1))
    # monotone non-decreasing in x
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(z[order]) >= -1e-12)


def test_numeric_column_closed_form():
    lin = D.NumericColumn("a", 17, 90)
    np.testing.assert_allclose(lin.transform([0, 17, 53.5, 90, 200]), [0, 0, 0.5, 1, 1])
    lg = D.NumericColumn("g", 0, 99999, log=True)
    np.testing.assert_allclose(
        lg.transform([0, 1000, 1e9]), [0, math.log1p(1000) / math.log1p(99999), 1]
    )


@pytest.mark.parametrize(
    "lo, hi, log",
    [(1, 1, False), (2, 1, False), (0, math.inf, False), (math.nan, 1, False), (-1, 1, True)],
)
def test_numeric_column_bad_bounds(lo, hi, log):
    with pytest.raises(InvalidPrivacyParameter):
        D.NumericColumn("c", lo, hi, log=log)


def test_numeric_column_missing_value():
    from dperm.exceptions import InvalidDataError

    with pytest.raises(InvalidDataError, match="'c'"):
        D.NumericColumn("c", 0, 1).transform([0.5, np.nan])


def test_schema_transform_onehot_and_unknown():
    schema = D.Schema(
        (D.NumericColumn("x", 0, 10), D.CategoricalColumn("color", ("red", "green", "blue")))
    )
    frame = pd.DataFrame({"x": [5, 20, -3], "color": ["green", "purple", None]})
    X, n_unknown = schema.transform(frame)
    assert schema.feature_names == ["x", "color=red", "color=green", "color=blue"]
    np.testing.assert_array_equal(X, [[0.5, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    assert n_unknown == 2
    assert schema.worst_case_norm == pytest.approx(math.sqrt(2))


def _perturbation_check(schema: D.Schema, frame: pd.DataFrame, row: int, new_values: dict):
    X1, u1 = schema.transform(frame)
    perturbed = frame.copy()
    for col, v in new_values.items():
        perturbed.loc[perturbed.index[row], col] = v
    X2, u2 = schema.transform(perturbed)
    others = np.arange(len(frame)) != row
    # the scaling is a per-record map: no other row moves, not even by rounding
    np.testing.assert_array_equal(X1[others], X2[others])
    assert not np.array_equal(X1[row], X2[row])
    return u1, u2


def test_adult_scaling_is_per_record(shared_data):
    path = shared_data / "adult" / "adult.data.gz"
    frame = _read_adult(path).dropna().reset_index(drop=True)
    schema = D.public_schema("adult")
    u1, u2 = _perturbation_check(
        schema,
        frame,
        3,
        {"age": 300, "capital-gain": 1e9, "hours-per-week": 0, "native-country": "Atlantis"},
    )
    assert u2 == u1 + 1


def test_breast_cancer_scaling_does_not_depend_on_data():
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import MinMaxScaler

    frame = load_breast_cancer(as_frame=True).frame
    schema = D.public_schema("breast-cancer")
    feats = schema.column_names
    # extreme new record: far outside every bound in both directions
    _perturbation_check(schema, frame, 7, {c: 1e9 for c in feats})
    _perturbation_check(schema, frame, 100, {c: -1e9 for c in feats})
    # the test has power: a data-fitted (min-max) scaler fails it
    A = MinMaxScaler().fit_transform(frame[feats])
    p = frame[feats].copy()
    p.iloc[7] = 1e9
    B = MinMaxScaler().fit_transform(p)
    others = np.arange(len(frame)) != 7
    assert not np.array_equal(A[others], B[others])


@pytest.mark.parametrize("name", ["breast-cancer", "casp"])
def test_schema_constants_are_documented_not_read_off_the_data(name):
    """Issue #10 §4: the WDBC and CASP bounds used to sit 1.01–1.9× above the data
    maxima (read off the data).  Now every column without a documented range is a
    SquashedColumn — a fixed map with no constant at all — and the only bounded
    column left (CASP's F3) is a documented fraction, bounded by its definition."""
    schema = D.public_schema(name)
    bounded = [c for c in schema.columns if not isinstance(c, D.SquashedColumn)]
    assert all(isinstance(c, D.NumericColumn) for c in schema.columns)
    if name == "breast-cancer":
        assert bounded == [] and len(schema.columns) == 30
    else:
        assert [(c.name, c.lo, c.hi) for c in bounded] == [("F3", 0.0, 1.0)]
        assert "fraction" in bounded[0].source
    for c in schema.columns:
        if isinstance(c, D.SquashedColumn):
            assert (c.lo, c.hi) == (0.0, math.inf)  # no constant to derive from anything
    assert schema.worst_case_norm == math.sqrt(len(schema.columns))  # from [0, 1] alone


@given(
    st.lists(st.floats(min_value=0.0, max_value=1e308, allow_nan=False), min_size=1, max_size=30)
)
def test_squashed_column_is_a_constant_free_per_value_map(values):
    """s(x) = L/(1 + L), L = log1p(x): in [0, 1], 0 at 0, non-decreasing, computed
    value by value (closed form recomputed here)."""
    col = D.SquashedColumn("x")
    x = np.asarray(values)
    z = col.transform(x)
    L = np.log1p(x)
    np.testing.assert_allclose(z, L / (1.0 + L), rtol=1e-12, atol=0)
    assert np.all((z >= 0.0) & (z <= 1.0))
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(z[order]) >= 0)
    # each value's image is the same alone as among the others: a per-record map
    np.testing.assert_array_equal([col.transform([v])[0] for v in x], z)
    assert col.transform([0.0, -5.0, np.inf]).tolist() == [0.0, 0.0, 1.0]


def test_casp_scaling_does_not_depend_on_data():
    """Per-record map on CASP-shaped records (no data file needed)."""
    rng = np.random.default_rng(0)
    schema = D.public_schema("casp")
    frame = pd.DataFrame(rng.exponential(100.0, size=(50, 9)), columns=schema.column_names)
    frame["F3"] = rng.uniform(size=50)
    _perturbation_check(schema, frame, 3, {c: 1e12 for c in schema.column_names})
    _perturbation_check(schema, frame, 9, {c: -1e12 for c in schema.column_names})


def test_schema_with_bounds_override():
    ds = D.load("breast-cancer", normalize_rows=False, bounds={"mean radius": (0.0, 10.0)})
    j = ds.feature_names.index("mean radius")
    assert ds.X_train[:, j].max() == 1.0  # real radii exceed 10 → clipped to 1
    with pytest.raises(UnknownNameError, match="nope"):
        D.load("breast-cancer", bounds={"nope": (0, 1)})
    with pytest.raises(InvalidPrivacyParameter, match="mean radius"):
        D.load("breast-cancer", bounds={"mean radius": (5, 1)})


def test_public_schema_unknown():
    with pytest.raises(UnknownNameError):
        D.public_schema("mnist")


def test_centered_columns_map_the_public_midpoint_to_zero():
    """center=True is z ↦ 2z − 1 of the [0, 1] map: lo ↦ −1, midpoint ↦ 0, hi ↦ 1, values
    outside the bounds clipped; the squashed map likewise (½ ↦ 0); bounds overrides and
    the row bound keep it; "unit" rows subtract the public midpoints (0 for centered)."""
    plain = D.NumericColumn("x", 2.0, 6.0)
    cent = D.NumericColumn("x", 2.0, 6.0, center=True)
    x = np.array([-1.0, 2.0, 3.0, 4.0, 6.0, 9.0])
    np.testing.assert_array_equal(cent.transform(x), [-1.0, -1.0, -0.5, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(cent.transform(x), 2 * plain.transform(x) - 1)
    sq = D.SquashedColumn("s", center=True)
    v = np.array([0.0, math.e - 1.0, np.inf])  # s = 0, ½, 1
    np.testing.assert_allclose(sq.transform(v), [-1.0, 0.0, 1.0], atol=1e-15)
    schema = D.Schema((cent, D.NumericColumn("y", 0.0, 1.0)))
    assert schema.n_centered == 1 and schema.worst_case_norm == math.sqrt(2)
    np.testing.assert_array_equal(schema.feature_midpoints, [0.0, 0.5])
    assert schema.with_bounds({"x": (0.0, 1.0)}).columns[0].center
    assert D.public_schema("california").with_bounds({"MedInc": (0, 20)}).n_centered == 8


def test_centered_unit_rows_subtract_the_public_midpoints():
    from dperm.schema import _center_unit_rows

    X = np.array([[0.5, 1.0], [0.3, 0.0], [-0.5, 0.9], [0.0, 0.5]])
    mid = np.array([0.0, 0.5])
    Z = _center_unit_rows(X.copy(), mid)
    W = X[:3] - mid
    np.testing.assert_allclose(Z[:3], W / np.linalg.norm(W, axis=1, keepdims=True))
    np.testing.assert_array_equal(Z[3], 0.0)  # the midpoint row stays zero
    assert row_norms(Z).max() <= 1.0
