"""Noise calibration of the gradient-perturbation algorithms (DP-GD, DP-SGD).

The algorithms never compute ε themselves: the noise multiplier z of a run is the
smallest one the chosen accountant certifies for the event the sampler describes
(:meth:`dperm.sampling.Sampler.event`), through
:func:`dperm.accounting.calibrate.calibrate_noise_certified` — the run spends between
(1 − 5·10⁻³)·ε and ε — and every certificate is checked again before it is used (fail
closed): the ε the search certified at the returned z is checked against the target
and kept as the run's ε (no second PLD is built).  A given multiplier is checked against a
target ε the same way (:func:`check_spent`), with the exact ε(δ) of T composed
Gaussian mechanisms (Dong, Roth & Su 2019, Corollary 3.3; Balle & Wang 2018) as a
fast lower bound that no sound accountant can beat.

Every name is re-exported by :mod:`dperm.algorithms._gradient_loop`; the loop
itself (step P3 of ``docs/gradient_perturbation.md`` adds the noise calibrated
here) lives there.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from .._validation import check_delta, check_delta_size, check_epsilon, check_nonnegative
from ..accounting import epsilon_spent, get_accountant
from ..accounting.active import planned
from ..accounting.calibrate import calibrate_noise_certified, clt_noise_guess
from ..accounting.events import (
    REPLACE_ONE,
    Composed,
    DpEvent,
    Gaussian,
    NonPrivate,
    SelfComposed,
)
from ..accounting.gaussian import gaussian_epsilon
from ..accounting.pld import bounded_grid_epsilon, grid_step_for
from ..exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
from ..sampling import PoissonSampler, Sampler, ShuffleSampler
from . import _calibration_store

__all__ = [
    "ACCOUNTANTS",
    "calibrate_noise_multiplier",
    "check_accountant",
    "check_spent",
    "epsilon_of",
    "prefetch_noise",
    "resolve_accountant",
    "resolve_noise",
]

ACCOUNTANTS = ("rdp", "pld")

#: relative tolerance of the calibrated noise: a run spends ≥ 99.5 % of its ε (never more
#: than ε); wide enough that the first PLD evaluation on the run's exact grid, aimed by
#: the coarse search's extrapolation (±0.2 %), is almost always accepted
CALIBRATION_RTOL = 5e-3


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


def _factory(accountant: str, neighbouring: str, grid: float | None = None) -> Callable[[], Any]:
    """A fresh accountant of ``neighbouring`` for each call (a PLD accountant on the
    grid step ``grid`` when given)."""

    kwargs = {} if grid is None or accountant != "pld" else {"value_discretization_interval": grid}
    return lambda: get_accountant(accountant, neighbouring=neighbouring, **kwargs)


def pld_grid(epsilon: float) -> float:
    """The PLD grid step of a run at ε ≈ ``epsilon``
    (:func:`dperm.accounting.pld.grid_step_for`: 10⁻⁴·2ᵏ with ε/h ≤ 4096, so the
    accountant's arrays stay bounded at any ε; pessimistic at every h)."""
    return grid_step_for(epsilon)


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
    rtol: float = CALIBRATION_RTOL,
    start: tuple[float, float] | None = None,
) -> float:
    """Smallest z such that ``make_event(z)`` is certified (ε, δ)-DP by ``accountant``
    for the relation ``neighbouring``.

    Delegates to :func:`dperm.accounting.calibrate.calibrate_noise_certified`: the
    run spends between (1 − ``rtol``)·ε and ε (or z is within a factor 1 + ``rtol``
    of a failing noise), and the ε the accountant certified at z — the search's
    last evaluation, not a second PLD built from scratch — is checked again here
    against the target by :func:`check_spent` (fail closed), from the cache of
    :func:`epsilon_of`.  ``start`` = (z₀, slope) is where the search starts
    (:func:`_start`; a guess, never a certificate).

    Raises
    ------
    InvalidPrivacyParameter
        If no noise level meets the target.
    """
    grid = pld_grid(epsilon) if accountant == "pld" else None
    lower, slope = start if start is not None else (None, None)
    z, eps = calibrate_noise_certified(
        make_event,
        epsilon,
        delta,
        accountant=_factory(accountant, neighbouring, grid),
        rtol=rtol,
        lower=lower,
        slope=slope,
    )
    event = make_event(z)
    _remember(event, delta, accountant, eps)  # the certificate, read back by check_spent
    check_spent(event, epsilon, delta, accountant, what=f"calibrated noise z={z:.6g}")
    return z


# ε(δ) of an event is a deterministic function of (event, δ, accountant): one PLD
# evaluation (~0.1–0.3 s) serves repeated fits with the same public constants
_EPSILON_CACHE: dict[tuple, float] = {}


