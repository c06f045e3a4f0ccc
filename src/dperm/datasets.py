"""Benchmark datasets with **public** preprocessing schemas.

Every loader in this module turns raw records into features with a map that is
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
and the schema building blocks :class:`Schema`, :class:`NumericColumn`,
:class:`CategoricalColumn`.  See ``docs/datasets.md`` for every bound and its
source.
"""

from __future__ import annotations

import gzip
import inspect
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._rng import check_random_state
from ._validation import check_count, check_positive, check_probability, clip_rows, row_norms
from .exceptions import (
    DataFileNotFoundError,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
)

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
    "public_schema",
]

DEFAULT_DATASET = "breast-cancer"

_TASKS = ("binary", "multiclass", "regression")
_DATA_HOME_HINT = (
    "pass data_home=... (CLI: --data-home) or set the DPERM_DATA_HOME environment variable"
)


# ---------------------------------------------------------------------------
# The result type
# ---------------------------------------------------------------------------


@dataclass
class Dataset:
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
        public category list; such cells are encoded as all-zero.
    classes : tuple or None
        The *public* label set of a classification task, to pass to the
        estimators as ``classes=``: (−1.0, +1.0) for every binary task (the
        loaders encode the positive class as +1), (0, …, 9) for MNIST.  None for
        regression and for a multi-class CSV/svmlight file, whose label set was
        read off the file (then the estimators warn that it is not protected).
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

    def __post_init__(self):
        if self.classes is None and self.task == "binary":
            self.classes = (-1.0, 1.0)  # the encoding of every binary loader

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


# ---------------------------------------------------------------------------
# Public schemas
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NumericColumn:
    """A numeric column with public bounds.

    The feature is ``(clip(x, lo, hi) − lo) / (hi − lo)`` or, with ``log=True``,
    ``(log1p(clip(x, lo, hi)) − log1p(lo)) / (log1p(hi) − log1p(lo))`` (for
    heavy-tailed non-negative quantities).  Either way it lies in ``[0, 1]``
    and depends on the record's own value only.

    Parameters
    ----------
    name : str
    lo, hi : float
        Public bounds, ``lo < hi``, finite; ``lo ≥ 0`` when ``log``.
    log : bool, default False
    source : str
        Where the bounds come from (documentation, domain knowledge, user).

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

    def transform(self, values) -> np.ndarray:
        """Map raw values (shape (n,)) to ``[0, 1]``.

        Raises
        ------
        InvalidDataError
            If a value is missing (NaN) or not numeric.
        """
        x = self._values(values)
        x = np.clip(x, self.lo, self.hi)
        if self.log:
            a, b = np.log1p(self.lo), np.log1p(self.hi)
            z = (np.log1p(x) - a) / (b - a)
        else:
            z = (x - self.lo) / (self.hi - self.lo)
        # rounding must never leave [0, 1]: the public row bound relies on it
        return np.clip(z, 0.0, 1.0)


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

    Parameters
    ----------
    name : str
    source : str
        Why the column is non-negative (documentation).
    """

    lo: float = 0.0
    hi: float = math.inf
    log: bool = True
    source: str = ""

    def __init__(self, name: str, source: str = ""):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "lo", 0.0)
        object.__setattr__(self, "hi", math.inf)
        object.__setattr__(self, "log", True)
        object.__setattr__(self, "source", source)

    def transform(self, values) -> np.ndarray:
        """Map raw values (shape (n,)) to ``[0, 1)`` with s (class docstring).

        Raises
        ------
        InvalidDataError
            If a value is missing (NaN) or not numeric.
        """
        x = self._values(values)
        L = np.log1p(np.clip(x, 0.0, None))  # +inf ↦ inf ↦ s = nan: handled below
        with np.errstate(invalid="ignore"):
            z = L / (1.0 + L)
        z[np.isinf(L)] = 1.0
        return np.clip(z, 0.0, 1.0)


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
                c = NumericColumn(c.name, lo, hi, log=log, source="user-supplied bound")
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
            Numeric features in [0, 1], one-hot groups with at most one 1.
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


def _num(name, lo, hi, source, log=False) -> NumericColumn:
    return NumericColumn(name, lo, hi, log=log, source=source)


def _cat(name, categories, source) -> CategoricalColumn:
    return CategoricalColumn(name, tuple(categories), source=source)


# --- breast cancer (UCI WDBC) ---------------------------------------------

_WDBC_SOURCE = (
    "UCI WDBC documentation (wdbc.names): a non-negative measurement of the cell nuclei "
    "of the digitised FNA image (length, area, ratio or count); no published range, so "
    "no bound: the constant-free map s(x) = log1p(x)/(1 + log1p(x))"
)
#: the ten nucleus features of UCI WDBC (wdbc.names), each as mean, standard error
#: and "worst" (mean of the three largest): 30 columns, all non-negative.  The
#: earlier hand-written upper bounds sat 1.01–1.9× above the data maxima (they were
#: read off the data) and were removed (issue #10): no bound is needed.
_WDBC_FEATURES = (
    "radius",
    "texture",
    "perimeter",
    "area",
    "smoothness",
    "compactness",
    "concavity",
    "concave points",
    "symmetry",
    "fractal dimension",
)


def _wdbc_schema() -> Schema:
    cols = []
    for prefix in ("mean {}", "{} error", "worst {}"):
        for feat in _WDBC_FEATURES:
            cols.append(SquashedColumn(prefix.format(feat), _WDBC_SOURCE))
    return Schema(tuple(cols))


# --- adult -------------------------------------------------------------------

