"""Graph total variation plus ℓ1: Ω(θ) = μ‖θ‖₁ + Σ_{(i,j)∈E} w_ij |θ_i − θ_j|
(Kumar & Deisenroth 2019, §2: "many components of θ have the same values";
Bach 2013, *Learning with Submodular Functions*, §6.2, cut functions).

**What it is.**  The graph's weighted cut Cut(A) = Σ_{(i,j)∈E} w_ij·[exactly one
of i, j in A] is submodular and symmetric with Cut(V) = 0, so it is not
non-decreasing and f_cut(|θ|) is not a norm (module docstring of
:mod:`dperm.norms.structured`).  Its Lovász extension evaluated at θ itself is the
total variation TV(θ) = Σ w_ij|θ_i − θ_j| (Bach 2013, §6.2, by the coarea formula),
a semi-norm that vanishes on constants; μ‖θ‖₁ (μ > 0) makes a norm.

**The unit ball (derived here).**  Let G(A) = μ|A| + Cut(A), submodular with
G(∅) = 0 and G(A) > 0 for A ≠ ∅, and g its Lovász extension.  The layer-cake
(Choquet) form of a Lovász extension (Bach 2013, Prop. 3.1) applied to the
super-level sets A_t = {θ > t} (t ≥ 0) and B_t = {θ < −t} (t ≥ 0), with the
coarea formula TV(θ) = ∫_R Cut({θ > t}) dt and Cut(A) = Cut(V ∖ A), gives

    Ω(θ) = ∫₀^∞ G(A_t) dt + ∫₀^∞ G(B_t) dt = g(θ⁺) + g(θ⁻),
    θ    = ∫₀^∞ 1_{A_t} dt − ∫₀^∞ 1_{B_t} dt.

The level sets take finitely many values, so θ/Ω(θ) is a convex combination of
the points ±1_A/G(A) with weights G(A)·(length of the level)/Ω(θ); each such
point has Ω(1_A/G(A)) = G(A)/G(A) = 1.  Hence

    {Ω ≤ 1} = conv{ ±1_A/G(A) : ∅ ≠ A ⊆ V },
    Ω*(s)   = max_{A≠∅} |s(A)| / G(A)         (s(A) = Σ_{i∈A} s_i),

and every extreme point of the unit ball is ±1_A/G(A) for a set A that is
**connected** in the graph — the analogue of the stable, inseparable sets of Bach
2013, Prop. 5.3 (there for Ω(θ) = f(|θ|) with F non-decreasing): if A = A₁ ∪ A₂
with no edge between A₁ and A₂ then G(A) = G(A₁) + G(A₂) and
1_A/G(A) = Σ_k (G(A_k)/G(A))·1_{A_k}/G(A_k) is not extreme; and since
|s(A)|/G(A) ≤ max_k |s(A_k)|/G(A_k) (a mediant), a connected maximizer always
exists.  Note the sign pattern: one sign over the whole set (|s(A)|, not the
|s|(A) of a SubmodularNorm).

**Oracles.**

* ``dual_norm`` and ``lmo``: for d ≤ 12 the formula itself over all 2^d − 1 sets
  (vectorized); above, the linear program max ⟨s, θ⟩ s.t. μΣa + Σ w·t ≤ 1,
  |θ| ≤ a, |Dθ| ≤ t (HiGHS; D the (|E|, d) incidence matrix, (Dθ)_e = θ_i − θ_j)
  finds an optimal point; its layer-cake decomposition above writes it as a
  convex combination of generators that are then all optimal, so the best level
  set of its solution, split into connected components, gives an exact optimal
  generator ±1_A/G(A) with A connected, whose value |s(A)|/G(A) is computed
  exactly from the set (and checked against the LP's value).
* ``prox``: prox_{τΩ} = soft-threshold_{τμ} ∘ prox_{τTV}.  Friedman, Hastie,
  Höfling, Tibshirani (2007), Prop. 1 prove it for a chain; the proof holds on
  any graph: with u = prox_{τTV}(v), v − u = Dᵀz, z_e ∈ τw_e·sgn(u_i − u_j);
  soft-thresholding p = S_{τμ}(u) keeps every order (u_i > u_j ⇒ p_i ≥ p_j, ties
  stay ties), so z_e ∈ τw_e·sgn(p_i − p_j) still, and v − p = Dᵀz + (u − p) ∈
  τ∂TV(p) + τμ∂‖p‖₁.  prox_{τTV}(v) = v − Dᵀz* with
  z* = argmin_{|z_e| ≤ τw_e} ½‖v − Dᵀz‖² (the dual of the TV prox), a
  bound-constrained least squares: bounded-variable least squares (scipy
  ``lsq_linear`` "bvls", an exact active-set method) up to
  :data:`_BVLS_MAX_EDGES` edges, the trust-region reflective method on the
  sparse D above.  **Certificate**: q = v − p = Dᵀz + (u − p) lies in τ·{Ω* ≤ 1}
  (|u − p| ≤ τμ coordinate-wise), so the Fenchel gap of the prox problem is
  τΩ(p) − ⟨q, p⟩ = Σ_e (τw_e|(Dp)_e| − z_e(Dp)_e) (the ℓ1 part cancels exactly),
  a sum of non-negative terms computed without cancellation, and by 1-strong
  convexity ‖p − prox_{τΩ}(v)‖₂ ≤ √(2·gap).  The prox raises
  :class:`~dperm.exceptions.ConvergenceError` unless gap ≤ ``tol``·max(1, ‖v‖²)
  (the floor of evaluating Dp in double precision on fused edges; the prox is
  then certified to √(2·tol)·max(1, ‖v‖), in practice exact to rounding).
* The Gaussian width of the dual ball, E Ω(g) = √(2/π)(μd + √2·Σ_e w_e), is exact
  (E|g_i − g_j| = 2/√π); the dual ball is the zonotope
  μ[−1, 1]^d + DᵀW[−1, 1]^{|E|}, which the private dual Frank-Wolfe samples block by
  block (:func:`dperm.algorithms.dual_frank_wolfe.dual_vertex_blocks`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from .._validation import check_count, check_nonnegative, check_positive
from ..exceptions import ConvergenceError, InvalidDataError
from .base import Norm

__all__ = ["GraphTVNorm", "path_edges"]

#: the prox's TV dual by exact bounded-variable least squares up to this many edges,
#: by the sparse trust-region reflective method above (BVLS is dense, O(|E|³))
_BVLS_MAX_EDGES = 300
_BRUTE_MAX_D = 16
#: the dual norm and LMO enumerate the 2^d − 1 sets up to this d (exact, ~0.1 ms), above
#: it solve the linear program and read an optimal set off its level sets
_ENUM_MAX_D = 12


def path_edges(d: int) -> np.ndarray:
    """The edges (i, i + 1), i < d − 1, of the path (chain) graph, shape (d − 1, 2)."""
    d = check_count(d, "d")
    i = np.arange(d - 1)
    return np.column_stack([i, i + 1])


def _check_edges(edges, d: int) -> np.ndarray:
    E = np.asarray(edges)
    if E.size == 0:
        return np.zeros((0, 2), dtype=int)
    if E.ndim != 2 or E.shape[1] != 2 or not np.issubdtype(E.dtype, np.integer):
        raise InvalidDataError(f"edges must be integer pairs (i, j) of shape (m, 2), got {edges!r}")
    E = E.astype(int)
    if E.min() < 0 or E.max() >= d:
        raise InvalidDataError(f"edges must join vertices in [0, {d}), got {edges!r}")
    if np.any(E[:, 0] == E[:, 1]):
        k = int(np.flatnonzero(E[:, 0] == E[:, 1])[0])
        raise InvalidDataError(f"edges must join two different vertices, edge {k} is {E[k]}")
    key = np.sort(E, axis=1)
    if np.unique(key, axis=0).shape[0] != E.shape[0]:
        raise InvalidDataError("edges must not repeat (give one edge and its weight)")
    return E


class GraphTVNorm(Norm):
    """Ω(θ) = μ‖θ‖₁ + Σ_{(i,j)∈E} w_ij|θ_i − θ_j|, graph total variation plus ℓ1
    (module docstring: unit ball, dual norm, LMO, certified prox).

    Parameters
    ----------
    edges : array-like of int, shape (m, 2)
        Undirected edges (i, j), 0 ≤ i, j < d, i ≠ j, each at most once.
    d : int ≥ 1
    mu : float > 0, default 1.0
        Weight of the ℓ1 term (μ = 0 would leave a semi-norm, zero on constants).
    weights : array-like of shape (m,), optional
        w_ij > 0, default 1.
    alpha : float ≥ 0, default 1.0
        The regularizer is ``alpha``·Ω.
    tol : float, default 1e-12
        The prox's certified Fenchel gap, relative to max(1, ‖v‖²).

    Raises
    ------
    InvalidDataError
        Malformed, repeated or out-of-range edges, or bad weights.
    InvalidPrivacyParameter
        ``mu`` ≤ 0, ``alpha`` < 0, ``tol`` ≤ 0.

    Examples
    --------
    >>> import numpy as np
    >>> star = GraphTVNorm([[0, 1], [0, 2], [0, 3]], 4, mu=0.5)
    >>> star.norm(np.array([1.0, 1.0, 1.0, 0.0]))  # 0.5·3 + one cut edge
    2.5
    >>> round(star.dual_norm(np.array([1.0, 1.0, 1.0, 1.0])), 6)  # A = V: 4/(0.5·4)
    2.0
    """

    name = "graph-tv"

    def __init__(
        self, edges, d: int, mu: float = 1.0, weights=None, alpha: float = 1.0, *, tol=1e-12
    ):
        self.d = check_count(d, "d")
        E = _check_edges(edges, self.d)
        m = E.shape[0]
        w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != (m,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise InvalidDataError(f"weights must be {m} finite values > 0, got {weights!r}")
        self.edges = E
        self.weights = w
        self.mu = float(check_positive(mu, "mu"))
        self.alpha = float(check_nonnegative(alpha, "alpha"))
        self.tol = float(check_positive(tol, "tol"))
        self._enum = self._lp_rows = None  # caches: every set and G on it; the LP's rows
        rows = np.repeat(np.arange(m), 2)
        self._D = sparse.csr_matrix(
            (np.tile([1.0, -1.0], m), (rows, E.ravel())), shape=(m, self.d)
        )  # (Dθ)_e = θ_i − θ_j

    def __repr__(self) -> str:
        return (
            f"GraphTVNorm(edges={self.edges.shape[0]}, d={self.d}, mu={self.mu!r}, "
            f"alpha={self.alpha!r})"
        )

    # ----- value and set function -------------------------------------------------------
    def norm(self, theta) -> float:
        t = self._vec(theta)
        return float(self.mu * np.abs(t).sum() + self.weights @ np.abs(self._D @ t))

    def set_function(self, masks) -> np.ndarray:
        """G(A) = μ|A| + Cut(A) for boolean masks of shape (d,) or (k, d)."""
        M = np.atleast_2d(np.asarray(masks, dtype=bool))
        cut = (M[:, self.edges[:, 0]] != M[:, self.edges[:, 1]]) @ self.weights
        out = self.mu * M.sum(axis=1) + cut
        return out if np.ndim(masks) == 2 else out[0]

    # ----- dual norm and LMO -------------------------------------------------------------
    def _lp(self, s: np.ndarray) -> tuple[np.ndarray, float]:
        """An optimal θ of max ⟨s, θ⟩ s.t. Ω(θ) ≤ 1 and its value (HiGHS); variables
        θ (d), a ≥ |θ| (d), t ≥ |Dθ| (m)."""
        from scipy.optimize import linprog

        d, m = self.d, self.edges.shape[0]
        if self._lp_rows is None:
            D, I, Im = self._D, sparse.identity(d), sparse.identity(m)
            Zdm, Zmd = sparse.csr_matrix((d, m)), sparse.csr_matrix((m, d))
            budget = np.concatenate([np.zeros(d), np.full(d, self.mu), self.weights])[None, :]
            A = sparse.vstack(
                [
                    sparse.hstack([I, -I, Zdm]),
                    sparse.hstack([-I, -I, Zdm]),
                    sparse.hstack([D, Zmd, -Im]),
                    sparse.hstack([-D, Zmd, -Im]),
                    sparse.csr_matrix(budget),
                ],
                format="csr",
            )
            b = np.zeros(A.shape[0])
            b[-1] = 1.0
            self._lp_rows = (A, b)
        A, b = self._lp_rows
        c = np.concatenate([-s, np.zeros(d + m)])
        bounds = [(None, None)] * d + [(0, None)] * (d + m)
        res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
        if res.status != 0:
            raise ConvergenceError(f"{type(self).__name__} LP failed: {res.message}")
        return res.x[:d], float(-res.fun)

    def _components(self, mask: np.ndarray) -> list[np.ndarray]:
        """The connected components (boolean masks) of the subgraph induced by ``mask``."""
        from scipy.sparse.csgraph import connected_components

        idx = np.flatnonzero(mask)
        keep = mask[self.edges[:, 0]] & mask[self.edges[:, 1]]
        pos = np.full(self.d, -1)
        pos[idx] = np.arange(idx.size)
        sub = self.edges[keep]
        adj = sparse.csr_matrix(
            (np.ones(sub.shape[0]), (pos[sub[:, 0]], pos[sub[:, 1]])), shape=(idx.size,) * 2
        )
        k, labels = connected_components(adj, directed=False)
        out = []
        for c in range(k):
            m = np.zeros(self.d, dtype=bool)
            m[idx[labels == c]] = True
            out.append(m)
        return out

    def _all_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """Every non-empty set (boolean masks, (2^d − 1, d)) and G on it, cached."""
        if self._enum is None:
            codes = np.arange(1, 1 << self.d)
            masks = ((codes[:, None] >> np.arange(self.d)) & 1).astype(bool)
            self._enum = (masks, self.set_function(masks))
        return self._enum

    def _best_component(self, s: np.ndarray, mask: np.ndarray, sign: float) -> np.ndarray:
        """The connected component A of ``mask`` with the largest σ·s(A)/G(A) (at least
        the ratio of ``mask``: a mediant; module docstring)."""
        comps = self._components(mask)
        if len(comps) == 1:
            return mask
        ratios = [sign * float(s[c].sum()) / float(self.set_function(c)) for c in comps]
        return comps[int(np.argmax(ratios))]

    def maximizing_set(self, s) -> tuple[np.ndarray, float]:
        """(A, σ): a connected set A and a sign σ ∈ {−1, +1} maximizing σ·s(A)/G(A)
        (= Ω*(s); module docstring, "Oracles").

        Raises
        ------
        ConvergenceError
            If the LP fails or its solution's level sets do not reach its value.
        """
        s = self._vec(s)
        singles = self.set_function(np.eye(self.d, dtype=bool))
        if not np.any(s):
            mask = np.zeros(self.d, dtype=bool)
            mask[int(np.argmin(singles))] = True
            return mask, 1.0
        if self.d <= _ENUM_MAX_D:  # every set at once: exact, and fast at this size
            masks, G = self._all_sets()
            r = (masks @ s) / G
            k = int(np.argmax(np.abs(r)))
            sign = 1.0 if r[k] >= 0 else -1.0
            return self._best_component(s, masks[k], sign), sign
        theta, value = self._lp(s)
        scale = max(float(np.max(np.abs(theta))), 1e-300)
        cands = []
        for sign in (1.0, -1.0):  # the level sets {σθ ≥ c} of θ⁺ and θ⁻
            t = sign * theta
            levels = np.unique(np.round(t[t > 1e-9 * scale] / scale, 9))
            cands += [(t >= (c - 1e-9) * scale, sign) for c in levels]
        cands.append((np.eye(self.d, dtype=bool)[int(np.argmax(np.abs(s) / singles))], 0.0))
        masks = np.array([m for m, _ in cands])
        ratios = (masks @ s) / self.set_function(masks)
        signs = np.array(
            [
                sg if sg else (1.0 if r >= 0 else -1.0)
                for (_, sg), r in zip(cands, ratios, strict=True)
            ]
        )
        k = int(np.argmax(signs * ratios))
        sign = float(signs[k])
        best = self._best_component(s, masks[k], sign)
        got = sign * float(s[best].sum()) / float(self.set_function(best))
        if got < value * (1.0 - 1e-7) - 1e-12 * float(np.abs(s).max()):
            raise ConvergenceError(
                f"{type(self).__name__}: the LP's level sets reach {got!r} < its value {value!r}"
            )
        return best, sign

    def dual_norm(self, s) -> float:
        """Ω*(s) = max_{A≠∅} |s(A)|/G(A) (module docstring), from an exact maximizing set."""
        s = self._vec(s)
        A, sign = self.maximizing_set(s)
        return float(sign * s[A].sum() / self.set_function(A))

    def lmo(self, g, radius: float = 1.0) -> np.ndarray:
        """argmin_{Ω(θ) ≤ radius} ⟨g, θ⟩ = −radius·σ·1_A/G(A), an extreme point of the
        ball (A connected, σ·g(A)/G(A) = Ω*(g); module docstring)."""
        g = self._vec(g)
        A, sign = self.maximizing_set(g)
        return -radius * sign * A / float(self.set_function(A))

    # ----- prox --------------------------------------------------------------------------
    def _tv_dual(self, v: np.ndarray, tau: float, method: str) -> np.ndarray:
        from scipy.optimize import lsq_linear

        bound = tau * self.weights
        if method == "bvls":
            res = lsq_linear(
                self._D.T.toarray(), v, bounds=(-bound, bound), method="bvls", tol=1e-14
            )
        else:
            res = lsq_linear(
                self._D.T.tocsr(),
                v,
                bounds=(-bound, bound),
                method="trf",
                tol=1e-15,
                max_iter=10_000,
            )
        return np.clip(res.x, -bound, bound)

    def prox(self, v, step: float) -> np.ndarray:
        """prox_{step·alpha·Ω}(v) = S_{τμ}(prox_{τTV}(v)), τ = step·alpha, certified by
        its Fenchel gap (module docstring).

        Raises
        ------
        ConvergenceError
            If no solver reaches the gap ``tol``·max(1, ‖v‖²).
        """
        v = self._vec(v)
        tau = float(step) * self.alpha
        if tau == 0:
            return v.copy()
        if self.edges.shape[0] == 0:
            return np.sign(v) * np.maximum(np.abs(v) - tau * self.mu, 0.0)
        target = self.tol * max(1.0, float(v @ v))
        methods = ["bvls"] if self.edges.shape[0] <= _BVLS_MAX_EDGES else ["trf", "bvls"]
        gap = math.inf
        for method in methods:
            z = self._tv_dual(v, tau, method)
            u = v - self._D.T @ z
            p = np.sign(u) * np.maximum(np.abs(u) - tau * self.mu, 0.0)
            Dp = self._D @ p
            gap = float(np.sum(tau * self.weights * np.abs(Dp) - z * Dp))
            if gap <= target:
                return p
        raise ConvergenceError(
            f"{type(self).__name__}.prox: the Fenchel gap {gap:.3g} did not reach "
            f"{target:.3g} (tol={self.tol:g})"
        )

    # ----- geometry ----------------------------------------------------------------------
    def unit_ball_l2_radius(self) -> float:
        """sup{‖θ‖₂ : Ω(θ) ≤ 1} = max_A √|A|/G(A) over the generators: exact by
        enumeration for d ≤ 16, else the bound ‖θ‖₂ ≤ ‖θ‖₁ ≤ Ω(θ)/μ."""
        if self.d > _BRUTE_MAX_D:
            return 1.0 / self.mu
        codes = np.arange(1, 1 << self.d)
        masks = ((codes[:, None] >> np.arange(self.d)) & 1).astype(bool)
        return float(np.max(np.sqrt(masks.sum(axis=1)) / self.set_function(masks)))

    def dual_gaussian_width(self) -> float:
        """E Ω(g), g ~ N(0, I_d): √(2/π)(μd + √2·Σ_e w_e) (exact; module docstring)."""
        return math.sqrt(2.0 / math.pi) * (
            self.mu * self.d + math.sqrt(2.0) * float(self.weights.sum())
        )
