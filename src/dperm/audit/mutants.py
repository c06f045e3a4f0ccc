"""Mutants: the real default paths with one likely privacy bug injected, which an audit
must refute.

A privacy bug barely moves accuracy; only an audit (or an exact computation) sees
it.  Each mutant here runs the *same* code path as an honest runner of
:mod:`dperm.audit.runners` while one attribute of the library is replaced for the
duration of the run (``unittest.mock.patch.object``, so the patch is active in
whichever worker process executes the run, and gone afterwards) — never a copy
of the algorithm.  The patches (:data:`PATCHES`) are the bugs most likely on the
default paths:

=================================  =========================================================
patch                              the bug
=================================  =========================================================
``clip-above-calibration``         per-example clipping at 2C while the noise is calibrated
                                   to C (``_gradient_loop.make_oracle``)
``sampling-rate-from-wrong-n``     the accountant composes q/2 — a sampling rate b/(2n)
                                   from the wrong n — while batches are drawn at q
                                   (``PoissonSampler.step_event``)
``accountant-one-step-short``      the accountant composes T − 1 steps while T run
                                   (``Sampler.event``)
``add-remove-sensitivity``         the noise std z·C of the add/remove sensitivity under
                                   replace-one, whose sensitivity is 2C
                                   (``Sampler.sensitivity_factor``)
``pca-noise-dropped``              the DP PCA of ``DPMLPClassifier`` releases its
                                   components without noise (``mlp.analyze_gauss``)
``huber-label-bound-ignored``      the Huber surrogate's Lipschitz constant hR taken with
                                   h = 0.4 (the default label bound B = 1) while the loss
                                   uses h = 0.4·B of the user's B (``Huber.lipschitz``)
``output-row-clipping-dropped``    multinomial output perturbation's default claims its
                                   rows are clipped to f(ε)·R (and calibrates L, Λ and the
                                   noise there) but leaves them at R
                                   (``estimators._output_rows.as_design``)
``stratified-split``               a file's train/test split stratified on its labels (dperm
                                   before issue #36): one changed label moves about a
                                   quarter of the rows between train and test
                                   (``datasets.tabular._split_rows``)
``scaling-stages-not-composed``    the private feature scaling gives each of its three
                                   releases the multiplier z of the whole, forgetting that
                                   they compose (``private_scaling.stage_multipliers``)
``mean-rescaled-after-clipping``   the user loop's mean loss: per-example gradients clipped
                                   before they are rescaled by the lot size b, so each
                                   record moves the sum by up to b·C
                                   (``networks._clipper.GradSampler.take``)
=================================  =========================================================

:data:`MUTANT_TABLE` registers one runner (``kind="mutant"``) per row; ``dperm audit
--list`` prints them under "Mutants" and ``tests/test_audit_mutants.py`` refutes each
in CI.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import numpy as np

from ..accounting.events import NonPrivate, PoissonSampled, SelfComposed
from ..algorithms import _gradient_loop as gl
from ..algorithms import dp_gd
from ..algorithms.adaptive_clipping import AdaptiveClipping
from ..design import Design
from ..losses.huber import Huber
from ..sampling import PoissonSampler, Sampler
from .canary import CanaryPair
from .fits import _GRAD_LR, _hinge, csv_pair
from .objective_llr import _run_estimator_auto_regression_llr, pushed_pair
from .registry import _RUNNERS, get_runner, register_runner

__all__ = ["MUTANT_TABLE", "PATCHES", "Mutation", "patched"]


# ============================================================ the bugs
class _ClipsAtTwice:
    """An oracle that clips at 2C whatever C it is asked for (adaptive clipping's Cₜ
    included); every other attribute is the honest oracle's."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def clipped_sum_count(self, theta, idx, clipping_norm):
        return self._inner.clipped_sum_count(theta, idx, 2.0 * clipping_norm)


