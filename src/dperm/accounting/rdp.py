"""Rényi differential privacy (RDP) accounting, a.k.a. the moments accountant.

An (α, ρ)-RDP mechanism has Rényi divergence of order α at most ρ between
its output distributions on any pair of neighbouring datasets (Mironov 2017,
"Rényi Differential Privacy", Definition 4).  RDP composes additively at every
order (Mironov 2017, Proposition 1), so the accountant keeps one number per
order on a fixed grid and converts to (ε, δ)-DP only when asked (Abadi et al.
2016, "Deep Learning with Differential Privacy", the moments accountant).

Per-event RDP (one ``functools.singledispatch`` rule per event type in
:func:`rdp_of`):

* ``Gaussian(σ)``: α/(2σ²) (Mironov 2017, Proposition 7).
* ``Laplace(b)``: Mironov 2017, Proposition 6 (closed form).
* ``PureEpsilon(ε)`` / ``EpsilonDelta(ε, 0)``: the sharp bound for ε-DP,
  ε − log((1 + e^{−ε})/(1 + e^{−(2α−1)ε}))/(α − 1) (Steinke 2024,
  "Sharp RDP & zCDP from pure DP", differentialprivacy.org, Theorem 4; it is
  the RDP of randomized response and below both ε (Mironov 2017,
  Proposition 3) and αε²/2 (Bun & Steinke 2016, Proposition 3.3)).
* ``PoissonSampled(q, Gaussian(σ))``: the exact RDP of the sampled Gaussian
  mechanism, D_α(μ₁‖μ₀) with μ₀ = N(0, σ²), μ₁ = (1−q)N(0, σ²) + qN(1, σ²)
  (Mironov, Talwar & Zhang 2019, "Rényi Differential Privacy of the Sampled
  Gaussian Mechanism", Section 3): for integer α the finite binomial sum of
  their Section 3.2, for fractional α the two series of their Section 3.3
  summed *with their signs* (see :func:`rdp_poisson_subsampled_gaussian`).
  The neighbouring relation is add/remove-one: a *replace-one*
  ``PoissonSampled`` event with 0 < q < 1 is refused, because that pair of
  mixtures, (1−q)N(0, ·) + qN(±1, ·), has no exact RDP formula here (use the
  ``"pld"`` accountant, which has its exact PLD, or sampling without
  replacement, whose WBK bound is replace-one).
* ``SampledWithoutReplacement(m, n, Gaussian(σ))``: the upper bound of Wang,
  Balle & Kasiviswanathan 2019 ("Subsampled Rényi Differential Privacy and
  Analytical Moments Accountant"), Theorem 9, at integer orders; fractional
  orders interpolate the cumulant generating function (α−1)ρ(α) linearly
  between neighbouring integers, which is an upper bound because that
  function is convex (van Erven & Harremoës 2014, Corollary 2; this is WBK19's
  Corollary 10 interpolation).  Replace-one neighbouring relation.
* ``SelfComposed``: count × RDP; ``Composed``: sum; ``NoOp``: 0;
  ``NonPrivate``: ∞.
* Subsampling of a ``Composed``/``SelfComposed`` of Gaussians is the
  subsampling of one Gaussian with σ_eff = (Σσᵢ⁻²)^{−1/2} (McMahan, Andrew,
  Erlingsson et al. 2018, "A General Approach to Adding Differential Privacy
  to Iterative Training Procedures", Section 3).

Conversions to (ε, δ)-DP (``conversion=``):

* ``"classic"``: ε = min_α ρ(α) + log(1/δ)/(α − 1) (Mironov 2017, Proposition 3);
  δ = min_α exp((α − 1)(ρ(α) − ε)).
* ``"improved"`` (default): ε = min_α ρ(α) + log((α−1)/α) − (log δ + log α)/(α − 1)
  (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential
  Privacy", Proposition 12; Balle, Barthe, Gaboardi, Hsu & Sato 2020,
  "Hypothesis Testing Interpretations and Rényi Differential Privacy",
  Theorem 21); δ = min_α exp((α−1)(ρ(α) − ε)) (1 − 1/α)^{α−1} / α.  In
  addition, δ ≥ √(1 − e^{−ρ(α)}) certifies ε = 0, because the total variation
  distance (the δ at ε = 0) is at most √(1 − e^{−KL}) (Bretagnolle & Huber
  1979) and KL ≤ D_α (van Erven & Harremoës 2014, Theorem 3).

Results are clamped to ε ≥ 0; an order whose RDP is ∞ or could not be
computed is ignored (ε = ∞ when all are).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy.special import gammaln, gammasgn, log_ndtr, logsumexp

from .._validation import check_delta, check_nonnegative, check_probability
from ..exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
from .base import Accountant
from .events import (
    REPLACE_ONE,
    Composed,
    DpEvent,
    EpsilonDelta,
    Gaussian,
    Laplace,
    NonPrivate,
    NoOp,
    PoissonSampled,
    PureEpsilon,
    SampledWithoutReplacement,
    SelfComposed,
)

__all__ = [
    "DEFAULT_ORDERS",
    "RdpAccountant",
    "compute_rdp",
    "effective_noise_multiplier",
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_of",
    "rdp_poisson_subsampled_gaussian",
    "rdp_pure_epsilon",
    "rdp_sampled_without_replacement_gaussian",
    "rdp_to_delta",
    "rdp_to_epsilon",
]


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

_CONVERSIONS = ("improved", "classic")
_TINY_SIGMA = 1e-150  # below this, 1/(2σ²) overflows; treated as σ = 0 (RDP = ∞)


def _check_orders(orders) -> np.ndarray:
    if orders is None:
        return np.asarray(DEFAULT_ORDERS, dtype=np.float64)
    try:
        arr = np.asarray(orders, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InvalidPrivacyParameter(
            f"orders must be a sequence of real numbers > 1, got {orders!r}"
        ) from None
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


# -------------------------------------------------------------- closed forms
def rdp_gaussian(noise_multiplier: float, orders) -> np.ndarray:
    """RDP of the Gaussian mechanism: ρ(α) = α/(2σ²).

    Mironov (2017), Proposition 7 (Corollary 3 for sensitivity 1).

    Parameters
    ----------
    noise_multiplier : float
        σ ≥ 0 (noise standard deviation per unit ℓ2 sensitivity); σ = 0 gives ∞.
    orders : array-like of float > 1

    Returns
    -------
    ndarray of shape (n_orders,)
    """
    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    a = _check_orders(orders)
    if sigma == 0.0:
        return np.full(a.shape, np.inf)
    with np.errstate(over="ignore", divide="ignore"):
        return a / (2.0 * sigma * sigma)  # σ² may underflow to 0: ∞


def rdp_laplace(noise_multiplier: float, orders) -> np.ndarray:
    """RDP of the Laplace mechanism with scale b per unit ℓ1 sensitivity.

    Mironov (2017), Proposition 6: for α > 1,
    ρ(α) = log( α/(2α−1) e^{(α−1)/b} + (α−1)/(2α−1) e^{−α/b} ) / (α−1),
    evaluated as 1/b + log1p((α−1)/(2α−1) · (e^{−(2α−1)/b} − 1)) / (α−1).

    Parameters
    ----------
    noise_multiplier : float
        b ≥ 0; b = 0 gives ∞.
    orders : array-like of float > 1

    Returns
    -------
    ndarray of shape (n_orders,)
    """
    b = check_nonnegative(noise_multiplier, "noise_multiplier")
    a = _check_orders(orders)
    if b == 0.0:
        return np.full(a.shape, np.inf)
    eps = 1.0 / b
    x = (a - 1.0) / (2.0 * a - 1.0) * np.expm1(-(2.0 * a - 1.0) * eps)
    return np.minimum(eps, eps + np.log1p(x) / (a - 1.0))


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
    orders : array-like of float > 1

    Returns
    -------
    ndarray of shape (n_orders,)
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


# ---------------------------------------------------- sampled Gaussian (MTZ19)
def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x − 1) for x > 0, stable for tiny and huge x."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(
            x > 1.0,
            x + np.log(-np.expm1(-np.minimum(x, 1e308))),
            np.log(np.expm1(np.minimum(x, 1.0))),
        )


def _sgm_int_a_minus_1(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """log(A_α − 1) for integer α ≥ 2, where A_α = E_{μ₀}[(μ₁/μ₀)^α].

    Mironov, Talwar & Zhang (2019), Section 3.2:
    A_α = Σ_{i=0}^{α} C(α, i)(1 − q)^{α−i} q^i e^{(i² − i)/(2σ²)}.
    Because Σᵢ C(α, i)(1−q)^{α−i}qⁱ = 1 and the exponent vanishes for i = 0, 1,
    A_α − 1 = Σ_{i=2}^{α} C(α, i)(1−q)^{α−i}qⁱ (e^{(i²−i)/(2σ²)} − 1), a sum of
    positive terms, computed in log space without cancellation for any q.
    """
    ia = alphas.astype(np.int64)
    amax = int(ia.max())
    lfact = gammaln(np.arange(amax + 1, dtype=np.float64) + 1.0)  # log k!
    i = np.arange(2, amax + 1)
    # the part that depends on i only
    row = (
        -lfact[i] + i * (math.log(q) - math.log1p(-q)) + _log_expm1((i * i - i) / (2.0 * sigma**2))
    )
    idx = ia[:, None] - i[None, :]  # a − i, negative where i > a (masked)
    valid = idx >= 0
    terms = np.where(valid, row[None, :] - lfact[np.maximum(idx, 0)], -np.inf)
    mx = terms.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        lse = np.log(np.exp(terms - mx).sum(axis=1)) + mx[:, 0]
    return lse + lfact[ia] + ia * math.log1p(-q)


_FRAC_CHUNK = 64
_FRAC_MAX_CHUNK = 1 << 13
_FRAC_MAX_TERMS = 1 << 16
_FRAC_RTOL = 1e-13
_EULER_M = 8  # order of the Euler-transform tail bound
_FRAC_ROUNDING = 1e-13  # relative rounding allowance per term


def _alternating_tail_upper(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Upper bound and width for the tail Σ_{n≥N} tₙ of an alternating series
    whose magnitudes aₙ = |tₙ| form a completely monotone sequence, given the
    terms t_N … t_{N+m} (rows of ``v``, m = ``_EULER_M``).

    With S = Σ_{n≥N} (−1)^{n−N} aₙ, the identity S(a) = a_N/2 + S(Δa)/2
    (Δaₙ = aₙ − aₙ₊₁) iterated m times gives (Euler's transformation)

        S = Σ_{k<m} (Δᵏa)_N / 2^{k+1} + ρ,   0 ≤ ρ ≤ (Δᵐa)_N / 2ᵐ,

    because Δᵐa is again non-negative and non-increasing for completely
    monotone a.  The tail is sign(t_N)·S.  A rounding allowance of
    2ᵐ·1e-15·a_N is added to the width.
    """
    a = np.abs(v)
    sign = np.sign(v[:, 0])
    est = np.zeros(v.shape[0])
    d = a
    for k in range(_EULER_M):
        est += d[:, 0] / 2.0 ** (k + 1)
        d = d[:, :-1] - d[:, 1:]
    width = np.maximum(d[:, 0], 0.0) / 2.0**_EULER_M + 2.0**_EULER_M * 1e-15 * a[:, 0]
    upper = np.where(sign < 0, -est + 2.0**_EULER_M * 1e-15 * a[:, 0], est + width)
    return upper, width


