"""``sample_weight`` in the estimators' ``fit`` (issue #13 §2): weights in the public
range [0, 1] scale each record's loss inside the loss; the noise calibration is
unchanged (module docstring of :mod:`dperm.estimators._base`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.model_selection import cross_val_score

from dperm import DPLinearRegression, DPLinearSVC, DPLogisticRegression
from dperm.estimators._base import _SAMPLE_WEIGHT_MECHANISMS, _WeightedLoss
from dperm.exceptions import InvalidDataError
from dperm.losses import Logistic


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    n, d = 240, 4
    X = rng.normal(size=(n, d))
    X *= 0.95 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = (X @ np.array([2.0, -1.0, 0.5, 0.0]) + 0.3 * rng.normal(size=n) > 0).astype(int)
    w = rng.uniform(0.0, 1.0, size=n)
    return X, y, w


# (mechanism, extra parameters): every mechanism that accepts weights, cheap settings
CASES = [
    ("objective", {}),
    ("output", {"alpha": 0.05}),
    ("structured-output", {"alpha": 0.05, "penalty": "elasticnet"}),
    ("dual-frank-wolfe", {"alpha": 0.05, "penalty": "elasticnet"}),
    ("frank-wolfe", {}),
    ("dp-gd", {"epochs": 20}),
    ("dp-gd-avg", {"epochs": 20}),
]


def _clf(mechanism, **kw):
    return DPLogisticRegression(
        mechanism=mechanism, epsilon=2.0, classes=[0, 1], random_state=7, **kw
    )


def test_cases_cover_every_supported_mechanism():
    assert {m for m, _ in CASES} == set(_SAMPLE_WEIGHT_MECHANISMS)


@pytest.mark.parametrize("mechanism, kw", CASES)
def test_unit_weights_equal_unweighted_and_noise_unchanged(data, mechanism, kw):
    X, y, _ = data
    plain = _clf(mechanism, **kw).fit(X, y)
    ones = _clf(mechanism, **kw).fit(X, y, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(plain.coef_, ones.coef_)
    np.testing.assert_array_equal(plain.intercept_, ones.intercept_)
    assert plain.dp_event_ == ones.dp_event_
    # arbitrary weights: same calibration (noise scale and event), different model
    weighted = _clf(mechanism, **kw).fit(X, y, sample_weight=data[2])
    assert weighted.dp_event_ == plain.dp_event_
    for key in ("noise_scale", "sensitivity", "noise_multiplier"):
        if key in plain.diagnostics_:
            assert weighted.diagnostics_[key] == plain.diagnostics_[key]
    assert not np.array_equal(weighted.coef_, plain.coef_)


@pytest.mark.parametrize("mechanism, kw", CASES)
def test_zero_weight_row_has_no_influence(data, mechanism, kw):
    """A record of weight 0 is removed from the objective: replacing it by any
    other record changes nothing (same seed → the same release, up to solver
    rounding ≤ 1e-7, far below the noise)."""
    X, y, w = data
    w0 = w.copy()
    w0[:10] = 0.0
    X2, y2 = X.copy(), y.copy()
    rng = np.random.default_rng(11)
    X2[:10] = rng.normal(size=(10, X.shape[1])) * 0.2
    y2[:10] = 1 - y2[:10]
    a = _clf(mechanism, **kw).fit(X, y, sample_weight=w0)
    b = _clf(mechanism, **kw).fit(X2, y2, sample_weight=w0)
    # equal up to the solver's floating point (the rows still enter its arithmetic)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=0, atol=1e-7)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=0, atol=1e-7)
    if mechanism != "frank-wolfe":  # a discrete release can coincide by chance
        c = _clf(mechanism, **kw).fit(X2, y2, sample_weight=w)  # the weight removes them
        assert np.max(np.abs(a.coef_ - c.coef_)) > 1e-4


def test_output_perturbation_releases_the_weighted_minimizer_plus_the_same_noise(data):
    """Output perturbation is θ̂ + b with b independent of the data: with the same
    seed, θ_w − θ_1 equals the difference of the two exact minimizers, computed
    here independently by scipy on the weighted objective (1/n)Σ wᵢ φᵢ + (Λ/2)‖θ‖²."""
    X, y, w = data
    kw = {"alpha": 0.05, "tol": 1e-12}
    plain = _clf("output", **kw).fit(X, y)
    weighted = _clf("output", **kw).fit(X, y, sample_weight=w)
    s = plain.intercept_scaling
    Xd = np.hstack([X, np.full((len(y), 1), s)])
    ypm = np.where(y == 1, 1.0, -1.0)
    lam = plain.l2_

    def argmin(weights):
        def f(t):
            z = ypm * (Xd @ t)
            val = np.mean(weights * np.logaddexp(0.0, -z)) + 0.5 * lam * t @ t
            grad = Xd.T @ (weights * -ypm / (1.0 + np.exp(z))) / len(y) + lam * t
            return val, grad

        return minimize(f, np.zeros(Xd.shape[1]), jac=True, method="L-BFGS-B", tol=1e-14).x

    def theta(est):
        return np.append(est.coef_.ravel(), est.intercept_[0] / s)

    expected = argmin(w) - argmin(np.ones(len(y)))
    np.testing.assert_allclose(theta(weighted) - theta(plain), expected, atol=1e-6)


def test_weighted_loss_scales_values_and_derivatives_exactly(data):
    X, y, w = data
    ypm = np.where(y == 1, 1.0, -1.0)
    base = Logistic()
    loss = _WeightedLoss(base, w)
    theta = np.array([0.3, -0.2, 0.1, 0.4])
    z = X @ theta
    assert loss.value(theta, X, ypm) == pytest.approx(np.mean(w * np.logaddexp(0.0, -ypm * z)))
    np.testing.assert_allclose(
        loss.gradient(theta, X, ypm), X.T @ (w * base.derivative(z, ypm)) / len(y)
    )
    assert loss.lipschitz(1.0) == base.lipschitz(1.0)
    assert loss.smoothness(1.0) == base.smoothness(1.0)
    assert loss.curvature == base.curvature
    with pytest.raises(InvalidDataError, match="sample_weight"):
        loss.derivative(z[:10], ypm[:10])  # a subsample would misalign the weights


@pytest.mark.parametrize(
    "bad",
    [
        np.full(240, 1.5),
        np.full(240, -0.1),
        np.r_[np.ones(239), np.nan],
        np.ones(239),
        np.ones((240, 1)),
        ["a"] * 240,
    ],
    ids=["above-one", "negative", "nan", "short", "2d", "strings"],
)
def test_bad_weights_refused(data, bad):
    X, y, _ = data
    with pytest.raises(InvalidDataError, match="sample_weight"):
        _clf("objective").fit(X, y, sample_weight=bad)


@pytest.mark.parametrize("mechanism", ["dp-sgd", "amp", "bolt-on"])
def test_unsupported_mechanism_refuses_weights(data, mechanism):
    X, y, w = data
    with pytest.raises(InvalidDataError, match="sample_weight.*" + mechanism):
        _clf(mechanism).fit(X, y, sample_weight=w)


def test_adassp_refuses_weights(data):
    X, _, w = data
    y = X @ np.array([0.5, -0.5, 0.2, 0.0])
    with pytest.raises(InvalidDataError, match="sample_weight"):
        DPLinearRegression(mechanism="adassp", random_state=0).fit(X, y, sample_weight=w)


def test_cross_val_score_routes_sample_weight(data):
    X, y, w = data
    est = DPLinearSVC(epsilon=5.0, classes=[0, 1], random_state=0)
    scores = cross_val_score(est, X, y, cv=3, params={"sample_weight": w})
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))
    ones = cross_val_score(est, X, y, cv=3, params={"sample_weight": np.ones(len(y))})
    np.testing.assert_array_equal(ones, cross_val_score(est, X, y, cv=3))


def test_one_vs_rest_uses_the_weights_in_every_problem(data):
    X, y, w = data
    rng = np.random.default_rng(5)
    y3 = np.where(y == 1, rng.integers(1, 3, size=len(y)), 0)
    kw = dict(
        mechanism="objective", multi_class="ovr", epsilon=3.0, classes=[0, 1, 2], random_state=2
    )
    plain = DPLogisticRegression(**kw).fit(X, y3)
    ones = DPLogisticRegression(**kw).fit(X, y3, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(plain.coef_, ones.coef_)
    weighted = DPLogisticRegression(**kw).fit(X, y3, sample_weight=w)
    assert weighted.dp_event_ == plain.dp_event_
    assert np.all(np.abs(weighted.coef_ - plain.coef_).max(axis=1) > 1e-4)  # every class


def test_refusal_does_not_echo_the_private_weights(data):
    X, y, _ = data
    w = np.full(len(y), 0.5)
    w[3] = 1.2345678
    with pytest.raises(InvalidDataError, match="1 weight") as info:
        _clf("objective").fit(X, y, sample_weight=w)
    assert "1.2345678" not in str(info.value)


def test_sparse_and_dense_weighted_fits_agree(data):
    import scipy.sparse as sp

    X, y, w = data
    dense = _clf("output", alpha=0.05).fit(X, y, sample_weight=w)
    sparse = _clf("output", alpha=0.05).fit(sp.csr_matrix(X), y, sample_weight=w)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=1e-8)
