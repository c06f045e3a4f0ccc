"""One epoch of DP-SGD in the user's own loop: dperm.networks.make_private vs Opacus.

    python benchmarks/bench_cnn.py [--data-home ../shared/data] [--rows 10000] [--repeats 5]
    bash benchmarks/opacus_env.sh      # once: the Opacus peer's own environment

The model of issue #38: the MNIST CNN of Papernot, Thakurta, Song, Chien, Erlingsson
(2020) / Opacus's MNIST example — conv 16@8×8 stride 2 → tanh → maxpool 2/1 → conv
32@4×4 stride 2 → tanh → maxpool 2/1 → fc 32 → tanh → fc 10 — trained in the same user
loop on both sides (``for xb, yb in loader: zero_grad; CrossEntropyLoss()(model(xb),
yb).backward(); step``) with Adam (lr 10⁻³), Poisson lots of expected size 256, noise
multiplier 1, clipping norm 1, add/remove-one (Opacus's relation), one torch thread, on
``--rows`` MNIST training images (random images without ``--data-home``).  A second row
times an MLP (784 → 1000 ReLU → 10) the same way.

dperm runs in this process, Opacus (1.6, the CPU build of the same torch) in its own
environment (benchmarks/_peer_opacus.py, a subprocess: its import time is not counted);
the two are alternated ``--repeats`` times so that both see the same machine load, and
the ratio of the medians of CPU seconds per epoch is reported (wall seconds too), with
the load average at the start and the end.  When a CUDA device is present, dperm's
epoch on it is timed too (and Opacus's, when its environment sees the device).  Prints
one JSON object; ``--out FILE`` also writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _peer_opacus import cnn, timed_epochs

HERE = Path(__file__).resolve().parent
DELTA = 1e-5
#: an ε above what one epoch at z = 1 spends: make_private checks the given z against it
EPSILON_BOUND = 100.0


def _opacus_python() -> Path | None:
    env = os.environ.get("DPERM_OPACUS_ENV") or str(
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dperm" / "opacus_env"
    )
    py = Path(env) / "bin" / "python"
    return py if py.exists() else None


def build(torch, model: str):
    """The timed module: "cnn" (the module docstring's) or "mlp"."""
    nn = torch.nn
    if model == "cnn":
        return cnn(torch)  # the peer's own module
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1000), nn.ReLU(), nn.Linear(1000, 10))


def _data(data_home: str | None, rows: int):
    if data_home and Path(data_home, "mnist").exists():
        from dperm.datasets import load

        ds = load("mnist", data_home, normalize_rows=False)
        X, y = ds.X_train[:rows], ds.y_train[:rows]
        source = "MNIST"
    else:
        rng = np.random.default_rng(0)
        X, y = rng.random((rows, 784)), rng.integers(0, 10, rows)
        source = "random images"
    return X.astype(np.float32).reshape(-1, 1, 28, 28), y.astype(np.int64), source


def time_dperm(X, y, *, model: str, batch_size: int, seed: int, device: str = "cpu"):
    """(wall, CPU) seconds of one epoch of the user loop through make_private."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from dperm.networks import make_private

    dev = torch.device(device)
    torch.manual_seed(seed)
    net = build(torch, model).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(torch.from_numpy(X), torch.from_numpy(y)), batch_size)
    net, opt, loader = make_private(
        net, opt, loader, epsilon=EPSILON_BOUND, delta=DELTA, epochs=1, noise_multiplier=1.0,
        neighbouring="add-remove", dataset_size=len(X), random_state=seed,
    )  # fmt: skip
    return timed_epochs(torch, net, opt, loader, dev)  # the peer's own loop


def time_opacus(py: Path, X, y, *, model: str, batch_size: int, seed: int, device="cpu"):
    """(wall, CPU) seconds of one epoch of the same loop with Opacus (its environment)."""
    job = {
        "model": model, "hidden": 1000, "activation": "relu", "optimizer": "adam",
        "learning_rate": 1e-3, "batch_size": batch_size, "clipping_norm": 1.0,
        "delta": DELTA, "threads": 1, "device": device,
        "timing": {"noise_multiplier": 1.0, "epochs": 1, "repeats": 1, "seed": seed},
    }  # fmt: skip
    if model == "cnn":
        job["input_shape"] = [1, 28, 28]
    with tempfile.TemporaryDirectory() as tmp:
        flat = X.reshape(len(X), -1)
        for name, arr in (("X_train", flat), ("y_train", y), ("X_test", flat[:10]),
                          ("y_test", y[:10])):  # fmt: skip
            np.save(Path(tmp) / f"{name}.npy", arr)
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        out = subprocess.run(
            [str(py), str(HERE / "_peer_opacus.py"), tmp],
            check=True, capture_output=True, text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
    res = json.loads(out.stdout.strip().splitlines()[-1])
    t = res["timing"]
    return t["seconds_per_epoch"][0], t["cpu_seconds_per_epoch"][0], res


def _row(ours: list, theirs: list) -> dict:
    med = {k: statistics.median(v) for k, v in (("ours", ours), ("theirs", theirs)) if v}
    out = {
        "dperm_wall_s": [w for w, _ in ours],
        "dperm_cpu_s": [c for _, c in ours],
        "opacus_wall_s": [w for w, _ in theirs],
        "opacus_cpu_s": [c for _, c in theirs],
    }
    if "theirs" in med:
        out["ratio_cpu"] = statistics.median(out["dperm_cpu_s"]) / statistics.median(
            out["opacus_cpu_s"]
        )
        out["ratio_wall"] = statistics.median(out["dperm_wall_s"]) / statistics.median(
            out["opacus_wall_s"]
        )
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", default="cnn,mlp")
    ap.add_argument("--no-opacus", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    X, y, source = _data(args.data_home, args.rows)
    py = None if args.no_opacus else _opacus_python()
    if py is None and not args.no_opacus:
        print("Opacus peer skipped: run benchmarks/opacus_env.sh first", file=sys.stderr)
    res: dict = {
        "data": source, "rows": len(X), "batch_size": args.batch_size,
        "load_start": os.getloadavg(), "torch": torch.__version__, "rows_per_model": {},
    }  # fmt: skip
    for model in [m for m in args.models.split(",") if m]:
        ours, theirs = [], []
        time_dperm(X[:512], y[:512], model=model, batch_size=args.batch_size, seed=99)  # warm
        for r in range(args.repeats):  # alternated: both sides see the same load
            ours.append(time_dperm(X, y, model=model, batch_size=args.batch_size, seed=r))
            if py is not None:
                w, c, peer = time_opacus(py, X, y, model=model, batch_size=args.batch_size,
                                         seed=r)  # fmt: skip
                theirs.append((w, c))
                res["opacus"] = peer["versions"]
        row = _row(ours, theirs)
        if torch.cuda.is_available():
            gpu = [time_dperm(X, y, model=model, batch_size=args.batch_size, seed=r,
                              device="cuda") for r in range(args.repeats)]  # fmt: skip
            row["dperm_cuda_wall_s"] = [w for w, _ in gpu]
            row["cuda_device"] = torch.cuda.get_device_name(0)
            if py is not None and res.get("opacus_cuda") is not False:
                try:
                    w, _, peer = time_opacus(py, X, y, model=model, batch_size=args.batch_size,
                                             seed=0, device="cuda")  # fmt: skip
                    row["opacus_cuda_wall_s"] = [w]
                except subprocess.CalledProcessError:  # its torch has no CUDA
                    res["opacus_cuda"] = False
        res["rows_per_model"][model] = row
        print(f"{model}: {json.dumps(row)}", file=sys.stderr, flush=True)
    res["load_end"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
