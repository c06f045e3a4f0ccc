"""Fenchel duality of norm-regularized GLM ERM and K–D Proposition 2."""

import numpy as np
import pytest

from dperm import duality
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter
from dperm.losses import HuberSVM, Logistic, Squared
from dperm.norms import GroupLinfNorm, L1Norm
from dperm.solvers import minimize

D = 5


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) / 3
    y = np.where(X[:, 0] - X[:, 2] + 0.1 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("loss", [Logistic(), HuberSVM(0.5), Squared()])
def test_weak_duality_and_zero_gap_at_optimum(loss):
    X, y = _data()
    norm, lam, alpha = GroupLinfNorm([[0, 1], [1, 2, 3], [4]], D), 0.05, 0.1
    rng = np.random.default_rng(1)
    theta_star = minimize(loss, X, y, l2=alpha, regularizer=norm.scaled(lam), tol=1e-11).theta
    p_star = duality.primal_value(loss, X, y, theta_star, alpha=alpha, norm=norm, lam=lam)
    for _ in range(3):  # random feasible dual points: D(s) ≤ P* and gap ≥ 0
        s = lam * norm.greedy_vertex(rng.normal(size=D)) * rng.uniform()
        val, theta = duality.dual_value(loss, X, y, s, alpha=alpha)
        assert val <= p_star + 1e-10
        gap, _ = duality.duality_gap(loss, X, y, s, alpha=alpha, norm=norm, lam=lam)
        p = duality.primal_value(loss, X, y, theta, alpha=alpha, norm=norm, lam=lam)
        assert gap == pytest.approx(p - val, abs=1e-9) and gap >= -1e-12
    # the optimal dual point is s* = −∇L̂(θ*) (optimality), with zero gap
    s_star = -(loss.gradient(theta_star, X, y) + alpha * theta_star)
    gap, theta = duality.duality_gap(loss, X, y, s_star, alpha=alpha, norm=norm, lam=lam)
    assert abs(gap) < 1e-7
    np.testing.assert_allclose(theta, theta_star, atol=1e-7)


def test_primal_recovery_is_gradient_of_dual():
    X, y = _data()
    s = np.array([0.01, -0.02, 0.0, 0.03, 0.01])
    e = np.array([0.3, 0.1, -0.2, 0.5, 0.4])
    h = 1e-5
    fp, _ = duality.dual_value(Logistic(), X, y, s + h * e, alpha=0.1)
    fm, _ = duality.dual_value(Logistic(), X, y, s - h * e, alpha=0.1)
    th = duality.primal_from_dual(Logistic(), X, y, s, alpha=0.1)
    assert (fp - fm) / (2 * h) == pytest.approx(float(th @ e), rel=1e-5)


@pytest.mark.parametrize("lam", [0.0, 0.05])
def test_proposition2_objective_perturbation_through_the_dual(lam):
    """argmin L̂ + ⟨b,·⟩ + λΩ via the (shifted) dual equals the primal solution of
    objective perturbation for the same b, to solver precision."""
    from dperm.algorithms.objective_perturbation import _solve

    X, y = _data()
    b = np.random.default_rng(2).normal(size=D) * 0.05
    norm = L1Norm(D)
    theta, info = duality.objective_perturbation_via_dual(
        Logistic(), X, y, b, alpha=0.1, norm=norm, lam=lam
    )
    reg = norm.scaled(lam) if lam > 0 else None
    ref, _ = _solve(Logistic(), X, y, 0.1, b, reg, None, 1e-11, 10_000, "test")
    np.testing.assert_allclose(theta, ref, atol=1e-6)
    assert info["gap"] <= 1e-8
    if lam > 0:
        # not "output perturbation of the dual optimum": s_b ≠ s* in general
        sol0, _ = duality.objective_perturbation_via_dual(
            Logistic(), X, y, np.zeros(D), alpha=0.1, norm=norm, lam=lam
        )
        naive = duality.primal_from_dual(
            Logistic(), X, y, -(Logistic().gradient(sol0, X, y) + 0.1 * sol0) + b, alpha=0.1
        )
        assert np.linalg.norm(naive - ref) > 1e-4


def test_bad_input():
    X, y = _data(30)
    with pytest.raises(InvalidPrivacyParameter, match="alpha"):
        duality.primal_from_dual(Logistic(), X, y, np.zeros(D), alpha=0.0)
    with pytest.raises(InvalidDataError, match="shape"):
        duality.primal_from_dual(Logistic(), X, y, np.zeros(D + 1), alpha=0.1)
    with pytest.raises(InvalidDataError, match="feasible"):
        duality.duality_gap(Logistic(), X, y, np.ones(D), alpha=0.1, norm=L1Norm(D), lam=0.5)
    with pytest.raises(InvalidPrivacyParameter, match="GLMLoss"):
        duality.primal_from_dual("logistic", X, y, np.zeros(D), alpha=0.1)


def test_convergence_error_names_only_public_settings():
    from dperm.exceptions import ConvergenceError

    X, y = _data()
    with pytest.raises(ConvergenceError, match="max_iter=1;") as err:
        duality.primal_from_dual(Logistic(), X, y, np.ones(D), alpha=1e-3, tol=1e-14, max_iter=1)
    assert "residual" not in str(err.value)