_ADULT_COLUMNS = (
    "age workclass fnlwgt education education-num marital-status occupation relationship "
    "race sex capital-gain capital-loss hours-per-week native-country income"
).split()
_ADULT_NAMES = "UCI adult.names (attribute list)"
_ADULT_CATEGORIES = {
    "workclass": (
        "Private Self-emp-not-inc Self-emp-inc Federal-gov Local-gov State-gov Without-pay "
        "Never-worked"
    ),
    "education": (
        "Bachelors Some-college 11th HS-grad Prof-school Assoc-acdm Assoc-voc 9th 7th-8th 12th "
        "Masters 1st-4th 10th Doctorate 5th-6th Preschool"
    ),
    "marital-status": (
        "Married-civ-spouse Divorced Never-married Separated Widowed Married-spouse-absent "
        "Married-AF-spouse"
    ),
    "occupation": (
        "Tech-support Craft-repair Other-service Sales Exec-managerial Prof-specialty "
        "Handlers-cleaners Machine-op-inspct Adm-clerical Farming-fishing Transport-moving "
        "Priv-house-serv Protective-serv Armed-Forces"
    ),
    "relationship": "Wife Own-child Husband Not-in-family Other-relative Unmarried",
    "race": "White Asian-Pac-Islander Amer-Indian-Eskimo Other Black",
    "sex": "Female Male",
    "native-country": (
        "United-States Cambodia England Puerto-Rico Canada Germany Outlying-US(Guam-USVI-etc) "
        "India Japan Greece South China Cuba Iran Honduras Philippines Italy Poland Jamaica "
        "Vietnam Mexico Portugal Ireland France Dominican-Republic Laos Ecuador Taiwan Haiti "
        "Columbia Hungary Guatemala Nicaragua Scotland Thailand Yugoslavia El-Salvador "
        "Trinadad&Tobago Peru Hong Holand-Netherlands"
    ),
}
_ADULT_NUMERIC = {
    "age": (17, 90, False, "adult.names extraction rule AAGE>16; CPS top-codes age at 90"),
    "education-num": (1, 16, False, "adult.names: 16 education levels coded 1..16"),
    "capital-gain": (0, 99999, True, "CPS 5-digit field, 99999 = top code; log1p (heavy tail)"),
    "capital-loss": (0, 99999, True, "CPS 5-digit field as capital-gain; log1p (heavy tail)"),
    "hours-per-week": (1, 99, False, "adult.names extraction rule HRSWK>0; CPS top code 99"),
}


def _adult_schema() -> Schema:
    cols: list[NumericColumn | CategoricalColumn] = []
    for name in _ADULT_COLUMNS:
        if name in _ADULT_CATEGORIES:
            cols.append(_cat(name, _ADULT_CATEGORIES[name].split(), _ADULT_NAMES))
        elif name in _ADULT_NUMERIC:
            lo, hi, log, src = _ADULT_NUMERIC[name]
            cols.append(_num(name, lo, hi, src, log=log))
        # fnlwgt (survey weight, no public range) and the label are not features
    return Schema(tuple(cols))


_ADULT_SCHEMA = _adult_schema()


# --- KDD Cup 1999 -------------------------------------------------------------

_KDD_COLUMNS = (
    "duration protocol_type service flag src_bytes dst_bytes land wrong_fragment urgent hot "
    "num_failed_logins logged_in num_compromised root_shell su_attempted num_root "
    "num_file_creations num_shells num_access_files num_outbound_cmds is_host_login "
    "is_guest_login count srv_count serror_rate srv_serror_rate rerror_rate srv_rerror_rate "
    "same_srv_rate diff_srv_rate srv_diff_host_rate dst_host_count dst_host_srv_count "
    "dst_host_same_srv_rate dst_host_diff_srv_rate dst_host_same_src_port_rate "
    "dst_host_srv_diff_host_rate dst_host_serror_rate dst_host_srv_serror_rate "
    "dst_host_rerror_rate dst_host_srv_rerror_rate"
).split()
_KDD_PROTOCOLS = "icmp tcp udp".split()
_KDD_SERVICES = (
    "IRC X11 Z39_50 auth bgp courier csnet_ns ctf daytime discard domain domain_u echo eco_i "
    "ecr_i efs exec finger ftp ftp_data gopher hostnames http http_443 imap4 iso_tsap klogin "
    "kshell ldap link login mtp name netbios_dgm netbios_ns netbios_ssn netstat nnsp nntp "
    "ntp_u other pm_dump pop_2 pop_3 printer private red_i remote_job rje shell smtp sql_net "
    "ssh sunrpc supdup systat telnet tftp_u tim_i time urh_i urp_i uucp uucp_path vmnet whois"
).split()
_KDD_FLAGS = "OTH REJ RSTO RSTOS0 RSTR S0 S1 S2 S3 SF SH".split()
_KDD_BINARY = {"land", "logged_in", "root_shell", "su_attempted", "is_host_login", "is_guest_login"}
_KDD_CONTENT_COUNTS = {
    "wrong_fragment",
    "urgent",
    "hot",
    "num_failed_logins",
    "num_compromised",
    "num_root",
    "num_file_creations",
    "num_shells",
    "num_access_files",
    "num_outbound_cmds",
}


def _kdd_schema() -> Schema:
    cols: list[NumericColumn | CategoricalColumn] = []
    for name in _KDD_COLUMNS:
        if name == "protocol_type":
            cols.append(_cat(name, _KDD_PROTOCOLS, "kddcup.names (symbolic; 3 protocols)"))
        elif name == "service":
            cols.append(_cat(name, _KDD_SERVICES, "KDD'99 10% data documentation (66 services)"))
        elif name == "flag":
            cols.append(_cat(name, _KDD_FLAGS, "KDD'99 documentation (11 connection states)"))
        elif name == "duration":
            cols.append(_num(name, 0, 604800, "seconds; public cap one week; log1p", log=True))
        elif name in ("src_bytes", "dst_bytes"):
            cols.append(_num(name, 0, 2.0**32, "bytes; public cap 2^32 (4 GiB); log1p", log=True))
        elif name in _KDD_BINARY:
            cols.append(_num(name, 0, 1, "KDD task description: 1 if …, 0 otherwise"))
        elif name in _KDD_CONTENT_COUNTS:
            cols.append(_num(name, 0, 1000, "content count; generous public cap 1000; log1p", True))
        elif name in ("count", "srv_count"):
            cols.append(_num(name, 0, 511, "connections in a 2 s window, documented max 511"))
        elif name in ("dst_host_count", "dst_host_srv_count"):
            cols.append(_num(name, 0, 255, "host-based window count, documented max 255"))
        elif name.endswith("_rate"):
            cols.append(_num(name, 0, 1, "a rate (fraction of connections)"))
        else:  # pragma: no cover - every KDD column is listed above
            raise AssertionError(name)
    return Schema(tuple(cols))


_KDD_SCHEMA = _kdd_schema()


# --- California housing ---------------------------------------------------------

_CAL_RAW_COLUMNS = (
    "longitude latitude housingMedianAge totalRooms totalBedrooms population households "
    "medianIncome medianHouseValue"
).split()
_CAL_SCHEMA = Schema(
    (
        _num("MedInc", 0, 15.0001, "1990 census income top code $150,000 (encoded 15.0001)"),
        _num("HouseAge", 0, 52, "1990 census 'built 1939 or earlier' top code = 52 years"),
        _num("AveRooms", 0, 20, "rooms per household; public cap 20; log1p", log=True),
        _num("AveBedrms", 0, 10, "bedrooms per household; public cap 10; log1p", log=True),
        _num("Population", 0, 50000, "block-group population; public cap 50,000; log1p", True),
        _num("AveOccup", 0, 20, "persons per household; public cap 20; log1p", log=True),
        _num("Latitude", 32.5, 42.1, "geographic extent of California"),
        _num("Longitude", -124.5, -114.1, "geographic extent of California"),
    )
)
_CAL_LABEL_BOUND = 5.00001  # medianHouseValue censored at $500,001 (in units of $100,000)


