"""Noise calibration: the smallest noise that an accountant certifies.

:func:`calibrate_noise` is the one place where dperm turns a target (ε, δ)
into a noise parameter; every algorithm that takes ``epsilon`` calls it (or
:func:`calibrate_gaussian` for DP-SGD / DP-GD style Gaussian noise).

The search assumes that ε(x) — the ε certified for ``make_event(x)`` at the
target δ — does not increase with the noise parameter x (true for every
noise parameter of :mod:`dperm.accounting.events`).  It never relies on that
assumption for *validity*: the returned x is always one at which the
accountant was evaluated and certified ε(x) ≤ ε.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from .._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_positive,
    check_probability,
)
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from .base import Accountant
from .events import (
    ADD_REMOVE,
    REPLACE_ONE,
    DpEvent,
    Gaussian,
    PoissonSampled,
    SampledWithoutReplacement,
    SelfComposed,
    check_neighbouring,
)
from .pld import GridTooFineError, PldAccountant
from .registry import accountant_factory

__all__ = [
    "SAMPLING_SCHEMES",
    "calibrate_gaussian",
    "calibrate_noise",
    "calibrate_noise_certified",
    "clt_noise_guess",
    "sample_size_from_rate",
]

#: Sampling schemes accepted by :func:`calibrate_gaussian`.
SAMPLING_SCHEMES = ("poisson", "without_replacement")

_MAX_NOISE = 1e8
_MIN_NOISE = 1e-8


def calibrate_noise(
    make_event: Callable[[float], DpEvent],
    epsilon: float,
    delta: float,
    *,
    accountant: str | Accountant | Callable[[], Accountant] = "rdp",
    neighbouring: str | None = None,
    lower: float | None = None,
    upper: float | None = None,
    rtol: float = 1e-4,
) -> float:
    """Smallest noise parameter x such that ``make_event(x)`` is certified (ε, δ)-DP.

    Parameters
    ----------
    make_event : callable float -> DpEvent
        Builds the event spent with noise parameter x (e.g. a noise
        multiplier); more noise must not mean a larger ε.
    epsilon : float
        Target ε > 0, finite.
    delta : float
        Target δ in [0, 1).
    accountant : str, Accountant or callable, default "rdp"
        A name for :func:`~dperm.accounting.get_accountant`, an accountant
        instance (copied, so what it already composed is included — useful to
        calibrate what is left of a budget) or a factory.
    neighbouring : {"replace-one", "add-remove"}, optional
        The relation the target (ε, δ) is for, i.e. of the accountants built
        from a name.  Default: the relation of the events ``make_event``
        builds (an instance or factory keeps its own relation, and
        ``neighbouring`` is then checked against it).  An add/remove event
        calibrated for replace-one is converted soundly (see
        :func:`~dperm.accounting.events.to_replace_one`); a replace-one event
        for add/remove is refused.
    lower : float, optional
        Where the search starts (> 0; default 1, or below ``upper``).  Only a
        starting point: if it already meets the target the search goes on
        below it — a bracket that does not contain the answer is widened,
        never returned.
    upper : float, optional
        The largest noise considered (> 0; default 1e8): if it does not meet
        the target, :class:`InvalidPrivacyParameter` is raised.
    rtol : float, default 1e-4
        How close to the target the returned x is: the accountant certifies
        ``make_event(x)`` at ε(x) ≤ ``epsilon`` and either ε(x) ≥ (1 − rtol)·
        ``epsilon`` (the run spends its budget) or a noise x′ ≥ x/(1 + rtol)
        was evaluated and fails the target.

    Returns
    -------
    float
        x such that the accountant certifies ``make_event(x)`` to be
        (epsilon, delta)-DP (see :func:`calibrate_noise_certified` for the
        certified ε too).

    Raises
    ------
    InvalidPrivacyParameter
        For invalid ε, δ, bounds or rtol, or if no x up to ``upper`` (default
        1e8) meets the target (the message names the target).
    UnsupportedEventError
        If the accountant cannot account the events built.
    """
    return calibrate_noise_certified(
        make_event,
        epsilon,
        delta,
        accountant=accountant,
        neighbouring=neighbouring,
        lower=lower,
        upper=upper,
        rtol=rtol,
    )[0]


def calibrate_noise_certified(
    make_event: Callable[[float], DpEvent],
    epsilon: float,
    delta: float,
    *,
    accountant: str | Accountant | Callable[[], Accountant] = "rdp",
    neighbouring: str | None = None,
    lower: float | None = None,
    upper: float | None = None,
    rtol: float = 1e-4,
    slope: float | None = None,
) -> tuple[float, float]:
    """:func:`calibrate_noise`, returning ``(x, ε(x))``: the noise and the ε the
    accountant certified for ``make_event(x)`` at ``delta`` — the certificate
    of the search's last evaluation, so a caller never has to recompute it.

    ``slope`` (< 0), with ``lower``, is a guess of d log ε / d log x at the start
    (e.g. from :func:`clt_noise_guess`): the first steps are Newton steps instead of
    factors of 4.  A guess only: a wrong one costs evaluations, never validity.

    Notes
    -----
    The search runs on log x against log ε(x): Newton steps with the secant
    slope of the last two evaluations, aimed at ε = (1 − rtol/2)·``epsilon``,
    safeguarded by the bracket (largest failing x, smallest certified x) and
    by bisection when the bracket stops shrinking; before a bracket exists the
    steps are at most a factor 8.  For the PLD accountant (discretisation
    interval h ≤ 10⁻⁴) the same search is first run on a grid 10× coarser,
    whose arrays are 10× shorter (coarser grids are no guide: their error
    grows with the number of compositions), and the exact search starts
    where the coarse answer, extrapolated to the exact grid, points
    (:func:`_coarse_start`): the exact accountant is evaluated only near the
    answer — typically once or twice.
    Only the exact accountant's evaluations certify: the returned x is always
    one at which it certified ε(x) ≤ ``epsilon``.
    """
    eps_target = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=True)
    rtol = check_positive(rtol, "rtol")
    if rtol >= 1.0:
        raise InvalidPrivacyParameter(f"rtol must be < 1, got {rtol!r}")
    if lower is not None:
        lower = check_positive(lower, "lower")
    if upper is not None:
        upper = check_positive(upper, "upper")
    if lower is not None and upper is not None and lower >= upper:
        raise InvalidPrivacyParameter(f"need lower < upper, got lower={lower}, upper={upper}")
    if lower is not None:
        x0 = lower
    elif upper is not None:
        x0 = min(1.0, upper / 2.0)
    else:
        x0 = 1.0
    if neighbouring is None and isinstance(accountant, str):
        probe = make_event(x0)  # the relation of the events to calibrate
        if not isinstance(probe, DpEvent):
            raise InvalidPrivacyParameter(f"make_event must return a DpEvent, got {probe!r}")
        neighbouring = probe.neighbouring
    factory = accountant_factory(accountant, neighbouring=neighbouring)
    limit = upper if upper is not None else _MAX_NOISE

    def epsilon_with(make_acc: Callable[[], Accountant]) -> Callable[[float], float]:
        def eps_at(x: float) -> float:
            try:
                return make_acc().compose(make_event(x)).get_epsilon(delta)
            except GridTooFineError:  # too little noise for the grid: not certified
                return math.inf

        return eps_at

    what = f"the target (epsilon={eps_target:g}, delta={delta:g})"
    if slope is not None and not (math.isfinite(slope) and slope < 0.0):
        slope = None
    coarse = _coarse_factories(factory)
    if coarse is not None:
        x0, slope = _coarse_start(coarse, epsilon_with, eps_target, x0, rtol, limit, what, slope)
    x, eps, _ = _search(epsilon_with(factory), eps_target, x0, rtol, slope, limit, what)
    if not eps <= eps_target:  # pragma: no cover - the search returns certified points only
        raise AssertionError("calibration returned a non-certified noise")
    return x, eps


#: relative tolerance of the coarse search (a starting point for the exact one)
_COARSE_RTOL = 2e-3
#: the coarse grids, as multiples of the accountant's discretisation interval
_COARSE, _MEDIUM = 10.0, 5.0
#: the coarse PLDs get accurate tails too: at a small δ (10⁻¹¹) the FFT's rounding
#: moves ε by ~0.3 %, more than the grid's h² error that the extrapolation models,
#: and the refinement costs little on their short arrays
_COARSE_TILT = True


def _coarse_factories(factory: Callable[[], Accountant]):
    """Factories of PLD accountants on grids 10× and 5× coarser, holding what the
    accountant of ``factory`` already composed — or None (other accountants)."""
    probe = factory()
    if type(probe) is not PldAccountant:
        return None
    out = []
    for factor in (_COARSE, _MEDIUM):
        h, rel = probe.value_discretization_interval * factor, probe.neighbouring
        base = PldAccountant(h, neighbouring=rel)
        base._exact_tails = _COARSE_TILT  # see _COARSE_TILT
        for event in probe.events:
            base.compose(event)
        out.append(base.copy)
    return out


def _coarse_start(coarse, epsilon_with, eps_target, x0, rtol, limit, what, slope=None):
    """(x, slope): where the exact search starts.  A search on the 10× coarser
    grid gives x_c; an evaluation on the 5× coarser grid at x_c extrapolates ε
    to the exact grid (the error of the connect-the-dots PLD shrinks as h²:
    Richardson extrapolation), and a Newton step with the coarse slope aims
    the first exact evaluation at (1 − rtol/2)·ε.  After a long step the
    extrapolation is repeated there and the step corrected with the secant
    slope of the extrapolated curve.  A guess only: the exact search certifies."""
    try:
        x, e_c, slope = _search(
            epsilon_with(coarse[0]), eps_target, x0, _COARSE_RTOL, slope, limit, what
        )
    except InvalidPrivacyParameter:
        return x0, None  # the coarse grid cannot tell: the exact search decides
    if slope is None:
        return x, slope
    aim = math.log1p(-rtol / 2.0)
    ratio = (1.0 - _MEDIUM**-2) / ((_COARSE / _MEDIUM) ** 2 - 1.0)
    previous = None
    for _ in range(3):
        e_m = epsilon_with(coarse[1])(x)
        predicted = e_m - (e_c - e_m) * ratio  # ε_h ≈ ε_m − (ε_c − ε_m)(1 − (h/h_m)²)/3
        if not 0.0 < e_m <= e_c or not predicted > 0.0:
            return x, slope
        t, f = math.log(x), math.log(predicted / eps_target)
        if previous is not None and t != previous[0]:
            s = (f - previous[1]) / (t - previous[0])
            slope = s if s < 0.0 else slope
        x *= math.exp(max(-0.5, min(0.5, (aim - f) / slope)))
        if abs(aim - f) <= 4.0 * rtol:
            break
        previous = (t, f)
        e_c = epsilon_with(coarse[0])(x)
    return x, slope


def _search(
    eps_at: Callable[[float], float],
    eps_target: float,
    x0: float,
    rtol: float,
    slope: float | None,
    limit: float,
    what: str,
) -> tuple[float, float, float | None]:
    """(x, ε(x), slope): a certified x per ``rtol`` (see :func:`calibrate_noise`)
    and the last secant slope of log ε against log x.  Raises
    InvalidPrivacyParameter if x = ``limit`` does not meet the target."""
    log_target = math.log(eps_target)
    aim, accept, close = math.log1p(-rtol / 2.0), math.log1p(-rtol), math.log1p(rtol)
    t_min, t_max = math.log(_MIN_NOISE), math.log(limit)
    lo_t = -math.inf  # largest failing log x
    hi_t, hi_f, hi_eps = math.inf, 0.0, math.inf  # smallest certified log x
    seen: dict[float, float] = {}
    last: tuple[float, float] | None = None
    widths: list[float] = []
    t = min(max(math.log(x0), t_min), t_max)
    for _ in range(200):
        eps = eps_at(math.exp(t))
        if math.isnan(eps) or eps == math.inf:
            f = math.inf
        elif eps <= 0.0:
            f = -math.inf
        else:
            f = math.log(eps) - log_target
        seen[t] = f
        if eps <= eps_target:
            if t < hi_t:
                hi_t, hi_f, hi_eps = t, f, eps
        elif t > lo_t:
            lo_t = t
        # ---- stop: certified and spends the budget, or a bracket of width ≤ rtol
        if hi_t < math.inf and (hi_f >= accept or hi_t - lo_t <= close):
            return math.exp(hi_t), hi_eps, slope
        if lo_t >= t_max:
            raise InvalidPrivacyParameter(
                f"no noise parameter up to {limit:g} meets {what}: epsilon at {limit:g} is {eps:g}"
            )
        if hi_t <= t_min:
            return math.exp(hi_t), hi_eps, slope  # even the smallest noise is certified
        # ---- slope of log ε against log x from the last two finite evaluations
        if last is not None and math.isfinite(f) and math.isfinite(last[1]) and t != last[0]:
            s = (f - last[1]) / (t - last[0])
            if s < 0.0:
                slope = s
        if math.isfinite(f):
            last = (t, f)
        # ---- next point
        if math.isfinite(f) and slope is not None:
            t_new = t + (aim - f) / slope
        else:
            t_new = t + (math.log(4.0) if f > 0 else -math.log(4.0))
        if lo_t > -math.inf and hi_t < math.inf:
            widths.append(hi_t - lo_t)
            stalled = len(widths) > 2 and widths[-1] > 0.5 * widths[-3]
            if stalled or not lo_t < t_new < hi_t or t_new in seen:
                t_new = 0.5 * (lo_t + hi_t)
        else:
            step = t_new - t  # toward the target, at most a factor 8
            if f > 0:
                step = min(max(step, 0.0), math.log(8.0)) or close
            else:
                step = max(min(step, 0.0), -math.log(8.0)) or -close
            t_new = t + step
        t = min(max(t_new, t_min), t_max)
    raise InvalidPrivacyParameter(  # pragma: no cover - the bisection converges first
        "the noise calibration did not converge"
    )


def clt_noise_guess(
    epsilon: float, delta: float, sampling_rate: float, steps: int
) -> tuple[float, float]:
    """(z, slope): a closed-form guess of the noise multiplier of ``steps``
    subsampled Gaussian steps at rate q within (ε, δ), and d log ε / d log z there —
    where a calibration's search starts (:func:`calibrate_noise_certified`).

    The central limit theorem of Bu, Dong, Long & Su (2020, "Deep learning with
    Gaussian differential privacy", Theorem 5; Dong, Roth & Su 2022, Theorem 3.5):
    T Poisson-subsampled Gaussian steps are about μ-GDP with
    μ = q·√(T(e^{1/z²} − 1)) (add/remove at multiplier z; to first order in q also
    the replace-one Poisson pair at z and the fixed-size pair of
    :func:`~dperm.accounting.pld_dense.fixed_size_gaussian_pld`), and μ-GDP is
    (ε, δ)-DP for the Gaussian mechanism of multiplier 1/μ (Balle & Wang 2018).
    A guess only: the accountant certifies.
    """
    from .gaussian import analytic_gaussian_noise_multiplier, gaussian_epsilon

    q, T = float(sampling_rate), int(steps)
    mu = 1.0 / analytic_gaussian_noise_multiplier(epsilon, delta, tol=1e-6)

    def z_of(m: float) -> float:
        return 1.0 / math.sqrt(math.log1p((m / q) ** 2 / T))

    def log_eps(z: float) -> float:
        m = q * math.sqrt(T * math.expm1(min(1.0 / (z * z), 700.0)))
        return math.log(gaussian_epsilon(1.0 / m, delta, tol=1e-9))

    z = z_of(mu)
    try:
        slope = (log_eps(z * 1.01) - log_eps(z / 1.01)) / (2.0 * math.log(1.01))
    except (ValueError, ArithmeticError, InvalidPrivacyParameter):  # pragma: no cover
        slope = math.nan
    return z, slope


def calibrate_gaussian(
    epsilon: float,
    delta: float,
    *,
    steps: int = 1,
    sampling_rate: float = 1.0,
    accountant: str | Accountant | Callable[[], Accountant] = "rdp",
    sampling: str = "poisson",
    population_size: int | None = None,
    rtol: float = 1e-4,
    neighbouring: str | None = None,
) -> float:
    """Noise multiplier σ for ``steps`` (subsampled) Gaussian releases within (ε, δ).

    The event is ``SelfComposed(PoissonSampled(q, Gaussian(σ, rel)), steps)``
    (DP-SGD) or, with ``sampling="without_replacement"``,
    ``SelfComposed(SampledWithoutReplacement(m, n, Gaussian(σ)), steps)``
    with n = ``population_size`` and m = q·n (replace-one neighbours); with
    q = 1 it is ``SelfComposed(Gaussian(σ, rel), steps)`` (DP-GD).  σ is
    relative to the sensitivity under ``rel`` (for a clipped sum with
    per-record bound C: C under add/remove, 2C under replace-one; see
    :class:`~dperm.accounting.events.PoissonSampled`).

    Parameters
    ----------
    epsilon : float
        Target ε > 0.
    delta : float
        Target δ in (0, 1).
    steps : int, default 1
        Number of releases, ≥ 1.
    sampling_rate : float, default 1.0
        q in (0, 1].
    accountant : str, Accountant or callable, default "rdp"
    sampling : {"poisson", "without_replacement"}, default "poisson"
    population_size : int, optional
        Required for ``"without_replacement"``; q·n must be an integer.
    rtol : float, default 1e-4
        Relative tolerance on σ (see :func:`calibrate_noise`).
    neighbouring : {"add-remove", "replace-one"}, optional
        The relation ``rel``.  Default: ``"add-remove"`` for Poisson sampling
        (and q = 1), as before relations were recorded; ``"replace-one"``
        (the only one allowed) for sampling without replacement.  A
        replace-one Poisson run needs an accountant that has its PLD
        (``accountant="pld"`` or ``"auto"``; the RDP accountant refuses it).

    Returns
    -------
    float
        σ (noise standard deviation per unit ℓ2 sensitivity under ``rel``)
        that the accountant certifies.

    Raises
    ------
    InvalidPrivacyParameter
        For out-of-range parameters or an unreachable target.
    UnknownNameError
        For an unknown ``sampling`` or accountant name.
    """
    check_epsilon(epsilon)
    check_delta(delta, allow_zero=False)
    steps = check_count(steps, "steps", minimum=1)
    q = check_probability(sampling_rate, "sampling_rate")
    if sampling not in SAMPLING_SCHEMES:
        raise UnknownNameError(f"sampling must be one of {SAMPLING_SCHEMES}, got {sampling!r}")
    poisson = sampling == "poisson" or (q == 1.0 and population_size is None)
    if neighbouring is not None:
        rel = check_neighbouring(neighbouring)
    else:
        rel = ADD_REMOVE if poisson else REPLACE_ONE
    if not poisson and rel != REPLACE_ONE:
        raise InvalidPrivacyParameter(
            "sampling='without_replacement' is accounted for replace-one neighbours only "
            f"(Wang, Balle, Kasiviswanathan 2019), got neighbouring={neighbouring!r}"
        )
    if poisson:

        def make_event(sigma: float) -> DpEvent:
            g = Gaussian(sigma, neighbouring=rel)
            return SelfComposed(g if q == 1.0 else PoissonSampled(q, g), steps)

    else:
        if population_size is None:
            raise InvalidPrivacyParameter(
                "population_size is required for sampling='without_replacement'"
            )
        n = check_count(population_size, "population_size", minimum=1)
        m = sample_size_from_rate(q, n)

        def make_event(sigma: float) -> DpEvent:
            return SelfComposed(SampledWithoutReplacement(m, n, Gaussian(sigma)), steps)

    # an accountant instance/factory keeps its own relation unless one was asked for
    acc_rel = rel if neighbouring is not None or isinstance(accountant, str) else None
    return calibrate_noise(
        make_event, epsilon, delta, accountant=accountant, neighbouring=acc_rel, rtol=rtol
    )


def sample_size_from_rate(sampling_rate: float, population_size: int) -> int:
    """m = q·n as an integer; raises if q·n is not (within 1e-9) an integer."""
    m_exact = Fraction(sampling_rate) * population_size
    m = round(m_exact)
    if abs(float(m_exact) - m) > 1e-9 * max(1, m) or not 1 <= m <= population_size:
        raise InvalidPrivacyParameter(
            f"sampling_rate * population_size must be an integer sample size in "
            f"[1, population_size], got {sampling_rate!r} * {population_size} = {float(m_exact)}"
        )
    return int(m)
