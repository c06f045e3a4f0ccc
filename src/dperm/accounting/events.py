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

Neighbouring relations
----------------------
Every event names the neighbouring relation its guarantee is stated for, in
the attribute ``neighbouring``:

* ``"replace-one"`` (:data:`REPLACE_ONE`): D and D′ have the same size n and
  differ in one record (n is public).  The default, and the relation every
  dperm estimator guarantees.
* ``"add-remove"`` (:data:`ADD_REMOVE`): D′ is D with one record added or
  removed (|D| is private; nothing of the run may be computed from it).

The leaf events (:class:`Gaussian`, :class:`Laplace`, :class:`PureEpsilon`,
:class:`EpsilonDelta`, :class:`NoOp`, :class:`NonPrivate`) take it as a
keyword field ``neighbouring=`` (default ``"replace-one"``).  A leaf's noise
multiplier is relative to the sensitivity *under its own relation*: the
largest change of the released statistic when one record is added or removed
(add/remove), or when one record is replaced (replace-one).  The wrappers
(:class:`SelfComposed`, :class:`PoissonSampled`,
:class:`SampledWithoutReplacement`, :class:`Composed`) derive it from their
inner event(s); a :class:`Composed` of events of different relations is
refused (:class:`NoOp` composes with either).  :func:`to_replace_one` converts
an add/remove event into a sound replace-one event; the converse does not
hold in general.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, ClassVar

from ..exceptions import InvalidPrivacyParameter, UnsupportedEventError

__all__ = [
    "ADD_REMOVE",
    "NEIGHBOURING_RELATIONS",
    "REPLACE_ONE",
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
    "check_neighbouring",
    "event_from_dict",
    "event_from_json",
    "is_neutral",
    "to_replace_one",
]

#: Replace-one neighbours: same size n (public), one record replaced.
REPLACE_ONE = "replace-one"
#: Add/remove-one neighbours: one record added or removed (|D| private).
ADD_REMOVE = "add-remove"
#: The relations an event can be stated for, canonical spellings.
NEIGHBOURING_RELATIONS = (REPLACE_ONE, ADD_REMOVE)

_RELATION_ALIASES = {
    "replace-one": REPLACE_ONE,
    "replace": REPLACE_ONE,
    "add-remove": ADD_REMOVE,
    "add-remove-one": ADD_REMOVE,
    "add-or-remove": ADD_REMOVE,
    "add-or-remove-one": ADD_REMOVE,
}


def check_neighbouring(value: Any, name: str = "neighbouring") -> str:
    """The canonical spelling of a neighbouring relation.

    Parameters
    ----------
    value : str
        ``"replace-one"`` or ``"add-remove"``; case, ``_``/space for ``-`` and
        the spellings ``"add-remove-one"``, ``"add-or-remove-one"`` are accepted.
    name : str, default "neighbouring"
        Parameter name used in the error message.

    Returns
    -------
    str
        :data:`REPLACE_ONE` or :data:`ADD_REMOVE`.

    Raises
    ------
    InvalidPrivacyParameter
        If ``value`` is not one of these spellings.

    Examples
    --------
    >>> check_neighbouring("add_remove")
    'add-remove'
    """
    if isinstance(value, str):
        key = re.sub(r"[\s_/]+", "-", value.strip().lower())
        if key in _RELATION_ALIASES:
            return _RELATION_ALIASES[key]
    raise InvalidPrivacyParameter(
        f"{name} must be one of {list(NEIGHBOURING_RELATIONS)}, got {value!r}"
    )


def _relation_field() -> Any:
    return dataclasses.field(default=REPLACE_ONE, kw_only=True)


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
        if not cls.__name__.startswith("_"):  # a shared base is not an event of its own
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
        out["neighbouring"] = self.neighbouring
        return out

    @property
    def neighbouring(self) -> str:
        """The neighbouring relation the event's guarantee is stated for."""
        raise NotImplementedError  # every concrete event overrides this

    def to_json(self) -> str:
        """The event as a JSON string (see :func:`event_from_json`)."""
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclasses.dataclass(frozen=True)
class NoOp(DpEvent):
    """An operation that touches no private data: costs nothing.

    It composes with events of either relation (see :class:`Composed`).
    """

    neighbouring: str = _relation_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", check_neighbouring(self.neighbouring))


