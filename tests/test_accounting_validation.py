"""Bad input, invariants (ε ≥ 0, never NaN, σ = 0 ⇒ ε = ∞), monotonicity and
refusals that leave every accountant unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dperm.accounting import (
    ACCOUNTANT_NAMES,
    delta_spent,
    epsilon_spent,
    event_from_json,
    get_accountant,
)
from dperm.accounting import events as ev
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError

#: add/remove-one: the relation of the classical Poisson-subsampled analysis
AR = "add-remove"


FAST = {
    "pld": {"value_discretization_interval": 1e-3},
    "auto": {"value_discretization_interval": 1e-3},
}


def make(name, **kwargs):
    return get_accountant(name, **FAST.get(name, {}), **kwargs)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("name", ACCOUNTANT_NAMES)
@pytest.mark.parametrize("delta", [-1e-5, 1.0, 1.5, math.nan, math.inf, "1e-5", None])
def test_get_epsilon_rejects_bad_delta(name, delta):
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        make(name).get_epsilon(delta)


@pytest.mark.parametrize("name", ACCOUNTANT_NAMES)
@pytest.mark.parametrize("epsilon", [-0.1, math.nan, "2"])
def test_get_delta_rejects_bad_epsilon(name, epsilon):
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        make(name).get_delta(epsilon)


@pytest.mark.parametrize("count", [-1, 1.5, math.nan, "3", None])
def test_compose_rejects_bad_count(count):
    acc = make("rdp")
    with pytest.raises(InvalidPrivacyParameter, match="count"):
        acc.compose(ev.Gaussian(1.0), count=count)
    assert acc.events == ()


@pytest.mark.parametrize(
    ("build", "param"),
    [
        (lambda: ev.Gaussian(-1.0), "noise_multiplier"),
        (lambda: ev.Gaussian(math.nan), "noise_multiplier"),
        (lambda: ev.Gaussian(math.inf), "noise_multiplier"),
        (lambda: ev.Laplace(-0.5), "noise_multiplier"),
        (lambda: ev.PoissonSampled(1.5, ev.Gaussian(1.0, neighbouring=AR)), "sampling_rate"),
        (lambda: ev.PoissonSampled(-0.1, ev.Gaussian(1.0, neighbouring=AR)), "sampling_rate"),
        (lambda: ev.PoissonSampled(math.nan, ev.Gaussian(1.0, neighbouring=AR)), "sampling_rate"),
        (lambda: ev.SelfComposed(ev.Gaussian(1.0), -3), "count"),
        (lambda: ev.SelfComposed(ev.Gaussian(1.0), "x"), "count"),
        (lambda: ev.SampledWithoutReplacement(11, 10, ev.Gaussian(1.0)), "sample_size"),
        (lambda: ev.SampledWithoutReplacement(None, 10, ev.Gaussian(1.0)), "sample_size"),
        (lambda: ev.EpsilonDelta(1.0, 2.0), "delta"),
        (lambda: ev.PureEpsilon(-1.0), "epsilon"),
    ],
)
def test_events_reject_bad_parameters(build, param):
    with pytest.raises(InvalidPrivacyParameter, match=param):
        build()


def test_unknown_accountant_name():
    with pytest.raises(UnknownNameError, match="rdp"):
        get_accountant("moments")
    with pytest.raises(UnknownNameError):
        epsilon_spent(ev.Gaussian(1.0), 1e-5, accountant="zcdp")
    assert get_accountant(" RDP ").name == "rdp"


def test_non_event_is_refused():
    acc = make("rdp")
    with pytest.raises(UnsupportedEventError):
        acc.compose("gaussian")
    assert not acc.supports(1.0)


# ---------------------------------------------------------------- invariants
@pytest.mark.parametrize("rel", ["replace-one", AR])
@pytest.mark.parametrize("name", ["rdp", "pld", "auto"])
def test_zero_noise_gives_infinite_epsilon(name, rel):
    for event in (
        ev.Gaussian(0.0, neighbouring=rel),
        ev.PoissonSampled(0.01, ev.Gaussian(0.0, neighbouring=rel)),
        ev.SelfComposed(ev.PoissonSampled(0.5, ev.Gaussian(0.0, neighbouring=rel)), 10),
        ev.NonPrivate(neighbouring=rel),
    ):
        acc = make(name, neighbouring=rel).compose(event)
        assert acc.get_epsilon(1e-5) == math.inf
        assert acc.get_delta(10.0) == 1.0


def test_zero_laplace_noise_is_non_private_everywhere():
    for name in ACCOUNTANT_NAMES:
        assert make(name).compose(ev.Laplace(0.0)).get_epsilon(0.1) == math.inf


@pytest.mark.parametrize("name", ACCOUNTANT_NAMES)
def test_empty_accountant_spends_nothing(name):
    acc = make(name)
    assert acc.get_epsilon(1e-5) == 0.0
    assert acc.get_delta(0.0) == 0.0


@settings(max_examples=30, deadline=None)
@given(
    sigma=st.floats(0.3, 8.0),
    q=st.floats(1e-4, 1.0),
    steps=st.integers(1, 100_000),
    extra=st.integers(1, 10_000),
    delta=st.floats(1e-12, 0.5),
)
def test_rdp_epsilon_monotone_in_steps_never_negative_or_nan(sigma, q, steps, extra, delta):
    step = ev.PoissonSampled(q, ev.Gaussian(sigma, neighbouring=AR))
    e1 = epsilon_spent(ev.SelfComposed(step, steps), delta)
    e2 = epsilon_spent(ev.SelfComposed(step, steps + extra), delta)
    assert not math.isnan(e1) and e1 >= 0.0
    assert e1 <= e2 * (1 + 1e-12)
    d = delta_spent(ev.SelfComposed(step, steps), max(e1, 1e-3))
    assert 0.0 <= d <= 1.0


@settings(max_examples=30, deadline=None)
@given(
    sigma=st.floats(0.4, 6.0),
    q1=st.floats(1e-4, 1.0),
    q2=st.floats(1e-4, 1.0),
    steps=st.integers(1, 10_000),
)
def test_rdp_epsilon_monotone_in_sampling_rate(sigma, q1, q2, steps):
    lo, hi = sorted((q1, q2))
    e_lo = epsilon_spent(
        ev.SelfComposed(ev.PoissonSampled(lo, ev.Gaussian(sigma, neighbouring=AR)), steps), 1e-5
    )
    e_hi = epsilon_spent(
        ev.SelfComposed(ev.PoissonSampled(hi, ev.Gaussian(sigma, neighbouring=AR)), steps), 1e-5
    )
    assert e_lo <= e_hi * (1 + 1e-10) + 1e-15


@settings(max_examples=20, deadline=None)
@given(eps0=st.floats(1e-3, 3.0), k=st.integers(1, 2000), delta=st.floats(0.0, 0.5))
def test_composition_accountants_ordered_and_valid(eps0, k, delta):
    event = ev.SelfComposed(ev.PureEpsilon(eps0), k)
    values = {n: epsilon_spent(event, delta, n) for n in ("basic", "advanced", "optimal")}
    assert all(v >= 0 and not math.isnan(v) for v in values.values())
    assert values["optimal"] <= values["advanced"] * (1 + 1e-9) + 1e-12
    assert values["advanced"] <= values["basic"] * (1 + 1e-12)
    assert values["basic"] == pytest.approx(k * eps0, rel=1e-12)


# ------------------------------------------------ refusals leave state intact
UNSUPPORTED = {
    "basic": [ev.Gaussian(1.0), ev.PoissonSampled(0.1, ev.Laplace(1.0))],
    "advanced": [ev.Gaussian(1.0), ev.SampledWithoutReplacement(1, 10, ev.Laplace(1.0))],
    "optimal": [ev.Gaussian(1.0), ev.Composed((ev.PureEpsilon(1.0), ev.PureEpsilon(2.0)))],
    "rdp": [ev.EpsilonDelta(1.0, 1e-6), ev.PoissonSampled(0.1, ev.Laplace(1.0))],
    "pld": [
        ev.PoissonSampled(0.1, ev.SelfComposed(ev.PureEpsilon(1.0), 2)),
        ev.SampledWithoutReplacement(1, 10, ev.Laplace(1.0)),
    ],
    "auto": [
        ev.PoissonSampled(0.1, ev.SelfComposed(ev.PureEpsilon(1.0), 2)),
        ev.SampledWithoutReplacement(1, 10, ev.Laplace(1.0)),
    ],
}
SUPPORTED_FIRST = {
    "basic": ev.PureEpsilon(0.5),
    "advanced": ev.PureEpsilon(0.5),
    "optimal": ev.PureEpsilon(0.5),
    "rdp": ev.Gaussian(2.0),
    "pld": ev.Gaussian(2.0),
    "auto": ev.Gaussian(2.0),
}


@pytest.mark.parametrize("name", ACCOUNTANT_NAMES)
def test_unsupported_events_leave_accountant_unchanged(name):
    acc = make(name).compose(SUPPORTED_FIRST[name], count=3)
    eps, delta = acc.get_epsilon(1e-6), acc.get_delta(1.0)
    for event in UNSUPPORTED[name]:
        assert not acc.supports(event)
        with pytest.raises(UnsupportedEventError):
            acc.compose(event, count=5)
        # also when buried inside a composition with supported parts
        with pytest.raises(UnsupportedEventError):
            acc.compose(ev.Composed((SUPPORTED_FIRST[name], event)))
        assert acc.get_epsilon(1e-6) == eps
        assert acc.get_delta(1.0) == delta
        assert acc.events == (ev.SelfComposed(SUPPORTED_FIRST[name], 3),)


@pytest.mark.parametrize("name", ACCOUNTANT_NAMES)
def test_copy_is_independent(name):
    acc = make(name).compose(SUPPORTED_FIRST[name])
    clone = acc.copy()
    clone.compose(SUPPORTED_FIRST[name], count=4)
    assert acc.get_epsilon(1e-6) < clone.get_epsilon(1e-6)
    assert len(acc.events) == 1 and len(clone.events) == 2


def test_noop_composition_and_json_events_round_trip():
    event = ev.Composed(
        (
            ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(1.2)), 100),
            ev.NoOp(),
            ev.SampledWithoutReplacement(5, 50, ev.Gaussian(2.0)),
        )
    )
    assert event_from_json(event.to_json()) == event
    # only the auto accountant accounts both parts (PLD for the replace-one Poisson
    # part, RDP for the WBK part, combined by the split fallback)
    auto = get_accountant("auto", value_discretization_interval=1e-3)
    back = event_from_json(event.to_json())
    assert epsilon_spent(back, 1e-5, auto) == epsilon_spent(event, 1e-5, auto)
    assert np.isfinite(epsilon_spent(event, 1e-5, auto))
