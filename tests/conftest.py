"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

# The solvers make many tiny BLAS calls; on a busy 2-core machine OpenBLAS
# threads make them many times slower (and xdist already uses both cores).
threadpool_limits(1)

# The persistent calibration cache (dperm.algorithms._calibration_store) is off in the
# tests (every calibration runs, nothing is written to the home directory);
# tests/test_calibration_store.py turns it on in a temporary directory.
os.environ.setdefault("DPERM_CACHE_DIR", "")

_DEFAULT_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data_dir() -> Path | None:
    """The folder with the real benchmark data, or None when it is absent.

    ``DPERM_DATA_HOME`` overrides the default ``../shared/data``.
    """
    p = Path(os.environ.get("DPERM_DATA_HOME", _DEFAULT_SHARED))
    return p if p.is_dir() else None


@pytest.fixture
def shared_data() -> Path:
    """Path of ``../shared/data``; skips the test cleanly when it is absent."""
    p = shared_data_dir()
    if p is None:
        pytest.skip("real benchmark data (../shared/data) not available")
    return p


@pytest.fixture(scope="session")
def unit_ball_data():
    """Factory of a linearly separable-ish ±1 problem with rows inside the unit ball.

    ``unit_ball_data(seed, n, w, noise, scale=1.0)`` draws X ~ N(0, scale²)ⁿˣᵈ
    (d = len(w)), shrinks every row to ‖x‖ ≤ 0.99, and returns
    ``(X, y)`` with y = sign(Xw + noise·N(0, 1)) in {−1, +1}.
    """
    import numpy as np

    def make(seed: int, n: int, w, noise: float, scale: float = 1.0):
        rng = np.random.default_rng(seed)
        w = np.asarray(w, dtype=float)
        X = rng.normal(size=(n, w.size)) * scale
        X *= 0.99 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)  # ‖x‖ < 1
        y = np.where(X @ w + noise * rng.normal(size=n) > 0, 1.0, -1.0)
        return X, y

    return make


@pytest.fixture
def rng():
    """A seeded Generator for reproducible test data."""
    import numpy as np

    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def neighbour_shift():
    """``neighbour_shift(loss, X, y, *, l2, regularizer=None, tol, every)``: the largest
    ‖θ̂(D′) − θ̂(D)‖₂ of the exact minimizer of the mean loss + (l2/2)‖θ‖² + r(θ) over the
    replace-one neighbours D′ that put the adversarial record (−xᵢ/‖xᵢ‖, −yᵢ) in place of
    row i, for every ``every``-th row: what output perturbation's 2L/(nΛ) must bound."""
    import numpy as np

    from dperm.solvers import minimize

    def shift(loss, X, y, *, l2, regularizer=None, tol, every):
        base = minimize(loss, X, y, l2=l2, regularizer=regularizer, tol=tol).theta
        worst = 0.0
        for i in range(0, X.shape[0], every):
            Xp, yp = X.copy(), y.copy()
            Xp[i] = -X[i] / np.linalg.norm(X[i])
            yp[i] = -y[i]
            other = minimize(loss, Xp, yp, l2=l2, regularizer=regularizer, tol=tol).theta
            worst = max(worst, float(np.linalg.norm(other - base)))
        return worst

    return shift


@pytest.fixture(scope="session")
def exponential_mechanism_pvalue():
    """``exponential_mechanism_pvalue(draw, logits, runs, seed)``: the chi-square p-value
    of the counts of ``runs`` indices drawn by ``draw(gen)`` (one generator seeded
    ``seed`` for all the draws) against the law P(j) ∝ exp(logits_j)."""
    import numpy as np
    from scipy import stats

    def pvalue(draw, logits, runs: int, seed: int) -> float:
        logits = np.asarray(logits, dtype=float)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        gen = np.random.default_rng(seed)
        counts = np.zeros(p.size)
        for _ in range(runs):
            counts[draw(gen)] += 1
        return float(stats.chisquare(counts, runs * p).pvalue)

    return pvalue


@pytest.fixture(scope="session")
def postgres_url():
    """The URL of a PostgreSQL server for the ledger-store tests.

    ``DPERM_TEST_POSTGRES_URL`` (set by ``.ci/run``, which starts a throwaway server), or
    a server started here for the session by ``tools/test_postgres.sh``.  Where none
    can be started (no server binaries, no psycopg) the test is skipped with the reason
    — except when ``DPERM_REQUIRE_POSTGRES=1`` (CI), where that is a failure.
    """
    import shutil
    import subprocess
    import tempfile

    def unavailable(reason: str):
        if os.environ.get("DPERM_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"DPERM_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)

    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'dperm[postgres]')")
    url = os.environ.get("DPERM_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    script = Path(__file__).resolve().parents[1] / "tools" / "test_postgres.sh"
    where = tempfile.mkdtemp(prefix="dperm-pg-")
    res = subprocess.run(["bash", str(script), "start", where], capture_output=True, text=True)
    if res.returncode != 0:
        shutil.rmtree(where, ignore_errors=True)
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        unavailable(f"no PostgreSQL server could be started here: {last}")
    try:
        yield res.stdout.strip()
    finally:
        subprocess.run(["bash", str(script), "stop", where], capture_output=True)
        shutil.rmtree(where, ignore_errors=True)


def dask_local_cluster(n_workers: int = 2):
    """A distributed ``LocalCluster`` of ``n_workers`` processes (one thread each, under
    nannies) and its Client, for a module-scoped fixture: ``yield from`` this."""
    import warnings

    import distributed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            memory_limit="1GiB",
            env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        )
        client = distributed.Client(cluster)
    yield client
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client.close()
        cluster.close()


def run_cli_child(argv, out_path, barrier=None):
    """In a forked child: run ``dperm <argv>`` with stdout/stderr in ``out_path`` and
    ``out_path.err`` (after ``barrier``, when given) and exit with its status — what a
    separate ``dperm`` invocation does, started in milliseconds (tests/test_ledger_*.py)."""
    import sys

    with open(out_path, "w") as out, open(str(out_path) + ".err", "w") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout, sys.stderr = out, err
        if barrier is not None:
            barrier.wait(timeout=60)
        from dperm.cli import main

        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out.flush()
        err.flush()
    os._exit(code)
