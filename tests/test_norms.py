"""Tests of dperm.norms: closed forms vs the generic submodular path vs brute force."""

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog, minimize

from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter
from dperm.losses import Logistic
from dperm.norms import (
    GroupLinfNorm,
    L1Norm,
    LinfNorm,
    NormBall,
    SubmodularNorm,
    gaussian_width,
    is_submodular,
    lovasz_extension,
    min_norm_point,
)
from dperm.solvers import minimize as dperm_minimize

D = 5
OVERLAP = [[0, 1, 2], [2, 3], [3, 4], [1, 4]]


def _generic(norm):
    return SubmodularNorm(norm.F, norm.d, norm.alpha)


def _named(d=D):
    return [
        L1Norm(d),
        LinfNorm(d),
        GroupLinfNorm([[0, 1], [2, 3, 4]], d),
        GroupLinfNorm(OVERLAP, d),
    ]


def _brute_dual(F, s):
    u = np.abs(s)
    best = 0.0
    for r in range(1, u.size + 1):
        for A in itertools.combinations(range(u.size), r):
            m = np.zeros(u.size, bool)
            m[list(A)] = True
            best = max(best, u[m].sum() / F(m))
    return best


def _sqrt_card(m):  # F(A) = √|A|: submodular, non-decreasing, no closed-form norm
    return math.sqrt(np.count_nonzero(m))


@pytest.mark.parametrize("k", range(4))
def test_closed_forms_match_generic_path(k):
    rng = np.random.default_rng(k)
    norm = _named()[k]
    gen = _generic(norm)
    for _ in range(5):
        v = rng.normal(size=D) * 2
        assert norm.norm(v) == pytest.approx(gen.norm(v), abs=1e-12)
        assert norm.dual_norm(v) == pytest.approx(gen.dual_norm(v), abs=1e-10)
        assert norm.dual_norm(v) == pytest.approx(_brute_dual(norm.F, v), abs=1e-10)
        np.testing.assert_allclose(norm.prox(v, 0.6), gen.prox(v, 0.6), atol=1e-8)
        assert float(norm.lmo(v) @ v) == pytest.approx(float(gen.lmo(v) @ v), abs=1e-10)


def test_named_values_are_the_textbook_norms():
    v = np.array([3.0, -1.0, 0.5, -4.0, 2.0])
    assert L1Norm(D).norm(v) == pytest.approx(10.5)
    assert L1Norm(D).dual_norm(v) == pytest.approx(4.0)
    assert LinfNorm(D).norm(v) == pytest.approx(4.0)
    assert LinfNorm(D).dual_norm(v) == pytest.approx(10.5)
    # overlapping groups: Σ_g ‖v_g‖∞
    assert GroupLinfNorm(OVERLAP, D).norm(v) == pytest.approx(3 + 4 + 4 + 2)
    np.testing.assert_allclose(L1Norm(D, alpha=2.0).prox(v, 0.5), [2, 0, 0, -3, 1])


def test_generic_norm_against_lovasz_and_lp():
    """Ω = f(|θ|); Ω*(s) equals the LP max ⟨s, θ⟩ over {Ω ≤ 1} written with the
    enumerated vertices of |P|(F) (Ω(θ) = max_w ⟨w, θ⟩); the LMO attains it."""
    d = 4
    norm = SubmodularNorm(_sqrt_card, d, check=True)
    W = norm.dual_ball_vertices()
    rng = np.random.default_rng(1)
    for _ in range(4):
        th = rng.normal(size=d)
        assert norm.norm(th) == pytest.approx(lovasz_extension(_sqrt_card, np.abs(th)))
        assert norm.norm(th) == pytest.approx(np.max(W @ th), rel=1e-12)
        s = rng.normal(size=d)
        lp = linprog(-s, A_ub=W, b_ub=np.ones(len(W)), bounds=[(None, None)] * d)
        assert lp.status == 0
        assert norm.dual_norm(s) == pytest.approx(-lp.fun, rel=1e-8)
        v = norm.lmo(s)
        assert norm.norm(v) == pytest.approx(1.0)
        assert float(v @ s) == pytest.approx(lp.fun, rel=1e-8)


