"""The default Λ (``alpha="auto"``) of the perturbation mechanisms: public rules of
(n, d, k, ε, R) that minimize the excess-risk bound of objective and output
perturbation (``docs/objective_perturbation.md``, ``docs/output_perturbation.md``).
Registered next to their mechanisms in :mod:`dperm.estimators._mechanisms`."""

from __future__ import annotations

import math

import numpy as np

from ..accounting.active import default_delta
from ..accounting.gaussian import analytic_gaussian_noise_multiplier
from ..algorithms.objective_perturbation import tight_calibration
from ..losses.base import MARGIN_BOUND, OUTPUT_MARGIN_BOUND, PRIOR_RELAX_ABOVE

__all__ = ["objective_alpha_rule", "output_alpha_rule"]


def _logistic_constants(data_norm: float, n_classes: int, d: int) -> dict:
    """L, β and the Hessian geometry of the logistic (k = 1) or softmax (k ≥ 2) loss
    over rows ‖x‖ ≤ R (:mod:`dperm.losses`; ``docs/objective_perturbation.md``)."""
    R = float(data_norm)
    if n_classes <= 1:
        return {"lipschitz": R, "smoothness": R * R / 4.0, "n_coords": d, "geometry": {}}
    k = int(n_classes)
    return {
        "lipschitz": math.sqrt(2.0) * R,
        "smoothness": R * R / 2.0,
        "n_coords": d * k,
        "geometry": {
            "hessian_rank": k - 1,
            "hessian_trace": R * R * (1.0 - 1.0 / k),
            "n_vertices": k * k - 1,
        },
    }


def objective_alpha_rule(
    n: int,
    d: int,
    epsilon: float,
    data_norm: float,
    *,
    n_classes: int = 1,
    margin: float = MARGIN_BOUND,
) -> float:
    """Default Λ for objective perturbation: the minimizer of its excess-risk bound.

    Λ = argmin_Λ  ΛB²/2 + B·E‖b/n‖ + E‖b/n‖²/(2Λ),   B = √k·B₀/R, B₀ = 20,

    the bias of the (Λ/2)‖θ‖² term for ‖θ*‖ ≤ B plus the expected excess risk of
    the perturbation (strong convexity: the bound of
    :func:`dperm.theory.theoretical_bound`), with the noise b of the tight
    Gaussian calibration at (ε, the default δ = min(1/n², 10⁻⁵)) for the logistic (k = 1) or softmax
    (k ≥ 2) constants, whose ε_J itself depends on Λ.  Computed as the Δ that
    :func:`dperm.algorithms.objective_perturbation.tight_calibration` chooses
    for Λ = 0 (the same minimization), floored at R²/n (scikit-learn's C = 1;
    reached only at large ε) up to ε = 10, a floor that vanishes beyond
    (:func:`_alpha_floor`).  ``margin`` is B₀ (the regressors pass the relaxed
    :func:`dperm.losses.prior_margin`).  Public inputs only; decreasing in ε (Adult:
    3.1·10⁻³ at ε = 0.1, 3.4·10⁻⁴ at ε = 1, 7.1·10⁻⁵ at ε = 5).

    Checked without the test set: on an 80/20 validation split of Adult's
    *training* rows (3 seeds, δ = 1/n²), a Λ grid 10⁻⁶ … 10⁻¹ has its best
    validation accuracy at or within 0.1 point of this rule for ε ∈ {0.1, 0.3,
    1, 3, 5} (``docs/objective_perturbation.md``, "Choosing Λ").  ``d`` is the
    number of coordinates per class, ``n_classes`` k (1 for a binary model).
    """
    k = max(int(n_classes), 1)
    c = _logistic_constants(data_norm, k, d)
    cal = tight_calibration(
        float(epsilon),
        default_delta(int(n), budget_share=False),
        int(n),
        0.0,
        c["smoothness"],
        c["lipschitz"],
        n_coords=c["n_coords"],
        theta_bound=math.sqrt(k) * margin / data_norm,
        **c["geometry"],
    )
    return max(float(cal.extra_l2), _alpha_floor(n, data_norm, epsilon))


