"""The rows of multinomial output perturbation's default (issue #30, "one schedule").

With the softmax loss, ``alpha="auto"`` and the ℓ2 penalty, ``mechanism="output"``
fits on public transformations of the effective rows x̃ = (x, s):

1. the implicit intercept column s becomes s′ = min(s, :data:`OUTPUT_INTERCEPT_SCALE`·R)
   (R = ``data_norm``, s = ``intercept_scaling``): the released intercept coordinate
   θ_d is then multiplied by g = s′/s, so that ``intercept_`` = θ_d·s as for every
   other mechanism (post-processing of the release: free);
2. the rows (intercept included) are clipped to r = f(ε)·√(R² + s′²),
   f = :func:`~dperm.estimators._auto.output_clip_fraction`, and output perturbation
   runs with the public bound r: L = √2·r, Δ₂ = 2L/(nΛ), Λ the output rule at r
   (Chaudhuri, Monteleoni & Sarwate 2011, Thm 6; analytic Gaussian noise, Balle &
   Wang 2018).

Both are functions of public inputs (ε, R, s) only; f = 1 (ε ≥ 25) leaves the rows
and the intercept column as they are.  A numeric Λ or another penalty keeps them too
(the user's Λ was chosen for them).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..design import as_design
from ..losses.softmax import Softmax
from ._auto import OUTPUT_INTERCEPT_SCALE, output_clip_fraction

__all__ = ["output_rows", "scale_intercept"]


def output_rows(estimator, loss, X, epsilon: float):
    """(X′, r, g): the Design to fit, its public row bound r (None: ``data_norm_``,
    unchanged) and the factor g of the intercept coordinate (module docstring)."""
    f = output_clip_fraction(epsilon)
    default = isinstance(estimator.alpha, str) and estimator.penalty == "l2"
    if not (isinstance(loss, Softmax) and default and f < 1.0):
        return X, None, 1.0
    g = 1.0
    s = X.intercept_scaling
    if estimator.fit_intercept and s is not None:
        s_new = min(s, OUTPUT_INTERCEPT_SCALE * float(estimator.data_norm))
        if s_new < s:  # the raw rows, the estimator's clipping, the new column: no copy
            X = as_design(X.X, float(estimator.data_norm), intercept_scaling=s_new, warn=False)
            g = s_new / s
    r = f * float(X.bound)
    return as_design(X, r, warn=False), r, g  # a per-row scale; counted in n_clipped


def scale_intercept(res, g: float):
    """``res`` with the intercept coordinate θ_d (last row) multiplied by g."""
    if g == 1.0:
        return res
    theta = np.array(res.theta, dtype=np.float64)
    theta[-1] *= g  # θ_d·(g·s) = (g·θ_d)·s
    return dataclasses.replace(res, theta=theta)
