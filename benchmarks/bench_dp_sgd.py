"""Benchmark: one epoch of dperm's DP-SGD vs non-private numpy mini-batch SGD.

Usage::

    python benchmarks/bench_dp_sgd.py [--data-home DIR] [--repeats 5] [--epochs 5]
                                      [--sections algorithm,estimator,perturbation]

Three sections, each a ratio against a baseline measured in the same run:

* ``algorithm`` — :func:`dperm.algorithms.dp_sgd.fit` on Adult/KDD-sized data
  (below);
* ``estimator`` (issue #12 §1) — one DP-SGD epoch *through the estimator*,
  ``DPLogisticRegression(mechanism="dp-sgd", epochs=1, batch_size=256)`` with the
  intercept on, input validation, row norms and clipping included, against one
  plain numpy mini-batch SGD epoch with the same batch size, n = 400 000,
  d = 100 (target ≤ 1.2).  Also printed: the time of the one pass over X every
  fit makes (row norms for clipping, the clipped-row count, the NaN check) and
  the 5-epoch ratio, where that pass is amortized.  Both sides run with one BLAS
  thread; the repeats are interleaved and the best of each is kept (robust to
  the load of a shared machine); the noise calibration of the first fit is
  cached and reported separately;
* ``perturbation`` (issue #12 §1) — ``DPLogisticRegression(mechanism="objective")``
  and ``"output"`` against scikit-learn's ``LogisticRegression(solver="lbfgs")``
  on the same regularized problem (the Λ the mechanism used, as C = 1/(nΛ); the
  same tolerance, 1e-10 on the ℓ2 gradient norm, given to sklearn as the
  equivalent sup-norm 1e-10/√(d+1)), n = 10⁶, d = 100, intercept on (target
  ≤ 1.5).  Each side's achieved ‖∇F‖₂ is printed.

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


def synthetic_rows(n: int, d: int, seed: int = 0):
    """Dense float64 rows with ‖x‖ ≈ 1 ± 0.07 (about half above data_norm = 1, so
    clipping is active) and ±1 labels from a noisy linear model; built in chunks."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = np.empty((n, d))
    z = np.empty(n)
    chunk = max(1, (1 << 22) // d)
    for a in range(0, n, chunk):
        blk = X[a : a + chunk]
        blk[...] = rng.standard_normal(blk.shape)
        blk /= math.sqrt(d)
        z[a : a + chunk] = blk @ w
    y = np.where(z + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def rng_of(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def bench_estimator_epoch(n: int, d: int, batch_size: int, repeats: int) -> bool:
    """One DP-SGD epoch through ``DPLogisticRegression`` vs one numpy epoch (issue #12)."""
    from dperm import DPLogisticRegression
    from dperm.design import as_design

    X, y = synthetic_rows(n, d)
    lr = 1.0

    def estimator_fit(r, epochs=1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ClippingWarning: clipping is active on purpose
            return DPLogisticRegression(
                mechanism="dp-sgd",
                epsilon=1.0,
                epochs=epochs,
                batch_size=batch_size,
                learning_rate=lr,
                classes=[-1, 1],
                random_state=r,
            ).fit(X, y)

    with threadpool_limits(limits=1, user_api="blas"):
        t0 = time.perf_counter()
        est = estimator_fit(100)  # includes the one-off PLD noise calibration (then cached)
        t_first = time.perf_counter() - t0
        # interleaved, best of `repeats` each: robust to the load of a shared machine
        t_np = t_est = t_pass = math.inf
        for r in range(repeats):
            t_pass = min(
                t_pass, best_time(lambda _: as_design(X, 1.0, intercept_scaling=0.5, warn=False), 1)
            )
            t_np = min(
                t_np, best_time(lambda _, r=r: numpy_sgd(X, y, batch_size, lr, rng_of(r)), 1)
            )
            t_est = min(t_est, best_time(lambda _, r=r: estimator_fit(r), 1))
        estimator_fit(100, epochs=5)  # calibration of the 5-epoch run (cached)
        t_np5 = t_est5 = math.inf
        for r in range(max(1, repeats // 3)):  # the one pass over X amortized over 5 epochs
            t_np5 = min(
                t_np5, best_time(lambda _, r=r: numpy_sgd(X, y, batch_size, lr, rng_of(r), 5), 1)
            )
            t_est5 = min(t_est5, best_time(lambda _, r=r: estimator_fit(r, epochs=5), 1))
    ratio = t_est / t_np
    print(
        f"DP-SGD epoch through DPLogisticRegression (n={n}, d={d}, batch {batch_size}, "
        f"intercept on, {est.n_clipped_} rows clipped, {est.diagnostics_['steps']} steps)\n"
        f"  numpy mini-batch epoch {t_np * 1e3:8.1f} ms\n"
        f"  estimator fit, 1 epoch {t_est * 1e3:8.1f} ms   ratio {ratio:.2f}×  (target ≤ 1.2)\n"
        f"  first (cold) fit incl. the one-off PLD calibration {t_first * 1e3:.0f} ms = "
        f"{t_first / t_np:.2f} numpy epochs (issue #22 target ≤ 2)\n"
        f"  of the fit: the one pass over X (row norms, clipping count, NaN check) "
        f"{t_pass * 1e3:.1f} ms = {t_pass / t_np:.2f} numpy epochs\n"
        f"  5 epochs: numpy {t_np5 * 1e3:.1f} ms, estimator {t_est5 * 1e3:.1f} ms, "
        f"ratio {t_est5 / t_np5:.2f}× (the pass over X amortized)"
    )
    return ratio <= 1.2


def _logistic_grad_norm(X, y, coef, intercept, l2) -> float:
    """‖∇F‖₂ of scikit-learn's F = mean logistic loss + (l2/2)‖coef‖² (intercept free)."""
    from scipy.special import expit

    z = X @ coef + intercept
    s = -y * expit(-y * z)
    g = X.T @ s / len(y) + l2 * coef
    g0 = s.mean()
    return float(np.sqrt(g @ g + g0 * g0))


def bench_perturbation(n: int, d: int, repeats: int) -> bool:
    """Objective and output perturbation vs scikit-learn lbfgs on the same problem."""
    from sklearn.linear_model import LogisticRegression

    from dperm import DPLogisticRegression

    X, y = synthetic_rows(n, d, seed=1)
    ok = True
    print(f"objective/output perturbation vs scikit-learn lbfgs (n={n}, d={d}, intercept on)")
    for mech in ("objective", "output"):

        def dperm_fit(r, mech=mech):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ClippingWarning: clipping is active
                e = DPLogisticRegression(
                    mechanism=mech, epsilon=1.0, classes=[-1, 1], random_state=r
                )
                t0 = time.perf_counter()
                e.fit(X, y)
                return e, time.perf_counter() - t0

        est, t_dp = dperm_fit(0)
        diag = est.diagnostics_
        lam = float(diag.get("l2_total", est.l2_))
        # the private objective also has the noise term ⟨b, θ⟩/n, which sklearn cannot
        # take: the non-private problem with the same Λ is the peer (same size, same Λ)
        t_sk = math.inf
        for r in range(repeats):  # interleaved: robust to the load of a shared machine
            sk = LogisticRegression(
                C=1.0 / (n * lam), tol=1e-10 / math.sqrt(d + 1), max_iter=10_000
            )
            t0 = time.perf_counter()
            sk.fit(X, y)
            t_sk = min(t_sk, time.perf_counter() - t0)
            if r + 1 < repeats or repeats == 1:
                t_dp = min(t_dp, dperm_fit(r + 1)[1])
        g_sk = _logistic_grad_norm(X, y, sk.coef_.ravel(), float(sk.intercept_[0]), lam)
        ratio = t_dp / t_sk
        ok &= ratio <= 1.5
        print(
            f"  {mech:<10} Λ = {lam:.3g}: dperm {t_dp:7.2f} s (‖∇F‖₂ = "
            f"{diag['solver_optimality']:.1e}, {diag['solver_method']}, "
            f"{diag['solver_iterations']} it.)   sklearn lbfgs {t_sk:7.2f} s "
            f"(‖∇F‖₂ = {g_sk:.1e}, {int(sk.n_iter_[0])} it.)   ratio {ratio:.2f}× "
            "(target ≤ 1.5)"
        )
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=5, help="epochs per timed run")
    ap.add_argument(
        "--sections",
        default="algorithm,estimator,perturbation",
        help="comma-separated subset of algorithm, estimator, perturbation",
    )
    ap.add_argument("--n-estimator", type=int, default=400_000)
    ap.add_argument("--n-perturbation", type=int, default=1_000_000)
    ap.add_argument("--perturbation-repeats", type=int, default=2)
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))
    ok_all = True
    if "estimator" in sections:
        ok_all &= bench_estimator_epoch(args.n_estimator, 100, 256, args.repeats)
    if "perturbation" in sections:
        ok_all &= bench_perturbation(args.n_perturbation, 100, args.perturbation_repeats)
    if "algorithm" not in sections:
        print("issue #12 §1 targets:", "met" if ok_all else "NOT met")
        return 0
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
