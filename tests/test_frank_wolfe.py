"""Private Frank-Wolfe (Talwar, Thakurta, Zhang 2015, Algorithm 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from dperm.accounting.events import PureEpsilon, SelfComposed
from dperm.algorithms import frank_wolfe as fw
from dperm.constraints import L1Ball, L2Ball, Polytope
from dperm.exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    UnknownNameError,
)
from dperm.losses import Hinge, Logistic, Squared
from dperm.solvers import minimize


def _data(rng, n=400, d=6):
    X = rng.uniform(-1.0, 1.0, (n, d)) / np.sqrt(d)  # ‖x‖₂ ≤ 1
    w = np.zeros(d)
    w[:2] = [3.0, -2.0]
    y = np.where(X @ w + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


# ----------------------------------------------------------------------------- utility
def test_converges_to_constrained_optimum_as_epsilon_grows(rng):
    """ε → ∞: the selection becomes the exact LMO and Frank-Wolfe's rate
    L(θ_T) − L* ≤ 2Γ/(T+2) (Jaggi 2013, Theorem 1) must hold."""
    X, y = _data(rng)
    loss, r, T = Logistic(), 2.0, 400
    ref = minimize(loss, X, y, constraint=L1Ball(r), tol=1e-10, max_iter=20000)
    res = fw.fit(loss, X, y, epsilon=1e9, delta=0.0, radius=r, n_steps=T, random_state=1)
    gap = loss.value(res.theta, X, y) - ref.objective
    gamma = fw.curvature_bound(loss, X.shape[1], data_norm=1.0, radius=r)
    assert -1e-9 <= gap <= 2 * gamma / (T + 2)
    assert gap < 5e-3


def test_real_data_large_epsilon_matches_the_constrained_optimum():
    """On real data (the built-in breast-cancer set, with an intercept column), at a
    large ε private Frank-Wolfe reaches the loss and test accuracy of the
    non-private minimizer over the same ℓ1 ball (FW rate bound 2Γ/(T+2))."""
    from dperm.datasets import load

    ds = load("breast-cancer")

    def design(X):
        return np.hstack([X / np.sqrt(2), np.full((X.shape[0], 1), 1 / np.sqrt(2))])

    Xtr, Xte = design(ds.X_train), design(ds.X_test)
    loss, r, T = Logistic(), 20.0, 600
    ref = minimize(loss, Xtr, ds.y_train, constraint=L1Ball(r), tol=1e-9, max_iter=20000)
    res = fw.fit(loss, Xtr, ds.y_train, epsilon=1e8, delta=1e-6, radius=r, n_steps=T,
                 random_state=0)  # fmt: skip
    gamma = fw.curvature_bound(loss, Xtr.shape[1], data_norm=1.0, radius=r)
    assert loss.value(res.theta, Xtr, ds.y_train) - ref.objective <= 2 * gamma / (T + 2)
    acc_ref = np.mean(np.sign(Xte @ ref.theta) == ds.y_test)
    acc = np.mean(np.sign(Xte @ res.theta) == ds.y_test)
    assert acc_ref > 0.75  # majority class: 0.63
    assert acc >= acc_ref - 0.03


# ----------------------------------------------------------------------------- feasibility
@pytest.mark.parametrize("selection", ["exponential", "laplace"])
def test_output_inside_l1_ball(rng, selection):
    X, y = _data(rng, n=100)
    for seed in range(5):
        res = fw.fit(
            Logistic(),
            X,
            y,
            epsilon=0.5,
            delta=0.0,
            radius=0.7,
            n_steps=25,
            selection=selection,
            random_state=seed,
        )
        assert np.abs(res.theta).sum() <= 0.7 * (1 + 1e-12)
        assert L1Ball(0.7).contains(res.theta)


def test_output_inside_polytope_simplex(rng):
    X, y = _data(rng, n=100, d=4)
    simplex = Polytope(np.eye(4))
    for seed in range(5):
        th = fw.fit(
            Logistic(),
            X,
            y,
            epsilon=1.0,
            delta=0.0,
            constraint=simplex,
            n_steps=30,
            random_state=seed,
        ).theta
        assert np.all(th >= -1e-15)
        assert abs(th.sum() - 1.0) < 1e-12


# ----------------------------------------------------------------------------- selection law
def test_one_step_selection_follows_exponential_mechanism(rng, exponential_mechanism_pvalue):
    """T = 1 from θ = 0 with μ = 1 returns the selected vertex itself; its law must
    be P(v) ∝ exp(−ε⟨v, ∇L(0)⟩/(2Δ)), Δ = 2 r G b / n (G = sup|φ'| = 1 for the
    logistic loss).  Chi-square goodness of fit on N draws."""
    n, d, r, eps = 12, 3, 1.0, 3.0
    X, y = _data(rng, n=n, d=d)
    loss = Logistic()
    # independent computation: φ'(0, y) = −y/2, so ∇L(0) = −(1/2n) Σ y x
    g0 = -(y[:, None] * X).sum(axis=0) / (2 * n)
    V = np.vstack([r * np.eye(d), -r * np.eye(d)])
    delta_u = 2 * r * 1.0 * 1.0 / n
    assert fw.score_sensitivity(loss, n, d, data_norm=1.0, radius=r) == pytest.approx(delta_u)

    def draw(gen):
        th = fw.fit(loss, X, y, epsilon=eps, delta=0.0, radius=r, n_steps=1, random_state=gen).theta
        j = int(np.argmax(np.abs(th)))
        return j if th[j] > 0 else j + d

    logits = -eps * (V @ g0) / (2 * delta_u)
    assert exponential_mechanism_pvalue(draw, logits, 6000, 7) > 1e-3


def test_one_step_selection_on_a_polytope(rng, exponential_mechanism_pvalue):
    n, eps = 10, 2.0
    X, y = _data(rng, n=n, d=2)
    V = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.5, -0.5]])
    poly = Polytope(V)
    loss = Logistic()
    # θ₀ = mean of the vertices; one step with μ = 1 lands on the vertex
    theta0 = V.mean(axis=0)
    g0 = loss.gradient(theta0, X, y)
    # Δ = (2/n) max_v min(‖v‖₁ b∞ G, ‖v‖₂ R₂ G), b∞ = R₂ = 1, G = 1
    delta_u = 2.0 / n * np.max(np.minimum(np.abs(V).sum(1), np.linalg.norm(V, axis=1)))
    assert fw.score_sensitivity(loss, n, 2, data_norm=1.0, constraint=poly) == pytest.approx(
        delta_u
    )

    def draw(gen):
        th = fw.fit(
            loss, X, y, epsilon=eps, delta=0.0, constraint=poly, n_steps=1, random_state=gen
        ).theta
        return int(np.argmin(np.linalg.norm(V - th, axis=1)))

    logits = -eps * (V @ g0) / (2 * delta_u)
    assert exponential_mechanism_pvalue(draw, logits, 4000, 3) > 1e-3


def test_score_sensitivity_bounds_every_neighbouring_pair(rng):
    """Brute force: |⟨v, ∇L_D(θ) − ∇L_D'(θ)⟩| ≤ Δ for random θ ∈ C and random
    neighbouring datasets with worst-case records (‖x‖₂ = 1, opposite labels)."""
    n, d, r = 50, 5, 3.0
    loss = Logistic()
    delta_u = fw.score_sensitivity(loss, n, d, data_norm=1.0, radius=r)
    worst = 0.0
    for _ in range(300):
        X, y = _data(rng, n=n, d=d)
        X2, y2 = X.copy(), y.copy()
        x = rng.standard_normal(d)
        X2[0] = x / np.linalg.norm(x)
        y2[0] = -y[0]
        theta = L1Ball(r).project(rng.standard_normal(d) * 3)
        diff = loss.gradient(theta, X, y) - loss.gradient(theta, X2, y2)
        worst = max(worst, r * np.max(np.abs(diff)))
    assert worst <= delta_u * (1 + 1e-12)
    assert worst > 0.3 * delta_u  # the bound is not vacuous


# ----------------------------------------------------------------------------- privacy bookkeeping
def test_event_and_pure_composition(rng):
    X, y = _data(rng, n=200)
    res = fw.fit(Logistic(), X, y, epsilon=1.0, delta=0.0, n_steps=40, random_state=0)
    assert res.event == SelfComposed(PureEpsilon(1.0 / 40), 40)
    assert res.diagnostics["neighbouring"] == "replace-one"
    assert res.diagnostics["n_steps"] == 40


@pytest.mark.parametrize("accountant", ["optimal", "rdp"])
def test_step_epsilon_is_certified_by_the_accountant(accountant):
    from dperm.accounting import get_accountant

    eps, delta, T = 1.0, 1e-6, 200
    eps0 = fw.step_epsilon(eps, delta, T, accountant=accountant)
    spent = get_accountant(accountant).compose(PureEpsilon(eps0), T).get_epsilon(delta)
    assert spent <= eps * (1 + 1e-9)
    # tighter than the advanced composition the paper uses (Dwork & Roth Thm 3.20)
    assert eps0 >= eps / math.sqrt(8 * T * math.log(1 / delta))
    assert eps0 >= eps / T


def test_fit_with_delta_reports_a_certified_event(rng):
    from dperm.accounting import get_accountant

    X, y = _data(rng, n=300)
    res = fw.fit(Logistic(), X, y, epsilon=0.5, delta=1e-5, random_state=0)
    T = res.diagnostics["n_steps"]
    assert res.event == SelfComposed(PureEpsilon(res.diagnostics["epsilon_step"]), T)
    acc = get_accountant("optimal").compose(res.event)
    assert acc.get_epsilon(1e-5) <= 0.5 * (1 + 1e-9)


def test_default_step_count_follows_the_paper_rule():
    loss = Logistic()
    n, d, r, eps, delta = 5000, 10, 1.0, 0.5, 1e-6
    gamma = fw.curvature_bound(loss, d, data_norm=1.0, radius=r)
    # logistic: c = 1/4, Γ ≤ c·(2r·b)² = r²
    assert gamma == pytest.approx(r**2)
    lsize = n * fw.score_sensitivity(loss, n, d, data_norm=1.0, radius=r) / 2
    assert lsize == pytest.approx(r)
    kw = {"curvature": gamma, "lipschitz_size": lsize, "n_vertices": 2 * d}
    T = fw.default_n_steps(n, eps, delta=delta, max_steps=10**6, **kw)
    expect = (gamma * n * eps / (lsize * math.log(2 * d) * math.sqrt(math.log(1 / delta)))) ** (
        2 / 3
    )
    assert T == math.ceil(expect)
    T0 = fw.default_n_steps(n, eps, delta=0.0, max_steps=10**6, **kw)
    assert T0 == math.ceil(math.sqrt(gamma * n * eps / (lsize * math.log(2 * d))))
    assert fw.default_n_steps(n, eps, delta=delta, max_steps=7, **kw) == 7
    # the paper's scaling: T ∝ (nε)^{2/3}
    T8 = fw.default_n_steps(8 * n, eps, delta=delta, max_steps=10**6, **kw)
    assert T8 / T == pytest.approx(4.0, rel=0.02)


def test_squared_loss_sensitivity_uses_the_margin_bound():
    # |z| ≤ r·b on the ℓ1 ball, so G = r·b + B and Δ = 2 r b G / n
    loss = Squared(label_bound=2.0)
    n, r = 100, 3.0
    assert fw.score_sensitivity(loss, n, 4, data_norm=0.5, radius=r) == pytest.approx(
        2 * r * 0.5 * (r * 0.5 + 2.0) / n
    )


def test_linf_mode_clips_entries_and_scales_sensitivity(rng):
    X, y = _data(rng, n=200, d=5)
    X[:3] *= 4.0
    with pytest.warns(ClippingWarning):
        res = fw.fit(
            Logistic(),
            X,
            y,
            epsilon=1.0,
            delta=0.0,
            data_norm=0.5,
            data_norm_ord="linf",
            n_steps=10,
            random_state=0,
        )
    assert res.diagnostics["sensitivity"] == pytest.approx(2 * 1.0 * 0.5 / 200)
    assert res.diagnostics["n_clipped"] >= 3


# ----------------------------------------------------------------------------- data handling
def test_sparse_equals_dense(rng):
    X, y = _data(rng, n=150)
    X[np.abs(X) < 0.3] = 0.0
    a = fw.fit(Logistic(), X, y, epsilon=1.0, delta=0.0, n_steps=30, random_state=5)
    b = fw.fit(Logistic(), sp.csr_matrix(X), y, epsilon=1.0, delta=0.0, n_steps=30, random_state=5)
    np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=1e-12)


def test_rows_above_data_norm_are_clipped_and_counted(rng):
    X, y = _data(rng, n=100)
    X_big = X.copy()
    X_big[:4] *= 5.0
    norms = np.linalg.norm(X_big, axis=1)
    X_clip = X_big / np.maximum(1.0, norms)[:, None] * (1 - 1e-12)
    with pytest.warns(ClippingWarning):
        a = fw.fit(Logistic(), X_big, y, epsilon=1.0, delta=0.0, n_steps=20, random_state=2)
    b = fw.fit(Logistic(), X_clip, y, epsilon=1.0, delta=0.0, n_steps=20, random_state=2)
    assert a.diagnostics["n_clipped"] == int((norms > 1.0).sum())
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-9)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"epsilon": -1.0}, InvalidPrivacyParameter),
        ({"epsilon": float("nan")}, InvalidPrivacyParameter),
        ({"epsilon": "1"}, InvalidPrivacyParameter),
        ({"delta": 1.0}, InvalidPrivacyParameter),
        ({"data_norm": 0.0}, InvalidPrivacyParameter),
        ({"radius": -2.0}, InvalidPrivacyParameter),
        ({"n_steps": 0}, InvalidPrivacyParameter),
        ({"n_steps": 2.5}, InvalidPrivacyParameter),
        ({"selection": "gumbel"}, UnknownNameError),
        ({"data_norm_ord": "l3"}, UnknownNameError),
        ({"constraint": L2Ball(1.0)}, InvalidPrivacyParameter),
        ({"constraint": Polytope(np.eye(3))}, InvalidPrivacyParameter),
        ({"accountant": "nope", "delta": 1e-5}, UnknownNameError),
    ],
)
def test_bad_parameters(rng, kwargs, exc):
    X, y = _data(rng, n=30)
    params = {"epsilon": 1.0, "delta": 0.0, "n_steps": 5, "random_state": 0} | kwargs
    with pytest.raises(exc):
        fw.fit(Logistic(), X, y, **params)


def test_bad_data(rng):
    X, y = _data(rng, n=30)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InvalidDataError):
        fw.fit(Logistic(), Xn, y, epsilon=1.0, delta=0.0, n_steps=3)
    with pytest.raises(LabelError):
        fw.fit(Logistic(), X, (y > 0).astype(float), epsilon=1.0, delta=0.0, n_steps=3)
    with pytest.raises(InvalidDataError):
        fw.fit(Logistic(), X, y[:-1], epsilon=1.0, delta=0.0, n_steps=3)


def test_nonsmooth_loss_needs_explicit_steps(rng):
    X, y = _data(rng, n=30)
    with pytest.raises(InvalidPrivacyParameter, match="n_steps"):
        fw.fit(Hinge(), X, y, epsilon=1.0, delta=0.0)
    res = fw.fit(Hinge(), X, y, epsilon=1.0, delta=0.0, n_steps=5, random_state=0)
    assert np.abs(res.theta).sum() <= 1.0 + 1e-12
