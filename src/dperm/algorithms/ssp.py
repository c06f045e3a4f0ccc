"""Sufficient-statistics perturbation for least squares: SSP and AdaSSP.

Wang, Y.-X. (2018), "Revisiting differentially private linear regression:
optimal and adaptive prediction & estimation in unbounded domain", UAI 2018
(arXiv:1803.02596), Algorithm 2 (AdaSSP) and the SSP baseline it improves on
(Vu & Slavkovic 2009; Foulds et al. 2016).

Least squares depends on the data only through XᵀX and Xᵀy.  SSP releases both
with Gaussian noise and solves the noisy normal equations; AdaSSP additionally
releases a noisy λ_min of the second-moment matrix and adds the ridge
λ = max(0, η − λ̃_min), where η bounds the operator norm of the noise matrix
with probability ≥ 1 − ρ, so that the perturbed system stays well conditioned
exactly when the data do not already make it so.

Neighbouring relation: **replace-one**, n public.  Assumptions (public
inputs, never read off the data): ‖xᵢ‖₂ ≤ R = ``data_norm`` (rows above it are
scaled down to it and counted) and |yᵢ| ≤ B = ``label_bound`` (targets beyond
are clipped to ±B and counted).  No Lipschitz constant, smoothness or
constraint set is needed.

Sensitivities under replace-one (record (x, y) replaced by (x′, y′); derived
here, the paper states add/remove ones):

* XᵀX changes by D = xxᵀ − x′x′ᵀ, ‖D‖_F² = ‖x‖⁴ + ‖x′‖⁴ − 2(xᵀx′)² ≤ 2R⁴, so
  Δ₂ = √2 R² (tight: x ⟂ x′).  The released vector is (Aᵢᵢ, √2 Aᵢⱼ)_{i<j},
  whose ℓ2 norm is ‖A‖_F, with N(0, s²) noise per coordinate; rescaling the
  off-diagonal part by 1/√2 (post-processing) gives the symmetric noise
  matrix E = s (G + Gᵀ)/2, G iid N(0, 1): variance s² on the diagonal, s²/2
  off it.
* Xᵀy changes by xy − x′y′, norm ≤ 2RB = Δ₃ (tight: x′ = −x, y′ = y).
* λ_min(XᵀX): D is a difference of two PSD rank-one matrices, so by Weyl's
  inequality |Δλ_min| ≤ max(‖x‖², ‖x′‖²) ≤ R² = Δ₁.  With an intercept column
  (``intercept_scaling``), λ_min of the *centered* scatter matrix
  S = Σ (xᵢ − x̄)(xᵢ − x̄)ᵀ of the other columns is released instead:
  S(D) ⪯ Σᵢ (xᵢ − c)(xᵢ − c)ᵀ for every c, so S(D′) ⪯ S(D) + (x′ − x̄)(x′ − x̄)ᵀ
  and |Δλ_min(S)| ≤ ‖x′ − x̄‖² ≤ (2R)² = Δ₁ (and symmetrically).

Calibration.  The three releases are Gaussian mechanisms with multipliers
σⱼ (noise std σⱼΔⱼ) on the same data, a composition that is exactly a Gaussian
mechanism with σ = (Σ σⱼ⁻²)^{−1/2} (Dong, Roth & Su 2019, Corollary 3.3).  σ is
the analytic Gaussian multiplier for (ε, δ) (Balle & Wang 2018, Theorem 8,
:func:`dperm.accounting.analytic_gaussian_noise_multiplier`) and the budget is
split as σⱼ = σ/√wⱼ with Σwⱼ = 1 (``split``; the paper splits (ε, δ) in
equal thirds, we split the GDP budget μ² = 1/σ² in thirds by default, which is
tighter than three (ε/3, δ/3) mechanisms).  The event is
``Composed((Gaussian(σ₁), Gaussian(σ₂), Gaussian(σ₃)))`` (SSP: two parts).

Post-processing (free; does not touch the data):

* η = s₂ (√(2k) + √(2 ln(2/ρ))) bounds ‖E‖_op with probability ≥ 1 − ρ
  (E λ_max((G+Gᵀ)/2) ≤ √(2k) for the k×k Gaussian orthogonal ensemble, and
  the spectral norm is 1-Lipschitz in G, so each tail is ≤ e^{−t²/2}); the
  paper uses the looser s √(k ln(2k²/ρ)) (a union bound over entries).
* λ̃_min = max(0, λ̂_min − s₁ √(ln(6/δ))) (the paper's shift: a high-probability
  lower bound of λ_min), λ = max(0, η − λ̃_min) (Algorithm 2, step 2).
* With an intercept column the ridge acts on the Schur complement of the
  intercept (the centered second moments) and the intercept is not
  penalized — as in scikit-learn's Ridge; this is a function of the released
  statistics only.
* PSD-safe solve: the matrix M = Ĉ + (λ + ``ridge``) I is eigendecomposed and
  eigenvalues below the floor τ = s₂ (one noise standard deviation of a
  diagonal entry) are raised to τ before solving.  With AdaSSP this binds
  only with probability ≤ ρ; for SSP it replaces an indefinite noisy XᵀX
  (which makes the plain solve explode) by its spectral projection onto
  {M ⪰ τI}.  The number of raised eigenvalues is reported.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._rng import check_random_state
from .._validation import check_nonnegative, check_positive, check_probability, row_norms
from ..accounting.events import Composed, Gaussian
from ..accounting.gaussian import analytic_gaussian_noise_multiplier
from ..design import Design
from ..exceptions import InvalidDataError, InvalidPrivacyParameter, LabelError
from .base import Result, check_rows, check_target, private_fit

__all__ = ["fit", "noise_scales", "sufficient_statistics"]

#: rows per block when the Gram matrix of clipped rows is accumulated
_CHUNK = 8192


def sufficient_statistics(X, y, clip_scale: np.ndarray | None = None):
    """(XᵀX, Xᵀy) of the rows scaled by ``clip_scale`` (None = unscaled).

    Dense X is processed in blocks of rows, so at most one (block, d)
    temporary exists besides X itself; CSR X uses sparse products.

    Parameters
    ----------
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    clip_scale : ndarray of shape (n,) or None

    Returns
    -------
    A : ndarray of shape (d, d)
    b : ndarray of shape (d,)
    """
    if isinstance(X, Design):  # the estimators' view: block by block, X never copied
        w = None if clip_scale is None else clip_scale * clip_scale
        return X.gram(w), X.rmatvec(y if clip_scale is None else clip_scale * y)
    if sp.issparse(X):
        if clip_scale is None:
            A = (X.T @ X).toarray()
            b = np.asarray(X.T @ y).ravel()
        else:
            A = (X.T @ sp.diags(clip_scale**2) @ X).toarray()
            b = np.asarray(X.T @ (clip_scale * y)).ravel()
        return np.asarray(A, dtype=np.float64), b
    if clip_scale is None:
        return X.T @ X, X.T @ y
    d = X.shape[1]
    A = np.zeros((d, d))
    for start in range(0, X.shape[0], _CHUNK):  # blocks of rows, not single rows
        blk = X[start : start + _CHUNK]
        c = clip_scale[start : start + _CHUNK]
        A += blk.T @ (blk * (c * c)[:, None])
    return A, X.T @ (clip_scale * y)


def noise_scales(
    epsilon: float,
    delta: float,
    data_norm: float,
    label_bound: float,
    *,
    adaptive: bool = True,
    intercept: bool = False,
    split=None,
) -> dict:
    """Noise multipliers σⱼ and standard deviations sⱼ = σⱼΔⱼ of the releases.

    Parameters
    ----------
    epsilon, delta : float
        Target (ε, δ), δ > 0.
    data_norm, label_bound : float
        R and B (public bounds).
    adaptive : bool, default True
        AdaSSP (three releases) or SSP (two).
    intercept : bool, default False
        Whether λ_min is that of the centered scatter (Δ₁ = 4R²) or of XᵀX (R²).
    split : sequence of float or None
        Budget fractions wⱼ (> 0, summing to 1) of (λ_min, XᵀX, Xᵀy), or of
        (XᵀX, Xᵀy) for SSP; default equal parts.

    Returns
    -------
    dict
        ``sigma`` (the composed multiplier), ``multipliers`` (σⱼ),
        ``sensitivities`` (Δⱼ), ``stds`` (sⱼ), keyed in the order above.
    """
    eps, dlt, R = check_target(epsilon, delta, data_norm, allow_zero_delta=False)
    B = check_positive(label_bound, "label_bound")
    parts = 3 if adaptive else 2
    if split is None:
        w = np.full(parts, 1.0 / parts)
    else:
        w = np.asarray(split, dtype=np.float64).ravel()
        if w.shape != (parts,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise InvalidPrivacyParameter(
                f"split must hold {parts} positive budget fractions, got {split!r}"
            )
        if abs(w.sum() - 1.0) > 1e-9:
            raise InvalidPrivacyParameter(f"split must sum to 1, got {split!r} (sum {w.sum()!r})")
    sigma = analytic_gaussian_noise_multiplier(eps, dlt)
    sens = [math.sqrt(2.0) * R * R, 2.0 * R * B]
    if adaptive:
        sens = [(4.0 if intercept else 1.0) * R * R, *sens]
    mult = [sigma / math.sqrt(float(wj)) for wj in w]
    return {
        "sigma": sigma,
        "multipliers": mult,
        "sensitivities": sens,
        "stds": [m * s for m, s in zip(mult, sens, strict=True)],
    }


def _operator_norm_bound(std: float, k: int, rho: float) -> float:
    """η with P(‖E‖_op > η) ≤ ρ for E = std·(G + Gᵀ)/2, G a k×k iid N(0,1) matrix."""
    return std * (math.sqrt(2.0 * k) + math.sqrt(2.0 * math.log(2.0 / rho)))


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    X,
    y,
    *,
    epsilon: float,
    delta: float,
    data_norm: float,
    label_bound: float,
    adaptive: bool = True,
    ridge: float = 0.0,
    intercept_scaling: float | None = None,
    rho: float = 0.05,
    split=None,
    random_state=None,
) -> Result:
    """Private least squares by (adaptive) sufficient-statistics perturbation.

    Wang (2018), Algorithm 2 (AdaSSP; ``adaptive=False``: SSP), calibrated with
    the analytic Gaussian mechanism under the replace-one relation (see the
    module docstring for the sensitivities and the composition).

    Parameters
    ----------
    X : array-like or csr_matrix of shape (n_samples, n_features)
        Rows with ‖x‖ > ``data_norm`` are scaled down to it (counted in
        ``diagnostics["n_clipped"]``); with ``intercept_scaling`` = s the
        feature part is clipped to √(R² − s²) and the intercept column is kept.
        X itself is never modified or copied.
    y : array-like of shape (n_samples,)
        Targets; values beyond ±``label_bound`` are clipped (counted in
        ``diagnostics["n_labels_clipped"]``).
    epsilon : float > 0
    delta : float in (0, 1)
    data_norm : float > 0
        Public bound R on the row norm (including any intercept column).
    label_bound : float > 0
        Public bound B on |y|.
    adaptive : bool, default True
        AdaSSP (noisy λ_min, adaptive ridge) or plain SSP.
    ridge : float ≥ 0, default 0
        A public ridge added to the (centered) noisy XᵀX on top of the
        adaptive one, in the units of XᵀX (n·Λ for the mean objective
        (1/2n)‖Xθ − y‖² + (Λ/2)‖θ‖²).
    intercept_scaling : float > 0 or None, default None
        If given, the last column of X is the intercept column, equal to this
        public constant in every row; its coefficient is not penalized.
    rho : float in (0, 1), default 0.05
        Failure probability of the bound η on the noise's operator norm.
    split : sequence of float or None
        Budget fractions, see :func:`noise_scales`.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (n_features,); ``event`` the composition of the
        Gaussian releases (replace-one); ``diagnostics`` with ``lambda``,
        ``eta``, ``noise_std``, ``noise_multiplier``, ``n_clipped``,
        ``n_labels_clipped``, ``n_eigen_clipped``, ``neighbouring``,
        ``epsilon``, ``delta`` and the released (private) statistics
        ``lambda_min_released``, ``xtx_released``, ``xty_released``, from
        which θ can be recomputed with another ridge at no privacy cost.

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``epsilon``, ``delta``, ``data_norm``, ``label_bound``, ``ridge``,
        ``rho`` or ``split``.
    InvalidDataError
        NaN/inf or malformed X, y; an intercept column that is not constant.
    LabelError
        Non-numeric targets.
    """
    eps, dlt, R = check_target(epsilon, delta, data_norm, allow_zero_delta=False)
    B = check_positive(label_bound, "label_bound")
    ridge = check_nonnegative(ridge, "ridge")
    rho = check_probability(rho, "rho")
    if rho >= 1.0:
        raise InvalidPrivacyParameter(f"rho must be in (0, 1), got {rho!r}")
    X, y, n, d = check_rows(X, y, dlt)
    if y.dtype.kind not in "f":
        raise LabelError(f"y must be numeric targets, got dtype {y.dtype}")
    intercept = intercept_scaling is not None
    if intercept:
        s = check_positive(intercept_scaling, "intercept_scaling")
        if isinstance(X, Design):  # an implicit column, equal to s by construction
            col = np.array([s if X.intercept_scaling == s else math.nan])
        else:
            col = X[:, -1].toarray().ravel() if sp.issparse(X) else X[:, -1]
        if d < 2 or not np.all(col == s):
            raise InvalidDataError(
                f"intercept_scaling={s!r}: the last column of X must equal it in every row "
                "(and X must have another column)"
            )
    scales = noise_scales(eps, dlt, R, B, adaptive=adaptive, intercept=intercept, split=split)
    stds = scales["stds"]
    s_lmin, s_xx, s_xy = stds if adaptive else (None, *stds)
    rng = check_random_state(random_state)

    # --- per-record public maps: clip rows to R and labels to ±B --------------------
    norms = row_norms(X)
    bound = R
    if intercept:  # clip the feature part only, to √(R² − s²); the intercept stays s
        if s >= R:
            raise InvalidPrivacyParameter(
                f"intercept_scaling={s!r} must be < data_norm={R!r} (the row bound "
                "includes the intercept column)"
            )
        norms = np.sqrt(np.maximum(norms * norms - s * s, 0.0))
        bound = math.sqrt(R * R - s * s)
    over = norms > bound
    n_clipped = int(np.count_nonzero(over))
    clip = None
    if n_clipped:
        clip = np.ones(n)
        clip[over] = bound / norms[over]
    n_labels_clipped = int(np.count_nonzero(np.abs(y) > B))
    y = np.clip(y, -B, B)
    A, b = sufficient_statistics(X, y, clip)
    if intercept and clip is not None:  # undo the scaling of the intercept entries
        col_sums = np.asarray(X.T @ clip).ravel()  # Σ cᵢ xᵢ
        A[:-1, -1] = A[-1, :-1] = s * col_sums[:-1]
        A[-1, -1] = n * s * s
        b[-1] = s * float(np.sum(y))

    # --- releases (the only steps that read the data) ------------------------------
    k = d - 1 if intercept else d
    lam = 0.0
    lmin_hat = None
    if adaptive:
        if intercept:  # λ_min of the centered scatter of the non-intercept columns
            a = A[:k, -1] / s  # Σ xᵢ over the (clipped) feature parts
            S = A[:k, :k] - np.outer(a, a) / n
        else:
            S = A
        lmin = float(np.linalg.eigvalsh(S)[0])
        lmin_hat = lmin + s_lmin * rng.standard_normal()
    G = rng.standard_normal((d, d))
    A_hat = A + s_xx * 0.5 * (G + G.T)
    b_hat = b + s_xy * rng.standard_normal(d)
    del A, b

    # --- post-processing of the released statistics ---------------------------------
    eta = _operator_norm_bound(s_xx, k, rho)
    if adaptive:
        lmin_tilde = max(0.0, lmin_hat - s_lmin * math.sqrt(math.log(6.0 / dlt)))
        lam = max(0.0, eta - lmin_tilde)
    if intercept:  # Schur complement: slopes from centered moments, intercept unpenalized
        a11 = A_hat[-1, -1]
        if a11 <= 0:  # noise swamped n·s² (tiny n): fall back to the public value floor
            a11 = s_xx
        M = A_hat[:k, :k] - np.outer(A_hat[:k, -1], A_hat[:k, -1]) / a11
        v = b_hat[:k] - A_hat[:k, -1] * (b_hat[-1] / a11)
    else:
        M, v = A_hat, b_hat
    M = 0.5 * (M + M.T) + (lam + ridge) * np.eye(k)
    evals, V = np.linalg.eigh(M)
    floor = s_xx
    n_eig = int(np.count_nonzero(evals < floor))
    evals = np.maximum(evals, floor)
    w = V @ ((V.T @ v) / evals)
    if intercept:
        theta = np.empty(d)
        theta[:k] = w
        theta[-1] = (b_hat[-1] - A_hat[-1, :k] @ w) / a11
    else:
        theta = w

    events = tuple(Gaussian(m) for m in scales["multipliers"])
    diagnostics = {
        "mechanism": "adassp" if adaptive else "ssp",
        "n_iter": 1,  # one closed-form (eigendecomposition) solve
        "epsilon": eps,
        "delta": dlt,
        "neighbouring": "replace-one",
        "noise_multiplier": scales["sigma"],
        "noise_multipliers": list(scales["multipliers"]),
        "sensitivities": list(scales["sensitivities"]),
        "noise_std": list(stds),
        "lambda": lam,
        "ridge": ridge,
        "eta": eta,
        "eigen_floor": floor,
        "n_eigen_clipped": n_eig,
        "n_clipped": n_clipped,
        "n_labels_clipped": n_labels_clipped,
        "lambda_min_released": lmin_hat,
        # the released statistics themselves (DP outputs; θ is post-processing of them)
        "xtx_released": A_hat,
        "xty_released": b_hat,
    }
    return Result(theta=theta, event=Composed(events=events), diagnostics=diagnostics)
