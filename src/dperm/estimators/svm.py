"""Differentially private linear SVM with the Huber-smoothed hinge loss (scikit-learn API)."""

from __future__ import annotations

from sklearn.base import ClassifierMixin

from .._validation import check_positive
from ..losses import HuberSVM
from ._base import DPLinearClassifierBase
from ._params import CLASSIFIER_ATTRIBUTES, ParamDoc, estimator_doc, store_params

__all__ = ["DPLinearSVC"]


@estimator_doc(
    attributes=CLASSIFIER_ATTRIBUTES,
    h=ParamDoc("float > 0", "Huber smoothing width of the hinge."),
)
class DPLinearSVC(ClassifierMixin, DPLinearClassifierBase):
    """Differentially private linear SVM.

    Minimizes (1/n)Σ ℓ_h(yᵢ⟨θ, xᵢ⟩) + (Λ/2)‖θ‖² privately, with ℓ_h the
    Huber hinge of Chaudhuri, Monteleoni, Sarwate (2011, eq. 7): smooth, so
    objective perturbation applies (curvature c = 1/(2h)).  Two classes are
    mapped to ±1 (``classes_[1]`` ↦ +1); more classes are fitted one-vs-rest
    with the budget split evenly.  Neighbouring relation: replace-one.
    """

    def __init__(
        self,
        *,
        h=0.5,
        epsilon=1.0,
        delta=None,
        mechanism="auto",
        data_norm=1.0,
        alpha="auto",
        fit_intercept=True,
        intercept_scaling=0.5,
        noise="auto",
        penalty="l2",
        l1_ratio=0.5,
        constraint=None,
        constraint_radius=None,
        tol=1e-10,
        max_iter=10_000,
        epochs=None,
        batch_size=None,
        learning_rate=None,
        clipping_norm=None,
        noise_multiplier=None,
        accountant=None,
        classes=None,
        verbose=False,
        random_state=None,
    ):
        store_params(self, locals())

    _auto_task = "huber-svm"

    def _make_loss(self):
        return HuberSVM(h=check_positive(self.h, "h"))
