"""Output perturbation with a structured (submodular) norm
(Kumar & Deisenroth 2019, §3, Theorem 1; calibration of Chaudhuri, Monteleoni,
Sarwate 2011, Theorem 6).

Solve

    θ̂ = argmin_θ  L̂(θ) + (λ/n)·Ω(θ) + (Λ/2)‖θ‖²,     L̂(θ) = (1/n) Σᵢ ℓ(θ; xᵢ, yᵢ),

with Ω a norm from :mod:`dperm.norms` (the ℓ∞-relaxation Ω∞ of a non-decreasing
submodular F), and release θ̂ + b.  Neighbouring relation: **replace-one**
(n public).

Sensitivity (what is needed, and where the paper is loose).  K–D's Theorem 1
perturbs the minimizer of L̂ + (λ/n)Ω.  A norm is convex but *not* strongly
convex, so without another term the minimizer can be non-unique and its
sensitivity is unbounded (e.g. a flat direction of L̂ on which Ω is linear);
the 2L/(nΛ) bound the theorem uses needs a Λ-strongly convex objective.  dperm
therefore always adds (Λ/2)‖θ‖² with Λ > 0 and uses the standard argument
(docstring of :mod:`dperm.algorithms.output_perturbation`, [OUT-1]): if every
ℓ(·; z) is L-Lipschitz and the objective is Λ-strongly convex, the minimizers
on replace-one neighbours satisfy ‖θ̂(D) − θ̂(D')‖₂ ≤ 2L/(nΛ), *for any convex
Ω* (the non-smooth term cancels in the difference of the two objectives).
The noise (Gamma-norm for ε-DP, analytic Gaussian for (ε, δ)) is exactly that
of :func:`dperm.algorithms.output_perturbation.fit`, which this module calls
with ``regularizer = (λ/n)·Ω``.

Choice of λ.  ``lam="kd"`` uses K–D's rule λ = L·R₂·√n / G, with G the
Gaussian width of the dual-norm unit ball |P|(F) (:func:`dperm.norms.gaussian_width`
with ``ball="dual"``; exact for ℓ1/ℓ∞, Monte Carlo with a fixed public seed
otherwise — G depends only on the public norm, not on the data).
"""

from __future__ import annotations

import math

from .._validation import check_nonnegative, check_positive, check_X_y
from ..exceptions import InvalidPrivacyParameter
from ..losses.base import GLMLoss
from ..norms import Norm, gaussian_width
from . import output_perturbation
from .base import Result

__all__ = ["estimator_fit", "estimator_norm", "fit", "kd_lambda", "register_audit_runner"]


def kd_lambda(norm: Norm, n: int, lipschitz: float, data_norm: float) -> float:
    """K–D's regularization λ = L·R₂·√n / G (Kumar & Deisenroth 2019, Theorem 1),
    G = Gaussian width of |P|(F) (public; Monte Carlo seed 0 when not exact).

    Raises
    ------
    InvalidPrivacyParameter
    """
    lip = check_positive(lipschitz, "lipschitz")
    r = check_positive(data_norm, "data_norm")
    g = gaussian_width(norm, ball="dual", n_samples=2000, random_state=0).value
    return lip * r * math.sqrt(n) / g


def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    norm: Norm,
    epsilon: float,
    delta: float | None = 0.0,
    data_norm: float,
    alpha: float,
    lam: float | str = "kd",
    noise: str = "auto",
    tol: float = 1e-10,
    max_iter: int = 10_000,
    random_state=None,
) -> Result:
    """Structured output perturbation (module docstring): ε-DP (Gamma-norm noise,
    Chaudhuri et al. 2011, Theorem 6) or (ε, δ)-DP (analytic Gaussian, Balle &
    Wang 2018) release of argmin L̂ + (λ/n)Ω + (Λ/2)‖·‖².

    Neighbouring relation: replace-one.  Assumptions: rows ‖x‖₂ ≤ ``data_norm``
    (clipped otherwise, counted), ℓ L-Lipschitz (``loss.lipschitz(data_norm)``),
    Λ = ``alpha`` > 0.

    Parameters
    ----------
    loss : GLMLoss
        Smooth GLM loss (Logistic, HuberSVM; Squared needs a constraint).
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    norm : Norm
        Ω, a :class:`~dperm.norms.SubmodularNorm` or :class:`~dperm.norms.ChainTVNorm`
        (its own ``alpha`` is ignored; the weight is λ/n).
    epsilon, delta, data_norm, noise, tol, max_iter, random_state
        As in :func:`dperm.algorithms.output_perturbation.fit`.
    alpha : float > 0
        Λ, the strong convexity that bounds the sensitivity.
    lam : float ≥ 0 or "kd", default "kd"
        λ; "kd" = :func:`kd_lambda`.

    Returns
    -------
    Result
        As output perturbation, with ``diagnostics["lam"]``, ``["norm"]`` and
        ``theorem`` naming K–D Theorem 1.

    Raises
    ------
    InvalidPrivacyParameter
        ``alpha`` ≤ 0, bad λ or norm, and everything output perturbation raises.
    """
    if not isinstance(norm, Norm):
        raise InvalidPrivacyParameter(f"norm must be a dperm.norms.Norm, got {norm!r}")
    alpha = check_nonnegative(alpha, "alpha")
    if alpha <= 0:
        raise InvalidPrivacyParameter(
            "structured output perturbation needs alpha (Λ) > 0: a norm alone is not "
            f"strongly convex and the minimizer's sensitivity is unbounded, got alpha={alpha!r}"
        )
    X, y = check_X_y(X, y)
    n = X.shape[0]
    if isinstance(lam, str):
        if lam != "kd":
            raise InvalidPrivacyParameter(f"lam must be a number ≥ 0 or 'kd', got {lam!r}")
        lam = kd_lambda(norm, n, loss.lipschitz(data_norm), data_norm)
    lam = check_nonnegative(lam, "lam")
    if norm.d != X.shape[1]:
        raise InvalidPrivacyParameter(f"norm has d={norm.d} but X has {X.shape[1]} features")
    res = output_perturbation.fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=data_norm,
        alpha=alpha,
        noise=noise,
        regularizer=norm.scaled(lam / n),
        tol=tol,
        max_iter=max_iter,
        random_state=random_state,
    )
    diagnostics = dict(res.diagnostics)
    diagnostics.update(
        algorithm="structured_output_perturbation",
        lam=lam,
        norm=repr(norm),
        theorem="Kumar & Deisenroth 2019, Theorem 1 (with (Λ/2)‖θ‖², sensitivity "
        "2L/(nΛ): Chaudhuri et al. 2011, Theorem 6); noise: " + diagnostics.get("theorem", ""),
    )
    return Result(theta=res.theta, event=res.event, diagnostics=diagnostics)


