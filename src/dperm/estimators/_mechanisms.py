"""Registry of the private training mechanisms the estimators dispatch to.

An *adapter* connects an estimator to one algorithm module::

    adapter(estimator, loss, X, y, epsilon, delta, rng) -> dperm.algorithms.base.Result

It is called once per binary problem (once for a binary classifier or a
regressor, once per class for one-vs-rest), with

* ``loss`` — the estimator's :class:`~dperm.losses.GLMLoss`;
* ``X`` — the validated design, rows already clipped to ``estimator.data_norm``
  and, when ``fit_intercept``, with the constant column ``intercept_scaling``
  appended; every row satisfies ‖x‖ ≤ ``estimator.data_norm_``;
* ``y`` — labels in {−1, +1} (classification) or targets (regression);
* ``epsilon``, ``delta`` — the budget of *this* call (δ is a float ≥ 0, already
  resolved from ``delta=None``; the estimator splits ε, δ over the calls);
* ``rng`` — the estimator's :class:`numpy.random.Generator`.

Fitted attributes set before the adapter is called and meant for it:
``data_norm_`` (effective row bound of ``X``), ``l2_`` (Λ, coefficient of
(Λ/2)‖θ‖² in the mean objective), ``regularizer_`` (a
:class:`~dperm.regularizers.Regularizer` or None), ``constraint_`` (a
:class:`~dperm.constraints.Constraint` or None, in the augmented dimension).
Hyperparameters of the gradient-perturbation mechanisms are read from the
estimator's own parameters (``epochs``, ``batch_size``, ``learning_rate``,
``clipping_norm``, ``noise_multiplier``, ``accountant``, …; None = the
mechanism's default).

The adapter must return a :class:`~dperm.algorithms.base.Result` whose
``event`` is what the call spent; it must never fall back to a non-private
fit.  Registering a name twice raises unless ``overwrite=True``.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any

from ..algorithms import dp_sgd  # the classifiers' default: imported now, not in a fit
from ..constraints import L1Ball
from ..exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError
from ..losses import Squared
from ..losses.base import MARGIN_BOUND, OUTPUT_MARGIN_BOUND, prior_margin
from ..losses.softmax import Softmax
from ._alpha_rules import objective_alpha_rule, output_alpha_rule
from ._auto import adaptive_settings, prior_bound, scaling_settings
from ._output_rows import output_rows, scale_intercept

__all__ = [
    "MARGIN_BOUND",
    "auto_alpha",
    "available_mechanisms",
    "get_mechanism",
    "register_mechanism",
]

Adapter = Callable[..., Any]
AlphaRule = Callable[[int, int, float, float], float]

_REGISTRY: dict[str, Adapter] = {}
_ALPHA_RULES: dict[str, AlphaRule] = {}


def _no_ridge(n: int, d: int, epsilon: float, data_norm: float) -> float:
    """Λ = 0: the default of the mechanisms that need no ℓ2 term (clipping, a
    constraint set or the mechanism itself bounds the sensitivity)."""
    return 0.0


def register_mechanism(
    name: str,
    adapter: Adapter,
    *,
    default_alpha: AlphaRule | None = None,
    overwrite: bool = False,
) -> None:
    """Register ``adapter`` under ``name`` (see the module docstring).

    Parameters
    ----------
    name : str
    adapter : callable
        ``adapter(estimator, loss, X, y, epsilon, delta, rng) -> Result``.
    default_alpha : callable, optional
        ``rule(n, d, epsilon, data_norm) -> float``: the Λ used when the
        estimator's ``alpha="auto"``; default :func:`objective_alpha_rule`.
    overwrite : bool, default False

    Raises
    ------
    UnknownNameError
        If ``name`` is taken and ``overwrite`` is False, or is not a non-empty str.
    """
    if not isinstance(name, str) or not name:
        raise UnknownNameError(f"mechanism name must be a non-empty string, got {name!r}")
    if not callable(adapter):
        raise UnknownNameError(f"adapter for mechanism {name!r} must be callable")
    if name in _REGISTRY and not overwrite:
        raise UnknownNameError(
            f"mechanism {name!r} is already registered; pass overwrite=True to replace it"
        )
    _REGISTRY[name] = adapter
    if default_alpha is not None:
        _ALPHA_RULES[name] = default_alpha
    else:
        _ALPHA_RULES.pop(name, None)


def available_mechanisms() -> list[str]:
    """Sorted names of the registered mechanisms."""
    return sorted(_REGISTRY)


def get_mechanism(name: str) -> Adapter:
    """The adapter registered under ``name``.

    Raises
    ------
    UnknownNameError
        Listing the registered mechanisms.
    """
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown mechanism {name!r}; registered mechanisms: {available_mechanisms()}"
        ) from None


# ----------------------------------------------------------------------------- default Λ


def auto_alpha(
    mechanism: str, n: int, d: int, epsilon: float, data_norm: float, *, relaxed: bool = False
) -> float:
    """The Λ that ``alpha="auto"`` means for ``mechanism`` (its registered rule,
    else :func:`objective_alpha_rule`).  ``relaxed`` (the regressors): the perturbation
    rules use the prior margin that grows with ε (:func:`dperm.losses.prior_margin`),
    so that Λ falls like 1/(nε) and the fit tends to the unregularized least squares."""
    rule = _ALPHA_RULES.get(mechanism, objective_alpha_rule)
    if relaxed and rule in _MARGINS:
        return float(rule(n, d, epsilon, data_norm, margin=prior_margin(_MARGINS[rule], epsilon)))
    return float(rule(n, d, epsilon, data_norm))


#: the perturbation Λ rules and their prior margin B₀ (relaxed for the regressors)
_MARGINS = {objective_alpha_rule: MARGIN_BOUND, output_alpha_rule: OUTPUT_MARGIN_BOUND}


# ----------------------------------------------------------------------------- built-ins
def _multinomial_alpha(estimator, loss, X, epsilon, rule, data_norm) -> float:
    """Λ of a multinomial (softmax) fit: with ``alpha="auto"`` the rule evaluated for
    k classes (the estimator resolved it for one binary problem), recorded in
    ``alpha_``/``l2_`` so that they describe the objective actually used; ``data_norm``
    is the rows' public bound (``data_norm_``, or the output default's r)."""

    if not isinstance(loss, Softmax):  # e.g. sample weights around the softmax loss
        raise InvalidDataError(
            f"multi_class='multinomial' with mechanism={estimator._mechanism()!r} does not "
            "support sample_weight"
        )
    if isinstance(estimator.alpha, str) and estimator.penalty == "l2":
        lam = rule(X.shape[0], X.shape[1], epsilon, data_norm, n_classes=loss.n_classes)
        estimator.alpha_ = estimator.l2_ = float(lam)
    return estimator.l2_


def _perturbation_fit(fit, estimator, loss, X, y, epsilon, delta, rng, rule=None, data_norm=None):
    """``fit`` of objective or output perturbation (they take the same settings)
    with the estimator's Λ, noise, constraint, regularizer and solver settings;
    ``rule`` gives Λ for k classes when the loss is the softmax loss; ``data_norm``
    (default ``data_norm_``) the public bound of the rows X."""
    data_norm = estimator.data_norm_ if data_norm is None else data_norm
    alpha = estimator.l2_
    if getattr(loss, "multiclass", False):
        alpha = _multinomial_alpha(estimator, loss, X, epsilon, rule, data_norm)
    return fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=data_norm,
        alpha=alpha,
        noise=estimator.noise,
        constraint=estimator.constraint_,
        regularizer=estimator.regularizer_,
        tol=estimator.tol,
        max_iter=estimator.max_iter,
        random_state=rng,
    )


def _objective_adapter(estimator, loss, X, y, epsilon, delta, rng):
    from ..algorithms import objective_perturbation

    fit = functools.partial(
        objective_perturbation.fit, theta_bound=prior_bound(estimator, loss, epsilon)
    )
    return _perturbation_fit(fit, estimator, loss, X, y, epsilon, delta, rng, objective_alpha_rule)


def _output_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Output perturbation (:func:`dperm.algorithms.output_perturbation.fit`); the
    multinomial default clips its rows first (:func:`._output_rows.output_rows`)."""
    from ..algorithms import output_perturbation

    X, r, g = output_rows(estimator, loss, X, epsilon)
    fit = output_perturbation.fit
    res = _perturbation_fit(
        fit, estimator, loss, X, y, epsilon, delta, rng, output_alpha_rule, data_norm=r
    )
    return scale_intercept(res, g)


