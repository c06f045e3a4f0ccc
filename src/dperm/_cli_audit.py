"""Moved: :mod:`dperm.cli.audit` (issue #19).

Kept so that old imports (``from dperm._cli_audit import audit_command``) keep working;
new code imports from :mod:`dperm.cli.audit`.
"""

from __future__ import annotations

from .cli.audit import audit_command, render

__all__ = ["audit_command", "render"]
