"""Validation of privacy parameters and data, one place for each check.

Every check raises a specific :mod:`dperm.exceptions` error whose message names
the parameter and the value received.

The data checks here know numpy arrays, numpy memmaps and scipy sparse matrices
only, and recognise an already-built :class:`dperm.design.Design` by its
interface (duck typing): this module imports nothing of dperm but its
exceptions.  Other array types (a Dask collection) are turned into a Design by
the dispatch of :mod:`dperm.design`, whose ``check_X``/``check_X_y`` and label
checks accept them.  The chunked sums of squares below are the kernel of every
row norm in dperm (:mod:`dperm.backends.rows` builds the clipping rule on them).
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings

import numpy as np

from .exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    UnknownNameError,
)


class _LazySparse:
    """``scipy.sparse``, imported on first use (it costs ~0.3 s of start-up, and the
    accountants and the CLI never need it).  ``issparse`` needs no import: an
    object can only be a scipy sparse matrix once scipy.sparse is loaded."""

    @staticmethod
    def issparse(x) -> bool:
        mod = sys.modules.get("scipy.sparse")
        return mod is not None and mod.issparse(x)

    def __getattr__(self, name: str):
        import scipy.sparse

        return getattr(scipy.sparse, name)


sp = _LazySparse()

__all__ = [
    "check_X",
    "check_X_y",
    "check_binary_labels",
    "check_count",
    "check_delta",
    "check_epsilon",
    "check_finite_matrix",
    "check_interval",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "clip_rows",
    "float_array",
    "float_labels",
    "lookup",
    "row_norms",
]


def _as_real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        # numpy scalars are numbers.Real; strings, None, complex are not
        raise InvalidPrivacyParameter(
            f"{name} must be a real number, got {type(value).__name__}: {value!r}"
        )
    value = float(value)
    if math.isnan(value):
        raise InvalidPrivacyParameter(f"{name} must not be NaN, got {value!r}")
    return value


def _check_above_zero(value, name: str, allow_inf: bool, strict: bool) -> float:
    """``value`` as a float, checked > 0 (``strict``) or ≥ 0, and finite unless
    ``allow_inf``: the one rule behind check_epsilon/positive/nonnegative."""
    v = _as_real(value, name)
    if v <= 0 if strict else v < 0:
        raise InvalidPrivacyParameter(f"{name} must be {'>' if strict else '≥'} 0, got {value!r}")
    if math.isinf(v) and not allow_inf:
        raise InvalidPrivacyParameter(f"{name} must be finite, got {value!r}")
    return v


def check_epsilon(epsilon, name: str = "epsilon", allow_inf: bool = False) -> float:
    """Return ``epsilon`` as a float after checking ``0 < epsilon < inf``.

    Raises
    ------
    InvalidPrivacyParameter
        If epsilon is not a real number, is NaN, ≤ 0, or infinite (unless
        ``allow_inf``).
    """
    return _check_above_zero(epsilon, name, allow_inf, strict=True)


def check_delta(delta, name: str = "delta", allow_zero: bool = True) -> float:
    """Return ``delta`` as a float after checking ``0 ≤ delta < 1``.

    With ``allow_zero=False`` (Gaussian mechanisms) ``delta`` must be > 0.

    Raises
    ------
    InvalidPrivacyParameter
        If delta is not a real number, is NaN, or outside [0, 1) (or (0, 1)).
    """
    d = _as_real(delta, name)
    if not (0.0 <= d < 1.0):
        raise InvalidPrivacyParameter(f"{name} must be in [0, 1), got {delta!r}")
    if d == 0.0 and not allow_zero:
        raise InvalidPrivacyParameter(
            f"{name} must be > 0 for a Gaussian mechanism (it gives no pure-ε "
            f"guarantee), got {delta!r}"
        )
    return d


def check_delta_size(delta, n: int, name: str = "delta", size: str = "n") -> float:
    """Return δ after refusing δ ≥ 1/n for a dataset of public size n.

    An (ε, δ) guarantee with δ ≥ 1/n is void: the mechanism that publishes one record
    picked at random, in the clear, is (0, 1/n)-DP (Dwork & Roth 2014, §2.3: "δ less
    than the inverse of any polynomial in the size of the database").  dperm refuses
    such a δ rather than stating it as a guarantee (issue #32: δ = 0.5 was accepted
    and printed as one).  n is the public size of the run: the number of rows under
    replace-one, the caller's public ``dataset_size`` under add/remove (the number of
    rows is private there).

    Parameters
    ----------
    delta : float in [0, 1)
    n : int ≥ 1
    name, size : str
        The names the message uses for δ and n.

    Raises
    ------
    InvalidPrivacyParameter
        Naming δ, n and 1/n².
    """
    d = check_delta(delta, name)
    n = int(n)
    if d > 0.0 and d * n >= 1.0:
        raise InvalidPrivacyParameter(
            f"{name}={delta!r} is ≥ 1/{size} = 1/{n}: an (ε, δ) guarantee with δ ≥ 1/n is "
            "void (publishing one random record in the clear is (0, 1/n)-DP); use "
            f"δ ≪ 1/n, e.g. 1/n² = {1.0 / max(n, 1) ** 2:.3g} (the default δ is "
            "min(1/n², 1e-5))"
        )
    return d


def check_positive(value, name: str, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking ``0 < value`` (and finite).

    Raises
    ------
    InvalidPrivacyParameter
    """
    return _check_above_zero(value, name, allow_inf, strict=True)


