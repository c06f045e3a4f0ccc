"""Generalized linear model (GLM) losses.

A GLM loss has the form ℓ(θ; x, y) = φ(⟨θ, x⟩, y), so every per-example
gradient is a scalar multiple of its row:

    ∇θ ℓ(θ; xᵢ, yᵢ) = sᵢ · xᵢ,   sᵢ = ∂φ/∂z (zᵢ, yᵢ),  zᵢ = ⟨θ, xᵢ⟩.

This is what makes the fast paths of dperm possible: per-example gradient
norms are |sᵢ|·‖xᵢ‖ and clipped sums are ``X.T @ (scaled s)``, for dense and
CSR matrices alike — an (n, d) array of gradients is never formed.

The empirical risk is the *mean* L(θ) = (1/n) Σᵢ φ(⟨θ, xᵢ⟩, yᵢ).

X may be an ndarray, a CSR matrix or a :class:`dperm.design.Design` (the view
the estimators and algorithms pass: clipped rows and the intercept applied
inside the products, X never copied).  On a Design, value and gradient come
from one fused pass over X (:meth:`~dperm.design.Design.glm_value_and_gradient`)
and Hessian-vector products from another
(:meth:`~dperm.design.Design.glm_hessian_vector`).

The constants that privacy proofs need are functions of public bounds only:

* ``lipschitz(data_norm, ...)`` — L with ‖∇ℓ(θ; x, y)‖ ≤ L for every ‖x‖ ≤ data_norm
  (and every admissible y, and θ in the stated domain);
* ``smoothness(data_norm, ...)`` — β with ‖∇²ℓ‖ ≤ β;
* ``curvature`` — c = sup |∂²φ/∂z²|, the constant of Chaudhuri et al. (2011)
  (β = c · data_norm²).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
import scipy.sparse as sp

from .._validation import check_data_norm
from ..design import Design, check_binary_labels, float_labels
from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "MARGIN_BOUND",
    "OUTPUT_MARGIN_BOUND",
    "PRIOR_RELAX_ABOVE",
    "GLMLoss",
    "ResidualLoss",
    "check_smooth_glm_loss",
    "prior_margin",
]


def _matvec(X, theta: np.ndarray) -> np.ndarray:
    if isinstance(X, Design):
        return X.matvec(theta)
    return np.asarray(X @ theta).ravel()


def _rmatvec(X, s: np.ndarray) -> np.ndarray:
    if isinstance(X, Design):
        return X.rmatvec(s)
    return np.asarray(X.T @ s).ravel()


#: Public prior bound on the margin scale R·‖θ*‖ of the normalized problem (per class):
#: a model whose log-odds never exceed ±20 (probabilities within 2e-9 of 0 or 1).  Used
#: by objective perturbation's choice of Δ, the estimators' default Λ and constraint
#: rules and the theory's ‖θ*‖ prior — never by a privacy proof.
MARGIN_BOUND = 20.0
#: The prior bound B₀ of the output-perturbation Λ rule (its proxy is a looser upper
#: bound of the risk than objective perturbation's, so the constant differs; chosen on
#: validation splits of the training rows, see
#: :func:`dperm.estimators._alpha_rules.output_alpha_rule`).
OUTPUT_MARGIN_BOUND = 10.0
#: ε above which the prior bound is relaxed (:func:`prior_margin`): beyond every cell
#: the Λ rules were checked on (ε ≤ 8), and where the noise has stopped mattering
PRIOR_RELAX_ABOVE = 10.0


def prior_margin(base: float, epsilon: float) -> float:
    """The prior margin B₀(ε) = ``base``·max(1, √(ε/ε_c)), ε_c = :data:`PRIOR_RELAX_ABOVE`.

    The Λ rules and objective perturbation's choice of Δ balance the bias ΛB²/2 of
    a ridge against the noise, for a model with ‖θ*‖ ≤ B = B₀/R.  B₀ is a *belief*
    (log-odds within ±20) that the swept cells (ε ≤ 8) agreed with, not a property of
    the data: a model whose best fit has a larger norm (nearly collinear columns:
    ‖θ_OLS‖ ≈ 9·10³ on CASP) is pulled towards 0 by it at every ε.  So that the
    defaults tend to the non-private (unregularized) model as ε → ∞, the belief is
    relaxed beyond ε_c: B₀ grows like √ε, which makes the balanced Λ ≈ E‖b/n‖/B fall
    like 1/(nε) (E‖b/n‖ ∝ 1/√ε for Gaussian noise at large ε) instead of 1/(n√ε).
    A public function of ε only; never part of a privacy proof.

    Parameters
    ----------
    base : float > 0
        :data:`MARGIN_BOUND` or :data:`OUTPUT_MARGIN_BOUND`.
    epsilon : float > 0

    Returns
    -------
    float

    Examples
    --------
    >>> prior_margin(20.0, 1.0), prior_margin(20.0, 1000.0)
    (20.0, 200.0)
    """
    return float(base) * max(1.0, math.sqrt(float(epsilon) / PRIOR_RELAX_ABOVE))


class GLMLoss(ABC):
    """Abstract GLM loss φ(z, y) with z = ⟨θ, x⟩.

    Subclasses implement :meth:`pointwise`, :meth:`derivative`,
    :meth:`second_derivative`, :meth:`lipschitz`, :meth:`smoothness` and
    :attr:`curvature`; everything else (label checks included) is derived here.
    """

    #: short name used by estimators and the CLI
    name: str = "glm"
    #: True when the loss is differentiable everywhere (β < ∞)
    smooth: bool = True
    #: True when labels are a class in {-1, +1}; False for regression losses
    classification: bool = True
    #: public prior bound on the prediction scale R·‖θ*‖ (per class) that objective
    #: perturbation's choice of Δ assumes (:data:`MARGIN_BOUND` for the classification
    #: losses); a regression loss states it in the units of y, so that the fit does
    #: not depend on the units of y (:attr:`dperm.losses.Huber.margin_bound`)
    margin_bound: float = MARGIN_BOUND

    # ----- scalar functions of the linear prediction z -------------------------------
    @abstractmethod
    def pointwise(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """φ(zᵢ, yᵢ) elementwise, shape (n,)."""

    @abstractmethod
    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """∂φ/∂z (zᵢ, yᵢ) elementwise, shape (n,) (a subgradient where φ has a kink)."""

    @abstractmethod
    def second_derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """∂²φ/∂z² (zᵢ, yᵢ) elementwise, shape (n,) (0 at kinks of non-smooth losses)."""

    def value_and_derivative(self, z: np.ndarray, y: np.ndarray):
        """(φ(zᵢ, yᵢ), ∂φ/∂z (zᵢ, yᵢ)) elementwise, each of shape (n,): the fused
        passes of a Design call this (a loss may override it to share work)."""
        return self.pointwise(z, y), self.derivative(z, y)

    def curvature_state(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The per-record curvature φ''(zᵢ, yᵢ), shape (n,), that
        :meth:`apply_curvature` applies (kept across the Hessian-vector products at
        one θ)."""
        return self.second_derivative(z, y)

    def apply_curvature(self, state: np.ndarray, u: np.ndarray) -> np.ndarray:
        """φ''ᵢ·uᵢ for the margins u = X̃v of a Hessian-vector product, shape (n,)."""
        return state * u

    def curvature_product(self, z: np.ndarray, y: np.ndarray, u: np.ndarray) -> np.ndarray:
        """φ''(zᵢ, yᵢ)·uᵢ elementwise, shape (n,): the per-record curvature applied to
        the margins u = X̃v of a Hessian-vector product."""
        return self.apply_curvature(self.curvature_state(z, y), u)

    def check_labels(self, y) -> np.ndarray:
        """Return ``y`` as float64 after checking the loss can take it: labels in
        {−1, +1} for a classification loss, finite reals otherwise (a loss with a
        label bound overrides this).

        Raises
        ------
        LabelError
        """
        return check_binary_labels(y) if self.classification else float_labels(y)

    @abstractmethod
    def lipschitz(self, data_norm: float, **bounds) -> float:
        """Lipschitz constant L of θ ↦ ℓ(θ; x, y) over ‖x‖ ≤ ``data_norm``."""

    @abstractmethod
    def smoothness(self, data_norm: float, **bounds) -> float:
        """Smoothness β (Lipschitz constant of the gradient) over ‖x‖ ≤ ``data_norm``."""

    @property
    @abstractmethod
    def curvature(self) -> float:
        """c = sup_z |∂²φ/∂z²| (``inf`` for non-smooth losses); a loss whose c is a
        constant states it as a class attribute, like ``name``."""

    # ----- derived quantities -------------------------------------------------------
    def _design_terms(self):
        """(elementwise loss, per-record weights or None) for the fused passes of a
        :class:`~dperm.design.Design` (a weighted loss returns its base and weights)."""
        return self, None

    def value(self, theta: np.ndarray, X, y: np.ndarray) -> float:
        """Empirical risk L(θ) = mean φ(⟨θ, xᵢ⟩, yᵢ).

        Parameters
        ----------
        theta : ndarray of shape (d,)
        X : ndarray, csr_matrix or Design of shape (n, d)
        y : ndarray of shape (n,)
        """
        if isinstance(X, Design):
            base, w = self._design_terms()
            return X.glm_value(base, theta, y, weights=w) / X.shape[0]
        return float(np.mean(self.pointwise(_matvec(X, theta), y)))

    def gradient(self, theta: np.ndarray, X, y: np.ndarray) -> np.ndarray:
        """∇L(θ) = (1/n) Xᵀ s, shape (d,)."""
        if isinstance(X, Design):
            base, w = self._design_terms()
            return X.glm_gradient_sum(base, theta, y, weights=w) / X.shape[0]
        s = self.derivative(_matvec(X, theta), y)
        return _rmatvec(X, s) / X.shape[0]

    def value_and_gradient(self, theta: np.ndarray, X, y: np.ndarray) -> tuple[float, np.ndarray]:
        """(L(θ), ∇L(θ)) with one pass over X."""
        n = X.shape[0]
        if isinstance(X, Design):
            base, w = self._design_terms()
            v, g = X.glm_value_and_gradient(base, theta, y, weights=w)
            return v / n, g / n
        z = _matvec(X, theta)
        return float(np.mean(self.pointwise(z, y))), _rmatvec(X, self.derivative(z, y)) / n

    def per_example_gradient_scale(self, theta: np.ndarray, X, y: np.ndarray) -> np.ndarray:
        """sᵢ with ∇ℓ(θ; xᵢ, yᵢ) = sᵢ xᵢ, shape (n,)."""
        return self.derivative(_matvec(X, theta), y)

    def per_example_gradients(self, theta: np.ndarray, X, y: np.ndarray) -> np.ndarray:
        """The (n, d) matrix of per-example gradients (for tests and generic code;
        the fast paths never form it; a Design is materialized here)."""
        s = self.per_example_gradient_scale(theta, X, y)
        if isinstance(X, Design):
            X = X.to_dense()
        if sp.issparse(X):
            return np.asarray(sp.diags(s) @ X.toarray())
        return s[:, None] * X

    def hessian_vector_product(self, theta: np.ndarray, X, y: np.ndarray, v: np.ndarray):
        """∇²L(θ) v = (1/n) Xᵀ (φ''(z) ⊙ X v), shape (d,)."""
        if isinstance(X, Design):
            base, w = self._design_terms()
            return X.glm_hessian_vector(base, theta, y, v, weights=w) / X.shape[0]
        w = self.second_derivative(_matvec(X, theta), y)
        return _rmatvec(X, w * _matvec(X, v)) / X.shape[0]

    def hessian(self, theta: np.ndarray, X, y: np.ndarray) -> np.ndarray:
        """∇²L(θ) = (1/n) Xᵀ diag(φ''(z)) X, shape (d, d) (one pass over X on a Design;
        for Newton steps on narrow designs)."""
        n = X.shape[0]
        if isinstance(X, Design):
            base, w = self._design_terms()
            return X.glm_hessian(base, theta, y, weights=w) / n
        h = self.second_derivative(_matvec(X, theta), y)
        if sp.issparse(X):
            return np.asarray((X.T @ sp.diags(h) @ X).toarray()) / n
        return X.T @ (X * h[:, None]) / n

    def __repr__(self) -> str:
        """``Name(param=value, …)`` from the constructor parameters a loss stores."""
        params = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({params})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.__dict__.items()))))


