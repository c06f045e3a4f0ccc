"""A Dask worker killed (SIGKILL) in the middle of a DP-SGD fit (issues #31 §4, #39).

Real processes: a 2-worker ``LocalCluster`` of its own (nannies restart a killed
worker), X persisted on it, one worker process killed with SIGKILL between two steps
of the fit.  The properties: the fit finishes — the chunks of lots' rows still to
come are fetched after Dask has recomputed the lost partitions from their graph
(Dask's own recovery; nothing of dperm's) — with the model of the undisturbed fit
bit for bit, the privacy spend recorded once, and a recovery that costs about the
lost partitions' recomputation, not minutes of timeouts.
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

N, D, CHUNK = 40_000, 10, 5_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning"),
]


@pytest.fixture(scope="module")
def client():
    yield from dask_local_cluster(2)


def test_a_worker_killed_mid_fit_costs_seconds_and_changes_nothing(client, monkeypatch):
    rng = np.random.default_rng(3)
    X = (rng.normal(size=(N, D)) / 4).astype(np.float32)
    y = np.where(X @ np.linspace(1, -1, D) + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    Xd = da.from_array(X, chunks=(CHUNK, D)).persist()
    yd = da.from_array(y, chunks=CHUNK).persist()
    distributed.wait([Xd, yd])
    kw = dict(
        mechanism="dp-sgd", epsilon=1.0, delta=1e-6, data_norm=1.0, classes=[-1, 1],
        epochs=2, random_state=11,
    )  # fmt: skip
    t0 = time.perf_counter()
    base = DPLogisticRegression(**kw).fit(Xd, yd)
    t_base = time.perf_counter() - t0
    steps = base.diagnostics_["steps"]
    assert steps > 100

    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    real_clipped = dask_steps.Stepper.clipped
    calls, fetched = [], []

    def clipped(self, *args):  # SIGKILL one worker process before the 40th step
        calls.append(1)
        if len(calls) == 40:
            fetched.append(self.fetched)
            os.kill(pids[victim], signal.SIGKILL)
        return real_clipped(self, *args)

    monkeypatch.setattr(dask_steps.Stepper, "clipped", clipped)
    ledger = Ledger(epsilon=10.0, delta=1e-5)
    t0 = time.perf_counter()
    with ledger.active():
        hit = DPLogisticRegression(**kw).fit(Xd, yd)
    t_hit = time.perf_counter() - t0

    assert len(calls) == steps and fetched  # the worker died mid-fit, between steps
    deadline = time.monotonic() + 30
    while victim in client.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert victim not in client.scheduler_info()["workers"]
    np.testing.assert_array_equal(hit.coef_, base.coef_)
    np.testing.assert_array_equal(hit.intercept_, base.intercept_)
    assert len(ledger.entries) == 1  # ε charged once
    # seconds, not minutes; a loose bound: the machine running the tests may be loaded
    assert t_hit < t_base + 60.0
