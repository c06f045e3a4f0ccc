"""The lectures' closed-form noise calibrations, next to the exact accountants' —
for comparison; dperm's algorithms calibrate with the accountants.

**Lecture 15, Lemma 15.5** (Di Wang, CS 325 Lecture 15, "DP-ERM III"): single-sample
DP-SGD (Algorithm 3: one record drawn uniformly per step, its gradient plus
N(0, σ²I)) with an L-Lipschitz loss is (ε, δ)-DP for

    σ² = 64 L² T ln(2/δ) ln(2.5T/(δn)) / (n² ε²).

Its proof, made explicit (replace-one neighbours, n public).  The step's inner
mechanism A adds N(0, σ²I) to one gradient, ℓ2 sensitivity Δ = 2L; Lemma 15.3 (the
classical Gaussian mechanism, Dwork & Roth 2014, Thm A.1) makes A (ε_A, δ_A)-DP with
σ² = 2Δ² ln(1.25/δ_A)/ε_A²; Lemma 15.4 (amplification by a uniform draw of m = 1 of
n) makes the step (ε′, δ_A/n)-DP with ε′ = ln(1 + (e^{ε_A} − 1)/n); Lemma 15.2
(advanced composition, Dwork, Rothblum, Vadhan 2010; Dwork & Roth 2014, Thm 3.20
with δ″ = δ/2) composes T steps to (ε′√(2T ln(2/δ)) + Tε′(e^{ε′} − 1),
Tδ_A/n + δ/2).  The lecture sets ε_A = n·ε₀ and δ_A = n·δ₀ with the per-step
target ε₀ = ε/(2√(2T ln(2/δ))), δ₀ = δ/(2T) — reading ε′ ≈ ε_A/n — and
2Δ² ln(1.25/δ_A)/ε_A² is then exactly the σ² above.  The argument is a proof when

1. δ_A = nδ/(2T) < 1 (a Gaussian mechanism's δ; else ln(2.5T/(δn)) ≤ ln 1.25);
2. ε_A = nε/(2√(2T ln(2/δ))) < 1 — Lemma 15.3 holds for ε ∈ (0, 1) only;
3. the composed ε with the *exact* amplified ε′ (not ε_A/n, which it always
   exceeds: (e^{nx} − 1)/n ≥ e^x − 1) is ≤ ε.  The ε/2 the lemma leaves to the
   second composition term absorbs the gap whenever 1. and 2. hold at moderate ε.

Condition 2 is the binding one: it needs T > n²ε²/(8 ln(2/δ)); the lecture's
T = n² satisfies it, but e.g. n = 1000, T = 2000, ε = 2, δ = 10⁻⁵ gives ε_A = 4.5 and
the lemma does not apply (:func:`lecture15_single_sample_sigma` refuses).  Inside its
range the lemma is sound but loose: the exact accountants of the same event
(:func:`single_sample_sigma`; dperm's ``dp_sgd.fit_single_sample``) need much less
noise (``docs/coverage.md``, Lecture 15).
"""

from __future__ import annotations

import math

from .._validation import check_count, check_delta, check_epsilon, check_positive
from ..exceptions import InvalidPrivacyParameter
from .calibrate import calibrate_noise
from .events import Gaussian, SampledWithoutReplacement, SelfComposed

__all__ = ["lecture15_single_sample_sigma", "single_sample_sigma"]


def _checked(n, steps, epsilon, delta, lipschitz) -> tuple[int, int, float, float, float]:
    """(n, T, ε, δ, L) checked: counts ≥ 1, ε > 0, δ in (0, 1), L > 0."""
    return (
        check_count(n, "n"),
        check_count(steps, "steps"),
        check_epsilon(epsilon),
        check_delta(delta, allow_zero=False),
        check_positive(lipschitz, "lipschitz"),
    )


def _lemma155_terms(n: int, steps: int, epsilon: float, delta: float) -> dict[str, float]:
    """The quantities of the lemma's proof (module docstring)."""
    log2d = math.log(2.0 / delta)
    eps_step = epsilon / (2.0 * math.sqrt(2.0 * steps * log2d))
    eps_inner = n * eps_step
    # Lemma 15.4 exactly: ln(1 + (e^{ε_A} − 1)/n) = ε_A − ln n + ln(1 + (n − 1)e^{−ε_A})
    if eps_inner < 700:
        eps_amp = math.log1p(math.expm1(eps_inner) / n)
    else:
        eps_amp = eps_inner - math.log(n) + math.log1p((n - 1) * math.exp(-eps_inner))
    root = math.sqrt(2.0 * steps * log2d)
    composed = eps_amp * root + steps * eps_amp * math.expm1(eps_amp) if eps_amp < 700 else math.inf
    return {
        "eps_inner": eps_inner,
        "delta_inner": n * delta / (2.0 * steps),
        "eps_amplified": eps_amp,
        "composed_epsilon": composed,
    }


