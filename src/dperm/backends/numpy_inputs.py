"""The numpy backend's input rules: what turns user data into a Design and targets.

For dense arrays, numpy memmaps, scipy sparse matrices (and what numpy converts:
lists, pandas frames and series), one function per step of the dispatch of
:mod:`dperm.design`; :mod:`dperm.backends.dask_inputs` has the same functions for
Dask collections:

* :func:`build_design` — the :class:`~dperm.backends.numpy.Design` of X (rows
  clipped by the rule of :mod:`dperm.backends.rows`);
* :func:`validate_estimator_input` — the estimators' validation of X (and y),
  scikit-learn's (the messages its estimator checks expect), errors as
  :class:`~dperm.exceptions.InvalidDataError`;
* :func:`label_set`, :func:`count_outside`, :func:`one_vs_rest` — the pieces of
  the classifiers' label encoding (:func:`dperm.design.encode_class_targets`);
* :func:`check_sample_weight`, :func:`map_labels`, :func:`margins`.

float32 and float64 arrays and CSR matrices are never copied.
"""

from __future__ import annotations

import math
import re

import numpy as np

from .._validation import check_positive, check_X, float_array
from ..exceptions import InvalidDataError, LabelError
from .numpy import Design
from .rows import (
    augmented_bound,
    check_finite,
    clip_scale,
    count_tolerance,
    safe_row_norms,
    warn_clipped,
)

#: the input rules of a backend: every backend's input module (this one,
#: :mod:`dperm.backends.dask_inputs`) has them, under these names, for the dispatch of
#: :mod:`dperm.design`
INPUT_RULES = (
    "MULTINOMIAL",
    "build_design",
    "check_sample_weight",
    "class_indices",
    "count_outside",
    "label_set",
    "map_labels",
    "margins",
    "one_vs_rest",
    "validate_estimator_input",
)

__all__ = [*INPUT_RULES, "INPUT_RULES", "check_weight_values", "sklearn_validate"]

#: multinomial (softmax) models are fitted on this backend
MULTINOMIAL = True

#: dtypes kept as they are (no copy); others are converted to float64
_DTYPES = [np.float64, np.float32]


def build_design(X, data_norm=None, *, intercept_scaling=None, warn: bool = True) -> Design:
    """The :class:`~dperm.backends.numpy.Design` of a dense array, memmap or scipy
    sparse matrix X (:func:`dperm.design.as_design` for these types; ``data_norm``
    already checked).

    One pass over X computes the raw row norms (also the finite check) and the clip
    scales by the rule of :mod:`dperm.backends.rows`; without ``data_norm`` the pass
    is only the finite check.

    Raises
    ------
    InvalidDataError
        X not 2-D, empty, non-numeric, or containing NaN/inf.
    InvalidPrivacyParameter
        ``intercept_scaling`` not a positive finite number.
    """
    X = check_X(X, check_finite=False)  # NaN/inf: refused by the row-norm pass below
    s = None
    if intercept_scaling is not None:
        s = check_positive(intercept_scaling, "intercept_scaling")
    xnorms = None
    scale, n_clipped = None, 0
    if data_norm is not None:
        xnorms = safe_row_norms(X)  # also the finite check
        tol = count_tolerance(X.shape[1], X.dtype)
        scale, n_clipped = clip_scale(xnorms, data_norm, X.shape[1], tol)
    else:
        check_finite(X)
    if n_clipped and warn:
        warn_clipped(n_clipped, data_norm, stacklevel=3)  # the caller of as_design
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


# ----------------------------------------------------------------------------- estimators
def sklearn_validate(estimator, X, y="no_validation", *, reset: bool, **kw):
    """scikit-learn's ``validate_data`` (``estimator._validate_data`` before 1.6),
    with every ValueError re-raised as :class:`~dperm.exceptions.InvalidDataError`."""
    try:
        try:  # scikit-learn ≥ 1.6
            from sklearn.utils.validation import validate_data
        except ImportError:  # pragma: no cover - older scikit-learn
            if "ensure_all_finite" in kw:
                kw["force_all_finite"] = kw.pop("ensure_all_finite")
            return estimator._validate_data(X, y, reset=reset, **kw)
        return validate_data(estimator, X, y, reset=reset, **kw)
    except InvalidDataError:
        raise
    except ValueError as exc:
        raise InvalidDataError(redact_message(str(exc))) from None


