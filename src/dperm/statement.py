"""The plain-language privacy statement of a fitted model, from its event and public parameters.

In the spirit of TF Privacy's ``compute_dp_sgd_privacy_statement``: what is protected (one
record, under which neighbouring relation), ε and δ, the mechanism and the theorem or
accountant that certifies them, the public bounds the guarantee assumes, and what the
guarantee does *not* cover.

The floor below :mod:`dperm.algorithms`.  A fitted model is read by duck typing
(``get_params``, ``dp_event_``, ``epsilon_``, ``delta_``, ``coef_``, ``classes_``,
``run_dp_event_``, ``privacy_caveats_``), so the estimators'
``privacy_statement()`` and :mod:`dperm.io` share this one text without importing each
other: :func:`dperm.io.privacy_statement` adds the allow-list of saveable classes and
pipelines, and writes the statement into every model file.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._version import __version__
from .accounting.events import (
    ADD_REMOVE,
    REPLACE_ONE,
    DpEvent,
    EpsilonDelta,
    Laplace,
    NonPrivate,
    NoOp,
    PureEpsilon,
)
from .exceptions import ModelFileError

__all__ = [
    "ACCOUNTANT_TEXTS",
    "ACCOUNTED",
    "BOUND_PARAMS",
    "MECHANISM_TEXTS",
    "ModelFileError",
    "caveats",
    "estimator_statement",
    "json_value",
    "pipeline_statement",
    "public_bounds",
    "relation_text",
]


#: parameters that are public bounds or public choices the guarantee relies on
BOUND_PARAMS = (
    "data_norm",
    "intercept_scaling",
    "label_bound",
    "constraint",
    "constraint_radius",
    "clipping_norm",
    "h",
    "classes",
)

#: the mechanism texts of the statement
MECHANISM_TEXTS = {
    # name: (description for δ = 0, description for δ > 0)
    "objective": (
        "objective perturbation with Gamma-norm noise (Chaudhuri, Monteleoni, Sarwate 2011, "
        "Alg. 2 / Thm 9)",
        "objective perturbation with Gaussian noise (Kifer, Smith, Thakurta 2012, Alg. 1 / Thm 2)",
    ),
    "output": (
        "output perturbation with Gamma-norm noise (Chaudhuri, Monteleoni, Sarwate 2011, "
        "Alg. 1 / Thm 6)",
        "output perturbation with analytic Gaussian noise (Chaudhuri et al. 2011, Alg. 1; "
        "Balle & Wang 2018, Thm 8)",
    ),
    "amp": (None, "Approximate Minima Perturbation (Iyengar et al., IEEE S&P 2019, Alg. 1)"),
    "amp-nt": (
        None,
        "hyperparameter-free Approximate Minima Perturbation (Iyengar et al. 2019)",
    ),
    "bolt-on": (
        "bolt-on output perturbation of permutation SGD (Wu et al., SIGMOD 2017)",
        "bolt-on output perturbation of permutation SGD (Wu et al., SIGMOD 2017)",
    ),
    "dp-gd": (None, "full-batch noisy gradient descent (Bassily, Smith, Thakurta 2014)"),
    "dp-sgd": (None, "DP-SGD with per-example clipping (Abadi et al. 2016, Alg. 1)"),
    "dp-sgd-single": (
        None,
        "single-sample noisy SGD (Bassily, Smith, Thakurta 2014, Alg. 1)",
    ),
    "frank-wolfe": (None, "private Frank-Wolfe (Talwar, Thakurta, Zhang 2015)"),
    "dp-gd-avg": (
        None,
        "noisy projected (sub)gradient descent, averaged iterate (Bassily, Smith, Thakurta 2014)",
    ),
    "adassp": (
        None,
        "AdaSSP, sufficient-statistics perturbation with an adaptive ridge (Wang 2018, "
        "'Revisiting differentially private linear regression', Alg. 2; analytic Gaussian "
        "calibration, Balle & Wang 2018)",
    ),
    "ssp": (
        None,
        "SSP, sufficient-statistics perturbation (Wang 2018, the baseline of Alg. 2; "
        "analytic Gaussian calibration, Balle & Wang 2018)",
    ),
    "tukey": (
        None,
        "Tukey-depth regression: propose-test-release on the approximate Tukey depth of "
        "least-squares models fitted on disjoint blocks, then a restricted exponential "
        "mechanism (Amin, Joseph, Ribero, Vassilvitskii, ICLR 2023, Alg. 1; replace-one "
        "proof in dperm.algorithms.tukey_regression)",
    ),
    "structured-output": (
        "output perturbation with a structured norm (Kumar & Deisenroth 2019, Thm 1; "
        "Chaudhuri et al. 2011, Thm 6)",
        "output perturbation with a structured norm (Kumar & Deisenroth 2019, Thm 1; "
        "Gaussian calibration)",
    ),
    "dual-frank-wolfe": (
        "private Frank-Wolfe on the dual (Kumar & Deisenroth 2019, Alg. 2)",
        "private Frank-Wolfe on the dual (Kumar & Deisenroth 2019, Alg. 2)",
    ),
}

#: mechanisms whose ε comes from an accountant (parameter ``accountant``), with its default
ACCOUNTED = {
    "dp-gd": "pld",
    "dp-gd-avg": "rdp",
    "dp-sgd": "pld",
    "dp-sgd-single": "rdp",
    "frank-wolfe": "optimal",
}
ACCOUNTANT_TEXTS = {
    "rdp": "the Rényi-DP accountant (Mironov 2017; Mironov, Talwar, Zhang 2019 for the "
    "sampled Gaussian)",
    "pld": "the privacy-loss-distribution accountant (Koskela et al. 2020; via dp-accounting)",
    "advanced": "advanced composition (Dwork, Rothblum, Vadhan 2010; Kairouz, Oh, Viswanath 2015)",
    "optimal": "optimal composition (Kairouz, Oh, Viswanath 2015, Thm 3.3)",
    "basic": "basic composition (Dwork & Roth 2014, Thm 3.16)",
}


def json_value(value: Any, name: str) -> Any:
    """``value`` as plain JSON data, or ModelFileError naming ``name``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if not math.isfinite(v):
            raise ModelFileError(f"{name} must be finite to be saved, got {value!r}")
        return v
    if isinstance(value, list | tuple | np.ndarray):
        return [json_value(v, f"{name}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: json_value(v, f"{name}[{k!r}]") for k, v in value.items()}
    raise ModelFileError(
        f"{name} = {value!r} ({type(value).__name__}) is not plain data and cannot be saved "
        "safely; pass it by name (e.g. constraint='l2', accountant='rdp')"
    )


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def relation_text(relation: str) -> str:
    """The neighbouring relation in words (docs/neighbouring.md)."""
    if relation == ADD_REMOVE:
        return (
            "add/remove-one: two training sets that differ by adding or removing one record "
            "(the number of records may itself be private)"
        )
    return (
        "replace-one: two training sets of the same size n that differ in one record, "
        "replaced by any other record (n is treated as public)"
    )


def public_bounds(model) -> dict[str, Any]:
    """The public bounds and choices of :data:`BOUND_PARAMS` the guarantee assumes (as
    plain JSON values, else their repr), and the effective row bound ``data_norm_``."""
    params = model.get_params(deep=False)
    out = {}
    for key in BOUND_PARAMS:
        if key not in params or params[key] is None:
            continue
        if key == "intercept_scaling" and not params.get("fit_intercept", False):
            continue
        try:
            out[key] = json_value(params[key], key)
        except ModelFileError:
            out[key] = repr(params[key])
    if hasattr(model, "data_norm_"):
        out["effective_row_bound"] = float(model.data_norm_)
    return out


def n_problems(model) -> int:
    """How many one-vs-rest problems shared the budget (1 unless one-vs-rest, k > 2)."""
    classes = getattr(model, "classes_", None)
    coef = np.atleast_2d(model.coef_)
    if classes is None or len(classes) <= 2 or getattr(model, "multi_class", "ovr") != "ovr":
        return 1
    return coef.shape[0]


def caveats(model) -> list[str]:
    """``model.privacy_caveats_``: sentences a caller attaches to the statement (e.g. the
    CLI when bounds were read from the data); saved with the model."""
    found = getattr(model, "privacy_caveats_", ())
    if isinstance(found, str) or not all(isinstance(c, str) for c in found):
        raise ModelFileError(f"privacy_caveats_ must be a sequence of str, got {found!r}")
    return list(found)


def is_pure(event: DpEvent) -> bool:
    """Whether ``event`` is pure ε-DP (no δ): Laplace, PureEpsilon, EpsilonDelta(ε, 0),
    and compositions of those."""
    inner = getattr(event, "events", None)
    if inner is not None:
        return all(is_pure(e) for e in inner)
    if hasattr(event, "event"):
        return is_pure(event.event)
    if isinstance(event, EpsilonDelta):
        return event.delta == 0.0
    return isinstance(event, PureEpsilon | Laplace | NoOp)


def _scaling_text(model) -> str:
    """The private feature scaling before the mechanism (issue #36: DP-SGD with the
    estimator's public ``feature_scaling="private"``, so that a saved model says the
    same), or ""."""
    scaled = getattr(model, "feature_scaling", "public") == "private"
    if not (scaled and getattr(model, "mechanism_", None) == "dp-sgd"):
        return ""
    return (
        "The columns' location and scale found privately (three Gaussian releases within "
        "the public row bound, dperm.algorithms.private_scaling; the first part of the "
        "privacy event below), then "
    )


def estimator_statement(model) -> str:
    """A plain-language statement of what a fitted dperm estimator guarantees.

    What is protected (one record, under which neighbouring relation), ε and δ, the
    mechanism and the theorem or accountant that certifies them, the public bounds the
    guarantee assumes, and what the guarantee does *not* cover.

    Parameters
    ----------
    model : fitted dperm estimator
        E.g. :class:`~dperm.estimators.DPLogisticRegression` (read by duck typing:
        ``get_params``, ``dp_event_``, ``epsilon_``, ``delta_``, ``coef_``, …).

    Returns
    -------
    str
        Several paragraphs of text (deterministic: the same model gives the
        same statement, also after :func:`dperm.io.save` / :func:`dperm.io.load`).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If it is not fitted.
    ModelFileError
        If ``model.privacy_caveats_`` is not a sequence of str.
    """
    check_is_fitted(model, "coef_")
    params = model.get_params(deep=False)
    event: DpEvent = model.dp_event_
    relation = getattr(event, "neighbouring", REPLACE_ONE)
    eps, delta = float(model.epsilon_), float(model.delta_)
    mech = getattr(model, "mechanism_", None) or params.get("mechanism")  # "auto" → its choice
    pure = delta == 0.0
    run_event = getattr(model, "run_dp_event_", None)
    mech_event = run_event if isinstance(run_event, DpEvent) else event
    pair = MECHANISM_TEXTS.get(mech, (None, None))
    desc = pair[0 if is_pure(mech_event) else 1] or pair[1]  # one text if noise-agnostic
    if desc is None:
        desc = f"the registered mechanism {mech!r} (see its module docstring for the theorem)"
    desc = _scaling_text(model) + desc
    k = n_problems(model)
    name = type(model).__name__

    guarantee = "ε-differentially private" if pure else "(ε, δ)-differentially private"
    lines = [f"Privacy statement for {name} (dperm {__version__})", ""]
    for caveat in caveats(model):  # set by the caller: what voids or weakens the guarantee
        lines += [f"WARNING. {caveat}.", ""]
    lines += [
        f"Guarantee. The released parameters (coef_, intercept_) are {guarantee} with "
        f"ε = {_fmt(eps)}" + ("" if pure else f" and δ = {_fmt(delta)}") + ", protecting "
        f"one training record under the neighbouring relation {relation_text(relation)}. "
        "Predictions and anything else computed from the released parameters alone inherit "
        "the guarantee (post-processing)."
        + (
            " δ is the default min(1/n², 10⁻⁵) for n training rows, or a share of an "
            "active budget's remaining δ if smaller."
            if "delta" in params and params["delta"] is None and not pure
            else ""
        ),
        "",
        f"Mechanism. {desc}.",
    ]
    n_fits = int(getattr(model, "n_fits_", 1))  # > 1 after warm starts
    if mech in ACCOUNTED:
        acc = params.get("accountant") or ACCOUNTED[mech]
        acc_text = ACCOUNTANT_TEXTS.get(acc, f"the {acc!r} accountant")
        how = f"ε was computed at δ = {_fmt(delta)} by {acc_text}"
        if n_fits > 1:
            how = f"the ε of each fit was computed at its δ by {acc_text}"
    else:
        how = "ε and δ are those of the mechanism's theorem (no numerical accountant)"
    if k > 1:
        how += (
            f"; the budget was split evenly over {k} one-vs-rest problems "
            "(basic composition, Dwork & Roth 2014, Thm 3.16)"
        )
    if n_fits > 1:  # warm_start=True: the model depends on every fit of the chain
        how += (
            f"; the model was warm-started from released models and depends on {n_fits} "
            "fits on the data: its ε and δ are the sums of theirs (basic composition, "
            "Dwork & Roth 2014, Thm 3.16) and its event composes them"
        )
    if isinstance(run_event, DpEvent):  # chosen by dperm.model_selection's private search
        how = (
            "the model was selected by a private hyperparameter search "
            "(dperm.model_selection; Papernot & Steinke 2022, Liu & Talwar 2019): ε and δ "
            "cover every training run, the noisy validation scores and the selection; the "
            f"selected run alone spent {run_event.to_json()}"
        )
    lines += [
        "",
        f"Accounting. {how}. Privacy event (for a dperm Ledger): {event.to_json()}",
    ]
    bounds = public_bounds(model)
    if bounds:
        items = ", ".join(f"{k_} = {v}" for k_, v in bounds.items())
        lines += [
            "",
            "Public bounds assumed (inputs, never read from the data; rows above data_norm "
            f"were clipped to it before training): {items}.",
        ]
    if getattr(model, "classes_", None) is not None and params.get("classes") is not None:
        lines += [
            "",
            "Labels. The label set classes_ is the public classes= given to the fit, not a "
            "statistic of the training data; a training label outside it was refused (the "
            "fit does not drop or remap it).",
        ]
    not_covered = []
    if getattr(model, "classes_", None) is not None and params.get("classes") is None:
        not_covered.append(
            "the label set classes_ was read from the training labels (no public classes= "
            "was given): which labels occur in the data is not protected"
        )
    not_covered += [
        "n_clipped_, diagnostics_ and n_iter_ describe the training data and are not "
        "privatized (dperm.save does not write them)",
        "hyperparameter tuning or model selection done outside this fit: every fit on the "
        "same data spends its own budget (composition; record each in a dperm Ledger)",
        "preprocessing fitted on the same data (e.g. a StandardScaler in a Pipeline) unless "
        "it is private and accounted (dperm.preprocessing.pipeline_dp_event)",
        "the floating-point implementation: the noise is drawn with numpy's floating-point "
        "samplers, and the guarantee is that of the ideal real-valued mechanism (Mironov 2012)",
        "a known random seed: whoever knows random_state can recompute the noise (saved "
        "files never contain it)",
    ]
    lines += ["", "Not covered:"] + [f"- {item}." for item in not_covered]
    return "\n".join(lines) + "\n"


def pipeline_statement(
    pipe, event: DpEvent, epsilon: float, delta: float, final_statement: Callable[[Any], str]
) -> str:
    """The statement of a fitted Pipeline of :mod:`dperm.preprocessing` steps ending in a
    dperm estimator.

    Parameters
    ----------
    pipe : sklearn.pipeline.Pipeline (fitted)
    event : DpEvent
        The composition of the steps' events
        (:func:`~dperm.preprocessing.pipeline_dp_event`).
    epsilon, delta : float
        The composed guarantee: δ the sum of the steps' δ, ε the "auto" accountant's
        bound at that δ.
    final_statement : callable
        The statement of the final estimator (:func:`dperm.io.privacy_statement`, which
        checks it against the allow-list); called last.

    Returns
    -------
    str
        The composed (ε, δ), what each step spends, then the final estimator's statement.
    """
    relation = getattr(event, "neighbouring", REPLACE_ONE)
    final = pipe.steps[-1][1]
    lines = [
        f"Privacy statement for a Pipeline of {len(pipe.steps)} steps (dperm {__version__})",
        "",
        (
            "Guarantee. Everything the fitted pipeline releases (the private steps' statistics "
            "and the final model, hence its predictions) is (ε, δ)-differentially private with "
            f"ε = {_fmt(epsilon)} and δ = {_fmt(delta)} together, protecting one training "
            f"record under the neighbouring relation {relation_text(relation)}: the "
            "composition of the steps' events, certified by the smallest valid bound of "
            "dperm's accountants (the 'auto' accountant)."
        )
        if math.isfinite(epsilon)
        else (
            "Guarantee: NONE. A step below read the training data without privacy, so the "
            "fitted pipeline is not differentially private (ε = ∞), whatever the final "
            "model's own statement says."
        ),
        "",
        "Steps:",
    ]
    for name, step in pipe.steps[:-1]:
        if step is None or (isinstance(step, str) and step == "passthrough"):
            lines.append(f"- {name}: passthrough (spends nothing).")
            continue
        ev = step.dp_event_
        if isinstance(ev, NoOp):
            what = "a public per-record map (public parameters only): spends nothing"
        elif isinstance(ev, NonPrivate):
            what = (
                "read from the training data WITHOUT privacy (e.g. bounds or category lists "
                "taken from the data): ε = ∞, so the pipeline has NO guarantee"
            )
        else:
            what = (
                f"private statistics with ε = {_fmt(float(step.epsilon_))}, "
                f"δ = {_fmt(float(step.delta_))}; event {ev.to_json()}"
            )
        lines.append(f"- {name} ({type(step).__name__}): {what}.")
    lines += [
        f"- {pipe.steps[-1][0]} ({type(final).__name__}): see its statement below.",
        "",
        f"Composed privacy event (for a dperm Ledger): {event.to_json()}",
        "",
        "The final estimator's own statement (its guarantee covers its input, the output "
        "of the steps above):",
        "",
        final_statement(final),
    ]
    return "\n".join(lines)
