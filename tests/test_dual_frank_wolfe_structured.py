"""K–D Algorithm 2 as published (Laplace report-noisy-max), Theorem 4's step rule,
and the structured vertex sets (overlapping groups, many groups, chain TV)."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dperm.algorithms import dual_frank_wolfe as dfw
from dperm.exceptions import InvalidPrivacyParameter
from dperm.losses import Logistic
from dperm.mechanisms.exponential import exponential_mechanism_log_probabilities
from dperm.norms import ChainTVNorm, GroupLinfNorm, L1Norm, gaussian_width


def _laplace_diff_sf(t, b):
    """P(N₁ − N₂ > t), N ~ Lap(b) iid (closed form of the Laplace difference); by
    symmetry 1 − sf(t) = sf(−t), used below instead of a cancelling subtraction."""
    a = np.abs(t)
    sf_pos = 0.5 * np.exp(-a / b) * (1 + a / (2 * b))
    return np.where(t >= 0, sf_pos, 1 - sf_pos)


def test_laplace_noisy_max_scale_is_eps0_dp_and_halving_it_is_not():
    # two candidates, scores moving in opposite directions by Δ (the worst case the
    # non-monotone scale 2Δ/ε₀ pays for): P(pick 1) = P(N₁ − N₂ > u₂ − u₁)
    eps0, sens = 0.7, 1.0
    t = np.linspace(-600, 600, 24001)  # the ratio tends to e^{ε₀} in the tails

    def worst_log_ratio(b):
        # u₂ − u₁ = t on D; on D′ u₁ − Δ, u₂ + Δ.  P(pick 1) = sf(t), P(pick 2) = sf(−t)
        one = np.log(_laplace_diff_sf(t, b) / _laplace_diff_sf(t + 2 * sens, b))
        two = np.log(_laplace_diff_sf(-t, b) / _laplace_diff_sf(-t - 2 * sens, b))
        return float(np.max(np.abs(np.concatenate([one, two]))))

    assert worst_log_ratio(2 * sens / eps0) <= eps0 + 1e-9
    assert worst_log_ratio(2 * sens / eps0) >= 0.98 * eps0  # the scale spends ε₀
    assert worst_log_ratio(sens / eps0) > 1.5 * eps0  # mutation: the monotone scale


@pytest.mark.parametrize("kind", ["exponential", "laplace"])
def test_selector_law_matches_independent_computation(kind):
    # ℓ1 with d = 2: 4 tuples (±1, ±1); exponential: per-block softmax (McSherry–Talwar);
    # Laplace: P(argmax) by Monte Carlo on the enumerated scores, independent of the
    # selector's tuple bookkeeping
    rng = np.random.default_rng(0)
    blocks = dfw.dual_vertex_blocks(L1Norm(2))
    sel = dfw._Selector(blocks, 2, 1.0, kind)
    theta, eps0, sens = np.array([0.8, -0.3]), 1.0, 0.5
    draws = np.array([sel(theta, eps0, sens, rng) for _ in range(4000)])
    tuples = np.array(list(itertools.product([1.0, -1.0], repeat=2)))
    counts = np.array([np.sum(np.all(draws == v, axis=1)) for v in tuples])
    assert counts.sum() == 4000
    if kind == "exponential":
        p = np.ones(4)
        for j in range(2):
            lp = exponential_mechanism_log_probabilities(
                np.array([1.0, -1.0]) * theta[j], epsilon=eps0, sensitivity=sens
            )
            p *= np.exp(lp[(tuples[:, j] < 0).astype(int)])
    else:
        scores = tuples @ theta
        noise = np.random.default_rng(1).laplace(scale=2 * sens / eps0, size=(200_000, 4))
        p = np.bincount(np.argmax(scores + noise, axis=1), minlength=4) / 200_000
    assert stats.chisquare(counts, 4000 * p / p.sum()).pvalue > 1e-3


def test_laplace_refuses_huge_vertex_sets():
    with pytest.raises(InvalidPrivacyParameter, match="exponential"):
        dfw._Selector(dfw.dual_vertex_blocks(L1Norm(30)), 30, 1.0, "laplace")
    with pytest.raises(InvalidPrivacyParameter, match="selection"):
        X = np.eye(3)
        dfw.fit(
            Logistic(), X, np.array([1.0, -1, 1]), norm=L1Norm(3), epsilon=1.0,
            data_norm=1.0, alpha=0.1, lam=0.1, selection="gumbel",
        )  # fmt: skip


def _brute_radius(blocks, d):
    best = 0.0
    for pick in itertools.product(*[range(V.shape[0]) for _, V in blocks]):
        v = np.zeros(d)
        for (idx, V), j in zip(blocks, pick, strict=True):
            v[idx] += V[j]
        best = max(best, float(np.linalg.norm(v)))
    return best


@pytest.mark.parametrize(
    "norm",
    [ChainTVNorm(5, mu=0.5), GroupLinfNorm([[0, 1, 2], [2, 3], [1, 3, 4]], 5), L1Norm(4)],
)
def test_structured_vertex_sets_give_the_exact_lmo_and_a_valid_radius(norm):
    blocks = dfw.dual_vertex_blocks(norm)
    d = norm.d
    rho, brute = dfw.vertex_radius(blocks, d), _brute_radius(blocks, d)
    assert rho >= brute - 1e-12  # an upper bound (privacy) ...
    if isinstance(norm, ChainTVNorm | L1Norm):
        assert rho == pytest.approx(brute)  # ... exact for the chain and disjoint blocks
    # the noiseless selection (ε₀ → ∞) is the exact LMO: ⟨v, θ⟩ = Ω(θ) over the dual ball
    rng = np.random.default_rng(3)
    sel = dfw._Selector(blocks, d, 1.0, "exponential")
    for _ in range(5):
        theta = rng.normal(size=d)
        v = sel(theta, 1e12, 1.0, rng)
        assert float(v @ theta) == pytest.approx(norm.norm(theta), rel=1e-9)


def test_theorem4_rule_is_the_default_and_many_groups_run():
    rng = np.random.default_rng(0)
    n, d, k = 400, 300, 100  # 100 overlapping groups of 5 (stride 3)
    X = rng.normal(size=(n, d)) / (1.5 * math.sqrt(d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X[:, :5].sum(axis=1) > 0, 1.0, -1.0)
    groups = [list(range(3 * g, min(3 * g + 5, d))) for g in range(k)]
    norm = GroupLinfNorm(groups, d)
    kw = dict(norm=norm, data_norm=1.0, alpha=0.05, lam=0.002, denoise="none")
    res = dfw.fit(Logistic(), X, y, epsilon=1.0, delta=1e-6, random_state=0, **kw)
    dg = res.diagnostics
    w = gaussian_width(norm, ball="dual", n_samples=2000, random_state=0).value
    expected = math.ceil(
        (4 * 0.002 * dg["vertex_radius"] ** 2 * n * 0.2 / (Logistic().lipschitz(1.0) * w))
        ** (2 / 3)
    )
    assert dg["n_steps"] == min(dfw.MAX_STEPS, expected)
    assert res.event.events[0].count == dg["n_steps"]
    assert np.all(np.isfinite(res.theta))
