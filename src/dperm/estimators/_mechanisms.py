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

import math
from collections.abc import Callable
from typing import Any

from ..exceptions import UnknownNameError

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
#: Public prior bound on the margin scale R·‖θ*‖ of the normalized problem: a model
#: whose log-odds never exceed ±20 (probabilities within 2e-9 of 0 or 1).
MARGIN_BOUND = 20.0


def objective_alpha_rule(n: int, d: int, epsilon: float, data_norm: float) -> float:
    """Default Λ for objective perturbation: Λ = 2√2 R² / (B₀ √n), B₀ = 20.

    This is the regularization that balances estimation error and bias for
    Lipschitz convex losses with ‖θ*‖ ≤ B (regularized loss minimization,
    Shalev-Shwartz & Ben-David 2014, Chapter 13, λ = √(2ρ²/(B²n)) for the
    objective L + λ‖θ‖², i.e. Λ = 2λ here), with ρ = R (|φ'| ≤ 1 for the
    logistic and Huber losses) and B = B₀/R (:data:`MARGIN_BOUND`).  It uses
    only public quantities (n, the public row bound R) and is independent of ε:
    the privacy theorem adds whatever extra strong convexity it needs (Δ,
    see :mod:`dperm.algorithms.objective_perturbation`).  ``d`` and ``epsilon``
    are unused.

    The constant B₀ was checked without the test set: on an 80/20 validation
    split of Adult's *training* rows (ε = 1, δ = 1/n², 5 seeds), B₀ ∈ {5, 10,
    20, 40, 80} gives validation accuracy 0.794, 0.814, 0.825, 0.827, 0.824 —
    20 and 40 are indistinguishable, 20 is kept (the more conservative bias).
    """
    return 2.0 * math.sqrt(2.0) * data_norm**2 / (MARGIN_BOUND * math.sqrt(n))


def output_alpha_rule(n: int, d: int, epsilon: float, data_norm: float) -> float:
    """Default Λ for output perturbation: Λ = (2R²/B₀) · (√d/(nε))^{1/2}, B₀ = 20.

    The output noise has norm ≈ (2L/(nΛε))·√d (times a δ-dependent factor),
    costing ≈ L·‖noise‖ in risk, while the regularization bias is ≈ Λ‖θ*‖²/2
    (cf. the utility analysis of Chaudhuri, Monteleoni, Sarwate 2011); minimizing over
    Λ with L = R and ‖θ*‖ ≤ B₀/R gives Λ ∝ (R²/B₀)(√d/(nε))^{1/2}.  Public
    inputs only.
    """
    return 2.0 * data_norm**2 / MARGIN_BOUND * math.sqrt(math.sqrt(d) / (n * epsilon))


def auto_alpha(mechanism: str, n: int, d: int, epsilon: float, data_norm: float) -> float:
    """The Λ that ``alpha="auto"`` means for ``mechanism`` (its registered rule,
    else :func:`objective_alpha_rule`)."""
    rule = _ALPHA_RULES.get(mechanism, objective_alpha_rule)
    return float(rule(n, d, epsilon, data_norm))


# ----------------------------------------------------------------------------- built-ins
def _perturbation_fit(fit, estimator, loss, X, y, epsilon, delta, rng):
    """``fit`` of objective or output perturbation (they take the same settings)
    with the estimator's Λ, noise, constraint, regularizer and solver settings."""
    return fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        alpha=estimator.l2_,
        noise=estimator.noise,
        constraint=estimator.constraint_,
        regularizer=estimator.regularizer_,
        tol=estimator.tol,
        max_iter=estimator.max_iter,
        random_state=rng,
    )


def _objective_adapter(estimator, loss, X, y, epsilon, delta, rng):
    from ..algorithms import objective_perturbation

    return _perturbation_fit(objective_perturbation.fit, estimator, loss, X, y, epsilon, delta, rng)


def _output_adapter(estimator, loss, X, y, epsilon, delta, rng):
    from ..algorithms import output_perturbation

    return _perturbation_fit(output_perturbation.fit, estimator, loss, X, y, epsilon, delta, rng)


