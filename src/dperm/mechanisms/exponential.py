"""The exponential mechanism over a finite candidate set.

Given utility scores u(D, r) for candidates r = 0 … m−1 whose sensitivity is
Δu = max_r sup_{D ~ D'} |u(D, r) − u(D', r)|, selecting r with probability

    P(r) ∝ exp(ε u(D, r) / (2 Δu))

is ε-DP (McSherry & Talwar 2007, Theorem 6; Dwork & Roth 2014, Theorem 3.10).
When the utility is *monotone* in the data set (adding a record changes every
score in the same direction) the factor 2 can be dropped: P(r) ∝ exp(ε u/Δu)
(McSherry & Talwar 2007; Dwork & Roth 2014, Section 3.4).  The implied event is
``PureEpsilon(epsilon)``.

Sampling uses the Gumbel-max trick: argmax_r (ε u_r/(2Δu) + G_r) with G_r
i.i.d. standard Gumbel is distributed exactly as the softmax above (Gumbel
1954; Maddison, Tarlow, Minka 2014), and never exponentiates a
score, so it is stable for any range of scores.  Scores of −inf have
probability 0.  It is used by private Frank-Wolfe and exponential-mechanism ERM.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_softmax

from .._rng import RandomState, check_random_state
from .._validation import check_epsilon, check_positive, float_array
from ..accounting.events import PureEpsilon
from ..exceptions import InvalidDataError

__all__ = [
    "exponential_mechanism",
    "exponential_mechanism_event",
    "exponential_mechanism_log_probabilities",
]


def _logits(scores, epsilon, sensitivity, monotonic: bool) -> np.ndarray:
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive(sensitivity, "sensitivity")
    u = float_array(scores, "scores")
    if u.ndim != 1 or u.size == 0:
        raise InvalidDataError(
            f"scores must be a non-empty 1-D array (one per candidate), got shape {u.shape}"
        )
    if np.isnan(u).any() or np.isposinf(u).any():
        raise InvalidDataError("scores must not contain NaN or +inf")
    if np.isneginf(u).all():
        raise InvalidDataError("every score is -inf: no candidate can be selected")
    factor = 1.0 if monotonic else 2.0
    return u * (epsilon / (factor * sensitivity))


def exponential_mechanism_log_probabilities(
    scores, *, epsilon: float, sensitivity: float, monotonic: bool = False
) -> np.ndarray:
    """log P(r) of the exponential mechanism, shape (m,) (a stable log-softmax).

    Parameters
    ----------
    scores : array-like of shape (m,)
        Utilities u(D, r); higher is better.
    epsilon : float > 0
    sensitivity : float > 0
        Δu, the public sensitivity of every score.
    monotonic : bool, default False
        True if the utility is monotone in the data set (drops the factor 2).

    Returns
    -------
    ndarray of shape (m,)

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError
    """
    return log_softmax(_logits(scores, epsilon, sensitivity, monotonic))


def exponential_mechanism(
    scores,
    *,
    epsilon: float,
    sensitivity: float,
    rng: RandomState,
    monotonic: bool = False,
) -> int:
    """Select a candidate index with P(r) ∝ exp(ε u_r/(2Δu)): ε-DP.

    McSherry & Talwar (2007), Theorem 6.  Exact sampling by the Gumbel-max
    trick (module docstring).

    Parameters
    ----------
    scores : array-like of shape (m,)
        Utilities u(D, r) of the m candidates; higher is better.
    epsilon : float > 0
    sensitivity : float > 0
        Δu = max_r sup_{D~D'} |u(D, r) − u(D', r)| (public).
    rng : numpy.random.Generator
    monotonic : bool, default False
        Use ε u/Δu (valid only for utilities monotone in the data set).

    Returns
    -------
    int
        The selected index.  The selection is the event ``PureEpsilon(epsilon)``
        (see :func:`exponential_mechanism_event`).

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``epsilon`` / ``sensitivity``.
    InvalidDataError
        Empty, non-1-D or NaN/+inf scores, or all scores −inf.
    """
    logits = _logits(scores, epsilon, sensitivity, monotonic)
    gen = check_random_state(rng)
    return int(np.argmax(logits + gen.gumbel(size=logits.shape[0])))


def exponential_mechanism_event(epsilon: float) -> PureEpsilon:
    """The event of one exponential-mechanism selection: ``PureEpsilon(epsilon)``."""
    return PureEpsilon(epsilon=check_epsilon(epsilon))