def _alpha_floor(n: int, data_norm: float, epsilon: float) -> float:
    """R²/n, then R²/n·(ε_c/ε)² beyond ε_c = :data:`~dperm.losses.PRIOR_RELAX_ABOVE`.

    R²/n is the regularization of scikit-learn's default C = 1 in dperm's mean form
    (C·Σℓ + ½‖θ‖² ↔ Λ = 1/(Cn)), for rows scaled to ‖x‖ ≤ R: the floor of the
    ε-dependent rules, reached only at large ε.  It vanishes beyond ε_c (faster than
    the rules themselves, ∝ 1/ε there), so that the default tends to the
    *unregularized* model as ε → ∞ (issue #30: a floor R²/n kept CASP's R² at 0.175
    against 0.273 for least squares at every ε)."""
    relax = min(1.0, PRIOR_RELAX_ABOVE / float(epsilon))
    return float(data_norm) ** 2 / float(n) * relax * relax


def output_alpha_rule(
    n: int,
    d: int,
    epsilon: float,
    data_norm: float,
    *,
    n_classes: int = 1,
    margin: float = OUTPUT_MARGIN_BOUND,
) -> float:
    """Default Λ for output perturbation: the minimizer of its excess-risk bound.

    The released θ̂ + κ, κ ~ N(0, σ²I) on D coordinates with σ = m(ε, δ)·2L/(nΛ)
    (analytic Gaussian multiplier m at δ = 1/n²), costs in expectation at most
    ½E[κᵀ∇²J κ] ≤ ½σ²(τ + DΛ), τ the trace bound of one record's Hessian (β for a
    GLM — E(xᵀκ)² = σ²‖x‖² — and R²(1 − 1/k) for softmax).  With the bias ΛB²/2:

        Λ = argmin_Λ ΛB²/2 + ½ D (2Lm/(nΛ))² (τ/D + Λ),   B = √k·B₀/R, B₀ = 10

    (:data:`OUTPUT_MARGIN_BOUND`, or ``margin``), minimized on a log grid and floored
    at R²/n (scikit-learn's C = 1) up to ε = 10 (:func:`_alpha_floor`).  Public inputs only.
    B₀ was chosen without the test set: on an 80/20 validation split of Adult's
    training rows (3 seeds), the best Λ of a grid was 3.2–5.6·10⁻³, 1.0–1.8·10⁻³,
    5.6·10⁻⁴ and 3.2·10⁻⁴ at ε = 0.3, 1, 3, 5; this rule gives 3.1·10⁻³, 1.3·10⁻³,
    6.5·10⁻⁴, 4.7·10⁻⁴ with B₀ = 10 (B₀ = 20 undershoots at small ε).
    """
    k = max(int(n_classes), 1)
    c = _logistic_constants(data_norm, k, d)
    D = c["n_coords"]
    tau = c["geometry"].get("hessian_trace", c["smoothness"])
    B = math.sqrt(k) * margin / data_norm
    m = analytic_gaussian_noise_multiplier(
        float(epsilon), default_delta(int(n), budget_share=False)
    )
    lam = np.geomspace(1e-8, 1e2, 4001) * data_norm**2
    try:
        c2 = (2.0 * c["lipschitz"] * m / n) ** 2
    except OverflowError:  # ε ≈ 1e-300: the noise term dominates every Λ of the grid
        return float(lam[-1])
    with np.errstate(over="ignore"):  # an infinite risk is never the minimum
        risk = lam * B * B / 2.0 + 0.5 * c2 * (tau / lam**2 + D / lam)
    return max(float(lam[int(np.argmin(risk))]), _alpha_floor(n, data_norm, epsilon))
