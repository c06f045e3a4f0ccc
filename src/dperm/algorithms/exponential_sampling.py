"""ERM by the exponential mechanism over a continuous ℓ2 ball ("exponential sampling").

Release one draw of θ from the density on C = {θ ∈ R^d : ‖θ‖₂ ≤ R}

    p_D(θ) ∝ exp(−ε · F_D(θ) / (2Δ)),    F_D(θ) = Σᵢ ℓ(θ; xᵢ, yᵢ),

the exponential mechanism of McSherry & Talwar (FOCS 2007) with the base
measure Lebesgue on C, used for convex ERM by Bassily, Smith, Thakurta
(FOCS 2014, §3, "exponential sampling"): Smith & Ullman, Lecture 11,
Algorithm 1 (ExpMech-ERM), its privacy Lemma 2.4 and its utility Theorem 2.5
(the seed text; Theorem 2.5 sets Δ = GR, but a G-Lipschitz loss on the radius-R
ball ranges over 2GR, so dperm uses the sampler's actual Δ below).  Of BST14
only the abstract and introduction were available, so no theorem of it is
cited: the privacy and utility statements below are derived here in full.

Privacy (replace-one, pure ε-DP).  Let D, D′ differ in one record (d ↦ d′).
Then F_D − F_D′ = g with g(θ) = ℓ(θ; d) − ℓ(θ; d′).  Adding a constant to F
does not change p, and for every θ ∈ C

    |g(θ) − c| ≤ Δ    for some constant c,

with either of two public bounds (the code takes the smaller):

* range: every ℓ(θ; x, y) with ‖x‖ ≤ data_norm, θ ∈ C lies in a public
  interval [lo, hi] (:func:`dperm.algorithms.exponential_erm.loss_interval`
  with z_max = data_norm·R; losses are also clipped into it), so |g| ≤ hi − lo;
* Lipschitz: ℓ(·; x, y) is L-Lipschitz on C, so with c = g(0),
  |g(θ) − g(0)| ≤ |ℓ(θ;d) − ℓ(0;d)| + |ℓ(θ;d′) − ℓ(0;d′)| ≤ 2LR = L·diam(C).

Then p_D(θ)/p_D′(θ) = e^{−ε(g(θ)−c)/(2Δ)} · Z_D′/Z_D ≤ e^{ε/2} · e^{ε/2}
(Dwork & Roth 2014, proof of Theorem 3.10, which goes through verbatim for a
density), so the release is ε-DP; event ``PureEpsilon(ε)``, replace-one.

Exact sampling (d ≤ 2).  The sampler is rejection sampling with a
piecewise-constant envelope over cubes covering C: U = εF/(2Δ) is Λ-Lipschitz
with Λ = εnL_box/(2Δ) on the bounding box (L_box the loss's Lipschitz constant
there; clipping preserves it), so on a cube with centre c and half-diagonal h,
e^{−U(θ)} ≤ e^{−U(c) + Λh}.  A cube is drawn with probability ∝ its envelope
mass, a uniform point in it is proposed, points outside C are rejected and the
rest accepted with probability e^{−(U(θ) − U(c)) − Λh} ≤ 1: every accepted
point has exactly the density p_D (von Neumann's rejection principle).  The
cubes are refined (split in 2^d) where the envelope is loose, which only
changes the acceptance rate, never the law of the output; a tiny constant
factor e^{−10⁻⁹} on every acceptance probability absorbs floating-point
rounding in U(θ) − U(c) without distorting the law.

Side channel: the envelope and the number of proposals depend on the data, so
the *running time* is data-dependent (as for any rejection sampler); only θ is
released and ``diagnostics`` holds public quantities only.

The regularized target (``alpha`` = Λ > 0), any d.  With a public ridge term,

    p_D(θ) ∝ exp(−a·(F_D(θ) + (nΛ/2)‖θ‖²)) on C,     a = ε/(2Δ),

the privacy argument above is unchanged (the extra term does not depend on
the data, so F_D − F_D′ and Δ are the same): the release is ε-DP,
replace-one.  This is the *regularized exponential mechanism* (Gopi, Lee, Liu
2022, "Private convex optimization via exponential mechanism", whose
Gaussian-DP analysis dperm does not use).  U = a(F + (nΛ/2)‖·‖²) is then
α-strongly convex with α = a·n·Λ, so for any point c and g = ∇U(c)

    U(θ) ≥ U(c) + ⟨g, θ − c⟩ + (α/2)‖θ − c‖²        for every θ ∈ R^d

(convexity of F plus the exact quadratic), a Gaussian envelope: propose
θ ~ N(c − g/α, I/α), reject it outside C, accept it with probability
exp(−a·B_F(θ, c)) ≤ 1, B_F(θ, c) = F(θ) − F(c) − ⟨∇F(c), θ − c⟩ ≥ 0 the
Bregman divergence (von Neumann's rejection principle: the accepted θ has
exactly the law p_D, whatever c is).  When the mode lies on the sphere, the
envelope N(c, I/α) with the constant factor e^{s}, s = R‖g‖ + ⟨g, c⟩ ≥ 0
(⟨g, θ − c⟩ ≥ −s on C), is used instead — also valid for every c.  dperm
takes c = the minimizer of U over C (a non-private solver: c only changes the
acceptance rate).  If U is also β_U-smooth (β_U = a·n·(β_ℓ + Λ), β_ℓ the
loss's smoothness), the acceptance probability of one proposal is about
κ^{−d/2} with κ = 1 + β_ℓ/Λ when the mode is inside C (the ratio of the two
Gaussian integrals that sandwich e^{−U}); :func:`fit` refuses when this public
estimate exceeds ``MAX_EXPECTED_PROPOSALS`` (10⁶), naming it, and a run that
exceeds ``max_proposals`` raises ConvergenceError (an event that depends on
the data, outside the guarantee, like every solver failure in dperm).  This is
exact sampling, not MCMC: no total-variation error enters the guarantee.

Without the ridge term (Λ = 0) and d > 2, with δ > 0: the proximal sampler
of :mod:`dperm.algorithms._proximal_sampler` (an exact restricted Gaussian
oracle — the Gaussian-envelope sampler above — inside a Gibbs chain), run for
a public number of steps that bounds its total-variation distance τ to p_D;
the release is (ε, (1 + e^ε)τ)-DP with τ = δ/(1 + e^ε) (for every event S,
P(M(D) ∈ S) ≤ P_D(S) + τ ≤ e^ε P_D′(S) + τ ≤ e^ε (P(M(D′) ∈ S) + τ) + τ),
event ``EpsilonDelta(ε, δ)``.  Its cost grows like n²: a few thousand rows.
With δ = 0 and d > 2 a ridge term is required (the exact sampler above).

Utility: :func:`dperm.theory.exponential_sampling_bound` (for convex ℓ).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_data_norm, check_nonnegative, check_positive
from ..accounting.events import EpsilonDelta, PureEpsilon
from ..bounds import exponential_sampling_bound
from ..design import as_design
from ..exceptions import ConvergenceError, InvalidPrivacyParameter, UnsupportedOperationError
from ..losses import Hinge, Huber, HuberSVM, Logistic, Quantile, Squared
from ..losses.base import MARGIN_BOUND, GLMLoss
from . import _proximal_sampler as _prox
from .base import Result, check_rows, check_target, private_fit
from .exponential_erm import (
    check_label_bound,
    check_loss_bounds,
    loss_interval,
    margin_blocks,
    sum_losses,
)

__all__ = [
    "MAX_EXACT_DIM",
    "MAX_EXPECTED_PROPOSALS",
    "MAX_WORK",
    "TARGET_PROPOSALS",
    "default_alpha",
    "estimator_fit",
    "expected_proposals",
    "fit",
    "sample_ball",
    "sample_strongly_log_concave",
]

#: largest dimension sampled exactly without a ridge term (cube-envelope rejection)
MAX_EXACT_DIM = 2
#: fit refuses a regularized target whose public estimate κ^{d/2} of the proposals
#: per accepted draw exceeds this
MAX_EXPECTED_PROPOSALS = 1_000_000
#: ... or whose public work estimate n·d·κ^{d/2} (multiply-adds) exceeds this
MAX_WORK = 1e10
#: proposals per draw targeted by the estimators' default Λ (:func:`default_alpha`)
TARGET_PROPOSALS = 10_000
_SLACK = 1e-9  # constant log-factor absorbing rounding in U(θ) − U(c)
# losses known to be convex in θ everywhere: only these get the tangent-plane envelope
_CONVEX_LOSSES = (Hinge, Huber, HuberSVM, Logistic, Quantile, Squared)


def _logsumexp(v: np.ndarray) -> float:
    m = float(np.max(v))
    return m + math.log(float(np.sum(np.exp(v - m))))


def _log_box_mass(g: np.ndarray, h: np.ndarray) -> np.ndarray:
    """log ∫_{[−h,h]^d} e^{−⟨g, t⟩} dt per row, shape (m,) (g of shape (m, d))."""
    x = np.abs(g) * h[:, None]
    small = x < 1e-8
    xs = np.where(small, 1.0, x)
    # log(2 sinh(x)/|g|) = x + log1p(−e^{−2x}) − log|g| ;  → log(2h) as x → 0
    big = xs + np.log1p(-np.exp(-2.0 * xs)) - np.log(np.where(small, 1.0, np.abs(g)))
    return np.where(small, np.log(2.0 * h)[:, None], big).sum(axis=1)


def _sample_box(g: np.ndarray, h: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Offsets t ∈ [−h, h]^d with density ∝ e^{−⟨g, t⟩} (inverse CDF per coordinate)."""
    u = rng.uniform(size=g.shape)
    s = -g
    hh = h[:, None]
    x = np.abs(s) * hh
    small = x < 1e-8
    abs_s = np.where(small, 1.0, np.abs(s))
    t = np.sign(s) * (hh + np.log(u + (1.0 - u) * np.exp(-2.0 * x)) / abs_s)
    return np.clip(np.where(small, hh * (2.0 * u - 1.0), t), -hh, hh)


