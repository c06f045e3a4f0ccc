"""Bolt-on output perturbation of permutation SGD (Wu et al., SIGMOD 2017)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from dperm.accounting.events import Gaussian, PureEpsilon
from dperm.accounting.gaussian import analytic_gaussian_noise_multiplier, gaussian_delta
from dperm.algorithms import bolt_on
from dperm.constraints import L2Ball, Polytope
from dperm.exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    UnknownNameError,
)
from dperm.losses import Hinge, HuberSVM, Logistic
from dperm.solvers import minimize

pytestmark = pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")


def _data(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= 0.95 / np.max(np.linalg.norm(X, axis=1))
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


# ----------------------------------------------------------------------------- formulas
def test_sensitivity_formulas_by_hand():
    assert bolt_on.convex_sensitivity(1.0, 0.5, 3, 10) == pytest.approx(2 * 3 * 1.0 * 0.5 / 10)
    assert bolt_on.convex_sensitivity(2.0, 1.0, 1, 1) == pytest.approx(4.0)
    assert bolt_on.strongly_convex_sensitivity(1.0, 0.01, 1000) == pytest.approx(0.2)
    assert bolt_on.default_batch_size(1000, 1.0) == 50  # ⌈50/ε⌉
    assert bolt_on.default_batch_size(1000, 0.1) == 63  # capped at ⌈n/16⌉
    assert bolt_on.default_batch_size(10, 1.0) == 1
    assert bolt_on.default_learning_rate(0.25) == pytest.approx(4.0)
    assert bolt_on.default_learning_rate(0.25, 0.75) == pytest.approx(1.0)


def test_diagnostics_and_events():
    X, y = _data()
    n = X.shape[0]
    r = bolt_on.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, random_state=0)
    dg = r.diagnostics
    assert dg["variant"] == "convex" and dg["neighbouring"] == "replace-one"
    assert dg["batch_size"] == min(50, math.ceil(n / 16)) and dg["passes"] == 1
    assert dg["learning_rate"] == pytest.approx(4.0)  # 1/β, β = 1/4 for the logistic loss
    assert dg["sensitivity"] == pytest.approx(2 * 1 * 1.0 * 4.0 / dg["batch_size"])
    z = analytic_gaussian_noise_multiplier(1.0, 1e-5)
    assert r.event == Gaussian(noise_multiplier=z)
    assert gaussian_delta(z, 1.0) <= 1e-5 * (1 + 1e-9)
    assert dg["noise_scale"] == pytest.approx(z * dg["sensitivity"])
    r = bolt_on.fit(Logistic(), X, y, epsilon=0.5, data_norm=1.0, alpha=0.1, random_state=0)
    assert r.event == PureEpsilon(epsilon=0.5)
    assert r.diagnostics["variant"] == "strongly_convex"
    assert r.diagnostics["sensitivity"] == pytest.approx(2 * 1.0 / (0.1 * n))
    assert r.diagnostics["learning_rate"] == pytest.approx(1 / (0.25 + 0.1))


# ----------------------------------------------------------------------------- sensitivity
def _neighbours(X, y, rng):
    i = int(rng.integers(X.shape[0]))
    X2, y2 = X.copy(), y.copy()
    v = rng.normal(size=X.shape[1])
    X2[i] = v / np.linalg.norm(v) * rng.uniform(0.5, 1.0)
    y2[i] = rng.choice([-1.0, 1.0])
    return X2, y2


@pytest.mark.parametrize("loss", [Logistic(), HuberSVM(h=0.5), HuberSVM(h=0.2)])
def test_convex_sensitivity_holds_on_random_neighbours(loss):
    """Noise-free permutation SGD on neighbouring data with the same permutation
    seed: ‖θ − θ'‖ ≤ 2kLη/b for every pair (replace-one)."""
    rng = np.random.default_rng(1)
    X, y = _data(n=60, d=4, seed=2)
    beta = loss.smoothness(1.0)
    worst = 0.0
    for trial in range(60):
        k = int(rng.integers(1, 4))
        b = int(rng.integers(1, 8))
        eta = float(rng.uniform(0.1, 1.0)) * 2.0 / beta  # η ≤ 2/β
        X2, y2 = _neighbours(X, y, rng)
        kw = dict(passes=k, batch_size=b, step_size=eta, random_state=trial)
        t1 = bolt_on.permutation_sgd(loss, X, y, **kw)
        t2 = bolt_on.permutation_sgd(loss, X2, y2, **kw)
        sens = bolt_on.convex_sensitivity(loss.lipschitz(1.0), eta, k, b)
        ratio = np.linalg.norm(t1 - t2) / sens
        assert ratio <= 1 + 1e-9
        worst = max(worst, ratio)
    assert worst > 0.2  # the bound is not vacuous on random pairs


