"""Privacy events: immutable, hashable, validated, JSON round trip."""

from __future__ import annotations

import dataclasses

import pytest

from dperm.accounting import events as ev
from dperm.accounting.events import (
    event_from_dict,
    event_from_json,
)
from dperm.exceptions import InvalidPrivacyParameter

EVENTS = [
    ev.NoOp(),
    ev.NonPrivate(),
    ev.Gaussian(1.1),
    ev.Laplace(2.0),
    ev.PureEpsilon(0.5),
    ev.EpsilonDelta(1.0, 1e-6),
    ev.PoissonSampled(0.01, ev.Gaussian(1.0)),
    ev.SampledWithoutReplacement(10, 100, ev.Gaussian(2.0)),
    ev.SelfComposed(ev.PoissonSampled(0.004, ev.Gaussian(1.1)), 15000),
    ev.Composed((ev.PureEpsilon(0.1), ev.SelfComposed(ev.Gaussian(3.0), 2), ev.NoOp())),
]


@pytest.mark.parametrize("event", EVENTS, ids=repr)
def test_round_trip_and_hash(event):
    assert event_from_json(event.to_json()) == event
    assert event_from_dict(event.to_dict()) == event
    assert hash(event) == hash(event_from_json(event.to_json()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.foo = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "make",
    [
        lambda: ev.Gaussian(-1.0),
        lambda: ev.Gaussian(float("nan")),
        lambda: ev.Gaussian(float("inf")),
        lambda: ev.Gaussian("1"),
        lambda: ev.PureEpsilon(-0.1),
        lambda: ev.EpsilonDelta(1.0, 1.5),
        lambda: ev.PoissonSampled(1.5, ev.Gaussian(1.0)),
        lambda: ev.PoissonSampled(0.5, "gauss"),
        lambda: ev.SampledWithoutReplacement(5, 3, ev.Gaussian(1.0)),
        lambda: ev.SampledWithoutReplacement(2.5, 3, ev.Gaussian(1.0)),
        lambda: ev.SelfComposed(ev.Gaussian(1.0), -1),
        lambda: ev.SelfComposed(ev.Gaussian(1.0), 1.5),
        lambda: ev.Composed((ev.Gaussian(1.0), 3)),
    ],
)
def test_invalid_events_raise(make):
    with pytest.raises(InvalidPrivacyParameter):
        make()


def test_unknown_kind():
    with pytest.raises(InvalidPrivacyParameter, match="unknown"):
        event_from_dict({"kind": "Bogus"})
    with pytest.raises(InvalidPrivacyParameter, match="lacks"):
        event_from_dict({"kind": "Gaussian"})
