"""Private per-column location and scale of the rows, within their public row bound.

Public bounds written from domain knowledge are honest and generous: a column whose
values lie in [0, 30] gets the bound [0, 500], so after the public map to [0, 1] its
values use 6 % of the range, every row lies near the same corner of the box, and a
linear model needs huge coefficients along the directions where the data varies — which
noisy gradient methods reach slowly, if at all (issue #36: raw WDBC with such bounds
fitted at the majority-class rate at ε = 1 *and* ε = 8).  This module finds, privately,
where the rows lie: a location mⱼ and a scale sⱼ of every column, so that the model can
be fitted on the standardized features (xⱼ − mⱼ)/sⱼ (:func:`affine_map`; the fitted
coefficients are mapped back to the original features, :func:`unscale_theta`).

Three Gaussian releases, all under **replace-one** neighbours with n public (the
estimators' relation), on the effective rows xᵢ of the design (clipped to the public
bound ‖xᵢ‖ ≤ R, without the intercept column):

1. **Sum of the rows** S = Σᵢ xᵢ + N(0, (z₁·2R)² I): ℓ2 sensitivity 2R (a replaced row
   moves the sum by xᵢ − xᵢ′, ‖·‖ ≤ 2R).  The column means m̂ⱼ = Sⱼ/n have noise
   σ₁ = 2Rz₁/n each; they are shrunk towards their average by the empirical-Bayes
   (James–Stein) factor λ = τ²/(τ² + σ₁²), τ² = max(0, var_j m̂ⱼ − σ₁²) (Efron & Morris,
   JASA 1973): where the noise dominates (small nε) every column gets the pooled mean —
   itself accurate to σ₁/√d — and the columns' own means where the budget allows.
2. **A histogram of the distances** ρᵢ = ‖xᵢ − m‖ on a public geometric grid (edges
   2R·2^(−k/2)) + N(0, (z₂√2)²) per bin: replace-one moves one row between two bins
   (ℓ2 sensitivity √2).  The median distance r₅₀ is read off the noisy counts
   (post-processing): the first bin, from the largest radius down, where the cumulative
   sum of the counts *clipped at zero* reaches n/2.  Clipping makes that sum monotone:
   without it, the sum over the empty bins above the data is a random walk of step σ₂ =
   z₂√2, which at small n (σ₂ of the order of n/2) could wander below zero and cross n/2
   only far below the data — a radius 10⁻⁴ of the true one and coefficients of 10⁶ in
   about 12 % of the fits at n = 200, ε = 0.5.  Clipped, the radius can be
   overestimated (a positive drift of σ₂/√(2π) a bin), never collapsed; a histogram that
   never reaches n/2 gives the largest radius.  The clipping radius of step 3 is
   r = :data:`RADIUS_FACTOR`·r₅₀.
3. **The sums of the clipped deviations and of their absolute values**,
   uᵢ = (xᵢ − m)·min(1, r/ρᵢ): (Σuᵢ, Σ|uᵢ|) + N(0, (z₃·2r)² I) on all 2d coordinates.
   Joint sensitivity 2r: for u, u′ in the ball of radius r,
   ‖u − u′‖² + ‖|u| − |u′|‖² = 2‖u‖² + 2‖u′‖² − 2Σⱼ(uⱼu′ⱼ + |uⱼ||u′ⱼ|) ≤ 2‖u‖² + 2‖u′‖²
   ≤ 4r², every term of the last sum being ≥ 0 — the absolute values are free.  The
   location is corrected by the shrunk mean deviation, and the scale sⱼ is the mean
   absolute deviation of column j, shrunk towards the pooled one and floored at the
   noise level (a column whose spread the budget cannot see is not blown up).

The three releases compose to **one Gaussian mechanism** of multiplier z with
z⁻² = z₁⁻² + z₂⁻² + z₃⁻² (μ-GDP composes as √Σμ²: Dong, Roth & Su, JRSS-B 2022,
Corollary 3.3, exact for Gaussian mechanisms); the stage shares wₖ = z²/zₖ² are
:data:`STAGE_SHARES`.  The event is ``Composed`` of the three Gaussians; everything
after the releases is post-processing (Dwork & Roth 2014, Prop. 2.1).  The idea of
re-centring and clipping to a data-dependent radius before the final estimate is that of
CoinPress (Biswas, Dong, Kamath & Ullman, NeurIPS 2020), here with a private radius
instead of a Gaussian-data assumption, and in one refinement.

Everything reads X through the design's own products (sums, margins, row norms) and,
for the absolute deviations, blocks of rows materialized one at a time: no copy of X.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._validation import check_positive, rows_per_chunk
from ..accounting.active import planned
from ..accounting.events import REPLACE_ONE, Composed, Gaussian
from ..exceptions import InvalidDataError, InvalidPrivacyParameter
from .base import private_fit

__all__ = [
    "DEFAULT_SHARE",
    "RADIUS_FACTOR",
    "STAGE_SHARES",
    "ScaleResult",
    "ScalingPlan",
    "affine_map",
    "event_of",
    "fit",
    "plan",
    "stage_multipliers",
    "unscale_theta",
]

#: the share of the fit's budget (of μ² = z⁻² of the Gaussian mechanism that meets the
#: fit's (ε, δ)) that the scaling takes when none is given
DEFAULT_SHARE = 0.25

#: the shares w = (w₁, w₂, w₃) of z⁻² of the three releases (sum 1)
STAGE_SHARES = (0.3, 0.1, 0.6)
#: the clipping radius of step 3 in units of the private median distance
RADIUS_FACTOR = 2.0
#: half-octaves of the distance histogram (edges 2R·2^(−k/2), k = 0…)
HISTOGRAM_BINS = 40
#: the scale floor: a column's scale is at least this many times the noise of its
#: mean absolute deviation (and at least FLOOR_POOLED × the pooled one)
NOISE_FLOOR = 1.0
FLOOR_POOLED = 0.1
#: the standardized features are (x − m)/(s·κ), κ = NORM_FACTOR·√d
NORM_FACTOR = 1.0


@dataclasses.dataclass(frozen=True)
class ScaleResult:
    """What :func:`fit` releases (post-processed) and spent.

    Attributes
    ----------
    location, scale : ndarray of shape (d,)
        mⱼ and sⱼ > 0 of every column of the effective rows.
    event : Composed
        The three Gaussian releases (replace-one).
    noise_multiplier : float
        z of the equivalent single Gaussian mechanism (z⁻² = Σ zₖ⁻²).
    diagnostics : dict
        ``radius`` (r), ``median_distance`` (r₅₀), ``shrinkage`` (λ of the location,
        λ of the correction, λ of the scale), ``noise`` (σ₁, σ₃ in the units of x),
        ``stage_multipliers``, ``released`` (the noisy row sum of step 1, the noisy sum of
        clipped deviations of step 3 (and of their absolute values) and the centre m it
        used: what the audit scores).
    """

    location: np.ndarray
    scale: np.ndarray
    event: Composed
    noise_multiplier: float
    diagnostics: dict


def stage_multipliers(noise_multiplier: float, shares=None) -> tuple[float, ...]:
    """z₁, z₂, z₃ with zₖ = z/√wₖ (so Σ zₖ⁻² = z⁻²).

    Examples
    --------
    >>> z = stage_multipliers(2.0)
    >>> round(sum(v**-2 for v in z), 12) == 0.25
    True
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    shares = STAGE_SHARES if shares is None else tuple(shares)
    if not (len(shares) == 3 and all(w > 0 for w in shares) and abs(sum(shares) - 1) < 1e-12):
        raise InvalidPrivacyParameter(
            f"stage shares must be 3 positive numbers summing to 1, got {shares!r}"
        )
    return tuple(z / math.sqrt(w) for w in shares)


