"""The inputs of ``dperm fit``: public schema options, the data sources, the row bound.

:func:`load_fit_dataset` loads the one data source the options name (a built-in
dataset, a ``--csv`` file, or a Dask ``--parquet``/``--csv-dir`` source) and
:func:`public_data_norm` resolves the row bound ``data_norm`` from the options or the
dataset's public bound.  ``--bounds`` and ``--categories`` take either a schema file
(JSON, or YAML when PyYAML is installed) or ``col=…`` items (``--ledger``:
:mod:`dperm.cli._fit_ledger`).  Nothing here reads the private data: bounds and
category lists come from the user.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..exceptions import InvalidPrivacyParameter, PrivacyLeakWarning
from ._common import step

__all__ = [
    "dask_scheduler",
    "load_dask_dataset",
    "load_fit_dataset",
    "parse_bounds",
    "parse_categorical",
    "parse_categories",
    "parse_classes",
    "parse_impute",
    "public_data_norm",
    "split_bounds",
]


def _read_schema_file(path: Path, option: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidPrivacyParameter(
            f"{option}: {str(path)!r} is not UTF-8 text (a JSON or YAML schema file)"
        ) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:  # pragma: no cover - depends on the environment
            raise InvalidPrivacyParameter(
                f"{option}: reading {str(path)!r} needs PyYAML; use a JSON file"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            why = str(getattr(exc, "problem", None) or "unreadable")
            where = "" if mark is None else f", line {mark.line + 1}"
            raise InvalidPrivacyParameter(
                f"{option}: {str(path)!r} is not valid YAML ({why}{where})"
            ) from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidPrivacyParameter(
                f"{option}: {str(path)!r} is not valid JSON ({exc.msg}, line {exc.lineno})"
            ) from None
    if not isinstance(data, dict):
        raise InvalidPrivacyParameter(
            f"{option}: {str(path)!r} must hold an object {{column: value}}"
        )
    return data


def _items(items: Sequence[str] | None, option: str, parse_value) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or ():
        path = Path(item)
        if "=" not in item or path.is_file():
            if not path.is_file():
                raise InvalidPrivacyParameter(
                    f"{option}: {item!r} is neither an existing schema file nor a col=… item"
                )
            data = _read_schema_file(path, option)
            for k, v in data.items():
                if isinstance(v, str) and parse_value is not _impute_value:
                    # a file holds lists: "red" is not ["red"], "0:10" not [0, 10]
                    raise InvalidPrivacyParameter(
                        f"{option}: {str(path)!r} gives {str(k)!r} the string {v!r} where a "
                        'list is expected (e.g. [0, 10] or ["red", "blue"])'
                    )
                out[str(k)] = parse_value(str(k), v, option)
            continue
        col, _, value = item.partition("=")
        if not col.strip():
            raise InvalidPrivacyParameter(f"{option}: {item!r} has no column name before '='")
        out[col.strip()] = parse_value(col.strip(), value, option)
    return out


def _bound_value(col: str, value: Any, option: str) -> tuple:
    """``lo:hi`` (or ``[lo, hi]``) → (lo, hi); ``lo:hi:log`` (``[lo, hi, "log"]``) →
    (lo, hi, "log"): the column is scaled on the log1p scale (``lo ≥ 0``)."""
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) not in (2, 3):
            raise InvalidPrivacyParameter(
                f"{option}: bound of {col!r} must be lo:hi or lo:hi:log, got {value!r}"
            )
        value = parts
    if not isinstance(value, (list, tuple)) or len(value) not in (2, 3):
        raise InvalidPrivacyParameter(
            f'{option}: bound of {col!r} must be [lo, hi] or [lo, hi, "log"], got {value!r}'
        )
    log = len(value) == 3
    if log and str(value[2]).strip().lower() != "log":
        raise InvalidPrivacyParameter(
            f"{option}: the third part of the bound of {col!r} can only be 'log', got {value[2]!r}"
        )
    from .._validation import check_interval  # the library, once a command runs (fast --help)

    lo, hi = check_interval(value[:2], f"{option}: bound of {col!r}")
    if log and lo < 0:
        raise InvalidPrivacyParameter(
            f"{option}: a log-scaled bound needs lo ≥ 0; {col!r} has {lo}:{hi}:log"
        )
    return (lo, hi, "log") if log else (lo, hi)


def _category_value(col: str, value: Any, option: str) -> list[str]:
    vals = value.split(",") if isinstance(value, str) else value
    if not isinstance(vals, (list, tuple)) or not vals:
        raise InvalidPrivacyParameter(
            f"{option}: categories of {col!r} must be a non-empty list, got {value!r}"
        )
    vals = [str(v).strip() for v in vals]
    if any(not v for v in vals) or len(set(vals)) != len(vals):
        raise InvalidPrivacyParameter(
            f"{option}: categories of {col!r} must be distinct and non-empty, got {value!r}"
        )
    return vals


def parse_bounds(items: Sequence[str] | None) -> dict[str, tuple]:
    """``--bounds``: schema files ``{"col": [lo, hi]}`` and/or ``col=lo:hi`` items; a
    third part ``log`` (``col=lo:hi:log``, ``[lo, hi, "log"]``) scales the column on
    the log1p scale (for heavy-tailed non-negative quantities; :func:`split_bounds`).

    Raises
    ------
    InvalidPrivacyParameter
        On a missing file, bad JSON, or a bound that is not finite with lo < hi.
    """
    return _items(items, "--bounds", _bound_value)


def split_bounds(bounds) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """(``{col: (lo, hi)}``, the log1p-scaled columns) of parsed ``--bounds`` items or
    a dict of pairs (``(lo, hi, "log")`` marks a log1p-scaled column)."""
    pairs = bounds if isinstance(bounds, dict) else parse_bounds(bounds)
    logs = [c for c, v in pairs.items() if isinstance(v, (list, tuple)) and len(v) == 3]
    return {c: (tuple(v[:2]) if c in logs else v) for c, v in pairs.items()}, logs


def parse_categories(items: Sequence[str] | None) -> dict[str, list[str]]:
    """``--categories``: files ``{"col": ["a", "b"]}`` and/or ``col=a,b,c`` items."""
    return _items(items, "--categories", _category_value)


def _impute_value(col: str, value: Any, option: str) -> Any:
    if isinstance(value, list | dict) or value is None or (isinstance(value, str) and not value):
        raise InvalidPrivacyParameter(
            f"{option}: the value of {col!r} must be one number or category, got {value!r}"
        )
    return value.strip() if isinstance(value, str) else value


def parse_impute(items: Sequence[str] | None) -> dict[str, Any]:
    """``--impute``: files ``{"col": value}`` and/or ``col=value`` items — the public value
    of a column's missing cells (a number, or a category of its list)."""
    return _items(items, "--impute", _impute_value)


