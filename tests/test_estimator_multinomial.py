"""DPLogisticRegression(multi_class="multinomial"): one softmax model trained by
gradient perturbation with the whole budget."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.linear_model import LogisticRegression

from dperm.accounting import PoissonSampled, SelfComposed, epsilon_spent
from dperm.estimators import DPLogisticRegression
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError
from dperm.losses import Softmax


@pytest.fixture
def blobs():
    X, y = make_blobs(n_samples=3000, centers=4, n_features=5, random_state=0, cluster_std=2.0)
    X = X / (np.linalg.norm(X, axis=1).max() * 1.01)  # test data inside the unit ball
    y = np.array(["a", "b", "c", "d"])[y]
    return X[:2400], y[:2400], X[2400:], y[2400:]


def test_multinomial_dp_sgd_is_one_model_with_the_whole_budget(blobs):
    X, y, Xt, yt = blobs
    clf = DPLogisticRegression(
        epsilon=2.0,
        delta=1e-5,
        mechanism="dp-sgd",
        multi_class="multinomial",
        classes=["a", "b", "c", "d"],
        random_state=0,
    ).fit(X, y)
    assert isinstance(clf.loss_, Softmax)
    assert clf.coef_.shape == (4, 5) and clf.intercept_.shape == (4,)
    # one Poisson-subsampled Gaussian event, composed over the steps: no one-vs-rest split
    assert isinstance(clf.dp_event_, SelfComposed)
    assert isinstance(clf.dp_event_.event, PoissonSampled)
    assert epsilon_spent(clf.dp_event_, 1e-5, accountant="pld") <= 2.0 * (1 + 1e-3)
    proba = clf.predict_proba(Xt)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[np.argmax(proba, axis=1)], clf.predict(Xt))
    reference = LogisticRegression().fit(X, y).score(Xt, yt)
    assert clf.score(Xt, yt) >= reference - 0.1


def test_multinomial_needs_a_gradient_mechanism(blobs):
    X, y, _, _ = blobs
    with pytest.raises(InvalidPrivacyParameter, match="multinomial"):
        DPLogisticRegression(mechanism="objective", multi_class="multinomial").fit(X, y)
    with pytest.raises(UnknownNameError, match="multi_class"):
        DPLogisticRegression(mechanism="dp-sgd", multi_class="crammer").fit(X, y)


def test_binary_problems_ignore_multinomial(blobs):
    X, y, _, _ = blobs
    keep = np.isin(y, ["a", "b"])
    clf = DPLogisticRegression(
        epsilon=1.0,
        mechanism="dp-sgd",
        multi_class="multinomial",
        classes=["a", "b"],
        random_state=0,
    ).fit(X[keep], y[keep])
    assert clf.coef_.shape == (1, 5)