def event_of(noise_multiplier: float, shares=None) -> Composed:
    """The event of :func:`fit` with multiplier z (public: before any data is read)."""
    zs = stage_multipliers(noise_multiplier, shares)
    return Composed(tuple(Gaussian(v, neighbouring=REPLACE_ONE) for v in zs))


def _features(X):
    """(sum of the effective feature rows, their squared norms, d) through the design."""
    d = X.n_features
    total = np.asarray(X.rmatvec(np.ones(X.shape[0])), dtype=np.float64)[:d]
    norms = np.asarray(X.row_norms(), dtype=np.float64)
    icol = X.intercept_scaling if X.fit_intercept else None
    sq = norms * norms - (icol * icol if icol is not None else 0.0)
    return total, np.maximum(sq, 0.0), d


def _distances(X, m: np.ndarray, sq: np.ndarray) -> np.ndarray:
    """ρᵢ = ‖xᵢ − m‖ for every effective feature row (one product with the design)."""
    theta = np.append(m, 0.0) if X.fit_intercept else m
    cross = np.asarray(X.matvec(theta), dtype=np.float64)
    return np.sqrt(np.maximum(sq - 2.0 * cross + float(m @ m), 0.0))


def _shrink(values: np.ndarray, noise: float, target: float | None = None):
    """Empirical-Bayes shrinkage of noisy values (noise σ each) towards their mean (or
    ``target``): (shrunk values, λ).  Post-processing (σ is public)."""
    centre = float(np.mean(values)) if target is None else float(target)
    spread = float(np.mean((values - centre) ** 2)) - noise * noise
    lam = 0.0 if spread <= 0 else spread / (spread + noise * noise)
    return centre + lam * (values - centre), lam


