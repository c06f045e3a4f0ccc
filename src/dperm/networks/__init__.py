"""Differentially private training of neural networks (optional extra ``dperm[torch]``).

* :func:`make_private` — DP-SGD in the caller's own PyTorch loop (any optimizer,
  ``DataLoader``, device): per-example clipping by taps on the module's layers, Poisson
  lots, calibrated noise, dperm's accounting and budgets (:mod:`dperm.networks.private`).
* :func:`fit` — DP-SGD (Abadi et al., CCS 2016, Algorithm 1) for any
  ``torch.nn.Module`` and per-example loss, driven by dperm's samplers, noise, loop and
  accountants (:mod:`dperm.networks.dp_sgd`); per-example gradients by
  ``torch.func`` or the per-layer "ghost norm" identities
  (:mod:`dperm.networks.per_example`).
* :class:`DPPCA` — the Gaussian mechanism on the second-moment matrix (Analyze Gauss,
  DTTZ 2014), also ``dperm.preprocessing.DPPCA`` (:mod:`dperm.networks.pca`).
* :mod:`dperm.networks.mlp` — the MLP of :class:`~dperm.estimators.mlp.DPMLPClassifier`
  (ReLU, tanh, tempered sigmoid).

Floor: above :mod:`dperm.algorithms` (the loop and the calibration it reuses), next to
:mod:`dperm.theory`; torch is imported only when a network is trained.  Non-convex
losses: only the privacy guarantee holds, no excess-risk theorem
(docs/neural_networks.md).
"""

from .dp_sgd import fit
from .pca import DPPCA, analyze_gauss, covariance_sensitivity
from .per_example import convert_batchnorm
from .plan import calibrate, default_hyperparameters, make_plan

__all__ = [
    "DPPCA",
    "DPDataLoader",
    "DPOptimizer",
    "analyze_gauss",
    "calibrate",
    "convert_batchnorm",
    "covariance_sensitivity",
    "default_hyperparameters",
    "fit",
    "make_plan",
    "make_private",
]

#: the names defined by modules that import torch (loaded on first use: dperm imports
#: without the optional extra)
_TORCH_NAMES = {
    "make_private": "private",
    "DPOptimizer": "optimizer",
    "DPDataLoader": "loader",
}


def __getattr__(name: str):
    module = _TORCH_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'dperm.networks' has no attribute {name!r}")
    import importlib

    from ._torch import require_torch

    require_torch()  # the ImportError naming the extra
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
