"""Multinomial logistic (softmax cross-entropy) loss for k-class classification.

The parameter is a matrix Θ of shape (d, k); the scores of row x are z = Θᵀx ∈ ℝᵏ
and, with p = softmax(z) and label y ∈ {0, …, k−1},

    ℓ(Θ; x, y) = log Σⱼ e^{zⱼ} − z_y,      ∇_Θ ℓ = x (p − e_y)ᵀ   (an outer product).

So, as for the binary GLM losses, every per-example gradient is determined by
a small vector (here the residual rᵢ = pᵢ − e_{yᵢ} ∈ ℝᵏ instead of a scalar):

* its Frobenius norm is ‖xᵢ (pᵢ − e_{yᵢ})ᵀ‖_F = ‖pᵢ − e_{yᵢ}‖₂ · ‖xᵢ‖₂, computed from
  n k-vectors and the row norms, without forming any d×k per-example matrix;
* a sum of rescaled per-example gradients is one product Xᵀ (c ⊙ R) with R the
  (n, k) matrix of residuals and c the per-example factors — dense and CSR alike.

Constants (over rows with ‖x‖ ≤ R, any Θ):

* Lipschitz: ‖p − e_y‖₂² = (1 − p_y)² + Σ_{j≠y} pⱼ² ≤ 2 (1 − p_y)² ≤ 2, so L = √2 · R;
* smoothness: ∇²_Θ ℓ = (diag(p) − ppᵀ) ⊗ xxᵀ and λ_max(diag(p) − ppᵀ) ≤ 1/2
  (Gershgorin: row j has |entries| summing to 2 pⱼ(1 − pⱼ) ≤ 1/2; compare
  Böhning, "Multinomial logistic regression algorithm", Ann. Inst. Statist.
  Math. 44 (1992) 197–200: diag(p) − ppᵀ ⪯ ½(I − 11ᵀ/k)), so β = R²/2.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp, softmax

from .._validation import check_count
from ..design import Design
from ..exceptions import InvalidDataError, LabelError, PrivacyLeakWarning
from .base import _check_data_norm

__all__ = ["FlatSoftmax", "Softmax"]


def _scores(X, theta: np.ndarray) -> np.ndarray:
    return np.asarray(X @ theta)


def _rmat(X, R: np.ndarray) -> np.ndarray:
    return np.asarray(X.T @ R)


class Softmax:
    """Multinomial logistic loss with k classes; Θ has shape (n_features, k).

    Parameters
    ----------
    n_classes : int, optional
        k ≥ 2.  Give it whenever it is public (e.g. a dataset schema); when
        ``None`` it is read from the labels as ``max(y) + 1`` by
        :meth:`resolve_n_classes`, which warns with :class:`PrivacyLeakWarning`
        (the shape of the release then depends on which labels occur).

    Notes
    -----
    Labels are integers 0 … k−1.  The empirical risk is the *mean* loss.
    This is not a :class:`~dperm.losses.GLMLoss` (Θ is a matrix), but it
    offers the same methods with matrix-valued parameters and gradients.
    """

    name = "softmax"
    smooth = True
    classification = True
    multiclass = True

    def __init__(self, n_classes: int | None = None):
        self.n_classes = None if n_classes is None else check_count(n_classes, "n_classes", 2)

    def __repr__(self) -> str:
        return f"Softmax(n_classes={self.n_classes!r})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.n_classes == other.n_classes

    def __hash__(self) -> int:
        return hash(("Softmax", self.n_classes))

    # ----- labels ---------------------------------------------------------------------
    def check_labels(self, y, n_classes: int | None = None) -> np.ndarray:
        """Return ``y`` as an int64 array after checking every label is an integer
        in 0 … k−1 (k = ``n_classes`` or ``self.n_classes``; only ≥ 0 when both
        are None).

        Raises
        ------
        LabelError
            If a label is not an integer in range.
        """
        k = self.n_classes if n_classes is None else n_classes
        y = np.asarray(y)
        if y.ndim != 1:
            raise LabelError(f"y must be 1-D, got shape {y.shape}")
        if y.dtype.kind not in "biuf":
            raise LabelError(
                "y must hold integer class indices 0..k-1 for the softmax loss, "
                f"got dtype {y.dtype}"
            )
        yf = y.astype(np.float64)
        bad = ~np.isfinite(yf) | (yf != np.round(yf)) | (yf < 0)
        if k is not None:
            bad |= yf >= k
        if bad.any():
            vals = np.unique(y[bad])[:5].tolist()
            rng = "0..k-1" if k is None else f"0..{k - 1}"
            raise LabelError(f"y must hold integer class indices in {rng}, got {vals}")
        return yf.astype(np.int64)

    def resolve_n_classes(self, y) -> int:
        """k: ``self.n_classes`` if set, else ``max(y) + 1`` read from the labels
        (with a :class:`PrivacyLeakWarning`).

        Raises
        ------
        LabelError
            If fewer than 2 classes result.
        """
        if self.n_classes is not None:
            return self.n_classes
        y = self.check_labels(y)
        k = int(y.max()) + 1 if y.size else 0
        if k < 2:
            raise LabelError(f"the softmax loss needs at least 2 classes, got k={k}")
        warnings.warn(
            f"n_classes was read from the labels (k={k}); pass Softmax(n_classes=k) from a "
            "public schema to avoid this leak",
            PrivacyLeakWarning,
            stacklevel=2,
        )
        return k

    def _theta(self, theta, X) -> np.ndarray:
        theta = np.asarray(theta, dtype=np.float64)
        if theta.ndim != 2 or theta.shape[0] != X.shape[1]:
            raise InvalidDataError(
                f"theta must have shape (n_features, n_classes) = ({X.shape[1]}, k), "
                f"got {theta.shape}"
            )
        return theta

    # ----- values and gradients -----------------------------------------------------
    def probabilities(self, theta, X) -> np.ndarray:
        """p = softmax(Θᵀx) for every row, shape (n, k)."""
        theta = self._theta(theta, X)
        return softmax(_scores(X, theta), axis=1)

    def predict(self, theta, X) -> np.ndarray:
        """argmaxⱼ zⱼ for every row, shape (n,)."""
        theta = self._theta(theta, X)
        return np.argmax(_scores(X, theta), axis=1)

    def pointwise(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """ℓᵢ = logsumexp(zᵢ) − zᵢ[yᵢ] from the (n, k) scores, shape (n,)."""
        return logsumexp(Z, axis=1) - Z[np.arange(Z.shape[0]), y]

    def derivative(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """∂ℓᵢ/∂zᵢ = pᵢ − e_{yᵢ} from the (n, k) scores (= :meth:`residual_from_scores`):
        the block function of the Design's fused gradient pass."""
        return self.residual_from_scores(Z, y)

    def value_and_derivative(self, Z: np.ndarray, y: np.ndarray):
        """(ℓᵢ, pᵢ − e_{yᵢ}) from the (n, k) scores with one exponential of Z, shapes
        (n,) and (n, k)."""
        rows = np.arange(Z.shape[0])
        top = Z.max(axis=1, keepdims=True)
        E = np.exp(Z - top)
        total = E.sum(axis=1)
        value = np.log(total) + top[:, 0] - Z[rows, y]
        E /= total[:, None]
        E[rows, y] -= 1.0
        return value, E

    def curvature_state(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """P = softmax(Z), shape (n, k): what the per-record Hessian diag(pᵢ) − pᵢpᵢᵀ
        of ℓ in the scores depends on."""
        return softmax(Z, axis=1)

    @staticmethod
    def apply_curvature(P: np.ndarray, U: np.ndarray) -> np.ndarray:
        """(diag(pᵢ) − pᵢpᵢᵀ) uᵢ for every row, shape (n, k), U = X̃V."""
        PU = P * U
        PU -= P * PU.sum(axis=1, keepdims=True)
        return PU

    def curvature_product(self, Z: np.ndarray, y: np.ndarray, U: np.ndarray) -> np.ndarray:
        """(diag(pᵢ) − pᵢpᵢᵀ) uᵢ for every row, shape (n, k): the per-record Hessian of
        ℓ in the scores applied to U = X̃V (Hessian-vector products)."""
        return self.apply_curvature(self.curvature_state(Z, y), U)

    def residual_from_scores(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """R = softmax(Z) − onehot(y), shape (n, k) (a new array)."""
        R = softmax(Z, axis=1)
        R[np.arange(Z.shape[0]), y] -= 1.0
        return R

    def residual(self, theta, X, y) -> np.ndarray:
        """rᵢ = pᵢ − e_{yᵢ}: ∇_Θ ℓ(Θ; xᵢ, yᵢ) = xᵢ rᵢᵀ, shape (n, k).

        The analogue of :meth:`GLMLoss.per_example_gradient_scale`.
        """
        theta = self._theta(theta, X)
        return self.residual_from_scores(_scores(X, theta), np.asarray(y, dtype=np.int64))

    def value(self, theta, X, y) -> float:
        """Empirical risk L(Θ) = mean ℓ(Θ; xᵢ, yᵢ)."""
        return self.value_and_gradient(theta, X, y)[0]

    def gradient(self, theta, X, y) -> np.ndarray:
        """∇L(Θ) = (1/n) Xᵀ R, shape (d, k)."""
        return self.value_and_gradient(theta, X, y)[1]

    def value_and_gradient(self, theta, X, y) -> tuple[float, np.ndarray]:
        """(L(Θ), ∇L(Θ)) with one product XΘ (on a Design: one fused pass over X,
        :meth:`~dperm.design.Design.glm_value_and_gradient`)."""
        theta = self._theta(theta, X)
        y = np.asarray(y, dtype=np.int64)
        n = X.shape[0]
        if isinstance(X, Design):
            value, grad = X.glm_value_and_gradient(self, theta, y)
            return value / n, grad / n
        value, R = self.value_and_derivative(_scores(X, theta), y)
        return float(np.mean(value)), _rmat(X, R) / n

    def per_example_gradients(self, theta, X, y) -> np.ndarray:
        """The (n, d, k) array of per-example gradients xᵢ rᵢᵀ (for tests; the
        fast paths never form it)."""
        R = self.residual(theta, X, y)
        Xd = X.toarray() if sp.issparse(X) else np.asarray(X)
        return Xd[:, :, None] * R[:, None, :]

    def per_example_gradient_norms(self, theta, X, y, row_norms=None) -> np.ndarray:
        """‖xᵢ rᵢᵀ‖_F = ‖rᵢ‖₂ ‖xᵢ‖₂, shape (n,), without forming the gradients.

        ``row_norms`` (shape (n,)) may be passed when precomputed.
        """
        from .._validation import row_norms as _row_norms

        R = self.residual(theta, X, y)
        xn = _row_norms(X) if row_norms is None else np.asarray(row_norms)
        return np.sqrt(np.einsum("ij,ij->i", R, R)) * xn

    def hessian_vector_product(self, theta, X, y, V) -> np.ndarray:
        """∇²L(Θ)[V] = (1/n) Xᵀ (P ⊙ U − P ⊙ rowsum(P ⊙ U)), U = XV; shape (d, k)
        (on a Design: one fused pass, :meth:`~dperm.design.Design.glm_hessian_vector`)."""
        theta = self._theta(theta, X)
        V = np.asarray(V, dtype=np.float64)
        if isinstance(X, Design):
            y = np.asarray(y, dtype=np.int64)
            return X.glm_hessian_vector(self, theta, y, V) / X.shape[0]
        W = self.curvature_product(_scores(X, theta), y, _scores(X, V))
        return _rmat(X, W) / X.shape[0]

    # ----- constants -----------------------------------------------------------------
    @property
    def curvature(self) -> float:
        """sup λ_max(diag(p) − ppᵀ) ≤ 1/2 (Böhning 1992)."""
        return 0.5

    def lipschitz(self, data_norm, **bounds) -> float:
        """L = √2 · data_norm: ‖p − e_y‖₂ ≤ √2 (see the module docstring)."""
        return math.sqrt(2.0) * _check_data_norm(data_norm)

    def smoothness(self, data_norm, **bounds) -> float:
        """β = data_norm² / 2 (λ_max(diag(p) − ppᵀ) ≤ 1/2)."""
        return _check_data_norm(data_norm) ** 2 / 2.0

    def zeros(self, n_features: int, n_classes: int | None = None) -> np.ndarray:
        """An all-zero Θ of shape (n_features, k)."""
        k = self.n_classes if n_classes is None else n_classes
        if not isinstance(k, numbers.Integral) or k < 2:
            raise LabelError(f"n_classes must be an integer ≥ 2, got {k!r}")
        return np.zeros((int(n_features), int(k)))


class FlatSoftmax:
    """:class:`Softmax` with a flattened parameter θ = vec(Θ) of shape (d·k,)
    (C order, Θ of shape (d, k)), so that the vector solvers of
    :mod:`dperm.solvers` minimize it unchanged.

    Values, gradients (flattened) and Hessian-vector products are those of the
    wrapped loss; ``curvature`` (1/2) and ``smooth`` are its own.  Used by
    objective and output perturbation for the multinomial model.

    Parameters
    ----------
    loss : Softmax
    n_classes : int ≥ 2
        k (the shape of Θ; must be public).
    """

    smooth = True
    classification = True
    multiclass = True

    def __init__(self, loss: Softmax, n_classes: int):
        self.loss = loss
        self.n_classes = check_count(n_classes, "n_classes", 2)
        self.name = loss.name

    def __repr__(self) -> str:
        return f"FlatSoftmax({self.loss!r}, n_classes={self.n_classes})"

    @property
    def curvature(self) -> float:
        """sup λ_max(diag(p) − ppᵀ) ≤ 1/2."""
        return self.loss.curvature

    def matrix(self, theta, X) -> np.ndarray:
        """θ of shape (d·k,) as Θ of shape (d, k)."""
        return np.asarray(theta, dtype=np.float64).reshape(X.shape[1], self.n_classes)

    def value(self, theta, X, y) -> float:
        """L(Θ)."""
        return self.loss.value(self.matrix(theta, X), X, y)

    def gradient(self, theta, X, y) -> np.ndarray:
        """vec ∇L(Θ), shape (d·k,)."""
        return self.loss.gradient(self.matrix(theta, X), X, y).ravel()

    def value_and_gradient(self, theta, X, y) -> tuple[float, np.ndarray]:
        """(L(Θ), vec ∇L(Θ))."""
        v, g = self.loss.value_and_gradient(self.matrix(theta, X), X, y)
        return v, g.ravel()

    def hessian_vector_product(self, theta, X, y, v) -> np.ndarray:
        """vec ∇²L(Θ)[V], V = ``v`` reshaped to (d, k)."""
        V = self.matrix(v, X)
        return self.loss.hessian_vector_product(self.matrix(theta, X), X, y, V).ravel()

    def lipschitz(self, data_norm, **bounds) -> float:
        """√2·R (Frobenius)."""
        return self.loss.lipschitz(data_norm, **bounds)

    def smoothness(self, data_norm, **bounds) -> float:
        """R²/2."""
        return self.loss.smoothness(data_norm, **bounds)
