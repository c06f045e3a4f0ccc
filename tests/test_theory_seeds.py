"""Every seed theorem's bound, evaluated for the run that was made, against the
excess measured on synthetic data where the theorem's assumptions hold (mean over
seeds; the bounds are on expectations)."""

import math

import numpy as np
import pytest

from dperm.algorithms import dp_sgd, exponential_sampling, objective_perturbation
from dperm.algorithms import structured_output_perturbation as sop
from dperm.bounds import expmech_erm_bound
from dperm.constraints import L2Ball
from dperm.exceptions import InvalidPrivacyParameter
from dperm.losses import Logistic
from dperm.norms import L1Norm, gaussian_width
from dperm.solvers import minimize
from dperm.theory import (
    kd_objective_width_bound,
    kd_theorem1_bound,
    kd_theorem4_bound,
    lecture14_objective_bound,
    lecture15_sgd_bound,
    theoretical_bound,
)


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)  # not separable
    return X, y


def _mean_loss(X, y, theta):
    return float(np.mean(Logistic().pointwise(X @ theta, y)))


def test_smith_ullman_thm25_in_expectation_closed_form_and_measured():
    # the lecture's constants at Δ = GR: (2GR/(εn))(d(1 + ln(εn/d)) + 1)
    n, d, eps, G, R = 1000, 3, 1.0, 1.0, 1.0
    got = expmech_erm_bound(n=n, d=d, epsilon=eps, lipschitz=G, radius=R, sensitivity=G * R)
    assert got == pytest.approx((2 * G * R / (eps * n)) * (d * (1 + math.log(eps * n / d)) + 1))
    # measured: exponential sampling (exact, d = 2) on the unit ball, 40 draws
    X, y = _data(300, 2)
    best = minimize(Logistic(), X, y, constraint=L2Ball(1.0), tol=1e-10).theta
    res = [
        exponential_sampling.fit(Logistic(), X, y, epsilon=1.0, radius=1.0, random_state=s)
        for s in range(40)
    ]
    excess = np.mean([_mean_loss(X, y, r.theta) - _mean_loss(X, y, best) for r in res])
    bound = expmech_erm_bound(
        n=300, d=2, epsilon=1.0, lipschitz=1.0, radius=1.0,
        sensitivity=res[0].diagnostics["sensitivity"],
    )  # fmt: skip
    assert 0 <= excess <= bound < 2.0  # below the trivial bound 2GR
    assert theoretical_bound("exponential", n=300, d=2, epsilon=1.0, lipschitz=1.0, radius=1.0)


def test_lecture14_eq147_bounds_the_measured_excess():
    n, d, lam_ = 2000, 4, 0.02
    X, y = _data(n, d, 1)
    star = minimize(Logistic(), X, y, l2=1e-10, tol=1e-12).theta  # unregularized θ*
    excess, m2 = [], []
    for s in range(12):
        r = objective_perturbation.fit(
            Logistic(), X, y, epsilon=1.0, delta=0.0, data_norm=1.0, alpha=lam_, random_state=s
        )
        excess.append(_mean_loss(X, y, r.theta) - _mean_loss(X, y, star))
        scale = r.diagnostics["noise_scale"] / n  # ‖b/n‖ ~ Gamma(d, scale)
        m2.append(d * (d + 1) * scale**2)
        lam_tot = r.diagnostics["l2_total"]
    b = lecture14_objective_bound(
        n=n, d=d, epsilon=1.0, delta=0.0, regularization=lam_tot,
        noise_second_moment=m2[0], theta_norm=float(np.linalg.norm(star)),
    )  # fmt: skip
    assert np.mean(excess) <= b.value
    assert "log p" in b.rate and b.constant_known


