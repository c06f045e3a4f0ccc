"""Every estimator parameter is checked up front, whatever mechanism runs (issue #36, item 7).

Each estimator declares what its parameters accept in one table,
``_parameter_constraints`` (:mod:`dperm._parameters`); ``fit`` checks it before it
reads the data and before any budget is reserved.  At f2918d4 a parameter was checked
only by the mechanism that read it: under ``mechanism="auto"`` → dp-sgd,
``max_iter=-5``, ``tol=nan``, ``l1_ratio=1.5``, ``noise="bogus"``, ``verbose="loud"``
were accepted.  Here every parameter of every estimator gets bad values; each must
raise the specific dperm exception with a message naming the parameter and the value.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import dperm
from dperm._parameters import validate_params
from dperm.constraints import get_constraint
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError
from dperm.model_selection import PrivateRandomSearch
from dperm.norms import L1Norm
from dperm.preprocessing import DPPCA, DPStandardScaler

try:
    import torch  # noqa: F401

    _NO_TORCH = False
except ImportError:
    _NO_TORCH = True

NAN, INF = math.nan, math.inf
BAD, NAME = InvalidPrivacyParameter, UnknownNameError


class _Opaque:
    """A value of no accepted type."""

    def __repr__(self) -> str:
        return "<opaque>"


OPAQUE = _Opaque()
_POSITIVE = [(0, BAD), (-1.0, BAD), (NAN, BAD), (INF, BAD), (True, BAD), ("1", BAD)]
_OPTIONAL_POSITIVE = [(0.0, BAD), (-2, BAD), (NAN, BAD), ("auto", BAD), (OPAQUE, BAD)]
_FLAG = [("yes", BAD), (1, BAD), (None, BAD)]

#: bad values of each parameter name, with the exception they must raise
BAD_VALUES: dict[str, list] = {
    "epsilon": _POSITIVE,
    "delta": [(-0.1, BAD), (1.0, BAD), (NAN, BAD), ("1e-5", BAD), (True, BAD)],
    "mechanism": [("bogus", NAME), ("", NAME), (3, BAD), (None, BAD)],
    "data_norm": [*_POSITIVE, (1e151, BAD)],
    "alpha": [(-1e-3, BAD), (NAN, BAD), (INF, BAD), ("bogus", BAD), (None, BAD)],
    "fit_intercept": _FLAG,
    "intercept_scaling": _POSITIVE,
    "noise": [("bogus", NAME), (0, BAD), (None, BAD)],
    "penalty": [("bogus", NAME), ("L2", NAME), (1, BAD), (None, BAD)],
    "l1_ratio": [(1.5, BAD), (-0.1, BAD), (NAN, BAD), ("0.5", BAD), (None, BAD)],
    "constraint": [("bogus", NAME), (1.0, BAD), (OPAQUE, BAD)],
    "constraint_radius": _OPTIONAL_POSITIVE,
    "tol": [(NAN, BAD), (0.0, BAD), (-1e-3, BAD), (INF, BAD), ("small", BAD)],
    "max_iter": [(-5, BAD), (0, BAD), (2.5, BAD), (NAN, BAD), (True, BAD), (None, BAD)],
    "epochs": _OPTIONAL_POSITIVE,
    "batch_size": [(0, BAD), (2.5, BAD), (True, BAD), (-5, BAD), ("64", BAD)],
    "learning_rate": _OPTIONAL_POSITIVE,
    "clipping_norm": _OPTIONAL_POSITIVE,
    "noise_multiplier": _OPTIONAL_POSITIVE,
    "accountant": [("bogus", NAME), (1, BAD), (OPAQUE, BAD)],
    "warm_start": _FLAG,
    "multi_class": [("bogus", NAME), (2, BAD), (None, BAD)],
    "feature_scaling": [("bogus", NAME), ("", NAME), (2, BAD), (None, BAD)],
    "classes": [("ab", BAD), (3, BAD), (OPAQUE, BAD)],
    "verbose": [("loud", BAD), (-1, BAD), (1.5, BAD), (None, BAD)],
    "random_state": [(-1, BAD), (1.5, BAD), ("seed", BAD), (np.random.RandomState(0), BAD)],
    "label_bound": [(0, BAD), (-1.0, BAD), (NAN, BAD), (INF, BAD), ("1", BAD)],
    "h": _POSITIVE,
    "threshold": _POSITIVE,
    "quantile": [(0.0, BAD), (1.0, BAD), (1.5, BAD), (NAN, BAD), ("median", BAD)],
    "label_scale": _OPTIONAL_POSITIVE,
    # DPStandardScaler, DPPCA
    "bounds": [("ab", BAD), (3, BAD), (OPAQUE, BAD)],
    "n_components": [(0, BAD), (2.5, BAD), (True, BAD), ("60", BAD)],
    "mode": [("bogus", NAME), (1, BAD)],
    "neighbouring": [("bogus", BAD), (1, BAD), (None, BAD)],
    # DPMLPClassifier
    "hidden_layer_sizes": [("big", BAD), (0, BAD), (True, BAD), (2.5, BAD)],
    "activation": [("bogus", NAME), (1, BAD)],
    "pca_noise_ratio": _POSITIVE,
    "quadratic_features": [(-1, BAD), (2.5, BAD), (True, BAD), ("many", BAD)],
    "input_scale": [("bogus", BAD), (0, BAD), (NAN, BAD)],
    "momentum": [(1.0, BAD), (-0.1, BAD), (NAN, BAD), (None, BAD)],
    "averaging": [("bogus", NAME), (0, BAD)],
    "weight_decay": [(-1.0, BAD), (NAN, BAD), (None, BAD)],
    "tempered_sigmoid": [("abc", BAD), (2.0, BAD)],
    "dataset_size": [(0, BAD), (2.5, BAD), (True, BAD)],
    "device": [("gpu7", BAD), (OPAQUE, BAD)],
    # PrivateRandomSearch
    "estimator": [(OPAQUE, BAD), ("logistic", BAD)],
    "param_distributions": [([("alpha", [1.0])], BAD), ("alpha", BAD)],
    "repetitions": [("bogus", NAME), (3, BAD)],
    "mean_runs": _POSITIVE,
    "eta": [(-1.0, BAD), (True, BAD), (NAN, BAD), ("0", BAD)],
    "run_delta": [("bogus", BAD), (-0.1, BAD), (1.0, BAD)],
    "validation_fraction": [(0.0, BAD), (1.0, BAD), (NAN, BAD)],
    "scoring": [("accuracy", BAD), (1, BAD)],
    "score_epsilon": _OPTIONAL_POSITIVE,
    "run_event": [("gaussian", BAD)],
}

ESTIMATORS = [
    dperm.DPLogisticRegression,
    dperm.DPLinearSVC,
    dperm.DPLinearRegression,
    dperm.DPLasso,
    dperm.DPElasticNet,
    dperm.DPQuantileRegressor,
    dperm.DPHuberRegressor,
    DPStandardScaler,
    DPPCA,
    dperm.DPMLPClassifier,
    PrivateRandomSearch,
]
#: the arguments an estimator cannot be built without
REQUIRED = {
    PrivateRandomSearch: dict(
        estimator=dperm.DPLogisticRegression(classes=[0, 1]), param_distributions={"alpha": [0.1]}
    )
}


def _make(cls, **params):
    return cls(**{**REQUIRED.get(cls, {}), **params})


def _cases(classes):
    for cls in classes:
        # the MLP's device is checked by torch (dperm[torch]): skipped without it
        marks = [pytest.mark.skipif(_NO_TORCH, reason="needs torch")] * (
            cls is dperm.DPMLPClassifier
        )
        for name in _make(cls).get_params(deep=False):
            for value, error in BAD_VALUES[name]:
                # no memory address in the id: pytest-xdist's workers must collect the same ids
                cid = f"{cls.__name__}-{name}-{re.sub(' at 0x[0-9a-fA-F]+', '', repr(value))}"
                yield pytest.param(cls, name, value, error, id=cid, marks=marks)


@pytest.mark.parametrize(("cls", "name", "value", "error"), list(_cases(ESTIMATORS)))
def test_a_bad_parameter_is_refused_first_naming_it(cls, name, value, error):
    est = _make(cls, **{name: value})
    # X and y are None: an error about the data would mean the data came first
    with pytest.raises(error) as info:
        est.fit(None, None)
    assert type(info.value) is error  # the specific class, not a subclass of it
    message = str(info.value)
    assert f"{name} must be" in message and f"got {value!r}" in message, message
    assert message.startswith(f"{cls.__name__}: ")


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_parameter_has_a_constraint(cls):
    """One table per estimator, covering exactly its parameters; the defaults pass."""
    if cls is dperm.DPMLPClassifier and _NO_TORCH:
        pytest.skip("the MLP's device is checked by torch")
    params = _make(cls).get_params(deep=False)
    assert set(cls._parameter_constraints) == set(params)
    validate_params(_make(cls))


@pytest.mark.parametrize(
    ("cls", "params"),
    [
        (dperm.DPLogisticRegression, dict(epochs=1.5, batch_size=100.0, verbose=1)),
        (dperm.DPLogisticRegression, dict(accountant="RDP", delta=0.0, alpha=0)),
        (dperm.DPLogisticRegression, dict(random_state=np.random.default_rng(0))),
        (dperm.DPLogisticRegression, dict(random_state=np.random.SeedSequence(1))),
        (dperm.DPLogisticRegression, dict(classes=range(3), multi_class="ovr")),
        (dperm.DPLogisticRegression, dict(penalty=L1Norm(3), l1_ratio=np.float32(0.5))),
        (dperm.DPLinearSVC, dict(constraint=get_constraint("l2", 1.0), max_iter=np.int64(5))),
        (dperm.DPLinearSVC, dict(constraint="box", constraint_radius=2, h=np.float64(0.1))),
        (dperm.DPLinearRegression, dict(mechanism="adassp", fit_intercept=np.bool_(False))),
        (dperm.DPQuantileRegressor, dict(label_bound=None, quantile=0.9, epochs=10)),
        (DPStandardScaler, dict(delta=1e-6, bounds=[[0, 1], [2, 3]])),
        (DPPCA, dict(neighbouring="add_remove", mode="sphere", noise_multiplier=2)),
        (PrivateRandomSearch, dict(run_delta="auto", eta=-0.5, scoring=lambda y, p: y == p)),
        (PrivateRandomSearch, dict(repetitions="geometric", mean_runs=5, delta=None)),
    ],
)
def test_valid_values_pass_the_table(cls, params):
    """What some mechanism accepts is not refused up front: fractional epochs (DP-SGD),
    integral floats for counts, ``verbose=1``, a Generator or SeedSequence seed, any
    case of an accountant's name (``get_accountant``), objects for penalty/constraint,
    a relation's other spellings, "auto" where a number is also taken."""
    validate_params(_make(cls, **params))


