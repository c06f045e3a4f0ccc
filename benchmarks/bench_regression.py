"""Benchmark: private linear regression on California housing and CASP (issue #13).

Usage::

    python benchmarks/bench_regression.py [--data-home DIR] [--seeds 5] [--epsilons 0.1 1 10]

For each dataset (loaded with its public schema by :func:`dperm.datasets.load`,
rows divided by the schema's worst-case norm so that ‖x‖ ≤ 1, targets clipped
to the documented label bound) and each ε it fits, with δ = 1/n_train² and
the replace-one relation (n public):

* ``adassp`` — :class:`dperm.DPLinearRegression` defaults (AdaSSP);
* ``ssp`` — ``mechanism="ssp"`` (no adaptive ridge, PSD-safe solve);
* ``objective`` — ``mechanism="objective"`` (objective perturbation over the
  ℓ2 ball of the public default radius);
* ``sklearn`` — scikit-learn ``LinearRegression`` (non-private reference).

Two public feature maps are reported: ``schema`` (the loader's output: every
feature in [0, 1]/√d) and ``centered`` (each feature moved to the midpoint of
its public range, x ↦ 2x − 1/√d, so it lies in [−1, 1]/√d and rows still have
‖x‖ ≤ 1 — a per-record map that uses only the public schema).  It prints the
median (min–max) test R² over ``--seeds`` noise seeds (one fixed train/test
split, the loader's default).

diffprivlib's ``LinearRegression`` is not run: diffprivlib 0.6.6 (the latest
release) fails to import with scikit-learn 1.9 (``ImportError: cannot import
name 'DOUBLE' from 'sklearn.tree._tree'``), and it is not installed here.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LinearRegression

from dperm import datasets
from dperm.estimators import DPLinearRegression

MECHANISMS = ("adassp", "ssp", "objective")


def _maps(ds):
    d = ds.X_train.shape[1]
    shift = 1.0 / math.sqrt(d)  # the public midpoint of every feature, ×2
    return {
        "schema": (ds.X_train, ds.X_test),
        "centered": (2.0 * ds.X_train - shift, 2.0 * ds.X_test - shift),
    }


def run(data_home: str, seeds: int, epsilons) -> list[dict]:
    rows = []
    for name in ("california-housing", "casp"):
        try:
            ds = datasets.load(name, data_home=data_home)
        except Exception as exc:
            print(f"{name}: skipped ({type(exc).__name__}: {exc})")
            continue
        n = ds.n_train
        for fmap, (Xtr, Xte) in _maps(ds).items():
            ref = LinearRegression().fit(Xtr, ds.y_train).score(Xte, ds.y_test)
            rows.append(dict(data=name, map=fmap, mech="sklearn", eps=math.inf, r2=[ref], t=0.0))
            for eps in epsilons:
                for mech in MECHANISMS:
                    r2, t0 = [], time.perf_counter()
                    for seed in range(seeds):
                        est = DPLinearRegression(
                            mechanism=mech,
                            epsilon=eps,
                            delta=1.0 / n**2,
                            data_norm=ds.row_norm_bound,
                            label_bound=ds.label_bound,
                            random_state=seed,
                        )
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            est.fit(Xtr, ds.y_train)
                        r2.append(est.score(Xte, ds.y_test))
                    t = (time.perf_counter() - t0) / seeds
                    rows.append(dict(data=name, map=fmap, mech=mech, eps=eps, r2=r2, t=t))
    return rows


def table(rows) -> str:
    lines = [
        "| dataset | features | mechanism | ε | median R² | min – max | fit s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a = np.asarray(r["r2"])
        eps = "—" if math.isinf(r["eps"]) else f"{r['eps']:g}"
        lines.append(
            f"| {r['data']} | {r['map']} | {r['mech']} | {eps} | {np.median(a):.3f} | "
            f"{a.min():.3f} – {a.max():.3f} | {r['t']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-home", default=os.environ.get("DPERM_DATA_HOME", "../shared/data"))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    a = p.parse_args()
    if not Path(a.data_home).is_dir():
        raise SystemExit(f"data home {a.data_home!r} not found")
    t0 = time.perf_counter()
    rows = run(a.data_home, a.seeds, a.epsilons)
    print(table(rows))
    print(f"\n{a.seeds} seeds, δ = 1/n_train², replace-one; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
