"""Differentially private least squares (scikit-learn API)."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin

from .._validation import check_data_norm, check_positive
from ..constraints import get_constraint
from ..design import float_labels
from ..exceptions import InvalidPrivacyParameter, LabelError
from ..losses import Squared
from ._base import DPLinearModelBase
from ._params import LINEAR, REGRESSOR_ATTRIBUTES, estimator_parameters
from ._types import MatrixLike

__all__ = ["DPLinearRegression", "default_constraint_radius"]

#: mechanisms whose privacy proof needs a Lipschitz constant, hence (for the
#: squared loss) a bounded domain: they get the default ℓ2 ball when none is given
_NEEDS_RADIUS = ("objective", "output", "amp", "amp-nt", "bolt-on")


def default_constraint_radius(label_bound: float, data_norm: float, n_features: int) -> float:
    """Public, data-independent radius r = d·B/R of the default ℓ2 constraint.

    A linear predictor explaining targets of scale B with d coordinates of
    typical size R/√d needs coefficients of order B√d/R each, so
    ‖θ‖ ≲ d·B/R; r allows predictions up to ±d·B on rows at the norm bound.
    It uses only public quantities (the label bound B, the row bound R of the
    design including the intercept column, its width d).  It does not bind
    on California housing (‖θ_OLS‖ = 16 < r = 40 with the public schema); it
    binds on ill-conditioned designs such as CASP (‖θ_OLS‖ ≈ 9·10³, from
    nearly collinear columns).  The former rule 4·B/R sat below ‖θ_OLS‖ on
    California.

    Parameters
    ----------
    label_bound, data_norm : float > 0
    n_features : int ≥ 1
        Columns of the design, intercept column included.

    Returns
    -------
    float
    """
    B = check_positive(label_bound, "label_bound")
    R = check_data_norm(data_norm)
    return float(n_features) * B / R


def _design_norm(est) -> float:
    """The public row bound of an estimator's design, intercept column included."""
    R = check_data_norm(est.data_norm)
    if est.fit_intercept:
        s = check_positive(est.intercept_scaling, "intercept_scaling")
        return (R * R + s * s) ** 0.5
    return R


@estimator_parameters(
    "label_bound", *LINEAR, "verbose", "random_state", attributes=REGRESSOR_ATTRIBUTES
)
class DPLinearRegression(RegressorMixin, DPLinearModelBase):
    """Differentially private least squares.

    The default ``mechanism="auto"`` fits the Huber loss with threshold
    h = 0.4·``label_bound`` by objective perturbation (the public rule of
    :mod:`dperm.estimators._auto`: Lipschitz hR for every label, so no constraint
    set; identical to least squares on residuals below h).
    ``mechanism="adassp"`` is adaptive sufficient-statistics
    perturbation (Wang 2018, Algorithm 2; :mod:`dperm.algorithms.ssp`): noisy
    XᵀX, Xᵀy and λ_min, an adaptive ridge, a PSD-safe solve, the intercept
    unpenalized; it needs only the public bounds ``data_norm`` and
    ``label_bound`` (``alpha`` adds a public ridge nΛ; "auto" = 0).  "ssp" is
    the non-adaptive variant.  "tukey" is the bound-free Tukey-depth mechanism
    (Amin et al. 2023, Algorithm 1; :mod:`dperm.algorithms.tukey_regression`):
    least squares on m = n/(2p) disjoint blocks, a propose-test-release check and
    an exponential mechanism over the approximate Tukey depth of the m models; it
    uses no bound (rows are still clipped to ``data_norm``, a per-record map), takes
    no ridge; when its test fails it releases the zero model with a
    ``UserWarning``, and when too few rows make the test hopeless it refuses before
    reading the data (InvalidPrivacyParameter).  The ERM mechanisms ("objective", "output", …)
    minimize (1/n)Σ (⟨θ, xᵢ⟩ − yᵢ)²/2 + (Λ/2)‖θ‖² over a bounded convex set C;
    the squared loss is Lipschitz only on a bounded domain
    (L = R(R·radius + label_bound)), so without ``constraint`` /
    ``constraint_radius`` they use the ℓ2 ball of the public radius
    :func:`default_constraint_radius` (d·label_bound/R).  Targets must satisfy
    |y| ≤ ``label_bound`` (a public bound; LabelError otherwise — clip them to
    the bound first).  Neighbouring relation: replace-one (n public).
    """

    def _make_loss(self):
        return Squared(label_bound=check_positive(self.label_bound, "label_bound"))

    _auto_task = "least-squares"
    _relaxed_prior = True

    def _auto_label_bound(self):
        return check_positive(self.label_bound, "label_bound")

    def _needs_radius(self) -> bool:
        """The squared loss with a mechanism whose proof needs a Lipschitz constant
        (not the Huber surrogate of mechanism="auto", Lipschitz for every label)."""
        return self._mechanism() in _NEEDS_RADIUS and self._auto_setting("loss") != "huber"

    def _resolve_constraint(self, d_aug: int):
        if self.constraint == "none" and self._needs_radius():
            raise InvalidPrivacyParameter(
                f"mechanism {self._mechanism()!r} needs a bounded domain for the squared loss "
                "(L = R(R·constraint_radius + label_bound)): constraint='none' is not "
                "possible; give constraint='l2' with constraint_radius, or leave both None "
                "for the public default radius, or use mechanism='adassp'"
            )
        c = super()._resolve_constraint(d_aug)
        if c is None and self.constraint is None and self._needs_radius():
            r = default_constraint_radius(self.label_bound, _design_norm(self), d_aug)
            return get_constraint("l2", r)
        return c

    def _encode_targets(self, y):
        y = float_labels(y)
        bound = check_positive(self.label_bound, "label_bound")
        if y.size and np.max(np.abs(y)) > bound:
            # no data-dependent number in the message (the largest |y| is a record's value)
            raise LabelError(
                f"targets must satisfy |y| ≤ label_bound={bound:g}; some targets exceed it "
                "(clip y to the public bound first)"
            )
        return [y]

    def _finish_shapes(self):
        self.coef_ = self.coef_.ravel()
        self.intercept_ = float(self.intercept_[0])

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predicted targets, shape (n_samples,)."""
        return self._linear_scores(X)
