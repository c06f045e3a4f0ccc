"""Utility measures: excess empirical risk against closed forms, the non-private
reference, accuracy, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from dperm import DPLinearRegression, DPLogisticRegression
from dperm.accounting.events import NonPrivate
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter
from dperm.losses import Logistic, Squared
from dperm.solvers import minimize, objective_value
from dperm.utility import accuracy, excess_empirical_risk, nonprivate_fit, objective_problems


@pytest.fixture(scope="module")
def data(unit_ball_data):
    return unit_ball_data(seed=3, n=500, w=[1.0, -2.0, 0.5, 0.0], noise=0.2, scale=0.4)


def test_excess_risk_of_a_quadratic_is_the_closed_form(data):
    # J(θ) = ‖Xθ − y‖²/(2n) + (Λ/2)‖θ‖²:  J(θ) − J(θ*) = ½(θ − θ*)ᵀ(XᵀX/n + ΛI)(θ − θ*)
    X, _ = data
    yr = np.clip(X @ np.array([0.3, 0.1, -0.2, 0.4]) + 0.05, -1, 1)
    lam, n = 0.05, X.shape[0]
    H = X.T @ X / n + lam * np.eye(4)
    theta_star = np.linalg.solve(H, X.T @ yr / n)
    theta = theta_star + np.array([0.2, -0.1, 0.05, 0.3])
    expected = 0.5 * (theta - theta_star) @ H @ (theta - theta_star)
    got = excess_empirical_risk(theta, X, yr, loss=Squared(1.0), alpha=lam)
    assert got == pytest.approx(expected, rel=1e-7)
    assert excess_empirical_risk(theta_star, X, yr, loss=Squared(1.0), alpha=lam) < 1e-12


def test_excess_risk_is_nonnegative_and_zero_at_the_optimum(data):
    X, y = data
    ref = minimize(Logistic(), X, y, l2=0.01, tol=1e-12).theta
    assert abs(excess_empirical_risk(ref, X, y, loss=Logistic(), alpha=0.01)) < 1e-12
    rng = np.random.default_rng(0)
    for _ in range(5):
        th = ref + rng.normal(size=4)
        assert excess_empirical_risk(th, X, y, loss=Logistic(), alpha=0.01) > 0


def test_excess_risk_of_an_estimator_uses_its_own_objective(data):
    X, y = data
    clf = DPLogisticRegression(epsilon=0.5, classes=[-1.0, 1.0], random_state=1).fit(X, y)
    (p,) = objective_problems(clf, X, y)
    # the released θ in the augmented space reproduces the decision function
    np.testing.assert_allclose(p["X"] @ p["theta"], clf.decision_function(X), atol=1e-12)
    ref = minimize(p["loss"], p["X"], p["y"], l2=clf.l2_, tol=1e-12).theta
    expected = objective_value(p["loss"], p["theta"], p["X"], p["y"], l2=clf.l2_) - objective_value(
        p["loss"], ref, p["X"], p["y"], l2=clf.l2_
    )
    assert excess_empirical_risk(clf, X, y) == pytest.approx(expected, rel=1e-8, abs=1e-12)
    # more privacy budget, less excess risk (same seed, far apart budgets)
    loose = DPLogisticRegression(epsilon=50.0, classes=[-1.0, 1.0], random_state=1).fit(X, y)
    assert excess_empirical_risk(loose, X, y) < excess_empirical_risk(clf, X, y)


def test_nonprivate_fit_is_the_exact_minimizer_and_marked_nonprivate(data):
    X, y = data
    clf = DPLogisticRegression(epsilon=1.0, classes=[-1.0, 1.0], random_state=0).fit(X, y)
    ref = nonprivate_fit(clf, X, y)
    assert ref.dp_event_ == NonPrivate() and ref.epsilon_ == float("inf")
    assert excess_empirical_risk(ref, X, y) == pytest.approx(0.0, abs=1e-12)
    assert excess_empirical_risk(clf, X, y, reference=ref) == pytest.approx(
        excess_empirical_risk(clf, X, y), rel=1e-6, abs=1e-12
    )
    assert clf.dp_event_ != ref.dp_event_  # the original is untouched
    reg = DPLinearRegression(epsilon=1.0, constraint_radius=2.0, random_state=0)
    yr = np.clip(X @ np.array([0.3, 0.1, -0.2, 0.4]), -1, 1)
    reg.fit(X, yr)
    ref_r = nonprivate_fit(reg, X, yr)
    assert ref_r.coef_.shape == (4,) and isinstance(ref_r.intercept_, float)
    assert ref_r.score(X, yr) >= reg.score(X, yr) - 1e-9


def test_accuracy_of_theta_and_of_a_model(data):
    X, y = data
    theta = np.array([1.0, -2.0, 0.5, 0.0])
    assert accuracy(theta, X, y) == pytest.approx(np.mean(np.sign(X @ theta) == y))
    clf = DPLogisticRegression(epsilon=2.0, classes=[-1.0, 1.0], random_state=0).fit(X, y)
    assert accuracy(clf, X, y) == pytest.approx(clf.score(X, y))


def test_bad_input(data):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter, match="loss"):
        excess_empirical_risk(np.zeros(4), X, y)
    clf = DPLogisticRegression(epsilon=1.0, classes=[-1.0, 1.0], random_state=0).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter):
        excess_empirical_risk(clf, X, y, loss=Logistic())
    with pytest.raises(InvalidDataError):
        excess_empirical_risk(np.zeros(3), X, y, loss=Logistic())
    with pytest.raises(InvalidDataError):
        accuracy(np.zeros(3), X, y)
    with pytest.raises(InvalidDataError, match="unseen"):
        excess_empirical_risk(clf, X, np.where(y > 0, 5.0, -1.0))


def test_multinomial_reference_is_sklearns_multinomial_minimizer():
    """The non-private reference of a multinomial model is one softmax problem (the
    block Hessian-vector products of the solver): it equals scikit-learn's
    multinomial LogisticRegression with the same ridge (no intercept: scikit-learn
    leaves it unpenalized), and the excess risk against it is ≥ 0 and 0 at it."""
    import warnings

    from sklearn.linear_model import LogisticRegression

    from dperm.exceptions import ClippingWarning

    rng = np.random.default_rng(5)
    n, d, k = 1500, 4, 3
    X = rng.normal(size=(n, d)) / 3
    y = np.argmax(X @ rng.normal(size=(d, k)) * 4 + rng.gumbel(size=(n, k)), axis=1)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]  # no row is clipped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        model = DPLogisticRegression(
            mechanism="objective",
            multi_class="multinomial",
            epsilon=2.0,
            data_norm=1.0,
            fit_intercept=False,
            classes=[0, 1, 2],
            random_state=0,
        ).fit(X, y)
    (problem,) = objective_problems(model, X, y)
    assert problem["theta"].shape == (d * k,)
    ref = nonprivate_fit(model, X, y)
    sk = LogisticRegression(
        C=1.0 / (n * model.l2_), fit_intercept=False, tol=1e-12, max_iter=10_000
    )
    sk.fit(X, y)
    np.testing.assert_allclose(ref.coef_, sk.coef_, atol=1e-6)
    assert excess_empirical_risk(model, X, y) > 0.0
    assert excess_empirical_risk(ref, X, y) == pytest.approx(0.0, abs=1e-12)
