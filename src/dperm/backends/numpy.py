"""The numpy backend: :class:`Design`, a read-only view of X, never a copy.

A :class:`Design` represents the *effective* rows

    x̃ᵢ = (cᵢ xᵢ, bᵢ)        (or cᵢ xᵢ without an intercept)

of a data matrix X (dense float32/float64 ndarray in C or F order, a numpy
memmap, or a scipy CSR matrix) without forming them:

* **clipping is a per-row scale** cᵢ = min(1, R/‖xᵢ‖) (R = ``data_norm``): the
  rows' norms are computed once, in one chunked pass, and the scale multiplies
  the n-vectors of the products (Xθ ⊙ c, Xᵀ(c ⊙ v)), never X — the rule and its
  exactness proof are those of :mod:`dperm.backends.rows`;
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

Build one with :func:`dperm.design.as_design` (the dispatch; for numpy and scipy
input it calls :mod:`dperm.backends.numpy_inputs`, which also holds the
estimators' input rules for these array types).
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from .._validation import check_data_norm, rows_per_chunk, sp
from ..exceptions import InvalidDataError
from ._products import clipped_rows_sum, dense_batch, every_row, mm, row_weighted, tmm
from .rows import (
    clip_factors,
    clip_scale,
    clipped_count,
    count_tolerance,
    safe_row_norms,
    warn_clipped,
)

__all__ = ["Design", "blas_controller"]


@functools.lru_cache(maxsize=1)
def blas_controller():
    """One ``threadpoolctl.ThreadpoolController`` per process (building one scans the
    loaded libraries)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _gather(A, rows):
    """Rows of a dense array (``np.take``, ~25 % faster than fancy indexing; not for an
    *unaligned* array, which it copies whole), a CSR matrix or a vector; slices: views."""
    if isinstance(rows, slice) or not isinstance(A, np.ndarray):
        return A[rows]
    rows = np.asarray(rows)
    if rows.dtype == bool:
        rows = np.flatnonzero(rows)
    return np.take(A, rows, axis=0) if A.flags.aligned else A[rows]


