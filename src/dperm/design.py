"""The design matrix as dperm's algorithms see it: a read-only view of X, never a copy.

A :class:`Design` represents the *effective* rows

    x̃ᵢ = (cᵢ xᵢ, bᵢ)        (or cᵢ xᵢ without an intercept)

of a data matrix X (dense float32/float64 ndarray in C or F order, a numpy
memmap, or a scipy CSR matrix) without forming them:

* **clipping is a per-row scale** cᵢ = min(1, R/‖xᵢ‖) (R = ``data_norm``): the
  rows' norms are computed once, in one chunked pass, and the scale multiplies
  the n-vectors of the products (Xθ ⊙ c, Xᵀ(c ⊙ v)), never X;
* **the intercept is an implicit public column** of value bᵢ = s
  (``intercept_scaling``), applied inside the products (z += θ_d·s,
  g_d = s·Σvᵢ), never by appending a column to X;
* **float32 stays float32**: products are accumulated in float64, block by
  block, so no float64 copy of X is ever made; CSR stays CSR.

Everything the algorithms of the GLM path do with the data goes through the
few methods of this class (design principle 7, "one oracle, many backends";
``docs/data_path.md`` and the interface note for other backends):

* margins Xθ and weighted sums Xᵀv: :meth:`~Design.matvec` (``X @ θ``),
  :meth:`~Design.rmatvec` (``X.T @ v``);
* loss value and gradient in one pass: :meth:`~Design.glm_value_and_gradient`,
  :meth:`~Design.glm_gradient_sum`, :meth:`~Design.glm_value`;
* Hessian-vector products in one pass: :meth:`~Design.glm_hessian_vector`; the
  Hessian matrix of a narrow design: :meth:`~Design.glm_hessian`;
* clipped per-example gradient sums: :meth:`~Design.glm_clipped_sum`,
  :meth:`~Design.softmax_clipped_sum`, over the batches of :meth:`~Design.batches`;
* row norms of the effective rows: :meth:`~Design.row_norms`;
* a subset of rows: :meth:`~Design.take` (copies those rows only);
* second moments (SSP/AdaSSP): :meth:`~Design.gram` (d × d, block by block);
* the matrix itself, only where an algorithm inherently needs it (nonconvex
  objective perturbation's MILP, Frank-Wolfe's ℓ∞ entrywise clipping, a
  ``per_example_grad`` callable's batch): :meth:`~Design.to_dense`,
  :meth:`~Design.materialize` (a full copy).

**The row bound holds exactly.**  With u = 2⁻⁵³ and d the number of columns,
the scale is cᵢ = R(1 − κ)/‖xᵢ‖_fl for every row whose computed norm
exceeds R(1 − κ), κ = (d + 16)·u.  The computed norm of d terms (squares and
sums in float64, any summation order) is within a relative γ_{d+1} ≈ (d+1)u of
the exact one (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., §3.1 and eq. (3.5)), so the *exact* norm of the real vector cᵢ·xᵢ
(cᵢ and xᵢ the stored floating-point numbers) satisfies ‖cᵢxᵢ‖ ≤
R(1 − κ)(1 + γ_{d+1} + 3u) < R; materialized rows (:meth:`to_dense`, one more
rounding per entry) stay below R as well (for R ≥ 2⁻⁹⁰⁰: entries far from the
subnormal range).  Rows whose sum of squares overflows or underflows are
recomputed with an exact power-of-two rescaling, so huge rows are clipped, not
zeroed, and tiny ones keep their true norm.  Rows whose computed norm is above R
are the ones counted in ``n_clipped`` (and warned about); rows within κ of the
bound are scaled by at most 1 − κ (≈ 1 − 10⁻¹⁴ for d = 100), invisibly.  With
the intercept, ‖x̃ᵢ‖² = ‖cᵢxᵢ‖² + s² ≤ R² + s², and the public bound is
:func:`augmented_bound` = √(R² + s²)·(1 + 10⁻¹²).

Neighbouring relations are unaffected: clipping is a fixed public map applied
to each record separately (it reads only that record and the public R), and
the count ``n_clipped`` is data-dependent and reported to the data owner only.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
import warnings

import numpy as np

from ._validation import check_positive, check_X
from .exceptions import ClippingWarning, InvalidDataError

__all__ = ["Design", "as_design", "augmented_bound", "clip_factors"]

#: bytes of float64 per block of rows in chunked passes (fits in a core's L2 cache)
_CHUNK_BYTES = 1 << 20
_U = 2.0**-53
#: relative slack of the augmented bound √(R² + s²) (covers its own rounding)
_BOUND_SLACK = 1e-12


def _issparse(X) -> bool:
    mod = sys.modules.get("scipy.sparse")
    return mod is not None and mod.issparse(X)


def _is_dask(X) -> bool:
    """True for a Dask collection (checked without importing dask)."""
    return type(X).__module__.split(".")[0] == "dask"


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
    return math.sqrt(data_norm**2 + intercept_scaling**2) * (1.0 + _BOUND_SLACK)


def _rows_per_chunk(width: int) -> int:
    return max(1, _CHUNK_BYTES // (8 * max(1, width)))


@functools.lru_cache(maxsize=1)
def blas_controller():
    """One ``threadpoolctl.ThreadpoolController`` per process (building one scans the
    loaded libraries)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _gather(A, rows):
    """Rows of a dense array (``np.take``: ~25 % faster than fancy indexing for a
    mini-batch), of a CSR matrix, or of a per-row vector; slices are views."""
    if isinstance(rows, slice) or not isinstance(A, np.ndarray):
        return A[rows]
    rows = np.asarray(rows)
    if rows.dtype == bool:
        rows = np.flatnonzero(rows)
    return np.take(A, rows, axis=0)


