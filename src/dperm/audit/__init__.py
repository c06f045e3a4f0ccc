"""Empirical privacy auditing: lower bounds on the ε an algorithm really spends.

:func:`audit` runs a private algorithm many times on a worst-case pair of
neighbouring datasets (a canary row at the norm bound, :mod:`.canary`), scores
every output by a one-dimensional statistic (its projection on the canary
direction), and turns the error rates of threshold tests into two lower
bounds: the assumption-free Clopper–Pearson bound ε_LB (:mod:`.stats`) and,
for Gaussian-noise mechanisms, the μ-GDP estimate of Nasr et al. 2023
(:mod:`.gdp`), which has far more power at small δ under the assumption that
the trade-off curve is Gaussian.  ε_LB > ε refutes the claim; ε_LB ≤ ε is what
a correct implementation shows.  Algorithms are audited through runners
(:mod:`.runners`, :func:`register_runner`).  See ``docs/auditing.md``.
"""

from .auditor import METHODS, AuditResult, audit, run_scores
from .canary import CanaryPair, canary_pair_from_data, make_canary_pair
from .gdp import (
    gdp_delta,
    gdp_epsilon,
    gdp_evaluate_test,
    gdp_mu_from_rates,
    gdp_mu_lower_bound,
    gdp_select_threshold,
)
from .runners import (
    Runner,
    available_runners,
    get_runner,
    projection,
    register_runner,
    release_statistic,
    runner_names,
)
from .stats import (
    ThresholdTest,
    clopper_pearson_interval,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_rates,
    epsilon_lower_bound,
    evaluate_test,
    select_threshold,
)

__all__ = [
    "METHODS",
    "AuditResult",
    "CanaryPair",
    "Runner",
    "ThresholdTest",
    "audit",
    "available_runners",
    "canary_pair_from_data",
    "clopper_pearson_interval",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "evaluate_test",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_evaluate_test",
    "gdp_mu_from_rates",
    "gdp_mu_lower_bound",
    "gdp_select_threshold",
    "get_runner",
    "make_canary_pair",
    "projection",
    "register_runner",
    "release_statistic",
    "run_scores",
    "runner_names",
    "select_threshold",
]
