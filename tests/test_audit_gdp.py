"""The μ-GDP audit (dperm.audit.gdp): the conversion, the confidence bound, its
validity over many seeds, its power, and where its Gaussian-shape assumption
holds (subsampled Gaussian compositions) or fails (Laplace).

Reference values are computed independently here from the closed forms of
Dong, Roth, Su (2022), Corollary 2.13, and from dp-accounting's PLD.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from dperm.audit import (
    ThresholdTest,
    audit,
    gdp_delta,
    gdp_epsilon,
    gdp_evaluate_test,
    gdp_mu_from_rates,
    gdp_mu_lower_bound,
    gdp_select_threshold,
)
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError


def _drs_delta(mu, eps):
    """Dong, Roth, Su (2022), Corollary 2.13, written out directly."""
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def _mu_of_claim(eps, delta):
    """The μ whose GDP profile meets (ε, δ) exactly (independent root finding)."""
    return optimize.brentq(lambda m: _drs_delta(m, eps) - delta, 1e-6, 50.0, xtol=1e-14)


# ----------------------------------------------------------------------------- conversion
@pytest.mark.parametrize("mu,eps", [(0.27, 1.0), (0.5, 0.1), (1.0, 1.0), (2.0, 3.0), (4.0, 8.0)])
def test_gdp_delta_is_the_dong_roth_su_profile(mu, eps):
    assert gdp_delta(mu, eps) == pytest.approx(_drs_delta(mu, eps), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (0.5, 1e-6), (2.0, 1e-5), (8.0, 1e-9)])
def test_gdp_epsilon_inverts_the_profile(eps, delta):
    mu = _mu_of_claim(eps, delta)
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-7)
    # monotone in μ, and the edge cases
    assert gdp_epsilon(0.9 * mu, delta) < eps < gdp_epsilon(1.1 * mu, delta)
    assert gdp_epsilon(0.0, delta) == 0.0 and gdp_epsilon(math.inf, delta) == math.inf


def test_gdp_conversion_rejects_bad_input():
    with pytest.raises(InvalidPrivacyParameter, match="mu"):
        gdp_epsilon(-1.0, 1e-5)
    with pytest.raises(InvalidPrivacyParameter, match="mu"):
        gdp_delta(float("nan"), 1.0)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        gdp_epsilon(1.0, 0.0)


def test_mu_from_the_rates_of_an_exact_gaussian_pair():
    """FPR = Φ̄(t), FNR = Φ(t − μ) lie on G_μ for every threshold t."""
    mu, t = 0.8, np.linspace(-2.0, 3.0, 11)
    np.testing.assert_allclose(gdp_mu_from_rates(stats.norm.sf(t), stats.norm.cdf(t - mu)), mu)
    assert gdp_mu_from_rates(0.6, 0.6) == 0.0  # worse than chance
    assert gdp_mu_from_rates(0.0, 0.0) == math.inf


def test_mu_lower_bound_at_perfect_separation_closed_form():
    n = 1000
    u = 1 - 0.025 ** (1 / n)  # Clopper–Pearson upper limit at k = 0, level 1 − α/2
    expected = 2 * stats.norm.isf(u)
    assert gdp_mu_lower_bound(0, n, 0, n) == pytest.approx(expected)


# ----------------------------------------------------------------------------- validity
def _one_audit(rng, mu, m, delta):
    s0 = rng.standard_normal(2 * m)
    s1 = rng.standard_normal(2 * m) + mu
    test, _ = gdp_select_threshold(s0[:m], s1[:m], confidence=0.999)
    return gdp_evaluate_test(test, s0[m:], s1[m:], delta=delta)


def test_gdp_bound_is_valid_over_200_seeds_at_an_exact_claim():
    """A Gaussian pair whose μ meets ε = 1, δ = 1e-5 exactly: μ_LB > μ must happen
    in at most 5% of the audits.  The count is Binomial(200, p ≤ 0.05): more than
    200·0.05 + 3·√(200·0.05·0.95) ≈ 19 rejects validity."""
    delta = 1e-5
    mu = _mu_of_claim(1.0, delta)
    rng = np.random.default_rng(20231)
    reps, m = 200, 1000
    evs = [_one_audit(rng, mu, m, delta) for _ in range(reps)]
    over_mu = sum(e.mu_lower_bound > mu for e in evs)
    over_eps = sum(e.epsilon_lower_bound > 1.0 + 1e-9 for e in evs)
    assert over_mu == over_eps  # ε_μ(δ) is increasing in μ
    assert over_mu <= reps * 0.05 + 3 * math.sqrt(reps * 0.05 * 0.95)
    # power: the bound sits where the delta method puts it, μ − z·(width of both
    # Clopper–Pearson limits in Φ⁻¹ units) at the central threshold
    p = stats.norm.cdf(-mu / 2)
    width = stats.norm.isf(0.025) * math.sqrt(p * (1 - p) / m) / stats.norm.pdf(mu / 2)
    median_mu = float(np.median([e.mu_lower_bound for e in evs]))
    assert median_mu == pytest.approx(mu - 2 * width, abs=0.05)


def test_gdp_threshold_selection_finds_the_separating_test():
    s0 = np.linspace(0.0, 0.3, 40)
    s1 = np.linspace(1.0, 1.3, 40)
    test, mu = gdp_select_threshold(s0, s1)
    assert test.counts(s0, s1) == (0, 0) and mu == pytest.approx(gdp_mu_lower_bound(0, 40, 0, 40))
    test2, _ = gdp_select_threshold(s1, s0)
    assert test2.orientation == "<" and test2.counts(s1, s0) == (0, 0)
    same = np.linspace(-1, 1, 50)
    assert gdp_select_threshold(same, same)[1] == 0.0


def test_gdp_evaluate_reports_rates_and_estimates():
    s0, s1 = np.array([0.0, 0.1, 0.9, 0.2]), np.array([1.0, 0.05, 1.2, 0.8])
    ev = gdp_evaluate_test(ThresholdTest(0.5, ">", False), s0, s1, delta=1e-5)
    assert ev.fpr == 0.25 and ev.fnr == 0.25
    assert ev.mu_estimate == pytest.approx(2 * stats.norm.isf(0.25))
    assert ev.epsilon_estimate == pytest.approx(gdp_epsilon(ev.mu_estimate, 1e-5))
    assert ev.mu_lower_bound < ev.mu_estimate


# ----------------------------------------------------------------------------- the assumption
def test_laplace_shows_why_gdp_needs_gaussian_noise():
    """The ε = 1 Laplace mechanism (sensitivity 1, scale 1) read through G_μ at its
    central threshold gives an ε(δ = 1e-5) far above 1: the GDP estimate is not
    valid for non-Gaussian trade-off curves, so the auditor never uses it there."""
    t = 0.5  # central threshold between the means 0 and 1
    fpr = stats.laplace.sf(t, 0.0, 1.0)
    fnr = stats.laplace.cdf(t, 1.0, 1.0)
    assert gdp_epsilon(gdp_mu_from_rates(fpr, fnr), 1e-5) > 2.0
    res = audit("laplace", epsilon=1.0, runs=20, random_state=0, n_jobs=1)
    assert res.method == "clopper-pearson" and res.mu_lower_bound is None
    with pytest.raises(InvalidPrivacyParameter, match="gdp"):
        audit("laplace", epsilon=1.0, runs=20, random_state=0, n_jobs=1, method="gdp")
    with pytest.raises(UnknownNameError, match="method"):
        audit("laplace", epsilon=1.0, runs=20, n_jobs=1, method="bayes")


@pytest.mark.parametrize("q,steps,z", [(0.16, 25, 3.6), (0.5, 6, 2.0), (0.05, 100, 1.0)])
def test_gdp_reading_of_subsampled_gaussian_stays_below_its_true_epsilon(q, steps, z):
    """The DP-SGD statistic with a canary of constant gradient C: under D a
    N(0, T z²) score, under D′ Σₖ Bin(T, q)ₖ · N(k, T z²) (units of C).  Its
    trade-off curve is not Gaussian; over every threshold whose rates are ≥ 1e-4
    (all an audit of ≤ 10⁵ runs can resolve) the GDP reading ε_μ(t)(δ) stays
    below the mechanism's true ε(δ) from dp-accounting's PLD."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    delta = 1e-5
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), steps)
    eps_true = acc.get_epsilon(delta)
    s = math.sqrt(steps) * z
    k = np.arange(steps + 1)
    pk = stats.binom.pmf(k, steps, q)
    t = np.linspace(-8 * s, steps + 8 * s, 4001)
    fpr = stats.norm.sf(t / s)
    fnr = (pk * stats.norm.cdf((t[:, None] - k) / s)).sum(axis=1)
    best = 0.0
    for a, b in ((fpr, fnr), (1 - fpr, 1 - fnr)):  # both orientations
        ok = (np.minimum(a, b) > 1e-4) & (np.maximum(a, b) < 1 - 1e-4)
        best = max(best, float(np.max(gdp_mu_from_rates(a[ok], b[ok]))))
    assert 0.0 < gdp_epsilon(best, delta) <= eps_true


