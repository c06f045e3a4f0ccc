"""Statistics of the empirical privacy audit: Clopper–Pearson limits, the ε lower
bound of a distinguishing test, and the choice of the test's threshold.

An (ε, δ)-DP mechanism M constrains *every* test that tries to tell two
neighbouring datasets D and D′ apart from one output (Kairouz, Oh, Viswanath
2015, Theorem 2.1; Wasserman & Zhou 2010): for every rejection region S,

    P[M(D′) ∈ S] ≤ e^ε · P[M(D) ∈ S] + δ    and the same with D, D′ swapped.

Writing the test "guess D′ when the output is in S" with false-positive rate
FPR = P[M(D) ∈ S] and false-negative rate FNR = P[M(D′) ∉ S] gives

    ε ≥ ln((1 − δ − FNR) / FPR)      and (swapping D and D′)      ε ≥ ln((1 − δ − FPR) / FNR).

Replacing FPR and FNR by one-sided Clopper–Pearson (1934) *upper* confidence
limits computed from independent runs turns either expression into a lower
bound on the true ε that holds with the stated confidence (Jagielski, Ullman,
Oprea 2020, "Auditing differentially private machine learning: how private is
private SGD?", Section 3; Nasr, Song, Thakurta, Papernot, Carlini 2021,
"Adversary instantiation", Section 3).  The two limits are each taken at level
1 − α/2 (Bonferroni), so the bound holds with probability ≥ 1 − α.

Everything here is vectorised over candidate thresholds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from scipy import stats as _st

from .._validation import check_delta, check_probability
from ..exceptions import InvalidDataError, InvalidPrivacyParameter

__all__ = [
    "ThresholdTest",
    "clopper_pearson_interval",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "evaluate_test",
    "select_threshold",
]

#: the four kinds of test one threshold ``t`` on a score defines:
#: (orientation of the region S, whether the roles of D and D′ are swapped)
_KINDS = ((">", False), (">", True), ("<", False), ("<", True))


def _check_alpha(confidence) -> float:
    c = check_probability(confidence, "confidence")
    if c >= 1.0:
        raise InvalidPrivacyParameter(f"confidence must be in (0, 1), got {confidence!r}")
    return 1.0 - c


def clopper_pearson_upper(k, n, alpha: float):
    """One-sided Clopper–Pearson upper confidence limit of a binomial proportion.

    P[p ≤ upper] ≥ 1 − α for k ~ Binomial(n, p) (Clopper & Pearson 1934):
    ``upper = Beta⁻¹(1 − α; k + 1, n − k)``, and 1 when k = n.

    Parameters
    ----------
    k : int or ndarray of int
        Observed successes, 0 ≤ k ≤ n.
    n : int or ndarray of int
        Trials, n ≥ 1.
    alpha : float in (0, 1)

    Returns
    -------
    float or ndarray
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        up = _st.beta.ppf(1.0 - alpha, k + 1.0, np.maximum(n - k, 1e-300))
    up = np.where(k >= n, 1.0, up)
    return up if up.ndim else float(up)


def clopper_pearson_lower(k, n, alpha: float):
    """One-sided Clopper–Pearson lower confidence limit, ``Beta⁻¹(α; k, n − k + 1)``
    (0 when k = 0); P[p ≥ lower] ≥ 1 − α."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = _st.beta.ppf(alpha, np.maximum(k, 1e-300), n - k + 1.0)
    lo = np.where(k <= 0, 0.0, lo)
    return lo if lo.ndim else float(lo)


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval at the given confidence (α/2 per side)."""
    alpha = _check_alpha(confidence)
    return (
        float(clopper_pearson_lower(k, n, alpha / 2)),
        float(clopper_pearson_upper(k, n, alpha / 2)),
    )


def epsilon_from_rates(fpr, fnr, delta: float):
    """ε implied by a test with these error rates: ``ln((1 − δ − fnr) / fpr)``,
    0 where the test is no better than allowed (numerator ≤ fpr), ``inf`` where
    fpr = 0 < 1 − δ − fnr.  Vectorised."""
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    num = 1.0 - delta - fnr
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(num > 0, np.log(np.maximum(num, 1e-300)) - np.log(fpr), 0.0)
    eps = np.where(np.isnan(eps), 0.0, eps)
    eps = np.maximum(eps, 0.0)
    return eps if eps.ndim else float(eps)


