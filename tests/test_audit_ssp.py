"""Audit runners of sufficient-statistics perturbation (SSP and AdaSSP, Wang 2018):
their pair attains the calibrated sensitivity, an honest audit does not refute the
claim, and the two likeliest calibration bugs are refuted (mutation tests).

The runners ``ssp`` and ``adassp`` (rows of the table in src/dperm/audit/runners.py) fit
``DPLinearRegression`` at its defaults on the replace-one canary pair (x_c = e_d, labels
±1) and score the released Xᵀy along the canary row: the Neyman–Pearson statistic of
the pair, exactly Gaussian, so the μ-GDP estimate is tight.  That release holds 1/2 of
SSP's GDP budget μ² and 1/3 of AdaSSP's; the honest ε_LB sits well below ε by design.
The honest audits at ε = 1 run in tests/test_audit_suite.py with every other runner.
Seeds are fixed: every audit here is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from unittest import mock

import numpy as np
import pytest

from dperm import DPLinearRegression
from dperm.algorithms import ssp
from dperm.audit import audit, get_runner
from dperm.audit.canary import CanaryPair
from dperm.audit.runners import ssp_release_statistic

N_JOBS = 2
#: a large claim: μ = 1/σ(ε, δ) ≈ 2.8, where a 40% excess of μ is measured in few runs
EPSILON_LARGE = 10.0


def _with_stds(scale_index: int, factor: float):
    """A noise_scales that multiplies the noise std of one release by ``factor``."""
    orig = ssp.noise_scales

    def noise_scales(*args, **kwargs):
        out = orig(*args, **kwargs)
        stds = list(out["stds"])
        stds[scale_index] *= factor
        return {**out, "stds": stds}

    return noise_scales


# --------------------------------------------------------------------------- the runners
def test_the_adassp_runner_is_the_default_path():
    """``adassp`` audits DPLinearRegression(mechanism="adassp") with every other default:
    data_norm, label_bound, intercept and the default δ (the auto default has its own row)."""
    est = DPLinearRegression()
    assert (est.data_norm, est.label_bound, est.fit_intercept) == (1.0, 1.0, True)
    r = get_runner("adassp")
    assert r.default_delta == pytest.approx(min(1.0 / r.n**2, 1e-5))
    assert r.noise == "gaussian" and r.neighbouring == "replace-one"


@pytest.mark.parametrize("name", ["ssp", "adassp"])
def test_the_pair_attains_the_calibrated_sensitivity_of_xty(name):
    """With every noise std set to 0 the statistic moves by exactly Δ₃ = 2RB between D and
    D′ (R = √(1 + s²) the row bound with the intercept column): the pair is the worst
    case of the release the statistic reads."""
    r = get_runner(name)
    pair = r.make_pair()
    with mock.patch.object(ssp, "noise_scales", _with_stds(-1, 0.0)):
        s0 = r.statistic(r.fn(pair.X, pair.y, 1.0, 1e-4, np.random.default_rng(0)), pair.direction)
        s1 = r.statistic(
            r.fn(pair.X_prime, pair.y_prime, 1.0, 1e-4, np.random.default_rng(0)), pair.direction
        )
    est = DPLinearRegression(mechanism=name, epsilon=1.0, delta=1e-4, random_state=0)
    sens = est.fit(pair.X, pair.y).diagnostics_["sensitivities"][-1]
    assert s1 - s0 == pytest.approx(2.0 * math.sqrt(1.0 + 0.25)) and sens == pytest.approx(s1 - s0)


def test_statistic_rejects_a_release_of_the_wrong_shape():
    from dperm.exceptions import DpermError

    with pytest.raises(DpermError, match="shape"):
        ssp_release_statistic(np.zeros(2), np.array([0.0, 1.0]))


# ----------------------------------------------------------- M1: Xᵀy sensitivity halved
def _ssp_xty_sensitivity_halved(X, y, epsilon, delta, rng):
    """Bug: the Xᵀy release is calibrated to the add/remove sensitivity RB instead of the
    replace-one 2RB (the noise std halved: that release alone is then 2/√2 = 1.41 times
    the whole claim's μ)."""
    with mock.patch.object(ssp, "noise_scales", _with_stds(-1, 0.5)):
        return get_runner("ssp").fn(X, y, epsilon, delta, rng)


@pytest.mark.parametrize(
    "broken,refuted",
    # measured at 1000 runs, seeds 1–3: honest ε_LB 5.0–5.7, halved 13.7–14.2 (ε = 10)
    [(None, False), (_ssp_xty_sensitivity_halved, True)],
    ids=["honest-control", "xty-sensitivity-halved"],
)
def test_mutation_ssp_xty_sensitivity_halved_is_caught(broken, refuted):
    base = get_runner("ssp")
    r = base if broken is None else base.mutate(broken, "ssp[xty/2]")
    if broken is not None:  # the mutation is alive: same seed, different release
        pair = base.make_pair()
        a = broken(pair.X_prime, pair.y_prime, 1.0, 1e-4, np.random.default_rng(0))
        b = base.fn(pair.X_prime, pair.y_prime, 1.0, 1e-4, np.random.default_rng(0))
        assert not np.allclose(a, b)
    res = audit(r, epsilon=EPSILON_LARGE, runs=1000, random_state=201, n_jobs=N_JOBS)
    assert res.method == "gdp"
    if refuted:
        assert res.violated and res.epsilon_lower_bound > 1.2 * EPSILON_LARGE, res.summary()
    else:
        assert res.epsilon_lower_bound < 0.8 * EPSILON_LARGE, res.summary()


# ------------------------------------------------------- M2: AdaSSP's λ_min not noised
def _lambda_pair() -> CanaryPair:
    """A replace-one pair that moves λ_min of the centered scatter (the release AdaSSP
    adds): base rows (±0.8, 0), D has the row (0, 1) and D′ the row (0, 0) instead, so
    λ_min is ≈ 1 on D and 0 on D′ (both rows inside the default bounds)."""
    n = 40
    Xb = np.zeros((n - 1, 2))
    Xb[:, 0] = np.where(np.arange(n - 1) % 2 == 0, 0.8, -0.8)
    yb = np.where(np.arange(n - 1) % 3 == 0, 0.5, -0.5)
    X = np.vstack([Xb, [[0.0, 1.0]]])
    X_prime = np.vstack([Xb, [[0.0, 0.0]]])
    y = np.append(yb, 0.0)
    return CanaryPair(
        X=X,
        y=y,
        X_prime=X_prime,
        y_prime=y.copy(),
        direction=np.array([0.0, 1.0]),
        neighbouring="replace-one",
        canary_norm=1.0,
    )


def _adassp_lambda_min(X, y, epsilon, delta, rng):
    """The released λ̂_min of DPLinearRegression(mechanism="adassp") (its default path)."""
    est = DPLinearRegression(
        mechanism="adassp", epsilon=epsilon, delta=delta, random_state=rng
    ).fit(X, y)
    return np.array([est.diagnostics_["lambda_min_released"]])


def _adassp_lambda_min_unnoised(X, y, epsilon, delta, rng):
    """Bug: λ_min is released without its Gaussian noise."""
    with mock.patch.object(ssp, "noise_scales", _with_stds(0, 0.0)):
        return _adassp_lambda_min(X, y, epsilon, delta, rng)


def _first(output, direction) -> float:
    return float(np.asarray(output).ravel()[0])


@pytest.mark.parametrize(
    "fn,refuted",
    # measured at 300 runs: honest ε_LB 0, unnoised: every run separated (ε_LB ≈ 5)
    [(_adassp_lambda_min, False), (_adassp_lambda_min_unnoised, True)],
    ids=["honest-control", "lambda-min-unnoised"],
)
def test_mutation_adassp_lambda_min_not_noised_is_caught(fn, refuted):
    pair = _lambda_pair()
    lam = [
        float(np.linalg.eigvalsh(np.cov(Z.T, bias=True) * Z.shape[0])[0])
        for Z in (pair.X, pair.X_prime)
    ]
    assert lam[0] > 0.9 and lam[1] == pytest.approx(0.0, abs=1e-12)  # the pair moves λ_min
    r = dataclasses.replace(get_runner("adassp"), name=fn.__name__, fn=fn, statistic=_first)
    res = audit(r, epsilon=1.0, runs=300, data=pair, random_state=202, n_jobs=N_JOBS)
    if refuted:
        assert res.violated_assumption_free and res.epsilon_lower_bound_cp > 3.0, res.summary()
    else:
        assert res.epsilon_lower_bound <= 0.2, res.summary()
