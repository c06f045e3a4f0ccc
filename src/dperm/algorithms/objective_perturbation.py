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
    check_X_y,
    clip_rows,
)
from ..accounting.events import EpsilonDelta, PureEpsilon
from ..constraints import Constraint, Polytope, constraint_l2_radius
from ..exceptions import (
    ConvergenceError,
    InvalidPrivacyParameter,
    LabelError,
    UnknownNameError,
)
from ..losses.base import GLMLoss, check_smooth_glm_loss
from ..mechanisms.gamma_norm import gamma_norm_noise
from ..mechanisms.gaussian import gaussian_noise
from ..regularizers import Regularizer
from ..solvers import minimize
from .base import Result

__all__ = ["chaudhuri_calibration", "fit", "kifer_calibration"]

_NOISES = ("auto", "gamma", "gaussian")


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


# ----------------------------------------------------------------------------- shared checks
def _check_loss(loss, algorithm: str) -> GLMLoss:
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
    y = loss.check_labels(y)
    X, n_clipped = clip_rows(X, data_norm)  # [OP-0] enforce ‖x‖ ≤ R
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
    )


def _solve(loss, X, y, l2, linear, regularizer, constraint, tol, max_iter, algorithm):
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
    )
    if not res.converged:  # [OP-6] the theorems need the exact minimizer: fail closed
        # Raising depends on the private data; the message carries only public numbers
        # (tol, max_iter): not the residual reached, the iteration count or the method.
        raise ConvergenceError(
            f"{algorithm}: the solver did not reach the optimality residual tol={tol:g} "
            f"within max_iter={max_iter}; the privacy theorem assumes the exact minimizer, "
            "so nothing is released. Increase max_iter, loosen tol, or increase alpha."
        )
    theta = res.theta
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
    random_state=None,
) -> Result:
    """Objective perturbation: ε-DP (Chaudhuri et al. 2011, Algorithm 2, Theorem 9) or
    (ε, δ)-DP (Kifer, Smith, Thakurta 2012, Algorithm 1, Theorem 2).

    Minimizes (1/n)Σ ℓ(θ; xᵢ, yᵢ) + (Λ/2)‖θ‖² + r(θ) + ⟨b, θ⟩/n + (Δ/2)‖θ‖²
    over C exactly; see the module docstring for the calibration of b and Δ.
    Neighbouring relation: replace-one.

    Parameters
    ----------
    loss : GLMLoss
        A smooth (twice-differentiable) loss: Logistic, HuberSVM, Squared
        (Squared needs ``constraint`` for its Lipschitz constant).  Hinge and
        Quantile are refused.
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
        Labels the loss takes (±1 for classification losses).
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
    random_state : None, int, SeedSequence or Generator
        Source of the noise b (None = OS entropy).

    Returns
    -------
    Result
        ``theta`` of shape (d,); ``event`` ``PureEpsilon(ε)`` or
        ``EpsilonDelta(ε, δ)``; ``diagnostics`` with the calibration
        (``epsilon_noise``, ``extra_l2``, ``noise_scale``, ``lipschitz``,
        ``smoothness``, …), ``neighbouring="replace-one"`` and ``n_clipped``.
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
        Unknown ``noise``.
    ConvergenceError
        The solver did not reach ``tol`` (the theorem needs the exact minimizer);
        nothing is released.  Raising depends on the data (outside the
        guarantee); the message carries only ``tol`` and ``max_iter``.
    """
    algorithm = "objective perturbation"
    p = _prepare(loss, X, y, epsilon, data_norm, alpha, constraint, regularizer, algorithm)
    p.check_run(noise, delta, tol, max_iter, random_state)
    loss, X, y, epsilon, alpha = p.loss, p.X, p.y, p.epsilon, p.alpha
    lip, beta, strong = p.lipschitz, p.smoothness, p.strong_convexity
    kind, delta_used, rng = p.noise, p.delta, p.rng
    n, d = X.shape

    diagnostics = p.diagnostics("objective_perturbation")
    if kind == "gamma":
        # Chaudhuri et al. (2011), Algorithm 2, steps 1–3 (chaudhuri_calibration)
        eps_noise, extra = chaudhuri_calibration(epsilon, n, strong, beta)
        b = gamma_norm_noise(d, eps_noise, 2.0 * lip, rng)  # [OP-3] ν(b) ∝ exp(−ε'‖b‖/(2L))
        event: PureEpsilon | EpsilonDelta = PureEpsilon(epsilon=epsilon)
        diagnostics.update(
            theorem="Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 2 / Theorem 9",
            epsilon_noise=eps_noise,
            noise_scale=2.0 * lip / eps_noise,  # Gamma scale of ‖b‖
        )
    else:
        # Kifer, Smith, Thakurta (2012), Algorithm 1 / Theorem 2 (kifer_calibration)
        sigma, extra = kifer_calibration(epsilon, delta_used, n, strong, beta, lip)
        b = gaussian_noise(d, sigma, rng)  # [OP-5] b ~ N(0, σ² I)
        event = EpsilonDelta(epsilon=epsilon, delta=delta_used)
        diagnostics.update(
            theorem="Kifer, Smith, Thakurta 2012, Algorithm 1 / Theorem 2",
            epsilon_noise=epsilon / 2.0,
            epsilon_jacobian=epsilon / 2.0,
            noise_scale=sigma,  # σ of each coordinate of b
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