def sample_ball(
    potential: Callable[[np.ndarray], np.ndarray],
    radius: float,
    d: int,
    *,
    lipschitz: float | None = None,
    gradient: Callable[[np.ndarray], np.ndarray] | None = None,
    initial_cells: int = 8,
    max_cells: int = 20_000,
    batch_size: int = 256,
    max_proposals: int = 10_000_000,
    random_state=None,
) -> np.ndarray:
    """One exact draw from the density ∝ exp(−U(θ)) on the ℓ2 ball of ``radius``.

      Adaptive rejection sampling with a piecewise envelope on cubes covering
      the ball.  On a cube with centre c and half-side h the envelope is

      * ``gradient`` given (U convex on the ball's bounding box; :func:`fit` uses
    it only for dperm's convex losses without user ``loss_bounds``):
        e^{−U(c) − ⟨∇U(c), θ − c⟩} ≥ e^{−U(θ)} (tangent plane; exact sampling
        inside the cube coordinate-wise by inverting a truncated-exponential CDF);
      * otherwise (U ``lipschitz``-Lipschitz on the box): the constant
        e^{−U(c) + Λh√d}.

      A cube is drawn ∝ its envelope mass, a point is drawn from the envelope in
      it, points outside the ball are rejected and the rest accepted with
      probability (target/envelope)·e^{−10⁻⁹} ≤ 1.  After a batch without an
      acceptance, the cubes that produced the rejected proposals are split in
      2^d (Gilks & Wild's adaptive rejection idea): conditionally on the
      history, every stage is a valid rejection sampler, so the accepted point
      has exactly the target law whatever the refinement did.

      Parameters
      ----------
      potential : callable
          Maps an array of shape (k, d) to U at those points, shape (k,).
      radius : float > 0
      d : int in {1, …, MAX_EXACT_DIM}
      lipschitz : float ≥ 0, optional
          Λ, a Lipschitz constant of U on [−radius, radius]^d.
      gradient : callable, optional
          Maps (k, d) points to (sub)gradients of a convex U, shape (k, d).
          One of ``lipschitz`` and ``gradient`` is required.
      initial_cells : int, default 8
          Cubes per axis of the starting grid.
      max_cells : int, default 20000
          No refinement beyond this many cubes (speed only).
      batch_size : int, default 256
      max_proposals : int, default 10⁷
      random_state : None, int, SeedSequence or Generator

      Returns
      -------
      ndarray of shape (d,)

      Raises
      ------
      UnsupportedOperationError
          ``d > MAX_EXACT_DIM``.
      ConvergenceError
          No proposal accepted within ``max_proposals`` (this failure event
          itself depends on the data; the refinement makes it practically
          impossible at the default budget).
      InvalidPrivacyParameter
          Bad ``lipschitz``, ``radius``, budgets, or neither envelope given.
    """
    d = check_count(d, "d")
    if d > MAX_EXACT_DIM:
        raise UnsupportedOperationError(
            f"exact exponential sampling is implemented for d ≤ {MAX_EXACT_DIM}, got d={d}; "
            "use dperm.algorithms.exponential_erm over a finite net, or a gradient method"
        )
    R = check_positive(radius, "radius")
    if gradient is None:
        if lipschitz is None:
            raise InvalidPrivacyParameter("sample_ball needs lipschitz= or gradient=")
        lip = float(lipschitz)
        if not (math.isfinite(lip) and lip >= 0):
            raise InvalidPrivacyParameter(f"lipschitz must be finite and ≥ 0, got {lipschitz!r}")
    initial_cells = check_count(initial_cells, "initial_cells")
    max_cells = check_count(max_cells, "max_cells")
    batch_size = check_count(batch_size, "batch_size")
    max_proposals = check_count(max_proposals, "max_proposals")
    rng = check_random_state(random_state)
    sq = math.sqrt(d)
    offsets = np.array(np.meshgrid(*([[-1.0, 1.0]] * d), indexing="ij")).reshape(d, -1).T

    def evaluate(c: np.ndarray, h: np.ndarray):
        u = np.asarray(potential(c), dtype=float)
        if gradient is None:
            return u, np.zeros_like(c), lip * h * sq
        return u, np.asarray(gradient(c), dtype=float).reshape(c.shape), np.zeros_like(h)

    def meets_ball(c: np.ndarray, h: np.ndarray) -> np.ndarray:
        gap = np.maximum(np.abs(c) - h[:, None], 0.0)
        return np.einsum("ij,ij->i", gap, gap) <= R * R

    k0 = initial_cells
    axis = -R + (2.0 * np.arange(k0) + 1.0) * R / k0
    centers = np.stack([m.ravel() for m in np.meshgrid(*([axis] * d), indexing="ij")], axis=1)
    half = np.full(centers.shape[0], R / k0)
    inb = meets_ball(centers, half)
    centers, half = centers[inb], half[inb]
    u_c, g_c, off = evaluate(centers, half)

    proposed = 0
    while proposed < max_proposals:
        logw = -u_c + off + _log_box_mass(g_c, half)
        p = np.exp(logw - logw.max())
        p /= p.sum()
        j = rng.choice(p.size, size=batch_size, p=p)
        theta = centers[j] + _sample_box(g_c[j], half[j], rng)
        inside = np.einsum("ij,ij->i", theta, theta) <= R * R
        log_acc = np.full(batch_size, -np.inf)
        if np.any(inside):
            ji = j[inside]
            t = theta[inside]
            lin = np.einsum("ij,ij->i", g_c[ji], t - centers[ji])
            u = np.asarray(potential(t), dtype=float)
            log_acc[inside] = -(u - u_c[ji] - lin) - off[ji] - _SLACK
        accept = np.log(rng.uniform(size=batch_size)) < log_acc
        if np.any(accept):
            return theta[int(np.argmax(accept))].copy()
        proposed += batch_size
        room = (max_cells - centers.shape[0]) // (offsets.shape[0] - 1)
        if room <= 0:
            continue
        split = np.unique(j)
        if split.size > room:
            split = split[np.argsort(-p[split])[:room]]
        keep = np.ones(centers.shape[0], dtype=bool)
        keep[split] = False
        h2 = half[split] / 2.0
        kids = (centers[split][:, None, :] + offsets[None] * h2[:, None, None]).reshape(-1, d)
        kid_half = np.repeat(h2, offsets.shape[0])
        m = meets_ball(kids, kid_half)
        kids, kid_half = kids[m], kid_half[m]
        ku, kg, ko = evaluate(kids, kid_half)
        centers = np.vstack([centers[keep], kids])
        half = np.concatenate([half[keep], kid_half])
        u_c = np.concatenate([u_c[keep], ku])
        g_c = np.vstack([g_c[keep], kg])
        off = np.concatenate([off[keep], ko])
    raise ConvergenceError(
        f"exponential sampling accepted no proposal in max_proposals={max_proposals}"
    )


