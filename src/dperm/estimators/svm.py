"""Differentially private linear SVM with the Huber-smoothed hinge loss (scikit-learn API)."""

from __future__ import annotations

from typing import Literal

from sklearn.base import ClassifierMixin

from .._validation import check_positive
from ..losses import HuberSVM
from ._base import DPLinearClassifierBase
from ._params import CLASSIFIER_ATTRIBUTES, ParamDoc, estimator_doc, store_params
from ._types import (
    AccountantName,
    ArrayLike,
    ConstraintSpec,
    NoiseFamily,
    PenaltySpec,
    RandomState,
)

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
        h: float = 0.5,
        epsilon: float = 1.0,
        delta: float | None = None,
        mechanism: str = "auto",
        data_norm: float = 1.0,
        alpha: float | Literal["auto"] = "auto",
        fit_intercept: bool = True,
        intercept_scaling: float = 0.5,
        noise: NoiseFamily = "auto",
        penalty: PenaltySpec = "l2",
        l1_ratio: float = 0.5,
        constraint: ConstraintSpec = None,
        constraint_radius: float | None = None,
        tol: float = 1e-10,
        max_iter: int = 10_000,
        epochs: int | None = None,
        batch_size: int | None = None,
        learning_rate: float | None = None,
        clipping_norm: float | None = None,
        noise_multiplier: float | None = None,
        accountant: AccountantName = None,
        warm_start: bool = False,
        classes: ArrayLike | None = None,
        verbose: bool = False,
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    _auto_task = "huber-svm"

    def _make_loss(self):
        return HuberSVM(h=check_positive(self.h, "h"))
