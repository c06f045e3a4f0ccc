"""The public schema of raw tabular records, and :class:`SchemaEncoder`, its transformer.

A schema is an ordered list of public column specifications — numeric columns with public
bounds (:class:`NumericColumn`, :class:`SquashedColumn`) and categorical columns with a
public category list (:class:`CategoricalColumn`) — and :meth:`Schema.transform` is the
only place where raw records become features.  It is a per-record map: row ``i`` of the
output depends on row ``i`` of the input and on the (public) schema only, so it spends
no privacy.

:class:`SchemaEncoder` is the same map as a scikit-learn transformer whose parameters are
plain data (the column specifications and the row scaling).  The loaders
(:mod:`dperm.datasets`) build their features with it, and ``dperm fit --csv … --save``
saves it in front of the estimator, so that ``dperm.load(path).predict(frame)`` and
``dperm predict`` score raw rows exactly as the training rows were encoded.

Floor: beside :mod:`dperm.preprocessing` (it imports only the accounting events and the
exceptions); :mod:`dperm.datasets` re-exports the column classes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._parameters import store_params
from ._validation import check_interval, float_array
from .accounting.events import NonPrivate, NoOp
from .exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError

__all__ = [
    "CategoricalColumn",
    "NumericColumn",
    "Schema",
    "SchemaEncoder",
    "SquashedColumn",
]


@dataclass(frozen=True)
class NumericColumn:
    """A numeric column with public bounds.

    The feature is ``(clip(x, lo, hi) − lo) / (hi − lo)`` or, with ``log=True``,
    ``(log1p(clip(x, lo, hi)) − log1p(lo)) / (log1p(hi) − log1p(lo))`` (for
    heavy-tailed non-negative quantities).  Either way it lies in ``[0, 1]``
    and depends on the record's own value only.  With ``center=True`` the
    feature is ``2z − 1 ∈ [−1, 1]``: centered at the midpoint of its *public*
    range (a property of the bounds, not of the data) and spread over the whole
    interval, so it keeps ``|feature| ≤ 1`` (the row bound is unchanged) while
    its second-moment matrix is no longer dominated by the all-positive mean
    direction — which is what sufficient-statistics regression (AdaSSP) needs
    (see ``docs/datasets.md``, "Centered features").

    Parameters
    ----------
    name : str
    lo, hi : float
        Public bounds, ``lo < hi``, finite; ``lo ≥ 0`` when ``log``.
    log : bool, default False
    source : str
        Where the bounds come from (documentation, domain knowledge, user).
    center : bool, default False
        Map to ``[−1, 1]`` (public midpoint ↦ 0) instead of ``[0, 1]``.
    impute : float, optional
        The raw value a missing (NaN) cell takes — a public rule, so the row count never
        depends on the data (the file loaders default to :attr:`midpoint`).  None: a
        missing value is an error (the built-in datasets have none).

    Raises
    ------
    InvalidPrivacyParameter
        If the bounds are not finite, ``lo ≥ hi``, ``lo < 0`` with ``log``, or
        ``impute`` is not a finite number.
    """

    name: str
    lo: float
    hi: float
    log: bool = False
    source: str = ""
    center: bool = False
    impute: float | None = None

    @property
    def midpoint(self) -> float:
        """The raw value mapped to the middle of the feature range (the public midpoint of
        ``[lo, hi]``, on the log1p scale when ``log``): the default imputation."""
        if self.log:
            return float(np.expm1(0.5 * (np.log1p(self.lo) + np.log1p(self.hi))))
        return 0.5 * (self.lo + self.hi)

    def __post_init__(self):
        _check_impute_number(self)
        lo, hi = check_interval((self.lo, self.hi), f"bounds for column {self.name!r}")
        if self.log and lo < 0:
            raise InvalidPrivacyParameter(
                f"a log1p-scaled column needs lo ≥ 0; column {self.name!r} has lo={self.lo!r}"
            )
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def _values(self, values) -> np.ndarray:
        """The raw values as float64 (InvalidDataError when missing or not numeric)."""
        # never echo the value: it is a private record's
        message = f"column {self.name!r} must be numeric, but holds a value that is not a number"
        x = float_array(values, self.name, message=message)
        nan = np.isnan(x)
        if nan.any():
            if self.impute is None:
                raise InvalidDataError(f"column {self.name!r} has missing values")
            x = np.where(nan, self.impute, x)  # a new array: the caller's frame is kept
        return x

    def _finish(self, z: np.ndarray) -> np.ndarray:
        """Clip z to [0, 1] (rounding must never leave it: the public row bound relies
        on it), then map to [−1, 1] when ``center``."""
        z = np.clip(z, 0.0, 1.0)
        if self.center:
            z *= 2.0
            z -= 1.0
        return z

    def _map(self, x: np.ndarray) -> np.ndarray:
        """x ↦ [0, 1] through the public range (on the log1p scale when ``log``)."""
        x = np.clip(x, self.lo, self.hi)
        if self.log:
            a, b = np.log1p(self.lo), np.log1p(self.hi)
            return (np.log1p(x) - a) / (b - a)
        return (x - self.lo) / (self.hi - self.lo)

    def transform(self, values) -> np.ndarray:
        """Map raw values (shape (n,)) to ``[0, 1]`` (``[−1, 1]`` when ``center``);
        a :class:`SquashedColumn` maps them to ``[0, 1)`` (``[−1, 1)``) with s.

        Raises
        ------
        InvalidDataError
            If a value is missing (NaN) or not numeric.
        """
        return self._finish(self._map(self._values(values)))


@dataclass(frozen=True)
class SquashedColumn(NumericColumn):
    """A non-negative measurement with **no** public bound, mapped to ``[0, 1)`` by a
    fixed function that needs no constant at all:

        s(x) = L / (1 + L),   L = log1p(max(x, 0)).

    s is increasing, s(0) = 0 and s(x) < 1 for every finite x (s(+∞) = 1), so the
    feature lies in ``[0, 1]`` whatever the data — no bound is read off the data or written down
    after looking at it — and it depends on the record's own value only.  The
    logarithm keeps resolution over the many orders of magnitude such columns
    span (e.g. 0.05 to 4000 in WDBC); the only assumption is the documented one
    that the quantity is non-negative (a length, area, ratio, count, mass or
    distance; a negative value is mapped like 0).

    With ``center=True`` the feature is ``2s(x) − 1 ∈ [−1, 1)``: centered at ½,
    the midpoint of s's range (a property of the function, not of the data).

    Parameters
    ----------
    name : str
    source : str
        Why the column is non-negative (documentation).
    center : bool, default False
    """

    lo: float = 0.0
    hi: float = math.inf
    log: bool = True
    source: str = ""
    center: bool = False

    def __init__(self, name: str, source: str = "", center: bool = False):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "lo", 0.0)
        object.__setattr__(self, "hi", math.inf)
        object.__setattr__(self, "log", True)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "center", bool(center))
        object.__setattr__(self, "impute", None)

    def _map(self, x: np.ndarray) -> np.ndarray:
        """x ↦ s(x) = L/(1 + L) ∈ [0, 1), L = log1p(max(x, 0))."""
        L = np.log1p(np.clip(x, 0.0, None))  # +inf ↦ inf ↦ s = nan: handled below
        with np.errstate(invalid="ignore"):
            z = L / (1.0 + L)
        z[np.isinf(L)] = 1.0
        return z


@dataclass(frozen=True)
class CategoricalColumn:
    """A categorical column with a public category list (one-hot encoded).

    A value outside ``categories`` is encoded as the all-zero vector and counted in
    :attr:`Dataset.n_unknown_categories` (the file loaders refuse it instead, as
    ``dperm predict`` does); a missing value (NaN) is encoded as ``impute`` or, when
    None, as the all-zero vector.  Values are compared as strings.

    Parameters
    ----------
    name : str
    categories : list or tuple of str
        Public, duplicate-free list; its order is the order of the one-hot columns.  A
        string is refused (``"red"`` is not the list ``["red"]``).
    source : str
    impute : str, optional
        The category of a missing cell (one of ``categories``); None: the all-zero block.

    Raises
    ------
    InvalidPrivacyParameter
        ``categories`` is a string or not a list; ``impute`` not in it.
    InvalidDataError
        An empty list or duplicates.
    """

    name: str
    categories: tuple[str, ...]
    source: str = ""
    impute: str | None = None

    def __post_init__(self):
        if isinstance(self.categories, str | bytes) or not isinstance(
            self.categories, list | tuple | np.ndarray | pd.Index
        ):
            raise InvalidPrivacyParameter(
                f"the categories of column {self.name!r} must be a list of values, e.g. "
                f"['red', 'blue'], got {type(self.categories).__name__}: {self.categories!r}"
            )
        cats = tuple(str(c) for c in self.categories)
        if len(cats) == 0:
            raise InvalidDataError(f"categorical column {self.name!r} has an empty category list")
        if len(set(cats)) != len(cats):
            raise InvalidDataError(
                f"category list of column {self.name!r} has duplicates: {list(cats)}"
            )
        object.__setattr__(self, "categories", cats)
        if self.impute is not None:
            if str(self.impute) not in cats:
                raise InvalidPrivacyParameter(
                    f"impute value {self.impute!r} of column {self.name!r} is not in its "
                    f"category list {list(cats)}"
                )
            object.__setattr__(self, "impute", str(self.impute))

    def codes(self, values) -> np.ndarray:
        """Index of each value in ``categories``, −1 when unknown (and when missing with
        no ``impute``); shape (n,)."""
        s = pd.Series(values)
        missing = s.isna().to_numpy()
        if not (pd.api.types.is_string_dtype(s.dtype) or s.dtype == object):
            s = s.astype(str)
        index = pd.Index(list(self.categories), dtype=object)
        codes = np.asarray(index.get_indexer(s.to_numpy(dtype=object)), dtype=np.int64)
        codes[missing] = -1 if self.impute is None else self.categories.index(self.impute)
        return codes

    def n_unknown(self, values) -> int:
        """Number of present (non-missing) values outside ``categories``."""
        s = pd.Series(values)
        return int(np.count_nonzero((self.codes(s) < 0) & s.notna().to_numpy()))


@dataclass(frozen=True)
class Schema:
    """An ordered list of public column specifications.

    ``transform`` is the only place where raw records become features.  It is
    a per-record map: row ``i`` of the output depends on row ``i`` of the input
    and on the (public) schema only.
    """

    columns: tuple[NumericColumn | CategoricalColumn, ...]

    @property
    def n_numeric(self) -> int:
        return sum(isinstance(c, NumericColumn) for c in self.columns)

    @property
    def n_groups(self) -> int:
        """Number of categorical (one-hot) groups."""
        return sum(isinstance(c, CategoricalColumn) for c in self.columns)

    @property
    def worst_case_norm(self) -> float:
        """Public bound ``√(#numeric + #categorical groups)`` on ``‖φ(x)‖₂``."""
        return math.sqrt(self.n_numeric + self.n_groups)

    @property
    def feature_names(self) -> list[str]:
        names: list[str] = []
        for c in self.columns:
            if isinstance(c, NumericColumn):
                names.append(c.name)
            else:
                names.extend(f"{c.name}={v}" for v in c.categories)
        return names

    @property
    def n_centered(self) -> int:
        """Number of numeric columns mapped to ``[−1, 1]`` (``center=True``)."""
        return sum(isinstance(c, NumericColumn) and c.center for c in self.columns)

    @property
    def feature_midpoints(self) -> np.ndarray:
        """The public midpoint of every feature's range, shape (d,): 0 for a centered
        numeric column, ½ for the other numeric and the one-hot columns."""
        mids: list[float] = []
        for c in self.columns:
            if isinstance(c, NumericColumn):
                mids.append(0.0 if c.center else 0.5)
            else:
                mids.extend([0.5] * len(c.categories))
        return np.asarray(mids)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_list(self) -> list[dict[str, Any]]:
        """The schema as plain data: one dict per column (``kind`` "numeric", "squashed"
        or "categorical", ``name``, ``source``, and ``lo``/``hi``/``log``/``center`` or
        ``categories``, and ``impute`` when set); :meth:`from_list` is its inverse."""
        out: list[dict[str, Any]] = []
        for c in self.columns:
            if isinstance(c, CategoricalColumn):
                out.append(
                    {
                        "kind": "categorical",
                        "name": c.name,
                        "categories": list(c.categories),
                        "source": c.source,
                    }
                )
                if c.impute is not None:
                    out[-1]["impute"] = c.impute
            elif isinstance(c, SquashedColumn):
                out.append(
                    {"kind": "squashed", "name": c.name, "center": c.center, "source": c.source}
                )
            else:
                out.append(
                    {
                        "kind": "numeric",
                        "name": c.name,
                        "lo": c.lo,
                        "hi": c.hi,
                        "log": c.log,
                        "center": c.center,
                        "source": c.source,
                    }
                )
                if c.impute is not None:
                    out[-1]["impute"] = c.impute
        return out

    @classmethod
    def from_list(cls, columns) -> Schema:
        """The schema described by :meth:`to_list`'s plain data.

        Raises
        ------
        InvalidPrivacyParameter
            A column that is not such a dict, an unknown ``kind``, a bad bound or
            category list, or two columns with one name.
        """
        if isinstance(columns, Schema):
            return columns
        if not isinstance(columns, list | tuple) or not columns:
            raise InvalidPrivacyParameter(
                f"columns must be a non-empty list of column specifications, got "
                f"{type(columns).__name__}"
            )
        cols: list[NumericColumn | CategoricalColumn] = []
        for i, spec in enumerate(columns):
            if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
                raise InvalidPrivacyParameter(f"columns[{i}] must be a dict with a 'name'")
            kind, name, source = spec.get("kind"), spec["name"], str(spec.get("source", ""))
            keys = {
                "numeric": {"kind", "name", "lo", "hi", "log", "center", "source", "impute"},
                "squashed": {"kind", "name", "center", "source"},
                "categorical": {"kind", "name", "categories", "source", "impute"},
            }.get(kind)
            if keys is None:
                raise InvalidPrivacyParameter(
                    f"columns[{i}] ({name!r}) has kind {kind!r}; choose numeric, squashed "
                    "or categorical"
                )
            extra = sorted(set(spec) - keys)
            if extra:
                raise InvalidPrivacyParameter(f"columns[{i}] ({name!r}) has unknown keys {extra}")
            try:
                if kind == "categorical":
                    cats = spec.get("categories")
                    if not isinstance(cats, list | tuple):
                        raise InvalidPrivacyParameter(
                            f"the categories of column {name!r} must be a list"
                        )
                    cols.append(
                        CategoricalColumn(
                            name, tuple(cats), source=source, impute=spec.get("impute")
                        )
                    )
                elif kind == "squashed":
                    cols.append(SquashedColumn(name, source, bool(spec.get("center", False))))
                else:
                    cols.append(
                        NumericColumn(
                            name,
                            spec.get("lo"),
                            spec.get("hi"),
                            log=bool(spec.get("log", False)),
                            source=source,
                            center=bool(spec.get("center", False)),
                            impute=spec.get("impute"),
                        )
                    )
            except (TypeError, ValueError) as exc:
                raise InvalidPrivacyParameter(f"columns[{i}] ({name!r}): {exc}") from None
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            raise InvalidPrivacyParameter(f"columns name a column twice: {names}")
        return cls(tuple(cols))

    def with_bounds(self, bounds: Mapping[str, tuple[float, float]] | None) -> Schema:
        """A copy with the numeric bounds of the named columns replaced (user-supplied).

        Raises
        ------
        UnknownNameError
            If a name is not a numeric column of the schema.
        """
        if not bounds:
            return self
        numeric = {c.name for c in self.columns if isinstance(c, NumericColumn)}
        unknown = sorted(set(bounds) - numeric)
        if unknown:
            raise UnknownNameError(
                f"bounds given for unknown or non-numeric column(s) {unknown}; "
                f"numeric columns are {sorted(numeric)}"
            )
        cols = []
        for c in self.columns:
            if isinstance(c, NumericColumn) and c.name in bounds:
                lo, hi = _as_bound_pair(bounds[c.name], c.name)
                log = c.log and not isinstance(c, SquashedColumn)
                c = NumericColumn(
                    c.name,
                    lo,
                    hi,
                    log=log,
                    source="user-supplied bound",
                    center=c.center,
                    impute=c.impute,
                )
            cols.append(c)
        return Schema(tuple(cols))

    def transform(self, frame: pd.DataFrame) -> tuple[np.ndarray, int]:
        """Map a frame of raw records to features.

        Parameters
        ----------
        frame : DataFrame with (at least) every column of the schema

        Returns
        -------
        X : ndarray of float64, shape (n, d)
            Numeric features in [0, 1] (centered columns: [−1, 1]), one-hot groups
            with at most one 1.
        n_unknown : int
            Number of categorical cells outside the public category list.

        Raises
        ------
        InvalidDataError
            If a schema column is absent or a numeric value is missing.
        """
        missing = [c for c in self.column_names if c not in frame.columns]
        if missing:
            raise InvalidDataError(f"columns {missing} of the schema are missing from the data")
        n = len(frame)
        X = np.zeros((n, len(self.feature_names)), dtype=np.float64)
        rows = np.arange(n)
        j = 0
        n_unknown = 0
        for c in self.columns:
            if isinstance(c, NumericColumn):
                X[:, j] = c.transform(frame[c.name].to_numpy())
                j += 1
            else:
                codes = c.codes(frame[c.name])
                known = codes >= 0
                n_unknown += int(n - known.sum())
                X[rows[known], j + codes[known]] = 1.0
                j += len(c.categories)
        return X, n_unknown


def _check_impute_number(col: NumericColumn) -> None:
    """``col.impute`` as a finite float (or None)."""
    v = col.impute
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        raise InvalidPrivacyParameter(
            f"impute value of column {col.name!r} must be a number, got {v!r}"
        )
    if not math.isfinite(float(v)):
        raise InvalidPrivacyParameter(
            f"impute value of column {col.name!r} must be finite, got {v!r}"
        )
    object.__setattr__(col, "impute", float(v))


def _as_bound_pair(b, name: str) -> tuple[float, float]:
    return check_interval(b, f"bounds[{name!r}]")


def _center_unit_rows(X: np.ndarray, midpoints: np.ndarray) -> np.ndarray:
    """x ↦ (x − m)/‖x − m‖ row by row, m the public feature midpoints (zero rows stay
    zero); norms end ≤ 1.  X is overwritten (the encoder's own fresh array)."""
    Z = X
    Z -= midpoints
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    Z /= np.where(norms > 0, norms, 1.0)[:, None]
    over = np.sqrt(np.einsum("ij,ij->i", Z, Z)) > 1.0  # rounding: pull back inside
    Z[over] *= np.nextafter(1.0, 0.0)
    return Z


class SchemaEncoder(TransformerMixin, BaseEstimator):
    """Raw records (a DataFrame) → features, by a public schema; nothing is learned.

    Every numeric column is mapped through its public bounds, every categorical column
    one-hot encoded with its public category list (:meth:`Schema.transform`); then, with
    ``normalize_rows=True``, every row is divided by the public worst-case norm
    √(#numeric + #categorical) so that ‖x‖₂ ≤ 1, or, with ``normalize_rows="unit"``,
    centered at the public midpoints of the feature ranges and scaled to unit norm.  All
    of it is a per-record map with public constants, so the fitted encoder releases
    nothing about the data (``dp_event_`` is ``NoOp``) — unless some specifications were
    read off the data (``data_dependent``, e.g. ``dperm fit --allow-data-bounds``): then
    ``dp_event_`` is ``NonPrivate`` and a pipeline holding it has no guarantee.

    A value outside a category list is encoded as an all-zero block (a public per-record
    rule; ``dperm predict`` and the file loaders refuse it before encoding); a missing
    cell takes its column's public ``impute`` value (the file loaders set it: the
    midpoint of a numeric column's public range, the all-zero block of a categorical
    one), else a missing numeric value is an error naming the column (never the value),
    as is a non-numeric one.  Columns not in the schema (e.g. the label) are ignored.

    Parameters
    ----------
    columns : list of dict or Schema
        The column specifications, as :meth:`Schema.to_list` writes them (plain data, so
        the encoder is saved by :func:`dperm.save` without pickle).
    normalize_rows : {True, False, "unit"}, default True
    data_dependent : list of str, default ()
        Names of the columns whose bounds or categories were read from the data.

    Attributes
    ----------
    schema_ : Schema
    n_features_in_ : int
        Number of raw columns the schema reads.
    feature_names_in_ : ndarray of str
        Their names.
    row_norm_bound_ : float
        Public bound on the ℓ2 norm of an output row (1.0 unless ``normalize_rows=False``).
    dp_event_ : NoOp or NonPrivate

    Raises
    ------
    InvalidPrivacyParameter
        Bad column specifications or ``normalize_rows``.
    InvalidDataError
        ``X`` is not a table with the schema's columns, or a numeric value is missing or
        not a number.

    Examples
    --------
    >>> import pandas as pd
    >>> from dperm.schema import SchemaEncoder
    >>> enc = SchemaEncoder(
    ...     [
    ...         {"kind": "numeric", "name": "age", "lo": 0, "hi": 100},
    ...         {"kind": "categorical", "name": "colour", "categories": ["red", "blue"]},
    ...     ],
    ...     normalize_rows=False,
    ... )
    >>> enc.fit_transform(pd.DataFrame({"age": [50, 10], "colour": ["blue", "green"]}))
    array([[0.5, 0. , 1. ],
           [0.1, 0. , 0. ]])
    """

    def __init__(self, columns=None, *, normalize_rows=True, data_dependent=()):
        store_params(self, locals())

    @classmethod
    def from_schema(cls, schema: Schema, normalize_rows=True, data_dependent=()) -> SchemaEncoder:
        """An encoder of ``schema`` (its columns as plain data), fitted: it learns nothing."""
        enc = cls(schema.to_list(), normalize_rows=normalize_rows, data_dependent=data_dependent)
        return enc._setup()

    def _setup(self) -> SchemaEncoder:
        mode = self.normalize_rows
        if not (isinstance(mode, bool | np.bool_) or (isinstance(mode, str) and mode == "unit")):
            raise InvalidPrivacyParameter(
                f"normalize_rows must be True, False or 'unit', got {self.normalize_rows!r}"
            )
        schema = Schema.from_list(self.columns)
        names = schema.column_names
        dependent = list(self.data_dependent or ())
        if not all(isinstance(c, str) and c in names for c in dependent):
            raise InvalidPrivacyParameter(
                f"data_dependent must name columns of the schema, got {dependent!r}"
            )
        self.schema_ = schema
        self.n_features_in_ = len(names)
        self.feature_names_in_ = np.asarray(names, dtype=object)
        self.row_norm_bound_ = 1.0 if self.normalize_rows else schema.worst_case_norm
        self.dp_event_ = NonPrivate() if dependent else NoOp()
        return self

    def _frame(self, X) -> pd.DataFrame:
        if isinstance(X, Mapping):
            X = pd.DataFrame(X)
        if not isinstance(X, pd.DataFrame):
            raise InvalidDataError(
                f"{type(self).__name__} needs a table of raw columns (a pandas DataFrame "
                f"with the columns {self.schema_.column_names}), got {type(X).__name__}"
            )
        missing = [c for c in self.schema_.column_names if c not in X.columns]
        if missing:
            raise InvalidDataError(
                f"the data lacks the schema column(s) {missing}; it has {list(map(str, X.columns))}"
            )
        return X

    def fit(self, X, y=None):
        """Check the parameters and that ``X`` has the schema's columns; learns nothing.

        Parameters
        ----------
        X : DataFrame of raw records (or a dict of columns)
        y : ignored

        Returns
        -------
        self
        """
        self._setup()
        self._frame(X)
        return self

    def encode(self, X) -> tuple[np.ndarray, int]:
        """(features of shape (n, d), number of categorical cells outside their lists)."""
        check_is_fitted(self, "schema_")
        X_out, n_unknown = self.schema_.transform(self._frame(X))
        if isinstance(self.normalize_rows, str):  # "unit" (checked in _setup)
            X_out = _center_unit_rows(X_out, self.schema_.feature_midpoints)
        elif self.normalize_rows:
            X_out /= self.schema_.worst_case_norm
        return X_out, n_unknown

    def transform(self, X) -> np.ndarray:
        """Features of the raw records ``X``; shape (n_samples, len(schema_.feature_names))."""
        return self.encode(X)[0]

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """The feature names: numeric columns by name, one-hot columns ``"col=value"``."""
        check_is_fitted(self, "schema_")
        return np.asarray(self.schema_.feature_names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        tags.input_tags.two_d_array = False
        return tags
