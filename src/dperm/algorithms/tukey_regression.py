"""Tukey-depth linear regression: propose-test-release and a restricted exponential mechanism.

Amin, Joseph, Ribero, Vassilvitskii, "Easy Differentially Private Linear Regression",
ICLR 2023 (arXiv:2208.07353), Algorithm 1 ("TukeyEM"), which adapts the restricted
exponential mechanism with a propose-test-release check of Brown, Gaboardi, Smith,
Ullman, Zakynthinou, "Covariance-Aware Private Mean Estimation Without Private
Covariance Estimation", NeurIPS 2021.  **No bound on the features, the labels or the
coefficients is needed**: the only public inputs are (ε, δ), n and the number of models m.

Algorithm
---------
1. Cut a uniformly random permutation of the n row positions into m blocks of
   ``b = ⌊n/m⌋`` positions (the other ``n − m·b`` positions are not used); fit ordinary
   least squares on each block (minimum-norm solution): models β₁, …, β_m ∈ ℝᵖ.
2. **Approximate Tukey depth** (the paper's definition: Tukey depth restricted to the
   2p axis-aligned halfspaces) of y ∈ ℝᵖ w.r.t. the models:
   ``T(y) = min_j min(#{i : β_ij ≤ y_j}, #{i : β_ij ≥ y_j})``.  Its upper level set
   ``Y_k = {T ≥ k}`` is the box ``Π_j [β_(k),j, β_(m−k+1),j]`` (k-th smallest to k-th
   largest coordinate), of volume ``V_k = Π_j (β_(m−k+1),j − β_(k),j)``, for
   1 ≤ k ≤ K = ⌊m/2⌋ (``V_0 = ∞``; ``V_k = 0`` for k > K).
3. **Test** (PTR).  With t = :func:`restriction_depth` (the paper: m/4), c = ε_em/2 and
   η = δ/(e^{ε_ptr}(1 + e^{ε_em})), let k* be the largest k ≥ 0 such that
   ``∃ g ≥ 0 : c·g ≥ ln V_{t−k−2} − ln V_{t+k+g+1} − ln η``  (indices in [1, K]),
   and k* = −1 if there is none.  Release iff ``k* + Lap(1/ε_ptr) > ln(1/(2δ))/ε_ptr``;
   otherwise output ⊥ (here: the zero vector, flagged ``ptr_passed=False``).  When the
   public bound :func:`max_distance` on k* is below the threshold, the call is refused
   before any data is read (the test could not pass with probability ≥ ½).
4. **Sample** y with density ∝ exp(c·T(y)) on Y_t: a depth level k ∈ [t, K] with
   probability ∝ e^{ck}(V_k − V_{k+1}) (Gumbel-max on the log-weights), then a uniform
   point of the shell Y_k \\ Y_{k+1}, split into the p disjoint pieces "first coordinate
   outside the inner box is j" (exact, no rejection).

Privacy (replace-one, n public) — derived here
----------------------------------------------
The paper states its guarantee for neighbouring datasets that differ in one user, each
user contributing to a single model, and its constants (the ``δ/(8e^ε)`` of the check)
come from Brown et al.'s add/remove argument; we re-derive the whole proof for the
replace-one relation and use our own constants.

*Sensitivity.*  The block of a position depends on (n, m, the generator) only, so
replacing one record changes at most one model.  Every axis-aligned halfspace then
contains at most one point more or fewer, so ``|T_S(y) − T_S′(y)| ≤ 1`` for every y,
and ``Y_{k+1}(S) ⊆ Y_k(S′) ⊆ Y_{k−1}(S)``, ``V_{k+1}(S) ≤ V_k(S′) ≤ V_{k−1}(S)``.

*Restricted EM on a safe pair.*  Let P_S be the law of step 4 and Z_S its normalizer.
On Y_t(S) ∩ Y_t(S′) the densities' numerators differ by ≤ e^c; on Y_t(S) \\ Y_t(S′) the
depth is exactly t; ``Z_S′ ≤ e^c (Z_S + e^{c(t−1)} V_{t−1}(S))`` and
``Z_S ≥ e^{c(t+g)} V_{t+g}(S)`` for every g ≥ 0.  Hence, for every measurable B,

    P_S(B) ≤ e^{2c} (1 + r) P_S′(B) + r,     r = min_g e^{−cg} V_{t−1}(S)/V_{t+g}(S),

and the same with S, S′ swapped, where ``r(S′) ≤ min_g e^{−cg} V_{t−2}(S)/V_{t+g+1}(S)``.
So if ``C_0(S): ∃g ≥ 0, e^{−cg} V_{t−2}(S)/V_{t+g+1}(S) ≤ η`` holds, P_S and P_S′ are
(ε_em, (1 + e^{ε_em})η)-indistinguishable in both directions, for every neighbour S′
(2c = ε_em).

*Distance to unsafety.*  ``C_k(S)`` (the condition of step 3) implies C_0 on every
dataset within k replacements of S (k changed models move every depth by ≤ k), and
C_k(S) ⇒ C_{k−1}(S′): the statistic k* is a lower bound on the distance to the nearest
unsafe dataset minus one, with sensitivity 1.

*PTR.*  The output is ⊥ or a sample.  If k*(D) ≥ 0 or k*(D′) ≥ 0, one of D, D′ satisfies
C_0, so the samples are (ε_em, δ_em)-close in both directions, and the release
probabilities p_D, p_D′ of the Laplace test are within e^{ε_ptr} of each other (and so
are the ⊥ probabilities, 1 − p): for every set B of outputs
``P[M(D) ∈ B] ≤ e^{ε_ptr + ε_em} P[M(D′) ∈ B] + e^{ε_ptr} δ_em`` and symmetrically.
Otherwise k*(D) = k*(D′) = −1: both release with the same probability
``P[Lap(1/ε_ptr) > T + 1] = ½ e^{−ε_ptr (T+1)} < ½ e^{−ε_ptr T} = δ`` — whatever the
sample then is (on such data Y_t may even have volume 0: the sampler still returns a
point of it) — and output ⊥ otherwise: (0, δ).  With δ_em = (1 + e^{ε_em})η = δ e^{−ε_ptr}
both cases give **(ε, δ)-DP, ε = ε_ptr + ε_em**, replace-one (n public).  The event is
``EpsilonDelta(ε, δ)``.  The release is the pair (θ or ⊥, whether the test passed); the
estimator reports ⊥ as the zero model with a warning.

*Numerics.*  The block solutions are mapped into ``[−MODEL_BOUND, MODEL_BOUND]^p``
(NaN → 0), silently, by a function of each block alone (:func:`block_models`): an
extreme but finite record can neither make the fit raise nor warn (which would tell D
from D′ with certainty) nor overflow a width.  The argument above is in real
arithmetic; the sampler uses floating-point uniforms and Gumbel variables (no
discrete-exact sampler).

The models, depths, volumes and the permutation are not released.  One data-dependent
value is *returned* in ``diagnostics`` for the data owner, outside the guarantee:
``distance_to_unsafety`` (k*).  The depth of the sampled point is not returned (with θ
it would name the side the changed model sits on).  The default split
is ε_ptr = ε_em = ε/2 (the paper's).  No bound on the data is needed;
:class:`~dperm.estimators.DPLinearRegression` still applies its public ``data_norm``
(rows clipped, a per-record map) and ``label_bound`` (LabelError beyond it) — call
:func:`fit` for the bound-free mechanism.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._rng import check_random_state
from .._validation import check_count, check_probability
from ..accounting.events import EpsilonDelta
from ..exceptions import InvalidDataError, InvalidPrivacyParameter, LabelError
from .base import Result, check_rows, check_target, private_fit

__all__ = [
    "approximate_tukey_depth",
    "block_models",
    "default_n_models",
    "distance_to_unsafety",
    "fit",
    "log_depth_volumes",
    "max_distance",
    "ptr_threshold",
    "release",
    "restriction_depth",
]

#: rows per model of the default rule, as a multiple of the number of coefficients p
ROWS_PER_COEFFICIENT = 2
#: rows gathered at a time when the block models are fitted
_CHUNK = 8192
#: public bound on every coordinate of a model: a block's least-squares solution that
#: is NaN is set to 0 and every coordinate is clipped to ±MODEL_BOUND (a fixed map of
#: each model alone, so one replaced record still changes one model).  Without it one
#: extreme but finite record could overflow its block's solution and make the fit raise
#: (or warn) on D and not on D′ — an output the proof does not cover; within the bound
#: every width, log-volume and uniform draw of the mechanism is finite.
MODEL_BOUND = 1e100


def default_n_models(n: int, n_coefficients: int) -> int:
    """Public rule for the number of models m: blocks of ``2p`` rows, ``m = ⌊n/(2p)⌋``.

    Every block must hold at least p rows for its least-squares fit to be determined;
    beyond that, more models give the depth more room (the PTR test and the exponential
    mechanism both work on depths up to m/2), while the median of m block fits keeps the
    statistical efficiency of one fit on all the rows as long as each block is
    well-conditioned.  The rule uses only n and p (public); measured on California
    housing and CASP in benchmarks/REPORT.md.

    Raises
    ------
    InvalidDataError
        If n < 8p (fewer than 4 models: no depth region to test).
    """
    n = check_count(n, "n")
    p = check_count(n_coefficients, "n_coefficients")
    m = n // (ROWS_PER_COEFFICIENT * p)
    if m < 4:
        raise InvalidDataError(
            f"the Tukey mechanism needs at least 4 models of {ROWS_PER_COEFFICIENT * p} rows "
            f"({4 * ROWS_PER_COEFFICIENT * p} rows for {p} coefficients), got n={n}"
        )
    return m


def restriction_depth(n_models: int, c: float, log_eta: float) -> int:
    """The public restriction depth t: the middle of the depths the test can use.

    The test's condition C_k needs ``t − k − 2 ≥ 1`` (room below t) and
    ``t + k + g + 1 ≤ K = ⌊m/2⌋`` (room above), and every g it can use satisfies
    ``c·g ≥ ln(1/η)`` (the volume ratio is ≥ 1): g ≥ g₀ = ⌈ln(1/η)/c⌉, public.  The
    largest k both allow is largest for ``t = ⌊(K − g₀ + 2)/2⌋``, which we use (at least 1;
    the paper fixes t = m/4, which leaves too little room above t when ε is small: on
    California at ε = 1 its test fails, benchmarks/REPORT.md).  A function of m, ε, δ only.
    """
    K = n_models // 2
    g0 = math.ceil(-log_eta / c)
    return max(1, (K - g0 + 2) // 2)


def max_distance(n_models: int, c: float, log_eta: float) -> int:
    """A public upper bound on the test statistic k* (step 3): ``k ≤ t − 3`` (room below
    t) and ``k ≤ K − t − g₀ − 1`` (room above, every usable g ≥ g₀ = ⌈ln(1/η)/c⌉), for
    every dataset.  When it is below the release threshold T the test passes with
    probability ≤ ½e^{−ε_ptr(T − bound)} < ½ whatever the data, and :func:`release`
    refuses before reading the models (a function of m, ε, δ only: free)."""
    K = n_models // 2
    t = restriction_depth(n_models, c, log_eta)
    g0 = math.ceil(-log_eta / c)
    return min(t - 3, K - t - g0 - 1)


def block_models(X, y, n_models: int, rng) -> np.ndarray:
    """Least-squares models of m disjoint blocks of a random permutation of the rows.

    Parameters
    ----------
    X : ndarray, csr_matrix or :class:`~dperm.design.Design` of shape (n, p)
    y : ndarray of shape (n,)
    n_models : int, 1 ≤ m ≤ n
    rng : numpy.random.Generator
        Draws the permutation (data-independent).

    Returns
    -------
    ndarray of shape (m, p)
        Row i: the minimum-norm least-squares solution on block i (``b = ⌊n/m⌋`` rows;
        the last ``n − m·b`` positions of the permutation are not used), mapped into
        ``[−MODEL_BOUND, MODEL_BOUND]^p`` (NaN → 0; a block whose SVD fails → 0): a
        function of block i alone, never an error or a warning, whatever the values.
    """
    n = X.shape[0]
    m = check_count(n_models, "n_models")
    if m > n:
        raise InvalidPrivacyParameter(f"n_models must be ≤ n={n}, got {n_models!r}")
    b = n // m
    perm = rng.permutation(n)[: m * b].reshape(m, b)
    perm.sort(axis=1)
    models = np.empty((m, X.shape[1]))
    step = max(1, _CHUNK // b)
    for s in range(0, m, step):  # chunks of blocks (≤ _CHUNK rows gathered at a time)
        idx = perm[s : s + step]
        Xc = _gather(X, idx.ravel())
        models[s : s + step] = _block_solutions(Xc.reshape(idx.shape[0], b, -1), y[idx])
    return _bounded(models)


def _bounded(models: np.ndarray) -> np.ndarray:
    """The per-model map into ``[−MODEL_BOUND, MODEL_BOUND]^p`` (NaN → 0), in place."""
    np.nan_to_num(models, copy=False, nan=0.0, posinf=MODEL_BOUND, neginf=-MODEL_BOUND)
    return np.clip(models, -MODEL_BOUND, MODEL_BOUND, out=models)


def _block_solutions(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`_min_norm_lstsq` of every block, silently (overflow gives inf/NaN, mapped
    by :func:`_bounded`); a block whose SVD does not converge gets the model 0 (the
    batch is then redone block by block: each model stays a function of its block)."""
    with np.errstate(all="ignore"):
        try:
            return _min_norm_lstsq(A, y)
        except np.linalg.LinAlgError:
            out = np.zeros((A.shape[0], A.shape[2]))
            for i in range(A.shape[0]):  # blocks, not rows; only after a failed SVD
                try:
                    out[i] = _min_norm_lstsq(A[i : i + 1], y[i : i + 1])[0]
                except np.linalg.LinAlgError:
                    pass  # this block's model is the public constant 0
            return out