register_mechanism("objective", _objective_adapter, default_alpha=objective_alpha_rule)
register_mechanism("output", _output_adapter, default_alpha=output_alpha_rule)


# ----------------------------------------------------------------------------- frank-wolfe
def _frank_wolfe_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Private Frank-Wolfe (Talwar, Thakurta, Zhang 2015) over ``constraint_``.

    C defaults to the ℓ1 ball of radius MARGIN_BOUND / data_norm_ (the public
    prior ‖θ‖ ≤ 20/R of the other defaults); ``constraint="l1"`` with
    ``constraint_radius`` or a Polytope chooses another.  The number of steps is
    the paper's rule capped at min(1000, ``max_iter``); ``accountant`` (default
    "optimal") calibrates the per-step ε₀.  Frank-Wolfe minimizes the loss over
    C without an ℓ2 term, so Λ must be 0 (``alpha="auto"`` gives 0).
    """
    from ..algorithms import frank_wolfe

    if estimator.l2_ > 0 or estimator.regularizer_ is not None:
        raise InvalidPrivacyParameter(
            "mechanism 'frank-wolfe' minimizes the loss over a polytope without a "
            f"penalty: use alpha='auto' or 0 (got alpha_={estimator.l2_!r}) and "
            f"penalty 'l2' or 'none' (got {estimator.penalty!r})"
        )
    constraint = estimator.constraint_
    if constraint is None:
        constraint = L1Ball(MARGIN_BOUND / estimator.data_norm_)
    return frank_wolfe.fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        constraint=constraint,
        max_steps=min(1000, int(estimator.max_iter)),
        accountant=estimator.accountant or "optimal",
        random_state=rng,
    )


register_mechanism("frank-wolfe", _frank_wolfe_adapter, default_alpha=_no_ridge)


# ----------------------------------------------------------- gradient perturbation (#4)
def _hyper(estimator, name: str):
    """The estimator's hyperparameter ``name``: its own value when given (not None),
    else the value the ``mechanism="auto"`` rule set for this fit
    (``estimator.auto_.settings``), else None (the mechanism's default)."""
    value = getattr(estimator, name, None)
    if value is None:
        choice = getattr(estimator, "auto_", None)
        value = None if choice is None else choice.settings.get(name)
    return value


def _gradient_common(estimator) -> dict:
    """Hyperparameters the gradient-perturbation adapters read (None = default)."""
    return {
        "learning_rate": _hyper(estimator, "learning_rate"),
        "clipping_norm": _hyper(estimator, "clipping_norm"),
        "noise_multiplier": getattr(estimator, "noise_multiplier", None),
        "alpha": estimator.l2_,
        "regularizer": estimator.regularizer_,
        "constraint": estimator.constraint_,
        "data_norm": estimator.data_norm_,
        "progress": bool(getattr(estimator, "verbose", False)),
        # warm_start=True: the previous fit's released model (post-processing), set by
        # the estimator's fit for each problem (dperm.estimators._warm_start)
        "theta0": getattr(estimator, "_warm_theta0", None),
    }


def _gradient_fit(fit, estimator, loss, X, y, epsilon, delta, rng, **settings):
    """``fit`` of a gradient-perturbation algorithm under the estimators' guarantee,
    replace-one (n public), with the estimator's hyperparameters and ``settings``."""
    kwargs = {**_gradient_common(estimator), **settings}  # an adapter's settings win
    return fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        neighbouring="replace-one",
        random_state=rng,
        **kwargs,
    )


