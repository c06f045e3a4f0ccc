"""Shared steps of the loaders: splits, label encoding, the schema map and row scaling."""

from __future__ import annotations

import numpy as np

from .._rng import check_random_state
from .._validation import check_positive, check_probability
from ..exceptions import InvalidPrivacyParameter, LabelError, UnknownNameError
from ..schema import Schema, SchemaEncoder
from .dataset import Dataset

_TASKS = ("binary", "multiclass", "regression")


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
                raise LabelError("the target has a single value: nothing to learn")
            task = "binary" if k == 2 else "multiclass"

    def apply(fn):
        return fn(y_train), (None if y_test is None else fn(np.asarray(y_test)))

    if task == "binary":
        if positive_label is None:
            vals = np.unique(y_all)
            if vals.size != 2:
                # the values themselves are private (e.g. regression targets): not shown
                raise LabelError(
                    f"task='binary' needs exactly two label values or positive_label=, "
                    f"got {vals.size} distinct values"
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
    data_dependent=(),
) -> Dataset:
    """Transform with the schema's :class:`~dperm.schema.SchemaEncoder`: the schema map,
    then optionally a division by the public worst-case norm (``normalize_rows=True``)
    or, with ``normalize_rows="unit"``, every feature centered at the midpoint of its
    public range and each row scaled to unit norm (per-record maps: no record's features
    depend on another record).  The encoder goes with the Dataset (``encoder``), so a
    saved model can encode new raw rows the same way; ``data_dependent`` names the
    columns whose bounds or categories were read off the data (a leak it carries)."""
    encoder = SchemaEncoder.from_schema(schema, normalize_rows, data_dependent)
    X_train, u_train = encoder.encode(frame_train)
    X_test, u_test = (None, 0) if frame_test is None else encoder.encode(frame_test)
    bound = encoder.row_norm_bound_
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
        encoder=encoder,
    )


def _finish_split(
    name, schema, frame, y, tr, te, task, normalize_rows, label_bound, description, dependent=()
) -> Dataset:
    """:func:`_finish_schema` of the rows ``tr`` (training) and ``te`` (test; none
    when empty) of ``frame`` and of the encoded targets ``y``."""
    return _finish_schema(
        name,
        schema,
        frame.iloc[tr],
        frame.iloc[te] if te.size else None,
        y[tr],
        y[te] if te.size else None,
        task,
        normalize_rows,
        label_bound,
        description,
        dependent,
    )


def _random_split_binary(name, X, y, test_size, rng, feature_names, bound, description):
    """A binary ``Dataset`` of generated rows (X, y) split at random
    (:func:`_split_indices`; no test part when ``test_size`` is 0), row bound ``bound``."""
    tr, te = _split_indices(X.shape[0], test_size, rng)
    return Dataset(
        name=name,
        X_train=X[tr],
        y_train=y[tr],
        X_test=X[te] if te.size else None,
        y_test=y[te] if te.size else None,
        feature_names=feature_names,
        task="binary",
        row_norm_bound=bound,
        label_bound=None,
        description=description,
    )


def _norm_text(schema: Schema, normalize_rows) -> str:
    centered = schema.n_centered
    span = (
        "[0, 1]"
        if centered == 0
        else ("[−1, 1]" if centered == schema.n_numeric else f"[0, 1] ({centered} of them [−1, 1])")
    )
    s = (
        f"{schema.n_numeric} numeric columns mapped to {span} (public bounds, or the "
        "constant-free map log1p(x)/(1 + log1p(x)) where no range is documented"
        + (", centered at the public midpoint of the range" if centered else "")
        + f"), {schema.n_groups} one-hot groups with public category lists; "
        f"worst-case row norm √{schema.n_numeric + schema.n_groups}"
    )
    if normalize_rows == "unit":
        return s + (
            "; features centered at the public midpoints of their ranges and each row "
            "scaled to unit norm, a per-record map (row_norm_bound = 1)."
        )
    return s + (", rows divided by it (row_norm_bound = 1)." if normalize_rows else ".")


def _regression_split(
    name, schema, frame, y, label_bound, normalize_rows, random_state, test_size, desc
):
    y = np.clip(y, -label_bound, label_bound)
    rng = check_random_state(random_state)
    tr, te = _split_indices(len(frame), test_size, rng)
    desc += f" Random split test_size={test_size}, random_state={random_state!r}. " + _norm_text(
        schema, normalize_rows
    )
    return _finish_split(
        name, schema, frame, y, tr, te, "regression", normalize_rows, label_bound, desc
    )
