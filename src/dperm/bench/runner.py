"""The ``dperm bench`` runner: every available algorithm × dataset × ε × repeat.

Library entry point: :func:`run_bench`.  For each dataset present it fits

* ``non-private`` — scikit-learn's ``LogisticRegression`` (C = 1, one-vs-rest
  for multi-class, as in the paper) on the same features;
* every mechanism registered in :mod:`dperm.estimators._mechanisms` (or those
  named), through :class:`dperm.estimators.DPLogisticRegression` — multi-class
  data one-vs-rest with ε and δ split evenly over the classes (basic
  composition, done by the estimator);
* the peers of :mod:`dperm.bench.peers` that are installed,

and records test accuracy, the excess empirical risk of the model's own
training objective (J(θ_priv) − min J, the reference minimized once per distinct
objective and cached), the theoretical bound of :mod:`dperm.theory` where one
applies, fit time and hyperparameters.  Results go through
:func:`dperm.bench.report.write_outputs`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .._validation import check_count, check_epsilon
from ..estimators._auto import AUTO
from ..exceptions import (
    ClippingWarning,
    DataFileNotFoundError,
    DpermError,
    PrivacyLeakWarning,
    UnknownNameError,
)
from . import peers as _peers
from .protocols import Split, get_protocol, honest_split, paper_grid, paper_split
from .report import RESULT_COLUMNS, write_outputs

__all__ = [
    "DEFAULT_ALGORITHMS",
    "DEFAULT_DATASETS",
    "DEFAULT_EPSILONS",
    "TUNING_SPACES",
    "list_algorithms",
    "run_bench",
]

DEFAULT_DATASETS = ("adult", "kddcup99", "mnist", "synthetic-l", "synthetic-h")
DEFAULT_EPSILONS = (0.1, 1.0)

#: the neighbouring relation each peer's ε is stated for, as its library documents it
PEER_NEIGHBOURING = {
    # diffprivlib's LogisticRegression: objective perturbation of Chaudhuri et al.
    # (2011), whose theorem is for datasets differing in one record (replace-one)
    "diffprivlib": "replace-one",
    # Opacus: Poisson sampling accounted by its RDP accountant (add/remove-one)
    "opacus": "add-remove",
}
#: the relation column of the non-private reference
NONPRIVATE_NEIGHBOURING = "n/a (non-private)"

#: algorithms registered under another name in dperm's theory module
_THEORY_NAMES = {"bolt-on-sc": "bolt-on"}


#: bench algorithms that are a registered mechanism with a documented setting:
#: the strongly convex bolt-on (Wu et al. 2017, Algorithm 2) is "bolt-on" with
#: Λ = the public objective-perturbation rule > 0.
_VIRTUAL = {"bolt-on-sc": "bolt-on"}

#: suffix of the "tuned privately" algorithms: ``"<mechanism>+tuned"`` runs
#: :class:`~dperm.model_selection.PrivateRandomSearch` over :data:`TUNING_SPACES`
#: with the *whole* ε and δ of the cell (the search's budget includes every run,
#: the validation scores and the selection)
TUNED = "+tuned"

#: public search spaces of the tuned algorithms (fixed before any data is seen)
TUNING_SPACES: dict[str, dict[str, list]] = {
    "objective": {
        "alpha": ["auto", *(float(a) for a in np.geomspace(1e-5, 1e-2, 7))],
    },
    "output": {
        "alpha": ["auto", *(float(a) for a in np.geomspace(1e-4, 1e-1, 7))],
    },
    "dp-sgd": {
        "epochs": [1, 2, 4, 8, 16],
        "learning_rate": [0.5, 1.0, 2.0, 4.0, 8.0],
        "batch_size": [64, 256, 1024],
    },
}
#: E[K] of the tuned algorithms' random search
TUNING_MEAN_RUNS = 10.0

#: the default algorithms of ``dperm bench``: the published comparison (Iyengar et
#: al. 2019) plus dperm's other DP-ERM classifiers and the tuned-privately variants;
#: every other registered mechanism runs when named in ``algorithms``
DEFAULT_ALGORITHMS = (
    "non-private",
    AUTO,
    "objective",
    "output",
    "amp",
    "amp-nt",
    "dp-gd",
    "dp-sgd",
    "dp-sgd-single",
    "bolt-on",
    "bolt-on-sc",
    "frank-wolfe",
    "objective" + TUNED,
    "output" + TUNED,
)


def list_algorithms() -> list[str]:
    """``non-private``, every registered mechanism (plus ``bolt-on-sc`` when
    ``bolt-on`` is registered), the tuned-privately variants
    (``"<mechanism>+tuned"`` for the mechanisms of :data:`TUNING_SPACES`) and the
    installed peers."""
    from ..estimators import available_mechanisms

    mechs = [AUTO, *available_mechanisms()]  # "auto": the estimators' defaults
    virtual = [v for v, base in _VIRTUAL.items() if base in mechs]
    tuned = [m + TUNED for m in TUNING_SPACES if m in mechs]
    return ["non-private", *mechs, *virtual, *tuned, *_peers.available_peers()]


# ----------------------------------------------------------------------------- helpers
def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


@contextlib.contextmanager
def _quiet():
    """Expected warnings of a bench fit (rows clipped to L in the paper grid)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        yield


