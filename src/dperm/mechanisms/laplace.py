"""The Laplace mechanism: additive i.i.d. Laplace noise.

Releasing ``f(D) + Lap(b)^k`` for a function with ℓ1 sensitivity
``Δ₁ = sup_{D ~ D'} ‖f(D) − f(D')‖₁`` is (Δ₁/b)-DP (Dwork, McSherry, Nissim,
Smith 2006, Proposition 1; Dwork & Roth 2014, Theorem 3.6).  The implied event
is ``Laplace(noise_multiplier=b/Δ₁)`` of :mod:`dperm.accounting.events`, i.e.
ε = 1/noise_multiplier.  The neighbouring relation is the one ``Δ₁`` was
computed for.
"""

from __future__ import annotations

import numpy as np

from .._rng import RandomState
from .._validation import check_epsilon, check_positive
from ..accounting.events import Laplace
from .gaussian import _finite_array, _noise_arguments

__all__ = ["laplace_event", "laplace_mechanism", "laplace_noise"]


def laplace_noise(shape, scale: float, rng: RandomState) -> np.ndarray:
    """Draw i.i.d. Laplace(0, b) noise, density exp(−|x|/b)/(2b).

    Parameters
    ----------
    shape : int or tuple of int
    scale : float ≥ 0
        The scale b (standard deviation √2·b).  b = 0 returns zeros.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of float64 with the given shape

    Notes
    -----
    Added to a function of ℓ1 sensitivity Δ₁ this is the event
    ``Laplace(noise_multiplier=scale/Δ₁)``, an (Δ₁/scale)-DP mechanism.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``scale`` (negative, NaN, infinite, not a number).
    InvalidDataError
        Bad ``shape``.
    """
    scale, shape, gen = _noise_arguments(scale, "scale", shape, rng)
    return gen.laplace(loc=0.0, scale=1.0, size=shape) * scale


def laplace_event(epsilon: float) -> Laplace:
    """The event of an ε-DP Laplace mechanism: ``Laplace(noise_multiplier=1/ε)``.

    Raises
    ------
    InvalidPrivacyParameter
    """
    return Laplace(noise_multiplier=1.0 / check_epsilon(epsilon))


def laplace_mechanism(
    value, *, sensitivity: float, epsilon: float, rng: RandomState
) -> tuple[np.ndarray, Laplace]:
    """Release ``value + Lap(Δ₁/ε)`` coordinatewise: ε-DP (Dwork et al. 2006, Prop. 1).

    Parameters
    ----------
    value : array-like of float
        The exact answer f(D).
    sensitivity : float > 0
        Public ℓ1 sensitivity Δ₁ of f.
    epsilon : float > 0
    rng : numpy.random.Generator

    Returns
    -------
    released : ndarray of float64
    event : Laplace
        ``Laplace(noise_multiplier=1/ε)``.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``sensitivity`` or ``epsilon``.
    InvalidDataError
        If ``value`` is not finite numeric data.
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_epsilon(epsilon)
    v = _finite_array(value)
    out = v + laplace_noise(v.shape, sensitivity / epsilon, rng)
    return out, Laplace(noise_multiplier=1.0 / epsilon)