@contextlib.contextmanager
def _clip_above_calibration() -> Iterator[None]:
    honest = gl.make_oracle
    honest_release = AdaptiveClipping.release

    def make_oracle(loss, X, y, clipping_norm, per_example_grad=None, **kw):  # fixed C
        return honest(loss, X, y, 2.0 * clipping_norm, per_example_grad, **kw)

    def release(self, oracle, theta, idx, noise_rng):  # adaptive clipping's Cₜ
        return honest_release(self, _ClipsAtTwice(oracle), theta, idx, noise_rng)

    with (
        mock.patch.object(gl, "make_oracle", make_oracle),
        mock.patch.object(AdaptiveClipping, "release", release),
    ):
        yield


@contextlib.contextmanager
def _scaling_stages_not_composed() -> Iterator[None]:
    from ..algorithms import private_scaling

    def stage_multipliers(noise_multiplier, shares=None):  # each stage at the whole z
        return (float(noise_multiplier),) * 3

    with mock.patch.object(private_scaling, "stage_multipliers", stage_multipliers):
        yield


@contextlib.contextmanager
def _sampling_rate_from_wrong_n() -> Iterator[None]:
    def step_event(self, noise_multiplier):
        return PoissonSampled(self.sampling_rate / 2.0, self.leaf(noise_multiplier))

    with mock.patch.object(PoissonSampler, "step_event", step_event):
        yield


@contextlib.contextmanager
def _accountant_one_step_short() -> Iterator[None]:
    def event(self, noise_multiplier, steps):
        if noise_multiplier == 0:
            return NonPrivate()
        return SelfComposed(self.step_event(noise_multiplier), max(1, steps - 1))

    with mock.patch.object(Sampler, "event", event):
        yield


@contextlib.contextmanager
def _add_remove_sensitivity() -> Iterator[None]:
    with mock.patch.object(Sampler, "sensitivity_factor", property(lambda self: 1.0)):
        yield


@contextlib.contextmanager
def _pca_noise_dropped() -> Iterator[None]:
    from ..estimators import mlp

    honest = mlp.analyze_gauss

    def analyze_gauss(X, n_components, *, noise_multiplier, **kw):
        comps, eig, event, n_clipped = honest(
            X, n_components, noise_multiplier=1e-12 * noise_multiplier, **kw
        )
        # the event still says the noise was added (what the bug would report)
        return comps, eig, dataclasses.replace(event, noise_multiplier=noise_multiplier), n_clipped

    with mock.patch.object(mlp, "analyze_gauss", analyze_gauss):
        yield


@contextlib.contextmanager
def _huber_label_bound_ignored() -> Iterator[None]:
    from ..estimators._auto import HUBER_FRACTION

    def lipschitz(self, data_norm, **bounds):
        return HUBER_FRACTION * float(data_norm)  # h of B = 1, whatever the loss's h

    with mock.patch.object(Huber, "lipschitz", lipschitz):
        yield


@contextlib.contextmanager
def _output_row_clipping_dropped() -> Iterator[None]:
    from ..estimators import _output_rows

    honest = _output_rows.as_design

    def as_design(X, data_norm=None, *, intercept_scaling=None, warn=True):
        if intercept_scaling is None and isinstance(X, Design) and data_norm is not None:
            if X.bound > data_norm:  # the clip to f(ε)·R: claim the bound, scale nothing
                out = copy.copy(X)
                out.bound = float(data_norm)
                return out
        return honest(X, data_norm, intercept_scaling=intercept_scaling, warn=warn)

    with mock.patch.object(_output_rows, "as_design", as_design):
        yield


def _stratified_split_rows(y, test_size, random_state):
    """The split of ``load_csv`` before issue #36: a permutation per label stratum, drawn
    in turn from one generator (the test part of each stratum ``round(test_size · size)``)."""
    from .._rng import check_random_state
    from ..datasets._prepare import _split_indices

    return _split_indices(len(y), test_size, check_random_state(random_state), stratify=y)


