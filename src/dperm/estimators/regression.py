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
* :class:`DPLasso` — ``"auto"`` (default): objective perturbation of the Huber
  loss (threshold 0.4·``label_bound``) + α‖θ‖₁, with no constraint set (the public
  rule of :mod:`dperm.estimators._auto`; Kifer, Smith, Thakurta 2012: a convex,
  possibly non-smooth regularizer is allowed); ``"frank-wolfe"``: private
  Frank-Wolfe over the ℓ1 ball (Talwar, Thakurta, Zhang 2015, the constrained
  Lasso; its privacy needs only the ℓ∞-Lipschitz constant, dimension-free up to
  log d); or ``"objective"``: objective perturbation of the penalized Lasso
  (1/2n)‖Xθ − y‖² + α‖θ‖₁ over the ℓ2 ball of the public default radius, since
  the squared loss is Lipschitz only on a bounded set.
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

import warnings
from typing import Self

import numpy as np

from .._parameters import positive, unit_interval, validate_params
from .._validation import check_positive
from ..constraints import get_constraint
from ..design import float_labels
from ..exceptions import InvalidPrivacyParameter
from ..losses import Huber, Quantile
from ._base import DPLinearModelBase
from ._params import (
    INTERCEPT,
    PRIVACY,
    REGRESSOR_ATTRIBUTES,
    SOLVER,
    Param,
    ParamDoc,
    Spec,
    estimator_parameters,
)
from ._types import ArrayLike, MatrixLike
from .linear import DPLinearRegression, _design_norm, default_constraint_radius

__all__ = ["DPElasticNet", "DPHuberRegressor", "DPLasso", "DPQuantileRegressor"]


class _NamedRegressor(DPLinearRegression):
    """The settings a named regressor does not expose, fixed as class attributes
    (its parameters, stored by ``__init__``, take precedence)."""

    penalty = "l2"
    l1_ratio = 0.5
    constraint = None
    noise = "auto"
    epochs = batch_size = learning_rate = clipping_norm = noise_multiplier = accountant = None
    verbose = warm_start = False


