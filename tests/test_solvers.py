"""The non-private solver: agreement with scikit-learn, dense = sparse, and the
optimality residual it reports is actually reached (checked independently)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Lasso, LogisticRegression

from dperm.constraints import Box, L1Ball, L2Ball
from dperm.losses import HuberSVM, Logistic, Squared
from dperm.regularizers import L1, ElasticNet
from dperm.solvers import minimize, objective_value


@pytest.fixture
def data(rng):
    n, d = 400, 8
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1).max()
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def test_matches_sklearn_logistic_regression(data):
    X, y = data
    n = X.shape[0]
    lam = 1e-3
    res = minimize(Logistic(), X, y, l2=lam, tol=1e-10)
    assert res.converged and res.optimality <= 1e-10
    # sklearn minimizes C Σ ℓ + ½‖w‖², i.e. our mean form with Λ = 1/(nC)
    sk = LogisticRegression(C=1.0 / (n * lam), fit_intercept=False, tol=1e-12, max_iter=10_000)
    sk.fit(X, y)
    np.testing.assert_allclose(res.theta, sk.coef_.ravel(), rtol=1e-5, atol=1e-6)


def test_gradient_norm_is_reached_independently(data):
    X, y = data
    lin = np.linspace(-0.1, 0.1, X.shape[1])
    for loss in (Logistic(), HuberSVM(0.5)):
        res = minimize(loss, X, y, l2=1e-2, linear=lin, tol=1e-9)
        g = loss.gradient(res.theta, X, y) + 1e-2 * res.theta + lin
        assert np.linalg.norm(g) <= 1e-9
        assert res.objective == pytest.approx(
            objective_value(loss, res.theta, X, y, l2=1e-2, linear=lin)
        )


def test_sparse_equals_dense(data):
    X, y = data
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.05, X, 0.0))
    a = minimize(Logistic(), Xs, y, l2=1e-3)
    b = minimize(Logistic(), Xs.toarray(), y, l2=1e-3)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-7)
    c = minimize(Logistic(), Xs, y, l2=1e-3, regularizer=L1(1e-3))
    d = minimize(Logistic(), Xs.toarray(), y, l2=1e-3, regularizer=L1(1e-3))
    np.testing.assert_allclose(c.theta, d.theta, atol=1e-6)


def test_lasso_matches_sklearn(rng):
    n, d = 300, 10
    X = rng.normal(size=(n, d))
    y = X @ np.r_[1.0, -2.0, np.zeros(d - 2)] + 0.1 * rng.normal(size=n)
    alpha = 0.05
    res = minimize(Squared(label_bound=100), X, y, regularizer=L1(alpha), tol=1e-9)
    sk = Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(res.theta, sk.coef_, atol=1e-6)
    assert np.sum(res.theta != 0) < d  # sparsity


@pytest.mark.parametrize(
    "kw",
    [
        {"constraint": L2Ball(0.3)},
        {"constraint": L1Ball(0.5)},
        {"constraint": Box(-0.2, 0.2)},
        {"regularizer": ElasticNet(1e-2, 0.5)},
        {"regularizer": L1(1e-2), "constraint": L2Ball(0.5)},
    ],
    ids=str,
)
def test_constrained_and_proximal_reach_optimality_and_feasibility(data, kw, rng):
    X, y = data
    res = minimize(Logistic(), X, y, l2=1e-3, tol=1e-8, **kw)
    assert res.converged
    C = kw.get("constraint")
    if C is not None:
        assert C.contains(res.theta)
    # no feasible point nearby is better (first-order optimality, independently)
    F = res.objective
    for _ in range(200):
        cand = res.theta + rng.normal(size=X.shape[1]) * 1e-2
        if C is not None:
            cand = C.project(cand)
        val = objective_value(Logistic(), cand, X, y, l2=1e-3, regularizer=kw.get("regularizer"))
        assert val >= F - 1e-9


def test_reports_non_convergence_instead_of_raising(data):
    X, y = data
    res = minimize(Logistic(), X, y, l2=0.0, tol=1e-14, max_iter=2)
    assert not res.converged and res.optimality > 1e-14
