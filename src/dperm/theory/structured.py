"""Bounds of the structured-sparsity algorithms (#11): structured output
perturbation, its soft-denoised release and the private dual Frank-Wolfe
(Kumar & Deisenroth 2019), with the Gaussian width of the norm's dual ball.
"""

from __future__ import annotations

import math

from .._validation import check_count, check_delta, check_epsilon, check_nonnegative, check_positive
from ..bounds import _check_problem
from ..exceptions import InvalidPrivacyParameter
from .base import (
    TheoryBound,
    _diagnostics,
    _e_norm_gaussian,
    _n_coef,
    _noise_moments,
    _output_noise_cost,
)

__all__ = ["denoised_release_bound", "dual_frank_wolfe_bound", "structured_output_bound"]


def _release_noise_cost(n, d, epsilon, delta, lip, lam_sc, beta, weight, width):
    """(smooth part, structured part) of what the release noise κ costs.

    κ is calibrated to sensitivity 2L/(nΛ) as the algorithms do; the smooth part
    is fact (ii) of :mod:`dperm.theory`, the structured part is
    ``weight``·E Ω(κ) = ``weight``·E‖κ‖·G/E‖g‖ for rotation-invariant κ
    (κ = ‖κ‖·u, u uniform on the sphere; G = ``width`` = E Ω(g),
    E‖g‖ = √2 Γ((d+1)/2)/Γ(d/2)).
    """
    m1, m2 = _noise_moments(d, epsilon, delta, 2.0 * lip / (n * lam_sc))
    return _output_noise_cost(m1, m2, lip, beta, lam_sc), weight * m1 * width / _e_norm_gaussian(d)


def _norm_and_width(estimator, n_samples: int, d: int) -> tuple:
    """(the norm the adapter of a fitted structured estimator resolved, the Gaussian
    width w = E Ω(g) of its dual ball |P|(F) — the upper end of its CI when Monte Carlo):
    public quantities, the same for every bound of :mod:`dperm.theory`."""
    from ..algorithms.structured_output_perturbation import estimator_norm
    from ..norms import gaussian_width

    norm, _ = estimator_norm(estimator, estimator.loss_, n_samples, d)
    return norm, gaussian_width(norm, ball="dual", n_samples=2000, random_state=0).ci_high


def _vertex_set(norm) -> tuple[float, float]:
    """(ln N, ρ) of the vertex set the private dual Frank-Wolfe selects from: N vertices of
    the product of the dual blocks, ρ ≥ max‖Σ_b v_b‖ (the quadrature sum of the blocks'
    radii is exact only for disjoint blocks; overlapping ones — groups, graph TV — need
    more: :func:`~dperm.algorithms.dual_frank_wolfe.vertex_radius`)."""
    from ..algorithms.dual_frank_wolfe import dual_vertex_blocks, vertex_radius

    blocks = dual_vertex_blocks(norm)
    return sum(math.log(V.shape[0]) for _, V in blocks), vertex_radius(blocks, norm.d)


def _for_estimator(estimator, n_samples: int, make_bound) -> TheoryBound | None:
    """``make_bound(diagnostics, norm, common)`` for a fitted structured estimator,
    or None when a quantity is missing; ``common`` holds the keyword arguments
    both structured bounds take (public quantities: the call's diagnostics, the
    norm the adapter resolved, its Gaussian width: :func:`_norm_and_width`)."""
    dg = _diagnostics(estimator)
    d = _n_coef(estimator)
    try:
        norm, width = _norm_and_width(estimator, n_samples, d)
        beta = dg.get("smoothness")
        common = {
            "n": n_samples,
            "d": d,
            "lipschitz": float(dg["lipschitz"]),
            "strong_convexity": float(dg["strong_convexity"]),
            "lam": float(dg["lam"]),
            "gaussian_width": width,
            "smoothness": float(beta) if beta is not None and math.isfinite(beta) else None,
        }
        return make_bound(dg, norm, common)
    except (InvalidPrivacyParameter, KeyError):
        return None


