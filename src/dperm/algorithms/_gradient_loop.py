"""Shared machinery of the gradient-perturbation algorithms (DP-GD, DP-SGD).

One noisy step is a chain of small pure transformations, in the style of
optax (privacy-critical steps marked with the proof step they implement, see
``docs/gradient_perturbation.md``):

    batch  = sampler.next()                             [P1: sampling]
    g_sum  = Σ_{i∈batch} clip_C(∇ℓ(θ; xᵢ, yᵢ))           [P2: ‖each term‖ ≤ C]
    g      = (g_sum + N(0, (noise_std)² I)) / m          [P3: Gaussian mechanism]
    g      = g + α θ                                     (post-processing)
    g, v   = momentum(g, v)                              (post-processing)
    θ      = Π_C(θ − η_t g)                              (post-processing)

Everything after P3 uses only the released noisy gradient and public
hyper-parameters, so by post-processing the privacy of the whole run is that
of the sequence of noisy sums, which is exactly the event the sampler
describes (:meth:`Sampler.event`).  The sampler that draws the batches and
the event that the accountants read come from the *same object*, so the
accounting always matches the sampling actually done.

Public constants.  The sampler also fixes the neighbouring relation of the
run and the public normaliser m.  Under add/remove-one the number of records
is private, so m and every other constant come from the caller's public
``dataset_size`` (:func:`public_size`), never from ``X.shape[0]``; the rows
are only iterated over.  Under replace-one n = ``X.shape[0]`` is public.

Fast paths.  For GLM losses ∇ℓ(θ; xᵢ, yᵢ) = sᵢ xᵢ, so ‖∇ℓᵢ‖ = |sᵢ|·‖xᵢ‖ (row
norms precomputed once) and the clipped sum is ``Xᵀ(s ⊙ c)`` with
cᵢ = min(1, C/‖∇ℓᵢ‖) — one pass over the batch, dense or CSR.  For the
multinomial softmax loss ∇ℓᵢ = xᵢ rᵢᵀ with rᵢ = pᵢ − e_{yᵢ}, ‖∇ℓᵢ‖_F = ‖rᵢ‖·‖xᵢ‖
and the clipped sum is ``Xᵀ(c ⊙ R)``.  The oracles compute these through the
data's :class:`~dperm.design.Design` (rows clipped to ``data_norm`` by a per-row
scale, the intercept implicit, batches gathered from X without copying the
rest; :meth:`~dperm.design.Design.glm_clipped_sum`), which is also where another
backend (Dask) plugs in, batches included (:meth:`~dperm.design.Design.batches`).
A generic path accepts any function
``per_example_grad(theta, X_batch, y_batch) -> (b, *theta.shape)`` (it gets the
materialized batch rows).

Calibration.  The noise multiplier of P3 comes from the accountants, in
:mod:`._gradient_calibration` (:func:`resolve_noise` and friends, re-exported here).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._validation import check_data_norm, check_nonnegative, check_positive
from ..accounting.active import user_hook
from ..accounting.events import ADD_REMOVE, NEIGHBOURING_RELATIONS, REPLACE_ONE
from ..design import Design, as_design, check_X_y, clip_factors, glm_clipped_sum_kernel
from ..design import blas_controller as _blas_controller
from ..exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError
from ..sampling import (
    RNG_CHUNK,
    SAMPLINGS,
    FullBatchSampler,
    PoissonSampler,
    Sampler,
    ShuffleSampler,
    WithoutReplacementSampler,
    check_dataset_size,
    check_neighbouring,
    chunks,
    make_sampler,
    public_size,
)
from ._gradient_calibration import (
    ACCOUNTANTS,
    calibrate_noise_multiplier,
    check_accountant,
    check_spent,
    epsilon_of,
    prefetch_noise,
    resolve_accountant,
    resolve_noise,
)
from .adaptive_clipping import AdaptiveClipping, BatchOracle

#: The two neighbouring relations (the values of ``DpEvent.neighbouring``).
NEIGHBOURING = NEIGHBOURING_RELATIONS

__all__ = [
    "ACCOUNTANTS",
    "ADD_REMOVE",
    "AVERAGING",
    "GRADIENT_CANARY",
    "NEIGHBOURING",
    "REPLACE_ONE",
    "SAMPLINGS",
    "STEP_OBSERVER",
    "CallableOracle",
    "FullBatchSampler",
    "GLMOracle",
    "LoopResult",
    "Options",
    "PoissonSampler",
    "Run",
    "Sampler",
    "ShuffleSampler",
    "SoftmaxOracle",
    "WithoutReplacementSampler",
    "add_l2",
    "add_noise",
    "calibrate_noise_multiplier",
    "check_accountant",
    "check_common",
    "check_dataset_size",
    "check_loss_or_gradient",
    "check_neighbouring",
    "check_options",
    "check_spent",
    "clip_factors",
    "epsilon_of",
    "generic_clipped_sum",
    "glm_clipped_sum",
    "initial_theta",
    "lipschitz_bound",
    "make_oracle",
    "make_sampler",
    "momentum_update",
    "prefetch_noise",
    "prepare_data",
    "project",
    "prox_step",
    "public_size",
    "resolve_accountant",
    "resolve_clipping_norm",
    "resolve_noise",
    "rich_progress",
    "run",
    "sgd_step",
    "softmax_clipped_sum",
]

AVERAGING = ("last", "uniform", "tail")


# =====================================================================================
# Pure transformations
# =====================================================================================
def glm_clipped_sum(loss, theta, Xb, yb, xnorms, clipping_norm) -> np.ndarray:
    """Σᵢ cᵢ sᵢ xᵢ for a GLM loss on the rows ``Xb``, without forming per-example
    gradients (:meth:`dperm.design.Design.glm_clipped_sum` on a view of ``Xb``).

    Parameters
    ----------
    loss : GLMLoss
    theta : ndarray of shape (d,)
    Xb : ndarray or csr_matrix of shape (b, d)
    yb : ndarray of shape (b,)
    xnorms : ndarray of shape (b,)
        ‖xᵢ‖₂ of the batch rows.
    clipping_norm : float

    Returns
    -------
    ndarray of shape (d,)
    """
    view = Design(Xb, xnorms=np.asarray(xnorms, dtype=np.float64))
    return view.glm_clipped_sum(loss, theta, yb, clipping_norm)


def softmax_clipped_sum(loss, theta, Xb, yb, xnorms, clipping_norm) -> np.ndarray:
    """Σᵢ cᵢ xᵢ rᵢᵀ = Xᵀ(c ⊙ R) for the softmax loss, shape (d, k)
    (:meth:`dperm.design.Design.softmax_clipped_sum` on a view of ``Xb``)."""
    view = Design(Xb, xnorms=np.asarray(xnorms, dtype=np.float64))
    return view.softmax_clipped_sum(loss, theta, yb, clipping_norm)


def generic_clipped_sum(per_example_grad, theta, Xb, yb, clipping_norm, count=False):
    """Σᵢ cᵢ gᵢ with gᵢ from a user function, shape ``theta.shape``; with ``count`` the
    pair (that sum, Σᵢ (1[‖gᵢ‖ ≤ C] − ½)) of adaptive clipping.

    Non-finite per-example gradients are replaced by zero (so one bad example
    cannot turn the release into NaN, which would itself leak).

    Raises
    ------
    InvalidDataError
        If ``per_example_grad`` does not return an array of shape
        ``(batch_size, *theta.shape)``.
    """
    b = Xb.shape[0]
    G = np.asarray(per_example_grad(theta, Xb, yb), dtype=np.float64)
    expected = (b, *theta.shape)
    if G.shape != expected:
        raise InvalidDataError(
            f"per_example_grad must return an array of shape (batch_size, *theta.shape) = "
            f"{expected}, got shape {G.shape}"
        )
    if b == 0:
        return (np.zeros(theta.shape), 0.0) if count else np.zeros(theta.shape)
    G = G.reshape(b, -1)
    bad = ~np.isfinite(G)
    if bad.any():
        G = np.where(bad.any(axis=1, keepdims=True), 0.0, G)
    norms = np.sqrt(np.einsum("ij,ij->i", G, G))
    out = (clip_factors(norms, clipping_norm) @ G).reshape(theta.shape)
    if count:
        return out, float(np.count_nonzero(norms <= clipping_norm)) - 0.5 * b
    return out


def add_noise(g: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """g + noise (the Gaussian mechanism, with ``noise`` already ~ N(0, std² I))."""
    return g + noise


def add_l2(g: np.ndarray, theta: np.ndarray, alpha: float) -> np.ndarray:
    """g + α θ: gradient of the data-independent term (α/2)‖θ‖²."""
    return g + alpha * theta if alpha else g


def momentum_update(g: np.ndarray, velocity, mu: float):
    """Heavy-ball momentum v ← μ v + g; returns (v, v).  Post-processing."""
    if not mu:
        return g, velocity
    velocity = g if velocity is None else mu * velocity + g
    return velocity, velocity


def sgd_step(theta: np.ndarray, direction: np.ndarray, eta: float) -> np.ndarray:
    """θ − η · direction."""
    return theta - eta * direction


def prox_step(theta: np.ndarray, regularizer, eta: float) -> np.ndarray:
    """prox_{η r}(θ) of a data-independent regularizer (identity when ``None``)."""
    return theta if regularizer is None else regularizer.prox(theta, eta)


def project(theta: np.ndarray, constraint) -> np.ndarray:
    """Euclidean projection onto ``constraint`` (identity when ``None``).

    Matrix parameters (softmax) are projected as flattened vectors, so an
    ℓ2 ball bounds the Frobenius norm.
    """
    if constraint is None:
        return theta
    if theta.ndim == 1:
        return np.asarray(constraint.project(theta), dtype=np.float64)
    return np.asarray(constraint.project(theta.ravel()), dtype=np.float64).reshape(theta.shape)


# =====================================================================================
# Per-example gradient oracles: theta, batch -> clipped sum
# =====================================================================================
def _take(A, idx):
    return A if idx is None else A[idx]


class GLMOracle:
    """Clipped gradient sums of a :class:`~dperm.losses.GLMLoss` (fast path) on a
    :class:`~dperm.design.Design`; a weighted loss's weights go to the Design."""

    kind = "glm"

    def __init__(self, loss, X: Design, y, clipping_norm: float):
        self.X, self.y, self.C = X, y, clipping_norm
        self.loss = loss
        terms = getattr(loss, "_design_terms", None)
        self._base, self._weights = terms() if terms is not None else (loss, None)
        # the per-step clipped sum with the run's constants bound once (the numpy
        # Design: the same numbers, without the per-call dispatch)
        self._kernel = glm_clipped_sum_kernel(
            X, self._base, y, clipping_norm, weights=self._weights
        )

    def batches(self, sampler, rng, steps):
        """The batches of ``sampler`` (drawn by the data's backend, same law)."""
        return self.X.batches(sampler, rng, steps)

    def clipped_sum(self, theta, idx):
        return self._kernel(theta, idx)


