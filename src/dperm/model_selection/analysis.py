"""The search's privacy analysis as pure functions: the base mechanism's RDP
curve, the whole search's ε (Papernot & Steinke 2022, Theorems 2 and 6) and the
calibration of the per-run ε (see :mod:`dperm.model_selection.search` for the
argument that one run's RDP is max(fit curve, Laplace score curve))."""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_delta, check_epsilon, check_positive
from ..accounting.events import DpEvent
from ..accounting.rdp import (
    DEFAULT_ORDERS,
    compute_rdp,
    rdp_laplace,
    rdp_pure_epsilon,
    rdp_to_epsilon,
)
from ..exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
from .repetitions import Poisson, TruncatedNegativeBinomial

__all__ = ["REPETITIONS", "calibrate_run_epsilon", "repetition_law", "run_rdp", "search_epsilon"]

#: the laws of the number of runs
REPETITIONS = ("truncated_negative_binomial", "geometric", "poisson")


def repetition_law(repetitions: str, mean_runs: float, eta: float):
    """The law of K named ``repetitions`` with E[K] = ``mean_runs``."""
    if repetitions == "poisson":
        return Poisson(mean_runs)
    if repetitions == "geometric":
        return TruncatedNegativeBinomial.from_mean(1.0, mean_runs)
    if repetitions == "truncated_negative_binomial":
        return TruncatedNegativeBinomial.from_mean(eta, mean_runs)
    raise UnknownNameError(
        f"unknown repetitions {repetitions!r}; choose one of {list(REPETITIONS)}"
    )


def run_rdp(run_epsilon: float, run_delta: float, run_event, orders: np.ndarray) -> np.ndarray:
    """RDP curve bounding one fit: the sharp curve of an ε_run-DP mechanism
    (Steinke 2024, Theorem 4, via :func:`~dperm.accounting.rdp.rdp_pure_epsilon`)
    when ``run_event`` is None, else the RDP of ``run_event(ε_run, δ_run)``."""
    if run_event is None:
        return rdp_pure_epsilon(run_epsilon, orders)
    event = run_event(run_epsilon, run_delta)
    if not isinstance(event, DpEvent):
        raise UnsupportedEventError(f"run_event must return a DpEvent, got {event!r}")
    return compute_rdp(event, orders)  # UnsupportedEventError when it has no RDP


def _base_rdp(
    run_epsilon: float, score_epsilon: float, orders: np.ndarray, run_delta=0.0, run_event=None
) -> np.ndarray:
    """Q's RDP: max(fit curve, Laplace(1/ε_s) curve) (module docstring)."""
    return np.maximum(
        run_rdp(run_epsilon, run_delta, run_event, orders),
        rdp_laplace(1.0 / score_epsilon, orders),
    )


def search_epsilon(
    run_epsilon: float,
    delta: float,
    *,
    repetitions: str = "truncated_negative_binomial",
    mean_runs: float = 10.0,
    eta: float = 0.0,
    score_epsilon: float | None = None,
    score_ratio: float = 1.0,
    run_event=None,
    run_delta: float = 0.0,
    orders=None,
) -> float:
    """ε at ``delta`` of the whole search for a per-run budget ε_run.

    Q's RDP is max(ρ_fit, ρ_Laplace(ε_s)) with ρ_fit the sharp curve of an
    ε_run-DP mechanism (``run_event`` None) or the RDP of
    ``run_event(ε_run, run_delta)``, and ε_s = ``score_epsilon`` (default
    ``score_ratio``·ε_run); the selection's RDP is Papernot & Steinke (2022) Theorem 2 or 6
    (:mod:`dperm.model_selection.repetitions`), converted with
    :func:`dperm.accounting.rdp_to_epsilon` (improved conversion).

    Parameters
    ----------
    run_epsilon : float > 0
    delta : float in (0, 1)
    repetitions : {"truncated_negative_binomial", "geometric", "poisson"}
    mean_runs : float
        E[K] (> 1; > 0 for Poisson).
    eta : float > −1
        Shape of the truncated negative binomial (ignored otherwise).
    score_epsilon : float > 0 or None
    score_ratio : float > 0
        ε_s / ε_run when ``score_epsilon`` is None.
    run_event : callable or None
        ``run_event(run_epsilon, run_delta) -> DpEvent`` bounding every run's fit.
    run_delta : float
        The δ each run is given (only passed to ``run_event``).
    orders : array-like of float > 1, optional

    Returns
    -------
    float
    """
    eps = check_epsilon(run_epsilon, "run_epsilon")
    delta = check_delta(delta, allow_zero=False)
    if score_epsilon is None:
        s_eps = eps * check_positive(score_ratio, "score_ratio")
    else:
        s_eps = check_epsilon(score_epsilon, "score_epsilon")
    a = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=np.float64)
    law = repetition_law(repetitions, mean_runs, eta)
    base = _base_rdp(eps, s_eps, a, run_delta, run_event)
    return rdp_to_epsilon(a, law.rdp(a, base), delta)[0]


def calibrate_run_epsilon(epsilon: float, delta: float, *, rtol: float = 1e-6, **kwargs) -> float:
    """Largest ε_run whose search costs at most ``epsilon`` at ``delta``.

    Bisection (in log ε_run) on :func:`search_epsilon`, which is non-decreasing
    in ε_run; the returned value always satisfies the target.  ``kwargs`` go to
    :func:`search_epsilon` (``score_epsilon`` None keeps ε_s = ε_run).

    Raises
    ------
    InvalidPrivacyParameter
        If no ε_run ≥ 1e-12·ε meets the target (δ far too small for it).
    """
    target = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    lo, hi = 1e-12 * target, target
    if search_epsilon(lo, delta, **kwargs) > target:
        raise InvalidPrivacyParameter(
            f"no per-run epsilon meets the search budget epsilon={target!r} at delta={delta!r}"
        )
    while search_epsilon(hi, delta, **kwargs) <= target and hi < 1e6 * target:
        lo, hi = hi, 2.0 * hi
    while hi - lo > rtol * lo:
        mid = math.sqrt(lo * hi)
        if search_epsilon(mid, delta, **kwargs) <= target:
            lo = mid
        else:
            hi = mid
    return lo