def _median_radius(rho, R: float, z2: float, n: int, rng) -> float:
    """The private median of the distances from a noisy histogram (step 2; the counts
    clipped at zero before their cumulative sum, module docstring)."""
    edges = 2.0 * R * 2.0 ** (-np.arange(HISTOGRAM_BINS + 1) / 2.0)  # decreasing
    # bin k holds the distances in (edges[k+1], edges[k]]; the last, everything below
    k = np.searchsorted(-edges, -np.asarray(rho), side="left") - 1
    counts = np.bincount(np.clip(k, 0, HISTOGRAM_BINS), minlength=HISTOGRAM_BINS + 1)
    noisy = counts + rng.standard_normal(counts.size) * (z2 * math.sqrt(2.0))
    above = np.cumsum(np.maximum(noisy, 0.0))  # noisy #{ρ > edges[k+1]}
    hit = np.flatnonzero(above >= 0.5 * n)
    j = int(hit[0]) if hit.size else 0
    return float(math.sqrt(edges[j] * edges[min(j + 1, HISTOGRAM_BINS)]))


def _deviation_sums(X, m: np.ndarray, rho: np.ndarray, r: float):
    """(Σᵢ uᵢ, Σᵢ |uᵢ|), uᵢ = (xᵢ − m)·min(1, r/ρᵢ), over blocks of materialized rows."""
    d = X.n_features
    n = X.shape[0]
    t = np.minimum(1.0, r / np.maximum(rho, 1e-300))
    s1 = np.asarray(X.rmatvec(t), dtype=np.float64)[:d] - m * float(t.sum())
    s2 = np.zeros(d)
    step = max(1, rows_per_chunk(d))
    for a in range(0, n, step):
        rows = slice(a, min(n, a + step))
        block = X.take(rows).materialize()
        block = block.toarray() if hasattr(block, "toarray") else np.asarray(block)
        block = block[:, :d] - m
        block *= t[rows, None]
        s2 += np.abs(block).sum(axis=0)
    return s1, s2