class SoftmaxOracle(GLMOracle):
    """Clipped gradient sums of :class:`~dperm.losses.Softmax` (fast path)."""

    kind = "softmax"

    def clipped_sum(self, theta, idx):
        return self.X.softmax_clipped_sum(self.loss, theta, self.y, self.C, rows=idx)


class CallableOracle:
    """Clipped gradient sums from a user ``per_example_grad(theta, X_batch, y_batch)``
    (the batch rows are materialized for it: an effective-row array of the batch)."""

    kind = "generic"

    def __init__(self, per_example_grad, X, y, clipping_norm: float):
        if not callable(per_example_grad):
            raise InvalidPrivacyParameter(
                f"per_example_grad must be callable, got {per_example_grad!r}"
            )
        # user code, called with the private iterates (released ⇒ charged: user_hook)
        self.fn, self.X, self.y, self.C = user_hook(per_example_grad), X, y, clipping_norm

    def batches(self, sampler, rng, steps):
        return sampler.batches(rng, steps)

    def clipped_sum(self, theta, idx):
        return self.clipped_sum_count(theta, idx, self.C)[0]

    def clipped_sum_count(self, theta, idx, clipping_norm):
        """(Σᵢ clip_C(gᵢ), Σᵢ (1[‖gᵢ‖ ≤ C] − ½)) over the batch (adaptive clipping)."""
        Xb = self.X.take(idx).materialize() if isinstance(self.X, Design) else _take(self.X, idx)
        return generic_clipped_sum(
            self.fn, theta, Xb, _take(self.y, idx), clipping_norm, count=True
        )


