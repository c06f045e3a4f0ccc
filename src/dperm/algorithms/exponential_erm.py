"""ERM by the exponential mechanism over a finite candidate set.

For a loss whose per-example values lie in a public interval [lo, hi], the
empirical risk n·L(θ) = Σᵢ ℓ(θ; xᵢ, yᵢ) changes by at most Δ = hi − lo when one
record is replaced (replace-one neighbouring relation).  Sampling

    P(θ) ∝ exp(−ε · n·L(θ) / (2Δ)),   θ ∈ Θ (a finite, public candidate set),

is the exponential mechanism of McSherry & Talwar (FOCS 2007, Theorem 6) with
utility −n·L(θ) of sensitivity Δ; it is ε-DP (Dwork & Roth 2014, Theorem 3.10)
and, with probability ≥ 1 − e^{−s},

    L(θ̂) ≤ min_{θ ∈ Θ} L(θ) + 2Δ (ln|Θ| + s) / (n ε)      (Dwork & Roth 2014, Theorem 3.11).

This is the discrete form of the “exponential sampling” ERM of Bassily, Smith,
Thakurta (FOCS 2014), who sample from the same density on a continuous convex
set; over a grid or a random net of a ball (public, drawn independently of the
data) it is exact and needs no log-concave sampler.  It suits low dimension
(d ≤ 3, e.g. a grid of 10³ points) or a modest random net: the work is
O(n · |Θ|).

The classic special case is the private median / quantile
(:func:`private_quantile`): θ ∈ a grid of [lower, upper], the pinball loss
ρ_τ(y − θ), labels clipped to the public range, so Δ = max(τ, 1 − τ)·(upper − lower).

Event: ``PureEpsilon(ε)`` (δ = 0).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .._rng import check_random_state
from .._validation import (
    check_count,
    check_interval,
    check_positive,
    check_probability,
    float_array,
)
from ..accounting.events import PureEpsilon
from ..design import as_design
from ..exceptions import ClippingWarning, InvalidDataError, InvalidPrivacyParameter, LabelError
from ..losses import Hinge, HuberSVM, Logistic, Quantile, Squared
from ..losses.base import GLMLoss
from ..mechanisms import exponential_mechanism
from .base import Result, check_rows, check_target, private_fit

__all__ = ["fit", "grid", "loss_interval", "private_quantile", "random_net"]

_MAX_GRID = 1_000_000
_CHUNK_ENTRIES = 2_000_000  # entries of the (n, chunk) margin block held at once


# ----------------------------------------------------------------------------- candidates
def grid(lower, upper, num: int, d: int | None = None) -> np.ndarray:
    """A Cartesian grid of candidates, shape (num^d, d).

    Parameters
    ----------
    lower, upper : float or array of shape (d,)
        Public box bounds (lower < upper).
    num : int ≥ 1
        Points per axis (``num = 1`` gives the midpoint).
    d : int, optional
        Dimension when ``lower`` and ``upper`` are scalars (default 1).

    Raises
    ------
    InvalidPrivacyParameter
        Non-finite or inverted bounds, or more than 10⁶ points.
    """
    num = check_count(num, "num")
    lower = np.atleast_1d(np.asarray(lower, dtype=float))
    upper = np.atleast_1d(np.asarray(upper, dtype=float))
    if d is not None:
        d = check_count(d, "d")
        lower = np.broadcast_to(lower, (d,))
        upper = np.broadcast_to(upper, (d,))
    if lower.shape != upper.shape or lower.ndim != 1:
        raise InvalidPrivacyParameter(
            f"lower and upper must have the same shape (d,), got {lower.shape} and {upper.shape}"
        )
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))) or np.any(lower >= upper):
        raise InvalidPrivacyParameter(
            f"grid needs finite bounds with lower < upper, got lower={lower}, upper={upper}"
        )
    k = num**lower.size
    if k > _MAX_GRID:
        raise InvalidPrivacyParameter(
            f"a grid of num={num} points per axis in d={lower.size} dimensions has {k} "
            f"points, more than {_MAX_GRID}; use random_net"
        )
    if num == 1:
        axes = [np.array([(lo + hi) / 2.0]) for lo, hi in zip(lower, upper, strict=True)]
    else:
        axes = [np.linspace(lo, hi, num) for lo, hi in zip(lower, upper, strict=True)]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def random_net(d: int, radius: float, size: int, random_state=None) -> np.ndarray:
    """``size`` points drawn uniformly from the ℓ2 ball of ``radius`` in R^d, shape (size, d).

    The net is public: it is drawn from ``random_state`` alone, never from the
    data.  (Uniform in the ball: a Gaussian direction times radius·U^{1/d}.)
    """
    d = check_count(d, "d")
    size = check_count(size, "size")
    radius = check_positive(radius, "radius")
    rng = check_random_state(random_state)
    g = rng.standard_normal((size, d))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return g * (radius * rng.uniform(size=(size, 1)) ** (1.0 / d))


# ----------------------------------------------------------------------------- loss range
def loss_interval(loss: GLMLoss, z_max: float, label_bound: float | None = None):
    """A public interval [lo, hi] containing ℓ(θ; x, y) for every |⟨θ, x⟩| ≤ z_max
    and admissible label.

    * margin losses (logistic, hinge, Huber SVM), y ∈ {−1, +1}: φ is
      non-increasing in the margin m = y z ∈ [−z_max, z_max], so
      [φ(z_max, 1), φ(−z_max, 1)] (for the logistic loss hi − lo = z_max exactly);
    * squared loss with |y| ≤ B = ``loss.label_bound``: [0, (z_max + B)²/2];
    * quantile loss with |y| ≤ B = ``label_bound``: [0, max(τ, 1 − τ)(z_max + B)].

    Raises
    ------
    InvalidPrivacyParameter
        Unknown loss, or a quantile loss without ``label_bound``.
    """
    z_max = float(z_max)
    if isinstance(loss, Logistic | Hinge | HuberSVM):
        vals = loss.pointwise(np.array([z_max, -z_max]), np.array([1.0, 1.0]))
        return float(vals[0]), float(vals[1])
    if isinstance(loss, Squared):
        return 0.0, 0.5 * (z_max + loss.label_bound) ** 2
    if isinstance(loss, Quantile):
        if label_bound is None:
            raise InvalidPrivacyParameter(
                "the quantile loss is bounded only for bounded labels: pass label_bound "
                "(a public bound on |y|)"
            )
        b = check_positive(label_bound, "label_bound")
        return 0.0, max(loss.quantile, 1.0 - loss.quantile) * (z_max + b)
    raise InvalidPrivacyParameter(
        f"no public loss range is known for {loss!r}; pass loss_bounds=(lo, hi)"
    )


def check_label_bound(y, label_bound):
    """``label_bound`` checked (> 0, or None), and every |yᵢ| ≤ label_bound.

    Raises
    ------
    InvalidPrivacyParameter
        A bound that is not a finite positive number.
    LabelError
        Labels beyond the bound, reported by their count, never their values (they
        are part of the private records).
    """
    if label_bound is None:
        return None
    label_bound = check_positive(label_bound, "label_bound")
    over = int(np.count_nonzero(np.abs(y) > label_bound))
    if over:
        raise LabelError(
            f"labels must satisfy |y| ≤ label_bound={label_bound:g}; {over} label(s) "
            "do not (clip y to the public bound first)"
        )
    return label_bound


def check_loss_bounds(loss_bounds) -> tuple[float, float]:
    """(lo, hi) of a caller's public ``loss_bounds``: a pair of finite floats, lo < hi.

    Raises
    ------
    InvalidPrivacyParameter
        Not a pair, not finite, or lo ≥ hi.
    """
    return check_interval(loss_bounds, "loss_bounds")


def margin_blocks(X, thetas: np.ndarray):
    """Yield (s, X θ_sᵀ) for consecutive slices s of the rows of ``thetas``: the (n, b)
    margins of a block of parameter vectors, dense or CSR X alike, at most ~2·10⁶
    entries held at once."""
    step = max(1, _CHUNK_ENTRIES // max(X.shape[0], 1))
    for start in range(0, thetas.shape[0], step):
        s = slice(start, start + step)
        yield s, np.asarray(X @ thetas[s].T)


def sum_losses(loss: GLMLoss, X, y, thetas: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Σᵢ clip(ℓ(θ_j; xᵢ, yᵢ), lo, hi) for every row θ_j of ``thetas``, shape (k,),
    in blocks (:func:`margin_blocks`).  The clip is a no-op when the public
    assumptions hold and enforces them otherwise."""
    out = np.empty(thetas.shape[0])
    for s, Z in margin_blocks(X, thetas):
        out[s] = np.clip(loss.pointwise(Z, y[:, None]), lo, hi).sum(axis=0)
    return out