def structured_output_bound(
    *,
    n: int,
    d: int,
    epsilon: float,
    delta: float = 0.0,
    lipschitz: float,
    strong_convexity: float,
    lam: float,
    gaussian_width: float,
    smoothness: float | None = None,
) -> TheoryBound:
    """Expected excess of J = (1/n)Σℓ + (λ/n)Ω + (Λ/2)‖θ‖² for structured output
    perturbation (:mod:`dperm.algorithms.structured_output_perturbation`), with
    the Gaussian width G = E Ω(g) of the dual ball |P|(F).

    Derived here (in the spirit of Kumar & Deisenroth 2019, Theorem 1, whose
    exact statement dperm does not reproduce): for rotation-invariant zero-mean
    noise κ (Gamma-norm or Gaussian, κ = ‖κ‖·u with u uniform on the sphere),
    the smooth part costs fact (ii) of :mod:`dperm.theory`, and by the triangle
    inequality Ω(θ̂ + κ) − Ω(θ̂) ≤ Ω(κ), with E Ω(κ) = E‖κ‖ · G / E‖g‖
    (E‖g‖ = √2 Γ((d+1)/2)/Γ(d/2)).  So

        E[J(θ̂ + κ)] − J(θ̂) ≤ min((β+Λ)/2 · E‖κ‖², L E‖κ‖ + Λ/2 · E‖κ‖²)
                              + (λ/n) · E‖κ‖ · G / E‖g‖,

    with κ calibrated to sensitivity 2L/(nΛ) as the module does.

    Raises
    ------
    InvalidPrivacyParameter
    """
    n, d, epsilon = _check_problem(n, d, epsilon)
    delta = check_delta(delta)
    lip = check_positive(lipschitz, "lipschitz")
    lam_sc = check_positive(strong_convexity, "strong_convexity")
    lam = check_nonnegative(lam, "lam")
    width = check_positive(gaussian_width, "gaussian_width")
    beta = None if smoothness is None else check_positive(smoothness, "smoothness")
    smooth, structured = _release_noise_cost(
        n, d, epsilon, delta, lip, lam_sc, beta, lam / n, width
    )
    value = smooth + structured
    return TheoryBound(
        value,
        "smooth-part noise cost + (λ/n)·E‖κ‖·G/E‖g‖",
        True,
        "structured output perturbation: sensitivity 2L/(nΛ) (Chaudhuri et al. 2011, Thm 6), "
        "Gaussian-width term derived in dperm.theory.structured_output_bound "
        "(cf. Kumar & Deisenroth 2019, Thm 1)",
        "E[J(θ)] − min J,  J = (1/n)Σℓ + (λ/n)Ω + (Λ/2)‖θ‖²",
    )


def denoised_release_bound(*, tau: float, omega: float, level: float) -> TheoryBound:
    """Distance of the soft-denoised release to the exact minimizer:
    ‖prox_{τΩ}(θ̂ + b) − θ̂‖₂² ≤ 4·τ·Ω(θ̂) with probability ≥ 1 − β
    (:mod:`dperm.algorithms.structured_output_perturbation`, "Denoising").

    Proof (derived here; the lasso-type denoising argument).  Let p minimize
    ½‖θ − θ̂ − b‖² + τΩ(θ).  Comparing with θ = θ̂:
    ½‖p − θ̂‖² − ⟨b, p − θ̂⟩ + ½‖b‖² + τΩ(p) ≤ ½‖b‖² + τΩ(θ̂), so
    ½‖p − θ̂‖² ≤ Ω*(b)Ω(p − θ̂) + τ(Ω(θ̂) − Ω(p)) (Hölder for a norm and its
    dual).  On the event Ω*(b) ≤ τ — of probability ≥ 1 − β when τ is the
    (1 − β)-quantile of Ω*(b) — the triangle inequality
    Ω(p − θ̂) ≤ Ω(p) + Ω(θ̂) gives ½‖p − θ̂‖² ≤ 2τΩ(θ̂).  Compare E‖b‖² = σ²d for
    the raw release.

    Parameters
    ----------
    tau : float ≥ 0
        τ (``diagnostics["denoise_threshold"]``).
    omega : float ≥ 0
        Ω(θ̂) or any upper bound on it (θ̂ is private: a public bound such as
        (n/λ)·ℓ(0) from J(θ̂) ≤ J(0) keeps the statement public).
    level : float in (0, 1)
        β.

    Raises
    ------
    InvalidPrivacyParameter
    """
    tau = check_nonnegative(tau, "tau")
    omega = check_nonnegative(omega, "omega")
    level = float(level)
    if not 0.0 < level < 1.0:
        raise InvalidPrivacyParameter(f"level must be in (0, 1), got {level!r}")
    return TheoryBound(
        4.0 * tau * omega,
        "4·τ·Ω(θ̂)",
        True,
        "soft-denoised output perturbation: derived in dperm.theory.denoised_release_bound "
        f"(holds with probability ≥ {1.0 - level:g})",
        "‖prox_{τΩ}(θ̂ + b) − θ̂‖₂²",
    )


