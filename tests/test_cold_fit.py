"""The cold DP-SGD fit's fast paths (issue #31 row 1): the per-step clipped-sum kernel
gives the general path's numbers, and a calibration started before the pass over X
(prefetch) is the one the fit uses — same noise, same model, same errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp

from dperm import DPLogisticRegression
from dperm.algorithms import _gradient_calibration as gc
from dperm.algorithms import dp_sgd
from dperm.design import as_design, glm_clipped_sum_kernel
from dperm.exceptions import InvalidPrivacyParameter
from dperm.losses import Logistic
from dperm.sampling import make_sampler


@pytest.fixture(autouse=True)
def _no_persistent_cache(monkeypatch):
    monkeypatch.setenv("DPERM_CACHE_DIR", "")
    # prefetches another test left behind (a fit that failed before resolve_noise: kept
    # up to 16, harmless) are not this test's
    monkeypatch.setattr(gc, "_PENDING", {})


def _data(n=3000, d=8, seed=0, scale=0.5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * scale
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("intercept", [None, 1.0, 3.0])
@pytest.mark.parametrize("data_norm", [None, 1.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_equals_the_general_clipped_sum(intercept, data_norm, weighted):
    X, y = _data()
    D = as_design(X, data_norm, intercept_scaling=intercept, warn=False)
    w = np.random.default_rng(1).uniform(0, 1, len(y)) if weighted else None
    kernel = glm_clipped_sum_kernel(D, Logistic(), y, 0.7, weights=w)
    rng = np.random.default_rng(2)
    for _ in range(5):
        theta = rng.normal(size=D.shape[1]) * 3
        rows = np.sort(rng.choice(len(y), 64, replace=False))
        expected = D.glm_clipped_sum(Logistic(), theta, y, 0.7, weights=w, rows=rows)
        np.testing.assert_array_equal(kernel(theta, rows), expected)  # bit for bit
    # every other selection goes to the method itself (full batch, slice, empty batch)
    for rows in (None, slice(0, 50), np.array([], dtype=np.int64)):
        expected = D.glm_clipped_sum(Logistic(), theta, y, 0.7, weights=w, rows=rows)
        np.testing.assert_array_equal(kernel(theta, rows), expected)


@pytest.mark.parametrize("kind", ["float32", "csr"])
def test_kernel_of_other_rows_is_the_method(kind):
    X, y = _data()
    X = X.astype(np.float32) if kind == "float32" else sp.csr_matrix(X)
    D = as_design(X, 1.0, intercept_scaling=1.0, warn=False)
    theta = np.random.default_rng(3).normal(size=D.shape[1])
    rows = np.arange(0, 3000, 7)
    expected = D.glm_clipped_sum(Logistic(), theta, y, 0.5, rows=rows)
    np.testing.assert_array_equal(
        glm_clipped_sum_kernel(D, Logistic(), y, 0.5)(theta, rows), expected
    )


def test_kernel_checks_theta_like_the_method():
    X, y = _data()
    D = as_design(X, 1.0, intercept_scaling=1.0, warn=False)
    with pytest.raises(Exception, match="theta has 3 rows"):
        glm_clipped_sum_kernel(D, Logistic(), y, 0.5)(np.zeros(3), np.arange(10))


def _fit(X, y, eps, seed=0):
    return DPLogisticRegression(
        mechanism="dp-sgd", epsilon=eps, epochs=1, batch_size=64, classes=[-1, 1],
        random_state=seed,
    ).fit(X, y)  # fmt: skip


def test_prefetched_calibration_is_the_fit_s(monkeypatch):
    X, y = _data(scale=0.1)
    eps = 0.8123  # a plan no other test calibrates
    calls, threads = [], []
    calibrate = gc.calibrate_noise_multiplier

    def counting(*a, **k):
        calls.append(threading.current_thread().name)
        return calibrate(*a, **k)

    monkeypatch.setattr(gc, "calibrate_noise_multiplier", counting)
    monkeypatch.setattr(gc, "_CALIBRATION_CACHE", {})
    start = gc.prefetch_noise

    def spy(*a, **k):
        threads.append(1)
        return start(*a, **k)

    monkeypatch.setattr(dp_sgd.gl, "prefetch_noise", spy)
    est = _fit(X, y, eps)
    assert threads == [1] and calls == ["dperm-calibration"]  # once, in the background
    assert not gc._PENDING  # read by the fit
    spent = est.diagnostics_["epsilon_spent"]
    assert (1 - gc.CALIBRATION_RTOL) * eps <= spent <= eps
    # the same noise and model as a fit that calibrates in its own thread
    monkeypatch.setattr(gc, "_CALIBRATION_CACHE", {})
    monkeypatch.setattr(dp_sgd.gl, "prefetch_noise", lambda *a, **k: None)
    again = _fit(X, y, eps)
    assert calls[-1] == threading.current_thread().name
    assert again.diagnostics_["noise_multiplier"] == est.diagnostics_["noise_multiplier"]
    np.testing.assert_array_equal(again.coef_, est.coef_)
    np.testing.assert_array_equal(again.intercept_, est.intercept_)


def test_a_failed_prefetch_raises_in_the_fit(monkeypatch):
    # the background calibration fails (e.g. no noise meets the target): the fit
    # computes it again in its own thread and raises there, nothing is released
    monkeypatch.setattr(gc, "_CALIBRATION_CACHE", {})
    calls = []

    def failing(*a, **k):
        calls.append(threading.current_thread().name)
        raise InvalidPrivacyParameter("no noise parameter meets the target")

    monkeypatch.setattr(gc, "calibrate_noise_multiplier", failing)
    X, y = _data(scale=0.1)
    with pytest.raises(InvalidPrivacyParameter, match="no noise parameter"):
        _fit(X, y, 0.7345)
    assert calls == ["dperm-calibration", threading.current_thread().name]
    assert not gc._PENDING


def test_prefetch_starts_nothing_for_an_incomplete_or_invalid_plan(monkeypatch):
    started = []
    monkeypatch.setattr(gc.threading, "Thread", lambda *a, **k: started.append(1))
    for kwargs in (
        dict(epochs=1),  # no batch size: the fit's defaults decide
        dict(batch_size=64),  # no epochs
        dict(batch_size=64, epochs=1, noise_multiplier=1.0),  # nothing to calibrate
        dict(batch_size=10**9, epochs=1),  # invalid: the fit says so
        dict(batch_size=64, epochs=1, neighbouring="add-remove"),  # no dataset_size
    ):
        kwargs.setdefault("neighbouring", "replace-one")
        dp_sgd.prefetch_noise(1000, epsilon=1.0, delta=1e-6, **kwargs)
    assert started == []
    sampler = make_sampler("poisson", 1000, batch_size=64)
    gc.prefetch_noise(sampler, 10, epsilon=-1.0, delta=1e-6, accountant="pld")
    assert started == [] and not gc._PENDING
