"""Tests of DP-GD (full-batch noisy projected gradient descent)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from dperm.accounting import Gaussian, NonPrivate, SelfComposed, epsilon_spent
from dperm.algorithms import dp_gd
from dperm.constraints import L2Ball
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError
from dperm.losses import Hinge, Logistic, Softmax, Squared

#: the privacy target and public row bound of most fits below
TARGET = dict(epsilon=1.0, delta=1e-5, data_norm=1.0)


def _binary(seed=0, n=300, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= 0.999 / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    return X, y


def test_advanced_calibration_is_the_textbook_formula():
    """σ² = 64 L² T ln(2/δ) ln(2.5T/δ) / (n² ε²) on the average gradient."""
    for eps, delta, T in [(1.0, 1e-5, 100), (0.1, 1e-8, 10), (3.0, 1e-6, 1000)]:
        z = dp_gd.advanced_composition_noise_multiplier(eps, delta, T)
        n, L = 1000, 2.0
        sigma2 = (2 * L / n) ** 2 * z**2
        expected = 64 * L**2 * T * math.log(2 / delta) * math.log(2.5 * T / delta) / (n * eps) ** 2
        assert sigma2 == pytest.approx(expected, rel=1e-12)
        # RDP certifies the same event at a smaller ε (it is the tighter analysis)
        assert epsilon_spent(SelfComposed(Gaussian(z), T), delta) < eps
    with pytest.raises(InvalidPrivacyParameter, match="advanced-composition"):
        dp_gd.advanced_composition_noise_multiplier(200.0, 1e-5, 1)


def test_rdp_calibration_is_tight_and_pld_is_tighter_or_equal():
    X, y = _binary(n=500)
    kw = dict(epsilon=0.5, delta=1e-6, data_norm=1.0, steps=30, random_state=0)
    r, rp, ra = (
        dp_gd.fit(Logistic(), X, y, calibration=c, **kw) for c in ("rdp", None, "advanced")
    )
    z = r.diagnostics["noise_multiplier"]
    assert r.event == SelfComposed(Gaussian(z), 30)
    assert epsilon_spent(r.event, 1e-6) <= 0.5
    assert epsilon_spent(SelfComposed(Gaussian(0.99 * z), 30), 1e-6) > 0.5  # 2·rtol
    assert r.diagnostics["sensitivity"] == pytest.approx(2 * 1.0 / 500)  # 2L/n, replace-one
    assert r.diagnostics["neighbouring"] == "replace-one"
    assert r.diagnostics["noise_std"] == pytest.approx(z * 2 / 500)
    assert rp.diagnostics["accountant"] == "pld"  # the default: the tightest
    assert rp.diagnostics["noise_multiplier"] <= z * (1 + 1e-3)
    assert ra.diagnostics["noise_multiplier"] == pytest.approx(
        dp_gd.advanced_composition_noise_multiplier(0.5, 1e-6, 30)
    )
    assert ra.diagnostics["noise_multiplier"] > z
    assert ra.diagnostics["accountant"] == "advanced"


def test_one_step_from_zero_data_is_gaussian_with_std_2zC_over_n():
    n, d, z, eta = 50, 5000, 0.8, 0.3
    X = np.zeros((n, d))
    r = dp_gd.fit(
        Logistic(),
        X,
        np.ones(n),
        noise_multiplier=z,
        clipping_norm=1.5,
        steps=1,
        learning_rate=eta,
        random_state=4,
    )
    sample = r.theta / (eta * z * 2 * 1.5 / n)
    assert stats.kstest(sample, "norm").pvalue > 1e-3
    assert abs(sample.var(ddof=1) - 1) < 4 * math.sqrt(2 / (d - 1))


def test_zero_noise_is_exact_projected_gradient_descent_and_nonprivate():
    X, y = _binary(1)
    loss = Logistic()
    T, eta = 25, 2.0
    r = dp_gd.fit(
        loss,
        X,
        y,
        noise_multiplier=0.0,
        data_norm=1.0,
        steps=T,
        learning_rate=eta,
        constraint=L2Ball(0.5),
        averaging="uniform",
        delta=1e-5,
    )
    theta, iterates = np.zeros(4), []
    for _ in range(T):
        theta = L2Ball(0.5).project(theta - eta * loss.gradient(theta, X, y))
        iterates.append(theta)
    np.testing.assert_allclose(r.theta, np.mean(iterates, axis=0), rtol=1e-12, atol=1e-15)
    assert r.event == NonPrivate()
    assert r.diagnostics["epsilon_spent"] == math.inf
    with pytest.raises(InvalidPrivacyParameter, match="epsilon=inf"):
        dp_gd.fit(loss, X, y, noise_multiplier=0.0, data_norm=1.0, epsilon=1.0, delta=1e-5)


def test_clipping_at_L_makes_sensitivity_hold_for_wrong_claims():
    """A user-supplied C below the true gradient norms is enforced by clipping:
    the update from one step equals the clipped mean gradient (σ = 0)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3)) * 5  # rows far above the claimed bound (no data_norm)
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    loss = Logistic()
    r = dp_gd.fit(loss, X, y, noise_multiplier=0.0, clipping_norm=0.1, steps=1, learning_rate=1.0)
    G = loss.per_example_gradients(np.zeros(3), X, y)
    G *= np.minimum(1, 0.1 / np.linalg.norm(G, axis=1))[:, None]
    np.testing.assert_allclose(r.theta, -G.mean(axis=0), rtol=1e-12)


