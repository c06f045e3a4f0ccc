"""Privacy events: immutable descriptions of what a private algorithm spent.

An event is the one contract between the algorithms and the accountants
(the pattern of Google's ``dp_accounting``): every private algorithm of dperm
returns its release together with an event; accountants read events and know
nothing else about algorithms.

All events are frozen dataclasses: immutable, hashable, comparable, and
serializable with :meth:`DpEvent.to_dict` / :func:`event_from_dict` and
:meth:`DpEvent.to_json` / :func:`event_from_json`.

Noise-adding events are stated relative to the sensitivity, so they do not
depend on the units of the data:

* :class:`Gaussian` – additive N(0, (σ·Δ₂)²) noise, ``noise_multiplier`` = σ.
* :class:`Laplace` – additive Laplace(b·Δ₁) noise, ``noise_multiplier`` = b,
  a (1/b)-DP mechanism.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, ClassVar

from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "Composed",
    "DpEvent",
    "EpsilonDelta",
    "Gaussian",
    "Laplace",
    "NoOp",
    "NonPrivate",
    "PoissonSampled",
    "PureEpsilon",
    "SampledWithoutReplacement",
    "SelfComposed",
    "event_from_dict",
    "event_from_json",
]

_REGISTRY: dict[str, type[DpEvent]] = {}


def _real(value: Any, name: str) -> float:
    if isinstance(value, bool) or (
        not isinstance(value, int | float) and not hasattr(value, "__float__")
    ):
        raise InvalidPrivacyParameter(
            f"{name} must be a real number, got {type(value).__name__}: {value!r}"
        )
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidPrivacyParameter(f"{name} must be a real number, got {value!r}") from None
    if math.isnan(v):
        raise InvalidPrivacyParameter(f"{name} must not be NaN, got {value!r}")
    return v


class DpEvent:
    """Base class of privacy events (abstract).

    Subclasses are frozen dataclasses registered under their class name for
    deserialization.
    """

    kind: ClassVar[str] = "DpEvent"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__
        _REGISTRY[cls.__name__] = cls

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible ``dict`` with a ``"kind"`` key naming the class."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, DpEvent):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = [e.to_dict() for e in v]
            out[f.name] = v
        return out

    def to_json(self) -> str:
        """The event as a JSON string (see :func:`event_from_json`)."""
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclasses.dataclass(frozen=True)
class NoOp(DpEvent):
    """An operation that touches no private data: costs nothing."""


@dataclasses.dataclass(frozen=True)
class NonPrivate(DpEvent):
    """An operation with no privacy guarantee: any accountant reports ε = ∞."""


@dataclasses.dataclass(frozen=True)
class Gaussian(DpEvent):
    """The Gaussian mechanism: f(D) + N(0, (σ Δ₂)² I), ``noise_multiplier`` = σ ≥ 0.

    σ = 0 is allowed and means *no* privacy (ε = ∞ for every δ < 1).
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        s = _real(self.noise_multiplier, "noise_multiplier")
        if s < 0 or math.isinf(s):
            raise InvalidPrivacyParameter(
                f"noise_multiplier must be finite and ≥ 0, got {self.noise_multiplier!r}"
            )
        object.__setattr__(self, "noise_multiplier", s)


@dataclasses.dataclass(frozen=True)
class Laplace(DpEvent):
    """The Laplace mechanism: f(D) + Laplace(b Δ₁) per coordinate, ``noise_multiplier`` = b ≥ 0.

    It is (1/b)-DP (Dwork, McSherry, Nissim, Smith 2006).  b = 0 means no privacy.
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        s = _real(self.noise_multiplier, "noise_multiplier")
        if s < 0 or math.isinf(s):
            raise InvalidPrivacyParameter(
                f"noise_multiplier must be finite and ≥ 0, got {self.noise_multiplier!r}"
            )
        object.__setattr__(self, "noise_multiplier", s)


@dataclasses.dataclass(frozen=True)
class PureEpsilon(DpEvent):
    """A mechanism known only to be ε-DP (δ = 0), e.g. objective perturbation
    with Gamma-norm noise or the exponential mechanism."""

    epsilon: float

    def __post_init__(self) -> None:
        e = _real(self.epsilon, "epsilon")
        if e < 0:
            raise InvalidPrivacyParameter(f"epsilon must be ≥ 0, got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", e)


@dataclasses.dataclass(frozen=True)
class EpsilonDelta(DpEvent):
    """A mechanism known only to be (ε, δ)-DP, e.g. Gaussian objective perturbation."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        e = _real(self.epsilon, "epsilon")
        d = _real(self.delta, "delta")
        if e < 0:
            raise InvalidPrivacyParameter(f"epsilon must be ≥ 0, got {self.epsilon!r}")
        if not 0 <= d <= 1:
            raise InvalidPrivacyParameter(f"delta must be in [0, 1], got {self.delta!r}")
        object.__setattr__(self, "epsilon", e)
        object.__setattr__(self, "delta", d)


