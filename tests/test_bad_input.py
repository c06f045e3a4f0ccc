"""Bad input across the whole public API.

Every public entry point that exists — algorithm ``fit`` functions (discovered
from :mod:`dperm.algorithms`), estimators × every registered mechanism,
accountants, events, the ledger, dataset loaders, noise primitives, the
auditor and the CLI — is driven with NaN / ±inf / negative / zero / string
privacy parameters, NaN or inf in X or y, wrong shapes, empty data, one row,
one class, labels outside the loss's range, rows far above the norm bound,
sparse input and a huge n.  Every case either works correctly or raises a
specific :class:`dperm.exceptions.DpermError` subclass — never a bare
numpy/scipy/Python error, never a silently non-private result:

* a working call must return finite parameters and an event that an accountant
  certifies at (at most) the requested ε — not :class:`NonPrivate`;
* rows above ``data_norm`` are clipped and counted, and the output equals the
  output on the pre-clipped rows under the same seed;
* sparse CSR input gives the dense output under the same seed (or a
  specific refusal).

Modules that are not present are skipped cleanly; new algorithm modules and new
estimator mechanisms are picked up automatically.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import pkgutil
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import dperm
import dperm.algorithms
from dperm.accounting.events import DpEvent, NonPrivate
from dperm.exceptions import (
    BudgetExceededError,
    ClippingWarning,
    DataFileNotFoundError,
    DpermError,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
    UnsupportedEventError,
)
from dperm.losses import Logistic
from dperm.norms import L1Norm

NAN, INF = float("nan"), float("inf")
BAD_EPSILONS = [NAN, INF, -INF, -1.0, 0.0, "1.0", None, 1 + 2j, True]
BAD_DELTAS = [NAN, INF, -0.1, 1.0, 1.5, "1e-5", 2j]
BAD_NORMS = [NAN, INF, 0.0, -1.0, "1"]
BAD_SEEDS = ["seed", -1, 1.5]


# ============================================================================ helpers
def _data(n=30, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= 0.9 / np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    rng.shuffle(y)
    return X, y


def _certified_epsilon(event: DpEvent, delta: float) -> float:
    """The smallest ε at ``delta`` that any accountant certifies for ``event``
    (each accountant's answer is a valid upper bound, so their minimum is too)."""
    from dperm.accounting import ACCOUNTANT_NAMES, get_accountant

    assert isinstance(event, DpEvent), event
    assert not isinstance(event, NonPrivate), "a private API returned a NonPrivate event"
    best = math.inf
    for name in ACCOUNTANT_NAMES:
        acc = get_accountant(name, neighbouring=event.neighbouring)
        if acc.supports(event):
            acc.compose(event)
            best = min(best, acc.get_epsilon(delta))
    assert math.isfinite(best), f"no accountant certifies a finite ε for {event!r}"
    return best


#: relative slack for the accountants' own numerical pessimism (PLD discretization)
_EPS_SLACK = 1e-2


def _call(fn, *args, **kwargs):
    """Run ``fn``; return its value, or the DpermError it raised.  Any other
    exception fails the test (a bare numpy/scipy/Python traceback)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippingWarning)
            return fn(*args, **kwargs)
    except DpermError as exc:
        return exc
    except Exception as exc:  # the bug this module hunts
        pytest.fail(
            f"{getattr(fn, '__qualname__', fn)} raised a non-dperm {type(exc).__name__}: {exc}"
        )


def _must_raise(exc_types, fn, *args, **kwargs):
    out = _call(fn, *args, **kwargs)
    assert isinstance(out, DpermError), f"expected a dperm error, the call returned {out!r}"
    assert isinstance(out, exc_types), f"expected {exc_types}, got {type(out).__name__}: {out}"
    return out


# ============================================================================ algorithms
#: algorithm entry point → (extra kwargs of a valid call, δ of the valid call)
_SPECS: dict[str, tuple[dict, float]] = {
    "objective_perturbation.fit": ({"alpha": 0.1}, 0.0),
    "output_perturbation.fit": ({"alpha": 0.1}, 0.0),
    "dp_gd.fit": ({"steps": 5}, 1e-5),
    "dp_sgd.fit": ({"steps": 5, "sampling_rate": 0.5, "neighbouring": "replace-one"}, 1e-5),
    "dp_sgd.fit_single_sample": ({"steps": 5}, 1e-5),
    "amp.fit": ({}, 1e-5),
    "amp.fit_nt": ({}, 1e-5),
    "bolt_on.fit": ({}, 0.0),
    "frank_wolfe.fit": ({"radius": 1.0}, 1e-5),
    "dual_frank_wolfe.fit": ({"norm": L1Norm(3), "alpha": 0.1, "lam": 0.1, "n_steps": 3}, 0.0),
    "structured_output_perturbation.fit": ({"norm": L1Norm(3), "alpha": 0.1, "lam": 0.1}, 0.0),
    # d = 3 needs the ridge-regularized target (exact in any d); Λ = 1 keeps it cheap
    "exponential_sampling.fit": ({"alpha": 1.0, "radius": 1.0}, 0.0),
    "exponential_erm.fit": (
        {"candidates": np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.5]])},
        0.0,
    ),
}


def _entry_points() -> list[str]:
    names = []
    for info in pkgutil.iter_modules(dperm.algorithms.__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        mod = importlib.import_module(f"dperm.algorithms.{info.name}")
        for fn in ("fit", "fit_single_sample", "fit_nt"):
            f = getattr(mod, fn, None)
            # the ERM contract fit(loss, X, y, ...); other shapes (PATE's
            # fit(X_private, y_private, X_public, ...)) have bad-input tests of their own
            if callable(f) and next(iter(inspect.signature(f).parameters), None) == "loss":
                names.append(f"{info.name}.{fn}")
    return sorted(set(names) | {k for k in _SPECS if _module_exists(k)})


def _module_exists(key: str) -> bool:
    mod = key.split(".")[0]
    return importlib.util.find_spec(f"dperm.algorithms.{mod}") is not None


def _resolve(key: str):
    mod_name, fn_name = key.split(".")
    mod = importlib.import_module(f"dperm.algorithms.{mod_name}")
    return getattr(mod, fn_name)


class _Algo:
    """A valid call of one algorithm entry point, with overridable pieces."""

    def __init__(self, key):
        self.key = key
        self.fn = _resolve(key)
        self.extra, self.delta = _SPECS.get(key, ({}, 1e-5))
        self.X, self.y = _data()
        self.kw = {"epsilon": 1.0, "delta": self.delta, "data_norm": 1.0, **self.extra}

    def __call__(self, X=None, y=None, seed=0, **over):
        kw = {**self.kw, "random_state": seed, **over}
        X = self.X if X is None else X
        y = self.y if y is None else y
        return self.fn(Logistic(), X, y, **kw)


@pytest.fixture(params=_entry_points(), scope="module")
def algo(request):
    a = _Algo(request.param)
    base = _call(a)
    if isinstance(base, TypeError | DpermError) and request.param not in _SPECS:
        pytest.skip(f"no valid-call spec for new entry point {request.param}: {base}")
    assert not isinstance(base, DpermError), f"the valid call of {a.key} failed: {base}"
    assert np.all(np.isfinite(base.theta))
    # never silently non-private: the event certifies the requested ε
    eps = _certified_epsilon(base.event, max(a.delta, 1e-5))
    assert eps <= 1.0 + _EPS_SLACK, f"{a.key} spent ε = {eps} > 1"
    a.base = base
    return a


def test_algorithm_bad_epsilon(algo):
    for eps in BAD_EPSILONS:
        _must_raise(InvalidPrivacyParameter, algo, epsilon=eps)


def test_algorithm_bad_delta(algo):
    if "delta" not in algo.fn.__code__.co_varnames:
        pytest.skip("no delta parameter")
    for delta in BAD_DELTAS:
        _must_raise(InvalidPrivacyParameter, algo, delta=delta)


def test_algorithm_bad_data_norm_and_seed(algo):
    for norm in BAD_NORMS:
        _must_raise(InvalidPrivacyParameter, algo, data_norm=norm)
    for seed in BAD_SEEDS:
        _must_raise(InvalidPrivacyParameter, algo, seed=seed)


def test_algorithm_bad_X(algo):
    X, y = algo.X, algo.y
    for bad in (np.nan, np.inf, -np.inf):
        Xb = X.copy()
        Xb[3, 1] = bad
        _must_raise(InvalidDataError, algo, X=Xb)
    _must_raise(InvalidDataError, algo, X=X[:, 0])  # 1-D
    _must_raise(InvalidDataError, algo, X=X[None])  # 3-D
    _must_raise(InvalidDataError, algo, X=X[:0], y=y[:0])  # empty
    _must_raise(InvalidDataError, algo, X=X[:, :0])  # no features
    _must_raise(InvalidDataError, algo, X=np.full(X.shape, "a"))  # strings
    _must_raise(InvalidDataError, algo, X=sp.csr_matrix(np.where(X > 0, np.nan, X)))


def test_algorithm_bad_y(algo):
    y = algo.y
    yb = y.copy()
    yb[0] = np.nan
    _must_raise(InvalidDataError, algo, y=yb)
    _must_raise(InvalidDataError, algo, y=y[:-1])  # length mismatch
    _must_raise(InvalidDataError, algo, y=np.c_[y, y])  # 2-D
    _must_raise(LabelError, algo, y=(y > 0).astype(float))  # {0, 1} for a ±1 loss
    _must_raise(LabelError, algo, y=np.where(y > 0, 2.0, -1.0))
    _must_raise(InvalidDataError, algo, y=np.where(y > 0, "yes", "no"))


def test_algorithm_degenerate_data_works_or_refuses(algo):
    X, y = algo.X, algo.y
    for Xs, ys in ((X[:1], y[:1]), (X, np.ones_like(y)), (np.zeros_like(X), y)):
        out = _call(algo, X=Xs, y=ys)
        if not isinstance(out, DpermError):
            assert np.all(np.isfinite(out.theta))
            assert not isinstance(out.event, NonPrivate)


def test_algorithm_clips_rows_above_the_bound_and_counts_them(algo):
    X = algo.X.copy()
    X[[2, 7]] *= 1e6  # far above data_norm = 1
    norms = np.linalg.norm(X, axis=1)
    X_clip = X * np.minimum(1.0, 1.0 / norms)[:, None]
    with pytest.warns(ClippingWarning):
        big = algo(X=X, seed=5)
    ref = _call(algo, X=X_clip, seed=5)
    assert big.diagnostics["n_clipped"] == 2
    np.testing.assert_allclose(big.theta, ref.theta, rtol=1e-6, atol=1e-8)


def test_algorithm_sparse_equals_dense(algo):
    X = algo.X
    out = _call(algo, X=sp.csr_matrix(X), seed=3)
    if isinstance(out, DpermError):
        assert isinstance(out, InvalidDataError) and "sparse" in str(out).lower()
        return
    dense = algo(X=X, seed=3)
    np.testing.assert_allclose(out.theta, dense.theta, rtol=1e-6, atol=1e-8)


# ============================================================================ estimators
def _estimators():
    try:
        from dperm.estimators import (
            DPLinearRegression,
            DPLinearSVC,
            DPLogisticRegression,
            available_mechanisms,
        )
    except ImportError:  # pragma: no cover - estimators not present yet
        return []
    return [
        (cls, mech)
        for cls in (DPLogisticRegression, DPLinearSVC, DPLinearRegression)
        for mech in available_mechanisms()
    ]


@pytest.fixture(params=_estimators(), ids=lambda p: f"{p[0].__name__}-{p[1]}", scope="module")
def estimator(request):
    cls, mech = request.param
    X, y = _data(40, 3, seed=1)
    if mech == "tukey":  # its test passes only with many rows (else ⊥ and a warning)
        X, y = _data(10_000, 3, seed=1)
    if cls.__name__ == "DPLinearRegression":
        y = np.clip(X @ np.array([0.5, -0.3, 0.2]), -1, 1)
    kw = {"epsilon": 1.0, "mechanism": mech, "data_norm": 1.0, "random_state": 0}
    if cls.__name__ != "DPLinearRegression":
        kw["classes"] = [-1.0, 1.0]  # the public label set of _data
    if mech == "frank-wolfe":
        kw.update(constraint="l1", constraint_radius=2.0)
    elif cls.__name__ == "DPLinearRegression":
        kw["constraint_radius"] = 2.0  # the squared loss is Lipschitz only on a ball
    base = _call(lambda: cls(**kw).fit(X, y))
    if isinstance(base, DpermError):
        pytest.skip(f"{cls.__name__} does not support mechanism {mech!r}: {base}")
    assert np.all(np.isfinite(base.coef_))
    eps = _certified_epsilon(base.dp_event_, max(base.delta_, 1e-5))
    assert eps <= 1.0 + _EPS_SLACK, f"the estimator spent ε = {eps} > 1"
    return cls, kw, X, y


def test_estimator_bad_parameters(estimator):
    cls, kw, X, y = estimator
    for eps in BAD_EPSILONS:
        _must_raise(InvalidPrivacyParameter, lambda e=eps: cls(**{**kw, "epsilon": e}).fit(X, y))
    for delta in BAD_DELTAS:
        _must_raise(InvalidPrivacyParameter, lambda d=delta: cls(**{**kw, "delta": d}).fit(X, y))
    for norm in BAD_NORMS:
        _must_raise(InvalidPrivacyParameter, lambda v=norm: cls(**{**kw, "data_norm": v}).fit(X, y))
    for seed in BAD_SEEDS:
        _must_raise(
            InvalidPrivacyParameter, lambda s=seed: cls(**{**kw, "random_state": s}).fit(X, y)
        )
    _must_raise(UnknownNameError, lambda: cls(**{**kw, "mechanism": "magic"}).fit(X, y))


def test_estimator_bad_data(estimator):
    cls, kw, X, y = estimator
    Xn = X.copy()
    Xn[0, 0] = np.nan
    _must_raise(InvalidDataError, lambda: cls(**kw).fit(Xn, y))
    Xi = X.copy()
    Xi[0, 0] = np.inf
    _must_raise(InvalidDataError, lambda: cls(**kw).fit(Xi, y))
    _must_raise(InvalidDataError, lambda: cls(**kw).fit(X, y[:-1]))
    _must_raise(InvalidDataError, lambda: cls(**kw).fit(X[:0], y[:0]))
    _must_raise(InvalidDataError, lambda: cls(**kw).fit(X[:, 0], y))
    _must_raise(InvalidDataError, lambda: cls(**kw).fit(X, None))
    yn = y.astype(float).copy()
    yn[0] = np.nan
    _must_raise(InvalidDataError, lambda: cls(**kw).fit(X, yn))


def test_estimator_degenerate_labels(estimator):
    cls, kw, X, y = estimator
    if cls.__name__ == "DPLinearRegression":
        # labels beyond the public label bound: refused, or clipped to it
        out = _call(lambda: cls(**kw).fit(X, 10 * np.sign(y) + 0.1))
        if not isinstance(out, DpermError):
            assert np.all(np.isfinite(out.coef_))
        return
    # label sets read off y (no classes=): that is what this test is about
    kw = {k: v for k, v in kw.items() if k != "classes"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        _must_raise(LabelError, lambda: cls(**kw).fit(X, np.ones(len(y))))  # a single class
        # string labels are mapped like scikit-learn's
        out = _call(lambda: cls(**kw).fit(X, np.where(y > 0, "spam", "ham")))
    if not isinstance(out, DpermError):
        assert set(out.classes_) == {"spam", "ham"}


def test_estimator_clips_and_matches_sparse(estimator):
    cls, kw, X, y = estimator
    Xb = X.copy()
    Xb[[1, 4]] *= 1e5
    X_clip = Xb * np.minimum(1.0, 1.0 / np.linalg.norm(Xb, axis=1))[:, None]
    with pytest.warns(ClippingWarning):
        big = cls(**kw).fit(Xb, y)
    assert big.n_clipped_ == 2
    ref = cls(**kw).fit(X_clip, y)
    np.testing.assert_allclose(big.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    out = _call(lambda: cls(**kw).fit(sp.csr_matrix(X), y))
    if isinstance(out, DpermError):
        assert isinstance(out, InvalidDataError)
    else:
        dense = cls(**kw).fit(X, y)
        np.testing.assert_allclose(out.coef_, dense.coef_, rtol=1e-6, atol=1e-8)


# ============================================================================ huge n
def test_huge_n_noise_does_not_underflow():
    """n = 10⁷ rows (d = 1): DP-SGD's noise scale stays positive and the noise is
    really there (two seeds give different models)."""
    dp_sgd = pytest.importorskip("dperm.algorithms.dp_sgd")
    n = 10**7
    X = np.full((n, 1), 0.5)
    y = np.ones(n)
    y[::2] = -1.0
    kw = {"epsilon": 1.0, "delta": 1e-9, "data_norm": 1.0, "steps": 3, "sampling_rate": 1e-5}
    kw |= {"neighbouring": "add-remove", "dataset_size": n}
    a = dp_sgd.fit(Logistic(), X, y, random_state=1, **kw)
    b = dp_sgd.fit(Logistic(), X, y, random_state=2, **kw)
    assert a.diagnostics["noise_std"] > 0 and a.diagnostics["noise_multiplier"] > 0
    assert a.theta[0] != b.theta[0]
    assert _certified_epsilon(a.event, 1e-9) <= 1.0 + _EPS_SLACK


def test_huge_n_output_perturbation_noise_scale_is_positive():
    op = pytest.importorskip("dperm.algorithms.output_perturbation")
    n = 10**6
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.7, 0.7, size=(n, 2))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    res = op.fit(
        Logistic(), X, y, epsilon=1.0, delta=0.0, data_norm=1.0, alpha=1e-3, random_state=0
    )
    assert res.diagnostics["sensitivity"] == pytest.approx(2.0 / (n * 1e-3))
    assert res.diagnostics["noise_scale"] > 0
    res2 = op.fit(
        Logistic(), X, y, epsilon=1.0, delta=0.0, data_norm=1.0, alpha=1e-3, random_state=1
    )
    assert np.any(res.theta != res2.theta)


# ============================================================================ accounting
def _accountant_names():
    try:
        from dperm.accounting import ACCOUNTANT_NAMES
    except ImportError:  # pragma: no cover
        return []
    return list(ACCOUNTANT_NAMES)


@pytest.mark.parametrize("name", _accountant_names())
def test_accountant_bad_input(name):
    from dperm.accounting import EpsilonDelta, Gaussian, PureEpsilon, get_accountant

    acc = get_accountant(name)
    for bad in ("x", None, 3.0, Gaussian):
        _must_raise((UnsupportedEventError, InvalidPrivacyParameter), acc.compose, bad)
    event = next(
        e for e in (Gaussian(2.0), EpsilonDelta(0.5, 1e-6), PureEpsilon(0.5)) if acc.supports(e)
    )
    for count in (-1, 1.5, "2", None):
        _must_raise(InvalidPrivacyParameter, acc.compose, event, count)
    acc.compose(event, 3)
    for delta in BAD_DELTAS:
        _must_raise(InvalidPrivacyParameter, acc.get_epsilon, delta)
    for eps in (NAN, -1.0, "1"):
        _must_raise(InvalidPrivacyParameter, acc.get_delta, eps)
    # what is reported is a valid guarantee: never negative, never NaN
    e = acc.get_epsilon(1e-5)
    assert e >= 0 and not math.isnan(e)
    dlt = acc.get_delta(1.0)
    assert 0.0 <= dlt <= 1.0


@pytest.mark.parametrize("name", _accountant_names())
def test_accountant_reports_infinity_for_non_private_events(name):
    from dperm.accounting import get_accountant

    acc = get_accountant(name)
    if not acc.supports(NonPrivate()):
        _must_raise(UnsupportedEventError, acc.compose, NonPrivate())
        return
    acc.compose(NonPrivate())
    assert acc.get_epsilon(1e-5) == math.inf


def test_get_accountant_and_epsilon_spent_bad_input():
    from dperm.accounting import Gaussian, epsilon_spent, get_accountant

    for bad in ("nope", None, 3):
        _must_raise(UnknownNameError, get_accountant, bad)
    _must_raise(InvalidPrivacyParameter, epsilon_spent, Gaussian(1.0), NAN)
    _must_raise(InvalidPrivacyParameter, epsilon_spent, Gaussian(1.0), 1.0)
    _must_raise(UnknownNameError, epsilon_spent, Gaussian(1.0), 1e-5, accountant="magic")


@pytest.mark.parametrize(
    "make",
    [
        lambda E: E.Gaussian(NAN),
        lambda E: E.Gaussian(-1.0),
        lambda E: E.Gaussian(INF),
        lambda E: E.Gaussian("1"),
        lambda E: E.Laplace(-0.5),
        lambda E: E.PureEpsilon(NAN),
        lambda E: E.PureEpsilon(-1.0),
        lambda E: E.EpsilonDelta(1.0, 1.5),
        lambda E: E.EpsilonDelta(NAN, 0.0),
        lambda E: E.PoissonSampled(1.5, E.Gaussian(1.0)),
        lambda E: E.PoissonSampled(0.5, "event"),
        lambda E: E.SelfComposed(E.Gaussian(1.0), -1),
        lambda E: E.SelfComposed(E.Gaussian(1.0), 2.5),
        lambda E: E.SampledWithoutReplacement(5, 3, E.Gaussian(1.0)),
        lambda E: E.Composed((E.Gaussian(1.0), "x")),
        lambda E: E.event_from_dict({"kind": "Nope"}),
        lambda E: E.event_from_json('{"kind": "Gaussian"}'),
    ],
)
def test_events_refuse_invalid_values(make):
    import dperm.accounting.events as E

    _must_raise(InvalidPrivacyParameter, make, E)


def test_ledger_bad_input(tmp_path):
    from dperm.accounting import Gaussian, Ledger, PureEpsilon

    for eps in BAD_EPSILONS:
        _must_raise(InvalidPrivacyParameter, Ledger, eps, 1e-5)
    for delta in BAD_DELTAS:
        _must_raise(InvalidPrivacyParameter, Ledger, 1.0, delta)
    _must_raise(UnknownNameError, Ledger, 1.0, 1e-5, accountant="magic")
    led = Ledger(1.0, 1e-5)
    _must_raise(BudgetExceededError, led.spend, PureEpsilon(5.0))
    assert led.spent()[0] == 0.0  # nothing recorded on refusal
    _must_raise((UnsupportedEventError, InvalidPrivacyParameter), led.spend, "event")
    led.spend(Gaussian(10.0), "ok")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _must_raise(InvalidPrivacyParameter, Ledger.load, bad)
    bad.write_text(json.dumps({"format": "something else"}))
    _must_raise(InvalidPrivacyParameter, Ledger.load, bad)


def test_ledger_load_missing_file_raises_a_dperm_error(tmp_path):
    from dperm.accounting import Ledger

    out = _call(Ledger.load, tmp_path / "missing.json")
    assert isinstance(out, DpermError), "a missing ledger file must raise a dperm error"


# ============================================================================ datasets
def test_dataset_loaders_bad_input(tmp_path):
    ds = pytest.importorskip("dperm.datasets")
    _must_raise(UnknownNameError, ds.load, "no-such-dataset")
    for name in ds.available_datasets():
        out = _call(ds.load, name, data_home=tmp_path / "empty")
        if isinstance(out, DpermError):
            assert isinstance(out, DataFileNotFoundError | UnknownNameError | InvalidDataError)
    _must_raise(DataFileNotFoundError, ds.load_csv, tmp_path / "missing.csv", target="y")
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,y\n0.1,0.2,1\n0.3,nan,0\n0.5,0.6,1\n")
    _must_raise(DpermError, ds.load_csv, csv, target="nope", bounds={"a": (0, 1), "b": (0, 1)})
    out = _call(ds.load_csv, csv, target="y", bounds={"a": (0, 1), "b": (0, 1)})
    if not isinstance(out, DpermError):
        assert np.all(
            np.isfinite(out.X_train.toarray() if sp.issparse(out.X_train) else out.X_train)
        )
    svm = tmp_path / "d.svm"
    svm.write_text("1 1:0.5 2:abc\n")
    _must_raise(DpermError, ds.load_svmlight, svm)
    _must_raise(DataFileNotFoundError, ds.load_svmlight, tmp_path / "missing.svm")


# ============================================================================ mechanisms
def test_noise_primitives_bad_input():
    m = pytest.importorskip("dperm.mechanisms")
    v = np.array([1.0, 2.0])
    for eps in BAD_EPSILONS:
        _must_raise(
            InvalidPrivacyParameter, m.laplace_mechanism, v, sensitivity=1.0, epsilon=eps, rng=0
        )
        _must_raise(
            InvalidPrivacyParameter, m.gamma_norm_mechanism, v, sensitivity=1.0, epsilon=eps, rng=0
        )
    for s in BAD_NORMS:
        _must_raise(
            InvalidPrivacyParameter,
            m.gaussian_mechanism,
            v,
            sensitivity=s,
            noise_multiplier=1.0,
            rng=0,
        )
    for z in (NAN, -1.0, INF, "1"):
        _must_raise(
            InvalidPrivacyParameter,
            m.gaussian_mechanism,
            v,
            sensitivity=1.0,
            noise_multiplier=z,
            rng=0,
        )
    for bad_v in ([np.nan, 1.0], [np.inf], ["a", "b"]):
        _must_raise(
            InvalidDataError,
            m.gaussian_mechanism,
            bad_v,
            sensitivity=1.0,
            noise_multiplier=1.0,
            rng=0,
        )
        _must_raise(
            InvalidDataError, m.laplace_mechanism, bad_v, sensitivity=1.0, epsilon=1.0, rng=0
        )
    _must_raise(InvalidPrivacyParameter, m.gaussian_noise, 3, 1.0, "seed")
    _must_raise(InvalidDataError, m.gaussian_noise, (-1,), 1.0, 0)
    _must_raise(
        DpermError, m.exponential_mechanism, [0.0, np.nan], epsilon=1.0, sensitivity=1.0, rng=0
    )
    _must_raise(DpermError, m.exponential_mechanism, [], epsilon=1.0, sensitivity=1.0, rng=0)
    for eps in BAD_EPSILONS:
        _must_raise(
            InvalidPrivacyParameter,
            m.snapping_mechanism,
            v,
            sensitivity=1.0,
            epsilon=eps,
            bound=100.0,
            rng=0,
        )
        _must_raise(
            InvalidPrivacyParameter,
            m.discrete_gaussian_mechanism,
            v,
            sensitivity=1.0,
            epsilon=eps,
            delta=1e-5,
            rng=0,
        )
    for delta in [*BAD_DELTAS, 0.0]:
        _must_raise(
            InvalidPrivacyParameter,
            m.discrete_gaussian_mechanism,
            v,
            sensitivity=1.0,
            epsilon=1.0,
            delta=delta,
            rng=0,
        )


def test_calibration_bad_input():
    acc = pytest.importorskip("dperm.accounting")
    for eps in BAD_EPSILONS:
        _must_raise(InvalidPrivacyParameter, acc.calibrate_gaussian, eps, 1e-5)
    for delta in [*BAD_DELTAS, 0.0]:
        _must_raise(InvalidPrivacyParameter, acc.calibrate_gaussian, 1.0, delta)
    _must_raise(InvalidPrivacyParameter, acc.calibrate_gaussian, 1.0, 1e-5, steps=0)
    _must_raise(InvalidPrivacyParameter, acc.calibrate_gaussian, 1.0, 1e-5, sampling_rate=1.5)


def test_audit_bad_input():
    from dperm.audit import audit

    for eps in BAD_EPSILONS:
        _must_raise(InvalidPrivacyParameter, audit, "laplace", epsilon=eps, runs=10, n_jobs=1)
    _must_raise(UnknownNameError, audit, "nope", epsilon=1.0, runs=10)


# ============================================================================ CLI
def _cli_cases():
    cases = [
        ["fit", "--epsilon", "nan"],
        ["fit", "--epsilon", "-1"],
        ["fit", "--epsilon", "0"],
        ["fit", "--epsilon", "inf"],
        ["fit", "--epsilon", "abc"],
        ["fit", "--delta", "2"],
        ["fit", "--mechanism", "magic"],
        ["fit", "--dataset", "no-such-dataset"],
        ["fit", "--csv", "/nonexistent/file.csv", "--target", "y"],
        ["account", "--noise-multiplier", "-1"],
        ["account", "--noise-multiplier", "nan"],
        ["account", "--noise-multiplier", "1", "--sampling-rate", "2"],
        ["account", "--noise-multiplier", "1", "--delta", "nan"],
        ["account", "--noise-multiplier", "1", "--accountant", "magic"],
        ["calibrate", "--epsilon", "0"],
        ["calibrate", "--epsilon", "nan"],
        ["calibrate", "--epsilon", "1", "--delta", "0"],
        ["audit", "--mechanism", "objective", "--epsilon", "nan"],
        ["audit", "--mechanism", "no-such", "--epsilon", "1"],
        ["audit", "--mechanism", "laplace", "--epsilon", "1", "--runs", "0"],
    ]
    return cases


@pytest.mark.parametrize("argv", _cli_cases(), ids=" ".join)
def test_cli_bad_input_exits_2_with_one_line(argv, capsys):
    cli = pytest.importorskip("dperm.cli")
    names = {c.name for c in cli.app.registered_commands}
    if argv[0] not in names:
        pytest.skip(f"dperm {argv[0]} is not wired into the CLI")
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert "Traceback" not in err
    assert err.startswith("dperm: error:") or "Error" in err or "Invalid" in err, err


def test_public_exports_resolve():
    for name in dperm.__all__:
        out = _call(getattr, dperm, name)
        assert not isinstance(out, DpermError), name


@pytest.mark.parametrize("mechanism", ["objective", "output", "amp", "dp-sgd", "bolt-on"])
def test_tiny_epsilon_raises_a_dperm_error_or_fits_finitely(mechanism):
    """ε = 1e-300 (issue #13): the noise overflows float64 or the perturbed objective
    cannot be minimized — a specific dperm error, never a bare numpy/scipy ValueError
    and never an inf/NaN model."""
    from dperm import DPLogisticRegression

    X, y = _data()
    est = DPLogisticRegression(epsilon=1e-300, mechanism=mechanism, classes=[-1.0, 1.0])
    out = _call(est.fit, X, y)
    if not isinstance(out, DpermError):
        assert np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.intercept_))


def test_gamma_and_gaussian_noise_overflow_is_refused():
    from dperm.mechanisms import gamma_norm_noise, gaussian_noise

    _must_raise(InvalidPrivacyParameter, gamma_norm_noise, 3, 1e-308, 1e10, 0)
    _must_raise(InvalidPrivacyParameter, gaussian_noise, (1000,), 1.7e308, 0)  # some |z| > 1.06