def parse_classes(value: str | Sequence | None) -> list | None:
    """``--classes A,B,C``: the public label list (a list is returned as it is)."""
    if value is None or isinstance(value, list | tuple):
        return None if value is None else list(value)
    return [v.strip() for v in str(value).split(",")]


def parse_categorical(items: Sequence[str] | None) -> list[str] | None:
    """``--categorical COL`` (repeat, or ``A,B``): columns of numbers to one-hot encode."""
    if not items:
        return None
    return [c.strip() for item in items for c in str(item).split(",") if c.strip()]


def _label_value(label):
    """A number on the command line means the numeric label (``--positive-label 1``)."""
    if label is None or not isinstance(label, str):
        return label
    try:
        num = float(label)
    except ValueError:
        return label
    return int(num) if num.is_integer() else num


# ----------------------------------------------------------------------------- Dask path
@contextmanager
def dask_scheduler(address: str | None) -> Iterator[Any]:
    """``--scheduler``: None → Dask's default scheduler (threads, this machine, out of
    core); ``local`` → a ``distributed.LocalCluster`` on this machine (one worker
    process per core) for the duration of the command; any other value → the
    address of a running scheduler (``tcp://host:8786``).  Yields the Client or None.

    Raises
    ------
    InvalidPrivacyParameter
        The Dask extra is not installed, or the scheduler cannot be reached.
    """
    if address is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise InvalidPrivacyParameter(
            f"--scheduler needs dask.distributed (pip install 'dperm[dask]'): {exc}"
        ) from None
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(threads_per_worker=1, processes=True, dashboard_address=":0")
            client = Client(cluster)
        else:
            client = Client(address, timeout="10s")
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise InvalidPrivacyParameter(f"--scheduler {address}: cannot connect ({exc})") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def load_dask_dataset(path, fmt: str, schema: dict[str, Any]):
    """``--parquet`` / ``--csv-dir``: :func:`dperm.datasets.dask_io.read_dask` with the
    public schema of the command line (``schema``: the :data:`~dperm.cli._common.FILE_SCHEMA`
    options; bounds, category lists and labels from the user only)."""
    from ..datasets.dask_io import read_dask

    option = "--parquet" if fmt == "parquet" else "--csv-dir"
    if schema.get("target") is None:
        raise InvalidPrivacyParameter(f"{option} needs --target COLUMN (the label column)")
    return read_dask(path, schema["target"], **_schema_kwargs(schema), format=fmt)


