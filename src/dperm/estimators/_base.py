"""Common machinery of dperm's scikit-learn estimators (thin adapters, no privacy logic).

``fit`` validates, clips rows to ``data_norm`` (counting them), appends the
intercept column, resolves Λ, the regularizer and the constraint, and calls the
registered mechanism (:mod:`dperm.estimators._mechanisms`) once per binary
problem with its share of the budget.  All privacy calibration lives in the
algorithm modules.

Intercept.  With ``fit_intercept=True`` a constant feature of value
``intercept_scaling`` = s is appended to every (already clipped) row; its
coefficient times s is ``intercept_``.  The augmented rows satisfy
‖(x, s)‖ ≤ √(data_norm² + s²) — a public bound, used as the effective
``data_norm_`` of the mechanism — so no row is clipped because of the
intercept, and the intercept is regularized like every other coefficient
(the privacy proofs need the strong convexity in every direction).
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from .._rng import check_random_state
from .._validation import check_delta, check_epsilon, check_nonnegative, check_positive, clip_rows
from ..accounting.events import REPLACE_ONE, Composed, DpEvent, SelfComposed
from ..constraints import Constraint, get_constraint
from ..exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
)
from ..losses.softmax import Softmax
from ..regularizers import L1
from ._mechanisms import auto_alpha, get_mechanism

try:  # scikit-learn ≥ 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - older scikit-learn

    def _sk_validate_data(estimator, X, y="no_validation", reset=True, **kw):
        return estimator._validate_data(X, y, reset=reset, **kw)


__all__ = ["DPLinearClassifierBase", "DPLinearModelBase"]

_PENALTIES = ("l2", "l1", "elasticnet", "none")
#: mechanisms that fit the multinomial (softmax) model as one problem
_MULTINOMIAL_MECHANISMS = ("dp-sgd", "dp-gd", "dp-sgd-single")

#: relative slack added to the augmented row bound so that floating-point
#: rounding of √(‖x‖² + s²) never exceeds it (a larger public bound is always valid)
_BOUND_SLACK = 1e-12


def _validate(estimator, X, y=None, *, reset: bool, y_numeric: bool = False):
    """scikit-learn's validation (messages the estimator checks expect), with
    every ValueError re-raised as a dperm InvalidDataError."""
    try:
        if y is None and not reset:
            return _sk_validate_data(
                estimator, X, reset=False, accept_sparse="csr", dtype=np.float64
            )
        return _sk_validate_data(
            estimator,
            X,
            y,
            reset=reset,
            accept_sparse="csr",
            dtype=np.float64,
            y_numeric=y_numeric,
        )
    except InvalidDataError:
        raise
    except ValueError as exc:
        raise InvalidDataError(str(exc)) from None


def _append_intercept(X, scaling: float):
    col = np.full((X.shape[0], 1), scaling)
    if sp.issparse(X):
        return sp.hstack([X, sp.csr_matrix(col)], format="csr")
    return np.hstack([X, col])


class DPLinearModelBase(BaseEstimator):
    """Shared parameters and fit logic of the DP linear estimators (not public).

    Subclasses set ``_estimator_type``-style behaviour through
    :meth:`_make_loss`, :meth:`_encode_targets` and the sklearn mixins.
    """

    _is_classifier = False

    # ----- hooks -------------------------------------------------------------------
    def _make_loss(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # ----- parameter validation ----------------------------------------------------
    def _check_params(self, n: int, d: int):
        epsilon = check_epsilon(self.epsilon)
        if self.delta is None:
            if n < 2:
                raise InvalidPrivacyParameter(
                    f"the default delta = 1/n² needs n_samples ≥ 2, got n_samples = {n}; "
                    "pass delta explicitly"
                )
            delta = 1.0 / float(n) ** 2
        else:
            delta = check_delta(self.delta)
        data_norm = check_positive(self.data_norm, "data_norm")
        get_mechanism(self.mechanism)  # UnknownNameError listing the registered ones
        if self.penalty not in _PENALTIES:
            raise UnknownNameError(
                f"unknown penalty {self.penalty!r}; choose one of {list(_PENALTIES)}"
            )
        if not isinstance(self.fit_intercept, bool | np.bool_):
            raise InvalidPrivacyParameter(
                f"fit_intercept must be a bool, got {self.fit_intercept!r}"
            )
        scaling = check_positive(self.intercept_scaling, "intercept_scaling")
        if self.fit_intercept:
            eff_norm = math.sqrt(data_norm**2 + scaling**2) * (1.0 + _BOUND_SLACK)
        else:
            eff_norm = data_norm
        return epsilon, delta, data_norm, scaling, eff_norm

    def _resolve_alpha(self, n: int, d_aug: int, epsilon_per_call: float, eff_norm: float):
        if isinstance(self.alpha, str):
            if self.alpha != "auto":
                raise InvalidPrivacyParameter(
                    f"alpha must be a number ≥ 0 or 'auto', got {self.alpha!r}"
                )
            return auto_alpha(self.mechanism, n, d_aug, epsilon_per_call, eff_norm)
        return check_nonnegative(self.alpha, "alpha")

    def _resolve_penalty(self, alpha: float):
        """(Λ for the smooth ℓ2 term, non-smooth regularizer or None)."""
        if self.penalty == "l2":
            return alpha, None
        if self.penalty == "none":
            return 0.0, None
        if self.penalty == "l1":
            return 0.0, L1(alpha)
        ratio = self.l1_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 0 <= ratio <= 1:
            raise InvalidPrivacyParameter(
                f"l1_ratio must be a number in [0, 1] for penalty='elasticnet', got {ratio!r}"
            )
        return alpha * (1.0 - float(ratio)), L1(alpha * float(ratio))

    def _resolve_constraint(self, d_aug: int) -> Constraint | None:
        c = self.constraint
        if isinstance(c, Constraint):
            return c
        if c is None and self.constraint_radius is None:
            return None
        name = "l2" if c is None else c
        if not isinstance(name, str):
            raise InvalidPrivacyParameter(
                "constraint must be None, 'l2', 'l1', 'box', 'none' or a "
                f"dperm.constraints.Constraint, got {c!r}"
            )
        radius = self.constraint_radius
        if name != "none":
            if radius is None:
                raise InvalidPrivacyParameter(
                    f"constraint={name!r} needs constraint_radius (a public bound), got None"
                )
            radius = check_positive(radius, "constraint_radius")
        return get_constraint(name, radius)

    # ----- data preparation --------------------------------------------------------
    def _design(self, X, *, warn: bool = True):
        """Clip rows to ``data_norm`` and append the intercept column (public maps)."""
        X, n_clipped = clip_rows(X, self.data_norm, warn=warn)
        if self.fit_intercept:
            X = _append_intercept(X, float(self.intercept_scaling))
        return X, n_clipped

    # ----- fit ---------------------------------------------------------------------
    def fit(self, X, y):
        """Fit the private model.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            Rows with ‖x‖₂ > ``data_norm`` are clipped to ``data_norm`` (counted
            in ``n_clipped_``, with a :class:`~dperm.exceptions.ClippingWarning`).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self

        Raises
        ------
        InvalidPrivacyParameter
            Bad ``epsilon``, ``delta``, ``data_norm``, ``alpha``, ….
        InvalidDataError, LabelError
            Bad data or labels (NaN/inf, shape mismatch, empty, single class, …).
        UnknownNameError
            Unknown ``mechanism`` or ``penalty``.
        ConvergenceError
            A solver did not reach the tolerance the privacy proof needs.
        """
        if y is None:
            raise InvalidDataError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        X, y = _validate(self, X, y, reset=True, y_numeric=not self._is_classifier)
        n, d = X.shape
        epsilon, delta, _data_norm, _scaling, eff_norm = self._check_params(n, d)
        problems = self._encode_targets(y)  # list of target vectors, one per call
        multinomial = self._multinomial(len(problems))
        if multinomial:  # one softmax model, the whole budget (no one-vs-rest split)
            problems = [np.searchsorted(self.classes_, y)]
        k = len(problems)
        eps_k, delta_k = epsilon / k, delta / k  # basic composition (Dwork & Roth, Thm 3.16)

        rng = check_random_state(self.random_state)
        Xd, n_clipped = self._design(X)
        d_aug = Xd.shape[1]
        self.alpha_ = self._resolve_alpha(n, d_aug, eps_k, eff_norm)
        self.l2_, self.regularizer_ = self._resolve_penalty(self.alpha_)
        self.constraint_ = self._resolve_constraint(d_aug)
        self.data_norm_ = eff_norm
        self.loss_ = Softmax(len(self.classes_)) if multinomial else self._make_loss()
        adapter = get_mechanism(self.mechanism)

        thetas, events, diagnostics = [], [], []
        for target in problems:  # one binary problem per class (one-vs-rest), not rows
            res = adapter(self, self.loss_, Xd, target, eps_k, delta_k, rng)
            theta = np.asarray(res.theta, dtype=np.float64)
            expected = (d_aug, len(self.classes_)) if multinomial else (d_aug,)
            theta = theta if multinomial else theta.ravel()
            if theta.shape != expected:
                raise InvalidDataError(
                    f"mechanism {self.mechanism!r} returned theta of shape {theta.shape}, "
                    f"expected {expected}"
                )
            relation = getattr(res.event, "neighbouring", REPLACE_ONE)
            if relation != REPLACE_ONE:  # fail closed: one guarantee per estimator
                raise InvalidPrivacyParameter(
                    f"mechanism {self.mechanism!r} returned an event for the {relation!r} "
                    "neighbouring relation; the estimators guarantee replace-one (n public) "
                    "for every mechanism, so nothing is released"
                )
            thetas.extend(theta.T if multinomial else [theta])
            events.append(res.event)
            diagnostics.append(dict(res.diagnostics))

        W = np.vstack(thetas)  # (k, d_aug)
        if self.fit_intercept:
            self.coef_ = W[:, :-1].copy()
            self.intercept_ = W[:, -1] * float(self.intercept_scaling)
        else:
            self.coef_ = W.copy()
            self.intercept_ = np.zeros(k)
        self._finish_shapes()
        self.dp_event_ = self._compose_events(events)
        # the relation the guarantee is stated for: replace-one (D, D′ of the same public
        # size n differ in one record; docs/neighbouring.md) for every estimator
        # mechanism; read from the event so that it can never disagree with it
        self.neighbouring_ = str(getattr(self.dp_event_, "neighbouring", REPLACE_ONE))
        self.epsilon_ = epsilon
        # δ actually spent: pure-ε mechanisms spend none
        self.delta_ = float(sum(dg.get("delta", delta_k) for dg in diagnostics))
        self.n_clipped_ = int(n_clipped)
        self.diagnostics_ = diagnostics[0] if k == 1 else diagnostics
        self.n_iter_ = np.array(
            [
                int(dg.get("solver_iterations", dg.get("n_iter", dg.get("steps", 0))))
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
                stacklevel=2,
            )
        return self

    def _multinomial(self, n_problems: int) -> bool:
        """True when a k > 2 class problem is fitted as one multinomial (softmax)
        model; only the gradient-perturbation mechanisms support it."""
        mode = getattr(self, "multi_class", "ovr")
        if mode not in ("ovr", "multinomial"):
            raise UnknownNameError(
                f"unknown multi_class {mode!r}; choose one of ['ovr', 'multinomial']"
            )
        if mode == "ovr" or n_problems < 2:
            return False
        if self.mechanism not in _MULTINOMIAL_MECHANISMS:
            raise InvalidPrivacyParameter(
                f"multi_class='multinomial' needs a gradient-perturbation mechanism "
                f"{list(_MULTINOMIAL_MECHANISMS)}, got mechanism={self.mechanism!r}"
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
        scores = np.asarray(X @ np.atleast_2d(self.coef_).T) + np.atleast_1d(self.intercept_)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def privacy_statement(self) -> str:
        """A plain-language statement of the fitted model's privacy guarantee.

        What is protected (one record, under which neighbouring relation), ε
        and δ, the mechanism and its theorem or accountant, the public bounds
        assumed, and what is not covered; see :func:`dperm.io.privacy_statement`.
        """
        from ..io import privacy_statement

        return privacy_statement(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class DPLinearClassifierBase(DPLinearModelBase):
    """Binary (±1) and one-vs-rest multi-class handling."""

    _is_classifier = True

    def _encode_targets(self, y):
        try:
            check_classification_targets(y)
        except ValueError as exc:
            raise LabelError(str(exc)) from None
        public = getattr(self, "classes", None)
        if public is None:
            # read off the data, as scikit-learn does: which labels occur is then
            # not protected (one record with a rare label changes classes_, the shape
            # of coef_ and the budget split); fit warns every time
            self.classes_ = np.unique(y)
        else:
            self.classes_ = np.unique(np.asarray(public))
            unknown = ~np.isin(y, self.classes_)
            if unknown.any():
                raise LabelError(
                    f"y has labels outside classes={self.classes_.tolist()}: "
                    f"{np.unique(y[unknown])[:5].tolist()}"
                )
        k = self.classes_.shape[0]
        if k < 2:
            raise LabelError(
                f"{type(self).__name__} needs samples of at least 2 classes in the data, "
                f"got 1 class: {self.classes_.tolist()}"
            )
        # warned by fit once the model exists (not before a bad-parameter error)
        self._classes_from_data = public is None
        if k == 2:
            return [np.where(y == self.classes_[1], 1.0, -1.0)]
        return [np.where(y == c, 1.0, -1.0) for c in self.classes_]

    def decision_function(self, X):
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

    def predict(self, X):
        """Predicted class labels, shape (n_samples,)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]
