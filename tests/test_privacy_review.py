"""Independent checks from the privacy-calibration review.

Each test recomputes a privacy-critical quantity by a route that does not share
code with the implementation: worst-case neighbouring pairs run through the
non-private part of an algorithm (measured sensitivity ≤ claimed sensitivity),
numerical integration of a Rényi divergence, and the closed-form inequalities
the noise calibrations are derived from.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dperm.accounting import rdp as R
from dperm.algorithms import amp, bolt_on, objective_perturbation, output_perturbation
from dperm.losses import HuberSVM, Logistic
from dperm.solvers import minimize


def _neighbours(rng, n, d):
    """A dataset with rows in the unit ball and a replace-one neighbour whose
    replaced row points elsewhere and carries the opposite label."""
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = rng.choice([-1.0, 1.0], n)
    X2, y2 = X.copy(), y.copy()
    i = int(rng.integers(n))
    v = rng.normal(size=d)
    X2[i] = v / np.linalg.norm(v)
    y2[i] = -y[i]
    return X, y, X2, y2


def test_bolt_on_measured_sensitivity_within_claim():
    # same permutations (same seed, same n) on replace-one neighbours: the last
    # iterates differ by at most the claimed Δ₂ of either variant
    rng = np.random.default_rng(1)
    worst = {"convex": 0.0, "strongly_convex": 0.0}
    for trial in range(120):
        n, d = int(rng.integers(5, 30)), int(rng.integers(1, 4))
        X, y, X2, y2 = _neighbours(rng, n, d)
        loss = HuberSVM(h=0.1) if trial % 2 else Logistic()
        b, k = int(rng.integers(1, n + 1)), int(rng.integers(1, 4))
        beta = loss.smoothness(1.0)
        seed = int(rng.integers(1 << 30))
        eta = float(rng.uniform(0.1, 2.0)) / beta  # convex: any η ≤ 2/β
        lam = float(rng.uniform(0.01, 2.0))
        cap = 1.0 / (beta + lam)
        runs = {
            "convex": (eta, 0.0, bolt_on.convex_sensitivity(1.0, eta, k, b)),
            "strongly_convex": (
                lambda t, c=cap, la=lam: min(c, 1.0 / (la * t)),
                lam,
                bolt_on.strongly_convex_sensitivity(1.0, lam, n),
            ),
        }
        for name, (step, alpha, sens) in runs.items():
            kw = dict(passes=k, batch_size=b, step_size=step, alpha=alpha, random_state=seed)
            t1 = bolt_on.permutation_sgd(loss, X, y, **kw)
            t2 = bolt_on.permutation_sgd(loss, X2, y2, **kw)
            worst[name] = max(worst[name], float(np.linalg.norm(t1 - t2)) / sens)
    assert worst["convex"] <= 1.0 + 1e-9
    assert worst["strongly_convex"] <= 1.0 + 1e-9


def test_output_perturbation_measured_sensitivity_within_claim():
    rng = np.random.default_rng(2)
    for _ in range(10):
        n, d = 40, 3
        X, y, X2, y2 = _neighbours(rng, n, d)
        lam = float(rng.uniform(0.01, 0.5))
        t1 = minimize(Logistic(), X, y, l2=lam, tol=1e-12).theta
        t2 = minimize(Logistic(), X2, y2, l2=lam, tol=1e-12).theta
        sens = output_perturbation.output_sensitivity(n, Logistic().lipschitz(1.0), lam)
        assert np.linalg.norm(t1 - t2) <= sens * (1 + 1e-6)


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.1), (0.1, 0.8), (0.3, 3.0)])
def test_poisson_sampled_gaussian_rdp_not_below_numerical_integral(q, sigma):
    # A_α = E_{z~N(0,σ²)}[(1 − q + q·e^{(2z−1)/(2σ²)})^α], ρ(α) = log A_α/(α − 1)
    mp.mp.dps = 40
    orders = [1.5, 2.0, 2.5, 4.0, 10.5]

    def exact(a):
        def f(z):
            return mp.npdf(z, 0, sigma) * (1 - q + q * mp.e ** ((2 * z - 1) / (2 * sigma**2))) ** a

        val = mp.quad(f, [-mp.inf, -10 * sigma, 0, 0.5, 10 * sigma, 40 * sigma, mp.inf])
        return float(mp.log(val) / (a - 1))

    got = R.rdp_poisson_subsampled_gaussian(q, sigma, orders)
    for a, g in zip(orders, got, strict=True):
        e = exact(a)
        assert g >= e * (1 - 1e-9)
        assert g <= e * (1 + 1e-6) + 1e-15


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 5.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_gaussian_objective_noise_terms_cost_their_share(eps, delta):
    # Kifer et al. form: with ζ = 2L, t² = 2 log(2/δ) (χ²₂ tail δ/2), the noise term
    # u·t + u²/2 with u = ζ/σ is at most ε/2
    sigma, _ = objective_perturbation.kifer_calibration(eps, delta, 100, 0.1, 0.25, 1.0)
    u, t = 2.0 / sigma, math.sqrt(2.0 * math.log(2.0 / delta))
    assert u * t + u * u / 2 <= eps / 2 * (1 + 1e-12)
    assert math.exp(-t * t / 2) <= delta / 2 * (1 + 1e-12)
    # AMP: Δ·t/σ₁ + Δ²/(2σ₁²) ≤ ε₃ with P(χ²₂ > t²) = δ₁
    s1 = amp.objective_noise_scale(0.02, eps, delta)
    t1 = math.sqrt(2.0 * math.log(1.0 / delta))
    u1 = 0.02 / s1
    assert u1 * t1 + u1 * u1 / 2 <= eps * (1 + 1e-12)


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0])
@pytest.mark.parametrize(
    ("n", "alpha", "beta"), [(10, 0.0, 0.25), (1000, 1e-3, 0.25), (50, 1.0, 2.0)]
)
def test_chaudhuri_split_adds_up(eps, n, alpha, beta):
    # Jacobian (1 + β/(nΛ_tot))² times the noise e^{ε'} never exceeds e^ε
    eps_noise, extra = objective_perturbation.chaudhuri_calibration(eps, n, alpha, beta)
    r = beta / (n * (alpha + extra))
    assert eps_noise > 0
    assert 2.0 * math.log1p(r) + eps_noise <= eps * (1 + 1e-12)
