"""Every backend serves the same data path: numpy dense (C and F order, float32 and
float64), numpy memmap, scipy CSR and Dask (synchronous scheduler, several
partitions) give the same clipped-row count — the one rule of
:mod:`dperm.backends.rows` — the same batches from the same seed — the law of
:mod:`dperm.sampling` — and the same model for the same ``random_state``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from dperm import DPLogisticRegression
from dperm.algorithms import dp_sgd
from dperm.design import as_design, backend_for
from dperm.exceptions import ClippingWarning
from dperm.losses import Logistic
from dperm.sampling import PoissonSampler

N, D, CHUNK = 1200, 6, 250  # 5 Dask partitions, the last one short


def _backends(X, tmp_path, *, dask=True):
    """The same rows held by every backend (name → array)."""
    mm = np.memmap(tmp_path / f"x{X.dtype}.dat", mode="w+", dtype=X.dtype, shape=X.shape)
    mm[:] = X
    mm.flush()
    out = {"dense": X, "fortran": np.asfortranarray(X), "csr": sp.csr_matrix(X), "memmap": mm}
    if dask:
        da = pytest.importorskip("dask.array")
        out["dask"] = da.from_array(X, chunks=(CHUNK, X.shape[1]))
    return out


@pytest.fixture(autouse=True)
def _synchronous_dask():
    """Dask on this thread (no cluster): the passes are the backend's own tasks."""
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(19)
    X = rng.normal(size=(N, D)) / 2.0  # about a third of the rows above 1.2
    y = np.where(X @ np.linspace(1.0, -1.0, D) + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    return X, y


def test_the_dispatch_picks_the_backend_by_array_type(data, tmp_path):
    X, _ = data
    for name, A in _backends(X, tmp_path).items():
        expected = "dask_inputs" if name == "dask" else "numpy_inputs"
        assert backend_for(A).__name__ == f"dperm.backends.{expected}"
    assert backend_for([[1.0]]).__name__ == "dperm.backends.numpy_inputs"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unit_norm_rows_are_not_counted_as_clipped_on_any_backend(tmp_path, dtype):
    """The bug of issue #19: float32 unit-norm rows were 0 clipped rows on numpy and
    all of them on Dask.  One rule, one count; rows are still scaled into the bound."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N, 37))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X = X.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClippingWarning)
        designs = {k: as_design(A, 1.0) for k, A in _backends(X, tmp_path).items()}
    for name, Dn in designs.items():
        assert Dn.n_clipped == 0, name
        assert np.all(np.asarray(Dn.row_norms()) <= 1.0), name
        # a subset of rows counts by the same rule
        assert Dn.take(np.arange(0, N, 7)).n_clipped == 0, name
    # rows above the bound by more than rounding are counted everywhere
    with pytest.warns(ClippingWarning):
        above = {k: as_design(A, 1.0 - 1e-4).n_clipped for k, A in _backends(X, tmp_path).items()}
    assert set(above.values()) == {N}


def test_same_scales_counts_and_bounds_on_every_backend(data, tmp_path):
    X, y = data
    ref = as_design(X, 1.2, intercept_scaling=0.5, warn=False)
    assert ref.n_clipped > N // 10
    loss, theta = Logistic(), np.random.default_rng(1).normal(size=D + 1)
    for name, A in _backends(X, tmp_path).items():
        Dn = as_design(A, 1.2, intercept_scaling=0.5, warn=False)
        assert (Dn.n_clipped, Dn.bound, Dn.shape) == (ref.n_clipped, ref.bound, ref.shape), name
        np.testing.assert_allclose(np.asarray(Dn.row_norms()), ref.row_norms(), rtol=1e-15)
        rows = np.random.default_rng(2).choice(N, 90, replace=False)
        np.testing.assert_allclose(
            Dn.glm_clipped_sum(loss, theta, y, 0.5, rows=rows),
            ref.glm_clipped_sum(loss, theta, y, 0.5, rows=rows),
            rtol=1e-12,
            atol=1e-14,
        )
        # a second, smaller bound re-clips the whole effective rows, counted alike
        small = as_design(Dn, 1.0, warn=False)
        assert small.n_clipped == as_design(ref, 1.0, warn=False).n_clipped, name


def test_same_poisson_batches_from_the_same_seed(data, tmp_path):
    """The batches are the sampler's, on every backend: equal index arrays."""
    X, _ = data
    sampler = PoissonSampler(N, 0.03, neighbouring="replace-one")
    want = list(sampler.batches(np.random.default_rng(8), 25))
    for name, A in _backends(X, tmp_path).items():
        got = list(as_design(A).batches(sampler, np.random.default_rng(8), 25))
        assert len(got) == len(want), name
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dp_sgd_same_model_on_every_backend(data, tmp_path, dtype):
    """DP-SGD (Poisson sampling, replace-one) on every backend: the same event,
    calibration, clipped count and released θ for the same ``random_state`` (up to
    the order of floating-point additions)."""
    X, y = data
    X = X.astype(dtype)
    kw = dict(
        epsilon=1.0,
        delta=1e-6,
        data_norm=1.2,
        neighbouring="replace-one",
        accountant="pld",
        sampling_rate=0.05,
        steps=30,
        random_state=11,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        ref = dp_sgd.fit(Logistic(), X, y, **kw)
        assert ref.diagnostics["n_clipped"] > 0
        for name, A in _backends(X, tmp_path).items():
            res = dp_sgd.fit(Logistic(), A, y, **kw)
            assert res.event == ref.event, name
            for key in ("noise_multiplier", "noise_std", "normalizer", "n_clipped"):
                assert res.diagnostics[key] == ref.diagnostics[key], (name, key)
            np.testing.assert_allclose(res.theta, ref.theta, rtol=1e-9, atol=1e-12)


def test_estimator_same_model_on_every_backend(data, tmp_path):
    """The estimators go through the one dispatch: the same coefficients, event and
    clipped count on every backend (DP-SGD and objective perturbation)."""
    X, y = data
    for mechanism in ("dp-sgd", "objective"):
        kw = dict(epsilon=1.0, data_norm=1.2, classes=[-1, 1], mechanism=mechanism)
        if mechanism == "dp-sgd":
            kw.update(batch_size=60, epochs=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippingWarning)
            ref = DPLogisticRegression(random_state=5, **kw).fit(X, y)
            for name, A in _backends(X, tmp_path).items():
                m = DPLogisticRegression(random_state=5, **kw).fit(A, y)
                assert m.dp_event_ == ref.dp_event_ and m.n_clipped_ == ref.n_clipped_, name
                if mechanism == "dp-sgd":  # the default's adaptive clipping everywhere
                    assert m.diagnostics_["clipping"] == "adaptive", name
                if mechanism == "dp-sgd" and name == "dask":  # the lots' rows, numpy's steps
                    np.testing.assert_array_equal(m.coef_, ref.coef_)
                    np.testing.assert_array_equal(m.intercept_, ref.intercept_)
                np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-7, atol=1e-10)
                np.testing.assert_allclose(m.intercept_, ref.intercept_, rtol=1e-7, atol=1e-10)


def test_poisson_batches_are_one_bernoulli_per_record():
    """The law every backend draws (PoissonSampler.batches): each record is included
    with probability q, independently across records and steps.  Tolerances are 4.5
    standard deviations of each statistic."""
    n, q, T = 3000, 0.05, 400
    sampler = PoissonSampler(n, q, neighbouring="replace-one")
    counts = np.zeros(n)
    sizes = np.zeros(T)
    for t, rows in enumerate(sampler.batches(np.random.default_rng(11), T)):
        assert np.all(np.diff(rows) > 0) and (rows.size == 0 or 0 <= rows[0] <= rows[-1] < n)
        counts[rows] += 1
        sizes[t] = rows.size
    # the total: Binomial(n T, q); every record: Binomial(T, q) (Pearson's chi-square)
    assert abs(counts.sum() - n * T * q) < 4.5 * math.sqrt(n * T * q * (1 - q))
    chi2 = np.sum((counts - T * q) ** 2) / (T * q * (1 - q))
    assert abs(chi2 - n) < 4.5 * math.sqrt(2 * n)
    # batch sizes Binomial(n, q), consecutive steps uncorrelated
    assert abs(sizes.var(ddof=1) / (n * q * (1 - q)) - 1) < 4.5 * math.sqrt(2 / (T - 1))
    assert abs(np.corrcoef(sizes[:-1], sizes[1:])[0, 1]) < 4.5 / math.sqrt(T)
    # the first and second halves of the records: uncorrelated inclusion counts per step
    halves = np.zeros((T, 2))
    for t, rows in enumerate(sampler.batches(np.random.default_rng(12), T)):
        halves[t] = [np.count_nonzero(rows < n // 2), np.count_nonzero(rows >= n // 2)]
    assert abs(np.corrcoef(halves.T)[0, 1]) < 4.5 / math.sqrt(T)
