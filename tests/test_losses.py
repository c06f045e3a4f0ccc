"""GLM losses: gradients against finite differences, the Lipschitz and
smoothness constants against their definitions, label checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dperm.exceptions import InvalidPrivacyParameter, LabelError, UnknownNameError
from dperm.losses import GLMLoss, Hinge, HuberSVM, Logistic, Quantile, Squared, get_loss

SMOOTH = [Logistic(), HuberSVM(0.5), HuberSVM(0.1), Squared(label_bound=3.0)]
ALL = [*SMOOTH, Hinge(), Quantile(0.3)]


def _data(rng, n=40, d=6, loss=None):
    X = rng.normal(size=(n, d))
    if loss is not None and not loss.classification:
        y = rng.uniform(-1, 1, size=n)
    else:
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, y


@pytest.mark.parametrize("loss", ALL, ids=repr)
def test_gradient_matches_finite_differences(loss: GLMLoss, rng):
    X, y = _data(rng, loss=loss)
    theta = rng.normal(size=X.shape[1]) * 0.3
    g = loss.gradient(theta, X, y)
    h = 1e-6
    fd = np.array(
        [
            (loss.value(theta + h * e, X, y) - loss.value(theta - h * e, X, y)) / (2 * h)
            for e in np.eye(X.shape[1])
        ]
    )
    # kinks of the non-smooth losses are hit with probability 0
    np.testing.assert_allclose(g, fd, atol=1e-6)
    v, g2 = loss.value_and_gradient(theta, X, y)
    assert v == pytest.approx(loss.value(theta, X, y))
    np.testing.assert_allclose(g2, g)


@pytest.mark.parametrize("loss", SMOOTH, ids=repr)
def test_hessian_vector_product_matches_finite_differences(loss, rng):
    X, y = _data(rng, loss=loss)
    theta = rng.normal(size=X.shape[1]) * 0.3
    v = rng.normal(size=X.shape[1])
    h = 1e-6
    fd = (loss.gradient(theta + h * v, X, y) - loss.gradient(theta - h * v, X, y)) / (2 * h)
    np.testing.assert_allclose(loss.hessian_vector_product(theta, X, y, v), fd, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 7),
    seed=st.integers(0, 2**31 - 1),
    which=st.integers(0, len(ALL) - 1),
)
def test_per_example_gradients_equal_single_example_loop(n, d, seed, which):
    loss = ALL[which]
    rng = np.random.default_rng(seed)
    X, y = _data(rng, n, d, loss)
    theta = rng.normal(size=d)
    G = loss.per_example_gradients(theta, X, y)
    loop = np.stack([loss.gradient(theta, X[i : i + 1], y[i : i + 1]) for i in range(n)])
    np.testing.assert_allclose(G, loop, atol=1e-12)
    np.testing.assert_allclose(loss.per_example_gradients(theta, sp.csr_matrix(X), y), G)
    np.testing.assert_allclose(G.mean(axis=0), loss.gradient(theta, X, y), atol=1e-12)


@pytest.mark.parametrize("loss", [Logistic(), HuberSVM(0.5), Hinge(), Quantile(0.2)], ids=repr)
@pytest.mark.parametrize("data_norm", [0.5, 1.0, 3.0])
def test_lipschitz_bounds_every_per_example_gradient(loss, data_norm, rng):
    """‖∇ℓ(θ; x, y)‖ ≤ L for rows on the sphere of radius data_norm and any θ."""
    X = rng.normal(size=(2000, 5))
    X *= data_norm / np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(2000) < 0.5, -1.0, 1.0)
    L = loss.lipschitz(data_norm)
    worst = 0.0
    for scale in (0.0, 0.1, 1.0, 10.0):
        theta = rng.normal(size=5) * scale
        worst = max(worst, np.linalg.norm(loss.per_example_gradients(theta, X, y), axis=1).max())
    assert worst <= L * (1 + 1e-12)
    assert worst >= 0.5 * L  # the bound is attained up to a constant: not vacuous


def test_squared_lipschitz_needs_radius_and_bounds_gradients(rng):
    loss = Squared(label_bound=2.0)
    with pytest.raises(InvalidPrivacyParameter, match="radius"):
        loss.lipschitz(1.0)
    L = loss.lipschitz(1.5, radius=3.0)
    assert L == pytest.approx(1.5 * (1.5 * 3.0 + 2.0))
    X = rng.normal(size=(3000, 4))
    X *= 1.5 / np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.uniform(-2, 2, size=3000)
    theta = rng.normal(size=4)
    theta *= 3.0 / np.linalg.norm(theta)
    assert np.linalg.norm(loss.per_example_gradients(theta, X, y), axis=1).max() <= L


@pytest.mark.parametrize("loss", SMOOTH, ids=repr)
def test_curvature_bounds_second_derivative_and_smoothness(loss, rng):
    z = np.linspace(-20, 20, 40001)
    y = np.ones_like(z) if loss.classification else np.zeros_like(z)
    assert loss.second_derivative(z, y).max() <= loss.curvature * (1 + 1e-12)
    assert loss.second_derivative(z, y).max() >= 0.99 * loss.curvature
    assert loss.smoothness(2.0) == pytest.approx(loss.curvature * 4.0)


def test_known_constants():
    assert Logistic().smoothness(1.0) == 0.25
    assert HuberSVM(0.5).smoothness(1.0) == 1.0  # β = R²/(2h), not L²
    assert HuberSVM(0.1).smoothness(1.0) == pytest.approx(5.0)
    assert math.isinf(Hinge().smoothness(1.0))
    assert Quantile(0.3).lipschitz(2.0) == pytest.approx(1.4)


def test_huber_is_continuous_and_matches_hinge_far_from_kink():
    loss = HuberSVM(0.3)
    for m in (0.7, 1.3):
        left, right = (
            loss.pointwise(np.array([m - 1e-9]), np.array([1.0])),
            loss.pointwise(np.array([m + 1e-9]), np.array([1.0])),
        )
        assert abs(left - right) < 1e-8
    z = np.array([-3.0, 0.0, 2.0])
    np.testing.assert_allclose(loss.pointwise(z, np.ones(3)), Hinge().pointwise(z, np.ones(3)))


@pytest.mark.parametrize("loss", [Logistic(), HuberSVM(), Hinge()], ids=repr)
def test_classification_losses_refuse_other_labels(loss):
    with pytest.raises(LabelError, match="-1 and \\+1"):
        loss.check_labels(np.array([0.0, 1.0]))
    np.testing.assert_array_equal(loss.check_labels([1, -1]), [1.0, -1.0])


def test_squared_refuses_labels_above_bound():
    with pytest.raises(LabelError, match="label_bound"):
        Squared(label_bound=1.0).check_labels([0.5, -1.5])


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1"])
def test_bad_data_norm_and_parameters(bad):
    with pytest.raises(InvalidPrivacyParameter):
        Logistic().lipschitz(bad)
    with pytest.raises(InvalidPrivacyParameter):
        HuberSVM(h=bad)


def test_get_loss():
    assert isinstance(get_loss("svm", h=0.2), HuberSVM)
    assert get_loss("svm", h=0.2).h == 0.2
    inst = Logistic()
    assert get_loss(inst) is inst
    with pytest.raises(UnknownNameError, match="unknown loss"):
        get_loss("probit")


def test_logistic_is_stable_for_huge_margins():
    loss = Logistic()
    z = np.array([-1e4, 1e4])
    y = np.array([1.0, 1.0])
    v = loss.pointwise(z, y)
    assert np.all(np.isfinite(v)) and v[0] == pytest.approx(1e4) and v[1] == 0.0
    assert np.all(np.isfinite(loss.derivative(z, y)))


def test_fused_logistic_value_and_derivative_equal_the_separate_ones(rng):
    z = np.concatenate([rng.normal(size=1000) * 40.0, [0.0, -745.0, 745.0, 1e4, -1e4]])
    y = np.where(rng.random(z.size) < 0.5, -1.0, 1.0)
    loss = Logistic()
    v, s = loss.value_and_derivative(z, y)
    np.testing.assert_allclose(v, loss.pointwise(z, y), rtol=2e-15, atol=0)
    np.testing.assert_allclose(s, loss.derivative(z, y), rtol=2e-15, atol=0)
    for other in (HuberSVM(0.5), Squared(label_bound=3.0)):  # the default: the two methods
        v, s = other.value_and_derivative(z / 40.0, y)
        np.testing.assert_array_equal(v, other.pointwise(z / 40.0, y))
        np.testing.assert_array_equal(s, other.derivative(z / 40.0, y))


def test_hessian_vector_products_reuse_the_curvature_only_at_the_same_point(rng):
    """The Design keeps the per-row curvature of its last Hessian-vector pass; a
    product at another θ, with another loss or other labels never reuses it."""
    from dperm.design import as_design

    X = rng.normal(size=(400, 16))
    y = np.where(rng.random(400) < 0.5, -1.0, 1.0)
    D = as_design(X, 3.0, intercept_scaling=1.0, warn=False)
    A = D.to_dense()
    th, th2, v = rng.normal(size=(3, 17))

    def direct(loss, theta, labels):
        h = loss.second_derivative(A @ theta, labels)
        return A.T @ (h * (A @ v)) / 400

    logistic, huber = Logistic(), HuberSVM(0.5)
    for loss, theta, labels in [
        (logistic, th, y),
        (logistic, th, y),  # reused
        (logistic, th2, y),
        (huber, th2, y),
        (huber, th2, -y),
        (logistic, th, y),
    ]:
        np.testing.assert_allclose(
            loss.hessian_vector_product(theta, D, labels, v),
            direct(loss, theta, labels),
            atol=1e-14,
        )