def epsilon_lower_bound(
    false_positives,
    n_negative,
    false_negatives,
    n_positive,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
):
    """Empirical lower bound ε_LB = ln((1 − δ − FNR⁺) / FPR⁺) from error counts.

    FPR⁺ and FNR⁺ are one-sided Clopper–Pearson upper limits at level
    1 − α/2 each (α = 1 − confidence), so that ε_LB ≤ ε holds with probability
    ≥ ``confidence`` for every (ε, δ)-DP mechanism (module docstring).
    Vectorised over the counts; clamped at 0 (a test no better than chance
    proves nothing).

    Parameters
    ----------
    false_positives : int or ndarray
        Runs on D that the test attributed to D′.
    n_negative : int
        Runs on D.
    false_negatives : int or ndarray
        Runs on D′ that the test attributed to D.
    n_positive : int
        Runs on D′.
    delta : float in [0, 1)
    confidence : float in (0, 1)

    Returns
    -------
    float or ndarray
    """
    delta = check_delta(delta)
    alpha = _check_alpha(confidence)
    fpr_u = clopper_pearson_upper(false_positives, n_negative, alpha / 2)
    fnr_u = clopper_pearson_upper(false_negatives, n_positive, alpha / 2)
    return epsilon_from_rates(fpr_u, fnr_u, delta)


@dataclasses.dataclass(frozen=True)
class ThresholdTest:
    """A distinguishing test on a one-dimensional score.

    The test guesses "the output came from D′" when ``score > threshold``
    (``orientation=">"``) or ``score < threshold`` (``"<"``).  With
    ``swapped=True`` the bound uses the reversed inequality (the roles of D
    and D′ exchanged): ε ≥ ln((1 − δ − FPR) / FNR).
    """

    threshold: float
    orientation: str
    swapped: bool

    def describe(self) -> str:
        rule = f"score {self.orientation} {self.threshold:.6g} ⇒ D′"
        return rule + (" (reversed bound)" if self.swapped else "")

    def counts(self, scores_d, scores_dprime) -> tuple[int, int]:
        """(false positives on D, false negatives on D′)."""
        s0 = np.asarray(scores_d, dtype=float)
        s1 = np.asarray(scores_dprime, dtype=float)
        if self.orientation == ">":
            return int(np.sum(s0 > self.threshold)), int(np.sum(s1 <= self.threshold))
        return int(np.sum(s0 < self.threshold)), int(np.sum(s1 >= self.threshold))


def _check_scores(scores, name):
    s = np.asarray(scores, dtype=float).ravel()
    if s.size < 1:
        raise InvalidDataError(f"{name} must hold at least one score, got none")
    if not np.all(np.isfinite(s)):
        raise InvalidDataError(f"{name} contains NaN or infinite scores")
    return s


def _sorted_scores(scores_d, scores_dprime) -> tuple[np.ndarray, np.ndarray]:
    """The checked scores of D and D′, sorted (for the threshold search)."""
    return (
        np.sort(_check_scores(scores_d, "scores_d")),
        np.sort(_check_scores(scores_dprime, "scores_dprime")),
    )


def _error_counts(s0: np.ndarray, s1: np.ndarray, cand: np.ndarray, orientation: str):
    """(FP, FN) of the test "guess D′ when score ``orientation`` t" for every
    t in ``cand`` (``s0``, ``s1`` sorted)."""
    if orientation == ">":  # FP = #{s0 > t}, FN = #{s1 <= t}
        return s0.size - np.searchsorted(s0, cand, side="right"), np.searchsorted(
            s1, cand, side="right"
        )
    # FP = #{s0 < t}, FN = #{s1 >= t}
    return np.searchsorted(s0, cand, side="left"), s1.size - np.searchsorted(s1, cand, side="left")


def _best_test(s0, s1, cand, kinds, bound: Callable) -> tuple[ThresholdTest, float]:
    """The threshold test maximizing ``bound(fp, n0, fn, n1)`` (vectorised over the
    candidate thresholds ``cand``) among the (orientation, swapped) ``kinds``; a
    swapped test is scored with the roles of D and D′ exchanged.  When no test does
    better than 0, the median test and 0.  Used by :func:`select_threshold` and
    :func:`dperm.audit.gdp.gdp_select_threshold`."""
    best = (-1.0, None)
    for orientation, swapped in kinds:
        fp, fn = _error_counts(s0, s1, cand, orientation)
        value = bound(fn, s1.size, fp, s0.size) if swapped else bound(fp, s0.size, fn, s1.size)
        i = int(np.argmax(value))
        if value[i] > best[0]:
            best = (float(value[i]), ThresholdTest(float(cand[i]), orientation, swapped))
    if best[0] <= 0.0:
        # nothing distinguishes the two samples: report the natural median test
        med = float(np.median(np.concatenate([s0, s1])))
        return ThresholdTest(med, ">", False), 0.0
    return best[1], best[0]


