"""The row-norm and clipping rule: ONE rule, used by every backend.

Every backend (:mod:`dperm.backends.numpy` for dense, memmap and CSR data,
:mod:`dperm.backends.dask` on each partition of a cluster) computes the rows'
norms, their clip scales, the count of clipped rows and the public bound of the
effective rows with the functions of this module, so that the same rows give the
same scales and the same ``n_clipped`` whatever holds them.

A Design represents the *effective* rows x̃ᵢ = (cᵢ xᵢ, bᵢ): clipping is a per-row
scale cᵢ = min(1, R/‖xᵢ‖) (R = ``data_norm``) and the intercept an implicit public
column of value bᵢ = s (``intercept_scaling``).

**The row bound holds exactly.**  With u = 2⁻⁵³ and d the number of columns,
the scale is cᵢ = R(1 − κ)/‖xᵢ‖_fl for every row whose computed norm
exceeds R(1 − κ), κ = (d + 16)·u.  The computed norm of d terms (squares and
sums in float64, any summation order) is within a relative γ_{d+1} ≈ (d+1)u of
the exact one (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., §3.1 and eq. (3.5)), so the *exact* norm of the real vector cᵢ·xᵢ
(cᵢ and xᵢ the stored floating-point numbers) satisfies ‖cᵢxᵢ‖ ≤
R(1 − κ)(1 + γ_{d+1} + 3u) < R; materialized rows (``Design.to_dense``, one
more rounding per entry) stay below R as well (for R ≥ 2⁻⁹⁰⁰: entries far from
the subnormal range).  Rows whose sum of squares overflows or underflows are
recomputed with an exact power-of-two rescaling, so huge rows are clipped, not
zeroed, and tiny ones keep their true norm.  Rows whose computed norm is above R
are the ones counted in ``n_clipped`` (and warned about); rows within κ of the
bound are scaled by at most 1 − κ (≈ 1 − 10⁻¹⁴ for d = 100), invisibly.  With
the intercept, ‖x̃ᵢ‖² = ‖cᵢxᵢ‖² + s² ≤ R² + s², and the public bound is
:func:`augmented_bound` = √(R² + s²)·(1 + 10⁻¹²).

The count allows for the rounding of the data's own dtype (:func:`count_tolerance`):
a row normalized to the bound in float32, say, exceeds R by a few float32 ulps
and is not *counted* as clipped — it is still scaled into the exact bound like
every row above R(1 − κ), so the guarantee does not depend on the count.

Neighbouring relations are unaffected: clipping is a fixed public map applied
to each record separately (it reads only that record and the public R), and
the count ``n_clipped`` is data-dependent and reported to the data owner only.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._validation import (
    MAX_ROW_NORM,
    check_finite_matrix,
    rows_per_chunk,
    sp,
    sq_norms_csr,
    sq_norms_dense,
)
from ..exceptions import ClippingWarning, InvalidDataError

__all__ = [
    "augmented_bound",
    "check_finite",
    "clip_factors",
    "clip_scale",
    "clipped_count",
    "count_tolerance",
    "safe_row_norms",
    "warn_clipped",
]

#: the unit roundoff of float64
U = 2.0**-53
#: relative slack of the augmented bound √(R² + s²) (covers its own rounding)
BOUND_SLACK = 1e-12
#: sums of squares below this may have lost digits to underflow (subnormal squares):
#: those rows are recomputed with a power-of-two rescaling, like overflowing ones
TINY_SQ = 2.0**-960

#: the finiteness check of data that is not clipped (clipped data is checked by the
#: row-norm pass, :func:`safe_row_norms`)
check_finite = check_finite_matrix


def augmented_bound(data_norm: float, intercept_scaling: float | None) -> float:
    """The public bound on the effective rows ‖(c·x, s)‖ ≤ √(R² + s²)·(1 + 10⁻¹²).

    The relative slack 10⁻¹² makes the floating-point √ an upper bound (a
    larger public bound is always valid).  Without an intercept it is R.

    Parameters
    ----------
    data_norm : float > 0
        R, the bound the feature part is clipped to.
    intercept_scaling : float > 0 or None
        s, the value of the implicit intercept column.

    Returns
    -------
    float
    """
    if intercept_scaling is None:
        return float(data_norm)
    return math.sqrt(data_norm**2 + intercept_scaling**2) * (1.0 + BOUND_SLACK)


def _rows_dense(X, rows: np.ndarray) -> np.ndarray:
    """Selected rows as a float64 dense block (for the rare rows needing care)."""
    if sp.issparse(X):
        return np.asarray(X[rows].toarray(), dtype=np.float64)
    return np.asarray(X[rows], dtype=np.float64)


def safe_row_norms(X) -> np.ndarray:
    """‖xᵢ‖₂ for every row of a dense array or CSR matrix, float64, in one chunked
    pass; rows whose sum of squares overflows or underflows are recomputed with an
    exact power-of-two rescaling.

    Raises
    ------
    InvalidDataError
        If X contains NaN or infinite values (detected in the same pass), or a row
        whose norm exceeds :data:`~dperm._validation.MAX_ROW_NORM` (1e250: a value
        such as 1e308 — the products x·θ of such a row overflow float64, which gave
        NaN coefficients silently, issue #32).  Like the NaN check, this refusal
        depends on the data (it reveals that some row is that large) and precedes
        any release.
    """
    sparse = sp.issparse(X)
    sq = sq_norms_csr(X) if sparse else sq_norms_dense(X)
    bad = np.flatnonzero(~np.isfinite(sq) | (sq < TINY_SQ))
    if sparse:  # stored-empty rows are exactly zero
        bad = bad[np.diff(X.indptr)[bad] > 0]
    norms = np.sqrt(sq, out=sq)
    step = rows_per_chunk(X.shape[1])
    for a in range(0, bad.size, step):  # rare rows, in bounded blocks
        rows = bad[a : a + step]
        blk = _rows_dense(X, rows)
        if not np.isfinite(blk).all():
            raise InvalidDataError("X contains NaN or infinite values")
        m = np.max(np.abs(blk), axis=1)
        nz = m > 0  # all-zero rows keep their norm 0
        # exact scaling by 2^-e with m = f·2^e, f ∈ [0.5, 1): ldexp never overflows
        # (2^ceil(log2 m) did for m near the float64 maximum: inf, then a NaN norm)
        _, e = np.frexp(m[nz])
        blk = np.ldexp(blk[nz], -e[:, None])
        with np.errstate(over="ignore"):
            norms[rows[nz]] = np.ldexp(np.sqrt(np.einsum("ij,ij->i", blk, blk)), e)
    n_huge = int(np.count_nonzero(norms > MAX_ROW_NORM))
    if n_huge:
        raise InvalidDataError(
            f"X has {n_huge} row(s) with an ℓ2 norm above {MAX_ROW_NORM:g} (e.g. a value "
            "like 1e308, usually a sentinel or a unit error): products with such rows "
            "overflow float64; fix or drop those values, or scale the columns first"
        )
    return norms


def count_tolerance(width: int, dtype) -> float:
    """Relative excess over the bound that rounding alone can produce in a row that
    was normalized to the bound in ``dtype`` ((width + 16) ulps of that dtype)."""
    eps = np.finfo(dtype).eps if np.issubdtype(dtype, np.floating) else U
    return (width + 16) * float(eps)


def clipped_count(norms: np.ndarray, bound: float, count_tol: float = 0.0) -> int:
    """The rows counted (and warned about) as clipped: computed norm > R(1 + count_tol)."""
    return int(np.count_nonzero(norms > bound * (1.0 + count_tol)))


def clip_scale(norms: np.ndarray, bound: float, width: int, count_tol: float = 0.0):
    """(scale or None, n_clipped): cᵢ = R(1 − κ)/‖xᵢ‖ where ‖xᵢ‖ > R(1 − κ),
    κ = (width + 16)·2⁻⁵³ (module docstring); n_clipped is :func:`clipped_count`.

    ``count_tol`` only changes what is *counted* (and warned about): rows that exceed
    the bound by no more than the rounding of their own dtype (a row normalized to
    unit norm in float32, say) are not reported as clipped.  They are still scaled
    into the exact bound like every row above R(1 − κ), so the privacy guarantee
    does not depend on it."""
    kappa = (width + 16) * U
    thr = bound * (1.0 - kappa)
    over = norms > thr
    n_clipped = clipped_count(norms, bound, count_tol)
    if not over.any():
        return None, 0
    scale = np.ones_like(norms)
    scale[over] = thr / norms[over]
    return scale, n_clipped


def clip_factors(norms: np.ndarray, clipping_norm: float) -> np.ndarray:
    """cᵢ = min(1, C/‖gᵢ‖) (= 1 for a zero gradient), shape (b,).

    ‖cᵢ gᵢ‖ = min(‖gᵢ‖, C) ≤ C: the per-example clipping of Abadi et al.
    (CCS 2016, Algorithm 1, "clip gradient").
    """
    m = np.maximum(norms, clipping_norm)
    return np.divide(clipping_norm, m, out=m)


def warn_clipped(n_clipped: int, data_norm: float, stacklevel: int) -> None:
    """The :class:`~dperm.exceptions.ClippingWarning` of ``n_clipped`` rows
    (``stacklevel`` counted from the caller of this function)."""
    warnings.warn(
        f"{n_clipped} row(s) had an ℓ2 norm above data_norm={data_norm:g} and were clipped to it",
        ClippingWarning,
        stacklevel=stacklevel + 1,
    )
