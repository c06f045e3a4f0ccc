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

import numpy as np

from ..exceptions import InvalidDataError
from .numpy import Design
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
    """One partition's contribution to a pass (runs on a worker)."""
    return _apply(op, _local_design(xb, auxb, spec), yb, wb, args, rows)


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
    out = np.array(parts[0], dtype=np.float64, copy=True)
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
