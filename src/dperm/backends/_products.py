"""Small products and row selections of the numpy backend's fused passes (speed only:
each returns what the plain numpy expression returns, to rounding)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .rows import clip_factors

__all__ = [
    "clipped_rows_kernel",
    "clipped_rows_sum",
    "clipped_sum_count",
    "dense_batch",
    "design_kernel",
    "every_row",
    "mm",
    "row_weighted",
    "tmm",
]


def mm(A, w: np.ndarray) -> np.ndarray:
    """A @ w in float64; for a dense A and w of ≥ 8 columns computed as (wᵀAᵀ)ᵀ, the
    operand order OpenBLAS runs ~25 % faster for skinny products (MNIST × 10 classes)."""
    if w.ndim == 2 and w.shape[1] >= 8 and isinstance(A, np.ndarray):
        return (w.T @ A.T).T
    return np.asarray(A @ w)


def tmm(A, u: np.ndarray) -> np.ndarray:
    """Aᵀ @ u in float64; for a dense A and a matrix u computed as (uᵀA)ᵀ (about 2×
    faster than Aᵀu with OpenBLAS for a few to a few tens of columns)."""
    if u.ndim == 2 and isinstance(A, np.ndarray):
        return (u.T @ A).T
    return np.asarray(A.T @ u)


def every_row(a, stride: int):
    """Every stride-th row of a block of rows (dense or CSR) or of a per-row vector;
    None and scalars pass through."""
    return a[::stride] if (isinstance(a, np.ndarray) and a.ndim) or sp.issparse(a) else a


def row_weighted(s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per-row weights w (n,) applied to a per-row vector (n,) or matrix (n, k)."""
    return s * w if s.ndim == 1 else s * w[:, None]


def dense_batch(X, rows) -> bool:
    """Whether ``rows`` is a mini-batch of integer indices into dense, aligned float64
    rows ``X`` (the DP-SGD step's common case, :func:`clipped_rows_sum`)."""
    return (
        type(rows) is np.ndarray
        and rows.dtype.kind in "iu"
        and type(X) is np.ndarray
        and X.dtype == np.float64
        and X.flags.aligned
    )


def clipped_rows_sum(X, info, scaled, icol, loss, w, t0, y, clipping_norm, weights, rows):
    """``Design.glm_clipped_sum`` of one mini-batch of dense float64 rows as one function
    (:func:`clipped_rows_kernel` for one call)."""
    return clipped_rows_kernel(X, info, scaled, icol, loss, y, clipping_norm, weights)(w, t0, rows)


def clipped_rows_kernel(X, info, scaled, icol, loss, y, clipping_norm, weights):
    """``f(w, t0, rows)``: ``Design.glm_clipped_sum`` of one mini-batch of dense float64
    rows, with the run's constants bound once (a DP-SGD loop calls it every step:
    nothing but the step's own products and gathers runs per call).

    The same products as the general path, in the same order (the same numbers): the
    batch gathered once, its margins, the clip factors cᵢ = min(1, C/(|sᵢ|·‖x̃ᵢ‖)) from
    the precomputed norms (:func:`~dperm.backends.rows.clip_factors`), one transposed
    product.  ``info`` is the design's (n, 2) [scale, ‖x̃ᵢ‖] table, ``scaled`` whether
    rows carry a clipping scale, ``icol`` the implicit intercept column (None, a float
    or per-row values), ``weights`` per-row weights or None."""
    derivative, C = loss.derivative, float(clipping_norm)
    y = np.asarray(y)
    weights = None if weights is None else np.asarray(weights)
    add, finite, where = np.add.reduce, np.isfinite, np.where
    icol_rows = isinstance(icol, np.ndarray)

    def clipped_sum(w, t0, rows):
        inf = info.take(rows, axis=0)
        Xb = X.take(rows, axis=0)
        z = Xb @ w
        sb = inf[:, 0] if scaled else None
        if sb is not None:
            z *= sb
        ib = icol.take(rows) if icol_rows else icol
        if ib is not None:
            z += ib * t0
        s = np.asarray(derivative(z, y.take(rows)), dtype=np.float64)
        if weights is not None:
            s = s * weights.take(rows)
        if not finite(add(s)):  # overflow: drop the example rather than release NaN
            s = where(finite(s), s, 0.0)
        a = np.abs(s)
        a *= inf[:, 1]  # ‖∇ℓᵢ‖ = |sᵢ|·‖x̃ᵢ‖
        u = clip_factors(a, C)  # a new array (s may alias the loss' input)
        u *= s
        g0 = None if ib is None else (ib @ u if icol_rows else ib * add(u))
        if sb is not None:
            u *= sb
        g = Xb.T @ u
        if g0 is None:
            return g
        out = np.empty(g.size + 1)
        out[:-1] = g
        out[-1] = g0
        return out

    return clipped_sum


