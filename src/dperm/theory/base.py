"""What every bound of :mod:`dperm.theory` returns (:class:`TheoryBound`) and
the pieces they share: the checks of the quantities a bound needs, and the
moments and cost of the output noise dperm adds (facts (i)–(iii) of
:mod:`dperm.theory`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .._validation import check_nonnegative, check_positive
from ..accounting.gaussian import analytic_gaussian_noise_multiplier
from ..exceptions import InvalidPrivacyParameter

__all__ = ["TheoryBound"]

_REG = "E[J(θ)] − min J,  J = (1/n)Σℓ + (Λ/2)‖θ‖²"
_UNREG = "E[L(θ)] − min_C L,  L = (1/n)Σℓ"


@dataclasses.dataclass(frozen=True)
class TheoryBound:
    """A theoretical bound on the expected excess empirical risk.

    Attributes
    ----------
    value : float
        The bound evaluated at the given n, d, ε, δ, L, … (mean-loss units).
    rate : str
        The formula, e.g. ``"L‖C‖√(d log(1/δ))/(nε)"``.
    constant_known : bool
        True when ``value`` is a bound with the constants of the analysis;
        False when it is a rate evaluated with constant 1.
    source : str
        Paper and theorem, and what was done to it (constant 1, log factors
        dropped, derivation).
    quantity : str
        What is bounded (regularized objective J or unregularized L over C,
        relative to the best candidate for the exponential mechanism).
    """

    value: float
    rate: str
    constant_known: bool
    source: str
    quantity: str = _UNREG

    def to_dict(self) -> dict[str, Any]:
        """The bound as a JSON-compatible dict."""
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- helpers
def _radius(radius, theta_norm, algorithm: str) -> float:
    if radius is not None:
        return check_positive(radius, "radius")
    if theta_norm is not None:
        return check_positive(theta_norm, "theta_norm")
    raise InvalidPrivacyParameter(
        f"the {algorithm!r} bound needs radius (sup ‖θ‖ over the constraint set) or "
        "theta_norm (a bound on ‖θ*‖), got neither"
    )


def _strong(strong_convexity) -> float:
    if strong_convexity is None:
        return 0.0
    return check_nonnegative(strong_convexity, "strong_convexity")


def _need(value, name: str, algorithm: str) -> float:
    if value is None:
        raise InvalidPrivacyParameter(f"the {algorithm!r} bound needs {name}, got None")
    return check_positive(value, name)


def _need_delta(delta: float, algorithm: str) -> float:
    if delta == 0.0:
        raise InvalidPrivacyParameter(
            f"{algorithm!r} is a Gaussian mechanism with an (ε, δ) guarantee: delta must "
            "be > 0, got 0"
        )
    return delta


def _analytic_z(epsilon: float, delta: float) -> float:
    return float(analytic_gaussian_noise_multiplier(epsilon, delta))


def _noise_moments(d: int, epsilon: float, delta: float, sensitivity: float):
    """(E‖κ‖, E‖κ‖²) of the output noise dperm adds for ℓ2 sensitivity Δ:
    Gamma-norm (δ = 0; ‖κ‖ ~ Gamma(d, Δ/ε)) or analytic Gaussian (δ > 0)."""
    if delta == 0.0:
        s = sensitivity / epsilon
        return d * s, d * (d + 1) * s * s
    sigma = _analytic_z(epsilon, delta) * sensitivity
    return math.sqrt(d) * sigma, d * sigma * sigma


def _e_norm_gaussian(d: int) -> float:
    """E‖g‖₂ = √2 Γ((d+1)/2)/Γ(d/2) for g ~ N(0, I_d)."""
    return math.sqrt(2.0) * math.exp(math.lgamma((d + 1) / 2.0) - math.lgamma(d / 2.0))


def _output_noise_cost(m1: float, m2: float, lip: float, beta, lam: float) -> float:
    """Fact (ii): E[J(θ+κ)] − E[J(θ)] for independent zero-mean κ."""
    lip_form = lip * m1 + 0.5 * lam * m2
    if beta is None:
        return lip_form
    return min(0.5 * (beta + lam) * m2, lip_form)


def _diagnostics(estimator) -> dict[str, Any]:
    """The diagnostics of one call of a fitted estimator (one-vs-rest problems
    share them: the first)."""
    dg = estimator.diagnostics_
    return dg[0] if isinstance(dg, list) else dg


def _n_coef(estimator) -> int:
    """d of the problem a fitted estimator solved (intercept column included)."""
    return int(np.atleast_2d(estimator.coef_).shape[1]) + int(bool(estimator.fit_intercept))
