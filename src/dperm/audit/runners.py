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

Configurations are tiny (n ≈ 20–50 rows, d ≈ 2–4 features) so that one run
takes about a millisecond.  The gradient methods calibrate their noise
multiplier through the accountant once per (ε, δ, configuration) and worker
process, then pass it to ``fit`` as ``noise_multiplier`` (the accountant's
bisection is the slow part; the noise, sampling and clipping code paths run
every time).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable

import numpy as np

from .._validation import check_count, check_delta, check_positive
from ..exceptions import DpermError, UnknownNameError
from .canary import CanaryPair, check_neighbouring, make_canary_pair

__all__ = [
    "Runner",
    "available_runners",
    "get_runner",
    "register_runner",
    "runner_names",
]


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

    def available(self) -> bool:
        """True when :attr:`module` (if any) can be imported."""
        if self.module is None:
            return True
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    def require(self) -> None:
        """Raise :class:`~dperm.exceptions.DpermError` if unavailable."""
        if not self.available():
            raise DpermError(
                f"audit runner {self.name!r} needs the module {self.module!r}, which is not "
                "installed in this version of dperm"
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
    overwrite: bool = False,
):
    """Register an audit runner (usable as a decorator when ``fn`` is None).

    Raises
    ------
    UnknownNameError
        Bad ``neighbouring``, or ``name`` already registered and not ``overwrite``.
    InvalidPrivacyParameter
        Bad sizes, norms or δ.
    """
    if not isinstance(name, str) or not name:
        raise UnknownNameError(f"runner name must be a non-empty string, got {name!r}")
    check_neighbouring(neighbouring)
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


# ============================================================ gradient methods
def _fit_calibrated(name: str, fit: Callable, kw: dict, X, y, epsilon, delta, rng) -> np.ndarray:
    """θ of ``fit(Hinge(), X, y, noise_multiplier=z, **kw)``, where z is the noise
    multiplier the algorithm's own accountant calibrates for (ε, δ) — computed
    once per (runner, n, ε, δ) and worker process (see :func:`_cached`)."""

    def calibrate() -> float:
        res = fit(_hinge(), X, y, epsilon=epsilon, delta=delta, random_state=0, **kw)
        return res.diagnostics["noise_multiplier"]

    z = _cached((name, X.shape[0], float(epsilon), float(delta)), calibrate)
    return fit(_hinge(), X, y, noise_multiplier=z, random_state=rng, **kw).theta


_GD_STEPS = 4
_GD_LR = 0.5


@register_runner(
    "dp-gd",
    neighbouring="replace-one",
    module="dperm.algorithms.dp_gd",
    n=20,
    d=2,
    default_delta=1e-5,
    description=f"DP-GD, hinge loss (canary gradient at the clipping norm), {_GD_STEPS} "
    "full-batch steps, RDP calibration",
)
def _run_dp_gd(X, y, epsilon, delta, rng):
    from ..algorithms import dp_gd as m

    kw = {"data_norm": 1.0, "steps": _GD_STEPS, "learning_rate": _GD_LR}
    return _fit_calibrated("dp-gd", m.fit, kw, X, y, epsilon, delta, rng)


_SGD_STEPS = 6
_SGD_Q = 0.5
_SGD_LR = 0.5


@register_runner(
    "dp-sgd",
    neighbouring="add-remove-one",
    module="dperm.algorithms.dp_sgd",
    n=20,
    d=2,
    default_delta=1e-5,
    description=f"DP-SGD, hinge loss, Poisson sampling q = {_SGD_Q}, {_SGD_STEPS} steps, "
    "RDP calibration",
)
def _run_dp_sgd(X, y, epsilon, delta, rng):
    from ..algorithms import dp_sgd as m

    kw = {
        "data_norm": 1.0,
        "steps": _SGD_STEPS,
        "sampling_rate": _SGD_Q,
        "learning_rate": _SGD_LR,
    }
    return _fit_calibrated("dp-sgd", m.fit, kw, X, y, epsilon, delta, rng)


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
    neighbouring="add-remove-one",
    module="dperm.accounting.gaussian",
    n=20,
    d=2,
    default_delta=1e-5,
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
    neighbouring="add-remove-one",
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
    neighbouring="add-remove-one",
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
    neighbouring="add-remove-one",
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
