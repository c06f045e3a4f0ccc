"""Named private regressors (scikit-learn API): Lasso, elastic net, quantile, Huber.

Thin adapters like every dperm estimator (:mod:`dperm.estimators._base`): they
choose the loss, the penalty and the default mechanism, and the registered
mechanism does all privacy calibration.  Neighbouring relation: replace-one
(n public).  ``score`` is the coefficient of determination R², as in
scikit-learn (``QuantileRegressor`` and ``HuberRegressor`` included).

Ridge needs no class of its own: :class:`~dperm.estimators.DPLinearRegression`
with ``alpha`` = Λ adds the public ridge nΛ to AdaSSP (or the ℓ2 term
(Λ/2)‖θ‖² to the ERM mechanisms).

Mechanism choices
-----------------
* :class:`DPLasso` — ``"frank-wolfe"`` (default): private Frank-Wolfe over the
  ℓ1 ball (Talwar, Thakurta, Zhang 2015, the constrained Lasso; its privacy
  needs only the ℓ∞-Lipschitz constant, dimension-free up to log d), or
  ``"objective"``: objective perturbation of the penalized Lasso
  (1/2n)‖Xθ − y‖² + α‖θ‖₁ (Kifer, Smith, Thakurta 2012: a convex, possibly
  non-smooth regularizer is allowed) over the ℓ2 ball of the public default
  radius, since the squared loss is Lipschitz only on a bounded set.
* :class:`DPElasticNet` — objective perturbation with the penalty
  α(ρ‖θ‖₁ + (1 − ρ)/2 ‖θ‖²).
* :class:`DPQuantileRegressor` — the pinball loss is Lipschitz
  (L = max(τ, 1 − τ)R for *any* label) but not differentiable, so objective
  perturbation (which needs β < ∞) and AMP do not apply; ``"dp-gd-avg"``
  (noisy full-batch projected subgradient descent, clipped at L so clipping
  never binds, returning the averaged iterate, which is what converges for
  non-smooth losses; its privacy proof uses only the per-example sensitivity,
  not smoothness) is the default; ``"dp-gd"`` and ``"dp-sgd"`` also work.
* :class:`DPHuberRegressor` — the Huber loss is smooth (β = R²) and
  Lipschitz (L = hR) for every label, so objective perturbation applies with
  no label bound and no constraint set.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_positive
from ..constraints import get_constraint
from ..design import float_labels
from ..losses import Huber, Quantile
from ._base import DPLinearModelBase
from .linear import DPLinearRegression, _design_norm, default_constraint_radius

__all__ = ["DPElasticNet", "DPHuberRegressor", "DPLasso", "DPQuantileRegressor"]

_COMMON = """
    epsilon : float > 0, default=1.0
        Privacy budget ε of the fit.
    delta : float in [0, 1) or None, default=None
        δ; None means 1/n² (n = number of training rows, public).
    data_norm : float > 0, default=1.0
        Public bound R on ‖x‖₂; rows above it are clipped (counted in ``n_clipped_``).
    fit_intercept : bool, default=True
    intercept_scaling : float > 0, default=0.5
        The constant of the intercept column (see :mod:`dperm.estimators._base`).
    random_state : None, int or numpy Generator, default=None
        None draws fresh OS entropy.
"""

_ATTRIBUTES = """
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    epsilon_, delta_, neighbouring_, dp_event_, n_features_in_
        The certified (ε, δ), the relation ("replace-one") and the event.
    n_clipped_, alpha_, data_norm_, diagnostics_
        As for :class:`~dperm.estimators.DPLogisticRegression`.
