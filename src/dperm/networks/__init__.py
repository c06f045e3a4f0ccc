"""Differentially private training of neural networks (optional extra ``dperm[torch]``).

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

from .dp_sgd import calibrate, default_hyperparameters, fit, make_plan
from .pca import DPPCA, analyze_gauss, covariance_sensitivity

__all__ = [
    "DPPCA",
    "analyze_gauss",
    "calibrate",
    "covariance_sensitivity",
    "default_hyperparameters",
    "fit",
    "make_plan",
]
