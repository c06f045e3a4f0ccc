"""The installed distribution's version (pyproject.toml): one source of truth, on the
lowest floor so that every module (the privacy statement, the CLI, saved models) can
read it without importing the package root."""

from __future__ import annotations

try:
    from importlib.metadata import PackageNotFoundError as _PkgNotFound
    from importlib.metadata import version as _dist_version

    __version__ = _dist_version("dperm")
except _PkgNotFound:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