def _log_abs_expm1(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log|e^x − 1|, sign(e^x − 1)), accurate for every real x."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        pos = np.where(
            x > 1.0,
            x + np.log(-np.expm1(-np.maximum(x, 1.0))),
            np.log(np.expm1(np.clip(x, 0.0, 1.0))),
        )
        neg = np.log(-np.expm1(np.minimum(x, 0.0)))
    return np.where(x > 0.0, pos, neg), np.sign(x)


def _sgm_frac_a_minus_1(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """log(A_α − 1) for fractional α > 1 (a rigorous upper bound within ~1e-13 relative).

    Mironov, Talwar & Zhang (2019), Section 3.3.  With z₀ = σ² log(1/q − 1) + 1/2
    (where (1−q) = q e^{(2z₀−1)/(2σ²)}), split A_α = E_{z∼μ₀}[(1 − q + q X(z))^α],
    X(z) = e^{(2z−1)/(2σ²)}, at z₀ and expand each part with the generalized
    binomial series (which converges on each part):

        A_α = Σ_{i≥0} C(α,i) qⁱ(1−q)^{α−i} e^{cᵢ} Φ((z₀ − i)/σ)
            + Σ_{i≥0} C(α,i) q^{α−i}(1−q)ⁱ e^{c_{α−i}} Φ((α − i − z₀)/σ),   c_t = (t² − t)/(2σ²).

    For i > ⌊α⌋ + 1 the coefficients C(α, i) alternate in sign; every term keeps
    its sign here (dp-accounting 0.6.0 adds absolute values, which
    overestimates).

    Precision.  A_α − 1 can be far smaller than the terms (small q, large σ).
    For q ≤ 1/2 the binomial identity Σᵢ C(α,i) qⁱ(1−q)^{α−i} = 1 (absolutely
    convergent) is subtracted from the first series term by term, giving
    terms C(α,i) qⁱ(1−q)^{α−i} expm1(cᵢ + log Φ((z₀ − i)/σ)) without
    cancellation; for q > 1/2 the mirror identity Σᵢ C(α,i) q^{α−i}(1−q)ⁱ = 1 is
    subtracted from the second series instead.

    Tails.  Completing the square shows that the i-th term of the first series
    is (1−q)^α e^{−z₀²/(2σ²)} |C(α,i)| M((i − z₀)/σ)/√(2π) in magnitude, and
    that of the second series the same with M((i − α + z₀)/σ), where M is
    Mills' ratio Φ(−x)/φ(x) = ∫₀^∞ e^{−xs−s²/2} ds, a completely monotone
    function; the subtracted binomial terms are |C(α,i)| rⁱ with r ≤ 1.  For
    i > α, |C(α, i)| ∝ Γ(i−α)/Γ(i+1) is a Hausdorff moment sequence, so all
    three tails are alternating series with completely monotone magnitudes and
    are bounded rigorously by an Euler transformation of order 8
    (:func:`_alternating_tail_upper`).  Summation (compensated, vectorised over
    the orders) stops when those bounds are tight to 1e-13 × |A_α − 1| (or
    after 2¹⁶ terms); their upper ends are used, so the result never
    underestimates A_α − 1.
    """
    n = alphas.size
    s2 = sigma * sigma
    inv2s2 = 1.0 / (2.0 * s2)
    lq, l1q = math.log(q), math.log1p(-q)
    z0 = s2 * (l1q - lq) + 0.5
    al = alphas.astype(np.float64)
    m_cols = _EULER_M + 1
    first_is_primary = q <= 0.5  # which series absorbs the binomial identity

    ref = np.full(n, -np.inf)
    # compensated (Neumaier) running sums, scaled by exp(ref)
    tot = np.zeros(n)
    comp = np.zeros(n)
    mag = np.zeros(n)  # Σ|terms|, for the rounding allowance

    def add(idx: np.ndarray, x: np.ndarray, x_abs: np.ndarray) -> None:
        s_old = tot[idx]
        t = s_old + x
        big = np.abs(s_old) >= np.abs(x)
        comp[idx] += np.where(big, (s_old - t) + x, (x - t) + s_old)
        tot[idx] = t
        mag[idx] += x_abs

    lg_a1 = gammaln(al + 1.0)
    result = np.full(n, np.inf)
    active = np.arange(n)
    start = 0
    chunk = max(_FRAC_CHUNK, int(al.max()) + 4 + 2 * m_cols)
    while active.size:
        a = al[active][:, None]
        i = np.arange(start, start + chunk, dtype=np.float64)[None, :]
        j = a - i
        log_c = lg_a1[active][:, None] - gammaln(i + 1.0) - gammaln(j + 1.0)
        sgn = gammasgn(j + 1.0)
        lc1 = log_c + i * lq + j * l1q  # log|C(α,i)| qⁱ(1−q)^{α−i}
        lc2 = log_c + j * lq + i * l1q  # log|C(α,i)| q^{α−i}(1−q)ⁱ
        e1 = (i * i - i) * inv2s2 + log_ndtr((z0 - i) / sigma)
        e2 = (j * j - j) * inv2s2 + log_ndtr((j - z0) / sigma)
        lp, le = (lc1, e1) if first_is_primary else (lc2, e2)  # primary series
        ls = lc2 + e2 if first_is_primary else lc1 + e1  # the other series
        lpd, spd = _log_abs_expm1(le)  # primary terms: coef · expm1(e)
        mx = np.maximum(np.max(lp + np.maximum(le, 0.0), axis=1), np.max(ls, axis=1))
        r = ref[active]
        fresh = ~np.isfinite(r)
        shift = fresh | (mx > r + 600.0)  # set / rescale the reference of those rows
        if np.any(shift):
            rows = active[shift]
            factor = np.where(fresh[shift], 1.0, np.exp(r[shift] - mx[shift]))
            tot[rows] *= factor
            comp[rows] *= factor
            mag[rows] *= factor
            ref[rows] = mx[shift]
            r = ref[active]
        rr = r[:, None]
        with np.errstate(under="ignore", over="ignore", invalid="ignore"):
            v_body = sgn * spd * np.exp(lp + lpd - rr) + sgn * np.exp(ls - rr)
            v_pa = sgn * np.exp(lp + le - rr)  # primary, e^c Φ part
            v_pb = -sgn * np.exp(lp - rr)  # primary, subtracted binomial part
            v_s = sgn * np.exp(ls - rr)  # secondary series
            # magnitude before the primary/secondary cancellation, for the allowance
            v_mag = np.exp(lp + lpd - rr) + np.exp(ls - rr)
        v_body = np.nan_to_num(v_body, nan=0.0)
        v_mag = np.nan_to_num(v_mag, nan=np.inf)
        # body: all but the last m+1 columns, which start the tail estimates
        add(active, v_body[:, :-m_cols].sum(axis=1), v_mag[:, :-m_cols].sum(axis=1))
        end = start + chunk
        first_tail = end - m_cols
        up_a, w_a = _alternating_tail_upper(v_pa[:, -m_cols:])
        up_b, w_b = _alternating_tail_upper(v_pb[:, -m_cols:])
        up_s, w_s = _alternating_tail_upper(v_s[:, -m_cols:])
        upper = up_a + up_b + up_s
        width = w_a + w_b + w_s
        # rounding allowance: each term is exact to ~1e-13 relative (exp of
        # arguments up to ~10³); cancellation makes it matter only when the
        # terms are much larger than A_α − 1 (q ≈ 1/2 with very large σ)
        allowance = _FRAC_ROUNDING * (mag[active] + np.abs(upper))
        total = tot[active] + comp[active] + allowance
        valid = first_tail >= al[active] + 2.0  # completely monotone, alternating region
        capped = end >= _FRAC_MAX_TERMS
        tight = width <= np.maximum(_FRAC_RTOL * np.abs(total + upper), allowance)
        done = valid & (tight | capped)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(np.maximum(total[done] + upper[done], 0.0))
        result[active[done]] = logs + ref[active[done]]
        if capped:
            break  # rows not done keep ∞ (cannot happen for α < 2¹⁶ − 12)
        # not done: the tail columns become part of the body
        keep = ~done
        add(
            active[keep],
            v_body[keep, -m_cols:].sum(axis=1),
            v_mag[keep, -m_cols:].sum(axis=1),
        )
        active = active[keep]
        start = end
        chunk = min(2 * chunk, _FRAC_MAX_CHUNK, _FRAC_MAX_TERMS - start)
    return np.where(np.isnan(result), np.inf, result)


@functools.lru_cache(maxsize=4096)
def _sgm_rdp_cached(q: float, sigma: float, orders: tuple[float, ...]) -> np.ndarray:
    # extreme σ may overflow: such values become ∞ (conservative), never NaN
    with np.errstate(all="ignore"):
        return _sgm_rdp(q, sigma, orders)


def _sgm_rdp(q: float, sigma: float, orders: tuple[float, ...]) -> np.ndarray:
    a = np.asarray(orders, dtype=np.float64)
    out = np.empty(a.shape)
    is_int = a == np.floor(a)
    if np.any(is_int):
        log_am1 = _sgm_int_a_minus_1(q, sigma, a[is_int])
        out[is_int] = np.logaddexp(0.0, log_am1) / (a[is_int] - 1.0)
    if np.any(~is_int):
        fa = a[~is_int]
        log_am1 = _sgm_frac_a_minus_1(q, sigma, fa)
        series = np.logaddexp(0.0, log_am1) / (fa - 1.0)
        # Convexity of the cumulant (α−1)ρ(α) (van Erven & Harremoës 2014, Cor. 2)
        # bounds ρ at α by the chord between ⌊α⌋ and ⌈α⌉, whose values are exact
        # sums of positive terms; it only matters where the series lost precision.
        lo, hi = np.floor(fa), np.ceil(fa)
        ints = np.unique(np.concatenate([lo, hi]))
        ints = ints[ints >= 2]
        cgf = {1.0: 0.0}
        cgf.update(
            zip(
                ints.tolist(),
                np.logaddexp(0.0, _sgm_int_a_minus_1(q, sigma, ints)).tolist(),
                strict=True,
            )
        )
        t = fa - lo
        k_lo = np.array([cgf[v] for v in lo.tolist()])
        k_hi = np.array([cgf[v] for v in hi.tolist()])
        chord = ((1.0 - t) * k_lo + t * k_hi) / (fa - 1.0)
        out[~is_int] = np.fmin(series, chord)
    out = np.where(np.isnan(out), np.inf, out)
    # never above the unsampled Gaussian (q = 1), which is an exact bound too
    out = np.minimum(out, a / (2.0 * sigma * sigma))
    return _readonly(np.maximum(out, 0.0))


def rdp_poisson_subsampled_gaussian(sampling_rate: float, noise_multiplier: float, orders):
    """Exact RDP of the Poisson-sampled Gaussian mechanism.

    ρ(α) = D_α(μ₁‖μ₀) = log(A_α)/(α − 1), μ₀ = N(0, σ²), μ₁ = (1−q)N(0, σ²) +
    qN(1, σ²), which is the larger of the two directions (Mironov, Talwar &
    Zhang 2019, Section 3; checked numerically in the tests).  Integer orders
    use the finite sum of MTZ19 Section 3.2, fractional orders the signed
    two-series formula of Section 3.3 with rigorous tail bounds (see
    ``_sgm_frac_a_minus_1``); both are evaluated as A_α − 1 to stay accurate
    for small q and large σ.  A fractional order is also capped by the chord of
    the convex cumulant (α−1)ρ(α) between ⌊α⌋ and ⌈α⌉ (van Erven & Harremoës
    2014, Corollary 2), which only matters in the corner (q ≈ 1/2, σ ≳ 10⁶)
    where the two series cancel beyond double precision.  Every value is an
    upper bound on the exact RDP, exceeding it by ~1e-11 relative at most
    outside that corner.  Add/remove-one neighbouring relation.

    Parameters
    ----------
    sampling_rate : float
        q in [0, 1].
    noise_multiplier : float
        σ ≥ 0; σ = 0 (or σ < 1e-150) with q > 0 gives ∞.
    orders : array-like of float > 1

    Returns
    -------
    ndarray of shape (n_orders,)
    """
    return _subsampled_gaussian_rdp(sampling_rate, noise_multiplier, orders, _sgm_rdp_cached)


def _subsampled_gaussian_rdp(sampling_rate, noise_multiplier, orders, bound) -> np.ndarray:
    """Validation and edge cases shared by the subsampled-Gaussian RDP bounds: rate 0
    costs nothing, σ ≈ 0 costs ∞ (rate > 0), rate 1 is the plain Gaussian
    (:func:`rdp_gaussian`); otherwise ``bound(rate, σ, orders_tuple)``."""
    q = check_probability(sampling_rate, "sampling_rate", allow_zero=True)
    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    a = _check_orders(orders)
    if q == 0.0:
        return np.zeros(a.shape)
    if sigma < _TINY_SIGMA:  # 1/σ² overflows: the divergence is ∞ for q > 0
        return np.full(a.shape, np.inf)
    if q == 1.0:
        return rdp_gaussian(sigma, a)
    return np.array(bound(q, sigma, tuple(a.tolist())))


# ------------------------------------------- sampling without replacement (WBK19)
def _wor_int_cgf(gamma: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """(α − 1)·ρ(α) bound of Wang, Balle & Kasiviswanathan (2019), Theorem 9, for
    integer α ≥ 2 and the Gaussian mechanism (ε(j) = j/(2σ²), ε(∞) = ∞):

        log(1 + γ² C(α,2) min{4(e^{ε(2)} − 1), 2e^{ε(2)}}
              + Σ_{j=3}^{α} 2 γʲ C(α,j) e^{(j−1)ε(j)}).
    """
    amax = int(alphas.max())
    lg = math.log(gamma)
    e2 = 1.0 / (sigma * sigma)  # ε(2) = 2/(2σ²)
    j = np.arange(2, amax + 1, dtype=np.float64)[None, :]
    al = alphas[:, None]
    valid = j <= al
    aj = np.where(valid, al - j, 0.0)
    log_comb = gammaln(al + 1.0) - gammaln(j + 1.0) - gammaln(aj + 1.0)
    log_t = math.log(2.0) + j * lg + log_comb + (j - 1.0) * j / (2.0 * sigma * sigma)
    first = min(math.log(4.0) + float(_log_expm1(np.array(e2))), e2 + math.log(2.0))
    log_t[:, 0] = 2.0 * lg + log_comb[:, 0] + first
    log_t = np.where(valid, log_t, -np.inf)
    return np.logaddexp(0.0, logsumexp(log_t, axis=1))


@functools.lru_cache(maxsize=1024)
def _wor_rdp_cached(gamma: float, sigma: float, orders: tuple[float, ...]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _wor_rdp(gamma, sigma, orders)


def _wor_rdp(gamma: float, sigma: float, orders: tuple[float, ...]) -> np.ndarray:
    a = np.asarray(orders, dtype=np.float64)
    lo = np.floor(a)
    hi = np.ceil(a)
    ints = np.unique(np.concatenate([lo, hi]))
    ints = ints[ints >= 2]
    cgf = {1.0: 0.0}
    if ints.size:
        vals = _wor_int_cgf(gamma, sigma, ints)
        cgf.update(zip(ints.tolist(), vals.tolist(), strict=True))
    k_lo = np.array([cgf[v] for v in lo.tolist()])
    k_hi = np.array([cgf[v] for v in hi.tolist()])
    t = a - lo
    k = np.where(t == 0.0, k_lo, (1.0 - t) * k_lo + t * k_hi)
    out = k / (a - 1.0)
    out = np.where(np.isnan(out), np.inf, out)
    out = np.minimum(out, a / (2.0 * sigma * sigma))
    return _readonly(np.maximum(out, 0.0))


def rdp_sampled_without_replacement_gaussian(
    sampling_rate: float, noise_multiplier: float, orders
) -> np.ndarray:
    """RDP upper bound of the Gaussian mechanism on a sample drawn without replacement.

    Wang, Balle & Kasiviswanathan (2019), Theorem 9 at integer orders α ≥ 2
    (see ``_wor_int_cgf``); at fractional orders the cumulant generating
    function (α − 1)ρ(α) is interpolated linearly between ⌊α⌋ and ⌈α⌉ (with
    value 0 at α = 1), an upper bound by convexity (van Erven & Harremoës
    2014, Corollary 2; WBK19 Corollary 10).  Capped by the unsampled Gaussian's
    α/(2σ²), which subsampling cannot exceed (joint convexity of
    e^{(α−1)D_α}).  Replace-one neighbouring relation; ``sampling_rate`` γ =
    sample_size / population_size.

    Parameters
    ----------
    sampling_rate : float
        γ in [0, 1].
    noise_multiplier : float
        σ ≥ 0.
    orders : array-like of float > 1

    Returns
    -------
    ndarray of shape (n_orders,)
    """
    return _subsampled_gaussian_rdp(sampling_rate, noise_multiplier, orders, _wor_rdp_cached)


# ------------------------------------------------------------ event dispatch
@functools.singledispatch
def effective_noise_multiplier(event: DpEvent) -> float | None:
    """σ of the single Gaussian mechanism equivalent to ``event``.

    A composition of Gaussian mechanisms with noise multipliers σᵢ on the same
    data is a Gaussian mechanism with σ_eff = (Σσᵢ⁻²)^{−1/2} (McMahan, Andrew,
    Erlingsson et al. 2018, Section 3; Dong, Roth & Su 2019, Corollary 3.3 for
    adaptive composition).

    Returns
    -------
    float or None
        σ_eff ≥ 0, ``math.inf`` for an event that costs nothing (``NoOp``,
        zero repetitions), ``None`` if ``event`` is not made of Gaussians only.
    """
    return None


@effective_noise_multiplier.register
def _(event: Gaussian) -> float | None:
    return event.noise_multiplier


@effective_noise_multiplier.register
def _(event: NoOp) -> float | None:
    return math.inf


@effective_noise_multiplier.register
def _(event: SelfComposed) -> float | None:
    s = effective_noise_multiplier(event.event)
    if s is None:
        return None
    if event.count == 0 or math.isinf(s):
        return math.inf
    return s / math.sqrt(event.count)


@effective_noise_multiplier.register
def _(event: Composed) -> float | None:
    inv = 0.0
    for e in event.events:
        s = effective_noise_multiplier(e)
        if s is None:
            return None
        if s == 0.0:
            inv = math.inf
        elif math.isfinite(s):
            inv += s**-2
    if inv == 0.0:
        return math.inf
    return 0.0 if math.isinf(inv) else inv**-0.5


@functools.singledispatch
def rdp_of(event: DpEvent, orders: np.ndarray) -> np.ndarray:
    """RDP of ``event`` at ``orders`` (one rule per event type).

    Parameters
    ----------
    event : DpEvent
    orders : ndarray of float > 1 (validated)

    Returns
    -------
    ndarray of shape (n_orders,), values in [0, ∞]

    Raises
    ------
    UnsupportedEventError
        For events without an RDP rule (``EpsilonDelta`` with δ > 0, subsampled
        non-Gaussian events, unknown event types).
    """
    raise UnsupportedEventError(
        f"the RDP accountant cannot account {type(event).__name__} events: {event!r}"
    )


@rdp_of.register
def _(event: NoOp, orders: np.ndarray) -> np.ndarray:
    return np.zeros(orders.shape)


@rdp_of.register
def _(event: NonPrivate, orders: np.ndarray) -> np.ndarray:
    return np.full(orders.shape, np.inf)


@rdp_of.register
def _(event: Gaussian, orders: np.ndarray) -> np.ndarray:
    return rdp_gaussian(event.noise_multiplier, orders)


@rdp_of.register
def _(event: Laplace, orders: np.ndarray) -> np.ndarray:
    return rdp_laplace(event.noise_multiplier, orders)


@rdp_of.register
def _(event: PureEpsilon, orders: np.ndarray) -> np.ndarray:
    return rdp_pure_epsilon(event.epsilon, orders)


@rdp_of.register
def _(event: EpsilonDelta, orders: np.ndarray) -> np.ndarray:
    if event.delta == 0.0:
        return rdp_pure_epsilon(event.epsilon, orders)
    raise UnsupportedEventError(
        f"an (ε, δ)-DP event with δ > 0 has no RDP guarantee: {event!r}; use the "
        "'basic' or 'advanced' accountant"
    )


@rdp_of.register
def _(event: SelfComposed, orders: np.ndarray) -> np.ndarray:
    inner = rdp_of(event.event, orders)
    if event.count == 0:
        return np.zeros(orders.shape)
    return event.count * inner


@rdp_of.register
def _(event: Composed, orders: np.ndarray) -> np.ndarray:
    total = np.zeros(orders.shape)
    for e in event.events:
        total = total + rdp_of(e, orders)
    return total


def _subsampled_sigma(event: PoissonSampled | SampledWithoutReplacement) -> float:
    sigma = effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(
            f"the RDP accountant supports subsampling of Gaussian events only (or of "
            f"Composed/SelfComposed Gaussians), got {event!r}"
        )
    return sigma


@rdp_of.register
def _(event: PoissonSampled, orders: np.ndarray) -> np.ndarray:
    sigma = _subsampled_sigma(event)
    if math.isinf(sigma) or event.sampling_rate == 0.0:
        return np.zeros(orders.shape)
    if event.sampling_rate == 1.0:  # no sampling: the Gaussian itself (either relation)
        return rdp_gaussian(sigma, orders)
    if sigma == 0.0:  # no noise: ∞ is a valid bound under either relation
        return np.full(orders.shape, np.inf)
    if event.neighbouring == REPLACE_ONE:
        raise UnsupportedEventError(
            f"the RDP accountant has no exact RDP for a replace-one Poisson-subsampled "
            f"Gaussian ({event!r}): use the 'pld' accountant (exact replace-one PLD) or "
            "sampling without replacement (SampledWithoutReplacement, WBK 2019)"
        )
    return rdp_poisson_subsampled_gaussian(event.sampling_rate, sigma, orders)


@rdp_of.register
def _(event: SampledWithoutReplacement, orders: np.ndarray) -> np.ndarray:
    sigma = _subsampled_sigma(event)
    if math.isinf(sigma) or event.sample_size == 0:
        return np.zeros(orders.shape)
    gamma = event.sample_size / event.population_size
    return rdp_sampled_without_replacement_gaussian(gamma, sigma, orders)


def compute_rdp(event: DpEvent, orders=None) -> np.ndarray:
    """RDP of ``event`` at ``orders`` (default :data:`DEFAULT_ORDERS`).

    Parameters
    ----------
    event : DpEvent
    orders : array-like of float > 1, optional

    Returns
    -------
    ndarray of shape (n_orders,), sorted by order

    Raises
    ------
    UnsupportedEventError
    InvalidPrivacyParameter
        If an order is ≤ 1, NaN or infinite.
    """
    a = _check_orders(orders)
    with np.errstate(over="ignore"):
        out = np.asarray(rdp_of(event, a), dtype=np.float64)
    return np.where(np.isnan(out), np.inf, out)


# --------------------------------------------------------------- conversions
def rdp_to_epsilon(orders, rdp, delta: float, conversion: str = "improved") -> tuple[float, float]:
    """Convert RDP curve to (ε, δ)-DP: the smallest ε over the orders.

    ``"classic"``: ε = ρ(α) + log(1/δ)/(α − 1) (Mironov 2017, Proposition 3).
    ``"improved"``: ε = ρ(α) + log((α − 1)/α) − (log δ + log α)/(α − 1)
    (Canonne, Kamath & Steinke 2020, Proposition 12; Balle et al. 2020,
    Theorem 21), and ε = 0 when δ ≥ √(1 − e^{−ρ(α)}) (Bretagnolle–Huber).

    Parameters
    ----------
    orders, rdp : array-like of the same length
    delta : float
        δ in [0, 1); δ = 0 gives ε = 0 if all ρ are 0, else ∞.
    conversion : {"improved", "classic"}

    Returns
    -------
    (epsilon, order) : (float, float)
        ε ≥ 0 (∞ if no order certifies a finite ε; order is then NaN).
    """
    if conversion not in _CONVERSIONS:
        raise UnknownNameError(f"conversion must be one of {_CONVERSIONS}, got {conversion!r}")
    delta = check_delta(delta, "delta", allow_zero=True)
    a = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    r = np.where(np.isnan(r), np.inf, np.maximum(r, 0.0))
    if delta == 0.0:
        return (0.0, float(a[0])) if np.all(r == 0.0) else (math.inf, math.nan)
    log_delta = math.log(delta)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if conversion == "classic":
            eps = r - log_delta / (a - 1.0)
        else:
            eps = r + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)
            tv_ok = np.isfinite(r) & (delta * delta >= -np.expm1(-r))
            eps = np.where(tv_ok, 0.0, eps)
    eps = np.where(np.isnan(eps), np.inf, eps)
    idx = int(np.argmin(eps))
    best = float(eps[idx])
    if math.isinf(best):
        return math.inf, math.nan
    return max(0.0, best), float(a[idx])


def rdp_to_delta(orders, rdp, epsilon: float, conversion: str = "improved") -> tuple[float, float]:
    """Convert RDP curve to (ε, δ)-DP: the smallest δ over the orders.

    ``"classic"``: δ = exp((α − 1)(ρ(α) − ε)) (Mironov 2017, Proposition 3).
    ``"improved"``: δ = exp((α − 1)(ρ(α) − ε)) (1 − 1/α)^{α−1}/α (Canonne,
    Kamath & Steinke 2020, Proposition 12), and δ ≤ √(1 − e^{−ρ(α)}) for every
    ε ≥ 0 (Bretagnolle–Huber bound on the total variation distance).

    Parameters
    ----------
    orders, rdp : array-like of the same length
    epsilon : float
        ε ≥ 0.
    conversion : {"improved", "classic"}

    Returns
    -------
    (delta, order) : (float, float)
        δ in [0, 1].
    """
    if conversion not in _CONVERSIONS:
        raise UnknownNameError(f"conversion must be one of {_CONVERSIONS}, got {conversion!r}")
    epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=True)
    a = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    r = np.where(np.isnan(r), np.inf, np.maximum(r, 0.0))
    if math.isinf(epsilon):
        return (0.0, float(a[0])) if np.all(np.isfinite(r)) else (1.0, math.nan)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        log_d = (a - 1.0) * (r - epsilon)
        if conversion == "improved":
            log_d = log_d + (a - 1.0) * np.log1p(-1.0 / a) - np.log(a)
            tv = 0.5 * np.log(-np.expm1(-r))
            log_d = np.minimum(log_d, np.where(np.isfinite(r), tv, np.inf))
    log_d = np.where(np.isnan(log_d), np.inf, log_d)
    idx = int(np.argmin(log_d))
    best = float(log_d[idx])
    if best >= 0.0:
        return 1.0, (float(a[idx]) if math.isfinite(best) else math.nan)
    return min(1.0, math.exp(best)), float(a[idx])


# ---------------------------------------------------------------- accountant
class RdpAccountant(Accountant):
    """Rényi-DP accountant (moments accountant).

    Parameters
    ----------
    orders : sequence of float > 1, optional
        RDP orders; default :data:`DEFAULT_ORDERS` (190 orders from 1.05 to
        8192, a superset of dp-accounting's default grid).
    conversion : {"improved", "classic"}, default "improved"
        RDP → (ε, δ) conversion (see :func:`rdp_to_epsilon`).
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
        The relation accounted (see :mod:`dperm.accounting.base`).  Under
        replace-one, Poisson-subsampled Gaussians (0 < q < 1) are refused.

    Notes
    -----
    Supported events: ``Gaussian``, ``Laplace``, ``PureEpsilon``,
    ``EpsilonDelta`` with δ = 0, ``PoissonSampled`` and
    ``SampledWithoutReplacement`` of (compositions of) Gaussians, ``NoOp``,
    ``NonPrivate``, and ``SelfComposed``/``Composed`` of those.  See the
    module docstring for the formula and source of each.

    Raises
    ------
    InvalidPrivacyParameter
        If an order is ≤ 1, NaN or infinite.
    UnknownNameError
        If ``conversion`` is unknown.
    """

    name = "rdp"

    def __init__(
        self, orders=None, conversion: str = "improved", *, neighbouring: str = REPLACE_ONE
    ) -> None:
        super().__init__(neighbouring)
        if conversion not in _CONVERSIONS:
            raise UnknownNameError(f"conversion must be one of {_CONVERSIONS}, got {conversion!r}")
        self._custom_orders = orders is not None
        self._orders = _readonly(_check_orders(orders).copy())
        self.conversion = conversion
        self._rdp = np.zeros(self._orders.shape)

    def get_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {**super().get_config(), "conversion": self.conversion}
        if self._custom_orders:
            cfg["orders"] = self._orders.tolist()
        return cfg

    @property
    def orders(self) -> np.ndarray:
        """The RDP orders (sorted), shape (n_orders,)."""
        return self._orders.copy()

    @property
    def rdp(self) -> np.ndarray:
        """The composed RDP at each order, shape (n_orders,)."""
        return self._rdp.copy()

    def _prepare(self, event: DpEvent, count: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            cost = np.asarray(rdp_of(event, self._orders), dtype=np.float64)
        return np.where(np.isnan(cost), np.inf, cost)

    def _commit(self, prepared: np.ndarray, count: int) -> None:
        if count == 0:
            return
        with np.errstate(over="ignore"):
            self._rdp = self._rdp + count * prepared

    def _epsilon(self, delta: float) -> float:
        return rdp_to_epsilon(self._orders, self._rdp, delta, self.conversion)[0]

    def _delta(self, epsilon: float) -> float:
        return rdp_to_delta(self._orders, self._rdp, epsilon, self.conversion)[0]

    def get_epsilon_and_order(self, delta: float) -> tuple[float, float]:
        """(ε, optimal order) at ``delta`` (order NaN when ε = ∞)."""
        delta = check_delta(delta, "delta", allow_zero=True)
        return rdp_to_epsilon(self._orders, self._rdp, delta, self.conversion)

    def get_delta_and_order(self, epsilon: float) -> tuple[float, float]:
        """(δ, optimal order) at ``epsilon``."""
        epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=True)
        return rdp_to_delta(self._orders, self._rdp, epsilon, self.conversion)