"""


class DPLasso(DPLinearRegression):
    """Differentially private Lasso (full docstring below)."""

    __doc__ = f"""Differentially private Lasso (ℓ1-constrained or ℓ1-penalized least squares).

    ``mechanism="frank-wolfe"`` (default) minimizes (1/2n)‖Xθ − y‖² over the
    ℓ1 ball ‖θ‖₁ ≤ ``constraint_radius`` (default: the public rule
    :func:`~dperm.estimators.linear.default_constraint_radius`, d·B/R) by private
    Frank-Wolfe; ``alpha`` is then unused.  ``mechanism="objective"``
    minimizes (1/2n)‖Xθ − y‖² + α‖θ‖₁ by objective perturbation over the ℓ2
    ball of radius ``constraint_radius`` (same default rule).  Targets must
    satisfy |y| ≤ ``label_bound`` (public; LabelError otherwise).
    Neighbouring relation: replace-one.

    Parameters
    ----------
    alpha : float ≥ 0 or "auto", default="auto"
        ℓ1 weight α of the penalized form ("objective"); "auto" is the
        mechanism's public rule.
    label_bound : float > 0, default=1.0
        Public bound B on |y|.
    mechanism : {{"frank-wolfe", "objective"}}, default="frank-wolfe"
    constraint_radius : float > 0 or None, default=None
        Radius of the ℓ1 ball (Frank-Wolfe) or ℓ2 ball (objective); None = d·B/R.
    tol, max_iter : solver tolerance and iteration / step cap.
    accountant : str or None
        Frank-Wolfe's per-step calibration (default "optimal").{_COMMON}{_ATTRIBUTES}"""

    l1_ratio = 1.0
    constraint = None
    noise = "auto"
    epochs = batch_size = learning_rate = clipping_norm = noise_multiplier = None
    verbose = False

    def __init__(
        self,
        *,
        alpha="auto",
        label_bound=1.0,
        epsilon=1.0,
        delta=None,
        mechanism="frank-wolfe",
        data_norm=1.0,
        constraint_radius=None,
        fit_intercept=True,
        intercept_scaling=0.5,
        tol=1e-10,
        max_iter=10_000,
        accountant=None,
        random_state=None,
    ):
        self.alpha = alpha
        self.label_bound = label_bound
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.constraint_radius = constraint_radius
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.tol = tol
        self.max_iter = max_iter
        self.accountant = accountant
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        """Fit the private Lasso (see :meth:`DPLinearRegression.fit`)."""
        super().fit(X, y, sample_weight=sample_weight)
        if "n_steps" in self.diagnostics_:  # Frank-Wolfe reports its steps as n_steps
            self.n_iter_ = np.array([int(self.diagnostics_["n_steps"])])
        return self

    @property
    def penalty(self):
        # Frank-Wolfe: the constrained form (no penalty); otherwise the ℓ1 penalty
        return "none" if self.mechanism == "frank-wolfe" else "l1"

    def _resolve_constraint(self, d_aug: int):
        if self.mechanism != "frank-wolfe":
            return super()._resolve_constraint(d_aug)  # ℓ2 ball, default radius rule
        radius = self.constraint_radius
        if radius is None:
            radius = default_constraint_radius(self.label_bound, _design_norm(self), d_aug)
        return get_constraint("l1", check_positive(radius, "constraint_radius"))


class DPElasticNet(DPLinearRegression):
    """Differentially private elastic net (full docstring below)."""

    __doc__ = f"""Differentially private elastic net.

    Minimizes (1/2n)‖Xθ − y‖² + α(ρ‖θ‖₁ + (1 − ρ)/2 ‖θ‖²) (ρ = ``l1_ratio``,
    scikit-learn's parametrization) by objective perturbation over the ℓ2
    ball of radius ``constraint_radius`` (default d·B/R, a public rule).  The
    ℓ2 part adds strong convexity the privacy theorem uses.  Targets must
    satisfy |y| ≤ ``label_bound``.  Neighbouring relation: replace-one.

    Parameters
    ----------
    alpha : float ≥ 0 or "auto", default="auto"
    l1_ratio : float in [0, 1], default=0.5
    label_bound : float > 0, default=1.0
    mechanism : str, default="objective"
        "objective" or "output" (any registered mechanism that accepts a
        non-smooth regularizer).
    constraint_radius : float > 0 or None, default=None
    tol, max_iter : solver settings.{_COMMON}{_ATTRIBUTES}"""

    penalty = "elasticnet"
    constraint = None
    noise = "auto"
    epochs = batch_size = learning_rate = clipping_norm = noise_multiplier = accountant = None
    verbose = False

    def __init__(
        self,
        *,
        alpha="auto",
        l1_ratio=0.5,
        label_bound=1.0,
        epsilon=1.0,
        delta=None,
        mechanism="objective",
        data_norm=1.0,
        constraint_radius=None,
        fit_intercept=True,
        intercept_scaling=0.5,
        tol=1e-10,
        max_iter=10_000,
        random_state=None,
    ):
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.label_bound = label_bound
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.constraint_radius = constraint_radius
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state


class _LipschitzRegressor(DPLinearRegression):
    """Regression losses that are Lipschitz for every label (no label bound)."""

    penalty = "l2"
    l1_ratio = 0.5
    constraint = None
    noise = "auto"
    batch_size = clipping_norm = noise_multiplier = None
    verbose = False

    def _encode_targets(self, y):
        return [float_labels(y)]

    def _resolve_constraint(self, d_aug: int):
        return DPLinearModelBase._resolve_constraint(self, d_aug)


