"""White-box audit of DP-SGD: the per-step noisy sums and the exact likelihood-ratio test.

The guarantee of DP-SGD (Abadi et al., CCS 2016) covers the whole *sequence* of
noisy clipped gradient sums a run releases, not only its final model.  The
strongest auditor that guarantee allows therefore sees every step: this module
records, through the loop's documented observer
(:data:`dperm.algorithms._gradient_loop.STEP_OBSERVER`, read once per run and
free when unset), the iterate θ_{t−1} each step starts from and the noisy sum
it releases, while the library's *real* default code path runs (same
calibration, sampler, clipping, loop and accountant: nothing is re-implemented).

The canary (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis,
"Tight Auditing of Differentially Private Machine Learning", USENIX Security
2023, §3 "Dirac canary", §5) is a row whose per-example gradient lies along a
direction u no other row's gradient has a component along: the projection
oₜ = ⟨noisy sumₜ, u⟩ is then the canary's clipped contribution (if its
Poisson coin came up) plus N(0, σ²), σ = z·sensitivity_factor·C.  Under
replace-one the neighbour replaces the canary by the anti-canary (same row,
opposite label), so with cₜ, c′ₜ the contributions of the two at θ_{t−1}
(computed by the library's own clipping code):

    D:  oₜ ~ (1 − q)·N(0, σ²) + q·N(cₜ, σ²)      D′:  oₜ ~ (1 − q)·N(0, σ²) + q·N(c′ₜ, σ²)

— exactly the pair the replace-one PLD accountant composes when the clipping
binds (cₜ = −c′ₜ, ‖cₜ‖ = C).  The statistic is the log-likelihood ratio of the
whole transcript, Σₜ ln p_{D′}(oₜ)/p_D(oₜ) (:func:`subsampled_gaussian_llr`):
by Neyman–Pearson the most powerful test of D against D′ for every level, so
its trade-off curve *is* the mechanism's on this pair, and for T ≳ 50 steps it
is Gaussian to within the Monte-Carlo error (a μ-GDP curve; the central limit
theorem of Dong, Roth, Su 2022, Theorem 5.2) — the setting where the μ-GDP
estimate of :mod:`dperm.audit.gdp` is tight.

Where no *row* reaches that worst case — the softmax gradients x̃(p − e_y)ᵀ of one
row at two labels are 120° apart at p = (⅓, ⅓, ⅓), and the intercept column keeps a
row and its mirror image from being antipodal — the auditor uses the paper's
strongest threat model, **gradient canaries** (§3): the adversary chooses the
canary's per-example gradient, which the DP-SGD guarantee covers whatever it is.
:func:`gradient_canaries` sets the loop's second hook
(:data:`dperm.algorithms._gradient_loop.GRADIENT_CANARY`) so that designated rows get
a crafted gradient, still sampled by the run's sampler, clipped at the run's C by the
library's generic clipped-sum oracle, noised and accounted as every row; the crafted
gradients of :func:`crafted_gradient_pair`'s canaries are ±C on coordinates of their
own, so cₜ = −c′ₜ, ‖cₜ‖ = C at every step.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import numpy as np

from .._rng import check_random_state
from .._validation import check_count
from ..algorithms._gradient_loop import GRADIENT_CANARY, STEP_OBSERVER, CallableOracle
from ..exceptions import DpermError
from .canary import CanaryPair
from .fits import _fit_network, _fit_user_loop

__all__ = ["record_steps", "subsampled_gaussian_llr"]


@contextlib.contextmanager
def record_steps(view: Callable) -> Iterator[list]:
    """Record what every DP-SGD step releases while the block runs.

    Parameters
    ----------
    view : callable
        ``view(theta, noisy_sum) -> value`` called at every step of every
        :func:`dperm.algorithms._gradient_loop.run` inside the block (the
        convex loop and :func:`dperm.networks.fit`); θ is the iterate the step
        starts from, the noisy sum the step's release before the normaliser.
        It must copy what it keeps (the loop reuses its buffers).

    Yields
    ------
    list
        The values of ``view``, one per step, in order.
    """
    steps: list = []

    def observer(t, theta, noisy_sum):
        steps.append(view(theta, noisy_sum))

    token = STEP_OBSERVER.set(observer)
    try:
        yield steps
    finally:
        STEP_OBSERVER.reset(token)


def _log_mixture(o, c, q: float, sigma: float) -> np.ndarray:
    """ln[(1 − q)·φ_σ(o) + q·φ_σ(o − c)] up to the common normal constant (the first axis
    of ``o`` and ``c`` is the steps; the last axis, when there are two or more, the
    coordinates of one observation)."""
    o = np.asarray(o, dtype=float)
    c = np.asarray(c, dtype=float)
    if o.ndim == 1:
        o, c = o[:, None], c[:, None]
    base = -np.sum(o * o, axis=-1) / (2.0 * sigma * sigma)
    shifted = -np.sum((o - c) ** 2, axis=-1) / (2.0 * sigma * sigma)
    if q >= 1.0:
        return shifted
    return np.logaddexp(np.log1p(-q) + base, np.log(q) + shifted)


def subsampled_gaussian_llr(o, c_d, c_dprime, *, sampling_rate: float, sigma: float) -> float:
    """Log-likelihood ratio ln p_{D′}/p_D of a run's per-step observations.

    Parameters
    ----------
    o : array of shape (T,) or (T, m)
        The projections of the noisy sums on the canary's gradient subspace.
    c_d, c_dprime : arrays of the shape of ``o``
        The canary's clipped contribution at each step on D and on D′ (at the
        iterate of that step; 0 where it has none).
    sampling_rate : float in (0, 1]
        q, the probability that the canary is in a batch (1 for full batches).
    sigma : float > 0
        Standard deviation of the noise on each coordinate of the noisy sum.

    Returns
    -------
    float
        Σₜ ln[(1 − q)φ(oₜ) + qφ(oₜ − c′ₜ)] − ln[(1 − q)φ(oₜ) + qφ(oₜ − cₜ)]
        (module docstring): the Neyman–Pearson statistic of the transcript.
    """
    q = float(sampling_rate)
    s = float(sigma)
    return float(np.sum(_log_mixture(o, c_dprime, q, s) - _log_mixture(o, c_d, q, s)))


# ============================================================ the estimators' default path
#: DPLogisticRegression's default intercept_scaling s (the implicit intercept column)
_INTERCEPT = 0.5


#: canaries per run of the estimator runners (at most 3 leave room for base rows: below)
ESTIMATOR_CANARIES = 3


def intercept_orthogonal_pair(n: int, k: int = ESTIMATOR_CANARIES, *, random_state=0):
    """The replace-one canary pair of the white-box estimator runners: n rows, k
    canaries audited in parallel, d = k + 1 features.

    The estimators always fit an intercept, an implicit column of value s = 0.5 (the
    default ``intercept_scaling``), so a row's gradient lives along its *augmented*
    row (x, s).  The k canary rows (the last k) have ‖x‖ = 1 and x_i·x_j = −s², so
    their augmented rows are mutually orthogonal; the n − k base rows (‖x‖ ≤ 1,
    labels ±1) have x·x_j = −s² for every canary, so they are orthogonal to all of
    them: no other row's gradient has a component along a canary's, intercept
    included (Dirac canaries on the estimators' default path).  The canaries' labels
    are −1 in D and +1 in D′; a canary's observation depends on its own label only,
    so the k scores of one run are k independent draws of the audit of one
    replace-one pair (:func:`dirac_pair`).  k ≤ 3 (the Gram matrix of the canaries
    leaves the base rows no room beyond).

    Returns
    -------
    CanaryPair
    """
    rng = check_random_state(random_state)
    s2 = _INTERCEPT**2
    gram = (1.0 + s2) * np.eye(k) - s2  # x_i·x_j = −s², ‖x_j‖ = 1
    chol = np.linalg.cholesky(gram)  # rows: the canaries in the first k coordinates
    w = np.linalg.solve(chol, np.full(k, -s2))  # x_b·x_j = −s² for every canary
    room = np.sqrt(max(0.0, 1.0 - float(w @ w)))
    m = n - k
    Xb = np.zeros((m, k + 1))
    Xb[:, :k] = w
    Xb[:, k] = room * rng.uniform(0.2, 1.0, size=m) * rng.choice([-1.0, 1.0], size=m)
    yb = np.where(np.arange(m) % 2 == 0, 1.0, -1.0)
    rng.shuffle(yb)
    Xc = np.hstack([chol, np.zeros((k, 1))])
    X = np.vstack([Xb, Xc])
    return CanaryPair(
        X=X,
        y=np.concatenate([yb, -np.ones(k)]),
        X_prime=X.copy(),
        y_prime=np.concatenate([yb, np.ones(k)]),
        direction=np.append(np.ones(k) / np.sqrt(k), 0.0),
        neighbouring="replace-one",
        canary_norm=1.0,
    )


def _noise(diagnostics) -> tuple[float, np.ndarray, np.ndarray]:
    """(q, σₜ of the noise on the noisy *sum* at every step, Cₜ) from a DP-SGD run's
    diagnostics: constant for a fixed clipping norm; with adaptive clipping
    (:mod:`dperm.algorithms.adaptive_clipping`) the norms Cₜ the run used (released
    values) and σₜ = σ_Δ·k·Cₜ.

    Raises
    ------
    DpermError
        The fit did not run DP-SGD (``mechanism="auto"`` chose another mechanism at
        this ε: there are no steps to observe).
    """
    if "sampling_rate" not in diagnostics:
        raise DpermError(
            "the white-box runners audit the DP-SGD branch of mechanism='auto', which chose "
            f"{diagnostics.get('algorithm', diagnostics.get('mechanism', '?'))!r} at ε = "
            f"{diagnostics.get('epsilon')} (above ε = 10 the rule uses objective "
            "perturbation): audit a smaller ε, or the runner's '-final-model' target"
        )
    q = float(diagnostics["sampling_rate"])
    steps = int(diagnostics["steps"])
    if diagnostics.get("clipping") == "adaptive":
        C = np.asarray(diagnostics["clipping_norms"], dtype=float)
        return q, float(diagnostics["vector_noise_per_clip"]) * C, C
    sigma = float(diagnostics["noise_std"]) * float(diagnostics["normalizer"])
    return q, np.full(steps, sigma), np.full(steps, float(diagnostics["clipping_norm"]))


def _canary_rows(X, k: int = ESTIMATOR_CANARIES) -> np.ndarray:
    """The canaries' augmented rows (x_j, s): the last k rows of the pair, (k, d + 1)."""
    X = np.asarray(X, dtype=float)[-k:]
    return np.hstack([X, np.full((k, 1), _INTERCEPT)])


def llr_statistic(output, direction) -> np.ndarray:
    """Audit statistic of the white-box runners: they return their LLRs already (one
    per canary of the run)."""
    return np.asarray(output, dtype=float).ravel()


def _llrs(o, c_d, c_dprime, q, sigma) -> np.ndarray:
    """One LLR per canary (:func:`subsampled_gaussian_llr` of each): ``o``, ``c_d``,
    ``c_dprime`` of shape (T, k) (one coordinate per canary) or (T, k, m); ``sigma`` the
    noise std of every step, shape (T,) (a scalar for all)."""
    o, c_d, c_dprime = (np.asarray(a, dtype=float) for a in (o, c_d, c_dprime))
    if o.ndim == 2:
        o, c_d, c_dprime = o[..., None], c_d[..., None], c_dprime[..., None]
    # per-step noise: observations in units of their step's σ (an exact change of units)
    s = np.broadcast_to(np.asarray(sigma, dtype=float), (o.shape[0],))[:, None, None]
    o, c_d, c_dprime = o / s, c_d / s, c_dprime / s
    q = float(q)
    return np.sum(_log_mixture(o, c_dprime, q, 1.0) - _log_mixture(o, c_d, q, 1.0), axis=0)


def _run_estimator_auto_whitebox(X, y, epsilon, delta, rng):
    """The k LLRs of one DPLogisticRegression() fit (every default, ``mechanism="auto"``
    → clipped DP-SGD on this pair; public label set [−1, 1]) observed step by step."""
    from ..estimators import DPLogisticRegression

    xc = _canary_rows(X)
    norm = np.linalg.norm(xc, axis=1)
    u = xc / norm[:, None]
    with record_steps(lambda theta, g: (xc @ theta, u @ g)) as steps:
        est = DPLogisticRegression(
            epsilon=epsilon, delta=delta, data_norm=1.0, classes=[-1, 1], random_state=rng
        ).fit(X, y)
    q, sigma, C = _noise(est.diagnostics_)
    z = np.array([s[0] for s in steps])  # (T, k) the canaries' margins before each step
    o = np.array([s[1] for s in steps])  # (T, k) the noisy sums along the canaries
    loss = est.loss_

    def contribution(label):  # ⟨clip_Cₜ(∇ℓ(θ; x_j, label)), u_j⟩ at every step
        g = loss.derivative(z, label) * norm
        return g * np.minimum(1.0, C[:, None] / np.maximum(np.abs(g), 1e-300))

    return _llrs(o, contribution(-1.0), contribution(1.0), q, sigma)


def _run_estimator_auto_multinomial_whitebox(X, y, epsilon, delta, rng):
    """The k LLRs of one DPLogisticRegression(classes=[0, 1, 2]) fit (every other
    default: one softmax model by clipped DP-SGD) observed step by step; the pair's
    labels ±1 become the classes 1 / 0 (class 2 public and absent)."""
    from scipy.special import softmax

    from ..estimators import DPLogisticRegression

    labels = np.where(np.asarray(y) > 0, 1, 0)
    xc = _canary_rows(X)
    norm = np.linalg.norm(xc, axis=1)
    u = xc / norm[:, None]
    with record_steps(lambda theta, g: (xc @ theta, u @ g)) as steps:
        est = DPLogisticRegression(
            epsilon=epsilon, delta=delta, data_norm=1.0, classes=[0, 1, 2], random_state=rng
        ).fit(X, labels)
    q, sigma, C = _noise(est.diagnostics_)
    p = softmax(np.array([s[0] for s in steps]), axis=2)  # (T, k, classes)
    o = np.array([s[1] for s in steps])  # (T, k, classes)

    def contribution(label):  # u_jᵀ clip_C(x̃_j (p − e_label)ᵀ) at every step
        r = p.copy()
        r[..., label] -= 1.0
        r *= norm[None, :, None]
        scale = np.minimum(1.0, C[:, None] / np.maximum(np.linalg.norm(r, axis=2), 1e-300))
        return r * scale[..., None]

    return _llrs(o, contribution(0), contribution(1), q, sigma)


# ============================================================ crafted gradient canaries
#: features of the base rows of :func:`crafted_gradient_pair` (the canaries' come after)
_BASE_FEATURES = 2
#: canaries per run of the crafted-gradient runner (the other rows are base rows)
CRAFTED_CANARIES = 400
#: gain of the crafted gradient: its norm √2·K ≫ C, so clipping always binds
_CRAFTED_GAIN = 50.0
#: the canaries' direction in class space (k = 3): (e₁ − e₀)/√2 (label 0 → +C, 1 → −C)
_CLASS_DIRECTION = np.array([-1.0, 1.0, 0.0]) / np.sqrt(2.0)


def crafted_gradient_pair(n: int, m: int = CRAFTED_CANARIES, *, random_state=0):
    """The replace-one pair of the crafted-gradient runner: n rows, the last m canaries.

    The n − m base rows have two features (‖x‖ ≤ 1, uniform in the disc's annulus
    [0.2, 1]) and the labels 0, 1, 2 in turn, shuffled; canary j is x = e_{2+j}, label 0
    in D and 1 in D′, and no other row has a component along feature 2 + j.  The runner
    replaces a canary's gradient by a crafted one (:func:`gradient_canaries`) supported
    on Θ's row 2 + j, which no other row's gradient touches (intercept included): each
    canary's observation is its own Dirac coordinate, so the m scores of one run are m
    independent draws of the audit of one replace-one pair ("canary j at 0" / "at 1"),
    as in :func:`dirac_pair`.

    Returns
    -------
    CanaryPair

    Raises
    ------
    InvalidPrivacyParameter
        m < 1 or n < m + 3.
    """
    rng = check_random_state(random_state)
    m = check_count(m, "m")
    b = check_count(n, "n", minimum=m + 3) - m  # at least one base row per class
    Xb = rng.normal(size=(b, _BASE_FEATURES))
    Xb *= rng.uniform(0.2, 1.0, size=(b, 1)) / np.linalg.norm(Xb, axis=1, keepdims=True)
    yb = np.arange(b) % 3
    rng.shuffle(yb)
    X = np.zeros((n, _BASE_FEATURES + m))
    X[:b, :_BASE_FEATURES] = Xb
    X[b:, _BASE_FEATURES:] = np.eye(m)
    direction = np.zeros(X.shape[1])
    direction[_BASE_FEATURES:] = 1.0 / np.sqrt(m)
    return CanaryPair(
        X=X,
        y=np.concatenate([yb, np.zeros(m, dtype=int)]),
        X_prime=X.copy(),
        y_prime=np.concatenate([yb, np.ones(m, dtype=int)]),
        direction=direction,
        neighbouring="replace-one",
        canary_norm=1.0,
    )


def _crafted_gradient(mask, theta, Xb, yb) -> np.ndarray:
    """The canaries' per-example gradients for a softmax model (θ of shape (d, k), k ≥ 2),
    shape (b, d, k): K·(x̃ ⊙ mask)(p* − e_y)ᵀ — the softmax gradient of the row with its
    probabilities pinned at p* = (½, ½, 0, …), without its intercept entry (``mask``),
    times K = :data:`_CRAFTED_GAIN`.  It does not depend on θ, so every step the canary
    (label 0 or 1) is sampled it adds exactly ±C along x ⊗ (e₁ − e₀)/√2 (after
    clipping): p* − e₀ = −(p* − e₁)."""
    Xb = np.asarray(Xb, dtype=float) * mask
    k = theta.shape[1]
    pinned = np.zeros(k)
    pinned[:2] = 0.5
    r = pinned[None, :] - np.eye(k)[np.asarray(yb, dtype=int)]
    return _CRAFTED_GAIN * Xb[:, :, None] * r[:, None, :]


class _CanaryRouting:
    """The oracle of a run with gradient canaries: rows ≥ ``first`` get the crafted
    gradient (:func:`_crafted_gradient` through the library's generic clipped-sum oracle,
    clipped at the run's C), the others the run's own oracle; batches are the run's."""

    def __init__(self, oracle, first: int, gradient=None):
        self.inner, self.first = oracle, first
        mask = np.ones(oracle.X.shape[1])
        if oracle.X.fit_intercept:
            mask[-1] = 0.0
        fn = functools.partial(gradient or _crafted_gradient, mask)
        self.canaries = CallableOracle(fn, oracle.X, oracle.y, oracle.C)
        self.kind, self.C = oracle.kind, oracle.C

    def batches(self, sampler, rng, steps):
        return self.inner.batches(sampler, rng, steps)

    def clipped_sum(self, theta, idx):
        return self.clipped_sum_count(theta, idx, self.C)[0]

    def clipped_sum_count(self, theta, idx, clipping_norm):
        """The batch's clipped sum and centred count of unclipped examples at C (adaptive
        clipping): the base rows' by the run's oracle, the canaries' by the generic one."""
        if idx is None or isinstance(idx, slice):  # every row, or a contiguous batch
            idx = np.arange(self.inner.X.shape[0])[idx if idx is not None else slice(None)]
        idx = np.asarray(idx)
        canary = idx >= self.first
        out, count = _sum_count(self.inner, theta, idx[~canary], clipping_norm)
        if canary.any():
            more, extra = self.canaries.clipped_sum_count(theta, idx[canary], clipping_norm)
            out, count = out + more, count + extra
        return out, count


def _sum_count(oracle, theta, idx, clipping_norm):
    """(clipped sum, centred count) of an oracle at C (its own C for a fixed-clipping
    oracle, which has no count: 0)."""
    if hasattr(oracle, "clipped_sum_count"):
        return oracle.clipped_sum_count(theta, idx, clipping_norm)
    return oracle.clipped_sum(theta, idx), 0.0


@contextlib.contextmanager
def gradient_canaries(first: int, gradient=None) -> Iterator[None]:
    """Inside the block, every DP-SGD run (:func:`dperm.algorithms._gradient_loop.run`)
    gives the rows ``first``, ``first + 1``, … the crafted gradient of
    :func:`_crafted_gradient` instead of their loss's: the gradient canaries of Nasr et al.
    (USENIX Security 2023, threat model "gradient canary"), set through the loop's
    :data:`~dperm.algorithms._gradient_loop.GRADIENT_CANARY`.  The sampler, the clipping
    (the library's generic clipped sum at the run's C), the noise and the accountant are
    the run's own.  ``gradient(mask, theta, Xb, yb)``: another crafted gradient."""
    routing = functools.partial(_CanaryRouting, first=first, gradient=gradient)
    token = GRADIENT_CANARY.set(routing)
    try:
        yield
    finally:
        GRADIENT_CANARY.reset(token)


def _run_estimator_auto_multinomial_crafted(X, y, epsilon, delta, rng):
    """The m LLRs of one DPLogisticRegression(classes=[0, 1, 2]) fit (every other default:
    one softmax model by clipped DP-SGD) on :func:`crafted_gradient_pair` with gradient
    canaries (:func:`gradient_canaries`), observed step by step: canary j moves the noisy
    sum along e_{2+j} ⊗ (e₁ − e₀)/√2 by +C (label 0) or −C (label 1) when sampled, and
    no other row moves that coordinate — the accountant's worst case at every step."""
    from ..estimators import DPLogisticRegression

    m = X.shape[1] - _BASE_FEATURES
    rows = slice(_BASE_FEATURES, _BASE_FEATURES + m)
    with (
        gradient_canaries(X.shape[0] - m),
        record_steps(lambda theta, g: g[rows] @ _CLASS_DIRECTION) as steps,
    ):
        est = DPLogisticRegression(
            epsilon=epsilon, delta=delta, data_norm=1.0, classes=[0, 1, 2], random_state=rng
        ).fit(X, y)
    q, sigma, C = _noise(est.diagnostics_)
    o = np.asarray(steps)  # (T, m): canary j's observations
    c = np.broadcast_to(C[:, None], o.shape)
    return _llrs(o, c, -c, q, sigma)


# ============================================================ networks (dperm.networks.fit)
def dirac_pair(n: int, random_state=0):
    """n Dirac canaries audited in parallel: row j is e_j (d = n), label −1 in every
    row of D and +1 in every row of D′.

    Each canary's per-step observation is the j-th coordinate of the noisy sum, to
    which no other row contributes; the noise is isotropic and the Poisson coins
    independent, so the n scores of one run are n independent draws of the audit of
    the neighbouring pair "canary j at −1" / "canary j at +1" (whatever the other
    rows' labels: they do not enter coordinate j).  ``random_state`` is unused (the
    pair is fixed).

    Returns
    -------
    CanaryPair
    """
    X = np.eye(n)
    return CanaryPair(
        X=X,
        y=-np.ones(n),
        X_prime=X.copy(),
        y_prime=np.ones(n),
        direction=np.ones(n) / np.sqrt(n),
        neighbouring="replace-one",
        canary_norm=1.0,
    )


def _run_network_whitebox(X, y, epsilon, delta, rng):
    """The n LLRs (one per canary of :func:`dirac_pair`) of one :func:`dperm.networks.fit`
    on its default path (replace-one, default lot size, epochs, learning rate, clipping
    norm C = 1, PLD calibration) of a linear module with the canary loss −K·y·⟨w, x⟩
    (``fits._canary_loss``), observed step by step: canary j (x = e_j) moves the lot's
    sum by exactly −y·C·e_j when sampled (its gradient norm K ≫ C: clipping always
    binds), and no other row moves coordinate j."""
    with record_steps(lambda theta, g: np.array(g, dtype=float)) as steps:
        res = _fit_network(X, y, epsilon, delta, rng)
    q, sigma, C = _noise(res.diagnostics)
    o = np.asarray(steps)  # (T, n): coordinate j is canary j's observation
    c = np.broadcast_to(C[:, None], o.shape)  # canary j at −1 adds +C·e_j, at +1 −C·e_j
    return _llrs(o, c, -c, q, sigma)


def _run_network_user_loop_whitebox(X, y, epsilon, delta, rng):
    """The n LLRs (one per canary of :func:`dirac_pair`) of one run of
    :func:`dperm.networks.make_private` in a user's loop (Adam, the canary loss −K·y·⟨w, x⟩
    averaged over each lot, ``fits._fit_user_loop``), observed step by step: the DP
    optimizer reports each lot's noisy clipped sum to the same observer as dperm's loop,
    canary j moves coordinate j by exactly −y·C when sampled (clipping binds after the
    per-example gradient is recovered from the lot's mean), and no other row moves it."""
    with record_steps(lambda theta, g: np.array(g, dtype=float)) as steps:
        opt = _fit_user_loop(X, y, epsilon, delta, rng)
    q, sigma, C = opt.plan.sampler.sampling_rate, opt.noise_std, opt.clipping_norm
    o = np.asarray(steps)  # (T, n): coordinate j is canary j's observation
    c = np.full(o.shape, C)
    return _llrs(o, c, -c, q, sigma)
