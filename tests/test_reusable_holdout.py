"""Thresholdout (Dwork et al., Science 2015): accounting, noise law, and the
adaptive-overfitting experiment it exists for."""

import numpy as np
import pytest
from scipy import stats

from dperm.accounting import epsilon_spent
from dperm.exceptions import BudgetExceededError, InvalidPrivacyParameter
from dperm.model_selection.reusable_holdout import Thresholdout


def test_accounting_closed_form():
    rng = np.random.default_rng(0)
    train, hold = rng.random(500), rng.random(800)
    t = Thresholdout(train, hold, sigma=0.02, budget=3, random_state=0)
    assert t.dp_event_.count == 0
    t.query(lambda d: d)
    assert t.epsilon_per_unit == pytest.approx(2 / (0.02 * 800))
    # queries far apart on the two sets always spend (|a_h − a_t| = 1 ≫ T) until B units
    while t.remaining:
        t.query(lambda d: (d.size == 800) * np.ones(d.size))
    assert t.dp_event_.count == 3
    assert epsilon_spent(t.dp_event_, delta=0.0, accountant="basic") == pytest.approx(
        3 * 2 / (0.02 * 800)
    )
    with pytest.raises(BudgetExceededError):
        t.query(lambda d: d)
    with pytest.raises(InvalidPrivacyParameter, match="sigma"):
        Thresholdout(train, hold, sigma=0.0)


def test_answers_are_train_means_or_laplace_noised_holdout_means():
    hold = np.ones(1000)
    answers = []
    for s in range(400):
        t = Thresholdout(np.zeros(1000), hold, sigma=0.01, random_state=s)
        answers.append(t.query(lambda d: d))  # |a_h − a_t| = 1 ≫ T: always the holdout
    # a_h + Lap(σ): KS test against the Laplace law
    assert stats.kstest(np.array(answers) - 1.0, stats.laplace(scale=0.01).cdf).pvalue > 1e-3
    t = Thresholdout(np.full(1000, 0.5), np.full(1000, 0.5), random_state=0)
    assert t.query(lambda d: d) == 0.5 and t.remaining == t.budget  # below: the train mean


def test_adaptive_overfitting_is_prevented():
    # Dwork et al. 2015, Fig. 2 in small: labels independent of the features; the
    # analyst keeps the features that correlate on train *and* on the holdout answers,
    # then asks for its classifier's holdout accuracy (true accuracy 1/2)
    rng = np.random.default_rng(1)
    n, d = 1000, 400
    Xt, Xh = rng.choice([-1.0, 1.0], (n, d)), rng.choice([-1.0, 1.0], (n, d))
    yt, yh = rng.choice([-1.0, 1.0], n), rng.choice([-1.0, 1.0], n)
    train, hold = (Xt, yt), (Xh, yh)

    def corr(j):
        return lambda D: (D[0][:, j] * D[1] + 1) / 2  # in [0, 1], mean 1/2 + corr/2

    def run(ask):
        ct = np.array([np.mean(corr(j)(train)) for j in range(d)]) * 2 - 1
        ch = np.array([ask(corr(j)) for j in range(d)]) * 2 - 1
        keep = (np.abs(ct) > 1 / np.sqrt(n)) & (np.sign(ct) == np.sign(ch))
        w = np.where(keep, np.sign(ct), 0.0)
        return ask(lambda D: (np.sign(D[0] @ w + 1e-9) == D[1]).astype(float))

    plain = run(lambda phi: float(np.mean(phi(hold))))
    reusable = run(Thresholdout(train, hold, budget=400, random_state=0).query)
    assert plain > 0.56  # the standard holdout overfits (5 standard errors above 1/2)
    assert abs(reusable - 0.5) < 0.05  # Thresholdout reports about the truth
