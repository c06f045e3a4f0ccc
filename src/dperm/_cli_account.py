"""Back ends of the ``dperm account`` and ``dperm calibrate`` commands.

The typer wiring lives in :mod:`dperm.cli`; these functions do the work and
return plain, JSON-serializable dictionaries (``render`` formats them).

Examples (shell)::

    dperm account --noise-multiplier 1.1 --sampling-rate 0.004 --steps 15000 \\
        --delta 1e-5 --accountant rdp --json
    dperm account --noise-multiplier 1.1 --sampling-rate 0.004 --steps 15000 \\
        --delta 1e-5 --accountant pld --json
    dperm calibrate --epsilon 2 --delta 1e-5 --sampling-rate 0.004 --steps 15000
"""

from __future__ import annotations

import json
import math
import time
from fractions import Fraction
from typing import Any

from ._validation import check_count, check_delta, check_nonnegative, check_probability
from .accounting import (
    Gaussian,
    PoissonSampled,
    RdpAccountant,
    SampledWithoutReplacement,
    SelfComposed,
    calibrate_gaussian,
    get_accountant,
)
from .accounting.calibrate import SAMPLING_SCHEMES
from .accounting.events import ADD_REMOVE, REPLACE_ONE, DpEvent
from .exceptions import UnknownNameError

__all__ = ["account_command", "calibrate_command", "render"]


def _step_event(
    noise_multiplier: float, sampling_rate: float, sampling: str, population_size: int | None
) -> DpEvent:
    # Poisson: add/remove-one (DP-SGD's classical analysis); without replacement: replace-one
    gauss = Gaussian(
        noise_multiplier, neighbouring=ADD_REMOVE if sampling == "poisson" else REPLACE_ONE
    )
    if sampling_rate == 1.0:
        return gauss
    if sampling == "poisson":
        return PoissonSampled(sampling_rate, gauss)
    if population_size is None:
        # the WBK19 bound depends only on m/n: represent q exactly as a fraction
        frac = Fraction(sampling_rate).limit_denominator(10**12)
        m, n = frac.numerator, frac.denominator
    else:
        n = check_count(population_size, "population_size", minimum=1)
        from .accounting.calibrate import sample_size_from_rate

        m = sample_size_from_rate(sampling_rate, n)
    return SampledWithoutReplacement(m, n, gauss)


