"""Issue #30: every default estimator's score as ε grows, next to scikit-learn's
unpenalized fit of the same model (the ε → ∞ limit the defaults must approach).

    PYTHONPATH=src python benchmarks/bench_consistency.py [--seeds 3] [--data-home DIR]

scikit-learn's bundled sets (never used by the sweeps of the auto rule), rows scaled to
‖x‖ ≤ 1 by a public constant (the largest row norm of the bundled file), a 75/25 split
(random_state=0); with ``--data-home`` also CASP (the public schema, label bound 21).
Prints a Markdown table (the one in docs/choosing_a_mechanism.md): mean test score over
the seeds (accuracy for classifiers, R² for regressors) and the mechanism the rule chose.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

import dperm

EPSILONS = (0.1, 1.0, 10.0, 100.0, 1e4)


def _split(X, y):
    X = X / np.linalg.norm(X, axis=1).max()
    return train_test_split(X, y, test_size=0.25, random_state=0)


def _cases(data_home):
    bc = _split(*load_breast_cancer(return_X_y=True))
    dg = _split(*load_digits(return_X_y=True))
    db = _split(*load_diabetes(return_X_y=True))
    bound = float(np.abs(load_diabetes().target).max())
    logit = LogisticRegression(C=np.inf, max_iter=10_000)
    ols = LinearRegression()
    yield "DPLogisticRegression", "breast cancer", bc, {"classes": [0, 1]}, logit
    yield "DPLogisticRegression", "digits (k = 10)", dg, {"classes": range(10)}, logit
    yield "DPLinearSVC", "breast cancer", bc, {"classes": [0, 1]}, LinearSVC(C=1e6, max_iter=10**5)
    for cls in ("DPLinearRegression", "DPLasso", "DPElasticNet"):
        yield cls, "diabetes", db, {"label_bound": bound}, ols
    q = QuantileRegressor(quantile=0.5, alpha=0.0, solver="highs")
    yield "DPQuantileRegressor", "diabetes", db, {"label_bound": bound}, q
    if data_home is not None:
        ds = dperm.datasets.load("casp", data_home)
        casp = (ds.X_train, ds.X_test, ds.y_train, ds.y_test)
        for cls in ("DPLinearRegression", "DPLasso", "DPElasticNet"):
            yield cls, "CASP", casp, {"label_bound": ds.label_bound}, ols


def main(seeds: int, data_home) -> None:
    head = " | ".join(f"ε = {e:g}" for e in EPSILONS)
    print(f"| estimator | data | {head} | non-private | mechanism at ε = 10⁴ |")
    print("| --- | --- |" + " --- |" * (len(EPSILONS) + 2))
    for cls, name, (Xtr, Xte, ytr, yte), kw, ref in _cases(data_home):
        cells, mech = [], ""
        for eps in EPSILONS:
            scores = []
            for seed in range(seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = getattr(dperm, cls)(epsilon=eps, random_state=seed, **kw).fit(Xtr, ytr)
                scores.append(m.score(Xte, yte))
                mech = m.mechanism_
            cells.append(f"{np.mean(scores):.3f}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = ref.fit(Xtr, ytr).score(Xte, yte)
        print(f"| {cls} | {name} | {' | '.join(cells)} | {base:.3f} | {mech} |", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--data-home", default=None)
    a = ap.parse_args()
    main(a.seeds, a.data_home)
