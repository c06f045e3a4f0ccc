"""Step-size schedules for the gradient-perturbation algorithms.

A schedule is a callable ``t -> η_t`` for steps ``t = 1, 2, …, T``.  Step sizes
are public hyper-parameters: they never look at the data, so any schedule is
free post-processing as far as privacy is concerned.

* :class:`Constant` — η_t = η (the common choice for DP-SGD; Abadi et al. 2016).
* :class:`InverseSqrt` — η_t = η / √t, the classical rate for convex Lipschitz
  losses (projected stochastic subgradient method; last-iterate rate
  O(log T/√T), Shamir & Zhang, ICML 2013, Theorem 2); the step of Di Wang's
  Lecture 15, Lemma 15.6, η_t = ‖C‖/(L√t), is η = :func:`inverse_sqrt_learning_rate`.
* :class:`InverseTime` — η_t = 1/(α t) for α-strongly convex objectives
  (the strongly convex step of Bassily, Smith, Thakurta, FOCS 2014,
  Algorithm 1; last-iterate rate O(log T / T), Shamir & Zhang 2013,
  Theorem 1), optionally capped.

:func:`get_schedule` builds one from a name, a number or a callable.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ._validation import check_positive
from .exceptions import InvalidPrivacyParameter, UnknownNameError

__all__ = [
    "Callback",
    "Constant",
    "InverseSqrt",
    "InverseTime",
    "Schedule",
    "get_schedule",
    "inverse_sqrt_learning_rate",
]


class Schedule:
    """Base class: ``schedule(t)`` returns the step size η_t > 0 of step t ≥ 1."""

    def __call__(self, t: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def is_constant(self) -> bool:
        """True when η_t does not depend on t (lets loops skip the call)."""
        return False

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.__dict__.items()))))


class _Scaled(Schedule):
    """A schedule η_t = ``learning_rate`` · f(t) with a fixed shape f.

    Raises
    ------
    InvalidPrivacyParameter
        If ``learning_rate`` ≤ 0, NaN or infinite.
    """

    def __init__(self, learning_rate: float):
        self.learning_rate = check_positive(learning_rate, "learning_rate")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learning_rate={self.learning_rate!r})"


class Constant(_Scaled):
    """η_t = ``learning_rate`` for every t.

    Raises InvalidPrivacyParameter if ``learning_rate`` ≤ 0, NaN or infinite.
    """

    def __call__(self, t: int) -> float:
        return self.learning_rate

    @property
    def is_constant(self) -> bool:
        return True


class InverseSqrt(_Scaled):
    """η_t = ``learning_rate`` / √t (convex, Lipschitz losses).

    Raises InvalidPrivacyParameter if ``learning_rate`` ≤ 0, NaN or infinite.
    """

    def __call__(self, t: int) -> float:
        return self.learning_rate / math.sqrt(t)


def inverse_sqrt_learning_rate(diameter: float, gradient_bound: float) -> float:
    """η = D/G of the step η_t = η/√t for projected SGD over a set of diameter D with
    stochastic (sub)gradients of second moment E‖ĝ_t‖² ≤ G².

    It minimizes the last-iterate bound of Shamir & Zhang (ICML 2013, Theorem 2),
    (D²/η + ηG²)(2 + ln T)/√T, to 2DG(2 + ln T)/√T
    (:func:`dperm.theory.lecture15_sgd_bound`).  This is Di Wang's Lecture 15,
    Lemma 15.6's η_{t−1} = ‖C‖₂/(L√t) with the bound G of the *noisy* gradient
    ((15.5): G² ≤ σ²d + L²) in place of L — the G its bound (15.4) is stated with.
    Public: D is the constraint's, G is computed from the clipping norm, the batch
    and the calibrated noise.

    Raises
    ------
    InvalidPrivacyParameter
        If either number is ≤ 0, NaN or infinite.

    Examples
    --------
    >>> inverse_sqrt_learning_rate(4.0, 2.0)
    2.0
    """
    return check_positive(diameter, "diameter") / check_positive(gradient_bound, "gradient_bound")


class InverseTime(Schedule):
    """η_t = min(``max_learning_rate``, 1 / (α t)) for an α-strongly convex objective.

    This is the step of Bassily, Smith, Thakurta (FOCS 2014), Algorithm 1 in the
    strongly convex case.  The optional cap
    keeps the first steps stable when α is small; it changes no privacy
    property.

    Parameters
    ----------
    strong_convexity : float
        α > 0, the strong-convexity modulus of the (mean) objective.
    max_learning_rate : float, optional
        Cap on η_t (default: no cap).

    Raises
    ------
    InvalidPrivacyParameter
        If ``strong_convexity`` or ``max_learning_rate`` is ≤ 0, NaN or infinite.
    """

    def __init__(self, strong_convexity: float, max_learning_rate: float | None = None):
        self.strong_convexity = check_positive(strong_convexity, "strong_convexity")
        self.max_learning_rate = (
            None
            if max_learning_rate is None
            else check_positive(max_learning_rate, "max_learning_rate")
        )

    def __call__(self, t: int) -> float:
        eta = 1.0 / (self.strong_convexity * t)
        return eta if self.max_learning_rate is None else min(eta, self.max_learning_rate)

    def __repr__(self) -> str:
        return (
            f"InverseTime(strong_convexity={self.strong_convexity!r}, "
            f"max_learning_rate={self.max_learning_rate!r})"
        )


class Callback(Schedule):
    """Wrap a user function ``t -> η_t``; every value is checked to be finite and > 0.

    Raises
    ------
    InvalidPrivacyParameter
        When the function returns a value that is not a finite positive number.
    """

    def __init__(self, fn: Callable[[int], float]):
        if not callable(fn):
            raise InvalidPrivacyParameter(f"schedule must be callable, got {fn!r}")
        self.fn = fn

    def __call__(self, t: int) -> float:
        return check_positive(self.fn(t), f"learning rate returned by the schedule at step {t}")

    def __repr__(self) -> str:
        return f"Callback({self.fn!r})"


_NAMES = ("constant", "inverse_sqrt", "inverse_time")
#: the schedules fixed by a learning rate alone
_SCALED: dict[str, type[_Scaled]] = {"constant": Constant, "inverse_sqrt": InverseSqrt}


def get_schedule(
    schedule: str | Schedule | Callable[[int], float] | float | None = "constant",
    learning_rate: float | None = None,
    strong_convexity: float | None = None,
) -> Schedule:
    """Build a :class:`Schedule`.

    Parameters
    ----------
    schedule : {"constant", "inverse_sqrt", "inverse_time"}, Schedule, callable or float
        A name, a ready schedule, a function ``t -> η_t``, or a number (a
        constant step).  ``None`` means ``"constant"``.
    learning_rate : float, optional
        η for ``"constant"`` and ``"inverse_sqrt"``; the cap for ``"inverse_time"``.
    strong_convexity : float, optional
        α for ``"inverse_time"`` (required there).

    Returns
    -------
    Schedule

    Raises
    ------
    UnknownNameError
        For an unknown name.
    InvalidPrivacyParameter
        When a required number is missing or not a finite positive number.

    Examples
    --------
    >>> get_schedule("inverse_sqrt", learning_rate=0.5)(4)
    0.25
    """
    if schedule is None:
        schedule = "constant"
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str):
        scaled = _SCALED.get(schedule)
        if scaled is not None:
            if learning_rate is None:
                raise InvalidPrivacyParameter("learning_rate is required, got None")
            return scaled(learning_rate)
        if schedule == "inverse_time":
            if strong_convexity is None:
                raise InvalidPrivacyParameter(
                    "schedule='inverse_time' needs strong_convexity (α > 0), got None"
                )
            return InverseTime(strong_convexity, learning_rate)
        raise UnknownNameError(f"unknown schedule {schedule!r}; choose one of {list(_NAMES)}")
    if callable(schedule):
        return Callback(schedule)
    if isinstance(schedule, int | float) and not isinstance(schedule, bool):
        return Constant(schedule)
    raise InvalidPrivacyParameter(
        f"schedule must be a name, a Schedule, a callable or a number, got {schedule!r}"
    )
