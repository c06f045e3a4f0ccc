"""mechanism="auto" (dperm.estimators._auto), the default δ inside a budget, the budget
errors, the search charged once, --tune around the auto choice, mostly-clipped data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import GridSearchCV

import dperm
from dperm import (
    DPElasticNet,
    DPHuberRegressor,
    DPLasso,
    DPLinearRegression,
    DPLinearSVC,
    DPLogisticRegression,
    DPQuantileRegressor,
)
from dperm.accounting import EpsilonDelta, Ledger
from dperm.accounting.ledger import default_delta
from dperm.estimators._auto import (
    BINARY_AMP_ABOVE,
    BINARY_CLIP_FRACTION,
    BINARY_STEP_CLIP,
    CLIPPING_LEARNING_RATE,
    CONSISTENT_ABOVE,
    HUBER_FRACTION,
    MULTI_AMP_ABOVE,
    MULTI_CLIP_FRACTION,
    MULTI_CLIP_QUANTILE,
    MULTI_STEP_CLIP,
    QUANTILE_SCALE,
    AutoChoice,
    auto_choice,
    binary_dp_sgd_schedule,
    dp_sgd_schedule,
    multi_dp_sgd_schedule,
)
from dperm.exceptions import BudgetExceededError, InvalidDataError, UnknownNameError
from dperm.model_selection import AutoTuningSearch, PrivateRandomSearch, tuning_search

BINARY = dict(n_samples=30_000, n_features=104, epsilon=0.1, delta=1e-9)


# ----------------------------------------------------------------------------- the rule
def test_rule_is_a_pure_function_of_public_inputs():
    a, b = auto_choice("logistic", **BINARY), auto_choice("logistic", **BINARY)
    assert a == b and isinstance(a, AutoChoice)
    assert a.inputs["n_samples"] == 30_000 and a.inputs["epsilon"] == 0.1
    assert a.describe().startswith("auto → dp-sgd (batch_size=506, epochs=15, clip_fraction=")


@pytest.mark.parametrize(
    "flags",
    [
        {"delta": 0.0},
        {"weighted": True},
        {"penalty": "l1"},
        {"penalty": "norm"},
        {"constrained": True},
        {"alpha_given": True},
    ],
)
def test_rule_routes_what_only_objective_supports(flags):
    c = auto_choice("logistic", **{**BINARY, **flags})
    assert c.mechanism == "objective" and c.settings == {}


def test_rule_binary_threshold_schedule_and_svm_objective():
    """Binary logistic: clipped DP-SGD below s = nε/√D = BINARY_AMP_ABOVE, AMP above;
    the Huber SVM keeps objective perturbation."""
    n, d = BINARY["n_samples"], BINARY["n_features"]
    eps_edge = BINARY_AMP_ABOVE * np.sqrt(d + 1) / n
    above = auto_choice("logistic", **{**BINARY, "epsilon": eps_edge * 1.01})
    below = auto_choice("logistic", **{**BINARY, "epsilon": eps_edge * 0.99})
    assert above.mechanism == "amp" and above.settings == {}
    assert below.mechanism == "dp-sgd" and below.multi_class is None
    assert below.settings == binary_dp_sgd_schedule(n, eps_edge * 0.99)
    for eps in (0.01, 0.1, 1.0):
        assert auto_choice("logistic", **{**BINARY, "epsilon": eps}).mechanism == "dp-sgd"
    no_intercept = auto_choice("logistic", fit_intercept=False, **BINARY)
    assert "√D = " in no_intercept.reason and no_intercept.mechanism == "dp-sgd"
    assert auto_choice("huber-svm", **BINARY).mechanism == "objective"


def test_binary_schedule_closed_form():
    for n, eps in ((3, 0.1), (40, 1.0), (1_600, 0.1), (30_162, 0.1), (30_162, 1.0), (10**6, 4.0)):
        s = binary_dp_sgd_schedule(n, eps)
        assert s["batch_size"] == max(min(16, n), min(n // 5, round(160 / np.sqrt(eps))))
        assert 1 <= s["batch_size"] <= n
        assert s["epochs"] == 15
        assert (s["clip_fraction"], s["step_clip"]) == (BINARY_CLIP_FRACTION, BINARY_STEP_CLIP)
    with pytest.raises(dperm.exceptions.InvalidPrivacyParameter, match="epsilon"):
        binary_dp_sgd_schedule(100, -1.0)


def test_rule_multiclass_clipped_dp_sgd_below_the_amp_threshold():
    """Multinomial logistic: DP-SGD with C = MULTI_CLIP_FRACTION·L below s = nε/√(Dk) =
    MULTI_AMP_ABOVE (it was above AMP on every validation cell of the sweep, s from 20 to
    80 000); AMP beyond, where the T-step PLD of nearly noiseless steps is huge."""
    n, d, k = 60_000, 784, 10
    for eps in (0.01, 0.1, 1.0, 8.0, 10.0):
        c = auto_choice(
            "logistic", n_samples=n, n_features=d, n_classes=k, epsilon=eps, delta=1e-10
        )
        assert (c.mechanism, c.multi_class) == ("dp-sgd", "multinomial")
        assert c.settings == multi_dp_sgd_schedule(n, eps)
        assert "nε/√(Dk) = " in c.reason
    for eps in (10.5, 100.0, 1e6):  # the consistency regime: objective, Λ → 0
        huge = auto_choice(
            "logistic", n_samples=n, n_features=d, n_classes=k, epsilon=eps, delta=1e-10
        )
        assert (huge.mechanism, huge.multi_class) == ("objective", "multinomial")
        assert f"> {CONSISTENT_ABOVE:g}" in huge.reason
    n = 2_000_000  # the AMP threshold at ε ≈ 4.4 < CONSISTENT_ABOVE
    s_edge = MULTI_AMP_ABOVE * math.sqrt((d + 1) * k) / n  # ε at the threshold (D = d + 1)
    for eps, mech in ((0.99 * s_edge, "dp-sgd"), (1.01 * s_edge, "amp")):
        c = auto_choice(
            "logistic", n_samples=n, n_features=d, n_classes=k, epsilon=eps, delta=1e-10
        )
        assert c.mechanism == mech, (eps, c.reason)
    ovr = auto_choice(
        "logistic", n_samples=n, n_features=d, n_classes=k, epsilon=1.0, delta=1e-10,
        multi_class="ovr",
    )  # fmt: skip
    assert ovr.multi_class == "ovr"
    svm = auto_choice("huber-svm", n_samples=n, n_features=d, n_classes=k, epsilon=1, delta=0.1)
    assert (svm.mechanism, svm.multi_class) == ("objective", "ovr")


def test_multi_schedule_closed_form():
    """The binary batch and epochs, the multinomial clipping and step."""
    for n, eps in ((3, 0.1), (900, 5.0), (60_000, 0.1), (60_000, 1.0), (60_000, 8.0)):
        s = multi_dp_sgd_schedule(n, eps)
        b = binary_dp_sgd_schedule(n, eps)
        assert (s["batch_size"], s["epochs"]) == (b["batch_size"], b["epochs"])
        assert (s["clip_fraction"], s["step_clip"]) == (MULTI_CLIP_FRACTION, MULTI_STEP_CLIP)
    assert multi_dp_sgd_schedule(60_000, 1.0)["batch_size"] == 160
    with pytest.raises(dperm.exceptions.InvalidPrivacyParameter, match="epsilon"):
        multi_dp_sgd_schedule(100, 0.0)


def test_schedule_closed_form():
    for n, eps in ((16, 0.1), (10_000, 0.1), (60_000, 1.0), (10**6, 50.0)):
        s = dp_sgd_schedule(n, 10, eps)
        assert s["batch_size"] == min(n, max(16, round(np.sqrt(n))))
        assert s["epochs"] == min(10, max(2, round(2 + 2 * eps)))


def test_rule_regressors():
    kw = dict(n_samples=16_000, n_features=8, epsilon=1.0, delta=1e-9)
    for task in ("least-squares", "lasso", "elasticnet"):
        c = auto_choice(task, label_bound=5.0, **kw)
        assert c.mechanism == "objective"
        assert c.settings == {"loss": "huber", "threshold": HUBER_FRACTION * 5.0}
    q = auto_choice("quantile", **kw)
    assert q.mechanism == "dp-gd-avg" and q.settings == {"label_scale": QUANTILE_SCALE}
    assert auto_choice("quantile", label_bound=2.0, **kw).settings == {}
    assert auto_choice("huber", **kw).mechanism == "objective"
    with pytest.raises(UnknownNameError, match="task"):
        auto_choice("poisson", **kw)


# ----------------------------------------------------------------------------- estimators
def _binary(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, 3))
    return X, np.where(X[:, 0] + 0.1 * rng.normal(size=n) > 0, 1, -1)


def test_default_fit_reports_the_choice_and_matches_the_named_mechanism():
    """The default small-s binary fit is DP-SGD with C = 0.27·L (L = the public row
    bound with the intercept column, the logistic loss's Lipschitz constant) and
    η = 0.65/C: the same model and event as that named configuration."""
    X, y = _binary()
    auto = DPLogisticRegression(classes=[-1, 1], random_state=3).fit(X, y)
    L = np.hypot(1.0, 0.5)  # data_norm = 1, intercept_scaling = 0.5
    C = BINARY_CLIP_FRACTION * L
    named = DPLogisticRegression(
        classes=[-1, 1], mechanism="dp-sgd", random_state=3, batch_size=120, epochs=15,
        clipping_norm=C, learning_rate=BINARY_STEP_CLIP / C,
    ).fit(X, y)  # fmt: skip
    assert auto.mechanism == "auto" and auto.mechanism_ == "dp-sgd"
    assert auto.diagnostics_["clipping_norm"] == pytest.approx(C)
    assert auto.diagnostics_["learning_rate"] == pytest.approx(BINARY_STEP_CLIP / C)
    # same mechanism, same noise (C and η agree to rounding: L computed in two ways)
    np.testing.assert_allclose(auto.coef_, named.coef_, rtol=1e-9)
    assert auto.dp_event_ == named.dp_event_
    # an explicit clipping norm or learning rate wins over the rule's
    mine = DPLogisticRegression(classes=[-1, 1], clipping_norm=0.9, learning_rate=0.5)
    mine.set_params(random_state=3).fit(X, y)
    assert mine.diagnostics_["clipping_norm"] == 0.9 and mine.diagnostics_["learning_rate"] == 0.5


def test_default_fit_at_large_s_is_amp():
    X, y = _binary(n=3_000)
    eps = 8.0  # s = 3000·8/√4 = 12 000 ≥ BINARY_AMP_ABOVE, ε ≤ CONSISTENT_ABOVE
    auto = DPLogisticRegression(classes=[-1, 1], epsilon=eps, random_state=3).fit(X, y)
    named = DPLogisticRegression(classes=[-1, 1], epsilon=eps, mechanism="amp", random_state=3)
    named.fit(X, y)
    assert auto.mechanism == "auto" and auto.mechanism_ == "amp"
    assert auto.diagnostics_["auto"] == auto.auto_.describe()
    np.testing.assert_array_equal(auto.coef_, named.coef_)  # same mechanism, same noise
    assert auto.dp_event_ == named.dp_event_
    assert "Approximate Minima Perturbation" in auto.privacy_statement() or "AMP" in (
        auto.privacy_statement()
    )


def test_default_fit_beyond_consistent_above_is_objective_with_a_vanishing_alpha():
    """ε > CONSISTENT_ABOVE: objective perturbation with the Λ rule, which falls with ε
    (no floor), so the model approaches the unregularized one."""
    X, y = _binary(n=3_000)
    alphas = []
    for eps in (20.0, 2_000.0):
        auto = DPLogisticRegression(classes=[-1, 1], epsilon=eps, random_state=3).fit(X, y)
        assert auto.mechanism_ == "objective"
        alphas.append(auto.alpha_)
    assert alphas[1] < alphas[0] / 10 and alphas[1] < 1.25 / 3_000 / 100


def test_rule_does_not_read_the_data():
    """Two datasets with the same public shape and label set get the same choice."""
    X1, y1 = _binary(seed=1)
    X2 = np.zeros_like(X1)
    y2 = np.ones_like(y1)
    a = DPLogisticRegression(classes=[-1, 1], random_state=0).fit(X1, y1).auto_
    b = DPLogisticRegression(classes=[-1, 1], random_state=0).fit(X2, y2).auto_
    assert a == b


def test_multinomial_by_default_for_k_gt_2():
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(900, 3))
    y = np.digitize(X[:, 0], [-0.15, 0.15])
    clf = DPLogisticRegression(epsilon=5.0, classes=[0, 1, 2], random_state=0).fit(X, y)
    assert clf.loss_.multiclass and clf.coef_.shape == (3, 3)
    assert clf.epsilon_ == 5.0 and not isinstance(clf.diagnostics_, list)  # one problem
    ovr = DPLogisticRegression(epsilon=5.0, classes=[0, 1, 2], multi_class="ovr").fit(X, y)
    assert len(ovr.diagnostics_) == 3
    svc = DPLinearSVC(epsilon=5.0, classes=[0, 1, 2], random_state=0).fit(X, y)
    assert len(svc.diagnostics_) == 3  # no multinomial Huber SVM: one-vs-rest


def test_default_multinomial_fit_is_the_named_clipped_dp_sgd():
    """The default k > 2 fit is DP-SGD with C = 0.15·L, L = √2·R (R the public row bound
    with the intercept column), η = 3/C and adaptive clipping below C towards the
    quantile MULTI_CLIP_QUANTILE: the same model and event as that configuration
    spelled out for :func:`dperm.algorithms.dp_sgd.fit`."""
    from dperm.algorithms import dp_sgd
    from dperm.design import as_design
    from dperm.losses import Softmax

    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(900, 3))
    y = np.digitize(X[:, 0], [-0.15, 0.15])
    auto = DPLogisticRegression(epsilon=5.0, classes=[0, 1, 2], random_state=3).fit(X, y)
    R = np.hypot(1.0, 0.5)  # data_norm = 1, intercept_scaling = 0.5
    C = MULTI_CLIP_FRACTION * np.sqrt(2.0) * R
    sched = multi_dp_sgd_schedule(900, 5.0)
    named = dp_sgd.fit(
        Softmax(3), as_design(X, 1.0, intercept_scaling=0.5), y, epsilon=5.0,
        delta=1 / 900**2, neighbouring="replace-one", data_norm=R, random_state=3,
        batch_size=sched["batch_size"], epochs=15, clipping_norm=C,
        learning_rate=MULTI_STEP_CLIP / C, target_unclipped_quantile=MULTI_CLIP_QUANTILE,
        clipping_learning_rate=CLIPPING_LEARNING_RATE, max_clipping_norm=C,
    )  # fmt: skip
    assert auto.mechanism_ == "dp-sgd" and auto.auto_.multi_class == "multinomial"
    assert auto.diagnostics_["clipping_norm"] == pytest.approx(C)
    assert auto.diagnostics_["learning_rate"] == pytest.approx(MULTI_STEP_CLIP / C)
    assert auto.diagnostics_["clipping"] == named.diagnostics["clipping"] == "adaptive"
    np.testing.assert_allclose(auto.coef_, named.theta[:-1].T, rtol=1e-9)
    assert auto.dp_event_ == named.event
    assert auto.epsilon_ == 5.0


def test_regressors_default_to_the_huber_surrogate():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 3)) / np.sqrt(3)
    y = np.clip(X @ [2.0, -1.0, 0.5] + 0.1 * rng.normal(size=2000), -4, 4)
    for cls in (DPLinearRegression, DPLasso, DPElasticNet):
        m = cls(label_bound=4.0, epsilon=5.0, random_state=0).fit(X, y)
        assert m.mechanism_ == "objective" and m.loss_.h == pytest.approx(HUBER_FRACTION * 4)
        assert m.constraint_ is None and m.score(X, y) > 0.9
    assert DPLinearRegression(label_bound=4.0, mechanism="adassp").fit(X, y).mechanism_ == "adassp"
    q = DPQuantileRegressor(epsilon=5.0, random_state=0).fit(X, y)
    assert q.constraint_.l2_radius == pytest.approx(4 * QUANTILE_SCALE / np.hypot(1, 0.5))
    assert DPHuberRegressor(epsilon=5.0, random_state=0).fit(X, y).mechanism_ == "objective"


@pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")
def test_mostly_clipped_raw_data_is_refused_before_anything_is_charged():
    X, y = load_breast_cancer(return_X_y=True)
    with dperm.budget(10.0, 1e-3) as ledger:
        with pytest.raises(InvalidDataError, match=r"data_norm=.*preprocessing"):
            DPLogisticRegression(classes=[0, 1]).fit(X, y)
    assert ledger.entries == ()
    scaled = X / np.linalg.norm(X, axis=1).max()  # for the test only: a public bound known here
    assert DPLogisticRegression(classes=[0, 1], random_state=0).fit(scaled, y).n_clipped_ == 0


# ----------------------------------------------------------------------------- budgets
def test_default_delta_inside_a_budget_never_exhausts_it():
    X, y = _binary(n=300)
    grid = GridSearchCV(
        DPLogisticRegression(epsilon=0.2, classes=[-1, 1]),
        {"alpha": [0.01, 0.1, 1.0]},
        cv=3,
        error_score="raise",
    )
    with dperm.budget(3.0, 1e-5) as ledger:  # 1/n² = 2.5e-5 per fold would exceed δ
        grid.fit(X, y)
    assert len(ledger.entries) == 10  # 9 fits + the refit
    assert ledger.delta_spent() < 1e-5
    assert default_delta(1000) == 1e-6
    with dperm.budget(1.0, 1e-8):
        assert default_delta(1000) == 5e-9


def test_budget_errors_name_delta_or_epsilon():
    X, y = _binary(n=300)
    with dperm.budget(1.0, 1e-6):
        with pytest.raises(BudgetExceededError, match="DELTA"):
            DPLogisticRegression(classes=[-1, 1], delta=1e-5).fit(X, y)
        with pytest.raises(BudgetExceededError, match="EPSILON"):
            DPLogisticRegression(classes=[-1, 1], epsilon=2.0, delta=1e-7).fit(X, y)
    ledger = Ledger(1.0, 1e-6)
    with pytest.raises(BudgetExceededError, match="DELTA"):
        ledger.spend(EpsilonDelta(0.1, 1e-5))


def test_private_random_search_charges_its_own_event_once():
    X, y = _binary(n=800)
    base = DPLogisticRegression(classes=[-1, 1], mechanism="objective")
    search = PrivateRandomSearch(
        base, {"alpha": [1e-3, 1e-2]}, epsilon=1.0, delta=1e-6, random_state=0
    )
    with dperm.budget(2.0, 1e-5) as ledger:
        search.fit(X, y)
    assert search.search_diagnostics_["n_runs"] >= 1
    assert [e.label for e in ledger.entries] == ["PrivateRandomSearch"]
    assert ledger.entries[0].event == search.dp_event_
    assert ledger.spent()[0] <= 1.0 + 1e-9


def test_tune_with_the_defaults_spends_the_budget_on_the_auto_choice_when_search_cannot_pay():
    X, y = _binary(n=600)
    est = DPLogisticRegression(epsilon=0.5, classes=[-1, 1], random_state=7)
    tuner = tuning_search(est)
    assert isinstance(tuner, AutoTuningSearch)
    tuner.fit(X, y)
    assert not tuner.searched_ and "no search" in tuner.reason_
    plain = DPLogisticRegression(epsilon=0.5, classes=[-1, 1], random_state=7).fit(X, y)
    np.testing.assert_array_equal(tuner.best_estimator_.coef_, plain.coef_)
    assert tuner.epsilon_ == 0.5
