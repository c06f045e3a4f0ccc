"""Gaussian mechanism calibration (classical and analytic)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dperm.accounting import (
    Gaussian,
    analytic_gaussian_noise_multiplier,
    classical_gaussian_noise_multiplier,
    epsilon_spent,
    gaussian_delta,
    gaussian_epsilon,
)
from dperm.exceptions import InvalidPrivacyParameter


def test_gaussian_delta_matches_balle_wang_formula_with_plain_cdf():
    for sigma, eps in [(1.0, 0.5), (2.0, 1.0), (0.5, 3.0), (5.0, 0.1)]:
        want = norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * norm.cdf(
            -1 / (2 * sigma) - eps * sigma
        )
        assert gaussian_delta(sigma, eps) == pytest.approx(want, rel=1e-10)


def test_gaussian_delta_monte_carlo_privacy_loss(rng):
    # δ(ε) = P[L > ε] − e^ε P[L' > ε] with the privacy loss L ~ N(μ, 2μ), μ = 1/(2σ²)
    sigma, eps, n = 1.3, 0.7, 2_000_000
    mu = 1 / (2 * sigma**2)
    loss_p = rng.normal(mu, math.sqrt(2 * mu), n)
    loss_q = rng.normal(-mu, math.sqrt(2 * mu), n)
    est = np.mean(loss_p > eps) - math.exp(eps) * np.mean(loss_q > eps)
    se = math.sqrt((np.var(loss_p > eps) + math.exp(2 * eps) * np.var(loss_q > eps)) / n)
    assert abs(est - gaussian_delta(sigma, eps)) < 5 * se


def test_gaussian_delta_edges():
    assert gaussian_delta(0.0, 1.0) == 1.0
    assert gaussian_delta(1.0, math.inf) == 0.0
    assert gaussian_delta(1.0, 0.0) == pytest.approx(2 * norm.cdf(0.5) - 1)
    assert gaussian_delta(1e4, 1.0) == 0.0 or gaussian_delta(1e4, 1.0) < 1e-300


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(0.1, 1e-5), (0.5, 1e-6), (1.0, 1e-5), (4.0, 1e-10), (20.0, 1e-3)]
)
def test_analytic_gaussian_is_conservative_and_tight(epsilon, delta):
    sigma = analytic_gaussian_noise_multiplier(epsilon, delta)
    assert gaussian_delta(sigma, epsilon) <= delta
    assert gaussian_delta(sigma * (1 - 1e-9), epsilon) > delta
    assert gaussian_epsilon(sigma, delta) <= epsilon * (1 + 1e-9)
    if epsilon < 1:
        assert sigma < classical_gaussian_noise_multiplier(epsilon, delta)


def test_classical_gaussian_formula_and_range():
    assert classical_gaussian_noise_multiplier(0.5, 1e-5) == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) / 0.5
    )
    for eps in (1.0, 2.5):
        with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
            classical_gaussian_noise_multiplier(eps, 1e-5)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        classical_gaussian_noise_multiplier(0.5, 0.0)


def test_analytic_gaussian_bad_input():
    for eps, delta in [(0.0, 1e-5), (-1, 1e-5), (math.nan, 1e-5), (math.inf, 1e-5)]:
        with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
            analytic_gaussian_noise_multiplier(eps, delta)
    for delta in (0.0, 1.0, -0.1, math.nan):
        with pytest.raises(InvalidPrivacyParameter, match="delta"):
            analytic_gaussian_noise_multiplier(1.0, delta)


def test_pld_single_gaussian_agrees_with_exact_profile():
    sigma = analytic_gaussian_noise_multiplier(1.0, 1e-5)
    eps_pld = epsilon_spent(Gaussian(sigma), 1e-5, accountant="pld")
    assert eps_pld == pytest.approx(1.0, abs=2e-3)
    assert epsilon_spent(Gaussian(sigma), 1e-5, accountant="rdp") > eps_pld
