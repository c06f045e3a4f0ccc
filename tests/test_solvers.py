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


# ----------------------------------------------------------------------------- second order
def _np_logistic(A, y, l2, lin):
    """f, ∇f, ∇²f of mean log(1 + e^{−y aᵀθ}) + (l2/2)‖θ‖² + ⟨lin, θ⟩ in plain numpy
    (independent of dperm's losses and Design)."""

    def f(th):
        return np.mean(np.logaddexp(0.0, -y * (A @ th))) + 0.5 * l2 * th @ th + lin @ th

    def g(th):
        s = -y / (1.0 + np.exp(y * (A @ th)))
        return A.T @ s / len(y) + l2 * th + lin

    def h(th):
        p = 1.0 / (1.0 + np.exp(-(A @ th)))
        return A.T @ (A * (p * (1 - p))[:, None]) / len(y) + l2 * np.eye(A.shape[1])

    return f, g, h


def _binary(rng, n, d):
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = np.where(X @ rng.normal(size=d) * 3 + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("n", [3000, 70_000], ids=["newton", "subsampled"])
def test_second_order_solver_matches_scipy_trust_region(rng, n):
    """The perturbed, ridge-regularized logistic problem with an intercept and clipped
    rows: dperm's Newton (all rows' Hessian, or a sub-sampled one past 2¹⁶ rows) and
    scipy's trust-region solver with the exact Hessian (trust-exact, Conn, Gould &
    Toint) on the same objective written in plain numpy find the same minimizer, and
    the residual dperm reports is the one of the independent gradient."""
    from scipy.optimize import minimize as sp_minimize

    from dperm.design import as_design

    d = 20  # 16·n/d < n rows past 2¹⁶: the sub-sampled Hessian
    X, y = _binary(rng, n, d)
    D = as_design(X, 0.9, intercept_scaling=1.0, warn=False)  # clipping active
    A = D.to_dense()
    l2, lin = 1e-4, rng.normal(size=d + 1) * 1e-3
    res = minimize(Logistic(), D, y, l2=l2, linear=lin, tol=1e-10)
    assert res.converged
    assert res.method == ("newton" if n < 2**16 else "subsampled-newton")
    f, g, h = _np_logistic(A, y, l2, lin)
    assert res.optimality == pytest.approx(np.linalg.norm(g(res.theta)), rel=1e-3, abs=1e-12)
    assert np.linalg.norm(g(res.theta)) <= 1e-10
    ref = sp_minimize(
        f, np.zeros(d + 1), jac=g, hess=h, method="trust-exact", options={"gtol": 1e-12}
    )
    assert np.linalg.norm(g(ref.x)) <= 1e-10
    # strong convexity: ‖θ − θ*‖ ≤ (‖∇f(θ)‖ + ‖∇f(θ_ref)‖)/l2
    np.testing.assert_allclose(res.theta, ref.x, atol=2e-10 / l2)


def test_multinomial_newton_cg_matches_scipy_trust_region(rng):
    """Softmax with Newton-CG on the block Hessian-vector product vs scipy's
    trust-ncg (Steihaug) on the same objective written in plain numpy."""
    from scipy.optimize import minimize as sp_minimize
    from scipy.special import logsumexp, softmax

    from dperm.design import as_design
    from dperm.losses.softmax import FlatSoftmax, Softmax

    n, d, k = 2000, 5, 4
    X = rng.normal(size=(n, d))
    y = np.argmax(X @ rng.normal(size=(d, k)) + rng.gumbel(size=(n, k)), axis=1)
    D = as_design(X, 2.0, intercept_scaling=1.0, warn=False)
    A = D.to_dense()
    l2, lin = 1e-3, rng.normal(size=(d + 1) * k) * 1e-3
    res = minimize(FlatSoftmax(Softmax(k), k), D, y, l2=l2, linear=lin, tol=1e-10)
    assert res.converged and res.method == "newton-cg"
    Y = np.eye(k)[y]

    def f(th):
        Z = A @ th.reshape(d + 1, k)
        return np.mean(logsumexp(Z, axis=1) - Z[np.arange(n), y]) + 0.5 * l2 * th @ th + lin @ th

    def g(th):
        P = softmax(A @ th.reshape(d + 1, k), axis=1)
        return (A.T @ (P - Y) / n).ravel() + l2 * th + lin

    def hp(th, v):
        P = softmax(A @ th.reshape(d + 1, k), axis=1)
        U = A @ v.reshape(d + 1, k)
        W = P * U - P * np.sum(P * U, axis=1, keepdims=True)
        return (A.T @ W / n).ravel() + l2 * v

    assert np.linalg.norm(g(res.theta)) <= 1e-10
    ref = sp_minimize(
        f, np.zeros((d + 1) * k), jac=g, hessp=hp, method="trust-ncg", options={"gtol": 1e-11}
    )
    np.testing.assert_allclose(res.theta, ref.x, atol=2e-10 / l2)


def test_wide_sparse_design_uses_newton_cg_and_matches_the_gram_free_reference(rng):
    """More than 256 columns: Newton-CG with exact Hessian-vector products; dense and
    CSR give the same minimizer, and it satisfies the independent residual."""
    n, d = 1500, 300
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.05)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    a = minimize(Logistic(), sp.csr_matrix(X), y, l2=1e-3, tol=1e-10)
    b = minimize(Logistic(), X, y, l2=1e-3, tol=1e-10)
    assert a.converged and b.converged and a.method == "newton-cg"
    _, g, _ = _np_logistic(X, y, 1e-3, np.zeros(d))
    assert np.linalg.norm(g(a.theta)) <= 1e-10
    np.testing.assert_allclose(a.theta, b.theta, atol=2e-10 / 1e-3)


