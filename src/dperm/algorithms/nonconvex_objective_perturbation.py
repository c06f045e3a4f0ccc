"""Objective perturbation over a finite parameter set with an optimization oracle.

Following Neel, Roth, Vietri & Wu (ICML 2020, "Oracle Efficient Private
Non-Convex Optimization", objective perturbation over a discrete domain), a
finite public set C is encoded injectively by a public map φ: C → {0, 1}^m and
the release is

    θ̂ = argmin_{θ ∈ C}  Σᵢ ℓ(θ; xᵢ, yᵢ) + ⟨η, φ(θ)⟩,     η ~ Laplace(b)^m,

computed by a *non-private* exact optimization oracle.  Only the abstract of
NRVW could be retrieved here, so the privacy theorem is derived in full below
(the argument is the one the paper's discrete result rests on; constants are
ours).

Theorem (replace-one, pure ε-DP).  If every ℓ(θ; x, y), θ ∈ C, lies in an
interval of length Δ, the release is ε-DP with ε = 2Δ·s/b, where s = m for a
general encoding (e.g. the binary encoding of an integer grid) and s = 1 for
the one-hot encoding (m = |C|).

Proof.  Let D, D′ be neighbours and F, F′ their loss sums; for θ′ ≠ θ,
(F(θ) − F(θ′)) − (F′(θ) − F′(θ′)) ∈ [−2Δ, 2Δ].  Fix θ and let
E(θ) = {η : θ is the unique minimizer for D} (ties have probability 0 since
φ is injective and η continuous).  Take the shift v with vⱼ = −2Δ if
φ(θ)ⱼ = 1 and +2Δ otherwise; every coordinate where φ(θ′) differs from φ(θ)
contributes −2Δ to ⟨v, φ(θ) − φ(θ′)⟩, so it is ≤ −2Δ for all θ′ ≠ θ and
η ∈ E(θ) implies η + v ∈ E′(θ).  Hence
P′(θ) ≥ ∫_{E(θ)} p(η + v) dη ≥ e^{−‖v‖₁/b} P(θ), with ‖v‖₁ = 2Δm.  For the
one-hot encoding take v = −2Δ·e_θ instead (‖v‖₁ = 2Δ): then the mechanism is
report-noisy-min with Laplace(b) noise.  ∎

Oracles: :func:`exact_oracle` enumerates C (small sets); :func:`milp_oracle`
solves the 0-1-loss problem for linear classifiers on the integer grid
{−2^{k−1}, …, 2^{k−1} − 1}^d (binary encoding, m = d·k) as a mixed-integer
program with :func:`scipy.optimize.milp` (HiGHS, ``mip_rel_gap=0``).  The
privacy theorem assumes the oracle returns an exact minimizer; HiGHS works to
feasibility tolerances ~1e-9, so the 0-1 loss is taken with a margin τ > 0:
ℓ = 1[y⟨θ, x⟩ < τ] (τ ≫ the tolerance), the same definition in both oracles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_data_norm, check_epsilon, check_positive, clip_rows
from ..accounting.events import PureEpsilon
from ..design import Design, check_X_y
from ..exceptions import (
    ConvergenceError,
    InvalidDataError,
    InvalidPrivacyParameter,
    UnsupportedOperationError,
)
from ..losses.zero_one import ZeroOne
from .base import Result, private_fit

#: the estimators refuse (public sizes) problems larger than this: the MILP has n + d·k
#: binaries and HiGHS's time to proven optimality grows quickly with them
ESTIMATOR_MAX_ROWS = 2000
ESTIMATOR_MAX_BITS = 120

__all__ = [
    "ESTIMATOR_MAX_BITS",
    "ESTIMATOR_MAX_ROWS",
    "binary_grid",
    "estimator_fit",
    "exact_oracle",
    "fit_discrete",
    "fit_zero_one_grid",
    "milp_oracle",
    "noise_scale",
]


def noise_scale(epsilon: float, loss_range: float, encoding_size: int) -> float:
    """b = 2Δ·s/ε (module theorem; s = m, or 1 for one-hot)."""
    epsilon = check_epsilon(epsilon)
    return (
        2.0
        * check_positive(loss_range, "loss_range")
        * check_count(encoding_size, "encoding_size")
        / epsilon
    )


def binary_grid(d: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """All points of {−2^{k−1}, …, 2^{k−1} − 1}^d and their binary codes.

    Returns
    -------
    (thetas, codes) : arrays of shape (2^{dk}, d) and (2^{dk}, dk)
        θⱼ = Σ_t 2^t z_{j,t} − 2^{k−1} (the encoding :func:`milp_oracle` uses).
    """
    d = check_count(d, "d")
    k = check_count(bits, "bits")
    m = d * k
    if m > 20:
        raise InvalidPrivacyParameter(f"binary_grid enumerates 2^(d·bits) = 2^{m} points; too many")
    codes = ((np.arange(2**m)[:, None] >> np.arange(m)[None, :]) & 1).astype(float)
    weights = 2.0 ** np.arange(k)
    thetas = codes.reshape(-1, d, k) @ weights - 2.0 ** (k - 1)
    return thetas, codes


def exact_oracle(losses: np.ndarray, codes: np.ndarray, eta: np.ndarray) -> int:
    """argmin_j losses[j] + ⟨η, codes[j]⟩ by enumeration (index into C)."""
    return int(np.argmin(losses + codes @ eta))


def _zero_one_sum(X, y, thetas: np.ndarray, tau: float) -> np.ndarray:
    Z = np.asarray(X @ thetas.T) * y[:, None]
    return (Z < tau).sum(axis=0).astype(float)


def milp_oracle(X, y, eta: np.ndarray, bits: int, tau: float, time_limit: float = 60.0):
    """Exact minimizer of Σᵢ 1[yᵢ⟨θ, xᵢ⟩ < τ] + ⟨η, z⟩ over binary codes z (HiGHS).

    Variables z ∈ {0,1}^{dk} (θ = Wz − 2^{k−1}) and eᵢ ∈ {0,1} with the big-M
    constraint yᵢ⟨xᵢ, θ⟩ + Mᵢeᵢ ≥ τ, Mᵢ = τ + 2^{k−1}‖xᵢ‖₁ (so eᵢ = 0 forces a
    margin ≥ τ and eᵢ = 1 is always feasible).

    Returns
    -------
    (theta, z) : ndarrays of shape (d,) and (dk,)

    Raises
    ------
    ConvergenceError
        HiGHS did not prove optimality (the privacy theorem needs an exact oracle).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    n, d = X.shape
    k = bits
    half = 2.0 ** (k - 1)
    W = np.kron(np.eye(d), 2.0 ** np.arange(k))  # (d, dk): θ = W z − half
    A_theta = (X * y[:, None]) @ W  # (n, dk)
    const = (X * y[:, None]).sum(axis=1) * half  # y⟨x, θ⟩ = A z − const
    M = tau + half * np.abs(X).sum(axis=1) + np.abs(A_theta).sum(axis=1)
    A = np.hstack([A_theta, np.diag(M)])
    cons = LinearConstraint(A, lb=tau + const, ub=np.inf)
    c = np.concatenate([eta, np.ones(n)])
    res = milp(
        c,
        constraints=cons,
        integrality=np.ones(c.size),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0.0, "time_limit": float(time_limit), "presolve": True},
    )
    if res.status != 0 or res.x is None:
        raise ConvergenceError(f"milp did not prove optimality: {res.message}")
    z = np.round(res.x[: d * k])
    return W @ z - half, z