def make_oracle(loss, X, y, clipping_norm: float, per_example_grad=None, *, batch=False):
    """The fastest oracle for ``loss`` (or the generic one for ``per_example_grad``).

    ``X`` is a :class:`~dperm.design.Design` (an array is wrapped in one, without
    clipping) whose row norms are computed once.  ``batch``: the
    :class:`~dperm.algorithms.adaptive_clipping.BatchOracle` (the count of unclipped
    examples of adaptive clipping; ``batch`` may be its feature ``transform``).
    """
    if per_example_grad is not None:
        return CallableOracle(per_example_grad, X, y, clipping_norm)
    if batch is not False:
        return BatchOracle(loss, X, y, clipping_norm, None if batch is True else batch)
    X = as_design(X)
    if getattr(loss, "multiclass", False):
        return SoftmaxOracle(loss, X, y, clipping_norm)
    return GLMOracle(loss, X, y, clipping_norm)


# =====================================================================================
# The loop
# =====================================================================================
@dataclasses.dataclass
class LoopResult:
    """Output of :func:`run`: the released iterate and public facts about the run."""

    theta: np.ndarray
    steps: int
    last_learning_rate: float


#: The white-box audit's per-step observer (:mod:`dperm.audit.whitebox`), or None.
#: When set, :func:`run` calls ``observer(t, theta, noisy_sum)`` at every step with the
#: iterate θ_{t−1} the step starts from and the noisy clipped sum of P3 (before the
#: normaliser; a buffer the loop keeps using: copy what you keep) — what the DP-SGD
#: guarantee releases, so observing it is within the threat model.  Read once per run:
#: no cost when unset.
STEP_OBSERVER: contextvars.ContextVar[Callable | None] = contextvars.ContextVar(
    "dperm_step_observer", default=None
)

