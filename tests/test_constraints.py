"""Constraint sets: projections satisfy the variational inequality, LMOs are
optimal, membership and radii."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so

from dperm.constraints import Box, L1Ball, L2Ball, Polytope, get_constraint
from dperm.exceptions import (
    InvalidDataError,
    InvalidPrivacyParameter,
    UnknownNameError,
    UnsupportedOperationError,
)

SETS = [L2Ball(1.5), L1Ball(2.0), Box(-0.5, 0.7), Box(np.array([-1, 0, -2.0]), 1.0)]


def _sample_inside(C, rng, d, k=200):
    pts = rng.normal(size=(k, d))
    return np.array([C.project(p * s) for p, s in zip(pts, rng.uniform(0, 3, k), strict=True)])


@pytest.mark.parametrize("C", SETS, ids=repr)
def test_projection_variational_inequality(C, rng):
    """⟨v − Π(v), u − Π(v)⟩ ≤ 0 for all u ∈ C characterizes the projection."""
    d = 3
    inside = _sample_inside(C, rng, d)
    for _ in range(30):
        v = rng.normal(size=d) * 3
        p = C.project(v)
        assert C.contains(p)
        assert np.max((inside - p) @ (v - p)) <= 1e-9
        np.testing.assert_allclose(C.project(p), p, atol=1e-12)  # idempotent


def test_l1_projection_matches_a_generic_solver(rng):
    """Against a QP solved independently: u = p − q, p, q ≥ 0, Σ(p + q) ≤ r."""
    C = L1Ball(1.0)
    d = 6
    for _ in range(5):
        v = rng.normal(size=d) * 2
        res = so.minimize(
            lambda w, v=v: 0.5 * np.sum((w[:d] - w[d:] - v) ** 2),
            np.zeros(2 * d),
            jac=lambda w, v=v: np.r_[w[:d] - w[d:] - v, -(w[:d] - w[d:] - v)],
            bounds=[(0, None)] * (2 * d),
            constraints=[
                {"type": "ineq", "fun": lambda w: 1.0 - w.sum(), "jac": lambda w: -np.ones(2 * d)}
            ],
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        np.testing.assert_allclose(C.project(v), res.x[:d] - res.x[d:], atol=1e-6)


@pytest.mark.parametrize("C", SETS, ids=repr)
def test_lmo_is_optimal(C, rng):
    d = 3
    inside = _sample_inside(C, rng, d)
    for _ in range(20):
        g = rng.normal(size=d)
        v = C.lmo(g)
        assert C.contains(v)
        assert g @ v <= np.min(inside @ g) + 1e-12


def test_l1_vertices_and_polytope_lmo(rng):
    C = L1Ball(2.0)
    V = C.vertices(4)
    assert V.shape == (8, 4)
    P = Polytope(V)
    for _ in range(10):
        g = rng.normal(size=4)
        assert g @ P.lmo(g) == pytest.approx(g @ C.lmo(g))
    assert P.l2_radius == 2.0
    with pytest.raises(UnsupportedOperationError, match="Frank-Wolfe"):
        P.project(np.zeros(4))
    with pytest.raises(InvalidDataError):
        Polytope(np.array([1.0, 2.0]))


def test_radii():
    assert L2Ball(3).l2_radius == 3
    assert L1Ball(3).l2_radius == 3
    assert Box(np.array([-1.0, -2.0]), np.array([2.0, 1.0])).l2_radius == pytest.approx(np.sqrt(8))
    assert Box(np.array([-1.0, -1.0]), 1.0).bounds(2) == [(-1.0, 1.0), (-1.0, 1.0)]


def test_bad_parameters():
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(InvalidPrivacyParameter):
            L2Ball(bad)
    with pytest.raises(InvalidPrivacyParameter):
        Box(1.0, -1.0)
    with pytest.raises(UnknownNameError):
        get_constraint("simplex", 1.0)
    with pytest.raises(InvalidPrivacyParameter):
        get_constraint("l2", None)
    assert get_constraint("none") is None
    assert isinstance(get_constraint("l1", 2.0), L1Ball)
