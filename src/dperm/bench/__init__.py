"""``dperm bench``: reproduce the published comparison of DP convex optimization
(Iyengar et al., IEEE S&P 2019, Fig. 1) side by side with dperm's honest defaults
and with peer libraries.

>>> from dperm.bench import run_bench                         # doctest: +SKIP
>>> df = run_bench(["synthetic-l"], [0.1, 1.0], ["non-private", "objective"])  # doctest: +SKIP
"""

from .protocols import PROTOCOLS, get_protocol, paper_grid
from .report import PUBLISHED, PUBLISHED_EPSILON, comparison_frame, write_outputs
from .runner import DEFAULT_DATASETS, DEFAULT_EPSILONS, list_algorithms, run_bench

__all__ = [
    "DEFAULT_DATASETS",
    "DEFAULT_EPSILONS",
    "PROTOCOLS",
    "PUBLISHED",
    "PUBLISHED_EPSILON",
    "comparison_frame",
    "get_protocol",
    "list_algorithms",
    "paper_grid",
    "run_bench",
    "write_outputs",
]