def check_smooth_glm_loss(loss, requirement: str) -> GLMLoss:
    """``loss`` if it is a smooth :class:`GLMLoss` (``smooth`` and a finite curvature c).

    Parameters
    ----------
    loss : object
    requirement : str
        The message for a non-smooth loss, a :meth:`str.format` template with the
        field ``loss`` (e.g. ``"AMP needs a smooth loss; got {loss!r}."``).

    Raises
    ------
    InvalidPrivacyParameter
        If ``loss`` is not a GLMLoss, or is not smooth (``requirement``).
    """
    if not isinstance(loss, GLMLoss):
        raise InvalidPrivacyParameter(
            f"loss must be a dperm GLMLoss (see dperm.losses.get_loss), got "
            f"{type(loss).__name__}: {loss!r}"
        )
    if not loss.smooth or not math.isfinite(loss.curvature):
        raise InvalidPrivacyParameter(requirement.format(loss=loss))
    return loss


def _check_data_norm(data_norm) -> float:
    return check_data_norm(data_norm)


class ResidualLoss(GLMLoss):
    """A smooth regression loss φ(z − y) of the residual with 0 ≤ φ'' ≤ 1 (squared,
    Huber): curvature c = 1 and β = data_norm² over rows ‖x‖ ≤ data_norm."""

    smooth = True
    classification = False
    curvature = 1.0

    def smoothness(self, data_norm, **bounds):
        """β = data_norm²."""
        return _check_data_norm(data_norm) ** 2


def _finite_or_inf(x: float) -> float:
    return x if math.isfinite(x) else math.inf
