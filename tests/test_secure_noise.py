"""Floating-point-safe noise: the snapping mechanism (Mironov 2012) and the exact
discrete Gaussian (Canonne, Kamath, Steinke 2020).

Properties tested: every release lies on its power-of-two grid; the output
distributions match their closed forms (χ² on exact probabilities); the
samplers are exact (Bernoulli(exp(−γ)), discrete Laplace, discrete Gaussian
against their pmfs); the ε adjustment of Mironov's theorem and the zCDP → (ε, δ)
conversion of CKS hold; secure_release composes with output perturbation.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dperm.accounting.events import EpsilonDelta, PureEpsilon
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError
from dperm.mechanisms.discrete_gaussian import (
    discrete_gaussian_delta,
    discrete_gaussian_mechanism,
    discrete_gaussian_sigma,
    sample_bernoulli_exp,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    secure_release,
    zcdp_delta,
)
from dperm.mechanisms.snapping import (
    SNAPPING_ETA,
    _snap,
    next_power_of_two,
    snap_to_grid,
    snapping_epsilon,
    snapping_mechanism,
    snapping_parameters,
    uniform_double,
)

P_MIN = 1e-3


def _is_multiple(values, grid) -> bool:
    q = np.asarray(values, dtype=float) / grid
    return bool(np.all(q == np.round(q)))


def _chi2_against_pmf(samples, support, pmf):
    """χ² goodness of fit on the support points with expected count ≥ 5 (the
    rest pooled)."""
    m = samples.size
    counts = np.array([np.sum(samples == v) for v in support], dtype=float)
    expected = m * np.asarray(pmf)
    keep = expected >= 5
    obs = np.append(counts[keep], m - counts[keep].sum())
    exp = np.append(expected[keep], m - expected[keep].sum())
    if exp[-1] < 5:  # nothing worth pooling
        obs, exp = obs[:-1], exp[:-1]
        exp *= obs.sum() / exp.sum()
    return stats.chisquare(obs, exp).pvalue


# ============================================================================ snapping
def test_next_power_of_two_is_exact():
    assert next_power_of_two(1.0) == 1.0
    assert next_power_of_two(1.0000001) == 2.0
    assert next_power_of_two(0.3) == 0.5
    assert next_power_of_two(2.0**-30) == 2.0**-30
    assert next_power_of_two(3.0 * 2.0**40) == 2.0**42
    with pytest.raises(InvalidPrivacyParameter):
        next_power_of_two(0.0)


def test_snap_to_grid_rounds_to_nearest_multiple():
    np.testing.assert_array_equal(
        snap_to_grid([0.24, 0.26, -0.76, 3.0], 0.5), [0.0, 0.5, -1.0, 3.0]
    )
    with pytest.raises(InvalidPrivacyParameter, match="power of two"):
        snap_to_grid([1.0], 0.3)


def test_uniform_double_is_uniform_and_fills_the_low_order_bits():
    u = uniform_double(200_000, np.random.default_rng(1))
    assert np.all((u > 0) & (u < 1))
    assert stats.kstest(u, "uniform").pvalue > P_MIN
    # Mironov's U*: in the binade [2^-12, 2^-11) the last mantissa bit is a fair coin,
    # whereas numpy's random() (multiples of 2^-53) always has it 0 there.
    small = uniform_double(2_000_000, np.random.default_rng(2))
    small = small[(small >= 2.0**-12) & (small < 2.0**-11)]
    mant = (small * 2.0**64).astype(np.uint64)  # exact integers: the binade's spacing is 2^-64
    last_bit = mant & np.uint64(1)
    k = int(last_bit.sum())
    assert abs(k - small.size / 2) <= 5 * math.sqrt(small.size / 4)
    naive = np.random.default_rng(3).random(2_000_000)
    naive = naive[(naive >= 2.0**-12) & (naive < 2.0**-11)]
    assert np.all((naive * 2.0**64).astype(np.uint64) & np.uint64(2**11 - 1) == 0)


def test_snapping_epsilon_adjustment_follows_mironovs_theorem():
    # ε′ = (1 + 12 B η)/λ + 2η; the simplified form of Theorem 1 (η = 2^-53) is
    # 1/λ + 2^-49 B/λ, which our η = 2^-52 version dominates up to the 2η term
    lam, B = 3.0, 1000.0
    assert snapping_epsilon(lam, B) == pytest.approx((1 + 12 * B * 2.0**-52) / lam + 2 * 2.0**-52)
    assert snapping_epsilon(lam, B) >= 1 / lam + 2.0**-49 * B / lam * (12 / 16) * 2
    p = snapping_parameters(sensitivity=1.0, epsilon=0.5, bound=1000.0)
    assert p.epsilon <= 0.5 and p.epsilon == pytest.approx(0.5, rel=1e-12)
    assert p.lam > 2.0 and p.lam == pytest.approx(2.0, rel=1e-10)  # λ ≈ 1/ε, rounded up
    assert p.grid == 4.0 == next_power_of_two(p.lam)  # λ is a hair above 2
    assert p.bound % p.grid == 0 and p.bound >= 1000.0
    assert SNAPPING_ETA == 2.0**-52


def test_snapping_parameters_scale_exactly_with_power_of_two_sensitivity():
    p1 = snapping_parameters(sensitivity=1.0, epsilon=1.0, bound=100.0)
    p2 = snapping_parameters(sensitivity=0.7, epsilon=1.0, bound=70.0)  # rounded up to 1.0
    assert p2.unit == 1.0
    p3 = snapping_parameters(sensitivity=0.25, epsilon=1.0, bound=25.0)
    assert p3.unit == 0.25 and p3.grid == p1.grid * 0.25 and p3.lam == pytest.approx(p1.lam / 4)
    pd = snapping_parameters(sensitivity=1.0, epsilon=1.0, bound=100.0, dimension=4)
    assert pd.epsilon_per_coordinate <= 0.25 and pd.epsilon <= 1.0


def test_snapping_refuses_parameters_outside_the_theorem():
    with pytest.raises(InvalidPrivacyParameter, match="λ < B"):
        snapping_parameters(sensitivity=1.0, epsilon=0.01, bound=10.0)  # λ = 100 > B
    with pytest.raises(InvalidPrivacyParameter, match="λ < B"):
        snapping_parameters(sensitivity=1.0, epsilon=1.0, bound=2.0**50)  # B > 2^46 λ
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        snapping_parameters(sensitivity=1.0, epsilon=float("nan"), bound=10.0)
    with pytest.raises(InvalidPrivacyParameter, match="sensitivity"):
        snapping_mechanism(1.0, sensitivity=0.0, epsilon=1.0, bound=10.0)
    with pytest.raises(InvalidDataError, match="NaN"):
        snapping_mechanism([1.0, np.inf], sensitivity=1.0, epsilon=1.0, bound=10.0)
    with pytest.raises(InvalidDataError, match="empty"):
        snapping_mechanism([], sensitivity=1.0, epsilon=1.0, bound=10.0)


def test_snapping_outputs_lie_on_the_grid_and_inside_the_bound():
    rng = np.random.default_rng(4)
    value = rng.uniform(-3, 3, size=200)
    out, event, diag = snapping_mechanism(value, sensitivity=0.3, epsilon=50.0, bound=40.0, rng=rng)
    assert diag["grid"] == next_power_of_two(diag["lam"])
    assert isinstance(event, PureEpsilon) and event.epsilon == 50.0
    assert _is_multiple(out, diag["grid"])
    assert np.all(np.abs(out) <= diag["bound"])
    assert diag["epsilon_spent"] <= 50.0
    # clamping of the input is counted
    _, _, d2 = snapping_mechanism([10.0, 0.0], sensitivity=1.0, epsilon=1.0, bound=5.0, rng=0)
    assert d2["n_clamped"] == 1


@pytest.mark.parametrize("center", [0.0, 1.0, 0.3])
def test_snapping_distribution_is_rounded_laplace(center):
    """P[out = kΛ] = Laplace(center, λ) mass of [(k − ½)Λ, (k + ½)Λ] (inside ±B)."""
    eps, B, m = 1.0, 64.0, 100_000
    p = snapping_parameters(sensitivity=1.0, epsilon=eps, bound=B)
    # m independent scalar releases through the mechanism's own core
    out, _ = _snap(np.full(m, center), p, np.random.default_rng(5))
    assert (
        snapping_mechanism(center, sensitivity=1.0, epsilon=eps, bound=B, rng=1)[2]["grid"]
        == p.grid
    )
    grid, lam = p.grid, p.lam
    ks = np.arange(-12, 13)
    lap = stats.laplace(loc=center, scale=lam)
    pmf = lap.cdf((ks + 0.5) * grid) - lap.cdf((ks - 0.5) * grid)
    assert _chi2_against_pmf(out, ks * grid, pmf) > P_MIN


def test_snapping_neighbouring_outputs_have_likelihood_ratio_at_most_e_eps():
    """Empirical frequencies on f(D) = 0 and f(D′) = 1: for every grid point with
    enough mass, the ratio stays within e^ε up to sampling error."""
    eps, m = 1.0, 200_000
    p = snapping_parameters(sensitivity=1.0, epsilon=eps, bound=32.0)
    a, _ = _snap(np.zeros(m), p, np.random.default_rng(6))
    b, _ = _snap(np.ones(m), p, np.random.default_rng(7))
    support = np.union1d(np.unique(a), np.unique(b))
    ca = np.array([np.sum(a == v) for v in support])
    cb = np.array([np.sum(b == v) for v in support])
    keep = (ca > 2000) & (cb > 2000)
    ratio = np.log(ca[keep] / cb[keep])
    # log of a count ratio with c ≥ 2000 has sd ≤ √(2/2000) ≈ 0.032
    assert np.all(np.abs(ratio) <= eps + 5 * math.sqrt(2 / 2000))


# ============================================================================ exact sampling
@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0, 2.7, Fraction(7, 3)])
def test_bernoulli_exp_is_exact(gamma):
    m = 40_000
    x = sample_bernoulli_exp(gamma, m, np.random.default_rng(8))
    p = math.exp(-float(gamma))
    assert abs(x.sum() - m * p) <= 5 * math.sqrt(m * p * (1 - p)) + 1e-9


@pytest.mark.parametrize("t", [1, 3, 10])
def test_discrete_laplace_pmf(t):
    x = sample_discrete_laplace(t, 40_000, np.random.default_rng(9))
    ks = np.arange(-12 * t, 12 * t + 1)
    w = np.exp(-np.abs(ks) / t)
    assert _chi2_against_pmf(x, ks, w / w.sum()) > P_MIN


@pytest.mark.parametrize("sigma2", [0.5, 2.5, Fraction(400, 3), 1e4])
def test_discrete_gaussian_pmf(sigma2):
    x = sample_discrete_gaussian(sigma2, 40_000, np.random.default_rng(10))
    assert x.dtype == np.int64
    s = math.sqrt(float(sigma2))
    ks = np.arange(-int(12 * s) - 2, int(12 * s) + 3)
    w = np.exp(-(ks.astype(float) ** 2) / (2 * float(sigma2)))
    assert _chi2_against_pmf(x, ks, w / w.sum()) > P_MIN


def test_samplers_reject_bad_parameters():
    with pytest.raises(InvalidPrivacyParameter):
        sample_discrete_gaussian(0.0, 3)
    with pytest.raises(InvalidPrivacyParameter):
        sample_discrete_gaussian(float("nan"), 3)
    with pytest.raises(InvalidPrivacyParameter):
        sample_discrete_laplace(0, 3)
    with pytest.raises(InvalidPrivacyParameter):
        sample_bernoulli_exp(-1.0, 3)
    with pytest.raises(InvalidDataError):
        sample_discrete_gaussian(1.0, -1)


# ============================================================================ DG privacy
def test_zcdp_delta_matches_its_definition_and_known_bounds():
    rho, eps = 0.05, 1.0
    d = zcdp_delta(rho, eps)
    # the minimum over α of CKS Corollary 13's expression, checked on a grid
    alphas = np.linspace(1.001, 60, 20_000)
    vals = np.exp((alphas - 1) * (alphas * rho - eps) + alphas * np.log1p(-1 / alphas)) / (
        alphas - 1
    )
    assert d == pytest.approx(vals.min(), rel=1e-4)
    # tighter than Bun & Steinke 2016, Proposition 1.3: δ ≤ exp(−(ε − ρ)²/(4ρ))
    assert d <= math.exp(-((eps - rho) ** 2) / (4 * rho))
    assert zcdp_delta(0.0, 1.0) == 0.0
    assert zcdp_delta(rho, 2.0) < d  # decreasing in ε


def test_discrete_gaussian_sigma_round_trip():
    for eps, delta in [(0.5, 1e-6), (1.0, 1e-5), (4.0, 1e-3)]:
        s = discrete_gaussian_sigma(eps, delta, sensitivity=3.0)
        assert discrete_gaussian_delta(s, eps, 3.0) <= delta
        assert discrete_gaussian_delta(0.999 * s, eps, 3.0) > delta
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        discrete_gaussian_sigma(1.0, 0.0)


def test_discrete_gaussian_mechanism_on_grid_and_noise_scale():
    value = np.array([0.123456789, -2.5, 7.0])
    rng = np.random.default_rng(11)
    outs = []
    for _ in range(4000):
        out, event, diag = discrete_gaussian_mechanism(
            value, sensitivity=0.1, epsilon=1.0, delta=1e-5, rng=rng
        )
        outs.append(out)
    outs = np.array(outs)
    g = diag["grid"]
    assert g == next_power_of_two(g) and g <= 0.1 / (128 * math.sqrt(3))
    assert _is_multiple(outs, g)
    assert isinstance(event, EpsilonDelta) and event.epsilon == 1.0 and event.delta == 1e-5
    # sensitivity in grid units, rounded up: Δ/g + √d
    assert diag["sensitivity_grid"] == pytest.approx(0.1 / g + math.sqrt(3))
    sigma = diag["sigma"]
    noise = outs - np.round(value / g) * g
    # a discrete Gaussian with σ ≫ 1 grid step has variance σ² (to 1e-10 relative)
    n = noise.size
    assert abs(noise.var() - sigma**2) <= 5 * sigma**2 * math.sqrt(2 / n)
    assert abs(noise.mean()) <= 5 * sigma / math.sqrt(n)
    # the noise parameter meets (ε, δ) through CKS Corollary 13
    assert discrete_gaussian_delta(diag["sigma_grid"], 1.0, diag["sensitivity_grid"]) <= 1e-5


def test_discrete_gaussian_mechanism_bad_input():
    with pytest.raises(InvalidPrivacyParameter, match="power of two"):
        discrete_gaussian_mechanism([1.0], sensitivity=1.0, epsilon=1.0, delta=1e-5, grid=0.3)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        discrete_gaussian_mechanism([1.0], sensitivity=1.0, epsilon=1.0, delta=0.0)
    with pytest.raises(InvalidDataError, match="NaN"):
        discrete_gaussian_mechanism([np.nan], sensitivity=1.0, epsilon=1.0, delta=1e-5)
    with pytest.raises(InvalidDataError, match="too fine"):
        discrete_gaussian_mechanism([1e6], sensitivity=1.0, epsilon=1.0, delta=1e-5, grid=2.0**-40)


# ============================================================================ secure_release
def test_secure_release_dispatch_and_validation():
    r = secure_release([0.5, 1.5], sensitivity=1.0, epsilon=1.0, delta=1e-6, random_state=0)
    assert r.method == "discrete_gaussian" and _is_multiple(r.value, r.grid)
    r2 = secure_release([0.5], sensitivity=1.0, epsilon=1.0, bound=10.0, random_state=0)
    assert r2.method == "snapping" and isinstance(r2.event, PureEpsilon)
    assert _is_multiple(r2.value, r2.grid)
    with pytest.raises(InvalidPrivacyParameter, match="bound"):
        secure_release([0.5], sensitivity=1.0, epsilon=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="grid"):
        secure_release([0.5], sensitivity=1.0, epsilon=1.0, bound=10.0, grid=0.5)
    with pytest.raises(UnknownNameError, match="method"):
        secure_release([0.5], sensitivity=1.0, epsilon=1.0, delta=1e-6, method="gauss")


def test_secure_release_composes_with_output_perturbation(rng):
    """θ̂ exact minimizer + secure noise for Δ₂ = 2L/(nΛ): the release is on the
    grid and its noise has the calibrated scale."""
    op = pytest.importorskip("dperm.algorithms.output_perturbation")
    from dperm.losses import Logistic
    from dperm.solvers import minimize

    n, d, lam = 60, 3, 0.2
    X = rng.normal(size=(n, d))
    X *= 0.999 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    theta_hat = minimize(Logistic(), X, y, l2=lam, tol=1e-12).theta
    sens = op.output_sensitivity(n, Logistic().lipschitz(1.0), lam)
    assert sens == pytest.approx(2 / (n * lam))
    gen = np.random.default_rng(12)
    rel = [
        secure_release(theta_hat, sensitivity=sens, epsilon=1.0, delta=1e-5, random_state=gen)
        for _ in range(2000)
    ]
    vals = np.array([r.value for r in rel])
    assert _is_multiple(vals, rel[0].grid)
    sigma = rel[0].diagnostics["sigma"]
    q = np.sum((vals - theta_hat) ** 2, axis=1) / sigma**2
    assert stats.kstest(q, stats.chi2(d).cdf).pvalue > P_MIN
