"""The :class:`Dataset` result type of every loader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp


class TrainTestSizes:
    """``n_features``, ``n_train`` and ``n_test`` of an object with ``X_train`` and
    ``X_test`` (None when there is no test part): a :class:`Dataset` and the
    bench's :class:`~dperm.bench.protocols.Split`."""

    X_train: object
    X_test: object

    @property
    def n_features(self) -> int:
        """Number of feature columns ``d``."""
        return int(self.X_train.shape[1])

    @property
    def n_train(self) -> int:
        """Number of training rows."""
        return int(self.X_train.shape[0])

    @property
    def n_test(self) -> int:
        """Number of test rows (0 when there is no test part)."""
        return 0 if self.X_test is None else int(self.X_test.shape[0])


@dataclass
class Dataset(TrainTestSizes):
    """A loaded dataset, already mapped to features by a public schema.

    Attributes
    ----------
    name : str
        Dataset name (as passed to :func:`load`, or the file stem).
    X_train : ndarray or scipy.sparse.csr_matrix of float64, shape (n_train, d)
    y_train : ndarray of shape (n_train,)
        Binary tasks: float64 labels in {-1, +1}.  Multi-class: int64 labels
        ``0 .. k-1``.  Regression: float64 targets, clipped to
        ``[-label_bound, label_bound]`` when ``label_bound`` is set.
    X_test, y_test : same types as the training arrays, or None
        None when the dataset has no test part.
    feature_names : list of str, length d
        Numeric columns keep their name; one-hot columns are ``"column=value"``.
    task : {"binary", "multiclass", "regression"}
    row_norm_bound : float
        Public bound on the ℓ2 norm of every row of ``X_train`` and ``X_test``
        after the loader's scaling (1.0 with ``normalize_rows=True``).  It
        comes from the schema, never from the data; ``math.inf`` when no public
        bound exists (e.g. raw svmlight rows without ``normalize_rows``), in
        which case the caller must choose ``data_norm`` and clip.
    label_bound : float or None
        Regression only: public bound on ``|y|``.  None when unknown.
    description : str
        Human-readable provenance: source, schema, label mapping, split.
    n_unknown_categories : int, default 0
        Number of (row, categorical column) cells whose value is not in the
        public category list; such cells are encoded as all-zero (a user's file
        is refused instead: :func:`load_csv`).
    classes : tuple or None
        The *public* label set of a classification task, to pass to the
        estimators as ``classes=``: (−1.0, +1.0) for every binary task (the
        loaders encode the positive class as +1), (0, …, k − 1) for a multi-class
        task (MNIST's ten digits; a file's public ``classes=`` list).  None for
        regression.
    label_names : tuple or None
        The public names of the encoded labels of a user's file: (negative, positive)
        for a binary task (−1, +1; ``"not <positive_label>"`` for one-vs-rest), the
        ``classes=`` list (0 … k−1) for a multi-class one — the caller's options, never
        read off the file; ``dperm fit --csv … --save`` gives them to the saved model,
        so that ``dperm predict`` prints them.  None for the built-in datasets and
        regression.
    n_imputed : int or None, default 0
        Number of missing cells of a user's file imputed by the public rule (the
        declared value, else the midpoint of the column's public range or the
        all-zero block): no row is dropped, so n does not depend on the data.  A count
        of the private data without noise (not private).  None when not counted (the
        Dask readers impute on the workers and count nothing: a count is a pass).
    n_clipped_labels : int or None, default 0
        Regression: number of targets clipped to ``label_bound`` (not private; None
        when not counted, as ``n_imputed``).
    encoder : dperm.schema.SchemaEncoder or None
        The public map from the raw records to ``X_train``/``X_test`` (fitted; it learns
        nothing), when the loader has one: ``dperm fit --csv … --save`` saves it in front
        of the model, so that the saved pipeline scores raw rows.  None for array data.
    """

    name: str
    X_train: np.ndarray | sp.csr_matrix = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    X_test: np.ndarray | sp.csr_matrix | None = field(repr=False)
    y_test: np.ndarray | None = field(repr=False)
    feature_names: list[str] = field(repr=False)
    task: str
    row_norm_bound: float
    label_bound: float | None
    description: str = field(repr=False)
    n_unknown_categories: int = 0
    classes: tuple | None = field(default=None, repr=False)
    encoder: Any = field(default=None, repr=False)
    label_names: tuple | None = field(default=None, repr=False)
    n_imputed: int | None = 0
    n_clipped_labels: int | None = 0

    def __post_init__(self):
        if self.classes is None and self.task == "binary":
            self.classes = (-1.0, 1.0)  # the encoding of every binary loader
