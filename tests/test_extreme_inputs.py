"""Issue #32: extreme values and void guarantees, refused with specific errors.

* one 1e308 in X gave a NaN row norm, an unclipped row and NaN coefficients silently;
  rows above :data:`~dperm._validation.MAX_ROW_NORM` are refused, rows below it are
  clipped exactly;
* ``data_norm=1e308`` raised a bare OverflowError: refused by ``check_data_norm``;
* δ ≥ 1/n was accepted and stated as a guarantee: refused everywhere — estimators,
  functions (n under replace-one, the public ``dataset_size`` under add/remove), the CLI;
* the smaller ones: the DPLasso docs name its real default, a pickled private search
  does not carry K.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from dperm import DPLogisticRegression
from dperm._validation import MAX_DATA_NORM, MAX_ROW_NORM, check_data_norm, check_delta_size
from dperm.algorithms import dp_gd, dp_sgd, objective_perturbation, output_perturbation
from dperm.backends.rows import safe_row_norms
from dperm.estimators import DPLasso, DPLinearRegression
from dperm.exceptions import ClippingWarning, InvalidDataError, InvalidPrivacyParameter
from dperm.losses import Logistic


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (300, 3)) / 2
    return X, np.where(X[:, 0] > 0, 1, -1)


def test_row_norms_near_the_float_maximum_are_exact():
    X = np.array([[1e308, 0.0], [1.5e308, 1.5e308], [3e-200, 4e-200], [0.0, 0.0]])
    norms = safe_row_norms(X[[2, 3]])
    np.testing.assert_allclose(norms, [5e-200, 0.0], rtol=1e-15)
    with pytest.raises(InvalidDataError, match="2 row"):
        safe_row_norms(X)  # 1e308 and 2.1e308 (not representable): both refused, no NaN
    big = np.array([[1e249, 1e249]])  # below the limit: clipped exactly
    np.testing.assert_allclose(safe_row_norms(big), [np.sqrt(2) * 1e249], rtol=1e-15)


@pytest.mark.parametrize("mechanism", ["auto", "objective", "output", "dp-sgd", "amp"])
def test_one_1e308_is_refused_not_nan(binary, mechanism):
    X, y = binary
    X = X.copy()
    X[5, 1] = 1e308
    with pytest.raises(InvalidDataError, match="norm above"):
        DPLogisticRegression(classes=[-1, 1], mechanism=mechanism, random_state=0).fit(X, y)


def test_a_huge_but_representable_row_is_clipped(binary):
    X, y = binary
    X = X.copy()
    X[5, 1] = 1e200
    with pytest.warns(ClippingWarning):
        est = DPLogisticRegression(classes=[-1, 1], random_state=0).fit(X, y)
    assert est.n_clipped_ == 1 and np.all(np.isfinite(est.coef_))


@pytest.mark.parametrize("data_norm", [1e308, 1e200, float("inf")])
def test_data_norm_beyond_the_float_range_is_refused(binary, data_norm):
    X, y = binary
    with pytest.raises(InvalidPrivacyParameter, match="data_norm"):
        DPLogisticRegression(classes=[-1, 1], data_norm=data_norm, random_state=0).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="data_norm"):
        objective_perturbation.fit(
            Logistic(), X, y, epsilon=1.0, delta=1e-6, data_norm=data_norm, alpha=0.1
        )
    assert check_data_norm(MAX_DATA_NORM) == MAX_DATA_NORM < MAX_ROW_NORM


def test_check_delta_size_closed_form():
    assert check_delta_size(0.0, 10) == 0.0
    assert check_delta_size(0.0999, 10) == 0.0999
    for bad in (0.1, 0.5):
        with pytest.raises(InvalidPrivacyParameter, match=r"1/n = 1/10.*1/n² = 0\.01"):
            check_delta_size(bad, 10)


@pytest.mark.parametrize("delta", [0.5, 1.0 / 300])
def test_estimators_refuse_delta_of_one_over_n_or_more(binary, delta):
    X, y = binary  # n = 300
    with pytest.raises(InvalidPrivacyParameter, match=r"1/n = 1/300"):
        DPLogisticRegression(classes=[-1, 1], delta=delta, random_state=0).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match=r"1/n = 1/300"):
        DPLinearRegression(delta=delta, random_state=0).fit(X, X[:, 0])
    # just below 1/n is accepted (a weak guarantee, but a guarantee)
    DPLogisticRegression(classes=[-1, 1], delta=0.99 / 300, random_state=0).fit(X, y)


def test_functions_refuse_delta_of_one_over_n_or_more(binary):
    X, y = binary
    kw = dict(epsilon=1.0, delta=0.5, data_norm=1.0, random_state=0)
    for fit in (objective_perturbation.fit, output_perturbation.fit):
        with pytest.raises(InvalidPrivacyParameter, match="1/n"):
            fit(Logistic(), X, y, alpha=0.1, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="1/n"):
        dp_gd.fit(Logistic(), X, y, steps=5, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="1/n"):
        dp_sgd.fit(Logistic(), X, y, neighbouring="replace-one", sampling_rate=0.1, steps=5, **kw)
    # add/remove: the public dataset_size decides (the number of rows is private)
    ar = dict(neighbouring="add-remove", sampling_rate=0.1, steps=5, epsilon=1.0)
    ar.update(data_norm=1.0, random_state=0)
    with pytest.raises(InvalidPrivacyParameter, match="1/dataset_size = 1/100"):
        dp_sgd.fit(Logistic(), X, y, delta=0.01, dataset_size=100, **ar)
    dp_sgd.fit(Logistic(), X, y, delta=1e-4, dataset_size=1000, **ar)


def test_cli_refuses_delta_of_one_over_n_or_more():
    from typer.testing import CliRunner

    from dperm.cli import app

    res = CliRunner().invoke(app, ["fit", "--delta", "0.5", "--no-reference", "--quiet"])
    err = res.output.strip()
    assert res.exit_code == 2
    assert err.startswith("dperm: error:") and "delta=0.5" in err and "1/n" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_lasso_docs_name_the_real_default():
    import dperm.estimators.regression as regression

    assert DPLasso().mechanism == "auto"
    assert 'DPLasso` — ``"auto"`` (default)' in regression.__doc__
    assert '"frank-wolfe"`` (default)' not in regression.__doc__
    assert '"auto" (default)' in DPLasso.__doc__


def test_a_pickled_search_does_not_carry_k():
    from dperm.model_selection import PrivateRandomSearch

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (1500, 3)) / 2
    y = (X[:, 0] > 0).astype(int)
    base = DPLogisticRegression(classes=[0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        s = PrivateRandomSearch(
            base, {"alpha": [1e-3, 1e-2]}, epsilon=1.0, delta=1e-6, random_state=1
        ).fit(X, y)
    assert s.search_diagnostics_["n_runs"] >= 1  # the data owner still has it in memory
    blob = pickle.dumps(s)
    assert s.search_diagnostics_["n_runs"] >= 1  # pickling leaves the object as it was
    copy = pickle.loads(blob)
    assert not hasattr(copy, "search_diagnostics_")
    assert b"search_diagnostics_" not in blob and b"noisy_scores" not in blob
    np.testing.assert_array_equal(copy.predict(X), s.predict(X))
