"""Moved: :mod:`dperm.cli.account` and :mod:`dperm.cli.calibrate` (issue #19).

Kept so that old imports (``from dperm._cli_account import account_command``) keep
working; new code imports from :mod:`dperm.cli.account` / :mod:`dperm.cli.calibrate`.
"""

from __future__ import annotations

from .cli.account import account_command, render
from .cli.calibrate import calibrate_command

__all__ = ["account_command", "calibrate_command", "render"]
