"""Private hyperparameter selection, accounted end to end.

* :class:`PrivateRandomSearch` — random search with a random number of runs
  (Papernot & Steinke 2022; Liu & Talwar 2019), scores on a private
  validation split, ``dp_event_`` for the whole search.
* :func:`tuning_search` — the Λ search of ``dperm fit --tune``.
* :func:`search_epsilon`, :func:`calibrate_run_epsilon` — the search's ε for a
  per-run ε, and the largest per-run ε for a target.
* :mod:`~dperm.model_selection.repetitions` — the laws of the number of runs
  and the RDP / (ε, δ) theorems of "output the best of K runs".

See ``docs/model_selection.md``.
"""

from .analysis import REPETITIONS, calibrate_run_epsilon, search_epsilon
from .repetitions import (
    Poisson,
    TruncatedNegativeBinomial,
    liu_talwar_guarantee,
    rdp_poisson_repetitions,
    rdp_truncated_negative_binomial,
)
from .search import DEFAULT_ALPHA_GRID, PrivateRandomSearch
from .tuning import AutoTuningSearch, search_pays, tuning_search

__all__ = [
    "DEFAULT_ALPHA_GRID",
    "REPETITIONS",
    "AutoTuningSearch",
    "Poisson",
    "PrivateRandomSearch",
    "TruncatedNegativeBinomial",
    "calibrate_run_epsilon",
    "liu_talwar_guarantee",
    "rdp_poisson_repetitions",
    "rdp_truncated_negative_binomial",
    "search_epsilon",
    "search_pays",
    "tuning_search",
]
