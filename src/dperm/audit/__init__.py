"""Empirical privacy auditing: lower bounds on the ε an algorithm really spends.

:func:`audit` runs a private algorithm many times on a worst-case pair of
neighbouring datasets (a canary row at the norm bound, :mod:`.canary`), scores
every output by its projection on the canary direction, and turns the error
rates of the best threshold test into a Clopper–Pearson lower bound ε_LB
(:mod:`.stats`).  ε_LB > ε refutes the claim; ε_LB ≤ ε is what a correct
implementation shows.  Algorithms are audited through runners
(:mod:`.runners`, :func:`register_runner`).  See ``docs/auditing.md``.
"""

from .auditor import AuditResult, audit, run_scores
from .canary import CanaryPair, canary_pair_from_data, make_canary_pair
from .runners import Runner, available_runners, get_runner, register_runner, runner_names
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
    "get_runner",
    "make_canary_pair",
    "register_runner",
    "run_scores",
    "runner_names",
    "select_threshold",
]
