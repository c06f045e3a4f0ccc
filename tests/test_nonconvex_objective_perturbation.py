"""Objective perturbation over a finite set (NRVW-style): oracles, privacy audit, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dperm.accounting.events import PureEpsilon
from dperm.algorithms import nonconvex_objective_perturbation as nop
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter, LabelError


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2)) / math.sqrt(2)
    y = np.where(X @ np.array([1.0, -0.5]) + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def test_binary_grid_encoding():
    thetas, codes = nop.binary_grid(2, 3)
    assert thetas.shape == (64, 2) and codes.shape == (64, 6)
    assert np.unique(codes, axis=0).shape[0] == 64  # injective
    assert set(np.unique(thetas)) == set(range(-4, 4))
    W = np.kron(np.eye(2), 2.0 ** np.arange(3))
    np.testing.assert_array_equal(codes @ W.T - 4, thetas)


def test_milp_oracle_matches_exact_enumeration():
    X, y = _data(80, seed=1)
    rng = np.random.default_rng(2)
    thetas, codes = nop.binary_grid(2, 3)
    for _ in range(8):
        eta = rng.laplace(scale=4.0, size=6)
        vals = nop._zero_one_sum(X, y, thetas, 1e-4) + codes @ eta
        theta, z = nop.milp_oracle(X, y, eta, 3, 1e-4)
        j = int(np.flatnonzero((codes == z).all(axis=1))[0])
        np.testing.assert_array_equal(theta, thetas[j])
        assert vals[j] == pytest.approx(vals.min(), abs=1e-9)


def test_fit_zero_one_grid_both_oracles_and_utility():
    X, y = _data(300, seed=3)
    for oracle in ("milp", "exact"):
        a = nop.fit_zero_one_grid(X, y, epsilon=1.0, bits=3, oracle=oracle, random_state=5)
        assert a.event == PureEpsilon(1.0) and a.event.neighbouring == "replace-one"
        assert a.diagnostics["noise_scale"] == pytest.approx(2 * 6 / 1.0)
    b = nop.fit_zero_one_grid(X, y, epsilon=1.0, bits=3, oracle="milp", random_state=5)
    c = nop.fit_zero_one_grid(X, y, epsilon=1.0, bits=3, oracle="exact", random_state=5)
    np.testing.assert_array_equal(b.theta, c.theta)  # same noise, exact oracles agree
    # with a large budget the private classifier is close to the best grid point
    thetas, _ = nop.binary_grid(2, 3)
    best = nop._zero_one_sum(X, y, thetas, 1e-4).min() / 300
    errs = [
        nop._zero_one_sum(X, y, r.theta[None], 1e-4)[0] / 300
        for r in (
            nop.fit_zero_one_grid(X, y, epsilon=20.0, oracle="exact", random_state=s)
            for s in range(20)
        )
    ]
    bound = nop.fit_zero_one_grid(X, y, epsilon=20.0, oracle="exact").diagnostics["utility_bound"]
    assert np.mean(errs) - best <= bound


def _output_law(losses, eps, draws, rng):
    """Vectorised report-noisy-min with the module's noise scale (one-hot, Δ = 1)."""
    b = nop.noise_scale(eps, 1.0, 1)
    eta = rng.laplace(scale=b, size=(draws, losses.size))
    return np.bincount(np.argmin(losses + eta, axis=1), minlength=losses.size) / draws


def test_privacy_audit_one_hot_neighbouring_pair():
    # F changes by ≤ 1 per candidate between neighbours; the worst case moves all in opposition
    eps = 1.0
    F = np.array([10.0, 10.0, 11.0])
    F2 = F + np.array([1.0, -0.0, -1.0]) * np.array([1, 0, 1])
    rng = np.random.default_rng(7)
    p = _output_law(F, eps, 400_000, rng)
    q = _output_law(F2, eps, 400_000, rng)
    ratio = np.abs(np.log(p / q))
    se = np.sqrt((1 - p) / (p * 400_000) + (1 - q) / (q * 400_000))
    assert np.all(ratio <= eps + 4 * se)
    assert np.max(ratio) > 0.3 * eps  # the audit sees a real privacy loss
    # fit_discrete has the same output law
    counts = np.zeros(3)
    for _ in range(1500):
        j, res = nop.fit_discrete(lambda: F, 3, epsilon=eps, loss_range=1.0, random_state=rng)
        counts[j] += 1
        assert res.event == PureEpsilon(eps)
    assert stats.chisquare(counts, p * 1500).pvalue > 1e-3


def test_privacy_audit_binary_encoding():
    # 4 candidates with 2-bit codes: ε = 2·Δ·m/b; empirical log-ratios stay below ε
    eps = 1.0
    _, codes = nop.binary_grid(1, 2)
    b = nop.noise_scale(eps, 1.0, 2)
    F = np.array([3.0, 3.0, 3.0, 3.0])
    F2 = F + np.array([-1.0, 1.0, 1.0, 1.0])
    rng = np.random.default_rng(8)
    N = 400_000
    p = np.bincount(np.argmin(F + rng.laplace(scale=b, size=(N, 2)) @ codes.T, 1), minlength=4) / N
    q = np.bincount(np.argmin(F2 + rng.laplace(scale=b, size=(N, 2)) @ codes.T, 1), minlength=4) / N
    se = np.sqrt((1 - p) / (p * N) + (1 - q) / (q * N))
    assert np.all(np.abs(np.log(p / q)) <= eps + 4 * se)


def test_errors():
    X, y = _data(20)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        nop.fit_zero_one_grid(X, y, epsilon=0.0)
    with pytest.raises(InvalidPrivacyParameter, match="oracle"):
        nop.fit_zero_one_grid(X, y, epsilon=1.0, oracle="greedy")
    with pytest.raises(LabelError):
        nop.fit_zero_one_grid(X, np.zeros(20), epsilon=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="2\\^"):
        nop.binary_grid(3, 8)
    with pytest.raises(InvalidDataError, match="injective"):
        nop.fit_discrete(lambda: np.zeros(2), 2, epsilon=1.0, loss_range=1.0, codes=np.ones((2, 2)))
    with pytest.raises(InvalidDataError, match="returned"):
        nop.fit_discrete(lambda: np.zeros(3), 2, epsilon=1.0, loss_range=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="loss_range"):
        nop.noise_scale(1.0, 0.0, 1)
