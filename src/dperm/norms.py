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

Named cases with closed forms (tested against the generic path):

=====================  =======================  ======================  ================
class                  F(A)                     Ω(θ)                    Ω*(s)
=====================  =======================  ======================  ================
:class:`L1Norm`        |A|                      ‖θ‖₁                    ‖s‖∞
:class:`LinfNorm`      min(|A|, 1)              ‖θ‖∞                    ‖s‖₁
:class:`GroupLinfNorm` #{g : g ∩ A ≠ ∅}         Σ_g ‖θ_g‖∞              max_g ‖s_g‖₁ (disjoint
                                                                        groups; generic if
                                                                        they overlap)
=====================  =======================  ======================  ================

Beyond Ω∞ of a submodular F:

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
  :class:`ChainTVNorm` is TV + μ‖θ‖₁, a norm of that other form (prox by
  Friedman et al. 2007, dual norm and LMO by a linear program).

:func:`gaussian_width` gives w(B) = E sup_{θ ∈ B} ⟨g, θ⟩ of the unit ball of Ω
(= E Ω*(g)) or of its dual ball |P|(F) (= E Ω(g)), the quantity in
Kumar & Deisenroth's Theorems 1 and 4.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from scipy import integrate, stats

from ._rng import check_random_state
from ._validation import check_count, check_nonnegative, check_positive, check_probability
from .constraints import Constraint, L1Ball
from .exceptions import ConvergenceError, InvalidDataError, InvalidPrivacyParameter
from .regularizers import Regularizer

__all__ = [
    "ChainTVNorm",
    "GaussianWidth",
    "GroupLinfNorm",
    "L1Norm",
    "LatentGroupL2Norm",
    "LinfNorm",
    "Norm",
    "NormBall",
    "SubmodularNorm",
    "gaussian_width",
    "is_submodular",
    "lovasz_extension",
    "min_norm_point",
    "norm_from_regularizer",
]

_BRUTE_MAX_D = 16


# ----------------------------------------------------------------------------- helpers
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


def _membership(groups, d: int) -> np.ndarray:
    """Boolean (n_groups, d) membership matrix of ``groups``; every coordinate must be
    covered.

    Raises
    ------
    InvalidDataError
        An empty or out-of-range group, or an uncovered coordinate.
    """
    G = np.zeros((len(groups), d), dtype=bool)
    for k, g in enumerate(groups):
        idx = np.asarray(g, dtype=int)
        if idx.ndim != 1 or idx.size == 0 or idx.min() < 0 or idx.max() >= d:
            raise InvalidDataError(f"group {k} must be non-empty indices in [0, {d}), got {g!r}")
        G[k, idx] = True
    if len(groups) == 0 or not G.any(axis=0).all():
        raise InvalidDataError("every coordinate must belong to at least one group")
    return G


def _all_set_values(F, d: int) -> np.ndarray:
    """F on every subset, indexed by the bit code of the set."""
    codes = np.arange(1 << d)
    masks = ((codes[:, None] >> np.arange(d)) & 1).astype(bool)
    return np.array([float(F(m)) for m in masks])


