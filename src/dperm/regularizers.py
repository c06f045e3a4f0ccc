"""Convex, data-independent regularizers r(θ) with proximal operators.

The smooth ℓ2 term (Λ/2)‖θ‖² is handled by the solvers and algorithms
directly (it is what makes the objective strongly convex); the classes here
are the possibly non-differentiable extras: ℓ1 (LASSO), elastic net and the
group-ℓ2 norm.  Each gives ``value(θ)`` and ``prox(v, step)`` =
argmin_θ r(θ) + ‖θ − v‖²/(2·step).

Being data-independent, they cost no privacy; Kifer, Smith, Thakurta (2012,
Theorem 2 / Section 4) extend objective perturbation to them.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_nonnegative, check_probability
from .exceptions import InvalidDataError, UnknownNameError

__all__ = ["L1", "ElasticNet", "GroupL2", "Regularizer", "get_regularizer"]


class Regularizer:
    """Base class: ``value(theta)`` and ``prox(v, step)``."""

    #: extra strong convexity the regularizer adds (elastic net's ℓ2 part)
    strong_convexity: float = 0.0

    def value(self, theta: np.ndarray) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def prox(self, v: np.ndarray, step: float) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.__dict__.items()))))


def _soft_threshold(v: np.ndarray, t: float) -> np.ndarray:
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


class L1(Regularizer):
    """r(θ) = alpha · ‖θ‖₁; prox is soft-thresholding."""

    def __init__(self, alpha: float):
        self.alpha = check_nonnegative(alpha, "alpha")

    def __repr__(self) -> str:
        return f"L1(alpha={self.alpha!r})"

    def value(self, theta):
        return self.alpha * float(np.abs(theta).sum())

    def prox(self, v, step):
        return _soft_threshold(np.asarray(v, dtype=float), self.alpha * step)


class ElasticNet(Regularizer):
    """r(θ) = alpha · (l1_ratio ‖θ‖₁ + (1 − l1_ratio)/2 ‖θ‖²₂) (scikit-learn's
    parametrization); it is alpha(1 − l1_ratio)-strongly convex."""

    def __init__(self, alpha: float, l1_ratio: float = 0.5):
        self.alpha = check_nonnegative(alpha, "alpha")
        self.l1_ratio = check_probability(l1_ratio, "l1_ratio", allow_zero=True)
        self.strong_convexity = self.alpha * (1.0 - self.l1_ratio)

    def __repr__(self) -> str:
        return f"ElasticNet(alpha={self.alpha!r}, l1_ratio={self.l1_ratio!r})"

    def value(self, theta):
        theta = np.asarray(theta, dtype=float)
        return self.alpha * (
            self.l1_ratio * float(np.abs(theta).sum())
            + 0.5 * (1.0 - self.l1_ratio) * float(theta @ theta)
        )

    def prox(self, v, step):
        v = np.asarray(v, dtype=float)
        shrunk = _soft_threshold(v, step * self.alpha * self.l1_ratio)
        return shrunk / (1.0 + step * self.alpha * (1.0 - self.l1_ratio))


class GroupL2(Regularizer):
    """r(θ) = alpha · Σ_g ‖θ_g‖₂ over disjoint groups (group LASSO).

    Parameters
    ----------
    alpha : float ≥ 0
    groups : array-like of int, shape (d,)
        The group index of each coordinate.
    """

    def __init__(self, alpha: float, groups):
        self.alpha = check_nonnegative(alpha, "alpha")
        g = np.asarray(groups)
        if g.ndim != 1 or g.dtype.kind not in "iu":
            raise InvalidDataError("groups must be a 1-D integer array of shape (d,)")
        self.groups = g

    def __repr__(self) -> str:
        return f"GroupL2(alpha={self.alpha!r}, groups=<{self.groups.size}>)"

    def __eq__(self, other) -> bool:
        return (
            type(self) is type(other)
            and self.alpha == other.alpha
            and np.array_equal(self.groups, other.groups)
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.alpha, self.groups.tobytes()))

    def _group_norms(self, v):
        _, inv = np.unique(self.groups, return_inverse=True)
        sq = np.bincount(inv, weights=v * v)
        return np.sqrt(sq), inv

    def value(self, theta):
        norms, _ = self._group_norms(np.asarray(theta, dtype=float))
        return self.alpha * float(norms.sum())

    def prox(self, v, step):
        v = np.asarray(v, dtype=float)
        norms, inv = self._group_norms(v)
        t = self.alpha * step
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(norms > t, 1.0 - t / norms, 0.0)
        return v * factor[inv]


def get_regularizer(name: str | Regularizer | None, alpha: float = 0.0, l1_ratio: float = 0.5):
    """A regularizer from a name (``"l1"``, ``"elasticnet"``, ``None``/``"none"``/``"l2"``:
    the ℓ2 term is handled separately, so it maps to None here).

    Raises
    ------
    UnknownNameError
    """
    if name is None or isinstance(name, Regularizer):
        return name
    if name in ("none", "l2"):
        return None
    if name == "l1":
        return L1(alpha)
    if name == "elasticnet":
        return ElasticNet(alpha, l1_ratio)
    raise UnknownNameError(
        f"unknown penalty {name!r}; choose one of ['l2', 'l1', 'elasticnet', 'none']"
    )
