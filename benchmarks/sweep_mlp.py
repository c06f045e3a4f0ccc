"""Validation sweep behind DPMLPClassifier's default rule (issue #31, item 5).

    python benchmarks/sweep_mlp.py --data-home ../shared/data --out .sweep/results.jsonl \
        --config '{"epsilon": 2.0}' [--config ...] [--seeds 0] [--test]
    python benchmarks/sweep_mlp.py --grid eps2 --grid eps05     # the sweep behind the rule

Every configuration is fitted on the first 50 000 rows of MNIST's *training* set (a
fixed public split) and scored on the other 10 000 training rows (validation); the test
set is read only with ``--test`` (the confirmation run of the chosen rule, fitted on
all 60 000 training rows).  One JSON line per (configuration, seed) is appended to
``--out``.  A configuration is a JSON object of DPMLPClassifier keyword arguments
(``epsilon`` included); ``classes`` is the public label set 0..9, and every argument
not given is the estimator's default — so ``{"epsilon": 2.0}`` measures the default
rule at replace-one ε = 2, δ = 1/n².
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
N_FIT = 50_000
LAST = None  # the last fitted estimator (for diagnostics)

#: the previous default (issue #24): Abadi et al.'s MLP on 60 components, C = 1
OLD = {"hidden_layer_sizes": [1000], "quadratic_features": None, "n_components": 60,
       "clipping_norm": 1.0}  # fmt: skip
MLP = {"hidden_layer_sizes": [100], "quadratic_features": None, "n_components": 60}
QUAD = {"hidden_layer_sizes": [], "clipping_norm": 0.01}
#: the configurations of the sweep behind the rule (docs/neural_networks.md), every
#: parameter explicit, so that the grid measures the same fits whatever the defaults
GRID = {
    "eps2": [
        {**OLD},
        {**OLD, "delta": 1e-5},
        {**MLP, "clipping_norm": 1.0},
        {**MLP, "clipping_norm": 1.0, "hidden_layer_sizes": [250]},
        {**MLP, "clipping_norm": 1.0, "n_components": 30},
        {**MLP, "clipping_norm": 1.0, "n_components": 20},
        {**MLP, "clipping_norm": 1.0, "pca_noise_ratio": 1.0},
        {**MLP, "clipping_norm": 10.0},
        {**MLP, "clipping_norm": 0.1},
        {**MLP, "clipping_norm": 0.01},
        {**MLP, "clipping_norm": 0.1, "hidden_layer_sizes": [50]},
        {**MLP, "clipping_norm": 0.1, "activation": "tanh"},
        {**MLP, "clipping_norm": 0.1, "n_components": 30},
        {**MLP, "clipping_norm": 0.1, "learning_rate": 5.0},  # η/C = 0.5/C
        {**MLP, "clipping_norm": 0.1, "learning_rate": 20.0},  # 2/C
        {**MLP, "clipping_norm": 0.01, "activation": "tanh"},
        {**MLP, "clipping_norm": 0.01, "weight_decay": 1e-6},
        {**MLP, "clipping_norm": 0.01, "weight_decay": 1e-5},
        {**MLP, "clipping_norm": 0.01, "epochs": 60},
        {**MLP, "clipping_norm": 0.01, "epochs": 300},
        {**QUAD, "n_components": 60, "quadratic_features": 30},
        {**QUAD, "n_components": 60, "quadratic_features": 45},
        {**QUAD, "n_components": 60, "quadratic_features": 60},
        {**QUAD, "n_components": 60, "quadratic_features": 60, "pca_noise_ratio": 2.0},
        {**QUAD, "n_components": 80, "quadratic_features": 80},
        {**QUAD, "n_components": 100, "quadratic_features": 100},
    ],
    "eps05": [
        {**OLD},
        {**QUAD, "n_components": 60, "quadratic_features": 30},
        {**QUAD, "n_components": 60, "quadratic_features": 60},
        {**QUAD, "n_components": 60, "quadratic_features": 60, "epochs": 15},
        {**QUAD, "n_components": 60, "quadratic_features": 60, "epochs": 50},
        {**QUAD, "n_components": 80, "quadratic_features": 80},
    ],
}
GRID_EPSILON = {"eps2": 2.0, "eps05": 0.5}


def load_split(data_home: str, test: bool, n_fit: int = N_FIT):
    """(X, y, X_score, y_score): the first ``n_fit`` training rows (of the first 50 000)
    and the validation rows 50 000–59 999; with ``test``, all training rows and the test
    set."""
    from dperm.datasets import load

    ds = load("mnist", data_home)
    if test:
        return ds.X_train, ds.y_train, ds.X_test, ds.y_test
    X, y = ds.X_train, ds.y_train
    n_fit = min(n_fit, N_FIT)
    return X[:n_fit], y[:n_fit], X[N_FIT:], y[N_FIT:]


def run(config: dict, seed: int, data) -> dict:
    from dperm import DPMLPClassifier

    X, y, Xv, yv = data
    kw = {"classes": list(range(10)), "random_state": seed}
    kw.update({k: v for k, v in config.items() if not k.startswith("_")})  # "_note": a label
    clf = DPMLPClassifier(**kw)
    t0, c0 = time.perf_counter(), time.process_time()
    clf.fit(X, y)
    global LAST
    LAST = clf
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    d = clf.diagnostics_
    return {
        "config": config,
        "seed": seed,
        "n_fit": int(X.shape[0]),
        "accuracy": float(clf.score(Xv, yv)),
        "train_accuracy": float(clf.score(X[:10_000], y[:10_000])),  # fitted rows
        "delta": float(clf.delta_),
        "noise_multiplier": d["noise_multiplier"],
        "pca_noise_multiplier": d["pca_noise_multiplier"],
        "quadratic_features": int(getattr(clf, "quadratic_features_", 0)),
        "hidden": [int(W.shape[1]) for W in clf.coefs_[:-1]],
        "clipping_norm": d["clipping_norm"],
        "epochs": d["epochs"],
        "batch_size": d["batch_size"],
        "steps": d["steps"],
        "learning_rate": d["learning_rate"],
        "epsilon_spent": d["epsilon_spent"],
        "wall_s": wall,
        "cpu_s": cpu,
        "load": os.getloadavg()[0],
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-home", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--config", action="append", default=[], help="JSON kwargs (repeatable)")
    ap.add_argument("--grid", choices=sorted(GRID), action="append", default=[],
                    help="run a committed grid of the sweep (repeatable)")  # fmt: skip
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--test", action="store_true", help="fit on 60 000, score on the test set")
    ap.add_argument("--n-fit", type=int, default=N_FIT, help="fit on the first n training rows")
    ap.add_argument("--out", default=".sweep/results.jsonl")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    data = load_split(args.data_home, args.test, args.n_fit)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    configs = [json.loads(c) for c in args.config]
    configs += [{"epsilon": GRID_EPSILON[g], **c} for g in args.grid for c in GRID[g]]
    configs = configs or [{"epsilon": 2.0}]
    for config in configs:
        for seed in (int(s) for s in args.seeds.split(",")):
            row = {"split": "test" if args.test else "validation", **run(config, seed, data)}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
