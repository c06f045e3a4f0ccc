"""PATE: Private Aggregation of Teacher Ensembles, with data-independent accounting.

The private training set is split uniformly at random into k disjoint parts; one
(non-private) *teacher* classifier is trained per part; for each public, unlabeled query
point the teachers' predictions form a vote histogram n(x) ∈ ℕ^C (C public classes,
Σ_j n_j(x) = k); a *noisy aggregator* releases one label per query (or abstains); a
*student* classifier is trained on the public points with the released labels.
Teachers are not private: the privacy comes from the aggregation alone, and the
student is post-processing of the released labels (free).

Papernot, Abadi, Erlingsson, Goodfellow, Talwar, "Semi-supervised Knowledge Transfer for
Deep Learning from Private Training Data", ICLR 2017 (PATE, LNMax);
Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable Private Learning with
PATE", ICLR 2018 (GNMax, Confident-GNMax).

**Neighbouring relation: replace-one.** D and D′ have the same size n and differ in the
record at one position i.  The random partition depends on (n, k, the generator) only, so
on D and D′ record i lies in the same part t; every other part, hence every other teacher,
is identical.  (Teacher training may be randomized, but only by randomness independent of
the data, which the guarantee conditions on.)

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

import dataclasses
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._rng import RandomState, check_random_state
from .._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_positive,
    check_X,
    check_X_y,
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
from ..accounting.registry import accountant_factory, epsilon_spent
from ..exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
)
from ..mechanisms import gaussian_noise, laplace_noise

__all__ = [
    "ABSTAIN",
    "AGGREGATORS",
    "PateResult",
    "calibrate_confident_gnmax",
    "calibrate_gnmax",
    "calibrate_lnmax",
    "calibrate_ptr",
    "confident_gnmax",
    "confident_gnmax_event",
    "distance_to_instability",
    "fit",
    "gnmax",
    "gnmax_event",
    "lnmax",
    "lnmax_event",
    "partition_indices",
    "ptr_argmax",
    "ptr_event",
    "ptr_threshold",
    "teacher_votes",
    "train_teachers",
]

#: Aggregators accepted by :func:`fit`.
AGGREGATORS = ("gnmax", "lnmax", "ptr", "confident-gnmax")

#: Label index returned for a query the aggregator did not answer (⊥).
ABSTAIN = -1

#: Accountant used when ``accountant=None`` (see :func:`fit`).
_DEFAULT_ACCOUNTANT = {
    "gnmax": "rdp",
    "confident-gnmax": "rdp",
    "lnmax": "optimal",
    "ptr": "optimal",
}

#: Fractions of δ given to the per-query δ₀·m of PTR (the rest is the composition slack).
_PTR_DELTA_SPLITS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0)

_SQRT2 = math.sqrt(2.0)


# ============================================================================ results
@dataclasses.dataclass(frozen=True)
class PateResult:
    """What :func:`fit` releases and what it cost.

    Attributes
    ----------
    student : fitted classifier or None
        The student trained on the answered public queries with the released labels
        (post-processing: free).  ``None`` when every query was abstained on; a
        ``DummyClassifier`` predicting the single label when only one class was released.
    labels : ndarray of int, shape (m,)
        Released label of public query i (row i of ``X_public``, i < m) as an index into
        :attr:`classes`; :data:`ABSTAIN` (−1) where the aggregator abstained.
    classes : ndarray of shape (C,)
        The public label set (sorted); ``classes[labels[i]]`` is the released label value.
    event : DpEvent
        The privacy event of the whole release (all m queries).
    diagnostics : dict
        Public facts only (derived from the inputs' sizes, the privacy parameters and the
        released labels): aggregator, n_teachers, partition sizes, n_queries, n_answered,
        n_abstained, noise scales, accountant, epsilon_spent at delta, neighbouring
        relation, sensitivities.
    """

    student: Any
    labels: np.ndarray
    classes: np.ndarray
    event: DpEvent
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def answered(self) -> np.ndarray:
        """Boolean mask of shape (m,): the queries that received a label."""
        return self.labels != ABSTAIN

    @property
    def released_labels(self) -> np.ndarray:
        """Label values of the answered queries, shape (n_answered,)."""
        return self.classes[self.labels[self.answered]]

    def predict(self, X) -> np.ndarray:
        """Predictions of the student (post-processing).

        Raises
        ------
        InvalidDataError
            If no student could be trained (every query abstained).
        """
        if self.student is None:
            raise InvalidDataError("no student: every query was abstained on, nothing to learn")
        return self.student.predict(X)


# ============================================================================ teachers
def partition_indices(n: int, n_teachers: int, rng: RandomState) -> list[np.ndarray]:
    """A uniformly random partition of ``range(n)`` into ``n_teachers`` disjoint parts.

    A random permutation cut into consecutive blocks of sizes ⌊n/k⌋ or ⌈n/k⌉ (the first
    n mod k blocks are the larger ones), so the sizes are public (functions of n and k)
    and the partition depends on the generator only, never on the data.

    Parameters
    ----------
    n : int ≥ 2
        Number of private records.
    n_teachers : int, 2 ≤ k ≤ n
    rng : numpy.random.Generator, int or None

    Returns
    -------
    list of k int arrays, each non-empty, together a permutation of range(n).

    Raises
    ------
    InvalidPrivacyParameter
        If k < 2 or k > n.
    """
    n = check_count(n, "n", minimum=2)
    k = check_count(n_teachers, "n_teachers", minimum=2)
    if k > n:
        raise InvalidPrivacyParameter(
            f"n_teachers must be ≤ the number of private records n={n}, got {n_teachers!r}"
        )
    gen = check_random_state(rng)
    return np.array_split(gen.permutation(n), k)


def _default_teacher():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(with_mean=False), LogisticRegression(max_iter=2000))


def _single_class_model(X, y):
    from sklearn.dummy import DummyClassifier

    return DummyClassifier(strategy="most_frequent").fit(X, y)


def _check_factory(factory, name: str) -> Callable[[], Any]:
    if factory is None:
        return _default_teacher
    if not callable(factory):
        raise InvalidPrivacyParameter(
            f"{name} must be a callable returning an unfitted scikit-learn-style classifier, "
            f"got {type(factory).__name__}: {factory!r}"
        )
    return factory


def train_teachers(
    X,
    y,
    n_teachers: int,
    *,
    teacher_factory: Callable[[], Any] | None = None,
    random_state: RandomState = None,
) -> list:
    """Train one non-private teacher per part of a random partition (:func:`partition_indices`).

    Parameters
    ----------
    X : array-like or CSR matrix of shape (n, d)
    y : array-like of shape (n,)
        Labels (any values; :func:`fit` passes class indices 0..C−1).
    n_teachers : int, 2 ≤ k ≤ n
    teacher_factory : callable, optional
        ``teacher_factory()`` returns an unfitted classifier with ``fit``/``predict``;
        default: ``StandardScaler(with_mean=False)`` + scikit-learn ``LogisticRegression``.
    random_state : None, int, SeedSequence or Generator
        Draws the partition.

    Returns
    -------
    list of k fitted classifiers.  A part whose records all carry one label gets a
    ``DummyClassifier`` that votes that label on every query (a classifier factory
    usually refuses one class); this is a function of the part alone, so the
    sensitivity argument is unchanged.

    Raises
    ------
    InvalidDataError, InvalidPrivacyParameter
    """
    X, y = check_X_y(X, y)
    factory = _check_factory(teacher_factory, "teacher_factory")
    parts = partition_indices(X.shape[0], n_teachers, random_state)
    teachers = []
    for idx in parts:  # a loop over the k teachers, not over rows
        Xp, yp = X[idx], y[idx]
        if np.unique(yp).size == 1:
            teachers.append(_single_class_model(Xp, yp))
        else:
            teachers.append(factory().fit(Xp, yp))
    return teachers


def teacher_votes(teachers: Sequence[Any], X, classes=None) -> np.ndarray:
    """Vote histograms of the teachers on the query points.

    Parameters
    ----------
    teachers : sequence of fitted classifiers (``predict(X)`` → labels)
    X : array-like or CSR matrix of shape (m, d)
        Public query points.
    classes : array-like of shape (C,), optional
        The public label set; default: the union of the teachers' ``classes_`` (fine for
        counting; :func:`fit` always passes the public set so that the bins do not depend
        on the data).

    Returns
    -------
    ndarray of int64, shape (m, C)
        ``votes[i, j]`` = number of teachers predicting ``classes[j]`` on row i;
        every row sums to the number of teachers.  Counted with one ``np.bincount`` over
        the (k, m) prediction matrix (no loop over query rows).

    Raises
    ------
    InvalidDataError
        No teachers, bad X, a prediction of the wrong shape.
    LabelError
        A teacher predicted a label outside ``classes``.
    """
    teachers = list(teachers)
    if not teachers:
        raise InvalidDataError("teachers must be a non-empty sequence of fitted classifiers")
    X = check_X(X)
    if classes is None:
        try:
            classes = np.unique(np.concatenate([np.asarray(t.classes_) for t in teachers]))
        except AttributeError:
            raise InvalidDataError(
                "pass classes=: a teacher has no classes_ attribute to read the label set from"
            ) from None
    else:
        classes = np.unique(np.asarray(classes))
    m, C = X.shape[0], classes.size
    preds = np.empty((len(teachers), m), dtype=np.int64)
    for t, teacher in enumerate(teachers):  # loop over teachers only
        p = np.asarray(teacher.predict(X)).ravel()
        if p.shape != (m,):
            raise InvalidDataError(
                f"teacher {t} returned predictions of shape {p.shape}, expected ({m},)"
            )
        idx = np.minimum(np.searchsorted(classes, p), C - 1)
        bad = classes[idx] != p
        if bad.any():
            raise LabelError(
                f"teacher {t} predicted labels outside classes {classes.tolist()[:10]}: "
                f"{np.unique(p[bad]).tolist()[:5]}"
            )
        preds[t] = idx
    flat = (np.arange(m, dtype=np.int64) * C)[None, :] + preds
    return np.bincount(flat.ravel(), minlength=m * C).reshape(m, C).astype(np.int64)


# ============================================================================ aggregators
def _check_votes(votes, integer: bool = False) -> np.ndarray:
    try:
        v = np.asarray(votes, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidDataError(f"votes must be numeric: {exc}") from None
    if v.ndim != 2 or v.shape[1] < 2:
        raise InvalidDataError(
            f"votes must be a 2-D array of shape (n_queries, n_classes ≥ 2), got shape {v.shape}"
        )
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise InvalidDataError("votes must be finite, non-negative counts")
    if integer and np.any(v != np.round(v)):
        raise InvalidDataError("votes must be integer counts for the distance to instability")
    return v


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
    v = _check_votes(votes)
    sigma = check_positive(sigma, "sigma")
    noisy = v + gaussian_noise(v.shape, sigma, check_random_state(rng))
    labels = np.argmax(noisy, axis=1).astype(np.int64)
    return (labels, noisy) if return_noisy_votes else labels


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
    v = _check_votes(votes)
    scale = check_positive(scale, "scale")
    noisy = v + laplace_noise(v.shape, scale, check_random_state(rng))
    labels = np.argmax(noisy, axis=1).astype(np.int64)
    return (labels, noisy) if return_noisy_votes else labels


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
    """
    sigma1 = check_positive(sigma1, "sigma1")
    sigma2 = check_positive(sigma2, "sigma2")
    m = check_count(n_queries, "n_queries")
    per_query = Composed((Gaussian(sigma1), Gaussian(_gnmax_multiplier(sigma2))))
    return SelfComposed(per_query, m)


