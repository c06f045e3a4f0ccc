"""Held-out excess population risk and the uniform-convergence generalization bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dperm.estimators import DPLogisticRegression
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter
from dperm.losses import Logistic
from dperm.utility import excess_population_risk, generalization_bound, nonprivate_fit


def _sample(m, rng, d=2):
    X = rng.uniform(-1, 1, (m, d)) / math.sqrt(d)
    p = 1 / (1 + np.exp(-4 * X[:, 0]))
    y = np.where(rng.uniform(size=m) < p, 1.0, -1.0)
    return X, y


def test_estimate_is_mean_paired_difference_and_ci_covers():
    rng = np.random.default_rng(0)
    loss = Logistic()
    t_priv, t_ref = np.array([0.3, 1.0]), np.array([3.0, 0.0])
    Xb, yb = _sample(400_000, rng)
    truth = loss.value(t_priv, Xb, yb) - loss.value(t_ref, Xb, yb)
    hits_t = hits_h = 0
    trials = 200
    for _ in range(trials):
        X, y = _sample(400, rng)
        r = excess_population_risk(t_priv, t_ref, X, y, loss=loss)
        manual = np.mean(loss.pointwise(X @ t_priv, y) - loss.pointwise(X @ t_ref, y))
        assert r["estimate"] == pytest.approx(manual)
        assert r["risk"] - r["reference_risk"] == pytest.approx(manual)
        hits_t += r["lower"] <= truth <= r["upper"]
        # |⟨θ, x⟩| ≤ ‖θ‖ for ‖x‖ ≤ 1: logistic losses lie in an interval of length ‖θ‖ (max 3)
        h = excess_population_risk(t_priv, t_ref, X, y, loss=loss, loss_range=3.0)
        assert h["method"] == "hoeffding" and h["upper"] - h["lower"] > r["upper"] - r["lower"]
        hits_h += h["lower"] <= truth <= h["upper"]
    # 95 % interval: coverage within 3 binomial standard deviations
    assert hits_t / trials >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / trials)
    assert hits_h == trials


def test_estimators_against_manual_losses():
    rng = np.random.default_rng(1)
    X, y = _sample(600, rng)
    Xt, yt = _sample(2000, rng)
    clf = DPLogisticRegression(epsilon=0.3, classes=[-1.0, 1.0], random_state=2).fit(X, y)
    ref = nonprivate_fit(clf, X, y)
    r = excess_population_risk(clf, ref, Xt, yt)

    def risk(model):
        z = Xt @ np.ravel(model.coef_) + float(np.ravel(model.intercept_)[0])
        return np.mean(np.logaddexp(0.0, -yt * z))

    assert r["risk"] == pytest.approx(risk(clf), rel=1e-9)
    assert r["reference_risk"] == pytest.approx(risk(ref), rel=1e-9)
    assert r["n_test"] == 2000 and r["lower"] <= r["estimate"] <= r["upper"]


def test_generalization_bound_closed_form_and_holds():
    b = generalization_bound(n=200, lipschitz=1.0, radius=2.0, loss_range=2.0, delta=0.05)
    assert b == pytest.approx(4 / math.sqrt(200) + 2 * math.sqrt(2 * math.log(40) / 200))
    # sup over a net of the radius-2 ball of L_D − L_S stays below it (20 training samples)
    rng = np.random.default_rng(3)
    loss = Logistic()
    ang = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    net = np.concatenate([r * np.stack([np.cos(ang), np.sin(ang)], 1) for r in (0.5, 1.0, 2.0)])
    Xb, yb = _sample(200_000, rng)
    pop = np.array([loss.value(t, Xb, yb) for t in net])
    worst = []
    for _ in range(20):
        X, y = _sample(200, rng)
        emp = np.array([loss.value(t, X, y) for t in net])
        worst.append(np.max(pop - emp))
    assert max(worst) <= b


def test_errors():
    rng = np.random.default_rng(4)
    X, y = _sample(10, rng)
    t = np.zeros(2)
    with pytest.raises(InvalidPrivacyParameter, match="loss"):
        excess_population_risk(t, t, X, y)
    with pytest.raises(InvalidPrivacyParameter, match="confidence"):
        excess_population_risk(t, t, X, y, loss=Logistic(), confidence=1.5)
    with pytest.raises(InvalidDataError, match="coordinates"):
        excess_population_risk(np.zeros(3), np.zeros(3), X, y, loss=Logistic())
    clf = DPLogisticRegression(epsilon=1.0, classes=[-1.0, 1.0], random_state=0).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="both"):
        excess_population_risk(clf, t, X, y)
    with pytest.raises(InvalidPrivacyParameter, match="loss_range"):
        excess_population_risk(t, t, X, y, loss=Logistic(), loss_range=-1.0)
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        generalization_bound(n=10, lipschitz=1.0, radius=1.0, loss_range=1.0, delta=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="n"):
        generalization_bound(n=0, lipschitz=1.0, radius=1.0, loss_range=1.0)
