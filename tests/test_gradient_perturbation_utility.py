"""Utility of DP-SGD on real data with the *fixed public defaults* (no tuning).

Every run uses :func:`dperm.algorithms.dp_sgd.fit` with only (ε, δ) and the
public row bound of the dataset's schema; batch size, epochs, learning rate and
clipping norm come from the documented default rule.  Accuracy is the mean
test accuracy over 5 seeds.  Skipped when ``../shared/data`` is absent.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from dperm import datasets
from dperm._validation import clip_rows
from dperm.accounting import get_accountant
from dperm.algorithms import dp_sgd
from dperm.losses import Logistic, Softmax

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

SEEDS = range(5)


@functools.cache
def _load(name: str, home: str):
    if name == "mnist":
        # pixels / 255 ∈ [0, 1]; every row clipped to ‖x‖ ≤ 1 (a per-record public map)
        ds = datasets.load("mnist", home, normalize_rows=False)
        Xtr, _ = clip_rows(ds.X_train, 1.0, warn=False)
        Xte, _ = clip_rows(ds.X_test, 1.0, warn=False)
        return Xtr, ds.y_train, Xte, ds.y_test, 1.0
    ds = datasets.load(name, home)
    return ds.X_train, ds.y_train, ds.X_test, ds.y_test, ds.row_norm_bound


def _mean_accuracy(loss, name, home, epsilon, delta=None):
    Xtr, ytr, Xte, yte, bound = _load(name, home)
    n = Xtr.shape[0]
    delta = 1.0 / n**2 if delta is None else delta
    accs = []
    for seed in SEEDS:
        # add/remove-one; the size of the published training split is the public size
        r = dp_sgd.fit(
            loss,
            Xtr,
            ytr,
            epsilon=epsilon,
            delta=delta,
            data_norm=bound,
            dataset_size=n,
            accountant="rdp",
            random_state=seed,
        )
        assert r.diagnostics["neighbouring"] == "add-remove"
        acc = get_accountant("rdp", neighbouring="add-remove")  # the run's own relation
        assert acc.compose(r.event).get_epsilon(delta) <= epsilon
        scores = np.asarray(Xte @ r.theta)
        pred = np.argmax(scores, axis=1) if scores.ndim == 2 else np.where(scores > 0, 1.0, -1.0)
        accs.append(float(np.mean(pred == yte)))
    print(f"{name}: eps={epsilon} accuracies={np.round(accs, 4).tolist()} mean={np.mean(accs):.4f}")
    return float(np.mean(accs))


def test_kddcup99_binary_at_epsilon_0_1(shared_data):
    """KDD Cup 99, normal vs attack, 70,000 rows sampled, 80/20 split, δ = 1/n²."""
    assert _mean_accuracy(Logistic(), "kddcup99", str(shared_data), 0.1) >= 0.981


def test_adult_at_epsilon_0_1(shared_data):
    """UCI Adult, official split, δ = 1/n²."""
    assert _mean_accuracy(Logistic(), "adult", str(shared_data), 0.1) >= 0.785


def test_mnist_multinomial_at_epsilon_1(shared_data):
    """MNIST, 10-class multinomial logistic model, ε = 1, δ = 1e-5."""
    acc = _mean_accuracy(Softmax(10), "mnist", str(shared_data), 1.0, delta=1e-5)
    assert acc >= 0.85
