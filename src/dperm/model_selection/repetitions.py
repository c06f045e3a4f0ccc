"""Random numbers of runs and the privacy of "run K times, output the best".

A private hyperparameter search runs a private base mechanism Q (sample a
public configuration, fit it privately, score it privately) K times, K drawn
from a distribution independent of the data, and releases only the best run's
output.  Its privacy follows from Q's and the law of K:

* **Truncated negative binomial** K ~ D_{η,γ} (Papernot & Steinke 2022,
  "Hyperparameter Tuning with Rényi Differential Privacy", ICLR, Definition 1;
  η = 1 is the geometric law, η = 0 the logarithmic one):
  P[K = k] = (1 − γ)^k / (γ^{−η} − 1) · Π_{ℓ<k} (ℓ + η)/(ℓ + 1), k ≥ 1, for
  η ∈ (−1, ∞) \\ {0}, and (1 − γ)^k / (k log(1/γ)) for η = 0.
  RDP: :func:`rdp_truncated_negative_binomial` (their Theorem 2).
* **Poisson** K ~ Poisson(μ) (K = 0 releases nothing).  RDP:
  :func:`rdp_poisson_repetitions` (their Theorem 6).
* **Geometric with an (ε, δ)-DP base** (no useful RDP curve): the random
  stopping algorithm of Liu & Talwar (2019, "Private Selection from Private
  Candidates", STOC, Algorithm 2 with a cap of T runs);
  :func:`liu_talwar_guarantee` (their Theorem 3.4 for (ε, δ)-DP candidates).

All functions are pure; the neighbouring relation is whatever the base
mechanism's is (the theorems hold for any symmetric relation).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.special import gammaln

from .._validation import check_delta, check_epsilon, check_positive
from ..accounting.rdp import rdp_to_delta
from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "Poisson",
    "TruncatedNegativeBinomial",
    "liu_talwar_guarantee",
    "rdp_poisson_repetitions",
    "rdp_truncated_negative_binomial",
]


def _as_arrays(orders, rdp) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(orders, dtype=np.float64).ravel()
    r = np.asarray(rdp, dtype=np.float64).ravel()
    if a.shape != r.shape or a.size == 0:
        raise InvalidPrivacyParameter(
            f"orders and rdp must be non-empty and of the same length, got {a.size} and {r.size}"
        )
    if not np.all(np.isfinite(a)) or np.any(a <= 1.0):
        raise InvalidPrivacyParameter("orders must be finite and > 1")
    if np.any(np.isnan(r)) or np.any(r < 0):
        raise InvalidPrivacyParameter("rdp values must be ≥ 0 (∞ allowed), got a negative or NaN")
    return a, r


def _monotone_closure(orders: np.ndarray, values: np.ndarray) -> np.ndarray:
    """ε'(λ) ← min_{λ' ≥ λ} ε'(λ'): Rényi divergences are non-decreasing in the
    order (van Erven & Harremoës 2014, Theorem 3), so a bound at λ' bounds every
    λ ≤ λ'."""
    idx = np.argsort(orders)
    v = values[idx]
    closed = np.minimum.accumulate(v[::-1])[::-1]
    out = np.empty_like(values)
    out[idx] = closed
    return out