def _freeze(a):
    if isinstance(a, np.ndarray):
        a.flags.writeable = False
    return a


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

    Build one with :func:`dperm.design.as_design`; see the module docstring for what it
    represents and :mod:`dperm.backends.rows` for the guarantee ‖cᵢxᵢ‖ ≤ R.  X is
    referenced, never copied or modified; the per-row vectors (scale, norms) cost 8
    bytes per row each.

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
        self._curv = None  # (loss, y, θ, per-block curvature) of the last HVP pass
        self.data_norm = data_norm
        self.bound = float(bound)
        self.n_clipped = int(n_clipped)
        self.is_sparse = sp.issparse(X)
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
        """Bytes held by the view itself (not X): the per-row vectors and kept curvature."""
        own = [self._scale, self._icol, self._xnorms, self._norms, getattr(self, "_info", None)]
        own += [] if self._curv is None else self._curv[3]
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
            return mm(X, w)
        n = X.shape[0]
        out = np.empty((n, *w.shape[1:]))
        step = rows_per_chunk(X.shape[1])
        if n <= step:
            out[...] = mm(_as64(X), w)
            return out
        with blas_controller().limit(limits=1, user_api="blas"):  # see _blocks
            for a in range(0, n, step):
                out[a : a + step] = mm(_as64(X[a : a + step]), w)
        return out

    def _raw_rmatvec(self, X, u: np.ndarray) -> np.ndarray:
        """Xᵀ u in float64 for raw rows, no copy of X."""
        if X.dtype == np.float64:
            return tmm(X, u)
        n = X.shape[0]
        step = rows_per_chunk(X.shape[1])
        if n <= step:
            return tmm(_as64(X), u)
        out = np.zeros((X.shape[1], *u.shape[1:]))
        with blas_controller().limit(limits=1, user_api="blas"):  # see _blocks
            for a in range(0, n, step):
                out += tmm(_as64(X[a : a + step]), u[a : a + step])
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
            self._xnorms = _freeze(safe_row_norms(self.X))
        return self._xnorms

    def _count_clipped(self, xnorms) -> int:
        """Rows of raw norms ``xnorms`` counted as clipped to ``data_norm`` (the rule
        of :func:`~dperm.backends.rows.clip_scale`, with the tolerance of X's dtype)."""
        tol = count_tolerance(self.n_features, self.X.dtype)
        return clipped_count(xnorms, self.data_norm, tol)

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
            n_clipped = self._count_clipped(xn)
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
        data_norm = check_data_norm(data_norm)
        norms = self.row_norms()
        t, n_clipped = clip_scale(norms, data_norm, self.shape[1] + 4)
        if t is None:
            scale, icol = self._scale, self._icol
        else:
            scale = t if self._scale is None else t * self._scale
            icol = None if self._icol is None else t * self._icol
        if n_clipped and warn:
            warn_clipped(n_clipped, data_norm, stacklevel=2)
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
    def _blocks(self, rows=None, *, chunked: bool = False, widen: int = 1):
        """(raw block, scale block, intercept block, row selector) for a pass: chunks of
        rows over the whole design (one block for float64 CSR, whose scipy products need
        no copy, unless ``chunked``; ``widen`` × the usual rows, for strided passes), or
        the gathered batch ``rows`` as one block."""
        if rows is not None:
            Xb = _gather(self.X, rows)
            yield Xb, self._sub(self._scale, rows), self._sub(self._icol, rows), rows
            return
        n = self.shape[0]
        width = self.n_features
        if self.is_sparse:  # blocks of ~the same number of stored values
            width = max(1, self.X.nnz // max(1, n))
        step = rows_per_chunk(width) * widen
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
        grad = np.zeros((self.shape[1], *w.shape[1:]))
        for Xb, sb, ib, sl in self._blocks(rows):
            z = self._margins_block(Xb, w, t0, sb, ib)
            yb = y[sl]
            if need_value:
                val, s = loss.value_and_derivative(z, yb)
                total += float(np.sum(val if weights is None else val * weights[sl]))
            else:
                s = loss.derivative(z, yb)
            s = np.asarray(s, dtype=np.float64)
            if weights is not None:
                s = row_weighted(s, weights[sl])
            grad += self._weighted_rows_sum(Xb, s, sb, ib)
        return total, grad

    def glm_hessian_vector(self, loss, theta, y, v, *, weights=None) -> np.ndarray:
        """Σᵢ wᵢ ∇²φ(x̃ᵢᵀθ, yᵢ)[x̃ᵢᵀv] x̃ᵢ = X̃ᵀ diag(w ⊙ φ'') X̃ v in one pass (both
        margins in one product per block), the curvature applied by the loss's
        ``curvature_product`` (φ''·u; the softmax's k×k blocks for θ of shape (d_eff, k)).

        Parameters
        ----------
        loss : GLMLoss or Softmax
        theta, v : ndarray of shape (d_eff,) or (d_eff, k)
        y : ndarray of shape (n,)
        weights : ndarray of shape (n,), optional

        Returns
        -------
        ndarray of the shape of ``theta``
        """
        w, t0 = self._split(theta)
        wv, v0 = self._split(v)
        k = 1 if w.ndim == 1 else w.shape[1]
        both = np.column_stack([w, wv]) if w.ndim == 1 else np.hstack([w, wv])
        both0 = None if t0 is None else np.hstack([np.atleast_1d(t0), np.atleast_1d(v0)])
        out = np.zeros((self.shape[1], *w.shape[1:]))
        # the per-row curvature at θ is kept (≤ 1/8 of X's values) for the next product
        # at the same θ, loss and y (the CG steps of one Newton step): then only X̃v
        c = self._curv
        hit = c is not None and c[0] is loss and c[1] is y and np.array_equal(c[2], theta)
        states = self._curv[3] if hit else []
        for i, (Xb, sb, ib, sl) in enumerate(self._blocks()):
            if hit:
                st, u = states[i], self._margins_block(Xb, wv, v0, sb, ib)
            else:
                zu = self._margins_block(Xb, both, both0, sb, ib)
                z, u = (zu[:, 0], zu[:, 1]) if w.ndim == 1 else (zu[:, :k], zu[:, k:])
                states.append(st := loss.curvature_state(z, y[sl]))
            u = loss.apply_curvature(st, u)
            if weights is not None:
                u = row_weighted(u, weights[sl])
            out += self._weighted_rows_sum(Xb, u, sb, ib)
        if not hit and 8 * k <= self.n_features:
            self._curv = (loss, y, np.array(theta, copy=True), states)
        return out

    def glm_clipped_sum(
        self, loss, theta, y, clipping_norm: float, *, weights=None, rows=None
    ) -> np.ndarray:
        """Σ_{i∈rows} cᵢ gᵢ with gᵢ = wᵢ φ'(x̃ᵢᵀθ, yᵢ) x̃ᵢ and the per-example clip
        factor cᵢ = min(1, C/‖gᵢ‖), ‖gᵢ‖ = |wᵢ φ'ᵢ|·‖x̃ᵢ‖ (Abadi et al., CCS 2016,
        Algorithm 1), in one pass over the batch: never a (b, d) array of gradients.

        Non-finite φ'ᵢ (overflow) are set to 0 (one bad example cannot make the release
        NaN).  ‖cᵢ gᵢ‖ ≤ C: the sum's sensitivity is C (add/remove) or 2C (replace-one).

        Parameters
        ----------
        loss : GLMLoss
        theta : ndarray of shape (d_eff,)
        y : ndarray of shape (n,)
            Labels of *all* rows (indexed by ``rows`` here).
        clipping_norm : float, C > 0
        weights : ndarray of shape (n,), optional
        rows : None, slice or ndarray of int
            The batch (None = every row).

        Returns
        -------
        ndarray of shape (d_eff,)
        """
        w, t0 = self._split(theta)
        if dense_batch(self.X, rows):  # the DP-SGD step's common case, as one function
            args = (self._scale is not None, self._icol, loss, w, t0, y, clipping_norm)
            return clipped_rows_sum(self.X, self._batch_info(), *args, weights, rows)
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
        the clipped sums as ``rows``): ``sampler.batches(rng, steps)``, the law of
        :mod:`dperm.sampling`, drawn on this machine.  Every backend draws its
        batches here (the Dask backend sends each partition its share of the same
        global indices), so the same seed gives the same batches on every backend;
        the privacy event is the sampler's."""
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

    def glm_hessian(self, loss, theta, y, *, weights=None, stride: int = 1) -> np.ndarray:
        """Σᵢ wᵢ φ''(x̃ᵢᵀθ, yᵢ) x̃ᵢ x̃ᵢᵀ, the (unnormalized) Hessian of a GLM loss, in one
        pass (d_eff × d_eff, O(n d²) work): for Newton steps on narrow designs.

        Parameters
        ----------
        loss : GLMLoss
        theta : ndarray of shape (d_eff,)
        y : ndarray of shape (n,)
        weights : ndarray of shape (n,), optional
        stride : int ≥ 1, default 1
            s > 1: s × the sum over every s-th row of each block of rows, a sub-sampled
            estimate on the scale of the full sum that reads ~n/s rows (sub-sampled Newton).

        Returns
        -------
        ndarray of shape (d_eff, d_eff)
        """
        w, t0 = self._split(theta)

        def block_weights(Xb, sb, ib, sl):
            h = np.asarray(loss.second_derivative(self._margins_block(Xb, w, t0, sb, ib), y[sl]))
            return h if weights is None else h * weights[sl]

        return self._weighted_gram(block_weights, stride)

    def _weighted_gram(self, block_weights, stride: int = 1) -> np.ndarray:
        """Σᵢ wᵢ x̃ᵢ x̃ᵢᵀ, wᵢ from ``block_weights(Xb, sb, ib, rows)`` (None = 1), or ``stride`` ×
        the sum over every stride-th row of each block.  Dense blocks with wᵢ ≥ 0 go through
        the symmetric rank-k update AᵀA, A = diag(√wᵢ cᵢ) X_b (half the work of Xᵀ(w ⊙ X))."""
        d, D = self.n_features, self.shape[1]
        G = np.zeros((D, D))
        buf = None  # sparse designs: each block's d×d product densified into one buffer
        for Xb, sb, ib, sl in self._blocks(chunked=True, widen=stride):
            if stride > 1:  # every stride-th row of the block (views for dense X)
                Xb, sb, ib = (every_row(a, stride) for a in (Xb, sb, ib))
                sl = slice(sl.start, sl.stop, stride)
            m = Xb.shape[0]
            wb = block_weights(Xb, sb, ib, sl)
            w = np.ones(m) if wb is None else np.asarray(wb, dtype=np.float64)
            c = np.ones(m) if sb is None else sb
            wc = w * c
            if self.is_sparse:
                Xb = _as64(Xb)
                buf = np.empty((d, d)) if buf is None else buf
                (Xb.T @ (sp.diags(wc * c) @ Xb)).toarray(out=buf)
                G[:d, :d] += buf
            elif np.all(w >= 0.0):
                A = Xb * (np.sqrt(w) * c)[:, None]  # float64 (c and w are)
                G[:d, :d] += A.T @ A  # numpy calls BLAS syrk for Aᵀ A
            else:
                Xb = _as64(Xb)
                G[:d, :d] += Xb.T @ (Xb * (wc * c)[:, None])
            if ib is not None:
                b = np.broadcast_to(ib, (m,))
                G[:d, d] += np.asarray(Xb.T @ (wc * b)).ravel()
                G[d, d] += float(np.sum(w * b * b))
        if self._icol is not None:
            G[d, :d] = G[:d, d]
        return G * stride if stride > 1 else G

    def to_dense(self) -> np.ndarray:
        """The effective matrix X̃ as a new dense float64 array of shape (n, d_eff).

        A full copy (n·d_eff·8 bytes): only for the algorithms that inherently need
        the matrix (PATE teachers, exponential sampling over a net, NRVW's MILP) and
        for tests.  Rows satisfy ‖x̃ᵢ‖ ≤ ``bound`` (:mod:`dperm.backends.rows`).
        """
        n, D = self.shape
        out = np.empty((n, D))
        d = self.n_features
        step = rows_per_chunk(d)
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
    return block if block.dtype == np.float64 else block.astype(np.float64)
