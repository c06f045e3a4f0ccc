"""Private learning of a linear classifier with the 0-1 loss: the exponential
mechanism over a public net of directions.

ℓ(θ; x, y) = 1[y·⟨θ, x⟩ ≤ 0] (a tie counts as an error), y ∈ {−1, +1}.  It is
not convex, not Lipschitz and has no useful gradient, so the gradient and
perturbation methods of dperm do not apply; but it is bounded in [0, 1], so the
exponential mechanism over a finite, public set of classifiers is ε-DP with
Δ = 1 (replace-one).  Only directions matter (ℓ(cθ) = ℓ(θ) for c > 0), so the
natural candidate set is a net of the unit sphere (:func:`sphere_net`).

Utility (derived here).  Smith & Ullman, Lecture 11 ("Empirical Risk Minimization"),
§2.1 gives ExpMech-ERM for a loss bounded in [0, Δ] and its privacy (Lemma 2.4); its
utility theorem (Theorem 2.5) assumes a G-Lipschitz loss over an ℓ2 ball, which the
0-1 loss is not, so the bound below is proved for the net instead.
Let θ* be any unit vector and γ > 0, and let err_γ(θ*) be the fraction of
records with y⟨θ*, x⟩ < γ‖x‖ (margin errors).  If the net N has covering
radius r < γ (every unit vector is within ℓ2 distance r of N), the net point
θ′ nearest θ* satisfies |⟨θ′ − θ*, x⟩| ≤ r‖x‖, so it misclassifies no record
that θ* gets right with margin γ: L̂₀₁(θ′) ≤ err_γ(θ*).  The exponential
mechanism's guarantee (Dwork & Roth 2014, Theorem 3.11, with Δ = 1 and the
utility −n L̂₀₁) then gives, with probability ≥ 1 − β,

    L̂₀₁(θ̂) ≤ err_γ(θ*) + 2 (ln|N| + ln(1/β)) / (nε).

Source: McSherry & Talwar 2007 (Smith & Ullman, Lecture 11, "Empirical Risk
Minimization", ERM by the exponential mechanism); the loss itself is
:class:`dperm.losses.zero_one.ZeroOne`.
"""

from __future__ import annotations

import math

import numpy as np

from .._rng import check_random_state
from .._validation import check_count
from ..exceptions import InvalidPrivacyParameter
from ..losses.zero_one import ZeroOne
from . import exponential_erm
from .base import Result, private_fit

__all__ = [
    "covering_radius",
    "estimator_fit",
    "private_linear_classifier",
    "sphere_net",
]


def sphere_net(d: int, size: int, random_state=None) -> np.ndarray:
    """A public net of the unit sphere S^{d−1}, shape (k, d).

    * d = 1: {−1, +1} (``size`` ignored);
    * d = 2: ``size`` equally spaced directions, covering radius 2 sin(π/(2·size));
    * d = 3: the Fibonacci lattice of ``size`` points (deterministic);
    * d ≥ 4: ``size`` uniform random directions drawn from ``random_state``
      alone (never from data); the covering radius is then random — measure it
      with :func:`covering_radius`.

    Raises
    ------
    InvalidPrivacyParameter
        ``d < 1`` or ``size < 2``.
    """
    d = check_count(d, "d")
    size = check_count(size, "size", minimum=2)
    if d == 1:
        return np.array([[-1.0], [1.0]])
    if d == 2:
        ang = 2.0 * np.pi * np.arange(size) / size
        return np.stack([np.cos(ang), np.sin(ang)], axis=1)
    if d == 3:
        i = np.arange(size) + 0.5
        z = 1.0 - 2.0 * i / size
        phi = np.pi * (1.0 + math.sqrt(5.0)) * i
        r = np.sqrt(1.0 - z * z)
        return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)
    rng = check_random_state(random_state)
    g = rng.standard_normal((size, d))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def covering_radius(net, probes: int = 20_000, random_state=None) -> float:
    """Monte-Carlo estimate (a lower bound) of max_{u ∈ S^{d−1}} min_{v ∈ net} ‖u − v‖₂.

    For d = 2 and :func:`sphere_net` the exact value is 2 sin(π/(2k)).
    """
    net = np.asarray(net, dtype=float)
    if net.ndim != 2 or net.shape[0] < 1:
        raise InvalidPrivacyParameter(f"net must have shape (k, d), got {net.shape}")
    probes = check_count(probes, "probes")
    rng = check_random_state(random_state)
    u = rng.standard_normal((probes, net.shape[1]))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    best = np.max(u @ net.T, axis=1)  # max cosine = min distance on the sphere
    return float(np.sqrt(np.maximum(2.0 - 2.0 * best.min(), 0.0)))


@private_fit  # an active dperm.budget: reserve, run, commit the event
def private_linear_classifier(
    X,
    y,
    *,
    epsilon: float,
    net_size: int = 64,
    data_norm: float = 1.0,
    random_state=None,
):
    """ε-DP linear classifier (no intercept) minimizing the 0-1 loss over a sphere net.

    The exponential mechanism over :func:`sphere_net` ``(d, net_size)`` with
    utility −Σᵢ 1[yᵢ⟨θ, xᵢ⟩ ≤ 0], Δ = 1, replace-one (McSherry & Talwar 2007,
    Theorem 6; Dwork & Roth 2014, Theorems 3.10–3.11), via
    :func:`dperm.algorithms.exponential_erm.fit`.  For d ≥ 4 the net is drawn
    from ``random_state`` before the data are touched.

    Returns
    -------
    dperm.algorithms.base.Result
        Event ``PureEpsilon(ε)``; ``diagnostics["utility_bound"]`` is the
        2(ln|N| + ln 20)/(nε) gap to the best net point (95 %).

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, LabelError
    """
    rng = check_random_state(random_state)
    shape = getattr(X, "shape", None)  # a dperm Design is never converted to an array
    if shape is None:
        shape = np.shape(X)
    d = shape[1] if len(shape) == 2 else 0
    if d < 1:
        raise InvalidPrivacyParameter(f"X must have shape (n, d), got shape {tuple(shape)}")
    net = sphere_net(d, net_size, random_state=rng)
    res = exponential_erm.fit(
        ZeroOne(),
        X,
        y,
        epsilon=epsilon,
        candidates=net,
        data_norm=data_norm,
        loss_bounds=(0.0, 1.0),
        random_state=rng,
    )
    diag = dict(res.diagnostics, algorithm="exponential-erm-zero-one", net_size=net.shape[0])
    return Result(theta=res.theta, event=res.event, diagnostics=diag)


def estimator_fit(estimator, loss, X, y, epsilon, delta, rng):
    """The estimators' adapter (``mechanism="zero-one-net"``): the 0-1 loss of the
    classifier sign(⟨θ, x⟩) over the public net :func:`sphere_net` of the
    augmented space (intercept column included; ``estimator.net_size`` if set,
    else 64 directions), whatever the estimator's loss (the 0-1 loss needs no
    surrogate).  Classification only; no penalty, no constraint.

    Raises
    ------
    InvalidPrivacyParameter, LabelError
    """
    if estimator.regularizer_ is not None or estimator.l2_ > 0 or estimator.constraint_ is not None:
        raise InvalidPrivacyParameter(
            "mechanism 'zero-one-net' minimizes the 0-1 loss over a net of directions: use "
            "penalty='l2' with alpha='auto' (no penalty is applied) and no constraint"
        )
    return private_linear_classifier(
        X,
        y,
        epsilon=epsilon,
        net_size=getattr(estimator, "net_size", None) or 64,
        data_norm=estimator.data_norm_,
        random_state=rng,
    )
