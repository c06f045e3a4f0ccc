"""Differentially private PCA by the Gaussian mechanism on the second-moment matrix
("Analyze Gauss": Dwork, Talwar, Thakurta, Zhang, "Analyze Gauss: Optimal Bounds for
Privacy-Preserving Principal Component Analysis", STOC 2014, Algorithm 1) — the PCA
projection layer of Abadi et al. (CCS 2016, §4 "Differentially private PCA" and §5.1).

Mechanism.  Every row is mapped onto the ℓ2 ball of the public radius R (``mode=
"ball"``: rows above R are scaled down to it) or onto its sphere (``mode="sphere"``:
every non-zero row scaled to norm R — Abadi et al.'s "normalize each vector to unit
ℓ2 norm"); a per-record public map.  The mechanism releases the upper triangle
(diagonal included) of A = Σᵢ xᵢxᵢᵀ plus i.i.d. N(0, (s·Δ)²) noise, mirrors it into a
symmetric matrix (post-processing) and keeps the top-k eigenvectors.

Sensitivity of the released upper triangle u(A) (derived here; DTTZ state the
Frobenius bound for unit rows).  For a symmetric Δ, ‖u(Δ)‖₂² = (‖Δ‖_F² + Σⱼ Δⱼⱼ²)/2
≤ ‖Δ‖_F².

* add/remove-one: Δ = xxᵀ, ‖u(Δ)‖₂² = (‖x‖⁴ + Σⱼ xⱼ⁴)/2 ≤ ‖x‖⁴ ≤ R⁴, so Δ₂ = R²
  (attained by x = R·e₁);
* replace-one: Δ = xxᵀ − x′x′ᵀ, ‖u(Δ)‖₂² ≤ ‖Δ‖_F² = ‖x‖⁴ + ‖x′‖⁴ − 2(xᵀx′)² ≤ 2R⁴,
  so Δ₂ = √2·R² (attained by x = R·e₁, x′ = R·e₂).

A = Σ xᵢxᵢᵀ is a sum, not a mean: no constant depends on the record count, so the
add/remove guarantee needs no public size.  The event is ``Gaussian(s)`` under the
chosen relation (a Gaussian mechanism of multiplier s, μ = 1/s in GDP terms); s is the
analytic-Gaussian multiplier of (ε, δ) (Balle & Wang, ICML 2018, Thm 8) when DPPCA is
used alone, or — inside :class:`~dperm.estimators.mlp.DPMLPClassifier` — chosen with the
training noise in one calibration of the composed event (Abadi et al. account the
PCA and the training together, §5.1).

:class:`DPPCA` lives here, next to the network code that calibrates it jointly, and is
re-exported as ``dperm.preprocessing.DPPCA``.
"""

from __future__ import annotations

import math
import warnings
from numbers import Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._docstrings import TRANSFORMER_FIT, compose_doc
from .._parameters import (
    RANDOM_STATE,
    Accepted,
    Count,
    Names,
    Number,
    positive,
    store_params,
    validate_params,
)
from .._rng import check_random_state
from .._validation import (
    MAX_DATA_NORM,
    check_count,
    check_data_norm,
    check_delta,
    check_epsilon,
    check_positive,
    rows_per_chunk,
)
from ..accounting.active import accounted_fit, charge, default_delta
from ..accounting.events import ADD_REMOVE, Gaussian, check_neighbouring
from ..accounting.gaussian import analytic_gaussian_noise_multiplier
from ..backends.rows import safe_row_norms
from ..exceptions import ClippingWarning, InvalidDataError, InvalidPrivacyParameter
from ..exceptions import UnknownNameError as _UnknownName
from ..mechanisms.gaussian import gaussian_noise

__all__ = ["DPPCA", "analyze_gauss", "covariance_sensitivity", "resolve_delta", "row_scales"]

MODES = ("ball", "sphere")


def covariance_sensitivity(data_norm: float, neighbouring: str) -> float:
    """ℓ2 sensitivity of the upper triangle of Σᵢ xᵢxᵢᵀ over rows of norm ≤ R
    (module docstring): R² under add/remove-one, √2·R² under replace-one.

    Examples
    --------
    >>> covariance_sensitivity(1.0, "add-remove")
    1.0
    >>> round(covariance_sensitivity(2.0, "replace-one"), 6)
    5.656854
    """
    R = check_data_norm(data_norm)
    nb = check_neighbouring(neighbouring)
    return R * R if nb == ADD_REMOVE else math.sqrt(2.0) * R * R


def resolve_delta(delta, neighbouring: str, n: int) -> float:
    """δ of a fit: the given one, or :func:`~dperm.accounting.active.default_delta` =
    min(1/n², 10⁻⁵) under replace-one (n public; the estimators' default).  Under
    add/remove the record count is private, so δ must be given.

    Raises
    ------
    InvalidPrivacyParameter
        ``delta=None`` under add/remove or with n < 2; δ ∉ (0, 1).
    """
    if delta is not None:
        return check_delta(delta, allow_zero=False)
    if check_neighbouring(neighbouring) == ADD_REMOVE:
        raise InvalidPrivacyParameter(
            "under neighbouring='add-remove' delta must be given (the default 1/n² would "
            "read the private record count), got delta=None"
        )
    return default_delta(int(n), budget_share=False)  # n < 2: refused, naming delta


