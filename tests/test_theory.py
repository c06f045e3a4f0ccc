"""Theoretical excess-empirical-risk bounds (dperm.theory)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dperm.accounting.gaussian import analytic_gaussian_noise_multiplier
from dperm.algorithms import amp
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError
from dperm.losses import Logistic
from dperm.solvers import minimize
from dperm.theory import ALGORITHMS, TheoryBound, theoretical_bound

pytestmark = pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")

BASE = dict(n=1000, d=10, epsilon=1.0, delta=1e-5, lipschitz=1.0)


# ----------------------------------------------------------------------------- hand values
def test_gradient_methods_bst14_rates():
    for alg in ("dp-gd", "dp-sgd", "dp-sgd-single"):
        b = theoretical_bound(alg, radius=1.0, **BASE)
        assert b.value == pytest.approx(math.sqrt(10 * math.log(1e5)) / 1000)
        assert not b.constant_known and "Bassily" in b.source
        b = theoretical_bound(alg, strong_convexity=0.1, **BASE)
        assert b.value == pytest.approx(10 * math.log(1e5) / (0.1 * 1e6))
    # ‖θ*‖ stands in for the radius when there is no constraint
    a = theoretical_bound("dp-gd", theta_norm=3.0, **BASE)
    assert a.value == pytest.approx(3 * math.sqrt(10 * math.log(1e5)) / 1000)


def test_output_perturbation_closed_form():
    kw = dict(n=100, d=2, epsilon=1.0, lipschitz=1.0, smoothness=0.25, strong_convexity=0.1)
    b = theoretical_bound("output", delta=0.0, **kw)
    # Δ = 2L/(nΛ) = 0.2; ‖κ‖ ~ Gamma(2, 0.2): E‖κ‖² = 6·0.04; (β+Λ)/2·E‖κ‖² = 0.042
    assert b.value == pytest.approx(0.175 * 0.24)
    assert b.constant_known
    b = theoretical_bound("output", delta=1e-5, **kw)
    z = analytic_gaussian_noise_multiplier(1.0, 1e-5)
    gauss = 2 * (z * 0.2) ** 2
    assert b.value == pytest.approx(min(0.175 * gauss, math.sqrt(2) * z * 0.2 + 0.05 * gauss))


def test_objective_perturbation_bounds():
    from dperm.algorithms.objective_perturbation import tight_calibration

    kw = dict(n=500, d=3, epsilon=1.0, lipschitz=1.0, smoothness=0.25)
    b = theoretical_bound("objective", delta=1e-5, strong_convexity=0.05, **kw)
    cal = tight_calibration(1.0, 1e-5, 500, 0.05, 0.25, 1.0, n_coords=3, theta_bound=20.0)
    sigma, extra = cal.noise_scale, cal.extra_l2
    assert extra == 0.0
    assert b.value == pytest.approx(3 * (sigma / 500) ** 2 / (2 * 0.05))
    assert b.constant_known
    # convex case: Kifer et al. rate with constant 1
    b = theoretical_bound("objective", delta=1e-5, theta_norm=2.0, **kw)
    expected = 2 * math.sqrt(3 * math.log(1e5)) / 500 + 0.25 * 4 / 500
    assert b.value == pytest.approx(expected) and not b.constant_known


def test_amp_bound_from_its_calibration():
    kw = dict(n=2000, d=5, epsilon=0.5, delta=1e-6, lipschitz=1.0, smoothness=0.25)
    b = theoretical_bound("amp-nt", **kw)
    cal = amp.calibrate(**kw)
    a, g, s1, s2, d = cal.alpha, cal.gamma, cal.sigma_objective, cal.sigma_output, 5
    out = min((0.25 + a) / 2 * d * s2**2, math.sqrt(d) * s2 + a / 2 * d * s2**2)
    expected = d * s1**2 / (2 * a) + g * (g + math.sqrt(d) * s1) / a + out
    assert b.value == pytest.approx(expected)
    assert b.constant_known
    # plain AMP with a larger regularization: alpha enters the bound
    b2 = theoretical_bound("amp", strong_convexity=4 * cal.alpha, **kw)
    assert b2.value != b.value
    assert f"{4 * cal.alpha:.4g}" in b2.source


def test_bolt_on_bounds_by_hand():
    kw = dict(n=1000, d=3, epsilon=1.0, delta=0.0, lipschitz=1.0, smoothness=0.25)
    b = theoretical_bound("bolt-on", radius=2.0, batch_size=32, **kw)
    # b = 32, T = ⌈1000/32⌉ = 32, η = 1/β = 4, Δ = 2·4/32 = 0.25, E‖κ‖ = 3·0.25
    assert b.value == pytest.approx(4 / (2 * 4 * 32) + 4 / 2 + 0.75)
    b = theoretical_bound("bolt-on", strong_convexity=0.1, batch_size=32, **kw)
    # Δ = 2/(0.1·1000) = 0.02, E‖κ‖² = 12·0.0004
    expected = (1 + math.log(32)) / (0.1 * 32) + min(0.35 / 2 * 0.0048, 0.06 + 0.05 * 0.0048)
    assert b.value == pytest.approx(expected)
    assert not b.constant_known


def test_frank_wolfe_and_exponential_by_hand():
    kw = dict(n=1000, d=10, epsilon=1.0, lipschitz=1.0, smoothness=1.0, radius=1.0)
    b = theoretical_bound("frank-wolfe", delta=1e-5, **kw)
    expected = 4 ** (1 / 3) * math.log(20000) * math.sqrt(math.log(1e5)) / 1000 ** (2 / 3)
    assert b.value == pytest.approx(expected)
    b = theoretical_bound("frank-wolfe", delta=0.0, **kw)
    assert b.value == pytest.approx(2 * math.sqrt(4 * math.log(20000) / 1000))
    b = theoretical_bound(
        "exponential", n=100, d=1, epsilon=1.0, lipschitz=1.0, n_candidates=100, loss_range=1.0
    )
    assert b.value == pytest.approx(2 * (math.log(100) + 1) / 100)
    assert b.constant_known
    b = theoretical_bound("exponential", n=100, d=4, epsilon=2.0, lipschitz=1.0, radius=3.0)
    # Smith & Ullman Thm 2.5 in expectation (proof's constants) at Δ = 2GR = 6:
    # an = εn/(2Δ), r = d/(anG), value rG + (d ln(2R/r) + 1)/(an)
    an = 2.0 * 100 / 12.0
    r = 4 / an
    assert b.value == pytest.approx(r + (4 * math.log(6 / r) + 1) / an) and b.constant_known


# ----------------------------------------------------------------------------- monotonicity
def _kwargs(alg):
    kw = dict(d=10, delta=1e-6, lipschitz=1.0, smoothness=0.25)
    if alg in ("objective", "output"):
        kw["strong_convexity"] = 0.01
    if alg in ("bolt-on", "dp-gd", "dp-sgd", "dp-sgd-single", "frank-wolfe", "exponential"):
        kw["radius"] = 1.0
    if alg == "bolt-on":
        # fixed hyperparameters: the default batch ⌈50/ε⌉ keeps the noise scale
        # constant in ε by design, so the default-configured bound is flat in ε
        kw["batch_size"] = 32
    return kw


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_decreasing_in_n_and_epsilon(alg):
    kw = _kwargs(alg)
    by_n = [theoretical_bound(alg, n=n, epsilon=1.0, **kw).value for n in (10**3, 10**4, 10**5)]
    assert all(a > b for a, b in itertools.pairwise(by_n)), by_n
    by_eps = [theoretical_bound(alg, n=10**4, epsilon=e, **kw).value for e in (0.05, 0.2, 1.0, 4.0)]
    assert all(a > b for a, b in itertools.pairwise(by_eps)), by_eps
    assert all(np.isfinite(by_n + by_eps)) and min(by_n + by_eps) > 0


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_result_type(alg):
    b = theoretical_bound(alg, n=1000, epsilon=1.0, **_kwargs(alg))
    assert isinstance(b, TheoryBound)
    assert isinstance(b.source, str) and b.source and isinstance(b.rate, str) and b.rate
    assert set(b.to_dict()) == {"value", "rate", "constant_known", "source", "quantity"}


# ----------------------------------------------------------------------------- empirical
def _data(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= 0.95 / np.max(np.linalg.norm(X, axis=1))
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _excess(theta, X, y, alpha, ref):
    J = Logistic().value(theta, X, y) + 0.5 * alpha * theta @ theta
    return J - ref.objective


def test_known_constant_bounds_hold_per_draw():
    """The known-constant bounds are expectations of per-draw inequalities; check
    those inequalities on every draw (noise rebuilt from the seed), for AMP and
    Gaussian objective perturbation, and that the bound's value is their mean."""
    from dperm.algorithms import objective_perturbation as op

    X, y = _data()
    n, d = X.shape
    kw = dict(n=n, d=d, epsilon=1.0, delta=1e-5, lipschitz=1.0, smoothness=0.25)

    # AMP: J(θ_a) − J* ≤ ‖b₁‖²/(2α) + γ(γ + ‖b₁‖)/α  and
    #      J(θ_a + b₂) − J(θ_a) ≤ ⟨∇J(θ_a), b₂⟩ + (β + α)/2 ‖b₂‖²
    per_draw = []
    for s in range(20):
        r = amp.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, random_state=s)
        dg = r.diagnostics
        a, g = dg["alpha"], dg["gamma"]
        rng = np.random.default_rng(s)
        b1 = dg["sigma_objective"] * rng.standard_normal(d)
        b2 = dg["sigma_output"] * rng.standard_normal(d)
        ref = minimize(Logistic(), X, y, l2=a, tol=1e-12)
        theta_a = r.theta - b2
        nb1 = np.linalg.norm(b1)
        assert _excess(theta_a, X, y, a, ref) <= nb1**2 / (2 * a) + g * (g + nb1) / a + 1e-10
        grad = Logistic().gradient(theta_a, X, y) + a * theta_a
        step = _excess(r.theta, X, y, a, ref) - _excess(theta_a, X, y, a, ref)
        assert step <= grad @ b2 + (0.25 + a) / 2 * b2 @ b2 + 1e-10
        per_draw.append(nb1**2)
    cal = amp.calibrate(**kw)
    # E‖b₁‖² = dσ₁² (the bound's main term), checked against the sample (χ²₃ tolerance)
    assert np.mean(per_draw) == pytest.approx(
        d * cal.sigma_objective**2, rel=4 * math.sqrt(2 / (3 * 20))
    )

    # objective perturbation: J(θ_p) − J* ≤ ‖b/n‖²/(2Λ) on every draw (Δ = 0 here)
    alpha = 0.05
    ref = minimize(Logistic(), X, y, l2=alpha, tol=1e-12)
    bound = theoretical_bound("objective", strong_convexity=alpha, **kw)
    for s in range(20):
        r = op.fit(
            Logistic(),
            X,
            y,
            epsilon=1.0,
            delta=1e-5,
            data_norm=1.0,
            alpha=alpha,
            noise="gaussian",
            tol=1e-12,
            random_state=s,
        )
        assert r.diagnostics["extra_l2"] == 0.0
        b = r.diagnostics["noise_scale"] * np.random.default_rng(s).standard_normal(d) / n
        assert _excess(r.theta, X, y, alpha, ref) <= (b @ b) / (2 * alpha) + 1e-10
    sigma = r.diagnostics["noise_scale"] / n
    assert bound.value == pytest.approx(d * sigma**2 / (2 * alpha))


