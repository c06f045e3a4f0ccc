"""The accountant interface shared by every privacy accountant of dperm.

An accountant reads :mod:`dperm.accounting.events` and nothing else.  Every
accountant follows the same protocol:

* :meth:`Accountant.supports` says whether an event can be accounted;
* :meth:`Accountant.compose` adds an event (``count`` times) and refuses an
  event it cannot account with :class:`~dperm.exceptions.UnsupportedEventError`
  *before* its state changes;
* :meth:`Accountant.get_epsilon` / :meth:`Accountant.get_delta` convert the
  composed state into an (ε, δ)-DP guarantee that is always valid (an upper
  bound): ε is never negative and never NaN (``math.inf`` when nothing can be
  certified), δ lies in [0, 1].

Subclasses implement two pure steps, :meth:`Accountant._prepare` (compute what
an event costs, raising ``UnsupportedEventError`` on refusal, without touching
state) and :meth:`Accountant._commit` (add the prepared cost to the state),
plus the two conversions :meth:`Accountant._epsilon` and :meth:`Accountant._delta`.
This split is what guarantees that a refused event leaves the accountant
unchanged.

Neighbouring relations.  Every accountant accounts for one relation,
``neighbouring`` (``"replace-one"`` by default, or ``"add-remove"``), given to
its constructor and part of :meth:`Accountant.get_config`.  An event of the
same relation is composed as it is.  An add/remove event composed into a
replace-one accountant is first converted with
:func:`~dperm.accounting.events.to_replace_one` (sound, see its proof); the
accountant keeps the *converted* event in :attr:`Accountant.events` and lists
each conversion in :attr:`Accountant.conversions`.  A replace-one event
composed into an add/remove accountant is refused with
:class:`~dperm.exceptions.UnsupportedEventError` before any state change: a
replace-one guarantee says nothing about datasets of different sizes.
Events that spend nothing (``NoOp``) compose with either relation.

The factory functions (:func:`~dperm.accounting.get_accountant`,
:func:`~dperm.accounting.epsilon_spent`, …) live in
:mod:`dperm.accounting.registry`, which imports the concrete accountants;
this module imports none of them.

Each accountant turns an event into its cost with one ``functools.singledispatch``
rule per event type; the rules that depend only on how events are built
(``NoOp``, ``NonPrivate``, ``SelfComposed``, ``Composed``) are written once, in
:func:`register_structural_rules`.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import math
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from .._validation import check_count, check_delta, check_nonnegative
from ..exceptions import UnsupportedEventError
from .events import (
    ADD_REMOVE,
    REPLACE_ONE,
    Composed,
    DpEvent,
    EpsilonDelta,
    NonPrivate,
    NoOp,
    PureEpsilon,
    SelfComposed,
    check_neighbouring,
    is_neutral,
    to_replace_one,
)

__all__ = ["Accountant", "Conversion", "register_multiset_rules", "register_structural_rules"]


def register_structural_rules(
    rule: Callable[..., Any],
    *,
    zero: Callable[..., Any],
    non_private: Callable[..., Any],
    repeat: Callable[[Any, int], Any],
    add: Callable[[Any, Any], Any],
    eps_delta: Callable[..., Any] | None = None,
) -> None:
    """Register on the ``functools.singledispatch`` function ``rule`` the cost of
    the events that only combine other events (or spend nothing / everything).

    * ``NoOp`` costs ``zero(*args)`` and ``NonPrivate`` ``non_private(*args)``;
    * ``SelfComposed(e, k)`` costs ``repeat(rule(e, *args), k)``, and
      ``zero(*args)`` when k = 0 — ``rule(e, *args)`` is evaluated first, so an
      event the accountant refuses is refused even at k = 0;
    * ``Composed((e₁, …, e_m))`` costs ``add(…add(add(zero(*args), rule(e₁, *args)),
      rule(e₂, *args))…)``, in the order of the events;
    * with ``eps_delta``: ``EpsilonDelta(ε, δ)`` costs ``eps_delta(ε, δ, *args)``
      and ``PureEpsilon(ε)``, an (ε, 0)-DP mechanism, ``eps_delta(ε, 0.0, *args)``.

    ``*args`` are the further arguments of ``rule`` (e.g. the RDP orders).
    Adaptive composition makes these the costs of every accountant here: RDP
    adds up (Mironov 2017, Proposition 1), and the (ε, δ) atoms and PLD terms
    are multisets composed by the accountant's own theorem.
    """

    def self_composed(event: SelfComposed, *args: Any) -> Any:
        inner = rule(event.event, *args)
        return zero(*args) if event.count == 0 else repeat(inner, event.count)

    def composed(event: Composed, *args: Any) -> Any:
        total = zero(*args)
        for e in event.events:
            total = add(total, rule(e, *args))
        return total

    rule.register(NoOp, lambda event, *args: zero(*args))
    rule.register(NonPrivate, lambda event, *args: non_private(*args))
    rule.register(SelfComposed, self_composed)
    rule.register(Composed, composed)
    if eps_delta is not None:
        rule.register(PureEpsilon, lambda event, *args: eps_delta(event.epsilon, 0.0, *args))
        rule.register(
            EpsilonDelta, lambda event, *args: eps_delta(event.epsilon, event.delta, *args)
        )


def _union(total: Counter[Any], part: Counter[Any]) -> Counter[Any]:
    total.update(part)
    return total


#: the ``Parameters`` and ``Returns`` of a multiset rule (``approx_dp_atoms``,
#: ``pld_terms``), composed into its docstring (:func:`dperm._docstrings.compose_doc`)
MULTISET_RULE = """
Parameters
----------
event : DpEvent

