"""scikit-learn estimators: the estimator contract, label handling, the budget
split, clipping, the mechanism registry, Adult utility and bad input."""

from __future__ import annotations

import inspect
import math
import typing
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import SkipTestWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

import dperm
import dperm.estimators
from dperm import DPLinearRegression, DPLinearSVC, DPLogisticRegression
from dperm.accounting import epsilon_spent
from dperm.accounting.events import EpsilonDelta, PureEpsilon, SelfComposed
from dperm.algorithms.base import Result
from dperm.estimators import _mechanisms, available_mechanisms, register_mechanism
from dperm.estimators._alpha_rules import objective_alpha_rule, output_alpha_rule
from dperm.estimators._base import sklearn_expected_failed_checks
from dperm.exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
)

YES_NO = ["no", "yes"]  # the public label set of the `blobs` data


# ----------------------------------------------------------------------------- sklearn contract
# (the regressors' contract, DPLinearRegression's ERM path included, is checked in
# test_regression_estimators.py)
# A private estimator is randomized; the checks fix random_state (set_random_state)
# and a large ε keeps the accuracy checks meaningful.  The checks' toy data have rows
# of norm up to ≈ 141 (check_fit_idempotent, check_fit_check_is_fitted and
# check_n_features_in fit normal(loc=100) features in 2-D): the instances declare the
# public bound CHECKS_DATA_NORM, above every such row (with a smaller bound most rows
# would exceed it and the fit is refused, test_mostly_clipped_*).
# mechanism="auto" is the default; the checks run it and two named mechanisms.
CHECKS_DATA_NORM = 200.0


@parametrize_with_checks(
    [
        DPLogisticRegression(epsilon=1e6, data_norm=CHECKS_DATA_NORM, random_state=0),
        DPLinearSVC(epsilon=1e6, data_norm=CHECKS_DATA_NORM, random_state=0),
        DPLinearSVC(
            epsilon=1e6,
            mechanism="output",
            delta=0.0,
            alpha=1e-3,
            data_norm=CHECKS_DATA_NORM,
            random_state=0,
        ),
    ],
    expected_failed_checks=sklearn_expected_failed_checks,
)
@pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
# The checks fit on arbitrary label sets without classes= (that is the scikit-learn
# contract: clone + fit on any y), so the classifiers read classes_ off y and warn
# that the label set is not protected (PrivacyLeakWarning).  The warning itself is
# tested in test_label_set_read_from_data_warns; here only the contract is checked.
@pytest.mark.filterwarnings("ignore::dperm.exceptions.PrivacyLeakWarning")
def test_sklearn_estimator_contract(estimator, check):
    check(estimator)


assert SkipTestWarning  # imported for the filter above


ALL_ESTIMATORS = [getattr(dperm.estimators, name) for name in sorted(dperm.estimators.__all__)]
ALL_ESTIMATORS = [c for c in ALL_ESTIMATORS if isinstance(c, type)]


@pytest.mark.parametrize("cls", ALL_ESTIMATORS, ids=lambda c: c.__name__)
def test_help_documents_every_parameter_with_its_default(cls):
    """The composed docstring (dperm.estimators._params) lists each parameter of the
    explicit signature, in order, with the signature's default, then the attributes."""
    doc = inspect.getdoc(cls)
    params, _, rest = doc.partition("\nParameters\n----------\n")[2].partition("\nAttributes\n")
    assert rest.startswith("----------\n") and ("coef_" in rest or "coefs_" in rest)
    headers = [line for line in params.splitlines() if line and not line.startswith(" ")]
    documented = [name for h in headers for name in h.partition(" : ")[0].split(", ")]
    signature = inspect.signature(cls).parameters
    assert documented == list(signature)
    for h in headers:
        first = h.partition(" : ")[0].split(", ")[0]
        default = signature[first].default
        shown = f'"{default}"' if isinstance(default, str) else repr(default)
        assert h.endswith(f"default={shown}"), h
    # one set of parameters stored by __init__, exactly as given
    est = cls()
    assert est.get_params() == {k: p.default for k, p in signature.items()}


_PUBLIC_METHODS = ("__init__", "fit", "predict", "predict_proba", "decision_function")


