"""Benchmark: peak memory a private fit adds, as a multiple of size(X) (issue #12 §1).

Usage::

    python benchmarks/bench_memory.py [--n 100000] [--d 100] [--formats dense64,dense32,csr]
                                      [--mechanisms objective,dp-sgd,...] [--json OUT]

For every GLM mechanism registered with the estimators it fits
``DPLogisticRegression(mechanism=m)`` (``DPLinearRegression`` for the least-squares
mechanisms "adassp" and "ssp") with the intercept on (the default) and clipping
active (about half the rows lie above ``data_norm`` = 1), and, as the baseline
measured in the same run on the same arrays, scikit-learn's
``LogisticRegression`` (lbfgs, default settings).  Inputs:

* ``dense64`` — C-ordered float64 ndarray, n × d;
* ``dense32`` — the same values as float32;
* ``csr`` — scipy CSR float64, n × 10·d columns with d stored values per row
  (density 0.1), the layout of one-hot/bag-of-words data.

Each fit is measured twice in its process: the first fit ("cold") also pays the
lazy imports and the accountant's one-off work (PLD noise calibration and ε
evaluation: ~10–20 MB of working arrays whatever n is), the second fit with
another seed ("warm") finds the calibration cached, so what it adds is the data
path itself.  The target is checked on the warm fit; both are printed.

**How memory is measured.**  Each fit runs in a fresh interpreter.  The data are
generated first (in chunks, so that no temporary of the size of X exists), then
``tracemalloc`` is started and ``fit`` is called; the peak of traced memory
during the fit is the memory the fit *added* (X itself was allocated before
tracing started and is not counted).  numpy reports every array buffer it
allocates to ``tracemalloc`` (``PyTraceMalloc_Track``), and scipy.sparse
matrices are numpy arrays, so copies and temporaries of X are all counted; what
``tracemalloc`` does not see is memory allocated by compiled code with its own
``malloc`` (OpenBLAS work buffers, scipy's L-BFGS-B workspace: kilobytes for
d = 100).  As a cross-check, the growth of the process' peak resident set
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) across the fit is printed too;
it is a lower bound on the fit's added peak when allocator caches are reused
and includes untraced buffers.

The targets (issue #12 §1): added peak ≤ 0.3 × size(X) dense, ≤ 1 × size(X)
sparse, for every mechanism, intercept on (warm fit).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings

import numpy as np

LOGISTIC_MECHANISMS = (
    "objective",
    "output",
    "amp",
    "amp-nt",
    "dp-gd",
    "dp-gd-avg",
    "dp-sgd",
    "dp-sgd-single",
    "bolt-on",
    "frank-wolfe",
    "structured-output",
    "dual-frank-wolfe",
)
REGRESSION_MECHANISMS = ("adassp", "ssp")
ALL = (*LOGISTIC_MECHANISMS, *REGRESSION_MECHANISMS, "sklearn")
FORMATS = ("dense64", "dense32", "csr")
TARGET = {"dense64": 0.3, "dense32": 0.3, "csr": 1.0}


# ---------------------------------------------------------------------- data, in chunks
def make_data(fmt: str, n: int, d: int, seed: int = 0):
    """(X, y): rows with ‖x‖ ≈ 1 ± 0.1 (about half above data_norm = 1), labels ±1.

    Generated chunk by chunk into preallocated arrays, so the peak of the
    generating process is size(X) plus one chunk."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    y = np.empty(n)
    chunk = max(1, (1 << 22) // d)
    if fmt in ("dense64", "dense32"):
        X = np.empty((n, d), dtype=np.float64 if fmt == "dense64" else np.float32)
        for a in range(0, n, chunk):
            blk = rng.standard_normal((min(chunk, n - a), d)) / np.sqrt(d)
            X[a : a + blk.shape[0]] = blk
            y[a : a + blk.shape[0]] = blk @ w
    else:  # CSR, d stored values per row in 10·d columns (one per stripe of width 10)
        k, width = d, 10
        indptr = np.arange(n + 1, dtype=np.int32) * k
        indices = np.empty(n * k, dtype=np.int32)
        data = np.empty(n * k)
        for a in range(0, n, chunk):
            m = min(chunk, n - a)
            cols = rng.integers(0, width, size=(m, k)) + width * np.arange(k)
            vals = rng.standard_normal((m, k)) / np.sqrt(k)
            indices[a * k : (a + m) * k] = cols.ravel()
            data[a * k : (a + m) * k] = vals.ravel()
            y[a : a + m] = vals @ w
        X = sp.csr_matrix((data, indices, indptr), shape=(n, width * d))
    y = np.where(y + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def nbytes(X) -> int:
    if hasattr(X, "indptr"):
        return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return X.nbytes


def make_estimator(mech: str):
    if mech == "sklearn":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression()
    if mech in REGRESSION_MECHANISMS:
        from dperm import DPLinearRegression

        return DPLinearRegression(mechanism=mech, epsilon=1.0, random_state=0)
    from dperm import DPLogisticRegression

    return DPLogisticRegression(mechanism=mech, epsilon=1.0, classes=[-1, 1], random_state=0)


def _traced_fit(est, X, y) -> tuple[int, int, float]:
    """(traced peak added, maxrss growth, seconds) of one ``est.fit(X, y)``."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    secs = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return peak - base, rss1 - rss0, secs


def run_one(mech: str, fmt: str, n: int, d: int) -> dict:
    """Two fits in this process: the first ("cold": lazy imports, the accountant's
    noise calibration and ε evaluation, whose working memory does not depend on X)
    and a second one with another seed ("warm": the calibration is cached, so what
    remains is the data path)."""
    X, y = make_data(fmt, n, d)
    if mech in REGRESSION_MECHANISMS:
        y = 0.5 * y
    cold, cold_rss, cold_s = _traced_fit(make_estimator(mech), X, y)
    est = make_estimator(mech)
    if mech != "sklearn":
        est.set_params(random_state=1)
    warm, warm_rss, warm_s = _traced_fit(est, X, y)
    return {
        "mechanism": mech,
        "format": fmt,
        "n": n,
        "d": d,
        "size_X": nbytes(X),
        "peak_added": warm,
        "maxrss_added": warm_rss,
        "seconds": warm_s,
        "peak_added_cold": cold,
        "maxrss_added_cold": cold_rss,
        "seconds_cold": cold_s,
    }


def run_subprocess(mech: str, fmt: str, n: int, d: int) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--one", mech, fmt, str(n), str(d)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        return {"mechanism": mech, "format": fmt, "error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--mechanisms", default=",".join(ALL))
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    ap.add_argument("--one", nargs=4, metavar=("MECH", "FORMAT", "N", "D"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        mech, fmt, n, d = args.one
        print(json.dumps(run_one(mech, fmt, int(n), int(d))))
        return 0
    formats = args.formats.split(",")
    mechs = args.mechanisms.split(",")
    rows = []
    print(f"n = {args.n}, d = {args.d} (csr: {10 * args.d} columns, density 0.1); intercept on")
    print("peak memory added by a fit / size(X): warm fit (cold first fit) [warm maxrss growth]")
    print(f"{'mechanism':<19}" + "".join(f"{f:>24}" for f in formats))
    ok = True
    for mech in mechs:
        line = f"{mech:<19}"
        for fmt in formats:
            r = run_subprocess(mech, fmt, args.n, args.d)
            rows.append(r)
            if "error" in r:
                line += f"{'error':>24}"
                print(f"  {mech}/{fmt}: {r['error']}", file=sys.stderr)
                ok = ok and mech == "sklearn"
                continue
            size = r["size_X"]
            ratio = r["peak_added"] / size
            if mech != "sklearn" and ratio > TARGET[fmt]:
                ok = False
            cell = (
                f"{ratio:.3f} ({r['peak_added_cold'] / size:.3f}) [{r['maxrss_added'] / size:.2f}]"
            )
            line += f"{cell:>24}"
        print(line, flush=True)
    sizes = {r["format"]: r["size_X"] for r in rows if "size_X" in r}
    print("size(X): " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items()))
    print(
        "targets: added peak ≤ 0.3 × size(X) dense, ≤ 1 × size(X) sparse:",
        "met" if ok else "NOT met",
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
