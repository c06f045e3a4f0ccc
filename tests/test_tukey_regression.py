"""Tests of dperm.algorithms.tukey_regression (Amin et al. 2023, Algorithm 1).

The privacy proof (module docstring) rests on: depth sensitivity 1 and nested depth
regions under one changed model, a test statistic k* of sensitivity 1, the exact law of
the restricted exponential mechanism, and the Laplace test.  Each is checked here —
the exponential mechanism against its exact cell probabilities, its (ε_em, δ_em)
closeness on a safe pair by an exact hockey-stick divergence — plus utility, the
estimator path and bad input.
"""

from __future__ import annotations

import math
import warnings
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from dperm import DPLinearRegression
from dperm.accounting.events import EpsilonDelta
from dperm.algorithms import tukey_regression as T
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter


def _brute_depth(models, y):
    return min(
        min(int(np.sum(models[:, j] <= y[j])), int(np.sum(models[:, j] >= y[j])))
        for j in range(models.shape[1])
    )


# ----------------------------------------------------------------------- depth and volumes
def test_approximate_depth_matches_its_definition():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(25, 3))
    Y = np.vstack([rng.normal(size=(200, 3)), B[:5]])  # also points on the models
    np.testing.assert_array_equal(T.approximate_tukey_depth(B, Y), [_brute_depth(B, y) for y in Y])
    # m = 25: the coordinate-wise median is a model coordinate, with 13 on each side
    assert T.approximate_tukey_depth(B, np.median(B, axis=0)) == 13


def test_depth_regions_are_the_boxes_of_order_statistics():
    rng = np.random.default_rng(1)
    B = np.sort(rng.normal(size=(12, 2)), axis=0)
    log_w, log_v = T.log_depth_volumes(B)
    assert log_w.shape == (8, 2) and log_v[0] == np.inf and log_v[-1] == -np.inf
    for k in range(1, 7):
        lo, hi = B[k - 1], B[12 - k]
        np.testing.assert_allclose(np.exp(log_v[k]), np.prod(hi - lo))
        Y = rng.uniform(B[0] - 0.5, B[-1] + 0.5, size=(500, 2))
        inside = np.all((Y >= lo) & (Y <= hi), axis=1)
        np.testing.assert_array_equal(T.approximate_tukey_depth(B, Y) >= k, inside)


@pytest.mark.parametrize("seed", range(20))
def test_one_changed_model_moves_depths_volumes_and_k_star_by_at_most_one(seed):
    """The three facts the proof needs, on random model sets and replacements (one of
    them far outside the cloud)."""
    rng = np.random.default_rng(seed)
    m, p = 40, 2
    S = rng.standard_t(3, size=(m, p))
    S2 = S.copy()
    S2[rng.integers(m)] = rng.normal(size=p) * (1000.0 if seed % 2 else 1.0)
    Y = rng.normal(size=(300, p)) * 2
    dT = T.approximate_tukey_depth(S, Y) - T.approximate_tukey_depth(S2, Y)
    assert np.abs(dT).max() <= 1
    _, v = T.log_depth_volumes(np.sort(S, axis=0))
    _, v2 = T.log_depth_volumes(np.sort(S2, axis=0))
    K = m // 2
    for k in range(1, K):
        assert v[k + 1] <= v2[k] + 1e-12 and v2[k] <= v[k - 1] + 1e-12
    for c, log_eta in ((0.5, math.log(1e-3)), (2.0, math.log(1e-2)), (5.0, -1.0)):
        t = T.restriction_depth(m, c, log_eta)
        k1 = T.distance_to_unsafety(v, t, c, log_eta)
        k2 = T.distance_to_unsafety(v2, t, c, log_eta)
        assert abs(k1 - k2) <= 1, (k1, k2, t)


def test_distance_to_unsafety_is_the_largest_k_of_the_condition():
    """Brute force of step 3 of the module docstring."""
    rng = np.random.default_rng(3)
    B = np.sort(rng.normal(size=(200, 2)), axis=0)
    _, v = T.log_depth_volumes(B)
    K = 100
    for c, log_eta in ((1.0, math.log(1e-4)), (3.0, math.log(1e-6))):
        t = T.restriction_depth(200, c, log_eta)

        def cond(k, t=t, c=c, log_eta=log_eta):
            return any(
                c * g >= v[t - k - 2] - v[t + k + g + 1] - log_eta
                for g in range(0, K - t - k)
                if t - k - 2 >= 1
            )

        ks = [k for k in range(0, t) if cond(k)]
        expected = max(ks) if ks else -1
        assert all(cond(k) for k in range(expected + 1))  # monotone
        assert T.distance_to_unsafety(v, t, c, log_eta) == expected


