"""Private Frank-Wolfe over a polytope (Talwar, Thakurta, Zhang, NeurIPS 2015).

Minimizes the *mean* loss L(θ) = (1/n) Σᵢ ℓ(θ; xᵢ, yᵢ) over a polytope
C = conv(S) — by default the ℓ1 ball of radius r, whose 2d vertices are
±r·eⱼ — with T Frank-Wolfe steps.  Each step chooses a vertex privately and
moves towards it:

    for t = 0, …, T−1:
        g      = ∇L(θ_t)                                 (one pass: Xᵀ s)
        v_t    ~ P(v) ∝ exp(−ε₀ ⟨v, g⟩ / (2Δ)),  v ∈ S    (exponential mechanism)
        θ_{t+1} = (1 − μ_t) θ_t + μ_t v_t,  μ_t = 2/(t+2)

This is Algorithm 2 (“A_Noise-FW(polytope)”) of Talwar, Thakurta & Zhang,
*Nearly Optimal Private LASSO*, NeurIPS 2015, with the vertex chosen by the
exponential mechanism (McSherry & Talwar 2007; Dwork & Roth 2014, Theorem 3.10)
— sampled exactly with the Gumbel-max trick — or, optionally, by report-noisy-max
with Laplace noise as in the paper.  θ_T is a convex combination of vertices,
so it always lies in C (no projection is needed).

Privacy (replace-one neighbouring relation)
-------------------------------------------
*Sensitivity of the scores.*  Write a per-example gradient of a GLM loss as
∇ℓ(θ; x, y) = φ'(⟨θ, x⟩, y)·x.  Let G = sup |φ'| over the reachable margins
(|⟨θ, x⟩| ≤ z_max, see below), and let the rows satisfy ‖x‖∞ ≤ b∞ and
‖x‖₂ ≤ R₂ (with ``data_norm_ord="l2"`` (default) b∞ = R₂ = ``data_norm``, as
‖x‖∞ ≤ ‖x‖₂; with ``data_norm_ord="linf"`` b∞ = ``data_norm`` and
R₂ = ``data_norm``·√d).  Then ‖∇ℓ‖∞ ≤ L∞ = G·b∞ and ‖∇ℓ‖₂ ≤ L₂ = G·R₂.
Replacing one record (x, y) by (x', y') changes the mean gradient by
(∇ℓ(θ; x, y) − ∇ℓ(θ; x', y'))/n, so for every vertex v the score ⟨v, ∇L(θ)⟩
changes by at most

    Δ = (2/n) · max_{v ∈ S} min(‖v‖₁ L∞, ‖v‖₂ L₂)        (Hölder, Cauchy–Schwarz)

— for the ℓ1 ball of radius r this is Δ = 2 r L∞ / n = 2·G·b∞·r / n, the
“L₁‖C‖₁/n” of the paper with the factor 2 of replace-one made explicit.
Every quantity is a public constant: the loss, ``data_norm`` and C.  Rows above
``data_norm`` are clipped (and counted) before anything else, so the bound holds.

*One step* is the exponential mechanism with utility u(v) = −⟨v, ∇L(θ_t)⟩ of
sensitivity Δ: it is ε₀-DP (Dwork & Roth 2014, Theorem 3.10).  Report-noisy-max
with Laplace(2Δ/ε₀) noise on the (non-monotone) scores is also ε₀-DP (the
argument of Dwork & Roth 2014, Claim 3.9, where a non-monotone change moves the
winning threshold by up to 2Δ).

*T steps* are an adaptive composition of T ε₀-DP mechanisms; the event reported
is ``SelfComposed(PureEpsilon(ε₀), T)`` and ε₀ is the largest per-step ε for
which the chosen accountant certifies (ε, δ).  The default ``"optimal"``
accountant is the exact optimal composition of Kairouz, Oh & Viswanath (ICML
2015, Theorem 3.3), which is tighter than the advanced composition the paper
uses (Dwork, Rothblum & Vadhan 2010; Dwork & Roth 2014, Theorem 3.20: ε₀ =
ε/√(8 T log(1/δ))).  With δ = 0 the basic composition ε₀ = ε/T is used
(Dwork & Roth 2014, Theorem 3.16), which is exact for pure DP.

Number of steps
---------------
The paper's rule (TTZ 2015, utility theorem of Section 2) balances the
Frank-Wolfe optimization error Γ/T against the privacy error,
T ≍ (Γ · n · ε / (L₁‖C‖₁))^{2/3}; dperm keeps the log factors of the bound
(:func:`default_n_steps`):

    T = ⌈(Γ n ε / (L₁‖C‖₁ · log|S| · √log(1/δ)))^{2/3}⌉,   capped at ``max_steps``,

with Γ the curvature constant of L over C, bounded here by
Γ ≤ c · min(b∞·diam₁(C), R₂·diam₂(C))² for a GLM loss with curvature
c = sup |φ''| (Jaggi, ICML 2013, Lemma 7; diameters ≤ 2‖C‖), and L₁‖C‖₁
replaced by max_v min(‖v‖₁ L∞, ‖v‖₂ L₂).  Non-smooth losses (c = ∞) need an
explicit ``n_steps``.  The excess empirical risk is
Õ(Γ^{1/3}(L₁‖C‖₁)^{2/3} log(n|S|) √log(1/δ) / (nε)^{2/3}) — independent of the
dimension up to log|S| = log(2d) for the ℓ1 ball.

Not implemented: the Frank-Wolfe variant “on the dual of norm-regularized ERM”
listed in the mission (deferred).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._docstrings import compose_doc
from .._rng import check_random_state
from .._validation import check_count, check_data_norm, check_positive
from ..accounting.events import PureEpsilon, SelfComposed
from ..constraints import L1Ball, Polytope
from ..design import Design, as_design
from ..exceptions import ClippingWarning, InvalidPrivacyParameter, UnknownNameError
from ..losses.base import GLMLoss
from ..mechanisms import exponential_mechanism, laplace_noise
from .base import Result, check_rows, check_target, private_fit

__all__ = [
    "curvature_bound",
    "default_n_steps",
    "fit",
    "score_sensitivity",
    "step_epsilon",
]

_SELECTIONS = ("exponential", "laplace")
_NORM_ORDS = ("l2", "linf")


# ----------------------------------------------------------------------------- helpers
def _check_constraint(constraint, radius):
    if constraint is None:
        return L1Ball(check_positive(radius, "radius"))
    if isinstance(constraint, L1Ball | Polytope):
        return constraint
    raise InvalidPrivacyParameter(
        "constraint must be an L1Ball or a Polytope (a convex hull of vertices) for "
        f"private Frank-Wolfe, got {constraint!r}"
    )


def _vertex_norms(constraint, d: int) -> tuple[np.ndarray, np.ndarray]:
    """ℓ1 and ℓ2 norms of every vertex (public: C is public)."""
    if isinstance(constraint, L1Ball):
        r = np.full(2 * d, constraint.radius)
        return r, r
    V = constraint.vertices()
    if V.shape[1] != d:
        raise InvalidPrivacyParameter(
            f"the polytope's vertices live in R^{V.shape[1]} but X has {d} features"
        )
    return np.abs(V).sum(axis=1), np.linalg.norm(V, axis=1)


def _row_bounds(data_norm: float, data_norm_ord: str, d: int) -> tuple[float, float]:
    """(b∞, R₂): bounds on ‖x‖∞ and ‖x‖₂ implied by the public ``data_norm``."""
    if data_norm_ord == "l2":
        return data_norm, data_norm
    return data_norm, data_norm * math.sqrt(d)


def _geometry(d, data_norm, data_norm_ord, constraint, radius):
    """(‖v‖₁, ‖v‖₂ of every vertex, b∞, R₂): the public geometry of C and of the rows
    that the sensitivity and curvature bounds read, with the inputs checked."""
    d = check_count(d, "d")
    data_norm = check_data_norm(data_norm)
    data_norm_ord = _check_ord(data_norm_ord)
    constraint = _check_constraint(constraint, radius)
    norms1, norms2 = _vertex_norms(constraint, d)
    return (norms1, norms2, *_row_bounds(data_norm, data_norm_ord, d))


def _margin_bound(norms1, norms2, b_inf: float, r2: float) -> float:
    """sup |⟨θ, x⟩| over θ ∈ C: ≤ min(‖θ‖₁ b∞, ‖θ‖₂ R₂), maximised at a vertex."""
    return float(min(np.max(norms1) * b_inf, np.max(norms2) * r2))


def _derivative_bound(loss: GLMLoss, z_max: float) -> float:
    """G = sup |φ'(z, y)| over |z| ≤ z_max and admissible y.

    For a GLM loss, ``loss.lipschitz(R, radius=ρ)`` is G(R·ρ)·R; with R = 1 and
    ρ = z_max it returns G itself.
    """
    return float(loss.lipschitz(1.0, radius=z_max))


#: the public geometry of C and of the rows that :func:`score_sensitivity` and
#: :func:`curvature_bound` read (:func:`_geometry`), composed into their docstrings
_GEOMETRY = """
d : int
    Number of features.
