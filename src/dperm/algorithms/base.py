"""The result every private algorithm returns."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..accounting.events import DpEvent

__all__ = ["Result"]


@dataclasses.dataclass(frozen=True)
class Result:
    """A private release and what it cost.

    Attributes
    ----------
    theta : ndarray of shape (d,) or (d, k)
        The released parameter vector (already private; post-processing of it
        is free).
    event : DpEvent
        The privacy event that accountants read to report (ε, δ).
    diagnostics : dict
        Algorithm-specific facts: noise scale, regularization used, steps,
        ``n_clipped``, ``neighbouring`` ("replace-one" or "add-remove-one"),
        ``epsilon``/``delta`` targeted, … (all derived from public inputs or
        from the private output itself).
    """

    theta: np.ndarray
    event: DpEvent
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)