def test_sparse_equals_dense_and_softmax_and_generic_paths():
    X, y = _binary(3, n=200, d=6)
    Xs = X.copy()
    Xs[np.abs(Xs) < 0.2] = 0
    kw = dict(TARGET, steps=20, random_state=1)
    a = dp_gd.fit(Logistic(), Xs, y, **kw)
    b = dp_gd.fit(Logistic(), sp.csr_matrix(Xs), y, **kw)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-10, atol=1e-13)
    yk = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0).astype(int)
    r = dp_gd.fit(Softmax(3), X, yk, **kw)
    assert r.theta.shape == (6, 3)
    assert r.diagnostics["clipping_norm"] == pytest.approx(math.sqrt(2))
    g = dp_gd.fit(
        None,
        Xs,
        y,
        per_example_grad=Logistic().per_example_gradients,
        clipping_norm=1.0,
        learning_rate=a.diagnostics["learning_rate"],
        epsilon=1.0,
        delta=1e-5,
        steps=20,
        random_state=1,
    )
    np.testing.assert_allclose(g.theta, a.theta, rtol=1e-10, atol=1e-13)


def test_bad_input():
    X, y = _binary(n=50)
    base = dict(TARGET)
    for kw, match in [
        (dict(steps=0), "steps"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(learning_rate=-1.0), "learning_rate"),
        (dict(clipping_norm=0.0), "clipping_norm"),
        (dict(data_norm=-1.0), "data_norm"),
        (dict(alpha=-1.0), "alpha"),
        (dict(noise_multiplier=0.01), "more than the target"),
        (dict(epsilon=None), "noise_multiplier"),
    ]:
        with pytest.raises(InvalidPrivacyParameter, match=match):
            dp_gd.fit(Logistic(), X, y, **{**base, **kw})
    with pytest.raises(UnknownNameError, match="calibration"):
        dp_gd.fit(Logistic(), X, y, calibration="moments", **base)
    with pytest.raises(InvalidPrivacyParameter, match="data_norm"):
        dp_gd.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5)
    with pytest.raises(InvalidPrivacyParameter, match="radius"):
        dp_gd.fit(Squared(), X, np.clip(X[:, 0], -1, 1), **base)
    with pytest.raises(InvalidPrivacyParameter, match="learning_rate"):
        dp_gd.fit(Hinge(), X, y, **base)  # non-smooth, unconstrained: no default step
    with pytest.raises(InvalidPrivacyParameter, match="below"):
        dp_gd.fit(Logistic(), X, y, calibration="advanced", noise_multiplier=1.0, **base)
    with pytest.raises(InvalidDataError, match="per_example_grad"):
        dp_gd.fit(
            None,
            X,
            y,
            per_example_grad=lambda t, Xb, yb: np.zeros((2, 2)),
            clipping_norm=1.0,
            learning_rate=1.0,
            **base,
        )


