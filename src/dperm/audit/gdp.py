"""Gaussian-DP (μ-GDP) estimation for the audit of Gaussian-noise mechanisms.

A threshold test on a one-dimensional statistic gives one point (FPR, FNR) of
the trade-off curve of the pair (M(D), M(D′)).  A mechanism is μ-GDP (Dong,
Roth, Su, "Gaussian Differential Privacy", JRSS-B 2022 / arXiv 1905.02383,
Definition 2.6) when every test obeys FNR ≥ G_μ(FPR) = Φ(Φ⁻¹(1 − FPR) − μ),
that is

    μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR).                                        (1)

Replacing FPR and FNR by one-sided Clopper–Pearson upper limits (each at
1 − α/2, evaluated on runs that did not choose the threshold) gives
``mu_lower_bound``, which is ≤ μ with probability ≥ 1 − α for every μ-GDP
mechanism — no further assumption (the right-hand side of (1) decreases in
both rates).  This is the estimation of Nasr, Hayes, Steinke, Balle, Tramèr,
Jagielski, Carlini, Terzis, "Tight Auditing of Differentially Private Machine
Learning", USENIX Security 2023 (arXiv 2302.07956), Section 4: fit the
one-parameter Gaussian trade-off family to the empirical error rates and read
ε off the fitted curve.

The (ε, δ) conversion is the exact privacy profile of μ-GDP (Dong, Roth, Su,
Corollary 2.13), identical to the Gaussian mechanism with noise multiplier
σ = 1/μ (Balle & Wang 2018, Theorem 8):

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).                           (2)

``epsilon_lower_bound = ε_μ(δ)`` with μ = ``mu_lower_bound`` solves (2).

**Assumption (the heuristic step).**  (1) is a theorem; the step "ε_μ_LB(δ) ≤
the mechanism's true ε(δ)" needs the mechanism's privacy to be *described* by
the GDP family: its trade-off curve is G_μ* for the μ* its (ε, δ) claim
corresponds to, so that (ε, δ)-DP ⇔ μ* ≤ μ(ε, δ).  This holds exactly for a
composition of Gaussian mechanisms (DP-GD: T steps with noise multiplier z
are exactly √T/z-GDP, and the worst case is attained by a canary whose
gradient is constant), and approximately for Poisson-subsampled Gaussian
steps (DP-SGD; the central limit theorem of Dong, Roth, Su, Theorem 5.2).
It fails for mechanisms whose trade-off curve is not Gaussian-shaped — e.g.
randomized response or the Laplace mechanism at ε = 1 is ε-DP yet its
central point reads as μ ≈ 1.2 — so this estimate is used only for runners
whose noise is Gaussian, and the assumption-free Clopper–Pearson bound of
:mod:`.stats` is always reported next to it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats as _st

from .._validation import check_delta
from ..accounting.gaussian import gaussian_delta, gaussian_epsilon
from ..exceptions import InvalidPrivacyParameter
from .stats import (
    ThresholdTest,
    _best_test,
    _check_alpha,
    _midpoints,
    _sorted_scores,
    _test_rates,
    clopper_pearson_upper,
)

__all__ = [
    "gdp_delta",
    "gdp_epsilon",
    "gdp_evaluate_test",
    "gdp_fit",
    "gdp_mu_from_rates",
    "gdp_mu_lower_bound",
    "gdp_select_threshold",
]

#: the tests searched: both orientations; G_μ is symmetric, so swapping D and D′ adds nothing
_KINDS = ((">", False), ("<", False))


def _check_mu(mu) -> float:
    if isinstance(mu, bool) or not isinstance(mu, int | float | np.floating | np.integer):
        raise InvalidPrivacyParameter(f"mu must be a real number ≥ 0, got {mu!r}")
    m = float(mu)
    if math.isnan(m) or m < 0:
        raise InvalidPrivacyParameter(f"mu must be a real number ≥ 0, got {mu!r}")
    return m


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of a μ-GDP mechanism, equation (2) of the module docstring.

    Dong, Roth, Su (2022), Corollary 2.13; computed as the Gaussian mechanism
    with noise multiplier 1/μ (Balle & Wang 2018, Theorem 8).  μ = 0 gives 0,
    μ = ∞ gives 1.
    """
    mu = _check_mu(mu)
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    return gaussian_delta(1.0 / mu, epsilon)


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with δ(ε) ≤ δ for μ-GDP (inverse of :func:`gdp_delta` in ε).

    Parameters
    ----------
    mu : float ≥ 0 (∞ allowed)
    delta : float in (0, 1)

    Returns
    -------
    float
        ε ≥ 0; 0 when μ = 0, ∞ when μ = ∞.  The bisection returns the upper end
        of a bracket of relative width 1e-12.
    """
    mu = _check_mu(mu)
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    return gaussian_epsilon(1.0 / mu, delta)


def gdp_mu_from_rates(fpr, fnr):
    """μ of the Gaussian trade-off curve through (FPR, FNR), equation (1):
    ``Φ⁻¹(1 − fpr) − Φ⁻¹(fnr)``, clamped at 0 (a test no better than chance).
    ``inf`` where both rates are 0.  Vectorised."""
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    with np.errstate(invalid="ignore"):
        mu = _st.norm.isf(fpr) - _st.norm.ppf(fnr)
    mu = np.where(np.isnan(mu), 0.0, np.maximum(mu, 0.0))
    return mu if mu.ndim else float(mu)


def gdp_mu_lower_bound(
    false_positives, n_negative, false_negatives, n_positive, *, confidence: float = 0.95
):
    """Lower confidence bound on μ from error counts of a fixed test.

    ``Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺)`` with FPR⁺, FNR⁺ the one-sided Clopper–Pearson
    upper limits at 1 − α/2 each: ≤ μ with probability ≥ ``confidence`` for
    every μ-GDP mechanism (module docstring, (1)).  Vectorised over the counts.
    """
    alpha = _check_alpha(confidence)
    fpr_u = clopper_pearson_upper(false_positives, n_negative, alpha / 2)
    fnr_u = clopper_pearson_upper(false_negatives, n_positive, alpha / 2)
    return gdp_mu_from_rates(fpr_u, fnr_u)


def gdp_select_threshold(
    scores_d, scores_dprime, *, confidence: float = 0.95
) -> tuple[ThresholdTest, float]:
    """Choose the threshold test maximizing :func:`gdp_mu_lower_bound` on these
    scores (every distinct score, both orientations).

    Use it on a selection half and evaluate on fresh runs
    (:func:`gdp_evaluate_test`).  Under the GDP model the best threshold is the
    central one (where the Clopper–Pearson widths, in Φ⁻¹ units, are smallest),
    so the selection is stable with a few hundred runs.

    Returns
    -------
    test : ThresholdTest
        ``swapped`` is always False (G_μ is symmetric).
    mu : float
        The in-sample bound on the selection scores (optimistic).
    """
    s0, s1 = _sorted_scores(scores_d, scores_dprime)
    cand = _midpoints(np.unique(np.concatenate([s0, s1])))

    def bound(fp, n0, fn, n1):
        return gdp_mu_lower_bound(fp, n0, fn, n1, confidence=confidence)

    return _best_test(s0, s1, cand, _KINDS, bound)


@dataclasses.dataclass(frozen=True)
class GdpEvaluation:
    """Result of :func:`gdp_evaluate_test` (all rates of the test "guess D′")."""

    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    mu_lower_bound: float
    mu_estimate: float
    epsilon_lower_bound: float
    epsilon_estimate: float

    @classmethod
    def at_delta(cls, fpr, fnr, fpr_upper, fnr_upper, mu_lower_bound, mu_estimate, delta):
        """The evaluation of these rates and μ's, with both ε read off the μ-GDP profile
        at ``delta`` (:func:`gdp_epsilon`)."""
        eps_lb, eps_est = gdp_epsilon(mu_lower_bound, delta), gdp_epsilon(mu_estimate, delta)
        return cls(fpr, fnr, fpr_upper, fnr_upper, mu_lower_bound, mu_estimate, eps_lb, eps_est)


def gdp_evaluate_test(
    test: ThresholdTest,
    scores_d,
    scores_dprime,
    *,
    delta: float,
    confidence: float = 0.95,
) -> GdpEvaluation:
    """Apply a fixed threshold test to fresh scores: μ lower bound and ε_μ(δ).

    Parameters
    ----------
    test : ThresholdTest
    scores_d, scores_dprime : array-like
        Scores of runs on D and D′ that did not choose ``test``.
    delta : float in (0, 1)
        δ at which ε is read off the GDP profile (2).
    confidence : float in (0, 1)

    Returns
    -------
    GdpEvaluation
        ``mu_lower_bound`` (≤ μ w.p. ≥ ``confidence`` for a μ-GDP mechanism),
        ``epsilon_lower_bound`` = ε_{mu_lower_bound}(δ) (a lower bound on the
        true ε(δ) under the GDP-shape assumption of the module docstring), and
        the point estimates without confidence correction.

    Raises
    ------
    InvalidPrivacyParameter
        δ not in (0, 1) (the GDP profile has δ > 0 at every finite ε), or a bad
        confidence.
    """
    fpr, fnr, fpr_u, fnr_u = _test_rates(test, scores_d, scores_dprime, confidence)
    delta = check_delta(delta, allow_zero=False)
    mu_lb = float(gdp_mu_from_rates(fpr_u, fnr_u))
    mu_est = float(gdp_mu_from_rates(fpr, fnr))
    return GdpEvaluation.at_delta(fpr, fnr, fpr_u, fnr_u, mu_lb, mu_est, delta)


def gdp_fit(scores_d, scores_dprime, *, delta: float, confidence: float = 0.95) -> GdpEvaluation:
    """μ-GDP lower bound from a Gaussian fit of the two score samples (all runs, no
    threshold).

    When the scores are N(m₀, s²) on D and N(m₁, s²) on D′ — exact for a μ-GDP
    mechanism scored by its log-likelihood ratio, approximately so for a sum of
    many per-step log-likelihood ratios (:mod:`dperm.audit.whitebox`) — every
    threshold test on them has the trade-off curve G_μ with μ = |m₁ − m₀|/s, a lower
    bound on the mechanism's μ (post-processing).  The estimate is the standardized
    mean difference μ̂ = |m̄₁ − m̄₀|/s_pooled; its standard error
    √(1/n₀ + 1/n₁ + μ̂²/(2(n₀ + n₁))) (the normal approximation of Hedges & Olkin
    1985, §5.B) gives ``mu_lower_bound`` = μ̂ − z_{1−α}·SE, one-sided: the score must
    be the larger on D′ (as a log-likelihood ratio ln p_{D′}/p_D is; a score oriented
    the other way gives 0, never a wrong bound).  Using every run and the means rather
    than one threshold's error counts, it needs ~10× fewer runs than
    :func:`gdp_evaluate_test` for the same width; the price is the assumption that the
    scores are Gaussian with a common variance (check the threshold estimate of the same
    runs next to it).

    Raises
    ------
    InvalidPrivacyParameter
        δ not in (0, 1), or a bad confidence.
    InvalidDataError
        Fewer than two scores in a sample, or non-finite scores.
    """
    from .stats import _check_scores

    s0 = _check_scores(scores_d, "scores_d")
    s1 = _check_scores(scores_dprime, "scores_dprime")
    alpha = _check_alpha(confidence)
    delta = check_delta(delta, allow_zero=False)
    n0, n1 = s0.size, s1.size
    if min(n0, n1) < 2:
        from ..exceptions import InvalidDataError

        raise InvalidDataError(f"a Gaussian fit needs ≥ 2 scores per dataset, got {n0} and {n1}")
    pooled = math.sqrt(((n0 - 1) * s0.var(ddof=1) + (n1 - 1) * s1.var(ddof=1)) / (n0 + n1 - 2))
    diff = float(s1.mean() - s0.mean())
    if pooled > 0:
        mu_hat = diff / pooled
    else:
        mu_hat = math.copysign(math.inf, diff) if diff else 0.0
    se = math.sqrt(1.0 / n0 + 1.0 / n1 + mu_hat**2 / (2.0 * (n0 + n1)))
    mu_lb = max(0.0, mu_hat - float(_st.norm.isf(alpha)) * se)
    mu_hat = max(mu_hat, 0.0)
    # the rates of the central threshold of the fit, Φ(−μ/2), for the record
    rate = float(_st.norm.cdf(-mu_hat / 2.0))
    rate_u = float(_st.norm.cdf(-mu_lb / 2.0))
    return GdpEvaluation.at_delta(rate, rate, rate_u, rate_u, mu_lb, mu_hat, delta)
