"""DP-SGD on a 2-worker Dask ``LocalCluster``: the three ratios of issue #39 in one run.

1. **Speed** (target ≤ 2): one epoch of ``DPLogisticRegression(mechanism="dp-sgd",
   epochs=1)`` at the default schedule (the auto rule's lot: 160 rows at ε = 1),
   replace-one, on a 2·10⁶ × 50 float32 Dask array persisted on the cluster (``--chunk``
   rows a partition) / the same fit on the numpy array, same ``random_state``.
2. **Small** (target ≤ 2): the same fit on 10⁶ × 20 float32 rows, Dask / numpy.
3. **Recovery** (target ≤ 2): the 10⁶ × 20 Dask fit with one worker process killed
   (SIGKILL) mid-fit — ``--kill-after`` seconds into it, by default half the time the
   same fit took undisturbed just before — / the same fit undisturbed; the two models
   must be bit-identical and an active :class:`dperm.Ledger` must record one spend.  The
   nanny restarts the killed worker; Dask recomputes its partitions.

Every part runs ``--reps`` repetitions, the sides alternating (numpy first on even
repetitions), after an untimed warm-up fit on each side (calibration cached, the
workers' imports done); the data are persisted afresh for every recovery repetition
(so each starts from a balanced placement).  Per repetition: the wall-clock times,
their ratio, the CPU seconds of the client process and of the workers (``psutil``;
under a full machine the wall ratio tends to the CPU ratio), whether the Dask model is
the numpy model bit for bit, and the load average.  Printed at the end: the medians.

The 2 cores of the benchmark machine are shared: measure at a quiet moment, and
compare only ratios measured in one run.

Run::

    python benchmarks/bench_dask_steps.py                  # all three, ~3-6 min
    python benchmarks/bench_dask_steps.py --json           # one JSON object: the ratios
    python benchmarks/bench_dask_steps.py --part speed --reps 5
    python benchmarks/bench_dask_steps.py --direct         # Client(direct_to_workers=True)

Rows are appended as JSON lines to ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import threading
import time
import warnings

import numpy as np
from bench_scale import _load, client_data, local_cluster

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

#: the fit of every part: DP-SGD at its defaults but for one epoch (issue #39's setting)
KW = dict(mechanism="dp-sgd", epsilon=1.0, delta=1e-8, data_norm=1.5, classes=[-1, 1], epochs=1)


class Meter:
    """Wall-clock and CPU seconds (this process; the workers) of one fit."""

    def __init__(self, procs):
        import psutil

        self.me, self.procs = psutil.Process(), procs

    def cpu(self):
        return [sum(p.cpu_times()[:2]) for p in (self.me, *self.procs)]

    def fit(self, X, y, seed, **extra):
        from dperm import DPLogisticRegression

        gc.collect()
        c0, t0 = self.cpu(), time.perf_counter()
        model = DPLogisticRegression(**{**KW, **extra}, random_state=seed).fit(X, y)
        t = time.perf_counter() - t0
        c = [b - a for a, b in zip(c0, self.cpu(), strict=True)]
        return model, {"s": t, "cpu_client": c[0], "cpu_workers": sum(c[1:])}


def _persist(client, X, y, chunk, tag=""):
    """X and y as Dask arrays persisted on the cluster (``tag``: fresh keys)."""
    import dask.array as da
    from distributed import wait

    Xd = da.from_array(X, chunks=(chunk, X.shape[1]), name=f"X{tag}-{id(X)}")
    yd = da.from_array(y, chunks=chunk, name=f"y{tag}-{id(y)}")
    Xd, yd = client.persist([Xd, yd])
    wait([Xd, yd])
    return Xd, yd


def _same(a, b) -> bool:
    return bool(np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_))


def ratio_part(name, client, meter, n, d, chunk, reps) -> list[dict]:
    """numpy vs the cluster, one epoch each, alternating."""
    X, y = client_data(n, d)
    Xd, yd = _persist(client, X, y, chunk)
    for A, b in ((X, y), (Xd, yd)):  # warm-up: calibration cached, workers' imports
        meter.fit(A, b, 0, epochs=160 / n)
    rows = []
    for rep in range(reps):
        sides = [("numpy", X, y), ("dask", Xd, yd)]
        got, models = {}, {}
        for side, A, b in sides if rep % 2 == 0 else sides[::-1]:
            models[side], got[side] = meter.fit(A, b, rep)
        row = {
            "part": name, "n": n, "d": d, "chunk": chunk, "rep": rep,
            "steps": models["dask"].diagnostics_["steps"],
            "batch": models["dask"].diagnostics_["batch_size"],
            "numpy_s": got["numpy"]["s"], "dask_s": got["dask"]["s"],
            "ratio": got["dask"]["s"] / got["numpy"]["s"],
            "numpy_cpu_s": got["numpy"]["cpu_client"] + got["numpy"]["cpu_workers"],
            "dask_cpu_client_s": got["dask"]["cpu_client"],
            "dask_cpu_workers_s": got["dask"]["cpu_workers"],
            "bit_identical": _same(models["dask"], models["numpy"]), "load": _load(),
        }  # fmt: skip
        row["cpu_ratio"] = (row["dask_cpu_client_s"] + row["dask_cpu_workers_s"]) / row[
            "numpy_cpu_s"
        ]
        rows.append(row)
        print(
            f"{name} rep {rep}: numpy {row['numpy_s']:.2f} s, dask {row['dask_s']:.2f} s, "
            f"ratio {row['ratio']:.2f} (CPU: numpy {row['numpy_cpu_s']:.2f} s, dask client "
            f"{row['dask_cpu_client_s']:.2f} + workers {row['dask_cpu_workers_s']:.2f} s, "
            f"ratio {row['cpu_ratio']:.2f}); {row['steps']} steps of ≈{row['batch']:.0f} rows; "
            f"bit-identical {row['bit_identical']}; load {row['load']}",
            flush=True,
        )
    client.cancel([Xd, yd])
    return rows


def recovery_part(client, meter, n, d, chunk, reps, kill_after) -> list[dict]:
    """The Dask fit undisturbed, then with one worker SIGKILLed mid-fit."""
    from dperm import Ledger

    X, y = client_data(n, d, seed=1)
    rows = []
    for rep in range(reps):
        Xd, yd = _persist(client, X, y, chunk, tag=f"r{rep}")
        meter.procs = _worker_procs(client)
        meter.fit(Xd, yd, 0, epochs=160 / n)  # warm-up (the restarted worker's imports)
        base, t_base = meter.fit(Xd, yd, 7)
        pids = client.run(os.getpid)
        victim = sorted(pids)[rep % len(pids)]
        killed = {}

        def kill(victim=victim, pids=pids, killed=killed, after=kill_after or t_base["s"] / 2):
            time.sleep(after)
            killed["at"] = time.perf_counter()
            os.kill(pids[victim], signal.SIGKILL)

        ledger = Ledger(epsilon=100.0, delta=1e-6)
        killer = threading.Thread(target=kill, daemon=True)
        meter.procs = [p for w, p in zip(sorted(pids), _procs(pids), strict=True) if w != victim]
        t0 = time.perf_counter()
        killer.start()
        with ledger.active():
            hit, t_hit = meter.fit(Xd, yd, 7)
        killer.join()
        row = {
            "part": "recovery", "n": n, "d": d, "chunk": chunk, "rep": rep,
            "steps": base.diagnostics_["steps"], "undisturbed_s": t_base["s"],
            "disturbed_s": t_hit["s"], "ratio": t_hit["s"] / t_base["s"],
            "killed_at_s": killed.get("at", t0) - t0, "bit_identical": _same(hit, base),
            "spends": len(ledger.entries), "load": _load(),
        }  # fmt: skip
        rows.append(row)
        print(
            f"recovery rep {rep}: undisturbed {row['undisturbed_s']:.2f} s, disturbed "
            f"{row['disturbed_s']:.2f} s (worker killed at {row['killed_at_s']:.2f} s), ratio "
            f"{row['ratio']:.2f}; bit-identical {row['bit_identical']}; spends "
            f"{row['spends']}; load {row['load']}",
            flush=True,
        )
        client.cancel([Xd, yd])
        _wait_workers(client, 2)
    return rows


def _procs(pids):
    import psutil

    return [psutil.Process(pids[w]) for w in sorted(pids)]


def _worker_procs(client):
    return _procs(client.run(os.getpid))


def _wait_workers(client, count, timeout=60.0):
    deadline = time.monotonic() + timeout
    while len(client.scheduler_info()["workers"]) < count and time.monotonic() < deadline:
        time.sleep(0.2)


def summary(rows) -> dict:
    """The issue's ratios: medians over the repetitions."""
    out = {"load": _load()}
    for part, key in (("speed", "speed_ratio"), ("small", "small_ratio")):
        got = [r for r in rows if r["part"] == part]
        if got:
            out[key] = float(np.median([r["ratio"] for r in got]))
            out[f"{part}_cpu_ratio"] = float(np.median([r["cpu_ratio"] for r in got]))
            out[f"{part}_bit_identical"] = all(r["bit_identical"] for r in got)
    got = [r for r in rows if r["part"] == "recovery"]
    if got:
        out["recovery_ratio"] = float(np.median([r["ratio"] for r in got]))
        out["recovery_bit_identical"] = all(r["bit_identical"] for r in got)
        out["recovery_spends"] = sorted({r["spends"] for r in got})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=["all", "speed", "small", "recovery"], default="all")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--n", type=float, default=2e6)
    p.add_argument("--d", type=int, default=50)
    p.add_argument("--chunk", type=int, default=250_000, help="rows per partition")
    p.add_argument("--small-n", type=float, default=1e6)
    p.add_argument("--small-d", type=int, default=20)
    p.add_argument("--small-chunk", type=int, default=125_000)
    p.add_argument(
        "--kill-after", type=float, default=None, help="seconds into the fit (default: mid-fit)"
    )
    p.add_argument("--direct", action="store_true", help="Client(direct_to_workers=True)")
    p.add_argument("--json", action="store_true", help="print one JSON object: the ratios")
    p.add_argument("--out", default="dask_steps.jsonl", help="JSON lines appended here")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    cluster, client = local_cluster(2, 6.0, direct_to_workers=True if args.direct else None)
    rows = []
    try:
        meter = Meter(_worker_procs(client))
        print(f"2 workers, one thread each; direct_to_workers={args.direct}; load {_load()}")
        if args.part in ("all", "speed"):
            rows += ratio_part("speed", client, meter, int(args.n), args.d, args.chunk, args.reps)
        small = (int(args.small_n), args.small_d, args.small_chunk, args.reps)
        if args.part in ("all", "small"):
            rows += ratio_part("small", client, meter, *small)
        if args.part in ("all", "recovery"):
            rows += recovery_part(client, meter, *small, args.kill_after)
    finally:
        client.close()
        cluster.close()
    with open(args.out, "a") as f:
        f.writelines(json.dumps(dict(r, direct=args.direct)) + "\n" for r in rows)
    result = summary(rows)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