# ----------------------------------------------------------------------------- the norm
class Norm(Regularizer):
    """Base of the norms here: ``norm`` (unscaled Ω), ``dual_norm``, ``lmo`` over
    the unit ball, ``prox`` of ``alpha``·Ω, ``value`` = ``alpha``·Ω, ``scaled``."""

    d: int
    alpha: float

    def __repr__(self) -> str:
        return f"{type(self).__name__}(d={self.d}, alpha={self.alpha!r})"

    def __eq__(self, other) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def scaled(self, alpha: float):
        """A copy with ``alpha`` replaced."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.alpha = float(check_nonnegative(alpha, "alpha"))
        return new

    def _vec(self, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        if v.shape != (self.d,) or not np.all(np.isfinite(v)):
            raise InvalidDataError(f"expected a finite vector of shape ({self.d},), got {v.shape}")
        return v

    def norm(self, theta) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def dual_norm(self, s) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def value(self, theta) -> float:
        """alpha · Ω(θ) (the Regularizer interface)."""
        return self.alpha * self.norm(theta)


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


class L1Norm(SubmodularNorm):
    """Ω = ‖θ‖₁ (F(A) = |A|); Ω* = ‖s‖∞; prox = soft thresholding."""

    name = "l1"

    def __init__(self, d: int, alpha: float = 1.0):
        super().__init__(lambda m: float(np.count_nonzero(m)), d, alpha)

    def norm(self, theta):
        return float(np.abs(self._vec(theta)).sum())

    def dual_norm(self, s):
        return float(np.max(np.abs(self._vec(s))))

    def maximizing_set(self, s):
        mask = np.zeros(self.d, dtype=bool)
        mask[int(np.argmax(np.abs(self._vec(s))))] = True
        return mask

    def prox(self, v, step):
        v = self._vec(v)
        return np.sign(v) * np.maximum(np.abs(v) - step * self.alpha, 0.0)

    def unit_ball_l2_radius(self):
        return 1.0


class LinfNorm(SubmodularNorm):
    """Ω = ‖θ‖∞ (F(A) = min(|A|, 1)); Ω* = ‖s‖₁; prox = v − Π_{ℓ1 ball}(v)."""

    name = "linf"

    def __init__(self, d: int, alpha: float = 1.0):
        super().__init__(lambda m: float(min(np.count_nonzero(m), 1)), d, alpha)

    def norm(self, theta):
        return float(np.max(np.abs(self._vec(theta))))

    def dual_norm(self, s):
        return float(np.abs(self._vec(s)).sum())

    def maximizing_set(self, s):
        mask = np.abs(self._vec(s)) > 0
        if not mask.any():
            mask[0] = True
        return mask

    def project_dual_ball(self, v, tau=1.0):
        v = self._vec(v)
        return np.zeros(self.d) if tau == 0 else L1Ball(tau).project(v)

    def unit_ball_l2_radius(self):
        return math.sqrt(self.d)


class GroupLinfNorm(SubmodularNorm):
    """Ω(θ) = Σ_g ‖θ_g‖∞ with possibly **overlapping** groups
    (F(A) = number of groups intersecting A; Bach 2013, §6.2).

    Closed forms: the value always; Ω*(s) = max_g ‖s_g‖₁ and the prox
    (groupwise v_g − Π_{τ ℓ1}(v_g)) when the groups are disjoint.  With
    overlaps the dual norm is a transportation LP (:meth:`_overlap_dual_norm`),
    the LMO and prox use the generic submodular path.

    Parameters
    ----------
    groups : sequence of index arrays
        Every coordinate must belong to at least one group.
    d : int
    alpha : float ≥ 0

    Examples
    --------
    >>> import numpy as np
    >>> norm = GroupLinfNorm([[0, 1, 2], [2, 3]], 4)
    >>> float(norm.norm(np.array([1.0, -3.0, 2.0, 0.5])))  # max(1,3,2) + max(2,0.5)
    5.0
    >>> float(norm.dual_norm(np.array([1.0, 1.0, 1.0, 1.0])))  # max_A |A|/F(A) = 4/2
    2.0
    """

    name = "group-linf"

    def __init__(self, groups, d: int, alpha: float = 1.0):
        d = check_count(d, "d")
        G = _membership(groups, d)
        self.membership = G
        self.disjoint = bool(np.all(G.sum(axis=0) == 1))
        super().__init__(lambda m: float(np.count_nonzero(G[:, m].any(axis=1))), d, alpha)

    def norm(self, theta):
        a = np.abs(self._vec(theta))
        return float(np.max(np.where(self.membership, a, 0.0), axis=1).sum())

    def dual_norm(self, s):
        if not self.disjoint:
            return self._overlap_dual_norm(np.abs(self._vec(s)))
        return float(np.max(self.membership @ np.abs(self._vec(s))))

    def _overlap_dual_norm(self, u: np.ndarray) -> float:
        """Ω*(s) with overlapping groups by a linear program (HiGHS).

        The unit ball of Ω* is the Minkowski sum of the groups' ℓ1 balls
        (Ω(θ) = Σ_g ‖θ_g‖∞ = Σ_g max_{‖v_g‖₁ ≤ 1, supp v_g ⊆ g} ⟨v_g, θ⟩), so
        Ω*(s) = min t s.t. |s| = Σ_g v_g, v_g ≥ 0 on g, Σ_i v_{g,i} ≤ t — a
        transportation LP.  Its value equals max_A |s|(A)/F(A) of the generic
        path (LP duality; tests check both)."""
        from scipy.optimize import linprog

        if not np.any(u):
            return 0.0
        gi, ii = np.nonzero(self.membership)  # one variable v_{g,i} per (group, member)
        m = gi.size
        k = self.membership.shape[0]
        c = np.zeros(m + 1)
        c[-1] = 1.0
        A_eq = np.zeros((self.d, m + 1))
        A_eq[ii, np.arange(m)] = 1.0
        A_ub = np.zeros((k, m + 1))
        A_ub[gi, np.arange(m)] = 1.0
        A_ub[:, -1] = -1.0
        res = linprog(c, A_ub=A_ub, b_ub=np.zeros(k), A_eq=A_eq, b_eq=u, method="highs")
        if res.status != 0:  # pragma: no cover - the LP is always feasible and bounded
            raise ConvergenceError(f"group dual-norm LP failed: {res.message}")
        return float(res.fun)

    def maximizing_set(self, s):
        if not self.disjoint:
            return super().maximizing_set(s)
        a = np.abs(self._vec(s))
        g = int(np.argmax(self.membership @ a))
        mask = self.membership[g] & (a > 0)
        if not mask.any():
            mask = self.membership[g].copy()
        return mask

    def project_dual_ball(self, v, tau=1.0):
        if not self.disjoint:
            return super().project_dual_ball(v, tau)
        v = self._vec(v)
        out = np.zeros(self.d)
        if tau == 0:
            return out
        for g in self.membership:  # loop over groups (few), not rows
            out[g] = L1Ball(tau).project(v[g])
        return out


class ChainTVNorm(Norm):
    """Ω(θ) = μ‖θ‖₁ + Σ_{i<d} |θ_{i+1} − θ_i| on a chain (the "fused lasso" norm;
    equal-value sparsity, K–D §2).

    Exactly what it is: Σ|θ_{i+1} − θ_i| is the Lovász extension of the chain's
    cut function F_cut(A) = #{i : exactly one of i, i+1 in A} evaluated at θ
    itself (Bach 2013, §6.2) — a semi-norm, zero on constants, because the cut is
    symmetric and F_cut(V) = 0.  It is *not* f(|θ|) for a non-decreasing
    submodular F (module docstring), so it is not a :class:`SubmodularNorm`;
    adding μ‖θ‖₁ (μ > 0) makes it a norm.

    * prox: prox_{τΩ} = soft-threshold_{τμ} ∘ prox_{τ TV} (Friedman, Hastie,
      Höfling, Tibshirani 2007, Prop. 1); prox_{τ TV}(v) = v − Dᵀz* with
      z* = argmin_{‖z‖∞ ≤ τ} ½‖v − Dᵀz‖² solved by bounded-variable least squares
      (scipy ``lsq_linear``, method "bvls": an exact active-set method).
    * dual norm and LMO: the linear program max ⟨s, θ⟩ s.t. Ω(θ) ≤ 1 (HiGHS).

    Parameters
    ----------
    d : int ≥ 2
    mu : float > 0, default 1.0
    alpha : float ≥ 0, default 1.0
    """

    name = "chain-tv"

    def __init__(self, d: int, mu: float = 1.0, alpha: float = 1.0):
        self.d = check_count(d, "d", minimum=2)
        self.mu = float(check_positive(mu, "mu"))
        self.alpha = float(check_nonnegative(alpha, "alpha"))

    def __repr__(self) -> str:
        return f"ChainTVNorm(d={self.d}, mu={self.mu!r}, alpha={self.alpha!r})"

    def norm(self, theta) -> float:
        t = self._vec(theta)
        return float(self.mu * np.abs(t).sum() + np.abs(np.diff(t)).sum())

    def _lp(self, s) -> np.ndarray:
        """argmax_{Ω(θ) ≤ 1} ⟨s, θ⟩ (variables θ, a ≥ |θ|, t ≥ |Dθ|)."""
        from scipy.optimize import linprog

        d = self.d
        Dm = np.diff(np.eye(d), axis=0)  # (d−1, d): (Dθ)_i = θ_{i+1} − θ_i
        I, Id1 = np.eye(d), np.eye(d - 1)
        Z1, Z2 = np.zeros((d, d - 1)), np.zeros((d - 1, d))
        A = np.block(
            [
                [I, -I, Z1],
                [-I, -I, Z1],
                [Dm, Z2, -Id1],
                [-Dm, Z2, -Id1],
                [np.zeros((1, d)), np.full((1, d), self.mu), np.ones((1, d - 1))],
            ]
        )
        b = np.zeros(A.shape[0])
        b[-1] = 1.0
        c = np.concatenate([-s, np.zeros(2 * d - 1)])
        bounds = [(None, None)] * d + [(0, None)] * (2 * d - 1)
        res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
        if res.status != 0:
            raise ConvergenceError(f"ChainTVNorm LP failed: {res.message}")
        return res.x[:d]

    def dual_norm(self, s) -> float:
        s = self._vec(s)
        return float(s @ self._lp(s))

    def lmo(self, g, radius: float = 1.0) -> np.ndarray:
        """argmin_{Ω(θ) ≤ radius} ⟨g, θ⟩ (LP)."""
        return -radius * self._lp(self._vec(g))

    def prox(self, v, step: float) -> np.ndarray:
        from scipy.optimize import lsq_linear

        v = self._vec(v)
        tau = float(step) * self.alpha
        if tau == 0:
            return v.copy()
        Dt = np.diff(np.eye(self.d), axis=0).T  # Dᵀ, shape (d, d − 1)
        z = lsq_linear(Dt, v, bounds=(-tau, tau), method="bvls", tol=1e-14).x
        w = v - Dt @ z
        return np.sign(w) * np.maximum(np.abs(w) - tau * self.mu, 0.0)

    def unit_ball_l2_radius(self) -> float:
        """A bound: ‖θ‖₂ ≤ ‖θ‖₁ ≤ Ω(θ)/μ."""
        return 1.0 / self.mu


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


# ----------------------------------------------------------------------------- ball
class NormBall(Constraint):
    """{θ : Ω(θ) ≤ radius} as a :class:`~dperm.constraints.Constraint`:
    ``lmo`` (Frank-Wolfe), ``contains``, ``l2_radius`` and ``project``.

    ``project`` uses the KKT form of the projection onto a norm ball,
    Π(v) = prox_{τΩ}(v) for the τ ≥ 0 with Ω(prox_{τΩ}(v)) = radius, found by
    bisection on τ to relative accuracy 1e-10.
    """

    def __init__(self, norm: Norm, radius: float):
        if not isinstance(norm, Norm):
            raise InvalidDataError(f"norm must be a dperm.norms.Norm, got {norm!r}")
        self.norm = norm.scaled(1.0)
        self.radius = check_positive(radius, "radius")

    def __repr__(self) -> str:
        return f"NormBall({self.norm!r}, radius={self.radius!r})"

    def lmo(self, g):
        return self.norm.lmo(g, self.radius)

    def contains(self, theta, tol: float = 1e-9) -> bool:
        return bool(self.norm.norm(theta) <= self.radius * (1 + tol))

    def project(self, theta):
        v = np.asarray(theta, dtype=float)
        if self.norm.norm(v) <= self.radius:
            return v.copy()
        lo, hi = 0.0, self.norm.dual_norm(v)  # prox_{hi Ω}(v) = 0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if self.norm.norm(self.norm.prox(v, mid)) > self.radius:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-12 * max(1.0, hi):
                break
        return self.norm.prox(v, hi)

    @property
    def l2_radius(self) -> float:
        return self.radius * self.norm.unit_ball_l2_radius()


# ----------------------------------------------------------------------------- width
@dataclasses.dataclass(frozen=True)
class GaussianWidth:
    """w(B) = E sup_{θ∈B}⟨g, θ⟩, g ~ N(0, I_d): ``value``, a confidence interval
    (``ci_low``, ``ci_high``; equal to ``value`` when exact) and ``exact``."""

    value: float
    ci_low: float
    ci_high: float
    exact: bool
    n_samples: int = 0


def _expected_max_abs_gaussian(d: int) -> float:
    """E max_j |g_j| = ∫₀^∞ 1 − (2Φ(t) − 1)^d dt (numerical quadrature, ~1e-10)."""

    def tail(t):
        return -np.expm1(d * np.log1p(-2.0 * stats.norm.sf(t)))

    val, _ = integrate.quad(tail, 0.0, np.inf, epsabs=1e-12, epsrel=1e-12, limit=200)
    return float(val)


def gaussian_width(
    norm: Norm,
    *,
    ball: str = "unit",
    n_samples: int = 2000,
    confidence: float = 0.95,
    random_state=None,
) -> GaussianWidth:
    """Gaussian width of the unit ball of Ω (``ball="unit"``: E Ω*(g)) or of the
    dual ball |P|(F) (``ball="dual"``: E Ω(g)).

    Exact for ℓ1 (unit ball: E‖g‖∞ by quadrature; dual ball: E‖g‖₁ = d√(2/π))
    and ℓ∞ (unit ball: d√(2/π); dual: E‖g‖∞); otherwise Monte Carlo with a
    normal-approximation confidence interval of level ``confidence``.

    Raises
    ------
    InvalidDataError
        ``ball`` not "unit"/"dual" or ``norm`` not a SubmodularNorm.
    """
    if not isinstance(norm, Norm):
        raise InvalidDataError(f"norm must be a dperm.norms.Norm, got {norm!r}")
    if ball not in ("unit", "dual"):
        raise InvalidDataError(f"ball must be 'unit' or 'dual', got {ball!r}")
    d = norm.d
    l1_like = type(norm) is L1Norm
    linf_like = type(norm) is LinfNorm
    if l1_like or linf_like:
        sup_linf = (ball == "unit") == l1_like  # sup over ℓ1 ball = ‖g‖∞
        w = _expected_max_abs_gaussian(d) if sup_linf else d * math.sqrt(2.0 / math.pi)
        return GaussianWidth(w, w, w, True)
    n_samples = check_count(n_samples, "n_samples")
    confidence = check_probability(confidence, "confidence")
    rng = check_random_state(random_state)
    g = rng.standard_normal((n_samples, d))
    f = norm.dual_norm if ball == "unit" else norm.norm
    vals = np.array([f(row) for row in g])
    mean = float(vals.mean())
    half = float(stats.norm.ppf(0.5 + confidence / 2) * vals.std(ddof=1) / math.sqrt(n_samples))
    return GaussianWidth(mean, mean - half, mean + half, False, n_samples)


def norm_from_regularizer(regularizer, d: int):
    """(Ω, weight) with r = weight·Ω for the regularizers the estimators build:
    a :class:`~dperm.regularizers.L1` ``alpha`` → (L1Norm(d), alpha); a
    :class:`SubmodularNorm` → (its unscaled copy, its alpha); None → None.

    Raises
    ------
    InvalidPrivacyParameter
        For a regularizer that is not a norm of this module (e.g. GroupL2).
    """
    from .regularizers import L1

    if regularizer is None:
        return None
    if isinstance(regularizer, Norm):
        if regularizer.d != d:
            raise InvalidPrivacyParameter(f"the norm has d={regularizer.d}, the data {d}")
        return regularizer.scaled(1.0), regularizer.alpha
    if type(regularizer) is L1:
        return L1Norm(d), regularizer.alpha
    raise InvalidPrivacyParameter(
        f"regularizer {regularizer!r} is not a submodular norm; use penalty 'l1', "
        "'elasticnet', 'l2' or a dperm.norms.SubmodularNorm"
    )
