"""DP-SGD on a 2-worker Dask ``LocalCluster``: the two ratios of issue #31 in one run.

1. **Speed** (issue #31 §2, target ≤ 3): one epoch of
   ``DPLogisticRegression(mechanism="dp-sgd", epochs=1)`` (default batch √n, ε = 1,
   replace-one) on a 2·10⁶ × 50 float32 Dask array persisted on the cluster
   (``--chunk`` rows a partition) / the same fit on the numpy array, same
   ``random_state``.  Untimed warm-up fits on both sides first (the calibration is
   cached in this process — the stricter ratio — and the workers have imported
   dperm); then ``--seeds`` seeds, the two sides alternating.  Printed per seed: both
   times, the ratio, the fixed cost of each side (the same fit with one step) and the
   time per step ((fit − fixed) / (steps − 1)), the largest coefficient difference
   (same seed → same model, to rounding).
2. **Recovery** (issue #31 §4, target ≤ 2): a DP-SGD fit on 10⁶ × 20 float32 rows
   persisted on the cluster, undisturbed, then the same fit with one worker process
   killed (SIGKILL) ``--kill-after`` seconds into it; printed: both times, their ratio,
   whether the two models are bit-identical, and the number of spends recorded by an
   active :class:`dperm.Ledger` during the disturbed fit (1: ε charged once).  The
   nanny restarts the killed worker; Dask recomputes its partitions.

Both parts print the machine's load average (``/proc/loadavg``): the 2 cores of the
benchmark machine are shared, so only ratios measured in one run mean anything.

Run::

    nice -n 10 python benchmarks/bench_dask_steps.py              # both, ~2–4 min
    python benchmarks/bench_dask_steps.py --part speed --seeds 5
    python benchmarks/bench_dask_steps.py --part recovery

Results are appended as JSON lines to ``--out``.
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

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def local_cluster(workers: int = 2, memory_gib: float = 6.0):
    """A ``LocalCluster`` of ``workers`` processes (one thread each, under nannies)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        memory_limit=f"{memory_gib / workers:.2f}GiB",
        env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )
    return cluster, Client(cluster)


def make_data(n: int, d: int, seed: int = 0):
    """X (n, d) float32 ~ N(0, 0.1²) and y = sign(Xw + noise), on the client."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    X *= np.float32(0.1)
    w = (np.linspace(1.0, -1.0, d) * 3.0).astype(np.float32)
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def persist(X, y, chunk: int):
    """The same rows as Dask arrays persisted on the cluster's workers."""
    import dask.array as da
    from distributed import wait

    Xd = da.from_array(X, chunks=(chunk, X.shape[1])).persist()
    yd = da.from_array(y, chunks=chunk).persist()
    wait([Xd, yd])
    return Xd, yd


def _fit(kw, seed, X, y):
    from dperm import DPLogisticRegression

    gc.collect()
    t0 = time.perf_counter()
    model = DPLogisticRegression(**kw, random_state=seed).fit(X, y)
    return model, time.perf_counter() - t0


KW = dict(mechanism="dp-sgd", epsilon=1.0, delta=1e-8, data_norm=1.5, classes=[-1, 1], epochs=1)