def _remember(event: DpEvent, delta: float, accountant: str, eps: float) -> None:
    """Cache ε(δ) of ``event`` (an unhashable event is not cached)."""
    try:
        hash(event)
    except TypeError:
        return
    if len(_EPSILON_CACHE) >= 256:
        _EPSILON_CACHE.clear()
    _EPSILON_CACHE[(event, float(delta), accountant)] = eps


def epsilon_of(event: DpEvent, delta: float, accountant: str) -> float:
    """ε spent by ``event`` at ``delta`` according to ``accountant``, for the
    neighbouring relation the event carries."""
    if isinstance(event, NonPrivate):
        return math.inf
    try:
        cached = _EPSILON_CACHE.get((event, float(delta), accountant))
    except TypeError:  # an unhashable event: not cached
        cached = None
    if cached is not None:
        return cached
    if accountant == "pld":
        eps = bounded_grid_epsilon(event, delta)[0]  # bounded arrays at any ε
    else:
        make = _factory(accountant, event.neighbouring)
        eps = float(epsilon_spent(event, delta, accountant=make))
    _remember(event, delta, accountant, eps)
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


def _start(sampler: Sampler, steps: int, epsilon: float, delta: float):
    """(z₀, slope) from the central limit theorem of subsampled Gaussians
    (:func:`dperm.accounting.calibrate.clt_noise_guess`) where it is a good guess
    (subsampled steps, ε ≤ 10), else None (the search starts at z = 1)."""
    q = sampler.sampling_rate
    if not (0.0 < q < 1.0 and epsilon <= 10.0) or isinstance(sampler, ShuffleSampler):
        return None
    try:
        z, slope = clt_noise_guess(epsilon, delta, q, steps)
    except (ArithmeticError, ValueError):  # a guess out of floating-point range: none
        return None
    return (z, slope) if math.isfinite(z) and z > 0 else None


def _store_key(key: tuple) -> str:
    """The on-disk key of a calibration: every public input, spelled out (the event
    family at z = 1, ε, δ, the accountant, its grid and the tolerance)."""
    event, eps, dlt, accountant = key
    grid = pld_grid(eps) if accountant == "pld" else None
    return repr((event, eps, dlt, accountant, grid, CALIBRATION_RTOL))


def _stored_noise(key: tuple, make_event: Callable[[float], DpEvent]) -> float | None:
    """A z from the persistent cache (:mod:`._calibration_store`), re-verified: one ε
    evaluation by the run's accountant on the run's grid must certify
    (1 − rtol)·ε ≤ ε(z) ≤ ε — a file edited to a smaller z fails the upper bound, a
    larger one the lower — and the certificate is checked again by
    :func:`check_spent` (fail closed).  None when absent or not verified."""
    event_family, eps, dlt, accountant = key
    try:
        hash(event_family)
    except TypeError:
        return None
    z = _calibration_store.load(_store_key(key))
    if z is None:
        return None
    event = make_event(z)
    grid = pld_grid(eps) if accountant == "pld" else None
    try:
        spent = float(
            epsilon_spent(event, dlt, accountant=_factory(accountant, event.neighbouring, grid))
        )
    except InvalidPrivacyParameter:  # e.g. a grid too fine for a tiny stored z
        return None
    if not (1.0 - CALIBRATION_RTOL) * eps <= spent <= eps:
        return None
    _remember(event, dlt, accountant, spent)
    check_spent(event, eps, dlt, accountant, what=f"stored noise z={z:.6g}")
    return z


def _run_event(sampler: Sampler, steps: int, prior: DpEvent | None, z: float) -> DpEvent:
    """The event of a run with multiplier z: ``steps`` steps of ``sampler``, after the
    release ``prior`` on the same records when there is one (``Composed``)."""
    event = sampler.event(z, steps)
    return event if prior is None else Composed((prior, event))


def _calibrated(key: tuple, sampler: Sampler, steps: int, prior: DpEvent | None = None) -> float:
    """The noise multiplier of ``key`` = (event family, ε, δ, accountant) when it is not
    in this process's cache: the persistent cache's z re-verified
    (:func:`_stored_noise`), else a certified search (:func:`calibrate_noise_multiplier`,
    then stored).  ``prior``: the release before the run, composed with it."""
    _, eps, dlt, accountant = key
    make = functools.partial(_run_event, sampler, steps, prior)
    z = _stored_noise(key, make)
    if z is None:
        z = calibrate_noise_multiplier(
            make,
            eps,
            dlt,
            accountant,
            neighbouring=sampler.neighbouring,
            start=_start(sampler, steps, eps, dlt),
        )
        _calibration_store.store(_store_key(key), z)
    return z


