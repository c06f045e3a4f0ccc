"""Bounds of the exponential mechanism: over a finite candidate set (McSherry &
Talwar 2007) and exponential sampling over a convex set (Bassily, Smith,
Thakurta 2014; the high-probability bound is the pure formula
:func:`dperm.bounds.exponential_sampling_bound`, re-exported here).
"""

from __future__ import annotations

import math

from .._validation import check_count
from ..bounds import expmech_erm_bound, exponential_sampling_bound
from .base import _UNREG, TheoryBound, _need, _radius

__all__ = ["expmech_erm_bound", "exponential_sampling_bound"]


def _exponential(n, d, epsilon, lip, radius, theta_norm, n_candidates, loss_range):
    if n_candidates is not None or loss_range is not None:
        m = check_count(_need(n_candidates, "n_candidates", "exponential"), "n_candidates")
        rng_ = _need(loss_range, "loss_range", "exponential")
        value = 2.0 * rng_ * (math.log(m) + 1.0) / (n * epsilon)
        return TheoryBound(
            value,
            "2Δ(ln|Θ| + 1) / (nε)",
            True,
            "McSherry & Talwar (FOCS 2007); Dwork & Roth (2014), Theorem 3.11 integrated "
            "over its tail: E[OPT − u] ≤ (2Δ_u/ε)(ln|Θ| + 1) with u = −nL, Δ_u = loss range",
            "E[L(θ)] − min_{θ∈Θ} L(θ) over the finite candidate set Θ",
        )
    R = _radius(radius, theta_norm, "exponential")
    value = expmech_erm_bound(n=n, d=d, epsilon=epsilon, lipschitz=lip, radius=R)
    return TheoryBound(
        value,
        "(2Δ/(εn))(d(1 + ln(εnGR/(Δd))) + 1), Δ = 2GR  [O(dGR log(εn/d)/(εn))]",
        True,
        "Smith & Ullman, Lecture 11, Theorem 2.5, in expectation with its proof's constants "
        "at Δ = 2GR (the statement's Δ = GR is the range only for diameter-R sets; "
        "dperm.bounds.expmech_erm_bound)",
        _UNREG,
    )
