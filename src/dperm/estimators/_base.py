"""Common machinery of dperm's scikit-learn estimators (thin adapters, no privacy logic).

``fit`` validates (float32 and float64 input kept as they are, CSR kept sparse),
builds the :class:`~dperm.design.Design` of X — rows clipped to ``data_norm`` by a
per-row scale (counted), the intercept an implicit public column, X never
copied — resolves Λ, the regularizer and the constraint, and calls the
registered mechanism (:mod:`dperm.estimators._mechanisms`) once per binary
problem with its share of the budget.  All privacy calibration lives in the
algorithm modules.

Intercept.  With ``fit_intercept=True`` every (already clipped) row gets a
constant feature of value ``intercept_scaling`` = s — implicitly, inside the
Design's products (``docs/data_path.md``); its coefficient times s is
``intercept_``.  The augmented rows satisfy
‖(x, s)‖ ≤ √(data_norm² + s²) — a public bound
(:func:`~dperm.design.augmented_bound`), used as the effective ``data_norm_``
of the mechanism — so no row is clipped because of the intercept, and the
intercept is regularized like every other coefficient
(the privacy proofs need the strong convexity in every direction).  A
:class:`~dperm.norms.Norm` given as ``penalty=`` is the exception: it is defined on
the d features and acts on the first d coordinates only (value, prox, LMO,
greedy vertex; :func:`feature_norm`), so the intercept is not sparsified; the
privacy proofs only need the (Λ/2)‖θ‖² term to be strongly convex, which it
still is in every direction.

Sample weights.  ``fit(X, y, sample_weight=w)`` with public bound wᵢ ∈ [0, 1]
minimizes (1/n)Σ wᵢ ℓ(θ; xᵢ, yᵢ) + penalty.  Privacy argument (replace-one, n
public): the weight is part of the record, zᵢ = (xᵢ, yᵢ, wᵢ), and the per-record
loss ℓ_w(θ; z) = w·φ(⟨θ, x⟩, y) with 0 ≤ w ≤ 1 is convex, L-Lipschitz,
β-smooth and of curvature ≤ c whenever φ(⟨θ, ·⟩, y) is (every constant is
multiplied by w ≤ 1).  Every mechanism in :data:`_SAMPLE_WEIGHT_MECHANISMS`
uses the loss only through these constants and its per-record values and
derivatives, so its privacy proof applies verbatim to ℓ_w with the *same*
calibration (noise scale unchanged); the weights scale the per-record
derivatives inside the loss (:class:`_WeightedLoss`), X is never copied.  For
DP-GD the clipped per-record gradient is clip_C(wᵢ sᵢ xᵢ): each record still
moves the clipped sum by at most C (2C under replace-one), so the calibration
is unchanged (when C < L it is the weighted gradient that is clipped).
Mechanisms that read X or y outside the loss (SSP's XᵀX, Xᵀy), that sample
rows (DP-SGD) or that rely on other properties are refused.
"""

from __future__ import annotations

import math
import warnings
from typing import Self

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._parameters import validate_params
from .._validation import (
    check_data_norm,
    check_delta_size,
    check_epsilon,
    check_nonnegative,
    check_positive,
)
from ..accounting.active import accounted_fit, charge, default_delta, releasing
from ..accounting.events import REPLACE_ONE, Composed, DpEvent, EpsilonDelta, SelfComposed
from ..constraints import Constraint, get_constraint
from ..design import (
    Design,
    as_design,
    augmented_bound,
    check_sample_weight,
    class_indices,
    encode_class_targets,
    margins,
    validate_estimator_input,
)
from ..exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    PrivacyLeakWarning,
)
from ..losses.base import GLMLoss
from ..losses.softmax import Softmax
from ..norms import GroupLinfNorm, L1Norm, Norm, SubmodularNorm
from ..regularizers import L1
from ._auto import AUTO, AutoChoice, auto_choice
from ._mechanisms import auto_alpha, get_mechanism
from ._types import ArrayLike, MatrixLike
from ._warm_start import fit_rng, warm_start

__all__ = [
    "DPLinearClassifierBase",
    "DPLinearModelBase",
    "feature_norm",
    "sklearn_expected_failed_checks",
]

