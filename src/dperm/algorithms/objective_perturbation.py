"""Objective perturbation (Chaudhuri, Monteleoni, Sarwate 2011; Kifer, Smith, Thakurta 2012).

The released model is the exact minimizer of a randomly *perturbed* objective

    θ_priv = argmin_{θ ∈ C}  J(θ) + ⟨b, θ⟩/n + (Δ/2)‖θ‖²,
    J(θ)   = (1/n) Σᵢ ℓ(θ; xᵢ, yᵢ) + (Λ/2)‖θ‖² + r(θ),

with ``alpha`` = Λ ≥ 0, an optional convex data-independent regularizer r and an
optional closed convex set C.  This is the *mean* form of Chaudhuri et al.
(their J(f, D) = (1/n)Σ ℓ + Λ N(f) with N(f) = ‖f‖²/2, and the linear term
bᵀf/n); multiplied by n it is the *sum* form Σ ℓ + (nΛ_tot/2)‖θ‖² + bᵀθ of
Kifer et al., so their Δ_sum is n(Λ + Δ) here.

Neighbouring relation: **replace-one** (D and D' have the same size n and
differ in one record).  Assumptions: ℓ(θ; x, y) = φ(⟨θ, x⟩, y) is a convex,
twice-differentiable GLM loss with |φ'| ≤ L/R over the domain and
|φ''| ≤ c, rows ‖x‖ ≤ R = ``data_norm`` (rows above are clipped, see
``n_clipped``), so ‖∇ℓ‖ ≤ L = ``loss.lipschitz(R)`` and the Hessian of one
example is rank one with eigenvalue ≤ β = c R² = ``loss.smoothness(R)``.

**Default: the tight calibration** (``calibration="tight"``,
:func:`tight_calibration`; proof in ``docs/objective_perturbation.md``).  Same
noise laws, same release; the privacy loss at an output θ is bounded by
ε_J + (noise term) with

* ε_J = r·log(1 + τ/(r·nΛ_tot)) the one-sided Jacobian bound
  (:func:`jacobian_epsilon`; GLM: log(1 + β/(nΛ_tot)), half of Chaudhuri et
  al.'s 2·log(1 + β/(nΛ)));
* pure ε: Gamma-norm noise at ε' = ε − ε_J;
* (ε, δ): Gaussian noise σ = ζ·m, m the analytic Gaussian multiplier (Balle &
  Wang 2018) at (ε − ε_J, δ/N): the noise term is at most the largest of N
  Gaussian privacy losses with fixed shifts ‖w‖ ≤ ζ = 2L (the vertices of the
  set of gradient changes: N = 4 for GLMs, k² − 1 for softmax), so
  δ(ε) ≤ N·δ_G(ε − ε_J) (:func:`tight_gaussian_delta`);
* Δ chosen by the expected excess risk of J among valid splits.

It also covers the multinomial model (``Softmax(k)``, Θ of shape (d, k): L = √2·R,
r = k − 1, τ = R²(1 − 1/k)).  ``calibration="paper"`` gives the published
calibrations below, exactly.

**ε-DP, Gamma-norm noise** — Chaudhuri et al. (2011), Algorithm 2 and
Theorem 9, generalized from ‖x‖ ≤ 1, |ℓ'| ≤ 1 by rescaling (see
:func:`chaudhuri_calibration`):

1. ε' = ε − log(1 + 2β/(nΛ) + β²/(n²Λ²));
2. if ε' > 0: Δ = 0; else Δ = β/(n(e^{ε/4} − 1)) − Λ and ε' = ε/2;
3. b with density ∝ exp(−ε'‖b‖/(2L)): ‖b‖ ~ Gamma(d, 2L/ε'), uniform direction.

**(ε, δ)-DP, Gaussian noise** — Kifer, Smith, Thakurta (2012), Algorithm 1
and Theorem 2 (which also covers the constraint set C and the convex,
possibly non-smooth regularizer r; see :func:`kifer_calibration`):

1. Δ such that nΛ_tot ≥ 2β/ε (their Δ_sum ≥ 2λ/ε): the Jacobian term costs ≤ ε/2;
2. b ~ N(0, σ² I) with σ² = ζ²(8 log(2/δ) + 4ε)/ε², ζ = 2L the replace-one
   change of one record's gradient: the noise term costs ≤ ε/2 except with
   probability δ.

The proofs assume the *exact* minimizer (they tolerate no optimization error):
the solver must reach the optimality residual ``tol`` (default 1e-10: ‖∇F(θ)‖₂,
or the gradient-mapping norm with a constraint or an ℓ1 term, recomputed
independently of the solver's own stopping rule) or
:class:`~dperm.exceptions.ConvergenceError` is raised (fail closed).  By strong
convexity the released θ is then within tol/(Λ + Δ) of the exact minimizer; that
gap is numerical and *not* covered by the theorem (AMP, :mod:`.amp`, is the
variant whose proof covers an approximate minimizer).  Whether the error is
raised depends on the private data, so raising is itself a (rare) data-dependent
event outside the guarantee; its message carries only public numbers (``tol``,
``max_iter``).  The proof sketch is in ``docs/objective_perturbation.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_nonnegative,
    check_positive,
)
from ..accounting.events import EpsilonDelta, PureEpsilon
from ..constraints import Constraint, Polytope, constraint_l2_radius
from ..design import as_design, check_X_y
from ..exceptions import (
    ConvergenceError,
    InvalidPrivacyParameter,
    LabelError,
    UnknownNameError,
)
from ..losses.base import MARGIN_BOUND, GLMLoss, check_smooth_glm_loss
from ..losses.softmax import FlatSoftmax, Softmax
from ..mechanisms.gamma_norm import gamma_norm_noise
from ..mechanisms.gaussian import gaussian_noise
from ..regularizers import Regularizer
from ..solvers import minimize
from .base import Result

__all__ = [
    "MARGIN_BOUND",
    "ObjectiveCalibration",
    "chaudhuri_calibration",
    "excess_risk_proxy",
    "fit",
    "jacobian_epsilon",
    "kifer_calibration",
    "paper_calibration",
    "tight_calibration",
    "tight_gaussian_delta",
]

_NOISES = ("auto", "gamma", "gaussian")
_CALIBRATIONS = ("tight", "paper")


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
        e_j = min(f * epsilon, 700.0)
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


# ----------------------------------------------------------------------------- shared checks
def _check_loss(loss, algorithm: str):
    if isinstance(loss, Softmax):
        return loss  # the multinomial model: smooth, constants in docs/objective_perturbation.md
    return check_smooth_glm_loss(
        loss,
        f"{algorithm} needs a twice-differentiable (smooth) loss whose exact minimizer "
        "the solver can certify; got {loss!r} (smooth={loss.smooth}). Use HuberSVM "
        "instead of Hinge, or a gradient-perturbation mechanism (dp-gd, dp-sgd) for "
        "non-smooth losses.",
    )


def _check_constraint(constraint, regularizer):
    if constraint is not None:
        if not isinstance(constraint, Constraint):
            raise InvalidPrivacyParameter(
                f"constraint must be a dperm.constraints.Constraint or None, got {constraint!r}"
            )
        if isinstance(constraint, Polytope):
            raise InvalidPrivacyParameter(
                "constraint must have a Euclidean projection (L2Ball, L1Ball, Box); a general "
                "Polytope is only supported by private Frank-Wolfe"
            )
    if regularizer is not None and not isinstance(regularizer, Regularizer):
        raise InvalidPrivacyParameter(
            f"regularizer must be a dperm.regularizers.Regularizer or None, got {regularizer!r}"
        )
    return constraint, regularizer


def _resolve_noise(noise, delta, n: int) -> tuple[str, float, bool]:
    """(noise kind, δ, whether δ was defaulted to 1/n²)."""
    if noise not in _NOISES:
        raise UnknownNameError(f"unknown noise {noise!r}; choose one of {list(_NOISES)}")
    if noise == "gamma":
        if delta is not None:
            check_delta(delta)
        return "gamma", 0.0, False
    if delta is None:
        return "gaussian", 1.0 / float(n) ** 2, True
    delta = check_delta(delta, allow_zero=(noise == "auto"))
    if noise == "auto" and delta == 0.0:
        return "gamma", 0.0, False
    return "gaussian", delta, False


@dataclasses.dataclass
class _Prepared:
    """Validated inputs and the public constants of the privacy calibration."""

    loss: GLMLoss
    X: Any
    y: np.ndarray
    epsilon: float
    data_norm: float
    alpha: float
    constraint: Constraint | None
    regularizer: Regularizer | None
    n_clipped: int
    lipschitz: float
    smoothness: float
    strong_convexity: float
    #: k for the softmax loss (Θ of shape (d, k)), None for a GLM loss
    n_classes: int | None = None
    # set by check_run
    tol: float = dataclasses.field(init=False)
    max_iter: int = dataclasses.field(init=False)
    noise: str = dataclasses.field(init=False)
    delta: float = dataclasses.field(init=False)
    delta_default: bool = dataclasses.field(init=False)
    rng: np.random.Generator = dataclasses.field(init=False)

    def check_run(self, noise, delta, tol, max_iter, random_state) -> None:
        """Validate the solver settings and the noise choice (δ = None → 1/n²),
        and make the noise generator."""
        self.tol = check_positive(tol, "tol")
        self.max_iter = check_count(max_iter, "max_iter")
        self.noise, self.delta, self.delta_default = _resolve_noise(noise, delta, self.X.shape[0])
        self.rng = check_random_state(random_state)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of θ: (d,), or (d, k) for the softmax loss."""
        d = self.X.shape[1]
        return (d,) if self.n_classes is None else (d, self.n_classes)

    def geometry(self) -> dict[str, Any]:
        """Rank r and trace τ of one record's Hessian, and the number N of vertices of
        the set of gradient changes (:func:`jacobian_epsilon`, :func:`tight_gaussian_delta`):
        GLM r = 1, τ = β, N = 4; softmax r = k − 1, τ = R²(1 − 1/k), N = k² − 1."""
        k = self.n_classes
        if k is None:
            return {"hessian_rank": 1, "hessian_trace": None, "n_vertices": 4}
        return {
            "hessian_rank": k - 1,
            "hessian_trace": self.data_norm**2 * (1.0 - 1.0 / k),
            "n_vertices": k * k - 1,
        }

    def diagnostics(self, algorithm: str, **extra) -> dict[str, Any]:
        """The public calibration inputs both perturbation methods report (the
        ``extra`` entries stand before ``n_samples``)."""
        return {
            "algorithm": algorithm,
            "neighbouring": "replace-one",
            "noise": self.noise,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "delta_default": self.delta_default,
            "alpha": self.alpha,
            "strong_convexity": self.strong_convexity,
            "data_norm": self.data_norm,
            "lipschitz": self.lipschitz,
            "smoothness": self.smoothness,
            "n_classes": self.n_classes,
            **extra,
            "n_samples": self.X.shape[0],
            "n_clipped": self.n_clipped,
        }