# ------------------------------------------------------------------ distributions
@dataclasses.dataclass(frozen=True)
class TruncatedNegativeBinomial:
    """K ~ D_{η,γ}, the truncated negative binomial law (Papernot & Steinke 2022,
    Definition 1); η = 1 is Geometric(γ) on {1, 2, …}, η = 0 the logarithmic law.

    Parameters
    ----------
    eta : float > −1
        Shape η.
    gamma : float in (0, 1)
        γ (the success probability of the underlying negative binomial).
    """

    eta: float
    gamma: float

    def __post_init__(self) -> None:
        eta = float(self.eta)
        if not math.isfinite(eta) or eta <= -1.0:
            raise InvalidPrivacyParameter(f"eta must be a finite number > -1, got {self.eta!r}")
        g = float(self.gamma)
        if not 0.0 < g < 1.0:
            raise InvalidPrivacyParameter(f"gamma must be in (0, 1), got {self.gamma!r}")
        object.__setattr__(self, "eta", eta)
        object.__setattr__(self, "gamma", g)

    @classmethod
    def from_mean(cls, eta: float, mean: float) -> TruncatedNegativeBinomial:
        """The law with shape η and E[K] = ``mean`` (> 1), γ found by bisection
        (E[K] is decreasing in γ)."""
        mean = check_positive(mean, "mean_runs")
        if not mean > 1.0 or math.isinf(mean):
            raise InvalidPrivacyParameter(f"mean_runs must be finite and > 1, got {mean!r}")
        cls(eta, 0.5)  # validates η
        if float(eta) == 1.0:
            return cls(1.0, 1.0 / mean)
        lo, hi = -745.0, math.log(1.0 - 1e-16)  # log γ
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if _tnb_mean(float(eta), math.exp(mid)) > mean:
                lo = mid
            else:
                hi = mid
        return cls(eta, math.exp(0.5 * (lo + hi)))

    def mean(self) -> float:
        """E[K]: η(1 − γ)/(γ(1 − γ^η)), or (1/γ − 1)/log(1/γ) for η = 0."""
        return _tnb_mean(self.eta, self.gamma)

    def logpmf(self, k) -> np.ndarray:
        """log P[K = k] for integers k (−∞ for k < 1)."""
        k = np.asarray(k, dtype=np.float64)
        kk = np.maximum(k, 1.0)
        eta, g = self.eta, self.gamma
        if eta == 0.0:
            out = kk * math.log1p(-g) - np.log(kk) - math.log(-math.log(g))
        else:
            # Π_{ℓ<k}(ℓ+η)/(ℓ+1) = Γ(k+η)/(Γ(η) k!); for η < 0 both Γ(η) and
            # γ^{−η} − 1 are negative, so their signs cancel (logs of |·|).
            norm = math.log(abs(math.expm1(-eta * math.log(g))))
            out = kk * math.log1p(-g) + gammaln(kk + eta) - gammaln(kk + 1.0) - gammaln(eta) - norm
        return np.where(k >= 1, out, -np.inf)

    def sample(self, rng: np.random.Generator) -> int:
        """One draw by inversion of the CDF (exact up to floating point)."""
        u = rng.random()
        total, start, chunk = 0.0, 1, 256
        while True:
            ks = np.arange(start, start + chunk)
            cdf = total + np.cumsum(np.exp(self.logpmf(ks)))
            hit = np.flatnonzero(cdf >= u)
            if hit.size:
                return int(ks[hit[0]])
            if cdf[-1] == total:  # numerically exhausted tail (u within rounding of 1)
                return int(ks[-1])
            total, start, chunk = float(cdf[-1]), start + chunk, min(2 * chunk, 1 << 16)

    def rdp(self, orders, rdp) -> np.ndarray:
        """RDP of the best-of-K selection (:func:`rdp_truncated_negative_binomial`)."""
        return rdp_truncated_negative_binomial(orders, rdp, self.eta, self.gamma)


