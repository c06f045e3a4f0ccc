"""Exponential sampling over an ℓ2 ball: law of the sampler, privacy loss, utility, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from dperm.accounting.events import EpsilonDelta, PureEpsilon
from dperm.algorithms import exponential_sampling as es
from dperm.exceptions import InvalidPrivacyParameter, UnsupportedOperationError
from dperm.losses import Hinge, Logistic
from dperm.theory import exponential_sampling_bound


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)) / math.sqrt(d)
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _target_cdf_1d(loss, X, y, a, R, num=20001):
    """Independent CDF of exp(−a Σℓ(θ)) on [−R, R] by trapezoidal quadrature."""
    grid = np.linspace(-R, R, num)
    U = a * loss.pointwise(X[:, :1] * grid[None, :], y[:, None]).sum(axis=0)
    w = np.exp(-(U - U.min()))
    cdf = np.concatenate([[0.0], np.cumsum((w[1:] + w[:-1]) / 2)])
    cdf /= cdf[-1]
    return lambda t: np.interp(t, grid, cdf)


@pytest.mark.parametrize("envelope", ["tangent", "lipschitz"])
@pytest.mark.parametrize("loss", [Logistic(), Hinge()])
def test_d1_law_matches_target_density_ks(loss, envelope):
    X, y = _data(60, 1)
    R = 3.0
    kw = {}
    sens, lo, hi = es.sensitivity(loss, radius=R)
    if envelope == "lipschitz":
        kw["loss_bounds"] = (lo, hi)
    rng = np.random.default_rng(1)
    draws = np.array(
        [
            es.fit(loss, X, y, epsilon=1.0, radius=R, random_state=rng, **kw).theta[0]
            for _ in range(400)
        ]
    )
    cdf = _target_cdf_1d(loss, X, y, 1.0 / (2 * sens), R)
    assert stats.kstest(draws, cdf).pvalue > 1e-3


def test_d2_law_chi_square_on_linear_potential():
    # U(θ) = b θ₁ on the unit disc: marginal of θ₁ ∝ e^{−bθ₁}·2√(1 − θ₁²)
    b = 3.0
    rng = np.random.default_rng(2)
    draws = np.array(
        [
            es.sample_ball(
                lambda T: b * T[:, 0],
                1.0,
                2,
                gradient=lambda T: np.tile([b, 0.0], (T.shape[0], 1)),
                random_state=rng,
            )
            for _ in range(2000)
        ]
    )
    assert np.all(np.linalg.norm(draws, axis=1) <= 1.0)
    edges = np.linspace(-1, 1, 9)

    def dens(t):
        return math.exp(-b * t) * 2 * math.sqrt(max(0.0, 1 - t * t))

    probs = np.array([integrate.quad(dens, lo, hi)[0] for lo, hi in itertools.pairwise(edges)])
    probs /= probs.sum()
    obs = np.histogram(draws[:, 0], edges)[0]
    assert stats.chisquare(obs, probs * obs.sum()).pvalue > 1e-3
    # the other coordinate is symmetric
    assert abs(np.mean(draws[:, 1])) < 4 * np.std(draws[:, 1]) / math.sqrt(2000)


def test_lipschitz_envelope_same_law_d2():
    b = 2.0
    rng = np.random.default_rng(3)
    draws = np.array(
        [
            es.sample_ball(lambda T: b * np.abs(T[:, 1]), 1.0, 2, lipschitz=b, random_state=rng)
            for _ in range(1500)
        ]
    )
    # |θ₂| has density ∝ e^{−b t}·2√(1 − t²) on [0, 1]
    dens = lambda t: math.exp(-b * t) * math.sqrt(1 - t * t)  # noqa: E731
    z = integrate.quad(dens, 0, 1)[0]
    mean = integrate.quad(lambda t: t * dens(t), 0, 1)[0] / z
    second = integrate.quad(lambda t: t * t * dens(t), 0, 1)[0] / z
    sd = math.sqrt(second - mean**2)
    assert abs(np.abs(draws[:, 1]).mean() - mean) < 4 * sd / math.sqrt(1500)


def test_exact_privacy_loss_neighbouring_pair_d1():
    """Audit: the log-density ratio of neighbouring datasets is within ±ε and nearly attains it."""
    X, y = _data(30, 1, seed=4)
    R, eps = 2.0, 1.0
    sens, *_ = es.sensitivity(Logistic(), radius=R)
    X2, y2 = X.copy(), y.copy()
    X2[0, 0], y2[0] = 1.0, 1.0  # worst-case-ish replacement
    X[0, 0], y[0] = 1.0, -1.0
    grid = np.linspace(-R, R, 40001)
    logs = []
    for A, b in ((X, y), (X2, y2)):
        U = eps / (2 * sens) * Logistic().pointwise(A[:, :1] * grid, b[:, None]).sum(axis=0)
        w = np.exp(-(U - U.min()))
        logz = math.log(np.trapezoid(w, grid)) - U.min()
        logs.append(-U - logz)
    loss_rv = logs[0] - logs[1]
    assert np.max(np.abs(loss_rv)) <= eps + 1e-6
    assert np.max(np.abs(loss_rv)) > 0.5 * eps


def test_event_and_diagnostics():
    X, y = _data(200, 2)
    res = es.fit(Logistic(), X, y, epsilon=0.7, radius=2.0, random_state=0)
    assert res.event == PureEpsilon(0.7)
    assert res.event.neighbouring == "replace-one"
    assert res.theta.shape == (2,) and np.linalg.norm(res.theta) <= 2.0
    # logistic: range hi − lo = data_norm·R = 2 < 2LR = 4
    assert res.diagnostics["sensitivity"] == pytest.approx(2.0)
    assert es.sensitivity(Hinge(), radius=2.0)[0] == pytest.approx(3.0)  # range (1+2) − 0


def test_utility_bound_holds_with_stated_probability():
    X, y = _data(300, 1, seed=5)
    R, eps = 4.0, 0.5
    grid = np.linspace(-R, R, 8001)
    L = Logistic().pointwise(X[:, :1] * grid, y[:, None]).mean(axis=0)
    best = L.min()
    rng = np.random.default_rng(6)
    trials = 300
    excess = []
    for _ in range(trials):
        res = es.fit(Logistic(), X, y, epsilon=eps, radius=R, random_state=rng)
        excess.append(Logistic().value(res.theta, X, y) - best)
    bound = res.diagnostics["utility_bound"]
    frac = np.mean(np.array(excess) > bound)
    assert frac <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)
    # and the sampler is not trivially uniform: mean excess well below a uniform draw's
    assert np.mean(excess) < 0.5 * (L.mean() - best)


def test_theory_bound_closed_form():
    n, d, eps, lip, R = 1000, 2, 1.0, 1.0, 1.0
    b = exponential_sampling_bound(n=n, d=d, epsilon=eps, lipschitz=lip, radius=R, beta=0.05)
    expect = 8 * lip * R / (n * eps) * (d * math.log(n * eps / 2) + math.log(20))
    assert b == pytest.approx(expect)
    # the bound never exceeds the trivial 2LR
    tiny = exponential_sampling_bound(n=2, d=2, epsilon=0.01, lipschitz=lip, radius=R)
    assert tiny == pytest.approx(2 * lip * R)
    with pytest.raises(InvalidPrivacyParameter, match="beta"):
        exponential_sampling_bound(n=n, d=d, epsilon=eps, lipschitz=lip, radius=R, beta=0.5)


def test_errors():
    X, y = _data(50, 3)
    with pytest.raises(UnsupportedOperationError, match="d=3"):
        es.fit(Logistic(), X, y, epsilon=1.0)
    X, y = _data(50, 1)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        es.fit(Logistic(), X, y, epsilon=-1.0)
    with pytest.raises(InvalidPrivacyParameter, match="radius"):
        es.fit(Logistic(), X, y, epsilon=1.0, radius=0.0)
    with pytest.raises(InvalidPrivacyParameter, match="loss"):
        es.fit("logistic", X, y, epsilon=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="loss_bounds"):
        es.fit(Logistic(), X, y, epsilon=1.0, loss_bounds=(1.0, 0.0))
    with pytest.raises(InvalidPrivacyParameter, match="lipschitz= or gradient="):
        es.sample_ball(lambda T: T[:, 0], 1.0, 1)
    with pytest.raises(UnsupportedOperationError):
        es.sample_ball(lambda T: T[:, 0], 1.0, 3, lipschitz=1.0)


# ----------------------------------------------------------------------------- ridge, d > 2
def test_regularized_target_d1_law_with_ridge():
    """alpha > 0 adds (nΛ/2)θ² to the potential: the d = 1 law (cube sampler) matches
    an independent quadrature of exp(−a(Σℓ + nΛθ²/2)) (KS)."""
    X, y = _data(200, 1, seed=8)
    R, eps, lam = 3.0, 1.0, 0.05
    sens, *_ = es.sensitivity(Logistic(), radius=R)
    a = eps / (2 * sens)
    grid = np.linspace(-R, R, 20001)
    U = a * (Logistic().pointwise(X[:, :1] * grid, y[:, None]).sum(axis=0) + 100 * lam * grid**2)
    w = np.exp(-(U - U.min()))
    cdf = np.concatenate([[0.0], np.cumsum((w[1:] + w[:-1]) / 2)])
    cdf /= cdf[-1]
    draws = [
        es.fit(Logistic(), X, y, epsilon=eps, radius=R, alpha=lam, random_state=s).theta[0]
        for s in range(600)
    ]
    assert stats.kstest(draws, lambda t: np.interp(t, grid, cdf)).pvalue > 1e-3


def test_regularized_target_d3_gaussian_envelope_matches_quadrature():
    """d = 3, Λ > 0 (Gaussian-envelope rejection): the sample mean of 300 exact draws
    agrees with a 41³-grid quadrature of the target within 4 standard errors."""
    rng = np.random.default_rng(0)
    n, d, R, lam = 300, 3, 3.0, 0.1
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X /= 1.001 * np.maximum(1, np.linalg.norm(X, axis=1))[:, None]
    w = np.array([2.0, -1.0, 0.5])
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ w)), 1.0, -1.0)
    res = [
        es.fit(Logistic(), X, y, epsilon=1.0, radius=R, alpha=lam, random_state=s)
        for s in range(300)
    ]
    draws = np.array([r.theta for r in res])
    assert res[0].diagnostics["sampler"].startswith("Gaussian-envelope")
    assert res[0].event == PureEpsilon(1.0)
    g = np.linspace(-R, R, 41)
    G = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    G = G[np.sum(G**2, 1) <= R * R]
    a = 1.0 / (2 * res[0].diagnostics["sensitivity"])
    U = a * (
        Logistic().pointwise(X @ G.T, y[:, None]).sum(axis=0) + 0.5 * n * lam * np.sum(G**2, 1)
    )
    p = np.exp(-(U - U.min()))
    p /= p.sum()
    mean = p @ G
    sd = np.sqrt(p @ (G - mean) ** 2)
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= 4 * sd / np.sqrt(300) + 0.01)


def test_gaussian_envelope_sampler_on_a_known_law_and_boundary_mode():
    """F = ⟨c₀, θ⟩ (linear, B_F = 0): p ∝ exp(−a⟨c₀,θ⟩ − aρ‖θ‖²/2) on the ball, a
    Gaussian truncated to the ball; with the mode outside the ball the second envelope
    is used.  Check the law of the first coordinate against rejection from the Gaussian."""
    rng = np.random.default_rng(1)
    c0 = np.array([8.0, 0.0, 0.0, 0.0])

    def F(T):
        return T @ c0

    def grad(T):
        return np.tile(c0, (T.shape[0], 1))

    draws = np.array(
        [
            es.sample_strongly_log_concave(
                F, grad, scale=1.0, ridge=4.0, center=np.array([-1.0, 0, 0, 0]), radius=1.0,
                random_state=s,
            )[0]
            for s in range(800)
        ]
    )  # fmt: skip
    ref = rng.normal(-2.0, 0.5, size=(200_000, 4)) * np.r_[1, 0, 0, 0] + np.r_[
        0, 1, 1, 1
    ] * rng.normal(0.0, 0.5, size=(200_000, 4))
    ref = ref[np.sum(ref**2, 1) <= 1.0]
    assert stats.ks_2samp(draws[:, 0], ref[:, 0]).pvalue > 1e-3
    assert np.all(np.sum(draws**2, 1) <= 1.0 + 1e-12)


def test_regularized_sampler_refusals():
    X, y = _data(50, 3)
    with pytest.raises(UnsupportedOperationError, match="alpha > 0"):
        es.fit(Logistic(), X, y, epsilon=1.0)
    with pytest.raises(UnsupportedOperationError, match="smooth"):
        es.fit(Hinge(), X, y, epsilon=1.0, alpha=0.1)
    X, y = _data(50, 60)
    with pytest.raises(UnsupportedOperationError, match="alpha ≥"):
        es.fit(Logistic(), X, y, epsilon=1.0, alpha=1e-3)
    lam = es.default_alpha(50, 60, 1.0, 1.0)  # 10⁴ proposals, but n·d·10⁴ ≤ 10¹⁰ rows only
    X, y = _data(20_000, 60)
    with pytest.raises(UnsupportedOperationError, match="multiply-adds"):
        es.fit(Logistic(), X, y, epsilon=1.0, alpha=lam)
    with pytest.raises(InvalidPrivacyParameter, match="alpha"):
        es.fit(Logistic(), X, y, epsilon=1.0, alpha=-1.0)
    assert es.default_alpha(100, 2, 1.0, 1.0) == 0.0
    lam = es.default_alpha(100, 10, 1.0, 1.0)
    assert es.expected_proposals(10, 0.25, lam) == pytest.approx(es.TARGET_PROPOSALS)


# ------------------------------------------------- any d without a ridge (issue #23 item 4)
def test_proximal_sampler_law_matches_the_target_in_one_dimension():
    """The proximal sampler (exact restricted Gaussian oracle) after its public number of
    steps has the exponential mechanism's law: KS test against the exact CDF by
    quadrature (an independent computation)."""
    from dperm.algorithms import _proximal_sampler as prox
    from dperm.algorithms.exponential_erm import sum_losses

    rng = np.random.default_rng(0)
    X1 = rng.uniform(-1, 1, (20, 1))
    y1 = np.where(X1[:, 0] + 0.3 * rng.normal(size=20) > 0, 1.0, -1.0)
    loss, a, R = Logistic(), 0.25, 1.0

    def F(T):
        return sum_losses(loss, X1, y1, T, -np.inf, np.inf)

    def grad(T):
        return np.asarray(X1.T @ loss.derivative(T @ X1.T, y1[None, :]).T).T

    eta = 1.0 / (a * 20 * 0.25)
    steps = prox.proximal_steps(n=20, epsilon=1.0, radius=R, eta=eta, tv=1e-3)
    gen = np.random.default_rng(1)
    draws = np.array([
        prox.sample_proximal(
            F, grad, scale=a, smoothness=20 * 0.25, radius=R, d=1, steps=steps, eta=eta,
            rng=gen, oracle=es.sample_strongly_log_concave,
        )[0]
        for _ in range(300)
    ])  # fmt: skip

    def dens(t):
        return math.exp(-a * float(F(np.array([[t]]))[0]))

    Z = integrate.quad(dens, -R, R)[0]

    def cdf(v):
        return np.array([integrate.quad(dens, -R, x)[0] / Z for x in np.atleast_1d(v)])

    assert np.all(np.abs(draws) <= R)
    assert stats.kstest(draws, cdf).pvalue > 1e-3


def test_any_dimension_without_ridge_is_epsilon_delta_with_tv_charged():
    rng = np.random.default_rng(0)
    X3 = rng.normal(size=(60, 3)) / 3
    X3 /= np.maximum(1.0, np.linalg.norm(X3, axis=1))[:, None]
    y3 = np.where(X3[:, 0] > 0, 1.0, -1.0)
    res = es.fit(Logistic(), X3, y3, epsilon=1.0, delta=1e-6, random_state=0)
    assert res.event == EpsilonDelta(1.0, 1e-6)
    assert "proximal sampler" in res.diagnostics["sampler"]
    assert np.linalg.norm(res.theta) <= 1.0 + 1e-12
    with pytest.raises(UnsupportedOperationError, match="alpha"):  # δ = 0: still refused
        es.fit(Logistic(), X3, y3, epsilon=1.0, random_state=0)
