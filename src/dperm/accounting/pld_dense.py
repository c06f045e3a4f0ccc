"""Vectorised privacy loss distributions on a uniform grid (numpy only).

The numerics behind :class:`dperm.accounting.pld.PldAccountant`: the
pessimistic *connect-the-dots* discretisation of a mechanism's privacy loss
distribution (PLD) (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022,
"Connect the Dots: Tighter Discrete Approximations of Privacy Loss
Distributions", PoPETs, Algorithm 1 with a fixed gap), its composition by FFT
(Koskela, Jälkö & Honkela 2020) and ε(δ) / δ(ε) of the result (Meiser &
Mohammadi 2018; Sommer, Meiser & Mohammadi 2019).  It follows dp-accounting's
``pld`` package step by step — same grid, same tail truncation, same
connect-the-dots formula, same FFT self-composition window, same ε(δ) — but
every step is a numpy array expression: the hockey-stick divergence δ(ε) of a
(Poisson-subsampled) Gaussian or Laplace mechanism is evaluated in closed form
on the whole grid at once, where dp-accounting loops over the grid in Python.

Neighbouring pairs (noise std ``s`` and shift 1 — i.e. relative to the
sensitivity of the pair; :mod:`dperm.accounting.pld` maps dperm's events to
them):

* ``"remove"``: P = (1−q)N(0, s²) + qN(1, s²) against Q = N(0, s²);
* ``"add"``: P = N(0, s²) against Q = (1−q)N(0, s²) + qN(1, s²) — the two
  dominating pairs of add/remove-one Poisson subsampling (Zhu, Dong & Wang
  2022, Theorem 11; dp-accounting's ``ADD``/``REMOVE`` adjacency);
* ``"replace"``: P = (1−q)N(0, s²) + qN(1, s²) against
  Q = (1−q)N(0, s²) + qN(−1, s²) — replace-one Poisson subsampling
  (dp-accounting's ``REPLACE`` adjacency, symmetric);
* q = 1 in each: the Gaussian mechanism N(0, s²) against N(1, s²) (twice
  the shift for ``"replace"``).

Every PLD here is *pessimistic*: the δ(ε) it reports is at least the
mechanism's.  Where the continuous PLD is cut (the noise tails of mass
e⁻⁵⁰/2, as in dp-accounting), the cut mass goes to +∞ (upper tail) or to the
lowest grid point (lower tail); the composition window drops at most
``tail_mass`` = 10⁻²⁰ of upper-tail mass, which is added to the mass at +∞
(Chernoff bound, as in dp-accounting, whose default 10⁻¹⁵ would exceed the
δ ≈ 10⁻¹⁶ some dperm fits use).  Negative probabilities from rounding are set
to 0 (which can only add mass).

The normal tail Φ̄ is computed here too (:func:`norm_logsf`), with the
Chebyshev expansion of Press, Teukolsky, Vetterling & Flannery, *Numerical
Recipes* (3rd ed., §6.2.2, ``erfccheb``): erfc(z) = t·exp(−z² + Σₖ cₖTₖ(2t−1)),
t = 2/(2+z), z ≥ 0, with the coefficients recomputed at 50 digits with mpmath
(Chebyshev interpolation of log(erfc(z)/t) + z² at 80 nodes; 30 kept, the
next is < 10⁻¹⁹).  ``tests/test_accounting_pld_dense.py`` checks it against
``math.erfc`` and mpmath.  It keeps the PLD accountant free of scipy, whose
import alone costs more than a whole ``dperm account --accountant pld`` run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DensePmf",
    "Pld",
    "compose",
    "delta_for_epsilon",
    "epsilon_delta_pld",
    "epsilon_for_delta",
    "fixed_size_gaussian_pld",
    "gaussian_pld",
    "identity_pld",
    "laplace_pld",
    "norm_logsf",
    "self_compose",
]

#: Chebyshev coefficients of g(y) = log(erfc(z)/t) + z², y = 2t − 1, t = 2/(2 + z)
#: (c₀ already halved).  Same series as Numerical Recipes' ``erfccheb``.
_ERFC_CHEB = np.array(
    [
        -0.65132685989085471710,
        0.64196979235649026030,
        0.019476473204185836312,
        -0.0095615147868086316419,
        -0.00094659534448203686630,
        0.00036683949785276145187,
        0.000042523324806907771645,
        -0.000020278578112534243154,
        -1.6242900046470255135e-6,
        1.3036558355805232018e-6,
        1.5626441722066143178e-8,
        -8.5238095914926542525e-8,
        6.5290544390988514964e-9,
        5.0593434955514689418e-9,
        -9.9136415649303308674e-10,
        -2.2736512229318358557e-10,
        9.6467911020155268020e-11,
        2.3940380830391147447e-12,
        -6.8860275264975533984e-12,
        8.9448792730907257167e-13,
        3.1309213993429580783e-13,
        -1.1270822361367252366e-13,
        3.8109052551892320552e-16,
        7.1060976136092369878e-15,
        -1.5230282014571043043e-15,
        -9.4574945712912340005e-17,
        1.2102371892242789923e-16,
        -2.8166630877471769718e-17,
        5.0030055594459016536e-20,
        2.3281042579529252875e-18,
    ]
)
_LOG_HALF = math.log(0.5)
_SQRT_HALF = math.sqrt(0.5)

#: z with Φ̄(z) = e⁻⁵⁰/2: the noise tails cut from the grid (dp-accounting's
#: ``log_mass_truncation_bound = −50``)
TAIL_Z = 9.745474864965935
#: upper-tail mass a composition window may drop (added to the mass at +∞)
TAIL_MASS = 1e-20


def _log_erfc_nonneg(z: np.ndarray) -> np.ndarray:
    """log erfc(z) for z ≥ 0 (Clenshaw sum of the series above)."""
    t = 2.0 / (2.0 + z)
    y2 = 4.0 * t - 2.0
    b1 = np.zeros_like(z)
    b2 = np.zeros_like(z)
    for c in _ERFC_CHEB[:0:-1]:
        b1, b2 = y2 * b1 - b2 + c, b1
    return np.log(t) - z * z + (0.5 * y2 * b1 - b2 + _ERFC_CHEB[0])


def norm_logsf(x) -> np.ndarray:
    """log Φ̄(x) = log P(N(0, 1) > x), elementwise, accurate in both tails.

    Parameters
    ----------
    x : array_like of float

    Returns
    -------
    numpy.ndarray
        Same shape as ``x``; −∞ only where Φ̄ underflows (x ≳ 38).
    """
    x = np.asarray(x, dtype=float)
    z = np.abs(x) * _SQRT_HALF
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        tail = _LOG_HALF + _log_erfc_nonneg(z)  # log Φ̄(|x|)
        return np.where(x >= 0, tail, np.log1p(-np.exp(tail)))


def _sf(x: np.ndarray) -> np.ndarray:
    return np.exp(norm_logsf(x))


# ------------------------------------------------------------------ the PMF class
@dataclass(frozen=True)
class DensePmf:
    """A discrete privacy loss distribution on the grid h·ℤ plus a mass at +∞.

    Attributes
    ----------
    h : float
        Grid step (``value_discretization_interval``).
    lower : int
        Grid index of ``probs[0]``: the loss of ``probs[i]`` is (lower + i)·h.
    probs : numpy.ndarray of shape (m,)
        Probabilities (≥ 0) of the finite losses.
    inf_mass : float
        Probability of the loss +∞.
    """

    h: float
    lower: int
    probs: np.ndarray
    inf_mass: float

    @property
    def losses(self) -> np.ndarray:
        return (self.lower + np.arange(self.probs.size)) * self.h

    def __deepcopy__(self, memo: dict) -> DensePmf:
        return self  # immutable: an accountant's copy shares it


@dataclass(frozen=True)
class Pld:
    """The PLD of a mechanism: one PMF per direction of its dominating pair.

    ``add`` is None for a symmetric PLD (the same PMF in both directions).
    ε(δ) and δ(ε) are the larger of the two directions (dp-accounting's
    ``PrivacyLossDistribution``).
    """

    remove: DensePmf
    add: DensePmf | None = None

    def __deepcopy__(self, memo: dict) -> Pld:
        return self  # immutable: an accountant's copy shares it

    def compose(self, other: Pld) -> Pld:
        remove = compose(self.remove, other.remove)
        if self.add is None and other.add is None:
            return Pld(remove)
        add = compose(self.add or self.remove, other.add or other.remove)
        return Pld(remove, add)

    def self_compose(self, count: int, *, tilt: bool = True) -> Pld:
        remove = self_compose(self.remove, count, tilt=tilt)
        add = None if self.add is None else self_compose(self.add, count, tilt=tilt)
        return Pld(remove, add)

    def epsilon(self, delta: float) -> float:
        eps = epsilon_for_delta(self.remove, delta)
        return eps if self.add is None else max(eps, epsilon_for_delta(self.add, delta))

    def delta(self, epsilon: float) -> float:
        d = delta_for_epsilon(self.remove, epsilon)
        return d if self.add is None else max(d, delta_for_epsilon(self.add, epsilon))


def identity_pld(h: float) -> Pld:
    """The PLD of a mechanism that releases nothing (loss 0 with probability 1)."""
    return Pld(DensePmf(h, 0, np.ones(1), 0.0))


# ------------------------------------------------------------------ composition
def _fast_len(n: int) -> int:
    """Smallest 2^a 3^b 5^c ≥ n (a fast FFT length)."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _truncate(probs: np.ndarray, tail_mass: float) -> tuple[int, np.ndarray, float]:
    """Drop a prefix and a suffix of mass ≤ tail_mass/2 each, pessimistically:
    the prefix mass joins the first kept loss, the suffix mass goes to +∞."""
    c = np.cumsum(probs)
    left = int(np.searchsorted(c, tail_mass / 2.0, side="right"))
    r = np.cumsum(probs[::-1])
    right = probs.size - int(np.searchsorted(r, tail_mass / 2.0, side="right"))
    right = max(right, left + 1)
    kept = probs[left:right].copy()
    if left:
        kept[0] += c[left - 1]
    to_inf = float(probs[right:].sum())
    return left, kept, to_inf


