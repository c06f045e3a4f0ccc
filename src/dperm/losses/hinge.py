"""Hinge loss φ(z, y) = max(0, 1 − yz): convex, Lipschitz, not smooth."""

from __future__ import annotations

import math

import numpy as np

from .base import GLMLoss, _check_data_norm

__all__ = ["Hinge"]


class Hinge(GLMLoss):
    """Hinge loss of the linear SVM, labels in {−1, +1}.

    |∂φ/∂z| ≤ 1, so L = data_norm; it is not differentiable at yz = 1 (β = ∞),
    so it suits gradient perturbation and Frank-Wolfe, not objective
    perturbation (which needs twice-differentiability).
    """

    name = "hinge"
    smooth = False
    classification = True
    curvature = math.inf

    def pointwise(self, z, y):
        return np.maximum(0.0, 1.0 - y * z)

    def derivative(self, z, y):
        return np.where(y * z < 1.0, -y, 0.0)

    def second_derivative(self, z, y):
        return np.zeros_like(np.asarray(z, dtype=float))

    def lipschitz(self, data_norm, **bounds):
        """L = data_norm."""
        return _check_data_norm(data_norm)

    def smoothness(self, data_norm, **bounds):
        """β = ∞ (not differentiable)."""
        _check_data_norm(data_norm)
        return math.inf
