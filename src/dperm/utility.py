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
and the intercept column (its :class:`~dperm.design.Design` of X: no copy of X);
for one-vs-rest models the mean over the classes' binary problems is returned.

Nothing here is private: these functions read the data in the clear and are
for evaluation by the data owner.  (Theoretical bounds live in
:mod:`dperm.theory`.)
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._validation import (
    check_count,
    check_data_norm,
    check_nonnegative,
    check_positive,
    check_probability,
)
from .accounting.events import NonPrivate
from .design import as_design, check_X_y, validate_estimator_input
from .exceptions import InvalidDataError, InvalidPrivacyParameter
from .losses.base import GLMLoss
from .losses.softmax import FlatSoftmax, Softmax
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
        One per problem (one for binary / regression and for the multinomial model,
        k for one-vs-rest), with keys ``X`` (the clipped, intercept-augmented
        :class:`~dperm.design.Design` of X, shared by the problems), ``y`` (±1 labels,
        targets, or class indices 0…k−1 for the multinomial model), ``theta`` (the
        released parameter in the augmented space; vec(Θ), Θ of shape (d_eff, k), with
        the loss :class:`~dperm.losses.softmax.FlatSoftmax` for the multinomial model),
        ``loss``, ``l2``, ``regularizer``, ``constraint``.

    Raises
    ------
    sklearn.exceptions.NotFittedError, InvalidDataError, LabelError
    """
    check_is_fitted(model, "coef_")
    Xv = validate_estimator_input(model, X, reset=False)
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
    if isinstance(model.loss_, Softmax):  # multinomial: one problem, vec(Θ) with Θ (d_eff, k)
        k = len(model.classes_)
        theta = W.T if not model.fit_intercept else np.vstack([W.T, b / model.intercept_scaling])
        problem = {
            "X": Xd,
            "y": np.searchsorted(model.classes_, y),
            "theta": np.asarray(theta, dtype=float).ravel(),
            "loss": FlatSoftmax(Softmax(k), k),
            "l2": model.l2_,
            "regularizer": model.regularizer_,
            "constraint": model.constraint_,
        }
        return [problem]
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


def _vector_problem(theta, X, y, loss, data_norm, what: str):
    """(θ, Design of X, labels) for a parameter vector: rows clipped to ``data_norm``
    by a per-row scale (none when None), labels checked by ``loss``.

    Raises
    ------
    InvalidPrivacyParameter
        ``loss`` is not a GLMLoss, or ``data_norm`` is not a positive number.
    InvalidDataError, LabelError
    """
    if not isinstance(loss, GLMLoss):
        raise InvalidPrivacyParameter(
            f"{what} of a parameter vector needs loss=<GLMLoss>, got {loss!r}"
        )
    X, y = check_X_y(X, y)
    y = loss.check_labels(y)
    if data_norm is not None:
        data_norm = check_data_norm(data_norm)
    X = as_design(X, data_norm, warn=False)  # rows clipped by a per-row scale
    theta = np.asarray(theta, dtype=float).ravel()
    _check_theta_size(theta, X.shape[1])
    return theta, X, y


def _check_theta_size(theta: np.ndarray, d: int) -> None:
    if theta.shape[0] != d:
        raise InvalidDataError(f"theta has {theta.shape[0]} coordinates but X has {d} features")


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
        theta, X, y = _vector_problem(
            model_or_theta, X, y, loss, data_norm, "excess_empirical_risk"
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
    if isinstance(problems[0]["loss"], FlatSoftmax):  # vec(Θ) → one row per class
        thetas = thetas.reshape(-1, len(model.classes_)).T
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
    _check_theta_size(theta, X.shape[1])
    z = as_design(X).matvec(theta)  # float32 rows multiplied in float64, no copy
    return float(np.mean(np.where(z > 0, 1.0, -1.0) == y))


# Theoretical excess-risk bounds per algorithm: see dperm.theory.theoretical_bound
# (maintained with the algorithms' utility theorems).
from .theory import TheoryBound, bound_for_estimator, theoretical_bound  # noqa: E402

__all__ += ["TheoryBound", "bound_for_estimator", "theoretical_bound"]


# ----------------------------------------------------------------------------- population risk
def _per_example_losses(model_or_theta, X, y, loss, data_norm) -> np.ndarray:
    """ℓ(θ; xᵢ, yᵢ) per held-out row, shape (m,) (mean over one-vs-rest problems)."""
    if _is_estimator(model_or_theta):
        problems = objective_problems(model_or_theta, X, y)
        return np.mean(
            [
                p["loss"].pointwise(np.asarray(p["X"] @ p["theta"]).ravel(), p["y"])
                for p in problems
            ],
            axis=0,
        )
    theta, X, y = _vector_problem(model_or_theta, X, y, loss, data_norm, "the population risk")
    return loss.pointwise(X.matvec(theta), y)


def excess_population_risk(
    model_or_theta,
    reference,
    X_test,
    y_test,
    *,
    loss: GLMLoss | None = None,
    data_norm: float | None = None,
    confidence: float = 0.95,
    loss_range: float | None = None,
) -> dict:
    """Held-out estimate of L_D(θ_priv) − L_D(θ_ref) with a confidence interval.

    L_D(θ) = E ℓ(θ; x, y) is the population risk (unregularized loss).  On m
    held-out rows, never used for fitting either model, the paired differences
    Dᵢ = ℓ(θ_priv; xᵢ, yᵢ) − ℓ(θ_ref; xᵢ, yᵢ) are i.i.d. with mean the excess
    population risk of θ_priv over the reference (e.g. :func:`nonprivate_fit`
    on the training data, or a reference chosen on a validation split).  The
    interval is the Student t interval of the mean of Dᵢ (asymptotic), or,
    with ``loss_range`` = c (every ℓ in an interval of length c, so
    |Dᵢ| ≤ c), Hoeffding's exact interval ± c·√(2 ln(2/α)/m) (α = 1 − confidence).

    Parameters
    ----------
    model_or_theta, reference : fitted dperm estimators, or ndarrays of shape (d,)
        Both of the same kind; vectors need ``loss`` (and X in θ's space).
    X_test : array-like or sparse matrix of shape (m, d)
    y_test : array-like of shape (m,)
    loss : GLMLoss, optional
        Required with vectors.
    data_norm : float, optional
        Clip held-out rows to this norm first (vectors only).
    confidence : float in (0, 1), default 0.95
    loss_range : float > 0, optional
        Switch to the Hoeffding interval.

    Returns
    -------
    dict
        ``estimate``, ``lower``, ``upper``, ``risk``, ``reference_risk``,
        ``n_test``, ``confidence``, ``method`` ("t" or "hoeffding").

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, LabelError
    """
    from scipy import stats

    conf = float(confidence)
    if not 0.0 < conf < 1.0:
        raise InvalidPrivacyParameter(f"confidence must be in (0, 1), got {confidence!r}")
    if _is_estimator(model_or_theta) != _is_estimator(reference):
        raise InvalidPrivacyParameter(
            "model_or_theta and reference must both be estimators or both parameter vectors"
        )
    a = _per_example_losses(model_or_theta, X_test, y_test, loss, data_norm)
    b = _per_example_losses(reference, X_test, y_test, loss, data_norm)
    diff = a - b
    m = diff.size
    est = float(diff.mean())
    alpha = 1.0 - conf
    if loss_range is not None:
        c = check_positive(loss_range, "loss_range")
        half = c * float(np.sqrt(2.0 * np.log(2.0 / alpha) / m))
        method = "hoeffding"
    else:
        if m < 2:
            raise InvalidDataError(f"need at least 2 held-out rows for a t interval, got {m}")
        half = float(stats.t.ppf(1.0 - alpha / 2.0, m - 1) * diff.std(ddof=1) / np.sqrt(m))
        method = "t"
    return {
        "estimate": est,
        "lower": est - half,
        "upper": est + half,
        "risk": float(a.mean()),
        "reference_risk": float(b.mean()),
        "n_test": int(m),
        "confidence": conf,
        "method": method,
    }


def generalization_bound(
    *, n: int, lipschitz: float, radius: float, loss_range: float, delta: float = 0.05
) -> float:
    """Uniform deviation sup_{‖θ‖≤R} (L_D(θ) − L̂_S(θ)) for a Lipschitz GLM, w.p. ≥ 1 − δ.

        2 L R / √n + c √(2 ln(2/δ) / n),

    for ℓ(θ; x, y) = φ(⟨θ, x⟩, y) with ‖x‖ ≤ X, φ ρ-Lipschitz in its first
    argument (L = ρX, ``lipschitz`` = ``loss.lipschitz(data_norm)``) and
    ℓ ∈ an interval of length c = ``loss_range`` (shift-invariant, so c may be
    the range rather than a bound on |ℓ|): the Rademacher complexity of the ball
    of linear predictors is ≤ RX/√n, Talagrand's contraction multiplies it by
    ρ, and McDiarmid's inequality gives the deviation term
    (Shalev-Shwartz & Ben-David, "Understanding Machine Learning", 2014,
    Theorem 26.12).  Kumar & Deisenroth 2019, Proposition 1 (their citation of
    Shalev-Shwartz et al., Theorem 1) states the same rate,
    O(√((B R₂ L)² log(1/α)/n)) with probability 1 − α, without constants; the
    constants above are the textbook's.

    Combined with Hoeffding for a fixed comparator θ° (L̂_S(θ°) ≤ L_D(θ°) +
    c√(ln(1/δ′)/(2n))), the excess population risk of θ_priv over any θ° in the
    ball is at most its excess empirical risk plus this bound plus that term.

    Raises
    ------
    InvalidPrivacyParameter
        n not a positive integer, L, R or c ≤ 0, or δ outside (0, 1).
    """
    n = check_count(n, "n")
    lip = check_positive(lipschitz, "lipschitz")
    R = check_positive(radius, "radius")
    c = check_positive(loss_range, "loss_range")
    delta = check_probability(delta, "delta")
    if delta >= 1.0:
        raise InvalidPrivacyParameter(f"delta must be in (0, 1), got {delta!r}")
    return float(2.0 * lip * R / np.sqrt(n) + c * np.sqrt(2.0 * np.log(2.0 / delta) / n))


__all__ += ["excess_population_risk", "generalization_bound"]
