"""The exact-likelihood-ratio audit of DPLinearRegression()'s default path
(dperm.audit.objective_llr: Huber objective perturbation, the pushed pair).

* the statistic is the exact privacy loss of the released θ: it satisfies the change of
  measure E_D[e^LLR] = 1 = E_D′[e^−LLR], and its law on the real code path matches an
  independent one-dimensional computation of the mechanism on one block;
* the exact privacy profile of the pair spends more than the noise part of the
  calibration (the Jacobian part is realised) and stays within the claim;
* the honest runner is not refuted at ε = 0.5, 1, 4 (its mutant is refuted in
  test_audit_mutants.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from dperm.audit import audit, get_runner
from dperm.audit.objective_llr import (
    BLOCKS,
    _run_estimator_auto_regression_llr,
    block_privacy_profile,
    canary_rows,
    profile_epsilon,
    pushed_pair,
)
from dperm.estimators import DPLinearRegression

N = get_runner("estimator-auto-regression").n  # its pair: 5 blocks of a canary, 14 pushers


def _diagnostics(epsilon, pair):
    est = DPLinearRegression(epsilon=epsilon, delta=1e-5, random_state=0).fit(pair.X, pair.y)
    return est.diagnostics_


def _exact_law(epsilon, pair):
    dg = _diagnostics(epsilon, pair)
    return dg, block_privacy_profile(
        data_norm=dg["data_norm"],
        lipschitz=dg["lipschitz"],
        l2_total=dg["l2_total"],
        noise_scale=dg["noise_scale"],
        n=N,
        pushers=N // BLOCKS - 1,
    )


def test_pair_geometry():
    p = pushed_pair(N)
    Xa = np.hstack([p.X, np.full((N, 1), 0.5)])  # the estimators' implicit intercept column
    c = canary_rows(N)
    assert np.allclose(Xa[c] @ Xa[c].T, 1.25 * np.eye(BLOCKS))  # orthogonal, at the bound
    assert np.linalg.norm(p.X, axis=1).max() <= 1.0 + 1e-12
    assert np.flatnonzero(p.y != p.y_prime).tolist() == c.tolist()
    assert np.all(p.y[c] == -1.0) and np.all(p.y_prime[c] == 1.0)
    blocks = np.split(np.arange(N), BLOCKS)
    for j, rows in enumerate(blocks):
        assert np.allclose(p.X[rows], p.X[c[j]])  # pushers are copies of the canary row
    assert np.all(np.delete(p.y, c) == 1.0)
    pinned = pushed_pair(N, pusher_target=0.0)
    assert np.all(np.delete(pinned.y, c) == 0.0)
    with pytest.raises(ValueError, match="multiple"):
        pushed_pair(57)


def _scores(X, y, epsilon, runs, seed):
    return np.concatenate(
        [
            _run_estimator_auto_regression_llr(X, y, epsilon, 1e-5, np.random.default_rng(s))
            for s in range(seed, seed + runs)
        ]
    )


def test_llr_is_the_exact_privacy_loss_of_the_release():
    """Two independent computations agree: the LLR recomputed from the released θ of the
    real fit (all five dimensions, the library's loss derivatives, σ and Λ from the
    diagnostics) and the one-dimensional law of a block (block_privacy_profile).  The
    change of measure E_D[e^LLR] = 1 holds for the true likelihood ratio (a wrong σ or
    sign breaks it); the Jacobian term is what puts mass below −0.5 (the noise term
    alone stays above −0.1 on this pair), which the comparison with the exact law
    checks."""
    p = pushed_pair(N)
    s0 = _scores(p.X, p.y, 1.0, 300, 0)
    s1 = _scores(p.X_prime, p.y_prime, 1.0, 300, 10_000)
    for s, sign in ((s0, 1.0), (s1, -1.0)):
        w = np.exp(sign * s)
        assert abs(w.mean() - 1.0) < 4.0 * w.std() / np.sqrt(w.size)
    _, (llr, w_d, w_p) = _exact_law(1.0, p)
    for s, w in ((s0, w_d), (s1, w_p)):
        for level in (-0.5, -0.2, 0.0, 0.05):
            exact = float(w[llr < level].sum())
            se = np.sqrt(exact * (1.0 - exact) / s.size)
            assert abs(np.mean(s < level) - exact) < 4.0 * se + 1e-3, (level, exact)
        assert abs(s.mean() - float(np.sum(llr * w))) < 4.0 * s.std() / np.sqrt(s.size)


#: the pair's exact ε(10⁻⁵) less a margin: a weaker pair (the m = 10 pair of n = 55 has
#: 0.233 / 0.523 at ε = 0.5 / 1) or a calibration that stops realising its Jacobian part
#: fails here
_POWER_FLOOR = {0.5: 0.24, 1.0: 0.56, 4.0: 2.85}


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_exact_profile_spends_more_than_the_noise_part_and_keeps_the_claim(epsilon):
    """On this pair the mechanism's exact ε(10⁻⁵) exceeds the Jacobian part ε_J — it is
    realised at the same θ as the noise term — spends a good part of the claim, and
    stays within it.  Under the Huber margin prior 10·h of issue #32 (ε_J = 0.15 /
    0.30 / 0.69): exact 0.250 / 0.584 / 2.956 at ε = 0.5 / 1 / 4 with m = 14 pushers,
    the m that maximises the expected Clopper–Pearson bound at ε = 1 (docs/auditing.md)."""
    p = pushed_pair(N)
    dg, (llr, w_d, w_p) = _exact_law(epsilon, p)
    assert abs(w_d.sum() - 1.0) < 1e-4 and abs(w_p.sum() - 1.0) < 1e-4
    eps_exact = profile_epsilon(llr, w_d, w_p, 1e-5)
    assert eps_exact <= epsilon
    assert eps_exact > dg["epsilon_jacobian"]
    assert eps_exact > _POWER_FLOOR[epsilon]  # the pair's power
    # the largest privacy loss is the pointwise supremum of the calibration's two terms,
    # approached where the canary's D-residual is at h: ≥ 95 % of ε_J + the noise term
    assert np.max(-llr[w_d > 1e-12]) > 0.95 * dg["epsilon_jacobian"]


@pytest.mark.parametrize(("epsilon", "runs"), [(0.5, 150), (1.0, 200), (4.0, 150)])
def test_honest_runner_is_not_refuted(epsilon, runs):
    r = get_runner("estimator-auto-regression")
    assert r.method == "clopper-pearson"  # the LLR is not Gaussian: no GDP estimate
    res = audit(r.name, epsilon=epsilon, runs=runs, random_state=11, n_jobs=2)
    assert res.method == "clopper-pearson"
    assert not res.violated and res.epsilon_lower_bound <= epsilon, res.summary()