# ----------------------------------------------------------------------------- through audit()
def test_audit_of_the_gaussian_mechanism_uses_gdp_and_has_power():
    """The analytic Gaussian mechanism at exactly ε = 1, δ = 1e-5 (μ = 0.268)."""
    res = audit("gaussian", epsilon=1.0, runs=6000, random_state=5, n_jobs=1)
    assert res.method == "gdp" and "GDP" in res.assumption
    assert res.epsilon_lower_bound == res.epsilon_lower_bound_gdp
    assert 0.4 < res.epsilon_lower_bound <= 1.0, res.summary()
    assert res.epsilon_lower_bound > res.epsilon_lower_bound_cp  # the point of GDP
    assert res.mu_lower_bound < res.mu_estimate
    assert res.verdict == "not refuted"
    d = res.to_dict()
    for key in ("epsilon_lower_bound_gdp", "epsilon_lower_bound_cp", "mu_lower_bound"):
        assert isinstance(d[key], float)
    assert d["neighbouring"] == "add-remove" and d["verdict"] == "not refuted"
    cp = audit(
        "gaussian", epsilon=1.0, runs=200, random_state=5, n_jobs=1, method="clopper-pearson"
    )
    assert cp.method == "clopper-pearson" and cp.epsilon_lower_bound == cp.epsilon_lower_bound_cp
