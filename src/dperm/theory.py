"""Theoretical excess-empirical-risk bounds, one per algorithm of dperm.

:func:`theoretical_bound` returns the bound on the *expected* excess empirical
risk that an algorithm's analysis gives, as a :class:`TheoryBound`
(value, rate, constant_known, source, quantity), so that a measured excess risk
(:func:`dperm.utility.excess_empirical_risk`) can be printed next to what theory
promises.

Two kinds of bounds are returned, and :attr:`TheoryBound.constant_known` says
which:

* **closed forms with known constants** (``constant_known=True``) for the
  perturbation algorithms on a Λ-strongly convex regularized objective
  J(θ) = (1/n)Σℓ(θ; xᵢ, yᵢ) + (Λ/2)‖θ‖² (output and objective perturbation,
  AMP, AMP-NT) and for the exponential mechanism over a finite candidate set.
  They combine the algorithm's exact noise calibration with three one-line facts
  about a Λ-strongly convex, (β+Λ)-smooth J with minimizer θ̂:

  (i)   if θ_p minimizes J + q with q convex, J(θ_p) − J(θ̂) ≤ ‖∇q(θ̂)‖²/(2Λ_q)
        (Λ_q the strong convexity of J + q);
  (ii)  for noise κ independent of θ with E κ = 0,
        E[J(θ + κ)] − E[J(θ)] ≤ min((β + Λ)/2 · E‖κ‖², L·E‖κ‖ + Λ/2 · E‖κ‖²);
  (iii) ‖∇J_p(θ)‖ ≤ γ for a Λ-strongly convex J_p implies ‖θ − argmin J_p‖ ≤ γ/Λ;

  the derivations are in ``docs/amp.md`` ("Utility") and ``docs/bolt_on.md``.
* **rates** (``constant_known=False``): the O(·) statement of the paper's
  utility theorem evaluated with constant 1 (and, where the theorem carries
  polylog(n) factors beyond log(1/δ), without them — the ``source`` says so).
  Read them as orders of magnitude, not as guarantees.

Units: ``lipschitz`` L bounds ‖∇ℓ‖₂ (for Frank-Wolfe the ℓ∞ bound L₁ of the
paper), ``smoothness`` β bounds the per-example Hessian, ``strong_convexity`` Λ
is the coefficient of (Λ/2)‖θ‖² in the mean-form objective (the estimators'
``alpha``), ``radius`` is sup_{θ∈C}‖θ‖ of the constraint set (ℓ1 radius for
Frank-Wolfe) and ``theta_norm`` a bound on ‖θ*‖ used when there is no constraint.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_nonnegative,
    check_positive,
)
from .bounds import exponential_sampling_bound
from .exceptions import InvalidPrivacyParameter, UnknownNameError
from .losses.base import MARGIN_BOUND

__all__ = [
    "ALGORITHMS",
    "TheoryBound",
    "bound_for_estimator",
    "denoised_release_bound",
    "dual_frank_wolfe_bound",
    "exponential_sampling_bound",
    "structured_output_bound",
    "theoretical_bound",
]

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

_REG = "E[J(θ)] − min J,  J = (1/n)Σℓ + (Λ/2)‖θ‖²"
_UNREG = "E[L(θ)] − min_C L,  L = (1/n)Σℓ"


@dataclasses.dataclass(frozen=True)
class TheoryBound:
    """A theoretical bound on the expected excess empirical risk.

    Attributes
    ----------
    value : float
        The bound evaluated at the given n, d, ε, δ, L, … (mean-loss units).
    rate : str
        The formula, e.g. ``"L‖C‖√(d log(1/δ))/(nε)"``.
    constant_known : bool
        True when ``value`` is a bound with the constants of the analysis;
        False when it is a rate evaluated with constant 1.
    source : str
        Paper and theorem, and what was done to it (constant 1, log factors
        dropped, derivation).
    quantity : str
        What is bounded (regularized objective J or unregularized L over C,
        relative to the best candidate for the exponential mechanism).
    """

    value: float
    rate: str
    constant_known: bool
    source: str
    quantity: str = _UNREG

    def to_dict(self) -> dict[str, Any]:
        """The bound as a JSON-compatible dict."""
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- helpers
def _radius(radius, theta_norm, algorithm: str) -> float:
    if radius is not None:
        return check_positive(radius, "radius")
    if theta_norm is not None:
        return check_positive(theta_norm, "theta_norm")
    raise InvalidPrivacyParameter(
        f"the {algorithm!r} bound needs radius (sup ‖θ‖ over the constraint set) or "
        "theta_norm (a bound on ‖θ*‖), got neither"
    )


def _strong(strong_convexity) -> float:
    if strong_convexity is None:
        return 0.0
    return check_nonnegative(strong_convexity, "strong_convexity")


def _need(value, name: str, algorithm: str) -> float:
    if value is None:
        raise InvalidPrivacyParameter(f"the {algorithm!r} bound needs {name}, got None")
    return check_positive(value, name)


def _need_delta(delta: float, algorithm: str) -> float:
    if delta == 0.0:
        raise InvalidPrivacyParameter(
            f"{algorithm!r} is a Gaussian mechanism with an (ε, δ) guarantee: delta must "
            "be > 0, got 0"
        )
    return delta


def _analytic_z(epsilon: float, delta: float) -> float:
    from .accounting.gaussian import analytic_gaussian_noise_multiplier

    return float(analytic_gaussian_noise_multiplier(epsilon, delta))


def _noise_moments(d: int, epsilon: float, delta: float, sensitivity: float):
    """(E‖κ‖, E‖κ‖²) of the output noise dperm adds for ℓ2 sensitivity Δ:
    Gamma-norm (δ = 0; ‖κ‖ ~ Gamma(d, Δ/ε)) or analytic Gaussian (δ > 0)."""
    if delta == 0.0:
        s = sensitivity / epsilon
        return d * s, d * (d + 1) * s * s
    sigma = _analytic_z(epsilon, delta) * sensitivity
    return math.sqrt(d) * sigma, d * sigma * sigma


def _output_noise_cost(m1: float, m2: float, lip: float, beta, lam: float) -> float:
    """Fact (ii): E[J(θ+κ)] − E[J(θ)] for independent zero-mean κ."""
    lip_form = lip * m1 + 0.5 * lam * m2
    if beta is None:
        return lip_form
    return min(0.5 * (beta + lam) * m2, lip_form)


# ----------------------------------------------------------------------------- per algorithm
def _gradient_methods(algorithm, n, d, epsilon, delta, lip, lam, radius, theta_norm):
    delta = _need_delta(delta, algorithm)
    log_term = math.log(1.0 / delta)
    which = {
        "dp-gd": "noisy (full-batch) gradient descent",
        "dp-sgd": "noisy mini-batch SGD (Abadi et al. 2016 form; same rate up to log factors)",
        "dp-sgd-single": "noisy single-sample SGD (their Algorithm 1)",
    }[algorithm]
    src = (
        f"Bassily, Smith, Thakurta (FOCS 2014), Table 1 and Section 2 ({which}); "
        "O(·) rate evaluated with constant 1, polylog(n) factors omitted"
    )
    if lam > 0:
        value = lip**2 * d * log_term / (lam * n**2 * epsilon**2)
        return TheoryBound(
            value, "L² d log(1/δ) / (Λ n² ε²)", False, src + " (strongly convex row)", _REG
        )
    R = _radius(radius, theta_norm, algorithm)
    value = lip * R * math.sqrt(d * log_term) / (n * epsilon)
    return TheoryBound(value, "L‖C‖ √(d log(1/δ)) / (nε)", False, src + " (convex row)", _UNREG)


def _objective(n, d, epsilon, delta, lip, beta, lam, radius, theta_norm):
    if lam > 0:
        beta = _need(beta, "smoothness", "objective")
        from .algorithms.objective_perturbation import tight_calibration

        # the default (tight) calibration, with the algorithm's Δ choice: the prior
        # ‖θ‖ ≤ MARGIN_BOUND/R is MARGIN_BOUND/L for the losses with |φ'| ≤ 1
        prior = radius if radius is not None else theta_norm
        cal = tight_calibration(
            epsilon, delta, n, lam, beta, lip, n_coords=d,
            theta_bound=prior if prior is not None else MARGIN_BOUND / lip,
        )  # fmt: skip
        extra = cal.extra_l2
        if delta == 0.0:
            scale = cal.noise_scale / n  # ‖b/n‖ ~ Gamma(d, 2L/(nε'))
            m1, m2 = d * scale, d * (d + 1) * scale * scale
            src = (
                "Chaudhuri, Monteleoni, Sarwate (JMLR 2011), Algorithm 2 noise, tight "
                "calibration (docs/objective_perturbation.md)"
            )
            rate = "≈ d² L² / (Λ n² ε²)"
        else:
            s = cal.noise_scale / n  # b/n ~ N(0, (σ/n)² I)
            m1, m2 = math.sqrt(d) * s, d * s * s
            src = (
                "Kifer, Smith, Thakurta (COLT 2012), Algorithm 1 noise, tight calibration "
                "(docs/objective_perturbation.md)"
            )
            rate = "≈ d L² log(1/δ) / (Λ n² ε²)"
        if extra > 0:
            R = _radius(radius, theta_norm, "objective")
        else:
            R = 0.0
        # fact (i) with q(θ) = (Δ/2)‖θ‖² + ⟨b/n, θ⟩: ∇q(θ̂) = Δθ̂ + b/n
        value = (extra**2 * R**2 + 2.0 * extra * R * m1 + m2) / (2.0 * (lam + extra))
        return TheoryBound(
            value,
            rate,
            True,
            src + "; E‖Δθ̂ + b/n‖²/(2(Λ + Δ)) by strong convexity (docs/amp.md, Utility)",
            _REG,
        )
    R = _radius(radius, theta_norm, "objective")
    beta_term = (beta or 0.0) * R**2 / (n * epsilon)
    if delta == 0.0:
        value = lip * R * d / (n * epsilon) + beta_term
        rate = "L‖θ*‖ d/(nε) + β‖θ*‖²/(nε)"
        src = "Chaudhuri, Monteleoni, Sarwate (JMLR 2011), Section 6 (objective perturbation;"
    else:
        value = lip * R * math.sqrt(d * math.log(1.0 / delta)) / (n * epsilon) + beta_term
        rate = "L‖θ*‖ √(d log(1/δ))/(nε) + β‖θ*‖²/(nε)"
        src = "Kifer, Smith, Thakurta (COLT 2012), utility of objective perturbation ("
    src += "the bias of the Λ ≈ β/ε regularization included); rate with constant 1"
    return TheoryBound(value, rate, False, src, _UNREG)


def _output(n, d, epsilon, delta, lip, beta, lam):
    if lam <= 0:
        raise InvalidPrivacyParameter(
            "output perturbation needs a strongly convex objective: strong_convexity "
            f"(Λ) must be > 0, got {lam!r}"
        )
    sens = 2.0 * lip / (n * lam)
    m1, m2 = _noise_moments(d, epsilon, delta, sens)
    value = _output_noise_cost(m1, m2, lip, beta, lam)
    rate = "(β+Λ)/2 · d(d+1)(2L/(nΛε))²" if delta == 0 else "(β+Λ)/2 · d (z·2L/(nΛ))²"
    src = (
        "Chaudhuri, Monteleoni, Sarwate (JMLR 2011), Algorithm 1 (sensitivity 2L/(nΛ)) with "
        + ("Gamma-norm" if delta == 0 else "analytic Gaussian (Balle & Wang 2018)")
        + " noise; E[J(θ̂+κ)] − J(θ̂) by smoothness/Lipschitzness (docs/amp.md, Utility)"
    )
    return TheoryBound(value, rate, True, src, _REG)


def _amp(algorithm, n, d, epsilon, delta, lip, beta, lam, gamma, split):
    from .algorithms import amp as amp_mod

    beta = _need(beta, "smoothness", algorithm)
    delta = _need_delta(delta, algorithm)
    if algorithm == "amp-nt":
        if gamma is not None or split is not None or lam:
            raise InvalidPrivacyParameter(
                "amp-nt fixes gamma, split and the regularization; pass none of them"
            )
        cal = amp_mod.calibrate(
            n=n, d=d, epsilon=epsilon, delta=delta, lipschitz=lip, smoothness=beta
        )
    else:
        cal = amp_mod.calibrate(
            n=n,
            d=d,
            epsilon=epsilon,
            delta=delta,
            lipschitz=lip,
            smoothness=beta,
            alpha=lam if lam > 0 else None,
            gamma=gamma,
            split=split,
        )
    a, g, s1, s2 = cal.alpha, cal.gamma, cal.sigma_objective, cal.sigma_output
    # objective part: E‖b₁‖²/(2α) + γ(γ + E‖b₁‖)/α  (facts (i), (iii) and convexity)
    obj = d * s1 * s1 / (2.0 * a) + g * (g + math.sqrt(d) * s1) / a
    out = _output_noise_cost(math.sqrt(d) * s2, d * s2 * s2, lip, beta, a)
    return TheoryBound(
        obj + out,
        "d σ₁²/(2α) + γ(γ + √d σ₁)/α + (β+α) d σ₂²/2,  σ₁ ≈ 2L√(2 log(1/δ))/(nε₃)",
        True,
        "Iyengar et al. (IEEE S&P 2019), Algorithm 1 calibration (dperm.algorithms.amp."
        f"calibrate; α = {a:.4g}, the regularization AMP uses) with the strong-convexity "
        "argument of docs/amp.md (Utility)",
        _REG,
    )


def _bolt_on(n, d, epsilon, delta, lip, beta, lam, radius, theta_norm, passes, batch_size, lr):
    from .algorithms import bolt_on as bo

    beta = _need(beta, "smoothness", "bolt-on")
    k = 1 if passes is None else check_count(passes, "passes")
    b = (
        bo.default_batch_size(n, epsilon)
        if batch_size is None
        else min(check_count(batch_size, "batch_size"), n)
    )
    T = k * math.ceil(n / b)
    if lam > 0:
        sens = bo.strongly_convex_sensitivity(lip, lam, n)
        m1, m2 = _noise_moments(d, epsilon, delta, sens)
        noise = _output_noise_cost(m1, m2, lip, beta, lam)
        opt = lip**2 * (1.0 + math.log(T)) / (lam * T)
        return TheoryBound(
            opt + noise,
            "L²(1 + log T)/(ΛT) + (β+Λ)/2 · E‖κ‖²,  Δ₂ = 2L/(Λn)",
            False,
            "Wu et al. (SIGMOD 2017), strongly convex PSGD (sensitivity 2L/(Λn)); noise term "
            "with its constant (docs/bolt_on.md), SGD term: last-iterate rate of SGD with "
            "η_t = 1/(Λt) (Shamir & Zhang, ICML 2013, Theorem 1) with constant 1",
            _REG,
        )
    R = _radius(radius, theta_norm, "bolt-on")
    eta = bo.default_learning_rate(beta) if lr is None else check_positive(lr, "learning_rate")
    sens = bo.convex_sensitivity(lip, eta, k, b)
    m1, _ = _noise_moments(d, epsilon, delta, sens)
    opt = R * R / (2.0 * eta * T) + eta * lip * lip / 2.0
    return TheoryBound(
        opt + lip * m1,
        "‖C‖²/(2ηT) + ηL²/2 + L·E‖κ‖,  Δ₂ = 2kLη/b",
        False,
        "Wu et al. (SIGMOD 2017), convex PSGD (sensitivity 2kLη/b); noise term L·E‖κ‖ with "
        "its constant, SGD term: constant-step SGD bound (Zinkevich 2003; averaged-iterate "
        "form, constant 1 for the last iterate)",
        _UNREG,
    )


def _frank_wolfe(n, d, epsilon, delta, lip, beta, radius):
    if radius is None:
        raise InvalidPrivacyParameter(
            "the 'frank-wolfe' bound needs radius (the ℓ1 radius ‖C‖₁), got None"
        )
    R1 = check_positive(radius, "radius")
    beta = _need(beta, "smoothness", "frank-wolfe")
    curvature = beta * (2.0 * R1) ** 2  # Γ ≤ β diam₁(C)² (Jaggi 2013, Lemma 7)
    log_term = math.log(2.0 * n * d)  # log(n|S|), |S| = 2d vertices
    src = (
        "Talwar, Thakurta, Zhang (NeurIPS 2015), utility of private Frank-Wolfe over a "
        "polytope with |S| = 2d vertices; Γ ≤ β(2‖C‖₁)²; rate with constant 1"
    )
    if delta > 0:
        value = (
            curvature ** (1 / 3)
            * (lip * R1) ** (2 / 3)
            * log_term
            * math.sqrt(math.log(1.0 / delta))
            / (n * epsilon) ** (2 / 3)
        )
        rate = "Γ^{1/3} (L₁‖C‖₁)^{2/3} log(n|S|) √log(1/δ) / (nε)^{2/3}"
    else:
        value = 2.0 * math.sqrt(curvature * lip * R1 * log_term / (n * epsilon))
        rate = "2 √(Γ L₁‖C‖₁ log(n|S|) / (nε))"
        src += " (ε-DP: basic composition, T balanced against Γ/T)"
    return TheoryBound(value, rate, False, src, _UNREG)


def _exponential(n, d, epsilon, lip, radius, theta_norm, n_candidates, loss_range):
    if n_candidates is not None or loss_range is not None:
        m = check_count(_need(n_candidates, "n_candidates", "exponential"), "n_candidates")
        rng_ = _need(loss_range, "loss_range", "exponential")
        value = 2.0 * rng_ * (math.log(m) + 1.0) / (n * epsilon)
        return TheoryBound(
            value,
            "2Δ(ln|Θ| + 1) / (nε)",
            True,
            "McSherry & Talwar (FOCS 2007); Dwork & Roth (2014), Theorem 3.11 integrated "
            "over its tail: E[OPT − u] ≤ (2Δ_u/ε)(ln|Θ| + 1) with u = −nL, Δ_u = loss range",
            "E[L(θ)] − min_{θ∈Θ} L(θ) over the finite candidate set Θ",
        )
    R = _radius(radius, theta_norm, "exponential")
    value = d * lip * R / (n * epsilon)
    return TheoryBound(
        value,
        "d L‖C‖ / (nε)",
        False,
        "Bassily, Smith, Thakurta (FOCS 2014), Section 3 (exponential sampling over a "
        "convex set, ε-DP); rate with constant 1",
        _UNREG,
    )


# ----------------------------------------------------------------------------- public
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
    """The expected excess empirical risk bound of ``algorithm`` (see the module docstring).

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
    n = check_count(n, "n")
    d = check_count(d, "d")
    epsilon = check_epsilon(epsilon)
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
    mechanism = getattr(estimator, "mechanism", None)
    if mechanism in ("structured-output", "dual-frank-wolfe"):
        dg0 = estimator.diagnostics_
        if isinstance(dg0, list):
            dg0 = dg0[0]
        if dg0.get("denoise", "none") != "none":
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
    dg = estimator.diagnostics_
    if isinstance(dg, list):
        dg = dg[0]
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
        "d": int(np.atleast_2d(estimator.coef_).shape[1]) + int(bool(estimator.fit_intercept)),
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


