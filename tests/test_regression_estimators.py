"""Tests of the named private regressors (dperm.estimators.regression) and the
AdaSSP default of DPLinearRegression on real data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import HuberRegressor, Lasso, QuantileRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from dperm import (
    DPElasticNet,
    DPHuberRegressor,
    DPLasso,
    DPLinearRegression,
    DPQuantileRegressor,
)
from dperm.accounting import epsilon_spent
from dperm.constraints import L1Ball
from dperm.estimators._base import sklearn_expected_failed_checks
from dperm.exceptions import InvalidPrivacyParameter, LabelError
from dperm.losses import Huber, get_loss

# ----------------------------------------------------------------------------- sklearn contract
# Randomized estimators: the checks fix random_state; a huge ε keeps the accuracy
# checks meaningful.  The checks' toy data have rows of norm up to ≈ 141
# (normal(loc=100) features in 2-D): the instances declare the public bound
# CHECKS_DATA_NORM above them (a fit where most rows exceed data_norm is refused).
CHECKS_DATA_NORM = 200.0
# The objective-perturbation paths (the ERM mechanisms): a tight solver tolerance, a
# wide public domain (the ℓ1 path of DPLasso needs alpha=0.1 to reach tol on the
# rows of norm 141 within max_iter).
_ERM = dict(
    epsilon=1e15,
    alpha=1e-3,
    label_bound=1e3,
    data_norm=CHECKS_DATA_NORM,
    constraint_radius=1e3,
    tol=1e-6,
    max_iter=100_000,
    random_state=0,
)


@parametrize_with_checks(
    [
        DPLinearRegression(
            epsilon=1e9, label_bound=1e3, data_norm=CHECKS_DATA_NORM, random_state=0
        ),
        DPLasso(
            epsilon=1e9,
            label_bound=1e3,
            data_norm=CHECKS_DATA_NORM,
            constraint_radius=50.0,
            random_state=0,
        ),
        DPLinearRegression(mechanism="objective", **_ERM),
        DPLasso(mechanism="objective", **{**_ERM, "alpha": 0.1}),
        DPElasticNet(**_ERM),
        # a public radius for the ℓ2 domain (the default rule d·B/R shrinks with R)
        DPQuantileRegressor(
            epsilon=1e9,
            label_bound=1e2,
            data_norm=CHECKS_DATA_NORM,
            constraint_radius=10.0,
            random_state=0,
        ),
        DPHuberRegressor(epsilon=1e15, threshold=10.0, data_norm=CHECKS_DATA_NORM, random_state=0),
    ],
    expected_failed_checks=sklearn_expected_failed_checks,
)
@pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_sklearn_estimator_contract(estimator, check):
    check(estimator)


def _data(n=2000, d=5, seed=0, noise=0.05, outliers=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) / math.sqrt(d)
    w = np.zeros(d)
    w[:2] = [1.5, -1.0]
    y = X @ w + 0.2 + noise * rng.normal(size=n)
    if outliers:
        y[:outliers] += 20.0
    return X, y


# ----------------------------------------------------------------------------- Huber loss
def test_huber_loss_derivatives_and_constants():
    loss = get_loss("huber", h=0.7)
    assert isinstance(loss, Huber)
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=200) * 2, rng.normal(size=200)
    eps = 1e-6
    num = (loss.pointwise(z + eps, y) - loss.pointwise(z - eps, y)) / (2 * eps)
    np.testing.assert_allclose(loss.derivative(z, y), num, atol=1e-6)
    assert np.max(np.abs(loss.derivative(z * 100, y))) <= 0.7
    assert loss.lipschitz(2.0) == pytest.approx(1.4)
    assert loss.smoothness(2.0) == pytest.approx(4.0)
    with pytest.raises(InvalidPrivacyParameter, match="h"):
        Huber(h=0.0)


# ----------------------------------------------------------------------------- utility
def test_lasso_frank_wolfe_close_to_constrained_lasso_at_large_epsilon():
    X, y = _data()
    m = DPLasso(
        epsilon=1e6,
        label_bound=5.0,
        constraint_radius=4.0,
        mechanism="frank-wolfe",
        random_state=0,
    ).fit(X, y)
    assert isinstance(m.constraint_, L1Ball)
    assert np.abs(np.r_[m.coef_, m.intercept_ / 0.5]).sum() <= 4.0 * (1 + 1e-9)
    ref = Lasso(alpha=1e-4).fit(X, y)
    assert m.score(X, y) > ref.score(X, y) - 0.05
    assert m.neighbouring_ == "replace-one"


def test_lasso_objective_matches_penalized_lasso_at_huge_epsilon():
    X, y = _data()
    m = DPLasso(
        mechanism="objective", alpha=1e-3, epsilon=1e15, label_bound=5.0, random_state=0,
        fit_intercept=False,
    ).fit(X, y - 0.2)  # fmt: skip
    ref = Lasso(alpha=1e-3, fit_intercept=False).fit(X, y - 0.2)
    np.testing.assert_allclose(m.coef_, ref.coef_, atol=5e-3)


def test_elastic_net_private_fit_is_accounted():
    X, y = _data()
    m = DPElasticNet(epsilon=1.0, label_bound=5.0, random_state=0).fit(X, y)
    assert m.regularizer_ is not None and m.l2_ > 0
    assert m.epsilon_ == 1.0


def test_quantile_regression_median_is_robust():
    X, y = _data(outliers=100, noise=0.05)
    ref = QuantileRegressor(quantile=0.5, alpha=0.0).fit(X, y)
    clean = _data(seed=1, noise=0.05)
    # the private median fit ignores the outliers like the non-private one does
    # (|y| ≲ 1 apart from the outliers: label_bound = 1 is the public scale)
    for eps in (1.0, 1e6):
        m = DPQuantileRegressor(epsilon=eps, label_bound=1.0, random_state=0).fit(X, y)
        assert m.score(*clean) > ref.score(*clean) - 0.05
        assert epsilon_spent(m.dp_event_, m.delta_, "rdp") <= eps * (1 + 1e-6)
    # least squares is pulled by the 5 % outliers (same data, same ε)
    ls = DPLinearRegression(epsilon=1e6, label_bound=25.0, random_state=0).fit(X, y)
    assert ls.score(*clean) < m.score(*clean) - 0.05


def test_quantile_label_scale_is_the_deprecated_name_of_label_bound():
    X, y = _data(n=300)
    new = DPQuantileRegressor(label_bound=3.0, random_state=0).fit(X, y)
    with pytest.warns(DeprecationWarning, match="label_bound"):
        old = DPQuantileRegressor(label_scale=3.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(old.coef_, new.coef_)
    assert old.constraint_.l2_radius == new.constraint_.l2_radius
    # without a bound the radius uses the auto rule's public label scale (5), named
    default = DPQuantileRegressor(random_state=0).fit(X, y)
    five = DPQuantileRegressor(label_bound=5.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(default.coef_, five.coef_)
    assert "label_scale=5" in default.diagnostics_["auto"]
    with pytest.raises(InvalidPrivacyParameter, match=r"label_scale.*label_bound"):
        DPQuantileRegressor(label_bound=1.0, label_scale=1.0).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="label_bound"):
        DPQuantileRegressor(label_bound=-1.0).fit(X, y)


def test_quantile_rejects_bad_quantile():
    X, y = _data(n=100)
    for q in (0.0, 1.0, 1.5):
        with pytest.raises(InvalidPrivacyParameter, match="quantile"):
            DPQuantileRegressor(quantile=q).fit(X, y)


def test_huber_regressor_is_robust_to_outliers():
    X, y = _data(outliers=100, noise=0.05)
    m = DPHuberRegressor(epsilon=1e12, threshold=0.5, alpha=1e-4, random_state=0).fit(X, y)
    clean = _data(seed=1, noise=0.05)
    ref = HuberRegressor(alpha=0.0).fit(X, y)
    assert m.score(*clean) > ref.score(*clean) - 0.1
    assert m.score(*clean) > 0.8
    assert m.constraint_ is None  # no label bound and no constraint needed


def test_label_bound_enforced_for_squared_loss_estimators():
    X, y = _data(n=100)
    for est in (DPLasso(label_bound=0.1), DPElasticNet(label_bound=0.1)):
        with pytest.raises(LabelError, match="label_bound"):
            est.fit(X, y)
    with pytest.raises(LabelError):
        DPLinearRegression().fit(X, np.array(["a"] * 100))


def test_elasticnet_refuses_frank_wolfe_with_l2_part():
    X, y = _data(n=100)
    with pytest.raises(InvalidPrivacyParameter, match="frank-wolfe"):
        DPElasticNet(mechanism="frank-wolfe", label_bound=5.0).fit(X, y)


# ----------------------------------------------------------------------------- real data
@pytest.mark.parametrize("epsilon, target", [(1.0, 0.40), (10.0, 0.60)])
def test_california_adassp_meets_the_target_with_the_loaders_features(shared_data, epsilon, target):
    """The issue's target with the loader's own public schema and the estimator's defaults:
    median test R² ≥ 0.40 at ε = 1 and ≥ 0.60 at ε = 10 (δ = 1/n², replace-one, 5 seeds;
    non-private 0.69).  Before the schema centered its features at the public midpoints
    the medians were 0.28 / 0.59."""
    from dperm import datasets

    ds = datasets.load("california", data_home=shared_data)
    r2 = [
        DPLinearRegression(
            epsilon=epsilon, data_norm=ds.row_norm_bound, label_bound=ds.label_bound, random_state=s
        )
        .fit(ds.X_train, ds.y_train)
        .score(ds.X_test, ds.y_test)
        for s in range(5)
    ]
    assert np.median(r2) >= target
