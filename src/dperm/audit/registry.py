"""The registry of audit runners: the :class:`Runner` record, its registration and
lookup, and the default audit statistics.

A runner is a callable ``(X, y, epsilon, delta, rng) -> theta`` that runs a
private algorithm once, plus what the auditor needs to know about it (its
neighbouring relation, the size of its canary datasets, the row-norm bound and
label range it assumes, the default δ of its claim, …).  dperm's own runners
are the rows of the table in :mod:`dperm.audit.runners`; new algorithms join
through :func:`register_runner`.

Every runner has a :attr:`Runner.kind`: ``"honest"`` (the algorithm as shipped,
which an audit must not refute) or ``"mutant"`` (a deliberately broken variant
that an audit must refute — :meth:`Runner.mutate` builds one from an honest
runner), so that callers can list the real runners apart from the mutants
(:func:`runner_names` with ``kind=``).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
from collections.abc import Callable

import numpy as np

from .._validation import check_count, check_delta, check_positive, lookup
from ..exceptions import DpermError, UnknownNameError
from .canary import CanaryPair, check_neighbouring, make_canary_pair

__all__ = [
    "RUNNER_KINDS",
    "Runner",
    "available_runners",
    "get_runner",
    "projection",
    "register_runner",
    "release_statistic",
    "runner_names",
]

#: the kinds of runner: the algorithm as shipped, or a deliberately broken variant
RUNNER_KINDS = ("honest", "mutant")


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


def _check_kind(kind: str) -> str:
    if kind not in RUNNER_KINDS:
        raise UnknownNameError(f"kind must be one of {list(RUNNER_KINDS)}, got {kind!r}")
    return kind


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
    kind : {"honest", "mutant"}
        The algorithm as shipped, or a deliberately broken variant (module
        docstring).
    method : str or None
        The audit method the runner's statistic is made for (one of
        :data:`dperm.audit.METHODS`); None: chosen from :attr:`noise`.
    pair : callable or None
        ``pair(n, random_state) -> CanaryPair``: the runner's own replace-one
        pair of n rows (default: :func:`~dperm.audit.make_canary_pair` with
        :attr:`base`).
    threat_model : str
        What the auditor observes ("final model", "every step's noisy sum", …).
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
    kind: str = "honest"
    method: str | None = None
    pair: Callable | None = None
    threat_model: str = "final model (black box)"

    @property
    def mutant(self) -> bool:
        """True for a deliberately broken variant (``kind == "mutant"``)."""
        return self.kind == "mutant"

    def mutate(self, fn: Callable, name: str | None = None, **changes) -> Runner:
        """This runner with its function replaced by ``fn``, a broken variant of it:
        ``kind="mutant"``, named ``name`` (default ``"<name>[<fn.__name__>]"``);
        ``changes`` are other attributes to replace."""
        name = name or f"{self.name}[{getattr(fn, '__name__', 'mutant')}]"
        return dataclasses.replace(self, name=name, fn=fn, kind="mutant", **changes)

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
        if self.pair is not None and (neighbouring or self.neighbouring) == self.neighbouring:
            return self.pair(self.n, random_state=random_state)
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
    kind: str = "honest",
    method: str | None = None,
    pair: Callable | None = None,
    threat_model: str = "final model (black box)",
    overwrite: bool = False,
):
    """Register an audit runner (usable as a decorator when ``fn`` is None).

    The keywords are the :class:`Runner` attributes.

    Raises
    ------
    UnknownNameError
        Bad ``neighbouring`` or ``kind``, or ``name`` already registered and not
        ``overwrite``.
    InvalidPrivacyParameter
        Bad sizes, norms or δ.
    """
    if not isinstance(name, str) or not name:
        raise UnknownNameError(f"runner name must be a non-empty string, got {name!r}")
    neighbouring = check_neighbouring(neighbouring)
    if noise not in (None, "gaussian"):
        raise UnknownNameError(f"noise must be 'gaussian' or None, got {noise!r}")
    kind = _check_kind(kind)
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
            default_runs=check_count(default_runs, "default_runs", minimum=2),
            statistic=statistic,
            requires=tuple(requires),
            base=base,
            kind=kind,
            method=method,
            pair=pair,
            threat_model=threat_model,
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
    return lookup(_RUNNERS, name, "audit runner")


def runner_names(*, kind: str | None = None) -> list[str]:
    """Every registered runner name (available or not); with ``kind`` ("honest"
    or "mutant") only the runners of that kind.

    Raises
    ------
    UnknownNameError
        Bad ``kind``.
    """
    if kind is not None:
        _check_kind(kind)
    return [k for k in sorted(_RUNNERS) if kind in (None, _RUNNERS[k].kind)]


def available_runners(*, kind: str | None = None) -> list[str]:
    """Names of the runners (of ``kind``, if given) whose algorithm module is
    installed."""
    return [k for k in runner_names(kind=kind) if _RUNNERS[k].available()]