def test_subsampled_hessian_keeps_weights_aligned(rng):
    """A weighted loss (the estimators' sample weights) on > 2¹⁶ rows: the sub-sampled
    Hessian takes the weights of its own rows, and the minimizer is the weighted one
    (checked against the independent weighted gradient)."""
    from dperm.estimators._base import _WeightedLoss

    n, d = 70_000, 20
    X, y = _binary(rng, n, d)
    w = rng.random(n)
    res = minimize(_WeightedLoss(Logistic(), w), X, y, l2=1e-4, tol=1e-10)
    assert res.converged and res.method == "subsampled-newton"
    s = -w * y / (1.0 + np.exp(y * (X @ res.theta)))
    assert np.linalg.norm(X.T @ s / n + 1e-4 * res.theta) <= 1e-10


def test_warm_start_and_huge_linear_term(rng):
    """A warm start at the answer returns at once; a gigantic linear term (a far
    perturbation, F of order 10⁸) is still solved to the residual."""
    X, y = _binary(rng, 500, 5)
    first = minimize(Logistic(), X, y, l2=1e-2, tol=1e-10)
    again = minimize(Logistic(), X, y, l2=1e-2, tol=1e-10, x0=first.theta)
    assert again.converged and again.n_iter == 0 and again.n_passes == 1
    lin = np.full(5, 1e4)
    far = minimize(Logistic(), X, y, l2=1e-2, linear=lin, tol=1e-8)
    assert far.converged and np.linalg.norm(far.theta) > 1e5


def test_strided_hessian_is_the_subsample_sum_on_both_backends(rng):
    """glm_hessian(stride=s) = s × Σ over every s-th row of each block (numpy) or
    partition (Dask, computed on the partitions: no row reaches the client)."""
    from dperm.design import as_design

    n, d, s, chunk = 300, 5, 4, 70
    X = rng.normal(size=(n, d))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    w = rng.random(n)
    theta = rng.normal(size=d + 1)
    D = as_design(X, 1.5, intercept_scaling=0.5, warn=False)
    A = D.to_dense()
    p = 1.0 / (1.0 + np.exp(-(A @ theta)))
    h = p * (1 - p) * w

    def strided(starts):
        rows = np.concatenate([np.arange(a, b, s) for a, b in starts])
        return s * A[rows].T @ (A[rows] * h[rows, None])

    got = D.glm_hessian(Logistic(), theta, y, weights=w, stride=s)
    np.testing.assert_allclose(got, strided([(0, n)]), rtol=1e-12)
    da = pytest.importorskip("dask.array")
    import dask

    Dd = as_design(da.from_array(X, chunks=(chunk, d)), 1.5, intercept_scaling=0.5, warn=False)
    with dask.config.set(scheduler="synchronous"):
        got = Dd.glm_hessian(Logistic(), theta, da.from_array(y, chunks=chunk), weights=w, stride=s)
    parts = [(a, min(n, a + chunk)) for a in range(0, n, chunk)]
    np.testing.assert_allclose(got, strided(parts), rtol=1e-12)


@pytest.mark.parametrize("reg", [L1(1e-3), ElasticNet(1e-3, 0.5)])
def test_l1_in_an_active_l2_ball_on_a_nearly_collinear_design(reg):
    """ℓ1 / elastic net inside an ℓ2 ball that binds, on columns nearly collinear with
    the intercept and no ridge: projected FISTA stalls (β/μ ≈ 10⁸); the ball's KKT
    multiplier (proximal Newton, then Newton on the bordered KKT system) reaches the
    certified residual, on the boundary, at the minimum over the ball."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(100.0, 1.0, size=(100, 2)), np.ones(100)])
    y = X @ np.array([40.0, -40.0, 0.0]) + rng.normal(size=100)  # ‖θ_OLS‖ ≈ 57
    ball = L2Ball(50.0)
    res = minimize(Squared(), X, y, l2=0.0, regularizer=reg, constraint=ball, tol=1e-10)
    assert res.converged and res.optimality <= 1e-10
    assert np.linalg.norm(res.theta) == pytest.approx(50.0, rel=1e-9)  # the ball binds
    f = objective_value(Squared(), res.theta, X, y, regularizer=reg)
    for _ in range(200):  # no feasible point nearby does better
        other = ball.project(res.theta + 1e-3 * rng.normal(size=3))
        assert objective_value(Squared(), other, X, y, regularizer=reg) >= f - 1e-9
