"""The privacy profile δ(ε) and the privacy-loss distribution of any dperm event.

For a mechanism M and neighbouring datasets D, D′, the privacy-loss random
variable is L = ln(p_{M(D)}(o) / p_{M(D′)}(o)) with o ~ M(D); its law (over the
worst-case pair, or a dominating pair) is the privacy-loss distribution (PLD),
and the privacy profile is

    δ(ε) = E[(1 − e^{ε − L})₊] + P(L = ∞),

the smallest δ for which M is (ε, δ)-DP (Balle & Wang, ICML 2018, Theorem 5;
Koskela, Jälkö & Honkela 2020; the lecture on the privacy-loss random variable
presents the same identity).  Both are computed from the PLD that
:class:`dperm.accounting.PldAccountant` builds (:mod:`dperm.accounting.pld_dense`)
(pessimistic discretization, so δ(ε) here is an upper bound up to
floating-point error); the neighbouring relation is the event's own.

For a Gaussian with noise multiplier σ (μ = 1/σ) the PLD is N(μ²/2, μ²) and
δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Theorem 8) —
the closed forms the tests compare with.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validation import check_positive
from .accounting.events import DpEvent
from .accounting.pld import PldAccountant
from .exceptions import InvalidPrivacyParameter, UnsupportedEventError

__all__ = ["plot_privacy_profile", "privacy_loss_distribution", "privacy_profile"]


def _accountant(event: DpEvent, value_discretization_interval: float) -> PldAccountant:
    if not isinstance(event, DpEvent):
        raise UnsupportedEventError(f"event must be a DpEvent, got {type(event).__name__}")
    vdi = check_positive(value_discretization_interval, "value_discretization_interval")
    acc = PldAccountant(value_discretization_interval=vdi, neighbouring=event.neighbouring)
    acc.compose(event)
    return acc


def privacy_profile(
    event: DpEvent, epsilons, *, value_discretization_interval: float = 1e-3
) -> np.ndarray:
    """δ(ε) of ``event`` at each ε in ``epsilons`` (PLD accountant), shape (k,).

    Raises
    ------
    UnsupportedEventError
        An event the PLD accountant cannot represent (e.g.
        ``SampledWithoutReplacement``).
    InvalidPrivacyParameter
        Negative or non-finite ε.
    """
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    if eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise InvalidPrivacyParameter(f"epsilons must be finite and ≥ 0, got {epsilons!r}")
    acc = _accountant(event, value_discretization_interval)
    return np.array([acc.get_delta(float(e)) for e in eps])


def privacy_loss_distribution(
    event: DpEvent, *, value_discretization_interval: float = 1e-3
) -> dict[str, Any]:
    """The (discretized, pessimistic) PLD of ``event``.

    Returns
    -------
    dict
        ``losses`` (ndarray, the loss values, spacing
        ``value_discretization_interval``), ``probs`` (their probabilities),
        ``infinity_mass`` (P(L = ∞)), ``neighbouring``, ``symmetric`` (whether
        the add and remove directions share this PMF; otherwise it is the
        "remove" direction of dp-accounting).  A cost-free event gives
        ``losses = [0]``, ``probs = [1]``.
    """
    acc = _accountant(event, value_discretization_interval)
    if acc._non_private:  # the accountant's own flag: ε = ∞ with probability 1
        return {
            "losses": np.array([]),
            "probs": np.array([]),
            "infinity_mass": 1.0,
            "neighbouring": event.neighbouring,
            "symmetric": True,
        }
    pld = acc._pld  # the accountant's dperm.accounting.pld_dense.Pld
    probs, losses = pld.remove.probs, pld.remove.losses
    keep = probs > 0
    return {
        "losses": losses[keep],
        "probs": probs[keep],
        "infinity_mass": float(pld.remove.inf_mass),
        "neighbouring": event.neighbouring,
        "symmetric": pld.add is None,
    }


def plot_privacy_profile(
    event: DpEvent,
    path,
    *,
    delta: float | None = None,
    epsilon_max: float | None = None,
    value_discretization_interval: float = 1e-3,
) -> str:
    """Write a PNG with δ(ε) (left, log scale) and the PLD (right) of ``event``.

    Parameters
    ----------
    event : DpEvent
    path : str or path-like
        Output file (PNG).
    delta : float, optional
        Marks the ε of this δ on the profile.
    epsilon_max : float, optional
        Right end of the ε axis (default: a little beyond where δ(ε) < 10⁻¹²
        or the largest finite loss).

    Returns
    -------
    str
        The path written.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    pld = privacy_loss_distribution(
        event, value_discretization_interval=value_discretization_interval
    )
    acc = _accountant(event, value_discretization_interval)
    if epsilon_max is None:
        top = float(pld["losses"].max()) if pld["losses"].size else 1.0
        eps_star = acc.get_epsilon(1e-12) if pld["infinity_mass"] < 1e-12 else top
        epsilon_max = max(1e-3, min(top, eps_star if math.isfinite(eps_star) else top)) * 1.1
    epsilon_max = check_positive(epsilon_max, "epsilon_max")
    grid = np.linspace(0.0, epsilon_max, 200)
    deltas = np.array([acc.get_delta(float(e)) for e in grid])

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.semilogy(grid, np.maximum(deltas, 1e-300))
    ax1.set_xlabel("ε")
    ax1.set_ylabel("δ(ε)")
    ax1.set_title(f"privacy profile ({event.neighbouring})")
    ax1.set_ylim(
        bottom=max(1e-15, float(np.min(deltas[deltas > 0])) if np.any(deltas > 0) else 1e-15)
    )
    if delta is not None:
        e_at = acc.get_epsilon(float(delta))
        ax1.axhline(delta, color="grey", lw=0.8, ls="--")
        if math.isfinite(e_at):
            ax1.axvline(e_at, color="grey", lw=0.8, ls="--")
            ax1.annotate(f"ε={e_at:.3g} at δ={delta:g}", (e_at, delta), fontsize=8)
    if pld["losses"].size:
        shown = pld["probs"] >= 1e-6 * pld["probs"].max()  # hide negligible tails
        ax2.plot(pld["losses"][shown], pld["probs"][shown], drawstyle="steps-mid")
    ax2.set_xlabel("privacy loss L")
    ax2.set_ylabel("P(L)")
    ax2.set_title(f"privacy-loss distribution (P(L=∞)={pld['infinity_mass']:.2g})")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return str(path)