register_mechanism("objective", _objective_adapter, default_alpha=objective_alpha_rule)
register_mechanism("output", _output_adapter, default_alpha=output_alpha_rule)

# Other mechanisms ("dp-gd", "dp-sgd", "dp-sgd-single", "amp", "amp-nt", "bolt-on")
# register here, one additive line each, e.g.
#     register_mechanism("dp-sgd", _dp_sgd_adapter)
# with the adapter importing its algorithm module lazily (keeps `import dperm` light).


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
    from ..constraints import L1Ball
    from ..exceptions import InvalidPrivacyParameter

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


register_mechanism("frank-wolfe", _frank_wolfe_adapter, default_alpha=lambda n, d, e, r: 0.0)


# ----------------------------------------------------------- gradient perturbation (#4)
def _gradient_common(estimator) -> dict:
    """Hyperparameters the gradient-perturbation adapters read (None = default)."""
    return {
        "learning_rate": getattr(estimator, "learning_rate", None),
        "clipping_norm": getattr(estimator, "clipping_norm", None),
        "noise_multiplier": getattr(estimator, "noise_multiplier", None),
        "alpha": estimator.l2_,
        "regularizer": estimator.regularizer_,
        "constraint": estimator.constraint_,
        "data_norm": estimator.data_norm_,
        "progress": bool(getattr(estimator, "verbose", False)),
    }


def _dp_gd_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """DP-GD (:mod:`dperm.algorithms.dp_gd`), replace-one (n public, like every
    estimator); ``epochs`` = number of full-batch steps, ``accountant`` ∈
    {"pld" (default, the tightest), "rdp", "advanced"} the calibration."""
    from ..algorithms import dp_gd

    return dp_gd.fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        neighbouring="replace-one",
        steps=getattr(estimator, "epochs", None),
        calibration=getattr(estimator, "accountant", None) or "pld",
        random_state=rng,
        **_gradient_common(estimator),
    )


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

    Multi-class targets are fitted one-vs-rest by the estimator; the
    multinomial model is ``dp_sgd.fit(Softmax(k), ...)``."""
    from ..algorithms import dp_sgd

    accountant = getattr(estimator, "accountant", None) or "pld"
    return dp_sgd.fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        neighbouring="replace-one",
        sampling="without_replacement" if accountant == "rdp" else "poisson",
        epochs=getattr(estimator, "epochs", None),
        batch_size=getattr(estimator, "batch_size", None),
        accountant=accountant,
        random_state=rng,
        **_gradient_common(estimator),
    )


def _dp_sgd_single_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Single-sample noisy SGD (:func:`dperm.algorithms.dp_sgd.fit_single_sample`),
    replace-one; accounted by RDP (the only accountant with its event)."""
    from ..algorithms import dp_sgd

    return dp_sgd.fit_single_sample(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        neighbouring="replace-one",
        epochs=getattr(estimator, "epochs", None),
        accountant=getattr(estimator, "accountant", None),
        random_state=rng,
        **_gradient_common(estimator),
    )


# No ℓ2 term by default: clipping (not strong convexity) bounds the sensitivity.
register_mechanism("dp-gd", _dp_gd_adapter, default_alpha=lambda n, d, e, r: 0.0)
register_mechanism("dp-sgd", _dp_sgd_adapter, default_alpha=lambda n, d, e, r: 0.0)
register_mechanism("dp-sgd-single", _dp_sgd_single_adapter, default_alpha=lambda n, d, e, r: 0.0)


# ------------------------------------------------ AMP, AMP-NT, bolt-on SGD (issue #5)
def _only_l2_penalty(estimator, name: str) -> None:
    from ..exceptions import InvalidPrivacyParameter

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