def stratified_train_rows(y) -> np.ndarray:
    """The training rows of a file with labels ``y`` under :func:`_stratified_split_rows`
    at ``load_csv``'s defaults (the mutant's pair: :func:`~dperm.audit.fits.csv_pair`)."""
    return _stratified_split_rows(np.asarray(y), 0.2, 0)[0]


@contextlib.contextmanager
def _stratified_split() -> Iterator[None]:
    from ..datasets import tabular

    with mock.patch.object(tabular, "_split_rows", _stratified_split_rows):
        yield


@contextlib.contextmanager
def _mean_rescaled_after_clipping() -> Iterator[None]:
    from ..networks._clipper import GradSampler

    honest = GradSampler.take

    def take(self, clipping_norm):
        if self.loss_reduction != "mean":
            return honest(self, clipping_norm)
        self.loss_reduction = "sum"  # the norms of the 1/b-scaled gradients are clipped …
        try:
            sums = honest(self, clipping_norm)
        finally:
            self.loss_reduction = "mean"
        b = float(self.batch_size or 1)  # … and only then rescaled by b
        return sums if sums is None else [None if t is None else t * b for t in sums]

    with mock.patch.object(GradSampler, "take", take):
        yield


#: the injected bugs: name → context manager factory (module docstring)
PATCHES: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "clip-above-calibration": _clip_above_calibration,
    "sampling-rate-from-wrong-n": _sampling_rate_from_wrong_n,
    "accountant-one-step-short": _accountant_one_step_short,
    "add-remove-sensitivity": _add_remove_sensitivity,
    "pca-noise-dropped": _pca_noise_dropped,
    "huber-label-bound-ignored": _huber_label_bound_ignored,
    "output-row-clipping-dropped": _output_row_clipping_dropped,
    "stratified-split": _stratified_split,
    "scaling-stages-not-composed": _scaling_stages_not_composed,
    "mean-rescaled-after-clipping": _mean_rescaled_after_clipping,
}


@contextlib.contextmanager
def patched(bug: str) -> Iterator[None]:
    """The library with ``bug`` (a key of :data:`PATCHES`) injected inside the block."""
    with PATCHES[bug]():
        yield


@dataclasses.dataclass(frozen=True)
class Mutation:
    """A mutant runner function: ``run(X, y, ε, δ, rng)`` inside :func:`patched`
    (``bug``); ``run`` is an honest runner's function (module-level, so it pickles)."""

    run: Callable
    bug: str

    def __call__(self, X, y, epsilon, delta, rng):
        with patched(self.bug):
            return self.run(X, y, epsilon, delta, rng)


# ============================================================ the runs the mutants patch
#: DP-GD with two full-batch steps: one step short is then half the composed noise
#: budget (μ √2 times the claimed), the configuration that makes the bug visible
_DP_GD_STEPS = 2


def _dp_gd_two_steps(X, y, epsilon, delta, rng):
    """θ of ``dp_gd.fit(Hinge(), X, y, ε, δ, steps=2)`` with every other default
    (learning rate 10⁻³ as the dp-gd runner: the hinge stays linear, the score is exactly
    Gaussian)."""
    return dp_gd.fit(
        _hinge(), X, y, epsilon=epsilon, delta=delta, data_norm=1.0, learning_rate=_GRAD_LR,
        steps=_DP_GD_STEPS, random_state=rng,
    ).theta  # fmt: skip


def pca_pair(n: int = 24, random_state=0):
    """The pair of the PCA mutant: n − 1 base rows on the unit circle of the first two
    coordinates (d = 4) and the canary e₃ in D, e₄ in D′ (replace-one: a row replaced
    by another).  ``DPMLPClassifier(n_components=3)`` releases the span of the base
    plane and the canary's direction."""
    m = n - 1
    angles = np.linspace(0.0, np.pi, m, endpoint=False)
    Xb = np.zeros((m, 4))
    Xb[:, 0], Xb[:, 1] = np.cos(angles), np.sin(angles)
    yb = np.arange(m) % 2 * 1.0
    xd, xp = np.zeros((1, 4)), np.zeros((1, 4))
    xd[0, 2], xp[0, 3] = 1.0, 1.0
    return CanaryPair(
        X=np.vstack([Xb, xd]),
        y=np.append(yb, 1.0),
        X_prime=np.vstack([Xb, xp]),
        y_prime=np.append(yb, 1.0),
        direction=np.array([0.0, 0.0, -1.0, 1.0]) / np.sqrt(2.0),
        neighbouring="replace-one",
        canary_norm=1.0,
    )


