"""Adaptive clipping (Andrew, Thakkar, McMahan, Ramaswamy, NeurIPS 2021) on DP-SGD.

The pair of releases of one step — the noisy clipped sum and the noisy count of unclipped
examples — is one Gaussian mechanism of multiplier z with z⁻² = σ_Δ⁻² + (2σ_b/k)⁻²
(``dperm.algorithms.adaptive_clipping``): the run's event is the fixed-clipping event,
checked here against dp-accounting's PLD built from the two noise levels alone (under
replace-one and add/remove), the calibration still spends its ε, the count and the sum
are those of a brute-force per-example computation, the update moves the norm to the
target quantile, and the released noise has the stated variances.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from dperm import DPLogisticRegression
from dperm.accounting import PoissonSampled, SelfComposed
from dperm.accounting.events import Gaussian
from dperm.accounting.registry import epsilon_spent
from dperm.algorithms import adaptive_clipping as ac
from dperm.algorithms import dp_sgd
from dperm.design import as_design
from dperm.exceptions import InvalidPrivacyParameter
from dperm.losses import Logistic, Softmax


def _data(seed=0, n=3000, d=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / 3.0
    X *= 0.95 / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # ‖x‖ < 1
    y = np.where(X @ rng.normal(size=d) + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


# ----------------------------------------------------------------- the noise split
@pytest.mark.parametrize("k", [1.0, 2.0])
@pytest.mark.parametrize("z", [0.3, 1.0, 7.5])
@pytest.mark.parametrize("f", [0.01, 0.05, 0.5])
def test_the_split_is_one_gaussian_of_multiplier_z(k, z, f):
    """σ_Δ⁻² + (2σ_b/k)⁻² = z⁻², the count taking the share f of z⁻²."""
    sigma, count = ac.noise_split(z, f, k)
    assert sigma**-2 + (2.0 * count / k) ** -2 == pytest.approx(z**-2, rel=1e-12)
    assert (2.0 * count / k) ** -2 == pytest.approx(f * z**-2, rel=1e-12)


@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
def test_the_joint_release_is_accounted_as_dp_accounting_says(relation):
    """An independent computation: dp-accounting's PLD of T Poisson-sampled steps of the
    Gaussian mechanism on the joint vector (sum/C, centred count/½): every record's pair
    lies in the unit ball, so the multiplier in dp-accounting's convention (noise over the
    per-record norm) is m with m⁻² = (σ_v/C)⁻² + (σ_b/½)⁻² — built here from the two noise
    levels only.  dperm's event (the fixed-clipping event at z) gives the same ε."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant

    k = 2.0 if relation == "replace-one" else 1.0
    z, f, q, T, delta = 1.3, 0.1, 0.02, 400, 1e-6
    sigma, count = ac.noise_split(z, f, k)
    # dp-accounting: the noise on the sum in units of C is σ_Δ·k (replace-one: its
    # REPLACE_ONE pair compares ±1 mixtures, records 2 apart — our 2C)
    m = ((sigma * k) ** -2 + (count / 0.5) ** -2) ** -0.5
    rel = {"replace-one": NeighboringRelation.REPLACE_ONE}.get(
        relation, NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    acc = pld_privacy_accountant.PLDAccountant(rel)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(m)), T)
    ours = SelfComposed(PoissonSampled(q, Gaussian(z, neighbouring=relation)), T)
    assert epsilon_spent(ours, delta, "pld") == pytest.approx(acc.get_epsilon(delta), rel=2e-3)
    # the paper's formula with the replace-one noise would undercount the count's cost
    if relation == "replace-one":
        naive = (sigma**-2 + (2.0 * count) ** -2) ** -0.5  # Theorem 1 read for replace-one
        assert naive > z * 1.02


