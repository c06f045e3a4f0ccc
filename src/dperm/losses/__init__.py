"""GLM losses: value, gradient, per-example gradient scale, Hessian-vector
product, and the Lipschitz/smoothness constants privacy proofs need."""

from __future__ import annotations

from .._validation import lookup
from .base import MARGIN_BOUND, OUTPUT_MARGIN_BOUND, PRIOR_RELAX_ABOVE, GLMLoss, prior_margin
from .hinge import Hinge
from .huber import Huber
from .huber_svm import HuberSVM
from .logistic import Logistic
from .quantile import Quantile
from .softmax import Softmax
from .squared import Squared

__all__ = [
    "MARGIN_BOUND",
    "OUTPUT_MARGIN_BOUND",
    "PRIOR_RELAX_ABOVE",
    "GLMLoss",
    "Hinge",
    "Huber",
    "HuberSVM",
    "Logistic",
    "Quantile",
    "Softmax",
    "Squared",
    "get_loss",
    "prior_margin",
]

_LOSSES = {
    "logistic": Logistic,
    "huber_svm": HuberSVM,
    "svm": HuberSVM,
    "hinge": Hinge,
    "huber": Huber,
    "squared": Squared,
    "quantile": Quantile,
}


def get_loss(loss: str | GLMLoss, **params) -> GLMLoss:
    """Return a loss instance from its name (or the instance itself).

    Names: ``logistic``, ``huber_svm`` (alias ``svm``), ``hinge``, ``squared``,
    ``quantile``, ``huber``.  ``params`` go to the constructor (``h``, ``label_bound``,
    ``quantile``).

    Raises
    ------
    UnknownNameError
    """
    if isinstance(loss, GLMLoss):
        return loss
    return lookup(_LOSSES, loss, "loss")(**params)
