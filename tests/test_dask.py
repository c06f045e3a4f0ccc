"""The Dask backend (dperm.backends.dask, issue #12 §2) on a real distributed.LocalCluster.

Two worker processes with one thread each, started once for the module.  The
properties: every pass of the Design interface equals the one-machine pass; fits
that are deterministic given the noise give the same model as on one machine for
the same seed, DP-SGD included (the sampler's own batches; its steps:
tests/test_dask_steps.py); X never reaches the client; bad input raises the
one-machine exceptions.
(The cross-backend equalities on small data: tests/test_backends.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from conftest import dask_local_cluster  # noqa: E402
from dperm import DPLogisticRegression  # noqa: E402
from dperm.algorithms import _gradient_loop as gl  # noqa: E402
from dperm.algorithms import dp_gd, dp_sgd, objective_perturbation, output_perturbation  # noqa: E402
from dperm.backends.dask import DaskDesign  # noqa: E402
from dperm.design import as_design  # noqa: E402
from dperm.exceptions import ClippingWarning, InvalidDataError, LabelError  # noqa: E402
from dperm.losses import Logistic  # noqa: E402

N, D, CHUNK = 6000, 8, 1000

pytestmark = [
    # the clip counts are checked explicitly where they matter
    pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning"),
]


@pytest.fixture(scope="module")
def client():
    yield from dask_local_cluster(2)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(12)
    X = (rng.normal(size=(N, D)) / 2.5).astype(np.float32)  # ~10 % of rows above 1.2
    w = np.linspace(1.0, -1.0, D)
    y = np.where(X @ w + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    return X, y


@pytest.fixture(scope="module")
def ddata(client, data):
    X, y = data
    Xd = da.from_array(X, chunks=(CHUNK, D)).persist()
    yd = da.from_array(y, chunks=CHUNK).persist()
    distributed.wait([Xd, yd])
    return Xd, yd


# ------------------------------------------------------------------ the passes
def test_every_pass_equals_the_one_machine_pass(data, ddata):
    X, y = data
    Xd, yd = ddata
    D0 = as_design(X, 1.2, intercept_scaling=0.5, warn=False)
    D1 = as_design(Xd, 1.2, intercept_scaling=0.5, warn=False)
    assert isinstance(D1, DaskDesign) and D1.n_partitions == N // CHUNK
    assert D1.shape == D0.shape and D1.bound == D0.bound
    assert D1.n_clipped == D0.n_clipped > 0
    loss, th = Logistic(), np.random.default_rng(1).normal(size=D + 1)
    wts = np.random.default_rng(2).random(N)
    close = dict(rtol=1e-10, atol=1e-10)
    v0, g0 = D0.glm_value_and_gradient(loss, th, y, weights=wts)
    v1, g1 = D1.glm_value_and_gradient(loss, th, yd, weights=wts)
    np.testing.assert_allclose([v1, *g1], [v0, *g0], **close)
    np.testing.assert_allclose(
        D1.glm_hessian_vector(loss, th, yd, g0), D0.glm_hessian_vector(loss, th, y, g0), **close
    )
    for rows in (None, np.random.default_rng(3).choice(N, 300, replace=False), slice(10, 2500)):
        np.testing.assert_allclose(
            D1.glm_clipped_sum(loss, th, yd, 0.3, rows=rows),
            D0.glm_clipped_sum(loss, th, y, 0.3, rows=rows),
            **close,
        )
    np.testing.assert_allclose(D1.gram(), D0.gram(), **close)
    np.testing.assert_allclose(D1.rmatvec(yd), D0.rmatvec(y), **close)
    np.testing.assert_allclose(D1.matvec(th).compute(), D0.matvec(th), **close)
    np.testing.assert_allclose(D1.row_norms().compute(), D0.row_norms(), **close)
    # a smaller bound re-clips whole effective rows (intercept included), on the workers
    R0, R1 = as_design(D0, 1.0, warn=False), as_design(D1, 1.0, warn=False)
    assert R1.n_clipped == R0.n_clipped and R1.bound == R0.bound
    np.testing.assert_allclose(
        R1.glm_gradient_sum(loss, th, yd), R0.glm_gradient_sum(loss, th, y), **close
    )
    assert as_design(D1, 2.0) is D1  # idempotent, as on one machine


def test_every_data_method_of_design_is_served_by_the_workers():
    """A method of Design that touches the rows must be overridden by DaskDesign
    (the private block iterators raise there): a future method cannot silently
    compute on X's partitions from the client."""
    public = {k for k, v in vars(type(as_design(np.ones((1, 1))))).items() if callable(v)}
    delegating = {"__init__", "__array__", "__matmul__", "__rmatmul__", "dot", "__getitem__"}
    delegating |= {"__len__", "T", "batches"}  # batches: the sampler's, drawn on the client
    missing = {k for k in public - delegating if not k.startswith("_")} - set(vars(DaskDesign))
    assert not missing
    for private in ("_blocks", "_raw_matvec", "_raw_rmatvec", "_weighted_gram", "_glm_pass"):
        assert private in vars(DaskDesign)