# --------------------------------------------------------------- the exponential mechanism
def _cell_probabilities(B, t, c):
    """Exact law of step 4 on the grid of cells between consecutive model coordinates:
    the depth is constant on each open cell, the density ∝ exp(c·T) on Y_t."""
    edges = [np.unique(B[:, j]) for j in range(B.shape[1])]
    mids = np.meshgrid(*[(e[:-1] + e[1:]) / 2 for e in edges], indexing="ij")
    area = np.multiply.outer(*[np.diff(e) for e in edges])
    pts = np.column_stack([g.ravel() for g in mids])
    depth = T.approximate_tukey_depth(B, pts).reshape(area.shape)
    w = np.where(depth >= t, np.exp(c * depth) * area, 0.0)
    return edges, w / w.sum()


def test_restricted_exponential_mechanism_samples_its_exact_law():
    """Chi-square test of 20 000 draws against the exact cell probabilities (m = 12,
    p = 2, t = 2); the p-value threshold 1e-4 fails a correct sampler with
    probability 1e-4."""
    rng = np.random.default_rng(4)
    B = np.sort(rng.normal(size=(12, 2)), axis=0)
    t, c = 2, 0.7
    edges, prob = _cell_probabilities(B, t, c)
    log_w, log_v = T.log_depth_volumes(B)
    draws = np.array([T._sample(B, log_w, log_v, t, c, rng)[0] for _ in range(20_000)])
    assert np.all(T.approximate_tukey_depth(B, draws) >= t)
    i = np.searchsorted(edges[0], draws[:, 0]) - 1
    j = np.searchsorted(edges[1], draws[:, 1]) - 1
    counts = np.zeros_like(prob)
    np.add.at(counts, (i, j), 1)
    keep = prob * draws.shape[0] >= 5
    assert counts[~keep].sum() <= max(30, 3 * prob[~keep].sum() * draws.shape[0])
    expected = prob[keep] / prob[keep].sum() * counts[keep].sum()
    assert stats.chisquare(counts[keep], expected).pvalue > 1e-4


def _hockey_stick(B1, B2, t, c, eps):
    """sup_A P₁(A) − e^ε P₂(A) for the exact laws of step 4 on two model sets (the
    densities are constant on the common refinement of both grids)."""
    p = B1.shape[1]
    edges = [np.unique(np.concatenate([B1[:, j], B2[:, j]])) for j in range(p)]
    mids = np.meshgrid(*[(e[:-1] + e[1:]) / 2 for e in edges], indexing="ij")
    area = np.multiply.outer(*[np.diff(e) for e in edges]) if p == 2 else np.diff(edges[0])
    pts = np.column_stack([g.ravel() for g in mids])
    dens = []
    for B in (B1, B2):
        dep = T.approximate_tukey_depth(B, pts).reshape(area.shape)
        w = np.where(dep >= t, np.exp(c * dep) * area, 0.0)
        dens.append(w / w.sum())
    return float(np.maximum(dens[0] - math.exp(eps) * dens[1], 0.0).sum())


@pytest.mark.parametrize("seed", range(6))
def test_safe_pairs_are_eps_em_delta_em_close_exactly(seed):
    """The lemma of the proof: where C_0(S) holds, the restricted exponential mechanism
    on S and on any S′ with one model changed is (ε_em, (1 + e^{ε_em})η)-close in both
    directions — checked by the exact hockey-stick divergence (p = 1 and 2)."""
    rng = np.random.default_rng(seed)
    p = 1 + seed % 2
    m, eps_em, log_eta = 60, 6.0, math.log(0.05)
    c = eps_em / 2
    B = np.sort(rng.normal(size=(m, p)), axis=0)
    _, v = T.log_depth_volumes(B)
    t = T.restriction_depth(m, c, log_eta)
    assert T.distance_to_unsafety(v, t, c, log_eta) >= 0  # S is safe
    delta_em = (1 + math.exp(eps_em)) * math.exp(log_eta)
    for trial in range(5):
        B2 = B.copy()
        B2[rng.integers(m)] = rng.normal(size=p) * (10.0 if trial % 2 else 0.5)
        B2 = np.sort(B2, axis=0)
        for a, b in ((B, B2), (B2, B)):
            assert _hockey_stick(a, b, t, c, eps_em) <= delta_em + 1e-12
    # and the bound is not vacuous: moving the lowest model above every other one
    # changes the law (total variation > 0)
    B3 = B.copy()
    B3[0] = B[-1] + 1.0
    assert _hockey_stick(B, np.sort(B3, axis=0), t, c, 0.0) > 0


