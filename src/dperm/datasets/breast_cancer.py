"""UCI Wisconsin Diagnostic Breast Cancer (WDBC): schema and loader."""

from __future__ import annotations

import numpy as np

from .._rng import check_random_state
from ..exceptions import InvalidPrivacyParameter
from ._prepare import _check_test_size, _finish_split, _norm_text, _split_indices
from .schema import NumericColumn, Schema, SquashedColumn

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


WDBC_SCHEMA = _wdbc_schema()


def _public_rows_schema(frame, public_idx) -> Schema:
    """The WDBC schema with each column's log1p bounds taken from a PUBLIC subset of
    rows (``public_idx``) that is disjoint from the rows the private fit sees and from
    the test rows.  The guarantee covers the training rows; the public rows are
    treated as public data (the standard "public data for preprocessing" setting)
    and are never passed to the estimator."""
    cols = []
    for c in WDBC_SCHEMA.columns:
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
        schema = WDBC_SCHEMA.with_bounds(bounds)
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
    return _finish_split(
        "breast-cancer", schema, frame, y, tr, te, "binary", normalize_rows, None, desc
    )
