"""Benchmark: one epoch of dperm's DP-SGD vs non-private numpy mini-batch SGD.

Usage::

    python benchmarks/bench_dp_sgd.py [--data-home DIR] [--repeats 5] [--epochs 5]

For Adult- and KDD-Cup-99-sized logistic regression (the real data from
``--data-home`` / ``DPERM_DATA_HOME`` / ``../shared/data`` when present, else
synthetic data of the same shape) it measures, in the same run and on the
same data:

* **baseline** — a plain numpy mini-batch SGD epoch (shuffled batches of size
  b = √n, ``X[idx]``, ``X_b θ``, ``X_bᵀ s``, one update per batch);
* **dperm** — :func:`dperm.algorithms.dp_sgd.fit` for one epoch with the same
  expected batch size: Poisson sampling, per-example clipping, Gaussian noise
  (a fixed noise multiplier, so the one-off calibration is timed separately);
* **opacus** (only if ``opacus`` and ``torch`` are installed, extra ``bench``) —
  the same logistic model (``nn.Linear(d, 1)``, BCE loss) trained with
  Opacus' ``PrivacyEngine`` (Poisson sampling, same batch size and noise).

It prints the time per epoch (from ``--epochs``-epoch runs, best of
``--repeats``) and the ratios dperm/baseline (goal ≤ 1.5) and opacus/dperm
(goal ≥ 10), and separately a single-epoch dperm fit including its one-off
input validation (finite check, row norms, label check) against one numpy epoch.  Both numpy paths
run with one BLAS thread (dperm's loop limits itself to one thread for
small per-step products; the baseline is given the same limit for fairness).
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit
from threadpoolctl import threadpool_limits

from dperm.algorithms import dp_sgd
from dperm.losses import Logistic

SHAPES = {"adult": (30162, 104), "kddcup99": (56000, 118)}


def load(name: str, data_home: Path | None):
    """Real training data when available, else synthetic rows of the same shape."""
    if data_home is not None and (data_home / name).is_dir():
        from dperm import datasets

        ds = datasets.load(name, str(data_home))
        return np.ascontiguousarray(ds.X_train), ds.y_train, "real"
    n, d = SHAPES[name]
    rng = np.random.default_rng(0)
    X = rng.random((n, d))
    X[:, 10:] = X[:, 10:] < 0.1  # one-hot-like sparse block, like the real schemas
    X /= math.sqrt(d)
    w = rng.normal(size=d)
    y = np.where(X @ w > np.median(X @ w), 1.0, -1.0)
    return X, y, "synthetic"


def numpy_sgd(X, y, batch_size: int, learning_rate: float, rng, epochs: int = 1) -> np.ndarray:
    """Plain non-private mini-batch SGD for the logistic loss (shuffled batches)."""
    n, d = X.shape
    theta = np.zeros(d)
    for _ in range(epochs):
        perm = rng.permutation(n)
        for start in range(0, n - batch_size + 1, batch_size):
            idx = perm[start : start + batch_size]
            Xb = X[idx]
            yb = y[idx]
            s = -yb * expit(-yb * (Xb @ theta))
            theta -= learning_rate * (Xb.T @ s) / batch_size
    return theta


def dperm_fit(X, y, batch_size: int, learning_rate: float, seed: int, epochs: int = 1):
    """dperm DP-SGD (Poisson sampling, clipping, noise), validation included."""
    return dp_sgd.fit(
        Logistic(),
        X,
        y,
        noise_multiplier=1.0,
        data_norm=1.0,
        dataset_size=X.shape[0],  # the benchmark treats its row count as a public size
        batch_size=batch_size,
        epochs=epochs,
        learning_rate=learning_rate,
        random_state=seed,
    ).theta


def opacus_epoch(X, y, batch_size: int, learning_rate: float):  # pragma: no cover - optional
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # secure-RNG and backward-hook chatter
        return _opacus_epoch(X, y, batch_size, learning_rate)


def _opacus_epoch(X, y, batch_size, learning_rate):  # pragma: no cover - optional
    import torch
    from opacus import PrivacyEngine

    torch.set_num_threads(1)
    d = X.shape[1]
    ds = torch.utils.data.TensorDataset(
        torch.tensor(X, dtype=torch.float32), torch.tensor((y > 0).astype(np.float32))
    )
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size)
    model = torch.nn.Linear(d, 1, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=learning_rate)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=True,
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    t0 = time.perf_counter()
    for xb, yb in loader:
        opt.zero_grad()
        if len(xb) == 0:
            continue
        loss_fn(model(xb).squeeze(1), yb).backward()
        opt.step()
    return time.perf_counter() - t0


def bench_one(name, X, y, source, E, repeats, have_opacus) -> bool:
    """Time one dataset and print its row; True when the per-epoch goal is met."""
    n, d = X.shape
    b = round(math.sqrt(n))
    lr = 4.0
    with threadpool_limits(limits=1, user_api="blas"):
        t_np = best_time(lambda r: numpy_sgd(X, y, b, lr, np.random.default_rng(r), E), repeats)
        t_np /= E
        t_np1 = best_time(lambda r: numpy_sgd(X, y, b, lr, np.random.default_rng(r), 1), repeats)
    t_dp = best_time(lambda r: dperm_fit(X, y, b, lr, r, E), repeats) / E
    t_dp1 = best_time(lambda r: dperm_fit(X, y, b, lr, r, 1), repeats)
    ratio = t_dp / t_np
    if have_opacus:
        t_op = min(opacus_epoch(X, y, b, lr) for _ in range(max(1, repeats // 2)))
        op = f"{t_op * 1e3:>12.1f}ms{t_op / t_dp:>13.1f}×"
    else:
        op = f"{'n/a':>14}{'(not installed)':>15}"
    print(
        f"{name:<10}{source:<10}{f'{n}×{d}':>11}{b:>5}{t_np * 1e3:>11.1f}ms"
        f"{t_dp * 1e3:>11.1f}ms{ratio:>6.2f}×{t_dp1 * 1e3:>11.1f}ms{t_dp1 / t_np1:>6.2f}×{op}"
    )
    return ratio <= 1.5


def best_time(fn, repeats: int) -> float:
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        fn(r)
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=5, help="epochs per timed run")
    args = ap.parse_args(argv)
    home = args.data_home or Path(
        os.environ.get("DPERM_DATA_HOME", Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    home = home if home.is_dir() else None
    try:
        import opacus  # noqa: F401
        import torch  # noqa: F401

        have_opacus = True
    except ImportError:
        have_opacus = False

    E = args.epochs
    print(
        f"{'data':<10}{'source':<10}{'n×d':>11}{'b':>5}{'numpy/epoch':>13}{'dperm/epoch':>13}"
        f"{'ratio':>7}{'1-epoch fit':>13}{'ratio':>7}{'opacus/epoch':>14}{'opacus/dperm':>14}"
    )
    ok = True
    for name in SHAPES:
        X, y, source = load(name, home)
        ok &= bench_one(name, X, y, source, E, args.repeats, have_opacus)
    print(
        f"\nper-epoch times from {E}-epoch runs (best of {args.repeats}); '1-epoch fit' also "
        "counts dperm's one-off validation, row norms and clipping check, against one "
        "numpy epoch"
    )
    # one-off calibration cost (not part of an epoch)
    t0 = time.perf_counter()
    dp_sgd.fit(
        Logistic(),
        X,
        y,
        epsilon=1.0,
        delta=1.0 / len(y) ** 2,
        data_norm=1.0,
        dataset_size=len(y),
        epochs=1,
        accountant="rdp",
        random_state=0,
    )
    t_cal = time.perf_counter() - t0
    print(f"calibrated fit incl. RDP noise calibration ({name}, 1 epoch): {t_cal * 1e3:.0f} ms")
    print("goal dperm/numpy per epoch ≤ 1.5:", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
