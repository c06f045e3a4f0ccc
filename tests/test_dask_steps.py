"""DP-SGD's steps on the Dask backend (issue #39): the lots' rows brought to the client a
chunk ahead through Dask's own comms, each step run by the numpy kernel.

On a real 2-worker ``distributed.LocalCluster`` (one thread each).  The properties: the
model is the numpy fit's bit for bit (float32 and float64, intercept, multinomial),
also with ``Client(direct_to_workers=False)`` and on a TLS cluster; a fit is a round
trip per chunk of steps, not per step; only the lots' rows reach the client, each lot
reassembled in its own order; large lots are summed on the workers by the public cost
rule, exactly and whatever the placement; ``dperm.backends`` opens no socket.
"""

from __future__ import annotations

import ast
import itertools
import pathlib
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from conftest import dask_local_cluster  # noqa: E402
from dperm import DPLogisticRegression  # noqa: E402
from dperm.algorithms import dp_sgd  # noqa: E402
from dperm.backends import dask_steps, dask_tasks  # noqa: E402
from dperm.design import as_design  # noqa: E402
from dperm.losses import Logistic  # noqa: E402

N, D, CHUNK = 6000, 8, 1000

pytestmark = pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")

#: DP-SGD with Poisson lots of ≈ 300 rows, 60 steps (replace-one: n is public)
KW = dict(
    epsilon=1.0, delta=1e-6, data_norm=1.2, neighbouring="replace-one", accountant="pld",
    sampling_rate=0.05, steps=60, learning_rate=2.0,
)  # fmt: skip
#: adaptive clipping towards the median gradient norm (Cₜ moves at every step)
ADAPTIVE = dict(target_unclipped_quantile=0.5, count_noise_share=0.1)


@pytest.fixture(scope="module")
def data():
    """float32 rows, 7 % of them above the bound 1.2; logistic ±1 labels."""
    rng = np.random.default_rng(21)
    X = rng.uniform(-0.6, 0.6, size=(N, D)).astype(np.float32)
    p = 1.0 / (1.0 + np.exp(-4.0 * (X @ np.linspace(1.0, -1.0, D))))
    return X, np.where(rng.random(N) < p, 1.0, -1.0)


@pytest.fixture(scope="module")
def client():  # a 2-worker cluster of this module's own
    yield from dask_local_cluster(2)


def _submitted(monkeypatch) -> list:
    """The names of the functions submitted to the cluster from now on."""
    names, real_submit = [], distributed.Client.submit

    def submit(self, fn, *args, **kwargs):
        names.append(getattr(fn, "__name__", fn))
        return real_submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "submit", submit)
    return names


def _persist(*arrays):
    out = [da.from_array(a, chunks=(CHUNK, *a.shape[1:])).persist() for a in arrays]
    distributed.wait(out)
    return out


