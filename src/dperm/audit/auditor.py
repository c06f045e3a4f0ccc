"""The empirical privacy auditor: a lower bound on the ε an algorithm really spends.

Procedure (Jagielski, Ullman, Oprea 2020; Nasr, Song, Thakurta, Papernot,
Carlini 2021; see ``docs/auditing.md``):

1. build a worst-case pair of neighbouring datasets D, D′ around a canary row
   (:mod:`dperm.audit.canary`) following the algorithm's neighbouring relation;
2. run the algorithm ``runs`` times on D and ``runs`` times on D′ with
   independent seeds (a :class:`numpy.random.SeedSequence` spawn, so results do
   not depend on ``n_jobs``), in parallel batches across processes;
3. score each output with ⟨θ, canary direction⟩;
4. on the first half of the runs of each dataset choose the threshold test
   (threshold, orientation, direct or reversed bound) maximizing the bound
   (scored at the stricter level 1 − α/50, which avoids lucky far-tail
   thresholds);
5. on the other half compute FPR and FNR of that test, their one-sided
   Clopper–Pearson upper limits FPR⁺, FNR⁺ (each at 1 − α/2), and report

       ε_LB = ln((1 − δ − FNR⁺) / FPR⁺)     (or the reversed ratio),

   which is ≤ the true ε of the algorithm with probability ≥ ``confidence``.

ε_LB is a *lower* bound: ε_LB > ε disproves the claim (with the stated
confidence); ε_LB ≤ ε proves nothing beyond "this test could not break it".
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import math
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from .._rng import check_random_state
from .._validation import check_count, check_delta, check_epsilon, check_probability
from ..exceptions import DpermError, InvalidPrivacyParameter
from .canary import CanaryPair, canary_pair_from_data, check_neighbouring, make_canary_pair
from .runners import Runner, get_runner
from .stats import evaluate_test, select_threshold

__all__ = ["AuditResult", "audit", "run_scores"]

#: the selection half scores thresholds at confidence 1 − α/50 (0.999 for a 95% audit)
_SELECTION_STRICTNESS = 50.0


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    Attributes
    ----------
    mechanism : str
        Runner name.
    epsilon, delta : float
        The claim that was audited.
    epsilon_lower_bound : float
        ε_LB, valid with probability ≥ ``confidence``; 0 when the test did no
        better than chance.
    confidence : float
    runs : int
        Runs *per dataset* (the algorithm ran 2 × runs times).
    seconds : float
        Wall-clock time of the whole audit.
    threshold : float
        Threshold of the chosen test on the score ⟨θ, canary direction⟩.
    test : str
        Human-readable description of the chosen test.
    fpr, fnr : float
        Error rates of that test on the evaluation half.
    fpr_upper, fnr_upper : float
        Their Clopper–Pearson upper limits (each at 1 − α/2).
    epsilon_estimate : float
        The ε formula on the observed rates (no confidence correction; may
        exceed ε by chance, never use it as evidence).
    selection_epsilon : float
        The bound reached in-sample on the selection half (at the stricter
        selection level 1 − α/50; optimistic nonetheless).
    neighbouring : str
    n_jobs : int
        Worker processes actually used.
    evaluation_runs : int
        Runs per dataset used for the evaluation half.
    """

    mechanism: str
    epsilon: float
    delta: float
    epsilon_lower_bound: float
    confidence: float
    runs: int
    seconds: float
    threshold: float
    test: str
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    epsilon_estimate: float
    selection_epsilon: float
    neighbouring: str
    n_jobs: int
    evaluation_runs: int

    @property
    def ratio(self) -> float:
        """ε_LB / ε (≤ 1 for a claim the audit could not refute)."""
        return self.epsilon_lower_bound / self.epsilon

    @property
    def violated(self) -> bool:
        """True when ε_LB exceeds the claimed ε: the claim is refuted with
        probability ≥ ``confidence``."""
        return self.epsilon_lower_bound > self.epsilon

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict of every field plus ``ratio`` and ``violated``
        (an infinite estimate is written as the string ``"inf"``)."""
        out = dataclasses.asdict(self)
        out["ratio"] = self.ratio
        out["violated"] = self.violated
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = "inf" if v > 0 else "-inf" if v < 0 else "nan"
        return out

    def summary(self) -> str:
        """One line for humans."""
        return (
            f"{self.mechanism}: ε_LB = {self.epsilon_lower_bound:.3f} "
            f"({self.confidence:.0%} confidence) vs claimed ε = {self.epsilon:g}, "
            f"δ = {self.delta:g}; {self.runs} runs per dataset, {self.seconds:.1f} s"
        )


# --------------------------------------------------------------------- execution
def _run_batch(runner, X, y, epsilon, delta, seeds, direction) -> np.ndarray:
    """Run ``runner`` once per seed and return the scores ⟨θ, direction⟩.

    BLAS is limited to one thread: the problems are tiny, and a multi-threaded
    BLAS on a loaded machine makes each run ~100× slower (spin-waiting threads).
    """
    with threadpool_limits(limits=1):
        return _run_batch_inner(runner, X, y, epsilon, delta, seeds, direction)


def _run_batch_inner(runner, X, y, epsilon, delta, seeds, direction) -> np.ndarray:
    out = np.empty(len(seeds))
    for i, ss in enumerate(seeds):  # independent algorithm runs, not data rows
        rng = np.random.default_rng(ss)
        theta = np.asarray(runner(X, y, epsilon, delta, rng), dtype=float)
        if theta.ndim == 2:
            theta = theta[:, 0]
        if theta.shape != direction.shape:
            raise DpermError(
                f"runner returned theta of shape {theta.shape}, expected {direction.shape}"
            )
        out[i] = float(theta @ direction)
    if not np.all(np.isfinite(out)):
        raise DpermError("the audited algorithm returned a non-finite theta")
    return out


def _resolve_n_jobs(n_jobs) -> int:
    cpu = os.cpu_count() or 1
    if n_jobs is None:
        return cpu
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int | np.integer):
        raise InvalidPrivacyParameter(f"n_jobs must be an int or None, got {n_jobs!r}")
    n_jobs = int(n_jobs)
    if n_jobs == -1:
        return cpu
    if n_jobs < 1:
        raise InvalidPrivacyParameter(f"n_jobs must be ≥ 1, -1 or None, got {n_jobs!r}")
    return n_jobs


def _picklable(obj) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:  # any pickling failure means "run in-process"
        return False
    return True


def _seed_sequence(random_state) -> np.random.SeedSequence:
    """The root of the per-run seeds: a SeedSequence as given, or one drawn from
    :func:`dperm._rng.check_random_state` (None = OS entropy)."""
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    gen = check_random_state(random_state)
    return np.random.SeedSequence(gen.integers(0, 2**63 - 1, size=4).tolist())


def run_scores(
    runner: Callable,
    pair: CanaryPair,
    *,
    epsilon: float,
    delta: float,
    runs: int,
    n_jobs: int | None = None,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Run ``runner`` ``runs`` times on each dataset of ``pair``.

    Returns
    -------
    scores_d, scores_dprime : ndarray of shape (runs,)
    n_jobs_used : int
        1 when the runner cannot be sent to worker processes (not picklable).
    """
    n_jobs = min(_resolve_n_jobs(n_jobs), 2 * runs)
    ss = _seed_sequence(random_state)
    seeds = ss.spawn(2 * runs)
    seeds_d, seeds_p = seeds[:runs], seeds[runs:]
    if n_jobs > 1 and not _picklable(runner):
        n_jobs = 1
    if n_jobs == 1:
        s0 = _run_batch(runner, pair.X, pair.y, epsilon, delta, seeds_d, pair.direction)
        s1 = _run_batch(runner, pair.X_prime, pair.y_prime, epsilon, delta, seeds_p, pair.direction)
        return s0, s1, 1
    # a few batches per worker: balances load without per-run process overhead
    n_chunks = max(1, min(runs, 2 * n_jobs))
    bounds = np.linspace(0, runs, n_chunks + 1).astype(int)
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    futures0, futures1 = [], []
    with cf.ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx) as ex:
        for a, b in itertools.pairwise(bounds):
            if b <= a:
                continue
            futures0.append(
                ex.submit(
                    _run_batch,
                    runner,
                    pair.X,
                    pair.y,
                    epsilon,
                    delta,
                    seeds_d[a:b],
                    pair.direction,
                )
            )
            futures1.append(
                ex.submit(
                    _run_batch,
                    runner,
                    pair.X_prime,
                    pair.y_prime,
                    epsilon,
                    delta,
                    seeds_p[a:b],
                    pair.direction,
                )
            )
        s0 = np.concatenate([f.result() for f in futures0])
        s1 = np.concatenate([f.result() for f in futures1])
    return s0, s1, n_jobs


