"""Norms beyond Ω∞ of a submodular F (:mod:`dperm.norms.submodular`):

* **group ℓ1/ℓ2 with overlapping groups** (latent group lasso, Jacob, Obozinski,
  Vert 2009): its unit ball is not a polytope, so it is *not* the norm Ω∞ of
  any submodular F (Bach 2013, §5.4 treats only ℓp-relaxations Ωp of
  submodular F, which for p = 2 differ from the latent group norm);
  :class:`LatentGroupL2Norm` implements it directly (closed-form dual norm and
  LMO, prox by block coordinate descent on the duplicated latent variables,
  value by the η-trick, both certified by duality gaps).
* **total variation / cut functions** as Ω∞: the cut function of a chain is
  submodular and symmetric but not non-decreasing and F(V) = 0, so f(|θ|) is
  not a norm (it is not even convex: f(|·|) at (1, 1), (1, −1) is 0 and at
  their midpoint (1, 0) it is 1).  The Lovász extension of the cut applied to
  θ itself is the total variation Σ|θ_i − θ_{i+1}| (a semi-norm);
  :class:`ChainTVNorm` is TV + μ‖θ‖₁, a norm of that other form — the chain
  case of :class:`~dperm.norms.GraphTVNorm` (:mod:`dperm.norms.graph`: any
  graph, weighted edges, certified prox, exact dual norm and LMO).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_count, check_nonnegative, check_positive
from ..exceptions import ConvergenceError, InvalidDataError
from .base import Norm, _membership
from .graph import GraphTVNorm, path_edges

__all__ = ["ChainTVNorm", "LatentGroupL2Norm"]


class ChainTVNorm(GraphTVNorm):
    """Ω(θ) = μ‖θ‖₁ + Σ_{i<d} |θ_{i+1} − θ_i| on a chain (the "fused lasso" norm;
    equal-value sparsity, K–D §2): :class:`~dperm.norms.GraphTVNorm` on the path
    graph (:func:`~dperm.norms.graph.path_edges`) with unit weights.

    Exactly what it is: Σ|θ_{i+1} − θ_i| is the Lovász extension of the chain's
    cut function F_cut(A) = #{i : exactly one of i, i+1 in A} evaluated at θ
    itself (Bach 2013, §6.2) — a semi-norm, zero on constants, because the cut is
    symmetric and F_cut(V) = 0.  It is *not* f(|θ|) for a non-decreasing
    submodular F (module docstring), so it is not a :class:`SubmodularNorm`;
    adding μ‖θ‖₁ (μ > 0) makes it a norm.  prox, dual norm, LMO and the exact
    Gaussian width of the dual ball are the graph's (:mod:`dperm.norms.graph`):
    on a chain the prox is soft-threshold ∘ prox_TV of Friedman, Hastie, Höfling,
    Tibshirani (2007), Prop. 1.

    Parameters
    ----------
    d : int ≥ 2
    mu : float > 0, default 1.0
    alpha : float ≥ 0, default 1.0
    """

    name = "chain-tv"

    def __init__(self, d: int, mu: float = 1.0, alpha: float = 1.0):
        d = check_count(d, "d", minimum=2)
        super().__init__(path_edges(d), d, mu=mu, alpha=alpha)

    def __repr__(self) -> str:
        return f"ChainTVNorm(d={self.d}, mu={self.mu!r}, alpha={self.alpha!r})"


# ----------------------------------------------------------------------------- latent group ℓ1/ℓ2
class LatentGroupL2Norm(Norm):
    """The latent group lasso norm for possibly **overlapping** groups (Jacob,
    Obozinski, Vert 2009, "Group lasso with overlap and graph lasso", eq. (3)):

        Ω(θ) = min { Σ_g w_g ‖v_g‖₂ : Σ_g v_g = θ, supp(v_g) ⊆ g },

    the group ℓ1/ℓ2 norm whose supports are *unions* of groups.  With disjoint
    groups it is Σ_g w_g ‖θ_g‖₂ (:class:`~dperm.regularizers.GroupL2` for unit
    weights).  Its unit ball is conv ⋃_g {v : supp v ⊆ g, ‖v‖₂ ≤ 1/w_g} (not a
    polytope, so it is not the Ω∞ of a submodular function and the private dual
    Frank-Wolfe cannot use it); its dual norm is, in closed form (Jacob et al.
    2009, Lemma 2),

        Ω*(s) = max_g ‖s_g‖₂ / w_g,

    so the dual unit ball K = {s : ‖s_g‖₂ ≤ w_g ∀g} is an intersection of
    cylinders.

    * ``lmo``: the extreme points are the discs' boundaries, so
      argmin_{Ω(θ)≤r} ⟨g, θ⟩ = −r·g_{G}/(w_G‖g_G‖) on G = argmax_g ‖g_g‖/w_g (exact);
    * ``prox``: prox_{τΩ}(v) = Σ_g v̂_g with v̂ = argmin ½‖v − Σ_g v_g‖² +
      τ Σ_g w_g‖v_g‖ over the latent (duplicated) variables (Jacob et al. 2009,
      §3: the covariate-duplication trick), solved by exact block coordinate
      descent (each block a group soft-threshold; Tseng 2001, convergence for a
      smooth + block-separable objective), stopped on the Fenchel duality gap
      P(v̂) − (½‖v‖² − ½‖v − s‖²) with s = the residual scaled into τK, which
      bounds ‖Σ v̂_g − prox‖₂² by twice itself (1-strong convexity; Moreau:
      min_u ½‖v − u‖² + τΩ(u) = ½‖v‖² − min_{s∈τK} ½‖v − s‖²);
    * ``norm`` (the value): the η-trick Σ_g w_g‖v_g‖ = min_{η>0} Σ_g
      (w_g/2)(‖v_g‖²/η_g + η_g) (Bach, Jenatton, Mairal, Obozinski 2012, §5.2),
      alternated in closed form (v_{g,i} = θ_i (η_g/w_g)/Σ_{h∋i} η_h/w_h, an exact
      decomposition of θ; then η_g = ‖v_g‖), stopped on the gap between that
      decomposition's Σ w_g‖v_g‖ and ⟨s, θ⟩ for the dual point
      s_i = θ_i/Σ_{h∋i} η_h/w_h scaled into K.

    Parameters
    ----------
    groups : sequence of index arrays
        Every coordinate must belong to at least one group.
    d : int
    weights : array-like of shape (n_groups,), optional
        w_g > 0; default 1 (the common alternative is √|g|).
    alpha : float ≥ 0, default 1.0
    tol : float, default 1e-12
        Relative accuracy of the value and the prox (certified by the gaps).

    Raises
    ------
    InvalidDataError
        Empty or out-of-range groups, an uncovered coordinate, bad weights.
    """

    name = "latent-group-l2"

    def __init__(self, groups, d: int, weights=None, alpha: float = 1.0, *, tol: float = 1e-12):
        d = check_count(d, "d")
        G = _membership(groups, d)
        w = np.ones(len(groups)) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != (len(groups),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise InvalidDataError(
                f"weights must be {len(groups)} finite values > 0, got {weights!r}"
            )
        self.membership = G
        self.weights = w
        self.disjoint = bool(np.all(G.sum(axis=0) == 1))
        self._idx = [np.flatnonzero(g) for g in G]
        self.d = d
        self.alpha = float(check_nonnegative(alpha, "alpha"))
        self.tol = float(check_positive(tol, "tol"))

    def __repr__(self) -> str:
        return f"LatentGroupL2Norm(groups={len(self._idx)}, d={self.d}, alpha={self.alpha!r})"

    # ----- dual norm and LMO (closed forms) -----------------------------------------
    def _group_ratios(self, s: np.ndarray) -> np.ndarray:
        return np.array([np.linalg.norm(s[i]) for i in self._idx]) / self.weights

    def dual_norm(self, s) -> float:
        """Ω*(s) = max_g ‖s_g‖₂/w_g (Jacob et al. 2009, Lemma 2)."""
        return float(np.max(self._group_ratios(self._vec(s))))

    def lmo(self, g, radius: float = 1.0) -> np.ndarray:
        """argmin_{Ω(θ) ≤ radius} ⟨g, θ⟩ (class docstring)."""
        g = self._vec(g)
        r = self._group_ratios(g)
        k = int(np.argmax(r))
        out = np.zeros(self.d)
        idx = self._idx[k]
        nrm = float(np.linalg.norm(g[idx]))
        if nrm > 0:
            out[idx] = -radius * g[idx] / (self.weights[k] * nrm)
        else:  # g = 0: every point of the ball is a minimizer; return a vertex
            out[idx[0]] = -radius / self.weights[k]
        return out

    def unit_ball_l2_radius(self) -> float:
        """sup{‖θ‖₂ : Ω(θ) ≤ 1} = max_g 1/w_g (the discs are the extreme points)."""
        return float(np.max(1.0 / self.weights))

    # ----- value by the η-trick -------------------------------------------------------
    def norm(self, theta, max_iter: int = 100_000) -> float:
        """Ω(θ) (class docstring; certified to relative accuracy ``tol``).

        Raises
        ------
        ConvergenceError
            If the gap does not close within ``max_iter`` alternations.
        """
        t = self._vec(theta)
        if self.disjoint:
            return float(self.weights @ np.array([np.linalg.norm(t[i]) for i in self._idx]))
        if not np.any(t):
            return 0.0
        G = self.membership.astype(float)
        w = self.weights
        eta = np.ones(len(self._idx))
        upper, lower = math.inf, 0.0
        for _ in range(max_iter):
            share = G * (eta / w)[:, None]  # (groups, d): η_g/w_g on the members of g
            denom = share.sum(axis=0)  # Σ_{h∋i} η_h/w_h > 0
            V = share * (t / denom)[None, :]  # exact decomposition: Σ_g V_g = θ
            norms = np.linalg.norm(V, axis=1)
            upper = min(upper, float(w @ norms))
            s = t / denom
            lower = max(lower, float(s @ t) / max(self.dual_norm(s), 1e-300))
            if upper - lower <= self.tol * max(upper, 1e-300):
                return upper
            eta = np.maximum(norms, 1e-300)
        raise ConvergenceError(
            f"LatentGroupL2Norm.norm: the η-trick did not reach tol={self.tol:g} in "
            f"{max_iter} iterations"
        )

    # ----- prox by block coordinate descent on the latent variables -----------------
    def prox(self, v, step: float, max_sweeps: int = 100_000) -> np.ndarray:
        """prox_{step·alpha·Ω}(v) (class docstring: latent BCD, gap-certified).

        Raises
        ------
        ConvergenceError
            If the duality gap does not reach (tol·max(1, ‖v‖))² within ``max_sweeps``.
        """
        v = self._vec(v)
        tau = float(step) * self.alpha
        if tau == 0:
            return v.copy()
        w = self.weights
        if self.disjoint:
            out = np.zeros(self.d)
            for k, i in enumerate(self._idx):  # loop over groups (few), not rows
                nrm = float(np.linalg.norm(v[i]))
                if nrm > tau * w[k]:
                    out[i] = v[i] * (1.0 - tau * w[k] / nrm)
            return out
        V = [np.zeros(i.size) for i in self._idx]
        r = v.copy()  # residual v − Σ_g v_g
        target = 0.5 * (self.tol * max(1.0, float(np.linalg.norm(v)))) ** 2
        best, stalled = math.inf, 0
        for _ in range(max_sweeps):
            for k, i in enumerate(self._idx):
                z = r[i] + V[k]
                nrm = float(np.linalg.norm(z))
                new = z * (1.0 - tau * w[k] / nrm) if nrm > tau * w[k] else np.zeros(i.size)
                r[i] = z - new
                V[k] = new
            primal = 0.5 * float(r @ r) + tau * float(
                sum(w[k] * np.linalg.norm(V[k]) for k in range(len(V)))
            )
            s = r / max(1.0, self.dual_norm(r) / tau)  # the residual scaled into τK
            dual = 0.5 * float(v @ v) - 0.5 * float((v - s) @ (v - s))
            gap = primal - dual
            if gap <= target:
                return v - r
            if gap < best:
                best, stalled = gap, 0
            else:
                stalled += 1
                if stalled >= 200 and best <= 1e-6 * target / self.tol**2:
                    return v - r  # rounding floor: no progress in 200 sweeps, gap ≤ 1e-6·‖v‖²
        raise ConvergenceError(
            f"LatentGroupL2Norm.prox: block coordinate descent did not reach tol={self.tol:g} "
            f"in {max_sweeps} sweeps"
        )
