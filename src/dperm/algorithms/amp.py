"""Approximate Minima Perturbation (AMP) and its hyperparameter-free form AMP-NT.

Iyengar, Near, Song, Thakkar, Thakurta, Wang, "Towards Practical Differentially
Private Convex Optimization", IEEE Symposium on Security and Privacy 2019,
**Algorithm 1** (AMP) and **Theorem 1** (its privacy); the hyperparameter-free
setting is their Section V ("Strategy for hyperparameter-free Approximate Minima
Perturbation"), whose fitted budget rule is the one of the authors' public
implementation (``sunblaze-ucb/dpml-benchmark``).

Objective perturbation is private only for the *exact* minimizer of the
perturbed objective.  AMP releases an *approximate* minimizer instead: any point
whose gradient norm is at most γ, plus Gaussian output noise that hides how far
it can be from the exact one.  In dperm's mean form (``alpha`` = Λ/n, where Λ is
the paper's coefficient of (Λ/2n)‖θ‖²):

1. split ε = ε₁ + ε₂ and δ = δ₁ + δ₂, and ε₃ < ε₁ with 0 < ε₁ − ε₃ < 1;
2. Λ ≥ rβ/(ε₁ − ε₃), i.e. ``alpha`` ≥ rβ/(n(ε₁ − ε₃)), with r the Hessian-rank
   parameter (r = min(d, 2·rank ∇²ℓ) = 2 for GLMs) and β = ``loss.smoothness(R)``;
3. b₁ ~ N(0, σ₁² I) calibrated so the noise term costs ε₃ except with
   probability δ₁: the paper's σ₁ = (2L/n)(1 + √(2 ln(1/δ₁)))/ε₃, here replaced
   by the exact solution of the inequality it is derived from (smaller on the
   paper's range, valid for every ε₃; :func:`objective_noise_scale`);
4. θ_approx: any point with ‖∇J_priv(θ_approx)‖₂ ≤ γ, where
   J_priv(θ) = (1/n)Σᵢ ℓ(θ; xᵢ, yᵢ) + (alpha/2)‖θ‖² + ⟨b₁, θ⟩;
5. b₂ ~ N(0, σ₂² I) calibrated to (ε₂, δ₂) for the sensitivity Δ₂ = 2γ/alpha
   (:func:`output_sensitivity`);
6. release θ_out = θ_approx + b₂.

Privacy sketch (replace-one neighbouring relation; full sketch in
``docs/amp.md``).  J_priv is alpha-strongly convex, so ‖θ_approx − θ_min‖ ≤
γ/alpha, θ_min its exact minimizer.  Releasing θ_min is (ε₁, δ₁)-DP by the
objective-perturbation argument (Jacobian term ≤ ε₁ − ε₃, noise term ≤ ε₃ except
with probability δ₁).  Given θ_min = t, b₁ and hence θ_approx are deterministic
functions of (D, t) lying in the ball B(t, γ/alpha), so on neighbouring data
they differ by at most Δ₂ = 2γ/alpha: adding b₂ is an (ε₂, δ₂)-DP Gaussian
mechanism.  Adaptive composition gives (ε₁ + ε₂, δ₁ + δ₂) for the pair, and
θ_out is post-processing of it.  The authors' code uses nγ/Λ (= γ/alpha); the
factor 2 of the argument above is kept here (it only doubles a noise that is
negligible for the default γ = 1/n²).

Failing closed: b₁ is drawn once (the optimizer may be re-run, warm-started,
on the same b₁ — never with fresh noise); the gradient norm of its answer is
recomputed independently of the solver, and if it exceeds γ nothing is released
(:class:`~dperm.exceptions.ConvergenceError`).  The tolerance the proof
tolerates is exactly γ (default 1/n²; Δ₂ = 2γ/alpha is calibrated to it), and it
is the one enforced.  Raising depends on the private data, so it is itself a
data-dependent event outside the (ε, δ) guarantee (keep it rare with a generous
``max_iter``); the message carries only the public γ and ``max_iter``, never the
residual reached.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import (
    check_count,
    check_data_norm,
    check_delta,
    check_delta_size,
    check_epsilon,
    check_positive,
    check_probability,
)
from ..accounting.active import default_delta
from ..accounting.events import Composed, EpsilonDelta
from ..constraints import Constraint, Polytope, constraint_l2_radius
from ..design import as_design, check_X_y
from ..exceptions import ConvergenceError, InvalidPrivacyParameter, UnknownNameError
from ..losses.base import GLMLoss, check_smooth_glm_loss
from ..losses.softmax import FlatSoftmax, Softmax
from ..mechanisms.gaussian import gaussian_noise
from ..solvers import minimize
from ._objective_calibration import _l2_for_jacobian
from .base import Result, private_fit
from .output_perturbation import _gaussian_multiplier

__all__ = [
    "AmpCalibration",
    "calibrate",
    "fit",
    "fit_nt",
    "nt_noise_fraction",
    "objective_noise_scale",
    "output_sensitivity",
]

#: fraction of ε (and of δ) given to the output noise in the hyperparameter-free
#: setting (Iyengar et al. 2019, Section V; ``eps_out_frac = 0.01``, and the same
#: fraction of δ, in the authors' implementation)
NT_OUTPUT_FRACTION = 0.01


def nt_noise_fraction(epsilon: float) -> float:
    """ε₃/ε₁ of the hyperparameter-free AMP (AMP-NT) as a function of the total ε.

    The fitted rule published with the paper (Iyengar et al. 2019, Section V,
    "Strategy #1" of the authors' implementation):

        f(ε) = max( min(0.88671 + 0.0186607 / ε^0.372906, 0.99),  1 − 1/ε + 0.001 ),

    the second term keeping ε₁ − ε₃ < 1 as Algorithm 1 requires.  That term
    reaches 1 at ε ≈ 1000, where the published rule leaves the domain of
    Algorithm 1; there (and only there) dperm uses f = 1 − 0.5/ε₁, i.e.
    ε₁ − ε₃ = 0.5 (an extension, documented in ``docs/amp.md``).

    Parameters
    ----------
    epsilon : float > 0
        The total ε of the fit.

    Returns
    -------
    float in (0, 1)
    """
    epsilon = check_epsilon(epsilon)
    best = min(0.88671 + 0.0186607 / epsilon**0.372906, 0.99)
    frac = max(best, 1.0 - 1.0 / epsilon + 0.001)
    eps1 = epsilon * (1.0 - NT_OUTPUT_FRACTION)
    if frac >= 1.0 or eps1 * (1.0 - frac) <= 0.0:
        frac = 1.0 - 0.5 / eps1
    return frac


def objective_noise_scale(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ₁ of the objective noise b₁ (per coordinate, in the units of the mean gradient).

    Iyengar et al. (2019), Algorithm 1, step 3 set σ₁ = Δ(1 + t)/ε₃ with
    Δ = 2L/n (the ℓ2 change of the mean gradient when one record is replaced)
    and t = √(2 ln(1/δ₁)).  The argument behind it: at a fixed output θ the two
    noise vectors that produce θ on neighbouring data differ by
    v = (∇ℓ(θ; z') − ∇ℓ(θ; z))/n, which for a GLM lies in the fixed plane
    span{x, x'} and has ‖v‖ ≤ Δ; so the log-ratio of their Gaussian densities is
    (2⟨b₁, v⟩ + ‖v‖²)/(2σ²) ≤ Δ‖P b₁‖/σ² + Δ²/(2σ²), P the projection on that
    plane, and ‖P b₁‖ ≤ σt except with probability P(χ²₂ > t²) = e^{−t²/2} = δ₁.
    The noise term thus costs at most ε₃ whenever Δt/σ + Δ²/(2σ²) ≤ ε₃.  The
    paper's σ₁ satisfies this inequality only for ε₃ ≤ 2(1 + t); dperm uses its
    exact solution

        σ₁ = Δ (t + √(t² + 2ε₃)) / (2ε₃),

    which is valid for every ε₃ and never larger than the paper's value on the
    paper's range (e.g. 13 % smaller at δ₁ = 10⁻⁹).  See ``docs/amp.md``.

    Parameters
    ----------
    sensitivity : float > 0
        Δ = 2L/n.
    epsilon : float > 0
        ε₃.
    delta : float in (0, 1)
        δ₁.

    Returns
    -------
    float
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_epsilon(epsilon, "epsilon_noise")
    delta = check_delta(delta, "delta_objective", allow_zero=False)
    t = math.sqrt(2.0 * math.log(1.0 / delta))
    return sensitivity * (t + math.sqrt(t * t + 2.0 * epsilon)) / (2.0 * epsilon)


def output_sensitivity(gamma: float, alpha: float, *, constrained: bool = False) -> float:
    """ℓ2 sensitivity Δ₂ of θ_approx given the exact perturbed minimizer.

    J_priv is ``alpha``-strongly convex, so ‖∇J_priv(θ)‖ ≤ γ implies
    ‖θ − θ_min‖ ≤ γ/alpha; two such points (on neighbouring data, at the same
    θ_min) are within 2γ/alpha (Iyengar et al. 2019, proof of Theorem 1; see the
    module docstring for the factor 2).

    With a constraint set, γ bounds the gradient mapping G_t at t = 1/(β + alpha)
    and the released point is θ⁺ = Π_C(θ − t∇f(θ)); then some subgradient of the
    objective at θ⁺ has norm ≤ (1 + t(β + alpha))γ = 2γ, so ‖θ⁺ − θ_min‖ ≤ 2γ/alpha
    and Δ₂ = 4γ/alpha.

    Parameters
    ----------
    gamma : float > 0
    alpha : float > 0
        Strong convexity of J_priv (= Λ/n).
    constrained : bool

    Returns
    -------
    float
    """
    gamma = check_positive(gamma, "gamma")
    alpha = check_positive(alpha, "alpha")
    return (4.0 if constrained else 2.0) * gamma / alpha


@dataclasses.dataclass(frozen=True)
class AmpCalibration:
    """Every constant of one AMP run, all functions of public inputs.

    Attributes
    ----------
    epsilon, delta : float
        Total budget.
    epsilon_objective, delta_objective : float
        ε₁, δ₁ (objective part).
    epsilon_output, delta_output : float
        ε₂, δ₂ (output part).
    epsilon_noise : float
        ε₃ < ε₁ (the noise term of the objective part; ε₁ − ε₃ goes to the Jacobian).
    hessian_rank : int
        r = min(d, 2·rank of the per-example Hessian) ("paper"), or the rank ("tight").
    alpha : float
        Strong convexity of J_priv in mean form; Λ = n·alpha.
    alpha_min : float
        The smallest ``alpha`` the analysis allows: rβ/(n(ε₁ − ε₃)) ("paper"), or the
        Λ/n whose one-sided Jacobian bound is ε₁ − ε₃ ("tight").
    sigma_objective : float
        σ₁.
    gamma : float
        Gradient-norm tolerance.
    output_sensitivity : float
        Δ₂.
    output_noise_multiplier : float
        σ₂/Δ₂ (Balle–Wang analytic Gaussian at (ε₂, δ₂)).
    sigma_output : float
        σ₂.
    lipschitz, smoothness : float
        L and β used.
    """

    epsilon: float
    delta: float
    epsilon_objective: float
    delta_objective: float
    epsilon_output: float
    delta_output: float
    epsilon_noise: float
    hessian_rank: int
    alpha: float
    alpha_min: float
    sigma_objective: float
    gamma: float
    output_sensitivity: float
    output_noise_multiplier: float
    sigma_output: float
    lipschitz: float
    smoothness: float
    calibration: str = "paper"

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for diagnostics and JSON)."""
        return dataclasses.asdict(self)


def _split(total: float, fraction: float) -> tuple[float, float]:
    """(total − part, part) with part = fraction·total and the *exact* (rational)
    sum of the two floats ≤ total, so basic composition never reports more than
    ``total`` because of rounding."""
    part = fraction * total
    rest = total - part
    while Fraction(rest) + Fraction(part) > Fraction(total):
        rest = math.nextafter(rest, 0.0)
    return rest, part


def _check_split(split, epsilon: float) -> tuple[float, float, float]:
    """(ε₂/ε, ε₃/ε₁, δ₂/δ) from ``split`` (None → the AMP-NT defaults)."""
    if split is None:
        return NT_OUTPUT_FRACTION, nt_noise_fraction(epsilon), NT_OUTPUT_FRACTION
    try:
        parts = tuple(split)
    except TypeError:
        raise InvalidPrivacyParameter(
            "split must be None or a tuple (output_fraction, noise_fraction[, "
            f"delta_output_fraction]), got {split!r}"
        ) from None
    if len(parts) not in (2, 3):
        raise InvalidPrivacyParameter(
            "split must be (output_fraction, noise_fraction) or (output_fraction, "
            f"noise_fraction, delta_output_fraction), got {split!r}"
        )
    out = check_probability(parts[0], "split[0] (output_fraction)")
    noise = check_probability(parts[1], "split[1] (noise_fraction)")
    dout = (
        check_probability(parts[2], "split[2] (delta_output_fraction)") if len(parts) == 3 else out
    )
    for name, v in (
        ("output_fraction", out),
        ("noise_fraction", noise),
        ("delta_output_fraction", dout),
    ):
        if v >= 1.0:
            raise InvalidPrivacyParameter(f"split {name} must be in (0, 1), got {v!r}")
    return out, noise, dout


def calibrate(
    *,
    n: int,
    d: int,
    epsilon: float,
    delta: float,
    lipschitz: float,
    smoothness: float,
    alpha: float | None = None,
    gamma: float | None = None,
    split=None,
    hessian_rank: int = 1,
    constrained: bool = False,
    calibration: str = "tight",
    hessian_trace: float | None = None,
    n_vertices: int = 4,
) -> AmpCalibration:
    """The constants of AMP (Iyengar et al. 2019, Algorithm 1) for public inputs.

    ``calibration="paper"`` is Algorithm 1 as published (Λ ≥ rβ/(ε₁ − ε₃) with
    r = min(d, 2·rank), σ₁ from the χ²₂ tail, :func:`objective_noise_scale`).
    ``calibration="tight"`` (default) proves the objective part (ε₁, δ₁)-DP with
    dperm's tight analysis of objective perturbation
    (:func:`dperm.algorithms.objective_perturbation.tight_calibration`): the
    Jacobian term costs ε₁ − ε₃ = ε_J(Λ) with ε_J the one-sided bound
    :func:`~dperm.algorithms.objective_perturbation.jacobian_epsilon`, so
    ``alpha_min`` = Λ/n solves ε_J = ε₁ − ε₃ (no ε₁ − ε₃ < 1 needed), and
    σ₁ = (2L/n)·m with m the analytic Gaussian multiplier at (ε₃, δ₁/N)
    (:func:`~dperm.algorithms.objective_perturbation.tight_gaussian_delta`).

    Parameters
    ----------
    n, d : int
        Number of records and of features.
    epsilon : float > 0
    delta : float in (0, 1)
    lipschitz : float > 0
        L, bound on every per-example gradient norm.
    smoothness : float > 0
        β, bound on every per-example Hessian eigenvalue.
    alpha : float > 0, optional
        Strong convexity of J_priv (mean form, Λ/n).  Default: the smallest
        value the theorem allows, rβ/(n(ε₁ − ε₃)).
    gamma : float > 0, optional
        Gradient-norm tolerance (default 1/n², the authors' setting).
    split : tuple, optional
        ``(output_fraction, noise_fraction[, delta_output_fraction])``:
        ε₂ = output_fraction·ε, ε₁ = ε − ε₂, ε₃ = noise_fraction·ε₁,
        δ₂ = delta_output_fraction·δ (default: output_fraction), δ₁ = δ − δ₂.
        Default: the AMP-NT rule (0.01, :func:`nt_noise_fraction` (ε), 0.01).
    hessian_rank : int ≥ 1, default 1
        Upper bound on the rank of the per-example Hessian (1 for GLMs);
        r = min(d, 2·hessian_rank).
    constrained : bool
        Whether a constraint set is used (changes Δ₂, see
        :func:`output_sensitivity`).
    calibration : {"tight", "paper"}, default "tight"
    hessian_trace : float, optional
        Trace bound τ of one record's Hessian (tight path; default rank·β).
    n_vertices : int, default 4
        N of the tight Gaussian bound (4 for GLMs, k² − 1 for softmax).

    Returns
    -------
    AmpCalibration

    Raises
    ------
    InvalidPrivacyParameter
        Bad inputs, ε₁ − ε₃ outside (0, 1) (Algorithm 1, step 1), or ``alpha``
        below rβ/(n(ε₁ − ε₃)) (step 2).
    """
    n = check_count(n, "n")
    d = check_count(d, "d")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    lip = check_positive(lipschitz, "lipschitz")
    beta = check_positive(smoothness, "smoothness")
    rank = check_count(hessian_rank, "hessian_rank")
    out_frac, noise_frac, dout_frac = _check_split(split, epsilon)

    if calibration not in ("tight", "paper"):
        raise UnknownNameError(
            f"unknown calibration {calibration!r}; choose one of ['tight', 'paper']"
        )
    eps1, eps2 = _split(epsilon, out_frac)  # [AMP-1] ε = ε₁ + ε₂ (exact)
    eps3 = noise_frac * eps1
    delta1, delta2 = _split(delta, dout_frac)
    gap = eps1 - eps3
    tight = calibration == "tight"
    if not (0.0 < gap and (tight or gap < 1.0)):
        raise InvalidPrivacyParameter(
            "AMP (Iyengar et al. 2019, Algorithm 1) needs 0 < ε₁ − ε₃ < 1; with "
            f"epsilon={epsilon!r} and split={split!r} ε₁ − ε₃ = {gap:.6g}: raise "
            "noise_fraction"
        )
    if tight:
        r = rank
        nv = check_count(n_vertices, "n_vertices")
        # [AMP-2] the one-sided Jacobian bound ε_J(Λ) = ε₁ − ε₃
        alpha_min = _l2_for_jacobian(gap, n, beta, rank, hessian_trace)
    else:
        r = min(d, 2 * rank)
        alpha_min = r * beta / (n * gap)  # [AMP-2] Λ ≥ rβ/(ε₁ − ε₃)
    if alpha is None:
        alpha = alpha_min
    else:
        alpha = check_positive(alpha, "alpha")
        if alpha < alpha_min * (1.0 - 1e-12):
            raise InvalidPrivacyParameter(
                f"alpha={alpha!r} is below the minimum rβ/(n(ε₁ − ε₃)) = {alpha_min:.6g} "
                "that AMP's privacy proof needs (Iyengar et al. 2019, Algorithm 1, step 2)"
            )
    if gamma is None:
        gamma = 1.0 / float(n) ** 2
    gamma = check_positive(gamma, "gamma")

    if tight:  # [AMP-3] σ₁ = (2L/n)·m(ε₃, δ₁/N), the tight Gaussian noise term
        sigma1 = 2.0 * lip / n * _gaussian_multiplier(eps3, delta1 / nv)
    else:
        sigma1 = objective_noise_scale(2.0 * lip / n, eps3, delta1)  # [AMP-3]
    sens2 = output_sensitivity(gamma, alpha, constrained=constrained)  # [AMP-5] Δ₂
    z2 = _gaussian_multiplier(eps2, delta2)  # [AMP-5]
    return AmpCalibration(
        epsilon=epsilon,
        delta=delta,
        epsilon_objective=eps1,
        delta_objective=delta1,
        epsilon_output=eps2,
        delta_output=delta2,
        epsilon_noise=eps3,
        hessian_rank=r,
        alpha=alpha,
        alpha_min=alpha_min,
        sigma_objective=sigma1,
        gamma=gamma,
        output_sensitivity=sens2,
        output_noise_multiplier=z2,
        sigma_output=z2 * sens2,
        lipschitz=lip,
        smoothness=beta,
        calibration=calibration,
    )


# ----------------------------------------------------------------------------- helpers
def _check_loss(loss):
    if isinstance(loss, Softmax):
        return loss
    return check_smooth_glm_loss(
        loss,
        "AMP needs a smooth loss (finite β); got {loss!r}. Use HuberSVM instead of "
        "Hinge, or a gradient-perturbation mechanism for non-smooth losses.",
    )


def _check_constraint(constraint):
    if constraint is None:
        return None
    if not isinstance(constraint, Constraint) or isinstance(constraint, Polytope):
        raise InvalidPrivacyParameter(
            "constraint must be None or a dperm constraint with a projection (L2Ball, "
            f"L1Ball, Box), got {constraint!r}"
        )
    return constraint


def _private_gradient(loss, theta, X, y, alpha, b1) -> np.ndarray:
    """∇J_priv(θ) = ∇L(θ) + alpha θ + b₁, computed here, not by the solver."""
    return loss.gradient(theta, X, y) + alpha * theta + b1


def _residual(loss, theta, X, y, cal: AmpCalibration, b1, constraint):
    """(point, residual): the gradient norm of J_priv at θ — or, with a constraint,
    the gradient mapping at t = 1/(β + alpha) (β the public smoothness bound) and
    the projected point θ⁺ — computed here, not by the solver."""
    grad = _private_gradient(loss, theta, X, y, cal.alpha, b1)  # [AMP-4] independent check
    if constraint is None:
        with np.errstate(over="ignore"):  # an overflowing norm is inf: not certified
            return theta, float(np.linalg.norm(grad))
    t = 1.0 / (cal.smoothness + cal.alpha)
    point = constraint.project(theta - t * grad)
    return point, float(np.linalg.norm(theta - point) / t)


def _approximate_minimizer(loss, X, y, cal: AmpCalibration, b1, constraint, max_iter):
    """(θ_approx with an independently certified residual ≤ γ, the solver's report
    as data-dependent diagnostics) — or ConvergenceError.

    The solver may be asked again, warm-started and with a tighter tolerance, on
    the *same* b₁ (at most 3 rounds): any point with residual ≤ γ is covered by
    the proof, however it was found; no fresh noise is ever drawn."""
    gamma = cal.gamma
    x0 = np.zeros(b1.shape[0])  # vec(Θ) for the softmax loss, θ otherwise
    tol = 0.5 * gamma
    residual = math.inf
    report = {"solver_method": "", "solver_iterations": 0, "solver_passes": 0}
    for _ in range(3):  # refinement rounds on the same noise, not a retry with new noise
        res = minimize(
            loss,
            X,
            y,
            l2=cal.alpha,
            linear=b1,
            constraint=constraint,
            tol=tol,
            max_iter=max_iter,
            x0=x0,
        )
        x0 = np.asarray(res.theta, dtype=float)
        report["solver_method"] = res.method
        report["solver_iterations"] += res.n_iter
        report["solver_passes"] += res.n_passes
        point, residual = _residual(loss, x0, X, y, cal, b1, constraint)
        if residual <= gamma:
            report["solver_optimality"] = residual
            return point, report
        tol *= 0.1
    raise ConvergenceError(  # [AMP-4] fail closed (also when the residual is NaN)
        f"AMP: the optimizer did not reach the gradient-norm tolerance gamma={gamma:.3g} "
        f"within max_iter={max_iter} iterations (independently checked); AMP's privacy "
        "proof needs it, so nothing is released. Increase max_iter or gamma."
    )


def _run(
    loss, X, y, algorithm, cal_kwargs, data_norm, constraint, max_iter, random_state
) -> Result:
    """One AMP run (``algorithm`` "amp" or "amp-nt"): ``cal_kwargs`` are the
    :func:`calibrate` arguments other than the public sizes and bounds."""
    loss = _check_loss(loss)
    data_norm = check_data_norm(data_norm)
    constraint = _check_constraint(constraint)
    max_iter = check_count(max_iter, "max_iter")
    X, y = check_X_y(X, y)
    n, d = X.shape
    shape: tuple[int, ...] = (d,)
    if isinstance(loss, Softmax):  # the multinomial model: Θ (d, k) solved as vec(Θ)
        if constraint is not None or cal_kwargs.get("calibration") == "paper":
            raise InvalidPrivacyParameter(
                "AMP with the softmax loss needs calibration='tight' and no constraint, got "
                f"calibration={cal_kwargs.get('calibration')!r}, constraint={constraint!r}"
            )
        k = loss.resolve_n_classes(y)  # public k (warns when read off the labels)
        y = loss.check_labels(y, k)
        loss = FlatSoftmax(Softmax(k), k)
        shape = (d, k)
        cal_kwargs.update(
            hessian_rank=k - 1,
            hessian_trace=data_norm**2 * (1.0 - 1.0 / k),
            n_vertices=k * k - 1,
        )
    else:
        y = loss.check_labels(y)
    epsilon = check_epsilon(cal_kwargs.pop("epsilon"))
    delta = cal_kwargs.pop("delta")
    delta_default = delta is None
    if delta_default:
        delta = default_delta(int(n), budget_share=False)
    delta = check_delta_size(check_delta(delta, allow_zero=False), n)  # δ < 1/n (#32)
    rng = check_random_state(random_state)
    X = as_design(X, data_norm)  # [AMP-0] ‖x‖ ≤ R by a per-row scale (X not copied)
    n_clipped = X.n_clipped
    radius = constraint_l2_radius(constraint, d)
    lip = loss.lipschitz(data_norm, radius=radius)
    beta = loss.smoothness(data_norm)
    n_coords = math.prod(shape)
    cal = calibrate(
        n=n,
        d=n_coords,
        epsilon=epsilon,
        delta=delta,
        lipschitz=lip,
        smoothness=beta,
        constrained=constraint is not None,
        **cal_kwargs,
    )
    # Both noises are drawn before the data is touched, b₁ first, then b₂.
    b1 = gaussian_noise(n_coords, cal.sigma_objective, rng)  # [AMP-3]
    b2 = gaussian_noise(n_coords, cal.sigma_output, rng)  # [AMP-5]
    theta_approx, solver = _approximate_minimizer(loss, X, y, cal, b1, constraint, max_iter)
    theta = (theta_approx + b2).reshape(shape)  # [AMP-6]
    event = Composed(
        (
            EpsilonDelta(epsilon=cal.epsilon_objective, delta=cal.delta_objective),
            EpsilonDelta(epsilon=cal.epsilon_output, delta=cal.delta_output),
        )
    )
    diagnostics: dict[str, Any] = {
        "algorithm": algorithm,
        "theorem": "Iyengar et al. 2019 (IEEE S&P), Algorithm 1 / Theorem 1",
        "neighbouring": "replace-one",
        "data_norm": data_norm,
        "n_samples": n,
        "n_clipped": n_clipped,
        "delta_default": delta_default,
        "constrained": constraint is not None,
        "Lambda": n * cal.alpha,
        **cal.as_dict(),
        **solver,  # data-dependent (like n_clipped): for the data owner
    }
    return Result(theta=theta, event=event, diagnostics=diagnostics)


# ----------------------------------------------------------------------------- fit
@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    delta: float | None = None,
    data_norm: float,
    alpha: float | None = None,
    gamma: float | None = None,
    split=None,
    hessian_rank: int = 1,
    constraint: Constraint | None = None,
    max_iter: int = 10_000,
    hyperparameter_free: bool = False,
    calibration: str = "tight",
    random_state=None,
) -> Result:
    """Approximate Minima Perturbation, (ε, δ)-DP (Iyengar et al. 2019, Algorithm 1, Theorem 1).

    Neighbouring relation: replace-one.  Assumptions: a convex GLM loss that is
    L-Lipschitz and β-smooth over rows with ‖x‖ ≤ ``data_norm`` (rows above are
    clipped; L = ``loss.lipschitz(data_norm)``, β = ``loss.smoothness(data_norm)``,
    e.g. β = R²/4 for the logistic loss and R²/(2h) for the Huber hinge), with
    per-example Hessians of rank ≤ ``hessian_rank``.  See the module docstring
    for the algorithm and the proof sketch.

    Parameters
    ----------
    loss : GLMLoss or Softmax
        A smooth loss (Logistic, HuberSVM; Squared with a ``constraint``), or
        ``Softmax(k)``: the multinomial model Θ of shape (d, k), one release
        (tight calibration with the softmax constants of
        ``docs/objective_perturbation.md``; no constraint).
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    epsilon : float > 0
    delta : float in (0, 1) or None, default None
        None → δ = min(1/n², 10⁻⁵) (``diagnostics["delta_default"]`` is True).
    data_norm : float > 0
        Public bound R on ‖xᵢ‖₂.
    alpha : float > 0, optional
        Strong convexity of the perturbed objective in mean form (the paper's
        Λ/n); default the theorem's minimum rβ/(n(ε₁ − ε₃)).  Smaller values
        raise InvalidPrivacyParameter.
    gamma : float > 0, optional
        Gradient-norm tolerance γ (default 1/n²).
    split : tuple, optional
        ``(output_fraction, noise_fraction[, delta_output_fraction])``, see
        :func:`calibrate`; default the AMP-NT rule.
    hessian_rank : int, default 1
        Rank bound of the per-example Hessian (1 for GLMs, so r = 2).
    constraint : Constraint, optional
        Closed convex set with a projection (L2Ball, L1Ball, Box).  The exact
        perturbed minimizer over C is then private by Kifer, Smith, Thakurta
        (2012, Theorem 2), γ bounds the gradient mapping and Δ₂ doubles (see
        :func:`output_sensitivity`).  The released point is θ⁺ + b₂ (θ⁺ ∈ C,
        the noise may leave C).
    max_iter : int, default 10000
        Iteration budget of the optimizer.
    hyperparameter_free : bool, default False
        True runs :func:`fit_nt` (AMP-NT); ``alpha``, ``gamma``, ``split`` must
        then be left at their defaults.
    calibration : {"tight", "paper"}, default "tight"
        How the objective part is proved (ε₁, δ₁)-DP (see :func:`calibrate`):
        dperm's tight analysis of objective perturbation, or Algorithm 1 as
        published.  The softmax loss needs "tight".
    random_state : None, int, SeedSequence or Generator
        Source of b₁ then b₂ (in that order; None = OS entropy).

    Returns
    -------
    Result
        ``theta`` of shape (d,); ``event``
        ``Composed((EpsilonDelta(ε₁, δ₁), EpsilonDelta(ε₂, δ₂)))`` (basic
        composition gives exactly (ε, δ)); ``diagnostics`` with every constant
        of :class:`AmpCalibration`, ``Lambda`` = n·alpha, ``n_clipped`` and the
        solver's report ``solver_method``, ``solver_iterations``, ``solver_passes``,
        ``solver_optimality`` (these depend on the data and are not covered by the
        guarantee: they are for the data owner).

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ (δ = 0 is refused: AMP is not ε-DP), ``data_norm``, ``alpha``
        below the minimum, ``split`` with ε₁ − ε₃ ∉ (0, 1), a non-smooth loss.
    InvalidDataError, LabelError
        Bad X or y.
    ConvergenceError
        The gradient norm γ was not reached (checked independently); nothing is
        released.  Raising depends on the data (outside the guarantee); the
        message carries only γ and ``max_iter``.
    """
    if hyperparameter_free:
        if alpha is not None or gamma is not None or split is not None:
            raise InvalidPrivacyParameter(
                "hyperparameter_free=True fixes alpha, gamma and split (AMP-NT); got "
                f"alpha={alpha!r}, gamma={gamma!r}, split={split!r}"
            )
        return fit_nt(
            loss,
            X,
            y,
            epsilon=epsilon,
            delta=delta,
            data_norm=data_norm,
            constraint=constraint,
            max_iter=max_iter,
            random_state=random_state,
        )
    cal_kwargs = {
        "epsilon": epsilon,
        "delta": delta,
        "alpha": alpha,
        "gamma": gamma,
        "split": split,
        "hessian_rank": hessian_rank,
        "calibration": calibration,
    }
    return _run(loss, X, y, "amp", cal_kwargs, data_norm, constraint, max_iter, random_state)


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit_nt(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    delta: float | None = None,
    data_norm: float = 1.0,
    constraint: Constraint | None = None,
    max_iter: int = 10_000,
    calibration: str = "paper",
    random_state=None,
) -> Result:
    """Hyperparameter-free AMP (AMP-NT; Iyengar et al. 2019, Section V).

    No tuning: rows are clipped to ``data_norm`` = 1 (so L = 1 for the logistic
    and Huber losses — the paper's fixed L), ε₂ = 0.01ε and δ₂ = 0.01δ for the
    output noise, ε₃ = f(ε)·ε₁ with the published fitted rule f =
    :func:`nt_noise_fraction`, γ = 1/n², and Λ at the theorem's minimum
    rβ/(ε₁ − ε₃) with the loss's own β.  Privacy as in :func:`fit`.

    Parameters
    ----------
    loss : GLMLoss
        A smooth loss (Logistic, HuberSVM): its own β sets Λ.
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    epsilon : float > 0
    delta : float in (0, 1) or None
        None → min(1/n², 10⁻⁵) (the paper: 1/n²).
    data_norm : float, default 1.0
        Kept as a parameter for interface uniformity; the published setting is 1.
    constraint : Constraint, optional
    max_iter : int, default 10000
    calibration : {"paper", "tight"}, default "paper"
        The published setting proves the objective part with Algorithm 1's
        bounds ("paper"); "tight" keeps the published split, γ and Λ rule
        and uses dperm's tight analysis (less noise, smaller Λ).
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        As :func:`fit`, with ``diagnostics["algorithm"] == "amp-nt"``.

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, LabelError, ConvergenceError
    """
    # alpha, gamma, split and hessian_rank at calibrate()'s defaults (the published rule)
    cal_kwargs = {"epsilon": epsilon, "delta": delta, "calibration": calibration}
    return _run(loss, X, y, "amp-nt", cal_kwargs, data_norm, constraint, max_iter, random_state)