def row_scales(X, data_norm: float, mode: str) -> tuple[np.ndarray, int]:
    """(per-row scale factors sᵢ so that ‖sᵢxᵢ‖ ≤ R, rows scaled down).  ``"ball"``:
    sᵢ = min(1, R/‖xᵢ‖); ``"sphere"``: sᵢ = R/‖xᵢ‖ (0 for a zero row)."""
    if mode not in MODES:
        raise _UnknownName(f"unknown mode {mode!r}; choose one of {list(MODES)}")
    norms = safe_row_norms(X)  # exact to the float maximum; NaN/∞ and 1e308 refused (#32)
    safe = np.where(norms > 0, norms, 1.0)
    if mode == "sphere":
        return np.where(norms > 0, data_norm / safe, 0.0), int(np.count_nonzero(norms > data_norm))
    over = norms > data_norm
    return np.where(over, data_norm / safe, 1.0), int(np.count_nonzero(over))


def _second_moment(X, scales: np.ndarray) -> np.ndarray:
    """Σᵢ sᵢ² xᵢxᵢᵀ, float64, block by block (X is never copied whole)."""
    d = X.shape[1]
    A = np.zeros((d, d))
    step = rows_per_chunk(d)
    for a in range(0, X.shape[0], step):
        B = np.asarray(X[a : a + step], dtype=np.float64) * scales[a : a + step, None]
        A += B.T @ B
    return A


