"""Privacy-loss-distribution (PLD) accountant.

The PLD accountant composes privacy loss distributions numerically (FFT
convolution of discretized PLDs) and is close to exact; it is the tightest
accountant of dperm for Gaussian and subsampled-Gaussian events, and the one
that composes them with (ε, δ) events.  Each event is translated into a
multiset of *terms* (one ``functools.singledispatch`` rule per event type in
:func:`pld_terms`); each term becomes a connect-the-dots PLD built by
:mod:`dperm.accounting.pld_dense` (Meiser & Mohammadi 2018, "Tight on
budget?"; Koskela, Jälkö & Honkela 2020; Doroshenko, Ghazi, Kamath, Kumar &
Manurangsi 2022, "Connect the Dots", Algorithm 1), and the accountant composes
them.  The numerics are dp-accounting's (``dp_accounting.pld``: same grid, tail
truncation, discretisation and FFT composition), vectorised in numpy: the
numbers agree with dp-accounting's ``PLDAccountant`` to ~10⁻⁷ relative
(``tests/test_accounting_pld.py``).  The discretization is pessimistic, so the
reported ε is an upper bound up to floating-point error.

Terms (σ, b relative to the sensitivity under the event's relation, see
:mod:`dperm.accounting.events`):

==================================  =========================================
dperm event                         PLD (pairs of :mod:`.pld_dense`)
==================================  =========================================
``Gaussian(σ)`` (either relation)   N(0, σ²) vs N(1, σ²); all unsampled
                                    Gaussians are merged into one with
                                    σ_eff = (Σσᵢ⁻²)^{−1/2} (exact: Dong, Roth
                                    & Su 2019, Corollary 3.3)
``Laplace(b)`` (either relation)    Lap(0, b) vs Lap(1, b)
``PureEpsilon(ε)``,                 the dominating pair of every (ε, δ)-DP
``EpsilonDelta(ε, δ)``              mechanism (Kairouz, Oh & Viswanath 2015,
                                    Thm 2.1; Zhu, Dong & Wang 2022, Lemma 8)
``PoissonSampled(q, Gaussian(σ))``  add/remove: the "remove" and "add" pairs,
  (also of Composed/SelfComposed    std σ, shift 1 (dp-accounting's
  Gaussians as one Gaussian with    ``ADD_OR_REMOVE_ONE``); replace-one: the
  σ_eff, McMahan et al. 2018 §3)    "replace" pair (1−q)N(0, (2σ)²) +
                                    qN(±1, (2σ)²), i.e. std 2σ, shift 1
                                    (dp-accounting's ``REPLACE_ONE``; equal to
                                    ``Gaussian(σ)`` at q = 1)
``PoissonSampled(q, Laplace(b))``   add/remove only: the "remove"/"add" pairs
                                    of (1−q)Lap(0, b) + qLap(1, b) vs Lap(0, b)
``SampledWithoutReplacement(m, n,   replace-one, γ = m/n: one PLD with the
Gaussian(σ))`` (fixed-size batches) profile max(δ_R, δ_A) of the "remove" and
                                    "add" pairs (1−γ)N(0, σ²) + γN(1, σ²) vs
                                    N(0, σ²) — std σ, shift 1: a replaced
                                    record moves the sum by 2C, the noise is
                                    σ·2C (:func:`.pld_dense.fixed_size_gaussian_pld`
                                    derives it: Balle, Barthe & Gaboardi 2018,
                                    Thm 10; Dong, Roth & Su 2022, Thm 4.2)
``PoissonSampled`` /                 of a ``PureEpsilon``/``EpsilonDelta``:
``SampledWithoutReplacement``       the amplified (ε′, δ′) of Lecture 15,
                                    Lemma 15.4 (``amplification.amplified_
                                    event``), then as above
``SelfComposed`` / ``Composed``     repeated / collected terms
``NoOp`` / ``NonPrivate``           nothing / ε = ∞
==================================  =========================================

Refused with :class:`~dperm.exceptions.UnsupportedEventError` (before any
state change): replace-one Poisson-subsampled Laplace, and subsampling of other
events.  A term whose grid would exceed :data:`MAX_TERM_POINTS` points (a nearly
noiseless Gaussian on a fine grid) is refused with :class:`GridTooFineError`;
:func:`grid_step_for` gives a grid step whose arrays stay bounded at any ε.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from typing import Any

from .._docstrings import compose_doc
from .._validation import check_positive
from ..exceptions import InvalidPrivacyParameter, UnsupportedEventError
from . import events as ev
from .amplification import amplified_event
from .base import MULTISET_RULE, Accountant, register_multiset_rules
from .pld_dense import (
    TAIL_Z,
    Pld,
    epsilon_delta_pld,
    fixed_size_gaussian_pld,
    gaussian_pld,
    identity_pld,
    laplace_pld,
)
from .rdp import effective_noise_multiplier

__all__ = [
    "MAX_TERM_POINTS",
    "GridTooFineError",
    "PldAccountant",
    "bounded_grid_epsilon",
    "grid_step_for",
    "pld_terms",
]

#: the largest grid of one subsampled-Gaussian term the accountant builds (2²³ points,
#: 64 MiB per array): a finer grid is refused with :class:`GridTooFineError`
MAX_TERM_POINTS = 1 << 23
#: the grid rule of :func:`grid_step_for`: ε/h ≤ this many grid steps
GRID_STEPS_PER_EPSILON = 4096
#: the finest grid step (dp-accounting's default ``value_discretization_interval``)
FINEST_GRID = 1e-4
#: the coarsest grid of :func:`grid_step_for` is FINEST_GRID·2^this
_MAX_GRID_POWER = 19


class GridTooFineError(InvalidPrivacyParameter):
    """The PLD grid of one term would exceed :data:`MAX_TERM_POINTS` points (a nearly
    noiseless Gaussian on a fine grid): use a coarser ``value_discretization_interval``
    (:func:`grid_step_for`)."""


def loss_span(std: float, sampling_rate: float) -> float:
    """An upper bound on the width of the (truncated) privacy-loss support of one
    (subsampled) Gaussian step of std ``std`` relative to a unit shift — the
    losses of x ∈ [−zs, zs + 1] (z = ``TAIL_Z``) lie within ±(2zs + 1)/s² — so one
    step's grid has at most ``loss_span/h + 1`` points (``sampling_rate`` only
    narrows it)."""
    s = float(std)
    return 2.0 * (2.0 * TAIL_Z * s + 1.0) / (s * s)


def _check_points(span: float, h: float) -> None:
    if span / h > MAX_TERM_POINTS:
        raise GridTooFineError(
            f"the PLD of this event needs about {span / h:.3g} grid points per step at "
            f"value_discretization_interval={h:g} (more than {MAX_TERM_POINTS}): its noise is "
            "too small for this grid; use a coarser value_discretization_interval "
            "(dperm.accounting.pld.grid_step_for(epsilon))"
        )


def grid_step_for(epsilon: float) -> float:
    """The PLD grid step of a run whose ε is about ``epsilon``: the smallest
    h = 10⁻⁴·2ᵏ (k ≥ 0) with ε/h ≤ 4096.

    The grid of a composed PLD spans its loss range, which grows with ε (≈ ε
    for a composition of Gaussians, ≈ 1/σ² per step for one nearly noiseless
    step): with h ∝ ε the arrays stay of bounded length whatever ε (≈ 10⁴–10⁵
    points), where dp-accounting's fixed 10⁻⁴ needs ~10⁷ at ε = 10³ and runs
    out of memory beyond.  The discretisation stays pessimistic (the PLD's ε
    is an upper bound at every h); what a coarser grid costs is the excess of
    its ε over the finest grid's, which shrinks like h²: measured ≤ 3·10⁻⁴·ε
    at ε/h ≥ 2048 (``tests/test_accounting_pld_fixed_size.py``).  At ε ≤ 0.41
    the grid is dp-accounting's 10⁻⁴; h is at most 10⁻⁴·2¹⁹ ≈ 52 (e^h must not
    overflow in the connect-the-dots formula, 10× coarser grids included), so
    ε/h ≥ 2048 holds up to ε ≈ 10⁵ and the grid still has ~2·10⁴ points per
    unit of ε/h at ε = 10⁶.
    """
    ratio = float(epsilon) / (GRID_STEPS_PER_EPSILON * FINEST_GRID)
    if not ratio > 1.0:
        return FINEST_GRID
    return FINEST_GRID * 2.0 ** min(_MAX_GRID_POWER, math.ceil(math.log2(min(ratio, 2.0**60))))


#: A term: ("gaussian", σ), ("sampled_gaussian", q, σ, relation), ("laplace", b),
#: ("sampled_laplace", q, b), ("eps_delta", ε, δ) or ("non_private",).
Term = tuple[Any, ...]
_NON_PRIVATE: Term = ("non_private",)


@functools.singledispatch
@compose_doc(rule=MULTISET_RULE)
def pld_terms(event: ev.DpEvent) -> Counter[Term]:
    """The PLD terms that make up ``event``, with multiplicities (a part is a term:
    see the module docstring).

    {rule}

    Raises
    ------
    UnsupportedEventError
        For events without a PLD here.
    """
    raise UnsupportedEventError(
        f"the PLD accountant cannot account {type(event).__name__} events: {event!r}"
    )


@pld_terms.register
def _(event: ev.Gaussian) -> Counter[Term]:
    s = event.noise_multiplier
    return Counter({_NON_PRIVATE if s == 0.0 else ("gaussian", s): 1})


@pld_terms.register
def _(event: ev.Laplace) -> Counter[Term]:
    b = event.noise_multiplier
    return Counter({_NON_PRIVATE if b == 0.0 else ("laplace", b): 1})


def _eps_delta_term(eps: float, delta: float) -> Counter[Term]:
    if math.isinf(eps) or delta >= 1.0:
        return Counter({_NON_PRIVATE: 1})
    if eps == 0.0 and delta == 0.0:
        return Counter()
    return Counter({("eps_delta", eps, delta): 1})


# NoOp, NonPrivate, SelfComposed, Composed, PureEpsilon, EpsilonDelta: the shared rules
register_multiset_rules(pld_terms, non_private=_NON_PRIVATE, eps_delta=_eps_delta_term)


@pld_terms.register
def _(event: ev.PoissonSampled) -> Counter[Term]:
    generic = amplified_event(event)  # Lecture 15, Lemma 15.4 (dperm.accounting.amplification)
    if generic is not None:
        return pld_terms(generic)
    q = event.sampling_rate
    if isinstance(event.event, ev.Laplace):
        b = event.event.noise_multiplier
        if q == 0.0:
            return Counter()
        if q == 1.0:
            return pld_terms(event.event)
        if event.neighbouring != ev.ADD_REMOVE:
            raise UnsupportedEventError(
                "the PLD accountant has no replace-one PLD for a Poisson-subsampled Laplace "
                f"mechanism: {event!r}"
            )
        return Counter({_NON_PRIVATE if b == 0.0 else ("sampled_laplace", q, b): 1})
    sigma = effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(
            "the PLD accountant supports Poisson subsampling of Gaussian (or Composed/"
            f"SelfComposed Gaussian) and Laplace events only, got {event!r}"
        )
    if math.isinf(sigma) or q == 0.0:
        return Counter()
    if sigma == 0.0:
        return Counter({_NON_PRIVATE: 1})
    if q == 1.0:
        return Counter({("gaussian", sigma): 1})
    return Counter({("sampled_gaussian", q, sigma, event.neighbouring): 1})


@pld_terms.register
def _(event: ev.SampledWithoutReplacement) -> Counter[Term]:
    generic = amplified_event(event)  # Lecture 15, Lemma 15.4
    if generic is not None:
        return pld_terms(generic)
    sigma = effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(
            "the PLD accountant supports sampling without replacement of Gaussian (or "
            f"Composed/SelfComposed Gaussian), (ε, δ) and pure-ε events only, got {event!r}"
        )
    m, n = event.sample_size, event.population_size
    if math.isinf(sigma) or m == 0:
        return Counter()
    if sigma == 0.0:
        return Counter({_NON_PRIVATE: 1})
    if m == n:
        return Counter({("gaussian", sigma): 1})
    # the pair of pld_dense.fixed_size_gaussian_pld: std σ relative to the
    # replace-one sensitivity 2C, rate γ = m/n
    return Counter({("fixed_size_gaussian", m / n, sigma): 1})


class PldAccountant(Accountant):
    """Privacy-loss-distribution accountant (connect-the-dots PLDs, FFT composition).

    Parameters
    ----------
    value_discretization_interval : float, default 1e-4
        Discretization step of the privacy loss (dp-accounting's default);
        smaller is tighter and slower (the arrays grow as its inverse).  Any
        h > 0 is pessimistic; :func:`grid_step_for` gives one that keeps the
        arrays bounded at large ε.
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
        The relation accounted (see :mod:`dperm.accounting.base`).  It decides
        the PLD of Poisson-subsampled Gaussians: the add/remove or the
        replace-one pair (module docstring).

    Notes
    -----
    See the module docstring for the supported events; everything else is
    refused with :class:`~dperm.exceptions.UnsupportedEventError` before any
    state change.  The numbers are those of dp-accounting's ``PLDAccountant``
    (same discretisation and parameters) to ~10⁻⁷ relative.
    """

    name = "pld"

    def __init__(
        self, value_discretization_interval: float = 1e-4, *, neighbouring: str = ev.REPLACE_ONE
    ) -> None:
        super().__init__(neighbouring)
        vdi = check_positive(value_discretization_interval, "value_discretization_interval")
        if not math.isfinite(vdi):
            raise InvalidPrivacyParameter(
                "value_discretization_interval must be finite, got "
                f"{value_discretization_interval!r}"
            )
        self.value_discretization_interval = vdi
        self._pld = identity_pld(vdi)
        self._non_private = False
        # accurate upper tails for small δ (pld_dense.self_compose); off only for the
        # coarse guesses of a calibration (accounting.calibrate), never for a certificate
        self._exact_tails = True

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "value_discretization_interval": self.value_discretization_interval,
        }

    def _prepare(self, event: ev.DpEvent, count: int) -> Counter[Term]:
        return pld_terms(event)

    def _build(self, terms: Counter[Term], count: int) -> Pld | None:
        """The PLD of ``count`` repetitions of ``terms`` (None if it costs nothing)."""
        h = self.value_discretization_interval
        out: Pld | None = None

        def add(p: Pld) -> None:
            nonlocal out
            out = p if out is None else out.compose(p)

        gauss_inv = math.fsum(c / t[1] ** 2 for t, c in terms.items() if t[0] == "gaussian")
        for term, c in terms.items():
            n = c * count
            kind = term[0]
            if kind == "sampled_gaussian":
                _, q, sigma, rel = term
                # replace-one: (1−q)N(0,(2σ)²) + qN(±1,(2σ)²) — std 2σ, shift 1
                std = sigma if rel == ev.ADD_REMOVE else 2.0 * sigma
                _check_points(loss_span(std, q), h)
                add(gaussian_pld(std, q, rel, h).self_compose(n, tilt=self._exact_tails))
            elif kind == "fixed_size_gaussian":
                _, q, sigma = term
                _check_points(loss_span(sigma, q), h)
                add(fixed_size_gaussian_pld(sigma, q, h).self_compose(n, tilt=self._exact_tails))
            elif kind == "laplace":
                add(laplace_pld(term[1], 1.0, h).self_compose(n, tilt=self._exact_tails))
            elif kind == "sampled_laplace":
                add(laplace_pld(term[2], term[1], h).self_compose(n, tilt=self._exact_tails))
            elif kind == "eps_delta":
                add(epsilon_delta_pld(term[1], term[2], h).self_compose(n, tilt=self._exact_tails))
        if gauss_inv > 0.0:
            # n Gaussians with σᵢ = one Gaussian with (Σ n/σᵢ²)^{-1/2} (exact)
            add(gaussian_pld((count * gauss_inv) ** -0.5, 1.0, ev.ADD_REMOVE, h))
        return out

    def _commit(self, prepared: Counter[Term], count: int) -> None:
        if count == 0 or not prepared:
            return
        if _NON_PRIVATE in prepared:
            self._non_private = True
            return
        built = self._build(prepared, count)  # may raise: state still untouched
        if built is not None:
            self._pld = self._pld.compose(built)

    def _epsilon(self, delta: float) -> float:
        if self._non_private:
            return math.inf
        return self._pld.epsilon(delta)

    def _delta(self, epsilon: float) -> float:
        if self._non_private:
            return 1.0
        return self._pld.delta(epsilon)


#: the first pass of :func:`bounded_grid_epsilon` keeps one step's grid this small
_FIRST_PASS_POINTS = 1 << 14


def _term_span(term: Term) -> float:
    """Width of the loss support of one step of a Gaussian term (0 for others)."""
    kind = term[0]
    if kind == "gaussian":
        return loss_span(term[1], 1.0)
    if kind == "sampled_gaussian":
        _, q, sigma, rel = term
        return loss_span(sigma if rel == ev.ADD_REMOVE else 2.0 * sigma, q)
    if kind == "fixed_size_gaussian":
        return loss_span(term[2], term[1])
    return 0.0


def bounded_grid_epsilon(event: ev.DpEvent, delta: float) -> tuple[float, float]:
    """(ε, h): ε(δ) of ``event`` by the PLD accountant on the grid
    h = :func:`grid_step_for` (ε), whatever ε — the accountant's arrays stay bounded
    where dp-accounting's fixed grid runs out of memory (ε ≫ 100).

    A first pass on a grid coarse enough that one step of every Gaussian term has at
    most 2¹⁴ points (without the accurate-tail refinement: it only estimates ε₁)
    chooses h = ``grid_step_for(ε₁)``; the certificate is the PLD on that grid
    (pessimistic at every h, like every PLD here).

    Raises
    ------
    UnsupportedEventError
        As :meth:`PldAccountant.compose`.
    """
    rel = event.neighbouring
    terms = pld_terms(event)
    if _NON_PRIVATE in terms:
        return math.inf, FINEST_GRID
    span = max((_term_span(t) for t in terms), default=0.0)
    ratio = span / (_FIRST_PASS_POINTS * FINEST_GRID)
    first = FINEST_GRID * (2.0 ** math.ceil(math.log2(ratio)) if ratio > 1.0 else 1.0)
    acc = PldAccountant(first, neighbouring=rel)
    acc._exact_tails = False
    eps1 = float(acc.compose(event).get_epsilon(delta))
    if not math.isfinite(eps1):
        return eps1, first
    h = grid_step_for(eps1)
    while True:
        try:
            return float(PldAccountant(h, neighbouring=rel).compose(event).get_epsilon(delta)), h
        except GridTooFineError:  # pragma: no cover - ε₁ bounds the grid in practice
            h *= 16.0