def _dp_gd_fit(estimator, loss, X, y, epsilon, delta, rng, *, calibration, **extra):
    """:func:`dperm.algorithms.dp_gd.fit`: ``epochs`` = number of full-batch steps,
    ``accountant`` the calibration (default ``calibration``)."""
    from ..algorithms import dp_gd

    settings = dict(
        steps=_hyper(estimator, "epochs"),
        calibration=getattr(estimator, "accountant", None) or calibration,
        **extra,
    )
    return _gradient_fit(dp_gd.fit, estimator, loss, X, y, epsilon, delta, rng, **settings)


def _dp_gd_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """DP-GD (:mod:`dperm.algorithms.dp_gd`); ``accountant`` ∈ {"pld" (default,
    the tightest), "rdp", "advanced"} the calibration."""
    return _dp_gd_fit(estimator, loss, X, y, epsilon, delta, rng, calibration="pld")


def _dp_gd_avg_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """DP-GD returning the *averaged* iterate (:func:`dperm.algorithms.dp_gd.fit`
    with ``averaging="uniform"``), replace-one, for non-smooth Lipschitz losses
    (pinball): projected subgradient descent converges for the average, not the
    last iterate (Shamir & Zhang 2013; Bassily, Smith, Thakurta 2014, Alg. 1).
    The privacy proof is DP-GD's (averaging is post-processing); ``accountant``
    defaults to "rdp" (fast at every ε)."""
    return _dp_gd_fit(
        estimator, loss, X, y, epsilon, delta, rng, calibration="rdp", averaging="uniform"
    )


