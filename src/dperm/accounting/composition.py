"""Composition theorems for (ε, δ)-DP events: basic, advanced and optimal.

These accountants see every event as a multiset of *atoms*: mechanisms known
to be (εᵢ, δᵢ)-DP.  :func:`approx_dp_atoms` (one ``functools.singledispatch``
rule per event type) performs that translation:

===========================  ===============================================
event                        atoms
===========================  ===============================================
``NoOp``                     none
``NonPrivate``               one (∞, 0) atom (ε = ∞)
``PureEpsilon(ε)``           (ε, 0)
``EpsilonDelta(ε, δ)``       (ε, δ)
``Laplace(b)``               (1/b, 0)  (Dwork, McSherry, Nissim, Smith 2006)
``SelfComposed(e, k)``       atoms of ``e``, each k times
``Composed(e₁, …)``          union of the atoms
``PoissonSampled(q, e)``     ``e`` ε/(ε, δ): Lemma 15.4 (amplification module);
                             else q = 0: none; q = 1: atoms of ``e``; else refused
``SampledWithoutReplacement``  ``e`` ε/(ε, δ): Lemma 15.4; else m = 0: none;
                             m = n: atoms of ``e``; else refused
``Gaussian``                 refused: not an (ε, δ) event by itself
===========================  ===============================================

Atoms are stated for the accountant's relation (``neighbouring=``, default
replace-one; add/remove events are converted first, see
:mod:`dperm.accounting.base`); the composition theorems below hold for any
fixed neighbouring relation.

The Gaussian mechanism has an (ε, δ) guarantee only once δ is fixed; use the
``"rdp"`` or ``"pld"`` accountant for it, or convert it explicitly with
:func:`dperm.accounting.gaussian_delta` into an ``EpsilonDelta`` event.
Amplification by subsampling for (ε, δ) atoms is not implemented here (use
the RDP or PLD accountants for subsampled Gaussians).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from .._docstrings import compose_doc
from ..exceptions import UnknownNameError, UnsupportedEventError
from . import events as ev
from .amplification import amplified_event
from .base import MULTISET_RULE, Accountant, register_multiset_rules

__all__ = [
    "AdvancedCompositionAccountant",
    "BasicCompositionAccountant",
    "OptimalCompositionAccountant",
    "approx_dp_atoms",
    "kov_optimal_delta",
]

Atom = tuple[float, float]


def _float_up(value: Fraction) -> float:
    """The smallest float ≥ ``value`` (conservative rounding of a sum)."""
    f = float(value)
    if math.isfinite(f) and Fraction(f) < value:
        f = math.nextafter(f, math.inf)
    return f


# --------------------------------------------------------------------- atoms
@functools.singledispatch
@compose_doc(rule=MULTISET_RULE)
def approx_dp_atoms(event: ev.DpEvent) -> Counter[Atom]:
    """The (εᵢ, δᵢ)-DP mechanisms that make up ``event``, with multiplicities: the
    parts are the pairs ``(epsilon_i, delta_i)``; atoms (0, 0) are dropped (they cost
    nothing).

    {rule}

    Raises
    ------
    UnsupportedEventError
        For events without an (ε, δ) description (``Gaussian``, subsampled
        events with 0 < q < 1, unknown event types).
    """
    raise UnsupportedEventError(
        f"composition accountants cannot account {type(event).__name__} events: {event!r}"
    )


def _atom(eps: float, delta: float) -> Counter[Atom]:
    if eps == 0.0 and delta == 0.0:
        return Counter()
    return Counter({(float(eps), float(delta)): 1})


# NoOp, NonPrivate, SelfComposed, Composed, PureEpsilon, EpsilonDelta: the shared rules
register_multiset_rules(approx_dp_atoms, non_private=(math.inf, 0.0), eps_delta=_atom)


@approx_dp_atoms.register
def _(event: ev.Laplace) -> Counter[Atom]:
    # Laplace(b·Δ₁) noise is (1/b)-DP: Dwork, McSherry, Nissim, Smith (2006), Prop. 1.
    b = event.noise_multiplier
    return _atom(math.inf if b == 0 else 1.0 / b, 0.0)


@approx_dp_atoms.register
def _(event: ev.Gaussian) -> Counter[Atom]:
    raise UnsupportedEventError(
        f"{event!r} is not an (ε, δ) event by itself: use the 'rdp' or 'pld' accountant, "
        "or convert it with gaussian_delta() into an EpsilonDelta event"
    )


def _unamplified(
    event: ev.PoissonSampled | ev.SampledWithoutReplacement, empty: bool, full: bool, others: str
) -> Counter[Atom]:
    """A subsampled event without amplification: nothing when no record can be
    sampled, the inner atoms when every record is, refused otherwise (``others``:
    the accountants that do amplify).  A generic inner event (``PureEpsilon``,
    ``EpsilonDelta``) is amplified by Lecture 15, Lemma 15.4 first
    (:func:`dperm.accounting.amplification.amplified_event`)."""
    generic = amplified_event(event)
    if generic is not None:
        return approx_dp_atoms(generic)
    inner = approx_dp_atoms(event.event)
    if empty:
        return Counter()
    if full:
        return inner
    raise UnsupportedEventError(
        f"composition accountants do not implement amplification by subsampling: {event!r}; "
        f"use the {others}"
    )


@approx_dp_atoms.register
def _(event: ev.PoissonSampled) -> Counter[Atom]:
    q = event.sampling_rate
    return _unamplified(event, q == 0.0, q == 1.0, "'rdp' or 'pld' accountant")


@approx_dp_atoms.register
def _(event: ev.SampledWithoutReplacement) -> Counter[Atom]:
    m = event.sample_size
    return _unamplified(event, m == 0, m == event.population_size, "'rdp' accountant")


# --------------------------------------------------------------------- basic
class BasicCompositionAccountant(Accountant):
    """Basic composition: ε and δ add up.

    The adaptive composition of mechanisms that are (εᵢ, δᵢ)-DP is
    (Σεᵢ, Σδᵢ)-DP (Dwork, Kenthapadi, McSherry, Mironov, Naor 2006; Dwork & Roth
    2014, *The Algorithmic Foundations of Differential Privacy*, Theorem 3.16).

    Supports ``PureEpsilon``, ``EpsilonDelta``, ``Laplace``, ``NoOp``,
    ``NonPrivate`` (ε = ∞) and ``SelfComposed``/``Composed`` of those; refuses
    ``Gaussian`` and subsampled events (see :func:`approx_dp_atoms`).

    Sums are kept as exact rationals and rounded up, so the reported ε and δ
    are never below the true sums.
    """

    name = "basic"

    def __init__(self, *, neighbouring: str = ev.REPLACE_ONE) -> None:
        super().__init__(neighbouring)
        self._eps_frac = Fraction(0)
        self._delta_frac = Fraction(0)
        self._nonprivate = False

    def _prepare(self, event: ev.DpEvent, count: int) -> Counter[Atom]:
        return approx_dp_atoms(event)

    def _commit(self, prepared: Counter[Atom], count: int) -> None:
        for (e, d), c in prepared.items():
            n = c * count
            if n == 0:
                continue
            if math.isinf(e):
                self._nonprivate = True
                continue
            self._eps_frac += Fraction(e) * n
            self._delta_frac += Fraction(d) * n

    @property
    def epsilon_sum(self) -> float:
        """Σεᵢ (rounded up; ∞ after a ``NonPrivate`` event)."""
        return math.inf if self._nonprivate else _float_up(self._eps_frac)

    @property
    def delta_sum(self) -> float:
        """Σδᵢ (rounded up, capped at 1)."""
        return min(1.0, _float_up(self._delta_frac))

    def _epsilon(self, delta: float) -> float:
        if self._delta_frac > Fraction(delta):
            return math.inf
        return self.epsilon_sum

    def _delta(self, epsilon: float) -> float:
        if epsilon >= self.epsilon_sum:
            return self.delta_sum
        return 1.0


# ------------------------------------------------------------------ advanced
def _kov_epsilon(eps_sum: float, s2: float, s3: float, delta_tilde: float) -> float:
    """Kairouz, Oh, Viswanath (2015), Theorem 3.5 (heterogeneous; Theorem 3.4
    when all εᵢ are equal): for any δ̃ ∈ (0, 1] the composition is
    (ε̃, 1 − (1 − δ̃) Πᵢ(1 − δᵢ))-DP with

        ε̃ = min{ Σεᵢ,
                 Σεᵢ(e^εᵢ − 1)/(e^εᵢ + 1) + √(2 Σεᵢ² log(e + √(Σεᵢ²)/δ̃)),
                 Σεᵢ(e^εᵢ − 1)/(e^εᵢ + 1) + √(2 Σεᵢ² log(1/δ̃)) }.

    ``s2`` = Σεᵢ tanh(εᵢ/2) (= Σεᵢ(e^εᵢ − 1)/(e^εᵢ + 1)), ``s3`` = Σεᵢ².
    """
    if delta_tilde <= 0.0:
        return eps_sum
    log_inv = -math.log(delta_tilde)
    b2 = s2 + math.sqrt(2.0 * s3 * math.log(math.e + math.sqrt(s3) / delta_tilde))
    b3 = s2 + math.sqrt(2.0 * s3 * log_inv)
    return min(eps_sum, b2, b3)


def _dwork_roth_epsilon(eps0: float, k: int, delta_prime: float) -> float:
    """Dwork & Roth (2014), Theorem 3.20 (advanced composition; Dwork, Rothblum,
    Vadhan 2010, Theorem III.3): k-fold adaptive composition of (ε, δ)-DP
    mechanisms is (ε', kδ + δ')-DP for every δ' > 0 with

        ε' = √(2k ln(1/δ')) ε + k ε (e^ε − 1).
    """
    return math.sqrt(2.0 * k * math.log(1.0 / delta_prime)) * eps0 + k * eps0 * math.expm1(eps0)


class AdvancedCompositionAccountant(Accountant):
    """Advanced composition of (ε, δ)-DP mechanisms, with the optimal δ split.

    Parameters
    ----------
    bound : {"kov", "dwork_roth"}, default "kov"
        ``"kov"``: Kairouz, Oh & Viswanath (2015, ICML; arXiv:1311.0776),
        Theorem 3.4 (homogeneous) / Theorem 3.5 (heterogeneous εᵢ, δᵢ): the
        composition is (ε̃, 1 − (1 − δ̃)Π(1 − δᵢ))-DP with ε̃ the minimum of
        Σεᵢ, Σεᵢ(e^εᵢ−1)/(e^εᵢ+1) + √(2Σεᵢ² log(e + √(Σεᵢ²)/δ̃)) and
        Σεᵢ(e^εᵢ−1)/(e^εᵢ+1) + √(2Σεᵢ² log(1/δ̃)).  It is never worse than
        the Dwork–Roth form and supports heterogeneous compositions.

        ``"dwork_roth"``: Dwork & Roth (2014), Theorem 3.20 (= Dwork, Rothblum,
        Vadhan 2010, Theorem III.3): k identical (ε, δ)-DP mechanisms compose to
        (√(2k ln(1/δ'))ε + kε(e^ε − 1), kδ + δ')-DP; the minimum with basic
        composition (kε, kδ) is taken.  Homogeneous compositions only: a
        second, different (ε, δ) atom is refused with ``UnsupportedEventError``.

    Notes
    -----
    ``get_epsilon(delta)`` spends the part of ``delta`` not consumed by the
    δᵢ on the slack δ' (resp. δ̃): δ' = delta − kδ₀ (Dwork–Roth) or
    1 − δ̃ = (1 − delta)/Π(1 − δᵢ) (KOV).  When nothing is left, ε = ∞ unless
    ``delta`` covers basic composition exactly.  ``get_delta(epsilon)``
    inverts this monotone relation (conservatively).
    """

    name = "advanced"
    _BOUNDS = ("kov", "dwork_roth")

    def __init__(self, bound: str = "kov", *, neighbouring: str = ev.REPLACE_ONE) -> None:
        super().__init__(neighbouring)
        if bound not in self._BOUNDS:
            raise UnknownNameError(f"bound must be one of {self._BOUNDS}, got {bound!r}")
        self.bound = bound
        self._atoms: Counter[Atom] = Counter()

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "bound": self.bound}

    def _prepare(self, event: ev.DpEvent, count: int) -> Counter[Atom]:
        atoms = approx_dp_atoms(event)
        if self.bound == "dwork_roth":
            finite = {a for a in (set(self._atoms) | set(atoms)) if math.isfinite(a[0])}
            if len(finite) > 1:
                raise UnsupportedEventError(
                    "advanced composition with bound='dwork_roth' (Dwork & Roth Thm 3.20) "
                    f"is for identical (ε, δ) mechanisms; composing {event!r} would mix "
                    f"{sorted(finite)}; use bound='kov' (KOV 2015 Thm 3.5) instead"
                )
        return atoms

    def _commit(self, prepared: Counter[Atom], count: int) -> None:
        for a, c in prepared.items():
            if c * count:
                self._atoms[a] += c * count

    # summaries -------------------------------------------------------
    def _nonprivate(self) -> bool:
        return any(math.isinf(e) for e, _ in self._atoms)

    def _sums(self) -> tuple[float, float, float, float]:
        """(Σεᵢ, Σεᵢ tanh(εᵢ/2), Σεᵢ², Σ log(1 − δᵢ))."""
        items = list(self._atoms.items())
        eps_sum = _float_up(sum((Fraction(e) * c for (e, _), c in items), Fraction(0)))
        s2 = math.fsum(c * e * math.tanh(e / 2.0) for (e, _), c in items)
        s3 = math.fsum(c * e * e for (e, _), c in items)
        log_keep = math.fsum(c * math.log1p(-d) if d < 1.0 else -math.inf for (_, d), c in items)
        return eps_sum, s2, s3, log_keep

    def _dr_params(self) -> tuple[float, float, int]:
        ((eps0, delta0), k) = next(iter(self._atoms.items()))
        return eps0, delta0, k

    def _epsilon(self, delta: float) -> float:
        if not self._atoms:
            return 0.0
        if self._nonprivate():
            return math.inf
        if self.bound == "dwork_roth":
            eps0, delta0, k = self._dr_params()
            used = Fraction(delta0) * k
            if used > Fraction(delta):
                return math.inf
            basic = _float_up(Fraction(eps0) * k)
            slack = float(Fraction(delta) - used)
            if slack <= 0.0:
                return basic
            return min(basic, _dwork_roth_epsilon(eps0, k, slack))
        eps_sum, s2, s3, log_keep = self._sums()
        if log_keep == -math.inf:
            return math.inf
        # 1 − delta = (1 − δ̃) Π(1 − δᵢ)
        log_ratio = math.log1p(-delta) - log_keep
        if log_ratio > 0.0:
            return math.inf
        delta_tilde = -math.expm1(log_ratio)
        return _kov_epsilon(eps_sum, s2, s3, delta_tilde)

    def _delta(self, epsilon: float) -> float:
        if not self._atoms:
            return 0.0
        if self._nonprivate():
            return 1.0
        if self.bound == "dwork_roth":
            eps0, delta0, k = self._dr_params()
            base = min(1.0, _float_up(Fraction(delta0) * k))
            if epsilon >= _float_up(Fraction(eps0) * k):
                return base
            drift = k * eps0 * math.expm1(eps0)
            if epsilon <= drift or eps0 == 0.0:
                return 1.0
            # closed-form inverse of Thm 3.20 in δ', nudged up until it provably holds
            delta_prime = math.exp(-(((epsilon - drift) / eps0) ** 2) / (2.0 * k))
            while delta_prime < 1.0 and _dwork_roth_epsilon(eps0, k, delta_prime) > epsilon:
                delta_prime *= 1.0 + 1e-12
            return min(1.0, _float_up(Fraction(base) + Fraction(min(delta_prime, 1.0))))
        eps_sum, s2, s3, log_keep = self._sums()
        base = -math.expm1(log_keep) if log_keep > -math.inf else 1.0
        if epsilon >= eps_sum:
            return min(1.0, base)
        if _kov_epsilon(eps_sum, s2, s3, 1.0) > epsilon:
            return 1.0
        # smallest δ̃ with ε̃(δ̃) ≤ epsilon, by bisection on log δ̃ (ε̃ decreases in δ̃)
        lo, hi = -745.0, 0.0  # log δ̃ ; hi satisfies
        if _kov_epsilon(eps_sum, s2, s3, math.exp(lo)) <= epsilon:
            hi = lo
        else:
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if _kov_epsilon(eps_sum, s2, s3, math.exp(mid)) <= epsilon:
                    hi = mid
                else:
                    lo = mid
                if hi - lo < 1e-13 * max(1.0, abs(hi)):
                    break
        delta_tilde = math.exp(hi)
        # total δ = 1 − (1 − δ̃)Π(1 − δᵢ)
        total = -math.expm1(math.log1p(-delta_tilde) + log_keep) if delta_tilde < 1 else 1.0
        return min(1.0, total)


# ------------------------------------------------------------------- optimal
def kov_optimal_delta(epsilon0: float, delta0: float, k: int, epsilon: float) -> float:
    """Exact δ(ε) of the k-fold adaptive composition of (ε₀, δ₀)-DP mechanisms.

    Kairouz, Oh & Viswanath (2015), Theorem 3.3 (the optimal composition
    theorem), in the form valid for every ε ≥ 0 given by Murtagh & Vadhan
    (2016, "The complexity of computing the optimal composition of
    differential privacy"), Theorem 1.5:

        δ(ε) = 1 − (1 − δ₀)^k (1 − δ_RR(ε)),
        δ_RR(ε) = Σ_{ℓ : (k − 2ℓ)ε₀ > ε} C(k, ℓ) (e^{(k−ℓ)ε₀} − e^{ε + ℓε₀}) / (1 + e^{ε₀})^k,

    the hockey-stick divergence of k-fold randomized response.  Every term of
    the sum is positive; it is evaluated in log space (``logsumexp``), and
    only the ℓ within 40 binomial standard deviations of the mean are summed
    (the rest is below 1e-300).

    Parameters
    ----------
    epsilon0 : float
        ε₀ ≥ 0 of each mechanism.
    delta0 : float
        δ₀ in [0, 1] of each mechanism.
    k : int
        Number of mechanisms, ≥ 0.
    epsilon : float
        ε ≥ 0 at which δ is wanted.

    Returns
    -------
    float
        δ in [0, 1].
    """
    if k == 0:
        return 0.0
    base_log_keep = k * math.log1p(-delta0) if delta0 < 1.0 else -math.inf
    if base_log_keep == -math.inf:
        return 1.0
    d_rr = _rr_delta(epsilon0, k, epsilon)
    keep = math.exp(base_log_keep)
    return min(1.0, -math.expm1(base_log_keep) + keep * d_rr)


def _rr_delta(eps0: float, k: int, epsilon: float) -> float:
    """δ_RR(ε) of k-fold ε₀-randomized response (see :func:`kov_optimal_delta`)."""
    if eps0 == 0.0 or epsilon >= k * eps0:
        return 0.0
    # ℓ ranges over 0 ≤ ℓ with (k − 2ℓ)ε₀ > ε; terms at the boundary are 0 and masked
    l_max = min(k, math.floor((k - epsilon / eps0) / 2.0))
    if l_max < 0:
        return 0.0
    # under P, ℓ ~ Binomial(k, p) with p = 1/(1 + e^ε₀): sum only over the bulk
    p = 1.0 / (1.0 + math.exp(eps0)) if eps0 < 700 else 0.0
    sd = math.sqrt(k * p * (1 - p))
    lo = max(0, math.floor(k * p - 40 * sd - 50))
    hi = min(l_max, math.ceil(k * p + 40 * sd + 50))
    if hi < lo:  # the whole range lies in a tail of mass < 1e-300; keep its largest term
        lo = hi = l_max
    ell = np.arange(lo, hi + 1, dtype=np.float64)
    a = (k - ell) * eps0
    b = epsilon + ell * eps0
    keep = a > b
    if not keep.any():
        return 0.0
    ell, a, b = ell[keep], a[keep], b[keep]
    log_comb = gammaln(k + 1.0) - gammaln(ell + 1.0) - gammaln(k - ell + 1.0)
    log_norm = k * np.logaddexp(0.0, eps0)
    log_terms = log_comb + a + np.log(-np.expm1(b - a)) - log_norm
    return float(min(1.0, math.exp(logsumexp(log_terms))))


class OptimalCompositionAccountant(Accountant):
    """Optimal (exact) composition of k identical (ε₀, δ₀)-DP mechanisms.

    Kairouz, Oh & Viswanath (2015), Theorem 3.3, evaluated at any ε as in
    Murtagh & Vadhan (2016), Theorem 1.5 (see :func:`kov_optimal_delta`).
    ``get_delta`` is exact; ``get_epsilon`` finds the smallest ε with
    δ(ε) ≤ delta by bisection on the monotone δ(ε), returning the upper end
    of the final bracket (relative width 1e-12), so it is never below the
    exact value.

    Homogeneous compositions only: an event whose atoms differ from those
    already composed is refused with ``UnsupportedEventError`` (optimal
    heterogeneous composition is #P-hard, Murtagh & Vadhan 2016).
    ``NonPrivate`` gives ε = ∞ and may be mixed with anything.
    """

    name = "optimal"

    def __init__(self, *, neighbouring: str = ev.REPLACE_ONE) -> None:
        super().__init__(neighbouring)
        self._atoms: Counter[Atom] = Counter()

    def _prepare(self, event: ev.DpEvent, count: int) -> Counter[Atom]:
        atoms = approx_dp_atoms(event)
        finite = {a for a in (set(self._atoms) | set(atoms)) if math.isfinite(a[0])}
        if len(finite) > 1:
            raise UnsupportedEventError(
                "the optimal composition accountant (KOV 2015 Thm 3.3) is for identical "
                f"(ε, δ) mechanisms; composing {event!r} would mix {sorted(finite)}; "
                "use the 'advanced' accountant (KOV Thm 3.5) for heterogeneous compositions"
            )
        return atoms

    def _commit(self, prepared: Counter[Atom], count: int) -> None:
        for a, c in prepared.items():
            if c * count:
                self._atoms[a] += c * count

    def _params(self) -> tuple[float, float, int] | None:
        for (e, d), k in self._atoms.items():
            if math.isfinite(e):
                return e, d, k
        return None

    def _nonprivate(self) -> bool:
        return any(math.isinf(e) for e, _ in self._atoms)

    def _delta(self, epsilon: float) -> float:
        if self._nonprivate():
            return 1.0
        p = self._params()
        if p is None:
            return 0.0
        eps0, delta0, k = p
        if math.isinf(epsilon):
            return kov_optimal_delta(eps0, delta0, k, k * eps0)
        return kov_optimal_delta(eps0, delta0, k, epsilon)

    def _epsilon(self, delta: float) -> float:
        if self._nonprivate():
            return math.inf
        p = self._params()
        if p is None:
            return 0.0
        eps0, delta0, k = p
        if kov_optimal_delta(eps0, delta0, k, 0.0) <= delta:
            return 0.0
        top = k * eps0
        if kov_optimal_delta(eps0, delta0, k, top) > delta:
            return math.inf
        lo, hi = 0.0, top
        for _ in range(200):
            if hi - lo <= 1e-12 * hi:
                break
            mid = 0.5 * (lo + hi)
            if kov_optimal_delta(eps0, delta0, k, mid) <= delta:
                hi = mid
            else:
                lo = mid
        return hi