@dataclasses.dataclass(frozen=True)
class NonPrivate(DpEvent):
    """An operation with no privacy guarantee: any accountant reports ε = ∞."""

    neighbouring: str = _relation_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", check_neighbouring(self.neighbouring))


@dataclasses.dataclass(frozen=True)
class _NoiseEvent(DpEvent):
    """Additive noise of ``noise_multiplier`` (a finite real ≥ 0; 0 means no privacy)
    per unit sensitivity under ``neighbouring``: the fields and checks of
    :class:`Gaussian` and :class:`Laplace` (not an event of its own)."""

    noise_multiplier: float
    neighbouring: str = _relation_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", check_neighbouring(self.neighbouring))
        s = _real(self.noise_multiplier, "noise_multiplier")
        if s < 0 or math.isinf(s):
            raise InvalidPrivacyParameter(
                f"noise_multiplier must be finite and ≥ 0, got {self.noise_multiplier!r}"
            )
        object.__setattr__(self, "noise_multiplier", s)


@dataclasses.dataclass(frozen=True)
class Gaussian(_NoiseEvent):
    """The Gaussian mechanism: f(D) + N(0, (σ Δ₂)² I), ``noise_multiplier`` = σ ≥ 0.

    σ = 0 is allowed and means *no* privacy (ε = ∞ for every δ < 1).
    Δ₂ is the ℓ2 sensitivity under ``neighbouring``: the largest change of the
    statistic when one record is added or removed (``"add-remove"``), or
    replaced (``"replace-one"``).
    """


@dataclasses.dataclass(frozen=True)
class Laplace(_NoiseEvent):
    """The Laplace mechanism: f(D) + Laplace(b Δ₁) per coordinate, ``noise_multiplier`` = b ≥ 0.

    It is (1/b)-DP (Dwork, McSherry, Nissim, Smith 2006) under ``neighbouring``,
    Δ₁ being the ℓ1 sensitivity under that relation.  b = 0 means no privacy.
    """


@dataclasses.dataclass(frozen=True)
class PureEpsilon(DpEvent):
    """A mechanism known only to be ε-DP (δ = 0), e.g. objective perturbation
    with Gamma-norm noise or the exponential mechanism (under ``neighbouring``)."""

    epsilon: float
    neighbouring: str = _relation_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", check_neighbouring(self.neighbouring))
        e = _real(self.epsilon, "epsilon")
        if e < 0:
            raise InvalidPrivacyParameter(f"epsilon must be ≥ 0, got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", e)


