"""A persistent cache of calibrated noise multipliers (plan → z), on disk.

A calibration is a deterministic function of public numbers only — the event
family of the run (sampler, rate, steps, relation, population size), the target
(ε, δ), the accountant and its grid, the tolerance — so its answer can be kept
across processes: a second process that fits with the same plan skips the search.

Nothing read from the file is trusted.  A stored z is a *guess*: the caller
re-verifies it with the accountant (one ε evaluation, the certificate of the run)
and uses it only if the run spends between (1 − rtol)·ε and ε at z; otherwise it
calibrates afresh.  So an edited, stale or corrupted file can cost time or be
ignored, never make a run spend more than its ε (nor much less).  The file holds
public numbers only (no data, no model).

Location: ``$DPERM_CACHE_DIR/calibration.json``, else
``$XDG_CACHE_HOME/dperm/calibration.json``, else ``~/.cache/dperm/calibration.json``;
``DPERM_CACHE_DIR=""`` (empty) turns the cache off.  Writes are atomic
(a temporary file renamed over the old one); any I/O error is ignored (a read-only
home directory only loses the cache).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

__all__ = ["cache_path", "load", "store"]

#: entries kept (the most recent)
MAX_ENTRIES = 2048
_FILE = "calibration.json"


def cache_path() -> Path | None:
    """The cache file, or None when ``DPERM_CACHE_DIR`` is set to the empty string."""
    root = os.environ.get("DPERM_CACHE_DIR")
    if root is not None:
        return Path(root) / _FILE if root else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "dperm" / _FILE


def _read(path: Path) -> dict[str, float]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load(key: str) -> float | None:
    """The stored z for ``key`` (a finite positive float), or None.  A guess: verify it."""
    path = cache_path()
    if path is None:
        return None
    z = _read(path).get(key)
    if isinstance(z, bool) or not isinstance(z, (int, float)):
        return None
    z = float(z)
    return z if math.isfinite(z) and z > 0.0 else None


def store(key: str, z: float) -> None:
    """Record ``key → z`` (atomically; errors ignored)."""
    path = cache_path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read(path)
        data.pop(key, None)
        data[key] = float(z)
        if len(data) > MAX_ENTRIES:
            data = dict(list(data.items())[-MAX_ENTRIES:])
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calibration-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return