@pytest.mark.parametrize("cls", ALL_ESTIMATORS, ids=lambda c: c.__name__)
def test_public_signatures_are_annotated(cls):
    """Issue #21: every parameter and the return of ``__init__``, ``fit`` and the
    prediction methods carry a type annotation that resolves (the package ships
    py.typed), and the annotations leave scikit-learn's parameters untouched."""
    for name in _PUBLIC_METHODS:
        method = getattr(cls, name, None)
        if method is None:
            continue
        hints = typing.get_type_hints(method)
        params = [p for p in inspect.signature(method).parameters if p != "self"]
        missing = [p for p in [*params, "return"] if p not in hints]
        assert not missing, f"{cls.__name__}.{name}: no annotation for {missing}"
    assert typing.get_type_hints(cls.fit)["return"] is typing.Self
    assert (Path(dperm.__file__).parent / "py.typed").is_file()


# ----------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 3)) * 0.3
    X *= 0.99 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)  # ‖x‖ < data_norm
    y = np.where(X[:, 0] - 0.5 * X[:, 1] > 0, "yes", "no")
    return X, y


def test_binary_fit_attributes_and_label_mapping(blobs):
    X, y = blobs
    n = X.shape[0]
    clf = DPLogisticRegression(
        epsilon=2.0, classes=YES_NO, mechanism="objective", random_state=0
    ).fit(X, y)
    assert clf.coef_.shape == (1, 3) and clf.intercept_.shape == (1,)
    assert list(clf.classes_) == ["no", "yes"]
    assert clf.n_features_in_ == 3 and clf.n_clipped_ == 0
    assert clf.epsilon_ == 2.0 and clf.delta_ == pytest.approx(1.0 / n**2)
    assert clf.dp_event_ == EpsilonDelta(2.0, 1.0 / n**2)
    assert set(clf.predict(X)) <= {"no", "yes"}
    assert clf.score(X, y) > 0.85
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # predict_proba is the sigmoid of the decision function, positive class = classes_[1]
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-clf.decision_function(X))))
    # effective bound of the augmented rows: √(R² + s²)
    assert clf.data_norm_ == pytest.approx(math.sqrt(1 + 0.5**2))
    assert clf.alpha_ == pytest.approx(objective_alpha_rule(n, 4, 2.0, clf.data_norm_))


def test_pure_epsilon_fit(blobs):
    X, y = blobs
    for mech in ("objective", "output"):
        clf = DPLinearSVC(
            epsilon=1.0, delta=0.0, mechanism=mech, classes=YES_NO, random_state=0
        ).fit(X, y)
        assert clf.dp_event_ == PureEpsilon(1.0) and clf.delta_ == 0.0
    out = DPLogisticRegression(epsilon=1.0, mechanism="output", classes=YES_NO, random_state=0).fit(
        X, y
    )
    assert out.alpha_ == pytest.approx(output_alpha_rule(600, 4, 1.0, out.data_norm_))


def test_multiclass_one_vs_rest_splits_the_budget():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(900, 2)) * 0.4
    X *= 0.99 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.digitize(X[:, 0], [-0.2, 0.2])  # 3 classes
    clf = DPLogisticRegression(
        epsilon=3.0,
        delta=3e-6,
        classes=[0, 1, 2],
        mechanism="objective",
        multi_class="ovr",
        random_state=0,
    )
    clf = clf.fit(X, y)
    assert clf.coef_.shape == (3, 2) and clf.intercept_.shape == (3,)
    assert clf.dp_event_ == SelfComposed(EpsilonDelta(1.0, 1e-6), 3)
    assert clf.epsilon_ == 3.0 and clf.delta_ == pytest.approx(3e-6)
    # the accountant certifies the requested total by basic composition
    assert epsilon_spent(clf.dp_event_, 3e-6, accountant="basic") <= 3.0 + 1e-12
    proba = clf.predict_proba(X)
    assert proba.shape == (900, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.score(X, y) > 0.6


def test_huge_row_gives_the_model_of_the_clipped_row(blobs):
    X, y = blobs
    big, clipped = X.copy(), X.copy()
    big[3] *= 1e6
    clipped[3] = X[3] / np.linalg.norm(X[3])  # data_norm = 1
    for mech in ("objective", "output"):
        kw = {"epsilon": 1.0, "mechanism": mech, "classes": YES_NO, "random_state": 5}
        with pytest.warns(ClippingWarning):
            a = DPLogisticRegression(**kw).fit(big, y)
        b = DPLogisticRegression(**kw).fit(clipped, y)
        assert a.n_clipped_ == 1 and b.n_clipped_ == 0
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-8, atol=1e-10)


