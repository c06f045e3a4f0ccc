"""``dperm account``: ε spent by ``steps`` (subsampled) Gaussian releases.

:func:`account_command` does the work and returns a plain, JSON-serializable dictionary;
:func:`render` formats it (also for ``dperm calibrate``, :mod:`dperm.cli.calibrate`).

Examples (shell)::

    dperm account --noise-multiplier 1.1 --sampling-rate 0.004 --steps 15000 \\
        --delta 1e-5 --accountant rdp --json
    dperm account --noise-multiplier 1.1 --sampling-rate 0.004 --steps 15000 \\
        --delta 1e-5 --accountant pld --json
"""

from __future__ import annotations

import json
import math
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import typer

from ..exceptions import UnknownNameError
from ._common import JSON, REQUIRED, Opt, one_line_errors, with_options

if TYPE_CHECKING:
    from ..accounting.events import DpEvent

__all__ = ["account_cmd", "account_command", "default_accountant", "render"]

# the releases that dperm account and dperm calibrate describe
SAMPLING_RATE = Opt(float, 1.0, "q in (0, 1].")
STEPS = Opt(int, 1, "Number of releases.")
ACCOUNTANT = Opt(
    str | None,
    None,
    "rdp | pld | … (default: pld for a replace-one Poisson-subsampled Gaussian, which RDP "
    "cannot account exactly; rdp otherwise).",
)


def default_accountant(
    accountant: str | None, neighbouring: str, sampling: str, sampling_rate: float
) -> str:
    """``accountant``, or the default: "pld" for a replace-one subsampled Gaussian
    (Poisson: no exact RDP exists for it; fixed-size batches: the PLD of
    :func:`dperm.accounting.pld_dense.fixed_size_gaussian_pld` is tighter than RDP),
    "rdp" otherwise."""
    if accountant is not None:
        return accountant
    return "pld" if (neighbouring == "replace-one" and sampling_rate < 1.0) else "rdp"


SAMPLING = Opt(str, "poisson", "poisson | without_replacement")
NEIGHBOURING = Opt(
    str,
    "replace-one",
    "replace-one (what dperm's estimators and dperm fit guarantee) | add-remove "
    "(DP-SGD's classical analysis); the output says which.",
)


def _step_event(
    noise_multiplier: float,
    sampling_rate: float,
    sampling: str,
    population_size: int | None,
    neighbouring: str = "replace-one",
) -> DpEvent:
    from .._validation import check_count
    from ..accounting import Gaussian, PoissonSampled, SampledWithoutReplacement
    from ..accounting.events import REPLACE_ONE, check_neighbouring

    relation = check_neighbouring(neighbouring)
    if sampling != "poisson" and relation != REPLACE_ONE:
        raise UnknownNameError(
            "--sampling without_replacement is accounted under replace-one only (Wang, Balle, "
            f"Kasiviswanathan 2019), got --neighbouring {neighbouring}"
        )
    gauss = Gaussian(noise_multiplier, neighbouring=relation)
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
        from ..accounting.calibrate import sample_size_from_rate

        m = sample_size_from_rate(sampling_rate, n)
    return SampledWithoutReplacement(m, n, gauss)


def account_command(
    noise_multiplier: float,
    sampling_rate: float = 1.0,
    steps: int = 1,
    delta: float = 1e-5,
    accountant: str | None = None,
    sampling: str = "poisson",
    json_output: bool = False,
    population_size: int | None = None,
    plot: str | None = None,
    neighbouring: str = "replace-one",
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
    accountant : str, optional
        Any name of :func:`dperm.accounting.get_accountant` (only "rdp" and
        "pld" support Gaussian events); default :func:`default_accountant`.
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
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
        The relation ε is stated for — replace-one by default, the relation every dperm
        estimator (and ``dperm fit``) guarantees; "add-remove" is DP-SGD's classical
        analysis (Abadi et al. 2016).  σ is relative to the step's ℓ2 sensitivity under
        that relation (a sum clipped to C: C under add/remove, 2C under replace-one).

    Returns
    -------
    dict
        ``accountant``, ``neighbouring`` (the relation ε is for), ``noise_multiplier``,
        ``sampling_rate``, ``steps``, ``delta``, ``sampling``, ``epsilon``,
        ``seconds``, and for "rdp" the optimal ``order``.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    from .._validation import check_count, check_delta, check_nonnegative, check_probability
    from ..accounting import RdpAccountant, SelfComposed, get_accountant
    from ..accounting.calibrate import SAMPLING_SCHEMES

    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    q = check_probability(sampling_rate, "sampling_rate")
    steps = check_count(steps, "steps", minimum=1)
    delta = check_delta(delta)
    if sampling not in SAMPLING_SCHEMES:
        raise UnknownNameError(f"sampling must be one of {SAMPLING_SCHEMES}, got {sampling!r}")
    accountant = default_accountant(accountant, neighbouring, sampling, q)
    t0 = time.perf_counter()
    event = SelfComposed(_step_event(sigma, q, sampling, population_size, neighbouring), steps)
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
        from ..privacy_profile import plot_privacy_profile

        out["plot"] = plot_privacy_profile(event, plot, delta=delta)
    return out


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


#: the options of ``dperm account``, in the order of ``--help``
_OPTIONS = {
    "noise_multiplier": Opt(
        float,
        REQUIRED,
        "σ per unit ℓ2 sensitivity Δ₂ of a step (a sum clipped to C: Δ₂ = 2C under "
        "replace-one, C under add-remove).",
    ),
    "sampling_rate": SAMPLING_RATE,
    "steps": STEPS,
    "delta": Opt(float, 1e-5, "δ."),
    "accountant": ACCOUNTANT,
    "sampling": SAMPLING,
    "neighbouring": NEIGHBOURING,
    "json_output": JSON,
    "plot": Opt(str | None, None, "Write the privacy profile δ(ε) and the PLD to this PNG."),
}


@with_options(_OPTIONS)
def account_cmd(**options: Any) -> None:
    """ε spent by `steps` (subsampled) Gaussian releases."""
    with one_line_errors():
        result = account_command(**options)
    typer.echo(render(result, json_output=options["json_output"]))