def test_backends_open_no_socket_of_their_own():
    """No module of dperm.backends imports socket, ssl or a transport of its own:
    the cluster path talks to the workers only through Dask's comms."""
    root = pathlib.Path(dask_steps.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in ("socket", "ssl", "hmac", "asyncio"), path


# ------------------------------------------------------------------ the numpy model, bit for bit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dp_sgd_model_is_the_numpy_model_bit_for_bit(client, data, dtype, monkeypatch):
    """The same lots, the same rows, scales and norms, the numpy kernel: the same θ to
    the last bit; a round trip per chunk of lots (a handful per fit, not 60)."""
    X, y = data
    X = X.astype(dtype)
    Xd, yd = _persist(X, y)
    design = as_design(Xd, 1.2, intercept_scaling=1.0, warn=False)
    submitted = _submitted(monkeypatch)
    for seed in range(2):
        r1 = dp_sgd.fit(Logistic(), design, yd, random_state=seed, **KW)
        r0 = dp_sgd.fit(
            Logistic(), as_design(X, 1.2, intercept_scaling=1.0), y, random_state=seed, **KW
        )
        np.testing.assert_array_equal(r1.theta, r0.theta)
        assert r1.event == r0.event and r1.diagnostics["n_clipped"] == r0.diagnostics["n_clipped"]
    # two fits of 60 steps, chunks of growing size: a few round trips, ≤ 1 task per worker each
    assert set(submitted) == {"take_rows"} and 2 <= len(submitted) <= 2 * 2 * 6


@pytest.mark.filterwarnings("ignore:Sending large graph")
@pytest.mark.parametrize("adaptive", [False, True])
def test_float32_lots_of_several_blocks_stay_the_numpy_model(client, adaptive):
    """float32 lots longer than one block of the numpy path (which then adds the rows'
    products block by block) are kept float32 on the client: still bit for bit, with
    a fixed or an adaptive clipping norm."""
    from dperm._validation import rows_per_chunk

    rng = np.random.default_rng(1)
    X = (rng.normal(size=(3000, 1000)) / 40).astype(np.float32)
    y = np.where(X @ rng.normal(size=1000) > 0, 1.0, -1.0)
    kw = dict(KW, sampling_rate=0.1, steps=10, learning_rate=1.0, data_norm=1.0)
    kw.update(ADAPTIVE if adaptive else {})
    assert 0.1 * 3000 > 2 * rows_per_chunk(1000)
    r1 = dp_sgd.fit(Logistic(), *_persist(X, y), random_state=1, **kw)
    np.testing.assert_array_equal(
        r1.theta, dp_sgd.fit(Logistic(), X, y, random_state=1, **kw).theta
    )


@pytest.mark.parametrize("k", [2, 3])
def test_dp_sgd_default_is_the_numpy_model(client, k):
    """The estimators' default (the auto rule's clipped DP-SGD with adaptive clipping,
    binary and multinomial) on Dask data: the numpy model bit for bit — the same
    noisy counts of unclipped examples, hence the same norms Cₜ step by step."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3000, 4)) / 2
    y = np.argmax(X @ rng.normal(size=(4, k)), axis=1)
    Xd, yd = _persist(X, y)
    kw = dict(classes=list(range(k)), epsilon=2.0, delta=1e-6, random_state=5)
    a = DPLogisticRegression(**kw).fit(Xd, yd)
    b = DPLogisticRegression(**kw).fit(X, y)
    assert a.diagnostics_["mechanism"] == b.diagnostics_["mechanism"] == "dp-sgd"
    assert a.diagnostics_["clipping"] == b.diagnostics_["clipping"] == "adaptive"
    norms = a.diagnostics_["clipping_norms"]
    assert norms.size == a.diagnostics_["steps"] and norms[-1] < norms[0]  # Cₜ moved
    np.testing.assert_array_equal(norms, b.diagnostics_["clipping_norms"])
    np.testing.assert_array_equal(
        a.diagnostics_["clipping_counts"], b.diagnostics_["clipping_counts"]
    )
    assert a.coef_.shape == ((1 if k == 2 else k), 4)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.dp_event_ == b.dp_event_
    assert a.score(X, y) == b.score(X, y) > 0.7


def test_direct_to_workers_false_gives_the_same_model(client, data):
    """A client that reaches only the scheduler (``direct_to_workers=False``: every
    result relayed by the scheduler, as behind dask-gateway or an ingress) fits the
    same model."""
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        relayed = distributed.Client(client.cluster, direct_to_workers=False, set_as_default=False)
    try:
        with relayed.as_current():
            Xd, yd = relayed.persist(
                [da.from_array(X, chunks=(CHUNK, D)), da.from_array(y, chunks=CHUNK)]
            )
            r1 = dp_sgd.fit(Logistic(), Xd, yd, random_state=4, **KW)
    finally:
        relayed.close()
    np.testing.assert_array_equal(
        r1.theta, dp_sgd.fit(Logistic(), X, y, random_state=4, **KW).theta
    )


def test_on_a_tls_cluster_through_its_own_security(tmp_path, data):
    """On a cluster whose comms are TLS (``distributed.Security``), the steps go over
    those comms (nothing else is opened) and give the numpy model."""
    import shutil
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, protocol="tls://",
            security=security, dashboard_address=":0", memory_limit="1GiB",
        )  # fmt: skip
        tls_client = distributed.Client(cluster, security=security, set_as_default=False)
    try:
        with tls_client.as_current():
            assert all(w.startswith("tls://") for w in tls_client.scheduler_info()["workers"])
            Xd = tls_client.persist(da.from_array(X, chunks=(CHUNK, D)))
            yd = tls_client.persist(da.from_array(y, chunks=CHUNK))
            r1 = dp_sgd.fit(Logistic(), Xd, yd, random_state=1, **KW)
        r0 = dp_sgd.fit(Logistic(), X, y, random_state=1, **KW)
        np.testing.assert_array_equal(r1.theta, r0.theta)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tls_client.close()
            cluster.close()


# ------------------------------------------------------------------ only the lots' rows
@pytest.mark.parametrize("adaptive", [False, True])
def test_only_the_lots_rows_reach_the_client(client, data, monkeypatch, adaptive):
    """What the client gathers during a DP-SGD fit — with a fixed or an adaptive
    clipping norm — is the lots' rows (X, their clip scale and norm, y) — as many rows
    as the lots have, nothing else of the data — and each lot reassembled from them is
    X's rows of that lot, in the lot's order."""
    from dask.sizeof import sizeof

    X, y = data
    Xd, yd = _persist(X, y)
    design = as_design(Xd, 1.2, warn=False)
    received, fetched = [], []
    real_gather, real_fetch = distributed.Client.gather, dask_steps.fetch

    def gather(self, futures, *args, **kwargs):
        out = real_gather(self, futures, *args, **kwargs)
        received.append(out)
        return out

    def fetch(design, client, lots, *args):
        out = real_fetch(design, client, lots, *args)
        fetched.append((lots, out))
        return out

    monkeypatch.setattr(distributed.Client, "gather", gather)
    monkeypatch.setattr(dask_steps, "fetch", fetch)
    res = dp_sgd.fit(Logistic(), design, yd, random_state=2, **KW, **(ADAPTIVE if adaptive else {}))
    assert res.diagnostics["clipping"] == ("adaptive" if adaptive else "fixed")
    lots = [lot for f in fetched for lot in f[0]]
    assert len(lots) == KW["steps"]
    rows = [out for out in received if isinstance(out, list) and isinstance(out[0], tuple)]
    others = [out for out in received if not any(out is r for r in rows)]
    assert max(sizeof(out) for out in others) < 4096  # the passes' d-vectors and counts
    pieces = [p for out in rows for p in out]  # take_rows' (X rows, scale & norm, y, w)
    assert sum(p[0].shape[0] for p in pieces) == sum(len(lot) for lot in lots)
    assert all(p[1].shape[1] == 2 and p[3] is None for p in pieces)  # scale, norm; no weights
    norms = design.row_norms().compute()
    for chunk_lots, (view, yl, _, where) in fetched:
        for lot, pos in zip(chunk_lots, where, strict=True):
            np.testing.assert_array_equal(view.X[pos], X[lot])
            np.testing.assert_array_equal(view.row_norms()[pos], norms[lot])
            np.testing.assert_array_equal(yl[pos], y[lot])


def test_fetch_reassembles_any_lot_in_its_order(client, data):
    """Lots of every shape a sampler yields — sorted (Poisson), unsorted (fixed size),
    negative indices, a slice, a one-row slice, empty, the same row in two lots —
    come back as exactly their rows, in their order, with their labels and weights."""
    X, y = data
    w = np.linspace(0.1, 1.0, N)
    Xd, yd, wd = _persist(X, y, w)
    design = as_design(Xd, warn=False)
    lots = [np.array([5999, 3, 1500, 1499, 0]), np.array([-1, 2500]), slice(990, 1010),
            slice(7, 8), np.array([], dtype=np.int64), np.array([3, 3000])]  # fmt: skip
    view, yl, wl, where = dask_steps.fetch(design, client, lots, yd, wd)
    for lot, pos in zip(lots, where, strict=True):
        idx = np.arange(N)[lot]
        np.testing.assert_array_equal(view.X[pos], X[idx])
        np.testing.assert_array_equal(yl[pos], y[idx])
        np.testing.assert_array_equal(wl[pos], w[idx])
    assert view.X.shape[0] == sum(np.arange(N)[lot].size for lot in lots)
    empty = dask_steps.fetch(design, client, [np.array([], dtype=np.int64)], yd, None)
    assert empty[0].X.shape == (0, D) and empty[1].shape == (0,) and len(empty[3][0]) == 0
    local = dask_steps.fetch(design, None, lots, yd, wd)  # by a Dask graph: the same lots
    for lot, pos in zip(lots, local[3], strict=True):
        np.testing.assert_array_equal(local[0].X[pos], X[lot])


def test_take_rows_allocates_only_the_lots_rows():
    """A worker's share of a chunk is the lot's rows: a few rows of a large partition
    allocate a few rows' worth, not a copy of the partition's per-row columns."""
    import tracemalloc

    big = 1_000_000
    xb, auxb = np.zeros((big, 2), dtype=np.float32), np.ones((big, 4))
    yb, rows = np.arange(big, dtype=np.float64), [np.array([big - 1, 3])]
    tracemalloc.start()
    try:
        x, aux, yl, wl = dask_tasks.take_rows([xb], [auxb], [yb], None, rows, cols=(1, 3))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100_000, peak  # the aux columns of the partition: 16 MB
    np.testing.assert_array_equal(aux, auxb[[big - 1, 3]][:, [1, 3]])
    np.testing.assert_array_equal(yl, [big - 1, 3])
    assert x.shape == (2, 2) and wl is None


# ------------------------------------------------------------------ large lots: the workers
def test_the_cost_rule_reads_public_numbers_only():
    """Small lots are fetched, large lots summed on the workers; more workers move the
    switch to smaller lots; the rule takes (lot, d, workers) and nothing else."""
    assert not dask_steps.worker_sums(160, 50, 2)
    assert dask_steps.worker_sums(10**6, 50, 2)
    cut = {w: next(b for b in (2**k for k in range(30)) if dask_steps.worker_sums(b, 50, w))
           for w in (1, 2, 8)}  # fmt: skip
    assert cut[1] >= cut[2] >= cut[8]


def test_large_lots_are_summed_on_the_workers_exactly(client, data, monkeypatch):
    """When the rule chooses the workers, a step is one task per worker; the
    partitions' sums are added on a public grid, so the model is the numpy model to
    rounding (each partition's sum rounded to 2^-L, L from the lot's size and C) and
    does not depend on how the partitions are grouped on workers."""
    X, y = data
    Xd, yd = _persist(X, y)
    monkeypatch.setattr(dask_steps, "TASK_ROUND_TRIP", 0.0)  # every lot is "large"
    submitted = _submitted(monkeypatch)
    r1 = dp_sgd.fit(Logistic(), Xd, yd, random_state=3, **KW)
    assert submitted.count("_partial_group") >= KW["steps"] and "take_rows" not in submitted
    r0 = dp_sgd.fit(Logistic(), X, y, random_state=3, **KW)
    np.testing.assert_allclose(r1.theta, r0.theta, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("softmax", [False, True])
def test_adaptive_clipping_on_the_workers(client, data, monkeypatch, softmax):
    """Adaptive clipping where the cost rule leaves the lots on the workers: each step
    is one task per worker with Cₜ passed to it, returning its partitions' sum (on the
    public grid) and count of unclipped rows (an integer).  The counts are the numpy
    fit's exactly, so the norms Cₜ are the numpy fit's step by step; the sums are
    numpy's to rounding (the grid), hence so is θ."""
    from dperm.losses import Softmax

    X, y = data
    if softmax:
        y = (y > 0).astype(np.int64) + (X[:, 0] > 0.2)
    Xd, yd = _persist(X, y)
    monkeypatch.setattr(dask_steps, "TASK_ROUND_TRIP", 0.0)  # every lot is "large"
    submitted = _submitted(monkeypatch)
    loss = Softmax(3) if softmax else Logistic()
    kw = dict(KW, **ADAPTIVE)
    r1 = dp_sgd.fit(loss, Xd, yd, random_state=3, **kw)
    assert submitted.count("_partial_group") >= KW["steps"] and "take_rows" not in submitted
    r0 = dp_sgd.fit(loss, X, y, random_state=3, **kw)
    assert r1.diagnostics["clipping"] == r0.diagnostics["clipping"] == "adaptive"
    norms = r1.diagnostics["clipping_norms"]
    assert np.unique(norms).size > KW["steps"] // 2  # Cₜ moved at (nearly) every step
    np.testing.assert_array_equal(norms, r0.diagnostics["clipping_norms"])
    np.testing.assert_allclose(r1.theta, r0.theta, rtol=1e-11, atol=1e-12)


