"""Save and load fitted dperm estimators with their privacy metadata — never pickle.

File format (``format_version`` 2; version-1 files still load).  One zip archive, by
convention with the suffix ``.dperm`` (any name is accepted, e.g. ``.skops``: the content
is dperm's format, not skops'), holding

* ``dperm.json`` — metadata: the estimator class name, its parameters (JSON
  values only), the fitted scalars, the privacy event
  (:meth:`~dperm.accounting.events.DpEvent.to_dict`), ε, δ, the
  neighbouring relation, the mechanism and accountant, the public bounds the
  guarantee assumes, and the dperm version that wrote it;
* ``privacy_statement.txt`` — :func:`privacy_statement` of the model, in plain
  language;
* ``<name>.npy`` — one numpy array per fitted array (``coef_``,
  ``intercept_``, ``classes_``, …), in numpy's ``.npy`` format without
  object dtype, so the archive is also a valid ``.npz`` that
  ``numpy.load(path, allow_pickle=False)`` opens.

A **Pipeline** (``kind: "pipeline"``) of :mod:`dperm.preprocessing` steps ending in a
dperm estimator stores one record per step (class, parameters, allow-listed fitted
arrays as ``step<i>__<name>.npy``, the step's event) and the composed privacy event of
the whole pipeline.  A ``penalty=`` norm of :mod:`dperm.norms` (``L1Norm``,
``LinfNorm``, ``GroupLinfNorm``, ``ChainTVNorm``) is written as plain data
(``{"__dperm_norm__": class, "d": …, "alpha": …, "groups"/"mu": …}``) and rebuilt from
the same allow-list.

Loading executes no code from the file: the class is looked up in an
allow-list (the estimator classes exported by :mod:`dperm.estimators`, the
transformers of :mod:`dperm.preprocessing`, the norms above), the
parameters go through ``set_params`` and every array is read with
``allow_pickle=False``.  Anything else is refused with
:class:`ModelFileError`.

What is *not* saved.  The ``random_state`` (whoever knows the seed of the
noise can subtract it: the file never contains it), and every fitted
attribute outside an allow-list (``_SAVED_ATTRIBUTES``: coefficients, classes,
feature names, the public Λ and row bound, ε, δ, the relation) — in particular
the data-dependent diagnostics that are not privatized (``n_clipped_``,
``diagnostics_``, ``n_iter_``); the metadata lists what was left out under
``not_saved``.  ``classes_`` is saved because ``predict`` needs it; when it
was read off the training labels the statement says so.
"""

from __future__ import annotations

import io as _io
import json
import math
import numbers
import os
import uuid
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .accounting.events import (
    ADD_REMOVE,
    REPLACE_ONE,
    DpEvent,
    EpsilonDelta,
    Laplace,
    NoOp,
    PureEpsilon,
    event_from_dict,
)
from .exceptions import DpermError, InvalidDataError

__all__ = [
    "FORMAT_VERSION",
    "ModelFileError",
    "load",
    "privacy_statement",
    "read_metadata",
    "save",
]

#: version of the file layout written by :func:`save` (2: pipelines and norm penalties;
#: version-1 files, a single estimator, still load)
FORMAT_VERSION = 2
_FORMAT_NAME = "dperm-model"
_META = "dperm.json"
_STATEMENT = "privacy_statement.txt"
#: key of a serialized dperm.norms norm in a parameter
_NORM_KEY = "__dperm_norm__"

#: the fitted attributes a file carries (an allow-list: a new data-dependent
#: diagnostic is never written by accident); the events and caveats go to "privacy"
_SAVED_ATTRIBUTES = (
    "coef_",
    "intercept_",
    "classes_",
    "n_features_in_",
    "feature_names_in_",
    "alpha_",
    "l2_",
    "data_norm_",
    "epsilon_",
    "delta_",
    "neighbouring_",
)
#: the fitted attributes saved per dperm.preprocessing transformer (n_clipped_ and
#: n_unknown_ describe the data and are never written)
_TRANSFORMER_ATTRIBUTES = {
    "PublicMinMaxScaler": (
        "lower_",
        "upper_",
        "scale_",
        "min_",
        "n_features_in_",
        "feature_names_in_",
    ),
    "RowNormalizer": ("n_features_in_", "feature_names_in_"),
    "PublicOneHotEncoder": ("categories_", "n_features_in_", "feature_names_in_"),
    "DPStandardScaler": (
        "mean_",
        "var_",
        "scale_",
        "lower_",
        "upper_",
        "row_norm_bound_",
        "epsilon_",
        "delta_",
        "n_features_in_",
        "feature_names_in_",
    ),
}
#: fitted objects rebuilt on load from the (public) parameters
_REBUILT = ("loss_", "regularizer_", "constraint_")
_PRIVACY_ATTRIBUTES = ("dp_event_", "run_dp_event_", "privacy_caveats_")
#: parameters never written to a file
_NEVER_SAVED_PARAMS = ("random_state",)
#: parameters that are public bounds or public choices the guarantee relies on
_BOUND_PARAMS = (
    "data_norm",
    "intercept_scaling",
    "label_bound",
    "constraint",
    "constraint_radius",
    "clipping_norm",
    "h",
    "classes",
)

