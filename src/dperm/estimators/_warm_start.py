"""``warm_start=True``: continue a gradient-perturbation fit from the released model.

Which mechanisms honour it, and why (``docs/gradient_perturbation.md``, "Warm start"):

* **the gradient mechanisms** (:data:`WARM_START_MECHANISMS`: "dp-gd", "dp-gd-avg",
  "dp-sgd", "dp-sgd-single") start their iterations from a public point θ₀ (the
  algorithms' ``theta0``).  The previous fit's ``coef_`` and ``intercept_`` are a
  *released* output, so starting from them is post-processing of that release.  The new
  fit spends its own (ε, δ) on the data, and the model it returns depends on both fits:
  its guarantee is the composition.  ``dp_event_`` is therefore
  ``Composed((previous dp_event_, this fit's event))`` and ``epsilon_`` / ``delta_``
  are the sums (basic composition, Dwork & Roth 2014, Theorem 3.16; a valid upper bound
  whatever data each fit saw); ``n_fits_`` counts the fits composed.  An active budget
  (``dperm.budget`` / ``Ledger.active()``) is charged each fit's own (ε, δ), so together
  it holds the composition once.
* **every other mechanism** releases something the start point cannot change: the exact
  minimiser of a perturbed objective ("objective", "amp", …: the solver's start point
  only changes its speed), a perturbed exact minimiser ("output"), a noisy statistic
  ("adassp"), a sample ("exponential-sampling").  ``warm_start=True`` would be
  meaningless there, so it is refused (InvalidPrivacyParameter naming the mechanism)
  rather than silently ignored.

Fresh noise.  A fit started from a previous release must not reuse that release's
noise: with an ``int`` or ``SeedSequence`` ``random_state`` the k-th fit of a chain
draws from the independent child stream ``SeedSequence(seed, spawn_key=(…, TAG, k))``
(reproducible, never the stream of an earlier fit); a ``Generator`` simply advances, and
None draws fresh OS entropy.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._rng import check_random_state
from ..accounting.events import Composed, DpEvent
from ..exceptions import InvalidDataError, InvalidPrivacyParameter

__all__ = ["WARM_START_MECHANISMS", "WarmStart", "fit_rng", "warm_start"]

#: the mechanisms that iterate from a public start point (post-processing of a release)
WARM_START_MECHANISMS = ("dp-gd", "dp-gd-avg", "dp-sgd", "dp-sgd-single")
#: spawn-key tag of the warm fits' child streams ("WARM")
_TAG = 0x5741524D


class WarmStart:
    """The start points and the privacy record of one warm-started fit.

    Attributes
    ----------
    thetas : list of ndarray
        θ₀ of each problem (shape (d_aug,), or (d_aug, k) for the multinomial model).
    event : DpEvent
        ``dp_event_`` of the model started from.
    epsilon, delta : float
        Its ``epsilon_`` and ``delta_``.
    n_fits : int
        The number of fits composed in it.
    """

    def __init__(self, thetas, event: DpEvent, epsilon: float, delta: float, n_fits: int):
        self.thetas = thetas
        self.event = event
        self.epsilon = epsilon
        self.delta = delta
        self.n_fits = n_fits

    def compose(self, event: DpEvent) -> DpEvent:
        """The event of the returned model: the previous fits, then this one."""
        return Composed(events=(self.event, event))


def warm_start(estimator, mechanism: str, d_aug: int, n_rows: int, multinomial: bool):
    """The :class:`WarmStart` of a fit, or None for a cold start.

    Cold start: ``warm_start=False``, or no previous fit (no ``dp_event_``).
    ``n_rows`` is the number of rows of the ``coef_`` this fit returns (one per
    one-vs-rest problem, or the k classes of the multinomial model).

    Raises
    ------
    InvalidPrivacyParameter
        ``warm_start=True`` with a mechanism outside
        :data:`WARM_START_MECHANISMS` (module docstring: the start point does not
        change what it releases).
    InvalidDataError
        The previous model's shape does not fit this problem (number of features or
        of classes changed).
    """
    if not getattr(estimator, "warm_start", False):  # a bool: the estimator's table
        return None
    if mechanism not in WARM_START_MECHANISMS:
        raise InvalidPrivacyParameter(
            f"warm_start=True needs a gradient mechanism {list(WARM_START_MECHANISMS)}, got "
            f"mechanism={mechanism!r}: it releases a (perturbed) minimiser or a noisy "
            "statistic that the start point does not change, so a warm start would be "
            "meaningless (docs/gradient_perturbation.md, 'Warm start')"
        )
    event = getattr(estimator, "dp_event_", None)
    if event is None:  # first fit: nothing released yet
        return None
    W = np.atleast_2d(np.asarray(estimator.coef_, dtype=np.float64))
    b = np.atleast_1d(np.asarray(estimator.intercept_, dtype=np.float64))
    if estimator.fit_intercept:
        W = np.column_stack([W, b / float(estimator.intercept_scaling)])
    if W.shape != (n_rows, d_aug):
        d = d_aug - int(bool(estimator.fit_intercept))
        raise InvalidDataError(
            f"warm_start=True: the previous model has coef_ of shape "
            f"{np.shape(estimator.coef_)}, which does not fit this problem ({n_rows} "
            f"row(s) of {d} features); refit with warm_start=False"
        )
    thetas = [W.T.copy()] if multinomial else [row.copy() for row in W]
    return WarmStart(
        thetas,
        event,
        float(estimator.epsilon_),
        float(estimator.delta_),
        int(getattr(estimator, "n_fits_", 1)),
    )


def fit_rng(random_state, start: WarmStart | None) -> np.random.Generator:
    """The Generator of a fit: ``check_random_state(random_state)`` for a cold start;
    for the k-th fit of a warm chain with a seed (int or SeedSequence), the independent
    child stream tagged (TAG, k), so that no fit reuses an earlier fit's noise."""
    if start is None:
        return check_random_state(random_state)
    seed = random_state
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        check_random_state(seed)  # the same errors as a cold start
        seed = np.random.SeedSequence(int(seed))
    if isinstance(seed, np.random.SeedSequence):
        child = np.random.SeedSequence(
            seed.entropy, spawn_key=(*seed.spawn_key, _TAG, start.n_fits)
        )
        return np.random.default_rng(child)
    return check_random_state(random_state)
