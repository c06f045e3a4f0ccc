"""Pinball (quantile) loss; τ = 1/2 gives the absolute loss (median regression)."""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_probability
from ..exceptions import InvalidPrivacyParameter
from .base import GLMLoss, _check_data_norm

__all__ = ["Quantile"]


class Quantile(GLMLoss):
    """Pinball loss ρ_τ(y − z) = max(τ (y − z), (τ − 1)(y − z)), τ ∈ (0, 1).

    |∂φ/∂z| ≤ max(τ, 1 − τ), so L = max(τ, 1 − τ) · data_norm for any label;
    not differentiable at z = y (β = ∞): use gradient perturbation or
    Frank-Wolfe.  τ = 0.5 is half the absolute loss (median regression).
    """

    name = "quantile"
    smooth = False
    classification = False
    curvature = math.inf

    def __init__(self, quantile: float = 0.5):
        q = check_probability(quantile, "quantile")
        if q >= 1.0:
            raise InvalidPrivacyParameter(f"quantile must be in (0, 1), got {quantile!r}")
        self.quantile = q

    def pointwise(self, z, y):
        r = y - z
        return np.maximum(self.quantile * r, (self.quantile - 1.0) * r)

    def derivative(self, z, y):
        return np.where(y - z > 0, -self.quantile, 1.0 - self.quantile)

    def second_derivative(self, z, y):
        return np.zeros_like(np.asarray(z, dtype=float))

    def lipschitz(self, data_norm, **bounds):
        """L = max(τ, 1 − τ) · data_norm."""
        return max(self.quantile, 1.0 - self.quantile) * _check_data_norm(data_norm)

    def smoothness(self, data_norm, **bounds):
        """β = ∞."""
        _check_data_norm(data_norm)
        return math.inf
