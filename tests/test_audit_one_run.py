"""One-run auditing (Steinke, Nasr, Jagielski 2023; dperm.audit.one_run): the p-value
against the binomial, the bound validated on a Gaussian mechanism of known ε (never
above ε, positive at large ε), and ``dperm audit --one-run`` on the default logistic
fit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dperm.accounting.gaussian import analytic_gaussian_noise_multiplier
from dperm.audit.one_run import one_run_bound, one_run_p_value
from dperm.cli import main
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter


def test_p_value_is_the_binomial_tail_at_delta_zero_and_grows_with_delta():
    p = 1 / (1 + np.exp(-1.0))
    assert one_run_p_value(100, 40, 30, 1.0, 0.0) == pytest.approx(stats.binom.sf(29, 40, p))
    assert one_run_p_value(100, 40, 30, 1.0, 1e-3) > one_run_p_value(100, 40, 30, 1.0, 0.0)
    with pytest.raises(InvalidPrivacyParameter):
        one_run_p_value(10, 20, 5, 1.0, 0.0)


def _gaussian_one_run(epsilon, delta, m, rng):
    """One run of the Gaussian mechanism on m coins: canary j releases Sⱼ/2 + N(0, σ²),
    σ the analytic calibration of sensitivity 1 (flipping a coin moves its release by 1)
    — exactly (ε, δ)-DP with respect to every coin."""
    coins = rng.choice([-1.0, 1.0], size=m)
    sigma = analytic_gaussian_noise_multiplier(epsilon, delta)
    return coins / 2 + sigma * rng.standard_normal(m), coins


def test_bound_never_exceeds_a_known_epsilon_and_is_positive_when_large():
    rng = np.random.default_rng(0)
    for eps in (0.5, 1.0, 2.0):
        for _ in range(6):
            s, c = _gaussian_one_run(eps, 1e-5, 1000, rng)
            assert one_run_bound(s, c, delta=1e-5)["epsilon_lower_bound"] <= eps
    s, c = _gaussian_one_run(8.0, 1e-5, 1000, rng)
    b = one_run_bound(s, c, delta=1e-5)
    assert 1.0 < b["epsilon_lower_bound"] <= 8.0 and b["correct"] <= b["guesses"]
    with pytest.raises(InvalidDataError):
        one_run_bound([1.0, 2.0], [1.0, 0.0], delta=0.0)


def test_cli_one_run_gives_a_positive_bound_on_the_default_logistic_fit(capsys):
    code = main(["audit", "--one-run", "--epsilon", "4", "--seed", "1", "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, None)
    assert out["model"] == "logistic" and out["mechanism"] == "dp-sgd" and out["canaries"] == 1000
    assert 0.0 < out["epsilon_lower_bound"] <= 4.0 and not out["refuted"]
    assert out["confidence"] == 0.95 and "white box" in out["threat_model"]


def test_cli_one_run_options_need_one_run(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--mechanism", "laplace", "--epsilon", "1", "--canaries", "10"])
    assert exc.value.code == 2 and "--one-run" in capsys.readouterr().err