def test_sparse_input_equals_dense(blobs):
    X, y = blobs
    a = DPLogisticRegression(epsilon=1.0, classes=YES_NO, random_state=2).fit(X, y)
    b = DPLogisticRegression(epsilon=1.0, classes=YES_NO, random_state=2)
    b = b.fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(a.predict(X), b.predict(sp.csr_matrix(X)))


def test_same_seed_same_model_and_large_epsilon_matches_nonprivate(blobs):
    from dperm.utility import nonprivate_fit

    X, y = blobs
    a = DPLogisticRegression(epsilon=1.0, classes=YES_NO, random_state=7).fit(X, y)
    b = DPLogisticRegression(epsilon=1.0, classes=YES_NO, random_state=7).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    big = DPLogisticRegression(epsilon=1e8, alpha=0.01, classes=YES_NO, random_state=7)
    big = big.fit(X, y)
    ref = nonprivate_fit(big, X, y)
    np.testing.assert_allclose(big.coef_, ref.coef_, atol=1e-3)


def test_svm_and_regression_basics(blobs):
    X, y = blobs
    svc = DPLinearSVC(epsilon=5.0, h=0.3, classes=YES_NO, random_state=0).fit(X, y)
    assert svc.score(X, y) > 0.85 and svc.loss_.h == 0.3
    yr = np.clip(X @ np.array([1.0, -1.0, 0.5]), -1, 1)
    reg = DPLinearRegression(
        mechanism="objective", epsilon=50.0, alpha=1e-3, constraint_radius=3.0, random_state=0
    ).fit(X, yr)
    assert reg.coef_.shape == (3,) and isinstance(reg.intercept_, float)
    assert reg.score(X, yr) > 0.8
    assert not hasattr(reg, "decision_function")


# ----------------------------------------------------------------------------- registry
def test_unknown_mechanism_lists_the_registered_ones(blobs):
    X, y = blobs
    with pytest.raises(UnknownNameError, match="objective") as info:
        DPLogisticRegression(mechanism="nope").fit(X, y)
    assert "output" in str(info.value)
    assert {"objective", "output"} <= set(available_mechanisms())


def test_registered_adapter_receives_the_documented_inputs(blobs, monkeypatch):
    X, y = blobs
    seen = []

    def adapter(est, loss, Xd, target, epsilon, delta, rng):
        seen.append((Xd.shape, set(np.unique(target)), epsilon, delta, est.data_norm_))
        return Result(theta=np.zeros(Xd.shape[1]), event=PureEpsilon(epsilon))

    monkeypatch.setitem(_mechanisms._REGISTRY, "test-zero", adapter)
    clf = DPLogisticRegression(mechanism="test-zero", epsilon=0.5, classes=YES_NO).fit(X, y)
    assert seen == [((600, 4), {-1.0, 1.0}, 0.5, 1.0 / 600**2, clf.data_norm_)]
    assert clf.dp_event_ == PureEpsilon(0.5)
    with pytest.raises(UnknownNameError, match="already registered"):
        register_mechanism("objective", adapter)


# ----------------------------------------------------------------------------- Adult
@pytest.mark.slow
@pytest.mark.realdata
def test_adult_objective_perturbation_accuracy(shared_data):
    from dperm import datasets
    from dperm.utility import nonprivate_fit

    ds = datasets.load("adult", shared_data)
    n = ds.n_train
    accs = []
    for seed in range(5):
        clf = DPLogisticRegression(
            epsilon=1.0, classes=[-1.0, 1.0], mechanism="objective", random_state=seed
        )
        clf = clf.fit(ds.X_train, ds.y_train)
        assert clf.dp_event_ == EpsilonDelta(1.0, 1.0 / n**2)
        accs.append(clf.score(ds.X_test, ds.y_test))
    nonpriv = nonprivate_fit(clf, ds.X_train, ds.y_train).score(ds.X_test, ds.y_test)
    print(f"Adult ε=1 δ=1/n²: private {np.round(accs, 4)} mean {np.mean(accs):.4f}; "
          f"non-private {nonpriv:.4f}")  # fmt: skip
    assert np.mean(accs) >= 0.82
    assert nonpriv >= np.mean(accs) - 0.01


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "exc"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameter),
        ({"epsilon": -2.0}, InvalidPrivacyParameter),
        ({"epsilon": float("nan")}, InvalidPrivacyParameter),
        ({"epsilon": float("inf")}, InvalidPrivacyParameter),
        ({"epsilon": "1"}, InvalidPrivacyParameter),
        ({"delta": 1.0}, InvalidPrivacyParameter),
        ({"delta": -0.5}, InvalidPrivacyParameter),
        ({"delta": float("nan")}, InvalidPrivacyParameter),
        ({"delta": 0.0, "noise": "gaussian"}, InvalidPrivacyParameter),
        ({"data_norm": 0.0}, InvalidPrivacyParameter),
        ({"data_norm": -1.0}, InvalidPrivacyParameter),
        ({"alpha": -1.0}, InvalidPrivacyParameter),
        ({"alpha": "big"}, InvalidPrivacyParameter),
        ({"mechanism": "laplace-magic"}, UnknownNameError),
        ({"penalty": "l3"}, UnknownNameError),
        ({"intercept_scaling": 0.0}, InvalidPrivacyParameter),
        ({"constraint": "l2"}, InvalidPrivacyParameter),  # no radius
        ({"mechanism": "output", "penalty": "l1"}, InvalidPrivacyParameter),
        ({"random_state": -3}, InvalidPrivacyParameter),
    ],
)
def test_bad_parameters(blobs, params, exc):
    X, y = blobs
    with pytest.raises(exc):
        DPLogisticRegression(**params).fit(X, y)