def test_constrained_losses_and_default_steps():
    X, y = _binary(5, n=400)
    r = dp_gd.fit(
        Squared(),
        X,
        np.clip(X[:, 0], -1, 1),
        epsilon=2.0,
        delta=1e-5,
        data_norm=1.0,
        constraint=L2Ball(2.0),
        random_state=0,
    )
    assert np.linalg.norm(r.theta) <= 2.0 + 1e-12
    assert r.diagnostics["lipschitz"] == pytest.approx(1.0 * (1.0 * 2.0 + 1.0))
    r = dp_gd.fit(
        Hinge(),
        X,
        y,
        epsilon=2.0,
        delta=1e-5,
        data_norm=1.0,
        constraint=L2Ball(3.0),
        random_state=0,
    )
    T = r.diagnostics["steps"]
    assert T == dp_gd.default_steps(400, 4, 2.0) == 200
    assert r.diagnostics["learning_rate"] == pytest.approx(6.0 / math.sqrt(T))  # D/(L√T)
    assert dp_gd.default_steps(10, 100, 0.1) == 20


def test_utility_close_to_nonprivate_at_large_epsilon():
    rng = np.random.default_rng(7)
    n, d = 4000, 5
    X = rng.normal(size=(n, d))
    X *= 0.999 / np.linalg.norm(X, axis=1, keepdims=True)
    w = np.array([3.0, -2.0, 1.0, 0.0, 0.5])
    y = np.where(X @ w + 0.05 * rng.normal(size=n) > 0, 1.0, -1.0)
    r = dp_gd.fit(Logistic(), X, y, epsilon=5.0, delta=1e-6, data_norm=1.0, random_state=0)
    acc = np.mean(np.sign(X @ r.theta) == y)
    assert acc > 0.93


# ------------------------------------------- issue #10: public constants, relations
def test_add_remove_uses_the_public_size_and_sensitivity_C():
    """D = 100 copies of (e₁, +1) and D′ = 101 copies under add/remove: the sum has
    sensitivity C and is divided by the public dataset_size; T, z, σ, the step
    size and the event are identical on D and D′; without dataset_size: an error."""

    def copies(n):
        return np.tile([[1.0, 0.0]], (n, 1)), np.ones(n)

    kw = dict(TARGET, neighbouring="add-remove", dataset_size=100)
    runs = [dp_gd.fit(Logistic(), *copies(n), random_state=0, **kw) for n in (100, 101)]
    keys = (
        "noise_multiplier",
        "steps",
        "noise_std",
        "sensitivity",
        "normalizer",
        "dataset_size",
        "batch_size",
        "learning_rate",
        "delta",
        "epsilon_spent",
        "neighbouring",
        "accountant",
    )
    a, b = (r.diagnostics for r in runs)
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert runs[0].event == runs[1].event
    z = a["noise_multiplier"]
    assert runs[0].event == SelfComposed(Gaussian(z, neighbouring="add-remove"), a["steps"])
    assert a["steps"] == dp_gd.default_steps(100, 2, 1.0)
    assert a["sensitivity"] == pytest.approx(1.0 / 100)  # C/N, not 2C/n
    assert a["noise_std"] == pytest.approx(z / 100)
    # σ = 0 replay: the mean gradient is divided by N = 100 even with 101 rows
    loss = Logistic()
    X, y = copies(101)
    r = dp_gd.fit(
        loss,
        X,
        y,
        noise_multiplier=0.0,
        data_norm=1.0,
        steps=1,
        learning_rate=1.0,
        neighbouring="add-remove",
        dataset_size=100,
    )
    np.testing.assert_allclose(r.theta, -loss.gradient(np.zeros(2), X, y) * 101 / 100)
    for n in (100, 101):
        with pytest.raises(InvalidPrivacyParameter, match="dataset_size"):
            dp_gd.fit(Logistic(), *copies(n), **TARGET, neighbouring="add-remove", steps=5)
    with pytest.raises(InvalidPrivacyParameter, match="dataset_size"):  # n is public here
        dp_gd.fit(Logistic(), *copies(100), **TARGET, dataset_size=99)
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        dp_gd.fit(Logistic(), *copies(100), **TARGET, neighbouring="sideways")
