"""ERM by the exponential mechanism over a continuous ℓ2 ball ("exponential sampling").

Release one draw of θ from the density on C = {θ ∈ R^d : ‖θ‖₂ ≤ R}

    p_D(θ) ∝ exp(−ε · F_D(θ) / (2Δ)),    F_D(θ) = Σᵢ ℓ(θ; xᵢ, yᵢ),

the exponential mechanism of McSherry & Talwar (FOCS 2007) with the base
measure Lebesgue on C, used for convex ERM by Bassily, Smith, Thakurta
(FOCS 2014, §3, "exponential sampling").  Only the abstract and introduction
of BST14 (arXiv 1405.7085) could be retrieved here, and not the Smith–Ullman
lecture notes, so no theorem number is cited: the privacy and utility
statements below are derived here in full.

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
released and ``diagnostics`` holds public quantities only.  For d > 2 the cube
envelope needs exponentially many cells and no log-concave sampler with a
certified total-variation bound is shipped, so :func:`fit` refuses (a sampler
within TV γ of p_D would be (ε, γ(1 + e^ε))-DP).

Utility: :func:`dperm.theory.exponential_sampling_bound` (for convex ℓ).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_positive,
    check_X_y,
    clip_rows,
)
from ..accounting.events import PureEpsilon
from ..exceptions import (
    ConvergenceError,
    InvalidPrivacyParameter,
    LabelError,
    UnsupportedOperationError,
)
from ..losses import Hinge, Huber, HuberSVM, Logistic, Quantile, Squared
from ..losses.base import GLMLoss
from ..theory import exponential_sampling_bound
from .base import Result
from .exponential_erm import loss_interval

__all__ = ["MAX_EXACT_DIM", "fit", "sample_ball"]

#: largest dimension sampled exactly (cube-envelope rejection)
MAX_EXACT_DIM = 2
_SLACK = 1e-9  # constant log-factor absorbing rounding in U(θ) − U(c)
_CHUNK_ENTRIES = 2_000_000
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


def _sum_losses(loss: GLMLoss, X, y, thetas: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Σᵢ clip(ℓ(θ_j; xᵢ, yᵢ), lo, hi) for each row θ_j, shape (k,), in blocks."""
    n = X.shape[0]
    out = np.empty(thetas.shape[0])
    step = max(1, _CHUNK_ENTRIES // max(n, 1))
    for s in range(0, thetas.shape[0], step):
        Z = np.asarray(X @ thetas[s : s + step].T)
        out[s : s + step] = np.clip(loss.pointwise(Z, y[:, None]), lo, hi).sum(axis=0)
    return out


def _sum_gradients(loss: GLMLoss, X, y, thetas: np.ndarray) -> np.ndarray:
    """Σᵢ ∇ℓ(θ_j; xᵢ, yᵢ) for each row θ_j, shape (k, d), in blocks."""
    n = X.shape[0]
    out = np.empty(thetas.shape)
    step = max(1, _CHUNK_ENTRIES // max(n, 1))
    for s in range(0, thetas.shape[0], step):
        Z = np.asarray(X @ thetas[s : s + step].T)
        S = loss.derivative(Z, y[:, None])
        out[s : s + step] = np.asarray(X.T @ S).T
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
    data_norm = check_positive(data_norm, "data_norm")
    if loss_bounds is None:
        lo, hi = loss_interval(loss, data_norm * R, label_bound)
    else:
        try:
            lo, hi = (float(v) for v in loss_bounds)
        except (TypeError, ValueError):
            raise InvalidPrivacyParameter(
                f"loss_bounds must be a pair (lo, hi), got {loss_bounds!r}"
            ) from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InvalidPrivacyParameter(
                f"loss_bounds must be finite with lo < hi, got {loss_bounds!r}"
            )
    lip = float(loss.lipschitz(data_norm, radius=R))
    sens = min(hi - lo, 2.0 * lip * R) if math.isfinite(lip) else hi - lo
    if not (math.isfinite(sens) and sens > 0):
        raise InvalidPrivacyParameter(f"the sensitivity must be finite and > 0, got {sens!r}")
    return sens, lo, hi


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
    max_cells: int = 20_000,
    random_state=None,
) -> Result:
    """Exponential sampling: θ ~ p(θ) ∝ exp(−ε Σᵢ ℓ(θ; xᵢ, yᵢ)/(2Δ)) on ‖θ‖₂ ≤ ``radius``.

    ε-DP under replace-one (n public), exactly, for d ≤ 2 (module docstring:
    McSherry & Talwar 2007; Bassily, Smith, Thakurta 2014 §3; privacy argument
    of Dwork & Roth 2014, Theorem 3.10, derived for a density).  Assumptions:
    ‖xᵢ‖₂ ≤ ``data_norm`` (rows above are clipped and counted); labels
    admissible for ``loss`` (|y| ≤ ``label_bound`` for the quantile loss);
    the loss Lipschitz on the bounding box of the ball.  Convexity of ℓ is
    needed only for the utility bound, not for privacy.  No intercept is
    added (append a public constant column to X for one).

    Parameters
    ----------
    loss : GLMLoss
    X : ndarray or csr_matrix of shape (n, d), d ≤ 2
    y : ndarray of shape (n,)
    epsilon : float > 0
    radius : float > 0, default 1.0
        R of the public constraint ball.
    delta : float in [0, 1), default 0
        Accepted for the common signature; the release is pure ε-DP.
    data_norm : float > 0, default 1.0
    loss_bounds : (lo, hi), optional
        Public per-example loss range over the ball; default
        :func:`dperm.algorithms.exponential_erm.loss_interval`.
    label_bound : float, optional
        Public bound on |y| for the quantile loss.
    max_cells : int, default 20000
        Envelope budget of :func:`sample_ball` (speed only).
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (d,); event ``PureEpsilon(ε)`` (replace-one);
        ``diagnostics``: ``sensitivity`` Δ, ``loss_bounds``, ``radius``,
        ``utility_bound`` (:func:`dperm.theory.exponential_sampling_bound` at
        β = 0.05, valid for convex ℓ), ``n_clipped``, ``neighbouring``.

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, LabelError
    UnsupportedOperationError
        d > 2.

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
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    R = check_positive(radius, "radius")
    data_norm = check_positive(data_norm, "data_norm")
    X, y = check_X_y(X, y)
    y = loss.check_labels(y)
    n, d = X.shape
    if d > MAX_EXACT_DIM:
        raise UnsupportedOperationError(
            f"exact exponential sampling is implemented for d ≤ {MAX_EXACT_DIM} features, got "
            f"d={d}; use dperm.algorithms.exponential_erm over a finite net instead"
        )
    if label_bound is not None:
        label_bound = check_positive(label_bound, "label_bound")
        if y.size and np.max(np.abs(y)) > label_bound:
            raise LabelError(
                f"labels must satisfy |y| ≤ label_bound={label_bound:g}; the largest |y| is "
                f"{np.max(np.abs(y)):g}"
            )
    sens, lo, hi = sensitivity(
        loss, radius=R, data_norm=data_norm, loss_bounds=loss_bounds, label_bound=label_bound
    )
    rng = check_random_state(random_state)
    X, n_clipped = clip_rows(X, data_norm)

    a = epsilon / (2.0 * sens)
    if loss_bounds is None and isinstance(loss, _CONVEX_LOSSES):
        # within the ball every loss lies in [lo, hi] already (rows clipped to data_norm,
        # labels checked), so the unclipped convex sum defines the same density there and
        # its tangent planes give the envelope.
        theta = sample_ball(
            lambda T: a * _sum_losses(loss, X, y, T, -np.inf, np.inf),
            R,
            d,
            gradient=lambda T: a * _sum_gradients(loss, X, y, T),
            max_cells=max_cells,
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
            lambda T: a * _sum_losses(loss, X, y, T, lo, hi),
            R,
            d,
            lipschitz=a * n * lip_box,
            max_cells=max_cells,
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
        "utility_bound": exponential_sampling_bound(
            n=n, d=d, epsilon=epsilon, lipschitz=lip, radius=R, sensitivity=sens
        ),
        "n_clipped": n_clipped,
    }
    return Result(theta=theta, event=PureEpsilon(epsilon), diagnostics=diagnostics)
