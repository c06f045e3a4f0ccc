"""dperm.preprocessing: public-information transformers and the private scaler."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import NotFittedError, SkipTestWarning
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from dperm import DPLogisticRegression
from dperm.accounting import Ledger, epsilon_spent
from dperm.accounting.events import Composed, Laplace, NonPrivate, NoOp, SelfComposed
from dperm.accounting.gaussian import gaussian_epsilon
from dperm.exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    PrivacyLeakWarning,
    UnknownNameError,
)
from dperm.preprocessing import (
    DPStandardScaler,
    PublicMinMaxScaler,
    PublicOneHotEncoder,
    RowNormalizer,
    pipeline_dp_event,
)


# ----------------------------------------------------------------------------- sklearn contract
# Every check passes; none is filtered.  The checks' data exceed (−10, 10) now
# and then, so entries are clipped (ClippingWarning, expected).
@parametrize_with_checks(
    [
        PublicMinMaxScaler(bounds=(-10, 10)),
        PublicMinMaxScaler(bounds=(-10, 10), feature_range=(-1, 1)),
        RowNormalizer(),
        RowNormalizer(norm=2.0, mode="sphere"),
        PublicOneHotEncoder(categories=[0.0, 1.0, 2.0], handle_unknown="ignore"),
        DPStandardScaler(epsilon=1.0, bounds=(-10, 10), random_state=0),
        DPStandardScaler(epsilon=1.0, delta=1e-5, bounds=(-10, 10), random_state=0),
    ]
)
@pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_sklearn_transformer_contract(estimator, check):
    check(estimator)


assert SkipTestWarning  # imported for the filter above


# ----------------------------------------------------------------------------- min-max
BOUNDS = np.array([[0.0, 10.0], [-1.0, 1.0], [100.0, 300.0]])


def _outside_data(seed=0, n=500):
    """Data that overshoots the public bounds on both sides."""
    rng = np.random.default_rng(seed)
    lo, hi = BOUNDS[:, 0], BOUNDS[:, 1]
    return lo + (hi - lo) * rng.uniform(-0.3, 1.3, size=(n, 3))


def test_minmax_never_reads_bounds_from_data():
    X = _outside_data()
    expected_clipped = int(np.sum((X < BOUNDS[:, 0]) | (X > BOUNDS[:, 1])))
    assert expected_clipped > 0
    with pytest.warns(ClippingWarning, match=str(expected_clipped)):
        s = PublicMinMaxScaler(bounds=BOUNDS, feature_range=(-1, 1)).fit(X)
    assert s.n_clipped_ == expected_clipped
    np.testing.assert_array_equal(s.lower_, BOUNDS[:, 0])
    np.testing.assert_array_equal(s.upper_, BOUNDS[:, 1])
    # other data (shifted, scaled): the learned map is the same public one
    with pytest.warns(ClippingWarning):
        s2 = PublicMinMaxScaler(bounds=BOUNDS, feature_range=(-1, 1)).fit(X * 3 + 7)
    np.testing.assert_array_equal(s2.scale_, s.scale_)
    np.testing.assert_array_equal(s2.min_, s.min_)
    Z = s.transform(X)
    # closed form, computed independently
    Xc = np.minimum(np.maximum(X, BOUNDS[:, 0]), BOUNDS[:, 1])
    np.testing.assert_allclose(Z, -1 + 2 * (Xc - BOUNDS[:, 0]) / (BOUNDS[:, 1] - BOUNDS[:, 0]))
    assert Z.min() == -1.0 and Z.max() == 1.0
    np.testing.assert_allclose(s.inverse_transform(Z), Xc)
    assert s.dp_event_ == NoOp()


def test_minmax_shared_bounds_and_errors():
    X = np.array([[1.0, 2.0], [3.0, 4.0]])
    Z = PublicMinMaxScaler(bounds=(0, 4)).fit_transform(X)
    np.testing.assert_allclose(Z, X / 4)
    for bad in (None, (1, 1), (2, 1), [[0, 1]], [[0, 1, 2]] * 2, (0, np.inf), ("a", "b")):
        with pytest.raises(InvalidPrivacyParameter, match="bounds"):
            PublicMinMaxScaler(bounds=bad).fit(X)
    with pytest.raises(InvalidPrivacyParameter, match="feature_range"):
        PublicMinMaxScaler(bounds=(0, 4), feature_range=(1, 0)).fit(X)
    with pytest.raises(InvalidDataError):
        PublicMinMaxScaler(bounds=(0, 4)).fit([[np.nan, 1.0]])


# ----------------------------------------------------------------------------- rows
def test_row_normalizer_ball_and_sphere_dense_and_sparse():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5)) * rng.uniform(0.1, 3, size=(300, 1))
    X[0] = 0.0
    norms = np.linalg.norm(X, axis=1)
    Z = RowNormalizer(norm=1.5).fit_transform(X)
    zn = np.linalg.norm(Z, axis=1)
    assert np.all(zn <= 1.5 * (1 + 4 * np.finfo(float).eps))  # numpy's norm vs dperm's: ulps
    inside = norms <= 1.5
    np.testing.assert_array_equal(Z[inside], X[inside])  # rows inside are untouched
    np.testing.assert_allclose(Z[~inside], X[~inside] * (1.5 / norms[~inside])[:, None])
    S = RowNormalizer(norm=2.0, mode="sphere").fit_transform(X)
    np.testing.assert_allclose(np.linalg.norm(S[1:], axis=1), 2.0)
    np.testing.assert_array_equal(S[0], 0.0)
    for mode in ("ball", "sphere"):
        r = RowNormalizer(norm=1.5, mode=mode)
        Zs = r.fit_transform(sp.csr_matrix(X))
        assert sp.issparse(Zs)
        np.testing.assert_allclose(Zs.toarray(), r.transform(X))
    # each row depends only on itself: transforming a subset gives the same rows
    np.testing.assert_array_equal(RowNormalizer(norm=1.5).transform(X[10:20]), Z[10:20])


def test_row_normalizer_errors():
    X = np.ones((3, 2))
    for bad in (0, -1, np.nan, np.inf, "1"):
        with pytest.raises(InvalidPrivacyParameter, match="norm"):
            RowNormalizer(norm=bad).fit(X)
    with pytest.raises(UnknownNameError, match="mode"):
        RowNormalizer(mode="cube").fit(X)


# ----------------------------------------------------------------------------- one-hot
def test_one_hot_public_categories_closed_form():
    X = np.array([["b", 3], ["a", 1], ["c", 2]], dtype=object)
    enc = PublicOneHotEncoder(categories=[["c", "a", "b"], [1, 2, 3]])
    Z = enc.fit_transform(X)
    expected = np.array(
        [[0, 0, 1, 0, 0, 1], [0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 1, 0]], dtype=float
    )  # the public order c, a, b is kept
    np.testing.assert_array_equal(Z, expected)
    assert list(enc.get_feature_names_out(["s", "k"])) == [
        "s_c",
        "s_a",
        "s_b",
        "k_1",
        "k_2",
        "k_3",
    ]
    sparse = PublicOneHotEncoder(categories=enc.categories, sparse_output=True).fit(X)
    np.testing.assert_array_equal(sparse.transform(X).toarray(), expected)
    df = pd.DataFrame({"s": ["b", "a", "c"], "k": [3, 1, 2]})
    np.testing.assert_array_equal(enc.fit(df).transform(df), expected)
    assert list(enc.get_feature_names_out())[:1] == ["s_c"]


def test_one_hot_unknown_values():
    X = np.array([["a"], ["z"], ["b"]], dtype=object)
    with pytest.raises(InvalidDataError, match=r"column 0 has a value outside categories\[0\]"):
        PublicOneHotEncoder(categories=[["a", "b"]]).fit(X)
    enc = PublicOneHotEncoder(categories=[["a", "b"]], handle_unknown="ignore").fit(X)
    assert enc.n_unknown_ == 1
    np.testing.assert_array_equal(enc.transform(X), [[1, 0], [0, 0], [0, 1]])
    # numbers against string categories match nothing (no silent str() coercion)
    assert enc.fit(np.array([[1.0], [2.0]])).n_unknown_ == 2


def test_one_hot_errors():
    X = np.array([[1.0], [2.0]])
    for bad in (None, "abc", [[1, 1]], [[]], [[1], [2]], [["a", 1]]):
        with pytest.raises(InvalidPrivacyParameter, match="categories"):
            PublicOneHotEncoder(categories=bad).fit(X)
    with pytest.raises(UnknownNameError, match="handle_unknown"):
        PublicOneHotEncoder(categories=[1.0, 2.0], handle_unknown="drop").fit(X)


# ----------------------------------------------------------------------------- private scaler
def _uniform(seed, n=2000, d=3):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.0, 10.0, size=(n, d)) * np.array([1.0, 0.5, 0.2])[:d]


def test_dp_scaler_sensitivity_and_noise_scale_are_the_derived_ones():
    X = _uniform(0)
    n, d = X.shape
    bounds = np.array([[0.0, 10.0], [-5.0, 5.0], [0.0, 2.0]])
    w = bounds[:, 1] - bounds[:, 0]
    lap = DPStandardScaler(epsilon=0.8, bounds=bounds, random_state=0).fit(X)
    np.testing.assert_allclose(lap.sensitivity_, [w / n, w**2 / (4 * n)])
    np.testing.assert_allclose(lap.noise_scale_, lap.sensitivity_ * d / 0.4)  # ε/2 per block
    assert lap.dp_event_ == SelfComposed(Laplace(2.0 / 0.8), 2)
    assert (lap.epsilon_, lap.delta_) == (0.8, 0.0)
    gau = DPStandardScaler(epsilon=0.8, delta=1e-6, bounds=bounds, random_state=0).fit(X)
    s = gau.dp_event_.event.noise_multiplier
    np.testing.assert_allclose(gau.noise_scale_, gau.sensitivity_ * math.sqrt(d) * s)
    # independent check of the calibration: two releases at multiplier s are one at s/√2
    assert gaussian_epsilon(s / math.sqrt(2), 1e-6) == pytest.approx(0.8, rel=1e-6)


def test_dp_scaler_events_are_accounted_within_the_claim():
    X = _uniform(1)
    lap = DPStandardScaler(epsilon=0.5, bounds=(0, 10), random_state=0).fit(X)
    assert epsilon_spent(lap.dp_event_, 0.0, "basic") <= 0.5 * (1 + 1e-12)
    gau = DPStandardScaler(epsilon=0.5, delta=1e-5, bounds=(0, 10), random_state=0).fit(X)
    assert epsilon_spent(gau.dp_event_, 1e-5, "pld") <= 0.5 * (1 + 1e-6)
    assert epsilon_spent(gau.dp_event_, 1e-5, "pld") >= 0.5 * (1 - 1e-2)  # not wasteful
    for ev in (lap.dp_event_, gau.dp_event_):
        assert ev.neighbouring == "replace-one" == ev.event.neighbouring


def _noise_samples(delta, seeds=400):
    """Realized noise / calibrated scale of both statistics, pooled over seeds."""
    X = _uniform(2, n=1000, d=2)  # bounds (0, 10): no projection is ever active
    lo, hi = 0.0, 10.0
    mean = X.mean(axis=0)
    second = np.mean((X - (lo + hi) / 2) ** 2, axis=0)
    out = []
    for seed in range(seeds):
        sc = DPStandardScaler(epsilon=1.0, delta=delta, bounds=(lo, hi), random_state=seed).fit(X)
        m_hat = sc.var_ + (sc.mean_ - (lo + hi) / 2) ** 2  # undo the post-processing
        out.append((sc.mean_ - mean) / sc.noise_scale_[0])
        out.append((m_hat - second) / sc.noise_scale_[1])
    return np.concatenate(out)


def test_dp_scaler_laplace_noise_matches_its_calibration_ks():
    z = _noise_samples(0.0)  # 1600 draws
    assert stats.kstest(z, "laplace").pvalue > 1e-3
    # the test has power: a scale 20 % off is rejected
    assert stats.kstest(z / 1.2, "laplace").pvalue < 1e-3


def test_dp_scaler_gaussian_noise_matches_its_calibration_ks():
    z = _noise_samples(1e-5)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert stats.kstest(z / 1.2, "norm").pvalue < 1e-3


def test_dp_scaler_bounds_never_read_from_data_and_rows_bounded():
    rng = np.random.default_rng(3)
    X = rng.normal(5, 4, size=(3000, 2))  # overshoots (0, 10)
    n_out = int(np.sum((X < 0) | (X > 10)))
    with pytest.warns(ClippingWarning):
        sc = DPStandardScaler(epsilon=2.0, bounds=(0, 10), random_state=0).fit(X)
    assert sc.n_clipped_ == n_out
    np.testing.assert_array_equal(sc.lower_, [0, 0])
    np.testing.assert_array_equal(sc.upper_, [10, 10])
    np.testing.assert_allclose(sc.sensitivity_[0], 10 / 3000)  # from the bounds alone
    Xc = np.clip(X, 0, 10)
    tol = 8 * sc.noise_scale_  # Laplace tail: P(|noise| > 8b) = e^-8 per coordinate
    assert np.all(np.abs(sc.mean_ - Xc.mean(axis=0)) < tol[0] + 1e-12)
    Z = sc.transform(X * 3)  # far outside too: clipped, so rows stay within the bound
    assert np.all(np.linalg.norm(Z, axis=1) <= sc.row_norm_bound_)
    np.testing.assert_allclose(sc.inverse_transform(sc.transform(Xc)), Xc)


def test_dp_scaler_errors():
    X = _uniform(4, n=50)
    with pytest.raises(InvalidPrivacyParameter, match="bounds"):
        DPStandardScaler(epsilon=1.0).fit(X)
    with pytest.raises(InvalidPrivacyParameter, match="bounds"):
        DPStandardScaler(bounds=[[0, 1], [0, 1]]).fit(X)  # 2 rows, 3 features
    for eps in (0, -1, np.nan, np.inf, "1", None):
        with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
            DPStandardScaler(epsilon=eps, bounds=(0, 10)).fit(X)
    for delta in (-1e-9, 1.0, np.nan):
        with pytest.raises(InvalidPrivacyParameter, match="delta"):
            DPStandardScaler(delta=delta, bounds=(0, 10)).fit(X)
    with pytest.raises(InvalidPrivacyParameter, match="random_state"):
        DPStandardScaler(bounds=(0, 10), random_state=-1).fit(X)
    with pytest.raises(InvalidDataError):
        DPStandardScaler(bounds=(0, 10)).fit(np.empty((0, 3)))
    with pytest.raises(InvalidDataError, match=r"[Ss]parse"):
        DPStandardScaler(bounds=(0, 10)).fit(sp.csr_matrix(X))


# ----------------------------------------------------------------------------- pipelines
def _clf_data(seed=5, n=600):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 3))
    return X, (X[:, 0] + X[:, 1] > 10).astype(int)


def test_pipeline_event_composes_private_steps_and_the_ledger_sees_them():
    X, y = _clf_data()
    pipe = make_pipeline(
        DPStandardScaler(epsilon=0.5, bounds=(0, 10), random_state=0),  # Laplace
        RowNormalizer(norm=1.0),
        # objective perturbation named: an (ε, δ) event that basic composition adds up
        # (the default, mechanism="auto", is DP-SGD here: a PLD/RDP event)
        DPLogisticRegression(
            epsilon=1.0, delta=1e-6, classes=[0, 1], random_state=0, mechanism="objective"
        ),
    ).fit(X, y)
    event = pipeline_dp_event(pipe)
    model = pipe[-1].dp_event_  # a composition is flattened into the pipeline's, in order
    parts = model.events if isinstance(model, Composed) else (model,)
    assert event == Composed((pipe[0].dp_event_, *parts))
    assert pipe.score(X, y) > 0.8
    ledger = Ledger(epsilon=2.0, delta=1e-5, accountant="basic")
    spent = ledger.spend(event, label="scaler + model")
    assert spent == pytest.approx(1.5)  # 0.5 (scaler) + 1.0 (model), basic composition
    # public transformers spend nothing
    public = make_pipeline(
        PublicMinMaxScaler(bounds=(0, 10), feature_range=(-1, 1)),
        FunctionTransformer(lambda Z: Z / math.sqrt(3)),
        DPLogisticRegression(epsilon=1.0, delta=1e-6, classes=[0, 1], random_state=0),
    ).fit(X, y)
    assert pipeline_dp_event(public) == public[-1].dp_event_


def test_pipeline_event_flags_a_leaking_scaler():
    X, y = _clf_data()
    pipe = make_pipeline(
        StandardScaler(),
        RowNormalizer(norm=1.0),  # rows within data_norm (mostly clipped data is refused)
        DPLogisticRegression(
            epsilon=1.0, data_norm=1.0, classes=[0, 1], random_state=0, mechanism="objective"
        ),  # an (ε, δ) event, so that the basic accountant below can read it
    )
    pipe.fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="StandardScaler"):
        event = pipeline_dp_event(pipe)
    assert isinstance(event, Composed) and event.events[0] == NonPrivate()
    assert epsilon_spent(event, 1e-5, "basic") == math.inf
    assert pipeline_dp_event(make_pipeline(RowNormalizer()).fit(X)) == NoOp()
    with pytest.raises(NotFittedError):
        pipeline_dp_event(make_pipeline(RowNormalizer(), DPLogisticRegression()))


def test_pipeline_event_looks_inside_column_transformers():
    rng = np.random.default_rng(7)
    df = pd.DataFrame(
        {
            "age": rng.uniform(18, 90, 500),
            "city": rng.choice(["a", "b", "c"], 500),
            "income": rng.uniform(0, 1e5, 500),
        }
    )
    y = (df["age"] > 50).astype(int).to_numpy()
    clf = DPLogisticRegression(epsilon=1.0, data_norm=2.0, classes=[0, 1], random_state=0)
    public = ColumnTransformer(
        [
            ("num", PublicMinMaxScaler(bounds=[[18, 90], [0, 1e5]]), ["age", "income"]),
            ("cat", PublicOneHotEncoder(categories=[["a", "b", "c"]]), ["city"]),
        ]
    )
    pipe = make_pipeline(public, clf).fit(df, y)
    assert pipeline_dp_event(pipe) == pipe[-1].dp_event_  # public parts spend nothing
    private = ColumnTransformer(
        [
            (
                "num",
                DPStandardScaler(epsilon=0.5, bounds=[[18, 90], [0, 1e5]], random_state=0),
                ["age", "income"],
            ),
            ("cat", StandardScaler(), ["age"]),
        ]
    )
    with pytest.warns(PrivacyLeakWarning, match="StandardScaler"):
        event = pipeline_dp_event(private.fit(df))
    assert event == Composed((private.transformers_[0][1].dp_event_, NonPrivate()))
