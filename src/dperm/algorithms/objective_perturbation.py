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
import math
from typing import Any

import numpy as np

from .._docstrings import compose_doc
from .._rng import check_random_state
from .._validation import (
    check_count,
    check_data_norm,
    check_delta,
    check_delta_size,
    check_epsilon,
    check_nonnegative,
    check_positive,
)
from ..accounting.active import default_delta
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
from ._objective_calibration import (
    ObjectiveCalibration,
    chaudhuri_calibration,
    excess_risk_proxy,
    jacobian_epsilon,
    kifer_calibration,
    paper_calibration,
    tight_calibration,
    tight_gaussian_delta,
)
from .base import Result, private_fit

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
    """(noise kind, δ, whether δ was defaulted to min(1/n², 10⁻⁵): :func:`default_delta`)."""
    if noise not in _NOISES:
        raise UnknownNameError(f"unknown noise {noise!r}; choose one of {list(_NOISES)}")
    if noise == "gamma":
        if delta is not None:
            check_delta(delta)
        return "gamma", 0.0, False
    if delta is None:
        return "gaussian", default_delta(int(n), budget_share=False), True
    delta = check_delta(delta, allow_zero=(noise == "auto"))
    if noise == "auto" and delta == 0.0:
        return "gamma", 0.0, False
    return "gaussian", delta, False


#: the parameters that objective and output perturbation validate with the same code
#: (:func:`_prepare`, :meth:`_Prepared.check_run`), documented once and composed into
#: both docstrings
_PERTURBATION_DOCS = {
    "inputs": """
        X : ndarray or csr_matrix of shape (n, d)
        y : ndarray of shape (n,)
            Labels the loss takes (±1 for classification losses, 0 … k−1 for Softmax).
        epsilon : float > 0
        delta : float in [0, 1) or None, default 0.0
            0 → ε-DP with Gamma-norm noise (``noise="auto"``).  None → the
            Gaussian form with δ = min(1/n², 10⁻⁵) (``diagnostics["delta_default"]`` is True).
        data_norm : float > 0
            Public bound R on ‖xᵢ‖₂; rows above it are clipped to it.
        """,
    "noise": """
        noise : {"auto", "gamma", "gaussian"}, default "auto"
            "auto": Gamma-norm when δ = 0, Gaussian otherwise.  "gamma" with δ > 0
            gives (and reports) pure ε-DP.
        """,
    "solver": """
        tol : float > 0, default 1e-10
            Optimality residual the solver must reach.
        max_iter : int, default 10000
        """,
    "seed": """
        random_state : None, int, SeedSequence or Generator
            Source of the noise b (None = OS entropy).
        """,
}


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
        """Validate the solver settings and the noise choice (δ = None → min(1/n², 10⁻⁵)),
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
    data_norm = check_data_norm(data_norm)
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


def _theta_bound(
    theta_bound, k: int, data_norm: float, margin_bound: float = MARGIN_BOUND
) -> float:
    """B of the Δ choice: the caller's public prior, or √k·margin_bound/R (the loss's
    public prior on the margin, :attr:`GLMLoss.margin_bound`)."""
    if theta_bound is None:
        return math.sqrt(k) * margin_bound / data_norm
    return check_positive(theta_bound, "theta_bound")


# ----------------------------------------------------------------------------- fit
@private_fit  # an active dperm.budget: reserve, run, commit the event
@compose_doc(**_PERTURBATION_DOCS)
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
    theta_bound: float | None = None,
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
    {inputs}
    alpha : float ≥ 0
        Λ, coefficient of (Λ/2)‖θ‖² in the mean-form objective.
    {noise}
    constraint : Constraint, optional
        Closed convex set C with a projection; the output is always in C.
    regularizer : Regularizer, optional
        Convex data-independent r (L1, ElasticNet, GroupL2); its
        ``strong_convexity`` adds to Λ in the calibration.
    {solver}
    calibration : {"tight", "paper"}, default "tight"
        "tight": the one-sided Jacobian bound and, for Gaussian noise, the exact
        Gaussian privacy profile of the noise term with the ε split and Δ chosen
        by :func:`tight_calibration` (``docs/objective_perturbation.md``).
        "paper": the published calibrations (:func:`chaudhuri_calibration`,
        :func:`kifer_calibration`; GLM losses only).
    theta_bound : float > 0 or None, default None
        The public prior B on ‖θ̂‖ with which the tight calibration chooses Δ
        (:func:`tight_calibration`; never part of the privacy proof).  None: √k·20/R
        (:data:`MARGIN_BOUND` log-odds); the regressors pass a bound that grows with
        ε (:func:`dperm.losses.prior_margin`).
    {seed}

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
    check_delta_size(delta_used, n)  # δ ≥ 1/n: a void guarantee, refused (#32)
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
            # the caller's prior, or the loss's prior on R‖θ*‖ (Huber: in the units of
            # y, so the fit is equivariant in them); MARGIN_BOUND for classification
            theta_bound=_theta_bound(
                theta_bound, k, p.data_norm, getattr(loss, "margin_bound", MARGIN_BOUND)
            ),
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
        solver_passes=res.n_passes,
    )
    return Result(theta=theta, event=event, diagnostics=diagnostics)
