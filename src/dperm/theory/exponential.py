"""Bounds of the exponential mechanism: over a finite candidate set (McSherry &
Talwar 2007) and exponential sampling over a convex set (Bassily, Smith,
Thakurta 2014; the high-probability bound is the pure formula
:func:`dperm.bounds.exponential_sampling_bound`, re-exported here).
"""

from __future__ import annotations

import math

from .._validation import check_count
from ..bounds import exponential_sampling_bound
from .base import _UNREG, TheoryBound, _need, _radius

__all__ = ["exponential_sampling_bound"]


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
    value = d * lip * R / (n * epsilon)
    return TheoryBound(
        value,
        "d L‖C‖ / (nε)",
        False,
        "Bassily, Smith, Thakurta (FOCS 2014), Section 3 (exponential sampling over a "
        "convex set, ε-DP); rate with constant 1",
        _UNREG,
    )