#: values that scikit-learn's and numpy's messages echo from the data
_ECHOED = (
    (re.compile(r"\s*array=.*?\]\.?(?=\s*Reshape|\s*$)", re.S), ""),
    (
        re.compile(r"could not convert string to float: .*", re.S),
        "X holds values that are not numbers (e.g. text); encode them first "
        "(dperm.preprocessing.PublicOneHotEncoder or dperm.schema.SchemaEncoder)",
    ),
)


def redact_message(msg: str) -> str:
    """``msg`` of a scikit-learn/numpy validation error without the data values it
    echoes (the repr of a 1-D X, the text that failed to parse): a record's values are
    private, and an error message is often logged or shown.

    >>> redact_message("Expected 2D array, got 1D array instead:\\narray=[0.1 0.2].\\nReshape …")
    'Expected 2D array, got 1D array instead: Reshape …'
    """
    for pattern, repl in _ECHOED:
        msg = pattern.sub(repl, msg)
    return " ".join(msg.split())


def validate_estimator_input(
    estimator, X, y=None, *, reset: bool, y_numeric: bool = False, finite_check: bool = True
):
    """The numpy side of :func:`dperm.design.validate_estimator_input`: scikit-learn's
    validation (:func:`sklearn_validate`), float32/float64 arrays and CSR matrices
    returned without a copy.  ``finite_check=False`` leaves the NaN/inf check of X to
    the caller (``fit``: the row-norm pass of the Design raises InvalidDataError, one
    pass over X instead of two)."""
    if y is None and not reset:
        return sklearn_validate(estimator, X, reset=False, accept_sparse="csr", dtype=_DTYPES)
    return sklearn_validate(
        estimator,
        X,
        y,
        reset=reset,
        accept_sparse="csr",
        dtype=_DTYPES,
        y_numeric=y_numeric,
        ensure_all_finite=finite_check,
    )


def label_set(y) -> np.ndarray:
    """The sorted distinct labels of a classification target, read off the data
    (scikit-learn's check of the target type first).

    Raises
    ------
    LabelError
    """
    from sklearn.utils.multiclass import check_classification_targets

    try:
        check_classification_targets(y)  # (a sort of y: ~6 ms per 4·10⁵ rows)
    except ValueError as exc:
        raise LabelError(str(exc)) from None
    return np.unique(y)


def count_outside(y, classes: np.ndarray) -> int:
    """The number of labels of ``y`` not in ``classes``."""
    return int(np.count_nonzero(~np.isin(y, classes)))


def class_indices(y, classes: np.ndarray) -> np.ndarray:
    """The index of each label in the sorted ``classes`` (0 … k−1)."""
    return np.searchsorted(classes, y)


def one_vs_rest(y, classes) -> list[np.ndarray]:
    """One ±1 target per class of ``classes`` (+1 where y equals it)."""
    return [np.where(y == c, 1.0, -1.0) for c in classes]


def check_weight_values(w: np.ndarray, where: str = "") -> np.ndarray:
    """``w`` (float64) checked finite and in [0, 1], the public bound of a weight.

    Raises
    ------
    InvalidDataError
        Naming the number of bad weights (``where`` they are), never their values.
    """
    bad = ~np.isfinite(w) | (w < 0) | (w > 1)
    if bad.any():
        raise InvalidDataError(
            "sample_weight must be finite and in [0, 1] (a public bound: a weight > 1 "
            f"would raise one record's sensitivity); {int(bad.sum())} weight(s){where} are "
            "not (their values are not echoed: they are part of the private records)"
        )
    return w


def check_sample_weight(sample_weight, n: int) -> np.ndarray:
    """``sample_weight`` as a float array of shape (n,) in [0, 1] (a scalar is
    broadcast, as scikit-learn does).

    Raises
    ------
    InvalidDataError
    """
    message = f"sample_weight must be numeric, got {type(sample_weight).__name__}"
    w = float_array(sample_weight, "sample_weight", message=message)
    if w.ndim == 0:  # scikit-learn accepts a scalar weight
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise InvalidDataError(f"sample_weight must have shape ({n},), got {w.shape}")
    return check_weight_values(w)


def map_labels(check, y, name: str = "y"):
    """A label check of :mod:`dperm._validation` (``check(y, name)``) applied to y."""
    return check(y, name)


def margins(X, theta) -> np.ndarray:
    """X θ for validated X (no clipping, no intercept): float32 rows multiplied in
    float64, block by block, no copy."""
    return Design(X).matvec(theta)
