"""Generic CSV / Parquet reader with a schema from the caller."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import (
    DataFileNotFoundError,
    InvalidDataError,
    InvalidPrivacyParameter,
    PrivacyLeakWarning,
    UnknownNameError,
)
from ._prepare import _check_test_size, _finish_split, _norm_text, file_split, label_rule
from .dataset import Dataset
from .schema import _column_check, _refuse_unknown_categories, _user_schema


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
    classes: Sequence | None = None,
    impute: Mapping[str, object] | None = None,
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
    ``NonPrivate`` event).  A value outside its public list is refused, as ``dperm
    predict`` refuses it.

    **Neighbouring files give neighbouring training sets** (issue #36,
    ``docs/neighbouring.md``, "One record of a file"): the task and the label encoding
    come from the caller's options (``task``, ``label_bound``, ``classes``,
    ``positive_label``), never from the labels; no row is dropped (a missing cell is
    imputed by a public rule, so n depends on the file's length only); the train/test
    split is :func:`~dperm.datasets._prepare.file_split` — one coin per row position
    from the public ``random_state``, nothing else of the file.

    Parameters
    ----------
    path : str or Path
    target : str
        Name of the label column.
    categorical : sequence of str, optional
        Categorical feature columns.  Default: every column with a list in
        ``categories`` (whatever its values: one record must not switch a column's kind)
        and every other non-numeric column.  These columns are read as text, so
        ``categories`` are compared as strings.  When ``categorical`` is given, a
        category list on a numeric column it does not name is refused.
    bounds : dict column → (lo, hi), optional
        Public bounds of the numeric columns.
    categories : dict column → list, optional
        Public category lists (lists, never a string).
    log_columns : sequence of str, default ()
        Numeric columns to scale on a log1p scale (need ``lo ≥ 0``).
    test_size : float in [0, 1), default 0.2
        Each row is a test row with this probability, by a coin of its position
        (:func:`~dperm.datasets._prepare.file_split`); 0 → no test part.
    random_state : int, SeedSequence, Generator or None, default 0
        The public seed of the split's coins (None: fresh, secret coins).
    positive_label : optional
        Target value mapped to +1 (every other value → −1); implies a binary task.
    task : {"binary", "multiclass", "regression"}, optional
        Never read off the labels: ``label_bound`` → regression; ``classes`` with two
        labels → binary, three or more → multiclass; ``positive_label`` → binary.  A
        file whose options leave the task open is refused, naming them.
    label_bound : float, optional
        Regression (implies ``task="regression"``): public bound on ``|y|``; targets
        are clipped to it and counted (``Dataset.n_clipped_labels``); a file where more
        than half of them are clipped is refused (a non-private usability check, like
        the estimators' "mostly clipped" rows check).
    classes : list, optional
        The public label list of a classification task: two labels → binary (the first
        ↦ −1, the second ↦ +1), more → multiclass (the j-th ↦ j).  Compared record by
        record: as numbers when the value and the label are numbers, else as text.  A
        label outside the list is refused (as a category outside its list).
        ``Dataset.label_names`` keeps the list, so a saved model predicts these names.
    impute : dict column → value, optional
        The public value of a missing cell of a feature column; default: the midpoint
        of a numeric column's public range, the all-zero block of a categorical one.
        A missing label is refused.  The cells imputed are counted
        (``Dataset.n_imputed``, not private).
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
        ``log_columns``/``impute`` is not in the file, or ``task`` is unknown.
    InvalidPrivacyParameter
        If a numeric column has no bound or a categorical column no category list and
        ``allow_data_bounds`` is False, a bound is not a finite pair with ``lo < hi``,
        a category list is a string or is given for a numeric column not listed in
        ``categorical``, or the options leave the task open or contradict each other.
    InvalidDataError
        No rows, a non-numeric column treated as numeric, a category outside its public
        list, most targets clipped, or no training row.
    LabelError
        A missing label, a label outside ``classes``, a non-numeric regression target.

    Warns
    -----
    PrivacyLeakWarning
        When bounds or category lists are taken from the data.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"CSV file not found: expected {path}")
    test_size = _check_test_size(test_size)
    rule = label_rule(task, positive_label, label_bound, classes)  # before any data is read
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
    except _UNREADABLE as exc:
        raise _unreadable(path, exc) from None
    categorical = None if categorical is None else list(categorical)
    require = _column_check(header, path)
    require([target], "target")
    if categorical is not None:
        require(categorical, "categorical")
    # the columns read as text: ``categorical``, by default every column with a public
    # category list — its kind is the caller's, never the values' (one record of codes
    # or text must not switch it), as in dperm.datasets.read_dask and dperm predict
    if categorical is None:
        text = [c for c in (categories or {}) if c in header and c != target]
    else:
        text = categorical
    if parquet:
        frame = _text_columns(whole, text)
    else:
        dtypes = dict.fromkeys(text, "str")
        try:
            frame = pd.read_csv(path, dtype=dtypes or None, engine="c")
        except _UNREADABLE as exc:
            raise _unreadable(path, exc) from None
    n = len(frame)
    if n == 0:
        raise InvalidDataError(f"{path}: the file has no rows")
    features = [c for c in frame.columns if c != target]
    if categorical is None:
        categorical = [
            c for c in features if c in text or not pd.api.types.is_numeric_dtype(frame[c])
        ]
    if target in categorical:
        raise InvalidDataError(f"target {target!r} is listed as a categorical feature")
    numeric = [c for c in features if c not in categorical]
    bounds = dict(bounds or {})
    categories = dict(categories or {})
    impute = dict(impute or {})
    require(bounds, "bounds")
    require(categories, "categories")
    require(log_columns, "log_columns")
    require(impute, "impute")
    _check_schema_columns(frame, target, numeric, bounds, categories, log_columns, impute)
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
        lo, hi = (0.0, 1.0) if np.isnan(lo) else (lo, hi)  # an empty column
        bounds[c] = (lo, hi if hi > lo else lo + 1.0)
    for c in no_cats:
        categories[c] = sorted(frame[c].dropna().astype(str).unique().tolist()) or ["(none)"]
    center = rule.task == "regression" if center is None else bool(center)
    if isinstance(normalize_rows, str) and normalize_rows == "auto":
        normalize_rows = "unit" if (rule.task != "regression" and not categorical) else True
    schema = _user_schema(features, categorical, categories, bounds, log_columns, center, impute)
    _refuse_unknown_categories(schema, frame)
    n_imputed = int(frame[features].isna().to_numpy().sum())
    y_enc, n_clipped = rule.encode(frame[target].to_numpy(), target)
    if rule.label_bound is not None and 2 * n_clipped > n:
        raise InvalidDataError(
            f"{n_clipped} of the {n} targets have |y| above label_bound={rule.label_bound:g}, "
            "so the fit would clip most of them and return a near-useless model; pass the "
            "public bound of the target (its documented range), not a guess below it"
        )
    tr, te = _split_rows(y_enc, test_size, random_state)
    if tr.size == 0:
        raise InvalidDataError(
            f"{path}: no training row ({n} rows, test_size={test_size}): lower test_size"
        )
    desc = (
        f"CSV file {path}; {n} rows, {n_imputed} missing cells imputed by the public rule "
        f"(the declared value, else the midpoint of the public range; not private); target "
        f"{target!r}: {rule.describe()}. Split by a public coin per row position "
        f"(test_size={test_size}, random_state={random_state!r}). "
        + _norm_text(schema, normalize_rows)
    )
    if no_bound or no_cats:
        desc += " WARNING: bounds or categories were read from the data (privacy leak)."
    bound = rule.label_bound if rule.task == "regression" else None
    dependent = tuple(c for c in features if c in no_bound or c in no_cats)
    ds = _finish_split(
        path.stem, schema, frame, y_enc, tr, te, rule.task, normalize_rows, bound, desc, dependent
    )
    ds.classes = rule.dataset_classes
    ds.label_names = rule.names
    ds.n_imputed = n_imputed
    ds.n_clipped_labels = n_clipped
    return ds


#: a file pandas cannot read as a table: not UTF-8 text, or ragged rows
_UNREADABLE = (pd.errors.ParserError, UnicodeDecodeError)


def _unreadable(path: Path, exc: Exception) -> InvalidDataError:
    """The error of a file that is not a CSV table (the bytes are never echoed)."""
    why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else " ".join(str(exc).split())
    return InvalidDataError(f"{path}: cannot be read as a CSV table with a header row ({why})")


def _split_rows(y: np.ndarray, test_size: float, random_state) -> tuple[np.ndarray, np.ndarray]:
    """The train/test rows of a file with encoded labels ``y``: :func:`file_split` of
    ``len(y)`` — the labels are passed for their count only (a split that read them, the
    stratified split of dperm before issue #36, is the audit mutant
    ``cli-csv[stratified-split]``)."""
    return file_split(len(y), test_size, random_state)


def _text_columns(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``frame`` with ``columns`` as text, missing cells kept missing (a Parquet file's
    column of numbers read as categories)."""
    if not columns:
        return frame
    frame = frame.copy()
    for c in columns:
        frame[c] = frame[c].where(frame[c].isna(), frame[c].astype(str))
    return frame