@private_fit  # an active dperm.budget: the event announced below is reserved first
def fit(X, *, data_norm: float, noise_multiplier: float, rng, shares=None) -> ScaleResult:
    """Private location and scale of every column of the design ``X`` (module docstring).

    Parameters
    ----------
    X : Design
        The effective rows (clipped to ``data_norm``; the intercept column, if any, is
        left out).  n = ``X.shape[0]`` is public (replace-one).
    data_norm : float
        R, the public bound on ‖xᵢ‖ of the feature part.
    noise_multiplier : float
        z of the equivalent single Gaussian mechanism.
    rng : numpy.random.Generator
    shares : tuple of 3 floats, optional
        Default :data:`STAGE_SHARES`.

    Returns
    -------
    ScaleResult

    Raises
    ------
    InvalidPrivacyParameter
        A non-positive ``noise_multiplier`` or ``data_norm``, bad ``shares``, or a
        design whose rows are not clipped to ``data_norm`` (its ``data_norm`` None or
        larger): the sensitivities above hold only for ‖xᵢ‖ ≤ R.
    InvalidDataError
        Fewer than two rows.
    """
    R = check_positive(data_norm, "data_norm")
    z1, z2, z3 = stage_multipliers(noise_multiplier, shares)
    clipped_to = getattr(X, "data_norm", None)
    if clipped_to is None or clipped_to > R:  # the sensitivities 2R, 2r need ‖xᵢ‖ ≤ R
        raise InvalidPrivacyParameter(
            f"private feature scaling needs a Design whose rows are clipped to "
            f"data_norm={R!r} (as_design(X, data_norm)); got rows clipped to {clipped_to!r}"
        )
    planned(event_of(noise_multiplier, shares))  # before the data is read
    n = X.shape[0]
    if n < 2:
        raise InvalidDataError(f"private feature scaling needs at least 2 rows, got {n}")
    total, sq, d = _features(X)
    # 1. the sum of the rows: location, shrunk towards the pooled mean
    sigma1 = 2.0 * R * z1 / n
    row_sum = total + rng.standard_normal(d) * (2.0 * R * z1)  # release 1
    m, lam1 = _shrink(row_sum / n, sigma1)
    # 2. the median distance to m (noisy histogram), the clipping radius
    rho = _distances(X, m, sq)
    r50 = _median_radius(rho, R, z2, n, rng)
    r = min(2.0 * R, RADIUS_FACTOR * r50)
    # 3. clipped deviations and their absolute values: correction and scale
    s1, s2 = _deviation_sums(X, m, rho, r)
    noise3 = 2.0 * r * z3
    s1 = s1 + rng.standard_normal(d) * noise3
    s2 = s2 + rng.standard_normal(d) * noise3
    sigma3 = noise3 / n
    shift, lam2 = _shrink(s1 / n, sigma3, target=0.0)
    location = m + shift
    mad = s2 / n
    pooled = max(float(np.mean(mad)), r50 / (2.0 * math.sqrt(d)))
    scale, lam3 = _shrink(mad, sigma3, target=pooled)
    scale = np.maximum(scale, max(NOISE_FLOOR * sigma3, FLOOR_POOLED * pooled))
    event = event_of(noise_multiplier, shares)
    info = {
        # the raw releases of steps 1 and 3 and the centre and radius they used
        "released": {
            "row_sum": row_sum,
            "deviation_sum": s1,
            "abs_deviation_sum": s2,
            "centre": m,
        },
        "radius": r,
        "median_distance": r50,
        "shrinkage": (lam1, lam2, lam3),
        "noise": (sigma1, sigma3),
        "stage_multipliers": (z1, z2, z3),
    }
    return ScaleResult(location, scale, event, float(noise_multiplier), info)


def affine_map(location: np.ndarray, scale: np.ndarray, intercept: bool, norm: float):
    """``transform(rows)``: effective rows (b, d[+1]) ↦ ((x − m)/(s·κ), intercept column
    unchanged), κ = ``norm`` (in place on the batch copy)."""
    inv = 1.0 / (np.asarray(scale, dtype=np.float64) * float(norm))
    m = np.asarray(location, dtype=np.float64)
    d = m.size

    def transform(rows: np.ndarray) -> np.ndarray:
        feats = rows[:, :d] if intercept else rows
        feats -= m
        feats *= inv
        return rows

    return transform


def unscale_theta(theta, location, scale, norm: float, intercept_scaling: float | None):
    """The model on the original effective rows equal to ``theta`` on the mapped ones:
    ⟨w, (x − m)/(sκ)⟩ + b·t = ⟨w/(sκ), x⟩ + b·(t − ⟨w/(sκ), m⟩/b).  ``theta`` of shape
    (d + 1,) or (d + 1, k) with the intercept last (post-processing).

    Raises
    ------
    InvalidPrivacyParameter
        Without an intercept column (the centring has nowhere to go).
    """
    if intercept_scaling is None or not intercept_scaling > 0:
        raise InvalidPrivacyParameter(
            "private feature scaling folds the centring into the intercept: it needs "
            "fit_intercept=True"
        )
    theta = np.array(theta, dtype=np.float64, copy=True)
    inv = 1.0 / (np.asarray(scale, dtype=np.float64) * float(norm))
    d = inv.size
    w = theta[:d] * (inv if theta.ndim == 1 else inv[:, None])
    theta[:d] = w
    theta[d] = theta[d] - (np.asarray(location) @ w) / float(intercept_scaling)
    return theta


