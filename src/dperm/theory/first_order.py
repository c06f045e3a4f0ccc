"""Rates of the first-order methods: noisy gradient descent and SGD
(Bassily, Smith, Thakurta, FOCS 2014) and private Frank-Wolfe (Talwar,
Thakurta, Zhang, NeurIPS 2015), evaluated with constant 1.
"""

from __future__ import annotations

import math

from .._validation import check_positive
from ..exceptions import InvalidPrivacyParameter
from .base import _REG, _UNREG, TheoryBound, _need, _need_delta, _radius


def _gradient_methods(algorithm, n, d, epsilon, delta, lip, lam, radius, theta_norm):
    delta = _need_delta(delta, algorithm)
    log_term = math.log(1.0 / delta)
    which = {
        "dp-gd": "noisy (full-batch) gradient descent",
        "dp-sgd": "noisy mini-batch SGD (Abadi et al. 2016 form; same rate up to log factors)",
        "dp-sgd-single": "noisy single-sample SGD (their Algorithm 1)",
    }[algorithm]
    src = (
        f"Bassily, Smith, Thakurta (FOCS 2014), Table 1 and Section 2 ({which}); "
        "O(·) rate evaluated with constant 1, polylog(n) factors omitted"
    )
    if lam > 0:
        value = lip**2 * d * log_term / (lam * n**2 * epsilon**2)
        return TheoryBound(
            value, "L² d log(1/δ) / (Λ n² ε²)", False, src + " (strongly convex row)", _REG
        )
    R = _radius(radius, theta_norm, algorithm)
    value = lip * R * math.sqrt(d * log_term) / (n * epsilon)
    return TheoryBound(value, "L‖C‖ √(d log(1/δ)) / (nε)", False, src + " (convex row)", _UNREG)


def _frank_wolfe(n, d, epsilon, delta, lip, beta, radius):
    if radius is None:
        raise InvalidPrivacyParameter(
            "the 'frank-wolfe' bound needs radius (the ℓ1 radius ‖C‖₁), got None"
        )
    R1 = check_positive(radius, "radius")
    beta = _need(beta, "smoothness", "frank-wolfe")
    curvature = beta * (2.0 * R1) ** 2  # Γ ≤ β diam₁(C)² (Jaggi 2013, Lemma 7)
    log_term = math.log(2.0 * n * d)  # log(n|S|), |S| = 2d vertices
    src = (
        "Talwar, Thakurta, Zhang (NeurIPS 2015), utility of private Frank-Wolfe over a "
        "polytope with |S| = 2d vertices; Γ ≤ β(2‖C‖₁)²; rate with constant 1"
    )
    if delta > 0:
        value = (
            curvature ** (1 / 3)
            * (lip * R1) ** (2 / 3)
            * log_term
            * math.sqrt(math.log(1.0 / delta))
            / (n * epsilon) ** (2 / 3)
        )
        rate = "Γ^{1/3} (L₁‖C‖₁)^{2/3} log(n|S|) √log(1/δ) / (nε)^{2/3}"
    else:
        value = 2.0 * math.sqrt(curvature * lip * R1 * log_term / (n * epsilon))
        rate = "2 √(Γ L₁‖C‖₁ log(n|S|) / (nε))"
        src += " (ε-DP: basic composition, T balanced against Γ/T)"
    return TheoryBound(value, rate, False, src, _UNREG)
