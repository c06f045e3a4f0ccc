"""Benchmark: private linear regression on California housing and CASP (issue #13).

Usage::

    bash benchmarks/peer_env.sh        # once: the diffprivlib peer's own environment
    python benchmarks/bench_regression.py [--data-home DIR] [--seeds 5] [--epsilons 0.1 1 10]

For each dataset (loaded with its public schema by :func:`dperm.datasets.load`: every
feature centered at the midpoint of its public range, rows divided by the worst-case
norm so that ‖x‖ ≤ 1, targets clipped to the documented label bound B) and each ε it
fits, with δ = 1/n_train² and the replace-one relation (n public), over ``--seeds``
noise seeds on the loader's fixed split:

* ``DPLinearRegression`` with ``mechanism`` = ``adassp`` (the default), ``ssp``,
  ``objective`` (Gaussian objective perturbation over the public default ℓ2 ball) and
  ``tukey`` (Amin et al. 2023; bound-free; ⊥ = the zero model when its test fails);
* the named regressors at their defaults with the public B: ``DPHuberRegressor``
  (objective perturbation, threshold h = 1), ``DPQuantileRegressor`` (median,
  ``label_bound`` = B), ``DPElasticNet`` (objective), ``DPLasso`` (Frank-Wolfe);
* scikit-learn ``LinearRegression`` (non-private reference);
* diffprivlib's ``LinearRegression`` (pure ε, public bounds: every feature in
  [−1/√d, 1/√d], y in [−B, B]), run **in its own environment**: diffprivlib 0.6.6 does not
  import with scikit-learn 1.9 (dperm's pin), so this script writes the arrays to .npy
  files in a temporary folder and runs ``benchmarks/_peer_diffprivlib.py`` with the
  python of ``$DPERM_PEER_ENV`` (default ``~/.cache/dperm/peer_env``, built by
  ``benchmarks/peer_env.sh``), then reads its scores back.  Without that environment the
  peer is skipped with a message.

It prints a Markdown table: median test R² and min–max over the seeds, fit seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LinearRegression

from dperm import datasets
from dperm.estimators import (
    DPElasticNet,
    DPHuberRegressor,
    DPLasso,
    DPLinearRegression,
    DPQuantileRegressor,
)
from dperm.exceptions import DpermError

DATASETS = ("california-housing", "casp")
PEER_SCRIPT = Path(__file__).with_name("_peer_diffprivlib.py")


def _estimators(eps: float, delta: float, ds) -> dict:
    """name → factory(seed): every private estimator of the table at its defaults."""
    R, B = ds.row_norm_bound, ds.label_bound
    common = dict(epsilon=eps, delta=delta, data_norm=R)
    out = {
        f"DPLinearRegression({m})": (
            lambda s, m=m: DPLinearRegression(mechanism=m, label_bound=B, random_state=s, **common)
        )
        for m in ("adassp", "ssp", "objective", "tukey")
    }
    out["DPHuberRegressor(objective)"] = lambda s: DPHuberRegressor(random_state=s, **common)
    out["DPQuantileRegressor(dp-gd-avg)"] = lambda s: DPQuantileRegressor(
        label_bound=B, random_state=s, **common
    )
    out["DPElasticNet(objective)"] = lambda s: DPElasticNet(label_bound=B, random_state=s, **common)
    out["DPLasso(frank-wolfe)"] = lambda s: DPLasso(label_bound=B, random_state=s, **common)
    return out


def peer_python() -> Path | None:
    """The peer environment's python, or None when it has not been built."""
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    env = Path(os.environ.get("DPERM_PEER_ENV", home / "dperm" / "peer_env"))
    py = env / "bin" / "python"
    return py if py.is_file() else None