def _accuracy(pred, y) -> float:
    return float(np.mean(np.asarray(pred) == np.asarray(y)))


def _maybe_sparse(split: Split, threshold: float = 0.3) -> bool:
    """Store mostly-zero dense features (one-hot Adult/KDD, MNIST pixels) as CSR.

    The same numbers in another layout: every dperm algorithm computes Xθ and
    Xᵀs for CSR exactly as for dense (tests check equality under a fixed seed),
    and it is several times faster.  Returns True when converted."""
    if sp.issparse(split.X_train):
        return False
    X = np.asarray(split.X_train)
    if np.count_nonzero(X) > threshold * X.size:
        return False
    split.X_train = sp.csr_matrix(X)
    split.X_test = sp.csr_matrix(np.asarray(split.X_test))
    return True


def _nonprivate(split: Split):
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    base = LogisticRegression(C=1.0, max_iter=2000)
    model = OneVsRestClassifier(base) if split.task == "multiclass" else base
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs ConvergenceWarning on raw features
        model.fit(split.X_train, split.y_train)
    seconds = time.perf_counter() - t0
    acc = _accuracy(model.predict(split.X_test), split.y_test)
    return acc, seconds


class _ExcessRisk:
    """J(θ_priv) − min J for fitted dperm estimators, the minimum cached per
    distinct objective (dataset, class, data_norm, Λ, regularizer, constraint)."""

    def __init__(self, tol: float = 1e-6, max_iter: int = 1000):
        self.tol = tol
        self.max_iter = max_iter
        self._cache: dict[tuple, float] = {}

    def __call__(self, key, model, X, y) -> float:
        from ..solvers import objective_value
        from ..utility import _solve_reference, objective_problems

        gaps = []
        for k, p in enumerate(objective_problems(model, X, y)):
            ck = (
                key,
                k,
                float(model.data_norm_),
                float(p["l2"]),
                repr(p["regularizer"]),
                repr(p["constraint"]),
            )
            if ck not in self._cache:  # the non-private reference, solved once per problem
                self._cache[ck] = _solve_reference(p, self.tol, self.max_iter).objective
            j = objective_value(
                p["loss"], p["theta"], p["X"], p["y"], l2=p["l2"], regularizer=p["regularizer"]
            )
            gaps.append(j - self._cache[ck])
        return float(np.mean(gaps))


def _theory(alg: str, model, n: int) -> float:
    """The theoretical excess-risk bound for one fitted estimator (NaN if none)."""
    from ..constraints import L1Ball
    from ..theory import theoretical_bound

    name = _THEORY_NAMES.get(alg, model.mechanism_ if alg == AUTO else alg)
    if getattr(model.loss_, "multiclass", False):
        return math.nan  # the bounds of dperm.theory are for one binary (GLM) problem
    k = 1 if np.ndim(model.coef_) == 1 else np.atleast_2d(model.coef_).shape[0]
    d = np.atleast_2d(model.coef_).shape[1] + int(model.fit_intercept)
    R = float(model.data_norm_)
    loss = model.loss_
    kw: dict[str, Any] = {
        "n": n,
        "d": d,
        "epsilon": float(model.epsilon_) / k,
        "delta": float(model.delta_) / k,
        "lipschitz": loss.lipschitz(R),
        "smoothness": loss.smoothness(R),
        "strong_convexity": float(model.l2_),
    }
    diag = model.diagnostics_ if isinstance(model.diagnostics_, dict) else model.diagnostics_[0]
    if alg == "frank-wolfe":
        c = model.constraint_ or L1Ball(20.0 / R)
        kw["radius"] = float(getattr(c, "radius", c.l2_radius))
        kw.pop("strong_convexity")
        kw["delta"] = float(diag.get("delta", kw["delta"]))
    elif model.constraint_ is not None:
        kw["radius"] = float(model.constraint_.l2_radius)
    else:
        kw["theta_norm"] = 20.0 / R
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(theoretical_bound(name, **kw).value)
    except (DpermError, TypeError, ValueError):
        return math.nan


