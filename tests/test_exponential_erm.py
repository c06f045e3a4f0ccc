"""Exponential-mechanism ERM over a finite candidate set, and the private quantile."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from dperm.accounting.events import PureEpsilon
from dperm.algorithms import exponential_erm as ee
from dperm.exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
)
from dperm.losses import Hinge, HuberSVM, Logistic, Quantile, Squared


def _logistic_data(rng, n=40, d=1):
    X = rng.uniform(-1.0, 1.0, (n, d)) / np.sqrt(d)
    y = np.where(X.sum(axis=1) + 0.4 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


# ----------------------------------------------------------------------------- sampling law
def test_sampling_distribution_matches_exponential_mechanism(rng, exponential_mechanism_pvalue):
    """Chi-square: P(θ_j) ∝ exp(−ε Σᵢ log(1 + e^{−yᵢ xᵢ θ_j}) / (2Δ)), with
    Δ = data_norm · max|θ| for the logistic loss (range of log(1+e^m), |m| ≤ z)."""
    X, y = _logistic_data(rng, n=15)
    cands = np.array([-3.0, -1.0, 0.0, 1.5, 3.0])[:, None]
    eps = 2.0
    sums = np.array([np.log1p(np.exp(-y * X[:, 0] * c)).sum() for c in cands[:, 0]])
    delta_u = 3.0

    def fit(gen):
        return ee.fit(Logistic(), X, y, epsilon=eps, candidates=cands, random_state=gen)

    assert fit(0).diagnostics["sensitivity"] == pytest.approx(delta_u)

    def draw(gen):
        return fit(gen).diagnostics["index"]

    assert exponential_mechanism_pvalue(draw, -eps * sums / (2 * delta_u), 8000, 11) > 1e-3


def test_private_median_sampling_distribution(rng, exponential_mechanism_pvalue):
    v = rng.uniform(0, 10, 9)
    eps, lo, hi, k = 1.0, 0.0, 10.0, 6
    grid = np.linspace(lo, hi, k)
    sums = np.array([np.abs(v - g).sum() * 0.5 for g in grid])

    def draw(gen):
        th = ee.private_quantile(
            v, 0.5, epsilon=eps, lower=lo, upper=hi, n_candidates=k, random_state=gen
        ).theta[0]
        return int(np.argmin(np.abs(grid - th)))

    logits = -eps * sums / (2 * 0.5 * (hi - lo))
    assert exponential_mechanism_pvalue(draw, logits, 6000, 5) > 1e-3


# ----------------------------------------------------------------------------- utility
@pytest.mark.parametrize("q", [0.5, 0.9])
def test_private_quantile_meets_the_exponential_mechanism_bound(rng, q):
    """Dwork & Roth Thm 3.11: L(θ̂) − min_grid L ≤ 2Δ(ln k + s)/(nε) w.p. ≥ 1 − e^{−s}.
    At s = ln 20 (95 %) at most 3 of 20 seeds may fail (binomial tail < 2 %)."""
    v = rng.normal(50, 10, 4000)
    loss = Quantile(q)
    grid = np.linspace(0, 100, 1001)
    vals = np.array([np.mean(loss.pointwise(np.full_like(v, g), v)) for g in grid])
    fails = 0
    for seed in range(20):
        res = ee.private_quantile(v, q, epsilon=0.5, lower=0, upper=100, random_state=seed)
        gap = np.mean(loss.pointwise(np.full_like(v, res.theta[0]), v)) - vals.min()
        fails += gap > res.diagnostics["utility_bound"]
        # the population risk is ≈ (f/2)(θ − θ*)² near θ* (f = density at θ*), so a
        # loss gap U (plus sampling error) means |θ − θ*| ≲ √(2U/f)
        f = stats.norm.pdf(stats.norm.ppf(q), scale=10)
        tol = math.sqrt(2 * res.diagnostics["utility_bound"] / f) + 1.0
        assert abs(res.theta[0] - np.quantile(v, q)) < tol
    assert fails <= 3
    assert res.event == PureEpsilon(0.5)


def test_two_dimensional_logistic_on_a_grid(rng):
    n = 3000
    X = rng.uniform(-1, 1, (n, 2)) / np.sqrt(2)
    y = np.where(X @ np.array([2.0, -1.0]) + 0.2 * rng.standard_normal(n) > 0, 1.0, -1.0)
    cands = ee.grid(-6, 6, 41, d=2)
    res = ee.fit(Logistic(), X, y, epsilon=1.0, candidates=cands, random_state=0)
    losses = np.array([Logistic().value(c, X, y) for c in cands])
    assert Logistic().value(res.theta, X, y) - losses.min() <= res.diagnostics["utility_bound"]
    assert np.mean(np.sign(X @ res.theta) == y) > 0.85


def test_sparse_equals_dense(rng):
    X, y = _logistic_data(rng, n=60, d=3)
    X[np.abs(X) < 0.2] = 0
    cands = ee.random_net(3, 2.0, 50, random_state=1)
    a = ee.fit(Logistic(), X, y, epsilon=1.0, candidates=cands, random_state=4)
    b = ee.fit(Logistic(), sp.csr_matrix(X), y, epsilon=1.0, candidates=cands, random_state=4)
    np.testing.assert_array_equal(a.theta, b.theta)


# ----------------------------------------------------------------------------- helpers
def test_grid_and_random_net(rng):
    g = ee.grid([0, -1], [1, 1], 3)
    assert g.shape == (9, 2)
    assert {tuple(r) for r in g} >= {(0.0, -1.0), (1.0, 1.0), (0.5, 0.0)}
    net = ee.random_net(4, 2.5, 500, random_state=0)
    assert net.shape == (500, 4)
    assert np.all(np.linalg.norm(net, axis=1) <= 2.5 + 1e-12)
    # uniform in the ball: P(‖θ‖ ≤ r/2) = 2^{-d}
    frac = np.mean(np.linalg.norm(net, axis=1) <= 1.25)
    assert abs(frac - 1 / 16) < 4 * math.sqrt(1 / 16 * 15 / 16 / 500)


def test_loss_intervals_are_the_exact_ranges():
    z = 1.7
    lo, hi = ee.loss_interval(Logistic(), z)
    assert hi - lo == pytest.approx(z)
    assert ee.loss_interval(Hinge(), z) == pytest.approx((0.0, 1 + z))
    lo, hi = ee.loss_interval(HuberSVM(0.5), 3.0)
    assert lo == 0.0 and hi == pytest.approx(4.0)
    assert ee.loss_interval(Squared(label_bound=2.0), z) == pytest.approx((0, (z + 2) ** 2 / 2))
    assert ee.loss_interval(Quantile(0.8), z, label_bound=1.0) == pytest.approx((0, 0.8 * 2.7))


def test_values_outside_the_public_range_are_clipped_and_counted(rng):
    v = rng.uniform(0, 1, 200)
    v[:5] = 7.0
    with pytest.warns(ClippingWarning):
        res = ee.private_quantile(v, 0.5, epsilon=1.0, lower=0, upper=1, random_state=0)
    assert res.diagnostics["n_clipped"] == 5
    assert 0.0 <= res.theta[0] <= 1.0


# ----------------------------------------------------------------------------- bad input
def test_bad_input(rng):
    X, y = _logistic_data(rng)
    c = np.array([[0.0], [1.0]])
    with pytest.raises(InvalidPrivacyParameter):
        ee.fit(Logistic(), X, y, epsilon=0.0, candidates=c)
    with pytest.raises(InvalidDataError):
        ee.fit(Logistic(), X, y, epsilon=1.0, candidates=np.zeros((2, 3)))
    with pytest.raises(InvalidDataError):
        ee.fit(Logistic(), X, y, epsilon=1.0, candidates=np.array([[np.nan]]))
    with pytest.raises(InvalidPrivacyParameter):
        ee.fit(Quantile(0.5), X, y, epsilon=1.0, candidates=c)  # no label bound
    with pytest.raises(LabelError):
        ee.fit(Quantile(0.5), X, 5 * y, epsilon=1.0, candidates=c, label_bound=1.0)
    with pytest.raises(InvalidPrivacyParameter):
        ee.fit(Logistic(), X, y, epsilon=1.0, candidates=c, loss_bounds=(1.0, 1.0))
    with pytest.raises(InvalidPrivacyParameter):
        ee.private_quantile([1.0, 2.0], 0.5, epsilon=1.0, lower=3, upper=1)
    with pytest.raises(InvalidPrivacyParameter):
        ee.private_quantile([1.0, 2.0], 1.0, epsilon=1.0, lower=0, upper=3)
    with pytest.raises(InvalidPrivacyParameter):
        ee.private_quantile([1.0, 2.0], 0.5, epsilon=1.0, lower="a", upper=3)
    with pytest.raises(InvalidDataError):
        ee.private_quantile([1.0, np.inf], 0.5, epsilon=1.0, lower=0, upper=3)
    with pytest.raises(InvalidDataError):
        ee.private_quantile([], 0.5, epsilon=1.0, lower=0, upper=3)
    with pytest.raises(InvalidPrivacyParameter):
        ee.grid(0, 1, 1001, d=3)
