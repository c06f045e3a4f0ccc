"""Ledger: budget enforcement and JSON round trip."""

from __future__ import annotations

import json
import math

import pytest

from dperm.accounting import (
    EpsilonDelta,
    Gaussian,
    Laplace,
    Ledger,
    PoissonSampled,
    PureEpsilon,
    RdpAccountant,
    SelfComposed,
    calibrate_gaussian,
    epsilon_spent,
    get_accountant,
)
from dperm.exceptions import (
    BudgetExceededError,
    InvalidPrivacyParameter,
    UnknownNameError,
    UnsupportedEventError,
)

#: add/remove-one: the relation of the classical Poisson-subsampled analysis
AR = "add-remove"

SGD = SelfComposed(PoissonSampled(0.01, Gaussian(1.0, neighbouring=AR)), 1000)


def test_spend_records_and_reports_rdp_total():
    ledger = Ledger(epsilon=3.0, delta=1e-5, accountant="rdp", neighbouring=AR)
    eps = ledger.spend(SGD, label="dp-sgd on adult")
    assert eps == pytest.approx(epsilon_spent(SGD, 1e-5))
    assert ledger.neighbouring == AR and ledger.certified_by == "rdp"
    assert not ledger.entries[0].converted and ledger.entries[0].neighbouring == AR
    assert ledger.spent() == (eps, 1e-5)
    assert ledger.remaining_epsilon() == pytest.approx(3.0 - eps)
    assert ledger.events == (SGD,)
    assert ledger.entries[0].label == "dp-sgd on adult"


def test_overspend_is_refused_and_nothing_recorded():
    ledger = Ledger(epsilon=1.0, delta=1e-5, accountant="rdp", neighbouring=AR)
    ledger.spend(PureEpsilon(0.4, neighbouring=AR))
    before = ledger.spent()
    assert not ledger.can_spend(SGD)
    with pytest.raises(BudgetExceededError, match=r"epsilon=\d"):
        ledger.spend(SGD)
    assert ledger.spent() == before
    assert len(ledger.events) == 1
    assert ledger.can_spend(PureEpsilon(0.1, neighbouring=AR))


def test_exactly_calibrated_spend_fits():
    sigma = calibrate_gaussian(2.0, 1e-5, steps=500, sampling_rate=0.02)
    ledger = Ledger(2.0, 1e-5, accountant="rdp", neighbouring=AR)
    ledger.spend(SelfComposed(PoissonSampled(0.02, Gaussian(sigma, neighbouring=AR)), 500))
    assert ledger.spent()[0] <= 2.0


def test_unsupported_event_is_refused_without_recording():
    ledger = Ledger(5.0, 1e-5, accountant="rdp")
    with pytest.raises(UnsupportedEventError):
        ledger.spend(EpsilonDelta(0.5, 1e-7))
    assert ledger.events == ()
    basic = Ledger(5.0, 1e-5, accountant="basic")
    basic.spend(EpsilonDelta(0.5, 1e-7))
    with pytest.raises(UnsupportedEventError):
        basic.spend(Gaussian(1.0))
    assert len(basic.events) == 1


def test_pure_dp_budget_with_basic_composition():
    ledger = Ledger(1.0, 0.0, accountant="basic")
    for _ in range(4):
        ledger.spend(Laplace(4.0))  # 0.25 each
    assert ledger.spent()[0] == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError):
        ledger.spend(PureEpsilon(1e-9))


@pytest.mark.parametrize("accountant", ["basic", "auto"])
def test_float_rounding_of_a_split_budget_is_not_an_overspend(accountant):
    # Ten spends of 0.1 are exactly the budget; composed in floating point they can total
    # 1.0000000000000002 (the basic accountant's running sum does), which must not be refused.
    ledger = Ledger(1.0, 0.0, accountant=accountant)
    for _ in range(10):
        ledger.spend(PureEpsilon(0.1))
    assert ledger.spent()[0] == pytest.approx(1.0, rel=1e-12)
    # ...but anything beyond rounding is still refused, and not recorded.
    with pytest.raises(BudgetExceededError):
        ledger.spend(PureEpsilon(1e-9))
    assert len(ledger.entries) == 10


def test_json_round_trip(tmp_path):
    acc = RdpAccountant(
        orders=[1.5, 2.0, 4.0, 8.0, 16.0, 32.0], conversion="classic", neighbouring=AR
    )
    ledger = Ledger(10.0, 1e-6, accountant=acc)
    ledger.spend(SGD, label="first")
    ledger.spend(Gaussian(5.0, neighbouring=AR))
    path = tmp_path / "ledger.json"
    ledger.save(path)
    data = json.loads(path.read_text())
    assert data["accountant"] == {
        "name": "rdp",
        "config": {
            "conversion": "classic",
            "orders": [1.5, 2.0, 4.0, 8.0, 16.0, 32.0],
            "neighbouring": AR,
        },
    }
    assert data["neighbouring"] == AR
    loaded = Ledger.load(path)
    assert loaded.events == ledger.events
    assert [e.label for e in loaded.entries] == ["first", None]
    assert loaded.spent() == ledger.spent()
    assert (loaded.epsilon, loaded.delta) == (10.0, 1e-6)
    # the loaded ledger keeps enforcing the same budget
    with pytest.raises(BudgetExceededError):
        loaded.spend(Gaussian(0.1, neighbouring=AR))


