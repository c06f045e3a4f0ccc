"""``dperm fit --tune``: a private search around the auto choice, run only when it can pay.

Private tuning at a fixed total ε costs twice: every run gets a fraction of ε (about
ε/3 on the Liu–Talwar route that runs with δ > 0 need, ε/2 for pure runs) and 20 % of
the rows go to validation.  The search can only pay when the per-run budget is so large
that a run at ε_run is nearly as good as one at ε, *and* a default is far from the best
point of the space.  On the bench (benchmarks/REPORT.md) private tuning of the auto
choices' mechanisms never beat the defaults at the same total ε: Adult ε = 0.1 −3.0,
ε = 1 −1.9, ε = 5 −0.5 points; KDD Cup 99 ε = 0.1 −2.9; MNIST ε = 1 −18.8.

The public rule (n, d, k, ε only): with s = n·(ε/3)/√(Dk) the per-run budget statistic
of :mod:`dperm.estimators._auto`, the search runs when s ≥ :data:`SEARCH_ABOVE` (where the
measured loss was at most half a point) and the whole budget goes to the auto choice
otherwise — so ``--tune`` is never worse than the defaults by more than what the
measured cells lost above the threshold.  When it runs, its space is built around the
auto choice: Λ ∈ {"auto"} ∪ a log grid (a numeric Λ makes the auto rule use objective
perturbation; "auto" is the auto choice itself, always a candidate), accounted by
Liu & Talwar (geometric number of runs, δ_run chosen by the search).
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, clone

from .._parameters import store_params
from ..exceptions import InvalidDataError, InvalidPrivacyParameter, UnsupportedOperationError
from .search import DEFAULT_ALPHA_GRID, PrivateRandomSearch

__all__ = ["SEARCH_ABOVE", "AutoTuningSearch", "search_pays", "tuning_search"]

#: the per-run budget statistic n·(ε/3)/√(Dk) above which ``--tune`` searches
SEARCH_ABOVE = 4000.0


def search_pays(n_samples: int, n_features: int, n_classes: int, epsilon: float) -> bool:
    """Whether the public rule runs a private search (module docstring).

    Examples
    --------
    >>> search_pays(30_162, 104, 2, 0.1), search_pays(30_162, 104, 2, 5.0)
    (False, True)
    """
    k = 1 if n_classes <= 2 else int(n_classes)
    s = float(n_samples) * (float(epsilon) / 3.0) / math.sqrt((n_features + 1) * k)
    return s >= SEARCH_ABOVE


class AutoTuningSearch(BaseEstimator):
    """The search of ``dperm fit --tune`` (module docstring).

    Parameters
    ----------
    estimator : dperm estimator
        Its ``epsilon`` and ``delta`` are the budget of the whole search (or fit).
    mean_runs : float, default 10
        E[K] of the search when it runs.

    Attributes
    ----------
    best_estimator_ : fitted estimator
    best_params_ : dict
        The selected parameters ({} when the search did not run).
    searched_ : bool
        Whether the search ran.
    reason_ : str
        Why (the public statistic and the threshold).
    dp_event_, epsilon_, delta_
        Those of the fit or of the whole search.
    """

    def __init__(self, estimator, *, mean_runs=10.0):
        store_params(self, locals())

    def fit(self, X, y):
        """Search (or fit once) on (X, y); returns self."""
        n, d = X.shape
        classes = self.estimator.get_params().get("classes")
        k = len(classes) if classes is not None else len(np.unique(np.asarray(y)))
        eps = float(self.estimator.epsilon)
        self.searched_ = search_pays(n, d, k, eps)
        stat = n * (eps / 3.0) / math.sqrt((d + 1) * (1 if k <= 2 else k))
        if not self.searched_:
            self.reason_ = (
                f"no search: n·(ε/3)/√(Dk) = {stat:.4g} < {SEARCH_ABOVE:g}, where private "
                "tuning lost to the defaults on every measured cell; the whole budget went "
                "to the auto choice"
            )
            self.best_estimator_ = clone(self.estimator).fit(X, y)
            self.best_params_ = {}
        else:
            self.reason_ = f"search: n·(ε/3)/√(Dk) = {stat:.4g} ≥ {SEARCH_ABOVE:g}"
            search = PrivateRandomSearch(
                self.estimator,
                {"alpha": list(DEFAULT_ALPHA_GRID)},
                epsilon=self.estimator.epsilon,
                delta=self.estimator.delta,
                repetitions="geometric",
                run_delta="auto",
                mean_runs=self.mean_runs,
                random_state=self.estimator.random_state,
            ).fit(X, y)
            if search.best_estimator_ is None:  # pragma: no cover - geometric K ≥ 1
                raise InvalidDataError("the private search drew no run")
            self.best_estimator_, self.best_params_ = search.best_estimator_, search.best_params_
        est = self.best_estimator_
        self.dp_event_, self.epsilon_, self.delta_ = est.dp_event_, est.epsilon_, est.delta_
        return self

    def _best(self):
        if getattr(self, "best_estimator_", None) is None:
            raise UnsupportedOperationError("not fitted")
        return self.best_estimator_

    def predict(self, X):
        """Predictions of the selected model."""
        return self._best().predict(X)

    def score(self, X, y):
        """The selected model's ``score``."""
        return self._best().score(X, y)


_PURE_MECHANISMS = ("objective", "output")
#: mechanisms whose Λ the theorem fixes (AMP: its default is the theorem's minimum, which
#: depends on the per-run ε, so a fixed grid would fall below it)
_NOTHING_TO_TUNE = ("amp", "amp-nt", "frank-wolfe")


def tuning_search(estimator, *, mean_runs: float = 10.0) -> PrivateRandomSearch:
    """The search ``dperm fit --tune`` runs: Λ over :data:`DEFAULT_ALPHA_GRID`.

    With ``mechanism="auto"`` (the default): :class:`~dperm.model_selection.tuning.
    AutoTuningSearch`, a search around the auto choice that runs only when the public
    rule says it can pay (else the whole budget goes to the auto choice).

    The estimator's ``epsilon``, ``delta`` and ``random_state`` become the
    search's (its ε is the budget of the whole search).  Objective and output
    perturbation run pure (δ_run = 0) and are accounted by Papernot & Steinke
    (truncated negative binomial, η = 0); other mechanisms run (ε, δ)-DP and are
    accounted by Liu & Talwar (geometric law, ``run_delta="auto"``).

    Raises
    ------
    InvalidPrivacyParameter
        For mechanisms whose Λ is fixed by their theorem ("amp-nt", "frank-wolfe").
    """
    mechanism = estimator.get_params().get("mechanism")
    if mechanism == "auto":  # the defaults: search around the auto choice when it can pay
        return AutoTuningSearch(estimator, mean_runs=mean_runs)
    if mechanism in _NOTHING_TO_TUNE:
        raise InvalidPrivacyParameter(
            f"mechanism {mechanism!r} fixes alpha itself: nothing to tune (drop --tune)"
        )
    common = dict(
        epsilon=estimator.epsilon,
        delta=estimator.delta,
        mean_runs=mean_runs,
        random_state=estimator.random_state,
    )
    space = {"alpha": list(DEFAULT_ALPHA_GRID)}
    if mechanism in _PURE_MECHANISMS:
        return PrivateRandomSearch(estimator, space, eta=0.0, **common)
    return PrivateRandomSearch(
        estimator, space, repetitions="geometric", run_delta="auto", **common
    )