def speed(args) -> list[dict]:
    """Part 1: numpy vs the 2-worker cluster, one epoch, alternating."""
    n, d = int(args.n), args.d
    X, y = make_data(n, d)
    Xd, yd = persist(X, y, args.chunk)
    one_step = dict(KW, epochs=round(np.sqrt(n)) / n)  # q = b/n with b = √n: one step
    print(f"speed: n={n} d={d} float32, 2 workers, chunk {args.chunk}; load {_load()}", flush=True)
    for A, b in ((X, y), (Xd, yd)):  # warm-up: calibration cached, workers' imports
        _fit(one_step, 0, A, b)
        _fit(KW, 0, A, b)
    rows = []
    for seed in range(args.seeds):
        sides = [("numpy", X, y), ("dask", Xd, yd)]
        times, models, fixed = {}, {}, {}
        for name, A, b in sides if seed % 2 == 0 else sides[::-1]:
            models[name], times[name] = _fit(KW, seed, A, b)
            fixed[name] = _fit(one_step, seed, A, b)[1]
        steps = models["dask"].diagnostics_["steps"]
        diff = float(np.max(np.abs(models["dask"].coef_ - models["numpy"].coef_)))
        per_step = {k: 1e3 * (times[k] - fixed[k]) / (steps - 1) for k in times}
        row = {
            "part": "speed", "n": n, "d": d, "chunk": args.chunk, "seed": seed, "steps": steps,
            "numpy_s": times["numpy"], "dask_s": times["dask"],
            "ratio": times["dask"] / times["numpy"], "max_coef_diff": diff,
            "numpy_fixed_s": fixed["numpy"], "dask_fixed_s": fixed["dask"],
            "numpy_ms_step": per_step["numpy"], "dask_ms_step": per_step["dask"],
            "load": _load(),
        }  # fmt: skip
        rows.append(row)
        print(
            f"  seed {seed}: numpy {times['numpy']:.2f} s, dask {times['dask']:.2f} s, ratio "
            f"{row['ratio']:.2f}; {steps} steps; fixed numpy {fixed['numpy']:.2f} s, dask "
            f"{fixed['dask']:.2f} s; per step numpy {per_step['numpy']:.2f} ms, dask "
            f"{per_step['dask']:.2f} ms; max |Δcoef| {diff:.1e}; load {row['load']}",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows]
    print(f"speed: median ratio {np.median(ratios):.2f} (target ≤ 3; {len(ratios)} seeds)")
    del Xd, yd
    return rows


def recovery(args, client) -> list[dict]:
    """Part 2: the same fit undisturbed, then with one worker SIGKILLed mid-fit."""
    from dperm import Ledger

    n, d = int(args.kill_n), args.kill_d
    X, y = make_data(n, d, seed=1)
    Xd, yd = persist(X, y, args.kill_chunk)
    print(f"recovery: n={n} d={d} float32, chunk {args.kill_chunk}; load {_load()}", flush=True)
    _fit(KW, 0, Xd, yd)  # warm-up (calibration cached: both timed fits are alike)
    base, t_base = _fit(KW, 7, Xd, yd)
    pids = client.run(os.getpid)
    victim = sorted(pids)[-1]
    killed = {}

    def kill():
        time.sleep(args.kill_after)
        killed["at"] = time.perf_counter()
        os.kill(pids[victim], signal.SIGKILL)

    ledger = Ledger(epsilon=100.0, delta=1e-6)
    killer = threading.Thread(target=kill, daemon=True)
    t0 = time.perf_counter()
    killer.start()
    with ledger.active():
        hit, t_hit = _fit(KW, 7, Xd, yd)
    killer.join()
    same = bool(
        np.array_equal(hit.coef_, base.coef_) and np.array_equal(hit.intercept_, base.intercept_)
    )
    row = {
        "part": "recovery", "n": n, "d": d, "chunk": args.kill_chunk,
        "steps": base.diagnostics_["steps"], "undisturbed_s": t_base, "disturbed_s": t_hit,
        "ratio": t_hit / t_base, "killed_at_s": killed.get("at", t0) - t0,
        "bit_identical": same, "spends": len(ledger.entries), "load": _load(),
    }  # fmt: skip
    print(
        f"  undisturbed {t_base:.2f} s, disturbed {t_hit:.2f} s (worker {victim} killed at "
        f"{row['killed_at_s']:.2f} s), ratio {row['ratio']:.2f} (target ≤ 2); "
        f"bit-identical model: {same}; spends recorded: {row['spends']}; load {row['load']}",
        flush=True,
    )
    return [row]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=["both", "speed", "recovery"], default="both")
    p.add_argument("--n", type=float, default=2e6)
    p.add_argument("--d", type=int, default=50)
    p.add_argument("--chunk", type=int, default=250_000, help="rows per partition")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--kill-n", type=float, default=1e6)
    p.add_argument("--kill-d", type=int, default=20)
    p.add_argument("--kill-chunk", type=int, default=125_000)
    p.add_argument("--kill-after", type=float, default=1.0, help="seconds into the fit")
    p.add_argument("--out", default="dask_steps.jsonl", help="JSON lines appended here")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    cluster, client = local_cluster()
    rows = []
    try:
        if args.part in ("both", "speed"):
            rows += speed(args)
        if args.part in ("both", "recovery"):
            rows += recovery(args, client)
    finally:
        client.close()
        cluster.close()
    with open(args.out, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
