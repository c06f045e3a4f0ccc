"""Synthetic structured-sparse classification: groups of features, a few active.

The example of issue #11 §6 (structured sparsity, ``docs/structured_sparsity.md``):
d = ``n_groups``·``group_size`` features in disjoint consecutive groups, of which
only the groups ``active`` carry signal.  Generation, all from ``random_state``:

* coefficients w: on each active group one random sign times independent
  Uniform(4, 6) magnitudes, zero elsewhere (a known group support);
* rows x ~ N(0, I_d/d) (so E‖x‖² = 1), projected onto the unit ball (a public
  per-row map: ``row_norm_bound = 1``; about half the rows are scaled down);
* labels y = +1 with probability 1/(1 + e^{−⟨w, x⟩}), else −1 (logistic model,
  Bayes accuracy ≈ 0.79 at the defaults).

Nothing is read off the data: the group layout, the active groups and the row
bound are constants of the generator, so they are public.
"""

from __future__ import annotations

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, clip_rows
from ..exceptions import InvalidPrivacyParameter
from ._prepare import _check_test_size, _random_split_binary

__all__ = ["ACTIVE_GROUPS", "GROUP_SIZE", "N_GROUPS", "group_sparse_groups", "make_group_sparse"]

#: default layout: 10 groups of 5 features, groups 1 and 6 active
N_GROUPS = 10
GROUP_SIZE = 5
ACTIVE_GROUPS = (1, 6)


def group_sparse_groups(n_groups: int = N_GROUPS, group_size: int = GROUP_SIZE) -> list:
    """The public group layout: ``n_groups`` index arrays of ``group_size``
    consecutive features (what a :class:`dperm.norms.GroupLinfNorm` takes)."""
    n_groups = check_count(n_groups, "n_groups")
    group_size = check_count(group_size, "group_size")
    return [np.arange(g * group_size, (g + 1) * group_size) for g in range(n_groups)]


def make_group_sparse(
    n_samples: int,
    *,
    n_groups: int = N_GROUPS,
    group_size: int = GROUP_SIZE,
    active=ACTIVE_GROUPS,
    random_state=None,
):
    """Draw (X, y, w) from the generator of the module docstring.

    Returns
    -------
    X : ndarray of shape (n_samples, n_groups·group_size), rows ‖x‖₂ ≤ 1
    y : ndarray of shape (n_samples,), labels ±1
    w : ndarray of shape (d,), the true coefficients (zero off the active groups)

    Raises
    ------
    InvalidPrivacyParameter
        Active group indices outside ``range(n_groups)``.
    """
    n_samples = check_count(n_samples, "n_samples")
    groups = group_sparse_groups(n_groups, group_size)
    active = tuple(int(g) for g in active)
    if any(g < 0 or g >= len(groups) for g in active):
        raise InvalidPrivacyParameter(
            f"active groups must lie in [0, {len(groups)}), got {active!r}"
        )
    rng = check_random_state(random_state)
    d = len(groups) * group_size
    w = np.zeros(d)
    for g in active:
        w[groups[g]] = rng.choice([-1.0, 1.0]) * rng.uniform(4.0, 6.0, group_size)
    X = rng.normal(size=(n_samples, d)) / np.sqrt(d)
    X, _ = clip_rows(X, 1.0, warn=False)
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    y = np.where(rng.random(n_samples) < p, 1.0, -1.0)
    return X, y, w


def _load_group_sparse(
    data_home=None,
    *,
    normalize_rows=True,
    random_state=0,
    n_samples=10_000,
    test_size=0.5,
):
    """``load("group-sparse")``: :func:`make_group_sparse` with the default layout,
    ``n_samples`` rows (default 10 000) split at random (``test_size`` 0.5: 5 000
    training rows).  ``data_home`` and ``normalize_rows`` are accepted for the
    common signature; the rows are always in the unit ball."""
    test_size = _check_test_size(test_size)
    rng = check_random_state(random_state)
    X, y, _ = make_group_sparse(n_samples, random_state=rng)
    d = X.shape[1]
    desc = (
        f"Synthetic group-sparse logistic data: {n_samples} rows, d = {d} features in "
        f"{N_GROUPS} disjoint groups of {GROUP_SIZE}, groups {list(ACTIVE_GROUPS)} active "
        "(coefficients ±Uniform(4, 6), one sign per group), rows N(0, I/d) projected onto "
        f"the unit ball (row_norm_bound = 1), labels ±1 from the logistic model; seed "
        f"random_state={random_state!r}; random split test_size={test_size}."
    )
    names = [f"g{j // GROUP_SIZE}_x{j % GROUP_SIZE}" for j in range(d)]
    return _random_split_binary("group-sparse", X, y, test_size, rng, names, 1.0, desc)
