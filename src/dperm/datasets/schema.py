"""Public column specifications and the per-record map from raw records to features."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError


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

    Raises
    ------
    InvalidPrivacyParameter
        If the bounds are not finite, ``lo ≥ hi``, or ``lo < 0`` with ``log``.
    """

    name: str
    lo: float
    hi: float
    log: bool = False
    source: str = ""
    center: bool = False

    def __post_init__(self):
        lo, hi = float(self.lo), float(self.hi)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InvalidPrivacyParameter(
                f"bounds for column {self.name!r} must be finite with lo < hi, "
                f"got ({self.lo!r}, {self.hi!r})"
            )
        if self.log and lo < 0:
            raise InvalidPrivacyParameter(
                f"a log1p-scaled column needs lo ≥ 0; column {self.name!r} has lo={self.lo!r}"
            )
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def _values(self, values) -> np.ndarray:
        """The raw values as float64 (InvalidDataError when missing or not numeric)."""
        try:
            x = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidDataError(f"column {self.name!r} must be numeric: {exc}") from None
        if np.isnan(x).any():
            raise InvalidDataError(
                f"column {self.name!r} has {int(np.isnan(x).sum())} missing value(s)"
            )
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

    A value outside ``categories`` (or missing) is encoded as the all-zero
    vector and counted in :attr:`Dataset.n_unknown_categories`.  Values are
    compared as strings.

    Parameters
    ----------
    name : str
    categories : sequence of str
        Public, duplicate-free list; its order is the order of the one-hot columns.
    source : str
    """

    name: str
    categories: tuple[str, ...]
    source: str = ""

    def __post_init__(self):
        cats = tuple(str(c) for c in self.categories)
        if len(cats) == 0:
            raise InvalidDataError(f"categorical column {self.name!r} has an empty category list")
        if len(set(cats)) != len(cats):
            raise InvalidDataError(
                f"category list of column {self.name!r} has duplicates: {list(cats)}"
            )
        object.__setattr__(self, "categories", cats)

    def codes(self, values) -> np.ndarray:
        """Index of each value in ``categories``, −1 when unknown; shape (n,)."""
        s = pd.Series(values)
        if not (pd.api.types.is_string_dtype(s.dtype) or s.dtype == object):
            s = s.astype(str)
        index = pd.Index(list(self.categories), dtype=object)
        return np.asarray(index.get_indexer(s.to_numpy(dtype=object)), dtype=np.int64)


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
                    c.name, lo, hi, log=log, source="user-supplied bound", center=c.center
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


def _as_bound_pair(b, name: str) -> tuple[float, float]:
    try:
        lo, hi = b
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise InvalidPrivacyParameter(
            f"bounds[{name!r}] must be a pair (lo, hi) of numbers, got {b!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidPrivacyParameter(f"bounds[{name!r}] must be finite with lo < hi, got {b!r}")
    return lo, hi


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