def _freeze(a):
    if isinstance(a, np.ndarray):
        a.flags.writeable = False
    return a


# ----------------------------------------------------------------------------- row norms
def _sq_norms_dense(X) -> np.ndarray:
    n, d = X.shape
    out = np.empty(n)
    step = _rows_per_chunk(d)
    for a in range(0, n, step):
        blk = X[a : a + step]
        if blk.dtype != np.float64:
            blk = blk.astype(np.float64)
        np.einsum("ij,ij->i", blk, blk, out=out[a : a + step])
    return out


def _sq_norms_csr(X) -> np.ndarray:
    n = X.shape[0]
    out = np.zeros(n)
    indptr, data = X.indptr, X.data
    per_row = max(1, X.nnz // max(1, n))
    step = _rows_per_chunk(per_row)
    for a in range(0, n, step):
        b = min(n, a + step)
        p0, p1 = int(indptr[a]), int(indptr[b])
        if p1 == p0:
            continue
        sq = data[p0:p1].astype(np.float64)
        sq *= sq
        starts = indptr[a:b] - p0
        nonempty = indptr[a + 1 : b + 1] > indptr[a:b]
        out[a:b][nonempty] = np.add.reduceat(sq, starts[nonempty])
    return out


def _rows_dense(X, rows: np.ndarray) -> np.ndarray:
    """Selected rows as a float64 dense block (for the rare rows needing care)."""
    if _issparse(X):
        return np.asarray(X[rows].toarray(), dtype=np.float64)
    return np.asarray(X[rows], dtype=np.float64)


#: sums of squares below this may have lost digits to underflow (subnormal squares):
#: those rows are recomputed with a power-of-two rescaling, like overflowing ones
_TINY_SQ = 2.0**-960


def _row_norms(X) -> np.ndarray:
    """‖xᵢ‖₂ for every row, float64, in one chunked pass; rows whose sum of squares
    overflows or underflows are recomputed with an exact power-of-two rescaling.

    Raises
    ------
    InvalidDataError
        If X contains NaN or infinite values (detected in the same pass).
    """
    sparse = _issparse(X)
    sq = _sq_norms_csr(X) if sparse else _sq_norms_dense(X)
    bad = np.flatnonzero(~np.isfinite(sq) | (sq < _TINY_SQ))
    if sparse:  # stored-empty rows are exactly zero
        bad = bad[np.diff(X.indptr)[bad] > 0]
    norms = np.sqrt(sq, out=sq)
    step = _rows_per_chunk(X.shape[1])
    for a in range(0, bad.size, step):  # rare rows, in bounded blocks
        rows = bad[a : a + step]
        blk = _rows_dense(X, rows)
        if not np.isfinite(blk).all():
            raise InvalidDataError("X contains NaN or infinite values")
        m = np.max(np.abs(blk), axis=1)
        nz = m > 0  # all-zero rows keep their norm 0
        p2 = np.exp2(np.ceil(np.log2(m[nz])))  # exact scaling by a power of two
        blk = blk[nz] / p2[:, None]
        norms[rows[nz]] = p2 * np.sqrt(np.einsum("ij,ij->i", blk, blk))
    return norms


def _count_tolerance(width: int, dtype) -> float:
    """Relative excess over the bound that rounding alone can produce in a row that
    was normalized to the bound in ``dtype`` ((width + 16) ulps of that dtype)."""
    eps = np.finfo(dtype).eps if np.issubdtype(dtype, np.floating) else _U
    return (width + 16) * float(eps)


def _clip_scale(norms: np.ndarray, bound: float, width: int, count_tol: float = 0.0):
    """(scale or None, n_clipped): cᵢ = R(1 − κ)/‖xᵢ‖ where ‖xᵢ‖ > R(1 − κ) (module
    docstring); n_clipped counts the rows whose computed norm exceeds R(1 + count_tol).

    ``count_tol`` only changes what is *counted* (and warned about): rows that exceed
    the bound by no more than the rounding of their own dtype (a row normalized to
    unit norm in float32, say) are not reported as clipped.  They are still scaled
    into the exact bound like every row above R(1 − κ), so the privacy guarantee
    does not depend on it."""
    kappa = (width + 16) * _U
    thr = bound * (1.0 - kappa)
    over = norms > thr
    n_clipped = int(np.count_nonzero(norms > bound * (1.0 + count_tol)))
    if not over.any():
        return None, 0
    scale = np.ones_like(norms)
    scale[over] = thr / norms[over]
    return scale, n_clipped


# ----------------------------------------------------------------------------- the view
class _Transposed:
    """``design.T``: only ``design.T @ v`` (= :meth:`Design.rmatvec`)."""

    __slots__ = ("_design",)

    def __init__(self, design: Design):
        self._design = design

    @property
    def shape(self):
        n, d = self._design.shape
        return (d, n)

    def __matmul__(self, v):
        return self._design.rmatvec(v)

    def dot(self, v):
        return self._design.rmatvec(v)


class Design:
    """Read-only view of the effective rows x̃ᵢ = (cᵢ xᵢ, bᵢ) of a data matrix X.

    Build one with :func:`as_design`; see the module docstring for what it
    represents and the guarantee ‖cᵢxᵢ‖ ≤ R.  X is referenced, never copied or
    modified; the per-row vectors (scale, norms) cost 8 bytes per row each.

    Attributes
    ----------
    shape : tuple (n, d_eff)
        d_eff = n_features + 1 with an intercept.
    X : ndarray or csr_matrix of shape (n, n_features)
        The referenced data (float32 or float64).
    n_features : int
        Columns of X (without the intercept).
    data_norm : float or None
        R, the bound the feature part was clipped to (None: no clipping).
    intercept_scaling : float or None
        s, the value of the implicit intercept column (None: no intercept).
    bound : float
        A public bound on ‖x̃ᵢ‖ (:func:`augmented_bound`; ``inf`` without
        ``data_norm``).
    n_clipped : int
        Rows whose norm exceeded ``data_norm`` and were scaled down (data
        dependent: for the data owner, not covered by a privacy guarantee).
    is_sparse : bool
    dtype : numpy.dtype
        float64: the dtype of every product (X's own dtype is ``X.dtype``).
    """

    __array_priority__ = 1000  # ``ndarray @ design`` defers to us (and raises)

    def __init__(
        self,
        X,
        *,
        scale=None,
        intercept=None,
        xnorms=None,
        data_norm=None,
        bound=math.inf,
        n_clipped=0,
    ):
        self.X = X
        self.n_features = int(X.shape[1])
        self._scale = _freeze(scale)
        self._icol = _freeze(intercept)  # None, a float s, or per-row values (n,)
        self._xnorms = _freeze(xnorms)
        self._norms = None
        self.data_norm = data_norm
        self.bound = float(bound)
        self.n_clipped = int(n_clipped)
        self.is_sparse = _issparse(X)
        self.dtype = np.dtype(np.float64)
        self.shape = (int(X.shape[0]), self.n_features + (intercept is not None))

    # ----- description ------------------------------------------------------------
    @property
    def intercept_scaling(self) -> float | None:
        """s when every row has the intercept value s, else None (also for per-row
        values after a second clipping)."""
        return float(self._icol) if isinstance(self._icol, float) else None

    @property
    def fit_intercept(self) -> bool:
        return self._icol is not None

    @property
    def scale(self) -> np.ndarray | None:
        """The per-row feature scale cᵢ (read-only), or None when all are 1."""
        return self._scale

    @property
    def T(self) -> _Transposed:
        """``design.T @ v`` is :meth:`rmatvec`."""
        return _Transposed(self)

    @property
    def nbytes(self) -> int:
        """Bytes held by the view itself (not X): the per-row vectors."""
        own = [self._scale, self._icol, self._xnorms, self._norms, getattr(self, "_info", None)]
        return int(sum(a.nbytes for a in own if isinstance(a, np.ndarray)))

    def __repr__(self) -> str:
        kind = "csr" if self.is_sparse else "dense"
        icol = "per row" if isinstance(self._icol, np.ndarray) else self._icol
        return (
            f"Design({self.shape[0]}×{self.n_features} {kind} {self.X.dtype}, "
            f"data_norm={self.data_norm!r}, intercept={icol!r}, n_clipped={self.n_clipped})"
        )

    def __array__(self, *args, **kwargs):
        raise TypeError(
            "a dperm Design is a read-only view and is never converted implicitly (that "
            "would copy X); call design.to_dense() where a materialized matrix is really "
            "needed"
        )

    # ----- helpers -------------------------------------------------------------------
    def _split(self, theta: np.ndarray):
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape[0] != self.shape[1]:
            raise InvalidDataError(
                f"theta has {theta.shape[0]} rows but the design has {self.shape[1]} "
                f"columns (n_features={self.n_features}"
                f"{' + intercept' if self.fit_intercept else ''})"
            )
        if self.fit_intercept:
            return theta[:-1], theta[-1]
        return theta, None

    def _raw_matvec(self, X, w: np.ndarray) -> np.ndarray:
        """X @ w in float64 for a block (or all) of raw rows, no copy of X."""
        if X.dtype == np.float64:
            return np.asarray(X @ w)
        n = X.shape[0]
        out = np.empty((n, *w.shape[1:]))
        step = _rows_per_chunk(X.shape[1])
        if n <= step:
            out[...] = _as64(X) @ w
            return out
        with blas_controller().limit(limits=1, user_api="blas"):  # see _blocks
            for a in range(0, n, step):
                out[a : a + step] = _as64(X[a : a + step]) @ w
        return out

    def _raw_rmatvec(self, X, u: np.ndarray) -> np.ndarray:
        """Xᵀ u in float64 for raw rows, no copy of X."""
        if X.dtype == np.float64:
            return np.asarray(X.T @ u)
        n = X.shape[0]
        step = _rows_per_chunk(X.shape[1])
        if n <= step:
            return np.asarray(_as64(X).T @ u)
        out = np.zeros((X.shape[1], *u.shape[1:]))
        with blas_controller().limit(limits=1, user_api="blas"):  # see _blocks
            for a in range(0, n, step):
                out += _as64(X[a : a + step]).T @ u[a : a + step]
        return out

    def _sub(self, a, rows):
        """Per-row vector a restricted to rows (None/float pass through)."""
        if not isinstance(a, np.ndarray) or rows is None:
            return a
        return _gather(a, rows)

    def _finish_margins(self, z, t0, scale, icol):
        if scale is not None:
            z *= scale if z.ndim == 1 else scale[:, None]
        if icol is not None:
            if z.ndim == 1:
                z += icol * t0
            elif isinstance(icol, np.ndarray):
                z += icol[:, None] * t0[None, :]
            else:
                z += icol * t0
        return z

    def _weighted_rows_sum(self, X, u, scale, icol) -> np.ndarray:
        """Σᵢ uᵢ x̃ᵢ for raw rows X with their scale and intercept values."""
        us = u if scale is None else (u * scale if u.ndim == 1 else u * scale[:, None])
        g = self._raw_rmatvec(X, us)
        if icol is None:
            return g
        out = np.empty((self.shape[1], *u.shape[1:]))
        out[:-1] = g
        out[-1] = icol @ u if isinstance(icol, np.ndarray) else icol * u.sum(axis=0)
        return out

    # ----- products ----------------------------------------------------------------------
    def matvec(self, theta) -> np.ndarray:
        """Margins x̃ᵢᵀθ for every row.

        Parameters
        ----------
        theta : ndarray of shape (d_eff,) or (d_eff, k)

        Returns
        -------
        ndarray of float64, shape (n,) or (n, k)
        """
        w, t0 = self._split(theta)
        z = self._raw_matvec(self.X, w)
        if z.ndim == 2 and w.ndim == 1:
            z = z.ravel()
        return self._finish_margins(z, t0, self._scale, self._icol)

    def rmatvec(self, v) -> np.ndarray:
        """Σᵢ vᵢ x̃ᵢ = X̃ᵀ v (accumulated in float64).

        Parameters
        ----------
        v : ndarray of shape (n,) or (n, k)

        Returns
        -------
        ndarray of float64, shape (d_eff,) or (d_eff, k)
        """
        v = np.asarray(v, dtype=np.float64)
        if v.shape[0] != self.shape[0]:
            raise InvalidDataError(
                f"v has {v.shape[0]} entries but the design has {self.shape[0]} rows"
            )
        return self._weighted_rows_sum(self.X, v, self._scale, self._icol)

    def __matmul__(self, theta):
        return self.matvec(theta)

    def __rmatmul__(self, other):
        raise TypeError("only design @ theta and design.T @ v are supported")

    def dot(self, theta):
        return self.matvec(theta)

    # ----- norms ---------------------------------------------------------------------
    def _raw_norms(self) -> np.ndarray:
        if self._xnorms is None:
            self._xnorms = _freeze(_row_norms(self.X))
        return self._xnorms

    def row_norms(self) -> np.ndarray:
        """‖x̃ᵢ‖₂ of the effective rows (clipped, intercept included), shape (n,),
        computed once from the raw norms of the single pass over X (read-only)."""
        if self._norms is None:
            nx = self._raw_norms()
            if self._scale is not None:
                nx = nx * self._scale
            if self._icol is not None:
                nx = np.sqrt(nx * nx + np.square(self._icol))
            self._norms = _freeze(np.array(nx, dtype=np.float64, copy=True))
        return self._norms

    def _batch_info(self) -> np.ndarray:
        """(n, 2) float64 [cᵢ, ‖x̃ᵢ‖], packed once so that a mini-batch gathers its
        per-row numbers with one random access per row (16 bytes per row)."""
        info = getattr(self, "_info", None)
        if info is None:
            info = np.empty((self.shape[0], 2))
            info[:, 0] = 1.0 if self._scale is None else self._scale
            info[:, 1] = self.row_norms()
            self._info = info = _freeze(info)
        return info

    # ----- subsets -------------------------------------------------------------------
    def take(self, rows) -> Design:
        """The design of a subset of rows (a mini-batch): copies those rows of X only.

        Parameters
        ----------
        rows : None, slice, ndarray of int or bool of shape (n,)
            None = all rows (returns ``self``).

        Returns
        -------
        Design
            Same bound, scale and intercept values of the selected rows;
            ``n_clipped`` counts the selected rows that were clipped.
        """
        if rows is None:
            return self
        if isinstance(rows, numbers.Integral):
            rows = np.array([rows])
        if isinstance(rows, np.ndarray) and rows.dtype == bool:
            rows = np.flatnonzero(rows)
        Xb = self.X[rows]
        xn = self._sub(self._xnorms, rows)
        n_clipped = 0
        if self.data_norm is not None and xn is not None:
            n_clipped = int(np.count_nonzero(xn > self.data_norm))
        out = Design(
            Xb,
            scale=self._sub(self._scale, rows),
            intercept=self._sub(self._icol, rows),
            xnorms=xn,
            data_norm=self.data_norm,
            bound=self.bound,
            n_clipped=n_clipped,
        )
        if self._norms is not None:
            out._norms = _freeze(self._norms[rows])
        return out

    def reclip(self, data_norm: float, warn: bool = True) -> Design:
        """The effective rows, intercept included, clipped again to ``data_norm``
        (what :func:`as_design` does with a Design whose bound is larger): a new
        view of the same X with scale tᵢcᵢ and intercept values tᵢbᵢ,
        tᵢ = min(1, R′(1 − κ)/‖x̃ᵢ‖) with κ = (d_eff + 20)·2⁻⁵³ (the extra terms
        cover the rounding of ‖x̃ᵢ‖ = √((cᵢ‖xᵢ‖)² + bᵢ²) and of the products tᵢcᵢ).

        Parameters
        ----------
        data_norm : float > 0
        warn : bool, default True

        Returns
        -------
        Design
            ``bound`` = ``data_norm``; ``n_clipped`` = rows whose effective norm
            exceeded it.
        """
        data_norm = check_positive(data_norm, "data_norm")
        norms = self.row_norms()
        t, n_clipped = _clip_scale(norms, data_norm, self.shape[1] + 4)
        if t is None:
            scale, icol = self._scale, self._icol
        else:
            scale = t if self._scale is None else t * self._scale
            icol = None if self._icol is None else t * self._icol
        if n_clipped and warn:
            _warn_clipped(n_clipped, data_norm)
        out = Design(
            self.X,
            scale=scale,
            intercept=icol,
            xnorms=self._xnorms,
            data_norm=data_norm if self.data_norm is None else min(self.data_norm, data_norm),
            bound=data_norm,
            n_clipped=n_clipped,
        )
        if t is not None:
            out._norms = _freeze(norms * t)
        else:
            out._norms = norms
        return out

    def __getitem__(self, rows):
        if isinstance(rows, tuple):
            raise TypeError(
                "a Design supports row selection only (design[rows] or design.take(rows)); "
                "columns of the effective matrix are not stored"
            )
        return self.take(rows)

    def __len__(self) -> int:
        return self.shape[0]

    # ----- fused passes ----------------------------------------------------------------
    def _blocks(self, rows=None, *, chunked: bool = False):
        """(raw block, scale block, intercept block, row selector) for a pass: chunks of
        rows over the whole design (one block for float64 CSR, whose scipy products need
        no copy, unless ``chunked``), or the gathered batch ``rows`` as one block."""
        if rows is not None:
            Xb = _gather(self.X, rows)
            yield Xb, self._sub(self._scale, rows), self._sub(self._icol, rows), rows
            return
        n = self.shape[0]
        width = self.n_features
        if self.is_sparse:  # blocks of ~the same number of stored values
            width = max(1, self.X.nnz // max(1, n))
        step = _rows_per_chunk(width)
        whole = self.is_sparse and self.X.dtype == np.float64 and not chunked
        if n <= step or whole:
            yield self.X, self._scale, self._icol, slice(0, n)
            return
        # one BLAS thread for the small per-block products: threads cost more than they
        # save on 1 MiB blocks, and oversubscribe a busy machine (measured: a 1e6×100
        # Hessian 1.8 s on one thread, 20 s on two with other jobs running)
        with blas_controller().limit(limits=1, user_api="blas"):
            for a in range(0, n, step):
                sl = slice(a, min(n, a + step))
                yield self.X[sl], self._sub(self._scale, sl), self._sub(self._icol, sl), sl

    def _margins_block(self, Xb, w, t0, sb, ib) -> np.ndarray:
        z = self._raw_matvec(Xb, w)
        if w.ndim == 1:
            z = z.ravel()
        return self._finish_margins(z, t0, sb, ib)

    def glm_value_and_gradient(self, loss, theta, y, *, weights=None, rows=None):
        """(Σᵢ wᵢ φ(zᵢ, yᵢ), Σᵢ wᵢ φ'(zᵢ, yᵢ) x̃ᵢ), zᵢ = x̃ᵢᵀθ, in one pass over X.

        Sums, not means.  ``loss`` is evaluated block by block
        (``loss.pointwise(z_block, y_block)``, ``loss.derivative(...)``), so it must be
        elementwise (every :class:`~dperm.losses.GLMLoss` is; pass a weighted loss's
        base loss and its ``weights``).

        Parameters
        ----------
        loss : GLMLoss
        theta : ndarray of shape (d_eff,)
        y : ndarray of shape (n,)
            Labels of all rows.
        weights : ndarray of shape (n,), optional
            Per-record weights wᵢ (default 1).
        rows : None, slice or ndarray of int, optional
            Restrict the sums to these rows (a mini-batch; default all).

        Returns
        -------
        value : float
        gradient : ndarray of shape (d_eff,)
        """
        return self._glm_pass(loss, theta, y, weights, rows, True)

    def glm_gradient_sum(self, loss, theta, y, *, weights=None, rows=None) -> np.ndarray:
        """Σᵢ wᵢ φ'(x̃ᵢᵀθ, yᵢ) x̃ᵢ over ``rows`` (all by default), in one pass; the
        parameters are those of :meth:`glm_value_and_gradient`."""
        return self._glm_pass(loss, theta, y, weights, rows, False)[1]

    def glm_value(self, loss, theta, y, *, weights=None) -> float:
        """Σᵢ wᵢ φ(x̃ᵢᵀθ, yᵢ), in one pass."""
        w, t0 = self._split(theta)
        total = 0.0
        for Xb, sb, ib, sl in self._blocks():
            val = loss.pointwise(self._margins_block(Xb, w, t0, sb, ib), y[sl])
            if weights is not None:
                val = val * weights[sl]
            total += float(np.sum(val))
        return total

    def _glm_pass(self, loss, theta, y, weights, rows, need_value):
        w, t0 = self._split(theta)
        total = 0.0
        grad = np.zeros(self.shape[1])
        for Xb, sb, ib, sl in self._blocks(rows):
            z = self._margins_block(Xb, w, t0, sb, ib)
            yb = y[sl]
            s = np.asarray(loss.derivative(z, yb), dtype=np.float64)
            if weights is not None:
                s = s * weights[sl]
            if need_value:
                val = loss.pointwise(z, yb)
                total += float(np.sum(val if weights is None else val * weights[sl]))
            grad += self._weighted_rows_sum(Xb, s, sb, ib)
        return total, grad

    def glm_hessian_vector(self, loss, theta, y, v, *, weights=None) -> np.ndarray:
        """Σᵢ wᵢ φ''(x̃ᵢᵀθ, yᵢ) (x̃ᵢᵀv) x̃ᵢ = X̃ᵀ diag(w ⊙ φ'') X̃ v in one pass (both
        margins from the same block of rows).

        Parameters
        ----------
        loss : GLMLoss
        theta, v : ndarray of shape (d_eff,)
        y : ndarray of shape (n,)
        weights : ndarray of shape (n,), optional

        Returns
        -------
        ndarray of shape (d_eff,)
        """
        w, t0 = self._split(theta)
        wv, v0 = self._split(v)
        out = np.zeros(self.shape[1])
        for Xb, sb, ib, sl in self._blocks():
            h = loss.second_derivative(self._margins_block(Xb, w, t0, sb, ib), y[sl])
            u = self._margins_block(Xb, wv, v0, sb, ib)
            u *= h
            if weights is not None:
                u *= weights[sl]
            out += self._weighted_rows_sum(Xb, u, sb, ib)
        return out

    def glm_clipped_sum(
        self, loss, theta, y, clipping_norm: float, *, weights=None, rows=None
    ) -> np.ndarray:
        """Σ_{i∈rows} cᵢ gᵢ with gᵢ = wᵢ φ'(x̃ᵢᵀθ, yᵢ) x̃ᵢ and the per-example clip
        factor cᵢ = min(1, C/‖gᵢ‖), ‖gᵢ‖ = |wᵢ φ'ᵢ|·‖x̃ᵢ‖ (Abadi et al., CCS 2016,
        Algorithm 1), in one pass over the batch: never a (b, d) array of gradients.

        Non-finite φ'ᵢ (overflow) are set to 0, so one bad example cannot turn the
        release into NaN.  ‖cᵢ gᵢ‖ ≤ C for every i: the sensitivity of the sum is C
        (add/remove) or 2C (replace-one).

        Parameters
        ----------
        loss : GLMLoss
        theta : ndarray of shape (d_eff,)
        y : ndarray of shape (n,)
            Labels of *all* rows (indexed by ``rows`` here).
        clipping_norm : float
            C > 0.
        weights : ndarray of shape (n,), optional
        rows : None, slice or ndarray of int
            The batch (None = every row).

        Returns
        -------
        ndarray of shape (d_eff,)
        """
        w, t0 = self._split(theta)
        norms = self.row_norms()
        if rows is not None:  # a mini-batch: one block, gathered (the DP-SGD step)
            info = _gather(self._batch_info(), rows)  # scale and norm: one gather
            return self._clipped_block(
                loss,
                w,
                t0,
                _gather(self.X, rows),
                None if self._scale is None else info[:, 0],
                self._sub(self._icol, rows),
                _gather(y, rows),
                info[:, 1],
                None if weights is None else _gather(weights, rows),
                clipping_norm,
            )
        out = np.zeros(self.shape[1])
        for Xb, sb, ib, sl in self._blocks():
            wb = None if weights is None else weights[sl]
            out += self._clipped_block(loss, w, t0, Xb, sb, ib, y[sl], norms[sl], wb, clipping_norm)
        return out

    def _clipped_block(self, loss, w, t0, Xb, sb, ib, yb, nb, wb, clipping_norm):
        """Σ cᵢ gᵢ over one block of rows (see :meth:`glm_clipped_sum`)."""
        z = self._margins_block(Xb, w, t0, sb, ib)
        s = np.asarray(loss.derivative(z, yb), dtype=np.float64)
        if wb is not None:
            s = s * wb
        if not np.isfinite(np.sum(s)):  # overflow: drop the example rather than release NaN
            s = np.where(np.isfinite(s), s, 0.0)
        a = np.abs(s)
        a *= nb  # ‖∇ℓᵢ‖ = |sᵢ|·‖x̃ᵢ‖
        s = s * clip_factors(a, clipping_norm)  # not in place: s may alias the loss' input
        return self._weighted_rows_sum(Xb, s, sb, ib)

    def softmax_clipped_sum(self, loss, theta, y, clipping_norm: float, *, rows=None):
        """Σ_{i∈rows} cᵢ x̃ᵢ rᵢᵀ for the softmax loss (rᵢ = pᵢ − e_{yᵢ};
        ‖x̃ᵢ rᵢᵀ‖_F = ‖rᵢ‖·‖x̃ᵢ‖, cᵢ = min(1, C/‖x̃ᵢ rᵢᵀ‖_F)), shape (d_eff, k).
        Parameters as :meth:`glm_clipped_sum`, with ``theta`` of shape (d_eff, k)."""
        W, t0 = self._split(theta)
        norms = self.row_norms()
        out = np.zeros((self.shape[1], W.shape[1]))
        for Xb, sb, ib, sl in self._blocks(rows):
            Z = self._margins_block(Xb, W, t0, sb, ib)
            R = loss.residual_from_scores(Z, y[sl])
            c = clip_factors(np.sqrt(np.einsum("ij,ij->i", R, R)) * norms[sl], clipping_norm)
            R *= c[:, None]
            out += self._weighted_rows_sum(Xb, R, sb, ib)
        return out

    def batches(self, sampler, rng, steps: int):
        """The row selections of ``steps`` steps of ``sampler`` (passed unchanged to
        the clipped sums as ``rows``).  Here: ``sampler.batches(rng, steps)``, index
        arrays drawn on this machine.  A distributed backend may override this to draw
        the same law where the data live (one Bernoulli(q) per record for Poisson
        sampling) and yield its own row descriptors; the privacy event is the
        sampler's either way."""
        return sampler.batches(rng, steps)

    # ----- materializing (documented copies) -----------------------------------------
    def gram(self, weights=None) -> np.ndarray:
        """X̃ᵀ diag(w) X̃ = Σᵢ wᵢ x̃ᵢ x̃ᵢᵀ, a dense (d_eff, d_eff) float64 array, block by
        block (SSP/AdaSSP's second moment; O(n d²) work, O(d²) memory).

        Parameters
        ----------
        weights : ndarray of shape (n,), optional
            Default all ones.

        Returns
        -------
        ndarray of shape (d_eff, d_eff)
        """
        if weights is None:
            return self._weighted_gram(lambda Xb, sb, ib, sl: None)
        weights = np.asarray(weights, dtype=np.float64)
        return self._weighted_gram(lambda Xb, sb, ib, sl: weights[sl])

    def glm_hessian(self, loss, theta, y, *, weights=None) -> np.ndarray:
        """Σᵢ wᵢ φ''(x̃ᵢᵀθ, yᵢ) x̃ᵢ x̃ᵢᵀ, the (unnormalized) Hessian of a GLM loss, in one
        pass (d_eff × d_eff, O(n d²) work): for Newton steps on narrow designs.

        Parameters
        ----------
        loss : GLMLoss
        theta : ndarray of shape (d_eff,)
        y : ndarray of shape (n,)
        weights : ndarray of shape (n,), optional

        Returns
        -------
        ndarray of shape (d_eff, d_eff)
        """
        w, t0 = self._split(theta)

        def block_weights(Xb, sb, ib, sl):
            h = np.asarray(loss.second_derivative(self._margins_block(Xb, w, t0, sb, ib), y[sl]))
            return h if weights is None else h * weights[sl]

        return self._weighted_gram(block_weights)

    def _weighted_gram(self, block_weights) -> np.ndarray:
        """Σᵢ wᵢ x̃ᵢ x̃ᵢᵀ with wᵢ from ``block_weights(Xb, sb, ib, rows)`` (None = 1)."""
        d, D = self.n_features, self.shape[1]
        G = np.zeros((D, D))
        buf = None  # sparse designs: each block's d×d product densified into one buffer
        for Xb, sb, ib, sl in self._blocks(chunked=True):
            m = Xb.shape[0]
            wb = block_weights(Xb, sb, ib, sl)
            w = np.ones(m) if wb is None else np.asarray(wb, dtype=np.float64)
            c = np.ones(m) if sb is None else sb
            wc = w * c
            Xb = _as64(Xb)
            if self.is_sparse:
                import scipy.sparse as sp

                buf = np.empty((d, d)) if buf is None else buf
                (Xb.T @ (sp.diags(wc * c) @ Xb)).toarray(out=buf)
                G[:d, :d] += buf
            else:
                G[:d, :d] += Xb.T @ (Xb * (wc * c)[:, None])
            if ib is not None:
                b = np.broadcast_to(ib, (m,))
                G[:d, d] += np.asarray(Xb.T @ (wc * b)).ravel()
                G[d, d] += float(np.sum(w * b * b))
        if self._icol is not None:
            G[d, :d] = G[:d, d]
        return G

    def to_dense(self) -> np.ndarray:
        """The effective matrix X̃ as a new dense float64 array of shape (n, d_eff).

        A full copy (n·d_eff·8 bytes): only for the algorithms that inherently need
        the matrix (PATE teachers, exponential sampling over a net, NRVW's MILP) and
        for tests.  Rows satisfy ‖x̃ᵢ‖ ≤ ``bound`` (module docstring).
        """
        n, D = self.shape
        out = np.empty((n, D))
        d = self.n_features
        step = _rows_per_chunk(d)
        for a in range(0, n, step):
            sl = slice(a, min(n, a + step))
            Xb = self.X[sl]
            blk = Xb.toarray() if self.is_sparse else Xb
            out[sl, :d] = blk
            if self._scale is not None:
                out[sl, :d] *= self._scale[sl, None]
        if self._icol is not None:
            out[:, d] = self._icol
        return out

    def materialize(self):
        """The effective matrix in X's kind: a dense float64 array, or a CSR float64
        matrix (the intercept as a stored column) for sparse X.  A full copy."""
        if not self.is_sparse:
            return self.to_dense()
        import scipy.sparse as sp

        Xs = self.X.astype(np.float64)
        if self._scale is not None:
            Xs = sp.csr_matrix(sp.diags(self._scale) @ Xs)
        if self._icol is None:
            return sp.csr_matrix(Xs)
        col = np.broadcast_to(np.asarray(self._icol, dtype=np.float64), (self.shape[0],))
        return sp.hstack([Xs, sp.csr_matrix(col[:, None])], format="csr")


def _as64(block):
    """A block of rows as float64 (dense ndarray, or CSR with float64 data; the
    indices are shared)."""
    if _issparse(block):
        return block if block.dtype == np.float64 else block.astype(np.float64)
    return block if block.dtype == np.float64 else block.astype(np.float64)


def clip_factors(norms: np.ndarray, clipping_norm: float) -> np.ndarray:
    """cᵢ = min(1, C/‖gᵢ‖) (= 1 for a zero gradient), shape (b,).

    ‖cᵢ gᵢ‖ = min(‖gᵢ‖, C) ≤ C: the per-example clipping of Abadi et al.
    (CCS 2016, Algorithm 1, "clip gradient").
    """
    m = np.maximum(norms, clipping_norm)
    return np.divide(clipping_norm, m, out=m)


# ----------------------------------------------------------------------------- building
def as_design(X, data_norm=None, *, intercept_scaling=None, warn: bool = True) -> Design:
    """A :class:`Design` of X: rows clipped to ``data_norm`` by a per-row scale, an
    implicit intercept column of value ``intercept_scaling``, and no copy of X.

    Idempotent: a Design whose ``bound`` is ≤ ``data_norm`` (or any Design when
    ``data_norm`` is None) is returned unchanged, so an estimator can hand its
    Design to an algorithm that calls ``as_design`` again with the effective bound.
    A Design with a larger bound is clipped again, as a whole row (intercept
    included), to ``data_norm``.

    Parameters
    ----------
    X : ndarray, numpy.memmap, scipy.sparse matrix or Design, shape (n, d)
        float32 and float64 arrays (C or F order) and CSR matrices are referenced
        as they are; other dtypes and sparse formats are converted first (a copy).
    data_norm : float > 0 or None
        R: rows with ‖xᵢ‖ > R are scaled to norm < R (module docstring); None =
        no clipping (``bound`` is then ``inf``).
    intercept_scaling : float > 0 or None
        s: add the implicit column of value s (not allowed on a Design).
    warn : bool, default True
        Emit a :class:`~dperm.exceptions.ClippingWarning` when rows are clipped.

    Returns
    -------
    Design

    Raises
    ------
    InvalidDataError
        X not 2-D, empty, non-numeric, or containing NaN/inf; an intercept asked
        for on a Design.
    InvalidPrivacyParameter
        ``data_norm`` or ``intercept_scaling`` not a positive finite number.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[3.0, 4.0], [0.3, 0.4]])
    >>> D = as_design(X, 1.0, intercept_scaling=0.5, warn=False)
    >>> D.shape, D.n_clipped
    ((2, 3), 1)
    >>> np.round(D @ np.array([1.0, 1.0, 2.0]), 6)
    array([2.4, 1.7])
    >>> np.shares_memory(D.X, X)
    True
    """
    if data_norm is not None:
        data_norm = check_positive(data_norm, "data_norm")
    if _is_dask(X):  # the distributed backend (issue #12 §2), imported only when needed
        try:
            from ._dask import as_dask_design
        except ImportError as exc:
            raise InvalidDataError(
                f"X is a Dask collection ({type(X).__name__}) but dperm's Dask backend "
                f"(dperm._dask) is not available: {exc}"
            ) from None
        return as_dask_design(X, data_norm, intercept_scaling=intercept_scaling, warn=warn)
    if isinstance(X, Design):
        if intercept_scaling is not None:
            raise InvalidDataError(
                "intercept_scaling cannot be given for a Design (its intercept column, if "
                f"any, is already part of it): got {intercept_scaling!r} for {X!r}"
            )
        if data_norm is None or X.bound <= data_norm:
            return X
        return X.reclip(data_norm, warn=warn)
    X = check_X(X, check_finite=False)  # NaN/inf: refused by the row-norm pass below
    s = None
    if intercept_scaling is not None:
        s = check_positive(intercept_scaling, "intercept_scaling")
    xnorms = None
    scale, n_clipped = None, 0
    if data_norm is not None:
        xnorms = _row_norms(X)  # also the finite check
        tol = _count_tolerance(X.shape[1], X.dtype)
        scale, n_clipped = _clip_scale(xnorms, data_norm, X.shape[1], tol)
    else:
        _check_finite(X)
    if n_clipped and warn:
        _warn_clipped(n_clipped, data_norm)
    bound = math.inf if data_norm is None else augmented_bound(data_norm, s)
    return Design(
        X,
        scale=scale,
        intercept=s,
        xnorms=xnorms,
        data_norm=data_norm,
        bound=bound,
        n_clipped=n_clipped,
    )


def _check_finite(X) -> None:
    """Raise InvalidDataError on NaN/inf: a sum first (one pass, no temporary), then
    the exact check block by block only if the sum is not finite."""
    data = X.data if _issparse(X) else X
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(data, dtype=np.float64)):
            return
    if data.ndim == 1:
        if not np.isfinite(data).all():
            raise InvalidDataError("X contains NaN or infinite values")
        return
    step = _rows_per_chunk(data.shape[1])
    for a in range(0, data.shape[0], step):
        if not np.isfinite(data[a : a + step]).all():
            raise InvalidDataError("X contains NaN or infinite values")


def _warn_clipped(n_clipped: int, data_norm: float) -> None:
    warnings.warn(
        f"{n_clipped} row(s) had an ℓ2 norm above data_norm={data_norm:g} and were clipped to it",
        ClippingWarning,
        stacklevel=3,
    )