#: The white-box audit's gradient canaries (:mod:`dperm.audit.whitebox`), or None.  When
#: set, :func:`run` draws its batches and clipped sums from ``GRADIENT_CANARY.get()(oracle)``
#: instead of ``oracle``: the audit routes a few designated rows to a crafted per-example
#: gradient (the "gradient canary" of Nasr et al., USENIX Security 2023), which the same
#: sampler includes, the same clipping code bounds by the oracle's C, and the same noise
#: and accountant cover — within the DP-SGD guarantee, which holds for *any* per-example
#: gradient.  Read once per run: no cost when unset; never set outside an audit.
GRADIENT_CANARY: contextvars.ContextVar[Callable | None] = contextvars.ContextVar(
    "dperm_gradient_canary", default=None
)


def _noise_stream(rng, shape, steps, std) -> Iterator[np.ndarray]:
    size = int(np.prod(shape))
    chunk = max(1, min(steps, RNG_CHUNK // max(size, 1)))
    for c in chunks(steps, chunk):
        block = rng.standard_normal((c, *shape))
        block *= std
        yield from block


def run(
    oracle,
    sampler: Sampler,
    *,
    theta0: np.ndarray,
    steps: int,
    schedule,
    noise_std: float,
    rng: np.random.Generator,
    options: Options,
    callback: Callable[[int, int, np.ndarray], Any] | None = None,
    progress: str | None = None,
    clipping: AdaptiveClipping | None = None,
) -> LoopResult:
    """Run ``steps`` noisy (projected) gradient steps and return the release.

    Parameters
    ----------
    oracle : GLMOracle, SoftmaxOracle or CallableOracle
        ``clipped_sum(theta, idx)`` → Σ_{i∈batch} clip_C(∇ℓᵢ).
    sampler : Sampler
        Draws the batches; its ``normalizer`` divides the noisy sum.
    theta0 : ndarray
        Starting point (public), shape (d,) or (d, k).
    steps : int
    schedule : Schedule
        η_t for t = 1 … steps.
    noise_std : float
        Standard deviation of the Gaussian noise added to each clipped *sum*
        (``z · sensitivity_factor · C``); 0 gives the non-private algorithm.
    rng : numpy.random.Generator
        Split into independent streams for sampling and for noise.
    options : Options
        The run's checked settings (:func:`check_options`); the loop uses ``alpha``
        (the data-independent term (α/2)‖θ‖²), ``momentum``, ``constraint`` (projection
        after every step), ``regularizer`` (a data-independent non-smooth r(θ): a
        proximal step θ ← prox_{η r}(θ) after every gradient step, post-processing) and
        ``averaging`` ("last", "uniform" or "tail": the last iterate, the mean of all,
        or the mean of the last ⌈T/2⌉ — suffix averaging).
    callback : callable, optional
        ``callback(t, steps, theta)`` after every step (progress bars).
    progress : str, optional
        When given and ``callback`` is None, show a rich progress bar with this
        description (see :class:`rich_progress`).
    clipping : AdaptiveClipping, optional
        Adaptive clipping (:mod:`dperm.algorithms.adaptive_clipping`): steps P2–P3 are
        its :meth:`~dperm.algorithms.adaptive_clipping.AdaptiveClipping.release` (the
        clipped sum at Cₜ with noise ∝ Cₜ, then Cₜ₊₁ from the noisy count of the same
        batch; ``oracle`` needs ``clipped_sum_count``) and ``noise_std`` is unused.

    Returns
    -------
    LoopResult
    """
    callback = user_hook(callback)  # the user's: each iterate it gets is released
    with contextlib.ExitStack() as stack:
        if progress is not None and callback is None:
            callback = stack.enter_context(rich_progress(progress, steps))
        # Per-step products are small (b × d): one BLAS thread is fastest and avoids
        # oversubscription on busy machines; large full batches keep all threads.
        work = sampler.normalizer * int(np.prod(np.shape(theta0)))
        if work < 5e7:
            stack.enter_context(_blas_controller().limit(limits=1, user_api="blas"))
        canary = GRADIENT_CANARY.get()
        if canary is not None:
            oracle = canary(oracle)
        sample_rng, noise_rng = rng.spawn(2)
        theta = np.array(theta0, dtype=np.float64, copy=True)
        batches = oracle.batches(sampler, sample_rng, steps)
        noises = None
        if clipping is None and noise_std > 0:
            noises = _noise_stream(noise_rng, theta.shape, steps, noise_std)
        inv_m = 1.0 / sampler.normalizer
        const_eta = schedule(1) if schedule.is_constant else None
        start_avg = {"last": steps + 1, "uniform": 1, "tail": steps // 2 + 1}[options.averaging]
        avg = np.zeros_like(theta) if start_avg <= steps else None
        n_avg = 0
        velocity = None
        eta = const_eta
        observe = STEP_OBSERVER.get()
        for t in range(1, steps + 1):
            idx = next(batches)  # P1
            if clipping is not None:  # P2–P3 at Cₜ, then Cₜ₊₁ (adaptive_clipping.py)
                g = clipping.release(oracle, theta, idx, noise_rng)
            else:
                g = oracle.clipped_sum(theta, idx)  # P2
            if noises is not None:
                g = add_noise(g, next(noises))  # P3
            if observe is not None:
                observe(t, theta, g)
            g *= inv_m if clipping is None else inv_m * clipping.step_scale
            g = add_l2(g, theta, options.alpha)
            g, velocity = momentum_update(g, velocity, options.momentum)
            eta = const_eta if const_eta is not None else schedule(t)
            theta = sgd_step(theta, g, eta)
            theta = project(prox_step(theta, options.regularizer, eta), options.constraint)
            if t >= start_avg:
                n_avg += 1
                avg += (theta - avg) / n_avg
            if callback is not None:
                callback(t, steps, theta)
        out = theta if avg is None else avg
        return LoopResult(theta=out, steps=steps, last_learning_rate=float(eta))


class rich_progress:
    """Context manager giving a ``callback(t, steps, theta)`` that drives a rich
    progress bar (updated at most ~200 times per run to keep the loop fast).

    Examples
    --------
    >>> with rich_progress("DP-SGD", total=10, disable=True) as cb:
    ...     cb(10, 10, None)
    """

    def __init__(self, description: str, total: int, disable: bool = False):
        self.description, self.total, self.disable = description, total, disable
        self._every = max(1, total // 200)

    def __enter__(self):
        from rich.console import Console
        from rich.progress import Progress

        console = Console(stderr=True)
        if not console.is_terminal and not self.disable:
            # a pipe or a log (rich draws nothing there): plain lines
            return self._plain_lines()
        # on stderr, so that stdout stays clean for --json and pipes
        self._progress = Progress(console=console, disable=self.disable, transient=True)
        self._progress.__enter__()
        self._task = self._progress.add_task(self.description, total=self.total)

        def callback(t, steps, theta):
            if t % self._every == 0 or t == steps:
                self._progress.update(self._task, completed=t)

        return callback

    def _plain_lines(self):
        import sys
        import time

        self._progress = None
        t0, tenth = time.perf_counter(), max(1, self.total // 10)

        def callback(t, steps, theta):
            # every 10 % of the steps, once the loop has run 2 s (a short loop is silent)
            if (t % tenth == 0 or t == steps) and time.perf_counter() - t0 > 2.0:
                print(
                    f"dperm: {self.description}: step {t}/{steps} "
                    f"({100 * t // max(steps, 1)} %, {time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )

        return callback

    def __exit__(self, *exc):
        if self._progress is None:
            return None
        return self._progress.__exit__(*exc)


# =====================================================================================
# Input handling shared by dp_gd and dp_sgd
# =====================================================================================
def prepare_data(loss, X, y, data_norm, per_example_grad, n_classes=None):
    """Validate X, y; view X as a :class:`~dperm.design.Design` clipped to
    ``data_norm`` when given (a per-row scale; X is not copied); check labels.

    Returns
    -------
    X : Design
        Row norms computed once (one pass, reused by the fast paths).
    y : ndarray
    n_clipped : int
        Rows scaled down to ``data_norm`` (reported, not private).
    n_classes : int or None
        k for a multi-class loss.
    """
    X = as_design(X, data_norm)  # validates X; clipping reads the row norms (one pass)
    X, y = check_X_y(X, y)
    k = None
    if per_example_grad is None:
        if getattr(loss, "multiclass", False):
            k = loss.resolve_n_classes(y) if n_classes is None else n_classes
            y = loss.check_labels(y, k)
        else:
            y = loss.check_labels(y)
    return X, y, X.n_clipped, k


def initial_theta(loss, X, theta0, n_classes, per_example_grad) -> np.ndarray:
    """``theta0`` checked, or zeros of the right shape."""
    d = X.shape[1]
    if theta0 is None:
        if n_classes is not None:
            return np.zeros((d, n_classes))
        return np.zeros(d)
    theta0 = np.array(theta0, dtype=np.float64)
    if not np.all(np.isfinite(theta0)):
        raise InvalidDataError("theta0 contains NaN or infinite values")
    expected = (d,) if n_classes is None else (d, n_classes)
    if per_example_grad is None and theta0.shape != expected:
        raise InvalidDataError(f"theta0 must have shape {expected}, got {theta0.shape}")
    if per_example_grad is not None and (theta0.ndim == 0 or theta0.shape[0] != d):
        raise InvalidDataError(
            f"theta0 must have shape (n_features, ...) with n_features={d}, got {theta0.shape}"
        )
    return theta0


def sampler_diagnostics(sampler, noise_multiplier, steps, accountant, clipping_norm, noise_std_sum):
    """The diagnostics every DP-SGD run reports about its sampler, noise and clipping
    (the convex loop of :mod:`dperm.algorithms.dp_sgd` and :mod:`dperm.networks`)."""
    if isinstance(sampler, ShuffleSampler):
        epochs = steps / sampler.batches_per_epoch
    else:
        epochs = steps * sampler.sampling_rate
    return {
        "noise_multiplier": noise_multiplier,
        "steps": steps,
        "sampling_rate": sampler.sampling_rate,
        "accountant": accountant,
        "sampling": sampler.name,
        "batch_size": sampler.batch_size,
        "epochs": epochs,
        "clipping_norm": clipping_norm,
        "noise_std": noise_std_sum / sampler.normalizer,
        "normalizer": sampler.normalizer,
        "sensitivity": sampler.sensitivity_factor * clipping_norm,
    }


def check_common(alpha, momentum, averaging):
    """Validate α ≥ 0, momentum ∈ [0, 1), averaging name."""
    alpha = check_nonnegative(alpha, "alpha")
    momentum = check_nonnegative(momentum, "momentum")
    if momentum >= 1:
        raise InvalidPrivacyParameter(f"momentum must be in [0, 1), got {momentum!r}")
    if averaging not in AVERAGING:
        raise UnknownNameError(f"unknown averaging {averaging!r}; choose one of {list(AVERAGING)}")
    return alpha, momentum, averaging


def lipschitz_bound(loss, data_norm, constraint) -> float:
    """L of ``loss`` over rows with ‖x‖ ≤ data_norm (and θ in ``constraint``)."""
    if constraint is not None:
        return float(loss.lipschitz(data_norm, radius=constraint.l2_radius))
    return float(loss.lipschitz(data_norm))


def resolve_clipping_norm(loss, data_norm, constraint, clipping_norm, per_example_grad):
    """(C, L): the clipping norm — ``clipping_norm`` if given, else the Lipschitz
    bound L of ``loss`` over ‖x‖ ≤ ``data_norm`` (and θ in ``constraint``).

    Raises
    ------
    InvalidPrivacyParameter
        If C is not given and cannot be derived (no ``data_norm``, generic
        gradient, or a loss that is Lipschitz only on a bounded domain).
    """
    lipschitz = None
    if loss is not None and data_norm is not None and per_example_grad is None:
        if clipping_norm is None:
            lipschitz = lipschitz_bound(loss, data_norm, constraint)
        else:
            try:
                lipschitz = lipschitz_bound(loss, data_norm, constraint)
            except InvalidPrivacyParameter:
                lipschitz = None  # informative only; C is given
    if clipping_norm is None:
        if lipschitz is None:
            raise InvalidPrivacyParameter(
                "give clipping_norm, or data_norm (a public bound on the row norms from which "
                "the Lipschitz constant of the loss gives the clipping norm), got neither"
            )
        clipping_norm = lipschitz
    return float(clipping_norm), lipschitz


# =====================================================================================
# One run's set-up, shared by dp_gd and dp_sgd
# =====================================================================================
@dataclasses.dataclass(frozen=True)
class Options:
    """The validated public settings of one run (:func:`check_options`)."""

    alpha: float
    momentum: float
    averaging: str
    data_norm: float | None
    clipping_norm: float | None
    constraint: Any = None
    regularizer: Any = None


def check_options(
    alpha, momentum, averaging, data_norm, clipping_norm, constraint=None, regularizer=None
) -> Options:
    """The checks every gradient-perturbation fit makes after its own: α, momentum,
    averaging (:func:`check_common`); ``data_norm`` and ``clipping_norm`` > 0 when given.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError
    """
    alpha, momentum, averaging = check_common(alpha, momentum, averaging)
    if data_norm is not None:
        data_norm = check_data_norm(data_norm)
    if clipping_norm is not None:
        clipping_norm = check_positive(clipping_norm, "clipping_norm")
    return Options(alpha, momentum, averaging, data_norm, clipping_norm, constraint, regularizer)


def check_loss_or_gradient(loss, per_example_grad) -> None:
    """Raises InvalidPrivacyParameter when neither a loss nor a ``per_example_grad`` is given."""
    if loss is None and per_example_grad is None:
        raise InvalidPrivacyParameter("give a loss or a per_example_grad function, got neither")


@dataclasses.dataclass
class Run:
    """The validated data and public settings of one DP-GD / DP-SGD run.

    Built by :meth:`prepare` (data checked, rows clipped to ``data_norm``, labels
    checked), completed by :meth:`resolve_clipping_norm` [P2]; :meth:`descend` runs the
    loop of :func:`run` [P1–P3] and :meth:`diagnostics` reports the public facts both
    algorithms share.
    """

    loss: Any
    X: Design
    y: np.ndarray
    n_clipped: int
    n_classes: int | None
    per_example_grad: Any
    options: Options
    rng: np.random.Generator
    clipping_norm: float = math.nan
    lipschitz: float | None = None

    @classmethod
    def prepare(cls, loss, X, y, per_example_grad, n_classes, options: Options, rng) -> Run:
        """Validate X, y and view X clipped to ``options.data_norm`` (:func:`prepare_data`)."""
        X, y, n_clipped, k = prepare_data(
            loss, X, y, options.data_norm, per_example_grad, n_classes
        )
        return cls(loss, X, y, n_clipped, k, per_example_grad, options, rng)

    def resolve_clipping_norm(self) -> float:
        """C (and L) of :func:`resolve_clipping_norm` for the given ``clipping_norm``;
        returns C."""
        o = self.options
        self.clipping_norm, self.lipschitz = resolve_clipping_norm(
            self.loss, o.data_norm, o.constraint, o.clipping_norm, self.per_example_grad
        )
        return self.clipping_norm

    def smoothness(self) -> float | None:
        """β of the loss over rows with ‖x‖ ≤ ``data_norm`` (public), or None: a
        ``per_example_grad``, no ``data_norm`` or a non-smooth loss."""
        loss, o = self.loss, self.options
        if loss is None or self.per_example_grad is not None or o.data_norm is None:
            return None
        return float(loss.smoothness(o.data_norm)) if getattr(loss, "smooth", False) else None

    def initial_theta(self, theta0) -> np.ndarray:
        """:func:`initial_theta` for this run."""
        return initial_theta(self.loss, self.X, theta0, self.n_classes, self.per_example_grad)

    def descend(
        self, sampler, theta0, steps, schedule, noise_std, *, callback, progress, clipping=None,
        transform=None,
    ):  # fmt: skip
        """The fastest oracle (:func:`make_oracle`; the batch oracle for adaptive
        ``clipping`` or a feature ``transform``), the starting point, then :func:`run`
        with this run's generator and post-processing settings."""
        batch = transform if transform is not None else clipping is not None
        oracle = make_oracle(
            self.loss, self.X, self.y, self.clipping_norm, self.per_example_grad, batch=batch
        )
        return run(
            oracle,
            sampler,
            theta0=self.initial_theta(theta0),
            steps=steps,
            schedule=schedule,
            noise_std=noise_std,
            rng=self.rng,
            options=self.options,
            callback=callback,
            progress=progress,
            clipping=clipping,
        )

    def diagnostics(self, head: dict, sampler, learning_rate, schedule, epsilon, delta, spent):
        """``head`` (the algorithm's own entries) followed by the public facts both
        algorithms report, in this order."""
        o = self.options
        return {
            **head,
            "learning_rate": learning_rate,
            "schedule": repr(schedule),
            "averaging": o.averaging,
            "momentum": o.momentum,
            "alpha": o.alpha,
            "data_norm": o.data_norm,
            "n_clipped": self.n_clipped,
            "neighbouring": sampler.neighbouring,
            "epsilon": epsilon,
            "delta": delta,
            "epsilon_spent": spent,
        }
