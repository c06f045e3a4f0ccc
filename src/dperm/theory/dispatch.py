"""The two entry points of :mod:`dperm.theory`: :func:`theoretical_bound` (by
algorithm name and public quantities) and :func:`bound_for_estimator` (read off
a fitted estimator's public attributes).
"""

from __future__ import annotations

import math
from typing import Any

from .._validation import check_delta, check_positive
from ..bounds import _check_problem
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from ..losses.base import MARGIN_BOUND
from .base import TheoryBound, _diagnostics, _n_coef, _strong
from .exponential import _exponential
from .first_order import _frank_wolfe, _gradient_methods
from .perturbation import _amp, _bolt_on, _objective, _output
from .structured import _dual_fw_for_estimator, _structured_for_estimator

__all__ = ["ALGORITHMS", "bound_for_estimator", "theoretical_bound"]

ALGORITHMS = (
    "objective",
    "output",
    "amp",
    "amp-nt",
    "bolt-on",
    "dp-gd",
    "dp-sgd",
    "dp-sgd-single",
    "frank-wolfe",
    "exponential",
)


def theoretical_bound(
    algorithm: str,
    *,
    n: int,
    d: int,
    epsilon: float,
    delta: float = 0.0,
    lipschitz: float,
    smoothness: float | None = None,
    strong_convexity: float | None = None,
    radius: float | None = None,
    theta_norm: float | None = None,
    gamma: float | None = None,
    split=None,
    passes: int | None = None,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    n_candidates: int | None = None,
    loss_range: float | None = None,
) -> TheoryBound:
    """The expected excess empirical risk bound of ``algorithm`` (see :mod:`dperm.theory`).

    Parameters
    ----------
    algorithm : str
        One of :data:`ALGORITHMS`: ``"objective"``, ``"output"``, ``"amp"``,
        ``"amp-nt"``, ``"bolt-on"``, ``"dp-gd"``, ``"dp-sgd"``,
        ``"dp-sgd-single"``, ``"frank-wolfe"``, ``"exponential"``.
    n, d : int ≥ 1
        Number of records and of features.
    epsilon : float > 0
    delta : float in [0, 1), default 0
        Must be > 0 for the Gaussian-noise algorithms (AMP, DP-GD/SGD).
    lipschitz : float > 0
        L (Frank-Wolfe: the ℓ∞ gradient bound L₁).
    smoothness : float > 0, optional
        β; needed by AMP, AMP-NT, bolt-on, Frank-Wolfe and by the
        strongly convex objective-perturbation bound.
    strong_convexity : float ≥ 0, optional
        Λ of the (Λ/2)‖θ‖² term.  Required (> 0) for output perturbation; for
        objective perturbation, bolt-on and DP-GD/SGD it selects the strongly
        convex bound; for AMP it is AMP's ``alpha`` (default its minimum).
    radius : float > 0, optional
        sup_{θ∈C}‖θ‖₂ of the constraint set (ℓ1 radius for Frank-Wolfe).
    theta_norm : float > 0, optional
        Bound on ‖θ*‖, used when ``radius`` is None.
    gamma, split : optional
        AMP's gradient tolerance and budget split (see :func:`dperm.algorithms.amp.calibrate`).
    passes, batch_size, learning_rate : optional
        Bolt-on's k, b and η (defaults those of :func:`dperm.algorithms.bolt_on.fit`).
    n_candidates, loss_range : optional
        Exponential mechanism over a finite set: |Θ| and the per-example loss
        range Δ; without them the continuous-set rate of BST14 is returned.

    Returns
    -------
    TheoryBound

    Raises
    ------
    UnknownNameError
        Unknown ``algorithm``.
    InvalidPrivacyParameter
        Bad n, d, ε, δ, L, β, Λ, radius, or a quantity the chosen bound needs
        is missing (named in the message).

    Examples
    --------
    >>> b = theoretical_bound("dp-gd", n=1000, d=10, epsilon=1.0, delta=1e-5,
    ...                       lipschitz=1.0, radius=1.0)
    >>> f"{b.value:.5f}", b.constant_known
    ('0.01073', False)
    """
    if algorithm not in ALGORITHMS:
        raise UnknownNameError(
            f"unknown algorithm {algorithm!r} for theoretical_bound; choose one of "
            f"{list(ALGORITHMS)}"
        )
    n, d, epsilon = _check_problem(n, d, epsilon)
    delta = check_delta(delta)
    lip = check_positive(lipschitz, "lipschitz")
    beta = None if smoothness is None else check_positive(smoothness, "smoothness", allow_inf=True)
    if beta is not None and math.isinf(beta):
        beta = None
    lam = _strong(strong_convexity)

    if algorithm in ("dp-gd", "dp-sgd", "dp-sgd-single"):
        return _gradient_methods(algorithm, n, d, epsilon, delta, lip, lam, radius, theta_norm)
    if algorithm == "objective":
        return _objective(n, d, epsilon, delta, lip, beta, lam, radius, theta_norm)
    if algorithm == "output":
        return _output(n, d, epsilon, delta, lip, beta, lam)
    if algorithm in ("amp", "amp-nt"):
        return _amp(algorithm, n, d, epsilon, delta, lip, beta, lam, gamma, split)
    if algorithm == "bolt-on":
        return _bolt_on(
            n,
            d,
            epsilon,
            delta,
            lip,
            beta,
            lam,
            radius,
            theta_norm,
            passes,
            batch_size,
            learning_rate,
        )
    if algorithm == "frank-wolfe":
        return _frank_wolfe(n, d, epsilon, delta, lip, beta, radius)
    return _exponential(n, d, epsilon, lip, radius, theta_norm, n_candidates, loss_range)