def test_load_rejects_garbage(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidPrivacyParameter, match="JSON"):
        Ledger.load(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InvalidPrivacyParameter, match="Ledger"):
        Ledger.load(bad)


def test_bad_budget_and_accountant():
    for eps in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
            Ledger(eps, 1e-5)
    for delta in (1.0, -1e-9, math.nan):
        with pytest.raises(InvalidPrivacyParameter, match="delta"):
            Ledger(1.0, delta)
    with pytest.raises(UnknownNameError):
        Ledger(1.0, 1e-5, accountant="zcdp")
    with pytest.raises(InvalidPrivacyParameter, match="empty"):
        Ledger(1.0, 1e-5, accountant=get_accountant("rdp").compose(Gaussian(3.0)))


# ------------------------------------------------------------------ active budgets (#13)
def _xy(n=300, seed=0):
    import numpy as np

    X = np.random.default_rng(seed).uniform(-0.5, 0.5, size=(n, 2))
    return X, np.where(X[:, 0] > 0, 1, -1)


def test_budget_counts_every_fit_of_a_grid_search_and_refuses_overspending():
    """The issue's GridSearchCV spent ε = 110 in 27 fits with no warning.  Inside
    dperm.budget every fit spends before it runs, n_jobs=2 included (joblib runs them in
    this process), and the fit that would overspend raises, naming the budget."""
    from sklearn.model_selection import GridSearchCV

    import dperm

    X, y = _xy()
    est = dperm.DPLogisticRegression(epsilon=1.0, classes=[-1, 1])
    grid = GridSearchCV(est, {"alpha": [0.01, 0.1, 1.0]}, cv=3, n_jobs=2, error_score="raise")
    with pytest.raises(BudgetExceededError, match=r"budget Ledger\(epsilon=3"):
        with dperm.budget(epsilon=3.0, delta=1e-3) as ledger:
            grid.fit(X, y)
    assert len(ledger.entries) == 3  # three fits of ε = 1 fit in ε = 3; the 4th was refused
    assert all(e.label == "DPLogisticRegression" for e in ledger.entries)
    assert ledger.spent()[0] <= 3.0
    # a large enough budget holds the whole search: 9 fits + the refit, all counted
    with dperm.budget(epsilon=20.0, delta=1e-3) as ledger:
        grid.fit(X, y)
    assert len(ledger.entries) == 10
    # outside a budget nothing is charged and nothing is held by the estimators
    grid.fit(X, y)
    assert len(ledger.entries) == 10
    assert "ledger" not in str(est.get_params()).lower()


def test_budget_sees_the_private_scaler_in_a_pipeline_and_nests_all_or_nothing():
    import numpy as np
    from sklearn.pipeline import make_pipeline

    import dperm
    from dperm.preprocessing import DPStandardScaler

    X, y = _xy()
    pipe = make_pipeline(
        DPStandardScaler(epsilon=0.5, delta=1e-6, bounds=[(-0.5, 0.5)] * 2, random_state=0),
        dperm.DPLogisticRegression(epsilon=1.0, classes=[-1, 1], data_norm=3.0, random_state=0),
    )
    with dperm.budget(epsilon=10.0, delta=1e-3) as outer:
        with Ledger(1.2, 1e-3).active() as inner:
            with pytest.raises(BudgetExceededError, match=r"epsilon=1\.2"):
                pipe.fit(X, y)  # the scaler (ε = 0.5) fits, the estimator (ε = 1) not
        assert [e.label for e in inner.entries] == ["DPStandardScaler"]
        # all or nothing: the refused estimator was recorded in neither ledger
        assert [e.label for e in outer.entries] == ["DPStandardScaler"]
        pipe.fit(X, y)
    assert [e.label for e in outer.entries][-2:] == ["DPStandardScaler", "DPLogisticRegression"]
    assert dperm.accounting.ledger.active_ledgers() == ()
    assert np.isfinite(pipe[-1].coef_).all()


def test_a_fit_in_a_worker_process_of_an_active_budget_is_refused(monkeypatch):
    """A worker process inherits the DPERM_ACTIVE_BUDGET mark but not the context: its
    fits cannot be counted, so they are refused (never silently not counted)."""
    import dperm
    from dperm.accounting import active as L

    monkeypatch.setenv(L.ENV_MARK, "1")  # "the budget is active in process 1"
    X, y = _xy()
    with pytest.raises(BudgetExceededError, match="worker process"):
        dperm.DPLogisticRegression(epsilon=1.0, classes=[-1, 1]).fit(X, y)
    monkeypatch.delenv(L.ENV_MARK)
    dperm.DPLogisticRegression(epsilon=1.0, classes=[-1, 1]).fit(X, y)  # no budget: fine


def test_budget_with_delta_zero_explains_why_a_gaussian_fit_does_not_fit():
    import dperm

    X, y = _xy()
    with pytest.raises(BudgetExceededError, match="delta=0 holds only pure-epsilon"):
        with dperm.budget(epsilon=100.0, delta=0.0):
            dperm.DPLogisticRegression(epsilon=1.0, classes=[-1, 1]).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        with dperm.budget(epsilon=-1.0, delta=1e-5):
            pass
