"""One place where randomness is created.

All randomness in dperm flows from an explicit :class:`numpy.random.Generator`.
``random_state=None`` means fresh OS entropy (unpredictable); an ``int`` or a
``SeedSequence`` gives a reproducible stream; a ``Generator`` is used as is.
There is no global RNG and no fixed default seed.
"""

from __future__ import annotations

import numbers

import numpy as np

from .exceptions import InvalidPrivacyParameter

__all__ = ["RandomState", "check_random_state"]

RandomState = None | int | np.random.SeedSequence | np.random.Generator


def check_random_state(random_state: RandomState = None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``random_state``.

    Parameters
    ----------
    random_state : None, int, SeedSequence or Generator
        ``None`` draws fresh entropy from the operating system.

    Raises
    ------
    InvalidPrivacyParameter
        If ``random_state`` is of another type (a legacy ``RandomState`` is
        refused: its streams are not the ones dperm documents).
    """
    if random_state is None:
        return np.random.default_rng(np.random.SeedSequence())
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.SeedSequence):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise InvalidPrivacyParameter(
                f"random_state must be a non-negative integer, got {random_state!r}"
            )
        return np.random.default_rng(int(random_state))
    raise InvalidPrivacyParameter(
        "random_state must be None, a non-negative int, a numpy SeedSequence or a "
        f"numpy Generator, got {type(random_state).__name__}: {random_state!r}"
    )
