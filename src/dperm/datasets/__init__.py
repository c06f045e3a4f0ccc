"""Benchmark datasets with **public** preprocessing schemas.

Every loader in this package turns raw records into features with a map that is
fixed *before* the data is seen: numeric columns are clipped to bounds written
down from the dataset's documentation (or passed by the user) and scaled to
``[0, 1]``, or — where no range is documented — mapped to ``[0, 1)`` by the
constant-free ``x ↦ log1p(x)/(1 + log1p(x))`` (:class:`SquashedColumn`), which
needs no bound at all; categorical columns are one-hot encoded
against a category list from the same public schema.  No statistic of the
private data (min, max, mean, std, the set of categories present) is ever
computed at load time, unless the user explicitly opts into it
(``allow_data_bounds=True`` in :func:`load_csv`, which emits
:class:`~dperm.exceptions.PrivacyLeakWarning`).

Why it matters: the sensitivity analyses of DP-ERM assume every row satisfies
``‖x‖₂ ≤ data_norm`` for a *public* ``data_norm``.  If the feature scaling were
fitted on the data (e.g. min–max scaling), changing one record could change
every other record's features, and the neighbouring datasets the privacy proof
talks about would not be neighbours any more.  With a public schema the
preprocessing is a per-record map ``x ↦ φ(x)``: replacing one record changes
exactly one row of the feature matrix.

The schema map of a record with ``p`` numeric columns and ``g`` categorical
groups satisfies, by construction,

* every numeric feature lies in ``[0, 1]``,
* every one-hot group has at most one non-zero entry, equal to 1,

so ``‖φ(x)‖₂ ≤ √(p + g)``.  With ``normalize_rows=True`` (the default) each row
is divided by this public constant and :attr:`Dataset.row_norm_bound` is 1.

Public API
----------
:class:`Dataset`, :func:`load`, :func:`load_csv`, :func:`load_svmlight`,
:func:`available_datasets`, :func:`public_schema`, :data:`DEFAULT_DATASET`,
:func:`read_dask` and :func:`open_array` (Dask: Parquet/CSV directories, ``.npy``, Zarr),
and the schema building blocks :class:`Schema`, :class:`NumericColumn`,
:class:`CategoricalColumn`.  See ``docs/datasets.md`` for every bound and its
source.

Layout
------
``schema`` (column specifications, :class:`Schema`), ``dataset`` (:class:`Dataset`),
one module per built-in dataset (``breast_cancer``, ``adult``, ``kddcup99``, ``mnist``,
``synthetic``, ``california_housing``, ``casp``), the generic readers ``tabular``
(CSV / Parquet) and ``svmlight``, and ``registry`` (names, schemas, :func:`load`).
"""

from .dask_io import open_array, read_dask
from .dataset import Dataset
from .registry import DEFAULT_DATASET, available_datasets, load, public_schema
from .schema import CategoricalColumn, NumericColumn, Schema, SquashedColumn
from .svmlight import load_svmlight
from .tabular import load_csv

__all__ = [
    "DEFAULT_DATASET",
    "CategoricalColumn",
    "Dataset",
    "NumericColumn",
    "Schema",
    "SquashedColumn",
    "available_datasets",
    "load",
    "load_csv",
    "load_svmlight",
    "open_array",
    "public_schema",
    "read_dask",
]