def _prepare(loss, X, y, epsilon, data_norm, alpha, constraint, regularizer, algorithm):
    """Shared preamble of objective and output perturbation: validate the loss,
    ε, R, Λ, C, r and the data, clip the rows to R, and derive L, β, Λ_J from
    public bounds."""
    loss = _check_loss(loss, algorithm)
    epsilon = check_epsilon(epsilon)
    data_norm = check_positive(data_norm, "data_norm")
    alpha = check_nonnegative(alpha, "alpha")
    constraint, regularizer = _check_constraint(constraint, regularizer)
    X, y = check_X_y(X, y)
    if y.dtype.kind not in "biuf":
        raise LabelError(
            f"y must be numeric for {algorithm} (±1 for classification losses), got dtype "
            f"{y.dtype}; the estimators map arbitrary class labels to ±1"
        )
    n_classes = None
    if isinstance(loss, Softmax):
        if constraint is not None or regularizer is not None:
            raise InvalidPrivacyParameter(
                f"{algorithm} with the softmax loss supports only the (Λ/2)‖Θ‖² penalty: "
                f"got constraint={constraint!r}, regularizer={regularizer!r}"
            )
        n_classes = loss.resolve_n_classes(y)  # public k (warns when read off the labels)
        y = loss.check_labels(y, n_classes)
        loss = Softmax(n_classes)
    else:
        y = loss.check_labels(y)
    X = as_design(X, data_norm)  # [OP-0] enforce ‖x‖ ≤ R (a per-row scale; X not copied)
    n_clipped = X.n_clipped
    radius = constraint_l2_radius(constraint, X.shape[1])
    return _Prepared(
        loss=loss,
        X=X,
        y=y,
        epsilon=epsilon,
        data_norm=data_norm,
        alpha=alpha,
        constraint=constraint,
        regularizer=regularizer,
        n_clipped=n_clipped,
        lipschitz=loss.lipschitz(data_norm, radius=radius),  # [OP-0] L from public bounds
        smoothness=loss.smoothness(data_norm),  # [OP-0] β = c R²
        strong_convexity=alpha + (regularizer.strong_convexity if regularizer else 0.0),
        n_classes=n_classes,
    )


