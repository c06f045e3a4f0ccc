"""The model-file layout of :mod:`dperm.io`: member names, allow-lists, plain-data encoding.

What a file may contain is decided here, once, for writing and reading alike: the fitted
attributes an estimator or a :mod:`dperm.preprocessing` transformer carries
(``_SAVED_ATTRIBUTES``, ``_TRANSFORMER_ATTRIBUTES``: allow-lists, so a new data-dependent
diagnostic is never written by accident), the classes that may be built on load, and
the encoding of one object as a JSON record plus ``.npy`` arrays (a ``penalty=`` norm of
:mod:`dperm.norms` as plain data).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..exceptions import DpermError, ModelFileError
from ..statement import json_value as _json_value

#: version of the file layout written by :func:`save` (3: the content digest is part of
#: the format — a version-3 file without it is refused; 2: pipelines and norm penalties;
#: version-1 and -2 files, which may predate the digest, still load)
FORMAT_VERSION = 3
#: the first version whose files always carry :data:`_DIGEST`
DIGEST_REQUIRED_FROM = 3
_FORMAT_NAME = "dperm-model"
_META = "dperm.json"
_STATEMENT = "privacy_statement.txt"
#: the metadata key of :func:`content_digest` (mandatory from format version 3; files
#: of versions 1–2 written before it have none)
_DIGEST = "content_sha256"


def content_digest(meta: dict, members: dict[str, bytes]) -> str:
    """SHA-256 of a model file's content: its metadata (canonical JSON, without this
    digest) and every other member (name and bytes, in name order).  :func:`dperm.load`
    recomputes it, so a file edited after it was written — a swapped activation in the
    metadata, a replaced weight array — is refused (issue #32).  An integrity check,
    not a signature: whoever edits the file on purpose can recompute it; the loader's
    own checks (allow-lists, finite weights, shapes, the privacy event) still apply."""
    import hashlib

    h = hashlib.sha256()
    body = {k: v for k, v in meta.items() if k != _DIGEST}
    h.update(json.dumps(body, sort_keys=True, allow_nan=False).encode("utf-8"))
    for name in sorted(members):
        if name == _META:
            continue
        h.update(name.encode("utf-8") + b"\0" + len(members[name]).to_bytes(8, "little"))
        h.update(members[name])
    return h.hexdigest()


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
    "mechanism_",  # mechanism="auto": the mechanism the public rule chose (a str)
    "n_fits_",  # warm_start=True: the number of fits the model composes (public)
    # DPMLPClassifier (dperm.estimators.mlp): the released weights and PCA directions
    "coefs_",
    "intercepts_",
    "pca_components_",
    "n_components_",
    "input_scales_",
    "quadratic_features_",  # m of the quadratic feature map (public, an int)
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
    # the public schema of the raw columns: its parameters are its whole state (the
    # column specifications as plain data); schema_ and row_norm_bound_ are rebuilt on
    # load and must agree with the saved column names
    "SchemaEncoder": ("n_features_in_", "feature_names_in_"),
}
#: fitted objects rebuilt on load from the (public) parameters
_REBUILT = ("loss_", "regularizer_", "constraint_", "schema_", "row_norm_bound_")
_PRIVACY_ATTRIBUTES = ("dp_event_", "run_dp_event_", "privacy_caveats_")
#: parameters never written to a file
_NEVER_SAVED_PARAMS = ("random_state",)


def _allowed_classes() -> dict[str, type]:
    """The allow-list: estimator classes exported by :mod:`dperm.estimators`."""
    from .. import estimators
    from ..estimators._base import DPLinearModelBase
    from ..estimators.mlp import DPMLPClassifier

    out = {}
    for name in getattr(estimators, "__all__", ()):
        obj = getattr(estimators, name, None)
        if isinstance(obj, type) and issubclass(obj, DPLinearModelBase | DPMLPClassifier):
            out[name] = obj
    return out


def _allowed_transformers() -> dict[str, type]:
    """The allow-list of pipeline steps: the :mod:`dperm.preprocessing` transformers and
    :class:`dperm.schema.SchemaEncoder`."""
    from .. import preprocessing, schema

    return {
        name: getattr(schema if name == "SchemaEncoder" else preprocessing, name)
        for name in _TRANSFORMER_ATTRIBUTES
    }


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
    check_is_fitted(model, getattr(model, "_fitted_attribute", "coef_"))


def _is_pipeline(model: Any) -> bool:
    from sklearn.pipeline import Pipeline

    return isinstance(model, Pipeline)


def _encode_param(value: Any, name: str) -> Any:
    """A parameter as plain JSON: a value, or an allow-listed :mod:`dperm.norms` norm."""
    from ..norms import Norm

    if isinstance(value, Norm):
        return _encode_norm(value, name)
    return _json_value(value, name)


def _norm_classes() -> dict[str, type]:
    from ..norms import ChainTVNorm, GraphTVNorm, GroupLinfNorm, L1Norm, LinfNorm

    return {c.__name__: c for c in (L1Norm, LinfNorm, GroupLinfNorm, ChainTVNorm, GraphTVNorm)}


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
    if cls in ("ChainTVNorm", "GraphTVNorm"):
        out["mu"] = float(norm.mu)
    if cls == "GraphTVNorm":
        out["edges"] = norm.edges.tolist()
        out["weights"] = norm.weights.tolist()
    return out


def _decode_param(value: Any, name: str) -> Any:
    """Inverse of :func:`_encode_param`: a dict with the norm key must describe an
    allow-listed norm; any other value (JSON data: numbers, strings, lists, dicts) is
    returned as it is, for the object's own validation."""
    if not isinstance(value, dict) or _NORM_KEY not in value:
        return value
    cls = _norm_classes().get(value.get(_NORM_KEY))
    extra = set(value) - {_NORM_KEY, "d", "alpha", "groups", "mu", "edges", "weights"}
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


def _version() -> str:
    from .._version import __version__

    return __version__