# ----------------------------------------------------------------------------- fit
@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    candidates,
    delta: float = 0.0,
    data_norm: float = 1.0,
    loss_bounds: tuple[float, float] | None = None,
    label_bound: float | None = None,
    random_state=None,
) -> Result:
    """Sample θ ∈ ``candidates`` with P(θ) ∝ exp(−ε Σᵢ ℓ(θ; xᵢ, yᵢ) / (2Δ)).

    ε-DP under replace-one (McSherry & Talwar 2007, Theorem 6; Dwork & Roth
    2014, Theorem 3.10) with Δ = hi − lo the public range of one example's
    loss.  Rows above ``data_norm`` are clipped (and counted); per-example
    losses are clipped into [lo, hi] (a no-op when the assumptions hold).

    Parameters
    ----------
    loss : GLMLoss
        Any GLM loss with a public range over the candidates (``loss_bounds``);
        no convexity or smoothness is needed.
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    epsilon : float > 0
    candidates : array of shape (k, d)
        The finite, public candidate set (e.g. :func:`grid`, :func:`random_net`);
        it must not depend on the data.
    delta : float in [0, 1), default 0
        Accepted for the common signature; the mechanism is pure ε-DP.
    data_norm : float > 0, default 1.0
        Public bound on ‖x‖₂.
    loss_bounds : (lo, hi), optional
        Public interval of one example's loss over the candidates; default
        :func:`loss_interval` with z_max = data_norm · max ‖θ‖₂.
    label_bound : float, optional
        Public bound on |y| for the quantile loss.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (d,) (one of the candidates); ``event`` =
        ``PureEpsilon(ε)``; ``diagnostics`` with ``sensitivity`` (Δ),
        ``n_candidates``, ``index``, ``utility_bound`` (the Theorem 3.11 gap at
        s = ln 20, i.e. 95 %), ``n_clipped`` …

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError, LabelError
    """
    if not isinstance(loss, GLMLoss):
        raise InvalidPrivacyParameter(f"loss must be a GLMLoss, got {type(loss).__name__}")
    epsilon, delta, data_norm = check_target(epsilon, delta, data_norm)
    X, y, n, d = check_rows(X, y, delta, loss)
    message = "candidates must be a numeric array of shape (k, d)"
    cands = float_array(candidates, "candidates", message=message)
    if cands.ndim == 1 and d == 1:
        cands = cands[:, None]
    if cands.ndim != 2 or cands.shape[1] != d or cands.shape[0] < 1:
        raise InvalidDataError(
            f"candidates must have shape (k, {d}) with k ≥ 1, got shape {cands.shape}"
        )
    if not np.all(np.isfinite(cands)):
        raise InvalidDataError("candidates contain NaN or infinite values")
    label_bound = check_label_bound(y, label_bound)
    rng = check_random_state(random_state)

    X = as_design(X, data_norm)  # ‖x‖ ≤ R by a per-row scale; margins X θ_j without a copy
    n_clipped = X.n_clipped
    z_max = data_norm * float(np.max(np.linalg.norm(cands, axis=1)))
    if loss_bounds is None:
        lo, hi = loss_interval(loss, z_max, label_bound)
    else:
        lo, hi = check_loss_bounds(loss_bounds)
    sens = hi - lo
    if not (math.isfinite(sens) and sens > 0):
        raise InvalidPrivacyParameter(f"the loss range must be finite and > 0, got {sens!r}")

    total = sum_losses(loss, X, y, cands, lo, hi)
    # utility −Σᵢ ℓ (shifted by a constant, which changes nothing), sensitivity Δ
    j = exponential_mechanism(-(total - total.min()), epsilon=epsilon, sensitivity=sens, rng=rng)
    k = cands.shape[0]
    diagnostics: dict[str, Any] = {
        "algorithm": "exponential-erm",
        "neighbouring": "replace-one",
        "epsilon": epsilon,
        "delta": delta,
        "sensitivity": sens,
        "loss_bounds": (lo, hi),
        "n_candidates": k,
        "index": j,
        "utility_bound": 2.0 * sens * (math.log(k) + math.log(20.0)) / (n * epsilon),
        "data_norm": data_norm,
        "n_clipped": n_clipped,
    }
    return Result(theta=cands[j].copy(), event=PureEpsilon(epsilon), diagnostics=diagnostics)


