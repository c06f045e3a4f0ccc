"""The snapping mechanism: a Laplace mechanism that is safe in floating point.

The attack it prevents (Mironov 2012, "On significance of the least
significant bits for differential privacy", ACM CCS, Sections 2–4): a
textbook Laplace sampler computes ``f(D) + λ·ln(U)`` in IEEE doubles.  The set
of doubles that ``λ·ln(U)`` can produce is sparse and irregular, and shifting it
by ``f(D)`` gives a *different* set of reachable outputs for each input: many
outputs are reachable from f(D) but not from f(D′).  Observing the low-order
bits of one release then reveals which of two neighbouring inputs was used
with high probability — the guarantee is lost entirely (ε = ∞ in the worst
case), whatever the noise scale.

The snapping mechanism (Mironov 2012, Section 5.2) releases

    clamp_B( round_Λ( clamp_B(f(D)) ⊕ S ⊗ λ ⊗ LN(U*) ) )

where U* is uniform on the doubles of (0, 1) with each double drawn with
probability equal to its spacing (a uniform real rounded down), S a uniform
sign, ⊕ ⊗ floating-point operations, Λ the smallest power of two ≥ λ,
``round_Λ`` rounding to the nearest multiple of Λ and ``clamp_B`` clamping to
[−B, B].  Rounding to the coarse grid Λ erases the low-order bits that leak;
clamping bounds the relative rounding errors.  Theorem 1 of the paper: for f
of sensitivity 1, with λ < B < 2⁴⁶ λ, it is

    ε′ = (1 + 12 B η) / λ + 2 η        -differentially private,

with η the relative error of one floating-point operation; Mironov states the
simplified bound 1/λ + 2⁻⁴⁹ B/λ for η = 2⁻⁵³.  We take η = 2⁻⁵² (one ulp, not
half) so that the bound also covers a logarithm that is faithfully rather
than correctly rounded (numpy's ``log`` is accurate to < 1 ulp; the paper
assumes correct rounding).  To reach a target ε we solve ε′(λ) = ε for λ —
"the ε adjustment" — which adds noise only in the 15th significant digit.

Arbitrary sensitivities Δ are handled exactly: Δ is rounded **up** to a power
of two Δ′ = 2^k, and the mechanism runs on f/Δ′ (an exact division) with
sensitivity ≤ 1; its output, multiplied back by Δ′ (exact), lies on the grid
Λ·Δ′, again a power of two.  A vector is released coordinate by coordinate
with budget ε/d each (basic composition, Dwork & Roth 2014, Theorem 3.16),
each coordinate having sensitivity ≤ ``sensitivity`` (an ℓ2 or ℓ1 sensitivity
bounds every coordinate's change).  For vectors of more than a few
coordinates prefer the discrete Gaussian (:mod:`dperm.mechanisms.discrete_gaussian`),
whose ℓ2 calibration does not pay the factor d.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .._rng import RandomState, check_random_state
from .._validation import check_epsilon, check_positive
from ..accounting.events import PureEpsilon
from ..exceptions import InvalidDataError, InvalidPrivacyParameter
from .gaussian import _finite_array

__all__ = [
    "SNAPPING_ETA",
    "SnappingParameters",
    "next_power_of_two",
    "snap_to_grid",
    "snapping_epsilon",
    "snapping_mechanism",
    "snapping_parameters",
    "uniform_double",
]

#: relative error per floating-point operation assumed in Mironov's Theorem 1
#: (one ulp of a double: covers a faithfully rounded ``log``).
SNAPPING_ETA = 2.0**-52


def next_power_of_two(x: float) -> float:
    """The smallest power of two ≥ ``x`` (x > 0, finite), computed exactly."""
    x = check_positive(x, "x")
    m, e = math.frexp(x)  # x = m·2^e with 0.5 ≤ m < 1
    return math.ldexp(1.0, e - 1) if m == 0.5 else math.ldexp(1.0, e)


def snap_to_grid(values, grid: float) -> np.ndarray:
    """Round to the nearest multiple of ``grid`` (a power of two: the division
    and multiplication are exact, so the result is an exact multiple)."""
    grid = check_positive(grid, "grid")
    if next_power_of_two(grid) != grid:
        raise InvalidPrivacyParameter(f"grid must be a power of two, got {grid!r}")
    v = np.asarray(values, dtype=np.float64)
    return np.rint(v / grid) * grid


def uniform_double(size, rng: RandomState) -> np.ndarray:
    """Mironov's U*: doubles in (0, 1), each drawn with probability equal to its
    spacing (the distribution of a uniform real rounded down to a double).

    The binade [2^−k, 2^−k+1) is chosen with probability 2^−k (a geometric
    exponent) and a uniform 52-bit mantissa inside it; subnormals have
    probability < 2^−1021 and are not produced.
    """
    gen = check_random_state(rng)
    k = gen.geometric(0.5, size=size)
    k = np.minimum(k, 1021)
    mant = gen.integers(0, 2**52, size=size, dtype=np.int64)
    return np.ldexp(1.0 + mant * 2.0**-52, -k)


def snapping_epsilon(lam: float, bound: float, eta: float = SNAPPING_ETA) -> float:
    """ε′ = (1 + 12·B·η)/λ + 2η of the snapping mechanism for a sensitivity-1
    function (Mironov 2012, Theorem 1 and its proof; valid for λ < B < 2⁴⁶λ).

    Parameters
    ----------
    lam : float > 0
        Laplace scale λ, in units of the sensitivity.
    bound : float > 0
        Clamping bound B, same units.
    """
    lam = check_positive(lam, "lam")
    bound = check_positive(bound, "bound")
    return (1.0 + 12.0 * bound * eta) / lam + 2.0 * eta


@dataclasses.dataclass(frozen=True)
class SnappingParameters:
    """Everything the snapping mechanism uses, in the units of the value.

    Attributes
    ----------
    unit : float
        Δ′, the sensitivity rounded up to a power of two.
    lam : float
        Laplace scale λ·Δ′ actually used.
    grid : float
        Λ·Δ′: every released coordinate is an integer multiple of it.
    bound : float
        The clamping bound B·Δ′ (a multiple of ``grid``, ≥ the bound asked for).
    epsilon_per_coordinate : float
        ε′ of one coordinate (≤ ε/d).
    epsilon : float
        Total ε′ over the d coordinates (≤ the target ε).
    """

    unit: float
    lam: float
    grid: float
    bound: float
    epsilon_per_coordinate: float
    epsilon: float
    dimension: int


def snapping_parameters(
    *, sensitivity: float, epsilon: float, bound: float, dimension: int = 1
) -> SnappingParameters:
    """Calibrate λ, Λ and B for a target total ε over ``dimension`` coordinates.

    λ (in units Δ′) solves ε′(λ, B) = ε/d exactly (Mironov 2012, Theorem 1);
    B (in units Δ′) is raised to a multiple of Λ so that clamped outputs stay
    on the grid, and λ is recomputed for the raised B until consistent.

    Raises
    ------
    InvalidPrivacyParameter
        Bad arguments, or the theorem's hypothesis λ < B < 2⁴⁶λ fails (the
        noise is wider than the clamping range, or the range is so wide that
        the floating-point error term dominates).
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_epsilon(epsilon)
    bound = check_positive(bound, "bound")
    if isinstance(dimension, bool) or not isinstance(dimension, int | np.integer) or dimension < 1:
        raise InvalidDataError(f"dimension must be an integer ≥ 1, got {dimension!r}")
    unit = next_power_of_two(sensitivity)
    b_units = bound / unit
    eps_c = epsilon / dimension
    eta = SNAPPING_ETA
    if eps_c <= 2.0 * eta:
        raise InvalidPrivacyParameter(
            f"epsilon={epsilon!r} is too small for the snapping mechanism over "
            f"{dimension} coordinate(s): the floating-point error term alone is 2η = {2 * eta:.2e}"
        )
    b_asked = b_units
    lam = grid = b_eff = math.nan
    for _ in range(10):
        lam = (1.0 + 12.0 * b_units * eta) / (eps_c - 2.0 * eta)
        lam = float(np.nextafter(lam, math.inf))  # round the scale up, never down
        grid = next_power_of_two(lam)
        b_eff = math.ceil(b_units / grid) * grid
        if b_eff == b_units:
            break
        b_units = b_eff
    if not (snapping_epsilon(lam, b_eff, eta) <= eps_c):
        raise InvalidPrivacyParameter(  # pragma: no cover - the loop converges in ≤ 2 steps
            "could not calibrate the snapping mechanism; report this as a bug"
        )
    if not (lam < b_asked and b_eff < 2.0**46 * lam):
        raise InvalidPrivacyParameter(
            "the snapping mechanism needs λ < B < 2^46·λ (Mironov 2012, Theorem 1): with "
            f"sensitivity={sensitivity!r}, epsilon={epsilon!r} over {dimension} coordinate(s) the "
            f"noise scale is λ = {lam * unit:.4g} but bound={bound!r}; widen or narrow the bound"
        )
    return SnappingParameters(
        unit=unit,
        lam=lam * unit,
        grid=grid * unit,
        bound=b_eff * unit,
        epsilon_per_coordinate=snapping_epsilon(lam, b_eff, eta),
        epsilon=dimension * snapping_epsilon(lam, b_eff, eta),
        dimension=int(dimension),
    )


