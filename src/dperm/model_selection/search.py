"""Private random search: the best of a random number K of private runs.

One *run* (the base mechanism Q) samples a configuration from public
distributions, fits a clone of a dperm estimator on the training part of a
random split with the per-run budget, and scores it on the validation part
with the Laplace mechanism.  Only the best run (configuration, model, noisy
score) is released; K is drawn from a data-independent law
(:mod:`dperm.model_selection.repetitions`) and is *not* released.

Privacy of one run (replace-one, n public).  The split is a uniformly random
permutation drawn before the search, independent of the data, and shared by
all runs.  Conditioned on it, neighbouring datasets differ in one row that is
either in the training part — then the model changes by at most the
estimator's guarantee and the score is post-processing of the model and the
(unchanged) validation rows — or in the validation part — then the model's law
is unchanged and the validation accuracy (a mean of n_val values in [0, 1])
moves by at most 1/n_val, hidden by Laplace noise of scale 1/(n_val ε_s).  So
Q's RDP at every order is at most max(ρ_fit(α), ρ_Laplace(α)) (parallel
composition; derived here, the conditional argument is the standard one for
disjoint parts), and so is the mixture over splits (joint quasi-convexity of
Rényi divergence, van Erven & Harremoës 2014, Theorem 13).  The same argument
gives (ε_run, δ_run)-DP for Q when ε_s ≤ ε_run.

Two accountings:

* ``"papernot-steinke"``: ρ_fit is the sharp RDP of an ε_run-DP mechanism
  (:func:`dperm.accounting.rdp.rdp_pure_epsilon`) for pure runs (δ_run = 0),
  or the RDP of a user-declared, data-independent ``run_event(ε_run, δ_run)``
  (e.g. the Gaussian event of output perturbation); the selection's RDP is
  Papernot & Steinke (2022) Theorem 2 (truncated negative binomial, geometric
  included) or Theorem 6 (Poisson), converted to (ε, δ).  Every fitted run's
  event is checked to be within that curve (fail closed: the check depends on
  the configuration only, which is public randomness).
* ``"liu-talwar"`` (runs with δ_run > 0, geometric law only): Liu & Talwar
  (2019) Theorem 3.4, random stopping capped at T runs.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from numbers import Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils import _safe_indexing

from .._parameters import (
    RANDOM_STATE,
    HasMethods,
    Names,
    Number,
    positive,
    store_params,
    validate_params,
)
from .._rng import check_random_state
from .._validation import check_delta, check_epsilon, check_probability
from ..accounting import events as _events
from ..accounting.active import accounted_fit, charge, default_delta, suspended, user_hook
from ..accounting.events import DpEvent, EpsilonDelta, Gaussian, NonPrivate
from ..accounting.gaussian import gaussian_epsilon
from ..accounting.rdp import DEFAULT_ORDERS, compute_rdp
from ..accounting.registry import epsilon_spent
from ..exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    UnknownNameError,
    UnsupportedEventError,
    UnsupportedOperationError,
)
from .analysis import (
    REPETITIONS,
    calibrate_run_epsilon,
    repetition_law,
    run_rdp,
    search_epsilon,
)
from .repetitions import liu_talwar_guarantee

__all__ = ["DEFAULT_ALPHA_GRID", "PrivateRandomSearch"]

_REPLACE_ONE = getattr(_events, "REPLACE_ONE", "replace-one")
_RESERVED = ("epsilon", "delta", "random_state")
#: ε_s / ε_run of the Laplace score when the runs are described by ``run_event``
#: (Gaussian-type runs have a much smaller RDP than an ε_run-DP mechanism at low
#: orders; with ε_s = ε_run the score's curve would dominate; a public constant)
_EVENT_SCORE_RATIO = 0.25


def _with_relation(cls, relation: str, **kwargs) -> DpEvent:
    """A leaf event with ``neighbouring`` set when the event class has that field."""
    names = {f.name for f in dataclasses.fields(cls)}
    if "neighbouring" in names:
        kwargs["neighbouring"] = relation
    return cls(**kwargs)


def _certified_epsilon(event: DpEvent, delta: float) -> float:
    """ε of one run's event at δ_run (Gaussian: exact; else basic, then PLD — the
    accountant of the replace-one Poisson events of DP-SGD — then RDP)."""
    if isinstance(event, Gaussian):
        return gaussian_epsilon(event.noise_multiplier, delta)
    for name in ("basic", "pld", "rdp"):
        try:
            return epsilon_spent(event, delta, name)
        except UnsupportedEventError:
            continue
    raise UnsupportedEventError(f"no accountant can account the run's event {event!r}")


def _sample_config(space: dict, rng: np.random.Generator) -> dict:
    out = {}
    for key in sorted(space):
        v = space[key]
        out[key] = v.rvs(random_state=rng) if hasattr(v, "rvs") else v[int(rng.integers(len(v)))]
    return out


class PrivateRandomSearch(BaseEstimator):
    """Differentially private random search over public hyperparameters.

    Runs K private fits (K random, not released), each on a random
    configuration, scores each on a private validation split with the Laplace
    mechanism, and keeps the best.  ``dp_event_`` covers the whole search
    (every run, the split, the scores and the selection).

    Parameters
    ----------
    estimator : dperm estimator
        Must take ``epsilon``, ``delta`` and ``random_state`` and set
        ``dp_event_`` when fitted (every dperm estimator does).
    param_distributions : dict
        Public search space: name → non-empty list (uniform choice) or a
        scipy.stats distribution (``rvs``).  Must not set ``epsilon``,
        ``delta`` or ``random_state``.
    epsilon : float > 0, default 1.0
        Total ε of the search (runs, scores and selection included).
    delta : float in (0, 1) or None, default None
        Total δ; None → min(1/n², 10⁻⁵) (n = rows passed to :meth:`fit`).
    repetitions : {"truncated_negative_binomial", "geometric", "poisson"}
        Law of K (see :mod:`dperm.model_selection.repetitions`).
    mean_runs : float, default 10
        E[K].
    eta : float > −1, default 0.0
        Shape η of the truncated negative binomial (0: logarithmic law).
    run_delta : float in [0, 1) or None, default None
        None or 0: pure ε-DP runs, accounted by Papernot & Steinke (RDP)
        (with ``run_event``: the δ given to each run, default ``delta``).
        "auto" or a positive value: (ε, δ)-DP runs accounted by Liu & Talwar
        (needs ``repetitions="geometric"``); "auto" chooses
        δ_run = ((δ/2)/T)²/2 so that δ₂ = δ/2 and √(2δ_run)T = δ/2.
    validation_fraction : float in (0, 1), default 0.2
        Share of rows held out for scoring (n_val = ⌊fraction·n⌋, public).
    scoring : None or callable, default None
        None: accuracy.  A callable ``scoring(y_true, y_pred)`` returning
        per-row values (clipped to [0, 1] here; higher is better).
    score_epsilon : float > 0 or None, default None
        ε of the Laplace score; None → ε_run (free by parallel composition in
        the pure case; see the module docstring), ε_run/4 with ``run_event``.
    run_event : callable or None, default None
        ``run_event(run_epsilon, run_delta) -> DpEvent``: a data-independent
        description of what *every* run's fit spends (e.g. ``lambda e, d:
        Gaussian(analytic_gaussian_noise_multiplier(e, d))`` for Gaussian output
        perturbation).  Its RDP replaces the pure-ε curve (Papernot–Steinke
        accounting); each fitted run's event is checked against it.
        ``run_delta`` (default: ``delta``) is then the δ given to each run.
    random_state : None, int, SeedSequence or Generator

    Attributes
    ----------
    best_estimator_ : estimator or None
        The best run's fitted estimator; its ``dp_event_``, ``epsilon_``,
        ``delta_`` are replaced by the search's (the run's own event is kept in
        ``run_dp_event_``).  None if K = 0 (Poisson law only).
    best_params_ : dict
        The selected configuration (released: part of the best run's output).
    best_score_ : float
        Its noisy validation score (released).
    dp_event_ : EpsilonDelta
        The cost of the whole search, as computed by this class's analysis
        (not a mechanism an accountant could re-derive), replace-one.
    epsilon_, delta_ : float
    run_epsilon_, run_delta_, score_epsilon_ : float
    accounting_ : {"papernot-steinke", "liu-talwar"}
    search_diagnostics_ : dict
        K, every configuration tried and every noisy score.  NOT covered by the
        privacy guarantee (K in particular must stay secret): for the data
        owner only, never to be released.  It is therefore not part of the
        object's pickled state (``pickle``, ``joblib``, ``copy.deepcopy`` drop it:
        a pickled search would otherwise carry K wherever the file goes; issue
        #32), and :func:`dperm.save` saves only ``best_estimator_``.

    Raises
    ------
    UnsupportedEventError
        The estimator has no ``epsilon``/``delta``/``random_state`` parameter,
        a run's event exceeds the per-run curve, or its neighbouring relation
        is not replace-one.
    InvalidPrivacyParameter, UnknownNameError
        Bad budget, law, space or fraction.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm import DPLogisticRegression
    >>> from dperm.model_selection import PrivateRandomSearch
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 3)) / 3
    >>> y = (X[:, 0] > 0).astype(int)
    >>> base = DPLogisticRegression(data_norm=2.0, classes=[0, 1])
    >>> search = PrivateRandomSearch(base, {"alpha": [1e-3, 1e-2]}, epsilon=1.0,
    ...                              delta=1e-6, random_state=0).fit(X, y)
    >>> search.epsilon_ <= 1.0, search.best_params_["alpha"] in (1e-3, 1e-2)
    (True, True)
    """

    #: what each parameter accepts, checked first in ``fit`` (:mod:`dperm._parameters`)
    _parameter_constraints: ClassVar[dict] = {
        "estimator": [HasMethods(["fit", "get_params", "set_params"])],
        "param_distributions": [dict],
        "epsilon": [positive()],
        "delta": [None, Number(Real, 0, 1)],
        "repetitions": [Names(REPETITIONS)],
        "mean_runs": [positive()],
        "eta": [Number(Real, -1, None)],
        "run_delta": [None, Names(("auto",)), Number(Real, 0, 1, closed="left")],
        "validation_fraction": [Number(Real, 0, 1)],
        "scoring": [None, callable],
        "score_epsilon": [None, positive()],
        "run_event": [None, callable],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        estimator,
        param_distributions,
        *,
        epsilon=1.0,
        delta=None,
        repetitions="truncated_negative_binomial",
        mean_runs=10.0,
        eta=0.0,
        run_delta=None,
        validation_fraction=0.2,
        scoring=None,
        score_epsilon=None,
        run_event=None,
        random_state=None,
    ):
        store_params(self, locals())

    # ------------------------------------------------------------ validation
    def _check_estimator(self) -> None:
        get = getattr(self.estimator, "get_params", None)
        params = get() if callable(get) else {}
        missing = [p for p in _RESERVED if p not in params]
        if missing:
            raise UnsupportedEventError(
                f"estimator {type(self.estimator).__name__} cannot be accounted: it lacks the "
                f"parameters {missing} (a dperm estimator is needed)"
            )

    def _check_space(self) -> dict:
        space = self.param_distributions
        if not isinstance(space, dict) or not space:
            raise InvalidPrivacyParameter(
                f"param_distributions must be a non-empty dict, got {space!r}"
            )
        params = self.estimator.get_params()
        for key, v in space.items():
            if key in _RESERVED:
                raise InvalidPrivacyParameter(
                    f"param_distributions must not set {key!r}: the search sets it"
                )
            if key not in params:
                raise InvalidPrivacyParameter(
                    f"param_distributions has {key!r}, not a parameter of "
                    f"{type(self.estimator).__name__}"
                )
            if not hasattr(v, "rvs") and (isinstance(v, str | bytes) or not len(v)):
                raise InvalidPrivacyParameter(
                    f"param_distributions[{key!r}] must be a non-empty list or a "
                    f"distribution with rvs, got {v!r}"
                )
        return space

    def _budget(self, n: int):
        """(route, law, ε_run, δ_run, ε_s, ε_total, δ_total, cap)."""
        epsilon = check_epsilon(self.epsilon)
        # None: min(1/n², 1e-5), or a share of an active budget's remaining δ (default_delta)
        delta = default_delta(int(n)) if self.delta is None else check_delta(self.delta)
        if delta == 0.0:
            raise InvalidPrivacyParameter(
                "delta must be > 0: the search's guarantee is (epsilon, delta) (got 0)"
            )
        if self.repetitions not in REPETITIONS:
            raise UnknownNameError(
                f"unknown repetitions {self.repetitions!r}; choose one of {list(REPETITIONS)}"
            )
        law = repetition_law(self.repetitions, self.mean_runs, self.eta)
        rd = self.run_delta
        pure = rd is None or (isinstance(rd, numbers.Real) and not isinstance(rd, bool) and rd == 0)
        if self.run_event is not None or pure:
            if self.run_event is not None and not callable(self.run_event):
                raise InvalidPrivacyParameter(
                    f"run_event must be None or callable, got {self.run_event!r}"
                )
            d_run = 0.0 if pure else check_delta(rd, "run_delta")
            if self.run_event is not None and rd is None:
                d_run = delta  # only parametrizes the runs' calibration; RDP decides
            kw = dict(
                repetitions=self.repetitions,
                mean_runs=self.mean_runs,
                eta=self.eta,
                run_event=self.run_event,
                run_delta=d_run,
                score_ratio=1.0 if self.run_event is None else _EVENT_SCORE_RATIO,
            )
            if self.score_epsilon is not None:
                kw["score_epsilon"] = check_epsilon(self.score_epsilon, "score_epsilon")
            eps_run = calibrate_run_epsilon(epsilon, delta, **kw)
            s_eps = kw.get("score_epsilon", eps_run * kw["score_ratio"])
            total = search_epsilon(eps_run, delta, **kw)
            return "papernot-steinke", law, eps_run, d_run, s_eps, total, delta, None
        if self.repetitions != "geometric":
            raise InvalidPrivacyParameter(
                f"run_delta={rd!r} > 0 needs repetitions='geometric' (Liu & Talwar), got "
                f"repetitions={self.repetitions!r}; use run_delta=0 for the RDP accounting"
            )
        gamma = law.gamma
        cap = max(1, math.ceil(math.log(2.0 / delta) / gamma))
        if isinstance(rd, str):
            if rd != "auto":
                raise InvalidPrivacyParameter(f"run_delta must be a number or 'auto', got {rd!r}")
            d_run = 0.5 * (0.5 * delta / cap) ** 2
        else:
            d_run = check_delta(rd, "run_delta")
        root = math.sqrt(2.0 * d_run)
        eps_run = (epsilon - 3.0 * root) / 3.0
        if eps_run <= 0:
            raise InvalidPrivacyParameter(
                f"run_delta={d_run!r} leaves no epsilon: 3·sqrt(2·run_delta) ≥ epsilon={epsilon!r}"
            )
        s_eps = eps_run
        if self.score_epsilon is not None:
            s_eps = min(eps_run, check_epsilon(self.score_epsilon, "score_epsilon"))
        tot_eps, tot_delta, cap = liu_talwar_guarantee(eps_run, d_run, gamma, 0.5 * delta)
        if tot_delta > delta * (1 + 1e-9):
            raise InvalidPrivacyParameter(
                f"run_delta={d_run!r} gives a search delta {tot_delta:.3g} above delta={delta!r}"
            )
        return "liu-talwar", law, eps_run, d_run, s_eps, tot_eps, tot_delta, cap

    def _check_run_event(self, event, route, eps_run, d_run, s_eps, orders) -> None:
        if not isinstance(event, DpEvent) or isinstance(event, NonPrivate):
            raise UnsupportedEventError(f"the run's event cannot be accounted: {event!r}")
        relation = getattr(event, "neighbouring", _REPLACE_ONE)
        if relation != _REPLACE_ONE:
            raise UnsupportedEventError(
                f"the search's analysis is for replace-one runs, got a {relation!r} event"
            )
        if route == "papernot-steinke":
            got = compute_rdp(event, orders)  # UnsupportedEventError if it has no RDP
            bound = run_rdp(eps_run, d_run, self.run_event, orders)
            if np.any(got > bound * (1.0 + 1e-9) + 1e-12):
                raise UnsupportedEventError(
                    f"the run's event {event!r} exceeds the RDP curve assumed by the search "
                    f"(epsilon_run={eps_run:.6g}, run_event={self.run_event!r}); use pure-epsilon "
                    "runs (run_delta=0) or describe the runs with run_event"
                )
        elif _certified_epsilon(event, d_run) > eps_run * (1.0 + 1e-6):
            raise UnsupportedEventError(
                f"the run's event {event!r} is not ({eps_run:.6g}, {d_run:.3g})-DP"
            )

    # ------------------------------------------------------------ fit
    @accounted_fit  # reserve the whole search before the data is read, then commit
    def fit(self, X, y):
        """Run the private search.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        validate_params(self)  # every parameter, before the data and any reservation
        self._check_estimator()
        space = self._check_space()
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        if y is None or len(y) != n:
            raise InvalidDataError(f"X and y must have the same number of rows, got {n} and y")
        frac = check_probability(self.validation_fraction, "validation_fraction")
        n_val = math.floor(frac * n)
        if not 1 <= n_val <= n - 2:
            raise InvalidPrivacyParameter(
                f"validation_fraction={frac!r} leaves {n_val} validation rows of {n}: "
                "need 1 ≤ n_val ≤ n − 2"
            )
        if self.scoring is not None and not callable(self.scoring):
            raise InvalidPrivacyParameter(f"scoring must be None or callable, got {self.scoring!r}")
        route, law, eps_run, d_run, s_eps, tot_eps, tot_delta, cap = self._budget(n)

        # an active dperm.budget is charged ONCE, with the whole search's (ε, δ), before any
        # data is read; the inner runs are covered by it and run with the budget suspended
        # (charging each would count the search twice and record K, which stays secret)
        search_event = _with_relation(EpsilonDelta, _REPLACE_ONE, epsilon=tot_eps, delta=tot_delta)
        covering = charge(search_event, type(self).__name__)
        rng = check_random_state(self.random_state)
        perm = rng.permutation(n)  # [PRS-1] data-independent split
        val_idx, tr_idx = np.sort(perm[:n_val]), np.sort(perm[n_val:])
        X_tr, y_tr = _safe_indexing(X, tr_idx), _safe_indexing(y, tr_idx)
        X_val, y_val = _safe_indexing(X, val_idx), np.asarray(_safe_indexing(y, val_idx))
        k_runs = law.sample(rng)  # [PRS-2] K, never released
        if cap is not None:
            k_runs = min(k_runs, cap)  # Liu–Talwar stopping cap T
        orders = np.asarray(DEFAULT_ORDERS)

        configs, scores = [], []
        best = None
        for _ in range(k_runs):  # one private run per iteration (not a loop over rows)
            config = _sample_config(space, rng)  # [PRS-3] public randomness
            est = clone(self.estimator).set_params(
                **config, epsilon=eps_run, delta=d_run, random_state=rng.spawn(1)[0]
            )
            with suspended(covering):  # covered by the search's own charge above
                est.fit(X_tr, y_tr)  # [PRS-4] (ε_run, δ_run)-DP on the training part
            event = getattr(est, "dp_event_", None)
            self._check_run_event(event, route, eps_run, d_run, s_eps, orders)
            pred = est.predict(X_val)
            if self.scoring is None:
                per_row = (np.asarray(pred) == y_val).astype(np.float64)
            else:
                # the user's scorer sees the run's predictions: user code (user_hook)
                per_row = np.asarray(user_hook(self.scoring)(y_val, pred), dtype=np.float64)
            per_row = np.clip(per_row, 0.0, 1.0)  # public clip: sensitivity 1/n_val
            noisy = float(per_row.mean() + rng.laplace(scale=1.0 / (n_val * s_eps)))  # [PRS-5]
            configs.append(config)
            scores.append(noisy)
            if best is None or noisy > best[0]:
                best = (noisy, config, est)  # [PRS-6] only the best is released

        self.accounting_ = route
        self.run_epsilon_, self.run_delta_, self.score_epsilon_ = eps_run, d_run, s_eps
        self.dp_event_ = search_event
        self.epsilon_, self.delta_ = tot_eps, tot_delta
        self.validation_size_ = n_val
        self.search_diagnostics_ = {
            "n_runs": k_runs,
            "configs": configs,
            "noisy_scores": scores,
            "note": "not covered by the privacy guarantee: do not release (K must stay secret)",
        }
        if best is None:
            self.best_estimator_, self.best_params_, self.best_score_ = None, None, None
            return self
        self.best_score_, self.best_params_, est = best
        est.run_dp_event_ = est.dp_event_
        est.dp_event_, est.epsilon_, est.delta_ = search_event, tot_eps, tot_delta
        self.best_estimator_ = est
        return self

    def __getstate__(self):
        """The pickled state: everything but ``search_diagnostics_``, which reveals K
        (the number of runs drawn, which the analysis needs secret)."""
        state = dict(super().__getstate__())  # a copy: the object keeps its diagnostics
        state.pop("search_diagnostics_", None)
        return state

    # ------------------------------------------------------------ delegation
    def _best(self):
        if getattr(self, "best_estimator_", None) is None:
            raise UnsupportedOperationError(
                "no model: the search is not fitted or drew K = 0 runs (Poisson law)"
            )
        return self.best_estimator_

    def predict(self, X):
        """Predictions of the selected model."""
        return self._best().predict(X)

    def decision_function(self, X):
        """Decision function of the selected model."""
        return self._best().decision_function(X)

    def predict_proba(self, X):
        """Class probabilities of the selected model."""
        return self._best().predict_proba(X)

    def score(self, X, y):
        """The selected model's ``score`` (e.g. accuracy) on (X, y)."""
        return self._best().score(X, y)


#: public Λ grid of :func:`tuning_search` (the registered "auto" rule and 7
#: log-spaced values around it)
DEFAULT_ALPHA_GRID: tuple = ("auto", *(float(a) for a in np.geomspace(1e-5, 1e-2, 7)))
