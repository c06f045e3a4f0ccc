"""Objective perturbation: calibration by hand, the noise actually drawn, scaling
with the data norm, clipping, ε → ∞, constraints, events and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from dperm.accounting.events import EpsilonDelta, PureEpsilon
from dperm.algorithms import objective_perturbation as op
from dperm.constraints import L1Ball, L2Ball, Polytope
from dperm.exceptions import (
    ClippingWarning,
    ConvergenceError,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    UnknownNameError,
)
from dperm.losses import Hinge, HuberSVM, Logistic, Quantile, Squared
from dperm.regularizers import L1, ElasticNet
from dperm.solvers import minimize

P_MIN = 1e-3


@pytest.fixture(scope="module")
def data(unit_ball_data):
    return unit_ball_data(seed=0, n=400, w=[2.0, -1.0, 0.5, 0.0], noise=0.3)


# ----------------------------------------------------------------------------- calibration
def test_chaudhuri_first_branch_by_hand():
    # ε = 1, n = 1000, Λ = 0.01, β = c = 1/4: ratio β/(nΛ) = 0.025
    eps_p, extra = op.chaudhuri_calibration(1.0, 1000, 0.01, 0.25)
    assert eps_p == pytest.approx(1.0 - math.log(1.0 + 2 * 0.025 + 0.025**2), rel=1e-14)
    assert eps_p == pytest.approx(0.95061478, abs=1e-8)  # 1 − ln(1.050625)
    assert extra == 0.0


def test_chaudhuri_second_branch_by_hand():
    # ε = 1, n = 100, Λ = 1e-4, β = 1/4: ε' = 1 − ln(1 + 50 + 625) < 0 ⇒ Δ branch
    eps_p, extra = op.chaudhuri_calibration(1.0, 100, 1e-4, 0.25)
    assert eps_p == 0.5
    # Δ = c/(n(e^{ε/4} − 1)) − Λ = 0.25/(100 · 0.2840254166877) − 1e-4
    assert extra == pytest.approx(0.25 / (100 * 0.2840254166877415) - 1e-4, rel=1e-12)
    assert extra == pytest.approx(0.0087020288, abs=1e-9)
    # then the Jacobian term costs exactly ε/2: 2 ln(1 + β/(n(Λ + Δ))) = ε/2
    assert 2 * math.log1p(0.25 / (100 * (1e-4 + extra))) == pytest.approx(0.5, rel=1e-12)


def test_chaudhuri_zero_alpha_uses_the_delta_branch():
    eps_p, extra = op.chaudhuri_calibration(2.0, 50, 0.0, 1.0)
    assert eps_p == 1.0
    assert extra == pytest.approx(1.0 / (50 * math.expm1(0.5)), rel=1e-12)
    # huge ε: e^{ε/4} overflows a float; Δ must just be 0, not an error
    assert 0.0 <= op.chaudhuri_calibration(1e6, 50, 0.0, 1.0)[1] < 1e-300


def test_kifer_calibration_by_hand():
    # ε = 1, δ = 1e-6, n = 1000, Λ = 0, β = 1/4, L = 1
    sigma, extra = op.kifer_calibration(1.0, 1e-6, 1000, 0.0, 0.25, 1.0)
    assert extra == pytest.approx(2 * 0.25 / 1000, rel=1e-14)  # nΛ_tot = 2β/ε
    # σ = ζ√(8 ln(2/δ) + 4ε)/ε with ζ = 2L; ln(2e6) = 14.508657738524219
    assert sigma == pytest.approx(2.0 * math.sqrt(8 * 14.508657738524219 + 4.0), rel=1e-12)
    assert sigma == pytest.approx(21.91524, abs=1e-4)
    # enough regularization already: nothing added
    assert op.kifer_calibration(1.0, 1e-6, 1000, 0.01, 0.25, 1.0)[1] == 0.0


def test_kifer_noise_part_costs_at_most_half_epsilon():
    # privacy loss of the noise term ≤ (ζ/σ)t + ζ²/(2σ²), t² = 2 ln(2/δ); must be ≤ ε/2
    for eps in (0.05, 0.5, 1.0, 4.0, 30.0):
        for delta in (1e-3, 1e-6, 1e-12):
            sigma, _ = op.kifer_calibration(eps, delta, 10, 1.0, 1.0, 1.0)
            u = 2.0 / sigma
            t = math.sqrt(2 * math.log(2 / delta))
            assert u * t + u * u / 2 <= eps / 2 * (1 + 1e-12)


# ----------------------------------------------------------------------------- the noise drawn
def _recovered_noise(res, loss, X, y):
    """b = −n(∇L(θ) + (Λ+Δ)θ): the first-order condition of the unconstrained problem."""
    n = X.shape[0]
    lam = res.diagnostics["l2_total"]
    return -n * (loss.gradient(res.theta, X, y) + lam * res.theta)


def test_gamma_noise_inside_the_algorithm_has_the_paper_law(data):
    X, y = data
    X, y = X[:120], y[:120]
    loss = Logistic()
    norms = []
    for seed in range(300):
        res = op.fit(
            loss, X, y, epsilon=2.0, delta=0.0, data_norm=1.0, alpha=0.05, random_state=seed,
            calibration="paper",
        )  # fmt: skip
        norms.append(np.linalg.norm(_recovered_noise(res, loss, X, y)))
    dg = res.diagnostics
    assert dg["noise"] == "gamma" and dg["extra_l2"] == 0.0
    eps_p, _ = op.chaudhuri_calibration(2.0, 120, 0.05, 0.25)
    assert dg["epsilon_noise"] == pytest.approx(eps_p)
    # ‖b‖ ~ Gamma(d, 2L/ε') with L = 1
    ks = stats.kstest(norms, stats.gamma(a=X.shape[1], scale=2.0 / eps_p).cdf)
    assert ks.pvalue > P_MIN


def test_gaussian_noise_inside_the_algorithm_has_the_theorem_sigma(data):
    X, y = data
    X, y = X[:120], y[:120]
    loss = HuberSVM(0.5)
    coords = []
    for seed in range(150):
        res = op.fit(
            loss, X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, alpha=0.0, random_state=seed,
            calibration="paper",
        )  # fmt: skip
        coords.append(_recovered_noise(res, loss, X, y))
    sigma, extra = op.kifer_calibration(1.0, 1e-5, 120, 0.0, 1.0, 1.0)  # β = 1/(2h) = 1
    assert res.diagnostics["extra_l2"] == pytest.approx(extra)
    assert res.diagnostics["noise_scale"] == pytest.approx(sigma)
    z = np.concatenate(coords) / sigma
    assert stats.kstest(z, stats.norm.cdf).pvalue > P_MIN


# ----------------------------------------------------------------------------- scaling with R
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_data_norm_generalizes_by_rescaling(data, delta):
    # x → R x with data_norm R and Λ → R²Λ is the same problem in θ → θ/R: the
    # calibration must treat it identically (same ε', Δ·R², noise·R)
    X, y = data
    R = 7.0
    kw = {"epsilon": 0.8, "delta": delta, "random_state": 3}
    a = op.fit(Logistic(), X, y, data_norm=1.0, alpha=0.002, **kw)
    b = op.fit(Logistic(), R * X, y, data_norm=R, alpha=0.002 * R**2, **kw)
    np.testing.assert_allclose(b.theta * R, a.theta, rtol=1e-7, atol=1e-9)
    assert b.diagnostics["extra_l2"] == pytest.approx(a.diagnostics["extra_l2"] * R**2)
    assert b.diagnostics["epsilon_noise"] == pytest.approx(a.diagnostics["epsilon_noise"])


# ----------------------------------------------------------------------------- clipping
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_huge_row_gives_the_model_of_the_clipped_row(data, delta):
    X, y = data
    big = X.copy()
    big[5] *= 1e6
    clipped = X.copy()
    clipped[5] = X[5] / np.linalg.norm(X[5])  # clipped to data_norm = 1
    kw = {"epsilon": 1.0, "delta": delta, "data_norm": 1.0, "alpha": 0.01, "random_state": 9}
    with pytest.warns(ClippingWarning):
        a = op.fit(Logistic(), big, y, **kw)
    b = op.fit(Logistic(), clipped, y, **kw)
    assert a.diagnostics["n_clipped"] == 1 and b.diagnostics["n_clipped"] == 0
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-8, atol=1e-10)


# ----------------------------------------------------------------------------- ε → ∞
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_large_epsilon_recovers_the_nonprivate_optimum(data, delta):
    X, y = data
    ref = minimize(Logistic(), X, y, l2=0.01, tol=1e-12).theta
    res = op.fit(
        Logistic(), X, y, epsilon=1e6, delta=delta, data_norm=1.0, alpha=0.01, random_state=0
    )
    # the linear term is ‖b‖/n ≲ 1e-5 and J is 0.01-strongly convex ⇒ ‖θ − θ*‖ ≲ 1e-3
    assert np.linalg.norm(res.theta - ref) < 2e-3 * max(1.0, np.linalg.norm(ref))
    far = op.fit(
        Logistic(), X, y, epsilon=0.1, delta=delta, data_norm=1.0, alpha=0.01, random_state=0
    )
    assert np.linalg.norm(far.theta - ref) > np.linalg.norm(res.theta - ref)


# ----------------------------------------------------------------------------- C and r
@pytest.mark.parametrize("delta", [0.0, 1e-6])
@pytest.mark.parametrize("constraint", [L2Ball(0.5), L1Ball(0.7)])
def test_output_lies_in_the_constraint_set(data, delta, constraint):
    X, y = data
    res = op.fit(
        Logistic(), X, y, epsilon=0.5, delta=delta, data_norm=1.0, alpha=0.01,
        constraint=constraint, random_state=1,
    )  # fmt: skip
    assert constraint.contains(res.theta, tol=1e-9)


def test_regularizer_path_and_squared_loss_with_constraint(data):
    X, y = data
    yr = np.clip(X @ np.array([0.5, -0.5, 0.2, 0.0]), -1, 1)
    res = op.fit(
        Squared(label_bound=1.0), X, yr, epsilon=2.0, delta=1e-6, data_norm=1.0, alpha=0.0,
        constraint=L2Ball(2.0), regularizer=ElasticNet(0.02, 0.5), random_state=0,
    )  # fmt: skip
    assert np.linalg.norm(res.theta) <= 2.0 * (1 + 1e-9)
    # L = R(R·radius + B) = 1·(2 + 1); the regularizer's strong convexity enters Λ
    assert res.diagnostics["lipschitz"] == pytest.approx(3.0)
    assert res.diagnostics["strong_convexity"] == pytest.approx(0.01)
    lasso = op.fit(
        Logistic(), X, y, epsilon=2.0, delta=0.0, data_norm=1.0, alpha=0.01,
        regularizer=L1(0.05), random_state=0,
    )  # fmt: skip
    assert np.all(np.isfinite(lasso.theta))


def test_squared_loss_without_constraint_is_refused(data):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter, match="radius"):
        op.fit(Squared(), X, np.clip(y, -1, 1), epsilon=1.0, data_norm=1.0, alpha=0.1)


@pytest.mark.parametrize("loss", [Hinge(), Quantile(0.5)])
def test_non_smooth_losses_are_refused(data, loss):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter, match="twice-differentiable"):
        op.fit(loss, X, y, epsilon=1.0, data_norm=1.0, alpha=0.1)


def test_polytope_without_projection_is_refused(data):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter, match="projection"):
        op.fit(
            Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=0.1,
            constraint=Polytope(np.eye(4)),
        )  # fmt: skip


# ----------------------------------------------------------------------------- events
def test_events_and_delta_default(data):
    X, y = data
    n = X.shape[0]
    kw = {"data_norm": 1.0, "alpha": 0.01, "random_state": 0}
    pure = op.fit(Logistic(), X, y, epsilon=0.5, delta=0.0, **kw)
    assert pure.event == PureEpsilon(0.5) and pure.diagnostics["noise"] == "gamma"
    approx = op.fit(Logistic(), X, y, epsilon=0.5, delta=1e-7, **kw)
    assert approx.event == EpsilonDelta(0.5, 1e-7)
    default = op.fit(Logistic(), X, y, epsilon=0.5, delta=None, **kw)
    assert default.event == EpsilonDelta(0.5, 1.0 / n**2)
    assert default.diagnostics["delta_default"] is True
    # Gamma noise with δ > 0 gives (and reports) pure ε
    forced = op.fit(Logistic(), X, y, epsilon=0.5, delta=1e-7, noise="gamma", **kw)
    assert forced.event == PureEpsilon(0.5)
    for r in (pure, approx, default, forced):
        assert r.diagnostics["neighbouring"] == "replace-one"
        assert r.theta.shape == (X.shape[1],)


def test_sparse_input_gives_the_dense_result(data):
    X, y = data
    kw = {"epsilon": 1.0, "delta": 1e-6, "data_norm": 1.0, "alpha": 0.01, "random_state": 4}
    a = op.fit(Logistic(), X, y, **kw)
    b = op.fit(Logistic(), sp.csr_matrix(X), y, **kw)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-8, atol=1e-10)


def test_non_convergence_fails_closed(data):
    X, y = data
    with pytest.raises(ConvergenceError):
        # a residual below floating-point resolution cannot be certified
        op.fit(Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=0.01, tol=1e-30, random_state=0)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf"), "1", None])
def test_bad_epsilon(data, epsilon):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter):
        op.fit(Logistic(), X, y, epsilon=epsilon, data_norm=1.0, alpha=0.1)


@pytest.mark.parametrize("delta", [-0.1, 1.0, 1.5, float("nan"), "0.1"])
def test_bad_delta(data, delta):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter):
        op.fit(Logistic(), X, y, epsilon=1.0, delta=delta, data_norm=1.0, alpha=0.1)


def test_delta_zero_with_gaussian_noise_is_refused(data):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter, match="Gaussian"):
        op.fit(Logistic(), X, y, epsilon=1.0, delta=0.0, noise="gaussian", data_norm=1.0, alpha=0.1)


@pytest.mark.parametrize("data_norm", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_data_norm(data, data_norm):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter):
        op.fit(Logistic(), X, y, epsilon=1.0, data_norm=data_norm, alpha=0.1)


def test_bad_alpha_and_noise(data):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter):
        op.fit(Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=-0.1)
    with pytest.raises(UnknownNameError, match="gamma"):
        op.fit(Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=0.1, noise="laplace")


def test_bad_data(data):
    X, y = data
    kw = {"epsilon": 1.0, "data_norm": 1.0, "alpha": 0.1}
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InvalidDataError):
        op.fit(Logistic(), Xn, y, **kw)
    Xi = X.copy()
    Xi[1, 1] = np.inf
    with pytest.raises(InvalidDataError):
        op.fit(Logistic(), Xi, y, **kw)
    yi = y.copy()
    yi[0] = np.inf
    with pytest.raises(InvalidDataError):
        op.fit(Logistic(), X, yi, **kw)
    with pytest.raises(InvalidDataError):
        op.fit(Logistic(), X, y[:-1], **kw)
    with pytest.raises(InvalidDataError):
        op.fit(Logistic(), np.empty((0, 4)), np.empty(0), **kw)
    with pytest.raises(LabelError):
        op.fit(Logistic(), X, (y > 0).astype(float), **kw)  # {0, 1} labels
    with pytest.raises(InvalidPrivacyParameter):
        op.fit("logistic", X, y, **kw)
