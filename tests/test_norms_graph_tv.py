"""GraphTVNorm (issue #40): Ω(θ) = μ‖θ‖₁ + Σ_{(i,j)∈E} w_ij|θ_i − θ_j| on small graphs
— a cycle with a chord, a star, a 3×3 grid — against brute force over all sets, an
independent linear program (the dual ball as a zonotope), the generic Lovász
extension, and the prox's optimality conditions; the path graph is ChainTVNorm; the
norm runs in structured output perturbation and the private dual Frank-Wolfe."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog, lsq_linear
from scipy.sparse.csgraph import connected_components

from dperm.algorithms import dual_frank_wolfe as dfw
from dperm.algorithms import output_perturbation as outp
from dperm.algorithms import structured_output_perturbation as sop
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter
from dperm.losses import Logistic
from dperm.norms import ChainTVNorm, GraphTVNorm, gaussian_width, lovasz_extension
from dperm.norms.graph import path_edges
from dperm.solvers import minimize


def _grid(r: int, c: int) -> list[list[int]]:
    edges = []
    for i in range(r):
        for j in range(c):
            k = i * c + j
            if j + 1 < c:
                edges.append([k, k + 1])
            if i + 1 < r:
                edges.append([k, k + c])
    return edges


CHORD = GraphTVNorm([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0], [0, 2]], 5, mu=0.3,
                    weights=[1.0, 2.0, 0.5, 1.0, 1.5, 0.7])  # fmt: skip
STAR = GraphTVNorm([[0, 1], [0, 2], [0, 3], [0, 4], [0, 5]], 6, mu=0.4)
GRID = GraphTVNorm(_grid(3, 3), 9, mu=0.25, weights=np.linspace(0.5, 2.0, 12))
GRAPHS = pytest.mark.parametrize("norm", [CHORD, STAR, GRID], ids=["chord", "star", "grid"])


def _masks(d: int) -> np.ndarray:
    codes = np.arange(1, 1 << d)
    return ((codes[:, None] >> np.arange(d)) & 1).astype(bool)


def _G(norm: GraphTVNorm, mask: np.ndarray) -> float:
    """μ|A| + Cut(A) by a loop over the edges (independent of ``set_function``)."""
    cut = sum(w for (i, j), w in zip(norm.edges, norm.weights, strict=True) if mask[i] != mask[j])
    return norm.mu * int(mask.sum()) + cut


def _brute_dual(norm, s):
    """max over ∅ ≠ A ⊆ V of |s(A)|/G(A)."""
    return max(abs(float(s[m].sum())) / _G(norm, m) for m in _masks(norm.d))


def _zonotope_dual(norm, s):
    """Ω*(s) = min t s.t. s = μa + DᵀWb, ‖a‖∞ ≤ t, ‖b‖∞ ≤ t (the dual ball as a
    zonotope; an LP in (a, b, t), not the primal LP of the norm)."""
    d, m = norm.d, norm.edges.shape[0]
    DtW = np.zeros((d, m))
    for k, ((i, j), w) in enumerate(zip(norm.edges, norm.weights, strict=True)):
        DtW[i, k], DtW[j, k] = w, -w
    n_var = d + m + 1
    A_eq = np.hstack([norm.mu * np.eye(d), DtW, np.zeros((d, 1))])
    box = np.hstack([np.eye(d + m), -np.ones((d + m, 1))])
    A_ub = np.vstack([box, np.hstack([-np.eye(d + m), -np.ones((d + m, 1))])])
    c = np.zeros(n_var)
    c[-1] = 1.0
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(2 * (d + m)), A_eq=A_eq, b_eq=s,
                  bounds=[(None, None)] * (d + m) + [(0, None)], method="highs")  # fmt: skip
    assert res.status == 0
    return float(res.fun)


def _connected(norm, mask) -> bool:
    idx = np.flatnonzero(mask)
    adj = np.zeros((idx.size, idx.size))
    pos = {int(v): k for k, v in enumerate(idx)}
    for i, j in norm.edges:
        if mask[i] and mask[j]:
            adj[pos[int(i)], pos[int(j)]] = 1.0
    return connected_components(adj, directed=False)[0] == 1


@GRAPHS
def test_norm_is_the_lovasz_extension_on_both_signs(norm):
    """Ω(θ) = g(θ⁺) + g(θ⁻), g the Lovász extension of G(A) = μ|A| + Cut(A)
    (module docstring), against the generic sorting formula, and G on sets."""
    rng = np.random.default_rng(0)
    masks = _masks(norm.d)
    np.testing.assert_allclose(norm.set_function(masks), [_G(norm, m) for m in masks])
    for _ in range(10):
        theta = rng.normal(size=norm.d) * rng.integers(0, 2, size=norm.d)
        pos, neg = np.maximum(theta, 0), np.maximum(-theta, 0)
        ref = lovasz_extension(lambda m: _G(norm, m), pos)
        ref += lovasz_extension(lambda m: _G(norm, m), neg)
        direct = norm.mu * np.abs(theta).sum() + sum(
            w * abs(theta[i] - theta[j]) for (i, j), w in zip(norm.edges, norm.weights, strict=True)
        )
        assert norm.norm(theta) == pytest.approx(ref, rel=1e-12)
        assert norm.norm(theta) == pytest.approx(direct, rel=1e-12)


@GRAPHS
def test_dual_norm_and_lmo_against_brute_force_and_an_independent_lp(norm):
    rng = np.random.default_rng(1)
    for k in range(12):
        s = rng.normal(size=norm.d)
        if k % 3 == 0:  # near-constant signals: large sets win
            s = 1.0 + 0.1 * s
        dual = norm.dual_norm(s)
        assert dual == pytest.approx(_brute_dual(norm, s), rel=1e-9)
        assert dual == pytest.approx(_zonotope_dual(norm, s), rel=1e-7)
        x = norm.lmo(s, radius=2.0)
        assert norm.norm(x) == pytest.approx(2.0, rel=1e-12)
        assert float(s @ x) == pytest.approx(-2.0 * dual, rel=1e-9)
        # an extreme point of the ball: ±1_A/G(A) (scaled by the radius) with A connected
        A = x != 0
        assert np.allclose(np.abs(x[A]), 2.0 / _G(norm, A)) and len(np.unique(np.sign(x[A]))) == 1
        assert _connected(norm, A)
        th = rng.normal(size=norm.d)  # Hölder
        assert float(s @ th) <= dual * norm.norm(th) + 1e-9
    zero = norm.lmo(np.zeros(norm.d))
    assert norm.norm(zero) == pytest.approx(1.0)


def test_the_lp_path_above_d_12_agrees_with_enumeration():
    """d = 16 (a 4×4 grid, weighted): the LP + level-set path against all 65535 sets."""
    norm = GraphTVNorm(_grid(4, 4), 16, mu=0.2, weights=np.linspace(0.3, 1.7, 24))
    masks = _masks(16)
    G = np.array(norm.mu * masks.sum(axis=1), dtype=float)
    for (i, j), w in zip(norm.edges, norm.weights, strict=True):
        G += w * (masks[:, i] != masks[:, j])
    rng = np.random.default_rng(6)
    for k in range(6):
        s = rng.normal(size=16) + (0.8 if k % 2 else 0.0)
        ref = float(np.max(np.abs(masks @ s) / G))
        assert norm.dual_norm(s) == pytest.approx(ref, rel=1e-9)
        x = norm.lmo(s)
        assert float(s @ x) == pytest.approx(-ref, rel=1e-9)
        assert _connected(norm, x != 0)


@GRAPHS
def test_prox_meets_its_optimality_conditions(norm):
    """p = prox_{τΩ}(v) iff Ω*(v − p) ≤ τ and ⟨v − p, p⟩ = τΩ(p) (the subdifferential of
    a norm), with Ω* by brute force over the sets."""
    rng = np.random.default_rng(2)
    for tau in (0.05, 0.4, 1.5, 10.0):
        v = rng.normal(size=norm.d) * 2.0
        p = norm.scaled(0.5).prox(v, 2.0 * tau)  # τ = step·alpha
        r = v - p
        assert _brute_dual(norm, r) <= tau * (1 + 1e-9) + 1e-12
        assert float(r @ p) == pytest.approx(tau * norm.norm(p), rel=1e-9, abs=1e-12)
    big = rng.normal(size=norm.d)
    assert np.all(norm.prox(big, 1e3 * norm.dual_norm(big)) == 0.0)
    np.testing.assert_array_equal(norm.prox(big, 0.0), big)


def test_prox_of_a_large_grid_uses_the_sparse_solver_and_is_certified():
    """A 16×16 grid (480 edges > the dense limit): the sparse path, checked by the
    same optimality conditions with the LP dual norm."""
    norm = GraphTVNorm(_grid(16, 16), 256, mu=0.1)
    assert norm.edges.shape[0] > 300
    rng = np.random.default_rng(3)
    truth = np.repeat([0.0, 2.0, -1.0, 0.5], 64)
    v = truth + 0.3 * rng.normal(size=256)
    p = norm.prox(v, 0.3)
    r = v - p
    assert norm.dual_norm(r) <= 0.3 * (1 + 1e-7)
    assert float(r @ p) == pytest.approx(0.3 * norm.norm(p), rel=1e-7)
    assert np.unique(np.round(p, 8)).size < 40  # fused: 256 values in v


def test_path_graph_is_the_chain_and_the_friedman_prox():
    """GraphTVNorm on a path = ChainTVNorm; the prox equals soft ∘ TV-prox computed
    directly on the chain's difference matrix (Friedman et al. 2007, Prop. 1)."""
    d, mu = 8, 0.4
    graph, chain = GraphTVNorm(path_edges(d), d, mu=mu), ChainTVNorm(d, mu=mu)
    rng = np.random.default_rng(4)
    Dt = np.diff(np.eye(d), axis=0).T
    for tau in (0.1, 0.8):
        v = rng.normal(size=d) * 2
        z = lsq_linear(Dt, v, bounds=(-tau, tau), method="bvls", tol=1e-14).x
        w = v - Dt @ z
        ref = np.sign(w) * np.maximum(np.abs(w) - tau * mu, 0.0)
        np.testing.assert_allclose(graph.prox(v, tau), ref, atol=1e-10)
        np.testing.assert_allclose(chain.prox(v, tau), ref, atol=1e-10)
        assert graph.norm(v) == pytest.approx(mu * np.abs(v).sum() + np.abs(np.diff(v)).sum())
        assert chain.dual_norm(v) == pytest.approx(graph.dual_norm(v), rel=1e-12)
        np.testing.assert_allclose(chain.lmo(v), graph.lmo(v))
    assert dfw.vertex_radius(dfw.dual_vertex_blocks(chain), d) == pytest.approx(
        dfw.vertex_radius(dfw.dual_vertex_blocks(graph), d)
    )


