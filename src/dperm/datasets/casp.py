"""UCI CASP (physicochemical properties of protein tertiary structure): schema and loader."""

from __future__ import annotations

import pandas as pd

from ._files import _find_file, _resolve_data_home
from ._prepare import _check_test_size, _regression_split
from .schema import Schema, SquashedColumn, _num

_CASP_SRC = (
    "UCI CASP documentation: a non-negative physicochemical quantity with no published "
    "range, so no bound: the constant-free map s(x) = log1p(x)/(1 + log1p(x))"
)
#: F3 is documented as a fraction (in [0, 1] by definition); the other eight columns
#: have no documented range.  The earlier hand-written caps sat 1.2–1.9× above the
#: data maxima (read off the data) and were removed (issue #10).  Every column is centered
#: at the midpoint of its public range (½ of s's range [0, 1); ½ for the fraction F3):
#: features in [−1, 1] (median AdaSSP test R² at ε = 1: 0.04 uncentered, 0.10 centered).
_CASP_SCHEMA = Schema(
    (
        SquashedColumn("F1", "total surface area (Å²); " + _CASP_SRC, center=True),
        SquashedColumn("F2", "non-polar exposed area (Å²); " + _CASP_SRC, center=True),
        _num("F3", 0, 1, "fractional area of exposed non-polar residue (UCI)", center=True),
        SquashedColumn(
            "F4", "fractional area of exposed non-polar residue part, ~100 scale", center=True
        ),
        SquashedColumn("F5", "molecular-mass-weighted exposed area; " + _CASP_SRC, center=True),
        SquashedColumn(
            "F6", "average deviation from standard exposed area; " + _CASP_SRC, center=True
        ),
        SquashedColumn("F7", "Euclidean distance; " + _CASP_SRC, center=True),
        SquashedColumn("F8", "secondary-structure penalty (integer); " + _CASP_SRC, center=True),
        SquashedColumn(
            "F9", "spatial distribution constraint (N,K value); " + _CASP_SRC, center=True
        ),
    )
)
_CASP_LABEL_BOUND = 21.0  # RMSD in Å; UCI documentation: 0 ≤ RMSD < 21


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
