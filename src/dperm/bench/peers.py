"""Peer libraries run side by side with dperm (optional extra ``bench``).

* ``diffprivlib`` — IBM's ``diffprivlib.models.LogisticRegression``: objective
  perturbation (Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 2, through the
  vector mechanism), pure ε-DP.  ``data_norm`` is always passed explicitly, so
  diffprivlib never reads the bound from the data (it would warn and leak).
  Multi-class data: diffprivlib fits one-vs-rest models, each with the full ε;
  the bench therefore gives it ε/k per class (basic composition), as dperm does.
* ``opacus`` — Meta's Opacus: DP-SGD (Abadi et al. 2016) on a linear model
  (logistic for binary, softmax for multi-class) with Poisson sampling, clipping
  norm C = 1 on the per-example gradient and noise calibrated by Opacus' RDP
  accountant to (ε, δ) for the chosen epochs.

Both are imported lazily: when a library is not installed it is skipped with a
note, and nothing else in dperm imports them.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["OPACUS_DEFAULTS", "PEERS", "PeerResult", "available_peers", "fit_peer"]

PEERS = ("diffprivlib", "opacus")

#: Documented defaults of the Opacus peer (no test-set look).
OPACUS_DEFAULTS: dict[str, Any] = {
    "epochs": 5,
    "batch_size": 256,
    "learning_rate": 0.5,
    "max_grad_norm": 1.0,
}


@dataclasses.dataclass
class PeerResult:
    """A peer's fit: test predictions, the linear model and its time."""

    predictions: np.ndarray
    coef: np.ndarray | None
    intercept: np.ndarray | float | None
    seconds: float
    params: dict[str, Any]
    note: str = ""


_STATUS: dict[str, str] = {}


def peer_status() -> dict[str, str]:
    """``{peer: "ok" | reason it cannot run}``, from a real (cached) import: a
    library can be installed yet unusable (e.g. diffprivlib 0.6.6 does not import
    with scikit-learn ≥ 1.8)."""
    if not _STATUS:
        for name, modules in (("diffprivlib", ("diffprivlib.models",)),
                              ("opacus", ("torch", "opacus"))):  # fmt: skip
            if any(importlib.util.find_spec(m.split(".")[0]) is None for m in modules):
                _STATUS[name] = "not installed"
                continue
            try:
                for m in modules:
                    importlib.import_module(m)
                _STATUS[name] = "ok"
            except Exception as exc:  # an installed but broken library: report, skip
                _STATUS[name] = f"installed but does not import ({type(exc).__name__}: {exc})"
    return dict(_STATUS)


def available_peers() -> list[str]:
    """Names of the peers whose library imports here."""
    return [name for name, status in peer_status().items() if status == "ok"]


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def _fit_diffprivlib(X, y, X_test, *, epsilon, delta, data_norm, random_state, classes):
    from diffprivlib.models import LogisticRegression

    k = len(classes)
    eps = epsilon / k if k > 2 else epsilon
    params = {"epsilon": eps, "data_norm": data_norm, "C": 1.0, "max_iter": 1000}
    model = LogisticRegression(**params, random_state=random_state)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its convergence / accountant chatter
        model.fit(_dense(X), y)
    seconds = time.perf_counter() - t0
    pred = model.predict(_dense(X_test))
    note = "ε/k per one-vs-rest class" if k > 2 else ""
    return PeerResult(pred, model.coef_, model.intercept_, seconds, params, note)


def _fit_opacus(X, y, X_test, *, epsilon, delta, data_norm, random_state, classes):
    import torch
    from opacus import PrivacyEngine

    p = dict(OPACUS_DEFAULTS)
    torch.manual_seed(int(random_state))
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    Xt = torch.tensor(_dense(X), dtype=torch.float32)
    k = len(classes)
    if k == 2:
        yt = torch.tensor((np.asarray(y) == classes[1]).astype(np.float32))
        model = torch.nn.Linear(Xt.shape[1], 1)
        loss_fn = torch.nn.BCEWithLogitsLoss()
    else:
        yt = torch.tensor(np.searchsorted(classes, y), dtype=torch.long)
        model = torch.nn.Linear(Xt.shape[1], k)
        loss_fn = torch.nn.CrossEntropyLoss()
    ds = torch.utils.data.TensorDataset(Xt, yt)
    loader = torch.utils.data.DataLoader(ds, batch_size=p["batch_size"], shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=p["learning_rate"])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # opacus / torch chatter (secure RNG off, …)
        engine = PrivacyEngine(accountant="rdp")
        model, opt, loader = engine.make_private_with_epsilon(
            module=model,
            optimizer=opt,
            data_loader=loader,
            target_epsilon=epsilon,
            target_delta=delta,
            epochs=p["epochs"],
            max_grad_norm=p["max_grad_norm"],
            poisson_sampling=True,
        )
        for _ in range(p["epochs"]):
            for xb, yb in loader:
                if xb.shape[0] == 0:
                    continue
                opt.zero_grad()
                out = model(xb)
                loss = loss_fn(out.squeeze(-1), yb) if k == 2 else loss_fn(out, yb)
                loss.backward()
                opt.step()
    seconds = time.perf_counter() - t0
    lin = model._module if hasattr(model, "_module") else model
    W = lin.weight.detach().numpy().astype(float)
    b = lin.bias.detach().numpy().astype(float)
    with torch.no_grad():
        scores = np.asarray(_dense(X_test)) @ W.T + b
    if k == 2:
        pred = np.where(scores[:, 0] > 0, classes[1], classes[0])
        coef, intercept = W[0], float(b[0])
    else:
        pred = np.asarray(classes)[np.argmax(scores, axis=1)]
        coef, intercept = None, None  # softmax model: no one-vs-rest excess risk
    p["noise_multiplier"] = float(opt.noise_multiplier)
    note = "softmax (multinomial) model" if k > 2 else ""
    return PeerResult(pred, coef, intercept, seconds, p, note)


def fit_peer(
    name: str,
    X,
    y,
    X_test,
    *,
    epsilon: float,
    delta: float,
    data_norm: float,
    random_state: int,
    classes=None,
) -> PeerResult:
    """Fit peer ``name`` on (X, y) at (ε, δ) and predict ``X_test``.

    ``classes`` is the public label set (it sets the one-vs-rest budget split);
    None reads it off ``y``.

    Rows of X are assumed already bounded by ``data_norm`` (the bench's split
    guarantees it); diffprivlib receives ``data_norm`` explicitly.

    Raises
    ------
    UnknownNameError
        Unknown peer.
    ImportError
        The peer's library is not installed.
    """
    from ..exceptions import InvalidPrivacyParameter, UnknownNameError

    classes = np.unique(np.asarray(y)) if classes is None else np.asarray(classes)
    kw = {
        "epsilon": float(epsilon),
        "delta": float(delta),
        "data_norm": float(data_norm),
        "random_state": int(random_state),
        "classes": classes,
    }
    if name == "diffprivlib":
        return _fit_diffprivlib(X, y, X_test, **kw)
    if name == "opacus":
        if not math.isfinite(delta) or delta <= 0:
            raise InvalidPrivacyParameter(f"the Opacus peer needs delta > 0, got {delta!r}")
        return _fit_opacus(X, y, X_test, **kw)
    raise UnknownNameError(f"unknown peer {name!r}; choose one of {list(PEERS)}")
