"""Scale benchmark of the Dask backend (issue #12 §2): private fits on a local
Dask cluster, data generated on the workers, client memory measured.

For each number of workers (default 1 and 2, one thread each, processes) and each
n (default 10⁶, 3·10⁶, 10⁷ rows, d = 100, float32):

* X ~ N(0, 0.1²) and y = sign(Xw + noise) are generated ON THE WORKERS
  (``dask.array.random``) and persisted there — the client never holds a row;
* ``DPLogisticRegression(mechanism=…)`` is fitted on the Dask arrays for DP-SGD
  (default batch size √n, ``epochs`` one pass unless ``--sgd-epochs``), DP-GD
  (``--gd-steps`` full-batch steps) and objective perturbation (defaults), and
  dask-ml's non-private ``LogisticRegression`` (solver lbfgs) on the same arrays;
* the fit time (wall clock) and the client's peak memory: the resident set size
  (``psutil``, RSS) of this process sampled every 5 ms in a thread during the fit,
  minus the RSS just before the fit ("client +MB").  RSS, not tracemalloc: it
  also counts memory that numpy and the distributed comms allocate outside
  Python's allocator.  The scheduler and the workers are separate processes
  (``dask scheduler`` / ``dask worker``, as on a real cluster), so the RSS is the
  client's alone (a ``LocalCluster`` would run the scheduler inside this process).

One more mode measures DP-SGD's per-step cost (issue #39; the speed ratios:
``bench_dask_steps.py``):

* ``--latency``: the per-step cost model of docs/cluster.md and the constants of the
  public cost rule ``dperm.backends.dask_steps.worker_sums``.  For 1 and 2 workers and
  expected batch sizes ``--batches``, ``dp_sgd.fit`` runs ``--steps`` Poisson steps on
  a Dask X of ``--n`` × ``--ratio-d`` float32 rows persisted on the workers, with the
  lots' rows fetched to the client ("fetch") and with the sums computed on the workers
  ("workers"), and on the numpy array; the time per step is the time between the
  first and the last step (a callback), so set-up and calibration are excluded.

Run (takes ~30–60 min; use nice on a shared machine)::

    nice -n 10 python benchmarks/bench_scale.py                       # full table
    python benchmarks/bench_scale.py --n 200000 --workers 2 --chunk 50000  # smoke run
    python benchmarks/bench_scale.py --latency --n 2e6 --batches 160 1000 10000 100000

Results are printed as a table and appended as JSON lines to ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import threading
import time
import warnings

import numpy as np

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


class PeakRSS:
    """Peak resident set size of this process above its value at entry (bytes),
    sampled every ``interval`` seconds in a background thread."""

    def __init__(self, interval: float = 0.005):
        import psutil

        self._proc = psutil.Process()
        self.interval = interval

    def __enter__(self):
        self.base = self._proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)
        self.added = self.peak - self.base
        return False


class Cluster:
    """A scheduler and ``workers`` worker processes (one thread each) started as
    separate processes with the ``dask`` command line; ``client`` connects to it."""

    def __init__(self, workers: int, memory_gib: float, folder: str):
        import subprocess
        import sys

        from distributed import Client

        dask_cli = os.path.join(os.path.dirname(sys.executable), "dask")
        sched_file = os.path.join(folder, f"scheduler-{os.getpid()}-{workers}.json")
        if os.path.exists(sched_file):
            os.remove(sched_file)
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
        self.procs = [
            subprocess.Popen(
                [dask_cli, "scheduler", "--scheduler-file", sched_file, "--port", "0",
                 "--dashboard-address", ":0"],
                **quiet,
            )
        ]  # fmt: skip
        for _ in range(100):
            if os.path.exists(sched_file):
                break
            time.sleep(0.1)
        self.procs.append(
            subprocess.Popen(
                [dask_cli, "worker", "--scheduler-file", sched_file, "--nworkers", str(workers),
                 "--nthreads", "1", "--memory-limit", f"{memory_gib / workers:.2f}GiB",
                 "--no-dashboard"],
                **quiet,
            )
        )  # fmt: skip
        self.client = Client(scheduler_file=sched_file)
        self.client.wait_for_workers(workers, timeout=120)
        self.sched_file = sched_file

    def close(self):
        self.client.close()
        for p in reversed(self.procs):
            p.terminate()
            p.wait(timeout=60)
        if os.path.exists(self.sched_file):
            os.remove(self.sched_file)


def make_data(n: int, d: int, chunk: int, seed: int = 0):
    """X (n, d) float32 and y ∈ {−1, +1} generated and persisted on the workers."""
    import dask.array as da
    from distributed import wait

    rs = da.random.default_rng(seed)
    X = (rs.standard_normal((n, d), chunks=(chunk, d), dtype=np.float32) * np.float32(0.1)).astype(
        np.float32
    )
    w = np.linspace(1.0, -1.0, d).astype(np.float32) * np.float32(3.0)
    noise = da.random.default_rng(seed + 1).standard_normal(n, chunks=chunk) * 0.5
    y = da.where(X @ w + noise > 0, 1.0, -1.0)
    X, y = X.persist(), y.persist()
    wait([X, y])
    return X, y


def fit_one(name: str, X, y, n: int, args) -> dict:
    from dperm import DPLogisticRegression

    if name == "dask-ml":
        from dask_ml.linear_model import LogisticRegression

        model = LogisticRegression(solver="lbfgs", max_iter=args.dask_ml_iter)
        target = y > 0
    else:
        kw = dict(epsilon=1.0, delta=1e-8, data_norm=1.5, classes=[-1, 1], random_state=0)
        if name == "dp-sgd":
            kw["epochs"] = args.sgd_epochs
        elif name == "dp-gd":
            kw["epochs"] = args.gd_steps
        model = DPLogisticRegression(mechanism=name, **kw)
        target = y
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            model.fit(X, target)
            seconds = time.perf_counter() - t0
    diag = getattr(model, "diagnostics_", {}) or {}
    steps = int(diag.get("steps", diag.get("solver_iterations", 0)) or 0)
    coef = np.ravel(model.coef_)
    return {
        "mechanism": name,
        "n": n,
        "seconds": seconds,
        "client_mb": mem.added / 2**20,
        "client_rss_mb": mem.peak / 2**20,
        "steps": steps,
        "ms_per_step": 1e3 * seconds / steps if steps else None,
        "coef_norm": float(np.linalg.norm(coef)),
    }


# ===================================================================== DP-SGD per step
def local_cluster(workers: int, memory_gib: float, direct_to_workers=None):
    """A ``LocalCluster`` of ``workers`` processes with one thread each, and its client."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        memory_limit=f"{memory_gib / workers:.2f}GiB",
        env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )
    return cluster, Client(cluster, direct_to_workers=direct_to_workers)