def _amp_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Approximate Minima Perturbation (:func:`dperm.algorithms.amp.fit`).

    ``alpha='auto'`` → the theorem's minimum Λ (recorded in ``l2_``); a numeric
    alpha must be at least that minimum.  γ = 1/n², the AMP-NT budget split."""
    from ..algorithms import amp

    _only_l2_penalty(estimator, "amp")
    res = amp.fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        alpha=estimator.l2_ if estimator.l2_ > 0 else None,
        constraint=estimator.constraint_,
        max_iter=estimator.max_iter,
        random_state=rng,
    )
    _record_alpha(estimator, res)
    return res


def _amp_nt_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """Hyperparameter-free AMP (:func:`dperm.algorithms.amp.fit_nt`): refuses a
    user-chosen alpha (the setting fixes Λ)."""
    from ..algorithms import amp
    from ..exceptions import InvalidPrivacyParameter

    _only_l2_penalty(estimator, "amp-nt")
    if not (isinstance(estimator.alpha, str) and estimator.alpha == "auto"):
        raise InvalidPrivacyParameter(
            "mechanism 'amp-nt' is hyperparameter-free: use alpha='auto', got "
            f"alpha={estimator.alpha!r}"
        )
    res = amp.fit_nt(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        data_norm=estimator.data_norm_,
        constraint=estimator.constraint_,
        max_iter=estimator.max_iter,
        random_state=rng,
    )
    _record_alpha(estimator, res)
    return res


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


register_mechanism("amp", _amp_adapter, default_alpha=lambda n, d, e, r: 0.0)
register_mechanism("amp-nt", _amp_nt_adapter, default_alpha=lambda n, d, e, r: 0.0)
register_mechanism("bolt-on", _bolt_on_adapter, default_alpha=lambda n, d, e, r: 0.0)


# ------------------------------------------ sufficient-statistics perturbation (#13)
def _ssp_common(estimator, loss, X, y, epsilon, delta, rng, *, adaptive: bool):
    """(Ada)SSP (:func:`dperm.algorithms.ssp.fit`) for the squared loss, replace-one:
    the estimator's Λ becomes the public ridge n·Λ on top of the adaptive one, the
    intercept column (``intercept_scaling``) is not penalized.  A ``constraint_`` is
    applied by projecting θ onto it (post-processing of the private θ, free); an ℓ1
    or elastic-net penalty is refused (the closed form has no ℓ1 term)."""
    import dataclasses

    from ..algorithms import ssp
    from ..exceptions import InvalidPrivacyParameter
    from ..losses import Squared

    name = "adassp" if adaptive else "ssp"
    if not isinstance(loss, Squared):
        raise InvalidPrivacyParameter(
            f"mechanism {name!r} fits least squares only (the squared loss), got {loss!r}"
        )
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
    if estimator.constraint_ is not None:
        theta = estimator.constraint_.project(res.theta)
        res = dataclasses.replace(res, theta=theta)
    return res


def _adassp_adapter(estimator, loss, X, y, epsilon, delta, rng):
    return _ssp_common(estimator, loss, X, y, epsilon, delta, rng, adaptive=True)


def _ssp_adapter(estimator, loss, X, y, epsilon, delta, rng):
    return _ssp_common(estimator, loss, X, y, epsilon, delta, rng, adaptive=False)


register_mechanism("adassp", _adassp_adapter, default_alpha=lambda n, d, e, r: 0.0)
register_mechanism("ssp", _ssp_adapter, default_alpha=lambda n, d, e, r: 0.0)


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


def _dp_gd_avg_adapter(estimator, loss, X, y, epsilon, delta, rng):
    """DP-GD returning the *averaged* iterate (:func:`dperm.algorithms.dp_gd.fit`
    with ``averaging="uniform"``), replace-one, for non-smooth Lipschitz losses
    (pinball): projected subgradient descent converges for the average, not the
    last iterate (Shamir & Zhang 2013; Bassily, Smith, Thakurta 2014, Alg. 1).
    The privacy proof is DP-GD's (averaging is post-processing); ``accountant``
    defaults to "rdp" (fast at every ε)."""
    from ..algorithms import dp_gd

    return dp_gd.fit(
        loss,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        neighbouring="replace-one",
        steps=getattr(estimator, "epochs", None),
        calibration=getattr(estimator, "accountant", None) or "rdp",
        averaging="uniform",
        random_state=rng,
        **_gradient_common(estimator),
    )


register_mechanism("dp-gd-avg", _dp_gd_avg_adapter, default_alpha=lambda n, d, e, r: 0.0)