def sample_strongly_log_concave(
    F: Callable[[np.ndarray], np.ndarray],
    grad_F: Callable[[np.ndarray], np.ndarray],
    *,
    scale: float,
    ridge: float,
    center: np.ndarray,
    radius: float,
    batch_size: int = 256,
    max_proposals: int = 10_000_000,
    random_state=None,
) -> tuple[np.ndarray, int]:
    """One exact draw from p(θ) ∝ exp(−U(θ)) on the ball ‖θ‖ ≤ ``radius``,
    U = scale·(F(θ) + (ridge/2)‖θ‖²), F convex (module docstring: Gaussian envelope
    from strong convexity, rejection).

    Parameters
    ----------
    F, grad_F : callable
        F and ∇F at the rows of a (k, d) array: shapes (k,) and (k, d).
    scale : float > 0
        a.
    ridge : float > 0
        nΛ (α = scale·ridge is the strong convexity of U).
    center : ndarray of shape (d,)
        c; any point is valid, the minimizer of U over the ball is fastest.
    radius : float > 0
    batch_size, max_proposals : int
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    (theta, n_proposals)

    Raises
    ------
    ConvergenceError
        No acceptance within ``max_proposals`` (a data-dependent event).
    """
    a = check_positive(scale, "scale")
    ridge = check_positive(ridge, "ridge")
    R = check_positive(radius, "radius")
    rng = check_random_state(random_state)
    c = np.asarray(center, dtype=float)
    d = c.size
    alpha = a * ridge
    Fc = float(F(c[None])[0])
    gF = np.asarray(grad_F(c[None]), dtype=float).reshape(d)
    g = a * (gF + ridge * c)  # ∇U(c)
    mean = c - g / alpha
    centred = float(mean @ mean) > R * R  # mode on the sphere: envelope N(c, I/α)·e^{shift}
    shift = R * float(np.linalg.norm(g)) + float(g @ c)  # ⟨g, θ − c⟩ ≥ −shift on the ball
    if centred:
        mean = c.copy()
    sd = 1.0 / math.sqrt(alpha)
    # a constant factor e^{−slack} on every acceptance probability keeps the law exact and
    # absorbs rounding of B_F ≥ 0 and of ⟨g, θ − c⟩ + s ≥ 0 (relative 1e-16 of these scales)
    slack = _SLACK * max(1.0, a * abs(Fc) + R * float(np.linalg.norm(g)) + abs(float(g @ c)))
    proposed = 0
    while proposed < max_proposals:
        T = mean + sd * rng.standard_normal((batch_size, d))
        inside = np.einsum("ij,ij->i", T, T) <= R * R
        log_acc = np.full(batch_size, -np.inf)
        if np.any(inside):
            t = T[inside]
            bregman = np.asarray(F(t), dtype=float) - Fc - (t - c) @ gF
            log_acc[inside] = -a * bregman - slack
            if centred:
                log_acc[inside] -= (t - c) @ g + shift
        accept = np.log(rng.uniform(size=batch_size)) < log_acc
        if np.any(accept):
            k = int(np.argmax(accept))
            return T[k].copy(), proposed + k + 1
        proposed += batch_size
    raise ConvergenceError(
        f"exponential sampling accepted no proposal in max_proposals={max_proposals}"
    )


