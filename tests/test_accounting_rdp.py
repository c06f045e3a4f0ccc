"""RDP accountant: closed forms, exactness against numerical integration, and
agreement with dp-accounting's RdpAccountant."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dperm.accounting import (
    DEFAULT_ORDERS,
    RdpAccountant,
    compute_rdp,
    rdp_to_delta,
    rdp_to_epsilon,
)
from dperm.accounting import events as ev
from dperm.accounting.rdp import (
    rdp_laplace,
    rdp_poisson_subsampled_gaussian,
    rdp_pure_epsilon,
    rdp_sampled_without_replacement_gaussian,
)
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError

#: add/remove-one: the relation of the classical Poisson-subsampled analysis
AR = "add-remove"


ORDERS = np.array(DEFAULT_ORDERS)


# ---------------------------------------------------------------- closed forms
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.5])
def test_gaussian_rdp_is_alpha_over_two_sigma_squared(sigma):
    rdp = compute_rdp(ev.Gaussian(sigma))
    np.testing.assert_allclose(rdp, ORDERS / (2 * sigma**2), rtol=1e-15)


def test_k_fold_composition_is_k_times_one_step():
    step = ev.PoissonSampled(0.02, ev.Gaussian(1.3, neighbouring=AR))
    one = compute_rdp(step)
    np.testing.assert_allclose(compute_rdp(ev.SelfComposed(step, 777)), 777 * one, rtol=1e-14)
    acc = RdpAccountant(neighbouring=AR)
    for _ in range(5):
        acc.compose(step)
    acc.compose(step, count=2)
    np.testing.assert_allclose(acc.rdp, 7 * one, rtol=1e-14)
    np.testing.assert_allclose(compute_rdp(ev.Composed((step, step, step))), 3 * one, rtol=1e-14)


def test_sampling_rate_one_reduces_to_gaussian():
    for sigma in (0.7, 2.0):
        np.testing.assert_allclose(
            compute_rdp(ev.PoissonSampled(1.0, ev.Gaussian(sigma, neighbouring=AR))),
            compute_rdp(ev.Gaussian(sigma)),
            rtol=1e-15,
        )
        np.testing.assert_allclose(
            compute_rdp(ev.SampledWithoutReplacement(50, 50, ev.Gaussian(sigma))),
            compute_rdp(ev.Gaussian(sigma)),
            rtol=1e-15,
        )


def test_sampling_rate_zero_and_noop_cost_nothing():
    assert np.all(compute_rdp(ev.PoissonSampled(0.0, ev.Gaussian(0.0, neighbouring=AR))) == 0)
    assert np.all(compute_rdp(ev.NoOp()) == 0)
    assert np.all(compute_rdp(ev.SelfComposed(ev.Gaussian(1.0), 0)) == 0)
    assert np.all(np.isinf(compute_rdp(ev.NonPrivate())))


def test_laplace_rdp_matches_mironov_prop6_direct_formula():
    b = 0.8
    a = ORDERS[ORDERS < 60]
    direct = np.log(
        a / (2 * a - 1) * np.exp((a - 1) / b) + (a - 1) / (2 * a - 1) * np.exp(-a / b)
    ) / (a - 1)
    np.testing.assert_allclose(rdp_laplace(b, a), direct, rtol=1e-12)
    assert np.all(rdp_laplace(b, ORDERS) <= 1 / b + 1e-15)


def test_pure_epsilon_rdp_is_randomized_response_divergence():
    eps = 0.7
    a = np.array([1.5, 2.0, 3.0, 10.0, 100.0])
    p = math.exp(eps) / (1 + math.exp(eps))
    # D_α(Bern(p) ‖ Bern(1 − p)), computed directly
    direct = np.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)
    got = rdp_pure_epsilon(eps, a)
    np.testing.assert_allclose(got, direct, rtol=1e-12)
    assert np.all(got <= eps) and np.all(got <= a * eps**2 / 2 + 1e-15)
    np.testing.assert_allclose(
        compute_rdp(ev.EpsilonDelta(eps, 0.0), a), compute_rdp(ev.PureEpsilon(eps), a)
    )


def test_subsampling_composed_gaussians_uses_effective_sigma():
    inner = ev.Composed((ev.Gaussian(2.0, neighbouring=AR), ev.Gaussian(2.0, neighbouring=AR)))
    np.testing.assert_allclose(
        compute_rdp(ev.PoissonSampled(0.05, inner)),
        compute_rdp(ev.PoissonSampled(0.05, ev.Gaussian(math.sqrt(2.0), neighbouring=AR))),
        rtol=1e-14,
    )
    np.testing.assert_allclose(
        compute_rdp(ev.PoissonSampled(0.05, ev.SelfComposed(ev.Gaussian(3.0, neighbouring=AR), 9))),
        compute_rdp(ev.PoissonSampled(0.05, ev.Gaussian(1.0, neighbouring=AR))),
        rtol=1e-14,
    )


# ------------------------------------------- exactness vs numerical integration
def _renyi_by_quadrature(alpha: float, q: float, sigma: float) -> tuple[float, float]:
    """(D_α(μ₁‖μ₀), D_α(μ₀‖μ₁)) by mpmath quadrature, μ₀ = N(0,σ²),
    μ₁ = (1−q)N(0,σ²) + qN(1,σ²)."""
    mp.mp.dps = 30
    a, q_, s = mp.mpf(alpha), mp.mpf(q), mp.mpf(sigma)

    def log_mu0(z):
        return -(z**2) / (2 * s**2)

    def log_mu1(z):
        return log_mu0(z) + mp.log1p(q_ * mp.expm1((2 * z - 1) / (2 * s**2)))

    norm = -mp.log(s * mp.sqrt(2 * mp.pi))

    def f10(z):  # μ₁^α μ₀^{1−α}
        return mp.exp(a * log_mu1(z) + (1 - a) * log_mu0(z) + norm)

    def f01(z):  # μ₀^α μ₁^{1−α}
        return mp.exp(a * log_mu0(z) + (1 - a) * log_mu1(z) + norm)

    pts = sorted(
        {mp.mpf(x) * s for x in range(-40, 41, 5)}
        | {mp.mpf(0.5), a, a + 6 * s, a - 6 * s, 1 - a, 1 - a - 6 * s}
    )
    pts = [-mp.inf, *pts, mp.inf]
    d10 = mp.log(mp.quad(f10, pts)) / (a - 1)
    d01 = mp.log(mp.quad(f01, pts)) / (a - 1)
    return float(d10), float(d01)


@pytest.mark.parametrize(
    ("alpha", "q", "sigma"),
    [
        (2.0, 1e-3, 4.0),
        (5.0, 0.01, 1.0),
        (32.0, 0.1, 2.0),
        (1.5, 0.1, 0.5),
        (1.05, 1e-3, 0.5),
        (3.7, 0.004, 1.1),
        (7.25, 0.3, 0.8),
        (1.3, 0.9, 0.5),
        (12.5, 0.02, 3.0),
    ],
)
def test_subsampled_gaussian_rdp_equals_numerical_integral(alpha, q, sigma):
    d10, d01 = _renyi_by_quadrature(alpha, q, sigma)
    got = rdp_poisson_subsampled_gaussian(q, sigma, [alpha])[0]
    assert d10 >= d01  # the direction the accountant reports is the larger one
    assert got == pytest.approx(max(d10, d01), rel=1e-6)


def _a_minus_1_by_quadrature(alpha: float, q: float, sigma: float) -> float:
    """ρ(α) from E_{μ₀}[(1 − q + qX)^α − 1], X = e^{(2z−1)/(2σ²)}: no cancellation."""
    mp.mp.dps = 50
    a, q_, s = mp.mpf(alpha), mp.mpf(q), mp.mpf(sigma)

    def f(z):
        return mp.npdf(z, 0, s) * mp.expm1(a * mp.log1p(q_ * mp.expm1((2 * z - 1) / (2 * s**2))))

    pts = [-mp.inf, *(k * s for k in range(-30, 31, 3)), mp.inf]
    return float(mp.log1p(mp.quad(f, pts)) / (a - 1))


@pytest.mark.parametrize(
    ("alpha", "q", "sigma"),
    [
        (2.5, 1e-6, 1e4),
        (5.5, 1e-12, 1e8),
        (3.7, 0.999999, 1e6),
        (1.1, 0.51, 2.0),
        (2.3, 0.49, 0.4),
    ],
)
def test_extreme_regimes_are_precise_and_conservative(alpha, q, sigma):
    want = _a_minus_1_by_quadrature(alpha, q, sigma)
    got = rdp_poisson_subsampled_gaussian(q, sigma, [alpha])[0]
    assert want * (1 - 1e-15) <= got <= want * (1 + 1e-9)


def test_precision_loss_falls_back_to_a_valid_upper_bound():
    # q = 1/2 with a huge σ: the two series cancel to 1e-17; the result stays an
    # upper bound (the convexity chord), never 0
    alpha, q, sigma = 1.5, 0.5, 1e8
    want = _a_minus_1_by_quadrature(alpha, q, sigma)
    got = rdp_poisson_subsampled_gaussian(q, sigma, [alpha])[0]
    assert want <= got <= 2 * want


# ------------------------------------------------------- against dp-accounting
@pytest.fixture(scope="module")
def dpa_rdp():
    from dp_accounting.rdp import rdp_privacy_accountant as ra

    return ra


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.0), (0.004, 1.1), (0.2, 2.0), (1e-3, 4.0)])
def test_integer_orders_agree_with_dp_accounting(dpa_rdp, q, sigma):
    ints = np.array([2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 63.0, 128.0, 256.0])
    ours = rdp_poisson_subsampled_gaussian(q, sigma, ints)
    theirs = dpa_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, ints)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.0), (0.1, 0.7), (0.004, 1.1)])
def test_fractional_orders_at_most_dp_accounting(dpa_rdp, q, sigma):
    frac = np.array([1.1, 1.5, 2.5, 4.5, 9.9])
    ours = rdp_poisson_subsampled_gaussian(q, sigma, frac)
    theirs = dpa_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, frac)
    # dp-accounting adds the absolute values of the alternating terms (and may
    # give ∞ when its series does not converge); dperm sums them with their
    # signs.  1e-9 slack: dp-accounting's own rounding is ~1e-11 relative.
    assert np.all(ours <= theirs * (1 + 1e-9))
    assert np.any(ours < theirs * (1 - 1e-6))  # strictly better somewhere


def test_fractional_order_where_dp_accounting_overestimates_equals_integral(dpa_rdp):
    alpha, q, sigma = 1.5, 0.01, 1.0
    ours = rdp_poisson_subsampled_gaussian(q, sigma, [alpha])[0]
    theirs = dpa_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, [alpha])[0]
    d10, _ = _renyi_by_quadrature(alpha, q, sigma)
    assert ours == pytest.approx(d10, rel=1e-9)
    assert theirs > d10 * (1 + 1e-4)


def test_epsilon_matches_dp_accounting_on_integer_grid(dpa_rdp):
    from dp_accounting import dp_event as de

    orders = [2.0, 3.0, 4.0, 5.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0]
    theirs = dpa_rdp.RdpAccountant(orders)
    theirs.compose(de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(1.1)), 2000)
    ours = RdpAccountant(orders, neighbouring=AR)
    ours.compose(ev.PoissonSampled(0.01, ev.Gaussian(1.1, neighbouring=AR)), 2000)
    for delta in (1e-5, 1e-8):
        assert ours.get_epsilon(delta) == pytest.approx(theirs.get_epsilon(delta), rel=1e-6)
    assert ours.get_delta(2.0) == pytest.approx(theirs.get_delta(2.0), rel=1e-5)


def test_default_grid_epsilon_at_most_dp_accounting(dpa_rdp):
    from dp_accounting import dp_event as de

    theirs = dpa_rdp.RdpAccountant()
    theirs.compose(de.PoissonSampledDpEvent(0.004, de.GaussianDpEvent(1.1)), 15000)
    ours = RdpAccountant(neighbouring=AR)
    ours.compose(
        ev.SelfComposed(ev.PoissonSampled(0.004, ev.Gaussian(1.1, neighbouring=AR)), 15000)
    )
    e_ours, e_theirs = ours.get_epsilon(1e-5), theirs.get_epsilon(1e-5)
    assert e_ours <= e_theirs * (1 + 1e-9)
    assert e_ours == pytest.approx(e_theirs, rel=1e-2)


def test_without_replacement_integer_orders_match_wbk_theorem27_by_hand():
    # WBK19 Theorem 27 (Gaussian form of Theorem 9): the j-th term is
    # γ^j C(α,j) min{4 B_j, 2 e^{(j−1)ε(j)}}, B_j = E_Q[(P/Q − 1)^j] (even j; odd j:
    # √(B_{j−1}B_{j+1})), here by exact finite differences (no cancellation at α = 4)
    gamma, sigma, alpha = 0.05, 1.5, 4

    def eps(j):
        return j / (2 * sigma**2)

    def moment(j):
        return math.fsum(
            (-1) ** (j - k) * math.comb(j, k) * math.exp(k * (k - 1) / (2 * sigma**2))
            for k in range(j + 1)
        )

    total = 1 + gamma**2 * math.comb(alpha, 2) * min(4 * math.expm1(eps(2)), math.exp(eps(2)) * 2)
    for j in range(3, alpha + 1):
        b = moment(j) if j % 2 == 0 else math.sqrt(moment(j - 1) * moment(j + 1))
        total += gamma**j * math.comb(alpha, j) * min(4 * b, 2 * math.exp((j - 1) * eps(j)))
    expected = math.log(total) / (alpha - 1)
    got = rdp_sampled_without_replacement_gaussian(gamma, sigma, [float(alpha)])[0]
    assert got == pytest.approx(expected, rel=1e-8)
    # the event goes through the same formula with γ = m/n
    event = ev.SampledWithoutReplacement(5, 100, ev.Gaussian(sigma))
    assert compute_rdp(event, [4.0])[0] == pytest.approx(expected, rel=1e-8)


def test_without_replacement_fractional_orders_interpolate_cgf():
    g, s = 0.05, 1.5
    lo, hi = rdp_sampled_without_replacement_gaussian(g, s, [3.0, 4.0])
    mid = rdp_sampled_without_replacement_gaussian(g, s, [3.25])[0]
    assert mid * 2.25 == pytest.approx(0.75 * 2 * lo + 0.25 * 3 * hi, rel=1e-12)


# ----------------------------------------------------------------- conversions
def test_classic_and_improved_conversions_by_hand():
    orders, rdp, delta = np.array([2.0, 10.0]), np.array([0.5, 1.5]), 1e-5
    classic = min(r + math.log(1 / delta) / (a - 1) for a, r in zip(orders, rdp, strict=True))
    improved = min(
        r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
        for a, r in zip(orders, rdp, strict=True)
    )
    assert rdp_to_epsilon(orders, rdp, delta, "classic")[0] == pytest.approx(classic)
    e, order = rdp_to_epsilon(orders, rdp, delta, "improved")
    assert e == pytest.approx(improved) and order == 10.0
    assert e < classic
    # δ(ε) inverts ε(δ) at the optimal order
    d, _ = rdp_to_delta(orders, rdp, e, "improved")
    assert d == pytest.approx(delta, rel=1e-9)
    d_classic, _ = rdp_to_delta(orders, rdp, classic, "classic")
    assert d_classic == pytest.approx(delta, rel=1e-9)


def test_conversion_edge_cases():
    orders = np.array([2.0, 4.0])
    assert rdp_to_epsilon(orders, [0.0, 0.0], 0.0)[0] == 0.0
    assert rdp_to_epsilon(orders, [0.1, 0.2], 0.0)[0] == math.inf
    assert rdp_to_epsilon(orders, [np.inf, np.inf], 1e-5)[0] == math.inf
    # tiny RDP: δ ≥ √(1 − e^{−ρ}) certifies ε = 0, and ε is never negative
    assert rdp_to_epsilon(orders, [1e-14, 1e-14], 1e-5)[0] == 0.0
    assert rdp_to_epsilon(orders, [1e-6, 1e-6], 0.5, "classic")[0] >= 0.0
    with pytest.raises(UnknownNameError, match="conversion"):
        rdp_to_epsilon(orders, [0.1, 0.2], 1e-5, "bogus")


def test_accountant_reports_optimal_order_and_classic_is_looser():
    event = ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(1.0, neighbouring=AR)), 1000)
    imp = RdpAccountant(neighbouring=AR).compose(event)
    cla = RdpAccountant(conversion="classic", neighbouring=AR).compose(event)
    e, order = imp.get_epsilon_and_order(1e-5)
    assert order in set(DEFAULT_ORDERS)
    assert e == imp.get_epsilon(1e-5) < cla.get_epsilon(1e-5)
    d, _ = imp.get_delta_and_order(e)
    assert d <= 1e-5 * (1 + 1e-9)


def test_rdp_refuses_what_it_cannot_account():
    acc = RdpAccountant().compose(ev.Gaussian(2.0))
    before = acc.rdp
    for event in (
        ev.EpsilonDelta(1.0, 1e-6),
        ev.PoissonSampled(0.1, ev.Laplace(1.0)),
        ev.PoissonSampled(0.1, ev.SelfComposed(ev.PureEpsilon(1.0), 2)),  # Lemma 15.4: leaves only
        ev.Composed((ev.Gaussian(1.0), ev.EpsilonDelta(1.0, 1e-6))),
        ev.SelfComposed(ev.EpsilonDelta(0.5, 1e-9), 0),
    ):
        assert not acc.supports(event)
        with pytest.raises(UnsupportedEventError):
            acc.compose(event)
        np.testing.assert_array_equal(acc.rdp, before)
        assert len(acc.events) == 1


def test_bad_orders_rejected():
    for bad in ([1.0, 2.0], [0.5], [], [2.0, np.inf], [np.nan], "abc"):
        with pytest.raises(InvalidPrivacyParameter, match="orders"):
            RdpAccountant(orders=bad)
    with pytest.raises(UnknownNameError):
        RdpAccountant(conversion="exact")
