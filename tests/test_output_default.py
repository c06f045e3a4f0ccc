"""Multinomial output perturbation at its defaults (issue #30, "one schedule"): rows
clipped to the public fraction f(ε) of their bound, Λ the output rule at the clipped
bound, sensitivity 2L/(nΛ) with L = √2·r (Chaudhuri, Monteleoni & Sarwate 2011, Thm 6)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits

from dperm.design import as_design, augmented_bound
from dperm.estimators import DPLogisticRegression, _auto
from dperm.estimators._alpha_rules import output_alpha_rule
from dperm.estimators._auto import (
    CONSISTENT_ABOVE,
    OUTPUT_CLIP_FRACTION,
    OUTPUT_INTERCEPT_SCALE,
    output_clip_fraction,
)
from dperm.estimators._output_rows import scale_intercept
from dperm.exceptions import InvalidPrivacyParameter


def test_clip_fraction_values_and_consistency():
    assert output_clip_fraction(0.01) == output_clip_fraction(1.0) == OUTPUT_CLIP_FRACTION
    assert output_clip_fraction(CONSISTENT_ABOVE) == OUTPUT_CLIP_FRACTION
    assert output_clip_fraction(2 * CONSISTENT_ABOVE) == pytest.approx(2 * OUTPUT_CLIP_FRACTION)
    # no clipping from ε = ε_c/f₀ on: the default tends to the non-private model
    assert output_clip_fraction(CONSISTENT_ABOVE / OUTPUT_CLIP_FRACTION) == 1.0
    assert output_clip_fraction(1e4) == output_clip_fraction(1e300) == 1.0
    eps = np.geomspace(1e-3, 1e6, 200)
    f = np.array([output_clip_fraction(e) for e in eps])
    assert np.all(np.diff(f) >= 0) and np.all((f > 0) & (f <= 1))
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        output_clip_fraction(0.0)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = X / (16.0 * 8.0)  # public scale: pixel ≤ 16, 64 pixels → ‖x‖ ≤ 1
    perm = np.random.default_rng(0).permutation(len(y))
    return X[perm[:1400]], y[perm[:1400]], X[perm[1400:]], y[perm[1400:]]


def _fit(X, y, **kw):
    clf = DPLogisticRegression(mechanism="output", classes=list(range(10)), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return clf.fit(X, y)


@pytest.mark.parametrize("epsilon", [1.0, 8.0])
def test_default_clips_rows_and_calibrates_at_the_clipped_bound(digits, epsilon):
    X, y, _, _ = digits
    clf = _fit(X, y, epsilon=epsilon, random_state=0)
    diag = clf.diagnostics_
    # the intercept column s′ = min(0.5, 0.1·R) = 0.1, rows clipped to f·√(R² + s′²)
    r = OUTPUT_CLIP_FRACTION * augmented_bound(1.0, OUTPUT_INTERCEPT_SCALE)
    n = X.shape[0]
    assert diag["data_norm"] == pytest.approx(r)
    assert diag["n_clipped"] > 0  # the rule's clipping is counted
    assert clf.alpha_ == pytest.approx(output_alpha_rule(n, 65, epsilon, r, n_classes=10))
    # intercept_ = θ_d·s with θ_d mapped back from the s′ column: scores as coef_/intercept_
    np.testing.assert_allclose(clf.decision_function(X), X @ clf.coef_.T + clf.intercept_)
    # Δ₂ = 2L/(nΛ) with the softmax L = √2·r of the clipped rows
    assert diag["sensitivity"] == pytest.approx(2 * math.sqrt(2) * r / (n * clf.alpha_))
    assert clf.epsilon_ == epsilon and clf.neighbouring_ == "replace-one"


def test_numeric_alpha_and_binary_problems_keep_the_row_bound(digits):
    X, y, _, _ = digits
    clf = _fit(X, y, epsilon=1.0, alpha=1e-3, random_state=0)
    assert clf.diagnostics_["data_norm"] == pytest.approx(clf.data_norm_)
    keep = y < 2
    binary = DPLogisticRegression(mechanism="output", classes=[0, 1], random_state=0)
    binary.fit(X[keep], y[keep])
    assert binary.diagnostics_["data_norm"] == pytest.approx(binary.data_norm_)
    n = int(keep.sum())
    assert binary.alpha_ == pytest.approx(output_alpha_rule(n, 65, 1.0, binary.data_norm_))


def test_rows_at_the_bound_give_the_unclipped_fit(digits, monkeypatch):
    """Rows all at the bound are only rescaled by the clipping: with Λ ∝ r² the fit is
    the unclipped one divided by f — the same predictions (a check that Λ and Δ₂ are
    both evaluated at the clipped bound)."""
    X, y, Xt, _ = digits
    # rows all of norm R = 1 (no intercept column: the clipping alone)
    X, Xt = (A / np.linalg.norm(A, axis=1, keepdims=True) for A in (X, Xt))
    clipped = _fit(X, y, epsilon=1.0, random_state=3, fit_intercept=False)
    monkeypatch.setattr(_auto, "OUTPUT_CLIP_FRACTION", 1.0)
    full = _fit(X, y, epsilon=1.0, random_state=3, fit_intercept=False)
    assert full.diagnostics_["data_norm"] == pytest.approx(full.data_norm_)
    f = OUTPUT_CLIP_FRACTION
    np.testing.assert_allclose(clipped.coef_ * f, full.coef_, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(clipped.predict(Xt), full.predict(Xt))


def test_clipping_improves_the_default_on_digits(digits, monkeypatch):
    """Utility on a bundled set the rule was not chosen on (digits, ‖x‖ ≈ 0.5 under the
    bound 1): the default beats the unclipped rule, mean of 5 noise seeds."""
    X, y, Xt, yt = digits

    def mean_score():
        return np.mean([_fit(X, y, epsilon=4.0, random_state=s).score(Xt, yt) for s in range(5)])

    default = mean_score()
    monkeypatch.setattr(_auto, "OUTPUT_CLIP_FRACTION", 1.0)
    unclipped = mean_score()
    assert default > unclipped + 0.02, (default, unclipped)


def test_intercept_coordinate_maps_back_to_intercept_scaling():
    """The fit on the column s′ = g·s releases θ′; θ′ with θ_d·g scores every row as θ′
    does on the s′ column, so ``intercept_`` = θ_d·s stays right."""
    from dperm.algorithms.base import Result

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4)) / 4
    theta = rng.normal(size=(5, 3))
    released = Result(theta=theta, event=None, diagnostics={})
    mapped = scale_intercept(released, 0.1 / 0.5).theta
    on_s = as_design(X, 1.0, intercept_scaling=0.5, warn=False) @ mapped
    on_s_new = as_design(X, 1.0, intercept_scaling=0.1, warn=False) @ theta
    np.testing.assert_allclose(on_s, on_s_new)
    assert scale_intercept(released, 1.0) is released


@pytest.mark.parametrize("epsilon", [0.01, 1.0, 20.0, 1e4])
@pytest.mark.parametrize("kind", ["dense", "float32", "sparse", "no-intercept", "zero-rows"])
def test_default_never_raises_inside_the_bounds(epsilon, kind):
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 6)) / 6
    y = rng.integers(0, 3, size=40)
    kw = {}
    if kind == "float32":
        X = X.astype(np.float32)
    elif kind == "sparse":
        X = sp.random(40, 6, density=0.3, format="csr", random_state=1) / 3
    elif kind == "no-intercept":
        kw["fit_intercept"] = False
    elif kind == "zero-rows":
        X[:10] = 0.0
    clf = DPLogisticRegression(
        mechanism="output", epsilon=epsilon, classes=[0, 1, 2], random_state=0, **kw
    ).fit(X, y)
    assert np.all(np.isfinite(clf.coef_)) and np.all(np.isfinite(clf.intercept_))
    assert set(clf.predict(X)) <= {0, 1, 2}