def expected_proposals(d: int, smoothness: float, alpha: float) -> float:
    """Public estimate κ^{d/2}, κ = 1 + β_ℓ/Λ, of the proposals per accepted draw of
    the Gaussian-envelope sampler when the mode lies inside the ball (module
    docstring); ``inf`` for a non-smooth loss."""
    if not math.isfinite(smoothness):
        return math.inf
    return math.exp(0.5 * d * math.log1p(smoothness / alpha))


def _sum_gradients(loss: GLMLoss, X, y, thetas: np.ndarray) -> np.ndarray:
    """Σᵢ ∇ℓ(θ_j; xᵢ, yᵢ) for each row θ_j, shape (k, d), in blocks
    (:func:`~dperm.algorithms.exponential_erm.margin_blocks`)."""
    out = np.empty(thetas.shape)
    for s, Z in margin_blocks(X, thetas):
        out[s] = np.asarray(X.T @ loss.derivative(Z, y[:, None])).T
    return out


def sensitivity(
    loss: GLMLoss,
    *,
    radius: float,
    data_norm: float = 1.0,
    loss_bounds: tuple[float, float] | None = None,
    label_bound: float | None = None,
) -> tuple[float, float, float]:
    """Δ = min(hi − lo, 2·L·R) and the loss interval (lo, hi) used for clipping.

    See the module docstring for why both are valid replace-one bounds.

    Returns
    -------
    (Δ, lo, hi)

    Raises
    ------
    InvalidPrivacyParameter
    """
    R = check_positive(radius, "radius")
    data_norm = check_data_norm(data_norm)
    if loss_bounds is None:
        lo, hi = loss_interval(loss, data_norm * R, label_bound)
    else:
        lo, hi = check_loss_bounds(loss_bounds)
    lip = float(loss.lipschitz(data_norm, radius=R))
    sens = min(hi - lo, 2.0 * lip * R) if math.isfinite(lip) else hi - lo
    if not (math.isfinite(sens) and sens > 0):
        raise InvalidPrivacyParameter(f"the sensitivity must be finite and > 0, got {sens!r}")
    return sens, lo, hi


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    radius: float = 1.0,
    delta: float = 0.0,
    data_norm: float = 1.0,
    loss_bounds: tuple[float, float] | None = None,
    label_bound: float | None = None,
    alpha: float = 0.0,
    max_cells: int = 20_000,
    max_proposals: int = 10_000_000,
    random_state=None,
) -> Result:
    """Exponential sampling: θ ~ p(θ) ∝ exp(−ε (Σᵢ ℓ(θ; xᵢ, yᵢ) + (nΛ/2)‖θ‖²)/(2Δ)) on
    ‖θ‖₂ ≤ ``radius`` (Λ = ``alpha``, default 0).

    ε-DP under replace-one (n public), exactly (module docstring:
    McSherry & Talwar 2007; Bassily, Smith, Thakurta 2014 §3; privacy argument
    of Dwork & Roth 2014, Theorem 3.10, derived for a density): for d ≤ 2 with
    any Λ ≥ 0, for d > 2 with Λ > 0 and a smooth convex loss (the Gaussian
    envelope of the module docstring).  Assumptions:
    ‖xᵢ‖₂ ≤ ``data_norm`` (rows above are clipped and counted); labels
    admissible for ``loss`` (|y| ≤ ``label_bound`` for the quantile loss);
    the loss Lipschitz on the bounding box of the ball.  Convexity of ℓ is
    needed only for the utility bound, not for privacy.  No intercept is
    added (append a public constant column to X for one).

    Parameters
    ----------
    loss : GLMLoss
        Summed over the rows, each value clipped to the public range of
        :func:`sensitivity`; the Gaussian envelope (d > 2) needs a smooth convex loss.
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    epsilon : float > 0
    radius : float > 0, default 1.0
        R of the public constraint ball.
    delta : float in [0, 1), default 0
        0: pure ε-DP (exact samplers).  > 0 with d > 2 and Λ = 0: the proximal
        sampler, (ε, δ)-DP with its total-variation error charged as δ
        (module docstring); otherwise accepted and unused (pure ε-DP).
    data_norm : float > 0, default 1.0
    loss_bounds : (lo, hi), optional
        Public per-example loss range over the ball; default
        :func:`dperm.algorithms.exponential_erm.loss_interval`.
    label_bound : float, optional
        Public bound on |y| for the quantile loss.
    alpha : float ≥ 0, default 0
        Λ of the public ridge term (the regularized exponential mechanism);
        needed (> 0) for d > 2.
    max_cells : int, default 20000
        Envelope budget of :func:`sample_ball` (d ≤ 2; speed only).
    max_proposals : int, default 10⁷
        Proposals before ConvergenceError.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (d,); event ``PureEpsilon(ε)`` (replace-one);
        ``diagnostics``: ``sensitivity`` Δ, ``loss_bounds``, ``radius``,
        ``alpha``, ``sampler``, ``expected_proposals`` (d > 2), ``utility_bound``
        (:func:`dperm.theory.exponential_sampling_bound` at β = 0.05, valid for
        convex ℓ; with Λ > 0 it bounds L − min_C L through the regularized
        objective, + ΛR²/2), ``n_clipped``, ``neighbouring``.

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, LabelError
    UnsupportedOperationError
        d > 2 with Λ = 0, with a non-smooth or non-convex (clipped) loss, or
        with a public expected number of proposals κ^{d/2} above
        :data:`MAX_EXPECTED_PROPOSALS` (the message names it and the Λ needed).
    ConvergenceError
        No proposal accepted within ``max_proposals``.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.losses import Logistic
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (500, 1)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> res = fit(Logistic(), X, y, epsilon=1.0, radius=5.0, random_state=1)
    >>> bool(res.theta[0] > 0), res.event.epsilon
    (True, 1.0)
    """
    if not isinstance(loss, GLMLoss):
        raise InvalidPrivacyParameter(f"loss must be a GLMLoss, got {type(loss).__name__}")
    epsilon, delta, data_norm = check_target(epsilon, delta, data_norm)
    R = check_positive(radius, "radius")
    X, y, n, d = check_rows(X, y, delta, loss)
    alpha = check_nonnegative(alpha, "alpha")
    max_proposals = check_count(max_proposals, "max_proposals")
    convex = loss_bounds is None and isinstance(loss, _CONVEX_LOSSES)
    n_expected = None
    proximal = d > MAX_EXACT_DIM and alpha == 0.0 and delta > 0.0
    if d > MAX_EXACT_DIM and not proximal:
        if alpha == 0.0:
            raise UnsupportedOperationError(
                f"exact exponential sampling without a ridge term is implemented for d ≤ "
                f"{MAX_EXACT_DIM} features, got d={d}; pass alpha > 0 (the regularized "
                "exponential mechanism, sampled exactly in any dimension) or use "
                "dperm.algorithms.exponential_erm over a finite net"
            )
        if not convex:
            raise UnsupportedOperationError(
                f"exponential sampling for d={d} > {MAX_EXACT_DIM} needs a convex loss of "
                f"dperm without loss_bounds (a Gaussian envelope), got {loss!r}"
            )
        beta_l = float(loss.smoothness(data_norm))
        n_expected = expected_proposals(d, beta_l, alpha)
        if n_expected > MAX_EXPECTED_PROPOSALS:
            need = beta_l / math.expm1(2.0 * math.log(MAX_EXPECTED_PROPOSALS) / d)
            raise UnsupportedOperationError(
                f"exponential sampling in d={d} with alpha={alpha:g} needs about "
                f"κ^(d/2) = {n_expected:.3g} proposals per draw (κ = 1 + β/Λ, β = {beta_l:g}; "
                f"limit {MAX_EXPECTED_PROPOSALS:g}); use alpha ≥ {need:.3g}"
                if math.isfinite(n_expected)
                else f"exponential sampling in d={d} > {MAX_EXACT_DIM} needs a smooth loss "
                f"(finite smoothness), got {loss!r}"
            )
        if math.isfinite(n_expected) and n * d * n_expected > MAX_WORK:
            raise UnsupportedOperationError(
                f"exponential sampling in d={d} with n={n} rows and alpha={alpha:g} needs about "
                f"n·d·κ^(d/2) = {n * d * n_expected:.3g} multiply-adds (limit {MAX_WORK:g}): "
                "use a larger alpha, fewer features, or dperm.algorithms.exponential_erm "
                "over a finite net"
            )
    label_bound = check_label_bound(y, label_bound)
    sens, lo, hi = sensitivity(
        loss, radius=R, data_norm=data_norm, loss_bounds=loss_bounds, label_bound=label_bound
    )
    rng = check_random_state(random_state)
    X = as_design(X, data_norm)  # ‖x‖ ≤ R by a per-row scale; margins X θ_j without a copy
    n_clipped = X.n_clipped

    a = epsilon / (2.0 * sens)
    ridge = n * alpha  # the public term (nΛ/2)‖θ‖² of the potential

    def ridge_value(T):
        return 0.5 * ridge * np.einsum("ij,ij->i", T, T)

    sampler = "cube-envelope rejection"
    event: PureEpsilon | EpsilonDelta = PureEpsilon(epsilon)
    if proximal:
        beta_l = float(loss.smoothness(data_norm))
        if not (convex and math.isfinite(beta_l)):
            raise UnsupportedOperationError(
                f"exponential sampling in d={d} > {MAX_EXACT_DIM} without a ridge term needs a "
                f"smooth convex loss of dperm without loss_bounds, got {loss!r}"
            )
        eta = 1.0 / (d * a * n * beta_l)
        tv = delta / (1.0 + math.exp(epsilon))
        steps = _prox.proximal_steps(n=n, epsilon=epsilon, radius=R, eta=eta, tv=tv)
        theta = _prox.sample_proximal(
            lambda T: sum_losses(loss, X, y, T, -np.inf, np.inf),
            lambda T: _sum_gradients(loss, X, y, T),
            scale=a, smoothness=n * beta_l, radius=R, d=d, steps=steps, eta=eta, rng=rng,
            oracle=sample_strongly_log_concave,
        )  # fmt: skip
        sampler = f"proximal sampler, {steps} steps, TV ≤ {tv:.3g} charged as δ"
        event = EpsilonDelta(epsilon, delta)
    elif d > MAX_EXACT_DIM:
        # within the ball every loss lies in [lo, hi] (rows clipped, labels checked): the
        # unclipped convex sum defines the same density there
        from ..constraints import L2Ball
        from ..solvers import minimize

        center = minimize(loss, X, y, l2=alpha, constraint=L2Ball(R), tol=1e-8).theta
        theta, _ = sample_strongly_log_concave(
            lambda T: sum_losses(loss, X, y, T, -np.inf, np.inf),
            lambda T: _sum_gradients(loss, X, y, T),
            scale=a,
            ridge=ridge,
            center=center,
            radius=R,
            max_proposals=max_proposals,
            random_state=rng,
        )
        sampler = "Gaussian-envelope rejection (strong convexity)"
    elif convex:
        # within the ball every loss lies in [lo, hi] already (rows clipped to data_norm,
        # labels checked), so the unclipped convex sum defines the same density there and
        # its tangent planes give the envelope.
        theta = sample_ball(
            lambda T: a * (sum_losses(loss, X, y, T, -np.inf, np.inf) + ridge_value(T)),
            R,
            d,
            gradient=lambda T: a * (_sum_gradients(loss, X, y, T) + ridge * T),
            max_cells=max_cells,
            max_proposals=max_proposals,
            random_state=rng,
        )
    else:
        box = R * math.sqrt(d)
        lip_box = float(loss.lipschitz(data_norm, radius=box))
        if not math.isfinite(lip_box):
            raise InvalidPrivacyParameter(
                f"exponential sampling needs a Lipschitz loss on the ball; {loss!r} has L = ∞"
            )
        theta = sample_ball(
            lambda T: a * (sum_losses(loss, X, y, T, lo, hi) + ridge_value(T)),
            R,
            d,
            lipschitz=a * (n * lip_box + ridge * box),
            max_cells=max_cells,
            max_proposals=max_proposals,
            random_state=rng,
        )
    lip = float(loss.lipschitz(data_norm, radius=R))
    diagnostics: dict[str, Any] = {
        "algorithm": "exponential-sampling",
        "neighbouring": "replace-one",
        "epsilon": epsilon,
        "delta": delta,
        "sensitivity": sens,
        "loss_bounds": (lo, hi),
        "radius": R,
        "data_norm": data_norm,
        "alpha": alpha,
        "sampler": sampler,
        "expected_proposals": n_expected,
        # the regularized objective L + (Λ/2)‖θ‖² is convex and (L + ΛR)-Lipschitz on C;
        # its bound plus the ridge's range ΛR²/2 bounds L(θ̂) − min_C L
        "utility_bound": exponential_sampling_bound(
            n=n, d=d, epsilon=epsilon, lipschitz=lip + alpha * R, radius=R, sensitivity=sens
        )
        + 0.5 * alpha * R * R,
        "n_clipped": n_clipped,
    }
    return Result(theta=theta, event=event, diagnostics=diagnostics)