# -------------------------------------------------------------------------- the test
def test_ptr_release_probability_is_the_laplace_tail():
    """With k* forced to ⌈T⌉ − 1, the test passes with probability
    P[Lap(1/ε_ptr) > f] = ½e^{−ε_ptr f}, f = T − k* (a scale of ε_ptr instead of 1/ε_ptr —
    the bug of a published reference implementation — gives ½e^{−f/ε_ptr} = 0.21 instead
    of 0.40 here: caught)."""
    rng = np.random.default_rng(5)
    models = rng.normal(size=(200, 2))
    eps, delta = 1.0, 1e-3
    thr = T.ptr_threshold(0.5, delta)
    assert thr == pytest.approx(math.log(1 / (2 * delta)) / 0.5)
    k = math.ceil(thr) - 1
    frac = thr - k  # pass iff Lap > thr − k
    expected = 0.5 * math.exp(-0.5 * frac)
    n = 4000
    with mock.patch.object(T, "distance_to_unsafety", lambda *a: k):
        passed = sum(
            T.release(models, epsilon=eps, delta=delta, random_state=s).diagnostics["ptr_passed"]
            for s in range(n)
        )
    assert stats.binomtest(passed, n, expected).pvalue > 1e-4


def _closed_form_constants(m, eps, delta, split):
    """(c, ln η, t, T) of a run, written out from the module docstring (not from the
    code): c = ε_em/2, η = δ/(e^{ε_ptr}(1 + e^{ε_em})), t = max(1, ⌊(K − g₀ + 2)/2⌋)
    with K = ⌊m/2⌋ and g₀ = ⌈ln(1/η)/c⌉, T = ln(1/(2δ))/ε_ptr."""
    eps_ptr, eps_em = split * eps, (1 - split) * eps
    c = eps_em / 2
    log_eta = math.log(delta / (math.exp(eps_ptr) * (1 + math.exp(eps_em))))
    g0 = math.ceil(-log_eta / c)
    t = max(1, (m // 2 - g0 + 2) // 2)
    return c, log_eta, t, math.log(1 / (2 * delta)) / eps_ptr


@pytest.mark.parametrize(
    "m,eps,delta,split", [(2000, 1.0, 1e-6, 0.5), (500, 3.0, 1e-3, 0.25), (301, 8.0, 1e-9, 0.7)]
)
def test_release_runs_with_the_closed_form_constants(m, eps, delta, split):
    """What release() hands to the test and to the sampler: the exponential mechanism's
    factor c, ln η, the restriction depth t and the threshold T (a wrong c, η or t is
    invisible to the audit: see the "tukey" runner in dperm.audit)."""
    c, log_eta, t, thr = _closed_form_constants(m, eps, delta, split)
    models = np.random.default_rng(13).normal(size=(m, 2))
    with (
        mock.patch.object(T, "distance_to_unsafety", wraps=T.distance_to_unsafety) as dist,
        mock.patch.object(T, "_sample", wraps=T._sample) as samp,
    ):
        res = T.release(models, epsilon=eps, delta=delta, epsilon_split=split, random_state=0)
    assert res.diagnostics["ptr_passed"]
    _, t_d, c_d, log_eta_d = dist.call_args.args
    assert (t_d, c_d, log_eta_d) == (t, pytest.approx(c), pytest.approx(log_eta))
    assert samp.call_args.args[3:5] == (t, pytest.approx(c))
    d = res.diagnostics
    assert d["restricted_depth"] == t and d["ptr_threshold"] == pytest.approx(thr)
    assert "sampled_depth" not in d  # with θ it would name the changed model's side


def test_release_samples_the_exponential_mechanism_of_its_epsilon():
    """End to end: 1500 draws of release() at ε = 2, δ = 0.01 (c = 1/2, t = 44, m = 200,
    p = 1) against the exact law ∝ exp(c·T) on Y_t over the cells between the models
    (χ², p > 1e-4 fails a correct release with probability 1e-4).  The same draws
    reject the law of the classic bug c = ε_em (the sensitivity-1 exponential mechanism
    run without its factor ½): the test has the power to see it."""
    B = np.random.default_rng(21).normal(size=(200, 1))
    c, _, t, _ = _closed_form_constants(200, 2.0, 1e-2, 0.5)
    draws = np.array(
        [T.release(B, epsilon=2.0, delta=1e-2, random_state=s).theta[0] for s in range(1500)]
    )
    edges = np.unique(B[:, 0])
    depth = T.approximate_tukey_depth(B, ((edges[:-1] + edges[1:]) / 2)[:, None])
    counts = np.bincount(np.searchsorted(edges, draws) - 1, minlength=edges.size - 1)
    assert counts.sum() == draws.size and np.all(depth[counts > 0] >= t)

    def pvalue(factor):
        w = np.where(depth >= t, np.exp(factor * (depth - depth.max())) * np.diff(edges), 0.0)
        prob = w / w.sum()
        keep = prob * draws.size >= 5
        expected = prob[keep] / prob[keep].sum() * counts[keep].sum()
        tail_ok = counts[~keep].sum() <= max(30, 3 * prob[~keep].sum() * draws.size)
        return stats.chisquare(counts[keep], expected).pvalue if tail_ok else 0.0

    assert pvalue(c) > 1e-4
    assert pvalue(2 * c) < 1e-8


def test_unsafe_data_releases_bottom_and_the_delta_bound_holds():
    """Identical models: every depth region beyond 1 has volume 0, k* = −1, and the
    release probability ½e^{−ε_ptr(T+1)} is below δ."""
    models = np.zeros((400, 2))
    res = T.release(models, epsilon=1.0, delta=1e-5, random_state=0)
    assert res.diagnostics["distance_to_unsafety"] == -1
    assert not res.diagnostics["ptr_passed"] and np.all(res.theta == 0)
    thr = T.ptr_threshold(0.5, 1e-5)
    assert 0.5 * math.exp(-0.5 * (thr + 1)) < 1e-5


def test_event_and_budget_split():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(4000, 2))
    y = X @ [1.0, -2.0] + 0.1 * rng.normal(size=4000)
    res = T.fit(X, y, epsilon=2.0, delta=1e-6, epsilon_split=0.25, random_state=0)
    assert res.event == EpsilonDelta(2.0, 1e-6, neighbouring="replace-one")
    d = res.diagnostics
    assert d["epsilon_ptr"] == pytest.approx(0.5) and d["epsilon_em"] == pytest.approx(1.5)
    assert d["n_models"] == 1000 and d["rows_per_model"] == 4
    assert d["ptr_threshold"] == pytest.approx(math.log(1 / 2e-6) / 0.5)
    assert d["neighbouring"] == "replace-one"


# ------------------------------------------------------------------------ block models
def test_block_models_one_changed_record_changes_one_model():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 3))
    y = rng.normal(size=200)
    X2, y2 = X.copy(), y.copy()
    X2[17], y2[17] = 100.0, -50.0
    a = T.block_models(X, y, 20, np.random.default_rng(1))
    b = T.block_models(X2, y2, 20, np.random.default_rng(1))
    assert np.sum(np.any(a != b, axis=1)) == 1
    perm = np.random.default_rng(1).permutation(200)[:200].reshape(20, 10)
    idx = np.sort(perm[3])
    np.testing.assert_allclose(a[3], np.linalg.lstsq(X[idx], y[idx], rcond=None)[0])
    # rank-deficient blocks get the minimum-norm solution, sparse = dense
    Xr = np.column_stack([X[:, 0], X[:, 0]])
    c = T.block_models(Xr, y, 20, np.random.default_rng(1))
    np.testing.assert_allclose(c[:, 0], c[:, 1])
    np.testing.assert_allclose(
        T.block_models(sp.csr_matrix(X), y, 20, np.random.default_rng(1)), a, atol=1e-12
    )


