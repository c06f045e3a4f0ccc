"""The exponential mechanism over an ℓ2 ball in any dimension without a ridge
term: the proximal sampler with an exact restricted Gaussian oracle, run for a
public number of steps that bounds its total-variation distance to the target,
charged as δ (the option the issue names; Bassily, Smith, Thakurta 2014 §3 use
the same device with a grid walk; Gopi, Lee, Liu 2022 with the proximal
sampler).

Target π(θ) ∝ exp(−U(θ)) on C = {‖θ‖₂ ≤ R}, U = a·F, F = Σᵢ ℓ(·; xᵢ, yᵢ)
convex and β_F = n·β_ℓ-smooth, a = ε/(2Δ).

* **Step** (Lee, Shen, Tian 2021, "Structured logconcave sampling with a
  restricted Gaussian oracle"): y ~ N(x, ηI), then x ~ π(x)·exp(−‖x − y‖²/(2η))
  restricted to C.  The second draw is *exact*: its potential
  aF(x) + ‖x − y‖²/(2η) is (1/η)-strongly convex, so the Gaussian-envelope
  rejection of :func:`dperm.algorithms.exponential_sampling.sample_strongly_log_concave`
  samples it exactly (F̃ = F − ⟨y, ·⟩/(aη), ridge 1/(aη)).  The pair (x, y) is
  then a Gibbs sampler of π(x)N(y; x, ηI), whose x-marginal is π.
* **Mixing** (Chen, Chewi, Salim, Wibisono, COLT 2022, "Improved analysis for
  a proximal algorithm for sampling": χ² contraction under a Poincaré
  inequality): χ²(ρ_k‖π) ≤ χ²(ρ₀‖π)/(1 + η/C_PI)^{2k}.  A log-concave measure
  on a convex body of diameter 2R has C_PI ≤ (2R)²/π² (Payne & Weinberger
  1960; for log-concave weights, e.g. Klartag 2009).  ρ₀ uniform on C has
  1 + χ²(ρ₀‖π) ≤ sup ρ₀/π ≤ e^{U_max − U_min} ≤ e^{aΔn} = e^{εn/2} (F ranges
  over at most nΔ on C).  TV ≤ ½√χ², so k = ⌈(εn/2 + ln(1/(4τ²)))/(2 ln(1 +
  η/C_PI))⌉ steps give TV(law of x_k, π) ≤ τ.
* **Privacy**: for every event S, P(M(D) ∈ S) ≤ π_D(S) + τ ≤ e^ε π_D′(S) + τ
  ≤ e^ε P(M(D′) ∈ S) + (1 + e^ε)τ, so the release is (ε, (1 + e^ε)τ)-DP,
  replace-one (the exponential mechanism's ε-DP of π_D is exact; the steps and
  η are public).  τ = δ/(1 + e^ε).
* **η** = 1/(d·a·β_F) keeps the oracle's public acceptance estimate
  (1 + aβ_Fη)^{d/2} ≈ e^{1/2}; the number of steps grows like n²εdβ_ℓR²/Δ —
  practical for a few thousand rows (refused above :data:`MAX_STEPS`).

Side channel: running time depends on the data (rejection); only θ is released.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..exceptions import UnsupportedOperationError

__all__ = ["MAX_STEPS", "proximal_steps", "sample_proximal"]

#: largest public number of proximal steps fit accepts
MAX_STEPS = 200_000


def proximal_steps(*, n: int, epsilon: float, radius: float, eta: float, tv: float) -> int:
    """k of the module docstring: TV(law of x_k, π) ≤ ``tv`` from the uniform start."""
    c_pi = (2.0 * radius / math.pi) ** 2
    need = 0.5 * epsilon * n + math.log(1.0 / (4.0 * tv * tv))
    return max(1, math.ceil(need / (2.0 * math.log1p(eta / c_pi))))


def sample_proximal(
    F: Callable[[np.ndarray], np.ndarray],
    grad_F: Callable[[np.ndarray], np.ndarray],
    *,
    scale: float,
    smoothness: float,
    radius: float,
    d: int,
    steps: int,
    eta: float,
    rng: np.random.Generator,
    oracle: Callable,
) -> np.ndarray:
    """x_k of the proximal sampler for π ∝ exp(−scale·F) on the ball (module
    docstring), from a uniform point of the ball.

    Raises
    ------
    UnsupportedOperationError
        ``steps`` above :data:`MAX_STEPS`.
    ConvergenceError
        An oracle draw accepted nothing within its proposal budget.

    ``oracle`` is the exact strongly-log-concave sampler
    (:func:`dperm.algorithms.exponential_sampling.sample_strongly_log_concave`).
    """
    if steps > MAX_STEPS:
        raise UnsupportedOperationError(
            f"the proximal sampler needs {steps} steps here (limit {MAX_STEPS}); use fewer "
            "rows, a larger radius-free sensitivity, alpha > 0 or d ≤ 2"
        )
    a, R = scale, radius
    u = rng.standard_normal(d)
    x = u / np.linalg.norm(u) * R * rng.uniform() ** (1.0 / d)  # uniform on the ball
    lr = 1.0 / (a * smoothness + 1.0 / eta)
    for _ in range(steps):
        y = x + math.sqrt(eta) * rng.standard_normal(d)
        c = x.copy()  # a few projected gradient steps towards the oracle's mode
        for _ in range(3):
            c = c - lr * (a * grad_F(c[None])[0] + (c - y) / eta)
            nc = float(np.linalg.norm(c))
            if nc > R:
                c *= R / nc
        x, _ = oracle(
            lambda T, y=y: F(T) - (T @ y) / (a * eta),
            lambda T, y=y: grad_F(T) - y[None, :] / (a * eta),
            scale=a,
            ridge=1.0 / (a * eta),
            center=c,
            radius=R,
            batch_size=8,
            random_state=rng,
        )
    return x