@dataclasses.dataclass(frozen=True)
class ScalingPlan:
    """The private feature scaling of one DP-SGD run, planned from public numbers only
    (:func:`plan`): its share of the budget, its multiplier and its event."""

    share: float
    noise_multiplier: float
    event: Composed

    def run(self, X, rng) -> Scaled:
        """The releases on the design ``X`` (:func:`fit`), as a :class:`Scaled`.

        Raises
        ------
        InvalidPrivacyParameter
            ``X`` has no public row bound or no intercept column.
        """
        R, s = X.data_norm, X.intercept_scaling
        if getattr(X, "rows_stay_on_workers", False):
            raise InvalidPrivacyParameter(
                "feature_scaling='private' reads blocks of rows on this machine; the rows "
                "of this design stay on the cluster's workers: use feature_scaling='public' "
                "(or fit in memory)"
            )
        if R is None or not X.fit_intercept or s is None:
            raise InvalidPrivacyParameter(
                "feature_scaling='private' needs a public row bound (data_norm) and an "
                "intercept column (the centring is folded into the intercept)"
            )
        (child,) = rng.spawn(1)
        res = fit(X, data_norm=R, noise_multiplier=self.noise_multiplier, rng=child)
        return Scaled(res, NORM_FACTOR * math.sqrt(X.n_features), float(s), self.share)


@dataclasses.dataclass(frozen=True)
class Scaled:
    """A :class:`ScaleResult` applied: the oracle's ``transform`` and the map back."""

    result: ScaleResult
    norm: float
    intercept_scaling: float
    share: float

    @property
    def transform(self):
        return affine_map(self.result.location, self.result.scale, True, self.norm)

    def unscale(self, theta):
        r = self.result
        return unscale_theta(theta, r.location, r.scale, self.norm, self.intercept_scaling)

    @property
    def diagnostics(self) -> dict:
        """The released scaling (public once released) and its share of the budget."""
        r = self.result
        return {
            "share": self.share,
            "noise_multiplier": r.noise_multiplier,
            "location": r.location,
            "scale": r.scale,
            "norm": self.norm,
            **r.diagnostics,
        }


def plan(feature_scaling, share, epsilon, delta, neighbouring, per_example_grad=None):
    """The :class:`ScalingPlan` of a DP-SGD run, or None without ``feature_scaling``.

    z_s = z_G/√f with z_G the analytic-Gaussian multiplier of (ε, δ) (Balle & Wang,
    ICML 2018) and f = ``share``: the scaling takes the share f of μ² = z_G⁻²; the steps'
    noise is then calibrated for the composition (public numbers only).

    Raises
    ------
    InvalidPrivacyParameter
        An unknown ``feature_scaling``, a share outside (0, 1), no ε or δ, add/remove
        neighbours (n is public here), a user gradient function.
    """
    from ..accounting.gaussian import analytic_gaussian_noise_multiplier

    if feature_scaling is None:
        return None
    if feature_scaling != "private":
        raise InvalidPrivacyParameter(
            f"feature_scaling must be None or 'private', got {feature_scaling!r}"
        )
    f = DEFAULT_SHARE if share is None else float(share)
    if not 0.0 < f < 1.0:
        raise InvalidPrivacyParameter(f"scaling_share must be in (0, 1), got {share!r}")
    if epsilon is None or delta is None:
        raise InvalidPrivacyParameter(
            "feature_scaling='private' takes its share of (epsilon, delta): give both"
        )
    if neighbouring != REPLACE_ONE:
        raise InvalidPrivacyParameter(
            "feature_scaling='private' divides its sums by n: it is accounted for "
            f"replace-one neighbours (n public), got neighbouring={neighbouring!r}"
        )
    if per_example_grad is not None:
        raise InvalidPrivacyParameter(
            "feature_scaling='private' needs a GLM or softmax loss, not per_example_grad"
        )
    z = analytic_gaussian_noise_multiplier(float(epsilon), float(delta)) / math.sqrt(f)
    return ScalingPlan(f, z, event_of(z))
