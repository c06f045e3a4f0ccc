"""Huber-smoothed hinge loss for a linear SVM (Chaudhuri, Monteleoni, Sarwate 2011, eq. (7))."""

from __future__ import annotations

import numpy as np

from .._validation import check_positive
from .base import GLMLoss, _check_data_norm

__all__ = ["HuberSVM"]


class HuberSVM(GLMLoss):
    """Huber hinge loss with smoothing parameter ``h`` > 0, labels in {−1, +1}.

    With margin m = y z:

    * φ = 0                       if m > 1 + h,
    * φ = (1 + h − m)² / (4h)     if |1 − m| ≤ h,
    * φ = 1 − m                   if m < 1 − h.

    |φ'| ≤ 1 and |φ''| ≤ 1/(2h), so over rows with ‖x‖ ≤ R: L = R, β = R²/(2h)
    (Chaudhuri et al. 2011, Section 3.4.2, c = 1/(2h)).  Note β is *not* L²:
    with the common h = 0.5, β = R².
    """

    name = "huber_svm"
    smooth = True
    classification = True

    def __init__(self, h: float = 0.5):
        self.h = check_positive(h, "h")

    def pointwise(self, z, y):
        m = y * z
        h = self.h
        return np.where(
            m > 1 + h, 0.0, np.where(m < 1 - h, 1.0 - m, (1.0 + h - m) ** 2 / (4.0 * h))
        )

    def derivative(self, z, y):
        m = y * z
        h = self.h
        dm = np.where(m > 1 + h, 0.0, np.where(m < 1 - h, -1.0, -(1.0 + h - m) / (2.0 * h)))
        return y * dm

    def second_derivative(self, z, y):
        m = y * z
        return np.where(np.abs(1.0 - m) <= self.h, 1.0 / (2.0 * self.h), 0.0)

    @property
    def curvature(self) -> float:
        return 1.0 / (2.0 * self.h)

    def lipschitz(self, data_norm, **bounds):
        """L = data_norm (|φ'| ≤ 1)."""
        return _check_data_norm(data_norm)

    def smoothness(self, data_norm, **bounds):
        """β = data_norm² / (2h)."""
        return _check_data_norm(data_norm) ** 2 / (2.0 * self.h)
