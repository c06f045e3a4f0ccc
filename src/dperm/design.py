"""The data path's dispatch: ONE place keyed on the array type.

Every GLM algorithm and every estimator of dperm sees its data through a
:class:`Design`, a read-only view of the *effective* rows x̃ᵢ = (cᵢ xᵢ, bᵢ) of X —
rows clipped to ``data_norm`` by a per-row scale cᵢ, the intercept an implicit
public column bᵢ = s — that never copies X (design principle 7, "one oracle, many
backends"; ``docs/data_path.md``).  The backends that serve it live in
:mod:`dperm.backends`:

* :mod:`dperm.backends.rows` — the one row-norm and clipping rule every backend
  uses, with the proof that the clipped rows satisfy ‖cᵢxᵢ‖ ≤ R exactly;
* :mod:`dperm.backends.numpy` and :mod:`~dperm.backends.numpy_inputs` — dense
  float32/float64 arrays (C or F order), numpy memmaps and scipy CSR matrices;
* :mod:`dperm.backends.dask` and :mod:`~dperm.backends.dask_inputs` — a Dask
  array or DataFrame whose partitions live on a cluster (imported here only when
  a Dask collection arrives).

This module picks the backend of an array (:func:`backend_for`, keyed on the
top-level package of the array's type; everything that is not a Dask collection
is numpy's) and owns what depends on it, so that no caller tests for a backend:

* :func:`as_design` — the Design of X;
* :func:`check_X`, :func:`check_X_y`, :func:`float_labels`,
  :func:`check_binary_labels` — the checks of :mod:`dperm._validation` for every
  array type (a Dask X is wrapped in its Design and y checked on the workers);
* :func:`validate_estimator_input`, :func:`encode_class_targets`,
  :func:`check_sample_weight`, :func:`margins` — the estimators' input rules.

It re-exports :class:`Design`, :func:`augmented_bound`, :func:`clip_factors` and
:func:`blas_controller`, so ``from dperm.design import …`` keeps working.
"""

from __future__ import annotations

import numpy as np

from . import _validation
from ._validation import check_data_norm
from .backends import numpy_inputs as _numpy_backend
from .backends._products import design_kernel
from .backends.numpy import Design, blas_controller
from .backends.rows import augmented_bound, clip_factors
from .exceptions import InvalidDataError, LabelError

__all__ = [
    "Design",
    "as_design",
    "augmented_bound",
    "backend_for",
    "blas_controller",
    "check_X",
    "check_X_y",
    "check_binary_labels",
    "check_sample_weight",
    "class_indices",
    "clip_factors",
    "encode_class_targets",
    "float_labels",
    "glm_clipped_sum_kernel",
    "margins",
    "validate_estimator_input",
]


# ----------------------------------------------------------------------------- the registry
def _dask_backend():
    """The Dask backend (issue #12 §2), imported on the first Dask collection."""
    try:
        from .backends import dask_inputs
    except ImportError as exc:
        raise InvalidDataError(
            f"got a Dask collection but dperm's Dask backend (dperm.backends.dask) is not "
            f"available: {exc}"
        ) from None
    return dask_inputs


#: the backend of each array family, by the top-level package of the array's type
#: (loaded on first use); an array of any other type is served by the numpy backend
_BACKENDS = {"dask": _dask_backend}


def backend_for(obj):
    """The input module of the backend serving ``obj``'s array type:
    :mod:`dperm.backends.dask_inputs` for a Dask collection,
    :mod:`dperm.backends.numpy_inputs` for anything else (numpy arrays and
    memmaps, scipy sparse matrices, and what numpy converts).  Both modules have
    the same functions (``build_design``, ``validate_estimator_input``,
    ``label_set``, ``count_outside``, ``one_vs_rest``, ``check_sample_weight``,
    ``map_labels``, ``margins``, ``MULTINOMIAL``)."""
    load = _BACKENDS.get(type(obj).__module__.partition(".")[0])
    return _numpy_backend if load is None else load()


# ----------------------------------------------------------------------------- the view
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
    X : ndarray, numpy.memmap, scipy.sparse matrix, Dask collection or Design, shape (n, d)
        float32 and float64 arrays (C or F order) and CSR matrices are referenced
        as they are; other dtypes and sparse formats are converted first (a copy).
        A Dask array or DataFrame is served by the Dask backend (never gathered).
    data_norm : float > 0 or None
        R: rows with ‖xᵢ‖ > R are scaled to norm < R (:mod:`dperm.backends.rows`);
        None = no clipping (``bound`` is then ``inf``).
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
        data_norm = check_data_norm(data_norm)
    if isinstance(X, Design):
        if intercept_scaling is not None:
            raise InvalidDataError(
                "intercept_scaling cannot be given for a Design (its intercept column, if "
                f"any, is already part of it): got {intercept_scaling!r} for {X!r}"
            )
        if data_norm is None or X.bound <= data_norm:
            return X
        return X.reclip(data_norm, warn=warn)
    backend = backend_for(X)
    return backend.build_design(X, data_norm, intercept_scaling=intercept_scaling, warn=warn)


# ----------------------------------------------------------------------------- validation
def check_X(
    X, name: str = "X", accept_sparse: bool = True, min_samples: int = 1, *, check_finite=True
):
    """:func:`dperm._validation.check_X` for every array type: a collection of
    another backend (Dask) is first wrapped in its Design (never gathered)."""
    if backend_for(X) is not _numpy_backend:
        X = as_design(X)
    return _validation.check_X(X, name, accept_sparse, min_samples, check_finite=check_finite)


