"""The two entry points of :mod:`dperm.theory`: :func:`theoretical_bound` (by
algorithm name and public quantities) and :func:`bound_for_estimator` (read off
a fitted estimator's public attributes).
"""

from __future__ import annotations

import math
from typing import Any

from .._validation import check_delta, check_nonnegative, check_positive
from ..bounds import _check_problem, expmech_erm_bound, sgd_gradient_second_moment
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from ..losses.base import MARGIN_BOUND
from . import seeds
from .base import TheoryBound, _diagnostics, _e_norm_gaussian, _n_coef, _need, _radius, _strong
from .exponential import _exponential
from .first_order import _frank_wolfe, _gradient_methods
from .perturbation import _amp, _bolt_on, _objective, _output
from .seeds import lecture15_sgd_bound
from .structured import (
    _dual_fw_for_estimator,
    _norm_and_width,
    _structured_for_estimator,
    _vertex_set,
)

__all__ = ["ALGORITHMS", "bound_for_estimator", "seed_bounds_for_estimator", "theoretical_bound"]

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
    steps: int | None = None,
    noise_std: float | None = None,
    clipping_norm: float | None = None,
    sampling_rate: float | None = None,
    schedule: str = "constant",
    averaging: str = "last",
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
        range Δ; without them the continuous-set bound of Smith & Ullman,
        Lecture 11, Theorem 2.5 (in expectation, its proof's constants) is
        returned.
    steps, noise_std, clipping_norm, sampling_rate, schedule, averaging : optional
        The gradient methods' run: T, the noise std per coordinate of the
        averaged gradient, C, the sampling rate q (expected batch ``batch_size``),
        the step-size schedule and the returned iterate.  With ``steps`` the
        bound is Lecture 15's for that run (:func:`dperm.theory.seeds.lecture15_sgd_bound`,
        needs ``learning_rate``, ``noise_std``, ``clipping_norm`` ≥ L); without it
        the BST14 rate.

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
        if steps is not None:
            return _lecture15(
                d,
                lip,
                lam,
                radius,
                theta_norm,
                steps,
                learning_rate,
                noise_std,
                clipping_norm,
                sampling_rate,
                batch_size,
                schedule,
                averaging,
            )
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


def _lecture15(d, lip, lam, radius, theta_norm, steps, lr, noise_std, clip, q, batch, sched, avg):
    """Lecture 15's bound for one gradient run (:func:`theoretical_bound`, ``steps``)."""
    lr = _need(lr, "learning_rate", "dp-sgd")
    s = check_nonnegative(_need_value(noise_std, "noise_std"), "noise_std")
    clip = _need(clip, "clipping_norm", "dp-sgd")
    if clip < lip * (1.0 - 1e-12):
        raise InvalidPrivacyParameter(
            f"Lecture 15's bound needs unbiased gradients: clipping_norm={clip!r} must be ≥ the "
            f"Lipschitz constant {lip!r}"
        )
    g2 = sgd_gradient_second_moment(  # (15.5) for the clipped mini-batch
        clipping_norm=clip, noise_std=s, dim=d, sampling_rate=q, batch_size=batch
    )
    diameter = None
    if sched == "inverse_sqrt" and radius is not None:
        diameter = 2.0 * check_positive(radius, "radius")
        g2 = (math.sqrt(g2) + lam * radius) ** 2  # the ridge's gradient αθ, ‖θ‖ ≤ radius
    out = lecture15_sgd_bound(
        steps=steps,
        learning_rate=lr,
        gradient_second_moment=g2,
        theta_norm=_radius(radius, theta_norm, "dp-sgd"),
        schedule=sched,
        averaging=avg,
        strong_convexity=lam,
        diameter=diameter,
    )
    if out is None:
        raise InvalidPrivacyParameter(
            f"Lecture 15's bound is evaluated for constant steps (last or uniform average), "
            f"η_t = η/√t over a bounded constraint set (give radius; last or uniform "
            f"average) or η_t = 1/(αt); got schedule={sched!r}, averaging={avg!r}, "
            f"radius={radius!r}"
        )
    return out


def _need_value(value, name):
    if value is None:
        raise InvalidPrivacyParameter(f"the 'dp-sgd' bound for a run needs {name}, got None")
    return value


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


def _noise_moments_of(dg: dict, d: int, scale_divisor: float = 1.0) -> tuple[float, float]:
    """(E‖κ‖, E‖κ‖²) of a run's noise from its diagnostics: Gaussian (σ per
    coordinate) or Gamma-norm (‖κ‖ ~ Gamma(d, scale)), divided by ``scale_divisor``."""
    s = float(dg["noise_scale"]) / scale_divisor
    if dg.get("noise") == "gamma":
        return d * s, d * (d + 1) * s * s
    return s * _e_norm_gaussian(d), d * s * s


def _run_problem(dg: dict, n_samples: int, d: int) -> dict[str, Any]:
    """The problem of one fitted call as the bounds' keywords: n, d and the (ε, δ) of the
    call read off its diagnostics."""
    return {"n": n_samples, "d": d, "epsilon": float(dg["epsilon"]), "delta": float(dg["delta"])}