def _midpoints(values: np.ndarray) -> np.ndarray:
    """Candidate thresholds for strict tests on the sorted distinct ``values``: one
    below all, the midpoint of each gap, one above all.  They split the selection
    scores exactly as the observed values themselves would (``> uᵢ`` ≡ ``> mᵢ``,
    ``< uᵢ₊₁`` ≡ ``< mᵢ``), but a fresh score that differs from a selection score by
    rounding (a statistic that is ±1 up to 10⁻¹⁶) falls on the same side."""
    if values.size == 1:
        return np.array([values[0] - 1.0, values[0] + 1.0])
    mids = values[:-1] + 0.5 * np.diff(values)
    return np.concatenate([[values[0] - 1.0], mids, [values[-1] + 1.0]])


def select_threshold(
    scores_d, scores_dprime, *, delta: float = 0.0, confidence: float = 0.95
) -> tuple[ThresholdTest, float]:
    """Choose the threshold test maximizing the ε lower bound on these scores.

    Every gap between distinct scores is a candidate (:func:`_midpoints`), in both orientations
    and with both the direct and the reversed bound; the objective is the
    Clopper–Pearson lower bound of :func:`epsilon_lower_bound` computed on
    *these* scores.  Use it on a selection half and evaluate the chosen test on
    fresh runs (:func:`evaluate_test`): the bound is valid only on runs that
    did not choose it.

    Returns
    -------
    test : ThresholdTest
    epsilon : float
        The (optimistic, in-sample) bound reached on the selection scores.
    """
    s0, s1 = _sorted_scores(scores_d, scores_dprime)
    cand = _midpoints(np.unique(np.concatenate([s0, s1])))

    def bound(fp, n0, fn, n1):
        return epsilon_lower_bound(fp, n0, fn, n1, delta=delta, confidence=confidence)

    return _best_test(s0, s1, cand, _KINDS, bound)


def _test_rates(test: ThresholdTest, scores_d, scores_dprime, confidence):
    """(FPR, FNR, FPR⁺, FNR⁺) of a fixed test on fresh scores: the observed rates of
    "guess D′" and their Clopper–Pearson upper limits at 1 − α/2 each."""
    s0 = _check_scores(scores_d, "scores_d")
    s1 = _check_scores(scores_dprime, "scores_dprime")
    alpha = _check_alpha(confidence)
    fp, fn = test.counts(s0, s1)
    n0, n1 = s0.size, s1.size
    fpr_u = float(clopper_pearson_upper(fp, n0, alpha / 2))
    fnr_u = float(clopper_pearson_upper(fn, n1, alpha / 2))
    return fp / n0, fn / n1, fpr_u, fnr_u


def evaluate_test(
    test: ThresholdTest,
    scores_d,
    scores_dprime,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> dict:
    """Apply a fixed test to fresh scores and return its error rates and bound.

    Returns
    -------
    dict with ``fpr``, ``fnr`` (observed rates of the test "guess D′"),
    ``fpr_upper``, ``fnr_upper`` (Clopper–Pearson upper limits at 1 − α/2),
    ``epsilon_lower_bound`` (at ``confidence``) and ``epsilon_estimate`` (the
    same formula on the observed rates, no confidence correction).
    """
    fpr, fnr, fpr_u, fnr_u = _test_rates(test, scores_d, scores_dprime, confidence)
    delta = check_delta(delta)
    if test.swapped:
        lb = epsilon_from_rates(fnr_u, fpr_u, delta)
        est = epsilon_from_rates(fnr, fpr, delta)
    else:
        lb = epsilon_from_rates(fpr_u, fnr_u, delta)
        est = epsilon_from_rates(fpr, fnr, delta)
    return {
        "fpr": fpr,
        "fnr": fnr,
        "fpr_upper": fpr_u,
        "fnr_upper": fnr_u,
        "epsilon_lower_bound": float(lb),
        "epsilon_estimate": float(est) if math.isfinite(est) else math.inf,
    }
