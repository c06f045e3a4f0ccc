"""Structured output perturbation (K–D Thm 1 with the strongly convex term)."""

import math

import numpy as np
import pytest
from scipy import stats

from dperm.accounting.events import Gaussian, PureEpsilon
from dperm.algorithms import output_perturbation as outp
from dperm.algorithms import structured_output_perturbation as sop
from dperm.exceptions import InvalidPrivacyParameter
from dperm.losses import HuberSVM, Logistic
from dperm.norms import GroupLinfNorm, L1Norm, LinfNorm, gaussian_width
from dperm.solvers import minimize

D = 6
GROUPS = [[0, 1, 2], [2, 3], [3, 4, 5]]


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    X /= 1.001 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X[:, 0] + X[:, 1] - X[:, 4] + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def test_sensitivity_bound_holds_on_neighbours_with_overlapping_group_norm(neighbour_shift):
    """The minimizers on replace-one neighbours stay within 2L/(nΛ), the non-smooth
    norm notwithstanding (Huber-SVM: |φ'| = 1 makes the bound nearly tight)."""
    X, y = _data(120)
    n = X.shape[0]
    norm = GroupLinfNorm(GROUPS, D).scaled(0.5 / n * 5)
    alpha = 0.05
    loss = HuberSVM(0.5)
    bound = outp.output_sensitivity(n, loss.lipschitz(1.0), alpha)
    worst = neighbour_shift(loss, X, y, l2=alpha, regularizer=norm, tol=1e-10, every=40)
    assert 0 < worst <= bound * (1 + 1e-6)


def test_release_is_minimizer_plus_gaussian_noise_of_the_right_scale():
    X, y = _data()
    n = X.shape[0]
    norm = L1Norm(D)
    lam, alpha = 3.0, 0.1
    exact = minimize(Logistic(), X, y, l2=alpha, regularizer=L1Norm(D, lam / n), tol=1e-10).theta
    kw = dict(norm=norm, epsilon=1.0, delta=1e-5, data_norm=1.0, alpha=alpha, lam=lam)
    draws = np.array(
        [sop.fit(Logistic(), X, y, denoise="none", random_state=s, **kw).theta for s in range(60)]
    )
    res = sop.fit(Logistic(), X, y, random_state=0, **kw)
    sigma = res.diagnostics["noise_scale"]
    assert isinstance(res.event, Gaussian)
    assert res.diagnostics["sensitivity"] == pytest.approx(2.0 / (n * alpha))
    z = ((draws - exact) / sigma).ravel()
    assert stats.kstest(z, "norm").pvalue > 1e-3


def test_gamma_noise_and_event():
    X, y = _data()
    res = sop.fit(
        Logistic(),
        X,
        y,
        norm=LinfNorm(D),
        epsilon=0.5,
        delta=0.0,
        data_norm=1.0,
        alpha=0.1,
        lam=1.0,
        random_state=1,
    )
    assert res.event == PureEpsilon(0.5)
    assert res.diagnostics["neighbouring"] == "replace-one"
    assert res.diagnostics["noise_scale"] == pytest.approx(2.0 / (300 * 0.1) / 0.5)


def test_kd_lambda_rule():
    n = 400
    norm = L1Norm(D)
    g = gaussian_width(norm, ball="dual").value  # d √(2/π)
    assert g == pytest.approx(D * math.sqrt(2 / math.pi))
    assert sop.kd_lambda(norm, n, 1.0, 1.0) == pytest.approx(math.sqrt(n) / g)
    X, y = _data(n)
    res = sop.fit(
        Logistic(),
        X,
        y,
        norm=norm,
        epsilon=1.0,
        delta=0.0,
        data_norm=1.0,
        alpha=0.1,
        random_state=0,
    )
    assert res.diagnostics["lam"] == pytest.approx(math.sqrt(n) / g)


