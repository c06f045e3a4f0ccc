"""Proximal operators against direct numerical minimization."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so

from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError
from dperm.regularizers import L1, ElasticNet, GroupL2, get_regularizer

REGS = [
    L1(0.3),
    ElasticNet(0.4, 0.7),
    ElasticNet(0.4, 0.0),
    GroupL2(0.5, np.array([0, 0, 1, 2, 2])),
]


@pytest.mark.parametrize("reg", REGS, ids=repr)
def test_prox_minimizes_its_objective(reg, rng):
    for step in (0.1, 1.0, 3.0):
        v = rng.normal(size=5)
        p = reg.prox(v, step)

        def obj(u, v=v, step=step):
            return reg.value(u) + np.sum((u - v) ** 2) / (2 * step)

        # p is optimal: no random perturbation improves it, and a derivative-free
        # solver started elsewhere does not find a better point
        best = so.minimize(obj, v, method="Powell", options={"xtol": 1e-10, "ftol": 1e-14}).fun
        assert obj(p) <= best + 1e-8
        for _ in range(50):
            assert obj(p) <= obj(p + rng.normal(size=5) * 1e-3) + 1e-12


def test_values_and_strong_convexity():
    th = np.array([1.0, -2.0, 0.0, 3.0, -1.0])
    assert L1(0.5).value(th) == pytest.approx(3.5)
    en = ElasticNet(2.0, 0.25)
    assert en.value(th) == pytest.approx(2.0 * (0.25 * 7 + 0.75 / 2 * 15))
    assert en.strong_convexity == pytest.approx(1.5)
    g = GroupL2(1.0, np.array([0, 0, 1, 1, 2]))
    assert g.value(th) == pytest.approx(np.sqrt(5) + 3 + 1)


def test_bad_parameters():
    with pytest.raises(InvalidPrivacyParameter):
        L1(-1.0)
    with pytest.raises(InvalidPrivacyParameter):
        ElasticNet(1.0, 1.5)
    with pytest.raises(UnknownNameError):
        get_regularizer("scad")
    assert get_regularizer("l2") is None
    assert get_regularizer("l1", 0.1) == L1(0.1)