def test_a_mechanism_registered_later_is_accepted():
    from dperm.estimators import register_mechanism
    from dperm.estimators._mechanisms import _REGISTRY, get_mechanism

    est = dperm.DPLogisticRegression(mechanism="objective-again")
    with pytest.raises(UnknownNameError, match="objective-again"):
        validate_params(est)
    register_mechanism("objective-again", get_mechanism("objective"))
    try:
        validate_params(est)
    finally:
        del _REGISTRY["objective-again"]


@pytest.mark.parametrize(
    "params",
    [
        dict(max_iter=-5),
        dict(tol=NAN),
        dict(l1_ratio=1.5),
        dict(noise="bogus"),
        dict(verbose="loud"),
        dict(learning_rate=-1.0),
    ],
    ids=repr,
)
def test_checked_before_the_budget_is_touched(params):
    """Measured at f2918d4: accepted under mechanism="auto" (→ dp-sgd).  Now refused
    before anything is reserved: inside a budget too small for the fit, the parameter
    error comes first, and the ledger's history (reservations included) is unchanged."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)) / 3
    y = (X[:, 0] > 0).astype(int)
    with dperm.budget(0.5, 1e-3) as ledger:
        before = len(ledger.records)
        with pytest.raises(InvalidPrivacyParameter if "noise" not in params else UnknownNameError):
            dperm.DPLogisticRegression(classes=[0, 1], **params).fit(X, y)
        assert len(ledger.records) == before
    assert dperm.DPLogisticRegression(classes=[0, 1]).mechanism == "auto"
