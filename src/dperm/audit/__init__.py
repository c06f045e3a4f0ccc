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
(:mod:`.registry`, :func:`register_runner`; dperm's own are the table of
:mod:`.runners`, its calls in :mod:`.fits`).  See ``docs/auditing.md``.

The public names are those of the submodules' ``__all__``: :mod:`.auditor`
(:func:`audit`, :class:`AuditResult`), :mod:`.canary` (the pairs),
:mod:`.gdp` (the μ-GDP bound), :mod:`.registry` (:class:`Runner` and the
registry) and :mod:`.stats` (Clopper–Pearson and the threshold tests).
"""

from . import auditor, canary, gdp, registry, stats
from . import runners as runners  # the table of dperm's runners, registered on import
from .auditor import *  # noqa: F403
from .canary import *  # noqa: F403
from .gdp import *  # noqa: F403
from .registry import *  # noqa: F403
from .stats import *  # noqa: F403

__all__ = [*auditor.__all__, *canary.__all__, *gdp.__all__, *registry.__all__, *stats.__all__]
