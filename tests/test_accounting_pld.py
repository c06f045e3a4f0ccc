"""PLD accountant: dp-accounting's numbers (to float error), never above RDP."""

from __future__ import annotations

import math

import pytest

from dperm.accounting import (
    PldAccountant,
    RdpAccountant,
    epsilon_spent,
)
from dperm.accounting import events as ev
from dperm.exceptions import InvalidPrivacyParameter, UnsupportedEventError

#: add/remove-one: the relation of the classical Poisson-subsampled analysis
AR = "add-remove"


def test_matches_dp_accounting_pld():
    from dp_accounting import dp_event as de
    from dp_accounting.pld import pld_privacy_accountant as pa

    theirs = pa.PLDAccountant(value_discretization_interval=1e-3)
    theirs.compose(de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(1.0)), 500)
    theirs.compose(de.LaplaceDpEvent(20.0), 2)
    ours = PldAccountant(value_discretization_interval=1e-3, neighbouring=AR)
    ours.compose(ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(1.0, neighbouring=AR)), 500))
    ours.compose(ev.Laplace(20.0, neighbouring=AR), count=2)
    # the same discretisation, vectorised: equal to float error (FFT rounding)
    assert ours.get_epsilon(1e-5) == pytest.approx(theirs.get_epsilon(1e-5), rel=1e-7)
    assert ours.get_delta(1.0) == pytest.approx(theirs.get_delta(1.0), rel=1e-7)


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "delta"),
    [
        (1.1, 0.004, 15_000, 1e-5),
        (0.8, 0.01, 100_000, 1e-5),
        (2.0, 0.05, 1_000, 1e-7),
        (4.0, 1.0, 10, 1e-6),
        (0.6, 0.001, 50_000, 1e-5),
    ],
)
def test_pld_epsilon_at_most_rdp(sigma, q, steps, delta):
    event = ev.SelfComposed(ev.PoissonSampled(q, ev.Gaussian(sigma, neighbouring=AR)), steps)
    pld = PldAccountant(1e-3, neighbouring=AR).compose(event).get_epsilon(delta)
    rdp = RdpAccountant(neighbouring=AR).compose(event).get_epsilon(delta)
    assert 0.0 < pld <= rdp


def test_pld_supports_and_refusals_leave_state_unchanged():
    acc = PldAccountant(value_discretization_interval=1e-3).compose(ev.Gaussian(3.0))
    eps = acc.get_epsilon(1e-6)
    for event in (
        ev.SampledWithoutReplacement(10, 100, ev.Laplace(1.0)),
        ev.PoissonSampled(0.1, ev.SelfComposed(ev.PureEpsilon(1.0), 2)),
        ev.PoissonSampled(0.1, ev.Laplace(1.0)),  # no replace-one PLD of a sampled Laplace
        ev.Composed((ev.Gaussian(1.0), ev.SampledWithoutReplacement(10, 100, ev.Laplace(1.0)))),
    ):
        assert not acc.supports(event)
        with pytest.raises(UnsupportedEventError):
            acc.compose(event)
        assert acc.get_epsilon(1e-6) == eps
        assert len(acc.events) == 1
    # converted to a replace-one sampled Laplace, which has no PLD here; add/remove has one
    assert not acc.supports(ev.PoissonSampled(0.1, ev.Laplace(1.0, neighbouring=AR)))
    assert PldAccountant(1e-3, neighbouring=AR).supports(
        ev.PoissonSampled(0.1, ev.Laplace(1.0, neighbouring=AR))
    )
    assert acc.supports(ev.PureEpsilon(1.0)) and acc.supports(ev.EpsilonDelta(1.0, 1e-6))
    assert acc.supports(ev.PoissonSampled(0.1, ev.Composed((ev.Gaussian(1.0), ev.Gaussian(2.0)))))


def test_pld_edge_events():
    assert epsilon_spent(ev.NoOp(), 1e-5, "pld") == 0.0
    assert epsilon_spent(ev.NonPrivate(), 1e-5, "pld") == math.inf
    assert epsilon_spent(ev.Gaussian(0.0), 1e-5, "pld") == math.inf
    assert epsilon_spent(ev.SelfComposed(ev.Gaussian(1.0), 0), 1e-5, "pld") == 0.0
    assert (
        epsilon_spent(ev.PoissonSampled(0.0, ev.Gaussian(1.0, neighbouring=AR)), 1e-5, "pld") == 0.0
    )
    # composing on a copy does not touch the original
    acc = PldAccountant(value_discretization_interval=1e-3).compose(ev.Gaussian(2.0))
    e = acc.get_epsilon(1e-5)
    acc.copy().compose(ev.Gaussian(2.0))
    assert acc.get_epsilon(1e-5) == e


def test_pld_bad_discretization():
    for bad in (0.0, -1e-3, math.inf, math.nan):
        with pytest.raises(InvalidPrivacyParameter, match="value_discretization_interval"):
            PldAccountant(value_discretization_interval=bad)