# --- CASP ---------------------------------------------------------------------------

_CASP_SRC = (
    "UCI CASP documentation: a non-negative physicochemical quantity with no published "
    "range, so no bound: the constant-free map s(x) = log1p(x)/(1 + log1p(x))"
)
#: F3 is documented as a fraction (in [0, 1] by definition); the other eight columns
#: have no documented range.  The earlier hand-written caps sat 1.2–1.9× above the
#: data maxima (read off the data) and were removed (issue #10).
_CASP_SCHEMA = Schema(
    (
        SquashedColumn("F1", "total surface area (Å²); " + _CASP_SRC),
        SquashedColumn("F2", "non-polar exposed area (Å²); " + _CASP_SRC),
        _num("F3", 0, 1, "fractional area of exposed non-polar residue: a fraction (UCI)"),
        SquashedColumn("F4", "fractional area of exposed non-polar residue part, ~100 scale"),
        SquashedColumn("F5", "molecular-mass-weighted exposed area; " + _CASP_SRC),
        SquashedColumn("F6", "average deviation from standard exposed area; " + _CASP_SRC),
        SquashedColumn("F7", "Euclidean distance; " + _CASP_SRC),
        SquashedColumn("F8", "secondary-structure penalty (integer); " + _CASP_SRC),
        SquashedColumn("F9", "spatial distribution constraint (N,K value); " + _CASP_SRC),
    )
)
_CASP_LABEL_BOUND = 21.0  # RMSD in Å; UCI documentation: 0 ≤ RMSD < 21


_SCHEMAS = {
    "breast-cancer": _wdbc_schema(),
    "adult": _ADULT_SCHEMA,
    "kddcup99": _KDD_SCHEMA,
    "california-housing": _CAL_SCHEMA,
    "casp": _CASP_SCHEMA,
}


def public_schema(name: str) -> Schema:
    """The public schema of a built-in tabular dataset.

    Parameters
    ----------
    name : str
        One of ``"breast-cancer"``, ``"adult"``, ``"kddcup99"``,
        ``"california-housing"``, ``"casp"``.

    Raises
    ------
    UnknownNameError
        If ``name`` has no schema (MNIST and the synthetic sets have none: their
        scaling is a single public constant).
    """
    key = _canonical(name)
    if key not in _SCHEMAS:
        raise UnknownNameError(
            f"no public schema for dataset {name!r}; datasets with a schema: {sorted(_SCHEMAS)}"
        )
    return _SCHEMAS[key]


# ---------------------------------------------------------------------------
# Helpers: data home, files, splits, labels
# ---------------------------------------------------------------------------


def _resolve_data_home(data_home) -> Path:
    if data_home is not None:
        p = Path(data_home).expanduser()
        if not p.is_dir():
            raise DataFileNotFoundError(
                f"data_home {str(p)!r} is not a directory; {_DATA_HOME_HINT}"
            )
        return p
    env = os.environ.get("DPERM_DATA_HOME")
    if env:
        p = Path(env).expanduser()
        if not p.is_dir():
            raise DataFileNotFoundError(
                f"DPERM_DATA_HOME={env!r} is not a directory; {_DATA_HOME_HINT}"
            )
        return p
    p = Path.cwd().parent / "shared" / "data"
    if p.is_dir():
        return p
    raise DataFileNotFoundError(
        f"no data folder: data_home is None, DPERM_DATA_HOME is unset and {str(p)!r} does "
        f"not exist; {_DATA_HOME_HINT}"
    )


def _find_file(home: Path, subdir: str, filename: str) -> Path:
    """``home/subdir/filename(.gz)`` or ``home/filename(.gz)``; else a precise error."""
    candidates = [
        home / subdir / (filename + ".gz"),
        home / subdir / filename,
        home / (filename + ".gz"),
        home / filename,
    ]
    for c in candidates:
        if c.is_file():
            return c
    others = ", ".join(str(c) for c in candidates[1:])
    raise DataFileNotFoundError(
        f"dataset file not found: expected {candidates[0]} (also tried {others}); {_DATA_HOME_HINT}"
    )


def _check_test_size(test_size, allow_zero: bool = True) -> float:
    t = check_probability(test_size, "test_size", allow_zero=allow_zero)
    if t >= 1.0:
        raise InvalidPrivacyParameter(f"test_size must be < 1, got {test_size!r}")
    return t


def _split_indices(n: int, test_size: float, rng: np.random.Generator, stratify=None):
    """Random (optionally stratified) train/test index split.

    The test part of each stratum has ``round(test_size · n_stratum)`` rows.
    """
    if stratify is None:
        perm = rng.permutation(n)
        k = round(test_size * n)
        return perm[k:], perm[:k]
    _, inv = np.unique(np.asarray(stratify), return_inverse=True)
    train_parts, test_parts = [], []
    for c in range(int(inv.max()) + 1):
        idx = rng.permutation(np.flatnonzero(inv == c))
        k = round(test_size * idx.size)
        test_parts.append(idx[:k])
        train_parts.append(idx[k:])
    return rng.permutation(np.concatenate(train_parts)), rng.permutation(np.concatenate(test_parts))


