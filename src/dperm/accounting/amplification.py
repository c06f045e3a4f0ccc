"""Amplification by subsampling for any mechanism, and the sampled-without-
replacement Gaussian's RDP.

**Lemma 15.4** (Di Wang, CS 325 Lecture 15, "DP-ERM III", Lemma 15.4; Balle,
Barthe, Gaboardi 2018, "Privacy amplification by subsampling: tight analyses
via couplings and divergences", Theorems 8 and 9).  Let A be (ε, δ)-DP and A′
run A on a random subset of the records.  Then A′ is (ε′, δ′)-DP with

    ε′ = ln(1 + γ(e^ε − 1)),      δ′ = γδ,

γ the sampling rate, *under the relation each bound is proven for*:

* sampling **without replacement** of exactly m of n records (γ = m/n), the
  lemma as the lecture states it: replace-one neighbours (n public), A
  (ε, δ)-DP under replace-one on datasets of size m (BBG18, Theorem 9: the
  coupling pairs a sample containing the replaced record with one where it is
  swapped for another record — replace-one neighbours of the same size);
* **Poisson** sampling with rate q (γ = q), the form the lecture cites from its
  Lecture 8: add/remove neighbours, A (ε, δ)-DP under add/remove (BBG18,
  Theorem 8);
* Poisson sampling under **replace-one** with a replace-one inner guarantee is
  *not* amplified in ε here: a replace-one guarantee says nothing about samples
  of different sizes, and an inner mechanism that reveals the sample size
  (e.g. it releases |S| together with randomized response on "a record equal
  to x is in S") has ratio 1 + (|S|/n)(e^ε − 1), above e^{ε′} whenever
  |S| > qn.  What does hold is joint convexity of the hockey-stick divergence
  (the record is in the sample with probability q, and otherwise both samples
  are equal): (ε, qδ).  :func:`amplified_event` returns that.

These rules cover the *generic* inner events ``PureEpsilon`` and
``EpsilonDelta``; Gaussian and Laplace inner events keep their tight
analyses (RDP / PLD of the subsampled mechanism).  Every accountant of dperm
applies :func:`amplified_event` before refusing a subsampled event.

**Sampling without replacement of a Gaussian** (the fixed-size batches of
DP-SGD).  Theorem 9 of Wang, Balle, Kasiviswanathan 2019 ("Subsampled Rényi
differential privacy and analytical moments accountant", AISTATS) bounds the
j ≥ 3 terms of the binomial expansion by 2γʲC(α, j)e^{(j−1)ε(j)}, which does
not decrease with σ — at γ = 0.05 and the orders needed for δ = 10⁻⁵ this
floor alone exceeds ε = 1 over 60 steps, so the calibration fell back to the
unsampled Gaussian (no amplification at all).  Their Theorem 27, the
strengthening for mechanisms whose pair of output laws is (P, Q) with
ternary |χ|ʲ-divergences B_j = E_Q[(P/Q − 1)^j], replaces it by

    (α − 1)ρ′(α) ≤ log(1 + γ²C(α,2)·min{4B₂, 2e^{ε(2)}}
                       + Σ_{j=3}^{α} γʲ C(α,j)·min{4·B̃_j, 2e^{(j−1)ε(j)}}),

with B̃_j = B_j for even j and √(B_{j−1}B_{j+1}) for odd j (Cauchy–Schwarz),
ε(j) = j/(2σ²) and, for the Gaussian, B₂ = e^{1/σ²} − 1.  The B_j are
computed here by quadrature of the non-negative integrand
φ(z)(e^{z/σ − 1/(2σ²)} − 1)^j on a uniform grid in log space (exponentially
accurate for this smooth, Gaussian-tailed integrand; a relative safety margin
of 10⁻⁹ is added), not by the alternating finite difference
Σ_k (−1)^{j−k}C(j,k)e^{k(k−1)/(2σ²)}, which cancels catastrophically for
large σ.  Orders above 256 (and σ < 0.1) keep Theorem 9's term, which is
always valid.  dp-accounting implements the same theorem
(``_compute_rdp_sample_wor_gaussian``); the tests compare the two.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln, logsumexp

from .._validation import check_delta, check_nonnegative, check_probability
from . import events as ev

__all__ = [
    "amplified_event",
    "subsampled_epsilon_delta",
    "wor_gaussian_log_terms",
]

#: largest j for which the ternary |χ|^j divergence is computed (beyond: Theorem 9's term)
_MAX_MOMENT = 256
_MIN_SIGMA = 0.1  # below, Theorem 9's term only (the min picks it anyway)
_SAFETY = 1e-9  # relative safety margin on the quadrature


def subsampled_epsilon_delta(epsilon: float, delta: float, rate: float) -> tuple[float, float]:
    """(ε′, δ′) = (ln(1 + γ(e^ε − 1)), γδ) of Lecture 15, Lemma 15.4 (module docstring).

    Parameters
    ----------
    epsilon : float ≥ 0 (``math.inf`` allowed: ε′ = ∞ unless γ = 0)
    delta : float in [0, 1]
    rate : float in [0, 1]
        γ = m/n (without replacement) or q (Poisson).

    Returns
    -------
    (float, float)

    Raises
    ------
    InvalidPrivacyParameter
        On a negative/NaN ε, δ outside [0, 1] or γ outside [0, 1].

    Examples
    --------
    >>> eps, delta = subsampled_epsilon_delta(1.0, 1e-6, 0.01)
    >>> round(eps, 6), delta
    (0.017037, 1e-08)
    """
    gamma = check_probability(rate, "rate", allow_zero=True)
    delta = 1.0 if delta == 1.0 else check_delta(delta)
    epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=True)
    if gamma == 0.0:
        return 0.0, 0.0
    if math.isinf(epsilon):
        return math.inf, gamma * delta
    return math.log1p(gamma * math.expm1(epsilon)), gamma * delta


def amplified_event(event: ev.DpEvent) -> ev.DpEvent | None:
    """The (ε′, δ′) leaf event of a subsampled generic event, or None.

    ``SampledWithoutReplacement(m, n, PureEpsilon | EpsilonDelta)`` (replace-one)
    and ``PoissonSampled(q, …)`` with an add/remove inner event get Lemma 15.4;
    ``PoissonSampled(q, …)`` with a replace-one inner event gets (ε, qδ) (joint
    convexity; module docstring).  Any other event (a Gaussian or Laplace
    inner event, a composition) returns None: the accountants' own rules
    apply.

    Returns
    -------
    PureEpsilon, EpsilonDelta or None
        Stated for the subsampled event's relation.
    """
    if isinstance(event, ev.SampledWithoutReplacement):
        rate = event.sample_size / event.population_size
        amplify = True
    elif isinstance(event, ev.PoissonSampled):
        rate = event.sampling_rate
        amplify = event.neighbouring == ev.ADD_REMOVE
    else:
        return None
    inner = event.event
    if not isinstance(inner, ev.PureEpsilon | ev.EpsilonDelta):
        return None
    delta = inner.delta if isinstance(inner, ev.EpsilonDelta) else 0.0
    if amplify or rate == 0.0:
        eps, delta = subsampled_epsilon_delta(inner.epsilon, delta, rate)
    else:
        eps, delta = inner.epsilon, rate * delta
    rel = event.neighbouring
    if delta == 0.0:
        return ev.PureEpsilon(eps, neighbouring=rel)
    return ev.EpsilonDelta(eps, min(1.0, delta), neighbouring=rel)


# ----------------------------------------------------- WBK19 Theorem 27 (Gaussian, WOR)
@functools.lru_cache(maxsize=256)
def _log_chi_moments(sigma: float) -> np.ndarray:
    """log B_j, j = 0 … _MAX_MOMENT + 1 (even j computed; odd j by Cauchy–Schwarz),
    B_j = E_{z~N(0,1)}[(e^{z/σ − 1/(2σ²)} − 1)^j] (module docstring)."""
    jmax = _MAX_MOMENT + 2
    h = 0.02
    z = np.arange(-40.0, jmax / sigma + 40.0, h)
    u = z / sigma - 0.5 / (sigma * sigma)
    with np.errstate(divide="ignore"):
        log_abs = np.log(np.abs(np.expm1(u)))
    log_phi = -0.5 * z * z - 0.5 * math.log(2.0 * math.pi)
    even = np.arange(0, jmax + 1, 2, dtype=np.float64)
    out = np.empty(jmax + 1)
    for k in range(0, even.size, 16):  # blocks of moments: bounded memory
        js = even[k : k + 16, None]
        with np.errstate(invalid="ignore"):
            vals = np.where(js == 0, 0.0, js * log_abs[None, :]) + log_phi[None, :]
        out[even[k : k + 16].astype(int)] = logsumexp(vals, axis=1) + math.log(h)
    out[0::2] += math.log1p(_SAFETY)
    out[1::2] = 0.5 * (out[0:-1:2] + out[2::2])  # √(B_{j−1}B_{j+1})
    out.setflags(write=False)
    return out


def wor_gaussian_log_terms(gamma: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """log of the Σ in WBK19 Theorem 27 (module docstring) for integer orders α ≥ 2:
    returns (α − 1)·ρ′(α), the cumulant bound of the Gaussian mechanism with noise
    multiplier σ on a sample of γn records drawn without replacement
    (replace-one).

    Parameters
    ----------
    gamma : float in (0, 1)
    sigma : float > 0
    alphas : ndarray of integers ≥ 2

    Returns
    -------
    ndarray, same shape as ``alphas``
    """
    amax = int(alphas.max())
    lg = math.log(gamma)
    j = np.arange(2, amax + 1, dtype=np.float64)[None, :]
    al = alphas[:, None]
    valid = j <= al
    aj = np.where(valid, al - j, 0.0)
    log_comb = gammaln(al + 1.0) - gammaln(j + 1.0) - gammaln(aj + 1.0)
    thm9 = math.log(2.0) + (j - 1.0) * j / (2.0 * sigma * sigma)
    log_b = np.full(j.shape, np.inf)
    if sigma >= _MIN_SIGMA:
        moments = _log_chi_moments(float(sigma))
        upto = min(amax, _MAX_MOMENT)
        log_b[0, : upto - 1] = moments[2 : upto + 1]
    e2 = 1.0 / (sigma * sigma)
    log_b[0, 0] = math.log(math.expm1(e2)) if e2 < 700 else e2  # B₂ = e^{1/σ²} − 1 exactly
    log_t = j * lg + log_comb + np.minimum(math.log(4.0) + log_b, thm9)
    log_t = np.where(valid, log_t, -np.inf)
    return np.logaddexp(0.0, logsumexp(log_t, axis=1))
