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
"""

from __future__ import annotations

import abc
import copy
import math
from collections.abc import Callable
from typing import Any, ClassVar

from .._validation import check_count, check_delta, check_nonnegative
from ..exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
from .events import DpEvent, SelfComposed

__all__ = [
    "ACCOUNTANT_NAMES",
    "Accountant",
    "accountant_factory",
    "delta_spent",
    "epsilon_spent",
    "get_accountant",
]

_REGISTRY: dict[str, type[Accountant]] = {}

#: Names accepted by :func:`get_accountant`.
ACCOUNTANT_NAMES = ("basic", "advanced", "optimal", "rdp", "pld")


class Accountant(abc.ABC):
    """Abstract privacy accountant (one interface for all of them).

    Attributes
    ----------
    name : str
        The name under which :func:`dperm.accounting.get_accountant` builds it.
    """

    name: ClassVar[str] = "abstract"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name in ACCOUNTANT_NAMES:  # the concrete accountants of this package
            _REGISTRY[cls.name] = cls

    def __init__(self) -> None:
        self._history: list[DpEvent] = []

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
            with what was already composed).
        """
        if not isinstance(event, DpEvent):
            return False
        try:
            self._prepare(event, 1)
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

        Raises
        ------
        UnsupportedEventError
            If the event cannot be accounted; the accountant is unchanged.
        InvalidPrivacyParameter
            If ``count`` is not an integer ≥ 0.
        """
        if not isinstance(event, DpEvent):
            raise UnsupportedEventError(
                f"{type(self).__name__} accounts DpEvent instances, got "
                f"{type(event).__name__}: {event!r}"
            )
        count = check_count(count, "count", minimum=0)
        prepared = self._prepare(event, count)  # raises before any state change
        self._commit(prepared, count)
        self._history.append(event if count == 1 else SelfComposed(event, count))
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
        """The events composed so far, in order (``count`` > 1 as :class:`SelfComposed`)."""
        return tuple(self._history)

    def get_config(self) -> dict[str, Any]:
        """Keyword arguments that rebuild an empty accountant of the same kind
        with :func:`dperm.accounting.get_accountant` (JSON-compatible)."""
        return {}

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


# ------------------------------------------------------------------ factory
def _load_all() -> None:
    # importing the modules registers the concrete accountants
    from . import composition, pld, rdp  # noqa: F401


def get_accountant(name: str, **kwargs: Any) -> Accountant:
    """Build an empty accountant by name.

    Parameters
    ----------
    name : {"basic", "advanced", "optimal", "rdp", "pld"}
        Case-insensitive.
    **kwargs
        Passed to the accountant's constructor (e.g. ``orders=``,
        ``conversion=`` for ``"rdp"``, ``bound=`` for ``"advanced"``,
        ``value_discretization_interval=`` for ``"pld"``).

    Returns
    -------
    Accountant

    Raises
    ------
    UnknownNameError
        If ``name`` is not one of the names above.
    """
    if not isinstance(name, str) or name.strip().lower() not in ACCOUNTANT_NAMES:
        raise UnknownNameError(
            f"unknown accountant {name!r}; expected one of {', '.join(ACCOUNTANT_NAMES)}"
        )
    _load_all()
    return _REGISTRY[name.strip().lower()](**kwargs)


def accountant_factory(
    spec: str | Accountant | Callable[[], Accountant],
) -> Callable[[], Accountant]:
    """A zero-argument callable returning a fresh accountant for ``spec``.

    Parameters
    ----------
    spec : str, Accountant or callable
        A name for :func:`get_accountant`; an :class:`Accountant` instance
        (each call returns a copy of it, *including* what it already
        composed); or a callable (e.g. a class) returning an Accountant.

    Raises
    ------
    UnknownNameError
        For an unknown name.
    InvalidPrivacyParameter
        For anything else.
    """
    if isinstance(spec, str):
        get_accountant(spec)  # validate the name now
        return lambda: get_accountant(spec)
    if isinstance(spec, Accountant):
        return spec.copy
    if callable(spec):

        def build() -> Accountant:
            acc = spec()
            if not isinstance(acc, Accountant):
                raise InvalidPrivacyParameter(
                    f"accountant factory {spec!r} returned {type(acc).__name__}, not an Accountant"
                )
            return acc

        return build
    raise InvalidPrivacyParameter(
        f"accountant must be a name, an Accountant or a factory, got {type(spec).__name__}: "
        f"{spec!r}"
    )


def epsilon_spent(
    event: DpEvent, delta: float, accountant: str | Accountant | Callable[[], Accountant] = "rdp"
) -> float:
    """ε of ``event`` at ``delta`` under a fresh accountant.

    Parameters
    ----------
    event : DpEvent
    delta : float
        In [0, 1).
    accountant : str, Accountant or factory, default "rdp"
        See :func:`accountant_factory`.

    Returns
    -------
    float
        ε ≥ 0 (∞ if nothing finite can be certified).

    Raises
    ------
    UnsupportedEventError, InvalidPrivacyParameter, UnknownNameError
    """
    acc = accountant_factory(accountant)()
    return acc.compose(event).get_epsilon(delta)


def delta_spent(
    event: DpEvent, epsilon: float, accountant: str | Accountant | Callable[[], Accountant] = "rdp"
) -> float:
    """δ of ``event`` at ``epsilon`` under a fresh accountant.

    Parameters
    ----------
    event : DpEvent
    epsilon : float
        ε ≥ 0.
    accountant : str, Accountant or factory, default "rdp"

    Returns
    -------
    float
        δ in [0, 1].
    """
    acc = accountant_factory(accountant)()
    return acc.compose(event).get_delta(epsilon)
