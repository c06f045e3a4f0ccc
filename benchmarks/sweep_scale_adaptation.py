"""The sweeps behind the scale adaptation of issue #36, on TRAINING rows only.

    python benchmarks/sweep_scale_adaptation.py [--data-home DATA_HOME] \
        --cells csv-breast_cancer:1,csv-wine:8,breast-cancer:1,adult:0.1 \
        [--set _auto.SCALING_SHARE=0.15,0.25] [--set _auto.BINARY_CLIP_QUANTILE=none,0.9] \
        [--reps 4] [--table-seeds 0,1] [--estimator feature_scaling=private]

A grid over module constants of the rule (``--set MODULE.NAME=v1,v2``, MODULE one of
``_auto`` (:mod:`dperm.estimators._auto`), ``dp_sgd``, ``adaptive_clipping``,
``private_scaling`` (:mod:`dperm.algorithms`); ``none`` is None): every combination is
scored by ``DPLogisticRegression(**estimator options)`` with every other default, on
validation splits of *training* rows only.  ``csv-<table>`` cells are the training rows
that ``dperm fit --csv`` fits on for the user's file of ``benchmarks/bench_csv_tables.py``
(table seeds ``--table-seeds``, 0–1 by default: the held-out 25 % of those seeds and the
CLI's own 20 % test part are never read); built-in cells are a loader's training rows.
Each repetition r draws a public permutation (seed 20 2026 + r) of those rows, fits on
80 % with noise seed r and scores the other 20 %; the mean is over table seeds ×
repetitions.  The load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
import warnings

import numpy as np
from bench_csv_tables import csv_dataset  # benchmarks/ is on sys.path


def _modules():
    from dperm.algorithms import adaptive_clipping, dp_sgd, private_scaling
    from dperm.estimators import _auto

    return {
        "_auto": _auto,
        "dp_sgd": dp_sgd,
        "adaptive_clipping": adaptive_clipping,
        "private_scaling": private_scaling,
    }


def _value(text: str):
    if text == "none":
        return None
    if text.startswith("(") or "," in text:
        return tuple(float(v) for v in text.strip("()").split(";"))
    try:
        return int(text) if text.isdigit() else float(text)
    except ValueError:
        return text


def _datasets(name, data_home, seeds):
    from dperm import datasets

    if name.startswith("csv-"):
        return [csv_dataset(name[4:], seed=s) for s in seeds]
    return [datasets.load(name, data_home=data_home)]


def main(argv=None) -> int:
    from dperm import DPLogisticRegression

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", default=os.environ.get("DPERM_DATA_HOME"))
    ap.add_argument("--cells", required=True, help="dataset:epsilon, comma-separated")
    ap.add_argument("--set", action="append", default=[], help="MODULE.NAME=v1,v2 (';' in tuples)")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--table-seeds", default="0,1")
    ap.add_argument("--estimator", action="append", default=[], help="option=value")
    args = ap.parse_args(argv)
    mods = _modules()
    grid = []
    for item in args.set:
        key, _, values = item.partition("=")
        mod, _, attr = key.partition(".")
        grid.append((mods[mod], attr, [_value(v) for v in values.split(",")]))
    extra = {k: _value(v) for k, v in (e.split("=", 1) for e in args.estimator)}
    seeds = [int(s) for s in args.table_seeds.split(",")]
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    for cell in args.cells.split(","):
        name, eps = cell.split(":")
        eps = float(eps)
        sets = _datasets(name, args.data_home, seeds)
        for combo in itertools.product(*[vals for _, _, vals in grid]):
            for (mod, attr, _), v in zip(grid, combo, strict=True):
                setattr(mod, attr, v)
            accs, t0 = [], time.perf_counter()
            for ds in sets:
                classes = ds.classes if ds.classes is not None else np.unique(ds.y_train)
                n = ds.X_train.shape[0]
                for r in range(args.reps):
                    perm = np.random.default_rng(20_2026 + r).permutation(n)  # public
                    va, tr = perm[: n // 5], perm[n // 5 :]
                    est = DPLogisticRegression(
                        epsilon=eps, data_norm=ds.row_norm_bound, classes=list(classes),
                        random_state=r, **extra,
                    )  # fmt: skip
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        est.fit(ds.X_train[tr], ds.y_train[tr])
                    accs.append(est.score(ds.X_train[va], ds.y_train[va]))
            label = " ".join(f"{a}={v}" for (_, a, _), v in zip(grid, combo, strict=True))
            print(
                f"{name:<18} ε={eps:<4g} {label:<60} {100 * np.mean(accs):6.2f} ± "
                f"{100 * np.std(accs) / np.sqrt(len(accs)):4.2f}  ({est.mechanism_}, "
                f"{time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
