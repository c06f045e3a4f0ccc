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
from .registry import accountant_factory

__all__ = ["SAMPLING_SCHEMES", "calibrate_gaussian", "calibrate_noise", "sample_size_from_rate"]

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
    lower, upper : float, optional
        Search interval for x (> 0).  The search starts at ``lower`` (default
        1) and moves geometrically (factor 4) down to 1e-8 while the target is
        met, or up to ``upper`` (default 1e8) while it is not.  If ``lower``
        already meets the target it is returned.
    rtol : float, default 1e-4
        The returned x is within a factor (1 + rtol) of the smallest
        certified value (relative width of the final bracket).

    Returns
    -------
    float
        x such that the accountant certifies ``make_event(x)`` to be
        (epsilon, delta)-DP; it is the upper end of the final bracket.

    Raises
    ------
    InvalidPrivacyParameter
        For invalid ε, δ, bounds or rtol, or if no x up to ``upper`` (default
        1e8) meets the target (the message names the target).
    UnsupportedEventError
        If the accountant cannot account the events built.

    Notes
    -----
    Brent's method (``scipy.optimize.brentq``) on log x and log(1 + ε(x)),
    followed by bisection if Brent's iterates did not already pin the root to
    the requested relative width.  Every evaluation updates the bracket
    (largest failing x, smallest certified x).
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
    # --- where the search starts: `lower`, or 1 (below `upper`)
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
    target = f"(epsilon={eps_target:g}, delta={delta:g})"

    cache: dict[float, float] = {}
    bracket = {"lo": 0.0, "hi": math.inf}  # lo fails, hi meets

    def eps_at(x: float) -> float:
        if x not in cache:
            acc = factory()
            acc.compose(make_event(x))
            cache[x] = acc.get_epsilon(delta)
            if cache[x] <= eps_target:
                bracket["hi"] = min(bracket["hi"], x)
            else:
                bracket["lo"] = max(bracket["lo"], x)
        return cache[x]

    def meets(x: float) -> bool:
        return eps_at(x) <= eps_target

    # --- bracket: start at x0, shrink while certified, grow while not
    if meets(x0):
        if lower is not None:
            return x0
        x = x0
        while meets(x):
            if x <= _MIN_NOISE:
                return bracket["hi"]
            x = max(x / 4.0, _MIN_NOISE)
    else:
        limit = upper if upper is not None else _MAX_NOISE
        x = x0
        while not meets(x):
            if x >= limit:
                raise InvalidPrivacyParameter(
                    f"no noise parameter up to {limit:g} meets the target {target}: "
                    f"epsilon at {x:g} is {eps_at(x):g}"
                )
            x = min(x * 4.0, limit)

    # --- Brent on log x, then bisection to the requested width -------------
    log_target = math.log1p(eps_target)

    def g(t: float) -> float:
        e = eps_at(math.exp(t))
        return (math.log1p(e) if math.isfinite(e) else 1e6) - log_target

    lo, hi = bracket["lo"], bracket["hi"]
    if hi / lo > 1.0 + rtol:
        from scipy.optimize import brentq  # lazy: keeps `import dperm.accounting` light

        try:
            brentq(g, math.log(lo), math.log(hi), xtol=rtol / 8.0, rtol=1e-15, maxiter=100)
        except (ValueError, RuntimeError):  # pragma: no cover - bracket is valid
            pass
    # Brent's last iterates straddle the root; pin it with two probes, then bisect
    lo, hi = bracket["lo"], bracket["hi"]
    if hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        for x in (mid * (1.0 + rtol / 2.5), mid / (1.0 + rtol / 2.5)):
            if bracket["lo"] < x < bracket["hi"]:
                eps_at(x)
    while bracket["hi"] / bracket["lo"] > 1.0 + rtol:
        eps_at(math.sqrt(bracket["lo"] * bracket["hi"]))
    x = bracket["hi"]
    assert cache[x] <= eps_target, "calibration returned a non-certified noise"
    return x


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
