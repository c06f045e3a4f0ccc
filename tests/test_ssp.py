"""Tests of dperm.algorithms.ssp (SSP and AdaSSP, Wang 2018)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from dperm import DPLinearRegression
from dperm.accounting import epsilon_spent, gaussian_epsilon
from dperm.accounting.events import Composed, Gaussian
from dperm.accounting.rdp import effective_noise_multiplier
from dperm.algorithms import ssp
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter


def _data(n=400, d=4, seed=0, scale=0.4):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=scale / math.sqrt(d), size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1) / 0.99)[:, None]  # ‖x‖ < 1
    w = rng.normal(size=d)
    y = np.clip(X @ w + 0.1 * rng.normal(size=n), -1, 1)
    return X, y


# ----------------------------------------------------------------------------- calibration
@pytest.mark.parametrize("adaptive", [True, False])
def test_noise_scales_match_replace_one_sensitivities(adaptive):
    R, B, eps, delta = 1.5, 2.0, 1.0, 1e-6
    sc = ssp.noise_scales(eps, delta, R, B, adaptive=adaptive)
    parts = 3 if adaptive else 2
    # equal split of μ² = 1/σ²: every part has σⱼ = σ√parts
    assert sc["multipliers"] == pytest.approx([sc["sigma"] * math.sqrt(parts)] * parts)
    expected = [math.sqrt(2) * R * R, 2 * R * B]
    if adaptive:
        expected = [R * R, *expected]
    assert sc["sensitivities"] == pytest.approx(expected)
    # the composed multiplier meets (ε, δ) exactly (analytic Gaussian)
    event = Composed(tuple(Gaussian(m) for m in sc["multipliers"]))
    sigma_eff = effective_noise_multiplier(event)
    assert sigma_eff == pytest.approx(sc["sigma"], rel=1e-12)
    assert gaussian_epsilon(sigma_eff, delta) <= eps * (1 + 1e-9)


def test_sensitivity_bounds_are_attained_and_never_exceeded():
    """‖xxᵀ − x′x′ᵀ‖_F ≤ √2R² and ‖xy − x′y′‖ ≤ 2RB over random pairs, with
    equality at the stated extremal pairs (so the constants are tight)."""
    rng = np.random.default_rng(1)
    R, B = 1.0, 1.0
    x = rng.normal(size=(2000, 5))
    x /= np.linalg.norm(x, axis=1)[:, None] / rng.uniform(0, R, size=(2000, 1))
    xp = np.roll(x, 1, axis=0)
    fro = np.sqrt(
        np.sum(x**2, 1) ** 2 + np.sum(xp**2, 1) ** 2 - 2 * np.einsum("ij,ij->i", x, xp) ** 2
    )
    assert fro.max() <= math.sqrt(2) * R * R + 1e-12
    e1, e2 = np.eye(5)[0], np.eye(5)[1]
    assert np.linalg.norm(np.outer(e1, e1) - np.outer(e2, e2)) == pytest.approx(math.sqrt(2))
    assert np.linalg.norm(e1 * B - (-e1) * B) == pytest.approx(2 * R * B)


@pytest.mark.parametrize("adaptive", [True, False])
def test_event_epsilon_within_claim(adaptive):
    X, y = _data()
    delta = 1.0 / X.shape[0] ** 2
    for eps in (0.1, 1.0, 10.0):
        res = ssp.fit(
            X, y, epsilon=eps, delta=delta, data_norm=1.0, label_bound=1.0,
            adaptive=adaptive, random_state=0,
        )  # fmt: skip
        assert isinstance(res.event, Composed)
        assert len(res.event.events) == (3 if adaptive else 2)
        assert res.event.neighbouring == "replace-one"
        # exact (Gaussian composition) and the PLD accountant (discretization 1e-4)
        exact = gaussian_epsilon(effective_noise_multiplier(res.event), delta)
        assert exact <= eps * (1 + 1e-9)
        assert epsilon_spent(res.event, delta, "pld") <= eps * (1 + 1e-6)


def test_released_noise_matches_calibrated_scale_ks():
    """Fixed data, many seeds: the noise on XᵀX (diagonal N(0, s²), off-diagonal
    N(0, s²/2), symmetric), on Xᵀy (N(0, s₃²)) and on λ_min (N(0, s₁²)) has the
    calibrated scale (Kolmogorov–Smirnov against the standard normal)."""
    X, y = _data(n=300, d=3)
    eps, delta = 0.5, 1e-5
    A, b = X.T @ X, X.T @ y
    lmin = np.linalg.eigvalsh(A)[0]
    s1, s2, s3 = ssp.noise_scales(eps, delta, 1.0, 1.0, adaptive=True)["stds"]
    diag, off, vec, lam = [], [], [], []
    for seed in range(400):
        dg = ssp.fit(
            X, y, epsilon=eps, delta=delta, data_norm=1.0, label_bound=1.0, random_state=seed
        ).diagnostics
        E = dg["xtx_released"] - A
        assert np.array_equal(E, E.T)
        diag.extend(np.diag(E) / s2)
        off.extend(E[np.triu_indices(3, 1)] * math.sqrt(2) / s2)
        vec.extend((dg["xty_released"] - b) / s3)
        lam.append((dg["lambda_min_released"] - lmin) / s1)
        assert dg["noise_std"] == pytest.approx([s1, s2, s3])
    for z in (diag, off, vec, lam):
        z = np.asarray(z)
        assert stats.kstest(z, "norm").pvalue > 1e-3
        # the scale itself: sample std within 5 standard errors of 1
        assert abs(z.std() - 1.0) < 5.0 / math.sqrt(2 * z.size)


# ----------------------------------------------------------------------------- closed forms
def test_adassp_at_huge_epsilon_is_ols():
    X, y = _data(n=500, d=4)
    res = ssp.fit(X, y, epsilon=1e9, delta=1e-6, data_norm=1.0, label_bound=1.0, random_state=0)
    ols = np.linalg.solve(X.T @ X, X.T @ y)
    assert res.diagnostics["lambda"] == 0.0
    np.testing.assert_allclose(res.theta, ols, rtol=1e-5, atol=1e-7)


def test_adassp_with_public_ridge_is_ridge_closed_form():
    X, y = _data(n=500, d=4)
    r = 7.0
    res = ssp.fit(
        X, y, epsilon=1e9, delta=1e-6, data_norm=1.0, label_bound=1.0, ridge=r, random_state=0
    )
    ridge = np.linalg.solve(X.T @ X + r * np.eye(4), X.T @ y)
    np.testing.assert_allclose(res.theta, ridge, rtol=1e-5, atol=1e-7)


def test_intercept_is_unpenalized_like_sklearn():
    """With an intercept column and a public ridge, θ is scikit-learn's Ridge (which
    does not penalize the intercept): the ridge acts on the centered moments."""
    from sklearn.linear_model import Ridge

    X, y = _data(n=500, d=3)
    y = y + 0.5
    s, r = 0.5, 3.0
    Xa = np.hstack([X, np.full((500, 1), s)])
    res = ssp.fit(
        Xa, y, epsilon=1e13, delta=1e-6, data_norm=math.sqrt(1 + s * s), label_bound=2.0,
        ridge=r, intercept_scaling=s, random_state=0,
    )  # fmt: skip
    ref = Ridge(alpha=r).fit(X, y)
    np.testing.assert_allclose(res.theta[:-1], ref.coef_, rtol=1e-5, atol=1e-7)
    assert res.theta[-1] * s == pytest.approx(ref.intercept_, rel=1e-5)


def test_adaptive_ridge_follows_the_paper_rule():
    X, y = _data(n=200, d=4)
    res = ssp.fit(X, y, epsilon=0.5, delta=1e-5, data_norm=1.0, label_bound=1.0, random_state=3)
    dg = res.diagnostics
    s1 = dg["noise_std"][0]
    lt = max(0.0, dg["lambda_min_released"] - s1 * math.sqrt(math.log(6 / 1e-5)))
    assert dg["lambda"] == pytest.approx(max(0.0, dg["eta"] - lt))
    # θ is the PSD-safe solve of the released statistics (independent recomputation)
    M = dg["xtx_released"] + dg["lambda"] * np.eye(4)
    ev, V = np.linalg.eigh(0.5 * (M + M.T))
    theta = V @ ((V.T @ dg["xty_released"]) / np.maximum(ev, dg["eigen_floor"]))
    np.testing.assert_allclose(res.theta, theta, rtol=1e-10)


def test_psd_safe_solve_on_an_indefinite_noisy_matrix():
    """Rank-one design at small ε: the noisy XᵀX of SSP is indefinite; the solve
    raises the bad eigenvalues to the floor, so θ is finite and bounded by
    ‖Xᵀy_released‖ / floor (the plain solve would not be)."""
    rng = np.random.default_rng(0)
    u = np.ones(6) / math.sqrt(6)
    X = np.outer(rng.uniform(-0.9, 0.9, size=300), u)
    y = np.clip(X @ np.ones(6), -1, 1)
    res = ssp.fit(
        X, y, epsilon=0.1, delta=1e-6, data_norm=1.0, label_bound=1.0, adaptive=False,
        random_state=0,
    )  # fmt: skip
    dg = res.diagnostics
    assert np.linalg.eigvalsh(dg["xtx_released"])[0] < 0  # indefinite release
    assert dg["n_eigen_clipped"] >= 1
    assert np.all(np.isfinite(res.theta))
    bound = np.linalg.norm(dg["xty_released"]) / dg["eigen_floor"]
    assert np.linalg.norm(res.theta) <= bound * (1 + 1e-12)


# ----------------------------------------------------------------------------- data handling
def test_clipping_is_counted_and_equals_fit_on_clipped_data():
    X, y = _data(n=200, d=3)
    X2, y2 = X.copy(), y.copy()
    X2[:5] *= 10.0  # 5 rows above the bound
    y2[:3] = 5.0  # 3 labels above the bound
    kw = dict(epsilon=1.0, delta=1e-6, data_norm=1.0, label_bound=1.0, random_state=4)
    res = ssp.fit(X2, y2, **kw)
    assert res.diagnostics["n_clipped"] == 5
    assert res.diagnostics["n_labels_clipped"] == 3
    norms = np.linalg.norm(X2, axis=1)
    Xc = X2 / np.maximum(1.0, norms)[:, None]
    ref = ssp.fit(Xc, np.clip(y2, -1, 1), **kw)
    np.testing.assert_allclose(res.theta, ref.theta, rtol=1e-10)
    np.testing.assert_array_equal(X2[:5], X[:5] * 10.0)  # input untouched


def test_sparse_equals_dense():
    X, y = _data(n=200, d=5)
    X[np.abs(X) < 0.05] = 0.0
    kw = dict(epsilon=1.0, delta=1e-6, data_norm=0.5, label_bound=1.0, random_state=2)
    a = ssp.fit(X, y, **kw)
    b = ssp.fit(sp.csr_matrix(X), y, **kw)
    assert a.diagnostics["n_clipped"] == b.diagnostics["n_clipped"] > 0
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-9, atol=1e-12)


def test_sufficient_statistics_chunked_equals_direct():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 3))
    y = rng.normal(size=20_000)
    c = rng.uniform(0.2, 1.0, size=20_000)
    A, b = ssp.sufficient_statistics(X, y, c)
    np.testing.assert_allclose(A, (X * c[:, None]).T @ (X * c[:, None]), rtol=1e-10)
    np.testing.assert_allclose(b, (X * c[:, None]).T @ y, rtol=1e-10)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kw", "exc", "name"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameter, "epsilon"),
        ({"epsilon": -1.0}, InvalidPrivacyParameter, "epsilon"),
        ({"epsilon": float("nan")}, InvalidPrivacyParameter, "epsilon"),
        ({"delta": 0.0}, InvalidPrivacyParameter, "delta"),
        ({"data_norm": None}, InvalidPrivacyParameter, "data_norm"),
        ({"data_norm": 0.0}, InvalidPrivacyParameter, "data_norm"),
        ({"label_bound": None}, InvalidPrivacyParameter, "label_bound"),
        ({"label_bound": float("inf")}, InvalidPrivacyParameter, "label_bound"),
        ({"ridge": -1.0}, InvalidPrivacyParameter, "ridge"),
        ({"rho": 1.0}, InvalidPrivacyParameter, "rho"),
        ({"split": (0.5, 0.5)}, InvalidPrivacyParameter, "split"),
        ({"intercept_scaling": 0.3}, InvalidDataError, "intercept_scaling"),
    ],
)
def test_bad_parameters_name_the_parameter(kw, exc, name):
    X, y = _data(n=50, d=3)
    args = dict(epsilon=1.0, delta=1e-6, data_norm=1.0, label_bound=1.0, random_state=0)
    args.update(kw)
    with pytest.raises(exc, match=name):
        ssp.fit(X, y, **args)


def test_missing_bounds_and_nan_data():
    X, y = _data(n=50, d=3)
    with pytest.raises(TypeError, match="data_norm"):
        ssp.fit(X, y, epsilon=1.0, delta=1e-6, label_bound=1.0)  # no public row bound
    with pytest.raises(TypeError, match="label_bound"):
        ssp.fit(X, y, epsilon=1.0, delta=1e-6, data_norm=1.0)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InvalidDataError, match="NaN"):
        ssp.fit(Xn, y, epsilon=1.0, delta=1e-6, data_norm=1.0, label_bound=1.0)
    yn = y.copy()
    yn[1] = np.inf
    with pytest.raises(InvalidDataError, match="y"):
        ssp.fit(X, yn, epsilon=1.0, delta=1e-6, data_norm=1.0, label_bound=1.0)


# ----------------------------------------------------------------------------- estimator
def test_dplinearregression_adassp_fits_with_the_default_constants():
    X, y = _data(n=300, d=3)
    m = DPLinearRegression(mechanism="adassp", random_state=0).fit(X, y)
    assert m.diagnostics_["mechanism"] == "adassp"
    assert m.delta_ == pytest.approx(min(1.0 / 300**2, 1e-5))  # the default δ rule
    assert m.neighbouring_ == "replace-one"
    assert epsilon_spent(m.dp_event_, m.delta_, "pld") <= 1.0 * (1 + 1e-6)
    big = DPLinearRegression(mechanism="adassp", epsilon=1e9, label_bound=1.0, random_state=0).fit(
        X, y
    )
    from sklearn.linear_model import LinearRegression

    ref = LinearRegression().fit(X, y)
    np.testing.assert_allclose(big.coef_, ref.coef_, rtol=1e-4, atol=1e-6)
    assert big.intercept_ == pytest.approx(ref.intercept_, abs=1e-6)


def test_objective_mechanism_gets_the_public_default_radius():
    from dperm.estimators.linear import default_constraint_radius

    X, y = _data(n=200, d=3)
    m = DPLinearRegression(mechanism="objective", label_bound=1.0, random_state=0).fit(X, y)
    r = default_constraint_radius(1.0, math.sqrt(1 + 0.25), 4)
    assert m.constraint_.radius == pytest.approx(r)
    with pytest.raises(InvalidPrivacyParameter, match="constraint_radius"):
        DPLinearRegression(mechanism="objective", constraint="l2").fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="label_bound"):
        DPLinearRegression(mechanism="objective", label_bound=-1.0).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="constraint_radius"):
        DPLinearRegression(mechanism="objective", constraint="none").fit(X, y)


def test_adassp_rejects_l1_penalty_and_constraints():
    X, y = _data(n=100, d=3)
    with pytest.raises(InvalidPrivacyParameter, match="penalty"):
        DPLinearRegression(mechanism="adassp", penalty="l1", random_state=0).fit(X, y)


def test_adassp_projects_onto_a_given_constraint():
    X, y = _data(n=300, d=3)
    m = DPLinearRegression(epsilon=1e9, constraint_radius=0.1, random_state=0).fit(X, y)
    theta = np.r_[m.coef_, m.intercept_ / m.intercept_scaling]
    assert np.linalg.norm(theta) <= 0.1 * (1 + 1e-12)
    free = DPLinearRegression(epsilon=1e9, random_state=0).fit(X, y)
    assert np.linalg.norm(np.r_[free.coef_, free.intercept_ / 0.5]) > 0.1