def _canary_pair(n=40, d=4, seed=0):
    """Base rows in the first d−1 coordinates; the differing record is ±e_d, so
    its coordinate evolves on its own and the SGD difference is exactly the
    accumulated 2ηL/b kicks (Huber hinge with margins < 1 − h: |φ'| = L = 1)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    X[:, : d - 1] = rng.normal(size=(n, d - 1))
    X[:, : d - 1] *= 0.9 / np.max(np.linalg.norm(X[:, : d - 1], axis=1))
    y = rng.choice([-1.0, 1.0], size=n)
    X[0] = 0.0
    X[0, d - 1] = 1.0
    y[0] = 1.0
    X2 = X.copy()
    X2[0, d - 1] = -1.0
    return X, y, X2, y.copy()


def test_convex_sensitivity_is_attained_by_a_canary():
    """The check has teeth: a canary realizes ‖θ − θ'‖ = 2kLη/b exactly, so an
    implementation that dropped the factor k (or 2) would be caught."""
    loss = HuberSVM(h=0.5)  # β = 1, so η ≤ 2
    X, y, X2, y2 = _canary_pair()
    k, b, eta = 2, 10, 1.0  # canary margin stays ≤ kη/b = 0.2 < 1 − h
    kw = dict(passes=k, batch_size=b, step_size=eta, random_state=4)
    diff = np.linalg.norm(
        bolt_on.permutation_sgd(loss, X, y, **kw) - bolt_on.permutation_sgd(loss, X2, y2, **kw)
    )
    sens = bolt_on.convex_sensitivity(1.0, eta, k, b)
    assert diff == pytest.approx(sens, rel=1e-9)
    assert diff > bolt_on.convex_sensitivity(1.0, eta, 1, b)  # k matters


@pytest.mark.parametrize("alpha", [0.05, 0.5])
def test_strongly_convex_sensitivity_holds(alpha):
    loss = Logistic()
    rng = np.random.default_rng(5)
    X, y = _data(n=50, d=3, seed=6)
    beta_total = loss.smoothness(1.0) + alpha
    sens = bolt_on.strongly_convex_sensitivity(1.0, alpha, 50)
    worst = 0.0
    for trial in range(60):
        k = int(rng.integers(1, 4))
        b = int(rng.integers(1, 6))
        X2, y2 = _neighbours(X, y, rng)

        def step(t):
            return min(1.0 / beta_total, 1.0 / (alpha * t))

        kw = dict(passes=k, batch_size=b, step_size=step, alpha=alpha, random_state=trial)
        t1 = bolt_on.permutation_sgd(loss, X, y, **kw)
        t2 = bolt_on.permutation_sgd(loss, X2, y2, **kw)
        ratio = np.linalg.norm(t1 - t2) / sens
        assert ratio <= 1 + 1e-9
        worst = max(worst, ratio)
    assert worst > 0.05


def test_strongly_convex_canary_close_to_bound():
    alpha = 0.05
    loss = HuberSVM(h=0.5)
    X, y, X2, y2 = _canary_pair(n=40)
    beta_total = 1.0 + alpha
    sens = bolt_on.strongly_convex_sensitivity(1.0, alpha, 40)
    ratios = []
    for seed in range(20):
        kw = dict(
            passes=3,
            batch_size=1,
            step_size=lambda t: min(1 / beta_total, 1 / (alpha * t)),
            alpha=alpha,
            random_state=seed,
        )
        t1 = bolt_on.permutation_sgd(loss, X, y, **kw)
        t2 = bolt_on.permutation_sgd(loss, X2, y2, **kw)
        ratios.append(np.linalg.norm(t1 - t2) / sens)
    assert max(ratios) <= 1 + 1e-9
    assert np.mean(ratios) > 0.4  # ≈ the mean position t₀/T of the canary, ~1/2


def test_matches_a_row_by_row_reference():
    """The vectorised loop equals a plain per-row reference that draws one
    permutation per pass from the seed (so the order depends on n and the seed
    only, never on the data), for dense and CSR input, with projection."""
    X, y = _data(n=23, d=3, seed=8)
    loss, alpha, b, k, eta = Logistic(), 0.1, 5, 2, 0.7
    C = L2Ball(0.3)
    rng = np.random.default_rng(11)
    theta = np.zeros(3)
    for _ in range(k):
        perm = rng.permutation(23)
        for start in range(0, 23, b):
            g = np.zeros(3)
            for i in perm[start : start + b]:  # per-row reference on purpose
                m = y[i] * (X[i] @ theta)
                g += -y[i] * X[i] / (1.0 + np.exp(m))
            theta = C.project(theta - eta * (g / b + alpha * theta))
    kw = dict(passes=k, batch_size=b, step_size=eta, alpha=alpha, constraint=C, random_state=11)
    np.testing.assert_allclose(bolt_on.permutation_sgd(loss, X, y, **kw), theta, atol=1e-12)
    np.testing.assert_allclose(
        bolt_on.permutation_sgd(loss, sp.csr_matrix(X), y, **kw), theta, atol=1e-12
    )


# ----------------------------------------------------------------------------- noise
def test_gamma_noise_norm_distribution():
    """batch_size = n: one full-batch step, no permutation effect; the released θ
    minus that step is the Gamma-norm noise: ‖κ‖ ~ Gamma(d, Δ/ε)."""
    X, y = _data(n=50, d=4)
    kw = dict(epsilon=2.0, data_norm=1.0, batch_size=50, learning_rate=1.0)
    base = bolt_on.permutation_sgd(Logistic(), X, y, passes=1, batch_size=50, step_size=1.0)
    sens = bolt_on.convex_sensitivity(1.0, 1.0, 1, 50)
    norms = [
        np.linalg.norm(bolt_on.fit(Logistic(), X, y, random_state=s, **kw).theta - base)
        for s in range(400)
    ]
    assert stats.kstest(norms, stats.gamma(a=4, scale=sens / 2.0).cdf).pvalue > 1e-3


def test_gaussian_noise_distribution():
    X, y = _data(n=50, d=4)
    kw = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, batch_size=50, learning_rate=1.0)
    base = bolt_on.permutation_sgd(Logistic(), X, y, passes=1, batch_size=50, step_size=1.0)
    sigma = analytic_gaussian_noise_multiplier(1.0, 1e-5) * bolt_on.convex_sensitivity(
        1.0, 1.0, 1, 50
    )
    kappa = np.concatenate(
        [bolt_on.fit(Logistic(), X, y, random_state=s, **kw).theta - base for s in range(300)]
    )
    assert stats.kstest(kappa / sigma, "norm").pvalue > 1e-3


# ----------------------------------------------------------------------------- utility
def _nearly_nonprivate(**kw):
    """(X, y, release) of bolt-on SGD at ε = 10⁸ (the noise vanishes) on fixed data."""
    X, y = _data(n=200, d=3, seed=3)
    return X, y, bolt_on.fit(Logistic(), X, y, epsilon=1e8, data_norm=1.0, random_state=0, **kw)


def test_large_epsilon_strongly_convex_converges_to_regularized_optimum():
    alpha = 0.05
    X, y, r = _nearly_nonprivate(alpha=alpha, passes=300, batch_size=1)
    ref = minimize(Logistic(), X, y, l2=alpha, tol=1e-12).theta
    assert np.linalg.norm(r.theta - ref) <= 0.02 * np.linalg.norm(ref)


def test_large_epsilon_convex_converges_to_constrained_optimum():
    C = L2Ball(1.0)
    X, y, r = _nearly_nonprivate(passes=3000, batch_size=200, constraint=C)
    ref = minimize(Logistic(), X, y, constraint=C, tol=1e-12)
    assert np.linalg.norm(ref.theta) == pytest.approx(1.0, rel=1e-6)  # constraint active
    assert Logistic().value(r.theta, X, y) - ref.objective <= 1e-6
    assert np.linalg.norm(r.theta - ref.theta) <= 1e-3


def test_sparse_equals_dense():
    X, y = _data(n=80, d=5)
    X[np.abs(X) < 0.1] = 0.0
    kw = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, passes=2, batch_size=7, random_state=3)
    a = bolt_on.fit(Logistic(), X, y, **kw).theta
    b = bolt_on.fit(Logistic(), sp.csr_matrix(X), y, **kw).theta
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_clipped_row_same_as_prescaled():
    X, y = _data(n=80, d=3)
    Xb, Xc = X.copy(), X.copy()
    Xb[3] *= 1e6
    Xc[3] /= np.linalg.norm(Xc[3])
    kw = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, random_state=3)
    a = bolt_on.fit(Logistic(), Xb, y, **kw)
    b = bolt_on.fit(Logistic(), Xc, y, **kw)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-9)
    assert a.diagnostics["n_clipped"] == 1


# ----------------------------------------------------------------------------- bad input
def test_step_size_conditions_refused():
    X, y = _data()
    kw = dict(epsilon=1.0, data_norm=1.0, random_state=0)
    # convex: η ≤ 2/β = 8 for the logistic loss with unit rows
    bolt_on.fit(Logistic(), X, y, learning_rate=8.0, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="2/"):
        bolt_on.fit(Logistic(), X, y, learning_rate=8.01, **kw)
    # Huber with h = 0.1: β = 5, so η ≤ 0.4
    with pytest.raises(InvalidPrivacyParameter):
        bolt_on.fit(HuberSVM(h=0.1), X, y, learning_rate=0.5, **kw)
    # strongly convex: η_max ≤ 1/(β + λ)
    with pytest.raises(InvalidPrivacyParameter, match="1/"):
        bolt_on.fit(Logistic(), X, y, alpha=0.1, learning_rate=3.0, **kw)
    with pytest.raises(InvalidPrivacyParameter):
        bolt_on.fit(Logistic(), X, y, variant="strongly_convex", **kw)
    with pytest.raises(InvalidPrivacyParameter):
        bolt_on.fit(Logistic(), X, y, learning_rate=0.0, **kw)


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        (dict(epsilon=-1.0), InvalidPrivacyParameter),
        (dict(epsilon=float("nan")), InvalidPrivacyParameter),
        (dict(delta=1.5), InvalidPrivacyParameter),
        (dict(delta=-0.1), InvalidPrivacyParameter),
        (dict(data_norm=-1.0), InvalidPrivacyParameter),
        (dict(passes=0), InvalidPrivacyParameter),
        (dict(batch_size=0), InvalidPrivacyParameter),
        (dict(alpha=-0.1), InvalidPrivacyParameter),
        (dict(variant="sgd"), UnknownNameError),
        (dict(radius=1.0, constraint=L2Ball(1.0)), InvalidPrivacyParameter),
        (dict(radius=0.0), InvalidPrivacyParameter),
        (dict(constraint=Polytope(np.eye(3))), InvalidPrivacyParameter),
    ],
)
def test_bad_input(kwargs, exc):
    X, y = _data()
    base = dict(epsilon=1.0, delta=0.0, data_norm=1.0, random_state=0)
    base.update(kwargs)
    with pytest.raises(exc):
        bolt_on.fit(Logistic(), X, y, **base)


def test_bad_data_and_loss():
    X, y = _data()
    kw = dict(epsilon=1.0, data_norm=1.0, random_state=0)
    with pytest.raises(InvalidPrivacyParameter, match="smooth"):
        bolt_on.fit(Hinge(), X, y, **kw)
    with pytest.raises(LabelError):
        bolt_on.fit(Logistic(), X, np.zeros_like(y), **kw)
    with pytest.raises(InvalidDataError):
        bolt_on.fit(Logistic(), np.full_like(X, np.inf), y, **kw)
    with pytest.raises(InvalidDataError):
        bolt_on.fit(Logistic(), X[:, 0], y, **kw)


def test_estimator_mechanism_bolt_on():
    from dperm.estimators import DPLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3)) / 3
    y = (X[:, 0] + 0.2 * rng.normal(size=600) > 0).astype(int)
    est = DPLogisticRegression(epsilon=2.0, mechanism="bolt-on", classes=[0, 1], random_state=0)
    est = est.fit(X, y)
    assert est.diagnostics_["variant"] == "convex"
    assert isinstance(est.dp_event_, Gaussian)
    assert est.score(X, y) > 0.6
    est = DPLogisticRegression(
        epsilon=2.0,
        delta=0.0,
        mechanism="bolt-on",
        alpha=0.01,
        epochs=2,
        batch_size=20,
        classes=[0, 1],
        random_state=0,
    ).fit(X, y)
    dg = est.diagnostics_
    assert dg["variant"] == "strongly_convex" and dg["passes"] == 2 and dg["batch_size"] == 20
    assert est.dp_event_ == PureEpsilon(epsilon=2.0)
    with pytest.raises(InvalidPrivacyParameter):
        DPLogisticRegression(epsilon=1.0, mechanism="bolt-on", learning_rate=100.0).fit(X, y)