def test_x_is_never_gathered(client, data, ddata, monkeypatch):
    """Every object a pass returns to the client is a few d-vectors (≪ size of X),
    and no Dask array is ever converted with numpy.asarray on the client (DP-SGD's
    lots' rows: tests/test_dask_steps.py)."""
    from dask.sizeof import sizeof

    _, yd = ddata
    # a fresh X (so nothing is cached from other tests), float32, 6000 × 8 = 192 kB
    Xd = da.from_array(data[0], chunks=(CHUNK, D)).persist()
    received = []
    real_gather = distributed.Client.gather

    def gather(self, futures, *args, **kwargs):
        out = real_gather(self, futures, *args, **kwargs)
        received.append(sizeof(out))
        return out

    def no_asarray(self, *args, **kwargs):
        raise AssertionError("a Dask array was gathered with numpy.asarray")

    monkeypatch.setattr(distributed.Client, "gather", gather)
    monkeypatch.setattr(da.Array, "__array__", no_asarray)
    for mechanism in ("objective", "dp-gd"):
        est = DPLogisticRegression(
            epsilon=1.0, delta=1e-6, data_norm=1.2, mechanism=mechanism, classes=[-1, 1]
        )
        if mechanism == "dp-gd":
            est.set_params(epochs=10)
        est.fit(Xd, yd)
    assert received, "nothing went through the distributed client"
    assert max(received) < 4096 < Xd.nbytes / 40
    design = as_design(Xd, 1.2)
    with pytest.raises(TypeError):
        np.asarray(design)
    with pytest.raises(InvalidDataError, match="whole design matrix"):
        design.to_dense()


