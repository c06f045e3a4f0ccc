"""The Dask backend (dperm.backends.dask, issue #12 §2) on a real distributed.LocalCluster.

Two worker processes with one thread each, started once for the module.  The
properties: every pass of the Design interface equals the one-machine pass; fits
that are deterministic given the noise give the same model as on one machine for
the same seed, DP-SGD included (the sampler's own batches, split by partition);
X never reaches the client; bad input raises the one-machine exceptions.
(The cross-backend equalities on small data: tests/test_backends.py.)
"""

from __future__ import annotations

import itertools
import warnings

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
    """Every object the client receives is a few d-vectors (≪ size of X), and no
    Dask array is ever converted with numpy.asarray on the client."""
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

    from dperm.backends import dask_session

    real_recv = dask_session._recv

    replies = []

    def recv(sock):  # the step session's replies: d-vectors too
        out = real_recv(sock)
        replies.append(len(out))
        return out

    monkeypatch.setattr(distributed.Client, "gather", gather)
    monkeypatch.setattr(dask_session, "_recv", recv)
    monkeypatch.setattr(da.Array, "__array__", no_asarray)
    for mechanism in ("objective", "dp-gd", "dp-sgd"):
        est = DPLogisticRegression(
            epsilon=1.0, delta=1e-6, data_norm=1.2, mechanism=mechanism, classes=[-1, 1]
        )
        if mechanism == "dp-sgd":
            est.set_params(batch_size=600, epochs=1)
        elif mechanism == "dp-gd":
            est.set_params(epochs=10)
        est.fit(Xd, yd)
    assert received, "nothing went through the distributed client"
    assert len(replies) >= 10  # DP-SGD's 10 steps (q = 600/6000) came through the session
    assert max(received + replies) < 4096 < Xd.nbytes / 40
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
    as on one machine for the same seed (up to the order of additions)."""
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
        np.testing.assert_allclose(r1.theta, r0.theta, rtol=1e-9, atol=1e-12)
    assert np.mean(np.sign(X @ r1.theta) == y) > 0.8


# ------------------------------------------------------------------ the step session
def _session_threads(client) -> int:
    import threading

    def count():
        return sum(t.name == "dperm-step-session" for t in threading.enumerate())

    return sum(client.run(count).values())


def _wait_no_session_threads(client, timeout=10.0) -> int:
    import gc
    import time

    gc.collect()
    deadline = time.monotonic() + timeout
    while _session_threads(client) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _session_threads(client)


def test_dp_sgd_steps_go_through_one_session_per_fit(data, ddata, client, monkeypatch):
    """A DP-SGD fit submits O(workers) tasks, not one per worker and step; its model
    is bitwise the model of the task path (the same additions in the same order)
    and the numpy model up to rounding; the workers' session threads end with it."""
    X, y = data
    Xd, yd = ddata
    kw = dict(
        epsilon=1.0, delta=1e-6, data_norm=1.2, neighbouring="replace-one",
        accountant="pld", sampling_rate=0.05, steps=60, learning_rate=2.0, random_state=3,
    )  # fmt: skip
    submitted = []
    real_submit = distributed.Client.submit

    def submit(self, fn, *args, **kwargs):
        submitted.append(getattr(fn, "__name__", fn))
        return real_submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "submit", submit)
    r_session = dp_sgd.fit(Logistic(), Xd, yd, **kw)
    assert submitted.count("open_session") == 2  # one per worker, once
    assert len(submitted) < 10 < kw["steps"]
    assert _wait_no_session_threads(client) == 0  # closed with the fit's design
    monkeypatch.setattr(DaskDesign, "use_session", False)
    submitted.clear()
    r_tasks = dp_sgd.fit(Logistic(), Xd, yd, **kw)
    assert submitted.count("_partial_group") >= kw["steps"]
    np.testing.assert_array_equal(r_session.theta, r_tasks.theta)
    r_numpy = dp_sgd.fit(Logistic(), X, y, **kw)
    np.testing.assert_allclose(r_session.theta, r_numpy.theta, rtol=1e-9, atol=1e-12)


def _open(client, key, design, y):
    """A session opened by hand on the worker holding partition 0 (its address)."""
    import functools

    from dperm.backends import dask as backend
    from dperm.backends import dask_tasks as tasks
    from dperm.backends.dask_session import open_session

    where = design._placement()
    _, groups, xf, af = where
    worker = next(w for w, ps in groups.items() if 0 in ps)
    yf = backend.block_futures(design.align(y), client)
    blocks = [(xf[p], af[p], yf[p], None) for p in groups[worker]]
    args = dict(size=design.shape[1], loss=Logistic(), C=0.3)
    prepare = functools.partial(tasks.prepare_batch, op="clip", spec=design._spec)
    compute = functools.partial(tasks.compute_batch, op="clip", spec=design._spec, args=args)
    fut = client.submit(
        open_session, key, prepare, compute, (design.shape[1],), blocks, workers=[worker],
        pure=False,
    )  # fmt: skip
    return tuple(fut.result()), groups[worker]