# calibrations started by prefetch_noise and not yet read by resolve_noise
_PENDING: dict[tuple, Future] = {}


def prefetch_noise(
    sampler: Sampler, steps: int, *, epsilon, delta, accountant: str, prior=None
) -> None:
    """Start the noise calibration of a planned run in a background thread, so that it
    runs beside what precedes :func:`resolve_noise` (a fit's one pass over X).

    The calibration reads public numbers only (the event family of ``sampler`` and
    ``steps``, ε, δ, the accountant), so computing it early reveals nothing, and it is
    the same computation :func:`resolve_noise` would run (certified and checked the
    same way); :func:`resolve_noise` with the same plan waits for it and uses it, or,
    if it failed, computes it again and raises its error there.  A plan already
    calibrated in this process, invalid parameters or an unhashable event start
    nothing.  The PLD evaluations are numpy FFTs, which release the GIL.
    """
    try:
        key = (
            _run_event(sampler, steps, prior, 1.0),
            check_epsilon(epsilon),
            check_delta(delta, allow_zero=False),
            check_accountant(accountant),
        )
        if key in _CALIBRATION_CACHE or key in _PENDING:
            return
    except Exception:  # invalid or unhashable: resolve_noise will say why
        return
    if len(_PENDING) >= 16:  # runs that never reached resolve_noise (a failed fit)
        for k in [k for k, f in _PENDING.items() if f.done()]:
            _PENDING.pop(k, None)
    future: Future = Future()

    def work() -> None:
        try:
            future.set_result(_calibrated(key, sampler, steps, prior))
        except BaseException as exc:  # handed to resolve_noise
            future.set_exception(exc)

    _PENDING[key] = future
    threading.Thread(target=work, name="dperm-calibration", daemon=True).start()


def resolve_noise(
    sampler: Sampler,
    steps: int,
    *,
    epsilon,
    delta,
    noise_multiplier,
    accountant: str,
    prior: DpEvent | None = None,
) -> tuple[float, DpEvent, float | None]:
    """Noise multiplier z, the event of the run, and ε spent at δ.

    Either (``epsilon``, ``delta``) is given and z is the smallest noise the
    accountant certifies for ``steps`` steps of ``sampler`` under the
    sampler's neighbouring relation; or ``noise_multiplier`` is given, and
    then, if ``epsilon`` is also given, the run must meet it.  z = 0 gives the
    event :class:`NonPrivate` (ε = ∞).  ``prior``: a release on the same records
    before the steps (e.g. the private feature scaling of DP-SGD); the event is then
    ``Composed((prior, steps))`` and z is calibrated for the composition — one event,
    one (ε, δ).

    Raises
    ------
    InvalidPrivacyParameter
        If neither is given, a value is invalid, or the given noise does not
        meet the target ε.
    """
    check_accountant(accountant)
    if delta is not None:  # δ ≥ 1/N is a void guarantee (N public: n or dataset_size)
        what = "n" if sampler.neighbouring == REPLACE_ONE else "dataset_size"
        check_delta_size(delta, getattr(sampler, "public_size", sampler.n), size=what)
    if noise_multiplier is None:
        if epsilon is None:
            raise InvalidPrivacyParameter(
                "give epsilon and delta (the noise is then calibrated) or noise_multiplier, "
                "got neither"
            )
        eps = check_epsilon(epsilon)
        dlt = check_delta(delta, allow_zero=False)
        key = (_run_event(sampler, steps, prior, 1.0), eps, dlt, accountant)
        z = _CALIBRATION_CACHE.get(key)
        pending = _PENDING.pop(key, None) if z is None else None
        if pending is not None:  # started by prefetch_noise: the same computation
            try:
                z = pending.result()
            except Exception:  # recomputed below, where its error is raised
                z = None
        if z is None:
            z = _calibrated(key, sampler, steps, prior)
        if len(_CALIBRATION_CACHE) >= 256:
            _CALIBRATION_CACHE.clear()
        _CALIBRATION_CACHE[key] = z
    else:
        z = check_nonnegative(noise_multiplier, "noise_multiplier")
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            dlt = check_delta(delta, allow_zero=False)
            check_spent(
                _run_event(sampler, steps, prior, z),
                eps,
                dlt,
                accountant,
                what=(
                    f"noise_multiplier={z:g} with steps={steps}, "
                    f"sampling_rate={sampler.sampling_rate:g} ({sampler.name} sampling)"
                ),
            )
    event = _run_event(sampler, steps, prior, z)
    planned(event)  # an active budget waiting for this run's event reserves it now
    spent = None
    if delta is not None:
        spent = epsilon_of(event, check_delta(delta, allow_zero=False), accountant)
    return z, event, spent
