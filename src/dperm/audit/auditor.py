"""The empirical privacy auditor: a lower bound on the ε an algorithm really spends.

Procedure (Jagielski, Ullman, Oprea 2020; Nasr, Song, Thakurta, Papernot,
Carlini 2021; Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis
2023; see ``docs/auditing.md``):

1. build a worst-case pair of neighbouring datasets D, D′ around a canary row
   (:mod:`dperm.audit.canary`) following the algorithm's neighbouring relation;
2. run the algorithm ``runs`` times on D and ``runs`` times on D′ with
   independent seeds (a :class:`numpy.random.SeedSequence` spawn, so results do
   not depend on ``n_jobs``), in parallel batches across processes;
3. score each output with a one-dimensional statistic (⟨θ, canary direction⟩
   unless the runner defines another);
4. on the first half of the runs of each dataset choose the threshold tests:
   the one maximizing the Clopper–Pearson ε bound (scored at the stricter level
   1 − α/50, which avoids lucky far-tail thresholds) and, for the ``"gdp"``
   method, the one maximizing the μ lower bound;
5. on the other half compute each test's FPR and FNR and their one-sided
   Clopper–Pearson upper limits FPR⁺, FNR⁺ (each at 1 − α/2), and report

   * ``epsilon_lower_bound_cp`` = ln((1 − δ − FNR⁺) / FPR⁺) (or the reversed
     ratio): ≤ the true ε with probability ≥ ``confidence`` for *every*
     (ε, δ)-DP mechanism — assumption-free;
   * ``mu_lower_bound`` = Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺) and
     ``epsilon_lower_bound_gdp`` = ε_μ(δ) of the μ-GDP profile
     (:mod:`dperm.audit.gdp`): valid under the assumption that the
     mechanism's trade-off curve is Gaussian (exact for compositions of
     Gaussian mechanisms, approximate for subsampled ones).  Far more power at
     small δ: the CP bound needs the far tails of the score distributions,
     the GDP bound uses their centre.

``method`` decides which bound is *the* ``epsilon_lower_bound`` and drives
the verdict: ``"gdp"`` (default for runners with Gaussian noise and δ > 0) or
``"clopper-pearson"`` (every other runner).  Both are in the result;
:attr:`AuditResult.verdict` says whether a refutation is assumption-free.

ε_LB is a *lower* bound: ε_LB > ε disproves the claim (with the stated
confidence, under the stated assumption); ε_LB ≤ ε proves nothing beyond
"this test could not break it".
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
from ..exceptions import DpermError, InvalidPrivacyParameter, UnknownNameError
from .canary import CanaryPair, canary_pair_from_data, check_neighbouring, make_canary_pair
from .gdp import gdp_evaluate_test, gdp_fit, gdp_select_threshold
from .registry import Runner, get_runner, projection
from .stats import evaluate_test, select_threshold

__all__ = ["METHODS", "AuditResult", "audit", "run_scores"]

#: the selection half scores thresholds at confidence 1 − α/50 (0.999 for a 95% audit)
_SELECTION_STRICTNESS = 50.0

#: ways of turning the error rates into the reported ε_LB (module docstring)
METHODS = ("gdp", "gdp-fit", "clopper-pearson")

_GDP_ASSUMPTION = (
    "μ-GDP: the mechanism's trade-off curve is Gaussian (exact for compositions of Gaussian "
    "mechanisms, approximate for Poisson-subsampled ones; Nasr et al. 2023)"
)
_FIT_ASSUMPTION = (
    "μ-GDP with Gaussian scores: the scores are Gaussian with a common variance on D and D′ "
    "(exact for the likelihood ratio of a μ-GDP mechanism, approximate for a sum of many "
    "per-step likelihood ratios; Nasr et al. 2023)"
)
_CP_ASSUMPTION = (
    "none (Clopper–Pearson bound on a threshold test, valid for every (ε, δ)-DP mechanism)"
)


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
        The ε_LB of ``method`` — the bound the verdict uses; valid with
        probability ≥ ``confidence`` (under ``assumption``); 0 when the test
        did no better than chance.
    method : {"gdp", "clopper-pearson"}
    assumption : str
        What ``epsilon_lower_bound`` assumes beyond the runs being independent.
    epsilon_lower_bound_cp : float
        The assumption-free Clopper–Pearson bound (always computed).
    epsilon_lower_bound_gdp, mu_lower_bound, mu_estimate : float or None
        The μ-GDP bound ε_μ(δ) at μ = ``mu_lower_bound`` and the point estimate
        of μ (None unless ``method == "gdp"``).
    confidence : float
    runs : int
        Runs *per dataset* (the algorithm ran 2 × runs times).
    seconds : float
        Wall-clock time of the whole audit.
    threshold, test : float, str
        The chosen Clopper–Pearson test on the score.
    fpr, fnr, fpr_upper, fnr_upper : float
        Its error rates on the evaluation half and their Clopper–Pearson upper
        limits (each at 1 − α/2).
    epsilon_estimate : float
        The CP ε formula on the observed rates (no confidence correction; may
        exceed ε by chance, never use it as evidence).
    selection_epsilon : float
        The CP bound reached in-sample on the selection half (optimistic).
    gdp_threshold, gdp_test, gdp_fpr, gdp_fnr, gdp_fpr_upper, gdp_fnr_upper
        The same for the GDP test (None unless ``method == "gdp"``).
    neighbouring : str
        The relation of the pair that was audited.
    n_jobs : int
        Worker processes actually used.
    evaluation_runs : int
        Scores per dataset used for the evaluation half (runs, or runs × canaries
        for a runner with several independent canaries per run).
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
    method: str = "clopper-pearson"
    assumption: str = _CP_ASSUMPTION
    epsilon_lower_bound_cp: float = 0.0
    epsilon_lower_bound_gdp: float | None = None
    mu_lower_bound: float | None = None
    mu_estimate: float | None = None
    gdp_threshold: float | None = None
    gdp_test: str | None = None
    gdp_fpr: float | None = None
    gdp_fnr: float | None = None
    gdp_fpr_upper: float | None = None
    gdp_fnr_upper: float | None = None

    @property
    def ratio(self) -> float:
        """ε_LB / ε (≤ 1 for a claim the audit could not refute)."""
        return self.epsilon_lower_bound / self.epsilon

    @property
    def violated(self) -> bool:
        """True when ε_LB (of ``method``) exceeds the claimed ε: the claim is
        refuted with probability ≥ ``confidence`` under ``assumption``."""
        return self.epsilon_lower_bound > self.epsilon

    @property
    def violated_assumption_free(self) -> bool:
        """True when the assumption-free Clopper–Pearson bound exceeds ε."""
        return self.epsilon_lower_bound_cp > self.epsilon

    @property
    def verdict(self) -> str:
        """``"refuted"`` (assumption-free), ``"refuted under the μ-GDP
        assumption"`` or ``"not refuted"``."""
        if self.violated_assumption_free:
            return "refuted"
        if self.violated:
            return "refuted under the μ-GDP assumption"
        return "not refuted"

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict of every field plus ``ratio``, ``violated``,
        ``violated_assumption_free`` and ``verdict`` (an infinite value is
        written as the string ``"inf"``, a missing one as None)."""
        out = dataclasses.asdict(self)
        out["ratio"] = self.ratio
        out["violated"] = self.violated
        out["violated_assumption_free"] = self.violated_assumption_free
        out["verdict"] = self.verdict
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = "inf" if v > 0 else "-inf" if v < 0 else "nan"
        return out

    def summary(self) -> str:
        """One line for humans."""
        extra = ""
        if self.method in ("gdp", "gdp-fit"):
            extra = f" [μ-GDP; assumption-free ε_LB = {self.epsilon_lower_bound_cp:.3f}]"
        return (
            f"{self.mechanism} ({self.neighbouring}): ε_LB = {self.epsilon_lower_bound:.3f}"
            f"{extra} ({self.confidence:.0%} confidence) vs claimed ε = {self.epsilon:g}, "
            f"δ = {self.delta:g}; {self.runs} runs per dataset, {self.seconds:.1f} s"
        )


# --------------------------------------------------------------------- execution
def _run_batch(runner, X, y, epsilon, delta, seeds, direction, statistic) -> np.ndarray:
    """Run ``runner`` once per seed and return the scores ``statistic(θ, direction)``.

    BLAS is limited to one thread: the problems are tiny, and a multi-threaded
    BLAS on a loaded machine makes each run ~100× slower (spin-waiting threads).
    """
    with threadpool_limits(limits=1):
        return _run_batch_inner(runner, X, y, epsilon, delta, seeds, direction, statistic)


def _run_batch_inner(runner, X, y, epsilon, delta, seeds, direction, statistic) -> np.ndarray:
    parts = []
    for ss in seeds:  # independent algorithm runs, not data rows
        rng = np.random.default_rng(ss)
        # a float, or one score per canary for the runners that audit several
        # independent canaries per run (dperm.audit.whitebox)
        parts.append(
            np.atleast_1d(
                np.asarray(statistic(runner(X, y, epsilon, delta, rng), direction), dtype=float)
            )
        )
    out = np.concatenate(parts) if parts else np.empty(0)
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
    statistic: Callable | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Run ``runner`` ``runs`` times on each dataset of ``pair``.

    Parameters
    ----------
    statistic : callable, optional
        ``statistic(output, direction) -> float``; default the runner's
        (:attr:`Runner.statistic`) or :func:`~dperm.audit.runners.projection`.

    Returns
    -------
    scores_d, scores_dprime : ndarray of shape (runs,)
    n_jobs_used : int
        1 when the runner cannot be sent to worker processes (not picklable).
    """
    if statistic is None:
        statistic = getattr(runner, "statistic", None) or projection
    n_jobs = min(_resolve_n_jobs(n_jobs), 2 * runs)
    ss = _seed_sequence(random_state)
    seeds = ss.spawn(2 * runs)
    seeds_d, seeds_p = seeds[:runs], seeds[runs:]
    if n_jobs > 1 and not (_picklable(runner) and _picklable(statistic)):
        n_jobs = 1
    args_d = (runner, pair.X, pair.y, epsilon, delta)
    args_p = (runner, pair.X_prime, pair.y_prime, epsilon, delta)
    if n_jobs == 1:
        s0 = _run_batch(*args_d, seeds_d, pair.direction, statistic)
        s1 = _run_batch(*args_p, seeds_p, pair.direction, statistic)
        return s0, s1, 1
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    if ctx.get_start_method() == "fork":
        # warm-up run on each dataset in this process (outputs discarded): whatever a
        # runner memoises per process (a calibrated noise multiplier, the default
        # constants) is then computed once and inherited by every forked worker
        warm = np.random.SeedSequence(0)
        _run_batch(*args_d, [warm], pair.direction, statistic)
        _run_batch(*args_p, [warm], pair.direction, statistic)
    # a few batches per worker: balances load without per-run process overhead
    n_chunks = max(1, min(runs, 2 * n_jobs))
    bounds = np.linspace(0, runs, n_chunks + 1).astype(int)
    futures0, futures1 = [], []
    with cf.ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx) as ex:
        for a, b in itertools.pairwise(bounds):
            if b <= a:
                continue
            futures0.append(ex.submit(_run_batch, *args_d, seeds_d[a:b], pair.direction, statistic))
            futures1.append(ex.submit(_run_batch, *args_p, seeds_p[a:b], pair.direction, statistic))
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