#: mechanisms that fit the multinomial (softmax) model as one problem
_MULTINOMIAL_MECHANISMS = ("dp-sgd", "dp-gd", "dp-sgd-single", "objective", "output", "amp")

#: mechanisms whose privacy proof covers per-record weights in [0, 1] (module docstring):
#: they touch the data only through the loss's values/derivatives of full-batch
#: evaluations and its public constants L, β, c
_SAMPLE_WEIGHT_MECHANISMS = (
    "objective",
    "output",
    "structured-output",
    "dual-frank-wolfe",
    "frank-wolfe",
    "dp-gd",
    "dp-gd-avg",
)


def _validate(
    estimator, X, y=None, *, reset: bool, y_numeric: bool = False, finite_check: bool = True
):
    """The estimators' input validation, by the backend of X (:mod:`dperm.design`):
    scikit-learn's rules and messages, every error a dperm InvalidDataError;
    float32/float64 arrays and CSR matrices are returned without a copy.
    ``finite_check=False`` leaves the NaN/inf check of X to the caller (``fit``: the
    row-norm pass of the Design raises InvalidDataError, one pass over X instead
    of two)."""
    return validate_estimator_input(
        estimator, X, y, reset=reset, y_numeric=y_numeric, finite_check=finite_check
    )


def _refuse_mostly_clipped(n_clipped: int, n: int, data_norm) -> None:
    """Refuse a fit where more than half of the rows exceed the public bound ``data_norm``.

    Clipping most rows to the bound keeps the privacy guarantee but leaves a model that
    sees mostly the directions of X, not its scale: raw features with the default
    ``data_norm=1`` (e.g. scikit-learn's ``load_breast_cancer()``: every row clipped,
    accuracy below the majority class).  dperm refuses instead of fitting such a model
    silently.

    **A non-private, data-dependent check (decided in issue #32).**  Like
    ``n_clipped_``, it reads the row norms without noise.  What it leaks: one bit per
    call — whether the median row norm exceeds ``data_norm`` — to whoever sees that
    the fit was refused; nothing is charged and no model is released.  The bit is
    outside the (ε, δ) guarantee and is not accounted: repeated calls with different
    ``data_norm`` values would reveal the median row norm to such an observer.  It is
    a usability guard for the data owner, so it stays exact: a private version (a
    noisy count) would charge part of every fit's budget, change every estimator's
    privacy event, and still not make a useless model useful.  Where refusals are
    visible to others, pass a public ``data_norm`` that bounds the rows (or scale by
    public bounds first) and no row is ever over it (``docs/choosing_a_mechanism.md``,
    "Raw data").

    Raises
    ------
    InvalidDataError
        Naming the fixes: an honest public ``data_norm``, or a public scaling first.
    """
    if 2 * int(n_clipped) > int(n):
        raise InvalidDataError(
            f"more than half of the rows have a norm above data_norm={data_norm!r}, so the "
            "fit would clip most of them and return a near-useless model; scale X by "
            "public bounds first — make_pipeline(PublicMinMaxScaler(bounds, "
            "feature_range=(-1, 1)), RowNormalizer(mode='sphere'), estimator) from "
            "dperm.preprocessing (centered at the public midpoints, unit rows), or "
            "DPStandardScaler — or pass data_norm= a public bound on the row norm of your "
            "features"
        )


