"""Bounds of the perturbation algorithms on a Λ-strongly convex objective:
output perturbation, objective perturbation, AMP/AMP-NT and bolt-on SGD, with
the constants of each algorithm's own calibration (facts (i)–(iii) of
:mod:`dperm.theory`).
"""

from __future__ import annotations

import math

from .._validation import check_count, check_positive
from ..exceptions import InvalidPrivacyParameter
from ..losses.base import MARGIN_BOUND
from .base import (
    _REG,
    _UNREG,
    TheoryBound,
    _need,
    _need_delta,
    _noise_moments,
    _output_noise_cost,
    _radius,
)


def _objective(n, d, epsilon, delta, lip, beta, lam, radius, theta_norm):
    if lam > 0:
        beta = _need(beta, "smoothness", "objective")
        from ..algorithms.objective_perturbation import tight_calibration

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
        value = lip * R * d * max(1.0, math.log(d)) / (n * epsilon) + beta_term
        rate = "L‖θ*‖ p log p/(nε) + β‖θ*‖²/(nε)"
        src = (
            "Di Wang, Lecture 14, Theorem 14.6 (its log p); Chaudhuri, Monteleoni, Sarwate "
            "(JMLR 2011), Section 6 (objective perturbation;"
        )
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
    from ..algorithms import amp as amp_mod

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
    from ..algorithms import bolt_on as bo

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
