"""Privacy events: immutable, hashable, validated, JSON round trip."""

from __future__ import annotations

import dataclasses

import pytest

from dperm.accounting.events import (
    Composed,
    EpsilonDelta,
    Gaussian,
    Laplace,
    NonPrivate,
    NoOp,
    PoissonSampled,
    PureEpsilon,
    SampledWithoutReplacement,
    SelfComposed,
    event_from_dict,
    event_from_json,
)
from dperm.exceptions import InvalidPrivacyParameter

EVENTS = [
    NoOp(),
    NonPrivate(),
    Gaussian(1.1),
    Laplace(2.0),
    PureEpsilon(0.5),
    EpsilonDelta(1.0, 1e-6),
    PoissonSampled(0.01, Gaussian(1.0)),
    SampledWithoutReplacement(10, 100, Gaussian(2.0)),
    SelfComposed(PoissonSampled(0.004, Gaussian(1.1)), 15000),
    Composed((PureEpsilon(0.1), SelfComposed(Gaussian(3.0), 2), NoOp())),
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
        lambda: Gaussian(-1.0),
        lambda: Gaussian(float("nan")),
        lambda: Gaussian(float("inf")),
        lambda: Gaussian("1"),
        lambda: PureEpsilon(-0.1),
        lambda: EpsilonDelta(1.0, 1.5),
        lambda: PoissonSampled(1.5, Gaussian(1.0)),
        lambda: PoissonSampled(0.5, "gauss"),
        lambda: SampledWithoutReplacement(5, 3, Gaussian(1.0)),
        lambda: SampledWithoutReplacement(2.5, 3, Gaussian(1.0)),
        lambda: SelfComposed(Gaussian(1.0), -1),
        lambda: SelfComposed(Gaussian(1.0), 1.5),
        lambda: Composed((Gaussian(1.0), 3)),
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
