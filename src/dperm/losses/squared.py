"""Squared loss φ(z, y) = (z − y)² / 2 for least squares with a label bound."""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_positive
from ..design import float_labels
from ..exceptions import InvalidPrivacyParameter, LabelError
from .base import ResidualLoss, _check_data_norm

__all__ = ["Squared"]


class Squared(ResidualLoss):
    """Squared loss (z − y)²/2 with |y| ≤ ``label_bound`` (a public bound).

    ∂φ/∂z = z − y and ∂²φ/∂z² = 1, so β = data_norm² (c = 1).  The gradient is
    bounded only on a bounded domain: for ‖θ‖ ≤ ``radius`` and ‖x‖ ≤ R,
    |z − y| ≤ R·radius + B, hence L = R (R·radius + B).  Algorithms that need L
    (all of them) therefore need a constraint radius — or clip the per-example
    gradient (DP-SGD), which needs no L.

    Parameters
    ----------
    label_bound : float, default=1.0
        B > 0 with |y| ≤ B for every label; labels outside raise LabelError.
    """

    name = "squared"

    def __init__(self, label_bound: float = 1.0):
        self.label_bound = check_positive(label_bound, "label_bound")

    def pointwise(self, z, y):
        r = z - y
        return 0.5 * r * r

    def derivative(self, z, y):
        return z - y

    def second_derivative(self, z, y):
        return np.ones_like(np.asarray(z, dtype=float))

    def check_labels(self, y):
        y = float_labels(y)
        over = int(np.count_nonzero(np.abs(y) > self.label_bound))
        if over:
            # the count, never the values: they are part of the private records
            raise LabelError(
                f"labels must satisfy |y| ≤ label_bound={self.label_bound:g}; {over} label(s) "
                "do not (clip y to the public bound first)"
            )
        return y

    def lipschitz(self, data_norm, *, radius: float | None = None, **bounds):
        """L = data_norm · (data_norm · radius + label_bound) over ‖θ‖ ≤ radius.

        Raises
        ------
        InvalidPrivacyParameter
            If ``radius`` is not given: the squared loss is not Lipschitz on
            an unbounded domain.
        """
        R = _check_data_norm(data_norm)
        if radius is None or not math.isfinite(radius):
            raise InvalidPrivacyParameter(
                "the squared loss is Lipschitz only on a bounded domain: pass radius "
                f"(a bound on ‖θ‖), got radius={radius!r}"
            )
        radius = check_positive(radius, "radius")
        return R * (R * radius + self.label_bound)
