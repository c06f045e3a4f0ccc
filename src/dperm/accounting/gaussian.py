"""Calibration of the (unsampled, single-release) Gaussian mechanism.

Noise multipliers are per unit ℓ2 sensitivity: the mechanism releases
f(D) + N(0, (σ Δ₂)² I).

* :func:`classical_gaussian_noise_multiplier` — σ = √(2 ln(1.25/δ))/ε
  (Dwork & Roth 2014, Theorem A.1; valid only for ε < 1).
* :func:`gaussian_delta` — the exact privacy profile δ(ε) of the Gaussian
  mechanism (Balle & Wang 2018, "Improving the Gaussian Mechanism for
  Differential Privacy: Analytical Calibration and Optimal Denoising",
  Theorem 8).
* :func:`analytic_gaussian_noise_multiplier` — the smallest σ with
  δ(σ) ≤ δ (Balle & Wang 2018, Theorem 8 / Algorithm 1, solved by bisection on
  the exact formula rather than their closed-form search).
* :func:`gaussian_epsilon` — the smallest ε with δ(ε) ≤ δ for a given σ.
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr

from .._validation import check_delta, check_epsilon, check_nonnegative, check_positive
from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "analytic_gaussian_noise_multiplier",
    "classical_gaussian_noise_multiplier",
    "gaussian_delta",
    "gaussian_epsilon",
]


def _log_gaussian_delta(sigma: float, eps: float) -> float:
    """log δ(ε) of the Gaussian mechanism with noise multiplier σ > 0 (Balle &
    Wang 2018, Theorem 8): δ = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ), computed
    as log Φ(a) + log1p(−exp(ε + log Φ(b) − log Φ(a))) with scipy's log_ndtr."""
    la = float(log_ndtr(1.0 / (2.0 * sigma) - eps * sigma))
    lb = eps + float(log_ndtr(-1.0 / (2.0 * sigma) - eps * sigma))
    if lb >= la:  # rounding (only for εσ² ≳ 1e16): fall back to the bound δ ≤ Φ(a)
        return la
    return la + math.log1p(-math.exp(lb - la))


