"""Writing a model file: :func:`save` (an estimator, or a Pipeline of dperm steps).

The file is written next to the target and renamed into place, so a crash never leaves half
a model file; its records come from :mod:`dperm.io._format`, its statement from
:mod:`dperm.io._statement`.
"""

from __future__ import annotations

import io as _io
import json
import math
import os
import uuid
import zipfile
from pathlib import Path

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..accounting.events import REPLACE_ONE, DpEvent
from ..exceptions import ModelFileError
from ..statement import caveats as _caveats
from ..statement import public_bounds as _public_bounds
from ._format import (
    _DIGEST,
    _FORMAT_NAME,
    _META,
    _REBUILT,
    _SAVED_ATTRIBUTES,
    _STATEMENT,
    _TRANSFORMER_ATTRIBUTES,
    FORMAT_VERSION,
    _allowed_transformers,
    _fitted_model,
    _is_pipeline,
    _record,
    _version,
    content_digest,
)
from ._statement import _pipeline_privacy, privacy_statement


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
            "mechanism": getattr(model, "mechanism_", None) or params.get("mechanism"),
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
            # None: no finite ε (a step read the data without privacy, e.g. bounds read
            # off the data); strict JSON has no ∞
            "epsilon": eps if math.isfinite(eps) else None,
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
        ``ChainTVNorm``, ``GraphTVNorm``) is saved as plain data.
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
        SubmodularNorm with a Python function); if ``path`` is not a str/PathLike, is
        a folder, lies in a folder that does not exist, or cannot be written.
    sklearn.exceptions.NotFittedError
        If ``model`` is not fitted.

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
    path = _check_path(path)  # before any work: a bad path fails first
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
    members = {_STATEMENT: statement.encode("utf-8")}
    for member, arr in arrays.items():
        buf = _io.BytesIO()
        np.lib.format.write_array(buf, arr, allow_pickle=False)
        members[member] = buf.getvalue()
    meta[_DIGEST] = content_digest(meta, members)  # checked by load (edits, corruption)
    # write next to the target, then rename: a crash never leaves half a model file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(_META, json.dumps(meta, indent=2, sort_keys=True, allow_nan=False))
            for member, data in members.items():
                zf.writestr(member, data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ModelFileError(
            f"cannot write the model file {str(path)!r}: {exc.strerror or type(exc).__name__}"
        ) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _check_path(path) -> Path:
    """``path`` as a Path to a file that can be created (ModelFileError otherwise)."""
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise ModelFileError(
            f"path must be a file name (str or os.PathLike), got {type(path).__name__}"
        )
    path = Path(path)
    if not str(path) or path.name in ("", ".", ".."):
        raise ModelFileError(f"path must name a file, got {str(path)!r}")
    if path.is_dir():
        raise ModelFileError(f"path {str(path)!r} is a folder; give a file name inside it")
    if not path.parent.is_dir():
        raise ModelFileError(
            f"cannot save to {str(path)!r}: the folder {str(path.parent)!r} does not exist"
        )
    return path