def test_session_refuses_a_peer_without_the_key(client, ddata):
    """A connection that does not prove the session key is dropped before anything
    is read or sent; the client that has the key is still served, by the
    one-machine arithmetic, and the worker's thread ends when it disconnects."""
    import socket

    from dperm.backends import dask_session as ds
    from dperm.backends import dask_tasks as tasks

    Xd, yd = ddata
    design = as_design(Xd, 1.2, warn=False)
    key = b"k" * 32
    address, parts = _open(client, key, design, yd)
    intruder = socket.create_connection(address, timeout=10)
    with pytest.raises((ds.SessionError, EOFError, OSError)):
        ds._prove_client(intruder, b"x" * 32)
        ds._recv(intruder)
    intruder.close()
    sock = socket.create_connection(address, timeout=10)
    ds._prove_client(sock, key)
    theta = np.random.default_rng(0).normal(size=D)
    rows = np.arange(0, N, 7)
    local = [(p, r) for p, r in design._blocks_for(rows) if p in parts]
    counts = [len(dict(local).get(p, ())) for p in parts]
    L = tasks.grid_exponent(len(rows), 0.3)
    ds._send(sock, np.array([ds._STEP, L, *counts]), theta, *[r for _, r in local])
    reply = ds._recv(sock)
    assert np.frombuffer(reply, np.int64, 1)[0] == ds._OK
    first = np.frombuffer(reply, np.int64, offset=8)
    got = tasks.from_grid(first, L)
    want = sum(
        as_design(Xd[p * CHUNK : (p + 1) * CHUNK].compute(), 1.2, warn=False).glm_clipped_sum(
            Logistic(), theta, yd[p * CHUNK : (p + 1) * CHUNK].compute(), 0.3, rows=r
        )
        for p, r in local
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # batches queued ahead, then one θ per step: the same sums
    ds._send(sock, np.array([ds._BATCHES, 2, *counts, *counts]), *[r for _, r in local] * 2)
    for _ in range(2):
        ds._send(sock, np.array([ds._NEXT, L]), theta)
        reply = ds._recv(sock)
        np.testing.assert_array_equal(np.frombuffer(reply, np.int64, offset=8), first)
    sock.close()
    assert _wait_no_session_threads(client) == 0


def test_session_errors_and_a_lost_connection(client, data, ddata):
    """A worker-side error is raised on the client (never a hang or a silent zero);
    a lost connection to a live worker reopens the session for that step, same sum."""
    from dperm.backends.dask_session import SessionError

    X, y = data
    Xd, yd = ddata
    D0, D1 = as_design(X, 1.2, warn=False), as_design(Xd, 1.2, warn=False)
    theta, rows, loss = np.full(D, 0.1), np.arange(3, N, 11), Logistic()
    want = D0.glm_clipped_sum(loss, theta, y, 0.3, rows=rows)
    np.testing.assert_allclose(D1.glm_clipped_sum(loss, theta, yd, 0.3, rows=rows), want)
    session = D1._steps.session[2]
    w0 = next(w for w, ps in session.groups.items() if 0 in ps)
    bad = {w0: (np.eye(1, len(session.groups[w0]), dtype=np.int64)[0], np.array([CHUNK + 5]))}
    with pytest.raises(RuntimeError, match="IndexError"):
        session.step(theta, 40, bad)  # a row outside partition 0
    assert session.closed
    np.testing.assert_allclose(D1.glm_clipped_sum(loss, theta, yd, 0.3, rows=rows), want)
    session = D1._steps.session[2]  # reopened
    for sock in session._socks.values():
        sock.close()  # the connections go away under the open session
    np.testing.assert_allclose(D1.glm_clipped_sum(loss, theta, yd, 0.3, rows=rows), want)
    assert session.closed and not D1._steps.session[2].closed  # a new session served it
    assert D1._steps.recoveries == 0  # no worker was lost
    with pytest.raises(SessionError):
        session.step(theta, 40, bad)


def test_session_on_a_tls_cluster_is_encrypted(tmp_path, data):
    """On a cluster whose comms are TLS, the session's connections are TLS with the
    cluster's own certificates (and the model is the numpy model)."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    pem = {f"tls_{role}_{kind}": str(path) for role in ("client", "scheduler", "worker")
           for kind, path in (("cert", cert), ("key", key))}  # fmt: skip
    security = distributed.Security(tls_ca_file=str(cert), require_encryption=True, **pem)
    X, y = data
    kw = dict(
        epsilon=1.0, delta=1e-6, data_norm=1.2, neighbouring="replace-one", accountant="pld",
        sampling_rate=0.05, steps=20, learning_rate=2.0, random_state=1,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, protocol="tls://",
            security=security, dashboard_address=":0", memory_limit="1GiB",
        )  # fmt: skip
        tls_client = distributed.Client(cluster, security=security, set_as_default=False)
    try:
        with tls_client.as_current():
            Xd = tls_client.persist(da.from_array(X, chunks=(CHUNK, D)))
            yd = tls_client.persist(da.from_array(y, chunks=CHUNK))
            design = as_design(Xd, 1.2, warn=False)
            got = design.glm_clipped_sum(
                Logistic(), np.full(D, 0.1), yd, 0.3, rows=np.arange(0, N, 3)
            )
            session = design._steps.session[2]
            assert all(isinstance(s, ssl.SSLSocket) for s in session._socks.values())
            assert all(s.version().startswith("TLS") for s in session._socks.values())
            want = as_design(X, 1.2, warn=False).glm_clipped_sum(
                Logistic(), np.full(D, 0.1), y, 0.3, rows=np.arange(0, N, 3)
            )
            np.testing.assert_allclose(got, want, rtol=1e-10)
            r1 = dp_sgd.fit(Logistic(), Xd, yd, **kw)
        r0 = dp_sgd.fit(Logistic(), X, y, **kw)
        np.testing.assert_allclose(r1.theta, r0.theta, rtol=1e-9, atol=1e-12)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tls_client.close()
            cluster.close()


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


# ------------------------------------------------------------------ placement-free sums
def test_clipped_sums_do_not_depend_on_how_the_rows_are_placed(data):
    """The per-example grid sum of a batch is the same integer vector however its rows
    are split over partitions and workers, in any order (so a lost worker's partitions
    recomputed elsewhere give the same model, bit for bit), and the numpy clipped sum
    to rounding; a term beyond the grid raises instead of wrapping around."""
    from dperm.backends import dask_tasks as tasks

    X, y = data
    D0 = as_design(X, 1.2, intercept_scaling=0.5, warn=False)
    D1 = as_design(da.from_array(X, chunks=(CHUNK, D)), 1.2, intercept_scaling=0.5, warn=False)
    aux = D1.aux.compute()
    rows = np.random.default_rng(5).choice(N, 900, replace=False)
    theta, C, loss = np.random.default_rng(6).normal(size=D + 1), 0.3, Logistic()
    L = tasks.grid_exponent(rows.size, C)
    sums = []
    for cuts in ([], [2000, 4000], [1, 3000, 5999]):  # partitions of the same rows
        bounds = [0, *cuts, N]
        blocks = [(X[a:b], aux[a:b], y[a:b], None) for a, b in itertools.pairwise(bounds)]
        part = np.searchsorted(bounds, rows, side="right") - 1
        for order in (np.arange(len(blocks)), np.arange(len(blocks))[::-1]):
            entry = [(p, rows[part == p] - bounds[p]) for p in order if np.any(part == p)]
            prepared = tasks.batch_rows(blocks, entry, D1._spec)
            sums.append(tasks.clip_grid_sum(prepared, blocks, D1._spec, loss, theta, C, L))
    for s in sums[1:]:
        np.testing.assert_array_equal(s, sums[0])
    want = D0.glm_clipped_sum(loss, theta, y, C, rows=rows)
    np.testing.assert_allclose(tasks.from_grid(sums[0], L), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="grid"):  # a grid too fine for terms of norm C
        tasks.clip_grid_sum(prepared, blocks, D1._spec, loss, theta, C, L + 12)


def test_batches_split_by_partition_and_worker():
    """Batches of every sampler shape (index arrays in any order, negative indices, a
    slice, None = every row, empty) are split into each worker's partitions' local
    rows, in the batch's order within a partition; the row counts are public-size
    facts of the batch (the grid's scale)."""
    from dperm.backends.dask_steps import split

    offsets = np.array([0, 10, 25, 40])
    groups = {"w1": [0, 2], "w2": [1]}
    batches = [np.array([39, 3, 12, 11, 0]), np.array([-1, 24]), slice(8, 12), None, []]
    per_worker, sizes = split(batches, offsets, groups)
    np.testing.assert_array_equal(sizes, [5, 2, 4, 40, 0])
    c1, r1 = per_worker["w1"]
    c2, r2 = per_worker["w2"]
    np.testing.assert_array_equal(c1, [[2, 1], [0, 1], [2, 0], [-1, -1], [0, 0]])
    np.testing.assert_array_equal(c2, [[2], [1], [2], [-1], [0]])
    np.testing.assert_array_equal(r1, [3, 0, 14, 14, 8, 9])  # partition 0 keeps 3 before 0
    np.testing.assert_array_equal(r2, [2, 1, 14, 0, 1])
    with pytest.raises(InvalidDataError, match="out of range"):
        split([np.array([40])], offsets, groups)
