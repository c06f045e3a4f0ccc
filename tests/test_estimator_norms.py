"""A :class:`dperm.norms.Norm` as ``penalty=`` in the estimators (issue #11): the
norm acts on the d features, the intercept coordinate is left unpenalized
(:func:`dperm.estimators._base.feature_norm`), ``alpha·l1_ratio`` scales it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from dperm import DPLinearRegression, DPLogisticRegression
from dperm.algorithms.dual_frank_wolfe import dual_vertex_blocks
from dperm.estimators._base import feature_norm
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter
from dperm.norms import ChainTVNorm, GroupLinfNorm, L1Norm, SubmodularNorm

D = 12
OVERLAPPING = [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9], [9, 10, 11]]
DISJOINT = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]


def _unit_rows(n, d, rng):
    X = rng.normal(size=(n, d))
    return 0.999 * X / np.linalg.norm(X, axis=1, keepdims=True)


def _norm_fit(X, y, penalty, **kw):
    """DPLogisticRegression with the norm ``penalty`` at Λ = 0.02 and ε = 100, fitted."""
    params = dict(alpha=0.02, epsilon=100.0, classes=[0, 1], random_state=0) | kw
    return DPLogisticRegression(penalty=penalty, **params).fit(X, y)


@pytest.fixture(scope="module")
def group_data():
    """Only the first group {0..3} is active; groups 3 and 4 ({6..11}) are inactive."""
    rng = np.random.default_rng(0)
    n = 4000
    w = np.zeros(D)
    w[:4] = [2.0, -2.0, 2.0, -2.0]
    X = _unit_rows(n, D, rng)
    y = (3 * X @ w + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


# ----------------------------------------------------------------------------- wrapper
@pytest.mark.parametrize(
    "norm",
    [
        L1Norm(5, alpha=0.7),
        GroupLinfNorm([[0, 1], [2, 3, 4]], 5, alpha=0.7),
        GroupLinfNorm([[0, 1, 2], [2, 3, 4]], 5, alpha=0.7),
        ChainTVNorm(5, mu=0.5, alpha=0.7),
    ],
    ids=["l1", "disjoint-groups", "overlapping-groups", "chain-tv"],
)
def test_feature_norm_acts_on_the_features_only(norm):
    rng = np.random.default_rng(1)
    ext = feature_norm(norm, 6)
    v = rng.normal(size=6)
    assert ext.d == 6 and ext.alpha == norm.alpha
    assert ext.value(v) == pytest.approx(norm.value(v[:5]))
    assert ext.value(np.r_[np.zeros(5), 3.0]) == 0.0  # the intercept is free
    p = ext.prox(v, 0.3)
    np.testing.assert_allclose(p[:5], norm.prox(v[:5], 0.3), atol=1e-10)
    assert p[5] == v[5]
    g = np.r_[rng.normal(size=5), 0.0]
    np.testing.assert_allclose(ext.lmo(g)[:5], norm.lmo(g[:5]), atol=1e-10)
    assert ext.dual_norm(g) == pytest.approx(norm.dual_norm(g[:5]))
    assert ext.dual_norm(np.r_[g[:5], 1.0]) == np.inf
    with pytest.raises(InvalidDataError, match="unbounded"):
        ext.lmo(np.r_[g[:5], 1.0])
    if isinstance(norm, SubmodularNorm):
        s = ext.greedy_vertex(v)
        np.testing.assert_allclose(s[:5], norm.greedy_vertex(v[:5]))
        assert s[5] == 0.0 and s @ v == pytest.approx(norm.norm(v[:5]))


def test_feature_norm_gives_dual_frank_wolfe_blocks_without_the_intercept():
    """The dual constraint of an unpenalized intercept is s_d = 0: no block covers it."""
    for norm in (L1Norm(4), GroupLinfNorm([[0, 1], [2, 3]], 4)):
        blocks = dual_vertex_blocks(feature_norm(norm, 5))
        covered = np.concatenate([idx for idx, _ in blocks])
        assert sorted(covered.tolist()) == [0, 1, 2, 3]


def test_unpenalized_intercept_closed_form():
    """With a huge norm weight every feature coefficient is 0 and the intercept is
    the unpenalized logistic MLE logit(mean y); penalty='l1' zeroes it instead."""
    rng = np.random.default_rng(2)
    n, d = 2000, 5
    X = 0.5 * _unit_rows(n, d, rng)
    y = (rng.uniform(size=n) < 0.8).astype(int)
    kw = dict(alpha=5.0, l1_ratio=1.0, mechanism="objective", epsilon=1e6, classes=[0, 1])
    est = DPLogisticRegression(penalty=L1Norm(d), random_state=0, **kw).fit(X, y)
    assert np.all(est.coef_ == 0)
    assert est.intercept_[0] == pytest.approx(np.log(y.mean() / (1 - y.mean())), abs=1e-3)
    l1 = DPLogisticRegression(penalty="l1", random_state=0, **kw).fit(X, y)
    assert abs(l1.intercept_[0]) < 1e-3


# ----------------------------------------------------------------------------- recovery
@pytest.mark.parametrize(
    "mechanism, l1_ratio",
    [("objective", 1.0), ("structured-output", 0.5)],
)
def test_overlapping_group_norm_recovers_active_groups(group_data, mechanism, l1_ratio):
    X, y = group_data
    est = _norm_fit(X, y, GroupLinfNorm(OVERLAPPING, D), l1_ratio=l1_ratio, mechanism=mechanism)
    c = np.abs(est.coef_.ravel())
    active, inactive = c[:3], c[6:]  # coordinate 3 is shared with group 2, 4-5 in group 2
    assert active.min() > 1.0
    assert inactive.max() < 0.02 * active.min()
    assert (est.predict(X) == y).mean() > 0.9
    # a ridge fit (objective perturbation, same Λ) spreads weight over the inactive groups
    ridge = clone(est).set_params(penalty="l2", mechanism="objective").fit(X, y)
    assert np.abs(ridge.coef_.ravel()[6:]).max() > 5 * inactive.max()


def test_dual_frank_wolfe_with_a_disjoint_group_norm(group_data):
    X, y = group_data
    est = _norm_fit(X, y, GroupLinfNorm(DISJOINT, D), mechanism="dual-frank-wolfe")
    c = np.abs(est.coef_.ravel())
    group_max = [c[g].max() for g in DISJOINT]
    assert group_max[0] > 10 * max(group_max[2:])
    assert (est.predict(X) == y).mean() > 0.9


def test_chain_tv_norm_as_penalty_fits():
    rng = np.random.default_rng(4)
    n, d = 1500, 8
    X = _unit_rows(n, d, rng)
    w = np.r_[np.full(4, 1.5), np.zeros(4)]  # piecewise constant
    y = (3 * X @ w > 0).astype(int)
    est = _norm_fit(X, y, ChainTVNorm(d, mu=0.1), l1_ratio=1.0, mechanism="objective")
    c = est.coef_.ravel()
    # equal values on each block (fused), the inactive block shrunk towards 0
    assert np.ptp(c[:4]) < 0.05 * c[:4].mean() and np.ptp(c[4:]) < 0.05 * c[:4].mean()
    assert np.abs(c[4:]).max() < 0.1 * c[:4].mean()


# ----------------------------------------------------------------------------- sklearn, errors
def test_clone_get_params_fit_predict_with_a_norm():
    rng = np.random.default_rng(5)
    X = 0.5 * _unit_rows(300, 4, rng)
    y = X @ np.array([1.0, -1.0, 0.0, 0.0])
    norm = GroupLinfNorm([[0, 1], [2, 3]], 4)
    est = DPLinearRegression(
        penalty=norm, alpha=0.01, mechanism="objective", constraint_radius=5.0, random_state=0
    )
    twin = clone(est)
    assert twin.get_params()["penalty"] is not None
    assert repr(twin.get_params()["penalty"]) == repr(norm)
    a = est.fit(X, y).predict(X)
    b = twin.fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)
    assert isinstance(est.regularizer_, GroupLinfNorm) and est.regularizer_.d == 5


def test_norm_of_the_wrong_dimension_is_refused():
    X = np.zeros((20, 3)) + 0.1
    y = np.r_[np.zeros(10), np.ones(10)]
    est = DPLogisticRegression(penalty=L1Norm(4), classes=[0, 1])
    with pytest.raises(InvalidDataError, match="penalty"):
        est.fit(X, y)


def test_norm_penalty_checks_l1_ratio():
    X = np.zeros((20, 3)) + 0.1
    y = np.r_[np.zeros(10), np.ones(10)]
    est = DPLogisticRegression(penalty=L1Norm(3), l1_ratio=1.5, classes=[0, 1])
    with pytest.raises(InvalidPrivacyParameter, match="l1_ratio"):
        est.fit(X, y)


def test_no_intercept_uses_the_norm_itself():
    rng = np.random.default_rng(6)
    X = 0.5 * _unit_rows(200, 3, rng)
    y = (X[:, 0] > 0).astype(int)
    norm = L1Norm(3)
    est = DPLogisticRegression(
        penalty=norm, fit_intercept=False, alpha=0.1, classes=[0, 1], random_state=0
    ).fit(X, y)
    assert type(est.regularizer_) is L1Norm and est.regularizer_.alpha == pytest.approx(0.05)


def test_dp_gd_applies_the_norm_by_its_prox_and_leaves_the_intercept():
    """DP-GD's proximal step with a huge norm weight zeroes every feature
    coefficient exactly; the intercept (outside Ω) still moves."""
    rng = np.random.default_rng(7)
    n, d = 500, 4
    X = 0.5 * _unit_rows(n, d, rng)
    y = (rng.uniform(size=n) < 0.8).astype(int)
    est = DPLogisticRegression(
        penalty=GroupLinfNorm([[0, 1], [2, 3]], d),
        alpha=50.0,
        l1_ratio=1.0,
        mechanism="dp-gd",
        epochs=30,
        epsilon=10.0,
        accountant="rdp",  # fast calibration
        classes=[0, 1],
        random_state=0,
    ).fit(X, y)
    assert np.all(est.coef_ == 0)
    assert est.intercept_[0] > 0.1  # pulled towards logit(0.8) ≈ 1.39


def test_latent_group_l2_norm_as_penalty(group_data):
    """The overlapping latent group ℓ1/ℓ2 norm as penalty= with objective and
    structured output perturbation: the inactive groups stay near 0; the dual
    Frank-Wolfe refuses it (its dual ball is not a polytope)."""
    from dperm.norms import LatentGroupL2Norm

    X, y = group_data
    norm = LatentGroupL2Norm(OVERLAPPING, D)
    for mechanism, l1_ratio in (("objective", 1.0), ("structured-output", 0.5)):
        est = _norm_fit(X, y, norm, l1_ratio=l1_ratio, mechanism=mechanism)
        c = np.abs(est.coef_.ravel())
        assert c[:3].min() > 1.0 and c[7:].max() < 0.05 * c[:3].min()
        assert (est.predict(X) == y).mean() > 0.9
    with pytest.raises(InvalidDataError, match="not a polytope"):
        DPLogisticRegression(
            penalty=norm, alpha=0.02, mechanism="dual-frank-wolfe", classes=[0, 1]
        ).fit(X, y)
