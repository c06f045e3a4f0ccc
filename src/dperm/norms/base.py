"""The interface every norm of :mod:`dperm.norms` implements, and the group
membership check the group norms share.

A :class:`Norm` is a :class:`~dperm.regularizers.Regularizer` r = ``alpha``·Ω
with ``norm`` (the unscaled Ω), ``dual_norm`` (Ω*), ``lmo`` over the unit ball,
``prox`` of ``alpha``·Ω, ``value`` = ``alpha``·Ω and ``scaled``.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_nonnegative
from ..exceptions import InvalidDataError
from ..regularizers import Regularizer

__all__ = ["Norm"]


def _membership(groups, d: int) -> np.ndarray:
    """Boolean (n_groups, d) membership matrix of ``groups``; every coordinate must be
    covered.

    Raises
    ------
    InvalidDataError
        An empty or out-of-range group, or an uncovered coordinate.
    """
    G = np.zeros((len(groups), d), dtype=bool)
    for k, g in enumerate(groups):
        idx = np.asarray(g, dtype=int)
        if idx.ndim != 1 or idx.size == 0 or idx.min() < 0 or idx.max() >= d:
            raise InvalidDataError(f"group {k} must be non-empty indices in [0, {d}), got {g!r}")
        G[k, idx] = True
    if len(groups) == 0 or not G.any(axis=0).all():
        raise InvalidDataError("every coordinate must belong to at least one group")
    return G


class Norm(Regularizer):
    """Base of the norms here: ``norm`` (unscaled Ω), ``dual_norm``, ``lmo`` over
    the unit ball, ``prox`` of ``alpha``·Ω, ``value`` = ``alpha``·Ω, ``scaled``."""

    d: int
    alpha: float

    def __repr__(self) -> str:
        return f"{type(self).__name__}(d={self.d}, alpha={self.alpha!r})"

    # identity, not Regularizer's equality of fields (a norm holds arrays: groups, graphs)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def scaled(self, alpha: float):
        """A copy with ``alpha`` replaced."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.alpha = float(check_nonnegative(alpha, "alpha"))
        return new

    def _vec(self, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        if v.shape != (self.d,) or not np.all(np.isfinite(v)):
            raise InvalidDataError(f"expected a finite vector of shape ({self.d},), got {v.shape}")
        return v

    def norm(self, theta) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def dual_norm(self, s) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def value(self, theta) -> float:
        """alpha · Ω(θ) (the Regularizer interface)."""
        return self.alpha * self.norm(theta)
