"""Synthetic classification sets (``make_classification``) with a public row scale."""

from __future__ import annotations

import math

import numpy as np

from .._rng import check_random_state
from .._validation import clip_rows
from ._prepare import _check_test_size, _random_split_binary


def _synthetic_second_moment(n_features, n_informative, n_redundant, class_sep) -> float:
    """E‖x‖² of a ``make_classification`` row, from its documented construction.

    Informative part: ``z A + c`` with ``z ~ N(0, I_k)``, ``A`` uniform on
    ``[−1, 1]^{k×k}`` and ``c ∈ {±class_sep}^k``: ``E‖·‖² = k (k/3 + class_sep²)``.
    Redundant part: informative part times ``B`` uniform on ``[−1, 1]^{k×r}``,
    ``E‖·‖² = (r/3) E‖informative‖²``.  Noise features: ``N(0, 1)`` each.
    """
    k, r = n_informative, n_redundant
    inf = k * (k / 3.0 + class_sep**2)
    return inf * (1.0 + r / 3.0) + (n_features - k - r)


def _make_synthetic(
    name, n_samples, n_features, n_informative, normalize_rows, random_state, test_size
):
    from sklearn.datasets import make_classification

    test_size = _check_test_size(test_size)
    rng = check_random_state(random_state)
    n_redundant, class_sep = 2, 2.0
    X, y = make_classification(
        n_samples=n_samples,
        n_features=n_features,
        n_informative=n_informative,
        n_redundant=n_redundant,
        class_sep=class_sep,
        random_state=int(rng.integers(2**31 - 1)),
    )
    y = np.where(y == 1, 1.0, -1.0)
    scale = 2.0 * math.sqrt(
        _synthetic_second_moment(n_features, n_informative, n_redundant, class_sep)
    )
    n_clipped = 0
    if normalize_rows:
        X /= scale
        X, n_clipped = clip_rows(X, 1.0, warn=False)
        bound = 1.0
    else:
        bound = math.inf
    desc = (
        f"Synthetic: sklearn make_classification(n_samples={n_samples}, "
        f"n_features={n_features}, n_informative={n_informative}, n_redundant={n_redundant}, "
        f"class_sep={class_sep}), seed drawn from random_state={random_state!r}; labels ±1; "
        f"random split test_size={test_size}. "
        + (
            f"Rows divided by the public constant 2·√E‖x‖² = {scale:.4g} (from the generator's "
            f"parameters, not the sample) and projected onto the unit ball "
            f"({n_clipped} rows clipped); row_norm_bound = 1."
            if normalize_rows
            else "Raw Gaussian features: no public norm bound (row_norm_bound = inf)."
        )
    )
    names = [f"x{i}" for i in range(n_features)]
    return _random_split_binary(name, X, y, test_size, rng, names, bound, desc)


# the two sets of Chaudhuri, Monteleoni, Sarwate (2011): low and high dimension
def _load_synthetic_l(data_home=None, *, normalize_rows=True, random_state=0, test_size=0.2):
    return _make_synthetic("synthetic-l", 10_000, 40, 30, normalize_rows, random_state, test_size)


def _load_synthetic_h(data_home=None, *, normalize_rows=True, random_state=0, test_size=0.2):
    return _make_synthetic("synthetic-h", 2_000, 2_000, 10, normalize_rows, random_state, test_size)