def _schema_kwargs(schema: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the readers for the command line's ``schema`` options."""
    pairs, log_columns = split_bounds(schema.get("bounds"))
    cats = schema.get("categories")
    impute = schema.get("impute")
    return {
        "bounds": pairs,
        "log_columns": log_columns,
        "categories": cats if isinstance(cats, dict) else parse_categories(cats),
        "categorical": _categorical(schema),
        "classes": parse_classes(schema.get("classes")),
        "task": schema.get("task"),
        "label_bound": schema.get("label_bound"),
        "positive_label": _label_value(schema.get("positive_label")),
        "impute": impute if isinstance(impute, dict) else parse_impute(impute),
    }


def _categorical(schema: dict[str, Any]) -> list[str] | None:
    """The categorical columns: the text columns (None: the readers' default) plus the
    ``--categorical`` columns of numbers, which are then listed with the text columns
    of ``--categories``."""
    listed = parse_categorical(schema.get("categorical"))
    if listed is None:
        return None
    cats = schema.get("categories")
    named = list(cats if isinstance(cats, dict) else parse_categories(cats))
    return list(dict.fromkeys([*named, *listed]))


# ------------------------------------------------------------------ the fit's data source
def load_fit_dataset(
    dataset: str | None = None,
    data_home=None,
    *,
    csv=None,
    parquet=None,
    csv_dir=None,
    allow_data_bounds: bool = False,
    verbose: bool = False,
    **schema: Any,
):
    """The data of ``dperm fit`` and ``dperm audit --one-run``: a Dask source
    (``parquet``/``csv_dir``, never gathered), a ``csv`` file with its public schema, or
    the built-in ``dataset``.

    ``schema`` holds the options of :data:`~dperm.cli._common.FILE_SCHEMA` (``target``,
    ``bounds``, ``categories``, ``categorical``, ``classes``, ``task``, ``label_bound``,
    ``positive_label``, ``impute``): command-line items or files, or parsed dicts and
    lists.

    Returns
    -------
    (Dataset, bool)
        The dataset and ``bounds_from_data``: True when loading the ``csv`` warned
        (:class:`~dperm.exceptions.PrivacyLeakWarning`) that a bound or category list
        was read from the data (``allow_data_bounds``).

    Raises
    ------
    InvalidPrivacyParameter
        Options of two sources, or an option the chosen source does not use.
    """
    unknown = sorted(set(schema) - set(_SCHEMA_KEYS))
    if unknown:
        raise TypeError(f"load_fit_dataset() got unexpected options {unknown}")
    if parquet is not None or csv_dir is not None:  # Dask (docs/cluster.md): never gathered
        if dataset is not None or csv is not None or (parquet and csv_dir) or allow_data_bounds:
            raise InvalidPrivacyParameter(
                "give one of --dataset, --csv, --parquet, --csv-dir; --allow-data-bounds is "
                "not available with --parquet/--csv-dir (bounds must be public)"
            )
        fmt = "parquet" if parquet is not None else "csv"
        return load_dask_dataset(parquet or csv_dir, fmt, schema), False
    if csv is not None:
        if dataset is not None:
            raise InvalidPrivacyParameter("give either --dataset or --csv, not both")
        return _load_csv(csv, schema, allow_data_bounds)
    from .. import datasets

    given = [k for k in _SCHEMA_KEYS if schema.get(k) not in (None, [], {}, ())]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise InvalidPrivacyParameter(
            f"{flags}: the public schema of a file, only used with --csv (or --parquet, "
            "--csv-dir); a built-in dataset has its own"
        )
    with step(f"loading {dataset or datasets.DEFAULT_DATASET}", verbose):
        ds = datasets.load(dataset or datasets.DEFAULT_DATASET, data_home)
    return ds, False


#: the options of a file's public schema (:data:`dperm.cli._common.FILE_SCHEMA`)
_SCHEMA_KEYS = (
    "target",
    "bounds",
    "categories",
    "categorical",
    "classes",
    "task",
    "label_bound",
    "positive_label",
    "impute",
)


def _load_csv(csv, schema: dict[str, Any], allow_data_bounds: bool):
    """``--csv``: :func:`dperm.datasets.load_csv` with the public schema of the command
    line; its warnings are re-emitted, and a leak warning means data bounds."""
    from .. import datasets

    if schema.get("target") is None:
        raise InvalidPrivacyParameter("--csv needs --target COLUMN (the label column)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = datasets.load_csv(
            csv,
            schema["target"],
            **_schema_kwargs(schema),
            allow_data_bounds=allow_data_bounds,
        )
    bounds_from_data = False
    for w in caught:  # re-emit; a leak warning at load time means data bounds
        bounds_from_data |= issubclass(w.category, PrivacyLeakWarning)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return ds, bounds_from_data


def public_data_norm(ds, data_norm: float | None) -> float:
    """``--data-norm``, or the dataset's public row-norm bound when it is not given.

    Raises
    ------
    InvalidPrivacyParameter
        Not given, and the dataset has no finite public bound.
    """
    if data_norm is not None:
        return data_norm
    if not math.isfinite(ds.row_norm_bound):
        raise InvalidPrivacyParameter(
            f"dataset {ds.name!r} has no public row-norm bound; pass --data-norm"
        )
    return ds.row_norm_bound
