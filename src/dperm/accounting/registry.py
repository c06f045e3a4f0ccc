"""Build accountants by name and account single events.

This is the one module that knows every concrete accountant: it imports
:mod:`.composition`, :mod:`.rdp`, :mod:`.pld` and :mod:`.auto`, and nothing
below it imports it back (``base.py`` knows no subclass), so the accounting
package has no import circle.  Everything here is re-exported by
:mod:`dperm.accounting`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._docstrings import compose_doc
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from .auto import AutoAccountant
from .base import Accountant
from .composition import (
    AdvancedCompositionAccountant,
    BasicCompositionAccountant,
    OptimalCompositionAccountant,
)
from .events import DpEvent, check_neighbouring
from .pld import PldAccountant
from .rdp import RdpAccountant

__all__ = [
    "ACCOUNTANT_NAMES",
    "accountant_factory",
    "delta_spent",
    "epsilon_spent",
    "get_accountant",
]

_CLASSES: dict[str, type[Accountant]] = {
    cls.name: cls
    for cls in (
        BasicCompositionAccountant,
        AdvancedCompositionAccountant,
        OptimalCompositionAccountant,
        RdpAccountant,
        PldAccountant,
        AutoAccountant,
    )
}

#: Names accepted by :func:`get_accountant`.
ACCOUNTANT_NAMES = tuple(_CLASSES)


def get_accountant(name: str, **kwargs: Any) -> Accountant:
    """Build an empty accountant by name.

    Parameters
    ----------
    name : {"basic", "advanced", "optimal", "rdp", "pld", "auto"}
        Case-insensitive.
    **kwargs
        Passed to the accountant's constructor: ``neighbouring=`` for every
        accountant (default ``"replace-one"``), and e.g. ``orders=``,
        ``conversion=`` for ``"rdp"``, ``bound=`` for ``"advanced"``,
        ``value_discretization_interval=`` for ``"pld"``, ``methods=`` for
        ``"auto"``.

    Returns
    -------
    Accountant

    Raises
    ------
    UnknownNameError
        If ``name`` is not one of the names above.
    InvalidPrivacyParameter
        For an invalid ``neighbouring`` (or other parameter).

    Examples
    --------
    >>> get_accountant("rdp", neighbouring="add-remove").neighbouring
    'add-remove'
    """
    if not isinstance(name, str) or name.strip().lower() not in _CLASSES:
        raise UnknownNameError(
            f"unknown accountant {name!r}; expected one of {', '.join(ACCOUNTANT_NAMES)}"
        )
    return _CLASSES[name.strip().lower()](**kwargs)


def accountant_factory(
    spec: str | Accountant | Callable[[], Accountant],
    *,
    neighbouring: str | None = None,
) -> Callable[[], Accountant]:
    """A zero-argument callable returning a fresh accountant for ``spec``.

    Parameters
    ----------
    spec : str, Accountant or callable
        A name for :func:`get_accountant`; an :class:`Accountant` instance
        (each call returns a copy of it, *including* what it already
        composed); or a callable (e.g. a class) returning an Accountant.
    neighbouring : str, optional
        The relation of the accountants built from a name (default
        replace-one).  For an instance or a factory it is checked instead:
        an accountant of another relation is refused.

    Raises
    ------
    UnknownNameError
        For an unknown name.
    InvalidPrivacyParameter
        For anything else, or an accountant whose relation is not
        ``neighbouring``.
    """
    rel = None if neighbouring is None else check_neighbouring(neighbouring)
    if isinstance(spec, str):
        kwargs = {} if rel is None else {"neighbouring": rel}
        get_accountant(spec, **kwargs)  # validate the name now
        return lambda: get_accountant(spec, **kwargs)

    def checked(acc: Any) -> Accountant:
        if not isinstance(acc, Accountant):
            raise InvalidPrivacyParameter(
                f"accountant factory {spec!r} returned {type(acc).__name__}, not an Accountant"
            )
        if rel is not None and acc.neighbouring != rel:
            raise InvalidPrivacyParameter(
                f"the accountant accounts neighbouring={acc.neighbouring!r}, but "
                f"neighbouring={rel!r} was asked for"
            )
        return acc

    if isinstance(spec, Accountant):
        checked(spec)
        return spec.copy
    if callable(spec):
        return lambda: checked(spec())
    raise InvalidPrivacyParameter(
        f"accountant must be a name, an Accountant or a factory, got {type(spec).__name__}: "
        f"{spec!r}"
    )


def _fresh_for(
    event: DpEvent,
    accountant: str | Accountant | Callable[[], Accountant],
    neighbouring: str | None,
) -> Accountant:
    if not isinstance(event, DpEvent):
        raise InvalidPrivacyParameter(f"event must be a DpEvent, got {event!r}")
    if neighbouring is None and isinstance(accountant, str):
        neighbouring = event.neighbouring
    return accountant_factory(accountant, neighbouring=neighbouring)()


#: the accountant of :func:`epsilon_spent` and :func:`delta_spent` (built fresh by
#: :func:`_fresh_for`), composed into their docstrings
_FRESH_ACCOUNTANT = """
accountant : str, Accountant or factory, default "rdp"
    See :func:`accountant_factory`.  ``"auto"`` reports the smallest bound of
    every accountant that accepts the event.
neighbouring : str, optional
    The relation the bound is for.  Default: the event's own relation (for an
    accountant given by name; an instance or factory keeps its own).  With
    ``"replace-one"`` an add/remove event is converted with
    :func:`~dperm.accounting.events.to_replace_one`; ``"add-remove"`` for a
    replace-one event is refused.
"""


@compose_doc(accountant=_FRESH_ACCOUNTANT)
def epsilon_spent(
    event: DpEvent,
    delta: float,
    accountant: str | Accountant | Callable[[], Accountant] = "rdp",
    *,
    neighbouring: str | None = None,
) -> float:
    """ε of ``event`` at ``delta`` under a fresh accountant.

    Parameters
    ----------
    event : DpEvent
    delta : float
        In [0, 1).
    {accountant}

    Returns
    -------
    float
        ε ≥ 0 (∞ if nothing finite can be certified), for the relation used.

    Raises
    ------
    UnsupportedEventError, InvalidPrivacyParameter, UnknownNameError

    Examples
    --------
    >>> from dperm.accounting import Gaussian, PureEpsilon
    >>> epsilon_spent(PureEpsilon(0.5, neighbouring="add-remove"), 0.0, "basic")
    0.5
    >>> epsilon_spent(
    ...     PureEpsilon(0.5, neighbouring="add-remove"), 0.0, "basic", neighbouring="replace-one"
    ... )
    1.0
    """
    acc = _fresh_for(event, accountant, neighbouring)
    return acc.compose(event).get_epsilon(delta)


@compose_doc(accountant=_FRESH_ACCOUNTANT)
def delta_spent(
    event: DpEvent,
    epsilon: float,
    accountant: str | Accountant | Callable[[], Accountant] = "rdp",
    *,
    neighbouring: str | None = None,
) -> float:
    """δ of ``event`` at ``epsilon`` under a fresh accountant.

    Parameters
    ----------
    event : DpEvent
    epsilon : float
        ε ≥ 0.
    {accountant}

    Returns
    -------
    float
        δ in [0, 1], for the relation used.

    Raises
    ------
    UnsupportedEventError, InvalidPrivacyParameter, UnknownNameError
    """
    acc = _fresh_for(event, accountant, neighbouring)
    return acc.compose(event).get_delta(epsilon)