def seed_bounds_for_estimator(estimator, n_samples: int) -> list[TheoryBound]:
    """The bounds of the five source texts (:mod:`dperm.theory.seeds`) evaluated
    for the run a fitted estimator made (its public diagnostics: noise, λ, Λ,
    steps, step size, batch), one per applicable theorem; ``[]`` when none applies.

    * ``objective`` with Λ > 0: Lecture 14, Thm 14.6 via (14.7);
    * ``dp-sgd``, ``dp-gd``, ``dp-sgd-single``: Lecture 15, Lemma 15.6/15.7;
    * ``exponential-sampling``: Smith & Ullman, Thm 2.5 (in expectation);
    * ``structured-output``: Kumar & Deisenroth, Thm 1 (Lemma 1);
    * ``dual-frank-wolfe``: Kumar & Deisenroth, Thm 4 (and dperm's derived bound).

    Without a constraint, ‖θ*‖ ≤ MARGIN_BOUND/R is the public prior of the
    estimators' defaults (as in :func:`bound_for_estimator`).
    """
    # the mechanism that ran (mechanism="auto" names the chosen one in mechanism_)
    mechanism = getattr(estimator, "mechanism_", None) or getattr(estimator, "mechanism", None)
    if not hasattr(estimator, "coef_"):  # e.g. DPMLPClassifier: non-convex, no theorem
        return []
    try:
        dg = _diagnostics(estimator)
        d = _n_coef(estimator)
        R = float(estimator.data_norm_)
        prior = MARGIN_BOUND / R
        out: list[TheoryBound] = []
        if mechanism == "objective" and float(dg.get("l2_total", 0.0)) > 0:
            _, m2 = _noise_moments_of(dg, d, scale_divisor=n_samples)
            out.append(
                seeds.lecture14_objective_bound(
                    **_run_problem(dg, n_samples, d),
                    regularization=float(dg["l2_total"]),
                    noise_second_moment=m2,
                    theta_norm=prior,
                )
            )
        elif mechanism in ("dp-sgd", "dp-gd", "dp-sgd-single"):
            sched = str(dg.get("schedule", "constant"))
            names = {
                "Constant": "constant",
                "InverseSqrt": "inverse_sqrt",
                "InverseTime": "inverse_time",
            }
            sched = names.get(sched.split("(")[0], sched)
            out.append(
                theoretical_bound(
                    mechanism,
                    **_run_problem(dg, n_samples, d),
                    lipschitz=float(dg["lipschitz"]),
                    strong_convexity=float(dg.get("alpha", 0.0)),
                    theta_norm=prior,
                    steps=int(dg["steps"]),
                    learning_rate=float(dg["learning_rate"]),
                    noise_std=float(dg["noise_std"]),
                    clipping_norm=float(dg["clipping_norm"]),
                    sampling_rate=dg.get("sampling_rate"),
                    batch_size=dg.get("normalizer"),
                    schedule=sched,
                    averaging=str(dg.get("averaging", "last")),
                )
            )
        elif mechanism == "exponential-sampling":
            lip = float(estimator.loss_.lipschitz(R, radius=dg["radius"]))
            lip += float(dg["alpha"]) * float(dg["radius"])
            out.append(
                TheoryBound(
                    expmech_erm_bound(
                        n=n_samples,
                        d=d,
                        epsilon=float(dg["epsilon"]),
                        lipschitz=lip,
                        radius=float(dg["radius"]),
                        sensitivity=float(dg["sensitivity"]),
                    )
                    + 0.5 * float(dg["alpha"]) * float(dg["radius"]) ** 2,
                    "Thm 2.5: O(dGR log(εn/d)/(εn)), in expectation",
                    True,
                    "Smith & Ullman, Lecture 11, Theorem 2.5 (proof's constants, run's Δ)",
                    "E[L(θ)] − min_C L,  L = (1/n)Σℓ",
                )
            )
        elif mechanism in ("structured-output", "dual-frank-wolfe"):
            out.extend(_kd_bounds(estimator, dg, d, n_samples, prior))
        return out
    except (InvalidPrivacyParameter, KeyError, TypeError):
        return []


def _kd_bounds(estimator, dg, d, n_samples, prior) -> list[TheoryBound]:
    norm, w = _norm_and_width(estimator, n_samples, d)
    if estimator.mechanism == "structured-output":
        m1, m2 = _noise_moments_of(dg, d)
        return [
            seeds.kd_theorem1_bound(
                **_run_problem(dg, n_samples, d),
                lipschitz=float(dg["lipschitz"]),
                lam=float(dg["lam"]) / n_samples,
                strong_convexity=float(dg["strong_convexity"]),
                noise_first_moment=m1,
                noise_second_moment=m2,
                gaussian_width=w,
                theta_norm=prior,
            )
        ]
    log_n, rho = _vertex_set(norm)
    eps_sel = (1.0 - float(dg["release_fraction"])) * float(dg["epsilon"])
    out = [
        seeds.kd_theorem4_bound(
            n=n_samples,
            epsilon=eps_sel,
            delta=float(dg["delta"]),
            lipschitz=float(dg["lipschitz"]),
            strong_convexity=float(dg["strong_convexity"]),
            lam=float(dg["lam"]),
            vertex_radius=rho,
            dual_width=w,
            log_n_vertices=float(log_n),
        )
    ]
    derived = _dual_fw_for_estimator(estimator, n_samples)
    return out + ([derived] if derived is not None else [])