def compose(a: DensePmf, b: DensePmf, tail_mass: float = TAIL_MASS) -> DensePmf:
    """The PMF of the sum of independent losses from ``a`` and ``b`` (FFT convolution)."""
    if a.h != b.h:  # pragma: no cover - the accountant uses one grid
        raise ValueError("PMFs on different grids")
    if a.probs.size == 1 or b.probs.size == 1:
        probs = np.convolve(a.probs, b.probs)
    else:
        n = a.probs.size + b.probs.size - 1
        L = _fast_len(n)
        probs = np.fft.irfft(np.fft.rfft(a.probs, L) * np.fft.rfft(b.probs, L), L)[:n]
        np.maximum(probs, 0.0, out=probs)
    inf = a.inf_mass + b.inf_mass - a.inf_mass * b.inf_mass
    left, probs, to_inf = _truncate(probs, tail_mass)
    return DensePmf(a.h, a.lower + b.lower + left, probs, min(1.0, inf + to_inf))


def _window(probs: np.ndarray, count: int, tail_mass: float) -> tuple[int, int, float]:
    """Indices [lo, hi] of the ``count``-fold sum of indices drawn from ``probs``
    outside of which lies at most ``tail_mass``/2 on each side, and the order of
    the bound on the upper tail (the tilt that centres the sum near hi): the Chernoff
    bound P(S ≥ a) ≤ M(λ)^count e^{−λa} (as dp-accounting's
    ``compute_self_convolve_bounds``), minimised over the order λ: from the
    order that is optimal for a normal sum of the same variance, by factors 2
    while the bound improves, then once by √2."""
    n = probs.size
    pos = np.flatnonzero(probs > 0)
    idx = pos.astype(float)
    w = probs[pos]
    logp = np.log(w)
    total = float(w.sum())
    mean = float(w @ idx) / total
    var = float(w @ (idx - mean) ** 2) / total
    log_tail = math.log(2.0 / tail_mass)
    base = min(math.sqrt(2.0 * log_tail / (count * max(var, 1e-12))), 350.0 / n)

    def bound(lam: float) -> float:
        a = lam * idx + logp
        m = float(a.max())
        b = (count * (m + math.log(float(np.exp(a - m).sum()))) + log_tail) / lam
        return b if math.isfinite(b) else math.copysign(math.inf, lam)

    ends, orders = [], []
    for sign in (1.0, -1.0):
        better = (lambda u, v: u < v) if sign > 0 else (lambda u, v: u > v)
        lam, val = sign * base, bound(sign * base)
        for factor in (2.0, 0.5):
            while abs(lam * factor) * n < 700.0:  # larger orders tilt beyond e^700
                v = bound(lam * factor)
                if not better(v, val):
                    break
                lam, val = lam * factor, v
        for factor in (2.0**0.5, 2.0**-0.5):
            v = bound(lam * factor)
            if better(v, val):
                lam, val = lam * factor, v
                break
        ends.append(val)
        orders.append(lam)
    hi = min((n - 1) * count, math.ceil(ends[0]))
    lo = max(0, math.floor(ends[1]))
    return lo, max(hi, lo), orders[0]