Returns
-------
collections.Counter
    Maps each part of ``event`` to how many times it is composed.
"""


def register_multiset_rules(
    rule: Callable[[DpEvent], Counter[Any]],
    *,
    non_private: Any,
    eps_delta: Callable[[float, float], Counter[Any]],
) -> None:
    """:func:`register_structural_rules` for an accountant that sees an event as
    a multiset of parts (``collections.Counter`` part → multiplicity): ``NoOp``
    is the empty multiset, ``NonPrivate`` the one part ``non_private``,
    repetition multiplies the multiplicities and composition is the union."""
    register_structural_rules(
        rule,
        zero=Counter,
        non_private=lambda: Counter({non_private: 1}),
        repeat=lambda parts, k: Counter({p: c * k for p, c in parts.items()}),
        add=_union,
        eps_delta=eps_delta,
    )


@dataclasses.dataclass(frozen=True)
class Conversion:
    """An add/remove event an accountant converted to replace-one.

    Attributes
    ----------
    original : DpEvent
        The event as composed (``neighbouring == "add-remove"``).
    converted : DpEvent
        ``to_replace_one(original)``, the event actually accounted.
    count : int
        How many times it was composed.
    """

    original: DpEvent
    converted: DpEvent
    count: int


class Accountant(abc.ABC):
    """Abstract privacy accountant (one interface for all of them).

    Attributes
    ----------
    name : str
        The name under which :func:`dperm.accounting.get_accountant` builds it.
    neighbouring : str
        The relation the certified (ε, δ) is for: ``"replace-one"`` or
        ``"add-remove"`` (see the module docstring).

    Parameters
    ----------
    neighbouring : str, default "replace-one"
        Validated with :func:`~dperm.accounting.events.check_neighbouring`.
    """

    name: ClassVar[str] = "abstract"

    def __init__(self, neighbouring: str = REPLACE_ONE) -> None:
        self.neighbouring = check_neighbouring(neighbouring)
        self._history: list[DpEvent] = []
        self._conversions: list[Conversion] = []

    def _admit(self, event: DpEvent) -> tuple[DpEvent, bool]:
        """(event to account, whether it was converted); refuses a wrong relation.

        Pure: raises before any state change.
        """
        if is_neutral(event) or event.neighbouring == self.neighbouring:
            return event, False
        if self.neighbouring == REPLACE_ONE:  # add/remove → replace-one is sound
            return to_replace_one(event), True
        raise UnsupportedEventError(
            f"{type(self).__name__} accounts {ADD_REMOVE!r} neighbours, but {event!r} is "
            f"stated for {event.neighbouring!r}: a replace-one guarantee does not imply an "
            "add/remove one (the mechanism may depend on the dataset size); account it with "
            "neighbouring='replace-one'"
        )

    # ------------------------------------------------------------------ API
    def supports(self, event: DpEvent) -> bool:
        """Whether :meth:`compose` would accept ``event`` now.

        Parameters
        ----------
        event : DpEvent

        Returns
        -------
        bool
            ``False`` for events the accountant cannot account (and, for the
            homogeneous accountants, for events that would break homogeneity
            with what was already composed, and for replace-one events in an
            add/remove accountant).
        """
        if not isinstance(event, DpEvent):
            return False
        try:
            self._prepare(self._admit(event)[0], 1)
        except UnsupportedEventError:
            return False
        return True

    def compose(self, event: DpEvent, count: int = 1) -> Accountant:
        """Compose ``event`` ``count`` times (adaptive composition).

        Parameters
        ----------
        event : DpEvent
        count : int, default 1
            Number of repetitions, ≥ 0.

        Returns
        -------
        self

        Notes
        -----
        An add/remove event in a replace-one accountant is converted with
        :func:`~dperm.accounting.events.to_replace_one`; the converted event is
        what :attr:`events` holds, and the conversion is listed in
        :attr:`conversions`.

        Raises
        ------
        UnsupportedEventError
            If the event cannot be accounted, or is a replace-one event in an
            add/remove accountant; the accountant is unchanged.
        InvalidPrivacyParameter
            If ``count`` is not an integer ≥ 0.
        """
        if not isinstance(event, DpEvent):
            raise UnsupportedEventError(
                f"{type(self).__name__} accounts DpEvent instances, got "
                f"{type(event).__name__}: {event!r}"
            )
        count = check_count(count, "count", minimum=0)
        admitted, converted = self._admit(event)  # raises before any state change
        prepared = self._prepare(admitted, count)  # raises before any state change
        self._commit(prepared, count)
        self._history.append(admitted if count == 1 else SelfComposed(admitted, count))
        if converted:
            self._conversions.append(Conversion(event, admitted, count))
        return self

    def get_epsilon(self, delta: float) -> float:
        """The smallest ε the accountant certifies at ``delta``.

        Parameters
        ----------
        delta : float
            Target δ in [0, 1).

        Returns
        -------
        float
            ε ≥ 0, ``math.inf`` when no finite ε can be certified.

        Raises
        ------
        InvalidPrivacyParameter
            If ``delta`` is not in [0, 1), NaN or not a real number.
        """
        delta = check_delta(delta, "delta", allow_zero=True)
        eps = float(self._epsilon(delta))
        if math.isnan(eps):  # never report NaN: fail closed
            return math.inf
        return max(0.0, eps)

    def get_delta(self, epsilon: float) -> float:
        """The smallest δ the accountant certifies at ``epsilon``.

        Parameters
        ----------
        epsilon : float
            Target ε ≥ 0 (``math.inf`` allowed).

        Returns
        -------
        float
            δ in [0, 1].

        Raises
        ------
        InvalidPrivacyParameter
            If ``epsilon`` is negative, NaN or not a real number.
        """
        epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=True)
        d = float(self._delta(epsilon))
        if math.isnan(d):
            return 1.0
        return min(1.0, max(0.0, d))

    def copy(self) -> Accountant:
        """An independent deep copy (state and configuration)."""
        return copy.deepcopy(self)

    @property
    def events(self) -> tuple[DpEvent, ...]:
        """The events accounted so far, in order (``count`` > 1 as
        :class:`SelfComposed`; converted events in their replace-one form)."""
        return tuple(self._history)

    @property
    def conversions(self) -> tuple[Conversion, ...]:
        """The add/remove events converted to replace-one so far, in order."""
        return tuple(self._conversions)

    def get_config(self) -> dict[str, Any]:
        """Keyword arguments that rebuild an empty accountant of the same kind
        with :func:`dperm.accounting.get_accountant` (JSON-compatible); always
        includes ``neighbouring``."""
        return {"neighbouring": self.neighbouring}

    def __repr__(self) -> str:
        cfg = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({cfg}) with {len(self._history)} event(s)"

    # ----------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def _prepare(self, event: DpEvent, count: int) -> Any:
        """Pure: the cost of ``event``; raise ``UnsupportedEventError`` to refuse."""

    @abc.abstractmethod
    def _commit(self, prepared: Any, count: int) -> None:
        """Add ``count`` times the prepared cost to the state."""

    @abc.abstractmethod
    def _epsilon(self, delta: float) -> float:
        """ε certified at a validated ``delta``."""

    @abc.abstractmethod
    def _delta(self, epsilon: float) -> float:
        """δ certified at a validated ``epsilon``."""