def gaussian_delta(noise_multiplier: float, epsilon: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism (tight privacy profile).

    Balle & Wang (2018), Theorem 8: the Gaussian mechanism with noise
    N(0, (σΔ₂)²) is (ε, δ)-DP if and only if

        δ ≥ Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ).

    Parameters
    ----------
    noise_multiplier : float
        σ ≥ 0 (σ = 0 gives δ = 1 for every finite ε).
    epsilon : float
        ε ≥ 0 (∞ gives δ = 0).

    Returns
    -------
    float
        The smallest δ in [0, 1] for which the mechanism is (ε, δ)-DP.

    Raises
    ------
    InvalidPrivacyParameter
        If σ or ε is negative, NaN or not a real number.
    """
    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    eps = check_nonnegative(epsilon, "epsilon", allow_inf=True)
    if math.isinf(eps):
        return 0.0
    if sigma == 0.0:
        return 1.0
    return min(1.0, max(0.0, math.exp(_log_gaussian_delta(sigma, eps))))


def classical_gaussian_noise_multiplier(epsilon: float, delta: float) -> float:
    """σ = √(2 ln(1.25/δ))/ε of the classical Gaussian mechanism.

    Dwork & Roth (2014), *The Algorithmic Foundations of Differential
    Privacy*, Theorem A.1: for ε ∈ (0, 1), Gaussian noise with this σ (per unit
    ℓ2 sensitivity) gives (ε, δ)-DP.  The theorem does not cover ε ≥ 1; use
    :func:`analytic_gaussian_noise_multiplier` there (it is also smaller for
    every ε).

    Parameters
    ----------
    epsilon : float
        In (0, 1).
    delta : float
        In (0, 1).

    Returns
    -------
    float
        The noise multiplier σ (per unit ℓ2 sensitivity) of the theorem.

    Raises
    ------
    InvalidPrivacyParameter
        If ε ∉ (0, 1) or δ ∉ (0, 1).
    """
    eps = check_epsilon(epsilon)
    if eps >= 1.0:
        raise InvalidPrivacyParameter(
            "epsilon must be < 1 for the classical Gaussian mechanism (Dwork & Roth "
            f"Theorem A.1), got {epsilon!r}; use analytic_gaussian_noise_multiplier"
        )
    d = check_delta(delta, allow_zero=False)
    return math.sqrt(2.0 * math.log(1.25 / d)) / eps


def analytic_gaussian_noise_multiplier(epsilon: float, delta: float, tol: float = 1e-12) -> float:
    """Smallest σ for which the Gaussian mechanism is (ε, δ)-DP (analytic Gaussian).

    Balle & Wang (2018), Theorem 8 and Algorithm 1: δ(σ) (see
    :func:`gaussian_delta`) decreases in σ; this function brackets the root of
    δ(σ) = δ and bisects on log σ until the bracket's relative width is below
    ``tol``, returning the upper end, so that δ(σ_returned) ≤ δ always holds
    and σ_returned exceeds the exact value by at most a factor (1 + tol).

    Parameters
    ----------
    epsilon : float
        ε > 0, finite.
    delta : float
        δ in (0, 1).
    tol : float, default 1e-12
        Relative tolerance on σ, in (0, 0.1].

    Returns
    -------
    float
        σ > 0, noise standard deviation per unit ℓ2 sensitivity.

    Raises
    ------
    InvalidPrivacyParameter
        For ε, δ or tol out of range.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=False)
    tol = check_positive(tol, "tol")
    if tol > 0.1:
        raise InvalidPrivacyParameter(f"tol must be ≤ 0.1, got {tol!r}")
    log_d = math.log(d)

    def meets(s: float) -> bool:
        return _log_gaussian_delta(s, eps) <= log_d

    # classical-style starting guess, then expand a bracket [lo (fails), hi (meets)]
    guess = max(math.sqrt(2.0 * math.log(1.25 / d)) / eps, 1e-8)
    lo, hi = guess, guess
    while meets(lo):
        lo /= 2.0
        if lo < 1e-300:
            return lo  # pragma: no cover - δ(σ) → 1 as σ → 0, so unreachable
    while not meets(hi):
        hi *= 2.0
        if hi > 1e300:  # pragma: no cover
            raise InvalidPrivacyParameter(f"no σ meets (epsilon={eps}, delta={d})")
    hi = max(hi, lo)
    for _ in range(2000):
        if hi - lo <= tol * hi:
            break
        mid = math.sqrt(lo * hi) if hi / lo > 4.0 else 0.5 * (lo + hi)
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_epsilon(noise_multiplier: float, delta: float, tol: float = 1e-12) -> float:
    """Smallest ε for which the Gaussian mechanism with σ is (ε, δ)-DP.

    Inverts Balle & Wang (2018), Theorem 8 in ε (δ(ε) is decreasing) by
    bisection, returning the upper end of the final bracket (relative width
    ``tol``), so δ(ε_returned) ≤ δ.

    Parameters
    ----------
    noise_multiplier : float
        σ ≥ 0 (σ = 0 gives ∞).
    delta : float
        δ in (0, 1).
    tol : float, default 1e-12

    Returns
    -------
    float
        ε ≥ 0.
    """
    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    d = check_delta(delta, allow_zero=False)
    tol = check_positive(tol, "tol")
    if sigma == 0.0:
        return math.inf
    log_d = math.log(d)
    if _log_gaussian_delta(sigma, 0.0) <= log_d:
        return 0.0
    lo, hi = 0.0, 1.0
    while _log_gaussian_delta(sigma, hi) > log_d:
        lo, hi = hi, 2.0 * hi
    for _ in range(2000):
        if hi - lo <= tol * hi:
            break
        mid = 0.5 * (lo + hi)
        if _log_gaussian_delta(sigma, mid) <= log_d:
            hi = mid
        else:
            lo = mid
    return hi
