"""Excess-risk bounds that are pure formulas of public quantities (n, d, ε, δ, L, R, …).

The floor below :mod:`dperm.algorithms`: an algorithm may report its own bound
(e.g. :mod:`dperm.algorithms.exponential_sampling`'s ``utility_bound``) without
importing :mod:`dperm.theory`, which sits above the algorithms because several
of its bounds evaluate an algorithm's own calibration.  :mod:`dperm.theory`
re-exports every function defined here.
"""

from __future__ import annotations

import math

from ._docstrings import compose_doc
from ._validation import check_count, check_epsilon, check_nonnegative, check_positive
from .exceptions import InvalidPrivacyParameter

__all__ = ["expmech_erm_bound", "exponential_sampling_bound", "sgd_gradient_second_moment"]


def sgd_gradient_second_moment(
    *,
    clipping_norm: float,
    noise_std: float,
    dim: int,
    sampling_rate: float | None = None,
    batch_size: float | None = None,
) -> float:
    """G² ≥ E‖g̃‖² of a noisy clipped mini-batch gradient (Di Wang, Lecture 15, (15.5)
    for mini-batches): C²(1 + (1 − q)/b) + p·s².

    g̃ = (1/b)Σ_{i∈B} clip_C(∇ℓᵢ) + N(0, s²I_p), B drawn with inclusion rate q and
    expected size b = qn (Poisson: the sum's variance is ≤ n·q(1 − q)C², divided by
    b²; a fixed-size batch drawn without replacement has less), mean ‖·‖ ≤ C.  With
    q, b omitted (full batch) it is C² + p·s².  The SGD bounds
    (:func:`dperm.theory.lecture15_sgd_bound`) and DP-SGD's default step for
    η_t = η/√t (:func:`dperm.schedules.inverse_sqrt_learning_rate`) use it.

    Parameters
    ----------
    clipping_norm : float > 0
        C.
    noise_std : float ≥ 0
        s, the noise standard deviation per coordinate of the *averaged* gradient.
    dim : int ≥ 1
        p, the number of parameters.
    sampling_rate, batch_size : float, optional
        q and b.

    Raises
    ------
    InvalidPrivacyParameter

    Examples
    --------
    >>> sgd_gradient_second_moment(clipping_norm=1.0, noise_std=0.1, dim=100)
    2.0
    """
    C = check_positive(clipping_norm, "clipping_norm")
    s = check_nonnegative(noise_std, "noise_std")
    p = check_count(dim, "dim")
    rate = 0.0
    if sampling_rate is not None and batch_size is not None:
        rate = (1.0 - float(sampling_rate)) / check_positive(batch_size, "batch_size")
    return C * C * (1.0 + rate) + p * s * s


def _check_problem(n, d, epsilon) -> tuple[int, int, float]:
    """(n, d, ε) of a bound, checked in that order: integers n, d ≥ 1, 0 < ε < ∞.

    Raises
    ------
    InvalidPrivacyParameter
        Naming the first bad parameter (``epsilon`` for any ε).
    """
    return check_count(n, "n"), check_count(d, "d"), check_epsilon(epsilon)


def _ball_problem(n, d, epsilon, lipschitz, radius, sensitivity):
    """(n, d, ε, L, R, Δ) of an exponential-mechanism bound over an ℓ2 ball, checked;
    Δ defaults to 2LR (the Lipschitz range over the ball's diameter)."""
    n, d, epsilon = _check_problem(n, d, epsilon)
    lip = check_positive(lipschitz, "lipschitz")
    R = check_positive(radius, "radius")
    sens = 2.0 * lip * R if sensitivity is None else check_positive(sensitivity, "sensitivity")
    return n, d, epsilon, lip, R, sens


#: the parameters of an exponential-mechanism bound over an ℓ2 ball (checked by
#: :func:`_ball_problem`), composed into the docstrings of the two bounds
_BALL_PROBLEM = """
n, d : int ≥ 1
epsilon : float > 0
lipschitz : float > 0
    L, a bound on ‖∇ℓ(θ; x, y)‖₂ over C.
radius : float > 0
    R of the ball C.
sensitivity : float > 0, optional
    Δ of the sampler; default 2LR.
"""