def test_bad_input():
    X, y = _data(50)
    kw = dict(epsilon=1.0, delta=0.0, data_norm=1.0, random_state=0)
    with pytest.raises(InvalidPrivacyParameter, match="alpha"):
        sop.fit(Logistic(), X, y, norm=L1Norm(D), alpha=0.0, lam=1.0, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="norm"):
        sop.fit(Logistic(), X, y, norm="l1", alpha=0.1, lam=1.0, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="lam"):
        sop.fit(Logistic(), X, y, norm=L1Norm(D), alpha=0.1, lam="big", **kw)
    with pytest.raises(InvalidPrivacyParameter, match="features"):
        sop.fit(Logistic(), X, y, norm=L1Norm(D + 1), alpha=0.1, lam=1.0, **kw)
    with pytest.raises(InvalidPrivacyParameter):
        sop.fit(Logistic(), X, y, norm=L1Norm(D), alpha=0.1, lam=-1.0, **kw)


def test_estimator_adapters_resolve_the_norm():
    from dperm.estimators import DPLogisticRegression

    X, y = _data(300)
    yy = (y > 0).astype(int)
    kw = dict(epsilon=1.0, delta=1e-5, classes=[0, 1], fit_intercept=False, random_state=0)
    est = DPLogisticRegression(
        mechanism="structured-output", penalty="elasticnet", alpha=0.2, l1_ratio=0.5, **kw
    ).fit(X, yy)
    assert est.diagnostics_["lam"] == pytest.approx(300 * 0.1)
    assert est.diagnostics_["alpha"] == pytest.approx(0.1)
    assert "L1Norm" in est.diagnostics_["norm"]
    from dperm.theory import bound_for_estimator, structured_output_bound

    b = bound_for_estimator(est, 300)
    ref = structured_output_bound(
        n=300,
        d=D,
        epsilon=1.0,
        delta=1e-5,
        lipschitz=1.0,
        strong_convexity=0.1,
        lam=30.0,
        smoothness=0.25,
        gaussian_width=gaussian_width(L1Norm(D), ball="dual").value,
    )
    assert b.value == pytest.approx(ref.value)
    # penalty "l2": ℓ1 with K–D's λ
    est = DPLogisticRegression(mechanism="structured-output", alpha=0.1, **kw).fit(X, yy)
    assert est.diagnostics_["lam"] == pytest.approx(sop.kd_lambda(L1Norm(D), 300, 1.0, 1.0))
    est = DPLogisticRegression(
        mechanism="dual-frank-wolfe", penalty="elasticnet", alpha=0.2, l1_ratio=0.5, **kw
    ).fit(X, yy)
    assert est.diagnostics_["lam"] == pytest.approx(0.1)
    assert est.neighbouring_ == "replace-one"
    with pytest.raises(InvalidPrivacyParameter, match="alpha"):
        DPLogisticRegression(mechanism="structured-output", penalty="l1", alpha=0.1, **kw).fit(
            X, yy
        )


def test_gaussian_width_bound_dominates_measured_excess():
    from dperm.theory import structured_output_bound, theoretical_bound

    X, y = _data(400)
    n = X.shape[0]
    norm, lam, alpha = GroupLinfNorm(GROUPS, D), 20.0, 0.05
    loss = Logistic()
    reg = norm.scaled(lam / n)
    theta = minimize(loss, X, y, l2=alpha, regularizer=reg, tol=1e-10).theta

    def J(t):
        return loss.value(t, X, y) + 0.5 * alpha * float(t @ t) + reg.value(t)

    res = sop.fit(
        loss, X, y, norm=norm, epsilon=1.0, delta=1e-5, data_norm=1.0, alpha=alpha, lam=lam
    )
    sigma = res.diagnostics["noise_scale"]
    kappa = np.random.default_rng(0).normal(size=(400, D)) * sigma
    excess = np.array([J(theta + k) for k in kappa]) - J(theta)
    g = gaussian_width(norm, ball="dual", n_samples=4000, random_state=0)
    # the public constants of the run, shared by the three bounds below
    kw = dict(n=n, d=D, epsilon=1.0, delta=1e-5, lipschitz=1.0, smoothness=0.25)
    bound = structured_output_bound(**kw, strong_convexity=alpha, lam=lam, gaussian_width=g.ci_high)
    se = excess.std(ddof=1) / np.sqrt(excess.size)
    assert excess.mean() - 3 * se <= bound.value
    # λ = 0 is plain output perturbation's bound
    plain = structured_output_bound(**kw, strong_convexity=alpha, lam=0.0, gaussian_width=1.0)
    ref = theoretical_bound("output", **kw, strong_convexity=alpha)
    assert plain.value == pytest.approx(ref.value)
    assert bound.value > plain.value