def test_lecture15_sgd_bound_changes_with_the_run_and_bounds_the_measured_excess():
    n, d = 2000, 3
    X, y = _data(n, d, 2)
    star = minimize(Logistic(), X, y, l2=1e-10, tol=1e-12).theta
    kw = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, neighbouring="replace-one")
    runs = [dp_sgd.fit(Logistic(), X, y, random_state=s, **kw) for s in range(6)]
    dg = runs[0].diagnostics
    excess = np.mean([_mean_loss(X, y, r.theta) - _mean_loss(X, y, star) for r in runs])
    common = dict(
        n=n, d=d, epsilon=1.0, delta=1e-5, lipschitz=1.0, theta_norm=float(np.linalg.norm(star)),
        learning_rate=dg["learning_rate"], noise_std=dg["noise_std"], clipping_norm=1.0,
        sampling_rate=dg["sampling_rate"], batch_size=dg["normalizer"],
    )  # fmt: skip
    b = theoretical_bound("dp-sgd", steps=dg["steps"], **common)
    assert excess <= b.value
    # the bound now depends on what was run (issue: it did not)
    assert theoretical_bound("dp-sgd", steps=4 * dg["steps"], **common).value != b.value
    assert theoretical_bound("dp-sgd", steps=dg["steps"], averaging="uniform", **common).value < (
        b.value
    )
    with pytest.raises(Exception, match="clipping_norm"):
        theoretical_bound("dp-sgd", steps=10, **{**common, "clipping_norm": 0.5})
    # Lemma 15.7 (strongly convex, η_t = 1/(αt)): Shamir & Zhang's constant 17
    sc = lecture15_sgd_bound(
        steps=100, learning_rate=1.0, gradient_second_moment=2.0, theta_norm=1.0,
        schedule="inverse_time", strong_convexity=0.5,
    )  # fmt: skip
    assert sc.value == pytest.approx(17 * 2.0 * (1 + math.log(100)) / (0.5 * 100))


def test_kd_theorem1_lemma1_bounds_the_measured_release_cost():
    n, d, Lam, lam = 3000, 6, 0.1, 0.01
    X, y = _data(n, d, 3)
    norm = L1Norm(d)

    def J(theta):
        return _mean_loss(X, y, theta) + lam * norm.norm(theta) + 0.5 * Lam * theta @ theta

    kw = dict(norm=norm, data_norm=1.0, alpha=Lam, lam=lam * n, denoise="none", tol=1e-12)
    costs = []
    for s in range(20):
        r = sop.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, random_state=s, **kw)
        # the near-noiseless reference: ε = 1e12 (δ < 1/n, as every fit must have)
        exact = sop.fit(Logistic(), X, y, epsilon=1e12, delta=1e-5, random_state=s, **kw)
        costs.append(J(r.theta) - J(exact.theta))
        sigma = r.diagnostics["noise_scale"]
    e_g = math.sqrt(2) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
    w = gaussian_width(norm, ball="dual").value
    b = kd_theorem1_bound(
        n=n, d=d, epsilon=1.0, delta=1e-5, lipschitz=1.0, lam=lam, strong_convexity=Lam,
        noise_first_moment=sigma * e_g, noise_second_moment=d * sigma**2, gaussian_width=w,
        theta_norm=1.0,
    )  # fmt: skip
    assert np.mean(costs) <= b.value
    assert "Jain–Thakurta" in b.rate


def test_kd_rates_evaluate_and_refuse_bad_input():
    b4 = kd_theorem4_bound(
        n=1000, epsilon=1.0, delta=1e-6, lipschitz=1.0, strong_convexity=0.1, lam=0.01,
        vertex_radius=2.0, dual_width=3.0, log_n_vertices=4 * math.log(2),
    )  # fmt: skip
    assert b4.value > 0 and not b4.constant_known
    b43 = kd_objective_width_bound(
        n=1000, epsilon=1.0, delta=1e-6, lipschitz=1.0, smoothness=0.25,
        constraint_width=2.0, constraint_diameter=2.0,
    )  # fmt: skip
    assert b43.value == pytest.approx((2 * math.sqrt(math.log(1e6)) + 0.5) / 1000)
    with pytest.raises(Exception, match="delta"):
        kd_objective_width_bound(
            n=10, epsilon=1.0, delta=0.0, lipschitz=1.0, smoothness=0.0,
            constraint_width=1.0, constraint_diameter=1.0,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "name"),
    [({"n": 0}, "n"), ({"epsilon": 0.0}, "epsilon"), ({"epsilon": -1.0}, "epsilon"),
     ({"delta": 1.0}, "delta"), ({"d": 0}, "d"), ({"gaussian_width": 0.0}, "gaussian_width")],
)  # fmt: skip
def test_kd_theorem1_refuses_bad_input_naming_it(bad, name):
    """ε ≤ 0 or n ≤ 0 would divide by zero or flip the rate's sign: refused, named."""
    args = dict(
        n=100, d=4, epsilon=1.0, delta=1e-5, lipschitz=1.0, lam=0.1, strong_convexity=0.1,
        noise_first_moment=0.5, noise_second_moment=0.3, gaussian_width=2.0,
    )  # fmt: skip
    with pytest.raises(InvalidPrivacyParameter, match=name):
        kd_theorem1_bound(**{**args, **bad})
    assert kd_theorem1_bound(**args).value > 0