# ----------------------------------------------------------------------------- structured (#11)
def structured_output_bound(
    *,
    n: int,
    d: int,
    epsilon: float,
    delta: float = 0.0,
    lipschitz: float,
    strong_convexity: float,
    lam: float,
    gaussian_width: float,
    smoothness: float | None = None,
) -> TheoryBound:
    """Expected excess of J = (1/n)Σℓ + (λ/n)Ω + (Λ/2)‖θ‖² for structured output
    perturbation (:mod:`dperm.algorithms.structured_output_perturbation`), with
    the Gaussian width G = E Ω(g) of the dual ball |P|(F).

    Derived here (in the spirit of Kumar & Deisenroth 2019, Theorem 1, whose
    exact statement dperm does not reproduce): for rotation-invariant zero-mean
    noise κ (Gamma-norm or Gaussian, κ = ‖κ‖·u with u uniform on the sphere),
    the smooth part costs fact (ii) of the module docstring, and by the triangle
    inequality Ω(θ̂ + κ) − Ω(θ̂) ≤ Ω(κ), with E Ω(κ) = E‖κ‖ · G / E‖g‖
    (E‖g‖ = √2 Γ((d+1)/2)/Γ(d/2)).  So

        E[J(θ̂ + κ)] − J(θ̂) ≤ min((β+Λ)/2 · E‖κ‖², L E‖κ‖ + Λ/2 · E‖κ‖²)
                              + (λ/n) · E‖κ‖ · G / E‖g‖,

    with κ calibrated to sensitivity 2L/(nΛ) as the module does.

    Raises
    ------
    InvalidPrivacyParameter
    """
    n = check_count(n, "n")
    d = check_count(d, "d")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    lip = check_positive(lipschitz, "lipschitz")
    lam_sc = check_positive(strong_convexity, "strong_convexity")
    lam = check_nonnegative(lam, "lam")
    width = check_positive(gaussian_width, "gaussian_width")
    beta = None if smoothness is None else check_positive(smoothness, "smoothness")
    m1, m2 = _noise_moments(d, epsilon, delta, 2.0 * lip / (n * lam_sc))
    e_norm_g = math.sqrt(2.0) * math.exp(math.lgamma((d + 1) / 2.0) - math.lgamma(d / 2.0))
    value = _output_noise_cost(m1, m2, lip, beta, lam_sc) + (lam / n) * m1 * width / e_norm_g
    return TheoryBound(
        value,
        "smooth-part noise cost + (λ/n)·E‖κ‖·G/E‖g‖",
        True,
        "structured output perturbation: sensitivity 2L/(nΛ) (Chaudhuri et al. 2011, Thm 6), "
        "Gaussian-width term derived in dperm.theory.structured_output_bound "
        "(cf. Kumar & Deisenroth 2019, Thm 1)",
        "E[J(θ)] − min J,  J = (1/n)Σℓ + (λ/n)Ω + (Λ/2)‖θ‖²",
    )


