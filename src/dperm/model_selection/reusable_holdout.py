"""The reusable holdout: Thresholdout (Dwork, Feldman, Hardt, Pitassi, Reingold,
Roth, "The reusable holdout: Preserving validity in adaptive data analysis",
Science 349, 2015; the Lecture 12 notes' "Differential Privacy → Reusable
Holdout").

An analyst asks adaptively chosen statistical queries φ (per-row values in
[0, 1], e.g. the 0/1 correctness of a classifier, a feature's correlation with
the label rescaled to [0, 1]).  For each, :class:`Thresholdout` compares the
training mean a_t = E_S φ with the holdout mean a_h = E_H φ:

* T̂ = T + γ, γ ~ Lap(2σ) (drawn at the start and after every over-threshold
  answer);
* if |a_h − a_t| > T̂ + η, η ~ Lap(4σ): answer a_h + ξ, ξ ~ Lap(σ), spend one
  unit of the budget B and redraw γ; otherwise answer a_t.

Privacy (of the holdout H only; replace-one, its size n_h public).  The
holdout mean has sensitivity Δ = 1/n_h and so has |a_h − a_t| (a_t does not
depend on H).  Between two over-threshold answers the algorithm is
AboveThreshold with threshold noise Lap(2Δ/ε₁) and query noise Lap(4Δ/ε₁),
ε₁ = Δ/σ = 1/(σ n_h), which is ε₁-DP whatever the number of below-threshold
queries (Dwork & Roth 2014, Theorem 3.23; non-monotone queries included); the
answer a_h + Lap(σ) is the Laplace mechanism with ε₂ = Δ/σ.  Each unit of
budget is therefore 2/(σ n_h)-DP and the whole interaction, at most B units,
is the adaptive composition ``SelfComposed(PureEpsilon(2/(σ n_h)), B)`` —
(2B/(σ n_h), 0)-DP by basic composition, less by the advanced/optimal
accountants.  :attr:`Thresholdout.dp_event_` is the event of the units used
so far (a round in progress counts as a whole unit).  The paper's
generalization guarantee follows from this ε through the transfer theorem
(Dwork et al. 2015, Theorem 8 of the supplement).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_positive
from ..accounting.events import PureEpsilon, SelfComposed
from ..exceptions import BudgetExceededError, InvalidDataError, InvalidPrivacyParameter

__all__ = ["Thresholdout"]


class Thresholdout:
    """The reusable holdout (Dwork et al., Science 2015; module docstring).

    Parameters
    ----------
    train, holdout : any
        The two datasets; a query φ is called as ``φ(train)`` and ``φ(holdout)``.
    threshold : float > 0, default 0.04
        T (the paper's value).
    sigma : float > 0, default 0.01
        σ, the Laplace scale unit (the paper's value).
    budget : int ≥ 1, default 100
        B, the number of over-threshold answers allowed.
    random_state : None, int, SeedSequence or Generator

    Attributes
    ----------
    epsilon_per_unit : float
        2/(σ n_h), known after the first query (n_h = the holdout's size).
    dp_event_ : SelfComposed
        ``SelfComposed(PureEpsilon(epsilon_per_unit), units used)``, replace-one.
    remaining : int
        Budget left.

    Raises
    ------
    InvalidPrivacyParameter
        Bad threshold, sigma or budget.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> train, hold = rng.integers(0, 2, 1000), rng.integers(0, 2, 1000)
    >>> t = Thresholdout(train, hold, random_state=0)
    >>> round(t.query(lambda d: d.astype(float)), 1)
    0.5
    >>> t.dp_event_.count
    1
    """

    def __init__(
        self,
        train: Any,
        holdout: Any,
        *,
        threshold: float = 0.04,
        sigma: float = 0.01,
        budget: int = 100,
        random_state=None,
    ):
        self.train, self.holdout = train, holdout
        self.threshold = check_positive(threshold, "threshold")
        self.sigma = check_positive(sigma, "sigma")
        self.budget = check_count(budget, "budget")
        self._rng = check_random_state(random_state)
        self._used = 0
        self._units = 0  # rounds opened (the current one included)
        self._n_holdout: int | None = None
        self._noisy_threshold = self.threshold + self._rng.laplace(scale=2.0 * self.sigma)

    @property
    def remaining(self) -> int:
        return self.budget - self._used

    @property
    def epsilon_per_unit(self) -> float:
        if self._n_holdout is None:
            raise InvalidPrivacyParameter("epsilon_per_unit is known after the first query")
        return 2.0 / (self.sigma * self._n_holdout)

    @property
    def dp_event_(self) -> SelfComposed:
        if self._n_holdout is None:
            return SelfComposed(PureEpsilon(0.0), 0)
        return SelfComposed(PureEpsilon(self.epsilon_per_unit), self._units)

    @staticmethod
    def _values(phi: Callable, data: Any, name: str) -> np.ndarray:
        v = np.asarray(phi(data), dtype=float).ravel()
        if v.size == 0 or not np.all(np.isfinite(v)):
            raise InvalidDataError(f"the query must return finite per-row values on {name}")
        return np.clip(v, 0.0, 1.0)

    def query(self, phi: Callable) -> float:
        """The answer to the statistical query ``phi`` (per-row values, clipped to
        [0, 1]): the training mean, or the noisy holdout mean when they differ by
        more than the noisy threshold (module docstring).

        Raises
        ------
        BudgetExceededError
            When the B over-threshold answers are used up (nothing is released).
        InvalidDataError
            ``phi`` returned no or non-finite values, or a holdout of another size.
        """
        if self._used >= self.budget:
            raise BudgetExceededError(
                f"Thresholdout budget={self.budget} over-threshold answers used up"
            )
        a_t = float(np.mean(self._values(phi, self.train, "train")))
        h = self._values(phi, self.holdout, "holdout")
        if self._n_holdout is None:
            self._n_holdout = h.size
        elif h.size != self._n_holdout:
            raise InvalidDataError(
                f"the holdout size is public and fixed ({self._n_holdout}), got {h.size}"
            )
        self._units = max(self._units, self._used + 1)
        a_h = float(np.mean(h))
        eta = self._rng.laplace(scale=4.0 * self.sigma)
        if abs(a_h - a_t) > self._noisy_threshold + eta:
            self._used += 1
            self._noisy_threshold = self.threshold + self._rng.laplace(scale=2.0 * self.sigma)
            return a_h + float(self._rng.laplace(scale=self.sigma))
        return a_t

    def __repr__(self) -> str:
        return (
            f"Thresholdout(threshold={self.threshold!r}, sigma={self.sigma!r}, "
            f"budget={self.budget!r}, used={self._used})"
        )
