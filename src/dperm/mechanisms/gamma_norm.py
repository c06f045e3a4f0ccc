"""Gamma-norm ("ℓ2 Laplace") noise: density ∝ exp(−ε‖b‖₂/Δ₂) on R^d.

If ‖f(D) − f(D')‖₂ ≤ Δ₂ for neighbouring D, D', releasing ``f(D) + b`` with
density ν(b) ∝ exp(−ε‖b‖₂/Δ₂) is ε-DP: for every output z,
ν(z − f(D))/ν(z − f(D')) = exp(ε(‖z − f(D')‖ − ‖z − f(D)‖)/Δ₂) ≤ exp(ε) by the
triangle inequality.  The implied event is ``PureEpsilon(epsilon)``.

Sampling (as described with Algorithms 1 and 2 of Chaudhuri, Monteleoni,
Sarwate 2011, JMLR 12): in polar coordinates the density of the norm
r = ‖b‖ is ∝ r^{d−1} exp(−ε r/Δ₂), i.e. r ~ Gamma(shape=d, scale=Δ₂/ε), and the
direction is uniform on the unit sphere S^{d−1}, independent of r.  The paper's
two uses of it:

* Algorithm 1 (output perturbation), density ∝ exp(−(nΛε/2)‖b‖): Δ₂ = 2/(nΛ);
* Algorithm 2 (objective perturbation), density ∝ exp(−(ε'/2)‖b‖): Δ₂ = 2
  (the ℓ2 change of the un-normalized gradient Σ ℓ'(·) yᵢxᵢ when one row with
  |ℓ'| ≤ 1, ‖x‖ ≤ 1 is replaced).

``E‖b‖ = dΔ₂/ε``; ``E‖b‖² = d(d+1)(Δ₂/ε)²``.
"""

from __future__ import annotations

import math

import numpy as np

from .._rng import RandomState, check_random_state
from .._validation import check_count, check_epsilon, check_positive
from ..accounting.events import PureEpsilon
from ..exceptions import InvalidPrivacyParameter
from .gaussian import _finite_array

__all__ = ["gamma_norm_event", "gamma_norm_mechanism", "gamma_norm_noise", "uniform_direction"]


def uniform_direction(d: int, rng: RandomState) -> np.ndarray:
    """A unit vector uniform on the sphere S^{d−1} (a normalized standard normal
    vector; Muller 1959), shape (d,)."""
    d = check_count(d, "d")
    gen = check_random_state(rng)
    while True:  # a zero vector has probability 0; loop only guards the impossible
        g = gen.standard_normal(d)
        nrm = float(np.linalg.norm(g))
        if nrm > 0.0:
            return g / nrm


def gamma_norm_noise(d: int, epsilon: float, sensitivity: float, rng: RandomState) -> np.ndarray:
    """Draw b ∈ R^d with density ∝ exp(−ε‖b‖₂/Δ₂).

    ‖b‖ ~ Gamma(shape=d, scale=Δ₂/ε) and b/‖b‖ uniform on the sphere,
    independently (Chaudhuri, Monteleoni, Sarwate 2011, Algorithms 1 and 2).

    Parameters
    ----------
    d : int ≥ 1
        Dimension.
    epsilon : float > 0
        Privacy parameter ε of the release.
    sensitivity : float > 0
        ℓ2 sensitivity Δ₂ of the function the noise is added to.
    rng : numpy.random.Generator

    Returns
    -------
    b : ndarray of shape (d,)

    Notes
    -----
    Added to a function of ℓ2 sensitivity Δ₂, the release is ε-DP: event
    ``PureEpsilon(epsilon)`` (see the module docstring for the one-line proof).

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``d``, ``epsilon`` or ``sensitivity``, or an ε so small that the
        noise overflows float64.
    """
    d = check_count(d, "d")
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive(sensitivity, "sensitivity")
    gen = check_random_state(rng)
    scale = sensitivity / epsilon
    with np.errstate(over="ignore"):
        b = gen.gamma(shape=float(d), scale=scale) * uniform_direction(d, gen)
    if not (math.isfinite(scale) and np.all(np.isfinite(b))):
        # never release an inf/NaN model: ε this small cannot be calibrated in float64
        raise InvalidPrivacyParameter(
            f"epsilon={epsilon!r} is too small for sensitivity={sensitivity!r}: the "
            "Gamma-norm noise overflows float64"
        )
    return b


def gamma_norm_event(epsilon: float) -> PureEpsilon:
    """The event of a Gamma-norm release calibrated to ε: ``PureEpsilon(epsilon)``."""
    return PureEpsilon(epsilon=check_epsilon(epsilon))


def gamma_norm_mechanism(
    value, *, sensitivity: float, epsilon: float, rng: RandomState
) -> tuple[np.ndarray, PureEpsilon]:
    """Release ``value + b`` with b ~ density ∝ exp(−ε‖b‖₂/Δ₂): ε-DP.

    Parameters
    ----------
    value : array-like of shape (d,)
    sensitivity : float > 0
        Public ℓ2 sensitivity Δ₂.
    epsilon : float > 0
    rng : numpy.random.Generator

    Returns
    -------
    released : ndarray of shape (d,)
    event : PureEpsilon

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError
    """
    v = _finite_array(value).ravel()
    b = gamma_norm_noise(v.size, epsilon, sensitivity, rng)
    return v + b, PureEpsilon(epsilon=float(epsilon))
