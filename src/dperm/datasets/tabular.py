"""Generic CSV / Parquet reader with a schema from the caller."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .._rng import check_random_state
from ..exceptions import (
    DataFileNotFoundError,
    InvalidDataError,
    InvalidPrivacyParameter,
    PrivacyLeakWarning,
    UnknownNameError,
)
from ._prepare import _check_test_size, _encode_labels, _finish_split, _norm_text, _split_indices
from .dataset import Dataset
from .schema import _column_check, _user_schema


def load_csv(
    path: str | Path,
    target: str,
    *,
    categorical: Sequence[str] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    categories: Mapping[str, Sequence] | None = None,
    log_columns: Sequence[str] = (),
    test_size: float = 0.2,
    random_state=0,
    positive_label=None,
    task: str | None = None,
    label_bound: float | None = None,
    allow_data_bounds: bool = False,
    normalize_rows: bool | str = "auto",
    center: bool | None = None,
) -> Dataset:
    """Load a CSV file (with a header row) with a schema from the caller.

    A path ending in ``.parquet`` or ``.pq`` is read as Parquet (needs a pandas
    Parquet engine, e.g. pyarrow) under the same schema rules.

    Numeric columns are scaled with **user-passed public bounds** only, and
    categorical columns one-hot encoded with **user-passed public category lists**
    only; a column without its bound or list is an error unless
    ``allow_data_bounds=True``, which takes the bound from the data's min/max (the
    list from the values present) and emits
    :class:`~dperm.exceptions.PrivacyLeakWarning` (the resulting model then has
    **no** end-to-end DP guarantee: the bounds reveal the extreme records, a category
    list reveals that some record holds each value; the Dataset's encoder then has a
    ``NonPrivate`` event).  A value outside its public list is encoded as all-zero.

    Rows with a missing value in any column are dropped (a per-record filter).

    Parameters
    ----------
    path : str or Path
    target : str
        Name of the label column.
    categorical : sequence of str, optional
        Categorical feature columns.  Default: every non-numeric column.
        Listed columns are read as text, so ``categories`` are compared as strings.
    bounds : dict column → (lo, hi), optional
        Public bounds of the numeric columns.
    categories : dict column → list, optional
        Public category lists.
    log_columns : sequence of str, default ()
        Numeric columns to scale on a log1p scale (need ``lo ≥ 0``).
    test_size : float in [0, 1), default 0.2
        Random split (stratified for classification); 0 → no test part.
    random_state : int, SeedSequence, Generator or None, default 0
    positive_label : optional
        Target value mapped to +1 (every other value → −1); implies a binary task.
    task : {"binary", "multiclass", "regression"}, optional
        Inferred when None: ``positive_label`` → binary; non-integer floats →
        regression; otherwise 2 distinct values → binary (the larger/later
        sorted value is +1), more → multiclass (sorted values → 0..k−1).
    label_bound : float, optional
        Regression: public bound on ``|y|``; targets are clipped to it.
    allow_data_bounds : bool, default False
        Allow bounds and category lists read from the data (privacy leak, warned).
    normalize_rows : {"auto", True, False, "unit"}, default "auto"
        True: divide rows by the public worst-case norm √(#numeric + #categorical).
        "unit": center every feature at the midpoint of its public range and scale
        each row to unit norm (a per-record map, as the breast-cancer loader does).
        "auto" (a public rule of the schema and the task): "unit" for a
        classification task whose features are all numeric, True otherwise.  With
        honest public bounds wider than the data, the worst-case division leaves
        every row pointing the same way (the all-positive midpoint direction): raw
        WDBC (sklearn's breast cancer) with bounds [0, 1.2·max] fitted at the
        majority-class rate (0.64); "unit" gives 0.85–0.95 at ε = 1 (issue #32,
        ``docs/datasets.md``, "Any CSV").  One-hot groups gain nothing from it
        (Adult: −0.8 point), and regression keeps the linear relation of the
        features to y, hence True there.
    center : bool or None, default None
        Map every numeric column to ``[−1, 1]``, centered at the midpoint of its public
        bounds (:class:`NumericColumn` ``center=True``) instead of ``[0, 1]``; the row
        bound is unchanged.  None: centered for a regression task (where it is what
        sufficient-statistics regression needs, see ``docs/datasets.md``), not for
        classification.

    Returns
    -------
    Dataset

    Raises
    ------
    DataFileNotFoundError
        If ``path`` does not exist.
    UnknownNameError
        If ``target`` or a column named in ``categorical``/``bounds``/``categories``/
        ``log_columns`` is not in the file, or ``task`` is unknown.
    InvalidPrivacyParameter
        If a numeric column has no bound or a categorical column no category list and
        ``allow_data_bounds`` is False, or a bound is not a finite pair with ``lo < hi``.
    InvalidDataError, LabelError
        Empty data, a non-numeric column treated as numeric, bad labels.

    Warns
    -----
    PrivacyLeakWarning
        When bounds or category lists are taken from the data.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"CSV file not found: expected {path}")
    test_size = _check_test_size(test_size)
    parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        if parquet:  # same schema rules; needs a Parquet engine (pyarrow)
            whole = pd.read_parquet(path)
            header = [str(c) for c in whole.columns]
        else:
            header = pd.read_csv(path, nrows=0).columns.tolist()
    except pd.errors.EmptyDataError:
        raise InvalidDataError(f"{path}: the file is empty (no header row)") from None
    except ImportError as exc:
        raise InvalidDataError(f"{path}: cannot read Parquet ({exc})") from None
    categorical = None if categorical is None else list(categorical)
    require = _column_check(header, path)
    require([target], "target")
    if categorical is not None:
        require(categorical, "categorical")
    dtypes = {c: "str" for c in (categorical or [])}
    if parquet:
        frame = whole.astype(dtypes) if dtypes else whole
    else:
        frame = pd.read_csv(path, dtype=dtypes or None, engine="c")
    n_raw = len(frame)
    frame = frame.dropna().reset_index(drop=True)
    if len(frame) == 0:
        raise InvalidDataError(f"{path}: no rows left after dropping rows with missing values")
    features = [c for c in frame.columns if c != target]
    if categorical is None:
        categorical = [c for c in features if not pd.api.types.is_numeric_dtype(frame[c])]
    if target in categorical:
        raise InvalidDataError(f"target {target!r} is listed as a categorical feature")
    numeric = [c for c in features if c not in categorical]
    bounds = dict(bounds or {})
    categories = dict(categories or {})
    require(bounds, "bounds")
    require(categories, "categories")
    require(log_columns, "log_columns")
    not_numeric = [c for c in [*bounds, *log_columns] if c not in numeric]
    if not_numeric:
        raise UnknownNameError(
            f"bounds or log_columns given for non-numeric column(s) {not_numeric}; "
            f"numeric columns: {numeric}"
        )
    for c in numeric:
        if not pd.api.types.is_numeric_dtype(frame[c]):
            raise InvalidDataError(
                f"column {c!r} is not numeric; list it in categorical= to one-hot encode it"
            )
    no_bound = [c for c in numeric if c not in bounds]
    no_cats = [c for c in categorical if c not in categories]
    if (no_bound or no_cats) and not allow_data_bounds:
        # a category list is a bound on a categorical column: the same rule, the same opt-in
        missing = []
        if no_bound:
            missing.append(
                f"numeric column(s) {no_bound} have no public bound: pass "
                "bounds={column: (lo, hi)}"
            )
        if no_cats:
            missing.append(
                f"categorical column(s) {no_cats} have no public category list: pass "
                "categories={column: [values]}"
            )
        raise InvalidPrivacyParameter(
            "; ".join(missing) + " from public knowledge (documentation, domain ranges, code "
            "books). allow_data_bounds=True reads them from the data instead, which leaks "
            "privacy."
        )
    if no_bound or no_cats:
        warnings.warn(
            f"the bounds of column(s) {no_bound} (min/max) and the category lists of column(s) "
            f"{no_cats} (the values present) are read from the data (allow_data_bounds=True); "
            "this leaks privacy, so the result has no end-to-end DP guarantee",
            PrivacyLeakWarning,
            stacklevel=2,
        )
    for c in no_bound:
        lo, hi = float(frame[c].min()), float(frame[c].max())
        bounds[c] = (lo, hi if hi > lo else lo + 1.0)
    for c in no_cats:
        categories[c] = sorted(frame[c].astype(str).unique().tolist())
    y_raw = frame[target].to_numpy()
    y_enc, _, task, label_text = _encode_labels(y_raw, None, task, positive_label, label_bound)
    center = task == "regression" if center is None else bool(center)
    if isinstance(normalize_rows, str) and normalize_rows == "auto":
        normalize_rows = "unit" if (task != "regression" and not categorical) else True
    schema = _user_schema(features, categorical, categories, bounds, log_columns, center)
    rng = check_random_state(random_state)
    strat = y_enc if task != "regression" else None
    tr, te = _split_indices(len(frame), test_size, rng, stratify=strat)
    desc = (
        f"CSV file {path}; {n_raw} rows, {n_raw - len(frame)} dropped for missing values; "
        f"target {target!r}: {label_text}. Split test_size={test_size}, "
        f"random_state={random_state!r}. " + _norm_text(schema, normalize_rows)
    )
    if no_bound or no_cats:
        desc += " WARNING: bounds or categories were read from the data (privacy leak)."
    bound = float(label_bound) if (task == "regression" and label_bound is not None) else None
    dependent = tuple(c for c in features if c in no_bound or c in no_cats)
    ds = _finish_split(
        path.stem, schema, frame, y_enc, tr, te, task, normalize_rows, bound, desc, dependent
    )
    ds.label_names = _label_names(y_raw, task, positive_label)
    return ds


def _label_names(y_raw: np.ndarray, task: str, positive_label) -> tuple | None:
    """The file's label values in the order of :func:`_encode_labels`' encoding:
    (value → −1, value → +1) for a binary task (``"not <positive_label>"`` when several
    values map to −1), the sorted classes for a multi-class one; None for regression."""
    if task == "regression":
        return None
    vals = np.unique(y_raw)
    if task == "multiclass" or positive_label is None:  # binary: the larger value is +1
        return tuple(vals.tolist())
    pos = str(positive_label)
    others = [v for v in vals.tolist() if str(v) != pos]
    match = [v for v in vals.tolist() if str(v) == pos]
    positive = match[0] if match else positive_label
    return (others[0] if len(others) == 1 else f"not {pos}", positive)
