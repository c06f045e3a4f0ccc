"""Shared pieces of the solvers: the result record, the smooth part of F and its
derivatives through the Design's fused passes, step-size bounds and proximal maps."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.sparse.linalg as sla

from ..constraints import Constraint
from ..design import Design, as_design
from ..losses.base import GLMLoss
from ..regularizers import Regularizer

__all__ = [
    "SmoothObjective",
    "SolverResult",
    "gradient_mapping_norm",
    "objective_value",
    "prox_factory",
    "smoothness_bound",
]


@dataclasses.dataclass(frozen=True)
class SolverResult:
    """Output of :func:`dperm.solvers.minimize`.

    Attributes
    ----------
    theta : ndarray of shape (d,)
    objective : float
        F(θ).
    optimality : float
        The residual defined in the :mod:`dperm.solvers` docstring (ℓ2 norm).
    converged : bool
        ``optimality ≤ tol``.
    n_iter : int
        Iterations of the method (Newton steps for the second-order method).
    method : str
    n_passes : int
        Passes over the data: evaluations of F and ∇F, Hessian-vector products and
        (sub-sampled) Hessians (0 when not counted).
    """

    theta: np.ndarray
    objective: float
    optimality: float
    converged: bool
    n_iter: int
    method: str
    n_passes: int = 0


def objective_value(loss: GLMLoss, theta, X, y, *, l2=0.0, linear=None, regularizer=None) -> float:
    """F(θ) = L(θ) + (l2/2)‖θ‖² + ⟨linear, θ⟩ + r(θ).

    Parameters
    ----------
    loss : GLMLoss
    theta : ndarray of shape (d,)
    X : ndarray, csr_matrix or Design of shape (n, d)
    y : ndarray of shape (n,)
    l2 : float, default 0
    linear : ndarray of shape (d,), optional
    regularizer : Regularizer, optional

    Returns
    -------
    float
    """
    v = loss.value(theta, X, y) + 0.5 * l2 * float(theta @ theta)
    if linear is not None:
        v += float(linear @ theta)
    if regularizer is not None:
        v += regularizer.value(theta)
    return v


#: up to this many columns λ_max(XᵀX) comes from the d×d Gram matrix (exact, one
#: pass) and the second-order method uses explicit d×d Hessians; wider designs use a
#: Lanczos estimate of the top singular value and Hessian-vector products
GRAM_MAX_COLUMNS = 256


def _spectral_norm_sq(X: Design) -> float:
    """λ_max(XᵀX) of the effective rows, without copying X."""
    n, d = X.shape
    if d <= GRAM_MAX_COLUMNS or min(n, d) == 1:
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

    Parameters
    ----------
    loss : GLMLoss
    X : ndarray, csr_matrix or Design of shape (n, d)
    l2 : float, default 0

    Returns
    -------
    float
    """
    X = as_design(X)
    n = X.shape[0]
    c = loss.curvature if math.isfinite(loss.curvature) else 1.0
    return c * _spectral_norm_sq(X) / n + l2


class SmoothObjective:
    """f(θ) = L(θ) + (l2/2)‖θ‖² + ⟨linear, θ⟩ on a Design: value and gradient in one
    fused pass, Hessian-vector products in another, and for a GLM loss on a narrow
    design the d×d Hessian of a strided subsample of the rows (its own, smaller pass).

    Parameters
    ----------
    loss : GLMLoss or FlatSoftmax
    X : Design of shape (n, d)
    y : ndarray of shape (n,)
    l2 : float ≥ 0
    linear : ndarray of shape (d,) or None
    """

    def __init__(self, loss, X: Design, y, l2: float, linear):
        self.loss, self.X, self.y, self.l2, self.linear = loss, X, y, l2, linear
        self.passes = 0
        self._last: dict = {}

    @property
    def explicit_hessian(self) -> bool:
        """Whether :meth:`hessian` is available (a GLM loss, ≤ GRAM_MAX_COLUMNS columns)."""
        return isinstance(self.loss, GLMLoss) and self.X.shape[1] <= GRAM_MAX_COLUMNS

    def result(self, theta, objective, optimality, tol, n_iter, method) -> SolverResult:
        """The :class:`SolverResult` of a run stopped at θ (passes counted here)."""
        return SolverResult(
            theta=theta,
            objective=float(objective),
            optimality=float(optimality),
            converged=optimality <= tol,
            n_iter=int(n_iter),
            method=method,
            n_passes=self.passes,
        )

    def fg(self, theta):
        """(f(θ), ∇f(θ)) — one pass; the last point is remembered (the solvers
        re-evaluate the point they stop at)."""
        last = self._last
        if "theta" in last and np.array_equal(theta, last["theta"]):
            return last["v"], last["g"].copy()
        self.passes += 1
        v, g = self.loss.value_and_gradient(theta, self.X, self.y)
        v += 0.5 * self.l2 * float(theta @ theta)
        g = g + self.l2 * theta
        if self.linear is not None:
            v += float(self.linear @ theta)
            g = g + self.linear
        last.update(theta=np.array(theta, copy=True), v=v, g=g.copy())
        return v, g

    def hessp(self, theta, p):
        """∇²f(θ) p — one pass."""
        self.passes += 1
        return self.loss.hessian_vector_product(theta, self.X, self.y, p) + self.l2 * p

    def hessian(self, theta, stride: int = 1) -> np.ndarray:
        """∇²f(θ) with the loss's part estimated from every ``stride``-th row of each
        block of rows (all rows for stride 1; :meth:`Design.glm_hessian`, computed
        where the rows are — on the workers for a Dask design): a (d, d) array.

        For the second-order solver only: a sub-sampled Hessian gives a descent
        direction (it is positive definite when l2 > 0), the gradient stays exact,
        so the iterates converge to the exact minimizer whatever the subsample."""
        self.passes += 1
        base, weights = self.loss._design_terms()
        H = self.X.glm_hessian(base, theta, self.y, weights=weights, stride=stride)
        H /= self.X.shape[0]
        H[np.diag_indices_from(H)] += self.l2
        return H


def prox_factory(regularizer: Regularizer | None, constraint: Constraint | None):
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


def gradient_mapping_norm(theta, grad, prox, t) -> float:
    """‖θ − prox_t(θ − t∇f(θ))‖₂ / t (zero exactly at the constrained minimizer)."""
    return float(np.linalg.norm(theta - prox(theta - t * grad, t)) / t)