def denoised_release_bound(*, tau: float, omega: float, level: float) -> TheoryBound:
    """Distance of the soft-denoised release to the exact minimizer:
    ‖prox_{τΩ}(θ̂ + b) − θ̂‖₂² ≤ 4·τ·Ω(θ̂) with probability ≥ 1 − β
    (:mod:`dperm.algorithms.structured_output_perturbation`, "Denoising").

    Proof (derived here; the lasso-type denoising argument).  Let p minimize
    ½‖θ − θ̂ − b‖² + τΩ(θ).  Comparing with θ = θ̂:
    ½‖p − θ̂‖² − ⟨b, p − θ̂⟩ + ½‖b‖² + τΩ(p) ≤ ½‖b‖² + τΩ(θ̂), so
    ½‖p − θ̂‖² ≤ Ω*(b)Ω(p − θ̂) + τ(Ω(θ̂) − Ω(p)) (Hölder for a norm and its
    dual).  On the event Ω*(b) ≤ τ — of probability ≥ 1 − β when τ is the
    (1 − β)-quantile of Ω*(b) — the triangle inequality
    Ω(p − θ̂) ≤ Ω(p) + Ω(θ̂) gives ½‖p − θ̂‖² ≤ 2τΩ(θ̂).  Compare E‖b‖² = σ²d for
    the raw release.

    Parameters
    ----------
    tau : float ≥ 0
        τ (``diagnostics["denoise_threshold"]``).
    omega : float ≥ 0
        Ω(θ̂) or any upper bound on it (θ̂ is private: a public bound such as
        (n/λ)·ℓ(0) from J(θ̂) ≤ J(0) keeps the statement public).
    level : float in (0, 1)
        β.

    Raises
    ------
    InvalidPrivacyParameter
    """
    tau = check_nonnegative(tau, "tau")
    omega = check_nonnegative(omega, "omega")
    level = float(level)
    if not 0.0 < level < 1.0:
        raise InvalidPrivacyParameter(f"level must be in (0, 1), got {level!r}")
    return TheoryBound(
        4.0 * tau * omega,
        "4·τ·Ω(θ̂)",
        True,
        "soft-denoised output perturbation: derived in dperm.theory.denoised_release_bound "
        f"(holds with probability ≥ {1.0 - level:g})",
        "‖prox_{τΩ}(θ̂ + b) − θ̂‖₂²",
    )