data_norm : float > 0
    Public bound on the rows (ℓ2 or ℓ∞, see ``data_norm_ord``).
constraint : L1Ball or Polytope, optional
    Default: ``L1Ball(radius)``.
radius : float > 0
data_norm_ord : {"l2", "linf"}
"""


@compose_doc(geometry=_GEOMETRY)
def score_sensitivity(
    loss: GLMLoss,
    n: int,
    d: int,
    *,
    data_norm: float,
    constraint=None,
    radius: float = 1.0,
    data_norm_ord: str = "l2",
) -> float:
    """Replace-one sensitivity Δ of the Frank-Wolfe scores ⟨v, ∇L(θ)⟩, v ∈ S.

    Δ = (2/n) · max_v min(‖v‖₁ L∞, ‖v‖₂ L₂) with L∞ = G·b∞ and L₂ = G·R₂ the
    ℓ∞ and ℓ2 bounds on a per-example gradient (module docstring; Talwar,
    Thakurta, Zhang 2015, Algorithm 2, noise scale L₁‖C‖₁/n per unit ε).

    Parameters
    ----------
    loss : GLMLoss
    n : int
        Number of examples.
    {geometry}

    Returns
    -------
    float

    Raises
    ------
    InvalidPrivacyParameter
    UnknownNameError
        An unknown ``data_norm_ord``.
    """
    n = check_count(n, "n")
    norms1, norms2, b_inf, r2 = _geometry(d, data_norm, data_norm_ord, constraint, radius)
    g = _derivative_bound(loss, _margin_bound(norms1, norms2, b_inf, r2))
    per_vertex = np.minimum(norms1 * g * b_inf, norms2 * g * r2)
    return float(2.0 * np.max(per_vertex) / n)


@compose_doc(geometry=_GEOMETRY)
def curvature_bound(
    loss: GLMLoss,
    d: int,
    *,
    data_norm: float,
    constraint=None,
    radius: float = 1.0,
    data_norm_ord: str = "l2",
) -> float:
    """Upper bound on the curvature constant Γ of the mean loss over C.

    Γ ≤ c · min(b∞ · diam₁(C), R₂ · diam₂(C))², with c = sup|φ''| (the loss's
    ``curvature``) and diameters bounded by twice the largest vertex norm
    (Jaggi, ICML 2013, Lemma 7, applied to a GLM: the second-order term is
    (c/2)·mean ⟨u, xᵢ⟩² ≤ (c/2)·min(b∞‖u‖₁, R₂‖u‖₂)²).

    Parameters
    ----------
    loss : GLMLoss
    {geometry}

    Returns
    -------
    float
        Γ; ``inf`` for non-smooth losses.

    Raises
    ------
    InvalidPrivacyParameter
    UnknownNameError
        An unknown ``data_norm_ord``.
    """
    norms1, norms2, b_inf, r2 = _geometry(d, data_norm, data_norm_ord, constraint, radius)
    c = float(loss.curvature)
    if not math.isfinite(c):
        return math.inf
    span = min(b_inf * 2.0 * np.max(norms1), r2 * 2.0 * np.max(norms2))
    return c * float(span) ** 2


def default_n_steps(
    n: int,
    epsilon: float,
    *,
    curvature: float,
    lipschitz_size: float,
    delta: float = 0.0,
    n_vertices: int = 2,
    max_steps: int = 1000,
) -> int:
    """The step count that balances the utility bound of Talwar, Thakurta, Zhang
    (2015, Section 2), log factors included, at least 1 and at most ``max_steps``.

    The bound is Γ/T (Frank-Wolfe) plus the selection error of T steps at
    per-step ε₀: ≈ L₁‖C‖₁ log|S| / (n ε₀) per step.  With advanced composition
    (δ > 0, ε₀ ≈ ε/√(T log(1/δ))) the sum is minimized at

        T = ⌈(Γ n ε / (L₁‖C‖₁ · log|S| · √log(1/δ)))^{2/3}⌉,

    the paper's T = (Γ n ε / L₁‖C‖₁)^{2/3} with its log factors kept; with
    δ = 0 (basic composition, ε₀ = ε/T) it is T = ⌈√(Γ n ε / (L₁‖C‖₁ log|S|))⌉.

    Parameters
    ----------
    n : int
    epsilon : float > 0
    curvature : float
        Γ (finite; non-smooth losses need an explicit step count).
    lipschitz_size : float
        L₁‖C‖₁ = n·Δ/2 (see :func:`score_sensitivity`).
    delta : float in [0, 1), default 0
    n_vertices : int ≥ 2, default 2
        |S| (2d for the ℓ1 ball).
    max_steps : int

    Raises
    ------
    InvalidPrivacyParameter
        If ``curvature`` is infinite (non-smooth loss).
    """
    if not math.isfinite(curvature):
        raise InvalidPrivacyParameter(
            "the step-count rule of Talwar et al. needs a smooth loss (finite curvature "
            f"constant), got curvature={curvature!r}; pass n_steps explicitly"
        )
    log_s = math.log(max(2, int(n_vertices)))
    ratio = curvature * n * epsilon / (lipschitz_size * log_s)
    if delta > 0:
        t = (ratio / math.sqrt(math.log(1.0 / delta))) ** (2.0 / 3.0)
    else:
        t = math.sqrt(ratio)
    return int(min(max(1, math.ceil(t)), max_steps))


def _check_ord(data_norm_ord) -> str:
    if data_norm_ord not in _NORM_ORDS:
        raise UnknownNameError(
            f"data_norm_ord must be one of {list(_NORM_ORDS)}, got {data_norm_ord!r}"
        )
    return data_norm_ord


def step_epsilon(
    epsilon: float, delta: float, n_steps: int, *, accountant: str = "optimal"
) -> float:
    """Largest per-step ε₀ such that T-fold adaptive composition of ε₀-DP
    mechanisms is certified (ε, δ)-DP by ``accountant``.

    δ = 0: ε₀ = ε/T (basic composition, Dwork & Roth 2014, Theorem 3.16, exact
    for pure DP).  δ > 0: the accountant's certificate for
    ``SelfComposed(PureEpsilon(ε₀), T)`` via
    :func:`dperm.accounting.calibrate.calibrate_noise` on the "noise" 1/ε₀
    (default ``"optimal"``: Kairouz, Oh, Viswanath 2015, Theorem 3.3), never
    below ε/T (basic composition always holds).

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    epsilon, delta, _ = check_target(epsilon, delta)
    n_steps = check_count(n_steps, "n_steps")
    basic = epsilon / n_steps
    if delta == 0.0 or n_steps == 1:
        return basic
    from ..accounting.calibrate import calibrate_noise

    def make_event(noise: float):
        return SelfComposed(PureEpsilon(1.0 / noise), n_steps)

    # search x = 1/ε₀ from ε₀ = ε (never certified for T > 1) upwards
    noise = calibrate_noise(make_event, epsilon, delta, accountant=accountant, lower=1.0 / epsilon)
    return max(basic, 1.0 / noise)


