"""The second-order method for smooth, unconstrained (perturbed, regularized) GLM
risks: Newton's method with exact gradients, stopped at the caller's residual.

Each iteration takes a Newton direction p with H p ≈ −∇f(θ) and a step θ + t·p,
t ∈ {1, 1/2, …} (Armijo on f; near the optimum, where the decrease of f is below
its rounding, a step is accepted when it decreases ‖∇f‖, the residual that is
certified).  H is

* for a GLM loss on a design of at most ``GRAM_MAX_COLUMNS`` columns, the d×d
  Hessian of a strided subsample of the rows (all rows for small n), solved by
  Cholesky: the sub-sampled Newton method of Byrd, Chin, Neveitt, Nocedal (2011,
  "On the use of stochastic Hessian information in optimization methods for
  machine learning", SIAM J. Optim. 21(3)) and Roosta-Khorasani & Mahoney (2019,
  "Sub-sampled Newton methods", Math. Program. 174), with the exact gradient:
  its iterates converge (linearly, at a rate set by the subsample; quadratically
  with all rows) to the exact minimizer, and the subsample grows ×4 whenever a
  full step contracts ‖∇f‖ by less than ``_SLOW`` because of the subsample (one
  exact Hessian-vector product measures ‖∇²f p + ∇f‖, the rate it causes);
* otherwise (wide designs, the multinomial model) the exact Hessian, applied by
  Hessian-vector products (one fused pass over X each; the softmax one through
  the block product of :meth:`Softmax.curvature_product`), the system solved by
  conjugate gradients to the forcing tolerance min(1/2, √‖∇f‖)·‖∇f‖ of
  inexact Newton (truncated Newton-CG, Nocedal & Wright 2006, Algorithm 7.1).

A full step that contracts ‖∇f‖ at least 10× keeps its Hessian factor for the next
step (Shamanskii's modification of Newton's method): near the optimum the Hessian
barely moves and the subsample's error dominates anyway.

f is strongly convex whenever l2 > 0 (the private fits), so the iterates converge
from any start (``x0`` warm starts them).  Whether the caller's residual was
reached is decided on an exact gradient, never on the method's own estimates.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla_dense

from ._common import SmoothObjective, SolverResult

__all__ = ["hessian_rows", "newton"]

#: smallest subsample of rows for a sub-sampled Hessian
_MIN_HESSIAN_ROWS = 1 << 16
#: the subsample's rows × columns at most (2²⁵: the d×d Hessian then costs ≤ 2²⁵·d flops)
_MAX_HESSIAN_VALUES = 1 << 25
#: a full step that keeps more than this fraction of ‖∇f‖ enlarges the subsample
_SLOW = 0.3
#: a full step that kept at most this fraction of ‖∇f‖ lets the next step reuse its
#: Hessian factor (Shamanskii's variant: near the optimum the Hessian barely moves)
_REUSE = 0.1
#: Armijo's sufficient-decrease constant
_ARMIJO = 1e-4
#: step halvings before the line search gives up
_HALVINGS = 40
#: conjugate-gradient iterations per Newton step at most
_CG_MAX = 500


def hessian_rows(n: int, d: int) -> int:
    """Rows of the initial Hessian subsample for an (n, d) design: all of them up to
    2¹⁶ rows, else about 16·n/d (the d×d Hessian then costs about a quarter of a
    gradient pass, whose cost is n·d memory reads), within [2¹⁶, 2²⁵/d]."""
    if n <= _MIN_HESSIAN_ROWS:
        return n
    m = max(_MIN_HESSIAN_ROWS, (16 * n) // max(1, d))
    m = min(m, max(_MIN_HESSIAN_ROWS, _MAX_HESSIAN_VALUES // max(1, d)))
    return min(n, m)


def _cholesky(H: np.ndarray):
    """The Cholesky factor of H for :func:`scipy.linalg.cho_solve`; a singular H (l2 = 0
    on rows where the loss is flat) is damped by μI, μ growing from 10⁻¹²·max diag(H);
    None if even that fails (the caller then takes a steepest-descent step)."""
    scale = max(float(np.max(np.diag(H))), 1e-300)
    mu = 0.0
    for _ in range(12):  # damping attempts, not rows
        try:
            return sla_dense.cho_factor(H + mu * np.eye(H.shape[0]) if mu else H)
        except (np.linalg.LinAlgError, ValueError):
            mu = scale * 1e-12 if mu == 0.0 else mu * 100.0
    return None


def _cg_direction(obj: SmoothObjective, theta, g, gn: float, tol: float) -> np.ndarray:
    """Truncated conjugate gradients on ∇²f(θ) p = −g (Nocedal & Wright 2006,
    Algorithm 7.1): stops at the relative residual min(1/2, √‖g‖) — or, on the
    last step, once the residual is below tol/5 — or at non-positive curvature."""
    target = max(min(0.5, math.sqrt(gn)) * gn, 0.2 * tol)
    p = np.zeros_like(g)
    r = -g
    q = r.copy()
    rr = float(r @ r)
    for _ in range(min(_CG_MAX, g.size)):  # CG iterations, not rows
        Hq = obj.hessp(theta, q)
        curv = float(q @ Hq)
        if not curv > 0.0:
            return p if p.any() else -g
        a = rr / curv
        p += a * q
        r -= a * Hq
        rr_new = float(r @ r)
        if math.sqrt(rr_new) <= target:
            break
        q *= rr_new / rr
        q += r
        rr = rr_new
    return p


def _rounding(f: float) -> float:
    """A bound on the rounding of f near the optimum (a mean of n terms plus the
    penalty and the linear term): below it a change of f is not a decrease."""
    return 1e-12 * (abs(f) + 1.0)


def newton(obj: SmoothObjective, theta0: np.ndarray, tol: float, max_iter: int) -> SolverResult:
    """Minimize the smooth objective ``obj`` from ``theta0`` to ‖∇f‖₂ ≤ ``tol``.

    Parameters
    ----------
    obj : SmoothObjective
    theta0 : ndarray of shape (d,)
    tol : float > 0
    max_iter : int
        Newton steps at most.

    Returns
    -------
    SolverResult
        ``optimality`` = ‖∇f(θ)‖₂ at the returned θ (an exact gradient).
    """
    # far-off trial points (a gigantic perturbation term) overflow the loss or the norms:
    # they are rejected by the line search and the certified residual, not warned about
    with np.errstate(over="ignore", invalid="ignore"):
        return _newton(obj, theta0, tol, max_iter)


def _newton(obj: SmoothObjective, theta0: np.ndarray, tol: float, max_iter: int) -> SolverResult:
    n = obj.X.shape[0]
    explicit = obj.explicit_hessian
    stride = max(1, -(-n // hessian_rows(n, obj.X.shape[1]))) if explicit else 1
    theta = np.asarray(theta0, dtype=np.float64).copy()
    f, g = obj.fg(theta)
    gn = float(np.linalg.norm(g))
    it = 0
    factor = None  # the Cholesky factor of the last (sub-sampled) Hessian, when reused
    while gn > tol and it < max_iter and math.isfinite(gn):
        fresh = factor is None
        if not explicit:
            p = _cg_direction(obj, theta, g, gn, tol)
        else:
            factor = _cholesky(obj.hessian(theta, stride)) if fresh else factor
            p = -sla_dense.cho_solve(factor, g) if factor is not None else -g
        slope = float(g @ p)
        if not slope < 0.0:  # not a descent direction (rounding): steepest descent
            p, slope = -g, -gn * gn
        t = 1.0
        accepted = False
        for _ in range(_HALVINGS):  # step halvings, not rows
            cand = theta + t * p
            f_new, g_new = obj.fg(cand)
            gn_new = float(np.linalg.norm(g_new))
            if math.isfinite(f_new) and math.isfinite(gn_new):
                if f_new <= f + _ARMIJO * t * slope:
                    accepted = True
                elif f_new - f <= _rounding(f) and gn_new < gn:
                    accepted = True  # f flat to rounding: decided on the residual
            if accepted:
                break
            t *= 0.5
        it += 1
        if not accepted:
            break  # no representable progress along p
        if not (t == 1.0 and gn_new <= _REUSE * gn):
            factor = None  # a fresh Hessian for the next step
        if explicit and fresh and stride > 1 and t == 1.0 and gn_new > _SLOW * gn:
            # slow full step: the subsample's fault if p solves the exact Newton system
            # poorly (‖∇²f p + ∇f‖ is the linear rate of sub-sampled Newton), else the
            # nonlinearity of f far from the optimum
            miss = float(np.linalg.norm(obj.hessp(theta, p) + g))
            if not miss <= 0.5 * _SLOW * gn:
                stride = max(1, stride // 4)
        theta, f, g, gn = cand, f_new, g_new, gn_new
    if explicit:
        kind = "newton" if stride == 1 else "subsampled-newton"
    else:
        kind = "newton-cg"
    return obj.result(theta, f, gn, tol, it, kind)
