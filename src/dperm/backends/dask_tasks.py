"""The worker side of the Dask backend: the functions its tasks run on a partition.

Each task builds the one-machine :class:`~dperm.backends.numpy.Design` of its
partition (:func:`_local_design`) and calls the *same* method the one-machine path
calls (:func:`_apply`), so the arithmetic of a partition is the one-machine
arithmetic; the row norms and clip scales follow :mod:`dperm.backends.rows`.  Used
by :mod:`dperm.backends.dask` (the client-side view and its passes),
:mod:`dperm.backends.dask_inputs` (building a view) and the step sessions of
:mod:`dperm.backends.dask_session`.  Nothing here imports Dask.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..exceptions import InvalidDataError
from .numpy import Design, _gather
from .rows import clip_factors, clip_scale, clipped_count, safe_row_norms

#: columns of the per-row auxiliary array persisted next to each partition
_XNORM, _SCALE, _ICOL, _NORM = range(4)


@dataclasses.dataclass(frozen=True)
class _Spec:
    """What a worker needs to rebuild the view of its partition (small, picklable)."""

    data_norm: float | None
    bound: float
    intercept: float | None  # constant s, or None
    per_row_intercept: bool  # intercept values in the aux column (after a re-clip)
    clipped: bool  # the scale column is used (data_norm given or re-clipped)


def _local_design(xb, auxb, spec: _Spec) -> Design:
    """The one-machine :class:`Design` of one partition (views of its arrays)."""
    icol = auxb[:, _ICOL] if spec.per_row_intercept else spec.intercept
    view = Design(
        xb,
        scale=auxb[:, _SCALE] if spec.clipped else None,
        intercept=icol,
        xnorms=auxb[:, _XNORM],
        data_norm=spec.data_norm,
        bound=spec.bound,
    )
    view._norms = auxb[:, _NORM]
    return view


def _batch_view(xb, auxb, yb, wb, rows, *, spec: _Spec):
    """(view, y, weights) of a partition's rows ``rows`` (None = all): the one-machine
    :class:`Design` of the gathered rows (a DP-SGD batch) with their labels and
    weights.  Every path — the step session, which gathers a batch before θ arrives,
    and the tasks — computes a partition's share of a batch on this view, so a
    partition's result depends only on its rows, never on which worker holds it."""
    if rows is None:
        return _local_design(xb, auxb, spec), yb, wb
    # float64 once (exact): the products of a step then skip the per-product conversion
    xg = _gather(xb, rows).astype(np.float64, copy=False)
    view = _local_design(xg, _gather(auxb, rows), spec)
    return (
        view,
        None if yb is None else _gather(yb, rows),
        None if wb is None else _gather(wb, rows),
    )