def _clip_entries(X, bound: float):
    """Clip every entry of X to [−bound, bound]; returns (X, rows touched)."""
    if sp.issparse(X):
        over = np.abs(X.data) > bound
        if not over.any():
            return X, 0
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        n_rows = int(np.unique(rows[over]).size)
        X = X.copy()
        X.data = np.clip(X.data, -bound, bound)
    else:
        over_rows = np.any(np.abs(X) > bound, axis=1)
        n_rows = int(over_rows.sum())
        if n_rows == 0:
            return X, 0
        X = np.clip(X, -bound, bound)
    warnings.warn(
        f"{n_rows} row(s) had an entry above data_norm={bound:g} in absolute value "
        "and were clipped entrywise",
        ClippingWarning,
        stacklevel=4,  # the caller of fit (+1: the @private_fit wrapper)
    )
    return X, n_rows


def _select(utility: np.ndarray, epsilon0: float, sensitivity: float, selection: str, rng) -> int:
    """Index of the chosen vertex (ε₀-DP for scores of sensitivity Δ).

    ``"exponential"``: P(j) ∝ exp(ε₀ u_j / (2Δ)), sampled exactly by
    :func:`dperm.mechanisms.exponential_mechanism` (Gumbel-max).
    ``"laplace"``: report-noisy-max, argmax_j u_j + Laplace(2Δ/ε₀) (scores are
    not monotone in the data, hence 2Δ).
    """
    if selection == "exponential":
        return exponential_mechanism(utility, epsilon=epsilon0, sensitivity=sensitivity, rng=rng)
    noise = laplace_noise(utility.shape, 2.0 * sensitivity / epsilon0, rng)
    return int(np.argmax(utility + noise))