@dataclasses.dataclass(frozen=True)
class EpsilonDelta(DpEvent):
    """A mechanism known only to be (ε, δ)-DP under ``neighbouring``, e.g.
    Gaussian objective perturbation."""

    epsilon: float
    delta: float
    neighbouring: str = _relation_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", check_neighbouring(self.neighbouring))
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
    independently with probability ``sampling_rate`` q ∈ [0, 1].

    The relation (``neighbouring``, read-only) is the inner event's.  The inner
    mechanism runs on the sample, and its parameters are relative to the
    *sample-level* sensitivity under that relation.  For the usual clipped
    sum Σ_{i∈S} g(xᵢ) with ‖g‖ ≤ C plus N(0, s²) noise:

    * add/remove: one record changes the sum by at most C, so
      ``PoissonSampled(q, Gaussian(s / C, neighbouring="add-remove"))``;
    * replace-one: the replaced record changes it by ‖g(x) − g(x′)‖ ≤ 2C, so
      ``PoissonSampled(q, Gaussian(s / (2C), neighbouring="replace-one"))``.
      With σ = s / (2C) this is exactly dp-accounting's ``REPLACE_ONE``
      analysis of a Poisson-sampled Gaussian with standard deviation 2σ and
      sensitivity 1 (each record contributes at most 1 in those units); at
      q = 1 it is the plain ``Gaussian(σ)`` replace-one mechanism.
    """

    sampling_rate: float
    event: DpEvent

    def __post_init__(self) -> None:
        q = _real(self.sampling_rate, "sampling_rate")
        if not 0 <= q <= 1:
            raise InvalidPrivacyParameter(f"sampling_rate must be in [0, 1], got {q!r}")
        if not isinstance(self.event, DpEvent):
            raise InvalidPrivacyParameter(f"event must be a DpEvent, got {self.event!r}")
        object.__setattr__(self, "sampling_rate", q)

    @property
    def neighbouring(self) -> str:
        return self.event.neighbouring


@dataclasses.dataclass(frozen=True)
class SampledWithoutReplacement(DpEvent):
    """``event`` run on a uniformly random subset of exactly ``sample_size``
    records drawn without replacement from ``population_size`` records
    (replace-one neighbouring relation; Wang, Balle, Kasiviswanathan 2019).

    The relation is always replace-one (the population size is public and the
    amplification bound is for substitution); an add/remove inner event is
    refused at construction (convert it with :func:`to_replace_one` first).
    """

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
        if self.event.neighbouring != REPLACE_ONE and not is_neutral(self.event):
            raise InvalidPrivacyParameter(
                "SampledWithoutReplacement is stated for replace-one neighbours "
                "(Wang, Balle, Kasiviswanathan 2019); got an inner event with "
                f"neighbouring={self.event.neighbouring!r}: convert it with to_replace_one"
            )

    @property
    def neighbouring(self) -> str:
        return REPLACE_ONE


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

    @property
    def neighbouring(self) -> str:
        return self.event.neighbouring


@dataclasses.dataclass(frozen=True)
class Composed(DpEvent):
    """The adaptive composition of several events, in order.

    All events must be stated for the same relation, which is the
    ``neighbouring`` of the composition; :class:`NoOp` (and compositions of
    NoOps only) compose with either.  An empty composition, or one of NoOps
    with different relations, is replace-one.

    Raises
    ------
    InvalidPrivacyParameter
        If two events have different relations (no silent mixing: convert
        add/remove events with :func:`to_replace_one` first).
    """

    events: tuple[DpEvent, ...]

    def __post_init__(self) -> None:
        evs = tuple(self.events)
        for e in evs:
            if not isinstance(e, DpEvent):
                raise InvalidPrivacyParameter(f"events must be DpEvents, got {e!r}")
        object.__setattr__(self, "events", evs)
        rels = {e.neighbouring for e in evs if not is_neutral(e)}
        if len(rels) > 1:
            raise InvalidPrivacyParameter(
                "Composed events must share one neighbouring relation, got "
                f"{sorted(rels)}; convert the add-remove events with to_replace_one"
            )

    @property
    def neighbouring(self) -> str:
        rels = {e.neighbouring for e in self.events if not is_neutral(e)}
        if not rels:
            rels = {e.neighbouring for e in self.events}
        return rels.pop() if len(rels) == 1 else REPLACE_ONE


def is_neutral(event: DpEvent) -> bool:
    """Whether ``event`` spends nothing under either relation: a :class:`NoOp`,
    possibly wrapped in ``SelfComposed``/``Composed``/sampling events.  Such
    events compose with events and accountants of either relation."""
    if isinstance(event, NoOp):
        return True
    if isinstance(event, Composed):
        return all(is_neutral(e) for e in event.events)
    if isinstance(event, SelfComposed | PoissonSampled | SampledWithoutReplacement):
        return is_neutral(event.event)
    return False


# ------------------------------------------------------------- conversion
def _halve_noise(event: Gaussian | Laplace) -> DpEvent:
    return type(event)(event.noise_multiplier / 2.0, neighbouring=REPLACE_ONE)


def to_replace_one(event: DpEvent) -> DpEvent:
    """A replace-one event that soundly describes an add/remove ``event``.

    Replace-one events are returned unchanged.  The conversion rests on one
    fact: a replacement is a removal followed by an addition, so replace-one
    neighbours D ≃ D′ are at add/remove distance 2 through D ∖ {x}.

    * ``Gaussian(σ)``, ``Laplace(b)``: a statistic f with add/remove
      sensitivity Δ has replace-one sensitivity ≤ 2Δ (triangle inequality:
      ‖f(D) − f(D′)‖ ≤ ‖f(D) − f(D∖{x})‖ + ‖f(D∖{x}) − f(D′)‖), so noise
      σΔ = (σ/2)(2Δ) is ``Gaussian(σ/2)`` replace-one (likewise ``Laplace(b/2)``).
    * ``PureEpsilon(ε)`` → ``PureEpsilon(2ε)`` (group privacy for a group of 2,
      Dwork & Roth 2014, Thm 2.2).
    * ``EpsilonDelta(ε, δ)`` → ``EpsilonDelta(2ε, min(1, (1 + e^ε) δ))``:
      P[M(D) ∈ S] ≤ e^ε P[M(D∖{x}) ∈ S] + δ ≤ e^ε (e^ε P[M(D′) ∈ S] + δ) + δ
      (group privacy, Dwork & Roth 2014 §2.3; Vadhan 2017, Lemma 2.2).
    * ``PoissonSampled(q, E)`` → ``PoissonSampled(q, to_replace_one(E))``: the
      inner mechanism runs on the sample, and samples of replace-one neighbours
      are replace-one neighbours (or equal), so the inner conversion applies
      at the sample level.  For ``E = Gaussian(σ)`` this gives
      ``PoissonSampled(q, Gaussian(σ/2, "replace-one"))``, whose tight
      replace-one PLD the PLD accountant computes.
    * ``SelfComposed``, ``Composed``: converted element-wise (composition
      theorems hold under either relation).
    * ``NoOp``, ``NonPrivate``: the same event, relabelled.

    Parameters
    ----------
    event : DpEvent

    Returns
    -------
    DpEvent
        An event with ``neighbouring == "replace-one"``.

    Raises
    ------
    InvalidPrivacyParameter
        If ``event`` is not a DpEvent.
    UnsupportedEventError
        For an event type with no known sound conversion.

    Notes
    -----
    The converse (replace-one → add/remove) is not sound in general: a
    replace-one guarantee says nothing about datasets of different sizes (the
    mechanism may read n), so there is no ``to_add_remove``.

    Examples
    --------
    >>> to_replace_one(PureEpsilon(0.5, neighbouring="add-remove"))
    PureEpsilon(epsilon=1.0, neighbouring='replace-one')
    """
    if not isinstance(event, DpEvent):
        raise InvalidPrivacyParameter(f"event must be a DpEvent, got {event!r}")
    if event.neighbouring == REPLACE_ONE:
        return event
    if isinstance(event, Gaussian | Laplace):
        return _halve_noise(event)
    if isinstance(event, PureEpsilon):
        return PureEpsilon(2.0 * event.epsilon, neighbouring=REPLACE_ONE)
    if isinstance(event, EpsilonDelta):
        eps, delta = event.epsilon, event.delta
        grown = (1.0 + math.exp(min(eps, 700.0))) * delta  # e^700·δ ≤ 1e305: finite
        return EpsilonDelta(2.0 * eps, min(1.0, grown), neighbouring=REPLACE_ONE)
    if isinstance(event, NoOp | NonPrivate):
        return type(event)(neighbouring=REPLACE_ONE)
    if isinstance(event, PoissonSampled):
        return PoissonSampled(event.sampling_rate, to_replace_one(event.event))
    if isinstance(event, SelfComposed):
        return SelfComposed(to_replace_one(event.event), event.count)
    if isinstance(event, Composed):
        return Composed(tuple(to_replace_one(e) for e in event.events))
    raise UnsupportedEventError(
        f"no sound replace-one conversion is known for {type(event).__name__}: {event!r}"
    )


def event_from_dict(data: dict[str, Any]) -> DpEvent:
    """Rebuild an event from :meth:`DpEvent.to_dict` output.

    A leaf without a ``"neighbouring"`` key (files written before relations
    were recorded) loads as replace-one.

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
            if f.default is not dataclasses.MISSING:  # e.g. neighbouring: older files
                continue
            raise InvalidPrivacyParameter(f"serialized {kind} lacks field {f.name!r}")
        v = data[f.name]
        if f.name == "event":
            v = event_from_dict(v)
        elif f.name == "events":
            v = tuple(event_from_dict(e) for e in v)
        kwargs[f.name] = v
    event = cls(**kwargs)
    stated = data.get("neighbouring")
    if stated is not None and check_neighbouring(stated) != event.neighbouring:
        raise InvalidPrivacyParameter(
            f"serialized {kind} states neighbouring={stated!r} but its events are "
            f"{event.neighbouring!r}"
        )
    return event


def event_from_json(text: str) -> DpEvent:
    """Rebuild an event from :meth:`DpEvent.to_json` output."""
    return event_from_dict(json.loads(text))