def _dp_sgd_rule(estimator, loss, n: int, epsilon: float) -> dict:
    """The hyperparameters of the ``mechanism="auto"`` rule for DP-SGD, also when
    "dp-sgd" is *named* (issue #30: one schedule): the fit's own ``auto_`` settings,
    else for the logistic and softmax losses the rule's schedule for this (n, ε)
    (:func:`~dperm.estimators._auto.binary_dp_sgd_schedule`,
    :func:`~dperm.estimators._auto.multi_dp_sgd_schedule`: batch, epochs, clipping
    fraction, step), else {} (the algorithm's library defaults)."""
    from ..losses import Logistic
    from ._auto import binary_dp_sgd_schedule, multi_dp_sgd_schedule

    choice = getattr(estimator, "auto_", None)
    if choice is not None:
        return dict(choice.settings)
    if isinstance(loss, Softmax):
        return multi_dp_sgd_schedule(n, epsilon)
    if type(loss) is Logistic:
        return binary_dp_sgd_schedule(n, epsilon)
    return {}


def _dp_sgd_plan(estimator, loss, n: int, epsilon: float) -> tuple[dict, dict]:
    """(rule, settings): :func:`_dp_sgd_rule`, the fit's sampling, epochs, batch, accountant."""
    rule = _dp_sgd_rule(estimator, loss, n, epsilon)

    def hyper(name):  # the estimator's own value, else the rule's (None: the library's)
        value = getattr(estimator, name, None)
        return rule.get(name) if value is None else value

    accountant = getattr(estimator, "accountant", None) or "pld"
    settings = dict(
        sampling="without_replacement" if accountant == "rdp" else "poisson",
        epochs=hyper("epochs"),
        batch_size=hyper("batch_size"),
        accountant=accountant,
    )
    if hyper("averaging") is not None:  # set by the auto rule only
        settings["averaging"] = hyper("averaging")
    return rule, settings


def _dp_sgd_prefetch(estimator, loss, n: int, epsilon: float, delta: float) -> None:
    """The fit's noise calibration started in the background before the pass over X
    (:func:`dperm.algorithms.dp_sgd.prefetch_noise`; public numbers only)."""
    settings = _dp_sgd_plan(estimator, loss, n, epsilon)[1]
    settings["noise_multiplier"] = getattr(estimator, "noise_multiplier", None)
    dp_sgd.prefetch_noise(n, epsilon=epsilon, delta=delta, neighbouring="replace-one", **settings)


