"""Public column specifications for the loaders: the classes (re-exported from
:mod:`dperm.schema`, where the per-record map and its transformer live) and the helpers
that build a schema from a caller's bounds and category lists."""

from __future__ import annotations

from ..exceptions import UnknownNameError
from ..schema import CategoricalColumn, NumericColumn, Schema, SquashedColumn, _as_bound_pair

__all__ = ["CategoricalColumn", "NumericColumn", "Schema", "SquashedColumn"]


def _num(name, lo, hi, source, log=False, center=False) -> NumericColumn:
    return NumericColumn(name, lo, hi, log=log, source=source, center=center)


def _cat(name, categories, source) -> CategoricalColumn:
    return CategoricalColumn(name, tuple(categories), source=source)


def _user_schema(features, categorical, categories, bounds, log_columns, center) -> Schema:
    """The schema of a file read with the caller's public bounds and category lists
    (:func:`~dperm.datasets.load_csv`, :func:`~dperm.datasets.read_dask`): the
    columns in ``categorical`` one-hot encoded, the others scaled by their bounds."""
    log_set = set(log_columns)
    cols = []
    for c in features:
        if c in categorical:
            cols.append(_cat(c, categories[c], "user-supplied categories"))
        else:
            lo, hi = _as_bound_pair(bounds[c], c)
            cols.append(_num(c, lo, hi, "user-supplied bound", log=c in log_set, center=center))
    return Schema(tuple(cols))


def _column_check(header, path):
    """``require(names, what)``: UnknownNameError naming the ``what`` columns of
    ``names`` that are not in the file's ``header``."""

    def require(names, what):
        unknown = [c for c in names if c not in header]
        if unknown:
            raise UnknownNameError(f"{what} column(s) {unknown} not in {path}; columns: {header}")

    return require
