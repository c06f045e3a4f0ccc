"""Private mirror descent over the ℓ1 ball (Talwar, Thakurta, Zhang 2014,
"Private empirical risk minimization beyond the worst case: the effect of the
constraint set geometry", the noisy mirror descent their comparison with
Frank-Wolfe rests on; cited by Kumar & Deisenroth 2019, Tables 1–3 and §5).

Problem: min_{‖θ‖₁ ≤ R} L(θ) = (1/n)Σᵢ φ(⟨θ, xᵢ⟩, yᵢ), a convex GLM loss,
rows ‖xᵢ‖₂ ≤ ``data_norm`` (clipped and counted).

Algorithm.  θ = R(w⁺ − w⁻) with w = (w⁺, w⁻, w₀) on the simplex Δ_{2d+1}
(the slack w₀ reaches the interior).  For t = 1 … T: g̃_t = ∇L(θ_t) + N(0, s²I);
entropic mirror step w ← w ⊙ exp(−ηR(g̃_t, −g̃_t, 0)), renormalized.  Output
the uniform average θ̄ of θ_1 … θ_T (in C by convexity).

Privacy (replace-one, n public).  ∇L = (1/n)Σ φ′ xᵢ changes by at most
2L/n in ℓ2 when one record is replaced (|φ′|·‖x‖ ≤ L, L =
``loss.lipschitz(data_norm, radius=R)``, the margins of the ℓ1 ball being
≤ R·data_norm).  Each step is the Gaussian mechanism with multiplier
σ = s·n/(2L) on that sensitivity, adaptively composed T times; T Gaussian
mechanisms of multiplier σ are exactly one of multiplier σ/√T (their privacy
loss distributions compose to a Gaussian: Dong, Roth, Su 2019, Corollary 3.3),
so σ = √T·σ₁ with σ₁ the analytic-Gaussian multiplier of (ε, δ) (Balle & Wang
2018) spends the budget exactly.  Event ``SelfComposed(Gaussian(σ), T)``.

Utility (derived here for this algorithm: the online-mirror-descent regret on
the simplex, Beck & Teboulle 2003; Nemirovski et al. 2009, §2.3).  With
linear costs c_t = R(g̃_t, −g̃_t, 0) the entropy regret is ≤ ln(2d+1)/η +
(η/2)Σ‖c_t‖∞², and E‖g̃_t‖∞² ≤ G∞² := (L + s√(2 ln 2d))² + s² (E max_j|z_j|
≤ √(2 ln 2d), and the variance of the 1-Lipschitz max is ≤ 1 by Gaussian
concentration), so

    E L(θ̄) − min_C L ≤ ln(2d+1)/(ηT) + ηR²G∞²/2 = R G∞ √(2 ln(2d+1)/T)

at the default η = √(2 ln(2d+1)/T)/(R G∞).  The noise enters through
E‖z‖∞ ≈ √(2 ln 2d) — the Gaussian width of the ℓ1 ball, the geometry TTZ14's
bound is about — not through √d as for projected gradient descent.
:func:`mirror_descent_bound` evaluates it; T defaults to the public
:func:`default_steps`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_positive
from ..accounting.events import Gaussian, SelfComposed
from ..accounting.gaussian import analytic_gaussian_noise_multiplier
from ..design import as_design
from ..exceptions import InvalidPrivacyParameter
from ..losses.base import GLMLoss
from .base import Result, check_rows, check_target, private_fit

__all__ = ["MAX_STEPS", "default_steps", "fit", "mirror_descent_bound"]

#: cap of the default number of steps (each is one pass over the data)
MAX_STEPS = 500


def _g_inf(lip: float, s: float, d: int) -> float:
    return math.sqrt((lip + s * math.sqrt(2.0 * math.log(2.0 * d))) ** 2 + s * s)


def mirror_descent_bound(
    *, n: int, d: int, epsilon: float, delta: float, lipschitz: float, radius: float, steps: int
) -> float:
    """E L(θ̄) − min_C L ≤ R G∞ √(2 ln(2d+1)/T) for the default step size (module
    docstring), with s = √T σ₁ 2L/n the run's noise.

    Raises
    ------
    InvalidPrivacyParameter
    """
    n, d, T = check_count(n, "n"), check_count(d, "d"), check_count(steps, "steps")
    lip, R = check_positive(lipschitz, "lipschitz"), check_positive(radius, "radius")
    s = math.sqrt(T) * analytic_gaussian_noise_multiplier(epsilon, delta) * 2.0 * lip / n
    return R * _g_inf(lip, s, max(d, 1)) * math.sqrt(2.0 * math.log(2 * d + 1) / T)


def default_steps(n: int, d: int, epsilon: float, delta: float) -> int:
    """The public T: the bound's first term L/√T falls to 1/10 of its noise term
    s√(2 ln 2d)/√T (independent of T) when √T ≥ 10n/(2σ₁√(2 ln 2d)); capped at
    :data:`MAX_STEPS`, at least 10."""
    sigma1 = analytic_gaussian_noise_multiplier(epsilon, delta)
    root = 10.0 * n / (2.0 * sigma1 * math.sqrt(2.0 * math.log(2.0 * max(d, 1))))
    return int(min(MAX_STEPS, max(10, math.ceil(root * root))))


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    delta: float,
    radius: float = 1.0,
    data_norm: float = 1.0,
    steps: int | None = None,
    learning_rate: float | None = None,
    random_state=None,
) -> Result:
    """Private entropic mirror descent over {‖θ‖₁ ≤ ``radius``} (Talwar, Thakurta,
    Zhang 2014; module docstring for the privacy and utility proofs).

    Neighbouring relation: replace-one.  Assumptions: ‖xᵢ‖₂ ≤ ``data_norm``
    (clipped, counted), a convex GLM loss with a finite Lipschitz constant over
    the ball's margins.

    Parameters
    ----------
    loss : GLMLoss
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    epsilon : float > 0
    delta : float in (0, 1)
    radius : float > 0
        R of the ℓ1 ball.
    data_norm : float > 0
    steps : int, optional
        T (default :func:`default_steps`).
    learning_rate : float, optional
        η (default the bound's optimum, module docstring).
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (d,), ‖θ‖₁ ≤ R; ``event`` ``SelfComposed(Gaussian(σ), T)``
        (replace-one); ``diagnostics``: ``steps``, ``learning_rate``,
        ``noise_multiplier``, ``noise_std``, ``sensitivity``, ``lipschitz``,
        ``utility_bound``, ``n_clipped``, ``neighbouring``.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ (δ = 0 included), radius, data_norm, steps, learning_rate, or a
        loss with no finite Lipschitz constant on the ball.
    InvalidDataError, LabelError
        Bad X or y.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.losses import Logistic
    >>> X = np.random.default_rng(1).normal(size=(400, 8)) / 8
    >>> y = np.sign(X[:, 0] - X[:, 1] + 1e-9)
    >>> res = fit(Logistic(), X, y, epsilon=2.0, delta=1e-6, radius=3.0, random_state=0)
    >>> bool(np.abs(res.theta).sum() <= 3.0 + 1e-9), res.event.count
    (True, 500)
    """
    if not isinstance(loss, GLMLoss):
        raise InvalidPrivacyParameter(f"loss must be a GLMLoss, got {type(loss).__name__}")
    epsilon, delta, data_norm = check_target(epsilon, delta, data_norm, allow_zero_delta=False)
    R = check_positive(radius, "radius")
    X, y, n, d = check_rows(X, y, delta, loss)
    T = default_steps(n, d, epsilon, delta) if steps is None else check_count(steps, "steps")
    lip = float(loss.lipschitz(data_norm, radius=R))
    if not math.isfinite(lip) or lip <= 0:
        raise InvalidPrivacyParameter(
            f"mirror descent needs a finite Lipschitz constant over the ℓ1 ball, got {lip!r}"
        )
    rng = check_random_state(random_state)
    design = as_design(X, data_norm)
    sigma = math.sqrt(T) * analytic_gaussian_noise_multiplier(epsilon, delta)
    sens = 2.0 * lip / n
    s = sigma * sens
    g_inf = _g_inf(lip, s, d)
    eta = (
        math.sqrt(2.0 * math.log(2 * d + 1) / T) / (R * g_inf)
        if learning_rate is None
        else check_positive(learning_rate, "learning_rate")
    )
    logw = np.full(2 * d + 1, -math.log(2 * d + 1))  # log-weights on Δ_{2d+1}
    total = np.zeros(d)
    for _ in range(T):
        w = np.exp(logw)
        theta = R * (w[:d] - w[d : 2 * d])
        total += theta
        grad = design.glm_gradient_sum(loss, theta, y) / n + s * rng.standard_normal(d)
        logw[:d] -= eta * R * grad
        logw[d : 2 * d] += eta * R * grad
        logw -= logw.max()
        logw -= math.log(np.exp(logw).sum())
    diagnostics: dict[str, Any] = {
        "algorithm": "mirror_descent",
        "neighbouring": "replace-one",
        "epsilon": epsilon,
        "delta": delta,
        "steps": T,
        "learning_rate": eta,
        "noise_multiplier": sigma,
        "noise_std": s,
        "sensitivity": sens,
        "lipschitz": lip,
        "radius": R,
        "data_norm": data_norm,
        "utility_bound": R * g_inf * math.sqrt(2.0 * math.log(2 * d + 1) / T)
        if learning_rate is None
        else math.log(2 * d + 1) / (eta * T) + 0.5 * eta * R * R * g_inf * g_inf,
        "n_clipped": design.n_clipped,
        "theorem": "Talwar, Thakurta, Zhang 2014 (noisy mirror descent over the ℓ1 ball); "
        "privacy by Gaussian composition (module docstring)",
    }
    return Result(theta=total / T, event=SelfComposed(Gaussian(sigma), T), diagnostics=diagnostics)
