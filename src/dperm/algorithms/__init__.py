"""Private ERM algorithms, one module per paper; each exposes
``fit(loss, X, y, *, epsilon, delta, ..., random_state) -> Result``."""

from .base import Result

__all__ = ["Result"]
