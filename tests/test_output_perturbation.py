"""Output perturbation: the sensitivity bound on real neighbours, the noise law,
clipping, ε → ∞, regularizers/constraints, events and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dperm.accounting.events import Gaussian, PureEpsilon
from dperm.accounting.gaussian import analytic_gaussian_noise_multiplier, gaussian_delta
from dperm.algorithms import output_perturbation as outp
from dperm.constraints import L2Ball
from dperm.exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
)
from dperm.losses import Hinge, HuberSVM, Logistic, Squared
from dperm.regularizers import L1, ElasticNet
from dperm.solvers import minimize

P_MIN = 1e-3


@pytest.fixture(scope="module")
def data(unit_ball_data):
    return unit_ball_data(seed=1, n=300, w=[1.5, -1.0, 0.5], noise=0.3)


def test_sensitivity_formula_by_hand():
    # 2L/(nΛ): L = 1, n = 100, Λ = 0.1 ⇒ 0.2
    assert outp.output_sensitivity(100, 1.0, 0.1) == pytest.approx(0.2)
    assert outp.output_sensitivity(50, 3.0, 0.5) == pytest.approx(2 * 3.0 / 25.0)
    with pytest.raises(InvalidPrivacyParameter):
        outp.output_sensitivity(100, 1.0, 0.0)


@pytest.mark.parametrize(
    ("loss", "reg", "alpha"),
    [
        (Logistic(), None, 0.05),
        (HuberSVM(0.5), None, 0.02),
        (Logistic(), ElasticNet(0.1, 0.5), 0.0),
    ],
)
def test_minimizers_of_neighbours_are_within_the_sensitivity(
    data, neighbour_shift, loss, reg, alpha
):
    # replace one row by an adversarial one (opposite direction, flipped label, norm 1)
    X, y = data
    n = X.shape[0]
    lam = alpha + (reg.strong_convexity if reg is not None else 0.0)
    bound = outp.output_sensitivity(n, loss.lipschitz(1.0), lam)
    worst = neighbour_shift(loss, X, y, l2=alpha, regularizer=reg, tol=1e-12, every=30)
    assert 0 < worst <= bound * (1 + 1e-6)


def _noise(res, loss, X, y, alpha, reg=None):
    exact = minimize(loss, X, y, l2=alpha, regularizer=reg, tol=1e-12).theta
    return res.theta - exact


def test_gamma_noise_norm_law(data):
    X, y = data
    X, y = X[:100], y[:100]
    loss, alpha, eps = Logistic(), 0.05, 0.8
    norms = [
        np.linalg.norm(
            _noise(
                outp.fit(loss, X, y, epsilon=eps, data_norm=1.0, alpha=alpha, random_state=s),
                loss,
                X,
                y,
                alpha,
            )
        )
        for s in range(200)
    ]
    scale = outp.output_sensitivity(100, 1.0, alpha) / eps  # = 2/(nΛε), Chaudhuri Alg. 1
    assert stats.kstest(norms, stats.gamma(a=X.shape[1], scale=scale).cdf).pvalue > P_MIN


def test_gaussian_noise_is_the_analytic_gaussian_mechanism(data):
    X, y = data
    X, y = X[:100], y[:100]
    loss, alpha, eps, delta = Logistic(), 0.05, 0.8, 1e-5
    res = outp.fit(loss, X, y, epsilon=eps, delta=delta, data_norm=1.0, alpha=alpha, random_state=0)
    mult = analytic_gaussian_noise_multiplier(eps, delta)
    assert res.event == Gaussian(mult)
    assert gaussian_delta(mult, eps) == pytest.approx(delta, rel=1e-3)  # tight calibration
    sens = outp.output_sensitivity(100, 1.0, alpha)
    assert res.diagnostics["noise_scale"] == pytest.approx(mult * sens)
    z = np.concatenate(
        [
            _noise(
                outp.fit(
                    loss, X, y, epsilon=eps, delta=delta, data_norm=1.0, alpha=alpha, random_state=s
                ),
                loss,
                X,
                y,
                alpha,
            )
            for s in range(100)
        ]
    ) / (mult * sens)
    assert stats.kstest(z, stats.norm.cdf).pvalue > P_MIN


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_huge_row_gives_the_model_of_the_clipped_row(data, delta):
    X, y = data
    big, clipped = X.copy(), X.copy()
    big[7] *= 1e6
    clipped[7] = X[7] / np.linalg.norm(X[7])
    kw = {"epsilon": 1.0, "delta": delta, "data_norm": 1.0, "alpha": 0.05, "random_state": 2}
    with pytest.warns(ClippingWarning):
        a = outp.fit(Logistic(), big, y, **kw)
    b = outp.fit(Logistic(), clipped, y, **kw)
    assert a.diagnostics["n_clipped"] == 1
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_large_epsilon_recovers_the_nonprivate_optimum(data, delta):
    X, y = data
    ref = minimize(Logistic(), X, y, l2=0.05, tol=1e-12).theta
    res = outp.fit(
        Logistic(), X, y, epsilon=1e6, delta=delta, data_norm=1.0, alpha=0.05, random_state=0
    )
    # noise norm ≈ √d·(2/(nΛ))·(1/ε)·O(√log(1/δ)) ≈ 1e-6
    assert np.linalg.norm(res.theta - ref) < 1e-4


def test_constraint_output_is_projected_and_events(data):
    X, y = data
    c = L2Ball(0.3)
    for delta, ev_type in ((0.0, PureEpsilon), (1e-6, Gaussian)):
        res = outp.fit(
            Logistic(), X, y, epsilon=0.3, delta=delta, data_norm=1.0, alpha=0.05,
            constraint=c, random_state=1,
        )  # fmt: skip
        assert c.contains(res.theta, tol=1e-12)
        assert isinstance(res.event, ev_type)
        assert res.diagnostics["neighbouring"] == "replace-one"
    n = X.shape[0]
    d = outp.fit(Logistic(), X, y, epsilon=1.0, delta=None, data_norm=1.0, alpha=0.05)
    assert d.diagnostics["delta"] == min(1.0 / n**2, 1e-5) and d.diagnostics["delta_default"]


def test_squared_loss_with_radius(data):
    X, _ = data
    yr = np.clip(X @ np.array([0.4, 0.3, -0.2]), -1, 1)
    res = outp.fit(
        Squared(1.0), X, yr, epsilon=1.0, delta=1e-6, data_norm=1.0, alpha=0.1,
        constraint=L2Ball(1.0), random_state=0,
    )  # fmt: skip
    assert res.diagnostics["lipschitz"] == pytest.approx(2.0)  # 1·(1·1 + 1)
    assert np.linalg.norm(res.theta) <= 1.0 + 1e-12


def test_needs_strong_convexity(data):
    X, y = data
    with pytest.raises(InvalidPrivacyParameter, match="strongly convex"):
        outp.fit(Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=0.0)
    with pytest.raises(InvalidPrivacyParameter, match="strongly convex"):
        outp.fit(Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=0.0, regularizer=L1(0.1))
    # elastic net's ℓ2 part supplies it: sensitivity 2L/(n·α(1 − l1_ratio))
    res = outp.fit(
        Logistic(), X, y, epsilon=1.0, data_norm=1.0, alpha=0.0,
        regularizer=ElasticNet(0.2, 0.5), random_state=0,
    )  # fmt: skip
    assert res.diagnostics["sensitivity"] == pytest.approx(2.0 / (X.shape[0] * 0.1))


@pytest.mark.parametrize(
    ("kw", "exc"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameter),
        ({"epsilon": float("nan")}, InvalidPrivacyParameter),
        ({"epsilon": float("inf")}, InvalidPrivacyParameter),
        ({"epsilon": "1"}, InvalidPrivacyParameter),
        ({"delta": 1.0}, InvalidPrivacyParameter),
        ({"delta": -1e-3}, InvalidPrivacyParameter),
        ({"delta": 0.0, "noise": "gaussian"}, InvalidPrivacyParameter),
        ({"data_norm": 0.0}, InvalidPrivacyParameter),
        ({"alpha": -1.0}, InvalidPrivacyParameter),
    ],
)
def test_bad_parameters(data, kw, exc):
    X, y = data
    args = {"epsilon": 1.0, "data_norm": 1.0, "alpha": 0.1} | kw
    with pytest.raises(exc):
        outp.fit(Logistic(), X, y, **args)


def test_bad_data_and_losses(data):
    X, y = data
    kw = {"epsilon": 1.0, "data_norm": 1.0, "alpha": 0.1}
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InvalidDataError):
        outp.fit(Logistic(), Xn, y, **kw)
    with pytest.raises(InvalidDataError):
        outp.fit(Logistic(), X[:-1], y, **kw)
    with pytest.raises(LabelError):
        outp.fit(Logistic(), X, np.where(y > 0, 2.0, 0.0), **kw)
    with pytest.raises(InvalidPrivacyParameter, match="smooth"):
        outp.fit(Hinge(), X, y, **kw)
