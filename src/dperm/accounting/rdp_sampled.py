"""RDP of the subsampled Gaussian mechanism: Poisson sampling, exact (Mironov,
Talwar & Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian
Mechanism", Section 3), and sampling without replacement, an upper bound (Wang,
Balle & Kasiviswanathan 2019, "Subsampled Rényi Differential Privacy and
Analytical Moments Accountant", Theorem 27, the subsampled-Gaussian form of
their Theorem 9; :mod:`dperm.accounting.amplification`).  See :mod:`dperm.accounting.rdp`
for how the accountant uses them.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln, gammasgn, log_ndtr

from .._validation import check_nonnegative, check_probability
from .amplification import wor_gaussian_log_terms
from .rdp_closed_forms import _TINY_SIGMA, _check_orders, _readonly, rdp_gaussian

__all__ = ["rdp_poisson_subsampled_gaussian", "rdp_sampled_without_replacement_gaussian"]


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


def _cached_curve(maxsize: int):
    """Decorator: an RDP curve ``curve(rate, sigma, orders)`` memoized (``orders`` a
    tuple), numpy's floating-point warnings off — an extreme σ overflows to ∞
    (conservative), never to NaN.  ``cache_clear`` as :func:`functools.lru_cache`."""

    def decorate(curve):
        @functools.lru_cache(maxsize=maxsize)
        def cached(rate: float, sigma: float, orders: tuple[float, ...]) -> np.ndarray:
            with np.errstate(all="ignore"):
                return curve(rate, sigma, orders)

        return cached

    return decorate


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


_sgm_rdp_cached = _cached_curve(4096)(_sgm_rdp)


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
    """(α − 1)·ρ(α) bound of Wang, Balle & Kasiviswanathan (2019), Theorem 27 (the
    subsampled-Gaussian strengthening of their Theorem 9), for integer α ≥ 2:
    :func:`dperm.accounting.amplification.wor_gaussian_log_terms`."""
    return wor_gaussian_log_terms(gamma, sigma, alphas)


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


_wor_rdp_cached = _cached_curve(1024)(_wor_rdp)


def rdp_sampled_without_replacement_gaussian(
    sampling_rate: float, noise_multiplier: float, orders
) -> np.ndarray:
    """RDP upper bound of the Gaussian mechanism on a sample drawn without replacement.

    Wang, Balle & Kasiviswanathan (2019), Theorem 27 at integer orders α ≥ 2
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
