"""Out-of-core readers for the Dask backend: Parquet/CSV directories with a public
schema (``dask.dataframe``), numpy ``.npy`` memmaps and Zarr arrays (``dask.array``).

Nothing here reads a statistic of the data: the numeric bounds, the category lists
and the label encoding come from the caller (a column without a public bound, or a
categorical column without its category list, is refused — there is no
``allow_data_bounds`` on the cluster path).  Each partition is mapped to features
by :meth:`dperm.datasets.Schema.transform` on the workers — the very per-record
map of the one-machine loaders — and divided by the schema's public worst-case
norm.  The only things the client learns are the column names and dtypes
(metadata) and the number of rows of each partition (a count, needed to align the
partitions; n is public under the estimators' replace-one relation).  No row is
dropped: a missing cell is imputed by the public rule of the one-machine reader (the
declared value, else the midpoint of the column's public range or the all-zero block),
so n is the files' row count; a missing label, a label outside the public list and a
category outside its list are refused (when the partition is computed).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..exceptions import (
    DataFileNotFoundError,
    InvalidDataError,
    InvalidPrivacyParameter,
    MissingDependencyError,
    UnknownNameError,
)
from ..schema import SchemaEncoder
from ._prepare import LabelRule, label_rule
from .dataset import Dataset
from .schema import Schema, _column_check, _refuse_unknown_categories, _user_schema


def _require_dask() -> None:
    """MissingDependencyError naming the extra when Dask (array + dataframe) is absent."""
    try:
        import dask.array
        import dask.dataframe  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "reading Parquet/CSV directories with Dask needs the Dask extra: "
            'pip install "dperm[dask]"'
        ) from exc


__all__ = ["open_array", "read_dask"]

_PARQUET = (".parquet", ".pq")


def _files(path: Path, kind: str | None) -> tuple[str, str]:
    """(format, dask path/glob) of a file, a directory of files or a glob."""
    if any(ch in str(path) for ch in "*?["):
        matches = sorted(glob.glob(str(path)))
        where = str(path)
    elif path.is_dir():
        matches = sorted(str(p) for p in path.iterdir() if p.is_file())
        where = str(path)
    elif path.is_file():
        matches, where = [str(path)], str(path)
    else:
        raise DataFileNotFoundError(f"data not found: expected a file or directory at {path}")
    if kind is None:
        sfx = {os.path.splitext(m)[1].lower() for m in matches}
        kind = "parquet" if sfx & set(_PARQUET) else "csv" if ".csv" in sfx else None
    if kind not in ("parquet", "csv"):
        raise InvalidDataError(
            f"{path}: no .parquet/.pq or .csv files found (pass format='parquet' or 'csv')"
        )
    if kind == "csv" and path.is_dir():
        where = str(path / "*.csv")
    return kind, where


def _encode_target(values, rule: LabelRule, column: str) -> np.ndarray:
    """The public label map of one partition (:meth:`LabelRule.encode`): ±1 or the
    float target clipped to ±``label_bound``."""
    return rule.encode(np.asarray(values), column)[0]


def _features(frame, schema: Schema, scale: float, dtype) -> np.ndarray:
    """The schema's per-record map of one partition, divided by the public ``scale``
    (a category outside its public list is refused, a missing cell imputed)."""
    _refuse_unknown_categories(schema, frame)
    X, _ = schema.transform(frame)
    X /= scale
    return X.astype(dtype, copy=False)


def read_dask(
    path: str | Path,
    target: str,
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    categories: Mapping[str, Sequence] | None = None,
    categorical: Sequence[str] | None = None,
    log_columns: Sequence[str] = (),
    positive_label=None,
    task: str | None = None,
    label_bound: float | None = None,
    classes=None,
    impute: Mapping[str, object] | None = None,
    center: bool | None = None,
    dtype=np.float64,
    format: str | None = None,
    blocksize: str | int | None = "64MB",
) -> Dataset:
    """Read a Parquet or CSV directory as Dask arrays with a public schema.

    The one-machine counterpart is :func:`dperm.datasets.load_csv`; the schema
    rules are the same (the label encoding is given — ``classes=[negative,
    positive]``, ``positive_label`` or ``task="regression"``/``label_bound`` —
    never read off the values; no row is dropped: missing cells are imputed by the
    same public rule), with two differences: a numeric column without a bound and a
    categorical column without its category list are always refused (there is no
    ``allow_data_bounds``), and the task is binary or regression.  There is no test
    split.

    Parameters
    ----------
    path : str or Path
        A directory of ``.parquet``/``.pq`` or ``.csv`` files, one file, or a glob.
    target : str
        The label column.
    bounds : dict column → (lo, hi)
        Public bounds of every numeric feature column.
    categories : dict column → list
        Public category lists of the categorical columns.
    categorical : sequence of str, optional
        Categorical columns (default: the columns in ``categories`` and every
        non-numeric column of the metadata).
    log_columns : sequence of str, default ()
    positive_label : optional
        Target value mapped to +1 (every other → −1): a binary task.
    task : {"binary", "regression"}, optional
        "regression" keeps the float target, clipped to ``label_bound``.
    label_bound : float, optional
        Regression (implies it): public bound on ``|y|``.
    classes : list of two labels, optional
        The public labels of a binary task (the second ↦ +1); a label outside them is
        refused.
    impute : dict column → value, optional
        The public value of a missing cell (default: the midpoint of the public range,
        the all-zero block of a categorical column).
    center : bool, optional
        As :func:`~dperm.datasets.load_csv` (default: centered for regression).
    dtype : numpy dtype, default float64
        Of the features (float32 halves the workers' memory; products still
        accumulate in float64).
    format : {"parquet", "csv"}, optional
        Default: from the file suffixes.
    blocksize : str or int, optional
        CSV bytes per partition (``dask.dataframe.read_csv``).

    Returns
    -------
    Dataset
        ``X_train`` a Dask array (n, d) with known partition sizes, ``y_train`` a
        Dask array chunked like it, ``row_norm_bound`` = 1 (rows divided by the
        schema's public worst-case norm), ``X_test`` None.

    Raises
    ------
    DataFileNotFoundError
        Nothing at ``path``.
    UnknownNameError
        ``target`` or a named column not in the data; an unknown ``task``.
    InvalidPrivacyParameter
        A numeric column without a public bound, a categorical column without a
        category list, no label encoding, a bad bound.
    InvalidDataError
        No readable files; an empty result.
    MissingDependencyError
        Dask is not installed (``pip install "dperm[dask]"``).
    """
    _require_dask()
    import dask.dataframe as dd

    path = Path(path)
    kind, where = _files(path, format)
    for c, vals in dict(categories or {}).items():
        if isinstance(vals, str | bytes) or not isinstance(vals, Sequence | np.ndarray):
            raise InvalidPrivacyParameter(
                f"the categories of column {c!r} must be a list of values, e.g. "
                f"['red', 'blue'], got {type(vals).__name__}: {vals!r}"
            )
    cats = {k: [str(v) for v in vals] for k, vals in dict(categories or {}).items()}
    listed = [] if categorical is None else list(categorical)
    categorical = list(dict.fromkeys([*listed, *cats]))
    if kind == "parquet":
        frame = dd.read_parquet(where)
        meta = frame._meta
    else:  # the inferred dtypes first (a sample), then the categorical columns as text
        meta = dd.read_csv(where, blocksize=blocksize)._meta
        dtypes = dict.fromkeys([c for c in categorical if c in meta.columns], "str")
        frame = dd.read_csv(where, dtype=dtypes or None, blocksize=blocksize)
    header = [str(c) for c in frame.columns]
    require = _column_check(header, path)
    require([target], "target")
    require(categorical, "categorical")
    require(cats, "categories")
    # a column with a public category list is categorical whatever its values (as
    # load_csv): the kind of a column is never read off the records — the sample's
    # dtype would let one record switch it
    bounds = dict(bounds or {})
    require(bounds, "bounds")
    require(log_columns, "log_columns")
    features = [c for c in header if c != target]
    categorical += [  # unlisted, unbounded text columns: refused below (no category list)
        c
        for c in features
        if c not in categorical and c not in bounds and meta[c].dtype.kind not in "biuf"
    ]
    numeric = [c for c in features if c not in categorical]
    no_bound = [c for c in numeric if c not in bounds]
    if no_bound:  # the same refusal as the one-machine reader (no data bounds here)
        raise InvalidPrivacyParameter(
            f"numeric column(s) {no_bound} have no public bound: pass bounds={{column: (lo, hi)}} "
            "from public knowledge (documentation, domain ranges); the Dask reader never "
            "reads bounds from the data"
        )
    no_cats = [c for c in categorical if c not in cats]
    if no_cats:
        raise InvalidPrivacyParameter(
            f"categorical column(s) {no_cats} have no public category list: pass "
            "categories={column: [values]}; the Dask reader never reads them from the data"
        )
    if task == "multiclass" or (classes is not None and len(classes) > 2):
        raise UnknownNameError(
            f"task must be 'binary' or 'regression' on the Dask path, got {task!r} "
            "(multi-class models are not available on the Dask backend)"
        )
    rule = label_rule(task, positive_label, label_bound, classes)
    task = rule.task
    center = task == "regression" if center is None else bool(center)
    impute = dict(impute or {})
    require(impute, "impute")
    schema = _user_schema(features, categorical, cats, bounds, log_columns, center, impute)
    if categorical and kind == "parquet":
        frame = frame.astype(dict.fromkeys(categorical, "string"))  # missing stays missing
    return _to_arrays(frame, schema, target, rule, dtype, path)


def _to_arrays(frame, schema, target, rule: LabelRule, dtype, path) -> Dataset:
    import dask.array as da
    from dask import compute, delayed

    parts = frame.to_delayed()
    lengths = compute(*[delayed(len)(p) for p in parts])  # counts only
    if sum(lengths) == 0:
        raise InvalidDataError(f"{path}: no rows")
    d = len(schema.feature_names)
    scale = schema.worst_case_norm
    dtype = np.dtype(dtype)
    feat = delayed(_features, pure=True)
    lab = delayed(_encode_target, pure=True)
    xs, ys = [], []
    for p, m in zip(parts, lengths, strict=True):
        if m == 0:
            continue
        xs.append(da.from_delayed(feat(p, schema, scale, dtype), shape=(m, d), dtype=dtype))
        ys.append(da.from_delayed(lab(p[target], rule, target), shape=(m,), dtype=np.float64))
    X = da.concatenate(xs, axis=0)
    y = da.concatenate(ys, axis=0)
    desc = (
        f"{path} read with dask ({len(xs)} partitions, {sum(lengths)} rows; missing cells "
        f"imputed by the public rule); target {target!r}: {rule.describe()}; rows divided "
        f"by the public worst-case norm {scale:.4g}"
    )
    return Dataset(
        name=path.stem or str(path),
        X_train=X,
        y_train=y,
        X_test=None,
        y_test=None,
        feature_names=schema.feature_names,
        task=rule.task,
        row_norm_bound=1.0,
        label_bound=rule.label_bound,
        description=desc,
        classes=rule.dataset_classes,
        label_names=rule.names,
        n_imputed=None,  # imputed on the workers, not counted (a count is a pass)
        n_clipped_labels=None,
        encoder=SchemaEncoder.from_schema(schema, normalize_rows=True),  # the same map
    )


def _npy_block(path: str, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of a ``.npy`` file, read through a memmap on the worker."""
    return np.asarray(np.load(path, mmap_mode="r")[start:stop])


def open_array(path: str | Path, *, chunk_rows: int | None = None):
    """A numpy ``.npy`` file (memory-mapped, read by the workers) or a Zarr array
    as a 2-D Dask array chunked by rows.

    The file is opened where the task runs (each task memory-maps its own rows),
    so nothing of the array passes through the client; every worker must see the
    same path (a shared file system) — or use Zarr on an object store.

    Parameters
    ----------
    path : str or Path
        ``*.npy`` or a Zarr store (``*.zarr`` directory or URL).
    chunk_rows : int, optional
        Rows per partition (default: ~128 MB per partition for ``.npy``, the
        store's chunks for Zarr, merged to whole rows).

    Returns
    -------
    dask.array.Array

    Raises
    ------
    DataFileNotFoundError, InvalidDataError
    MissingDependencyError
        Dask is not installed.
    """
    _require_dask()
    import dask.array as da
    from dask import delayed

    s = str(path)
    if s.endswith(".npy"):
        if not Path(s).is_file():
            raise DataFileNotFoundError(f"array file not found: expected {s}")
        mm = np.load(s, mmap_mode="r")  # reads the header only
        shape, dt = mm.shape, mm.dtype
        del mm
        if len(shape) != 2:
            raise InvalidDataError(f"{s}: expected a 2-D array, got shape {shape}")
        rows = chunk_rows or max(1, (128 << 20) // max(1, shape[1] * dt.itemsize))
        block = delayed(_npy_block, pure=True)
        blocks = [
            da.from_delayed(
                block(s, a, min(shape[0], a + rows)),
                shape=(min(shape[0], a + rows) - a, shape[1]),
                dtype=dt,
            )
            for a in range(0, shape[0], rows)
        ]
        return da.concatenate(blocks, axis=0)
    if "://" not in s and not Path(s).exists():
        raise DataFileNotFoundError(f"Zarr store not found: expected {s}")
    try:
        arr = da.from_zarr(s)
    except Exception as exc:  # zarr raises many kinds of errors for a bad store
        raise InvalidDataError(f"{s}: cannot open as a Zarr array ({exc})") from None
    if arr.ndim != 2:
        raise InvalidDataError(f"{s}: expected a 2-D array, got shape {arr.shape}")
    chunks = {1: -1} if chunk_rows is None else {0: chunk_rows, 1: -1}
    return arr.rechunk(chunks)
