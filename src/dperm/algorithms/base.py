"""The result every private algorithm returns, the decorator that makes every public
private ``fit`` charge the active budgets (:func:`private_fit`), and the checks every
``fit`` starts with (:func:`check_target`, :func:`check_rows`)."""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
from typing import Any

import numpy as np

from .._validation import check_data_norm, check_delta, check_delta_size, check_epsilon
from ..accounting.active import accounted_call, default_delta
from ..accounting.events import ADD_REMOVE, REPLACE_ONE, DpEvent, EpsilonDelta
from ..design import check_X_y
from ..exceptions import DpermError

__all__ = ["Result", "check_rows", "check_target", "planned_event", "private_fit"]


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


#: ``data_norm`` of :func:`check_target` when the algorithm takes no row bound
_NO_BOUND: Any = object()


def check_target(
    epsilon, delta, data_norm=_NO_BOUND, *, allow_zero_delta: bool = True
) -> tuple[float, float, float | None]:
    """(ε, δ, R) of a run, checked before anything else: ε > 0 finite, δ ∈ [0, 1)
    (δ > 0 for a mechanism without a pure-ε form: ``allow_zero_delta=False``) and the
    public row bound R (None when not passed: the algorithm takes none).

    Raises
    ------
    InvalidPrivacyParameter
        Naming the parameter and the value.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=allow_zero_delta)
    return epsilon, delta, None if data_norm is _NO_BOUND else check_data_norm(data_norm)


def check_rows(X, y, delta: float, loss=None) -> tuple[Any, np.ndarray, int, int]:
    """(X, y, n, d): X and y checked (:func:`dperm.design.check_X_y`; y by the label rule
    of ``loss`` when given), and δ < 1/n — a δ ≥ 1/n guarantees nothing, so it is refused
    (issue #32; n is public under replace-one).

    Raises
    ------
    InvalidDataError, LabelError
        Bad X or y.
    InvalidPrivacyParameter
        δ ≥ 1/n.
    """
    X, y = check_X_y(X, y)
    if loss is not None:
        y = loss.check_labels(y)
    n, d = X.shape
    check_delta_size(delta, n)
    return X, y, n, d