def _structured_for_estimator(estimator, n_samples: int) -> TheoryBound | None:
    """:func:`structured_output_bound` of an estimator fitted with
    ``mechanism="structured-output"`` (public quantities: the call's diagnostics,
    the norm the adapter resolved, its Gaussian width — upper CI end when Monte Carlo)."""
    from .algorithms.structured_output_perturbation import estimator_norm
    from .norms import gaussian_width

    dg = estimator.diagnostics_
    if isinstance(dg, list):
        dg = dg[0]
    d = int(np.atleast_2d(estimator.coef_).shape[1]) + int(bool(estimator.fit_intercept))
    try:
        norm, _ = estimator_norm(estimator, estimator.loss_, n_samples, d)
        width = gaussian_width(norm, ball="dual", n_samples=2000, random_state=0).ci_high
        beta = dg.get("smoothness")
        return structured_output_bound(
            n=n_samples,
            d=d,
            epsilon=float(dg["epsilon"]),
            delta=float(dg["delta"]),
            lipschitz=float(dg["lipschitz"]),
            strong_convexity=float(dg["strong_convexity"]),
            lam=float(dg["lam"]),
            gaussian_width=width,
            smoothness=float(beta) if beta is not None and math.isfinite(beta) else None,
        )
    except (InvalidPrivacyParameter, KeyError):
        return None


