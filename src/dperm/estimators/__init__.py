"""scikit-learn estimators: thin adapters around the private algorithms.

:class:`DPLogisticRegression`, :class:`DPLinearSVC` and
:class:`DPLinearRegression` validate input, clip rows to the public
``data_norm``, and dispatch to a mechanism registered with
:func:`register_mechanism` (``"objective"``, ``"output"``, and the
gradient-perturbation mechanisms other modules add).  The named regressors
:class:`DPLasso`, :class:`DPElasticNet`, :class:`DPQuantileRegressor` and
:class:`DPHuberRegressor` live in :mod:`dperm.estimators.regression`;
``DPLinearRegression`` defaults to AdaSSP (``"adassp"``, :mod:`dperm.algorithms.ssp`).
"""

from ._mechanisms import (
    auto_alpha,
    available_mechanisms,
    get_mechanism,
    register_mechanism,
)
from .linear import DPLinearRegression
from .logistic import DPLogisticRegression
from .mlp import DPMLPClassifier
from .regression import DPElasticNet, DPHuberRegressor, DPLasso, DPQuantileRegressor
from .svm import DPLinearSVC

__all__ = [
    "DPElasticNet",
    "DPHuberRegressor",
    "DPLasso",
    "DPLinearRegression",
    "DPLinearSVC",
    "DPLogisticRegression",
    "DPMLPClassifier",
    "DPQuantileRegressor",
    "auto_alpha",
    "available_mechanisms",
    "get_mechanism",
    "register_mechanism",
]
