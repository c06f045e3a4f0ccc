"""What the ``mechanism="auto"`` sweeps share (``sweep_auto_binary.py``,
``sweep_auto_multinomial.py``): the public fit / validation split of a loader's
*training* rows and the scoring of one candidate on it (the test split is never read).

Imported by those scripts as ``from _sweep import …`` (run as ``python benchmarks/…``,
so this folder is on ``sys.path``).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

#: the seed of the public permutation that splits the training rows
SPLIT_SEED = 20_2026


def sweep_parser(description: str, cells: str, seeds: str) -> argparse.ArgumentParser:
    """The options every sweep takes: --data-home, --cells, --seeds and --grid."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data-home", default=os.environ.get("DPERM_DATA_HOME"))
    ap.add_argument("--cells", default=cells, help="dataset:epsilon, comma-separated")
    ap.add_argument("--seeds", default=seeds)
    ap.add_argument("--grid", action="store_true")
    return ap


def sgd_candidate(L: float, batch: int, epochs: int, clip_fraction: float, step_clip: float):
    """Clipped DP-SGD at C = ``clip_fraction``·L with step η = ``step_clip``/C."""
    C = clip_fraction * L
    return dict(mechanism="dp-sgd", batch_size=batch, epochs=epochs, clipping_norm=C,
                learning_rate=step_clip / C)  # fmt: skip


def public_split(X, y, n_val: int | None = None):
    """(X_fit, y_fit, X_val, y_val): ``n_val`` rows (default n/5) of a public permutation
    of the training rows for validation, the others to fit."""
    n = X.shape[0]
    perm = np.random.default_rng(SPLIT_SEED).permutation(n)  # public
    nv = n // 5 if n_val is None else n_val
    va, tr = perm[:nv], perm[nv:]
    return X[tr], y[tr], X[va], y[va]


def score_candidate(prefix: str, label: str, params: dict, seeds, data) -> None:
    """Fit ``DPLogisticRegression(**params)`` on the fit part with every noise seed and
    print, after ``prefix``, the candidate's mean ± std validation accuracy (%), its
    mechanism and the time it took."""
    from dperm import DPLogisticRegression

    Xf, yf, Xv, yv = data
    accs, t0 = [], time.perf_counter()
    for seed in seeds:
        est = DPLogisticRegression(random_state=seed, **params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Xf, yf)
        accs.append(est.score(Xv, yv))
    print(
        f"{prefix} {label:<28} {100 * np.mean(accs):6.2f} ± {100 * np.std(accs):4.2f}  "
        f"({est.mechanism_}, {time.perf_counter() - t0:.0f} s)",
        flush=True,
    )


def load_average(when: str) -> None:
    """Print the machine load (next to every number, as the developers' guide asks)."""
    print(f"load average at {when}: {os.getloadavg()[0]:.1f}", flush=True)