_MECHANISMS = {
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
_ACCOUNTED = {
    "dp-gd": "pld",
    "dp-gd-avg": "rdp",
    "dp-sgd": "pld",
    "dp-sgd-single": "rdp",
    "frank-wolfe": "optimal",
}
_ACCOUNTANTS = {
    "rdp": "the Rényi-DP accountant (Mironov 2017; Mironov, Talwar, Zhang 2019 for the "
    "sampled Gaussian)",
    "pld": "the privacy-loss-distribution accountant (Koskela et al. 2020; via dp-accounting)",
    "advanced": "advanced composition (Dwork, Rothblum, Vadhan 2010; Kairouz, Oh, Viswanath 2015)",
    "optimal": "optimal composition (Kairouz, Oh, Viswanath 2015, Thm 3.3)",
    "basic": "basic composition (Dwork & Roth 2014, Thm 3.16)",
}


class ModelFileError(InvalidDataError):
    """A model file (or a model to save) that dperm refuses: not a dperm model
    archive, a newer format, a class outside the allow-list, a parameter or an
    array that is not plain data (e.g. a pickled object)."""


# ----------------------------------------------------------------------------- helpers
def _allowed_classes() -> dict[str, type]:
    """The allow-list: estimator classes exported by :mod:`dperm.estimators`."""
    from . import estimators
    from .estimators._base import DPLinearModelBase

    out = {}
    for name in getattr(estimators, "__all__", ()):
        obj = getattr(estimators, name, None)
        if isinstance(obj, type) and issubclass(obj, DPLinearModelBase):
            out[name] = obj
    return out


def _allowed_transformers() -> dict[str, type]:
    """The allow-list of pipeline steps: the :mod:`dperm.preprocessing` transformers."""
    from . import preprocessing

    return {name: getattr(preprocessing, name) for name in _TRANSFORMER_ATTRIBUTES}


def _pipeline_privacy(pipe) -> tuple[DpEvent, float, float]:
    """(composed event, ε, δ) of a fitted pipeline: the steps' events composed
    (:func:`~dperm.preprocessing.pipeline_dp_event`), δ the sum of the steps' δ, ε the
    smallest valid bound at that δ (the "auto" accountant)."""
    from .accounting.registry import epsilon_spent
    from .preprocessing import pipeline_dp_event

    event = pipeline_dp_event(pipe)
    delta = 0.0
    for _, step in pipe.steps:
        delta += float(getattr(step, "delta_", 0.0) or 0.0)
    delta = min(delta, 1.0 - 1e-12)
    return event, float(epsilon_spent(event, delta, "auto")), delta


def _pipeline_statement(pipe) -> str:
    from ._version import __version__

    event, eps, delta = _pipeline_privacy(pipe)
    relation = getattr(event, "neighbouring", REPLACE_ONE)
    final = pipe.steps[-1][1]
    lines = [
        f"Privacy statement for a Pipeline of {len(pipe.steps)} steps (dperm {__version__})",
        "",
        "Guarantee. Everything the fitted pipeline releases (the private steps' statistics "
        "and the final model, hence its predictions) is (ε, δ)-differentially private with "
        f"ε = {_fmt(eps)} and δ = {_fmt(delta)} together, protecting one training record "
        f"under the neighbouring relation {_relation_text(relation)}: the composition of "
        "the steps' events, certified by the smallest valid bound of dperm's accountants "
        "(the 'auto' accountant).",
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
        privacy_statement(final),
    ]
    return "\n".join(lines)


def _json_value(value: Any, name: str) -> Any:
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
        return [_json_value(v, f"{name}[{i}]") for i, v in enumerate(value)]
    raise ModelFileError(
        f"{name} = {value!r} ({type(value).__name__}) is not plain data and cannot be saved "
        "safely; pass it by name (e.g. constraint='l2', accountant='rdp')"
    )


def _array_for_file(value: np.ndarray, name: str) -> tuple[np.ndarray, bool]:
    """(array without object dtype, whether it was an object array of str)."""
    if value.dtype != object:
        return value, False
    if all(isinstance(v, str) for v in value.ravel()):
        return value.astype(str), True
    raise ModelFileError(
        f"fitted attribute {name} holds Python objects ({value.dtype}) and cannot be saved "
        "without pickle; use numeric or string labels"
    )


def _fitted_model(model: Any) -> None:
    allowed = _allowed_classes()
    if allowed.get(type(model).__name__) is not type(model):
        raise ModelFileError(
            f"only dperm estimators can be saved ({sorted(allowed)}), got "
            f"{type(model).__name__} (for a private search, save search.best_estimator_)"
        )
    check_is_fitted(model, "coef_")


# ----------------------------------------------------------------------------- statement
def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _relation_text(relation: str) -> str:
    if relation == ADD_REMOVE:
        return (
            "add/remove-one: two training sets that differ by adding or removing one record "
            "(the number of records may itself be private)"
        )
    return (
        "replace-one: two training sets of the same size n that differ in one record, "
        "replaced by any other record (n is treated as public)"
    )


def _public_bounds(model) -> dict[str, Any]:
    params = model.get_params(deep=False)
    out = {}
    for key in _BOUND_PARAMS:
        if key not in params or params[key] is None:
            continue
        if key == "intercept_scaling" and not params.get("fit_intercept", False):
            continue
        try:
            out[key] = _json_value(params[key], key)
        except ModelFileError:
            out[key] = repr(params[key])
    if hasattr(model, "data_norm_"):
        out["effective_row_bound"] = float(model.data_norm_)
    return out


def _n_problems(model) -> int:
    classes = getattr(model, "classes_", None)
    coef = np.atleast_2d(model.coef_)
    if classes is None or len(classes) <= 2 or getattr(model, "multi_class", "ovr") != "ovr":
        return 1
    return coef.shape[0]


def _caveats(model) -> list[str]:
    """``model.privacy_caveats_``: sentences a caller attaches to the statement (e.g. the
    CLI when bounds were read from the data); saved with the model."""
    caveats = getattr(model, "privacy_caveats_", ())
    if isinstance(caveats, str) or not all(isinstance(c, str) for c in caveats):
        raise ModelFileError(f"privacy_caveats_ must be a sequence of str, got {caveats!r}")
    return list(caveats)


def _is_pure(event: DpEvent) -> bool:
    """Whether ``event`` is pure ε-DP (no δ): Laplace, PureEpsilon, EpsilonDelta(ε, 0),
    and compositions of those."""
    inner = getattr(event, "events", None)
    if inner is not None:
        return all(_is_pure(e) for e in inner)
    if hasattr(event, "event"):
        return _is_pure(event.event)
    if isinstance(event, EpsilonDelta):
        return event.delta == 0.0
    return isinstance(event, PureEpsilon | Laplace | NoOp)


def privacy_statement(model) -> str:
    """A plain-language statement of what a fitted dperm estimator (or a Pipeline of
    :mod:`dperm.preprocessing` steps ending in one) guarantees.

    In the spirit of TF Privacy's ``compute_dp_sgd_privacy_statement``: what is
    protected (one record, under which neighbouring relation), ε and δ, the
    mechanism and the theorem or accountant that certifies them, the public
    bounds the guarantee assumes, and what the guarantee does *not* cover.

    Parameters
    ----------
    model : fitted dperm estimator or sklearn.pipeline.Pipeline
        E.g. :class:`~dperm.estimators.DPLogisticRegression`.  For a pipeline the
        statement gives the composed (ε, δ) of every step (its δ is the sum of the
        steps' δ, its ε the "auto" accountant's bound at that δ), what each step spends,
        then the final estimator's statement.

    Returns
    -------
    str
        Several paragraphs of text (deterministic: the same model gives the
        same statement, also after :func:`save` / :func:`load`).

    Raises
    ------
    ModelFileError
        If ``model`` is not a dperm estimator.
    sklearn.exceptions.NotFittedError
        If it is not fitted.
    """
    if _is_pipeline(model):
        return _pipeline_statement(model)
    _fitted_model(model)
    from ._version import __version__

    params = model.get_params(deep=False)
    event: DpEvent = model.dp_event_
    relation = getattr(event, "neighbouring", REPLACE_ONE)
    eps, delta = float(model.epsilon_), float(model.delta_)
    mech = params.get("mechanism")
    pure = delta == 0.0
    run_event = getattr(model, "run_dp_event_", None)
    mech_event = run_event if isinstance(run_event, DpEvent) else event
    pair = _MECHANISMS.get(mech, (None, None))
    desc = pair[0 if _is_pure(mech_event) else 1] or pair[1]  # one text if noise-agnostic
    if desc is None:
        desc = f"the registered mechanism {mech!r} (see its module docstring for the theorem)"
    k = _n_problems(model)
    name = type(model).__name__

    guarantee = "ε-differentially private" if pure else "(ε, δ)-differentially private"
    lines = [f"Privacy statement for {name} (dperm {__version__})", ""]
    for caveat in _caveats(model):  # set by the caller: what voids or weakens the guarantee
        lines += [f"WARNING. {caveat}.", ""]
    lines += [
        f"Guarantee. The released parameters (coef_, intercept_) are {guarantee} with "
        f"ε = {_fmt(eps)}" + ("" if pure else f" and δ = {_fmt(delta)}") + ", protecting "
        f"one training record under the neighbouring relation {_relation_text(relation)}. "
        "Predictions and anything else computed from the released parameters alone inherit "
        "the guarantee (post-processing).",
        "",
        f"Mechanism. {desc}.",
    ]
    if mech in _ACCOUNTED:
        acc = params.get("accountant") or _ACCOUNTED[mech]
        acc_text = _ACCOUNTANTS.get(acc, f"the {acc!r} accountant")
        how = f"ε was computed at δ = {_fmt(delta)} by {acc_text}"
    else:
        how = "ε and δ are those of the mechanism's theorem (no numerical accountant)"
    if k > 1:
        how += (
            f"; the budget was split evenly over {k} one-vs-rest problems "
            "(basic composition, Dwork & Roth 2014, Thm 3.16)"
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
    bounds = _public_bounds(model)
    if bounds:
        items = ", ".join(f"{k_} = {v}" for k_, v in bounds.items())
        lines += [
            "",
            "Public bounds assumed (inputs, never read from the data; rows above data_norm "
            f"were clipped to it before training): {items}.",
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


# ----------------------------------------------------------------------------- save / load
def _encode_param(value: Any, name: str) -> Any:
    """A parameter as plain JSON: a value, or an allow-listed :mod:`dperm.norms` norm."""
    from .norms import Norm

    if isinstance(value, Norm):
        return _encode_norm(value, name)
    return _json_value(value, name)


def _norm_classes() -> dict[str, type]:
    from .norms import ChainTVNorm, GroupLinfNorm, L1Norm, LinfNorm

    return {c.__name__: c for c in (L1Norm, LinfNorm, GroupLinfNorm, ChainTVNorm)}


def _encode_norm(norm, name: str) -> dict[str, Any]:
    cls = type(norm).__name__
    if _norm_classes().get(cls) is not type(norm):
        raise ModelFileError(
            f"{name} = {norm!r} ({cls}) cannot be saved without pickle: only the norms "
            f"{sorted(_norm_classes())} are described by plain data (a SubmodularNorm holds "
            "a Python function F)"
        )
    out: dict[str, Any] = {_NORM_KEY: cls, "d": int(norm.d), "alpha": float(norm.alpha)}
    if cls == "GroupLinfNorm":
        out["groups"] = [np.flatnonzero(row).tolist() for row in norm.membership]
    if cls == "ChainTVNorm":
        out["mu"] = float(norm.mu)
    return out


def _decode_param(value: Any, name: str) -> Any:
    """Inverse of :func:`_encode_param`; a dict must describe an allow-listed norm."""
    if not isinstance(value, dict):
        return value
    cls = _norm_classes().get(value.get(_NORM_KEY))
    extra = set(value) - {_NORM_KEY, "d", "alpha", "groups", "mu"}
    if cls is None or extra:
        raise ModelFileError(f"parameter {name!r} is not plain data or an allowed norm: {value!r}")
    kw = {k: v for k, v in value.items() if k != _NORM_KEY}
    try:
        if "groups" in kw:
            return cls(kw.pop("groups"), **kw)
        return cls(**kw)
    except (DpermError, TypeError, ValueError) as exc:
        raise ModelFileError(f"parameter {name!r}: invalid norm {value!r}: {exc}") from None


def _record(obj: Any, saved: tuple[str, ...], prefix: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(JSON record, arrays keyed by member name) of one fitted estimator or transformer:
    its class, parameters (``random_state`` never), the allow-listed fitted attributes
    ``saved`` (scalars in the record, arrays as .npy members, a list of arrays as
    ``key.0``, ``key.1``, …) and the names of the attributes left out."""
    params = {
        key: _encode_param(value, key)
        for key, value in obj.get_params(deep=False).items()
        if key not in _NEVER_SAVED_PARAMS
    }
    rec: dict[str, Any] = {
        "class": type(obj).__name__,
        "params": params,
        "attributes": {},
        "arrays": [],
        "array_lists": {},
        "object_str_arrays": [],
        "not_saved": [],
    }
    arrays: dict[str, np.ndarray] = {}

    def put(key: str, value: np.ndarray) -> None:
        arr, was_obj = _array_for_file(value, key)
        arrays[f"{prefix}{key}.npy"] = arr
        rec["arrays"].append(key)
        if was_obj:
            rec["object_str_arrays"].append(key)

    for key, value in vars(obj).items():
        if not key.endswith("_") or key.startswith("_") or key in _PRIVACY_ATTRIBUTES:
            continue
        if key not in saved:
            if key not in _REBUILT:
                rec["not_saved"].append(key)
            continue
        if isinstance(value, np.ndarray):
            put(key, value)
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            rec["array_lists"][key] = len(value)
            for n_, v in enumerate(value):
                put(f"{key}.{n_}", v)
        else:
            rec["attributes"][key] = _json_value(value, key)
    rec["arrays"].sort()
    rec["object_str_arrays"].sort()
    rec["not_saved"].sort()
    return rec, arrays


def _estimator_meta(model, prefix: str = "") -> tuple[dict, dict[str, np.ndarray]]:
    """The record of a dperm estimator with its privacy block (format 1 keys)."""
    rec, arrays = _record(model, _SAVED_ATTRIBUTES, prefix)
    event: DpEvent = model.dp_event_
    params = rec["params"]
    meta = {
        "estimator": rec.pop("class"),
        **rec,
        "rebuilt_on_load": sorted(k for k in _REBUILT if hasattr(model, k)),
        "multinomial": type(getattr(model, "loss_", None)).__name__ == "Softmax",
        "privacy": {
            "epsilon": float(model.epsilon_),
            "delta": float(model.delta_),
            "neighbouring": getattr(event, "neighbouring", REPLACE_ONE),
            "mechanism": params.get("mechanism"),
            "accountant": params.get("accountant"),
            "public_bounds": _public_bounds(model),
            "classes_public": params.get("classes") is not None,
            "event": event.to_dict(),
        },
    }
    run_event = getattr(model, "run_dp_event_", None)
    if isinstance(run_event, DpEvent):
        meta["privacy"]["run_event"] = run_event.to_dict()
    if _caveats(model):
        meta["privacy"]["caveats"] = _caveats(model)
    return meta, arrays


def _is_pipeline(model: Any) -> bool:
    from sklearn.pipeline import Pipeline

    return isinstance(model, Pipeline)


def _pipeline_meta(pipe) -> tuple[dict, dict[str, np.ndarray], str]:
    """(metadata, arrays, statement) of a Pipeline of dperm transformers + a dperm
    estimator (ModelFileError for anything else)."""
    steps = pipe.steps
    transformers = _allowed_transformers()
    records, arrays = [], {}
    for i, (name, step) in enumerate(steps[:-1]):
        if step is None or (isinstance(step, str) and step == "passthrough"):
            records.append({"name": name, "class": "passthrough"})
            continue
        cls = type(step).__name__
        if transformers.get(cls) is not type(step):
            raise ModelFileError(
                f"pipeline step {name!r} is a {cls}: only the dperm.preprocessing "
                f"transformers {sorted(transformers)} can be saved (a fitted scikit-learn "
                "scaler learned from the data without noise: see docs/pipelines.md)"
            )
        check_is_fitted(step)
        rec, arr = _record(step, _TRANSFORMER_ATTRIBUTES[cls], f"step{i}__")
        rec["name"] = name
        rec["event"] = step.dp_event_.to_dict()
        records.append(rec)
        arrays.update(arr)
    final_name, final = steps[-1]
    _fitted_model(final)
    est_meta, arr = _estimator_meta(final, f"step{len(steps) - 1}__")
    est_meta["name"] = final_name
    arrays.update(arr)
    statement = privacy_statement(pipe)
    event, eps, delta = _pipeline_privacy(pipe)
    meta = {
        "kind": "pipeline",
        "steps": records,
        "final": est_meta,
        "privacy": {
            "epsilon": eps,
            "delta": delta,
            "neighbouring": getattr(event, "neighbouring", REPLACE_ONE),
            "event": event.to_dict(),
        },
    }
    return meta, arrays, statement


def save(model, path: str | os.PathLike) -> Path:
    """Write a fitted dperm estimator — or a scikit-learn ``Pipeline`` of
    :mod:`dperm.preprocessing` steps ending in one — with its privacy metadata (no pickle).

    Parameters
    ----------
    model : fitted dperm estimator or sklearn.pipeline.Pipeline
        A pipeline's steps must be ``PublicMinMaxScaler``, ``RowNormalizer``,
        ``PublicOneHotEncoder``, ``DPStandardScaler`` or ``"passthrough"``, and its last
        step a dperm estimator; its privacy event is the composition of the steps' events
        (:func:`~dperm.preprocessing.pipeline_dp_event`).  A ``penalty=`` norm of
        :mod:`dperm.norms` (``L1Norm``, ``LinfNorm``, ``GroupLinfNorm``,
        ``ChainTVNorm``) is saved as plain data.
    path : str or PathLike
        Destination file (any name: ``.dperm`` by convention, ``.skops`` accepted —
        the format is dperm's own zip of JSON + .npy either way); overwritten
        atomically if it exists.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ModelFileError
        If ``model`` is not a dperm estimator or such a pipeline, or holds a parameter
        or fitted array that is not plain data (e.g. a Constraint object, a
        SubmodularNorm with a Python function).
    sklearn.exceptions.NotFittedError
        If ``model`` is not fitted.
    OSError
        If the file cannot be written.

    Examples
    --------
    >>> import numpy as np, tempfile, os, dperm
    >>> X = np.random.default_rng(0).normal(size=(500, 2)) / 3
    >>> clf = dperm.DPLogisticRegression(classes=[0, 1], data_norm=2.0, random_state=0)
    >>> clf = clf.fit(X, (X[:, 0] > 0).astype(int))
    >>> path = dperm.save(clf, os.path.join(tempfile.mkdtemp(), "model.dperm"))
    >>> loaded = dperm.load(path)
    >>> bool(np.all(loaded.predict(X) == clf.predict(X)))
    True
    """
    if _is_pipeline(model):
        body, arrays, statement = _pipeline_meta(model)
    else:
        _fitted_model(model)
        body, arrays = _estimator_meta(model)
        statement = privacy_statement(model)
    meta = {
        "format": _FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "dperm_version": _version(),
        **body,
    }
    path = Path(path)
    # write next to the target, then rename: a crash never leaves half a model file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(_META, json.dumps(meta, indent=2, sort_keys=True, allow_nan=False))
            zf.writestr(_STATEMENT, statement)
            for member, arr in arrays.items():
                buf = _io.BytesIO()
                np.lib.format.write_array(buf, arr, allow_pickle=False)
                zf.writestr(member, buf.getvalue())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _version() -> str:
    from ._version import __version__

    return __version__


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON metadata of a model file (no estimator is built).

    Raises
    ------
    ModelFileError, DataFileNotFoundError
    """
    with _open(path) as zf:
        return _metadata(zf)


def _open(path) -> zipfile.ZipFile:
    from .exceptions import DataFileNotFoundError

    p = Path(path)
    if not p.is_file():
        raise DataFileNotFoundError(f"model file not found: {str(p)!r}")
    try:
        return zipfile.ZipFile(p, "r")
    except zipfile.BadZipFile:
        raise ModelFileError(f"{str(p)!r} is not a dperm model file (not a zip archive)") from None


def _metadata(zf: zipfile.ZipFile) -> dict[str, Any]:
    try:
        meta = json.loads(zf.read(_META).decode("utf-8"))
    except KeyError:
        raise ModelFileError(f"not a dperm model file: no {_META}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{_META} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT_NAME:
        raise ModelFileError(f"not a dperm model file: format {meta.get('format')!r}")
    version = meta.get("format_version")
    if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise ModelFileError(
            f"model file format_version {version!r} is not supported by this dperm "
            f"(reads 1..{FORMAT_VERSION}); upgrade dperm"
        )
    return meta


def load(path: str | os.PathLike):
    """Read a model written by :func:`save`; no code from the file is executed.

    The estimator and transformer classes must be on the allow-lists (the estimators of
    :mod:`dperm.estimators`, the transformers of :mod:`dperm.preprocessing`); parameters
    are set with ``set_params`` (a norm penalty is rebuilt from its allow-listed class);
    arrays are read with ``allow_pickle=False``; the privacy events are rebuilt with
    :func:`~dperm.accounting.events.event_from_dict`.

    Parameters
    ----------
    path : str or PathLike

    Returns
    -------
    estimator or sklearn.pipeline.Pipeline
        A fitted estimator (or pipeline) that predicts exactly as the saved one, with
        ``dp_event_``, ``epsilon_``, ``delta_`` and :meth:`privacy_statement`
        (``dperm.privacy_statement(pipeline)`` for a pipeline).  ``random_state`` is
        None and ``n_clipped_`` / ``diagnostics_`` are absent (never saved).

    Raises
    ------
    ModelFileError
        Not a dperm model file, an unsupported format version, a class outside
        the allow-list, unknown parameters, an object (pickled) array, a
        corrupt event.
    DataFileNotFoundError
        If ``path`` does not exist.
    """
    with _open(path) as zf:
        meta = _metadata(zf)
        if meta.get("kind", "estimator") == "pipeline":
            return _load_pipeline(zf, meta)
        _check_members(zf, {_META, _STATEMENT} | _members(meta, ""))
        est = _load_estimator(zf, meta, "")
    return est


def _members(rec: dict, prefix: str) -> set[str]:
    arrays = rec.get("arrays", [])
    if not isinstance(arrays, list):
        raise ModelFileError(f"arrays must be a list in {_META}")
    return {f"{prefix}{a}.npy" for a in arrays if isinstance(a, str)}


def _check_members(zf: zipfile.ZipFile, expected: set[str]) -> None:
    extra = sorted(set(zf.namelist()) - expected)
    if extra:
        raise ModelFileError(f"unexpected members in the model file: {extra}")


def _restore(zf, obj, rec: dict, prefix: str, saved: tuple[str, ...]) -> None:
    """Set the parameters, arrays and scalar attributes of one record on ``obj``."""
    name = type(obj).__name__
    params = rec.get("params")
    valid = obj.get_params(deep=False)
    if not isinstance(params, dict) or not set(params) <= set(valid):
        extra = sorted(set(params) - set(valid)) if isinstance(params, dict) else params
        raise ModelFileError(f"unknown parameters for {name}: {extra!r}")
    obj.set_params(**{k: _decode_param(v, k) for k, v in params.items()})
    for key, kind in (
        ("arrays", list),
        ("object_str_arrays", list),
        ("attributes", dict),
        ("array_lists", dict),
    ):
        if not isinstance(rec.get(key, kind()), kind):
            raise ModelFileError(f"{key} must be a {kind.__name__} in {_META}")
    lists = rec.get("array_lists", {})
    loaded: dict[str, np.ndarray] = {}
    for key in rec.get("arrays", []):
        base = key.split(".")[0] if isinstance(key, str) else key
        _check_attr_name(base, saved)
        if base != key and (base not in lists or not key[len(base) + 1 :].isdigit()):
            raise ModelFileError(f"invalid array name in the model file: {key!r}")
        try:
            with zf.open(f"{prefix}{key}.npy") as fh:
                arr = np.lib.format.read_array(fh, allow_pickle=False)
        except KeyError:
            raise ModelFileError(f"array {key!r} listed but missing") from None
        except ValueError as exc:
            raise ModelFileError(f"array {key!r} cannot be read without pickle: {exc}") from None
        if key in rec.get("object_str_arrays", []):
            arr = arr.astype(object)
        loaded[key] = arr
    for key, count in lists.items():
        _check_attr_name(key, saved)
        if not isinstance(count, int) or any(f"{key}.{i}" not in loaded for i in range(count)):
            raise ModelFileError(f"array list {key!r} is incomplete in the model file")
        setattr(obj, key, [loaded.pop(f"{key}.{i}") for i in range(count)])
    for key, arr in loaded.items():
        setattr(obj, key, arr)
    for key, value in rec.get("attributes", {}).items():
        _check_attr_name(key, saved)
        if isinstance(value, dict | list):
            raise ModelFileError(f"attribute {key!r} must be a scalar, got {value!r}")
        setattr(obj, key, value)


def _load_estimator(zf, meta: dict, prefix: str):
    allowed = _allowed_classes()
    name = meta.get("estimator")
    if name not in allowed:
        raise ModelFileError(
            f"estimator class {name!r} is not on the allow-list of loadable dperm "
            f"estimators {sorted(allowed)}; refusing to load"
        )
    est = allowed[name]()
    _restore(zf, est, meta, prefix, _SAVED_ATTRIBUTES)
    try:
        est.dp_event_ = event_from_dict(meta["privacy"]["event"])
        if "run_event" in meta["privacy"]:
            est.run_dp_event_ = event_from_dict(meta["privacy"]["run_event"])
        if "caveats" in meta["privacy"]:
            est.privacy_caveats_ = tuple(meta["privacy"]["caveats"])
            _caveats(est)
    except (KeyError, TypeError, DpermError) as exc:
        raise ModelFileError(f"the privacy event of the model file is invalid: {exc}") from None
    _rebuild(est, meta)
    return est


def _load_pipeline(zf, meta: dict):
    from sklearn.pipeline import Pipeline

    steps_meta, final = meta.get("steps"), meta.get("final")
    if not isinstance(steps_meta, list) or not isinstance(final, dict):
        raise ModelFileError(f"a pipeline file needs 'steps' (a list) and 'final' in {_META}")
    n = len(steps_meta)
    expected = {_META, _STATEMENT} | _members(final, f"step{n}__")
    for i, rec in enumerate(steps_meta):
        if isinstance(rec, dict):
            expected |= _members(rec, f"step{i}__")
    _check_members(zf, expected)
    transformers = _allowed_transformers()
    steps = []
    for i, rec in enumerate(steps_meta):
        if not isinstance(rec, dict) or not isinstance(rec.get("name"), str):
            raise ModelFileError(f"pipeline step {i} is malformed in {_META}")
        cls_name = rec.get("class")
        if cls_name == "passthrough":
            steps.append((rec["name"], "passthrough"))
            continue
        if cls_name not in transformers:
            raise ModelFileError(
                f"pipeline step class {cls_name!r} is not on the allow-list "
                f"{sorted(transformers)}; refusing to load"
            )
        step = transformers[cls_name]()
        _restore(zf, step, rec, f"step{i}__", _TRANSFORMER_ATTRIBUTES[cls_name])
        try:
            step.dp_event_ = event_from_dict(rec["event"])
        except (KeyError, TypeError, DpermError) as exc:
            raise ModelFileError(f"the privacy event of step {i} is invalid: {exc}") from None
        steps.append((rec["name"], step))
    if not isinstance(final.get("name"), str):
        raise ModelFileError(f"the final step of the pipeline has no name in {_META}")
    steps.append((final["name"], _load_estimator(zf, final, f"step{n}__")))
    return Pipeline(steps)


def _check_attr_name(key: Any, saved: tuple[str, ...] = _SAVED_ATTRIBUTES) -> None:
    if not isinstance(key, str) or key not in saved:
        raise ModelFileError(f"invalid fitted-attribute name in the model file: {key!r}")


def _rebuild(est, meta: dict[str, Any]) -> None:
    """Rebuild the fitted objects that are functions of public inputs (loss_,
    l2_, regularizer_, constraint_)."""
    from .losses.softmax import Softmax

    try:
        est._check_params(2, int(getattr(est, "n_features_in_", 1)))  # ε, δ, bounds, mechanism
        if meta.get("multinomial"):
            est.loss_ = Softmax(len(est.classes_))
        else:
            est.loss_ = est._make_loss()
        alpha = getattr(est, "alpha_", None)
        if alpha is not None:
            est.l2_, est.regularizer_ = est._resolve_penalty(alpha)
        d_aug = np.atleast_2d(est.coef_).shape[1] + int(bool(est.fit_intercept))
        est.constraint_ = est._resolve_constraint(d_aug)
    except (DpermError, AttributeError, TypeError) as exc:
        raise ModelFileError(f"the model file's parameters are inconsistent: {exc}") from None