def _gather(X, rows: np.ndarray) -> np.ndarray:
    """Rows of X (ndarray, CSR or a :class:`~dperm.design.Design`: its effective rows,
    clip scale and intercept column included) as a new dense float64 array."""
    from ..design import Design

    if isinstance(X, Design):
        return X.take(rows).to_dense()
    Xc = X[rows]
    return Xc.toarray() if sp.issparse(Xc) else np.asarray(Xc, dtype=np.float64)


def _min_norm_lstsq(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Minimum-norm least-squares solutions of a stack of systems A[i] θ = y[i]
    (batched SVD; singular values below max(b, p)·eps·σ_max count as zero, as in
    ``numpy.linalg.lstsq``).  A: (k, b, p), y: (k, b) → (k, p)."""
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    cutoff = max(A.shape[1], A.shape[2]) * np.finfo(np.float64).eps * s[:, :1]
    inv = np.divide(1.0, s, out=np.zeros_like(s), where=s > cutoff)
    coef = inv * np.einsum("kbr,kb->kr", U, y)
    return np.einsum("krp,kr->kp", Vt, coef)


def approximate_tukey_depth(models: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Approximate Tukey depth (axis-aligned halfspaces) of points w.r.t. the models.

    ``T(y) = min_j min(#{i : β_ij ≤ y_j}, #{i : β_ij ≥ y_j})`` (Amin et al. 2023, Sec. 3).

    Parameters
    ----------
    models : ndarray of shape (m, p)
    points : ndarray of shape (q, p) or (p,)

    Returns
    -------
    ndarray of int64, shape (q,) (or a scalar array for a single point)
    """
    B = np.sort(np.asarray(models, dtype=np.float64), axis=0)
    Y = np.atleast_2d(np.asarray(points, dtype=np.float64))
    m = B.shape[0]
    le = np.stack([np.searchsorted(B[:, j], Y[:, j], side="right") for j in range(B.shape[1])])
    lt = np.stack([np.searchsorted(B[:, j], Y[:, j], side="left") for j in range(B.shape[1])])
    depth = np.minimum(le, m - lt).min(axis=0).astype(np.int64)
    return depth if np.ndim(points) == 2 else depth[0]


def log_depth_volumes(sorted_models: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log-widths and log-volumes of the depth regions Y_k, k = 1..K (K = ⌊m/2⌋).

    Parameters
    ----------
    sorted_models : ndarray of shape (m, p), each column sorted ascending

    Returns
    -------
    log_widths : ndarray of shape (K + 2, p)
        Row k: ln(β_(m−k+1),j − β_(k),j) for 1 ≤ k ≤ K; row 0 is +inf (Y_0 = ℝᵖ) and row
        K + 1 is −inf (empty).
    log_volumes : ndarray of shape (K + 2,)
        ``ln V_k`` = the row sums of ``log_widths``.
    """
    m, p = sorted_models.shape
    K = m // 2
    with np.errstate(divide="ignore"):
        widths = sorted_models[::-1][:K] - sorted_models[:K]  # row k−1: depth k
        log_w = np.log(np.maximum(widths, 0.0))
    log_widths = np.vstack([np.full(p, np.inf), log_w, np.full(p, -np.inf)])
    return log_widths, log_widths.sum(axis=1)


def distance_to_unsafety(log_volumes: np.ndarray, t: int, c: float, log_eta: float) -> int:
    """The PTR statistic k* of step 3 (module docstring): the largest k ≥ 0 with
    ``∃ g ≥ 0 : c·g ≥ ln V_{t−k−2} − ln V_{t+k+g+1} − ln η``, or −1.  Sensitivity 1
    (replace-one).

    Parameters
    ----------
    log_volumes : ndarray of shape (K + 2,)
        From :func:`log_depth_volumes`.
    t : int
        The restriction depth.
    c : float
        The exponential mechanism's factor (ε_em/2).
    log_eta : float
        ln η.
    """
    K = log_volumes.size - 2
    best = -1
    for k in range(0, max(t - 2, 0)):  # t − k − 2 ≥ 1; a loop over at most m/4 values
        hi = t + k + 1  # the smallest index t + k + g + 1 (g = 0)
        if hi > K:
            break
        g = np.arange(K - hi + 1)
        with np.errstate(invalid="ignore"):  # −inf − (−inf): a zero volume, C_k fails
            slack = c * g - (log_volumes[t - k - 2] - log_volumes[hi : K + 1] - log_eta)
        if not np.any(slack >= 0):
            break  # C_k fails, hence every larger k (the condition is monotone in k)
        best = k
    return best


def _sample_depth_region(log_widths, log_volumes, t, c, rng) -> tuple[int, int]:
    """One draw of step 4: density ∝ exp(c·T) on Y_t (exact; no rejection)."""
    K = log_volumes.size - 2
    levels = np.arange(t, K + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # ln(V_k − V_{k+1}) = ln V_k + ln(1 − V_{k+1}/V_k)
        ratio = np.exp(log_volumes[levels + 1] - log_volumes[levels])
        log_shell = log_volumes[levels] + np.log1p(-np.minimum(ratio, 1.0))
    logw = np.where(np.isfinite(log_shell), log_shell + c * levels, -np.inf)
    k = int(levels[np.argmax(logw + rng.gumbel(size=levels.size))])
    # the shell Y_k \ Y_{k+1}: piece j = {inner box on coords < j, outer \ inner on j,
    # outer box on coords > j}
    inner, outer = log_widths[k + 1], log_widths[k]
    with np.errstate(divide="ignore", invalid="ignore"):
        ring = outer + np.log1p(-np.minimum(np.exp(inner - outer), 1.0))
    p = inner.size
    before = np.concatenate([[0.0], np.cumsum(inner)[:-1]])
    after = np.concatenate([np.cumsum(outer[::-1])[::-1][1:], [0.0]])
    log_piece = np.where(np.isfinite(ring), before + ring + after, -np.inf)
    j = int(np.argmax(log_piece + rng.gumbel(size=p)))
    return j, k


def ptr_threshold(epsilon_ptr: float, delta: float) -> float:
    """The release threshold T = ln(1/(2δ))/ε_ptr of the test: ``P[Lap(1/ε_ptr) > T] = δ``."""
    return math.log(1.0 / (2.0 * delta)) / epsilon_ptr


def _sample(B, log_widths, log_volumes, t, c, rng) -> tuple[np.ndarray, int]:
    """Step 4: one draw with density ∝ exp(c·T) on Y_t, from the sorted models B."""
    m, p = B.shape
    K = m // 2
    j, depth = _sample_depth_region(log_widths, log_volumes, t, c, rng)
    lo_out, hi_out = B[depth - 1], B[m - depth]  # Y_depth
    if depth + 1 <= K:
        lo_in, hi_in = B[depth], B[m - depth - 1]  # Y_{depth+1}
    else:
        lo_in = hi_in = np.full(p, np.nan)
    theta = np.empty(p)
    theta[:j] = rng.uniform(lo_in[:j], hi_in[:j])
    theta[j + 1 :] = rng.uniform(lo_out[j + 1 :], hi_out[j + 1 :])
    left, right = lo_in[j] - lo_out[j], hi_out[j] - hi_in[j]
    if not np.isfinite(left):  # no inner box: the whole outer interval
        theta[j] = rng.uniform(lo_out[j], hi_out[j])
    elif rng.uniform() * (left + right) < left:
        theta[j] = rng.uniform(lo_out[j], lo_in[j])
    else:
        theta[j] = rng.uniform(hi_in[j], hi_out[j])
    return theta, depth


def _constants(m: int, eps: float, dlt: float, split: float):
    """(ε_ptr, ε_em, c, ln η, t, T) of a run: public.  Refuses a run whose test cannot
    pass (:func:`max_distance` below T)."""
    eps_ptr, eps_em = split * eps, (1.0 - split) * eps
    c = eps_em / 2.0
    log_eta = math.log(dlt) - eps_ptr - math.log1p(math.exp(eps_em))
    threshold = ptr_threshold(eps_ptr, dlt)
    reach = max_distance(m, c, log_eta)
    if reach < threshold:  # public: the test would pass with probability < ½ at best
        raise InvalidPrivacyParameter(
            f"the Tukey mechanism cannot pass its test with {m} models at "
            f"epsilon={eps:g}, delta={dlt:g}: the test statistic is at most {reach} "
            f"but the release threshold is {threshold:.4g}; give it more rows (n/(2p) models) "
            "or a larger epsilon"
        )
    return eps_ptr, eps_em, c, log_eta, restriction_depth(m, c, log_eta), threshold


def release(
    models,
    *,
    epsilon: float,
    delta: float,
    epsilon_split: float = 0.5,
    random_state=None,
) -> Result:
    """Steps 2–4 on a set of models: the test and the restricted exponential mechanism.

    (ε, δ)-DP for neighbouring model sets that differ in **one model** (the relation that
    one replaced record induces through :func:`fit`; module docstring, "Privacy").

    Parameters
    ----------
    models : array-like of shape (m, p), m ≥ 4
        Finite; every coordinate is clipped to ±``MODEL_BOUND`` (a per-model map).
    epsilon : float > 0
    delta : float in (0, 1)
    epsilon_split : float in (0, 1), default 0.5
        ε_ptr = ``epsilon_split``·ε, ε_em = the rest.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        As :func:`fit` (θ = 0 when the test fails).

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``epsilon``, ``delta`` or ``epsilon_split``; or a test that cannot pass
        (:func:`max_distance` below the threshold: more models or a larger ε needed).
    InvalidDataError
        Fewer than 4 models, NaN/inf models.
    """
    eps, dlt, _ = check_target(epsilon, delta, allow_zero_delta=False)
    split = check_probability(epsilon_split, "epsilon_split")
    if not 0.0 < split < 1.0:
        raise InvalidPrivacyParameter(f"epsilon_split must be in (0, 1), got {epsilon_split!r}")
    B = np.array(models, dtype=np.float64)  # a copy: sorted in place below
    if B.ndim != 2 or B.shape[0] < 4 or B.shape[1] < 1:
        raise InvalidDataError(f"models must have shape (m ≥ 4, p ≥ 1), got {B.shape}")
    if not np.all(np.isfinite(B)):
        raise InvalidDataError("models must be finite")
    m, p = B.shape
    _bounded(B)  # the per-model clip to ±MODEL_BOUND (a no-op on fit's models)
    B.sort(axis=0)
    eps_ptr, eps_em, c, log_eta, t, threshold = _constants(m, eps, dlt, split)
    rng = check_random_state(random_state)

    log_widths, log_volumes = log_depth_volumes(B)
    k_star = distance_to_unsafety(log_volumes, t, c, log_eta)
    passed = bool(k_star + rng.laplace(scale=1.0 / eps_ptr) > threshold)
    theta = _sample(B, log_widths, log_volumes, t, c, rng)[0] if passed else np.zeros(p)
    del B, log_widths, log_volumes

    diagnostics = {
        "mechanism": "tukey",
        "n_iter": 1,
        "epsilon": eps,
        "delta": dlt,
        "neighbouring": "replace-one",
        "ptr_passed": passed,
        "n_models": m,
        "restricted_depth": t,
        "epsilon_ptr": eps_ptr,
        "epsilon_em": eps_em,
        "ptr_threshold": threshold,
        # data-dependent, not privatized: for the data owner, outside the guarantee
        "distance_to_unsafety": k_star,
    }
    return Result(
        theta=theta,
        event=EpsilonDelta(eps, dlt, neighbouring="replace-one"),
        diagnostics=diagnostics,
    )


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    X,
    y,
    *,
    epsilon: float,
    delta: float,
    n_models: int | None = None,
    epsilon_split: float = 0.5,
    random_state=None,
) -> Result:
    """Private least squares by the Tukey-depth mechanism (Amin et al. 2023, Algorithm 1).

    (ε, δ)-DP under the **replace-one** relation with n public (module docstring, "Privacy"):
    ε = ε_ptr + ε_em, the propose-test-release check and the restricted exponential
    mechanism; no bound on ‖x‖, |y| or ‖θ‖ is assumed.

    Parameters
    ----------
    X : array-like or csr_matrix of shape (n_samples, n_coefficients)
        The design (an intercept column, if any, included).  Never copied as a whole
        (blocks are gathered ≤ 8192 rows at a time).
    y : array-like of shape (n_samples,)
        Numeric targets (unbounded).
    epsilon : float > 0
    delta : float in (0, 1)
    n_models : int, optional
        m ≥ 4; default :func:`default_n_models` (blocks of 2p rows, a function of n and p).
    epsilon_split : float in (0, 1), default 0.5
        ε_ptr = ``epsilon_split``·ε, ε_em = the rest.
    random_state : None, int, SeedSequence or Generator
        Draws the partition, the Laplace noise of the test and the sample.

    Returns
    -------
    Result
        ``theta`` of shape (n_coefficients,), the zero vector when the test fails (⊥);
        ``event`` ``EpsilonDelta(ε, δ, neighbouring="replace-one")``; ``diagnostics``:
        ``ptr_passed`` (part of the release), ``n_models``, ``rows_per_model``,
        ``restricted_depth`` t, ``epsilon_ptr``, ``epsilon_em``, ``ptr_threshold`` (public),
        and ``distance_to_unsafety`` k* (data-dependent, not privatized: outside the
        guarantee, never publish it).

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``epsilon``, ``delta``, ``epsilon_split`` or ``n_models`` (m < 4 or m > n), or
        too few models for the test ever to pass at (ε, δ) (:func:`max_distance`).
    InvalidDataError
        NaN/inf or malformed X, y; n too small for the default m.
    LabelError
        Non-numeric targets.
    """
    eps, dlt, _ = check_target(epsilon, delta, allow_zero_delta=False)
    split = check_probability(epsilon_split, "epsilon_split")
    if not 0.0 < split < 1.0:
        raise InvalidPrivacyParameter(f"epsilon_split must be in (0, 1), got {epsilon_split!r}")
    X, y, n, p = check_rows(X, y, dlt)
    if y.dtype.kind not in "fiub":
        raise LabelError(f"y must be numeric targets, got dtype {y.dtype}")
    y = np.asarray(y, dtype=np.float64)
    m = default_n_models(n, p) if n_models is None else check_count(n_models, "n_models")
    if m < 4 or m > n:
        raise InvalidPrivacyParameter(f"n_models must be in [4, n={n}], got {n_models!r}")
    _constants(m, eps, dlt, split)  # refuses a hopeless test before the data is read
    rng = check_random_state(random_state)
    models = block_models(X, y, m, rng)  # the private part: one record moves one model
    res = release(
        models, epsilon=epsilon, delta=delta, epsilon_split=epsilon_split, random_state=rng
    )
    res.diagnostics.update(rows_per_model=n // m, n_clipped=0)
    return res