def snapping_mechanism(
    value,
    *,
    sensitivity: float,
    epsilon: float,
    bound: float,
    rng: RandomState = None,
) -> tuple[np.ndarray, PureEpsilon, dict[str, Any]]:
    """Release ``value`` with the snapping mechanism: ε-DP in floating point.

    Parameters
    ----------
    value : float or array-like of shape (d,)
        The exact answer f(D); it is clamped to [−bound, bound] first.
    sensitivity : float > 0
        A public bound on how much any one coordinate of f changes between
        neighbouring datasets (the ℓ∞ sensitivity; an ℓ1 or ℓ2 sensitivity is a
        valid, looser, bound).  Rounded up to a power of two.
    epsilon : float > 0
        Total privacy budget over all coordinates (ε/d each).
    bound : float > 0
        Public bound B on |fᵢ(D)| (the clamping range).
    rng : Generator, int or None

    Returns
    -------
    released : ndarray of the shape of ``value``
        Every entry is an integer multiple of ``diagnostics["grid"]`` and lies in
        [−diagnostics["bound"], diagnostics["bound"]].
    event : PureEpsilon
        ``PureEpsilon(epsilon)`` — ε-DP for the neighbouring relation the
        sensitivity was computed for (Mironov 2012, Theorem 1 with basic
        composition over coordinates).
    diagnostics : dict
        ``grid``, ``lam`` (noise scale), ``bound``, ``unit`` (Δ′),
        ``epsilon_spent`` (≤ epsilon), ``n_clamped`` (input coordinates clamped).

    Raises
    ------
    InvalidPrivacyParameter
        Bad sensitivity, ε or bound (see :func:`snapping_parameters`).
    InvalidDataError
        Non-finite or non-numeric ``value``.
    """
    v = _finite_array(value, non_empty=True)
    p = snapping_parameters(
        sensitivity=sensitivity, epsilon=epsilon, bound=bound, dimension=int(v.size)
    )
    gen = check_random_state(rng)
    out, n_clamped = _snap(v, p, gen)
    diagnostics = {
        "mechanism": "snapping",
        "grid": p.grid,
        "lam": p.lam,
        "bound": p.bound,
        "unit": p.unit,
        "epsilon_spent": p.epsilon,
        "n_clamped": n_clamped,
    }
    return out, PureEpsilon(epsilon=check_epsilon(epsilon)), diagnostics


def _snap(v: np.ndarray, p: SnappingParameters, gen: np.random.Generator):
    """The mechanism of Mironov (2012, Section 5.2) coordinatewise with the
    calibrated parameters ``p``: clamp_B(round_Λ(clamp_B(x) ⊕ S ⊗ λ ⊗ LN(U*))), in
    units of ``p.unit`` (all scalings are by powers of two, hence exact).

    Returns (released values, number of input coordinates clamped)."""
    unit = p.unit
    lam_u, grid_u, b_u = p.lam / unit, p.grid / unit, p.bound / unit
    x = v / unit  # exact: unit is a power of two
    n_clamped = int(np.sum(np.abs(x) > b_u))
    x = np.clip(x, -b_u, b_u)
    sign = np.where(gen.integers(0, 2, size=v.shape) == 1, 1.0, -1.0)
    u = uniform_double(v.shape, gen)
    noisy = x + sign * (lam_u * np.log(u))
    out = np.clip(np.rint(noisy / grid_u) * grid_u, -b_u, b_u) * unit
    return out, n_clamped