# ----------------------------------------------------------------------------- fit
@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    delta: float,
    data_norm: float = 1.0,
    constraint=None,
    radius: float = 1.0,
    n_steps: int | None = None,
    max_steps: int = 1000,
    selection: str = "exponential",
    accountant: str = "optimal",
    data_norm_ord: str = "l2",
    random_state=None,
) -> Result:
    """Private Frank-Wolfe (Talwar, Thakurta, Zhang 2015, Algorithm 2).

    Minimizes the mean GLM loss over a polytope; the output always lies in C.
    Neighbouring relation: replace-one.  Assumptions: rows bounded by the public
    ``data_norm`` (rows above it are clipped and counted); the loss's derivative
    bounded over the reachable margins (automatic for logistic/Huber/hinge/
    quantile; the squared loss is bounded on C because C is bounded).  See the
    module docstring for the sensitivity and composition argument.

    Parameters
    ----------
    loss : GLMLoss
        Any GLM loss: its derivative is bounded over the margins C can reach
        (:func:`score_sensitivity`); :func:`default_n_steps` needs a smooth one.
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    epsilon : float > 0
    delta : float in [0, 1)
    data_norm : float > 0, default 1.0
        Public bound on every row, in the norm ``data_norm_ord``.
    constraint : L1Ball or Polytope, optional
        The polytope C (default ``L1Ball(radius)``).
    radius : float > 0, default 1.0
        Radius of the default ℓ1 ball.
    n_steps : int, optional
        T; default: the paper's rule (:func:`default_n_steps`), at most
        ``max_steps``.
    max_steps : int, default 1000
        Cap on the default T (run time; the rule grows as (nε)^{2/3}).
    selection : {"exponential", "laplace"}
        Vertex selection: the exponential mechanism (exact, Gumbel-max) or
        report-noisy-max with Laplace(2Δ/ε₀) noise (the paper's variant).
    accountant : str, default "optimal"
        Accountant used to calibrate ε₀ when δ > 0 (see :func:`step_epsilon`).
    data_norm_ord : {"l2", "linf"}, default "l2"
        ``"l2"``: ‖x‖₂ ≤ data_norm (rows clipped by a per-row scale,
        :func:`dperm.design.as_design`, X not copied); ``"linf"``: |x_j| ≤ data_norm
        (entries clipped: a clipped copy of X when an entry is above the bound),
        the ℓ∞ assumption of the paper.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (d,) in C; ``event`` =
        ``SelfComposed(PureEpsilon(ε₀), T)``; ``diagnostics`` with
        ``n_steps``, ``epsilon_step``, ``sensitivity``, ``curvature``,
        ``n_clipped``, ``neighbouring``, ``selection``, ``accountant`` …

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ, data_norm, radius, n_steps, constraint.
    UnknownNameError
        Unknown ``selection``, ``data_norm_ord`` or ``accountant``.
    InvalidDataError, LabelError
        Bad X or y.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.losses import Logistic
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (500, 5)) / np.sqrt(5)
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> res = fit(Logistic(), X, y, epsilon=1.0, delta=1e-6, radius=5.0, random_state=0)
    >>> bool(np.abs(res.theta).sum() <= 5.0 + 1e-9)
    True
    """
    if not isinstance(loss, GLMLoss):
        raise InvalidPrivacyParameter(f"loss must be a GLMLoss, got {type(loss).__name__}")
    epsilon, delta, data_norm = check_target(epsilon, delta, data_norm)
    data_norm_ord = _check_ord(data_norm_ord)
    if selection not in _SELECTIONS:
        raise UnknownNameError(f"selection must be one of {list(_SELECTIONS)}, got {selection!r}")
    max_steps = check_count(max_steps, "max_steps")
    if n_steps is not None:
        n_steps = check_count(n_steps, "n_steps")
    constraint = _check_constraint(constraint, radius)
    X, y, n, d = check_rows(X, y, delta, loss)
    rng = check_random_state(random_state)

    # 1. enforce the public row bound (the sensitivity below assumes it)
    if data_norm_ord == "l2":
        X = as_design(X, data_norm)
        n_clipped = X.n_clipped
    else:  # entrywise clipping is no row scale: the effective matrix is materialized
        X, n_clipped = _clip_entries(X.materialize() if isinstance(X, Design) else X, data_norm)
        X = as_design(X)

    # 2. public constants: Δ, Γ, T, ε₀
    norms1, norms2 = _vertex_norms(constraint, d)
    b_inf, r2 = _row_bounds(data_norm, data_norm_ord, d)
    sens = score_sensitivity(
        loss, n, d, data_norm=data_norm, constraint=constraint, data_norm_ord=data_norm_ord
    )
    gamma = curvature_bound(
        loss, d, data_norm=data_norm, constraint=constraint, data_norm_ord=data_norm_ord
    )
    if n_steps is None:
        n_steps = default_n_steps(
            n,
            epsilon,
            curvature=gamma,
            lipschitz_size=n * sens / 2.0,
            delta=delta,
            n_vertices=norms1.shape[0],
            max_steps=max_steps,
        )
    eps0 = step_epsilon(epsilon, delta, n_steps, accountant=accountant)

    # 3. Frank-Wolfe with private vertex selection
    if isinstance(constraint, L1Ball):
        r = constraint.radius
        theta = np.zeros(d)
        for t in range(n_steps):
            g = loss.gradient(theta, X, y)
            # scores ⟨v, g⟩ of the 2d vertices +r e_j, −r e_j; utility = −score
            utility = np.concatenate([-r * g, r * g])
            j = _select(utility, eps0, sens, selection, rng)
            mu = 2.0 / (t + 2.0)
            theta *= 1.0 - mu
            theta[j % d] += mu * (r if j < d else -r)
    else:
        V = constraint.vertices()
        theta = V.mean(axis=0)  # a public point of C
        for t in range(n_steps):
            g = loss.gradient(theta, X, y)
            j = _select(-(V @ g), eps0, sens, selection, rng)
            mu = 2.0 / (t + 2.0)
            theta = (1.0 - mu) * theta + mu * V[j]

    diagnostics: dict[str, Any] = {
        "algorithm": "frank-wolfe",
        "neighbouring": "replace-one",
        "epsilon": epsilon,
        "delta": delta,
        "n_steps": n_steps,
        "epsilon_step": eps0,
        "sensitivity": sens,
        "curvature": gamma,
        "lipschitz_inf": _derivative_bound(loss, _margin_bound(norms1, norms2, b_inf, r2)) * b_inf,
        "selection": selection,
        "accountant": accountant if delta > 0 and n_steps > 1 else "basic",
        "constraint": repr(constraint),
        "data_norm": data_norm,
        "data_norm_ord": data_norm_ord,
        "n_clipped": n_clipped,
    }
    return Result(
        theta=theta, event=SelfComposed(PureEpsilon(eps0), n_steps), diagnostics=diagnostics
    )