def _public_classes(split: Split) -> np.ndarray:
    """The split's public label set (never read off the training labels when the
    dataset's schema gives one; otherwise read off them with a PrivacyLeakWarning)."""
    if split.classes is not None:
        return np.asarray(split.classes)
    warnings.warn(
        f"{split.name}: no public label set; classes read off the training labels",
        PrivacyLeakWarning,
        stacklevel=2,
    )
    return np.unique(split.y_train)


def _fw_direct(split: Split, params: dict, epsilon, delta, seed):
    """Frank-Wolfe with the paper's ℓ∞ clipping (entries clipped to L), called
    directly (the estimators only know ℓ2 row bounds).  Intercept: a constant
    column equal to L, inside the ℓ∞ bound."""
    from ..algorithms import frank_wolfe
    from ..losses import Logistic

    L = float(params["data_norm"])

    def design(X):
        X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
        return np.hstack([np.clip(X, -L, L), np.full((X.shape[0], 1), L)])

    classes = _public_classes(split)
    problems = (
        [np.where(split.y_train == classes[1], 1.0, -1.0)]
        if classes.size == 2
        else [np.where(split.y_train == c, 1.0, -1.0) for c in classes]
    )
    Xtr, Xte = design(split.X_train), design(split.X_test)
    k = len(problems)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    results = [
        frank_wolfe.fit(
            Logistic(),
            Xtr,
            yk,
            epsilon=epsilon / k,
            delta=delta / k,
            data_norm=L,
            data_norm_ord="linf",
            radius=float(params["radius"]),
            n_steps=int(params["n_steps"]),
            random_state=rng,
        )
        for yk in problems
    ]
    seconds = time.perf_counter() - t0
    scores = Xte @ np.vstack([r.theta for r in results]).T
    pred = classes[(scores[:, 0] > 0).astype(int)] if k == 1 else classes[np.argmax(scores, 1)]
    relation = " / ".join(
        dict.fromkeys(str(getattr(r.event, "neighbouring", "replace-one")) for r in results)
    )
    return _accuracy(pred, split.y_test), seconds, relation


def _clipped_rows(X, bound: float):
    """X with every row of norm above ``bound`` scaled down to it (the per-row public map
    of the paper protocol, done here so that the estimator, which refuses data whose
    rows mostly exceed its bound, receives rows inside it; the same numbers)."""
    from .._validation import row_norms

    norms = row_norms(X)
    scale = np.minimum(1.0, bound / np.maximum(norms, np.finfo(float).tiny))
    return sp.diags(scale) @ X if sp.issparse(X) else X * scale[:, None]