# ----------------------------------------------------------------------------- errors
def test_errors():
    with pytest.raises(UnknownNameError, match="frank-wolfe"):
        theoretical_bound("sgd", **BASE)
    with pytest.raises(InvalidPrivacyParameter, match="radius"):
        theoretical_bound("dp-gd", **BASE)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        theoretical_bound("dp-gd", **dict(BASE, delta=0.0), radius=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="strong_convexity"):
        theoretical_bound("output", **BASE, smoothness=0.25)
    with pytest.raises(InvalidPrivacyParameter, match="smoothness"):
        theoretical_bound("amp", **BASE)
    with pytest.raises(InvalidPrivacyParameter):
        theoretical_bound("amp-nt", **BASE, smoothness=0.25, gamma=1e-3)
    with pytest.raises(InvalidPrivacyParameter, match="n_candidates"):
        theoretical_bound("exponential", **BASE, loss_range=1.0)
    for bad in (
        dict(epsilon=0.0),
        dict(epsilon=float("nan")),
        dict(n=0),
        dict(d=-1),
        dict(delta=1.0),
        dict(lipschitz=-1.0),
    ):
        with pytest.raises(InvalidPrivacyParameter):
            theoretical_bound("dp-gd", **dict(BASE, radius=1.0, **bad))
    with pytest.raises(InvalidPrivacyParameter):
        theoretical_bound("dp-gd", **BASE, radius=-1.0)


def test_reexported_from_utility():
    utility = pytest.importorskip("dperm.utility")
    if not hasattr(utility, "theoretical_bound"):
        pytest.skip("dperm.utility has not re-exported theoretical_bound yet")
    assert utility.theoretical_bound is theoretical_bound


def test_cli_reports_the_bound_next_to_the_measurement():
    from dperm.cli import run_fit
    from dperm.theory import bound_for_estimator

    for mech in ("amp", "amp-nt", "bolt-on", "objective"):
        out = run_fit(mechanism=mech, epsilon=1.0, seed=0)
        assert "theoretical_bound" in out and "excess_empirical_risk" in out
        assert math.isfinite(out["theoretical_bound"]) and out["theoretical_bound"] > 0
        detail = out["theoretical_bound_detail"]
        assert detail["value"] == out["theoretical_bound"] and detail["source"]
    assert bound_for_estimator(object(), 10) is None  # no mechanism → no bound