class _WeightedLoss(GLMLoss):
    """ℓ_w(θ; xᵢ, yᵢ) = wᵢ·φ(⟨θ, xᵢ⟩, yᵢ) with public-bounded weights wᵢ ∈ [0, 1]
    (module docstring): values and derivatives are those of ``base`` times w;
    ``lipschitz``, ``smoothness`` and ``curvature`` are ``base``'s (valid upper
    bounds since w ≤ 1).  Evaluations must be on all n rows in order (a
    subsample would misalign w): a shape mismatch raises, it never
    silently reweights."""

    def __init__(self, base: GLMLoss, weight: np.ndarray):
        self.base = base
        self.weight = weight
        self.name = base.name
        self.smooth = base.smooth
        self.classification = base.classification

    def __getattr__(self, item):  # public bounds of the base loss (label_bound, …)
        if item in ("base", "weight"):
            raise AttributeError(item)
        return getattr(self.base, item)

    def _design_terms(self):
        # the fused passes of a Design evaluate the base loss block by block and
        # apply the weights themselves (X is never copied, weights stay aligned)
        return self.base, self.weight

    def _w(self, z) -> np.ndarray:
        if np.shape(z)[0] != self.weight.shape[0]:
            raise InvalidDataError(
                f"sample_weight has {self.weight.shape[0]} entries but the mechanism "
                f"evaluated the loss on {np.shape(z)[0]} rows"
            )
        return self.weight

    def pointwise(self, z, y):
        return self._w(z) * self.base.pointwise(z, y)

    def derivative(self, z, y):
        return self._w(z) * self.base.derivative(z, y)

    def second_derivative(self, z, y):
        return self._w(z) * self.base.second_derivative(z, y)

    def check_labels(self, y):
        return self.base.check_labels(y)

    def lipschitz(self, data_norm, **bounds):
        return self.base.lipschitz(data_norm, **bounds)

    def smoothness(self, data_norm, **bounds):
        return self.base.smoothness(data_norm, **bounds)

    @property
    def curvature(self):
        return self.base.curvature

    @property
    def margin_bound(self):
        return self.base.margin_bound

    def __repr__(self) -> str:
        return f"Weighted({self.base!r})"

    # a weighted loss holds an array: identity, not GLMLoss's equality of fields
    __eq__ = object.__eq__
    __hash__ = object.__hash__


def _check_sample_weight(sample_weight, n: int, mechanism):
    """``sample_weight`` as a float array of shape (n,) in [0, 1] (checked by its
    backend, :func:`dperm.design.check_sample_weight`), or None.

    Raises
    ------
    InvalidDataError
        A mechanism whose privacy proof does not cover weights, or bad weights.
    """
    if sample_weight is None:
        return None
    if mechanism not in _SAMPLE_WEIGHT_MECHANISMS:
        raise InvalidDataError(
            f"sample_weight is not supported with mechanism={mechanism!r} (its privacy "
            f"proof is not shown to cover weighted records); supported: "
            f"{list(_SAMPLE_WEIGHT_MECHANISMS)}"
        )
    return check_sample_weight(sample_weight, n)


def sklearn_expected_failed_checks(estimator) -> dict[str, str]:
    """The scikit-learn estimator checks a dperm estimator fails by design, for
    ``parametrize_with_checks(..., expected_failed_checks=...)``: weights are
    refused outside the public bound [0, 1] (the checks fit with weights 2 or 3,
    or all zero — an error there would itself depend on the private weights),
    and mechanisms without a weighted privacy proof refuse ``sample_weight``.  Every
    other check passes, given a public ``data_norm`` that bounds the checks' rows
    (the tests declare ``data_norm=200``: some checks fit rows of norm ≈ 141, and a
    fit where most rows exceed ``data_norm`` is refused, :func:`_refuse_mostly_clipped`)."""
    mechanism = estimator.mechanism
    names = [
        "check_sample_weights_list",
        "check_sample_weights_not_overwritten",
        "check_sample_weight_equivalence_on_dense_data",
        "check_sample_weight_equivalence_on_sparse_data",
        "check_all_zero_sample_weights_error",
    ]
    # "auto" chooses a mechanism that supports weights when they are passed
    if mechanism != AUTO and mechanism not in _SAMPLE_WEIGHT_MECHANISMS:
        names += [
            "check_sample_weights_pandas_series",
            "check_sample_weights_not_an_array",
            "check_sample_weights_shape",
        ]
    reason = "sample_weight is bounded to [0, 1] (public bound) or refused by the mechanism"
    return dict.fromkeys(names, reason)