# ============================================================================ calibration
AccountantSpec = str | Accountant | Callable[[], Accountant]


def calibrate_gnmax(
    epsilon: float, delta: float, n_queries: int, *, accountant: AccountantSpec = "rdp"
) -> float:
    """Smallest σ (votes) with ``gnmax_event(σ, m)`` certified (ε, δ)-DP by the accountant.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    check_epsilon(epsilon)
    check_delta(delta, allow_zero=False)
    m = check_count(n_queries, "n_queries")
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
    check_epsilon(epsilon)
    check_delta(delta, allow_zero=True)
    m = check_count(n_queries, "n_queries")
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
    check_epsilon(epsilon)
    check_delta(delta, allow_zero=False)
    m = check_count(n_queries, "n_queries")
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
    check_epsilon(epsilon)
    check_delta(delta, allow_zero=False)
    m = check_count(n_queries, "n_queries")
    r = check_positive(sigma_ratio, "sigma_ratio")
    s2 = calibrate_noise(
        lambda s: confident_gnmax_event(r * s, s, m), epsilon, delta, accountant=accountant
    )
    return r * s2, s2


# ============================================================================ fit
def _resolve_classes(y, classes) -> np.ndarray:
    if classes is None:
        warnings.warn(
            "classes not given: the label set is read from the private labels, and the "
            "histogram bins and the student's classes then reveal which labels occur; pass "
            "classes= from a public schema",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        cls = np.unique(y)
    else:
        cls = np.asarray(classes)
        if cls.ndim != 1:
            raise LabelError(f"classes must be 1-D, got shape {cls.shape}")
        cls = np.unique(cls)
    if cls.size < 2:
        raise LabelError(f"PATE needs at least two classes, got {cls.tolist()}")
    unknown = ~np.isin(y, cls)
    if unknown.any():
        raise LabelError(
            f"y_private holds labels outside classes {cls.tolist()[:10]}: "
            f"{np.unique(y[unknown]).tolist()[:5]}"
        )
    return cls


def fit(
    X_private,
    y_private,
    X_public,
    *,
    epsilon: float,
    delta: float,
    n_teachers: int | None = None,
    aggregator: str = "gnmax",
    n_queries: int | None = None,
    classes=None,
    teacher_factory: Callable[[], Any] | None = None,
    student_factory: Callable[[], Any] | None = None,
    accountant: AccountantSpec | None = None,
    sigma_ratio: float = 2.0,
    confidence_threshold: float | None = None,
    random_state: RandomState = None,
) -> PateResult:
    """Train a student on public data labeled by a noisy vote of private teachers (PATE).

    Neighbouring relation: **replace-one** on the private records; the public data is
    public.  The release — the m labels, hence the student — is (ε, δ)-DP as certified
    by ``accountant`` for :attr:`PateResult.event` (module docstring: sensitivity
    [PATE-1], GNMax [PATE-2], LNMax [PATE-3], PTR [PATE-4], Confident-GNMax [PATE-5]).
    The noise is calibrated from public quantities only (ε, δ, m), before the teachers
    are trained.

    Parameters
    ----------
    X_private : array-like or CSR matrix of shape (n, d)
    y_private : array-like of shape (n,)
    X_public : array-like or CSR matrix of shape (n_public, d)
        Public unlabeled points; the first ``n_queries`` rows are the queries.
    epsilon : float > 0
        Total ε of the m answers.
    delta : float
        Total δ: in (0, 1) for "gnmax", "ptr", "confident-gnmax"; [0, 1) for "lnmax"
        (δ = 0 gives a pure-ε guarantee, b = 2m/ε).
    n_teachers : int, optional
        k, 2 ≤ k ≤ n.  Default ``min(250, max(2, n // 20))`` (about 20 records per
        teacher; a function of the public size n).
    aggregator : {"gnmax", "lnmax", "ptr", "confident-gnmax"}, default "gnmax"
    n_queries : int, optional
        m ≤ n_public; default all public points.
    classes : array-like, optional
        The public label set.  Default: read from ``y_private``, with a
        :class:`~dperm.exceptions.PrivacyLeakWarning` (the set of labels present leaks).
    teacher_factory, student_factory : callable, optional
        ``factory()`` returns an unfitted scikit-learn-style classifier; default
        ``StandardScaler(with_mean=False)`` + ``LogisticRegression``.  A teacher whose part
        has a single label votes that label (see :func:`train_teachers`).
    accountant : str, Accountant or factory, optional
        Calibrates the noise and reports ε.  Default: ``"rdp"`` for the Gaussian
        aggregators, ``"optimal"`` (KOV 2015, exact for m identical pure-ε / (ε₀, δ₀)
        mechanisms) for "lnmax" and "ptr".  "ptr" needs an (ε, δ) accountant
        (basic/advanced/optimal).
    sigma_ratio : float > 0, default 2.0
        σ₁/σ₂ for "confident-gnmax".
    confidence_threshold : float, optional
        Vote threshold of "confident-gnmax"; default 0.6·k.
    random_state : None, int, SeedSequence or Generator
        Draws the partition and all noise (``None`` = OS entropy).

    Returns
    -------
    PateResult
        ``student``, ``labels`` (class indices, −1 = abstained), ``classes``, ``event``
        and public ``diagnostics``.

    Raises
    ------
    InvalidPrivacyParameter
        ε ≤ 0, δ outside its range, k < 2 or k > n, m < 1 or m > n_public, bad factory,
        sigma_ratio or threshold, or an unreachable target.
    InvalidDataError
        NaN/inf, empty or mismatched data (including an empty public set).
    LabelError
        Fewer than two classes, or private labels outside ``classes``.
    UnknownNameError
        Unknown aggregator or accountant.
    UnsupportedEventError
        An accountant that cannot account the aggregator's events (e.g. "rdp" with "ptr").
    """
    # ---- parameters (public) -------------------------------------------------
    if aggregator not in AGGREGATORS:
        raise UnknownNameError(f"aggregator must be one of {list(AGGREGATORS)}, got {aggregator!r}")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=aggregator == "lnmax")
    if accountant is None:
        accountant = _DEFAULT_ACCOUNTANT[aggregator]
    factory = accountant_factory(accountant)
    acc_name = accountant if isinstance(accountant, str) else getattr(factory(), "name", "?")
    teacher_factory = _check_factory(teacher_factory, "teacher_factory")
    student_factory = _check_factory(student_factory, "student_factory")

    # ---- data --------------------------------------------------------------
    X_private, y_private = check_X_y(X_private, y_private)
    X_public = check_X(X_public, name="X_public")
    if X_public.shape[1] != X_private.shape[1]:
        raise InvalidDataError(
            f"X_public has {X_public.shape[1]} features, X_private has {X_private.shape[1]}"
        )
    n, n_public = X_private.shape[0], X_public.shape[0]
    if n < 2:
        raise InvalidDataError(f"PATE needs at least 2 private records, got n={n}")
    cls = _resolve_classes(y_private, classes)
    k = min(250, max(2, n // 20)) if n_teachers is None else n_teachers
    k = check_count(k, "n_teachers", minimum=2)
    if k > n:
        raise InvalidPrivacyParameter(
            f"n_teachers must be ≤ the number of private records n={n}, got {n_teachers!r}"
        )
    m = n_public if n_queries is None else check_count(n_queries, "n_queries")
    if m > n_public:
        raise InvalidPrivacyParameter(
            f"n_queries must be ≤ the number of public points {n_public}, got {n_queries!r}"
        )
    gen = check_random_state(random_state)

    # ---- calibration (data-independent) --------------------------------------
    diag: dict[str, Any] = {"aggregator": aggregator}
    if aggregator == "gnmax":
        sigma = calibrate_gnmax(epsilon, delta, m, accountant=factory)
        event = gnmax_event(sigma, m)
        diag.update(sigma=sigma, noise_scale=sigma, noise_multiplier=event.event.noise_multiplier)
    elif aggregator == "lnmax":
        scale = calibrate_lnmax(epsilon, delta, m, accountant=factory)
        event = lnmax_event(scale, m)
        diag.update(scale=scale, noise_scale=scale, epsilon_per_query=2.0 / scale)
    elif aggregator == "ptr":
        eps0, delta0 = calibrate_ptr(epsilon, delta, m, accountant=factory)
        event = ptr_event(eps0, delta0, m)
        diag.update(
            epsilon0=eps0,
            delta0=delta0,
            scale=_inverse_up(eps0),
            noise_scale=_inverse_up(eps0),
            threshold=ptr_threshold(eps0, delta0),
        )
    else:
        sigma_ratio = check_positive(sigma_ratio, "sigma_ratio")
        threshold = 0.6 * k if confidence_threshold is None else confidence_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise InvalidPrivacyParameter(
                f"confidence_threshold must be a real number, got {threshold!r}"
            )
        threshold = float(threshold)
        if not math.isfinite(threshold):
            raise InvalidPrivacyParameter(f"confidence_threshold must be finite, got {threshold}")
        sigma1, sigma2 = calibrate_confident_gnmax(
            epsilon, delta, m, sigma_ratio=sigma_ratio, accountant=factory
        )
        event = confident_gnmax_event(sigma1, sigma2, m)
        diag.update(sigma1=sigma1, sigma2=sigma2, noise_scale=sigma2, threshold=threshold)

    # ---- teachers and votes (private) ---------------------------------------
    y_idx = np.searchsorted(cls, y_private)
    teachers = train_teachers(
        X_private, y_idx, k, teacher_factory=teacher_factory, random_state=gen
    )
    X_query = X_public[:m]
    votes = teacher_votes(teachers, X_query, classes=np.arange(cls.size))
    del teachers

    # ---- noisy aggregation -----------------------------------------------------
    if aggregator == "gnmax":
        labels = gnmax(votes, diag["sigma"], gen)
    elif aggregator == "lnmax":
        labels = lnmax(votes, diag["scale"], gen)
    elif aggregator == "ptr":
        labels = ptr_argmax(votes, diag["epsilon0"], diag["delta0"], gen)
    else:
        labels = confident_gnmax(votes, diag["threshold"], diag["sigma1"], diag["sigma2"], gen)
    del votes

    # ---- student (post-processing of the labels) -----------------------------
    answered = labels != ABSTAIN
    y_student = cls[labels[answered]]
    X_student = X_query[np.flatnonzero(answered)] if sp.issparse(X_query) else X_query[answered]
    if y_student.size == 0:
        student = None
    elif np.unique(y_student).size == 1:
        student = _single_class_model(X_student, y_student)
    else:
        student = student_factory().fit(X_student, y_student)

    diag.update(
        n_teachers=k,
        teacher_part_sizes=(n // k, -(-n // k)),  # (min, max): public, from n and k
        n_classes=int(cls.size),
        n_queries=m,
        n_answered=int(answered.sum()),
        n_abstained=int(m - answered.sum()),
        epsilon=epsilon,
        delta=delta,
        accountant=acc_name,
        epsilon_spent=epsilon_spent(event, delta, factory),
        neighbouring="replace-one",
        sensitivity={"l1": 2.0, "l2": _SQRT2, "linf": 1.0},
    )
    return PateResult(student=student, labels=labels, classes=cls, event=event, diagnostics=diag)