def _resolve_method(method, runner, delta: float) -> str:
    """The bound the verdict uses: ``method`` as given (checked), else "gdp" for a
    runner with Gaussian noise and δ > 0, else "clopper-pearson"."""
    if method is None:
        gaussian = isinstance(runner, Runner) and runner.noise == "gaussian"
        if gaussian and delta > 0 and runner.method is not None:
            return runner.method
        return "gdp" if gaussian and delta > 0 else "clopper-pearson"
    if method not in METHODS:
        raise UnknownNameError(f"unknown audit method {method!r}; choose one of {list(METHODS)}")
    if method != "clopper-pearson" and delta == 0:
        raise InvalidPrivacyParameter(
            f"method={method!r} needs a claim with delta > 0 (μ-GDP has δ(ε) > 0 at every "
            f"finite ε), got delta={delta!r}"
        )
    return method


def _resolve_pair(data, runner, relation) -> CanaryPair:
    if data is None:
        if isinstance(runner, Runner):
            return runner.make_pair(neighbouring=relation)
        return make_canary_pair(neighbouring=relation)
    if isinstance(data, CanaryPair):
        return data
    try:
        X, y = data
    except (TypeError, ValueError):
        raise InvalidPrivacyParameter(
            f"data must be a CanaryPair or a tuple (X, y), got {type(data).__name__}"
        ) from None
    kw = {}
    if isinstance(runner, Runner):
        kw = {"data_norm": runner.data_norm, "label_bound": runner.label_bound}
    return canary_pair_from_data(X, y, neighbouring=relation, **kw)


