"""The worker side of the Dask backend: the functions its tasks run on a partition.

Each task builds the one-machine :class:`~dperm.backends.numpy.Design` of its
partition (:func:`_local_design`) and calls the *same* method the one-machine path
calls (:func:`_apply`), so the arithmetic of a partition is the one-machine
arithmetic; the row norms and clip scales follow :mod:`dperm.backends.rows`.  Used
by :mod:`dperm.backends.dask` (the client-side view and its passes),
:mod:`dperm.backends.dask_inputs` (building a view) and the DP-SGD steps of
:mod:`dperm.backends.dask_steps` (:func:`take_rows`: a chunk of lots' rows).
Nothing here imports Dask.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..exceptions import InvalidDataError
from ._products import clipped_sum_count
from .numpy import Design, _gather
from .rows import clip_scale, clipped_count, safe_row_norms

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


#: every column of the per-row array
_ALL = (_XNORM, _SCALE, _ICOL, _NORM)


def _local_design(xb, auxb, spec: _Spec, cols=_ALL) -> Design:
    """The one-machine :class:`Design` of one partition (views of its arrays; ``auxb``
    holds the per-row columns ``cols``, :func:`step_columns` at least)."""
    col = {c: auxb[:, i] for i, c in enumerate(cols)}
    view = Design(
        xb,
        scale=col[_SCALE] if spec.clipped else None,
        intercept=col[_ICOL] if spec.per_row_intercept else spec.intercept,
        xnorms=col.get(_XNORM),
        data_norm=spec.data_norm,
        bound=spec.bound,
    )
    view._norms = col[_NORM]
    return view


def step_columns(spec: _Spec) -> tuple:
    """The per-row columns a clipped sum reads: the clip scale (when rows are
    clipped), the intercept values (when they are per row) and the effective norm."""
    return (_SCALE,) * spec.clipped + (_ICOL,) * spec.per_row_intercept + (_NORM,)


def _batch_view(xb, auxb, yb, wb, rows, *, spec: _Spec):
    """(view, y, weights) of a partition's rows ``rows`` (None = all): the one-machine
    :class:`Design` of the gathered rows (a DP-SGD batch) with their labels and
    weights: a partition's result depends only on its rows, never on which worker
    holds it."""
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


# ----------------------------------------------------------- a lot's rows
def take_rows(xs, auxs, ys, ws, rows, cols=_ALL):
    """The rows ``rows[i]`` (local indices) of the partitions ``xs[i]`` held by one
    worker, concatenated in that order: (X rows in X's dtype, the per-row columns
    ``cols`` of ``auxs``, labels, weights; None where there are none).  What a chunk of
    DP-SGD lots brings to the client (:mod:`dperm.backends.dask_steps`): those rows
    and nothing else."""
    cols = list(cols)
    m = sum(len(r) for r in rows)
    heads = (xs[0], ys[0] if ys else None, ws[0] if ws else None)
    x, yo, wo = (None if a is None else np.empty((m, *a.shape[1:]), a.dtype) for a in heads)
    out = [x, np.empty((m, len(cols)), dtype=auxs[0].dtype), yo, wo]  # only the m rows
    pos = 0
    for i, r in enumerate(rows):
        sl = slice(pos, pos + len(r))
        out[1][sl] = auxs[i][r[:, None], cols]
        for dst, src in zip(out[::2] + out[3:], (xs, ys, ws), strict=True):
            if dst is not None:
                _take_into(dst[sl], src[i], r)
        pos = sl.stop
    return tuple(out)


def _take_into(dst, src, rows) -> None:
    """``dst[:] = src[rows]`` without a temporary: each row taken whole as one opaque
    record (:func:`records`: ``numpy.take`` of an unaligned array — a partition received
    over the network may be — would copy it whole first).  ``rows`` are in range (the
    client split checked global indices at the partitions' offsets), so ``mode="clip"``:
    ``numpy.take`` then writes into ``dst`` directly instead of through a buffer."""
    if not len(rows):
        return
    if src.flags.c_contiguous and src.dtype == dst.dtype:
        np.take(records(src), rows, out=records(dst), mode="clip")
    else:
        dst[...] = _gather(src, rows)


def records(a) -> np.ndarray:
    """The rows of a C-contiguous array as a 1-D array of opaque records (a view: one
    ``numpy.void`` item per row, which has no alignment to respect)."""
    rec = np.dtype((np.void, a.itemsize * math.prod(a.shape[1:])))
    return a.reshape(len(a), -1).view(rec).reshape(len(a))


# ----------------------------------------------------------- the reproducible sum
def grid_exponent(count: int, clipping_norm: float) -> int:
    """L such that 2ᴸ · ``count`` · C < 2⁶¹: the grid 2⁻ᴸ on which the partitions'
    clipped sums are added (|each partial| ≤ its rows × C, and all partials
    together ≤ ``count`` · C, so no integer sum can overflow int64)."""
    return 61 - math.frexp(max(int(count), 1) * float(clipping_norm))[1]


def to_grid(v, exponent: int) -> np.ndarray:
    """``v`` rounded to the grid 2^-``exponent``, as int64 multiples of it.

    Reproducible summation (the pre-rounding of Demmel & Nguyen, "Fast reproducible
    floating-point summation", ARITH 2013): each partition's clipped sum (computed
    by the one-machine code on that partition's rows alone) is rounded once to a
    grid 2⁻ᴸ set by the batch's row count m and C (:func:`grid_exponent`: no int64
    sum can overflow); the integers then add exactly, in any order and any
    grouping.  So a clipped sum computed on the workers (DP-GD's full batches,
    DP-SGD's large lots) does not depend on which worker holds which partition — a
    fit that loses a worker and recomputes its partitions elsewhere gives the model
    of the undisturbed fit, bit for bit.

    The rounding moves each coordinate of the sum of P partitions by at most
    P·2⁻⁽ᴸ⁺¹⁾ ≤ P·m·C·2⁻⁶¹, so the ℓ2 sensitivity of the rounded sum is at most
    C·(1 + √d·P·m·2⁻⁶⁰) instead of the C of Abadi et al.'s clipped sum (add/remove;
    2C replace-one): a relative excess of 5·10⁻¹² at d = 50, P = 8, m = 10⁵ — smaller
    than the float64 rounding of the sum itself (≈ m·2⁻⁵³ relative), which no
    mechanism of the library accounts for either (m, hence L, may differ between
    neighbouring datasets: the bound covers any L with 2ᴸ·m·C < 2⁶¹).

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
    clipped sum int64 on the grid ``args["grid"]`` (:func:`to_grid`: the partition's
    sum rounded once, so that adding the partitions does not depend on the placement);
    a count of unclipped rows (``"clipcount"``, last entry) is an integer as it is."""
    grid = args.get("grid")
    if rows is not None and len(rows) == 0:
        return np.zeros(args["size"], dtype=np.float64 if grid is None else np.int64)
    out = _apply(op, *_batch_view(xb, auxb, yb, wb, rows, spec=spec), args, None)
    if grid is None:
        return out
    if op == "clipcount":
        return np.append(to_grid(out[:-1], grid), np.int64(out[-1]))
    return to_grid(out, grid)


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
    elif op == "clipcount":  # adaptive clipping: the sum at Cₜ, the unclipped rows
        # (``view`` is the batch's rows already: _partial gathers them, rows is None)
        g, centred = clipped_sum_count(
            args["loss"], view, view.row_norms(), yb, wb, args["theta"], args["C"]
        )
        res = np.append(np.ravel(g), centred + 0.5 * view.shape[0])
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
