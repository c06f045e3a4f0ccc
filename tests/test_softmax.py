"""Tests of the multinomial logistic (softmax) loss and its clipped-sum fast path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dperm.algorithms._gradient_loop import softmax_clipped_sum
from dperm.exceptions import InvalidDataError, LabelError, PrivacyLeakWarning
from dperm.losses import Logistic, Softmax


def _problem(seed, n, d, k, sparse=False, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X[rng.random((n, d)) < 0.6] = 0.0
        X = sp.csr_matrix(X)
    y = rng.integers(0, k, size=n)
    theta = scale * rng.normal(size=(d, k))
    return X, y, theta


def _dense(X):
    return X.toarray() if sp.issparse(X) else X


shapes = st.tuples(
    st.integers(0, 10_000),  # seed
    st.integers(1, 12),  # n
    st.integers(1, 6),  # d
    st.integers(2, 5),  # k
    st.booleans(),  # sparse
)


@settings(max_examples=25, deadline=None)
@given(shapes)
def test_per_example_gradients_equal_loop_over_single_examples(args):
    seed, n, d, k, sparse = args
    X, y, theta = _problem(seed, n, d, k, sparse)
    loss = Softmax(k)
    G = loss.per_example_gradients(theta, X, y)
    assert G.shape == (n, d, k)
    for i in range(n):  # independent computation: the mean gradient of a 1-row dataset
        gi = loss.gradient(theta, X[i : i + 1], y[i : i + 1])
        np.testing.assert_allclose(G[i], gi, rtol=1e-12, atol=1e-14)
    # mean of per-example gradients is the gradient
    np.testing.assert_allclose(G.mean(axis=0), loss.gradient(theta, X, y), atol=1e-13)
    # norm without materializing: ‖p − e_y‖·‖x‖ equals the Frobenius norm
    norms = loss.per_example_gradient_norms(theta, X, y)
    np.testing.assert_allclose(norms, np.sqrt((G**2).sum(axis=(1, 2))), rtol=1e-12, atol=1e-15)


@settings(max_examples=25, deadline=None)
@given(shapes, st.floats(0.01, 5.0))
def test_clipped_sum_fast_path_equals_explicit_clipping(args, clipping_norm):
    seed, n, d, k, sparse = args
    X, y, theta = _problem(seed, n, d, k, sparse, scale=2.0)
    loss = Softmax(k)
    G = loss.per_example_gradients(theta, X, y)
    expected = np.zeros((d, k))
    for i in range(n):
        nrm = np.linalg.norm(G[i])
        expected += G[i] * min(1.0, clipping_norm / nrm) if nrm > 0 else G[i]
    xnorms = np.sqrt((_dense(X) ** 2).sum(axis=1))
    got = softmax_clipped_sum(loss, theta, X, y, xnorms, clipping_norm)
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-13)


def test_value_gradient_and_hvp_match_finite_differences():
    X, y, theta = _problem(1, 40, 4, 3)
    loss = Softmax(3)
    g = loss.gradient(theta, X, y)
    h = 1e-6
    fd = np.zeros_like(theta)
    for idx in np.ndindex(theta.shape):
        e = np.zeros_like(theta)
        e[idx] = h
        fd[idx] = (loss.value(theta + e, X, y) - loss.value(theta - e, X, y)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    v, gg = loss.value_and_gradient(theta, X, y)
    assert v == pytest.approx(loss.value(theta, X, y))
    np.testing.assert_allclose(gg, g)
    V = np.random.default_rng(2).normal(size=theta.shape)
    hv = loss.hessian_vector_product(theta, X, y, V)
    fd_hv = (loss.gradient(theta + h * V, X, y) - loss.gradient(theta - h * V, X, y)) / (2 * h)
    np.testing.assert_allclose(hv, fd_hv, rtol=1e-5, atol=1e-8)


def test_value_at_zero_is_log_k_and_two_classes_reduce_to_logistic():
    X, y, _ = _problem(3, 50, 5, 4)
    assert Softmax(4).value(np.zeros((5, 4)), X, y) == pytest.approx(math.log(4))
    # k = 2 with Θ = [−w/2, w/2] is the logistic loss with labels ±1 (class 1 ↦ +1)
    rng = np.random.default_rng(4)
    w = rng.normal(size=5)
    y2 = rng.integers(0, 2, size=50)
    theta = np.column_stack([-w / 2, w / 2])
    assert Softmax(2).value(theta, X, y2) == pytest.approx(
        Logistic().value(w, X, np.where(y2 == 1, 1.0, -1.0)), rel=1e-12
    )


def test_lipschitz_bound_holds_and_is_tight():
    loss = Softmax(5)
    R = 2.5
    assert loss.lipschitz(R) == pytest.approx(math.sqrt(2) * R)
    assert loss.smoothness(R) == pytest.approx(R**2 / 2)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    X *= R / np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.integers(0, 5, size=300)
    for scale in (0.1, 1.0, 30.0):
        theta = scale * rng.normal(size=(4, 5))
        assert loss.per_example_gradient_norms(theta, X, y).max() <= loss.lipschitz(R) + 1e-12
    # near-tight: scores that put all mass on a wrong class give ‖p − e_y‖ → √2
    x = np.array([[R, 0.0, 0.0, 0.0]])
    theta = np.zeros((4, 5))
    theta[0, 1] = 50.0
    nrm = loss.per_example_gradient_norms(theta, x, np.array([0]))[0]
    assert nrm == pytest.approx(math.sqrt(2) * R, rel=1e-6)


def test_smoothness_bounds_the_hessian_quadratic_form():
    loss = Softmax(4)
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # R = 1
    y = rng.integers(0, 4, size=200)
    for _ in range(20):
        theta = rng.normal(size=(3, 4)) * rng.uniform(0, 3)
        V = rng.normal(size=(3, 4))
        quad = float(np.sum(V * loss.hessian_vector_product(theta, X, y, V)))
        assert -1e-12 <= quad <= loss.smoothness(1.0) * float(np.sum(V * V)) + 1e-12


def test_labels_are_checked_and_inferring_k_warns():
    loss = Softmax(3)
    X, _, theta = _problem(7, 5, 2, 3)
    for bad in ([0, 1, 3, 0, 1], [0, -1, 2, 0, 1], [0, 1.5, 2, 0, 1], ["a", "b", "c", "a", "b"]):
        with pytest.raises(LabelError):
            loss.check_labels(np.array(bad))
    np.testing.assert_array_equal(loss.check_labels([0.0, 2.0, 1.0]), [0, 2, 1])
    with pytest.warns(PrivacyLeakWarning, match="n_classes"):
        assert Softmax().resolve_n_classes(np.array([0, 2, 1])) == 3
    assert Softmax(7).resolve_n_classes(np.array([0, 1])) == 7
    with pytest.raises(LabelError):
        Softmax().resolve_n_classes(np.array([0, 0]))
    with pytest.raises(InvalidDataError, match="theta"):
        loss.gradient(np.zeros(2), X, np.zeros(5, dtype=int))
    assert Softmax(3) == Softmax(3) and Softmax(3) != Softmax(4)
    np.testing.assert_array_equal(loss.predict(theta, X), np.argmax(X @ theta, axis=1))


def test_flat_softmax_is_the_softmax_loss_on_vec_theta():
    from dperm.losses.softmax import FlatSoftmax
    from dperm.solvers import minimize

    rng = np.random.default_rng(7)
    n, d, k = 200, 4, 3
    X = rng.normal(size=(n, d)) / 3
    y = rng.integers(k, size=n)
    loss, flat = Softmax(k), FlatSoftmax(Softmax(k), k)
    T, V = rng.normal(size=(d, k)), rng.normal(size=(d, k))
    assert flat.value(T.ravel(), X, y) == pytest.approx(loss.value(T, X, y))
    v, g = flat.value_and_gradient(T.ravel(), X, y)
    assert v == pytest.approx(loss.value(T, X, y))
    np.testing.assert_allclose(g, loss.gradient(T, X, y).ravel())
    np.testing.assert_allclose(
        flat.hessian_vector_product(T.ravel(), X, y, V.ravel()),
        loss.hessian_vector_product(T, X, y, V).ravel(),
    )
    assert flat.curvature == 0.5 and flat.lipschitz(2.0) == pytest.approx(2 * math.sqrt(2))
    # the vector solver minimizes it: ∇(L + ½λ‖Θ‖²) = 0 at the answer
    res = minimize(flat, X, y, l2=0.1, tol=1e-10, x0=np.zeros(d * k))
    grad = loss.gradient(res.theta.reshape(d, k), X, y) + 0.1 * res.theta.reshape(d, k)
    assert res.converged and np.linalg.norm(grad) <= 1e-10


@pytest.mark.parametrize("sparse", [False, True])
def test_design_fused_passes_equal_the_materialized_products(sparse):
    """On a Design (clipped rows, implicit intercept) the softmax value, gradient and
    Hessian-vector product come from the fused passes; they equal the same products
    on the materialized effective matrix (float32 X accumulated in float64)."""
    from dperm.design import as_design

    X, y, _ = _problem(3, 300, 7, 4, sparse=sparse, scale=1.0)
    X = X.astype(np.float32)
    D = as_design(X, 2.0, intercept_scaling=0.7, warn=False)
    ref = D.to_dense()
    rng = np.random.default_rng(4)
    theta, V = rng.normal(size=(2, 8, 4))
    loss = Softmax(4)
    v, g = loss.value_and_gradient(theta, D, y)
    v_ref, g_ref = loss.value_and_gradient(theta, ref, y)
    assert v == pytest.approx(v_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(
        loss.hessian_vector_product(theta, D, y, V),
        loss.hessian_vector_product(theta, ref, y, V),
        rtol=1e-10,
        atol=1e-13,
    )
    # the fused value and residual are the ones of the separate functions
    Z = ref @ theta
    val, R = loss.value_and_derivative(Z, y)
    np.testing.assert_allclose(val, loss.pointwise(Z, y), rtol=1e-13)
    np.testing.assert_allclose(R, loss.residual_from_scores(Z, y), atol=1e-15)