def _fit_dperm(alg: str, split: Split, params: dict, epsilon, delta, seed, risk, theory):
    """One private fit through DPLogisticRegression, with the split's public label
    set.  Returns (accuracy, excess_risk, bound, seconds, used_params, dropped_keys,
    neighbouring)."""
    from ..estimators import DPLogisticRegression
    from ..estimators._base import _MULTINOMIAL_MECHANISMS

    if alg == "frank-wolfe" and params.get("data_norm_ord") == "linf":
        acc, secs, relation = _fw_direct(split, params, epsilon, delta, seed)
        return acc, math.nan, math.nan, secs, dict(params), [], relation
    accepted = DPLogisticRegression().get_params()
    est_params = {}
    dropped = []
    for key, v in params.items():
        if key == "n_steps":  # Frank-Wolfe: steps = max_iter (the cap of the rule)
            est_params["max_iter"] = v
        elif key == "radius":
            if v is not None:
                est_params["constraint"] = "l1" if alg == "frank-wolfe" else "l2"
                est_params["constraint_radius"] = v
        elif key in accepted:
            est_params[key] = v
        else:
            dropped.append(key)
    est_params.setdefault("data_norm", split.data_norm)
    mechanism = _VIRTUAL.get(alg, alg).removesuffix(TUNED)
    if alg == "bolt-on-sc" and "alpha" not in est_params:
        from ..estimators._alpha_rules import objective_alpha_rule

        r_eff = math.hypot(float(est_params["data_norm"]), 0.5)  # intercept_scaling 0.5
        est_params["alpha"] = objective_alpha_rule(
            split.n_train, split.n_features + 1, epsilon, r_eff
        )
    est_params.setdefault("classes", list(_public_classes(split)))
    # the mechanisms that fit ONE multinomial (softmax) model on multi-class data (the
    # whole budget); the others run one-vs-rest with ε/k per class
    if split.task == "multiclass" and mechanism in _MULTINOMIAL_MECHANISMS:
        est_params.setdefault("multi_class", "multinomial")
    if mechanism == AUTO:  # the defaults as a user gets them: no multi_class, no Λ given
        est_params.pop("multi_class", None)
    if alg.endswith(TUNED):
        return _fit_tuned(alg, split, est_params, epsilon, delta, seed)
    model = DPLogisticRegression(
        mechanism=mechanism, epsilon=epsilon, delta=delta, random_state=seed, **est_params
    )
    X_train = split.X_train
    if not math.isfinite(split.data_norm):  # paper protocol: raw rows clipped to the grid's L
        X_train = _clipped_rows(X_train, float(est_params["data_norm"]))
    t0 = time.perf_counter()
    with _quiet():
        model.fit(X_train, split.y_train)
    seconds = time.perf_counter() - t0
    acc = _accuracy(model.predict(split.X_test), split.y_test)
    excess = math.nan
    if risk is not None and split.task != "multiclass":
        with _quiet():
            excess = risk(split.name, model, split.X_train, split.y_train)
    bound = _theory(alg, model, split.n_train) if theory else math.nan
    used = dict(est_params)
    used["alpha_"] = float(model.alpha_)
    if mechanism == AUTO:  # what the public rule chose (for the defaults table)
        used["mechanism_"] = str(model.mechanism_)
    return acc, excess, bound, seconds, used, dropped, model.neighbouring_


def _gaussian_run_event(run_epsilon: float, run_delta: float):
    """The event of a Gaussian output-perturbation run at (ε_run, δ_run): the analytic
    Gaussian mechanism (its RDP is exact), for the Papernot–Steinke accounting."""
    from ..accounting.events import Gaussian
    from ..accounting.gaussian import analytic_gaussian_noise_multiplier

    return Gaussian(noise_multiplier=analytic_gaussian_noise_multiplier(run_epsilon, run_delta))


_PURE_ROUTE: dict[str, Any] = {"eta": 0.0}
_LT_ROUTE: dict[str, Any] = {"repetitions": "geometric", "run_delta": "auto"}


def _tuning_route(base, split: Split, mechanism: str, epsilon: float, delta: float) -> dict:
    """The accounting of a tuned algorithm (a public choice: only ε, δ, d, k, R):

    * output perturbation: Gaussian runs described by their event, Papernot &
      Steinke (truncated negative binomial, η = 0);
    * objective perturbation: pure-ε runs (Papernot & Steinke) or Gaussian (ε, δ)
      runs (Liu & Talwar, geometric, ``run_delta="auto"``), whichever gives the run
      the smaller expected noise norm — D·ζ/ε_run for the Gamma-norm noise,
      √D·ζ·m(ε_run, δ_run/N) for the Gaussian (D coordinates, ζ = 2L);
    * the others (DP-SGD): Liu & Talwar."""
    from ..accounting.gaussian import analytic_gaussian_noise_multiplier
    from ..model_selection import PrivateRandomSearch

    if mechanism == "output":
        return {"eta": 0.0, "run_event": _gaussian_run_event}
    if mechanism != "objective":
        return dict(_LT_ROUTE)
    space = TUNING_SPACES[mechanism]
    pure = PrivateRandomSearch(base, space, epsilon=epsilon, delta=delta, **_PURE_ROUTE)
    lt = PrivateRandomSearch(
        base, space, epsilon=epsilon, delta=delta, mean_runs=TUNING_MEAN_RUNS, **_LT_ROUTE
    )
    eps_pure = pure._budget(split.n_train)[2]
    _, _, eps_lt, delta_lt, *_ = lt._budget(split.n_train)
    k = len(split.classes) if split.task == "multiclass" and split.classes else 1
    coords = (split.n_features + 1) * k
    vertices = 4 if k == 1 else k * k - 1
    gauss = math.sqrt(coords) * analytic_gaussian_noise_multiplier(eps_lt, delta_lt / vertices)
    return dict(_PURE_ROUTE) if coords / eps_pure <= gauss else dict(_LT_ROUTE)


