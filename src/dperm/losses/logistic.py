"""Logistic loss φ(z, y) = log(1 + exp(−y z)), labels y ∈ {−1, +1}."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .base import GLMLoss, _check_data_norm

__all__ = ["Logistic"]


class Logistic(GLMLoss):
    """Logistic loss for binary classification.

    φ(z, y) = log(1 + e^{−yz});  φ' = −y σ(−yz) so |φ'| ≤ 1;  φ'' = σ(z)σ(−z) ≤ 1/4.

    Hence over rows with ‖x‖ ≤ R: Lipschitz L = R and smoothness β = R²/4
    (Chaudhuri, Monteleoni, Sarwate 2011, Section 3.4.1, c = 1/4).
    """

    name = "logistic"
    smooth = True
    classification = True
    curvature = 0.25

    def pointwise(self, z, y):
        return np.logaddexp(0.0, -y * z)

    def derivative(self, z, y):
        return -y * expit(-y * z)

    def value_and_derivative(self, z, y):
        """(log(1 + e^{−t}), −y σ(−t)) with t = yz, from one exponential e^{−|t|}
        (the same values as ``pointwise`` and ``derivative`` to rounding)."""
        t = y * z
        e = np.exp(-np.abs(t))
        value = np.log1p(e)
        value += np.maximum(-t, 0.0)
        # σ(−t) = 1/(1 + e^{t}): e/(1 + e) for t ≥ 0, 1/(1 + e) for t < 0
        sig = np.where(t >= 0.0, e, 1.0)
        sig /= 1.0 + e
        sig *= -y
        return value, sig

    def second_derivative(self, z, y):
        p = expit(z)
        return p * (1.0 - p)

    def lipschitz(self, data_norm, **bounds):
        """L = data_norm (|φ'| ≤ 1)."""
        return _check_data_norm(data_norm)

    def smoothness(self, data_norm, **bounds):
        """β = data_norm² / 4 (|φ''| ≤ 1/4)."""
        return _check_data_norm(data_norm) ** 2 / 4.0