def _power(z: np.ndarray, count: int) -> np.ndarray:
    """z**count elementwise by repeated squaring (numpy's complex power falls back
    to exp(count·log z) for count ≥ 100, several times slower)."""
    result = None
    base = z
    while True:
        if count & 1:
            result = base.copy() if result is None else np.multiply(result, base, out=result)
        count >>= 1
        if not count:
            return result
        base = base * base if base is z else np.multiply(base, base, out=base)


def _fft_power(probs: np.ndarray, count: int, tail_mass: float) -> tuple[int, np.ndarray, float]:
    """(lo, out, λ): out[j] ≈ P(S = lo + j), S the sum of ``count`` indices from
    ``probs``; λ the Chernoff order of the upper end of the window."""
    lo, hi, lam = _window(probs, count, tail_mass)
    out_len = hi - lo + 1
    L = _fast_len(max(out_len, probs.size))
    out = np.fft.irfft(_power(np.fft.rfft(probs, L), count), L)
    return lo, np.roll(out, -(lo % L))[:out_len], lam


#: self-compositions at least this long also get tilted FFTs (accurate tails)
_TILT_MIN_COUNT = 8
#: a probability is re-estimated where its relative rounding error exceeds this
_TARGET_ERROR = 1e-4


def self_compose(
    pmf: DensePmf, count: int, tail_mass: float = TAIL_MASS, *, tilt: bool = True
) -> DensePmf:
    """The PMF of the sum of ``count`` independent losses from ``pmf`` (FFT power).

    The FFT power computes every probability with an absolute rounding error
    of roughly ``count``·2⁻⁵³ over the width of the result, which swamps the
    upper tail that a small δ reads (δ ≈ 10⁻¹³ after 10⁴–10⁵ steps).  For
    ``count`` ≥ 8 the power is also computed for exponentially tilted PMFs
    p̃ₖ = pₖe^{λk}/M(λ) (M the moment generating function) and untilted,
    P(S = s) = P̃(S = s)·M(λ)^count·e^{−λs}.  The relative rounding error of an
    estimate at s is its noise level (read off the negative entries of the FFT
    output, which are pure rounding) over P̃(S = s), i.e. its absolute error
    is the noise level times the untilting factor — for s above the tilted
    mean at most a Chernoff bound on P(S ≥ s).  Each probability is taken from
    the estimate with the smallest absolute error.  The first tilt is the
    order of the Chernoff bound that ends the window; while some s between
    the mode and the end of the window has an error above 10⁻⁴ of the tail
    mass above it, a tilt centred there (its saddle point) is added, at most
    four in all (Esscher tilting: the law is the same, only the rounding
    differs).  ``tilt=False`` skips them (a calibration's coarse guesses).
    """
    if count == 1:
        return pmf
    probs = pmf.probs
    lo, out, lam = _fft_power(probs, count, tail_mass)
    if tilt and count >= _TILT_MIN_COUNT and probs.size > 1 and lam > 0.0:
        out = _tilted_tails(probs, count, tail_mass, lam, lo, out)
    np.maximum(out, 0.0, out=out)
    inf = tail_mass - math.expm1(count * math.log1p(-pmf.inf_mass))
    return DensePmf(pmf.h, pmf.lower * count + lo, out, min(1.0, inf))