def _mlp_pca(X, y, epsilon, delta, rng):
    """[‖P e₄‖² − ‖P e₃‖²] of the components P DPMLPClassifier(n_components=3) releases
    (a small network, one epoch: the PCA is what this run is about)."""
    from ..estimators import DPMLPClassifier

    clf = DPMLPClassifier(
        hidden_layer_sizes=(2,), n_components=3, epochs=1, classes=[0, 1], epsilon=epsilon,
        delta=delta,
        random_state=rng,
    ).fit(X, np.asarray(y).astype(int))  # fmt: skip
    P = np.asarray(clf.pca_components_, dtype=float)
    return np.array([float(P[:, 3] @ P[:, 3] - P[:, 2] @ P[:, 2])])


#: labels of the Huber mutant: B = 4 (the estimator's h = 0.4·B = 1.6)
_HUBER_B = 4.0


#: DPLinearRegression(label_bound=4) on the regression runner's pair, targets ×4
_regression_label_bound = functools.partial(
    _run_estimator_auto_regression_llr, label_bound=_HUBER_B
)


def _first(output, direction) -> np.ndarray:
    return np.asarray(output, dtype=float).ravel()


def _mutant(base: str, bug: str, fn: Callable | None = None, **columns) -> dict[str, Any]:
    """A row of :data:`MUTANT_TABLE`: runner ``base[bug]``, the columns of ``base``
    (overridden by ``columns``) with the function ``fn`` (default ``base``'s) patched."""
    return {"base": base, "bug": bug, "fn": fn, "columns": columns}


#: the DP-SGD bugs the estimators' default paths are audited for: what each one does
_DP_SGD_BUGS = {
    "clip-above-calibration": "with per-example clipping at 2C while the noise is calibrated to C",
    "sampling-rate-from-wrong-n": "whose accountant composes the sampling rate b/(2n) while "
    "batches are drawn at b/n",
    "add-remove-sensitivity": "with the noise std z·C of the add/remove sensitivity under "
    "replace-one (sensitivity 2C)",
}


def _dp_sgd_mutants(base: str, path: str, runs: int, bugs) -> tuple[dict[str, Any], ...]:
    """The rows of ``bugs`` (keys of :data:`_DP_SGD_BUGS`) on the DP-SGD default path
    ``path`` of the runner ``base``."""
    return tuple(
        _mutant(base, bug, default_runs=runs, description=f"{path} {_DP_SGD_BUGS[bug]}")
        for bug in bugs
    )


#: the torch network paths audited (white box): runner name → what it runs
_NETWORK_PATHS = {
    "network-dp-sgd": "dperm.networks.fit default path (white box)",
    "network-user-loop": "dperm.networks.make_private in a user loop (white box)",
}

#: the bugs the network paths are audited for: what each one does
_NETWORK_BUGS = {
    "add-remove-sensitivity": "with the noise std z·C of the add/remove sensitivity under "
    "replace-one",
    "sampling-rate-from-wrong-n": "whose accountant composes q/2 while lots are drawn at q",
    "mean-rescaled-after-clipping": "whose mean-loss per-example gradients are clipped before "
    "they are rescaled by the lot size (each record moves the sum by up to b·C)",
}


def _network_mutants(base: str, bugs) -> tuple[dict[str, Any], ...]:
    """The rows of ``bugs`` (keys of :data:`_NETWORK_BUGS`) on the network path ``base``
    (a key of :data:`_NETWORK_PATHS`; 10 runs, needs torch)."""
    return tuple(
        _mutant(
            base,
            bug,
            default_runs=10,
            description=f"{_NETWORK_PATHS[base]} {_NETWORK_BUGS[bug]}; needs torch",
        )
        for bug in bugs
    )


