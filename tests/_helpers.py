"""Helpers shared by several test modules (imported as ``from _helpers import …``:
pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np


def tamper_model_file(src: Path, dst: Path, arrays=None, meta=None) -> Path:
    """A copy of the model file ``src`` at ``dst`` with the metadata edited in place by
    ``meta(dict)`` and the arrays ``arrays`` (member name, with or without ``.npy`` →
    array) replaced; with neither, an identical copy."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.namelist():
            data = zin.read(item)
            if item == "dperm.json" and meta is not None:
                m = json.loads(data)
                meta(m)
                data = json.dumps(m).encode()
            name = next((k for k in (item, item.removesuffix(".npy")) if k in (arrays or {})), None)
            if name is not None:
                buf = io.BytesIO()
                np.lib.format.write_array(buf, arrays[name], allow_pickle=False)
                data = buf.getvalue()
            zout.writestr(item, data)
    return dst
