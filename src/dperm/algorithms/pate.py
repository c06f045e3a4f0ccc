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

**Aggregators.**  The noisy aggregators ("gnmax", "lnmax", "ptr", "confident-gnmax"),
the histogram's sensitivity under replace-one [PATE-1] and each aggregator's
data-independent event and calibration [PATE-2]–[PATE-5] live in
:mod:`dperm.algorithms.pate_aggregation`; their names are re-exported here.  This module
is the pipeline: partition → teachers → votes → aggregation → student.

Not implemented: the data-dependent (smooth-sensitivity) analysis of Papernot et al. 2018
(Theorem 6 and Section 4); every guarantee here is data-independent.  See ``docs/pate.md``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._rng import RandomState, check_random_state
from .._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_positive,
)
from ..accounting.events import DpEvent
from ..accounting.registry import accountant_factory, epsilon_spent
from ..design import check_X, check_X_y
from ..exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
)
from . import pate_aggregation
from .base import private_fit
from .pate_aggregation import (
    ABSTAIN,
    AccountantSpec,
    _inverse_up,
    calibrate_confident_gnmax,
    calibrate_gnmax,
    calibrate_lnmax,
    calibrate_ptr,
    confident_gnmax,
    confident_gnmax_event,
    gnmax,
    gnmax_event,
    lnmax,
    lnmax_event,
    ptr_argmax,
    ptr_event,
    ptr_threshold,
)
from .pate_aggregation import (
    distance_to_instability as distance_to_instability,
)

__all__ = [
    "AGGREGATORS",
    "PateResult",
    "fit",
    "partition_indices",
    "teacher_votes",
    "train_teachers",
    # the aggregators, their events and calibrations (re-exported)
    *(name for name in pate_aggregation.__all__ if name != "AccountantSpec"),
]

#: Aggregators accepted by :func:`fit`.
AGGREGATORS = ("gnmax", "lnmax", "ptr", "confident-gnmax")

#: Accountant used when ``accountant=None`` (see :func:`fit`).
_DEFAULT_ACCOUNTANT = {
    "gnmax": "rdp",
    "confident-gnmax": "rdp",
    "lnmax": "optimal",
    "ptr": "optimal",
}

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


# ============================================================================ fit
def _resolve_classes(y, classes) -> np.ndarray:
    if classes is None:
        warnings.warn(
            "classes not given: the label set is read from the private labels, and the "
            "histogram bins and the student's classes then reveal which labels occur; pass "
            "classes= from a public schema",
            PrivacyLeakWarning,
            stacklevel=4,  # the caller of fit (+1: the @private_fit wrapper)
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


@private_fit  # an active dperm.budget: reserve, run, commit the event
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
    by ``accountant`` for :attr:`PateResult.event`
    (:mod:`dperm.algorithms.pate_aggregation`: sensitivity [PATE-1], GNMax [PATE-2],
    LNMax [PATE-3], PTR [PATE-4], Confident-GNMax [PATE-5]).
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
