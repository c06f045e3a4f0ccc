"""MNIST handwritten digits (IDX files): loader."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np

from ..exceptions import InvalidDataError
from ._files import _find_file, _resolve_data_home
from .dataset import Dataset


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
