"""Audit runners: each private algorithm of dperm in a small, fast configuration.

A runner is a callable ``(X, y, epsilon, delta, rng) -> theta`` that runs the
*real* algorithm code path (``dperm.algorithms.<module>.fit`` or a
``dperm.mechanisms`` primitive) once, plus what the auditor needs to know
about it: its neighbouring relation, the size of the canary datasets, the
row-norm bound and label range it assumes, and the default δ of its claim
(:class:`~dperm.audit.registry.Runner`).

dperm's runners are the rows of :data:`RUNNER_TABLE`, registered when
:mod:`dperm.audit` is imported: per row the mechanism (its module), the default
path it runs, the neighbouring relation, the canary pair (n, d, base rows), the
statistic, the default runs and δ, and the kind (every row is ``"honest"``:
the deliberately broken variants live with the tests that must refute them,
built with :meth:`~dperm.audit.registry.Runner.mutate`).  Where runs differ
only in the algorithm and its settings the runner function is generated
(:class:`~dperm.audit.fits.AlgorithmRun` around a shared call of
:mod:`dperm.audit.fits`); the others are named functions of that module.

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
(see :func:`~dperm.audit.fits._fit_default`); the estimator runner calibrates
on every fit, exactly as a user's call does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..accounting.active import default_delta
from .fits import (
    _AR_SIZE,
    _LABELS,
    _SOFTMAX_K,
    _TUKEY_PUBLIC_ROWS,
    CSV_ROWS,
    CSV_TRAIN_ROWS,
    OUTPUT_MULTI_CANARIES,
    OUTPUT_MULTI_N,
    AlgorithmRun,
    _fit_default,
    _fit_epsilon,
    _fit_huber,
    _fit_huber_l1,
    _fit_linear_regression,
    _fit_logistic,
    _fit_softmax,
    _run_cli_csv,
    _run_discrete_gaussian,
    _run_estimator_auto,
    _run_estimator_auto_multinomial,
    _run_estimator_dp_sgd,
    _run_estimator_output_multinomial,
    _run_gaussian,
    _run_laplace,
    _run_network_dp_sgd,
    _run_private_scaling,
    _run_snapping,
    _run_tukey,
    _run_tukey_unsafe,
    csv_pair,
    mirrored_class_pair,
    scaling_pair,
    ssp_release_statistic,
)
from .mutants import register_mutants
from .objective_llr import BLOCKS, _run_estimator_auto_regression_llr, pushed_pair

# the registry's API stays importable from here (dperm.audit.runners.register_runner, …)
from .registry import *  # noqa: F403
from .registry import __all__ as _REGISTRY_API
from .registry import register_runner, release_statistic
from .whitebox import (
    _BASE_FEATURES,
    CRAFTED_CANARIES,
    ESTIMATOR_CANARIES,
    _run_estimator_auto_multinomial_crafted,
    _run_estimator_auto_multinomial_whitebox,
    _run_estimator_auto_whitebox,
    _run_network_user_loop_whitebox,
    _run_network_whitebox,
    crafted_gradient_pair,
    dirac_pair,
    intercept_orthogonal_pair,
    llr_statistic,
)
from .whitebox_clipping import _run_estimator_auto_clipping, clipping_pair

__all__ = ["RUNNER_TABLE", "ssp_release_statistic", *_REGISTRY_API]


def _algorithm(
    name: str,
    module: str,
    call: Callable,
    *,
    entry: str = "fit",
    options: dict[str, Any] | None = None,
    **columns,
) -> dict[str, Any]:
    """A row whose runner function is generated: ``call(dperm.algorithms.<module>.<entry>,
    X, y, ε, δ, rng, **options)`` (:class:`~dperm.audit.fits.AlgorithmRun`)."""
    path = f"dperm.algorithms.{module}"
    fn = AlgorithmRun(call, path, entry, tuple((options or {}).items()))
    return {"name": name, "fn": fn, "module": path, **columns}


def _denoised_pair(
    name: str, module: str, settings: dict, description: str, raw_note: str, **columns
) -> tuple[dict[str, Any], ...]:
    """The rows ``name-raw`` (the release before the public denoising step,
    ``denoise="none"``; ``description + raw_note``) and ``name`` (the default path,
    denoised) of a structured method with the ℓ1 norm
    (:func:`~dperm.audit.fits._fit_huber_l1`).

    The raw runner is the more powerful target: denoising is post-processing, so
    every test on the denoised release is a test on the raw one, and the
    soft-threshold hides the centre of the score distributions, where the μ-GDP
    estimate gets its power (measured on structured output perturbation: a halved
    sensitivity at ε = 2, 600 runs gives ε_LB 1.70 on the denoised path and > 2 on
    the raw one).  The mutation tests use the raw runner; the honest audit runs both.
    """
    variants = ((f"{name}-raw", "none", raw_note), (name, "hard", ", denoised (default)"))
    return tuple(
        _algorithm(
            row,
            module,
            _fit_huber_l1,
            options={**settings, "denoise": denoise},
            description=description + note,
            **columns,
        )
        for row, denoise, note in variants
    )


# ============================================================ the columns of families
#: the perturbation methods' pair: replace-one, n = 20, one feature (fits.py, Huber SVM)
_ONE_FEATURE = {"neighbouring": "replace-one", "n": 20, "d": 1}
#: a Gaussian-noise release at the default δ: the audit defaults to the μ-GDP method
_GAUSSIAN = {"default_delta": 1e-5, "noise": "gaussian"}
_GAUSSIAN_ONE_FEATURE = {**_ONE_FEATURE, **_GAUSSIAN, "default_runs": 2000}
_GRAD_RUNS = 20_000
#: the gradient methods and the Gaussian mechanism on a sum (two features)
_GAUSSIAN_SUM = {"d": 2, **_GAUSSIAN, "default_runs": _GRAD_RUNS}
#: the noise primitives on a clipped sum: add/remove, n = 20
_PRIMITIVE = {"neighbouring": "add-remove", "n": 20}
#: the estimators' default-path rows (mechanism="auto"): each run calibrates and fits
_ESTIMATOR_DEFAULT_PATH = {
    "module": "dperm.estimators",
    "neighbouring": "replace-one",
    "n": _AR_SIZE,
    "d": 2,
    **_GAUSSIAN,
    "default_runs": 500,
    "statistic": release_statistic,
}
#: the regression default path's pair (dperm.audit.objective_llr): 5 blocks of 11 rows
_REG_N = 75
_LLR_THREAT = (
    "final model (black box): the released θ only, scored by its exact log-likelihood "
    "ratio between D and D′ (the auditor knows both datasets and the noise law)"
)
#: the multinomial output-perturbation default's row: a final model whose scores are
#: exactly Gaussian (fits.mirrored_class_pair: 24 canaries per run)
_OUTPUT_MULTINOMIAL = {
    **_ESTIMATOR_DEFAULT_PATH,
    "n": OUTPUT_MULTI_N,
    "d": OUTPUT_MULTI_CANARIES + 1,
    "statistic": llr_statistic,
    "method": "gdp-fit",
    "pair": mirrored_class_pair,
    "threat_model": _LLR_THREAT,
}
#: the white-box rows (dperm.audit.whitebox): every step's noisy sum, Dirac canaries
_WHITEBOX_THREAT = (
    "white box: every step's noisy clipped sum (the releases the DP-SGD guarantee covers), "
    "Dirac canaries, exact per-run likelihood-ratio test (Nasr et al. 2023)"
)
_WB_N, _WB_K = 800, ESTIMATOR_CANARIES  # n = 800: batch 160, the canaries' margins stay small
_WHITEBOX_ESTIMATOR = {
    "module": "dperm.estimators",
    "neighbouring": "replace-one",
    "n": _WB_N,
    "d": _WB_K + 1,
    **_GAUSSIAN,
    "default_runs": 3000,
    "statistic": llr_statistic,
    "method": "gdp-fit",
    "pair": intercept_orthogonal_pair,
    "threat_model": _WHITEBOX_THREAT,
}
#: the white-box rows of dperm.networks (its fit and a user's loop): n = d = _AR_SIZE,
#: one Dirac canary per coordinate, a linear module whose canary gradient always clips
_WHITEBOX_NETWORK = {
    "module": "torch",
    "neighbouring": "replace-one",
    "n": _AR_SIZE,
    "d": _AR_SIZE,
    **_GAUSSIAN,
    "default_runs": 100,
    "statistic": llr_statistic,
    "method": "gdp-fit",
    "pair": dirac_pair,
    "threat_model": _WHITEBOX_THREAT,
}
_NETWORK_CANARIES = (
    "a linear module and the canary gradient −50·y·x (clipping always binds); "
    f"{_AR_SIZE} Dirac canaries per run"
)
#: the adaptive-clipping row: n = 800 (batch 160: the count is informative from ε ≈ 1)
_CLIP_N = 800
#: the adaptive-clipping row: the count of unclipped examples is observed too
_CLIPPING_THREAT = (
    "white box, one gradient canary: every step's noisy clipped sum and noisy count of "
    "unclipped examples (adaptive clipping's two releases); a likelihood-ratio statistic "
    "(the base rows' count modelled as Gaussian)"
)
#: the crafted-gradient rows: the adversary chooses the canaries' gradients
_CRAFTED_THREAT = (
    "white box, gradient canaries: the adversary chooses the canary rows' per-example "
    "gradients (the DP-SGD guarantee holds for any) and observes every step's noisy "
    "clipped sum; exact per-run likelihood-ratio test (Nasr et al. 2023, §3)"
)
_SSP_N = 50
_SSP = {
    "neighbouring": "replace-one",
    "module": "dperm.algorithms.ssp",
    "n": _SSP_N,
    "d": 2,
    "default_delta": default_delta(_SSP_N, budget_share=False),  # the estimator's default
    "noise": "gaussian",
    "default_runs": 2000,
    "statistic": ssp_release_statistic,
}
#: Tukey: d = 1, base rows 0, canary x = 1, y = ±1 (+ public rows, fits.py)
_TUKEY = {
    "neighbouring": "replace-one",
    "module": "dperm.algorithms.tukey_regression",
    "n": 2,
    "d": 1,
    "default_delta": 1e-5,
    "base": "zeros",
    "default_runs": 1000,
}

# ============================================================ settings
_OBJ_ALPHA = 1.0  # nΛ = 20 ≫ β = 1: Chaudhuri's ε' = ε − ln(1.1025)
_OUT_ALPHA = 0.25  # nΛ = 5: θ̂ = ±1/(nΛ) = ±0.2 stays in the linear part of the loss
#: structured output perturbation: Huber SVM (h = 0.5), Λ = 0.25, λ = 0.1, ℓ1 norm,
#: d = 1, n = 20 (nΛ = 5: θ̂ stays in the linear part of the loss, so the sensitivity
#: is attained)
_SOP = {"alpha": 0.25, "lam": 0.1, "tol": 1e-8}
#: private dual Frank-Wolfe: Huber SVM, Λ = 0.5, λ = 0.1, T = 3, ℓ1 norm
_DFW = {"alpha": 0.5, "lam": 0.1, "n_steps": 3}
_AR_REQUIRES = ("neighbouring", "dataset_size")
_AR = {"neighbouring": "add-remove", "dataset_size": _AR_SIZE}

# fmt: off
#: dperm's audit runners, one row (keywords of :func:`register_runner`) per runner
RUNNER_TABLE: tuple[dict[str, Any], ...] = (
    # ---------------------------------------------------------------- perturbation methods
    _algorithm(
        "objective", "objective_perturbation", _fit_huber,
        options={"alpha": _OBJ_ALPHA, "tol": 1e-9}, **_ONE_FEATURE,
        description=f"objective perturbation, Huber SVM loss, Λ = {_OBJ_ALPHA} (Chaudhuri et "
        "al. 2011 Gamma noise for δ = 0; Kifer et al. 2012 Gaussian noise for δ > 0)",
    ),
    _algorithm(
        "output", "output_perturbation", _fit_huber,
        options={"alpha": _OUT_ALPHA, "tol": 1e-9}, **_ONE_FEATURE,
        description=f"output perturbation, Huber SVM loss, Λ = {_OUT_ALPHA} (Chaudhuri et al. "
        "2011 Gamma noise for δ = 0; analytic Gaussian for δ > 0)",
    ),
    _algorithm(
        "objective-gaussian", "objective_perturbation", _fit_huber,
        options={"alpha": _OBJ_ALPHA, "noise": "gaussian", "tol": 1e-9}, **_GAUSSIAN_ONE_FEATURE,
        description=f"objective perturbation, Huber SVM loss, Λ = {_OBJ_ALPHA}, Gaussian noise "
        "with the default tight calibration (one-sided Jacobian + Gaussian privacy profile)",
    ),
    _algorithm(
        "objective-multinomial", "objective_perturbation", _fit_softmax,
        options={"alpha": _OBJ_ALPHA}, **_GAUSSIAN_ONE_FEATURE,
        description=f"multinomial objective perturbation, softmax loss with k = {_SOFTMAX_K}, "
        f"Λ = {_OBJ_ALPHA}, default tight Gaussian calibration (one model, whole budget)",
    ),
    _algorithm(
        "output-multinomial", "output_perturbation", _fit_softmax,
        options={"alpha": _OUT_ALPHA}, **_GAUSSIAN_ONE_FEATURE,
        description=f"multinomial output perturbation, softmax loss with k = {_SOFTMAX_K}, "
        f"Λ = {_OUT_ALPHA}, analytic Gaussian noise (sensitivity 2√2R/(nΛ))",
    ),
    _algorithm(
        "amp", "amp", _fit_huber, **_ONE_FEATURE, default_delta=1e-5,
        description="Approximate Minima Perturbation (Iyengar et al. 2019, Algorithm 1), Huber "
        "SVM loss, default Λ, γ and budget split",
    ),
    _algorithm(
        "amp-nt", "amp", _fit_huber, entry="fit_nt", **_ONE_FEATURE, default_delta=1e-5,
        description="AMP-NT, the hyperparameter-free AMP (Iyengar et al. 2019, Section V), "
        "Huber SVM loss",
    ),
    _algorithm(
        "bolt-on", "bolt_on", _fit_huber, **_ONE_FEATURE,
        description="bolt-on output perturbation of one pass of permutation SGD (Wu et al. "
        "2017, convex variant), Huber SVM loss",
    ),
    _algorithm(
        "mirror-descent", "mirror_descent", _fit_huber, options={"radius": 2.0, "steps": 20},
        **_GAUSSIAN_ONE_FEATURE,
        description="private entropic mirror descent over the ℓ1 ball (Talwar, Thakurta, "
        "Zhang 2014), Huber SVM, R = 2, T = 20, Gaussian composition calibrated exactly",
    ),
    # ---------------------------------------------------------------- gradient methods
    _algorithm(
        "dp-gd", "dp_gd", functools.partial(_fit_default, "dp-gd"),
        neighbouring="replace-one", n=20, **_GAUSSIAN_SUM,
        description="DP-GD (full batch), hinge loss, default steps and calibration, "
        "replace-one (n public)",
    ),
    _algorithm(
        "dp-gd-add-remove", "dp_gd", functools.partial(_fit_default, "dp-gd"), options=_AR,
        neighbouring="add-remove", n=_AR_SIZE + 1, **_GAUSSIAN_SUM, requires=_AR_REQUIRES,
        description=f"DP-GD under add/remove with the public dataset_size={_AR_SIZE} (|D′| = "
        f"{_AR_SIZE + 1}), hinge loss, default steps and calibration",
    ),
    _algorithm(
        "dp-sgd", "dp_sgd", functools.partial(_fit_default, "dp-sgd"), options=_AR,
        neighbouring="add-remove", n=_AR_SIZE + 1, requires=_AR_REQUIRES,
        # a subsampled Gaussian's trade-off curve is flatter than G_μ near its centre: the
        # threshold chosen on 10 000 runs varied too much (ε_LB 0.45–0.73 at a claim of 1)
        **{**_GAUSSIAN_SUM, "default_runs": 2 * _GRAD_RUNS},
        description=f"DP-SGD, Poisson sampling, add/remove with the public dataset_size="
        f"{_AR_SIZE} (|D′| = {_AR_SIZE + 1}); default batch size, steps and calibration; "
        "hinge loss",
    ),
    _algorithm(
        "dp-sgd-replace-one", "dp_sgd", functools.partial(_fit_default, "dp-sgd"),
        options={"neighbouring": "replace-one"},
        neighbouring="replace-one", n=_AR_SIZE, **_GAUSSIAN_SUM, requires=("neighbouring",),
        description=f"DP-SGD, Poisson sampling, replace-one (n = {_AR_SIZE} public); default "
        "batch size, steps, calibration and accountant; hinge loss",
    ),
    dict(
        name="estimator-dp-sgd", fn=_run_estimator_dp_sgd, module="dperm.estimators",
        neighbouring="replace-one", n=_AR_SIZE, d=2, **_GAUSSIAN,
        default_runs=500,  # every fit calibrates and accounts (≈ 0.1 s)
        statistic=release_statistic,
        description="DPLogisticRegression(mechanism='dp-sgd') with every default (logistic "
        "loss, intercept, batch size, epochs, learning rate, calibration) and the public "
        f"label set classes={list(_LABELS)}; n = {_AR_SIZE}; scores coef_",
    ),
    dict(
        name="estimator-auto", fn=_run_estimator_auto_whitebox, **_WHITEBOX_ESTIMATOR,
        description="DPLogisticRegression() with every default: mechanism='auto' (the public "
        "rule of dperm.estimators._auto; on this binary pair DP-SGD clipped at 0.27·L with "
        "adaptive clipping below it, batch 160, 15 epochs), intercept, calibration; "
        "classes=[-1, 1]; "
        f"n = {_WB_N}, {_WB_K} Dirac canaries per run; scores the LLR of every step's "
        "noisy sum",
    ),
    dict(
        name="private-scaling", fn=_run_private_scaling,
        module="dperm.algorithms.private_scaling", neighbouring="replace-one", n=50, d=2,
        **_GAUSSIAN, default_runs=2000, statistic=llr_statistic, method="gdp-fit",
        pair=scaling_pair,
        threat_model="the scaling's releases 1 and 3 (the noisy row sum, and the noisy sum "
        "of clipped deviations given the centre and radius released before it), scored by "
        "their exact log-likelihood ratio",
        description="private per-column location and scale (feature_scaling='private' of "
        "DP-SGD; dperm.algorithms.private_scaling) with the whole (ε, δ), R = 1, default "
        "stage shares; n = 50: base rows near 0, the canary e₀ against −e₀",
    ),
    dict(
        name="estimator-auto-clipping", fn=_run_estimator_auto_clipping,
        **{
            **_WHITEBOX_ESTIMATOR,
            "n": _CLIP_N,
            "d": 3,
            "default_runs": 1000,
            "pair": clipping_pair,
            "threat_model": _CLIPPING_THREAT,
        },
        description="DPLogisticRegression() with every default (adaptive clipping on this "
        f"pair: the count of unclipped examples is released every step); n = {_CLIP_N}, one "
        "gradient canary per run, never clipped under D and always clipped under D′; "
        "scores the LLR of every step's noisy sum and noisy count "
        "(dperm.audit.whitebox_clipping)",
    ),
    dict(
        name="estimator-auto-multinomial", fn=_run_estimator_auto_multinomial_crafted,
        **{
            **_WHITEBOX_ESTIMATOR,
            "d": _BASE_FEATURES + CRAFTED_CANARIES,
            "default_runs": 100,
            "pair": crafted_gradient_pair,
            "threat_model": _CRAFTED_THREAT,
        },
        description="DPLogisticRegression(classes=[0, 1, 2]) with every other default: "
        "mechanism='auto' (one multinomial DP-SGD model clipped at 0.15·√2·R, the public "
        f"rule of dperm.estimators._auto); n = {_WB_N}, {CRAFTED_CANARIES} gradient canaries "
        "per run (threat model: the adversary chooses their gradients, ±C on a coordinate "
        "of their own; the sampler, clipping, noise and accountant are the fit's); scores "
        "the LLR of every step's noisy sum",
    ),
    dict(
        name="estimator-auto-multinomial-row-canary",
        fn=_run_estimator_auto_multinomial_whitebox,
        **{**_WHITEBOX_ESTIMATOR, "default_runs": 2000},  # a softmax step costs ≈ 2× more
        description="estimator-auto-multinomial's default path with canary *rows* (threat "
        "model: the adversary chooses rows, not gradients; the softmax clipping code runs "
        f"on them): n = {_WB_N}, {_WB_K} Dirac canaries per run, labels 0/1, whose clipped "
        "gradients are 120° apart (not antipodal: ε_LB ≈ 0.6 at ε = 1); scores the LLR of "
        "every step's noisy sum",
    ),
    dict(
        name="estimator-auto-final-model", fn=_run_estimator_auto, **_ESTIMATOR_DEFAULT_PATH,
        description="estimator-auto's default path audited on its final coef_ only (black "
        f"box; classes={list(_LABELS)}; n = {_AR_SIZE}): the weaker threat model, for "
        "comparison",
    ),
    dict(
        name="estimator-auto-multinomial-final-model", fn=_run_estimator_auto_multinomial,
        **_ESTIMATOR_DEFAULT_PATH,
        description="estimator-auto-multinomial's default path audited on its final "
        f"Θ[1] − Θ[0] only (black box; n = {_AR_SIZE}), for comparison",
    ),
    dict(
        name="estimator-output-multinomial", fn=_run_estimator_output_multinomial,
        **_OUTPUT_MULTINOMIAL,
        description="DPLogisticRegression(mechanism='output', classes=[0, 1, 2]) with every "
        "other default (issue #30: rows and the implicit intercept column min(s, 0.1·R) "
        "clipped to f(ε)·R, Λ by the output rule at that bound, analytic Gaussian noise); "
        f"n = {OUTPUT_MULTI_N}: {OUTPUT_MULTI_CANARIES} mirrored canaries (class 0, own "
        "feature flipped between D and D′, a shared feature whose base rows (class 2) make "
        "p ≈ e₂: fits.mirrored_class_pair); scores each canary's coefficients along its "
        "shift (its exact LLR up to an affine map)",
    ),
    dict(
        name="estimator-auto-regression", fn=_run_estimator_auto_regression_llr,
        **{**_ESTIMATOR_DEFAULT_PATH, "n": _REG_N, "d": BLOCKS - 1, "default_runs": 30_000,
           "statistic": llr_statistic},
        method="clopper-pearson", pair=pushed_pair, threat_model=_LLR_THREAT,
        description="DPLinearRegression() with every default: mechanism='auto' (objective "
        "perturbation of the Huber surrogate, h = 0.4·B), B = 1, R = 1, intercept, δ; "
        f"n = {_REG_N}: {BLOCKS} orthogonal blocks of a canary (target −1 / +1) and "
        f"{_REG_N // BLOCKS - 1} pushers (target +1) that put its curvature slab where the "
        "noise term is positive (dperm.audit.objective_llr); scores each canary by the "
        "exact log-likelihood ratio of the released θ; Clopper–Pearson (the LLR is not "
        "Gaussian)",
    ),
    # ---------------------------------------------------------------- a user's file (#36)
    dict(
        name="cli-csv", fn=_run_cli_csv, module="dperm.datasets", neighbouring="replace-one",
        n=CSV_ROWS, d=4, default_delta=default_delta(CSV_TRAIN_ROWS, budget_share=False),
        # the score sums the noisy clipped steps along the canary's standardized row:
        # Gaussian with one variance on both files, so the Gaussian fit reads μ from every
        # run; μ ≈ 0.19 at ε = 1 (the steps' share of μ²), so 12 000 runs per file for a
        # standard error 0.013 (docs/auditing.md, "A user's file")
        noise="gaussian", default_runs=12_000, pair=csv_pair, method="gdp-fit",
        threat_model="final model (black box): the model dperm fit --csv saves, read at the "
        "canary's raw row; the file's split is public (its seed)",
        description="the file is the dataset: two CSV files of "
        f"{CSV_ROWS} rows that differ in one record (its label), each fitted as dperm fit "
        "--csv does — load_csv (the public split, the --classes label rule, the public "
        "schema, the default row scaling) and DPLogisticRegression with every default "
        "(feature_scaling='private', mechanism='auto': the private columns' location and "
        "scale, then clipped DP-SGD on the standardized rows) — the other rows at ±(1, 1) "
        "in one of two blocks of two columns, both labels at each point (a public spread: "
        "the scaling is well determined), the canary at (1, −1, 1, −1), orthogonal to "
        "them; scoring the released model at the canary's raw row",
    ),
    # ---------------------------------------------------------------- networks (#24)
    dict(
        name="network-dp-sgd", fn=_run_network_whitebox, **_WHITEBOX_NETWORK,
        description="dperm.networks.fit (DP-SGD for a torch module) on its default path "
        f"(replace-one, n = {_AR_SIZE}; default lot size, epochs, learning rate, clipping, "
        f"PLD calibration), {_NETWORK_CANARIES}; scores the LLR of every step's noisy sum; "
        "needs torch",
    ),
    dict(
        name="network-user-loop", fn=_run_network_user_loop_whitebox, **_WHITEBOX_NETWORK,
        description="dperm.networks.make_private (DP-SGD in the user's own loop: Adam, the "
        "loss averaged over each lot) on its default path (replace-one, PLD calibration, "
        f"clipping 1; n = {_AR_SIZE}, lots of half the rows, 10 epochs), {_NETWORK_CANARIES}; "
        "scores the LLR of every lot's noisy sum; needs torch",
    ),
    dict(
        name="network-dp-sgd-final-model", fn=_run_network_dp_sgd, module="torch",
        neighbouring="replace-one", n=_AR_SIZE,
        **{**_GAUSSIAN_SUM, "default_runs": 2000},  # ≈ 0.07 s of CPU per run (torch)
        description="network-dp-sgd's default path audited on its final (tail-averaged) "
        "weights only (black box), for comparison; needs torch",
    ),
    # ---------------------------------------------------------------- noise primitives
    dict(
        name="gaussian", fn=_run_gaussian, module="dperm.accounting.gaussian",
        **_PRIMITIVE, **_GAUSSIAN_SUM,
        description="Gaussian mechanism (analytic calibration, Balle & Wang 2018) on the sum "
        "of ℓ2-clipped, label-signed rows",
    ),
    dict(
        name="laplace", fn=_run_laplace, **_PRIMITIVE, d=2,
        description="Laplace mechanism on the sum of ℓ1-clipped, label-signed rows",
    ),
    dict(
        name="snapping", fn=_run_snapping, **_PRIMITIVE, d=1,
        description="snapping mechanism (Mironov 2012) on a clipped scalar sum",
    ),
    dict(
        name="discrete-gaussian", fn=_run_discrete_gaussian, **_PRIMITIVE, d=2,
        default_delta=1e-5,
        description="discrete Gaussian mechanism (Canonne, Kamath, Steinke 2020) on a clipped "
        "sum, released on a power-of-two grid",
    ),
    # ---------------------------------------------------------------- textbook systems (#11)
    _algorithm(
        "exponential-sampling", "exponential_sampling", _fit_logistic,
        options={"radius": 5.0}, **_ONE_FEATURE,
        description="exponential mechanism over the ℓ2 ball of radius 5 (exact sampler, "
        "d = 1), logistic loss, Δ = min(loss range, 2LR)",
    ),
    _algorithm(
        "zero-one-net", "zero_one_net", _fit_epsilon, entry="private_linear_classifier",
        neighbouring="replace-one", n=20, d=2,
        description="0-1 loss over the default 64-direction net of the circle (exponential "
        "mechanism, Δ = 1)",
    ),
    _algorithm(
        "nonconvex-objective", "nonconvex_objective_perturbation", _fit_epsilon,
        entry="fit_zero_one_grid", **_ONE_FEATURE,
        description="objective perturbation over the 3-bit integer grid with the MILP oracle "
        "(Neel, Roth, Vietri, Wu 2020), 0-1 loss, binary encoding",
    ),
    # ---------------------------------------------------------------- sufficient statistics
    dict(
        name="adassp", fn=functools.partial(_fit_linear_regression, "adassp"), **_SSP,
        description="DPLinearRegression(mechanism='adassp') — AdaSSP (Wang 2018, Alg. 2) — "
        f"every other default (R = 1, B = 1, intercept, δ = min(1/n², 10⁻⁵)), n = {_SSP_N}, d = 2; "
        "scores the released Xᵀy along the canary row (one of three composed Gaussian "
        "releases)",
    ),
    dict(
        name="ssp", fn=functools.partial(_fit_linear_regression, "ssp"), **_SSP,
        description="DPLinearRegression(mechanism='ssp') — sufficient-statistics perturbation "
        f"— every other default, n = {_SSP_N}, d = 2; scores the released Xᵀy along the "
        "canary row (one of two composed Gaussian releases)",
    ),
    # ---------------------------------------------------------------- structured sparsity
    *_denoised_pair(
        "structured-output", "structured_output_perturbation", _SOP, **_GAUSSIAN_ONE_FEATURE,
        description="structured output perturbation (K–D Thm 1 + (Λ/2)‖θ‖²), Huber SVM, "
        f"ℓ1 norm, Λ = {_SOP['alpha']}, λ = {_SOP['lam']}, analytic Gaussian noise",
        raw_note=", release before denoising",
    ),
    *_denoised_pair(
        "dual-frank-wolfe", "dual_frank_wolfe", _DFW,
        neighbouring="replace-one", n=30, d=3, default_runs=300,
        description="private dual Frank-Wolfe (K–D Algorithm 2), Huber SVM, ℓ1 norm, "
        f"Λ = {_DFW['alpha']}, λ = {_DFW['lam']}, T = {_DFW['n_steps']}",
        raw_note=", before denoising",
    ),
    *_denoised_pair(
        "dual-frank-wolfe-laplace", "dual_frank_wolfe", {**_DFW, "selection": "laplace"},
        neighbouring="replace-one", n=30, d=3, default_runs=300,
        description="private dual Frank-Wolfe with the published Laplace report-noisy-max "
        f"selection (K–D Algorithm 2), Huber SVM, ℓ1 norm, Λ = {_DFW['alpha']}, "
        f"λ = {_DFW['lam']}, T = {_DFW['n_steps']}",
        raw_note=", before denoising",
    ),
    # ---------------------------------------------------------------- Tukey-depth regression
    # "tukey": the default fit path (m = n/2 models of 2 rows, the public restriction
    # depth, the test, the sample) on the canary pair plus 798 public rows (x = 1,
    # y = 0.2·Φ⁻¹(quantile)): the canary's model sits below every other model on D and
    # above every other on D′, so every depth moves by one.  δ = 1e-5 by default; the
    # test passes with probability ≈ 1 there.  A smoke test of the default path,
    # **without statistical power**: the random partition pairs the public rows at
    # random, so the models' median moves from run to run by ~6× the one-model gap the
    # canary shifts the depths by, and the released θ barely depends on the canary
    # (measured at ε = 1, 1000 runs: ε_LB 0.00 honest, 0.01 with the exponential
    # mechanism's factor c doubled, 0.08 with it ×4).  No pair does better on this path:
    # public blocks whose models do not depend on the partition all have the same model,
    # and the ties make the data unsafe (⊥).  The calibration is checked by the unit
    # tests (tests/test_tukey_regression.py: the constants against their closed forms,
    # the law of the release, the test against its Laplace tail).
    dict(
        name="tukey", fn=_run_tukey, **_TUKEY,
        description="Tukey-depth regression (Amin et al. 2023, Alg. 1), default fit path, "
        f"canary + {_TUKEY_PUBLIC_ROWS} public rows",
    ),
    # "tukey-unsafe": one row per model on an *unsafe* pair (fits._tukey_unsafe_public_rows):
    # the honest release is ⊥ except with probability < δ, and a missing or weakened test
    # is caught with certainty (tests/test_audit_suite.py).
    dict(
        name="tukey-unsafe", fn=_run_tukey_unsafe, **_TUKEY,
        description="Tukey-depth regression, one row per model, on an unsafe pair (the "
        "depth regions of D and D′ are disjoint): the propose-test-release check alone "
        "keeps it private",
    ),
)
# fmt: on

for _row in RUNNER_TABLE:
    register_runner(**_row)
del _row

# the mutants: the rows above with one likely bug injected (dperm.audit.mutants)
register_mutants()