def _check_loss_values(losses) -> np.ndarray:
    v = np.asarray(losses, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.all(np.isfinite(v)):
        raise InvalidDataError("losses must be a finite array of shape (|C|,) with |C| ≥ 2")
    return v


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit_discrete(
    loss_sums: Callable[[], np.ndarray],
    n_candidates: int,
    *,
    epsilon: float,
    loss_range: float,
    codes: np.ndarray | None = None,
    random_state=None,
) -> tuple[int, Result]:
    """Objective perturbation over a small explicit set C with the exact oracle.

    Parameters
    ----------
    loss_sums : callable
        Returns F(θ) = Σᵢ ℓ(θ; xᵢ, yᵢ) for every θ ∈ C, shape (|C|,), each ℓ in
        an interval of length ``loss_range`` (the caller's responsibility, e.g.
        by clipping).
    n_candidates : int ≥ 2
    epsilon : float > 0
    loss_range : float > 0
        Δ.
    codes : array of shape (|C|, m), optional
        A public injective {0,1} encoding; default one-hot (s = 1).
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    (index, Result)
        ``Result.theta`` is the code of the chosen element; event
        ``PureEpsilon(ε)`` (replace-one).
    """
    k = check_count(n_candidates, "n_candidates", minimum=2)
    rng = check_random_state(random_state)
    if codes is None:
        codes = np.eye(k)
        s = 1
    else:
        codes = np.asarray(codes, dtype=float)
        if codes.ndim != 2 or codes.shape[0] != k or not np.all((codes == 0) | (codes == 1)):
            raise InvalidDataError(f"codes must be a 0/1 array with {k} rows")
        if np.unique(codes, axis=0).shape[0] != k:
            raise InvalidDataError("codes must be injective (distinct rows)")
        s = codes.shape[1]
    b = noise_scale(epsilon, loss_range, s)
    eta = rng.laplace(scale=b, size=codes.shape[1])
    losses = _check_loss_values(loss_sums())
    if losses.size != k:
        raise InvalidDataError(f"loss_sums returned {losses.size} values for {k} candidates")
    j = exact_oracle(losses, codes, eta)
    diag: dict[str, Any] = {
        "algorithm": "nonconvex-objective-perturbation",
        "neighbouring": "replace-one",
        "epsilon": float(epsilon),
        "noise_scale": b,
        "encoding_size": codes.shape[1],
        "encoding_factor": s,
    }
    return j, Result(theta=codes[j].copy(), event=PureEpsilon(float(epsilon)), diagnostics=diag)


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit_zero_one_grid(
    X,
    y,
    *,
    epsilon: float,
    bits: int = 3,
    data_norm: float = 1.0,
    tau: float = 1e-4,
    oracle: str = "milp",
    time_limit: float = 60.0,
    random_state=None,
) -> Result:
    """ε-DP linear classifier (no intercept) minimizing the 0-1 loss on an integer grid.

    C = {−2^{k−1}, …, 2^{k−1} − 1}^d with its binary encoding (m = d·k),
    ℓ = 1[y⟨θ, x⟩ < τ] ∈ {0, 1} (Δ = 1), η ~ Laplace(2m/ε)^m (module theorem,
    replace-one).  Rows are clipped to ``data_norm`` (bounded big-M).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,), labels in {−1, +1}
    epsilon : float > 0
    bits : int ≥ 1, default 3
        k, bits per coordinate.
    data_norm : float > 0, default 1
    tau : float > 0, default 1e-4
        Margin of the 0-1 loss (≫ HiGHS's tolerances).
    oracle : {"milp", "exact"}
        ``"exact"`` enumerates the 2^{dk} grid (d·k ≤ 20).
    time_limit : float, default 60
        Seconds for HiGHS; a run that cannot prove optimality raises.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (d,) (integer-valued); event ``PureEpsilon(ε)``.

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, LabelError, ConvergenceError
    """
    epsilon = check_epsilon(epsilon)
    k = check_count(bits, "bits")
    tau = check_positive(tau, "tau")
    if oracle not in ("milp", "exact"):
        raise InvalidPrivacyParameter(f"oracle must be 'milp' or 'exact', got {oracle!r}")
    X, y = check_X_y(X, y, accept_sparse=False)
    y = ZeroOne().check_labels(y)
    if isinstance(X, Design):  # the MILP needs the matrix itself: materialized (a copy)
        X = X.to_dense()
    X, n_clipped = clip_rows(np.asarray(X, dtype=float), check_data_norm(data_norm))
    rng = check_random_state(random_state)
    n, d = X.shape
    m = d * k
    b = noise_scale(epsilon, 1.0, m)
    eta = rng.laplace(scale=b, size=m)
    if oracle == "exact":
        thetas, codes = binary_grid(d, k)
        j = exact_oracle(_zero_one_sum(X, y, thetas, tau), codes, eta)
        theta = thetas[j]
    else:
        theta, _ = milp_oracle(X, y, eta, k, tau, time_limit)
    diag: dict[str, Any] = {
        "algorithm": "nonconvex-objective-perturbation",
        "oracle": oracle,
        "neighbouring": "replace-one",
        "epsilon": epsilon,
        "noise_scale": b,
        "encoding_size": m,
        "bits": k,
        "tau": tau,
        "n_clipped": n_clipped,
        # F(θ̂) − min_C F ≤ ⟨η, φ(θ*) − φ(θ̂)⟩ ≤ ‖η‖₁ (codes in {0,1}); E‖η‖₁ = m·b
        "utility_bound": m * b / n,
    }
    if not math.isfinite(float(np.max(np.abs(theta)))):
        raise ConvergenceError("oracle returned a non-finite parameter")
    return Result(
        theta=np.asarray(theta, dtype=float), event=PureEpsilon(epsilon), diagnostics=diag
    )


def estimator_fit(estimator, loss, X, y, epsilon, delta, rng) -> Result:
    """The estimators' adapter (``mechanism="nonconvex-objective"``):
    :func:`fit_zero_one_grid` on the augmented design (intercept column
    included), 3 bits per coordinate, the MILP oracle.  Classification only; the
    estimator's loss is replaced by the 0-1 loss; no penalty, no constraint.
    Practical for small problems only (the MILP has one binary per row): a run
    that HiGHS cannot solve to proven optimality in 60 s raises
    ConvergenceError rather than release an inexact minimizer.

    Raises
    ------
    InvalidPrivacyParameter, LabelError, ConvergenceError
    """
    if estimator.regularizer_ is not None or estimator.l2_ > 0 or estimator.constraint_ is not None:
        raise InvalidPrivacyParameter(
            "mechanism 'nonconvex-objective' minimizes the 0-1 loss over an integer grid: use "
            "penalty='l2' with alpha='auto' (no penalty is applied) and no constraint"
        )
    n, d = X.shape
    if n > ESTIMATOR_MAX_ROWS or 3 * d > ESTIMATOR_MAX_BITS:
        raise UnsupportedOperationError(
            f"mechanism 'nonconvex-objective' solves a mixed-integer program with one binary "
            f"per row and 3 per coefficient; n={n} rows and {d} coefficients exceed the "
            f"estimator's limits (n ≤ {ESTIMATOR_MAX_ROWS}, 3·d ≤ {ESTIMATOR_MAX_BITS}): use "
            "fit_zero_one_grid directly with a longer time_limit, or another mechanism"
        )
    return fit_zero_one_grid(
        X, y, epsilon=epsilon, data_norm=estimator.data_norm_, random_state=rng
    )