def design_kernel(design, loss, y, clipping_norm, weights):
    """``f(theta, rows)``: ``design.glm_clipped_sum(loss, theta, y, clipping_norm,
    weights=weights, rows=rows)`` (the numpy Design's), the same numbers; a mini-batch
    of integer rows of dense float64 X runs :func:`clipped_rows_kernel`, built at the
    first such call (a full batch never needs its (n, 2) table), anything else the
    method itself."""
    general = design.glm_clipped_sum
    d_eff, intercept = design.shape[1], design.fit_intercept
    dense = dense_batch(design.X, np.empty(0, dtype=np.intp))
    kernel = None

    def clipped_sum(theta, rows):
        nonlocal kernel
        if (
            not dense
            or type(rows) is not np.ndarray
            or rows.dtype.kind not in "iu"
            or type(theta) is not np.ndarray
            or theta.shape != (d_eff,)
            or theta.dtype != np.float64
        ):
            return general(loss, theta, y, clipping_norm, weights=weights, rows=rows)
        if kernel is None:
            info, scaled = design._batch_info(), design._scale is not None
            kernel = clipped_rows_kernel(
                design.X, info, scaled, design._icol, loss, y, clipping_norm, weights
            )
        if intercept:
            return kernel(theta[:-1], theta[-1], rows)
        return kernel(theta, None, rows)

    return clipped_sum


def clipped_sum_count(loss, rows, norms, y, weights, theta, clipping_norm):
    """(Σᵢ clip_C(gᵢ), Σᵢ (1[‖gᵢ‖ ≤ C] − ½)) of a gathered batch: the clipped gradient
    sum and the centred count of unclipped examples that adaptive clipping releases
    (:mod:`dperm.algorithms.adaptive_clipping`, Andrew et al. 2021, Algorithm 1).

    ``rows`` are the batch's effective rows — a one-machine Design of them
    (``rows @ θ`` its margins, ``rows.T @ u`` its weighted sum) or a materialized
    (b, d_eff) float64 array — and ``norms`` their norms ‖x̃ᵢ‖; ``loss`` a GLM loss
    (‖gᵢ‖ = |wᵢφ'ᵢ|·‖x̃ᵢ‖) or a softmax loss (``multiclass``: ‖gᵢ‖ = ‖rᵢ‖·‖x̃ᵢ‖); ``y``,
    ``weights`` the batch's labels and weights (or None).  The one function every
    backend runs on a batch's rows: the numpy fit's batch, the Dask fit's fetched lot
    (:mod:`dperm.backends.dask_steps`) and each partition's share of a lot summed on
    the workers (:mod:`dperm.backends.dask_tasks`)."""
    scores = rows @ theta
    if getattr(loss, "multiclass", False):
        s = loss.residual_from_scores(scores, y)
        a = np.sqrt(np.einsum("ij,ij->i", s, s))
    else:
        s = np.asarray(loss.derivative(scores, y), dtype=np.float64)
        if weights is not None:
            s = s * weights
        a = np.abs(s)
    bad = ~np.isfinite(a)
    if bad.any():  # overflow: drop the example rather than release NaN
        s = np.where(bad[:, None] if s.ndim == 2 else bad, 0.0, s)
        a = np.where(bad, 0.0, a)
    a = a * norms  # ‖gᵢ‖
    c = clip_factors(a, clipping_norm)
    u = s * (c[:, None] if s.ndim == 2 else c)
    g = rows.T @ u
    centred = float(np.count_nonzero(a <= clipping_norm)) - 0.5 * a.size
    return np.asarray(g, dtype=np.float64), centred