class DPQuantileRegressor(_LipschitzRegressor):
    """Differentially private quantile regression (full docstring below)."""

    __doc__ = f"""Differentially private linear quantile regression (pinball loss).

    Minimizes (1/n)Σ ρ_τ(yᵢ − ⟨θ, xᵢ⟩) + (Λ/2)‖θ‖² privately; τ = 0.5 (default)
    is median regression.  The pinball loss is Lipschitz (L = max(τ, 1 − τ)R)
    for every target, so no label bound enters the privacy proof; it is not
    differentiable, so the default mechanism is "dp-gd-avg" (noisy projected
    subgradient descent returning the averaged iterate, RDP-accounted) over the
    ℓ2 ball of radius ``constraint_radius``
    (default d·``label_scale``/R, a public rule that sets the step size
    D/(L√T)).  Neighbouring relation: replace-one.

    Parameters
    ----------
    quantile : float in (0, 1), default=0.5
    alpha : float ≥ 0 or "auto", default="auto"
        Λ ("auto": the mechanism's rule, 0 for dp-gd).
    label_scale : float > 0, default=1.0
        Public scale of |y| used only by the default radius rule (targets
        beyond it are neither refused nor clipped).
    mechanism : str, default="dp-gd-avg"
        "dp-gd-avg", "dp-gd", "dp-sgd" or "frank-wolfe" (non-smooth losses).
    constraint_radius : float > 0 or None, default=None
    epochs : int or None
        Number of DP-GD steps (None = the mechanism's default).
    learning_rate : float or None
    accountant : str or None
    tol, max_iter : solver settings.{_COMMON}{_ATTRIBUTES}"""

    def __init__(
        self,
        *,
        quantile=0.5,
        alpha="auto",
        label_scale=1.0,
        epsilon=1.0,
        delta=None,
        mechanism="dp-gd-avg",
        data_norm=1.0,
        constraint_radius=None,
        fit_intercept=True,
        intercept_scaling=0.5,
        epochs=None,
        learning_rate=None,
        accountant=None,
        tol=1e-10,
        max_iter=10_000,
        random_state=None,
    ):
        self.quantile = quantile
        self.alpha = alpha
        self.label_scale = label_scale
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.constraint_radius = constraint_radius
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.accountant = accountant
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _make_loss(self):
        return Quantile(self.quantile)

    def _resolve_constraint(self, d_aug: int):
        radius = self.constraint_radius
        if radius is None:
            scale = check_positive(self.label_scale, "label_scale")
            radius = default_constraint_radius(scale, _design_norm(self), d_aug)
        kind = "l1" if self.mechanism == "frank-wolfe" else "l2"  # Frank-Wolfe: a polytope
        return get_constraint(kind, check_positive(radius, "constraint_radius"))


class DPHuberRegressor(_LipschitzRegressor):
    """Differentially private Huber regression (full docstring below)."""

    __doc__ = f"""Differentially private robust regression with the Huber loss.

    Minimizes (1/n)Σ H_h(⟨θ, xᵢ⟩ − yᵢ) + (Λ/2)‖θ‖² privately, H_h the Huber
    loss with threshold h (:class:`~dperm.losses.Huber`): smooth (β = R²)
    and Lipschitz (L = hR) for every target, so objective perturbation
    (default) applies with no label bound and no constraint set.  h is a
    public constant in the units of y (scikit-learn rescales its ``epsilon``
    by a scale fitted on the data, which would need budget).  Neighbouring
    relation: replace-one.

    Parameters
    ----------
    threshold : float > 0, default=1.0
        h, where the loss turns from quadratic to linear.
    alpha : float ≥ 0 or "auto", default="auto"
    mechanism : str, default="objective"
        Any registered mechanism for smooth Lipschitz losses ("objective",
        "output", "amp", "dp-gd", …).
    constraint_radius : float > 0 or None, default=None
        Optional ℓ2 ball (None: unconstrained).
    tol, max_iter : solver settings.
    epochs, learning_rate, accountant : gradient-perturbation settings.{_COMMON}{_ATTRIBUTES}"""

    def __init__(
        self,
        *,
        threshold=1.0,
        alpha="auto",
        epsilon=1.0,
        delta=None,
        mechanism="objective",
        data_norm=1.0,
        constraint_radius=None,
        fit_intercept=True,
        intercept_scaling=0.5,
        epochs=None,
        learning_rate=None,
        accountant=None,
        tol=1e-10,
        max_iter=10_000,
        random_state=None,
    ):
        self.threshold = threshold
        self.alpha = alpha
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.constraint_radius = constraint_radius
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.accountant = accountant
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _make_loss(self):
        return Huber(h=self.threshold)
