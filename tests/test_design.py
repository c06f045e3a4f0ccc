"""dperm.design: the zero-copy view of X (clipping as a per-row scale, implicit
intercept, float32 kept, CSR kept) — exact row bounds, products, no copies."""

from __future__ import annotations

import math
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dperm._validation import check_X, check_X_y, clip_rows
from dperm.design import Design, as_design, augmented_bound
from dperm.exceptions import ClippingWarning, InvalidDataError
from dperm.losses import Logistic, Softmax

R = 1.0
S = 0.5


def _exact_sq_norm(c: float, row) -> Fraction:
    """‖c·x‖² of the stored floating-point numbers, in exact rational arithmetic."""
    c = Fraction(float(c))
    return c * c * sum((Fraction(float(v)) ** 2 for v in row), Fraction(0))


def _reference(X, data_norm=R, s=S):
    """The effective matrix built the old way: clip_rows, then an appended column."""
    X64 = X.astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        Xc, _ = clip_rows(X64, data_norm)
    Xc = Xc.toarray() if sp.issparse(Xc) else Xc
    return Xc if s is None else np.hstack([Xc, np.full((Xc.shape[0], 1), s)])


def _inputs(n=300, d=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / math.sqrt(d) * 1.3  # about half the rows above R = 1
    Xs = sp.random(n, d, density=0.5, format="csr", random_state=seed, dtype=np.float64)
    Xs.data = rng.normal(size=Xs.nnz)
    return {
        "dense64": X,
        "dense32": X.astype(np.float32),
        "fortran": np.asfortranarray(X),
        "csr64": Xs,
        "csr32": Xs.astype(np.float32),
    }


# ------------------------------------------------------------------ the row bound, exactly
_finite = st.floats(
    min_value=-1e150, max_value=1e150, allow_nan=False, allow_infinity=False, width=64
)


@settings(max_examples=150, deadline=None)
@given(
    X=hnp.arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 12)), elements=_finite),
    bound=st.one_of(st.floats(min_value=1e-6, max_value=1e6), st.sampled_from([1e-150, 1e150])),
    f32=st.booleans(),
)
def test_clipped_rows_are_within_the_bound_in_exact_arithmetic(X, bound, f32):
    """Adversarial rows (huge, tiny, subnormal, at the bound): the real vector cᵢ·xᵢ
    of the stored numbers has norm ≤ R exactly, and so do the materialized rows
    (their float64 norms too); rows strictly inside R(1 − κ) are untouched."""
    if f32:
        with np.errstate(over="ignore"):
            X = X.astype(np.float32)
        X[~np.isfinite(X)] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        D = as_design(X, bound)
    scale = np.ones(X.shape[0]) if D.scale is None else D.scale
    R2 = Fraction(bound) ** 2
    for c, row in zip(scale, X, strict=True):
        assert _exact_sq_norm(c, row) <= R2
    dense = D.to_dense()
    for row in dense:
        assert _exact_sq_norm(1.0, row) <= R2
    assert np.all(np.linalg.norm(dense, axis=1) <= bound)
    # untouched rows: exactly the input
    kappa = (X.shape[1] + 16) * 2.0**-53
    inside = D.row_norms() <= bound * (1 - 2 * kappa)
    np.testing.assert_array_equal(dense[inside], X[inside].astype(np.float64))


