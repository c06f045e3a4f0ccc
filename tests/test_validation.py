"""Parameter and data validation, row clipping, random-state handling."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from dperm._rng import check_random_state
from dperm._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_probability,
    check_X_y,
    clip_rows,
    row_norms,
)
from dperm.exceptions import (
    ClippingWarning,
    DpermError,
    InvalidDataError,
    InvalidPrivacyParameter,
)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", None, True, 1j])
def test_epsilon_rejects(bad):
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        check_epsilon(bad)


def test_epsilon_accepts():
    assert check_epsilon(np.float32(0.5)) == pytest.approx(0.5)
    assert check_epsilon(float("inf"), allow_inf=True) == float("inf")


@pytest.mark.parametrize("bad", [-1e-9, 1.0, 2.0, float("nan"), "0.1", None])
def test_delta_rejects(bad):
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        check_delta(bad)


def test_delta_zero_for_gaussian():
    assert check_delta(0.0) == 0.0
    with pytest.raises(InvalidPrivacyParameter, match="Gaussian"):
        check_delta(0.0, allow_zero=False)


def test_probability_and_count():
    with pytest.raises(InvalidPrivacyParameter, match="sampling_rate"):
        check_probability(0.0, "sampling_rate")
    with pytest.raises(InvalidPrivacyParameter, match="sampling_rate"):
        check_probability(1.01, "sampling_rate")
    assert check_probability(1.0, "sampling_rate") == 1.0
    assert check_count(3.0, "steps") == 3
    for bad in (0, -2, 2.5, "3"):
        with pytest.raises(InvalidPrivacyParameter, match="steps"):
            check_count(bad, "steps")


def test_check_X_y_errors():
    X = np.ones((3, 2))
    with pytest.raises(InvalidDataError, match="inconsistent"):
        check_X_y(X, [1, 2])
    with pytest.raises(InvalidDataError, match="NaN"):
        check_X_y(np.array([[np.nan, 1.0]]), [1])
    with pytest.raises(InvalidDataError, match="NaN"):
        check_X_y(X, [1, np.inf, 1])
    with pytest.raises(InvalidDataError, match="at least 1 sample"):
        check_X_y(np.empty((0, 2)), [])
    with pytest.raises(InvalidDataError, match="2-D"):
        check_X_y(np.ones(3), [1, 1, 1])
    with pytest.raises(InvalidDataError, match="numeric"):
        check_X_y([["a", "b"]], [1])
    with pytest.raises(InvalidDataError, match="NaN"):
        check_X_y(sp.csr_matrix(np.array([[np.inf, 0.0]])), [1])
    assert issubclass(InvalidDataError, DpermError)


@pytest.mark.parametrize("sparse", [False, True])
def test_clip_rows_projects_onto_the_ball_and_counts(sparse, rng):
    X = rng.normal(size=(50, 4)) * np.r_[np.full(25, 0.1), np.full(25, 10.0)][:, None]
    Xin = sp.csr_matrix(X) if sparse else X
    with pytest.warns(ClippingWarning, match="25 row"):
        Xc, k = clip_rows(Xin, 1.0)
    assert k == 25
    norms = row_norms(Xc)
    assert norms.max() <= 1.0
    dense = Xc.toarray() if sparse else Xc
    np.testing.assert_allclose(dense[:25], X[:25])  # rows inside untouched
    np.testing.assert_allclose(norms[25:], 1.0)
    # direction preserved
    np.testing.assert_allclose(
        dense[25:] / norms[25:, None], X[25:] / np.linalg.norm(X[25:], axis=1)[:, None]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, k0 = clip_rows(X[:25], 1.0)
    assert k0 == 0


def test_clip_rows_huge_rows_stay_within_bound():
    X = np.array([[1e300, 1e300], [3e-300, 0.0]])
    Xc, k = clip_rows(X, 2.0, warn=False)
    assert k == 1 and row_norms(Xc).max() <= 2.0


def test_random_state():
    a = check_random_state(3).normal(size=3)
    b = check_random_state(3).normal(size=3)
    np.testing.assert_array_equal(a, b)
    g = np.random.default_rng(0)
    assert check_random_state(g) is g
    # None is fresh entropy: two draws differ
    assert check_random_state(None).integers(2**62) != check_random_state(None).integers(2**62)
    for bad in (-1, 1.5, "seed", np.random.RandomState(0)):
        with pytest.raises(InvalidPrivacyParameter, match="random_state"):
            check_random_state(bad)