def test_default_number_of_models_is_public():
    assert T.default_n_models(16512, 9) == 16512 // 18
    with pytest.raises(InvalidDataError, match="4 models"):
        T.default_n_models(20, 3)


def test_an_extreme_record_neither_raises_nor_warns():
    """Regression: one finite record (y = 1e306 among features of scale 10⁻³) overflowed
    its block's solution to NaN and fit() raised InvalidDataError (after RuntimeWarnings)
    on D but not on its neighbour — an observable difference with probability 1.  The
    block solutions are now mapped into [−MODEL_BOUND, MODEL_BOUND]^p, silently."""
    rng = np.random.default_rng(14)
    X = 1e-3 * rng.normal(size=(4000, 3))
    y = X @ [1.0, -2.0, 0.5] + 1e-4 * rng.normal(size=4000)
    y2 = y.copy()
    y2[0] = 1e306
    models = T.block_models(X, y2, 666, np.random.default_rng(1))
    assert np.all(np.abs(models) <= T.MODEL_BOUND)
    same = T.block_models(X, y, 666, np.random.default_rng(1))
    assert np.sum(np.any(models != same, axis=1)) == 1  # still one changed model
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for yy in (y, y2):
            res = T.fit(X, yy, epsilon=1.0, delta=1e-5, random_state=2)
            assert np.all(np.isfinite(res.theta))
        # huge finite models: the widths stay finite (no overflow in a uniform draw)
        B = np.zeros((400, 1))
        B[:150], B[150:300] = -1.7e308, 1.7e308
        B[300:] = rng.normal(size=(100, 1))
        with mock.patch.object(T, "ptr_threshold", lambda e, d: -np.inf):  # force a draw
            theta = T.release(B, epsilon=1.0, delta=1e-5, random_state=0).theta
    assert np.all(np.abs(theta) <= T.MODEL_BOUND)


