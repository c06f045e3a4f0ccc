"""The misclassification (0-1) loss.

ℓ(θ; x, y) = 1[y·⟨θ, x⟩ ≤ 0] (a tie counts as an error), y ∈ {−1, +1}.  It is
not convex, not Lipschitz and has no useful gradient, so the gradient and
perturbation methods of dperm do not apply; but it is bounded in [0, 1], so the
exponential mechanism over a finite, public set of classifiers is ε-DP with
Δ = 1 (replace-one): :mod:`dperm.algorithms.zero_one_net`.
"""

from __future__ import annotations

import math

import numpy as np

from .base import GLMLoss

__all__ = ["ZeroOne"]


class ZeroOne(GLMLoss):
    """Misclassification loss φ(z, y) = 1[y z ≤ 0], labels in {−1, +1}.

    Bounded in [0, 1] (the range the exponential mechanism needs); its
    derivative is 0 almost everywhere and it has no finite Lipschitz constant.
    """

    name = "zero_one"
    smooth = False
    classification = True
    curvature = math.inf  # ∞ (not twice differentiable)

    def pointwise(self, z, y):
        """1[yᵢ zᵢ ≤ 0] elementwise (broadcasting z and y)."""
        return (np.asarray(y) * np.asarray(z) <= 0).astype(float)

    def derivative(self, z, y):
        """0 (a.e.): the 0-1 loss carries no gradient information."""
        return np.zeros(np.broadcast_shapes(np.shape(z), np.shape(y)))

    def second_derivative(self, z, y):
        """0 (a.e.)."""
        return np.zeros(np.broadcast_shapes(np.shape(z), np.shape(y)))

    def lipschitz(self, data_norm, **bounds):
        """∞: the 0-1 loss jumps at y z = 0."""
        return math.inf

    def smoothness(self, data_norm, **bounds):
        """∞."""
        return math.inf