@dataclasses.dataclass(frozen=True)
class PoissonSampled(DpEvent):
    """``event`` run on a Poisson subsample: each record is included
    independently with probability ``sampling_rate`` q ∈ [0, 1]."""

    sampling_rate: float
    event: DpEvent

    def __post_init__(self) -> None:
        q = _real(self.sampling_rate, "sampling_rate")
        if not 0 <= q <= 1:
            raise InvalidPrivacyParameter(f"sampling_rate must be in [0, 1], got {q!r}")
        if not isinstance(self.event, DpEvent):
            raise InvalidPrivacyParameter(f"event must be a DpEvent, got {self.event!r}")
        object.__setattr__(self, "sampling_rate", q)


@dataclasses.dataclass(frozen=True)
class SampledWithoutReplacement(DpEvent):
    """``event`` run on a uniformly random subset of exactly ``sample_size``
    records drawn without replacement from ``population_size`` records
    (replace-one neighbouring relation; Wang, Balle, Kasiviswanathan 2019)."""

    sample_size: int
    population_size: int
    event: DpEvent

    def __post_init__(self) -> None:
        for name in ("sample_size", "population_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not _real(v, name).is_integer():
                raise InvalidPrivacyParameter(f"{name} must be an integer, got {v!r}")
            object.__setattr__(self, name, int(v))
        if not 0 <= self.sample_size <= self.population_size or self.population_size < 1:
            raise InvalidPrivacyParameter(
                "need 0 ≤ sample_size ≤ population_size and population_size ≥ 1, got "
                f"sample_size={self.sample_size}, population_size={self.population_size}"
            )
        if not isinstance(self.event, DpEvent):
            raise InvalidPrivacyParameter(f"event must be a DpEvent, got {self.event!r}")


@dataclasses.dataclass(frozen=True)
class SelfComposed(DpEvent):
    """``event`` repeated ``count`` ≥ 0 times (adaptive composition)."""

    event: DpEvent
    count: int

    def __post_init__(self) -> None:
        c = self.count
        if isinstance(c, bool) or not _real(c, "count").is_integer() or c < 0:
            raise InvalidPrivacyParameter(f"count must be an integer ≥ 0, got {c!r}")
        object.__setattr__(self, "count", int(c))
        if not isinstance(self.event, DpEvent):
            raise InvalidPrivacyParameter(f"event must be a DpEvent, got {self.event!r}")


@dataclasses.dataclass(frozen=True)
class Composed(DpEvent):
    """The adaptive composition of several events, in order."""

    events: tuple[DpEvent, ...]

    def __post_init__(self) -> None:
        evs = tuple(self.events)
        for e in evs:
            if not isinstance(e, DpEvent):
                raise InvalidPrivacyParameter(f"events must be DpEvents, got {e!r}")
        object.__setattr__(self, "events", evs)


def event_from_dict(data: dict[str, Any]) -> DpEvent:
    """Rebuild an event from :meth:`DpEvent.to_dict` output.

    Raises
    ------
    InvalidPrivacyParameter
        If the ``kind`` is unknown or a field is missing or invalid.
    """
    if not isinstance(data, dict) or "kind" not in data:
        raise InvalidPrivacyParameter(f"not a serialized DpEvent: {data!r}")
    kind = data["kind"]
    cls = _REGISTRY.get(kind)
    if cls is None:
        raise InvalidPrivacyParameter(f"unknown DpEvent kind {kind!r}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in data:
            raise InvalidPrivacyParameter(f"serialized {kind} lacks field {f.name!r}")
        v = data[f.name]
        if f.name == "event":
            v = event_from_dict(v)
        elif f.name == "events":
            v = tuple(event_from_dict(e) for e in v)
        kwargs[f.name] = v
    return cls(**kwargs)


def event_from_json(text: str) -> DpEvent:
    """Rebuild an event from :meth:`DpEvent.to_json` output."""
    return event_from_dict(json.loads(text))
