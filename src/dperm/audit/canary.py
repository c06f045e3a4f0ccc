"""Worst-case neighbouring datasets for the audit: a canary row at the norm bound.

The auditor tries to tell D from D′ apart from one output of the algorithm.
The pair is built to make that as easy as the algorithm's sensitivity allows
(Jagielski, Ullman, Oprea 2020, Section 4 "clipping-aware poisoning";
Nasr et al. 2021, Section 4, "worst-case datasets"):

* the **canary** row has ℓ2 norm exactly ``data_norm`` (or more, to test
  clipping) along its own coordinate, the last one, and the base rows have
  that coordinate equal to 0: the canary is orthogonal to every other row, so
  for a GLM every per-example gradient of the others has no component along
  the canary and the coordinate θ_d reacts to the canary alone;
* its label maximizes its gradient: with the margin losses |φ′| is largest at
  negative margins, and the canary (x = R·e_d, y = +B) is paired with the
  **anti-canary** (x = R·e_d, y = −B), whose gradient points the opposite way,
  so replacing one by the other moves the gradient sum by 2·L·R/… — the full
  replace-one sensitivity;
* **replace-one** relation: D = base ∪ {anti-canary}, D′ = base ∪ {canary};
  **add/remove-one**: D = base, D′ = base ∪ {canary}.

``base="copies"`` makes every base row a copy of the canary instead: the
records then all pull θ the same way, so anything of a run that depends on
the number of rows (a normaliser or a step count computed from |D| under
add/remove neighbours) shifts the output by a whole step of their joint
gradient — the pair that exposes that bug class (dperm issue #10).

The optimal one-dimensional test statistic is then the projection ⟨θ, e_d⟩ of
the released parameters on the canary direction.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_positive, check_X_y
from ..exceptions import InvalidDataError, UnknownNameError

__all__ = ["NEIGHBOURING_RELATIONS", "CanaryPair", "canary_pair_from_data", "make_canary_pair"]

#: the relations, spelled as ``DpEvent.neighbouring`` spells them
NEIGHBOURING_RELATIONS = ("replace-one", "add-remove")
_ALIASES = {"add-remove-one": "add-remove", "add/remove": "add-remove"}


def check_neighbouring(neighbouring: str) -> str:
    """Return the canonical relation name ("replace-one" or "add-remove"; the
    spelling "add-remove-one" is accepted), or raise UnknownNameError."""
    if isinstance(neighbouring, str):
        neighbouring = _ALIASES.get(neighbouring, neighbouring)
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise UnknownNameError(
            f"neighbouring must be one of {list(NEIGHBOURING_RELATIONS)}, got {neighbouring!r}"
        )
    return neighbouring


@dataclasses.dataclass(frozen=True)
class CanaryPair:
    """Two neighbouring datasets and the direction that separates them.

    Attributes
    ----------
    X, y : ndarray of shape (n, d), (n,)
        The dataset D (without the canary).
    X_prime, y_prime : ndarray of shape (n′, d), (n′,)
        The dataset D′ (with the canary); n′ = n (replace-one) or n + 1
        (add/remove-one).
    direction : ndarray of shape (d,)
        Unit vector of the canary; the audit statistic is ⟨θ, direction⟩.
    neighbouring : str
        "replace-one" or "add-remove".
    canary_norm : float
        ℓ2 norm of the canary row.
    """

    X: np.ndarray
    y: np.ndarray
    X_prime: np.ndarray
    y_prime: np.ndarray
    direction: np.ndarray
    neighbouring: str
    canary_norm: float

    def score(self, theta) -> float:
        """The test statistic ⟨θ, direction⟩ (θ of shape (d,); for (d, k) the
        first column is used)."""
        t = np.asarray(theta, dtype=float)
        if t.ndim == 2:
            t = t[:, 0]
        return float(t @ self.direction)

    def scores(self, thetas) -> np.ndarray:
        """Vectorised :meth:`score` over an (m, d) array."""
        return np.asarray(thetas, dtype=float) @ self.direction


def make_canary_pair(
    n: int = 40,
    d: int = 3,
    *,
    data_norm: float = 1.0,
    label_bound: float = 1.0,
    neighbouring: str = "replace-one",
    canary_norm: float | None = None,
    base: str = "orthogonal",
    random_state=0,
) -> CanaryPair:
    """Build a worst-case pair of neighbouring datasets (module docstring).

    Parameters
    ----------
    n : int ≥ 2
        Rows of D′ (the dataset with the canary).
    d : int ≥ 1
        Features; the canary lives on the last one.  With d = 1 the base rows
        are 0 (the only way to keep them orthogonal to the canary).
    data_norm : float > 0
        The row-norm bound R the algorithm assumes.
    label_bound : float > 0
        |y| of the canary and anti-canary (1 for the ±1 margin losses).
    neighbouring : {"replace-one", "add-remove"}
    canary_norm : float, optional
        Norm of the canary row; default ``data_norm``.  Larger values test that
        the algorithm clips rows (the clipped canary is as strong as one at the
        bound; an unclipped one breaks the claimed ε).
    base : {"orthogonal", "zeros", "copies"}
        Base rows random with norm ≤ ``data_norm`` in the first d − 1
        coordinates, all zero, or copies of the canary (row and label).
    random_state : int, Generator or None
        Draws the (public, fixed) base rows; default 0.

    Returns
    -------
    CanaryPair
    """
    n = check_count(n, "n", minimum=2)
    d = check_count(d, "d", minimum=1)
    data_norm = check_positive(data_norm, "data_norm")
    label_bound = check_positive(label_bound, "label_bound")
    neighbouring = check_neighbouring(neighbouring)
    canary_norm = data_norm if canary_norm is None else check_positive(canary_norm, "canary_norm")
    if base not in ("orthogonal", "zeros", "copies"):
        raise UnknownNameError(f"base must be 'orthogonal', 'zeros' or 'copies', got {base!r}")
    rng = check_random_state(random_state)
    m = n - 1
    Xb = np.zeros((m, d))
    if base == "copies":
        Xb[:, d - 1] = canary_norm
        return _assemble(Xb, np.full(m, label_bound), d - 1, canary_norm, label_bound, neighbouring)
    if base == "orthogonal" and d > 1:
        g = rng.standard_normal((m, d - 1))
        g /= np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-12)
        Xb[:, : d - 1] = g * (data_norm * rng.uniform(0.2, 1.0, size=(m, 1)))
    yb = np.where(np.arange(m) % 2 == 0, label_bound, -label_bound)
    rng.shuffle(yb)
    return _assemble(Xb, yb, d - 1, canary_norm, label_bound, neighbouring)


def _assemble(Xb, yb, col, canary_norm, label_bound, neighbouring) -> CanaryPair:
    d = Xb.shape[1]
    xc = np.zeros((1, d))
    xc[0, col] = canary_norm
    direction = np.zeros(d)
    direction[col] = 1.0
    X_prime = np.vstack([Xb, xc])
    y_prime = np.concatenate([yb, [label_bound]])
    if neighbouring == "replace-one":
        X = np.vstack([Xb, xc])
        y = np.concatenate([yb, [-label_bound]])
    else:
        X, y = Xb.copy(), yb.copy()
    return CanaryPair(
        X=X,
        y=y,
        X_prime=X_prime,
        y_prime=y_prime,
        direction=direction,
        neighbouring=neighbouring,
        canary_norm=float(canary_norm),
    )


def canary_pair_from_data(
    X,
    y,
    *,
    data_norm: float = 1.0,
    label_bound: float = 1.0,
    neighbouring: str = "replace-one",
    canary_norm: float | None = None,
) -> CanaryPair:
    """Audit on your own base data: append a zero feature column to ``X`` and
    place the canary on it (so it is orthogonal to every row of ``X``).

    Parameters
    ----------
    X : ndarray of shape (n, d) (dense; sparse input is densified)
    y : ndarray of shape (n,)
        Labels as the algorithm expects them.

    Returns
    -------
    CanaryPair with d + 1 features.
    """
    X, y = check_X_y(X, y)
    if hasattr(X, "toarray"):
        X = X.toarray()
    if y.dtype.kind not in "f":
        raise InvalidDataError("y must be numeric for an audit")
    data_norm = check_positive(data_norm, "data_norm")
    label_bound = check_positive(label_bound, "label_bound")
    neighbouring = check_neighbouring(neighbouring)
    canary_norm = data_norm if canary_norm is None else check_positive(canary_norm, "canary_norm")
    Xb = np.hstack([X, np.zeros((X.shape[0], 1))])
    return _assemble(Xb, y.copy(), X.shape[1], canary_norm, label_bound, neighbouring)