def test_sums_and_counts_on_the_workers_are_the_numpy_batchs(data):
    """A lot's partitions each return their clipped sum on the grid and their count of
    unclipped rows; added in any grouping they give the same integers — the count
    exactly numpy's (the batch function on the whole lot), the sum numpy's to rounding.
    A full batch (rows=None) through the design's own method: the same."""
    from dperm.backends._products import clipped_sum_count

    X, y = data
    D0 = as_design(X, 1.2, intercept_scaling=0.5, warn=False)
    D1 = as_design(da.from_array(X, chunks=(CHUNK, D)), 1.2, intercept_scaling=0.5, warn=False)
    aux = D1.aux.compute()
    rows = np.sort(np.random.default_rng(5).choice(N, 900, replace=False))
    theta, loss = np.random.default_rng(6).normal(size=D + 1), Logistic()
    part = [slice(p * CHUNK, (p + 1) * CHUNK) for p in range(N // CHUNK)]
    for C in (0.05, 0.3, 2.0):
        L = dask_tasks.grid_exponent(rows.size, C)
        args = dict(size=D + 2, loss=loss, theta=theta, C=C, grid=L)
        parts = [
            dask_tasks._partial(
                "clipcount", p, X[part[p]], aux[part[p]], y[part[p]], None, D1._spec, args, r
            )
            for p, r in D1._blocks_for(rows)
        ]
        total = dask_tasks._sum(*parts)
        half = len(parts) // 2
        regrouped = dask_tasks._sum(dask_tasks._sum(*parts[half:]), dask_tasks._sum(*parts[:half]))
        np.testing.assert_array_equal(total, regrouped)
        batch = D0.take(rows)
        g, centred = clipped_sum_count(loss, batch, batch.row_norms(), y[rows], None, theta, C)
        assert total[-1] - 0.5 * rows.size == centred
        np.testing.assert_allclose(dask_tasks.from_grid(total[:-1], L), g, rtol=1e-12, atol=1e-13)
        g1, c1 = D1.clipped_sum_count(loss, theta, y, C)
        g0, c0 = clipped_sum_count(loss, D0, D0.row_norms(), y, None, theta, C)
        assert c1 == c0 and (0 < c0 + 0.5 * N < N) == (C < 1.0)  # C = 2: nothing clipped
        np.testing.assert_allclose(g1, g0, rtol=1e-12, atol=1e-13)


def test_worker_sums_do_not_depend_on_the_placement(data):
    """The partitions' sums of a batch on the grid 2^-L are the same integers however
    the partitions are grouped and added (the placement of a recomputed partition
    changes nothing), the numpy sum to rounding; a term beyond the grid raises."""
    X, y = data
    D0 = as_design(X, 1.2, intercept_scaling=0.5, warn=False)
    D1 = as_design(da.from_array(X, chunks=(CHUNK, D)), 1.2, intercept_scaling=0.5, warn=False)
    aux = D1.aux.compute()
    rows = np.sort(np.random.default_rng(5).choice(N, 900, replace=False))
    theta, C, loss = np.random.default_rng(6).normal(size=D + 1), 0.3, Logistic()
    L = dask_tasks.grid_exponent(rows.size, C)
    args = dict(size=D + 1, loss=loss, theta=theta, C=C, grid=L)
    blocks = D1._blocks_for(rows)
    part = [slice(p * CHUNK, (p + 1) * CHUNK) for p in range(N // CHUNK)]
    parts = {
        p: dask_tasks._partial(
            "clip", p, X[part[p]], aux[part[p]], y[part[p]], None, D1._spec, args, r
        )
        for p, r in blocks
    }
    sums = []
    for order in itertools.permutations(parts, len(parts)):
        if len(sums) > 6:
            break
        groups = [list(order[: len(order) // 2]), list(order[len(order) // 2 :])]
        sums.append(dask_tasks._sum(*[dask_tasks._sum(*[parts[p] for p in g]) for g in groups]))
    for s in sums[1:]:
        np.testing.assert_array_equal(s, sums[0])
    want = D0.glm_clipped_sum(loss, theta, y, C, rows=rows)
    np.testing.assert_allclose(dask_tasks.from_grid(sums[0], L), want, rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="exceeds"):  # a grid too fine for sums of norm ≤ m·C
        dask_tasks.to_grid(want * 1e6, L)


def test_private_feature_scaling_is_refused_clearly_and_charges_nothing(client, data):
    """Private feature scaling reads blocks of every row on the machine that fits; a
    Dask design's rows stay on the workers, so it is refused with the parameter named
    and the fix — before anything is released, so no budget is spent — while the
    default (public features, adaptive clipping) runs."""
    from dperm import Ledger
    from dperm.exceptions import InvalidPrivacyParameter

    X, y = data
    Xd, yd = _persist(X, y)
    ledger = Ledger(epsilon=10.0, delta=1e-5)
    kw = dict(classes=[-1, 1], epsilon=1.0, data_norm=1.2, random_state=0)
    with ledger.active():
        with pytest.raises(InvalidPrivacyParameter, match="feature_scaling='public'"):
            DPLogisticRegression(feature_scaling="private", **kw).fit(Xd, yd)
        assert not ledger.entries
        m = DPLogisticRegression(**kw).fit(Xd, yd)
    assert m.diagnostics_["clipping"] == "adaptive" and len(ledger.entries) == 1
