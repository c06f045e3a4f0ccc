"""Noise calibration: round trips, the target is always met, errors."""

from __future__ import annotations

import math

import pytest

from dperm.accounting import (
    RdpAccountant,
    calibrate_gaussian,
    calibrate_noise,
    epsilon_spent,
    get_accountant,
)
from dperm.accounting import events as ev
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError

#: add/remove-one: the relation of the classical Poisson-subsampled analysis
AR = "add-remove"


@pytest.mark.parametrize(
    ("epsilon", "delta", "steps", "q"),
    [
        (1.0, 1e-5, 1000, 0.01),
        (8.0, 1e-5, 15_000, 0.004),
        (0.3, 1e-6, 1, 1.0),
        (3.0, 1e-5, 50, 1.0),
    ],
)
def test_rdp_round_trip_epsilon_sigma_epsilon(epsilon, delta, steps, q):
    sigma = calibrate_gaussian(epsilon, delta, steps=steps, sampling_rate=q)
    event = ev.SelfComposed(
        ev.PoissonSampled(q, ev.Gaussian(sigma, neighbouring=AR)) if q < 1 else ev.Gaussian(sigma),
        steps,
    )
    got = epsilon_spent(event, delta)
    assert got <= epsilon  # always meets the target
    assert got == pytest.approx(epsilon, rel=1e-3)  # and is tight
    # slightly less noise no longer meets the target
    ev_less = ev.SelfComposed(
        ev.PoissonSampled(q, ev.Gaussian(sigma * (1 - 2e-4), neighbouring=AR))
        if q < 1
        else ev.Gaussian(sigma * (1 - 2e-4)),
        steps,
    )
    assert epsilon_spent(ev_less, delta) > epsilon


def test_pld_calibration_needs_less_noise_than_rdp():
    kw = dict(steps=2000, sampling_rate=0.01)
    s_rdp = calibrate_gaussian(2.0, 1e-5, **kw)
    s_pld = calibrate_gaussian(
        2.0,
        1e-5,
        accountant=get_accountant("pld", value_discretization_interval=1e-3, neighbouring=AR),
        **kw,
    )
    assert s_pld < s_rdp
    event = ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(s_pld, neighbouring=AR)), 2000)
    pld = get_accountant("pld", value_discretization_interval=1e-3, neighbouring=AR)
    assert pld.compose(event).get_epsilon(1e-5) <= 2.0


def test_without_replacement_calibration():
    sigma = calibrate_gaussian(
        2.0,
        1e-5,
        steps=500,
        sampling_rate=0.02,
        sampling="without_replacement",
        population_size=1000,
    )
    event = ev.SelfComposed(ev.SampledWithoutReplacement(20, 1000, ev.Gaussian(sigma)), 500)
    assert epsilon_spent(event, 1e-5) <= 2.0
    with pytest.raises(InvalidPrivacyParameter, match="population_size"):
        calibrate_gaussian(2.0, 1e-5, sampling_rate=0.02, sampling="without_replacement")
    with pytest.raises(InvalidPrivacyParameter, match="integer"):
        calibrate_gaussian(
            2.0, 1e-5, sampling_rate=0.0123, sampling="without_replacement", population_size=100
        )
    with pytest.raises(UnknownNameError, match="sampling"):
        calibrate_gaussian(2.0, 1e-5, sampling="shuffle")


def test_calibrate_noise_generic_laplace_pure_dp():
    # k Laplace releases under basic composition: b = k/ε exactly
    b = calibrate_noise(
        lambda x: ev.SelfComposed(ev.Laplace(x), 10), 2.0, 0.0, accountant="basic", rtol=1e-8
    )
    assert b == pytest.approx(5.0, rel=1e-7) and b >= 5.0
    # optimal composition needs less noise at δ > 0
    b_opt = calibrate_noise(
        lambda x: ev.SelfComposed(ev.Laplace(x), 10), 2.0, 1e-6, accountant="optimal"
    )
    assert b_opt < b
    assert epsilon_spent(ev.SelfComposed(ev.Laplace(b_opt), 10), 1e-6, "optimal") <= 2.0


def test_calibrate_noise_accepts_instances_and_factories():
    base = RdpAccountant().compose(ev.Gaussian(8.0))  # already spent something
    x = calibrate_noise(lambda s: ev.Gaussian(s), 1.5, 1e-5, accountant=base)
    total = base.copy().compose(ev.Gaussian(x)).get_epsilon(1e-5)
    assert total <= 1.5
    assert len(base.events) == 1  # the instance itself is untouched
    y = calibrate_noise(lambda s: ev.Gaussian(s), 1.5, 1e-5, accountant=RdpAccountant)
    assert y < x
    with pytest.raises(InvalidPrivacyParameter, match="accountant"):
        calibrate_noise(lambda s: ev.Gaussian(s), 1.5, 1e-5, accountant=3)
    with pytest.raises(UnknownNameError):
        calibrate_noise(lambda s: ev.Gaussian(s), 1.5, 1e-5, accountant="moments")


def test_calibrate_noise_bounds_and_unreachable_target():
    with pytest.raises(InvalidPrivacyParameter, match=r"epsilon=0\.01"):
        calibrate_noise(lambda s: ev.Gaussian(s), 0.01, 1e-5, upper=10.0)
    # NonPrivate-like: no noise ever certifies
    with pytest.raises(InvalidPrivacyParameter, match="target"):
        calibrate_noise(lambda s: ev.PureEpsilon(math.inf), 1.0, 1e-5)
    # lower already meets the target: it is returned
    assert calibrate_noise(lambda s: ev.Gaussian(s), 1.0, 1e-5, lower=50.0) == 50.0
    with pytest.raises(InvalidPrivacyParameter, match="lower"):
        calibrate_noise(lambda s: ev.Gaussian(s), 1.0, 1e-5, lower=5.0, upper=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="rtol"):
        calibrate_noise(lambda s: ev.Gaussian(s), 1.0, 1e-5, rtol=0.0)
    with pytest.raises(UnsupportedEventError):
        calibrate_noise(lambda s: ev.Gaussian(s), 1.0, 1e-5, accountant="basic")


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "1"])
def test_calibrate_bad_epsilon(bad):
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        calibrate_gaussian(bad, 1e-5)


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-5, math.nan])
def test_calibrate_gaussian_bad_delta(bad):
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        calibrate_gaussian(1.0, bad)


def test_calibrate_gaussian_bad_steps_and_rate():
    for steps in (0, -3, 2.5):
        with pytest.raises(InvalidPrivacyParameter, match="steps"):
            calibrate_gaussian(1.0, 1e-5, steps=steps)
    for q in (0.0, 1.5, -0.1, math.nan):
        with pytest.raises(InvalidPrivacyParameter, match="sampling_rate"):
            calibrate_gaussian(1.0, 1e-5, sampling_rate=q)
