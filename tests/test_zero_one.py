"""The 0-1 loss and the exponential mechanism over a net of linear classifiers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dperm.accounting.events import PureEpsilon
from dperm.algorithms.zero_one_net import covering_radius, private_linear_classifier, sphere_net
from dperm.exceptions import InvalidPrivacyParameter, LabelError
from dperm.losses.zero_one import ZeroOne


def _margin_data(n, d, gamma, seed=0):
    """Rows of norm 0.999 separated by a unit θ* (angle π/8 in the first plane) with
    margin |⟨θ*, x⟩| ≥ γ‖x‖."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X *= 0.999 / np.linalg.norm(X, axis=1, keepdims=True)
    theta = np.zeros(d)
    theta[:2] = [math.cos(math.pi / 8), math.sin(math.pi / 8)]
    m = X @ theta
    X = X[np.abs(m) >= gamma * 0.999]
    y = np.sign(m[np.abs(m) >= gamma * 0.999])
    return X, y


def test_pointwise_and_value():
    loss = ZeroOne()
    z = np.array([2.0, -1.0, 0.0, 0.5])
    y = np.array([1.0, 1.0, 1.0, -1.0])
    np.testing.assert_array_equal(loss.pointwise(z, y), [0.0, 1.0, 1.0, 1.0])
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 1.0]])
    yy = np.array([1.0, 1.0, 1.0])
    assert loss.value(np.array([1.0, 0.0]), X, yy) == pytest.approx(2.0 / 3.0)
    # invariant to positive scaling of θ
    assert loss.value(np.array([7.0, 0.0]), X, yy) == loss.value(np.array([1.0, 0.0]), X, yy)
    assert math.isinf(loss.lipschitz(1.0))
    with pytest.raises(LabelError):
        loss.check_labels(np.array([0.0, 1.0]))


def test_sphere_net_shapes_and_covering_radius():
    np.testing.assert_array_equal(sphere_net(1, 10), [[-1.0], [1.0]])
    for k in (8, 32):
        net = sphere_net(2, k)
        np.testing.assert_allclose(np.linalg.norm(net, axis=1), 1.0)
        exact = 2 * math.sin(math.pi / (2 * k))
        est = covering_radius(net, random_state=0)
        assert est <= exact + 1e-12
        assert est > 0.97 * exact
    n3 = sphere_net(3, 500)
    np.testing.assert_allclose(np.linalg.norm(n3, axis=1), 1.0)
    # Fibonacci lattice covers S² at radius O(1/√k)
    assert covering_radius(n3, random_state=1) < 4.0 / math.sqrt(500)
    n5 = sphere_net(5, 100, random_state=3)
    assert n5.shape == (100, 5)
    np.testing.assert_array_equal(n5, sphere_net(5, 100, random_state=3))


def test_utility_against_margin_bound_and_net_size():
    gamma = 0.2
    X, y = _margin_data(1500, 2, gamma, seed=1)
    n = X.shape[0]
    eps = 1.0
    rng = np.random.default_rng(2)
    trials = 100
    for k, expect_zero_best in ((4, False), (64, True)):
        # covering radius 2 sin(π/2k) < γ ⇔ the best net point has no margin error
        assert (2 * math.sin(math.pi / (2 * k)) < gamma) == expect_zero_best
        errs = []
        for _ in range(trials):
            res = private_linear_classifier(X, y, epsilon=eps, net_size=k, random_state=rng)
            errs.append(ZeroOne().value(res.theta, X, y))
        assert res.event == PureEpsilon(eps)
        if expect_zero_best:
            bound = 2 * (math.log(k) + math.log(20)) / (n * eps)
            assert res.diagnostics["utility_bound"] == pytest.approx(bound)
            assert np.mean(np.array(errs) > bound) <= 0.05 + 3 * math.sqrt(0.0475 / trials)
        else:
            coarse = np.mean(errs)
    assert coarse > 0.02  # a 4-point net cannot reach the margin classifier's 0 error


def test_more_privacy_budget_lower_error():
    X, y = _margin_data(400, 2, 0.1, seed=4)
    rng = np.random.default_rng(5)

    def mean_err(eps):
        return np.mean(
            [
                ZeroOne().value(
                    private_linear_classifier(
                        X, y, epsilon=eps, net_size=64, random_state=rng
                    ).theta,
                    X,
                    y,
                )
                for _ in range(60)
            ]
        )

    assert mean_err(0.01) > mean_err(2.0) + 0.1


def test_errors():
    X, y = _margin_data(50, 2, 0.1)
    with pytest.raises(InvalidPrivacyParameter, match="size"):
        sphere_net(2, 1)
    with pytest.raises(InvalidPrivacyParameter, match="d"):
        sphere_net(0, 5)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        private_linear_classifier(X, y, epsilon=0.0)
    with pytest.raises(LabelError):
        private_linear_classifier(X, np.zeros(X.shape[0]), epsilon=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="shape"):
        private_linear_classifier(np.ones(5), y[:5], epsilon=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="net"):
        covering_radius(np.ones(3))


def test_exact_privacy_loss_of_the_net_mechanism_and_factor_two_mutation():
    """The output law of private_linear_classifier on {−1, +1} (d = 1) is the
    exponential mechanism with utility −Σ 1[yθx ≤ 0] and Δ = 1: on a pair with 30
    base rows for +1 the rare output −1 has privacy loss → ε (the normalizers do
    not cancel), ≤ ε exactly; with Δ/2 (a factor-2 bug) the loss exceeds ε."""
    from dperm.mechanisms.exponential import exponential_mechanism_log_probabilities

    eps, m = 1.0, 30
    X = np.ones((m + 1, 1))
    y_d = np.r_[np.ones(m), -1.0]  # D: the last record is the anti-canary
    y_dp = np.ones(m + 1)  # D′: the canary
    net = sphere_net(1, 2)
    res = private_linear_classifier(X, y_d, epsilon=eps, net_size=2, random_state=0)
    assert res.diagnostics["sensitivity"] == 1.0 and res.event.epsilon == eps

    def log_probs(y, sens):
        total = ZeroOne().pointwise(X @ net.T, y[:, None]).sum(axis=0)
        return exponential_mechanism_log_probabilities(-total, epsilon=eps, sensitivity=sens)

    loss_rv = log_probs(y_d, 1.0) - log_probs(y_dp, 1.0)
    assert np.max(np.abs(loss_rv)) <= eps + 1e-12
    assert np.max(np.abs(loss_rv)) > 0.95 * eps
    halved = log_probs(y_d, 0.5) - log_probs(y_dp, 0.5)
    assert np.max(np.abs(halved)) > 1.5 * eps
    # the sampler draws from exactly that law (chi-square on 4000 draws)
    draws = np.array(
        [
            private_linear_classifier(X, y_d, epsilon=eps, net_size=2, random_state=s).theta[0]
            for s in range(4000)
        ]
    )
    p_minus = float(np.exp(log_probs(y_d, 1.0))[np.flatnonzero(net[:, 0] < 0)[0]])
    k = int(np.sum(draws < 0))
    assert abs(k - 4000 * p_minus) <= 4 * np.sqrt(4000 * p_minus * (1 - p_minus)) + 1