def _solve(loss, X, y, l2, linear, regularizer, constraint, tol, max_iter, algorithm):
    shape = None
    x0 = None
    if isinstance(loss, Softmax):  # Θ (d, k) solved as vec(Θ); the residual is ‖vec ∇F‖₂
        k = loss.n_classes  # set by _prepare (public)
        shape = (X.shape[1], k)
        loss = FlatSoftmax(loss, k)
        x0 = np.zeros(X.shape[1] * k)
        linear = None if linear is None else np.asarray(linear).ravel()
    res = minimize(
        loss,
        X,
        y,
        l2=l2,
        linear=linear,
        regularizer=regularizer,
        constraint=constraint,
        tol=tol,
        max_iter=max_iter,
        x0=x0,
    )
    if not res.converged:  # [OP-6] the theorems need the exact minimizer: fail closed
        # Raising depends on the private data; the message carries only public numbers
        # (tol, max_iter): not the residual reached, the iteration count or the method.
        raise ConvergenceError(
            f"{algorithm}: the solver did not reach the optimality residual tol={tol:g} "
            f"within max_iter={max_iter}; the privacy theorem assumes the exact minimizer, "
            "so nothing is released. Increase max_iter, loosen tol, or increase alpha."
        )
    theta = res.theta if shape is None else res.theta.reshape(shape)
    if constraint is not None:
        theta = constraint.project(theta)  # already in C; post-processing keeps it there
    return theta, res


