"""Where the data files live: the data home and the file lookup."""

from __future__ import annotations

import os
from pathlib import Path

from ..exceptions import DataFileNotFoundError

_DATA_HOME_HINT = (
    "pass data_home=... (CLI: --data-home) or set the DPERM_DATA_HOME environment variable"
)


def _resolve_data_home(data_home) -> Path:
    if data_home is not None:
        p = Path(data_home).expanduser()
        if not p.is_dir():
            raise DataFileNotFoundError(
                f"data_home {str(p)!r} is not a directory; {_DATA_HOME_HINT}"
            )
        return p
    env = os.environ.get("DPERM_DATA_HOME")
    if env:
        p = Path(env).expanduser()
        if not p.is_dir():
            raise DataFileNotFoundError(
                f"DPERM_DATA_HOME={env!r} is not a directory; {_DATA_HOME_HINT}"
            )
        return p
    p = Path.cwd().parent / "shared" / "data"
    if p.is_dir():
        return p
    raise DataFileNotFoundError(
        f"no data folder: data_home is None, DPERM_DATA_HOME is unset and {str(p)!r} does "
        f"not exist; {_DATA_HOME_HINT}"
    )


def _find_file(home: Path, subdir: str, filename: str) -> Path:
    """``home/subdir/filename(.gz)`` or ``home/filename(.gz)``; else a precise error."""
    candidates = [
        home / subdir / (filename + ".gz"),
        home / subdir / filename,
        home / (filename + ".gz"),
        home / filename,
    ]
    for c in candidates:
        if c.is_file():
            return c
    others = ", ".join(str(c) for c in candidates[1:])
    raise DataFileNotFoundError(
        f"dataset file not found: expected {candidates[0]} (also tried {others}); {_DATA_HOME_HINT}"
    )
