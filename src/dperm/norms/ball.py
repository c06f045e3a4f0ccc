"""A norm's unit ball: as a constraint (:class:`NormBall`), its Gaussian width,
and the adapter from the estimators' regularizers to a norm.

:func:`gaussian_width` gives w(B) = E sup_{θ ∈ B} ⟨g, θ⟩ of the unit ball of Ω
(= E Ω*(g)) or of its dual ball |P|(F) (= E Ω(g)), the quantity in
Kumar & Deisenroth's Theorems 1 and 4.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import integrate, stats

from .._rng import check_random_state
from .._validation import check_count, check_positive, check_probability
from ..constraints import Constraint
from ..exceptions import InvalidDataError, InvalidPrivacyParameter
from ..regularizers import L1
from .base import Norm
from .graph import GraphTVNorm
from .lp import L1Norm, LinfNorm

__all__ = ["GaussianWidth", "NormBall", "gaussian_width", "norm_from_regularizer"]


class NormBall(Constraint):
    """{θ : Ω(θ) ≤ radius} as a :class:`~dperm.constraints.Constraint`:
    ``lmo`` (Frank-Wolfe), ``contains``, ``l2_radius`` and ``project``.

    ``project`` uses the KKT form of the projection onto a norm ball,
    Π(v) = prox_{τΩ}(v) for the τ ≥ 0 with Ω(prox_{τΩ}(v)) = radius, found by
    bisection on τ to relative accuracy 1e-10.
    """

    def __init__(self, norm: Norm, radius: float):
        if not isinstance(norm, Norm):
            raise InvalidDataError(f"norm must be a dperm.norms.Norm, got {norm!r}")
        self.norm = norm.scaled(1.0)
        self.radius = check_positive(radius, "radius")

    def __repr__(self) -> str:
        return f"NormBall({self.norm!r}, radius={self.radius!r})"

    def lmo(self, g):
        return self.norm.lmo(g, self.radius)

    def contains(self, theta, tol: float = 1e-9) -> bool:
        return bool(self.norm.norm(theta) <= self.radius * (1 + tol))

    def project(self, theta):
        v = np.asarray(theta, dtype=float)
        if self.norm.norm(v) <= self.radius:
            return v.copy()
        lo, hi = 0.0, self.norm.dual_norm(v)  # prox_{hi Ω}(v) = 0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if self.norm.norm(self.norm.prox(v, mid)) > self.radius:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-12 * max(1.0, hi):
                break
        return self.norm.prox(v, hi)

    @property
    def l2_radius(self) -> float:
        return self.radius * self.norm.unit_ball_l2_radius()


# ----------------------------------------------------------------------------- width
@dataclasses.dataclass(frozen=True)
class GaussianWidth:
    """w(B) = E sup_{θ∈B}⟨g, θ⟩, g ~ N(0, I_d): ``value``, a confidence interval
    (``ci_low``, ``ci_high``; equal to ``value`` when exact) and ``exact``."""

    value: float
    ci_low: float
    ci_high: float
    exact: bool
    n_samples: int = 0


def _expected_max_abs_gaussian(d: int) -> float:
    """E max_j |g_j| = ∫₀^∞ 1 − (2Φ(t) − 1)^d dt (numerical quadrature, ~1e-10)."""

    def tail(t):
        return -np.expm1(d * np.log1p(-2.0 * stats.norm.sf(t)))

    val, _ = integrate.quad(tail, 0.0, np.inf, epsabs=1e-12, epsrel=1e-12, limit=200)
    return float(val)


def gaussian_width(
    norm: Norm,
    *,
    ball: str = "unit",
    n_samples: int = 2000,
    confidence: float = 0.95,
    random_state=None,
) -> GaussianWidth:
    """Gaussian width of the unit ball of Ω (``ball="unit"``: E Ω*(g)) or of the
    dual ball |P|(F) (``ball="dual"``: E Ω(g)).

    Exact for ℓ1 (unit ball: E‖g‖∞ by quadrature; dual ball: E‖g‖₁ = d√(2/π)),
    ℓ∞ (unit ball: d√(2/π); dual: E‖g‖∞) and the dual ball of graph total
    variation (:meth:`GraphTVNorm.dual_gaussian_width`); otherwise Monte Carlo
    with a normal-approximation confidence interval of level ``confidence``.

    Raises
    ------
    InvalidDataError
        ``ball`` not "unit"/"dual" or ``norm`` not a SubmodularNorm.
    """
    if not isinstance(norm, Norm):
        raise InvalidDataError(f"norm must be a dperm.norms.Norm, got {norm!r}")
    if ball not in ("unit", "dual"):
        raise InvalidDataError(f"ball must be 'unit' or 'dual', got {ball!r}")
    d = norm.d
    l1_like = type(norm) is L1Norm
    linf_like = type(norm) is LinfNorm
    if l1_like or linf_like:
        sup_linf = (ball == "unit") == l1_like  # sup over ℓ1 ball = ‖g‖∞
        w = _expected_max_abs_gaussian(d) if sup_linf else d * math.sqrt(2.0 / math.pi)
        return GaussianWidth(w, w, w, True)
    if ball == "dual" and isinstance(norm, GraphTVNorm):
        w = norm.dual_gaussian_width()
        return GaussianWidth(w, w, w, True)
    n_samples = check_count(n_samples, "n_samples")
    confidence = check_probability(confidence, "confidence")
    rng = check_random_state(random_state)
    g = rng.standard_normal((n_samples, d))
    f = norm.dual_norm if ball == "unit" else norm.norm
    vals = np.array([f(row) for row in g])
    mean = float(vals.mean())
    half = float(stats.norm.ppf(0.5 + confidence / 2) * vals.std(ddof=1) / math.sqrt(n_samples))
    return GaussianWidth(mean, mean - half, mean + half, False, n_samples)


def norm_from_regularizer(regularizer, d: int):
    """(Ω, weight) with r = weight·Ω for the regularizers the estimators build:
    a :class:`~dperm.regularizers.L1` ``alpha`` → (L1Norm(d), alpha); a
    :class:`SubmodularNorm` → (its unscaled copy, its alpha); None → None.

    Raises
    ------
    InvalidPrivacyParameter
        For a regularizer that is not a norm of this module (e.g. GroupL2).
    """
    if regularizer is None:
        return None
    if isinstance(regularizer, Norm):
        if regularizer.d != d:
            raise InvalidPrivacyParameter(f"the norm has d={regularizer.d}, the data {d}")
        return regularizer.scaled(1.0), regularizer.alpha
    if type(regularizer) is L1:
        return L1Norm(d), regularizer.alpha
    raise InvalidPrivacyParameter(
        f"regularizer {regularizer!r} is not a submodular norm; use penalty 'l1', "
        "'elasticnet', 'l2' or a dperm.norms.SubmodularNorm"
    )