@compose_doc(ball_problem=_BALL_PROBLEM)
def exponential_sampling_bound(
    *,
    n: int,
    d: int,
    epsilon: float,
    lipschitz: float,
    radius: float,
    sensitivity: float | None = None,
    beta: float = 0.05,
) -> float:
    """High-probability excess empirical risk of exponential sampling over an ℓ2 ball.

    For θ̂ drawn with density ∝ exp(−ε F(θ)/(2Δ)) on C = {‖θ‖₂ ≤ R}, where
    F = Σᵢ ℓ(·; xᵢ, yᵢ) is convex and nL-Lipschitz on C, with probability ≥ 1 − β
    (β ≤ 1/e)

        L(θ̂) − min_C L ≤ (4Δ / (nε)) · ( d · ln max(1, εG/(2Δ)) + ln(1/β) ),
        G = 2nLR (≥ max_C F − min_C F),  L = F/n the mean loss,

    so with the default Δ = 2LR it is (8LR/(nε))(d ln max(1, nε/2) + ln(1/β)).
    Derivation (the standard level-set argument for the exponential mechanism
    on a convex set, as used by Bassily–Smith–Thakurta, FOCS 2014, §3, written
    out with our own constants; Smith & Ullman, Lecture 11, proof of Theorem 2.5
    bounds the same probability by a Lipschitz-ball argument without convexity,
    P(BAD) ≤ (2R/r)^d·e^{−εnt/(2Δ)} for the mean loss, excess ≤ rG + t, and
    states it at Δ = GR, half the range 2GR of a G-Lipschitz loss on the ball
    — :func:`expmech_erm_bound` integrates it): with a = ε/(2Δ) and
    S_t = {F ≤ F* + t}, convexity gives S_t ⊇ θ* + (t/G)(C − θ*), so vol(C)/vol(S_t) ≤ (G/t)^d and
    P(F(θ̂) ≥ F* + 2t) ≤ (G/t)^d e^{−at}; t₀ = (d ln max(1, aG) + ln(1/β))/a
    makes the right side ≤ β (t₀ ≥ 1/a because ln(1/β) ≥ 1), and the gap is 2t₀.

    Parameters
    ----------
    {ball_problem}
    beta : float in (0, 1/e]

    Returns
    -------
    float
        The bound in mean-loss units.

    Raises
    ------
    InvalidPrivacyParameter
    """
    n, d, epsilon, lip, R, sens = _ball_problem(n, d, epsilon, lipschitz, radius, sensitivity)
    beta = float(beta)
    if not (0.0 < beta <= math.exp(-1.0)):
        raise InvalidPrivacyParameter(f"beta must be in (0, 1/e], got {beta!r}")
    a = epsilon / (2.0 * sens)
    G = 2.0 * n * lip * R
    t0 = (d * math.log(max(1.0, a * G)) + math.log(1.0 / beta)) / a
    return 2.0 * min(t0, G / 2.0) / n


@compose_doc(ball_problem=_BALL_PROBLEM)
def expmech_erm_bound(
    *,
    n: int,
    d: int,
    epsilon: float,
    lipschitz: float,
    radius: float,
    sensitivity: float | None = None,
) -> float:
    """Smith & Ullman, Lecture 11, Theorem 2.5 — *in expectation*, with its proof's
    constants, at the sampler's actual sensitivity Δ.

    ExpMech-ERM draws θ̂ with density ∝ exp(−(εn/(2Δ))L(θ)) on the ℓ2 ball C of
    radius R, L the mean of G-Lipschitz losses (G = ``lipschitz``).  The proof's two sets
    (GOOD ⊇ a ball of radius r/2 inside C, BAD the level set above L* + rG + t)
    give P(L(θ̂) − L* ≥ rG + t) ≤ (2R/r)^d e^{−ant}, a = ε/(2Δ); integrating
    (E Z = ∫ P(Z ≥ z) dz, the proof's last line):

        E[L(θ̂)] − L* ≤ rG + (d ln(2R/r) + 1)/(an),

    and r = d/(anG) (≤ 2R, else the trivial bound 2GR) gives
    (2Δ/(εn))·(d(1 + ln(εnGR/(Δd))) + 1).  With the lecture's Δ = GR this is
    (2GR/(εn))(d(1 + ln(εn/d)) + 1), the theorem's O(dGR log(εn/d)/(εn)).

    Statement vs proof: Theorem 2.5 runs the mechanism with Δ = GR, but a
    G-Lipschitz loss on the ball of radius R (diameter 2R) ranges over up to
    2GR (Exercise 2.1 with the diameter), so the privacy of Lemma 2.4 needs
    Δ = 2GR in general; dperm's sampler uses Δ = min(loss range, 2GR)
    (:func:`dperm.algorithms.exponential_sampling.sensitivity`) and this bound
    is evaluated at that Δ (default 2GR).

    Parameters
    ----------
    {ball_problem}

    Returns
    -------
    float
        The bound in mean-loss units.

    Raises
    ------
    InvalidPrivacyParameter
    """
    n, d, epsilon, lip, R, sens = _ball_problem(n, d, epsilon, lipschitz, radius, sensitivity)
    an = epsilon * n / (2.0 * sens)
    r = d / (an * lip)
    if r > 2.0 * R:
        return 2.0 * lip * R
    return min(2.0 * lip * R, (d * (1.0 + math.log(2.0 * R / r)) + 1.0) / an)
