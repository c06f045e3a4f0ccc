"""White-box audit of adaptive clipping: the noisy count of unclipped examples too.

With adaptive clipping (Andrew, Thakkar, McMahan, Ramaswamy, NeurIPS 2021;
:mod:`dperm.algorithms.adaptive_clipping`) every DP-SGD step releases two values: the
noisy clipped sum and the noisy count Σ(bᵢ − ½) of the batch's examples whose gradient
was not clipped, bᵢ = 1[‖gᵢ‖ ≤ Cₜ].  The white-box runners of :mod:`.whitebox` score the
first only; a bug on the second — the count released without its noise, its noise
calibrated for the wrong relation — leaves them blind.  This runner scores both.

The pair (:func:`clipping_pair`): n − 1 base rows (two features, labels ±1) and one
canary row e₂ (a feature of its own) with a **crafted gradient** (the gradient-canary
threat model of Nasr et al., USENIX Security 2023, §3, as
:func:`~dperm.audit.whitebox.gradient_canaries`): label −1 (D) gives the gradient
(1 − :data:`_GAP`)·C₀·e₂ — just under the rule's clipping norm C₀, unclipped while
Cₜ ≥ (1 − _GAP)·C₀, bᵢ = 1 — and label +1 (D′) (1 + _GAP)·C₀·e₂ — always clipped (Cₜ ≤ C₀),
bᵢ = 0.  The two move the sum alike (by ≈ Cₜe₂): the pair differs in the count of
unclipped examples only, by 1 when the canary is sampled — the release this runner is
about.

The statistic is the log-likelihood ratio of every step's pair (oₜ, ñₜ) — o the noisy
sum's coordinate 2 (noise σ_v,t = σ_Δ·2·Cₜ), ñ the released count (noise σ_b) — with
the base rows' part of the count, a sum over a Poisson batch of ±½ terms whose signs the
white-box auditor computes from θ_{t−1} and D, taken as Gaussian (mean q·Σ(bᵢ − ½),
variance q(1 − q)·(n − 1)/4): a statistic, scored by the μ-GDP fit of the auditor (any
statistic gives a valid lower bound).
"""

from __future__ import annotations

import functools

import numpy as np

from .._rng import check_random_state
from .._validation import check_count
from ..estimators._auto import BINARY_CLIP_FRACTION
from .canary import CanaryPair
from .whitebox import _log_mixture, _noise, gradient_canaries, record_steps

__all__ = ["clipping_pair"]

#: the canary's gradient norms are (1 ∓ _GAP)·C₀ under D and D′
_GAP = 0.01
#: the base rows' features (the canary's is the next one)
_BASE = 2


def clipping_pair(n: int, *, random_state=0) -> CanaryPair:
    """The replace-one pair of the clipping-count runner: n − 1 base rows on the first two
    features (‖x‖ ∈ [0.2, 1], labels ±1 in turn, shuffled) and the canary e₂ (label −1 in
    D, +1 in D′), whose gradient the run crafts (module docstring).

    Raises
    ------
    InvalidPrivacyParameter
        n < 4.
    """
    rng = check_random_state(random_state)
    b = check_count(n, "n", minimum=4) - 1
    Xb = rng.normal(size=(b, _BASE))
    Xb *= rng.uniform(0.2, 1.0, size=(b, 1)) / np.linalg.norm(Xb, axis=1, keepdims=True)
    yb = np.where(np.arange(b) % 2 == 0, 1.0, -1.0)
    rng.shuffle(yb)
    X = np.zeros((n, _BASE + 1))
    X[:b, :_BASE] = Xb
    X[b, _BASE] = 1.0
    direction = np.zeros(_BASE + 1)
    direction[_BASE] = 1.0
    return CanaryPair(
        X=X,
        y=np.append(yb, -1.0),
        X_prime=X.copy(),
        y_prime=np.append(yb, 1.0),
        direction=direction,
        neighbouring="replace-one",
        canary_norm=1.0,
    )


def _crafted(mask, theta, Xb, yb, *, clipping_norm: float) -> np.ndarray:
    """The canary's gradient (b, d + 1): (1 − _GAP)·C₀·x (label −1) or (1 + _GAP)·C₀·x
    (label +1), the intercept masked out."""
    Xb = np.asarray(Xb, dtype=float) * mask
    scale = np.where(np.asarray(yb) < 0, 1.0 - _GAP, 1.0 + _GAP) * clipping_norm
    return Xb * scale[:, None]


def _run_estimator_auto_clipping(X, y, epsilon, delta, rng):
    """One LLR: DPLogisticRegression() with every default (classes [−1, 1]) on
    :func:`clipping_pair` with the canary's crafted gradient, scored on every step's
    noisy sum (coordinate 2) and released count (module docstring)."""
    from ..estimators import DPLogisticRegression

    n = X.shape[0]
    Xa = np.hstack([X, np.full((n, 1), 0.5)])[: n - 1]  # the base rows, intercept 0.5
    yb = np.asarray(y, dtype=float)[: n - 1]
    norms = np.linalg.norm(Xa, axis=1)
    C0 = BINARY_CLIP_FRACTION * float(np.hypot(1.0, 0.5))  # the rule's C (R = 1, s = ½)
    with (
        gradient_canaries(n - 1, gradient=functools.partial(_crafted, clipping_norm=C0)),
        record_steps(lambda theta, g: (Xa @ theta, float(g[_BASE]))) as steps,
    ):
        est = DPLogisticRegression(
            epsilon=epsilon, delta=delta, data_norm=1.0, classes=[-1, 1], random_state=rng
        ).fit(X, y)
    d = est.diagnostics_
    q, sigma, C = _noise(d)
    if d.get("clipping") != "adaptive":  # no count released: the sum alone
        counts, count_noise = np.zeros(len(steps)), np.inf
    else:
        counts, count_noise = np.asarray(d["clipping_counts"]), float(d["count_noise_std"])
    margins = np.array([s[0] for s in steps])  # (T, n − 1): the base rows at θ_{t−1}
    o = np.array([s[1] for s in steps])
    # the base rows' bits bᵢ = 1[|φ'(yᵢzᵢ)|·‖x̃ᵢ‖ ≤ Cₜ] and their count's Gaussian model
    grad = np.abs(est.loss_.derivative(margins, yb)) * norms
    half = (grad <= C[:, None]) - 0.5
    mean = q * half.sum(axis=1)
    # the count channel in units of the base rows' spread alone: a statistic tuned to a
    # count released with less noise than claimed (any statistic is a valid test)
    spread = np.full(C.shape, np.sqrt(q * (1.0 - q) * (n - 1) / 4.0))
    if not np.isfinite(count_noise):  # no count released
        spread[:] = np.inf
    obs = np.column_stack([o / sigma, (counts - mean) / spread])
    below = (1.0 - _GAP) * C0 <= C  # the canary under D is unclipped
    c_d = np.column_stack(
        [np.minimum((1.0 - _GAP) * C0, C) / sigma, np.where(below, 0.5, -0.5) / spread]
    )
    c_dprime = np.column_stack([C / sigma, -0.5 / spread])
    llr = np.sum(_log_mixture(obs, c_dprime, q, 1.0) - _log_mixture(obs, c_d, q, 1.0))
    return np.array([llr])
