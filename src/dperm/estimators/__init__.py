"""scikit-learn estimators: thin adapters around the private algorithms.

:class:`DPLogisticRegression`, :class:`DPLinearSVC` and
:class:`DPLinearRegression` validate input, clip rows to the public
``data_norm``, and dispatch to a mechanism registered with
:func:`register_mechanism` (``"objective"``, ``"output"``, and the
gradient-perturbation mechanisms other modules add).
"""

from ._mechanisms import (
    auto_alpha,
    available_mechanisms,
    get_mechanism,
    register_mechanism,
)
from .linear import DPLinearRegression
from .logistic import DPLogisticRegression
from .svm import DPLinearSVC

__all__ = [
    "DPLinearRegression",
    "DPLinearSVC",
    "DPLogisticRegression",
    "auto_alpha",
    "available_mechanisms",
    "get_mechanism",
    "register_mechanism",
]
