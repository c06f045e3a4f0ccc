"""Non-private solvers for (regularized, perturbed, constrained) empirical risk.

They minimize

    F(θ) = L(θ) + (l2/2)‖θ‖² + ⟨linear, θ⟩ + r(θ)   subject to θ ∈ C,

with L the *mean* GLM loss (see :mod:`dperm.losses`; also the flattened
multinomial loss :class:`~dperm.losses.softmax.FlatSoftmax`), an optional linear
term (objective perturbation adds ⟨b, θ⟩/n there), an optional non-smooth
regularizer r with a prox (:mod:`dperm.regularizers`) and an optional convex set
C (:mod:`dperm.constraints`).  Dense and scipy.sparse X alike; X is viewed as a
:class:`~dperm.design.Design` (never copied): every evaluation of F and ∇F is one
fused pass over X, every Hessian-vector product another.

They are used (a) inside the perturbation algorithms, whose privacy proofs
assume the *exact* minimizer or (AMP) a minimizer to a stated gradient-norm
tolerance, and (b) as the non-private reference for the excess empirical risk.
Every result reports the optimality residual actually reached, computed
independently of the optimizer's own stopping rule:

* unconstrained smooth: ‖∇F(θ)‖₂;
* with r or C: the norm of the gradient mapping ‖θ − prox_{t(r+ι_C)}(θ − t∇f(θ))‖₂ / t
  at t = 1/β_f (zero exactly at the minimizer).

Smooth unconstrained problems (the private fits' case) are solved by a
second-order method (:mod:`dperm.solvers._newton`): Newton steps from
sub-sampled d×d Hessians on narrow designs, Newton-CG with exact
Hessian-vector products otherwise.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_count, check_nonnegative, check_positive
from ..constraints import Box, Constraint, L2Ball
from ..design import as_design
from ..losses.base import GLMLoss
from ..losses.softmax import FlatSoftmax
from ..regularizers import Regularizer
from ._common import (
    SmoothObjective,
    SolverResult,
    gradient_mapping_norm,
    objective_value,
    prox_factory,
    smoothness_bound,
)
from ._first_order import fista, lbfgs
from ._newton import newton
from ._prox_newton import l1_weights, prox_newton, prox_newton_l2ball

__all__ = ["SolverResult", "minimize", "objective_value", "smoothness_bound"]


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

    Smooth and unconstrained: the second-order method of
    :mod:`dperm.solvers._newton` (sub-sampled Newton on designs of at most 256
    columns, Newton-CG with exact Hessian-vector products otherwise), stopped when
    the exact ‖∇F‖₂ ≤ ``tol``.  Box-constrained or a non-smooth loss: scipy's
    L-BFGS-B.  An ℓ1 or elastic-net term on a narrow design: proximal Newton with an
    exact feature-sign subproblem solver (:mod:`dperm.solvers._prox_newton`), kept
    under a constraint when its minimizer lies in C.  With another regularizer or an
    active constraint: accelerated proximal gradient (FISTA with backtracking and adaptive restart,
    Beck & Teboulle 2009; O'Donoghue & Candès 2015), after checking whether the
    unconstrained minimizer already lies in C.

    Parameters
    ----------
    loss : GLMLoss or FlatSoftmax
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
        Iterations of the method (Newton steps for the second-order method).
    x0 : ndarray of shape (d,) (FlatSoftmax: (d·k,)), optional
        Start point (default 0, projected onto C): a warm start.

    Returns
    -------
    SolverResult
        ``converged`` says whether ``tol`` was reached; callers whose privacy
        depends on it must check it (this function never raises for that).

    Raises
    ------
    InvalidPrivacyParameter
        ``l2`` negative, ``tol`` not positive, ``max_iter`` not a positive integer.
    """
    l2 = check_nonnegative(l2, "l2")
    tol = check_positive(tol, "tol")
    max_iter = check_count(max_iter, "max_iter")
    X = as_design(X)
    d = X.shape[1]
    size = d * loss.n_classes if isinstance(loss, FlatSoftmax) else d  # vec(Θ): d·k
    theta0 = np.zeros(size) if x0 is None else np.asarray(x0, dtype=float).ravel().copy()
    if linear is not None:
        linear = np.asarray(linear, dtype=float).ravel()
    obj = SmoothObjective(loss, X, y, l2, linear)
    if regularizer is None and constraint is None:
        if loss.smooth:
            return newton(obj, theta0, tol, max_iter)
        return lbfgs(obj, theta0, None, tol, max_iter)
    if loss.smooth and obj.explicit_hessian and l1_weights(regularizer, size) is not None:
        # ℓ1 / elastic net on a narrow design: proximal Newton (conditioning-free rate).
        # With a constraint set C: if the minimizer without C lies in C it is the
        # constrained one (convexity), certified by the gradient mapping of r + ι_C;
        # otherwise FISTA continues from its projection.
        beta_f = smoothness_bound(loss, X, l2)
        free = prox_newton(obj, theta0, regularizer, tol, max_iter, beta_f)
        if constraint is None:
            return free
        if free.converged and constraint.contains(free.theta, tol=0.0):
            prox = prox_factory(regularizer, constraint)
            opt = gradient_mapping_norm(free.theta, obj.fg(free.theta)[1], prox, 1.0 / beta_f)
            if opt <= tol:
                return obj.result(
                    free.theta, free.objective, opt, tol, free.n_iter, free.method + "(interior)"
                )
        if free.converged and isinstance(constraint, L2Ball):  # the ball's multiplier
            ball = prox_newton_l2ball(
                obj, free.theta, regularizer, constraint, tol, max_iter, beta_f
            )
            if ball.converged:
                return ball
            free = ball
        if np.all(np.isfinite(free.theta)):
            theta0 = constraint.project(free.theta)
        return fista(obj, theta0, regularizer, constraint, tol, max_iter)
    if regularizer is None and isinstance(constraint, Box):
        return lbfgs(obj, theta0, constraint, tol, max_iter)
    if regularizer is None and loss.smooth:
        # A smooth objective over a set C: if the unconstrained minimizer lies in C it
        # is the constrained one (its gradient mapping is ≤ ‖∇F‖); this avoids slow
        # FISTA runs on ill-conditioned problems whose constraint is not active.
        free = newton(obj, theta0, tol, max_iter)
        if free.converged and constraint.contains(free.theta, tol=0.0):
            prox = prox_factory(None, constraint)
            t = 1.0 / smoothness_bound(loss, X, l2)
            opt = gradient_mapping_norm(free.theta, obj.fg(free.theta)[1], prox, t)
            if opt <= tol:
                return obj.result(
                    free.theta, free.objective, opt, tol, free.n_iter, free.method + "(interior)"
                )
        theta0 = constraint.project(free.theta if np.all(np.isfinite(free.theta)) else theta0)
    return fista(obj, theta0, regularizer, constraint, tol, max_iter)
