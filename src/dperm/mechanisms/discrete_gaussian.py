"""The discrete Gaussian mechanism with an exact sampler, and ``secure_release``.

Floating-point Gaussian or Laplace samplers leak through the low-order bits
of their outputs (Mironov 2012, CCS; see :mod:`dperm.mechanisms.snapping`).
The discrete Gaussian avoids floating point altogether (Canonne, Kamath,
Steinke 2020, "The discrete Gaussian for differential privacy", NeurIPS):

* the release is put on a grid g (a power of two): k = round(f(D)/g) ∈ Z^d;
* integer noise Z ~ N_Z(0, σ²)^d, P[Z = z] ∝ exp(−z²/(2σ²)), is drawn *exactly*
  from uniformly random integers (CKS Algorithms 1–3: Bernoulli(exp(−γ)) by
  Taylor-series rejection, discrete Laplace by geometric sampling, discrete
  Gaussian by rejection from the discrete Laplace) with rational arithmetic
  only;
* the output (k + Z)·g is an exact multiple of g.

Privacy (CKS Proposition 5 and Theorem 14): for integer vectors μ, ν,
D_α(N_Z(μ, σ²I) ‖ N_Z(ν, σ²I)) ≤ α‖μ − ν‖²/(2σ²), so the release is
ρ-zCDP with ρ = Δ_Z²/(2σ²), Δ_Z the ℓ2 sensitivity of k.  Rounding to the grid
can move each coordinate by ≤ 1/2 on each side, hence
Δ_Z ≤ Δ₂/g + √d ("the sensitivity rounded up to the grid"; the √d term is
below 1% of the total with the default grid).  ρ-zCDP implies (ε, δ)-DP with
δ = min_{α>1} exp((α−1)(αρ − ε)) / (α−1) · (1 − 1/α)^α (CKS Corollary 13);
:func:`discrete_gaussian_sigma` inverts this exactly (bisection).

The event returned is ``EpsilonDelta(epsilon, delta)`` — valid for every
accountant.  (The Rényi curve is that of a continuous Gaussian with
noise multiplier σ/Δ_Z; it is reported in the diagnostics for RDP users.)
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np

from .._rng import RandomState, check_random_state
from .._validation import check_delta, check_epsilon, check_nonnegative, check_positive
from ..accounting.events import DpEvent, EpsilonDelta
from ..exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError
from .gaussian import _finite_array
from .snapping import next_power_of_two, snapping_mechanism

__all__ = [
    "SecureRelease",
    "discrete_gaussian_delta",
    "discrete_gaussian_mechanism",
    "discrete_gaussian_sigma",
    "sample_bernoulli_exp",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "secure_release",
    "zcdp_delta",
]


# ------------------------------------------------------------------ exact sampling
class _IntSource:
    """Uniform random integers from a numpy Generator, exactly (rejection on
    random bits), with Python integers of any size."""

    def __init__(self, gen: np.random.Generator):
        self._gen = gen
        self._words: list[int] = []
        self._buf = 0
        self._nbits = 0

    def bits(self, k: int) -> int:
        while self._nbits < k:
            if not self._words:
                self._words = self._gen.integers(0, 2**62, size=64, dtype=np.int64).tolist()
            self._buf |= self._words.pop() << self._nbits
            self._nbits += 62
        r = self._buf & ((1 << k) - 1)
        self._buf >>= k
        self._nbits -= k
        return r

    def below(self, n: int) -> int:
        """Uniform on {0, …, n−1}."""
        if n == 1:
            return 0
        k = (n - 1).bit_length()
        while True:
            r = self.bits(k)
            if r < n:
                return r

    def bernoulli(self, num: int, den: int) -> bool:
        """Bernoulli(num/den), 0 ≤ num ≤ den."""
        return self.below(den) < num

    def bernoulli_exp_le1(self, num: int, den: int) -> bool:
        """Bernoulli(exp(−γ)) for γ = num/den ∈ [0, 1] (CKS Algorithm 1, first part)."""
        k = 1
        while self.bernoulli(num, den * k):
            k += 1
        return bool(k & 1)

    def bernoulli_exp(self, num: int, den: int) -> bool:
        """Bernoulli(exp(−γ)) for γ = num/den ≥ 0 (CKS Algorithm 1)."""
        while num > den:
            if not self.bernoulli_exp_le1(1, 1):
                return False
            num -= den
        return self.bernoulli_exp_le1(num, den)

    def discrete_laplace(self, t: int) -> int:
        """P[X = x] ∝ exp(−|x|/t), t a positive integer (CKS Algorithm 2, s = 1)."""
        while True:
            u = self.below(t)
            if not self.bernoulli_exp(u, t):
                continue
            v = 0
            while self.bernoulli_exp(1, 1):
                v += 1
            x = u + t * v
            neg = self.bits(1)
            if neg and x == 0:
                continue
            return -x if neg else x

    def discrete_gaussian(self, p: int, q: int) -> int:
        """P[X = x] ∝ exp(−x²/(2σ²)), σ² = p/q (CKS Algorithm 3)."""
        t = math.isqrt(p // q) + 1
        den = 2 * p * q * t * t
        while True:
            y = self.discrete_laplace(t)
            a = abs(y) * t * q - p  # (|y| − σ²/t)·t·q
            if self.bernoulli_exp(a * a, den):
                return y


def _as_fraction(x, name: str) -> Fraction:
    if isinstance(x, Fraction):
        f = x
    else:
        v = check_positive(x, name)
        f = Fraction(v)  # exact value of the double
    if f <= 0:
        raise InvalidPrivacyParameter(f"{name} must be > 0, got {x!r}")
    return f


def sample_bernoulli_exp(gamma, size: int, rng: RandomState = None) -> np.ndarray:
    """Exact Bernoulli(exp(−γ)) draws, γ ≥ 0 rational (a float is taken as its
    exact binary value) — CKS 2020, Algorithm 1.  Returns a bool array."""
    if isinstance(gamma, Fraction):
        if gamma < 0:
            raise InvalidPrivacyParameter(f"gamma must be ≥ 0, got {gamma!r}")
        g = gamma
    else:
        g = Fraction(check_nonnegative(gamma, "gamma"))
    src = _IntSource(check_random_state(rng))
    n = _check_size(size)
    return np.array([src.bernoulli_exp(g.numerator, g.denominator) for _ in range(n)], dtype=bool)


def _check_size(size) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise InvalidDataError(f"size must be an integer ≥ 0, got {size!r}")
    return int(size)


def sample_discrete_laplace(scale: int, size: int, rng: RandomState = None) -> np.ndarray:
    """Exact draws from P[X = x] ∝ exp(−|x|/scale), ``scale`` a positive integer
    (CKS 2020, Algorithm 2).  Returns int64."""
    if isinstance(scale, bool) or not isinstance(scale, int | np.integer) or scale < 1:
        raise InvalidPrivacyParameter(f"scale must be a positive integer, got {scale!r}")
    src = _IntSource(check_random_state(rng))
    n = _check_size(size)
    return np.array([src.discrete_laplace(int(scale)) for _ in range(n)], dtype=np.int64)


def sample_discrete_gaussian(sigma2, size: int, rng: RandomState = None) -> np.ndarray:
    """Exact draws from the discrete Gaussian N_Z(0, σ²): P[X = x] ∝ exp(−x²/(2σ²)).

    Parameters
    ----------
    sigma2 : float, int or Fraction > 0
        σ² (a float is used at its exact binary value).
    size : int ≥ 0
    rng : Generator, int or None

    Returns
    -------
    ndarray of int64, shape (size,)

    Notes
    -----
    CKS 2020, Algorithm 3; only integer arithmetic and uniform integers, so
    the output distribution is exactly N_Z(0, σ²).  The loop is over noise
    draws (one per released coordinate), never over data rows.
    """
    s2 = _as_fraction(sigma2, "sigma2")
    src = _IntSource(check_random_state(rng))
    n = _check_size(size)
    p, q = s2.numerator, s2.denominator
    return np.array([src.discrete_gaussian(p, q) for _ in range(n)], dtype=np.int64)


# ------------------------------------------------------------------ privacy
def zcdp_delta(rho: float, epsilon: float) -> float:
    """Smallest δ such that ρ-zCDP implies (ε, δ)-DP (Canonne, Kamath, Steinke
    2020, Corollary 13):

        δ = min_{α>1} exp((α−1)(αρ − ε) + α·ln(1 − 1/α)) / (α − 1).

    The exponent is convex in α; its derivative (2α−1)ρ − ε + ln(1 − 1/α) is
    increasing, and the minimizer is found by bisection.
    """
    rho = float(rho)
    epsilon = float(epsilon)
    if rho < 0 or not math.isfinite(rho):
        raise InvalidPrivacyParameter(f"rho must be finite and ≥ 0, got {rho!r}")
    if rho == 0:
        return 0.0
    lo, hi = 1.0 + 1e-12, max((epsilon + 1.0) / (2.0 * rho) + 2.0, 2.0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        deriv = (2.0 * mid - 1.0) * rho - epsilon + math.log1p(-1.0 / mid)
        if deriv < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    a = 0.5 * (lo + hi)
    log_delta = (a - 1.0) * (a * rho - epsilon) + a * math.log1p(-1.0 / a) - math.log(a - 1.0)
    return min(1.0, math.exp(log_delta))


def discrete_gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """δ(ε) of N_Z(0, σ²) added to an integer vector of ℓ2 sensitivity Δ:
    ρ = Δ²/(2σ²)-zCDP (CKS Theorem 14) converted by CKS Corollary 13."""
    sigma = check_positive(sigma, "sigma")
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_epsilon(epsilon)
    return zcdp_delta(sensitivity**2 / (2.0 * sigma**2), epsilon)


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ (up to 1e-10 relative, rounded up) with
    :func:`discrete_gaussian_delta` (σ, ε, Δ) ≤ δ.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ (δ must be > 0) or sensitivity.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    sensitivity = check_positive(sensitivity, "sensitivity")
    lo, hi = 1e-3, 1.0
    while zcdp_delta(1.0 / (2.0 * hi * hi), epsilon) > delta:
        hi *= 2.0
        if hi > 1e12:  # pragma: no cover - unreachable for δ > 0
            raise InvalidPrivacyParameter(f"cannot calibrate for delta={delta!r}")
    while zcdp_delta(1.0 / (2.0 * lo * lo), epsilon) <= delta:
        lo /= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if zcdp_delta(1.0 / (2.0 * mid * mid), epsilon) <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-10 * hi:
            break
    return hi * sensitivity


def _default_grid(sensitivity: float, d: int) -> float:
    """Largest power of two ≤ Δ/(128·√d): the rounding term √d is then < 1%
    of Δ/g."""
    target = sensitivity / (128.0 * math.sqrt(d))
    g = next_power_of_two(target)
    return g if g == target else g / 2.0


def discrete_gaussian_mechanism(
    value,
    *,
    sensitivity: float,
    epsilon: float,
    delta: float,
    grid: float | None = None,
    rng: RandomState = None,
) -> tuple[np.ndarray, EpsilonDelta, dict[str, Any]]:
    """Release ``value`` on the grid with exact discrete Gaussian noise: (ε, δ)-DP.

    Parameters
    ----------
    value : float or array-like of shape (d,)
        The exact answer f(D).
    sensitivity : float > 0
        Public ℓ2 sensitivity Δ₂ of f.
    epsilon : float > 0
    delta : float in (0, 1)
    grid : float, optional
        A power of two; default the largest power of two ≤ Δ₂/(128√d).
    rng : Generator, int or None

    Returns
    -------
    released : ndarray of the shape of ``value``, every entry an exact integer
        multiple of the grid.
    event : EpsilonDelta
    diagnostics : dict
        ``grid``, ``sigma`` (noise standard parameter in the units of
        ``value``), ``sigma_grid`` (in grid units), ``sensitivity_grid`` (Δ_Z),
        ``noise_multiplier`` (σ/Δ_Z, for RDP), ``zcdp_rho``.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ, sensitivity or grid (not a power of two).
    InvalidDataError
        Non-finite ``value``, or a grid so fine that |f/g| ≥ 2⁵².
    """
    v = _finite_array(value, non_empty=True)
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    d = int(v.size)
    if grid is None:
        grid = _default_grid(sensitivity, d)
    grid = check_positive(grid, "grid")
    if next_power_of_two(grid) != grid:
        raise InvalidPrivacyParameter(f"grid must be a power of two, got {grid!r}")
    k = np.rint(v / grid)
    if np.any(np.abs(k) >= 2.0**52):
        raise InvalidDataError(
            f"grid={grid!r} is too fine for values of magnitude {np.max(np.abs(v)):.3g} "
            "(|value/grid| must stay below 2^52)"
        )
    sens_z = sensitivity / grid + math.sqrt(d)
    sigma_z = discrete_gaussian_sigma(epsilon, delta, sens_z)
    # σ² rounded *up* to a dyadic rational so the sampler's integers stay small
    s2 = Fraction(math.ceil(sigma_z * sigma_z * (1.0 + 2.0**-40) * 1024.0), 1024)
    gen = check_random_state(rng)
    z = sample_discrete_gaussian(s2, d, gen).reshape(v.shape)
    out = (k + z.astype(np.float64)) * grid
    sigma_used = math.sqrt(float(s2))
    diagnostics = {
        "mechanism": "discrete_gaussian",
        "grid": grid,
        "sigma": sigma_used * grid,
        "sigma_grid": sigma_used,
        "sensitivity_grid": sens_z,
        "noise_multiplier": sigma_used / sens_z,
        "zcdp_rho": sens_z**2 / (2.0 * float(s2)),
    }
    return out, EpsilonDelta(epsilon=epsilon, delta=delta), diagnostics


@dataclasses.dataclass(frozen=True)
class SecureRelease:
    """A floating-point-safe release.

    Attributes
    ----------
    value : ndarray
        The private release; every entry an integer multiple of ``grid``.
    event : DpEvent
    grid : float
    method : str
        "discrete_gaussian" or "snapping".
    diagnostics : dict
    """

    value: np.ndarray
    event: DpEvent
    grid: float
    method: str
    diagnostics: dict[str, Any]


def secure_release(
    value,
    *,
    sensitivity: float,
    epsilon: float,
    delta: float = 0.0,
    method: str | None = None,
    grid: float | None = None,
    bound: float | None = None,
    random_state: RandomState = None,
) -> SecureRelease:
    """Release a non-private vector (e.g. an exact ERM minimizer) on a grid,
    immune to the floating-point attack of Mironov (2012).

    This is how the perturbation algorithms compose with secure noise: output
    perturbation is "θ̂ = argmin of the regularized risk, release θ̂ + noise
    calibrated to the ℓ2 sensitivity of θ̂" (Chaudhuri, Monteleoni, Sarwate
    2011, Algorithm 1; Δ₂ = 2L/(nΛ), Corollary 8).  Computing θ̂ with
    :func:`dperm.solvers.minimize` and passing it here with that Δ₂ replaces
    the floating-point noise by an exact discrete one (see
    ``docs/auditing.md``).  The same holds for any Gaussian-mechanism release
    of a vector with known ℓ2 sensitivity.

    Parameters
    ----------
    value : float or array-like of shape (d,)
        The exact, non-private answer.
    sensitivity : float > 0
        Its public ℓ2 sensitivity (for snapping it bounds every coordinate).
    epsilon : float > 0
    delta : float in [0, 1)
        > 0 selects the discrete Gaussian by default, 0 the snapping mechanism.
    method : {"discrete_gaussian", "snapping"}, optional
    grid : float, optional
        Discrete Gaussian only: a power of two (default from the sensitivity).
        The snapping grid is set by the noise scale.
    bound : float, optional
        Snapping only (required there): public bound on |valueᵢ|.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    SecureRelease

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, UnknownNameError
    """
    delta = check_delta(delta)
    if method is None:
        method = "discrete_gaussian" if delta > 0 else "snapping"
    if method == "discrete_gaussian":
        out, event, diag = discrete_gaussian_mechanism(
            value,
            sensitivity=sensitivity,
            epsilon=epsilon,
            delta=delta,
            grid=grid,
            rng=random_state,
        )
    elif method == "snapping":
        if bound is None:
            raise InvalidPrivacyParameter(
                "the snapping mechanism needs a public bound on |value| (bound=None given)"
            )
        if grid is not None:
            raise InvalidPrivacyParameter(
                f"the snapping grid is set by the noise scale; got grid={grid!r}"
            )
        out, event, diag = snapping_mechanism(
            value, sensitivity=sensitivity, epsilon=epsilon, bound=bound, rng=random_state
        )
    else:
        raise UnknownNameError(f"method must be 'discrete_gaussian' or 'snapping', got {method!r}")
    return SecureRelease(
        value=out, event=event, grid=float(diag["grid"]), method=method, diagnostics=diag
    )