def _encode_labels(y_train, y_test, task, positive_label, label_bound):
    """Encode raw targets for ``task`` (inferred when None).

    Returns ``(y_train, y_test, task, description)``.
    """
    y_train = np.asarray(y_train)
    y_all = y_train if y_test is None else np.concatenate([y_train, np.asarray(y_test)])
    if task is not None and task not in _TASKS:
        raise UnknownNameError(f"task must be one of {list(_TASKS)}, got {task!r}")
    if task is None:
        if positive_label is not None:
            task = "binary"
        elif y_all.dtype.kind == "f" and not np.all(np.mod(y_all, 1) == 0):
            task = "regression"
        else:
            k = np.unique(y_all).size
            if k < 2:
                raise LabelError(f"the target has a single value {y_all[:1].tolist()}")
            task = "binary" if k == 2 else "multiclass"

    def apply(fn):
        return fn(y_train), (None if y_test is None else fn(np.asarray(y_test)))

    if task == "binary":
        if positive_label is None:
            vals = np.unique(y_all)
            if vals.size != 2:
                raise LabelError(
                    f"task='binary' needs exactly two label values or positive_label=, "
                    f"got {vals.size} values: {vals[:5].tolist()}"
                )
            positive_label = vals[1]
        if y_all.dtype.kind in "OUST" or isinstance(positive_label, str):
            pos = str(positive_label)

            def fn(y):
                return np.where(y.astype(str) == pos, 1.0, -1.0)
        else:
            pos = positive_label

            def fn(y):
                return np.where(y == pos, 1.0, -1.0)

        ytr, yte = apply(fn)
        if not (ytr == 1.0).any() and (yte is None or not (yte == 1.0).any()):
            raise LabelError(f"positive_label={positive_label!r} does not occur in the target")
        return ytr, yte, task, f"label {positive_label!r} → +1, every other value → −1"
    if task == "multiclass":
        classes = np.unique(y_all)
        ytr, yte = apply(lambda y: np.searchsorted(classes, y).astype(np.int64))
        return ytr, yte, task, f"classes {classes.tolist()[:20]} → 0..{classes.size - 1}"
    # regression
    try:
        ytr, yte = apply(lambda y: np.asarray(y, dtype=np.float64))
    except (TypeError, ValueError):
        raise LabelError("task='regression' needs a numeric target") from None
    if label_bound is not None:
        b = check_positive(label_bound, "label_bound")
        ytr, yte = np.clip(ytr, -b, b), (None if yte is None else np.clip(yte, -b, b))
        return ytr, yte, task, f"target clipped to the public bound |y| ≤ {b:g}"
    return ytr, yte, task, "target unbounded (no label_bound given)"


def _finish_schema(
    name,
    schema,
    frame_train,
    frame_test,
    y_train,
    y_test,
    task,
    normalize_rows,
    label_bound,
    description,
) -> Dataset:
    """Transform with the schema, then optionally divide by the public worst-case
    norm (``normalize_rows=True``) or, with ``normalize_rows="unit"``, center every
    feature at the midpoint 1/2 of its public range and scale each row to unit
    norm (both per-record maps: no record's features depend on another record)."""
    X_train, u_train = schema.transform(frame_train)
    X_test, u_test = (None, 0) if frame_test is None else schema.transform(frame_test)
    bound = schema.worst_case_norm
    if normalize_rows == "unit":
        X_train = _center_unit_rows(X_train)
        X_test = None if X_test is None else _center_unit_rows(X_test)
        bound = 1.0
    elif normalize_rows:
        X_train /= bound
        if X_test is not None:
            X_test /= bound
        bound = 1.0
    return Dataset(
        name=name,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        feature_names=schema.feature_names,
        task=task,
        row_norm_bound=bound,
        label_bound=label_bound,
        description=description,
        n_unknown_categories=u_train + u_test,
    )


def _center_unit_rows(X: np.ndarray) -> np.ndarray:
    """x ↦ (x − ½)/‖x − ½‖ row by row (zero rows stay zero); norms end ≤ 1."""
    Z = X - 0.5
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    Z /= np.where(norms > 0, norms, 1.0)[:, None]
    over = np.sqrt(np.einsum("ij,ij->i", Z, Z)) > 1.0  # rounding: pull back inside
    Z[over] *= np.nextafter(1.0, 0.0)
    return Z


def _norm_text(schema: Schema, normalize_rows) -> str:
    s = (
        f"{schema.n_numeric} numeric columns mapped to [0, 1] (public bounds, or the "
        "constant-free map log1p(x)/(1 + log1p(x)) where no range is documented), "
        f"{schema.n_groups} one-hot groups with public category lists; "
        f"worst-case row norm √{schema.n_numeric + schema.n_groups}"
    )
    if normalize_rows == "unit":
        return s + (
            "; features centered at ½ and each row scaled to unit norm, a per-record map "
            "(row_norm_bound = 1)."
        )
    return s + (", rows divided by it (row_norm_bound = 1)." if normalize_rows else ".")


# ---------------------------------------------------------------------------
# Built-in loaders
# ---------------------------------------------------------------------------


def _public_rows_schema(frame, public_idx) -> Schema:
    """The WDBC schema with each column's log1p bounds taken from a PUBLIC subset of
    rows (``public_idx``) that is disjoint from the rows the private fit sees and from
    the test rows.  The guarantee covers the training rows; the public rows are
    treated as public data (the standard "public data for preprocessing" setting)
    and are never passed to the estimator."""
    cols = []
    for c in _SCHEMAS["breast-cancer"].columns:
        v = np.asarray(frame[c.name].to_numpy(dtype=np.float64)[public_idx])
        lo, hi = max(float(v.min()), 0.0), float(v.max())
        hi = hi if hi > lo else lo + 1.0
        cols.append(NumericColumn(c.name, lo, hi, log=True, source="min/max over the public rows"))
    return Schema(tuple(cols))


def _load_breast_cancer(
    data_home=None,
    *,
    normalize_rows=True,
    random_state=0,
    test_size=0.25,
    bounds=None,
    public_fraction=0.1,
):
    from sklearn.datasets import load_breast_cancer

    test_size = _check_test_size(test_size)
    public_fraction = float(public_fraction)
    if not 0.0 <= public_fraction < 1.0 - test_size:
        raise InvalidPrivacyParameter(
            f"public_fraction must be in [0, 1 − test_size), got {public_fraction!r}"
        )
    # With only 427 training rows, dividing by the worst-case norm √30 leaves rows
    # at ~1/3 of the bound (too little signal for ε ≈ 1); centering at ½ (the midpoint
    # of s's range [0, 1), a property of the function, not of the data) and scaling
    # each row to unit norm (a per-record map) uses the whole bound.
    normalize_rows = "unit" if normalize_rows is True else normalize_rows
    raw = load_breast_cancer(as_frame=True)
    frame = raw.frame
    # sklearn: target 0 = malignant, 1 = benign.  Malignant is the positive class.
    y = np.where(frame["target"].to_numpy() == 0, 1.0, -1.0)
    rng = check_random_state(random_state)
    tr, te = _split_indices(len(frame), test_size, rng, stratify=y)
    if public_fraction > 0.0:
        # a stratified public part of the non-test rows: its min/max give the
        # log1p bounds; it is dropped from the training rows (never fitted on)
        keep, pub = _split_indices(
            tr.size, public_fraction / (1.0 - test_size), rng, stratify=y[tr]
        )
        tr, public_idx = tr[keep], tr[pub]
        schema = _public_rows_schema(frame, public_idx).with_bounds(bounds)
        scheme = (
            f"Public schema: a stratified public_fraction={public_fraction} of the rows "
            f"({public_idx.size} rows, disjoint from the training and test rows, never "
            "fitted on) gives each column's log1p range; features are "
            "(log1p(x) − log1p(lo))/(log1p(hi) − log1p(lo)) clipped to [0, 1]."
        )
    else:
        schema = _SCHEMAS["breast-cancer"].with_bounds(bounds)
        scheme = (
            "Public schema: no bounds; each non-negative measurement x ↦ "
            "log1p(x)/(1 + log1p(x)) ∈ [0, 1), a constant-free per-record map."
        )
    desc = (
        "UCI Wisconsin Diagnostic Breast Cancer (WDBC) via sklearn.datasets.load_breast_cancer; "
        "569 rows, 30 features. Labels: malignant → +1, benign → −1. "
        f"Stratified random split, test_size={test_size}, random_state={random_state!r}. "
        + scheme
        + " (see docs/datasets.md). "
        + _norm_text(schema, normalize_rows)
    )
    return _finish_schema(
        "breast-cancer",
        schema,
        frame.iloc[tr],
        frame.iloc[te] if te.size else None,
        y[tr],
        y[te] if te.size else None,
        "binary",
        normalize_rows,
        None,
        desc,
    )


