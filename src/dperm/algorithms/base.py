"""The result every private algorithm returns, and the decorator that makes every public
private ``fit`` charge the active budgets (:func:`private_fit`)."""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
from typing import Any

import numpy as np

from ..accounting.active import accounted_call, default_delta
from ..accounting.events import ADD_REMOVE, REPLACE_ONE, DpEvent, EpsilonDelta
from ..exceptions import DpermError

__all__ = ["Result", "planned_event", "private_fit"]


@dataclasses.dataclass(frozen=True)
class Result:
    """A private release and what it cost.

    Attributes
    ----------
    theta : ndarray of shape (d,) or (d, k)
        The released parameter vector (already private; post-processing of it
        is free).
    event : DpEvent
        The privacy event that accountants read to report (ε, δ).
    diagnostics : dict
        Algorithm-specific facts: noise scale, regularization used, steps,
        ``n_clipped``, ``neighbouring`` ("replace-one" or "add-remove-one"),
        ``epsilon``/``delta`` targeted, … (all derived from public inputs or
        from the private output itself).
    """

    theta: np.ndarray
    event: DpEvent
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)


def _public_rows(arguments: dict[str, Any]) -> int | None:
    """n = the number of rows of the call's X (its shape: no value is read)."""
    for name in ("X", "X_private"):
        shape = getattr(arguments.get(name), "shape", None)
        if shape:
            n = shape[0]
            if isinstance(n, numbers.Integral) and n >= 2:
                return int(n)
    return None


def planned_event(
    signature: inspect.Signature, args: tuple, kwargs: dict[str, Any]
) -> DpEvent | None:
    """The event a call of a private ``fit`` reserves before it runs, from its arguments.

    A call with a target ``epsilon`` is calibrated to it: it reserves
    ``EpsilonDelta(epsilon, delta, neighbouring)`` (an upper bound of what the call
    releases; the commit then keeps the tighter of it and the reported event), with

    * ``delta`` the call's δ (0 for a function without one); ``delta=None``, which the
      functions that have it resolve to :func:`~dperm.accounting.active.default_delta`
      = min(1/n², 10⁻⁵) (replace-one: n = ``X.shape[0]`` is public), reserves that —
      read off the shape, never off the values;
    * the relation the call's ``neighbouring`` names; None, DP-SGD's default, is
      add/remove for ``sampling="poisson"`` and replace-one otherwise; replace-one for
      the functions without the parameter (every one of them is a replace-one
      mechanism).

    Returns None — the event is then reserved when the function announces it
    (:func:`dperm.accounting.active.planned`) — for a call without ``epsilon`` (a given
    ``noise_multiplier``: the event follows from the public plan the function computes)
    or with arguments the function will refuse itself.
    """
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None  # the call raises its own TypeError
    bound.apply_defaults()
    a = bound.arguments
    epsilon = a.get("epsilon")
    if epsilon is None:
        return None
    delta = a.get("delta", 0.0)
    if delta is None:
        n = _public_rows(a)
        if n is None or n < 2:
            return None
        delta = default_delta(int(n), budget_share=False)
    relation = a.get("neighbouring")
    if relation is None:
        poisson = "neighbouring" in a and a.get("sampling", "poisson") == "poisson"
        relation = ADD_REMOVE if poisson else REPLACE_ONE
    try:
        if not math.isfinite(float(epsilon)) or float(epsilon) <= 0:
            return None
        return EpsilonDelta(float(epsilon), float(delta), neighbouring=relation)
    except (DpermError, TypeError, ValueError):
        return None  # an invalid target: the function refuses it before anything runs


#: Decorator of every public private ``fit``/``fit_*`` of :mod:`dperm.algorithms` and of
#: :func:`dperm.networks.fit`: inside ``with dperm.budget(…):`` / ``ledger.active()`` a
#: direct call reserves :func:`planned_event` before it reads the data, commits the
#: ``Result``'s event, cancels on an exception; a call made by an estimator (which
#: holds the fit's reservation) charges nothing (:func:`dperm.accounting.active.accounted_call`).
private_fit = accounted_call(planned_event)
