"""The Gaussian mechanism: additive isotropic normal noise.

Releasing ``f(D) + N(0, σ² I)`` for a function with ℓ2 sensitivity
``Δ₂ = sup_{D ~ D'} ‖f(D) − f(D')‖₂`` is the event
``Gaussian(noise_multiplier=σ/Δ₂)`` of :mod:`dperm.accounting.events`; the
accountants turn it into (ε, δ).  For a single release the exact (ε, δ)
curve is that of Balle & Wang (2018, "Improving the Gaussian mechanism for
differential privacy", Theorem 8); the classical calibration
σ = Δ₂ √(2 ln(1.25/δ))/ε for ε < 1 is Dwork & Roth (2014, Theorem A.1).
The neighbouring relation is whatever relation ``Δ₂`` was computed for.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._rng import RandomState, check_random_state
from .._validation import check_nonnegative, check_positive, float_array
from ..accounting.events import Gaussian
from ..exceptions import InvalidDataError, InvalidPrivacyParameter

__all__ = ["gaussian_event", "gaussian_mechanism", "gaussian_noise"]


def _check_shape(shape) -> tuple[int, ...]:
    """``shape`` (an int or a tuple of ints ≥ 0) as a tuple; InvalidDataError otherwise."""
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        out = tuple(shape)
    except TypeError:
        raise InvalidDataError(
            f"shape must be an int or a tuple of ints, got {type(shape).__name__}: {shape!r}"
        ) from None
    for s in out:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
            raise InvalidDataError(f"shape must hold integers ≥ 0, got {shape!r}")
    return tuple(int(s) for s in out)


def _noise_arguments(scale, name: str, shape, rng: RandomState):
    """(scale, shape, generator) of a noise draw, checked in that order: ``scale``
    (called ``name``) a finite float ≥ 0, ``shape`` a valid shape."""
    return check_nonnegative(scale, name), _check_shape(shape), check_random_state(rng)


def gaussian_noise(shape, sigma: float, rng: RandomState) -> np.ndarray:
    """Draw i.i.d. N(0, σ²) noise.

    Parameters
    ----------
    shape : int or tuple of int
        Shape of the returned array.
    sigma : float ≥ 0
        Standard deviation (in the units of the released quantity).  σ = 0
        returns zeros (no privacy).
    rng : numpy.random.Generator (or int / None, see :func:`dperm._rng.check_random_state`)

    Returns
    -------
    ndarray of float64 with the given shape

    Notes
    -----
    Added to a function of ℓ2 sensitivity Δ₂ this is the event
    ``Gaussian(noise_multiplier=sigma/Δ₂)`` (see :func:`gaussian_event`).

    Raises
    ------
    InvalidPrivacyParameter
        If ``sigma`` is negative, NaN, infinite or not a number.
    InvalidDataError
        If ``shape`` is not a valid shape.
    """
    sigma, shape, gen = _noise_arguments(sigma, "sigma", shape, rng)
    with np.errstate(over="ignore"):
        out = sigma * gen.standard_normal(shape)
    if not np.all(np.isfinite(out)):
        raise InvalidPrivacyParameter(
            f"sigma={sigma!r} is too large: the Gaussian noise overflows float64 "
            "(ε too small to calibrate)"
        )
    return out


def gaussian_event(sigma: float, sensitivity: float) -> Gaussian:
    """The event of adding N(0, σ² I) to a function of ℓ2 sensitivity ``sensitivity``:
    ``Gaussian(noise_multiplier=sigma/sensitivity)``.

    Raises
    ------
    InvalidPrivacyParameter
    """
    sigma = check_nonnegative(sigma, "sigma")
    sensitivity = check_positive(sensitivity, "sensitivity")
    return Gaussian(noise_multiplier=sigma / sensitivity)


def gaussian_mechanism(
    value, *, sensitivity: float, noise_multiplier: float, rng: RandomState
) -> tuple[np.ndarray, Gaussian]:
    """Release ``value + N(0, (noise_multiplier · sensitivity)² I)``.

    Parameters
    ----------
    value : array-like of float
        The exact answer f(D) (any shape).
    sensitivity : float > 0
        Public ℓ2 sensitivity Δ₂ of f.
    noise_multiplier : float ≥ 0
        σ/Δ₂.
    rng : numpy.random.Generator

    Returns
    -------
    released : ndarray of float64, same shape as ``value``
    event : Gaussian
        ``Gaussian(noise_multiplier)`` — hand it to an accountant.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``sensitivity`` or ``noise_multiplier``.
    InvalidDataError
        If ``value`` is not finite numeric data.
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    noise_multiplier = check_nonnegative(noise_multiplier, "noise_multiplier")
    v = _finite_array(value)
    out = v + gaussian_noise(v.shape, noise_multiplier * sensitivity, rng)
    return out, Gaussian(noise_multiplier=noise_multiplier)


def _finite_array(value, *, non_empty: bool = False) -> np.ndarray:
    """``value`` as a float64 array of finite numbers (at least one if ``non_empty``);
    InvalidDataError otherwise."""
    v = float_array(value, "value")
    if non_empty and v.size == 0:
        raise InvalidDataError("value must hold at least one number, got an empty array")
    if not np.all(np.isfinite(v)):
        raise InvalidDataError("value contains NaN or infinite entries")
    return v