@private_fit  # an active dperm.budget: reserve, run, commit the event
def private_quantile(
    values,
    quantile: float = 0.5,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    n_candidates: int = 1001,
    random_state=None,
) -> Result:
    """ε-DP quantile of 1-D data by the exponential mechanism on the pinball loss.

    Candidates: ``n_candidates`` evenly spaced points of the public range
    [lower, upper]; values are clipped to that range (and the count reported).
    The utility is −Σᵢ ρ_τ(yᵢ − θ), with per-example range
    Δ = max(τ, 1 − τ)·(upper − lower) since both yᵢ and θ lie in the range
    (McSherry & Talwar 2007, Theorem 6).  ``quantile=0.5`` is the median.

    Parameters
    ----------
    values : array of shape (n,)
    quantile : float in (0, 1)
    epsilon : float > 0
    lower, upper : float
        Public bounds of the data, lower < upper.
    n_candidates : int ≥ 2
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` of shape (1,); event ``PureEpsilon(ε)``.

    Raises
    ------
    InvalidPrivacyParameter, InvalidDataError

    Examples
    --------
    >>> import numpy as np
    >>> v = np.random.default_rng(0).normal(50, 10, 5000)
    >>> res = private_quantile(v, 0.5, epsilon=1.0, lower=0, upper=100, random_state=1)
    >>> bool(abs(res.theta[0] - np.median(v)) < 2.0)
    True
    """
    q = check_probability(quantile, "quantile")
    if q >= 1.0:
        raise InvalidPrivacyParameter(f"quantile must be in (0, 1), got {quantile!r}")
    n_candidates = check_count(n_candidates, "n_candidates", minimum=2)
    lo_b = float(lower) if isinstance(lower, int | float | np.floating | np.integer) else None
    hi_b = float(upper) if isinstance(upper, int | float | np.floating | np.integer) else None
    if lo_b is None or hi_b is None or not (math.isfinite(lo_b) and math.isfinite(hi_b)):
        raise InvalidPrivacyParameter(
            f"lower and upper must be finite numbers, got lower={lower!r}, upper={upper!r}"
        )
    if lo_b >= hi_b:
        raise InvalidPrivacyParameter(f"need lower < upper, got lower={lower!r}, upper={upper!r}")
    v = float_array(values, "values", message="values must be numeric").ravel()
    if v.size == 0:
        raise InvalidDataError("values must not be empty")
    if not np.all(np.isfinite(v)):
        raise InvalidDataError("values contain NaN or infinite values")
    outside = (v < lo_b) | (v > hi_b)
    n_clipped = int(outside.sum())
    if n_clipped:
        warnings.warn(
            f"{n_clipped} value(s) outside [lower, upper] = [{lo_b:g}, {hi_b:g}] were clipped",
            ClippingWarning,
            stacklevel=3,  # the caller (+1: the @private_fit wrapper)
        )
        v = np.clip(v, lo_b, hi_b)
    loss = Quantile(q)
    cands = np.linspace(lo_b, hi_b, n_candidates)[:, None]
    X = np.ones((v.size, 1))
    res = fit(
        loss,
        X,
        v,
        epsilon=epsilon,
        candidates=cands,
        data_norm=1.0,
        loss_bounds=(0.0, max(q, 1.0 - q) * (hi_b - lo_b)),
        random_state=random_state,
    )
    diag = dict(res.diagnostics)
    diag.update({"algorithm": "private-quantile", "quantile": q, "n_clipped": n_clipped})
    return Result(theta=res.theta, event=res.event, diagnostics=diag)