# ----------------------------------------------------------------------------- fit
def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    delta: float | None = 0.0,
    data_norm: float,
    alpha: float,
    noise: str = "auto",
    constraint: Constraint | None = None,
    regularizer: Regularizer | None = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    calibration: str = "tight",
    random_state=None,
) -> Result:
    """Objective perturbation: ε-DP (Chaudhuri et al. 2011, Algorithm 2, Theorem 9) or
    (ε, δ)-DP (Kifer, Smith, Thakurta 2012, Algorithm 1, Theorem 2), calibrated by
    default with dperm's tight analysis of the same mechanism (:func:`tight_calibration`).

    Minimizes (1/n)Σ ℓ(θ; xᵢ, yᵢ) + (Λ/2)‖θ‖² + r(θ) + ⟨b, θ⟩/n + (Δ/2)‖θ‖²
    over C exactly; see the module docstring for the calibration of b and Δ.
    Neighbouring relation: replace-one.

    Parameters
    ----------
    loss : GLMLoss or Softmax
        A smooth (twice-differentiable) loss: Logistic, HuberSVM, Squared
        (Squared needs ``constraint`` for its Lipschitz constant), or
        ``Softmax(k)`` (the multinomial model, θ of shape (d, k); no constraint
        or regularizer).  Hinge and Quantile are refused.
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
        Labels the loss takes (±1 for classification losses, 0 … k−1 for Softmax).
    epsilon : float > 0
    delta : float in [0, 1) or None, default 0.0
        0 → ε-DP with Gamma-norm noise (``noise="auto"``).  None → the
        Gaussian form with δ = 1/n² (``diagnostics["delta_default"]`` is True).
    data_norm : float > 0
        Public bound R on ‖xᵢ‖₂; rows above it are clipped to it.
    alpha : float ≥ 0
        Λ, coefficient of (Λ/2)‖θ‖² in the mean-form objective.
    noise : {"auto", "gamma", "gaussian"}, default "auto"
        "auto": Gamma-norm when δ = 0, Gaussian otherwise.  "gamma" with δ > 0
        gives (and reports) pure ε-DP.
    constraint : Constraint, optional
        Closed convex set C with a projection; the output is always in C.
    regularizer : Regularizer, optional
        Convex data-independent r (L1, ElasticNet, GroupL2); its
        ``strong_convexity`` adds to Λ in the calibration.
    tol : float > 0, default 1e-10
        Optimality residual the solver must reach.
    max_iter : int, default 10000
    calibration : {"tight", "paper"}, default "tight"
        "tight": the one-sided Jacobian bound and, for Gaussian noise, the exact
        Gaussian privacy profile of the noise term with the ε split and Δ chosen
        by :func:`tight_calibration` (``docs/objective_perturbation.md``).
        "paper": the published calibrations (:func:`chaudhuri_calibration`,
        :func:`kifer_calibration`; GLM losses only).
    random_state : None, int, SeedSequence or Generator
        Source of the noise b (None = OS entropy).

    Returns
    -------
    Result
        ``theta`` of shape (d,) (or (d, k) for Softmax); ``event``
        ``PureEpsilon(ε)`` or ``EpsilonDelta(ε, δ)``; ``diagnostics`` with the
        calibration (``calibration``, ``epsilon_noise``, ``epsilon_jacobian``,
        ``extra_l2``, ``noise_scale``, ``lipschitz``, ``smoothness``, …),
        ``neighbouring="replace-one"`` and ``n_clipped``.
        ``n_clipped`` and the ``solver_*`` entries depend on the data and are
        *not* covered by the privacy guarantee: they are for the data owner.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ (δ = 0 with ``noise="gaussian"``), ``data_norm``, ``alpha``, a
        non-smooth loss, a constraint without projection, Squared loss without
        a constraint.
    InvalidDataError, LabelError
        Bad X or y.
    UnknownNameError
        Unknown ``noise`` or ``calibration``.
    ConvergenceError
        The solver did not reach ``tol`` (the theorem needs the exact minimizer);
        nothing is released.  Raising depends on the data (outside the
        guarantee); the message carries only ``tol`` and ``max_iter``.
    """
    algorithm = "objective perturbation"
    if calibration not in _CALIBRATIONS:
        raise UnknownNameError(
            f"unknown calibration {calibration!r}; choose one of {list(_CALIBRATIONS)}"
        )
    p = _prepare(loss, X, y, epsilon, data_norm, alpha, constraint, regularizer, algorithm)
    p.check_run(noise, delta, tol, max_iter, random_state)
    loss, X, y, epsilon, alpha = p.loss, p.X, p.y, p.epsilon, p.alpha
    lip, beta, strong = p.lipschitz, p.smoothness, p.strong_convexity
    kind, delta_used, rng = p.noise, p.delta, p.rng
    n = X.shape[0]
    n_coords = math.prod(p.shape)

    if calibration == "paper":
        if p.n_classes is not None:
            raise InvalidPrivacyParameter(
                "calibration='paper' (Chaudhuri et al.; Kifer et al.) covers GLM losses only; "
                "use calibration='tight' for the softmax loss"
            )
        cal = paper_calibration(epsilon, delta_used, n, strong, beta, lip)
        theorem = (
            "Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 2 / Theorem 9"
            if kind == "gamma"
            else "Kifer, Smith, Thakurta 2012, Algorithm 1 / Theorem 2"
        )
    else:
        k = 1 if p.n_classes is None else p.n_classes
        cal = tight_calibration(
            epsilon,
            delta_used,
            n,
            strong,
            beta,
            lip,
            n_coords=n_coords,
            theta_bound=math.sqrt(k) * MARGIN_BOUND / p.data_norm,
            **p.geometry(),
        )
        theorem = (
            "objective perturbation (Chaudhuri et al. 2011; Kifer et al. 2012), tight "
            "analysis: one-sided Jacobian bound"
            + ("" if kind == "gamma" else " + Gaussian privacy profile (Balle & Wang 2018)")
            + " (docs/objective_perturbation.md)"
        )
    if kind == "gamma":
        # ν(b) ∝ exp(−ε'‖b‖/ζ), ζ = 2L
        b = gamma_norm_noise(n_coords, cal.epsilon_noise, cal.sensitivity, rng)  # [OP-3]
        event: PureEpsilon | EpsilonDelta = PureEpsilon(epsilon=epsilon)
    else:
        b = gaussian_noise(n_coords, cal.noise_scale, rng)  # [OP-5/8] b ~ N(0, σ² I)
        event = EpsilonDelta(epsilon=epsilon, delta=delta_used)
    b = b.reshape(p.shape)
    extra = cal.extra_l2
    diagnostics = p.diagnostics("objective_perturbation")
    diagnostics.update(
        theorem=theorem,
        calibration=cal.calibration,
        epsilon_noise=cal.epsilon_noise,
        epsilon_jacobian=cal.epsilon_jacobian,
        noise_scale=cal.noise_scale,  # σ of each coordinate of b, or the Gamma scale of ‖b‖
        sensitivity=cal.sensitivity,
        n_vertices=cal.n_vertices,
    )
    # [OP-6] θ = argmin_C (1/n)Σℓ + ((Λ + Δ)/2)‖θ‖² + r(θ) + ⟨b, θ⟩/n
    theta, res = _solve(
        loss, X, y, alpha + extra, b / n, p.regularizer, p.constraint, p.tol, p.max_iter, algorithm
    )
    diagnostics.update(
        extra_l2=extra,
        l2_total=alpha + extra,
        solver_method=res.method,
        solver_iterations=res.n_iter,
        solver_optimality=res.optimality,
    )
    return Result(theta=theta, event=event, diagnostics=diagnostics)