def default_alpha(n: int, d: int, epsilon: float, data_norm: float) -> float:
    """The estimators' Λ for ``alpha="auto"``: 0 for d ≤ 2 (exact without a ridge),
    else the Λ at which the public estimate κ^{d/2} of :func:`expected_proposals`
    is :data:`TARGET_PROPOSALS` for the logistic loss (β = R²/4):
    Λ = (R²/4)/(10^{8/d} − 1).  Chosen for tractability, not accuracy: in high
    d it is a strong ridge (d = 31: Λ ≈ 0.3 R²) that pulls θ toward 0."""
    if d <= MAX_EXACT_DIM:
        return 0.0
    return 0.25 * data_norm**2 / math.expm1(2.0 * math.log(TARGET_PROPOSALS) / d)


def estimator_fit(estimator, loss, X, y, epsilon, delta, rng) -> Result:
    """The estimators' adapter (``mechanism="exponential-sampling"``): the ball is
    the estimator's ℓ2 constraint (``constraint="l2"``, ``constraint_radius``) or,
    by default, the public prior ‖θ‖ ≤ MARGIN_BOUND/``data_norm_``
    (:data:`dperm.losses.MARGIN_BOUND`); Λ = ``l2_`` (``alpha="auto"``:
    :func:`default_alpha`).  Penalties other than ℓ2 and other constraint sets
    are refused; sizes beyond :data:`MAX_WORK` get a clear
    UnsupportedOperationError before any data is touched.

    Raises
    ------
    InvalidPrivacyParameter, UnsupportedOperationError
    """
    from ..constraints import L2Ball

    if estimator.regularizer_ is not None:
        raise InvalidPrivacyParameter(
            "mechanism 'exponential-sampling' samples the loss plus an ℓ2 term only: use "
            f"penalty 'l2' or 'none', got penalty={estimator.penalty!r}"
        )
    c = estimator.constraint_
    if c is not None and not isinstance(c, L2Ball):
        raise InvalidPrivacyParameter(
            f"mechanism 'exponential-sampling' samples over an ℓ2 ball, got constraint {c!r}"
        )
    radius = c.radius if c is not None else MARGIN_BOUND / estimator.data_norm_
    return fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        radius=radius,
        delta=delta,
        data_norm=estimator.data_norm_,
        alpha=estimator.l2_,
        random_state=rng,
    )