# ------------------------------------------------------------------ same model
@pytest.mark.parametrize(
    "fit, kwargs, rtol",
    [
        (objective_perturbation.fit, {"alpha": 1e-2}, 1e-6),
        (output_perturbation.fit, {"alpha": 1e-2}, 1e-6),
        (dp_gd.fit, {"steps": 30}, 1e-9),
    ],
    ids=["objective", "output", "dp-gd"],
)
def test_same_model_as_numpy_for_the_same_seed(data, ddata, fit, kwargs, rtol):
    """Deterministic given the noise: the noise is drawn on the client in the same
    order, the sums differ only by the order of floating-point additions."""
    X, y = data
    Xd, yd = ddata
    common = dict(epsilon=1.0, delta=1e-6, data_norm=1.2, random_state=7, **kwargs)
    r0 = fit(Logistic(), X, y, **common)
    r1 = fit(Logistic(), Xd, yd, **common)
    assert r1.event == r0.event
    assert r1.diagnostics["n_clipped"] == r0.diagnostics["n_clipped"] > 0
    np.testing.assert_allclose(r1.theta, r0.theta, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("mechanism", ["objective", "dp-gd"])
def test_estimator_same_model_and_weights(data, ddata, mechanism):
    X, y = data
    Xd, yd = ddata
    wts = np.random.default_rng(5).uniform(0.2, 1.0, N)
    kw = dict(epsilon=1.0, delta=1e-6, data_norm=1.2, mechanism=mechanism, classes=[-1, 1])
    if mechanism == "dp-gd":
        kw["epochs"] = 15  # full-batch steps
    m0 = DPLogisticRegression(random_state=3, **kw).fit(X, y, sample_weight=wts)
    m1 = DPLogisticRegression(random_state=3, **kw).fit(
        Xd, yd, sample_weight=da.from_array(wts, chunks=1500)
    )
    np.testing.assert_allclose(m1.coef_, m0.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(m1.intercept_, m0.intercept_, rtol=1e-6, atol=1e-8)
    assert m1.dp_event_ == m0.dp_event_ and m1.n_clipped_ == m0.n_clipped_
    assert np.mean(m1.predict(X) == y) > 0.8
    if mechanism == "objective":  # the non-private reference fit runs on the cluster too
        from dperm.utility import excess_empirical_risk, nonprivate_fit

        ref0, ref1 = nonprivate_fit(m0, X, y), nonprivate_fit(m1, Xd, yd)
        np.testing.assert_allclose(ref1.coef_, ref0.coef_, rtol=1e-6, atol=1e-8)
        risk0 = excess_empirical_risk(m0, X, y, reference=ref0)
        assert excess_empirical_risk(m1, Xd, yd, reference=ref1) == pytest.approx(risk0, rel=1e-6)


# ------------------------------------------------------------------ sampling
def test_poisson_batches_are_the_samplers_and_split_exactly(ddata):
    """The batches are the sampler's own global indices (drawn on the client from
    the fit's generator, as on one machine); each partition sums exactly its rows."""
    Xd, _ = ddata
    design = as_design(Xd)
    sampler = gl.PoissonSampler(N, 0.02, neighbouring="replace-one")
    got = list(design.batches(sampler, np.random.default_rng(4), 3))
    want = list(sampler.batches(np.random.default_rng(4), 3))
    for rows, expected in zip(got, want, strict=True):
        np.testing.assert_array_equal(rows, expected)
        back = np.concatenate([p * CHUNK + r for p, r in design._blocks_for(rows)])
        np.testing.assert_array_equal(back, rows)  # sorted rows stay in order
        assert design.batch_size(rows) == rows.size  # counted on the workers


def test_fixed_size_batches_are_split_exactly_across_partitions(ddata):
    """Without replacement: the sampler's b global indices (drawn on the client) are
    sent to their partitions, each row exactly once."""
    Xd, _ = ddata
    design = as_design(Xd)
    sampler = gl.WithoutReplacementSampler(N, 257)
    (rows,) = list(design.batches(sampler, np.random.default_rng(0), 1))
    parts = design._blocks_for(rows)
    back = np.concatenate([p * CHUNK + r for p, r in parts])
    np.testing.assert_array_equal(np.sort(back), np.sort(rows))
    assert design.batch_size(rows) == 257


def test_dp_sgd_poisson_same_model_as_numpy(data, ddata):
    """DP-SGD with Poisson sampling: the same batches, event, calibration and model
    as on one machine for the same seed, bit for bit (each step runs the numpy
    kernel on the lot's fetched rows)."""
    X, y = data
    Xd, yd = ddata
    kw = dict(
        epsilon=1.0,
        delta=1e-6,
        data_norm=1.2,
        neighbouring="add-remove",  # the DP-SGD default; constants from dataset_size
        dataset_size=N,
        accountant="rdp",  # fast to calibrate; the calibration is the same function
        sampling_rate=0.05,
        steps=20,
        learning_rate=2.0,
    )
    for seed in range(2):
        r0 = dp_sgd.fit(Logistic(), X, y, random_state=seed, **kw)
        r1 = dp_sgd.fit(Logistic(), Xd, yd, random_state=seed, **kw)
        assert r1.event == r0.event
        for key in ("noise_multiplier", "noise_std", "normalizer", "steps", "clipping_norm"):
            assert r1.diagnostics[key] == r0.diagnostics[key]
        assert r1.diagnostics["n_clipped"] == r0.diagnostics["n_clipped"] > 0
        np.testing.assert_array_equal(r1.theta, r0.theta)
    assert np.mean(np.sign(X @ r1.theta) == y) > 0.8


# ------------------------------------------------------------------ bad input
def test_nan_in_one_partition(data, client):
    X = data[0].copy()
    X[4321, 3] = np.nan
    Xd = da.from_array(X, chunks=(CHUNK, D))
    with pytest.raises(InvalidDataError, match="NaN or infinite"):
        as_design(X, 1.0)
    with pytest.raises(InvalidDataError, match="NaN or infinite"):
        as_design(Xd, 1.0)
    with pytest.raises(InvalidDataError, match="NaN or infinite"):
        DPLogisticRegression(epsilon=1.0, data_norm=1.0, classes=[-1, 1]).fit(
            Xd, da.ones(N, chunks=CHUNK)
        )
    y = np.ones(N)
    y[5000] = np.nan  # raised by the label step that reads the (lazily) checked y
    for classes in ([-1, 1], None):
        with pytest.raises(InvalidDataError, match="y contains NaN"):
            DPLogisticRegression(epsilon=1.0, data_norm=1.0, classes=classes).fit(
                da.from_array(data[0], chunks=(CHUNK, D)), da.from_array(y, chunks=CHUNK)
            )


def test_bad_input_gives_the_numpy_exceptions(data, ddata):
    X, y = data
    Xd, yd = ddata
    unknown = Xd[Xd[:, 0] > 0]  # boolean row selection: chunk sizes unknown
    with pytest.raises(InvalidDataError, match="unknown chunk sizes"):
        as_design(unknown, 1.0)
    with pytest.raises(InvalidDataError, match="2-D"):
        as_design(da.zeros(10, chunks=5))
    with pytest.raises(InvalidDataError, match="inconsistent numbers of samples"):
        dp_gd.fit(Logistic(), Xd, yd[:-1], epsilon=1.0, delta=1e-6, data_norm=1.0)
    for labels in (y, yd):  # the same LabelError on one machine and on the workers
        bad = labels * 2
        Xs = X if labels is y else Xd
        with pytest.raises(LabelError, match="only the labels -1 and \\+1"):
            dp_gd.fit(Logistic(), Xs, bad, epsilon=1.0, delta=1e-6, data_norm=1.0, steps=2)
    with pytest.raises(LabelError, match="outside classes"):
        DPLogisticRegression(epsilon=1.0, data_norm=1.0, classes=[0, 1]).fit(Xd, yd)
    with pytest.raises(InvalidDataError, match="sample_weight must be finite and in"):
        DPLogisticRegression(epsilon=1.0, data_norm=1.0, classes=[-1, 1]).fit(
            Xd, yd, sample_weight=da.full(N, 2.0, chunks=CHUNK)
        )


def test_dataframe_input(client, data):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    X, y = data
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(D)])
    ddf = dd.from_pandas(frame, npartitions=4)
    ys = dd.from_pandas(pd.Series(y), npartitions=4)
    kw = dict(epsilon=1.0, delta=1e-6, data_norm=1.2, alpha=1e-2, random_state=0)
    r0 = objective_perturbation.fit(Logistic(), X, y, **kw)
    r1 = objective_perturbation.fit(Logistic(), ddf, ys, **kw)
    np.testing.assert_allclose(r1.theta, r0.theta, rtol=1e-6, atol=1e-8)
    frame["s"] = "a"
    with pytest.raises(InvalidDataError, match="non-numeric"):
        as_design(dd.from_pandas(frame, npartitions=2), 1.0)


