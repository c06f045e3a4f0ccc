"""The estimators' parameters, checked up front from one declarative table each.

Every dperm estimator declares what each of its ``__init__`` parameters accepts in
one class attribute, ``_parameter_constraints`` — scikit-learn's convention: a dict
``name → list of constraints``, a value being valid when it satisfies one of them.
The constraints are scikit-learn's (:mod:`sklearn.utils._param_validation`): None,
a type, ``"array-like"``, ``"boolean"``, ``"verbose"``, ``callable``,
:class:`~sklearn.utils._param_validation.StrOptions`, …, with the number
constraints of this module in place of scikit-learn's ``Interval``.

``fit`` calls :func:`validate_params` as its first statement — before it reads the
data and before any budget is reserved — so a bad value is refused whatever
mechanism the fit would run (issue #36: ``max_iter=-5`` or ``tol=nan`` used to pass
when the mechanism that ran did not read them).  The error is a dperm exception
naming the estimator, the parameter, the value and what is accepted:

* :class:`~dperm.exceptions.UnknownNameError` — a string where the parameter takes
  names only (a mechanism, a penalty, an accountant, …);
* :class:`~dperm.exceptions.InvalidPrivacyParameter` — anything else.

Both are ValueError subclasses, as scikit-learn's InvalidParameterError is.  The
checks here are the type and range each parameter has for every mechanism; what a
parameter must satisfy for one mechanism only, or together with the data (δ < 1/n,
a radius a mechanism needs), stays with that mechanism or with ``fit``.

Numbers differ from scikit-learn's ``Interval`` in one respect, as everywhere in
dperm (:mod:`dperm._validation`): a bool is not a number (``epsilon=True`` is a
mistake, not ε = 1).  A :class:`Count` takes an integral float (``100.0``),
as :func:`dperm._validation.check_count` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    Options,
    StrOptions,
    _Booleans,
    _InstancesOf,
    _VerboseHelper,
    make_constraint,
)

from .exceptions import InvalidPrivacyParameter, UnknownNameError

__all__ = [
    "RANDOM_STATE",
    "Accepted",
    "Count",
    "HasMethods",
    "Names",
    "Number",
    "nonnegative",
    "positive",
    "store_params",
    "unit_interval",
    "validate_params",
]


def store_params(estimator, arguments: Mapping[str, object]) -> None:
    """Store every ``__init__`` argument on ``estimator`` under its own name, unchanged.

    scikit-learn's contract (``get_params``, ``clone``, ``parametrize_with_checks``)
    reads the parameters off the signature of ``__init__``, which must store them
    unchanged and do nothing else.  Called as ``store_params(self, locals())`` as the
    only statement of an explicit ``__init__`` (before any other local exists), or
    with the bound arguments by the ``__init__`` of
    :func:`dperm.estimators._params.estimator_parameters`, so that the attributes set
    are exactly the parameters of the signature.
    """
    for name, value in arguments.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


class Number(Interval):
    """scikit-learn's ``Interval`` (of ``Real`` or ``Integral`` numbers) without bool.

    NaN is never inside (scikit-learn's rule); ∞ is inside only when the interval is
    unbounded and closed on that side."""

    def __init__(self, type, left, right, *, closed: str = "neither"):
        super().__init__(type, left, right, closed=closed)

    def is_satisfied_by(self, val) -> bool:
        return not isinstance(val, bool | np.bool_) and super().is_satisfied_by(val)

    def __str__(self) -> str:
        left = "-inf" if self.left is None else f"{self.left:g}"
        right = "inf" if self.right is None else f"{self.right:g}"
        opening = "[" if self.closed in ("left", "both") else "("
        closing = "]" if self.closed in ("right", "both") else ")"
        kind = "an int" if self.type is Integral else "a number"
        return f"{kind} in the range {opening}{left}, {right}{closing}"


class Count(Number):
    """An integer ≥ ``minimum``; an integral float (``100.0``) counts, as in
    :func:`dperm._validation.check_count`."""

    def __init__(self, minimum: int = 1):
        super().__init__(Integral, minimum, None, closed="left")

    def is_satisfied_by(self, val) -> bool:
        if isinstance(val, float | np.floating) and float(val).is_integer():
            val = int(val)
        return super().is_satisfied_by(val)


def positive(right=None, closed: str = "neither") -> Number:
    """A number > 0, finite (or ≤ ``right``)."""
    return Number(Real, 0, right, closed=closed)


def nonnegative() -> Number:
    """A finite number ≥ 0."""
    return Number(Real, 0, None, closed="left")


def unit_interval(closed: str = "both") -> Number:
    """A number in [0, 1] (``closed`` as scikit-learn's ``Interval``)."""
    return Number(Real, 0, 1, closed=closed)


class Names(Options):
    """A set of names, in the order given (the error lists them so) or read when a value
    is checked (a callable: a registry that grows after the table is written, like the
    registered mechanisms), compared case-insensitively when
    ``casefold`` (the accountants' names, as :func:`dperm.accounting.get_accountant`);
    ``what`` names the set in the error message."""

    def __init__(
        self,
        names: Iterable[str] | Callable[[], Iterable[str]],
        *,
        casefold: bool = False,
        what: str | None = None,
    ):
        super().__init__(str, set())
        self.names = names
        self.casefold = casefold
        self.what = what

    def _current(self) -> list[str]:
        return list(self.names() if callable(self.names) else self.names)

    def is_satisfied_by(self, val) -> bool:
        if not isinstance(val, str):
            return False
        names = self._current()
        if self.casefold:
            return val.casefold() in {n.casefold() for n in names}
        return val in names

    def __str__(self) -> str:
        names = self._current()
        if self.what is not None:
            return f"one of the {self.what} {names}"
        return repr(names[0]) if len(names) == 1 else f"one of {names}"


class Accepted(Options):
    """The values a dperm check accepts: ``check(value)`` returns without an
    InvalidPrivacyParameter or UnknownNameError (the spellings of a neighbouring
    relation, a device name, …); ``what`` says what they are in the error message.
    Any other exception of ``check`` (a missing optional dependency) propagates."""

    def __init__(self, check: Callable[[object], object], what: str):
        super().__init__(object, set())
        self.check = check
        self.what = what

    def is_satisfied_by(self, val) -> bool:
        try:
            self.check(val)
        except (InvalidPrivacyParameter, UnknownNameError):
            return False
        return True

    def __str__(self) -> str:
        return self.what


#: ``random_state``: None (fresh OS entropy), a seed ≥ 0, a SeedSequence or a Generator
#: (:func:`dperm._rng.check_random_state`; a legacy ``RandomState`` is refused)
RANDOM_STATE = [
    None,
    Number(Integral, 0, None, closed="left"),
    np.random.SeedSequence,
    np.random.Generator,
]


def _names_only(constraints) -> bool:
    """Whether a string is refused as an unknown *name*: the parameter takes names
    and no number (``alpha="x"`` is a bad number, ``penalty="x"`` an unknown name)."""
    return any(isinstance(c, Names | StrOptions) for c in constraints) and not any(
        isinstance(c, Interval) for c in constraints
    )


def _describe(constraint) -> str:
    """What ``constraint`` accepts, in words (scikit-learn's, shortened for types)."""
    if isinstance(constraint, _Booleans):
        return "a bool"
    if isinstance(constraint, _VerboseHelper):
        return "a bool or an int ≥ 0"
    if isinstance(constraint, _InstancesOf):
        return f"a {constraint.type.__name__}"
    return str(constraint)


def _accepted(constraints) -> str:
    shown = [_describe(c) for c in constraints if not c.hidden]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def validate_params(estimator) -> None:
    """Check every parameter of ``estimator`` against its class's ``_parameter_constraints``.

    Called first in ``fit``: before the data is read and before any budget is
    reserved.  A parameter without an entry is a programming error (KeyError): every
    parameter has one (``"no_validation"`` says so explicitly).

    Raises
    ------
    UnknownNameError
        A string where the parameter takes names only; the message lists them.
    InvalidPrivacyParameter
        Any other value outside the parameter's constraints; the message names the
        parameter, the value and what is accepted.
    """
    table = type(estimator)._parameter_constraints
    owner = type(estimator).__name__
    for name, value in estimator.get_params(deep=False).items():
        spec = table[name]
        if spec == "no_validation":
            continue
        constraints = [make_constraint(c) for c in spec]
        if any(c.is_satisfied_by(value) for c in constraints):
            continue
        error = (
            UnknownNameError
            if isinstance(value, str) and _names_only(constraints)
            else InvalidPrivacyParameter
        )
        raise error(f"{owner}: {name} must be {_accepted(constraints)}, got {value!r}")
