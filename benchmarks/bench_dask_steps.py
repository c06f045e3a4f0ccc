"""DP-SGD on a 2-worker Dask ``LocalCluster``: the two ratios of issue #31 in one run.

1. **Speed** (issue #31 §2, target ≤ 3): one epoch of
   ``DPLogisticRegression(mechanism="dp-sgd", epochs=1, batch_size=√n)`` (ε = 1,
   replace-one) on a 2·10⁶ × 50 float32 Dask array persisted on the cluster
   (``--chunk`` rows a partition) / the same fit on the numpy array, same
   ``random_state``: the measurement of ``bench_scale.py --sgd-ratio`` (untimed
   warm-up fits on both sides, so the calibration is cached — the stricter ratio —
   and the workers have imported dperm; ``--seeds`` seeds, the two sides
   alternating; per seed both times, the ratio, each side's fixed cost (the same fit
   with one step) and time per step, the largest coefficient difference).
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
from bench_scale import _load, local_cluster, sgd_ratio
from bench_scale import client_data as make_data
from bench_scale import scatter as persist

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _fit(kw, seed, X, y):
    from dperm import DPLogisticRegression

    gc.collect()
    t0 = time.perf_counter()
    model = DPLogisticRegression(**kw, random_state=seed).fit(X, y)
    return model, time.perf_counter() - t0


KW = dict(mechanism="dp-sgd", epsilon=1.0, delta=1e-8, data_norm=1.5, classes=[-1, 1], epochs=1)


def speed(args) -> list[dict]:
    """Part 1: numpy vs the 2-worker cluster, one epoch, alternating
    (:func:`bench_scale.sgd_ratio`, its own cluster)."""
    ns = argparse.Namespace(
        ratio_n=args.n,
        ratio_d=args.d,
        chunk=args.chunk,
        seeds=args.seeds,
        memory_gib=6.0,
        ratio_batch=args.batch,
    )
    print(f"speed: load {_load()}", flush=True)
    return [dict(r, part="speed") for r in sgd_ratio(ns)]


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
    p.add_argument(
        "--batch",
        default=None,
        help="speed part: lot size (default √n, issue #31's measurement) or 'auto' (the rule)",
    )
    p.add_argument("--kill-n", type=float, default=1e6)
    p.add_argument("--kill-d", type=int, default=20)
    p.add_argument("--kill-chunk", type=int, default=125_000)
    p.add_argument("--kill-after", type=float, default=1.0, help="seconds into the fit")
    p.add_argument("--out", default="dask_steps.jsonl", help="JSON lines appended here")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    if args.part in ("both", "speed"):
        rows += speed(args)
    if args.part in ("both", "recovery"):
        cluster, client = local_cluster(2, 6.0)
        try:
            rows += recovery(args, client)
        finally:
            client.close()
            cluster.close()
    with open(args.out, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    for part, target in (("speed", 3), ("recovery", 2)):
        got = [r["ratio"] for r in rows if r.get("part") == part]
        if got:
            print(f"{part}: median ratio {np.median(got):.2f} (target ≤ {target}); load {_load()}")


if __name__ == "__main__":
    main()
