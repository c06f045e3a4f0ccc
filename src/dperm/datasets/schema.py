"""Public column specifications for the loaders: the classes (re-exported from
:mod:`dperm.schema`, where the per-record map and its transformer live) and the helpers
that build a schema from a caller's bounds and category lists."""

from __future__ import annotations

from ..exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError
from ..schema import CategoricalColumn, NumericColumn, Schema, SquashedColumn, _as_bound_pair

__all__ = ["CategoricalColumn", "NumericColumn", "Schema", "SquashedColumn"]


def _num(name, lo, hi, source, log=False, center=False, impute=None) -> NumericColumn:
    return NumericColumn(name, lo, hi, log=log, source=source, center=center, impute=impute)


def _cat(name, categories, source, impute=None) -> CategoricalColumn:
    return CategoricalColumn(name, categories, source=source, impute=impute)


def _user_schema(
    features, categorical, categories, bounds, log_columns, center, impute=None
) -> Schema:
    """The schema of a file read with the caller's public bounds and category lists
    (:func:`~dperm.datasets.load_csv`, :func:`~dperm.datasets.read_dask`): the
    columns in ``categorical`` one-hot encoded, the others scaled by their bounds.

    A missing cell is imputed by a public rule, so that no row is dropped: the value
    ``impute[column]`` when given, else the midpoint of a numeric column's public range
    (:attr:`NumericColumn.midpoint`) and the all-zero block of a categorical one."""
    log_set = set(log_columns)
    impute = dict(impute or {})
    cols = []
    for c in features:
        if c in categorical:
            cols.append(_cat(c, categories[c], "user-supplied categories", impute.get(c)))
        else:
            lo, hi = _as_bound_pair(bounds[c], c)
            col = _num(c, lo, hi, "user-supplied bound", log=c in log_set, center=center)
            value = impute.get(c, col.midpoint)
            if isinstance(value, str):  # a command-line item: the number it spells
                try:
                    value = float(value)
                except ValueError:
                    raise InvalidPrivacyParameter(
                        f"impute value of numeric column {c!r} must be a number, got {value!r}"
                    ) from None
            cols.append(_num(c, lo, hi, col.source, log=col.log, center=center, impute=value))
    return Schema(tuple(cols))


def _column_check(header, path):
    """``require(names, what)``: UnknownNameError naming the ``what`` columns of
    ``names`` that are not in the file's ``header``."""

    def require(names, what):
        unknown = [c for c in names if c not in header]
        if unknown:
            raise UnknownNameError(f"{what} column(s) {unknown} not in {path}; columns: {header}")

    return require


def _refuse_unknown_categories(schema: Schema, frame) -> None:
    """InvalidDataError naming each categorical column with values outside its public list
    and how many rows hold one (never the values: they are private records'), as ``dperm
    predict`` refuses them; a missing cell is not unknown (it is imputed)."""
    bad = {
        c.name: k
        for c in schema.columns
        if hasattr(c, "categories") and (k := c.n_unknown(frame[c.name])) > 0
    }
    if bad:
        items = "; ".join(
            f"column {name!r}: {k} row(s) hold a value outside its public category list "
            f"{list(next(c for c in schema.columns if c.name == name).categories)}"
            for name, k in bad.items()
        )
        raise InvalidDataError(
            f"{items}; add the value to the list (categories=) or fix the file (values are "
            "compared as exact text)"
        )
