"""Differentially private linear SVM with the Huber-smoothed hinge loss (scikit-learn API)."""

from __future__ import annotations

from sklearn.base import ClassifierMixin

from .._validation import check_positive
from ..losses import HuberSVM
from ._base import DPLinearClassifierBase
from .logistic import COMMON_ATTRIBUTES_DOC, COMMON_PARAMETERS_DOC

__all__ = ["DPLinearSVC"]


class DPLinearSVC(ClassifierMixin, DPLinearClassifierBase):
    """Differentially private linear SVM (full docstring below)."""

    # the full docstring shares the parameter list of every dperm estimator
    __doc__ = f"""Differentially private linear SVM.

    Minimizes (1/n)Σ ℓ_h(yᵢ⟨θ, xᵢ⟩) + (Λ/2)‖θ‖² privately, with ℓ_h the
    Huber hinge of Chaudhuri, Monteleoni, Sarwate (2011, eq. 7): smooth, so
    objective perturbation applies (curvature c = 1/(2h)).  Two classes are
    mapped to ±1 (``classes_[1]`` ↦ +1); more classes are fitted one-vs-rest
    with the budget split evenly.  Neighbouring relation: replace-one.

    Parameters
    ----------
    h : float > 0, default=0.5
        Huber smoothing width of the hinge.{COMMON_PARAMETERS_DOC}
    Attributes
    ----------{COMMON_ATTRIBUTES_DOC}"""

    def __init__(
        self,
        *,
        h=0.5,
        epsilon=1.0,
        delta=None,
        mechanism="objective",
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
        self.h = h
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.noise = noise
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.constraint = constraint
        self.constraint_radius = constraint_radius
        self.tol = tol
        self.max_iter = max_iter
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.clipping_norm = clipping_norm
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.classes = classes
        self.verbose = verbose
        self.random_state = random_state

    def _make_loss(self):
        return HuberSVM(h=check_positive(self.h, "h"))