def run_diffprivlib(ds, epsilons, seeds: int) -> dict | str:
    """diffprivlib's scores from its own environment (module docstring), or the reason
    it was skipped."""
    py = peer_python()
    if py is None:
        return (
            "skipped: no peer environment (run `bash benchmarks/peer_env.sh`, or set "
            "DPERM_PEER_ENV to a venv with diffprivlib)"
        )
    d = ds.n_features
    job = {
        "epsilons": list(epsilons),
        "seeds": seeds,
        "bounds_X": [-1.0 / math.sqrt(d), 1.0 / math.sqrt(d)],  # the public schema's range
        "bounds_y": [-ds.label_bound, ds.label_bound],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("X_train", "y_train", "X_test", "y_test"):
            np.save(Path(tmp) / f"{name}.npy", getattr(ds, name))
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        proc = subprocess.run(
            [str(py), str(PEER_SCRIPT), tmp], capture_output=True, text=True, timeout=1800
        )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"skipped: the peer failed ({last})"
    return json.loads(proc.stdout)


def run(data_home: str, seeds: int, epsilons) -> tuple[list[dict], list[str]]:
    rows, notes = [], []
    for name in DATASETS:
        try:
            ds = datasets.load(name, data_home=data_home)
        except Exception as exc:  # a missing data file: skip the dataset, say why
            notes.append(f"{name}: skipped ({type(exc).__name__}: {exc})")
            continue
        n = ds.n_train
        t0 = time.perf_counter()
        ref = LinearRegression().fit(ds.X_train, ds.y_train).score(ds.X_test, ds.y_test)
        rows.append(
            dict(
                data=name,
                est="scikit-learn LinearRegression (non-private)",
                eps=math.inf,
                r2=[ref],
                t=time.perf_counter() - t0,
            )
        )
        for eps in epsilons:
            for est, make in _estimators(eps, 1.0 / n**2, ds).items():
                r2, fails, errors, t0 = [], 0, [], time.perf_counter()
                for seed in range(seeds):
                    try:
                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always")
                            model = make(seed).fit(ds.X_train, ds.y_train)
                    except DpermError as exc:  # fails closed (e.g. ConvergenceError): say so
                        errors.append(type(exc).__name__)
                        continue
                    fails += any("check failed" in str(w.message) for w in caught)
                    r2.append(model.score(ds.X_test, ds.y_test))
                t = (time.perf_counter() - t0) / seeds
                rows.append(
                    dict(data=name, est=est, eps=eps, r2=r2, t=t, fails=fails, errors=errors)
                )
        peer = run_diffprivlib(ds, epsilons, seeds)
        if isinstance(peer, str):
            notes.append(f"{name}: diffprivlib LinearRegression {peer}")
            continue
        v = peer["versions"]
        label = f"diffprivlib {v['diffprivlib']} LinearRegression (sklearn {v['scikit-learn']})"
        for eps in epsilons:
            key = repr(float(eps))
            rows.append(
                dict(data=name, est=label, eps=eps, r2=peer["r2"][key], t=peer["seconds"][key])
            )
    return rows, notes


def table(rows) -> str:
    lines = [
        "| dataset | estimator (mechanism) | ε | median R² | min – max | fit s |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        a = np.asarray(r["r2"])
        eps = "—" if math.isinf(r["eps"]) else f"{r['eps']:g}"
        est = r["est"] + (f" ⊥×{r['fails']}" if r.get("fails") else "")
        if r.get("errors"):
            est += f" ({len(r['errors'])}× {', '.join(sorted(set(r['errors'])))})"
        med, span = (
            (f"{np.median(a):.3g}", f"{a.min():.3g} – {a.max():.3g}") if a.size else ("—", "—")
        )
        lines.append(f"| {r['data']} | {est} | {eps} | {med} | {span} | {r['t']:.2f} |")
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
    rows, notes = run(a.data_home, a.seeds, a.epsilons)
    print(table(rows))
    for note in notes:
        print(f"\n* {note}", file=sys.stdout)
    print(
        f"\n{a.seeds} seeds, δ = 1/n_train², replace-one (diffprivlib: pure ε); "
        f"⊥×k: the Tukey test failed in k seeds (zero model); (k× Error): k seeds failed "
        f"closed with that error, not in the median; total "
        f"{time.perf_counter() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()
