"""The privacy calibrations of objective perturbation (:mod:`.objective_perturbation`).

Pure functions of public numbers (n, ε, δ, Λ, β, L and the geometry of one record's
Hessian), each with the theorem it implements:

* :func:`chaudhuri_calibration` — ε-DP, Gamma-norm noise: Chaudhuri, Monteleoni,
  Sarwate (2011), Algorithm 2 / Theorem 9;
* :func:`kifer_calibration` — (ε, δ)-DP, Gaussian noise: Kifer, Smith, Thakurta
  (2012), Algorithm 1 / Theorem 2;
* :func:`paper_calibration` — the two published calibrations as one
  :class:`ObjectiveCalibration`;
* :func:`tight_calibration` — dperm's tight analysis of the same mechanism: the
  one-sided Jacobian bound :func:`jacobian_epsilon` and, for Gaussian noise, the exact
  Gaussian privacy profile (Balle & Wang 2018) of the noise term
  (:func:`tight_gaussian_delta`), with Δ chosen by :func:`excess_risk_proxy`
  (proof in ``docs/objective_perturbation.md``).

The proof-step anchors ``[OP-n]`` are those of ``docs/objective_perturbation.md``.
Every name is re-exported by :mod:`dperm.algorithms.objective_perturbation`, the
public path; AMP (:mod:`.amp`) uses the tight analysis for its objective part.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from .._validation import check_count, check_delta, check_epsilon, check_nonnegative, check_positive
from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "ObjectiveCalibration",
    "chaudhuri_calibration",
    "excess_risk_proxy",
    "jacobian_epsilon",
    "kifer_calibration",
    "paper_calibration",
    "tight_calibration",
    "tight_gaussian_delta",
]


# ----------------------------------------------------------------------------- calibration
def chaudhuri_calibration(
    epsilon: float, n: int, alpha: float, smoothness: float
) -> tuple[float, float]:
    """ε' and Δ of Chaudhuri, Monteleoni, Sarwate (2011), Algorithm 2 (Theorem 9).

    The paper assumes ‖x‖ ≤ 1, |ℓ'| ≤ 1 and |ℓ''| ≤ c.  For rows ‖x‖ ≤ R and a
    GLM loss with |φ'| ≤ g, put x̃ = x/R, θ̃ = Rθ, ℓ̃ = ℓ/g: then Λ̃ = Λ/(gR²),
    c̃ = c/g, b̃ = b/(gR) and Δ̃ = Δ/(gR²), so every ratio c̃/Λ̃ becomes
    cR²/Λ = β/Λ with β = ``smoothness`` = cR² the example Hessian bound, and
    the noise density exp(−ε'‖b̃‖/2) becomes exp(−ε'‖b‖/(2L)) with L = gR.

    Parameters
    ----------
    epsilon : float > 0
    n : int ≥ 1
        Number of records.
    alpha : float ≥ 0
        Λ, the strong convexity of the regularization in the mean-form objective
        (0 is allowed: the Δ branch then supplies it).
    smoothness : float > 0
        β = c·R² (``loss.smoothness(data_norm)``).

    Returns
    -------
    epsilon_noise : float
        ε', the part of ε the Gamma-norm noise is calibrated to.
    extra_l2 : float ≥ 0
        Δ, the coefficient of the added (Δ/2)‖θ‖².

    Notes
    -----
    Step 1: ε' = ε − log(1 + 2β/(nΛ) + β²/(n²Λ²)).  Step 2: if ε' > 0 then
    Δ = 0, else Δ = β/(n(e^{ε/4} − 1)) − Λ and ε' = ε/2.  In the second branch
    log(1 + β/(n(Λ + Δ)))² = ε/2, so the Jacobian term costs exactly ε/2.
    """
    epsilon = check_epsilon(epsilon)
    n = check_count(n, "n")
    alpha = check_nonnegative(alpha, "alpha")
    beta = check_positive(smoothness, "smoothness")
    if alpha > 0:
        ratio = beta / (n * alpha)
        eps_noise = epsilon - math.log1p(2.0 * ratio + ratio * ratio)  # [OP-1] step 1
    else:
        eps_noise = -math.inf
    if eps_noise > 0:
        return eps_noise, 0.0  # [OP-2] step 2, first branch: Δ = 0
    # e^{ε/4} − 1 overflows a float beyond ε ≈ 2800; the required Δ is then 0 anyway
    extra = beta / (n * math.expm1(min(epsilon / 4.0, 700.0))) - alpha  # [OP-2] second branch
    return epsilon / 2.0, max(extra, 0.0)


def kifer_calibration(
    epsilon: float, delta: float, n: int, alpha: float, smoothness: float, lipschitz: float
) -> tuple[float, float]:
    """σ and Δ of Gaussian objective perturbation, Kifer, Smith, Thakurta (2012),
    Algorithm 1 and Theorem 2, in dperm's mean form and replace-one relation.

    * Δ = max(0, 2β/(nε) − Λ), so that the sum-form strong convexity
      n(Λ + Δ) ≥ 2β/ε (their "Δ ≥ 2λ/ε"): the Jacobian ratio is at most
      1 + β/(n(Λ + Δ)) ≤ 1 + ε/2 ≤ e^{ε/2}.
    * σ = ζ √(8 log(2/δ) + 4ε)/ε (their σ² = ζ²(8 log(2/δ) + 4ε)/ε²) with
      ζ = 2L, the ℓ2 change of one record's gradient under replace-one
      (‖∇ℓ(θ; z) − ∇ℓ(θ; z')‖ ≤ 2L).  For GLMs that change lies in
      span{x, x'}, so the privacy loss of the noise term is at most
      (ζ/σ)·t + ζ²/(2σ²) with t² = 2 log(2/δ) except with probability δ/2
      (a χ² tail with ≤ 2 degrees of freedom), which this σ makes ≤ ε/2.

    Parameters
    ----------
    epsilon : float > 0
    delta : float in (0, 1)
    n : int ≥ 1
    alpha : float ≥ 0
        Λ (plus any strong convexity of the regularizer).
    smoothness : float > 0
        β = ``loss.smoothness(data_norm)``.
    lipschitz : float > 0
        L = ``loss.lipschitz(data_norm, ...)``.

    Returns
    -------
    sigma : float
        Standard deviation of each coordinate of b (sum-form units).
    extra_l2 : float ≥ 0
        Δ.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    n = check_count(n, "n")
    alpha = check_nonnegative(alpha, "alpha")
    beta = check_positive(smoothness, "smoothness")
    lip = check_positive(lipschitz, "lipschitz")
    extra = max(2.0 * beta / (n * epsilon) - alpha, 0.0)  # [OP-4] Jacobian ≤ e^{ε/2}
    zeta = 2.0 * lip  # [OP-5] replace-one gradient sensitivity
    sigma = zeta * math.sqrt(8.0 * math.log(2.0 / delta) + 4.0 * epsilon) / epsilon  # [OP-5]
    return sigma, extra


# ----------------------------------------------------------------------------- tight calibration
def jacobian_epsilon(
    n: int,
    l2_total: float,
    smoothness: float,
    *,
    hessian_rank: int = 1,
    hessian_trace: float | None = None,
) -> float:
    """ε_J: bound on |log det(A + H_z) − log det(A + H_z')|, the Jacobian term.

    A ⪰ nΛ_tot·I is the Hessian of the sum-form objective without the changed
    record, H_z ⪰ 0 that record's Hessian, of rank ≤ r, eigenvalues ≤ β and
    trace ≤ τ.  By the matrix determinant identity and A ⪰ nΛ_tot·I,

        0 ≤ log det(A + H_z) − log det A ≤ Σⱼ log(1 + qⱼ/(nΛ_tot))
          ≤ r·log(1 + τ/(r·nΛ_tot))            (Jensen over the r eigenvalues qⱼ),

    and the same for z', so the *difference* of the two log-determinants lies in
    [−ε_J, ε_J] with ε_J = r·log(1 + τ/(r·nΛ_tot)) — one factor, not the product
    (1 + β/(nΛ))² of Chaudhuri et al. (2011, proof of Theorem 9), which bounds a
    rank-two perturbation of one Jacobian by the other.  GLMs: r = 1, τ = β
    (ε_J = log(1 + β/(nΛ_tot)), the bound of Kifer, Smith, Thakurta 2012,
    proof of Theorem 2, used one-sidedly); softmax with k classes: r = k − 1,
    τ = R²(1 − 1/k) (``docs/objective_perturbation.md``).

    Parameters
    ----------
    n : int ≥ 1
    l2_total : float > 0
        Λ_tot, strong convexity of the mean-form objective (Λ + Δ + the
        regularizer's).
    smoothness : float > 0
        β, bound on the eigenvalues of one record's Hessian.
    hessian_rank : int ≥ 1, default 1
        r.
    hessian_trace : float, optional
        τ (default r·β, which gives r·log(1 + β/(nΛ_tot))).

    Returns
    -------
    float
    """
    n = check_count(n, "n")
    lam = check_positive(l2_total, "l2_total")
    beta = check_positive(smoothness, "smoothness")
    r = check_count(hessian_rank, "hessian_rank")
    tau = (
        r * beta
        if hessian_trace is None
        else min(check_positive(hessian_trace, "hessian_trace"), r * beta)
    )
    return r * math.log1p(tau / (r * n * lam))  # [OP-7]


def _l2_for_jacobian(epsilon_jacobian: float, n: int, smoothness: float, rank: int, trace) -> float:
    """Λ_tot with jacobian_epsilon(n, Λ_tot, …) = ``epsilon_jacobian`` (its inverse)."""
    tau = rank * smoothness if trace is None else min(trace, rank * smoothness)
    return tau / (rank * n * math.expm1(epsilon_jacobian / rank))


def tight_gaussian_delta(
    epsilon: float,
    noise_multiplier: float,
    epsilon_jacobian: float,
    n_vertices: int,
) -> float:
    """δ(ε) of Gaussian objective perturbation under the tight analysis.

    The privacy loss at an output θ is L_noise(θ) + L_J(θ) with |L_J| ≤ ε_J
    (:func:`jacobian_epsilon`) and L_noise = (2⟨b, v⟩ + ‖v‖²)/(2σ²), b ~ N(0, σ²I)
    the noise drawn and v(θ) the change of the changed record's gradient.  v is
    a *linear* function of the per-record gradient factors, which range over a
    polytope with N non-zero vertices w (GLM: v = a·x − a'·x' with
    |a|, |a'| ≤ L/R: N = 4; softmax: v = x rᵀ − x' r'ᵀ with r, r' in
    shifted simplices: N = k² − 1), all of norm ≤ ζ = 2L.  L_noise is convex in
    v, so L_noise ≤ max_w (2⟨b, w⟩ + ‖w‖²)/(2σ²): a maximum of N Gaussian
    privacy losses with fixed shifts.  With (1 − e^{ε−max})₊ ≤ Σ_w (1 − e^{ε−L_w})₊,

        δ(ε) ≤ N · δ_G(ε − ε_J; ζ/σ),

    δ_G the exact Gaussian privacy profile of Balle & Wang (2018, Theorem 8).

    Parameters
    ----------
    epsilon : float > 0
    noise_multiplier : float > 0
        σ/ζ.
    epsilon_jacobian : float ≥ 0
        ε_J.
    n_vertices : int ≥ 1
        N.

    Returns
    -------
    float in [0, 1]
    """
    from ..accounting.gaussian import gaussian_delta

    eps = check_epsilon(epsilon)
    m = check_positive(noise_multiplier, "noise_multiplier")
    e_j = check_nonnegative(epsilon_jacobian, "epsilon_jacobian")
    nv = check_count(n_vertices, "n_vertices")
    if e_j >= eps:
        return 1.0
    return min(1.0, nv * gaussian_delta(m, eps - e_j))  # [OP-8]


@dataclasses.dataclass(frozen=True)
class ObjectiveCalibration:
    """The public constants of one objective-perturbation run.

    Attributes
    ----------
    noise : {"gamma", "gaussian"}
    calibration : {"tight", "paper"}
    epsilon_noise : float
        ε spent by the noise term (ε − ε_J for "tight").
    epsilon_jacobian : float
        ε_J, bound of the Jacobian term at Λ + Δ.
    extra_l2 : float ≥ 0
        Δ.
    noise_scale : float
        σ of each coordinate of b (Gaussian) or the Gamma scale of ‖b‖.
    sensitivity : float
        ζ = 2L, the ℓ2 (Frobenius) change of one record's gradient.
    n_vertices : int
        N of :func:`tight_gaussian_delta` (0 for the paper and pure paths).
    """

    noise: str
    calibration: str
    epsilon_noise: float
    epsilon_jacobian: float
    extra_l2: float
    noise_scale: float
    sensitivity: float
    n_vertices: int = 0


def _noise_moments(noise: str, scale: float, n_coords: int, n: int) -> tuple[float, float]:
    """(E‖b/n‖, E‖b/n‖²) of the noise (Gamma-norm: ‖b‖ ~ Gamma(D, scale))."""
    if noise == "gamma":
        return n_coords * scale / n, n_coords * (n_coords + 1) * (scale / n) ** 2
    m2 = n_coords * (scale / n) ** 2
    return math.sqrt(m2), m2


def excess_risk_proxy(
    extra: float, alpha: float, theta_bound: float, m1: float, m2: float
) -> float:
    """Expected excess risk of J (mean form, Λ = ``alpha``) for a given Δ:
    (Δ²B² + 2ΔB·E‖b/n‖ + E‖b/n‖²)/(2(Λ + Δ)), ‖θ̂‖ ≤ B (strong convexity; the bound
    of :func:`dperm.theory.theoretical_bound` for objective perturbation)."""
    return (extra**2 * theta_bound**2 + 2.0 * extra * theta_bound * m1 + m2) / (
        2.0 * (alpha + extra)
    )


#: fractions f of ε offered to the Jacobian term when Δ is chosen (ε_J = f·ε)
_JACOBIAN_FRACTIONS = tuple(float(f) for f in np.geomspace(1e-3, 0.95, 120))


@functools.lru_cache(maxsize=4096)
def tight_calibration(
    epsilon: float,
    delta: float,
    n: int,
    alpha: float,
    smoothness: float,
    lipschitz: float,
    *,
    n_coords: int,
    theta_bound: float,
    hessian_rank: int = 1,
    hessian_trace: float | None = None,
    n_vertices: int = 4,
) -> ObjectiveCalibration:
    """Noise and Δ of objective perturbation under the tight analysis.

    * δ = 0 (pure ε, Gamma-norm noise ν(b) ∝ exp(−ε'‖b‖/ζ)): the noise ratio is
      ≤ e^{ε'} (triangle inequality, ‖v‖ ≤ ζ = 2L) and the Jacobian ratio ≤ e^{ε_J},
      so ε' = ε − ε_J(Λ + Δ).
    * δ > 0 (Gaussian b ~ N(0, σ²I)): σ = ζ·m with m the analytic Gaussian
      multiplier (Balle & Wang 2018) at (ε − ε_J, δ/N), so that
      :func:`tight_gaussian_delta` (ε) ≤ δ.

    Δ ≥ 0 is not fixed by a rule of thumb: among Δ = 0 (when ε_J(Λ) < ε) and the
    Δ that make ε_J = f·ε for 120 log-spaced f ∈ [0.001, 0.95], the one minimizing the expected
    excess risk of J (:func:`excess_risk_proxy`, a public function of the
    calibration, with ‖θ̂‖ ≤ ``theta_bound``) is taken.  Every candidate is a
    valid calibration; the choice only uses public numbers.

    Parameters
    ----------
    epsilon : float > 0
    delta : float in [0, 1)
    n : int ≥ 1
    alpha : float ≥ 0
        Λ plus the regularizer's strong convexity.
    smoothness, lipschitz : float > 0
        β and L (ζ = 2L).
    n_coords : int
        Number of coordinates of b (d, or d·k for softmax).
    theta_bound : float > 0
        Public prior bound B on ‖θ̂‖ (the estimators: MARGIN_BOUND/R per class).
    hessian_rank, hessian_trace
        See :func:`jacobian_epsilon`.
    n_vertices : int
        See :func:`tight_gaussian_delta`.

    Returns
    -------
    ObjectiveCalibration
    """
    from ..accounting.gaussian import analytic_gaussian_noise_multiplier

    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    n = check_count(n, "n")
    alpha = check_nonnegative(alpha, "alpha")
    beta = check_positive(smoothness, "smoothness")
    zeta = 2.0 * check_positive(lipschitz, "lipschitz")  # [OP-5]
    n_coords = check_count(n_coords, "n_coords")
    bound = check_positive(theta_bound, "theta_bound")
    rank = check_count(hessian_rank, "hessian_rank")
    nv = check_count(n_vertices, "n_vertices")
    noise = "gamma" if delta == 0.0 else "gaussian"

    candidates: list[float] = []
    if (
        alpha > 0
        and jacobian_epsilon(n, alpha, beta, hessian_rank=rank, hessian_trace=hessian_trace)
        < epsilon
    ):
        candidates.append(0.0)
    for f in _JACOBIAN_FRACTIONS:
        # ε_J = f·min(ε, 50r): Δ = τ/(rn(e^{ε_J/r} − 1)) stays a positive float and the
        # candidates keep spanning the balanced Δ at any ε (with f·ε capped at 700 they
        # underflowed to 0 at ε ≳ 10⁵ and none was left: the fit raised)
        e_j = f * min(epsilon, 50.0 * rank)
        extra = _l2_for_jacobian(e_j, n, beta, rank, hessian_trace) - alpha
        if extra > 0:
            candidates.append(extra)
    best = None
    for extra in candidates:
        e_j = jacobian_epsilon(
            n, alpha + extra, beta, hessian_rank=rank, hessian_trace=hessian_trace
        )
        e_noise = epsilon - e_j
        if not e_noise > 0:
            continue
        if noise == "gamma":
            scale = zeta / e_noise  # [OP-3] ‖b‖ ~ Gamma(D, ζ/ε')
        else:
            scale = zeta * analytic_gaussian_noise_multiplier(e_noise, delta / nv)  # [OP-8]
        try:
            m1, m2 = _noise_moments(noise, scale, n_coords, n)
            risk = excess_risk_proxy(extra, alpha, bound, m1, m2)
        except OverflowError:  # tiny ε: every candidate's noise is astronomically large
            risk = math.inf
        if best is None or risk < best[0]:
            best = (risk, extra, e_j, e_noise, scale)
    if best is None:  # pragma: no cover - Δ candidates always exist for f < 1
        raise InvalidPrivacyParameter(
            f"no objective-perturbation calibration meets epsilon={epsilon!r}"
        )
    _, extra, e_j, e_noise, scale = best
    return ObjectiveCalibration(
        noise=noise,
        calibration="tight",
        epsilon_noise=e_noise,
        epsilon_jacobian=e_j,
        extra_l2=extra,
        noise_scale=scale,
        sensitivity=zeta,
        n_vertices=nv if noise == "gaussian" else 0,
    )


def paper_calibration(
    epsilon: float, delta: float, n: int, alpha: float, smoothness: float, lipschitz: float
) -> ObjectiveCalibration:
    """The published calibrations as an :class:`ObjectiveCalibration`:
    :func:`chaudhuri_calibration` (δ = 0) or :func:`kifer_calibration` (δ > 0)."""
    zeta = 2.0 * lipschitz
    if delta == 0.0:
        eps_noise, extra = chaudhuri_calibration(epsilon, n, alpha, smoothness)
        return ObjectiveCalibration(
            "gamma", "paper", eps_noise, epsilon - eps_noise, extra, zeta / eps_noise, zeta
        )
    sigma, extra = kifer_calibration(epsilon, delta, n, alpha, smoothness, lipschitz)
    return ObjectiveCalibration(
        "gaussian", "paper", epsilon / 2.0, epsilon / 2.0, extra, sigma, zeta
    )
