"""Generic LIBSVM / svmlight reader (sparse CSR)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .._validation import check_count, clip_rows, row_norms
from ..exceptions import DataFileNotFoundError, InvalidDataError
from ._prepare import _encode_labels, label_rule
from .dataset import Dataset


def _normalize_sparse_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    norms = row_norms(X)
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    X = sp.csr_matrix(sp.diags(inv) @ X)
    # rounding can leave a row a hair above 1; project those exactly
    X, _ = clip_rows(X, 1.0, warn=False)
    return X


def load_svmlight(
    path: str | Path,
    *,
    n_features: int | None = None,
    test_path: str | Path | None = None,
    normalize_rows: bool = True,
    task: str | None = None,
    positive_label=None,
    label_bound: float | None = None,
    classes=None,
) -> Dataset:
    """Load a LIBSVM / svmlight file as a sparse CSR dataset.

    Parameters
    ----------
    path : str or Path
        Training file (``.gz`` / ``.bz2`` accepted).
    n_features : int, optional
        Number of features.  Pass the documented dimension of the dataset:
        when None it is the largest index present in the file(s), which is
        data-dependent.
    test_path : str or Path, optional
        Test file; loaded with the same ``n_features``.
    normalize_rows : bool, default True
        Scale every row to unit ℓ2 norm (zero rows stay zero), so
        ``row_norm_bound = 1``.  This is a **per-record map** (each row is
        divided by its own norm), so it needs no privacy accounting.  With
        False, ``row_norm_bound = inf`` and the caller must pick ``data_norm``.
    task, positive_label, label_bound, classes
        As in :func:`load_csv`: the task and the labels come from these public options,
        never from the file (a file that leaves them open is refused); binary labels
        are mapped to {−1, +1}, a label outside ``classes`` is refused.

    Returns
    -------
    Dataset
        ``X_train`` / ``X_test`` are ``scipy.sparse.csr_matrix`` of float64.

    Raises
    ------
    DataFileNotFoundError
        If a file does not exist (the message names it).
    InvalidDataError, LabelError, UnknownNameError
    """
    from sklearn.datasets import load_svmlight_file, load_svmlight_files

    path = Path(path)
    paths = [path] + ([Path(test_path)] if test_path is not None else [])
    for p in paths:
        if not p.is_file():
            raise DataFileNotFoundError(f"svmlight file not found: expected {p}")
    if n_features is not None:
        n_features = check_count(n_features, "n_features")
    rule = label_rule(task, positive_label, label_bound, classes)  # before the data is read
    try:
        if test_path is None:
            X_tr, y_tr = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
            X_te, y_te = None, None
        else:
            X_tr, y_tr, X_te, y_te = load_svmlight_files(
                [str(p) for p in paths], n_features=n_features, dtype=np.float64
            )
    except ValueError as exc:
        raise InvalidDataError(f"cannot parse svmlight file(s) {paths}: {exc}") from None
    y_tr, y_te, n_clipped = _encode_labels(y_tr, y_te, rule, "label")
    task, label_text = rule.task, rule.describe()
    X_tr = sp.csr_matrix(X_tr, dtype=np.float64)
    X_te = None if X_te is None else sp.csr_matrix(X_te, dtype=np.float64)
    if normalize_rows:
        X_tr = _normalize_sparse_rows(X_tr)
        X_te = None if X_te is None else _normalize_sparse_rows(X_te)
    for X in (X_tr, X_te):
        if X is not None:
            X.sort_indices()
    d = X_tr.shape[1]
    desc = (
        f"svmlight file {path}"
        + (f" (test: {test_path})" if test_path else "")
        + f"; {d} features; labels: {label_text}. "
        + (
            "Each row scaled to unit norm (per-record map); row_norm_bound = 1."
            if normalize_rows
            else "Raw rows, no public norm bound (row_norm_bound = inf)."
        )
    )
    return Dataset(
        name=path.name.split(".")[0],
        X_train=X_tr,
        y_train=y_tr,
        X_test=X_te,
        y_test=y_te,
        feature_names=[f"f{i}" for i in range(d)],
        task=task,
        row_norm_bound=1.0 if normalize_rows else math.inf,
        label_bound=rule.label_bound,
        description=desc,
        classes=rule.dataset_classes,
        label_names=rule.names,
        n_clipped_labels=n_clipped,
    )
