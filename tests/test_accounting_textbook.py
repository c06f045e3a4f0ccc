"""Lecture 15, Lemma 15.5 (single-sample DP-SGD's closed-form σ) next to the exact
accountants' σ for the same event (issue #40)."""

from __future__ import annotations

import math

import pytest

from dperm.accounting import epsilon_spent
from dperm.accounting.events import Gaussian, SampledWithoutReplacement, SelfComposed
from dperm.accounting.textbook import lecture15_single_sample_sigma, single_sample_sigma
from dperm.exceptions import InvalidPrivacyParameter


def _event(n, steps, sigma, lip=1.0):
    return SelfComposed(SampledWithoutReplacement(1, n, Gaussian(sigma / (2 * lip))), steps)


def test_lemma_15_5_is_its_closed_form_and_scales_with_the_lipschitz_constant():
    n, T, eps, delta = 1000, 100_000, 1.0, 1e-5
    sigma = lecture15_single_sample_sigma(n, T, eps, delta)
    ref = math.sqrt(64 * T * math.log(2 / delta) * math.log(2.5 * T / (delta * n))) / (n * eps)
    assert sigma == pytest.approx(ref, rel=1e-14)
    assert lecture15_single_sample_sigma(n, T, eps, delta, lipschitz=3.0) == pytest.approx(
        3 * sigma, rel=1e-14
    )


def test_inside_its_range_the_lemma_is_sound_and_loose():
    """The exact accountants certify the lemma's σ far below ε, and need much less
    noise: PLD (the default of fit_single_sample) ≤ RDP ≤ the lemma."""
    n, T, eps, delta = 1000, 100_000, 1.0, 1e-5
    lemma = lecture15_single_sample_sigma(n, T, eps, delta)
    for acc in ("pld", "rdp"):
        assert epsilon_spent(_event(n, T, lemma), delta=delta, accountant=acc) < 0.5 * eps
    pld = single_sample_sigma(n, T, eps, delta)
    rdp = single_sample_sigma(n, T, eps, delta, accountant="rdp")
    assert pld < rdp < lemma / 5
    # the exact σ spends its ε (calibration's relative tolerance 1e-4) and no more
    spent = epsilon_spent(_event(n, T, pld), delta=delta, accountant="pld")
    assert (1 - 1e-3) * eps <= spent <= eps
    assert single_sample_sigma(n, T, eps, delta, lipschitz=2.0) == pytest.approx(2 * pld, rel=1e-3)


@pytest.mark.parametrize(
    "n, steps, epsilon, delta, name",
    [
        (1000, 2000, 2.0, 1e-5, "epsilon_A"),  # the example: ε_A = 4.5
        (1000, 2000, 0.5, 1e-5, "epsilon_A"),  # ε_A = 1.13: T ≤ n²ε²/(8 ln(2/δ))
        (10_000, 1000, 1e-3, 0.5, "delta_A"),  # nδ/(2T) = 2.5
    ],
)
def test_outside_its_range_the_lemma_is_refused(n, steps, epsilon, delta, name):
    with pytest.raises(InvalidPrivacyParameter, match=name):
        lecture15_single_sample_sigma(n, steps, epsilon, delta)
    if name == "epsilon_A":  # the exact accountant still calibrates there
        assert single_sample_sigma(n, steps, epsilon, delta) > 0


def test_bad_input_is_refused():
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        lecture15_single_sample_sigma(1000, 100_000, 1.0, 0.0)
    with pytest.raises(InvalidPrivacyParameter, match="lipschitz"):
        lecture15_single_sample_sigma(1000, 100_000, 1.0, 1e-5, lipschitz=-1.0)
    with pytest.raises(InvalidPrivacyParameter, match="steps"):
        single_sample_sigma(1000, 0, 1.0, 1e-5)