def audit(
    mechanism_or_runner,
    *,
    epsilon: float,
    delta: float | None = None,
    runs: int | None = None,
    confidence: float = 0.95,
    data=None,
    n_jobs: int | None = None,
    random_state=None,
    neighbouring: str | None = None,
    method: str | None = None,
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
        callable).  Enters ε_LB as ln((1 − δ − FNR⁺)/FPR⁺), and as the δ at
        which the μ-GDP profile is read.
    runs : int ≥ 2, optional
        Runs per dataset (2 × runs runs in total; half of each are used to
        choose the tests, half to evaluate them).  Default: the runner's
        ``default_runs`` (1000 for a plain callable).
    confidence : float in (0, 1)
        Confidence level of every bound.
    data : CanaryPair or (X, y), optional
        The neighbouring pair to use; (X, y) is a base dataset to which a zero
        column and the canary are added.  Default: the runner's small
        synthetic pair (:meth:`Runner.make_pair`).
    n_jobs : int, optional
        Worker processes; default ``os.cpu_count()`` (-1 means the same).
    random_state : None, int, SeedSequence or Generator
        Seeds every run (None = OS entropy).
    neighbouring : {"replace-one", "add-remove"}, optional
        Overrides the runner's relation ("add-remove-one" is accepted).
    method : {"gdp", "clopper-pearson"}, optional
        Which bound is ``epsilon_lower_bound`` (and decides ``violated``).
        Default "gdp" for runners with Gaussian noise (``Runner.noise``) and
        δ > 0, else "clopper-pearson".  The assumption-free CP bound is always
        reported as ``epsilon_lower_bound_cp``.

    Returns
    -------
    AuditResult

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ, runs, confidence, n_jobs or random_state; method "gdp" with
        δ = 0.
    UnknownNameError
        Unknown runner name, neighbouring relation or method.
    DpermError
        The runner's algorithm is not installed, or it returned a non-finite
        or mis-shaped θ.
    """
    t0 = time.perf_counter()
    epsilon = check_epsilon(epsilon)
    confidence = check_probability(confidence, "confidence")
    if confidence >= 1.0:
        raise InvalidPrivacyParameter(f"confidence must be in (0, 1), got {confidence!r}")
    name, runner, relation = _resolve_runner(mechanism_or_runner, neighbouring)
    relation = check_neighbouring(relation)
    if runs is None:
        runs = getattr(runner, "default_runs", 1000)
    runs = check_count(runs, "runs", minimum=2)
    if delta is None:
        delta = getattr(runner, "default_delta", 0.0)
    delta = check_delta(delta)
    method = _resolve_method(method, runner, delta)
    pair = _resolve_pair(data, runner, relation)

    s0, s1, used = run_scores(
        runner,
        pair,
        epsilon=epsilon,
        delta=delta,
        runs=runs,
        n_jobs=n_jobs,
        random_state=random_state,
    )
    # (a runner may return several independent scores per run: split the scores)
    half = s0.size // 2
    sel0, sel1, ev0, ev1 = s0[:half], s1[: s1.size // 2], s0[half:], s1[s1.size // 2 :]
    # Selection is scored with a stricter Clopper–Pearson level than the report: it
    # favours thresholds whose counts are large enough to replicate, instead of far-tail
    # thresholds whose in-sample counts were merely lucky (the winner's curse).  Any
    # selection rule keeps the evaluation on the other half valid.
    sel_conf = 1.0 - (1.0 - confidence) / _SELECTION_STRICTNESS
    test, sel_eps = select_threshold(sel0, sel1, delta=delta, confidence=sel_conf)
    ev = evaluate_test(test, ev0, ev1, delta=delta, confidence=confidence)
    gdp: dict[str, Any] = {}
    eps_lb = ev["epsilon_lower_bound"]
    if method in ("gdp", "gdp-fit"):
        gtest, _ = gdp_select_threshold(sel0, sel1, confidence=sel_conf)
        g = gdp_evaluate_test(gtest, ev0, ev1, delta=delta, confidence=confidence)
        described = gtest.describe()
        if method == "gdp-fit":  # every run, the Gaussian fit (gdp.gdp_fit)
            g = gdp_fit(s0, s1, delta=delta, confidence=confidence)
            described = "Gaussian fit of all scores: μ = (mean on D′ − mean on D)/sd"
        eps_lb = g.epsilon_lower_bound
        gdp = {
            "epsilon_lower_bound_gdp": g.epsilon_lower_bound,
            "mu_lower_bound": g.mu_lower_bound,
            "mu_estimate": g.mu_estimate,
            "gdp_threshold": gtest.threshold,
            "gdp_test": described,
            "gdp_fpr": g.fpr,
            "gdp_fnr": g.fnr,
            "gdp_fpr_upper": g.fpr_upper,
            "gdp_fnr_upper": g.fnr_upper,
        }
    return AuditResult(
        mechanism=name,
        epsilon=epsilon,
        delta=delta,
        epsilon_lower_bound=eps_lb,
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
        evaluation_runs=s0.size - half,
        method=method,
        assumption={"gdp": _GDP_ASSUMPTION, "gdp-fit": _FIT_ASSUMPTION}.get(method, _CP_ASSUMPTION),
        epsilon_lower_bound_cp=ev["epsilon_lower_bound"],
        **gdp,
    )