def _fit_tuned(alg: str, split: Split, est_params: dict, epsilon, delta, seed):
    """``<mechanism>+tuned``: a private random search at the cell's whole (ε, δ),
    accounted as :func:`_tuning_route` chooses.  The selected model is scored on
    the test split once; nothing of the test split reaches the search."""
    from ..estimators import DPLogisticRegression
    from ..model_selection import PrivateRandomSearch

    mechanism = alg.removesuffix(TUNED)
    base = DPLogisticRegression(mechanism=mechanism, **est_params)
    route = _tuning_route(base, split, mechanism, epsilon, delta)
    search = PrivateRandomSearch(
        base,
        TUNING_SPACES[mechanism],
        epsilon=epsilon,
        delta=delta,
        mean_runs=TUNING_MEAN_RUNS,
        random_state=seed,
        **route,
    )
    t0 = time.perf_counter()
    with _quiet():
        search.fit(split.X_train, split.y_train)
    seconds = time.perf_counter() - t0
    if search.best_estimator_ is None:  # pragma: no cover - only the Poisson law gives K = 0
        raise DpermError("the private search drew no run")
    acc = _accuracy(search.predict(split.X_test), split.y_test)
    used = dict(est_params)
    used.update(
        search="PrivateRandomSearch",
        accounting=search.accounting_,
        mean_runs=TUNING_MEAN_RUNS,
        run_epsilon=float(search.run_epsilon_),
        search_epsilon=float(search.epsilon_),
        best_params=search.best_params_,
    )
    relation = str(getattr(search.dp_event_, "neighbouring", "replace-one"))
    return acc, math.nan, math.nan, seconds, used, [], relation


def _progress(enabled: bool, total: int):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("remaining"),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )


def _row(split: Split, alg, source, protocol, eps, delta, repeats, accs, risks, bound, secs, hp,
         note="", neighbouring=""):  # fmt: skip
    accs = np.asarray(accs, dtype=float)
    risks = np.asarray(risks, dtype=float)
    finite = risks[np.isfinite(risks)]
    return {
        "dataset": split.name,
        "algorithm": alg,
        "source": source,
        "protocol": protocol.name,
        "tuning": protocol.tuning if alg != "non-private" else "none (non-private reference)",
        "epsilon": float(eps),
        "delta": float(delta),
        "neighbouring": neighbouring,
        "n_train": split.n_train,
        "n_test": split.n_test,
        "n_features": split.n_features,
        "repeats": int(repeats),
        "accuracy_mean": float(np.mean(accs)) if accs.size else math.nan,
        "accuracy_sd": float(np.std(accs, ddof=1)) if accs.size > 1 else 0.0,
        "excess_risk_mean": float(np.mean(finite)) if finite.size else math.nan,
        "excess_risk_sd": float(np.std(finite, ddof=1)) if finite.size > 1 else math.nan,
        "theoretical_bound": float(bound),
        "fit_seconds_mean": float(np.mean(secs)) if len(secs) else math.nan,
        "hyperparameters": json.dumps(hp, sort_keys=True, default=str),
        "note": note,
    }