#: the largest public row bound ``data_norm`` dperm calibrates with: the calibrations
#: square it and multiply it by a few more factors, which must stay finite in float64
#: (max ≈ 1.8·10³⁰⁸).  A larger bound is a unit error, not a bound (issue #32).
MAX_DATA_NORM = 1e150
#: the largest row norm dperm clips: the products x·θ of the oracles (computed before
#: the clipping scale is applied) stay finite for ‖θ‖ up to 10⁵⁸.  A larger row holds a
#: value such as 1e308, a sentinel or a unit error (issue #32: NaN coefficients).
MAX_ROW_NORM = 1e250


def check_data_norm(value, name: str = "data_norm") -> float:
    """Return the public row bound ``value`` as a float after checking
    0 < value ≤ :data:`MAX_DATA_NORM`.

    Raises
    ------
    InvalidPrivacyParameter
        Naming the value and the fix (rescale the features to a smaller public bound).
    """
    v = check_positive(value, name)
    if v > MAX_DATA_NORM * (1.0 + 1e-9):  # the slack: the augmented bound √(R² + s²)
        raise InvalidPrivacyParameter(
            f"{name}={value!r} is beyond {MAX_DATA_NORM:g}: the calibrations square it and "
            "multiply it by more factors, which overflows float64; scale the features "
            f"by a public constant first (e.g. to unit rows) and pass a {name} ≤ "
            f"{MAX_DATA_NORM:g}"
        )
    return v


