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
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._validation import check_nonnegative
from ..accounting.events import (
    ADD_REMOVE,
    NEIGHBOURING_RELATIONS,
    REPLACE_ONE,
    DpEvent,
    Gaussian,
    NonPrivate,
    SelfComposed,
)
from ..design import Design, as_design, clip_factors
from ..design import blas_controller as _blas_controller
from ..exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    PrivacyError,
    UnknownNameError,
    UnsupportedEventError,
)
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

#: The two neighbouring relations (the values of ``DpEvent.neighbouring``).
NEIGHBOURING = NEIGHBOURING_RELATIONS

__all__ = [
    "ACCOUNTANTS",
    "ADD_REMOVE",
    "AVERAGING",
    "NEIGHBOURING",
    "REPLACE_ONE",
    "SAMPLINGS",
    "CallableOracle",
    "FullBatchSampler",
    "GLMOracle",
    "LoopResult",
    "PoissonSampler",
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
    "check_neighbouring",
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


def generic_clipped_sum(per_example_grad, theta, Xb, yb, clipping_norm) -> np.ndarray:
    """Σᵢ cᵢ gᵢ with gᵢ from a user function, shape ``theta.shape``.

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
        return np.zeros(theta.shape)
    G = G.reshape(b, -1)
    bad = ~np.isfinite(G)
    if bad.any():
        G = np.where(bad.any(axis=1, keepdims=True), 0.0, G)
    c = clip_factors(np.sqrt(np.einsum("ij,ij->i", G, G)), clipping_norm)
    return (c @ G).reshape(theta.shape)


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

    def batches(self, sampler, rng, steps):
        """The batches of ``sampler`` (drawn by the data's backend, same law)."""
        return self.X.batches(sampler, rng, steps)

    def clipped_sum(self, theta, idx):
        return self.X.glm_clipped_sum(
            self._base, theta, self.y, self.C, weights=self._weights, rows=idx
        )


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
        self.fn, self.X, self.y, self.C = per_example_grad, X, y, clipping_norm

    def batches(self, sampler, rng, steps):
        return sampler.batches(rng, steps)

    def clipped_sum(self, theta, idx):
        Xb = self.X.take(idx).materialize() if isinstance(self.X, Design) else _take(self.X, idx)
        return generic_clipped_sum(self.fn, theta, Xb, _take(self.y, idx), self.C)


def make_oracle(loss, X, y, clipping_norm: float, per_example_grad=None):
    """The fastest oracle for ``loss`` (or the generic one for ``per_example_grad``).

    ``X`` is a :class:`~dperm.design.Design` (an array is wrapped in one, without
    clipping) whose row norms are computed once.
    """
    if per_example_grad is not None:
        return CallableOracle(per_example_grad, X, y, clipping_norm)
    X = as_design(X)
    if getattr(loss, "multiclass", False):
        return SoftmaxOracle(loss, X, y, clipping_norm)
    return GLMOracle(loss, X, y, clipping_norm)


# =====================================================================================
# Calibration (through the accountants; the algorithms never compute ε themselves)
# =====================================================================================
ACCOUNTANTS = ("rdp", "pld")


def check_accountant(accountant: str) -> str:
    """Raises UnknownNameError unless ``accountant`` is "rdp" or "pld"."""
    if accountant not in ACCOUNTANTS:
        raise UnknownNameError(
            f"unknown accountant {accountant!r}; choose one of {list(ACCOUNTANTS)}"
        )
    return accountant


def resolve_accountant(accountant, sampler: Sampler) -> str:
    """The accountant of a run: ``accountant`` if given, else the tightest one
    that supports the sampler's event (``sampler.default_accountant``: the PLD
    accountant, or RDP for sampling without replacement, which PLD cannot account).

    Raises
    ------
    UnknownNameError
        Unknown name.
    UnsupportedEventError
        The RDP accountant asked for replace-one Poisson sampling (no RDP bound
        exists in dperm; use "pld", or fixed-size sampling without replacement).
    """
    if accountant is None:
        return sampler.default_accountant
    check_accountant(accountant)
    if accountant == "rdp" and isinstance(sampler, PoissonSampler):
        if sampler.neighbouring == REPLACE_ONE:
            raise UnsupportedEventError(
                "the RDP accountant cannot account Poisson sampling under replace-one "
                "neighbours; use accountant='pld' (dp-accounting's REPLACE_ONE PLD) or "
                "sampling='without_replacement' (RDP of Wang, Balle, Kasiviswanathan 2019)"
            )
    return accountant


def _factory(accountant: str, neighbouring: str) -> Callable[[], Any]:
    """A fresh accountant of ``neighbouring`` for each call."""
    from ..accounting import get_accountant

    return lambda: get_accountant(accountant, neighbouring=neighbouring)


# calibration is a deterministic function of the event family and the target: one
# search serves the k one-vs-rest fits of an estimator and repeated fits
_CALIBRATION_CACHE: dict[tuple, float] = {}


def calibrate_noise_multiplier(
    make_event: Callable[[float], DpEvent],
    epsilon: float,
    delta: float,
    accountant: str,
    *,
    neighbouring: str = REPLACE_ONE,
    proxy=None,
) -> float:
    """Smallest z such that ``make_event(z)`` is certified (ε, δ)-DP by ``accountant``
    for the relation ``neighbouring``.

    Delegates to :func:`dperm.accounting.calibrate.calibrate_noise` and then
    re-checks the result with the accountant (fail closed).  For the PLD
    accountant the search is bracketed by the (fast) RDP answer for
    ``proxy = (make_proxy_event, lo, hi)`` (see :meth:`Sampler.rdp_proxy`;
    default: ``make_event`` itself); the bracket only speeds the search, the
    certificate is the PLD's (and a bracket that misses falls back to the
    unbracketed search).

    Raises
    ------
    InvalidPrivacyParameter
        If no noise level meets the target.
    """
    from ..accounting.calibrate import calibrate_noise

    factory = _factory(accountant, neighbouring)
    bounds = {}
    if accountant == "pld":
        make_proxy, lo, hi = proxy if proxy is not None else (make_event, 0.5, 1.05)
        try:
            z_rdp = float(
                calibrate_noise(
                    make_proxy,
                    epsilon,
                    delta,
                    accountant=_factory("rdp", make_proxy(1.0).neighbouring),
                    rtol=1e-2,
                )
            )
            bounds = {"lower": lo * z_rdp, "upper": hi * z_rdp}
        except PrivacyError:
            bounds = {}
    try:
        z = float(calibrate_noise(make_event, epsilon, delta, accountant=factory, **bounds))
    except InvalidPrivacyParameter:
        if not bounds:
            raise
        z = float(calibrate_noise(make_event, epsilon, delta, accountant=factory))
    check_spent(make_event(z), epsilon, delta, accountant, what=f"calibrated noise z={z:.6g}")
    return z


# ε(δ) of an event is a deterministic function of (event, δ, accountant): one PLD
# evaluation (~0.1–0.3 s) serves repeated fits with the same public constants
_EPSILON_CACHE: dict[tuple, float] = {}


def epsilon_of(event: DpEvent, delta: float, accountant: str) -> float:
    """ε spent by ``event`` at ``delta`` according to ``accountant``, for the
    neighbouring relation the event carries."""
    if isinstance(event, NonPrivate):
        return math.inf
    from ..accounting import epsilon_spent

    key = (event, float(delta), accountant)
    try:
        cached = _EPSILON_CACHE.get(key)
    except TypeError:  # an unhashable event: not cached
        key, cached = None, None
    if cached is not None:
        return cached
    eps = float(epsilon_spent(event, delta, accountant=_factory(accountant, event.neighbouring)))
    if key is not None:
        if len(_EPSILON_CACHE) >= 256:
            _EPSILON_CACHE.clear()
        _EPSILON_CACHE[key] = eps
    return eps


def _exact_gaussian_epsilon(event: DpEvent, delta: float) -> float | None:
    """Exact ε(δ) of T adaptive Gaussian mechanisms with multiplier z (a Gaussian
    mechanism with multiplier z/√T; Dong, Roth & Su 2019, Corollary 3.3; ε by the
    analytic formula of Balle & Wang, ICML 2018), or None for other events."""
    count = 1
    if isinstance(event, SelfComposed):
        event, count = event.event, event.count
    if type(event) is not Gaussian or count == 0 or event.noise_multiplier == 0:
        return None
    from ..accounting.gaussian import gaussian_epsilon

    return float(gaussian_epsilon(event.noise_multiplier / math.sqrt(count), delta))


def check_spent(event: DpEvent, epsilon: float, delta: float, accountant: str, what: str) -> float:
    """Return ε(δ) of ``event``; raise when it exceeds the target ``epsilon``.

    Raises
    ------
    InvalidPrivacyParameter
        Naming ``what`` and the values, when ε(δ) > epsilon (1e-9 relative slack
        for the root finder).
    """
    exact = _exact_gaussian_epsilon(event, delta)
    if exact is not None and not exact <= epsilon * (1 + 1e-9):
        # no sound accountant certifies less than the exact value: fail fast (the
        # PLD of a low-noise Gaussian is slow to build)
        raise InvalidPrivacyParameter(
            f"{what} spends epsilon={exact:.6g} at delta={delta:g} (exact, Balle & Wang "
            f"2018), more than the target epsilon={epsilon:g}"
        )
    eps = epsilon_of(event, delta, accountant)
    if not eps <= epsilon * (1 + 1e-9):
        raise InvalidPrivacyParameter(
            f"{what} spends epsilon={eps:.6g} at delta={delta:g} ({accountant} accountant, "
            f"{getattr(event, 'neighbouring', '?')} neighbours), more than the target "
            f"epsilon={epsilon:g}"
        )
    return eps


def resolve_noise(
    sampler: Sampler,
    steps: int,
    *,
    epsilon,
    delta,
    noise_multiplier,
    accountant: str,
) -> tuple[float, DpEvent, float | None]:
    """Noise multiplier z, the event of the run, and ε spent at δ.

    Either (``epsilon``, ``delta``) is given and z is the smallest noise the
    accountant certifies for ``steps`` steps of ``sampler`` under the
    sampler's neighbouring relation; or ``noise_multiplier`` is given, and
    then, if ``epsilon`` is also given, the run must meet it.  z = 0 gives the
    event :class:`NonPrivate` (ε = ∞).

    Raises
    ------
    InvalidPrivacyParameter
        If neither is given, a value is invalid, or the given noise does not
        meet the target ε.
    """
    from .._validation import check_delta, check_epsilon

    check_accountant(accountant)
    if noise_multiplier is None:
        if epsilon is None:
            raise InvalidPrivacyParameter(
                "give epsilon and delta (the noise is then calibrated) or noise_multiplier, "
                "got neither"
            )
        eps = check_epsilon(epsilon)
        dlt = check_delta(delta, allow_zero=False)
        key = (sampler.event(1.0, steps), eps, dlt, accountant)
        z = _CALIBRATION_CACHE.get(key)
        if z is None:
            z = calibrate_noise_multiplier(
                lambda v: sampler.event(v, steps),
                eps,
                dlt,
                accountant,
                neighbouring=sampler.neighbouring,
                proxy=sampler.rdp_proxy(steps),
            )
            if len(_CALIBRATION_CACHE) >= 256:
                _CALIBRATION_CACHE.clear()
            _CALIBRATION_CACHE[key] = z
    else:
        z = check_nonnegative(noise_multiplier, "noise_multiplier")
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            dlt = check_delta(delta, allow_zero=False)
            check_spent(
                sampler.event(z, steps),
                eps,
                dlt,
                accountant,
                what=(
                    f"noise_multiplier={z:g} with steps={steps}, "
                    f"sampling_rate={sampler.sampling_rate:g} ({sampler.name} sampling)"
                ),
            )
    event = sampler.event(z, steps)
    spent = None
    if delta is not None:
        from .._validation import check_delta

        spent = epsilon_of(event, check_delta(delta, allow_zero=False), accountant)
    return z, event, spent


# =====================================================================================
# The loop
# =====================================================================================
@dataclasses.dataclass
class LoopResult:
    """Output of :func:`run`: the released iterate and public facts about the run."""

    theta: np.ndarray
    steps: int
    last_learning_rate: float


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
    alpha: float = 0.0,
    constraint=None,
    regularizer=None,
    momentum: float = 0.0,
    averaging: str = "last",
    callback: Callable[[int, int, np.ndarray], Any] | None = None,
    progress: str | None = None,
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
    alpha : float
        Coefficient of the data-independent term (α/2)‖θ‖².
    constraint : Constraint, optional
        Projection after every step.
    regularizer : Regularizer, optional
        Data-independent non-smooth term r(θ): a proximal step
        θ ← prox_{η r}(θ) follows every gradient step (post-processing).
    momentum : float in [0, 1)
    averaging : {"last", "uniform", "tail"}
        Release the last iterate, the mean of all iterates, or the mean of
        the last ⌈T/2⌉ iterates (suffix averaging).
    callback : callable, optional
        ``callback(t, steps, theta)`` after every step (progress bars).
    progress : str, optional
        When given and ``callback`` is None, show a rich progress bar with this
        description (see :class:`rich_progress`).

    Returns
    -------
    LoopResult
    """
    with contextlib.ExitStack() as stack:
        if progress is not None and callback is None:
            callback = stack.enter_context(rich_progress(progress, steps))
        # Per-step products are small (b × d): one BLAS thread is fastest and avoids
        # oversubscription on busy machines; large full batches keep all threads.
        work = sampler.normalizer * int(np.prod(np.shape(theta0)))
        if work < 5e7:
            stack.enter_context(_blas_controller().limit(limits=1, user_api="blas"))
        sample_rng, noise_rng = rng.spawn(2)
        theta = np.array(theta0, dtype=np.float64, copy=True)
        batches = oracle.batches(sampler, sample_rng, steps)
        noises = _noise_stream(noise_rng, theta.shape, steps, noise_std) if noise_std > 0 else None
        inv_m = 1.0 / sampler.normalizer
        const_eta = schedule(1) if schedule.is_constant else None
        start_avg = {"last": steps + 1, "uniform": 1, "tail": steps // 2 + 1}[averaging]
        avg = np.zeros_like(theta) if start_avg <= steps else None
        n_avg = 0
        velocity = None
        eta = const_eta
        for t in range(1, steps + 1):
            idx = next(batches)  # P1
            g = oracle.clipped_sum(theta, idx)  # P2
            if noises is not None:
                g = add_noise(g, next(noises))  # P3
            g *= inv_m
            g = add_l2(g, theta, alpha)
            g, velocity = momentum_update(g, velocity, momentum)
            eta = const_eta if const_eta is not None else schedule(t)
            theta = project(prox_step(sgd_step(theta, g, eta), regularizer, eta), constraint)
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

        # on stderr, so that stdout stays clean for --json and pipes
        self._progress = Progress(
            console=Console(stderr=True), disable=self.disable, transient=True
        )
        self._progress.__enter__()
        self._task = self._progress.add_task(self.description, total=self.total)

        def callback(t, steps, theta):
            if t % self._every == 0 or t == steps:
                self._progress.update(self._task, completed=t)

        return callback

    def __exit__(self, *exc):
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
    from .._validation import check_X_y

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