# ----------------------------------------------------------- a batch's clipped sum
def buffer(scratch: dict, name: str, shape, dtype=np.float64) -> np.ndarray:
    """A work array of ``shape`` kept in ``scratch`` (a dict the caller keeps from step
    to step) and reused.  A Dask worker's allocator returns freed memory to the
    system at once (``MALLOC_TRIM_THRESHOLD_``, set by the nanny), so a fresh array
    of a batch's size at every step costs page faults — more than the arithmetic."""
    size = math.prod(shape)
    buf = scratch.get(name)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = scratch[name] = np.empty(size + size // 4, dtype=dtype)
    return buf[:size].reshape(shape)


@dataclasses.dataclass
class Rows:
    """Effective rows x̃ᵢ = (cᵢ xᵢ, bᵢ) of (part of) a batch as a float64 (m, d_eff)
    array, with their norms ‖x̃ᵢ‖ (the persisted ones), labels and weights."""

    X: np.ndarray
    norms: np.ndarray
    y: np.ndarray | None
    w: np.ndarray | None


def _width(d: int, spec: _Spec) -> int:
    return d + (spec.per_row_intercept or spec.intercept is not None)


def _finish(X, d: int, aux, y, w, spec: _Spec) -> Rows:
    """Scale the raw rows in ``X[:, :d]`` and fill the intercept column."""
    if spec.clipped:
        X[:, :d] *= aux[:, _SCALE, None]
    if X.shape[1] > d:
        X[:, d] = aux[:, _ICOL] if spec.per_row_intercept else spec.intercept
    return Rows(X, aux[:, _NORM], y, w)


def batch_rows(blocks, entry, spec: _Spec, scratch: dict | None = None) -> list:
    """One worker's rows of a batch: ``entry`` = [(partition, local rows or None = all)]
    of ``blocks`` = [(xb, auxb, yb, wb)].  The gathered rows of every partition are
    one :class:`Rows` (a DP-SGD batch: a few rows, one block for all partitions, in
    ``scratch``); whole partitions stay (partition, None)."""
    out = [(i, None) for i, r in entry if r is None]
    picked = [(blocks[i], r) for i, r in entry if r is not None]
    if not picked:
        return out
    scratch = {} if scratch is None else scratch
    m, d = sum(len(r) for _, r in picked), picked[0][0][0].shape[1]
    X, aux = buffer(scratch, "X", (m, _width(d, spec))), buffer(scratch, "aux", (m, 4))
    y = None if picked[0][0][2] is None else buffer(scratch, "y", (m,))
    w = None if picked[0][0][3] is None else buffer(scratch, "w", (m,))
    pos = 0
    for (xb, auxb, yb, wb), r in picked:
        sl = slice(pos, pos + len(r))
        X[sl, :d] = _gather(xb, r)
        aux[sl] = _gather(auxb, r)
        if y is not None:
            y[sl] = _gather(yb, r)
        if w is not None:
            w[sl] = _gather(wb, r)
        pos = sl.stop
    return [_finish(X, d, aux, y, w, spec), *out]


def clip_grid_sum(rows, blocks, spec: _Spec, loss, theta, C, exponent, scratch=None):
    """Σᵢ clip_C(wᵢ φ'(x̃ᵢᵀθ, yᵢ) x̃ᵢ) over ``rows`` (:func:`batch_rows`), each term
    rounded to the grid 2^-``exponent`` (:func:`to_grid`) and added exactly: int64
    (d_eff,).  A whole partition (a full pass, DP-GD) is summed by the one-machine
    :meth:`~dperm.design.Design.glm_clipped_sum` and rounded once.  The
    per-example clipping of Abadi et al. (CCS 2016, Algorithm 1) with
    ‖∇ℓᵢ‖ = |wᵢφ'ᵢ|·‖x̃ᵢ‖ as in :meth:`dperm.design.Design.glm_clipped_sum`; every
    operation on a batch is row by row (the margins by ``einsum``, not a BLAS
    product whose rounding may depend on the other rows of the block), so a row's
    term, and with the exact sum the whole result, is the same however the rows are
    grouped.

    Raises
    ------
    ValueError
        A clipped term exceeds the grid's range (never rounded away silently).
    """
    scratch = {} if scratch is None else scratch
    total = np.zeros(len(theta), dtype=np.int64)
    unit = _unit(exponent)
    for R in rows:
        if isinstance(R, tuple):  # a whole partition (a full pass): its sum, rounded
            xb, auxb, yb, wb = blocks[R[0]]
            args = dict(size=len(theta), loss=loss, theta=theta, C=C)
            total += to_grid(
                _apply("clip", _local_design(xb, auxb, spec), yb, wb, args, None), exponent
            )
            continue
        z = np.einsum("ij,j->i", R.X, theta, out=buffer(scratch, "z", R.X.shape[:1]))
        s = np.asarray(loss.derivative(z, R.y), dtype=np.float64)
        if R.w is not None:
            s = s * R.w
        if not np.isfinite(np.sum(s)):  # overflow: drop the example, never a NaN
            s = np.where(np.isfinite(s), s, 0.0)
        a = np.abs(s)
        a *= R.norms
        s = s * clip_factors(a, C)
        s *= unit  # exact: a power of two; |each term| ≤ |sᵢ|·‖x̃ᵢ‖ ≤ C·2ᴸ < 2⁶¹
        if not np.all(np.abs(s) * R.norms < 2.0**62):
            raise ValueError("a clipped term exceeds clipping_norm (grid overflow)")
        G = np.multiply(R.X, s[:, None], out=buffer(scratch, "G", R.X.shape))
        ints = np.rint(G, out=buffer(scratch, "I", R.X.shape, np.int64), casting="unsafe")
        total += ints.sum(axis=0)
    return total


def prepare_batch(blocks, entry, *, op: str, spec: _Spec, scratch: dict | None = None):
    """What a worker gathers for one step before θ arrives (:func:`compute_batch`)."""
    if op == "clip":
        return batch_rows(blocks, entry, spec, scratch)
    return [_batch_view(*blocks[i], r, spec=spec) for i, r in entry]


def compute_batch(prepared, blocks, theta, exponent, *, op, spec, args, scratch=None):
    """One worker's int64 share of a step on the grid 2^-``exponent``: per example for
    a GLM's clipped sum (:func:`clip_grid_sum`), per partition otherwise."""
    if op == "clip":
        loss, C = args["loss"], args["C"]
        return clip_grid_sum(prepared, blocks, spec, loss, theta, C, exponent, scratch)
    args = {**args, "theta": theta}
    total = np.zeros(args["size"], dtype=np.int64)
    for view, yb, wb in prepared:
        total += to_grid(_apply(op, view, yb, wb, args, None), exponent)
    return total


# ----------------------------------------------------------- the reproducible sum
def grid_exponent(count: int, clipping_norm: float) -> int:
    """L such that 2ᴸ · ``count`` · C < 2⁶¹: the grid 2⁻ᴸ on which the partitions'
    clipped sums are added (|each partial| ≤ its rows × C, and all partials
    together ≤ ``count`` · C, so no integer sum can overflow int64)."""
    return 61 - math.frexp(max(int(count), 1) * float(clipping_norm))[1]


def to_grid(v, exponent: int) -> np.ndarray:
    """``v`` rounded to the grid 2^-``exponent``, as int64 multiples of it.

    Reproducible summation (the pre-rounding of Demmel & Nguyen, "Fast reproducible
    floating-point summation", ARITH 2013): every clipped per-example gradient of a
    GLM (:func:`clip_grid_sum`; for other losses, each partition's clipped sum) is
    rounded once, on its own, to a grid fixed by public numbers (the batch's row
    count m and C); the integers then add exactly, in any order and any grouping.
    So the sum of a batch does not depend on which worker holds which partition — a
    fit that loses a worker and recomputes its partitions elsewhere gives the model
    of the undisturbed fit, bit for bit.  The rounding error is ≤ m · 2^-(L+1) ≈
    m²·C·2⁻⁶² on a coordinate of the sum (2·10⁻¹³ C for m = 1 414): far below the
    noise (σ·C per coordinate).

    Raises
    ------
    ValueError
        A value is not finite or exceeds the grid's range (the clipped sum broke
        its bound: a bug, never rounded away silently).
    """
    s = np.asarray(v, dtype=np.float64) * _unit(exponent)
    if not np.all(np.abs(s) < 2.0**62):
        raise ValueError("a clipped partial sum is not finite or exceeds rows × clipping_norm")
    return np.rint(s).astype(np.int64)


def from_grid(total, exponent: int) -> np.ndarray:
    """The float64 value of an int64 sum on the grid 2^-``exponent``."""
    return np.asarray(total, dtype=np.int64).astype(np.float64) * _unit(-exponent)


def _unit(exponent: int) -> float:
    """2^exponent as a float64 (a product by it is exact: no overflow on the grid)."""
    return math.ldexp(1.0, exponent)


def _aux_block(xb, data_norm, width, intercept):
    """(m, 4) float64 per-row vectors of a partition: raw norm ‖xᵢ‖, clip scale cᵢ,
    intercept value bᵢ, effective norm ‖x̃ᵢ‖ — the formulas of
    :func:`dperm.design.as_design` and :meth:`Design.row_norms`, row by row.

    Raises InvalidDataError on NaN/inf (the finite check of the same pass)."""
    norms = safe_row_norms(xb)
    out = np.empty((norms.shape[0], 4))
    out[:, _XNORM] = norms
    out[:, _SCALE] = 1.0
    nx = norms
    if data_norm is not None:
        scale, _ = clip_scale(norms, data_norm, width)
        if scale is not None:
            out[:, _SCALE] = scale
            nx = norms * scale
    out[:, _ICOL] = 0.0 if intercept is None else intercept
    if intercept is not None:
        nx = np.sqrt(nx * nx + np.square(intercept))
    out[:, _NORM] = nx
    return out


def _reclip_block(auxb, data_norm, width, has_intercept):
    """Re-clip the whole effective rows of a partition to ``data_norm``
    (:func:`dperm.design._reclip`, row by row)."""
    out = np.array(auxb, dtype=np.float64, copy=True)
    t, _ = clip_scale(auxb[:, _NORM], data_norm, width)
    if t is not None:
        out[:, _SCALE] *= t
        if has_intercept:
            out[:, _ICOL] *= t
        out[:, _NORM] *= t
    return out


def _flat(result) -> np.ndarray:
    """A pass's result as one float64 vector (value first when there is one)."""
    if isinstance(result, tuple):
        value, grad = result
        return np.concatenate([[float(value)], np.ravel(grad)])
    if np.ndim(result) == 0:
        return np.array([float(result)])
    return np.ravel(np.asarray(result, dtype=np.float64))


def _partial(op, p, xb, auxb, yb, wb, spec, args, rows):
    """One partition's contribution to a pass (runs on a worker): float64, or for a
    clipped sum int64 on the grid ``args["grid"]`` (the step session's arithmetic,
    :func:`compute_batch`)."""
    grid = args.get("grid")
    if rows is not None and len(rows) == 0:
        return np.zeros(args["size"], dtype=np.float64 if grid is None else np.int64)
    if grid is not None:
        blocks = [(xb, auxb, yb, wb)]
        prepared = prepare_batch(blocks, [(0, rows)], op=op, spec=spec)
        return compute_batch(prepared, blocks, args["theta"], grid, op=op, spec=spec, args=args)
    return _apply(op, *_batch_view(xb, auxb, yb, wb, rows, spec=spec), args, None)


def _apply(op, view, yb, wb, args, rows):
    """``op`` on the one-machine view of a partition (its rows ``rows``, None = all),
    as one float64 vector of length ``args["size"]``."""
    if rows is not None and len(rows) == 0:
        return np.zeros(args["size"])
    if op == "vg":
        res = view.glm_value_and_gradient(args["loss"], args["theta"], yb, weights=wb, rows=rows)
    elif op == "g":
        res = view.glm_gradient_sum(args["loss"], args["theta"], yb, weights=wb, rows=rows)
    elif op == "v":
        res = view.glm_value(args["loss"], args["theta"], yb, weights=wb)
    elif op == "hv":
        res = view.glm_hessian_vector(args["loss"], args["theta"], yb, args["v"], weights=wb)
    elif op == "clip":
        res = view.glm_clipped_sum(
            args["loss"], args["theta"], yb, args["C"], weights=wb, rows=rows
        )
    elif op == "softclip":
        res = view.softmax_clipped_sum(args["loss"], args["theta"], yb, args["C"], rows=rows)
    elif op == "rmatvec":
        res = view.rmatvec(yb)
    elif op == "gram":
        res = view.gram(wb)
    elif op == "hess":
        res = view.glm_hessian(
            args["loss"], args["theta"], yb, weights=wb, stride=args.get("stride", 1)
        )
    elif op == "count":
        res = np.array([float(view.X.shape[0] if rows is None else len(rows))])
    else:  # pragma: no cover - internal
        raise ValueError(op)
    return _flat(res)


def _partial_group(op, ps, xs, auxs, ys, ws, spec, args, rows):
    """The sum of :func:`_partial` over the partitions ``ps`` held by one worker."""
    out = None
    for i, p in enumerate(ps):
        yb, wb = (None if v is None else v[i] for v in (ys, ws))
        r = _partial(op, p, xs[i], auxs[i], yb, wb, spec, args, rows[i])
        out = r if out is None else out + r
    return out


def _sum(*parts):
    """Σ of the partial results (float64, or int64 on a clipped sum's grid: exact)."""
    out = np.array(parts[0], copy=True)
    for a in parts[1:]:
        out += a
    return out


def _margins_block(xb, auxb, spec, theta):
    return _local_design(xb, auxb, spec).matvec(theta)


def _target_block(yb):
    """check_X_y's rules for a numeric target on one partition."""
    yb = np.asarray(yb)
    if yb.ndim == 2:
        yb = yb.ravel()
    if yb.dtype.kind not in "biuf":
        return yb
    yb = yb.astype(np.float64)
    if not np.all(np.isfinite(yb)):
        raise InvalidDataError("y contains NaN or infinite values")
    return yb


def _count_block(norms, bound, count_tol):
    return np.array([clipped_count(norms, bound, count_tol)])


def _one(block):
    return np.zeros(1)
