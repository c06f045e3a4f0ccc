"""CIFAR-10 (the standard python-pickle batches): loader.

The files are the ``cifar-10-batches-py`` release of Krizhevsky ("Learning Multiple
Layers of Features from Tiny Images", 2009): ``data_batch_1`` … ``data_batch_5`` (50 000
training images) and ``test_batch`` (10 000), each a pickled dict with ``data`` (a uint8
array of shape (10 000, 3 072): the red, green and blue 32 × 32 planes of each image) and
``labels`` (0..9).  They are looked up as ``<data_home>/cifar10/cifar-10-batches-py/<f>``,
``<data_home>/cifar10/<f>``, ``<data_home>/cifar-10-batches-py/<f>`` or
``<data_home>/<f>``.  Pickles are read by an unpickler that only builds dicts, lists,
strings, numbers and numpy arrays (a file that asks for anything else is refused: a
pickle can otherwise run code).
"""

from __future__ import annotations

import io
import math
import pickle
from pathlib import Path

import numpy as np

from ..exceptions import DataFileNotFoundError, InvalidDataError
from ._files import _DATA_HOME_HINT, _resolve_data_home
from .dataset import Dataset

__all__ = ["CLASSES", "TRAIN_BATCHES", "load_cifar10"]

TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
#: the ten classes, in the order of the labels 0..9
CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
_SIDE, _CHANNELS = 32, 3

#: the globals a CIFAR-10 batch may reference (numpy's array reconstruction)
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise InvalidDataError(
            f"a CIFAR-10 batch may hold only arrays, lists and numbers; this file asks for "
            f"{module}.{name}: refused"
        )


def _find(home: Path, filename: str) -> Path:
    candidates = [
        home / "cifar10" / "cifar-10-batches-py" / filename,
        home / "cifar10" / filename,
        home / "cifar-10-batches-py" / filename,
        home / filename,
    ]
    for c in candidates:
        if c.is_file():
            return c
    raise DataFileNotFoundError(
        f"dataset file not found: expected {candidates[0]} (also tried "
        f"{', '.join(str(c) for c in candidates[1:])}); {_DATA_HOME_HINT}"
    )


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (n, 3072), labels int64 (n,)) of one batch file."""
    try:
        batch = _SafeUnpickler(io.BytesIO(path.read_bytes()), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise InvalidDataError(f"{path} is not a CIFAR-10 python batch: {exc}") from None
    if not isinstance(batch, dict):
        raise InvalidDataError(f"{path} is not a CIFAR-10 python batch (a dict)")
    data = batch.get(b"data", batch.get("data"))
    labels = batch.get(b"labels", batch.get("labels"))
    if data is None or labels is None:
        raise InvalidDataError(f"{path}: a CIFAR-10 batch needs 'data' and 'labels'")
    data = np.asarray(data)
    labels = np.asarray(labels, dtype=np.int64)
    d = _CHANNELS * _SIDE * _SIDE
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != d:
        raise InvalidDataError(
            f"{path}: 'data' must be uint8 of shape (n, {d}), got {data.dtype} {data.shape}"
        )
    if labels.shape != (data.shape[0],) or (labels.size and not 0 <= labels.min() <= 9):
        raise InvalidDataError(f"{path}: 'labels' must be n values in 0..9")
    if labels.size and labels.max() > 9:
        raise InvalidDataError(f"{path}: 'labels' must be n values in 0..9")
    return data, labels


def load_cifar10(data_home=None, *, normalize_rows=True, random_state=0) -> Dataset:
    """CIFAR-10 from its python-pickle batches, official split (50 000 / 10 000).

    Parameters
    ----------
    data_home : str or Path, optional
        Default ``$DPERM_DATA_HOME``, else ``../shared/data``.
    normalize_rows : bool, default True
        Pixels / 255 ∈ [0, 1]; True also divides every row by its public worst-case norm
        √3072 (``row_norm_bound = 1``).
    random_state : ignored (the split is the official one).

    Returns
    -------
    Dataset
        ``X_train`` float32 of shape (50 000, 3 072) — reshape to (n, 3, 32, 32) for a
        convolution — ``y_train`` int64 in 0..9; the same for the test set; ``classes``
        0..9 (public), ``label_names`` the class names.

    Raises
    ------
    DataFileNotFoundError
        A batch file is missing (the message names the paths tried).
    InvalidDataError
        A file that is not a CIFAR-10 batch, or asks the unpickler for anything but arrays.
    """
    home = _resolve_data_home(data_home)
    parts = [_read_batch(_find(home, f)) for f in TRAIN_BATCHES]
    test = _read_batch(_find(home, "test_batch"))
    d = _CHANNELS * _SIDE * _SIDE
    scale = 1.0 / (255.0 * math.sqrt(d)) if normalize_rows else 1.0 / 255.0

    def pixels(a: np.ndarray) -> np.ndarray:
        out = a.astype(np.float32)
        out *= np.float32(scale)
        return out

    X_train = np.concatenate([pixels(x) for x, _ in parts])
    y_train = np.concatenate([y for _, y in parts])
    desc = (
        "CIFAR-10 (Krizhevsky 2009), official split (50,000 / 10,000); 10 classes 0..9; "
        "pixels / 255 ∈ [0, 1] in the order R, G, B planes of 32 × 32; worst-case row norm "
        "√3072" + (", rows divided by it (row_norm_bound = 1)." if normalize_rows else ".")
    )
    names = [f"{c}_{i // _SIDE}_{i % _SIDE}" for c in "rgb" for i in range(_SIDE * _SIDE)]
    return Dataset(
        name="cifar10",
        X_train=X_train,
        y_train=y_train,
        X_test=pixels(test[0]),
        y_test=test[1],
        feature_names=names,
        task="multiclass",
        row_norm_bound=1.0 if normalize_rows else math.sqrt(d),
        label_bound=None,
        description=desc,
        classes=tuple(range(10)),
        label_names=CLASSES,
    )