def test_clipping_warning_counts_rows(ddata):
    Xd, _ = ddata
    with pytest.warns(ClippingWarning, match="row\\(s\\) had an ℓ2 norm above"):
        design = as_design(Xd, 0.5)
    assert design.n_clipped > N // 2


# ------------------------------------------------------------------ reading and the CLI
@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    import pandas as pd

    rng = np.random.default_rng(8)
    n = 3000
    age = rng.integers(18, 90, n)
    hours = rng.uniform(0, 80, n)
    job = rng.choice(["a", "b", "c"], n)
    score = (age - 50) / 20 + (hours - 40) / 20 + (job == "a") + 0.5 * rng.normal(size=n)
    frame = pd.DataFrame(
        {"age": age, "hours": hours, "job": job, "label": np.where(score > 0, "hi", "lo")}
    )
    root = tmp_path_factory.mktemp("tables")
    (root / "pq").mkdir()
    (root / "csv").mkdir()
    for i in range(3):
        part = frame.iloc[i * 1000 : (i + 1) * 1000]
        part.to_parquet(root / "pq" / f"part{i}.parquet")
        part.to_csv(root / "csv" / f"part{i}.csv", index=False)
    frame.to_csv(root / "all.csv", index=False)
    return root


_SCHEMA = dict(bounds={"age": (17, 90), "hours": (0, 99)}, categories={"job": ["a", "b", "c"]})