def test_the_run_spends_its_epsilon_with_adaptive_clipping():
    """The event is the fixed-clipping event: the calibration spends 99.5–100 % of ε,
    and dp-accounting's ε of the two releases (built from the diagnostics) agrees."""
    X, y = _data()
    kw = dict(epsilon=1.0, delta=1e-6, data_norm=1.5, neighbouring="replace-one", random_state=0)
    fixed = dp_sgd.fit(Logistic(), X, y, batch_size=150, epochs=3, **kw)
    adapt = dp_sgd.fit(
        Logistic(), X, y, batch_size=150, epochs=3, target_unclipped_quantile=0.5, **kw
    )
    assert adapt.event == fixed.event
    d = adapt.diagnostics
    assert d["clipping"] == "adaptive" and 0.995 <= d["epsilon_spent"] <= 1.0
    sigma = d["vector_noise_per_clip"] / 2.0
    z = (sigma**-2 + d["count_noise_std"] ** -2) ** -0.5  # replace-one: k = 2
    assert z == pytest.approx(d["noise_multiplier"], rel=1e-9)


# ----------------------------------------------------------------- the count and the sum
@pytest.mark.parametrize("C", [0.05, 0.2, 0.6, 5.0])
def test_count_and_sum_are_the_per_example_ones(C):
    """GLM and softmax: the clipped sum and Σ(1[‖gᵢ‖ ≤ C] − ½) of a batch, against the
    per-example gradients built one by one."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 4))
    X *= rng.uniform(0.1, 1.0, size=(80, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    D = as_design(X, 1.0, intercept_scaling=0.5)
    Xe = D.to_dense()
    idx = np.sort(rng.choice(80, 30, replace=False))
    y = np.where(rng.random(80) > 0.5, 1.0, -1.0)
    theta = rng.normal(size=5)
    g, centred = ac.BatchOracle(Logistic(), D, y, C).clipped_sum_count(theta, idx, C)
    s = Logistic().derivative(Xe[idx] @ theta, y[idx])
    G = s[:, None] * Xe[idx]
    norms = np.linalg.norm(G, axis=1)
    want = (G * np.minimum(1.0, C / norms)[:, None]).sum(axis=0)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
    assert centred == np.count_nonzero(norms <= C) - 15.0
    labels = rng.integers(0, 3, 80)
    W = rng.normal(size=(5, 3))
    g, centred = ac.BatchOracle(Softmax(3), D, labels, C).clipped_sum_count(W, idx, C)
    R = Softmax(3).residual_from_scores(Xe[idx] @ W, labels[idx])
    G = Xe[idx][:, :, None] * R[:, None, :]
    norms = np.linalg.norm(G.reshape(30, -1), axis=1)
    want = (G * np.minimum(1.0, C / norms)[:, None, None]).sum(axis=0)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
    assert centred == np.count_nonzero(norms <= C) - 15.0


class _FixedNorms:
    """An oracle whose batch's per-example gradient norms are ``norms`` (and whose sum is
    zero): the count of :meth:`clipped_sum_count` at any C."""

    def __init__(self, norms):
        self.norms = np.asarray(norms)

    def clipped_sum_count(self, theta, idx, C):
        return np.zeros(2), float(np.count_nonzero(self.norms <= C)) - 0.5 * self.norms.size


def test_the_norm_moves_to_the_target_quantile():
    """Noiseless, the geometric update settles at the γ-quantile of the gradient norms
    (Andrew et al. 2021, Algorithm 1), from above and from below, and never above the
    ceiling."""
    norms = np.random.default_rng(2).lognormal(size=2000)
    for gamma in (0.3, 0.5, 0.9):
        for start in (0.01, 100.0):
            state = ac.AdaptiveClipping(start, gamma, 0.2, 0.0, 0.0, float(norms.size))
            oracle = _FixedNorms(norms)
            for _ in range(600):
                state.release(oracle, None, None, np.random.default_rng(0))
            target = np.quantile(norms, gamma)
            assert state.clipping_norm == pytest.approx(target, rel=0.12)
    capped = ac.AdaptiveClipping(1.0, 0.9, 0.2, 0.0, 0.0, 2000.0, max_clipping_norm=1.0)
    for _ in range(100):
        capped.release(_FixedNorms(norms), None, None, np.random.default_rng(0))
    assert max(capped.norms) <= 1.0 and capped.clipping_norm <= 1.0


def test_the_released_noise_has_the_stated_variances():
    """The noise on the sum has std σ_Δ·k·Cₜ per coordinate and the count's moves Cₜ by
    exp(−η(b̃ − γ)) with b̃ = ½ + N(0, σ_b²)/m (clipped to [0, 1]): both recovered from
    the releases of a zero oracle, with tolerances from the sample size."""
    m, sigma_b, vec = 400.0, 20.0, 0.7
    state = ac.AdaptiveClipping(1.0, 0.5, 0.2, vec, sigma_b, m)
    rng = np.random.default_rng(3)
    oracle = _FixedNorms(np.zeros(0))
    sums, steps = [], 4000
    for _ in range(steps):
        C = state.clipping_norm
        sums.append(state.release(oracle, None, None, rng) / (vec * C))
    z = np.concatenate(sums)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    logs = np.diff(np.log(state.norms))
    fraction = 0.5 - logs / 0.2  # b̃ − γ with γ = 0.5
    noise = (fraction - 0.5) * m
    assert np.std(noise) == pytest.approx(sigma_b, rel=5.0 / math.sqrt(steps))


# ----------------------------------------------------------------- the public rule
def test_informative_switches_adaptive_clipping_off_where_the_count_is_noise():
    X, y = _data(n=600)
    kw = dict(epsilon=0.1, delta=1e-6, data_norm=1.5, neighbouring="replace-one")
    res = dp_sgd.fit(Logistic(), X, y, batch_size=60, epochs=2, target_unclipped_quantile=0.9, **kw)
    assert res.diagnostics["clipping"] == "fixed"
    assert "off" in res.diagnostics["adaptive_clipping"]
    # an explicit share keeps it on: the user's choice
    res = dp_sgd.fit(
        Logistic(), X, y, batch_size=60, epochs=2, target_unclipped_quantile=0.9,
        count_noise_share=0.1, random_state=0, **kw,
    )  # fmt: skip
    assert res.diagnostics["clipping"] == "adaptive"
    z, m = res.diagnostics["noise_multiplier"], res.diagnostics["normalizer"]
    assert not ac.informative(z, m, 2.0)
    assert ac.informative(0.5, 1000.0, 2.0)


def test_the_default_estimator_clips_adaptively_below_its_rule():
    """DPLogisticRegression() on enough rows: adaptive clipping from the rule's C, every
    norm at or below it, the same event as with a fixed C."""
    X, y = _data(n=6000)
    clf = DPLogisticRegression(epsilon=2.0, classes=[-1, 1], random_state=0).fit(X, y)
    d = clf.diagnostics_
    assert clf.mechanism_ == "dp-sgd" and d["clipping"] == "adaptive"
    assert d["target_unclipped_quantile"] == 0.9
    assert np.all(d["clipping_norms"] <= d["clipping_norm"] * (1 + 1e-12))
    assert d["max_clipping_norm"] == pytest.approx(d["clipping_norm"])
    fixed = DPLogisticRegression(
        epsilon=2.0, classes=[-1, 1], random_state=0, clipping_norm=d["clipping_norm"]
    ).fit(X, y)
    assert fixed.diagnostics_["clipping"] == "fixed"
    assert fixed.dp_event_ == clf.dp_event_
    assert clf.score(X, y) > 0.85  # the noise-free optimum: ≈ 0.95


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("target_unclipped_quantile", 0.0),
        ("target_unclipped_quantile", 1.0),
        ("target_unclipped_quantile", float("nan")),
        ("clipping_learning_rate", 0.0),
        ("count_noise_share", 1.0),
        ("max_clipping_norm", -1.0),
    ],
)
def test_bad_settings_are_refused_by_name(option, value):
    X, y = _data(n=200)
    settings = {"target_unclipped_quantile": 0.5, option: value}
    with pytest.raises(InvalidPrivacyParameter, match=option), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dp_sgd.fit(
            Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.5,
            neighbouring="replace-one", batch_size=20, epochs=1, **settings,
        )  # fmt: skip