# ----------------------------------------------------------- dual Frank-Wolfe (#11, K–D Thm 4)
def dual_frank_wolfe_bound(
    *,
    n: int,
    d: int,
    epsilon_step: float,
    n_steps: int,
    log_n_vertices: float,
    vertex_radius: float,
    lipschitz: float,
    strong_convexity: float,
    lam: float,
    epsilon_release: float,
    delta_release: float = 0.0,
    gaussian_width: float,
    smoothness: float | None = None,
) -> TheoryBound:
    """Expected excess of P = (1/n)Σℓ + (Λ/2)‖θ‖² + λΩ(θ) (mean form) for the
    private dual Frank-Wolfe of :mod:`dperm.algorithms.dual_frank_wolfe`
    (Kumar & Deisenroth 2019, Algorithm 2).

    **Derived here, not K–D's Theorem 4**: the paper's statement of Theorem 4
    could not be retrieved, so dperm states and proves a bound for the
    algorithm it implements (exponential-mechanism vertex selection with
    ε₀ = ``epsilon_step``, T = ``n_steps`` steps γ_t = 2/(t+2), then output
    perturbation of θ(s_T) with ``epsilon_release``/``delta_release``).  Like
    K–D's bound it depends on the Gaussian width w = E Ω(g) of the dual-norm
    unit ball |P|(F) (``gaussian_width``).  Notation: K = λ|P|(F),
    ρ = max_{v∈|P|(F)}‖v‖₂ (``vertex_radius``), N = number of vertices of the
    product set the selection samples from (``log_n_vertices`` = ln N),
    Δ = 2Lλρ/(nΛ) the score sensitivity, M = L + λρ.

    Proof.  (a) θ(s) = argmin L̂ + ⟨s, ·⟩ = ∇D(s) is (1/Λ)-Lipschitz in s, so
    −D is (1/Λ)-smooth and the Frank-Wolfe curvature constant over K is
    C ≤ diam(K)²/Λ ≤ 4λ²ρ²/Λ.  (b) The exponential mechanism picks v_t with
    E[max_v⟨v, θ_t⟩ − ⟨v_t, θ_t⟩] ≤ η = (2Δ/ε₀)(ln N + 1) (Dwork & Roth 2014,
    Thm 3.11, integrated over its tail).  (c) With h_t = D* − D(s_t),
    concavity and (a) give E h_{t+1} ≤ (1 − γ_t)E h_t + γ_t η + γ_t² C/2, and
    induction on h_t − η with γ_t = 2/(t+2) gives
    E h_T ≤ η + 2C/(T+2) (Jaggi 2013, Thm 1 with an additive oracle error).
    (d) Since ⟨s, θ*⟩ ≤ λΩ(θ*) for s ∈ K and L̂ + ⟨s, ·⟩ is Λ-strongly convex,
    (Λ/2)‖θ(s) − θ*‖² ≤ D* − D(s); by Jensen E‖θ(s_T) − θ*‖ ≤ √(2 E h_T/Λ).
    (e) ‖θ(s)‖, ‖θ*‖ ≤ M/Λ (first-order conditions, subgradients of λΩ lie in
    K) and Ω(u) ≤ ρ‖u‖₂, so P is 2M-Lipschitz between them:
    P(θ(s_T)) − P* ≤ 2M‖θ(s_T) − θ*‖.  (f) The release noise κ (sensitivity
    2L/(nΛ), rotation invariant, independent, zero mean) costs fact (ii) of
    the module docstring on the smooth part plus λ E Ω(κ) = λ E‖κ‖·w/E‖g‖.
    Altogether

        E[P(θ(s_T) + κ)] − P* ≤ 2M·√((2/Λ)(8λ²ρ²/(Λ(T+2)) + (2Δ/ε₀)(ln N + 1)))
                                 + cost(κ) + λ·E‖κ‖·w/E‖g‖.

    Assumes θ(s) is computed exactly (the algorithm certifies ``tol``).

    Raises
    ------
    InvalidPrivacyParameter
    """
    n = check_count(n, "n")
    d = check_count(d, "d")
    eps0 = check_epsilon(epsilon_step)
    T = check_count(n_steps, "n_steps")
    log_n = check_nonnegative(log_n_vertices, "log_n_vertices")
    rho = check_positive(vertex_radius, "vertex_radius")
    lip = check_positive(lipschitz, "lipschitz")
    lam_sc = check_positive(strong_convexity, "strong_convexity")
    lam = check_positive(lam, "lam")
    eps_rel = check_epsilon(epsilon_release)
    delta_rel = check_delta(delta_release)
    width = check_positive(gaussian_width, "gaussian_width")
    beta = None if smoothness is None else check_positive(smoothness, "smoothness")
    score_sens = 2.0 * lip * lam * rho / (n * lam_sc)
    h_T = 8.0 * (lam * rho) ** 2 / (lam_sc * (T + 2)) + 2.0 * score_sens / eps0 * (log_n + 1.0)
    M = lip + lam * rho
    m1, m2 = _noise_moments(d, eps_rel, delta_rel, 2.0 * lip / (n * lam_sc))
    e_norm_g = math.sqrt(2.0) * math.exp(math.lgamma((d + 1) / 2.0) - math.lgamma(d / 2.0))
    value = (
        2.0 * M * math.sqrt(2.0 * h_T / lam_sc)
        + _output_noise_cost(m1, m2, lip, beta, lam_sc)
        + lam * m1 * width / e_norm_g
    )
    return TheoryBound(
        value,
        "2M√((2/Λ)(8λ²ρ²/(Λ(T+2)) + (2Δ/ε₀)(ln N + 1))) + cost(κ) + λ·E‖κ‖·w/E‖g‖",
        True,
        "private dual Frank-Wolfe (Kumar & Deisenroth 2019, Alg. 2): bound derived in "
        "dperm.theory.dual_frank_wolfe_bound (noisy Frank-Wolfe: Jaggi 2013, Thm 1; "
        "exponential mechanism: Dwork & Roth 2014, Thm 3.11), not K–D's Theorem 4",
        "E[P(θ)] − min P,  P = (1/n)Σℓ + (Λ/2)‖θ‖² + λΩ(θ)",
    )


