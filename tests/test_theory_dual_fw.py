"""The derived excess-risk bound of the private dual Frank-Wolfe
(:func:`dperm.theory.dual_frank_wolfe_bound`, in place of K–D Theorem 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dperm import DPLogisticRegression
from dperm.algorithms import dual_frank_wolfe as dfw
from dperm.exceptions import InvalidPrivacyParameter
from dperm.losses import Logistic
from dperm.norms import L1Norm, gaussian_width
from dperm.theory import bound_for_estimator, dual_frank_wolfe_bound

N, D, LAM_SC, LAM, T, EPS = 2000, 4, 0.05, 0.02, 10, 1.0


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    X = 0.999 * X / np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ np.array([2.0, -2.0, 0.0, 0.0]) + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    return X, y


def _kw(**over):
    kw = dict(
        n=N,
        d=D,
        epsilon_step=0.01,
        n_steps=T,
        log_n_vertices=D * math.log(2.0),
        vertex_radius=math.sqrt(D),  # ℓ1: |P|(F) = [−1, 1]^d
        lipschitz=1.0,
        strong_convexity=LAM_SC,
        lam=LAM,
        epsilon_release=0.8 * EPS,
        gaussian_width=D * math.sqrt(2.0 / math.pi),  # E‖g‖₁
    )
    kw.update(over)
    return kw


def test_bound_holds_for_the_measured_excess_risk(problem):
    X, y = problem
    loss, norm = Logistic(), L1Norm(D)

    def P(t):
        return loss.value(t, X, y) + 0.5 * LAM_SC * t @ t + LAM * np.abs(t).sum()

    sol = dfw.solve(loss, X, y, norm=norm, lam=LAM, alpha=LAM_SC)  # certified gap
    p_star = P(sol.theta) - sol.gap
    runs = [
        dfw.fit(
            loss, X, y, norm=norm, epsilon=EPS, data_norm=1.0, alpha=LAM_SC, lam=LAM,
            n_steps=T, random_state=seed,
        )
        for seed in range(20)
    ]  # fmt: skip
    excess = np.array([P(r.theta) - p_star for r in runs])
    dg = runs[0].diagnostics
    bound = dual_frank_wolfe_bound(
        **_kw(
            epsilon_step=dg["epsilon_step"],
            lipschitz=dg["lipschitz"],
            smoothness=dg["smoothness"],
            gaussian_width=gaussian_width(norm, ball="dual").value,
        )
    )
    assert bound.constant_known
    upper = excess.mean() + 3 * excess.std(ddof=1) / math.sqrt(excess.size)
    assert np.all(excess >= -1e-8) and upper <= bound.value


def test_noiseless_limit_is_the_frank_wolfe_term():
    """ε₀, ε_rel → ∞: only 2M√((2/Λ)·8λ²ρ²/(Λ(T+2))) = 8Mλρ/(Λ√(T+2)) remains."""
    b = dual_frank_wolfe_bound(**_kw(epsilon_step=1e12, epsilon_release=1e12))
    rho, M = math.sqrt(D), 1.0 + LAM * math.sqrt(D)
    assert b.value == pytest.approx(8 * M * LAM * rho / (LAM_SC * math.sqrt(T + 2)), rel=1e-6)
    more_steps = dual_frank_wolfe_bound(
        **_kw(epsilon_step=1e12, epsilon_release=1e12, n_steps=4 * T)
    )
    assert more_steps.value < b.value


def test_bound_decreases_with_the_budget_and_grows_with_the_width():
    base = dual_frank_wolfe_bound(**_kw())
    assert dual_frank_wolfe_bound(**_kw(epsilon_step=0.1)).value < base.value
    assert dual_frank_wolfe_bound(**_kw(epsilon_release=8.0)).value < base.value
    assert dual_frank_wolfe_bound(**_kw(gaussian_width=10.0)).value > base.value
    with pytest.raises(InvalidPrivacyParameter):
        dual_frank_wolfe_bound(**_kw(strong_convexity=0.0))


def test_bound_for_estimator_dual_frank_wolfe(problem):
    """The derived bound is for the raw release θ(s_T) + κ: reported for a raw fit
    (penalty "elasticnet", or a norm with ``denoise="none"``), None for a denoised one
    (whose bound needs the private Ω(θ̂))."""
    X, y = problem
    kw = dict(mechanism="dual-frank-wolfe", alpha=0.1, classes=[-1, 1], random_state=0)
    raw = DPLogisticRegression(penalty="elasticnet", **kw).fit(X, y)
    told = DPLogisticRegression(penalty=L1Norm(D), **kw)
    told.denoise = "none"
    told.fit(X, y)
    for est in (raw, told):
        b = bound_for_estimator(est, N)
        assert b is not None and b.constant_known and math.isfinite(b.value) and b.value > 0
        assert "derived" in b.source
    denoised = DPLogisticRegression(penalty=L1Norm(D), **kw).fit(X, y)
    assert denoised.diagnostics_["denoise"] == "hard"
    assert bound_for_estimator(denoised, N) is None
