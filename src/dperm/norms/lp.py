"""The ℓ1, ℓ∞ and group-ℓ∞ norms: submodular norms Ω∞
(:mod:`dperm.norms.submodular`) with closed forms, each tested against the
generic path:

=====================  =======================  ======================  ================
class                  F(A)                     Ω(θ)                    Ω*(s)
=====================  =======================  ======================  ================
:class:`L1Norm`        |A|                      ‖θ‖₁                    ‖s‖∞
:class:`LinfNorm`      min(|A|, 1)              ‖θ‖∞                    ‖s‖₁
:class:`GroupLinfNorm` #{g : g ∩ A ≠ ∅}         Σ_g ‖θ_g‖∞              max_g ‖s_g‖₁ (disjoint
                                                                        groups; generic if
                                                                        they overlap)
=====================  =======================  ======================  ================
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_count
from ..constraints import L1Ball
from ..exceptions import ConvergenceError
from .base import _membership
from .submodular import SubmodularNorm

__all__ = ["GroupLinfNorm", "L1Norm", "LinfNorm"]


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
