"""An optional extra that is not installed: one line naming it, exit 2 (issue #30)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dperm.exceptions import DpermError, MissingDependencyError

_BLOCK_DASK = (
    "import sys\n"
    "for m in ('dask', 'dask.array', 'dask.dataframe', 'distributed'):\n"
    "    sys.modules[m] = None\n"
)


def test_cli_parquet_without_dask_is_one_line_exit_2(tmp_path):
    code = _BLOCK_DASK + (
        "from dperm.cli import app\n"
        f"sys.argv = ['dperm', 'fit', '--parquet', {str(tmp_path)!r}, '--target', 'y']\n"
        "app()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and 'pip install "dperm[dask]"' in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_read_dask_without_dask_raises_the_named_error(tmp_path, monkeypatch):
    for m in ("dask", "dask.array", "dask.dataframe"):
        monkeypatch.setitem(sys.modules, m, None)
    from dperm.datasets.dask_io import read_dask

    with pytest.raises(MissingDependencyError, match=r"dperm\[dask\]") as info:
        read_dask(tmp_path, "y")
    assert isinstance(info.value, DpermError) and isinstance(info.value, ImportError)