def analyze_gauss(
    X,
    n_components: int,
    *,
    noise_multiplier: float,
    data_norm: float = 1.0,
    neighbouring: str = "replace-one",
    mode: str = "ball",
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, Gaussian, int]:
    """The top-``n_components`` eigenvectors of Σᵢ xᵢxᵢᵀ + E (rows mapped onto the ball
    of radius R), E symmetric with i.i.d. N(0, (s·Δ₂)²) upper triangle (DTTZ 2014,
    Algorithm 1; sensitivity Δ₂ from :func:`covariance_sensitivity`).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    n_components : int
        k ≤ d.
    noise_multiplier : float
        s > 0: noise standard deviation / Δ₂.
    data_norm : float, default 1.0
        R, the public row bound.
    neighbouring : {"replace-one", "add-remove"}
    mode : {"ball", "sphere"}
        Rows clipped to the ball, or every row scaled onto the sphere of radius R.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    components : ndarray of shape (k, d)
        Orthonormal rows, by decreasing noisy eigenvalue.
    eigenvalues : ndarray of shape (k,)
        The noisy eigenvalues (private: post-processing of the release).
    event : Gaussian
        ``Gaussian(s, neighbouring)``.
    n_clipped : int
        Rows with norm above R (diagnostic, not private).

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, UnknownNameError
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0:
        raise InvalidDataError(f"X must have shape (n_samples, n_features), got {X.shape}")
    d = X.shape[1]
    k = check_count(n_components, "n_components")
    if k > d:
        raise InvalidPrivacyParameter(f"n_components must be ≤ n_features={d}, got {k}")
    s = check_positive(noise_multiplier, "noise_multiplier")
    R = check_data_norm(data_norm)
    nb = check_neighbouring(neighbouring)
    rng = check_random_state(random_state)
    scales, n_clipped = row_scales(X, R, mode)
    if not np.all(np.isfinite(scales)):
        raise InvalidDataError("X contains NaN or infinite values")
    A = _second_moment(X, scales)
    std = s * covariance_sensitivity(R, nb)
    iu = np.triu_indices(d)
    E = np.zeros((d, d))
    E[iu] = gaussian_noise(iu[0].size, std, rng)
    E = E + np.triu(E, 1).T  # mirror: post-processing of the released upper triangle
    w, V = np.linalg.eigh(A + E)
    order = np.argsort(w)[::-1][:k]
    return V[:, order].T.copy(), w[order], Gaussian(s, neighbouring=nb), n_clipped


class DPPCA(TransformerMixin, BaseEstimator):
    """Differentially private PCA (Analyze Gauss, DTTZ STOC 2014; Abadi et al. 2016, §4).

    ``fit`` releases the top principal directions of the (uncentred) second-moment
    matrix of the rows mapped onto the ball of radius ``data_norm``; ``transform``
    applies the same row map and projects: x ↦ V(sᵢx), rows of norm ≤ ``data_norm``
    (the public ``row_norm_bound_`` for the next estimator).  No centring (the mean
    would need its own budget; Abadi et al. do not centre either).

    Parameters
    ----------
    n_components : int, default 60
    epsilon : float, default 1.0
    delta : float, optional
        Default min(1/n², 10⁻⁵) under replace-one (n public); required under add/remove.
    data_norm : float, default 1.0
        Public row bound R.
    mode : {"ball", "sphere"}, default "ball"
        "sphere" scales every row to norm R (Abadi et al.), "ball" only clips.
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
    noise_multiplier : float, optional
        s: overrides the (ε, δ) calibration (the accounted ε is then that of s).
    random_state : None, int, SeedSequence or Generator

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    explained_variance_ : ndarray of shape (n_components,)
        Noisy eigenvalues of Σ xᵢxᵢᵀ (private).
    noise_multiplier_ : float
    dp_event_ : Gaussian
    epsilon_, delta_ : float
        ε certified at δ (the analytic Gaussian curve).
    row_norm_bound_ : float
    n_clipped_ : int
        Rows above R (diagnostic, not private).

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, UnknownNameError

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.preprocessing import DPPCA
    >>> rng = np.random.default_rng(0)
    >>> X = np.clip(rng.normal(size=(5000, 5)), -2, 2) * [3, 1, 0.1, 0.1, 0.1] / 7  # norms ≤ 1
    >>> pca = DPPCA(n_components=1, epsilon=1.0, random_state=0).fit(X)
    >>> round(abs(float(pca.components_[0, 0])), 3)
    1.0
    """

    #: what each parameter accepts, checked first in ``fit`` (:mod:`dperm._parameters`)
    _parameter_constraints: ClassVar[dict] = {
        "n_components": [Count(1)],
        "epsilon": [positive()],
        "delta": [None, Number(Real, 0, 1)],
        "data_norm": [positive(MAX_DATA_NORM, closed="right")],
        "mode": [Names(MODES)],
        "neighbouring": [Accepted(check_neighbouring, "'replace-one' or 'add-remove'")],
        "noise_multiplier": [None, positive()],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        n_components=60,
        *,
        epsilon=1.0,
        delta=None,
        data_norm=1.0,
        mode="ball",
        neighbouring="replace-one",
        noise_multiplier=None,
        random_state=None,
    ):
        store_params(self, locals())

    def _privacy(self, n: int) -> tuple[float, float, float]:
        """(s, ε, δ) from the parameters (public inputs and n only under replace-one)."""
        delta = resolve_delta(self.delta, self.neighbouring, n)
        if self.noise_multiplier is None:
            eps = check_epsilon(self.epsilon)
            return analytic_gaussian_noise_multiplier(eps, delta), eps, delta
        from ..accounting.gaussian import gaussian_epsilon

        s = check_positive(self.noise_multiplier, "noise_multiplier")
        return s, float(gaussian_epsilon(s, delta)), delta

    @accounted_fit  # reserve before the data is read, commit dp_event_ (or cancel)
    @compose_doc(fit=TRANSFORMER_FIT)
    def fit(self, X, y=None):
        """Release the private principal directions.

        {fit}
        """
        validate_params(self)  # every parameter, before the data and any reservation
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[0] == 0 or X.dtype.kind not in "fiu":
            raise InvalidDataError(
                f"X must be a real array of shape (n_samples, n_features), got shape {X.shape}"
            )
        if not np.isfinite(X).all():  # refused before the reservation: nothing charged
            raise InvalidDataError("X contains NaN or infinity; impute or drop those values first")
        s, eps, delta = self._privacy(X.shape[0])
        charge(Gaussian(s, neighbouring=check_neighbouring(self.neighbouring)), "DPPCA")
        comps, eig, event, n_clipped = analyze_gauss(
            X,
            self.n_components,
            noise_multiplier=s,
            data_norm=self.data_norm,
            neighbouring=self.neighbouring,
            mode=self.mode,
            random_state=self.random_state,
        )
        if n_clipped and self.mode == "ball":
            warnings.warn(
                f"{n_clipped} row(s) had an ℓ2 norm above data_norm={self.data_norm:g} and "
                "were clipped to it",
                ClippingWarning,
                stacklevel=3,  # +1: fit runs inside accounted_fit
            )
        self.components_, self.explained_variance_ = comps, eig
        self.noise_multiplier_ = s
        self.dp_event_ = event
        self.epsilon_, self.delta_ = eps, delta
        self.row_norm_bound_ = float(self.data_norm)
        self.n_clipped_ = n_clipped
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):
        """Rows mapped onto the ball (or sphere) of radius ``data_norm``, then projected:
        shape (n_samples, n_components), float64."""
        check_is_fitted(self, "components_")
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise InvalidDataError(
                f"X must have shape (n_samples, {self.n_features_in_}), got {X.shape}"
            )
        scales, _ = row_scales(X, float(self.data_norm), self.mode)
        out = np.empty((X.shape[0], self.components_.shape[0]))
        step = rows_per_chunk(X.shape[1])
        for a in range(0, X.shape[0], step):
            B = np.asarray(X[a : a + step], dtype=np.float64)
            out[a : a + step] = (B @ self.components_.T) * scales[a : a + step, None]
        return out
