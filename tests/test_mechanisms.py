"""Noise primitives: distributions (statistical tests with derived tolerances),
events, the exponential mechanism, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from dperm.accounting.events import Gaussian, Laplace, PureEpsilon
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter
from dperm.mechanisms import (
    exponential_mechanism,
    exponential_mechanism_event,
    exponential_mechanism_log_probabilities,
    gamma_norm_event,
    gamma_norm_mechanism,
    gamma_norm_noise,
    gaussian_event,
    gaussian_mechanism,
    gaussian_noise,
    laplace_event,
    laplace_mechanism,
    laplace_noise,
)

# Every statistical test uses a fixed seed, so it is deterministic; the
# significance level says how unlucky a seed would have to be to fail it.
P_MIN = 1e-3


# ----------------------------------------------------------------------------- Gamma norm
@pytest.fixture(scope="module")
def gamma_draws():
    d, eps, sens = 5, 0.7, 1.3
    rng = np.random.default_rng(2024)
    draws = np.array([gamma_norm_noise(d, eps, sens, rng) for _ in range(20_000)])
    return d, eps, sens, draws


def test_gamma_norm_radius_is_gamma_d_scale(gamma_draws):
    d, eps, sens, b = gamma_draws
    norms = np.linalg.norm(b, axis=1)
    res = stats.kstest(norms, stats.gamma(a=d, scale=sens / eps).cdf)
    assert res.pvalue > P_MIN
    # E‖b‖ = dΔ/ε, sd = √d Δ/ε: tolerance 5 standard errors
    n = norms.size
    assert abs(norms.mean() - d * sens / eps) < 5 * math.sqrt(d) * sens / eps / math.sqrt(n)


def test_gamma_norm_direction_uniform_on_sphere(gamma_draws):
    d, _, _, b = gamma_draws
    u = b / np.linalg.norm(b, axis=1, keepdims=True)
    # one coordinate of a uniform point on S^{d-1}: (u₁ + 1)/2 ~ Beta((d−1)/2, (d−1)/2)
    a = (d - 1) / 2
    for j in range(d):
        assert stats.kstest((u[:, j] + 1) / 2, stats.beta(a, a).cdf).pvalue > P_MIN / d
    # mean direction: E‖ū‖² = 1/N, so P(‖ū‖ > 5/√N) ≤ 1/25 (Markov)
    assert np.linalg.norm(u.mean(axis=0)) < 5 / math.sqrt(u.shape[0])
    # independence of radius and direction: correlation of ‖b‖ and u₁ ≈ 0 (se 1/√N)
    r = np.corrcoef(np.linalg.norm(b, axis=1), u[:, 0])[0, 1]
    assert abs(r) < 5 / math.sqrt(u.shape[0])


def test_gamma_norm_density_ratio_is_bounded_by_epsilon():
    # ν(b) ∝ exp(−ε‖b‖/Δ): the log-ratio at shifts of norm ≤ Δ is ≤ ε (triangle inequality)
    eps, sens = 0.9, 2.0
    rng = np.random.default_rng(1)
    b = np.array([gamma_norm_noise(4, eps, sens, rng) for _ in range(200)])
    shift = rng.normal(size=(200, 4))
    shift *= sens / np.linalg.norm(shift, axis=1, keepdims=True)
    log_ratio = eps / sens * (np.linalg.norm(b + shift, axis=1) - np.linalg.norm(b, axis=1))
    assert np.all(np.abs(log_ratio) <= eps + 1e-12)


def test_gamma_norm_dimension_one_is_symmetric_laplace():
    # d = 1: density ∝ exp(−ε|b|/Δ) is the Laplace law with scale Δ/ε
    rng = np.random.default_rng(3)
    b = np.array([gamma_norm_noise(1, 2.0, 1.0, rng)[0] for _ in range(20_000)])
    assert stats.kstest(b, stats.laplace(scale=0.5).cdf).pvalue > P_MIN


def test_gamma_norm_mechanism_and_event():
    out, ev = gamma_norm_mechanism([1.0, 2.0, 3.0], sensitivity=1.0, epsilon=0.5, rng=0)
    assert out.shape == (3,) and ev == PureEpsilon(0.5) == gamma_norm_event(0.5)
    # reproducible from the seed
    out2, _ = gamma_norm_mechanism([1.0, 2.0, 3.0], sensitivity=1.0, epsilon=0.5, rng=0)
    np.testing.assert_array_equal(out, out2)


@pytest.mark.parametrize(
    ("d", "eps", "sens", "exc"),
    [
        (0, 1.0, 1.0, InvalidPrivacyParameter),
        (3, 0.0, 1.0, InvalidPrivacyParameter),
        (3, float("nan"), 1.0, InvalidPrivacyParameter),
        (3, "1", 1.0, InvalidPrivacyParameter),
        (3, 1.0, -1.0, InvalidPrivacyParameter),
        (3, 1.0, float("inf"), InvalidPrivacyParameter),
    ],
)
def test_gamma_norm_bad_input(d, eps, sens, exc):
    with pytest.raises(exc):
        gamma_norm_noise(d, eps, sens, np.random.default_rng(0))


# ----------------------------------------------------------------------------- Gaussian
def test_gaussian_noise_has_the_claimed_sigma():
    sigma, n = 2.5, 200_000
    z = gaussian_noise(n, sigma, np.random.default_rng(7))
    # sample variance: se = σ²√(2/(n−1)); mean: se = σ/√n; 5 standard errors each
    assert abs(z.var(ddof=1) - sigma**2) < 5 * sigma**2 * math.sqrt(2 / (n - 1))
    assert abs(z.mean()) < 5 * sigma / math.sqrt(n)
    assert stats.kstest(z, stats.norm(scale=sigma).cdf).pvalue > P_MIN


def test_gaussian_mechanism_event_and_shape():
    v = np.arange(6.0).reshape(2, 3)
    out, ev = gaussian_mechanism(v, sensitivity=2.0, noise_multiplier=1.5, rng=1)
    assert out.shape == (2, 3) and ev == Gaussian(1.5)
    assert gaussian_event(3.0, 2.0) == Gaussian(1.5)
    zero, _ = gaussian_mechanism(v, sensitivity=1.0, noise_multiplier=0.0, rng=1)
    np.testing.assert_array_equal(zero, v)


@pytest.mark.parametrize("sigma", [-1.0, float("nan"), float("inf"), "2", None])
def test_gaussian_bad_sigma(sigma):
    with pytest.raises(InvalidPrivacyParameter):
        gaussian_noise(3, sigma, 0)


@pytest.mark.parametrize("shape", [-1, (2, -3), "abc", 2.5, (1.5,)])
def test_gaussian_bad_shape(shape):
    with pytest.raises(InvalidDataError):
        gaussian_noise(shape, 1.0, 0)


def test_mechanism_value_must_be_finite():
    with pytest.raises(InvalidDataError):
        gaussian_mechanism([1.0, np.nan], sensitivity=1.0, noise_multiplier=1.0, rng=0)
    with pytest.raises(InvalidDataError):
        laplace_mechanism(["a"], sensitivity=1.0, epsilon=1.0, rng=0)


# ----------------------------------------------------------------------------- Laplace
def test_laplace_noise_scale():
    b, n = 0.8, 200_000
    z = laplace_noise(n, b, np.random.default_rng(11))
    # E|Z| = b with sd b: 5 standard errors
    assert abs(np.abs(z).mean() - b) < 5 * b / math.sqrt(n)
    assert stats.kstest(z, stats.laplace(scale=b).cdf).pvalue > P_MIN


def test_laplace_mechanism_event():
    out, ev = laplace_mechanism([0.0, 1.0], sensitivity=2.0, epsilon=0.5, rng=0)
    assert out.shape == (2,)
    assert ev == Laplace(2.0) == laplace_event(0.5)  # noise_multiplier = 1/ε


# ----------------------------------------------------------------------------- exponential
def test_exponential_mechanism_log_probabilities_closed_form():
    u = np.array([0.0, 1.0, 3.0, -2.0])
    eps, sens = 1.2, 0.5
    expected = eps * u / (2 * sens) - logsumexp(eps * u / (2 * sens))
    got = exponential_mechanism_log_probabilities(u, epsilon=eps, sensitivity=sens)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    mono = exponential_mechanism_log_probabilities(u, epsilon=eps, sensitivity=sens, monotonic=True)
    np.testing.assert_allclose(mono, eps * u / sens - logsumexp(eps * u / sens), rtol=1e-12)


def test_exponential_mechanism_samples_the_softmax():
    u = np.array([0.0, 1.0, 3.0, -2.0])
    eps, sens, n = 1.2, 0.5, 40_000
    rng = np.random.default_rng(5)
    picks = np.array(
        [exponential_mechanism(u, epsilon=eps, sensitivity=sens, rng=rng) for _ in range(n)]
    )
    p = np.exp(exponential_mechanism_log_probabilities(u, epsilon=eps, sensitivity=sens))
    counts = np.bincount(picks, minlength=u.size)
    keep = p * n >= 5  # chi-square validity
    chi2 = stats.chisquare(counts[keep], p[keep] / p[keep].sum() * counts[keep].sum())
    assert chi2.pvalue > P_MIN


def test_exponential_mechanism_privacy_ratio():
    # neighbouring score vectors differ by ≤ Δ in every entry ⇒ log-prob ratio ≤ ε
    rng = np.random.default_rng(0)
    eps, sens = 0.7, 1.0
    for _ in range(50):
        u = rng.normal(size=6) * 3
        v = u + rng.uniform(-sens, sens, size=6)
        lp = exponential_mechanism_log_probabilities(u, epsilon=eps, sensitivity=sens)
        lq = exponential_mechanism_log_probabilities(v, epsilon=eps, sensitivity=sens)
        assert np.max(np.abs(lp - lq)) <= eps + 1e-12


def test_exponential_mechanism_is_stable_and_skips_minus_inf():
    u = np.array([1e300, -np.inf, 1e300 - 1e290, -1e300])
    rng = np.random.default_rng(0)
    picks = {exponential_mechanism(u, epsilon=1.0, sensitivity=1.0, rng=rng) for _ in range(200)}
    assert picks == {0}  # overwhelmingly the best, and never the −inf one; no overflow
    lp = exponential_mechanism_log_probabilities(u, epsilon=1.0, sensitivity=1.0)
    assert lp[1] == -np.inf and np.isfinite(lp[0])
    assert exponential_mechanism_event(0.3) == PureEpsilon(0.3)


@pytest.mark.parametrize(
    "scores", [[], [[1.0, 2.0]], [1.0, np.nan], [1.0, np.inf], [-np.inf, -np.inf], ["a", "b"]]
)
def test_exponential_mechanism_bad_scores(scores):
    with pytest.raises(InvalidDataError):
        exponential_mechanism(scores, epsilon=1.0, sensitivity=1.0, rng=0)


@pytest.mark.parametrize(("eps", "sens"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), ("x", 1.0)])
def test_exponential_mechanism_bad_parameters(eps, sens):
    with pytest.raises(InvalidPrivacyParameter):
        exponential_mechanism([1.0, 2.0], epsilon=eps, sensitivity=sens, rng=0)


def test_rng_must_be_a_generator_or_seed():
    with pytest.raises(InvalidPrivacyParameter):
        gaussian_noise(2, 1.0, np.random.RandomState(0))