def _read_adult(path: Path) -> pd.DataFrame:
    numeric = {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
    dtypes = {c: ("float64" if c in numeric else "str") for c in _ADULT_COLUMNS}
    return pd.read_csv(
        path,
        header=None,
        names=_ADULT_COLUMNS,
        skipinitialspace=True,
        na_values="?",
        comment="|",  # adult.test starts with the line "|1x3 Cross validator"
        dtype=dtypes,
        engine="c",
    )


def _adult_labels(income: pd.Series, path: Path) -> np.ndarray:
    lab = income.str.rstrip(".")
    bad = ~lab.isin(["<=50K", ">50K"])
    if bad.any():
        raise LabelError(
            f"{path}: income labels must be '<=50K' or '>50K' (optionally with a trailing '.'), "
            f"got {lab[bad].unique()[:5].tolist()}"
        )
    return np.where(lab.to_numpy() == ">50K", 1.0, -1.0)


def _load_adult(data_home=None, *, normalize_rows=True, random_state=0, bounds=None):
    home = _resolve_data_home(data_home)
    p_train = _find_file(home, "adult", "adult.data")
    p_test = _find_file(home, "adult", "adult.test")
    schema = _ADULT_SCHEMA.with_bounds(bounds)
    tr = _read_adult(p_train)
    te = _read_adult(p_test)
    n_tr, n_te = len(tr), len(te)
    tr = tr.dropna().reset_index(drop=True)
    te = te.dropna().reset_index(drop=True)
    desc = (
        "UCI Adult (Census Income), official split adult.data / adult.test. "
        f"Rows with a missing value dropped: train {n_tr} → {len(tr)}, test {n_te} → {len(te)}. "
        "Label: income >50K → +1, <=50K → −1. fnlwgt (a survey sampling weight with no "
        "public range) is not used. " + _norm_text(schema, normalize_rows)
    )
    return _finish_schema(
        "adult",
        schema,
        tr,
        te,
        _adult_labels(tr["income"], p_train),
        _adult_labels(te["income"], p_test),
        "binary",
        normalize_rows,
        None,
        desc,
    )


def _load_kddcup99(
    data_home=None,
    *,
    normalize_rows=True,
    random_state=0,
    n_samples=70000,
    test_size=0.2,
    bounds=None,
):
    home = _resolve_data_home(data_home)
    path = _find_file(home, "kddcup99", "kddcup.data_10_percent")
    test_size = _check_test_size(test_size)
    if n_samples is not None:
        n_samples = check_count(n_samples, "n_samples", minimum=2)
    schema = _KDD_SCHEMA.with_bounds(bounds)
    names = [*_KDD_COLUMNS, "label"]
    dtypes = {c: "float64" for c in _KDD_COLUMNS}
    for c in ("protocol_type", "service", "flag", "label"):
        dtypes[c] = "category"
    frame = pd.read_csv(path, header=None, names=names, dtype=dtypes, engine="c")
    n = len(frame)
    if n_samples is None:
        n_samples = n
    if n_samples > n:
        raise InvalidDataError(f"n_samples={n_samples} exceeds the {n} rows of {path}")
    rng = check_random_state(random_state)
    idx = rng.choice(n, size=n_samples, replace=False)  # uniform, in random order
    n_test = round(test_size * n_samples)
    tr_idx, te_idx = idx[n_test:], idx[:n_test]
    y = np.where(frame["label"].to_numpy(dtype=str) == "normal.", -1.0, 1.0)
    desc = (
        f"KDD Cup 1999, 10% subset ({n} rows). Binary task: attack → +1, normal. → −1. "
        f"Protocol of Iyengar et al. (2019): {n_samples} rows sampled uniformly without "
        f"replacement (random_state={random_state!r}), split {1 - test_size:g}/{test_size:g}. "
        + _norm_text(schema, normalize_rows)
    )
    return _finish_schema(
        "kddcup99",
        schema,
        frame.iloc[tr_idx],
        frame.iloc[te_idx] if n_test else None,
        y[tr_idx],
        y[te_idx] if n_test else None,
        "binary",
        normalize_rows,
        None,
        desc,
    )


def _read_idx(path: Path, expected_ndim: int) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != expected_ndim:
        raise InvalidDataError(
            f"{path} is not an IDX uint8 file with {expected_ndim} dimension(s) "
            f"(magic bytes {raw[:4].hex()})"
        )
    dims = np.frombuffer(raw, ">u4", count=expected_ndim, offset=4).astype(np.int64)
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * expected_ndim)
    if data.size != int(np.prod(dims)):
        raise InvalidDataError(f"{path}: header says shape {dims.tolist()}, got {data.size} bytes")
    return data.reshape(dims)


