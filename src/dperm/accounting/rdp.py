"""Rényi differential privacy (RDP) accounting, a.k.a. the moments accountant.

An (α, ρ)-RDP mechanism has Rényi divergence of order α at most ρ between
its output distributions on any pair of neighbouring datasets (Mironov 2017,
"Rényi Differential Privacy", Definition 4).  RDP composes additively at every
order (Mironov 2017, Proposition 1), so the accountant keeps one number per
order on a fixed grid and converts to (ε, δ)-DP only when asked (Abadi et al.
2016, "Deep Learning with Differential Privacy", the moments accountant).

Per-event RDP (one ``functools.singledispatch`` rule per event type in
:func:`rdp_of`):

* ``Gaussian(σ)``: α/(2σ²) (Mironov 2017, Proposition 7).
* ``Laplace(b)``: Mironov 2017, Proposition 6 (closed form).
* ``PureEpsilon(ε)`` / ``EpsilonDelta(ε, 0)``: the sharp bound for ε-DP,
  ε − log((1 + e^{−ε})/(1 + e^{−(2α−1)ε}))/(α − 1) (Steinke 2024,
  "Sharp RDP & zCDP from pure DP", differentialprivacy.org, Theorem 4; it is
  the RDP of randomized response and below both ε (Mironov 2017,
  Proposition 3) and αε²/2 (Bun & Steinke 2016, Proposition 3.3)).
* ``PoissonSampled(q, Gaussian(σ))``: the exact RDP of the sampled Gaussian
  mechanism, D_α(μ₁‖μ₀) with μ₀ = N(0, σ²), μ₁ = (1−q)N(0, σ²) + qN(1, σ²)
  (Mironov, Talwar & Zhang 2019, "Rényi Differential Privacy of the Sampled
  Gaussian Mechanism", Section 3): for integer α the finite binomial sum of
  their Section 3.2, for fractional α the two series of their Section 3.3
  summed *with their signs* (see :func:`rdp_poisson_subsampled_gaussian`).
  The neighbouring relation is add/remove-one: a *replace-one*
  ``PoissonSampled`` event with 0 < q < 1 is refused, because that pair of
  mixtures, (1−q)N(0, ·) + qN(±1, ·), has no exact RDP formula here (use the
  ``"pld"`` accountant, which has its exact PLD, or sampling without
  replacement, whose WBK bound is replace-one).
* ``SampledWithoutReplacement(m, n, Gaussian(σ))``: the upper bound of Wang,
  Balle & Kasiviswanathan 2019 ("Subsampled Rényi Differential Privacy and
  Analytical Moments Accountant"), Theorem 27 (their Gaussian form of
  Theorem 9), at integer orders; fractional orders interpolate the cumulant
  generating function (α−1)ρ(α) linearly between neighbouring integers,
  which is an upper bound because that function is convex (van Erven &
  Harremoës 2014, Corollary 2; this is WBK19's Corollary 10 interpolation).
  Replace-one neighbouring relation.
* ``PoissonSampled``/``SampledWithoutReplacement`` of a ``PureEpsilon`` (or
  ``EpsilonDelta`` with δ = 0): the amplified ε′ of Lecture 15, Lemma 15.4
  (:func:`dperm.accounting.amplification.amplified_event`), then as above.
* ``SelfComposed``: count × RDP; ``Composed``: sum; ``NoOp``: 0;
  ``NonPrivate``: ∞.
* Subsampling of a ``Composed``/``SelfComposed`` of Gaussians is the
  subsampling of one Gaussian with σ_eff = (Σσᵢ⁻²)^{−1/2} (McMahan, Andrew,
  Erlingsson et al. 2018, "A General Approach to Adding Differential Privacy
  to Iterative Training Procedures", Section 3).

Conversions to (ε, δ)-DP (``conversion=``):

* ``"classic"``: ε = min_α ρ(α) + log(1/δ)/(α − 1) (Mironov 2017, Proposition 3);
  δ = min_α exp((α − 1)(ρ(α) − ε)).
* ``"improved"`` (default): ε = min_α ρ(α) + log((α−1)/α) − (log δ + log α)/(α − 1)
  (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential
  Privacy", Proposition 12; Balle, Barthe, Gaboardi, Hsu & Sato 2020,
  "Hypothesis Testing Interpretations and Rényi Differential Privacy",
  Theorem 21); δ = min_α exp((α−1)(ρ(α) − ε)) (1 − 1/α)^{α−1} / α.  In
  addition, δ ≥ √(1 − e^{−ρ(α)}) certifies ε = 0, because the total variation
  distance (the δ at ε = 0) is at most √(1 − e^{−KL}) (Bretagnolle & Huber
  1979) and KL ≤ D_α (van Erven & Harremoës 2014, Theorem 3).

Results are clamped to ε ≥ 0; an order whose RDP is ∞ or could not be
computed is ignored (ε = ∞ when all are).

The closed forms and the grid of orders live in
:mod:`dperm.accounting.rdp_closed_forms`, the subsampled Gaussians in
:mod:`dperm.accounting.rdp_sampled`; every name is importable from here.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .._validation import check_delta, check_nonnegative
from ..exceptions import UnknownNameError, UnsupportedEventError
from . import events as ev
from .amplification import amplified_event
from .base import Accountant, register_structural_rules
from .rdp_closed_forms import (
    DEFAULT_ORDERS,
    _check_orders,
    _readonly,
    rdp_gaussian,
    rdp_laplace,
    rdp_pure_epsilon,
)
from .rdp_sampled import (
    _sgm_rdp_cached,  # noqa: F401  (its cache is cleared by benchmarks/bench_accounting.py)
    _wor_rdp_cached,  # noqa: F401  (idem)
    rdp_poisson_subsampled_gaussian,
    rdp_sampled_without_replacement_gaussian,
)

__all__ = [
    "DEFAULT_ORDERS",
    "RdpAccountant",
    "compute_rdp",
    "effective_noise_multiplier",
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_of",
    "rdp_poisson_subsampled_gaussian",
    "rdp_pure_epsilon",
    "rdp_sampled_without_replacement_gaussian",
    "rdp_to_delta",
    "rdp_to_epsilon",
]


_CONVERSIONS = ("improved", "classic")


# ------------------------------------------------------------ event dispatch
@functools.singledispatch
def effective_noise_multiplier(event: ev.DpEvent) -> float | None:
    """σ of the single Gaussian mechanism equivalent to ``event``.

    A composition of Gaussian mechanisms with noise multipliers σᵢ on the same
    data is a Gaussian mechanism with σ_eff = (Σσᵢ⁻²)^{−1/2} (McMahan, Andrew,
    Erlingsson et al. 2018, Section 3; Dong, Roth & Su 2019, Corollary 3.3 for
    adaptive composition).

    Returns
    -------
    float or None
        σ_eff ≥ 0, ``math.inf`` for an event that costs nothing (``NoOp``,
        zero repetitions), ``None`` if ``event`` is not made of Gaussians only.
    """
    return None


@effective_noise_multiplier.register
def _(event: ev.Gaussian) -> float | None:
    return event.noise_multiplier


@effective_noise_multiplier.register
def _(event: ev.NoOp) -> float | None:
    return math.inf


@effective_noise_multiplier.register
def _(event: ev.SelfComposed) -> float | None:
    s = effective_noise_multiplier(event.event)
    if s is None:
        return None
    if event.count == 0 or math.isinf(s):
        return math.inf
    return s / math.sqrt(event.count)


@effective_noise_multiplier.register
def _(event: ev.Composed) -> float | None:
    inv = 0.0
    for e in event.events:
        s = effective_noise_multiplier(e)
        if s is None:
            return None
        if s == 0.0:
            inv = math.inf
        elif math.isfinite(s):
            inv += s**-2
    if inv == 0.0:
        return math.inf
    return 0.0 if math.isinf(inv) else inv**-0.5


@functools.singledispatch
def rdp_of(event: ev.DpEvent, orders: np.ndarray) -> np.ndarray:
    """RDP of ``event`` at ``orders`` (one rule per event type).

    Parameters
    ----------
    event : DpEvent
    orders : ndarray of float > 1 (validated)

    Returns
    -------
    ndarray of shape (n_orders,), values in [0, ∞]

    Raises
    ------
    UnsupportedEventError
        For events without an RDP rule (``EpsilonDelta`` with δ > 0, subsampled
        non-Gaussian events, unknown event types).
    """
    raise UnsupportedEventError(
        f"the RDP accountant cannot account {type(event).__name__} events: {event!r}"
    )


# NoOp, NonPrivate, SelfComposed, Composed: the rules every accountant shares (base.py)
register_structural_rules(
    rdp_of,
    zero=lambda orders: np.zeros(orders.shape),
    non_private=lambda orders: np.full(orders.shape, np.inf),
    repeat=lambda rdp, k: k * rdp,
    add=lambda total, rdp: total + rdp,
)


@rdp_of.register
def _(event: ev.Gaussian, orders: np.ndarray) -> np.ndarray:
    return rdp_gaussian(event.noise_multiplier, orders)


@rdp_of.register
def _(event: ev.Laplace, orders: np.ndarray) -> np.ndarray:
    return rdp_laplace(event.noise_multiplier, orders)


@rdp_of.register
def _(event: ev.PureEpsilon, orders: np.ndarray) -> np.ndarray:
    return rdp_pure_epsilon(event.epsilon, orders)


@rdp_of.register
def _(event: ev.EpsilonDelta, orders: np.ndarray) -> np.ndarray:
    if event.delta == 0.0:
        return rdp_pure_epsilon(event.epsilon, orders)
    raise UnsupportedEventError(
        f"an (ε, δ)-DP event with δ > 0 has no RDP guarantee: {event!r}; use the "
        "'basic' or 'advanced' accountant"
    )


def _subsampled_sigma(event: ev.PoissonSampled | ev.SampledWithoutReplacement) -> float:
    sigma = effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(
            f"the RDP accountant supports subsampling of Gaussian events only (or of "
            f"Composed/SelfComposed Gaussians), got {event!r}"
        )
    return sigma


@rdp_of.register
def _(event: ev.PoissonSampled, orders: np.ndarray) -> np.ndarray:
    generic = amplified_event(event)  # Lecture 15, Lemma 15.4 (dperm.accounting.amplification)
    if generic is not None:
        return rdp_of(generic, orders)
    sigma = _subsampled_sigma(event)
    if math.isinf(sigma) or event.sampling_rate == 0.0:
        return np.zeros(orders.shape)
    if event.sampling_rate == 1.0:  # no sampling: the Gaussian itself (either relation)
        return rdp_gaussian(sigma, orders)
    if sigma == 0.0:  # no noise: ∞ is a valid bound under either relation
        return np.full(orders.shape, np.inf)
    if event.neighbouring == ev.REPLACE_ONE:
        raise UnsupportedEventError(
            f"the RDP accountant has no exact RDP for a replace-one Poisson-subsampled "
            f"Gaussian ({event!r}): use the 'pld' accountant (exact replace-one PLD) or "
            "sampling without replacement (SampledWithoutReplacement, WBK 2019)"
        )
    return rdp_poisson_subsampled_gaussian(event.sampling_rate, sigma, orders)


@rdp_of.register
def _(event: ev.SampledWithoutReplacement, orders: np.ndarray) -> np.ndarray:
    generic = amplified_event(event)  # Lecture 15, Lemma 15.4
    if generic is not None:
        return rdp_of(generic, orders)
    sigma = _subsampled_sigma(event)
    if math.isinf(sigma) or event.sample_size == 0:
        return np.zeros(orders.shape)
    gamma = event.sample_size / event.population_size
    return rdp_sampled_without_replacement_gaussian(gamma, sigma, orders)


def compute_rdp(event: ev.DpEvent, orders=None) -> np.ndarray:
    """RDP of ``event`` at ``orders`` (default :data:`DEFAULT_ORDERS`).

    Parameters
    ----------
    event : DpEvent
    orders : array-like of float > 1, optional

    Returns
    -------
    ndarray of shape (n_orders,), sorted by order

    Raises
    ------
    UnsupportedEventError
    InvalidPrivacyParameter
        If an order is ≤ 1, NaN or infinite.
    """
    a = _check_orders(orders)
    with np.errstate(over="ignore"):
        out = np.asarray(rdp_of(event, a), dtype=np.float64)
    return np.where(np.isnan(out), np.inf, out)


# --------------------------------------------------------------- conversions
def _check_conversion(conversion: str) -> None:
    if conversion not in _CONVERSIONS:
        raise UnknownNameError(f"conversion must be one of {_CONVERSIONS}, got {conversion!r}")


def _curve(orders, rdp) -> tuple[np.ndarray, np.ndarray]:
    """(orders, RDP) as float arrays, an RDP that is NaN read as ∞ and clamped to ≥ 0."""
    a = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    return a, np.where(np.isnan(r), np.inf, np.maximum(r, 0.0))


def rdp_to_epsilon(orders, rdp, delta: float, conversion: str = "improved") -> tuple[float, float]:
    """Convert RDP curve to (ε, δ)-DP: the smallest ε over the orders.

    ``"classic"``: ε = ρ(α) + log(1/δ)/(α − 1) (Mironov 2017, Proposition 3).
    ``"improved"``: ε = ρ(α) + log((α − 1)/α) − (log δ + log α)/(α − 1)
    (Canonne, Kamath & Steinke 2020, Proposition 12; Balle et al. 2020,
    Theorem 21), and ε = 0 when δ ≥ √(1 − e^{−ρ(α)}) (Bretagnolle–Huber).

    Parameters
    ----------
    orders, rdp : array-like of the same length
    delta : float
        δ in [0, 1); δ = 0 gives ε = 0 if all ρ are 0, else ∞.
    conversion : {"improved", "classic"}

    Returns
    -------
    (epsilon, order) : (float, float)
        ε ≥ 0 (∞ if no order certifies a finite ε; order is then NaN).
    """
    _check_conversion(conversion)
    delta = check_delta(delta, "delta", allow_zero=True)
    a, r = _curve(orders, rdp)
    if delta == 0.0:
        return (0.0, float(a[0])) if np.all(r == 0.0) else (math.inf, math.nan)
    log_delta = math.log(delta)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if conversion == "classic":
            eps = r - log_delta / (a - 1.0)
        else:
            eps = r + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)
            tv_ok = np.isfinite(r) & (delta * delta >= -np.expm1(-r))
            eps = np.where(tv_ok, 0.0, eps)
    eps = np.where(np.isnan(eps), np.inf, eps)
    idx = int(np.argmin(eps))
    best = float(eps[idx])
    if math.isinf(best):
        return math.inf, math.nan
    return max(0.0, best), float(a[idx])


def rdp_to_delta(orders, rdp, epsilon: float, conversion: str = "improved") -> tuple[float, float]:
    """Convert RDP curve to (ε, δ)-DP: the smallest δ over the orders.

    ``"classic"``: δ = exp((α − 1)(ρ(α) − ε)) (Mironov 2017, Proposition 3).
    ``"improved"``: δ = exp((α − 1)(ρ(α) − ε)) (1 − 1/α)^{α−1}/α (Canonne,
    Kamath & Steinke 2020, Proposition 12), and δ ≤ √(1 − e^{−ρ(α)}) for every
    ε ≥ 0 (Bretagnolle–Huber bound on the total variation distance).

    Parameters
    ----------
    orders, rdp : array-like of the same length
    epsilon : float
        ε ≥ 0.
    conversion : {"improved", "classic"}

    Returns
    -------
    (delta, order) : (float, float)
        δ in [0, 1].
    """
    _check_conversion(conversion)
    epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=True)
    a, r = _curve(orders, rdp)
    if math.isinf(epsilon):
        return (0.0, float(a[0])) if np.all(np.isfinite(r)) else (1.0, math.nan)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        log_d = (a - 1.0) * (r - epsilon)
        if conversion == "improved":
            log_d = log_d + (a - 1.0) * np.log1p(-1.0 / a) - np.log(a)
            tv = 0.5 * np.log(-np.expm1(-r))
            log_d = np.minimum(log_d, np.where(np.isfinite(r), tv, np.inf))
    log_d = np.where(np.isnan(log_d), np.inf, log_d)
    idx = int(np.argmin(log_d))
    best = float(log_d[idx])
    if best >= 0.0:
        return 1.0, (float(a[idx]) if math.isfinite(best) else math.nan)
    return min(1.0, math.exp(best)), float(a[idx])


# ---------------------------------------------------------------- accountant
class RdpAccountant(Accountant):
    """Rényi-DP accountant (moments accountant).

    Parameters
    ----------
    orders : sequence of float > 1, optional
        RDP orders; default :data:`DEFAULT_ORDERS` (190 orders from 1.05 to
        8192, a superset of dp-accounting's default grid).
    conversion : {"improved", "classic"}, default "improved"
        RDP → (ε, δ) conversion (see :func:`rdp_to_epsilon`).
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
        The relation accounted (see :mod:`dperm.accounting.base`).  Under
        replace-one, Poisson-subsampled Gaussians (0 < q < 1) are refused.

    Notes
    -----
    Supported events: ``Gaussian``, ``Laplace``, ``PureEpsilon``,
    ``EpsilonDelta`` with δ = 0, ``PoissonSampled`` and
    ``SampledWithoutReplacement`` of (compositions of) Gaussians, ``NoOp``,
    ``NonPrivate``, and ``SelfComposed``/``Composed`` of those.  See the
    module docstring for the formula and source of each.

    Raises
    ------
    InvalidPrivacyParameter
        If an order is ≤ 1, NaN or infinite.
    UnknownNameError
        If ``conversion`` is unknown.
    """

    name = "rdp"

    def __init__(
        self, orders=None, conversion: str = "improved", *, neighbouring: str = ev.REPLACE_ONE
    ) -> None:
        super().__init__(neighbouring)
        _check_conversion(conversion)
        self._custom_orders = orders is not None
        self._orders = _readonly(_check_orders(orders).copy())
        self.conversion = conversion
        self._rdp = np.zeros(self._orders.shape)

    def get_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {**super().get_config(), "conversion": self.conversion}
        if self._custom_orders:
            cfg["orders"] = self._orders.tolist()
        return cfg

    @property
    def orders(self) -> np.ndarray:
        """The RDP orders (sorted), shape (n_orders,)."""
        return self._orders.copy()

    @property
    def rdp(self) -> np.ndarray:
        """The composed RDP at each order, shape (n_orders,)."""
        return self._rdp.copy()

    def _prepare(self, event: ev.DpEvent, count: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            cost = np.asarray(rdp_of(event, self._orders), dtype=np.float64)
        return np.where(np.isnan(cost), np.inf, cost)

    def _commit(self, prepared: np.ndarray, count: int) -> None:
        if count == 0:
            return
        with np.errstate(over="ignore"):
            self._rdp = self._rdp + count * prepared

    def _epsilon(self, delta: float) -> float:
        return rdp_to_epsilon(self._orders, self._rdp, delta, self.conversion)[0]

    def _delta(self, epsilon: float) -> float:
        return rdp_to_delta(self._orders, self._rdp, epsilon, self.conversion)[0]

    def get_epsilon_and_order(self, delta: float) -> tuple[float, float]:
        """(ε, optimal order) at ``delta`` (order NaN when ε = ∞)."""
        delta = check_delta(delta, "delta", allow_zero=True)
        return rdp_to_epsilon(self._orders, self._rdp, delta, self.conversion)

    def get_delta_and_order(self, epsilon: float) -> tuple[float, float]:
        """(δ, optimal order) at ``epsilon``."""
        epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=True)
        return rdp_to_delta(self._orders, self._rdp, epsilon, self.conversion)
