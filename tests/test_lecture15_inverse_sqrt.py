"""Lecture 15, Lemma 15.6 at its own step size η_t = D/(G√t) (issue #40): DP-SGD with
``schedule="inverse_sqrt"`` over a constraint set, its default step, and measured runs
against the last-iterate bound of Shamir & Zhang (ICML 2013, Theorem 2) and the
uniform-average bound of Zinkevich (2003, Theorem 1)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dperm.algorithms import dp_sgd
from dperm.bounds import sgd_gradient_second_moment
from dperm.constraints import L2Ball
from dperm.exceptions import InvalidPrivacyParameter
from dperm.losses import HuberSVM, Logistic
from dperm.schedules import inverse_sqrt_learning_rate
from dperm.solvers import minimize
from dperm.theory import lecture15_sgd_bound, theoretical_bound

KW = dict(epsilon=0.5, delta=1e-5, data_norm=1.0, neighbouring="replace-one")


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    w = np.zeros(d)
    w[:2] = [2.0, -1.0]
    y = np.where(X @ w + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _fit(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # clipping warnings of the synthetic rows
        return dp_sgd.fit(Logistic(), X, y, schedule="inverse_sqrt", **KW, **kw)


def _bound(dg, n, d, radius, averaging):
    return theoretical_bound(
        "dp-sgd", n=n, d=d, epsilon=KW["epsilon"], delta=KW["delta"], lipschitz=1.0,
        radius=radius, steps=dg["steps"], learning_rate=dg["learning_rate"],
        noise_std=dg["noise_std"], clipping_norm=dg["clipping_norm"],
        sampling_rate=dg["sampling_rate"], batch_size=dg["normalizer"],
        schedule="inverse_sqrt", averaging=averaging,
    )  # fmt: skip


def test_the_default_step_is_the_lemmas_d_over_g():
    X, y = _data(500, 4, 0)
    R, alpha = 1.5, 0.01
    dg = _fit(X, y, constraint=L2Ball(R), alpha=alpha, random_state=0).diagnostics
    g2 = sgd_gradient_second_moment(
        clipping_norm=dg["clipping_norm"], noise_std=dg["noise_std"], dim=4,
        sampling_rate=dg["sampling_rate"], batch_size=dg["normalizer"],
    )  # fmt: skip
    G = math.sqrt(g2) + alpha * R
    assert dg["learning_rate"] == pytest.approx(2 * R / G, rel=1e-12)
    assert dg["learning_rate"] == pytest.approx(inverse_sqrt_learning_rate(2 * R, G))
    assert dg["schedule"].startswith("InverseSqrt")
    # without a constraint (no diameter) the step is the general default rule
    free = _fit(X, y, random_state=0).diagnostics
    const = dp_sgd.fit(Logistic(), X, y, random_state=0, **KW).diagnostics
    assert free["learning_rate"] == pytest.approx(const["learning_rate"])


@pytest.mark.parametrize("averaging", ["last", "uniform"])
def test_measured_runs_stay_below_the_bound(averaging):
    """Mean excess over 12 seeds (+3 standard errors) of F(θ) − min_C F below the bound
    (n = 400, d = 10, ε = 0.5: much noise).  The bound is Theorem 2's worst case; its
    value at the lemma's step is the smallest over η (it is minimized at η = D/G)."""
    n, d, R = 400, 10, 1.0
    X, y = _data(n, d, 1)
    best = minimize(Logistic(), X, y, constraint=L2Ball(R), tol=1e-12).theta

    def F(t):
        return float(np.mean(Logistic().pointwise(X @ t, y)))

    runs = [
        _fit(X, y, constraint=L2Ball(R), averaging=averaging, random_state=s) for s in range(12)
    ]
    excess = np.array([F(r.theta) - F(best) for r in runs])
    assert np.all(np.linalg.norm([r.theta for r in runs], axis=1) <= R * (1 + 1e-12))
    dg = runs[0].diagnostics
    b = _bound(dg, n, d, R, averaging)
    assert excess.mean() + 3 * excess.std(ddof=1) / math.sqrt(12) <= b.value
    assert "Shamir & Zhang" in b.source if averaging == "last" else "Zinkevich" in b.source
    for factor in (0.5, 2.0):  # η = D/G minimizes the last-iterate bound
        other = _bound({**dg, "learning_rate": factor * dg["learning_rate"]}, n, d, R, "last")
        assert other.value > _bound(dg, n, d, R, "last").value


def test_the_bound_is_shamir_zhangs_closed_form_and_needs_a_diameter():
    T, eta, g2, D = 99, 0.7, 3.0, 2.0
    last = lecture15_sgd_bound(
        steps=T, learning_rate=eta, gradient_second_moment=g2, theta_norm=1.0,
        schedule="inverse_sqrt", averaging="last", diameter=D,
    )  # fmt: skip
    assert last.value == pytest.approx((D**2 / eta + eta * g2) * (2 + math.log(100)) / 10)
    uni = lecture15_sgd_bound(
        steps=T, learning_rate=eta, gradient_second_moment=g2, theta_norm=1.0,
        schedule="inverse_sqrt", averaging="uniform", diameter=D,
    )  # fmt: skip
    assert uni.value == pytest.approx((D**2 * 10 / (2 * eta) + eta * g2 * 9) / T)
    assert lecture15_sgd_bound(
        steps=T, learning_rate=eta, gradient_second_moment=g2, theta_norm=1.0,
        schedule="inverse_sqrt",
    ) is None  # fmt: skip
    with pytest.raises(InvalidPrivacyParameter, match="radius"):
        theoretical_bound(
            "dp-sgd", n=100, d=2, epsilon=1.0, delta=1e-5, lipschitz=1.0, theta_norm=1.0,
            steps=10, learning_rate=0.1, noise_std=0.1, clipping_norm=1.0,
            schedule="inverse_sqrt",
        )  # fmt: skip


def test_single_sample_sgd_at_the_lemmas_step():
    """Huber SVM (1-Lipschitz, not strongly convex): the lemma needs only convexity; the
    last iterate of single-sample SGD (b = 1, the lecture's Algorithm 3) is covered."""
    n, d, R = 300, 3, 1.0
    X, y = _data(n, d, 2)
    loss = HuberSVM()
    best = minimize(loss, X, y, constraint=L2Ball(R), tol=1e-12).theta

    def F(t):
        return float(np.mean(loss.pointwise(X @ t, y)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = [
            dp_sgd.fit_single_sample(loss, X, y, epsilon=1.0, delta=1e-5, data_norm=1.0,
                                     constraint=L2Ball(R), averaging="last", random_state=s)
            for s in range(8)
        ]  # fmt: skip
    dg = runs[0].diagnostics
    excess = np.array([F(r.theta) - F(best) for r in runs])
    b = theoretical_bound(
        "dp-sgd-single", n=n, d=d, epsilon=1.0, delta=1e-5, lipschitz=1.0, radius=R,
        steps=dg["steps"], learning_rate=dg["learning_rate"], noise_std=dg["noise_std"],
        clipping_norm=dg["clipping_norm"], sampling_rate=dg["sampling_rate"],
        batch_size=dg["normalizer"], schedule="inverse_sqrt", averaging="last",
    )  # fmt: skip
    assert excess.mean() + 3 * excess.std(ddof=1) / math.sqrt(8) <= b.value
