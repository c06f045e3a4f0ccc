"""The Dask backend's input rules: what turns Dask collections into a DaskDesign
and targets, without gathering them.

The same functions as :mod:`dperm.backends.numpy_inputs` (the dispatch of
:mod:`dperm.design` calls one module or the other, keyed on the array type), for
a ``dask.array.Array``, ``dask.dataframe.DataFrame`` or Series: every check runs
on the workers, partition by partition, and only counts and errors reach the
client.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_binary_labels, check_data_norm, check_positive, float_labels
from ..exceptions import InvalidDataError
from .dask import (
    DaskDesign,
    _check_known,
    _checked_target,
    _count_clipped,
    _force,
    _is_dataframe,
    checked,
)
from .dask_tasks import _XNORM, _aux_block, _Spec
from .numpy import Design
from .numpy_inputs import INPUT_RULES, check_weight_values
from .rows import augmented_bound, count_tolerance, warn_clipped

__all__ = [*INPUT_RULES, "as_dask_design"]

#: multinomial (softmax) models are fitted on this backend: the targets are the class
#: indices of :func:`class_indices`, the softmax passes those of :class:`DaskDesign`
MULTINOMIAL = True


def _as_dask_array(X, name: str = "X"):
    """A 2-D dask array with known row chunks and one column chunk (lazy; a
    DataFrame is converted with its partition lengths, a count)."""
    import dask.array as da

    if _is_dataframe(X):
        bad = [c for c, t in X.dtypes.items() if t.kind not in "biuf"]
        if bad:
            raise InvalidDataError(
                f"{name} must be numeric: column(s) {bad[:5]} have non-numeric dtypes "
                "(transform them with a public schema first: dperm.datasets.dask_io)"
            )
        X = X.to_dask_array(lengths=True)
    if not isinstance(X, da.Array):
        raise InvalidDataError(
            f"{name} must be a dask.array.Array or dask.dataframe.DataFrame, got {type(X).__name__}"
        )
    if X.ndim != 2:
        raise InvalidDataError(
            f"{name} must be a 2-D array of shape (n_samples, n_features), got an array "
            f"with shape {X.shape}"
        )
    _check_known(X, name)
    if X.dtype.kind not in "biuf":
        raise InvalidDataError(f"{name} must be numeric: got dtype {X.dtype}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if X.shape[0] < 1:
        raise InvalidDataError(f"{name} must have at least 1 sample(s), got shape {X.shape}")
    if X.shape[1] < 1:
        raise InvalidDataError(f"{name} must have at least 1 feature, got shape {X.shape}")
    if len(X.chunks[1]) > 1:  # one column chunk: a partition is a block of whole rows
        X = X.rechunk({1: -1})
    return X


def build_design(X, data_norm=None, *, intercept_scaling=None, warn: bool = True) -> DaskDesign:
    """A :class:`DaskDesign` of a Dask array or DataFrame: rows clipped to ``data_norm``
    by a per-row scale and an implicit intercept ``intercept_scaling``, computed in one
    pass on the workers (the row norms, which is also the finite check) and persisted
    next to X's partitions.  X itself is neither copied nor persisted (persist it
    first if it fits in the cluster's memory: every pass reads it).

    Parameters
    ----------
    X : dask.array.Array or dask.dataframe.DataFrame of shape (n, d)
        Numeric; known row chunk sizes (a DataFrame's partition lengths are counted).
    data_norm : float > 0 or None
    intercept_scaling : float > 0 or None
    warn : bool, default True

    Returns
    -------
    DaskDesign

    Raises
    ------
    InvalidDataError
        Not 2-D, empty, non-numeric, NaN/inf in any partition, unknown chunk sizes.
    InvalidPrivacyParameter
        ``data_norm`` or ``intercept_scaling`` not a positive finite number.
    """
    if data_norm is not None:
        data_norm = check_data_norm(data_norm)
    s = (
        None
        if intercept_scaling is None
        else check_positive(intercept_scaling, "intercept_scaling")
    )
    X = _as_dask_array(X)
    width = X.shape[1]
    aux = X.map_blocks(
        _aux_block,
        data_norm,
        width,
        s,
        dtype=np.float64,
        chunks=(X.chunks[0], (4,)),
        meta=np.empty((0, 4)),
    ).persist()
    # one reduction: rows with a NaN/inf (raised by the pass) and the rows counted as
    # clipped, by the rule and the dtype tolerance of the one-machine count
    n_clipped = 0
    if data_norm is None:
        _force(aux)
    else:
        tol = count_tolerance(width, X.dtype)
        n_clipped = _count_clipped(aux, _XNORM, data_norm, tol)
    if n_clipped and warn:
        warn_clipped(n_clipped, data_norm, stacklevel=3)  # the caller of as_design
    spec = _Spec(
        data_norm=data_norm,
        bound=math.inf if data_norm is None else augmented_bound(data_norm, s),
        intercept=s,
        per_row_intercept=False,
        clipped=data_norm is not None,
    )
    return DaskDesign(X, aux, spec=spec, n_clipped=n_clipped)


#: the historical name of :func:`build_design`
as_dask_design = build_design


def validate_estimator_input(
    estimator, X, y=None, *, reset: bool, y_numeric: bool = False, finite_check: bool = True
):
    """The Dask side of :func:`dperm.design.validate_estimator_input`, lazily: X as
    a 2-D numeric Dask array with known row chunks (``n_features_in_`` set on fit,
    checked on predict), y aligned to X's partitions and checked on the workers.
    Nothing is gathered; NaN/inf in X is found by the row-norm pass of
    :func:`build_design` (``finite_check`` is always left to it), and a numeric
    target is checked by the workers (``y_numeric`` needs nothing more: the
    regressors' label checks refuse non-numeric targets there)."""
    X = _as_dask_array(X)
    d = X.shape[1]
    if reset:
        estimator.n_features_in_ = d
    elif getattr(estimator, "n_features_in_", d) != d:
        raise InvalidDataError(
            f"X has {d} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input"
        )
    if y is None:
        return X
    # not forced here: the estimators' label step that follows (label_set,
    # count_outside or map_labels) computes on this y and raises its errors, before
    # anything is fitted — one round trip to the cluster less per fit
    return X, _checked_target(X, y, force=False)


def label_set(y) -> np.ndarray:
    """The distinct labels of a Dask target, read off the data
    (``dask.array.unique``: a few labels reach the client)."""
    import dask.array as da

    return np.asarray(da.unique(y).compute())


def count_outside(y, classes: np.ndarray) -> int:
    """The number of labels of ``y`` not in ``classes`` (a reduction on the workers)."""
    import dask.array as da

    return int((~da.isin(y, classes)).sum().compute())


def _indices_block(yb, classes):
    return np.searchsorted(classes, yb).astype(np.int64)


def class_indices(y, classes: np.ndarray):
    """The index of each label in the sorted ``classes`` (0 … k−1), computed on the
    workers (the multinomial target; ``np.searchsorted`` itself does not take a Dask
    vector with a numpy ``classes``: issue #32, AttributeError '_meta')."""
    classes = np.asarray(classes)
    return y.map_blocks(_indices_block, classes, dtype=np.int64).persist()


def one_vs_rest(y, classes) -> list:
    """One ±1 target per class of ``classes`` (+1 where y equals it), persisted on
    the workers."""
    import dask.array as da

    out = [checked(da.where(y == c, 1.0, -1.0).persist()) for c in classes]
    if len(_SIGNS) >= 1024:
        _SIGNS.clear()
    _SIGNS.update(t.name for t in out)
    return out


#: Dask keys of the ±1 float64 targets made by :func:`one_vs_rest`, which the label
#: checks of :data:`_IDENTITY_ON_SIGNS` return unchanged (no second pass over them)
_SIGNS: set = set()
_IDENTITY_ON_SIGNS = (check_binary_labels, float_labels)


def _labels_block(yb, check, name):
    """Run a label check on one partition (errors propagate to the client)."""
    return np.asarray(check(yb, name), dtype=np.float64)


def map_labels(check, y, name: str = "y"):
    """Apply a label check of :mod:`dperm._validation` (``check(y_block, name)`` →
    float64 labels, raising :class:`~dperm.exceptions.LabelError`) to every
    partition of a Dask vector on the workers; the checked labels are persisted
    (chunked like ``y``) and any error is raised here, on the client."""
    if check in _IDENTITY_ON_SIGNS and getattr(y, "name", None) in _SIGNS:
        return y  # ±1 float64 labels of one_vs_rest: these checks return them unchanged
    out = y.map_blocks(_labels_block, check, name, dtype=np.float64).persist()
    _force(out)
    return out


def _weight_block(wb):
    return check_weight_values(np.asarray(wb, dtype=np.float64), " in a partition")


def check_sample_weight(sample_weight, n: int):
    """Dask sample weights of length n, checked in [0, 1] on the workers (the rules
    of the one-machine path; aligned to X's partitions by the design's passes).

    Raises
    ------
    InvalidDataError
    """
    import dask.array as da

    w = sample_weight
    if _is_dataframe(w):
        w = w.to_dask_array(lengths=True)
    if not isinstance(w, da.Array) or w.ndim != 1:
        raise InvalidDataError(
            f"sample_weight must have shape ({n},), got {getattr(w, 'shape', type(w))}"
        )
    _check_known(w, "sample_weight")
    if w.shape != (n,):
        raise InvalidDataError(f"sample_weight must have shape ({n},), got {w.shape}")
    w = w.map_blocks(_weight_block, dtype=np.float64).persist()
    _force(w)
    return w


def _block_margins(xb, theta):
    return Design(xb).matvec(theta)


def margins(X, theta) -> np.ndarray:
    """X θ for a validated Dask X (no clipping, no intercept), computed partition by
    partition on the workers with the one-machine arithmetic; the n (or n × k)
    margins are returned to the client (``predict`` returns one value per row)."""
    theta = np.asarray(theta, dtype=np.float64)
    extra = theta.shape[1:]
    out = X.map_blocks(
        _block_margins,
        theta,
        dtype=np.float64,
        chunks=(X.chunks[0], *[(k,) for k in extra]),
        drop_axis=[] if extra else [1],
        meta=np.empty((0,) * (1 + len(extra))),
    )
    return np.asarray(out.compute())