def _structured_for_estimator(estimator, n_samples: int) -> TheoryBound | None:
    """:func:`structured_output_bound` of an estimator fitted with
    ``mechanism="structured-output"`` (see :func:`_for_estimator`)."""
    return _for_estimator(
        estimator,
        n_samples,
        lambda dg, norm, common: structured_output_bound(
            epsilon=float(dg["epsilon"]), delta=float(dg["delta"]), **common
        ),
    )


# ----------------------------------------------------------- dual Frank-Wolfe (#11, K–D Thm 4)
def dual_frank_wolfe_bound(
    *,
    n: int,
    d: int,
    epsilon_step: float,
    n_steps: int,
    log_n_vertices: float,
    vertex_radius: float,
    lipschitz: float,
    strong_convexity: float,
    lam: float,
    epsilon_release: float,
    delta_release: float = 0.0,
    gaussian_width: float,
    smoothness: float | None = None,
) -> TheoryBound:
    """Expected excess of P = (1/n)Σℓ + (Λ/2)‖θ‖² + λΩ(θ) (mean form) for the
    private dual Frank-Wolfe of :mod:`dperm.algorithms.dual_frank_wolfe`
    (Kumar & Deisenroth 2019, Algorithm 2).

    **Derived here, next to K–D's Theorem 4**: K–D's Theorem 4 (Kumar & Deisenroth
    2019, "Utility Guarantee") states only a rate for the dual gap,
    O(Γ_K^{2/3}(L G_K)^{2/3} log(n|S|) √log(1/δ)/(nε)^{2/3}) at
    T = Γ_K^{4/3}(nε)^{2/3}/(L G_K)^{2/3} (taken over from Talwar, Thakurta, Zhang's
    Theorem 5.5), evaluated with constant 1 by :func:`dperm.theory.kd_theorem4_bound`.
    For the primal excess with explicit constants dperm proves a bound for the
    algorithm it implements (exponential-mechanism vertex selection with
    ε₀ = ``epsilon_step``, T = ``n_steps`` steps γ_t = 2/(t+2), then output
    perturbation of θ(s_T) with ``epsilon_release``/``delta_release``).  Like
    K–D's bound it depends on the Gaussian width w = E Ω(g) of the dual-norm
    unit ball |P|(F) (``gaussian_width``).  Notation: K = λ|P|(F),
    ρ = max_{v∈|P|(F)}‖v‖₂ (``vertex_radius``), N = number of vertices of the
    product set the selection samples from (``log_n_vertices`` = ln N),
    Δ = 2Lλρ/(nΛ) the score sensitivity, M = L + λρ.

    Proof.  (a) θ(s) = argmin L̂ + ⟨s, ·⟩ = ∇D(s) is (1/Λ)-Lipschitz in s, so
    −D is (1/Λ)-smooth and the Frank-Wolfe curvature constant over K is
    C ≤ diam(K)²/Λ ≤ 4λ²ρ²/Λ.  (b) The exponential mechanism picks v_t with
    E[max_v⟨v, θ_t⟩ − ⟨v_t, θ_t⟩] ≤ η = (2Δ/ε₀)(ln N + 1) (Dwork & Roth 2014,
    Thm 3.11, integrated over its tail).  (c) With h_t = D* − D(s_t),
    concavity and (a) give E h_{t+1} ≤ (1 − γ_t)E h_t + γ_t η + γ_t² C/2, and
    induction on h_t − η with γ_t = 2/(t+2) gives
    E h_T ≤ η + 2C/(T+2) (Jaggi 2013, Thm 1 with an additive oracle error).
    (d) Since ⟨s, θ*⟩ ≤ λΩ(θ*) for s ∈ K and L̂ + ⟨s, ·⟩ is Λ-strongly convex,
    (Λ/2)‖θ(s) − θ*‖² ≤ D* − D(s); by Jensen E‖θ(s_T) − θ*‖ ≤ √(2 E h_T/Λ).
    (e) ‖θ(s)‖, ‖θ*‖ ≤ M/Λ (first-order conditions, subgradients of λΩ lie in
    K) and Ω(u) ≤ ρ‖u‖₂, so P is 2M-Lipschitz between them:
    P(θ(s_T)) − P* ≤ 2M‖θ(s_T) − θ*‖.  (f) The release noise κ (sensitivity
    2L/(nΛ), rotation invariant, independent, zero mean) costs fact (ii) of
    :mod:`dperm.theory` on the smooth part plus λ E Ω(κ) = λ E‖κ‖·w/E‖g‖.
    Altogether

        E[P(θ(s_T) + κ)] − P* ≤ 2M·√((2/Λ)(8λ²ρ²/(Λ(T+2)) + (2Δ/ε₀)(ln N + 1)))
                                 + cost(κ) + λ·E‖κ‖·w/E‖g‖.

    Assumes θ(s) is computed exactly (the algorithm certifies ``tol``).

    Raises
    ------
    InvalidPrivacyParameter
    """
    n, d, eps0 = _check_problem(n, d, epsilon_step)
    T = check_count(n_steps, "n_steps")
    log_n = check_nonnegative(log_n_vertices, "log_n_vertices")
    rho = check_positive(vertex_radius, "vertex_radius")
    lip = check_positive(lipschitz, "lipschitz")
    lam_sc = check_positive(strong_convexity, "strong_convexity")
    lam = check_positive(lam, "lam")
    eps_rel = check_epsilon(epsilon_release)
    delta_rel = check_delta(delta_release)
    width = check_positive(gaussian_width, "gaussian_width")
    beta = None if smoothness is None else check_positive(smoothness, "smoothness")
    score_sens = 2.0 * lip * lam * rho / (n * lam_sc)
    h_T = 8.0 * (lam * rho) ** 2 / (lam_sc * (T + 2)) + 2.0 * score_sens / eps0 * (log_n + 1.0)
    M = lip + lam * rho
    smooth, structured = _release_noise_cost(
        n, d, eps_rel, delta_rel, lip, lam_sc, beta, lam, width
    )
    value = 2.0 * M * math.sqrt(2.0 * h_T / lam_sc) + smooth + structured
    return TheoryBound(
        value,
        "2M√((2/Λ)(8λ²ρ²/(Λ(T+2)) + (2Δ/ε₀)(ln N + 1))) + cost(κ) + λ·E‖κ‖·w/E‖g‖",
        True,
        "private dual Frank-Wolfe (Kumar & Deisenroth 2019, Alg. 2): bound derived in "
        "dperm.theory.dual_frank_wolfe_bound (noisy Frank-Wolfe: Jaggi 2013, Thm 1; "
        "exponential mechanism: Dwork & Roth 2014, Thm 3.11), not K–D's Theorem 4",
        "E[P(θ)] − min P,  P = (1/n)Σℓ + (Λ/2)‖θ‖² + λΩ(θ)",
    )


def _dual_fw_for_estimator(estimator, n_samples: int) -> TheoryBound | None:
    """:func:`dual_frank_wolfe_bound` of an estimator fitted with
    ``mechanism="dual-frank-wolfe"`` (see :func:`_for_estimator`; also the
    norm's vertex set: :func:`_vertex_set`)."""

    def bound(dg, norm, common):
        log_n, rho = _vertex_set(norm)
        return dual_frank_wolfe_bound(
            epsilon_step=float(dg["epsilon_step"]),
            n_steps=int(dg["n_steps"]),
            log_n_vertices=log_n,
            vertex_radius=rho,
            epsilon_release=float(dg["release_fraction"]) * float(dg["epsilon"]),
            delta_release=float(dg["delta"]) / 2.0 if "noise_multiplier" in dg else 0.0,
            **common,
        )

    return _for_estimator(estimator, n_samples, bound)
