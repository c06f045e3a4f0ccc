"""UCI Adult (Census Income): schema and loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import LabelError
from ._files import _find_file, _resolve_data_home
from ._prepare import _finish_schema, _norm_text
from .schema import CategoricalColumn, NumericColumn, Schema, _cat, _num

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
