"""Reading a model file: :func:`load` and :func:`read_metadata`; no code from the file runs.

Classes come from the allow-lists of :mod:`dperm.io._format`, parameters go through
``set_params``, arrays are read with ``allow_pickle=False``, events are rebuilt with
:func:`~dperm.accounting.events.event_from_dict`, and the fitted objects that are
functions of public inputs (``loss_``, ``l2_``, ``regularizer_``, ``constraint_``) are
rebuilt from the parameters.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..accounting.events import event_from_dict
from ..exceptions import DpermError, ModelFileError
from ..statement import caveats as _caveats
from ._format import (
    _DIGEST,
    _FORMAT_NAME,
    _META,
    _SAVED_ATTRIBUTES,
    _STATEMENT,
    _TRANSFORMER_ATTRIBUTES,
    DIGEST_REQUIRED_FROM,
    FORMAT_VERSION,
    _allowed_classes,
    _allowed_transformers,
    _decode_param,
    content_digest,
)
from ._validate import check_estimator, check_pipeline


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON metadata of a model file (no estimator is built).

    Raises
    ------
    ModelFileError, DataFileNotFoundError
    """
    with _open(path) as zf, _corrupt_as_model_file_error(path):
        return _metadata(zf)


@contextlib.contextmanager
def _corrupt_as_model_file_error(path):
    """A damaged archive (a flipped byte: a bad CRC, a broken deflate stream) is a
    ModelFileError naming the file, never a raw zlib/zipfile error (issue #32)."""
    try:
        yield
    except (zipfile.BadZipFile, zlib.error, EOFError, struct.error) as exc:
        raise ModelFileError(
            f"{str(path)!r} is corrupt (damaged after it was written): {exc}"
        ) from None


def _check_digest(zf: zipfile.ZipFile, meta: dict, path) -> None:
    """The content digest written by :func:`save`: mandatory from format version
    :data:`DIGEST_REQUIRED_FROM` on (a current file without it was edited: refused, never
    read as a legacy file); a version-1/2 file without one loads with a warning."""
    want = meta.get(_DIGEST)
    if want is None:
        version = meta.get("format_version")
        if version >= DIGEST_REQUIRED_FROM:
            raise ModelFileError(
                f"{str(path)!r} has no {_DIGEST} although every format_version {version} file "
                "carries one: it was removed (the file was edited); refusing to load"
            )
        warnings.warn(
            f"{str(path)!r} (format_version {version}) was written before dperm model files "
            f"carried a content digest: its content cannot be checked. Load it only if you "
            "trust where it came from, and save it again (dperm.save) to add one.",
            UserWarning,
            stacklevel=3,
        )
        return
    members = {name: zf.read(name) for name in zf.namelist() if name != _META}
    if not isinstance(want, str) or content_digest(meta, members) != want:
        raise ModelFileError(
            "the model file was modified after it was written (its content does not match "
            f"its {_DIGEST}); refusing to load"
        )


def _open(path) -> zipfile.ZipFile:
    from ..exceptions import DataFileNotFoundError

    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise ModelFileError(
            f"path must be a model file's name (str or os.PathLike), got "
            f"{type(path).__name__} {path!r:.60}"
        )
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
        corrupt event, non-finite weights, a damaged archive (a flipped byte), a
        file edited after it was written (its content digest, or a current-format
        file without one), or a ``path`` that is not a str/PathLike.
    DataFileNotFoundError
        If ``path`` does not exist.

    Warns
    -----
    UserWarning
        A format-version 1 or 2 file without a content digest (written before dperm
        added one): its content cannot be checked.
    """
    with _open(path) as zf, _corrupt_as_model_file_error(path):
        meta = _metadata(zf)
        if meta.get("kind", "estimator") == "pipeline":
            model = _load_pipeline(zf, meta)
        else:
            _check_members(zf, {_META, _STATEMENT} | _members(meta, ""))
            model = _load_estimator(zf, meta, "")
        _check_digest(zf, meta, path)  # after the specific checks, which name what is wrong
    return model


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
    own = getattr(est, "_rebuild_from_file", None)  # e.g. DPMLPClassifier: its own checks
    if own is not None:
        try:
            own()
        except (DpermError, AttributeError, TypeError, ValueError) as exc:
            raise ModelFileError(f"the model file's parameters are inconsistent: {exc}") from None
    else:
        _rebuild(est, meta)
        check_estimator(est, meta)
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
        if cls_name == "SchemaEncoder":
            _rebuild_encoder(step, i)
        steps.append((rec["name"], step))
    if not isinstance(final.get("name"), str):
        raise ModelFileError(f"the final step of the pipeline has no name in {_META}")
    steps.append((final["name"], _load_estimator(zf, final, f"step{n}__")))
    pipe = Pipeline(steps)
    check_pipeline(pipe, meta)
    return pipe


def _rebuild_encoder(step, i: int) -> None:
    """A SchemaEncoder's state from its parameters: it must validate, and agree with the
    saved column names and event."""
    saved_names = getattr(step, "feature_names_in_", None)
    saved_event = step.dp_event_
    try:
        step._setup()
    except DpermError as exc:
        raise ModelFileError(f"pipeline step {i}: invalid schema: {exc}") from None
    names = np.asarray(step.feature_names_in_).astype(str)
    if not isinstance(saved_names, np.ndarray) or not np.array_equal(
        names, np.asarray(saved_names).astype(str)
    ):
        raise ModelFileError(f"pipeline step {i}: the saved column names disagree with its schema")
    if saved_event != step.dp_event_:
        raise ModelFileError(
            f"pipeline step {i}: the saved event {saved_event!r} disagrees with its schema's "
            f"{step.dp_event_!r}"
        )


def _check_attr_name(key: Any, saved: tuple[str, ...] = _SAVED_ATTRIBUTES) -> None:
    if not isinstance(key, str) or key not in saved:
        raise ModelFileError(f"invalid fitted-attribute name in the model file: {key!r}")


def _rebuild(est, meta: dict[str, Any]) -> None:
    """Rebuild the fitted objects that are functions of public inputs (loss_,
    l2_, regularizer_, constraint_)."""
    from ..losses.softmax import Softmax

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