# ----------------------------------------------------------------------------- public
def run_bench(
    datasets: Iterable[str] | None = None,
    epsilons: Iterable[float] = DEFAULT_EPSILONS,
    algorithms: Iterable[str] | None = None,
    repeats: int = 3,
    protocol: str = "honest",
    data_home=None,
    out_dir="bench-out",
    progress: bool = True,
    *,
    random_state: int = 0,
    excess_risk: bool = True,
    theory: bool = True,
    command: str | None = None,
    on_row: Callable[[dict], None] | None = None,
) -> pd.DataFrame:
    """Run the benchmark and write its outputs.

    Parameters
    ----------
    datasets : iterable of str, optional
        Default :data:`DEFAULT_DATASETS`; datasets whose files are absent are
        skipped with a note (in the outputs' ``notes``).
    epsilons : iterable of float > 0, default (0.1, 1)
    algorithms : iterable of str, optional
        ``"non-private"``, registered mechanism names, peer names
        (``"diffprivlib"``, ``"opacus"``).  Default: all of
        :func:`list_algorithms` (the peers only when installed).
    repeats : int ≥ 1, default 3
        Independent private fits per (dataset, algorithm, ε[, grid point]).
    protocol : {"honest", "paper"}, default "honest"
        See :mod:`dperm.bench.protocols`.  ``paper`` selects on test accuracy
        (labelled "non-private tuning" in every output).
    data_home : path, optional
        Folder of the real data (default: the loaders' default).
    out_dir : path, default "bench-out"
        Where results.csv/.json/.md, comparison.md and the plots are written.
    progress : bool, default True
        Show a rich progress bar with elapsed time and an estimate of the time
        remaining.
    random_state : int, default 0
        Base seed; the seed of every fit is derived from it and the fit's
        coordinates (dataset, algorithm, ε, grid point, repeat).
    excess_risk, theory : bool, default True
        Compute the excess empirical risk / the theoretical bound.
    command : str, optional
        The command line to record in the outputs.
    on_row : callable, optional
        Called with each result row (a dict with the columns of
        :data:`~dperm.bench.report.RESULT_COLUMNS`) as soon as it is finished, e.g. to
        save results as they come (``dperm bench`` does) or report progress.

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, algorithm, source, ε) with the columns of
        :data:`dperm.bench.report.RESULT_COLUMNS`.

    Raises
    ------
    UnknownNameError
        Unknown protocol, dataset or algorithm.
    InvalidPrivacyParameter
        Bad ε or repeats.
    """
    proto = get_protocol(protocol)
    datasets = list(DEFAULT_DATASETS if datasets is None else datasets)
    epsilons = sorted({check_epsilon(e) for e in epsilons})
    if not epsilons:
        raise UnknownNameError("epsilons must not be empty")
    repeats = check_count(repeats, "repeats")
    known = list_algorithms()
    all_peers = set(_peers.PEERS)
    if algorithms is None:
        algorithms = [a for a in DEFAULT_ALGORITHMS if a in known]
        algorithms += list(_peers.PEERS)
    algorithms = list(dict.fromkeys(algorithms))
    notes: list[str] = []
    status = _peers.peer_status()
    for a in algorithms:
        if a in all_peers and a not in known:
            notes.append(f"peer {a!r} skipped: {status.get(a, 'not installed')}")
        elif a not in known:
            raise UnknownNameError(f"unknown algorithm {a!r}; available: {known}")
    algorithms = [a for a in algorithms if a in known]
    from ..datasets import available_datasets

    for name in datasets:
        if name not in available_datasets():
            raise UnknownNameError(f"unknown dataset {name!r}; available: {available_datasets()}")

    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t_start = time.perf_counter()
    splits: list[Split] = []
    for name in datasets:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)
                splits.append(
                    honest_split(name, data_home)
                    if proto.name == "honest"
                    else paper_split(name, data_home)
                )
        except DataFileNotFoundError as exc:
            notes.append(f"dataset {name!r} skipped: {exc}")
            continue
        if excess_risk and splits[-1].task == "multiclass":
            notes.append(
                f"{name}: excess empirical risk not computed (multi-class: a non-private "
                "reference solve per model and objective)"
            )
        if _maybe_sparse(splits[-1]):
            notes.append(f"{name}: features stored as CSR (mostly zeros; same values)")

    private = [a for a in algorithms if a != "non-private" and a not in all_peers]
    peer_algs = [a for a in algorithms if a in all_peers]
    grids = {a: (paper_grid(a) if proto.name == "paper" else [{}]) for a in private + peer_algs}
    for a in peer_algs:
        grids[a] = [{}]
    per_ds = ("non-private" in algorithms) + sum(
        len(grids[a]) * len(epsilons) * repeats for a in private + peer_algs
    )
    total = per_ds * len(splits)

    rows: list[dict] = []
    risk = _ExcessRisk() if excess_risk else None
    with _progress(progress, total) as bar:
        task = bar.add_task("dperm bench", total=total)
        for di, split in enumerate(splits):
            delta = split.delta
            if "non-private" in algorithms:
                bar.update(task, description=f"{split.name}: non-private")
                acc, secs = _nonprivate(split)
                for eps in epsilons:
                    rows.append(
                        _row(split, "non-private", "scikit-learn", proto, eps, delta, 1, [acc],
                             [], math.nan, [secs], {"C": 1.0, "model": "LogisticRegression"},
                             neighbouring=NONPRIVATE_NEIGHBOURING)
                    )  # fmt: skip
                    if on_row is not None:
                        on_row(rows[-1])
                bar.advance(task)
            for ai, alg in enumerate(private + peer_algs):
                for ei, eps in enumerate(epsilons):
                    bar.update(task, description=f"{split.name}: {alg} ε={eps:g}")
                    best = None
                    for gi, params in enumerate(grids[alg]):
                        accs, risks, secs, bounds = [], [], [], []
                        relations: list[str] = []
                        hp: dict = dict(params)
                        notes_fit: list[str] = []
                        for r in range(repeats):
                            seed = _seed(random_state, di, ai, ei, gi, r)
                            try:
                                if alg in all_peers:
                                    res = _peers.fit_peer(
                                        alg, split.X_train, split.y_train, split.X_test,
                                        epsilon=eps, delta=delta,
                                        data_norm=split.data_norm if math.isfinite(
                                            split.data_norm) else 1.0,
                                        random_state=seed, classes=split.classes,
                                    )  # fmt: skip
                                    accs.append(_accuracy(res.predictions, split.y_test))
                                    relations.append(PEER_NEIGHBOURING.get(alg, "unknown"))
                                    secs.append(res.seconds)
                                    hp = dict(res.params)
                                    if res.note:
                                        notes_fit.append(res.note)
                                else:
                                    acc, ex, bd, sec, hp, dropped, rel = _fit_dperm(
                                        alg, split, params, eps, delta, seed, risk, theory
                                    )
                                    relations.append(rel)
                                    accs.append(acc)
                                    risks.append(ex)
                                    bounds.append(bd)
                                    secs.append(sec)
                                    if dropped:
                                        notes_fit.append(f"grid keys not accepted: {dropped}")
                            except (DpermError, ImportError, RuntimeError, ValueError) as exc:
                                notes_fit.append(f"fit failed: {type(exc).__name__}: {exc}"[:300])
                            bar.advance(task)
                        relation = " / ".join(dict.fromkeys(relations))
                        score = float(np.mean(accs)) if accs else -math.inf
                        cand = (score, accs, risks, bounds, secs, hp, notes_fit, relation)
                        if best is None or cand[0] > best[0]:
                            best = cand
                    _, accs, risks, bounds, secs, hp, notes_fit, relation = best
                    note = "; ".join(dict.fromkeys(notes_fit))
                    if proto.name == "paper" and len(grids[alg]) > 1:
                        note = (note + "; " if note else "") + (
                            f"best of {len(grids[alg])} grid points on TEST accuracy "
                            "(non-private tuning)"
                        )
                    bound = (
                        float(np.nanmean(bounds))
                        if bounds and np.isfinite(bounds).any()
                        else (math.nan)
                    )
                    rows.append(
                        _row(split, alg, "dperm" if alg not in all_peers else alg, proto, eps,
                             delta, len(accs), accs, risks, bound, secs, hp, note,
                             neighbouring=relation)
                    )  # fmt: skip
                    if on_row is not None:
                        on_row(rows[-1])

    df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    meta = {
        "protocol": proto.name,
        "tuning": proto.tuning,
        "description": proto.description,
        "command": command or "dperm.bench.run_bench(...)",
        "started": started,
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "datasets": [s.name for s in splits],
        "epsilons": epsilons,
        "algorithms": algorithms,
        "repeats": repeats,
        "notes": notes,
    }
    write_outputs(df, Path(out_dir), meta)
    df.attrs["meta"] = meta
    return df


def _as_list(value: str | Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)
