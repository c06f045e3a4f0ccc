"""Utility of a private model: excess empirical risk, accuracy, non-private reference.

The excess empirical risk of a released θ_priv is measured on the *same*
regularized objective the private algorithm targets,

    J(θ) = (1/n) Σᵢ ℓ(θ; xᵢ, yᵢ) + (Λ/2)‖θ‖² + r(θ),   θ ∈ C,

as J(θ_priv) − min_C J, the minimum computed by the non-private solver
(:func:`dperm.solvers.minimize`) to optimality residual ``tol``.  (It does not
include the extra (Δ/2)‖θ‖² or the noise term objective perturbation adds:
those are part of the mechanism, not of the task.)

For a fitted dperm estimator everything is taken from the estimator: its loss,
Λ (``l2_``), regularizer, constraint, the clipping of rows to ``data_norm``
and the intercept column; for one-vs-rest models the mean over the classes'
binary problems is returned.

Nothing here is private: these functions read the data in the clear and are
for evaluation by the data owner.  (Theoretical bounds live in
:mod:`dperm.theory`.)
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ._validation import check_nonnegative, check_positive, check_X_y, clip_rows
from .accounting.events import NonPrivate
from .exceptions import InvalidDataError, InvalidPrivacyParameter
from .losses.base import GLMLoss
from .solvers import minimize, objective_value

__all__ = [
    "accuracy",
    "excess_empirical_risk",
    "nonprivate_fit",
    "objective_problems",
]


def _is_estimator(obj) -> bool:
    return hasattr(obj, "get_params") and hasattr(obj, "fit")


def objective_problems(model, X, y):
    """The binary problems a fitted dperm estimator solved, on (X, y).

    Returns
    -------
    list of dict
        One per problem (one for binary / regression, k for one-vs-rest), with
        keys ``X`` (clipped, intercept-augmented design), ``y`` (±1 labels or
        targets), ``theta`` (the released parameter in the augmented space),
        ``loss``, ``l2``, ``regularizer``, ``constraint``.

    Raises
    ------
    sklearn.exceptions.NotFittedError, InvalidDataError, LabelError
    """
    from .estimators._base import _validate

    check_is_fitted(model, "coef_")
    Xv = _validate(model, X, reset=False)
    _, y = check_X_y(Xv, y)
    Xd, _ = model._design(Xv, warn=False)
    W = np.atleast_2d(model.coef_)
    b = np.atleast_1d(model.intercept_)
    if getattr(model, "_is_classifier", False):
        classes = model.classes_
        unknown = ~np.isin(y, classes)
        if unknown.any():
            raise InvalidDataError(
                f"y contains labels unseen at fit time: {np.unique(y[unknown])[:5].tolist()}"
            )
        if classes.shape[0] == 2:
            targets = [np.where(y == classes[1], 1.0, -1.0)]
        else:
            targets = [np.where(y == c, 1.0, -1.0) for c in classes]
    else:
        targets = [model.loss_.check_labels(y)]
    problems = []
    for k, target in enumerate(targets):
        theta = W[k]
        if model.fit_intercept:
            theta = np.append(theta, b[k] / float(model.intercept_scaling))
        problems.append(
            {
                "X": Xd,
                "y": target,
                "theta": np.asarray(theta, dtype=float),
                "loss": model.loss_,
                "l2": model.l2_,
                "regularizer": model.regularizer_,
                "constraint": model.constraint_,
            }
        )
    return problems


def _solve_reference(p, tol, max_iter):
    res = minimize(
        p["loss"],
        p["X"],
        p["y"],
        l2=p["l2"],
        regularizer=p["regularizer"],
        constraint=p["constraint"],
        tol=tol,
        max_iter=max_iter,
    )
    return res


def excess_empirical_risk(
    model_or_theta,
    X,
    y,
    *,
    loss: GLMLoss | None = None,
    alpha: float = 0.0,
    regularizer=None,
    constraint=None,
    data_norm: float | None = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    reference=None,
) -> float:
    """J(θ_priv) − min_C J on (X, y) for the model's own regularized objective.

    Parameters
    ----------
    model_or_theta : fitted dperm estimator or ndarray of shape (d,)
        An estimator supplies loss, Λ, regularizer, constraint, clipping and
        intercept itself (the keyword arguments below must then be left at
        their defaults).  A parameter vector needs ``loss`` (and X already in
        the space θ lives in, e.g. with an intercept column appended).
    X : array-like or sparse matrix of shape (n, d)
    y : array-like of shape (n,)
    loss : GLMLoss, optional
        Required with a θ.
    alpha : float ≥ 0, default 0
        Λ of (Λ/2)‖θ‖² (θ input only).
    regularizer, constraint : optional
        As in :func:`dperm.solvers.minimize` (θ input only).
    data_norm : float, optional
        Clip rows of X to this norm first (θ input only).
    tol : float, default 1e-10
        Optimality residual of the reference minimization.
    max_iter : int, default 10000
    reference : fitted estimator, optional
        The output of :func:`nonprivate_fit` for the same model and (X, y): its
        coefficients are used as the minimizers instead of solving again.

    Returns
    -------
    float
        The excess empirical risk (mean over the one-vs-rest problems).

    Raises
    ------
    InvalidPrivacyParameter
        A θ without ``loss``, or keyword arguments given with an estimator.
    InvalidDataError, LabelError
    """
    if _is_estimator(model_or_theta):
        if loss is not None or alpha != 0.0 or regularizer is not None or constraint is not None:
            raise InvalidPrivacyParameter(
                "with a fitted estimator, loss/alpha/regularizer/constraint are taken from the "
                "estimator; do not pass them"
            )
        problems = objective_problems(model_or_theta, X, y)
    else:
        if not isinstance(loss, GLMLoss):
            raise InvalidPrivacyParameter(
                f"excess_empirical_risk of a parameter vector needs loss=<GLMLoss>, got {loss!r}"
            )
        X, y = check_X_y(X, y)
        y = loss.check_labels(y)
        if data_norm is not None:
            X, _ = clip_rows(X, check_positive(data_norm, "data_norm"), warn=False)
        theta = np.asarray(model_or_theta, dtype=float).ravel()
        if theta.shape[0] != X.shape[1]:
            raise InvalidDataError(
                f"theta has {theta.shape[0]} coordinates but X has {X.shape[1]} features"
            )
        problems = [
            {
                "X": X,
                "y": y,
                "theta": theta,
                "loss": loss,
                "l2": check_nonnegative(alpha, "alpha"),
                "regularizer": regularizer,
                "constraint": constraint,
            }
        ]
    if reference is not None:
        if not _is_estimator(model_or_theta):
            raise InvalidPrivacyParameter("reference= is only used with a fitted estimator")
        minimizers = [p["theta"] for p in objective_problems(reference, X, y)]
    else:
        minimizers = [_solve_reference(p, tol, max_iter).theta for p in problems]
    gaps = []
    for p, theta_ref in zip(problems, minimizers, strict=True):
        j_priv = objective_value(
            p["loss"], p["theta"], p["X"], p["y"], l2=p["l2"], regularizer=p["regularizer"]
        )
        j_ref = objective_value(
            p["loss"], theta_ref, p["X"], p["y"], l2=p["l2"], regularizer=p["regularizer"]
        )
        gaps.append(j_priv - j_ref)
    return float(np.mean(gaps))


def nonprivate_fit(model, X, y, *, tol: float = 1e-10, max_iter: int = 10_000):
    """A copy of a fitted dperm estimator whose coefficients are the *non-private*
    minimizer of the same objective on (X, y) — the reference for "what did
    privacy cost".  Its ``dp_event_`` is :class:`~dperm.accounting.NonPrivate`
    and ``epsilon_`` is ∞: never release it.

    Raises
    ------
    sklearn.exceptions.NotFittedError, InvalidDataError, LabelError
    """
    problems = objective_problems(model, X, y)
    thetas = np.vstack([_solve_reference(p, tol, max_iter).theta for p in problems])
    ref = copy.deepcopy(model)
    if model.fit_intercept:
        coef, intercept = thetas[:, :-1], thetas[:, -1] * float(model.intercept_scaling)
    else:
        coef, intercept = thetas, np.zeros(thetas.shape[0])
    if np.ndim(model.coef_) == 1:  # regressors
        ref.coef_, ref.intercept_ = coef.ravel(), float(intercept[0])
    else:
        ref.coef_, ref.intercept_ = coef, intercept
    ref.dp_event_ = NonPrivate()
    ref.epsilon_ = float("inf")
    ref.delta_ = 0.0
    return ref


def accuracy(model_or_theta, X, y) -> float:
    """Fraction of correct predictions.

    Parameters
    ----------
    model_or_theta : fitted classifier or ndarray of shape (d,)
        A θ predicts sign(⟨θ, x⟩) against labels in {−1, +1}.
    X : array-like or sparse matrix of shape (n, d)
    y : array-like of shape (n,)

    Returns
    -------
    float in [0, 1]
    """
    if _is_estimator(model_or_theta):
        pred = model_or_theta.predict(X)
        return float(np.mean(np.asarray(pred) == np.asarray(y)))
    X, y = check_X_y(X, y)
    theta = np.asarray(model_or_theta, dtype=float).ravel()
    if theta.shape[0] != X.shape[1]:
        raise InvalidDataError(
            f"theta has {theta.shape[0]} coordinates but X has {X.shape[1]} features"
        )
    z = np.asarray(X @ theta).ravel() if sp.issparse(X) else X @ theta
    return float(np.mean(np.where(z > 0, 1.0, -1.0) == y))


# Theoretical excess-risk bounds per algorithm: see dperm.theory.theoretical_bound
# (maintained with the algorithms' utility theorems).
from .theory import TheoryBound, bound_for_estimator, theoretical_bound  # noqa: E402

__all__ += ["TheoryBound", "bound_for_estimator", "theoretical_bound"]
