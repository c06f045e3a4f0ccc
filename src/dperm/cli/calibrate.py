"""``dperm calibrate``: the smallest noise multiplier making ``steps`` Gaussian releases
(ε, δ)-DP.

Example (shell)::

    dperm calibrate --epsilon 2 --delta 1e-5 --sampling-rate 0.004 --steps 15000
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import typer

from ._common import JSON, REQUIRED, Opt, one_line_errors, with_options
from .account import (
    ACCOUNTANT,
    NEIGHBOURING,
    SAMPLING,
    SAMPLING_RATE,
    STEPS,
    account_command,
    default_accountant,
    render,
)

__all__ = ["calibrate_cmd", "calibrate_command"]


def calibrate_command(
    epsilon: float,
    delta: float = 1e-5,
    sampling_rate: float = 1.0,
    steps: int = 1,
    accountant: str | None = None,
    sampling: str = "poisson",
    population_size: int | None = None,
    neighbouring: str = "replace-one",
) -> dict[str, Any]:
    """Smallest noise multiplier σ such that ``steps`` releases are (ε, δ)-DP.

    Parameters
    ----------
    epsilon : float
        Target ε > 0.
    delta : float, default 1e-5
        Target δ in (0, 1).
    sampling_rate, steps, accountant, sampling, population_size, neighbouring
        As in :func:`account_command` (``population_size`` is required for
        ``"without_replacement"`` with q < 1; ``neighbouring`` defaults to replace-one,
        the relation of every dperm fit).

    Returns
    -------
    dict
        ``accountant``, ``epsilon`` (target), ``delta``, ``sampling_rate``,
        ``steps``, ``sampling``, ``noise_multiplier``, ``achieved_epsilon``
        (ε certified at the returned σ, ≤ target) and ``seconds``.
    """
    from .._validation import check_probability
    from ..accounting import calibrate_gaussian

    accountant = default_accountant(
        accountant, neighbouring, sampling, check_probability(sampling_rate, "sampling_rate")
    )
    t0 = time.perf_counter()
    if sampling == "without_replacement" and population_size is None and sampling_rate != 1.0:
        frac = Fraction(check_probability(sampling_rate, "sampling_rate")).limit_denominator(10**12)
        population_size = frac.denominator
        sampling_rate = frac.numerator / frac.denominator
    # one description of the run: the ε achieved is certified for the run calibrated
    run = {
        "steps": steps,
        "sampling_rate": sampling_rate,
        "accountant": accountant,
        "sampling": sampling,
        "population_size": population_size,
        "neighbouring": neighbouring,
    }
    sigma = calibrate_gaussian(epsilon, delta, **run)
    achieved_run = account_command(sigma, delta=delta, **run)
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


#: the options of ``dperm calibrate``, in the order of ``--help``
_OPTIONS = {
    "epsilon": Opt(float, REQUIRED, "Target ε."),
    "delta": Opt(float, 1e-5, "Target δ."),
    "sampling_rate": SAMPLING_RATE,
    "steps": STEPS,
    "accountant": ACCOUNTANT,
    "sampling": SAMPLING,
    "neighbouring": NEIGHBOURING,
    "json_output": JSON,
}


@with_options(_OPTIONS)
def calibrate_cmd(**options: Any) -> None:
    """Smallest noise multiplier making `steps` Gaussian releases (ε, δ)-DP."""
    json_output = options.pop("json_output")
    with one_line_errors():
        result = calibrate_command(**options)
    typer.echo(render(result, json_output=json_output))