def _dp_sgd_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Mini-batch DP-SGD (:func:`dperm.algorithms.dp_sgd.fit`) under the estimators'
    guarantee, **replace-one** with n public: per-example clipping at C, so a
    sampled record moves the clipped sum by up to 2C and the noise std is z·2C.

    * ``accountant=None`` or "pld" (default): Poisson sampling, expected batch
      size ``batch_size``, accounted by the replace-one PLD (dp-accounting's
      REPLACE_ONE); ``epsilon_`` is the replace-one ε.
    * ``accountant="rdp"``: the RDP accountant has no replace-one Poisson bound,
      so batches of exactly ``batch_size`` records are drawn without replacement
      and accounted with the bound of Wang, Balle, Kasiviswanathan (2019).

    Hyperparameters left at None follow the auto rule's schedule for the logistic
    and softmax losses, whether "dp-sgd" was named or chosen by "auto"
    (:func:`_dp_sgd_rule`); an explicit value always wins.
    Multi-class targets are fitted one-vs-rest by the estimator; the
    multinomial model is ``dp_sgd.fit(Softmax(k), ...)``."""
    rule, settings = _dp_sgd_plan(estimator, loss, X.shape[0], epsilon)
    fraction = rule.get("clip_fraction")
    if fraction is not None and getattr(estimator, "clipping_norm", None) is None:
        # C = fraction·L, L the loss's Lipschitz bound over the PUBLIC row bound (no data)
        C = float(fraction) * float(loss.lipschitz(estimator.data_norm_))
        settings["clipping_norm"] = C
        if getattr(estimator, "learning_rate", None) is None:
            settings["learning_rate"] = float(rule["step_clip"]) / C
        settings.update(adaptive_settings(rule, C))  # an explicit clipping_norm is fixed
    settings.update(scaling_settings(estimator, rule, loss, X.shape, epsilon))  # issue #36
    return _gradient_fit(dp_sgd.fit, estimator, loss, X, y, epsilon, delta, rng, **settings)


def _dp_sgd_single_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Single-sample noisy SGD (:func:`dperm.algorithms.dp_sgd.fit_single_sample`),
    replace-one; accounted by RDP (the only accountant with its event)."""
    fit = dp_sgd.fit_single_sample
    settings = dict(
        epochs=getattr(estimator, "epochs", None),
        accountant=getattr(estimator, "accountant", None),
    )
    return _gradient_fit(fit, estimator, loss, X, y, epsilon, delta, rng, **settings)


# No ℓ2 term by default: clipping (not strong convexity) bounds the sensitivity.
register_mechanism("dp-gd", _dp_gd_adapter, default_alpha=_no_ridge)
register_mechanism("dp-gd-avg", _dp_gd_avg_adapter, default_alpha=_no_ridge)
register_mechanism("dp-sgd", _dp_sgd_adapter, default_alpha=_no_ridge)
_dp_sgd_adapter.prefetch = _dp_sgd_prefetch  # read by the estimators' fit
register_mechanism("dp-sgd-single", _dp_sgd_single_adapter, default_alpha=_no_ridge)


# ------------------------------------------------ AMP, AMP-NT, bolt-on SGD (issue #5)
def _only_l2_penalty(estimator, name: str) -> None:
    if estimator.regularizer_ is not None or estimator.penalty != "l2":
        raise InvalidPrivacyParameter(
            f"mechanism {name!r} supports only penalty='l2' (its privacy proof needs the "
            f"smooth ℓ2 term and no other regularizer), got penalty={estimator.penalty!r}"
        )


def _record_alpha(estimator, res) -> None:
    """With alpha='auto' the mechanism chooses Λ itself (AMP: the theorem's minimum
    rβ/(n(ε₁ − ε₃)), which needs the loss's β); record it so that ``l2_`` (and the
    excess risk measured on it) describe the objective actually used."""
    if estimator.l2_ == 0.0:
        estimator.l2_ = float(res.diagnostics["alpha"])
        estimator.alpha_ = estimator.l2_


def _amp_fit(fit, estimator, loss, X, y, epsilon, delta, rng, **extra):
    """``fit`` (:func:`dperm.algorithms.amp.fit` or ``fit_nt``) with the estimator's
    row bound, constraint and solver cap; the Λ it chose is recorded."""
    res = fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        constraint=estimator.constraint_,
        max_iter=estimator.max_iter,
        random_state=rng,
        **extra,
    )
    _record_alpha(estimator, res)
    return res