def _tilt(probs: np.ndarray, lam: float, centre: float = 0.0) -> tuple[np.ndarray, float]:
    """(p̃, log Σₖ pₖe^{λ(k − centre)}): the PMF tilted by e^{λk}, normalised, and
    its log-normaliser relative to ``centre`` (which keeps it a small number)."""
    with np.errstate(divide="ignore"):
        a = lam * (np.arange(probs.size) - centre) + np.log(probs)
    m = float(a.max())
    tilted = np.exp(a - m)
    norm = float(tilted.sum())
    return tilted / norm, m + math.log(norm)


def _saddle(probs: np.ndarray, target_mean: float, lam_hi: float) -> float:
    """λ in [λ_hi e⁻¹², λ_hi e⁴] whose tilted mean is about ``target_mean``
    (bisection on log λ; the tilted mean increases with λ)."""
    k = np.arange(probs.size)
    lo, hi = math.log(lam_hi) - 12.0, min(math.log(lam_hi) + 4.0, math.log(700.0 / probs.size))
    for _ in range(14):
        mid = 0.5 * (lo + hi)
        tilted, _ = _tilt(probs, math.exp(mid))
        if float(tilted @ k) < target_mean:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


def _noise(out: np.ndarray) -> float:
    """Rounding-noise level of an FFT output: its most negative entry (a
    probability cannot be negative), at least 2⁻⁵³ of its largest."""
    return max(-float(out.min()), 2.0**-53 * float(out.max()), 1e-300)