def _dual_fw_for_estimator(estimator, n_samples: int) -> TheoryBound | None:
    """:func:`dual_frank_wolfe_bound` of an estimator fitted with
    ``mechanism="dual-frank-wolfe"`` (public quantities: the call's diagnostics,
    the norm the adapter resolved, its vertex blocks and Gaussian width — upper
    CI end when Monte Carlo)."""
    from .algorithms.dual_frank_wolfe import dual_vertex_blocks
    from .algorithms.structured_output_perturbation import estimator_norm
    from .norms import gaussian_width

    dg = estimator.diagnostics_
    if isinstance(dg, list):
        dg = dg[0]
    d = int(np.atleast_2d(estimator.coef_).shape[1]) + int(bool(estimator.fit_intercept))
    try:
        norm, _ = estimator_norm(estimator, estimator.loss_, n_samples, d)
        blocks = dual_vertex_blocks(norm)
        width = gaussian_width(norm, ball="dual", n_samples=2000, random_state=0).ci_high
        beta = dg.get("smoothness")
        eps = float(dg["epsilon"])
        delta = float(dg["delta"])
        rho_rel = float(dg["release_fraction"])
        return dual_frank_wolfe_bound(
            n=n_samples,
            d=d,
            epsilon_step=float(dg["epsilon_step"]),
            n_steps=int(dg["n_steps"]),
            log_n_vertices=sum(math.log(V.shape[0]) for _, V in blocks),
            vertex_radius=math.sqrt(sum(float(np.max(np.sum(V * V, axis=1))) for _, V in blocks)),
            lipschitz=float(dg["lipschitz"]),
            strong_convexity=float(dg["strong_convexity"]),
            lam=float(dg["lam"]),
            epsilon_release=rho_rel * eps,
            delta_release=delta / 2.0 if "noise_multiplier" in dg else 0.0,
            gaussian_width=width,
            smoothness=float(beta) if beta is not None and math.isfinite(beta) else None,
        )
    except (InvalidPrivacyParameter, KeyError):
        return None
