"""Differentially private linear SVM with the Huber-smoothed hinge loss (scikit-learn API)."""

from __future__ import annotations

from sklearn.base import ClassifierMixin

from .._parameters import positive
from .._validation import check_positive
from ..losses import HuberSVM
from ._base import DPLinearClassifierBase
from ._params import CLASSIFIER_ATTRIBUTES, LINEAR, Param, ParamDoc, Spec, estimator_parameters

__all__ = ["DPLinearSVC"]


@estimator_parameters(
    "h",
    *LINEAR,
    "classes",
    "verbose",
    "random_state",
    attributes=CLASSIFIER_ATTRIBUTES,
    h=Param(
        Spec(0.5, "float", [positive()]),
        ParamDoc("float > 0", "Huber smoothing width of the hinge."),
    ),
)
class DPLinearSVC(ClassifierMixin, DPLinearClassifierBase):
    """Differentially private linear SVM.

    Minimizes (1/n)Σ ℓ_h(yᵢ⟨θ, xᵢ⟩) + (Λ/2)‖θ‖² privately, with ℓ_h the
    Huber hinge of Chaudhuri, Monteleoni, Sarwate (2011, eq. 7): smooth, so
    objective perturbation applies (curvature c = 1/(2h)).  Two classes are
    mapped to ±1 (``classes_[1]`` ↦ +1); more classes are fitted one-vs-rest
    with the budget split evenly.  Neighbouring relation: replace-one.
    """

    _auto_task = "huber-svm"

    def _make_loss(self):
        return HuberSVM(h=check_positive(self.h, "h"))