def _check_schema_columns(frame, target, numeric, bounds, categories, log_columns, impute):
    """The caller's schema against the file's columns: bounds and log scales on numeric
    columns, category lists on categorical ones, numeric columns that hold numbers.

    Raises
    ------
    UnknownNameError, InvalidPrivacyParameter, InvalidDataError
    """
    if target in impute or target in bounds or target in categories:
        raise InvalidPrivacyParameter(
            f"{target!r} is the target column: its bound is label_bound=, its labels "
            "classes= (not bounds=, categories= or impute=)"
        )
    not_numeric = [c for c in [*bounds, *log_columns] if c not in numeric]
    if not_numeric:
        raise UnknownNameError(
            f"bounds or log_columns are given for column(s) {not_numeric}, but these hold a "
            "value that is not a number (a typo in a record, or a categorical column: give "
            f"it categories= instead); the numeric columns: {numeric}"
        )
    listed_numeric = [c for c in categories if c in numeric]
    if listed_numeric:
        raise InvalidPrivacyParameter(
            f"a category list is given for the numeric column(s) {listed_numeric}: a numeric "
            "column needs a public bound, bounds={column: (lo, hi)}; to one-hot encode its "
            "codes instead, list it in categorical="
        )
    for c, values in categories.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
            raise InvalidPrivacyParameter(
                f"the categories of column {c!r} must be a list of values, e.g. "
                f"['red', 'blue'], got {type(values).__name__}: {values!r}"
            )
    for c in numeric:
        if not pd.api.types.is_numeric_dtype(frame[c]):
            raise InvalidDataError(
                f"column {c!r} is not numeric; list it in categorical= to one-hot encode it"
            )