@estimator_parameters(
    *("alpha", "label_bound", *PRIVACY, "constraint_radius", *INTERCEPT, *SOLVER),
    *("accountant", "random_state"),
    attributes=REGRESSOR_ATTRIBUTES,
    alpha=ParamDoc(
        'float ≥ 0 or "auto"',
        """ℓ1 weight α of the penalized form ("objective"); "auto" is the
        mechanism's public rule.""",
    ),
    mechanism=ParamDoc(
        '{"auto", "frank-wolfe", "objective"}',
        """"auto" (default): objective perturbation of the Huber loss + α‖θ‖₁ (the
        public rule of :mod:`dperm.estimators._auto`); "frank-wolfe": the ℓ1-ball
        constrained Lasso; "objective": the penalized squared loss over an ℓ2 ball.""",
    ),
    constraint_radius=ParamDoc(
        "float > 0 or None",
        "Radius of the ℓ1 ball (Frank-Wolfe) or ℓ2 ball (objective); None = d·B/R.",
    ),
    accountant=ParamDoc("str or None", 'Frank-Wolfe\'s per-step calibration (default "optimal").'),
)
class DPLasso(_NamedRegressor):
    """Differentially private Lasso (ℓ1-constrained or ℓ1-penalized least squares).

    ``mechanism="auto"`` (default) minimizes the Huber loss (threshold
    0.4·``label_bound``) + α‖θ‖₁ by objective perturbation, with no constraint
    set (the public rule of :mod:`dperm.estimators._auto`).
    ``mechanism="frank-wolfe"`` minimizes (1/2n)‖Xθ − y‖² over the
    ℓ1 ball ‖θ‖₁ ≤ ``constraint_radius`` (default: the public rule
    :func:`~dperm.estimators.linear.default_constraint_radius`, d·B/R) by private
    Frank-Wolfe; ``alpha`` is then unused.  ``mechanism="objective"``
    minimizes (1/2n)‖Xθ − y‖² + α‖θ‖₁ by objective perturbation over the ℓ2
    ball of radius ``constraint_radius`` (same default rule).  Targets must
    satisfy |y| ≤ ``label_bound`` (public; LabelError otherwise).
    Neighbouring relation: replace-one.
    """

    l1_ratio = 1.0

    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the private Lasso (see :meth:`DPLinearRegression.fit`)."""
        super().fit(X, y, sample_weight=sample_weight)
        if "n_steps" in self.diagnostics_:  # Frank-Wolfe reports its steps as n_steps
            self.n_iter_ = np.array([int(self.diagnostics_["n_steps"])])
        return self

    @property
    def penalty(self):
        # Frank-Wolfe: the constrained form (no penalty); otherwise the ℓ1 penalty
        return "none" if self._mechanism() == "frank-wolfe" else "l1"

    _auto_task = "lasso"

    def _resolve_constraint(self, d_aug: int):
        if self._mechanism() != "frank-wolfe":
            return super()._resolve_constraint(d_aug)  # ℓ2 ball, default radius rule
        radius = self.constraint_radius
        if radius is None:
            radius = default_constraint_radius(self.label_bound, _design_norm(self), d_aug)
        return get_constraint("l1", check_positive(radius, "constraint_radius"))


@estimator_parameters(
    *("alpha", "l1_ratio", "label_bound", *PRIVACY, "constraint_radius", *INTERCEPT),
    *(*SOLVER, "random_state"),
    attributes=REGRESSOR_ATTRIBUTES,
    alpha=ParamDoc(
        'float ≥ 0 or "auto"',
        """α of the penalty α(ρ‖θ‖₁ + (1 − ρ)/2 ‖θ‖²); "auto" is the mechanism's
        public rule; the value used is ``alpha_``.""",
    ),
    mechanism=ParamDoc(
        "str",
        """"auto" (default: objective perturbation of the Huber loss, the public
        rule of :mod:`dperm.estimators._auto`), "objective" or "output" (any
        registered mechanism that accepts a non-smooth regularizer).""",
    ),
    constraint_radius=ParamDoc(
        "float > 0 or None", "Radius of the ℓ2 ball; None = d·B/R (a public rule)."
    ),
)
class DPElasticNet(_NamedRegressor):
    """Differentially private elastic net.

    Minimizes (1/2n)‖Xθ − y‖² + α(ρ‖θ‖₁ + (1 − ρ)/2 ‖θ‖²) (ρ = ``l1_ratio``,
    scikit-learn's parametrization) by objective perturbation over the ℓ2
    ball of radius ``constraint_radius`` (default d·B/R, a public rule).  With
    ``mechanism="auto"`` (default) the squared loss is replaced by the Huber loss
    with threshold 0.4·``label_bound`` (Lipschitz for every label, no constraint
    set; :mod:`dperm.estimators._auto`).  The
    ℓ2 part adds strong convexity the privacy theorem uses.  Targets must
    satisfy |y| ≤ ``label_bound``.  Neighbouring relation: replace-one.
    """

    penalty = "elasticnet"
    _auto_task = "elasticnet"


#: the optional public label scale of the quantile regressor (``label_bound`` and its
#: deprecated name ``label_scale``)
_LABEL_SCALE = Spec(None, "float | None", [None, positive()])


class _LipschitzRegressor(_NamedRegressor):
    """Regression losses that are Lipschitz for every label (no label bound)."""

    def _encode_targets(self, y):
        return [float_labels(y)]

    def _auto_label_bound(self):
        return None  # Lipschitz for every label: the rule needs no bound

    def _resolve_constraint(self, d_aug: int):
        return DPLinearModelBase._resolve_constraint(self, d_aug)


@estimator_parameters(
    *("quantile", "alpha", "label_bound", *PRIVACY, "constraint_radius", *INTERCEPT),
    *("epochs", "learning_rate", "accountant", "warm_start", *SOLVER),
    *("random_state", "label_scale"),
    attributes=REGRESSOR_ATTRIBUTES,
    quantile=Param(Spec(0.5, "float", [unit_interval("neither")]), ParamDoc("float in (0, 1)")),
    alpha=ParamDoc('float ≥ 0 or "auto"', 'Λ ("auto": the mechanism\'s rule, 0 for dp-gd).'),
    label_bound=Param(
        _LABEL_SCALE,
        ParamDoc(
            "float > 0 or None",
            """Public scale B of |y| used only by the default radius rule d·B/R
            (None: B = 5, the auto rule's public label scale, with mechanism="auto";
            B = 1 with a named mechanism); targets beyond it are neither refused nor clipped (the
            pinball loss is Lipschitz for every label).""",
        ),
    ),
    mechanism=ParamDoc(
        "str", '"auto" (default: "dp-gd-avg"), "dp-gd-avg", "dp-gd", "dp-sgd" or "frank-wolfe".'
    ),
    constraint_radius=ParamDoc(
        "float > 0 or None",
        """Radius of the ℓ2 ball (of the ℓ1 ball for "frank-wolfe"); None =
        d·label_bound/R (a public rule).""",
    ),
    epochs=ParamDoc("int or None", "Number of DP-GD steps (None = the mechanism's default)."),
    label_scale=Param(
        _LABEL_SCALE,
        ParamDoc(
            "float > 0 or None",
            """Deprecated: the former name of ``label_bound`` (DeprecationWarning on
            fit; InvalidPrivacyParameter when both are given).""",
        ),
    ),
)
class DPQuantileRegressor(_LipschitzRegressor):
    """Differentially private linear quantile regression (pinball loss).

    Minimizes (1/n)Σ ρ_τ(yᵢ − ⟨θ, xᵢ⟩) + (Λ/2)‖θ‖² privately; τ = 0.5 (default)
    is median regression.  The pinball loss is Lipschitz (L = max(τ, 1 − τ)R)
    for every target, so no label bound enters the privacy proof; it is not
    differentiable, so ``mechanism="auto"`` picks "dp-gd-avg" (noisy projected
    subgradient descent returning the averaged iterate, RDP-accounted) over the
    ℓ2 ball of radius ``constraint_radius``
    (default d·``label_bound``/R, a public rule that sets the step size
    D/(L√T)).  Neighbouring relation: replace-one.
    """

    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the private quantile regression (see :meth:`DPLinearRegression.fit`)."""
        validate_params(self)  # the table first, then the deprecated name
        if self.label_scale is not None:  # the deprecated name, checked before the data
            if self.label_bound is not None:
                raise InvalidPrivacyParameter(
                    "label_scale is the deprecated name of label_bound: give label_bound "
                    f"only, got label_bound={self.label_bound!r} and "
                    f"label_scale={self.label_scale!r}"
                )
            warnings.warn(
                "DPQuantileRegressor(label_scale=...) is deprecated: use label_bound=..., "
                "the name every dperm regressor uses",
                DeprecationWarning,
                stacklevel=2,
            )
        return super().fit(X, y, sample_weight=sample_weight)

    _auto_task = "quantile"

    def _auto_label_bound(self):
        bound = self.label_bound if self.label_scale is None else self.label_scale
        return None if bound is None else float(bound)

    def _make_loss(self):
        return Quantile(self.quantile)

    def _resolve_constraint(self, d_aug: int):
        radius = self.constraint_radius
        if radius is None:
            # B: label_bound, or the deprecated label_scale (fit refuses both), else the
            # auto rule's public label scale (QUANTILE_SCALE), else 1
            name = "label_bound" if self.label_scale is None else "label_scale"
            scale = getattr(self, name)
            if scale is None:
                scale = self._auto_setting("label_scale", 1.0)
            scale = check_positive(scale, name)
            radius = default_constraint_radius(scale, _design_norm(self), d_aug)
        kind = "l1" if self._mechanism() == "frank-wolfe" else "l2"  # Frank-Wolfe: a polytope
        return get_constraint(kind, check_positive(radius, "constraint_radius"))


@estimator_parameters(
    *("threshold", "alpha", *PRIVACY, "constraint_radius", *INTERCEPT),
    *("epochs", "learning_rate", "accountant", "warm_start", *SOLVER, "random_state"),
    attributes=REGRESSOR_ATTRIBUTES,
    threshold=Param(
        Spec(1.0, "float", [positive()]),
        ParamDoc("float > 0", "h, where the loss turns from quadratic to linear."),
    ),
    mechanism=ParamDoc(
        "str",
        """Any registered mechanism for smooth Lipschitz losses ("objective",
        "output", "amp", "dp-gd", …).""",
    ),
    constraint_radius=ParamDoc("float > 0 or None", "Optional ℓ2 ball (None: unconstrained)."),
)
class DPHuberRegressor(_LipschitzRegressor):
    """Differentially private robust regression with the Huber loss.

    Minimizes (1/n)Σ H_h(⟨θ, xᵢ⟩ − yᵢ) + (Λ/2)‖θ‖² privately, H_h the Huber
    loss with threshold h (:class:`~dperm.losses.Huber`): smooth (β = R²)
    and Lipschitz (L = hR) for every target, so objective perturbation
    (default) applies with no label bound and no constraint set.  h is a
    public constant in the units of y (scikit-learn rescales its ``epsilon``
    by a scale fitted on the data, which would need budget).  Neighbouring
    relation: replace-one.
    """

    _auto_task = "huber"

    def _make_loss(self):
        return Huber(h=self.threshold)