def test_a_block_whose_svd_fails_gets_the_model_zero():
    """A LinAlgError of the batched SVD is not raised (it would depend on one block):
    the batch is redone block by block and only the failing block gets the model 0."""
    rng = np.random.default_rng(15)
    X, y = rng.normal(size=(200, 2)), rng.normal(size=200)
    y[7] = 123.0  # marks the block that "fails"
    honest = T.block_models(X, y, 20, np.random.default_rng(3))
    orig = T._min_norm_lstsq

    def failing(A, yb):
        if np.any(yb == 123.0):
            raise np.linalg.LinAlgError("SVD did not converge")
        return orig(A, yb)

    with mock.patch.object(T, "_min_norm_lstsq", failing):
        got = T.block_models(X, y, 20, np.random.default_rng(3))
    bad = np.any(got != honest, axis=1)
    assert bad.sum() == 1 and np.all(got[bad] == 0.0)


# ----------------------------------------------------------------------------- utility
def test_recovers_a_linear_model_without_any_bound():
    """Unbounded features and labels (scale 10³): no bound is needed."""
    rng = np.random.default_rng(8)
    X = 1000.0 * rng.normal(size=(20_000, 3))
    beta = np.array([2.0, -1.0, 0.5])
    y = X @ beta + 10.0 * rng.normal(size=20_000)
    res = T.fit(X, y, epsilon=1.0, delta=1e-8, random_state=0)
    assert res.diagnostics["ptr_passed"]
    np.testing.assert_allclose(res.theta, beta, atol=0.02)


def test_estimator_tukey_on_california(shared_data):
    from dperm import datasets

    ds = datasets.load("california", data_home=shared_data)
    r2 = [
        DPLinearRegression(
            mechanism="tukey",
            epsilon=10.0,
            data_norm=ds.row_norm_bound,
            label_bound=ds.label_bound,
            random_state=s,
        )
        .fit(ds.X_train, ds.y_train)
        .score(ds.X_test, ds.y_test)
        for s in range(3)
    ]
    assert np.median(r2) >= 0.6  # measured 0.68–0.69 (non-private 0.69)


def test_estimator_failed_test_warns_and_releases_the_zero_model():
    """A failed test (k* = −1: an unsafe dataset) releases ⊥ = the zero model, with a
    warning — never a non-private fallback."""
    rng = np.random.default_rng(9)
    X = rng.uniform(-0.5, 0.5, size=(4000, 2))
    y = np.clip(X @ [1.0, 1.0], -1, 1)
    with mock.patch.object(T, "distance_to_unsafety", lambda *a: -1):  # an unsafe dataset
        with pytest.warns(UserWarning, match="propose-test-release check failed"):
            est = DPLinearRegression(mechanism="tukey", epsilon=1.0, random_state=0).fit(X, y)
    assert np.all(est.coef_ == 0) and est.intercept_ == 0
    assert est.diagnostics_["ptr_passed"] is False
    assert est.epsilon_ == 1.0 and est.neighbouring_ == "replace-one"