def _tnb_mean(eta: float, gamma: float) -> float:
    if eta == 0.0:
        return (1.0 / gamma - 1.0) / -math.log(gamma)
    return eta * (1.0 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


@dataclasses.dataclass(frozen=True)
class Poisson:
    """K ~ Poisson(μ) (K = 0 is possible: then nothing is released)."""

    mu: float

    def __post_init__(self) -> None:
        mu = check_positive(self.mu, "mean_runs")
        object.__setattr__(self, "mu", mu)

    def mean(self) -> float:
        """E[K] = μ."""
        return self.mu

    def logpmf(self, k) -> np.ndarray:
        """log P[K = k] = k log μ − μ − log k!."""
        k = np.asarray(k, dtype=np.float64)
        out = np.maximum(k, 0) * math.log(self.mu) - self.mu - gammaln(np.maximum(k, 0) + 1.0)
        return np.where(k >= 0, out, -np.inf)

    def sample(self, rng: np.random.Generator) -> int:
        """One draw."""
        return int(rng.poisson(self.mu))

    def rdp(self, orders, rdp) -> np.ndarray:
        """RDP of the best-of-K selection (:func:`rdp_poisson_repetitions`)."""
        return rdp_poisson_repetitions(orders, rdp, self.mu)


# ------------------------------------------------------------------ RDP theorems
def rdp_truncated_negative_binomial(orders, rdp, eta: float, gamma: float) -> np.ndarray:
    """RDP of releasing the best of K ~ D_{η,γ} runs of Q.

    Papernot & Steinke (2022), Theorem 2: if Q is (λ, ε)- and (λ̂, ε̂)-RDP, the
    selection is (λ, ε')-RDP with

        ε' = ε + (1 + η)(1 − 1/λ̂) ε̂ + (1 + η) log(1/γ)/λ̂ + log E[K]/(λ − 1).

    The λ̂-terms are minimized over the given orders (one constant for every λ),
    then the monotonicity of RDP in the order is applied.  For an ε-DP base
    (ε̂ ≤ ε at every order) this tends to (2 + η)ε as λ, λ̂ → ∞: their
    Corollary 3, ((2 + η)ε, 0)-DP (3ε for the geometric law, Liu & Talwar's
    bound).

    Parameters
    ----------
    orders, rdp : array-like of shape (n_orders,)
        The base mechanism's RDP curve (orders > 1; ∞ allowed).
    eta : float > −1
    gamma : float in (0, 1)

    Returns
    -------
    ndarray of shape (n_orders,)
    """
    a, r = _as_arrays(orders, rdp)
    dist = TruncatedNegativeBinomial(eta, gamma)
    with np.errstate(invalid="ignore"):
        hat = (1.0 - 1.0 / a) * r - math.log(dist.gamma) / a
    c = (1.0 + dist.eta) * float(np.min(np.where(np.isnan(hat), np.inf, hat)))
    out = r + c + math.log(dist.mean()) / (a - 1.0)
    return _monotone_closure(a, np.where(np.isnan(out), np.inf, out))


def rdp_poisson_repetitions(orders, rdp, mu: float) -> np.ndarray:
    """RDP of releasing the best of K ~ Poisson(μ) runs of Q.

    Papernot & Steinke (2022), Theorem 6: if Q is (λ, ε)-RDP and (ε̂, δ̂)-DP with
    e^{ε̂} ≤ 1 + 1/(λ − 1), the selection is (λ, ε + μδ̂ + log(μ)/(λ − 1))-RDP.
    Here ε̂ = log(1 + 1/(λ − 1)) and δ̂ is Q's δ at ε̂ from its RDP curve
    (:func:`dperm.accounting.rdp_to_delta`, the improved conversion); then the
    monotonicity of RDP in the order is applied.

    Parameters
    ----------
    orders, rdp : array-like of shape (n_orders,)
    mu : float > 0

    Returns
    -------
    ndarray of shape (n_orders,)
    """
    a, r = _as_arrays(orders, rdp)
    mu = Poisson(mu).mu
    dhat = np.array([rdp_to_delta(a, r, math.log1p(1.0 / (lam - 1.0)))[0] for lam in a])
    out = r + mu * dhat + math.log(mu) / (a - 1.0)
    return _monotone_closure(a, np.where(np.isnan(out), np.inf, out))


# ------------------------------------------------------------- (ε, δ) candidates
def liu_talwar_guarantee(
    epsilon: float, delta: float, gamma: float, delta_cap: float
) -> tuple[float, float, int]:
    """(ε, δ) of random stopping with (ε, δ)-DP candidates.

    Liu & Talwar (2019), Theorem 3.4: run Q, stop with probability γ after each
    run, and in any case after T = ⌈log(1/δ₂)/γ⌉ runs; output the best.  If Q
    is (ε₁, δ₁)-DP the output is (3ε₁ + 3√(2δ₁), √(2δ₁)·T + δ₂)-DP.
    (The stopping cap makes the tail (1 − γ)^T ≤ e^{−γT} ≤ δ₂; rounding T up
    only enlarges that slack and the √(2δ₁)T term.)  Restated from the paper
    (arXiv 1811.07971, Section 3); the paper's text was not available to compare
    the constants with, so they are checked numerically instead on worst-case
    base mechanisms (``docs/model_selection.md``).

    Parameters
    ----------
    epsilon, delta : float
        ε₁ > 0 and δ₁ ∈ [0, 1) of one run.
    gamma : float in (0, 1]
        Stopping probability (E[K] ≈ 1/γ).
    delta_cap : float in (0, 1)
        δ₂.

    Returns
    -------
    (epsilon_total, delta_total, T)
    """
    eps = check_epsilon(epsilon, "epsilon")
    d1 = check_delta(delta, "delta", allow_zero=True)
    g = float(gamma)
    if not 0.0 < g <= 1.0:
        raise InvalidPrivacyParameter(f"gamma must be in (0, 1], got {gamma!r}")
    d2 = check_delta(delta_cap, "delta_cap", allow_zero=False)
    cap = max(1, math.ceil(math.log(1.0 / d2) / g))
    root = math.sqrt(2.0 * d1)
    return 3.0 * eps + 3.0 * root, root * cap + d2, cap