def _resolve_runner(mechanism_or_runner, neighbouring) -> tuple[str, Runner | Callable, str]:
    if isinstance(mechanism_or_runner, str):
        r = get_runner(mechanism_or_runner)
        r.require()
        return r.name, r, neighbouring or r.neighbouring
    if isinstance(mechanism_or_runner, Runner):
        mechanism_or_runner.require()
        return (
            mechanism_or_runner.name,
            mechanism_or_runner,
            neighbouring or mechanism_or_runner.neighbouring,
        )
    if callable(mechanism_or_runner):
        name = getattr(mechanism_or_runner, "__name__", type(mechanism_or_runner).__name__)
        return name, mechanism_or_runner, neighbouring or "replace-one"
    raise InvalidPrivacyParameter(
        "mechanism_or_runner must be a runner name, a Runner or a callable "
        f"(X, y, epsilon, delta, rng) -> theta, got {mechanism_or_runner!r}"
    )


def audit(
    mechanism_or_runner,
    *,
    epsilon: float,
    delta: float | None = None,
    runs: int = 1000,
    confidence: float = 0.95,
    data=None,
    n_jobs: int | None = None,
    random_state=None,
    neighbouring: str | None = None,
) -> AuditResult:
    """Empirical lower bound on the ε of a private algorithm (module docstring).

    Parameters
    ----------
    mechanism_or_runner : str, Runner or callable
        A registered runner name (see :func:`dperm.audit.available_runners`),
        a :class:`~dperm.audit.Runner`, or any callable
        ``(X, y, epsilon, delta, rng) -> theta`` (then ``neighbouring``
        defaults to "replace-one"; make it a module-level function to run it in
        parallel).
    epsilon : float > 0
        The claimed ε, passed to the algorithm and compared with ε_LB.
    delta : float in [0, 1), optional
        The claimed δ; default the runner's ``default_delta`` (0 for a plain
        callable).  Enters ε_LB as ln((1 − δ − FNR⁺)/FPR⁺).
    runs : int ≥ 10
        Runs per dataset (2 × runs runs in total; half of each are used to
        choose the test, half to evaluate it).
    confidence : float in (0, 1)
        Confidence level of ε_LB.
    data : CanaryPair or (X, y), optional
        The neighbouring pair to use; (X, y) is a base dataset to which a zero
        column and the canary are added.  Default: the runner's small
        synthetic pair (:func:`~dperm.audit.make_canary_pair`).
    n_jobs : int, optional
        Worker processes; default ``os.cpu_count()`` (-1 means the same).
    random_state : None, int, SeedSequence or Generator
        Seeds every run (None = OS entropy).
    neighbouring : {"replace-one", "add-remove-one"}, optional
        Overrides the runner's relation.

    Returns
    -------
    AuditResult

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ, runs, confidence, n_jobs or random_state.
    UnknownNameError
        Unknown runner name or neighbouring relation.
    DpermError
        The runner's algorithm is not installed, or it returned a non-finite
        or mis-shaped θ.
    """
    t0 = time.perf_counter()
    epsilon = check_epsilon(epsilon)
    runs = check_count(runs, "runs", minimum=10)
    confidence = check_probability(confidence, "confidence")
    if confidence >= 1.0:
        raise InvalidPrivacyParameter(f"confidence must be in (0, 1), got {confidence!r}")
    name, runner, relation = _resolve_runner(mechanism_or_runner, neighbouring)
    relation = check_neighbouring(relation)
    if delta is None:
        delta = getattr(runner, "default_delta", 0.0)
    delta = check_delta(delta)

    if data is None:
        if isinstance(runner, Runner):
            pair = runner.make_pair(neighbouring=relation)
        else:
            pair = make_canary_pair(neighbouring=relation)
    elif isinstance(data, CanaryPair):
        pair = data
    else:
        try:
            X, y = data
        except (TypeError, ValueError):
            raise InvalidPrivacyParameter(
                f"data must be a CanaryPair or a tuple (X, y), got {type(data).__name__}"
            ) from None
        kw = {}
        if isinstance(runner, Runner):
            kw = {"data_norm": runner.data_norm, "label_bound": runner.label_bound}
        pair = canary_pair_from_data(X, y, neighbouring=relation, **kw)

    s0, s1, used = run_scores(
        runner,
        pair,
        epsilon=epsilon,
        delta=delta,
        runs=runs,
        n_jobs=n_jobs,
        random_state=random_state,
    )
    half = runs // 2
    # Selection is scored with a stricter Clopper–Pearson level than the report: it
    # favours thresholds whose counts are large enough to replicate, instead of far-tail
    # thresholds whose in-sample counts were merely lucky (the winner's curse).  Any
    # selection rule keeps the evaluation on the other half valid.
    sel_conf = 1.0 - (1.0 - confidence) / _SELECTION_STRICTNESS
    test, sel_eps = select_threshold(s0[:half], s1[:half], delta=delta, confidence=sel_conf)
    ev = evaluate_test(test, s0[half:], s1[half:], delta=delta, confidence=confidence)
    return AuditResult(
        mechanism=name,
        epsilon=epsilon,
        delta=delta,
        epsilon_lower_bound=ev["epsilon_lower_bound"],
        confidence=confidence,
        runs=runs,
        seconds=time.perf_counter() - t0,
        threshold=test.threshold,
        test=test.describe(),
        fpr=ev["fpr"],
        fnr=ev["fnr"],
        fpr_upper=ev["fpr_upper"],
        fnr_upper=ev["fnr_upper"],
        epsilon_estimate=ev["epsilon_estimate"],
        selection_epsilon=sel_eps,
        neighbouring=pair.neighbouring,
        n_jobs=used,
        evaluation_runs=runs - half,
    )
