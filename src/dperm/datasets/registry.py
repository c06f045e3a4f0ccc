"""The registry of built-in datasets: names, public schemas and :func:`load`."""

from __future__ import annotations

import inspect
from pathlib import Path

from ..exceptions import UnknownNameError
from .adult import _ADULT_SCHEMA, _load_adult
from .breast_cancer import WDBC_SCHEMA, _load_breast_cancer
from .california_housing import _CAL_SCHEMA, _load_california_housing
from .casp import _CASP_SCHEMA, _load_casp
from .cifar10 import load_cifar10
from .dataset import Dataset
from .group_sparse import _load_group_sparse
from .kddcup99 import _KDD_SCHEMA, _load_kddcup99
from .mnist import _load_mnist
from .schema import Schema
from .synthetic import _load_synthetic_h, _load_synthetic_l

DEFAULT_DATASET = "breast-cancer"


_SCHEMAS = {
    "breast-cancer": WDBC_SCHEMA,
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


_LOADERS = {
    "breast-cancer": _load_breast_cancer,
    "adult": _load_adult,
    "kddcup99": _load_kddcup99,
    "mnist": _load_mnist,
    "synthetic-l": _load_synthetic_l,
    "synthetic-h": _load_synthetic_h,
    "california-housing": _load_california_housing,
    "casp": _load_casp,
    "group-sparse": _load_group_sparse,
    "cifar10": load_cifar10,
}


#: Other accepted names (short forms) → canonical names.
_ALIASES = {"california": "california-housing", "cifar-10": "cifar10"}


def _canonical(name) -> str:
    if not isinstance(name, str):
        raise UnknownNameError(
            f"dataset name must be a string, got {type(name).__name__}: {name!r}; "
            f"available: {available_datasets()}"
        )
    key = name.strip().lower().replace("_", "-")
    return _ALIASES.get(key, key)


def available_datasets() -> list[str]:
    """Names accepted by :func:`load` (``_`` and ``-`` are interchangeable, case-insensitive;
    ``"california"`` is accepted for ``"california-housing"``)."""
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
