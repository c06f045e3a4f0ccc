"""Noise calibration: round trips, the target is always met, errors."""

from __future__ import annotations

import math

import pytest

from dperm.accounting import (
    RdpAccountant,
    analytic_gaussian_noise_multiplier,
    calibrate_gaussian,
    calibrate_noise,
    calibrate_noise_certified,
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
    # lower already meets the target: it is only a starting point, the search goes
    # below it (a bracket that does not contain the answer is widened, not returned)
    hinted = calibrate_noise(lambda s: ev.Gaussian(s), 1.0, 1e-5, lower=50.0)
    assert hinted == pytest.approx(calibrate_noise(lambda s: ev.Gaussian(s), 1.0, 1e-5), rel=2e-4)
    exact = calibrate_noise(lambda s: ev.Gaussian(s), 1.0, 1e-5, accountant="pld", lower=50.0)
    assert exact == pytest.approx(analytic_gaussian_noise_multiplier(1.0, 1e-5), rel=1e-3)
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


def _dp_accounting_replace_one(z, q, steps, delta, monkeypatch):
    """dp-accounting's REPLACE_ONE PLD, its FFT in extended precision (at δ = 1/n²
    its double-precision FFT power is rounding noise: 1.003 for a run whose ε is
    0.9996 at n = 400 000, batch 256)."""
    import numpy as np
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import common
    from dp_accounting.pld import pld_privacy_accountant as pa

    double = common.self_convolve
    monkeypatch.setattr(
        common,
        "self_convolve",
        lambda lst, num, tail: double(np.asarray(lst, dtype=np.longdouble), num, tail),
    )

    acc = pa.PLDAccountant(NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(2.0 * z)), steps)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize(
    ("n", "batch", "epsilon"),
    [(30_000, 64, 0.1), (400_000, 256, 1.0)],
)
def test_pld_calibration_spends_the_budget_recomputed_by_dp_accounting(
    n, batch, epsilon, monkeypatch
):
    """Issue #22: a one-epoch DP-SGD calibration (replace-one, δ = 1/n²) spends
    between 0.999 and 1 of its ε, recomputed independently with dp-accounting.
    (The bug it guards against: returning the low end of a bracket that already
    met the target — n = 400 000, batch 256, ε = 1 spent 0.25.)"""
    q, steps, delta = batch / n, math.ceil(n / batch), 1.0 / n**2

    def make(z):
        return ev.SelfComposed(ev.PoissonSampled(q, ev.Gaussian(z)), steps)

    z, certified = calibrate_noise_certified(make, epsilon, delta, accountant="pld", rtol=1e-3)
    assert certified == epsilon_spent(make(z), delta, "pld")  # the certificate is the ε
    theirs = _dp_accounting_replace_one(z, q, steps, delta, monkeypatch)
    assert (1 - 1e-3) * epsilon <= theirs <= epsilon * (1 + 1e-6)
    # dp-accounting adds its window's tail bound 1e-15 to δ (dperm: 1e-20), ~1e-5 of
    # ε at δ = 1/n² = 6e-12; its extended-precision FFT adds ~1e-6 of noise
    assert theirs == pytest.approx(certified, rel=5e-5)


def test_hints_that_miss_the_answer_are_widened_not_returned():
    def make(s):
        return ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(s)), 100)

    plain = calibrate_noise(make, 1.0, 1e-6, accountant="pld")
    for lower in (0.05, 0.3, 20.0):  # below, near and far above the answer
        assert calibrate_noise(make, 1.0, 1e-6, accountant="pld", lower=lower) == pytest.approx(
            plain, rel=2e-4
        )
    with pytest.raises(InvalidPrivacyParameter, match=r"up to 0\.5"):
        calibrate_noise(make, 1.0, 1e-6, accountant="pld", upper=0.5)


def test_pld_calibration_builds_few_exact_plds(monkeypatch):
    """The exact (h = 10⁻⁴) PLD is built only near the answer, and the DP-SGD
    calibration's certificate is not rebuilt by the fail-closed re-check."""
    from dperm.accounting import pld as pld_module
    from dperm.algorithms import _gradient_calibration as gc
    from dperm.sampling import make_sampler

    built = []
    original = pld_module.gaussian_pld

    def counting(std, q, rel, h):
        built.append(h)
        return original(std, q, rel, h)

    monkeypatch.setattr(pld_module, "gaussian_pld", counting)
    gc._CALIBRATION_CACHE.clear()
    gc._EPSILON_CACHE.clear()
    sampler = make_sampler("poisson", 400_000, batch_size=256)
    _, event, spent = gc.resolve_noise(
        sampler, 1563, epsilon=1.0, delta=1e-6, noise_multiplier=None, accountant="pld"
    )
    assert 1 - gc.CALIBRATION_RTOL <= spent <= 1.0
    grid = gc.pld_grid(1.0)  # the run's grid (4·10⁻⁴ at ε = 1: ε/h ≤ 4096)
    assert 1 <= built.count(grid) <= 3  # the search's exact evaluations; none re-built
    assert spent == gc.epsilon_of(event, 1e-6, "pld") and built.count(grid) <= 3
