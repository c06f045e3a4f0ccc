"""Non-private solvers for (regularized, perturbed, constrained) empirical risk.

They minimize

    F(θ) = L(θ) + (l2/2)‖θ‖² + ⟨linear, θ⟩ + r(θ)   subject to θ ∈ C,

with L the *mean* GLM loss (see :mod:`dperm.losses`), an optional linear term
(objective perturbation adds ⟨b, θ⟩/n there), an optional non-smooth
regularizer r with a prox (:mod:`dperm.regularizers`) and an optional convex
set C (:mod:`dperm.constraints`).  Dense and scipy.sparse X alike; X is viewed
as a :class:`~dperm.design.Design` (never copied): every evaluation of F and ∇F
is one fused pass over X, every Hessian-vector product another.

They are used (a) inside the perturbation algorithms, whose privacy proofs
assume the *exact* minimizer or (AMP) a minimizer to a stated gradient-norm
tolerance, and (b) as the non-private reference for the excess empirical risk.
Every result reports the optimality residual actually reached, computed
independently of the optimizer's own stopping rule:

* unconstrained smooth: ‖∇F(θ)‖₂;
* with r or C: the norm of the gradient mapping ‖θ − prox_{t(r+ι_C)}(θ − t∇f(θ))‖₂ / t
  at t = 1/β_f (zero exactly at the minimizer).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import scipy.linalg as sla_dense
import scipy.optimize as so
import scipy.sparse.linalg as sla

from ._validation import check_count, check_nonnegative, check_positive
from .constraints import Box, Constraint
from .design import Design, as_design
from .losses.base import GLMLoss
from .regularizers import Regularizer

__all__ = ["SolverResult", "minimize", "objective_value", "smoothness_bound"]


@dataclasses.dataclass(frozen=True)
class SolverResult:
    """Output of :func:`minimize`.

    Attributes
    ----------
    theta : ndarray of shape (d,)
    objective : float
        F(θ).
    optimality : float
        The residual defined in the module docstring (ℓ2 norm).
    converged : bool
        ``optimality ≤ tol``.
    n_iter : int
    method : str
    """

    theta: np.ndarray
    objective: float
    optimality: float
    converged: bool
    n_iter: int
    method: str


def objective_value(loss: GLMLoss, theta, X, y, *, l2=0.0, linear=None, regularizer=None) -> float:
    """F(θ) = L(θ) + (l2/2)‖θ‖² + ⟨linear, θ⟩ + r(θ)."""
    v = loss.value(theta, X, y) + 0.5 * l2 * float(theta @ theta)
    if linear is not None:
        v += float(linear @ theta)
    if regularizer is not None:
        v += regularizer.value(theta)
    return v


#: up to this many columns λ_max(XᵀX) comes from the d×d Gram matrix (exact, one
#: pass); wider designs use a Lanczos estimate of the top singular value
_GRAM_MAX_COLUMNS = 256


def _spectral_norm_sq(X: Design) -> float:
    """λ_max(XᵀX) of the effective rows, without copying X."""
    n, d = X.shape
    if d <= _GRAM_MAX_COLUMNS or min(n, d) == 1:
        G = X.gram()
        return float(np.linalg.eigvalsh(G)[-1]) if d > 1 else float(G[0, 0])
    op = sla.LinearOperator((n, d), matvec=X.matvec, rmatvec=X.rmatvec, dtype=np.float64)
    s = sla.svds(op, k=1, return_singular_vectors=False, random_state=0, solver="arpack")[0]
    return float(s) ** 2


def smoothness_bound(loss: GLMLoss, X, l2: float = 0.0) -> float:
    """An upper bound on the smoothness of θ ↦ L(θ) + (l2/2)‖θ‖² on this data:
    c · λ_max(XᵀX/n) + l2 (c = the loss's curvature).

    λ_max comes from the Gram matrix (d ≤ 256 columns, block by block) or a Lanczos
    estimate of the top singular value (wider designs); X is never copied.  Used
    only as a step size for the (non-private) solver, never in a privacy
    calibration.
    """
    X = as_design(X)
    n = X.shape[0]
    c = loss.curvature if math.isfinite(loss.curvature) else 1.0
    return c * _spectral_norm_sq(X) / n + l2


def _smooth_parts(loss, X, y, l2, linear):
    last: dict = {}

    def fg(theta):
        # one-entry memo: the solvers re-evaluate the point they stop at (residual check)
        if "theta" in last and np.array_equal(theta, last["theta"]):
            return last["v"], last["g"].copy()
        v, g = loss.value_and_gradient(theta, X, y)
        v += 0.5 * l2 * float(theta @ theta)
        g = g + l2 * theta
        if linear is not None:
            v += float(linear @ theta)
            g = g + linear
        last.update(theta=np.array(theta, copy=True), v=v, g=g.copy())
        return v, g

    def hessp(theta, p):
        return loss.hessian_vector_product(theta, X, y, p) + l2 * p

    return fg, hessp


def _explicit_hessian(loss, X, l2):
    """θ ↦ ∇²F(θ) as a d×d matrix (one pass over X), for GLM losses on designs of at
    most :data:`_GRAM_MAX_COLUMNS` columns; None otherwise (Hessian-vector products)."""
    if not isinstance(loss, GLMLoss) or X.shape[1] > _GRAM_MAX_COLUMNS:
        return None

    def hess(theta, y):
        H = loss.hessian(theta, X, y)
        H[np.diag_indices_from(H)] += l2
        return H

    return hess


def _prox_factory(regularizer: Regularizer | None, constraint: Constraint | None):
    """prox of t·r + ι_C as Π_C ∘ prox_{t r}.

    This composition is the exact prox for the pairs dperm offers (ℓ1 /
    elastic net / group-ℓ2 with an ℓ2 ball, ℓ1 ball or a box containing 0):
    each regularizer's prox shrinks towards 0 along the symmetries the set
    respects (Yu 2013, "On decomposing the proximal map", Thm 1 and its
    corollaries for norm balls and separable sets).
    """

    def prox(v, t):
        if regularizer is not None:
            v = regularizer.prox(v, t)
        if constraint is not None:
            v = constraint.project(v)
        return v

    return prox


def _gradient_mapping_norm(theta, grad, prox, t):
    return float(np.linalg.norm(theta - prox(theta - t * grad, t)) / t)


def minimize(
    loss: GLMLoss,
    X,
    y,
    *,
    l2: float = 0.0,
    linear: np.ndarray | None = None,
    regularizer: Regularizer | None = None,
    constraint: Constraint | None = None,
    tol: float = 1e-8,
    max_iter: int = 10_000,
    x0: np.ndarray | None = None,
) -> SolverResult:
    """Minimize F(θ) (module docstring) to optimality residual ``tol``.

    Smooth and unconstrained (or box-constrained): scipy L-BFGS-B, polished by
    a truncated-Newton step with Hessian-vector products when L-BFGS-B stops
    above ``tol``.  With a regularizer or a non-box constraint: accelerated
    proximal gradient (FISTA with backtracking and adaptive restart,
    Beck & Teboulle 2009; O'Donoghue & Candès 2015).

    Parameters
    ----------
    loss : GLMLoss
    X : ndarray, csr_matrix or Design of shape (n, d)
        An array is viewed as a Design without clipping (no copy).
    y : ndarray of shape (n,)
    l2 : float ≥ 0
        Coefficient of (l2/2)‖θ‖².
    linear : ndarray of shape (d,), optional
        The linear term's vector.
    regularizer : Regularizer, optional
    constraint : Constraint, optional
    tol : float > 0
        Target optimality residual (ℓ2 norm).
    max_iter : int
    x0 : ndarray of shape (d,), optional
        Start point (default 0, projected onto C).

    Returns
    -------
    SolverResult
        ``converged`` says whether ``tol`` was reached; callers whose privacy
        depends on it must check it (this function never raises for that).
    """
    l2 = check_nonnegative(l2, "l2")
    tol = check_positive(tol, "tol")
    max_iter = check_count(max_iter, "max_iter")
    X = as_design(X)
    d = X.shape[1]
    theta0 = np.zeros(d) if x0 is None else np.asarray(x0, dtype=float).copy()
    if linear is not None:
        linear = np.asarray(linear, dtype=float).ravel()
    fg, hessp = _smooth_parts(loss, X, y, l2, linear)

    hess = _explicit_hessian(loss, X, l2)
    if hess is not None:
        hess = functools.partial(hess, y=y)
    if regularizer is None and (constraint is None or isinstance(constraint, Box)):
        return _lbfgs(loss, fg, hessp, theta0, constraint, tol, max_iter, d, hess)
    if regularizer is None and loss.smooth:
        # A smooth objective over a set C: if the unconstrained minimizer lies in C it
        # is the constrained one (its gradient mapping is ≤ ‖∇F‖); this avoids slow
        # FISTA runs on ill-conditioned problems whose constraint is not active.
        free = _lbfgs(loss, fg, hessp, theta0, None, tol, max_iter, d, hess)
        if free.converged and constraint.contains(free.theta, tol=0.0):
            prox = _prox_factory(None, constraint)
            t = 1.0 / smoothness_bound(loss, X, l2)
            opt = _gradient_mapping_norm(free.theta, fg(free.theta)[1], prox, t)
            if opt <= tol:
                return dataclasses.replace(free, optimality=opt, method=free.method + "(interior)")
        theta0 = constraint.project(free.theta)
    return _fista(fg, loss, X, l2, theta0, regularizer, constraint, tol, max_iter)


def _lbfgs(loss, fg, hessp, theta0, constraint, tol, max_iter, d, hess=None):
    # far-off trial points (e.g. a gigantic perturbation term) overflow the loss: they
    # are rejected by the line searches and the certified residual, not warned about
    with np.errstate(over="ignore", invalid="ignore"):
        return _lbfgs_body(loss, fg, hessp, theta0, constraint, tol, max_iter, d, hess)


def _lbfgs_body(loss, fg, hessp, theta0, constraint, tol, max_iter, d, hess):
    bounds = constraint.bounds(d) if constraint is not None else None
    if constraint is not None:
        theta0 = constraint.project(theta0)
    prox = _prox_factory(None, constraint)

    def residual(theta):
        _, g = fg(theta)
        if constraint is None:
            return float(np.linalg.norm(g))
        return _gradient_mapping_norm(theta, g, prox, 1.0)

    res = so.minimize(
        fg,
        theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={
            "maxiter": max_iter,
            "gtol": tol / (10.0 * math.sqrt(d)),
            "ftol": 1e-15,
            "maxcor": 20,
        },
    )
    theta = res.x
    n_iter = int(res.nit)
    opt = residual(theta)
    method = "L-BFGS-B"
    budget = min(50, max_iter - n_iter)
    if opt > tol and constraint is None and loss.smooth and hess is not None and budget > 0:
        # Newton with the explicit d×d Hessian (one pass over X each): quadratic
        # convergence from where L-BFGS-B stops, two passes per step
        try:
            theta, opt, extra = _newton_on_residual(fg, hessp, theta, opt, tol, budget, hess)
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            extra = 0
        if extra:
            n_iter += extra
            method += "+newton"
    if opt > tol and constraint is None and loss.smooth and hess is None:
        # Newton polish: quadratic convergence close to the optimum
        try:
            res2 = so.minimize(
                fg,
                theta,
                jac=True,
                hessp=hessp,
                method="trust-ncg",
                options={"gtol": tol / 2.0, "maxiter": 200},
            )
        except (ValueError, FloatingPointError):
            # non-finite trial steps (e.g. a gigantic linear perturbation term): no polish;
            # the residual check below decides, and callers fail closed on it
            res2 = None
        if res2 is not None and np.all(np.isfinite(res2.x)) and residual(res2.x) < opt:
            theta = res2.x
            opt = residual(theta)
            n_iter += int(res2.nit)
            method = "L-BFGS-B+trust-ncg"
    budget = min(50, max_iter - n_iter)
    if opt > tol and constraint is None and loss.smooth and hess is None and budget > 0:
        # Far from the origin F(θ) is large and both line searches above stop on
        # "no representable decrease" before the gradient is small; Newton-CG
        # steps accepted on the gradient norm (the residual we certify) finish it.
        try:
            theta, opt, extra = _newton_on_residual(fg, hessp, theta, opt, tol, budget)
        except (ValueError, FloatingPointError):
            extra = 0
        if extra:
            n_iter += extra
            method += "+newton"
    return SolverResult(
        theta=theta,
        objective=float(fg(theta)[0]),
        optimality=opt,
        converged=opt <= tol,
        n_iter=n_iter,
        method=method,
    )


def _newton_on_residual(fg, hessp, theta, opt, tol, max_steps=50, hess=None):
    """Newton iterations θ ← θ + t·p, H p = −∇F, accepting the largest
    t ∈ {1, 1/2, …} that decreases ‖∇F‖ (not F, whose decrease may not be
    representable in floating point near the optimum).  H p = −∇F is solved
    exactly with the d×d Hessian ``hess(θ)`` when given, else by conjugate
    gradients on Hessian-vector products."""
    d = theta.shape[0]
    steps = 0
    for _ in range(max_steps):  # optimizer iterations, not rows
        _, g = fg(theta)
        if hess is not None:
            p = _solve_psd(hess(theta), -g)
        else:
            H = sla.LinearOperator((d, d), matvec=lambda v, th=theta: hessp(th, v), dtype=float)
            p, _info = sla.cg(H, -g, rtol=1e-12, atol=0.0, maxiter=10 * d)
        t = 1.0
        improved = False
        for _ in range(30):
            cand = theta + t * p
            r = float(np.linalg.norm(fg(cand)[1]))
            if r < opt:
                theta, opt, improved = cand, r, True
                break
            t *= 0.5
        steps += 1
        if not improved or opt <= tol:
            break
    return theta, opt, steps


def _solve_psd(H: np.ndarray, b: np.ndarray) -> np.ndarray:
    """H⁻¹b for a symmetric positive semi-definite H (Cholesky; least squares when
    H is singular, e.g. an unregularized loss that is flat on some rows)."""
    try:
        return sla_dense.cho_solve(sla_dense.cho_factor(H), b)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(H, b, rcond=None)[0]


def _fista(fg, loss, X, l2, theta0, regularizer, constraint, tol, max_iter):
    prox = _prox_factory(regularizer, constraint)
    Lk = max(smoothness_bound(loss, X, l2) * 0.1, 1e-12)
    x = prox(theta0, 1.0 / Lk)
    z = x.copy()
    t_mom = 1.0
    reg = (lambda th: regularizer.value(th)) if regularizer is not None else (lambda th: 0.0)
    fx = fg(x)[0] + reg(x)
    opt = math.inf
    it = 0
    for it in range(1, max_iter + 1):
        fz, gz = fg(z)
        while True:  # backtracking on the smooth part
            x_new = prox(z - gz / Lk, 1.0 / Lk)
            diff = x_new - z
            f_new, _ = fg(x_new)
            if f_new <= fz + float(gz @ diff) + 0.5 * Lk * float(diff @ diff) + 1e-15 * abs(fz):
                break
            Lk *= 2.0
        F_new = f_new + reg(x_new)
        # adaptive restart (O'Donoghue & Candès 2015); a plain proximal step from x
        # (t_mom == 1, z == x) is a descent step, so it is accepted even when rounding
        # makes F_new a hair above fx near the optimum (otherwise the loop stalls)
        if F_new > fx and t_mom > 1.0:
            t_mom = 1.0
            z = x.copy()
            continue
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t_mom * t_mom))
        z = x_new + ((t_mom - 1.0) / t_next) * (x_new - x)
        x, fx, t_mom = x_new, F_new, t_next
        if it % 5 == 0 or it == max_iter:
            _, gx = fg(x)
            opt = _gradient_mapping_norm(x, gx, prox, 1.0 / Lk)
            if opt <= tol:
                break
        Lk *= 0.9  # let the step grow again
    _, gx = fg(x)
    opt = _gradient_mapping_norm(x, gx, prox, 1.0 / Lk)
    return SolverResult(
        theta=x,
        objective=float(fx),
        optimality=opt,
        converged=opt <= tol,
        n_iter=it,
        method="FISTA",
    )