def test_read_dask_applies_the_public_schema_on_the_workers(client, table_dir):
    from dperm.datasets import load_csv
    from dperm.datasets.dask_io import read_dask

    ref = load_csv(
        table_dir / "all.csv",
        "label",
        categorical=["job"],
        positive_label="hi",
        test_size=0,
        **_SCHEMA,
    )
    order_ref = np.lexsort(ref.X_train.T)
    for sub in ("pq", "csv"):
        ds = read_dask(table_dir / sub, "label", positive_label="hi", **_SCHEMA)
        assert ds.feature_names == ref.feature_names and ds.row_norm_bound == 1.0
        assert ds.X_train.chunks[0] == (1000, 1000, 1000)
        X, y = ds.X_train.compute(), ds.y_train.compute()
        order = np.lexsort(X.T)  # load_csv shuffles; the rows are the same records
        np.testing.assert_array_equal(X[order], ref.X_train[order_ref])
        np.testing.assert_array_equal(y[order], ref.y_train[order_ref])


def test_read_dask_refuses_what_is_not_public(table_dir):
    from dperm.datasets.dask_io import read_dask
    from dperm.exceptions import InvalidPrivacyParameter

    with pytest.raises(InvalidPrivacyParameter, match=r"\['hours'\] have no public bound"):
        read_dask(
            table_dir / "pq",
            "label",
            positive_label="hi",
            bounds={"age": (17, 90)},
            categories=_SCHEMA["categories"],
        )
    with pytest.raises(InvalidPrivacyParameter, match="no public category list"):
        read_dask(table_dir / "pq", "label", positive_label="hi", bounds=_SCHEMA["bounds"])
    with pytest.raises(InvalidPrivacyParameter, match="not read off the data"):
        read_dask(table_dir / "pq", "label", **_SCHEMA)


def test_read_dask_a_category_list_makes_a_column_categorical_whatever_its_values(tmp_path):
    """Two files that differ in one record — a code column holding only 0/1, and the same
    with one "x" — read with the same public schema give the same columns: the sample's
    dtype does not decide the kind (it refused the first file and accepted the second)."""
    import pandas as pd

    from dperm.datasets.dask_io import read_dask

    rng = np.random.default_rng(0)
    base = pd.DataFrame(
        {"k": rng.integers(0, 2, 200).astype(str), "v": rng.uniform(0, 1, 200),
         "label": rng.choice(["hi", "lo"], 200)}
    )  # fmt: skip
    other = base.copy()
    other.loc[0, "k"] = "x"
    schema = dict(bounds={"v": (0, 1)}, categories={"k": ["0", "1", "x"]}, positive_label="hi")
    shapes = []
    for name, frame in (("codes", base), ("neighbour", other)):
        (tmp_path / name).mkdir()
        frame.to_csv(tmp_path / name / "part.csv", index=False)
        ds = read_dask(tmp_path / name, "label", **schema)
        X = ds.X_train.compute()
        shapes.append((ds.feature_names, X.shape))
    assert shapes[0] == shapes[1] and len(shapes[0][0]) == 4  # k=0, k=1, k=x, v


def test_open_array_npy_and_zarr(tmp_path, client):
    zarr = pytest.importorskip("zarr")
    from dperm.datasets.dask_io import open_array

    A = np.random.default_rng(0).normal(size=(1000, 5))
    np.save(tmp_path / "a.npy", A)
    Xn = open_array(tmp_path / "a.npy", chunk_rows=300)
    assert Xn.chunks[0] == (300, 300, 300, 100)
    z = zarr.open(str(tmp_path / "a.zarr"), mode="w", shape=A.shape, chunks=(250, 2), dtype="f8")
    z[:] = A
    Xz = open_array(tmp_path / "a.zarr")
    for Xd in (Xn, Xz):
        np.testing.assert_array_equal(Xd.compute(), A)
        assert as_design(Xd, 3.0).n_clipped == int(np.sum(np.linalg.norm(A, axis=1) > 3.0))


def test_cli_fit_parquet(client, table_dir, capsys):
    import json

    from dperm.cli import main

    argv = [
        "fit", "--parquet", str(table_dir / "pq"), "--target", "label",
        "--bounds", "age=17:90", "--bounds", "hours=0:99", "--categories", "job=a,b,c",
        "--positive-label", "hi", "--mechanism", "objective", "--seed", "0", "--json",
        "--no-reference",
    ]  # fmt: skip
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    res = json.loads(out.out)
    assert res["n_train"] == 3000 and res["neighbouring"] == "replace-one"
    assert res["train_accuracy"] > 0.8
    with pytest.raises(SystemExit) as exc:
        main(argv[:6] + argv[8:])  # no bound for "hours": refused, one line, exit 2
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no public bound" in err[0]