def _amp_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Approximate Minima Perturbation (:func:`dperm.algorithms.amp.fit`).

    ``alpha='auto'`` → the theorem's minimum Λ (recorded in ``l2_``); a numeric
    alpha must be at least that minimum.  γ = 1/n², the AMP-NT budget split."""
    from ..algorithms import amp

    _only_l2_penalty(estimator, "amp")
    alpha = estimator.l2_ if estimator.l2_ > 0 else None
    return _amp_fit(amp.fit, estimator, loss, X, y, epsilon, delta, rng, alpha=alpha)


def _amp_nt_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Hyperparameter-free AMP (:func:`dperm.algorithms.amp.fit_nt`): refuses a
    user-chosen alpha (the setting fixes Λ)."""
    from ..algorithms import amp

    _only_l2_penalty(estimator, "amp-nt")
    if not (isinstance(estimator.alpha, str) and estimator.alpha == "auto"):
        raise InvalidPrivacyParameter(
            "mechanism 'amp-nt' is hyperparameter-free: use alpha='auto', got "
            f"alpha={estimator.alpha!r}"
        )
    return _amp_fit(amp.fit_nt, estimator, loss, X, y, epsilon, delta, rng)


def _bolt_on_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Bolt-on output perturbation of permutation SGD (:func:`dperm.algorithms.bolt_on.fit`):
    ``epochs`` = passes k (default 1), ``batch_size``, ``learning_rate``; Λ = ``l2_``
    (default 0: the convex variant; Λ > 0: the strongly convex one)."""
    from ..algorithms import bolt_on

    _only_l2_penalty(estimator, "bolt-on")
    return bolt_on.fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        passes=getattr(estimator, "epochs", None) or 1,
        batch_size=getattr(estimator, "batch_size", None),
        learning_rate=getattr(estimator, "learning_rate", None),
        alpha=estimator.l2_,
        constraint=estimator.constraint_,
        random_state=rng,
    )


register_mechanism("amp", _amp_adapter, default_alpha=_no_ridge)
register_mechanism("amp-nt", _amp_nt_adapter, default_alpha=_no_ridge)
register_mechanism("bolt-on", _bolt_on_adapter, default_alpha=_no_ridge)


# ------------------------------------------ sufficient-statistics perturbation (#13)
def _least_squares_only(loss, name: str) -> None:
    if not isinstance(loss, Squared):
        raise InvalidPrivacyParameter(
            f"mechanism {name!r} fits least squares only (the squared loss), got {loss!r}"
        )


def _projected(estimator, res):
    """``res`` with θ projected onto ``constraint_`` when there is one
    (post-processing of the private θ: free)."""
    if estimator.constraint_ is None:
        return res
    return dataclasses.replace(res, theta=estimator.constraint_.project(res.theta))


def _ssp_common(estimator, loss, X, y, epsilon, delta, rng, *, adaptive: bool):
    """(Ada)SSP (:func:`dperm.algorithms.ssp.fit`) for the squared loss, replace-one:
    the estimator's Λ becomes the public ridge n·Λ on top of the adaptive one, the
    intercept column (``intercept_scaling``) is not penalized.  A ``constraint_`` is
    applied by projecting θ onto it (post-processing of the private θ, free); an ℓ1
    or elastic-net penalty is refused (the closed form has no ℓ1 term)."""

    from ..algorithms import ssp

    name = "adassp" if adaptive else "ssp"
    _least_squares_only(loss, name)
    if estimator.regularizer_ is not None:
        raise InvalidPrivacyParameter(
            f"mechanism {name!r} supports penalty 'l2' or 'none', got penalty={estimator.penalty!r}"
        )
    res = ssp.fit(
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        label_bound=loss.label_bound,
        adaptive=adaptive,
        ridge=X.shape[0] * estimator.l2_,
        intercept_scaling=float(estimator.intercept_scaling) if estimator.fit_intercept else None,
        random_state=rng,
    )
    return _projected(estimator, res)


def _adassp_adapter(estimator, loss, X, y, epsilon, delta, rng):
    return _ssp_common(estimator, loss, X, y, epsilon, delta, rng, adaptive=True)


def _ssp_adapter(estimator, loss, X, y, epsilon, delta, rng):
    return _ssp_common(estimator, loss, X, y, epsilon, delta, rng, adaptive=False)


register_mechanism("adassp", _adassp_adapter, default_alpha=_no_ridge)
register_mechanism("ssp", _ssp_adapter, default_alpha=_no_ridge)


# ------------------------------------------------------ Tukey-depth regression (#13)
def _tukey_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """The Tukey-depth mechanism (:func:`dperm.algorithms.tukey_regression.fit`) for the
    squared loss, replace-one; no ridge (alpha must resolve to 0), a ``constraint_`` is a
    projection of the private θ (free).  A failed test releases ⊥ = the zero model and
    warns (never a non-private fallback)."""

    from ..algorithms import tukey_regression

    _least_squares_only(loss, "tukey")
    if estimator.regularizer_ is not None or estimator.l2_ > 0:
        raise InvalidPrivacyParameter(
            "mechanism 'tukey' fits unregularized block least squares: alpha must be 0 or "
            f"'auto' and penalty 'l2' or 'none', got alpha={estimator.alpha!r}, "
            f"penalty={estimator.penalty!r}"
        )
    res = tukey_regression.fit(X, y, epsilon=epsilon, delta=delta, random_state=rng)
    if not res.diagnostics["ptr_passed"]:
        warnings.warn(
            f"mechanism 'tukey': the propose-test-release check failed at epsilon={epsilon:g}, "
            f"delta={delta:g} with {res.diagnostics['n_models']} models; the release is ⊥, "
            "reported as the zero model (more rows or a larger epsilon make the test pass)",
            UserWarning,
            stacklevel=5,  # +1: fit runs inside accounted_fit
        )
    return _projected(estimator, res)


register_mechanism("tukey", _tukey_adapter, default_alpha=_no_ridge)


# ----------------------------------------------------------- structured sparsity (#11)
def _structured_output_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Output perturbation with a submodular norm (Kumar & Deisenroth 2019, Thm 1):
    :func:`dperm.algorithms.structured_output_perturbation.estimator_fit`."""
    from ..algorithms import structured_output_perturbation

    return structured_output_perturbation.estimator_fit(estimator, loss, X, y, epsilon, delta, rng)