def test_bad_data(blobs):
    X, y = blobs
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InvalidDataError, match="NaN"):
        DPLogisticRegression().fit(Xn, y)
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(InvalidDataError):
        DPLogisticRegression().fit(Xi, y)
    with pytest.raises(InvalidDataError):
        DPLinearRegression(mechanism="objective", constraint_radius=1.0).fit(
            X, np.r_[np.inf, np.zeros(599)]
        )
    with pytest.raises(InvalidDataError):
        DPLogisticRegression().fit(X[:-1], y)
    with pytest.raises(InvalidDataError):
        DPLogisticRegression().fit(np.empty((0, 3)), [])
    with pytest.raises(InvalidDataError):
        DPLogisticRegression().fit(X, None)
    with pytest.raises(LabelError, match="1 class"):
        DPLogisticRegression().fit(X, np.ones(600))
    with pytest.raises(LabelError, match="Unknown label type"):
        DPLogisticRegression().fit(X, np.linspace(0, 1, 600))
    with pytest.raises(LabelError, match="label_bound"):
        DPLinearRegression(mechanism="objective", constraint_radius=1.0, label_bound=0.5).fit(
            X, np.linspace(-1, 1, 600)
        )
    clf = DPLogisticRegression(epsilon=1.0, classes=YES_NO, random_state=0).fit(X, y)
    with pytest.raises(InvalidDataError, match="features"):
        clf.predict(X[:, :2])


# ----------------------------------------------------------------------------- label set (#10 §3)
def test_label_set_read_from_data_warns(blobs):
    """classes=None reads classes_ off the private y: a PrivacyLeakWarning naming
    the fix, for two classes and for k > 2; a public label set fits silently."""
    X, y = blobs
    for cls in (DPLogisticRegression, DPLinearSVC):
        with pytest.warns(PrivacyLeakWarning, match=r"classes=") as rec:
            est = cls(epsilon=1.0, random_state=0).fit(X, y)
        assert len(rec) == 1 and rec[0].filename == __file__  # points at the caller
        assert list(est.classes_) == YES_NO
        cls(epsilon=1.0, classes=YES_NO, random_state=0).fit(X, y)  # no warning (errors)
    y3 = np.digitize(X[:, 0], [-0.1, 0.1])
    with pytest.warns(PrivacyLeakWarning, match=r"classes="):
        DPLogisticRegression(epsilon=3.0, random_state=0).fit(X, y3)
    # nothing is released, so nothing is warned, when the fit fails
    with pytest.raises(InvalidPrivacyParameter):
        DPLogisticRegression(alpha=-1.0).fit(X, y)
    # a regressor has no label set
    DPLinearRegression(mechanism="objective", constraint_radius=1.0, random_state=0).fit(
        X, np.clip(X[:, 0], -1, 1)
    )


def test_label_set_leak_is_a_perfect_distinguisher_without_classes(blobs):
    """The leak the warning is about: neighbours D, D′ (one record's label replaced
    by a rare third label) give coef_ of different shapes without classes=, and of
    the same shape with the public label set."""
    X, y = blobs
    y = np.where(y == "yes", 1, 0)
    y2 = y.copy()
    y2[0] = 2  # replace-one neighbour: one record gets a rare label
    with pytest.warns(PrivacyLeakWarning):
        a = DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    with pytest.warns(PrivacyLeakWarning):
        b = DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y2)
    assert a.coef_.shape != b.coef_.shape
    pa = DPLogisticRegression(epsilon=1.0, classes=[0, 1, 2], random_state=0).fit(X, y)
    pb = DPLogisticRegression(epsilon=1.0, classes=[0, 1, 2], random_state=0).fit(X, y2)
    assert pa.coef_.shape == pb.coef_.shape == (3, 3)
    assert pa.dp_event_ == pb.dp_event_


