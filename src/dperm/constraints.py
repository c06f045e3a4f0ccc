"""Closed convex constraint sets: Euclidean projection and linear minimization oracle.

Every set C here exposes

* ``project(theta)`` — the Euclidean projection Π_C(θ) (projected gradient
  methods, DP-GD/DP-SGD, constrained objective perturbation);
* ``lmo(g)`` — a linear minimization oracle argmin_{v ∈ C} ⟨g, v⟩
  (Frank-Wolfe);
* ``contains(theta, tol)``;
* ``l2_radius`` — sup_{θ ∈ C} ‖θ‖₂ (bounds the Lipschitz constant of the
  squared loss), and ``diameter`` — the ℓ2 diameter;
* ``vertices()`` for polytopes (the private Frank-Wolfe of Talwar, Thakurta,
  Zhang 2015 selects a vertex with the exponential mechanism).
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import check_positive
from .exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    UnknownNameError,
    UnsupportedOperationError,
)

__all__ = [
    "Box",
    "Constraint",
    "L1Ball",
    "L2Ball",
    "Polytope",
    "constraint_l2_radius",
    "get_constraint",
]


class Constraint:
    """Base class of convex constraint sets."""

    def project(self, theta: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def lmo(self, g: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def contains(self, theta: np.ndarray, tol: float = 1e-9) -> bool:
        """True when θ ∈ C up to ``tol`` (in the set's own norm)."""
        return bool(np.linalg.norm(self.project(theta) - theta) <= tol * max(1.0, self.l2_radius))

    @property
    def l2_radius(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def diameter(self) -> float:
        """ℓ2 diameter sup ‖u − v‖₂ (≤ 2·l2_radius; overridden where exact)."""
        return 2.0 * self.l2_radius

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and all(
            np.array_equal(a, b)
            for a, b in zip(self.__dict__.values(), other.__dict__.values(), strict=True)
        )

    __hash__ = None  # type: ignore[assignment]


class _RadiusBall(Constraint):
    """{θ : ‖θ‖ ≤ radius} for a norm ‖·‖ with a closed form (``_norm``): the
    constructor, ``contains`` and ``l2_radius`` the ℓ2 and ℓ1 balls share."""

    def __init__(self, radius: float):
        self.radius = check_positive(radius, "radius")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(radius={self.radius!r})"

    @staticmethod
    def _norm(theta) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def contains(self, theta, tol: float = 1e-9) -> bool:
        return bool(self._norm(theta) <= self.radius * (1 + tol))

    @property
    def l2_radius(self) -> float:
        return self.radius


class L2Ball(_RadiusBall):
    """{θ : ‖θ‖₂ ≤ radius}."""

    _norm = staticmethod(np.linalg.norm)

    def project(self, theta):
        theta = np.asarray(theta, dtype=float)
        nrm = np.linalg.norm(theta)
        return theta if nrm <= self.radius else theta * (self.radius / nrm)

    def lmo(self, g):
        g = np.asarray(g, dtype=float)
        nrm = np.linalg.norm(g)
        return np.zeros_like(g) if nrm == 0 else -self.radius * g / nrm


def _project_l1(v: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto the ℓ1 ball (Duchi, Shalev-Shwartz, Singer, Chandra
    2008, Fig. 1), O(d log d)."""
    if np.abs(v).sum() <= radius:
        return v.copy()
    u = np.sort(np.abs(v))[::-1]
    css = np.cumsum(u)
    k = np.arange(1, u.size + 1)
    rho = np.nonzero(u * k > css - radius)[0][-1]
    tau = (css[rho] - radius) / (rho + 1.0)
    return np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)


class L1Ball(_RadiusBall):
    """{θ : ‖θ‖₁ ≤ radius}: the polytope with the 2d vertices ±radius·eⱼ."""

    @staticmethod
    def _norm(theta) -> float:
        return np.abs(theta).sum()

    def project(self, theta):
        return _project_l1(np.asarray(theta, dtype=float), self.radius)

    def lmo(self, g):
        g = np.asarray(g, dtype=float)
        j = int(np.argmax(np.abs(g)))
        v = np.zeros_like(g)
        v[j] = -self.radius * np.sign(g[j]) if g[j] != 0 else self.radius
        return v

    def vertices(self, d: int) -> np.ndarray:
        """The 2d vertices, shape (2d, d): rows +r e₁ … +r e_d, −r e₁ … −r e_d."""
        eye = self.radius * np.eye(d)
        return np.vstack([eye, -eye])


class Box(Constraint):
    """{θ : lower ≤ θ ≤ upper} coordinatewise (scalars or arrays of shape (d,))."""

    def __init__(self, lower, upper):
        lower = np.asarray(lower, dtype=float)
        upper = np.asarray(upper, dtype=float)
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            raise InvalidPrivacyParameter("Box bounds must be finite")
        if np.any(lower > upper):
            raise InvalidPrivacyParameter(
                f"Box needs lower ≤ upper, got lower={lower!r}, upper={upper!r}"
            )
        self.lower = lower
        self.upper = upper

    def __repr__(self) -> str:
        return f"Box(lower={self.lower!r}, upper={self.upper!r})"

    def project(self, theta):
        return np.clip(np.asarray(theta, dtype=float), self.lower, self.upper)

    def lmo(self, g):
        g = np.asarray(g, dtype=float)
        lo = np.broadcast_to(self.lower, g.shape)
        hi = np.broadcast_to(self.upper, g.shape)
        return np.where(g > 0, lo, hi).astype(float)

    def contains(self, theta, tol: float = 1e-9) -> bool:
        return bool(np.all(theta >= self.lower - tol) and np.all(theta <= self.upper + tol))

    @property
    def l2_radius(self) -> float:
        if self.lower.ndim == 0:
            raise InvalidDataError("a scalar Box has no radius until its dimension is known")
        return float(np.linalg.norm(np.maximum(np.abs(self.lower), np.abs(self.upper))))

    def bounds(self, d: int) -> list[tuple[float, float]]:
        """Per-coordinate (lower, upper) pairs for scipy's L-BFGS-B."""
        lo = np.broadcast_to(self.lower, (d,))
        hi = np.broadcast_to(self.upper, (d,))
        return list(zip(lo.tolist(), hi.tolist(), strict=True))


class Polytope(Constraint):
    """The convex hull of given vertices, shape (m, d).  Only ``lmo`` (and
    ``vertices``) are available: Frank-Wolfe needs no projection."""

    def __init__(self, vertices):
        V = np.asarray(vertices, dtype=float)
        if V.ndim != 2 or V.shape[0] < 1 or not np.all(np.isfinite(V)):
            raise InvalidDataError(f"vertices must be a finite (m, d) array, got shape {V.shape}")
        self._V = V

    def __repr__(self) -> str:
        return f"Polytope(<{self._V.shape[0]} vertices in R^{self._V.shape[1]}>)"

    def vertices(self, d: int | None = None) -> np.ndarray:
        """The vertex matrix, shape (m, d)."""
        return self._V

    def lmo(self, g):
        return self._V[int(np.argmin(self._V @ np.asarray(g, dtype=float)))].copy()

    def project(self, theta):
        raise UnsupportedOperationError(
            "projection onto a general polytope is not provided; use Frank-Wolfe (lmo)"
        )

    def contains(self, theta, tol: float = 1e-9) -> bool:
        raise UnsupportedOperationError("membership in a general polytope is not provided")

    @property
    def l2_radius(self) -> float:
        return float(np.max(np.linalg.norm(self._V, axis=1)))


def constraint_l2_radius(constraint: Constraint | None, d: int) -> float | None:
    """sup_{θ ∈ C} ‖θ‖₂ (public) for C in dimension ``d``, or None without a constraint.

    Unlike :attr:`Constraint.l2_radius` this also covers a :class:`Box` with
    scalar bounds (broadcast to ``d`` coordinates).
    """
    if constraint is None:
        return None
    if isinstance(constraint, Box):
        lo = np.broadcast_to(np.abs(constraint.lower), (d,))
        hi = np.broadcast_to(np.abs(constraint.upper), (d,))
        return float(np.linalg.norm(np.maximum(lo, hi)))
    return float(constraint.l2_radius)


def get_constraint(name: str | Constraint | None, radius: float | None = None):
    """A constraint from a name (``"l2"``, ``"l1"``, ``"box"`` (±radius),
    ``None``/``"none"``) and a radius, or the instance itself.

    Raises
    ------
    UnknownNameError, InvalidPrivacyParameter
    """
    if name is None or isinstance(name, Constraint):
        return name
    if name == "none":
        return None
    if radius is None or not math.isfinite(radius):
        raise InvalidPrivacyParameter(f"constraint {name!r} needs a finite radius, got {radius!r}")
    if name == "l2":
        return L2Ball(radius)
    if name == "l1":
        return L1Ball(radius)
    if name == "box":
        return Box(-check_positive(radius, "radius"), radius)
    raise UnknownNameError(
        f"unknown constraint {name!r}; choose one of ['l1', 'l2', 'box', 'none']"
    )
