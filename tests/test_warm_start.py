"""``warm_start=True`` (issue #21): a gradient-perturbation fit continues from the
previous fit's *released* model, spends its own (ε, δ), and the model it returns
carries the composition of both fits; every other mechanism refuses it."""

from __future__ import annotations

import numpy as np
import pytest

import dperm
from dperm import (
    DPHuberRegressor,
    DPLinearRegression,
    DPLinearSVC,
    DPLogisticRegression,
    DPQuantileRegressor,
)
from dperm.accounting import epsilon_spent
from dperm.accounting.events import Composed
from dperm.algorithms import dp_gd, dp_sgd
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter


def _data(k=2, n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # ‖x‖ ≤ data_norm = 1
    if k == 0:  # regression, |y| ≤ 1
        return X, np.clip(X @ np.array([0.5, -0.3, 0.2]), -1.0, 1.0)
    return X, np.argmax(X[:, :k], axis=1) if k > 2 else (X[:, 0] > 0).astype(int)


def _spy(monkeypatch, module, name="fit"):
    """Record the theta0 and the Generator state each call of ``module.name`` receives."""
    calls = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        rng = kwargs["random_state"]
        calls.append((kwargs.get("theta0"), dict(rng.bit_generator.state)))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def _start_point(est) -> np.ndarray:
    """The released model as the algorithms' θ: rows (coef, intercept / scaling)."""
    W = np.atleast_2d(est.coef_)
    b = np.atleast_1d(est.intercept_) / est.intercept_scaling
    return np.column_stack([W, b])


CASES = [
    (DPLogisticRegression, dict(mechanism="dp-gd", classes=[0, 1]), 2, dp_gd, "fit"),
    (DPLogisticRegression, dict(mechanism="dp-sgd", classes=[0, 1, 2]), 3, dp_sgd, "fit"),
    (DPLinearSVC, dict(mechanism="dp-sgd", classes=[0, 1, 2]), 3, dp_sgd, "fit"),
    (DPLinearSVC, dict(mechanism="dp-sgd-single", classes=[0, 1]), 2, dp_sgd, "fit_single_sample"),
    (DPLinearRegression, dict(mechanism="dp-gd", constraint_radius=5.0), 0, dp_gd, "fit"),
    (DPQuantileRegressor, dict(label_bound=1.0), 0, dp_gd, "fit"),  # dp-gd-avg
    (DPHuberRegressor, dict(mechanism="dp-gd"), 0, dp_gd, "fit"),
]


@pytest.mark.parametrize(
    ("cls", "params", "k", "module", "name"),
    CASES,
    ids=[f"{c[0].__name__}-{c[1].get('mechanism', 'auto')}-{c[2]}" for c in CASES],
)
def test_warm_start_continues_from_the_release_and_composes(
    monkeypatch, cls, params, k, module, name
):
    X, y = _data(k)
    calls = _spy(monkeypatch, module, name)
    est = cls(epsilon=1.0, epochs=5, warm_start=True, random_state=0, **params)
    est.fit(X, y)
    first_event, eps1, delta1 = est.dp_event_, est.epsilon_, est.delta_
    assert est.n_fits_ == 1 and all(theta0 is None for theta0, _ in calls)
    start = _start_point(est)
    n_first = len(calls)

    est.fit(X, y)
    warm = calls[n_first:]
    # every problem started from the released model of the first fit (post-processing)
    multinomial = est.coef_.ndim == 2 and k > 2 and len(warm) == 1
    starts = [start.T] if multinomial else list(start)
    assert len(warm) == len(starts)
    for (theta0, _), expected in zip(warm, starts, strict=True):
        np.testing.assert_allclose(theta0, expected, rtol=0, atol=1e-12)
    # and drew fresh noise: a seeded warm fit never replays the first fit's stream
    assert all(state != calls[0][1] for _, state in warm)

    # its own spend is that of a cold fit with the same public settings; the model's
    # event is the composition, its (ε, δ) the sums (basic composition)
    cold = cls(epsilon=1.0, epochs=5, random_state=1, **params).fit(X, y)
    assert est.dp_event_ == Composed(events=(first_event, cold.dp_event_))
    assert est.n_fits_ == 2
    assert est.epsilon_ == pytest.approx(eps1 + cold.epsilon_, rel=1e-12)
    assert est.delta_ == pytest.approx(delta1 + cold.delta_, rel=1e-12)
    # the stated (ε, δ) is certified by an accountant on the composed event
    assert epsilon_spent(est.dp_event_, delta=est.delta_, accountant="auto") <= est.epsilon_ + 1e-9
    assert "warm-started" in est.privacy_statement()


def test_warm_start_chain_is_reproducible_and_charges_each_fit_once():
    X, y = _data(2)
    make = dict(mechanism="dp-gd", epsilon=0.5, epochs=5, classes=[0, 1], random_state=3)
    with dperm.budget(epsilon=10.0, delta=1e-3) as ledger:
        a = DPLogisticRegression(warm_start=True, **make)
        for _ in range(3):
            a.fit(X, y)
    # the active budget holds each fit's own spend once: 3 × 0.5 (basic composition)
    assert len(ledger.entries) == 3
    assert a.n_fits_ == 3 and a.epsilon_ == pytest.approx(1.5)
    b = DPLogisticRegression(warm_start=True, **make)
    for _ in range(3):
        b.fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.dp_event_ == b.dp_event_


def test_warm_start_false_refits_from_scratch(monkeypatch):
    X, y = _data(2)
    calls = _spy(monkeypatch, dp_gd)
    est = DPLogisticRegression(mechanism="dp-gd", epochs=5, classes=[0, 1], random_state=0)
    est.fit(X, y)
    first = est.coef_.copy()
    est.fit(X, y)
    assert all(theta0 is None for theta0, _ in calls)
    np.testing.assert_array_equal(est.coef_, first)  # same seed, same cold fit
    assert est.n_fits_ == 1 and not isinstance(est.dp_event_, Composed)


@pytest.mark.parametrize("mechanism", ["objective", "output", "amp"])
def test_warm_start_is_refused_where_the_start_point_changes_nothing(mechanism):
    X, y = _data(2)
    est = DPLogisticRegression(mechanism=mechanism, warm_start=True, classes=[0, 1])
    with dperm.budget(epsilon=10.0, delta=1e-3) as ledger:
        with pytest.raises(InvalidPrivacyParameter, match=f"warm_start=True.*'{mechanism}'"):
            est.fit(X, y)
    assert not ledger.entries and not hasattr(est, "coef_")  # nothing charged or released


def test_warm_start_bad_value_and_changed_shape_are_refused():
    X, y = _data(2)
    with pytest.raises(InvalidPrivacyParameter, match="warm_start must be a bool, got 'yes'"):
        DPLogisticRegression(mechanism="dp-gd", warm_start="yes", classes=[0, 1]).fit(X, y)
    est = DPLogisticRegression(mechanism="dp-gd", epochs=5, warm_start=True, classes=[0, 1])
    est.fit(X, y)
    with pytest.raises(InvalidDataError, match="warm_start=True: the previous model"):
        est.fit(np.column_stack([X, np.zeros(len(X))]), y)