# ----------------------------------------------------------------------------- relation (#10 §2)
@pytest.mark.parametrize("mechanism", sorted(available_mechanisms()))
def test_every_mechanism_states_replace_one(blobs, mechanism):
    """neighbouring_ is "replace-one" for every registered mechanism (through every
    estimator that accepts it) and agrees with the relation its event carries."""
    from dperm.exceptions import DpermError

    X, y = blobs
    X, y = X[:300], y[:300]
    if mechanism == "tukey":  # its test needs many rows per coefficient (else refused)
        X = np.random.default_rng(1).uniform(-0.5, 0.5, size=(20_000, 3))
        y = np.where(X[:, 0] > 0, "yes", "no")
    yr = np.clip(X[:, 0], -1, 1)
    kw = {"epsilon": 2.0, "mechanism": mechanism, "random_state": 0}
    if mechanism == "frank-wolfe":
        kw.update(constraint="l1", constraint_radius=2.0)
    fitted = []
    for make, target in (
        (lambda: DPLogisticRegression(classes=YES_NO, **kw), y),
        (lambda: DPLinearRegression(**kw), yr),  # the default public radius if one is needed
    ):
        try:
            fitted.append(make().fit(X, target))
        except DpermError:  # a mechanism for the other kind of model only
            continue
    assert fitted, f"no estimator accepts mechanism {mechanism!r}"
    classification = {"objective", "output", "amp", "amp-nt", "bolt-on", "frank-wolfe"}
    classification |= {"dp-gd", "dp-sgd", "dp-sgd-single"}
    if mechanism in classification:  # these must work for the classifier too
        assert isinstance(fitted[0], DPLogisticRegression)
    for est in fitted:
        assert est.neighbouring_ == "replace-one"
        assert getattr(est.dp_event_, "neighbouring", "replace-one") == est.neighbouring_


# ----------------------------------------------------------------------------- fail closed (#10 §4)
@pytest.mark.parametrize("mechanism", ["objective", "output"])
def test_convergence_error_carries_no_data_dependent_numbers(blobs, monkeypatch, mechanism):
    """Objective/output perturbation release nothing when the solver stops short of
    tol; raising is itself data-dependent, so the message must not add the residual
    reached, the iteration count or the solver path (only public tol, max_iter)."""
    from dperm.algorithms import objective_perturbation
    from dperm.exceptions import ConvergenceError
    from dperm.solvers import SolverResult

    def stalled(loss, X, y, **kw):
        return SolverResult(np.zeros(X.shape[1]), 0.123456, 0.0987654, False, 4321, "path-xyz")

    monkeypatch.setattr(objective_perturbation, "minimize", stalled)
    X, y = blobs
    est = DPLogisticRegression(
        mechanism=mechanism, tol=1e-9, max_iter=777, classes=YES_NO, random_state=0
    )
    with pytest.raises(ConvergenceError) as err:
        est.fit(X, y)
    msg = str(err.value)
    for secret in ("0.0988", "0.0987654", "4321", "path-xyz", "0.123"):
        assert secret not in msg, msg
    assert "tol=1e-09" in msg and "max_iter=777" in msg
    assert not hasattr(est, "coef_")  # nothing released


def test_an_adapter_returning_an_add_remove_event_is_refused(blobs, monkeypatch):
    """Mutation of the #10 §2 bug class: a mechanism accounted with an add/remove
    event under an estimator (whose guarantee is replace-one) releases nothing."""
    X, y = blobs

    def add_remove(est, loss, Xd, target, epsilon, delta, rng):
        return Result(
            theta=np.zeros(Xd.shape[1]), event=PureEpsilon(epsilon, neighbouring="add-remove")
        )

    monkeypatch.setitem(_mechanisms._REGISTRY, "test-add-remove", add_remove)
    est = DPLogisticRegression(mechanism="test-add-remove", classes=YES_NO)
    with pytest.raises(InvalidPrivacyParameter, match="replace-one"):
        est.fit(X, y)
    assert not hasattr(est, "coef_")