# fmt: off
#: the mutants, one row per (honest path, bug); registered by :func:`register_mutants`
MUTANT_TABLE: tuple[dict[str, Any], ...] = (
    *_dp_sgd_mutants("estimator-auto", "DPLogisticRegression() default path (white box)", 200,
                     _DP_SGD_BUGS),
    *_dp_sgd_mutants("estimator-auto-multinomial", "DPLogisticRegression(classes=[0, 1, 2]) "
                     "default path (white box, gradient canaries)", 10,
                     ("clip-above-calibration", "sampling-rate-from-wrong-n")),
    _mutant("private-scaling", "scaling-stages-not-composed", default_runs=1000,
            description="private feature scaling whose three releases each get the "
            "multiplier z of the whole (their composition forgotten: √3 times the μ)"),
    *_network_mutants("network-dp-sgd", ("add-remove-sensitivity", "sampling-rate-from-wrong-n")),
    *_network_mutants("network-user-loop",
                      ("mean-rescaled-after-clipping", "add-remove-sensitivity")),
    _mutant("dp-gd", "accountant-one-step-short", _dp_gd_two_steps,
            default_runs=500, method="gdp-fit",
            description=f"DP-GD (hinge, replace-one) with steps={_DP_GD_STEPS} whose "
            "accountant composes one step fewer than the loop runs"),
    _mutant("dp-mlp-pca", "pca-noise-dropped", _mlp_pca, module="torch", n=24, d=4,
            pair=pca_pair, statistic=_first, default_runs=30, noise=None,
            default_delta=1e-5, neighbouring="replace-one",
            description="DPMLPClassifier(n_components=3): the DP PCA releases its components "
            "without noise (the canary row e₃ replaced by e₄ shows in the span); needs torch"),
    _mutant("estimator-auto-regression", "huber-label-bound-ignored",
            _regression_label_bound, default_runs=1000,
            pair=functools.partial(pushed_pair, pusher_target=0.0),
            description="DPLinearRegression(label_bound=4) default path (Huber objective "
            "perturbation; the regression pair with targets ×4 and its pushers at 0, which pin "
            "each canary between its two thresholds) whose calibration takes the "
            "Lipschitz constant hR of h = 0.4 (B = 1) while the loss uses h = 0.4·4"),
    _mutant("estimator-output-multinomial", "output-row-clipping-dropped", default_runs=100,
            description="DPLogisticRegression(mechanism='output', classes=[0, 1, 2]) default "
            "path whose rows are left at R while L, Λ and the noise are calibrated to the "
            "clipped bound f(ε)·R (issue #30's row clipping dropped)"),
    _mutant("cli-csv", "stratified-split", default_runs=200,
            pair=functools.partial(csv_pair, split=stratified_train_rows),
            description="dperm fit --csv whose train/test split is stratified on the file's "
            "labels (dperm before issue #36): the canary's label moves rows between train "
            "and test; the pair's rows that train under one file only push the model the "
            "way that file's canary does"),
)
# fmt: on


def register_mutants() -> None:
    """Register every row of :data:`MUTANT_TABLE` as a runner of kind "mutant"."""
    for row in MUTANT_TABLE:
        name = f"{row['base']}[{row['bug']}]"
        if row["base"] in _RUNNERS:
            base = get_runner(row["base"])
            fields = {
                f.name: getattr(base, f.name)
                for f in dataclasses.fields(base)
                if f.name not in ("name", "fn", "kind")
            }
            fields["threat_model"] = base.threat_model
        else:
            fields = {}
        fields.update(row["columns"])
        run = row["fn"] if row["fn"] is not None else get_runner(row["base"]).fn
        register_runner(name, Mutation(run, row["bug"]), kind="mutant", overwrite=True, **fields)
