"""Fenchel duality for norm-regularized GLM ERM (Kumar & Deisenroth 2019, §4).

Primal (mean form, Λ > 0):

    P(θ) = L̂(θ) + λ·Ω(θ),     L̂(θ) = (1/n) Σᵢ φ(⟨θ, xᵢ⟩, yᵢ) + (Λ/2)‖θ‖²,

for any GLM loss φ of :mod:`dperm.losses` (logistic, squared, Huber-SVM) and a
norm Ω of :mod:`dperm.norms`.  Write λΩ as the support function of the dual
ball K = λ·{Ω* ≤ 1} = λ|P|(F):  λΩ(θ) = max_{s ∈ K} ⟨s, θ⟩.  Exchanging min
and max (Sion: K compact convex, the objective convex–concave) gives the dual

    D(s) = min_θ L̂(θ) + ⟨s, θ⟩ = −L̂*(−s),      max_{s ∈ K} D(s) = min_θ P(θ),

(K–D eq. 12–13 in this parametrisation).  D is concave and, L̂ being
Λ-strongly convex, differentiable with (1/Λ)-Lipschitz gradient
∇D(s) = θ(s) := argmin_θ L̂(θ) + ⟨s, θ⟩ — the **primal recovery** map.
Duality gap at a dual point s ∈ K with θ = θ(s):

    gap(s) = P(θ) − D(s) = λΩ(θ) − ⟨s, θ⟩ = max_{v ∈ K}⟨v − s, θ⟩ ≥ 0,

which is also the Frank-Wolfe gap of max_K D, and by Λ-strong convexity of P
‖θ − θ*‖² ≤ 2·gap/Λ.  This θ-space dual is used instead of the per-example
dual (α ∈ R^n with φ* conjugates) because its feasible set K is the polytope
whose vertices the greedy algorithm enumerates, which is what Frank-Wolfe needs.

Objective perturbation and the dual (K–D Proposition 2), exactly.  Objective
perturbation solves θ_b = argmin_θ L̂(θ) + ⟨b, θ⟩ + λΩ(θ).  Its dual is
max_{s ∈ K} D(s + b) and θ_b = θ(s_b + b) for the maximizer s_b.  Hence:

* with λ = 0 (K = {0}, only the smooth ℓ2 term): θ_b = θ(b) — objective
  perturbation *is* "output perturbation of the dual point" s* = 0 ↦ 0 + b
  followed by primal recovery; this is the exact content of the equivalence;
* with λ > 0 it is **not** output perturbation of the unperturbed dual optimum
  s*: θ_b = θ(s_b + b) where s_b maximizes the *shifted* dual, and in general
  s_b ≠ s* (the shift moves the maximizer inside K).  The paper's statement is
  loose on this point.  :func:`objective_perturbation_via_dual` computes θ_b
  through the shifted dual and the recovery map.

The non-private solver of the dual, Kumar & Deisenroth's Algorithm 1 (:func:`solve`:
away-step Frank-Wolfe on max_K D, stopped at a certified duality gap), lives here
beside the dual it maximizes; the private Algorithm 2 built on the same vertices is
:mod:`dperm.algorithms.dual_frank_wolfe`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._validation import check_count, check_nonnegative, check_positive
from .exceptions import ConvergenceError, InvalidDataError, InvalidPrivacyParameter
from .losses.base import GLMLoss
from .norms import Norm, SubmodularNorm
from .solvers import minimize

__all__ = [
    "DualFWSolution",
    "dual_value",
    "duality_gap",
    "in_dual_ball",
    "objective_perturbation_via_dual",
    "primal_from_dual",
    "primal_value",
    "solve",
]


def _check(loss, alpha):
    if not isinstance(loss, GLMLoss):
        raise InvalidPrivacyParameter(f"loss must be a GLMLoss, got {type(loss).__name__}")
    return check_positive(alpha, "alpha")


def primal_from_dual(
    loss: GLMLoss, X, y, s, *, alpha: float, tol: float = 1e-10, max_iter: int = 10_000, x0=None
) -> np.ndarray:
    """θ(s) = argmin_θ L̂(θ) + ⟨s, θ⟩ = ∇D(s) (module docstring), to optimality ``tol``.

    Raises
    ------
    ConvergenceError
        If the solver does not certify ``tol`` (privacy arguments need θ(s) exact).
    InvalidPrivacyParameter
        ``alpha`` ≤ 0 or a non-GLM loss.
    """
    alpha = _check(loss, alpha)
    s = np.asarray(s, dtype=float)
    if s.shape != (X.shape[1],):
        raise InvalidDataError(f"s must have shape ({X.shape[1]},), got {s.shape}")
    res = minimize(loss, X, y, l2=alpha, linear=s, tol=tol, max_iter=max_iter, x0=x0)
    if not res.converged:
        # the message names only public settings (raising is itself data-dependent)
        raise ConvergenceError(
            f"primal recovery θ(s): the solver did not reach tol={tol:g} within "
            f"max_iter={max_iter}; nothing is released. Increase max_iter or alpha."
        )
    return res.theta


def dual_value(loss: GLMLoss, X, y, s, *, alpha: float, tol: float = 1e-10, x0=None):
    """(D(s), θ(s)) with D(s) = min_θ L̂(θ) + ⟨s, θ⟩."""
    theta = primal_from_dual(loss, X, y, s, alpha=alpha, tol=tol, x0=x0)
    val = loss.value(theta, X, y) + 0.5 * alpha * float(theta @ theta) + float(s @ theta)
    return float(val), theta


def primal_value(loss: GLMLoss, X, y, theta, *, alpha: float, norm: Norm | None, lam):
    """P(θ) = L̂(θ) + λΩ(θ) (Ω unscaled: its ``alpha`` is ignored)."""
    lam = check_nonnegative(lam, "lam")
    v = loss.value(theta, X, y) + 0.5 * alpha * float(theta @ theta)
    if norm is not None and lam > 0:
        v += lam * norm.norm(theta)
    return float(v)


def in_dual_ball(norm: Norm, s, lam: float, tol: float = 1e-9) -> bool:
    """s ∈ K = λ·{Ω* ≤ 1}, up to relative ``tol``."""
    return bool(norm.dual_norm(s) <= lam * (1 + tol) + tol)


def duality_gap(loss: GLMLoss, X, y, s, *, alpha: float, norm: Norm, lam: float):
    """(gap, θ(s)) with gap = P(θ(s)) − D(s) = λΩ(θ(s)) − ⟨s, θ(s)⟩ for s ∈ K.

    Raises
    ------
    InvalidDataError
        If s ∉ K (the gap certifies nothing outside the dual feasible set).
    """
    lam = check_nonnegative(lam, "lam")
    if not in_dual_ball(norm, s, lam):
        raise InvalidDataError(
            f"s is not dual feasible: Ω*(s)={norm.dual_norm(s):.6g} > lam={lam:.6g}"
        )
    theta = primal_from_dual(loss, X, y, s, alpha=alpha)
    return float(lam * norm.norm(theta) - float(s @ theta)), theta


def objective_perturbation_via_dual(
    loss: GLMLoss,
    X,
    y,
    b,
    *,
    alpha: float,
    norm: Norm | None = None,
    lam: float = 0.0,
    gap_tol: float = 1e-9,
    max_steps: int = 5000,
):
    """argmin_θ L̂(θ) + ⟨b, θ⟩ + λΩ(θ), computed through its dual (K–D Prop. 2).

    λ = 0 (or no norm): θ(b), the primal recovery of the dual point 0 + b.
    λ > 0: maximize the shifted dual s ↦ D(s + b) over K by Frank-Wolfe
    (:func:`solve` with ``shift=b``) and
    return θ(s_b + b).  See the module docstring for exactly what is equivalent.

    Returns
    -------
    theta : ndarray of shape (d,)
    info : dict
        ``s`` (the dual point s_b), ``gap`` (certified duality gap of the
        perturbed problem) and ``n_steps``.
    """
    b = np.asarray(b, dtype=float)
    if norm is None or lam == 0:
        theta = primal_from_dual(loss, X, y, b, alpha=alpha)
        return theta, {"s": np.zeros_like(b), "gap": 0.0, "n_steps": 0}
    sol = solve(
        loss, X, y, norm=norm, lam=lam, alpha=alpha, shift=b, gap_tol=gap_tol, max_steps=max_steps
    )
    return sol.theta, {"s": sol.s, "gap": sol.gap, "n_steps": sol.n_steps}


# ------------------------------------------------- dual Frank-Wolfe (non-private solver)
@dataclasses.dataclass(frozen=True)
class DualFWSolution:
    """Output of :func:`solve`: primal ``theta`` = θ(s + shift), dual point ``s``,
    certified duality ``gap``, ``n_steps`` and the gap history ``gaps``."""

    theta: np.ndarray
    s: np.ndarray
    gap: float
    n_steps: int
    gaps: tuple


def _check_norm(norm, d: int) -> SubmodularNorm:
    if not isinstance(norm, SubmodularNorm):
        raise InvalidPrivacyParameter(f"norm must be a dperm.norms.SubmodularNorm, got {norm!r}")
    if norm.d != d:
        raise InvalidPrivacyParameter(f"norm has d={norm.d} but X has {d} features")
    return norm


def solve(
    loss: GLMLoss,
    X,
    y,
    *,
    norm: SubmodularNorm,
    lam: float,
    alpha: float,
    shift=None,
    gap_tol: float = 1e-8,
    max_steps: int = 2000,
    tol: float = 1e-11,
) -> DualFWSolution:
    """Kumar & Deisenroth (2019), Algorithm 1 (non-private): away-step Frank-Wolfe
    (Lacoste-Julien & Jaggi 2015) on max_{s∈K} D(s + shift).

    Parameters
    ----------
    loss : GLMLoss
        Smooth, so that D is strongly concave (linear convergence of the gap).
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    norm : SubmodularNorm
    lam : float > 0
        λ (K = λ|P|(F)).
    alpha : float > 0
        Λ.
    shift : ndarray of shape (d,), optional
        b: solve the objective-perturbed primal L̂ + ⟨b, ·⟩ + λΩ (K–D Prop. 2).
    gap_tol : float > 0
        Stop when the duality gap is ≤ gap_tol.
    max_steps : int
    tol : float
        Solver tolerance of the primal recovery θ(s).

    Returns
    -------
    DualFWSolution
        ``gap`` is the certified gap at the returned point (it may exceed
        ``gap_tol`` if ``max_steps`` is reached).
    """
    lam = check_positive(lam, "lam")
    alpha = check_positive(alpha, "alpha")
    gap_tol = check_positive(gap_tol, "gap_tol")
    max_steps = check_count(max_steps, "max_steps")
    d = X.shape[1]
    norm = _check_norm(norm, d)
    b = np.zeros(d) if shift is None else np.asarray(shift, dtype=float)

    def D(s, x0):
        th = primal_from_dual(loss, X, y, s + b, alpha=alpha, tol=tol, x0=x0)
        val = loss.value(th, X, y) + 0.5 * alpha * float(th @ th) + float((s + b) @ th)
        return val, th

    s = np.zeros(d)
    active: dict[tuple, float] = {tuple(s): 1.0}
    verts: dict[tuple, np.ndarray] = {tuple(s): s.copy()}
    Ds, theta = D(s, None)
    M = 0.01 / alpha  # smoothness estimate of D (≤ 1/Λ), adapted by backtracking
    gaps = []
    gap = math.inf
    for t in range(max_steps):
        v = lam * norm.greedy_vertex(theta)
        gap = float(v @ theta - s @ theta)  # = λΩ(θ) − ⟨s, θ⟩
        gaps.append(gap)
        if gap <= gap_tol:
            return DualFWSolution(theta, s, gap, t, tuple(gaps))
        key_a = min(active, key=lambda k: float(verts[k] @ theta))
        a = verts[key_a]
        d_fw, d_aw = v - s, s - a
        if float(d_fw @ theta) >= float(d_aw @ theta) or len(active) == 1:
            direction, gmax, away = d_fw, 1.0, False
        else:
            w = active[key_a]
            direction, gmax, away = d_aw, w / (1.0 - w), True
        slope = float(direction @ theta)
        dn2 = float(direction @ direction)
        while True:  # backtracking: sufficient increase for an M-smooth concave D
            g = min(gmax, slope / (M * dn2))
            s_new = s + g * direction
            D_new, th_new = D(s_new, theta)
            if D_new >= Ds + g * slope - 0.5 * M * g * g * dn2 - 1e-13 * abs(Ds):
                break
            M *= 2.0
        M *= 0.9
        # update the active-set weights
        if away:
            for k in active:
                active[k] *= 1.0 + g
            active[key_a] -= g
        else:
            for k in active:
                active[k] *= 1.0 - g
            kv = tuple(np.round(v, 14))
            verts.setdefault(kv, v)
            active[kv] = active.get(kv, 0.0) + g
        active = {k: w for k, w in active.items() if w > 1e-14}
        s, Ds, theta = s_new, D_new, th_new
    v = lam * norm.greedy_vertex(theta)
    gap = float(v @ theta - s @ theta)
    return DualFWSolution(theta, s, gap, max_steps, tuple(gaps))
