"""Lecture 15, Lemma 15.4 in every accountant, and the sampled-without-replacement
Gaussian (WBK19 Theorem 27) that makes fixed-size DP-SGD batches amplify."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dperm.accounting import epsilon_spent, get_accountant
from dperm.accounting import events as ev
from dperm.accounting.amplification import amplified_event, subsampled_epsilon_delta
from dperm.accounting.rdp_sampled import rdp_sampled_without_replacement_gaussian
from dperm.exceptions import InvalidPrivacyParameter

AR = ev.ADD_REMOVE


def _lemma(eps, delta, rate):
    return math.log(1 + rate * (math.exp(eps) - 1)), rate * delta


def test_issue_example_is_accounted_by_the_lemma():
    # refused before: SampledWithoutReplacement(10, 1000, EpsilonDelta(1, 1e-6))
    event = ev.SampledWithoutReplacement(10, 1000, ev.EpsilonDelta(1.0, 1e-6))
    eps, delta = _lemma(1.0, 1e-6, 0.01)
    for name in ("basic", "advanced", "pld"):  # PLD: up to its grid (1e-3)
        assert epsilon_spent(event, delta=delta, accountant=name) == pytest.approx(eps, abs=1e-3)
    # δ below γδ cannot be certified by the composition theorems: ε = ∞
    assert epsilon_spent(event, delta=delta / 2, accountant="basic") == math.inf
    out = amplified_event(event)
    assert (out.epsilon, out.delta) == pytest.approx((eps, delta), rel=1e-12)


@pytest.mark.parametrize("accountant", ["rdp", "pld", "basic"])
def test_poisson_pure_epsilon_add_remove_is_amplified(accountant):
    event = ev.PoissonSampled(0.05, ev.PureEpsilon(2.0, neighbouring=AR))
    eps, _ = _lemma(2.0, 0.0, 0.05)
    got = epsilon_spent(event, delta=1e-9, accountant=accountant, neighbouring="add-remove")
    assert got <= eps * (1 + 1e-2)  # RDP/PLD of the (ε′, 0) event: ε′ up to conversion/grid
    if accountant == "basic":
        assert got == pytest.approx(eps, rel=1e-12)


def test_poisson_replace_one_generic_inner_gets_joint_convexity_only():
    event = ev.PoissonSampled(0.1, ev.EpsilonDelta(1.0, 1e-5))
    out = amplified_event(event)
    assert out.epsilon == 1.0 and out.delta == pytest.approx(1e-6, rel=1e-12)
    # why: an inner mechanism that reveals the sample size |S| has, given |S| = s,
    # likelihood ratio 1 + (s/n)(e^ε − 1) (exact, hypergeometric), which exceeds
    # e^{ε′} = 1 + q(e^ε − 1) whenever s > qn — an event of positive probability
    n, q, eps = 10, 0.1, 1.0
    ratio_full = 1 + (n / n) * math.expm1(eps)
    assert ratio_full > 1 + q * math.expm1(eps)


def test_lemma_is_tight_for_randomized_response_without_replacement():
    # inner: ε-randomized response on "the sample contains a record equal to x*";
    # D has x* once, D' none.  P[out = 1] = γ p_hi + (1 − γ) p_lo exactly (hypergeometric
    # marginal of one index), so the ratio is exactly the lemma's e^{ε′}: it spends ε′.
    eps, n, m = 1.3, 40, 7
    p_hi, p_lo = math.exp(eps) / (1 + math.exp(eps)), 1 / (1 + math.exp(eps))
    gamma = math.comb(n - 1, m - 1) / math.comb(n, m)  # P[index i is sampled] = m/n
    ratio = (gamma * p_hi + (1 - gamma) * p_lo) / p_lo
    eps_prime, _ = subsampled_epsilon_delta(eps, 0.0, m / n)
    assert math.log(ratio) == pytest.approx(eps_prime, rel=1e-12)
    event = ev.SampledWithoutReplacement(m, n, ev.PureEpsilon(eps))
    assert epsilon_spent(event, delta=0.0, accountant="basic") == pytest.approx(eps_prime)


def test_lemma_rejects_bad_input():
    with pytest.raises(InvalidPrivacyParameter, match="rate"):
        subsampled_epsilon_delta(1.0, 0.0, 1.5)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        subsampled_epsilon_delta(-1.0, 0.0, 0.5)
    assert subsampled_epsilon_delta(math.inf, 0.1, 0.5) == (math.inf, 0.05)
    assert subsampled_epsilon_delta(3.0, 0.1, 0.0) == (0.0, 0.0)


def test_pld_of_amplified_event_matches_dp_accounting():
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    eps, delta = _lemma(1.0, 1e-6, 0.02)
    theirs = pld_lib.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=1e-4
    ).self_compose(30)
    acc = get_accountant("pld", value_discretization_interval=1e-4)
    acc.compose(ev.SampledWithoutReplacement(20, 1000, ev.EpsilonDelta(1.0, 1e-6)), 30)
    assert acc.get_epsilon(1e-5) == pytest.approx(theirs.get_epsilon_for_delta(1e-5), rel=1e-9)


# ------------------------------------------------------------ WBK19 Theorem 27
@pytest.mark.parametrize(
    "gamma,sigma", [(0.05, 15.67), (0.05, 1.0), (0.01, 0.7), (0.3, 3.0), (0.002, 40.0)]
)
def test_wor_gaussian_rdp_matches_dp_accounting(gamma, sigma):
    from dp_accounting.rdp import rdp_privacy_accountant as dpa

    orders = np.array([2.0, 3.0, 4.0, 7.5, 12.0, 32.0, 100.0, 256.0])
    ours = rdp_sampled_without_replacement_gaussian(gamma, sigma, orders)
    theirs = dpa._compute_rdp_sample_wor_gaussian(gamma, sigma, orders)
    np.testing.assert_allclose(ours, np.minimum(theirs, orders / (2 * sigma**2)), rtol=1e-6)


def test_fixed_size_batches_now_amplify():
    from dperm.algorithms._gradient_calibration import calibrate_noise_multiplier
    from dperm.sampling import make_sampler

    def z_for(sampler):
        return calibrate_noise_multiplier(lambda z: sampler.event(z, 60), 1.0, 1e-5, "rdp")

    wor = make_sampler("without_replacement", 2000, batch_size=100)
    full = make_sampler("full", 2000)
    z_wor, z_full = z_for(wor), z_for(full)
    # the issue's case: 31.3 (no amplification) before; noise std per mean gradient
    assert z_wor < 0.2 * z_full  # noise multipliers (std / C per step): 3.4 vs 31.3
    # ... and the calibration spends its ε (both sides)
    spent = epsilon_spent(wor.event(z_wor, 60), delta=1e-5, accountant="rdp")
    assert 0.99 <= spent <= 1.0 + 1e-9