def _load_mnist(data_home=None, *, normalize_rows=True, random_state=0):
    home = _resolve_data_home(data_home)
    parts = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        img = _read_idx(_find_file(home, "mnist", f"{prefix}-images-idx3-ubyte"), 3)
        lab = _read_idx(_find_file(home, "mnist", f"{prefix}-labels-idx1-ubyte"), 1)
        if img.shape[0] != lab.shape[0]:
            raise InvalidDataError(
                f"MNIST {split}: {img.shape[0]} images but {lab.shape[0]} labels"
            )
        # pixel / 255 ∈ [0, 1]; worst-case norm √784 = 28, a public constant.
        scale = 1.0 / (255.0 * 28.0) if normalize_rows else 1.0 / 255.0
        X = img.reshape(img.shape[0], -1).astype(np.float64)
        X *= scale
        parts[split] = (X, lab.astype(np.int64))
    d = parts["train"][0].shape[1]
    side = math.isqrt(d)
    desc = (
        "MNIST handwritten digits, official split (60,000 / 10,000); 10 classes 0..9. "
        "Pixels / 255 ∈ [0, 1]; worst-case row norm √784 = 28"
        + (", rows divided by 28 (row_norm_bound = 1)." if normalize_rows else ".")
    )
    return Dataset(
        name="mnist",
        X_train=parts["train"][0],
        y_train=parts["train"][1],
        X_test=parts["test"][0],
        y_test=parts["test"][1],
        feature_names=[f"pixel_{i // side}_{i % side}" for i in range(d)],
        task="multiclass",
        row_norm_bound=1.0 if normalize_rows else math.sqrt(d),
        label_bound=None,
        description=desc,
        classes=tuple(range(10)),  # the ten digits: public
    )


def _synthetic_second_moment(n_features, n_informative, n_redundant, class_sep) -> float:
    """E‖x‖² of a ``make_classification`` row, from its documented construction.

    Informative part: ``z A + c`` with ``z ~ N(0, I_k)``, ``A`` uniform on
    ``[−1, 1]^{k×k}`` and ``c ∈ {±class_sep}^k``: ``E‖·‖² = k (k/3 + class_sep²)``.
    Redundant part: informative part times ``B`` uniform on ``[−1, 1]^{k×r}``,
    ``E‖·‖² = (r/3) E‖informative‖²``.  Noise features: ``N(0, 1)`` each.
    """
    k, r = n_informative, n_redundant
    inf = k * (k / 3.0 + class_sep**2)
    return inf * (1.0 + r / 3.0) + (n_features - k - r)


def _make_synthetic(
    name,
    n_samples,
    n_features,
    n_informative,
    *,
    normalize_rows,
    random_state,
    test_size,
    class_sep=2.0,
):
    from sklearn.datasets import make_classification

    test_size = _check_test_size(test_size)
    rng = check_random_state(random_state)
    n_redundant = 2
    X, y = make_classification(
        n_samples=n_samples,
        n_features=n_features,
        n_informative=n_informative,
        n_redundant=n_redundant,
        class_sep=class_sep,
        random_state=int(rng.integers(2**31 - 1)),
    )
    y = np.where(y == 1, 1.0, -1.0)
    scale = 2.0 * math.sqrt(
        _synthetic_second_moment(n_features, n_informative, n_redundant, class_sep)
    )
    n_clipped = 0
    if normalize_rows:
        X /= scale
        X, n_clipped = clip_rows(X, 1.0, warn=False)
        bound = 1.0
    else:
        bound = math.inf
    tr, te = _split_indices(n_samples, test_size, rng)
    desc = (
        f"Synthetic: sklearn make_classification(n_samples={n_samples}, "
        f"n_features={n_features}, n_informative={n_informative}, n_redundant={n_redundant}, "
        f"class_sep={class_sep}), seed drawn from random_state={random_state!r}; labels ±1; "
        f"random split test_size={test_size}. "
        + (
            f"Rows divided by the public constant 2·√E‖x‖² = {scale:.4g} (from the generator's "
            f"parameters, not the sample) and projected onto the unit ball "
            f"({n_clipped} rows clipped); row_norm_bound = 1."
            if normalize_rows
            else "Raw Gaussian features: no public norm bound (row_norm_bound = inf)."
        )
    )
    return Dataset(
        name=name,
        X_train=X[tr],
        y_train=y[tr],
        X_test=X[te] if te.size else None,
        y_test=y[te] if te.size else None,
        feature_names=[f"x{i}" for i in range(n_features)],
        task="binary",
        row_norm_bound=bound,
        label_bound=None,
        description=desc,
    )


def _load_synthetic_l(data_home=None, *, normalize_rows=True, random_state=0, test_size=0.2):
    return _make_synthetic(
        "synthetic-l",
        10_000,
        40,
        30,
        normalize_rows=normalize_rows,
        random_state=random_state,
        test_size=test_size,
    )


def _load_synthetic_h(data_home=None, *, normalize_rows=True, random_state=0, test_size=0.2):
    return _make_synthetic(
        "synthetic-h",
        2_000,
        2_000,
        10,
        normalize_rows=normalize_rows,
        random_state=random_state,
        test_size=test_size,
    )


def _regression_split(
    name, schema, frame, y, label_bound, normalize_rows, random_state, test_size, desc
):
    y = np.clip(y, -label_bound, label_bound)
    rng = check_random_state(random_state)
    tr, te = _split_indices(len(frame), test_size, rng)
    desc += f" Random split test_size={test_size}, random_state={random_state!r}. " + _norm_text(
        schema, normalize_rows
    )
    return _finish_schema(
        name,
        schema,
        frame.iloc[tr],
        frame.iloc[te] if te.size else None,
        y[tr],
        y[te] if te.size else None,
        "regression",
        normalize_rows,
        label_bound,
        desc,
    )


def _load_california_housing(
    data_home=None, *, normalize_rows=True, random_state=0, test_size=0.2, bounds=None
):
    home = _resolve_data_home(data_home)
    path = _find_file(home, "california_housing", "cal_housing.data")
    test_size = _check_test_size(test_size)
    schema = _CAL_SCHEMA.with_bounds(bounds)
    raw = pd.read_csv(path, header=None, names=_CAL_RAW_COLUMNS, dtype="float64", engine="c")
    hh = raw["households"].to_numpy()
    safe = np.where(hh > 0, hh, 1.0)  # per-record ratio; households ≥ 1 in the data

    def per_household(col):
        return np.where(hh > 0, raw[col].to_numpy() / safe, 0.0)

    frame = pd.DataFrame(
        {
            "MedInc": raw["medianIncome"],
            "HouseAge": raw["housingMedianAge"],
            "AveRooms": per_household("totalRooms"),
            "AveBedrms": per_household("totalBedrooms"),
            "Population": raw["population"],
            "AveOccup": per_household("population"),
            "Latitude": raw["latitude"],
            "Longitude": raw["longitude"],
        }
    )
    y = raw["medianHouseValue"].to_numpy() / 1e5
    desc = (
        "California Housing (Pace & Barry 1997), 20,640 block groups; regression target "
        "median house value in $100,000, censored at 5.00001 (label_bound). Features as in "
        "sklearn.datasets.fetch_california_housing (per-household ratios are per-record maps)."
    )
    return _regression_split(
        "california-housing",
        schema,
        frame,
        y,
        _CAL_LABEL_BOUND,
        normalize_rows,
        random_state,
        test_size,
        desc,
    )


