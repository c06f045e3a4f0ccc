"""A Dask worker killed (SIGKILL) in the middle of a DP-SGD fit (issue #31 §4).

Real processes: a 2-worker ``LocalCluster`` of its own (nannies restart a killed
worker), X persisted on it, one worker process killed with SIGKILL between two steps
of the fit.  The properties: the fit finishes through a new step session on the
restored placement (no fallback to one task per step, which warns), the model is
bit-identical to the undisturbed fit's, the privacy spend is recorded once, and the
recovery took about the lost partitions' recomputation, not minutes of timeouts.
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
from dperm.backends.dask_session import live_workers  # noqa: E402

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
    stepper = {}
    real_step = dask_steps.Stepper._step
    calls = []

    def step(self, *args):  # SIGKILL one worker process before the 40th step
        calls.append(1)
        stepper["it"] = self
        if len(calls) == 40:
            os.kill(pids[victim], signal.SIGKILL)
        return real_step(self, *args)

    monkeypatch.setattr(dask_steps.Stepper, "_step", step)
    ledger = Ledger(epsilon=10.0, delta=1e-5)
    t0 = time.perf_counter()
    with ledger.active():
        hit = DPLogisticRegression(**kw).fit(Xd, yd)  # a fallback would warn: an error here
    t_hit = time.perf_counter() - t0

    assert stepper["it"].recoveries == 1  # the session was restored once, then used
    assert victim not in live_workers(client)
    np.testing.assert_array_equal(hit.coef_, base.coef_)
    np.testing.assert_array_equal(hit.intercept_, base.intercept_)
    assert len(ledger.entries) == 1  # ε charged once
    # seconds, not minutes (before: every step after the loss ran as a task graph);
    # a loose bound: the machine running the tests may be loaded
    assert t_hit < t_base + 60.0