def check_X_y(X, y, accept_sparse: bool = True, min_samples: int = 1):
    """:func:`dperm._validation.check_X_y` for every array type: a Dask X is wrapped
    in its Design and y is checked on the workers, aligned to X's partitions.

    Raises
    ------
    InvalidDataError
    """
    if backend_for(X) is not _numpy_backend:
        X = as_design(X)
    return _validation.check_X_y(X, y, accept_sparse, min_samples)


def float_labels(y, name: str = "y"):
    """:func:`dperm._validation.float_labels` for every array type (a Dask vector is
    checked partition by partition on the workers).

    Raises
    ------
    LabelError
    """
    return backend_for(y).map_labels(_validation.float_labels, y, name)


def check_binary_labels(y, name: str = "y"):
    """:func:`dperm._validation.check_binary_labels` for every array type (a Dask
    vector is checked partition by partition on the workers).

    Raises
    ------
    LabelError
        If a label is not in {-1, +1}.
    """
    return backend_for(y).map_labels(_validation.check_binary_labels, y, name)


# ----------------------------------------------------------------------------- estimators
def validate_estimator_input(
    estimator, X, y=None, *, reset: bool, y_numeric: bool = False, finite_check: bool = True
):
    """The estimators' validation of X (and y) by X's backend: scikit-learn's rules
    (and messages) for numpy and scipy input, without a copy of float32/float64
    arrays and CSR matrices; a lazy check on the workers for a Dask collection.
    ``n_features_in_`` is set when ``reset``, checked otherwise.  ``finite_check=False``
    leaves the NaN/inf check of X to the row-norm pass of the Design.

    Returns
    -------
    X or (X, y)

    Raises
    ------
    InvalidDataError
    """
    backend = backend_for(X)
    return backend.validate_estimator_input(
        estimator, X, y, reset=reset, y_numeric=y_numeric, finite_check=finite_check
    )


def encode_class_targets(estimator, y) -> list:
    """The classifier's label set ``classes_`` and its one-vs-rest ±1 targets (one
    for two classes, else one per class), for y of any backend.

    ``classes_`` is the public ``classes`` when given (labels outside it raise
    :class:`~dperm.exceptions.LabelError`, by count, never by value); otherwise it
    is read off the data, as scikit-learn does — which labels occur is then NOT
    protected (a record with a rare label changes ``classes_``, the shape of
    ``coef_`` and the budget split), and ``fit`` warns every time
    (``estimator._classes_from_data``).

    Raises
    ------
    LabelError
        Labels outside the public ``classes``, fewer than two classes, or a target
        scikit-learn does not accept for classification.
    InvalidDataError
        ``multi_class="multinomial"`` on a backend without it (Dask).
    """
    backend = backend_for(y)
    public = getattr(estimator, "classes", None)
    if public is None:
        estimator.classes_ = backend.label_set(y)
    else:
        estimator.classes_ = np.unique(np.asarray(public))
        n_unknown = backend.count_outside(y, estimator.classes_)
        if n_unknown:  # the count, never the values (part of the private records)
            raise LabelError(
                f"y has {n_unknown} label(s) outside classes={estimator.classes_.tolist()}"
            )
    k = estimator.classes_.shape[0]
    if k < 2:
        raise LabelError(
            f"{type(estimator).__name__} needs samples of at least 2 classes in the data, "
            f"got 1 class: {estimator.classes_.tolist()}"
        )
    # warned by fit once the model exists (not before a bad-parameter error)
    estimator._classes_from_data = public is None
    multinomial = getattr(estimator, "multi_class", "ovr") == "multinomial" and k > 2
    if multinomial and not backend.MULTINOMIAL:
        raise InvalidDataError(
            "multi_class='multinomial' is not available on the Dask backend yet; use "
            "multi_class='ovr' or a numpy array"
        )
    return backend.one_vs_rest(y, estimator.classes_[1:] if k == 2 else estimator.classes_)


def class_indices(y, classes: np.ndarray):
    """The multinomial target: the index (0 … k−1) of each label of ``y`` in the
    sorted ``classes``, by the backend of y (a Dask vector stays on the workers)."""
    return backend_for(y).class_indices(y, classes)


def check_sample_weight(sample_weight, n: int):
    """``sample_weight`` checked by its backend: shape (n,) (a scalar is broadcast on
    numpy), finite and in [0, 1] — a public bound: a weight > 1 would raise one
    record's sensitivity.  Error messages count the bad weights, never echo them.

    Raises
    ------
    InvalidDataError
    """
    return backend_for(sample_weight).check_sample_weight(sample_weight, n)


def margins(X, theta) -> np.ndarray:
    """X θ for X validated by :func:`validate_estimator_input` (no clipping, no
    intercept), accumulated in float64 without a copy of X, by X's backend.

    Parameters
    ----------
    X : array of shape (n, d)
    theta : ndarray of shape (d,) or (d, k)

    Returns
    -------
    ndarray of shape (n,) or (n, k)
    """
    return backend_for(X).margins(X, theta)


def glm_clipped_sum_kernel(X, loss, y, clipping_norm: float, *, weights=None):
    """``f(theta, rows)`` = ``X.glm_clipped_sum(loss, theta, y, clipping_norm,
    weights=weights, rows=rows)`` for a :class:`Design` ``X`` of any backend, the same
    numbers; on the numpy Design with a run's constants bound once
    (:func:`dperm.backends._products.design_kernel`), so that the DP-SGD loop's
    per-step call costs only the step's gathers and products."""
    if type(X) is Design:
        return design_kernel(X, loss, y, clipping_norm, weights)

    def clipped_sum(theta, rows):
        return X.glm_clipped_sum(loss, theta, y, clipping_norm, weights=weights, rows=rows)

    return clipped_sum