def _load_casp(data_home=None, *, normalize_rows=True, random_state=0, test_size=0.2, bounds=None):
    home = _resolve_data_home(data_home)
    path = _find_file(home, "casp", "CASP.csv")
    test_size = _check_test_size(test_size)
    schema = _CASP_SCHEMA.with_bounds(bounds)
    frame = pd.read_csv(path, dtype="float64", engine="c")
    frame.columns = [c.strip() for c in frame.columns]
    target = "RMSD" if "RMSD" in frame.columns else frame.columns[0]
    y = frame[target].to_numpy()
    desc = (
        "UCI Physicochemical Properties of Protein Tertiary Structure (CASP), 45,730 rows; "
        "regression target RMSD (Å), documented range [0, 21) → label_bound 21. F3 is a "
        "documented fraction in [0, 1]; the other columns have no published range and are "
        "mapped x ↦ log1p(x)/(1 + log1p(x)) ∈ [0, 1) (constant-free, per record)."
    )
    return _regression_split(
        "casp",
        schema,
        frame,
        y,
        _CASP_LABEL_BOUND,
        normalize_rows,
        random_state,
        test_size,
        desc,
    )


_LOADERS = {
    "breast-cancer": _load_breast_cancer,
    "adult": _load_adult,
    "kddcup99": _load_kddcup99,
    "mnist": _load_mnist,
    "synthetic-l": _load_synthetic_l,
    "synthetic-h": _load_synthetic_h,
    "california-housing": _load_california_housing,
    "casp": _load_casp,
}


def _canonical(name) -> str:
    if not isinstance(name, str):
        raise UnknownNameError(
            f"dataset name must be a string, got {type(name).__name__}: {name!r}; "
            f"available: {available_datasets()}"
        )
    return name.strip().lower().replace("_", "-")


def available_datasets() -> list[str]:
    """Names accepted by :func:`load` (``_`` and ``-`` are interchangeable, case-insensitive)."""
    return list(_LOADERS)


def load(
    name: str = DEFAULT_DATASET,
    data_home: str | Path | None = None,
    *,
    normalize_rows: bool = True,
    random_state=0,
    **kw,
) -> Dataset:
    """Load a built-in dataset, preprocessed with its public schema.

    Parameters
    ----------
    name : str, default ``"breast-cancer"``
        One of :func:`available_datasets`: ``"breast-cancer"``, ``"adult"``,
        ``"kddcup99"``, ``"mnist"``, ``"synthetic-l"``, ``"synthetic-h"``,
        ``"california-housing"``, ``"casp"``.
    data_home : str or Path, optional
        Folder with the data files (``<data_home>/<dataset>/<file>[.gz]`` or
        ``<data_home>/<file>[.gz]``).  Default: ``$DPERM_DATA_HOME``, else
        ``../shared/data`` relative to the working directory.  Not needed for
        ``breast-cancer`` and the synthetic sets.
    normalize_rows : bool or "unit", default True
        Divide every row by the public worst-case norm of the schema so that
        ``row_norm_bound == 1`` (synthetic sets: divide by a public constant and
        project onto the unit ball).  ``"unit"``: center every feature at the
        midpoint of its public range and scale each row to unit norm (a
        per-record map); breast-cancer uses this for ``True``.
    random_state : int, SeedSequence, Generator or None, default 0
        Seed of the train/test split (and of the sampling/generation where the
        dataset has one).  Ignored by datasets with an official split (adult,
        mnist).  The default 0 makes the split reproducible; it has nothing to
        do with the privacy noise of the algorithms.
    **kw
        Dataset-specific options: ``test_size`` (breast-cancer 0.25; kddcup99,
        synthetic-*, california-housing, casp 0.2), ``n_samples`` (kddcup99,
        default 70000, None = all rows), ``bounds`` (a dict
        ``{column: (lo, hi)}`` replacing public bounds of the schema-based
        sets with your own public bounds).

    Returns
    -------
    Dataset

    Raises
    ------
    UnknownNameError
        Unknown dataset name (the message lists the available ones) or an
        option the dataset does not take.
    DataFileNotFoundError
        A data file is missing; the message names the exact path expected.
    InvalidDataError, LabelError, InvalidPrivacyParameter
        Malformed files, bad ``test_size`` / ``n_samples`` / ``bounds``.
    """
    key = _canonical(name)
    if key not in _LOADERS:
        raise UnknownNameError(
            f"unknown dataset {name!r}; available datasets: {available_datasets()}"
        )
    loader = _LOADERS[key]
    params = inspect.signature(loader).parameters
    bad = sorted(set(kw) - set(params))
    if bad:
        allowed = [p for p in params if p not in ("data_home", "normalize_rows", "random_state")]
        raise UnknownNameError(f"dataset {key!r} does not take option(s) {bad}; it takes {allowed}")
    return loader(data_home, normalize_rows=normalize_rows, random_state=random_state, **kw)