def account_command(
    noise_multiplier: float,
    sampling_rate: float = 1.0,
    steps: int = 1,
    delta: float = 1e-5,
    accountant: str = "rdp",
    sampling: str = "poisson",
    json_output: bool = False,
    population_size: int | None = None,
    plot: str | None = None,
) -> dict[str, Any]:
    """ε spent by ``steps`` (subsampled) Gaussian releases.

    Parameters
    ----------
    noise_multiplier : float
        σ ≥ 0 per unit ℓ2 sensitivity.
    sampling_rate : float, default 1.0
        q in (0, 1].
    steps : int, default 1
        ≥ 1.
    delta : float, default 1e-5
        In [0, 1).
    accountant : str, default "rdp"
        Any name of :func:`dperm.accounting.get_accountant` (only "rdp" and
        "pld" support Gaussian events).
    sampling : {"poisson", "without_replacement"}, default "poisson"
    json_output : bool, default False
        Accepted for the CLI flag; the returned dict is the same (see
        :func:`render`).
    population_size : int, optional
        For ``"without_replacement"``: n, with q·n an integer.  When omitted,
        q is used as the exact fraction m/n (the bound depends on m/n only).
    plot : str, optional
        Write the privacy profile δ(ε) and the privacy-loss distribution of the
        composed event to this PNG file (:func:`dperm.privacy_profile.plot_privacy_profile`,
        PLD accountant); the path is returned as ``plot``.

    Returns
    -------
    dict
        ``accountant``, ``neighbouring`` (the relation ε is for: add/remove for
        Poisson sampling, replace-one without replacement), ``noise_multiplier``,
        ``sampling_rate``, ``steps``, ``delta``, ``sampling``, ``epsilon``,
        ``seconds``, and for "rdp" the optimal ``order``.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    q = check_probability(sampling_rate, "sampling_rate")
    steps = check_count(steps, "steps", minimum=1)
    delta = check_delta(delta)
    if sampling not in SAMPLING_SCHEMES:
        raise UnknownNameError(f"sampling must be one of {SAMPLING_SCHEMES}, got {sampling!r}")
    t0 = time.perf_counter()
    event = SelfComposed(_step_event(sigma, q, sampling, population_size), steps)
    acc = get_accountant(accountant, neighbouring=event.neighbouring)
    acc.compose(event)
    out: dict[str, Any] = {
        "accountant": acc.name,
        "neighbouring": acc.neighbouring,
        "noise_multiplier": sigma,
        "sampling_rate": q,
        "steps": steps,
        "delta": delta,
        "sampling": sampling,
    }
    if isinstance(acc, RdpAccountant):
        eps, order = acc.get_epsilon_and_order(delta)
        out["epsilon"] = eps
        out["order"] = order if math.isfinite(order) else None
    else:
        out["epsilon"] = acc.get_epsilon(delta)
    out["seconds"] = time.perf_counter() - t0
    if plot is not None:
        from .privacy_profile import plot_privacy_profile

        out["plot"] = plot_privacy_profile(event, plot, delta=delta)
    return out


def calibrate_command(
    epsilon: float,
    delta: float = 1e-5,
    sampling_rate: float = 1.0,
    steps: int = 1,
    accountant: str = "rdp",
    sampling: str = "poisson",
    population_size: int | None = None,
) -> dict[str, Any]:
    """Smallest noise multiplier σ such that ``steps`` releases are (ε, δ)-DP.

    Parameters
    ----------
    epsilon : float
        Target ε > 0.
    delta : float, default 1e-5
        Target δ in (0, 1).
    sampling_rate, steps, accountant, sampling, population_size
        As in :func:`account_command` (``population_size`` is required for
        ``"without_replacement"`` with q < 1).

    Returns
    -------
    dict
        ``accountant``, ``epsilon`` (target), ``delta``, ``sampling_rate``,
        ``steps``, ``sampling``, ``noise_multiplier``, ``achieved_epsilon``
        (ε certified at the returned σ, ≤ target) and ``seconds``.
    """
    t0 = time.perf_counter()
    if sampling == "without_replacement" and population_size is None and sampling_rate != 1.0:
        frac = Fraction(check_probability(sampling_rate, "sampling_rate")).limit_denominator(10**12)
        population_size = frac.denominator
        sampling_rate = frac.numerator / frac.denominator
    sigma = calibrate_gaussian(
        epsilon,
        delta,
        steps=steps,
        sampling_rate=sampling_rate,
        accountant=accountant,
        sampling=sampling,
        population_size=population_size,
    )
    achieved_run = account_command(
        sigma,
        sampling_rate=sampling_rate,
        steps=steps,
        delta=delta,
        accountant=accountant,
        sampling=sampling,
        population_size=population_size,
    )
    achieved = achieved_run["epsilon"]
    return {
        "accountant": accountant,
        "neighbouring": achieved_run["neighbouring"],
        "epsilon": float(epsilon),
        "delta": float(delta),
        "sampling_rate": float(sampling_rate),
        "steps": int(steps),
        "sampling": sampling,
        "noise_multiplier": sigma,
        "achieved_epsilon": achieved,
        "seconds": time.perf_counter() - t0,
    }


def render(result: dict[str, Any], json_output: bool = False) -> str:
    """Format a result of :func:`account_command` / :func:`calibrate_command`.

    JSON output writes ∞ as the string ``"inf"`` (strict JSON has no infinity).
    """
    if json_output:
        clean = {
            k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in result.items()
        }
        return json.dumps(clean, sort_keys=True)
    width = max(len(k) for k in result)
    lines = []
    for k, v in result.items():
        shown = f"{v:.6g}" if isinstance(v, float) else str(v)
        lines.append(f"{k:<{width}}  {shown}")
    return "\n".join(lines)
