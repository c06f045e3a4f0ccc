"""diffprivlib's LinearRegression on arrays given as .npy files (a benchmark peer).

Runs in the peer environment built by ``benchmarks/peer_env.sh`` (diffprivlib with a
scikit-learn it supports), never in dperm's: it imports numpy and diffprivlib only.

    <peer python> benchmarks/_peer_diffprivlib.py DIR

DIR holds X_train.npy, y_train.npy, X_test.npy, y_test.npy and job.json
(``{"epsilons": [...], "seeds": n, "bounds_X": [lo, hi], "bounds_y": [lo, hi]}``: public
bounds, the same for every feature).  Prints one JSON object: ``{"versions": {...},
"r2": {"<epsilon>": [R² per seed]}, "seconds": {"<epsilon>": mean fit time}}``.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def main() -> None:
    import diffprivlib
    import sklearn
    from diffprivlib.models import LinearRegression

    d = Path(sys.argv[1])
    job = json.loads((d / "job.json").read_text())
    Xtr, ytr = np.load(d / "X_train.npy"), np.load(d / "y_train.npy")
    Xte, yte = np.load(d / "X_test.npy"), np.load(d / "y_test.npy")
    k = Xtr.shape[1]
    lo, hi = job["bounds_X"]
    bounds_X = (np.full(k, lo), np.full(k, hi))
    bounds_y = tuple(job["bounds_y"])
    out = {
        "versions": {"diffprivlib": diffprivlib.__version__, "scikit-learn": sklearn.__version__},
        "r2": {},
        "seconds": {},
    }
    for eps in job["epsilons"]:
        r2, t0 = [], time.perf_counter()
        for seed in range(job["seeds"]):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = LinearRegression(
                    epsilon=eps, bounds_X=bounds_X, bounds_y=bounds_y, random_state=seed
                ).fit(Xtr, ytr)
            r2.append(float(model.score(Xte, yte)))
        out["r2"][repr(float(eps))] = r2
        out["seconds"][repr(float(eps))] = (time.perf_counter() - t0) / job["seeds"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