def check_nonnegative(value, name: str, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking ``0 ≤ value`` (and finite).

    Raises
    ------
    InvalidPrivacyParameter
    """
    return _check_above_zero(value, name, allow_inf, strict=False)


def float_array(value, name: str, *, error=InvalidDataError, message: str | None = None):
    """``value`` as a float64 array (a copy only when numpy must convert).

    Raises
    ------
    InvalidDataError (or ``error``)
        numpy cannot make numbers of it: ``message``, default "{name} must be numeric:
        {numpy's reason}".
    """
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise error(f"{name} must be numeric: {exc}" if message is None else message) from None


def lookup(table, name, what: str):
    """``table[name]``: the entry of a registry of named things (losses, runners, …).

    Raises
    ------
    UnknownNameError
        ``name`` is not a key (or not hashable): "unknown {what} {name!r}; choose one
        of [the sorted keys]".
    """
    try:
        return table[name]
    except (KeyError, TypeError):
        raise UnknownNameError(f"unknown {what} {name!r}; choose one of {sorted(table)}") from None


def check_interval(value, name: str) -> tuple[float, float]:
    """(lo, hi) of a public interval ``value``: a pair of finite numbers with lo < hi.

    Raises
    ------
    InvalidPrivacyParameter
        Not a pair of numbers, not finite, or lo ≥ hi (naming ``name`` and the value).
    """
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        msg = f"{name} must be two numbers (lo, hi), got {value!r}"
        raise InvalidPrivacyParameter(msg) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidPrivacyParameter(f"{name} must be finite with lo < hi, got {value!r}")
    return lo, hi


def check_probability(value, name: str, allow_zero: bool = False) -> float:
    """Return ``value`` after checking it lies in (0, 1] (or [0, 1]).

    Used for ``sampling_rate`` and budget fractions.

    Raises
    ------
    InvalidPrivacyParameter
    """
    v = _as_real(value, name)
    lo_ok = v >= 0 if allow_zero else v > 0
    if not (lo_ok and v <= 1):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise InvalidPrivacyParameter(f"{name} must be in {interval}, got {value!r}")
    return v


def check_count(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int after checking it is an integer ≥ ``minimum``.

    Raises
    ------
    InvalidPrivacyParameter
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise InvalidPrivacyParameter(
                f"{name} must be an integer ≥ {minimum}, got {type(value).__name__}: {value!r}"
            )
    if value < minimum:
        raise InvalidPrivacyParameter(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return int(value)


# ----------------------------------------------------------------------------- chunked passes
#: bytes of float64 per block of rows in chunked passes (fits in a core's L2 cache)
CHUNK_BYTES = 1 << 20


def rows_per_chunk(width: int) -> int:
    """Rows of ``width`` float64 values in one block of :data:`CHUNK_BYTES`."""
    return max(1, CHUNK_BYTES // (8 * max(1, width)))


def sq_norms_dense(X) -> np.ndarray:
    """Σⱼ xᵢⱼ² of every row of a dense array, float64, block by block (float32 rows
    are accumulated in float64; no temporary of the size of X).

    Other dtypes are converted into ONE float64 block buffer, reused: a fresh 1 MiB
    temporary per block is a fresh mmap in a process whose allocator trims eagerly
    (Dask's workers set ``MALLOC_TRIM_THRESHOLD_``), and its page faults made this
    pass 4× slower there."""
    n, d = X.shape
    out = np.empty(n)
    step = rows_per_chunk(d)
    buf = None if X.dtype == np.float64 else np.empty((min(step, n), d))
    for a in range(0, n, step):
        blk = X[a : a + step]
        if buf is not None:
            np.copyto(buf[: blk.shape[0]], blk, casting="unsafe")
            blk = buf[: blk.shape[0]]
        np.einsum("ij,ij->i", blk, blk, out=out[a : a + step])
    return out


def sq_norms_csr(X) -> np.ndarray:
    """Σⱼ xᵢⱼ² of every row of a CSR matrix (canonical format), float64, in blocks
    of about the same number of stored values."""
    n = X.shape[0]
    out = np.zeros(n)
    indptr, data = X.indptr, X.data
    per_row = max(1, X.nnz // max(1, n))
    step = rows_per_chunk(per_row)
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


def check_finite_matrix(X, name: str = "X") -> None:
    """Raise InvalidDataError if a dense array or sparse matrix holds NaN/inf: a sum
    first (one pass, no temporary), then the exact check block by block only if
    the sum is not finite."""
    data = X.data if sp.issparse(X) else X
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(data, dtype=np.float64)):
            return
    if data.ndim == 1:
        if not np.isfinite(data).all():
            raise InvalidDataError(f"{name} contains NaN or infinite values")
        return
    step = rows_per_chunk(data.shape[1])
    for a in range(0, data.shape[0], step):
        if not np.isfinite(data[a : a + step]).all():
            raise InvalidDataError(f"{name} contains NaN or infinite values")


def is_design(X) -> bool:
    """True for a dperm Design (:mod:`dperm.backends`), recognised by its interface
    (this module imports no backend)."""
    return hasattr(X, "n_clipped") and hasattr(X, "bound") and callable(getattr(X, "take", None))


# ----------------------------------------------------------------------------- data
def check_X(
    X, name: str = "X", accept_sparse: bool = True, min_samples: int = 1, *, check_finite=True
):
    """Validate a feature matrix: 2-D, float, finite, non-empty — without copying it.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), scipy.sparse matrix or Design
        float32 and float64 arrays (C or F order, memmaps) are returned as they are
        (float32 stays float32: the products of :mod:`dperm.design` accumulate in
        float64); other dtypes are converted to float64 (a copy).  Sparse input is
        returned as CSR (converted only if in another format; a copy with summed
        duplicates if it has duplicate entries).  A :class:`dperm.design.Design` is
        returned unchanged (it was validated when built).  A Dask collection is
        wrapped in a Design by :func:`dperm.design.check_X` (never gathered), not here.
    check_finite : bool, default True
        False leaves the NaN/inf check to the caller (:func:`dperm.design.as_design`
        fuses it with its row-norm pass).

    Returns
    -------
    ndarray (float32 or float64), scipy.sparse.csr_matrix, or Design

    Raises
    ------
    InvalidDataError
        If X is not 2-D, is empty, contains NaN/inf or non-numeric values, or
        is sparse while ``accept_sparse`` is False.
    """
    if is_design(X):
        if X.is_sparse and not accept_sparse:
            raise InvalidDataError(f"{name} must be dense for this algorithm, got a sparse matrix")
        if X.shape[0] < min_samples:
            raise InvalidDataError(
                f"{name} must have at least {min_samples} sample(s), got shape {X.shape}"
            )
        return X
    if sp.issparse(X):
        if not accept_sparse:
            raise InvalidDataError(f"{name} must be dense for this algorithm, got a sparse matrix")
        if X.format != "csr" or not isinstance(X, sp.csr_matrix):
            X = sp.csr_matrix(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        if not X.has_canonical_format:  # duplicates would make Σ data² a wrong norm
            X = X.copy()
            X.sum_duplicates()
        shape = X.shape
    else:
        if not isinstance(X, np.ndarray) or X.dtype not in (np.float32, np.float64):
            X = float_array(X, name)
        if X.ndim != 2:
            raise InvalidDataError(
                f"{name} must be a 2-D array of shape (n_samples, n_features), "
                f"got an array with shape {X.shape}"
            )
        shape = X.shape
    if shape[0] < min_samples:
        raise InvalidDataError(
            f"{name} must have at least {min_samples} sample(s), got shape {shape}"
        )
    if shape[1] < 1:
        raise InvalidDataError(f"{name} must have at least 1 feature, got shape {shape}")
    if check_finite:
        check_finite_matrix(X, name)
    return X


def check_X_y(X, y, accept_sparse: bool = True, min_samples: int = 1):
    """Validate ``X`` (see :func:`check_X`) and a 1-D target ``y`` of matching length.

    Returns
    -------
    X : ndarray or csr_matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Numeric targets are converted to float64 and checked finite; other
        targets (strings, objects) are returned as a 1-D array unchanged.  A
        Design whose rows live elsewhere (``is_distributed``: the Dask backend)
        checks ``y`` where they are, with the same rules (its ``check_target``).

    Raises
    ------
    InvalidDataError
    """
    X = check_X(X, accept_sparse=accept_sparse, min_samples=min_samples)
    if getattr(X, "is_distributed", False):
        return X, X.check_target(y)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise InvalidDataError(f"y must be 1-D of shape (n_samples,), got shape {y.shape}")
    if y.shape[0] != X.shape[0]:
        raise InvalidDataError(
            f"X and y have inconsistent numbers of samples: X has {X.shape[0]}, y has {y.shape[0]}"
        )
    if y.dtype.kind in "biuf":
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise InvalidDataError("y contains NaN or infinite values")
    elif y.dtype.kind == "O":
        try:
            bad = np.array([isinstance(v, float) and not math.isfinite(v) for v in y])
        except TypeError:
            bad = np.zeros(0, dtype=bool)
        if bad.any():
            raise InvalidDataError("y contains NaN or infinite values")
    return X, y


def float_labels(y, name: str = "y") -> np.ndarray:
    """``y`` as a float64 array; non-numeric labels (strings, objects) raise
    :class:`~dperm.exceptions.LabelError` instead of numpy's ValueError.  (Labels
    of a Dask collection: :func:`dperm.design.float_labels`.)"""
    try:
        return np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        vals = np.unique(np.asarray(y, dtype=object).astype(str))[:5]
        raise LabelError(
            f"{name} must be numeric for this loss, got labels such as {vals.tolist()}"
        ) from None


def check_binary_labels(y, name: str = "y") -> np.ndarray:
    """Check that ``y`` holds only the labels -1 and +1 (the range of the
    margin-based losses) and return it as float64.  (Labels of a Dask
    collection: :func:`dperm.design.check_binary_labels`.)

    Raises
    ------
    LabelError
        If a label is not in {-1, +1}.
    """
    y = float_labels(y, name)
    bad = (y != 1.0) & (y != -1.0)
    if bad.any():
        vals = np.unique(y[bad])[:5]
        raise LabelError(
            f"{name} must contain only the labels -1 and +1 for this loss, got {vals.tolist()}"
        )
    return y


def row_norms(X) -> np.ndarray:
    """ℓ2 norm of every row of a dense or CSR matrix, shape (n_samples,), float64,
    computed block by block (no temporary of the size of X; float32 rows are
    accumulated in float64).  A :class:`dperm.design.Design` gives the norms of its
    effective rows."""
    if is_design(X):
        return X.row_norms()
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format:  # sorted, no duplicates: an order-free result
            X = X.copy()
            X.sum_duplicates()
        return np.sqrt(sq_norms_csr(X))
    return np.sqrt(sq_norms_dense(np.asarray(X)))


def clip_rows(X, data_norm: float, warn: bool = True):
    """Scale every row of ``X`` whose ℓ2 norm exceeds ``data_norm`` down to norm
    ``data_norm`` (the projection onto the ℓ2 ball; rows inside are unchanged).

    This enforces the row-norm bound that every sensitivity calculation of
    dperm assumes; the bound itself comes from the user or a public schema,
    never from the data.

    Parameters
    ----------
    X : ndarray or csr_matrix of shape (n_samples, n_features)
    data_norm : float
        The ℓ2 bound on rows, > 0.

    Returns
    -------
    X_clipped : same type as X (a copy when any row was clipped)
    n_clipped : int
        Number of rows that were scaled down (reported, never hidden).

    Raises
    ------
    InvalidPrivacyParameter
        If ``data_norm`` ≤ 0, NaN or infinite.
    """
    data_norm = check_data_norm(data_norm)
    norms = row_norms(X)
    over = norms > data_norm
    n_clipped = int(over.sum())
    if n_clipped == 0:
        return X, 0
    scale = np.ones_like(norms)
    scale[over] = data_norm / norms[over]
    if sp.issparse(X):
        X = sp.csr_matrix(sp.diags(scale) @ X)
        # rounding may leave a row a hair above the bound; rescale it exactly
        nn = row_norms(X)
        still = nn > data_norm
        tighten = 1.0
        while still.any():  # one ulp may not suffice (summation rounding); shrink more
            tighten *= 1.0 - 4.0 * np.finfo(np.float64).eps
            fix = np.ones_like(nn)
            fix[still] = tighten * data_norm / nn[still]
            X = sp.csr_matrix(sp.diags(fix) @ X)
            nn = row_norms(X)
            still = nn > data_norm
    else:
        X = X * scale[:, None]
        nn = row_norms(X)
        still = nn > data_norm
        tighten = 1.0
        while still.any():  # one ulp may not suffice (summation rounding); shrink more
            tighten *= 1.0 - 4.0 * np.finfo(np.float64).eps
            X[still] *= (tighten * data_norm / nn[still])[:, None]
            nn = row_norms(X)
            still = nn > data_norm
    if warn:
        warnings.warn(
            f"{n_clipped} row(s) had an ℓ2 norm above data_norm={data_norm:g} and were "
            "clipped to it",
            ClippingWarning,
            stacklevel=3,
        )
    return X, n_clipped