def lecture15_single_sample_sigma(
    n: int, steps: int, epsilon: float, delta: float, *, lipschitz: float = 1.0
) -> float:
    """σ of Lecture 15, Lemma 15.5 (single-sample DP-SGD), refused outside the range
    where its proof holds (module docstring).

        σ = √(64 L² T ln(2/δ) ln(2.5T/(δn))) / (nε)

    Neighbouring relation: replace-one (n public); the noise is added to one
    example's gradient (sensitivity 2L).

    Parameters
    ----------
    n : int ≥ 1
        Number of records.
    steps : int ≥ 1
        T.
    epsilon : float > 0
    delta : float in (0, 1)
    lipschitz : float > 0, default 1.0
        L.

    Returns
    -------
    float
        σ, the standard deviation of the noise per coordinate.

    Raises
    ------
    InvalidPrivacyParameter
        Bad input, or a setting outside the lemma's range of validity: δ_A =
        nδ/(2T) ≥ 1, ε_A = nε/(2√(2T ln(2/δ))) ≥ 1 (Lemma 15.3 needs ε < 1), or a
        composed ε above the target (the message names the failing quantity).

    Examples
    --------
    >>> round(lecture15_single_sample_sigma(1000, 1_000_000, 1.0, 1e-5), 3)
    122.906
    """
    n, steps, epsilon, delta, lip = _checked(n, steps, epsilon, delta, lipschitz)
    t = _lemma155_terms(n, steps, epsilon, delta)
    where = f"(n={n}, T={steps}, epsilon={epsilon:g}, delta={delta:g})"
    if t["delta_inner"] >= 1.0:
        raise InvalidPrivacyParameter(
            f"Lecture 15, Lemma 15.5 does not apply {where}: its inner Gaussian mechanism "
            f"would need delta_A = n·delta/(2T) = {t['delta_inner']:.3g} ≥ 1"
        )
    if t["eps_inner"] >= 1.0:
        raise InvalidPrivacyParameter(
            f"Lecture 15, Lemma 15.5 does not apply {where}: its inner Gaussian mechanism "
            f"would need epsilon_A = n·epsilon/(2√(2T ln(2/delta))) = {t['eps_inner']:.3g} ≥ 1, "
            "outside Lemma 15.3 (epsilon < 1); it needs T > n²·epsilon²/(8 ln(2/delta)) — use "
            "single_sample_sigma (the exact accountant) instead"
        )
    if t["composed_epsilon"] > epsilon:
        raise InvalidPrivacyParameter(
            f"Lecture 15, Lemma 15.5 does not apply {where}: with the exact amplification of "
            f"Lemma 15.4 the advanced composition gives epsilon {t['composed_epsilon']:.4g} > "
            f"{epsilon:g}"
        )
    var = 64.0 * lip**2 * steps * math.log(2.0 / delta) * math.log(2.5 * steps / (delta * n))
    return math.sqrt(var) / (n * epsilon)


def single_sample_sigma(
    n: int,
    steps: int,
    epsilon: float,
    delta: float,
    *,
    lipschitz: float = 1.0,
    accountant: str = "pld",
) -> float:
    """The smallest σ an accountant certifies for T steps of single-sample DP-SGD:
    ``SelfComposed(SampledWithoutReplacement(1, n, Gaussian(σ/(2L))), T)``, the event
    of :func:`dperm.algorithms.dp_sgd.fit_single_sample` (replace-one; one uniform draw
    of n is a uniformly random subset of size 1; sensitivity 2L).

    Parameters
    ----------
    n, steps, epsilon, delta, lipschitz
        As :func:`lecture15_single_sample_sigma`.
    accountant : {"pld", "rdp"}, default "pld"
        "pld": the tight replace-one PLD of a fixed-size subsampled Gaussian (the
        default of ``fit_single_sample``); "rdp": Wang, Balle, Kasiviswanathan 2019.

    Returns
    -------
    float
        σ with the event certified (ε, δ)-DP (to the calibration's 10⁻⁴ relative).

    Raises
    ------
    InvalidPrivacyParameter
    """
    n, steps, epsilon, delta, lip = _checked(n, steps, epsilon, delta, lipschitz)

    def event(z: float):
        return SelfComposed(SampledWithoutReplacement(1, n, Gaussian(z)), steps)

    z = calibrate_noise(event, epsilon, delta, accountant=accountant)
    return 2.0 * lip * z
