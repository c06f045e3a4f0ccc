"""Noise primitives, each documented next to the privacy event it implies.

=====================================  ==========================================
function                               event it implies (for the accountants)
=====================================  ==========================================
:func:`gaussian_noise`                 ``Gaussian(sigma / sensitivity)``
:func:`gaussian_mechanism`             ``Gaussian(noise_multiplier)``
:func:`laplace_noise`                  ``Laplace(scale / sensitivity)``
:func:`laplace_mechanism`              ``Laplace(1 / epsilon)``, i.e. ε-DP
:func:`gamma_norm_noise`               ``PureEpsilon(epsilon)``
:func:`gamma_norm_mechanism`           ``PureEpsilon(epsilon)``
:func:`exponential_mechanism`          ``PureEpsilon(epsilon)``
:func:`snapping_mechanism`             ``PureEpsilon(epsilon)`` (floating-point safe)
:func:`discrete_gaussian_mechanism`    ``EpsilonDelta(epsilon, delta)`` (exact sampler)
:func:`secure_release`                 either of the two above, on a power-of-two grid
=====================================  ==========================================

Every function takes an explicit :class:`numpy.random.Generator` ``rng`` (an
int seed or ``None`` = OS entropy are accepted too, through
:func:`dperm._rng.check_random_state`); none touches numpy's global RNG.
"""

from .discrete_gaussian import (
    SecureRelease,
    discrete_gaussian_mechanism,
    sample_discrete_gaussian,
    secure_release,
)
from .exponential import (
    exponential_mechanism,
    exponential_mechanism_event,
    exponential_mechanism_log_probabilities,
)
from .gamma_norm import gamma_norm_event, gamma_norm_mechanism, gamma_norm_noise
from .gaussian import gaussian_event, gaussian_mechanism, gaussian_noise
from .laplace import laplace_event, laplace_mechanism, laplace_noise
from .snapping import snapping_mechanism

__all__ = [
    "SecureRelease",
    "discrete_gaussian_mechanism",
    "exponential_mechanism",
    "exponential_mechanism_event",
    "exponential_mechanism_log_probabilities",
    "gamma_norm_event",
    "gamma_norm_mechanism",
    "gamma_norm_noise",
    "gaussian_event",
    "gaussian_mechanism",
    "gaussian_noise",
    "laplace_event",
    "laplace_mechanism",
    "laplace_noise",
    "sample_discrete_gaussian",
    "secure_release",
    "snapping_mechanism",
]
