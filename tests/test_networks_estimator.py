"""DPMLPClassifier: the scikit-learn API, one event for PCA + training, save/load,
the ledger, bad input; and dperm fit --model mlp."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dperm  # noqa: E402
from dperm.accounting.events import Composed, Gaussian, SelfComposed  # noqa: E402
from dperm.estimators.mlp import DPMLPClassifier, default_pca_components  # noqa: E402
from dperm.exceptions import (  # noqa: E402
    BudgetExceededError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def wide():
    """3 classes in 120 features (the PCA path): class means along 3 directions."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 1200)
    X = rng.normal(size=(1200, 120)) * 0.3
    X[np.arange(1200), y] += 3.0
    return X, y


def _fit(X, y, **kw):
    params = dict(
        hidden_layer_sizes=(16,), epsilon=2.0, delta=1e-5, classes=[0, 1, 2], batch_size=60,
        epochs=3, random_state=0,
    )  # fmt: skip
    params.update(kw)
    return DPMLPClassifier(**params).fit(X, y)


def test_pca_and_training_are_one_event_calibrated_once(wide):
    X, y = wide
    clf = _fit(X, y)
    ev = clf.dp_event_
    assert isinstance(ev, Composed) and ev.neighbouring == "replace-one"
    z = clf.noise_multiplier_
    assert ev.events[0] == Gaussian(4.0 * z) and isinstance(ev.events[1], SelfComposed)
    assert ev.events[1].count == clf.n_iter_ == 60
    spent = dperm.epsilon_spent(ev, 1e-5, accountant="pld")
    assert 0.99 * 2.0 <= spent <= 2.0 * (1 + 1e-9)
    assert clf.pca_components_.shape == (80, 120) and clf.n_components_ == 80
    assert clf.score(X, y) > 0.9
    P = clf.predict_proba(X[:5])
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert list(clf.classes_) == [0, 1, 2] and clf.predict(X[:5]).shape == (5,)


def test_no_pca_below_the_public_rule_and_add_remove(wide):
    X, y = wide
    assert default_pca_components(120) == 60 and default_pca_components(99) is None
    clf = _fit(X[:, :10], y, neighbouring="add-remove", dataset_size=1200, n_components="auto")
    assert clf.pca_components_ is None and clf.neighbouring_ == "add-remove"
    assert isinstance(clf.dp_event_, SelfComposed)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        _fit(X, y, neighbouring="add-remove", dataset_size=1200, delta=None)
    with pytest.raises(InvalidPrivacyParameter, match="dataset_size"):
        _fit(X, y, neighbouring="add-remove")


def test_save_load_predicts_the_same_without_refitting(wide, tmp_path):
    X, y = wide
    clf = _fit(X, y, activation="tempered_sigmoid", tempered_sigmoid=(2.0, 4.0, 1.0))
    path = dperm.save(clf, tmp_path / "mlp.dperm")
    loaded = dperm.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    assert loaded.dp_event_ == clf.dp_event_
    assert dperm.privacy_statement(loaded) == clf.privacy_statement()
    assert "Analyze Gauss" in clf.privacy_statement()
    meta = dperm.io.read_metadata(path)
    assert "n_clipped_" in meta["not_saved"] and "random_state" not in meta["params"]


def test_budget_is_charged_before_the_data_is_read(wide):
    X, y = wide
    with pytest.raises(BudgetExceededError), dperm.budget(epsilon=1.0, delta=1e-4):
        _fit(X, y)


def test_bad_parameters_raise_specific_errors(wide):
    X, y = wide
    with pytest.raises(UnknownNameError, match="activation"):
        _fit(X, y, activation="swish")
    with pytest.raises(InvalidPrivacyParameter, match="hidden_layer_sizes"):
        _fit(X, y, hidden_layer_sizes=(0,))
    with pytest.raises(InvalidPrivacyParameter, match="n_components"):
        _fit(X, y, n_components=500)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        _fit(X, y, epsilon=-1)
    with pytest.raises(LabelError):
        _fit(X, y, classes=[0, 1])
    with pytest.warns(PrivacyLeakWarning, match="classes"):  # the calibration of the test above
        _fit(X[:, :10], y, classes=None, neighbouring="add-remove", dataset_size=1200)


def test_cli_fit_model_mlp(tmp_path):
    from dperm.cli.fit import run_fit

    out = run_fit(model="mlp", epsilon=1.0, epochs=2, seed=0, save=tmp_path / "m.dperm")
    assert out["model"] == "mlp" and out["mechanism"] == "dp-sgd-network"
    assert out["test_accuracy"] > 0.6 and out["nonprivate_test_accuracy"] is None
    assert dperm.load(out["saved_model"]).predict(np.zeros((1, 30))).shape == (1,)
    with pytest.raises(InvalidPrivacyParameter, match="tune"):
        run_fit(model="mlp", tune=True)


def test_default_epochs_follow_epsilon_and_the_run_is_the_calibrated_event(wide):
    """The default number of epochs is a function of ε; the training run (given z, not
    ε) must use the calibrated plan, or the fail-closed check refuses the release."""
    X, y = wide
    clf = _fit(X, y, epochs=None, batch_size=None, hidden_layer_sizes=(4,))
    assert clf.diagnostics_["steps"] == clf.dp_event_.events[1].count
    assert clf.diagnostics_["batch_size"] == 24.0  # n/50
