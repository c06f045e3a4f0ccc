"""PATE aggregators: noisy arg-max of teacher vote histograms, with data-independent accounting.

The aggregation step of PATE (the teacher/student pipeline is :mod:`dperm.algorithms.pate`):
for each public query the k teachers' predictions form a vote histogram n(x) ∈ ℕ^C
(C public classes, Σ_j n_j(x) = k), and an aggregator releases one label (or abstains).
Each aggregator comes with its event (what m answers spend) and its calibration (the
noise that meets a target (ε, δ) for m queries, computed from public quantities only).

Papernot, Abadi, Erlingsson, Goodfellow, Talwar, "Semi-supervised Knowledge Transfer for
Deep Learning from Private Training Data", ICLR 2017 (PATE, LNMax);
Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable Private Learning with
PATE", ICLR 2018 (GNMax, Confident-GNMax).

**Neighbouring relation: replace-one** on the private records.  The teachers are
trained on a partition that depends on (n, k, the generator) only, so on neighbouring
D and D′ exactly one teacher t may differ (:mod:`dperm.algorithms.pate`).

**Sensitivity** [PATE-1].  Teacher t alone may change, and on a query x it casts exactly
one vote, for class a on D and class b on D′: n(x; D′) − n(x; D) = e_b − e_a.  So each
histogram changes by at most 1 in at most two bins: ℓ1 sensitivity 2, ℓ2 sensitivity √2,
ℓ∞ sensitivity 1 — and ``max_j n_j`` changes by at most 1.  The same teacher changes on
*every* query at once, so m queries are composed (adaptive composition holds for any
correlation between the per-query functions).

**Aggregators** (one release per query, noise drawn independently per query):

* ``"gnmax"`` [PATE-2] — argmax_j (n_j + N(0, σ²)).  The noisy histogram is the Gaussian
  mechanism with ℓ2 sensitivity √2, i.e. ``Gaussian(noise_multiplier=σ/√2)``, RDP
  λ/(2(σ/√2)²) = λ/σ² — the data-independent bound of Papernot et al. 2018,
  Proposition 8 (Mironov 2017, Proposition 7); the argmax is post-processing.  m queries:
  ``SelfComposed(Gaussian(σ/√2), m)``; σ from :func:`~dperm.accounting.calibrate_noise`.
* ``"lnmax"`` [PATE-3] — argmax_j (n_j + Lap(b)).  Report-noisy-max with Lap(1/ε) is
  ε-DP for counts that move by ≤ 1 *all in the same direction* (Dwork & Roth 2014,
  Claim 3.9, add/remove-one).  A replace-one change moves one vote: a removal then an
  addition, two such monotone steps, so Lap(b) is (2/b)-DP per query — the (2γ, 0) per
  query, γ = 1/b, of Papernot et al. 2017, Section 3.  We implement the same noise and
  account it through the released-histogram argument, which gives the identical pure ε
  and is exact for the tighter accountants: the noisy histogram n + Lap(b)^C differs on
  D, D′ by e_b − e_a, i.e. it is the product of two scalar Laplace mechanisms with
  sensitivity 1 (coordinates a and b) and C − 2 identical ones; its privacy loss is
  *exactly* that of ``SelfComposed(Laplace(b), 2)`` (pure ε = 2/b), and the argmax is
  post-processing.  m queries: ``SelfComposed(SelfComposed(Laplace(b), 2), m)``.  The 2/b
  is tight: with two classes the argmax is 1[n₁ − n₂ + L₁ − L₂ > 0], the gap moves by 2
  and P[L₁ − L₂ > t − 2]/P[L₁ − L₂ > t] → e^{2/b} as t → ∞.
* ``"ptr"`` [PATE-4] — propose-test-release on the distance to instability (Dwork & Lei,
  STOC 2009; Dwork & Roth 2014, Section 7.3, "distance to instability", the algorithm A_dist;
  Thakurta & Smith, COLT 2013).  With n₁ ≥ n₂ the top two counts and g = n₁ − n₂,
  d = ⌈g/2⌉ − 1.  One changed record moves one vote, so n₁ and n₂ (order statistics)
  each move by ≤ 1, g by ≤ 2 and d by ≤ 1 (sensitivity 1); and d ≥ 1 ⇒ g ≥ 3 ⇒ after one
  vote change the top class still leads by ≥ 1, so the argmax (first index on ties) is
  the same on every neighbour.  Release the argmax iff d + Lap(1/ε₀) > T, else abstain
  (−1), with T = max(0, ln(1/(2δ₀))/ε₀).  Proof (D&R's proof for A_dist, kept exact): if d(D) ≥ 1
  and d(D′) ≥ 1 the label is the same and the output is post-processing of a Laplace
  test of a sensitivity-1 statistic (ε₀-DP); if d(D) ≤ 0, D releases with probability
  ≤ P[Lap(1/ε₀) > T] = ½e^{−ε₀T} = δ₀, and its abstentions are ε₀-close to D′'s: so each
  query is (ε₀, δ₀)-DP.  (D&R's threshold ln(1/δ)/ε is also valid — it bounds that
  probability by δ/2 — we use the exact one.)  m queries:
  ``SelfComposed(EpsilonDelta(ε₀, δ₀), m)``, composed by the basic / advanced / optimal
  (KOV) accountants; (ε₀, δ₀) from a grid of δ-splits, each calibrated through
  :func:`~dperm.accounting.calibrate_noise`, keeping the smallest threshold T.
* ``"confident-gnmax"`` [PATE-5] — the data-independent form of Confident-GNMax
  (Papernot et al. 2018, Algorithm 1): answer iff max_j n_j + N(0, σ₁²) ≥ threshold, then
  argmax_j (n_j + N(0, σ₂²)).  max_j n_j has sensitivity 1, so the check is
  ``Gaussian(σ₁)``; the answer is GNMax, ``Gaussian(σ₂/√2)``; both noises are drawn for
  every query and *both are charged for every query*:
  ``SelfComposed(Composed((Gaussian(σ₁), Gaussian(σ₂/√2))), m)``.  This is exact
  composition with no data-dependent step — and therefore costs more per query than plain
  GNMax.  The paper's cheaper accounting (GNMax charged only on answered queries, and the
  data-dependent bound) is not implemented.

Not implemented: the data-dependent (smooth-sensitivity) analysis of Papernot et al. 2018
(Theorem 6 and Section 4): the ε it certifies is a function of the vote histograms, so
releasing it leaks, and it must itself be privatized (their smooth-sensitivity release);
every guarantee here is data-independent.  See ``docs/pate.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .._rng import RandomState, check_random_state
from .._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_positive,
    float_array,
)
from ..accounting.base import Accountant
from ..accounting.calibrate import calibrate_noise
from ..accounting.events import (
    Composed,
    DpEvent,
    EpsilonDelta,
    Gaussian,
    Laplace,
    SelfComposed,
)
from ..accounting.registry import accountant_factory
from ..exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
)
from ..mechanisms import gaussian_noise, laplace_noise

__all__ = [
    "ABSTAIN",
    "AccountantSpec",
    "calibrate_confident_gnmax",
    "calibrate_gnmax",
    "calibrate_lnmax",
    "calibrate_ptr",
    "confident_gnmax",
    "confident_gnmax_event",
    "distance_to_instability",
    "gnmax",
    "gnmax_event",
    "lnmax",
    "lnmax_event",
    "ptr_argmax",
    "ptr_event",
    "ptr_threshold",
]

#: Label index returned for a query the aggregator did not answer (⊥).
ABSTAIN = -1

#: Fractions of δ given to the per-query δ₀·m of PTR (the rest is the composition slack).
_PTR_DELTA_SPLITS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0)

_SQRT2 = math.sqrt(2.0)


# ============================================================================ aggregators
def _check_votes(votes, integer: bool = False) -> np.ndarray:
    v = float_array(votes, "votes")
    if v.ndim != 2 or v.shape[1] < 2:
        raise InvalidDataError(
            f"votes must be a 2-D array of shape (n_queries, n_classes ≥ 2), got shape {v.shape}"
        )
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise InvalidDataError("votes must be finite, non-negative counts")
    if integer and np.any(v != np.round(v)):
        raise InvalidDataError("votes must be integer counts for the distance to instability")
    return v


def _noisy_argmax(votes, noise, scale: float, name: str, rng, return_noisy_votes: bool):
    """Report-noisy-max: the index of the largest count of every query after
    ``noise(shape, scale, rng)`` is added (and the noisy votes when asked).

    Raises
    ------
    InvalidDataError, InvalidPrivacyParameter
        Bad votes, or ``scale`` (named ``name``) not a finite positive number.
    """
    v = _check_votes(votes)
    scale = check_positive(scale, name)
    noisy = v + noise(v.shape, scale, check_random_state(rng))
    labels = np.argmax(noisy, axis=1).astype(np.int64)
    return (labels, noisy) if return_noisy_votes else labels


def gnmax(votes, sigma: float, rng: RandomState, *, return_noisy_votes: bool = False):
    """GNMax: argmax_j (n_j + N(0, σ²)) per query (Papernot et al. 2018, Section 4.1).

    Parameters
    ----------
    votes : array-like of shape (m, C), C ≥ 2
        Vote histograms (:func:`teacher_votes`).
    sigma : float > 0
        Standard deviation of the Gaussian noise added to every count (in votes).
    rng : numpy.random.Generator, int or None
    return_noisy_votes : bool, default False
        Also return the noisy histogram (for tests; releasing it is the Gaussian
        mechanism itself — the same event, since the argmax is post-processing of it).

    Returns
    -------
    labels : ndarray of int64, shape (m,)
        Column index of the noisy maximum.
    noisy_votes : ndarray of shape (m, C), only if ``return_noisy_votes``

    Notes
    -----
    Replace-one ℓ2 sensitivity of a histogram is √2, so m queries are
    :func:`gnmax_event` = ``SelfComposed(Gaussian(σ/√2), m)``: RDP λ/σ² per query
    (Papernot et al. 2018, Proposition 8).

    Raises
    ------
    InvalidDataError, InvalidPrivacyParameter
    """
    return _noisy_argmax(votes, gaussian_noise, sigma, "sigma", rng, return_noisy_votes)


def lnmax(votes, scale: float, rng: RandomState, *, return_noisy_votes: bool = False):
    """LNMax: argmax_j (n_j + Lap(b)) per query (Papernot et al. 2017, Section 2.1, b = 1/γ).

    Parameters
    ----------
    votes : array-like of shape (m, C), C ≥ 2
    scale : float > 0
        The Laplace scale b (in votes) added to every count.
    rng : numpy.random.Generator, int or None
    return_noisy_votes : bool, default False
        Also return the noisy histogram (for tests).

    Returns
    -------
    labels : ndarray of int64, shape (m,)
    noisy_votes : ndarray of shape (m, C), only if ``return_noisy_votes``

    Notes
    -----
    (2/b)-DP per query under replace-one (module docstring [PATE-3]; Dwork & Roth 2014,
    Claim 3.9 applied to the two monotone steps of a moved vote); event
    :func:`lnmax_event` = ``SelfComposed(SelfComposed(Laplace(b), 2), m)``.

    Raises
    ------
    InvalidDataError, InvalidPrivacyParameter
    """
    return _noisy_argmax(votes, laplace_noise, scale, "scale", rng, return_noisy_votes)


def distance_to_instability(votes) -> np.ndarray:
    """d = ⌈(n₁ − n₂)/2⌉ − 1 per query, n₁ ≥ n₂ the two largest counts.

    A lower bound on the number of records that must change before the plurality label
    can change (each changed record moves at most one vote, which moves the gap by at
    most 2), with replace-one sensitivity 1, and d ≥ 1 ⇒ the argmax is the same on
    every neighbour (module docstring [PATE-4]).  A tie gives d = −1.

    Parameters
    ----------
    votes : array-like of shape (m, C), integer counts, C ≥ 2

    Returns
    -------
    ndarray of int64, shape (m,)

    Raises
    ------
    InvalidDataError
    """
    v = _check_votes(votes, integer=True).astype(np.int64)
    top2 = np.partition(v, v.shape[1] - 2, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    return -((-gap) // 2) - 1


def _inverse_up(x: float) -> float:
    """The smallest float y with y ≥ 1/x exactly (a Laplace scale never below 1/ε)."""
    y = 1.0 / x
    while Fraction(y) * Fraction(x) < 1:
        y = math.nextafter(y, math.inf)
    return y


def ptr_threshold(epsilon0: float, delta0: float) -> float:
    """T = max(0, ln(1/(2δ₀))/ε₀), rounded up: P[Lap(1/ε₀) > T] = ½e^{−ε₀T} ≤ δ₀.

    Parameters
    ----------
    epsilon0 : float > 0
    delta0 : float in (0, 1)

    Raises
    ------
    InvalidPrivacyParameter
    """
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    delta0 = check_delta(delta0, "delta0", allow_zero=False)
    t = math.log(1.0 / (2.0 * delta0)) / epsilon0
    return 0.0 if t <= 0 else math.nextafter(t, math.inf)


def ptr_argmax(
    votes,
    epsilon0: float,
    delta0: float,
    rng: RandomState,
    *,
    return_distance: bool = False,
):
    """Propose-test-release of the plurality label, per query (Dwork & Roth 2014, Sec. 7.3).

    Release argmax_j n_j exactly iff d + Lap(1/ε₀) > T, else abstain (−1), with d from
    :func:`distance_to_instability` and T = :func:`ptr_threshold` (ε₀, δ₀).  Each query is
    (ε₀, δ₀)-DP under replace-one (module docstring [PATE-4]).

    Parameters
    ----------
    votes : array-like of shape (m, C), integer counts, C ≥ 2
    epsilon0 : float > 0
        Per-query ε₀ (the test noise is Lap(1/ε₀), its scale rounded up).
    delta0 : float in (0, 1)
        Per-query δ₀.
    rng : numpy.random.Generator, int or None
    return_distance : bool, default False
        Also return d (not private; for tests).

    Returns
    -------
    labels : ndarray of int64, shape (m,)
        The plurality index (first on ties) or −1.
    distance : ndarray of int64, shape (m,), only if ``return_distance``

    Raises
    ------
    InvalidDataError, InvalidPrivacyParameter
    """
    d = distance_to_instability(votes)
    threshold = ptr_threshold(epsilon0, delta0)
    noise = laplace_noise(d.shape, _inverse_up(float(epsilon0)), check_random_state(rng))
    plurality = np.argmax(np.asarray(votes, dtype=np.float64), axis=1).astype(np.int64)
    labels = np.where(d + noise > threshold, plurality, ABSTAIN).astype(np.int64)
    return (labels, d) if return_distance else labels


def confident_gnmax(
    votes, threshold: float, sigma1: float, sigma2: float, rng: RandomState
) -> np.ndarray:
    """Confident-GNMax (Papernot et al. 2018, Algorithm 1), data-independent form.

    Answer query i iff max_j n_ij + N(0, σ₁²) ≥ ``threshold``, with
    argmax_j (n_ij + N(0, σ₂²)); else abstain (−1).  Both noises are drawn for every
    query; the event :func:`confident_gnmax_event` charges both for every query.

    Parameters
    ----------
    votes : array-like of shape (m, C), C ≥ 2
    threshold : float
        Public vote threshold T.
    sigma1, sigma2 : float > 0
        Noise of the check (on the max count, sensitivity 1) and of the answer.
    rng : numpy.random.Generator, int or None

    Returns
    -------
    ndarray of int64, shape (m,)

    Raises
    ------
    InvalidDataError, InvalidPrivacyParameter
    """
    v = _check_votes(votes)
    threshold = float(threshold)
    if not math.isfinite(threshold):
        raise InvalidPrivacyParameter(f"threshold must be finite, got {threshold!r}")
    sigma1 = check_positive(sigma1, "sigma1")
    sigma2 = check_positive(sigma2, "sigma2")
    gen = check_random_state(rng)
    confident = v.max(axis=1) + gaussian_noise(v.shape[0], sigma1, gen) >= threshold
    answer = np.argmax(v + gaussian_noise(v.shape, sigma2, gen), axis=1)
    return np.where(confident, answer, ABSTAIN).astype(np.int64)


# ============================================================================ events
def _gnmax_multiplier(sigma: float) -> float:
    """The largest float z with z ≤ σ/√2 exactly (σ per ℓ2 sensitivity √2, rounded down)."""
    z = sigma / _SQRT2
    while 2 * Fraction(z) ** 2 > Fraction(sigma) ** 2:
        z = math.nextafter(z, 0.0)
    return z


def gnmax_event(sigma: float, n_queries: int = 1) -> DpEvent:
    """``SelfComposed(Gaussian(σ/√2), m)``: m GNMax answers with noise σ (replace-one).

    The histogram's ℓ2 sensitivity is √2, so the noise multiplier is σ/√2 (rounded
    down); RDP λ/σ² per query (Papernot et al. 2018, Proposition 8).

    Raises
    ------
    InvalidPrivacyParameter
    """
    sigma = check_positive(sigma, "sigma")
    m = check_count(n_queries, "n_queries")
    return SelfComposed(Gaussian(_gnmax_multiplier(sigma)), m)


def lnmax_event(scale: float, n_queries: int = 1) -> DpEvent:
    """``SelfComposed(SelfComposed(Laplace(b), 2), m)``: m LNMax answers with Lap(b).

    Per query the noisy histogram differs on neighbours in two coordinates by 1 each:
    exactly two scalar Laplace(b) mechanisms of sensitivity 1, (2/b)-DP (module
    docstring [PATE-3]).

    Raises
    ------
    InvalidPrivacyParameter
    """
    scale = check_positive(scale, "scale")
    m = check_count(n_queries, "n_queries")
    return SelfComposed(SelfComposed(Laplace(scale), 2), m)


def ptr_event(epsilon0: float, delta0: float, n_queries: int = 1) -> DpEvent:
    """``SelfComposed(EpsilonDelta(ε₀, δ₀), m)``: m propose-test-release answers.

    Raises
    ------
    InvalidPrivacyParameter
    """
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    delta0 = check_delta(delta0, "delta0", allow_zero=False)
    m = check_count(n_queries, "n_queries")
    return SelfComposed(EpsilonDelta(epsilon0, delta0), m)


def confident_gnmax_event(sigma1: float, sigma2: float, n_queries: int = 1) -> DpEvent:
    """``SelfComposed(Composed((Gaussian(σ₁), Gaussian(σ₂/√2))), m)``.

    The check adds N(0, σ₁²) to max_j n_j (sensitivity 1); the answer is GNMax with σ₂;
    both are charged on every query (no data-dependent accounting).

    Raises
    ------
    InvalidPrivacyParameter
        σ₁ or σ₂ ≤ 0, or ``n_queries`` not a positive integer.
    """
    sigma1 = check_positive(sigma1, "sigma1")
    sigma2 = check_positive(sigma2, "sigma2")
    m = check_count(n_queries, "n_queries")
    per_query = Composed((Gaussian(sigma1), Gaussian(_gnmax_multiplier(sigma2))))
    return SelfComposed(per_query, m)


# ============================================================================ calibration
AccountantSpec = str | Accountant | Callable[[], Accountant]


def _check_target(epsilon, delta, n_queries, *, allow_zero_delta: bool = False) -> int:
    """Validate the target (ε, δ) of a calibration; returns the number of queries m."""
    check_epsilon(epsilon)
    check_delta(delta, allow_zero=allow_zero_delta)
    return check_count(n_queries, "n_queries")


def calibrate_gnmax(
    epsilon: float, delta: float, n_queries: int, *, accountant: AccountantSpec = "rdp"
) -> float:
    """Smallest σ (votes) with ``gnmax_event(σ, m)`` certified (ε, δ)-DP by the accountant.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    m = _check_target(epsilon, delta, n_queries)
    return calibrate_noise(lambda s: gnmax_event(s, m), epsilon, delta, accountant=accountant)