# ---------------------------------------------------------------------------
# Generic loaders
# ---------------------------------------------------------------------------


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
    normalize_rows: bool = True,
) -> Dataset:
    """Load a CSV file (with a header row) with a schema from the caller.

    A path ending in ``.parquet`` or ``.pq`` is read as Parquet (needs a pandas
    Parquet engine, e.g. pyarrow) under the same schema rules.

    Numeric columns are scaled with **user-passed public bounds** only; a numeric
    column without a bound is an error unless ``allow_data_bounds=True``, which
    takes the bound from the data's min/max and emits
    :class:`~dperm.exceptions.PrivacyLeakWarning` (the resulting model then has
    **no** end-to-end DP guarantee: the bounds themselves reveal the extreme
    records).  Categorical columns are one-hot encoded with the lists in
    ``categories``; a column without a list gets the sorted set of values found
    in the file, with a :class:`~dperm.exceptions.PrivacyLeakWarning` (the
    category set is itself data-dependent; pass the public list).

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
        Allow bounds read from the data (privacy leak, warned).
    normalize_rows : bool, default True
        Divide rows by the public worst-case norm √(#numeric + #categorical).

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
        If a numeric column has no bound and ``allow_data_bounds`` is False, or
        a bound is not a finite pair with ``lo < hi``.
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

    def require(names, what):
        unknown = [c for c in names if c not in header]
        if unknown:
            raise UnknownNameError(f"{what} column(s) {unknown} not in {path}; columns: {header}")

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
    if no_bound and not allow_data_bounds:
        raise InvalidPrivacyParameter(
            f"numeric column(s) {no_bound} have no public bound: pass bounds={{column: (lo, hi)}} "
            "from public knowledge (documentation, domain ranges). allow_data_bounds=True reads "
            "them from the data instead, which leaks privacy."
        )
    if no_bound:
        warnings.warn(
            f"bounds of numeric column(s) {no_bound} are taken from the data (min/max); this "
            "leaks privacy, so the result has no end-to-end DP guarantee. Pass bounds= for one.",
            PrivacyLeakWarning,
            stacklevel=2,
        )
        for c in no_bound:
            lo, hi = float(frame[c].min()), float(frame[c].max())
            bounds[c] = (lo, hi if hi > lo else lo + 1.0)
    no_cats = [c for c in categorical if c not in categories]
    if no_cats:
        warnings.warn(
            f"category lists of column(s) {no_cats} are taken from the values present in the "
            "data; the category set is data-dependent. Pass categories= with public lists.",
            PrivacyLeakWarning,
            stacklevel=2,
        )
        for c in no_cats:
            categories[c] = sorted(frame[c].astype(str).unique().tolist())
    cols: list[NumericColumn | CategoricalColumn] = []
    log_set = set(log_columns)
    for c in features:
        if c in categorical:
            cols.append(_cat(c, categories[c], "user-supplied categories"))
        else:
            lo, hi = _as_bound_pair(bounds[c], c)
            cols.append(_num(c, lo, hi, "user-supplied bound", log=c in log_set))
    schema = Schema(tuple(cols))
    rng = check_random_state(random_state)
    y_raw = frame[target].to_numpy()
    y_enc, _, task, label_text = _encode_labels(y_raw, None, task, positive_label, label_bound)
    strat = y_enc if task != "regression" else None
    tr, te = _split_indices(len(frame), test_size, rng, stratify=strat)
    desc = (
        f"CSV file {path}; {n_raw} rows, {n_raw - len(frame)} dropped for missing values; "
        f"target {target!r}: {label_text}. Split test_size={test_size}, "
        f"random_state={random_state!r}. " + _norm_text(schema, normalize_rows)
    )
    if no_bound or no_cats:
        desc += " WARNING: bounds or categories were read from the data (privacy leak)."
    return _finish_schema(
        path.stem,
        schema,
        frame.iloc[tr],
        frame.iloc[te] if te.size else None,
        y_enc[tr],
        y_enc[te] if te.size else None,
        task,
        normalize_rows,
        float(label_bound) if (task == "regression" and label_bound is not None) else None,
        desc,
    )


def _normalize_sparse_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    norms = row_norms(X)
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    X = sp.csr_matrix(sp.diags(inv) @ X)
    # rounding can leave a row a hair above 1; project those exactly
    X, _ = clip_rows(X, 1.0, warn=False)
    return X


def load_svmlight(
    path: str | Path,
    *,
    n_features: int | None = None,
    test_path: str | Path | None = None,
    normalize_rows: bool = True,
    task: str | None = None,
    positive_label=None,
    label_bound: float | None = None,
) -> Dataset:
    """Load a LIBSVM / svmlight file as a sparse CSR dataset.

    Parameters
    ----------
    path : str or Path
        Training file (``.gz`` / ``.bz2`` accepted).
    n_features : int, optional
        Number of features.  Pass the documented dimension of the dataset:
        when None it is the largest index present in the file(s), which is
        data-dependent.
    test_path : str or Path, optional
        Test file; loaded with the same ``n_features``.
    normalize_rows : bool, default True
        Scale every row to unit ℓ2 norm (zero rows stay zero), so
        ``row_norm_bound = 1``.  This is a **per-record map** (each row is
        divided by its own norm), so it needs no privacy accounting.  With
        False, ``row_norm_bound = inf`` and the caller must pick ``data_norm``.
    task, positive_label, label_bound
        As in :func:`load_csv`; binary labels are mapped to {−1, +1}.

    Returns
    -------
    Dataset
        ``X_train`` / ``X_test`` are ``scipy.sparse.csr_matrix`` of float64.

    Raises
    ------
    DataFileNotFoundError
        If a file does not exist (the message names it).
    InvalidDataError, LabelError, UnknownNameError
    """
    from sklearn.datasets import load_svmlight_file, load_svmlight_files

    path = Path(path)
    paths = [path] + ([Path(test_path)] if test_path is not None else [])
    for p in paths:
        if not p.is_file():
            raise DataFileNotFoundError(f"svmlight file not found: expected {p}")
    if n_features is not None:
        n_features = check_count(n_features, "n_features")
    try:
        if test_path is None:
            X_tr, y_tr = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
            X_te, y_te = None, None
        else:
            X_tr, y_tr, X_te, y_te = load_svmlight_files(
                [str(p) for p in paths], n_features=n_features, dtype=np.float64
            )
    except ValueError as exc:
        raise InvalidDataError(f"cannot parse svmlight file(s) {paths}: {exc}") from None
    y_tr, y_te, task, label_text = _encode_labels(y_tr, y_te, task, positive_label, label_bound)
    X_tr = sp.csr_matrix(X_tr, dtype=np.float64)
    X_te = None if X_te is None else sp.csr_matrix(X_te, dtype=np.float64)
    if normalize_rows:
        X_tr = _normalize_sparse_rows(X_tr)
        X_te = None if X_te is None else _normalize_sparse_rows(X_te)
    for X in (X_tr, X_te):
        if X is not None:
            X.sort_indices()
    d = X_tr.shape[1]
    desc = (
        f"svmlight file {path}"
        + (f" (test: {test_path})" if test_path else "")
        + f"; {d} features; labels: {label_text}. "
        + (
            "Each row scaled to unit norm (per-record map); row_norm_bound = 1."
            if normalize_rows
            else "Raw rows, no public norm bound (row_norm_bound = inf)."
        )
    )
    return Dataset(
        name=path.name.split(".")[0],
        X_train=X_tr,
        y_train=y_tr,
        X_test=X_te,
        y_test=y_te,
        feature_names=[f"f{i}" for i in range(d)],
        task=task,
        row_norm_bound=1.0 if normalize_rows else math.inf,
        label_bound=(
            float(label_bound) if (task == "regression" and label_bound is not None) else None
        ),
        description=desc,
    )