@GRAPHS
def test_geometry_width_and_radii(norm):
    """The exact dual-ball width E Ω(g) against Monte Carlo; the unit ball's ℓ2 radius
    against the generators; the dual ball's vertex radius (the dual Frank-Wolfe's ρ)
    against all vertices of the zonotope — exact on the bipartite star and grid."""
    rng = np.random.default_rng(5)
    w = gaussian_width(norm, ball="dual")
    assert w.exact
    g = rng.normal(size=(40000, norm.d))
    vals = np.array([norm.norm(x) for x in g])
    assert abs(vals.mean() - w.value) < 4 * vals.std() / math.sqrt(g.shape[0])
    gens = [math.sqrt(m.sum()) / _G(norm, m) for m in _masks(norm.d)]
    assert norm.unit_ball_l2_radius() == pytest.approx(max(gens))
    blocks = dfw.dual_vertex_blocks(norm)
    rho = dfw.vertex_radius(blocks, norm.d)
    c = norm.mu + np.bincount(norm.edges.ravel(), np.repeat(norm.weights, 2), norm.d)
    assert rho == pytest.approx(np.linalg.norm(c))  # μ + weighted degree, per coordinate
    if norm is GRID:  # bipartite (colour (i + j) mod 2): the colour signs reach ‖c‖
        colour = np.array([1.0 if (k // 3 + k % 3) % 2 == 0 else -1.0 for k in range(9)])
        v = norm.mu * colour
        for (i, j), w in zip(norm.edges, norm.weights, strict=True):
            v[[i, j]] += w * colour[i] * np.array([1.0, -1.0])
        assert np.linalg.norm(v) == pytest.approx(rho)
    else:  # every vertex of the zonotope (2^{d+|E|} sign patterns)
        best = 0.0
        for signs in itertools.product((-1.0, 1.0), repeat=len(blocks)):
            v = np.zeros(norm.d)
            for (idx, V), sg in zip(blocks, signs, strict=True):
                v[idx] += sg * V[0]
            best = max(best, float(np.linalg.norm(v)))
        assert rho >= best - 1e-12
        if norm is STAR:  # bipartite: exact
            assert rho == pytest.approx(best)
        else:  # the chord closes a triangle: an upper bound only
            assert rho > best
    # the noiseless selection over the blocks is the exact LMO of the dual ball: Ω(θ)
    sel = dfw._Selector(blocks, norm.d, 1.0, "exponential")
    for _ in range(3):
        theta = rng.normal(size=norm.d)
        assert float(sel(theta, 1e12, 1.0, rng) @ theta) == pytest.approx(norm.norm(theta))


def test_bad_input_is_refused():
    with pytest.raises(InvalidDataError, match="different vertices"):
        GraphTVNorm([[0, 0]], 3)
    with pytest.raises(InvalidDataError, match=r"\[0, 3\)"):
        GraphTVNorm([[0, 3]], 3)
    with pytest.raises(InvalidDataError, match="repeat"):
        GraphTVNorm([[0, 1], [1, 0]], 3)
    with pytest.raises(InvalidDataError, match="shape"):
        GraphTVNorm([0, 1, 2], 3)
    with pytest.raises(InvalidDataError, match="weights"):
        GraphTVNorm([[0, 1]], 3, weights=[0.0])
    with pytest.raises(InvalidPrivacyParameter, match="mu"):
        GraphTVNorm([[0, 1]], 3, mu=0.0)
    with pytest.raises(InvalidDataError):
        STAR.norm(np.ones(5))
    empty = GraphTVNorm([], 3, mu=2.0)  # no edge: 2‖θ‖₁
    assert empty.norm(np.array([1.0, -2.0, 0.0])) == 6.0
    np.testing.assert_allclose(empty.prox(np.array([3.0, -1.0, 0.5]), 1.0), [1.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- in the algorithms
def _graph_data(n: int, norm: GraphTVNorm, seed: int = 0):
    """Logistic data whose true θ is constant on the star's leaves 1–3 and 0 elsewhere."""
    rng = np.random.default_rng(seed)
    d = norm.d
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    w = np.zeros(d)
    w[1:4] = 3.0
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def test_graph_tv_runs_in_the_private_dual_frank_wolfe():
    """Algorithm 2 with the star's TV: valid event and sensitivity, and at a large ε
    the release is close to the non-private dual solution (Algorithm 1)."""
    X, y = _graph_data(4000, STAR)
    kw = dict(norm=STAR, data_norm=1.0, alpha=0.05, lam=0.002, denoise="none")
    exact = minimize(Logistic(), X, y, l2=0.05, regularizer=STAR.scaled(0.002), tol=1e-10).theta
    res = dfw.fit(Logistic(), X, y, epsilon=1.0, delta=1e-6, random_state=0, **kw)
    dg = res.diagnostics
    rho = dfw.vertex_radius(dfw.dual_vertex_blocks(STAR), STAR.d)
    assert dg["score_sensitivity"] == pytest.approx(
        2 * Logistic().lipschitz(1.0) / (4000 * 0.05) * 0.002 * rho
    )
    assert res.event.events[0].count == dg["n_steps"] and np.all(np.isfinite(res.theta))
    far = np.linalg.norm(res.theta - exact)
    big = dfw.fit(Logistic(), X, y, epsilon=1e4, delta=1e-6, n_steps=200, random_state=0, **kw)
    near = np.linalg.norm(big.theta - exact)
    assert near < 0.05 * np.linalg.norm(exact) and near < far
    lap = dfw.fit(Logistic(), X, y, epsilon=1.0, delta=1e-6, selection="laplace",
                  n_steps=3, random_state=0, **kw)  # fmt: skip
    assert np.all(np.isfinite(lap.theta))


def test_graph_tv_is_the_output_perturbation_of_its_objective():
    X, y = _graph_data(300, GRID)
    kw = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, alpha=0.1, random_state=3)
    a = sop.fit(Logistic(), X, y, norm=GRID, lam=5.0, denoise="none", **kw)
    b = outp.fit(Logistic(), X, y, regularizer=GRID.scaled(5.0 / 300), **kw)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-12)
    assert a.event == b.event
    hard = sop.fit(Logistic(), X, y, norm=GRID, lam=5.0, **kw)  # default hard denoising
    assert hard.diagnostics["denoise"] == "hard" and hard.diagnostics["denoise_threshold"] > 0


def test_graph_tv_as_an_estimator_penalty_in_the_dual_frank_wolfe():
    """With an intercept the estimator's feature norm leaves the last coordinate
    unpenalized; its vertex blocks are the graph's (no block on the intercept)."""
    from dperm import DPLogisticRegression

    X, y = _graph_data(2000, STAR, seed=1)
    est = DPLogisticRegression(epsilon=1.0, penalty=STAR, alpha=0.02, classes=[-1, 1],
                               mechanism="dual-frank-wolfe", random_state=0).fit(X, y)  # fmt: skip
    assert est.coef_.shape == (1, STAR.d) and np.all(np.isfinite(est.coef_))
    assert est.score(X, y) > 0.6
