"""Opacus on arrays given as .npy files (the peer of benchmarks/bench_mlp.py and
benchmarks/bench_cnn.py).

Runs in the environment built by ``benchmarks/opacus_env.sh`` (Opacus on the CPU build
of the same torch as dperm's extra), never in dperm's: it imports numpy, torch and
opacus only.

    <opacus python> benchmarks/_peer_opacus.py DIR

DIR holds X_train.npy (float32, the inputs of the network: dperm's DP-PCA projection),
y_train.npy, X_test.npy, y_test.npy and job.json::

    {"hidden": 1000, "activation": "relu", "batch_size": 600, "epochs": 20,
     "learning_rate": 0.5, "clipping_norm": 1.0, "delta": 1e-5, "threads": 1,
     "runs": [{"noise_multiplier": z, "seed": s, "epochs": e}, ...],
     "timing": {"noise_multiplier": z, "epochs": 1, "repeats": 3}}

Every run trains the same model (Linear, activation, Linear; or one Linear layer when
``hidden`` is 0; or, with ``"model": "cnn"``, the MNIST CNN of Papernot et al. 2020 /
Opacus's MNIST example on inputs reshaped to ``input_shape``) as dperm with Opacus'
``PrivacyEngine`` (Poisson sampling, per-sample gradients by its hooks, flat clipping
to ``clipping_norm``, noise ``noise_multiplier``·C on the sum divided by the expected
lot size — the same algorithm, add/remove-one) and plain SGD at ``learning_rate`` (or
Adam with ``"optimizer": "adam"``), in the same user loop as dperm's benchmark.
Prints one JSON object: versions, per run the test accuracy and Opacus' own ε at δ
(its RDP accountant, add/remove, training only), and the timing block's wall and CPU
seconds per epoch.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def cnn(torch):
    """conv 16@8×8 s2 → tanh → maxpool 2/1 → conv 32@4×4 s2 → tanh → maxpool 2/1 → fc 32 →
    tanh → fc 10 (benchmarks/bench_cnn.py builds dperm's side with it too)."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 8, 2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
        nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten(),
        nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10),
    )  # fmt: skip


def _model(torch, d: int, hidden: int, k: int, activation: str, kind: str = "mlp"):
    if kind == "cnn":
        return cnn(torch)
    if not hidden:  # a linear softmax on the given features
        return torch.nn.Sequential(torch.nn.Linear(d, k))
    act = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[activation]
    return torch.nn.Sequential(torch.nn.Linear(d, hidden), act(), torch.nn.Linear(hidden, k))


def timed_epochs(torch, model, opt, loader, device, epochs: int = 1) -> tuple[float, float]:
    """(wall, CPU) seconds of ``epochs`` passes of the user loop both sides of
    benchmarks/bench_cnn.py run (``zero_grad``, cross-entropy of the batch, ``backward``,
    ``step``), the device synchronised at the end."""
    loss_fn = torch.nn.CrossEntropyLoss()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(epochs):
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, time.process_time() - c0


def _train(job, data, noise_multiplier: float, seed: int, epochs: int):
    """(model, engine, (wall, CPU) seconds per epoch) after ``epochs`` epochs."""
    import torch
    from opacus import PrivacyEngine

    Xtr, ytr = data
    torch.manual_seed(seed)
    k = int(ytr.max()) + 1
    model = _model(
        torch, Xtr.shape[-1], job.get("hidden", 0), k, job.get("activation", "tanh"),
        job.get("model", "mlp"),
    )  # fmt: skip
    device = torch.device(job.get("device", "cpu"))
    model = model.to(device)
    if job.get("optimizer", "sgd") == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=job["learning_rate"])
    else:
        opt = torch.optim.SGD(model.parameters(), lr=job["learning_rate"])
    ds = torch.utils.data.TensorDataset(torch.from_numpy(Xtr), torch.from_numpy(ytr))
    loader = torch.utils.data.DataLoader(ds, batch_size=job["batch_size"])
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=loader,
        noise_multiplier=noise_multiplier,
        max_grad_norm=job["clipping_norm"],
        poisson_sampling=True,
    )
    wall, cpu = timed_epochs(torch, model, opt, loader, device, epochs)
    return model, engine, (wall / epochs, cpu / epochs)


def main() -> None:
    import opacus
    import torch

    d = Path(sys.argv[1])
    job = json.loads((d / "job.json").read_text())
    torch.set_num_threads(int(job.get("threads", 1)))
    shape = tuple(job.get("input_shape", ()))
    Xtr = np.load(d / "X_train.npy").astype(np.float32)
    ytr = np.load(d / "y_train.npy").astype(np.int64)
    Xte = torch.from_numpy(np.load(d / "X_test.npy").astype(np.float32))
    if shape:
        Xtr, Xte = Xtr.reshape(-1, *shape), Xte.reshape(-1, *shape)
    yte = np.load(d / "y_test.npy")
    out = {
        "versions": {"opacus": opacus.__version__, "torch": torch.__version__},
        "cuda": torch.cuda.is_available(),
        "runs": [],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus' secure-RNG and hook notices
        for run in job.get("runs", []):
            model, engine, per_epoch = _train(
                job, (Xtr, ytr), run["noise_multiplier"], run["seed"], run["epochs"]
            )
            with torch.no_grad():
                pred = model(Xte.to(next(model.parameters()).device)).argmax(1).cpu().numpy()
                acc = float((pred == yte).mean())
            out["runs"].append(
                {
                    **run,
                    "accuracy": acc,
                    "epsilon_opacus": float(engine.get_epsilon(job["delta"])),
                    "seconds_per_epoch": per_epoch[0],
                    "cpu_seconds_per_epoch": per_epoch[1],
                }
            )
        timing = job.get("timing")
        if timing:
            secs = [
                _train(job, (Xtr, ytr), timing["noise_multiplier"], r, timing["epochs"])[2]
                for r in range(timing["repeats"])
            ]
            out["timing"] = {
                "seconds_per_epoch": [w for w, _ in secs],
                "cpu_seconds_per_epoch": [c for _, c in secs],
            }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