def _tilted_tails(probs, count, tail_mass, lam, lo, out) -> np.ndarray:
    """``out`` (P(S = lo + j) by the plain FFT power) with every probability taken
    from the estimate with the smallest absolute rounding error."""
    s = lo + np.arange(out.size)
    value = out.copy()
    error = np.full(out.size, _noise(out))  # absolute error of the chosen estimate
    mode = int(np.argmax(out))
    tried: list[float] = []
    for _ in range(4):
        tried.append(lam)
        tilted, _ = _tilt(probs, lam)
        centre = float(tilted @ np.arange(probs.size))  # the tilted mean
        _, log_mgf = _tilt(probs, lam, centre)
        lo2, out2, _ = _fft_power(tilted, count, tail_mass)
        a, b = max(lo, lo2), min(lo + out.size, lo2 + out2.size)
        if a < b:
            # P(S = s) = P̃(S = s)·exp(back(s)), back = count·log M_c − λ(s − count·centre)
            back = count * log_mgf - lam * (s[a - lo : b - lo] - count * centre)
            err = _noise(out2) * np.exp(np.minimum(back, 700.0))
            better = np.flatnonzero(err < error[a - lo : b - lo])
            idx = better + (a - lo)
            error[idx] = err[better]
            value[idx] = out2[idx + (lo - lo2)] * np.exp(back[better])
        # the upper tail beyond each point, and the points whose error is not small
        # against it
        tail = np.cumsum(np.maximum(value[mode:], 0.0)[::-1])[::-1]
        weak = np.flatnonzero(error[mode:] > _TARGET_ERROR * tail)
        if weak.size == 0:
            break
        gap = s[mode + int(weak[weak.size // 2])]
        lam = _saddle(probs, gap / count, tried[0])
        if any(abs(math.log(lam / t)) < 0.05 for t in tried):
            break
    return value


# ------------------------------------------------------------------ ε(δ) and δ(ε)
def delta_for_epsilon(pmf: DensePmf, epsilon: float) -> float:
    """δ(ε) = P(L = ∞) + Σ_{ℓ > ε} P(L = ℓ)(1 − e^{ε−ℓ}) (the hockey-stick divergence)."""
    if math.isinf(epsilon):
        return pmf.inf_mass if epsilon > 0 else 1.0
    losses = pmf.losses
    above = losses > epsilon
    d = pmf.inf_mass + float(-np.expm1(epsilon - losses[above]) @ pmf.probs[above])
    return min(1.0, max(0.0, d))


def _tail_weights(probs: np.ndarray, h: float) -> np.ndarray:
    """W_k = Σ_{j ≥ k} p_j e^{−(j−k)h}, computed in blocks (no overflow)."""
    n = probs.size
    W = np.empty(n)
    block = max(1, int(600.0 / h))
    carry = 0.0
    for k1 in range(n, 0, -block):
        k0 = max(0, k1 - block)
        e = np.exp(-h * np.arange(k1 - k0))  # e^{−(j−k0)h}
        s = np.cumsum((probs[k0:k1] * e)[::-1])[::-1]
        W[k0:k1] = s / e
        if carry:
            W[k0:k1] += carry * np.exp(-h * (k1 - np.arange(k0, k1)))
        carry = W[k0]
    return W


def epsilon_for_delta(pmf: DensePmf, delta: float) -> float:
    """Smallest ε ≥ 0 with δ(ε) ≤ ``delta`` (∞ if the mass at +∞ exceeds it).

    Exact for the discrete PMF: on [ℓ_{k−1}, ℓ_k], δ(ε) = U_k − e^{ε−ℓ_k}W_k with
    U_k = P(L = ∞) + Σ_{j≥k} p_j and W_k = Σ_{j≥k} p_j e^{ℓ_k−ℓ_j}, solved for ε
    (dp-accounting's ``_get_epsilon_for_delta``, vectorised).
    """
    if pmf.inf_mass > delta:
        return math.inf
    p, h = pmf.probs, pmf.h
    U = pmf.inf_mass + np.cumsum(p[::-1])[::-1]
    W = _tail_weights(p, h)
    # D_k = δ(ℓ_k) = U_{k+1} − e^{−h} W_{k+1}; D_{last} = P(L = ∞) ≤ delta
    D = np.append(U[1:] - math.exp(-h) * W[1:], pmf.inf_mass)
    k = int(np.argmax(D <= delta))
    if W[k] <= 0.0 or U[k] <= delta:
        return max(0.0, (pmf.lower + k) * h)
    eps = (pmf.lower + k) * h + math.log((U[k] - delta) / W[k])
    return max(0.0, eps)


# ------------------------------------------------------------------ connect the dots
def _connect_the_dots(h: float, lo: int, deltas: np.ndarray) -> DensePmf:
    """Pessimistic connect-the-dots PMF on losses lo·h, …, (lo+m−1)·h from the
    exact δ(ε) at those losses (Doroshenko et al. 2022, Algorithm 1, fixed gap;
    dp-accounting's ``create_pmf_pessimistic_connect_dots_fixed_gap``)."""
    d = np.minimum.accumulate(np.clip(deltas, 0.0, 1.0))
    if d.size == 1:
        return DensePmf(h, lo, np.array([1.0 - d[0]]), float(d[0]))
    dd = np.diff(d)
    em1 = math.expm1(h)
    p = np.empty_like(d)
    p[0] = 1.0 - d[0] + dd[0] / em1
    p[1:-1] = (dd[1:] - dd[:-1] * math.exp(h)) / em1
    p[-1] = dd[-1] / math.expm1(-h)
    np.maximum(p, 0.0, out=p)
    return DensePmf(h, lo, p, float(d[-1]))


def _grid(h: float, eps_lower: float, eps_upper: float) -> tuple[int, np.ndarray]:
    lo = math.floor(eps_lower / h)
    hi = max(lo, math.ceil(eps_upper / h))
    return lo, np.arange(lo, hi + 1) * h


def _log_mix(q: float, u):
    """log(1 − q + q·e^u), elementwise (q in (0, 1])."""
    if q == 1.0:
        return np.asarray(u, dtype=float)
    return np.logaddexp(math.log1p(-q), math.log(q) + np.asarray(u, dtype=float))


def _log_expm1_plus(eps: np.ndarray, q: float) -> np.ndarray:
    """log(e^ε − 1 + q) where it is > −∞ (ε > log(1 − q))."""
    if q == 1.0:
        return eps.copy()
    big = eps > 1.0
    out = np.empty_like(eps)
    out[big] = eps[big] + np.log1p((q - 1.0) * np.exp(-eps[big]))
    with np.errstate(divide="ignore"):  # −∞ at ε = log(1 − q)
        out[~big] = np.log(np.expm1(eps[~big]) + q)
    return out


def _gauss_delta_remove(eps: np.ndarray, s: float, q: float) -> np.ndarray:
    """δ(ε) of P = (1−q)N(0,s²) + qN(1,s²) against Q = N(0,s²)."""
    out = -np.expm1(eps)  # ε ≤ log(1−q): every outcome counts
    m = eps > (math.log1p(-q) if q < 1.0 else -math.inf)
    e = eps[m]
    u = _log_expm1_plus(e, q) - math.log(q)  # (2x* − 1)/(2s²), L(x*) = ε
    x = s * s * u + 0.5
    la = norm_logsf((x - 1.0) / s)
    lb = norm_logsf(x / s)
    with np.errstate(over="ignore", invalid="ignore"):
        d = q * np.exp(la) * -np.expm1(np.minimum(u + lb - la, 0.0))
    out[m] = np.where(np.isneginf(la), 0.0, d)  # 0 ≤ δ ≤ qΦ̄((x−1)/s) = 0 there
    return out


def _gauss_delta_add(eps: np.ndarray, s: float, q: float) -> np.ndarray:
    """δ(ε) of P = N(0,s²) against Q = (1−q)N(0,s²) + qN(1,s²)."""
    out = np.zeros_like(eps)
    m = eps < (-math.log1p(-q) if q < 1.0 else math.inf)
    e = eps[m]
    u = _log_expm1_plus(-e, q) - math.log(q)  # (2x_a − 1)/(2s²)
    x = s * s * u + 0.5
    la = norm_logsf(-x / s)  # log Φ(x_a/s)
    lb = norm_logsf((1.0 - x) / s)  # log Φ((x_a − 1)/s)
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.exp(e + math.log(q) + u + la) * -np.expm1(np.minimum(lb - u - la, 0.0))
    out[m] = np.where(np.isneginf(la), 0.0, d)  # 0 ≤ δ ≤ e^ε q e^u Φ(x_a/s) = 0 there
    return out


def _log_asinh_of_sinh(log_c: float, eps: np.ndarray) -> np.ndarray:
    """asinh(c·sinh(ε/2)) for c = e^{log_c} > 0, without overflow."""
    a = np.abs(eps) / 2.0
    out = np.zeros_like(eps)
    pos = a > 0
    ap = a[pos]
    log_u = log_c + ap + np.log1p(-np.exp(-2.0 * ap)) - math.log(2.0)  # log(c sinh a)
    small = log_u < 0.0
    res = np.empty_like(ap)
    res[small] = np.arcsinh(np.exp(log_u[small]))
    lu = log_u[~small]
    res[~small] = lu + np.log1p(np.sqrt(1.0 + np.exp(-2.0 * lu)))
    out[pos] = res
    return np.sign(eps) * out


def _gauss_delta_replace(eps: np.ndarray, s: float, q: float) -> np.ndarray:
    """δ(ε) of P = (1−q)N(0,s²) + qN(1,s²) against Q = (1−q)N(0,s²) + qN(−1,s²)."""
    if q == 1.0:
        x = s * s * eps / 2.0
    else:
        log_c = math.log1p(-q) - math.log(q) + 0.5 / (s * s)
        x = s * s * (eps / 2.0 + _log_asinh_of_sinh(log_c, eps))
    la = norm_logsf((x - 1.0) / s)
    lb = norm_logsf((x + 1.0) / s)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # δ = qΦ̄((x−1)/s) − qe^εΦ̄((x+1)/s) − (1−q)(e^ε − 1)Φ̄(x/s)
        rest = np.exp(eps + lb - la)
        if q < 1.0:
            lc = norm_logsf(x / s)
            # (e^ε − 1) in logs: e^ε overflows past ε ≈ 709 while the product is small
            big = eps > 30.0
            log_em1 = np.where(big, eps, np.log(np.abs(np.expm1(np.where(big, 0.0, eps)))))
            rest = rest + np.sign(eps) * np.exp(math.log1p(-q) - math.log(q) + lc - la + log_em1)
        out = q * np.exp(la) * (1.0 - rest)
    return np.where(np.isneginf(la), 0.0, out)  # 0 ≤ δ ≤ qΦ̄((x−1)/s) = 0 there


_GAUSS_DELTA = {
    "remove": _gauss_delta_remove,
    "add": _gauss_delta_add,
    "replace": _gauss_delta_replace,
}


def _gauss_loss(x: float, s: float, q: float, kind: str) -> float:
    """The privacy loss L(x) = log(P/Q)(x) of the pair ``kind``."""
    u = (2.0 * x - 1.0) / (2.0 * s * s)
    if kind == "remove":
        return float(_log_mix(q, u))
    if kind == "add":
        return -float(_log_mix(q, u))
    return float(_log_mix(q, u) - _log_mix(q, (-2.0 * x - 1.0) / (2.0 * s * s)))


def _gauss_pmf(s: float, q: float, kind: str, h: float) -> DensePmf:
    # P's bulk: x in [−z s, z s + 1] (dp-accounting's truncation, mirrored)
    x_lo, x_hi = -TAIL_Z * s, TAIL_Z * s + 1.0
    a, b = _gauss_loss(x_lo, s, q, kind), _gauss_loss(x_hi, s, q, kind)
    lo, eps = _grid(h, min(a, b), max(a, b))
    return _connect_the_dots(h, lo, _GAUSS_DELTA[kind](eps, s, q))


def gaussian_pld(std: float, sampling_rate: float, relation: str, h: float) -> Pld:
    """Connect-the-dots PLD of a (Poisson-subsampled) Gaussian mechanism.

    Parameters
    ----------
    std : float
        Noise standard deviation relative to the shift (> 0): the noise
        multiplier under add/remove (shift = sensitivity), twice the noise
        multiplier under replace-one (shift = half the sensitivity).
    sampling_rate : float
        q in (0, 1].
    relation : {"add-remove", "replace-one"}
        ``"add-remove"``: the pairs "remove" and "add" (asymmetric when q < 1);
        ``"replace-one"``: the pair "replace" (symmetric).  At q = 1 both are
        the Gaussian mechanism N(0, std²) against N(1, std²) (replace-one:
        N(−1, std²) against N(1, std²)).
    h : float
        Grid step.

    Returns
    -------
    Pld
    """
    q = float(sampling_rate)
    if relation == "replace-one":
        return Pld(_gauss_pmf(std, q, "replace", h))
    if q == 1.0:
        return Pld(_gauss_pmf(std, 1.0, "remove", h))
    return Pld(_gauss_pmf(std, q, "remove", h), _gauss_pmf(std, q, "add", h))


def fixed_size_gaussian_pld(std: float, sampling_rate: float, h: float) -> Pld:
    """Connect-the-dots PLD of a Gaussian mechanism on a fixed-size batch drawn
    without replacement, under replace-one neighbours.

    Parameters
    ----------
    std : float
        Noise standard deviation relative to the sensitivity of the batch sum
        (the replace-one noise multiplier z: the sum changes by up to 2C when a
        record is replaced, the noise has std z·2C).
    sampling_rate : float
        γ = m/n in (0, 1] (batch size over the public number of records).
    h : float
        Grid step.

    Returns
    -------
    Pld
        One PMF whose privacy profile on the grid is
        δ*(ε) = max(δ_R(ε), δ_A(ε)), δ_R the profile of
        R = (1−γ)N(0, std²) + γN(1, std²) against N(0, std²) (the pair
        "remove") and δ_A that of the reverse pair ("add").

    Notes
    -----
    Why this pair dominates (derivation, replace-one, batch B uniform among the
    m-subsets of n records; D, D′ differ in record i; gᵢ, g′ᵢ the clipped
    contributions, ‖gᵢ − g′ᵢ‖ ≤ Δ = 2C).  Couple the two runs through the same B.
    With probability 1 − γ, i ∉ B and the two outputs have the same law A;
    otherwise the outputs are U (with gᵢ) and V (with g′ᵢ), the other m − 1
    records of B uniform among the rest.  So M(D) = (1−γ)A + γU,
    M(D′) = (1−γ)A + γV, and by the advanced joint convexity of the
    hockey-stick divergence (Balle, Barthe & Gaboardi 2018, Theorem 2 — their
    Theorem 9 is this bound for the substitution relation) for α′ = 1 + γ(α−1),
    α ≥ 1, β = α′/α:
    H_α′(M(D)‖M(D′)) ≤ γ·[(1−β)H_α(U‖A) + βH_α(U‖V)] ≤ γ·H_α(N(0,s²)‖N(Δ,s²))
    — A is U with gᵢ replaced by a uniformly random other record of the
    batch (a coupling), so both divergences are those of two Gaussians at
    distance ≤ Δ.  The right-hand side is H_α′(R‖N(0, s²)) with the shift
    Δ = 2C and std s = z·2C, i.e. the "remove" pair of Poisson subsampling
    (rate γ) at std z relative to a unit shift: the bound for every ε ≥ 0.  It
    is attained (others all equal to g′ᵢ = −gᵢ: M(D′) = N(−mC, s²) exactly,
    M(D) its mixture with N(−mC + 2C, s²)), so nothing tighter holds.  For
    α < 1, H_α(P‖Q) = 1 − α + αH_{1/α}(Q‖P), and swapping D and D′ (the
    relation is symmetric) gives H_α ≤ H_α(N(0, s²)‖R): the "add" pair.  A
    single pair whose profile dominates both is the one with profile
    max(δ_R, δ_A) — the tradeoff function C_γ(G_{1/z}) = min{f_γ, f_γ⁻¹}**
    of Dong, Roth & Su (2022, "Gaussian differential privacy", JRSS B,
    §4.2, the subsampling theorem (Theorem 4.2): sampling without replacement
    of a fixed size, neighbours of the same size), whose conjugate is the
    maximum of the two profiles; its PLD composes by FFT like every other
    here.  The maximum is convex in e^ε (a maximum of convex profiles), so
    the connect-the-dots PMF built from its values on the grid is pessimistic
    (Doroshenko et al. 2022, Algorithm 1).  Compared with Poisson sampling
    at the same rate under replace-one (the pair (1−γ)N(0, (2z)²) + γN(±1,
    (2z)²)), the two agree to first order in γ (both PLDs have variance
    ≈ γ²/z² per step), so fixed-size batches cost about the same noise.
    """
    q, s = float(sampling_rate), float(std)
    if q == 1.0:
        return gaussian_pld(s, 1.0, "add-remove", h)
    x_lo, x_hi = -TAIL_Z * s, TAIL_Z * s + 1.0
    ends = [_gauss_loss(x, s, q, k) for x in (x_lo, x_hi) for k in ("remove", "add")]
    lo, eps = _grid(h, min(ends), max(ends))
    deltas = np.maximum(_gauss_delta_remove(eps, s, q), _gauss_delta_add(eps, s, q))
    return Pld(_connect_the_dots(h, lo, deltas))


# ------------------------------------------------------------------ Laplace, (ε, δ)
def _laplace_delta(eps: np.ndarray, b: float, q: float, kind: str) -> np.ndarray:
    """δ(ε) of the Laplace pairs (scale b, shift 1): "remove" P = (1−q)Lap(0,b) +
    qLap(1,b) against Q = Lap(0,b); "add" the reverse pair.  r(x) = (|x| − |x−1|)/b
    is the unsampled log-ratio, ∈ [−1/b, 1/b], = (2x − 1)/b on [0, 1]."""
    out = np.empty_like(eps)
    lq = math.log(q)
    if kind == "remove":
        out[:] = -np.expm1(eps)
        m = eps > (math.log1p(-q) if q < 1.0 else -math.inf)
        log_g = _log_expm1_plus(eps[m], q)  # log(e^ε − 1 + q)
        r = log_g - lq  # r*: L(x) > ε ⟺ r(x) > r*
        x = (1.0 + b * np.clip(r, -1.0 / b, 1.0 / b)) / 2.0
        # δ = P(X > x*) − e^ε Q(X > x*) = q(1 − ½e^{(x*−1)/b}) − (e^ε − 1 + q)·½e^{−x*/b}
        val = q * (1.0 - 0.5 * np.exp((x - 1.0) / b)) - 0.5 * np.exp(log_g - x / b)
        val = np.where(r < -1.0 / b, -np.expm1(eps[m]), val)
        out[m] = np.where(r >= 1.0 / b, 0.0, val)
        return np.maximum(out, 0.0)
    out[:] = 0.0
    m = eps < (-math.log1p(-q) if q < 1.0 else math.inf)
    e = eps[m]
    ra = _log_expm1_plus(-e, q) - lq
    x = (1.0 + b * np.clip(ra, -1.0 / b, 1.0 / b)) / 2.0
    # δ = (1 − e^ε(1−q))(1 − ½e^{−x/b}) − e^ε q ½e^{(x−1)/b}
    val = (1.0 - np.exp(e) * (1.0 - q)) * (1.0 - 0.5 * np.exp(-x / b)) - np.exp(
        e + lq
    ) * 0.5 * np.exp((x - 1.0) / b)
    val = np.where(ra > 1.0 / b, -np.expm1(e), val)
    out[m] = np.where(ra <= -1.0 / b, 0.0, val)
    return np.maximum(out, 0.0)


def laplace_pld(scale: float, sampling_rate: float, h: float) -> Pld:
    """Connect-the-dots PLD of a (Poisson-subsampled, add/remove) Laplace
    mechanism with scale ``scale`` relative to the sensitivity (symmetric at q = 1)."""
    q, b = float(sampling_rate), float(scale)
    hi = float(_log_mix(q, 1.0 / b))
    low = float(_log_mix(q, -1.0 / b))
    lo, eps = _grid(h, low, hi)
    remove = _connect_the_dots(h, lo, _laplace_delta(eps, b, q, "remove"))
    if q == 1.0:
        return Pld(remove)
    lo, eps = _grid(h, -hi, -low)
    return Pld(remove, _connect_the_dots(h, lo, _laplace_delta(eps, b, q, "add")))


def epsilon_delta_pld(epsilon: float, delta: float, h: float) -> Pld:
    """Pessimistic PLD of any (ε, δ)-DP mechanism: +∞ w.p. δ, ε w.p.
    (1−δ)/(1+e^{−ε}), −ε w.p. (1−δ)/(1+e^ε), losses rounded up to the grid
    (Kairouz, Oh & Viswanath 2015, Thm 2.1; dp-accounting's
    ``from_privacy_parameters``)."""
    hi, lo = math.ceil(epsilon / h), math.ceil(-epsilon / h)
    probs = np.zeros(hi - lo + 1)
    probs[-1] += (1.0 - delta) / (1.0 + math.exp(-epsilon))
    probs[0] += (1.0 - delta) / (1.0 + math.exp(epsilon))
    return Pld(DensePmf(h, lo, probs, float(delta)))
