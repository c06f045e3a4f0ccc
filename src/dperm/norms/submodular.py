"""Norms from submodular set functions (Bach 2013; Kumar & Deisenroth 2019, §2).

Let V = {0, …, d−1} and F : 2^V → R a set function with

* F(∅) = 0, F non-decreasing (A ⊆ B ⇒ F(A) ≤ F(B)), F submodular
  (F(A) + F(B) ≥ F(A ∪ B) + F(A ∩ B)) and F({i}) > 0 for every i.

Its **Lovász extension** f : R^d → R is computed by sorting (Bach, *Learning
with Submodular Functions*, 2013, Def. 3.1): for w with w_{j1} ≥ … ≥ w_{jd},

    f(w) = Σ_k w_{jk} [F({j1..jk}) − F({j1..jk−1})].

Then **Ω(θ) = f(|θ|)** is a norm (Bach 2013, Prop. 5.1; the ℓ∞-relaxation Ω∞ of
Kumar & Deisenroth, §2).  With the symmetric submodular polyhedron

    |P|(F) = {s ∈ R^d : |s|(A) ≤ F(A) for every A ⊆ V}

(K–D eq. 5) we have

* Ω(θ) = max_{s ∈ |P|(F)} ⟨s, θ⟩ — the support function of |P|(F), attained at
  the **greedy vertex** (Edmonds 1970; Bach 2013, Prop. 3.2): order |θ|
  decreasingly, put s_{jk} = sign(θ_{jk})·(F(A_k) − F(A_{k−1})) — that is
  :meth:`SubmodularNorm.greedy_vertex`;
* |P|(F) is the unit ball of the **dual norm**
  Ω*(s) = max_{A ≠ ∅} |s|(A) / F(A) (Bach 2013, Prop. 5.2).  Computing it is a
  ratio submodular minimization: Dinkelbach's iteration
  t ← |s|(A)/F(A), A ← argmin_B t·F(B) − |s|(B), each inner minimization by
  the minimum-norm-point algorithm on the base polytope (Fujishige 1980; Wolfe
  1976; Bach 2013, §10.7).  Exact up to floating point (finite termination);
* the **linear minimization oracle** over the unit ball {Ω ≤ 1}: every extreme
  point of the unit ball is of the form σ ⊙ 1_A / F(A) with σ a sign pattern
  and A a set (Bach 2013, Prop. 5.3: A stable and inseparable).  Proof of what
  :meth:`lmo` returns: for A* maximizing |g|(A)/F(A), θ = −sign(g)⊙1_{A*}/F(A*)
  has Ω(θ) = f(1_{A*})/F(A*) = 1 (the Lovász extension of an indicator is F of
  the set) and ⟨g, θ⟩ = −|g|(A*)/F(A*) = −Ω*(g), the minimum by duality;
* the **proximal operator** prox_{τΩ}(v) = v − Π_{τ|P|(F)}(v) (Moreau).  As
  |P|(F) is sign-symmetric and solid, Π_{τ|P|(F)}(v) = sign(v)⊙Π_{τP₊(F)}(|v|),
  P₊(F) = |P|(F) ∩ R^d_+, and the projection onto P₊(F) is computed by Wolfe's
  minimum-norm-point algorithm with the greedy algorithm as vertex oracle
  (min over P₊(F) of ⟨c, s⟩ is the greedy vertex for the positive part of −c).
  Accuracy: Wolfe's algorithm terminates in finitely many steps; dperm stops
  it when the Wolfe gap ‖x‖² − min_q⟨x, q⟩ is ≤ 1e-12·scale, which gives the
  prox to ≈1e-7 relative accuracy or better (tests check 1e-7 against closed forms).

The named cases with closed forms (ℓ1, ℓ∞, group ℓ∞) are in
:mod:`dperm.norms.lp`; norms that are not Ω∞ of a submodular F in
:mod:`dperm.norms.structured`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._validation import check_count, check_nonnegative
from ..exceptions import ConvergenceError, InvalidDataError
from .base import Norm

__all__ = ["SubmodularNorm", "is_submodular", "lovasz_extension", "min_norm_point"]

_BRUTE_MAX_D = 16


def _ordered_increments(F, d: int, order: np.ndarray) -> np.ndarray:
    """F(A_k) − F(A_{k−1}) along ``order`` (A_k = first k elements), shape (len(order),)."""
    mask = np.zeros(d, dtype=bool)
    prev = 0.0
    inc = np.empty(order.size)
    for k, j in enumerate(order):
        mask[j] = True
        cur = float(F(mask))
        inc[k] = cur - prev
        prev = cur
    return inc


def lovasz_extension(F, w) -> float:
    """Lovász extension f(w) of F (Bach 2013, Def. 3.1), by sorting; F(∅) must be 0.

    Parameters
    ----------
    F : callable
        F(mask) with ``mask`` a boolean array of shape (d,).
    w : array-like of shape (d,)

    Returns
    -------
    float
    """
    w = np.asarray(w, dtype=float)
    order = np.argsort(-w, kind="stable")
    return float(w[order] @ _ordered_increments(F, w.size, order))


def min_norm_point(lmo, x0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 10_000):
    """Wolfe's minimum-norm-point algorithm (Wolfe 1976; Bach 2013, §9.2) for a
    polytope Q given by a vertex oracle ``lmo(c) = argmin_{q ∈ Q} ⟨c, q⟩``.

    Parameters
    ----------
    lmo : callable
    x0 : ndarray of shape (d,)
        A vertex of Q (start point).
    tol : float
        Stop when ‖x‖² − ⟨x, lmo(x)⟩ ≤ tol · max(1, max ‖q‖²) (Wolfe's gap, an
        upper bound on ‖x‖² − ‖x*‖²·… see Bach 2013, §9.2).
    max_iter : int

    Returns
    -------
    ndarray of shape (d,)
        The point of Q of least Euclidean norm.

    Raises
    ------
    ConvergenceError
        When ``max_iter`` major cycles do not reach ``tol``.
    """
    S = [np.asarray(x0, dtype=float)]
    lam = np.array([1.0])
    x = S[0].copy()
    scale = max(1.0, float(S[0] @ S[0]))
    for _ in range(max_iter):
        q = lmo(x)
        scale = max(scale, float(q @ q))
        if float(x @ x) - float(x @ q) <= tol * scale:
            return x
        if any(np.array_equal(q, s) for s in S):
            return x  # no progress possible: x is optimal up to rounding
        S.append(q)
        lam = np.append(lam, 0.0)
        while True:  # minor cycles: affine minimizer of the current corral
            M = np.vstack(S)
            k = M.shape[0]
            G = M @ M.T
            A = np.block([[G, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
            rhs = np.zeros(k + 1)
            rhs[-1] = 1.0
            mu = np.linalg.lstsq(A, rhs, rcond=None)[0][:k]
            if np.all(mu > 1e-14):
                lam = mu
                break
            neg = mu <= 1e-14
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios = np.where(neg, lam / (lam - mu), np.inf)
            step = float(np.min(ratios[neg])) if np.any(neg) else 1.0
            step = min(max(step, 0.0), 1.0)
            lam = lam + step * (mu - lam)
            keep = lam > 1e-14
            if not np.any(keep):
                keep[np.argmax(lam)] = True
            S = [s for s, kp in zip(S, keep, strict=True) if kp]
            lam = lam[keep]
            lam = lam / lam.sum()
        x = lam @ np.vstack(S)
    raise ConvergenceError(f"min_norm_point did not converge in max_iter={max_iter} cycles")


def is_submodular(F, d: int, *, tol: float = 1e-10) -> bool:
    """Brute-force check (all 2^d sets, d ≤ 16) that F is submodular, via the
    equivalent diminishing-returns condition F(A+i) − F(A) ≥ F(A+i+j) − F(A+j)
    for all A and i ≠ j outside A (Bach 2013, Prop. 2.3).

    Raises
    ------
    InvalidDataError
        If d > 16 (too many sets).
    """
    d = check_count(d, "d")
    if d > _BRUTE_MAX_D:
        raise InvalidDataError(f"is_submodular is brute force; needs d ≤ {_BRUTE_MAX_D}, got {d}")
    vals = _all_set_values(F, d)
    for code in range(1 << d):
        for i in range(d):
            if code >> i & 1:
                continue
            for j in range(i + 1, d):
                if code >> j & 1:
                    continue
                a, ai, aj, aij = code, code | 1 << i, code | 1 << j, code | 1 << i | 1 << j
                if vals[ai] + vals[aj] < vals[a] + vals[aij] - tol:
                    return False
    return True


def _all_set_values(F, d: int) -> np.ndarray:
    """F on every subset, indexed by the bit code of the set."""
    codes = np.arange(1 << d)
    masks = ((codes[:, None] >> np.arange(d)) & 1).astype(bool)
    return np.array([float(F(m)) for m in masks])


class SubmodularNorm(Norm):
    """Ω(θ) = f(|θ|), the norm of a non-decreasing submodular F (module docstring).

    As a :class:`~dperm.regularizers.Regularizer` (``penalty=``/``regularizer=``)
    it is r(θ) = ``alpha`` · Ω(θ) with ``prox(v, step)`` = prox_{step·alpha·Ω}(v).

    Parameters
    ----------
    F : callable
        F(mask) → float for a boolean mask of shape (d,).
    d : int ≥ 1
    alpha : float ≥ 0, default 1.0
    check : bool, default False
        Verify F(∅) = 0, F({i}) > 0, monotonicity and submodularity by brute
        force (d ≤ 16).

    Raises
    ------
    InvalidDataError
        If ``check`` and F violates an assumption (naming it).
    """

    name = "submodular"

    def __init__(self, F, d: int, alpha: float = 1.0, *, check: bool = False):
        if not callable(F):
            raise InvalidDataError(f"F must be callable on boolean masks, got {F!r}")
        self.F = F
        self.d = check_count(d, "d")
        self.alpha = float(check_nonnegative(alpha, "alpha"))
        empty = float(F(np.zeros(self.d, dtype=bool)))
        if abs(empty) > 1e-12:
            raise InvalidDataError(f"F(∅) must be 0, got F(∅)={empty!r}")
        singles = np.array([float(F(np.eye(self.d, dtype=bool)[i])) for i in range(self.d)])
        if np.any(singles <= 0):
            i = int(np.argmin(singles))
            raise InvalidDataError(f"F({{{i}}}) must be > 0 for Ω to be a norm, got {singles[i]!r}")
        self._singles = singles
        if check:
            self._check_F()

    def _check_F(self):
        vals = _all_set_values(self.F, self.d) if self.d <= _BRUTE_MAX_D else None
        if vals is None:
            raise InvalidDataError(f"check=True is brute force; needs d ≤ {_BRUTE_MAX_D}")
        for code in range(1 << self.d):
            for i in range(self.d):
                if not code >> i & 1 and vals[code | 1 << i] < vals[code] - 1e-12:
                    raise InvalidDataError(f"F is not non-decreasing (set code {code}, add {i})")
        if not is_submodular(self.F, self.d):
            raise InvalidDataError("F is not submodular")

    # ----- greedy algorithm / support function of |P|(F) ---------------------------
    def greedy_vertex(self, c) -> np.ndarray:
        """argmax_{s ∈ |P|(F)} ⟨c, s⟩, a vertex of |P|(F) (greedy algorithm on |c|)."""
        c = self._vec(c)
        order = np.argsort(-np.abs(c), kind="stable")
        s = np.zeros(self.d)
        s[order] = _ordered_increments(self.F, self.d, order)
        return np.where(c < 0, -s, s)

    def _positive_vertex(self, c: np.ndarray) -> np.ndarray:
        """argmax_{s ∈ P₊(F)} ⟨c, s⟩: greedy on the positive entries of c."""
        pos = np.flatnonzero(c > 0)
        s = np.zeros(self.d)
        if pos.size:
            order = pos[np.argsort(-c[pos], kind="stable")]
            s[order] = _ordered_increments(self.F, self.d, order)
        return s

    def norm(self, theta) -> float:
        """Ω(θ) = f(|θ|) (unscaled)."""
        a = np.abs(self._vec(theta))
        return float(a @ np.abs(self.greedy_vertex(a)))

    # ----- dual norm and the unit-ball oracle --------------------------------------
    def _set_min(self, t: float, u: np.ndarray):
        """argmin_A t·F(A) − u(A) (submodular) via the min-norm point of the base
        polytope B(tF − u) (Fujishige's theorem: A = {x* < 0})."""

        def lmo(c):
            order = np.argsort(c, kind="stable")
            s = np.zeros(self.d)
            s[order] = t * _ordered_increments(self.F, self.d, order) - u[order]
            return s

        x = min_norm_point(lmo, lmo(np.zeros(self.d)))
        best, best_val = None, 0.0
        thr = 1e-9 * max(1.0, float(np.max(np.abs(x))))
        for mask in (x < -thr, x <= thr):
            if mask.any():
                val = t * float(self.F(mask)) - float(u[mask].sum())
                if val < best_val:
                    best, best_val = mask, val
        return best, best_val

    def maximizing_set(self, s) -> np.ndarray:
        """A set A* (boolean mask) maximizing |s|(A)/F(A) (Dinkelbach + min-norm point)."""
        u = np.abs(self._vec(s))
        j = int(np.argmax(u / self._singles))
        mask = np.zeros(self.d, dtype=bool)
        mask[j] = True
        if u[j] == 0:
            return mask
        t = u[j] / self._singles[j]
        for _ in range(10 * self.d + 10):
            A, val = self._set_min(t, u)
            if A is None or val >= -1e-12 * max(1.0, t * float(self.F(np.ones(self.d, bool)))):
                return mask
            t_new = float(u[A].sum()) / float(self.F(A))
            if t_new <= t * (1 + 1e-15):
                return mask
            mask, t = A, t_new
        raise ConvergenceError("Dinkelbach iteration for the dual norm did not terminate")

    def dual_norm(self, s) -> float:
        """Ω*(s) = max_{A≠∅} |s|(A)/F(A) (Bach 2013, Prop. 5.2)."""
        u = np.abs(self._vec(s))
        A = self.maximizing_set(u)
        return float(u[A].sum() / float(self.F(A)))

    def lmo(self, g, radius: float = 1.0) -> np.ndarray:
        """argmin_{Ω(θ) ≤ radius} ⟨g, θ⟩ = −radius·sign(g)⊙1_{A*}/F(A*) (module docstring)."""
        g = self._vec(g)
        A = self.maximizing_set(g)
        sg = np.where(g < 0, -1.0, 1.0)
        return -radius * sg * A / float(self.F(A))

    # ----- proximal operator -------------------------------------------------------
    def project_dual_ball(self, v, tau: float = 1.0) -> np.ndarray:
        """Euclidean projection onto τ·|P|(F) = {Ω* ≤ τ} (min-norm point, module docstring)."""
        v = self._vec(v)
        if tau == 0:
            return np.zeros(self.d)
        u = np.abs(v)

        def lmo(c):  # vertex of τP₊(F) − u minimizing ⟨c, ·⟩
            return tau * self._positive_vertex(-c) - u

        x = min_norm_point(lmo, -u)  # 0 ∈ P₊(F), so −u is a vertex of τP₊(F) − u
        return np.sign(v) * np.clip(x + u, 0.0, None)

    def prox(self, v, step: float) -> np.ndarray:
        """prox_{step·alpha·Ω}(v) = v − Π_{step·alpha·|P|(F)}(v) (Moreau decomposition)."""
        v = self._vec(v)
        tau = float(step) * self.alpha
        return v - self.project_dual_ball(v, tau)

    # ----- extras ------------------------------------------------------------------
    def dual_ball_vertices(self) -> np.ndarray:
        """All vertices of |P|(F) by enumeration (greedy on every ordering of every
        subset, all sign patterns), deduplicated; brute force for d ≤ 6."""
        if self.d > 6:
            raise InvalidDataError(f"dual_ball_vertices enumerates; needs d ≤ 6, got {self.d}")
        out = set()
        for r in range(1, self.d + 1):
            for perm in itertools.permutations(range(self.d), r):
                s = np.zeros(self.d)
                s[list(perm)] = _ordered_increments(self.F, self.d, np.array(perm))
                nz = np.flatnonzero(s)
                for signs in itertools.product((-1.0, 1.0), repeat=nz.size):
                    t = s.copy()
                    t[nz] *= signs
                    out.add(tuple(np.round(t, 12)))
        return np.array(sorted(out))

    def unit_ball_l2_radius(self) -> float:
        """sup{‖θ‖₂ : Ω(θ) ≤ 1} = max_A √|A|/F(A) (extreme points), exact for
        d ≤ 16, else the bound √d / min_i F({i})."""
        if self.d > _BRUTE_MAX_D:
            return math.sqrt(self.d) / float(np.min(self._singles))
        vals = _all_set_values(self.F, self.d)[1:]
        sizes = np.array([bin(c).count("1") for c in range(1, 1 << self.d)])
        return float(np.max(np.sqrt(sizes) / vals))
