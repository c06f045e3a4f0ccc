"""dperm: differentially private empirical risk minimization.

Public names (imported lazily, so ``import dperm`` stays light):

* estimators — :class:`DPLogisticRegression`, :class:`DPLinearSVC`,
  :class:`DPLinearRegression`;
* losses — :class:`Logistic`, :class:`HuberSVM`, :class:`Hinge`,
  :class:`Squared`, :class:`Quantile`, :func:`get_loss`;
* accounting — :class:`Ledger`, :func:`budget`, :func:`get_accountant`, :func:`epsilon_spent`,
  :func:`delta_spent`, :func:`calibrate_noise`, :func:`calibrate_gaussian`;
* utility — :func:`excess_empirical_risk`, :func:`accuracy`, :func:`nonprivate_fit`;
* saved models — :func:`save`, :func:`load`, :func:`privacy_statement`
  (:mod:`dperm.io`: JSON + numpy arrays, never pickle);
* :class:`Result` (what every algorithm returns) and the exception classes
  (:mod:`dperm.exceptions`, all of them).

Algorithms live in :mod:`dperm.algorithms` (one module per paper), noise
primitives in :mod:`dperm.mechanisms`, data loaders in :mod:`dperm.datasets`; every
subpackage is an attribute after ``import dperm`` (``dperm.datasets.load(…)``,
``dperm.accounting.get_accountant(…)``…), imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import exceptions as _exceptions
from ._version import __version__
from .exceptions import *  # noqa: F403 - every exception class (exceptions.__all__)

_LAZY = {
    # estimators
    "DPLogisticRegression": "dperm.estimators",
    "DPLinearSVC": "dperm.estimators",
    "DPLinearRegression": "dperm.estimators",
    "DPLasso": "dperm.estimators",
    "DPElasticNet": "dperm.estimators",
    "DPQuantileRegressor": "dperm.estimators",
    "DPHuberRegressor": "dperm.estimators",
    "DPMLPClassifier": "dperm.estimators",
    "register_mechanism": "dperm.estimators",
    "available_mechanisms": "dperm.estimators",
    # losses
    "Logistic": "dperm.losses",
    "HuberSVM": "dperm.losses",
    "Hinge": "dperm.losses",
    "Squared": "dperm.losses",
    "Quantile": "dperm.losses",
    "Huber": "dperm.losses",
    "get_loss": "dperm.losses",
    # accounting
    "Ledger": "dperm.accounting",
    "budget": "dperm.accounting.ledger",
    "get_accountant": "dperm.accounting",
    "epsilon_spent": "dperm.accounting",
    "delta_spent": "dperm.accounting",
    "calibrate_noise": "dperm.accounting",
    "calibrate_gaussian": "dperm.accounting",
    # utility
    "excess_empirical_risk": "dperm.utility",
    "accuracy": "dperm.utility",
    "nonprivate_fit": "dperm.utility",
    # algorithm contract
    "Result": "dperm.algorithms.base",
    # private hyperparameter selection
    "PrivateRandomSearch": "dperm.model_selection",
    # saved models and privacy statements (never pickle)
    "save": "dperm.io",
    "load": "dperm.io",
    "privacy_statement": "dperm.io",
}

#: subpackages and public modules reachable as attributes (``dperm.datasets.load(…)``
#: after a plain ``import dperm``), imported on first access
_SUBMODULES = frozenset(
    {
        "accounting",
        "algorithms",
        "audit",
        "backends",
        "bench",
        "bounds",
        "cli",
        "constraints",
        "datasets",
        "design",
        "duality",
        "estimators",
        "io",
        "losses",
        "mechanisms",
        "model_selection",
        "networks",
        "norms",
        "preprocessing",
        "privacy_profile",
        "regularizers",
        "sampling",
        "schedules",
        "schema",
        "solvers",
        "statement",
        "theory",
        "utility",
    }
)

__all__ = [
    *_exceptions.__all__,
    "__version__",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # a subpackage: importing it binds it on this module too
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dperm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
