"""The grid of Rényi orders and the closed-form RDP curves of the Gaussian,
Laplace and pure-ε mechanisms (the per-event rules of :mod:`dperm.accounting.rdp`).

* Gaussian: α/(2σ²) (Mironov 2017, "Rényi Differential Privacy", Proposition 7);
* Laplace: Mironov 2017, Proposition 6;
* ε-DP: the sharp bound of Steinke 2024 ("Sharp RDP & zCDP from pure DP",
  differentialprivacy.org, Theorem 4).
"""

from __future__ import annotations

import math

import numpy as np

from .._docstrings import compose_doc
from .._validation import check_nonnegative, float_array
from ..exceptions import InvalidPrivacyParameter

__all__ = ["DEFAULT_ORDERS", "rdp_gaussian", "rdp_laplace", "rdp_pure_epsilon"]


def _default_orders() -> tuple[float, ...]:
    grid = {1.0 + x / 10.0 for x in range(1, 100)}  # 1.1 … 10.9 (dp-accounting's grid)
    grid |= {1.0 + x / 20.0 for x in range(1, 40, 2)}  # 1.05, 1.15, …, 2.95
    grid |= {float(a) for a in range(11, 64)}
    grid |= {72.0, 80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 320.0, 384.0, 512.0, 768.0, 1024.0}
    # large orders certify very small ε (e.g. ε ≲ 0.01 at δ = 1/n² for n ~ 10⁵)
    grid |= {1536.0, 2048.0, 3072.0, 4096.0, 6144.0, 8192.0}
    return tuple(sorted(grid))


#: Default RDP orders: a superset of dp-accounting's default grid (1.1 … 10.9
#: in steps of 0.1, 11 … 63, 128 … 1024) refined near 1 and between 64 and 1024,
#: extended to 8192 so that very small ε can be certified.
DEFAULT_ORDERS: tuple[float, ...] = _default_orders()

_TINY_SIGMA = 1e-150  # below this, 1/(2σ²) overflows; treated as σ = 0 (RDP = ∞)


def _check_orders(orders) -> np.ndarray:
    if orders is None:
        return np.asarray(DEFAULT_ORDERS, dtype=np.float64)
    message = f"orders must be a sequence of real numbers > 1, got {orders!r}"
    arr = float_array(orders, "orders", error=InvalidPrivacyParameter, message=message).ravel()
    if arr.size == 0:
        raise InvalidPrivacyParameter("orders must not be empty")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 1.0):
        raise InvalidPrivacyParameter(
            f"orders must be finite and > 1, got {arr[~(np.isfinite(arr) & (arr > 1))][:5]}"
        )
    return np.unique(arr)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


#: the orders a closed-form curve is evaluated at and what it returns, composed into
#: the docstring of each curve
_ORDERS_AND_CURVE = """
orders : array-like of float > 1

Returns
-------
ndarray of shape (n_orders,)
"""


def _noise_curve(noise_multiplier, orders, curve) -> np.ndarray:
    """The RDP curve ``curve(scale, orders)`` of a mechanism adding noise of scale
    ``noise_multiplier`` per unit sensitivity, after what the noise mechanisms share:
    the scale is checked ≥ 0, then the orders (:func:`_check_orders`); scale 0 (no
    noise) gives ∞ at every order."""
    scale = check_nonnegative(noise_multiplier, "noise_multiplier")
    a = _check_orders(orders)
    if scale == 0.0:
        return np.full(a.shape, np.inf)
    return curve(scale, a)


def _gaussian_curve(sigma: float, a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", divide="ignore"):
        return a / (2.0 * sigma * sigma)  # σ² may underflow to 0: ∞


@compose_doc(orders_and_curve=_ORDERS_AND_CURVE)
def rdp_gaussian(noise_multiplier: float, orders) -> np.ndarray:
    """RDP of the Gaussian mechanism: ρ(α) = α/(2σ²).

    Mironov (2017), Proposition 7 (Corollary 3 for sensitivity 1).

    Parameters
    ----------
    noise_multiplier : float
        σ ≥ 0 (noise standard deviation per unit ℓ2 sensitivity); σ = 0 gives ∞.
    {orders_and_curve}
    """
    return _noise_curve(noise_multiplier, orders, _gaussian_curve)


def _laplace_curve(b: float, a: np.ndarray) -> np.ndarray:
    eps = 1.0 / b
    x = (a - 1.0) / (2.0 * a - 1.0) * np.expm1(-(2.0 * a - 1.0) * eps)
    return np.minimum(eps, eps + np.log1p(x) / (a - 1.0))


@compose_doc(orders_and_curve=_ORDERS_AND_CURVE)
def rdp_laplace(noise_multiplier: float, orders) -> np.ndarray:
    """RDP of the Laplace mechanism with scale b per unit ℓ1 sensitivity.

    Mironov (2017), Proposition 6: for α > 1,
    ρ(α) = log( α/(2α−1) e^{(α−1)/b} + (α−1)/(2α−1) e^{−α/b} ) / (α−1),
    evaluated as 1/b + log1p((α−1)/(2α−1) · (e^{−(2α−1)/b} − 1)) / (α−1).

    Parameters
    ----------
    noise_multiplier : float
        b ≥ 0; b = 0 gives ∞.
    {orders_and_curve}
    """
    return _noise_curve(noise_multiplier, orders, _laplace_curve)


@compose_doc(orders_and_curve=_ORDERS_AND_CURVE)
def rdp_pure_epsilon(epsilon: float, orders) -> np.ndarray:
    """Sharp RDP of an ε-DP mechanism.

    Steinke (2024), "Sharp RDP & zCDP from pure DP" (differentialprivacy.org),
    Theorem 4: ρ(α) = ε − log((1 + e^{−ε}) / (1 + e^{−(2α−1)ε}))/(α − 1), the
    RDP of randomized response, tight.  The minimum with the weaker valid
    bounds ε (Mironov 2017, Proposition 3) and αε²/2 (Bun & Steinke 2016,
    Proposition 3.3) is taken as a guard against rounding.

    Parameters
    ----------
    epsilon : float
        ε ≥ 0 (∞ gives ∞).
    {orders_and_curve}
    """
    eps = check_nonnegative(epsilon, "epsilon", allow_inf=True)
    a = _check_orders(orders)
    if math.isinf(eps):
        return np.full(a.shape, np.inf)
    if eps == 0.0:
        return np.zeros(a.shape)
    sharp = eps - (math.log1p(math.exp(-eps)) - np.log1p(np.exp(-(2.0 * a - 1.0) * eps))) / (
        a - 1.0
    )
    return np.maximum(0.0, np.minimum(np.minimum(sharp, eps), a * eps * eps / 2.0))