def bound_for_estimator(estimator, n_samples: int) -> TheoryBound | None:
    """The :func:`theoretical_bound` of a fitted dperm estimator, for one of its
    binary problems (all one-vs-rest problems share it), or None when its
    mechanism has no entry in :data:`ALGORITHMS` or a needed quantity is missing.

    Everything is read from public fitted attributes: ``mechanism``, the loss,
    ``data_norm_`` (effective row bound, intercept column included), ``l2_``
    (Λ actually used), ``constraint_`` and the per-call ``diagnostics_``
    (ε, δ of one call; AMP's α and γ; bolt-on's k, b, η).  Without a constraint
    the convex bounds use ‖θ*‖ ≤ MARGIN_BOUND/R, the public prior of the
    estimators' defaults (:data:`dperm.losses.MARGIN_BOUND`).

    Parameters
    ----------
    estimator : fitted DPLogisticRegression, DPLinearSVC or DPLinearRegression
    n_samples : int
        Number of training rows.

    Returns
    -------
    TheoryBound or None
    """
    mechanism = getattr(estimator, "mechanism_", None) or getattr(estimator, "mechanism", None)
    if mechanism in ("structured-output", "dual-frank-wolfe"):
        if _diagnostics(estimator).get("denoise", "none") != "none":
            # the bounds below are for the raw release θ̂ + κ; the denoised release
            # has the high-probability distance bound of denoised_release_bound,
            # whose Ω(θ̂) is not public
            return None
    if mechanism == "structured-output":
        return _structured_for_estimator(estimator, n_samples)
    if mechanism == "dual-frank-wolfe":
        return _dual_fw_for_estimator(estimator, n_samples)
    if mechanism not in ALGORITHMS:
        return None
    dg = _diagnostics(estimator)
    k = len(estimator.diagnostics_) if isinstance(estimator.diagnostics_, list) else 1
    R = float(estimator.data_norm_)
    loss = estimator.loss_
    constraint = estimator.constraint_
    radius = None
    if constraint is not None:
        radius = float(getattr(constraint, "radius", None) or constraint.l2_radius)
    beta = loss.smoothness(R)
    kw: dict[str, Any] = {
        "n": n_samples,
        "d": _n_coef(estimator),
        "epsilon": float(dg.get("epsilon", estimator.epsilon_ / k)),
        "delta": float(dg.get("delta", estimator.delta_ / k)),
        "lipschitz": float(dg.get("lipschitz", loss.lipschitz(R, radius=radius))),
        "smoothness": beta if math.isfinite(beta) else None,
    }
    if mechanism in ("amp", "amp-nt"):
        if mechanism == "amp":
            kw.update(strong_convexity=dg["alpha"], gamma=dg["gamma"])
    elif mechanism == "bolt-on":
        kw.update(
            strong_convexity=dg["alpha"],
            passes=dg["passes"],
            batch_size=dg["batch_size"],
            learning_rate=dg["learning_rate"] if dg["variant"] == "convex" else None,
        )
    else:
        kw["strong_convexity"] = float(estimator.l2_)
    if mechanism == "frank-wolfe" and radius is None:
        radius = MARGIN_BOUND / R
    kw["radius"] = radius
    kw["theta_norm"] = MARGIN_BOUND / R
    if mechanism == "bolt-on" and dg["variant"] != "convex":
        kw.pop("radius")
    try:
        return theoretical_bound(mechanism, **kw)
    except InvalidPrivacyParameter:
        return None