# ----------------------------------------------------------------- norm on the features
class _FeatureNormMixin:
    """Ω'(θ) = Ω(θ[:d]) on R^{d+1}: the norm ``inner`` on the d features, the
    last (intercept) coordinate unpenalized.  A semi-norm: its unit ball is
    unbounded along the intercept, its dual set is {s : s_{d} = 0, Ω*(s[:d]) ≤ 1}."""

    inner: Norm

    def _pad(self, v, last: float = 0.0) -> np.ndarray:
        return np.append(v, last)

    def __repr__(self) -> str:
        return f"FeatureNorm({self.inner!r}, alpha={self.alpha!r})"

    def norm(self, theta) -> float:
        return float(self.inner.norm(self._vec(theta)[:-1]))

    def dual_norm(self, s) -> float:
        s = self._vec(s)
        return float(self.inner.dual_norm(s[:-1])) if s[-1] == 0 else math.inf

    def lmo(self, g, radius: float = 1.0) -> np.ndarray:
        g = self._vec(g)
        if g[-1] != 0:
            raise InvalidDataError(
                "the unit ball of a norm that leaves the intercept unpenalized is "
                "unbounded along the intercept: no linear minimizer for g[-1] ≠ 0"
            )
        return self._pad(self.inner.lmo(g[:-1], radius))

    def prox(self, v, step: float) -> np.ndarray:
        v = self._vec(v)
        return self._pad(self.inner.scaled(self.alpha).prox(v[:-1], step), v[-1])

    def greedy_vertex(self, c) -> np.ndarray:
        return self._pad(self.inner.greedy_vertex(self._vec(c)[:-1]))

    def dual_ball_vertices(self) -> np.ndarray:
        V = self.inner.dual_ball_vertices()
        return np.hstack([V, np.zeros((V.shape[0], 1))])

    def unit_ball_l2_radius(self) -> float:
        return math.inf


class _FeatureNorm(_FeatureNormMixin, Norm):
    pass


class _FeatureSubmodularNorm(_FeatureNormMixin, SubmodularNorm):
    pass


class _FeatureGroupNorm(_FeatureNormMixin, GroupLinfNorm):
    pass


def feature_norm(norm: Norm, d_aug: int) -> Norm:
    """``norm`` (on d = d_aug − 1 features) extended to R^{d_aug} with the last
    (intercept) coordinate unpenalized, keeping ``norm.alpha``.

    The extension is a :class:`~dperm.norms.SubmodularNorm` of the set function
    F'(A) = F(A ∩ {0..d−1}) when ``norm`` is one (so the greedy vertex of the
    dual set has a 0 intercept entry), and a disjoint
    :class:`~dperm.norms.GroupLinfNorm` (ℓ1 = singleton groups) whose groups do
    not cover the intercept when ``norm`` is ℓ1 or disjoint group-ℓ∞ — the
    product vertex sets the private dual Frank-Wolfe samples from then have no
    block on the intercept, i.e. the dual constraint s_d = 0 of the unpenalized
    intercept.
    """
    d = norm.d
    if d_aug != d + 1:
        raise InvalidDataError(f"feature_norm extends d={d} to d+1, got d_aug={d_aug}")
    inner = norm.scaled(1.0)
    if type(norm) is L1Norm or (type(norm) is GroupLinfNorm and norm.disjoint):
        G = np.eye(d, dtype=bool) if type(norm) is L1Norm else norm.membership
        out = object.__new__(_FeatureGroupNorm)
        out.membership = np.hstack([G, np.zeros((G.shape[0], 1), dtype=bool)])
        out.disjoint = True
    elif isinstance(norm, SubmodularNorm):
        out = object.__new__(_FeatureSubmodularNorm)
    else:
        out = object.__new__(_FeatureNorm)
    out.inner = inner
    out.d = d_aug
    out.alpha = float(norm.alpha)
    if isinstance(out, SubmodularNorm):
        F = inner.F
        out.F = lambda mask: F(np.asarray(mask)[:-1])
        out._singles = np.append(inner._singles, 0.0)
    return out


