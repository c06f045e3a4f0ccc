"""Huber loss for robust regression (Huber 1964), with threshold ``epsilon_h``."""

from __future__ import annotations

import numpy as np

from .._validation import check_positive
from .base import ResidualLoss, _check_data_norm

__all__ = ["Huber"]


class Huber(ResidualLoss):
    """Huber regression loss on the residual r = z − y with threshold h > 0.

    * φ = r²/2            if |r| ≤ h,
    * φ = h|r| − h²/2     otherwise.

    ∂φ/∂z = clip(r, −h, h), so |φ'| ≤ h for *every* label and
    0 ≤ ∂²φ/∂z² ≤ 1: over rows with ‖x‖ ≤ R, L = h·R and β = R² (c = 1),
    with no label bound and no constraint set needed (unlike the squared
    loss).  The threshold is a public hyperparameter in the units of y
    (scikit-learn's ``HuberRegressor`` calls it ``epsilon`` and scales it by
    a jointly fitted σ, which needs the data; here h is fixed).

    Parameters
    ----------
    h : float > 0, default=1.0
    """

    name = "huber"

    def __init__(self, h: float = 1.0):
        self.h = check_positive(h, "h")

    def pointwise(self, z, y):
        r = np.abs(np.asarray(z, dtype=float) - y)
        h = self.h
        return np.where(r <= h, 0.5 * r * r, h * r - 0.5 * h * h)

    def derivative(self, z, y):
        return np.clip(np.asarray(z, dtype=float) - y, -self.h, self.h)

    def second_derivative(self, z, y):
        return (np.abs(np.asarray(z, dtype=float) - y) <= self.h).astype(float)

    @property
    def margin_bound(self) -> float:
        """Public prior on the prediction scale R·‖θ*‖: 10·h (= 4B under the estimators'
        rule h = 0.4·label_bound B), in the units of y.  Objective perturbation's
        choice of Δ compares this prior with its noise (∝ L = hR); both scale with y,
        so the fit is the same in dollars or in $100,000 (issue #32: a prior fixed at
        :data:`~dperm.losses.MARGIN_BOUND` made a target in dollars fit R² < 0 where
        the same target in $100,000 fit 0.63).  Never used by a privacy proof."""
        return 10.0 * self.h

    def lipschitz(self, data_norm, **bounds):
        """L = h · data_norm (any label, any θ)."""
        return self.h * _check_data_norm(data_norm)
