"""Shared steps of the loaders: splits, label encoding, the schema map and row scaling.

A user's file (:func:`~dperm.datasets.load_csv`, :func:`~dperm.datasets.load_svmlight`,
:func:`~dperm.datasets.read_dask`) is split by :func:`file_split` (the row count and a
public seed only) and its target encoded by a :class:`LabelRule` decided by the
caller's options (:func:`label_rule`), never by the labels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._rng import check_random_state
from .._validation import check_positive, check_probability, float_array
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
    """Random (optionally stratified) train/test index split of a built-in dataset
    (a fixed public file; a user's file is split by :func:`file_split`).

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


def file_split(n: int, test_size: float, random_state=0) -> tuple[np.ndarray, np.ndarray]:
    """The train/test split of a user's file: row ``i`` is a test row iff ``uᵢ < test_size``,
    ``u = Generator(random_state).random(n)`` — one independent Bernoulli(``test_size``)
    coin per row *position*, drawn from a public seed.

    Nothing of the file but its row count enters (no stratification on the labels, no
    value-dependent order), and the coins are a prefix-stable stream (the first n draws
    do not depend on n), so:

    * **replace-one** (a record replaced in place): both files give every position the
      same coin, hence the same split; the training sets are replace-one neighbours (or
      equal, when the record is a test row), and ``n_train`` is a function of n and the
      seed only;
    * **add/remove-one** at the end of the file: the other rows keep their coins; the
      training sets differ by that record at most.  With ``random_state=None`` (fresh,
      secret coins) an added or removed record anywhere in the file changes nothing but
      its own assignment in law (every record is kept independently with probability
      1 − ``test_size``), so add/remove neighbours give add/remove-neighbouring training
      sets whatever the position.

    ``docs/neighbouring.md`` ("One record of a file") states the rule.  The training
    and test rows keep the order of the file.

    Parameters
    ----------
    n : int ≥ 0
    test_size : float in [0, 1)
    random_state : int, SeedSequence, Generator or None, default 0

    Returns
    -------
    (train, test) : two int64 arrays of row indices, in increasing order
    """
    u = check_random_state(random_state).random(int(n))
    test = u < float(test_size)
    return np.flatnonzero(~test), np.flatnonzero(test)


_TASKS_DOC = (
    "task='regression' (or label_bound=, the public bound on |y|), classes=[...] (the "
    "public label list; two labels: binary, the second one +1) or positive_label= "
    "(that value +1, every other −1)"
)


def _public_list(classes, name: str = "classes") -> tuple:
    """``classes`` checked: a list (never a string) of at least two distinct labels."""
    if isinstance(classes, str | bytes) or not isinstance(classes, list | tuple | np.ndarray):
        raise InvalidPrivacyParameter(
            f"{name} must be a list of the public labels, e.g. ['no', 'yes'], got "
            f"{type(classes).__name__}: {classes!r}"
        )
    out = tuple(v.item() if isinstance(v, np.generic) else v for v in classes)
    names = [str(v).strip() for v in out]
    if len(out) < 2 or len(set(names)) != len(names) or any(not v for v in names):
        raise InvalidPrivacyParameter(
            f"{name} must hold at least two distinct, non-empty labels, got {list(out)!r}"
        )
    return out


def _as_number(v) -> float | None:
    """``v`` as a float when it is a number or a numeric string, else None."""
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


@dataclass(frozen=True)
class LabelRule:
    """The public encoding of a file's target column, decided by the caller's options
    alone — never by the labels (issue #36: one record must not switch the task, the
    label set or the label names).

    Attributes
    ----------
    task : {"binary", "multiclass", "regression"}
    classes : tuple or None
        The public label list (classification with ``classes=``): binary (c₀, c₁) ↦
        (−1, +1), multi-class cⱼ ↦ j.
    positive_label : optional
        Binary one-vs-rest: this value ↦ +1, every other value ↦ −1.
    label_bound : float or None
        Regression: the public bound B; targets are clipped to [−B, B].
    """

    task: str
    classes: tuple | None = None
    positive_label: object = None
    label_bound: float | None = None

    @property
    def names(self) -> tuple | None:
        """The labels of the encoded classes, in order (public): (negative, positive) for
        a binary task (``"not <positive_label>"`` for one-vs-rest), the classes for a
        multi-class one; None for regression."""
        if self.task == "regression":
            return None
        if self.classes is not None:
            return self.classes
        return (f"not {self.positive_label}", self.positive_label)

    @property
    def dataset_classes(self) -> tuple | None:
        """The encoded public label set: (−1.0, 1.0), (0, …, k − 1) or None."""
        if self.task == "regression":
            return None
        if self.task == "binary":
            return (-1.0, 1.0)
        return tuple(range(len(self.classes)))

    def describe(self) -> str:
        if self.task == "regression":
            if self.label_bound is None:
                return "regression, target unbounded (no label_bound given)"
            return f"regression, target clipped to the public bound |y| ≤ {self.label_bound:g}"
        if self.classes is None:
            return f"binary, label {self.positive_label!r} → +1, every other value → −1"
        if self.task == "binary":
            return (
                f"binary, public labels {list(self.classes)}: {self.classes[0]!r} → −1, "
                f"{self.classes[1]!r} → +1; a label outside the list is refused"
            )
        return (
            f"multiclass, public labels {list(self.classes)[:20]} → 0..{len(self.classes) - 1};"
            " a label outside the list is refused"
        )

    def encode(self, y, column: str = "target") -> tuple[np.ndarray, int]:
        """``(encoded labels, number of targets clipped to label_bound)``.

        Raises
        ------
        LabelError
            A missing label, a label outside the public list or a non-numeric
            regression target (the values are never echoed: they are private records').
        """
        y = np.asarray(y)
        missing = _missing(y)
        if missing.any():
            raise LabelError(
                f"the target column {column!r} has {int(missing.sum())} missing value(s); "
                "dperm does not drop rows (the row count must not depend on the data): "
                "fill or remove them in the file first"
            )
        if self.task == "regression":
            message = (
                f"task='regression' needs a numeric target; column {column!r} holds values "
                "that are not numbers"
            )
            t = float_array(y, column, error=LabelError, message=message)
            if self.label_bound is None:
                return t, 0
            b = self.label_bound
            n_clipped = int(np.count_nonzero(np.abs(t) > b))
            return np.clip(t, -b, b), n_clipped
        matches = _matcher(y)
        if self.classes is None:  # one-vs-rest on positive_label
            return np.where(matches(self.positive_label), 1.0, -1.0), 0
        codes = np.full(y.shape[0], -1, dtype=np.int64)
        for j, c in enumerate(self.classes):
            codes[matches(c)] = j
        outside = int(np.count_nonzero(codes < 0))
        if outside:
            raise LabelError(
                f"{outside} row(s) of the target column {column!r} hold a label outside the "
                f"public label list {list(self.classes)} (classes=); fix the file or the "
                "list (labels are compared as numbers when both are numeric, else as text)"
            )
        if self.task == "binary":
            return np.where(codes == 1, 1.0, -1.0), 0
        return codes, 0


def _missing(y: np.ndarray) -> np.ndarray:
    if y.dtype.kind == "f":
        return np.isnan(y)
    if y.dtype.kind == "O":
        return np.asarray(pd.isna(y), dtype=bool)
    return np.zeros(y.shape[0], dtype=bool)


def _matcher(y: np.ndarray):
    """``matches(label)``: the rows of ``y`` equal to ``label``, record by record — as
    numbers when both the value and ``label`` are numbers (``1`` matches ``1.0``), else as
    text.  Never by the column's dtype, which one record of text would switch for every
    other row (issue #36).  The text and the numbers of ``y`` are computed once, if used."""
    numeric = y.dtype.kind in "iufb"

    @functools.cache
    def text() -> np.ndarray:
        return y.astype(str)

    @functools.cache
    def numbers() -> np.ndarray:
        if numeric:
            return y.astype(np.float64)
        as_object = pd.Series(y, dtype=object)
        return pd.to_numeric(as_object, errors="coerce").to_numpy(np.float64)

    def matches(label) -> np.ndarray:
        num = _as_number(label)
        if num is None:
            return text() == str(label)
        if numeric:
            return numbers() == num
        return (numbers() == num) | (text() == str(label))

    return matches


def label_rule(task=None, positive_label=None, label_bound=None, classes=None) -> LabelRule:
    """The :class:`LabelRule` of the caller's options (public; nothing is read off y).

    ``label_bound`` implies regression; ``classes`` (two labels: binary, three or more:
    multiclass) or ``positive_label`` imply classification; a file that leaves the
    task open is refused with the options that decide it.

    Raises
    ------
    UnknownNameError
        An unknown ``task``.
    InvalidPrivacyParameter
        Options that leave the task open or contradict each other; a bad ``classes``
        list or ``label_bound``.
    """
    if task is not None and task not in _TASKS:
        raise UnknownNameError(f"task must be one of {list(_TASKS)}, got {task!r}")
    if classes is not None:
        classes = _public_list(classes)
    if label_bound is not None:
        label_bound = check_positive(label_bound, "label_bound")
        if task not in (None, "regression"):
            raise InvalidPrivacyParameter(
                f"label_bound is the public bound of a regression target; task={task!r} "
                "is a classification"
            )
        task = "regression"
    if task == "regression":
        if classes is not None or positive_label is not None:
            raise InvalidPrivacyParameter(
                "classes= and positive_label= are for a classification task, not regression"
            )
        return LabelRule("regression", label_bound=label_bound)
    if positive_label is not None:
        if task == "multiclass":
            raise InvalidPrivacyParameter(
                "positive_label= makes a binary task (that value +1, every other −1); "
                "a multiclass task needs classes=[...]"
            )
        if classes is None:
            return LabelRule("binary", positive_label=positive_label)
        strs = [str(c) for c in classes]
        if len(classes) != 2 or str(positive_label) not in strs:
            raise InvalidPrivacyParameter(
                f"positive_label={positive_label!r} with classes={list(classes)!r}: give two "
                "classes, one of them the positive label"
            )
        pos = strs.index(str(positive_label))
        return LabelRule("binary", classes=(classes[1 - pos], classes[pos]))
    if classes is not None:
        if task is None:
            task = "binary" if len(classes) == 2 else "multiclass"
        if task == "binary" and len(classes) != 2:
            raise InvalidPrivacyParameter(
                f"task='binary' needs two classes, got {len(classes)}: {list(classes)!r}"
            )
        if task == "multiclass" and len(classes) < 3:
            raise InvalidPrivacyParameter(
                f"task='multiclass' needs three or more classes, got {list(classes)!r} "
                "(two classes: task='binary')"
            )
        return LabelRule(task, classes=classes)
    if task == "binary":
        raise InvalidPrivacyParameter(
            "task='binary' needs the public labels: classes=[negative, positive] or "
            "positive_label= (the labels are never read off the data)"
        )
    if task == "multiclass":
        raise InvalidPrivacyParameter(
            "task='multiclass' needs the public label list classes=[...] (the labels are "
            "never read off the data)"
        )
    raise InvalidPrivacyParameter(
        "the task and the label set are not read off the data (one record could switch "
        f"them): pass {_TASKS_DOC}"
    )


def _encode_labels(y_train, y_test, rule: LabelRule, column: str = "target"):
    """``(y_train, y_test, n_clipped)`` of :meth:`LabelRule.encode` (``y_test`` None
    stays None; ``n_clipped`` counts both parts)."""
    ytr, c_tr = rule.encode(y_train, column)
    if y_test is None:
        return ytr, None, c_tr
    yte, c_te = rule.encode(y_test, column)
    return ytr, yte, c_tr + c_te


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
