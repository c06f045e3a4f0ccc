"""Differentially private least squares (scikit-learn API)."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin

from .._validation import check_positive
from ..exceptions import LabelError
from ..losses import Squared
from ._base import DPLinearModelBase
from .logistic import COMMON_PARAMETERS_DOC

__all__ = ["DPLinearRegression"]


class DPLinearRegression(RegressorMixin, DPLinearModelBase):
    """Differentially private ridge-regularized least squares (full docstring below)."""

    # the full docstring shares the parameter list of every dperm estimator
    __doc__ = f"""Differentially private ridge-regularized least squares.

    Minimizes (1/n)Σ (⟨θ, xᵢ⟩ − yᵢ)²/2 + (Λ/2)‖θ‖² over a bounded convex set C
    privately.  The squared loss is Lipschitz only on a bounded domain, so
    "objective" and "output" need ``constraint_radius`` (an ℓ2 ball by
    default): L = R(R·radius + label_bound).  Targets must satisfy
    |y| ≤ ``label_bound`` (a public bound; LabelError otherwise — clip them to
    the bound first).  Neighbouring relation: replace-one.

    Parameters
    ----------
    label_bound : float > 0, default=1.0
        Public bound B on |y|.{COMMON_PARAMETERS_DOC}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    epsilon_, delta_, dp_event_, n_clipped_, n_features_in_, alpha_, data_norm_, diagnostics_
        As for :class:`~dperm.estimators.DPLogisticRegression`.
    """

    def __init__(
        self,
        *,
        label_bound=1.0,
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
        verbose=False,
        random_state=None,
    ):
        self.label_bound = label_bound
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
        self.verbose = verbose
        self.random_state = random_state

    def _make_loss(self):
        return Squared(label_bound=check_positive(self.label_bound, "label_bound"))

    def _encode_targets(self, y):
        y = np.asarray(y, dtype=np.float64)
        bound = check_positive(self.label_bound, "label_bound")
        if y.size and np.max(np.abs(y)) > bound:
            raise LabelError(
                f"targets must satisfy |y| ≤ label_bound={bound:g}; the largest |y| is "
                f"{np.max(np.abs(y)):g} (clip y to the public bound first)"
            )
        return [y]

    def _finish_shapes(self):
        self.coef_ = self.coef_.ravel()
        self.intercept_ = float(self.intercept_[0])

    def predict(self, X):
        """Predicted targets, shape (n_samples,)."""
        return self._linear_scores(X)
