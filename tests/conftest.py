"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

# The solvers make many tiny BLAS calls; on a busy 2-core machine OpenBLAS
# threads make them many times slower (and xdist already uses both cores).
threadpool_limits(1)

_DEFAULT_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data_dir() -> Path | None:
    """The folder with the real benchmark data, or None when it is absent.

    ``DPERM_DATA_HOME`` overrides the default ``../shared/data``.
    """
    p = Path(os.environ.get("DPERM_DATA_HOME", _DEFAULT_SHARED))
    return p if p.is_dir() else None


@pytest.fixture
def shared_data() -> Path:
    """Path of ``../shared/data``; skips the test cleanly when it is absent."""
    p = shared_data_dir()
    if p is None:
        pytest.skip("real benchmark data (../shared/data) not available")
    return p


@pytest.fixture(scope="session")
def unit_ball_data():
    """Factory of a linearly separable-ish ±1 problem with rows inside the unit ball.

    ``unit_ball_data(seed, n, w, noise, scale=1.0)`` draws X ~ N(0, scale²)ⁿˣᵈ
    (d = len(w)), shrinks every row to ‖x‖ ≤ 0.99, and returns
    ``(X, y)`` with y = sign(Xw + noise·N(0, 1)) in {−1, +1}.
    """
    import numpy as np

    def make(seed: int, n: int, w, noise: float, scale: float = 1.0):
        rng = np.random.default_rng(seed)
        w = np.asarray(w, dtype=float)
        X = rng.normal(size=(n, w.size)) * scale
        X *= 0.99 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)  # ‖x‖ < 1
        y = np.where(X @ w + noise * rng.normal(size=n) > 0, 1.0, -1.0)
        return X, y

    return make


@pytest.fixture
def rng():
    """A seeded Generator for reproducible test data."""
    import numpy as np

    return np.random.default_rng(12345)
