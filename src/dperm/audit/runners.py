"""Audit runners: each private algorithm of dperm in a small, fast configuration.

A runner is a callable ``(X, y, epsilon, delta, rng) -> theta`` that runs the
*real* algorithm code path (``dperm.algorithms.<module>.fit`` or a
``dperm.mechanisms`` primitive) once, plus what the auditor needs to know
about it: its neighbouring relation, the size of the canary datasets, the
row-norm bound and label range it assumes, and the default δ of its claim.

New algorithms join through :func:`register_runner`::

    @register_runner("my-algo", neighbouring="replace-one", module="mypkg.algo")
    def _my_algo(X, y, epsilon, delta, rng):
        return mypkg.algo.fit(Logistic(), X, y, epsilon=epsilon, delta=delta,
                              data_norm=1.0, random_state=rng).theta

Runner functions must be module-level (picklable by reference) to run in
worker processes.  Modules are imported lazily, so a registered runner whose
algorithm is not installed is simply *unavailable* (:meth:`Runner.available`).

Configurations are tiny (n ≈ 20–100 rows, d ≈ 1–3 features) so that one run
takes about a millisecond.

The gradient methods (``dp-gd``, ``dp-sgd``, ``dp-sgd-replace-one``,
``dp-gd-add-remove``, ``estimator-dp-sgd``) run the **default** path end to
end: ``fit(loss, X, y, epsilon=…, delta=…)`` with the default batch size,
sampling rate, number of steps, noise calibration and accountant, for both
neighbouring relations (the add/remove runners pass the public
``dataset_size`` = |D| = 100, so that D′ = D + canary has 101 rows — a size
at which T and b change if a run read them off ``X.shape[0]``).  Only the
learning rate is set, small (10⁻³), so that the hinge loss stays in its linear
part: the canary's clipped gradient is then the same C·e_d at every step,
and the score ⟨θ, e_d⟩ is exactly a sum of Gaussians (plus the canary's
Bernoulli(q) inclusions) — the setting where the μ-GDP estimate of
:mod:`dperm.audit.gdp` is tight.  These runners declare ``noise="gaussian"``
and :func:`~dperm.audit.audit` uses the GDP method for them by default.
The function-API runners compute the default constants by one full default
``fit`` per dataset and process and pass them back with ``noise_multiplier``
(see :func:`_fit_default`); the estimator runner calibrates on every fit,
exactly as a user's call does.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
from collections.abc import Callable

import numpy as np

from .._validation import check_count, check_delta, check_positive
from ..exceptions import DpermError, UnknownNameError
from .canary import CanaryPair, check_neighbouring, make_canary_pair

__all__ = [
    "Runner",
    "available_runners",
    "get_runner",
    "projection",
    "register_runner",
    "release_statistic",
    "runner_names",
]


def projection(theta, direction) -> float:
    """The default audit statistic ⟨θ, direction⟩ (for θ of shape (d, k) the
    first column is used).

    Raises
    ------
    DpermError
        θ of a shape other than ``direction``'s.
    """
    t = np.asarray(theta, dtype=float)
    if t.ndim == 2:
        t = t[:, 0]
    if t.shape != direction.shape:
        raise DpermError(f"runner returned theta of shape {t.shape}, expected {direction.shape}")
    return float(t @ direction)


#: added per extra row of ``coef_`` by :func:`release_statistic`
_SHAPE_OFFSET = 1.0e6


def release_statistic(coef, direction) -> float:
    """Audit statistic of an estimator's release ``coef_`` of shape (k, d):
    ⟨coef_[−1], direction⟩ + 10⁶·(k − 1).

    The shape of a release is part of what an adversary sees: a model whose
    number of rows depends on the data (a label set read off ``y``) is told
    apart by it perfectly, and the offset turns that into the score.  For a
    release of fixed shape the offset is a constant and the statistic is the
    projection of the last class's coefficients on the canary.
    """
    c = np.atleast_2d(np.asarray(coef, dtype=float))
    if c.shape[1] != direction.shape[0]:
        raise DpermError(
            f"runner returned coef of shape {c.shape}, expected (k, {direction.shape[0]})"
        )
    return float(c[-1] @ direction) + _SHAPE_OFFSET * (c.shape[0] - 1)


@dataclasses.dataclass(frozen=True)
class Runner:
    """A registered audit target.

    Attributes
    ----------
    name : str
    fn : callable
        ``fn(X, y, epsilon, delta, rng) -> theta`` (θ of shape (d,)).
    neighbouring : str
        The algorithm's relation: "replace-one" or "add-remove-one".
    module : str or None
        Module that must be importable for the runner to be available.
    n, d : int
        Size of the default canary datasets (rows of D′, features).
    data_norm, label_bound : float
        The row-norm bound and label magnitude the runner's algorithm assumes.
    default_delta : float
        δ of the claim when the caller gives none.
    canary_norm : float or None
        Norm of the canary row (default ``data_norm``).
    description : str
    noise : {"gaussian"} or None
        "gaussian" when the released statistic is a (sum of) Gaussian-noise
        release(s): the audit then defaults to the μ-GDP method.
    default_runs : int
        Runs per dataset when the caller gives none.
    statistic : callable or None
        ``statistic(output, direction) -> float``; default :func:`projection`.
    requires : tuple of str
        Keyword parameters that ``module.fit`` must accept for the runner to be
        available (an API the runner relies on).
    base : {"orthogonal", "zeros", "copies"}
        Base rows of the default pair (:func:`~dperm.audit.make_canary_pair`).
    """

    name: str
    fn: Callable
    neighbouring: str = "replace-one"
    module: str | None = None
    n: int = 30
    d: int = 3
    data_norm: float = 1.0
    label_bound: float = 1.0
    default_delta: float = 0.0
    canary_norm: float | None = None
    description: str = ""
    noise: str | None = None
    default_runs: int = 1000
    statistic: Callable | None = None
    requires: tuple[str, ...] = ()
    base: str = "orthogonal"

    def available(self) -> bool:
        """True when :attr:`module` (if any) can be imported and its ``fit``
        accepts every keyword of :attr:`requires`."""
        if self.module is None:
            return True
        try:
            if importlib.util.find_spec(self.module) is None:
                return False
        except (ImportError, ValueError):
            return False
        if not self.requires:
            return True
        fit = getattr(importlib.import_module(self.module), "fit", None)
        if fit is None:
            return False
        params = inspect.signature(fit).parameters
        return all(p in params for p in self.requires)

    def require(self) -> None:
        """Raise :class:`~dperm.exceptions.DpermError` if unavailable."""
        if not self.available():
            needs = f"the module {self.module!r}"
            if self.requires:
                needs += f" with fit(..., {', '.join(p + '=' for p in self.requires)})"
            raise DpermError(
                f"audit runner {self.name!r} needs {needs}, which is not installed in this "
                "version of dperm"
            )

    def make_pair(self, neighbouring: str | None = None, random_state=0) -> CanaryPair:
        """The default worst-case pair for this runner (see :mod:`dperm.audit.canary`)."""
        return make_canary_pair(
            self.n,
            self.d,
            data_norm=self.data_norm,
            label_bound=self.label_bound,
            neighbouring=neighbouring or self.neighbouring,
            canary_norm=self.canary_norm,
            base=self.base,
            random_state=random_state,
        )

    def __call__(self, X, y, epsilon, delta, rng):
        return self.fn(X, y, epsilon, delta, rng)


_RUNNERS: dict[str, Runner] = {}


def register_runner(
    name: str,
    fn: Callable | None = None,
    *,
    neighbouring: str = "replace-one",
    module: str | None = None,
    n: int = 30,
    d: int = 3,
    data_norm: float = 1.0,
    label_bound: float = 1.0,
    default_delta: float = 0.0,
    canary_norm: float | None = None,
    description: str = "",
    noise: str | None = None,
    default_runs: int = 1000,
    statistic: Callable | None = None,
    requires: tuple[str, ...] = (),
    base: str = "orthogonal",
    overwrite: bool = False,
):
    """Register an audit runner (usable as a decorator when ``fn`` is None).

    The keywords are the :class:`Runner` attributes.

    Raises
    ------
    UnknownNameError
        Bad ``neighbouring``, or ``name`` already registered and not ``overwrite``.
    InvalidPrivacyParameter
        Bad sizes, norms or δ.
    """
    if not isinstance(name, str) or not name:
        raise UnknownNameError(f"runner name must be a non-empty string, got {name!r}")
    neighbouring = check_neighbouring(neighbouring)
    if noise not in (None, "gaussian"):
        raise UnknownNameError(f"noise must be 'gaussian' or None, got {noise!r}")
    if name in _RUNNERS and not overwrite:
        raise UnknownNameError(f"an audit runner named {name!r} is already registered")

    def deco(f: Callable) -> Callable:
        _RUNNERS[name] = Runner(
            name=name,
            fn=f,
            neighbouring=neighbouring,
            module=module,
            n=check_count(n, "n", minimum=2),
            d=check_count(d, "d"),
            data_norm=check_positive(data_norm, "data_norm"),
            label_bound=check_positive(label_bound, "label_bound"),
            default_delta=check_delta(default_delta),
            canary_norm=canary_norm,
            description=description,
            noise=noise,
            default_runs=check_count(default_runs, "default_runs", minimum=10),
            statistic=statistic,
            requires=tuple(requires),
            base=base,
        )
        return f

    if fn is not None:
        deco(fn)
        return _RUNNERS[name]
    return deco


def get_runner(name: str) -> Runner:
    """The runner registered under ``name``.

    Raises
    ------
    UnknownNameError
    """
    try:
        return _RUNNERS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown audit runner {name!r}; choose one of {sorted(_RUNNERS)}"
        ) from None


def runner_names() -> list[str]:
    """Every registered runner name (available or not)."""
    return sorted(_RUNNERS)


def available_runners() -> list[str]:
    """Names of the runners whose algorithm module is installed."""
    return [k for k in sorted(_RUNNERS) if _RUNNERS[k].available()]


# ============================================================ helpers
_NOISE_CACHE: dict[tuple, float] = {}


def _cached(key: tuple, compute: Callable[[], float]) -> float:
    """Per-process memo of a noise multiplier (calibration is deterministic)."""
    z = _NOISE_CACHE.get(key)
    if z is None:
        z = float(compute())
        _NOISE_CACHE[key] = z
    return z


def _logistic():
    from ..losses import Logistic

    return Logistic()


def _hinge():
    from ..losses import Hinge

    return Hinge()


def _signed_clipped_sum(X, y, data_norm: float, ord_: int = 2) -> np.ndarray:
    """Σᵢ yᵢ · clip(xᵢ) with rows clipped to ``data_norm`` in ℓ2 (or ℓ1) norm:
    add/remove-one sensitivity ``data_norm`` in that norm (|yᵢ| ≤ 1)."""
    X = np.asarray(X, dtype=float)
    norms = np.linalg.norm(X, ord=ord_, axis=1)
    scale = np.minimum(1.0, data_norm / np.maximum(norms, 1e-300))
    y = np.clip(np.asarray(y, dtype=float), -1.0, 1.0)
    return X.T @ (scale * y)


# ============================================================ perturbation methods
# Huber SVM (h = 0.5): |φ′| = 1 on margins < 1 − h, so around θ ≈ 0 the canary and
# the anti-canary have opposite gradients of full norm L — the replace-one
# sensitivity is attained (the logistic loss reaches only half of it).  One
# feature: the Gamma-norm noise is then exactly Laplace along the canary and the
# projection test is optimal.
_PERTURB_N = 20
_OBJ_ALPHA = 1.0  # nΛ = 20 ≫ β = 1: Chaudhuri's ε' = ε − ln(1.1025)
_OUT_ALPHA = 0.25  # nΛ = 5: θ̂ = ±1/(nΛ) = ±0.2 stays in the linear part of the loss


def _huber():
    from ..losses import HuberSVM

    return HuberSVM(h=0.5)


def _fit_huber(fit: Callable, X, y, epsilon, delta, rng, **kw) -> np.ndarray:
    """θ of ``fit(HuberSVM(h=0.5), X, y, ...)`` with rows bounded by 1 (the shared
    call of the perturbation runners; ``kw`` are the algorithm's extra settings)."""
    return fit(
        _huber(), X, y, epsilon=epsilon, delta=delta, data_norm=1.0, random_state=rng, **kw
    ).theta


@register_runner(
    "objective",
    neighbouring="replace-one",
    module="dperm.algorithms.objective_perturbation",
    n=_PERTURB_N,
    d=1,
    description=f"objective perturbation, Huber SVM loss, Λ = {_OBJ_ALPHA} (Chaudhuri et al. "
    "2011 Gamma noise for δ = 0; Kifer et al. 2012 Gaussian noise for δ > 0)",
)
def _run_objective(X, y, epsilon, delta, rng):
    from ..algorithms import objective_perturbation as m

    return _fit_huber(m.fit, X, y, epsilon, delta, rng, alpha=_OBJ_ALPHA, tol=1e-9)


@register_runner(
    "output",
    neighbouring="replace-one",
    module="dperm.algorithms.output_perturbation",
    n=_PERTURB_N,
    d=1,
    description=f"output perturbation, Huber SVM loss, Λ = {_OUT_ALPHA} (Chaudhuri et al. 2011 "
    "Gamma noise for δ = 0; analytic Gaussian for δ > 0)",
)
def _run_output(X, y, epsilon, delta, rng):
    from ..algorithms import output_perturbation as m

    return _fit_huber(m.fit, X, y, epsilon, delta, rng, alpha=_OUT_ALPHA, tol=1e-9)


@register_runner(
    "objective-gaussian",
    neighbouring="replace-one",
    module="dperm.algorithms.objective_perturbation",
    n=_PERTURB_N,
    d=1,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=2000,
    description=f"objective perturbation, Huber SVM loss, Λ = {_OBJ_ALPHA}, Gaussian noise "
    "with the default tight calibration (one-sided Jacobian + Gaussian privacy profile)",
)
def _run_objective_gaussian(X, y, epsilon, delta, rng):
    from ..algorithms import objective_perturbation as m

    return _fit_huber(
        m.fit, X, y, epsilon, delta, rng, alpha=_OBJ_ALPHA, noise="gaussian", tol=1e-9
    )


# Multinomial (softmax, k = 3 public classes): labels ±1 of the canary pair become the
# classes 1 / 0 (class 2 never occurs; k is public).  At Θ ≈ 0 the canary and the
# anti-canary move the gradient by x(e₀ − e₁)ᵀ; the statistic is the released logit
# difference Θ[:, 1] − Θ[:, 0] (post-processing of the release) projected on the canary.
_SOFTMAX_K = 3


def _fit_softmax(fit: Callable, X, y, epsilon, delta, rng, **kw) -> np.ndarray:
    from ..losses import Softmax

    labels = np.where(np.asarray(y) > 0, 1, 0)
    theta = fit(
        Softmax(_SOFTMAX_K), X, labels, epsilon=epsilon, delta=delta, data_norm=1.0,
        random_state=rng, tol=1e-9, **kw,
    ).theta  # fmt: skip
    return theta[:, 1] - theta[:, 0]


@register_runner(
    "objective-multinomial",
    neighbouring="replace-one",
    module="dperm.algorithms.objective_perturbation",
    n=_PERTURB_N,
    d=1,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=2000,
    description=f"multinomial objective perturbation, softmax loss with k = {_SOFTMAX_K}, "
    f"Λ = {_OBJ_ALPHA}, default tight Gaussian calibration (one model, whole budget)",
)
def _run_objective_multinomial(X, y, epsilon, delta, rng):
    from ..algorithms import objective_perturbation as m

    return _fit_softmax(m.fit, X, y, epsilon, delta, rng, alpha=_OBJ_ALPHA)


@register_runner(
    "output-multinomial",
    neighbouring="replace-one",
    module="dperm.algorithms.output_perturbation",
    n=_PERTURB_N,
    d=1,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=2000,
    description=f"multinomial output perturbation, softmax loss with k = {_SOFTMAX_K}, "
    f"Λ = {_OUT_ALPHA}, analytic Gaussian noise (sensitivity 2√2R/(nΛ))",
)
def _run_output_multinomial(X, y, epsilon, delta, rng):
    from ..algorithms import output_perturbation as m

    return _fit_softmax(m.fit, X, y, epsilon, delta, rng, alpha=_OUT_ALPHA)


# ============================================================ gradient methods
#: learning rate of the gradient runners: small enough that every hinge margin
#: stays < 1, so each clipped per-example gradient is the constant −y·x at every
#: step and the score is linear in the Gaussian noise (module docstring)
_GRAD_LR = 1e-3
#: public dataset size of the add/remove runners: D has 100 rows, D′ = D + canary
#: 101 — with sizes read off X, T (25 → 26) and q (0.16 → 0.158) would change
_AR_SIZE = 100
_GRAD_RUNS = 20_000


def _fit_default(name: str, fit: Callable, X, y, epsilon, delta, rng, **kw) -> np.ndarray:
    """θ of the default path ``fit(Hinge(), X, y, epsilon=ε, delta=δ, data_norm=1,
    learning_rate=10⁻³, **kw)``.

    Every other constant (steps, batch size, sampling rate, noise multiplier) is
    the algorithm's default, computed by one full default fit on *this* dataset
    per (runner, |X|, ε, δ) and process; the runs then pass those constants
    back with ``noise_multiplier`` (and no ε), so each run executes the
    sampling, clipping, noise and update code but not the accountant.  A
    default computed from ``X.shape[0]`` therefore differs between D and D′
    exactly as in a default run.
    """

    def constants() -> dict:
        d = fit(
            _hinge(),
            X,
            y,
            epsilon=epsilon,
            delta=delta,
            data_norm=1.0,
            learning_rate=_GRAD_LR,
            random_state=0,
            **kw,
        ).diagnostics
        out = {"noise_multiplier": float(d["noise_multiplier"]), "steps": int(d["steps"])}
        if d.get("sampling_rate", 1.0) < 1.0:
            out["sampling_rate"] = float(d["sampling_rate"])
        return out

    key = (name, X.shape[0], float(epsilon), float(delta), tuple(sorted(kw.items())))
    const = _CONSTANTS.get(key)
    if const is None:
        const = _CONSTANTS[key] = constants()
    return fit(
        _hinge(), X, y, data_norm=1.0, learning_rate=_GRAD_LR, random_state=rng, **const, **kw
    ).theta


#: per-process memo of the default constants of a (runner, |X|, ε, δ) configuration
_CONSTANTS: dict[tuple, dict] = {}


@register_runner(
    "dp-gd",
    neighbouring="replace-one",
    module="dperm.algorithms.dp_gd",
    n=20,
    d=2,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=_GRAD_RUNS,
    description="DP-GD (full batch), hinge loss, default steps and calibration, "
    "replace-one (n public)",
)
def _run_dp_gd(X, y, epsilon, delta, rng):
    from ..algorithms import dp_gd as m

    return _fit_default("dp-gd", m.fit, X, y, epsilon, delta, rng)


@register_runner(
    "dp-gd-add-remove",
    neighbouring="add-remove",
    module="dperm.algorithms.dp_gd",
    n=_AR_SIZE + 1,
    d=2,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=_GRAD_RUNS,
    requires=("neighbouring", "dataset_size"),
    description=f"DP-GD under add/remove with the public dataset_size={_AR_SIZE} (|D′| = "
    f"{_AR_SIZE + 1}), hinge loss, default steps and calibration",
)
def _run_dp_gd_add_remove(X, y, epsilon, delta, rng):
    from ..algorithms import dp_gd as m

    return _fit_default(
        "dp-gd", m.fit, X, y, epsilon, delta, rng, neighbouring="add-remove", dataset_size=_AR_SIZE
    )


@register_runner(
    "dp-sgd",
    neighbouring="add-remove",
    module="dperm.algorithms.dp_sgd",
    n=_AR_SIZE + 1,
    d=2,
    default_delta=1e-5,
    noise="gaussian",
    # a subsampled Gaussian's trade-off curve is flatter than G_μ near its centre: the
    # threshold chosen on 10 000 runs varied too much (ε_LB 0.45–0.73 at a claim of 1)
    default_runs=2 * _GRAD_RUNS,
    requires=("neighbouring", "dataset_size"),
    description=f"DP-SGD, Poisson sampling, add/remove with the public dataset_size="
    f"{_AR_SIZE} (|D′| = {_AR_SIZE + 1}); default batch size, steps and calibration; "
    "hinge loss",
)
def _run_dp_sgd(X, y, epsilon, delta, rng):
    from ..algorithms import dp_sgd as m

    return _fit_default(
        "dp-sgd", m.fit, X, y, epsilon, delta, rng, neighbouring="add-remove", dataset_size=_AR_SIZE
    )


@register_runner(
    "dp-sgd-replace-one",
    neighbouring="replace-one",
    module="dperm.algorithms.dp_sgd",
    n=_AR_SIZE,
    d=2,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=_GRAD_RUNS,
    requires=("neighbouring",),
    description=f"DP-SGD, Poisson sampling, replace-one (n = {_AR_SIZE} public); default "
    "batch size, steps, calibration and accountant; hinge loss",
)
def _run_dp_sgd_replace_one(X, y, epsilon, delta, rng):
    from ..algorithms import dp_sgd as m

    return _fit_default("dp-sgd", m.fit, X, y, epsilon, delta, rng, neighbouring="replace-one")


#: the public label set the estimator runner passes (the canary pair's labels)
_LABELS = (-1.0, 1.0)


@register_runner(
    "estimator-dp-sgd",
    neighbouring="replace-one",
    module="dperm.estimators",
    n=_AR_SIZE,
    d=2,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=500,  # every fit calibrates and accounts (≈ 0.1 s)
    statistic=release_statistic,
    description=f"DPLogisticRegression(mechanism='dp-sgd') with every default (logistic "
    f"loss, intercept, batch size, epochs, learning rate, calibration) and the public "
    f"label set classes={list(_LABELS)}; n = {_AR_SIZE}; scores coef_",
)
def _run_estimator_dp_sgd(X, y, epsilon, delta, rng):
    from ..estimators import DPLogisticRegression

    est = DPLogisticRegression(
        mechanism="dp-sgd",
        epsilon=epsilon,
        delta=delta,
        data_norm=1.0,
        classes=list(_LABELS),
        random_state=rng,
    )
    return est.fit(X, y).coef_


# ============================================================ AMP and bolt-on
@register_runner(
    "amp",
    neighbouring="replace-one",
    module="dperm.algorithms.amp",
    n=_PERTURB_N,
    d=1,
    default_delta=1e-5,
    description="Approximate Minima Perturbation (Iyengar et al. 2019, Algorithm 1), Huber "
    "SVM loss, default Λ, γ and budget split",
)
def _run_amp(X, y, epsilon, delta, rng):
    from ..algorithms import amp as m

    return _fit_huber(m.fit, X, y, epsilon, delta, rng)


@register_runner(
    "amp-nt",
    neighbouring="replace-one",
    module="dperm.algorithms.amp",
    n=_PERTURB_N,
    d=1,
    default_delta=1e-5,
    description="AMP-NT, the hyperparameter-free AMP (Iyengar et al. 2019, Section V), "
    "Huber SVM loss",
)
def _run_amp_nt(X, y, epsilon, delta, rng):
    from ..algorithms import amp as m

    return _fit_huber(m.fit_nt, X, y, epsilon, delta, rng)


@register_runner(
    "bolt-on",
    neighbouring="replace-one",
    module="dperm.algorithms.bolt_on",
    n=_PERTURB_N,
    d=1,
    description="bolt-on output perturbation of one pass of permutation SGD (Wu et al. "
    "2017, convex variant), Huber SVM loss",
)
def _run_bolt_on(X, y, epsilon, delta, rng):
    from ..algorithms import bolt_on as m

    return _fit_huber(m.fit, X, y, epsilon, delta, rng)


# ============================================================ noise primitives
@register_runner(
    "gaussian",
    neighbouring="add-remove",
    module="dperm.accounting.gaussian",
    n=20,
    d=2,
    default_delta=1e-5,
    noise="gaussian",
    default_runs=_GRAD_RUNS,
    description="Gaussian mechanism (analytic calibration, Balle & Wang 2018) on the sum "
    "of ℓ2-clipped, label-signed rows",
)
def _run_gaussian(X, y, epsilon, delta, rng):
    from ..accounting.gaussian import analytic_gaussian_noise_multiplier
    from ..mechanisms import gaussian_mechanism

    z = _cached(
        ("gaussian", float(epsilon), float(delta)),
        lambda: analytic_gaussian_noise_multiplier(epsilon, delta),
    )
    out, _ = gaussian_mechanism(
        _signed_clipped_sum(X, y, 1.0), sensitivity=1.0, noise_multiplier=z, rng=rng
    )
    return out


@register_runner(
    "laplace",
    neighbouring="add-remove",
    n=20,
    d=2,
    description="Laplace mechanism on the sum of ℓ1-clipped, label-signed rows",
)
def _run_laplace(X, y, epsilon, delta, rng):
    from ..mechanisms import laplace_mechanism

    out, _ = laplace_mechanism(
        _signed_clipped_sum(X, y, 1.0, ord_=1), sensitivity=1.0, epsilon=epsilon, rng=rng
    )
    return out


@register_runner(
    "snapping",
    neighbouring="add-remove",
    n=20,
    d=1,
    description="snapping mechanism (Mironov 2012) on a clipped scalar sum",
)
def _run_snapping(X, y, epsilon, delta, rng):
    from ..mechanisms.snapping import snapping_mechanism

    f = _signed_clipped_sum(X, y, 1.0)
    out, _, _ = snapping_mechanism(
        f, sensitivity=1.0, epsilon=epsilon, bound=float(X.shape[0]) + 1.0, rng=rng
    )
    return out


@register_runner(
    "discrete-gaussian",
    neighbouring="add-remove",
    n=20,
    d=2,
    default_delta=1e-5,
    description="discrete Gaussian mechanism (Canonne, Kamath, Steinke 2020) on a clipped "
    "sum, released on a power-of-two grid",
)
def _run_discrete_gaussian(X, y, epsilon, delta, rng):
    from ..mechanisms.discrete_gaussian import discrete_gaussian_mechanism

    out, _, _ = discrete_gaussian_mechanism(
        _signed_clipped_sum(X, y, 1.0), sensitivity=1.0, epsilon=epsilon, delta=delta, rng=rng
    )
    return out


# ============================================================ textbook systems (#11)
@register_runner(
    "exponential-sampling",
    neighbouring="replace-one",
    module="dperm.algorithms.exponential_sampling",
    n=20,
    d=1,
    description="exponential mechanism over the ℓ2 ball of radius 5 (exact sampler, d = 1), "
    "logistic loss, Δ = min(loss range, 2LR)",
)
def _run_exponential_sampling(X, y, epsilon, delta, rng):
    from ..algorithms import exponential_sampling as m

    res = m.fit(_logistic(), X, y, epsilon=epsilon, radius=5.0, data_norm=1.0, random_state=rng)
    return res.theta


@register_runner(
    "zero-one-net",
    neighbouring="replace-one",
    module="dperm.algorithms.zero_one_net",
    n=20,
    d=2,
    description="0-1 loss over the default 64-direction net of the circle (exponential "
    "mechanism, Δ = 1)",
)
def _run_zero_one_net(X, y, epsilon, delta, rng):
    from ..algorithms.zero_one_net import private_linear_classifier

    return private_linear_classifier(X, y, epsilon=epsilon, random_state=rng).theta


@register_runner(
    "nonconvex-objective",
    neighbouring="replace-one",
    module="dperm.algorithms.nonconvex_objective_perturbation",
    n=20,
    d=1,
    description="objective perturbation over the 3-bit integer grid with the MILP oracle "
    "(Neel, Roth, Vietri, Wu 2020), 0-1 loss, binary encoding",
)
def _run_nonconvex_objective(X, y, epsilon, delta, rng):
    from ..algorithms import nonconvex_objective_perturbation as m

    return m.fit_zero_one_grid(X, y, epsilon=epsilon, random_state=rng).theta


# ============================================================ sufficient statistics (SSP)
# DPLinearRegression() at its defaults (data_norm = 1, label_bound = 1, intercept column
# s = 0.5, δ = 1/n²) on the replace-one canary pair: the canary and the anti-canary share
# the row x_c = e_d and differ in the label (±1), so XᵀX and λ_min are equal on D and D′
# and the released Xᵀy moves by 2·(x_c, s) — norm 2√(1 + s²), the full replace-one
# sensitivity Δ₃ = 2RB of dperm.algorithms.ssp.  The released Xᵀy (a Gaussian release the
# estimator exposes in diagnostics_["xty_released"]; θ is post-processing of it and of the
# other two releases) projected on (x_c, s) is then the Neyman–Pearson statistic of the
# pair, exactly Gaussian: the μ-GDP estimate is tight.  It probes one of the composed
# Gaussian releases (1/3 of AdaSSP's GDP budget μ², 1/2 of SSP's), so the honest ε_LB
# is far below ε by design, and a bug that gives this release less noise than the whole
# claim allows — the add/remove sensitivity RB instead of 2RB, say — is refuted
# (tests/test_audit_ssp.py).
_SSP_N = 50
#: DPLinearRegression's default intercept_scaling (the value of the intercept column)
_SSP_INTERCEPT = 0.5


def ssp_release_statistic(output, direction) -> float:
    """Audit statistic of the ``ssp`` / ``adassp`` runners: ⟨b̂, u⟩ / ‖u‖, b̂ the released
    Xᵀy of shape (d + 1,) (intercept entry last) and u = (direction, s) the canary row
    x_c = ``direction`` (norm ``data_norm`` = 1) with its intercept entry s = 0.5.

    Raises
    ------
    DpermError
        ``output`` of a shape other than (d + 1,).
    """
    b = np.asarray(output, dtype=float).ravel()
    if b.shape != (direction.shape[0] + 1,):
        raise DpermError(
            f"runner returned a released Xᵀy of shape {b.shape}, expected "
            f"({direction.shape[0] + 1},)"
        )
    u = np.append(direction, _SSP_INTERCEPT)
    return float(b @ u) / float(np.linalg.norm(u))


def _fit_linear_regression(mechanism: str, X, y, epsilon, delta, rng) -> np.ndarray:
    """The released Xᵀy of ``DPLinearRegression(mechanism=…, epsilon=ε, delta=δ)`` with
    every other parameter at its default."""
    from ..estimators import DPLinearRegression

    est = DPLinearRegression(mechanism=mechanism, epsilon=epsilon, delta=delta, random_state=rng)
    return np.asarray(est.fit(X, y).diagnostics_["xty_released"], dtype=float)


_SSP_COMMON = dict(
    neighbouring="replace-one",
    module="dperm.algorithms.ssp",
    n=_SSP_N,
    d=2,
    default_delta=1.0 / _SSP_N**2,  # the estimator's default δ = 1/n²
    noise="gaussian",
    default_runs=2000,
    statistic=ssp_release_statistic,
)


@register_runner(
    "adassp",
    description="DPLinearRegression() — AdaSSP (Wang 2018, Alg. 2), the default mechanism — "
    f"every default (R = 1, B = 1, intercept, δ = 1/n²), n = {_SSP_N}, d = 2; scores the "
    "released Xᵀy along the canary row (one of three composed Gaussian releases)",
    **_SSP_COMMON,
)
def _run_adassp(X, y, epsilon, delta, rng):
    return _fit_linear_regression("adassp", X, y, epsilon, delta, rng)


@register_runner(
    "ssp",
    description="DPLinearRegression(mechanism='ssp') — sufficient-statistics perturbation — "
    f"every other default, n = {_SSP_N}, d = 2; scores the released Xᵀy along the canary "
    "row (one of two composed Gaussian releases)",
    **_SSP_COMMON,
)
def _run_ssp(X, y, epsilon, delta, rng):
    return _fit_linear_regression("ssp", X, y, epsilon, delta, rng)


def _register_algorithm_runners() -> None:
    """Runners that live beside their algorithm (registered through the public
    :func:`register_runner`), so that ``dperm audit --mechanism NAME`` finds them."""
    from ..algorithms import dual_frank_wolfe, structured_output_perturbation, tukey_regression

    for module in (dual_frank_wolfe, structured_output_perturbation, tukey_regression):
        module.register_audit_runner(overwrite=True)


_register_algorithm_runners()
