"""One-run auditing of a user's own configuration (Steinke, Nasr, Jagielski, "Privacy
Auditing with One (1) Training Run", NeurIPS 2023).

Instead of thousands of runs on two datasets, one fit of the user's estimator on
the user's data plus m **canary slots**: slot j is a row with the public row bound R
in a new feature column of its own (zero elsewhere; the user's rows are 0 there),
whose label is one of two public values (the two classes, or ±B for a regressor)
by an independent fair coin Sⱼ.  Two datasets that differ in one coin are
replace-one neighbours, so the run is (ε, δ)-DP with respect to every coin.

After the fit the auditor scores every slot — in the white-box threat model of
DP-SGD (a fit that runs :func:`dperm.algorithms._gradient_loop.run`: the
per-step noisy sums, read through its observer) by −Σₜ gₜ[j], the sum of the
noisy gradient coordinates of the canary's column (a canary pulls its coefficient
towards its label); otherwise (one-shot mechanisms: the final model only) by the
released coefficient of its column — and guesses the coin of the k/2 highest and
the k/2 lowest scores, abstaining on the others.  If W of the k guesses are
right, Steinke et al. (Theorem 3.1 for ε-DP, Theorem 5.2 with δ) bound, for an
(ε, δ)-DP fit,

    P[W ≥ v] ≤ P[Binomial(k, e^ε/(1 + e^ε)) ≥ v] + 2mδ·max_{1≤i≤v} P[v − i ≤ Binomial < v]/i,

and the lower bound is the largest ε this p-value rejects at level α (Bonferroni
over the few values of k tried).

**A sanity check, not a proof.**  One run sees one realisation; the canaries
interfere with each other and with the data; the statistic is not the optimal
test; the bound is far below the tight multi-run audits of :func:`dperm.audit.audit`
(and cannot exceed ~ln(m) for m canaries).  A bound above the claimed ε refutes
the configuration (with the stated confidence); a bound below it shows nothing
beyond "this test did not break it".  The canary columns and rows also change
the public inputs of ``mechanism="auto"`` (n, d), so the configuration audited is
the user's with m + d features and n + m rows.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
from scipy import sparse
from scipy import stats as _st

from .._rng import check_random_state
from .._validation import check_count, check_delta, check_probability
from ..algorithms._gradient_loop import STEP_OBSERVER
from ..exceptions import InvalidDataError, InvalidPrivacyParameter

__all__ = ["OneRunResult", "one_run_audit", "one_run_bound", "one_run_p_value"]

#: the numbers of guesses tried, as fractions of the canaries (Bonferroni over them)
_GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def one_run_p_value(m: int, k: int, v: int, epsilon: float, delta: float) -> float:
    """P[≥ v of k guesses right] for an (ε, δ)-DP run with m canary coins: the bound
    of Steinke, Nasr, Jagielski (2023), Theorem 5.2 (module docstring).

    Raises
    ------
    InvalidPrivacyParameter
        Counts not 0 ≤ v ≤ k ≤ m, ε < 0 or δ ∉ [0, 1].
    """
    if not (0 <= v <= k <= m):
        raise InvalidPrivacyParameter(f"need 0 ≤ v ≤ k ≤ m, got v={v}, k={k}, m={m}")
    if not epsilon >= 0:
        raise InvalidPrivacyParameter(f"epsilon must be ≥ 0, got {epsilon!r}")
    delta = check_delta(delta, allow_zero=True)
    p = 1.0 / (1.0 + math.exp(-epsilon))  # the accuracy of ε-randomized response
    tail = float(_st.binom.sf(v - 1, k, p))
    if delta == 0 or v == 0:
        return tail
    i = np.arange(1, v + 1)
    below = np.cumsum(_st.binom.pmf(v - i, k, p))  # P[v − i ≤ Bin < v]
    return tail + 2.0 * m * delta * float(np.max(below / i))


def _epsilon_bound(m: int, k: int, v: int, delta: float, alpha: float) -> float:
    """The largest ε whose p-value is ≤ α (0 when even ε = 0 is not rejected)."""
    if one_run_p_value(m, k, v, 0.0, delta) > alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(m, k, v, hi, delta) <= alpha and hi < 100.0:
        lo, hi = hi, 2.0 * hi
    for _ in range(40):  # the bracket shrinks to ≤ 100·2⁻⁴⁰
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, k, v, mid, delta) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_bound(scores, signs, *, delta: float, confidence: float = 0.95) -> dict[str, Any]:
    """ε lower bound from one run's canary scores and coins.

    Parameters
    ----------
    scores : array of shape (m,)
        Higher means "coin +1" (the canary's label is the positive one).
    signs : array of shape (m,) of ±1
        The coins.
    delta : float in [0, 1)
        δ of the claim.
    confidence : float in (0, 1)

    Returns
    -------
    dict
        ``epsilon_lower_bound``, ``guesses`` k and ``correct`` v of the best number of
        guesses (k/2 top scores guessed +1, k/2 bottom −1), ``canaries`` m.

    Raises
    ------
    InvalidDataError
        Mismatched shapes, non-finite scores or coins other than ±1.
    """
    s = np.asarray(scores, dtype=float).ravel()
    c = np.asarray(signs, dtype=float).ravel()
    if s.shape != c.shape or s.size < 2:
        raise InvalidDataError(
            f"scores and signs must have the same length ≥ 2, got {s.shape}, {c.shape}"
        )
    if not np.all(np.isfinite(s)) or not np.all(np.abs(c) == 1):
        raise InvalidDataError("scores must be finite and signs ±1")
    confidence = check_probability(confidence, "confidence")
    m = s.size
    order = np.argsort(s, kind="stable")
    ks = sorted({max(2, 2 * round(f * m / 2)) for f in _GUESS_FRACTIONS})
    ks = [k for k in ks if k <= m]
    alpha = (1.0 - confidence) / len(ks)
    best = {"epsilon_lower_bound": 0.0, "guesses": ks[0], "correct": 0, "canaries": m}
    for k in ks:
        h = k // 2
        v = int(np.sum(c[order[m - h :]] > 0) + np.sum(c[order[:h]] < 0))
        eps = _epsilon_bound(m, 2 * h, v, delta, alpha)
        if eps > best["epsilon_lower_bound"] or best["correct"] == 0:
            best = {"epsilon_lower_bound": eps, "guesses": 2 * h, "correct": v, "canaries": m}
    return best


@dataclasses.dataclass(frozen=True)
class OneRunResult:
    """Outcome of :func:`one_run_audit` (see the module docstring for what it shows)."""

    epsilon_lower_bound: float
    confidence: float
    epsilon: float
    delta: float
    canaries: int
    guesses: int
    correct: int
    threat_model: str
    mechanism: str
    neighbouring: str
    seconds: float
    note: str = "a sanity check from one training run, not a proof of privacy"

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict of every field plus ``refuted`` (ε_LB > ε)."""
        out = dataclasses.asdict(self)
        out["refuted"] = self.epsilon_lower_bound > self.epsilon
        return out


def _with_canaries(X, y, m: int, norm: float, labels, rng):
    """(X′, y′, coins): X with m zero columns, then m canary rows (norm ``norm`` in their
    own column), labelled ``labels[1]`` (coin +1) or ``labels[0]`` (coin −1)."""
    X = sparse.csr_matrix(X) if not sparse.issparse(X) else X.tocsr()
    n, d = X.shape
    coins = rng.choice([-1.0, 1.0], size=m)
    canaries = sparse.csr_matrix(
        (np.full(m, float(norm)), (np.arange(m), d + np.arange(m))), shape=(m, d + m)
    )
    Xc = sparse.vstack([sparse.hstack([X, sparse.csr_matrix((n, m))]), canaries]).tocsr()
    y = np.asarray(y)
    yc = np.where(coins > 0, labels[1], labels[0]).astype(y.dtype, copy=False)
    return Xc, np.concatenate([y, yc]), coins, d


def _canary_labels(estimator, y):
    """The two public label values of the coins: the classifier's first two classes
    (its ``classes`` or the two values of y), or ±B for a regressor."""
    classes = getattr(estimator, "classes", None)
    if hasattr(estimator, "label_bound") and not hasattr(estimator, "predict_proba"):
        bound = getattr(estimator, "label_bound", None) or 1.0
        return (-float(bound), float(bound)), None
    values = np.unique(np.asarray(y)) if classes is None else np.asarray(list(classes))
    if values.size < 2:
        raise InvalidDataError("a one-run audit of a classifier needs two classes")
    return (values[0], values[1]), (0, 1)


def one_run_audit(
    estimator,
    X,
    y,
    *,
    canaries: int = 1000,
    confidence: float = 0.95,
    random_state=None,
) -> OneRunResult:
    """Lower bound on the ε of ``estimator`` from one fit with ``canaries`` inserted
    canary slots (module docstring; Steinke, Nasr, Jagielski 2023).

    Parameters
    ----------
    estimator : a dperm estimator (unfitted; it is fitted here on the data and canaries)
        Its ``epsilon``, ``delta`` and ``data_norm`` are the configuration audited.
    X : array or sparse matrix of shape (n, d)
    y : array of shape (n,)
    canaries : int ≥ 10
        m, the canary slots (each a row and a column).
    confidence : float in (0, 1)
    random_state : None, int or Generator
        The coins (the fit's own noise follows ``estimator.random_state``).

    Returns
    -------
    OneRunResult

    Raises
    ------
    InvalidDataError, InvalidPrivacyParameter
        Bad data or settings (and whatever the estimator's fit raises).
    """
    t0 = time.perf_counter()
    m = check_count(canaries, "canaries", minimum=10)
    rng = check_random_state(random_state)
    labels, class_index = _canary_labels(estimator, y)
    norm = float(getattr(estimator, "data_norm", None) or 1.0)
    Xc, yc, coins, d = _with_canaries(X, y, m, norm, labels, rng)
    total = np.zeros(m)
    observed = [0]

    def observer(t, theta, g):
        col = np.asarray(g)[d : d + m]
        if col.ndim == 2:  # softmax: the two classes' gradient columns
            col = col[:, class_index[1]] - col[:, class_index[0]]
        total[:] -= col  # a canary pulls its coefficient towards its label
        observed[0] += 1

    token = STEP_OBSERVER.set(observer)
    try:
        estimator.fit(Xc, yc)
    finally:
        STEP_OBSERVER.reset(token)
    if observed[0]:
        scores, threat = total, "white box: every step's noisy sum (DP-SGD / DP-GD)"
    else:
        coef = np.atleast_2d(np.asarray(estimator.coef_, dtype=float))
        row = coef[-1] if class_index is None or coef.shape[0] == 1 else coef[1] - coef[0]
        scores, threat = row[d : d + m], "black box: the released coefficients"
    delta = float(getattr(estimator, "delta_", None) or 0.0)
    best = one_run_bound(scores, coins, delta=delta, confidence=confidence)
    return OneRunResult(
        epsilon_lower_bound=best["epsilon_lower_bound"],
        confidence=confidence,
        epsilon=float(getattr(estimator, "epsilon_", estimator.epsilon)),
        delta=delta,
        canaries=m,
        guesses=best["guesses"],
        correct=best["correct"],
        threat_model=threat,
        mechanism=str(getattr(estimator, "mechanism_", getattr(estimator, "mechanism", "?"))),
        neighbouring=str(getattr(estimator, "neighbouring_", "replace-one")),
        seconds=time.perf_counter() - t0,
    )