def client_data(n: int, d: int, seed: int = 0):
    """X (n, d) float32 ~ N(0, 0.1²) and y = sign(Xw + noise), on the client."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    X *= np.float32(0.1)
    w = (np.linspace(1.0, -1.0, d) * 3.0).astype(np.float32)
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def scatter(X, y, chunk: int):
    """The same rows as Dask arrays persisted on the cluster's workers."""
    import dask.array as da
    from distributed import wait

    Xd = da.from_array(X, chunks=(chunk, X.shape[1])).persist()
    yd = da.from_array(y, chunks=chunk).persist()
    wait([Xd, yd])
    return Xd, yd


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _step_times(fit, A, b, batch: int, steps: int) -> np.ndarray:
    """Durations of steps 2..T of a DP-SGD run (set-up and calibration excluded)."""
    from dperm.losses import Logistic

    stamps = []
    fit(
        Logistic(), A, b, noise_multiplier=1.0, neighbouring="replace-one", data_norm=1.5,
        batch_size=batch, steps=steps, learning_rate=1.0, random_state=0,
        callback=lambda t, T, theta: stamps.append(time.perf_counter()),
    )  # fmt: skip
    return np.diff(stamps)


def latency(args) -> list[dict]:
    """Per-step time against the lot and the number of workers (rows fetched to the
    client, sums on the workers, numpy), for the cost model of docs/cluster.md."""
    from dperm.algorithms import dp_sgd
    from dperm.backends import dask_steps

    n, d = int(args.n[0]), args.ratio_d
    X, y = client_data(n, d)
    rows = []
    rule = dask_steps.worker_sums
    print(f"n={n} d={d} float32; per-step ms: mean (median, p90); load {_load()}")
    for workers in args.workers:
        cluster, client = local_cluster(workers, args.memory_gib)
        try:
            Xd, yd = scatter(X, y, args.chunk)
            for batch in args.batches:
                paths = [("numpy", X, y, None), ("fetch", Xd, yd, False), ("workers", Xd, yd, True)]
                for name, A, b, on_workers in paths:
                    if name == "numpy" and workers != args.workers[0]:
                        continue
                    dask_steps.worker_sums = (lambda *a, v=on_workers: v) if A is Xd else rule
                    steps = args.steps if name != "workers" else min(args.steps, 100)
                    dt = 1e3 * _step_times(dp_sgd.fit, A, b, int(batch), steps)
                    row = {
                        "mode": "latency", "path": name, "workers": workers, "n": n, "d": d,
                        "batch": int(batch), "steps": steps, "ms_mean": float(dt.mean()),
                        "ms_median": float(np.median(dt)), "ms_p90": float(np.quantile(dt, 0.9)),
                        "load": _load(),
                    }  # fmt: skip
                    rows.append(row)
                    print(
                        f"W={workers} b={int(batch):>6} {name:>8}: {row['ms_mean']:8.3f} "
                        f"({row['ms_median']:.3f}, {row['ms_p90']:.3f}) load {row['load']}",
                        flush=True,
                    )
        finally:
            dask_steps.worker_sums = rule
            client.close()
            cluster.close()
    for workers in args.workers:
        for name in ("fetch", "numpy", "workers"):
            pts = [(r["batch"], r["ms_mean"]) for r in rows
                   if r["path"] == name and r["workers"] == workers]  # fmt: skip
            if len(pts) >= 2:
                b, t = np.array(pts, dtype=float).T
                slope, icpt = np.polyfit(b, t, 1)
                print(
                    f"model W={workers} {name}: {icpt:.3f} ms + {1e3 * slope:.3f} µs × lot "
                    f"({1e6 * slope / d:.2f} ns a number)"
                )
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, nargs="+", default=[1e6, 3e6, 1e7])
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--chunk", type=int, default=250_000, help="rows per partition")
    p.add_argument("--mechanisms", nargs="+", default=["dp-sgd", "dp-gd", "objective", "dask-ml"])
    p.add_argument(
        "--skip-at-max",
        nargs="*",
        default=["dask-ml"],
        help="mechanisms not run at the largest n (time; see REPORT.md)",
    )
    p.add_argument("--sgd-epochs", type=float, default=1.0)
    p.add_argument("--gd-steps", type=int, default=20)
    p.add_argument("--dask-ml-iter", type=int, default=100)
    p.add_argument("--memory-gib", type=float, default=12.0, help="total over the workers")
    p.add_argument("--out", default="scale.jsonl", help="JSON lines appended here")
    p.add_argument("--ratio-d", type=int, default=50, help="--latency: columns")
    p.add_argument("--latency", action="store_true", help="per-step cost model only")
    p.add_argument("--batches", type=float, nargs="+", default=[160, 1000, 10000, 100000])
    p.add_argument("--steps", type=int, default=400)
    args = p.parse_args(argv)
    if args.latency:
        rows = latency(args)
        with open(args.out, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        return
    ns = [int(v) for v in args.n]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    header = f"{'workers':>7} {'n':>10} {'mechanism':>10} {'fit s':>8} {'steps':>6} "
    header += f"{'ms/step':>8} {'client +MB':>10} {'client RSS MB':>13}"
    print(header, flush=True)
    for workers in args.workers:
        cluster = Cluster(workers, args.memory_gib, os.path.dirname(os.path.abspath(args.out)))
        client = cluster.client
        try:
            for n in ns:
                X, y = make_data(n, args.d, min(args.chunk, n))
                for name in args.mechanisms:
                    if n == max(ns) and len(ns) > 1 and name in args.skip_at_max:
                        continue
                    row = fit_one(name, X, y, n, args)
                    row.update(workers=workers, d=args.d, chunk=args.chunk)
                    with open(args.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    mps = f"{row['ms_per_step']:.1f}" if row["ms_per_step"] else "-"
                    print(
                        f"{workers:>7} {n:>10} {name:>10} {row['seconds']:>8.1f} "
                        f"{row['steps']:>6} {mps:>8} {row['client_mb']:>10.1f} "
                        f"{row['client_rss_mb']:>13.0f}",
                        flush=True,
                    )
                client.cancel([X, y])
                del X, y
                gc.collect()
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