def estimator_norm(estimator, loss: GLMLoss, n: int, d: int) -> tuple[Norm, float]:
    """(Ω, λ) in this module's form (objective L̂ + (λ/n)Ω + (Λ/2)‖θ‖²) from an
    estimator's fitted ``regularizer_``: penalty "l1"/"elasticnet" → ℓ1 with
    λ = n·(ℓ1 weight); a SubmodularNorm → itself with λ = n·alpha; no
    regularizer (penalty "l2") → ℓ1 with K–D's λ (:func:`kd_lambda`).  Public
    quantities only (n is public under replace-one)."""
    from ..norms import L1Norm, norm_from_regularizer

    got = norm_from_regularizer(estimator.regularizer_, d)
    if got is None:
        norm = L1Norm(d)
        return norm, kd_lambda(norm, n, loss.lipschitz(estimator.data_norm_), estimator.data_norm_)
    norm, weight = got
    return norm, weight * n


def estimator_fit(estimator, loss, X, y, epsilon, delta, rng) -> Result:
    """The estimators' adapter (``mechanism="structured-output"``): Λ = ``l2_``
    (must be > 0: use penalty "l2" or "elasticnet"), Ω and λ from
    :func:`estimator_norm`, noise/tol/max_iter from the estimator."""
    n, d = X.shape
    norm, lam = estimator_norm(estimator, loss, n, d)
    return fit(
        loss,
        X,
        y,
        norm=norm,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        alpha=estimator.l2_,
        lam=lam,
        noise=estimator.noise,
        tol=estimator.tol,
        max_iter=estimator.max_iter,
        random_state=rng,
    )


# ----------------------------------------------------------------------------- audit
#: settings of the audit runner: Huber-SVM (h = 0.5), Λ = 0.25, λ = 0.1, ℓ1 norm, d = 1,
#: n = 20 (nΛ = 5: θ̂ stays in the linear part of the loss, so the sensitivity is attained)
_AUDIT = {"alpha": 0.25, "lam": 0.1, "tol": 1e-8}


def _audit_run(X, y, epsilon, delta, rng):
    """θ of the audit configuration (module-level so that it pickles)."""
    from ..losses import HuberSVM
    from ..norms import L1Norm

    return fit(
        HuberSVM(0.5),
        X,
        y,
        norm=L1Norm(X.shape[1]),
        epsilon=epsilon,
        delta=delta,
        data_norm=1.0,
        random_state=rng,
        **_AUDIT,
    ).theta


def register_audit_runner(*, overwrite: bool = False):
    """Register the audit runner ``"structured-output"`` through the public
    :func:`dperm.audit.runners.register_runner` (replace-one, n = 20, d = 1,
    Gaussian noise, δ = 1e-5 by default).  Returns the Runner."""
    from ..audit.runners import register_runner

    return register_runner(
        "structured-output",
        _audit_run,
        neighbouring="replace-one",
        module="dperm.algorithms.structured_output_perturbation",
        n=20,
        d=1,
        default_delta=1e-5,
        noise="gaussian",
        default_runs=2000,
        description="structured output perturbation (K–D Thm 1 + (Λ/2)‖θ‖²), Huber SVM, "
        f"ℓ1 norm, Λ = {_AUDIT['alpha']}, λ = {_AUDIT['lam']}, analytic Gaussian noise",
        overwrite=overwrite,
    )