def test_a_test_that_cannot_pass_is_refused_before_reading_the_data():
    """With few models the public bound on k* is below the threshold: the call is
    refused (InvalidPrivacyParameter) instead of spending ε on a near-certain ⊥."""
    m, c = 100, 0.25
    log_eta = math.log(1e-3) - 0.5 - math.log1p(math.exp(0.5))
    assert T.max_distance(m, c, log_eta) < T.ptr_threshold(0.5, 1e-3)
    with mock.patch.object(T, "block_models", side_effect=AssertionError("data read")):
        with pytest.raises(InvalidPrivacyParameter, match="cannot pass its test"):
            T.fit(np.ones((400, 2)), np.ones(400), epsilon=1.0, delta=1e-3, n_models=m)
    rng = np.random.default_rng(12)
    X = rng.uniform(-0.5, 0.5, size=(200, 2))
    with pytest.raises(InvalidPrivacyParameter, match="more rows"):
        DPLinearRegression(mechanism="tukey", epsilon=0.1).fit(X, X[:, 0])
    # and the bound holds: k* never exceeds it on random model sets
    for seed in range(5):
        B = np.sort(np.random.default_rng(seed).normal(size=(400, 2)), axis=0)
        _, v = T.log_depth_volumes(B)
        for c, le in ((0.25, math.log(1e-5)), (2.5, math.log(1e-5))):
            t = T.restriction_depth(400, c, le)
            assert T.distance_to_unsafety(v, t, c, le) <= T.max_distance(400, c, le)


def test_estimator_refuses_what_tukey_cannot_do():
    from dperm import DPLogisticRegression

    X = np.random.default_rng(10).uniform(-0.5, 0.5, size=(400, 2))
    y = X[:, 0]
    with pytest.raises(InvalidPrivacyParameter, match="alpha must be 0"):
        DPLinearRegression(mechanism="tukey", alpha=0.1).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="least squares only"):
        DPLogisticRegression(mechanism="tukey", classes=[-1.0, 1.0]).fit(X, np.sign(y))


# ---------------------------------------------------------------------------- bad input
def test_bad_input():
    rng = np.random.default_rng(11)
    X, y = rng.normal(size=(4000, 2)), rng.normal(size=4000)
    for eps in (0.0, -1.0, np.nan, np.inf, "1"):
        with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
            T.fit(X, y, epsilon=eps, delta=1e-5)
    for delta in (0.0, 1.0, np.nan, -0.1):
        with pytest.raises(InvalidPrivacyParameter, match="delta"):
            T.fit(X, y, epsilon=1.0, delta=delta)
    for split in (0.0, 1.0, 1.5, np.nan):
        with pytest.raises(InvalidPrivacyParameter, match="epsilon_split"):
            T.fit(X, y, epsilon=1.0, delta=1e-5, epsilon_split=split)
    for m in (3, 4001, 0, 2.5):
        with pytest.raises(InvalidPrivacyParameter, match="n_models"):
            T.fit(X, y, epsilon=1.0, delta=1e-5, n_models=m)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InvalidDataError):
        T.fit(Xn, y, epsilon=1.0, delta=1e-5)
    with pytest.raises(InvalidDataError):
        T.fit(X, y[:-1], epsilon=1.0, delta=1e-5)
    with pytest.raises(InvalidDataError):
        T.fit(X[:10], y[:10], epsilon=1.0, delta=1e-5)  # too few rows for 4 models
    with pytest.raises(InvalidDataError):
        T.fit(X, np.where(y > 0, "a", "b"), epsilon=1.0, delta=1e-5)
    # integer targets are numeric targets
    T.fit(X, (y > 0).astype(np.int64), epsilon=1.0, delta=1e-5, random_state=0)
    for bad in (np.zeros((3, 2)), np.full((6, 2), np.inf), np.zeros(6)):
        with pytest.raises(InvalidDataError, match="models"):
            T.release(bad, epsilon=1.0, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.fit(X, y, epsilon=1.0, delta=1e-5, random_state=0)  # no warning at the function level
