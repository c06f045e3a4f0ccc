"""The CIFAR-10 loader reads the standard python-pickle batches (written here in the
release's format: a dict of a uint8 (n, 3072) array and a label list), refuses pickles
that ask for anything but arrays, and names the files it did not find."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from dperm import datasets as D
from dperm.datasets.cifar10 import CLASSES, TRAIN_BATCHES
from dperm.exceptions import DataFileNotFoundError, InvalidDataError


def _write(folder, n=4, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name in (*TRAIN_BATCHES, "test_batch"):
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, n).tolist()
        batches[name] = (data, labels)
        with open(folder / name, "wb") as f:
            pickle.dump({b"batch_label": b"x", b"data": data, b"labels": labels}, f)
    return batches


def test_standard_batches_load_as_the_official_split(tmp_path):
    batches = _write(tmp_path / "cifar10" / "cifar-10-batches-py")
    ds = D.load("cifar-10", tmp_path, normalize_rows=False)
    assert ds.name == "cifar10" and ds.X_train.shape == (20, 3072) and ds.X_test.shape == (4, 3072)
    assert ds.X_train.dtype == np.float32 and ds.classes == tuple(range(10))
    assert ds.label_names == CLASSES and ds.row_norm_bound == pytest.approx(np.sqrt(3072))
    first = batches["data_batch_1"]
    np.testing.assert_allclose(ds.X_train[:4], first[0] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(ds.y_train[:4], first[1])
    np.testing.assert_array_equal(ds.y_test, batches["test_batch"][1])
    unit = D.load("cifar10", tmp_path)  # rows divided by the public bound √3072
    assert np.linalg.norm(unit.X_train, axis=1).max() <= 1.0 + 1e-6


def test_missing_batches_name_the_paths_tried(tmp_path):
    with pytest.raises(DataFileNotFoundError, match="cifar-10-batches-py/data_batch_1"):
        D.load("cifar10", tmp_path)


class _Evil:
    def __reduce__(self):
        return (os.getcwd, ())


def test_a_pickle_that_asks_for_code_is_refused(tmp_path):
    _write(tmp_path)
    with open(tmp_path / "data_batch_3", "wb") as f:
        pickle.dump({b"data": _Evil(), b"labels": [0]}, f)
    with pytest.raises(InvalidDataError, match="refused"):
        D.load("cifar10", tmp_path)
    with open(tmp_path / "data_batch_3", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 10), np.uint8), b"labels": [0, 1]}, f)
    with pytest.raises(InvalidDataError, match="3072"):
        D.load("cifar10", tmp_path)