@settings(max_examples=60, deadline=None)
@given(
    X=hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 8)), elements=_finite),
    s=st.floats(min_value=1e-3, max_value=10.0),
    smaller=st.floats(min_value=0.05, max_value=0.99),
)
def test_intercept_rows_within_augmented_bound_and_reclipped_exactly(X, s, smaller):
    """With the intercept, ‖(cx, s)‖ ≤ augmented_bound(R, s); clipping a Design again to
    a smaller bound scales the whole row, intercept included, exactly below it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        D = as_design(X, R, intercept_scaling=s)
        B = Fraction(D.bound) ** 2
        for row in D.to_dense():
            assert _exact_sq_norm(1.0, row) <= B
        r2 = smaller * D.bound
        D2 = as_design(D, r2)
    assert D2 is not D and D2.bound == r2
    for row in D2.to_dense():
        assert _exact_sq_norm(1.0, row) <= Fraction(r2) ** 2
    assert np.all(D2.row_norms() <= r2)


def test_overflowing_rows_are_clipped_not_zeroed_and_nan_is_refused():
    X = np.array([[1e200, 1e200], [3.0, 4.0], [0.0, 0.0]])
    D = as_design(X, 1.0, warn=False)
    np.testing.assert_allclose(D.to_dense(), [[2**-0.5, 2**-0.5], [0.6, 0.8], [0, 0]])
    assert D.n_clipped == 2
    # squares that underflow: the true norm, not 0 (CSR alike)
    tiny = np.array([[1e-170, 1e-170], [0.0, 0.0], [3e-170, 4e-170]])
    for Xt in (tiny, sp.csr_matrix(tiny)):
        Dt = as_design(Xt, 1e-170, warn=False)
        np.testing.assert_allclose(Dt.row_norms(), [1e-170, 0.0, 1e-170], rtol=1e-12)
        assert Dt.n_clipped == 2
    for bad in (np.nan, np.inf, -np.inf):
        Xb = X.copy()
        Xb[1, 1] = bad
        with pytest.raises(InvalidDataError, match="NaN or infinite"):
            as_design(Xb, 1.0)
        with pytest.raises(InvalidDataError, match="NaN or infinite"):
            as_design(Xb)


def test_n_clipped_counts_rows_above_the_bound_and_warns():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [1.0, 0.0]])  # norms 5, 0.5, 1 (at the bound)
    with pytest.warns(ClippingWarning, match="1 row"):
        D = as_design(X, 1.0)
    assert D.n_clipped == 1
    assert np.shares_memory(D.X, X)


@pytest.mark.parametrize("kind", ["float64", "float32", "csr", "frame"])
def test_rows_normalized_to_the_bound_are_not_counted_as_clipped(kind):
    # Issue #13: rows of unit norm up to rounding were reported as clipped (and warned
    # about), differently for numpy, a DataFrame and float32 copies of the same data.
    pd = pytest.importorskip("pandas")
    from dperm import DPLogisticRegression

    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 37))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    A = {
        "float64": X,
        "float32": X.astype(np.float32),
        "csr": sp.csr_matrix(X),
        "frame": pd.DataFrame(X),
    }[kind]
    y = np.where(X[:, 0] > 0, 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClippingWarning)
        clf = DPLogisticRegression(epsilon=1.0, data_norm=1.0, classes=[-1, 1], random_state=0)
        clf.fit(A, y)
    assert clf.n_clipped_ == 0
    # the rows are still scaled into the exact bound (only the count is tolerant) ...
    D = as_design(np.asarray(A.toarray() if kind == "csr" else A), 1.0)
    assert np.all(D.row_norms() <= 1.0)
    # ... and rows above the bound by more than rounding are counted
    with pytest.warns(ClippingWarning):
        assert as_design(X * (1 + 1e-9), 1.0).n_clipped == X.shape[0]


def test_duplicate_csr_entries_give_the_true_row_norm():
    X = sp.csr_matrix((np.array([3.0, 1.0, 3.0]), np.array([0, 0, 1]), np.array([0, 3])), (1, 2))
    assert not X.has_canonical_format  # the row is (4, 3): norm 5
    D = as_design(X, 1.0, warn=False)
    np.testing.assert_allclose(D.to_dense(), [[0.8, 0.6]])


# ------------------------------------------------------------------ products = reference
@pytest.mark.parametrize("kind", list(_inputs()))
@pytest.mark.parametrize("s", [S, None])
def test_products_equal_the_materialized_matrix(kind, s):
    X = _inputs()[kind]
    D = as_design(X, R, intercept_scaling=s, warn=False)
    ref = _reference(X, R, s)
    n, d = ref.shape
    assert D.shape == (n, d) and len(D) == n
    rng = np.random.default_rng(1)
    th, v, V = rng.normal(size=d), rng.normal(size=n), rng.normal(size=(n, 3))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    w = rng.random(n)
    L = Logistic()
    np.testing.assert_allclose(D @ th, ref @ th, atol=1e-12)
    np.testing.assert_allclose(D.T @ v, ref.T @ v, atol=1e-11)
    np.testing.assert_allclose(D.matvec(np.c_[th, -th]), ref @ np.c_[th, -th], atol=1e-12)
    np.testing.assert_allclose(D.rmatvec(V), ref.T @ V, atol=1e-11)
    np.testing.assert_allclose(D.row_norms(), np.linalg.norm(ref, axis=1), atol=1e-14)
    np.testing.assert_allclose(D.to_dense(), ref, atol=1e-15)
    np.testing.assert_allclose(D.gram(w), ref.T @ (ref * w[:, None]), atol=1e-10)
    val, g = D.glm_value_and_gradient(L, th, y, weights=w)
    z = ref @ th
    assert val == pytest.approx(np.sum(w * L.pointwise(z, y)), rel=1e-12)
    np.testing.assert_allclose(g, ref.T @ (w * L.derivative(z, y)), atol=1e-11)
    hv = D.glm_hessian_vector(L, th, y, v[:d], weights=w)
    h = w * L.second_derivative(z, y)
    np.testing.assert_allclose(hv, ref.T @ (h * (ref @ v[:d])), atol=1e-11)
    np.testing.assert_allclose(
        D.glm_hessian(L, th, y), ref.T @ (ref * (h / w)[:, None]), atol=1e-10
    )
    rows = rng.choice(n, size=40, replace=False)
    np.testing.assert_allclose(D.take(rows).to_dense(), ref[rows], atol=1e-15)
    # clipped per-example gradient sums (DP-SGD) against the explicit per-example gradients
    C = 0.3
    G = L.derivative(z, y)[:, None] * ref
    c = np.minimum(1.0, C / np.maximum(np.linalg.norm(G, axis=1), 1e-300))
    np.testing.assert_allclose(D.glm_clipped_sum(L, th, y, C, rows=rows), c[rows] @ G[rows])
    np.testing.assert_allclose(D.glm_clipped_sum(L, th, y, C), c @ G, atol=1e-12)


def test_softmax_clipped_sum_and_materialize():
    X = _inputs()["csr32"]
    D = as_design(X, R, intercept_scaling=S, warn=False)
    ref = _reference(X)
    loss = Softmax(3)
    rng = np.random.default_rng(2)
    Th = rng.normal(size=(ref.shape[1], 3))
    y = rng.integers(0, 3, size=ref.shape[0])
    Rm = loss.residual_from_scores(ref @ Th, y)
    norms = np.linalg.norm(Rm, axis=1) * np.linalg.norm(ref, axis=1)
    c = np.minimum(1.0, 0.2 / norms)
    np.testing.assert_allclose(D.softmax_clipped_sum(loss, Th, y, 0.2), ref.T @ (c[:, None] * Rm))
    M = D.materialize()
    assert sp.issparse(M) and M.dtype == np.float64
    np.testing.assert_allclose(M.toarray(), ref, atol=1e-15)


# ------------------------------------------------------------------ the view's contract
def test_as_design_is_idempotent_and_refuses_a_second_intercept():
    X = _inputs()["dense64"]
    D = as_design(X, R, intercept_scaling=S, warn=False)
    assert D.bound == augmented_bound(R, S)
    assert as_design(D, D.bound) is D and as_design(D) is D and as_design(D, 10.0) is D
    with pytest.raises(InvalidDataError, match="intercept_scaling"):
        as_design(D, R, intercept_scaling=S)
    assert check_X(D) is D
    assert check_X_y(D, np.ones(X.shape[0]))[0] is D


def test_the_view_never_converts_implicitly():
    D = as_design(_inputs()["dense64"], R, warn=False)
    with pytest.raises(TypeError, match="to_dense"):
        np.asarray(D)
    with pytest.raises(TypeError, match="row selection"):
        D[:, 0]
    with pytest.raises(ValueError):
        D.scale[0] = 2.0  # read-only per-row vectors
    with pytest.raises(InvalidDataError, match="columns"):
        D @ np.ones(3)


def test_check_X_keeps_float32_and_csr_without_copy():
    X = _inputs()
    for kind in ("dense32", "fortran", "csr32", "csr64"):
        got = check_X(X[kind])
        assert got is X[kind] or (sp.issparse(got) and got.data is X[kind].data)
    assert check_X(np.arange(6).reshape(3, 2)).dtype == np.float64  # ints are converted
    mm = np.lib.format.open_memmap(
        __import__("tempfile").mktemp(suffix=".npy"), mode="w+", dtype=np.float32, shape=(50, 4)
    )
    mm[:] = 0.5
    D = as_design(mm, R, warn=False)
    assert np.shares_memory(D.X, mm)


# ------------------------------------------------------------------ no copy of X in a fit
def _peak_added(fn) -> int:
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


@pytest.mark.parametrize("kind", ["dense64", "dense32", "csr64"])
@pytest.mark.parametrize("mechanism", ["objective", "dp-gd"])
def test_estimator_fit_adds_far_less_than_a_copy_of_X(kind, mechanism):
    """Intercept on, clipping active: the peak memory a fit adds stays far below
    size(X) (the old path copied X once for the intercept and once to clip, and
    float32 once more to float64).  The per-row vectors (labels, norms, scales,
    margins: 8 bytes per row each) are what remains; benchmarks/bench_memory.py
    measures the ratios at scale."""
    from dperm import DPLogisticRegression

    rng = np.random.default_rng(3)
    n, d = 40_000, 50
    if kind.startswith("csr"):
        X = sp.random(n, 10 * d, density=0.1, format="csr", random_state=3)
        X.data = rng.normal(size=X.nnz) / math.sqrt(d)
        size = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        z = np.asarray(X @ rng.normal(size=10 * d)).ravel()
    else:
        # norms ≈ 0.97 ± 0.1: about a third of the rows are clipped (most would be refused)
        X = (rng.normal(size=(n, d)) / math.sqrt(d) * 0.97).astype(
            np.float32 if kind == "dense32" else np.float64
        )
        size = X.nbytes
        z = X @ rng.normal(size=d).astype(X.dtype)
    y = np.where(z > 0, 1.0, -1.0)

    # dp-gd accounted by RDP here: the PLD accountant's working arrays (a few MB,
    # independent of n) would dominate the peak at this small n
    extra = {"accountant": "rdp", "epochs": 5} if mechanism == "dp-gd" else {}

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippingWarning)
            return DPLogisticRegression(
                mechanism=mechanism, epsilon=1.0, classes=[-1, 1], random_state=0, **extra
            ).fit(X, y)

    fit()  # warm-up: imports and the noise calibration cache are not the fit's data path
    est = None

    def run():
        nonlocal est
        est = fit()

    peak = _peak_added(run)
    assert est.n_clipped_ > 0
    assert peak < 0.5 * size, f"{mechanism}/{kind}: the fit added {peak / size:.2f} × size(X)"
    D, _ = est._design(X, warn=False)
    assert np.shares_memory(D.X, X if not sp.issparse(X) else X.data) or D.X is X


def test_float32_gives_the_float64_model():
    """float32 input is used as float32 (products accumulated in float64): the model
    equals the one fitted on the same values stored as float64."""
    from dperm import DPLogisticRegression

    X = _inputs(n=2000, d=10)["dense32"] * np.float32(0.7)  # some rows clipped, not most
    y = np.where(X.astype(np.float64) @ np.arange(10.0) > 0, 1, -1)
    with pytest.warns(ClippingWarning):
        fits = [
            DPLogisticRegression(epsilon=1.0, classes=[-1, 1], random_state=5).fit(Z, y)
            for Z in (X, X.astype(np.float64))
        ]
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fits[0].intercept_, fits[1].intercept_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fits[0].decision_function(X), fits[1].decision_function(X))
    assert fits[0].n_clipped_ == fits[1].n_clipped_ > 0


def test_weighted_loss_uses_the_fused_pass_with_weights():
    from dperm.estimators._base import _WeightedLoss

    X = _inputs()["dense64"]
    D = as_design(X, R, intercept_scaling=S, warn=False)
    ref = _reference(X)
    rng = np.random.default_rng(4)
    w = rng.random(X.shape[0])
    y = np.where(rng.random(X.shape[0]) < 0.5, -1.0, 1.0)
    th = rng.normal(size=ref.shape[1])
    wl = _WeightedLoss(Logistic(), w)
    v1, g1 = wl.value_and_gradient(th, D, y)
    v2, g2 = wl.value_and_gradient(th, ref, y)
    assert v1 == pytest.approx(v2, rel=1e-12)
    np.testing.assert_allclose(g1, g2, atol=1e-13)
    np.testing.assert_allclose(
        wl.hessian_vector_product(th, D, y, th), wl.hessian_vector_product(th, ref, y, th)
    )


def test_design_repr_and_sizes():
    D = as_design(_inputs()["csr64"], R, intercept_scaling=S, warn=False)
    assert "csr" in repr(D) and "n_clipped" in repr(D)
    assert isinstance(D.take(np.arange(5)), Design) and D.take(None) is D
    assert D.nbytes <= 8 * 4 * D.shape[0]


def test_function_api_takes_arrays_or_designs_alike():
    """fit(loss, X, y) builds the Design inside: a raw array, or a Design the caller
    built (passed through, not re-clipped), give the same release for the same seed."""
    from dperm.algorithms import dp_sgd, output_perturbation

    X = _inputs(n=400, d=5)["dense64"]
    y = np.where(X @ np.arange(5.0) > 0, 1.0, -1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        D = as_design(X, R)
        kw = dict(epsilon=1.0, delta=1e-5, data_norm=R, random_state=7)
        a = output_perturbation.fit(Logistic(), X, y, alpha=0.1, **kw)
        b = output_perturbation.fit(Logistic(), D, y, alpha=0.1, **kw)
        np.testing.assert_array_equal(a.theta, b.theta)
        assert a.diagnostics["n_clipped"] == b.diagnostics["n_clipped"] == D.n_clipped > 0
        kw.update(neighbouring="replace-one", epochs=2, batch_size=40, noise_multiplier=1.0)
        kw.pop("epsilon")
        kw.pop("delta")
        a = dp_sgd.fit(Logistic(), X, y, **kw)
        b = dp_sgd.fit(Logistic(), D, y, **kw)
        np.testing.assert_array_equal(a.theta, b.theta)