def _dual_frank_wolfe_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Private Frank-Wolfe on the dual (Kumar & Deisenroth 2019, Algorithm 2):
    :func:`dperm.algorithms.dual_frank_wolfe.estimator_fit`."""
    from ..algorithms import dual_frank_wolfe

    return dual_frank_wolfe.estimator_fit(estimator, loss, X, y, epsilon, delta, rng)


register_mechanism("structured-output", _structured_output_adapter, default_alpha=output_alpha_rule)
register_mechanism("dual-frank-wolfe", _dual_frank_wolfe_adapter, default_alpha=output_alpha_rule)


# ----------------------------------------------------------- textbook systems (#11)
def _exponential_sampling_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """The exponential mechanism over an ℓ2 ball:
    :func:`dperm.algorithms.exponential_sampling.estimator_fit`."""
    from ..algorithms import exponential_sampling

    return exponential_sampling.estimator_fit(estimator, loss, X, y, epsilon, delta, rng)


def _zero_one_net_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """The 0-1 loss over a net of directions
    (:func:`dperm.algorithms.zero_one_net.estimator_fit`)."""
    from ..algorithms import zero_one_net as zero_one

    return zero_one.estimator_fit(estimator, loss, X, y, epsilon, delta, rng)


def _nonconvex_objective_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Objective perturbation over an integer grid with an oracle (Neel et al. 2020):
    :func:`dperm.algorithms.nonconvex_objective_perturbation.estimator_fit`."""
    from ..algorithms import nonconvex_objective_perturbation

    return nonconvex_objective_perturbation.estimator_fit(
        estimator, loss, X, y, epsilon, delta, rng
    )


def _exponential_sampling_alpha(n: int, d: int, epsilon: float, data_norm: float) -> float:
    from ..algorithms.exponential_sampling import default_alpha

    return default_alpha(n, d, epsilon, data_norm)


register_mechanism(
    "exponential-sampling", _exponential_sampling_adapter, default_alpha=_exponential_sampling_alpha
)
register_mechanism("zero-one-net", _zero_one_net_adapter, default_alpha=_no_ridge)
register_mechanism("nonconvex-objective", _nonconvex_objective_adapter, default_alpha=_no_ridge)