def test_chain_tv_norm_is_the_output_perturbation_of_its_objective():
    from dperm.norms import ChainTVNorm

    X, y = _data(200)
    norm = ChainTVNorm(D, mu=0.3)
    kw = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, alpha=0.1, random_state=3)
    a = sop.fit(Logistic(), X, y, norm=norm, lam=5.0, denoise="none", **kw)
    b = outp.fit(Logistic(), X, y, regularizer=norm.scaled(5.0 / 200), **kw)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-12)
    assert a.event == b.event


def test_audit_runner_and_mutation(monkeypatch):
    """The canary audit (μ-GDP method) stays below the claim on the raw release and
    catches a halved sensitivity there (ε = 2, 600 runs per dataset, fixed seed)."""
    from dperm.audit import audit

    ok = audit("structured-output-raw", epsilon=2.0, runs=600, n_jobs=1, random_state=0)
    assert ok.epsilon_lower_bound < 2.0
    orig = outp.output_sensitivity
    monkeypatch.setattr(outp, "output_sensitivity", lambda n, lip, a: 0.5 * orig(n, lip, a))
    bad = audit("structured-output-raw", epsilon=2.0, runs=600, n_jobs=1, random_state=0)
    assert bad.epsilon_lower_bound > 2.0


# ----------------------------------------------------------------------------- denoising
def test_denoise_threshold_matches_the_closed_form_quantile():
    """ℓ1 and Gaussian noise: Ω*(b) = ‖b‖∞, P(‖g‖∞ ≤ t) = (2Φ(t) − 1)^d, so the
    (1 − β)-quantile is t = Φ⁻¹((1 + (1 − β)^{1/d})/2).  The 1000 public Monte Carlo
    draws estimate it with standard error √(β(1 − β)/1000)/f(t), f the density of
    ‖g‖∞; the test allows 4 of them."""
    for d, beta in ((1, 0.1), (20, 0.1), (20, 0.5)):
        t = stats.norm.ppf((1 + (1 - beta) ** (1 / d)) / 2)
        f = d * (2 * stats.norm.cdf(t) - 1) ** (d - 1) * 2 * stats.norm.pdf(t)
        se = math.sqrt(beta * (1 - beta) / 1000) / f
        tau = sop.denoise_threshold(L1Norm(d), noise="gaussian", scale=2.0, level=beta)
        assert abs(tau - 2.0 * t) <= 2.0 * 4 * se
    # Gamma-norm noise: ‖b‖ ~ Gamma(d, s) and ℓ∞ norm (Ω* = ℓ1) against an independent draw
    d = 5
    rng = np.random.default_rng(123)
    g = rng.standard_normal((20000, d))
    b = g / np.linalg.norm(g, axis=1, keepdims=True) * rng.gamma(d, 0.3, size=(20000, 1))
    ref = np.quantile(np.abs(b).sum(axis=1), 0.9)
    got = sop.denoise_threshold(LinfNorm(d), noise="gamma", scale=0.3, level=0.1)
    assert got == pytest.approx(ref, rel=0.05)
    assert sop.denoise_threshold(L1Norm(3), noise="gaussian", scale=0.0) == 0.0