def calibrate_lnmax(
    epsilon: float, delta: float, n_queries: int, *, accountant: AccountantSpec = "optimal"
) -> float:
    """Smallest Laplace scale b with ``lnmax_event(b, m)`` certified (ε, δ)-DP.

    With δ = 0 (or the ``"basic"`` accountant) this is b = 2m/ε up to the calibration
    tolerance; the ``"optimal"`` (KOV 2015) or ``"pld"`` accountants do better for δ > 0.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    m = _check_target(epsilon, delta, n_queries, allow_zero_delta=True)
    return calibrate_noise(lambda b: lnmax_event(b, m), epsilon, delta, accountant=accountant)


def calibrate_ptr(
    epsilon: float, delta: float, n_queries: int, *, accountant: AccountantSpec = "optimal"
) -> tuple[float, float]:
    """Per-query (ε₀, δ₀) of PTR with ``ptr_event(ε₀, δ₀, m)`` certified (ε, δ)-DP.

    For each split f in (0.05, 0.1, …, 1.0), δ₀ = f·δ/m and ε₀ is the largest value the
    accountant certifies (through :func:`~dperm.accounting.calibrate_noise` on 1/ε₀);
    the pair with the smallest release threshold :func:`ptr_threshold` is returned (a
    data-independent choice).

    Returns
    -------
    (epsilon0, delta0)

    Raises
    ------
    InvalidPrivacyParameter
        If no split is certified.
    UnknownNameError, UnsupportedEventError
        Unknown accountant, or one that cannot account (ε, δ) events (``"rdp"``, ``"pld"``).
    """
    m = _check_target(epsilon, delta, n_queries)
    factory = accountant_factory(accountant)
    best: tuple[float, float, float] | None = None
    for f in _PTR_DELTA_SPLITS:
        delta0 = f * delta / m
        while m * Fraction(delta0) > Fraction(f) * Fraction(delta):  # m·δ₀ ≤ f·δ exactly
            delta0 = math.nextafter(delta0, 0.0)
        if not delta0 > 0:
            continue
        try:
            x = calibrate_noise(
                lambda x, d0=delta0: ptr_event(1.0 / x, d0, m), epsilon, delta, accountant=factory
            )
        except InvalidPrivacyParameter:
            continue  # this split cannot meet the target
        eps0 = 1.0 / x
        t = ptr_threshold(eps0, delta0)
        if best is None or t < best[0]:
            best = (t, eps0, delta0)
    if best is None:
        raise InvalidPrivacyParameter(
            f"no per-query (epsilon0, delta0) meets the target (epsilon={epsilon:g}, "
            f"delta={delta:g}) for {m} queries"
        )
    return best[1], best[2]


def calibrate_confident_gnmax(
    epsilon: float,
    delta: float,
    n_queries: int,
    *,
    sigma_ratio: float = 2.0,
    accountant: AccountantSpec = "rdp",
) -> tuple[float, float]:
    """(σ₁, σ₂) = (r·σ₂, σ₂), smallest σ₂ with ``confident_gnmax_event`` certified (ε, δ).

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    m = _check_target(epsilon, delta, n_queries)
    r = check_positive(sigma_ratio, "sigma_ratio")
    s2 = calibrate_noise(
        lambda s: confident_gnmax_event(r * s, s, m), epsilon, delta, accountant=accountant
    )
    return r * s2, s2
