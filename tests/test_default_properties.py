"""Properties of the defaults (issue #30): a default fit never raises on finite data
inside its public bounds, and tends to the non-private model of the same model as
ε grows (scikit-learn's bundled sets, never swept by the auto rule)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import train_test_split

from dperm import (
    DPElasticNet,
    DPHuberRegressor,
    DPLasso,
    DPLinearRegression,
    DPLinearSVC,
    DPLogisticRegression,
    DPQuantileRegressor,
)

REGRESSORS = (DPLinearRegression, DPLasso, DPElasticNet, DPQuantileRegressor, DPHuberRegressor)
_BOUNDED = (DPLinearRegression, DPLasso, DPElasticNet)  # refuse |y| > label_bound


def _rows(rng, n, d, scale):
    """n rows of norm ≤ scale ≤ 1 (inside the default data_norm = 1): nothing clipped."""
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0, size=d)  # uneven columns
    X /= np.linalg.norm(X, axis=1).max()
    return X * scale


_CASES = dict(
    n=st.integers(12, 240),
    d=st.integers(1, 8),
    log_eps=st.floats(-2.0, 6.0),
    log_bound=st.floats(-1.0, 2.0),
    log_scale=st.floats(-3.0, 0.0),
    seed=st.integers(0, 2**16),
)
_SETTINGS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@pytest.mark.parametrize("cls", REGRESSORS, ids=lambda c: c.__name__)
@_SETTINGS
@given(**_CASES)
def test_regressor_default_never_raises(cls, n, d, log_eps, log_bound, log_scale, seed):
    rng = np.random.default_rng(seed)
    X = _rows(rng, n, d, 10**log_scale)
    bound = 10**log_bound
    y = np.clip(X @ rng.normal(size=d) * bound * 3 + rng.normal(size=n) * bound / 3, -bound, bound)
    kw = {"label_bound": bound} if cls in _BOUNDED or cls is DPQuantileRegressor else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PrivacyLeakWarning/ClippingWarning are not errors here
        m = cls(epsilon=10**log_eps, random_state=seed, **kw).fit(X, y)
    assert np.all(np.isfinite(m.predict(X)))


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("cls", [DPLogisticRegression, DPLinearSVC], ids=lambda c: c.__name__)
@_SETTINGS
@given(**_CASES)
def test_classifier_default_never_raises(cls, k, n, d, log_eps, log_bound, log_scale, seed):
    del log_bound  # no label bound for classifiers
    rng = np.random.default_rng(seed)
    X = _rows(rng, n, d, 10**log_scale)
    y = np.arange(n) % k  # every class present; labels public
    rng.shuffle(y)
    m = cls(epsilon=10**log_eps, classes=list(range(k)), random_state=seed).fit(X, y)
    assert set(np.unique(m.predict(X))) <= set(range(k))


# ------------------------------------------------------------------------ consistency
def _scaled(X):
    return X / np.linalg.norm(X, axis=1).max()


def test_regressors_tend_to_least_squares_on_diabetes():
    """ε = 10⁴: within 0.01 R² of scikit-learn's unpenalized least squares (the
    regressors' Λ falls like 1/(nε) beyond ε = 10: dperm.losses.prior_margin)."""
    X, y = load_diabetes(return_X_y=True)
    X, bound = _scaled(X), float(np.abs(y).max())
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    ols = LinearRegression().fit(Xtr, ytr).score(Xte, yte)
    for cls in (DPLinearRegression, DPLasso, DPElasticNet):
        scores = {
            eps: cls(label_bound=bound, epsilon=eps, random_state=0).fit(Xtr, ytr).score(Xte, yte)
            for eps in (1.0, 1e4)
        }
        assert scores[1e4] >= ols - 0.01, (cls.__name__, scores, ols)
        assert scores[1e4] > scores[1.0]


@pytest.mark.parametrize(
    "loader, k", [(load_breast_cancer, 2), (load_digits, 10)], ids=["breast_cancer", "digits"]
)
def test_logistic_tends_to_the_unpenalized_model(loader, k):
    """ε = 10⁴: within 0.01 accuracy of scikit-learn's unpenalized logistic regression
    (objective perturbation beyond ε = 10, Λ without a floor)."""
    X, y = loader(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(_scaled(X), y, test_size=0.25, random_state=0)
    ref = LogisticRegression(C=np.inf, max_iter=5000).fit(Xtr, ytr).score(Xte, yte)
    m = DPLogisticRegression(epsilon=1e4, classes=range(k), random_state=0).fit(Xtr, ytr)
    assert m.mechanism_ == "objective"
    assert m.score(Xte, yte) >= ref - 0.01, (m.score(Xte, yte), ref)
    assert m.alpha_ < 1e-4