def test_denoised_releases_are_functions_of_the_raw_release_with_a_public_threshold():
    X, y = _data(300)
    norm = GroupLinfNorm([[0, 1, 2], [3, 4, 5]], D)
    kw = dict(norm=norm, epsilon=2.0, delta=1e-5, data_norm=1.0, alpha=0.05, lam=2.0)
    raw = sop.fit(Logistic(), X, y, denoise="none", random_state=4, **kw)
    soft = sop.fit(Logistic(), X, y, denoise="soft", random_state=4, **kw)
    hard = sop.fit(Logistic(), X, y, random_state=4, **kw)  # default "hard"
    tau = hard.diagnostics["denoise_threshold"]
    assert hard.diagnostics["denoise"] == "hard" and "denoise" not in raw.diagnostics
    np.testing.assert_allclose(soft.theta, norm.prox(raw.theta, tau), atol=1e-12)
    support = soft.theta != 0
    np.testing.assert_array_equal(hard.theta, np.where(support, raw.theta, 0.0))
    assert raw.event == soft.event == hard.event
    # τ is public: another dataset of the same size gives the same τ
    X2, y2 = _data(300, seed=9)
    other = sop.fit(Logistic(), X2, -y2, random_state=0, **kw)
    assert other.diagnostics["denoise_threshold"] == tau
    sigma = raw.diagnostics["noise_scale"]
    assert tau == pytest.approx(
        sop.denoise_threshold(norm, noise="gaussian", scale=sigma), rel=1e-12
    )


def test_soft_denoising_bound_holds_on_its_event():
    """‖prox_{τΩ}(θ̂ + b) − θ̂‖² ≤ 4τΩ(θ̂) whenever Ω*(b) ≤ τ, an event of frequency
    ≈ 1 − β; groups where θ̂ is zero are then returned exactly zero."""
    from dperm.theory import denoised_release_bound

    d = 12
    norm = GroupLinfNorm([range(k, k + 3) for k in range(0, d, 3)], d)
    theta_hat = np.zeros(d)
    theta_hat[3:6] = [2.0, -1.5, 1.0]
    sigma, beta = 0.4, 0.1
    tau = sop.denoise_threshold(norm, noise="gaussian", scale=sigma, level=beta)
    bound = denoised_release_bound(tau=tau, omega=norm.norm(theta_hat), level=beta).value
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(400):
        b = sigma * rng.standard_normal(d)
        p = sop.denoise(norm, theta_hat + b, tau, "soft")
        if norm.dual_norm(b) <= tau:
            hits += 1
            assert float(np.sum((p - theta_hat) ** 2)) <= bound + 1e-12
            assert not np.any(p[[0, 1, 2, 6, 7, 8, 9, 10, 11]])
    # binomial(400, 0.9): 4 sd ≈ 24
    assert abs(hits - 360) <= 24


def test_denoise_bad_input_and_estimator_rule():
    from dperm import DPLogisticRegression

    X, y = _data(100)
    kw = dict(norm=L1Norm(D), epsilon=1.0, delta=1e-5, data_norm=1.0, alpha=0.1, lam=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="denoise"):
        sop.fit(Logistic(), X, y, denoise="median", **kw)
    for level in (0.0, 1.0, -0.5):
        with pytest.raises(InvalidPrivacyParameter, match="denoise_level"):
            sop.fit(Logistic(), X, y, denoise_level=level, **kw)
    # the estimators denoise only under a structured-norm penalty (or when told to)
    norm_pen = DPLogisticRegression(penalty=GroupLinfNorm(GROUPS, D), mechanism="structured-output")
    assert sop.estimator_denoise(norm_pen) == "hard"
    assert sop.estimator_denoise(DPLogisticRegression(penalty="elasticnet")) == "none"
    told = DPLogisticRegression(penalty="l1")
    told.denoise = "soft"
    assert sop.estimator_denoise(told) == "soft"