def test_generic_prox_against_qp():
    """prox_{τΩ}(v) minimizes τΩ(θ) + ½‖θ − v‖²: compare with SLSQP on the
    epigraph form Ω(θ) ≤ t ⟺ ⟨w, θ⟩ ≤ t for every vertex w."""
    d = 4
    norm = SubmodularNorm(_sqrt_card, d)
    W = norm.dual_ball_vertices()
    v = np.array([1.5, -0.7, 0.2, 2.5])
    tau = 0.8
    p = norm.prox(v, tau)

    def obj(z):
        return tau * z[-1] + 0.5 * float((z[:-1] - v) @ (z[:-1] - v))

    cons = {"type": "ineq", "fun": lambda z: z[-1] - W @ z[:-1]}
    ref = minimize(
        obj,
        np.append(v, np.max(W @ v)),
        constraints=[cons],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    np.testing.assert_allclose(p, ref.x[:-1], atol=1e-5)
    assert obj(np.append(p, norm.norm(p))) <= ref.fun + 1e-10


def test_greedy_vertex_is_in_dual_ball_and_maximizes():
    norm = GroupLinfNorm(OVERLAP, D)
    rng = np.random.default_rng(3)
    for _ in range(5):
        c = rng.normal(size=D)
        w = norm.greedy_vertex(c)
        assert norm.dual_norm(w) <= 1 + 1e-10
        assert float(c @ w) == pytest.approx(norm.norm(c))


def test_min_norm_point_on_simplex():
    # the min-norm point of the probability simplex is the uniform vector
    d = 6
    x = min_norm_point(lambda c: np.eye(d)[int(np.argmin(c))], np.eye(d)[0])
    np.testing.assert_allclose(x, np.full(d, 1 / d), atol=1e-12)


def test_is_submodular():
    assert is_submodular(_sqrt_card, 5)
    assert is_submodular(GroupLinfNorm(OVERLAP, D).F, D)
    assert not is_submodular(lambda m: float(np.count_nonzero(m)) ** 2, 4)
    with pytest.raises(InvalidDataError, match="d ≤"):
        is_submodular(_sqrt_card, 17)


def test_bad_input():
    with pytest.raises(InvalidDataError, match="F\\(∅\\)"):
        SubmodularNorm(lambda m: 1.0, 3)
    with pytest.raises(InvalidDataError, match="> 0"):
        SubmodularNorm(lambda m: float(m[1:].any()), 3)
    with pytest.raises(InvalidDataError, match="not submodular"):
        SubmodularNorm(lambda m: float(np.count_nonzero(m)) ** 2, 3, check=True)
    with pytest.raises(InvalidDataError, match="at least one group"):
        GroupLinfNorm([[0, 1]], 3)
    with pytest.raises(InvalidPrivacyParameter):
        L1Norm(3, alpha=-1.0)
    with pytest.raises(InvalidDataError, match="shape"):
        L1Norm(3).norm(np.ones(4))
    with pytest.raises(InvalidDataError, match="ball"):
        gaussian_width(L1Norm(3), ball="primal")


def test_gaussian_width_exact_and_monte_carlo():
    d = 7
    rng = np.random.default_rng(0)
    g = rng.standard_normal((200_000, d))
    w1 = gaussian_width(L1Norm(d))
    assert w1.exact
    assert w1.value == pytest.approx(np.abs(g).max(axis=1).mean(), rel=5e-3)
    winf = gaussian_width(LinfNorm(d))
    assert winf.value == pytest.approx(d * math.sqrt(2 / math.pi))
    assert gaussian_width(L1Norm(d), ball="dual").value == pytest.approx(winf.value)
    # Monte Carlo: the CI of a disjoint group norm covers an independent estimate
    norm = GroupLinfNorm([[0, 1, 2], [3, 4, 5, 6]], d)
    mc = gaussian_width(norm, n_samples=2000, random_state=1)
    ref = np.maximum(np.abs(g[:, :3]).sum(1), np.abs(g[:, 3:]).sum(1)).mean()
    assert not mc.exact and mc.ci_low < ref < mc.ci_high
    assert mc.ci_high - mc.ci_low < 0.2 * mc.value


def test_norm_ball_constraint():
    norm = GroupLinfNorm(OVERLAP, D)
    ball = NormBall(norm, 2.0)
    v = np.array([3.0, -1.0, 0.5, -4.0, 2.0])
    p = ball.project(v)
    assert norm.norm(p) == pytest.approx(2.0, rel=1e-8)
    # optimality of the projection: ⟨v − p, q − p⟩ ≤ 0 for vertices q of the ball
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = ball.lmo(rng.normal(size=D))
        assert ball.contains(q)
        assert float((v - p) @ (q - p)) <= 1e-6
    assert ball.l2_radius >= np.linalg.norm(p)


def test_norm_as_penalty_in_solver():
    """A SubmodularNorm is a Regularizer: FISTA with its prox reaches the
    optimum, checked by the subgradient condition −∇L ∈ λ∂Ω(θ) via Ω*."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, D)) / 3
    y = np.where(X[:, 0] - X[:, 3] > 0, 1.0, -1.0)
    norm = GroupLinfNorm(OVERLAP, D, alpha=0.05)
    res = dperm_minimize(Logistic(), X, y, l2=0.01, regularizer=norm, tol=1e-9)
    assert res.converged
    g = Logistic().gradient(res.theta, X, y) + 0.01 * res.theta
    # optimality: Ω*(−g) ≤ alpha and ⟨−g, θ⟩ = alpha·Ω(θ)
    assert norm.dual_norm(-g) <= 0.05 * (1 + 1e-5)
    assert float(-g @ res.theta) == pytest.approx(norm.value(res.theta), rel=1e-5, abs=1e-8)


def test_chain_tv_norm():
    from dperm.norms import ChainTVNorm

    d = 7
    norm = ChainTVNorm(d, mu=0.5)
    v = np.array([3.0, 3.1, 2.9, -1.0, -1.2, 0.0, 0.1])
    assert norm.norm(v) == pytest.approx(0.5 * np.abs(v).sum() + np.abs(np.diff(v)).sum())
    rng = np.random.default_rng(0)
    for tau in (0.1, 0.7, 3.0):
        p = norm.prox(v, tau)
        r = v - p  # optimality of the prox of a norm: Ω*(r) ≤ τ and ⟨r, p⟩ = τΩ(p)
        assert norm.dual_norm(r) <= tau * (1 + 1e-7) + 1e-9
        assert float(r @ p) == pytest.approx(tau * norm.norm(p), rel=1e-7, abs=1e-9)
    # equal-value sparsity: a moderate τ fuses neighbouring coefficients
    p = norm.prox(v, 0.7)
    assert np.unique(np.round(p, 8)).size < np.unique(v).size
    for _ in range(5):
        s = rng.normal(size=d)
        q = norm.lmo(s)
        assert norm.norm(q) == pytest.approx(1.0, rel=1e-7)
        assert float(-q @ s) == pytest.approx(norm.dual_norm(s), rel=1e-7)
        th = rng.normal(size=d)  # Hölder
        assert float(s @ th) <= norm.dual_norm(s) * norm.norm(th) + 1e-9
    # the dual ball's width is exact: E Ω(g) = √(2/π)(μd + √2(d − 1)), checked by Monte Carlo
    w = gaussian_width(norm, ball="dual")
    assert w.exact
    assert w.value == pytest.approx(math.sqrt(2 / math.pi) * (0.5 * d + math.sqrt(2) * (d - 1)))
    g = rng.normal(size=(20000, d))
    vals = 0.5 * np.abs(g).sum(axis=1) + np.abs(np.diff(g, axis=1)).sum(axis=1)
    assert abs(vals.mean() - w.value) < 4 * vals.std() / math.sqrt(g.shape[0])
    with pytest.raises(InvalidPrivacyParameter):
        ChainTVNorm(d, mu=0.0)
    with pytest.raises(InvalidPrivacyParameter):
        ChainTVNorm(1)


# ----------------------------------------------------------------------------- latent group ℓ1/ℓ2
LATENT = [[0, 1, 2, 3], [3, 4, 5], [5, 6, 7, 0]]
LATENT_W = [1.0, 2.0, 1.5]


def test_latent_group_norm_closed_forms_on_disjoint_groups():
    """Disjoint groups: Ω = Σ w_g‖θ_g‖, prox = group soft-thresholding (GroupL2 for
    unit weights), Ω* = max ‖s_g‖/w_g, LMO on the best group's disc."""
    from dperm.norms import LatentGroupL2Norm
    from dperm.regularizers import GroupL2

    groups, w = [[0, 1], [2, 3, 4], [5, 6, 7]], np.array([1.0, 2.0, 0.5])
    norm = LatentGroupL2Norm(groups, 8, weights=w)
    gl = GroupL2(1.0, np.array([0, 0, 1, 1, 1, 2, 2, 2]))
    unit = LatentGroupL2Norm(groups, 8)
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(size=8) * 2
        gn = np.array([np.linalg.norm(v[g]) for g in groups])
        assert norm.norm(v) == pytest.approx(float(w @ gn), rel=1e-12)
        assert norm.dual_norm(v) == pytest.approx(float(np.max(gn / w)), rel=1e-12)
        np.testing.assert_allclose(unit.prox(v, 0.6), gl.prox(v, 0.6), atol=1e-12)
        t = norm.lmo(v, 2.0)
        k = int(np.argmax(gn / w))
        assert norm.norm(t) == pytest.approx(2.0)
        assert t @ v == pytest.approx(-2.0 * norm.dual_norm(v))
        assert np.count_nonzero(t) == len(groups[k])
    assert norm.unit_ball_l2_radius() == 2.0


def test_latent_group_norm_with_overlaps_certificates_and_independent_solver():
    """Overlaps: the value equals the support function of K = {‖s_g‖ ≤ w_g} computed
    independently (SLSQP); the prox satisfies its optimality certificate
    Ω*(v − p) ≤ τ and ⟨v − p, p⟩ = τΩ(p); the LMO attains −Ω*(g); Ω(θ) ≥ ⟨s, θ⟩/Ω*(s)."""
    from dperm.norms import LatentGroupL2Norm

    d = 8
    norm = LatentGroupL2Norm(LATENT, d, weights=LATENT_W)
    rng = np.random.default_rng(1)
    groups = [np.array(g) for g in LATENT]
    cons = [
        {"type": "ineq", "fun": lambda s, g=g, wg=wg: wg**2 - s[g] @ s[g]}
        for g, wg in zip(groups, LATENT_W, strict=True)
    ]
    for _ in range(6):
        theta = rng.normal(size=d)
        ref = minimize(lambda s, t=theta: -(s @ t), np.zeros(d), constraints=cons,
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})  # fmt: skip
        assert norm.norm(theta) == pytest.approx(-ref.fun, rel=1e-6)
        s = rng.normal(size=d)
        assert norm.norm(theta) >= s @ theta / norm.dual_norm(s) - 1e-12
        for tau in (0.1, 0.7, 3.0):
            p = norm.prox(2 * theta, tau)
            q = 2 * theta - p
            assert norm.dual_norm(q) <= tau * (1 + 1e-9)
            assert q @ p == pytest.approx(tau * norm.norm(p), rel=1e-8, abs=1e-10)
        g = rng.normal(size=d)
        assert norm.lmo(g) @ g == pytest.approx(-norm.dual_norm(g))
    # a point on the shared coordinate 3 splits between groups 0 and 1: w = 1 wins
    e3 = np.eye(d)[3]
    assert norm.norm(e3) == pytest.approx(1.0)
    # a large τ kills everything, τ = 0 is the identity
    v = rng.normal(size=d)
    assert not np.any(norm.prox(v, 100.0))
    np.testing.assert_array_equal(norm.prox(v, 0.0), v)


def test_latent_group_norm_ball_width_and_bad_input():
    from dperm.norms import LatentGroupL2Norm

    norm = LatentGroupL2Norm(LATENT, 8, weights=LATENT_W)
    ball = NormBall(norm, 2.0)
    rng = np.random.default_rng(2)
    v = 5 * rng.normal(size=8)
    p = ball.project(v)
    assert norm.norm(p) == pytest.approx(2.0, rel=1e-8)
    assert ball.contains(ball.lmo(rng.normal(size=8)))
    assert ball.l2_radius == pytest.approx(2.0)
    w = gaussian_width(norm, ball="unit", n_samples=400, random_state=0)
    assert not w.exact and w.ci_low < w.value < w.ci_high
    with pytest.raises(InvalidDataError, match="belong"):
        LatentGroupL2Norm([[0, 1]], 3)
    with pytest.raises(InvalidDataError, match="weights"):
        LatentGroupL2Norm([[0, 1], [1, 2]], 3, weights=[1.0, 0.0])
    with pytest.raises(InvalidDataError, match="group 0"):
        LatentGroupL2Norm([[0, 5]], 3)