class DPLinearModelBase(BaseEstimator):
    """Shared parameters and fit logic of the DP linear estimators (not public).

    Subclasses set ``_estimator_type``-style behaviour through
    :meth:`_make_loss`, :meth:`_encode_targets` and the sklearn mixins.
    """

    _is_classifier = False
    #: the Λ rules' prior margin grows with ε (regressors: the unregularized least
    #: squares is their ε → ∞ limit; :func:`dperm.losses.prior_margin`)
    _relaxed_prior = False

    # ----- hooks -------------------------------------------------------------------
    def _make_loss(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # ----- parameter validation ----------------------------------------------------
    def _check_params(self, n: int, d: int):
        """(ε, δ, R, s, effective row bound) for n rows of d features: the table's checks
        (:func:`dperm._parameters.validate_params`; also what :mod:`dperm.io` checks on
        load), then those that need n and d."""
        validate_params(self)
        epsilon = check_epsilon(self.epsilon)
        if self.delta is None:  # min(1/n², 1e-5), or a share of an active budget's remaining δ
            delta = default_delta(int(n))
        else:  # δ ≥ 1/n would be a void guarantee: refused (n public under replace-one)
            delta = check_delta_size(self.delta, int(n))
        data_norm = check_data_norm(self.data_norm)
        if isinstance(self.penalty, Norm) and self.penalty.d != d:
            raise InvalidDataError(
                f"penalty {self.penalty!r} is a norm on d={self.penalty.d} coordinates "
                f"but X has n_features={d}"
            )
        scaling = check_positive(self.intercept_scaling, "intercept_scaling")
        # the Design's public bound: the mechanisms' as_design(X, data_norm_) is a no-op
        eff_norm = augmented_bound(data_norm, scaling if self.fit_intercept else None)
        return epsilon, delta, data_norm, scaling, eff_norm

    def _resolve_alpha(self, n: int, d_aug: int, epsilon_per_call: float, eff_norm: float):
        if isinstance(self.alpha, str):  # "auto" (validate_params)
            return auto_alpha(
                self._mechanism(),
                n,
                d_aug,
                epsilon_per_call,
                eff_norm,
                relaxed=self._relaxed_prior,
            )
        return check_nonnegative(self.alpha, "alpha")

    def _resolve_penalty(self, alpha: float):
        """(Λ for the smooth ℓ2 term, non-smooth regularizer or None).

        A :class:`~dperm.norms.Norm` penalty Ω is the elastic-net form with ℓ1
        replaced by Ω: r(θ) = alpha·l1_ratio·Ω(θ) and Λ = alpha·(1 − l1_ratio)
        (the ℓ2 part some mechanisms need for strong convexity), with the
        intercept unpenalized by Ω (:func:`feature_norm`)."""
        if isinstance(self.penalty, Norm):
            ratio = float(self.l1_ratio)
            reg = self.penalty.scaled(alpha * ratio)
            if self.fit_intercept:
                reg = feature_norm(reg, reg.d + 1)
            return alpha * (1.0 - ratio), reg
        if self.penalty == "l2":
            return alpha, None
        if self.penalty == "none":
            return 0.0, None
        if self.penalty == "l1":
            return 0.0, L1(alpha)
        ratio = float(self.l1_ratio)
        return alpha * (1.0 - ratio), L1(alpha * ratio)

    def _resolve_constraint(self, d_aug: int) -> Constraint | None:
        c = self.constraint
        if isinstance(c, Constraint):
            return c
        if c is None and self.constraint_radius is None:
            return None
        name = "l2" if c is None else c
        radius = self.constraint_radius
        if name != "none":
            if radius is None:
                raise InvalidPrivacyParameter(
                    f"constraint={name!r} needs constraint_radius (a public bound), got None"
                )
            radius = check_positive(radius, "constraint_radius")
        return get_constraint(name, radius)

    # ----- data preparation --------------------------------------------------------
    def _design(self, X, *, warn: bool = True) -> tuple[Design, int]:
        """(Design, n_clipped): the rows clipped to ``data_norm`` by a per-row scale
        and the implicit intercept column ``intercept_scaling`` (public maps; X is
        referenced, never copied)."""
        scaling = float(self.intercept_scaling) if self.fit_intercept else None
        D = as_design(X, self.data_norm, intercept_scaling=scaling, warn=warn)
        return D, D.n_clipped

    # ----- fit ---------------------------------------------------------------------
    @accounted_fit  # reserve before the data is read, commit dp_event_ (or cancel)
    def fit(self, X: MatrixLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the private model.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            Rows with ‖x‖₂ > ``data_norm`` are clipped to ``data_norm`` (counted
            in ``n_clipped_``, with a :class:`~dperm.exceptions.ClippingWarning`)
            by a per-row scale inside the products: X is not copied (float32 and
            float64 arrays, C or F order, memmaps and CSR matrices are used as
            they are; see ``docs/data_path.md``).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,) or None, default None
            Per-record weights wᵢ ∈ [0, 1] (a public bound; part of the record):
            the objective becomes (1/n)Σ wᵢ ℓᵢ + penalty with the same noise
            calibration (module docstring: replace-one, n public).  Supported
            by the mechanisms "objective", "output", "structured-output",
            "dual-frank-wolfe", "frank-wolfe", "dp-gd" and "dp-gd-avg"; InvalidDataError
            otherwise, and for weights outside [0, 1], NaN or of the wrong shape.

        Returns
        -------
        self

        Raises
        ------
        InvalidPrivacyParameter
            Bad ``epsilon``, ``delta``, ``data_norm``, ``alpha``, …: every parameter is
            checked first against the class's ``_parameter_constraints``
            (:func:`dperm._parameters.validate_params`), whatever the mechanism.
        InvalidDataError, LabelError
            Bad data or labels (NaN/inf, shape mismatch, empty, single class, …).
        UnknownNameError
            Unknown ``mechanism``, ``penalty``, ``noise``, ``accountant``, ….
        ConvergenceError
            A solver did not reach the tolerance the privacy proof needs.
        """
        # every parameter, whatever the mechanism: before the data and any reservation
        validate_params(self)
        if y is None:
            raise InvalidDataError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        # NaN/inf in X are refused by the Design's row-norm pass (as_design, below)
        X, y = _validate(
            self, X, y, reset=True, y_numeric=not self._is_classifier, finite_check=False
        )
        n, d = X.shape
        epsilon, delta, _data_norm, _scaling, eff_norm = self._check_params(n, d)
        problems = self._encode_targets(y)  # list of target vectors, one per call
        # mechanism="auto": the public rule of dperm.estimators._auto (n, d, k, ε, δ and
        # the user's own choices only), resolved before anything is charged or fitted
        self.auto_ = self._auto_choice(n, d, epsilon, delta, sample_weight is not None)
        self.mechanism_ = self.mechanism if self.auto_ is None else self.auto_.mechanism
        weight = _check_sample_weight(sample_weight, n, self.mechanism_)
        multinomial = self._multinomial(len(problems), weighted=weight is not None)
        if multinomial:  # one softmax model, the whole budget (no one-vs-rest split)
            problems = [class_indices(y, self.classes_)]  # by the backend of y (#32)
        k = len(problems)
        eps_k, delta_k = epsilon / k, delta / k  # basic composition (Dwork & Roth, Thm 3.16)

        # a mechanism's calibration reads public numbers only: started now, it runs
        # beside the pass over X below (e.g. dperm.algorithms.dp_sgd.prefetch_noise)
        prefetch = getattr(get_mechanism(self.mechanism_), "prefetch", None)
        if prefetch is not None and weight is None:
            loss = Softmax(len(self.classes_)) if multinomial else self._auto_loss()
            prefetch(self, loss, n, eps_k, delta_k)
        Xd, n_clipped = self._design(X)
        _refuse_mostly_clipped(n_clipped, n, self.data_norm)
        d_aug = Xd.shape[1]
        self.alpha_ = self._resolve_alpha(n, d_aug, eps_k, eff_norm)
        self.l2_, self.regularizer_ = self._resolve_penalty(self.alpha_)
        self.constraint_ = self._resolve_constraint(d_aug)
        self.data_norm_ = eff_norm
        self.loss_ = Softmax(len(self.classes_)) if multinomial else self._auto_loss()
        adapter = get_mechanism(self.mechanism_)
        fit_loss = self.loss_ if weight is None else _WeightedLoss(self.loss_, weight)
        # warm_start=True: the previous release as the public start point (_warm_start.py)
        n_rows = len(self.classes_) if multinomial else k
        start = warm_start(self, self.mechanism_, d_aug, n_rows, multinomial)
        rng = fit_rng(self.random_state, start)

        # an active dperm.budget / Ledger.active() is charged before the data is read
        charge(EpsilonDelta(epsilon, delta), type(self).__name__)
        thetas, events, diagnostics = [], [], []
        for i, target in enumerate(problems):  # one problem per class (one-vs-rest)
            self._warm_theta0 = None if start is None else start.thetas[i]  # read by dp-gd…
            try:
                res = adapter(self, fit_loss, Xd, target, eps_k, delta_k, rng)
            finally:  # never left behind for a later call
                del self._warm_theta0
            theta = np.asarray(res.theta, dtype=np.float64)
            expected = (d_aug, len(self.classes_)) if multinomial else (d_aug,)
            theta = theta if multinomial else theta.ravel()
            if theta.shape != expected:
                raise InvalidDataError(
                    f"mechanism {self.mechanism_!r} returned theta of shape {theta.shape}, "
                    f"expected {expected}"
                )
            relation = getattr(res.event, "neighbouring", REPLACE_ONE)
            if relation != REPLACE_ONE:  # fail closed: one guarantee per estimator
                raise InvalidPrivacyParameter(
                    f"mechanism {self.mechanism_!r} returned an event for the {relation!r} "
                    "neighbouring relation; the estimators guarantee replace-one (n public) "
                    "for every mechanism, so nothing is released"
                )
            thetas.extend(theta.T if multinomial else [theta])
            events.append(res.event)
            diagnostics.append(dict(res.diagnostics))

        W = np.vstack(thetas)  # (k, d_aug)
        dp_event = self._compose_events(events)
        if start is not None:  # the model depends on every fit of the chain: composition
            dp_event = start.compose(dp_event)
        # δ actually spent: pure-ε mechanisms spend none; a warm start adds the previous
        # fits' (ε, δ) (basic composition, an upper bound of dp_event's guarantee)
        delta_spent = float(sum(dg.get("delta", delta_k) for dg in diagnostics))
        if self.auto_ is not None:  # what the rule chose, and why (public inputs only)
            for dg in diagnostics:
                dg["auto"] = self.auto_.describe()
        n_iter = np.array(
            [
                max(1, int(dg.get("solver_iterations", dg.get("n_iter", dg.get("steps", 1)))))
                for dg in diagnostics
            ]
        )
        if getattr(self, "_classes_from_data", False):
            warnings.warn(
                f"{type(self).__name__}: classes=None, so the label set classes_ was read "
                "off the private y; which labels occur is NOT protected by the privacy "
                "guarantee (a record with a rare label changes classes_, the shape of "
                "coef_ and the budget split). Pass the public label set, e.g. "
                "classes=[0, 1] or classes=range(10).",
                PrivacyLeakWarning,
                stacklevel=3,  # +1: fit runs inside accounted_fit
            )

        # the release, after every check and warning: from here an exception keeps the
        # fit charged (what is assigned below has reached the caller's object)
        releasing()
        if self.fit_intercept:
            self.coef_ = W[:, :-1].copy()
            self.intercept_ = W[:, -1] * float(self.intercept_scaling)
        else:
            self.coef_ = W.copy()
            self.intercept_ = np.zeros(k)
        self._finish_shapes()
        self.dp_event_ = dp_event
        # the relation the guarantee is stated for: replace-one (D, D′ of the same public
        # size n differ in one record; docs/neighbouring.md) for every estimator
        # mechanism; read from the event so that it can never disagree with it
        self.neighbouring_ = str(getattr(dp_event, "neighbouring", REPLACE_ONE))
        self.epsilon_ = epsilon if start is None else epsilon + start.epsilon
        self.delta_ = delta_spent if start is None else delta_spent + start.delta
        self.n_fits_ = 1 if start is None else start.n_fits + 1
        self.n_clipped_ = int(n_clipped)
        self.diagnostics_ = diagnostics[0] if k == 1 else diagnostics
        self.n_iter_ = n_iter
        return self

    # ----- mechanism="auto" ----------------------------------------------------------
    #: the task of :func:`dperm.estimators._auto.auto_choice` (the estimator's loss)
    _auto_task = "logistic"

    def _mechanism(self) -> str:
        """The mechanism of the current fit: ``mechanism_`` once resolved, else the
        parameter."""
        return getattr(self, "mechanism_", None) or self.mechanism

    def _auto_choice(self, n: int, d: int, epsilon, delta, weighted: bool):
        """The :class:`~dperm.estimators._auto.AutoChoice` of ``mechanism="auto"``
        from public inputs only (None for a named mechanism)."""
        if self.mechanism != AUTO:
            return None
        penalty = self.penalty if isinstance(self.penalty, str) else "norm"
        classes = getattr(self, "classes_", None)
        return auto_choice(
            self._auto_task,
            n_samples=n,
            n_features=d,
            epsilon=epsilon,
            delta=delta,
            n_classes=2 if classes is None else max(2, len(classes)),
            fit_intercept=bool(self.fit_intercept),
            penalty=penalty,
            constrained=self.constraint is not None or self.constraint_radius is not None,
            weighted=weighted,
            label_bound=self._auto_label_bound(),
            multi_class=getattr(self, "multi_class", "auto"),
            alpha_given=not isinstance(self.alpha, str),
            feature_scaling=getattr(self, "feature_scaling", "public"),
        )

    def _auto_label_bound(self):
        """The public label bound the rule may read (regressors), else None."""
        return None

    def _auto_setting(self, name: str, default=None):
        """A hyperparameter the auto rule set for this fit (or ``default``)."""
        choice: AutoChoice | None = getattr(self, "auto_", None)
        return default if choice is None else choice.settings.get(name, default)

    def _auto_loss(self):
        """The loss of the fit: the estimator's, unless the auto rule chose the Huber
        surrogate (least-squares family; :mod:`dperm.estimators._auto`)."""
        if self._auto_setting("loss") == "huber":
            from ..losses import Huber

            return Huber(h=float(self._auto_setting("threshold")))
        return self._make_loss()

    def _multinomial(self, n_problems: int, weighted: bool = False) -> bool:
        """True when a k > 2 class problem is fitted as one multinomial (softmax)
        model; the mechanisms in ``_MULTINOMIAL_MECHANISMS`` support it.
        ``multi_class="auto"`` (default): multinomial whenever the mechanism
        supports it (as scikit-learn) and no ``sample_weight`` is passed (the
        multinomial fits have no weighted proof), one-vs-rest otherwise."""
        mode = getattr(self, "multi_class", "ovr")
        if mode == "ovr" or n_problems < 2:
            return False
        mechanism = self._mechanism()
        if mode == "auto":
            return mechanism in _MULTINOMIAL_MECHANISMS and not weighted
        if mechanism not in _MULTINOMIAL_MECHANISMS:
            raise InvalidPrivacyParameter(
                f"multi_class='multinomial' needs one of the mechanisms "
                f"{list(_MULTINOMIAL_MECHANISMS)}, got mechanism={mechanism!r}"
            )
        return True

    def _finish_shapes(self):
        """Hook: regressors flatten coef_/intercept_."""

    @staticmethod
    def _compose_events(events: list[DpEvent]) -> DpEvent:
        if len(events) == 1:
            return events[0]
        if all(e == events[0] for e in events):
            return SelfComposed(event=events[0], count=len(events))
        return Composed(events=tuple(events))

    # ----- prediction --------------------------------------------------------------
    def _linear_scores(self, X):
        """X coefᵀ + intercept: shape (n_samples,) for one problem, else (n_samples, k)."""
        check_is_fitted(self, "coef_")
        X = _validate(self, X, reset=False)
        # no clipping: float32 rows are multiplied in float64, block by block
        scores = margins(X, np.atleast_2d(self.coef_).T) + np.atleast_1d(self.intercept_)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def privacy_statement(self) -> str:
        """A plain-language statement of the fitted model's privacy guarantee.

        What is protected (one record, under which neighbouring relation), ε
        and δ, the mechanism and its theorem or accountant, the public bounds
        assumed, and what is not covered: :func:`dperm.statement.estimator_statement`
        (the text :func:`dperm.io.save` writes into the model file).
        """
        from ..statement import estimator_statement

        return estimator_statement(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class DPLinearClassifierBase(DPLinearModelBase):
    """Binary (±1) and one-vs-rest multi-class handling."""

    _is_classifier = True

    def _encode_targets(self, y):
        """``classes_`` and the one-vs-rest ±1 targets, by the backend of y
        (:func:`dperm.design.encode_class_targets`)."""
        return encode_class_targets(self, y)

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """Linear scores X coefᵀ + intercept.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (> 0 means ``classes_[1]``),
        else (n_samples, n_classes)
        """
        return self._linear_scores(X)

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predicted class labels, shape (n_samples,)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]
