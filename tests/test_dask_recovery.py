"""A Dask worker killed (SIGKILL) in the middle of a DP-SGD fit (issues #31 §4, #39).

Real processes: a 2-worker ``LocalCluster`` of its own (nannies restart a killed
worker), X persisted on it, one worker process killed with SIGKILL between two steps
of the default DP-SGD fit (adaptive clipping, issue #36), the lots' rows fetched or the
sums computed on the workers.  The properties: the fit finishes — the chunks of lots'
rows still to come are fetched, or the steps' tasks run, after Dask has recomputed the
lost partitions from their graph (Dask's own recovery; nothing of dperm's) — with the
model and the clipping norms of the undisturbed fit bit for bit, the privacy spend
recorded once, and a recovery that costs about the lost partitions' recomputation, not
minutes of timeouts.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from conftest import dask_local_cluster  # noqa: E402
from dperm import DPLogisticRegression, Ledger  # noqa: E402
from dperm.backends import dask_steps  # noqa: E402
from dperm.backends.dask import DaskDesign  # noqa: E402

N, D, CHUNK = 40_000, 10, 5_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning"),
]


@pytest.fixture(scope="module")
def client():
    yield from dask_local_cluster(2)


@pytest.mark.parametrize("path", ["fetched", "workers"])
def test_a_worker_killed_mid_fit_costs_seconds_and_changes_nothing(client, monkeypatch, path):
    """``path``: the lots' rows fetched to the client, or (every lot "large" for the cost
    rule) each step's sum and count computed by the workers with Cₜ passed to them."""
    if path == "workers":
        monkeypatch.setattr(dask_steps, "TASK_ROUND_TRIP", 0.0)
    rng = np.random.default_rng(3)
    X = (rng.normal(size=(N, D)) / 4).astype(np.float32)
    y = np.where(X @ np.linspace(1, -1, D) + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    Xd = da.from_array(X, chunks=(CHUNK, D)).persist()
    yd = da.from_array(y, chunks=CHUNK).persist()
    distributed.wait([Xd, yd])
    kw = dict(
        mechanism="dp-sgd", epsilon=1.0, delta=1e-6, data_norm=1.0, classes=[-1, 1],
        epochs=2 if path == "fetched" else 1, random_state=11,
    )  # fmt: skip
    t0 = time.perf_counter()
    base = DPLogisticRegression(**kw).fit(Xd, yd)
    t_base = time.perf_counter() - t0
    steps = base.diagnostics_["steps"]
    assert steps > 100
    assert base.diagnostics_["clipping"] == "adaptive"  # the default: Cₜ from the counts

    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    real_step = DaskDesign.clipped_sum_count
    calls = []

    def step(self, *args, **kwargs):  # SIGKILL one worker process before the 40th step
        calls.append(1)
        if len(calls) == 40:
            os.kill(pids[victim], signal.SIGKILL)
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(DaskDesign, "clipped_sum_count", step)
    ledger = Ledger(epsilon=10.0, delta=1e-5)
    t0 = time.perf_counter()
    with ledger.active():
        hit = DPLogisticRegression(**kw).fit(Xd, yd)
    t_hit = time.perf_counter() - t0

    assert len(calls) == steps  # the worker died mid-fit, between steps
    deadline = time.monotonic() + 30
    while victim in client.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert victim not in client.scheduler_info()["workers"]
    np.testing.assert_array_equal(hit.coef_, base.coef_)
    np.testing.assert_array_equal(hit.intercept_, base.intercept_)
    clip = [m.diagnostics_["clipping_norms"] for m in (hit, base)]
    np.testing.assert_array_equal(*clip)  # the same norms Cₜ, step by step
    assert len(ledger.entries) == 1  # ε charged once
    # seconds, not minutes; a loose bound: the machine running the tests may be loaded
    assert t_hit < t_base + 60.0
